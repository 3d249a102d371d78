/* cpu_conv.c - convolutions and pooling over N spatial dims (NC D1..Dk):
 * Conv (im2col + GEMM), ConvTranspose (GEMM + col2im), MaxPool, AveragePool,
 * LpPool, the global pools and LRN.
 *
 * im2col works on chunks of whole output rows so that its scratch stays
 * under IM2COL_BYTES whatever the image size; 1x1 stride-1 convolutions use
 * the input directly as the GEMM operand.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

#define IM2COL_BYTES (16u << 20)
#define MAXSP (MP_MAX_RANK - 2)

/* Spatial geometry shared by convolutions and pools. */
typedef struct geom {
    int nsp;                                   /* spatial dims */
    int64_t in[MAXSP], out[MAXSP], k[MAXSP];   /* input, output, kernel extents */
    int64_t s[MAXSP], d[MAXSP], pb[MAXSP], pe[MAXSP];
    int64_t in_n, out_n, k_n;                  /* products */
} geom;

/* Reads kernel/strides/dilations/pads/auto_pad for x -> y with kernel dims kd
 * (NULL: kernel_shape attribute). Checks the inferred output extent when
 * `check` (ceil_mode pools pass their own rounding). */
static int read_geom(const mp_kargs *k, const mp_tensor *x, const mp_tensor *y, const int64_t *kd, bool ceil_mode,
                     geom *g, mp_err *err)
{
    if (x->rank < 3 || y->rank != x->rank) return mp_fail(err, "needs N, C and at least one spatial dim (rank %d)", x->rank);
    int n = x->rank - 2;
    g->nsp = n;
    const int64_t *ks, *ss, *ds, *ps;
    int nk = mp_attr_ints(k->node, "kernel_shape", &ks), ns = mp_attr_ints(k->node, "strides", &ss);
    int nd = mp_attr_ints(k->node, "dilations", &ds), np = mp_attr_ints(k->node, "pads", &ps);
    if ((!kd && nk != n) || (kd && nk >= 0 && nk != n)) return mp_fail(err, "kernel_shape has %d entries for %d spatial dims", nk, n);
    if ((ns >= 0 && ns != n) || (nd >= 0 && nd != n) || (np >= 0 && np != 2 * n)) return mp_fail(err, "strides, dilations or pads have the wrong length");
    const char *ap = mp_attr_str(k->node, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!same && !valid && strcmp(ap, "NOTSET")) return mp_fail(err, "unknown auto_pad '%s'", ap);
    g->in_n = g->out_n = g->k_n = 1;
    for (int i = 0; i < n; i++) {
        g->in[i] = x->dims[2 + i];
        g->out[i] = y->dims[2 + i];
        g->k[i] = kd ? kd[i] : ks[i];
        g->s[i] = ns >= 0 ? ss[i] : 1;
        g->d[i] = nd >= 0 ? ds[i] : 1;
        if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1) return mp_fail(err, "kernel, strides and dilations must be positive");
        int64_t span = (g->k[i] - 1) * g->d[i] + 1;
        if (same) {
            int64_t total = (g->out[i] - 1) * g->s[i] + span - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        } else if (valid || np < 0) {
            g->pb[i] = g->pe[i] = 0;
        } else {
            g->pb[i] = ps[i];
            g->pe[i] = ps[n + i];
            if (g->pb[i] < 0 || g->pe[i] < 0) return mp_fail(err, "negative pads");
        }
        if (!same) {
            int64_t room = g->in[i] + g->pb[i] + g->pe[i] - span, want;
            if (room < 0) want = 0;
            else want = (ceil_mode ? (room + g->s[i] - 1) / g->s[i] : room / g->s[i]) + 1;
            /* ceil_mode may drop a last window that would start in the end padding */
            bool dropped = ceil_mode && want > 0 && (want - 1) * g->s[i] >= g->in[i] + g->pb[i] && want - 1 == g->out[i];
            if (want != g->out[i] && !dropped)
                return mp_fail(err, "spatial dim %d: output %lld, the attributes give %lld", i, (long long)g->out[i], (long long)want);
        }
        g->in_n *= g->in[i];
        g->out_n *= g->out[i];
        g->k_n *= g->k[i];
    }
    return 0;
}

/* ---- im2col ------------------------------------------------------------------ */

/* col[(c, kpos), p] for output positions [r0*L, r1*L) (whole rows of the last
 * spatial dim L), from x (channels c0.., nc of them, each in_n elements). */
#define IM2COL(T, S)                                                                                           \
    static void im2col_##S(const T *x, int64_t nc, const geom *g, int64_t r0, int64_t r1, T *col)             \
    {                                                                                                          \
        int n = g->nsp;                                                                                        \
        int64_t L = g->out[n - 1], P = (r1 - r0) * L, kidx[MAXSP];                                            \
        for (int64_t c = 0; c < nc; c++)                                                                       \
            for (int64_t kp = 0; kp < g->k_n; kp++) {                                                          \
                int64_t rem = kp;                                                                              \
                for (int i = n - 1; i >= 0; i--) kidx[i] = rem % g->k[i], rem /= g->k[i];                     \
                T *row = col + (c * g->k_n + kp) * P;                                                          \
                for (int64_t r = r0; r < r1; r++) {                                                            \
                    T *dst = row + (r - r0) * L;                                                               \
                    int64_t rr = r, off = 0, stride = g->in[n - 1];                                           \
                    bool inside = true;                                                                        \
                    for (int i = n - 2; i >= 0; i--) {                                                         \
                        int64_t o = rr % g->out[i], pos = o * g->s[i] - g->pb[i] + kidx[i] * g->d[i];         \
                        rr /= g->out[i];                                                                       \
                        if (pos < 0 || pos >= g->in[i]) inside = false;                                        \
                        off += pos * stride;                                                                   \
                        stride *= g->in[i];                                                                    \
                    }                                                                                          \
                    if (!inside) {                                                                             \
                        memset(dst, 0, (size_t)L * sizeof(T));                                                 \
                        continue;                                                                              \
                    }                                                                                          \
                    const T *src = x + c * g->in_n + off;                                                      \
                    int64_t s = g->s[n - 1], b = kidx[n - 1] * g->d[n - 1] - g->pb[n - 1], w = g->in[n - 1];  \
                    for (int64_t o = 0; o < L; o++) {                                                          \
                        int64_t pos = o * s + b;                                                               \
                        dst[o] = pos >= 0 && pos < w ? src[pos] : 0;                                           \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
    }
IM2COL(float, f32)
IM2COL(double, f64)

static void gemm_nn(mp_dtype t, int64_t m, int64_t n, int64_t kk, const void *a, int64_t lda, const void *b, int64_t ldb,
                    double beta, void *c, int64_t ldc)
{
    mp_cpu_gemm(t, false, false, m, n, kk, 1.0, a, lda, b, ldb, beta, c, ldc);
}

/* Adds bias[m] to every position of Y's channel m. */
static void add_bias(mp_tensor *y, const mp_tensor *b, int64_t nm, int64_t per)
{
    int64_t nb = y->dims[0];
    for (int64_t n = 0; n < nb; n++)
        for (int64_t m = 0; m < nm; m++) {
            int64_t base = (n * nm + m) * per;
            if (y->dtype == MP_FLOAT) {
                float v = ((const float *)b->data)[m], *p = (float *)y->data + base;
                for (int64_t i = 0; i < per; i++) p[i] += v;
            } else {
                double v = ((const double *)b->data)[m], *p = (double *)y->data + base;
                for (int64_t i = 0; i < per; i++) p[i] += v;
            }
        }
}

static bool blas_float(mp_dtype t) { return t == MP_FLOAT || t == MP_DOUBLE; }

int mp_cpu_Conv(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *w = mp_kin(k, 1), *b = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !w || !y) return mp_fail(err, "missing input or output");
    if (x->dtype != w->dtype || x->dtype != y->dtype || (b && b->dtype != x->dtype)) return mp_fail(err, "dtypes differ");
    if (!blas_float(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    geom g;
    if (w->rank != x->rank || read_geom(k, x, y, w->dims + 2, false, &g, err)) return w->rank != x->rank ? mp_fail(err, "W rank differs from X") : -1;
    int64_t grp = mp_attr_int(k->node, "group", 1), N = x->dims[0], C = x->dims[1], M = w->dims[0];
    if (grp < 1 || C % grp || M % grp || w->dims[1] != C / grp || y->dims[0] != N || y->dims[1] != M)
        return mp_fail(err, "channels, group and W disagree");
    if (b && (b->rank != 1 || b->dims[0] != M)) return mp_fail(err, "B must be [M]");
    int64_t cg = C / grp, mg = M / grp, ck = cg * g.k_n, es = (int64_t)mp_elem_size(x->dtype);
    bool direct = true; /* 1x1, stride 1, no padding: X is the column matrix */
    for (int i = 0; i < g.nsp; i++)
        if (g.k[i] != 1 || g.s[i] != 1 || g.pb[i] || g.pe[i] || g.in[i] != g.out[i]) direct = false;
    int64_t L = g.out[g.nsp - 1], rows = L ? g.out_n / L : 0;
    int64_t chunk = rows;
    if (!direct && ck * L > 0) {
        chunk = (int64_t)IM2COL_BYTES / (ck * L * es);
        if (chunk < 1) chunk = 1;
        if (chunk > rows) chunk = rows;
    }
    void *col = direct || !chunk ? NULL : mp_scratch_array(k->scratch, ck * chunk * L, (size_t)es);
    if (!direct && chunk && !col) return mp_fail(err, "out of scratch memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < grp; gi++) {
            const char *xg = (const char *)x->data + (n * C + gi * cg) * g.in_n * es;
            const char *wg = (const char *)w->data + gi * mg * ck * es;
            char *yg = (char *)y->data + (n * M + gi * mg) * g.out_n * es;
            if (direct) {
                if (g.out_n) gemm_nn(x->dtype, mg, g.out_n, cg, wg, cg, xg, g.out_n, 0, yg, g.out_n);
                continue;
            }
            for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
                int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows, P = (r1 - r0) * L;
                if (x->dtype == MP_FLOAT) im2col_f32((const float *)xg, cg, &g, r0, r1, col);
                else im2col_f64((const double *)xg, cg, &g, r0, r1, col);
                gemm_nn(x->dtype, mg, P, ck, wg, ck, col, P, 0, yg + r0 * L * es, g.out_n);
            }
        }
    if (b) add_bias(y, b, M, g.out_n);
    return 0;
}

int mp_cpu_ConvTranspose(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *w = mp_kin(k, 1), *b = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !w || !y) return mp_fail(err, "missing input or output");
    if (x->dtype != w->dtype || x->dtype != y->dtype || (b && b->dtype != x->dtype)) return mp_fail(err, "dtypes differ");
    if (!blas_float(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    if (x->rank < 3 || w->rank != x->rank || y->rank != x->rank) return mp_fail(err, "X, W and Y ranks differ");
    int n = x->rank - 2;
    int64_t grp = mp_attr_int(k->node, "group", 1), N = x->dims[0], C = x->dims[1];
    if (grp < 1 || C % grp || w->dims[0] != C) return mp_fail(err, "channels, group and W disagree");
    int64_t mg = w->dims[1], M = mg * grp, cg = C / grp;
    if (y->dims[0] != N || y->dims[1] != M || (b && (b->rank != 1 || b->dims[0] != M))) return mp_fail(err, "Y or B channels disagree");
    const int64_t *ss, *ds, *ps, *ops;
    int ns = mp_attr_ints(k->node, "strides", &ss), nd = mp_attr_ints(k->node, "dilations", &ds);
    int np = mp_attr_ints(k->node, "pads", &ps), nop = mp_attr_ints(k->node, "output_padding", &ops);
    const int64_t *osh;
    bool has_shape = mp_attr_ints(k->node, "output_shape", &osh) >= 0;
    const char *ap = mp_attr_str(k->node, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if ((ns >= 0 && ns != n) || (nd >= 0 && nd != n) || (np >= 0 && np != 2 * n) || (nop >= 0 && nop != n))
        return mp_fail(err, "strides, dilations, pads or output_padding have the wrong length");
    int64_t in[MAXSP], out[MAXSP], kd[MAXSP], s[MAXSP], d[MAXSP], pb[MAXSP], in_n = 1, out_n = 1, k_n = 1;
    for (int i = 0; i < n; i++) {
        in[i] = x->dims[2 + i];
        out[i] = y->dims[2 + i];
        kd[i] = w->dims[2 + i];
        s[i] = ns >= 0 ? ss[i] : 1;
        d[i] = nd >= 0 ? ds[i] : 1;
        if (s[i] < 1 || d[i] < 1) return mp_fail(err, "strides and dilations must be positive");
        int64_t opad = nop >= 0 ? ops[i] : 0, full = s[i] * (in[i] - 1) + opad + (kd[i] - 1) * d[i] + 1;
        if (has_shape || same) { /* pads follow from the output size */
            int64_t total = full - out[i], half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor, as Python's // */
            pb[i] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
        } else {
            pb[i] = np >= 0 ? ps[i] : 0;
            int64_t want = full - pb[i] - (np >= 0 ? ps[n + i] : 0);
            if (want != out[i]) return mp_fail(err, "spatial dim %d: output %lld, the attributes give %lld", i, (long long)out[i], (long long)want);
        }
        in_n *= in[i];
        out_n *= out[i];
        k_n *= kd[i];
    }
    int64_t es = (int64_t)mp_elem_size(x->dtype), rowsz = mg * k_n;
    /* col = Wg^T [mg*k_n, cg] x Xg [cg, P] for a chunk of input positions */
    int64_t chunk = rowsz ? (int64_t)IM2COL_BYTES / (rowsz * es) : in_n;
    if (chunk < 1) chunk = 1;
    if (chunk > in_n) chunk = in_n;
    void *col = chunk ? mp_scratch_array(k->scratch, rowsz * chunk, (size_t)es) : NULL;
    if (chunk && !col) return mp_fail(err, "out of scratch memory");
    memset(y->data, 0, (size_t)(y->numel * es));
    for (int64_t bn = 0; bn < N; bn++)
        for (int64_t gi = 0; gi < grp; gi++) {
            const char *xg = (const char *)x->data + (bn * C + gi * cg) * in_n * es;
            const char *wg = (const char *)w->data + gi * cg * rowsz * es;
            for (int64_t p0 = 0; p0 < in_n; p0 += chunk) {
                int64_t P = p0 + chunk < in_n ? chunk : in_n - p0;
                if (rowsz == 0) break;
                mp_cpu_gemm(x->dtype, true, false, rowsz, P, cg, 1.0, wg, rowsz, xg + p0 * es, in_n, 0.0, col, P);
                /* col2im: Y[m, i*s - pb + k*d] += col[(m, k), i] */
                for (int64_t r = 0; r < rowsz; r++) {
                    int64_t m = r / k_n, kp = r % k_n, kidx[MAXSP];
                    for (int i = n - 1; i >= 0; i--) kidx[i] = kp % kd[i], kp /= kd[i];
                    int64_t ybase = (bn * M + gi * mg + m) * out_n;
                    for (int64_t p = 0; p < P; p++) {
                        int64_t ip = p0 + p, off = 0, stride = 1;
                        bool inside = true;
                        for (int i = n - 1; i >= 0; i--) {
                            int64_t ii = ip % in[i], o = ii * s[i] - pb[i] + kidx[i] * d[i];
                            ip /= in[i];
                            if (o < 0 || o >= out[i]) {
                                inside = false;
                                break;
                            }
                            off += o * stride;
                            stride *= out[i];
                        }
                        if (!inside) continue;
                        if (x->dtype == MP_FLOAT) ((float *)y->data)[ybase + off] += ((float *)col)[r * P + p];
                        else ((double *)y->data)[ybase + off] += ((double *)col)[r * P + p];
                    }
                }
            }
        }
    if (b) add_bias(y, b, M, out_n);
    return 0;
}

/* ---- pooling ------------------------------------------------------------------ */

typedef enum { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

static inline double rd(const mp_tensor *t, int64_t i)
{
    return t->dtype == MP_FLOAT ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}
static inline void wr(mp_tensor *t, int64_t i, double v)
{
    if (t->dtype == MP_FLOAT) ((float *)t->data)[i] = (float)v;
    else ((double *)t->data)[i] = v;
}

static int run_pool(const mp_kargs *k, pool_kind kind, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0), *ind = mp_kout(k, 1);
    if (!x || !y || x->dtype != y->dtype) return mp_fail(err, "missing input or output");
    if (!blas_float(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    geom g;
    bool ceil_mode = mp_attr_int(k->node, "ceil_mode", 0) != 0;
    if (read_geom(k, x, y, NULL, ceil_mode, &g, err)) return -1;
    if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1]) return mp_fail(err, "N and C must be kept");
    if (ind && (ind->dtype != MP_INT64 || ind->numel != y->numel)) return mp_fail(err, "Indices must be int64 like Y");
    bool include_pad = mp_attr_int(k->node, "count_include_pad", 0) != 0;
    bool col_major = mp_attr_int(k->node, "storage_order", 0) != 0;
    double p = (double)mp_attr_int(k->node, "p", 2);
    int n = g.nsp;
    int64_t planes = x->dims[0] * x->dims[1], istr[MAXSP];
    mp_strides(n, g.in, istr);
    for (int64_t pl = 0; pl < planes; pl++) {
        int64_t oidx[MAXSP] = {0};
        for (int64_t o = 0; o < g.out_n; o++) {
            double acc = kind == POOL_MAX ? -INFINITY : 0;
            int64_t cnt = 0, padcnt = 0, best = -1, kidx[MAXSP] = {0};
            for (int64_t t = 0; t < g.k_n; t++) {
                int64_t off = 0;
                bool inside = true, in_pad = true;
                for (int i = 0; i < n; i++) {
                    int64_t pos = oidx[i] * g.s[i] - g.pb[i] + kidx[i] * g.d[i];
                    if (pos < 0 || pos >= g.in[i]) inside = false;
                    if (pos < -g.pb[i] || pos >= g.in[i] + g.pe[i]) in_pad = false;
                    off += pos * istr[i];
                }
                padcnt += in_pad;
                if (inside) {
                    double v = rd(x, pl * g.in_n + off);
                    cnt++;
                    if (kind == POOL_MAX) {
                        if (v > acc || best < 0) acc = v, best = off;
                    } else if (kind == POOL_AVG) {
                        acc += v;
                    } else {
                        acc += pow(fabs(v), p);
                    }
                }
                for (int i = n - 1; i >= 0; i--) {
                    if (++kidx[i] < g.k[i]) break;
                    kidx[i] = 0;
                }
            }
            int64_t at = pl * g.out_n + o;
            if (kind == POOL_AVG) acc = acc / (double)(include_pad ? padcnt : cnt);
            else if (kind == POOL_LP) acc = pow(acc, 1 / p);
            wr(y, at, acc);
            if (ind) {
                int64_t idx = best < 0 ? 0 : best;
                if (col_major && best >= 0) { /* column-major position within the plane */
                    int64_t rem = best, cm = 0, str = 1, coord[MAXSP];
                    for (int i = n - 1; i >= 0; i--) coord[i] = rem % g.in[i], rem /= g.in[i];
                    for (int i = 0; i < n; i++) cm += coord[i] * str, str *= g.in[i];
                    idx = cm;
                }
                ((int64_t *)ind->data)[at] = pl * g.in_n + idx;
            }
            for (int i = n - 1; i >= 0; i--) {
                if (++oidx[i] < g.out[i]) break;
                oidx[i] = 0;
            }
        }
    }
    return 0;
}

int mp_cpu_MaxPool(const mp_kargs *k, mp_err *err) { return run_pool(k, POOL_MAX, err); }
int mp_cpu_AveragePool(const mp_kargs *k, mp_err *err) { return run_pool(k, POOL_AVG, err); }
int mp_cpu_LpPool(const mp_kargs *k, mp_err *err) { return run_pool(k, POOL_LP, err); }

static int run_global(const mp_kargs *k, pool_kind kind, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "needs an N, C, ... input and output");
    if (!blas_float(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t planes = x->dims[0] * x->dims[1], per = planes ? x->numel / planes : 0;
    if (y->numel != planes) return mp_fail(err, "output must have one element per (N, C)");
    double p = (double)mp_attr_int(k->node, "p", 2);
    for (int64_t pl = 0; pl < planes; pl++) {
        double acc = kind == POOL_MAX ? -INFINITY : 0;
        for (int64_t i = 0; i < per; i++) {
            double v = rd(x, pl * per + i);
            if (kind == POOL_MAX) acc = v > acc ? v : acc;
            else if (kind == POOL_AVG) acc += v;
            else acc += pow(fabs(v), p);
        }
        wr(y, pl, kind == POOL_AVG ? acc / (double)per : kind == POOL_LP ? pow(acc, 1 / p) : acc);
    }
    return 0;
}

int mp_cpu_GlobalAveragePool(const mp_kargs *k, mp_err *err) { return run_global(k, POOL_AVG, err); }
int mp_cpu_GlobalMaxPool(const mp_kargs *k, mp_err *err) { return run_global(k, POOL_MAX, err); }
int mp_cpu_GlobalLpPool(const mp_kargs *k, mp_err *err) { return run_global(k, POOL_LP, err); }

int mp_cpu_LRN(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "output must match the input");
    if (!blas_float(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t size = mp_attr_int(k->node, "size", 0);
    if (size < 1) return mp_fail(err, "size must be positive");
    double alpha = mp_attr_float(k->node, "alpha", 1e-4f), beta = mp_attr_float(k->node, "beta", 0.75f);
    double bias = mp_attr_float(k->node, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], per = (N * C) != 0 ? x->numel / (N * C) : 0;
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* floor below, ceil above */
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < per; i++) {
                double sq = 0;
                for (int64_t j = c - lo; j <= c + hi; j++)
                    if (j >= 0 && j < C) {
                        double v = rd(x, (n * C + j) * per + i);
                        sq += v * v;
                    }
                int64_t at = (n * C + c) * per + i;
                wr(y, at, rd(x, at) / pow(bias + alpha / (double)size * sq, beta));
            }
    return 0;
}
