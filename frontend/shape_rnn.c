/* shape_rnn.c - shape rules of the recurrent ops RNN, GRU, LSTM (ir/ops/nn.def).
 *
 * Inputs X, W, R, B, sequence_lens, initial_h (and initial_c, P for LSTM):
 *   X [seq, batch, input]          (layout 1: [batch, seq, input])
 *   W [num_dir, gates * hidden, input], R [num_dir, gates * hidden, hidden]
 * Outputs:
 *   Y [seq, num_dir, batch, hidden] (layout 1: [batch, seq, num_dir, hidden])
 *   Y_h, Y_c [num_dir, batch, hidden] (layout 1: [batch, num_dir, hidden])
 */
#include <string.h>

#include "shape_nn.h"

static int rnn_rule(mp_graph *g, mp_node *n, int gates, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *w = mp_in(g, n, 1), *r = mp_in(g, n, 2);
    if (!x || !w || !r) return mp_fail(err, "missing input %s", !x ? "X" : !w ? "W" : "R");
    if (nn_check_rank(x, 3, "X", err) || nn_check_rank(w, 3, "W", err) || nn_check_rank(r, 3, "R", err)) return -1;

    const char *dir = mp_attr_str(n, "direction", "forward");
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return mp_fail(err, "direction '%s' is not one of forward, reverse, bidirectional", dir);
    mp_dim ndir = mp_dim_of(strcmp(dir, "bidirectional") ? 1 : 2);
    if (w->rank == 3 && nn_check_dim(g, w->dims[0], ndir, "W's num_directions", err)) return -1;
    if (r->rank == 3 && nn_check_dim(g, r->dims[0], ndir, "R's num_directions", err)) return -1;

    /* hidden size: the attribute, else R's last dim, else W's gate rows / gates */
    int64_t hs = mp_attr_int(n, "hidden_size", -1);
    mp_dim hidden = hs >= 0 ? mp_dim_of(hs) : MP_DIM_UNKNOWN;
    if (hs == 0 || hs < -1) return mp_fail(err, "hidden_size is %lld; it must be positive", (long long)hs);
    if (r->rank == 3) {
        if (nn_check_dim(g, r->dims[2], hidden, "R's hidden size", err)) return -1;
        hidden = nn_dim_merge(hidden, r->dims[2]);
    }
    if (w->rank == 3 && w->dims[1].v >= 0) {
        if (w->dims[1].v % gates)
            return mp_fail(err, "W has %lld rows, not a multiple of the %d gates", (long long)w->dims[1].v, gates);
        mp_dim h = mp_dim_of(w->dims[1].v / gates);
        if (nn_check_dim(g, h, hidden, "W's rows / gates (hidden size)", err)) return -1;
        hidden = nn_dim_merge(hidden, h);
    }

    int64_t layout = nn_opset(g, n) >= 14 ? mp_attr_int(n, "layout", 0) : 0;
    if (layout != 0 && layout != 1) return mp_fail(err, "layout is %lld; expected 0 or 1", (long long)layout);
    mp_dim seq = MP_DIM_UNKNOWN, batch = MP_DIM_UNKNOWN;
    if (x->rank == 3) {
        seq = x->dims[layout ? 1 : 0];
        batch = x->dims[layout ? 0 : 1];
        if (w->rank == 3 && nn_check_dim(g, w->dims[2], x->dims[2], "W's input size", err)) return -1;
    }
    mp_dim y[4], yh[3];
    if (layout) {
        y[0] = batch, y[1] = seq, y[2] = ndir, y[3] = hidden;
        yh[0] = batch, yh[1] = ndir, yh[2] = hidden;
    } else {
        y[0] = seq, y[1] = ndir, y[2] = batch, y[3] = hidden;
        yh[0] = ndir, yh[1] = batch, yh[2] = hidden;
    }
    mp_set_out(g, n, 0, x->dtype, 4, y);
    mp_set_out(g, n, 1, x->dtype, 3, yh);
    return mp_set_out(g, n, 2, x->dtype, 3, yh); /* LSTM's Y_c */
}

int shape_RNN(mp_graph *g, mp_node *n, mp_err *err) { return rnn_rule(g, n, 1, err); }
int shape_GRU(mp_graph *g, mp_node *n, mp_err *err) { return rnn_rule(g, n, 3, err); }
int shape_LSTM(mp_graph *g, mp_node *n, mp_err *err) { return rnn_rule(g, n, 4, err); }
