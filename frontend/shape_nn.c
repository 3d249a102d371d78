/* shape_nn.c - shape rules of the neural-network ops that are not windows or
 * recurrences (ir/ops/nn.def): matrix products, normalizations, dropout,
 * quantization, losses, sampling grids, NonMaxSuppression; and the helpers
 * of shape_nn.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/einsum.h"
#include "shape_nn.h"

/* ---- helpers (shape_nn.h) ------------------------------------------------ */

int nn_ints_attr(const mp_node *n, const char *name, int count, int64_t dflt, int64_t *out, mp_err *err)
{
    const int64_t *v;
    int k = mp_attr_ints(n, name, &v);
    if (k < 0) {
        for (int i = 0; i < count; i++) out[i] = dflt;
        return 0;
    }
    if (k != count) return mp_fail(err, "attribute '%s' has %d values, expected %d", name, k, count);
    memcpy(out, v, (size_t)count * sizeof *out);
    return 0;
}

mp_dim nn_dim_affine(mp_dim d, int64_t mul, int64_t add)
{
    if (!mp_dim_known(d)) return mul == 1 && add == 0 ? d : MP_DIM_UNKNOWN;
    int64_t r;
    if (!mp_mul_ok(d.v, mul, &r) || !mp_add_ok(r, add, &r)) return mp_dim_of(-2); /* check_value rejects it */
    return mp_dim_of(r);
}

int nn_check_dim(const mp_graph *g, mp_dim got, mp_dim want, const char *what, mp_err *err)
{
    char a[32], b[32];
    if (got.v >= 0 && want.v >= 0 && got.v != want.v)
        return mp_fail(err, "%s is %s, expected %s", what, mp_dim_str(g, got, a), mp_dim_str(g, want, b));
    return 0;
}

mp_dim nn_dim_merge(mp_dim a, mp_dim b)
{
    if (a.v >= 0) return a;
    if (b.v >= 0) return b;
    return a.sym >= 0 ? a : b;
}

int nn_check_rank(const mp_value *v, int rank, const char *what, mp_err *err)
{
    if (v && v->rank >= 0 && v->rank != rank) return mp_fail(err, "%s has rank %d, expected %d", what, v->rank, rank);
    return 0;
}

/* Broadcasts two dim lists (right-aligned) into out; out's length is the longer. */
static int broadcast_dims(const mp_graph *g, int ra, const mp_dim *a, int rb, const mp_dim *b, mp_dim *out, mp_err *err)
{
    mp_value va = {.rank = ra, .dims = (mp_dim *)a}, vb = {.rank = rb, .dims = (mp_dim *)b};
    const mp_value *vs[2] = {&va, &vb};
    int r;
    return mp_broadcast(g, 2, vs, &r, out, err);
}

int nn_matmul_dims(const mp_graph *g, int ra, const mp_dim *a, int rb, const mp_dim *b, int *rank, mp_dim *out,
                   mp_err *err)
{
    char s1[32], s2[32];
    if (ra == 0 || rb == 0) return mp_fail(err, "MatMul operands cannot be scalars");
    if (ra < 0 || rb < 0) {
        *rank = -1;
        return 0;
    }
    /* numpy: a 1-D A is [1, K] and a 1-D B is [K, 1]; the added 1s are dropped again */
    mp_dim ka = a[ra - 1], kb = rb == 1 ? b[0] : b[rb - 2];
    if (ka.v >= 0 && kb.v >= 0 && ka.v != kb.v)
        return mp_fail(err, "inner dimensions differ: A has K=%s, B has K=%s", mp_dim_str(g, ka, s1),
                       mp_dim_str(g, kb, s2));
    int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, nb = ba > bb ? ba : bb;
    if (nb > 0 && broadcast_dims(g, ba, a, bb, b, out, err)) return -1;
    int r = nb;
    if (ra > 1) out[r++] = a[ra - 2];
    if (rb > 1) out[r++] = b[rb - 1];
    *rank = r;
    return 0;
}

/* ---- matrix products ------------------------------------------------------- */

static int matmul_rule(mp_graph *g, mp_node *n, int ai, int bi, mp_dtype t, mp_err *err)
{
    const mp_value *a = mp_in(g, n, ai), *b = mp_in(g, n, bi);
    if (!a || !b) return mp_fail(err, "missing input %s", !a ? "A" : "B");
    int rank;
    mp_dim dims[MP_MAX_RANK];
    if (nn_matmul_dims(g, a->rank, a->dims, b->rank, b->dims, &rank, dims, err)) return -1;
    return mp_set_out(g, n, 0, t, rank, dims);
}

int shape_MatMul(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *a = mp_in(g, n, 0);
    return matmul_rule(g, n, 0, 1, a ? a->dtype : MP_UNDEFINED, err);
}

int shape_MatMulInteger(mp_graph *g, mp_node *n, mp_err *err) { return matmul_rule(g, n, 0, 1, MP_INT32, err); }

/* a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
int shape_QLinearMatMul(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *a = mp_in(g, n, 0), *yz = mp_in(g, n, 7);
    return matmul_rule(g, n, 0, 3, yz ? yz->dtype : a ? a->dtype : MP_UNDEFINED, err);
}

/* Y[M, N] = alpha * op(A) op(B) + beta * C, C broadcast to [M, N] (required before opset 11). */
int shape_Gemm(mp_graph *g, mp_node *n, mp_err *err)
{
    char s1[32], s2[32];
    const mp_value *a = mp_in(g, n, 0), *b = mp_in(g, n, 1), *c = mp_in(g, n, 2);
    if (!a || !b) return mp_fail(err, "missing input %s", !a ? "A" : "B");
    if (nn_check_rank(a, 2, "A", err) || nn_check_rank(b, 2, "B", err)) return -1;
    bool ta = mp_attr_int(n, "transA", 0) != 0, tb = mp_attr_int(n, "transB", 0) != 0;
    mp_dim m = a->rank == 2 ? a->dims[ta ? 1 : 0] : MP_DIM_UNKNOWN,
           ka = a->rank == 2 ? a->dims[ta ? 0 : 1] : MP_DIM_UNKNOWN;
    mp_dim kb = b->rank == 2 ? b->dims[tb ? 1 : 0] : MP_DIM_UNKNOWN,
           nn = b->rank == 2 ? b->dims[tb ? 0 : 1] : MP_DIM_UNKNOWN;
    if (ka.v >= 0 && kb.v >= 0 && ka.v != kb.v)
        return mp_fail(err, "inner dimensions differ: op(A) is [.., K=%s], op(B) is [K=%s, ..]", mp_dim_str(g, ka, s1),
                       mp_dim_str(g, kb, s2));
    mp_dim dims[2] = {m, nn};
    if (c && c->rank >= 0) {
        /* C must broadcast to [M, N] */
        if (c->rank > 2) return mp_fail(err, "C has rank %d; it must broadcast to [M, N]", c->rank);
        for (int i = 0; i < c->rank; i++) {
            mp_dim d = c->dims[i], want = dims[2 - c->rank + i];
            if (d.v >= 0 && d.v != 1 && want.v >= 0 && d.v != want.v)
                return mp_fail(err, "C dim %d is %lld, which does not broadcast to %s", i, (long long)d.v,
                               mp_dim_str(g, want, s1));
        }
    }
    return mp_set_out(g, n, 0, a->dtype, 2, dims);
}

/* ---- Einsum ------------------------------------------------------------------ */

/* One operand term of the equation: labels in order, and where "..." is. */
typedef struct einsum_term {
    int labels[MP_MAX_RANK];
    int nlabels;
    int ellipsis_at; /* index into labels where "..." stands, -1 when absent */
} einsum_term;

static int einsum_parse_term(const char *s, size_t len, einsum_term *t, mp_err *err)
{
    return mp_einsum_term(s, len, t->labels, &t->nlabels, &t->ellipsis_at, err);
}

int shape_Einsum(mp_graph *g, mp_node *n, mp_err *err)
{
    char s1[32], s2[32];
    const char *eq = mp_attr_str(n, "equation", NULL);
    if (!eq) return mp_fail(err, "attribute 'equation' is required");
    const mp_value *x0 = mp_in(g, n, 0);
    mp_dtype t = x0 ? x0->dtype : MP_UNDEFINED;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);

    mp_dim label_dim[52];
    int label_count[52] = {0}; /* occurrences over all operands ("ii" counts 2) */
    bool bound[52] = {false};
    for (int i = 0; i < 52; i++) label_dim[i] = MP_DIM_UNKNOWN;
    mp_dim ell[MP_MAX_RANK]; /* broadcast of every operand's "..." dims */
    int nell = 0;
    bool ell_unknown = false;

    /* pass 1: each operand binds its labels and "..." dims */
    int k = 0;
    for (size_t start = 0; start <= lhs_len; k++) {
        const char *comma = memchr(eq + start, ',', lhs_len - start);
        size_t end = comma ? (size_t)(comma - eq) : lhs_len;
        einsum_term term;
        if (einsum_parse_term(eq + start, end - start, &term, err)) return -1;
        const mp_value *x = mp_in(g, n, k);
        if (!x) return mp_fail(err, "equation has more operands than the %d inputs", n->nin);

        if (x->rank < 0) {
            if (term.ellipsis_at >= 0) ell_unknown = true;
        } else {
            int ne = x->rank - term.nlabels;
            if (ne < 0 || (ne > 0 && term.ellipsis_at < 0))
                return mp_fail(err, "operand %d has rank %d but its term has %d labels%s", k, x->rank, term.nlabels,
                               term.ellipsis_at >= 0 ? " and '...'" : "");
            for (int i = 0; i < term.nlabels; i++) {
                int l = term.labels[i], at = term.ellipsis_at < 0 || i < term.ellipsis_at ? i : i + ne;
                mp_dim d = x->dims[at], *ld = &label_dim[l];
                if (ld->v >= 0 && d.v >= 0 && ld->v != d.v && ld->v != 1 && d.v != 1)
                    return mp_fail(err, "label '%c' is %s in one operand and %s in operand %d", mp_einsum_char(l),
                                   mp_dim_str(g, *ld, s1), mp_dim_str(g, d, s2), k);
                /* first use binds; later a 1 gives way to the other size (numpy broadcasting) */
                if (!bound[l] || ld->v == 1)
                    *ld = d;
                else if (d.v != 1)
                    *ld = nn_dim_merge(*ld, d);
                bound[l] = true;
            }
            if (term.ellipsis_at >= 0 && ne > 0) {
                mp_dim tmp[MP_MAX_RANK];
                if (broadcast_dims(g, nell, ell, ne, x->dims + term.ellipsis_at, tmp, err)) return -1;
                if (ne > nell) nell = ne;
                memcpy(ell, tmp, (size_t)nell * sizeof *ell);
            }
        }
        for (int i = 0; i < term.nlabels; i++) label_count[term.labels[i]]++;
        start = end + 1;
        if (!comma) break;
    }
    if (k + 1 != n->nin) return mp_fail(err, "equation has %d operands but the node has %d inputs", k + 1, n->nin);

    /* pass 2: the output term, explicit or implicit (ellipsis, then labels used once, sorted) */
    mp_dim dims[MP_MAX_RANK];
    int rank = 0;
    if (arrow) {
        einsum_term out;
        if (einsum_parse_term(arrow + 2, strlen(arrow + 2), &out, err)) return -1;
        if (out.ellipsis_at >= 0 && ell_unknown) return nn_set_unknown(g, n, 0, t);
        if (out.nlabels + (out.ellipsis_at >= 0 ? nell : 0) > MP_MAX_RANK) return mp_fail(err, "output rank too large");
        for (int i = 0; i <= out.nlabels; i++) {
            if (i == out.ellipsis_at)
                for (int e = 0; e < nell; e++) dims[rank++] = ell[e];
            if (i == out.nlabels) break;
            if (!label_count[out.labels[i]]) return mp_fail(err, "output label does not appear in any input");
            dims[rank++] = label_dim[out.labels[i]];
        }
    } else {
        if (ell_unknown) return nn_set_unknown(g, n, 0, t);
        for (int e = 0; e < nell; e++) dims[rank++] = ell[e];
        /* ASCII order, as numpy and ONNX sort: A-Z (labels 26..51) before a-z (0..25) */
        for (int i = 0; i < 52 && rank < MP_MAX_RANK; i++) {
            int l = (i + 26) % 52;
            if (label_count[l] == 1) dims[rank++] = label_dim[l];
        }
    }
    return mp_set_out(g, n, 0, t, rank, dims);
}

/* ---- normalizations ------------------------------------------------------------ */

/* Y has X's type and shape (normalizations that add no other output). */
int shape_SameAsInput(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* X[N, C, D..], scale[C], B[C] -> Y like X */
int shape_InstanceNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank >= 0 && x->rank < 2) return mp_fail(err, "X has rank %d; expected (N, C, ...)", x->rank);
    for (int i = 1; i < 3 && x->rank >= 2; i++) {
        const mp_value *p = mp_in(g, n, i);
        if (p && p->rank == 1 && nn_check_dim(g, p->dims[0], x->dims[1], i == 1 ? "scale length" : "B length", err))
            return -1;
    }
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* X, scale, B, input_mean, input_var -> Y and the optional statistics, all
 * shaped like the mean input (C, or C x D1.. with opset < 9 spatial=0). */
int shape_BatchNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *mean = mp_in(g, n, 3);
    if (!x) return mp_fail(err, "missing input X");
    if (n->nin < 5) return mp_fail(err, "expected 5 inputs (X, scale, B, mean, var), got %d", n->nin);
    if (x->rank >= 0 && x->rank < 1) return mp_fail(err, "X must have at least rank 1");
    static const char *const what[5] = {"", "scale length", "B length", "mean length", "var length"};
    bool spatial = mp_attr_int(n, "spatial", 1) != 0 || nn_opset(g, n) >= 9;
    for (int i = 1; i < 5 && spatial && x->rank >= 2; i++) {
        const mp_value *p = mp_in(g, n, i);
        if (p && p->rank == 1 && nn_check_dim(g, p->dims[0], x->dims[1], what[i], err)) return -1;
    }
    mp_set_out_like(g, n, 0, x->dtype, x);
    /* the statistics: U = mean's type from opset 15, T before */
    mp_dim c = x->rank >= 2 ? x->dims[1] : MP_DIM_UNKNOWN;
    for (int i = 1; i < n->nout; i++) {
        if (mean && mean->rank >= 0)
            mp_set_out_like(g, n, i, mean->dtype, mean);
        else
            mp_set_out(g, n, i, mean ? mean->dtype : x->dtype, 1, &c);
    }
    return 0;
}

/* Y like X; Mean and InvStdDev keep X's dims before axis and are 1 after,
 * typed by stash_type. */
int shape_LayerNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    mp_set_out_like(g, n, 0, x->dtype, x);
    int64_t stash = mp_attr_int(n, "stash_type", MP_FLOAT);
    if (stash <= MP_UNDEFINED || stash >= MP_DTYPE_COUNT)
        return mp_fail(err, "stash_type %lld is not a data type", (long long)stash);
    mp_dtype u = (mp_dtype)stash;
    if (x->rank < 0) {
        nn_set_unknown(g, n, 1, u);
        return nn_set_unknown(g, n, 2, u);
    }
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", -1), x->rank, false, &axis, err)) return -1;
    mp_dim dims[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < axis ? x->dims[i] : mp_dim_of(1);
    mp_set_out(g, n, 1, u, x->rank, dims);
    return mp_set_out(g, n, 2, u, x->rank, dims);
}

/* Y like X; checks axis against X's rank. */
int shape_RMSNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    int64_t axis;
    if (x->rank > 0 && mp_norm_axis(mp_attr_int(n, "axis", -1), x->rank, false, &axis, err)) return -1;
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* X, scale, bias -> Y like X; groups must divide the channels. */
int shape_GroupNormalization(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    int64_t groups = mp_attr_int(n, "num_groups", 0);
    if (groups <= 0) return mp_fail(err, "num_groups is %lld; it must be positive", (long long)groups);
    if (x->rank >= 2 && x->dims[1].v >= 0 && x->dims[1].v % groups)
        return mp_fail(err, "X has %lld channels, not divisible by num_groups %lld", (long long)x->dims[1].v,
                       (long long)groups);
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* ---- Dropout ----------------------------------------------------------------------- */

/* Output like data; mask like data too, bool from opset 10 (T before). */
int shape_Dropout(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input data");
    const mp_value *ratio = mp_in(g, n, 1);
    if (ratio && ratio->rank > 0 && mp_value_numel(ratio) != 1)
        return mp_fail(err, "ratio must be a scalar, got rank %d", ratio->rank);
    mp_set_out_like(g, n, 0, x->dtype, x);
    return mp_set_out_like(g, n, 1, nn_opset(g, n) >= 10 ? MP_BOOL : x->dtype, x);
}

/* ---- quantization ------------------------------------------------------------------- */

static int check_output_dtype(int64_t t, mp_err *err)
{
    if (t <= MP_UNDEFINED || t >= MP_DTYPE_COUNT)
        return mp_fail(err, "output_dtype %lld is not a data type", (long long)t);
    return 0;
}

/* x, y_scale, y_zero_point -> y like x, typed by the zero point, else by
 * output_dtype (opset 21 on), else uint8. */
int shape_QuantizeLinear(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *zp = mp_in(g, n, 2);
    if (!x) return mp_fail(err, "missing input x");
    int64_t od = mp_attr_int(n, "output_dtype", 0);
    if (od && check_output_dtype(od, err)) return -1;
    mp_dtype t = zp ? zp->dtype : od ? (mp_dtype)od : MP_UINT8;
    if (zp && od && zp->dtype != MP_UNDEFINED && zp->dtype != od)
        return mp_fail(err, "output_dtype %s differs from y_zero_point's %s", mp_dtype_name((mp_dtype)od),
                       mp_dtype_name(zp->dtype));
    return mp_set_out_like(g, n, 0, t, x);
}

/* x, x_scale, x_zero_point -> y like x, typed by the output_dtype attribute
 * (newer opsets) when set, else by x_scale (opset 19 on), float before. */
int shape_DequantizeLinear(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *scale = mp_in(g, n, 1);
    if (!x) return mp_fail(err, "missing input x");
    int64_t od = mp_attr_int(n, "output_dtype", 0);
    if (od && check_output_dtype(od, err)) return -1;
    mp_dtype t = od ? (mp_dtype)od : nn_opset(g, n) >= 19 && scale ? scale->dtype : MP_FLOAT;
    return mp_set_out_like(g, n, 0, t, x);
}

/* x -> y (uint8, like x), y_scale (float scalar), y_zero_point (uint8 scalar) */
int shape_DynamicQuantizeLinear(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input x");
    mp_set_out_like(g, n, 0, MP_UINT8, x);
    mp_set_out(g, n, 1, MP_FLOAT, 0, NULL);
    return mp_set_out(g, n, 2, MP_UINT8, 0, NULL);
}

/* ---- losses --------------------------------------------------------------------------- */

static int read_reduction(const mp_node *n, bool *none, mp_err *err)
{
    const char *r = mp_attr_str(n, "reduction", "mean");
    if (strcmp(r, "none") && strcmp(r, "mean") && strcmp(r, "sum"))
        return mp_fail(err, "reduction '%s' is not one of none, mean, sum", r);
    *none = !strcmp(r, "none");
    return 0;
}

/* input[N, C, d1..], target[N, d1..] -> loss[N, d1..] (reduction none) or a
 * scalar; log_prob (SoftmaxCrossEntropyLoss's 2nd output) like input. */
static int loss_rule(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *target = mp_in(g, n, 1), *w = mp_in(g, n, 2);
    if (!x || !target) return mp_fail(err, "missing input %s", !x ? "scores" : "labels");
    bool none = false;
    if (read_reduction(n, &none, err)) return -1;
    if (x->rank >= 0 && x->rank < 2) return mp_fail(err, "scores have rank %d; expected (N, C, d1, ...)", x->rank);
    if (x->rank >= 0 && target->rank >= 0) {
        if (target->rank != x->rank - 1)
            return mp_fail(err, "labels have rank %d but scores have rank %d; expected rank %d", target->rank, x->rank,
                           x->rank - 1);
        for (int i = 0; i < target->rank; i++)
            if (nn_check_dim(g, target->dims[i], x->dims[i ? i + 1 : 0],
                             i ? "a labels spatial dim" : "labels batch size", err))
                return -1;
    }
    if (w && w->rank >= 0) {
        if (w->rank != 1) return mp_fail(err, "weight has rank %d; expected 1-D (C)", w->rank);
        if (x->rank >= 2 && nn_check_dim(g, w->dims[0], x->dims[1], "weight length", err)) return -1;
    }
    mp_set_out_like(g, n, 1, x->dtype, x);
    if (!none) return mp_set_out(g, n, 0, x->dtype, 0, NULL);
    if (x->rank < 0 && target->rank < 0) return nn_set_unknown(g, n, 0, x->dtype);
    mp_dim dims[MP_MAX_RANK];
    int rank = x->rank >= 0 ? x->rank - 1 : target->rank;
    for (int i = 0; i < rank; i++) {
        mp_dim a = x->rank >= 0 ? x->dims[i ? i + 1 : 0] : MP_DIM_UNKNOWN;
        dims[i] = target->rank >= 0 ? nn_dim_merge(a, target->dims[i]) : a;
    }
    return mp_set_out(g, n, 0, x->dtype, rank, dims);
}

int shape_NegativeLogLikelihoodLoss(mp_graph *g, mp_node *n, mp_err *err) { return loss_rule(g, n, err); }
int shape_SoftmaxCrossEntropyLoss(mp_graph *g, mp_node *n, mp_err *err) { return loss_rule(g, n, err); }

/* ---- sampling grids --------------------------------------------------------------------- */

/* X[N, C, D1..Dr], grid[N, D1'..Dr', r] -> Y[N, C, D1'..Dr'] */
int shape_GridSample(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *grid = mp_in(g, n, 1);
    if (!x || !grid) return mp_fail(err, "missing input %s", !x ? "X" : "grid");
    if (x->rank >= 0 && x->rank < 3) return mp_fail(err, "X has rank %d; expected (N, C, D1, ...)", x->rank);
    if (x->rank >= 0 && grid->rank >= 0) {
        if (grid->rank != x->rank) return mp_fail(err, "grid has rank %d but X has rank %d", grid->rank, x->rank);
        if (nn_check_dim(g, grid->dims[0], x->dims[0], "grid's batch size", err) ||
            nn_check_dim(g, grid->dims[x->rank - 1], mp_dim_of(x->rank - 2), "grid's last dim", err))
            return -1;
    }
    int rank = x->rank >= 0 ? x->rank : grid->rank;
    if (rank < 0) return nn_set_unknown(g, n, 0, x->dtype);
    mp_dim dims[MP_MAX_RANK];
    dims[0] =
        nn_dim_merge(x->rank >= 0 ? x->dims[0] : MP_DIM_UNKNOWN, grid->rank >= 0 ? grid->dims[0] : MP_DIM_UNKNOWN);
    dims[1] = x->rank >= 0 ? x->dims[1] : MP_DIM_UNKNOWN;
    for (int i = 2; i < rank; i++) dims[i] = grid->rank >= 0 ? grid->dims[i - 1] : MP_DIM_UNKNOWN;
    return mp_set_out(g, n, 0, x->dtype, rank, dims);
}

/* theta[N, 2, 3] or [N, 3, 4], size = (N, C, H, W) or (N, C, D, H, W)
 * -> grid[N, H, W, 2] or [N, D, H, W, 3] */
int shape_AffineGrid(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *theta = mp_in(g, n, 0), *size = mp_in(g, n, 1);
    if (!theta || !size) return mp_fail(err, "missing input %s", !theta ? "theta" : "size");
    mp_dim sz[MP_MAX_RANK];
    int k = mp_const_dims(g, size, sz, MP_MAX_RANK);
    if (k < 0) {
        /* the rank still follows from size's length */
        if (size->rank == 1 && (size->dims[0].v == 4 || size->dims[0].v == 5)) {
            int r = (int)size->dims[0].v; /* [N, H, W, 2] or [N, D, H, W, 3] */
            mp_dim dims[5];
            for (int i = 0; i < r; i++) dims[i] = MP_DIM_UNKNOWN;
            dims[0] = theta->rank == 3 ? theta->dims[0] : MP_DIM_UNKNOWN;
            dims[r - 1] = mp_dim_of(r - 2);
            return mp_set_out(g, n, 0, theta->dtype, r, dims);
        }
        return nn_set_unknown(g, n, 0, theta->dtype);
    }
    if (k != 4 && k != 5) return mp_fail(err, "size has %d entries; expected 4 (N, C, H, W) or 5 (N, C, D, H, W)", k);
    int nsp = k - 2;
    if (nn_check_rank(theta, 3, "theta", err)) return -1;
    if (theta->rank == 3 && (nn_check_dim(g, theta->dims[1], mp_dim_of(nsp), "theta dim 1", err) ||
                             nn_check_dim(g, theta->dims[2], mp_dim_of(nsp + 1), "theta dim 2", err) ||
                             nn_check_dim(g, theta->dims[0], sz[0], "theta's batch size", err)))
        return -1;
    mp_dim dims[5];
    dims[0] = nn_dim_merge(sz[0], theta->rank == 3 ? theta->dims[0] : MP_DIM_UNKNOWN);
    for (int i = 0; i < nsp; i++) dims[1 + i] = sz[2 + i];
    dims[1 + nsp] = mp_dim_of(nsp);
    for (int i = 0; i < nsp + 2; i++)
        if (dims[i].v < -1) return mp_fail(err, "size has a negative entry");
    return mp_set_out(g, n, 0, theta->dtype, nsp + 2, dims);
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

/* IoU of two boxes in corner ([y1, x1, y2, x2], either order) or center
 * ([xc, yc, w, h]) format. */
static double nms_iou(const double *a, const double *b, bool center)
{
    double ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
    if (center) {
        ax1 = a[0] - a[2] / 2, ax2 = a[0] + a[2] / 2, ay1 = a[1] - a[3] / 2, ay2 = a[1] + a[3] / 2;
        bx1 = b[0] - b[2] / 2, bx2 = b[0] + b[2] / 2, by1 = b[1] - b[3] / 2, by2 = b[1] + b[3] / 2;
    } else {
        ay1 = fmin(a[0], a[2]), ay2 = fmax(a[0], a[2]), ax1 = fmin(a[1], a[3]), ax2 = fmax(a[1], a[3]);
        by1 = fmin(b[0], b[2]), by2 = fmax(b[0], b[2]), bx1 = fmin(b[1], b[3]), bx2 = fmax(b[1], b[3]);
    }
    double ih = fmin(ay2, by2) - fmax(ay1, by1), iw = fmin(ax2, bx2) - fmax(ax1, bx1);
    if (ih <= 0 || iw <= 0) return 0;
    double inter = ih * iw, uni = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter;
    return uni > 0 ? inter / uni : 0;
}

/* Selects greedily (highest score first) the boxes of one (batch, class);
 * writes their box indices to sel, returns how many. */
static int64_t nms_select(const double *boxes, const double *scores, int64_t nbox, int64_t max_out, double iou_th,
                          double score_th, bool has_score_th, bool center, int64_t *order, int64_t *sel)
{
    int64_t cand = 0;
    for (int64_t i = 0; i < nbox; i++)
        if (!has_score_th || scores[i] > score_th) order[cand++] = i;
    /* stable selection by descending score (insertion sort; the fold limit keeps n small) */
    for (int64_t i = 1; i < cand; i++) {
        int64_t v = order[i], j = i;
        while (j > 0 && scores[order[j - 1]] < scores[v]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    int64_t nsel = 0;
    for (int64_t i = 0; i < cand && nsel < max_out; i++) {
        bool keep = true;
        for (int64_t j = 0; j < nsel && keep; j++)
            keep = nms_iou(boxes + 4 * order[i], boxes + 4 * sel[j], center) <= iou_th;
        if (keep) sel[nsel++] = order[i];
    }
    return nsel;
}

/* boxes[B, S, 4], scores[B, C, S], max_output_boxes_per_class, iou_threshold,
 * score_threshold -> selected_indices[num_selected, 3] (batch, class, box).
 * num_selected depends on the data: computed when every input is known,
 * else a fresh unknown dim. */
int shape_NonMaxSuppression(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *boxes = mp_in(g, n, 0), *scores = mp_in(g, n, 1);
    const mp_value *maxo = mp_in(g, n, 2), *iou = mp_in(g, n, 3), *sth = mp_in(g, n, 4);
    if (!boxes || !scores) return mp_fail(err, "missing input %s", !boxes ? "boxes" : "scores");
    if (nn_check_rank(boxes, 3, "boxes", err) || nn_check_rank(scores, 3, "scores", err)) return -1;
    if (boxes->rank == 3 && nn_check_dim(g, boxes->dims[2], mp_dim_of(4), "boxes' last dim", err)) return -1;
    if (boxes->rank == 3 && scores->rank == 3 &&
        (nn_check_dim(g, scores->dims[0], boxes->dims[0], "scores' batch size", err) ||
         nn_check_dim(g, scores->dims[2], boxes->dims[1], "scores' box count", err)))
        return -1;
    mp_dim dims[2] = {MP_DIM_UNKNOWN, mp_dim_of(3)};
    bool known =
        boxes->konst && scores->konst && (!maxo || maxo->konst) && (!iou || iou->konst) && (!sth || sth->konst);
    if (!known || boxes->rank != 3 || scores->rank != 3 || mp_foldable_numel(boxes) < 0 ||
        mp_foldable_numel(scores) < 0)
        return mp_set_out(g, n, 0, MP_INT64, 2, dims);

    int64_t nb = boxes->dims[0].v, ns = boxes->dims[1].v, nc = scores->dims[1].v;
    int64_t max_out = maxo && maxo->konst->numel ? mp_tensor_get_i64(maxo->konst, 0) : 0;
    double iou_th = iou && iou->konst->numel ? mp_tensor_get_f64(iou->konst, 0) : 0;
    bool has_sth = sth && sth->konst->numel;
    double score_th = has_sth ? mp_tensor_get_f64(sth->konst, 0) : 0;
    bool center = mp_attr_int(n, "center_point_box", 0) != 0;
    if (max_out < 0) max_out = 0;

    double *bx = malloc((size_t)(boxes->konst->numel + 1) * sizeof *bx);
    double *sc = malloc((size_t)(scores->konst->numel + 1) * sizeof *sc);
    int64_t *order = malloc((size_t)(ns + 1) * sizeof *order), *sel = malloc((size_t)(ns + 1) * sizeof *sel);
    int64_t *picked = malloc((size_t)(nb * nc * ns + 1) * 3 * sizeof *picked);
    if (!bx || !sc || !order || !sel || !picked) {
        free(bx), free(sc), free(order), free(sel), free(picked);
        return mp_fail(err, "out of memory");
    }
    for (int64_t i = 0; i < boxes->konst->numel; i++) bx[i] = mp_tensor_get_f64(boxes->konst, i);
    for (int64_t i = 0; i < scores->konst->numel; i++) sc[i] = mp_tensor_get_f64(scores->konst, i);
    int64_t total = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < nc; c++) {
            int64_t k = nms_select(bx + b * ns * 4, sc + (b * nc + c) * ns, ns, max_out, iou_th, score_th, has_sth,
                                   center, order, sel);
            for (int64_t j = 0; j < k; j++, total++) {
                picked[3 * total] = b;
                picked[3 * total + 1] = c;
                picked[3 * total + 2] = sel[j];
            }
        }
    int64_t shape[2] = {total, 3};
    mp_tensor *t = mp_tensor_new(g->arena, MP_INT64, 2, shape);
    memcpy(t->data, picked, (size_t)total * 3 * sizeof *picked);
    free(bx), free(sc), free(order), free(sel), free(picked);
    return mp_set_out_const(g, n, 0, t);
}
