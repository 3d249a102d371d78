/* plan_run.h - loads OUT/plan.json and runs it on the CPU executor.
 *
 *   mp_plan p;
 *   if (mp_plan_load("OUT", &p, &err)) ...             // version checked
 *   mp_plan_exec *pe = mp_plan_exec_new(&p, &ro, &err); // model, fingerprint, sizes checked
 *   for (int i = 0; i < steps; i++) mp_plan_exec_step(pe, &loss, &seconds, &err);
 *   mp_plan_exec_free(pe);
 *   mp_plan_free(&p);
 *
 * The runner re-imports the model, checks its hash and the fingerprint,
 * rebuilds the step with the plan's options (codegen/plan.h), maps the
 * instruction stream back onto the rebuilt graph's nodes by name and applies
 * it (mp_remat_apply), takes every tensor's offset from the plan by name, and
 * allocates ONE arena of exactly arena_bytes: persistent tensors (parameters,
 * optimizer state, inputs, constants) are placed in it at their offsets too.
 */
#ifndef MP_PLAN_RUN_H
#define MP_PLAN_RUN_H

#include "codegen/plan.h"
#include "runtime/exec.h"

typedef struct mp_plan_tensor {
    char *name;
    int64_t bytes, offset;
} mp_plan_tensor;

typedef struct mp_plan_instr {
    char *node, *source;
    bool recompute, view_clone;
} mp_plan_instr;

typedef struct mp_plan {
    int version;
    char *model_path, *model_abs;
    int64_t model_size;
    uint64_t model_hash, fingerprint;
    mp_plan_opts opts;
    int64_t arena_bytes, lower_bound;
    int32_t ntensors, ninstr;
    mp_plan_tensor *tensors;
    mp_plan_instr *instr;
} mp_plan;

/* Reads dir/plan.json (or a file path). Fails with one line on bad JSON, a
 * wrong format or version, or a missing field. */
int mp_plan_load(const char *dir, mp_plan *p, mp_err *err);
void mp_plan_free(mp_plan *p);

typedef struct mp_plan_run_opts {
    uint64_t seed;            /* synthetic data and random weights */
    bool weights_from_model;  /* initializers from the ONNX data when present */
    const char *data;         /* raw little-endian file for the data inputs, in input order; NULL: synthetic */
} mp_plan_run_opts;

typedef struct mp_plan_exec mp_plan_exec;

mp_plan_exec *mp_plan_exec_new(const mp_plan *p, const mp_plan_run_opts *ro, mp_err *err);
/* One training step; *loss the loss value, *seconds its wall time. */
int mp_plan_exec_step(mp_plan_exec *pe, double *loss, double *seconds, mp_err *err);
/* Highest arena byte the run touched: node outputs (the executor's
 * arena_used) and the persistent tensors placed in the arena. */
int64_t mp_plan_exec_peak(const mp_plan_exec *pe);
mp_graph *mp_plan_exec_graph(const mp_plan_exec *pe);
mp_exec *mp_plan_exec_executor(const mp_plan_exec *pe);
/* The arena (arena_bytes), every tensor at its planned offset: --dump compares it with plan.cu's. */
const void *mp_plan_exec_arena(const mp_plan_exec *pe);
void mp_plan_exec_free(mp_plan_exec *pe);

/* Binds every graph input and initializer of g in x: contents from the
 * executor (folded constants, weights it loaded) when it has them, else seeded
 * values (int64: [0, 10), floats: 0.2 * U(-1, 1), optimizer state: 0). With
 * arena and offsets the buffers lie in the arena at their offsets, otherwise
 * they come from g's arena. *top gets the highest arena byte used (or NULL). */
int mp_plan_bind_inputs(mp_exec *x, mp_graph *g, void *arena, const int64_t *offsets, uint64_t seed,
                        const char *data, int64_t *top, mp_err *err);

/* The loss value of g after a run of x. */
int mp_plan_loss(const mp_exec *x, const mp_graph *g, double *loss, mp_err *err);

#endif
