/* cpu_reduce.c - reductions over axes (Reduce*, ArgMax/ArgMin), the softmax
 * family, CumSum and TopK.
 *
 * Float reductions accumulate in double in a fixed order (row-major over the
 * reduced axes), so results do not depend on anything but the input.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Splits x's axes into kept and reduced ones: walks the kept positions
 * (outer) and, for each, the reduced positions (inner). */
typedef struct red_view {
    int nk, nr;
    int64_t kdims[MP_MAX_RANK], kstr[MP_MAX_RANK];
    int64_t rdims[MP_MAX_RANK], rstr[MP_MAX_RANK];
    int64_t kept, reduced;                 /* element counts */
} red_view;

static void red_view_init(red_view *v, const mp_tensor *x, const bool *reduce)
{
    int64_t xs[MP_MAX_RANK];
    mp_strides(x->rank, x->dims, xs);
    v->nk = v->nr = 0;
    v->kept = v->reduced = 1;
    for (int i = 0; i < x->rank; i++) {
        if (reduce[i]) {
            v->rdims[v->nr] = x->dims[i];
            v->rstr[v->nr++] = xs[i];
            v->reduced *= x->dims[i];
        } else {
            v->kdims[v->nk] = x->dims[i];
            v->kstr[v->nk++] = xs[i];
            v->kept *= x->dims[i];
        }
    }
}

/* Advances an odometer idx over dims, keeping *off = sum idx*str. */
static void odo_next(int n, const int64_t *dims, const int64_t *str, int64_t *idx, int64_t *off)
{
    for (int i = n - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) {
            *off += str[i];
            return;
        }
        idx[i] = 0;
        *off -= str[i] * (dims[i] - 1);
    }
}

/* Reads element i as double, fast for the float types. */
static inline double rd(const mp_tensor *t, int64_t i)
{
    if (t->dtype == MP_FLOAT) return ((const float *)t->data)[i];
    if (t->dtype == MP_DOUBLE) return ((const double *)t->data)[i];
    return mp_tensor_get_f64(t, i);
}

static inline void wr(mp_tensor *t, int64_t i, double v)
{
    if (t->dtype == MP_FLOAT) ((float *)t->data)[i] = (float)v;
    else if (t->dtype == MP_DOUBLE) ((double *)t->data)[i] = v;
    else mp_tensor_set_f64(t, i, v);
}

/* Reads the axes of a Reduce* node into reduce[]; returns 1 when it is a
 * no-op (empty axes with noop_with_empty_axes), 0, or -1. */
static int reduce_axes(const mp_kargs *k, int64_t input_since, int rank, bool *reduce, mp_err *err)
{
    int64_t axes[MP_MAX_RANK];
    int n = mp_read_axes(k, "axes", 1, input_since, rank, axes, err);
    if (n < 0) return -1;
    for (int i = 0; i < rank; i++) reduce[i] = n == 0;
    if (n == 0 && mp_attr_int(k->node, "noop_with_empty_axes", 0)) return 1;
    for (int i = 0; i < n; i++) reduce[axes[i]] = true;
    return 0;
}

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ } red_op;

static int run_reduce(const mp_kargs *k, red_op op, int64_t input_since, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y) return mp_fail(err, "missing input or output");
    if (x->dtype != y->dtype || !mp_elem_size(x->dtype) || x->dtype == MP_BOOL)
        return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    bool reduce[MP_MAX_RANK];
    int rc = reduce_axes(k, input_since, x->rank, reduce, err);
    if (rc < 0) return -1;
    if (rc == 1) return mp_copy_tensor(x, y, err);
    red_view v;
    red_view_init(&v, x, reduce);
    if (y->numel != v.kept) return mp_fail(err, "output has %lld elements, the reduction gives %lld", (long long)y->numel, (long long)v.kept);
    bool is_int = mp_dtype_is_int(x->dtype);
    int64_t kidx[MP_MAX_RANK] = {0}, koff = 0;
    for (int64_t o = 0; o < v.kept; o++) {
        int64_t ridx[MP_MAX_RANK] = {0}, roff = koff;
        double acc = op == R_PROD ? 1 : op == R_MAX ? -INFINITY : op == R_MIN ? INFINITY : 0, m = -INFINITY;
        int64_t iacc = op == R_PROD ? 1 : 0;
        bool first = true;
        if (op == R_LOGSUMEXP) { /* max first, for a stable exp */
            for (int64_t r = 0; r < v.reduced; r++, odo_next(v.nr, v.rdims, v.rstr, ridx, &roff)) m = fmax(m, rd(x, roff));
            memset(ridx, 0, sizeof ridx);
            roff = koff;
            if (isinf(m)) m = 0;
        }
        for (int64_t r = 0; r < v.reduced; r++, odo_next(v.nr, v.rdims, v.rstr, ridx, &roff)) {
            if (is_int && (op == R_SUM || op == R_PROD || op == R_MAX || op == R_MIN || op == R_MEAN)) {
                int64_t e = mp_tensor_get_i64(x, roff);
                if (op == R_SUM || op == R_MEAN) iacc = (int64_t)((uint64_t)iacc + (uint64_t)e);
                else if (op == R_PROD) iacc = (int64_t)((uint64_t)iacc * (uint64_t)e);
                else if (first || (op == R_MAX ? e > iacc : e < iacc)) iacc = e;
                first = false;
                continue;
            }
            double e = rd(x, roff);
            switch (op) {
            case R_SUM: case R_MEAN: case R_LOGSUM: acc += e; break;
            case R_MAX: acc = e != e || e > acc ? e : acc; break;
            case R_MIN: acc = e != e || e < acc ? e : acc; break;
            case R_PROD: acc *= e; break;
            case R_L1: acc += fabs(e); break;
            case R_L2: case R_SUMSQ: acc += e * e; break;
            case R_LOGSUMEXP: acc += exp(e - m); break;
            }
        }
        if (is_int && (op == R_SUM || op == R_PROD || op == R_MAX || op == R_MIN || op == R_MEAN)) {
            if (op == R_MEAN) iacc = v.reduced ? iacc / v.reduced : 0;
            if (first && op == R_MAX) iacc = INT64_MIN; /* empty set */
            if (first && op == R_MIN) iacc = INT64_MAX;
            mp_tensor_set_i64(y, o, iacc);
        } else {
            if (op == R_MEAN) acc /= (double)v.reduced;
            else if (op == R_L2) acc = sqrt(acc);
            else if (op == R_LOGSUM) acc = log(acc);
            else if (op == R_LOGSUMEXP) acc = m + log(acc);
            wr(y, o, acc);
        }
        odo_next(v.nk, v.kdims, v.kstr, kidx, &koff);
    }
    return 0;
}

/* ReduceSum took axes as an input from opset 13, the others from 18. */
int mp_cpu_ReduceSum(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_SUM, 13, err); }
int mp_cpu_ReduceMean(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_MEAN, 18, err); }
int mp_cpu_ReduceMax(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_MAX, 18, err); }
int mp_cpu_ReduceMin(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_MIN, 18, err); }
int mp_cpu_ReduceProd(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_PROD, 18, err); }
int mp_cpu_ReduceL1(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_L1, 18, err); }
int mp_cpu_ReduceL2(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_L2, 18, err); }
int mp_cpu_ReduceLogSum(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_LOGSUM, 18, err); }
int mp_cpu_ReduceLogSumExp(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_LOGSUMEXP, 18, err); }
int mp_cpu_ReduceSumSquare(const mp_kargs *k, mp_err *err) { return run_reduce(k, R_SUMSQ, 18, err); }

/* ---- ArgMax / ArgMin ------------------------------------------------------------ */

static int run_arg(const mp_kargs *k, bool max, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || y->dtype != MP_INT64) return mp_fail(err, "needs an input and an int64 output");
    if (!mp_elem_size(x->dtype) || x->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t axis = mp_attr_int(k->node, "axis", 0);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    bool last = mp_attr_int(k->node, "select_last_index", 0) != 0;
    int64_t outer = 1, d = x->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    if (y->numel != outer * inner) return mp_fail(err, "output size disagrees with the reduction");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = d ? rd(x, o * d * inner + i) : 0;
            for (int64_t j = 1; j < d; j++) {
                double e = rd(x, (o * d + j) * inner + i);
                bool better = max ? (last ? e >= bv : e > bv) : (last ? e <= bv : e < bv);
                if (better) best = j, bv = e;
            }
            ((int64_t *)y->data)[o * inner + i] = best;
        }
    return 0;
}

int mp_cpu_ArgMax(const mp_kargs *k, mp_err *err) { return run_arg(k, true, err); }
int mp_cpu_ArgMin(const mp_kargs *k, mp_err *err) { return run_arg(k, false, err); }

/* ---- Softmax, LogSoftmax, Hardmax -------------------------------------------- */

typedef enum { SM_SOFT, SM_LOG, SM_HARD } sm_kind;

static int run_softmax(const mp_kargs *k, sm_kind kind, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "output must match the input");
    if (x->dtype != MP_FLOAT && x->dtype != MP_DOUBLE) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    /* Before opset 13 the input is coerced to 2-D at axis (default 1); from 13
     * the op runs along one axis (default -1). */
    bool coerce = k->opset < 13;
    int64_t axis = mp_attr_int(k->node, "axis", coerce ? 1 : -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank || (!coerce && axis == x->rank)) return mp_fail(err, "axis out of range for rank %d", x->rank);
    int64_t outer = 1, d = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis; i < x->rank; i++) {
        if (coerce || i == axis) d *= x->dims[i];
        else inner *= x->dims[i];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * d * inner + i;
            double m = -INFINITY, s = 0;
            int64_t arg = 0;
            for (int64_t j = 0; j < d; j++) {
                double e = rd(x, base + j * inner);
                if (e > m) m = e, arg = j;
            }
            if (kind == SM_HARD) {
                for (int64_t j = 0; j < d; j++) wr(y, base + j * inner, j == arg);
                continue;
            }
            for (int64_t j = 0; j < d; j++) s += exp(rd(x, base + j * inner) - m);
            for (int64_t j = 0; j < d; j++) {
                double e = rd(x, base + j * inner) - m;
                wr(y, base + j * inner, kind == SM_LOG ? e - log(s) : exp(e) / s);
            }
        }
    return 0;
}

int mp_cpu_Softmax(const mp_kargs *k, mp_err *err) { return run_softmax(k, SM_SOFT, err); }
int mp_cpu_LogSoftmax(const mp_kargs *k, mp_err *err) { return run_softmax(k, SM_LOG, err); }
int mp_cpu_Hardmax(const mp_kargs *k, mp_err *err) { return run_softmax(k, SM_HARD, err); }

/* ---- CumSum, CumProd ------------------------------------------------------------ */

static int run_cumulative(const mp_kargs *k, bool prod, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ax = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !ax || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "output must match the input");
    if (!mp_elem_size(x->dtype) || x->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t axis = mp_scalar_i64(ax);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    bool excl = mp_attr_int(k->node, "exclusive", 0), rev = mp_attr_int(k->node, "reverse", 0);
    bool is_int = mp_dtype_is_int(x->dtype);
    int64_t outer = 1, d = x->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double acc = prod;
            uint64_t iacc = prod;
            for (int64_t t = 0; t < d; t++) {
                int64_t j = rev ? d - 1 - t : t, at = (o * d + j) * inner + i;
                if (is_int) { /* wrapping, like numpy */
                    uint64_t e = (uint64_t)mp_tensor_get_i64(x, at), next = prod ? iacc * e : iacc + e;
                    mp_tensor_set_i64(y, at, (int64_t)(excl ? iacc : next));
                    iacc = next;
                } else {
                    double e = rd(x, at), next = prod ? acc * e : acc + e;
                    wr(y, at, excl ? acc : next);
                    acc = next;
                }
            }
        }
    return 0;
}

int mp_cpu_CumSum(const mp_kargs *k, mp_err *err) { return run_cumulative(k, false, err); }
int mp_cpu_CumProd(const mp_kargs *k, mp_err *err) { return run_cumulative(k, true, err); }

/* ---- TopK -------------------------------------------------------------------------- */

/* Stable merge sort of idx[0..n) by key (descending when `desc`): equal keys
 * keep the lower index first, as ONNX asks. */
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, const double *key, bool desc)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, t = lo;
            while (a < mid && b < hi) {
                double ka = key[idx[a]], kb = key[idx[b]];
                bool take_b = desc ? kb > ka : kb < ka;
                tmp[t++] = take_b ? idx[b++] : idx[a++];
            }
            while (a < mid) tmp[t++] = idx[a++];
            while (b < hi) tmp[t++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

int mp_cpu_TopK(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *vals = mp_kout(k, 0), *inds = mp_kout(k, 1);
    if (!x || !vals || vals->dtype != x->dtype || (inds && inds->dtype != MP_INT64)) return mp_fail(err, "bad inputs or outputs");
    if (!mp_elem_size(x->dtype) || x->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t kk = k->opset < 10 ? mp_attr_int(k->node, "k", -1) : mp_scalar_i64(mp_kin(k, 1));
    int64_t axis = mp_attr_int(k->node, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    bool largest = mp_attr_int(k->node, "largest", 1) != 0;
    int64_t outer = 1, d = x->dims[axis], inner = 1;
    if (kk < 0 || kk > d) return mp_fail(err, "k=%lld out of range for dim %lld", (long long)kk, (long long)d);
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    if (vals->numel != outer * kk * inner || (inds && inds->numel != vals->numel)) return mp_fail(err, "output size disagrees with k");
    double *key = mp_scratch_array(k->scratch, d ? d : 1, sizeof *key);
    int64_t *idx = mp_scratch_array(k->scratch, d ? d : 1, sizeof *idx), *tmp = mp_scratch_array(k->scratch, d ? d : 1, sizeof *tmp);
    if (!key || !idx || !tmp) return mp_fail(err, "out of scratch memory");
    size_t es = mp_elem_size(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < d; j++) {
                key[j] = rd(x, (o * d + j) * inner + i);
                idx[j] = j;
            }
            sort_idx(idx, tmp, d, key, largest); /* sorted=0 may return any order: sorted is one */
            for (int64_t j = 0; j < kk; j++) {
                int64_t at = (o * kk + j) * inner + i;
                memcpy((char *)vals->data + at * (int64_t)es, (const char *)x->data + ((o * d + idx[j]) * inner + i) * (int64_t)es, es);
                if (inds) ((int64_t *)inds->data)[at] = idx[j];
            }
        }
    return 0;
}
