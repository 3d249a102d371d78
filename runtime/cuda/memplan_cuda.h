/* memplan_cuda.h - what an emitted plan.cu (codegen/plan_cu.c) links against:
 * the tables it bakes in, and mp_cu_main, which runs them in one cudaMalloc. */
#ifndef MP_CUDA_H
#define MP_CUDA_H

#include <stdint.h>

/* Ops the CUDA runtime has kernels for; codegen refuses every other op by name. */
enum {
    MP_CU_CONSTANT = 0,
    MP_CU_GEMM,          /* cublasGemmEx, bias C broadcast first */
    MP_CU_RELU,
    MP_CU_RELU_GRAD,     /* (dY, Y) -> dY * (Y > 0) */
    MP_CU_SCE_LOSS,      /* SoftmaxCrossEntropyLoss, [N, C] scores, int64 labels, mean */
    MP_CU_SCE_GRAD,      /* (dLoss, log_prob, labels) -> dScores */
    MP_CU_SUM_TO_SHAPE,  /* sum over broadcast axes */
    MP_CU_ADAM,          /* AdamUpdate (param, grad, m, v, step) in place */
    MP_CU_OP_COUNT
};

enum { MP_CU_F32 = 0, MP_CU_I64 = 1 };

typedef struct mp_cu_tensor {
    const char *name;
    int64_t offset, bytes, numel;
    int dtype, rank;
    int64_t dims[8];
    int init;            /* before the first step: 0 nothing (computed), 1 seeded, 2 zero (optimizer state), 3 data */
    const void *data;    /* init 3: its bytes (folded constants) */
} mp_cu_tensor;

typedef struct mp_cu_instr {
    int op;
    const char *node;
    int nin, nout;
    int32_t in[6], out[4];   /* tensor indices, -1 absent */
    double f[6];             /* Gemm: alpha, beta; Adam: lr, beta1, beta2, epsilon, weight_decay, loss_scale */
    int64_t i[2];            /* Gemm: transA, transB */
    const void *konst;       /* Constant: its bytes */
} mp_cu_instr;

typedef struct mp_cu_plan {
    int64_t arena_bytes, lower_bound;
    int32_t ntensors, ninstr, loss;  /* loss: tensor index */
    const mp_cu_tensor *t;
    const mp_cu_instr *ins;
} mp_cu_plan;

/* plan [--steps N] [--seed S] [--json]: prints loss and time per step, the
 * arena, and cudaMemGetInfo before and after the allocation. */
int mp_cu_main(int argc, char **argv, const mp_cu_plan *p);

#endif
