/* shape_train.c - shape rules of the training ops (ir/ops/nn.def): ONNX's
 * ai.onnx.preview.training optimizers and Gradient, and the com.microsoft
 * (onnxruntime contrib) ops that on-device-training and transformer exports use. */
#include <string.h>

#include "shape_nn.h"

/* Output i copies input j's kind, type and shape (a no-op when either is omitted). */
static void copy_in_to_out(mp_graph *g, const mp_node *n, int j, int i)
{
    const mp_value *in = mp_in(g, n, j);
    mp_value *out = mp_out(g, n, i);
    if (!in || !out) return;
    mp_set_out_like(g, n, i, in->dtype, in);
    out->kind = in->kind;
}

/* ---- ai.onnx.preview.training ------------------------------------------------ */

/* Inputs R, T, then ngroups groups of n tensors each (X1..Xn, G1..Gn, ...);
 * output group k copies input group out_groups[k]. */
static int optimizer_rule(mp_graph *g, mp_node *n, int ngroups, const int *out_groups, int nout_groups, mp_err *err)
{
    int nt = n->nin - 2;
    if (nt <= 0 || nt % ngroups)
        return mp_fail(err, "expected R, T and %d groups of equal size, got %d inputs", ngroups, n->nin);
    int per = nt / ngroups;
    if (n->nout > per * nout_groups)
        return mp_fail(err, "has %d outputs but optimizes %d tensors into at most %d", n->nout, per, per * nout_groups);
    for (int i = 0; i < per; i++) {
        const mp_value *x = mp_in(g, n, 2 + i), *gr = mp_in(g, n, 2 + per + i);
        if (x && gr && x->rank >= 0 && gr->rank >= 0) {
            if (x->rank != gr->rank)
                return mp_fail(err, "tensor %d has rank %d but its gradient rank %d", i, x->rank, gr->rank);
            for (int d = 0; d < x->rank; d++)
                if (nn_check_dim(g, gr->dims[d], x->dims[d], "a gradient dim", err)) return -1;
        }
    }
    for (int k = 0; k < nout_groups; k++)
        for (int i = 0; i < per; i++) copy_in_to_out(g, n, 2 + out_groups[k] * per + i, k * per + i);
    return 0;
}

/* R, T, X.., G.., H.. -> X_new.., H_new.. */
int shape_Adagrad(mp_graph *g, mp_node *n, mp_err *err) { return optimizer_rule(g, n, 3, (const int[]){0, 2}, 2, err); }
/* R, T, X.., G.., V.., H.. -> X_new.., V_new.., H_new.. */
int shape_Adam(mp_graph *g, mp_node *n, mp_err *err) { return optimizer_rule(g, n, 4, (const int[]){0, 2, 3}, 3, err); }
/* R, T, X.., G.., V.. -> X_new.., V_new.. */
int shape_Momentum(mp_graph *g, mp_node *n, mp_err *err)
{
    return optimizer_rule(g, n, 3, (const int[]){0, 2}, 2, err);
}

/* Output i is d y / d xs[i]: shaped like the value named xs[i]. */
int shape_Gradient(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_attr *xs = mp_node_attr(n, "xs");
    if (!xs || xs->type != MP_ATTR_STRINGS)
        return mp_fail(err, "attribute 'xs' (the differentiated names) is required");
    if (!mp_attr_str(n, "y", NULL)) return mp_fail(err, "attribute 'y' is required");
    if (xs->n != n->nout) return mp_fail(err, "xs names %d tensors but the node has %d outputs", xs->n, n->nout);
    for (int i = 0; i < xs->n; i++) {
        int32_t id = mp_graph_find(g, xs->strings[i]);
        if (id < 0) return mp_fail(err, "xs[%d] '%s' names no value in the graph", i, xs->strings[i]);
        const mp_value *x = &g->values[id];
        mp_set_out_like(g, n, i, x->dtype, x);
    }
    return 0;
}

/* ---- com.microsoft training ops --------------------------------------------- */

/* lr, step, weights, gradients, momentums_1, momentums_2, update_signal ->
 * updated_flag (step's int64), updated weights and moments (sequences). */
int shape_MsAdamWOptimizer(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin < 6)
        return mp_fail(err, "expected 6 or 7 inputs (lr, step, weights, gradients, m1, m2), got %d", n->nin);
    const mp_value *step = mp_in(g, n, 1);
    if (!step) return mp_fail(err, "missing input step");
    mp_set_out_like(g, n, 0, step->dtype, step);
    copy_in_to_out(g, n, 2, 1);
    copy_in_to_out(g, n, 4, 2);
    copy_in_to_out(g, n, 5, 3);
    return 0;
}

/* accumulation_buffer, value, overwrite_flag -> updated_flag bool[1], buffer_out like the buffer */
int shape_MsInPlaceAccumulatorV2(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *buf = mp_in(g, n, 0), *v = mp_in(g, n, 1);
    if (!buf || !v) return mp_fail(err, "missing input %s", !buf ? "accumulation_buffer" : "value");
    if (buf->rank >= 0 && v->rank >= 0) {
        if (buf->rank != v->rank) return mp_fail(err, "buffer has rank %d but value rank %d", buf->rank, v->rank);
        for (int d = 0; d < buf->rank; d++)
            if (nn_check_dim(g, v->dims[d], buf->dims[d], "a value dim", err)) return -1;
    }
    mp_dim one = mp_dim_of(1);
    mp_set_out(g, n, 0, MP_BOOL, 1, &one);
    copy_in_to_out(g, n, 0, 1);
    return 0;
}

/* dY, X -> dX like dY (ReluGrad and the other elementwise gradients) */
int shape_MsLikeFirst(mp_graph *g, mp_node *n, mp_err *err)
{
    if (!mp_in(g, n, 0)) return mp_fail(err, "missing input 0");
    copy_in_to_out(g, n, 0, 0);
    return 0;
}

/* dY, log_prob, label, weight -> d_logits like log_prob */
int shape_MsSoftmaxCrossEntropyLossGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *lp = mp_in(g, n, 1), *label = mp_in(g, n, 2);
    if (!lp || !label) return mp_fail(err, "missing input %s", !lp ? "log_prob" : "label");
    if (lp->rank >= 0 && label->rank >= 0 && label->rank != lp->rank - 1)
        return mp_fail(err, "label has rank %d but log_prob has rank %d; expected rank %d", label->rank, lp->rank,
                       lp->rank - 1);
    return mp_set_out_like(g, n, 0, lp->dtype, lp);
}

/* ---- com.microsoft transformer ops ------------------------------------------ */

/* A, B -> Y = alpha * op(A) op(B) with transA / transB on the last two dims. */
int shape_MsFusedMatMul(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *a = mp_in(g, n, 0), *b = mp_in(g, n, 1);
    if (!a || !b) return mp_fail(err, "missing input %s", !a ? "A" : "B");
    if (mp_attr_int(n, "transBatchA", 0) || mp_attr_int(n, "transBatchB", 0))
        return nn_set_unknown(g, n, 0, a->dtype); /* batch-transposed operands: shape left open */
    mp_dim da[MP_MAX_RANK], db[MP_MAX_RANK], dims[MP_MAX_RANK];
    if (a->rank > 0) memcpy(da, a->dims, (size_t)a->rank * sizeof *da);
    if (b->rank > 0) memcpy(db, b->dims, (size_t)b->rank * sizeof *db);
    if (a->rank >= 2 && mp_attr_int(n, "transA", 0)) {
        da[a->rank - 2] = a->dims[a->rank - 1];
        da[a->rank - 1] = a->dims[a->rank - 2];
    }
    if (b->rank >= 2 && mp_attr_int(n, "transB", 0)) {
        db[b->rank - 2] = b->dims[b->rank - 1];
        db[b->rank - 1] = b->dims[b->rank - 2];
    }
    int rank;
    if (nn_matmul_dims(g, a->rank, da, b->rank, db, &rank, dims, err)) return -1;
    return mp_set_out(g, n, 0, a->dtype, rank, dims);
}

/* input, skip, gamma, beta, bias -> output, mean, inv_std_var, input_skip_bias_sum:
 * mean and inv_std_var are float with the last dim 1. */
int shape_MsSkipLayerNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *skip = mp_in(g, n, 1);
    if (!x || !skip) return mp_fail(err, "missing input %s", !x ? "input" : "skip");
    if (x->rank >= 0 && x->rank < 1) return mp_fail(err, "input must have at least rank 1");
    mp_set_out_like(g, n, 0, x->dtype, x);
    mp_set_out_like(g, n, 3, x->dtype, x);
    if (x->rank < 0) {
        nn_set_unknown(g, n, 1, MP_FLOAT);
        return nn_set_unknown(g, n, 2, MP_FLOAT);
    }
    mp_dim dims[MP_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[x->rank - 1] = mp_dim_of(1);
    mp_set_out(g, n, 1, MP_FLOAT, x->rank, dims);
    return mp_set_out(g, n, 2, MP_FLOAT, x->rank, dims);
}

/* input[B, S, D], weights[D, Dq + Dk + Dv], bias, mask_index, past[2, B, N, P, H], ...
 * -> output[B, S, Dv], present[2, B, N, P + S, H] */
int shape_MsAttention(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *w = mp_in(g, n, 1), *past = mp_in(g, n, 4);
    if (!x) return mp_fail(err, "missing input 'input'");
    int64_t heads = mp_attr_int(n, "num_heads", 0);
    if (heads <= 0) return mp_fail(err, "attribute 'num_heads' must be positive");
    if (nn_check_rank(x, 3, "input", err) || nn_check_rank(w, 2, "weights", err) || nn_check_rank(past, 5, "past", err))
        return -1;
    int64_t qkv[3];
    mp_dim dk = MP_DIM_UNKNOWN, dv = MP_DIM_UNKNOWN;
    if (mp_node_attr(n, "qkv_hidden_sizes")) {
        if (nn_ints_attr(n, "qkv_hidden_sizes", 3, 0, qkv, err)) return -1;
        dk = mp_dim_of(qkv[1]);
        dv = mp_dim_of(qkv[2]);
    } else if (w && w->rank == 2 && w->dims[1].v >= 0) {
        if (w->dims[1].v % 3)
            return mp_fail(err, "weights have %lld columns, not 3 equal parts", (long long)w->dims[1].v);
        dk = dv = mp_dim_of(w->dims[1].v / 3);
    }
    if (x->rank == 3 && w && w->rank == 2 && nn_check_dim(g, w->dims[0], x->dims[2], "weights' input size", err))
        return -1;
    mp_dim batch = x->rank == 3 ? x->dims[0] : MP_DIM_UNKNOWN, seq = x->rank == 3 ? x->dims[1] : MP_DIM_UNKNOWN;
    mp_dim y[3] = {batch, seq, dv};
    mp_set_out(g, n, 0, x->dtype, 3, y);
    mp_dim head = MP_DIM_UNKNOWN;
    if (dk.v >= 0) {
        if (dk.v % heads)
            return mp_fail(err, "hidden size %lld is not divisible by %lld heads", (long long)dk.v, (long long)heads);
        head = mp_dim_of(dk.v / heads);
    }
    mp_dim total = seq;
    if (past && past->rank == 5) {
        bool shared = mp_attr_int(n, "past_present_share_buffer", 0) != 0;
        mp_dim p = past->dims[3];
        if (shared)
            total = p;
        else
            total = seq.v >= 0 ? nn_dim_affine(p, 1, seq.v) : p.v == 0 ? seq : MP_DIM_UNKNOWN;
        head = nn_dim_merge(head, past->dims[4]);
    }
    mp_dim pr[5] = {mp_dim_of(2), batch, mp_dim_of(heads), total, head};
    return mp_set_out(g, n, 1, x->dtype, 5, pr);
}
