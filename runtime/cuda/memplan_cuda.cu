/* memplan_cuda.cu - the CUDA runtime of emitted plans: one cudaMalloc of the
 * planned arena (and one of the fixed workspace the plan states: the per-row
 * and per-channel statistics of the normalization gradients, and cuDNN's
 * buffer), every tensor at its baked offset, the instruction stream run in
 * order: cuBLAS for the GEMMs (strided batched; transposed views read through
 * the transpose flags), cuDNN for convolutions (mp_cu_cudnn.cu), and for the
 * rest the element functions of mp_cu_kernels.h, a thread each, the same code
 * mp_cu_host.c runs on the CPU.
 *
 * Environment: MP_CU_TF32=1 lets cuBLAS and cuDNN use TF32 (default: fp32
 * FMA, comparable with the CPU); MP_CU_NO_CUDNN=1 runs convolutions on the
 * direct kernels; MP_CU_SYNC=1 synchronizes after each instruction and names
 * the one that faults. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "mp_cu_cudnn.h"
#include "mp_cu_main.h"

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "plan: %s: %s\n", #x, cudaGetErrorString(e_));                        \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static const int TPB = MP_CU_BLOCK;
static cublasHandle_t blas;

template <void (*F)(const mp_cu_args *, int64_t)> __global__ void k_launch(mp_cu_args a)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < a.n) F(&a, i);
}

template <void (*F)(const mp_cu_args *, int64_t)> static void launch(const mp_cu_args *a)
{
    if (a->n > 0) k_launch<F><<<(unsigned)((a->n + TPB - 1) / TPB), TPB>>>(*a);
}

/* ---- a block per output (mp_cu_blocked): thread t of MP_CU_BLOCK takes the terms t, t + MP_CU_BLOCK, ...
 * (the _part functions of mp_cu_kernels.h), a tree in shared memory combines them. */

/* The sum (max, ...: mp_cu_comb's kind) over the block of each thread's v, returned to every thread. */
__device__ double block_combine(double v, int kind)
{
    __shared__ double part[MP_CU_BLOCK];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) part[threadIdx.x] = mp_cu_comb(kind, part[threadIdx.x], part[threadIdx.x + w]);
        __syncthreads();
    }
    double s = part[0];
    __syncthreads(); /* before the next call writes part */
    return s;
}

__device__ double block_sum(double v) { return block_combine(v, RC_SUM); }
__device__ double block_max(double v) { return block_combine(v, RC_FMAX); }

/* Long sums (and the other reductions) with few outputs (bias gradients). */
__global__ void k_reduce_block(mp_cu_args a)
{
    int64_t j = blockIdx.x, t = threadIdx.x, nt = blockDim.x;
    double m = 0;
    if (mp_cu_reduce_mode(&a) == RED_LOGSUMEXP) m = mp_cu_reduce_shift(block_max(mp_cu_reduce_part(&a, j, 1, 0, t, nt)));
    double s = block_combine(mp_cu_reduce_part(&a, j, 0, m, t, nt), mp_cu_reduce_kind(&a));
    if (t == 0) mp_cu_reduce_store(&a, j, m, s);
}

/* Per-channel statistics (mp_cu_kernels.h k_bn_stats, summed by a block). */
__global__ void k_bn_stats_block(mp_cu_args a)
{
    int64_t c = blockIdx.x, t = threadIdx.x, nt = blockDim.x;
    double mu = 0, var = 0, sx = 0, sd = 0;
    if (mp_cu_bn_train(&a)) {
        sx = block_sum(mp_cu_bn_part(&a, c, BN_SUM_X, 0, 0, t, nt));
        mp_cu_bn_stats_of(&a, c, sx, 0, &mu, &var);
        sd = block_sum(mp_cu_bn_part(&a, c, BN_SUM_DEV2, mu, 0, t, nt));
    }
    mp_cu_bn_stats_of(&a, c, sx, sd, &mu, &var);
    if (a.p[BN_MODE] <= BN_FWD_INFER) {
        if (t == 0) mp_cu_bn_fwd_finish(&a, c, mu, var);
        return;
    }
    double rstd = 1 / sqrt(var + a.f[0]);
    double sb = block_sum(mp_cu_bn_part(&a, c, BN_SUM_DY, mu, rstd, t, nt));
    double ss = block_sum(mp_cu_bn_part(&a, c, BN_SUM_DY_XH, mu, rstd, t, nt));
    if (t == 0) mp_cu_bn_grad_finish(&a, c, mu, rstd, sb, ss);
}

/* Long rows: attention, the loss's classes, hidden states. */
__global__ void k_softmax_block(mp_cu_args a)
{
    int64_t r = blockIdx.x, t = threadIdx.x, nt = blockDim.x;
    if (a.p[3] >= SM_GRAD) { /* the row sum first: every dY is read before dX (maybe dY's bytes) is written */
        mp_cu_softmax_write(&a, r, 0, block_sum(mp_cu_softmax_part(&a, r, mp_cu_sm_grad_sum(&a), 0, t, nt)), t, nt);
        return;
    }
    double m = block_max(mp_cu_softmax_part(&a, r, SM_MAX, 0, t, nt));
    mp_cu_softmax_write(&a, r, m, block_sum(mp_cu_softmax_part(&a, r, SM_SUM_EXP, m, t, nt)), t, nt);
}

__global__ void k_ln_rows_block(mp_cu_args a)
{
    int64_t r = blockIdx.x, t = threadIdx.x, nt = blockDim.x;
    double n = (double)a.p[1], mu = block_sum(mp_cu_ln_part(&a, r, LN_SUM_X, 0, 0, t, nt)) / n;
    double rstd = mp_cu_ln_rstd(&a, block_sum(mp_cu_ln_part(&a, r, LN_SUM_DEV2, mu, 0, t, nt))), m1 = 0, m2 = 0;
    if (a.p[2]) {
        m1 = block_sum(mp_cu_ln_part(&a, r, LN_SUM_DXH, mu, rstd, t, nt)) / n;
        m2 = block_sum(mp_cu_ln_part(&a, r, LN_SUM_DXH_XH, mu, rstd, t, nt)) / n;
    }
    mp_cu_ln_write(&a, r, mu, rstd, m1, m2, t, nt);
}

/* Adafactor's sum of u^2 over the whole parameter: one block. */
__global__ void k_adafactor_sq_block(mp_cu_args a)
{
    double s = block_sum(mp_cu_af_sq_part(&a, threadIdx.x, blockDim.x));
    if (threadIdx.x == 0) ((double *)a.x[7])[0] = s;
}

/* A launch as a block per output where mp_cu_blocked says so, else a thread per output. */
#define LAUNCH_BLOCKED(name, op, thread_fn, block_kernel, blocks)                        \
    static void name(const mp_cu_args *a)                                                \
    {                                                                                    \
        if (mp_cu_blocked(op, a) && (blocks) > 0 && (blocks) < (1ll << 31))               \
            block_kernel<<<(unsigned)(blocks), MP_CU_BLOCK>>>(*a);                        \
        else                                                                             \
            launch<thread_fn>(a);                                                        \
    }

LAUNCH_BLOCKED(launch_reduce, MP_CU_REDUCE, k_reduce, k_reduce_block, a->n)
LAUNCH_BLOCKED(launch_bn_stats, MP_CU_BN_STATS, k_bn_stats, k_bn_stats_block, a->n)
LAUNCH_BLOCKED(launch_softmax, MP_CU_SOFTMAX, k_softmax, k_softmax_block, a->n)
LAUNCH_BLOCKED(launch_ln_rows, MP_CU_LN_ROWS, k_ln_rows, k_ln_rows_block, a->n)
LAUNCH_BLOCKED(launch_adafactor, MP_CU_ADAFACTOR, k_adafactor, k_adafactor_sq_block, 1)

typedef void (*launcher)(const mp_cu_args *a);

/* The launcher of each runtime op; GEMM and constants are handled in gpu_run. */
static launcher launchers[MP_CU_OP_COUNT];

static void init_launchers(void)
{
    launchers[MP_CU_FILL] = launch<k_fill>;
    launchers[MP_CU_COPY] = launch<k_copy>;
    launchers[MP_CU_MAP] = launch<k_map>;
    launchers[MP_CU_REDUCE] = launch_reduce;
    launchers[MP_CU_SOFTMAX] = launch_softmax;
    launchers[MP_CU_SCE_LOSS] = launch<k_sce_loss>;
    launchers[MP_CU_SCE_GRAD] = launch<k_sce_grad>;
    launchers[MP_CU_LN_ROWS] = launch_ln_rows;
    launchers[MP_CU_LN_COLS] = launch<k_ln_cols>;
    launchers[MP_CU_BN_STATS] = launch_bn_stats;
    launchers[MP_CU_BN_APPLY] = launch<k_bn_apply>;
    launchers[MP_CU_CONV] = launch<k_conv>;
    launchers[MP_CU_CONV_DX] = launch<k_conv_dx>;
    launchers[MP_CU_CONV_DW] = launch<k_conv_dw>;
    launchers[MP_CU_POOL] = launch<k_pool>;
    launchers[MP_CU_POOL_DX] = launch<k_pool_dx>;
    launchers[MP_CU_GATHER] = launch<k_gather>;
    launchers[MP_CU_SCATTER_ADD] = launch<k_scatter_add>;
    launchers[MP_CU_DROPOUT] = launch<k_dropout>;
    launchers[MP_CU_TRILU] = launch<k_trilu>;
    launchers[MP_CU_OPTIM] = launch<k_optim>;
    launchers[MP_CU_ADAFACTOR] = launch_adafactor;
    launchers[MP_CU_RESIZE] = launch<k_resize>;
    launchers[MP_CU_PAD] = launch<k_pad>;
    launchers[MP_CU_PAD_DX] = launch<k_pad_dx>;
    launchers[MP_CU_EINSUM] = launch<k_einsum>;
    launchers[MP_CU_RESIZE_DX] = launch<k_resize_dx>;
    launchers[MP_CU_CUMSUM] = launch<k_cumsum>;
    launchers[MP_CU_GATHER_ELEMENTS] = launch<k_gather_elements>;
    launchers[MP_CU_SCATTER_ELEMENTS] = launch<k_scatter_elements>;
    launchers[MP_CU_GATHER_ND] = launch<k_gather_nd>;
    launchers[MP_CU_SCATTER_ND] = launch<k_scatter_nd>;
    launchers[MP_CU_ROTARY] = launch<k_rotary>;
    launchers[MP_CU_ATTENTION] = launch<k_attention>;
    launchers[MP_CU_GRID_SAMPLE] = launch<k_grid_sample>;
    launchers[MP_CU_AFFINE_GRID] = launch<k_affine_grid>;
    launchers[MP_CU_LP_NORM] = launch<k_lp_norm>;
    launchers[MP_CU_REVERSE_SEQ] = launch<k_reverse_seq>;
    launchers[MP_CU_LRN] = launch<k_lrn>;
    launchers[MP_CU_ARG] = launch<k_arg>;
    launchers[MP_CU_ONE_HOT] = launch<k_one_hot>;
    launchers[MP_CU_TOPK] = launch<k_topk>;
    launchers[MP_CU_RANGE] = launch<k_range>;
    launchers[MP_CU_MAP_INT] = launch<k_map_int>;
    launchers[MP_CU_ALL_FINITE] = launch<k_all_finite>;
    launchers[MP_CU_DET] = launch<k_det>;
}

/* cuBLAS's type of a GEMM operand: fp32, or bf16 / fp16 (codegen gives A, B and C one type; the
 * sums run in fp32 either way, CUBLAS_COMPUTE_32F, and C is rounded once from them). */
static cudaDataType_t blas_type(int dt)
{
    return dt == MP_CU_BF16 ? CUDA_R_16BF : dt == MP_CU_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
static void gemm(const mp_cu_plan *p, const mp_cu_instr *I, const mp_cu_args *a)
{
    const int64_t *q = a->p;
    float alpha = (float)a->f[0], one = 1, beta = q[GM_BETA_ONE] ? 1.0f : 0.0f;
    cublasOperation_t ta = q[GM_TA] ? CUBLAS_OP_T : CUBLAS_OP_N, tb = q[GM_TB] ? CUBLAS_OP_T : CUBLAS_OP_N;
    int M = (int)q[GM_M], N = (int)q[GM_N], K = (int)q[GM_K], lda = (int)q[GM_LDA], ldb = (int)q[GM_LDB];
    cudaDataType_t at = blas_type(a->dt[0]), bt = blas_type(a->dt[1]), ct = blas_type(a->dt[2]);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (q[GM_SC]) {
        st = cublasGemmStridedBatchedEx(blas, tb, ta, N, M, K, &alpha, a->x[1], bt, ldb, q[GM_SB], a->x[0],
                                        at, lda, q[GM_SA], &beta, a->x[2], ct, N, q[GM_SC],
                                        (int)q[GM_BATCH], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else { /* every batch accumulates into one fp32 C (a 16-bit result's is the workspace): a broadcast operand's gradient */
        const char *A = (const char *)a->x[0], *B = (const char *)a->x[1];
        for (int64_t b = 0; b < q[GM_BATCH] && st == CUBLAS_STATUS_SUCCESS; b++)
            st = cublasGemmEx(blas, tb, ta, N, M, K, &alpha, B + b * q[GM_SB] * mp_cu_esize(a->dt[1]), bt, ldb,
                              A + b * q[GM_SA] * mp_cu_esize(a->dt[0]), at, lda, b ? &one : &beta, a->x[2],
                              ct, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "plan: cuBLAS GEMM failed (status %d) at '%s'\n", (int)st, p->nodes[I->node]);
        exit(1);
    }
}

static void gpu_run(const mp_cu_plan *p, const mp_cu_instr *I, mp_cu_args *a)
{
    if (I->op == MP_CU_CONSTANT) {
        CK(cudaMemcpy(a->x[0], I->konst, (size_t)p->t[I->t[0]].bytes, cudaMemcpyHostToDevice));
    } else if (I->op == MP_CU_GEMM) {
        gemm(p, I, a);
    } else if ((I->op == MP_CU_CONV || I->op == MP_CU_CONV_DX || I->op == MP_CU_CONV_DW) && mp_cu_cudnn_conv(p, I, a)) {
        /* ran on cuDNN */
    } else if (I->op > 0 && I->op < MP_CU_OP_COUNT && launchers[I->op]) {
        launchers[I->op](a);
    } else {
        fprintf(stderr, "plan: unknown runtime op %d at '%s'\n", I->op, p->nodes[I->node]);
        exit(1);
    }
    if (getenv("MP_CU_SYNC")) { /* debugging: name the instruction that faults */
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "plan: '%s' (runtime op %d): %s\n", p->nodes[I->node], I->op, cudaGetErrorString(e));
            exit(1);
        }
    }
}

static int64_t align256(int64_t n) { return (n + 255) & ~(int64_t)255; }

static char *gpu_alloc(const mp_cu_plan *p, void **ws, size_t *taken)
{
    int64_t arena_bytes = p->arena_bytes, ws_bytes = align256(p->workspace_bytes) + p->conv_workspace_bytes;
    size_t free0, free1, total;
    CK(cudaFree(0)); /* the context first, so the arena is what the next reading sees */
    CK(cudaMemGetInfo(&free0, &total));
    char *arena;
    CK(cudaMalloc((void **)&arena, (size_t)(arena_bytes ? arena_bytes : 1))); /* the one allocation of the arena */
    CK(cudaMemGetInfo(&free1, &total));
    *taken = free0 - free1;
    *ws = NULL;
    if (ws_bytes) CK(cudaMalloc(ws, (size_t)ws_bytes));
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "plan: cublasCreate failed\n");
        exit(1);
    }
    int tf32 = getenv("MP_CU_TF32") && atoi(getenv("MP_CU_TF32"));
    cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH); /* default fp32: comparable with the CPU */
    mp_cu_cudnn_init(p, *ws ? (char *)*ws + align256(p->workspace_bytes) : NULL, (size_t)p->conv_workspace_bytes, tf32);
    init_launchers();
    return arena;
}

static void gpu_upload(char *dst, const void *src, int64_t bytes) { CK(cudaMemcpy(dst, src, (size_t)bytes, cudaMemcpyHostToDevice)); }
static void gpu_download(void *dst, const char *src, int64_t bytes) { CK(cudaMemcpy(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost)); }

static void gpu_sync(void)
{
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
}

static void gpu_release(char *arena, void *ws)
{
    int on, direct;
    mp_cu_cudnn_counts(&on, &direct);
    if (on + direct) fprintf(stderr, "plan: convolutions: %d on cuDNN, %d on the direct kernels\n", on, direct);
    mp_cu_cudnn_free();
    cublasDestroy(blas);
    CK(cudaFree(arena));
    if (ws) CK(cudaFree(ws));
}

int mp_cu_main(int argc, char **argv, const mp_cu_plan *p)
{
    static const mp_cu_backend gpu = {"cuda", gpu_alloc, gpu_upload, gpu_download, gpu_run, gpu_sync, gpu_release};
    return mp_cu_run_main(argc, argv, p, &gpu);
}
