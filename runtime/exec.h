/* exec.h - the CPU reference executor: runs an inferred graph node by node.
 *
 *   mp_exec *x = mp_exec_new(g, NULL, &err);              // unplanned: one malloc per value
 *   mp_exec_bind(x, g->inputs[0], &image, &err);          // caller's buffer, not copied
 *   mp_exec_load_weights(x, model, &err);                 // initializers from the model file
 *   if (mp_exec_run(x, &err)) { puts(err.msg); ... }
 *   const mp_tensor *y = mp_exec_value(x, g->outputs[0]);
 *   printf("peak %lld bytes\n", (long long)mp_exec_get_stats(x)->peak_bytes);
 *   mp_exec_free(x);
 *
 * Every shape must be known (bind the symbolic dims, then mp_infer). Nodes
 * run in graph order, each through its kernel in runtime/kernels.def. Memory
 * for node outputs comes either from one malloc per value, freed after its
 * last use (the unplanned reference), or from a caller's plan: a byte offset
 * per value into one arena. Either way the executor tracks the bytes of node
 * outputs live at once and reports the peak. A node on float16/bfloat16
 * tensors runs its fp32 kernel between widened inputs and rounded outputs
 * (round-to-nearest-even), the copies in kernel scratch, not in the arena.
 *
 * Graph inputs and initializers are the caller's: bound buffers, the values'
 * folded contents (konst), or weights read from the model file.
 */
#ifndef MP_EXEC_H
#define MP_EXEC_H

#include "frontend/onnx.h"
#include "ir/ir.h"
#include "runtime/kernels.h"

typedef struct mp_exec_opts {
    /* Planned memory: offsets[value id] is the byte offset of that node
     * output in arena (-1: not placed, malloc'd instead). NULL: unplanned. */
    const int64_t *offsets;
    void *arena;
    int64_t arena_bytes;
    bool check_overlap;     /* planned: fail if two live values share bytes */
    uint64_t seed;          /* Dropout (training mode) RNG seed */
    bool check_folded;      /* compare outputs with folded contents (konst); see stats */
    bool poison;            /* fill fresh buffers with 0xff (NaN) so unwritten elements show */
    int64_t scratch_limit;  /* bytes of kernel scratch per node; 0: no limit */
} mp_exec_opts;

typedef struct mp_exec_stats {
    int64_t peak_bytes;     /* most bytes of node outputs live at once */
    int64_t arena_used;     /* planned: highest offset + bytes the plan touched */
    int32_t peak_node;      /* node at which that peak was reached */
    int64_t scratch_peak;   /* most kernel scratch one node used */
    int64_t weight_bytes;   /* initializers decoded by mp_exec_load_weights */
    int32_t weights_absent; /* initializers whose external data file is absent: left to be seeded */
    char first_absent[4096]; /* the first such file */
    int32_t nodes_run;
    int32_t folded_checked; /* outputs compared with their konst */
    int32_t folded_mismatch;
    char first_mismatch[256];
} mp_exec_stats;

typedef struct mp_exec mp_exec;

/* opts may be NULL (unplanned, seed 0). Fails on an unknown shape or a plan
 * that does not fit its arena. */
mp_exec *mp_exec_new(mp_graph *g, const mp_exec_opts *opts, mp_err *err);
void mp_exec_free(mp_exec *x);

/* Binds a graph input or initializer to t (dtype and dims must match the
 * value's; the data is used in place and must outlive the runs). */
int mp_exec_bind(mp_exec *x, int32_t value, const mp_tensor *t, mp_err *err);
/* Decodes every initializer that is neither bound nor folded from the model
 * file (raw, packed typed or external data) into buffers the executor owns. */
int mp_exec_load_weights(mp_exec *x, const mp_model *m, mp_err *err);

/* Runs every node. Returns 0, -1 with err naming the node, or
 * MP_EXEC_UNSUPPORTED when an op has no kernel for this case. */
int mp_exec_run(mp_exec *x, mp_err *err);

/* A value after the run: graph outputs stay live until the next run or free.
 * NULL for values already freed (or never computed). */
const mp_tensor *mp_exec_value(const mp_exec *x, int32_t value);
const mp_exec_stats *mp_exec_get_stats(const mp_exec *x);

#endif
