/* mp_cu_kernels.h - the element functions of the runtime kernels: what one
 * GPU thread computes, written once in plain C and compiled twice, as
 * __device__ code by memplan_cuda.cu and as host code by mp_cu_host.c (which
 * the tests run against the CPU executor, so the index math and the math of
 * every kernel are checked without a GPU).
 *
 *   MP_HD void k_copy(const mp_cu_args *a, int64_t i);   // thread i of MP_CU_COPY
 *
 * Semantics follow the CPU reference kernels (runtime/cpu_*.c): sums and
 * statistics accumulate in double, in the CPU's order where one thread does
 * the whole sum, and round once into the output. */
#ifndef MP_CU_KERNELS_H
#define MP_CU_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "memplan_cuda.h"

#ifdef __CUDACC__
#define MP_HD __host__ __device__ static inline
#else
#define MP_HD static inline
#endif
#ifdef __CUDA_ARCH__ /* the device pass */
#define MP_ATOMIC_ADD_F32(p, v) atomicAdd((p), (v))
#if __CUDA_ARCH__ >= 600
#define MP_ATOMIC_ADD_F64(p, v) atomicAdd((p), (v))
#else /* no double atomicAdd before sm_60: compare and swap */
#define MP_ATOMIC_ADD_F64(p, v) mp_cu_atomic_add_f64((p), (v))
__device__ static inline void mp_cu_atomic_add_f64(double *p, double v)
{
    unsigned long long *u = (unsigned long long *)p, old = *u, seen;
    do {
        seen = old;
        old = atomicCAS(u, seen, (unsigned long long)__double_as_longlong(__longlong_as_double((long long)seen) + v));
    } while (old != seen);
}
#endif
#else
#define MP_ATOMIC_ADD_F32(p, v) (*(p) += (v))
#define MP_ATOMIC_ADD_F64(p, v) (*(p) += (v))
#endif

/* What a launch gets by value: operand pointers (NULL absent) and dtypes, the
 * instruction's parameters, and the run's seed. */
typedef struct mp_cu_args {
    void *x[MP_CU_NT];
    int dt[MP_CU_NT];
    int64_t n;
    int64_t p[MP_CU_NP];
    double f[MP_CU_NF];
    uint64_t seed;
} mp_cu_args;

/* ---- element access ------------------------------------------------------- */

MP_HD int mp_cu_esize(int dt)
{
    switch (dt) {
    case MP_CU_BOOL: case MP_CU_U8: case MP_CU_I8: return 1;
    case MP_CU_U16: case MP_CU_I16: case MP_CU_BF16: case MP_CU_F16: return 2;
    case MP_CU_I32: case MP_CU_F32: return 4;
    default: return 8;
    }
}

/* 16-bit floats, as ir/half.c converts them: widening is exact; rounding is to
 * nearest even, float16 with subnormals and overflow to inf; NaN stays NaN
 * (quiet, sign and top payload bits kept). */
MP_HD uint32_t mp_cu_f32_bits(float f)
{
    union { float f; uint32_t u; } b;
    b.f = f;
    return b.u;
}

MP_HD float mp_cu_bits_f32(uint32_t u)
{
    union { float f; uint32_t u; } b;
    b.u = u;
    return b.f;
}

MP_HD float mp_cu_bf16_to_f32(uint16_t h) { return mp_cu_bits_f32((uint32_t)h << 16); }

MP_HD float mp_cu_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31) return mp_cu_bits_f32(s | 0x7f800000u | (m << 13)); /* inf, NaN (payload kept) */
    if (e) return mp_cu_bits_f32(s | ((e + 127 - 15) << 23) | (m << 13));
    float v = (float)m * 0x1p-24f; /* zero or subnormal: m * 2^-24, exact */
    return s ? -v : v;
}

MP_HD uint16_t mp_cu_f32_to_bf16(float f)
{
    uint32_t b = mp_cu_f32_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* NaN, quiet */
    b += 0x7fffu + ((b >> 16) & 1); /* ties to even; a carry moves to the next binade or to inf */
    return (uint16_t)(b >> 16);
}

/* q + rem / 2^shift rounded to an integer, ties to even. */
MP_HD uint32_t mp_cu_rne(uint32_t q, uint32_t rem, int shift)
{
    uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

MP_HD uint16_t mp_cu_f32_to_f16(float f)
{
    uint32_t b = mp_cu_f32_bits(f), s = (b >> 16) & 0x8000, a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00 | ((a >> 13) & 0x3ff)); /* NaN, quiet */
    if (a >= 0x47800000u) return (uint16_t)(s | 0x7c00);                      /* >= 2^16: inf */
    if (a >= 0x38800000u) {                                                   /* normal: rebias, drop 13 bits */
        uint32_t r = a - 0x38000000u;
        return (uint16_t)(s | mp_cu_rne(r >> 13, r & 0x1fff, 13));
    }
    uint32_t e = a >> 23; /* below 2^-14: a subnormal k * 2^-24, or zero */
    if (e < 102) return (uint16_t)s;
    uint32_t m = (a & 0x7fffff) | 0x800000;
    int shift = 126 - (int)e;
    return (uint16_t)(s | mp_cu_rne(m >> shift, m & ((1u << shift) - 1), shift));
}

MP_HD int mp_cu_is_half(int dt) { return dt == MP_CU_BF16 || dt == MP_CU_F16; }

/* Element s of src into element d of dst, both of dtype dt: the bytes moved, whatever the type. */
MP_HD void mp_cu_move(void *dst, int64_t d, const void *src, int64_t s, int dt)
{
    switch (mp_cu_esize(dt)) {
    case 1: ((unsigned char *)dst)[d] = ((const unsigned char *)src)[s]; break;
    case 2: ((uint16_t *)dst)[d] = ((const uint16_t *)src)[s]; break;
    case 4: ((uint32_t *)dst)[d] = ((const uint32_t *)src)[s]; break;
    default: ((uint64_t *)dst)[d] = ((const uint64_t *)src)[s]; break;
    }
}

MP_HD double mp_cu_ld(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case MP_CU_F32: return ((const float *)p)[i];
    case MP_CU_I64: return (double)((const int64_t *)p)[i];
    case MP_CU_BOOL: return ((const unsigned char *)p)[i] != 0;
    case MP_CU_I32: return ((const int32_t *)p)[i];
    case MP_CU_U8: return ((const uint8_t *)p)[i];
    case MP_CU_I8: return ((const int8_t *)p)[i];
    case MP_CU_U16: return ((const uint16_t *)p)[i];
    case MP_CU_I16: return ((const int16_t *)p)[i];
    case MP_CU_BF16: return mp_cu_bf16_to_f32(((const uint16_t *)p)[i]);
    case MP_CU_F16: return mp_cu_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const double *)p)[i];
    }
}

/* An integer of any dtype, as ir/graph.c mp_tensor_get_i64 reads it: a float truncated, NaN or past int64 0. */
MP_HD int64_t mp_cu_ldi(const void *p, int dt, int64_t i)
{
    if (dt == MP_CU_I64) return ((const int64_t *)p)[i];
    if (dt == MP_CU_I32) return ((const int32_t *)p)[i];
    double d = mp_cu_ld(p, dt, i);
    return d == d && d < 9.2e18 && d > -9.2e18 ? (int64_t)d : 0;
}

/* Where line l of an outer x d x inner tensor starts (its elements step by inner). */
MP_HD int64_t mp_cu_line_base(int64_t l, int64_t d, int64_t inner) { return (l / inner) * d * inner + l % inner; }

/* An integer into element i of an integer dtype, wrapping to its width (ir/graph.c mp_tensor_set_i64). */
MP_HD void mp_cu_sti(void *p, int dt, int64_t i, int64_t v)
{
    switch (dt) {
    case MP_CU_I64: ((int64_t *)p)[i] = v; break;
    case MP_CU_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    case MP_CU_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MP_CU_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MP_CU_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MP_CU_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MP_CU_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MP_CU_F32: ((float *)p)[i] = (float)(double)v; break;
    case MP_CU_BF16: ((uint16_t *)p)[i] = mp_cu_f32_to_bf16((float)(double)v); break;
    case MP_CU_F16: ((uint16_t *)p)[i] = mp_cu_f32_to_f16((float)(double)v); break;
    default: ((double *)p)[i] = (double)v; break;
    }
}

MP_HD void mp_cu_st(void *p, int dt, int64_t i, double v)
{
    switch (dt) {
    case MP_CU_F32: ((float *)p)[i] = (float)v; break;
    case MP_CU_BOOL: ((unsigned char *)p)[i] = v != 0; break; /* NaN true, as the CPU's Cast */
    case MP_CU_F64: ((double *)p)[i] = v; break;
    /* the CPU's widen-run-round: its fp32 kernel rounds into fp32, then exec.c round16 to 16 bits */
    case MP_CU_BF16: ((uint16_t *)p)[i] = mp_cu_f32_to_bf16((float)v); break;
    case MP_CU_F16: ((uint16_t *)p)[i] = mp_cu_f32_to_f16((float)v); break;
    default: /* the integers as ir/graph.c mp_tensor_set_f64: NaN 0, clamped to int64, wrapped to the width */
        mp_cu_sti(p, dt, i, v != v ? 0 : v >= 9.2e18 ? (int64_t)9.2e18 : v <= -9.2e18 ? (int64_t)-9.2e18 : (int64_t)v);
        break;
    }
}

/* Element offset of flat index i (row-major over dims) under strides str. */
MP_HD int64_t mp_cu_at(int rank, const int64_t *dims, const int64_t *str, int64_t i)
{
    int64_t off = 0;
    for (int a = rank - 1; a >= 0; a--) {
        off += (i % dims[a]) * str[a];
        i /= dims[a];
    }
    return off;
}

/* ---- MP_CU_FILL, MP_CU_COPY ------------------------------------------------- */

/* v rounded to dtype dt, as a store and a load would round it. */
MP_HD double mp_cu_round_to(int dt, double v)
{
    if (dt == MP_CU_BF16) return mp_cu_bf16_to_f32(mp_cu_f32_to_bf16((float)v));
    if (dt == MP_CU_F16) return mp_cu_f16_to_f32(mp_cu_f32_to_f16((float)v));
    return dt == MP_CU_F32 ? (double)(float)v : v;
}

MP_HD void k_fill(const mp_cu_args *a, int64_t i) { mp_cu_st(a->x[0], a->dt[0], i, a->f[0]); }

/* p: rank r, dims[r], src offset, src strides[r], dst offset, dst strides[r] */
MP_HD void k_copy(const mp_cu_args *a, int64_t i)
{
    int r = (int)a->p[0];
    const int64_t *dims = a->p + 1, *ss = a->p + 2 + r, *ds = a->p + 3 + 2 * r;
    int64_t s = a->p[1 + r], d = a->p[2 + 2 * r];
    for (int k = r - 1; k >= 0; k--) { /* one unflattening for both views */
        int64_t q = i / dims[k], at = i - q * dims[k];
        s += at * ss[k], d += at * ds[k], i = q;
    }
    mp_cu_move(a->x[1], d, a->x[0], s, a->dt[0]);
}

/* ---- MP_CU_MAP ------------------------------------------------------------------ */

MP_HD double mp_cu_sigmoid(double v) { return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)); }
MP_HD double mp_cu_softplus(double v) { return (v > 0 ? v : 0) + log1p(exp(-fabs(v))); }

MP_HD double mp_cu_fn(int fn, double u, double v, double w, const double *f)
{
    const double c = 0.7978845608028654; /* sqrt(2 / pi) */
    switch (fn) {
    case MP_FN_IDENT: return u;
    case MP_FN_RELU: return u > 0 ? u : 0;
    case MP_FN_NEG: return -u;
    case MP_FN_EXP: return exp(u);
    case MP_FN_LOG: return log(u);
    case MP_FN_SQRT: return sqrt(u);
    case MP_FN_RECIP: return 1 / u;
    case MP_FN_ABS: return fabs(u);
    case MP_FN_TANH: return tanh(u);
    case MP_FN_SIGMOID: return mp_cu_sigmoid(u);
    case MP_FN_ERF: return erf(u);
    case MP_FN_GELU: return 0.5 * u * (1 + erf(u * 0.70710678118654752440));
    case MP_FN_GELU_TANH: return 0.5 * u * (1 + tanh(c * (u + 0.044715 * u * u * u)));
    case MP_FN_HARD_SIGMOID: return fmax(0.0, fmin(1.0, f[0] * u + f[1]));
    case MP_FN_HARD_SWISH: return u * fmax(0.0, fmin(1.0, u / 6 + 0.5));
    case MP_FN_SCALE: return f[0] * u / f[1];
    case MP_FN_LEAKY_RELU: return u >= 0 ? u : f[0] * u;
    case MP_FN_CLIP: return u < f[0] ? f[0] : u > f[1] ? f[1] : u; /* as the CPU kernel: NaN stays NaN */
    /* runtime/cpu_elementwise.c's expressions; f: the attributes (alpha, gamma) */
    case MP_FN_SIN: return sin(u);
    case MP_FN_COS: return cos(u);
    case MP_FN_SIGN: return u > 0 ? 1 : u < 0 ? -1 : u; /* 0, -0 and NaN as they are */
    case MP_FN_FLOOR: return floor(u);
    case MP_FN_CEIL: return ceil(u);
    case MP_FN_ROUND: return nearbyint(u); /* half to even (the default rounding mode) */
    case MP_FN_SOFTPLUS: return mp_cu_softplus(u);
    case MP_FN_SOFTSIGN: return u / (1 + fabs(u));
    case MP_FN_ELU: return u >= 0 ? u : f[0] * expm1(u);
    case MP_FN_SELU: return u > 0 ? f[1] * u : f[1] * f[0] * expm1(u);
    case MP_FN_CELU: return fmax(0.0, u) + fmin(0.0, f[0] * expm1(u / f[0]));
    case MP_FN_THRESHOLDED_RELU: return u > f[0] ? u : 0;
    case MP_FN_MISH: return u * tanh(mp_cu_softplus(u));
    case MP_FN_SWISH: return u * mp_cu_sigmoid(f[0] * u);
    case MP_FN_TAN: return tan(u);
    case MP_FN_SINH: return sinh(u);
    case MP_FN_COSH: return cosh(u);
    case MP_FN_ASIN: return asin(u);
    case MP_FN_ACOS: return acos(u);
    case MP_FN_ATAN: return atan(u);
    case MP_FN_ASINH: return asinh(u);
    case MP_FN_ACOSH: return acosh(u);
    case MP_FN_ATANH: return atanh(u);
    case MP_FN_NOT: return u == 0;
    case MP_FN_IS_NAN: return isnan(u);
    case MP_FN_IS_INF: return isinf(u) && ((u < 0 && f[0] != 0) || (u > 0 && f[1] != 0)); /* f: detect_negative, _positive */
    case MP_FN_SHRINK: return u < -f[1] ? u + f[0] : u > f[1] ? u - f[0] : 0; /* f: bias, lambd */
    case MP_FN_ADD: return u + v;
    case MP_FN_SUB: return u - v;
    case MP_FN_MUL: return u * v;
    case MP_FN_DIV: return u / v;
    case MP_FN_IDIV: return v == 0 ? 0 : trunc(u / v);
    case MP_FN_POW: return pow(u, v);
    case MP_FN_MAX: return u != u || u > v ? u : v; /* NaN propagates, as the CPU's (numpy's maximum) */
    case MP_FN_MIN: return u != u || u < v ? u : v;
    case MP_FN_EQUAL: return u == v;
    case MP_FN_LESS: return u < v;
    case MP_FN_GREATER: return u > v;
    case MP_FN_AND: return u != 0 && v != 0;
    case MP_FN_OR: return u != 0 || v != 0;
    case MP_FN_GREATER_EQ: return u >= v;
    case MP_FN_LESS_EQ: return u <= v;
    case MP_FN_XOR: return (u != 0) != (v != 0);
    /* f[0] 1: integers, where a zero divisor gives 0 (the CPU's); fmod's sign is the dividend's, Mod's the divisor's */
    case MP_FN_FMOD: return v == 0 && f[0] != 0 ? 0 : fmod(u, v);
    case MP_FN_MOD: {
        double r = v == 0 && f[0] != 0 ? 0 : fmod(u, v);
        return r != 0 && (r < 0) != (v < 0) ? r + v : r;
    }
    case MP_FN_SWIGLU: return u * mp_cu_sigmoid(f[0] * u) * v; /* as the CPU kernel: Swish(A) B */
    case MP_FN_RELU_GRAD: return v > 0 ? u : 0;
    case MP_FN_SIGMOID_GRAD: return u * v * (1 - v);
    case MP_FN_TANH_GRAD: return u * (1 - v * v);
    case MP_FN_GELU_GRAD:
        return u * (0.5 * (1 + erf(v * 0.7071067811865476)) + v * exp(-0.5 * v * v) * 0.3989422804014327);
    case MP_FN_GELU_TANH_GRAD: {
        double t = tanh(c * (v + 0.044715 * v * v * v));
        return u * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v));
    }
    case MP_FN_HARD_SIGMOID_GRAD: {
        double t = f[0] * v + f[1];
        return t > 0 && t < 1 ? f[0] * u : 0.0;
    }
    case MP_FN_HARD_SWISH_GRAD: return v < -3 ? 0 : v > 3 ? u : u * (2 * v + 3) / 6;
    case MP_FN_MASK_SCALE: return v != 0 ? f[0] * u : 0.0;
    case MP_FN_ERF_GRAD: return u * 1.1283791670955126 * exp(-v * v);
    case MP_FN_SQRT_GRAD: return u / (2 * v);
    case MP_FN_PICK_IF: return v != 0 ? u : 0.0;
    case MP_FN_PICK_IF_NOT: return v == 0 ? u : 0.0;
    case MP_FN_PRELU: return u < 0 ? v * u : u; /* v: the slope, broadcast */
    case MP_FN_WHERE: return u != 0 ? v : w;
    case MP_FN_POW_GRAD: return u * w * pow(v, w - 1);
    /* runtime/cpu_quant.c: u x, v its scale, w its zero point (0 when absent); f: the integer type's range, 1 when x
     * is float32 (divided in float, as the CPU divides it) */
    case MP_FN_QUANTIZE: {
        double q = f[2] != 0 ? (double)((float)u / (float)v) : u / v;
        q = nearbyint(q) + w; /* half to even */
        return q < f[0] ? f[0] : q > f[1] ? f[1] : q;
    }
    case MP_FN_DEQUANTIZE: return (u - w) * v; /* u x, v its scale, w its zero point: integers, exact in double */
    /* runtime/cpu_optim.c LossScale, LossScaleUpdate (GradScaler's rule; the log2 scale at least -39) */
    case MP_FN_LOSS_SCALE: return ldexp(1.0, (int)f[0] + (int)u);
    case MP_FN_LOSS_SCALE_LOG2: return v == 0 ? fmax(u - 1, -39.0) : w + 1 >= f[0] ? fmin(u + 1, 0.0) : u;
    case MP_FN_LOSS_SCALE_GOOD: return u == 0 || v + 1 >= f[0] ? 0 : v + 1;
    default: return NAN;
    }
}

/* p: fn, nin, rank r, dims[r], then per input: offset, strides[r]. x: inputs, then the output.
 * Where output element i reads each input (off[3]). */
MP_HD void mp_cu_map_offsets(const mp_cu_args *a, int64_t i, int64_t *off)
{
    int nin = (int)a->p[1], r = (int)a->p[2];
    const int64_t *dims = a->p + 3, *view = a->p + 3 + r;
    int64_t rem = i;
    for (int k = 0; k < nin; k++) off[k] = view[k * (r + 1)];
    for (int d = r - 1; d >= 0; d--) { /* one unflattening for every input */
        int64_t q = rem / dims[d], at = rem - q * dims[d];
        for (int k = 0; k < nin; k++) off[k] += at * view[k * (r + 1) + 1 + d];
        rem = q;
    }
}

MP_HD void k_map(const mp_cu_args *a, int64_t i)
{
    int nin = (int)a->p[1];
    int64_t off[3] = {0, 0, 0};
    mp_cu_map_offsets(a, i, off);
    double v[3] = {0, 0, 0};
    for (int k = 0; k < nin; k++) v[k] = mp_cu_ld(a->x[k], a->dt[k], off[k]);
    mp_cu_st(a->x[nin], a->dt[nin], i, mp_cu_fn((int)a->p[0], v[0], v[1], v[2], a->f));
}

/* x0 any float tensor (its bytes in any order), x1 the flag FILLed with 1 before: every thread that meets
 * inf or NaN stores the same 0. */
MP_HD void k_all_finite(const mp_cu_args *a, int64_t i)
{
    if (!isfinite(mp_cu_ld(a->x[0], a->dt[0], i))) mp_cu_st(a->x[1], a->dt[1], 0, 0);
}

/* ---- MP_CU_MAP_INT: MP_CU_MAP's layout, the operands as 64-bit integers (runtime/cpu_elementwise.c's
 * bitwise kernels), so exact at any width; the store wraps to the output's width ---------------------- */

MP_HD int64_t mp_cu_fn_int(int fn, int64_t u, int64_t v, int bits)
{
    switch (fn) {
    case MP_FN_BIT_AND: return (int64_t)((uint64_t)u & (uint64_t)v);
    case MP_FN_BIT_OR: return (int64_t)((uint64_t)u | (uint64_t)v);
    case MP_FN_BIT_XOR: return (int64_t)((uint64_t)u ^ (uint64_t)v);
    case MP_FN_BIT_NOT: return (int64_t)~(uint64_t)u;
    /* BitShift on unsigned types (u, v >= 0): a shift by the width or more gives 0 */
    case MP_FN_BIT_SHL: return v >= bits ? 0 : (int64_t)((uint64_t)u << v);
    case MP_FN_BIT_SHR: return v >= bits ? 0 : (int64_t)((uint64_t)u >> v);
    default: return 0;
    }
}

MP_HD void k_map_int(const mp_cu_args *a, int64_t i)
{
    int nin = (int)a->p[1];
    int64_t off[3] = {0, 0, 0}, v[3] = {0, 0, 0};
    mp_cu_map_offsets(a, i, off);
    for (int k = 0; k < nin; k++) v[k] = mp_cu_ldi(a->x[k], a->dt[k], off[k]);
    mp_cu_sti(a->x[nin], a->dt[nin], i, mp_cu_fn_int((int)a->p[0], v[0], v[1], 8 * mp_cu_esize(a->dt[nin])));
}

/* ---- MP_CU_RANGE (runtime/cpu_tensor.c mp_cpu_Range): start x0, delta x1 (one element each) -> x2.
 * Integers wrap in 64 bits; floats are start + i delta in double --------------------------------------- */

MP_HD void k_range(const mp_cu_args *a, int64_t i)
{
    if (a->dt[2] == MP_CU_F32 || a->dt[2] == MP_CU_F64) {
        mp_cu_st(a->x[2], a->dt[2], i, mp_cu_ld(a->x[0], a->dt[0], 0) + (double)i * mp_cu_ld(a->x[1], a->dt[1], 0));
        return;
    }
    uint64_t start = (uint64_t)mp_cu_ldi(a->x[0], a->dt[0], 0), delta = (uint64_t)mp_cu_ldi(a->x[1], a->dt[1], 0);
    mp_cu_sti(a->x[2], a->dt[2], i, (int64_t)(start + (uint64_t)i * delta));
}

/* ---- MP_CU_REDUCE: out[j] = f0 * sum_k in[A(j) + B(k)] / f1, or another reduction -------- */

/* The modes (runtime/cpu_reduce.c run_reduce's float path; the mean is the sum over f1; RED_LP
 * GlobalLpPool's (sum |x|^p)^(1/p), p in f2, as runtime/cpu_conv.c run_global) and how
 * their terms combine, in a thread's loop and in the GPU's tree: a sum, fmax (softmax's max,
 * LogSumExp's first pass), a product, and the NaN-propagating max and min of ReduceMax / Min. */
enum { RED_SUM = 0, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_SUMSQ, RED_LOGSUM, RED_LOGSUMEXP, RED_LP };
enum { RC_SUM = 0, RC_FMAX, RC_PROD, RC_MAX, RC_MIN };

MP_HD double mp_cu_comb(int kind, double acc, double e)
{
    switch (kind) {
    case RC_FMAX: return fmax(acc, e);
    case RC_PROD: return acc * e;
    case RC_MAX: return e != e || e > acc ? e : acc;
    case RC_MIN: return e != e || e < acc ? e : acc;
    default: return acc + e;
    }
}

MP_HD double mp_cu_comb_init(int kind)
{
    return kind == RC_PROD ? 1 : kind == RC_FMAX || kind == RC_MAX ? -INFINITY : kind == RC_MIN ? INFINITY : 0;
}

/* p: ra, dims[ra], strides[ra], offset, rb, dims[rb], strides[rb], count, mode. */
MP_HD const int64_t *mp_cu_reduce_b(const mp_cu_args *a) { return a->p + 2 + 2 * a->p[0]; }
MP_HD int64_t mp_cu_reduce_count(const mp_cu_args *a) { return mp_cu_reduce_b(a)[1 + 2 * mp_cu_reduce_b(a)[0]]; }
MP_HD int mp_cu_reduce_mode(const mp_cu_args *a) { return (int)mp_cu_reduce_b(a)[2 + 2 * mp_cu_reduce_b(a)[0]]; }

MP_HD int mp_cu_reduce_kind(const mp_cu_args *a)
{
    int m = mp_cu_reduce_mode(a);
    return m == RED_MAX ? RC_MAX : m == RED_MIN ? RC_MIN : m == RED_PROD ? RC_PROD : RC_SUM;
}

/* Output j's terms k = k0, k0 + step, ... combined (the GPU splits long sums over a block): the
 * mode's terms (pass 0; m: LogSumExp's max), or their fmax (pass 1: LogSumExp's first). */
MP_HD double mp_cu_reduce_part(const mp_cu_args *a, int64_t j, int pass, double m, int64_t k0, int64_t step)
{
    int ra = (int)a->p[0], mode = mp_cu_reduce_mode(a), kind = pass ? RC_FMAX : mp_cu_reduce_kind(a);
    const int64_t *b = mp_cu_reduce_b(a);
    int rb = (int)b[0];
    int64_t base = a->p[1 + 2 * ra] + mp_cu_at(ra, a->p + 1, a->p + 1 + ra, j), cnt = b[1 + 2 * rb];
    double s = mp_cu_comb_init(kind);
    for (int64_t k = k0; k < cnt; k += step) {
        double e = mp_cu_ld(a->x[0], a->dt[0], base + mp_cu_at(rb, b + 1, b + 1 + rb, k));
        if (!pass) e = mode == RED_L1 ? fabs(e) : mode == RED_L2 || mode == RED_SUMSQ ? e * e : mode == RED_LOGSUMEXP ? exp(e - m)
                     : mode == RED_LP ? pow(fabs(e), a->f[2]) : e;
        s = mp_cu_comb(kind, s, e);
    }
    return s;
}

/* LogSumExp's shift: the max, 0 when infinite (as the CPU). */
MP_HD double mp_cu_reduce_shift(double m) { return isinf(m) ? 0 : m; }

MP_HD void mp_cu_reduce_store(const mp_cu_args *a, int64_t j, double m, double s)
{
    int mode = mp_cu_reduce_mode(a);
    double v = mode == RED_L2 ? sqrt(s) : mode == RED_LOGSUM ? log(s) : mode == RED_LOGSUMEXP ? m + log(s)
             : mode == RED_LP ? pow(s, 1 / a->f[2]) : s;
    mp_cu_st(a->x[1], a->dt[1], j, a->f[0] * v / a->f[1]);
}

MP_HD void k_reduce(const mp_cu_args *a, int64_t j)
{
    double m = mp_cu_reduce_mode(a) == RED_LOGSUMEXP ? mp_cu_reduce_shift(mp_cu_reduce_part(a, j, 1, 0, 0, 1)) : 0;
    mp_cu_reduce_store(a, j, m, mp_cu_reduce_part(a, j, 0, m, 0, 1));
}

/* ---- MP_CU_GEMM on the host (the GPU uses cuBLAS) ------------------------------- */

/* Element i of the batch's C: C[b] (or the one C when SC is 0: every batch adds into it, its sum rounded
 * to C's type after each, as cuBLAS's GEMM per batch with beta 1 and the CPU's matmul_grad round it). */
MP_HD void k_gemm_elem(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t M = p[GM_M], N = p[GM_N], K = p[GM_K], m = (i / N) % M, nn = i % N;
    int64_t b0 = p[GM_SC] ? i / (M * N) : 0, b1 = p[GM_SC] ? b0 + 1 : p[GM_BATCH];
    int64_t at = b0 * p[GM_SC] + m * N + nn;
    double c = p[GM_BETA_ONE] ? mp_cu_ld(a->x[2], a->dt[2], at) : 0;
    for (int64_t b = b0; b < b1; b++) {
        int64_t ab = b * p[GM_SA], bb = b * p[GM_SB];
        double s = 0; /* float32, or 16-bit operands widened (the CPU's widen-run-round) */
        for (int64_t k = 0; k < K; k++) {
            double x = mp_cu_ld(a->x[0], a->dt[0], ab + (p[GM_TA] ? k * p[GM_LDA] + m : m * p[GM_LDA] + k));
            double y = mp_cu_ld(a->x[1], a->dt[1], bb + (p[GM_TB] ? nn * p[GM_LDB] + k : k * p[GM_LDB] + nn));
            s += x * y;
        }
        c = a->f[0] * s + c;
        if (b + 1 < b1) c = mp_cu_round_to(a->dt[2], c);
    }
    mp_cu_st(a->x[2], a->dt[2], at, c);
}

/* ---- softmax family: a row per thread, or per block of threads -------------------------- */

/* Rows of at least MP_CU_LONG_ROW elements and sums of at least MP_CU_LONG_SUM terms run a
 * block of MP_CU_BLOCK threads each on the GPU: thread t takes elements t, t + MP_CU_BLOCK, ...
 * of the row or sum (the _part functions), a tree combines them. A single thread is t 0 of 1. */
#define MP_CU_BLOCK 256
#define MP_CU_LONG_ROW 64
#define MP_CU_LONG_SUM 1024

/* p: outer, d, inner, kind (0 softmax, 1 log-softmax: x0 -> x1; 2 softmax's gradient, dY (Y - dot(dY, Y)),
 * 3 log-softmax's, dY - exp(Y) sum(dY): dY x0, Y x1 -> dX x2, which may be dY's bytes: every dY of a row
 * is read before the row is written) */
enum { SM_MAX = 0, SM_SUM_EXP, SM_DOT, SM_SUM };
enum { SM_SOFTMAX = 0, SM_LOG, SM_GRAD, SM_LOG_GRAD };

/* The row sum the gradient kinds take: dot(dY, Y), or sum(dY). */
MP_HD int mp_cu_sm_grad_sum(const mp_cu_args *a) { return a->p[3] == SM_GRAD ? SM_DOT : SM_SUM; }

MP_HD int64_t mp_cu_sm_base(const mp_cu_args *a, int64_t r) { return (r / a->p[2]) * a->p[1] * a->p[2] + r % a->p[2]; }

/* Row r's partial max, sum of exp(x - m), dot(dY, Y) or sum(dY) over j = t, t + step, ... */
MP_HD double mp_cu_softmax_part(const mp_cu_args *a, int64_t r, int what, double m, int64_t t, int64_t step)
{
    int64_t d = a->p[1], inner = a->p[2], base = mp_cu_sm_base(a, r);
    double acc = what == SM_MAX ? -INFINITY : 0;
    for (int64_t j = t; j < d; j += step) {
        double v = mp_cu_ld(a->x[0], a->dt[0], base + j * inner);
        if (what == SM_MAX) acc = v > acc ? v : acc;
        else if (what == SM_SUM_EXP) acc += exp(v - m);
        else if (what == SM_SUM) acc += v; /* the CPU's v * 1 */
        else acc += v * mp_cu_ld(a->x[1], a->dt[1], base + j * inner);
    }
    return acc;
}

/* Writes row r's elements j = t, t + step, ...: m and s the max and sum (or s the gradient's row sum). */
MP_HD void mp_cu_softmax_write(const mp_cu_args *a, int64_t r, double m, double s, int64_t t, int64_t step)
{
    int64_t d = a->p[1], inner = a->p[2], base = mp_cu_sm_base(a, r);
    for (int64_t j = t; j < d; j += step) {
        int64_t i = base + j * inner;
        double x = mp_cu_ld(a->x[0], a->dt[0], i);
        if (a->p[3] == SM_GRAD) mp_cu_st(a->x[2], a->dt[2], i, mp_cu_ld(a->x[1], a->dt[1], i) * (x - s));
        else if (a->p[3] == SM_LOG_GRAD) mp_cu_st(a->x[2], a->dt[2], i, x - exp(mp_cu_ld(a->x[1], a->dt[1], i)) * s);
        else mp_cu_st(a->x[1], a->dt[1], i, a->p[3] == 1 ? x - m - log(s) : exp(x - m) / s);
    }
}

MP_HD void k_softmax(const mp_cu_args *a, int64_t r)
{
    if (a->p[3] >= SM_GRAD) {
        mp_cu_softmax_write(a, r, 0, mp_cu_softmax_part(a, r, mp_cu_sm_grad_sum(a), 0, 0, 1), 0, 1);
        return;
    }
    double m = mp_cu_softmax_part(a, r, SM_MAX, 0, 0, 1);
    mp_cu_softmax_write(a, r, m, mp_cu_softmax_part(a, r, SM_SUM_EXP, m, 0, 1), 0, 1);
}

/* ---- SoftmaxCrossEntropy ------------------------------------------------------------ */

/* p: N, C, D (the scores or log_prob are [N, C, D..]), mean, ignore_index, the phase (SCE_GRAD), then
 * SCE_NONE (reduction none: a loss per item) and SCE_NLL (NegativeLogLikelihoodLoss / Grad: the input is
 * the log-probability itself, its gradient -w dLoss / norm at the target). Class weights, where given,
 * weigh each item by w[label] (runtime/cpu_norm.c run_nll, cpu_grad.c xent_grad). */
enum { SCE_N = 0, SCE_C, SCE_D, SCE_MEAN, SCE_HAS_IGNORE, SCE_IGNORE, SCE_PHASE, SCE_NONE, SCE_NLL };

/* SoftmaxCrossEntropyLoss whose log_prob is 16-bit (x4 the scores): the CPU's fp32 kernel sums the loss
 * over its fp32 log_prob, which it rounds to 16 bits only afterwards, so entry (n, c, d) is recomputed
 * here as that kernel and the single-thread MP_CU_SOFTMAX compute it, rounded to fp32. SCE_LOSS then runs
 * before the SOFTMAX that writes log_prob, which may be over the scores (passes/train.c in_place_ops). */
MP_HD double mp_cu_sce_log_prob(const mp_cu_args *a, int64_t n, int64_t c, int64_t d)
{
    int64_t C = a->p[SCE_C], D = a->p[SCE_D];
    if (!a->x[4]) return mp_cu_ld(a->x[0], a->dt[0], (n * C + c) * D + d);
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < C; k++) {
        double v = mp_cu_ld(a->x[4], a->dt[4], (n * C + k) * D + d);
        m = v > m ? v : m;
    }
    for (int64_t k = 0; k < C; k++) s += exp(mp_cu_ld(a->x[4], a->dt[4], (n * C + k) * D + d) - m);
    return (double)(float)(mp_cu_ld(a->x[4], a->dt[4], (n * C + c) * D + d) - m - log(s));
}

MP_HD int mp_cu_sce_skip(const int64_t *p, int64_t l) { return p[SCE_HAS_IGNORE] && l == p[SCE_IGNORE]; }

/* x0 log_prob, x1 labels (, x3 weights) -> x2 loss: one thread sums over the items in the CPU's order
 * (item i: -log_prob[label] w[label], 0 when ignored), the mean over the weight sum; reduction none:
 * a thread per item. A label out of range (the CPU fails) gives nothing. */
MP_HD void k_sce_loss(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t C = p[SCE_C], D = p[SCE_D];
    double total = 0, wsum = 0;
    for (int64_t it = p[SCE_NONE] ? i : 0; it < (p[SCE_NONE] ? i + 1 : p[SCE_N] * D); it++) {
        int64_t l = mp_cu_ldi(a->x[1], a->dt[1], it), n = it / D, d = it % D;
        if (mp_cu_sce_skip(p, l) || l < 0 || l >= C) continue;
        double wt = a->x[3] ? mp_cu_ld(a->x[3], a->dt[3], l) : 1;
        total += -mp_cu_sce_log_prob(a, n, l, d) * wt;
        wsum += wt;
    }
    if (p[SCE_NONE]) mp_cu_st(a->x[2], a->dt[2], i, total);
    else mp_cu_st(a->x[2], a->dt[2], 0, p[SCE_MEAN] ? total / wsum : total);
}

/* phase 0 (one thread): the normalizer (the weight sum for mean, else 1) into x4 (workspace, double);
 * phase 1: x0 dLoss, x1 log_prob (SCE; NLL: read for nothing), x2 labels (, x5 weights) -> x3, an
 * element per thread */
MP_HD void k_sce_grad(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t C = p[SCE_C], D = p[SCE_D];
    double *norm = (double *)a->x[4];
    if (p[SCE_PHASE] == 0) {
        double s = 0;
        for (int64_t it = 0; it < p[SCE_N] * D; it++) {
            int64_t l = mp_cu_ldi(a->x[2], a->dt[2], it);
            if (mp_cu_sce_skip(p, l)) continue;
            s += a->x[5] ? (l < 0 || l >= C ? 0 : mp_cu_ld(a->x[5], a->dt[5], l)) : 1.0;
        }
        *norm = !p[SCE_MEAN] || s == 0 ? 1 : s;
        return;
    }
    int64_t d = i % D, c = (i / D) % C, nn = i / (C * D), item = nn * D + d, l = mp_cu_ldi(a->x[2], a->dt[2], item);
    double w = a->x[5] && l >= 0 && l < C ? mp_cu_ld(a->x[5], a->dt[5], l) : 1.0;
    double s = mp_cu_sce_skip(p, l) ? 0 : w * mp_cu_ld(a->x[0], a->dt[0], p[SCE_NONE] ? item : 0) / *norm;
    double e = p[SCE_NLL] ? 0 : exp(mp_cu_ld(a->x[1], a->dt[1], i));
    mp_cu_st(a->x[3], a->dt[3], i, s * (e - (c == l ? 1.0 : 0.0)));
}

/* ---- LayerNormalization over rows of p[1] elements (Group/InstanceNormalization too) ------------- */

/* p: rows, n, mode, then for GroupNormalization (runtime/cpu_norm.c, cpu_grad.c group_norm_grad: a row
 * per (n, group) of n = C / G x spatial elements) the groups G, and the scale (bias) entry of row r's
 * element j, (r % G) * LN_SA + j / LN_SD (per channel: C / G and the spatial size; per group: 1 and
 * n); G 0 (LayerNormalization): entry j. LN_INST: InstanceNormalization's forward, whose CPU kernel
 * scales by scale / sqrt(var + eps), not by 1 / sqrt(var + eps) then scale.
 * mode 0: X x0, scale x1, bias x2 -> Y x3 (mean x4, inv std x5 if asked);
 * mode 1: dY x0, X x1, scale x2 -> dX x3, and (mean, rstd) per row into x4 (workspace). f0 epsilon.
 * LN_RMS: RMSNormalization and its gradient (no mean: the mean's sums are 0, and no mean term m1). */
enum { LN_SUM_X = 0, LN_SUM_DEV2, LN_SUM_DXH, LN_SUM_DXH_XH };
enum { LN_ROWS_N = 0, LN_N, LN_MODE, LN_G, LN_SA, LN_SD, LN_INST, LN_RMS };

/* Row r's element j's scale (and bias) entry. */
MP_HD int64_t mp_cu_ln_si(const mp_cu_args *a, int64_t r, int64_t j)
{
    return a->p[LN_G] ? (r % a->p[LN_G]) * a->p[LN_SA] + j / a->p[LN_SD] : j;
}

/* Row r's partial sums over j = t, t + step, ... (float32 or 16-bit operands, widened: the CPU's sums in double) */
MP_HD double mp_cu_ln_part(const mp_cu_args *a, int64_t r, int what, double mu, double rstd, int64_t t, int64_t step)
{
    int64_t n = a->p[1], b = r * n;
    int xk = a->p[2] ? 1 : 0;
    double s = 0;
    if (a->p[LN_RMS] && (what == LN_SUM_X || what == LN_SUM_DXH)) return 0; /* no mean, no mean term */
    for (int64_t j = t; j < n; j += step) {
        double x = mp_cu_ld(a->x[xk], a->dt[xk], b + j), d = x - mu;
        if (what == LN_SUM_X) s += x;
        else if (what == LN_SUM_DEV2) s += d * d;
        else {
            double dxh = mp_cu_ld(a->x[0], a->dt[0], b + j) * mp_cu_ld(a->x[2], a->dt[2], mp_cu_ln_si(a, r, j));
            s += what == LN_SUM_DXH ? dxh : dxh * (d * rstd);
        }
    }
    return s;
}

/* Writes row r's elements j = t, t + step, ... (and its statistics, from t 0). rstd: 1 / sqrt(var + eps),
 * or for LN_INST sqrt(var + eps) (mp_cu_ln_rstd). Each store rounds once (to fp32, then a 16-bit type). */
MP_HD void mp_cu_ln_write(const mp_cu_args *a, int64_t r, double mu, double rstd, double m1, double m2, int64_t t, int64_t step)
{
    int64_t n = a->p[1], b = r * n;
    int xk = a->p[2] ? 1 : 0;
    if (a->p[2] == 0) {
        for (int64_t j = t; j < n; j += step) {
            int64_t e = mp_cu_ln_si(a, r, j);
            double x = mp_cu_ld(a->x[0], a->dt[0], b + j), sc = mp_cu_ld(a->x[1], a->dt[1], e);
            double bi = a->x[2] ? mp_cu_ld(a->x[2], a->dt[2], e) : 0;
            mp_cu_st(a->x[3], a->dt[3], b + j, a->p[LN_INST] ? (x - mu) * (sc / rstd) + bi : (x - mu) * rstd * sc + bi);
        }
        if (t == 0 && a->x[4]) mp_cu_st(a->x[4], a->dt[4], r, mu);
        if (t == 0 && a->x[5]) mp_cu_st(a->x[5], a->dt[5], r, rstd);
        return;
    }
    for (int64_t j = t; a->x[3] && j < n; j += step) {
        double xh = (mp_cu_ld(a->x[xk], a->dt[xk], b + j) - mu) * rstd;
        double dxh = mp_cu_ld(a->x[0], a->dt[0], b + j) * mp_cu_ld(a->x[2], a->dt[2], mp_cu_ln_si(a, r, j));
        mp_cu_st(a->x[3], a->dt[3], b + j, rstd * (dxh - m1 - xh * m2));
    }
    if (t == 0) ((double *)a->x[4])[2 * r] = mu, ((double *)a->x[4])[2 * r + 1] = rstd;
}

MP_HD double mp_cu_ln_rstd(const mp_cu_args *a, double dev2)
{
    double s = sqrt(dev2 / (double)a->p[1] + a->f[0]);
    return a->p[LN_INST] ? s : 1 / s;
}

MP_HD void k_ln_rows(const mp_cu_args *a, int64_t r)
{
    double n = (double)a->p[1], mu = mp_cu_ln_part(a, r, LN_SUM_X, 0, 0, 0, 1) / n;
    double rstd = mp_cu_ln_rstd(a, mp_cu_ln_part(a, r, LN_SUM_DEV2, mu, 0, 0, 1)), m1 = 0, m2 = 0;
    if (a->p[2]) {
        m1 = mp_cu_ln_part(a, r, LN_SUM_DXH, mu, rstd, 0, 1) / n;
        m2 = mp_cu_ln_part(a, r, LN_SUM_DXH_XH, mu, rstd, 0, 1) / n;
    }
    mp_cu_ln_write(a, r, mu, rstd, m1, m2, 0, 1);
}

/* p: rows, n, then for GroupNormalization the groups G, the entries per group E and the elements per
 * entry cnt (entry j: row elements (j % E) * cnt, ... of the rows n G + j / E); G 0: LayerNormalization
 * (G 1, E n, cnt 1). dY x0, X x1, (mean, rstd) x2 -> dScale x3, dBias x4, a thread per entry j, summing
 * over the rows, then the elements, as the CPU's accumulation. */
MP_HD void k_ln_cols(const mp_cu_args *a, int64_t j)
{
    int64_t rows = a->p[0], n = a->p[1], G = a->p[2] ? a->p[2] : 1, E = a->p[2] ? a->p[3] : n, cnt = a->p[2] ? a->p[4] : 1;
    int64_t j0 = (j % E) * cnt;
    const double *st = (const double *)a->x[2];
    double ds = 0, db = 0;
    for (int64_t r = j / E; r < rows; r += G)
        for (int64_t q = r * n + j0; q < r * n + j0 + cnt; q++) {
            double g = mp_cu_ld(a->x[0], a->dt[0], q);
            ds += g * ((mp_cu_ld(a->x[1], a->dt[1], q) - st[2 * r]) * st[2 * r + 1]);
            db += g;
        }
    if (a->x[3]) mp_cu_st(a->x[3], a->dt[3], j, ds);
    if (a->x[4]) mp_cu_st(a->x[4], a->dt[4], j, db);
}

/* ---- BatchNormalization, per channel then per element ------------------------------- */

enum { BN_N = 0, BN_C, BN_S, BN_MODE };
enum { BN_FWD_TRAIN = 0, BN_FWD_INFER, BN_GRAD_TRAIN, BN_GRAD_INFER };

/* mode FWD_*: X x0, mean x1, var x2 -> running mean x3, var x4, saved mean x5, var x6;
 *   workspace x7 gets (mean, var) per channel. f0 epsilon, f1 momentum.
 * mode GRAD_*: dY x0, X x1, running mean x2, var x3 -> dScale x4, dBias x5;
 *   workspace x7 gets (mean, rstd, sum dY, sum dY xh) per channel. */
enum { BN_SUM_X = 0, BN_SUM_DEV2, BN_SUM_DY, BN_SUM_DY_XH };

MP_HD int mp_cu_bn_train(const mp_cu_args *a) { return a->p[BN_MODE] == BN_FWD_TRAIN || a->p[BN_MODE] == BN_GRAD_TRAIN; }

/* One of channel c's sums over the elements e = e0, e0 + step, ... of its N x S (in the CPU's order when step is 1). */
MP_HD double mp_cu_bn_part(const mp_cu_args *a, int64_t c, int what, double mu, double rstd, int64_t e0, int64_t step)
{
    int64_t C = a->p[BN_C], S = a->p[BN_S], cnt = a->p[BN_N] * S;
    int xk = a->p[BN_MODE] >= BN_GRAD_TRAIN ? 1 : 0;
    double s = 0;
    for (int64_t e = e0; e < cnt; e += step) {
        int64_t i = (e / S * C + c) * S + e % S;
        double xi = mp_cu_ld(a->x[xk], a->dt[xk], i), d = xi - mu;
        s += what == BN_SUM_X ? xi : what == BN_SUM_DEV2 ? d * d
           : what == BN_SUM_DY ? mp_cu_ld(a->x[0], a->dt[0], i) : mp_cu_ld(a->x[0], a->dt[0], i) * d * rstd;
    }
    return s;
}

/* The statistics channel c normalizes with: the batch's (train; sums given) or the running ones. */
MP_HD void mp_cu_bn_stats_of(const mp_cu_args *a, int64_t c, double sum_x, double sum_dev2, double *mu, double *var)
{
    double cnt = (double)(a->p[BN_N] * a->p[BN_S]);
    int grad = a->p[BN_MODE] >= BN_GRAD_TRAIN;
    if (mp_cu_bn_train(a)) {
        *mu = cnt ? sum_x / cnt : 0, *var = cnt ? sum_dev2 / cnt : 0;
    } else {
        *mu = mp_cu_ld(a->x[grad ? 2 : 1], a->dt[grad ? 2 : 1], c), *var = mp_cu_ld(a->x[grad ? 3 : 2], a->dt[grad ? 3 : 2], c);
    }
}

MP_HD void mp_cu_bn_fwd_finish(const mp_cu_args *a, int64_t c, double mu, double var)
{
    double rm = mp_cu_ld(a->x[1], a->dt[1], c), rv = mp_cu_ld(a->x[2], a->dt[2], c), mom = a->f[1];
    double *ws = (double *)a->x[7]; /* the statistics Y is normalized with stay doubles, as the CPU's */
    if (mp_cu_bn_train(a) && a->x[3]) mp_cu_st(a->x[3], a->dt[3], c, rm * mom + mu * (1 - mom));
    if (mp_cu_bn_train(a) && a->x[4]) mp_cu_st(a->x[4], a->dt[4], c, rv * mom + var * (1 - mom));
    if (a->x[5]) mp_cu_st(a->x[5], a->dt[5], c, mu);
    if (a->x[6]) mp_cu_st(a->x[6], a->dt[6], c, var);
    ws[2 * c] = mu, ws[2 * c + 1] = var;
}

MP_HD void mp_cu_bn_grad_finish(const mp_cu_args *a, int64_t c, double mu, double rstd, double sb, double ss)
{
    double *ws = (double *)a->x[7];
    if (a->x[4]) mp_cu_st(a->x[4], a->dt[4], c, ss);
    if (a->x[5]) mp_cu_st(a->x[5], a->dt[5], c, sb);
    ws[4 * c] = mu, ws[4 * c + 1] = rstd, ws[4 * c + 2] = sb, ws[4 * c + 3] = ss;
}

/* A thread per channel (the GPU runs a block per channel instead: memplan_cuda.cu). */
MP_HD void k_bn_stats(const mp_cu_args *a, int64_t c)
{
    double mu = 0, var = 0, sx = 0, sd = 0;
    if (mp_cu_bn_train(a)) {
        sx = mp_cu_bn_part(a, c, BN_SUM_X, 0, 0, 0, 1);
        mp_cu_bn_stats_of(a, c, sx, 0, &mu, &var);
        sd = mp_cu_bn_part(a, c, BN_SUM_DEV2, mu, 0, 0, 1);
    }
    mp_cu_bn_stats_of(a, c, sx, sd, &mu, &var);
    if (a->p[BN_MODE] <= BN_FWD_INFER) {
        mp_cu_bn_fwd_finish(a, c, mu, var);
        return;
    }
    double rstd = 1 / sqrt(var + a->f[0]);
    mp_cu_bn_grad_finish(a, c, mu, rstd, mp_cu_bn_part(a, c, BN_SUM_DY, mu, rstd, 0, 1),
                         mp_cu_bn_part(a, c, BN_SUM_DY_XH, mu, rstd, 0, 1));
}

/* mode FWD_*: X x0, scale x1, bias x2, workspace x3 -> Y x4;
 * mode GRAD_*: dY x0, X x1, scale x2, workspace x3 -> dX x4. */
MP_HD void k_bn_apply(const mp_cu_args *a, int64_t i)
{
    int64_t C = a->p[BN_C], S = a->p[BN_S], mode = a->p[BN_MODE], c = (i / S) % C;
    const double *ws = (const double *)a->x[3];
    int sk = 2 - (mode <= BN_FWD_INFER);
    double sc = mp_cu_ld(a->x[sk], a->dt[sk], c);
    if (mode <= BN_FWD_INFER) {
        double k = sc / sqrt(ws[2 * c + 1] + a->f[0]);
        mp_cu_st(a->x[4], a->dt[4], i, (mp_cu_ld(a->x[0], a->dt[0], i) - ws[2 * c]) * k + mp_cu_ld(a->x[2], a->dt[2], c));
        return;
    }
    double cnt = (double)(a->p[BN_N] * S), mu = ws[4 * c], rstd = ws[4 * c + 1], g = mp_cu_ld(a->x[0], a->dt[0], i);
    double xh = (mp_cu_ld(a->x[1], a->dt[1], i) - mu) * rstd;
    double v = mode == BN_GRAD_TRAIN ? sc * rstd * (g - ws[4 * c + 2] / cnt - xh * ws[4 * c + 3] / cnt) : sc * rstd * g;
    mp_cu_st(a->x[4], a->dt[4], i, v);
}

/* ---- sliding windows (Conv, pools): N, C, spatial dims up to 3 -------------------------- */

enum {
    W_N = 0, W_C, W_M, W_CG, W_MG, W_NSP, W_IN = 6, W_OUT = 9, W_K = 12, W_S = 15, W_D = 18, W_PB = 21, W_PE = 24,
    W_INN = 27, W_OUTN, W_KN, W_KIND, W_INCL_PAD, W_COL_MAJOR, W_ZW_STEP, W_COUNT
};
#define MP_CU_MAXSP 3

/* Unflattens flat index i over the first nsp extents of ext (row-major). */
MP_HD void mp_cu_unflat(int nsp, const int64_t *ext, int64_t i, int64_t *idx)
{
    for (int s = nsp - 1; s >= 0; s--) {
        idx[s] = i % ext[s];
        i /= ext[s];
    }
}

/* The input spatial offset tap kp of output o reads, or -1 in the padding. */
MP_HD int64_t mp_cu_tap(const int64_t *p, const int64_t *oidx, int64_t kp)
{
    int nsp = (int)p[W_NSP];
    int64_t kidx[MP_CU_MAXSP], at = 0;
    mp_cu_unflat(nsp, p + W_K, kp, kidx);
    for (int s = 0; s < nsp; s++) {
        int64_t pos = oidx[s] * p[W_S + s] - p[W_PB + s] + kidx[s] * p[W_D + s];
        if (pos < 0 || pos >= p[W_IN + s]) return -1;
        at = at * p[W_IN + s] + pos;
    }
    return at;
}

/* The output position whose tap kp reads input position iidx, or -1. */
MP_HD int64_t mp_cu_tap_out(const int64_t *p, const int64_t *iidx, int64_t kp)
{
    int nsp = (int)p[W_NSP];
    int64_t kidx[MP_CU_MAXSP], o = 0;
    mp_cu_unflat(nsp, p + W_K, kp, kidx);
    for (int s = 0; s < nsp; s++) {
        int64_t num = iidx[s] + p[W_PB + s] - kidx[s] * p[W_D + s];
        if (num < 0 || num % p[W_S + s]) return -1;
        num /= p[W_S + s];
        if (num >= p[W_OUT + s]) return -1;
        o = o * p[W_OUT + s] + num;
    }
    return o;
}

/* X x0 [N, C, in..], W x1 [M, C/groups, k..], B x2 (or NULL) -> Y x3 [N, M, out..]. The sum is rounded to
 * fp32 before the bias is added in fp32, as runtime/cpu_conv.c (its GEMM's fp32 output, then add_bias).
 * ConvInteger: x4 and x5 are X's zero point (per tensor) and W's (per tensor, or per output channel:
 * W_ZW_STEP 1), subtracted as runtime/cpu_quant.c shifts the operands (a tap in the padding adds 0, the
 * shifted zero point), and the integer Y takes the exact sum. */
MP_HD void k_conv(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t on = p[W_OUTN], o = i % on, m = (i / on) % p[W_M], n = i / (on * p[W_M]), oidx[MP_CU_MAXSP];
    mp_cu_unflat((int)p[W_NSP], p + W_OUT, o, oidx);
    int64_t c0 = (m / p[W_MG]) * p[W_CG];
    double zx = a->x[4] ? mp_cu_ld(a->x[4], a->dt[4], 0) : 0, zw = a->x[5] ? mp_cu_ld(a->x[5], a->dt[5], m * p[W_ZW_STEP]) : 0;
    double s = 0;
    for (int64_t kp = 0; kp < p[W_KN]; kp++) {
        int64_t at = mp_cu_tap(p, oidx, kp);
        if (at < 0) continue;
        for (int64_t cg = 0; cg < p[W_CG]; cg++)
            s += (mp_cu_ld(a->x[0], a->dt[0], (n * p[W_C] + c0 + cg) * p[W_INN] + at) - zx) *
                 (mp_cu_ld(a->x[1], a->dt[1], (m * p[W_CG] + cg) * p[W_KN] + kp) - zw);
    }
    if (a->dt[3] == MP_CU_I32) {
        mp_cu_st(a->x[3], a->dt[3], i, s);
        return;
    }
    float y = (float)s;
    if (a->x[2]) y += (float)mp_cu_ld(a->x[2], a->dt[2], m);
    mp_cu_st(a->x[3], a->dt[3], i, y);
}

/* dY x0, W x1 -> dX x2, a thread per element of X: its terms in runtime/cpu_grad.c ConvGrad's order
 * (the group's output channels, then the taps), summed in double. */
MP_HD void k_conv_dx(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t inn = p[W_INN], ip = i % inn, c = (i / inn) % p[W_C], n = i / (inn * p[W_C]), iidx[MP_CU_MAXSP];
    mp_cu_unflat((int)p[W_NSP], p + W_IN, ip, iidx);
    int64_t g = c / p[W_CG], cg = c % p[W_CG];
    double s = 0;
    for (int64_t m = g * p[W_MG]; m < (g + 1) * p[W_MG]; m++)
        for (int64_t kp = 0; kp < p[W_KN]; kp++) {
            int64_t o = mp_cu_tap_out(p, iidx, kp);
            if (o < 0) continue;
            s += mp_cu_ld(a->x[0], a->dt[0], (n * p[W_M] + m) * p[W_OUTN] + o) *
                 mp_cu_ld(a->x[1], a->dt[1], (m * p[W_CG] + cg) * p[W_KN] + kp);
        }
    mp_cu_st(a->x[2], a->dt[2], i, s);
}

/* dY x0, X x1 -> dW x2, a thread per element of W. The output positions are
 * walked by an odometer and the tap's offsets kept per dim, so the long loop
 * (every output of every image) has no division. Each image's sum is added to
 * the total, as runtime/cpu_grad.c ConvGrad adds them. */
MP_HD void k_conv_dw(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int nsp = (int)p[W_NSP];
    int64_t kp = i % p[W_KN], cg = (i / p[W_KN]) % p[W_CG], m = i / (p[W_KN] * p[W_CG]), kidx[MP_CU_MAXSP];
    int64_t c = (m / p[W_MG]) * p[W_CG] + cg, base[MP_CU_MAXSP];
    mp_cu_unflat(nsp, p + W_K, kp, kidx);
    for (int d = 0; d < nsp; d++) base[d] = kidx[d] * p[W_D + d] - p[W_PB + d]; /* input position of output 0 */
    double s = 0;
    for (int64_t n = 0; n < p[W_N]; n++) {
        int64_t dyn = (n * p[W_M] + m) * p[W_OUTN], xn = (n * p[W_C] + c) * p[W_INN], oidx[MP_CU_MAXSP] = {0};
        double sn = 0;
        for (int64_t o = 0; o < p[W_OUTN]; o++) {
            int64_t at = 0;
            int d = 0;
            for (; d < nsp; d++) {
                int64_t pos = base[d] + oidx[d] * p[W_S + d];
                if (pos < 0 || pos >= p[W_IN + d]) break;
                at = at * p[W_IN + d] + pos;
            }
            if (d == nsp) sn += mp_cu_ld(a->x[0], a->dt[0], dyn + o) * mp_cu_ld(a->x[1], a->dt[1], xn + at);
            for (d = nsp - 1; d >= 0 && ++oidx[d] == p[W_OUT + d]; d--) oidx[d] = 0;
        }
        s += sn;
    }
    mp_cu_st(a->x[2], a->dt[2], i, s);
}

/* Taps of output o's window along dim s within [lo, hi) of the input coordinates. */
MP_HD int64_t mp_cu_taps_within(const int64_t *p, int s, int64_t o, int64_t lo, int64_t hi)
{
    int64_t c = 0;
    for (int64_t j = 0; j < p[W_K + s]; j++) {
        int64_t pos = o * p[W_S + s] - p[W_PB + s] + j * p[W_D + s];
        c += pos >= lo && pos < hi;
    }
    return c;
}

/* The divisor of an average pool's output o (multi-index oidx). */
MP_HD int64_t mp_cu_avg_count(const int64_t *p, const int64_t *oidx)
{
    int64_t cnt = 1;
    for (int s = 0; s < p[W_NSP]; s++)
        cnt *= p[W_INCL_PAD] ? mp_cu_taps_within(p, s, oidx[s], -p[W_PB + s], p[W_IN + s] + p[W_PE + s])
                             : mp_cu_taps_within(p, s, oidx[s], 0, p[W_IN + s]);
    return cnt;
}

/* The first maximum of output o's window in plane pl: its spatial offset, -1 if none. */
MP_HD int64_t mp_cu_argmax(const int64_t *p, const void *x, int dt, int64_t pl, const int64_t *oidx)
{
    int64_t best = -1;
    double bv = 0;
    for (int64_t kp = 0; kp < p[W_KN]; kp++) {
        int64_t at = mp_cu_tap(p, oidx, kp);
        if (at < 0) continue;
        double v = mp_cu_ld(x, dt, pl * p[W_INN] + at);
        if (best < 0 || v > bv) best = at, bv = v;
    }
    return best;
}

/* p[W_KIND] 0 max, 1 average, 2 Lp (f0 its p: (sum |x|^p)^(1/p) over the taps inside, as
 * runtime/cpu_conv.c run_pool). X x0 -> Y x1, Indices x2 (max, or NULL) */
MP_HD void k_pool(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t on = p[W_OUTN], o = i % on, pl = i / on, oidx[MP_CU_MAXSP];
    mp_cu_unflat((int)p[W_NSP], p + W_OUT, o, oidx);
    if (p[W_KIND] == 0) {
        int64_t best = mp_cu_argmax(p, a->x[0], a->dt[0], pl, oidx);
        mp_cu_st(a->x[1], a->dt[1], i, best < 0 ? -INFINITY : mp_cu_ld(a->x[0], a->dt[0], pl * p[W_INN] + best));
        if (a->x[2]) {
            int64_t idx = best < 0 ? 0 : best;
            if (p[W_COL_MAJOR] && best >= 0) {
                int64_t coord[MP_CU_MAXSP] = {0}, cm = 0, str = 1;
                mp_cu_unflat((int)p[W_NSP], p + W_IN, best, coord);
                for (int s = 0; s < p[W_NSP]; s++) cm += coord[s] * str, str *= p[W_IN + s];
                idx = cm;
            }
            ((int64_t *)a->x[2])[i] = pl * p[W_INN] + idx;
        }
        return;
    }
    double s = 0;
    for (int64_t kp = 0; kp < p[W_KN]; kp++) {
        int64_t at = mp_cu_tap(p, oidx, kp);
        double v = at >= 0 ? mp_cu_ld(a->x[0], a->dt[0], pl * p[W_INN] + at) : 0;
        if (at >= 0) s += p[W_KIND] == 2 ? pow(fabs(v), a->f[0]) : v;
    }
    mp_cu_st(a->x[1], a->dt[1], i, p[W_KIND] == 2 ? pow(s, 1 / a->f[0]) : s / (double)mp_cu_avg_count(p, oidx));
}

/* dY x0, X x1 (max without usable indices), Indices x2 (or NULL) -> dX x3, a thread per element of X */
MP_HD void k_pool_dx(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t inn = p[W_INN], ip = i % inn, pl = i / inn, iidx[MP_CU_MAXSP], oidx[MP_CU_MAXSP];
    const int64_t *ind = (const int64_t *)a->x[2];
    mp_cu_unflat((int)p[W_NSP], p + W_IN, ip, iidx);
    double s = 0;
    for (int64_t kp = 0; kp < p[W_KN]; kp++) {
        int64_t o = mp_cu_tap_out(p, iidx, kp);
        if (o < 0) continue;
        int64_t at = pl * p[W_OUTN] + o;
        mp_cu_unflat((int)p[W_NSP], p + W_OUT, o, oidx);
        if (p[W_KIND] == 1) { /* times 1/count, as runtime/cpu_grad.c AveragePoolGrad (not over it: a different double) */
            int64_t cnt = mp_cu_avg_count(p, oidx);
            s += mp_cu_ld(a->x[0], a->dt[0], at) * (cnt ? 1.0 / (double)cnt : 0);
        } else if (ind ? ind[at] == i : mp_cu_argmax(p, a->x[1], a->dt[1], pl, oidx) == ip) s += mp_cu_ld(a->x[0], a->dt[0], at);
    }
    mp_cu_st(a->x[3], a->dt[3], i, s);
}

/* ---- Gather and its gradient ---------------------------------------------------------- */

/* p: nidx, inner, n (the gathered axis). data x0, indices x1 -> out x2 [outer, nidx, inner] */
MP_HD int64_t mp_cu_gather_src(const mp_cu_args *a, int64_t i)
{
    int64_t nidx = a->p[0], inner = a->p[1], n = a->p[2];
    int64_t j = (i / inner) % nidx, r = mp_cu_ldi(a->x[1], a->dt[1], j);
    if (r < 0) r += n;
    if (r < 0 || r >= n) r = 0; /* out of range: the CPU fails; never read outside the table */
    return ((i / inner) / nidx * n + r) * inner + i % inner;
}

MP_HD void k_gather(const mp_cu_args *a, int64_t i)
{
    int64_t s = mp_cu_gather_src(a, i);
    mp_cu_move(a->x[2], i, a->x[0], s, a->dt[0]);
}

/* dY x0, indices x1 -> table x2 (zeroed first): a thread per element of dY. A float64 table is the
 * workspace a 16-bit GatherGrad sums in, as the CPU's kernel sums in double (then one rounding, MAP). */
MP_HD void k_scatter_add(const mp_cu_args *a, int64_t i)
{
    double v = mp_cu_ld(a->x[0], a->dt[0], i);
    if (a->dt[2] == MP_CU_F64) MP_ATOMIC_ADD_F64(&((double *)a->x[2])[mp_cu_gather_src(a, i)], v);
    else MP_ATOMIC_ADD_F32(&((float *)a->x[2])[mp_cu_gather_src(a, i)], (float)v);
}

/* ---- Dropout: the CPU executor's counter-based generator (runtime/cpu_util.c) ----------- */

MP_HD uint64_t mp_cu_splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

MP_HD double mp_cu_rng_uniform(uint64_t seed, int32_t node, int64_t i)
{
    uint64_t h = mp_cu_splitmix64(seed ^ mp_cu_splitmix64((uint64_t)(uint32_t)node + 0x51ed2701ull));
    h = mp_cu_splitmix64(h ^ (uint64_t)i);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* p: node id, training. f0 ratio. X x0 -> Y x1, mask x2 (or NULL) */
MP_HD void k_dropout(const mp_cu_args *a, int64_t i)
{
    double ratio = a->f[0], v = mp_cu_ld(a->x[0], a->dt[0], i);
    int keep = 1;
    if (a->p[1] && ratio != 0) {
        keep = mp_cu_rng_uniform(a->seed, (int32_t)a->p[0], i) >= ratio;
        v = keep ? v * (ratio < 1 ? 1 / (1 - ratio) : 0) : 0;
    }
    mp_cu_st(a->x[1], a->dt[1], i, v);
    if (a->x[2]) mp_cu_st(a->x[2], a->dt[2], i, keep);
}

/* p: rows, cols, upper, k. X x0 -> Y x1 (float) */
MP_HD void k_trilu(const mp_cu_args *a, int64_t i)
{
    int64_t j = i % a->p[1], r = (i / a->p[1]) % a->p[0];
    int keep = a->p[2] ? j - r >= a->p[3] : j - r <= a->p[3];
    mp_cu_st(a->x[1], a->dt[1], i, keep ? mp_cu_ld(a->x[0], a->dt[0], i) : 0);
}

/* ---- optimizer updates, in place (outputs alias their inputs) ---------------------------- */

enum { MP_CU_OPT_STEP_INC = 3 };

/* p[0] rule. Adam: param x0, grad x1, m x2, v x3, step x4; f: lr, beta1, beta2, eps, weight decay,
 * inverse loss scale. SGD: param x0, grad x1; f0 lr, f5 inverse loss scale. Momentum: param x0, grad x1, buffer x2; f0 lr,
 * f1 momentum, f5 inverse loss scale. STEP_INC: step x4 += 1 (after the Adam launch). */
/* fp16's dynamic loss scale (passes/loss_scale.c), when the update has one: the finite flag x5 (0: the
 * step changes nothing) and the log2 scale x6, the gradient divided by f[6] 2^log2 (runtime/cpu_optim.c
 * inv_loss_scale); else the inverse scale inv, fixed. */
MP_HD int mp_cu_opt_skip(const mp_cu_args *a) { return a->x[5] && mp_cu_ld(a->x[5], a->dt[5], 0) == 0; }
MP_HD double mp_cu_opt_inv(const mp_cu_args *a, double inv)
{
    return a->x[6] ? 1.0 / ldexp(a->f[6], (int)mp_cu_ld(a->x[6], a->dt[6], 0)) : inv;
}

MP_HD void k_optim(const mp_cu_args *a, int64_t i)
{
    float *p = (float *)a->x[0], *m = (float *)a->x[2], *v = (float *)a->x[3];
    const double *f = a->f;
    if (mp_cu_opt_skip(a)) return;
    int inc = a->p[0] == MP_CU_OPT_STEP_INC;
    double g = inc ? 0 : mp_cu_ld(a->x[1], a->dt[1], i), inv = inc ? 0 : mp_cu_opt_inv(a, f[5]);
    switch (a->p[0]) {
    case MP_CU_OPT_ADAM: {
        double t = (double)*(const float *)a->x[4] + 1, c1 = 1 - pow(f[1], t), c2 = 1 - pow(f[2], t);
        double gr = g * inv, mm = f[1] * m[i] + (1 - f[1]) * gr, vv = f[2] * v[i] + (1 - f[2]) * gr * gr;
        double pp = p[i] * (1 - f[0] * f[4]);
        m[i] = (float)mm, v[i] = (float)vv;
        p[i] = (float)(pp - f[0] * (mm / c1) / (sqrt(vv / c2) + f[3]));
        break;
    }
    case MP_CU_OPT_SGD: p[i] = (float)(p[i] - f[0] * (g * inv)); break;
    case MP_CU_OPT_MOMENTUM: {
        double mm = f[1] * m[i] + g * inv;
        m[i] = (float)mm;
        p[i] = (float)(p[i] - f[0] * mm);
        break;
    }
    default: *(float *)a->x[4] += 1; break;
    }
}

/* ---- Adafactor (runtime/cpu_optim.c AdafactorUpdate), in phases --------------------------- */

/* p: phase, B, R, C (the parameter as B matrices R x C; unfactored: 1 x 1 x numel), factored, numel.
 * f: lr, beta2, inverse loss scale. param x0, grad x1, row moment (or v) x2, column moment x3;
 * workspace x7 (doubles): [0] sum of u^2, [1, 1 + B) the row moments' means, then the rows' moments unrounded. */
enum { AF_PHASE = 0, AF_B, AF_R, AF_C, AF_FACTORED, AF_NUMEL };
enum { AF_ROWS = 0, AF_COLS, AF_RMEAN, AF_SQ, AF_APPLY };

MP_HD double mp_cu_af_g(const mp_cu_args *a, int64_t i) { return mp_cu_ld(a->x[1], a->dt[1], i) * mp_cu_opt_inv(a, a->f[2]); }
MP_HD double mp_cu_af_g2(const mp_cu_args *a, int64_t i) { return mp_cu_af_g(a, i) * mp_cu_af_g(a, i) + 1e-30; }

/* Element i's update u = g / sqrt(v^) (before the moments of an unfactored parameter are written). */
MP_HD double mp_cu_af_u(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    const double *ws = (const double *)a->x[7];
    double gr = mp_cu_af_g(a, i);
    if (!p[AF_FACTORED]) return gr / sqrt(a->f[1] * ((const float *)a->x[2])[i] + (1 - a->f[1]) * mp_cu_af_g2(a, i));
    int64_t R = p[AF_R], C = p[AF_C], b = i / (R * C), r = (i / C) % R, j = i % C;
    double v = (double)((const float *)a->x[2])[b * R + r] * ((const float *)a->x[3])[b * C + j] / ws[1 + b];
    return gr / sqrt(v);
}

MP_HD double mp_cu_af_sq_part(const mp_cu_args *a, int64_t k0, int64_t step)
{
    double s = 0;
    for (int64_t i = k0; i < a->p[AF_NUMEL]; i += step) {
        double u = mp_cu_af_u(a, i);
        s += u * u;
    }
    return s;
}

MP_HD void k_adafactor(const mp_cu_args *a, int64_t t)
{
    const int64_t *p = a->p;
    int64_t R = p[AF_R], C = p[AF_C], B = p[AF_B];
    double b2 = a->f[1], *ws = (double *)a->x[7];
    float *rm = (float *)a->x[2], *cm = (float *)a->x[3];
    if (mp_cu_opt_skip(a)) return;
    switch (p[AF_PHASE]) {
    case AF_ROWS: { /* t = b R + i */
        double row = 0;
        for (int64_t j = 0; j < C; j++) row += mp_cu_af_g2(a, t * C + j);
        double r = b2 * rm[t] + (1 - b2) * row / (double)C;
        rm[t] = (float)r, ws[1 + B + t] = r;
        break;
    }
    case AF_COLS: { /* t = b C + j */
        int64_t b = t / C, j = t % C;
        double col = 0;
        for (int64_t i = 0; i < R; i++) col += mp_cu_af_g2(a, (b * R + i) * C + j);
        cm[t] = (float)(b2 * cm[t] + (1 - b2) * col / (double)R);
        break;
    }
    case AF_RMEAN: { /* t = b */
        double s = 0;
        for (int64_t i = 0; i < R; i++) s += ws[1 + B + t * R + i];
        ws[1 + t] = s / (double)R;
        break;
    }
    case AF_SQ: ws[0] = mp_cu_af_sq_part(a, 0, 1); break;
    default: { /* AF_APPLY, t an element */
        double u = mp_cu_af_u(a, t), n = (double)p[AF_NUMEL], rms = n ? sqrt(ws[0] / n) : 0;
        float *prm = (float *)a->x[0];
        prm[t] = (float)(prm[t] - a->f[0] * u / (rms > 1 ? rms : 1));
        if (!p[AF_FACTORED]) rm[t] = (float)(b2 * rm[t] + (1 - b2) * mp_cu_af_g2(a, t));
        break;
    }
    }
}

/* ---- Resize (runtime/cpu_resize.c): one axis per launch, doubles between the axes ------------ */

/* p: the axis as outer x in x inner -> outer x out x inner; the CPU kernel's mode, coordinate
 * transformation, nearest rounding (RS_* below, in its order), exclude_outside, antialias, taps
 * per output, and element offsets of the source and destination (into the workspace, whose
 * doubles hold the axes between the first and the last). f: scale, roi start and end, cubic
 * coefficient, extrapolation value. x0 -> x1, a thread per element of x1. */
enum { RS_OUTER = 0, RS_IN, RS_OUT, RS_INNER, RS_MODE, RS_COORD, RS_ROUND, RS_EXCLUDE, RS_AA, RS_TAPS, RS_SRC, RS_DST };
enum { RS_F_SCALE = 0, RS_F_ROI_S, RS_F_ROI_E, RS_F_CUBIC, RS_F_EXTRAP };
enum { RS_NEAREST = 0, RS_LINEAR, RS_CUBIC };
enum { RS_HALF_PIXEL = 0, RS_HALF_PIXEL_SYM, RS_PYTORCH, RS_ALIGN, RS_ASYM, RS_TF_CROP };
enum { RS_PREFER_FLOOR = 0, RS_PREFER_CEIL, RS_FLOOR, RS_CEIL };

/* Output coordinate o's source position: its left neighbour i0, the ratio past it, the first of
 * its taps, and the sums that normalize the antialiased and exclude_outside weights. */
typedef struct mp_cu_rs {
    double ratio, s1, s2;
    int64_t i0, first;
} mp_cu_rs;

MP_HD double mp_cu_cubic_w(double x, double a)
{
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* Tap j's weight before any normalization. */
MP_HD double mp_cu_rs_raw(const int64_t *p, const double *f, const mp_cu_rs *t, int64_t j)
{
    double r = t->ratio;
    if (p[RS_MODE] == RS_NEAREST) {
        int64_t m = p[RS_ROUND];
        int right = r == 1 || m == RS_CEIL || (m == RS_PREFER_FLOOR && r > 0.5) || (m == RS_PREFER_CEIL && r >= 0.5);
        if (m == RS_FLOOR && r != 1) right = 0;
        return j == 0 ? !right : right;
    }
    if (p[RS_AA]) { /* the filter stretched by 1 / scale */
        double sc = f[RS_F_SCALE] < 1 ? f[RS_F_SCALE] : 1, arg = ((double)(t->first + j - t->i0) - r) * sc;
        return p[RS_MODE] == RS_LINEAR ? fmax(0.0, 1 - fabs(arg)) : mp_cu_cubic_w(arg, f[RS_F_CUBIC]);
    }
    if (p[RS_MODE] == RS_LINEAR) return j == 0 ? 1 - r : r;
    double arg = j == 0 ? r + 1 : j == 1 ? r : j == 2 ? 1 - r : 2 - r;
    return mp_cu_cubic_w(arg, f[RS_F_CUBIC]);
}

/* Tap j's weight, normalized as the CPU normalizes it (0: the tap is dropped). */
MP_HD double mp_cu_rs_w(const int64_t *p, const double *f, const mp_cu_rs *t, int64_t j)
{
    double w = mp_cu_rs_raw(p, f, t, j);
    if (p[RS_AA]) w /= t->s1;
    if (p[RS_EXCLUDE]) {
        int64_t ix = t->first + j;
        w = ix < 0 || ix >= p[RS_IN] ? 0 : w;
        w = t->s2 != 0 ? w / t->s2 : 0;
    }
    return w;
}

/* Output coordinate o's position in the input (before tf_crop_and_resize's test of the crop). */
MP_HD double mp_cu_rs_coord(const int64_t *p, const double *f, int64_t o)
{
    double in_w = (double)p[RS_IN], scale = f[RS_F_SCALE], out_w = scale * in_w, x = (double)o, xo;
    double rs = f[RS_F_ROI_S], re = f[RS_F_ROI_E];
    switch (p[RS_COORD]) {
    case RS_HALF_PIXEL: xo = (x + 0.5) / scale - 0.5; break;
    case RS_HALF_PIXEL_SYM: xo = in_w / 2 * (1 - (double)p[RS_OUT] / out_w) + (x + 0.5) / scale - 0.5; break;
    case RS_PYTORCH: xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
    case RS_ALIGN: xo = out_w == 1 ? 0 : x * (in_w - 1) / (out_w - 1); break;
    case RS_ASYM: xo = x / scale; break;
    default:
        xo = out_w == 1 ? (re - rs) * (in_w - 1) / 2 : x * (re - rs) * (in_w - 1) / (out_w - 1);
        xo += rs * (in_w - 1);
        break;
    }
    return xo;
}

/* The left neighbour and ratio of source position xo; returns the first of its taps. */
MP_HD int64_t mp_cu_rs_first_at(const int64_t *p, double xo, double *ratio, int64_t *i0)
{
    double fl = floor(xo);
    *ratio = xo - fl, *i0 = (int64_t)fl;
    if (*ratio == 0) *ratio = 1, (*i0)--; /* integer: the pixel itself, as the right neighbour */
    return *i0 - p[RS_TAPS] / 2 + 1;      /* the nearest taps, left preferred */
}

/* Output o's first tap, also for an output outside tf_crop_and_resize's crop: non-decreasing in o
 * wherever the coordinate map increases (every mode but a crop whose roi ends before it starts). */
MP_HD int64_t mp_cu_rs_first(const int64_t *p, const double *f, int64_t o)
{
    double ratio;
    int64_t i0;
    return mp_cu_rs_first_at(p, mp_cu_rs_coord(p, f, o), &ratio, &i0);
}

/* Output coordinate o's taps; 0 when it has none (tf_crop_and_resize outside the crop). */
MP_HD int mp_cu_rs_at(const int64_t *p, const double *f, int64_t o, mp_cu_rs *t)
{
    double in_w = (double)p[RS_IN], xo = mp_cu_rs_coord(p, f, o);
    if (p[RS_COORD] == RS_TF_CROP && (xo < 0 || xo > in_w - 1)) return 0;
    t->first = mp_cu_rs_first_at(p, xo, &t->ratio, &t->i0);
    t->s1 = t->s2 = 1;
    if (p[RS_AA]) {
        double s = 0;
        for (int64_t j = 0; j < p[RS_TAPS]; j++) s += mp_cu_rs_raw(p, f, t, j);
        t->s1 = s;
    }
    if (p[RS_EXCLUDE]) {
        double s = 0;
        for (int64_t j = 0; j < p[RS_TAPS]; j++) {
            int64_t ix = t->first + j;
            double w = mp_cu_rs_raw(p, f, t, j);
            s += ix < 0 || ix >= p[RS_IN] ? 0 : p[RS_AA] ? w / t->s1 : w;
        }
        t->s2 = s;
    }
    return 1;
}

MP_HD int64_t mp_cu_clamp(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

MP_HD void k_resize(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t inner = p[RS_INNER], in = p[RS_IN], k = i % inner, o = (i / inner) % p[RS_OUT], q = i / (inner * p[RS_OUT]);
    mp_cu_rs t;
    double acc = 0;
    if (!mp_cu_rs_at(p, a->f, o, &t)) acc = a->f[RS_F_EXTRAP];
    else
        for (int64_t j = 0; j < p[RS_TAPS]; j++) {
            double w = mp_cu_rs_w(p, a->f, &t, j);
            if (w == 0) continue;
            int64_t ix = mp_cu_clamp(t.first + j, in); /* edge padding */
            acc += w * mp_cu_ld(a->x[0], a->dt[0], p[RS_SRC] + (q * in + ix) * inner + k);
        }
    mp_cu_st(a->x[1], a->dt[1], p[RS_DST] + i, acc);
}

/* The adjoint of k_resize along one axis (runtime/cpu_resize.c resize_adjoint): x0 is outer x out x
 * inner, x1 outer x in x inner, a thread per element of x1. Its value is the sum, over the outputs o
 * ascending and their taps j ascending whose edge-clamped index is its own, of w * x0[o] (the CPU's
 * order of additions into it); outputs outside a crop read nothing, so give nothing. p, f: as MP_CU_RESIZE. */
MP_HD void k_resize_dx(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p, T = p[RS_TAPS];
    int64_t inner = p[RS_INNER], in = p[RS_IN], out = p[RS_OUT], k = i % inner, ix = (i / inner) % in, q = i / (inner * in);
    int64_t lo = 0, hi = out;
    if (out > 0 && mp_cu_rs_first(p, a->f, 0) <= mp_cu_rs_first(p, a->f, out - 1)) {
        /* first(o) non-decreasing: the outputs whose clamped window holds ix are the range [lo, hi) */
        int64_t l = 0, h = out;
        while (l < h) { /* lo: the first o whose window ends at or past ix */
            int64_t m = l + (h - l) / 2;
            if (mp_cu_clamp(mp_cu_rs_first(p, a->f, m) + T - 1, in) >= ix) h = m;
            else l = m + 1;
        }
        lo = l, h = out;
        while (l < h) { /* hi: the first o whose window starts past ix */
            int64_t m = l + (h - l) / 2;
            if (mp_cu_clamp(mp_cu_rs_first(p, a->f, m), in) > ix) h = m;
            else l = m + 1;
        }
        hi = l;
    }
    double acc = 0;
    for (int64_t o = lo; o < hi; o++) {
        mp_cu_rs t;
        if (!mp_cu_rs_at(p, a->f, o, &t)) continue;
        for (int64_t j = 0; j < T; j++) {
            double w = mp_cu_rs_w(p, a->f, &t, j);
            if (w != 0 && mp_cu_clamp(t.first + j, in) == ix)
                acc += w * mp_cu_ld(a->x[0], a->dt[0], p[RS_SRC] + (q * out + o) * inner + k);
        }
    }
    mp_cu_st(a->x[1], a->dt[1], p[RS_DST] + i, acc);
}

/* ---- Pad (runtime/cpu_tensor.c mp_cpu_Pad) and its gradient (cpu_grad.c mp_cpu_PadGrad) ------------ */

/* p: rank r, mode, the fill element's bytes, then the padded tensor's dims[r], begin[r] (negative:
 * cropped), the other's dims[r], and the view (offset, strides[r]) the kernel reads.
 * MP_CU_PAD: X x0 (read through the view) -> Y x1; MP_CU_PAD_DX: dY x0 (through the view) -> dX x1. */
enum { PAD_RANK = 0, PAD_MODE, PAD_FILL, PAD_DIMS };
enum { PAD_CONSTANT = 0, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* The index along an axis of d cells that padded position o copies (runtime/cpu_util.c
 * mp_pad_index_map); -1: the constant fill. */
MP_HD int64_t mp_cu_pad_src(int mode, int64_t o, int64_t begin, int64_t d)
{
    int64_t j = o - begin, per = 2 * (d - 1);
    if (j >= 0 && j < d) return j;
    if (mode == PAD_CONSTANT) return -1;
    if (mode == PAD_EDGE) return j < 0 ? 0 : d - 1;
    if (mode == PAD_WRAP) return (j % d + d) % d;
    if (d == 1) return 0;
    j = (j % per + per) % per;
    return j >= d ? per - j : j;
}

/* The first padded position at or after o (of out) that copies index j, -1 if none. */
MP_HD int64_t mp_cu_pad_next(int mode, int64_t j, int64_t begin, int64_t d, int64_t out, int64_t o)
{
    int64_t own = j + begin; /* the one position inside the copy of the input */
    if (mode == PAD_CONSTANT) return own >= o && own < out ? own : -1;
    for (; o < out; o++) {
        if (o >= begin && o < begin + d) { /* inside: only own */
            if (o <= own) return own < out ? own : -1;
            o = begin + d - 1;
            continue;
        }
        if (mp_cu_pad_src(mode, o, begin, d) == j) return o;
    }
    return -1;
}

/* a thread per element of Y */
MP_HD void k_pad(const mp_cu_args *a, int64_t i)
{
    int r = (int)a->p[PAD_RANK], mode = (int)a->p[PAD_MODE];
    const int64_t *od = a->p + PAD_DIMS, *bg = od + r, *id = bg + r, *is = id + r + 1;
    int64_t s = id[r], rem = i;
    int fill = 0;
    for (int k = r - 1; k >= 0; k--) {
        int64_t q = rem / od[k], j = mp_cu_pad_src(mode, rem - q * od[k], bg[k], id[k]);
        fill |= j < 0, s += j * is[k], rem = q;
    }
    if (fill) memcpy((char *)a->x[1] + i * mp_cu_esize(a->dt[1]), &a->p[PAD_FILL], (size_t)mp_cu_esize(a->dt[1])); /* the fill's bytes */
    else mp_cu_move(a->x[1], i, a->x[0], s, a->dt[1]);
}

/* a thread per element of dX: the dY elements that copied it, in dY's row-major order (an odometer
 * over each axis's positions that copy this index), summed in double. */
MP_HD void k_pad_dx(const mp_cu_args *a, int64_t i)
{
    int r = (int)a->p[PAD_RANK], mode = (int)a->p[PAD_MODE];
    const int64_t *od = a->p + PAD_DIMS, *bg = od + r, *id = bg + r, *ys = id + r + 1;
    int64_t j[MP_CU_MAX_RANK], o[MP_CU_MAX_RANK], first[MP_CU_MAX_RANK], off = id[r], rem = i;
    double acc = 0;
    int k;
    for (k = r - 1; k >= 0; k--) {
        int64_t q = rem / id[k];
        j[k] = rem - q * id[k], rem = q;
    }
    for (k = 0; k < r; k++) {
        first[k] = o[k] = mp_cu_pad_next(mode, j[k], bg[k], id[k], od[k], 0);
        if (o[k] < 0) break;
        off += o[k] * ys[k];
    }
    while (k == r) {
        acc += mp_cu_ld(a->x[0], a->dt[0], off);
        for (k = r - 1; k >= 0; k--) { /* the next position: the last axis fastest */
            int64_t nx = mp_cu_pad_next(mode, j[k], bg[k], id[k], od[k], o[k] + 1);
            if (nx >= 0) {
                off += (nx - o[k]) * ys[k], o[k] = nx;
                break;
            }
            off += (first[k] - o[k]) * ys[k], o[k] = first[k];
        }
        k = k < 0 ? -1 : r;
    }
    mp_cu_st(a->x[1], a->dt[1], i, acc);
}

/* ---- Einsum (runtime/cpu_matmul.c mp_cpu_Einsum) ---------------------------------------------------- */

/* p: nin, output rank no, contracted labels ns, zp, the output dims[no], the contracted sizes[ns], then
 * per input its element strides along the output axes[no] and the contracted labels[ns] (0 where it
 * lacks the label or broadcasts it; summed for a repeated label: a diagonal). Inputs x0.., the output
 * x[nin] (float32 / float64; int32 for MatMulInteger), a thread per output element: the sum over the
 * contracted index space, row-major, of the product of the inputs in input order, in double. zp 1:
 * input t's zero point x[nin + 1 + t] (NULL: none), read through the next nin rows of strides, is
 * subtracted from it: MatMulInteger's (A - a_zero_point)(B - b_zero_point), runtime/cpu_quant.c's
 * shifted operands (integers, so the sums are exact below 2^53). */
enum { ES_NIN = 0, ES_NO, ES_NS, ES_ZP, ES_DIMS };
#define MP_CU_EINSUM_MAXS 16 /* contracted labels */

MP_HD void k_einsum(const mp_cu_args *a, int64_t i)
{
    int nin = (int)a->p[ES_NIN], no = (int)a->p[ES_NO], ns = (int)a->p[ES_NS], w = no + ns;
    int zp = a->p[ES_ZP] != 0, nv = zp ? 2 * nin : nin; /* the operands whose offsets move: inputs, zero points */
    const int64_t *od = a->p + ES_DIMS, *cs = od + no, *st = cs + ns;
    int64_t off[MP_CU_NT] = {0}, sidx[MP_CU_EINSUM_MAXS] = {0}, rem = i, cnt = 1;
    for (int d = no - 1; d >= 0; d--) { /* one unflattening for every input */
        int64_t q = rem / od[d], at = rem - q * od[d];
        for (int t = 0; t < nv; t++) off[t] += at * st[t * w + d];
        rem = q;
    }
    for (int c = 0; c < ns; c++) cnt *= cs[c];
    double acc = 0;
    for (int64_t s = 0; s < cnt; s++) {
        double prod = 1;
        for (int t = 0; t < nin; t++) {
            const void *z = zp ? a->x[nin + 1 + t] : NULL;
            prod *= mp_cu_ld(a->x[t], a->dt[t], off[t]) - (z ? mp_cu_ld(z, a->dt[nin + 1 + t], off[nin + t]) : 0);
        }
        acc += prod;
        for (int c = ns - 1; c >= 0; c--) { /* the last contracted label fastest */
            int wrap = ++sidx[c] == cs[c];
            for (int t = 0; t < nv; t++) off[t] += (wrap ? 1 - cs[c] : 1) * st[t * w + no + c];
            if (!wrap) break;
            sidx[c] = 0;
        }
    }
    mp_cu_st(a->x[nin], a->dt[nin], i, acc);
}

/* ---- Det (runtime/cpu_misc.c mp_cpu_Det) ----------------------------------------------------------- */

/* p: m. x0 [mats, m, m] (contiguous) -> x1 [mats], a thread per matrix: Gaussian elimination with partial
 * pivoting in double on the matrix's copy in the workspace x2 (m * m doubles a matrix), the CPU kernel's
 * steps in its order, so its bits. */
enum { DET_M = 0 };

MP_HD void k_det(const mp_cu_args *a, int64_t b)
{
    int64_t m = a->p[DET_M];
    double *w = (double *)a->x[2] + b * m * m, det = 1;
    for (int64_t i = 0; i < m * m; i++) w[i] = mp_cu_ld(a->x[0], a->dt[0], b * m * m + i);
    for (int64_t c = 0; c < m && det != 0; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; r++)
            if (fabs(w[r * m + c]) > fabs(w[p * m + c])) p = r;
        if (w[p * m + c] == 0) {
            det = 0;
            break;
        }
        if (p != c) {
            for (int64_t j = 0; j < m; j++) {
                double t = w[c * m + j];
                w[c * m + j] = w[p * m + j];
                w[p * m + j] = t;
            }
            det = -det;
        }
        det *= w[c * m + c];
        for (int64_t r = c + 1; r < m; r++) {
            double f = w[r * m + c] / w[c * m + c];
            for (int64_t j = c; j < m; j++) w[r * m + j] -= f * w[c * m + j];
        }
    }
    mp_cu_st(a->x[1], a->dt[1], b, det);
}

/* ---- CumSum, CumProd (runtime/cpu_reduce.c run_cumulative) ---------------------------------------- */

/* p: outer, d (the axis), inner, exclusive, reverse, product (CumProd). x0 -> x1 (may be x0's bytes), a
 * thread per (outer, inner) line walking the axis in the CPU's order: floats summed (multiplied) in double,
 * integers wrapping in 64 bits. */
enum { CS_OUTER = 0, CS_D, CS_INNER, CS_EXCL, CS_REV, CS_PROD };

MP_HD void k_cumsum(const mp_cu_args *a, int64_t l)
{
    const int64_t *p = a->p;
    int64_t d = p[CS_D], inner = p[CS_INNER], base = mp_cu_line_base(l, d, inner);
    int isf = a->dt[0] == MP_CU_F32 || a->dt[0] == MP_CU_F64;
    int prod = p[CS_PROD] != 0;
    double acc = prod;
    uint64_t iacc = (uint64_t)prod;
    for (int64_t t = 0; t < d; t++) {
        int64_t at = base + (p[CS_REV] ? d - 1 - t : t) * inner;
        if (isf) {
            double e = mp_cu_ld(a->x[0], a->dt[0], at), next = prod ? acc * e : acc + e;
            mp_cu_st(a->x[1], a->dt[1], at, p[CS_EXCL] ? acc : next);
            acc = next;
        } else {
            uint64_t e = (uint64_t)mp_cu_ldi(a->x[0], a->dt[0], at), next = prod ? iacc * e : iacc + e;
            mp_cu_sti(a->x[1], a->dt[1], at, (int64_t)(p[CS_EXCL] ? iacc : next));
            iacc = next;
        }
    }
}

/* ---- LpNormalization (runtime/cpu_norm.c), ReverseSequence (runtime/cpu_misc.c) ---------------------- */

/* p: d (the axis), inner, the norm's p (1 or 2). A thread per (outer, inner) line: the norm summed in double
 * in the CPU's order, each element divided by it; a zero line stays zero. */
enum { LPN_D = 0, LPN_INNER, LPN_P };

MP_HD void k_lp_norm(const mp_cu_args *a, int64_t l)
{
    const int64_t *p = a->p;
    int64_t d = p[LPN_D], inner = p[LPN_INNER], base = mp_cu_line_base(l, d, inner);
    double s = 0;
    for (int64_t j = 0; j < d; j++) {
        double v = mp_cu_ld(a->x[0], a->dt[0], base + j * inner);
        s += p[LPN_P] == 1 ? fabs(v) : v * v;
    }
    double norm = p[LPN_P] == 1 ? s : sqrt(s);
    for (int64_t j = 0; j < d; j++) {
        int64_t at = base + j * inner;
        mp_cu_st(a->x[1], a->dt[1], at, norm != 0 ? mp_cu_ld(a->x[0], a->dt[0], at) / norm : 0);
    }
}

/* p: the time axis' stride and size, the batch axis' stride and size (contiguous X and Y). x0 data, x1 the
 * lengths (int64 or int32), x2 out. A thread per element: the first len steps of its batch entry read
 * reversed, the rest as they are (a length out of [0, time size] reads as it is; the CPU fails). */
enum { RSQ_T_STRIDE = 0, RSQ_T_SIZE, RSQ_B_STRIDE, RSQ_B_SIZE };

MP_HD void k_reverse_seq(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t t = (i / p[RSQ_T_STRIDE]) % p[RSQ_T_SIZE], b = (i / p[RSQ_B_STRIDE]) % p[RSQ_B_SIZE];
    int64_t len = mp_cu_ldi(a->x[1], a->dt[1], b), src = i;
    if (len >= 0 && len <= p[RSQ_T_SIZE] && t < len) src += (len - 1 - 2 * t) * p[RSQ_T_STRIDE];
    mp_cu_move(a->x[2], i, a->x[0], src, a->dt[0]);
}

/* ---- LRN (runtime/cpu_conv.c mp_cpu_LRN) and its gradient (cpu_grad.c mp_cpu_LRNGrad) ------------ */

/* p: kind, C, per (elements of one (n, c) plane), size; f: alpha, beta, bias. A thread per element of Y
 * (x0 X, x1 Y) or of dX (x0 dY, x1 X, x2 dX), each window's sums in double in the CPU's order. */
enum { LRN_KIND = 0, LRN_C, LRN_PER, LRN_SIZE };
enum { LRNK_FWD = 0, LRNK_DX };

/* bias + alpha / size * (the sum of squares of X over channel c's window [c - lo, c + hi]) at (n, ., i) */
MP_HD double mp_cu_lrn_den(const mp_cu_args *a, const void *x, int dt, int64_t n, int64_t c, int64_t i)
{
    int64_t C = a->p[LRN_C], per = a->p[LRN_PER], size = a->p[LRN_SIZE], lo = (size - 1) / 2, hi = size - 1 - lo;
    double sq = 0;
    for (int64_t j = c - lo; j <= c + hi; j++)
        if (j >= 0 && j < C) {
            double v = mp_cu_ld(x, dt, (n * C + j) * per + i);
            sq += a->p[LRN_KIND] == LRNK_FWD ? v * v : pow(v, 2); /* each as its CPU kernel squares */
        }
    return a->f[2] + a->f[0] / (double)size * sq;
}

MP_HD void k_lrn(const mp_cu_args *a, int64_t e)
{
    int64_t C = a->p[LRN_C], per = a->p[LRN_PER], size = a->p[LRN_SIZE], lo = (size - 1) / 2, hi = size - 1 - lo;
    int64_t i = e % per, c = (e / per) % C, n = e / (per * C);
    double beta = a->f[1];
    if (a->p[LRN_KIND] == LRNK_FWD) {
        mp_cu_st(a->x[1], a->dt[1], e, mp_cu_ld(a->x[0], a->dt[0], e) / pow(mp_cu_lrn_den(a, a->x[0], a->dt[0], n, c, i), beta));
        return;
    }
    double s = 0; /* the channels whose window holds c: [c - hi, c + lo] */
    for (int64_t j = c - hi; j <= c + lo; j++)
        if (j >= 0 && j < C) {
            int64_t at = (n * C + j) * per + i;
            s += mp_cu_ld(a->x[0], a->dt[0], at) * mp_cu_ld(a->x[1], a->dt[1], at) *
                 pow(mp_cu_lrn_den(a, a->x[1], a->dt[1], n, j, i), -beta - 1);
        }
    double alpha = a->f[0] / (double)size;
    mp_cu_st(a->x[2], a->dt[2], e,
             mp_cu_ld(a->x[0], a->dt[0], e) * pow(mp_cu_lrn_den(a, a->x[1], a->dt[1], n, c, i), -beta) -
                 2 * beta * alpha * mp_cu_ld(a->x[1], a->dt[1], e) * s);
}

/* ---- ArgMax, ArgMin, Hardmax (runtime/cpu_reduce.c), OneHot (runtime/cpu_tensor.c) ------------------ */

/* p: d (the axis), inner, max (1) or min (0), select_last_index, hard. A thread per (outer, inner) line finds
 * its first (or last) extreme, compared in double as the CPU's, and writes its int64 index, or (Hardmax, as
 * runtime/cpu_reduce.c: the first maximum above -inf) 1 there and 0 along the rest of the line. */
enum { AM_D = 0, AM_INNER, AM_MAX, AM_LAST, AM_HARD };

MP_HD void k_arg(const mp_cu_args *a, int64_t l)
{
    const int64_t *p = a->p;
    int64_t d = p[AM_D], inner = p[AM_INNER], base = mp_cu_line_base(l, d, inner), best = 0, j = 1;
    double bv = mp_cu_ld(a->x[0], a->dt[0], base);
    if (p[AM_HARD]) bv = -INFINITY, j = 0;
    for (; j < d; j++) {
        double e = mp_cu_ld(a->x[0], a->dt[0], base + j * inner);
        int better = p[AM_MAX] ? (p[AM_LAST] ? e >= bv : e > bv) : (p[AM_LAST] ? e <= bv : e < bv);
        if (better) best = j, bv = e;
    }
    if (!p[AM_HARD]) {
        ((int64_t *)a->x[1])[l] = best;
        return;
    }
    for (j = 0; j < d; j++) mp_cu_st(a->x[1], a->dt[1], base + j * inner, j == best);
}

/* p: depth, inner (the output's elements after the axis). x0 indices, x1 values [off, on], x2 out. A thread per
 * output element: on where its index (negative: from the end; mp_cu_ldi's reading) is its place along
 * the axis, else off (an index out of range: off everywhere, as the CPU's). */
enum { OH_DEPTH = 0, OH_INNER };

MP_HD void k_one_hot(const mp_cu_args *a, int64_t e)
{
    int64_t d = a->p[OH_DEPTH], inner = a->p[OH_INNER], i = e % inner, k = (e / inner) % d, o = e / (inner * d);
    int64_t v = mp_cu_ldi(a->x[0], a->dt[0], o * inner + i);
    if (v < 0) v += d;
    mp_cu_move(a->x[2], e, a->x[1], v == k, a->dt[2]);
}

/* ---- TopK (runtime/cpu_reduce.c mp_cpu_TopK) ---------------------------------------------------------- */

/* p: d (the axis), inner, k, largest. x0 X, x1 values, x2 indices (absent: NULL). A thread per element of X
 * finds its rank in the CPU's stable order (the keys compared in double: the better first, equal keys by
 * index) and, when the rank is below k, writes itself there: O(d) a thread, no scratch, no atomics. */
enum { TK_D = 0, TK_INNER, TK_K, TK_LARGEST };

MP_HD void k_topk(const mp_cu_args *a, int64_t e)
{
    const int64_t *p = a->p;
    int64_t d = p[TK_D], inner = p[TK_INNER], kk = p[TK_K], i = e % inner, m = (e / inner) % d, o = e / (inner * d);
    double key = mp_cu_ld(a->x[0], a->dt[0], e);
    int64_t rank = 0;
    for (int64_t j = 0; j < d && rank < kk; j++) {
        double kj = mp_cu_ld(a->x[0], a->dt[0], (o * d + j) * inner + i);
        rank += (p[TK_LARGEST] ? kj > key : kj < key) || (j < m && kj == key);
    }
    if (rank >= kk) return;
    int64_t at = (o * kk + rank) * inner + i;
    if (a->x[1]) mp_cu_move(a->x[1], at, a->x[0], e, a->dt[0]);
    if (a->x[2]) ((int64_t *)a->x[2])[at] = m;
}

/* ---- GatherElements, ScatterElements (runtime/cpu_tensor.c) -------------------------------------- */

/* p: rank r, axis, then the indices' dims[r] (the output's for GatherElements), the data's dims[r].
 * Indices, updates, data and output are contiguous; a negative index counts from the end, one out of
 * range (the CPU fails) reads element 0 of the axis (GatherElements) or hits nothing (Scatter). */
enum { GE_RANK = 0, GE_AXIS, GE_RED, GE_DIMS };
enum { SE_NONE = 0, SE_ADD, SE_MUL, SE_MAX, SE_MIN };

MP_HD int64_t mp_cu_elem_index(const mp_cu_args *a, int64_t at, int64_t d)
{
    int64_t v = mp_cu_ldi(a->x[1], a->dt[1], at);
    if (v < 0) v += d;
    return v < 0 || v >= d ? -1 : v;
}

/* data x0, indices x1 -> out x2 (any dtype), a thread per element of the output */
MP_HD void k_gather_elements(const mp_cu_args *a, int64_t i)
{
    int r = (int)a->p[GE_RANK], ax = (int)a->p[GE_AXIS];
    const int64_t *id = a->p + GE_DIMS, *dd = id + r;
    int64_t rem = i, src = 0, str = 1, v = mp_cu_elem_index(a, i, dd[ax]);
    for (int k = r - 1; k >= 0; k--) {
        int64_t q = rem / id[k], at = rem - q * id[k];
        src += (k == ax ? (v < 0 ? 0 : v) : at) * str;
        str *= dd[k], rem = q;
    }
    mp_cu_move(a->x[2], i, a->x[0], src, a->dt[0]);
}

/* One update u into acc by the scatter's reduction (SE_*), rounded to the output's dtype dt as the CPU's
 * store rounds each step. */
MP_HD double mp_cu_scatter_step(int red, double acc, double u, int dt)
{
    acc = red == SE_ADD ? acc + u : red == SE_MUL ? acc * u : red == SE_MAX ? (acc > u ? acc : u)
        : red == SE_MIN ? (acc < u ? acc : u) : u;
    return mp_cu_round_to(dt, acc);
}

/* p[GE_RED]: the reduction. data x0, indices x1, updates x2 -> out x3 (float32 / float64; may be data's
 * bytes), a thread per element of the output: the data element, then the updates whose index hits it
 * combined in the CPU's order (ascending along the axis: the indices' row-major order), each step
 * rounded to the output's dtype as the CPU's stores round it. A gather, so no atomics. */
MP_HD void k_scatter_elements(const mp_cu_args *a, int64_t i)
{
    int r = (int)a->p[GE_RANK], ax = (int)a->p[GE_AXIS], red = (int)a->p[GE_RED];
    const int64_t *id = a->p + GE_DIMS, *dd = id + r;
    int64_t rem = i, base = 0, str = 1, own = 0, axstr = 1;
    int inside = 1;
    for (int k = r - 1; k >= 0; k--) {
        int64_t q = rem / dd[k], at = rem - q * dd[k];
        if (k == ax) own = at, axstr = str;
        else base += at * str, inside &= at < id[k];
        str *= id[k], rem = q;
    }
    double acc = mp_cu_ld(a->x[0], a->dt[0], i);
    for (int64_t t = 0; inside && t < id[ax]; t++) {
        int64_t at = base + t * axstr;
        if (mp_cu_elem_index(a, at, dd[ax]) != own) continue;
        acc = mp_cu_scatter_step(red, acc, mp_cu_ld(a->x[2], a->dt[2], at), a->dt[3]);
    }
    mp_cu_st(a->x[3], a->dt[3], i, acc);
}

/* ---- GatherND, ScatterND (runtime/cpu_tensor.c) ---------------------------------------------------- */

/* p: the data's rank r, the index depth q, batch_dims, the red(uction), the slice size (the data's
 * elements after dim batch_dims + q), the index rows per batch, then the data's dims[r] and strides[r].
 * Data, indices, updates and output are contiguous; a negative index counts from the end, one out of
 * range (the CPU fails) reads index 0 (GatherND) or hits nothing (ScatterND). */
enum { GN_RANK = 0, GN_Q, GN_BATCH, GN_RED, GN_SLICE, GN_PER, GN_DIMS };

/* Element offset in the data of index row `row` (batch bi), -1 when an index is out of range. */
MP_HD int64_t mp_cu_nd_row(const mp_cu_args *a, int64_t bi, int64_t row, int clamp)
{
    const int64_t *p = a->p, *dd = p + GN_DIMS, *xs = dd + p[GN_RANK];
    int64_t b = p[GN_BATCH], q = p[GN_Q], src = b ? bi * xs[b - 1] : 0;
    for (int64_t t = 0; t < q; t++) {
        int64_t v = mp_cu_ldi(a->x[1], a->dt[1], row * q + t), d = dd[b + t];
        if (v < 0) v += d;
        if (v < 0 || v >= d) {
            if (!clamp) return -1;
            v = 0;
        }
        src += v * xs[b + t];
    }
    return src;
}

/* data x0, indices x1 -> out x2 (any dtype), a thread per output element: (batch, index row, place
 * in the slice), as the CPU's row-by-row copies. */
MP_HD void k_gather_nd(const mp_cu_args *a, int64_t i)
{
    int64_t slice = a->p[GN_SLICE], row = i / slice, src = mp_cu_nd_row(a, row / a->p[GN_PER], row, 1) + i % slice;
    mp_cu_move(a->x[2], i, a->x[0], src, a->dt[0]);
}

/* batch_dims 0. data x0, indices x1, updates x2 -> out x3 (float32 / float64; may be data's bytes), a
 * thread per output element: the data element, then the update rows whose index hits its slice, in the
 * CPU's order (ascending rows), each step rounded to the output's dtype as the CPU's stores round it.
 * A gather, so no atomics; each thread scans every index row. */
MP_HD void k_scatter_nd(const mp_cu_args *a, int64_t i)
{
    int64_t slice = a->p[GN_SLICE], rows = a->p[GN_PER], e = i % slice, at = i - e;
    int red = (int)a->p[GN_RED];
    double acc = mp_cu_ld(a->x[0], a->dt[0], i);
    for (int64_t j = 0; j < rows; j++) {
        if (mp_cu_nd_row(a, 0, j, 0) != at) continue;
        acc = mp_cu_scatter_step(red, acc, mp_cu_ld(a->x[2], a->dt[2], j * slice + e), a->dt[3]);
    }
    mp_cu_st(a->x[3], a->dt[3], i, acc);
}

/* ---- RotaryEmbedding (runtime/cpu_misc.c mp_cpu_RotaryEmbedding) ---------------------------------- */

/* p: B, H, S, D (head size), R (rotary_embedding_dim), interleaved, flat (3-D [B, S, H D]), the
 * positions in the caches (position_ids given: the caches are [positions, R / 2], else [B, S, R / 2]).
 * X x0, cos x1, sin x2, position_ids x3 -> Y x4 (may be X's bytes), a thread per (b, h, s, k): k < R / 2
 * the pair k (rotated), else element R + k - R / 2 (passed through), so each thread reads only what it
 * writes. */
enum { RO_B = 0, RO_H, RO_S, RO_D, RO_R, RO_INTER, RO_FLAT, RO_NPOS };

MP_HD void k_rotary(const mp_cu_args *a, int64_t t)
{
    const int64_t *p = a->p;
    int64_t H = p[RO_H], S = p[RO_S], D = p[RO_D], half = p[RO_R] / 2, per = half + D - p[RO_R];
    int64_t k = t % per, s = (t / per) % S, h = (t / (per * S)) % H, b = t / (per * S * H);
    int64_t base = p[RO_FLAT] ? (b * S + s) * H * D + h * D : ((b * H + h) * S + s) * D;
    if (k >= half) {
        int64_t at = base + p[RO_R] + k - half;
        mp_cu_st(a->x[4], a->dt[4], at, mp_cu_ld(a->x[0], a->dt[0], at));
        return;
    }
    int64_t row = (b * S + s) * half;
    if (a->x[3]) {
        int64_t pos = mp_cu_ldi(a->x[3], a->dt[3], b * S + s);
        row = (pos < 0 || pos >= p[RO_NPOS] ? 0 : pos) * half; /* out of range: the CPU fails */
    }
    int64_t i1 = base + (p[RO_INTER] ? 2 * k : k), i2 = base + (p[RO_INTER] ? 2 * k + 1 : k + half);
    double c = mp_cu_ld(a->x[1], a->dt[1], row + k), sn = mp_cu_ld(a->x[2], a->dt[2], row + k);
    double x1 = mp_cu_ld(a->x[0], a->dt[0], i1), x2 = mp_cu_ld(a->x[0], a->dt[0], i2);
    mp_cu_st(a->x[4], a->dt[4], i1, c * x1 - sn * x2);
    mp_cu_st(a->x[4], a->dt[4], i2, sn * x1 + c * x2);
}

/* ---- Attention and its gradient (runtime/cpu_attention.c) ----------------------------------------- */

/* p: the kind, B, Hq, Hkv, Sq, D, Dv, P (past), T (P + the new keys), the views' 3-D flags (Q, K, V, Y or
 * dY: [B, S, H D]), causal, qk_matmul_output_mode, whether a mask is given, its dims[4] and strides[4]
 * broadcast to [B, Hq, Sq, T] (a last dim shorter than T masks the rest). f: scale, softcap.
 * x0 Q, x1 K, x2 V, x3 attn_mask (bool or Q's dtype), x4 past_key, x5 past_value, x6 nonpad_kv_seqlen,
 * x7 dY (the gradient), x8 the kind's output, x9 the workspace: per query row (b, h, i) its max, its sum
 * of exp and (the gradient) dot(P, dP), as attn_row and mp_cpu_AttentionGrad compute them.
 *   ATK_STATS   a thread per query row: the workspace's row
 *   ATK_Y       a thread per Y element (b, h, i, d): sum_j p_j V[j, d] in j order
 *   ATK_QK      a thread per qk_matmul_output element (b, h, i, j): capped, masked or p_j by the mode
 *   ATK_DQ      a thread per dQ element: sum_j g_j K[j, d], g_j = scale p_j (dP_j - dot) (softcap factor)
 *   ATK_DMASK   a thread per dMask element: p_j (dP_j - dot)
 *   ATK_DK, ATK_DV  a thread per dK / dV element (b, kv head, s, d): the sum over the query heads sharing
 *              the kv head, then the query rows, ascending (the CPU's order of additions into it) of
 *              g_j Q[i, d] / p_j dY[i, d], each term recomputed from the row's statistics: no atomics.
 * Every score is recomputed from Q and K (D terms), so ATK_Y costs T D per element and ATK_DK / ATK_DV
 * (Hq / Hkv) Sq T (D + Dv) per element: correctness first. */
enum { AT_KIND = 0, AT_B, AT_HQ, AT_HKV, AT_SQ, AT_D, AT_DV, AT_P, AT_T, AT_QFLAT, AT_KFLAT, AT_VFLAT, AT_YFLAT,
       AT_CAUSAL, AT_MODE, AT_HAS_MASK, AT_MDIMS, AT_MSTR = AT_MDIMS + 4, AT_COUNT = AT_MSTR + 4 };
enum { ATK_STATS = 0, ATK_Y, ATK_QK, ATK_DQ, ATK_DMASK, ATK_DK, ATK_DV };

MP_HD int64_t mp_cu_at_view(int flat, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s, int64_t d)
{
    return flat ? (b * S + s) * H * D + h * D + d : ((b * H + h) * S + s) * D + d;
}

/* Element (b, hk, j, d) of the present key (kv 0) or value (kv 1) cache: the past rows first. */
MP_HD double mp_cu_at_kv(const mp_cu_args *a, int kv, int64_t b, int64_t hk, int64_t j, int64_t d)
{
    const int64_t *p = a->p;
    int64_t P = p[AT_P], D = kv ? p[AT_DV] : p[AT_D];
    if (j < P) return mp_cu_ld(a->x[4 + kv], a->dt[4 + kv], ((b * p[AT_HKV] + hk) * P + j) * D + d);
    return mp_cu_ld(a->x[1 + kv], a->dt[1 + kv], mp_cu_at_view((int)p[AT_KFLAT + kv], p[AT_HKV], p[AT_T] - P, D, b, hk, j - P, d));
}

MP_HD int64_t mp_cu_at_yrow(const mp_cu_args *a, int64_t b, int64_t h, int64_t i)
{
    return mp_cu_at_view((int)a->p[AT_YFLAT], a->p[AT_HQ], a->p[AT_SQ], a->p[AT_DV], b, h, i, 0);
}

/* Score j of query row (b, h, i): returns the masked score, *capped the (softcapped) scaled Q.K^T. */
MP_HD double mp_cu_at_score(const mp_cu_args *a, int64_t b, int64_t h, int64_t i, int64_t j, double *capped)
{
    const int64_t *p = a->p;
    int64_t T = p[AT_T], P = p[AT_P], hk = h / (p[AT_HQ] / p[AT_HKV]);
    int64_t valid = a->x[6] ? mp_cu_ldi(a->x[6], a->dt[6], b) : T;
    int64_t offset = P > 0 || !a->x[6] ? P : valid - p[AT_SQ]; /* causal frontier: j <= i + offset */
    double dot = 0;
    for (int64_t d = 0; d < p[AT_D]; d++)
        dot += mp_cu_ld(a->x[0], a->dt[0], mp_cu_at_view((int)p[AT_QFLAT], p[AT_HQ], p[AT_SQ], p[AT_D], b, h, i, d)) * mp_cu_at_kv(a, 0, b, hk, j, d);
    double s = dot * a->f[0], bias = 0;
    if (a->f[1] > 0) s = a->f[1] * tanh(s / a->f[1]);
    *capped = s;
    if (p[AT_HAS_MASK]) {
        const int64_t *md = p + AT_MDIMS, *ms = p + AT_MSTR;
        if (j >= md[3]) {
            bias = -INFINITY;
        } else {
            int64_t ix[4] = {b, h, i, j}, at = 0;
            for (int o = 0; o < 4; o++) at += (md[o] == 1 ? 0 : ix[o]) * ms[o];
            double v = mp_cu_ld(a->x[3], a->dt[3], at);
            bias = a->dt[3] == MP_CU_BOOL ? (v != 0 ? 0 : -INFINITY) : v;
        }
    }
    if (p[AT_CAUSAL] && j > i + offset) bias = -INFINITY;
    if (j >= valid) bias = -INFINITY;
    return s + bias;
}

/* p_j of a row whose max and sum are m and sum (a fully masked row: zeros). */
MP_HD double mp_cu_at_prob(double masked, double m, double sum)
{
    double e = m == -INFINITY ? 0 : exp(masked - m);
    return sum > 0 ? e / sum : 0;
}

/* dP_j = dot(dY[row], V[j]). */
MP_HD double mp_cu_at_dp(const mp_cu_args *a, int64_t b, int64_t h, int64_t i, int64_t j)
{
    int64_t yrow = mp_cu_at_yrow(a, b, h, i), hk = h / (a->p[AT_HQ] / a->p[AT_HKV]);
    double dp = 0;
    for (int64_t d = 0; d < a->p[AT_DV]; d++) dp += mp_cu_ld(a->x[7], a->dt[7], yrow + d) * mp_cu_at_kv(a, 1, b, hk, j, d);
    return dp;
}

/* g_j of row (b, h, i) from its statistics st: p_j (dP_j - dot), and *gs that times the softcap's factor
 * and the scale (what dQ and dK sum); *pj p_j. */
MP_HD double mp_cu_at_g(const mp_cu_args *a, const double *st, int64_t b, int64_t h, int64_t i, int64_t j, double *gs, double *pj)
{
    double capped, pr = mp_cu_at_prob(mp_cu_at_score(a, b, h, i, j, &capped), st[0], st[1]);
    double g = pr * (mp_cu_at_dp(a, b, h, i, j) - st[2]), g2 = g;
    if (a->f[1] > 0) g2 *= 1 - (capped / a->f[1]) * (capped / a->f[1]);
    *gs = g2 * a->f[0], *pj = pr;
    return g;
}

MP_HD void k_attention(const mp_cu_args *a, int64_t t)
{
    const int64_t *p = a->p;
    int64_t Hq = p[AT_HQ], Sq = p[AT_SQ], D = p[AT_D], Dv = p[AT_DV], T = p[AT_T], P = p[AT_P];
    int64_t reps = Hq / p[AT_HKV], kind = p[AT_KIND];
    double *ws = (double *)a->x[9], capped, gs, pj;
    if (kind == ATK_STATS) {
        int64_t i = t % Sq, h = (t / Sq) % Hq, b = t / (Sq * Hq);
        double m = -INFINITY, sum = 0, dot = 0;
        for (int64_t j = 0; j < T; j++) m = fmax(m, mp_cu_at_score(a, b, h, i, j, &capped));
        for (int64_t j = 0; j < T; j++) {
            double ms = mp_cu_at_score(a, b, h, i, j, &capped);
            sum += m == -INFINITY ? 0 : exp(ms - m);
        }
        for (int64_t j = 0; a->x[7] && j < T; j++)
            dot += mp_cu_at_prob(mp_cu_at_score(a, b, h, i, j, &capped), m, sum) * mp_cu_at_dp(a, b, h, i, j);
        ws[3 * t] = m, ws[3 * t + 1] = sum, ws[3 * t + 2] = dot;
        return;
    }
    if (kind == ATK_Y || kind == ATK_DQ) { /* t over (b, h, i, d) */
        int64_t w = kind == ATK_Y ? Dv : D, d = t % w, i = (t / w) % Sq, h = (t / (w * Sq)) % Hq, b = t / (w * Sq * Hq);
        const double *st = ws + 3 * ((b * Hq + h) * Sq + i);
        double acc = 0;
        for (int64_t j = 0; j < T; j++) {
            if (kind == ATK_Y) {
                acc += mp_cu_at_prob(mp_cu_at_score(a, b, h, i, j, &capped), st[0], st[1]) * mp_cu_at_kv(a, 1, b, h / reps, j, d);
            } else {
                mp_cu_at_g(a, st, b, h, i, j, &gs, &pj);
                acc += gs * mp_cu_at_kv(a, 0, b, h / reps, j, d);
            }
        }
        int64_t at = kind == ATK_Y ? mp_cu_at_yrow(a, b, h, i) + d : mp_cu_at_view((int)p[AT_QFLAT], Hq, Sq, D, b, h, i, d);
        mp_cu_st(a->x[8], a->dt[8], at, acc);
        return;
    }
    if (kind == ATK_QK || kind == ATK_DMASK) { /* t over (b, h, i, j) */
        int64_t j = t % T, row = t / T, i = row % Sq, h = (row / Sq) % Hq, b = row / (Sq * Hq);
        const double *st = ws + 3 * row;
        double v;
        if (kind == ATK_DMASK) {
            v = mp_cu_at_g(a, st, b, h, i, j, &gs, &pj);
        } else {
            double ms = mp_cu_at_score(a, b, h, i, j, &capped);
            v = p[AT_MODE] <= 1 ? capped : p[AT_MODE] == 2 ? ms : mp_cu_at_prob(ms, st[0], st[1]);
        }
        mp_cu_st(a->x[8], a->dt[8], t, v);
        return;
    }
    /* ATK_DK, ATK_DV: t over (b, hk, s, d) of K's (V's) new rows */
    int64_t w = kind == ATK_DK ? D : Dv, Sk = T - P, d = t % w, s = (t / w) % Sk, hk = (t / (w * Sk)) % p[AT_HKV];
    int64_t b = t / (w * Sk * p[AT_HKV]), j = s + P;
    double acc = 0;
    for (int64_t h = hk * reps; h < (hk + 1) * reps; h++)
        for (int64_t i = 0; i < Sq; i++) {
            const double *st = ws + 3 * ((b * Hq + h) * Sq + i);
            if (kind == ATK_DK) {
                mp_cu_at_g(a, st, b, h, i, j, &gs, &pj);
                acc += gs * mp_cu_ld(a->x[0], a->dt[0], mp_cu_at_view((int)p[AT_QFLAT], Hq, Sq, D, b, h, i, d));
            } else {
                pj = mp_cu_at_prob(mp_cu_at_score(a, b, h, i, j, &capped), st[0], st[1]);
                acc += pj * mp_cu_ld(a->x[7], a->dt[7], mp_cu_at_yrow(a, b, h, i) + d);
            }
        }
    mp_cu_st(a->x[8], a->dt[8], mp_cu_at_view((int)p[AT_KFLAT + (kind == ATK_DV)], p[AT_HKV], Sk, w, b, hk, s, d), acc);
}

/* ---- GridSample, AffineGrid and their gradients (runtime/cpu_grid_sample.c) ---------------- */

/* p: kind, spatial rank r (1..MP_CU_MAXSP), mode (linear, nearest, cubic), padding (zeros, border,
 * reflection), align_corners, N, C, output points per batch entry, X's spatial dims[r].
 * GSK_FWD (x0 X, x1 grid, x2 Y): a thread per output element. GSK_DX (x0 dY, x1 grid, x2 the workspace,
 * x3 dX): a thread per (n, c) runs the CPU's scatter of its slice, points then taps ascending, into doubles,
 * then rounds the slice once. GSK_DGRID (x0 dY, x1 X, x2 grid, x3 dGrid): a thread per (n, point). */
enum { GS_KIND = 0, GS_R, GS_MODE, GS_PAD, GS_ALIGN, GS_N, GS_C, GS_NP, GS_DIMS };
enum { GSK_FWD = 0, GSK_DX, GSK_DGRID };
enum { GSM_LINEAR = 0, GSM_NEAREST, GSM_CUBIC };
enum { GSP_ZEROS = 0, GSP_BORDER, GSP_REFLECTION };

MP_HD double mp_cu_gs_reflect(double x, double lo, double hi, double *sign)
{
    double span = hi - lo;
    *sign = 1;
    if (span <= 0) {
        *sign = 0;
        return lo;
    }
    if (x >= lo && x <= hi) return x;
    double d = x < lo ? lo - x : x - hi, n = floor(d / span), rest = d - n * span;
    int even = fmod(n, 2.0) == 0;
    *sign = even ? -1 : 1;
    if (x < lo) return even ? lo + rest : hi - rest;
    return even ? hi - rest : lo + rest;
}

/* One dim's taps at normalized coordinate g, as cpu_grid_sample.c dim_taps: the count (0: none). */
MP_HD int mp_cu_gs_taps(const int64_t *p, double g, int64_t d, int64_t *idx, double *w, double *dw)
{
    int mode = (int)p[GS_MODE], pad = (int)p[GS_PAD], align = (int)p[GS_ALIGN];
    double x = align ? (g + 1) / 2 * (double)(d - 1) : ((g + 1) * (double)d - 1) / 2;
    double dxdg = align ? (double)(d - 1) / 2 : (double)d / 2;
    if (!isfinite(x)) return 0;
    if (mode == GSM_NEAREST) x = rint(x), dxdg = 0;
    double lo = align ? 0 : -0.5, hi = align ? (double)(d - 1) : (double)d - 0.5, sign;
    if (x < lo || x > hi) {
        if (pad == GSP_BORDER) x = x < 0 ? 0 : (double)(d - 1), dxdg = 0;
        else if (pad == GSP_REFLECTION) x = mp_cu_gs_reflect(x, lo, hi, &sign), dxdg *= sign;
        else if (x < -8 || x > (double)d + 8) return 0;
    }
    int n;
    int64_t base;
    if (mode == GSM_NEAREST) {
        base = (int64_t)x;
        n = 1, w[0] = 1, dw[0] = 0;
    } else {
        double f = floor(x), t = x - f;
        base = (int64_t)f;
        if (mode == GSM_LINEAR) {
            n = 2, w[0] = 1 - t, w[1] = t, dw[0] = -dxdg, dw[1] = dxdg;
        } else {
            const double a = -0.75;
            double s4[4] = {1 + t, t, 1 - t, 2 - t}, ds[4] = {1, 1, -1, -1};
            n = 4, base -= 1;
            for (int i = 0; i < 4; i++) {
                double y = s4[i], dc;
                if (i == 0 || i == 3) {
                    w[i] = ((a * y - 5 * a) * y + 8 * a) * y - 4 * a;
                    dc = ds[i] * ((3 * a * y - 10 * a) * y + 8 * a);
                } else {
                    w[i] = ((a + 2) * y - (a + 3)) * y * y + 1;
                    dc = ds[i] * (3 * (a + 2) * y - 2 * (a + 3)) * y;
                }
                dw[i] = dc * dxdg;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        int64_t j = base + i;
        if (pad == GSP_ZEROS) j = j >= 0 && j < d ? j : -1;
        else if (pad == GSP_BORDER) j = j < 0 ? 0 : j >= d ? d - 1 : j;
        else j = (int64_t)mp_cu_gs_reflect((double)j, lo, hi, &sign);
        if (j >= d) j = d - 1;
        idx[i] = j < 0 && pad != GSP_ZEROS ? 0 : j;
    }
    return n;
}

/* A point's taps per dim (grid's last axis lists the dims last first); 0 when a dim samples nothing. */
typedef struct mp_cu_gs_point {
    int r, n[MP_CU_MAXSP];
    int64_t idx[MP_CU_MAXSP][4];
    double w[MP_CU_MAXSP][4], dw[MP_CU_MAXSP][4];
} mp_cu_gs_point;

MP_HD int mp_cu_gs_point_of(const mp_cu_args *a, const void *grid, int gdt, int64_t n, int64_t q, mp_cu_gs_point *pt)
{
    const int64_t *p = a->p;
    int r = (int)p[GS_R];
    pt->r = r;
    for (int i = 0; i < r; i++) {
        double g = mp_cu_ld(grid, gdt, (n * p[GS_NP] + q) * r + (r - 1 - i));
        if (!(pt->n[i] = mp_cu_gs_taps(p, g, p[GS_DIMS + i], pt->idx[i], pt->w[i], pt->dw[i]))) return 0;
    }
    return 1;
}

/* Tap combination `at` (odometer, last dim fastest, as the CPU's): its offset in a slice (-1: zero),
 * the product of its weights in dim order and, when d >= 0, with dim d's weight differentiated. */
MP_HD int64_t mp_cu_gs_combo(const int64_t *p, const mp_cu_gs_point *pt, const int *at, int d, double *prod)
{
    int64_t off = 0;
    int zero = 0;
    double w = 1;
    for (int i = 0; i < pt->r; i++) {
        int64_t j = pt->idx[i][at[i]];
        zero |= j < 0;
        off = off * p[GS_DIMS + i] + (j < 0 ? 0 : j);
    }
    if (d < 0)
        for (int i = 0; i < pt->r; i++) w *= pt->w[i][at[i]];
    else {
        w = pt->dw[d][at[d]];
        for (int i = 0; i < pt->r; i++)
            if (i != d) w *= pt->w[i][at[i]];
    }
    *prod = w;
    return zero ? -1 : off;
}

MP_HD int mp_cu_gs_next(const mp_cu_gs_point *pt, int *at)
{
    int i = pt->r - 1;
    while (i >= 0 && ++at[i] == pt->n[i]) at[i--] = 0;
    return i >= 0;
}

MP_HD void k_grid_sample(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int64_t C = p[GS_C], np = p[GS_NP], in = 1;
    for (int d = 0; d < p[GS_R]; d++) in *= p[GS_DIMS + d];
    mp_cu_gs_point pt;
    int at[MP_CU_MAXSP] = {0};
    if (p[GS_KIND] == GSK_FWD) { /* i = (n C + c) np + q */
        int64_t q = i % np, c = (i / np) % C, n = i / (np * C);
        double s = 0, w;
        if (mp_cu_gs_point_of(a, a->x[1], a->dt[1], n, q, &pt))
            do {
                int64_t off = mp_cu_gs_combo(p, &pt, at, -1, &w);
                if (off >= 0) s += w * mp_cu_ld(a->x[0], a->dt[0], (n * C + c) * in + off);
            } while (mp_cu_gs_next(&pt, at));
        mp_cu_st(a->x[2], a->dt[2], i, s);
    } else if (p[GS_KIND] == GSK_DX) { /* i = n C + c: its slice of dX */
        int64_t n = i / C;
        double *acc = (double *)a->x[2] + i * in;
        for (int64_t k = 0; k < in; k++) acc[k] = 0;
        for (int64_t q = 0; q < np; q++) {
            if (!mp_cu_gs_point_of(a, a->x[1], a->dt[1], n, q, &pt)) continue;
            double d = mp_cu_ld(a->x[0], a->dt[0], i * np + q), w;
            for (int k = 0; k < pt.r; k++) at[k] = 0;
            do {
                int64_t off = mp_cu_gs_combo(p, &pt, at, -1, &w);
                if (off >= 0) acc[off] += d * w;
            } while (mp_cu_gs_next(&pt, at));
        }
        for (int64_t k = 0; k < in; k++) mp_cu_st(a->x[3], a->dt[3], i * in + k, acc[k]);
    } else { /* GSK_DGRID: i = n np + q */
        int64_t q = i % np, n = i / np;
        int r = (int)p[GS_R];
        double dg[MP_CU_MAXSP] = {0};
        if (mp_cu_gs_point_of(a, a->x[2], a->dt[2], n, q, &pt))
            for (int64_t c = 0; c < C; c++) {
                double d = mp_cu_ld(a->x[0], a->dt[0], (n * C + c) * np + q), w;
                for (int k = 0; k < r; k++) at[k] = 0;
                do {
                    int64_t off = mp_cu_gs_combo(p, &pt, at, -1, &w);
                    if (off < 0) continue;
                    double v = d * mp_cu_ld(a->x[1], a->dt[1], (n * C + c) * in + off);
                    for (int k = 0; k < r; k++) {
                        double dw;
                        mp_cu_gs_combo(p, &pt, at, k, &dw);
                        dg[k] += v * dw;
                    }
                } while (mp_cu_gs_next(&pt, at));
            }
        for (int k = 0; k < r; k++) mp_cu_st(a->x[3], a->dt[3], (n * np + q) * r + (r - 1 - k), dg[k]);
    }
}

/* p: kind, r (2, 3), align_corners, N, points per entry, the spatial sizes[r]. AGK_FWD (x0 theta, x1
 * grid): a thread per grid element; AGK_DTHETA (x0 dGrid, x1 dTheta): a thread per dTheta element, its
 * sum over the points in order. */
enum { AG_KIND = 0, AG_R, AG_ALIGN, AG_N, AG_NP, AG_DIMS };
enum { AGK_FWD = 0, AGK_DTHETA };

/* Coordinate j of the base point of flat spatial index pidx: (x, y[, z], 1), x along the last dim. */
MP_HD double mp_cu_ag_base(const int64_t *p, int64_t pidx, int j)
{
    int r = (int)p[AG_R];
    if (j == r) return 1;
    int dim = r - 1 - j; /* coordinate j runs along spatial dim r - 1 - j */
    for (int i = r - 1; i > dim; i--) pidx /= p[AG_DIMS + i];
    int64_t len = p[AG_DIMS + dim], k = pidx % len;
    if (p[AG_ALIGN]) return len > 1 ? -1 + 2.0 * (double)k / (double)(len - 1) : -1;
    return -1 + (2.0 * (double)k + 1) / (double)len;
}

MP_HD void k_affine_grid(const mp_cu_args *a, int64_t i)
{
    const int64_t *p = a->p;
    int r = (int)p[AG_R];
    int64_t np = p[AG_NP];
    if (p[AG_KIND] == AGK_FWD) { /* i = (n np + point) r + k */
        int64_t k = i % r, pt = (i / r) % np, n = i / (r * np);
        double v = 0;
        for (int j = 0; j <= r; j++) v += mp_cu_ld(a->x[0], a->dt[0], (n * r + k) * (r + 1) + j) * mp_cu_ag_base(p, pt, j);
        mp_cu_st(a->x[1], a->dt[1], i, v);
    } else { /* i = (n r + k) (r + 1) + j */
        int64_t j = i % (r + 1), k = (i / (r + 1)) % r, n = i / ((r + 1) * r);
        double acc = 0;
        for (int64_t pt = 0; pt < np; pt++)
            acc += mp_cu_ld(a->x[0], a->dt[0], (n * np + pt) * r + k) * mp_cu_ag_base(p, pt, (int)j);
        mp_cu_st(a->x[1], a->dt[1], i, acc);
    }
}

/* ---- which launches the GPU runs as a block per output ------------------------------------- */

/* True when the GPU runs this launch as a block of MP_CU_BLOCK threads per output, row or
 * channel (mp_cu_host.c can do the same, MP_CU_HOST_BLOCKS=1, so the tests check it). */
MP_HD int mp_cu_blocked(int op, const mp_cu_args *a)
{
    switch (op) {
    case MP_CU_REDUCE: return mp_cu_reduce_count(a) >= MP_CU_LONG_SUM;
    case MP_CU_BN_STATS: return 1;
    case MP_CU_SOFTMAX: case MP_CU_LN_ROWS: return a->p[1] >= MP_CU_LONG_ROW;
    case MP_CU_ADAFACTOR: return a->p[AF_PHASE] == AF_SQ;
    default: return 0;
    }
}

#endif
