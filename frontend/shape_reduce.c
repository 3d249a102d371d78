/* shape_reduce.c - shape rules of the reductions (Reduce*, ArgMax/ArgMin) and
 * of the ops along one axis that keep the shape (Softmax family, CumSum,
 * CumProd), plus Det (ir/ops/elementwise.def). */
#include <string.h>

#include "fold.h"
#include "shape.h"

static int op_of(const mp_node *n)
{
    if (n->op >= 0 && n->op < MP_OP_COUNT) return n->op;
    const mp_op_def *d = mp_op_find(n->op_type, n->domain);
    return d ? (int)d->id : 0;
}

/* The node's opset; a graph that imports none is read as the newest. */
static int64_t opset_of(const mp_graph *g, const mp_node *n)
{
    int64_t v = mp_graph_opset(g, n->domain);
    return v > 0 ? v : INT64_MAX;
}

/* Reduce*: the fold kernel, and the opset from which axes is an input
 * rather than an attribute. */
static const struct {
    mp_fold_reduce_kind kind;
    int64_t axes_input_since;
} reduce_rules[MP_OP_COUNT] = {
    [MP_OP_ReduceL1] = {MP_REDUCE_L1, 18},
    [MP_OP_ReduceL2] = {MP_REDUCE_L2, 18},
    [MP_OP_ReduceLogSum] = {MP_REDUCE_LOGSUM, 18},
    [MP_OP_ReduceLogSumExp] = {MP_REDUCE_LOGSUMEXP, 18},
    [MP_OP_ReduceMax] = {MP_REDUCE_MAX, 18},
    [MP_OP_ReduceMean] = {MP_REDUCE_MEAN, 18},
    [MP_OP_ReduceMin] = {MP_REDUCE_MIN, 18},
    [MP_OP_ReduceProd] = {MP_REDUCE_PROD, 18},
    [MP_OP_ReduceSum] = {MP_REDUCE_SUM, 13},
    [MP_OP_ReduceSumSquare] = {MP_REDUCE_SUMSQUARE, 18},
};

/* Output = input (noop_with_empty_axes with no axes), contents included. */
static int set_out_same(mp_graph *g, const mp_node *n, const mp_value *x)
{
    mp_set_out_like(g, n, 0, x->dtype, x);
    mp_value *y = mp_out(g, n, 0);
    if (y) {
        y->konst = x->konst;
        y->symdata = x->symdata;
        y->nsymdata = x->nsymdata;
    }
    return 0;
}

int shape_Reduce(mp_graph *g, mp_node *n, mp_err *err)
{
    int id = op_of(n);
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input data");
    if (x->dtype != MP_UNDEFINED && !(MP_T(x->dtype) & (MP_T_NUMERIC | MP_T(MP_BOOL))))
        return mp_fail(err, "input '%s' has dtype %s, which %s does not accept", x->name, mp_dtype_name(x->dtype),
                       n->op_type);
    bool keep = mp_attr_int(n, "keepdims", 1) != 0;
    bool noop = mp_attr_int(n, "noop_with_empty_axes", 0) != 0;

    /* axes: known list, or an input whose contents (and maybe length) are unknown */
    int64_t axes[MP_MAX_RANK];
    int naxes = 0, unknown_len = -2; /* -2: axes known; -1: unknown length; else their count */
    if (opset_of(g, n) >= reduce_rules[id].axes_input_since) {
        mp_value *a = mp_in(g, n, 1);
        if (a && (naxes = mp_const_ints(a, axes, MP_MAX_RANK)) < 0) {
            if (a->konst)
                return mp_fail(err, "axes '%s' must be a 1-D integer tensor of at most %d entries", a->name,
                               MP_MAX_RANK);
            naxes = 0;
            unknown_len = a->rank == 1 && a->dims[0].v >= 0 && a->dims[0].v <= MP_MAX_RANK ? (int)a->dims[0].v : -1;
            if (unknown_len == 0) unknown_len = -2; /* an empty list needs no contents */
        }
    } else {
        const int64_t *at;
        int c = mp_attr_ints(n, "axes", &at);
        if (c > MP_MAX_RANK) return mp_fail(err, "%d axes (limit %d)", c, MP_MAX_RANK);
        for (int i = 0; i < c; i++) axes[naxes++] = at[i];
    }

    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    if (unknown_len == -2 && naxes == 0 && noop) return set_out_same(g, n, x);
    mp_dim dims[MP_MAX_RANK];
    if (unknown_len != -2) {
        /* which axes go is unknown: keepdims keeps the rank (1s stay 1) */
        for (int k = 0; k < x->rank; k++) dims[k] = x->dims[k].v == 1 ? x->dims[k] : MP_DIM_UNKNOWN;
        if (keep) return mp_set_out(g, n, 0, x->dtype, x->rank, dims);
        bool len_ok = unknown_len >= 0 && unknown_len <= x->rank;
        return mp_set_out(g, n, 0, x->dtype, len_ok ? x->rank - unknown_len : -1, dims);
    }

    bool red[MP_MAX_RANK] = {false};
    for (int i = 0; i < naxes; i++) {
        int64_t a;
        if (mp_norm_axis(axes[i], x->rank, false, &a, err)) return -1;
        if (red[a]) return mp_fail(err, "axis %lld appears twice in axes", (long long)axes[i]);
        red[a] = true;
    }
    for (int k = 0; k < x->rank && naxes == 0; k++) red[k] = true;
    int rank = 0;
    for (int k = 0; k < x->rank; k++)
        if (!red[k] || keep) dims[rank++] = red[k] ? mp_dim_of(1) : x->dims[k];
    mp_set_out(g, n, 0, x->dtype, rank, dims);

    if (x->konst && mp_foldable_numel(x) >= 0) {
        mp_tensor *t = mp_fold_reduce(g->arena, reduce_rules[id].kind, x->konst, red, keep);
        if (t) mp_set_out_const(g, n, 0, t);
    }
    return 0;
}

/* ArgMax, ArgMin: int64 indices along axis. */
int shape_ArgReduce(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input data");
    if (x->rank < 0) return mp_set_out(g, n, 0, MP_INT64, -1, NULL);
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x->rank, false, &axis, err)) return -1;
    bool keep = mp_attr_int(n, "keepdims", 1) != 0;
    mp_dim dims[MP_MAX_RANK];
    int rank = 0;
    for (int k = 0; k < x->rank; k++)
        if (k != axis || keep) dims[rank++] = k == axis ? mp_dim_of(1) : x->dims[k];
    return mp_set_out(g, n, 0, MP_INT64, rank, dims);
}

/* Softmax, LogSoftmax, Hardmax: same shape. Before opset 13 the input is seen
 * as 2-D [d0*..*d(axis-1), rest] (default axis 1); from 13 on it is the one
 * axis (default -1). Either way only the axis needs checking. */
int shape_Softmax(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    if (x->dtype != MP_UNDEFINED && !mp_dtype_is_float(x->dtype))
        return mp_fail(err, "input '%s' has dtype %s; %s needs a float type", x->name, mp_dtype_name(x->dtype),
                       n->op_type);
    int64_t axis = mp_attr_int(n, "axis", opset_of(g, n) < 13 ? 1 : -1), a;
    /* the 2-D coercion also accepts axis == rank (everything in the first factor) */
    if (x->rank > 0 && mp_norm_axis(axis, x->rank, opset_of(g, n) < 13, &a, err)) return -1;
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* CumSum, CumProd: same shape; axis is a scalar input. */
int shape_CumScan(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ax = mp_in(g, n, 1);
    if (!x || !ax) return mp_fail(err, "needs inputs x and axis");
    if (ax->rank > 1 || (ax->rank == 1 && ax->dims[0].v > 1))
        return mp_fail(err, "axis '%s' must be a scalar, has rank %d", ax->name, ax->rank);
    int64_t axis, a;
    if (x->rank >= 0 && mp_const_ints(ax, &axis, 1) == 1 && mp_norm_axis(axis, x->rank, false, &a, err)) return -1;
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* Det: [*, M, M] -> [*]. */
int shape_Det(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    if (x->rank < 2) return mp_fail(err, "input '%s' has rank %d; Det needs [*, M, M]", x->name, x->rank);
    mp_dim r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
    char a[32], b[32];
    if (r.v >= 0 && c.v >= 0 && r.v != c.v)
        return mp_fail(err, "matrices of '%s' are %sx%s, not square", x->name, mp_dim_str(g, r, a),
                       mp_dim_str(g, c, b));
    return mp_set_out(g, n, 0, x->dtype, x->rank - 2, x->dims);
}
