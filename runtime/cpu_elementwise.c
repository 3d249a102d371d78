/* cpu_elementwise.c - unary math and activations, broadcasting binary
 * arithmetic, comparisons and logic, Where, Clip, Cast, the variadic
 * Sum/Mean/Max/Min.
 *
 * Loops are generated per element type from one expression by the type-list
 * macros below. Float math runs in double and rounds once into the output
 * (float32 and float64 share one expression); integer arithmetic wraps like
 * numpy (done in unsigned types, so no undefined overflow), and integer
 * division by zero gives 0 instead of a trap.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Type lists: X(C type, unsigned work type, dtype id, suffix, ...). */
#define T_FLOAT(X, ...) X(float, float, MP_FLOAT, f32, __VA_ARGS__) X(double, double, MP_DOUBLE, f64, __VA_ARGS__)
#define T_SINT(X, ...)                                                                                       \
    X(int8_t, uint32_t, MP_INT8, i8, __VA_ARGS__) X(int16_t, uint32_t, MP_INT16, i16, __VA_ARGS__)           \
    X(int32_t, uint32_t, MP_INT32, i32, __VA_ARGS__) X(int64_t, uint64_t, MP_INT64, i64, __VA_ARGS__)
#define T_UINT(X, ...)                                                                                       \
    X(uint8_t, uint32_t, MP_UINT8, u8, __VA_ARGS__) X(uint16_t, uint32_t, MP_UINT16, u16, __VA_ARGS__)       \
    X(uint32_t, uint32_t, MP_UINT32, u32, __VA_ARGS__) X(uint64_t, uint64_t, MP_UINT64, u64, __VA_ARGS__)
#define T_INT(X, ...) T_SINT(X, __VA_ARGS__) T_UINT(X, __VA_ARGS__)
#define T_NUM(X, ...) T_FLOAT(X, __VA_ARGS__) T_INT(X, __VA_ARGS__)
#define T_BOOL(X, ...) X(uint8_t, uint32_t, MP_BOOL, b, __VA_ARGS__)

/* ---- unary ----------------------------------------------------------------- */

/* y[i] = f(x[i]) with attribute parameters p. */
typedef void (*unary_fn)(const void *x, void *y, int64_t n, const double *p);

/* Defines OP_sfx for one type; EXPR sees x (the element, of type E; as double
 * `v` for floats) and p. OUT is the output element type. */
#define U1(T, U, D, S, OP, OUT, EXPR)                                                \
    static void OP##_##S(const void *px, void *py, int64_t n, const double *p)     \
    {                                                                              \
        typedef T E;                                                               \
        typedef U UE;                                                              \
        const E *xs = px;                                                          \
        OUT *y = py;                                                               \
        (void)p;                                                                   \
        (void)sizeof(UE);                                                          \
        for (int64_t i = 0; i < n; i++) {                                          \
            E x = xs[i];                                                           \
            double v = (double)x;                                                  \
            (void)v;                                                               \
            y[i] = (OUT)(EXPR);                                                    \
        }                                                                          \
    }
#define TAB(T, U, D, S, OP, ...) [D] = OP##_##S,

typedef struct unary_def {
    const char *name;
    unary_fn f[MP_DTYPE_COUNT];
} unary_def;

/* Runs a unary op whose output has the input's shape. */
static int run_unary(const mp_kargs *k, const unary_fn *tab, const double *p, mp_err *err)
{
    const mp_tensor *x = k->in[0];
    mp_tensor *y = k->out[0];
    if (!x || !y) return mp_fail(err, "missing input or output");
    if (x->numel != y->numel) return mp_fail(err, "output has %lld elements, input %lld", (long long)y->numel, (long long)x->numel);
    unary_fn f = tab[x->dtype];
    if (!f) return mp_kunsupported(err, "input dtype %s", mp_dtype_name(x->dtype));
    f(x->data, y->data, x->numel, p);
    return 0;
}

/* Float-only unary op with attributes read by INIT into double p[4]. */
#define UNARY_FLOAT(Op, EXPR, INIT)                                   \
    T_FLOAT(U1, u_##Op, E, EXPR)                                      \
    static const unary_fn u_##Op##_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_##Op)}; \
    int mp_cpu_##Op(const mp_kargs *k, mp_err *err)                   \
    {                                                                 \
        double p[4] = {0};                                            \
        INIT;                                                         \
        return run_unary(k, u_##Op##_tab, p, err);                    \
    }
#define ATTR(i, name, dflt) p[i] = mp_attr_float(k->node, name, dflt)
#define NOATTR (void)0

static double sigmoid(double v) { return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)); }
static double softplus(double v) { return (v > 0 ? v : 0) + log1p(exp(-fabs(v))); }

UNARY_FLOAT(Sqrt, sqrt(v), NOATTR)
UNARY_FLOAT(Exp, exp(v), NOATTR)
UNARY_FLOAT(Log, log(v), NOATTR)
UNARY_FLOAT(Reciprocal, 1 / v, NOATTR)
UNARY_FLOAT(Floor, floor(v), NOATTR)
UNARY_FLOAT(Ceil, ceil(v), NOATTR)
UNARY_FLOAT(Round, nearbyint(v), NOATTR) /* half to even under the default rounding mode */
UNARY_FLOAT(Sin, sin(v), NOATTR)
UNARY_FLOAT(Cos, cos(v), NOATTR)
UNARY_FLOAT(Tan, tan(v), NOATTR)
UNARY_FLOAT(Asin, asin(v), NOATTR)
UNARY_FLOAT(Acos, acos(v), NOATTR)
UNARY_FLOAT(Atan, atan(v), NOATTR)
UNARY_FLOAT(Sinh, sinh(v), NOATTR)
UNARY_FLOAT(Cosh, cosh(v), NOATTR)
UNARY_FLOAT(Asinh, asinh(v), NOATTR)
UNARY_FLOAT(Acosh, acosh(v), NOATTR)
UNARY_FLOAT(Atanh, atanh(v), NOATTR)
UNARY_FLOAT(Sigmoid, sigmoid(v), NOATTR)
UNARY_FLOAT(Tanh, tanh(v), NOATTR)
UNARY_FLOAT(Erf, erf(v), NOATTR)
UNARY_FLOAT(Softsign, v / (1 + fabs(v)), NOATTR)
UNARY_FLOAT(Softplus, softplus(v), NOATTR)
UNARY_FLOAT(Mish, v * tanh(softplus(v)), NOATTR)
UNARY_FLOAT(HardSwish, v * fmax(0, fmin(1, v / 6 + 0.5)), NOATTR)
UNARY_FLOAT(Elu, v >= 0 ? v : p[0] * expm1(v), ATTR(0, "alpha", 1.0f))
UNARY_FLOAT(Celu, fmax(0, v) + fmin(0, p[0] * expm1(v / p[0])), ATTR(0, "alpha", 1.0f))
UNARY_FLOAT(Selu, v > 0 ? p[1] * v : p[1] * p[0] * expm1(v),
            ATTR(0, "alpha", 1.67326319217681884765625f); ATTR(1, "gamma", 1.05070102214813232421875f))
UNARY_FLOAT(LeakyRelu, v >= 0 ? v : p[0] * v, ATTR(0, "alpha", 0.01f))
UNARY_FLOAT(HardSigmoid, fmax(0, fmin(1, p[0] * v + p[1])), ATTR(0, "alpha", 0.2f); ATTR(1, "beta", 0.5f))
UNARY_FLOAT(ThresholdedRelu, v > p[0] ? v : 0, ATTR(0, "alpha", 1.0f))
UNARY_FLOAT(Swish, v * sigmoid(p[0] * v), ATTR(0, "alpha", 1.0f))
UNARY_FLOAT(Gelu,
            p[0] ? 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))) : 0.5 * v * (1 + erf(v * M_SQRT1_2)),
            p[0] = !strcmp(mp_attr_str(k->node, "approximate", "none"), "tanh"))

/* Ops on floats and integers: separate expressions where signedness matters. */
T_FLOAT(U1, u_absf, E, fabs(v))
T_SINT(U1, u_abss, E, x < 0 ? (E)(0 - (UE)x) : x)
T_UINT(U1, u_absu, E, x)
static const unary_fn abs_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_absf) T_SINT(TAB, u_abss) T_UINT(TAB, u_absu)};
int mp_cpu_Abs(const mp_kargs *k, mp_err *err) { return run_unary(k, abs_tab, NULL, err); }

T_FLOAT(U1, u_negf, E, -v)
T_SINT(U1, u_negs, E, (E)(0 - (UE)x))
static const unary_fn neg_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_negf) T_SINT(TAB, u_negs)};
int mp_cpu_Neg(const mp_kargs *k, mp_err *err) { return run_unary(k, neg_tab, NULL, err); }

T_FLOAT(U1, u_signf, E, v > 0 ? 1 : v < 0 ? -1 : v)
T_SINT(U1, u_signs, E, x > 0 ? 1 : x < 0 ? -1 : 0)
T_UINT(U1, u_signu, E, x > 0 ? 1 : 0)
static const unary_fn sign_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_signf) T_SINT(TAB, u_signs) T_UINT(TAB, u_signu)};
int mp_cpu_Sign(const mp_kargs *k, mp_err *err) { return run_unary(k, sign_tab, NULL, err); }

T_FLOAT(U1, u_reluf, E, v < 0 ? 0 : v) /* keeps NaN, like numpy's maximum */
T_SINT(U1, u_relus, E, x < 0 ? 0 : x)
static const unary_fn relu_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_reluf) T_SINT(TAB, u_relus)};
int mp_cpu_Relu(const mp_kargs *k, mp_err *err) { return run_unary(k, relu_tab, NULL, err); }

/* Shrink: p = {bias, lambd}; defined for every numeric type. */
T_FLOAT(U1, u_shrinkf, E, v < -p[1] ? v + p[0] : v > p[1] ? v - p[0] : 0)
T_INT(U1, u_shrinki, E, v < -p[1] ? v + p[0] : v > p[1] ? v - p[0] : 0)
static const unary_fn shrink_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_shrinkf) T_INT(TAB, u_shrinki)};
int mp_cpu_Shrink(const mp_kargs *k, mp_err *err)
{
    double p[2] = {mp_attr_float(k->node, "bias", 0.0f), mp_attr_float(k->node, "lambd", 0.5f)};
    return run_unary(k, shrink_tab, p, err);
}

T_BOOL(U1, u_not, uint8_t, !x)
static const unary_fn not_tab[MP_DTYPE_COUNT] = {T_BOOL(TAB, u_not)};
int mp_cpu_Not(const mp_kargs *k, mp_err *err) { return run_unary(k, not_tab, NULL, err); }

T_INT(U1, u_bnot, E, (E)~(UE)x)
static const unary_fn bnot_tab[MP_DTYPE_COUNT] = {T_INT(TAB, u_bnot)};
int mp_cpu_BitwiseNot(const mp_kargs *k, mp_err *err) { return run_unary(k, bnot_tab, NULL, err); }

T_FLOAT(U1, u_isnan, uint8_t, isnan(v))
static const unary_fn isnan_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_isnan)};
int mp_cpu_IsNaN(const mp_kargs *k, mp_err *err) { return run_unary(k, isnan_tab, NULL, err); }

/* p = {detect_negative, detect_positive} */
T_FLOAT(U1, u_isinf, uint8_t, isinf(v) && ((v < 0 && p[0]) || (v > 0 && p[1])))
static const unary_fn isinf_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, u_isinf)};
int mp_cpu_IsInf(const mp_kargs *k, mp_err *err)
{
    double p[2] = {(double)mp_attr_int(k->node, "detect_negative", 1), (double)mp_attr_int(k->node, "detect_positive", 1)};
    return run_unary(k, isinf_tab, p, err);
}

/* ---- binary, broadcasting ------------------------------------------------- */

/* y[i] = f(a[i*sa], b[i*sb]) for one output row. */
typedef void (*row2_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *y, int64_t n);

/* EXPR sees x and z (elements of type E), UE (the unsigned work type) and
 * p (a row-constant double, e.g. fmod). */
#define R2(T, U, D, S, OP, OUT, EXPR)                                                          \
    static void OP##_##S(const void *pa, int64_t sa, const void *pb, int64_t sb, void *py, int64_t n) \
    {                                                                                          \
        typedef T E;                                                                           \
        typedef U UE;                                                                          \
        const E *as = pa, *bs = pb;                                                            \
        OUT *y = py;                                                                           \
        (void)sizeof(UE);                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                      \
            E x = as[i * sa], z = bs[i * sb];                                                  \
            y[i] = (OUT)(EXPR);                                                                \
        }                                                                                      \
    }

/* Applies f over y = broadcast(a, b); a may be y itself (in-place fold). */
static int run_binary(const mp_tensor *a, const mp_tensor *b, mp_tensor *y, row2_fn f, mp_err *err)
{
    mp_bcast bc;
    if (mp_bcast_init(&bc, y, 2, (const mp_tensor *[]){a, b}, err)) return -1;
    size_t ea = mp_elem_size(a->dtype), eb = mp_elem_size(b->dtype), ey = mp_elem_size(y->dtype);
    for (int64_t r = 0; r < bc.rows; r++, mp_bcast_next(&bc))
        f((const char *)a->data + bc.off[0] * (int64_t)ea, bc.step[0], (const char *)b->data + bc.off[1] * (int64_t)eb,
          bc.step[1], (char *)y->data + r * bc.len * (int64_t)ey, bc.len);
    return 0;
}

/* A binary op whose inputs share one dtype. */
static int binary_tab(const mp_kargs *k, const row2_fn *tab, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y) return mp_fail(err, "missing input or output");
    if (a->dtype != b->dtype) return mp_fail(err, "inputs have dtypes %s and %s", mp_dtype_name(a->dtype), mp_dtype_name(b->dtype));
    row2_fn f = tab[a->dtype];
    if (!f) return mp_kunsupported(err, "input dtype %s", mp_dtype_name(a->dtype));
    return run_binary(a, b, y, f, err);
}

#define BINARY(Op, tab) \
    int mp_cpu_##Op(const mp_kargs *k, mp_err *err) { return binary_tab(k, tab, err); }

/* Wrapping arithmetic: for floats UE is E, so one expression serves all. */
T_NUM(R2, b_add, E, (UE)x + (UE)z)
T_NUM(R2, b_sub, E, (UE)x - (UE)z)
T_NUM(R2, b_mul, E, (UE)x * (UE)z)
static const row2_fn add_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_add)};
static const row2_fn sub_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_sub)};
static const row2_fn mul_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_mul)};
BINARY(Add, add_tab)
BINARY(Sub, sub_tab)
BINARY(Mul, mul_tab)

/* Integer division truncates (numpy's divide then astype); x / 0 gives 0 and
 * MIN / -1 wraps instead of trapping. */
T_FLOAT(R2, b_divf, E, x / z)
T_SINT(R2, b_divs, E, z == 0 ? 0 : z == -1 ? (E)(0 - (UE)x) : x / z)
T_UINT(R2, b_divu, E, z == 0 ? 0 : x / z)
static const row2_fn div_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_divf) T_SINT(TAB, b_divs) T_UINT(TAB, b_divu)};
BINARY(Div, div_tab)

/* Mod: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's (C). */
static double mod_py(double x, double z)
{
    double r = fmod(x, z);
    if (r != 0 && ((r < 0) != (z < 0))) r += z;
    return r;
}
T_FLOAT(R2, b_fmodf, E, fmod(x, z))
T_FLOAT(R2, b_modf, E, mod_py(x, z))
T_SINT(R2, b_fmods, E, z == 0 || z == -1 ? 0 : x % z)
T_SINT(R2, b_mods, E, z == 0 || z == -1 ? 0 : (x % z != 0 && ((x % z < 0) != (z < 0))) ? x % z + z : x % z)
T_UINT(R2, b_modu, E, z == 0 ? 0 : x % z)
static const row2_fn fmod_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_fmodf) T_SINT(TAB, b_fmods) T_UINT(TAB, b_modu)};
static const row2_fn mod_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_modf) T_SINT(TAB, b_mods) T_UINT(TAB, b_modu)};
int mp_cpu_Mod(const mp_kargs *k, mp_err *err)
{
    return binary_tab(k, mp_attr_int(k->node, "fmod", 0) ? fmod_tab : mod_tab, err);
}

/* Max/Min propagate NaN like numpy's maximum/minimum. */
T_FLOAT(R2, b_maxf, E, x != x || x > z ? x : z)
T_FLOAT(R2, b_minf, E, x != x || x < z ? x : z)
T_INT(R2, b_maxi, E, x > z ? x : z)
T_INT(R2, b_mini, E, x < z ? x : z)
static const row2_fn max_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_maxf) T_INT(TAB, b_maxi)};
static const row2_fn min_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_minf) T_INT(TAB, b_mini)};

/* PRelu: slope z broadcast to x. */
T_FLOAT(R2, b_preluf, E, x < 0 ? z * x : x)
T_SINT(R2, b_prelus, E, x < 0 ? (E)((UE)z * (UE)x) : x)
static const row2_fn prelu_tab[MP_DTYPE_COUNT] = {T_FLOAT(TAB, b_preluf) T_SINT(TAB, b_prelus)};
int mp_cpu_PRelu(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *s = mp_kin(k, 1);
    /* Before opset 7 a 1-D slope of C entries was per channel (axis 1). */
    if (k->opset < 7 && x && s && s->rank == 1 && x->rank >= 2 && s->dims[0] == x->dims[1] && s->dims[0] != x->dims[x->rank - 1]) {
        int64_t dims[MP_MAX_RANK];
        dims[0] = s->dims[0];
        for (int i = 1; i < x->rank - 1; i++) dims[i] = 1;
        mp_tensor view = *s;
        view.rank = x->rank - 1;
        view.dims = dims;
        const mp_tensor *in[2] = {x, &view};
        mp_kargs k2 = *k;
        k2.in = in;
        return binary_tab(&k2, prelu_tab, err);
    }
    return binary_tab(k, prelu_tab, err);
}

/* Comparisons and logic give bool. */
T_NUM(R2, b_eq, uint8_t, x == z)
T_BOOL(R2, b_eqb, uint8_t, x == z)
T_NUM(R2, b_lt, uint8_t, x < z)
T_NUM(R2, b_le, uint8_t, x <= z)
T_NUM(R2, b_gt, uint8_t, x > z)
T_NUM(R2, b_ge, uint8_t, x >= z)
static const row2_fn eq_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_eq) T_BOOL(TAB, b_eqb)};
static const row2_fn lt_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_lt)};
static const row2_fn le_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_le)};
static const row2_fn gt_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_gt)};
static const row2_fn ge_tab[MP_DTYPE_COUNT] = {T_NUM(TAB, b_ge)};
BINARY(Equal, eq_tab)
BINARY(Less, lt_tab)
BINARY(LessOrEqual, le_tab)
BINARY(Greater, gt_tab)
BINARY(GreaterOrEqual, ge_tab)

T_BOOL(R2, b_and, uint8_t, x && z)
T_BOOL(R2, b_or, uint8_t, x || z)
T_BOOL(R2, b_xor, uint8_t, !x != !z)
static const row2_fn and_tab[MP_DTYPE_COUNT] = {T_BOOL(TAB, b_and)};
static const row2_fn or_tab[MP_DTYPE_COUNT] = {T_BOOL(TAB, b_or)};
static const row2_fn xor_tab[MP_DTYPE_COUNT] = {T_BOOL(TAB, b_xor)};
BINARY(And, and_tab)
BINARY(Or, or_tab)
BINARY(Xor, xor_tab)

T_INT(R2, b_band, E, (UE)x & (UE)z)
T_INT(R2, b_bor, E, (UE)x | (UE)z)
T_INT(R2, b_bxor, E, (UE)x ^ (UE)z)
static const row2_fn band_tab[MP_DTYPE_COUNT] = {T_INT(TAB, b_band)};
static const row2_fn bor_tab[MP_DTYPE_COUNT] = {T_INT(TAB, b_bor)};
static const row2_fn bxor_tab[MP_DTYPE_COUNT] = {T_INT(TAB, b_bxor)};
BINARY(BitwiseAnd, band_tab)
BINARY(BitwiseOr, bor_tab)
BINARY(BitwiseXor, bxor_tab)

/* BitShift (unsigned types): shifting by the width or more gives 0. */
T_UINT(R2, b_shl, E, z >= sizeof(E) * 8 ? 0 : (E)((UE)x << z))
T_UINT(R2, b_shr, E, z >= sizeof(E) * 8 ? 0 : (E)(x >> z))
static const row2_fn shl_tab[MP_DTYPE_COUNT] = {T_UINT(TAB, b_shl)};
static const row2_fn shr_tab[MP_DTYPE_COUNT] = {T_UINT(TAB, b_shr)};
int mp_cpu_BitShift(const mp_kargs *k, mp_err *err)
{
    const char *dir = mp_attr_str(k->node, "direction", "");
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")) return mp_fail(err, "direction must be LEFT or RIGHT, got '%s'", dir);
    return binary_tab(k, !strcmp(dir, "LEFT") ? shl_tab : shr_tab, err);
}

/* Pow allows different base and exponent types (opset 12): computed in double. */
int mp_cpu_Pow(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y) return mp_fail(err, "missing input or output");
    if (!mp_elem_size(a->dtype) || !mp_elem_size(b->dtype) || a->dtype == MP_BOOL)
        return mp_kunsupported(err, "dtypes %s, %s", mp_dtype_name(a->dtype), mp_dtype_name(b->dtype));
    mp_bcast bc;
    if (mp_bcast_init(&bc, y, 2, (const mp_tensor *[]){a, b}, err)) return -1;
    bool ints = mp_dtype_is_int(y->dtype) && mp_dtype_is_int(b->dtype);
    for (int64_t r = 0; r < bc.rows; r++, mp_bcast_next(&bc))
        for (int64_t i = 0; i < bc.len; i++) {
            int64_t ia = bc.off[0] + i * bc.step[0], ib = bc.off[1] + i * bc.step[1], iy = r * bc.len + i;
            if (ints) { /* exact integer power by squaring, wrapping */
                uint64_t base = (uint64_t)mp_tensor_get_i64(a, ia), acc = 1;
                int64_t e = mp_tensor_get_i64(b, ib);
                for (; e > 0; e >>= 1, base *= base)
                    if (e & 1) acc *= base;
                mp_tensor_set_i64(y, iy, e < 0 ? 0 : (int64_t)acc);
            } else {
                mp_tensor_set_f64(y, iy, pow(mp_tensor_get_f64(a, ia), mp_tensor_get_f64(b, ib)));
            }
        }
    return 0;
}

/* ---- variadic: Sum, Mean, Max, Min ---------------------------------------- */

/* y = in0 op in1 op ... folded left into y (each step broadcasts). */
static int run_variadic(const mp_kargs *k, const row2_fn *tab, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y || k->nin < 1 || !k->in[0]) return mp_fail(err, "needs at least one input");
    const mp_tensor *first = k->in[0];
    for (int i = 0; i < k->nin; i++)
        if (!k->in[i] || k->in[i]->dtype != y->dtype) return mp_fail(err, "input %d missing or of another dtype", i);
    row2_fn f = tab[y->dtype];
    if (!f) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    /* y = broadcast(in0) */
    mp_bcast bc;
    if (mp_bcast_init(&bc, y, 1, &first, err)) return -1;
    size_t es = mp_elem_size(y->dtype);
    for (int64_t r = 0; r < bc.rows; r++, mp_bcast_next(&bc)) {
        const char *s = (const char *)first->data + bc.off[0] * (int64_t)es;
        char *d = (char *)y->data + r * bc.len * (int64_t)es;
        for (int64_t i = 0; i < bc.len; i++) memcpy(d + i * (int64_t)es, s + i * bc.step[0] * (int64_t)es, es);
    }
    for (int i = 1; i < k->nin; i++)
        if (run_binary(y, k->in[i], y, f, err)) return -1;
    return 0;
}

int mp_cpu_Sum(const mp_kargs *k, mp_err *err) { return run_variadic(k, add_tab, err); }
int mp_cpu_Max(const mp_kargs *k, mp_err *err) { return run_variadic(k, max_tab, err); }
int mp_cpu_Min(const mp_kargs *k, mp_err *err) { return run_variadic(k, min_tab, err); }

int mp_cpu_Mean(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (y && !mp_dtype_is_float(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    if (run_variadic(k, add_tab, err)) return -1;
    for (int64_t i = 0; i < y->numel; i++) mp_tensor_set_f64(y, i, mp_tensor_get_f64(y, i) / k->nin);
    return 0;
}

/* ---- Where ---------------------------------------------------------------- */

int mp_cpu_Where(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *c = mp_kin(k, 0), *a = mp_kin(k, 1), *b = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!c || !a || !b || !y) return mp_fail(err, "missing input or output");
    if (c->dtype != MP_BOOL) return mp_fail(err, "condition must be bool, got %s", mp_dtype_name(c->dtype));
    if (a->dtype != y->dtype || b->dtype != y->dtype) return mp_fail(err, "X, Y and output dtypes differ");
    size_t es = mp_elem_size(y->dtype);
    if (!es) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    mp_bcast bc;
    if (mp_bcast_init(&bc, y, 3, (const mp_tensor *[]){c, a, b}, err)) return -1;
    const uint8_t *cs = c->data;
    for (int64_t r = 0; r < bc.rows; r++, mp_bcast_next(&bc)) {
        char *d = (char *)y->data + r * bc.len * (int64_t)es;
        for (int64_t i = 0; i < bc.len; i++) {
            bool take = cs[bc.off[0] + i * bc.step[0]];
            const char *s = take ? (const char *)a->data + (bc.off[1] + i * bc.step[1]) * (int64_t)es
                                 : (const char *)b->data + (bc.off[2] + i * bc.step[2]) * (int64_t)es;
            memcpy(d + i * (int64_t)es, s, es);
        }
    }
    return 0;
}

/* ---- Clip ---------------------------------------------------------------------- */

/* y = min(max(x, lo), hi), like numpy's clip (so lo > hi gives hi). */
#define CLIP(T, U, D, S, ...)                                                        \
    static void clip_##S(const void *px, void *py, int64_t n, const void *plo, const void *phi) \
    {                                                                                \
        const T *x = px;                                                             \
        T *y = py, lo, hi;                                                           \
        if (plo) memcpy(&lo, plo, sizeof lo);                                        \
        if (phi) memcpy(&hi, phi, sizeof hi);                                        \
        for (int64_t i = 0; i < n; i++) {                                            \
            T v = x[i];                                                              \
            if (plo && v < lo) v = lo;                                               \
            if (phi && v > hi) v = hi;                                               \
            y[i] = v;                                                                \
        }                                                                            \
    }
T_NUM(CLIP, 0)
typedef void (*clip_fn)(const void *, void *, int64_t, const void *, const void *);
#define CLIP_TAB(T, U, D, S, ...) [D] = clip_##S,
static const clip_fn clip_tab[MP_DTYPE_COUNT] = {T_NUM(CLIP_TAB, 0)};

int mp_cpu_Clip(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || x->numel != y->numel || x->dtype != y->dtype) return mp_fail(err, "output does not match the input");
    clip_fn f = clip_tab[x->dtype];
    if (!f) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    union { float f; double d; char b[8]; } lo, hi;
    const void *plo = NULL, *phi = NULL;
    if (k->opset < 11) { /* bounds are float attributes */
        const mp_attr *a = mp_node_attr(k->node, "min"), *b = mp_node_attr(k->node, "max");
        if (x->dtype != MP_FLOAT && x->dtype != MP_DOUBLE) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
        if (a) {
            if (x->dtype == MP_FLOAT) lo.f = a->f; else lo.d = a->f;
            plo = &lo;
        }
        if (b) {
            if (x->dtype == MP_FLOAT) hi.f = b->f; else hi.d = b->f;
            phi = &hi;
        }
    } else {
        const mp_tensor *a = mp_kin(k, 1), *b = mp_kin(k, 2);
        if ((a && (a->dtype != x->dtype || a->numel != 1)) || (b && (b->dtype != x->dtype || b->numel != 1)))
            return mp_fail(err, "min and max must be scalars of the input's dtype");
        plo = a ? a->data : NULL;
        phi = b ? b->data : NULL;
    }
    f(x->data, y->data, x->numel, plo, phi);
    return 0;
}

/* ---- Cast, CastLike ------------------------------------------------------- */

/* Element i of an fp32 / fp16 / bf16 tensor as fp32 (exact), and stored (rounded). */
static float f32_at(const mp_tensor *t, int64_t i)
{
    if (t->dtype == MP_FLOAT) return ((const float *)t->data)[i];
    uint16_t h = ((const uint16_t *)t->data)[i];
    return t->dtype == MP_BFLOAT16 ? mp_bf16_to_f32(h) : mp_f16_to_f32(h);
}

static void put_f32(mp_tensor *t, int64_t i, float v)
{
    if (t->dtype == MP_FLOAT) ((float *)t->data)[i] = v;
    else ((uint16_t *)t->data)[i] = t->dtype == MP_BFLOAT16 ? mp_f32_to_bf16(v) : mp_f32_to_f16(v);
}

/* Converts x into y's dtype: integers and bools exactly through int64, the
 * rest through double (float -> int truncates toward zero, saturating). */
static int cast_into(const mp_tensor *x, mp_tensor *y, mp_err *err)
{
    if (x->numel != y->numel) return mp_fail(err, "output has %lld elements, input %lld", (long long)y->numel, (long long)x->numel);
    mp_dtype s = x->dtype, d = y->dtype;
    bool s_ok = mp_elem_size(s) && s != MP_COMPLEX64 && s != MP_COMPLEX128 && s < MP_FLOAT8E4M3FN;
    bool d_ok = mp_elem_size(d) && d != MP_COMPLEX64 && d != MP_COMPLEX128 && d < MP_FLOAT8E4M3FN;
    if (!s_ok || !d_ok) return mp_kunsupported(err, "cast from %s to %s", mp_dtype_name(s), mp_dtype_name(d));
    if (s == d) return mp_copy_tensor(x, y, err);
    bool s_int = mp_dtype_is_int(s) || s == MP_BOOL;
    bool s_f32 = s == MP_FLOAT || mp_dtype_is_half(s), d_f32 = d == MP_FLOAT || mp_dtype_is_half(d);
    if (s_f32 && d_f32) { /* fp32, fp16, bf16: through fp32 (exact), rounded once (cpu_half.c) */
        for (int64_t i = 0; i < x->numel; i++) put_f32(y, i, f32_at(x, i));
    } else if (s == MP_FLOAT && d == MP_DOUBLE) {
        for (int64_t i = 0; i < x->numel; i++) ((double *)y->data)[i] = ((const float *)x->data)[i];
    } else if (s == MP_DOUBLE && d == MP_FLOAT) {
        for (int64_t i = 0; i < x->numel; i++) ((float *)y->data)[i] = (float)((const double *)x->data)[i];
    } else if (d == MP_BOOL) {
        for (int64_t i = 0; i < x->numel; i++)
            ((uint8_t *)y->data)[i] = s_int ? mp_tensor_get_i64(x, i) != 0 : mp_tensor_get_f64(x, i) != 0;
    } else if (s_int && (mp_dtype_is_int(d) || s != MP_UINT64)) {
        for (int64_t i = 0; i < x->numel; i++) mp_tensor_set_i64(y, i, mp_tensor_get_i64(x, i));
    } else {
        for (int64_t i = 0; i < x->numel; i++) mp_tensor_set_f64(y, i, mp_tensor_get_f64(x, i));
    }
    return 0;
}

int mp_cpu_Cast(const mp_kargs *k, mp_err *err)
{
    if (!mp_kin(k, 0) || !mp_kout(k, 0)) return mp_fail(err, "missing input or output");
    return cast_into(k->in[0], k->out[0], err);
}

int mp_cpu_CastLike(const mp_kargs *k, mp_err *err)
{
    if (!mp_kin(k, 0) || !mp_kin(k, 1) || !mp_kout(k, 0)) return mp_fail(err, "missing input or output");
    if (k->in[1]->dtype != k->out[0]->dtype) return mp_fail(err, "output dtype differs from target_type's");
    return cast_into(k->in[0], k->out[0], err);
}
