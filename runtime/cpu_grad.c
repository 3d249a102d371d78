/* cpu_grad.c - reference kernels of the training step's memplan-domain ops
 * (ir/ops/grad.def) that the finite-difference check in tests/test_train.c
 * covers. Float types only; sums accumulated in double. */
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

/* p' = p - lr * g. */
int mp_cpu_SGDUpdate(const mp_kargs *k, mp_err *err)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *p = mp_kin(k, 0), *g = mp_kin(k, 1);
    if (!p || !g || p->numel != g->numel) return mp_fail(err, "param and grad must have one shape");
    double lr = mp_attr_float(k->node, "lr", 0.01f);
    for (int64_t i = 0; i < p->numel; i++)
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(p, i) - lr * mp_tensor_get_f64(g, i));
    return 0;
}

/* Offset of batch index bidx (rank nb, dims bd) in a tensor t whose leading
 * rank-2 dims are right-aligned against bd (size 1 broadcast); in matrices. */
static int64_t batch_offset(const mp_tensor *t, const int64_t *bidx, int nb)
{
    int tb = t->rank - 2;
    return bcast_index(bidx, nb, t->dims, tb);
}

/* MatMul gradients, summed over the batch dims the operand was broadcast along:
 *   a_side: out[.., M, K] = dY[.., M, N] . B[.., K, N]^T   (inputs dY, B)
 *   else:   out[.., K, N] = A[.., M, K]^T . dY[.., M, N]   (inputs A, dY) */
static int matmul_grad(const mp_kargs *k, mp_err *err, bool a_side)
{
    if (need_floats(k, err)) return -1;
    const mp_tensor *p = mp_kin(k, 0), *q = mp_kin(k, 1);
    mp_tensor *out = k->out[0];
    const mp_tensor *dy = a_side ? p : q, *o = a_side ? q : p;
    if (!p || !q || p->rank < 2 || q->rank < 2 || out->rank < 2) return mp_kunsupported(err, "operands of rank < 2");
    int64_t M = dy->dims[dy->rank - 2], N = dy->dims[dy->rank - 1];
    int64_t K = a_side ? o->dims[o->rank - 2] : o->dims[o->rank - 1];
    if ((a_side ? o->dims[o->rank - 1] : o->dims[o->rank - 2]) != (a_side ? N : M))
        return mp_fail(err, "inner dims differ");
    int nb = dy->rank - 2;
    int64_t bd[MP_MAX_RANK], nbatch = 1;
    for (int a = 0; a < nb; a++) nbatch *= (bd[a] = dy->dims[a]);
    int64_t on = out->numel ? out->numel : 1;
    double *acc = mp_scratch_array(k->scratch, on, sizeof *acc);
    if (!acc) return mp_fail(err, "out of scratch memory");
    memset(acc, 0, (size_t)on * sizeof *acc);
    int64_t bidx[MP_MAX_RANK] = {0};
    for (int64_t bi = 0; bi < nbatch; bi++, next_index(bidx, bd, nb)) {
        int64_t dyo = bcast_index(bidx, nb, bd, nb) * M * N, oo = batch_offset(o, bidx, nb) * (a_side ? K * N : M * K);
        double *ob = acc + batch_offset(out, bidx, nb) * (a_side ? M * K : K * N);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double g = mp_tensor_get_f64(dy, dyo + m * N + n);
                for (int64_t kk = 0; kk < K; kk++) {
                    if (a_side)
                        ob[m * K + kk] += g * mp_tensor_get_f64(o, oo + kk * N + n);
                    else
                        ob[kk * N + n] += g * mp_tensor_get_f64(o, oo + m * K + kk);
                }
            }
    }
    for (int64_t i = 0; i < out->numel; i++) mp_tensor_set_f64(out, i, acc[i]);
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
int mp_cpu_SoftmaxGrad(const mp_kargs *k, mp_err *err)
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
                dot += mp_tensor_get_f64(dy, base + j * inner) * mp_tensor_get_f64(y, base + j * inner);
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j * inner;
                mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(y, i) * (mp_tensor_get_f64(dy, i) - dot));
            }
        }
    return 0;
}

/* dScores = dLoss * w[label] * (softmax - onehot(label)) / norm, from log_prob [N, C, d..]
 * and labels [N, d..]; norm is the weight sum for `mean`, 1 for `sum`; `none` takes dLoss per item. */
int mp_cpu_SoftmaxCrossEntropyGrad(const mp_kargs *k, mp_err *err)
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
                mp_tensor_set_f64(k->out[0], i, s * (exp(mp_tensor_get_f64(lp, i)) - (c == l ? 1.0 : 0.0)));
            }
        }
    return 0;
}

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
 * from X; scale (and bias) hold one value per normalized element. */
int mp_cpu_LayerNormalizationGrad(const mp_kargs *k, mp_err *err)
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
        for (int64_t j = 0; j < n; j++) mu += mp_tensor_get_f64(x, b + j);
        mu /= (double)n;
        for (int64_t j = 0; j < n; j++) var += (mp_tensor_get_f64(x, b + j) - mu) * (mp_tensor_get_f64(x, b + j) - mu);
        double rstd = 1 / sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; j++) {
            double xh = (mp_tensor_get_f64(x, b + j) - mu) * rstd, g = mp_tensor_get_f64(dy, b + j);
            double dxh = g * mp_tensor_get_f64(sc, j);
            m1 += dxh, m2 += dxh * xh;
            acc[j] += g * xh, acc[n + j] += g;
        }
        m1 /= (double)n, m2 /= (double)n;
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

/* 2-D window attributes of Conv / MaxPool: strides, pads (top, left, bottom, right), dilations. */
typedef struct win2d {
    int64_t kh, kw, sh, sw, pt, pl, dh, dw;
} win2d;

/* SAME_UPPER / SAME_LOWER padding of one spatial dim, from the forward's
 * input extent `in` and output extent `out` (as runtime/cpu_conv.c pads). */
static int64_t same_pad(const char *ap, int64_t in, int64_t out, int64_t k, int64_t s, int64_t d)
{
    int64_t total = (out - 1) * s + (k - 1) * d + 1 - in;
    if (total < 0) total = 0;
    return !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
}

/* x: shaped like the forward input [N, C, H, W]; dy: like its output. */
static int read_win2d(const mp_kargs *k, int64_t kh, int64_t kw, const mp_tensor *x, const mp_tensor *dy, win2d *w,
                      mp_err *err)
{
    const char *ap = mp_attr_str(k->node, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if (!same && strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return mp_kunsupported(err, "auto_pad %s", ap);
    const int64_t *s, *p, *d;
    int ns = mp_attr_ints(k->node, "strides", &s), np = mp_attr_ints(k->node, "pads", &p);
    int nd = mp_attr_ints(k->node, "dilations", &d);
    bool pads = np == 4 && !strcmp(ap, "NOTSET");
    *w = (win2d){kh,
                 kw,
                 ns == 2 ? s[0] : 1,
                 ns == 2 ? s[1] : 1,
                 pads ? p[0] : 0,
                 pads ? p[1] : 0,
                 nd == 2 ? d[0] : 1,
                 nd == 2 ? d[1] : 1};
    if (same) {
        w->pt = same_pad(ap, x->dims[2], dy->dims[2], kh, w->sh, w->dh);
        w->pl = same_pad(ap, x->dims[3], dy->dims[3], kw, w->sw, w->dw);
    }
    return 0;
}

/* Conv backward, 2-D (X [N, C, H, W]), with groups: dX, dW, dB as requested. */
int mp_cpu_ConvGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *w = mp_kin(k, 2);
    if (!dy || !x || !w || x->rank != 4 || w->rank != 4 || dy->rank != 4)
        return mp_kunsupported(err, "2-D convolutions only");
    if (!mp_dtype_is_float(dy->dtype)) return mp_kunsupported(err, "float only");
    mp_tensor *dx = mp_kout(k, 0), *dw = mp_kout(k, 1), *db = mp_kout(k, 2);
    win2d v;
    if (read_win2d(k, w->dims[2], w->dims[3], x, dy, &v, err)) return -1;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t M = w->dims[0], Cg = w->dims[1], OH = dy->dims[2], OW = dy->dims[3];
    int64_t groups = mp_attr_int(k->node, "group", 1);
    if (groups < 1 || Cg * groups != C || M % groups) return mp_fail(err, "channels do not match the groups");
    int64_t Mg = M / groups;
    double *ax = dx ? mp_scratch_array(k->scratch, x->numel ? x->numel : 1, sizeof *ax) : NULL;
    double *aw = dw ? mp_scratch_array(k->scratch, w->numel ? w->numel : 1, sizeof *aw) : NULL;
    double *ab = db ? mp_scratch_array(k->scratch, M ? M : 1, sizeof *ab) : NULL;
    if ((dx && !ax) || (dw && !aw) || (db && !ab)) return mp_fail(err, "out of scratch memory");
    if (ax) memset(ax, 0, (size_t)(x->numel ? x->numel : 1) * sizeof *ax);
    if (aw) memset(aw, 0, (size_t)(w->numel ? w->numel : 1) * sizeof *aw);
    if (ab) memset(ab, 0, (size_t)(M ? M : 1) * sizeof *ab);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t gidx = m / Mg;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double g = mp_tensor_get_f64(dy, ((n * M + m) * OH + oh) * OW + ow);
                    if (ab) ab[m] += g;
                    for (int64_t cg = 0; cg < Cg; cg++) {
                        int64_t c = gidx * Cg + cg;
                        for (int64_t i = 0; i < v.kh; i++) {
                            int64_t ih = oh * v.sh - v.pt + i * v.dh;
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t j = 0; j < v.kw; j++) {
                                int64_t iw = ow * v.sw - v.pl + j * v.dw;
                                if (iw < 0 || iw >= W) continue;
                                int64_t xi = ((n * C + c) * H + ih) * W + iw,
                                        wi = ((m * Cg + cg) * v.kh + i) * v.kw + j;
                                if (ax) ax[xi] += g * mp_tensor_get_f64(w, wi);
                                if (aw) aw[wi] += g * mp_tensor_get_f64(x, xi);
                            }
                        }
                    }
                }
        }
    for (int64_t i = 0; ax && i < x->numel; i++) mp_tensor_set_f64(dx, i, ax[i]);
    for (int64_t i = 0; aw && i < w->numel; i++) mp_tensor_set_f64(dw, i, aw[i]);
    for (int64_t i = 0; ab && i < M; i++) mp_tensor_set_f64(db, i, ab[i]);
    return 0;
}

/* MaxPool backward, 2-D: each window's dY goes to its first maximum. */
int mp_cpu_MaxPoolGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1);
    mp_tensor *dx = k->out[0];
    if (!dy || !x || x->rank != 4 || dy->rank != 4 || !mp_dtype_is_float(x->dtype))
        return mp_kunsupported(err, "2-D float pooling only");
    const int64_t *ks;
    if (mp_attr_ints(k->node, "kernel_shape", &ks) != 2) return mp_fail(err, "kernel_shape must have 2 entries");
    if (mp_attr_int(k->node, "storage_order", 0)) return mp_kunsupported(err, "storage_order 1");
    win2d v;
    if (read_win2d(k, ks[0], ks[1], x, dy, &v, err)) return -1;
    int64_t NC = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3], OH = dy->dims[2], OW = dy->dims[3];
    for (int64_t i = 0; i < dx->numel; i++) mp_tensor_set_f64(dx, i, 0);
    for (int64_t p = 0; p < NC; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t best = -1;
                double bv = 0;
                for (int64_t i = 0; i < v.kh; i++)
                    for (int64_t j = 0; j < v.kw; j++) {
                        int64_t ih = oh * v.sh - v.pt + i * v.dh, iw = ow * v.sw - v.pl + j * v.dw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        int64_t xi = (p * H + ih) * W + iw;
                        double xv = mp_tensor_get_f64(x, xi);
                        if (best < 0 || xv > bv) best = xi, bv = xv;
                    }
                if (best >= 0)
                    mp_tensor_set_f64(dx, best,
                                      mp_tensor_get_f64(dx, best) + mp_tensor_get_f64(dy, (p * OH + oh) * OW + ow));
            }
    return 0;
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

/* AveragePool backward, 2-D: each window's dY spread evenly over the cells it averaged. */
int mp_cpu_AveragePoolGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = k->out[0];
    if (!dy || dx->rank != 4 || dy->rank != 4 || !mp_dtype_is_float(dy->dtype))
        return mp_kunsupported(err, "2-D float pooling only");
    const int64_t *ks;
    if (mp_attr_ints(k->node, "kernel_shape", &ks) != 2) return mp_fail(err, "kernel_shape must have 2 entries");
    win2d v;
    if (read_win2d(k, ks[0], ks[1], dx, dy, &v, err)) return -1;
    bool incl = mp_attr_int(k->node, "count_include_pad", 0) != 0;
    int64_t NC = dx->dims[0] * dx->dims[1], H = dx->dims[2], W = dx->dims[3], OH = dy->dims[2], OW = dy->dims[3];
    for (int64_t i = 0; i < dx->numel; i++) mp_tensor_set_f64(dx, i, 0);
    for (int64_t p = 0; p < NC; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t cnt = 0;
                for (int64_t i = 0; i < v.kh; i++)
                    for (int64_t j = 0; j < v.kw; j++) {
                        int64_t ih = oh * v.sh - v.pt + i * v.dh, iw = ow * v.sw - v.pl + j * v.dw;
                        cnt += incl || (ih >= 0 && ih < H && iw >= 0 && iw < W);
                    }
                if (!cnt) continue;
                double g = mp_tensor_get_f64(dy, (p * OH + oh) * OW + ow) / (double)cnt;
                for (int64_t i = 0; i < v.kh; i++)
                    for (int64_t j = 0; j < v.kw; j++) {
                        int64_t ih = oh * v.sh - v.pt + i * v.dh, iw = ow * v.sw - v.pl + j * v.dw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        int64_t xi = (p * H + ih) * W + iw;
                        mp_tensor_set_f64(dx, xi, mp_tensor_get_f64(dx, xi) + g);
                    }
            }
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
