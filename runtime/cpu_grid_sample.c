/* cpu_grid_sample.c - sampling grids: GridSample (opsets 16-22:
 * linear/bilinear, nearest, cubic/bicubic; zeros, border and reflection
 * padding; align_corners; any number of spatial dims) and GridSampleGrad, its
 * adjoint in X and in grid; AffineGrid (2-D and 3-D) and AffineGridGrad.
 *
 * Each output point samples X where the grid points. Per spatial dim a short
 * list of taps (input index, weight, and the weight's derivative in the
 * grid's value) follows ONNX's reference sampler (PyTorch's): the coordinate
 * is unnormalized, moved back inside by the padding mode, and the taps'
 * indices are mapped by it again. The taps of the dims multiply. The forward
 * sums tap products times X; the backward spreads dY over the same taps into
 * dX, and into each grid entry the sum of X times the derivative of that
 * dim's weights. A coordinate that is not finite samples nothing (zero, and
 * no gradient). Sums in double, in a fixed order.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

typedef enum { GS_LINEAR, GS_NEAREST, GS_CUBIC } gs_mode;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

enum { GS_MAX_DIMS = 6, GS_MAX_TAPS = 4 };

typedef struct gs_opts {
    gs_mode mode;
    gs_pad pad;
    bool align;
} gs_opts;

static int read_opts(const mp_kargs *k, int r, gs_opts *o, mp_err *err)
{
    const char *mode = mp_attr_str(k->node, "mode", "linear"), *pad = mp_attr_str(k->node, "padding_mode", "zeros");
    if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) o->mode = GS_LINEAR;
    else if (!strcmp(mode, "nearest")) o->mode = GS_NEAREST;
    else if (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) o->mode = GS_CUBIC;
    else return mp_fail(err, "unknown mode '%s'", mode);
    if (!strcmp(pad, "zeros")) o->pad = GS_ZEROS;
    else if (!strcmp(pad, "border")) o->pad = GS_BORDER;
    else if (!strcmp(pad, "reflection")) o->pad = GS_REFLECTION;
    else return mp_fail(err, "unknown padding_mode '%s'", pad);
    o->align = mp_attr_int(k->node, "align_corners", 0) != 0;
    if (r < 1 || r > GS_MAX_DIMS) return mp_kunsupported(err, "%d spatial dims (1 to %d)", r, GS_MAX_DIMS);
    return 0;
}

/* x reflected by the borders lo and hi until inside; *sign the derivative (+1 or -1, 0 when lo == hi). */
static double reflect(double x, double lo, double hi, double *sign)
{
    double span = hi - lo;
    *sign = 1;
    if (span <= 0) {
        *sign = 0;
        return lo;
    }
    if (x >= lo && x <= hi) return x;
    double d = x < lo ? lo - x : x - hi, n = floor(d / span), rest = d - n * span;
    bool even = fmod(n, 2.0) == 0;
    *sign = even ? -1 : 1;
    if (x < lo) return even ? lo + rest : hi - rest;
    return even ? hi - rest : lo + rest;
}

/* Keys' cubic convolution (a = -0.75) at distances 1 + t, t, 1 - t, 2 - t, and their derivatives in t. */
static void cubic_coeffs(double t, double *c, double *dc)
{
    const double a = -0.75;
    double s[4] = {1 + t, t, 1 - t, 2 - t}, ds[4] = {1, 1, -1, -1};
    for (int i = 0; i < 4; i++) {
        double x = s[i];
        if (i == 0 || i == 3) {
            c[i] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
            dc[i] = ds[i] * ((3 * a * x - 10 * a) * x + 8 * a);
        } else {
            c[i] = ((a + 2) * x - (a + 3)) * x * x + 1;
            dc[i] = ds[i] * (3 * (a + 2) * x - 2 * (a + 3)) * x;
        }
    }
}

/* The taps of one dim of size d at normalized coordinate g: the count (0: samples nothing), each with index
 * (-1: reads zero), weight and derivative in g. Nearest rounds half to even in every rank, as ONNX's
 * conformance data does (PyTorch's 3-D sampler rounds half away from zero). */
static int dim_taps(const gs_opts *o, double g, int64_t d, int64_t *idx, double *w, double *dw)
{
    double x = o->align ? (g + 1) / 2 * (double)(d - 1) : ((g + 1) * (double)d - 1) / 2;
    double dxdg = o->align ? (double)(d - 1) / 2 : (double)d / 2;
    if (!isfinite(x)) return 0;
    if (o->mode == GS_NEAREST) x = rint(x), dxdg = 0;
    double lo = o->align ? 0 : -0.5, hi = o->align ? (double)(d - 1) : (double)d - 0.5, sign;
    if (x < lo || x > hi) {
        if (o->pad == GS_BORDER) x = x < 0 ? 0 : (double)(d - 1), dxdg = 0;
        else if (o->pad == GS_REFLECTION) x = reflect(x, lo, hi, &sign), dxdg *= sign;
        else if (x < -8 || x > (double)d + 8) return 0; /* zeros: every tap outside */
    }
    int n;
    int64_t base;
    if (o->mode == GS_NEAREST) {
        base = (int64_t)x; /* toward zero, as the reference's integer cast */
        n = 1, w[0] = 1, dw[0] = 0;
    } else {
        double f = floor(x), t = x - f;
        base = (int64_t)f;
        if (o->mode == GS_LINEAR) {
            n = 2, w[0] = 1 - t, w[1] = t, dw[0] = -dxdg, dw[1] = dxdg;
        } else {
            double dc[4];
            n = 4, base -= 1;
            cubic_coeffs(t, w, dc);
            for (int i = 0; i < 4; i++) dw[i] = dc[i] * dxdg;
        }
    }
    for (int i = 0; i < n; i++) {
        int64_t j = base + i;
        if (o->pad == GS_ZEROS) j = j >= 0 && j < d ? j : -1;
        else if (o->pad == GS_BORDER) j = j < 0 ? 0 : j >= d ? d - 1 : j;
        else j = (int64_t)reflect((double)j, lo, hi, &sign);
        if (j >= d) j = d - 1; /* reflection's far border, d - 0.5, truncates inside; a guard */
        idx[i] = j < 0 && o->pad != GS_ZEROS ? 0 : j;
    }
    return n;
}

/* One output point's taps over every dim: offsets into one (n, c) slice of X (-1: zero), weights and, per dim,
 * the weight with that dim's factor differentiated. */
typedef struct point {
    int ntaps;
    int64_t off[1 << (2 * GS_MAX_DIMS)];
    double w[1 << (2 * GS_MAX_DIMS)];
    double dw[GS_MAX_DIMS][1 << (2 * GS_MAX_DIMS)];
} point;

static void point_taps(const gs_opts *o, int r, const int64_t *dims, const double *g, bool grads, point *p)
{
    int64_t idx[GS_MAX_DIMS][GS_MAX_TAPS];
    double w[GS_MAX_DIMS][GS_MAX_TAPS], dw[GS_MAX_DIMS][GS_MAX_TAPS];
    int n[GS_MAX_DIMS];
    p->ntaps = 0;
    for (int i = 0; i < r; i++) /* grid's last axis lists the dims last first: x is the width */
        if (!(n[i] = dim_taps(o, g[r - 1 - i], dims[i], idx[i], w[i], dw[i]))) return;
    int at[GS_MAX_DIMS] = {0};
    for (;;) {
        int64_t off = 0;
        double prod = 1;
        bool zero = false;
        for (int i = 0; i < r; i++) {
            zero |= idx[i][at[i]] < 0;
            off = off * dims[i] + (idx[i][at[i]] < 0 ? 0 : idx[i][at[i]]);
            prod *= w[i][at[i]];
        }
        int t = p->ntaps++;
        p->off[t] = zero ? -1 : off;
        p->w[t] = prod;
        for (int d = 0; grads && d < r; d++) {
            double q = dw[d][at[d]];
            for (int i = 0; i < r; i++)
                if (i != d) q *= w[i][at[i]];
            p->dw[d][t] = q;
        }
        int i = r - 1;
        while (i >= 0 && ++at[i] == n[i]) at[i--] = 0;
        if (i < 0) return;
    }
}

/* X [N, C, d..], grid [N, o.., r]: the spatial rank, sizes, and output points per batch entry. */
static int check(const mp_tensor *x, const mp_tensor *grid, int *r, int64_t *points, mp_err *err)
{
    if (!x || !grid) return mp_fail(err, "missing X or grid");
    *r = x->rank - 2;
    if (x->rank < 3 || grid->rank != x->rank || grid->dims[0] != x->dims[0] || grid->dims[grid->rank - 1] != *r)
        return mp_fail(err, "X must be [N, C, d..] and grid [N, o.., %d]", *r);
    *points = 1;
    for (int i = 1; i < grid->rank - 1; i++) *points *= grid->dims[i];
    return 0;
}

static bool float_type(mp_dtype t) { return t == MP_FLOAT || t == MP_DOUBLE || mp_dtype_is_half(t); }

int mp_cpu_GridSample(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *grid = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    int r;
    int64_t np;
    gs_opts o;
    if (check(x, grid, &r, &np, err) || read_opts(k, r, &o, err)) return -1;
    if (!float_type(x->dtype) || !float_type(grid->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    point *p = mp_scratch_alloc(k->scratch, sizeof *p);
    if (!p) return mp_fail(err, "out of scratch memory");
    int64_t N = x->dims[0], C = x->dims[1], in = 1;
    for (int i = 0; i < r; i++) in *= x->dims[2 + i];
    for (int64_t n = 0; n < N; n++)
        for (int64_t q = 0; q < np; q++) {
            double g[GS_MAX_DIMS];
            for (int i = 0; i < r; i++) g[i] = mp_tensor_get_f64(grid, (n * np + q) * r + i);
            point_taps(&o, r, x->dims + 2, g, false, p);
            for (int64_t c = 0; c < C; c++) {
                double s = 0;
                for (int t = 0; t < p->ntaps; t++)
                    if (p->off[t] >= 0) s += p->w[t] * mp_tensor_get_f64(x, (n * C + c) * in + p->off[t]);
                mp_tensor_set_f64(y, (n * C + c) * np + q, s);
            }
        }
    return 0;
}

/* (dY, X, grid) -> dX like X, dGrid like grid (either output may be absent). */
int mp_cpu_GridSampleGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0), *x = mp_kin(k, 1), *grid = mp_kin(k, 2);
    mp_tensor *dx = mp_kout(k, 0), *dgrid = mp_kout(k, 1);
    int r;
    int64_t np;
    gs_opts o;
    if (check(x, grid, &r, &np, err) || read_opts(k, r, &o, err)) return -1;
    if (!dy || !float_type(x->dtype) || !float_type(grid->dtype) || !float_type(dy->dtype))
        return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t N = x->dims[0], C = x->dims[1], in = 1;
    for (int i = 0; i < r; i++) in *= x->dims[2 + i];
    point *p = mp_scratch_alloc(k->scratch, sizeof *p);
    double *acc = dx ? mp_scratch_array(k->scratch, x->numel ? x->numel : 1, sizeof *acc) : NULL;
    if (!p || (dx && !acc)) return mp_fail(err, "out of scratch memory");
    if (acc) memset(acc, 0, (size_t)x->numel * sizeof *acc);
    for (int64_t n = 0; n < N; n++)
        for (int64_t q = 0; q < np; q++) {
            double g[GS_MAX_DIMS], dg[GS_MAX_DIMS] = {0};
            for (int i = 0; i < r; i++) g[i] = mp_tensor_get_f64(grid, (n * np + q) * r + i);
            point_taps(&o, r, x->dims + 2, g, dgrid != NULL, p);
            for (int64_t c = 0; c < C; c++) {
                double d = mp_tensor_get_f64(dy, (n * C + c) * np + q);
                for (int t = 0; t < p->ntaps; t++) {
                    if (p->off[t] < 0) continue;
                    int64_t at = (n * C + c) * in + p->off[t];
                    if (acc) acc[at] += d * p->w[t];
                    if (!dgrid) continue;
                    double v = d * mp_tensor_get_f64(x, at);
                    for (int i = 0; i < r; i++) dg[i] += v * p->dw[i][t];
                }
            }
            for (int i = 0; dgrid && i < r; i++) mp_tensor_set_f64(dgrid, (n * np + q) * r + (r - 1 - i), dg[i]);
        }
    for (int64_t i = 0; acc && i < x->numel; i++) mp_tensor_set_f64(dx, i, acc[i]);
    return 0;
}

/* ---- AffineGrid: grid[n, p, k] = sum_j theta[n, k, j] base[p, j], base = (x, y[, z], 1) ---- */

/* The base coordinate of index i along a dim of length len: the pixel centres in [-1, 1], or its corners
 * with align_corners (a single pixel sits at -1, as the reference's range does). */
static double base_coord(int64_t i, int64_t len, bool align)
{
    if (align) return len > 1 ? -1 + 2.0 * (double)i / (double)(len - 1) : -1;
    return -1 + (2.0 * (double)i + 1) / (double)len;
}

/* The homogeneous base point of flat spatial index p: (x, y[, z], 1), x along the last dim. */
static void base_point(int64_t p, int r, const int64_t *sp, bool align, double *b)
{
    for (int i = r - 1; i >= 0; i--) {
        b[r - 1 - i] = base_coord(p % sp[i], sp[i], align);
        p /= sp[i];
    }
    b[r] = 1;
}

/* theta [N, r, r + 1] with r 2 or 3, size (N, C, d..) of r + 2 entries: the spatial sizes and the point count. */
static int affine_dims(const mp_tensor *size, int64_t N, int *r, int64_t *sp, int64_t *points,
                       mp_err *err)
{
    int64_t s[5];
    int n = mp_read_ints(size, s, 5, "size", err);
    if (n < 0) return -1;
    if ((n != 4 && n != 5) || s[0] != N) return mp_fail(err, "size must be (N, C, H, W) or (N, C, D, H, W) for theta's N");
    *r = n - 2, *points = 1;
    for (int i = 0; i < *r; i++) {
        if (s[2 + i] < 0) return mp_fail(err, "size has a negative dim %lld", (long long)s[2 + i]);
        *points *= (sp[i] = s[2 + i]);
    }
    return 0;
}

int mp_cpu_AffineGrid(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *theta = mp_kin(k, 0), *size = mp_kin(k, 1);
    mp_tensor *grid = mp_kout(k, 0);
    if (!theta || !size || theta->rank != 3) return mp_fail(err, "theta must be [N, 2, 3] or [N, 3, 4]");
    if (!float_type(theta->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(theta->dtype));
    int r;
    int64_t sp[3], np, N = theta->dims[0];
    if (affine_dims(size, N, &r, sp, &np, err)) return -1;
    if (theta->dims[1] != r || theta->dims[2] != r + 1) return mp_fail(err, "theta must be [N, %d, %d]", r, r + 1);
    bool align = mp_attr_int(k->node, "align_corners", 0) != 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < np; p++) {
            double b[4];
            base_point(p, r, sp, align, b);
            for (int c = 0; c < r; c++) {
                double v = 0;
                for (int j = 0; j <= r; j++) v += mp_tensor_get_f64(theta, (n * r + c) * (r + 1) + j) * b[j];
                mp_tensor_set_f64(grid, (n * np + p) * r + c, v);
            }
        }
    return 0;
}

/* (dGrid, size) -> dTheta [N, r, r + 1]: dTheta[n, k, j] = sum_p dGrid[n, p, k] base[p, j]. */
int mp_cpu_AffineGridGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dg = mp_kin(k, 0), *size = mp_kin(k, 1);
    mp_tensor *dt = mp_kout(k, 0);
    if (!dg || !size || !dt) return mp_fail(err, "missing dGrid, size or dTheta");
    if (!float_type(dg->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(dg->dtype));
    int r;
    int64_t sp[3], np, N = dg->dims[0];
    if (affine_dims(size, N, &r, sp, &np, err)) return -1;
    if (dt->rank != 3 || dt->dims[1] != r || dt->dims[2] != r + 1) return mp_fail(err, "dTheta must be [N, %d, %d]", r, r + 1);
    bool align = mp_attr_int(k->node, "align_corners", 0) != 0;
    for (int64_t n = 0; n < N; n++) {
        double acc[3][4] = {{0}};
        for (int64_t p = 0; p < np; p++) {
            double b[4];
            base_point(p, r, sp, align, b);
            for (int c = 0; c < r; c++) {
                double d = mp_tensor_get_f64(dg, (n * np + p) * r + c);
                for (int j = 0; j <= r; j++) acc[c][j] += d * b[j];
            }
        }
        for (int c = 0; c < r; c++)
            for (int j = 0; j <= r; j++) mp_tensor_set_f64(dt, (n * r + c) * (r + 1) + j, acc[c][j]);
    }
    return 0;
}
