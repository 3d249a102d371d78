/* plan_cu.c - OUT/plan.cu and OUT/Makefile: the plan as CUDA C. The tensor
 * table (offsets, shapes, how each starts) and the instruction stream are
 * static tables that runtime/cuda/ runs in one cudaMalloc of the arena.
 *
 * Lowering: a row of ops[] turns one node of the step into runtime
 * instructions (runtime/cuda/memplan_cuda.h), with all index math done here:
 * strided views (broadcasts, transposes, slices, concatenation, transposed
 * views), GEMM descriptors (transpose flags, strides, batch), window geometry.
 * An op the runtime has no kernel for, or a case a row does not cover, fails
 * codegen naming the op and the node: nothing is ever skipped silently. */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/plan.h"
#include "frontend/shape.h" /* mp_max_unpool_irregular */
#include "ir/einsum.h"
#include "runtime/cuda/memplan_cuda.h"
#include "runtime/cuda/mp_cu_kernels.h" /* defines: the p[] layouts (GM_*, W_*, SCE_*, BN_*, RS_*, PAD_*, ES_*) */

/* The most workspace a cuDNN convolution algorithm may take (the runtime
 * picks cuDNN's best choice that fits): enough for the fast algorithms of
 * ResNet-50 / VGG-16 layers at batch 32, small beside their arenas. */
#define CONV_WORKSPACE_BYTES ((int64_t)256 << 20)

typedef struct cg {
    const mp_graph *g;
    const int32_t *tix;      /* value id -> tensor index, -1: holds no memory */
    const int64_t *off;      /* value id -> arena offset (aliases share their owner's) */
    mp_cu_instr *ins;
    const mp_tensor **kon;   /* per instruction: MP_CU_CONSTANT's contents */
    int32_t n, cap;
    int32_t step, node_id;   /* the node being lowered: its schedule step and graph id */
    int64_t ws;              /* workspace bytes the instructions need */
} cg;

typedef const char *(*lower_fn)(cg *c, const mp_node *n);

/* ---- values --------------------------------------------------------------------- */

static int32_t vin(const mp_node *n, int k) { return k < n->nin ? n->in[k] : -1; }
static int32_t vout(const mp_node *n, int k) { return k < n->nout ? n->out[k] : -1; }
static const mp_value *V(const cg *c, int32_t id) { return &c->g->values[id]; }
static int64_t dim(const cg *c, int32_t id, int a) { return V(c, id)->dims[a].v; }
static bool tview(const cg *c, int32_t id) { return id >= 0 && (V(c, id)->flags & MP_VAL_TVIEW); }

/* Fails unless x and y are present, of one type other than bool, and neither is a transposed view. */
static const char *one_plain_type(const cg *c, int32_t x, int32_t y)
{
    if (x < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype || V(c, x)->dtype == MP_BOOL) return "operands other than one non-bool type";
    return tview(c, x) || tview(c, y) ? "a transposed view operand" : NULL;
}

static int64_t numel(const cg *c, int32_t id)
{
    int64_t n = 1;
    for (int a = 0; a < V(c, id)->rank; a++) n *= dim(c, id, a);
    return n;
}

static void contiguous(int r, const int64_t *dims, int64_t *str)
{
    for (int64_t a = r - 1, s = 1; a >= 0; a--) str[a] = s, s *= dims[a];
}

static int dims_of(const cg *c, int32_t id, int64_t *d)
{
    for (int a = 0; a < V(c, id)->rank; a++) d[a] = dim(c, id, a);
    return V(c, id)->rank;
}

/* Element strides of a value's logical layout in its bytes: row-major, or,
 * for a transposed view [.., a, b] of a base [.., b, a], the last two swapped. */
static int strides_of(const cg *c, int32_t id, int64_t *str)
{
    int64_t d[MP_CU_MAX_RANK];
    int r = dims_of(c, id, d);
    contiguous(r, d, str);
    if (tview(c, id) && r >= 2) str[r - 1] = d[r - 2], str[r - 2] = 1;
    return r;
}

/* Strides reading value id broadcast (right-aligned, size-1 dims repeated) over dims[r]. */
static void bcast_strides(const cg *c, int32_t id, int r, const int64_t *dims, int64_t *str)
{
    int64_t s[MP_CU_MAX_RANK];
    int ri = strides_of(c, id, s);
    for (int a = 0; a < r; a++) {
        int b = a - (r - ri);
        str[a] = b < 0 || dim(c, id, b) == 1 || dims[a] == 1 ? 0 : s[b];
    }
}

static int64_t norm_axis(int64_t a, int r) { return a < 0 ? a + r : a; }

static bool is_f32(const cg *c, int32_t id) { return id < 0 || V(c, id)->dtype == MP_FLOAT; }

/* float32, or a 16-bit float (bf16 / fp16: loaded widened, stored rounded; ops16 below gates which ops). */
static bool is_f32_or_half(const cg *c, int32_t id) { return is_f32(c, id) || mp_dtype_is_half(V(c, id)->dtype); }

/* The integers of a folded (constant) value; count, or -1 when it has none. */
static int konst_ints(const cg *c, int32_t id, int64_t *out, int max)
{
    const mp_tensor *k = id >= 0 ? V(c, id)->konst : NULL;
    if (!k || !k->data || k->numel > max || mp_dtype_is_float(k->dtype)) return -1;
    for (int64_t i = 0; i < k->numel; i++) out[i] = mp_tensor_get_i64(k, i);
    return (int)k->numel;
}

/* Fails unless every float operand of n is float32 (or 16-bit, for the ops that ops16 lets through) and
 * none is a transposed view. */
static const char *plain_f32(cg *c, const mp_node *n)
{
    for (int k = 0; k < n->nin + n->nout; k++) {
        int32_t id = k < n->nin ? n->in[k] : n->out[k - n->nin];
        if (id < 0 || !is_f32_or_half(c, id)) continue;
        if (tview(c, id)) return "a transposed view operand";
    }
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !is_f32_or_half(c, n->in[k]) && mp_dtype_is_float(V(c, n->in[k])->dtype)) return "a float type other than float32";
    return NULL;
}

/* ---- instructions ------------------------------------------------------------------- */

/* Room for `extra` more instructions. lower_all reserves before each node,
 * so a lowering's emits never move the instructions it already holds. */
#define EMITS_PER_NODE 64
static int reserve(cg *c, int32_t extra)
{
    while (c->cap - c->n < extra) {
        int32_t cap = c->cap ? 2 * c->cap : 256;
        mp_cu_instr *ins = realloc(c->ins, (size_t)cap * sizeof *ins);
        const mp_tensor **kon = ins ? realloc(c->kon, (size_t)cap * sizeof *kon) : NULL;
        if (ins) c->ins = ins;
        if (!ins || !kon) return -1;
        c->kon = kon;
        c->cap = cap;
    }
    return 0;
}

static mp_cu_instr *emit(cg *c, int op, int64_t n)
{
    assert(c->n < c->cap); /* lower_all reserved EMITS_PER_NODE */
    if (c->n == c->cap) return NULL;
    mp_cu_instr *I = &c->ins[c->n];
    c->kon[c->n++] = NULL;
    memset(I, 0, sizeof *I);
    I->op = op, I->node = c->step, I->n = n;
    for (int k = 0; k < MP_CU_NT; k++) I->t[k] = -1;
    I->f[1] = 1; /* MP_FN_SCALE's and MP_CU_REDUCE's divisor (other kernels set their own) */
    return I;
}

#define EMIT(I, op, n) \
    mp_cu_instr *I = emit(c, op, n); \
    if (!I) return "out of memory"

static int32_t T(const cg *c, int32_t id) { return id >= 0 ? c->tix[id] : -1; }

/* The instruction emitted since the count `since` was taken, NULL when none was (an empty output, or one
 * outside the arena): where a lowering sets the parameters a shared emitter leaves at their defaults. */
static mp_cu_instr *emitted(cg *c, int32_t since) { return c->n > since ? &c->ins[c->n - 1] : NULL; }

static void need_ws(cg *c, int64_t bytes)
{
    if (bytes > c->ws) c->ws = bytes;
}

/* Puts a view (offset, strides[r]) at p. */
static int64_t *put_view(int64_t *p, int64_t off, int r, const int64_t *str)
{
    *p++ = off;
    for (int a = 0; a < r; a++) *p++ = str[a];
    return p;
}

/* dst[dst view] = src[src view] over dims[r]. */
static const char *copy(cg *c, int32_t src, int32_t dst, int r, const int64_t *dims, int64_t soff, const int64_t *sstr,
                        int64_t doff, const int64_t *dstr)
{
    int64_t n = 1;
    for (int a = 0; a < r; a++) n *= dims[a];
    if (!n || T(c, dst) < 0) return NULL;
    if (V(c, src)->dtype != V(c, dst)->dtype) return "a copy between dtypes";
    EMIT(I, MP_CU_COPY, n);
    I->t[0] = T(c, src), I->t[1] = T(c, dst);
    I->p[0] = r;
    memcpy(I->p + 1, dims, (size_t)r * sizeof *dims);
    put_view(put_view(I->p + 1 + r, soff, r, sstr), doff, r, dstr);
    return NULL;
}

/* dst (contiguous) = src in src's logical element order. */
static const char *copy_value(cg *c, int32_t src, int32_t dst)
{
    int64_t d[MP_CU_MAX_RANK] = {0}, s[MP_CU_MAX_RANK] = {0}, o[MP_CU_MAX_RANK] = {0};
    int r = dims_of(c, src, d);
    if (!tview(c, src) && c->off[src] == c->off[dst]) return NULL; /* the same bytes */
    strides_of(c, src, s);
    contiguous(r, d, o);
    return copy(c, src, dst, r, d, 0, s, 0, o);
}

static const char *fill(cg *c, int32_t id, double v)
{
    if (!numel(c, id) || T(c, id) < 0) return NULL;
    EMIT(I, MP_CU_FILL, numel(c, id));
    I->t[0] = T(c, id), I->f[0] = v;
    return NULL;
}

/* y (contiguous) = the workspace's first numel(y) elements (ws: MP_CU_WS read as float64, MP_CU_WS32 as
 * float32), each rounded once into y's type: a 16-bit result that the CPU sums in fp32 or double scratch
 * and rounds once (runtime/exec.c round16). */
static const char *round_from_ws(cg *c, int32_t ws, int32_t y)
{
    if (!numel(c, y) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_MAP, numel(c, y));
    I->p[0] = MP_FN_IDENT, I->p[1] = 1, I->p[2] = 1, I->p[3] = numel(c, y), I->p[4] = 0, I->p[5] = 1;
    I->t[0] = ws, I->t[1] = T(c, y);
    return NULL;
}

/* out = fn(ins...) elementwise over dims d[r] (out's elements, contiguous), input k read through
 * strides str[k] (NULL: broadcast, right-aligned, to out's dims). */
static const char *map_dims(cg *c, int fn, int nin, const int32_t *in, int r, const int64_t *d,
                            const int64_t (*str)[MP_CU_MAX_RANK], int32_t out, double f0, double f1)
{
    int64_t s[MP_CU_MAX_RANK];
    if (!numel(c, out) || T(c, out) < 0) return NULL;
    EMIT(I, fn >= MP_FN_BIT_AND ? MP_CU_MAP_INT : MP_CU_MAP, numel(c, out)); /* the bitwise functions: exact integers */
    I->p[0] = fn, I->p[1] = nin, I->p[2] = r;
    memcpy(I->p + 3, d, (size_t)r * sizeof *d);
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0) return "an absent operand";
        if (str) memcpy(s, str[k], sizeof s);
        else bcast_strides(c, in[k], r, d, s);
        put_view(I->p + 3 + r + k * (r + 1), 0, r, s);
        I->t[k] = T(c, in[k]);
    }
    I->t[nin] = T(c, out);
    I->f[0] = f0, I->f[1] = f1;
    return NULL;
}

/* out = fn(ins...) elementwise over out's dims, input k read through strides str[k] (NULL: broadcast). */
static const char *map_views(cg *c, int fn, int nin, const int32_t *in, const int64_t (*str)[MP_CU_MAX_RANK], int32_t out,
                             double f0, double f1)
{
    int64_t d[MP_CU_MAX_RANK];
    int r = dims_of(c, out, d);
    return map_dims(c, fn, nin, in, r, d, str, out, f0, f1);
}

/* out = fn(ins...) elementwise, inputs broadcast to out's dims. */
static const char *map(cg *c, int fn, int nin, const int32_t *in, int32_t out, double f0, double f1)
{
    return map_views(c, fn, nin, in, NULL, out, f0, f1);
}

/* out[j] = sum over B of x[A(j) + B(k)] / div, A over out's elements (or the mode's reduction, RED_*). */
static const char *reduce_mode(cg *c, int32_t x, int32_t out, int ra, const int64_t *ad, const int64_t *as, int rb,
                               const int64_t *bd, const int64_t *bs, double div, int mode)
{
    int64_t cnt = 1;
    for (int a = 0; a < rb; a++) cnt *= bd[a];
    if (!numel(c, out) || T(c, out) < 0) return NULL;
    EMIT(I, MP_CU_REDUCE, numel(c, out));
    I->t[0] = T(c, x), I->t[1] = T(c, out);
    int64_t *p = I->p;
    *p++ = ra;
    memcpy(p, ad, (size_t)ra * sizeof *ad), p += ra;
    memcpy(p, as, (size_t)ra * sizeof *as), p += ra;
    *p++ = 0; /* offset */
    *p++ = rb;
    memcpy(p, bd, (size_t)rb * sizeof *bd), p += rb;
    memcpy(p, bs, (size_t)rb * sizeof *bs), p += rb;
    *p++ = cnt;
    *p = mode;
    I->f[0] = 1, I->f[1] = div;
    return NULL;
}

static const char *reduce(cg *c, int32_t x, int32_t out, int ra, const int64_t *ad, const int64_t *as, int rb,
                          const int64_t *bd, const int64_t *bs, double div)
{
    return reduce_mode(c, x, out, ra, ad, as, rb, bd, bs, div, RED_SUM);
}

/* ---- elementwise ops: a table ------------------------------------------------------------ */

static const struct {
    const char *op;
    int fn, nin;
} map_ops[] = {
    {"Relu", MP_FN_RELU, 1}, {"Neg", MP_FN_NEG, 1}, {"Exp", MP_FN_EXP, 1}, {"Log", MP_FN_LOG, 1},
    {"Sqrt", MP_FN_SQRT, 1}, {"Reciprocal", MP_FN_RECIP, 1}, {"Abs", MP_FN_ABS, 1}, {"Tanh", MP_FN_TANH, 1},
    {"Sigmoid", MP_FN_SIGMOID, 1}, {"Erf", MP_FN_ERF, 1}, {"Gelu", MP_FN_GELU, 1}, {"HardSigmoid", MP_FN_HARD_SIGMOID, 1},
    {"HardSwish", MP_FN_HARD_SWISH, 1}, {"Scale", MP_FN_SCALE, 1}, {"LeakyRelu", MP_FN_LEAKY_RELU, 1},
    {"Cast", MP_FN_IDENT, 1}, {"CastLike", MP_FN_IDENT, 1}, {"Add", MP_FN_ADD, 2}, {"Sub", MP_FN_SUB, 2}, {"Mul", MP_FN_MUL, 2},
    {"Div", MP_FN_DIV, 2}, {"Pow", MP_FN_POW, 2},
    {"Equal", MP_FN_EQUAL, 2}, {"Less", MP_FN_LESS, 2}, {"Greater", MP_FN_GREATER, 2}, {"And", MP_FN_AND, 2},
    {"Or", MP_FN_OR, 2}, {"ReluGrad", MP_FN_RELU_GRAD, 2}, {"SigmoidGrad", MP_FN_SIGMOID_GRAD, 2},
    {"TanhGrad", MP_FN_TANH_GRAD, 2}, {"GeluGrad", MP_FN_GELU_GRAD, 2}, {"HardSigmoidGrad", MP_FN_HARD_SIGMOID_GRAD, 2},
    {"HardSwishGrad", MP_FN_HARD_SWISH_GRAD, 2}, {"DropoutGrad", MP_FN_MASK_SCALE, 2}, {"ErfGrad", MP_FN_ERF_GRAD, 2},
    {"SqrtGrad", MP_FN_SQRT_GRAD, 2}, {"WhereGrad", MP_FN_PICK_IF, 2}, {"Where", MP_FN_WHERE, 3},
    {"PowGrad", MP_FN_POW_GRAD, 3}, {"Sin", MP_FN_SIN, 1}, {"Cos", MP_FN_COS, 1}, {"Sign", MP_FN_SIGN, 1},
    {"Floor", MP_FN_FLOOR, 1}, {"Ceil", MP_FN_CEIL, 1}, {"Round", MP_FN_ROUND, 1}, {"Softplus", MP_FN_SOFTPLUS, 1},
    {"Softsign", MP_FN_SOFTSIGN, 1}, {"Elu", MP_FN_ELU, 1}, {"Selu", MP_FN_SELU, 1}, {"Celu", MP_FN_CELU, 1},
    {"ThresholdedRelu", MP_FN_THRESHOLDED_RELU, 1}, {"Mish", MP_FN_MISH, 1}, {"Swish", MP_FN_SWISH, 1},
    {"Tan", MP_FN_TAN, 1}, {"Sinh", MP_FN_SINH, 1}, {"Cosh", MP_FN_COSH, 1}, {"Asin", MP_FN_ASIN, 1},
    {"Acos", MP_FN_ACOS, 1}, {"Atan", MP_FN_ATAN, 1}, {"Asinh", MP_FN_ASINH, 1}, {"Acosh", MP_FN_ACOSH, 1},
    {"Atanh", MP_FN_ATANH, 1}, {"SwiGLU", MP_FN_SWIGLU, 2}, {"Not", MP_FN_NOT, 1}, {"IsNaN", MP_FN_IS_NAN, 1},
    {"IsInf", MP_FN_IS_INF, 1}, {"Shrink", MP_FN_SHRINK, 1}, {"GreaterOrEqual", MP_FN_GREATER_EQ, 2},
    {"LessOrEqual", MP_FN_LESS_EQ, 2}, {"Xor", MP_FN_XOR, 2}, {"Mod", MP_FN_MOD, 2},
};

static const char *lower_map(cg *c, const mp_node *n)
{
    size_t k = 0;
    while (strcmp(map_ops[k].op, n->op_type)) k++;
    int fn = map_ops[k].fn, nin = map_ops[k].nin;
    int32_t out = vout(n, 0);
    double f0 = 0, f1 = 1;
    if (n->nin < nin || n->nout < 1 || out < 0) return "missing operands";
    bool tanh_form = !strcmp(mp_attr_str(n, "approximate", "none"), "tanh");
    if (fn == MP_FN_GELU && tanh_form) fn = MP_FN_GELU_TANH;
    if (fn == MP_FN_GELU_GRAD && tanh_form) fn = MP_FN_GELU_TANH_GRAD;
    if (fn == MP_FN_DIV && !mp_dtype_is_float(V(c, out)->dtype)) fn = MP_FN_IDIV;
    if (fn == MP_FN_PICK_IF && mp_attr_int(n, "branch", 0)) fn = MP_FN_PICK_IF_NOT;
    if (fn == MP_FN_HARD_SIGMOID || fn == MP_FN_HARD_SIGMOID_GRAD)
        f0 = mp_attr_float(n, "alpha", 0.2f), f1 = mp_attr_float(n, "beta", 0.5f);
    if (fn == MP_FN_SCALE) f0 = mp_attr_float(n, "alpha", 1.0f);
    if (fn == MP_FN_LEAKY_RELU) f0 = mp_attr_float(n, "alpha", 0.01f);
    /* runtime/cpu_elementwise.c's attributes and defaults */
    if (fn == MP_FN_ELU || fn == MP_FN_CELU || fn == MP_FN_THRESHOLDED_RELU || fn == MP_FN_SWISH || fn == MP_FN_SWIGLU)
        f0 = mp_attr_float(n, "alpha", 1.0f);
    if (fn == MP_FN_SELU)
        f0 = mp_attr_float(n, "alpha", 1.67326319217681884765625f), f1 = mp_attr_float(n, "gamma", 1.05070102214813232421875f);
    if (fn == MP_FN_IS_INF) f0 = (double)mp_attr_int(n, "detect_negative", 1), f1 = (double)mp_attr_int(n, "detect_positive", 1);
    if (fn == MP_FN_SHRINK) f0 = mp_attr_float(n, "bias", 0.0f), f1 = mp_attr_float(n, "lambd", 0.5f);
    if (fn == MP_FN_MOD) {
        if (mp_attr_int(n, "fmod", 0)) fn = MP_FN_FMOD;
        f0 = !mp_dtype_is_float(V(c, out)->dtype);
    }
    if (fn == MP_FN_MASK_SCALE) {
        double ratio = mp_attr_float(n, "ratio", 0.5f);
        f0 = ratio < 1 ? 1 / (1 - ratio) : 0;
    }
    /* (64-bit integers travel through double: exact below 2^53) */
    return map(c, fn, nin, n->in, out, f0, f1);
}

/* Sum, Mean, Max, Min (any number of inputs, each broadcast): as runtime/cpu_elementwise.c folds them left
 * into Y, one MAP of the first two (the first alone: a broadcast copy), then one MAP of Y with each next
 * input in place; Mean then divides by the count. A 16-bit Y is the CPU's fp32 copy of it (runtime/exec.c
 * widen16 / round16), rounded once at the end: so when Y would hold an intermediate (a third input, or
 * Mean's sum before its division), the fold runs in the workspace as fp32 (MP_CU_WS32) and the last MAP
 * rounds it into Y. */
static const struct {
    const char *op;
    int fn;
} variadic_ops[] = {{"Sum", MP_FN_ADD}, {"Mean", MP_FN_ADD}, {"Max", MP_FN_MAX}, {"Min", MP_FN_MIN}};

/* Points operand k of the instruction emitted since `since` (if any) at the fp32 workspace. */
static void ws32_operand(cg *c, int32_t since, int k)
{
    mp_cu_instr *I = emitted(c, since);
    if (I) I->t[k] = MP_CU_WS32;
}

static const char *lower_variadic(cg *c, const mp_node *n)
{
    size_t k = 0;
    while (strcmp(variadic_ops[k].op, n->op_type)) k++;
    int32_t y = vout(n, 0);
    if (n->nin < 1 || y < 0) return "missing operands";
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] < 0 || V(c, n->in[i])->dtype != V(c, y)->dtype) return "an input missing or of another dtype";
    bool mean = !strcmp(n->op_type, "Mean");
    if (mean && !mp_dtype_is_float(V(c, y)->dtype)) return "a Mean other than float";
    bool ws = mp_dtype_is_half(V(c, y)->dtype) && n->nin > (mean ? 1 : 2);
    if (ws) need_ws(c, numel(c, y) * (int64_t)sizeof(float));
    int32_t at = c->n; /* the fold's MAPs read and write y's elements contiguously: the workspace takes y's place */
    const char *e = n->nin == 1 ? map(c, MP_FN_IDENT, 1, n->in, y, 0, 1) : map(c, variadic_ops[k].fn, 2, n->in, y, 0, 1);
    if (ws) ws32_operand(c, at, 2);
    for (int i = 2; i < n->nin && !e; i++) {
        at = c->n;
        e = map(c, variadic_ops[k].fn, 2, (int32_t[]){y, n->in[i]}, y, 0, 1);
        if (ws) ws32_operand(c, at, 0), ws32_operand(c, at, 2);
    }
    if (e || !ws) return e || !mean ? e : map(c, MP_FN_SCALE, 1, &y, y, 1, (double)n->nin);
    if (!mean) return round_from_ws(c, MP_CU_WS32, y);
    at = c->n;
    e = map(c, MP_FN_SCALE, 1, &y, y, 1, (double)n->nin); /* divides and rounds once */
    ws32_operand(c, at, 0);
    return e;
}

/* Clip with constant bounds (inputs 1 and 2 from opset 11, attributes before):
 * one map, an absent bound the largest double. */
static const char *lower_clip(cg *c, const mp_node *n)
{
    const char *e = plain_f32(c, n);
    if (e) return e;
    double b[2] = {-DBL_MAX, DBL_MAX};
    bool old = mp_graph_opset(c->g, "") > 0 && mp_graph_opset(c->g, "") < 11;
    for (int k = 0; k < 2; k++) {
        if (old) {
            const mp_attr *a = mp_node_attr(n, k ? "max" : "min");
            if (a) b[k] = a->f;
            continue;
        }
        int32_t v = vin(n, k + 1);
        if (v < 0) continue;
        const mp_tensor *t = V(c, v)->konst;
        if (!t || !t->data || t->numel != 1) return "bounds that are not constant scalars";
        b[k] = mp_tensor_get_f64(t, 0);
    }
    int32_t x = vin(n, 0);
    return map(c, MP_FN_CLIP, 1, &x, vout(n, 0), b[0], b[1]);
}

/* PRelu: the slope broadcast to X (unidirectionally, right-aligned); before opset 7 a 1-D slope of C
 * entries (C not X's last dim) runs along axis 1, as runtime/cpu_elementwise.c mp_cpu_PRelu reads it. */
static const char *lower_prelu(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), s = vin(n, 1), y = vout(n, 0);
    if (x < 0 || s < 0 || y < 0) return "missing operands";
    if (V(c, x)->dtype != V(c, s)->dtype) return "a slope of another dtype";
    int r = V(c, y)->rank;
    if (mp_graph_opset(c->g, n->domain) < 7 && V(c, s)->rank == 1 && r >= 2 && dim(c, s, 0) == dim(c, x, 1) &&
        dim(c, s, 0) != dim(c, x, r - 1)) {
        int64_t str[2][MP_CU_MAX_RANK] = {{0}}, yd[MP_CU_MAX_RANK];
        dims_of(c, y, yd);
        bcast_strides(c, x, r, yd, str[0]);
        str[1][1] = dim(c, s, 0) == 1 ? 0 : 1; /* slope[c] along X's channels */
        const int32_t in[2] = {x, s};
        return map_views(c, MP_FN_PRELU, 2, in, (const int64_t(*)[MP_CU_MAX_RANK])str, y, 0, 1);
    }
    return map(c, MP_FN_PRELU, 2, n->in, y, 0, 1);
}

/* BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (integers) and BitShift (unsigned integers, direction LEFT
 * or RIGHT), as runtime/cpu_elementwise.c: MP_CU_MAP_INT, the operands broadcast as MAP's, computed on 64-bit
 * integers and stored wrapping to the output's width, so exact at every width. */
static const struct {
    const char *op;
    int fn, nin;
} int_ops[] = {{"BitwiseAnd", MP_FN_BIT_AND, 2}, {"BitwiseOr", MP_FN_BIT_OR, 2}, {"BitwiseXor", MP_FN_BIT_XOR, 2},
               {"BitwiseNot", MP_FN_BIT_NOT, 1}, {"BitShift", MP_FN_BIT_SHL, 2}};

static const char *lower_bitwise(cg *c, const mp_node *n)
{
    size_t k = 0;
    while (strcmp(int_ops[k].op, n->op_type)) k++;
    int fn = int_ops[k].fn, nin = int_ops[k].nin;
    int32_t y = vout(n, 0);
    if (n->nin < nin || y < 0) return "missing operands";
    mp_dtype t = V(c, y)->dtype;
    for (int i = 0; i < nin; i++)
        if (n->in[i] < 0 || V(c, n->in[i])->dtype != t) return "operands of other than one dtype";
    if (!mp_dtype_is_int(t)) return "a type other than an integer";
    if (fn == MP_FN_BIT_SHL) {
        const char *dir = mp_attr_str(n, "direction", "");
        if (t != MP_UINT8 && t != MP_UINT16) return "a type other than uint8 or uint16 (the CPU shifts unsigned types)";
        if (!strcmp(dir, "RIGHT")) fn = MP_FN_BIT_SHR;
        else if (strcmp(dir, "LEFT")) return "a direction other than LEFT or RIGHT";
    }
    return map(c, fn, nin, n->in, y, 0, 1);
}

/* QuantizeLinear, DequantizeLinear (runtime/cpu_quant.c: int8, uint8, int16, uint16, int32; float32 or
 * float64): one MAP of x with its scale and zero point (absent: 0), which it reads per tensor (stride 0), per
 * axis (a 1-D scale along `axis`) or per block of block_size along the axis (the axis split in two, blocks
 * and places, stride 0 along the places; a last partial block is refused). Quantize divides in float for a
 * float32 x, rounds half to even, adds the zero point and clamps to the type's range, as the CPU. */
static const char *lower_quant(cg *c, const mp_node *n)
{
    bool quant = !strcmp(n->op_type, "QuantizeLinear");
    int32_t x = vin(n, 0), s = vin(n, 1), zp = vin(n, 2), y = vout(n, 0);
    if (x < 0 || s < 0 || y < 0) return "missing operands";
    mp_dtype it = V(c, quant ? y : x)->dtype, ft = V(c, quant ? x : y)->dtype;
    static const struct {
        mp_dtype t;
        double lo, hi;
    } ranges[] = {{MP_INT8, -128, 127}, {MP_UINT8, 0, 255}, {MP_INT16, -32768, 32767}, {MP_UINT16, 0, 65535},
                  {MP_INT32, -2147483648.0, 2147483647.0}};
    size_t k = 0;
    while (k < sizeof ranges / sizeof *ranges && ranges[k].t != it) k++;
    if (k == sizeof ranges / sizeof *ranges) return "an integer type other than int8, uint8, int16, uint16 or int32";
    if (!mp_dtype_is_float(ft) || !mp_dtype_is_float(V(c, s)->dtype)) return "a value or scale that is not a float";
    if (zp >= 0 && (V(c, zp)->dtype != it || numel(c, zp) != numel(c, s))) return "a zero point of another type or size than the scale";
    if (tview(c, x) || tview(c, s) || tview(c, zp)) return "a transposed view operand";
    /* dims d[r] over x's elements, x contiguous over them (str[0]), the scale and zero point read through str[1], str[2] */
    int64_t d[MP_CU_MAX_RANK] = {0}, str[3][MP_CU_MAX_RANK] = {{0}};
    int r = dims_of(c, x, d);
    if (numel(c, s) != 1 || V(c, s)->rank > 1) {
        int64_t axis = norm_axis(mp_attr_int(n, "axis", 1), r), B = mp_attr_int(n, "block_size", 0);
        if (axis < 0 || axis >= r) return "an axis out of range";
        if (B <= 0) {
            if (V(c, s)->rank != 1 || numel(c, s) != d[axis]) return "a per-axis scale of other than the axis's length";
            str[1][axis] = 1;
        } else {
            if (d[axis] % B || r + 1 > MP_CU_MAX_RANK) return "a last partial block, or a rank too high to split";
            int64_t sd[MP_CU_MAX_RANK], sstr[MP_CU_MAX_RANK];
            if (V(c, s)->rank != r || dims_of(c, s, sd) != r) return "a blocked scale of another rank";
            for (int a = 0; a < r; a++)
                if (sd[a] != (a == axis ? d[axis] / B : d[a])) return "a blocked scale of the wrong shape";
            contiguous(r, sd, sstr);
            memmove(d + axis + 1, d + axis, (size_t)(r - axis) * sizeof *d);
            d[axis] /= B, d[axis + 1] = B;
            for (int a = 0, b = 0; a <= r; a++) str[1][a] = a == axis + 1 ? 0 : sstr[b++];
            r++;
        }
    }
    contiguous(r, d, str[0]);
    memcpy(str[2], str[1], sizeof str[1]);
    const int32_t in[3] = {x, s, zp};
    int32_t at = c->n;
    double lo = ranges[k].lo, hi = ranges[k].hi;
    const int64_t(*views)[MP_CU_MAX_RANK] = (const int64_t(*)[MP_CU_MAX_RANK])str;
    const char *e = quant ? map_dims(c, MP_FN_QUANTIZE, zp >= 0 ? 3 : 2, in, r, d, views, y, lo, hi)
                          : map_dims(c, MP_FN_DEQUANTIZE, zp >= 0 ? 3 : 2, in, r, d, views, y, 0, 1);
    mp_cu_instr *I = emitted(c, at);
    if (I && quant) I->f[2] = ft == MP_FLOAT;
    return e;
}

/* The integer types of runtime/cpu_quant.c's products (quant_type). */
static bool quant_int(const cg *c, int32_t id)
{
    mp_dtype t = V(c, id)->dtype;
    return t == MP_INT8 || t == MP_UINT8 || t == MP_INT16 || t == MP_UINT16 || t == MP_INT32;
}

/* A zero point of an integer product: absent, or integers of 1 or `per` elements (per row, column or
 * output channel). */
static bool zero_point_ok(const cg *c, int32_t zp, int64_t per)
{
    return zp < 0 || (mp_dtype_is_int(V(c, zp)->dtype) && !tview(c, zp) && (numel(c, zp) == 1 || numel(c, zp) == per));
}

/* MatMulInteger, 2-D as runtime/cpu_quant.c (which refuses a batch): MP_CU_EINSUM "ik,kj->ij" of A and B,
 * each less its zero point (per tensor, per row of A, per column of B: the zero-point rows of strides), in
 * double, exact for these integers, stored into the int32 Y as the CPU's (int32_t)(int64_t). */
static const char *lower_matmul_int(cg *c, const mp_node *n)
{
    int32_t a = vin(n, 0), b = vin(n, 1), za = vin(n, 2), zb = vin(n, 3), y = vout(n, 0);
    if (a < 0 || b < 0 || y < 0 || V(c, y)->dtype != MP_INT32) return "missing operands, or an output other than int32";
    if (!quant_int(c, a) || !quant_int(c, b)) return "operands other than int8, uint8, int16, uint16 or int32";
    if (V(c, a)->rank != 2 || V(c, b)->rank != 2 || V(c, y)->rank != 2) return "a batched MatMulInteger (the CPU's kernel is 2-D)";
    int64_t M = dim(c, a, 0), K = dim(c, a, 1), N = dim(c, b, 1), as[2], bs[2];
    if (dim(c, b, 0) != K || dim(c, y, 0) != M || dim(c, y, 1) != N) return "matrix dims that disagree";
    if (!zero_point_ok(c, za, M) || !zero_point_ok(c, zb, N)) return "zero points other than integer scalars, per row of A or per column of B";
    if (!M || !N) return NULL;
    strides_of(c, a, as), strides_of(c, b, bs);
    /* each operand's strides along i, j (the output's) and k (contracted): A, B, then their zero points */
    const int64_t str[4][3] = {{as[0], 0, as[1]}, {0, bs[1], bs[0]}, {za >= 0 && numel(c, za) > 1, 0, 0},
                               {0, zb >= 0 && numel(c, zb) > 1, 0}};
    EMIT(I, MP_CU_EINSUM, M * N);
    int64_t *p = I->p;
    p[ES_NIN] = 2, p[ES_NO] = 2, p[ES_NS] = 1, p[ES_ZP] = 1, p += ES_DIMS;
    *p++ = M, *p++ = N, *p++ = K;
    memcpy(p, str, sizeof str);
    I->t[0] = T(c, a), I->t[1] = T(c, b), I->t[2] = T(c, y), I->t[3] = T(c, za), I->t[4] = T(c, zb);
    return NULL;
}

/* ---- data movement ------------------------------------------------------------------------ */

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: the same bytes (an alias) or a copy. */
static const char *lower_view(cg *c, const mp_node *n) { return copy_value(c, vin(n, 0), vout(n, 0)); }

static const char *lower_transpose(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    if (tview(c, y) && V(c, y)->alias == x) return NULL; /* a view: moves nothing */
    int64_t d[MP_CU_MAX_RANK], s[MP_CU_MAX_RANK], ps[MP_CU_MAX_RANK], o[MP_CU_MAX_RANK], perm[MP_CU_MAX_RANK];
    int r = dims_of(c, y, d), np = -1;
    const int64_t *pa;
    if ((np = mp_attr_ints(n, "perm", &pa)) >= 0 && np != r) return "a perm of the wrong length";
    for (int a = 0; a < r; a++) perm[a] = np >= 0 ? (pa[a] < 0 ? pa[a] + r : pa[a]) : r - 1 - a;
    strides_of(c, x, s);
    for (int a = 0; a < r; a++) ps[a] = s[perm[a]];
    contiguous(r, d, o);
    return copy(c, x, y, r, d, 0, ps, 0, o);
}

static const char *lower_expand(cg *c, const mp_node *n)
{
    int64_t d[MP_CU_MAX_RANK] = {0}, s[MP_CU_MAX_RANK] = {0}, o[MP_CU_MAX_RANK] = {0};
    int32_t x = vin(n, 0), y = vout(n, 0);
    int r = dims_of(c, y, d);
    bcast_strides(c, x, r, d, s);
    contiguous(r, d, o);
    return copy(c, x, y, r, d, 0, s, 0, o);
}

static const char *lower_concat(cg *c, const mp_node *n)
{
    int32_t y = vout(n, 0);
    int64_t d[MP_CU_MAX_RANK], o[MP_CU_MAX_RANK], s[MP_CU_MAX_RANK], at = 0;
    int r = dims_of(c, y, d);
    int64_t axis = norm_axis(mp_attr_int(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return "axis out of range";
    contiguous(r, d, o);
    for (int k = 0; k < n->nin; k++) {
        int32_t x = n->in[k];
        if (x < 0) continue;
        int64_t xd[MP_CU_MAX_RANK];
        dims_of(c, x, xd);
        strides_of(c, x, s);
        const char *e = copy(c, x, y, r, xd, 0, s, at * o[axis], o);
        if (e) return e;
        at += xd[axis];
    }
    return NULL;
}

static const char *lower_split(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0);
    int64_t s[MP_CU_MAX_RANK], at = 0;
    int r = strides_of(c, x, s);
    int64_t axis = norm_axis(mp_attr_int(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return "axis out of range";
    for (int k = 0; k < n->nout; k++) {
        int32_t y = n->out[k];
        if (y < 0) return "an absent output";
        int64_t yd[MP_CU_MAX_RANK], o[MP_CU_MAX_RANK];
        dims_of(c, y, yd);
        contiguous(r, yd, o);
        const char *e = T(c, y) >= 0 ? copy(c, x, y, r, yd, at * s[axis], s, 0, o) : NULL;
        if (e) return e;
        at += yd[axis];
    }
    return NULL;
}

/* Slice's (and SliceGrad's) start and step per axis of the sliced tensor x
 * (bounds from constant inputs 1..4, or the attributes before opset 10), as
 * runtime/cpu_grad.c SliceGrad clamps them. */
static const char *slice_geom(cg *c, const mp_node *n, int32_t x, int64_t *start, int64_t *step)
{
    int r = V(c, x)->rank;
    int64_t st[MP_CU_MAX_RANK], ax[MP_CU_MAX_RANK], sp[MP_CU_MAX_RANK];
    int ns, na, nsp;
    if (vin(n, 1) >= 0) {
        ns = konst_ints(c, vin(n, 1), st, MP_CU_MAX_RANK);
        na = vin(n, 3) >= 0 ? konst_ints(c, vin(n, 3), ax, MP_CU_MAX_RANK) : ns;
        nsp = vin(n, 4) >= 0 ? konst_ints(c, vin(n, 4), sp, MP_CU_MAX_RANK) : ns;
        if (ns < 0 || na < 0 || nsp < 0) return "bounds that are not constants";
        for (int i = 0; vin(n, 3) < 0 && i < ns; i++) ax[i] = i;
        for (int i = 0; vin(n, 4) < 0 && i < ns; i++) sp[i] = 1;
    } else {
        const int64_t *a;
        ns = mp_attr_ints(n, "starts", &a);
        if (ns < 0 || ns > MP_CU_MAX_RANK) return "no starts";
        memcpy(st, a, (size_t)ns * sizeof *st);
        na = mp_attr_ints(n, "axes", &a);
        for (int i = 0; i < ns; i++) ax[i] = na == ns ? a[i] : i, sp[i] = 1;
        na = nsp = ns;
    }
    if (na != ns || nsp != ns) return "starts, axes and steps of different lengths";
    for (int a = 0; a < r; a++) start[a] = 0, step[a] = 1;
    for (int i = 0; i < ns; i++) {
        int64_t a = norm_axis(ax[i], r);
        if (a < 0 || a >= r || !sp[i]) return "a bad axis or step";
        int64_t d = dim(c, x, (int)a), s = st[i] < 0 ? st[i] + d : st[i];
        s = sp[i] > 0 ? (s < 0 ? 0 : s > d ? d : s) : (s < 0 ? 0 : s > d - 1 ? d - 1 : s);
        start[a] = s, step[a] = sp[i];
    }
    return NULL;
}

/* y = x[start + i * step] over y's dims (Slice), or, scattered, dx[..] = dy (SliceGrad). */
static const char *lower_slice(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "SliceGrad");
    int32_t small = grad ? vin(n, 0) : vout(n, 0), big = grad ? vout(n, 0) : vin(n, 0);
    int64_t start[MP_CU_MAX_RANK], step[MP_CU_MAX_RANK], d[MP_CU_MAX_RANK], bs[MP_CU_MAX_RANK], ss[MP_CU_MAX_RANK];
    int64_t o[MP_CU_MAX_RANK], off = 0;
    const char *e = slice_geom(c, n, big, start, step);
    if (e) return e;
    int r = dims_of(c, small, d);
    if (r != V(c, big)->rank) return "a rank change";
    strides_of(c, big, bs);
    for (int a = 0; a < r; a++) off += start[a] * bs[a], bs[a] *= step[a];
    if (!grad) {
        contiguous(r, d, o);
        return copy(c, big, small, r, d, off, bs, 0, o);
    }
    if ((e = fill(c, big, 0))) return e;
    strides_of(c, small, ss);
    return copy(c, small, big, r, d, 0, ss, off, bs);
}

static const char *lower_gather(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "GatherGrad");
    int32_t table = grad ? vout(n, 0) : vin(n, 0), idx = vin(n, 1), y = grad ? vin(n, 0) : vout(n, 0);
    if (tview(c, table) || tview(c, idx) || tview(c, y)) return "a transposed view operand";
    if (V(c, idx)->dtype != MP_INT64 && V(c, idx)->dtype != MP_INT32) return "indices other than int32/int64";
    int r = V(c, table)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", 0), r), inner = 1;
    if (axis < 0 || axis >= r) return "axis out of range";
    for (int a = (int)axis + 1; a < r; a++) inner *= dim(c, table, a);
    /* a 16-bit table's gradient sums in the workspace in double, as cpu_grad.c's GatherGrad, then rounds once */
    bool half = grad && mp_dtype_is_half(V(c, table)->dtype);
    if (grad && !half && !is_f32(c, table)) return "a table other than float32 or 16-bit";
    const char *e = grad && (!half || !numel(c, y)) ? fill(c, table, 0) : NULL;
    if (e || !numel(c, y)) return e;
    if (half) {
        need_ws(c, numel(c, table) * (int64_t)sizeof(double));
        EMIT(F, MP_CU_FILL, numel(c, table));
        F->t[0] = MP_CU_WS;
    }
    EMIT(I, grad ? MP_CU_SCATTER_ADD : MP_CU_GATHER, numel(c, y));
    I->t[0] = T(c, grad ? y : table), I->t[1] = T(c, idx), I->t[2] = half ? MP_CU_WS : T(c, grad ? table : y);
    I->p[0] = numel(c, idx), I->p[1] = inner, I->p[2] = dim(c, table, (int)axis);
    return half ? round_from_ws(c, MP_CU_WS, table) : NULL;
}

/* MaxUnpool, its default output shape and windows that do not overlap (so every index is distinct):
 * zeros, then each X entry added at its flat index (MP_CU_SCATTER_ADD over Y as one axis). */
static const char *lower_max_unpool(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), idx = vin(n, 1), y = vout(n, 0);
    if (x < 0 || idx < 0 || y < 0 || tview(c, x) || tview(c, idx) || tview(c, y)) return "a transposed view operand";
    if (!is_f32(c, x) || !is_f32(c, y)) return "a dtype other than float32";
    if (V(c, idx)->dtype != MP_INT64 && V(c, idx)->dtype != MP_INT32) return "indices other than int32/int64";
    if (numel(c, idx) != numel(c, x)) return "indices of other than X's size";
    static char why[160]; /* read at once by the caller, which formats it into its error */
    if (mp_max_unpool_irregular(c->g, n, why, sizeof why)) return why;
    const char *e = fill(c, y, 0);
    if (e || !numel(c, x)) return e;
    EMIT(I, MP_CU_SCATTER_ADD, numel(c, x));
    I->t[0] = T(c, x), I->t[1] = T(c, idx), I->t[2] = T(c, y);
    I->p[0] = numel(c, idx), I->p[1] = 1, I->p[2] = numel(c, y);
    return NULL;
}

static const char *lower_constant_of_shape(cg *c, const mp_node *n)
{
    const mp_attr *a = mp_node_attr(n, "value");
    const mp_tensor *t = a && a->tensors ? a->tensors[0] : NULL;
    if (t && (t->numel != 1 || !t->data)) return "a value of other than one element";
    return fill(c, vout(n, 0), t ? mp_tensor_get_f64(t, 0) : 0.0);
}

/* y = x with zeros outside the band j - i >= k (upper) or j - i <= k, over x's last two dims (y may be x). */
static const char *trilu(cg *c, int32_t x, int32_t y, bool upper, int64_t k)
{
    int r = V(c, x)->rank;
    if (r < 2 || tview(c, x)) return "rank < 2 or a transposed view";
    if (!numel(c, y) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_TRILU, numel(c, y));
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    I->p[0] = dim(c, x, r - 2), I->p[1] = dim(c, x, r - 1), I->p[2] = upper, I->p[3] = k;
    return NULL;
}

static const char *lower_trilu(cg *c, const mp_node *n)
{
    int64_t k = 0;
    if (vin(n, 1) >= 0 && konst_ints(c, vin(n, 1), &k, 1) != 1) return "k that is not a constant";
    return trilu(c, vin(n, 0), vout(n, 0), mp_attr_int(n, "upper", 1) != 0, k);
}

/* EyeLike (runtime/cpu_tensor.c, any dtype): ones where j - i is the attribute k, zeros elsewhere. FILL 1,
 * then TRILU in place keeping j - i >= k, then j - i <= k. (Folded unless its input varies or it is large.) */
static const char *lower_eye_like(cg *c, const mp_node *n)
{
    int32_t y = vout(n, 0);
    if (y < 0 || V(c, y)->rank != 2) return "an output other than 2-D";
    int64_t k = mp_attr_int(n, "k", 0);
    const char *e = fill(c, y, 1);
    if (!e) e = trilu(c, y, y, true, k);
    return e ? e : trilu(c, y, y, false, k);
}

/* Range computed at run time (unfolded: its output too large to fold, or its inputs vary): MP_CU_RANGE
 * reads start and delta from the arena, as runtime/cpu_tensor.c (integers wrapping in 64 bits, floats
 * start + i delta in double); the length is the output's, set by shape inference. */
static const char *lower_range(cg *c, const mp_node *n)
{
    int32_t s = vin(n, 0), d = vin(n, 2), y = vout(n, 0);
    if (s < 0 || d < 0 || y < 0 || numel(c, s) != 1 || numel(c, d) != 1) return "a start or delta other than one element";
    if (V(c, y)->dtype == MP_BOOL || V(c, s)->dtype != V(c, y)->dtype || V(c, d)->dtype != V(c, y)->dtype)
        return "operands of other than one non-bool type";
    if (!numel(c, y) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_RANGE, numel(c, y));
    I->t[0] = T(c, s), I->t[1] = T(c, d), I->t[2] = T(c, y);
    return NULL;
}

/* The index of s in names[n], -1 when absent (an attribute's choice). */
static int pick_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* Zeros (a gradient's start, memplan domain): FILL 0. */
static const char *lower_zeros(cg *c, const mp_node *n) { return fill(c, vout(n, 0), 0); }

/* x as outer x d x inner around the axis (the kernels that run a thread per line along it); false when empty. */
static bool around_axis(const cg *c, int32_t x, int axis, int64_t *outer, int64_t *d, int64_t *inner)
{
    *outer = *inner = 1, *d = dim(c, x, axis);
    for (int a = 0; a < V(c, x)->rank; a++) {
        if (a < axis) *outer *= dim(c, x, a);
        if (a > axis) *inner *= dim(c, x, a);
    }
    return *outer && *inner && *d;
}

/* CumSum, CumProd (runtime/cpu_reduce.c run_cumulative; the axis a constant input): MP_CU_CUMSUM, a thread
 * per line. */
static const char *lower_cumsum(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t axis;
    const char *e = one_plain_type(c, x, y);
    if (e) return e;
    if (konst_ints(c, vin(n, 1), &axis, 1) != 1) return "an axis that is not a constant";
    int r = V(c, x)->rank;
    axis = norm_axis(axis, r);
    if (axis < 0 || axis >= r) return "axis out of range";
    int64_t outer, d, inner;
    if (!around_axis(c, x, (int)axis, &outer, &d, &inner)) return NULL;
    EMIT(I, MP_CU_CUMSUM, outer * inner);
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    I->p[CS_OUTER] = outer, I->p[CS_D] = d, I->p[CS_INNER] = inner;
    I->p[CS_EXCL] = mp_attr_int(n, "exclusive", 0) != 0, I->p[CS_REV] = mp_attr_int(n, "reverse", 0) != 0;
    I->p[CS_PROD] = !strcmp(n->op_type, "CumProd");
    return NULL;
}

/* LpNormalization (p 1 or 2, float32 / float64, as runtime/cpu_norm.c): MP_CU_LP_NORM, a thread per line
 * along the axis. Its gradient is forward ops. */
static const char *lower_lp_norm(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    if (x < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype || !mp_dtype_is_float(V(c, x)->dtype)) return "operands other than one float type";
    if (!is_f32(c, x) && V(c, x)->dtype != MP_DOUBLE) return "a float type other than float32 / float64";
    if (tview(c, x) || tview(c, y)) return "a transposed view operand";
    int r = V(c, x)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", -1), r), p = mp_attr_int(n, "p", 2);
    if (axis < 0 || axis >= r) return "axis out of range";
    if (p != 1 && p != 2) return "p other than 1 or 2";
    int64_t outer, d, inner;
    if (!around_axis(c, x, (int)axis, &outer, &d, &inner)) return NULL;
    EMIT(I, MP_CU_LP_NORM, outer * inner);
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    I->p[LPN_D] = d, I->p[LPN_INNER] = inner, I->p[LPN_P] = p;
    return NULL;
}

/* ArgMax, ArgMin (any numeric dtype, keepdims either way, select_last_index): MP_CU_ARG, a thread per line. */
static const char *lower_arg(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    if (x < 0 || y < 0 || V(c, y)->dtype != MP_INT64 || V(c, x)->dtype == MP_BOOL)
        return "an input other than numeric or an output other than int64";
    if (tview(c, x)) return "a transposed view operand";
    int r = V(c, x)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", 0), r), outer, d, inner;
    if (axis < 0 || axis >= r) return "axis out of range";
    if (!around_axis(c, x, (int)axis, &outer, &d, &inner) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_ARG, outer * inner);
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    I->p[AM_D] = d, I->p[AM_INNER] = inner, I->p[AM_MAX] = !strcmp(n->op_type, "ArgMax");
    I->p[AM_LAST] = mp_attr_int(n, "select_last_index", 0) != 0;
    return NULL;
}

/* TopK (any numeric dtype; k read from the values' shape, sorted as the CPU's stable sort, largest or not):
 * MP_CU_TOPK, a thread per input element. */
static const char *lower_topk(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), vals = vout(n, 0), inds = vout(n, 1);
    if (x < 0 || vals < 0 || V(c, vals)->dtype != V(c, x)->dtype || V(c, x)->dtype == MP_BOOL ||
        (inds >= 0 && V(c, inds)->dtype != MP_INT64))
        return "operands other than numeric X and values, int64 indices";
    if (tview(c, x)) return "a transposed view operand";
    int r = V(c, x)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", -1), r), outer, d, inner;
    if (axis < 0 || axis >= r || V(c, vals)->rank != r) return "axis out of range";
    if (!around_axis(c, x, (int)axis, &outer, &d, &inner) || !numel(c, vals) || (T(c, vals) < 0 && T(c, inds) < 0))
        return NULL;
    EMIT(I, MP_CU_TOPK, numel(c, x));
    I->t[0] = T(c, x), I->t[1] = T(c, vals), I->t[2] = T(c, inds);
    I->p[TK_D] = d, I->p[TK_INNER] = inner, I->p[TK_K] = dim(c, vals, (int)axis);
    I->p[TK_LARGEST] = mp_attr_int(n, "largest", 1) != 0;
    return NULL;
}

/* OneHot (indices of any numeric dtype, values of any dtype; the depth is the output's dim along the axis):
 * MP_CU_ONE_HOT, a thread per output element. */
static const char *lower_one_hot(cg *c, const mp_node *n)
{
    int32_t ix = vin(n, 0), vals = vin(n, 2), y = vout(n, 0);
    if (ix < 0 || vals < 0 || y < 0 || V(c, vals)->dtype != V(c, y)->dtype || numel(c, vals) != 2)
        return "operands other than indices, two values and an output of their dtype";
    if (V(c, ix)->dtype == MP_BOOL || tview(c, ix) || tview(c, vals)) return "bool or transposed-view indices or values";
    int r = V(c, y)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", -1), r), outer, d, inner;
    if (axis < 0 || axis >= r || V(c, ix)->rank != r - 1) return "an axis out of range";
    if (!around_axis(c, y, (int)axis, &outer, &d, &inner) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_ONE_HOT, numel(c, y));
    I->t[0] = T(c, ix), I->t[1] = T(c, vals), I->t[2] = T(c, y);
    I->p[OH_DEPTH] = d, I->p[OH_INNER] = inner;
    return NULL;
}

/* ReverseSequence (any dtype; batch and time axes 0 and 1, lengths int64 / int32): MP_CU_REVERSE_SEQ, a
 * thread per element. It is its own gradient. */
static const char *lower_reverse_seq(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), lens = vin(n, 1), y = vout(n, 0);
    if (x < 0 || lens < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype) return "operands other than X, lengths and Y of X's dtype";
    if (V(c, lens)->dtype != MP_INT64 && V(c, lens)->dtype != MP_INT32) return "lengths other than int64 / int32";
    if (tview(c, x) || tview(c, y)) return "a transposed view operand";
    int64_t ba = mp_attr_int(n, "batch_axis", 1), ta = mp_attr_int(n, "time_axis", 0), str[MP_CU_MAX_RANK];
    int r = strides_of(c, x, str);
    if (r < 2 || ba < 0 || ba > 1 || ta < 0 || ta > 1 || ba == ta) return "batch_axis and time_axis other than 0 and 1";
    if (!numel(c, y) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_REVERSE_SEQ, numel(c, y));
    I->t[0] = T(c, x), I->t[1] = T(c, lens), I->t[2] = T(c, y);
    I->p[RSQ_T_STRIDE] = str[ta], I->p[RSQ_T_SIZE] = dim(c, x, (int)ta);
    I->p[RSQ_B_STRIDE] = str[ba], I->p[RSQ_B_SIZE] = dim(c, x, (int)ba);
    return NULL;
}

/* LRN and LRNGrad (float32 / float64, as runtime/cpu_conv.c and cpu_grad.c): MP_CU_LRN, a thread per
 * element recomputing its channel windows' sums. */
static const char *lower_lrn(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "LRNGrad");
    int32_t x = vin(n, grad ? 1 : 0), y = vout(n, 0);
    int32_t operands[3] = {vin(n, 0), grad ? x : y, grad ? y : -1}; /* X, Y or dY, X, dX */
    if (x < 0 || y < 0 || operands[0] < 0) return "missing operands";
    for (int k = 0; k < 3; k++) {
        if (operands[k] < 0) continue;
        if (!is_f32(c, operands[k]) && V(c, operands[k])->dtype != MP_DOUBLE) return "a type other than float32 / float64";
        if (tview(c, operands[k])) return "a transposed view operand";
    }
    int64_t size = mp_attr_int(n, "size", 0);
    if (size < 1) return "a size below 1";
    if (V(c, x)->rank < 2 || numel(c, y) != numel(c, x)) return "an input of rank < 2 or an output of another size";
    int64_t C = dim(c, x, 1), planes = dim(c, x, 0) * C;
    if (!numel(c, y) || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_LRN, numel(c, y));
    I->p[LRN_KIND] = grad ? LRNK_DX : LRNK_FWD, I->p[LRN_C] = C, I->p[LRN_PER] = numel(c, x) / planes, I->p[LRN_SIZE] = size;
    I->f[0] = mp_attr_float(n, "alpha", 1e-4f), I->f[1] = mp_attr_float(n, "beta", 0.75f), I->f[2] = mp_attr_float(n, "bias", 1.0f);
    for (int k = 0; k < 3; k++) I->t[k] = T(c, operands[k]);
    return NULL;
}

/* What the gathers and scatters by index (Elements, ND) check alike: data, int32/int64 indices, for a
 * scatter float updates, all of one dtype and none a transposed view; *red the scatter's reduction (none,
 * add, mul, max, min: 0..4; a gather's 0). */
static const char *index_operands(cg *c, const mp_node *n, bool scatter, int32_t *data, int32_t *idx, int32_t *upd,
                                  int32_t *y, int *red)
{
    static const char *const reds[] = {"none", "add", "mul", "max", "min"};
    *data = vin(n, 0), *idx = vin(n, 1), *upd = scatter ? vin(n, 2) : -1, *y = vout(n, 0);
    if (*data < 0 || *idx < 0 || *y < 0 || (scatter && *upd < 0)) return "missing operands";
    if (V(c, *idx)->dtype != MP_INT64 && V(c, *idx)->dtype != MP_INT32) return "indices other than int32/int64";
    if (tview(c, *data) || tview(c, *idx) || tview(c, *y) || (scatter && tview(c, *upd))) return "a transposed view operand";
    if (V(c, *data)->dtype != V(c, *y)->dtype || (scatter && V(c, *upd)->dtype != V(c, *y)->dtype))
        return "operands of other than one dtype";
    if (scatter && !mp_dtype_is_float(V(c, *y)->dtype)) return "a scatter other than float";
    *red = scatter ? pick_name(mp_attr_str(n, "reduction", "none"), reds, 5) : 0;
    return *red < 0 ? "an unknown reduction" : NULL;
}

/* GatherElements (any dtype) and ScatterElements (float; reduction none, add, mul, max, min), as
 * runtime/cpu_tensor.c: MP_CU_GATHER_ELEMENTS a thread per output element; MP_CU_SCATTER_ELEMENTS a
 * thread per output element gathering the updates that hit it (GatherElements' gradient: Zeros, then
 * the add), in the CPU's order, no atomics. */
static const char *lower_elements(cg *c, const mp_node *n)
{
    /* Scatter: ScatterElements' name at opsets 9-10 */
    bool scatter = !strcmp(n->op_type, "ScatterElements") || !strcmp(n->op_type, "Scatter");
    int32_t data, idx, upd, y;
    int red;
    const char *e = index_operands(c, n, scatter, &data, &idx, &upd, &y, &red);
    if (e) return e;
    int r = V(c, data)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", 0), r);
    if (axis < 0 || axis >= r || V(c, idx)->rank != r || (scatter && numel(c, upd) != numel(c, idx))) return "a bad axis or index shape";
    for (int a = 0; a < r; a++)
        if (a != axis && dim(c, idx, a) > dim(c, data, a)) return "indices wider than the data";
    if (!numel(c, y)) return NULL;
    EMIT(I, scatter ? MP_CU_SCATTER_ELEMENTS : MP_CU_GATHER_ELEMENTS, numel(c, y));
    I->t[0] = T(c, data), I->t[1] = T(c, idx), I->t[2] = T(c, scatter ? upd : y), I->t[3] = scatter ? T(c, y) : -1;
    I->p[GE_RANK] = r, I->p[GE_AXIS] = axis, I->p[GE_RED] = red;
    dims_of(c, data, I->p + GE_DIMS + dims_of(c, idx, I->p + GE_DIMS));
    return NULL;
}

/* DepthToSpace (DCR, CRD), SpaceToDepth: runtime/cpu_tensor.c's 6-D transpose, a COPY over the output
 * split in 6 dims reading X with the permuted strides. */
static const char *lower_depth_space(cg *c, const mp_node *n)
{
    bool to_space = !strcmp(n->op_type, "DepthToSpace");
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t b = mp_attr_int(n, "blocksize", 0), sd[6], ss[6], perm[6], od[6], src[6], os[6];
    if (x < 0 || y < 0 || V(c, x)->rank != 4 || V(c, y)->rank != 4 || b <= 0) return "other than 4-D tensors and a positive blocksize";
    if (tview(c, x)) return "a transposed view input";
    int64_t N = dim(c, x, 0), C = dim(c, x, 1), H = dim(c, x, 2), W = dim(c, x, 3);
    if (to_space) {
        bool crd = !strcmp(mp_attr_str(n, "mode", "DCR"), "CRD");
        int64_t c2 = C / (b * b), dcr[6] = {N, b, b, c2, H, W}, crdd[6] = {N, c2, b, b, H, W};
        static const int64_t pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
        if (C % (b * b) || dim(c, y, 1) != c2 || dim(c, y, 2) != H * b || dim(c, y, 3) != W * b) return "an output shape that disagrees";
        memcpy(sd, crd ? crdd : dcr, sizeof sd), memcpy(perm, crd ? pc : pd, sizeof perm);
    } else {
        int64_t d6[6] = {N, C, H / b, b, W / b, b};
        static const int64_t p6[6] = {0, 3, 5, 1, 2, 4};
        if (H % b || W % b || dim(c, y, 1) != C * b * b || dim(c, y, 2) != H / b || dim(c, y, 3) != W / b) return "an output shape that disagrees";
        memcpy(sd, d6, sizeof sd), memcpy(perm, p6, sizeof perm);
    }
    contiguous(6, sd, ss); /* X's (row-major) strides over the split dims */
    for (int i = 0; i < 6; i++) od[i] = sd[perm[i]], src[i] = ss[perm[i]];
    contiguous(6, od, os);
    return copy(c, x, y, 6, od, 0, src, 0, os);
}

/* Tile (repeats a constant input): a COPY over the output viewed as (rep, d) pairs (only the axes
 * repeated more than once split), X read with stride 0 along each rep. */
static const char *lower_tile(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t rep[MP_CU_MAX_RANK], xs[MP_CU_MAX_RANK], yd[MP_CU_MAX_RANK], ys[MP_CU_MAX_RANK];
    int64_t dims[MP_CU_MAX_RANK], ss[MP_CU_MAX_RANK], ds[MP_CU_MAX_RANK];
    if (x < 0 || y < 0) return "missing operands";
    int r = V(c, x)->rank, k = 0;
    if (V(c, y)->rank != r || konst_ints(c, vin(n, 1), rep, MP_CU_MAX_RANK) != r) return "repeats that are not a constant, one per axis";
    strides_of(c, x, xs);
    dims_of(c, y, yd);
    contiguous(r, yd, ys);
    for (int a = 0; a < r; a++) {
        int64_t d = dim(c, x, a);
        bool split = rep[a] > 1 && d > 1;
        if (rep[a] < 0 || yd[a] != d * rep[a]) return "an output that is not the input repeated";
        if (k + split >= MP_CU_MAX_RANK) return "more than 8 dims once the repeats are split";
        if (split) dims[k] = rep[a], ss[k] = 0, ds[k++] = d * ys[a]; /* the copies */
        dims[k] = split ? d : yd[a], ss[k] = d == 1 ? 0 : xs[a], ds[k++] = ys[a];
    }
    return copy(c, x, y, k, dims, 0, ss, 0, ds);
}

/* ---- GEMMs -------------------------------------------------------------------------------- */

/* y[b] = alpha op(a[b]) op(b[b]) (+ y[b] when beta_one), ta / tb transposing the
 * operands' logical last two axes; a transposed view flips its flag, so it is
 * read in place. Batch dims: each operand's are y's full batch or absent
 * (stride 0); sum_batch lets y have none, every batch adding into it. */
static const char *gemm(cg *c, int32_t a, bool ta, int32_t b, bool tb, int32_t y, double alpha, bool beta_one,
                        bool sum_batch)
{
    int ra = V(c, a)->rank, rb = V(c, b)->rank, ry = V(c, y)->rank;
    if (ra < 2 || rb < 2 || ry < 2) return "a 1-D operand";
    mp_dtype dt = V(c, y)->dtype;
    if (!is_f32_or_half(c, y) || V(c, a)->dtype != dt || V(c, b)->dtype != dt) return "operands other than one of float32, bfloat16, float16";
    int64_t M = dim(c, a, ra - (ta ? 1 : 2)), K = dim(c, a, ra - (ta ? 2 : 1));
    int64_t Kb = dim(c, b, rb - (tb ? 1 : 2)), N = dim(c, b, rb - (tb ? 2 : 1));
    if (K != Kb || dim(c, y, ry - 2) != M || dim(c, y, ry - 1) != N) return "matrix dims that do not agree";
    /* the full batch: a's and b's batch dims broadcast */
    int rf = (ra > rb ? ra : rb) - 2;
    int64_t batch = 1;
    for (int i = 0; i < rf; i++) {
        int ia = i - (rf - (ra - 2)), ib = i - (rf - (rb - 2));
        int64_t da = ia >= 0 ? dim(c, a, ia) : 1, db = ib >= 0 ? dim(c, b, ib) : 1;
        batch *= da > db ? da : db;
    }
    int64_t stride[3];
    const int32_t ops[3] = {a, b, y};
    for (int k = 0; k < 3; k++) {
        int r = V(c, ops[k])->rank - 2;
        int64_t nb = 1;
        for (int i = 0; i < r; i++) nb *= dim(c, ops[k], i);
        if (nb != 1 && nb != batch) return "batch dims broadcast partly";
        stride[k] = nb == 1 && batch > 1 ? 0 : dim(c, ops[k], r) * dim(c, ops[k], r + 1);
    }
    if (batch > 1 && !stride[2] && !sum_batch) return "an output without the batch dims";
    /* a 16-bit output summed over batches: the CPU (cpu_grad.c matmul_grad, widened) adds each batch into
     * an fp32 C and rounds the sum to 16 bits once, so the batches add into the workspace as fp32 (cuBLAS
     * and the host round it to fp32 after each batch), then one MAP rounds it into y */
    bool via_ws = batch > 1 && !stride[2] && dt != MP_FLOAT;
    if (via_ws && beta_one) return "a 16-bit output summed over batches onto its own value";
    if (!M || !N) return NULL;
    bool sa = ta != tview(c, a), sb = tb != tview(c, b); /* transposed as stored */
    EMIT(I, MP_CU_GEMM, (stride[2] ? batch : 1) * M * N);
    I->t[0] = T(c, a), I->t[1] = T(c, b), I->t[2] = via_ws ? MP_CU_WS32 : T(c, y);
    int64_t *p = I->p;
    p[GM_M] = M, p[GM_N] = N, p[GM_K] = K, p[GM_TA] = sa, p[GM_TB] = sb;
    p[GM_LDA] = sa ? M : K, p[GM_LDB] = sb ? K : N;
    p[GM_BATCH] = batch, p[GM_SA] = stride[0], p[GM_SB] = stride[1], p[GM_SC] = batch > 1 ? stride[2] : M * N;
    p[GM_BETA_ONE] = beta_one;
    I->f[0] = alpha;
    if (!K) return "an empty inner dimension";
    if (!via_ws) return NULL;
    need_ws(c, M * N * (int64_t)sizeof(float));
    return round_from_ws(c, MP_CU_WS32, y);
}

static const char *lower_gemm(cg *c, const mp_node *n)
{
    int32_t a = vin(n, 0), b = vin(n, 1), bias = vin(n, 2), y = vout(n, 0);
    double beta = mp_attr_float(n, "beta", 1.0f);
    bool with_bias = bias >= 0 && beta != 0;
    if (with_bias) { /* y = beta C broadcast, then the GEMM adds into it */
        /* a 16-bit y holds beta C exactly only as a copy of a C of its type (the CPU adds it unrounded) */
        if (mp_dtype_is_half(V(c, y)->dtype) && (beta != 1 || V(c, bias)->dtype != V(c, y)->dtype))
            return "a 16-bit Gemm with beta other than 1 or C of another dtype";
        const char *e = map(c, MP_FN_SCALE, 1, &bias, y, beta, 1);
        if (e) return e;
    }
    return gemm(c, a, mp_attr_int(n, "transA", 0) != 0, b, mp_attr_int(n, "transB", 0) != 0, y,
                mp_attr_float(n, "alpha", 1.0f), with_bias, false);
}

static const char *lower_matmul(cg *c, const mp_node *n)
{
    int32_t p = vin(n, 0), q = vin(n, 1), y = vout(n, 0);
    if (!strcmp(n->op_type, "MatMulGradA")) return gemm(c, p, false, q, true, y, 1, false, true); /* dY B^T */
    if (!strcmp(n->op_type, "MatMulGradB")) return gemm(c, p, true, q, false, y, 1, false, true); /* A^T dY */
    return gemm(c, p, false, q, false, y, 1, false, false);
}

/* ---- reductions, softmax, losses ----------------------------------------------------------- */

/* y = x summed over the axes it was broadcast along. */
static const char *lower_sum_to(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t xs[MP_CU_MAX_RANK], ad[MP_CU_MAX_RANK], as[MP_CU_MAX_RANK], bd[MP_CU_MAX_RANK], bs[MP_CU_MAX_RANK];
    int rx = strides_of(c, x, xs), ry = V(c, y)->rank, rb = 0;
    if (ry > rx) return "an output of higher rank";
    for (int a = 0; a < rx; a++) {
        int b = a - (rx - ry);
        bool reduced = b < 0 || (dim(c, y, b) == 1 && dim(c, x, a) != 1);
        if (b >= 0) ad[b] = dim(c, y, b), as[b] = reduced ? 0 : xs[a];
        if (reduced) bd[rb] = dim(c, x, a), bs[rb++] = xs[a];
    }
    return reduce(c, x, y, ry, ad, as, rb, bd, bs, 1);
}

static const char *lower_gap(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "GlobalAveragePoolGrad"), max = !strcmp(n->op_type, "GlobalMaxPool");
    bool lp = !strcmp(n->op_type, "GlobalLpPool");
    int32_t x = vin(n, 0), y = vout(n, 0), big = grad ? y : x; /* [N, C, spatial..] */
    const char *e = plain_f32(c, n);
    if (e) return e;
    if (V(c, big)->rank < 2) return "rank < 2";
    int64_t planes = dim(c, big, 0) * dim(c, big, 1), sp = planes ? numel(c, big) / planes : 0, one = 1;
    if (grad) return map(c, MP_FN_SCALE, 1, &x, y, 1, (double)sp);
    if (max) return reduce_mode(c, x, y, 1, &planes, &sp, 1, &sp, &one, 1, RED_MAX);
    if (lp) { /* (sum |x|^p)^(1/p) per plane, p an integer attribute (2), as runtime/cpu_conv.c run_global */
        int32_t at = c->n;
        if ((e = reduce_mode(c, x, y, 1, &planes, &sp, 1, &sp, &one, 1, RED_LP))) return e;
        mp_cu_instr *I = emitted(c, at);
        if (I) I->f[2] = (double)mp_attr_int(n, "p", 2);
        return NULL;
    }
    return reduce(c, x, y, 1, &planes, &sp, 1, &sp, &one, (double)sp);
}

/* The axes a Reduce* node (or its gradient) reduces, read as runtime/cpu_reduce.c
 * and cpu_grad.c read them: input 1 (from opset input_since; the gradients
 * whenever they have it) or the attribute. None: every axis, or none with
 * noop_with_empty_axes. */
static const char *reduce_axes(cg *c, const mp_node *n, int rank, bool grad, int64_t input_since, bool *red)
{
    int64_t ax[MP_CU_MAX_RANK];
    int na = 0;
    if (grad ? vin(n, 1) >= 0 : mp_graph_opset(c->g, n->domain) >= input_since) {
        const mp_tensor *k = vin(n, 1) >= 0 ? V(c, vin(n, 1))->konst : NULL;
        if (vin(n, 1) >= 0 && !(k && !k->numel) && (na = konst_ints(c, vin(n, 1), ax, MP_CU_MAX_RANK)) < 0)
            return "axes that are not constants";
    } else {
        const int64_t *a;
        na = mp_attr_ints(n, "axes", &a);
        if (na > MP_CU_MAX_RANK) return "too many axes";
        for (int i = 0; i < na; i++) ax[i] = a[i];
        if (na < 0) na = 0;
    }
    bool noop = mp_attr_int(n, "noop_with_empty_axes", 0) != 0;
    for (int a = 0; a < rank; a++) red[a] = !na && !noop;
    for (int i = 0; i < na; i++) {
        int64_t a = norm_axis(ax[i], rank);
        if (a < 0 || a >= (rank ? rank : 1)) return "an axis out of range";
        if (a < rank) red[a] = true;
    }
    return NULL;
}

static const struct {
    const char *op;
    int64_t input_since; /* the opset from which axes are an input */
    bool mean, grad;
    int mode;            /* RED_*: runtime/cpu_reduce.c's reduction */
} reduce_ops[] = {
    {"ReduceSum", 13, false, false, RED_SUM}, {"ReduceMean", 18, true, false, RED_SUM},
    {"ReduceSumGrad", 0, false, true, RED_SUM}, {"ReduceMeanGrad", 0, true, true, RED_SUM},
    {"ReduceMax", 18, false, false, RED_MAX}, {"ReduceMin", 18, false, false, RED_MIN},
    {"ReduceProd", 18, false, false, RED_PROD}, {"ReduceL1", 18, false, false, RED_L1},
    {"ReduceL2", 18, false, false, RED_L2}, {"ReduceSumSquare", 18, false, false, RED_SUMSQ},
    {"ReduceLogSum", 18, false, false, RED_LOGSUM}, {"ReduceLogSumExp", 18, false, false, RED_LOGSUMEXP},
};

/* ReduceSum / ReduceMean and the other Reduce* (float types): one REDUCE over
 * the reduced axes of x (keepdims changes no element order) in the mode of the
 * reduction; a no-op is a copy. The gradients of ReduceSum / ReduceMean: dY
 * read with stride 0 along the reduced axes, scaled by 1 / count for the mean
 * (the others' gradients are forward ops). */
static const char *lower_reduce(cg *c, const mp_node *n)
{
    size_t k = 0;
    while (strcmp(reduce_ops[k].op, n->op_type)) k++;
    bool mean = reduce_ops[k].mean, grad = reduce_ops[k].grad;
    int32_t x = vin(n, 0), y = vout(n, 0), big = grad ? y : x;
    if (x < 0 || y < 0) return "missing operands";
    if (!mp_dtype_is_float(V(c, x)->dtype) || V(c, x)->dtype != V(c, y)->dtype) return "operands other than one float type";
    int r = V(c, big)->rank;
    bool red[MP_CU_MAX_RANK];
    int64_t bs[MP_CU_MAX_RANK], ad[MP_CU_MAX_RANK], as[MP_CU_MAX_RANK], bd[MP_CU_MAX_RANK], rs[MP_CU_MAX_RANK], cnt = 1, kept = 1;
    const char *e = reduce_axes(c, n, r, grad, reduce_ops[k].input_since, red);
    if (e) return e;
    strides_of(c, big, bs);
    int ra = 0, rb = 0;
    for (int a = 0; a < r; a++) {
        int64_t d = dim(c, big, a);
        if (red[a]) bd[rb] = d, rs[rb++] = bs[a], cnt *= d;
        else ad[ra] = d, as[ra++] = bs[a], kept *= d;
    }
    if (numel(c, grad ? x : y) != kept) return "an output whose size is not the reduction's";
    int mode = reduce_ops[k].mode;
    /* nothing reduced: noop_with_empty_axes (a copy, as the CPU's), or a scalar, reduced once unless a sum */
    if (!grad && !rb && (r > 0 || mode == RED_SUM || mp_attr_int(n, "noop_with_empty_axes", 0))) return copy_value(c, x, y);
    if (!grad) return reduce_mode(c, x, y, ra, ad, as, rb, bd, rs, mean ? (double)cnt : 1, mode);
    if (tview(c, x)) return "a transposed view operand";
    int64_t kd[MP_CU_MAX_RANK], str[1][MP_CU_MAX_RANK];
    for (int a = 0; a < r; a++) kd[a] = red[a] ? 1 : dim(c, y, a);
    contiguous(r, kd, str[0]);
    for (int a = 0; a < r; a++) str[0][a] = red[a] ? 0 : str[0][a];
    return map_views(c, MP_FN_SCALE, 1, &x, (const int64_t(*)[MP_CU_MAX_RANK])str, y, mean && cnt ? 1.0 / (double)cnt : 1.0, 1);
}

/* outer x d x inner of the softmax axis (opset < 13: the dims from axis on, flattened). */
static const char *softmax_geom(cg *c, const mp_node *n, int32_t x, int64_t *outer, int64_t *d, int64_t *inner)
{
    int r = V(c, x)->rank;
    bool old = mp_graph_opset(c->g, "") < 13;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", old ? 1 : -1), r);
    if (axis < 0 || axis > r || (!old && axis == r)) return "axis out of range";
    *outer = *d = *inner = 1;
    for (int a = 0; a < r; a++) {
        if (a < axis) *outer *= dim(c, x, a);
        else if (a == axis || old) *d *= dim(c, x, a);
        else *inner *= dim(c, x, a);
    }
    return NULL;
}

static const char *softmax(cg *c, int kind, int64_t outer, int64_t d, int64_t inner, int32_t a, int32_t b, int32_t out)
{
    EMIT(I, MP_CU_SOFTMAX, outer * inner);
    I->t[0] = T(c, a), I->t[1] = T(c, b), I->t[2] = T(c, out);
    I->p[0] = outer, I->p[1] = d, I->p[2] = inner, I->p[3] = kind;
    return NULL;
}

static const char *lower_softmax(cg *c, const mp_node *n)
{
    int64_t outer, d, inner;
    const char *e = plain_f32(c, n);
    if (e || (e = softmax_geom(c, n, vout(n, 0), &outer, &d, &inner))) return e;
    if (!strcmp(n->op_type, "SoftmaxGrad")) return softmax(c, SM_GRAD, outer, d, inner, vin(n, 0), vin(n, 1), vout(n, 0));
    if (!strcmp(n->op_type, "LogSoftmaxGrad")) return softmax(c, SM_LOG_GRAD, outer, d, inner, vin(n, 0), vin(n, 1), vout(n, 0));
    return softmax(c, strcmp(n->op_type, "LogSoftmax") ? SM_SOFTMAX : SM_LOG, outer, d, inner, vin(n, 0), vout(n, 0), -1);
}

/* Hardmax (float32 / float64; the axis as Softmax's, coerced to 2-D before opset 13): MP_CU_ARG in its hard
 * mode, a thread per line writing 1 at the first maximum and 0 elsewhere. */
static const char *lower_hardmax(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t outer, d, inner;
    if (x < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype || (!is_f32(c, x) && V(c, x)->dtype != MP_DOUBLE))
        return "operands other than one float32 / float64 type";
    if (tview(c, x) || tview(c, y)) return "a transposed view operand";
    const char *e = softmax_geom(c, n, x, &outer, &d, &inner);
    if (e || !outer || !d || !inner || T(c, y) < 0) return e;
    EMIT(I, MP_CU_ARG, outer * inner);
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    I->p[AM_D] = d, I->p[AM_INNER] = inner, I->p[AM_MAX] = 1, I->p[AM_HARD] = 1;
    return NULL;
}

/* SCE p[]: N, C, D, mean, ignore_index, none (NLL only); the scores (or log_prob) are [N, C, D..]. */
static const char *sce_params(cg *c, const mp_node *n, int32_t scores, int32_t labels, bool nll, int64_t *p)
{
    const char *red = mp_attr_str(n, "reduction", "mean");
    if (strcmp(red, "mean") && strcmp(red, "sum") && (!nll || strcmp(red, "none"))) return "a reduction other than mean or sum";
    if (scores < 0 || labels < 0) return "missing operands";
    if (V(c, scores)->rank < 2 || tview(c, scores) || tview(c, labels)) return "scores of rank < 2";
    if (V(c, labels)->dtype != MP_INT64 && V(c, labels)->dtype != MP_INT32) return "labels other than int32/int64";
    p[SCE_N] = dim(c, scores, 0), p[SCE_C] = dim(c, scores, 1);
    p[SCE_D] = (p[SCE_N] * p[SCE_C]) != 0 ? numel(c, scores) / (p[SCE_N] * p[SCE_C]) : 0;
    if (numel(c, labels) != p[SCE_N] * p[SCE_D]) return "labels that disagree with the scores";
    p[SCE_MEAN] = !strcmp(red, "mean");
    p[SCE_HAS_IGNORE] = mp_node_attr(n, "ignore_index") != NULL;
    p[SCE_IGNORE] = mp_attr_int(n, "ignore_index", 0);
    p[SCE_NONE] = !strcmp(red, "none"), p[SCE_NLL] = nll;
    return NULL;
}

/* SoftmaxCrossEntropyLoss / Grad (no weights), NegativeLogLikelihoodLoss / Grad (runtime/cpu_norm.c
 * run_nll, cpu_grad.c xent_grad with nll: reductions none, sum, mean; ignore_index; class weights). */
static const char *lower_sce(cg *c, const mp_node *n)
{
    bool grad = strstr(n->op_type, "Grad") != NULL, nll = !strncmp(n->op_type, "Negative", 8);
    int32_t scores = vin(n, grad ? 1 : 0), labels = vin(n, grad ? 2 : 1), w = vin(n, grad ? 3 : 2);
    int64_t p[MP_CU_NP] = {0};
    const char *e = plain_f32(c, n);
    if (e || (e = sce_params(c, n, scores, labels, nll, p))) return e;
    if (w >= 0 && !nll) return "class weights";
    if (w >= 0 && (numel(c, w) != p[SCE_C] || !mp_dtype_is_float(V(c, w)->dtype) || tview(c, w))) return "weights other than C floats";
    if (!grad) {
        int32_t lp = nll ? scores : vout(n, 1);
        if (lp < 0 || T(c, lp) < 0) return "no log_prob output";
        if (p[SCE_NONE] && numel(c, vout(n, 0)) != p[SCE_N] * p[SCE_D]) return "a loss of other than one entry per item";
        /* A 16-bit log_prob: the loss recomputes the fp32 log_prob from the scores, so it runs before the
         * SOFTMAX, which may write log_prob over the scores (passes/train.c in_place_ops) */
        bool recompute = !nll && mp_dtype_is_half(V(c, lp)->dtype);
        if (!nll && !recompute && (e = softmax(c, 1, p[SCE_N], p[SCE_C], p[SCE_D], scores, lp, -1))) return e;
        if (!p[SCE_NONE] || numel(c, vout(n, 0))) {
            EMIT(I, MP_CU_SCE_LOSS, p[SCE_NONE] ? numel(c, vout(n, 0)) : 1);
            memcpy(I->p, p, sizeof p);
            I->t[0] = T(c, lp), I->t[1] = T(c, labels), I->t[2] = T(c, vout(n, 0)), I->t[3] = T(c, w);
            if (recompute) I->t[4] = T(c, scores); /* the fp32 log_prob, recomputed; x0 is not read */
        }
        if (recompute && (e = softmax(c, 1, p[SCE_N], p[SCE_C], p[SCE_D], scores, lp, -1))) return e;
        return NULL;
    }
    need_ws(c, sizeof(double));
    for (int phase = 0; phase < 2; phase++) {
        if (phase && !numel(c, vout(n, 0))) break;
        EMIT(I, MP_CU_SCE_GRAD, phase ? numel(c, vout(n, 0)) : 1);
        memcpy(I->p, p, sizeof p);
        I->p[SCE_PHASE] = phase;
        I->t[0] = T(c, vin(n, 0)), I->t[1] = T(c, scores), I->t[2] = T(c, labels), I->t[3] = T(c, vout(n, 0));
        I->t[4] = MP_CU_WS, I->t[5] = T(c, w);
    }
    return NULL;
}

/* ---- normalizations -------------------------------------------------------------------------- */

/* LayerNormalization, RMSNormalization (runtime/cpu_norm.c run_layer_norm: no mean, no bias) and their
 * gradients (cpu_grad.c layer_norm_grad; RMS: no mean term): LN_ROWS, then LN_COLS for dScale, dBias. */
static const char *lower_layer_norm(cg *c, const mp_node *n)
{
    bool grad = strstr(n->op_type, "Grad") != NULL, rms = !strncmp(n->op_type, "RMS", 3);
    int32_t x = vin(n, grad ? 1 : 0), sc = vin(n, grad ? 2 : 1);
    const char *e = plain_f32(c, n);
    if (e) return e;
    int r = V(c, x)->rank;
    int64_t axis = norm_axis(mp_attr_int(n, "axis", -1), r), inner = 1;
    if (axis < 0 || axis >= r) return "axis out of range";
    for (int a = (int)axis; a < r; a++) inner *= dim(c, x, a);
    if (rms && !grad && vin(n, 2) >= 0) return "a third input";
    if (sc < 0 || numel(c, sc) != inner || (!grad && vin(n, 2) >= 0 && numel(c, vin(n, 2)) != inner))
        return "a scale or bias that is broadcast";
    int64_t rows = inner ? numel(c, x) / inner : 0;
    if (!rows || !inner) return NULL;
    EMIT(I, MP_CU_LN_ROWS, rows);
    I->p[0] = rows, I->p[1] = inner, I->p[2] = grad, I->p[LN_RMS] = rms, I->f[0] = mp_attr_float(n, "epsilon", 1e-5f);
    if (!grad) {
        I->t[0] = T(c, x), I->t[1] = T(c, sc), I->t[2] = T(c, vin(n, 2)), I->t[3] = T(c, vout(n, 0));
        I->t[4] = T(c, vout(n, 1)), I->t[5] = T(c, vout(n, 2));
        return NULL;
    }
    need_ws(c, 2 * rows * (int64_t)sizeof(double));
    I->t[0] = T(c, vin(n, 0)), I->t[1] = T(c, x), I->t[2] = T(c, sc), I->t[3] = T(c, vout(n, 0)), I->t[4] = MP_CU_WS;
    if (T(c, vout(n, 1)) < 0 && T(c, vout(n, 2)) < 0) return NULL;
    EMIT(J, MP_CU_LN_COLS, inner);
    J->p[0] = rows, J->p[1] = inner;
    J->t[0] = T(c, vin(n, 0)), J->t[1] = T(c, x), J->t[2] = MP_CU_WS, J->t[3] = T(c, vout(n, 1)), J->t[4] = T(c, vout(n, 2));
    return NULL;
}

static const char *lower_batch_norm(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "BatchNormalizationGrad");
    int32_t x = vin(n, grad ? 1 : 0);
    const char *e = plain_f32(c, n);
    if (e) return e;
    int64_t opset = mp_graph_opset(c->g, n->domain);
    if (V(c, x)->rank < 2) return "rank < 2";
    if (!grad && opset < 9 && mp_attr_int(n, "spatial", 1) == 0) return "spatial=0";
    bool train = grad || opset >= 14 ? mp_attr_int(n, "training_mode", 0) != 0 : vout(n, 1) >= 0;
    int64_t N = dim(c, x, 0), C = dim(c, x, 1), S = (N * C) != 0 ? numel(c, x) / (N * C) : 0;
    if (!N || !C) return NULL;
    double eps = mp_attr_float(n, "epsilon", 1e-5f);
    need_ws(c, (grad ? 4 : 2) * C * (int64_t)sizeof(double));
    EMIT(I, MP_CU_BN_STATS, C);
    int mode = grad ? (train ? BN_GRAD_TRAIN : BN_GRAD_INFER) : (train ? BN_FWD_TRAIN : BN_FWD_INFER);
    I->p[BN_N] = N, I->p[BN_C] = C, I->p[BN_S] = S, I->p[BN_MODE] = mode;
    I->f[0] = eps, I->f[1] = mp_attr_float(n, "momentum", 0.9f);
    const int32_t fwd_ops[7] = {vin(n, 0), vin(n, 3), vin(n, 4), vout(n, 1), vout(n, 2), vout(n, 3), vout(n, 4)};
    const int32_t grad_ops[7] = {vin(n, 0), vin(n, 1), vin(n, 3), vin(n, 4), vout(n, 1), vout(n, 2), -1};
    for (int k = 0; k < 7; k++) I->t[k] = T(c, grad ? grad_ops[k] : fwd_ops[k]);
    I->t[7] = MP_CU_WS;
    if (T(c, vout(n, 0)) < 0) return NULL;
    EMIT(J, MP_CU_BN_APPLY, numel(c, x));
    memcpy(J->p, I->p, 4 * sizeof *I->p);
    J->f[0] = eps;
    J->t[0] = T(c, vin(n, 0)), J->t[1] = T(c, vin(n, 1)), J->t[2] = T(c, vin(n, 2)), J->t[3] = MP_CU_WS;
    J->t[4] = T(c, vout(n, 0));
    return NULL;
}

/* InstanceNormalization, GroupNormalization (runtime/cpu_norm.c) and their gradients (cpu_grad.c
 * group_norm_grad): LN_ROWS over a row per (n, group) of C / G channels' elements, the scale (and bias)
 * entry of each element per channel or per group (opset 18); the gradient keeps each row's mean and
 * rstd in the workspace for LN_COLS, a thread per scale entry summing over n, then its elements. */
static const char *lower_group_norm(cg *c, const mp_node *n)
{
    bool grad = strstr(n->op_type, "Grad") != NULL, inst = !strncmp(n->op_type, "Instance", 8);
    int32_t x = vin(n, grad ? 1 : 0), sc = vin(n, grad ? 2 : 1), bias = grad ? -1 : vin(n, 2);
    const char *e = plain_f32(c, n);
    if (e) return e;
    if (x < 0 || sc < 0 || (!grad && bias < 0) || (grad && vin(n, 0) < 0)) return "missing operands";
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && !is_f32(c, n->in[k])) return "operands other than float32";
    if (V(c, x)->rank < 2) return "rank < 2";
    int64_t N = dim(c, x, 0), C = dim(c, x, 1), G = inst ? C : mp_attr_int(n, "num_groups", 0), ns = numel(c, sc);
    if (G < 1 || C % G) return "num_groups that do not divide the channels";
    bool per_channel = ns == C;
    if ((!per_channel && ns != G) || (!grad && numel(c, bias) != ns)) return "a scale or bias of other than C or num_groups entries";
    int64_t per = (N * C) != 0 ? numel(c, x) / (N * C) : 0, cg = C / G, len = cg * per, rows = N * G;
    int32_t ds = grad ? vout(n, 1) : -1, db = grad ? vout(n, 2) : -1;
    if (!rows || !len) { /* no elements: the CPU's sums stay 0 */
        e = T(c, ds) >= 0 ? fill(c, ds, 0) : NULL;
        return e ? e : T(c, db) >= 0 ? fill(c, db, 0) : NULL;
    }
    EMIT(I, MP_CU_LN_ROWS, rows);
    I->p[LN_ROWS_N] = rows, I->p[LN_N] = len, I->p[LN_MODE] = grad, I->p[LN_G] = G;
    I->p[LN_SA] = per_channel ? cg : 1, I->p[LN_SD] = per_channel ? per : len, I->p[LN_INST] = inst && !grad;
    I->f[0] = mp_attr_float(n, "epsilon", 1e-5f);
    if (!grad) {
        I->t[0] = T(c, x), I->t[1] = T(c, sc), I->t[2] = T(c, bias), I->t[3] = T(c, vout(n, 0));
        return NULL;
    }
    need_ws(c, 2 * rows * (int64_t)sizeof(double));
    I->t[0] = T(c, vin(n, 0)), I->t[1] = T(c, x), I->t[2] = T(c, sc), I->t[3] = T(c, vout(n, 0)), I->t[4] = MP_CU_WS;
    if (T(c, ds) < 0 && T(c, db) < 0) return NULL;
    EMIT(J, MP_CU_LN_COLS, ns);
    J->p[0] = rows, J->p[1] = len, J->p[2] = G, J->p[3] = per_channel ? cg : 1, J->p[4] = per_channel ? per : len;
    J->t[0] = T(c, vin(n, 0)), J->t[1] = T(c, x), J->t[2] = MP_CU_WS, J->t[3] = T(c, ds), J->t[4] = T(c, db);
    return NULL;
}

/* ---- sliding windows ---------------------------------------------------------------------------- */

/* Window geometry of a forward input x [N, C, in..] and output y [N, M, out..]
 * with kernel extents kd: pads from the attributes or auto_pad, as
 * runtime/cpu_grad.c read_wgeom (the output extents are y's, so ceil_mode
 * needs no rounding here). */
static const char *window(cg *c, const mp_node *n, int32_t x, int32_t y, const int64_t *kd, int nk, int64_t *p)
{
    int r = V(c, x)->rank, sp = r - 2;
    if (r < 3 || V(c, y)->rank != r || sp > MP_CU_MAXSP) return "other than 1 to 3 spatial dims";
    if (nk != sp) return "a kernel of the wrong rank";
    const int64_t *ss, *ds, *ps;
    int ns = mp_attr_ints(n, "strides", &ss), nd = mp_attr_ints(n, "dilations", &ds), np = mp_attr_ints(n, "pads", &ps);
    if ((ns >= 0 && ns != sp) || (nd >= 0 && nd != sp) || (np >= 0 && np != 2 * sp)) return "strides, dilations or pads of the wrong length";
    const char *ap = mp_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!same && !valid && strcmp(ap, "NOTSET") && *ap) return "an unknown auto_pad";
    memset(p, 0, W_COUNT * sizeof *p);
    p[W_N] = dim(c, x, 0), p[W_C] = dim(c, x, 1), p[W_M] = dim(c, y, 1), p[W_NSP] = sp;
    p[W_INN] = p[W_OUTN] = p[W_KN] = 1;
    for (int i = 0; i < sp; i++) {
        p[W_IN + i] = dim(c, x, 2 + i), p[W_OUT + i] = dim(c, y, 2 + i), p[W_K + i] = kd[i];
        p[W_S + i] = ns >= 0 ? ss[i] : 1, p[W_D + i] = nd >= 0 ? ds[i] : 1;
        if (p[W_K + i] < 1 || p[W_S + i] < 1 || p[W_D + i] < 1) return "a kernel, stride or dilation < 1";
        if (same) {
            int64_t total = (p[W_OUT + i] - 1) * p[W_S + i] + (p[W_K + i] - 1) * p[W_D + i] + 1 - p[W_IN + i];
            if (total < 0) total = 0;
            p[W_PB + i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            p[W_PE + i] = total - p[W_PB + i];
        } else {
            p[W_PB + i] = np >= 0 && !valid ? ps[i] : 0, p[W_PE + i] = np >= 0 && !valid ? ps[sp + i] : 0;
            if (p[W_PB + i] < 0 || p[W_PE + i] < 0) return "negative pads";
        }
        p[W_INN] *= p[W_IN + i], p[W_OUTN] *= p[W_OUT + i], p[W_KN] *= p[W_K + i];
    }
    return NULL;
}

static const char *window_op(cg *c, int op, const int64_t *p, int64_t n, int32_t t0, int32_t t1, int32_t t2, int32_t t3)
{
    if (!n) return NULL;
    EMIT(I, op, n);
    memcpy(I->p, p, W_COUNT * sizeof *p);
    I->t[0] = T(c, t0), I->t[1] = T(c, t1), I->t[2] = T(c, t2), I->t[3] = T(c, t3);
    return NULL;
}

/* Conv, ConvGrad; ConvInteger (as runtime/cpu_quant.c: X's zero point per tensor, W's per tensor or per
 * output channel, an int32 Y) on the direct CONV with the zero points as x4, x5 (never cuDNN: integers). */
static const char *lower_conv(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "ConvGrad"), integer = !strcmp(n->op_type, "ConvInteger");
    int32_t dy = grad ? vin(n, 0) : -1, x = vin(n, grad ? 1 : 0), w = vin(n, grad ? 2 : 1), y = grad ? dy : vout(n, 0);
    int64_t p[W_COUNT], kd[MP_CU_MAX_RANK];
    const char *e = plain_f32(c, n);
    if (e) return e;
    if (x < 0 || w < 0 || y < 0) return "missing operands";
    if (integer && (!quant_int(c, x) || !quant_int(c, w) || V(c, y)->dtype != MP_INT32 || tview(c, x) || tview(c, w)))
        return "operands other than int8, uint8, int16, uint16 or int32, or an output other than int32";
    int nk = dims_of(c, w, kd) - 2;
    if (nk < 1 || (e = window(c, n, x, y, kd + 2, nk, p))) return e ? e : "a filter of rank < 3";
    int64_t groups = mp_attr_int(n, "group", 1);
    p[W_CG] = dim(c, w, 1), p[W_MG] = groups > 0 ? p[W_M] / groups : 0;
    if (groups < 1 || p[W_CG] * groups != p[W_C] || p[W_M] % groups || dim(c, w, 0) != p[W_M])
        return "channels that do not match the groups";
    if (integer) {
        int32_t zx = vin(n, 2), zw = vin(n, 3), at = c->n;
        if (!zero_point_ok(c, zx, 1) || !zero_point_ok(c, zw, p[W_M])) return "zero points other than integer scalars (or W's per output channel)";
        p[W_ZW_STEP] = zw >= 0 && numel(c, zw) > 1;
        if ((e = window_op(c, MP_CU_CONV, p, numel(c, y), x, w, -1, y))) return e;
        mp_cu_instr *I = emitted(c, at);
        if (I) I->t[4] = T(c, zx), I->t[5] = T(c, zw);
        return NULL;
    }
    if (!grad) return window_op(c, MP_CU_CONV, p, numel(c, y), x, w, vin(n, 2), y);
    int32_t dx = vout(n, 0), dw = vout(n, 1), db = vout(n, 2);
    if (T(c, dx) >= 0 && (e = window_op(c, MP_CU_CONV_DX, p, numel(c, x), dy, w, dx, -1))) return e;
    if (T(c, dw) >= 0 && (e = window_op(c, MP_CU_CONV_DW, p, numel(c, w), dy, x, dw, -1))) return e;
    if (T(c, db) < 0) return NULL;
    int64_t ad = p[W_M], as = p[W_OUTN], bd[2] = {p[W_N], p[W_OUTN]}, bs[2] = {p[W_M] * p[W_OUTN], 1};
    return reduce(c, dy, db, 1, &ad, &as, 2, bd, bs, 1);
}

static const char *lower_pool(cg *c, const mp_node *n)
{
    bool grad = strstr(n->op_type, "Grad") != NULL, avg = !strncmp(n->op_type, "Average", 7), lp = !strcmp(n->op_type, "LpPool");
    int32_t x = grad ? vout(n, 0) : vin(n, 0), y = grad ? vin(n, 0) : vout(n, 0);
    int64_t p[W_COUNT];
    const int64_t *ks;
    const char *e = plain_f32(c, n);
    if (e) return e;
    int nk = mp_attr_ints(n, "kernel_shape", &ks);
    if (nk < 0) return "no kernel_shape";
    if ((e = window(c, n, x, y, ks, nk, p))) return e;
    if (p[W_M] != p[W_C] || dim(c, y, 0) != p[W_N]) return "N or C changed";
    p[W_KIND] = lp ? 2 : avg, p[W_INCL_PAD] = mp_attr_int(n, "count_include_pad", 0) != 0;
    p[W_COL_MAJOR] = mp_attr_int(n, "storage_order", 0) != 0;
    if (lp) { /* p an integer attribute (2), as runtime/cpu_conv.c run_pool; no indices */
        int32_t at = c->n;
        if ((e = window_op(c, MP_CU_POOL, p, numel(c, y), x, y, -1, -1))) return e;
        mp_cu_instr *I = emitted(c, at);
        if (I) I->f[0] = (double)mp_attr_int(n, "p", 2);
        return NULL;
    }
    if (!grad) return window_op(c, MP_CU_POOL, p, numel(c, y), x, y, vout(n, 1), -1);
    int32_t ind = avg || p[W_COL_MAJOR] ? -1 : vin(n, 2), xin = avg ? -1 : vin(n, 1);
    if (!avg && ind < 0 && xin < 0) return "neither X nor the indices";
    return window_op(c, MP_CU_POOL_DX, p, numel(c, x), y, xin, ind, x);
}

/* ConvTranspose is the data gradient of the Conv of its output Y by the same
 * W: MP_CU_CONV_DX (cuDNN's backward data on the GPU) with X in dY's place,
 * then the bias. Pads as runtime/cpu_conv.c derives them (from the output
 * size for output_shape and SAME, else the attribute, checked). */
static const char *lower_conv_transpose(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), w = vin(n, 1), b = vin(n, 2), y = vout(n, 0);
    const char *e = plain_f32(c, n);
    if (e) return e;
    if (x < 0 || w < 0 || y < 0) return "missing operands";
    int r = V(c, x)->rank, sp = r - 2;
    if (r < 3 || V(c, w)->rank != r || V(c, y)->rank != r || sp > MP_CU_MAXSP) return "other than 1 to 3 spatial dims";
    int64_t grp = mp_attr_int(n, "group", 1), N = dim(c, x, 0), C = dim(c, x, 1);
    if (grp < 1 || C % grp || dim(c, w, 0) != C) return "channels that do not match the groups";
    int64_t mg = dim(c, w, 1), M = mg * grp;
    if (dim(c, y, 0) != N || dim(c, y, 1) != M || (b >= 0 && (V(c, b)->rank != 1 || dim(c, b, 0) != M)))
        return "Y or B channels that do not match W";
    const int64_t *ss, *ds, *ps, *ops, *osh;
    int ns = mp_attr_ints(n, "strides", &ss), nd = mp_attr_ints(n, "dilations", &ds);
    int np = mp_attr_ints(n, "pads", &ps), nop = mp_attr_ints(n, "output_padding", &ops);
    bool has_shape = mp_attr_ints(n, "output_shape", &osh) >= 0;
    const char *ap = mp_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if ((ns >= 0 && ns != sp) || (nd >= 0 && nd != sp) || (np >= 0 && np != 2 * sp) || (nop >= 0 && nop != sp))
        return "strides, dilations, pads or output_padding of the wrong length";
    int64_t p[W_COUNT] = {0};
    p[W_N] = N, p[W_C] = M, p[W_M] = C, p[W_CG] = mg, p[W_MG] = C / grp, p[W_NSP] = sp;
    p[W_INN] = p[W_OUTN] = p[W_KN] = 1;
    for (int i = 0; i < sp; i++) {
        int64_t in = dim(c, x, 2 + i), out = dim(c, y, 2 + i), kd = dim(c, w, 2 + i);
        int64_t s = ns >= 0 ? ss[i] : 1, d = nd >= 0 ? ds[i] : 1, pb;
        if (s < 1 || d < 1) return "a stride or dilation < 1";
        int64_t full = s * (in - 1) + (nop >= 0 ? ops[i] : 0) + (kd - 1) * d + 1;
        if (has_shape || same) {
            int64_t total = full - out, half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor, as Python's // */
            pb = !strcmp(ap, "SAME_UPPER") ? half : total - half;
        } else {
            pb = np >= 0 ? ps[i] : 0;
            if (full - pb - (np >= 0 ? ps[sp + i] : 0) != out) return "pads that do not give the output size";
        }
        /* the Conv's input is Y, its output X */
        p[W_IN + i] = out, p[W_OUT + i] = in, p[W_K + i] = kd, p[W_S + i] = s, p[W_D + i] = d;
        p[W_PB + i] = pb, p[W_PE + i] = full - out - pb;
        p[W_INN] *= out, p[W_OUTN] *= in, p[W_KN] *= kd;
    }
    if ((e = window_op(c, MP_CU_CONV_DX, p, numel(c, y), x, w, y, -1)) || b < 0) return e;
    int64_t str[2][MP_CU_MAX_RANK] = {{0}};
    int64_t yd[MP_CU_MAX_RANK];
    contiguous(dims_of(c, y, yd), yd, str[0]);
    str[1][1] = 1; /* B[m] along Y's channels */
    const int32_t in2[2] = {y, b};
    return map_views(c, MP_FN_ADD, 2, in2, (const int64_t(*)[MP_CU_MAX_RANK])str, y, 0, 1);
}

/* ---- Resize --------------------------------------------------------------------------------------- */

/* A constant float or int input's values as doubles: count, 0 absent or empty, -1 not constant. */
static int konst_f64(const cg *c, int32_t id, double *out, int max)
{
    const mp_tensor *k = id >= 0 ? V(c, id)->konst : NULL;
    if (id < 0 || (k && !k->numel)) return 0;
    if (!k || !k->data || k->numel > max) return -1;
    for (int64_t i = 0; i < k->numel; i++) out[i] = mp_tensor_get_f64(k, i);
    return (int)k->numel;
}

/* The axis's taps are the identity (the CPU kernel skips such an axis). */
static bool resize_identity(const int64_t *p, const double *f)
{
    if (p[RS_IN] != p[RS_OUT]) return false;
    for (int64_t o = 0; o < p[RS_OUT]; o++) {
        mp_cu_rs t;
        int kept = 0;
        if (!mp_cu_rs_at(p, f, o, &t)) return false;
        for (int64_t j = 0; j < p[RS_TAPS]; j++) {
            double w = mp_cu_rs_w(p, f, &t, j);
            int64_t ix = t.first + j;
            ix = ix < 0 ? 0 : ix >= p[RS_IN] ? p[RS_IN] - 1 : ix;
            if (w != 0 && (kept++ || ix != o || w != 1)) return false;
        }
        if (kept != 1) return false;
    }
    return true;
}

/* Resize's (and ResizeGrad's) parameters, as runtime/cpu_resize.c resize_setup reads them for an
 * input of dims xd[r] (old: opset 10's inputs X, scales and defaults): the kernel's p[] and f[]
 * shared by every axis, and each axis's scale and roi (start at [a], end at [r + a]). */
static const char *resize_params(cg *c, const mp_node *n, bool old, const int64_t *xd, int r, int64_t *p, double *f,
                                 double *scale, double *roi)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    memset(p, 0, MP_CU_NP * sizeof *p), memset(f, 0, MP_CU_NF * sizeof *f);
    p[RS_MODE] = pick_name(mp_attr_str(n, "mode", "nearest"), modes, 3);
    p[RS_COORD] = pick_name(mp_attr_str(n, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel"), coords, 6);
    p[RS_ROUND] = pick_name(mp_attr_str(n, "nearest_mode", old ? "floor" : "round_prefer_floor"), rounds, 4);
    int pol = pick_name(mp_attr_str(n, "keep_aspect_ratio_policy", "stretch"), policies, 3);
    if (p[RS_MODE] < 0 || p[RS_COORD] < 0 || p[RS_ROUND] < 0 || pol < 0) return "an unknown mode";
    p[RS_EXCLUDE] = mp_attr_int(n, "exclude_outside", 0) != 0;
    p[RS_AA] = mp_attr_int(n, "antialias", 0) != 0 && p[RS_MODE] != RS_NEAREST;
    f[RS_F_CUBIC] = mp_attr_float(n, "cubic_coeff_a", -0.75f), f[RS_F_EXTRAP] = mp_attr_float(n, "extrapolation_value", 0.0f);
    int64_t axes[MP_CU_MAX_RANK];
    const int64_t *aa;
    int na = mp_attr_ints(n, "axes", &aa);
    if (na > r) return "more axes than dims";
    for (int i = 0; i < (na < 0 ? r : na); i++) {
        axes[i] = na < 0 ? i : norm_axis(aa[i], r);
        if (axes[i] < 0 || axes[i] >= r) return "an axis out of range";
    }
    if (na < 0) na = r;
    double roiv[2 * MP_CU_MAX_RANK], sv[MP_CU_MAX_RANK];
    int nr = old ? 0 : konst_f64(c, vin(n, 1), roiv, 2 * MP_CU_MAX_RANK);
    int nsc = konst_f64(c, vin(n, old ? 1 : 2), sv, MP_CU_MAX_RANK), nsz = old ? 0 : konst_f64(c, vin(n, 3), sv, MP_CU_MAX_RANK);
    if (nr < 0 || nsc < 0 || nsz < 0) return "roi, scales or sizes that are not constants";
    if (!nsc == !nsz || (nsc ? nsc : nsz) != na) return "other than one of scales and sizes, an entry per axis";
    for (int i = 0; i < r; i++) scale[i] = 1, roi[i] = 0, roi[r + i] = 1;
    if (nr && p[RS_COORD] == RS_TF_CROP) {
        if (nr != 2 * na) return "a roi of the wrong length";
        for (int i = 0; i < na; i++) roi[axes[i]] = roiv[i], roi[r + axes[i]] = roiv[na + i];
    }
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (nsz && !xd[a]) return "an empty axis";
        scale[a] = nsc ? sv[i] : (double)(int64_t)sv[i] / (double)xd[a];
        if (!(scale[a] > 0)) return "scales that are not positive";
        lo = fmin(lo, scale[a]), hi = fmax(hi, scale[a]);
    }
    for (int i = 0; nsz && pol && i < na; i++) scale[axes[i]] = pol == 1 ? lo : hi;
    return NULL;
}

/* One axis's pass, in -> out cells between outer and inner: its p[] and f[] (q, g) from the shared
 * ones, and whether its taps are the identity (no pass). */
static const char *resize_axis(const int64_t *p, const double *f, int64_t outer, int64_t in, int64_t out, int64_t inner,
                               double scale, double roi_s, double roi_e, int64_t *q, double *g, bool *ident)
{
    if (out > 0 && !in) return "an empty axis";
    double sc = scale < 1 ? scale : 1;
    if (p[RS_AA] && sc < 1.0 / 1024) return "an antialias scale below 1/1024";
    int64_t taps = p[RS_MODE] == RS_NEAREST ? 2 : !p[RS_AA] ? (p[RS_MODE] == RS_LINEAR ? 2 : 4)
                 : p[RS_MODE] == RS_LINEAR ? 2 - 2 * (int64_t)(floor(-1 / sc) + 1) : 2 - 2 * (int64_t)(floor(-2 / sc) + 1);
    if (taps < 2 || taps > 4096) return "a scale that gives an unusable filter";
    memcpy(q, p, MP_CU_NP * sizeof *q), memcpy(g, f, MP_CU_NF * sizeof *g);
    q[RS_OUTER] = outer, q[RS_IN] = in, q[RS_OUT] = out, q[RS_INNER] = inner, q[RS_TAPS] = taps;
    g[RS_F_SCALE] = scale, g[RS_F_ROI_S] = roi_s, g[RS_F_ROI_E] = roi_e;
    *ident = resize_identity(q, g);
    return NULL;
}

/* The passes' instructions: op per pass, src -> dst, the results between them in the workspace
 * (doubles, two halves taking turns); res: each pass's result size. */
static const char *resize_emit(cg *c, int op, int npass, int64_t (*pass)[MP_CU_NP], double (*passf)[MP_CU_NF],
                               const int64_t *res, int32_t src, int32_t dst)
{
    int64_t big = 0;
    for (int k = 0; k + 1 < npass; k++) big = res[k] > big ? res[k] : big;
    if (!numel(c, dst)) return NULL;
    if (!npass) return copy_value(c, src, dst);
    need_ws(c, 2 * big * (int64_t)sizeof(double));
    for (int k = 0; k < npass; k++) {
        EMIT(I, op, res[k]);
        memcpy(I->p, pass[k], sizeof I->p), memcpy(I->f, passf[k], sizeof I->f);
        I->t[0] = k ? MP_CU_WS : T(c, src), I->t[1] = k == npass - 1 ? T(c, dst) : MP_CU_WS;
        I->p[RS_SRC] = k ? ((k - 1) % 2) * big : 0, I->p[RS_DST] = k == npass - 1 ? 0 : (k % 2) * big;
    }
    return NULL;
}

/* Resize's passes (grad: ResizeGrad's adjoint ones) between Resize's X and Y, given the shared p[] and f[], and
 * each axis's scale and roi. */
static const char *resize_passes(cg *c, bool grad, int32_t x, int32_t y, const int64_t *p, const double *f,
                                 const double *scale, const double *roi)
{
    int r = V(c, x)->rank;
    int64_t xd[MP_CU_MAX_RANK], cur[MP_CU_MAX_RANK], pass[MP_CU_MAX_RANK][MP_CU_NP], res[MP_CU_MAX_RANK];
    double passf[MP_CU_MAX_RANK][MP_CU_NF];
    const char *e;
    dims_of(c, x, xd);
    /* the axes to run: forward in axis order from X's dims, the adjoint in reverse from dY's */
    int npass = 0;
    dims_of(c, grad ? y : x, cur);
    for (int k = 0; k < r; k++) {
        int ax = grad ? r - 1 - k : k;
        int64_t in = xd[ax], out = dim(c, y, ax), outer = 1, inner = 1;
        bool ident;
        for (int i = 0; i < ax; i++) outer *= cur[i];
        for (int i = ax + 1; i < r; i++) inner *= cur[i];
        if ((e = resize_axis(p, f, outer, in, out, inner, scale[ax], roi[ax], roi[r + ax], pass[npass], passf[npass], &ident)))
            return e;
        if (ident) continue;
        cur[ax] = grad ? in : out;
        res[npass++] = outer * cur[ax] * inner;
    }
    return resize_emit(c, grad ? MP_CU_RESIZE_DX : MP_CU_RESIZE, npass, pass, passf, res, grad ? y : x, grad ? x : y);
}

/* Resize (opset 10 on; runtime/cpu_resize.c's attributes, scales or sizes and
 * roi as constants): one MP_CU_RESIZE per axis whose taps are not the
 * identity, in axis order, the axes between in the workspace as doubles.
 * ResizeGrad (inputs in opset 11's places, dX of X's shape): the adjoint, one
 * MP_CU_RESIZE_DX per such axis in reverse order, as the CPU runs it. */
static const char *lower_resize(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "ResizeGrad");
    int32_t x = grad ? vout(n, 0) : vin(n, 0), y = grad ? vin(n, 0) : vout(n, 0); /* Resize's X and Y (dX, dY) */
    const char *e = one_plain_type(c, x, y);
    if (e) return e;
    if (grad && !mp_dtype_is_float(V(c, x)->dtype)) return "a gradient other than float";
    int r = V(c, x)->rank;
    if (V(c, y)->rank != r) return "a rank change";
    bool old = !grad && mp_graph_opset(c->g, n->domain) < 11;
    int64_t p[MP_CU_NP], xd[MP_CU_MAX_RANK];
    double f[MP_CU_NF], scale[MP_CU_MAX_RANK], roi[2 * MP_CU_MAX_RANK];
    dims_of(c, x, xd);
    e = resize_params(c, n, old, xd, r, p, f, scale, roi);
    return e ? e : resize_passes(c, grad, x, y, p, f, scale, roi);
}

/* Upsample (opsets 7-9, runtime/cpu_resize.c mp_cpu_Upsample): a Resize with asymmetric coordinates, nearest
 * rounding down or linear (mode linear or bilinear), the scales an attribute (7) or a constant input (9). */
static const char *lower_upsample(cg *c, const mp_node *n)
{
    static const char *const modes[] = {"nearest", "linear", "bilinear"};
    int32_t x = vin(n, 0), y = vout(n, 0);
    const char *e = one_plain_type(c, x, y);
    if (e) return e;
    int r = V(c, x)->rank, m = pick_name(mp_attr_str(n, "mode", "nearest"), modes, 3);
    if (V(c, y)->rank != r) return "a rank change";
    if (m < 0) return "an unknown mode";
    int64_t p[MP_CU_NP] = {0};
    double f[MP_CU_NF] = {0}, scale[MP_CU_MAX_RANK], roi[2 * MP_CU_MAX_RANK];
    const mp_attr *sa = mp_node_attr(n, "scales");
    int ns = sa ? (int)sa->n : konst_f64(c, vin(n, 1), scale, MP_CU_MAX_RANK);
    if (ns != r) return "scales that are not constants, one per dim";
    for (int i = 0; i < r; i++) {
        if (sa) scale[i] = sa->floats[i];
        if (!(scale[i] > 0)) return "scales that are not positive";
        roi[i] = 0, roi[r + i] = 1;
    }
    p[RS_MODE] = m ? RS_LINEAR : RS_NEAREST, p[RS_COORD] = RS_ASYM, p[RS_ROUND] = RS_FLOOR, f[RS_F_CUBIC] = -0.75;
    return resize_passes(c, false, x, y, p, f, scale, roi);
}

/* ---- sampling grids ------------------------------------------------------------------------------ */

/* GridSample (X, grid -> Y) and GridSampleGrad (dY, X, grid -> dX, dGrid, either absent): float32, 1 to
 * 3 spatial dims, as runtime/cpu_grid_sample.c. dX is a thread per (n, c) slice summing into doubles in the
 * workspace in the CPU's order (points, then taps), so no atomics; dGrid a thread per point. */
static const char *lower_grid_sample(cg *c, const mp_node *n)
{
    static const char *const modes[] = {"linear", "nearest", "cubic", "bilinear", "bicubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    bool grad = !strcmp(n->op_type, "GridSampleGrad");
    const char *e = plain_f32(c, n);
    if (e) return e;
    int32_t x = vin(n, grad ? 1 : 0), grid = vin(n, grad ? 2 : 1), dy = grad ? vin(n, 0) : -1;
    int32_t y = grad ? -1 : vout(n, 0), dx = grad ? vout(n, 0) : -1, dgrid = grad ? vout(n, 1) : -1;
    if (x < 0 || grid < 0 || (!grad && y < 0) || (grad && dy < 0)) return "missing operands";
    if (!is_f32(c, x) || !is_f32(c, grid)) return "operands other than float32";
    int r = V(c, x)->rank - 2;
    if (r < 1 || r > MP_CU_MAXSP) return "other than 1 to 3 spatial dims";
    int mode = pick_name(mp_attr_str(n, "mode", "linear"), modes, 5), pad = pick_name(mp_attr_str(n, "padding_mode", "zeros"), pads, 3);
    if (mode < 0 || pad < 0) return "an unknown mode or padding_mode";
    int64_t p[MP_CU_NP] = {0}, N = dim(c, x, 0), C = dim(c, x, 1), np = 1, in = 1;
    for (int i = 1; i <= r; i++) np *= dim(c, grid, i);
    static const int mode_of[] = {GSM_LINEAR, GSM_NEAREST, GSM_CUBIC, GSM_LINEAR, GSM_CUBIC};
    p[GS_R] = r, p[GS_MODE] = mode_of[mode], p[GS_PAD] = pad, p[GS_ALIGN] = mp_attr_int(n, "align_corners", 0) != 0;
    p[GS_N] = N, p[GS_C] = C, p[GS_NP] = np;
    for (int i = 0; i < r; i++) in *= (p[GS_DIMS + i] = dim(c, x, 2 + i));
    if (!grad) {
        if (!numel(c, y)) return NULL;
        EMIT(I, MP_CU_GRID_SAMPLE, N * C * np);
        memcpy(I->p, p, sizeof p);
        I->p[GS_KIND] = GSK_FWD, I->t[0] = T(c, x), I->t[1] = T(c, grid), I->t[2] = T(c, y);
        return NULL;
    }
    if (dx >= 0 && numel(c, dx)) {
        need_ws(c, N * C * in * (int64_t)sizeof(double));
        EMIT(I, MP_CU_GRID_SAMPLE, N * C);
        memcpy(I->p, p, sizeof p);
        I->p[GS_KIND] = GSK_DX, I->t[0] = T(c, dy), I->t[1] = T(c, grid), I->t[2] = MP_CU_WS, I->t[3] = T(c, dx);
    }
    if (dgrid >= 0 && numel(c, dgrid)) {
        EMIT(I, MP_CU_GRID_SAMPLE, N * np);
        memcpy(I->p, p, sizeof p);
        I->p[GS_KIND] = GSK_DGRID, I->t[0] = T(c, dy), I->t[1] = T(c, x), I->t[2] = T(c, grid), I->t[3] = T(c, dgrid);
    }
    return NULL;
}

/* AffineGrid (theta, size -> grid) and AffineGridGrad (dGrid, size -> dTheta): float32, size a constant. */
static const char *lower_affine_grid(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "AffineGridGrad");
    const char *e = plain_f32(c, n);
    if (e) return e;
    int32_t in = vin(n, 0), out = vout(n, 0);
    if (in < 0 || out < 0 || !is_f32(c, in) || !is_f32(c, out)) return "operands other than float32";
    int64_t size[5];
    int k = konst_ints(c, vin(n, 1), size, 5);
    if (k != 4 && k != 5) return "a size that is not a constant of 4 or 5 entries";
    int64_t p[MP_CU_NP] = {0}, np = 1;
    p[AG_R] = k - 2, p[AG_ALIGN] = mp_attr_int(n, "align_corners", 0) != 0, p[AG_N] = size[0];
    for (int i = 0; i < k - 2; i++) np *= (p[AG_DIMS + i] = size[2 + i]);
    p[AG_NP] = np;
    if (!numel(c, out)) return NULL;
    EMIT(I, MP_CU_AFFINE_GRID, numel(c, out));
    memcpy(I->p, p, sizeof p);
    I->p[AG_KIND] = grad ? AGK_DTHETA : AGK_FWD, I->t[0] = T(c, in), I->t[1] = T(c, out);
    return NULL;
}

/* ---- Pad and its gradient ------------------------------------------------------------------------- */

/* Pad's (PadGrad's) mode, begin pads per axis and fill element's bytes, as runtime/cpu_tensor.c
 * mp_cpu_Pad (cpu_grad.c mp_cpu_PadGrad) reads them: pads from input 1 (the attribute `pads`, or
 * `paddings` before opset 2, in opsets before 11), constant_value input 2 (the attribute `value`
 * before 11), axes input 3 from opset 18 (the attribute before); PadGrad: pads input 1 or the
 * attributes, axes input 2. small: X (dX), big: Y (dY). */
static const char *pad_params(cg *c, const mp_node *n, bool grad, int32_t small, int32_t big, int64_t *mode, int64_t *begin,
                              int64_t *fill)
{
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    int r = V(c, small)->rank, np, na = -1;
    int64_t raw[2 * MP_CU_MAX_RANK], axes[MP_CU_MAX_RANK], end[MP_CU_MAX_RANK];
    int64_t opset = mp_graph_opset(c->g, n->domain); /* the forward's */
    unsigned char value[8] = {0};
    if ((*mode = pick_name(mp_attr_str(n, "mode", "constant"), modes, 4)) < 0) return "an unknown mode";
    if (grad ? vin(n, 1) < 0 : opset < 11) {
        const int64_t *a;
        const char *name = grad ? (mp_node_attr(n, "pads") ? "pads" : "paddings") : opset < 2 ? "paddings" : "pads";
        np = mp_attr_ints(n, name, &a);
        if (np < 0 || np > 2 * MP_CU_MAX_RANK) return "no pads";
        memcpy(raw, a, (size_t)np * sizeof *raw);
        int64_t d1 = 1;
        mp_tensor t = {V(c, small)->dtype, 0, &d1, 1, value}; /* the fill in X's dtype, as the CPU converts it */
        if (!grad) mp_tensor_set_f64(&t, 0, mp_attr_float(n, "value", 0.0f));
    } else if ((np = konst_ints(c, vin(n, 1), raw, 2 * MP_CU_MAX_RANK)) < 0) {
        return "pads that are not constants";
    }
    const mp_tensor *cv = !grad && opset >= 11 && vin(n, 2) >= 0 ? V(c, vin(n, 2))->konst : NULL;
    if (!grad && opset >= 11 && vin(n, 2) >= 0 && (!cv || (cv->numel && !cv->data))) return "a constant_value that is not a constant";
    if (cv && cv->numel) {
        if (cv->dtype != V(c, small)->dtype) return "a constant_value of another dtype";
        memcpy(value, cv->data, mp_elem_size(cv->dtype));
    }
    int32_t ax = vin(n, grad ? 2 : 3);
    if (ax >= 0 && (grad || opset >= 18)) {
        if ((na = konst_ints(c, ax, axes, MP_CU_MAX_RANK)) < 0) return "axes that are not constants";
    } else if (ax >= 0) { /* before opset 18 the CPU reads the attribute */
        const int64_t *a;
        na = mp_attr_ints(n, "axes", &a);
        if (na > MP_CU_MAX_RANK) return "too many axes";
        if (na < 0) na = 0;
        memcpy(axes, a, (size_t)na * sizeof *axes);
    }
    int nax = na >= 0 ? na : r;
    if (np != 2 * nax) return "pads of other than two entries per axis";
    for (int a = 0; a < r; a++) begin[a] = end[a] = 0;
    for (int i = 0; i < nax; i++) {
        int64_t a = na >= 0 ? norm_axis(axes[i], r) : i;
        if (a < 0 || a >= r) return "an axis out of range";
        begin[a] = raw[i], end[a] = raw[nax + i];
    }
    for (int a = 0; a < r; a++) {
        if (dim(c, big, a) != dim(c, small, a) + begin[a] + end[a]) return "dims that disagree with the pads";
        if (*mode != PAD_CONSTANT && !dim(c, small, a) && dim(c, big, a)) return "an empty axis padded by other than a constant";
    }
    memcpy(fill, value, sizeof value);
    return NULL;
}

/* op (MP_CU_PAD or MP_CU_PAD_DX) of X into Y, a thread per element of Y: big's dims, the offsets
 * of small within it (negative: a crop), small's dims, X read through its view. */
static const char *emit_pad(cg *c, int op, int32_t x, int32_t y, int32_t small, int32_t big, int64_t mode,
                            const int64_t *begin, int64_t fill)
{
    if (!numel(c, y)) return NULL;
    int r = V(c, small)->rank;
    int64_t s[MP_CU_MAX_RANK];
    EMIT(I, op, numel(c, y));
    I->t[0] = T(c, x), I->t[1] = T(c, y);
    int64_t *p = I->p;
    p[PAD_RANK] = r, p[PAD_MODE] = mode, p[PAD_FILL] = fill, p += PAD_DIMS;
    p += dims_of(c, big, p);
    memcpy(p, begin, (size_t)r * sizeof *begin), p += r;
    p += dims_of(c, small, p);
    strides_of(c, x, s);
    put_view(p, 0, r, s);
    return NULL;
}

/* Pad: MP_CU_PAD, a thread per element of Y, reading X through its view; PadGrad: MP_CU_PAD_DX, a
 * thread per element of dX summing the elements of dY (read through its view) that copied it. */
static const char *lower_pad(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "PadGrad");
    int32_t x = vin(n, 0), y = vout(n, 0), small = grad ? y : x, big = grad ? x : y;
    int64_t mode, fill, begin[MP_CU_MAX_RANK];
    if (x < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype) return "operands of other than one dtype";
    if (grad && !mp_dtype_is_float(V(c, x)->dtype)) return "a gradient other than float";
    if (tview(c, y)) return "a transposed view output";
    int r = V(c, small)->rank;
    if (V(c, big)->rank != r) return "a rank change";
    const char *e = pad_params(c, n, grad, small, big, &mode, begin, &fill);
    return e ? e : emit_pad(c, grad ? MP_CU_PAD_DX : MP_CU_PAD, x, y, small, big, mode, begin, fill);
}

/* CenterCropPad (and so its own gradient): MP_CU_PAD with zeros, each axis offset where runtime/cpu_misc.c
 * puts it, (out - in) / 2 truncated: a crop where negative. */
static const char *lower_center_crop_pad(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    int64_t begin[MP_CU_MAX_RANK];
    if (x < 0 || y < 0 || V(c, x)->dtype != V(c, y)->dtype) return "operands of other than one dtype";
    if (tview(c, x) || tview(c, y)) return "a transposed view operand";
    int r = V(c, x)->rank;
    if (V(c, y)->rank != r) return "a rank change";
    for (int a = 0; a < r; a++) begin[a] = (dim(c, y, a) - dim(c, x, a)) / 2;
    return emit_pad(c, MP_CU_PAD, x, y, x, y, PAD_CONSTANT, begin, 0);
}

/* ---- Einsum ------------------------------------------------------------------------------------------ */

/* Einsum (and the Einsums of its gradient), as runtime/cpu_matmul.c mp_cpu_Einsum: MP_CU_EINSUM, a
 * thread per output element. A label's size is its operands' size other than 1; the contracted
 * labels, those not in the output, in increasing label order; each input read through its view. */
static const char *lower_einsum(cg *c, const mp_node *n)
{
    int32_t y = vout(n, 0);
    const char *eq = mp_attr_str(n, "equation", NULL);
    if (!eq || y < 0 || n->nin < 1) return "no equation, input or output";
    if (n->nin > 7) return "more than 7 inputs";
    mp_dtype dt = V(c, y)->dtype;
    if (dt != MP_FLOAT && dt != MP_DOUBLE) return "a dtype other than float32 or float64";
    if (tview(c, y)) return "a transposed view output";
    int ranks[MP_EINSUM_MAX_IN];
    for (int t = 0; t < n->nin; t++) {
        if (n->in[t] < 0 || V(c, n->in[t])->dtype != dt) return "inputs absent or of another dtype";
        ranks[t] = V(c, n->in[t])->rank;
    }
    mp_einsum e;
    mp_err err = {0};
    if (mp_einsum_parse(eq, n->nin, ranks, &e, &err)) return "an equation that does not parse";
    int64_t size[MP_EINSUM_LABELS];
    for (int l = 0; l < MP_EINSUM_LABELS; l++) size[l] = -1;
    for (int t = 0; t < n->nin; t++)
        for (int i = 0; i < e.rank[t]; i++) {
            int l = e.label[t][i];
            int64_t d = dim(c, n->in[t], i);
            if (size[l] < 0 || size[l] == 1) size[l] = d;
            else if (d != size[l] && d != 1) return "label sizes that disagree";
        }
    int no = e.out_rank, ns = 0, sum[MP_EINSUM_LABELS];
    bool in_out[MP_EINSUM_LABELS] = {false};
    if (no != V(c, y)->rank) return "an output rank other than the equation's";
    for (int i = 0; i < no; i++) {
        if (size[e.out[i]] != dim(c, y, i)) return "output dims other than the equation's";
        in_out[e.out[i]] = true;
    }
    for (int l = 0; l < MP_EINSUM_LABELS; l++)
        if (size[l] >= 0 && !in_out[l]) sum[ns++] = l;
    if (ns > MP_CU_EINSUM_MAXS || ES_DIMS + no + ns + n->nin * (no + ns) > MP_CU_NP) return "more labels than the kernel's parameters hold";
    if (!numel(c, y)) return NULL;
    EMIT(I, MP_CU_EINSUM, numel(c, y));
    int64_t *p = I->p;
    p[ES_NIN] = n->nin, p[ES_NO] = no, p[ES_NS] = ns, p += ES_DIMS;
    for (int i = 0; i < no; i++) *p++ = dim(c, y, i);
    for (int i = 0; i < ns; i++) *p++ = size[sum[i]];
    for (int t = 0; t < n->nin; t++) {
        int64_t xs[MP_CU_MAX_RANK], str[MP_EINSUM_LABELS] = {0};
        strides_of(c, n->in[t], xs);
        for (int i = 0; i < e.rank[t]; i++)
            if (dim(c, n->in[t], i) != 1) str[e.label[t][i]] += xs[i];
        for (int i = 0; i < no; i++) *p++ = str[e.out[i]];
        for (int i = 0; i < ns; i++) *p++ = str[sum[i]];
        I->t[t] = T(c, n->in[t]);
    }
    I->t[n->nin] = T(c, y);
    return NULL;
}

/* ---- Det ------------------------------------------------------------------------------------------------ */

/* Det (float32 / float64, as runtime/cpu_misc.c): MP_CU_DET, a thread per matrix eliminating its copy in the
 * workspace (m * m doubles a matrix). */
static const char *lower_det(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0);
    if (x < 0 || y < 0) return "missing operands";
    mp_dtype dt = V(c, x)->dtype;
    int r = V(c, x)->rank;
    if ((dt != MP_FLOAT && dt != MP_DOUBLE) || V(c, y)->dtype != dt) return "a dtype other than float32 or float64";
    if (tview(c, x)) return "a transposed view operand";
    if (r < 2 || dim(c, x, r - 1) != dim(c, x, r - 2)) return "other than square matrices [..., M, M]";
    int64_t m = dim(c, x, r - 1), mats = numel(c, y);
    if (m && numel(c, x) / (m * m) != mats) return "an output other than one element per matrix";
    if (!mats || T(c, y) < 0) return NULL;
    EMIT(I, MP_CU_DET, mats);
    I->p[DET_M] = m;
    I->t[0] = T(c, x), I->t[1] = T(c, y), I->t[2] = MP_CU_WS;
    need_ws(c, mats * m * m * (int64_t)sizeof(double));
    return NULL;
}

/* ---- training-mode Dropout, optimizer updates ------------------------------------------------------- */

static const char *lower_dropout(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), y = vout(n, 0), mask = vout(n, 1);
    int64_t opset = mp_graph_opset(c->g, n->domain), train = 0;
    double ratio = mp_attr_float(n, "ratio", 0.5f);
    if (opset >= 12) {
        const mp_tensor *r = vin(n, 1) >= 0 ? V(c, vin(n, 1))->konst : NULL;
        if (vin(n, 1) >= 0 && (!r || !r->data)) return "a ratio that is not a constant";
        ratio = r ? mp_tensor_get_f64(r, 0) : 0.5;
        if (vin(n, 2) >= 0 && konst_ints(c, vin(n, 2), &train, 1) != 1) return "a training_mode that is not a constant";
    }
    if (tview(c, x)) return "a transposed view input";
    if (train && (ratio < 0 || ratio > 1)) return "a ratio outside [0, 1]";
    if (!numel(c, x)) return NULL;
    EMIT(I, MP_CU_DROPOUT, numel(c, x));
    I->t[0] = T(c, x), I->t[1] = T(c, y), I->t[2] = T(c, mask);
    I->p[0] = c->node_id, I->p[1] = train != 0;
    I->f[0] = ratio;
    return NULL;
}

static const struct {
    const char *op;
    int rule, nstate;
} optim_ops[] = {{"AdamUpdate", MP_CU_OPT_ADAM, 3}, {"SGDUpdate", MP_CU_OPT_SGD, 0}, {"MomentumUpdate", MP_CU_OPT_MOMENTUM, 1}};

/* In place on the outputs (which alias the inputs in a plan; copied first otherwise). */
static const char *lower_optim(cg *c, const mp_node *n)
{
    size_t k = 0;
    while (strcmp(optim_ops[k].op, n->op_type)) k++;
    int ns = optim_ops[k].nstate, dyn = mp_attr_int(n, "dynamic_loss_scale", 0) ? 2 : 0;
    if (n->nin != 2 + ns + dyn || n->nout != 1 + ns) return "operands other than (param, grad, state) -> (param', state')";
    const char *e = plain_f32(c, n);
    for (int i = 0; i < n->nin; i++) /* the gradient of a 16-bit working copy may be 16-bit; the master and state fp32 */
        if (!e && !(i == 1 ? is_f32_or_half(c, n->in[i]) : is_f32(c, n->in[i]))) e = "operands other than float32 (a 16-bit gradient aside)";
    if (!e && dyn && (numel(c, n->in[n->nin - 2]) != 1 || numel(c, n->in[n->nin - 1]) != 1)) e = "a finite flag or log2 scale that is not a scalar";
    for (int i = 0; !e && i <= ns; i++) e = copy_value(c, n->in[i ? i + 1 : 0], n->out[i]);
    if (e || !numel(c, n->in[0])) return e;
    EMIT(I, MP_CU_OPTIM, numel(c, n->in[0]));
    I->p[0] = optim_ops[k].rule;
    I->t[0] = T(c, n->out[0]), I->t[1] = T(c, n->in[1]);
    for (int i = 1; i <= ns; i++) I->t[i + 1] = T(c, n->out[i]);
    if (dyn) I->t[5] = T(c, n->in[n->nin - 2]), I->t[6] = T(c, n->in[n->nin - 1]), I->f[6] = mp_attr_float(n, "loss_scale", 1.0f);
    double inv_scale = 1.0 / mp_attr_float(n, "loss_scale", 1.0f);
    if (optim_ops[k].rule == MP_CU_OPT_SGD) I->f[0] = mp_attr_float(n, "lr", 0.01f), I->f[5] = inv_scale;
    if (optim_ops[k].rule == MP_CU_OPT_MOMENTUM)
        I->f[0] = mp_attr_float(n, "lr", 1e-2f), I->f[1] = mp_attr_float(n, "momentum", 0.9f), I->f[5] = inv_scale;
    if (optim_ops[k].rule != MP_CU_OPT_ADAM) return NULL;
    I->f[0] = mp_attr_float(n, "lr", 1e-3f), I->f[1] = mp_attr_float(n, "beta1", 0.9f);
    I->f[2] = mp_attr_float(n, "beta2", 0.999f), I->f[3] = mp_attr_float(n, "epsilon", 1e-8f);
    I->f[4] = mp_attr_float(n, "weight_decay", 0.0f), I->f[5] = inv_scale;
    if (numel(c, n->in[4]) != 1) return "a step counter that is not a scalar";
    I->t[4] = T(c, n->in[4]);
    if ((e = copy_value(c, n->in[4], n->out[3]))) return e;
    EMIT(J, MP_CU_OPTIM, 1); /* t += 1, after every element read the old t (not on a skipped step) */
    J->p[0] = MP_CU_OPT_STEP_INC, J->t[4] = T(c, n->out[3]), J->t[5] = I->t[5];
    return NULL;
}

/* Adafactor in phases (runtime/cuda/mp_cu_kernels.h k_adafactor), in place on the outputs. */
static const char *lower_adafactor(cg *c, const mp_node *n)
{
    int dyn = mp_attr_int(n, "dynamic_loss_scale", 0) ? 2 : 0, nin = n->nin - dyn;
    bool factored = nin == 4;
    if ((nin != 3 && nin != 4) || n->nout != nin - 1) return "operands other than (param, grad, moments) -> (param', moments')";
    const char *e = plain_f32(c, n);
    for (int i = 0; i < nin; i++) /* the gradient of a 16-bit working copy may be 16-bit */
        if (!e && (n->in[i] < 0 || !(i == 1 ? is_f32_or_half(c, n->in[i]) : is_f32(c, n->in[i])))) e = "operands other than float32 (a 16-bit gradient aside)";
    for (int i = nin; i < n->nin; i++)
        if (!e && (n->in[i] < 0 || numel(c, n->in[i]) != 1)) e = "a finite flag or log2 scale that is not a scalar";
    for (int i = 0; !e && i < n->nout; i++) e = copy_value(c, n->in[i ? i + 1 : 0], n->out[i]);
    int32_t prm = n->in[0];
    int r = V(c, prm)->rank;
    int64_t total = numel(c, prm), R = 1, C = total, B = 1;
    if (e || !total) return e;
    if (factored) {
        if (r < 2) return "factored moments of a parameter of rank < 2";
        R = dim(c, prm, r - 2), C = dim(c, prm, r - 1), B = (R * C) != 0 ? total / (R * C) : 0;
        if (numel(c, n->in[2]) != B * R || numel(c, n->in[3]) != B * C) return "moments that do not match the parameter";
    } else if (numel(c, n->in[2]) != total) {
        return "a second moment that does not match the parameter";
    }
    need_ws(c, (1 + B + B * R) * (int64_t)sizeof(double));
    static const int factored_phases[] = {AF_ROWS, AF_COLS, AF_RMEAN, AF_SQ, AF_APPLY}, plain_phases[] = {AF_SQ, AF_APPLY};
    const int *ph = factored ? factored_phases : plain_phases;
    for (int k = 0; k < (factored ? 5 : 2); k++) {
        int64_t threads = ph[k] == AF_ROWS ? B * R : ph[k] == AF_COLS ? B * C : ph[k] == AF_RMEAN ? B : ph[k] == AF_SQ ? 1 : total;
        EMIT(I, MP_CU_ADAFACTOR, threads);
        I->p[AF_PHASE] = ph[k], I->p[AF_B] = B, I->p[AF_R] = R, I->p[AF_C] = C, I->p[AF_FACTORED] = factored;
        I->p[AF_NUMEL] = total;
        I->f[0] = mp_attr_float(n, "lr", 1e-2f), I->f[1] = mp_attr_float(n, "beta2", 0.999f);
        I->f[2] = 1.0 / mp_attr_float(n, "loss_scale", 1.0f);
        I->t[0] = T(c, n->out[0]), I->t[1] = T(c, n->in[1]), I->t[2] = T(c, n->out[1]);
        I->t[3] = factored ? T(c, n->out[2]) : -1, I->t[7] = MP_CU_WS;
        if (dyn) I->t[5] = T(c, n->in[nin]), I->t[6] = T(c, n->in[nin + 1]), I->f[6] = mp_attr_float(n, "loss_scale", 1.0f);
    }
    return NULL;
}

/* fp16's dynamic loss scale (passes/loss_scale.c, runtime/cpu_optim.c): LossScale(log2) = 2^(max_log2 +
 * log2), a MAP; AllFinite(grads...): FILL 1, then MP_CU_ALL_FINITE per gradient clears it at any inf or
 * NaN; LossScaleUpdate(log2, finite, good) in place: log2' first (it reads the old good steps), then good'. */
static const char *lower_loss_scale(cg *c, const mp_node *n)
{
    int32_t y = vout(n, 0);
    if (n->nin != 1 || y < 0 || numel(c, n->in[0]) != 1 || numel(c, y) != 1) return "operands other than scalars";
    return map(c, MP_FN_LOSS_SCALE, 1, n->in, y, (double)mp_attr_int(n, "max_log2", 15), 1);
}

static const char *lower_all_finite(cg *c, const mp_node *n)
{
    int32_t y = vout(n, 0);
    if (y < 0 || numel(c, y) != 1) return "a flag that is not a scalar";
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] < 0 || !mp_dtype_is_float(V(c, n->in[k])->dtype)) return "an input that is not a float tensor";
    const char *e = fill(c, y, 1);
    for (int k = 0; !e && k < n->nin; k++) {
        if (!numel(c, n->in[k])) continue;
        EMIT(I, MP_CU_ALL_FINITE, numel(c, n->in[k])); /* elements in any order: a transposed view too */
        I->t[0] = T(c, n->in[k]), I->t[1] = T(c, y);
    }
    return e;
}

static const char *lower_loss_scale_update(cg *c, const mp_node *n)
{
    if (n->nin != 3 || n->nout != 2) return "operands other than (log2, finite, good steps) -> (log2', good steps')";
    for (int k = 0; k < 5; k++) {
        int32_t v = k < 3 ? n->in[k] : n->out[k - 3];
        if (v < 0 || numel(c, v) != 1) return "operands that are not scalars";
    }
    if (c->off[n->out[0]] != c->off[n->in[0]] || c->off[n->out[1]] != c->off[n->in[2]]) return "outputs not in place";
    double interval = (double)mp_attr_int(n, "growth_interval", 2000);
    const char *e = map(c, MP_FN_LOSS_SCALE_LOG2, 3, n->in, n->out[0], interval, 1);
    int32_t good[2] = {n->in[1], n->in[2]};
    return e ? e : map(c, MP_FN_LOSS_SCALE_GOOD, 2, good, n->out[1], interval, 1);
}

/* ---- GatherND, ScatterND, RotaryEmbedding, Attention ----------------------------------------------- */

/* GatherND (any dtype, batch_dims) and ScatterND (float; batch_dims 0; reduction none, add, mul, max,
 * min), as runtime/cpu_tensor.c: MP_CU_GATHER_ND a thread per output element; MP_CU_SCATTER_ND a thread
 * per output element gathering the update rows that hit it, in the CPU's order (GatherND's gradient:
 * Zeros, then the add), no atomics. */
static const char *lower_nd(cg *c, const mp_node *n)
{
    bool scatter = !strcmp(n->op_type, "ScatterND");
    int32_t data, idx, upd, y;
    int red;
    const char *e = index_operands(c, n, scatter, &data, &idx, &upd, &y, &red);
    if (e) return e;
    int r = V(c, data)->rank, ir = V(c, idx)->rank;
    int64_t b = scatter ? 0 : mp_attr_int(n, "batch_dims", 0), q = ir ? dim(c, idx, ir - 1) : 0;
    if (ir < 1 || b < 0 || b >= ir || b + q > r) return "bad batch_dims or index depth";
    int64_t batch = 1, per = 1, slice = 1, xd[MP_CU_MAX_RANK], xs[MP_CU_MAX_RANK];
    for (int i = 0; i < b; i++) batch *= dim(c, data, i);
    for (int i = (int)b; i < ir - 1; i++) per *= dim(c, idx, i);
    for (int i = (int)(b + q); i < r; i++) slice *= dim(c, data, i);
    if (scatter ? numel(c, upd) != per * slice : numel(c, y) != batch * per * slice) return "sizes that disagree with data and indices";
    if (!numel(c, y) || !slice) return NULL;
    EMIT(I, scatter ? MP_CU_SCATTER_ND : MP_CU_GATHER_ND, numel(c, y));
    I->t[0] = T(c, data), I->t[1] = T(c, idx), I->t[2] = T(c, scatter ? upd : y), I->t[3] = scatter ? T(c, y) : -1;
    dims_of(c, data, xd);
    contiguous(r, xd, xs);
    I->p[GN_RANK] = r, I->p[GN_Q] = q, I->p[GN_BATCH] = b, I->p[GN_RED] = red, I->p[GN_SLICE] = slice, I->p[GN_PER] = per;
    memcpy(I->p + GN_DIMS, xd, (size_t)r * sizeof *xd), memcpy(I->p + GN_DIMS + r, xs, (size_t)r * sizeof *xs);
    return NULL;
}

/* RotaryEmbedding (runtime/cpu_misc.c; its gradient is a RotaryEmbedding with the sin cache negated):
 * MP_CU_ROTARY, a thread per rotated pair or passed-through element. */
static const char *lower_rotary(cg *c, const mp_node *n)
{
    int32_t x = vin(n, 0), cc = vin(n, 1), sc = vin(n, 2), pid = vin(n, 3), y = vout(n, 0);
    if (x < 0 || cc < 0 || sc < 0 || y < 0) return "missing operands";
    for (int k = 0; k < n->nin; k++)
        if (tview(c, n->in[k])) return "a transposed view operand";
    if (!mp_dtype_is_float(V(c, x)->dtype) || !mp_dtype_is_float(V(c, cc)->dtype) || !mp_dtype_is_float(V(c, sc)->dtype))
        return "operands other than float";
    if (V(c, x)->dtype != V(c, y)->dtype || numel(c, x) != numel(c, y)) return "an output other than the input's shape";
    if (pid >= 0 && V(c, pid)->dtype != MP_INT64 && V(c, pid)->dtype != MP_INT32) return "position_ids other than int32/int64";
    int r = V(c, x)->rank;
    if (r != 3 && r != 4) return "other than a 3-D or 4-D input";
    int64_t B = dim(c, x, 0), H, S, D;
    if (r == 4) {
        H = dim(c, x, 1), S = dim(c, x, 2), D = dim(c, x, 3);
    } else {
        H = mp_attr_int(n, "num_heads", 0), S = dim(c, x, 1);
        if (H <= 0 || dim(c, x, 2) % H) return "a 3-D input without num_heads dividing its hidden size";
        D = dim(c, x, 2) / H;
    }
    int64_t R = mp_attr_int(n, "rotary_embedding_dim", 0);
    if (R == 0) R = D;
    if (R < 0 || R > D || R % 2) return "a rotary_embedding_dim that is odd or above the head size";
    int cr = V(c, cc)->rank;
    if (cr < 2 || dim(c, cc, cr - 1) != R / 2 || numel(c, sc) != numel(c, cc)) return "caches that do not end in rotary_dim / 2";
    if (pid < 0 && (cr != 3 || dim(c, cc, 0) != B || dim(c, cc, 1) != S)) return "caches other than [B, S, R / 2] without position_ids";
    if (pid >= 0 && (numel(c, pid) != B * S || cr != 2)) return "position_ids other than [B, S] or caches other than 2-D";
    int64_t per = R / 2 + D - R;
    if (!B || !H || !S || !per) return NULL;
    EMIT(I, MP_CU_ROTARY, B * H * S * per);
    I->t[0] = T(c, x), I->t[1] = T(c, cc), I->t[2] = T(c, sc), I->t[3] = T(c, pid), I->t[4] = T(c, y);
    I->p[RO_B] = B, I->p[RO_H] = H, I->p[RO_S] = S, I->p[RO_D] = D, I->p[RO_R] = R;
    I->p[RO_INTER] = mp_attr_int(n, "interleaved", 0) != 0, I->p[RO_FLAT] = r == 3, I->p[RO_NPOS] = dim(c, cc, 0);
    return NULL;
}

/* The heads view of a 3-D ([B, S, H D]) or 4-D ([B, H, S, D]) Q, K or V: H, S, D; false if neither. */
static bool heads_of(const cg *c, int32_t v, int64_t heads, int64_t *H, int64_t *S, int64_t *D)
{
    int r = V(c, v)->rank;
    if (r == 4) {
        *H = dim(c, v, 1), *S = dim(c, v, 2), *D = dim(c, v, 3);
        return true;
    }
    if (r != 3 || heads <= 0 || dim(c, v, 2) % heads) return false;
    *H = heads, *S = dim(c, v, 1), *D = dim(c, v, 2) / heads;
    return true;
}

static const char *attention_op(cg *c, const int64_t *p, const double *f, const int32_t *ops, int kind, int64_t n, int32_t out)
{
    if (!n || (kind != ATK_STATS && T(c, out) < 0)) return NULL;
    EMIT(I, MP_CU_ATTENTION, n);
    memcpy(I->p, p, AT_COUNT * sizeof *p);
    I->p[AT_KIND] = kind, I->f[0] = f[0], I->f[1] = f[1];
    for (int k = 0; k < 8; k++) I->t[k] = T(c, ops[k]);
    I->t[8] = kind == ATK_STATS ? -1 : T(c, out), I->t[9] = MP_CU_WS;
    return NULL;
}

/* Attention (opset 23, runtime/cpu_attention.c mp_cpu_Attention) and AttentionGrad (mp_cpu_AttentionGrad):
 * present_key / present_value by COPY (the past rows, then K's or V's); then MP_CU_ATTENTION: each query
 * row's statistics into the workspace, then a thread per element of Y, qk_matmul_output, dQ, dMask, dK,
 * dV, recomputing the scores it needs in the CPU's order of additions (no atomics). */
static const char *lower_attention(cg *c, const mp_node *n)
{
    bool grad = !strcmp(n->op_type, "AttentionGrad");
    int o = grad ? 1 : 0;
    int32_t q = vin(n, o), k = vin(n, o + 1), v = vin(n, o + 2), mask = vin(n, o + 3), pk = vin(n, o + 4), pv = vin(n, o + 5);
    int32_t nonpad = vin(n, o + 6), dy = grad ? vin(n, 0) : -1;
    if (q < 0 || k < 0 || v < 0 || (grad && dy < 0)) return "missing operands";
    for (int i = 0; i < n->nin + n->nout; i++) {
        int32_t id = i < n->nin ? n->in[i] : n->out[i - n->nin];
        if (tview(c, id)) return "a transposed view operand";
    }
    mp_dtype dt = V(c, q)->dtype;
    if ((dt != MP_FLOAT && dt != MP_DOUBLE) || V(c, k)->dtype != dt || V(c, v)->dtype != dt) return "Q, K, V other than one float dtype";
    if (V(c, q)->rank != V(c, k)->rank || V(c, q)->rank != V(c, v)->rank) return "Q, K and V of different ranks";
    int64_t p[AT_COUNT] = {0}, Hq, Sq, D, Hkv, Sk, Dk, Hv, Sv, Dv;
    if (!heads_of(c, q, mp_attr_int(n, "q_num_heads", 0), &Hq, &Sq, &D) || !heads_of(c, k, mp_attr_int(n, "kv_num_heads", 0), &Hkv, &Sk, &Dk) ||
        !heads_of(c, v, mp_attr_int(n, "kv_num_heads", 0), &Hv, &Sv, &Dv))
        return "Q, K or V neither 4-D nor 3-D with its head count";
    int64_t B = dim(c, q, 0), P = 0;
    if (dim(c, k, 0) != B || dim(c, v, 0) != B || Hv != Hkv || Sv != Sk || Dk != D || Hkv <= 0 || Hq % Hkv) return "Q, K and V shapes that disagree";
    if (pk >= 0 || pv >= 0) {
        if (pk < 0 || pv < 0 || V(c, pk)->rank != 4 || V(c, pv)->rank != 4 || dim(c, pk, 0) != B || dim(c, pk, 1) != Hkv ||
            dim(c, pk, 3) != D || dim(c, pv, 2) != dim(c, pk, 2) || dim(c, pv, 3) != Dv || V(c, pk)->dtype != dt || V(c, pv)->dtype != dt)
            return "past_key and past_value other than [B, kv_heads, past, D] of Q's dtype";
        P = dim(c, pk, 2);
    }
    int64_t Tk = P + Sk;
    p[AT_B] = B, p[AT_HQ] = Hq, p[AT_HKV] = Hkv, p[AT_SQ] = Sq, p[AT_D] = D, p[AT_DV] = Dv, p[AT_P] = P, p[AT_T] = Tk;
    p[AT_QFLAT] = V(c, q)->rank == 3, p[AT_KFLAT] = V(c, k)->rank == 3, p[AT_VFLAT] = V(c, v)->rank == 3;
    int32_t y = grad ? dy : vout(n, 0);
    if (y < 0 || numel(c, y) != B * Hq * Sq * Dv) return "a Y (dY) of other than B Hq Sq Dv elements";
    p[AT_YFLAT] = V(c, y)->rank == 3;
    p[AT_CAUSAL] = mp_attr_int(n, "is_causal", 0) != 0, p[AT_MODE] = mp_attr_int(n, "qk_matmul_output_mode", 0);
    for (int i = 0; i < 4; i++) p[AT_MDIMS + i] = 1, p[AT_MSTR + i] = 0;
    if (mask >= 0) {
        int mr = V(c, mask)->rank;
        if (mr < 1 || mr > 4 || (V(c, mask)->dtype != MP_BOOL && V(c, mask)->dtype != dt)) return "an attn_mask other than bool or Q's dtype, rank 1 to 4";
        int64_t s = 1, want[4] = {B, Hq, Sq, Tk};
        for (int i = mr - 1; i >= 0; i--) {
            int oo = 4 - mr + i;
            p[AT_MDIMS + oo] = dim(c, mask, i), p[AT_MSTR + oo] = dim(c, mask, i) == 1 && oo != 3 ? 0 : s;
            s *= dim(c, mask, i);
        }
        for (int i = 0; i < 3; i++)
            if (p[AT_MDIMS + i] != 1 && p[AT_MDIMS + i] != want[i]) return "an attn_mask that does not broadcast to [B, H, Sq, T]";
        if (p[AT_MDIMS + 3] > Tk) return "an attn_mask longer than the keys";
        p[AT_HAS_MASK] = 1;
    }
    if (nonpad >= 0 && (numel(c, nonpad) != B || (V(c, nonpad)->dtype != MP_INT64 && V(c, nonpad)->dtype != MP_INT32)))
        return "nonpad_kv_seqlen other than B integers";
    double f[2] = {mp_node_attr(n, "scale") ? mp_attr_float(n, "scale", 1.0f) : 1 / sqrt((double)D), mp_attr_float(n, "softcap", 0.0f)};
    const int32_t ops8[8] = {q, k, v, mask, pk, pv, nonpad, dy};
    int64_t rows = B * Hq * Sq;
    const char *e;
    if (!grad) {
        for (int kv = 0; kv < 2; kv++) { /* present_key / present_value: the past rows, then the new ones */
            int32_t pres = vout(n, 1 + kv), src = kv ? v : k, past = kv ? pv : pk;
            int64_t w = kv ? Dv : D, dims[4] = {B, Hkv, P, w}, ps[4], ds[4] = {Hkv * Tk * w, Tk * w, w, 1}, ss[4];
            if (pres < 0 || T(c, pres) < 0) continue;
            if (V(c, pres)->dtype != dt || numel(c, pres) != B * Hkv * Tk * w) return "a present cache of another shape";
            contiguous(4, dims, ps);
            if (P && (e = copy(c, past, pres, 4, dims, 0, ps, 0, ds))) return e;
            dims[2] = Sk;
            if (V(c, src)->rank == 3) ss[0] = Sk * Hkv * w, ss[1] = w, ss[2] = Hkv * w, ss[3] = 1;
            else contiguous(4, dims, ss);
            if ((e = copy(c, src, pres, 4, dims, 0, ss, P * w, ds))) return e;
        }
        int32_t qk = vout(n, 3);
        if (qk >= 0 && T(c, qk) >= 0 && (V(c, qk)->dtype != dt || numel(c, qk) != rows * Tk)) return "a qk_matmul_output of another shape";
        if (V(c, y)->dtype != dt) return "a Y of another dtype";
        if (!rows) return NULL;
        need_ws(c, 3 * rows * (int64_t)sizeof(double));
        if ((e = attention_op(c, p, f, ops8, ATK_STATS, rows, y)) || (e = attention_op(c, p, f, ops8, ATK_Y, numel(c, y), y))) return e;
        return qk >= 0 ? attention_op(c, p, f, ops8, ATK_QK, rows * Tk, qk) : NULL;
    }
    int32_t dq = vout(n, 0), dk = vout(n, 1), dv = vout(n, 2), dm = vout(n, 3);
    if ((dq >= 0 && (V(c, dq)->dtype != dt || numel(c, dq) != numel(c, q))) || (dk >= 0 && (V(c, dk)->dtype != dt || numel(c, dk) != numel(c, k))) ||
        (dv >= 0 && (V(c, dv)->dtype != dt || numel(c, dv) != numel(c, v))) || (dm >= 0 && (V(c, dm)->dtype != dt || numel(c, dm) != rows * Tk)) ||
        V(c, dy)->dtype != dt)
        return "gradients of other than their inputs' shapes";
    if (!rows) { /* no query rows: the CPU's sums stay 0 */
        if ((dk >= 0 && (e = fill(c, dk, 0))) || (dv >= 0 && (e = fill(c, dv, 0)))) return e;
        return NULL;
    }
    need_ws(c, 3 * rows * (int64_t)sizeof(double));
    if ((e = attention_op(c, p, f, ops8, ATK_STATS, rows, q))) return e;
    if (dq >= 0 && (e = attention_op(c, p, f, ops8, ATK_DQ, numel(c, q), dq))) return e;
    if (dm >= 0 && (e = attention_op(c, p, f, ops8, ATK_DMASK, rows * Tk, dm))) return e;
    if (dk >= 0 && (e = attention_op(c, p, f, ops8, ATK_DK, numel(c, k), dk))) return e;
    return dv >= 0 ? attention_op(c, p, f, ops8, ATK_DV, numel(c, v), dv) : NULL;
}

/* ---- the op table ---------------------------------------------------------------------------------- */

static const struct {
    const char *op;
    lower_fn fn;
} ops[] = {
    {"Reshape", lower_view}, {"Flatten", lower_view}, {"Squeeze", lower_view}, {"Unsqueeze", lower_view},
    {"Identity", lower_view}, {"Clip", lower_clip}, {"PRelu", lower_prelu}, {"Transpose", lower_transpose}, {"Expand", lower_expand}, {"Concat", lower_concat},
    {"Split", lower_split}, {"Slice", lower_slice}, {"SliceGrad", lower_slice}, {"Gather", lower_gather},
    {"GatherGrad", lower_gather}, {"Zeros", lower_zeros}, {"CumSum", lower_cumsum}, {"CumProd", lower_cumsum},
    {"LpNormalization", lower_lp_norm},
    {"ReverseSequence", lower_reverse_seq}, {"LRN", lower_lrn}, {"LRNGrad", lower_lrn}, {"Sum", lower_variadic},
    {"Mean", lower_variadic}, {"Max", lower_variadic}, {"Min", lower_variadic}, {"GlobalMaxPool", lower_gap},
    {"ArgMax", lower_arg}, {"ArgMin", lower_arg}, {"Hardmax", lower_hardmax}, {"OneHot", lower_one_hot},
    {"TopK", lower_topk},
    {"GatherElements", lower_elements},
    {"ScatterElements", lower_elements}, {"Scatter", lower_elements}, {"MaxUnpool", lower_max_unpool}, {"CenterCropPad", lower_center_crop_pad}, {"DepthToSpace", lower_depth_space}, {"SpaceToDepth", lower_depth_space},
    {"Tile", lower_tile}, {"Trilu", lower_trilu}, {"ConstantOfShape", lower_constant_of_shape}, {"Gemm", lower_gemm}, {"MatMul", lower_matmul},
    {"MatMulGradA", lower_matmul}, {"MatMulGradB", lower_matmul}, {"SumToShape", lower_sum_to},
    {"GlobalAveragePool", lower_gap}, {"GlobalAveragePoolGrad", lower_gap}, {"Softmax", lower_softmax},
    {"LogSoftmax", lower_softmax}, {"SoftmaxGrad", lower_softmax}, {"LogSoftmaxGrad", lower_softmax}, {"SoftmaxCrossEntropyLoss", lower_sce},
    {"SoftmaxCrossEntropyGrad", lower_sce}, {"NegativeLogLikelihoodLoss", lower_sce}, {"NegativeLogLikelihoodGrad", lower_sce},
    {"LayerNormalization", lower_layer_norm}, {"RMSNormalization", lower_layer_norm}, {"RMSNormalizationGrad", lower_layer_norm},
    {"GatherND", lower_nd}, {"ScatterND", lower_nd}, {"RotaryEmbedding", lower_rotary}, {"Attention", lower_attention},
    {"AttentionGrad", lower_attention},
    {"LayerNormalizationGrad", lower_layer_norm}, {"BatchNormalization", lower_batch_norm},
    {"BatchNormalizationGrad", lower_batch_norm}, {"InstanceNormalization", lower_group_norm},
    {"InstanceNormalizationGrad", lower_group_norm}, {"GroupNormalization", lower_group_norm},
    {"GroupNormalizationGrad", lower_group_norm}, {"Conv", lower_conv}, {"ConvGrad", lower_conv},
    {"MaxPool", lower_pool}, {"AveragePool", lower_pool}, {"LpPool", lower_pool}, {"GlobalLpPool", lower_gap},
    {"MaxPoolGrad", lower_pool}, {"AveragePoolGrad", lower_pool}, {"Dropout", lower_dropout}, {"AdamUpdate", lower_optim},
    {"SGDUpdate", lower_optim}, {"MomentumUpdate", lower_optim}, {"AdafactorUpdate", lower_adafactor},
    {"ReduceSum", lower_reduce}, {"ReduceMean", lower_reduce}, {"ReduceSumGrad", lower_reduce},
    {"ReduceMeanGrad", lower_reduce}, {"ReduceMax", lower_reduce}, {"ReduceMin", lower_reduce}, {"ReduceProd", lower_reduce},
    {"ReduceL1", lower_reduce}, {"ReduceL2", lower_reduce}, {"ReduceSumSquare", lower_reduce}, {"ReduceLogSum", lower_reduce},
    {"ReduceLogSumExp", lower_reduce}, {"ConvTranspose", lower_conv_transpose}, {"Resize", lower_resize},
    {"ResizeGrad", lower_resize}, {"Pad", lower_pad}, {"PadGrad", lower_pad}, {"Einsum", lower_einsum},
    {"GridSample", lower_grid_sample}, {"GridSampleGrad", lower_grid_sample}, {"AffineGrid", lower_affine_grid},
    {"AffineGridGrad", lower_affine_grid}, {"EyeLike", lower_eye_like}, {"Range", lower_range},
    {"BitwiseAnd", lower_bitwise}, {"BitwiseOr", lower_bitwise}, {"BitwiseXor", lower_bitwise},
    {"BitwiseNot", lower_bitwise}, {"BitShift", lower_bitwise}, {"QuantizeLinear", lower_quant},
    {"DequantizeLinear", lower_quant}, {"Upsample", lower_upsample}, {"LossScale", lower_loss_scale},
    {"AllFinite", lower_all_finite}, {"LossScaleUpdate", lower_loss_scale_update}, {"Det", lower_det},
    {"MatMulInteger", lower_matmul_int}, {"ConvInteger", lower_conv},
};

static lower_fn find_lowering(const char *op)
{
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (!strcmp(ops[k].op, op)) return ops[k].fn;
    for (size_t k = 0; k < sizeof map_ops / sizeof *map_ops; k++)
        if (!strcmp(map_ops[k].op, op)) return lower_map;
    return NULL;
}

/* A node whose outputs are all folded (Shape, Range, a constant mask) becomes constants, unless they change
 * from step to step (varies, find_varying): the importer folds a small initializer's Reshape, but the
 * parameter it reads is trained. */
static bool folded(const cg *c, const mp_node *n, const bool *varies)
{
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0 && (varies[n->out[k]] || !V(c, n->out[k])->konst || !V(c, n->out[k])->konst->data))
            return false;
    return n->nout > 0;
}

static const char *lower_constant(cg *c, const mp_node *n)
{
    for (int k = 0; k < n->nout; k++) {
        int32_t v = n->out[k];
        if (v < 0 || T(c, v) < 0 || !V(c, v)->bytes) continue;
        EMIT(I, MP_CU_CONSTANT, 1);
        I->t[0] = T(c, v);
        c->kon[c->n - 1] = V(c, v)->konst;
    }
    return NULL;
}

/* ---- writing --------------------------------------------------------------------------------------- */

static const struct {
    mp_dtype dt;
    int cu;
} dtypes[] = {{MP_FLOAT, MP_CU_F32}, {MP_INT64, MP_CU_I64}, {MP_BOOL, MP_CU_BOOL}, {MP_INT32, MP_CU_I32}, {MP_DOUBLE, MP_CU_F64},
               {MP_UINT8, MP_CU_U8},  {MP_INT8, MP_CU_I8},   {MP_UINT16, MP_CU_U16}, {MP_INT16, MP_CU_I16},
               {MP_BFLOAT16, MP_CU_BF16}, {MP_FLOAT16, MP_CU_F16}};

static int cu_dtype(mp_dtype t)
{
    for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++)
        if (dtypes[k].dt == t) return dtypes[k].cu;
    return -1;
}

static void put_cstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\%03o", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void put_bytes(FILE *f, const char *name, int32_t id, const mp_tensor *t)
{
    size_t n = (size_t)t->numel * mp_elem_size(t->dtype);
    fprintf(f, "static const unsigned char %s%d[] = {", name, id);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%u", !i ? "\n    " : i % 24 ? "," : ",\n    ", ((const unsigned char *)t->data)[i]);
    fprintf(f, "%s};\n", n ? "\n" : "0");
}

/* runtime/cuda, next to this file's directory in the source tree. */
static void cuda_dir(char *buf, size_t n)
{
    char here[PATH_MAX];
    snprintf(here, sizeof here, "%s", __FILE__);
    char *cut = strstr(here, "codegen/plan_cu.c");
    if (cut) *cut = 0;
    char abs[PATH_MAX];
    if (!realpath(*here ? here : ".", abs)) snprintf(abs, sizeof abs, ".");
    snprintf(buf, n, "%s/runtime/cuda", abs);
}

/* The data a 16-bit working copy's fp32 master `<name>.master` starts from: the working copy's, when the
 * step holds it (runtime/plan_run.c master_source), so that the copy the forward reads is the master
 * rounded; NULL when both are seeded alike. */
static bool is_master(const char *name)
{
    size_t n = strlen(name);
    return n > 7 && !strcmp(name + n - 7, ".master");
}

static const mp_tensor *master_source(const mp_graph *g, int32_t v)
{
    const char *name = g->values[v].name;
    if (g->values[v].producer >= 0 || !is_master(name) || g->values[v].dtype != MP_FLOAT) return NULL;
    char base[512];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - 7), name);
    int32_t w = mp_graph_find(g, base);
    const mp_tensor *k = w >= 0 ? g->values[w].konst : NULL;
    return k && k->data && k->numel == g->values[v].bytes / 4 ? k : NULL;
}

/* The master's bytes: its working copy's values widened to fp32. */
static int put_master(FILE *f, int32_t v, const mp_tensor *src)
{
    float *d = malloc((size_t)(src->numel ? src->numel : 1) * sizeof *d);
    if (!d) return -1;
    for (int64_t i = 0; i < src->numel; i++) d[i] = (float)mp_tensor_get_f64(src, i);
    mp_tensor t = {MP_FLOAT, src->rank, src->dims, src->numel, d};
    put_bytes(f, "data_", v, &t);
    free(d);
    return 0;
}

static int put_tables(FILE *f, const cg *c, const mp_schedule *s, const int64_t *offsets, const mp_plan_info *info,
                      int32_t nt, int32_t loss)
{
    const mp_graph *g = c->g;
    fprintf(f, "/* plan.cu - written by memplan (codegen/plan_cu.c); build with make. */\n#include \"memplan_cuda.h\"\n\n");
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (c->tix[v] < 0) continue;
        const mp_tensor *src = master_source(g, v);
        if (g->values[v].producer < 0 && g->values[v].konst && g->values[v].konst->data) put_bytes(f, "data_", v, g->values[v].konst);
        else if (src && put_master(f, v, src)) return -1;
    }
    for (int32_t i = 0; i < c->n; i++)
        if (c->kon[i]) put_bytes(f, "konst_", i, c->kon[i]);
    fprintf(f, "\nstatic const mp_cu_tensor tensors[] = {\n");
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (c->tix[v] < 0) continue;
        const mp_value *val = &g->values[v];
        bool master = is_master(val->name);
        int init = val->producer >= 0 ? 0 : (val->konst && val->konst->data) || master_source(g, v) ? 3
                   : val->role == MP_ROLE_OPT_STATE && !master ? 2 : 1;
        fprintf(f, "    {");
        put_cstr(f, val->name);
        fprintf(f, ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %d, %d, {", offsets[v], val->bytes, numel(c, v),
                cu_dtype(val->dtype), val->rank);
        for (int a = 0; a < val->rank; a++) fprintf(f, "%s%" PRId64, a ? ", " : "", dim(c, v, a));
        fprintf(f, "%s}, %d, %.17g, ", val->rank ? "" : "0", init, init == 1 ? mp_plan_seed_range(g, v) : 0.0);
        if (init == 3) fprintf(f, "data_%d},\n", v);
        else fprintf(f, "0},\n");
    }
    fprintf(f, "};\n\nstatic const char *const nodes[] = {\n");
    for (int32_t i = 0; i < s->n; i++) {
        fprintf(f, "    ");
        put_cstr(f, g->nodes[s->order[i]].name);
        fprintf(f, ",\n");
    }
    fprintf(f, "};\n\nstatic const mp_cu_instr instrs[] = {\n");
    for (int32_t i = 0; i < c->n; i++) {
        const mp_cu_instr *I = &c->ins[i];
        int np = MP_CU_NP, nf = MP_CU_NF;
        while (np > 1 && !I->p[np - 1]) np--;
        while (nf > 1 && I->f[nf - 1] == 0) nf--;
        fprintf(f, "    {%d, %d, {", I->op, I->node);
        for (int k = 0; k < MP_CU_NT; k++) fprintf(f, "%s%d", k ? ", " : "", I->t[k]);
        fprintf(f, "}, %" PRId64 ", {", I->n);
        for (int k = 0; k < np; k++) fprintf(f, "%s%" PRId64, k ? ", " : "", I->p[k]);
        fprintf(f, "}, {");
        for (int k = 0; k < nf; k++) fprintf(f, "%s%.17g", k ? ", " : "", I->f[k]);
        fprintf(f, "}, ");
        if (c->kon[i]) fprintf(f, "konst_%d},\n", i);
        else fprintf(f, "0},\n");
    }
    if (!c->n) fprintf(f, "    {0, 0, {-1}, 0, {0}, {0}, 0},\n");
    bool conv = false;
    for (int32_t i = 0; i < c->n; i++) conv |= c->ins[i].op == MP_CU_CONV || c->ins[i].op == MP_CU_CONV_DX || c->ins[i].op == MP_CU_CONV_DW;
    fprintf(f, "};\n\nstatic const mp_cu_plan plan = {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %d, %d, %d, tensors, instrs, nodes};\n\n",
            info->arena_bytes, info->lower_bound, c->ws, conv ? CONV_WORKSPACE_BYTES : 0, nt, c->n, loss);
    fprintf(f, "int main(int argc, char **argv) { return mp_cu_main(argc, argv, &plan); }\n");
    return 0;
}

/* Ops lowered for float16 / bfloat16 operands (--precision bf16|fp16): each reads a 16-bit tensor widened
 * (exact), computes as for fp32 and rounds every stored element to fp32, then to 16 bits, as the CPU
 * executor's widen-run-round dispatch (runtime/exec.c widen16, round16). A node of any other op with a
 * 16-bit operand is refused by name: its kernel reads raw floats, or stores a 16-bit intermediate the CPU
 * keeps in fp32. */
static const char *const ops16[] = {
    /* copies by element size; Cast rounds once, as runtime/cpu_elementwise.c cast_into; SliceGrad a FILL 0,
     * then a COPY of dY (the CPU's widened copy, rounded back, is the same bits) */
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast", "Expand", "Slice", "SliceGrad",
    /* one MAP each, computed in double from widened operands */
    "Relu", "ReluGrad", "Add", "Sub", "Mul", "Div", "Neg",
    /* moved by size (GATHER, COPY, TRILU's kept elements exact); Where and WhereGrad pick an exact value */
    "Gather", "Transpose", "Split", "Concat", "Trilu", "Where", "WhereGrad",
    /* one MAP each, in double from widened operands (Equal's output is bool), as runtime/cpu_elementwise.c
     * and cpu_grad.c compute them (DropoutGrad: dY times 1 / (1 - ratio) where the mask is set) */
    "Equal", "Gelu", "GeluGrad", "HardSwish", "HardSwishGrad", "HardSigmoid", "HardSigmoidGrad", "DropoutGrad",
    /* DROPOUT: runtime/cpu_util.c's counter-based draw per (seed, node, element), X widened times
     * 1 / (1 - ratio) in double, rounded once (the mask is bool) */
    "Dropout",
    /* one REDUCE; the GEMM (a 16-bit bias only as a copy, beta 1; a 16-bit output summed over batches
     * through the fp32 workspace, then one rounding); the loss (its fp32 log_prob recomputed) */
    "SumToShape", "Gemm", "MatMul", "MatMulGradA", "MatMulGradB", "SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyGrad",
    /* SOFTMAX, LN_ROWS and LN_COLS: sums and statistics in double, each stored element rounded once (the
     * gradient's mean and rstd stay doubles in the workspace); GatherGrad: SCATTER_ADD in double into the
     * workspace, then one rounding */
    "Softmax", "SoftmaxGrad", "LayerNormalization", "LayerNormalizationGrad", "GatherGrad",
    /* CONV, CONV_DX, CONV_DW (never cuDNN for a 16-bit operand), BN_STATS, BN_APPLY, POOL, POOL_DX: sums in
     * double, each stored element rounded once (Conv's bias added to its fp32 sum in fp32, as the CPU's
     * add_bias; BN's statistics stay doubles in the workspace); ConvGrad's dB one REDUCE */
    "Conv", "ConvGrad", "BatchNormalization", "BatchNormalizationGrad", "MaxPool", "MaxPoolGrad",
    /* POOL, POOL_DX (sum over the window / count; dX the sum of dY times 1 / count, as cpu_grad.c), and
     * GlobalAveragePool one REDUCE (sum / count), its gradient one MAP (dY / count): in double, each stored
     * element rounded once */
    "AveragePool", "AveragePoolGrad", "GlobalAveragePool", "GlobalAveragePoolGrad",
    /* the updates read a 16-bit gradient widened; master and state are fp32; fp16's loss scale */
    "SGDUpdate", "MomentumUpdate", "AdamUpdate", "AdafactorUpdate", "LossScale", "AllFinite", "LossScaleUpdate",
    /* one REDUCE (sum in double, over the count for the mean, rounded once) or one MAP (dY times 1 / count);
     * Sum and Mean fold in the fp32 workspace when Y would hold an intermediate, then round once */
    "ReduceMean", "ReduceSum", "ReduceMeanGrad", "ReduceSumGrad", "Sum", "Mean",
    NULL,
};

static bool half_ok(const cg *c, const mp_node *n)
{
    bool any = false;
    for (int k = 0; k < n->nin + n->nout; k++) {
        int32_t v = k < n->nin ? n->in[k] : n->out[k - n->nin];
        any |= v >= 0 && mp_dtype_is_half(V(c, v)->dtype);
    }
    for (size_t k = 0; any && ops16[k]; k++)
        if (!strcmp(ops16[k], n->op_type)) return true;
    return !any;
}

/* Which values change from step to step: data, parameters, buffers and optimizer state, and what is computed
 * from them (Shape and Size read only the shape). The schedule is topological. varies[nvalues + 1]. */
static void find_varying(const mp_graph *g, const mp_schedule *s, bool *varies)
{
    for (int32_t v = 0; v < g->nvalues; v++) {
        mp_role r = g->values[v].role;
        varies[v] = g->values[v].producer < 0 && (r == MP_ROLE_INPUT || r == MP_ROLE_PARAM || r == MP_ROLE_BUFFER ||
                                                  r == MP_ROLE_OPT_STATE);
    }
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        bool shape_only = !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"), any = false;
        for (int k = 0; k < n->nin && !shape_only; k++) any |= n->in[k] >= 0 && varies[n->in[k]];
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) varies[n->out[k]] |= any;
    }
}

/* Lowers every instruction; the first refusal, naming the op and the node, and
 * how many other op types have none. */
static int lower_nodes(cg *c, const mp_schedule *s, const bool *varies, mp_err *err)
{
    const mp_graph *g = c->g;
    const char *first = NULL, *missing[64];
    int nmissing = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        c->step = i, c->node_id = s->order[i];
        for (int k = 0; k < n->nin + n->nout; k++) {
            int32_t v = k < n->nin ? n->in[k] : n->out[k - n->nin];
            if (v >= 0 && c->tix[v] >= 0 && cu_dtype(V(c, v)->dtype) < 0)
                return mp_fail(err, "plan.cu: op %s (node '%s'): the CUDA runtime has no %s tensors", n->op_type, n->name,
                               mp_dtype_name(V(c, v)->dtype));
            if (v >= 0 && V(c, v)->rank > MP_CU_MAX_RANK)
                return mp_fail(err, "plan.cu: op %s (node '%s'): rank %d > %d", n->op_type, n->name, V(c, v)->rank, MP_CU_MAX_RANK);
        }
        bool any_out = false, in_ok = true;
        for (int k = 0; k < n->nout; k++) any_out |= n->out[k] >= 0 && c->tix[n->out[k]] >= 0;
        for (int k = 0; k < n->nin; k++) in_ok &= n->in[k] < 0 || c->tix[n->in[k]] >= 0 || !V(c, n->in[k])->bytes;
        if (!any_out) continue; /* nothing it writes is kept */
        if (reserve(c, EMITS_PER_NODE)) return mp_fail(err, "out of memory");
        lower_fn fn = folded(c, n, varies) ? lower_constant : find_lowering(n->op_type);
        const char *why = !fn ? NULL : !in_ok && fn != lower_constant ? "an input outside the arena"
                        : fn != lower_constant && !half_ok(c, n) ? "float16 / bfloat16 operands" : fn(c, n);
        if (fn && !why) continue;
        if (!first) {
            if (why) mp_fail(err, "plan.cu: op %s (node '%s'): the CUDA kernel does not support %s", n->op_type, n->name, why);
            else mp_fail(err, "plan.cu: op %s (node '%s') has no CUDA kernel", n->op_type, n->name);
            first = n->op_type;
        }
        bool seen = false;
        for (int k = 0; k < nmissing; k++) seen |= !strcmp(missing[k], n->op_type);
        if (!seen && nmissing < 64) missing[nmissing++] = n->op_type;
    }
    if (!first) return 0;
    if (nmissing > 1) {
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, " (ops refused: ");
        for (int k = 0; k < nmissing; k++) {
            len = strlen(err->msg);
            snprintf(err->msg + len, sizeof err->msg - len, "%s%s", k ? ", " : "", missing[k]);
        }
        len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, ")");
    }
    return -1;
}

static int lower_all(cg *c, const mp_schedule *s, mp_err *err)
{
    bool *varies = calloc((size_t)c->g->nvalues + 1, sizeof *varies);
    if (!varies) return mp_fail(err, "out of memory");
    find_varying(c->g, s, varies);
    int rc = lower_nodes(c, s, varies, err);
    free(varies);
    return rc;
}

static int write_makefile(const char *dir, mp_err *err)
{
    char cdir[PATH_MAX + 32], mk[PATH_MAX + 32];
    cuda_dir(cdir, sizeof cdir);
    snprintf(mk, sizeof mk, "%s/Makefile", dir);
    FILE *f = fopen(mk, "w");
    if (!f) return mp_fail(err, "%s: %s", mk, strerror(errno));
    fprintf(f, "# written by memplan: make builds ./plan, the executable plan (plan.cu) on the GPU;\n"
               "# make plan-host the same plan on the CPU (runtime/cuda/mp_cu_host.c)\n"
               "MEMPLAN_CUDA ?= %s\nNVCC ?= nvcc\nNVCCFLAGS ?= -O2\nCC ?= cc\n"
               "# CUDNN=0: convolutions on the runtime's direct kernels, no cuDNN to link\n"
               "CUDNN ?= 1\n"
               "CUDNN_FLAGS = $(if $(filter 0,$(CUDNN)),-DMP_CU_NO_CUDNN,-lcudnn)\n"
               "CUDA_SRC = $(MEMPLAN_CUDA)/memplan_cuda.cu $(MEMPLAN_CUDA)/mp_cu_cudnn.cu\n"
               "CUDA_HDR = $(MEMPLAN_CUDA)/memplan_cuda.h $(MEMPLAN_CUDA)/mp_cu_kernels.h $(MEMPLAN_CUDA)/mp_cu_main.h $(MEMPLAN_CUDA)/mp_cu_cudnn.h\n\n"
               "plan: plan.cu $(CUDA_SRC) $(CUDA_HDR)\n"
               "\t$(NVCC) $(NVCCFLAGS) -I$(MEMPLAN_CUDA) -o $@ plan.cu $(CUDA_SRC) -lcublas $(CUDNN_FLAGS)\n\n"
               "plan-host: plan.cu $(MEMPLAN_CUDA)/mp_cu_host.c $(CUDA_HDR)\n"
               "\t$(CC) -O2 -I$(MEMPLAN_CUDA) -o $@ -x c plan.cu -x none $(MEMPLAN_CUDA)/mp_cu_host.c -lm\n\n"
               "clean:\n\trm -f plan plan-host\n", cdir);
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad) return mp_fail(err, "%s: write error", mk);
    return 0;
}

int mp_plan_write_cuda(const char *dir, const mp_graph *g, const mp_schedule *s, const int64_t *offsets,
                       const mp_plan_info *info, mp_err *err)
{
    int32_t *tix = malloc((size_t)(g->nvalues + 1) * sizeof *tix);
    cg c = {g, tix, offsets, NULL, NULL, 0, 0, 0, 0, 0};
    int rc = -1;
    FILE *f = NULL;
    char tmp[PATH_MAX], path[PATH_MAX];
    if (!tix) return mp_fail(err, "out of memory");
    int32_t nt = 0, loss = -1;
    for (int32_t v = 0; v < g->nvalues; v++) tix[v] = offsets[v] >= 0 ? nt++ : -1;
    /* every instruction must lower before anything is written */
    if (lower_all(&c, s, err)) goto done;
    if (g->noutputs > 0 && g->outputs[0] >= 0) loss = tix[g->outputs[0]];
    if (loss < 0 || !is_f32_or_half(&c, g->outputs[0])) {
        mp_fail(err, "plan.cu: the step has no float32 (or 16-bit) loss in the arena");
        goto done;
    }
    snprintf(path, sizeof path, "%s/plan.cu", dir);
    snprintf(tmp, sizeof tmp, "%s/.plan.cu.%ld.tmp", dir, (long)getpid());
    if (!(f = fopen(tmp, "w"))) {
        mp_fail(err, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    bool bad = put_tables(f, &c, s, offsets, info, nt, loss) != 0;
    bad |= ferror(f) != 0;
    if (fclose(f) || bad || rename(tmp, path)) {
        f = NULL;
        remove(tmp);
        mp_fail(err, "%s: write error", path);
        goto done;
    }
    f = NULL;
    rc = write_makefile(dir, err);
done:
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(c.ins);
    free(c.kon);
    free(tix);
    return rc;
}
