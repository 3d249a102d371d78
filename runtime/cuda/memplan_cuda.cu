/* memplan_cuda.cu - the CUDA runtime of emitted plans: one cudaMalloc of the
 * planned arena, every tensor at its baked offset, the instruction stream run
 * in order (cuBLAS for Gemm, the kernels below for the rest). Seeded inputs
 * are filled on the host exactly as the CPU runner fills them
 * (runtime/plan_run.c), so a small case compares with memplan-run. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memplan_cuda.h"

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "plan: %s: %s\n", #x, cudaGetErrorString(e_));                        \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static const int TPB = 256;
static unsigned blocks(int64_t n) { return (unsigned)((n + TPB - 1) / TPB); }

__global__ void k_relu(const float *x, float *y, int64_t n)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0 ? x[i] : 0;
}

__global__ void k_relu_grad(const float *dy, const float *y, float *dx, int64_t n)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) dx[i] = y[i] > 0 ? dy[i] : 0;
}

/* y[M, N] = beta * C broadcast (C right-aligned: [N], [1, N], [M, 1], [M, N] or a scalar) */
__global__ void k_bias(const float *c, int64_t cm, int64_t cn, float beta, float *y, int64_t m, int64_t n)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    int64_t r = i / n, col = i % n;
    y[i] = beta * c[(cm == 1 ? 0 : r) * cn + (cn == 1 ? 0 : col)];
}

/* one thread per row: log_softmax, loss terms summed by k_sce_mean */
__global__ void k_log_softmax(const float *x, float *lp, int64_t n, int64_t c)
{
    int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r >= n) return;
    const float *row = x + r * c;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) m = fmax(m, (double)row[j]);
    for (int64_t j = 0; j < c; j++) s += exp(row[j] - m);
    for (int64_t j = 0; j < c; j++) lp[r * c + j] = (float)(row[j] - m - log(s));
}

__global__ void k_sce_mean(const float *lp, const int64_t *lab, float *loss, int64_t n, int64_t c)
{
    double s = 0;
    for (int64_t r = 0; r < n; r++) s -= lp[r * c + lab[r]];
    *loss = (float)(s / (double)n);
}

__global__ void k_sce_grad(const float *dl, const float *lp, const int64_t *lab, float *dx, int64_t n, int64_t c)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n * c) return;
    int64_t r = i / c, j = i % c;
    dx[i] = (float)((double)*dl / (double)n * (exp((double)lp[i]) - (j == lab[r] ? 1.0 : 0.0)));
}

typedef struct shape8 {
    int rank;
    int64_t d[8];
} shape8;

/* x (rank R) summed into y (rank r <= R, right-aligned, size-1 dims broadcast) */
__global__ void k_sum_to(const float *x, shape8 xs, float *y, shape8 ys, int64_t n)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t rem = i, off = 0, mul = 1;
    for (int a = xs.rank - 1; a >= 0; a--) {
        int64_t idx = rem % xs.d[a];
        rem /= xs.d[a];
        int b = a - (xs.rank - ys.rank);
        if (b >= 0) {
            off += (ys.d[b] == 1 ? 0 : idx) * mul;
            mul *= ys.d[b];
        }
    }
    atomicAdd(&y[off], x[i]);
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, const float *step, int64_t n, double lr,
                       double b1, double b2, double eps, double wd, double inv_scale)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    double t = (double)*step + 1, c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
    double gr = g[i] * inv_scale;
    double mm = b1 * m[i] + (1 - b1) * gr, vv = b2 * v[i] + (1 - b2) * gr * gr;
    double pp = p[i] * (1 - lr * wd);
    m[i] = (float)mm;
    v[i] = (float)vv;
    p[i] = (float)(pp - lr * (mm / c1) / (sqrt(vv / c2) + eps));
}

__global__ void k_step_inc(float *s) { *s += 1; }

/* ---- host ---- */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* the CPU runner's seeded contents (runtime/plan_run.c fill_seeded) */
static void fill_seeded(const mp_cu_tensor *t, void *host, uint64_t seed)
{
    char base[512];
    snprintf(base, sizeof base, "%s", t->name);
    size_t n = strlen(base);
    if (n > 7 && !strcmp(base + n - 7, ".master")) base[n - 7] = 0;
    uint64_t r = fnv1a(base) ^ seed;
    for (int64_t i = 0; i < t->numel; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(r >> 11) / 9007199254740992.0;
        if (t->dtype == MP_CU_F32) ((float *)host)[i] = (float)(0.2 * (2 * u - 1));
        else ((int64_t *)host)[i] = (int64_t)(u * 10);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void run_instr(cublasHandle_t h, char *arena, const mp_cu_plan *p, const mp_cu_instr *I)
{
    const mp_cu_tensor *T = p->t;
#define PTR(k) ((void *)(arena + T[I->in[k]].offset))
#define OUT(k) ((void *)(arena + T[I->out[k]].offset))
    const mp_cu_tensor *x = I->nin ? &T[I->in[0]] : NULL, *y = &T[I->out[0]];
    switch (I->op) {
    case MP_CU_CONSTANT: CK(cudaMemcpy(OUT(0), I->konst, (size_t)y->bytes, cudaMemcpyHostToDevice)); break;
    case MP_CU_RELU: k_relu<<<blocks(y->numel), TPB>>>((float *)PTR(0), (float *)OUT(0), y->numel); break;
    case MP_CU_RELU_GRAD:
        k_relu_grad<<<blocks(y->numel), TPB>>>((float *)PTR(0), (float *)PTR(1), (float *)OUT(0), y->numel);
        break;
    case MP_CU_GEMM: {
        int ta = (int)I->i[0], tb = (int)I->i[1];
        const mp_cu_tensor *a = &T[I->in[0]];
        int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
        float alpha = (float)I->f[0], beta = 0;
        if (I->nin > 2 && I->in[2] >= 0) {
            const mp_cu_tensor *c = &T[I->in[2]];
            int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
            k_bias<<<blocks(M * N), TPB>>>((float *)PTR(2), cm, cn, (float)I->f[1], (float *)OUT(0), M, N);
            beta = 1;
        }
        /* row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T */
        if (cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
                         PTR(1), CUDA_R_32F, (int)(tb ? K : N), PTR(0), CUDA_R_32F, (int)(ta ? M : K), &beta, OUT(0),
                         CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "plan: cublasGemmEx failed at '%s'\n", I->node);
            exit(1);
        }
        break;
    }
    case MP_CU_SCE_LOSS: {
        int64_t n = x->dims[0], c = x->dims[1];
        float *lp = (float *)OUT(1);
        k_log_softmax<<<blocks(n), TPB>>>((float *)PTR(0), lp, n, c);
        k_sce_mean<<<1, 1>>>(lp, (int64_t *)PTR(1), (float *)OUT(0), n, c);
        break;
    }
    case MP_CU_SCE_GRAD: {
        const mp_cu_tensor *lp = &T[I->in[1]];
        k_sce_grad<<<blocks(lp->numel), TPB>>>((float *)PTR(0), (float *)PTR(1), (int64_t *)PTR(2), (float *)OUT(0),
                                               lp->dims[0], lp->dims[1]);
        break;
    }
    case MP_CU_SUM_TO_SHAPE: {
        shape8 xs = {x->rank, {0}}, ys = {y->rank, {0}};
        for (int a = 0; a < x->rank; a++) xs.d[a] = x->dims[a];
        for (int a = 0; a < y->rank; a++) ys.d[a] = y->dims[a];
        CK(cudaMemset(OUT(0), 0, (size_t)y->bytes));
        k_sum_to<<<blocks(x->numel), TPB>>>((float *)PTR(0), xs, (float *)OUT(0), ys, x->numel);
        break;
    }
    case MP_CU_ADAM:
        /* outputs alias their inputs in the plan (same offsets): updated in place */
        k_adam<<<blocks(x->numel), TPB>>>((float *)OUT(0), (float *)PTR(1), (float *)OUT(1), (float *)OUT(2),
                                          (float *)PTR(4), x->numel, I->f[0], I->f[1], I->f[2], I->f[3], I->f[4],
                                          1.0 / I->f[5]);
        k_step_inc<<<1, 1>>>((float *)OUT(3));
        break;
    default: fprintf(stderr, "plan: unknown op %d at '%s'\n", I->op, I->node); exit(1);
    }
#undef PTR
#undef OUT
}

int mp_cu_main(int argc, char **argv, const mp_cu_plan *p)
{
    long steps = 3;
    unsigned long long seed = 0;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--seed S] [--json]\n", argv[0]);
            return 2;
        }
    }
    size_t free0, total, free1;
    CK(cudaFree(0)); /* the context first, so the arena is what the next reading sees */
    CK(cudaMemGetInfo(&free0, &total));
    char *arena;
    CK(cudaMalloc((void **)&arena, (size_t)(p->arena_bytes ? p->arena_bytes : 1))); /* the one allocation */
    CK(cudaMemGetInfo(&free1, &total));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "plan: cublasCreate failed\n");
        return 1;
    }
    cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH); /* fp32, no TF32: comparable with the CPU */
    for (int32_t i = 0; i < p->ntensors; i++) {
        const mp_cu_tensor *t = &p->t[i];
        if (!t->init || !t->bytes) continue;
        void *host = calloc(1, (size_t)t->bytes);
        if (t->init == 1) fill_seeded(t, host, seed);
        if (t->init == 3) memcpy(host, t->data, (size_t)t->bytes);
        CK(cudaMemcpy(arena + t->offset, host, (size_t)t->bytes, cudaMemcpyHostToDevice));
        free(host);
    }
    if (json) printf("{\"arena_bytes\": %lld, \"lower_bound_bytes\": %lld, \"steps\": [", (long long)p->arena_bytes,
                     (long long)p->lower_bound);
    for (long s = 0; s < steps; s++) {
        CK(cudaDeviceSynchronize());
        double t0 = now();
        for (int32_t i = 0; i < p->ninstr; i++) run_instr(h, arena, p, &p->ins[i]);
        CK(cudaDeviceSynchronize());
        double dt = now() - t0;
        CK(cudaGetLastError());
        float loss = 0;
        CK(cudaMemcpy(&loss, arena + p->t[p->loss].offset, sizeof loss, cudaMemcpyDeviceToHost));
        if (json) printf("%s{\"loss\": %.9g, \"seconds\": %.6f}", s ? ", " : "", loss, dt);
        else printf("step %ld: loss %.6f  %.4f s\n", s + 1, loss, dt);
    }
    size_t used = free0 - free1;
    if (json) printf("], \"measured_peak_bytes\": %lld, \"cuda_mem_delta_bytes\": %zu}\n", (long long)p->arena_bytes, used);
    else printf("arena: planned %lld bytes (lower bound %lld); cudaMemGetInfo: %zu bytes taken by the allocation\n",
                (long long)p->arena_bytes, (long long)p->lower_bound, used);
    cublasDestroy(h);
    CK(cudaFree(arena));
    return 0;
}
