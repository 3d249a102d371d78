/* cpu_quant.c - linear quantization (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear) and the integer products (MatMulInteger,
 * ConvInteger) on 8-, 16- and 32-bit integers. float8 and 4-bit types are
 * not supported. Rounding is half to even, as ONNX specifies. */
#include <math.h>
#include <string.h>

#include "kernels.h"

static bool quant_type(mp_dtype t)
{
    return t == MP_INT8 || t == MP_UINT8 || t == MP_INT16 || t == MP_UINT16 || t == MP_INT32;
}

static void type_range(mp_dtype t, double *lo, double *hi)
{
    switch (t) {
    case MP_INT8: *lo = -128, *hi = 127; break;
    case MP_UINT8: *lo = 0, *hi = 255; break;
    case MP_INT16: *lo = -32768, *hi = 32767; break;
    case MP_UINT16: *lo = 0, *hi = 65535; break;
    default: *lo = -2147483648.0, *hi = 2147483647.0; break;
    }
}

/* Which scale / zero point element applies to each element of x: per tensor,
 * per axis (1-D scale), or per block of block_size along the axis. */
typedef struct qmap {
    int kind;                     /* 0 tensor, 1 axis, 2 blocked */
    int64_t outer, d, inner, block, nblk;
} qmap;

static int qmap_init(const mp_kargs *k, const mp_tensor *x, const mp_tensor *s, qmap *m, mp_err *err)
{
    memset(m, 0, sizeof *m);
    m->outer = m->inner = 1;
    if (s->numel == 1 && s->rank <= 1) return 0;
    int64_t axis = mp_attr_int(k->node, "axis", 1), B = mp_attr_int(k->node, "block_size", 0);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    m->d = x->dims[axis];
    for (int i = 0; i < axis; i++) m->outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) m->inner *= x->dims[i];
    if (B <= 0) {
        if (s->rank != 1 || s->numel != m->d) return mp_fail(err, "per-axis scale must have %lld entries", (long long)m->d);
        m->kind = 1;
        return 0;
    }
    m->kind = 2;
    m->block = B;
    m->nblk = (m->d + B - 1) / B;
    if (s->numel != m->outer * m->nblk * m->inner) return mp_fail(err, "blocked scale has %lld entries, expected %lld", (long long)s->numel, (long long)(m->outer * m->nblk * m->inner));
    return 0;
}

static int64_t qmap_at(const qmap *m, int64_t e)
{
    if (m->kind == 0) return 0;
    int64_t i = e % m->inner, j = e / m->inner % m->d, o = e / (m->inner * m->d);
    if (m->kind == 1) return j;
    return (o * m->nblk + j / m->block) * m->inner + i;
}

int mp_cpu_QuantizeLinear(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *s = mp_kin(k, 1), *zp = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !s || !y || y->numel != x->numel) return mp_fail(err, "needs x, y_scale and y of x's size");
    if (!quant_type(y->dtype) || (zp && zp->dtype != y->dtype) || !mp_dtype_is_float(s->dtype))
        return mp_kunsupported(err, "quantize to %s", mp_dtype_name(y->dtype));
    qmap m;
    if (qmap_init(k, x, s, &m, err)) return -1;
    if (zp && zp->numel != s->numel) return mp_fail(err, "zero point and scale differ in size");
    double lo, hi;
    type_range(y->dtype, &lo, &hi);
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t si = qmap_at(&m, e);
        double q = x->dtype == MP_FLOAT ? (double)((float)mp_tensor_get_f64(x, e) / (float)mp_tensor_get_f64(s, si))
                                        : mp_tensor_get_f64(x, e) / mp_tensor_get_f64(s, si);
        q = nearbyint(q) + (zp ? (double)mp_tensor_get_i64(zp, si) : 0);
        mp_tensor_set_f64(y, e, q < lo ? lo : q > hi ? hi : q); /* a NaN x (or 0 / 0) stores 0, not an undefined cast */
    }
    return 0;
}

int mp_cpu_DequantizeLinear(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *s = mp_kin(k, 1), *zp = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !s || !y || y->numel != x->numel) return mp_fail(err, "needs x, x_scale and y of x's size");
    if (!quant_type(x->dtype) || (zp && zp->dtype != x->dtype) || !mp_dtype_is_float(s->dtype) || !mp_dtype_is_float(y->dtype))
        return mp_kunsupported(err, "dequantize from %s", mp_dtype_name(x->dtype));
    qmap m;
    if (qmap_init(k, x, s, &m, err)) return -1;
    if (zp && zp->numel != s->numel) return mp_fail(err, "zero point and scale differ in size");
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t si = qmap_at(&m, e);
        double v = (double)(mp_tensor_get_i64(x, e) - (zp ? mp_tensor_get_i64(zp, si) : 0)) * mp_tensor_get_f64(s, si);
        mp_tensor_set_f64(y, e, v);
    }
    return 0;
}

/* uint8 quantization with scale and zero point from the data's range (and 0). */
int mp_cpu_DynamicQuantizeLinear(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0), *ys = mp_kout(k, 1), *yz = mp_kout(k, 2);
    if (!x || !y || x->dtype != MP_FLOAT || y->dtype != MP_UINT8 || y->numel != x->numel) return mp_kunsupported(err, "needs float32 x and uint8 y");
    const float *xs = x->data;
    float mn = 0, mx = 0;
    for (int64_t i = 0; i < x->numel; i++) mn = fminf(mn, xs[i]), mx = fmaxf(mx, xs[i]);
    float scale = (mx - mn) / 255.0f;
    float zf = scale != 0 ? nearbyintf(0 - mn / scale) : 0;
    zf = zf < 0 ? 0 : zf > 255 ? 255 : zf;
    for (int64_t i = 0; i < x->numel; i++) {
        float q = scale != 0 ? nearbyintf(xs[i] / scale) + zf : zf;
        ((uint8_t *)y->data)[i] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
    }
    if (ys) mp_tensor_set_f64(ys, 0, scale);
    if (yz) mp_tensor_set_i64(yz, 0, (int64_t)zf);
    return 0;
}

/* ---- integer products through float64 (exact below 2^53) ------------------------ */

/* dst = (t - zero point) as float64; zp per tensor, or per row block of `per` elements. */
static double *shifted(const mp_kargs *k, const mp_tensor *t, const mp_tensor *zp, int64_t per, mp_err *err)
{
    double *d = mp_scratch_array(k->scratch, t->numel ? t->numel : 1, sizeof *d);
    if (!d) {
        mp_fail(err, "out of scratch memory");
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t z = 0;
        if (zp && zp->numel == 1) z = mp_tensor_get_i64(zp, 0);
        else if (zp) z = mp_tensor_get_i64(zp, per ? (i / per) % zp->numel : 0);
        d[i] = (double)(mp_tensor_get_i64(t, i) - z);
    }
    return d;
}

int mp_cpu_MatMulInteger(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1), *za = mp_kin(k, 2), *zb = mp_kin(k, 3);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y || y->dtype != MP_INT32) return mp_fail(err, "needs A, B and an int32 output");
    if (!quant_type(a->dtype) || !quant_type(b->dtype)) return mp_kunsupported(err, "dtypes %s, %s", mp_dtype_name(a->dtype), mp_dtype_name(b->dtype));
    if (a->rank != 2 || b->rank != 2 || y->rank != 2) return mp_kunsupported(err, "batched MatMulInteger");
    int64_t m = a->dims[0], kk = a->dims[1], n = b->dims[1];
    if (b->dims[0] != kk || y->dims[0] != m || y->dims[1] != n) return mp_fail(err, "matrix dims disagree");
    if ((za && za->numel != 1 && za->numel != m) || (zb && zb->numel != 1 && zb->numel != n)) return mp_fail(err, "zero points must be scalars, per row of A or per column of B");
    double *da = shifted(k, a, za, kk, err), *db = mp_scratch_array(k->scratch, b->numel ? b->numel : 1, sizeof(double));
    if (!da || !db) return mp_fail(err, "out of scratch memory");
    for (int64_t i = 0; i < b->numel; i++) /* B's zero point is per column */
        db[i] = (double)(mp_tensor_get_i64(b, i) - (zb ? mp_tensor_get_i64(zb, zb->numel == 1 ? 0 : i % n) : 0));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < kk; p++) acc += da[i * kk + p] * db[p * n + j];
            ((int32_t *)y->data)[i * n + j] = (int32_t)(int64_t)acc;
        }
    return 0;
}

/* Conv on the shifted inputs in float64, rounded back to int32. Padding adds
 * the input zero point, which the shift maps to 0. */
int mp_cpu_ConvInteger(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *w = mp_kin(k, 1), *zx = mp_kin(k, 2), *zw = mp_kin(k, 3);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !w || !y || y->dtype != MP_INT32 || w->rank < 1) return mp_fail(err, "needs x, w and an int32 output");
    if (!quant_type(x->dtype) || !quant_type(w->dtype)) return mp_kunsupported(err, "dtypes %s, %s", mp_dtype_name(x->dtype), mp_dtype_name(w->dtype));
    if (zx && zx->numel != 1) return mp_fail(err, "x_zero_point must be a scalar");
    int64_t per_m = w->dims[0] ? w->numel / w->dims[0] : 0;
    mp_tensor xd = *x, wd = *w, yd = *y;
    xd.dtype = wd.dtype = yd.dtype = MP_DOUBLE;
    xd.data = shifted(k, x, zx, 0, err);
    wd.data = shifted(k, w, zw, per_m, err);
    yd.data = mp_scratch_array(k->scratch, y->numel ? y->numel : 1, sizeof(double));
    if (!xd.data || !wd.data || !yd.data) return mp_fail(err, "out of scratch memory");
    const mp_tensor *in[3] = {&xd, &wd, NULL};
    mp_tensor *out[1] = {&yd};
    mp_kargs k2 = *k;
    k2.in = in;
    k2.nin = 2;
    k2.out = out;
    k2.nout = 1;
    int rc = mp_cpu_Conv(&k2, err);
    if (rc) return rc;
    for (int64_t i = 0; i < y->numel; i++) ((int32_t *)y->data)[i] = (int32_t)(int64_t)nearbyint(((double *)yd.data)[i]);
    return 0;
}
