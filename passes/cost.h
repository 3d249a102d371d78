/* cost.h - how long a node takes on a GPU: a roofline with a launch overhead.
 *
 *   const mp_gpu *gpu = mp_gpu_find("h100", &err);     // NULL: unknown, err lists the names
 *   double s = mp_cost_node_seconds(g, node, gpu);     // seconds
 *
 * time = max(FLOPs / peak rate of the node's dtype, bytes moved / bandwidth) + launch.
 * The GPU table (cost.c) holds vendor datasheet figures: dense peak rates (no
 * sparsity), HBM/GDDR bandwidth, memory as the driver reports it.
 */
#ifndef MP_COST_H
#define MP_COST_H

#include "ir/ir.h"

typedef enum mp_gpu_rate { MP_RATE_FP32 = 0, MP_RATE_TF32, MP_RATE_BF16, MP_RATE_FP16, MP_RATE_COUNT } mp_gpu_rate;

typedef struct mp_gpu {
    const char *name;              /* "a100-80", "h100", ... */
    const char *full_name;         /* "NVIDIA A100 80GB SXM" */
    int64_t memory_bytes;
    double bandwidth;              /* bytes/s */
    double peak[MP_RATE_COUNT];    /* dense FLOP/s; a dtype without tensor cores has its fallback rate */
    double launch_s;               /* per-kernel overhead */
} mp_gpu;

extern const mp_gpu mp_gpu_table[];
extern const int mp_gpu_count;

#define MP_GPU_DEFAULT "a100-80"

/* Case-insensitive; NULL with an error listing the known names. */
const mp_gpu *mp_gpu_find(const char *name, mp_err *err);

/* FLOPs and bytes moved by node `node`: the op table's cost column (ir/ops.h
 * mp_op_cost_node; 0 and 0 for views); a node it cannot cost, its known bytes. */
void mp_cost_node_work(const mp_graph *g, int32_t node, double *flops, double *bytes);

/* Seconds node `node` takes on gpu (0 for views, which launch nothing). */
double mp_cost_node_seconds(const mp_graph *g, int32_t node, const mp_gpu *gpu);

#endif
