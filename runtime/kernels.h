/* kernels.h - the CPU reference kernels and the helpers they share.
 *
 *   int mp_cpu_Relu(const mp_kargs *k, mp_err *err)
 *   {
 *       const mp_tensor *x = k->in[0];     // shapes were inferred; buffers are live
 *       mp_tensor *y = k->out[0];          // allocated by the executor, dims from inference
 *       ...
 *   }
 *
 * A kernel reads its inputs and attributes, checks what it needs (dtypes,
 * shapes consistent with the inferred outputs) and writes every element of its
 * outputs. It never allocates a tensor: temporary memory comes from the
 * executor's bump scratch area (mp_scratch_alloc), released after the node.
 * Kernels are deterministic: fixed loop orders, no threads, float sums
 * accumulated in double.
 *
 * runtime/kernels.def binds kernels to op ids: MP_KERNEL(Id, fn) with Id from
 * the op table. Kernels are defined for every op of the ONNX spec they cover,
 * registered or not, so that rows can be added as the op table grows.
 */
#ifndef MP_KERNELS_H
#define MP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ops.h"

/* Returned (instead of -1) when a kernel exists but not for this variant
 * (dtype, mode): callers may count it as "not covered" rather than wrong. */
#define MP_EXEC_UNSUPPORTED (-2)

typedef struct mp_scratch mp_scratch;

typedef struct mp_kargs {
    mp_graph *g;                  /* the graph (attributes, opset, values) */
    const mp_node *node;
    int32_t node_id;
    int64_t opset;                /* the model's opset for the node's domain */
    int nin, nout;
    const mp_tensor *const *in;   /* nin entries; NULL: omitted optional input */
    mp_tensor *const *out;        /* nout entries; NULL: omitted optional output */
    mp_scratch *scratch;
    uint64_t seed;                /* the run's RNG seed (Dropout); streams are keyed by node id */
} mp_kargs;

typedef int (*mp_kernel_fn)(const mp_kargs *k, mp_err *err);

/* ---- the kernel table (runtime/kernels.def) ----------------------------- */

/* Every kernel, registered or not, named by its ONNX op: mp_cpu_<Op>. */
#define MP_CPU_KERNELS(X) \
    X(Abs) X(Acos) X(Acosh) X(Adagrad) X(Adam) X(Add) X(AffineGrid) X(And) \
    X(ArgMax) X(ArgMin) X(Asin) X(Asinh) X(Atan) X(Atanh) X(Attention) \
    X(AveragePool) X(BatchNormalization) X(BitCast) X(BitShift) X(BitwiseAnd) X(BitwiseNot) X(BitwiseOr) \
    X(BitwiseXor) X(BlackmanWindow) X(Cast) X(CastLike) X(Ceil) X(Celu) X(CenterCropPad) \
    X(Clip) X(Compress) X(Concat) X(Constant) X(ConstantOfShape) X(Conv) X(ConvInteger) \
    X(ConvTranspose) X(Cos) X(Cosh) X(CumProd) X(CumSum) X(DepthToSpace) X(DequantizeLinear) \
    X(Det) X(Div) X(Dropout) X(DynamicQuantizeLinear) X(Einsum) X(Elu) X(Equal) \
    X(Erf) X(Exp) X(Expand) X(EyeLike) X(Flatten) X(Floor) X(Gather) \
    X(GatherElements) X(GatherND) X(Gelu) X(Gemm) X(GlobalAveragePool) X(GlobalLpPool) X(GlobalMaxPool) \
    X(Greater) X(GreaterOrEqual) X(GridSample) X(GroupNormalization) X(HammingWindow) X(HannWindow) X(HardSigmoid) X(HardSwish) \
    X(Hardmax) X(Identity) X(InstanceNormalization) X(IsInf) X(IsNaN) X(LRN) X(LayerNormalization) \
    X(LeakyRelu) X(Less) X(LessOrEqual) X(Log) X(LogSoftmax) X(LpNormalization) X(LpPool) \
    X(MatMul) X(MatMulInteger) X(Max) X(MaxPool) X(MaxUnpool) X(Mean) X(MeanVarianceNormalization) \
    X(Min) X(Mish) X(Mod) X(Momentum) X(Mul) X(Neg) X(NegativeLogLikelihoodLoss) \
    X(NonZero) X(Not) X(OneHot) X(Or) X(PRelu) X(Pad) X(Pow) \
    X(QuantizeLinear) X(RMSNormalization) X(Range) X(Reciprocal) X(ReduceL1) X(ReduceL2) X(ReduceLogSum) \
    X(ReduceLogSumExp) X(ReduceMax) X(ReduceMean) X(ReduceMin) X(ReduceProd) X(ReduceSum) X(ReduceSumSquare) \
    X(Relu) X(Reshape) X(Resize) X(ReverseSequence) X(RotaryEmbedding) X(Round) X(Scatter) \
    X(ScatterElements) X(ScatterND) X(Selu) X(Shape) X(Shrink) X(Sigmoid) X(Sign) \
    X(Sin) X(Sinh) X(Size) X(Slice) X(Softmax) X(SoftmaxCrossEntropyLoss) X(Softplus) \
    X(Softsign) X(SpaceToDepth) X(Split) X(Sqrt) X(Squeeze) X(Sub) X(Sum) \
    X(SwiGLU) X(Swish) X(Tan) X(Tanh) X(ThresholdedRelu) X(Tile) X(TopK) \
    X(Transpose) X(Trilu) X(Unique) X(Unsqueeze) X(Upsample) X(Where) X(Xor)

#define MP_CPU_DECLARE(name) int mp_cpu_##name(const mp_kargs *k, mp_err *err);
MP_CPU_KERNELS(MP_CPU_DECLARE)
/* Backward and optimizer ops of the training step (runtime/cpu_grad.c). */
#define MP_CPU_GRAD_KERNELS(X) \
    X(ReluGrad) X(SigmoidGrad) X(TanhGrad) X(Scale) X(SumToShape) X(ReduceSumGrad) X(ReduceMeanGrad) \
    X(MatMulGradA) X(MatMulGradB) X(ErfGrad) X(SqrtGrad) X(PowGrad) X(WhereGrad) X(SoftmaxGrad) X(LogSoftmaxGrad) X(InstanceNormalizationGrad) X(GroupNormalizationGrad) X(RMSNormalizationGrad) X(AttentionGrad) X(NegativeLogLikelihoodGrad) X(SoftmaxCrossEntropyGrad) \
    X(GeluGrad) X(GatherGrad) X(LayerNormalizationGrad) X(ConvGrad) X(MaxPoolGrad) X(GlobalAveragePoolGrad) \
    X(BatchNormalizationGrad) X(HardSigmoidGrad) X(HardSwishGrad) X(DropoutGrad) X(Zeros) X(AveragePoolGrad) X(SliceGrad) X(PadGrad) X(ResizeGrad) X(GridSampleGrad) X(AffineGridGrad) \
    X(SGDUpdate) X(MomentumUpdate) X(AdamUpdate) X(AdafactorUpdate) X(LRNGrad) X(LossScale) X(AllFinite) X(LossScaleUpdate)
MP_CPU_GRAD_KERNELS(MP_CPU_DECLARE)
#undef MP_CPU_DECLARE

/* The registered kernel of an op id (kernels.def), NULL if none. */
mp_kernel_fn mp_kernel_find(int32_t op);
/* Every defined kernel's op name, NULL-terminated (for coverage reports). */
extern const char *const mp_cpu_kernel_names[];

/* ---- scratch ------------------------------------------------------------- */

/* Bump allocation (16-aligned, not zeroed) valid until the node finishes; NULL
 * when out of memory or past the executor's scratch limit. */
void *mp_scratch_alloc(mp_scratch *s, size_t bytes);
/* Same, for n elements of size elem (fails on overflow). */
void *mp_scratch_array(mp_scratch *s, int64_t n, size_t elem);

/* ---- 16-bit float arrays (runtime/cpu_half.c; the scalar conversions are ir/half.c's) ---- */

/* n elements of 16-bit float type t to fp32, and back (rounding). */
void mp_half_widen(mp_dtype t, const uint16_t *src, float *dst, int64_t n);
void mp_half_round(mp_dtype t, const float *src, uint16_t *dst, int64_t n);

/* ---- helpers (runtime/cpu_util.c) ---------------------------------------- */

/* Formats err and returns MP_EXEC_UNSUPPORTED: `return mp_kunsupported(err, "dtype %s", ...)`. */
int mp_kunsupported(mp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, leading dims given:
 * OpenBLAS's dgemm for float32 (widened, summed in double) and float64 (one
 * thread: the same bits every run), wrapping int64 loops for integers (cpu_matmul.c). */
void mp_cpu_gemm(mp_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t kk, double alpha, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* Row-major element strides of dims. */
void mp_strides(int rank, const int64_t *dims, int64_t *strides);
/* True when a and b have the same dims. */
bool mp_same_shape(const mp_tensor *a, const mp_tensor *b);
/* Input i of k as a tensor, NULL when omitted or absent. */
static inline const mp_tensor *mp_kin(const mp_kargs *k, int i) { return i < k->nin ? k->in[i] : NULL; }
static inline mp_tensor *mp_kout(const mp_kargs *k, int i) { return i < k->nout ? k->out[i] : NULL; }

/* Reads a 0-D/1-D integer tensor into out[0..max); count, or -1 with err. */
int mp_read_ints(const mp_tensor *t, int64_t *out, int max, const char *what, mp_err *err);
/* Pad's index map, shared by Pad and PadGrad: for each axis a and output
 * index o, map[base[a] + o] is the input index it copies (-1: the fill value
 * of constant mode), for mode constant, reflect, edge or wrap and begin pads
 * (negative: cropped). *map comes from k's scratch. */
int mp_pad_index_map(const mp_kargs *k, const char *mode, int r, const int64_t *in_dims, const int64_t *out_dims,
                     const int64_t *begin, int64_t **map, int64_t *base, mp_err *err);
/* Axes from attribute `name` (opsets before `input_since`) or input `idx`;
 * count (0 when absent), or -1 with err. Normalized into [0, rank). */
int mp_read_axes(const mp_kargs *k, const char *name, int idx, int64_t input_since, int rank, int64_t *axes,
                 mp_err *err);
/* Scalar element 0 of t as double / int64. */
double mp_scalar_f64(const mp_tensor *t);
int64_t mp_scalar_i64(const mp_tensor *t);

/* Multidirectional broadcast of up to 4 inputs into the output dims: walks
 * the output row by row (innermost axis), giving each input's element offset
 * of the row start and its stride along the row (0 when broadcast).
 *
 *   mp_bcast b;
 *   if (mp_bcast_init(&b, y, 2, (const mp_tensor *[]){a, c}, err)) return -1;
 *   for (int64_t r = 0; r < b.rows; r++, mp_bcast_next(&b))
 *       row(a + b.off[0], b.step[0], ..., y + r * b.len, b.len);
 */
#define MP_BCAST_MAX 4
typedef struct mp_bcast {
    int rank, n;
    int64_t rows, len;                      /* output = rows x len */
    int64_t step[MP_BCAST_MAX];             /* stride along the row */
    int64_t off[MP_BCAST_MAX];              /* offsets of the current row */
    int64_t dims[MP_MAX_RANK];
    int64_t str[MP_BCAST_MAX][MP_MAX_RANK];
    int64_t idx[MP_MAX_RANK];
} mp_bcast;
int mp_bcast_init(mp_bcast *b, const mp_tensor *y, int n, const mp_tensor *const *x, mp_err *err);
void mp_bcast_next(mp_bcast *b);

/* Copies a strided view: dst[i] = src[i] over dims, strides in elements of
 * esize bytes (negative and zero source strides allowed). */
void mp_copy_strided(void *dst, const int64_t *dstr, const void *src, const int64_t *sstr, int rank,
                     const int64_t *dims, size_t esize);

/* Copies x into y (same numel and dtype): Identity, Reshape, Flatten, ... */
int mp_copy_tensor(const mp_tensor *x, mp_tensor *y, mp_err *err);

/* Counter-based random number in [0, 1) for element i of a node's stream:
 * the same (seed, node, i) always gives the same number, so a recomputed
 * Dropout draws the same mask. */
double mp_rng_uniform(uint64_t seed, int32_t node, int64_t i);

#endif
