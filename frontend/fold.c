/* fold.c - the scalar kernel table behind constant folding (see fold.h). */
#include <math.h>
#include <string.h>

#include "fold.h"

/* ---- scalar kernels ------------------------------------------------------
 * F: double (x, y, p), I: int64 wrapping (x, y, *bad), U: uint64 (x, y, *bad).
 * Unary kernels ignore y. *bad marks a result with no defined value. */

#define F(name, expr) \
    static double f_##name(double x, double y, const double *p) { (void)x, (void)y, (void)p; return (expr); }
#define I(name, expr) \
    static int64_t i_##name(int64_t x, int64_t y, bool *bad) { (void)x, (void)y, (void)bad; return (expr); }
#define U(name, expr) \
    static uint64_t u_##name(uint64_t x, uint64_t y, bool *bad) { (void)x, (void)y, (void)bad; return (expr); }

#define W(e) ((int64_t)(e)) /* back from uint64 arithmetic, which wraps instead of overflowing */
#define UX ((uint64_t)x)
#define UY ((uint64_t)y)

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double softplus(double x) { return x > 30 ? x : log1p(exp(x)); }

F(identity, x)
F(neg, -x)
F(abs, fabs(x))
F(sign, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
F(square, x * x)
F(not, x == 0)
F(ceil, ceil(x))
F(floor, floor(x))
F(round, nearbyint(x))
F(reciprocal, 1.0 / x)
F(sqrt, sqrt(x))
F(exp, exp(x))
F(log, log(x))
F(erf, erf(x))
F(sin, sin(x))
F(cos, cos(x))
F(tan, tan(x))
F(asin, asin(x))
F(acos, acos(x))
F(atan, atan(x))
F(sinh, sinh(x))
F(cosh, cosh(x))
F(tanh, tanh(x))
F(asinh, asinh(x))
F(acosh, acosh(x))
F(atanh, atanh(x))
F(isnan, isnan(x))
F(isinf, isinf(x) && (x < 0 ? p[0] != 0 : p[1] != 0))
F(relu, x > 0 ? x : 0)
F(sigmoid, sigmoid(x))
F(softplus, softplus(x))
F(softsign, x / (1 + fabs(x)))
F(mish, x * tanh(softplus(x)))
F(gelu, 0.5 * x * (1 + erf(x / sqrt(2.0))))
F(gelu_tanh, 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))))
F(hardswish, x * fmax(0, fmin(1, x / 6 + 0.5)))
F(elu, x < 0 ? p[0] * (exp(x) - 1) : x)
F(celu, fmax(0, x) + fmin(0, p[0] * (exp(x / p[0]) - 1)))
F(leakyrelu, x < 0 ? p[0] * x : x)
F(threshrelu, x > p[0] ? x : 0)
F(swish, x * sigmoid(p[0] * x))
F(selu, x > 0 ? p[1] * x : p[1] * (p[0] * exp(x) - p[0]))
F(hardsigmoid, fmax(0, fmin(1, p[0] * x + p[1])))
F(shrink, x < -p[1] ? x + p[0] : x > p[1] ? x - p[0] : 0)
F(add, x + y)
F(sub, x - y)
F(mul, x * y)
F(div, x / y)
F(fmod, fmod(x, y))
F(mod, fmod(x, y) != 0 && ((fmod(x, y) < 0) != (y < 0)) ? fmod(x, y) + y : fmod(x, y))
F(pow, pow(x, y))
F(max, isnan(x) || x > y ? x : y)
F(min, isnan(x) || x < y ? x : y)
F(eq, x == y)
F(lt, x < y)
F(le, x <= y)
F(gt, x > y)
F(ge, x >= y)
F(and, x != 0 && y != 0)
F(or, x != 0 || y != 0)
F(xor, (x != 0) != (y != 0))
F(prelu, x < 0 ? x * y : x)

static int64_t ipow(int64_t x, int64_t y, bool *bad)
{
    if (y < 0) {
        if (x == 0) *bad = true;
        return x == 1 ? 1 : x == -1 ? (y & 1 ? -1 : 1) : 0;
    }
    uint64_t r = 1, b = (uint64_t)x;
    for (; y; y >>= 1, b *= b)
        if (y & 1) r *= b;
    return W(r);
}

static int64_t imod(int64_t x, int64_t y, bool *bad)
{
    if (y == 0) return *bad = true, 0;
    int64_t r = y == -1 ? 0 : x % y;
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

I(identity, x)
I(neg, W(-UX))
I(abs, x < 0 ? W(-UX) : x)
I(sign, (x > 0) - (x < 0))
I(square, W(UX * UX))
I(not, x == 0)
I(bitnot, ~x)
I(relu, x > 0 ? x : 0)
I(add, W(UX + UY))
I(sub, W(UX - UY))
I(mul, W(UX * UY))
I(div, y == 0 ? (*bad = true, 0) : y == -1 ? W(-UX) : x / y)
I(mod, imod(x, y, bad))
I(fmod, y == 0 ? (*bad = true, 0) : y == -1 ? 0 : x % y)
I(pow, ipow(x, y, bad))
I(max, x > y ? x : y)
I(min, x < y ? x : y)
I(eq, x == y)
I(lt, x < y)
I(le, x <= y)
I(gt, x > y)
I(ge, x >= y)
I(and, x != 0 && y != 0)
I(or, x != 0 || y != 0)
I(xor, (x != 0) != (y != 0))
I(bitand, x & y)
I(bitor, x | y)
I(bitxor, x ^ y)
I(shl, y < 0 || y > 63 ? 0 : W(UX << y))
I(shr, y < 0 || y > 63 ? 0 : W(UX >> y))
I(prelu, x < 0 ? W(UX * UY) : x)

U(abs, x)
U(sign, x != 0)
U(relu, x)
U(div, y == 0 ? (*bad = true, 0) : x / y)
U(mod, y == 0 ? (*bad = true, 0) : x % y)
U(max, x > y ? x : y)
U(min, x < y ? x : y)
U(lt, x < y)
U(le, x <= y)
U(gt, x > y)
U(ge, x >= y)
U(prelu, x)

typedef struct fold_kernel {
    double (*f)(double, double, const double *);
    int64_t (*i)(int64_t, int64_t, bool *);
    uint64_t (*u)(uint64_t, uint64_t, bool *);
    bool bits; /* i is also right for uint64 (same bits either way) */
} fold_kernel;

#define K(op, f, i, u, bits) [MP_FOLD_##op] = {f, i, u, bits}
static const fold_kernel kernels[MP_FOLD_COUNT] = {
    K(IDENTITY, f_identity, i_identity, NULL, true),
    K(NEG, f_neg, i_neg, NULL, true),
    K(ABS, f_abs, i_abs, u_abs, false),
    K(SIGN, f_sign, i_sign, u_sign, false),
    K(SQUARE, f_square, i_square, NULL, true),
    K(NOT, f_not, i_not, NULL, true),
    K(BITNOT, NULL, i_bitnot, NULL, true),
    K(CEIL, f_ceil, i_identity, NULL, true),
    K(FLOOR, f_floor, i_identity, NULL, true),
    K(ROUND, f_round, i_identity, NULL, true),
    K(RECIPROCAL, f_reciprocal, NULL, NULL, false),
    K(SQRT, f_sqrt, NULL, NULL, false),
    K(EXP, f_exp, NULL, NULL, false),
    K(LOG, f_log, NULL, NULL, false),
    K(ERF, f_erf, NULL, NULL, false),
    K(SIN, f_sin, NULL, NULL, false),
    K(COS, f_cos, NULL, NULL, false),
    K(TAN, f_tan, NULL, NULL, false),
    K(ASIN, f_asin, NULL, NULL, false),
    K(ACOS, f_acos, NULL, NULL, false),
    K(ATAN, f_atan, NULL, NULL, false),
    K(SINH, f_sinh, NULL, NULL, false),
    K(COSH, f_cosh, NULL, NULL, false),
    K(TANH, f_tanh, NULL, NULL, false),
    K(ASINH, f_asinh, NULL, NULL, false),
    K(ACOSH, f_acosh, NULL, NULL, false),
    K(ATANH, f_atanh, NULL, NULL, false),
    K(ISNAN, f_isnan, NULL, NULL, false),
    K(ISINF, f_isinf, NULL, NULL, false),
    K(RELU, f_relu, i_relu, u_relu, false),
    K(SIGMOID, f_sigmoid, NULL, NULL, false),
    K(SOFTPLUS, f_softplus, NULL, NULL, false),
    K(SOFTSIGN, f_softsign, NULL, NULL, false),
    K(MISH, f_mish, NULL, NULL, false),
    K(GELU, f_gelu, NULL, NULL, false),
    K(GELU_TANH, f_gelu_tanh, NULL, NULL, false),
    K(HARDSWISH, f_hardswish, NULL, NULL, false),
    K(ELU, f_elu, NULL, NULL, false),
    K(CELU, f_celu, NULL, NULL, false),
    K(LEAKYRELU, f_leakyrelu, NULL, NULL, false),
    K(THRESHRELU, f_threshrelu, NULL, NULL, false),
    K(SWISH, f_swish, NULL, NULL, false),
    K(SELU, f_selu, NULL, NULL, false),
    K(HARDSIGMOID, f_hardsigmoid, NULL, NULL, false),
    K(SHRINK, f_shrink, NULL, NULL, false),
    K(ADD, f_add, i_add, NULL, true),
    K(SUB, f_sub, i_sub, NULL, true),
    K(MUL, f_mul, i_mul, NULL, true),
    K(DIV, f_div, i_div, u_div, false),
    K(MOD, f_mod, i_mod, u_mod, false),
    K(FMOD, f_fmod, i_fmod, u_mod, false),
    K(POW, f_pow, i_pow, NULL, false),
    K(MAX, f_max, i_max, u_max, false),
    K(MIN, f_min, i_min, u_min, false),
    K(EQ, f_eq, i_eq, NULL, true),
    K(LT, f_lt, i_lt, u_lt, false),
    K(LE, f_le, i_le, u_le, false),
    K(GT, f_gt, i_gt, u_gt, false),
    K(GE, f_ge, i_ge, u_ge, false),
    K(AND, f_and, i_and, NULL, true),
    K(OR, f_or, i_or, NULL, true),
    K(XOR, f_xor, i_xor, NULL, true),
    K(BITAND, NULL, i_bitand, NULL, true),
    K(BITOR, NULL, i_bitor, NULL, true),
    K(BITXOR, NULL, i_bitxor, NULL, true),
    K(SHL, NULL, i_shl, NULL, true),
    K(SHR, NULL, i_shr, NULL, true),
    K(PRELU, f_prelu, i_prelu, u_prelu, false),
};

/* ---- element access ------------------------------------------------------ */

bool mp_fold_dtype_ok(mp_dtype t)
{
    switch (t) {
    case MP_BOOL: case MP_UINT8: case MP_INT8: case MP_UINT16: case MP_INT16: case MP_INT32: case MP_INT64:
    case MP_UINT32: case MP_UINT64: case MP_FLOAT16: case MP_BFLOAT16: case MP_FLOAT: case MP_DOUBLE: return true;
    default: return false;
    }
}

/* Where an op computes: in double, int64 or uint64. */
typedef enum { DOM_F64, DOM_I64, DOM_U64 } fold_domain;

static fold_domain domain_of(int n, const mp_tensor *const *ts)
{
    fold_domain d = DOM_I64;
    for (int k = 0; k < n; k++) {
        if (mp_dtype_is_float(ts[k]->dtype)) return DOM_F64;
        if (ts[k]->dtype == MP_UINT64) d = DOM_U64;
    }
    return d;
}

/* Picks the kernel's domain for these inputs, falling back to double for
 * integer inputs of float-only kernels (Shrink on int8); -1: no kernel. */
static int kernel_domain(const fold_kernel *k, fold_domain d)
{
    if (d == DOM_U64 && !k->u && !(k->bits && k->i)) d = DOM_F64;
    if (d == DOM_I64 && !k->i) d = DOM_F64;
    return d == DOM_F64 && !k->f ? -1 : (int)d;
}

static void store_f64(mp_tensor *t, int64_t i, double v)
{
    if (t->dtype == MP_BOOL)
        mp_tensor_set_i64(t, i, v != 0);
    else
        mp_tensor_set_f64(t, i, v);
}

/* ---- broadcasting ---------------------------------------------------------- */

bool mp_fold_bcast_shape(int n, const mp_tensor *const *ts, int *rank, int64_t *dims)
{
    int r = 0;
    for (int k = 0; k < n; k++)
        if (ts[k] && ts[k]->rank > r) r = ts[k]->rank;
    if (r > MP_MAX_RANK) return false;
    for (int i = 0; i < r; i++) dims[i] = 1;
    for (int k = 0; k < n; k++) {
        if (!ts[k]) continue;
        for (int i = 0; i < ts[k]->rank; i++) {
            int64_t *o = &dims[r - ts[k]->rank + i], d = ts[k]->dims[i];
            if (d == 1 || d == *o) continue;
            if (*o != 1) return false;
            *o = d;
        }
    }
    *rank = r;
    return true;
}

int64_t mp_fold_bcast_index(const mp_tensor *t, int rank, const int64_t *dims, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int k = rank - 1, tk = t->rank - 1; tk >= 0; k--, tk--) {
        int64_t c = i % dims[k];
        i /= dims[k];
        if (t->dims[tk] != 1) idx += c * stride;
        stride *= t->dims[tk];
    }
    return idx;
}

/* A new tensor of the broadcast shape of ts, or NULL if too big or mismatched. */
static mp_tensor *bcast_result(mp_arena *a, int n, const mp_tensor *const *ts, mp_dtype out)
{
    int rank;
    int64_t dims[MP_MAX_RANK], numel = 1;
    if (!mp_fold_bcast_shape(n, ts, &rank, dims)) return NULL;
    for (int i = 0; i < rank; i++)
        if (!mp_mul_ok(numel, dims[i], &numel)) return NULL;
    if (numel > MP_FOLD_MAX_ELEMS) return NULL;
    return mp_tensor_new(a, out, rank, dims);
}

/* ---- public kernels ------------------------------------------------------------ */

mp_tensor *mp_fold_map(mp_arena *a, mp_fold_op op, int nin, const mp_tensor *const *in, const double *params,
                       mp_dtype out)
{
    static const double zeros[2];
    if (op < 0 || op >= MP_FOLD_COUNT || nin != (op >= MP_FOLD_FIRST_BINARY ? 2 : 1)) return NULL;
    if (!mp_fold_dtype_ok(out)) return NULL;
    for (int k = 0; k < nin; k++)
        if (!in[k] || !mp_fold_dtype_ok(in[k]->dtype)) return NULL;
    const fold_kernel *k = &kernels[op];
    int d = kernel_domain(k, domain_of(nin, in));
    if (d < 0) return NULL;
    mp_tensor *t = bcast_result(a, nin, in, out);
    if (!t) return NULL;
    const double *p = params ? params : zeros;
    const mp_tensor *x = in[0], *y = nin > 1 ? in[1] : in[0];
    bool bad = false;
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t ix = mp_fold_bcast_index(x, t->rank, t->dims, i), iy = mp_fold_bcast_index(y, t->rank, t->dims, i);
        if (d == DOM_F64) {
            store_f64(t, i, k->f(mp_tensor_get_f64(x, ix), mp_tensor_get_f64(y, iy), p));
        } else if (d == DOM_I64 || !k->u) {
            mp_tensor_set_i64(t, i, k->i(mp_tensor_get_i64(x, ix), mp_tensor_get_i64(y, iy), &bad));
        } else {
            uint64_t r = k->u((uint64_t)mp_tensor_get_i64(x, ix), (uint64_t)mp_tensor_get_i64(y, iy), &bad);
            mp_tensor_set_i64(t, i, (int64_t)r);
        }
    }
    return bad ? NULL : t;
}

bool mp_fold_scalar_i64(mp_fold_op op, int64_t x, int64_t y, int64_t *r)
{
    if (op < 0 || op >= MP_FOLD_COUNT || !kernels[op].i) return false;
    bool bad = false;
    *r = kernels[op].i(x, y, &bad);
    return !bad;
}

mp_tensor *mp_fold_cast(mp_arena *a, const mp_tensor *x, mp_dtype to)
{
    if (!mp_fold_dtype_ok(x->dtype) || !mp_fold_dtype_ok(to) || x->numel > MP_FOLD_MAX_ELEMS) return NULL;
    mp_tensor *t = mp_tensor_new(a, to, x->rank, x->dims);
    /* through double when either side is floating; integers stay exact */
    bool via_f64 = mp_dtype_is_float(x->dtype) || mp_dtype_is_float(to);
    for (int64_t i = 0; i < x->numel; i++) {
        if (via_f64)
            store_f64(t, i, mp_tensor_get_f64(x, i));
        else
            mp_tensor_set_i64(t, i, mp_tensor_get_i64(x, i));
    }
    return t;
}

static size_t elem_bytes(mp_dtype t)
{
    if (t == MP_STRING) return sizeof(char *);
    int bits = mp_dtype_bits(t);
    return bits > 0 && bits % 8 == 0 ? (size_t)bits / 8 : 0;
}

mp_tensor *mp_fold_where(mp_arena *a, const mp_tensor *cond, const mp_tensor *x, const mp_tensor *y)
{
    size_t es = elem_bytes(x->dtype);
    if (!es || x->dtype != y->dtype || !mp_fold_dtype_ok(cond->dtype)) return NULL;
    const mp_tensor *ts[3] = {cond, x, y};
    mp_tensor *t = bcast_result(a, 3, ts, x->dtype);
    if (!t) return NULL;
    for (int64_t i = 0; i < t->numel; i++) {
        bool c = mp_tensor_get_f64(cond, mp_fold_bcast_index(cond, t->rank, t->dims, i)) != 0;
        const mp_tensor *src = c ? x : y;
        int64_t j = mp_fold_bcast_index(src, t->rank, t->dims, i);
        memcpy((char *)t->data + (size_t)i * es, (const char *)src->data + (size_t)j * es, es);
    }
    return t;
}

/* ---- reductions ---------------------------------------------------------------- */

typedef enum { POST_NONE, POST_MEAN, POST_SQRT, POST_LOG } reduce_post;

/* pre-map, combining op, its identity (the result over no elements), final step */
static const struct {
    mp_fold_op pre, combine;
    double finit;
    int64_t iinit;
    reduce_post post;
} reducers[] = {
    [MP_REDUCE_SUM] = {MP_FOLD_IDENTITY, MP_FOLD_ADD, 0, 0, POST_NONE},
    [MP_REDUCE_MEAN] = {MP_FOLD_IDENTITY, MP_FOLD_ADD, 0, 0, POST_MEAN},
    [MP_REDUCE_PROD] = {MP_FOLD_IDENTITY, MP_FOLD_MUL, 1, 1, POST_NONE},
    [MP_REDUCE_MAX] = {MP_FOLD_IDENTITY, MP_FOLD_MAX, -INFINITY, INT64_MIN, POST_NONE},
    [MP_REDUCE_MIN] = {MP_FOLD_IDENTITY, MP_FOLD_MIN, INFINITY, INT64_MAX, POST_NONE},
    [MP_REDUCE_L1] = {MP_FOLD_ABS, MP_FOLD_ADD, 0, 0, POST_NONE},
    [MP_REDUCE_L2] = {MP_FOLD_SQUARE, MP_FOLD_ADD, 0, 0, POST_SQRT},
    [MP_REDUCE_SUMSQUARE] = {MP_FOLD_SQUARE, MP_FOLD_ADD, 0, 0, POST_NONE},
    [MP_REDUCE_LOGSUM] = {MP_FOLD_IDENTITY, MP_FOLD_ADD, 0, 0, POST_LOG},
    [MP_REDUCE_LOGSUMEXP] = {MP_FOLD_EXP, MP_FOLD_ADD, 0, 0, POST_LOG},
};

mp_tensor *mp_fold_reduce(mp_arena *a, mp_fold_reduce_kind kind, const mp_tensor *x, const bool *reduce,
                          bool keepdims)
{
    if (!mp_fold_dtype_ok(x->dtype) || x->rank > MP_MAX_RANK || x->numel > MP_FOLD_MAX_ELEMS) return NULL;
    const fold_kernel *pre = &kernels[reducers[kind].pre], *comb = &kernels[reducers[kind].combine];
    reduce_post post = reducers[kind].post;

    /* pass 1: output shape; ostride[k] is the output stride of input axis k (0 when reduced) */
    int64_t odims[MP_MAX_RANK] = {0}, ostride[MP_MAX_RANK], count = 1, s = 1;
    int orank = 0;
    for (int k = 0; k < x->rank; k++)
        if (!reduce[k] || keepdims) odims[orank++] = reduce[k] ? 1 : x->dims[k];
    for (int k = x->rank - 1; k >= 0; k--) {
        ostride[k] = reduce[k] ? 0 : s;
        if (reduce[k]) count *= x->dims[k];
        else s *= x->dims[k];
    }
    mp_tensor *t = mp_tensor_new(a, x->dtype, orank, odims);

    /* pass 2: accumulate; integers stay exact unless a float step follows */
    bool f64 = mp_dtype_is_float(x->dtype) || post != POST_NONE || x->dtype == MP_UINT64;
    if ((kind == MP_REDUCE_MAX || kind == MP_REDUCE_MIN) && count == 0 && !mp_dtype_is_float(x->dtype))
        return NULL; /* identity would be the dtype's extreme value */
    double *facc = f64 ? mp_arena_alloc(a, (size_t)(t->numel + 1) * sizeof *facc) : NULL;
    int64_t *iacc = f64 ? NULL : mp_arena_alloc(a, (size_t)(t->numel + 1) * sizeof *iacc);
    for (int64_t o = 0; o < t->numel; o++) {
        if (f64) facc[o] = reducers[kind].finit;
        else iacc[o] = reducers[kind].iinit;
    }
    bool bad = false;
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t o = 0, rest = i;
        for (int k = x->rank - 1; k >= 0; k--) {
            o += (rest % x->dims[k]) * ostride[k];
            rest /= x->dims[k];
        }
        if (f64)
            facc[o] = comb->f(facc[o], pre->f(mp_tensor_get_f64(x, i), 0, NULL), NULL);
        else
            iacc[o] = comb->i(iacc[o], pre->i(mp_tensor_get_i64(x, i), 0, &bad), &bad);
    }

    /* pass 3: final step and store */
    for (int64_t o = 0; o < t->numel; o++) {
        if (!f64) {
            mp_tensor_set_i64(t, o, iacc[o]);
            continue;
        }
        double v = facc[o];
        if (post == POST_MEAN) v /= (double)count;
        if (post == POST_SQRT) v = sqrt(v);
        if (post == POST_LOG) v = log(v);
        store_f64(t, o, v);
    }
    return bad ? NULL : t;
}
