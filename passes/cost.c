/* cost.c - the GPU table and the roofline cost of a node; FLOPs and bytes
 * come from the op table's cost column (ir/op_cost.c). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ir/ops.h" /* mp_op_cost_node */
#include "passes/cost.h"

#define MIB (INT64_C(1) << 20)
#define T 1e12
#define GBS 1e9

/* Datasheet figures. Memory: the capacity the driver reports (nvidia-smi
 * memory.total). Rates: dense (the "with sparsity" figures halved); fp32 is
 * the CUDA-core rate; a GPU without tf32/bf16 tensor cores falls back to its
 * fp32 rate. GeForce rates are fp16/bf16 with fp32 accumulate (training). */
const mp_gpu mp_gpu_table[] = {
    /* name       full name                       memory         bandwidth     fp32     tf32      bf16      fp16   launch */
    {"a100-40", "NVIDIA A100 40GB SXM",          40960 * MIB,   1555 * GBS, {19.5 * T, 156 * T,  312 * T,  312 * T},  5e-6},
    {"a100-80", "NVIDIA A100 80GB SXM",          81920 * MIB,   2039 * GBS, {19.5 * T, 156 * T,  312 * T,  312 * T},  5e-6},
    {"h100",    "NVIDIA H100 SXM 80GB",          81559 * MIB,   3350 * GBS, {67 * T,   494.5 * T, 989.5 * T, 989.5 * T}, 5e-6},
    {"h200",    "NVIDIA H200 SXM 141GB",         143771 * MIB,  4800 * GBS, {67 * T,   494.5 * T, 989.5 * T, 989.5 * T}, 5e-6},
    {"l4",      "NVIDIA L4 24GB",                23034 * MIB,   300 * GBS,  {30.3 * T, 60 * T,   121 * T,  121 * T},  5e-6},
    {"rtx3090", "NVIDIA GeForce RTX 3090 24GB",  24576 * MIB,   936 * GBS,  {35.6 * T, 35.6 * T, 71 * T,   71 * T},   5e-6},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB",  24564 * MIB,   1008 * GBS, {82.6 * T, 82.6 * T, 165.2 * T, 165.2 * T}, 5e-6},
    {"v100",    "NVIDIA V100 SXM2 32GB",         32768 * MIB,   900 * GBS,  {15.7 * T, 15.7 * T, 15.7 * T, 125 * T},  5e-6},
    {"t4",      "NVIDIA T4 16GB",                15360 * MIB,   320 * GBS,  {8.1 * T,  8.1 * T,  8.1 * T,  65 * T},   5e-6},
};
const int mp_gpu_count = (int)(sizeof mp_gpu_table / sizeof mp_gpu_table[0]);

const mp_gpu *mp_gpu_find(const char *name, mp_err *err)
{
    for (int i = 0; i < mp_gpu_count; i++)
        if (name && !strcasecmp(name, mp_gpu_table[i].name)) return &mp_gpu_table[i];
    char list[256] = "";
    for (int i = 0; i < mp_gpu_count; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", mp_gpu_table[i].name);
    mp_fail(err, "unknown GPU '%.64s' (one of %s)", name ? name : "", list);
    return NULL;
}

/* ---- work of a node ---------------------------------------------------------- */

static const mp_value *out_val(const mp_graph *g, const mp_node *n, int k)
{
    return k < n->nout && n->out[k] >= 0 && n->out[k] < g->nvalues ? &g->values[n->out[k]] : NULL;
}

static bool op_is(const mp_node *n, const char *op) { return !strcmp(n->op_type, op); }

void mp_cost_node_work(const mp_graph *g, int32_t node, double *flops, double *bytes)
{
    mp_op_cost c;
    *flops = *bytes = 0;
    if (mp_op_cost_node(g, node, &c, NULL) == 0) {
        *flops = c.flops;
        *bytes = c.bytes;
        return;
    }
    /* a node the op table cannot cost (not inferred): its known bytes, moved once */
    const mp_node *n = &g->nodes[node];
    for (int k = 0; k < n->nin + n->nout; k++) {
        int32_t v = k < n->nin ? n->in[k] : n->out[k - n->nin];
        if (v >= 0 && v < g->nvalues && g->values[v].bytes > 0) *bytes += (double)g->values[v].bytes;
    }
}

/* The rate a node runs at: by its output's dtype; fp32 GEMMs and convolutions on tensor cores (TF32, as cuDNN does). */
static double node_rate(const mp_graph *g, const mp_node *n, const mp_gpu *gpu)
{
    const mp_value *y = out_val(g, n, 0);
    mp_dtype t = y ? y->dtype : MP_FLOAT;
    if (t == MP_BFLOAT16) return gpu->peak[MP_RATE_BF16];
    if (t == MP_FLOAT16) return gpu->peak[MP_RATE_FP16];
    static const char *const gemm_ops[] = {"MatMul", "Gemm", "Conv", "ConvTranspose", "MatMulGradA", "MatMulGradB",
                                           "ConvGrad"};
    for (size_t k = 0; k < sizeof gemm_ops / sizeof *gemm_ops; k++)
        if (op_is(n, gemm_ops[k])) return gpu->peak[MP_RATE_TF32];
    return gpu->peak[MP_RATE_FP32];
}

double mp_cost_node_seconds(const mp_graph *g, int32_t node, const mp_gpu *gpu)
{
    if (!g || !gpu || node < 0 || node >= g->nnodes) return 0;
    const mp_node *n = &g->nodes[node];
    double flops, bytes;
    mp_cost_node_work(g, node, &flops, &bytes);
    if (flops == 0 && bytes == 0) return 0;
    double compute = flops / node_rate(g, n, gpu), memory = bytes / gpu->bandwidth;
    return (compute > memory ? compute : memory) + gpu->launch_s;
}
