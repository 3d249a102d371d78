/* unroll_rnn.c - unrolls RNN, GRU and LSTM nodes over their bound sequence
 * length into primitive ONNX ops, before autodiff: training an RNN then needs
 * no gradient rule of its own, the CPU executor no kernel, and the plan counts
 * what the backward saves at every step (the step's input and state, each
 * gate's activation, the cell state), as autograd of an unrolled cell does.
 *
 * From the equations of ONNX's docs/Operators.md, per direction:
 *   1. W, R, B (and P) lose the direction axis (Squeeze, a view);
 *   2. X W^T + Wb + Rb of all steps at once, one MatMul, split into the
 *      steps' xw_t [B, gates * H] (PyTorch's own RNN layers do the same);
 *   3. each step, in the direction's order (reverse: t = T-1 .. 0), is
 *      Gemm(Ht-1, R, xw_t) (transB) for every gate at once, split into the
 *      gates [B, H], their activations and the new states. GRU's h gate needs
 *      rt first: with linear_before_reset 0, R is split by gate (a copy of
 *      R); with 1, Rb rides with Ht-1 R^T and rt multiplies its h part.
 * Then Concat and Reshape (a view) write Y [T, dirs, B, H] (layout 1:
 * [B, T, dirs, H]), Y_h and Y_c [dirs, B, H] ([B, dirs, H]) into the node's
 * own output values. The new nodes take the node's place in the node order,
 * which is the schedule.
 *
 * A value of -1 stands for zeros (an absent bias, initial state or peephole):
 * ops on it fold away, so a first step from a zero state has no H R^T.
 *
 * Activations: the spec's list; alpha and beta are consumed in order by the
 * activations that take them, and default to the ONNX op's (LeakyRelu 0.01,
 * ThresholdedRelu 1, HardSigmoid 0.2 and 0.5, Elu 1, Affine 1 and 0,
 * ScaledTanh 1 and 1), as onnxruntime reads them. Clip bounds the gates'
 * inputs, not h's input Ct (as onnxruntime). input_forget: f = 1 - i.
 * sequence_lens must be absent or a constant equal to T everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "passes/autodiff.h"

enum { RNN, GRU, LSTM };

/* The activations of the spec: the op (NULL: written with Mul, Add, Tanh),
 * whether it takes alpha and beta, and their defaults. */
static const struct act_def {
    const char *name, *op;
    bool alpha, beta;
    float dalpha, dbeta;
} act_defs[] = {
    {"Relu", "Relu", false, false, 0, 0},
    {"Tanh", "Tanh", false, false, 0, 0},
    {"Sigmoid", "Sigmoid", false, false, 0, 0},
    {"Affine", NULL, true, true, 1.0f, 0.0f},     /* alpha x + beta */
    {"LeakyRelu", "LeakyRelu", true, false, 0.01f, 0},
    {"ThresholdedRelu", "ThresholdedRelu", true, false, 1.0f, 0},
    {"ScaledTanh", NULL, true, true, 1.0f, 1.0f}, /* alpha tanh(beta x) */
    {"HardSigmoid", "HardSigmoid", true, true, 0.2f, 0.5f},
    {"Elu", "Elu", true, false, 1.0f, 0},
    {"Softsign", "Softsign", false, false, 0, 0},
    {"Softplus", "Softplus", false, false, 0, 0},
};

typedef struct act {
    const struct act_def *def;
    float alpha, beta;
} act;

typedef struct rnn {
    mp_ad ad;
    mp_graph *g;
    const char *name;     /* the node's; new names are "<name>/fwd/t3/..." */
    int kind, dirs;
    bool reverse;         /* one direction, reverse */
    int axis;             /* the layout: time axis of X and Y, direction axis of the states */
    int64_t T, B, H;
    mp_dtype dt;
    bool lbr, input_forget;
    float clip;           /* 0: none */
    act f[2][3];          /* per direction: f, g (GRU, LSTM), h (LSTM) */
    int32_t one, lo, hi;  /* scalars 1, -clip, clip */
    bool bad;             /* an emit failed: the next ones do nothing */
    char at[400];         /* where new names go */
} rnn;

static void fail(rnn *u, const char *msg)
{
    if (!u->bad) mp_fail(u->ad.err, "%s", msg);
    u->bad = true;
}

/* ---- emitting ---- */

/* Node op(in...) named "<at>/<what>", not yet inferred; outputs out[k] < 0
 * become new values "<at>/<what>" (then ":k"). */
static int32_t add(rnn *u, const char *op, int nin, const int32_t *in, int nout, int32_t *out, const char *what)
{
    char name[512];
    snprintf(name, sizeof name, "%s/%s", u->at, what);
    for (int k = 0; k < nout; k++)
        if (out[k] < 0) {
            char sfx[16] = "";
            if (k) snprintf(sfx, sizeof sfx, ":%d", k);
            out[k] = ad_value(&u->ad, name, sfx, MP_ROLE_ACTIVATION);
        }
    return mp_graph_add_node(u->g, name, op, "", nin, in, nout, out);
}

static int32_t infer(rnn *u, int32_t n, int32_t out)
{
    if (!u->bad && ad_infer(&u->ad, n)) u->bad = true;
    return u->bad ? -1 : out;
}

/* op(in...) into out (-1: a new value); every input present. */
static int32_t emit_to(rnn *u, const char *op, int nin, const int32_t *in, const char *what, int32_t out)
{
    if (u->bad) return -1;
    int32_t n = add(u, op, nin, in, 1, &out, what);
    return infer(u, n, out);
}

static int32_t emit(rnn *u, const char *op, int nin, const int32_t *in, const char *what)
{
    return emit_to(u, op, nin, in, what, -1);
}

static int32_t konst(rnn *u, mp_tensor *t, const char *what)
{
    if (u->bad) return -1;
    int32_t out = -1, n = add(u, "Constant", 0, NULL, 1, &out, what);
    mp_node *nd = &u->g->nodes[n];
    nd->attrs = mp_arena_alloc(u->g->arena, sizeof *nd->attrs);
    nd->attrs[0] = (mp_attr){.name = "value", .type = MP_ATTR_TENSOR};
    nd->attrs[0].tensors = mp_arena_alloc(u->g->arena, sizeof *nd->attrs[0].tensors);
    nd->attrs[0].tensors[0] = t;
    nd->nattrs = 1;
    u->g->values[out].role = MP_ROLE_CONST;
    return infer(u, n, out);
}

static int32_t ints(rnn *u, int n, const int64_t *v, const char *what)
{
    int64_t d = n;
    mp_tensor *t = mp_tensor_new(u->g->arena, MP_INT64, 1, &d);
    for (int i = 0; i < n; i++) mp_tensor_set_i64(t, i, v[i]);
    return konst(u, t, what);
}

static int32_t scalar(rnn *u, double x, const char *what)
{
    mp_tensor *t = mp_tensor_new(u->g->arena, u->dt, 0, NULL);
    mp_tensor_set_f64(t, 0, x);
    return konst(u, t, what);
}

/* Squeeze or Unsqueeze of one axis. */
static int32_t axis_op(rnn *u, const char *op, int32_t x, int64_t axis, const char *what)
{
    char w[256];
    snprintf(w, sizeof w, "%s_axes", what);
    return emit(u, op, 2, (int32_t[]){x, ints(u, 1, &axis, w)}, what);
}

/* Split of x along axis into n parts of the given sizes, named whats[k]. */
static void split(rnn *u, int32_t x, int axis, int n, const int64_t *sizes, int32_t *out, const char *const *whats,
                  const char *what)
{
    for (int k = 0; k < n; k++) out[k] = -1;
    if (u->bad) return;
    char w[256], base[512];
    snprintf(w, sizeof w, "%s_sizes", what);
    int32_t in[2] = {x, ints(u, n, sizes, w)};
    for (int k = 0; k < n; k++) {
        snprintf(base, sizeof base, "%s/%s", u->at, whats[k]);
        out[k] = ad_value(&u->ad, base, "", MP_ROLE_ACTIVATION);
    }
    int32_t nd = add(u, "Split", 2, in, n, out, what);
    ad_attr_int(u->g, &u->g->nodes[nd], "axis", axis);
    infer(u, nd, 0);
    for (int k = 0; k < n && u->bad; k++) out[k] = -1;
}

/* The steps t0 .. t0+n-1 of x along the time axis, each of extent 1, named
 * "t<k>/<what>": one Split, or for n > 64 (autodiff's limit on a node's
 * outputs) a Split into parts of at most 64 steps, each split again. */
static void split_steps(rnn *u, int32_t x, int64_t t0, int64_t n, int32_t *out, const char *what)
{
    if (n == 1) { /* one step: x is it */
        out[0] = x;
        return;
    }
    int64_t chunk = 1, parts = n, sizes[64] = {0};
    while (parts > 64) chunk *= 64, parts = (n + chunk - 1) / chunk;
    char names[64][96], w[96];
    const char *whats[64] = {0};
    int32_t pieces[64];
    for (int64_t k = 0; k < parts; k++) {
        sizes[k] = k < parts - 1 ? chunk : n - chunk * (parts - 1);
        if (chunk == 1) snprintf(names[k], sizeof names[k], "t%lld/%s", (long long)(t0 + k), what);
        else snprintf(names[k], sizeof names[k], "%s_t%lld-%lld", what, (long long)(t0 + k * chunk),
                      (long long)(t0 + k * chunk + sizes[k] - 1));
        whats[k] = names[k];
    }
    snprintf(w, sizeof w, "%s_split_t%lld", what, (long long)t0);
    split(u, x, u->axis, (int)parts, sizes, chunk == 1 ? out : pieces, whats, w);
    for (int64_t k = 0; chunk > 1 && k < parts; k++)
        split_steps(u, pieces[k], t0 + k * chunk, sizes[k], out + k * chunk, what);
}

/* Concat of n values along axis into out (-1: a new value), in rounds of at
 * most 64 inputs (the Concat gradient's limit); one value is itself, or an
 * Identity into out. */
static int32_t concat(rnn *u, int n, const int32_t *v, int axis, const char *what, int32_t out)
{
    if (u->bad) return -1;
    if (n == 1) return out < 0 ? v[0] : emit_to(u, "Identity", 1, v, what, out);
    if (n > 64) {
        int m = (n + 63) / 64;
        int32_t *part = malloc((size_t)m * sizeof *part);
        if (!part) return fail(u, "out of memory"), -1;
        for (int k = 0; k < m; k++) {
            char w[256];
            snprintf(w, sizeof w, "%s_part%d", what, k);
            part[k] = concat(u, k < m - 1 ? 64 : n - 64 * k, v + 64 * k, axis, w, -1);
        }
        int32_t r = concat(u, m, part, axis, what, out);
        free(part);
        return r;
    }
    int32_t nd = add(u, "Concat", n, v, 1, &out, what);
    ad_attr_int(u->g, &u->g->nodes[nd], "axis", axis);
    return infer(u, nd, out);
}

/* ---- arithmetic where -1 is zeros ---- */

static int32_t plus(rnn *u, int32_t a, int32_t b, const char *what)
{
    if (a < 0 || b < 0) return a < 0 ? b : a;
    return emit(u, "Add", 2, (int32_t[]){a, b}, what);
}

static int32_t times(rnn *u, int32_t a, int32_t b, const char *what)
{
    if (a < 0 || b < 0) return -1;
    return emit(u, "Mul", 2, (int32_t[]){a, b}, what);
}

/* a b^T + c, c broadcast (a or c -1: zeros) */
static int32_t gemm(rnn *u, int32_t a, int32_t b, int32_t c, const char *what)
{
    if (a < 0 || u->bad) return a < 0 ? c : -1;
    int32_t in[3] = {a, b, c}, y = -1, n = add(u, "Gemm", c < 0 ? 2 : 3, in, 1, &y, what);
    ad_attr_int(u->g, &u->g->nodes[n], "transB", 1);
    return infer(u, n, y);
}

static int32_t one_minus(rnn *u, int32_t x, const char *what)
{
    return emit(u, "Sub", 2, (int32_t[]){u->one, x}, what);
}

/* The activation a of x, clipped first when the node clips; named what. */
static int32_t activate(rnn *u, int32_t x, const act *a, bool clip, const char *what)
{
    char w[256];
    if (clip && u->clip > 0 && !u->bad) {
        snprintf(w, sizeof w, "%s_clipped", what);
        int32_t c = -1, n;
        if (mp_graph_opset(u->g, "") >= 11) {
            n = add(u, "Clip", 3, (int32_t[]){x, u->lo, u->hi}, 1, &c, w);
        } else { /* bounds are attributes before opset 11 */
            n = add(u, "Clip", 1, &x, 1, &c, w);
            ad_attr_float(u->g, &u->g->nodes[n], "min", -u->clip);
            ad_attr_float(u->g, &u->g->nodes[n], "max", u->clip);
        }
        x = infer(u, n, c);
    }
    const struct act_def *d = a->def;
    char wa[256], wb[256];
    snprintf(wa, sizeof wa, "%s_alpha", what), snprintf(wb, sizeof wb, "%s_beta", what);
    if (!strcmp(d->name, "Affine")) { /* alpha x + beta */
        snprintf(w, sizeof w, "%s_scaled", what);
        int32_t s = emit(u, "Mul", 2, (int32_t[]){x, scalar(u, a->alpha, wa)}, w);
        return emit(u, "Add", 2, (int32_t[]){s, scalar(u, a->beta, wb)}, what);
    }
    if (!strcmp(d->name, "ScaledTanh")) { /* alpha tanh(beta x) */
        snprintf(w, sizeof w, "%s_scaled", what);
        int32_t s = emit(u, "Mul", 2, (int32_t[]){x, scalar(u, a->beta, wb)}, w);
        snprintf(w, sizeof w, "%s_tanh", what);
        int32_t t = emit(u, "Tanh", 1, &s, w);
        return emit(u, "Mul", 2, (int32_t[]){t, scalar(u, a->alpha, wa)}, what);
    }
    if (u->bad) return -1;
    int32_t y = -1, n = add(u, d->op, 1, &x, 1, &y, what);
    if (d->alpha) ad_attr_float(u->g, &u->g->nodes[n], "alpha", a->alpha);
    if (d->beta) ad_attr_float(u->g, &u->g->nodes[n], "beta", a->beta);
    return infer(u, n, y);
}

/* ---- the cells: one step from state h (and c); xw = x_t W^T + bias ---- */

/* Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi) */
static void step_rnn(rnn *u, const act *f, int32_t xw, const int32_t *r, int32_t *h)
{
    *h = activate(u, gemm(u, *h, r[0], xw, "pre"), &f[0], true, "H");
}

/* zt = f(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz)
 * rt = f(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr)
 * ht = g(Xt Wh^T + (rt . Ht-1) Rh^T + Rbh + Wbh)      linear_before_reset 0: r = Rz, Rr, Rh
 * ht = g(Xt Wh^T + rt . (Ht-1 Rh^T + Rbh) + Wbh)      linear_before_reset 1: r = R, rb = Rb
 * Ht = (1 - zt) . ht + zt . Ht-1 */
static void step_gru(rnn *u, const act *f, int32_t xw, const int32_t *r, int32_t rb, int32_t *h)
{
    int64_t H3[3] = {u->H, u->H, u->H};
    int32_t x[3], rec[3] = {-1, -1, -1}, z, rt, hh;
    split(u, xw, -1, 3, H3, x, (const char *[]){"xw_z", "xw_r", "xw_h"}, "split_xw");
    if (u->lbr) {
        int32_t all = gemm(u, *h, r[0], rb, "rec"); /* Ht-1 R^T + Rb */
        if (all >= 0) split(u, all, -1, 3, H3, rec, (const char *[]){"rec_z", "rec_r", "rec_h"}, "split_rec");
        z = activate(u, plus(u, x[0], rec[0], "z_in"), &f[0], true, "z");
        rt = activate(u, plus(u, x[1], rec[1], "r_in"), &f[0], true, "r");
        hh = activate(u, plus(u, x[2], times(u, rt, rec[2], "r_rec_h"), "h_in"), &f[1], true, "h");
    } else {
        z = activate(u, gemm(u, *h, r[0], x[0], "z_in"), &f[0], true, "z");
        rt = activate(u, gemm(u, *h, r[1], x[1], "r_in"), &f[0], true, "r");
        hh = activate(u, gemm(u, times(u, rt, *h, "r_H"), r[2], x[2], "h_in"), &f[1], true, "h");
    }
    *h = plus(u, times(u, one_minus(u, z, "1-z"), hh, "1-z_h"), times(u, z, *h, "z_H"), "H");
}

/* it = f(Xt Wi^T + Ht-1 Ri^T + Pi . Ct-1 + Wbi + Rbi)
 * ft = f(Xt Wf^T + Ht-1 Rf^T + Pf . Ct-1 + Wbf + Rbf)   (input_forget: 1 - it)
 * ct = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc)
 * Ct = ft . Ct-1 + it . ct
 * ot = f(Xt Wo^T + Ht-1 Ro^T + Po . Ct + Wbo + Rbo)
 * Ht = ot . h(Ct)                                        p: Pi, Po, Pf */
static void step_lstm(rnn *u, const act *f, int32_t xw, const int32_t *r, const int32_t *p, int32_t *h, int32_t *c)
{
    int32_t g[4]; /* i, o, f, c before their activations */
    int64_t sizes[4] = {u->H, u->H, u->H, u->H};
    split(u, gemm(u, *h, r[0], xw, "pre"), -1, 4, sizes, g, (const char *[]){"i_in", "o_in", "f_in", "c_in"},
          "split_iofc");
    int32_t i = activate(u, plus(u, g[0], times(u, p[0], *c, "Pi_C"), "i_peep"), &f[0], true, "i");
    int32_t fg = u->input_forget ? one_minus(u, i, "f")
                                 : activate(u, plus(u, g[2], times(u, p[2], *c, "Pf_C"), "f_peep"), &f[0], true, "f");
    int32_t cg = activate(u, g[3], &f[1], true, "c");
    *c = plus(u, times(u, fg, *c, "f_C"), times(u, i, cg, "i_c"), "C");
    int32_t o = activate(u, plus(u, g[1], times(u, p[1], *c, "Po_C"), "o_peep"), &f[0], true, "o");
    *h = times(u, o, activate(u, *c, &f[2], false, "h_C"), "H");
}

/* ---- one direction ---- */

/* Direction d from in[] (X, then the direction's W [G*H, I], R [G*H, H],
 * B [2*G*H], P [3H], initial h and c [B, H]; -1 when absent): its steps'
 * H into y[t], the last states into *yh, *yc. */
static void direction(rnn *u, int d, const int32_t *in, int32_t *y, int32_t *yh, int32_t *yc)
{
    int32_t x = in[0], w = in[1], r[3] = {in[2], -1, -1}, b = in[3], p = in[4], h = in[5], c = in[6];
    bool rev = u->dirs == 2 ? d == 1 : u->reverse;
    char base[300];
    snprintf(base, sizeof base, "%s/%s", u->name, rev ? "rev" : "fwd");
    snprintf(u->at, sizeof u->at, "%s", base);
    int64_t T = u->T, H = u->H, GH = (u->kind == LSTM ? 4 : u->kind == GRU ? 3 : 1) * H;

    /* 1. biases: B = [Wb, Rb]; Wb + Rb goes with x_t W^T, but GRU's
     * linear_before_reset keeps Rb with Ht-1 R^T (Rbh inside rt . (...)) */
    int32_t wb[2] = {-1, -1}, peep[3] = {-1, -1, -1};
    if (b >= 0) split(u, b, 0, 2, (int64_t[]){GH, GH}, wb, (const char *[]){"Wb", "Rb"}, "split_B");
    bool rb_with_h = u->kind == GRU && u->lbr;
    int32_t bx = rb_with_h ? wb[0] : plus(u, wb[0], wb[1], "b"), rb = rb_with_h ? wb[1] : -1;
    if (u->kind == GRU && !u->lbr) /* (rt . Ht-1) Rh^T needs Rh alone */
        split(u, r[0], 0, 3, (int64_t[]){H, H, H}, r, (const char *[]){"R_z", "R_r", "R_h"}, "split_R");
    if (p >= 0) split(u, p, 0, 3, (int64_t[]){H, H, H}, peep, (const char *[]){"Pi", "Po", "Pf"}, "split_P");

    /* 2. X W^T + b of every step at once (one MatMul, as PyTorch's own
     * layers do), split into the steps; W^T is a view for MatMul */
    int32_t *xs = malloc((size_t)T * sizeof *xs);
    if (!xs) {
        fail(u, "out of memory");
        return;
    }
    int32_t wt = -1, nd = u->bad ? -1 : add(u, "Transpose", 1, &w, 1, &wt, "W^T");
    if (nd >= 0) ad_attr_ints(u->g, &u->g->nodes[nd], "perm", (int64_t[]){1, 0}, 2);
    wt = nd >= 0 ? infer(u, nd, wt) : -1;
    int32_t xw_all = plus(u, emit(u, "MatMul", 2, (int32_t[]){x, wt}, bx >= 0 ? "xw_nobias" : "xw"), bx, "xw");
    split_steps(u, xw_all, 0, T, xs, "xw_step");

    /* 3. the steps in this direction's order */
    for (int64_t k = 0; k < T && !u->bad; k++) {
        int64_t t = rev ? T - 1 - k : k;
        snprintf(u->at, sizeof u->at, "%s/t%lld", base, (long long)t);
        int32_t xw = axis_op(u, "Squeeze", xs[t], u->axis, "xw");
        if (u->kind == RNN) step_rnn(u, u->f[d], xw, r, &h);
        else if (u->kind == GRU) step_gru(u, u->f[d], xw, r, rb, &h);
        else step_lstm(u, u->f[d], xw, r, peep, &h, &c);
        y[t] = h;
    }
    *yh = h, *yc = c;
    free(xs);
}

/* Concat of n [B, H] values along the layout's outer axis, reshaped to dims
 * (a view), into out (-1: a new value). */
static int32_t stack(rnn *u, int n, const int32_t *v, int rank, const int64_t *dims, const char *what, int32_t out)
{
    char w[128], s[160];
    snprintf(w, sizeof w, "%s_concat", what), snprintf(s, sizeof s, "%s_shape", what);
    int32_t cat = concat(u, n, v, u->axis, w, -1);
    return emit_to(u, "Reshape", 2, (int32_t[]){cat, ints(u, rank, dims, s)}, what, out);
}

/* ---- one node ---- */

/* The node's attributes and sizes into u; fails naming what is not supported. */
static int setup(rnn *u, const mp_node *n)
{
    char msg[400];
    mp_graph *g = u->g;
    u->kind = !strcmp(n->op_type, "RNN") ? RNN : !strcmp(n->op_type, "GRU") ? GRU : LSTM;
    if (n->nin < 3 || n->in[0] < 0 || n->in[1] < 0 || n->in[2] < 0) return fail(u, "X, W and R are required"), -1;
    const mp_value *x = &g->values[n->in[0]];
    if (!mp_dtype_is_float(x->dtype)) return fail(u, "X is not a float tensor"), -1;
    u->dt = x->dtype;
    const char *dir = mp_attr_str(n, "direction", "forward");
    u->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    u->reverse = !strcmp(dir, "reverse");
    u->axis = mp_graph_opset(g, "") >= 14 ? (int)mp_attr_int(n, "layout", 0) : 0;
    int64_t xd[MP_MAX_RANK], rd[MP_MAX_RANK];
    int xr, rr;
    if (ad_known_dims(&u->ad, n->in[0], xd, &xr) || ad_known_dims(&u->ad, n->in[2], rd, &rr)) return u->bad = true, -1;
    if (xr != 3 || rr != 3 || (u->axis != 0 && u->axis != 1))
        return fail(u, "X and R must have rank 3, layout 0 or 1"), -1;
    u->T = xd[u->axis], u->B = xd[1 - u->axis], u->H = rd[2];
    if (u->T < 1) return fail(u, "the sequence is empty"), -1;
    u->lbr = mp_attr_int(n, "linear_before_reset", 0) != 0;
    u->input_forget = u->kind == LSTM && mp_attr_int(n, "input_forget", 0) != 0;
    u->clip = mp_node_attr(n, "clip") ? mp_attr_float(n, "clip", 0) : 0;
    if (mp_node_attr(n, "clip") && !(u->clip > 0)) return fail(u, "clip must be positive"), -1;

    /* sequence_lens: absent, or every sequence the whole length */
    int32_t sl = n->nin > 4 ? n->in[4] : -1;
    if (sl >= 0) {
        const mp_tensor *k = g->values[sl].konst;
        bool full = k != NULL;
        for (int64_t i = 0; full && i < k->numel; i++) full = mp_tensor_get_i64(k, i) == u->T;
        if (!full) {
            snprintf(msg, sizeof msg,
                     "sequence_lens '%s' is %s; sequence_lens shorter than the sequence is not supported (it must "
                     "be absent or %lld everywhere)",
                     g->values[sl].name, k ? "not the sequence length everywhere" : "not a known constant",
                     (long long)u->T);
            return fail(u, msg), -1;
        }
    }

    /* activations, per direction: RNN f, GRU f g, LSTM f g h */
    static const char *const dflt[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int nact = u->kind + 1;
    const mp_attr *names = mp_node_attr(n, "activations"), *al = mp_node_attr(n, "activation_alpha"),
                  *be = mp_node_attr(n, "activation_beta");
    int count = names && names->type == MP_ATTR_STRINGS ? names->n : 0;
    if (count && count != nact && count != nact * u->dirs) {
        snprintf(msg, sizeof msg, "activations lists %d functions; %s takes %d per direction", count, n->op_type, nact);
        return fail(u, msg), -1;
    }
    int na = al && al->type == MP_ATTR_FLOATS ? al->n : 0, nb = be && be->type == MP_ATTR_FLOATS ? be->n : 0;
    int ia = 0, ib = 0;
    for (int d = 0; d < u->dirs; d++)
        for (int k = 0; k < nact; k++) {
            const char *s = count ? names->strings[count == nact ? k : d * nact + k] : dflt[u->kind][k];
            const struct act_def *def = NULL;
            for (size_t j = 0; j < sizeof act_defs / sizeof *act_defs && !def; j++)
                if (!strcasecmp(s, act_defs[j].name)) def = &act_defs[j];
            if (!def) {
                snprintf(msg, sizeof msg,
                         "activation '%s' is not one of the spec's (Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                         "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)", s);
                return fail(u, msg), -1;
            }
            if (def->op && !mp_op_find(def->op, "")) {
                snprintf(msg, sizeof msg, "activation '%s' has no op in the op table", s);
                return fail(u, msg), -1;
            }
            act *a = &u->f[d][k];
            a->def = def;
            a->alpha = def->alpha && ia < na ? al->floats[ia++] : def->dalpha;
            a->beta = def->beta && ib < nb ? be->floats[ib++] : def->dbeta;
        }
    return 0;
}

/* v's slice of direction d along axis, squeezed, into out[d] (-1 stays -1). */
static void per_dir(rnn *u, int32_t v, int axis, int32_t *out, const char *what)
{
    out[0] = out[1] = v;
    if (v < 0) return;
    char w[2][64], s[2][160], sp[80];
    for (int d = 0; d < 2; d++) {
        snprintf(w[d], sizeof w[d], "%s_%s", what, d ? "rev" : "fwd");
        snprintf(s[d], sizeof s[d], "%s_slice", w[d]);
    }
    snprintf(sp, sizeof sp, "split_%s", what);
    if (u->dirs == 2) split(u, v, axis, 2, (int64_t[]){1, 1}, out, (const char *[]){s[0], s[1]}, sp);
    for (int d = 0; d < u->dirs; d++)
        out[d] = axis_op(u, "Squeeze", out[d], axis, u->dirs == 2 ? w[d] : what);
}

/* Emits node's unrolling at the end of the node array; its outputs are written by the last nodes. */
static int unroll(mp_graph *g, int32_t node, mp_err *err)
{
    mp_err inner = {{0}};
    rnn u = {.ad = {g, &inner, MP_PHASE_FORWARD, g->nvalues, NULL, NULL, NULL}, .g = g, .one = -1, .lo = -1, .hi = -1};
    const mp_node *n = &g->nodes[node];
    u.name = n->name;
    const char *op = n->op_type;
    snprintf(u.at, sizeof u.at, "%s", u.name);
    int32_t in[8], out[3];
    for (int k = 0; k < 8; k++) in[k] = k < n->nin ? n->in[k] : -1;
    for (int k = 0; k < 3; k++) out[k] = k < n->nout ? n->out[k] : -1;
    int32_t *y[2] = {NULL, NULL};
    if (setup(&u, n)) goto done;
    if (u.kind == GRU || u.input_forget) u.one = scalar(&u, 1.0, "one");
    if (u.clip > 0) u.lo = scalar(&u, -u.clip, "clip_min"), u.hi = scalar(&u, u.clip, "clip_max");

    /* 1. the inputs of each direction: in order X W R B P initial_h initial_c */
    int32_t dir[2][7], w[2], r[2], b[2], p[2], h0[2], c0[2];
    per_dir(&u, in[1], 0, w, "W");
    per_dir(&u, in[2], 0, r, "R");
    per_dir(&u, in[3], 0, b, "B");
    per_dir(&u, u.kind == LSTM ? in[7] : -1, 0, p, "P");
    per_dir(&u, in[5], u.axis, h0, "initial_h");
    per_dir(&u, u.kind == LSTM ? in[6] : -1, u.axis, c0, "initial_c");
    for (int d = 0; d < 2; d++) {
        int32_t v[7] = {in[0], w[d], r[d], b[d], p[d], h0[d], c0[d]};
        memcpy(dir[d], v, sizeof v);
    }

    /* 2. the directions; 3. Y [T, dirs, B, H] (layout 1: [B, T, dirs, H]), Y_h and Y_c [dirs, B, H] ([B, dirs, H]) */
    int64_t T = u.T, B = u.B, H = u.H, D = u.dirs;
    int64_t ydir[4] = {T, 1, B, H}, ydir1[4] = {B, T, 1, H}, ys[3] = {D, B, H}, ys1[3] = {B, D, H};
    int32_t ylist[2], yh[2], yc[2];
    for (int d = 0; d < u.dirs && !u.bad; d++) {
        if (!(y[d] = malloc((size_t)u.T * sizeof *y[d]))) {
            fail(&u, "out of memory");
            break;
        }
        direction(&u, d, dir[d], y[d], &yh[d], &yc[d]);
        snprintf(u.at, sizeof u.at, "%s", u.name);
        if (out[0] >= 0)
            ylist[d] = stack(&u, (int)T, y[d], 4, u.axis ? ydir1 : ydir, d == 1 || u.reverse ? "Y_rev" : "Y_fwd",
                             u.dirs == 1 ? out[0] : -1);
    }
    if (out[0] >= 0 && u.dirs == 2) concat(&u, 2, ylist, u.axis + 1, "Y", out[0]);
    if (out[1] >= 0) stack(&u, u.dirs, yh, 3, u.axis ? ys1 : ys, "Y_h", out[1]);
    if (out[2] >= 0 && u.kind == LSTM) stack(&u, u.dirs, yc, 3, u.axis ? ys1 : ys, "Y_c", out[2]);
done:
    free(y[0]), free(y[1]);
    if (u.bad) return mp_fail(err, "node '%s' (%s): %s", u.name, op, inner.msg[0] ? inner.msg : "unrolling failed");
    return 0;
}

static bool is_recurrent(const mp_node *n)
{
    bool onnx = !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
    return onnx && (!strcmp(n->op_type, "RNN") || !strcmp(n->op_type, "GRU") || !strcmp(n->op_type, "LSTM"));
}

int mp_unroll_rnn(mp_graph *g, mp_err *err) { return mp_expand_nodes(g, is_recurrent, unroll, err); }
