/* cpu_grad.c - reference kernels of the training step's memplan-domain ops
 * (ir/ops/grad.def), checked by the finite-difference tests (tests/test_train.c,
 * tests/test_grad_rules.c). Float types only; sums accumulated in double;
 * windows (Conv, pools) over 1 to N spatial dims. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "runtime/kernels.h"

static int need_floats(const mp_kargs *k, mp_err *err)
{
    for (int i = 0; i < k->nin; i++)
        if (k->in[i] && !mp_dtype_is_float(k->in[i]->dtype))
            return mp_kunsupported(err, "input %d is %s", i, mp_dtype_name(k->in[i]->dtype));
    for (int i = 0; i < k->nout; i++)
        if (!k->out[i]) return mp_fail(err, "output %d missing", i);
    return 0;
}

/* dX = f(dY, S) elementwise, S the saved tensor of dX's shape. */
static int pointwise(const mp_kargs *k, mp_err *err, double (*f)(double dy, double s))
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *dy = mp_kin(k, 0), *s = mp_kin(k, 1);
    mp_tensor *dx = k->out[0];
    if (!dy || !s || dy->numel != dx->numel || s->numel != dx->numel)
        return mp_fail(err, "dY, saved and dX must have one shape");
    for (int64_t i = 0; i < dx->numel; i++)
        mp_tensor_set_f64(dx, i, f(mp_tensor_get_f64(dy, i), mp_tensor_get_f64(s, i)));
    return 0;
}

static double relu_grad(double dy, double y) { return y > 0 ? dy : 0; }
static double sigmoid_grad(double dy, double y) { return dy * y * (1 - y); }
static double tanh_grad(double dy, double y) { return dy * (1 - y * y); }

int mp_cpu_ReluGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, relu_grad); }
int mp_cpu_SigmoidGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, sigmoid_grad); }
int mp_cpu_TanhGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, tanh_grad); }

int mp_cpu_Scale(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *x = mp_kin(k, 0);
    double a = mp_attr_float(k->node, "alpha", 1.0f);
    for (int64_t i = 0; i < x->numel; i++) mp_tensor_set_f64(k->out[0], i, a * mp_tensor_get_f64(x, i));
    return 0;
}

/* Index into `small` (rank r, right-aligned against big's rank R, size-1 dims
 * broadcast) of big's element at multi-index idx. */
static int64_t bcast_index(const int64_t *idx, int R, const int64_t *dims, int r)
{
    int64_t off = 0;
    for (int a = 0; a < r; a++) {
        int64_t d = dims[a], i = idx[R - r + a];
        off = off * d + (d == 1 ? 0 : i);
    }
    return off;
}

static void next_index(int64_t *idx, const int64_t *dims, int rank)
{
    for (int a = rank - 1; a >= 0; a--) {
        if (++idx[a] < dims[a]) return;
        idx[a] = 0;
    }
}

/* Y[small] = sum of X over the axes X was broadcast along. */
int mp_cpu_SumToShape(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = k->out[0];
    if (y->rank > x->rank) return mp_fail(err, "output rank %d exceeds the input's %d", y->rank, x->rank);
    for (int a = 0; a < y->rank; a++) {
        int64_t d = y->dims[a], e = x->dims[x->rank - y->rank + a];
        if (d != 1 && d != e)
            return mp_fail(err, "output dim %d (%lld) does not broadcast to %lld", a, (long long)d, (long long)e);
    }
    double *acc = mp_scratch_array(k->scratch, y->numel ? y->numel : 1, sizeof *acc);
    if (!acc) return mp_fail(err, "out of scratch memory");
    memset(acc, 0, (size_t)(y->numel ? y->numel : 1) * sizeof *acc);
    int64_t idx[MP_MAX_RANK] = {0};
    for (int64_t i = 0; i < x->numel; i++, next_index(idx, x->dims, x->rank))
        acc[bcast_index(idx, x->rank, y->dims, y->rank)] += mp_tensor_get_f64(x, i);
    for (int64_t i = 0; i < y->numel; i++) mp_tensor_set_f64(y, i, acc[i]);
    return 0;
}

/* dX[X's shape] = dY broadcast back over the reduced axes (divided by their size for the mean). */
static int reduce_grad(const mp_kargs *k, mp_err *err, bool mean)
{
    if (!mp_kin(k, 0) || !mp_dtype_is_float(k->in[0]->dtype)) return mp_kunsupported(err, "dY must be float");
    const mp_tensor *dy = k->in[0];
    mp_tensor *dx = k->out[0];
    int rank = dx->rank;
    int64_t axes[MP_MAX_RANK];
    int na;
    if (mp_kin(k, 1)) {
        na = mp_read_ints(k->in[1], axes, MP_MAX_RANK, "axes", err);
        if (na < 0) return -1;
    } else {
        const int64_t *a;
        na = mp_attr_ints(k->node, "axes", &a);
        if (na > MP_MAX_RANK) return mp_fail(err, "too many axes");
        for (int i = 0; i < na; i++) axes[i] = a[i];
    }
    bool reduced[MP_MAX_RANK];
    for (int a = 0; a < rank; a++) reduced[a] = na <= 0 && !mp_attr_int(k->node, "noop_with_empty_axes", 0);
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= rank) return mp_fail(err, "axis %lld out of range", (long long)axes[i]);
        reduced[a] = true;
    }
    int64_t kd[MP_MAX_RANK], count = 1;
    for (int a = 0; a < rank; a++) {
        kd[a] = reduced[a] ? 1 : dx->dims[a];
        if (reduced[a]) count *= dx->dims[a];
    }
    int64_t kn = 1;
    for (int a = 0; a < rank; a++) kn *= kd[a];
    if (kn != dy->numel)
        return mp_fail(err, "dY has %lld elements, the reduction gives %lld", (long long)dy->numel, (long long)kn);
    double scale = mean && count ? 1.0 / (double)count : 1.0;
    int64_t idx[MP_MAX_RANK] = {0};
    for (int64_t i = 0; i < dx->numel; i++, next_index(idx, dx->dims, rank))
        mp_tensor_set_f64(dx, i, scale * mp_tensor_get_f64(dy, bcast_index(idx, rank, kd, rank)));
    return 0;
}

int mp_cpu_ReduceSumGrad(const mp_kargs *k, mp_err *err) { return reduce_grad(k, err, false); }
int mp_cpu_ReduceMeanGrad(const mp_kargs *k, mp_err *err) { return reduce_grad(k, err, true); }

/* A MatMul operand's dims as numpy promotes them: a 1-D A [K] is [1, K], a
 * 1-D B [K] is [K, 1]; dY gets back the unit dims the product removed. */
typedef struct mmdims {
    int rank;
    int64_t d[MP_MAX_RANK];
} mmdims;

static int promote(const mp_tensor *t, bool is_a, bool a1, bool b1, bool is_dy, mmdims *p, mp_err *err)
{
    int r = t->rank;
    if (r + 2 > MP_MAX_RANK) return mp_fail(err, "rank %d too large", r);
    memcpy(p->d, t->dims, (size_t)r * sizeof *p->d);
    p->rank = r;
    if (is_dy) {
        if (a1) { /* the M axis: before N, or last when B is 1-D too */
            int at = b1 ? r : r - 1;
            if (at < 0) return mp_fail(err, "dY has rank %d", r);
            memmove(p->d + at + 1, p->d + at, (size_t)(r - at) * sizeof *p->d);
            p->d[at] = 1, p->rank++;
        }
        if (b1) p->d[p->rank++] = 1;
    } else if (r == 1) {
        if (is_a) p->d[1] = p->d[0], p->d[0] = 1;
        else p->d[1] = 1;
        p->rank = 2;
    }
    if (p->rank < 2) return mp_fail(err, "operand of rank %d", r);
    return 0;
}

/* MatMul gradients, summed over the batch dims the operand was broadcast along:
 *   a_side: out[.., M, K] = dY[.., M, N] . B[.., K, N]^T   (inputs dY, B)
 *   else:   out[.., K, N] = A[.., M, K]^T . dY[.., M, N]   (inputs A, dY)
 * 1-D operands as numpy / ONNX promote them (see promote). */
static int matmul_grad(const mp_kargs *k, mp_err *err, bool a_side)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *p = mp_kin(k, 0), *q = mp_kin(k, 1);
    mp_tensor *out = k->out[0];
    if (!p || !q) return mp_fail(err, "takes two inputs");
    const mp_tensor *dyt = a_side ? p : q, *ot = a_side ? q : p;
    bool a1 = (a_side ? out : ot)->rank == 1, b1 = (a_side ? ot : out)->rank == 1;
    mmdims dy, o, r;
    if (promote(dyt, false, a1, b1, true, &dy, err) || promote(ot, !a_side, a1, b1, false, &o, err) ||
        promote(out, a_side, a1, b1, false, &r, err))
        return -1;
    int64_t M = dy.d[dy.rank - 2], N = dy.d[dy.rank - 1];
    int64_t K = a_side ? o.d[o.rank - 2] : o.d[o.rank - 1];
    if ((a_side ? o.d[o.rank - 1] : o.d[o.rank - 2]) != (a_side ? N : M)) return mp_fail(err, "inner dims differ");
    if (r.d[r.rank - 2] != (a_side ? M : K) || r.d[r.rank - 1] != (a_side ? K : N))
        return mp_fail(err, "the output's matrix dims do not match dY");
    int nb = dy.rank - 2;
    int64_t nbatch = 1;
    for (int a = 0; a < nb; a++) nbatch *= dy.d[a];
    if (dyt->dtype != out->dtype || ot->dtype != out->dtype || (out->dtype != MP_FLOAT && out->dtype != MP_DOUBLE))
        return mp_fail(err, "dtype %s (float32 or float64, one for all)", mp_dtype_name(out->dtype));
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return mp_fail(err, "matrix dims past BLAS's int range");
    /* one GEMM per batch, summed into out where the operand was broadcast */
    size_t es = mp_elem_size(out->dtype);
    if (out->numel) memset(out->data, 0, (size_t)out->numel * es);
    int64_t bidx[MP_MAX_RANK] = {0};
    for (int64_t bi = 0; bi < nbatch; bi++, next_index(bidx, dy.d, nb)) {
        const char *g = (const char *)dyt->data + (size_t)(bi * M * N) * es;
        const char *x = (const char *)ot->data + (size_t)(bcast_index(bidx, nb, o.d, o.rank - 2) * (a_side ? K * N : M * K)) * es;
        char *ob = (char *)out->data + (size_t)(bcast_index(bidx, nb, r.d, r.rank - 2) * (a_side ? M * K : K * N)) * es;
        if (a_side) /* out[M, K] += dY[M, N] . B[K, N]^T */
            mp_cpu_gemm(out->dtype, false, true, M, K, N, 1, g, N, x, N, 1, ob, K);
        else /* out[K, N] += A[M, K]^T . dY[M, N] */
            mp_cpu_gemm(out->dtype, true, false, K, N, M, 1, x, K, g, N, 1, ob, N);
    }
    return 0;
}

int mp_cpu_MatMulGradA(const mp_kargs *k, mp_err *err) { return matmul_grad(k, err, true); }
int mp_cpu_MatMulGradB(const mp_kargs *k, mp_err *err) { return matmul_grad(k, err, false); }

static double erf_grad(double dy, double x) { return dy * 1.1283791670955126 * exp(-x * x); } /* 2/sqrt(pi) */
static double sqrt_grad(double dy, double y) { return dy / (2 * y); }

int mp_cpu_ErfGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, erf_grad); }
int mp_cpu_SqrtGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, sqrt_grad); }

/* dX[dY's shape] = dY * E * X^(E-1), X and E broadcast to dY. */
int mp_cpu_PowGrad(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *e = mp_kin(k, 2);
    if (!dy || !x || !e || x->rank > dy->rank || e->rank > dy->rank)
        return mp_fail(err, "X and E must broadcast to dY");
    int64_t idx[MP_MAX_RANK] = {0};
    for (int64_t i = 0; i < dy->numel; i++, next_index(idx, dy->dims, dy->rank)) {
        double xv = mp_tensor_get_f64(x, bcast_index(idx, dy->rank, x->dims, x->rank));
        double ev = mp_tensor_get_f64(e, bcast_index(idx, dy->rank, e->dims, e->rank));
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(dy, i) * ev * pow(xv, ev - 1));
    }
    return 0;
}

/* dY where the condition picks this branch (0: X, 1: Y), else 0; C broadcast to dY. */
int mp_cpu_WhereGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *c = mp_kin(k, 1);
    if (!dy || !c || !mp_dtype_is_float(dy->dtype) || c->rank > dy->rank)
        return mp_fail(err, "takes float dY and a condition that broadcasts to it");
    bool first = mp_attr_int(k->node, "branch", 0) == 0;
    int64_t idx[MP_MAX_RANK] = {0};
    for (int64_t i = 0; i < dy->numel; i++, next_index(idx, dy->dims, dy->rank)) {
        bool pick = (mp_tensor_get_i64(c, bcast_index(idx, dy->rank, c->dims, c->rank)) != 0) == first;
        mp_tensor_set_f64(k->out[0], i, pick ? mp_tensor_get_f64(dy, i) : 0.0);
    }
    return 0;
}

/* dX = Y * (dY - sum(dY * Y)) along the axis (opset < 13: over the flattened dims from axis on). */
/* Softmax's gradient, dX = Y (dY - sum(dY Y)), and LogSoftmax's, dX = dY - exp(Y) sum(dY), over the
 * axis (opset 13+) or every axis from it on (before 13: the coerced 2-D form). */
static int softmax_grad(const mp_kargs *k, bool log, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *dy = mp_kin(k, 0), *y = mp_kin(k, 1);
    if (!dy || !y || dy->numel != y->numel || y->rank < 1) return mp_fail(err, "dY and Y must have one shape");
    bool old = mp_graph_opset(k->g, "") < 13;
    int64_t axis = mp_attr_int(k->node, "axis", old ? 1 : -1);
    if (axis < 0) axis += y->rank;
    if (axis < 0 || axis >= y->rank) return mp_fail(err, "axis out of range");
    int64_t outer = 1, n = 1, inner = 1;
    for (int a = 0; a < y->rank; a++) {
        if (a < axis)
            outer *= y->dims[a];
        else if (a == axis || old)
            n *= y->dims[a];
        else
            inner *= y->dims[a];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            double dot = 0;
            for (int64_t j = 0; j < n; j++)
                dot += mp_tensor_get_f64(dy, base + j * inner) * (log ? 1 : mp_tensor_get_f64(y, base + j * inner));
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j * inner;
                double yi = mp_tensor_get_f64(y, i), dyi = mp_tensor_get_f64(dy, i);
                mp_tensor_set_f64(k->out[0], i, log ? dyi - exp(yi) * dot : yi * (dyi - dot));
            }
        }
    return 0;
}

int mp_cpu_SoftmaxGrad(const mp_kargs *k, mp_err *err) { return softmax_grad(k, false, err); }
int mp_cpu_LogSoftmaxGrad(const mp_kargs *k, mp_err *err) { return softmax_grad(k, true, err); }

/* dScores = dLoss * w[label] * (softmax - onehot(label)) / norm, from log_prob [N, C, d..]
 * and labels [N, d..]; norm is the weight sum for `mean`, 1 for `sum`; `none` takes dLoss per item. */
/* SoftmaxCrossEntropyLoss's gradient over log_prob: w (softmax - onehot) / norm; NegativeLogLikelihoodLoss's
 * (nll) over its input: -w onehot / norm (the input is read for its shape only). */
static int xent_grad(const mp_kargs *k, bool nll, mp_err *err)
{
    const mp_tensor *dl = mp_kin(k, 0), *lp = mp_kin(k, 1), *lab = mp_kin(k, 2), *w = mp_kin(k, 3);
    if (!dl || !lp || !lab || !mp_dtype_is_float(lp->dtype) || lp->rank < 2)
        return mp_fail(err, "takes dLoss, log_prob [N, C, ..] and labels");
    const char *red = mp_attr_str(k->node, "reduction", "mean");
    bool none = !strcmp(red, "none"), mean = !strcmp(red, "mean");
    int64_t ignore = mp_attr_int(k->node, "ignore_index", INT64_MIN);
    bool has_ignore = mp_node_attr(k->node, "ignore_index") != NULL;
    int64_t N = lp->dims[0], C = lp->dims[1], D = C ? lp->numel / (N * C) : 0;
    if (lab->numel != N * D)
        return mp_fail(err, "labels have %lld elements, not %lld", (long long)lab->numel, (long long)(N * D));
    double norm = 0;
    for (int64_t i = 0; i < N * D; i++) {
        int64_t l = mp_tensor_get_i64(lab, i);
        if (has_ignore && l == ignore) continue;
        if (l < 0 || l >= C) return mp_fail(err, "label %lld out of range [0, %lld)", (long long)l, (long long)C);
        norm += w ? mp_tensor_get_f64(w, l) : 1.0;
    }
    if (!mean || norm == 0) norm = 1;
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t d = 0; d < D; d++) {
            int64_t item = nn * D + d, l = mp_tensor_get_i64(lab, item);
            bool skip = has_ignore && l == ignore;
            double s = skip ? 0 : (w ? mp_tensor_get_f64(w, l) : 1.0) * mp_tensor_get_f64(dl, none ? item : 0) / norm;
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (nn * C + c) * D + d;
                mp_tensor_set_f64(k->out[0], i, s * ((nll ? 0 : exp(mp_tensor_get_f64(lp, i))) - (c == l ? 1.0 : 0.0)));
            }
        }
    return 0;
}

int mp_cpu_SoftmaxCrossEntropyGrad(const mp_kargs *k, mp_err *err) { return xent_grad(k, false, err); }
int mp_cpu_NegativeLogLikelihoodGrad(const mp_kargs *k, mp_err *err) { return xent_grad(k, true, err); }

/* GELU'(x): exact (erf) or tanh approximation, as the forward's `approximate`. */
int mp_cpu_GeluGrad(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1);
    if (!dy || !x || dy->numel != x->numel) return mp_fail(err, "dY and X must have one shape");
    bool tanh_form = !strcmp(mp_attr_str(k->node, "approximate", "none"), "tanh");
    for (int64_t i = 0; i < x->numel; i++) {
        double v = mp_tensor_get_f64(x, i), d;
        if (tanh_form) {
            double c = 0.7978845608028654, u = tanh(c * (v + 0.044715 * v * v * v)); /* sqrt(2/pi) */
            d = 0.5 * (1 + u) + 0.5 * v * (1 - u * u) * c * (1 + 3 * 0.044715 * v * v);
        } else {
            d = 0.5 * (1 + erf(v * 0.7071067811865476)) + v * exp(-0.5 * v * v) * 0.3989422804014327; /* 1/sqrt(2 pi) */
        }
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(dy, i) * d);
    }
    return 0;
}

/* Table gradient of Gather: dY slices added into zeros at their indices (repeats accumulate). */
int mp_cpu_GatherGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *idx = mp_kin(k, 1);
    mp_tensor *out = k->out[0];
    if (!dy || !idx || !mp_dtype_is_float(dy->dtype)) return mp_fail(err, "takes float dY and indices");
    int64_t axis = mp_attr_int(k->node, "axis", 0);
    if (axis < 0) axis += out->rank;
    if (axis < 0 || axis >= out->rank) return mp_fail(err, "axis out of range");
    int64_t outer = 1, inner = 1, n = out->dims[axis];
    for (int a = 0; a < out->rank; a++) {
        if (a < axis) outer *= out->dims[a];
        if (a > axis) inner *= out->dims[a];
    }
    if (dy->numel != outer * idx->numel * inner)
        return mp_fail(err, "dY has %lld elements, not %lld", (long long)dy->numel,
                       (long long)(outer * idx->numel * inner));
    int64_t on = out->numel ? out->numel : 1;
    double *acc = mp_scratch_array(k->scratch, on, sizeof *acc);
    if (!acc) return mp_fail(err, "out of scratch memory");
    memset(acc, 0, (size_t)on * sizeof *acc);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < idx->numel; j++) {
            int64_t r = mp_tensor_get_i64(idx, j);
            if (r < 0) r += n;
            if (r < 0 || r >= n) return mp_fail(err, "index %lld out of range", (long long)mp_tensor_get_i64(idx, j));
            for (int64_t i = 0; i < inner; i++)
                acc[(o * n + r) * inner + i] += mp_tensor_get_f64(dy, (o * idx->numel + j) * inner + i);
        }
    for (int64_t i = 0; i < out->numel; i++) mp_tensor_set_f64(out, i, acc[i]);
    return 0;
}

/* LayerNormalization backward over the dims from `axis` on, statistics recomputed
 * from X; scale (and bias) hold one value per normalized element. RMSNormalization
 * (rms): no mean, so no mean term in dX. */
static int layer_norm_grad(const mp_kargs *k, bool rms, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *sc = mp_kin(k, 2);
    if (!dy || !x || !sc || dy->numel != x->numel) return mp_fail(err, "takes dY, X and scale");
    if (!mp_dtype_is_float(dy->dtype) || !mp_dtype_is_float(x->dtype) || !mp_dtype_is_float(sc->dtype))
        return mp_kunsupported(err, "float tensors only");
    int64_t axis = mp_attr_int(k->node, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range");
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    int64_t n = 1;
    for (int a = (int)axis; a < x->rank; a++) n *= x->dims[a];
    if (sc->numel != n)
        return mp_kunsupported(err, "scale of %lld elements for rows of %lld", (long long)sc->numel, (long long)n);
    int64_t rows = n ? x->numel / n : 0;
    mp_tensor *dx = mp_kout(k, 0), *ds = mp_kout(k, 1), *db = mp_kout(k, 2);
    double *acc = mp_scratch_array(k->scratch, 2 * (n ? n : 1), sizeof *acc);
    if (!acc) return mp_fail(err, "out of scratch memory");
    memset(acc, 0, (size_t)(2 * (n ? n : 1)) * sizeof *acc);
    for (int64_t r = 0; r < rows; r++) {
        int64_t b = r * n;
        double mu = 0, var = 0, m1 = 0, m2 = 0;
        for (int64_t j = 0; j < n && !rms; j++) mu += mp_tensor_get_f64(x, b + j);
        mu /= (double)n;
        for (int64_t j = 0; j < n; j++) var += (mp_tensor_get_f64(x, b + j) - mu) * (mp_tensor_get_f64(x, b + j) - mu);
        double rstd = 1 / sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; j++) {
            double xh = (mp_tensor_get_f64(x, b + j) - mu) * rstd, g = mp_tensor_get_f64(dy, b + j);
            double dxh = g * mp_tensor_get_f64(sc, j);
            m1 += dxh, m2 += dxh * xh;
            acc[j] += g * xh, acc[n + j] += g;
        }
        m1 = rms ? 0 : m1 / (double)n, m2 /= (double)n;
        for (int64_t j = 0; dx && j < n; j++) {
            double xh = (mp_tensor_get_f64(x, b + j) - mu) * rstd;
            double dxh = mp_tensor_get_f64(dy, b + j) * mp_tensor_get_f64(sc, j);
            mp_tensor_set_f64(dx, b + j, rstd * (dxh - m1 - xh * m2));
        }
    }
    for (int64_t j = 0; j < n; j++) {
        if (ds) mp_tensor_set_f64(ds, j, acc[j]);
        if (db) mp_tensor_set_f64(db, j, acc[n + j]);
    }
    return 0;
}

int mp_cpu_LayerNormalizationGrad(const mp_kargs *k, mp_err *err) { return layer_norm_grad(k, false, err); }
int mp_cpu_RMSNormalizationGrad(const mp_kargs *k, mp_err *err) { return layer_norm_grad(k, true, err); }

/* GroupNormalization backward (InstanceNormalization: a group per channel):
 * X [N, C, ...] in G groups of C / G channels, statistics per (n, group)
 * recomputed from X; scale and bias per channel, or per group (opset 18). */
static int group_norm_grad(const mp_kargs *k, int64_t G, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *sc = mp_kin(k, 2);
    if (!dy || !x || !sc || dy->numel != x->numel || x->rank < 2) return mp_fail(err, "takes dY, X [N, C, ...] and scale");
    if (!mp_dtype_is_float(dy->dtype) || !mp_dtype_is_float(x->dtype) || !mp_dtype_is_float(sc->dtype))
        return mp_kunsupported(err, "float tensors only");
    int64_t N = x->dims[0], C = x->dims[1];
    if (G < 1 || C % G) return mp_fail(err, "num_groups must divide the channels");
    bool per_channel = sc->numel == C;
    if (!per_channel && sc->numel != G) return mp_fail(err, "scale must have C or num_groups elements");
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    int64_t per = N * C != 0 ? x->numel / (N * C) : 0, cg = C / G, len = cg * per, ns = sc->numel;
    mp_tensor *dx = mp_kout(k, 0), *ds = mp_kout(k, 1), *db = mp_kout(k, 2);
    double *acc = mp_scratch_array(k->scratch, 2 * (ns ? ns : 1), sizeof *acc);
    if (!acc) return mp_fail(err, "out of scratch memory");
    memset(acc, 0, (size_t)(2 * (ns ? ns : 1)) * sizeof *acc);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            int64_t b = (n * C + g * cg) * per;
            double mu = 0, var = 0, m1 = 0, m2 = 0;
            for (int64_t j = 0; j < len; j++) mu += mp_tensor_get_f64(x, b + j);
            mu = len ? mu / (double)len : 0;
            for (int64_t j = 0; j < len; j++) var += (mp_tensor_get_f64(x, b + j) - mu) * (mp_tensor_get_f64(x, b + j) - mu);
            double rstd = 1 / sqrt((len ? var / (double)len : 0) + eps);
            for (int64_t j = 0; j < len; j++) {
                int64_t p = per_channel ? g * cg + j / (per ? per : 1) : g;
                double xh = (mp_tensor_get_f64(x, b + j) - mu) * rstd, d = mp_tensor_get_f64(dy, b + j);
                double dxh = d * mp_tensor_get_f64(sc, p);
                m1 += dxh, m2 += dxh * xh;
                acc[p] += d * xh, acc[ns + p] += d;
            }
            m1 = len ? m1 / (double)len : 0, m2 = len ? m2 / (double)len : 0;
            for (int64_t j = 0; dx && j < len; j++) {
                int64_t p = per_channel ? g * cg + j / (per ? per : 1) : g;
                double xh = (mp_tensor_get_f64(x, b + j) - mu) * rstd;
                double dxh = mp_tensor_get_f64(dy, b + j) * mp_tensor_get_f64(sc, p);
                mp_tensor_set_f64(dx, b + j, rstd * (dxh - m1 - xh * m2));
            }
        }
    for (int64_t j = 0; j < ns; j++) {
        if (ds) mp_tensor_set_f64(ds, j, acc[j]);
        if (db) mp_tensor_set_f64(db, j, acc[ns + j]);
    }
    return 0;
}

int mp_cpu_InstanceNormalizationGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 1);
    return group_norm_grad(k, x && x->rank >= 2 ? x->dims[1] : 0, err);
}

int mp_cpu_GroupNormalizationGrad(const mp_kargs *k, mp_err *err)
{
    return group_norm_grad(k, mp_attr_int(k->node, "num_groups", 0), err);
}

/* ---- sliding windows over N spatial dims (Conv, MaxPool, AveragePool) ---- */

#define MAXSP (MP_MAX_RANK - 2)

/* One forward window op's geometry: input extents, output extents, kernel,
 * strides, dilations, begin / end pads per spatial dim; products of each. */
typedef struct wgeom {
    int n;
    int64_t in[MAXSP], out[MAXSP], k[MAXSP], s[MAXSP], d[MAXSP], pb[MAXSP], pe[MAXSP];
    int64_t in_n, out_n, k_n;
} wgeom;

/* Reads the window of a forward input x [N, C, in..] and output y [N, M, out..]
 * with kernel extents kd (W's spatial dims or kernel_shape): pads from the
 * attributes, or as auto_pad SAME / VALID derive them (as runtime/cpu_conv.c).
 * The output extents are y's, so ceil_mode needs no rounding of its own here. */
static int read_wgeom(const mp_kargs *k, const mp_tensor *x, const mp_tensor *y, const int64_t *kd, int nk,
                      wgeom *g, mp_err *err)
{
    if (x->rank < 3 || y->rank != x->rank || x->rank - 2 > MAXSP)
        return mp_kunsupported(err, "needs N, C and 1 to %d spatial dims, of one rank for X and dY", MAXSP);
    int n = g->n = x->rank - 2;
    if (nk != n) return mp_fail(err, "kernel has %d dims for %d spatial dims", nk, n);
    const int64_t *ss, *ds, *ps;
    int ns = mp_attr_ints(k->node, "strides", &ss), nd = mp_attr_ints(k->node, "dilations", &ds);
    int np = mp_attr_ints(k->node, "pads", &ps);
    if ((ns >= 0 && ns != n) || (nd >= 0 && nd != n) || (np >= 0 && np != 2 * n))
        return mp_fail(err, "strides, dilations or pads have the wrong length for %d spatial dims", n);
    const char *ap = mp_attr_str(k->node, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!same && !valid && strcmp(ap, "NOTSET") && *ap) return mp_fail(err, "unknown auto_pad '%s'", ap);
    g->in_n = g->out_n = g->k_n = 1;
    for (int i = 0; i < n; i++) {
        g->in[i] = x->dims[2 + i], g->out[i] = y->dims[2 + i], g->k[i] = kd[i];
        g->s[i] = ns >= 0 ? ss[i] : 1, g->d[i] = nd >= 0 ? ds[i] : 1;
        if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1) return mp_fail(err, "kernel, strides and dilations must be positive");
        if (same) {
            int64_t total = (g->out[i] - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1 - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        } else {
            g->pb[i] = np >= 0 && !valid ? ps[i] : 0, g->pe[i] = np >= 0 && !valid ? ps[n + i] : 0;
            if (g->pb[i] < 0 || g->pe[i] < 0) return mp_fail(err, "negative pads");
        }
        g->in_n *= g->in[i], g->out_n *= g->out[i], g->k_n *= g->k[i];
    }
    return 0;
}

/* off[kp * out_n + o]: the spatial offset in the input that kernel tap kp of
 * output position o reads, -1 where it falls in the padding. */
static int64_t *window_offsets(const mp_kargs *k, const wgeom *g, mp_err *err)
{
    int64_t cells = g->k_n * g->out_n, *off = mp_scratch_array(k->scratch, cells > 0 ? cells : 1, sizeof *off);
    if (!off) {
        mp_fail(err, "out of scratch memory");
        return NULL;
    }
    int64_t kidx[MAXSP] = {0};
    for (int64_t kp = 0; kp < g->k_n; kp++) {
        int64_t oidx[MAXSP] = {0};
        for (int64_t o = 0; o < g->out_n; o++) {
            int64_t at = 0;
            for (int i = 0; i < g->n && at >= 0; i++) {
                int64_t pos = oidx[i] * g->s[i] - g->pb[i] + kidx[i] * g->d[i];
                at = pos < 0 || pos >= g->in[i] ? -1 : at * g->in[i] + pos;
            }
            off[kp * g->out_n + o] = at;
            next_index(oidx, g->out, g->n);
        }
        next_index(kidx, g->k, g->n);
    }
    return off;
}

/* A float tensor's elements as doubles, in scratch. */
static double *doubles(const mp_kargs *k, const mp_tensor *t, mp_err *err)
{
    double *d = mp_scratch_array(k->scratch, t->numel ? t->numel : 1, sizeof *d);
    if (!d) {
        mp_fail(err, "out of scratch memory");
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) d[i] = mp_tensor_get_f64(t, i);
    return d;
}

/* A zeroed double accumulator of n elements, in scratch. */
static double *zeros(const mp_kargs *k, int64_t n, mp_err *err)
{
    double *d = mp_scratch_array(k->scratch, n ? n : 1, sizeof *d);
    if (!d) {
        mp_fail(err, "out of scratch memory");
        return NULL;
    }
    memset(d, 0, (size_t)(n ? n : 1) * sizeof *d);
    return d;
}

static void store(mp_tensor *t, const double *acc)
{
    for (int64_t i = 0; t && i < t->numel; i++) mp_tensor_set_f64(t, i, acc[i]);
}

/* Conv backward over 1 to N spatial dims, with groups, pads, strides,
 * dilations: (dY [N, M, out..], X [N, C, in..], W [M, C/group, k..]) -> dX, dW, dB
 * as requested (absent outputs are skipped). */
int mp_cpu_ConvGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *w = mp_kin(k, 2);
    if (!dy || !x || !w || !mp_dtype_is_float(dy->dtype) || !mp_dtype_is_float(x->dtype) || !mp_dtype_is_float(w->dtype))
        return mp_kunsupported(err, "takes float dY, X and W");
    if (w->rank != x->rank) return mp_fail(err, "W has rank %d, X %d", w->rank, x->rank);
    mp_tensor *dx = mp_kout(k, 0), *dw = mp_kout(k, 1), *db = mp_kout(k, 2);
    wgeom v;
    if (read_wgeom(k, x, dy, w->dims + 2, w->rank - 2, &v, err)) return -1;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], Cg = w->dims[1];
    int64_t groups = mp_attr_int(k->node, "group", 1);
    if (groups < 1 || Cg * groups != C || M % groups || dy->dims[0] != N || dy->dims[1] != M)
        return mp_fail(err, "channels of dY, X and W do not match the groups");
    int64_t Mg = M / groups, *off = window_offsets(k, &v, err);
    const double *gy = off ? doubles(k, dy, err) : NULL, *xv = gy ? doubles(k, x, err) : NULL;
    const double *wv = xv ? doubles(k, w, err) : NULL;
    double *ax = wv && dx ? zeros(k, x->numel, err) : NULL, *aw = wv && dw ? zeros(k, w->numel, err) : NULL;
    double *ab = wv && db ? zeros(k, M, err) : NULL;
    if (!wv || (dx && !ax) || (dw && !aw) || (db && !ab)) return -1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            const double *gm = gy + (n * M + m) * v.out_n;
            for (int64_t o = 0; ab && o < v.out_n; o++) ab[m] += gm[o];
            for (int64_t cg = 0; cg < Cg; cg++) {
                int64_t xb = (n * C + (m / Mg) * Cg + cg) * v.in_n, wb = (m * Cg + cg) * v.k_n;
                for (int64_t kp = 0; kp < v.k_n; kp++) {
                    const int64_t *ok = off + kp * v.out_n;
                    double wk = wv[wb + kp], sw = 0;
                    for (int64_t o = 0; o < v.out_n; o++) {
                        if (ok[o] < 0) continue;
                        if (ax) ax[xb + ok[o]] += gm[o] * wk;
                        sw += gm[o] * xv[xb + ok[o]];
                    }
                    if (aw) aw[wb + kp] += sw;
                }
            }
        }
    store(dx, ax), store(dw, aw), store(db, ab);
    return 0;
}

/* The kernel_shape attribute of a pool (nsp entries). */
static int pool_kernel(const mp_kargs *k, const int64_t **ks, mp_err *err)
{
    int nk = mp_attr_ints(k->node, "kernel_shape", ks);
    if (nk < 0) return mp_fail(err, "missing attribute 'kernel_shape'");
    return nk;
}

/* MaxPool backward over 1 to N spatial dims: each window's dY goes to its
 * maximum, read from the forward's Indices (input 2, row-major flat indices
 * into X) or, without them or with storage_order 1, found again in X (first
 * maximum in kernel order, as the forward picks it). */
int mp_cpu_MaxPoolGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *ind = mp_kin(k, 2);
    mp_tensor *dx = k->out[0];
    if (!dy || !x || !mp_dtype_is_float(x->dtype) || !mp_dtype_is_float(dy->dtype) || dx->numel != x->numel)
        return mp_kunsupported(err, "takes float dY and X, dX like X");
    double *acc = zeros(k, dx->numel, err);
    if (!acc) return -1;
    if (ind && mp_attr_int(k->node, "storage_order", 0) == 0) {
        if (ind->numel != dy->numel) return mp_fail(err, "Indices must have dY's shape");
        for (int64_t i = 0; i < dy->numel; i++) {
            int64_t at = mp_tensor_get_i64(ind, i);
            if (at < 0 || at >= dx->numel) return mp_fail(err, "index %lld outside X", (long long)at);
            acc[at] += mp_tensor_get_f64(dy, i);
        }
        store(dx, acc);
        return 0;
    }
    const int64_t *ks;
    int nk = pool_kernel(k, &ks, err);
    wgeom v;
    if (nk < 0 || read_wgeom(k, x, dy, ks, nk, &v, err)) return -1;
    int64_t planes = x->dims[0] * x->dims[1], *off = window_offsets(k, &v, err);
    if (!off) return -1;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o = 0; o < v.out_n; o++) {
            int64_t best = -1;
            double bv = 0;
            for (int64_t kp = 0; kp < v.k_n; kp++) {
                int64_t at = off[kp * v.out_n + o];
                if (at < 0) continue;
                double xv = mp_tensor_get_f64(x, p * v.in_n + at);
                if (best < 0 || xv > bv) best = at, bv = xv;
            }
            if (best >= 0) acc[p * v.in_n + best] += mp_tensor_get_f64(dy, p * v.out_n + o);
        }
    store(dx, acc);
    return 0;
}

/* Taps of a window along spatial dim i at output position o that lie in
 * [lo, hi) of the input coordinates. */
static int64_t taps_within(const wgeom *g, int i, int64_t o, int64_t lo, int64_t hi)
{
    int64_t c = 0;
    for (int64_t j = 0; j < g->k[i]; j++) {
        int64_t pos = o * g->s[i] - g->pb[i] + j * g->d[i];
        c += pos >= lo && pos < hi;
    }
    return c;
}

/* dX[n, c, ...] = dY[n, c] / (spatial size). */
int mp_cpu_GlobalAveragePoolGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = k->out[0];
    if (!dy || !mp_dtype_is_float(dy->dtype) || dx->rank < 2) return mp_fail(err, "takes float dY [N, C, 1..]");
    int64_t nc = dx->dims[0] * dx->dims[1], sp = nc ? dx->numel / nc : 0;
    if (dy->numel != nc) return mp_fail(err, "dY must have N x C elements");
    for (int64_t i = 0; i < dx->numel; i++) mp_tensor_set_f64(dx, i, mp_tensor_get_f64(dy, i / sp) / (double)sp);
    return 0;
}

/* BatchNormalization backward over N and the spatial dims, per channel.
 * training_mode: batch statistics recomputed from X; else the running ones (inputs 3, 4). */
int mp_cpu_BatchNormalizationGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *sc = mp_kin(k, 2), *rm = mp_kin(k, 3), *rv = mp_kin(k, 4);
    if (!dy || !x || !sc || x->rank < 2 || !mp_dtype_is_float(x->dtype))
        return mp_fail(err, "takes dY, X [N, C, ..] and scale");
    bool train = mp_attr_int(k->node, "training_mode", 0) != 0;
    if (!train && (!rm || !rv)) return mp_fail(err, "inference mode needs the running mean and variance");
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    int64_t N = x->dims[0], C = x->dims[1], S = N * C > 0 ? x->numel / (N * C) : 0, cnt = N * S;
    mp_tensor *dx = mp_kout(k, 0), *ds = mp_kout(k, 1), *db = mp_kout(k, 2);
    for (int64_t c = 0; c < C; c++) {
        double mu = 0, var = 0, sb = 0, ss = 0;
        if (train) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) mu += mp_tensor_get_f64(x, (n * C + c) * S + s);
            mu /= (double)cnt;
            for (int64_t n = 0; n < N; n++)
                for (int64_t s = 0; s < S; s++) {
                    double d = mp_tensor_get_f64(x, (n * C + c) * S + s) - mu;
                    var += d * d;
                }
            var /= (double)cnt;
        } else {
            mu = mp_tensor_get_f64(rm, c), var = mp_tensor_get_f64(rv, c);
        }
        double rstd = 1 / sqrt(var + eps), gam = mp_tensor_get_f64(sc, c);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double g = mp_tensor_get_f64(dy, i);
                sb += g, ss += g * (mp_tensor_get_f64(x, i) - mu) * rstd;
            }
        for (int64_t n = 0; dx && n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double g = mp_tensor_get_f64(dy, i), xh = (mp_tensor_get_f64(x, i) - mu) * rstd;
                double v = train ? gam * rstd * (g - sb / (double)cnt - xh * ss / (double)cnt) : gam * rstd * g;
                mp_tensor_set_f64(dx, i, v);
            }
        if (ds) mp_tensor_set_f64(ds, c, ss);
        if (db) mp_tensor_set_f64(db, c, sb);
    }
    return 0;
}

int mp_cpu_HardSigmoidGrad(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1);
    if (!dy || !x || dy->numel != x->numel) return mp_fail(err, "dY and X must have one shape");
    double a = mp_attr_float(k->node, "alpha", 0.2f), b = mp_attr_float(k->node, "beta", 0.5f);
    for (int64_t i = 0; i < x->numel; i++) {
        double t = a * mp_tensor_get_f64(x, i) + b;
        mp_tensor_set_f64(k->out[0], i, t > 0 && t < 1 ? a * mp_tensor_get_f64(dy, i) : 0.0);
    }
    return 0;
}

static double hardswish_grad(double dy, double x) { return x < -3 ? 0 : x > 3 ? dy : dy * (2 * x + 3) / 6; }
int mp_cpu_HardSwishGrad(const mp_kargs *k, mp_err *err) { return pointwise(k, err, hardswish_grad); }

/* dX = mask ? dY / (1 - ratio) : 0 (inverted dropout, as the forward scales). */
int mp_cpu_DropoutGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *mask = mp_kin(k, 1);
    if (!dy || !mask || dy->numel != mask->numel || !mp_dtype_is_float(dy->dtype))
        return mp_fail(err, "takes float dY and a mask of its shape");
    double ratio = mp_attr_float(k->node, "ratio", 0.5f), s = ratio < 1 ? 1 / (1 - ratio) : 0;
    for (int64_t i = 0; i < dy->numel; i++)
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_i64(mask, i) ? s * mp_tensor_get_f64(dy, i) : 0.0);
    return 0;
}

int mp_cpu_Zeros(const mp_kargs *k, mp_err *err)
{
    (void)err;
    memset(k->out[0]->data, 0, mp_elem_size(k->out[0]->dtype) * (size_t)k->out[0]->numel);
    return 0;
}

/* AveragePool backward over 1 to N spatial dims: each window's dY spread
 * evenly over the cells it averaged; the divisor counts the pads too with
 * count_include_pad (not the part of a ceil_mode window past the end pads,
 * as the forward). */
int mp_cpu_AveragePoolGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = k->out[0];
    if (!dy || !mp_dtype_is_float(dy->dtype)) return mp_kunsupported(err, "takes float dY");
    const int64_t *ks;
    int nk = pool_kernel(k, &ks, err);
    wgeom v;
    if (nk < 0 || read_wgeom(k, dx, dy, ks, nk, &v, err)) return -1;
    bool incl = mp_attr_int(k->node, "count_include_pad", 0) != 0;
    int64_t planes = dx->dims[0] * dx->dims[1], *off = window_offsets(k, &v, err);
    double *acc = off ? zeros(k, dx->numel, err) : NULL, *inv = acc ? zeros(k, v.out_n, err) : NULL;
    if (!inv) return -1;
    int64_t oidx[MAXSP] = {0};
    for (int64_t o = 0; o < v.out_n; o++, next_index(oidx, v.out, v.n)) {
        int64_t cnt = 1;
        for (int i = 0; i < v.n; i++)
            cnt *= incl ? taps_within(&v, i, oidx[i], -v.pb[i], v.in[i] + v.pe[i]) : taps_within(&v, i, oidx[i], 0, v.in[i]);
        inv[o] = cnt ? 1.0 / (double)cnt : 0;
    }
    for (int64_t p = 0; p < planes; p++)
        for (int64_t kp = 0; kp < v.k_n; kp++)
            for (int64_t o = 0; o < v.out_n; o++) {
                int64_t at = off[kp * v.out_n + o];
                if (at >= 0) acc[p * v.in_n + at] += mp_tensor_get_f64(dy, p * v.out_n + o) * inv[o];
            }
    store(dx, acc);
    return 0;
}

/* Slice backward: dY written into zeros at the slice's positions (bounds from
 * inputs 1..4, or the attributes of opsets before 10). */
int mp_cpu_SliceGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = k->out[0];
    if (!dy || !mp_dtype_is_float(dy->dtype) || dy->rank != dx->rank) return mp_fail(err, "takes float dY of X's rank");
    int r = dx->rank;
    int64_t st[MP_MAX_RANK], ax[MP_MAX_RANK], sp[MP_MAX_RANK];
    int ns, na, nsp;
    if (mp_kin(k, 1)) {
        ns = mp_read_ints(k->in[1], st, MP_MAX_RANK, "starts", err);
        na = mp_kin(k, 3) ? mp_read_ints(k->in[3], ax, MP_MAX_RANK, "axes", err) : ns;
        nsp = mp_kin(k, 4) ? mp_read_ints(k->in[4], sp, MP_MAX_RANK, "steps", err) : ns;
        if (ns < 0 || na < 0 || nsp < 0) return -1;
        if (!mp_kin(k, 3))
            for (int i = 0; i < ns; i++) ax[i] = i;
        if (!mp_kin(k, 4))
            for (int i = 0; i < ns; i++) sp[i] = 1;
    } else {
        const int64_t *a;
        ns = mp_attr_ints(k->node, "starts", &a);
        if (ns < 0 || ns > MP_MAX_RANK) return mp_fail(err, "missing starts");
        memcpy(st, a, (size_t)ns * sizeof *st);
        na = mp_attr_ints(k->node, "axes", &a);
        for (int i = 0; i < ns; i++) ax[i] = na == ns ? a[i] : i, sp[i] = 1;
        na = nsp = ns;
    }
    if (na != ns || nsp != ns) return mp_fail(err, "starts, axes and steps differ in length");
    int64_t start[MP_MAX_RANK], step[MP_MAX_RANK];
    for (int a = 0; a < r; a++) start[a] = 0, step[a] = 1;
    for (int i = 0; i < ns; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + r : ax[i], d;
        if (a < 0 || a >= r || !sp[i]) return mp_fail(err, "bad axis or step");
        d = dx->dims[a];
        int64_t s = st[i] < 0 ? st[i] + d : st[i];
        if (sp[i] > 0)
            s = s < 0 ? 0 : s > d ? d : s;
        else
            s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
        start[a] = s, step[a] = sp[i];
    }
    for (int64_t i = 0; i < dx->numel; i++) mp_tensor_set_f64(dx, i, 0);
    int64_t idx[MP_MAX_RANK] = {0}, xs[MP_MAX_RANK];
    mp_strides(r, dx->dims, xs);
    for (int64_t i = 0; i < dy->numel; i++, next_index(idx, dy->dims, r)) {
        int64_t off = 0;
        for (int a = 0; a < r; a++) {
            int64_t p = start[a] + idx[a] * step[a];
            if (p < 0 || p >= dx->dims[a]) return mp_fail(err, "dY does not fit the slice");
            off += p * xs[a];
        }
        mp_tensor_set_f64(dx, off, mp_tensor_get_f64(dy, i));
    }
    return 0;
}

/* LRN backward (dY, X) -> dX, with D_c = bias + alpha / size * sum of X^2 over
 * the channel window of c, Y_c = X_c D_c^-beta:
 *   dX_j = dY_j D_j^-beta - 2 beta alpha / size X_j sum over c whose window holds j of dY_c X_c D_c^(-beta-1).
 * Not in kernels.def yet: the lead registers LRNGrad (grad.def, kernels.def). */
int mp_cpu_LRNGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1);
    mp_tensor *dx = k->out[0];
    if (!dy || !x || dy->numel != x->numel || x->rank < 2 || !mp_dtype_is_float(x->dtype) ||
        !mp_dtype_is_float(dy->dtype))
        return mp_fail(err, "takes float dY and X [N, C, ..] of one shape");
    int64_t size = mp_attr_int(k->node, "size", 0);
    if (size < 1) return mp_fail(err, "size must be positive");
    double a = mp_attr_float(k->node, "alpha", 1e-4f) / (double)size, beta = mp_attr_float(k->node, "beta", 0.75f);
    double bias = mp_attr_float(k->node, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], per = N * C > 0 ? x->numel / (N * C) : 0;
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* the forward's window [c - lo, c + hi] */
    double *d = zeros(k, 2 * C, err), *t = d ? d + C : NULL;
    if (!d) return -1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < per; i++) {
            for (int64_t c = 0; c < C; c++) {
                double sq = 0;
                for (int64_t j = c - lo; j <= c + hi; j++)
                    if (j >= 0 && j < C) sq += pow(mp_tensor_get_f64(x, (n * C + j) * per + i), 2);
                int64_t at = (n * C + c) * per + i;
                d[c] = bias + a * sq;
                t[c] = mp_tensor_get_f64(dy, at) * mp_tensor_get_f64(x, at) * pow(d[c], -beta - 1);
            }
            for (int64_t j = 0; j < C; j++) {
                double s = 0;
                for (int64_t c = j - hi; c <= j + lo; c++)
                    if (c >= 0 && c < C) s += t[c];
                int64_t at = (n * C + j) * per + i;
                mp_tensor_set_f64(dx, at, mp_tensor_get_f64(dy, at) * pow(d[j], -beta) - 2 * beta * a * mp_tensor_get_f64(x, at) * s);
            }
        }
    return 0;
}

/* Pad backward (dY, pads?, axes?) -> dX: each output position of the forward
 * maps back to the input position it copied (as mp_cpu_Pad: index o - begin,
 * then the mode's rule past the edges) and dY is summed there; constant
 * mode's fill positions give nothing. Pads from input 1, or the attributes
 * `pads` / `paddings` of opsets before 11; negative pads crop. */
int mp_cpu_PadGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = k->out[0];
    if (!dy || !mp_dtype_is_float(dy->dtype) || dy->rank != dx->rank) return mp_fail(err, "takes float dY of X's rank");
    int r = dx->rank, np, na = r;
    int64_t raw[2 * MP_MAX_RANK], axes[MP_MAX_RANK], begin[MP_MAX_RANK] = {0}, end[MP_MAX_RANK] = {0};
    if (mp_kin(k, 1)) {
        if ((np = mp_read_ints(k->in[1], raw, 2 * MP_MAX_RANK, "pads", err)) < 0) return -1;
    } else {
        const int64_t *p;
        np = mp_attr_ints(k->node, mp_node_attr(k->node, "pads") ? "pads" : "paddings", &p);
        if (np < 0 || np > 2 * MP_MAX_RANK) return mp_fail(err, "missing pads");
        memcpy(raw, p, (size_t)np * sizeof *raw);
    }
    if (mp_kin(k, 2) && (na = mp_read_ints(k->in[2], axes, MP_MAX_RANK, "axes", err)) < 0) return -1;
    if (np != 2 * na) return mp_fail(err, "pads has %d entries for %d axes", np, na);
    for (int i = 0; i < na; i++) {
        int64_t a = mp_kin(k, 2) ? (axes[i] < 0 ? axes[i] + r : axes[i]) : i;
        if (a < 0 || a >= r) return mp_fail(err, "axis out of range");
        begin[a] = raw[i], end[a] = raw[na + i];
    }
    const char *mode = mp_attr_str(k->node, "mode", "constant");
    for (int a = 0; a < r; a++)
        if (dy->dims[a] - dx->dims[a] != begin[a] + end[a]) return mp_fail(err, "dY's dim %d disagrees with the pads", a);
    int64_t *map, base[MP_MAX_RANK];
    if (mp_pad_index_map(k, mode, r, dx->dims, dy->dims, begin, &map, base, err)) return -1;
    double *acc = zeros(k, dx->numel, err);
    if (!acc) return -1;
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(r, dx->dims, xs);
    for (int64_t o = 0; o < dy->numel; o++, next_index(idx, dy->dims, r)) {
        int64_t at = 0;
        for (int a = 0; a < r && at >= 0; a++) {
            int64_t j = map[base[a] + idx[a]];
            at = j < 0 ? -1 : at + j * xs[a];
        }
        if (at >= 0) acc[at] += mp_tensor_get_f64(dy, o);
    }
    store(dx, acc);
    return 0;
}
