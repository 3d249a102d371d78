/* cpu_resize.c - Resize (opset 10..19: nearest, linear, cubic, antialias,
 * every coordinate transformation mode, axes, keep_aspect_ratio_policy) and
 * the older Upsample; ResizeGrad, the adjoint of Resize.
 *
 * Interpolation is separable, so it runs one axis at a time in double: for
 * each output coordinate of an axis a short list of (input index, weight)
 * taps is computed once, following ONNX's reference (neighbours taken from
 * an edge-padded input; ratio in (0, 1] so the left pixel is preferred).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

typedef enum { M_NEAREST, M_LINEAR, M_CUBIC } interp_mode;
typedef enum { C_HALF_PIXEL, C_HALF_PIXEL_SYM, C_PYTORCH, C_ALIGN, C_ASYM, C_TF_CROP } coord_mode;
typedef enum { N_PREFER_FLOOR, N_PREFER_CEIL, N_FLOOR, N_CEIL } nearest_mode;

typedef struct resize_opts {
    interp_mode mode;
    coord_mode coord;
    nearest_mode nearest;
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
} resize_opts;

static int pick(const char *s, const char *const *names, int n, const char *what, mp_err *err)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return mp_fail(err, "unknown %s '%s'", what, s);
}

static double cubic_w(double x, double a)
{
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* Taps of one axis: for output o, ntap[o] entries at tap[o*maxt ...];
 * ntap -1 means "extrapolation value". */
typedef struct taps {
    int maxt;
    int *ntap;
    int64_t *idx;
    double *w;
} taps;

static int make_taps(const mp_kargs *k, const resize_opts *op, int64_t in, int64_t out, double scale, double roi_s, double roi_e,
                     taps *t, mp_err *err)
{
    double sc = scale < 1 ? scale : 1; /* antialias widens the filter when downsampling */
    if (op->antialias && sc < 1.0 / 1024) return mp_fail(err, "antialias scale %g is too small", scale);
    int n;
    if (op->mode == M_NEAREST) n = 2;
    else if (!op->antialias) n = op->mode == M_LINEAR ? 2 : 4;
    else n = op->mode == M_LINEAR ? 2 - 2 * (int)(floor(-1 / sc) + 1) : 2 - 2 * (int)(floor(-2 / sc) + 1);
    if (n < 2 || n > 4096) return mp_fail(err, "scale %g gives an unusable filter", scale);
    t->maxt = n;
    t->ntap = mp_scratch_array(k->scratch, out ? out : 1, sizeof *t->ntap);
    t->idx = mp_scratch_array(k->scratch, (out ? out : 1) * n, sizeof *t->idx);
    t->w = mp_scratch_array(k->scratch, (out ? out : 1) * n, sizeof *t->w);
    if (!t->ntap || !t->idx || !t->w) return mp_fail(err, "out of scratch memory");
    double in_w = (double)in, out_w = scale * in_w;
    for (int64_t o = 0; o < out; o++) {
        double x = (double)o, xo;
        switch (op->coord) {
        case C_HALF_PIXEL: xo = (x + 0.5) / scale - 0.5; break;
        case C_HALF_PIXEL_SYM: {
            double adj = (double)out / out_w, center = in_w / 2;
            xo = center * (1 - adj) + (x + 0.5) / scale - 0.5;
            break;
        }
        case C_PYTORCH: xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
        case C_ALIGN: xo = out_w == 1 ? 0 : x * (in_w - 1) / (out_w - 1); break;
        case C_ASYM: xo = x / scale; break;
        default:
            xo = out_w == 1 ? (roi_e - roi_s) * (in_w - 1) / 2 : x * (roi_e - roi_s) * (in_w - 1) / (out_w - 1);
            xo += roi_s * (in_w - 1);
            break;
        }
        int *nt = &t->ntap[o];
        int64_t *ix = t->idx + o * n;
        double *w = t->w + o * n;
        if (op->coord == C_TF_CROP && (xo < 0 || xo > in_w - 1)) {
            *nt = -1;
            continue;
        }
        double fl = floor(xo), ratio = xo - fl;
        int64_t i0 = (int64_t)fl;
        if (ratio == 0) ratio = 1, i0--; /* integer: the pixel itself, as the right neighbour */
        int64_t first = i0 - n / 2 + 1;  /* n nearest neighbours, left preferred */
        for (int j = 0; j < n; j++) ix[j] = first + j;
        if (op->mode == M_NEAREST) {
            bool right = ratio == 1 || op->nearest == N_CEIL ||
                         (op->nearest == N_PREFER_FLOOR && ratio > 0.5) || (op->nearest == N_PREFER_CEIL && ratio >= 0.5);
            if (op->nearest == N_FLOOR && ratio != 1) right = false;
            w[0] = !right;
            w[1] = right;
        } else if (op->mode == M_LINEAR && !op->antialias) {
            w[0] = 1 - ratio;
            w[1] = ratio;
        } else if (op->mode == M_CUBIC && !op->antialias) {
            double a = op->cubic_a;
            w[0] = cubic_w(ratio + 1, a);
            w[1] = cubic_w(ratio, a);
            w[2] = cubic_w(1 - ratio, a);
            w[3] = cubic_w(2 - ratio, a);
        } else { /* antialias: the filter stretched by 1/scale, normalized */
            double s = 0;
            for (int j = 0; j < n; j++) {
                double arg = ((double)(ix[j] - i0) - ratio) * sc;
                w[j] = op->mode == M_LINEAR ? fmax(0, 1 - fabs(arg)) : cubic_w(arg, op->cubic_a);
                s += w[j];
            }
            for (int j = 0; j < n; j++) w[j] /= s;
        }
        if (op->exclude_outside) {
            double s = 0;
            for (int j = 0; j < n; j++) {
                if (ix[j] < 0 || ix[j] >= in) w[j] = 0;
                s += w[j];
            }
            for (int j = 0; j < n; j++) w[j] = s ? w[j] / s : 0;
        }
        /* edge padding; keep only the non-zero taps */
        int m = 0;
        for (int j = 0; j < n; j++) {
            if (w[j] == 0) continue;
            ix[m] = ix[j] < 0 ? 0 : ix[j] >= in ? in - 1 : ix[j];
            w[m++] = w[j];
        }
        *nt = m;
    }
    return 0;
}

/* Interpolates along every axis whose taps are not the identity. */
static int resize_run(const mp_kargs *k, const mp_tensor *x, mp_tensor *y, const resize_opts *op, const double *scale,
                      const double *roi, mp_err *err)
{
    int r = x->rank;
    if (y->rank != r) return mp_fail(err, "output rank differs from input");
    if (!mp_elem_size(x->dtype) || x->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t cur[MP_MAX_RANK], biggest = x->numel > y->numel ? x->numel : y->numel;
    for (int i = 0; i < r; i++) {
        if (y->dims[i] > 0 && x->dims[i] == 0) return mp_fail(err, "cannot resize an empty axis");
        cur[i] = x->dims[i];
    }
    /* the largest intermediate, upsampling axes in order */
    int64_t sz = x->numel;
    for (int i = 0; i < r; i++) {
        sz = x->dims[i] ? sz / x->dims[i] * y->dims[i] : 0;
        if (sz > biggest) biggest = sz;
    }
    double *a = mp_scratch_array(k->scratch, biggest ? biggest : 1, sizeof(double));
    double *b = mp_scratch_array(k->scratch, biggest ? biggest : 1, sizeof(double));
    if (!a || !b) return mp_fail(err, "out of scratch memory");
    for (int64_t i = 0; i < x->numel; i++) a[i] = mp_tensor_get_f64(x, i);
    for (int ax = 0; ax < r; ax++) {
        int64_t in = cur[ax], out = y->dims[ax];
        taps t = {0};
        if (make_taps(k, op, in, out, scale[ax], roi[ax], roi[r + ax], &t, err)) return -1;
        bool ident = in == out;
        for (int64_t o = 0; o < out && ident; o++) ident = t.ntap[o] == 1 && t.idx[o * t.maxt] == o && t.w[o * t.maxt] == 1;
        if (ident) continue;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < ax; i++) outer *= cur[i];
        for (int i = ax + 1; i < r; i++) inner *= cur[i];
        for (int64_t p = 0; p < outer; p++)
            for (int64_t o = 0; o < out; o++) {
                double *dst = b + (p * out + o) * inner;
                int nt = t.ntap[o];
                for (int64_t i = 0; i < inner; i++) dst[i] = nt < 0 ? op->extrapolation : 0;
                for (int j = 0; j < nt; j++) {
                    const double *src = a + (p * in + t.idx[o * t.maxt + j]) * inner;
                    double w = t.w[o * t.maxt + j];
                    for (int64_t i = 0; i < inner; i++) dst[i] += w * src[i];
                }
            }
        cur[ax] = out;
        double *s = a;
        a = b;
        b = s;
    }
    for (int64_t i = 0; i < y->numel; i++) mp_tensor_set_f64(y, i, a[i]);
    return 0;
}

/* The adjoint of resize_run: dX from dY, the axes in reverse, each output
 * cell's value added to the input cells it blended, with its weights (the
 * extrapolation constant has no input, so no gradient). */
static int resize_adjoint(const mp_kargs *k, const mp_tensor *dy, mp_tensor *dx, const resize_opts *op,
                          const double *scale, const double *roi, mp_err *err)
{
    int r = dx->rank;
    if (dy->rank != r) return mp_fail(err, "dY's rank differs from dX's");
    if (!mp_dtype_is_float(dy->dtype) || dx->dtype != dy->dtype) return mp_kunsupported(err, "dtype %s", mp_dtype_name(dy->dtype));
    int64_t cur[MP_MAX_RANK], biggest = dx->numel > dy->numel ? dx->numel : dy->numel, sz = dy->numel;
    for (int i = 0; i < r; i++) cur[i] = dy->dims[i];
    for (int i = r - 1; i >= 0; i--) {
        sz = dy->dims[i] ? sz / dy->dims[i] * dx->dims[i] : 0;
        if (sz > biggest) biggest = sz;
    }
    double *a = mp_scratch_array(k->scratch, biggest ? biggest : 1, sizeof(double));
    double *b = mp_scratch_array(k->scratch, biggest ? biggest : 1, sizeof(double));
    if (!a || !b) return mp_fail(err, "out of scratch memory");
    for (int64_t i = 0; i < dy->numel; i++) a[i] = mp_tensor_get_f64(dy, i);
    for (int ax = r - 1; ax >= 0; ax--) {
        int64_t in = dx->dims[ax], out = cur[ax];
        if (out > 0 && in == 0) return mp_fail(err, "cannot resize an empty axis");
        taps t = {0};
        if (make_taps(k, op, in, out, scale[ax], roi[ax], roi[r + ax], &t, err)) return -1;
        bool ident = in == out;
        for (int64_t o = 0; o < out && ident; o++) ident = t.ntap[o] == 1 && t.idx[o * t.maxt] == o && t.w[o * t.maxt] == 1;
        if (ident) continue;
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < ax; i++) outer *= cur[i];
        for (int i = ax + 1; i < r; i++) inner *= cur[i];
        memset(b, 0, (size_t)(outer * in * inner) * sizeof *b);
        for (int64_t p = 0; p < outer; p++)
            for (int64_t o = 0; o < out; o++) {
                const double *src = a + (p * out + o) * inner;
                for (int j = 0; j < t.ntap[o]; j++) {
                    double *dst = b + (p * in + t.idx[o * t.maxt + j]) * inner, w = t.w[o * t.maxt + j];
                    for (int64_t i = 0; i < inner; i++) dst[i] += w * src[i];
                }
            }
        cur[ax] = in;
        double *s = a;
        a = b;
        b = s;
    }
    for (int64_t i = 0; i < dx->numel; i++) mp_tensor_set_f64(dx, i, a[i]);
    return 0;
}

/* Resize's attributes and its roi, scales and sizes inputs (opset 10: X,
 * scales; old selects its defaults), for an input of dims x[r]: the options,
 * each axis's scale and roi (start at [a], end at [r + a]). */
static int resize_setup(const mp_kargs *k, const int64_t *x, int r, bool old, resize_opts *op, double *scale, double *roi,
                        mp_err *err)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    int m = pick(mp_attr_str(k->node, "mode", "nearest"), modes, 3, "mode", err);
    /* opset 10 had no coordinate attribute and behaved as asymmetric */
    int c = pick(mp_attr_str(k->node, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel"), coords, 6, "coordinate_transformation_mode", err);
    int nm = pick(mp_attr_str(k->node, "nearest_mode", old ? "floor" : "round_prefer_floor"), nearests, 4, "nearest_mode", err);
    int pol = pick(mp_attr_str(k->node, "keep_aspect_ratio_policy", "stretch"), policies, 3, "keep_aspect_ratio_policy", err);
    if (m < 0 || c < 0 || nm < 0 || pol < 0) return -1;
    op->mode = (interp_mode)m;
    op->coord = (coord_mode)c;
    op->nearest = (nearest_mode)nm;
    op->cubic_a = mp_attr_float(k->node, "cubic_coeff_a", -0.75f);
    op->extrapolation = mp_attr_float(k->node, "extrapolation_value", 0.0f);
    op->exclude_outside = mp_attr_int(k->node, "exclude_outside", 0) != 0;
    op->antialias = mp_attr_int(k->node, "antialias", 0) != 0 && op->mode != M_NEAREST;
    int64_t axes[MP_MAX_RANK];
    const int64_t *aa;
    int na = mp_attr_ints(k->node, "axes", &aa);
    if (na > r) return mp_fail(err, "more axes than dims");
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    } else {
        for (int i = 0; i < na; i++) {
            axes[i] = aa[i] < 0 ? aa[i] + r : aa[i];
            if (axes[i] < 0 || axes[i] >= r) return mp_fail(err, "axis %lld out of range", (long long)aa[i]);
        }
    }
    const mp_tensor *roi_t = old ? NULL : mp_kin(k, 1);
    const mp_tensor *sc_t = mp_kin(k, old ? 1 : 2), *sz_t = old ? NULL : mp_kin(k, 3);
    if (sc_t && sc_t->numel == 0) sc_t = NULL;
    if (sz_t && sz_t->numel == 0) sz_t = NULL;
    if (!sc_t == !sz_t) return mp_fail(err, "exactly one of scales and sizes must be given");
    for (int i = 0; i < r; i++) scale[i] = 1, roi[i] = 0, roi[r + i] = 1;
    if (roi_t && roi_t->numel > 0 && op->coord == C_TF_CROP) {
        if (roi_t->numel != 2 * na) return mp_fail(err, "roi has %lld entries for %d axes", (long long)roi_t->numel, na);
        for (int i = 0; i < na; i++) {
            roi[axes[i]] = mp_tensor_get_f64(roi_t, i);
            roi[r + axes[i]] = mp_tensor_get_f64(roi_t, na + i);
        }
    }
    if (sc_t) {
        if (sc_t->numel != na) return mp_fail(err, "scales has %lld entries for %d axes", (long long)sc_t->numel, na);
        for (int i = 0; i < na; i++) {
            scale[axes[i]] = mp_tensor_get_f64(sc_t, i);
            if (!(scale[axes[i]] > 0)) return mp_fail(err, "scales must be positive");
        }
    } else {
        if (sz_t->numel != na) return mp_fail(err, "sizes has %lld entries for %d axes", (long long)sz_t->numel, na);
        double lo = INFINITY, hi = 0;
        for (int i = 0; i < na; i++) {
            int64_t a = axes[i];
            if (x[a] == 0) return mp_fail(err, "cannot resize an empty axis");
            scale[a] = (double)mp_tensor_get_i64(sz_t, i) / (double)x[a];
            lo = fmin(lo, scale[a]);
            hi = fmax(hi, scale[a]);
        }
        if (pol)
            for (int i = 0; i < na; i++) scale[axes[i]] = pol == 1 ? lo : hi;
    }
    return 0;
}

int mp_cpu_Resize(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || x->dtype != y->dtype) return mp_fail(err, "missing input or output");
    resize_opts op;
    double scale[MP_MAX_RANK], roi[2 * MP_MAX_RANK];
    if (resize_setup(k, x->dims, x->rank, k->opset < 11, &op, scale, roi, err)) return -1;
    return resize_run(k, x, y, &op, scale, roi, err);
}

/* ResizeGrad(dY, roi, scales, sizes){Resize's attributes (opset 11's form), shape}: dX of X's shape. */
int mp_cpu_ResizeGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dx = mp_kout(k, 0);
    if (!dy || !dx) return mp_fail(err, "missing dY or dX");
    resize_opts op;
    double scale[MP_MAX_RANK], roi[2 * MP_MAX_RANK];
    if (resize_setup(k, dx->dims, dx->rank, false, &op, scale, roi, err)) return -1;
    return resize_adjoint(k, dy, dx, &op, scale, roi, err);
}

/* Upsample (opsets 7-9): scales as attribute (7) or input (9), asymmetric
 * coordinates, nearest rounding down. */
int mp_cpu_Upsample(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || x->dtype != y->dtype) return mp_fail(err, "missing input or output");
    int r = x->rank;
    double scale[MP_MAX_RANK], roi[2 * MP_MAX_RANK];
    const mp_attr *sa = mp_node_attr(k->node, "scales");
    const mp_tensor *st = mp_kin(k, 1);
    int64_t ns = sa ? sa->n : st ? st->numel : -1;
    if (ns != r) return mp_fail(err, "scales must have one entry per dim");
    for (int i = 0; i < r; i++) {
        scale[i] = sa ? sa->floats[i] : mp_tensor_get_f64(st, i);
        roi[i] = 0, roi[r + i] = 1;
        if (!(scale[i] > 0)) return mp_fail(err, "scales must be positive");
    }
    static const char *const modes[] = {"nearest", "linear", "bilinear"};
    int m = pick(mp_attr_str(k->node, "mode", "nearest"), modes, 3, "mode", err);
    if (m < 0) return -1;
    resize_opts op = {m == 0 ? M_NEAREST : M_LINEAR, C_ASYM, N_FLOOR, -0.75, 0, false, false};
    return resize_run(k, x, y, &op, scale, roi, err);
}
