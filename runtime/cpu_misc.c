/* cpu_misc.c - smaller ops: ReverseSequence, CenterCropPad, NonZero, Unique,
 * MaxUnpool, Det, the window generators, SwiGLU and RotaryEmbedding. */
#include <math.h>
#include <string.h>

#include "kernels.h"

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
static bool is_f(const mp_tensor *t) { return t && (t->dtype == MP_FLOAT || t->dtype == MP_DOUBLE); }

/* Advances idx over dims (row-major); false after the last position. */
static bool odo(int rank, const int64_t *dims, int64_t *idx)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

int mp_cpu_ReverseSequence(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *lens = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !lens || !y || !mp_same_shape(x, y) || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "needs X of rank >= 2, sequence_lens and Y of X's shape");
    size_t es = mp_elem_size(x->dtype);
    if (!es) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t ba = mp_attr_int(k->node, "batch_axis", 1), ta = mp_attr_int(k->node, "time_axis", 0);
    if (ba < 0 || ba > 1 || ta < 0 || ta > 1 || ba == ta) return mp_fail(err, "batch_axis and time_axis must be 0 and 1");
    if (lens->numel != x->dims[ba]) return mp_fail(err, "sequence_lens must have one entry per batch");
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(x->rank, x->dims, xs);
    for (int64_t o = 0; o < x->numel; o++) {
        int64_t len = mp_tensor_get_i64(lens, idx[ba]), t = idx[ta], src = o;
        if (len < 0 || len > x->dims[ta]) return mp_fail(err, "sequence length %lld out of range", (long long)len);
        if (t < len) src += (len - 1 - 2 * t) * xs[ta];
        memcpy((char *)y->data + o * (int64_t)es, (const char *)x->data + src * (int64_t)es, es);
        odo(x->rank, x->dims, idx);
    }
    return 0;
}

int mp_cpu_CenterCropPad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *sh = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !sh || !y || x->dtype != y->dtype || y->rank != x->rank) return mp_fail(err, "needs input, shape and an output of the input's rank");
    size_t es = mp_elem_size(x->dtype);
    if (!es) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t target[MP_MAX_RANK], axes[MP_MAX_RANK], off[MP_MAX_RANK] = {0};
    int n = mp_read_ints(sh, target, MP_MAX_RANK, "shape", err);
    if (n < 0) return -1;
    int na = mp_read_axes(k, "axes", -1, 1000, x->rank, axes, err);
    if (na < 0) return -1;
    if (!mp_node_attr(k->node, "axes")) {
        na = x->rank;
        for (int i = 0; i < na; i++) axes[i] = i;
    }
    if (n != na) return mp_fail(err, "shape has %d entries for %d axes", n, na);
    bool listed[MP_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i], d = x->dims[a];
        if (y->dims[a] != target[i]) return mp_fail(err, "output dim %lld differs from shape", (long long)a);
        off[a] = target[i] >= d ? -((target[i] - d) / 2) : (d - target[i]) / 2; /* pad left, or crop start */
        listed[a] = true;
    }
    for (int i = 0; i < x->rank; i++)
        if (!listed[i] && y->dims[i] != x->dims[i]) return mp_fail(err, "dim %d is not in axes but changed size", i);
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(x->rank, x->dims, xs);
    for (int64_t o = 0; o < y->numel; o++) {
        int64_t src = 0;
        bool inside = true;
        for (int i = 0; i < x->rank; i++) {
            int64_t j = idx[i] + off[i];
            if (j < 0 || j >= x->dims[i]) inside = false;
            src += j * xs[i];
        }
        char *d = (char *)y->data + o * (int64_t)es;
        if (inside) memcpy(d, (const char *)x->data + src * (int64_t)es, es);
        else memset(d, 0, es);
        odo(y->rank, y->dims, idx);
    }
    return 0;
}

int mp_cpu_NonZero(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || y->dtype != MP_INT64 || y->rank != 2 || y->dims[0] != x->rank) return mp_fail(err, "output must be int64 [rank, count]");
    if (!mp_elem_size(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    bool flt = mp_dtype_is_float(x->dtype);
    int64_t nz = 0, idx[MP_MAX_RANK] = {0}, cnt = y->dims[1];
    for (int64_t i = 0; i < x->numel; i++) nz += flt ? mp_tensor_get_f64(x, i) != 0 : mp_tensor_get_i64(x, i) != 0;
    if (nz != cnt) return mp_fail(err, "%lld non-zeros, output has room for %lld", (long long)nz, (long long)cnt);
    int64_t at = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (flt ? mp_tensor_get_f64(x, i) != 0 : mp_tensor_get_i64(x, i) != 0) {
            for (int d = 0; d < x->rank; d++) ((int64_t *)y->data)[d * cnt + at] = idx[d];
            at++;
        }
        odo(x->rank, x->dims, idx);
    }
    return 0;
}

/* ---- Unique ---------------------------------------------------------------------- */

typedef struct slices {
    const mp_tensor *x;
    int64_t inner, d, outer;   /* slice j: elements (o * d + j) * inner + i */
} slices;

static int slice_cmp(const slices *s, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            double u = rd(s->x, (o * s->d + a) * s->inner + i), v = rd(s->x, (o * s->d + b) * s->inner + i);
            if (u != v) return u < v ? -1 : 1;
        }
    return 0;
}

/* Stable merge sort of idx[0..n) by slice order. */
static void sort_slices(const slices *s, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, t = lo;
            while (a < mid && b < hi) tmp[t++] = slice_cmp(s, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
            while (a < mid) tmp[t++] = idx[a++];
            while (b < hi) tmp[t++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

int mp_cpu_Unique(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0), *ind = mp_kout(k, 1), *inv = mp_kout(k, 2), *cnt = mp_kout(k, 3);
    if (!x || !y || y->dtype != x->dtype) return mp_fail(err, "needs X and Y of X's dtype");
    size_t es = mp_elem_size(x->dtype);
    if (!es || x->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    slices s = {x, 1, x->numel, 1};
    const mp_attr *ax = mp_node_attr(k->node, "axis");
    if (ax) {
        int64_t a = ax->i < 0 ? ax->i + x->rank : ax->i;
        if (a < 0 || a >= x->rank) return mp_fail(err, "axis out of range");
        s.d = x->dims[a];
        for (int i = 0; i < a; i++) s.outer *= x->dims[i];
        for (int i = (int)a + 1; i < x->rank; i++) s.inner *= x->dims[i];
    }
    int64_t n = s.d;
    int64_t *order = mp_scratch_array(k->scratch, n + 1, 8), *tmp = mp_scratch_array(k->scratch, n + 1, 8);
    int64_t *group = mp_scratch_array(k->scratch, n + 1, 8), *first = mp_scratch_array(k->scratch, n + 1, 8);
    int64_t *count = mp_scratch_array(k->scratch, n + 1, 8), *rank_of = mp_scratch_array(k->scratch, n + 1, 8);
    if (!order || !tmp || !group || !first || !count || !rank_of) return mp_fail(err, "out of scratch memory");
    for (int64_t j = 0; j < n; j++) order[j] = j;
    sort_slices(&s, order, tmp, n);
    /* groups of equal slices in sorted order; the stable sort puts each group's first occurrence first */
    int64_t ng = 0;
    for (int64_t t = 0; t < n; t++) {
        if (!t || slice_cmp(&s, order[t - 1], order[t])) first[ng] = order[t], count[ng++] = 0;
        group[order[t]] = ng - 1;
        count[ng - 1]++;
    }
    /* output position of each group: sorted order, or order of first occurrence */
    bool sorted = mp_attr_int(k->node, "sorted", 1) != 0;
    for (int64_t u = 0; u < ng; u++) rank_of[u] = u;
    if (!sorted) {
        int64_t at = 0;
        for (int64_t j = 0; j < n; j++)
            if (first[group[j]] == j) rank_of[group[j]] = at++;
    }
    if (y->numel != s.outer * ng * s.inner) return mp_fail(err, "Y has %lld elements, %lld unique slices need %lld", (long long)y->numel, (long long)ng, (long long)(s.outer * ng * s.inner));
    if ((ind && ind->numel != ng) || (cnt && cnt->numel != ng) || (inv && inv->numel != n)) return mp_fail(err, "index outputs disagree with the unique count");
    for (int64_t u = 0; u < ng; u++) {
        int64_t r = rank_of[u];
        for (int64_t o = 0; o < s.outer; o++)
            memcpy((char *)y->data + ((o * ng + r) * s.inner) * (int64_t)es, (const char *)x->data + ((o * s.d + first[u]) * s.inner) * (int64_t)es,
                   (size_t)s.inner * es);
        if (ind) mp_tensor_set_i64(ind, r, first[u]);
        if (cnt) mp_tensor_set_i64(cnt, r, count[u]);
    }
    if (inv)
        for (int64_t j = 0; j < n; j++) mp_tensor_set_i64(inv, j, rank_of[group[j]]);
    return 0;
}

/* Indices count positions in the default unpooled shape, (in-1)*s + k - pads;
 * a larger output_shape keeps that block at its start, zero-padded. */
int mp_cpu_MaxUnpool(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !ix || !y || x->dtype != y->dtype || ix->numel != x->numel || !mp_dtype_is_int(ix->dtype) || x->rank < 3 || y->rank != x->rank)
        return mp_fail(err, "needs X (rank >= 3), integer indices of X's size and Y of X's dtype and rank");
    size_t es = mp_elem_size(x->dtype);
    if (!es) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int n = x->rank - 2;
    const int64_t *ks, *ss, *ps;
    int nk = mp_attr_ints(k->node, "kernel_shape", &ks), ns = mp_attr_ints(k->node, "strides", &ss), np = mp_attr_ints(k->node, "pads", &ps);
    if (nk != n || (ns >= 0 && ns != n) || (np >= 0 && np != 2 * n)) return mp_fail(err, "kernel_shape, strides or pads have the wrong length");
    int64_t def[MP_MAX_RANK], ys[MP_MAX_RANK];
    def[0] = x->dims[0], def[1] = x->dims[1];
    for (int i = 0; i < n; i++)
        def[2 + i] = (x->dims[2 + i] - 1) * (ns >= 0 ? ss[i] : 1) + ks[i] - (np >= 0 ? ps[i] + ps[n + i] : 0);
    mp_strides(y->rank, y->dims, ys);
    memset(y->data, 0, (size_t)y->numel * es);
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t at = mp_tensor_get_i64(ix, i), dst = 0;
        for (int d = x->rank - 1; d >= 0; d--) {
            int64_t c = at % def[d];
            at /= def[d];
            if (c >= y->dims[d] || c < 0) return mp_fail(err, "index %lld outside the output", (long long)mp_tensor_get_i64(ix, i));
            dst += c * ys[d];
        }
        if (at != 0) return mp_fail(err, "index %lld outside the unpooled shape", (long long)mp_tensor_get_i64(ix, i));
        memcpy((char *)y->data + dst * (int64_t)es, (const char *)x->data + i * (int64_t)es, es);
    }
    return 0;
}

int mp_cpu_Det(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || x->dtype != y->dtype || x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2]) return mp_fail(err, "needs square matrices [..., M, M]");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t m = x->dims[x->rank - 1], mats = m ? x->numel / (m * m) : y->numel;
    if (y->numel != mats) return mp_fail(err, "output must have one element per matrix");
    double *a = mp_scratch_array(k->scratch, m * m + 1, sizeof *a);
    if (!a) return mp_fail(err, "out of scratch memory");
    for (int64_t b = 0; b < mats; b++) { /* Gaussian elimination with partial pivoting */
        for (int64_t i = 0; i < m * m; i++) a[i] = rd(x, b * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < m; r++)
                if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
            if (a[p * m + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[p * m + j];
                    a[p * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t r = c + 1; r < m; r++) {
                double f = a[r * m + c] / a[c * m + c];
                for (int64_t j = c; j < m; j++) a[r * m + j] -= f * a[c * m + j];
            }
        }
        wr(y, b, det);
    }
    return 0;
}

/* ---- windows ------------------------------------------------------------------------ */

typedef enum { W_HANN, W_HAMMING, W_BLACKMAN } window_kind;

static int run_window(const mp_kargs *k, window_kind w, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y || y->rank != 1 || !mp_kin(k, 0)) return mp_fail(err, "needs size and a 1-D output");
    if (!mp_elem_size(y->dtype) || y->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    int64_t n = y->dims[0];
    if (mp_scalar_i64(k->in[0]) != n) return mp_fail(err, "output length differs from size");
    double per = mp_attr_int(k->node, "periodic", 1) ? (double)n : (double)(n - 1);
    for (int64_t i = 0; i < n; i++) {
        double t = per > 0 ? 2 * M_PI * (double)i / per : 0, v;
        if (w == W_HANN) v = 0.5 - 0.5 * cos(t);
        else if (w == W_HAMMING) v = 25.0 / 46 - (1 - 25.0 / 46) * cos(t);
        else v = 0.42 - 0.5 * cos(t) + 0.08 * cos(2 * t);
        mp_tensor_set_f64(y, i, v);
    }
    return 0;
}

int mp_cpu_HannWindow(const mp_kargs *k, mp_err *err) { return run_window(k, W_HANN, err); }
int mp_cpu_HammingWindow(const mp_kargs *k, mp_err *err) { return run_window(k, W_HAMMING, err); }
int mp_cpu_BlackmanWindow(const mp_kargs *k, mp_err *err) { return run_window(k, W_BLACKMAN, err); }

/* ---- SwiGLU, RotaryEmbedding ------------------------------------------------------ */

/* y = a * sigmoid(alpha * a) * b, broadcasting. */
int mp_cpu_SwiGLU(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y) return mp_fail(err, "missing input or output");
    if (!is_f(a) || a->dtype != b->dtype || a->dtype != y->dtype) return mp_kunsupported(err, "dtype %s", mp_dtype_name(a->dtype));
    double alpha = mp_attr_float(k->node, "alpha", 1.0f);
    mp_bcast bc;
    if (mp_bcast_init(&bc, y, 2, (const mp_tensor *[]){a, b}, err)) return -1;
    for (int64_t r = 0; r < bc.rows; r++, mp_bcast_next(&bc))
        for (int64_t i = 0; i < bc.len; i++) {
            double u = rd(a, bc.off[0] + i * bc.step[0]), v = rd(b, bc.off[1] + i * bc.step[1]);
            wr(y, r * bc.len + i, u / (1 + exp(-alpha * u)) * v);
        }
    return 0;
}

/* x as [B, H, S, D] (4-D) or [B, S, H*D] (3-D, num_heads); cos/sin caches
 * [max_pos, R/2] read at position_ids [B, S], or [B, S, R/2] without them. */
int mp_cpu_RotaryEmbedding(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *cc = mp_kin(k, 1), *sc = mp_kin(k, 2), *pid = mp_kin(k, 3);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !cc || !sc || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "needs input, cos_cache, sin_cache and an output of the input's shape");
    if (!is_f(x) || !is_f(cc) || !is_f(sc)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    if (x->rank != 3 && x->rank != 4) return mp_fail(err, "input must be 3-D or 4-D");
    int64_t B = x->dims[0], H, S, D;
    if (x->rank == 4) {
        H = x->dims[1], S = x->dims[2], D = x->dims[3];
    } else {
        H = mp_attr_int(k->node, "num_heads", 0), S = x->dims[1];
        if (H <= 0 || x->dims[2] % H) return mp_fail(err, "3-D input needs num_heads dividing the hidden size");
        D = x->dims[2] / H;
    }
    int64_t R = mp_attr_int(k->node, "rotary_embedding_dim", 0);
    if (R == 0) R = D;
    if (R < 0 || R > D || R % 2) return mp_fail(err, "rotary_embedding_dim must be even and at most the head size");
    int64_t half = R / 2;
    bool inter = mp_attr_int(k->node, "interleaved", 0) != 0;
    if (cc->rank < 2 || cc->dims[cc->rank - 1] != half || sc->numel != cc->numel) return mp_fail(err, "caches must end in rotary_dim/2");
    if (!pid && (cc->rank != 3 || cc->dims[0] != B || cc->dims[1] != S)) return mp_fail(err, "without position_ids the caches must be [B, S, R/2]");
    if (pid && (pid->numel != B * S || cc->rank != 2)) return mp_fail(err, "position_ids must be [B, S] and the caches 2-D");
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                int64_t row = (b * S + s) * half;
                if (pid) {
                    int64_t p = mp_tensor_get_i64(pid, b * S + s);
                    if (p < 0 || p >= cc->dims[0]) return mp_fail(err, "position %lld outside the cache", (long long)p);
                    row = p * half;
                }
                int64_t base = x->rank == 4 ? ((b * H + h) * S + s) * D : (b * S + s) * H * D + h * D;
                for (int64_t d = R; d < D; d++) wr(y, base + d, rd(x, base + d));
                for (int64_t i = 0; i < half; i++) {
                    int64_t i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half;
                    double c = rd(cc, row + i), sn = rd(sc, row + i), x1 = rd(x, base + i1), x2 = rd(x, base + i2);
                    wr(y, base + i1, c * x1 - sn * x2);
                    wr(y, base + i2, sn * x1 + c * x2);
                }
            }
    return 0;
}
