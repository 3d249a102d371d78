/* mp_cu_cudnn.cu - convolutions on cuDNN: MP_CU_CONV (forward, then the bias
 * through cudnnAddTensor), MP_CU_CONV_DX (backward data) and MP_CU_CONV_DW
 * (backward filter). Descriptors and the algorithm are set up at an
 * instruction's first run and kept; the algorithm is cuDNN's first heuristic
 * choice whose workspace fits the plan's conv_workspace_bytes (one buffer for
 * all). A case cuDNN cannot express (pads whose output differs from the
 * symmetric formula, more than 3 spatial dims) or that it refuses runs on the
 * direct kernels (mp_cu_kernels.h) instead, as it does everywhere with
 * MP_CU_NO_CUDNN=1 in the environment or built with -DMP_CU_NO_CUDNN. */
#include <stdio.h>
#include <stdlib.h>

#include "mp_cu_cudnn.h"

#ifdef MP_CU_NO_CUDNN

void mp_cu_cudnn_init(const mp_cu_plan *p, void *ws, size_t ws_bytes, int tf32) { (void)p, (void)ws, (void)ws_bytes, (void)tf32; }
int mp_cu_cudnn_conv(const mp_cu_plan *p, const mp_cu_instr *I, const mp_cu_args *a) { (void)p, (void)I, (void)a; return 0; }
void mp_cu_cudnn_counts(int *on, int *direct) { *on = *direct = 0; }
void mp_cu_cudnn_free(void) {}

#else

#include <cudnn.h>

typedef struct conv_state {
    int state; /* 0 not set up, 1 cuDNN, -1 the direct kernel */
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    int algo;
    size_t ws;
} conv_state;

static cudnnHandle_t dnn;
static int enabled, math_tf32, n_on, n_direct;
static conv_state *states; /* per instruction */
static void *cws;
static size_t cws_bytes;
static const mp_cu_plan *plan;

void mp_cu_cudnn_init(const mp_cu_plan *p, void *ws, size_t ws_bytes, int tf32)
{
    plan = p, cws = ws, cws_bytes = ws_bytes, math_tf32 = tf32;
    enabled = !getenv("MP_CU_NO_CUDNN") && cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS;
    states = enabled ? (conv_state *)calloc((size_t)(p->ninstr ? p->ninstr : 1), sizeof *states) : NULL;
    if (!states) enabled = 0;
}

#define DNN(x) ((x) == CUDNN_STATUS_SUCCESS)

/* Packed NCHW-style descriptors of [n, c, spatial..] (1 spatial dim: a leading 1). */
static int tensor_desc(cudnnTensorDescriptor_t *d, int nd, int64_t n, int64_t c, const int64_t *sp, int nsp)
{
    int dims[5], str[5];
    dims[0] = (int)n, dims[1] = (int)c;
    for (int s = 0; s < nd - 2; s++) dims[2 + s] = nsp < nd - 2 ? (s == 0 ? 1 : (int)sp[s - 1]) : (int)sp[s];
    str[nd - 1] = 1;
    for (int k = nd - 2; k >= 0; k--) str[k] = str[k + 1] * dims[k + 1];
    return DNN(cudnnCreateTensorDescriptor(d)) && DNN(cudnnSetTensorNdDescriptor(*d, CUDNN_DATA_FLOAT, nd, dims, str));
}

static int setup(const mp_cu_instr *I, conv_state *c)
{
    const int64_t *p = I->p;
    int nsp = (int)p[W_NSP], nd = (nsp < 2 ? 2 : nsp) + 2, sp = nd - 2;
    if (nsp < 1 || nsp > 3) return 0;
    int pad[3], str[3], dil[3], wd[5] = {(int)p[W_M], (int)p[W_CG]}, out[5];
    for (int s = 0; s < sp; s++) {
        int k = nsp < sp ? s - 1 : s; /* 1-D: the leading unit dim */
        pad[s] = k < 0 ? 0 : (int)p[W_PB + k], str[s] = k < 0 ? 1 : (int)p[W_S + k];
        dil[s] = k < 0 ? 1 : (int)p[W_D + k], wd[2 + s] = k < 0 ? 1 : (int)p[W_K + k];
    }
    if (!tensor_desc(&c->x, nd, p[W_N], p[W_C], p + W_IN, nsp) || !tensor_desc(&c->y, nd, p[W_N], p[W_M], p + W_OUT, nsp) ||
        !DNN(cudnnCreateFilterDescriptor(&c->w)) ||
        !DNN(cudnnSetFilterNdDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, wd)) ||
        !DNN(cudnnCreateConvolutionDescriptor(&c->conv)) ||
        !DNN(cudnnSetConvolutionNdDescriptor(c->conv, sp, pad, str, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
        !DNN(cudnnSetConvolutionGroupCount(c->conv, (int)(p[W_C] / p[W_CG]))) ||
        !DNN(cudnnSetConvolutionMathType(c->conv, math_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)) ||
        !DNN(cudnnGetConvolutionNdForwardOutputDim(c->conv, c->x, c->w, nd, out)))
        return 0;
    /* cuDNN pads both ends alike: only a convolution whose outputs that gives is ours */
    for (int s = 0; s < nsp; s++)
        if (out[nd - nsp + s] != p[W_OUT + s]) return 0;
    const int64_t ones[3] = {1, 1, 1};
    if (I->op == MP_CU_CONV && !tensor_desc(&c->b, nd, 1, p[W_M], ones, nd - 2)) return 0;
    int n = 0;
    if (I->op == MP_CU_CONV) {
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        if (!DNN(cudnnGetConvolutionForwardAlgorithm_v7(dnn, c->x, c->w, c->conv, c->y, 16, &n, perf))) return 0;
        for (int k = 0; k < n; k++)
            if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= cws_bytes) return c->algo = perf[k].algo, c->ws = perf[k].memory, 1;
    } else if (I->op == MP_CU_CONV_DX) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        if (!DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, c->w, c->y, c->conv, c->x, 16, &n, perf))) return 0;
        for (int k = 0; k < n; k++)
            if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= cws_bytes) return c->algo = perf[k].algo, c->ws = perf[k].memory, 1;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
        if (!DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, c->x, c->y, c->conv, c->w, 16, &n, perf))) return 0;
        for (int k = 0; k < n; k++)
            if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= cws_bytes) return c->algo = perf[k].algo, c->ws = perf[k].memory, 1;
    }
    return 0;
}

int mp_cu_cudnn_conv(const mp_cu_plan *p, const mp_cu_instr *I, const mp_cu_args *a)
{
    if (!enabled) return 0;
    conv_state *c = &states[I - p->ins];
    if (!c->state) {
        /* fp32 only: a 16-bit operand (--precision bf16|fp16) runs the direct kernel, which widens it and
         * rounds each output once as the CPU does; cuDNN's half types would round its own way */
        int f32 = 1;
        for (int k = 0; k < 4; k++) f32 &= !a->x[k] || a->dt[k] == MP_CU_F32;
        c->state = f32 && setup(I, c) ? 1 : -1;
        if (c->state > 0) n_on++;
        else n_direct++;
        if (c->state < 0 && getenv("MP_CU_VERBOSE")) fprintf(stderr, "plan: '%s' runs the direct kernel\n", p->nodes[I->node]);
    }
    if (c->state < 0) return 0;
    const float one = 1, zero = 0;
    cudnnStatus_t st;
    if (I->op == MP_CU_CONV) {
        st = cudnnConvolutionForward(dnn, &one, c->x, a->x[0], c->w, a->x[1], c->conv, (cudnnConvolutionFwdAlgo_t)c->algo,
                                     cws, c->ws, &zero, c->y, a->x[3]);
        if (DNN(st) && a->x[2]) st = cudnnAddTensor(dnn, &one, c->b, a->x[2], &one, c->y, a->x[3]);
    } else if (I->op == MP_CU_CONV_DX) {
        st = cudnnConvolutionBackwardData(dnn, &one, c->w, a->x[1], c->y, a->x[0], c->conv,
                                          (cudnnConvolutionBwdDataAlgo_t)c->algo, cws, c->ws, &zero, c->x, a->x[2]);
    } else {
        st = cudnnConvolutionBackwardFilter(dnn, &one, c->x, a->x[1], c->y, a->x[0], c->conv,
                                            (cudnnConvolutionBwdFilterAlgo_t)c->algo, cws, c->ws, &zero, c->w, a->x[2]);
    }
    if (!DNN(st)) {
        fprintf(stderr, "plan: cuDNN failed at '%s': %s\n", plan->nodes[I->node], cudnnGetErrorString(st));
        exit(1);
    }
    return 1;
}

void mp_cu_cudnn_counts(int *on, int *direct) { *on = n_on, *direct = n_direct; }

void mp_cu_cudnn_free(void)
{
    for (int32_t i = 0; states && i < plan->ninstr; i++) {
        conv_state *c = &states[i];
        if (!c->state) continue;
        if (c->x) cudnnDestroyTensorDescriptor(c->x);
        if (c->y) cudnnDestroyTensorDescriptor(c->y);
        if (c->b) cudnnDestroyTensorDescriptor(c->b);
        if (c->w) cudnnDestroyFilterDescriptor(c->w);
        if (c->conv) cudnnDestroyConvolutionDescriptor(c->conv);
    }
    free(states);
    states = NULL;
    if (enabled) cudnnDestroy(dnn);
}

#endif
