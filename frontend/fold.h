/* fold.h - constant-folding kernels shared by the shape rules: one table of
 * scalar functions (frontend/fold.c), applied elementwise with numpy
 * broadcasting, plus casts, Where and reductions over small tensors.
 *
 *   const mp_tensor *in[2] = {a->konst, b->konst};
 *   mp_tensor *t = mp_fold_map(g->arena, MP_FOLD_ADD, 2, in, NULL, MP_INT64);
 *   if (t) mp_set_out_const(g, n, 0, t);   // NULL: not foldable here
 *
 * Arithmetic runs in double for float inputs, in int64 (two's complement
 * wrap, never UB) for integer and bool inputs, and in uint64 where unsigned
 * semantics differ. A NULL result means "leave it unknown": a dtype the
 * kernels do not read (string, fp8, 4-bit), an op without a kernel for that
 * dtype, an integer division by zero, or more than MP_FOLD_MAX_ELEMS elements.
 */
#ifndef MP_FOLD_H
#define MP_FOLD_H

#include "ir/ops.h"

typedef enum mp_fold_op {
    /* unary: y = f(x; p[0], p[1]) */
    MP_FOLD_IDENTITY,
    MP_FOLD_NEG,
    MP_FOLD_ABS,
    MP_FOLD_SIGN,
    MP_FOLD_SQUARE,
    MP_FOLD_NOT,
    MP_FOLD_BITNOT,
    MP_FOLD_CEIL,
    MP_FOLD_FLOOR,
    MP_FOLD_ROUND,       /* half to even */
    MP_FOLD_RECIPROCAL,
    MP_FOLD_SQRT,
    MP_FOLD_EXP,
    MP_FOLD_LOG,
    MP_FOLD_ERF,
    MP_FOLD_SIN,
    MP_FOLD_COS,
    MP_FOLD_TAN,
    MP_FOLD_ASIN,
    MP_FOLD_ACOS,
    MP_FOLD_ATAN,
    MP_FOLD_SINH,
    MP_FOLD_COSH,
    MP_FOLD_TANH,
    MP_FOLD_ASINH,
    MP_FOLD_ACOSH,
    MP_FOLD_ATANH,
    MP_FOLD_ISNAN,
    MP_FOLD_ISINF,       /* p: detect_negative, detect_positive */
    MP_FOLD_RELU,
    MP_FOLD_SIGMOID,
    MP_FOLD_SOFTPLUS,
    MP_FOLD_SOFTSIGN,
    MP_FOLD_MISH,
    MP_FOLD_GELU,
    MP_FOLD_GELU_TANH,
    MP_FOLD_HARDSWISH,
    MP_FOLD_ELU,         /* p: alpha */
    MP_FOLD_CELU,        /* p: alpha */
    MP_FOLD_LEAKYRELU,   /* p: alpha */
    MP_FOLD_THRESHRELU,  /* p: alpha */
    MP_FOLD_SWISH,       /* p: alpha */
    MP_FOLD_SELU,        /* p: alpha, gamma */
    MP_FOLD_HARDSIGMOID, /* p: alpha, beta */
    MP_FOLD_SHRINK,      /* p: bias, lambd */
    /* binary: z = f(x, y) */
    MP_FOLD_ADD,
    MP_FOLD_SUB,
    MP_FOLD_MUL,
    MP_FOLD_DIV,         /* integers truncate toward zero, like C */
    MP_FOLD_MOD,         /* result takes the divisor's sign (Mod fmod=0) */
    MP_FOLD_FMOD,        /* result takes the dividend's sign (Mod fmod=1) */
    MP_FOLD_POW,
    MP_FOLD_MAX,
    MP_FOLD_MIN,
    MP_FOLD_EQ,
    MP_FOLD_LT,
    MP_FOLD_LE,
    MP_FOLD_GT,
    MP_FOLD_GE,
    MP_FOLD_AND,
    MP_FOLD_OR,
    MP_FOLD_XOR,
    MP_FOLD_BITAND,
    MP_FOLD_BITOR,
    MP_FOLD_BITXOR,
    MP_FOLD_SHL,
    MP_FOLD_SHR,
    MP_FOLD_PRELU,       /* x < 0 ? x * y : x */
    MP_FOLD_COUNT
} mp_fold_op;

#define MP_FOLD_FIRST_BINARY MP_FOLD_ADD

/* Reductions: a unary map, a combining binary op, a final step. */
typedef enum mp_fold_reduce_kind {
    MP_REDUCE_SUM,
    MP_REDUCE_MEAN,
    MP_REDUCE_PROD,
    MP_REDUCE_MAX,
    MP_REDUCE_MIN,
    MP_REDUCE_L1,
    MP_REDUCE_L2,
    MP_REDUCE_SUMSQUARE,
    MP_REDUCE_LOGSUM,
    MP_REDUCE_LOGSUMEXP,
} mp_fold_reduce_kind;

/* Dtypes the kernels read and write: bool, 8..64-bit integers, fp16, bf16, float, double. */
bool mp_fold_dtype_ok(mp_dtype t);

/* out = op(in[0]) or op(in[0], in[1]) broadcast; nin must match op's arity.
 * params: p[0], p[1] of the activations (NULL = zeros). */
mp_tensor *mp_fold_map(mp_arena *a, mp_fold_op op, int nin, const mp_tensor *const *in, const double *params,
                       mp_dtype out);

/* One scalar of op on integers (for symbolic shape vectors); false when op
 * has no integer kernel or the result is undefined (division by zero). */
bool mp_fold_scalar_i64(mp_fold_op op, int64_t x, int64_t y, int64_t *r);

/* Value conversion as ONNX Cast does it (nonzero -> true for bool). */
mp_tensor *mp_fold_cast(mp_arena *a, const mp_tensor *x, mp_dtype to);

/* cond ? x : y broadcast; any dtype of whole bytes, strings included. */
mp_tensor *mp_fold_where(mp_arena *a, const mp_tensor *cond, const mp_tensor *x, const mp_tensor *y);

/* Reduces x over the axes k with reduce[k] true; keepdims keeps them as 1. */
mp_tensor *mp_fold_reduce(mp_arena *a, mp_fold_reduce_kind kind, const mp_tensor *x, const bool *reduce,
                          bool keepdims);

/* Broadcast shape of n tensors (NULL entries skipped); false if they disagree. */
bool mp_fold_bcast_shape(int n, const mp_tensor *const *ts, int *rank, int64_t *dims);
/* Flat index into t of element i of a broadcast result of shape (rank, dims). */
int64_t mp_fold_bcast_index(const mp_tensor *t, int rank, const int64_t *dims, int64_t i);

#endif
