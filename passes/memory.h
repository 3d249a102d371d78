/* memory.h - the memory a schedule needs: live bytes per step and category,
 * the peak, and what is live at it.
 *
 *   mp_memory m;
 *   if (mp_memory_analyze(g, &sched, &m, &err)) ...
 *   printf("peak %lld bytes at %s\n", (long long)m.peak_bytes, g->nodes[m.peak_node].name);
 *   mp_memory_free(&m);
 *
 * Every buffer is counted once, under its owner's category (an in-place update
 * adds no bytes, see lifetime.h), with no reuse between buffers: this is the
 * memory of a schedule, the bound an offset assignment can reach, not a plan.
 * Works on any graph: an inference graph (roles unset, or set by
 * mp_train_classify) gives inference memory, a training step (mp_train_build)
 * the step's memory.
 */
#ifndef MP_MEMORY_H
#define MP_MEMORY_H

#include "ir/ir.h"
#include "passes/lifetime.h"
#include "passes/schedule.h"

/* Categories of the breakdown. Buffers and constants are shown apart from the
 * parameters; transient holds the role TRANSIENT plus activations nothing
 * consumes (live only while their producer runs). */
typedef enum mp_mem_cat {
    MP_MEM_PARAMS = 0,
    MP_MEM_BUFFERS,
    MP_MEM_CONSTANTS,
    MP_MEM_GRADS,
    MP_MEM_OPT_STATE,
    MP_MEM_ACTIVATIONS,
    MP_MEM_TRANSIENT,
    MP_MEM_INPUTS,
    MP_MEM_COUNT
} mp_mem_cat;

/* JSON keys and CSV columns: "parameters", "buffers", "constants", "gradients",
 * "optimizer_state", "activations", "transient", "inputs". */
extern const char *const mp_mem_cat_names[MP_MEM_COUNT];

#define MP_MEM_TOP_N 10

typedef struct mp_memory {
    mp_lifetimes lt;
    uint8_t *cat;                      /* nvalues: mp_mem_cat of each value */
    int32_t nsteps;
    int64_t *live;                     /* nsteps * MP_MEM_COUNT: live bytes at step i, category c: live[i*COUNT+c] */
    int64_t peak_bytes;                /* the most live at any step (the persistent total when no step) */
    int32_t peak_step;                 /* first step at the peak; -1 when the graph has no nodes */
    int32_t peak_node;                 /* node id run at peak_step, -1 when none */
    int64_t at_peak[MP_MEM_COUNT];     /* live bytes per category at peak_step */
    int64_t totals[MP_MEM_COUNT];      /* every buffer of the category, live or not */
    int64_t saved_activation_bytes;    /* forward activations and data inputs a BACKWARD node reads (per buffer) */
    int32_t top[MP_MEM_TOP_N];         /* owner value ids live at the peak, largest first, ties by id */
    int ntop;
    int32_t phase_nodes[MP_PHASE_COUNT]; /* nodes per phase */
} mp_memory;

/* The category of value v (by role; by flags while roles are unset). */
mp_mem_cat mp_memory_category(const mp_graph *g, int32_t v);

int mp_memory_analyze(const mp_graph *g, const mp_schedule *s, mp_memory *m, mp_err *err);

/* Sum of a row of live[] (all categories at step i). */
int64_t mp_memory_live_total(const mp_memory *m, int32_t step);

void mp_memory_free(mp_memory *m);

#endif
