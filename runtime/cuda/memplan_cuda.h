/* memplan_cuda.h - what an emitted plan.cu (codegen/plan_cu.c) links against:
 * the tables it bakes in, and mp_cu_main, which runs them in one cudaMalloc.
 *
 *   plan.cu:  static const mp_cu_tensor tensors[] = {...};   // name, offset, shape, how it starts
 *             static const mp_cu_instr instrs[] = {...};     // kernel, tensors, n, params
 *             int main(int argc, char **argv) { return mp_cu_main(argc, argv, &plan); }
 *
 * Codegen lowers every ONNX / training op to one or more runtime
 * instructions whose index math it computes on the host (views, window
 * geometry, GEMM descriptors), so the runtime only maps tensor indices to
 * arena pointers and launches. Two runtimes link the same plan.cu:
 * memplan_cuda.cu (the GPU) and mp_cu_host.c (the same element functions,
 * mp_cu_kernels.h, run on the CPU: what the tests check without a GPU).
 * Plain C, so plan.cu also compiles as C. */
#ifndef MP_CUDA_H
#define MP_CUDA_H

#include <stdint.h>

/* Runtime kernels. A row of codegen's op table lowers an ONNX op to these. */
enum {
    MP_CU_CONSTANT = 0, /* out0 <- the instruction's folded bytes */
    MP_CU_FILL,         /* out0[i] = f[0]                                  (any dtype) */
    MP_CU_COPY,         /* dst[view1(i)] = src[view0(i)]                   (any dtype, by element size) */
    MP_CU_MAP,          /* out[i] = fn(p[0]; in_k[view_k(i)], k < p[1])    (loads / stores convert dtypes) */
    MP_CU_REDUCE,       /* out[j] = f[0] * sum_k in[A(j) + B(k)] / f[1]    (p: views A, B, then the mode: sum, max, ...) */
    MP_CU_GEMM,         /* cuBLAS strided batched; see mp_cu_gemm below */
    MP_CU_SOFTMAX,      /* a thread per (outer, inner) row; p[3]: 0 softmax, 1 log-softmax, 2 softmax's gradient, 3 log-softmax's */
    MP_CU_SCE_LOSS,     /* -mean/sum/none of the label's log_prob entries (weighted; one thread sums): SCE, NLL */
    MP_CU_SCE_GRAD,     /* (dLoss, log_prob, labels[, weights]) -> dScores (SCE), dX (NLL) */
    MP_CU_LN_ROWS,      /* LayerNorm forward (p[2] 0) or dX (p[2] 1), a thread per row (Group/InstanceNorm: a row per (n, group)) */
    MP_CU_LN_COLS,      /* LayerNorm dScale, dBias, a thread per normalized element (Group/InstanceNorm: per scale entry) */
    MP_CU_BN_STATS,     /* BatchNorm per channel: batch mean/var, running stats, grad sums */
    MP_CU_BN_APPLY,     /* BatchNorm per element: forward Y or dX */
    MP_CU_CONV,         /* direct convolution, a thread per output element */
    MP_CU_CONV_DX,      /* a thread per input element */
    MP_CU_CONV_DW,      /* a thread per weight element */
    MP_CU_POOL,         /* max / average pool, a thread per output element */
    MP_CU_POOL_DX,      /* their gradient, a thread per input element */
    MP_CU_GATHER,       /* out[o, j, i] = data[o, idx[j], i] (any dtype) */
    MP_CU_SCATTER_ADD,  /* out[o, idx[j], i] += dy[o, j, i] (atomic on the GPU) */
    MP_CU_DROPOUT,      /* counter-based draws, as the CPU executor's */
    MP_CU_TRILU,
    MP_CU_OPTIM,        /* Adam / AdamW / SGD / Momentum, p[0] the rule */
    MP_CU_ADAFACTOR,    /* in phases: row and column moments, their means, sum of u^2, the update */
    MP_CU_RESIZE,       /* Resize along one axis (a launch per axis, doubles in the workspace between them) */
    MP_CU_PAD,          /* out[i] = in[source index per axis] or the fill (any dtype, by element size) */
    MP_CU_PAD_DX,       /* Pad's gradient: a thread per dX element sums the dY elements that copied it */
    MP_CU_EINSUM,       /* a thread per output element: the sum over the contracted labels of the operands' product (MatMulInteger's shifted) */
    MP_CU_RESIZE_DX,    /* Resize's adjoint along one axis: a thread per input cell gathers the outputs that read it */
    MP_CU_CUMSUM,       /* a thread per line along the axis: the running sum in the CPU's order (exclusive, reverse) */
    MP_CU_GATHER_ELEMENTS, /* out[i] = data[i with the axis index replaced by idx[i]] (any dtype) */
    MP_CU_SCATTER_ELEMENTS, /* a thread per output element: data, then the updates whose index hits it, in order */
    MP_CU_GATHER_ND,    /* out[i] = data[the row of indices of i's slice, then i's place in the slice] (any dtype) */
    MP_CU_SCATTER_ND,   /* a thread per output element: data, then the update rows whose index hits it, in order */
    MP_CU_ROTARY,       /* RotaryEmbedding: a thread per rotated pair or passed-through element */
    MP_CU_ATTENTION,    /* Attention and its gradient in kinds: a row's statistics, then a thread per output element */
    MP_CU_GRID_SAMPLE,  /* GridSample, its dX (a thread per (n, c) slice) and dGrid (a thread per point) in kinds */
    MP_CU_AFFINE_GRID,  /* AffineGrid and its dTheta in kinds */
    MP_CU_LP_NORM,      /* LpNormalization, a thread per line along the axis */
    MP_CU_REVERSE_SEQ,  /* ReverseSequence, a thread per element (any dtype, by element size) */
    MP_CU_LRN,          /* LRN and its gradient in kinds, a thread per element */
    MP_CU_ARG,          /* ArgMax / ArgMin (and Hardmax), a thread per line along the axis */
    MP_CU_ONE_HOT,      /* OneHot, a thread per output element (any dtype of values, by element size) */
    MP_CU_TOPK,         /* TopK, a thread per input element (its rank; the k best write themselves) */
    MP_CU_RANGE,        /* out[i] = start + i delta (start x0, delta x1: scalars in the arena) */
    MP_CU_MAP_INT,      /* MP_CU_MAP's layout on 64-bit integers, exact: the bitwise functions (MP_FN_BIT_*) */
    MP_CU_ALL_FINITE,   /* x1[0] = 0 where an element of x0 is not finite (after a FILL of 1): fp16's AllFinite */
    MP_CU_DET,          /* Det, a thread per matrix (its elimination in the workspace) */
    MP_CU_OP_COUNT
};

/* MP_CU_MAP functions (p[0]); the element math is in mp_cu_kernels.h. */
enum {
    MP_FN_IDENT = 0, MP_FN_RELU, MP_FN_NEG, MP_FN_EXP, MP_FN_LOG, MP_FN_SQRT, MP_FN_RECIP, MP_FN_ABS, MP_FN_TANH,
    MP_FN_SIGMOID, MP_FN_ERF, MP_FN_GELU, MP_FN_GELU_TANH, MP_FN_HARD_SIGMOID, MP_FN_HARD_SWISH, MP_FN_SCALE,
    MP_FN_LEAKY_RELU, MP_FN_CLIP, MP_FN_SIN, MP_FN_COS, MP_FN_SIGN, MP_FN_FLOOR, MP_FN_CEIL, MP_FN_ROUND,
    MP_FN_SOFTPLUS, MP_FN_SOFTSIGN, MP_FN_ELU, MP_FN_SELU, MP_FN_CELU, MP_FN_THRESHOLDED_RELU, MP_FN_MISH, MP_FN_SWISH,
    MP_FN_TAN, MP_FN_SINH, MP_FN_COSH, MP_FN_ASIN, MP_FN_ACOS, MP_FN_ATAN, MP_FN_ASINH, MP_FN_ACOSH, MP_FN_ATANH,
    MP_FN_NOT, MP_FN_IS_NAN, MP_FN_IS_INF, MP_FN_SHRINK,
    /* two operands */
    MP_FN_ADD, MP_FN_SUB, MP_FN_MUL, MP_FN_DIV, MP_FN_IDIV, MP_FN_POW, MP_FN_MAX, MP_FN_MIN, MP_FN_EQUAL,
    MP_FN_LESS, MP_FN_GREATER, MP_FN_AND, MP_FN_OR,
    MP_FN_RELU_GRAD, MP_FN_SIGMOID_GRAD, MP_FN_TANH_GRAD, MP_FN_GELU_GRAD, MP_FN_GELU_TANH_GRAD,
    MP_FN_HARD_SIGMOID_GRAD, MP_FN_HARD_SWISH_GRAD, MP_FN_MASK_SCALE, MP_FN_ERF_GRAD, MP_FN_SQRT_GRAD,
    MP_FN_PICK_IF, MP_FN_PICK_IF_NOT, MP_FN_PRELU, MP_FN_SWIGLU, MP_FN_GREATER_EQ, MP_FN_LESS_EQ, MP_FN_XOR,
    MP_FN_MOD, MP_FN_FMOD,
    /* three operands */
    MP_FN_WHERE, MP_FN_POW_GRAD, MP_FN_QUANTIZE, MP_FN_DEQUANTIZE,
    /* fp16's dynamic loss scale (passes/loss_scale.c): the seed 2^(f0 + log2); LossScaleUpdate's
     * (log2, finite, good steps) -> log2' and (finite, good steps) -> good steps', f0 the growth interval */
    MP_FN_LOSS_SCALE, MP_FN_LOSS_SCALE_LOG2, MP_FN_LOSS_SCALE_GOOD,
    /* MP_CU_MAP_INT's, on 64-bit integers */
    MP_FN_BIT_AND, MP_FN_BIT_OR, MP_FN_BIT_XOR, MP_FN_BIT_NOT, MP_FN_BIT_SHL, MP_FN_BIT_SHR,
    MP_FN_COUNT
};

enum { MP_CU_OPT_ADAM = 0, MP_CU_OPT_SGD, MP_CU_OPT_MOMENTUM };

/* Element types of the arena's tensors. */
enum {
    MP_CU_F32 = 0, MP_CU_I64, MP_CU_BOOL, MP_CU_I32, MP_CU_F64, MP_CU_U8, MP_CU_I8, MP_CU_U16, MP_CU_I16,
    MP_CU_BF16, MP_CU_F16, /* --precision bf16 / fp16: loaded widened (exact), stored rounded to fp32, then to 16 bits */
    MP_CU_DTYPE_COUNT
};

#define MP_CU_MAX_RANK 8
#define MP_CU_NT 12     /* tensor operands of one instruction (Attention's gradient takes 10) */
#define MP_CU_NP 64     /* integer parameters */
#define MP_CU_NF 8      /* float parameters */
#define MP_CU_WS (-2)   /* an operand that is the runtime's workspace, not a tensor (read as float64) */
#define MP_CU_WS32 (-3) /* the workspace read and written as float32 (a 16-bit GEMM's fp32 sum over batches) */

/* A strided view, laid out in p[] as: rank, dims[rank], then per operand
 * offset and strides[rank] (mp_cu_kernels.h reads it). */

typedef struct mp_cu_tensor {
    const char *name;
    int64_t offset, bytes, numel;
    int dtype, rank;
    int64_t dims[MP_CU_MAX_RANK];
    int init;            /* before the first step: 0 nothing (computed), 1 seeded, 2 zero (optimizer state), 3 data */
    double bound;        /* init 1: floats uniform in [-bound, bound], integers in [0, bound) (the CPU runner's rule) */
    const void *data;    /* init 3: its bytes (folded constants) */
} mp_cu_tensor;

typedef struct mp_cu_instr {
    int op;                  /* MP_CU_* */
    int node;                /* index into the plan's node names */
    int32_t t[MP_CU_NT];     /* tensor indices (-1 absent, MP_CU_WS / MP_CU_WS32 the workspace); which is which per op */
    int64_t n;               /* threads (elements) to run */
    int64_t p[MP_CU_NP];
    double f[MP_CU_NF];
    const void *konst;       /* MP_CU_CONSTANT: its bytes */
} mp_cu_instr;

/* MP_CU_GEMM's p[]: row-major C[b] (M x N) = alpha op(A[b]) op(B[b]) + beta C[b]
 * over `batch` matrices (stride 0: the same matrix for every b; sc 0: every
 * b accumulates into one C). */
enum { GM_M = 0, GM_N, GM_K, GM_TA, GM_TB, GM_LDA, GM_LDB, GM_BATCH, GM_SA, GM_SB, GM_SC, GM_BETA_ONE };

typedef struct mp_cu_plan {
    int64_t arena_bytes, lower_bound;
    int64_t workspace_bytes;         /* per-row / per-channel statistics of the normalization gradients */
    int64_t conv_workspace_bytes;    /* the most a cuDNN convolution algorithm may use (0: no convolutions) */
    int32_t ntensors, ninstr, loss;  /* loss: tensor index */
    const mp_cu_tensor *t;
    const mp_cu_instr *ins;
    const char *const *nodes;        /* node names, for errors and profiles */
} mp_cu_plan;

/* plan [--steps N] [--seed S] [--json]: prints loss and time per step, the
 * arena, the workspace, and cudaMemGetInfo before and after the allocation. */
#ifdef __cplusplus
extern "C"
#endif
int mp_cu_main(int argc, char **argv, const mp_cu_plan *p);

#endif
