/* plan.h - the executable plan: OUT/plan.json (docs/plan-format.md).
 *
 *   mp_plan_opts o = mp_plan_defaults();              // the step's options, recorded in the plan
 *   mp_schedule s;
 *   mp_model *m = mp_plan_step_new("mlp.onnx", &o, &s, &err);    // the training step, as executed
 *   ... rgraph -> space -> solve -> emit -> mp_remat_apply(m->graph, &s, &rs, &applied, &err) ...
 *   mp_plan_info info;
 *   mp_plan_write("OUT", "mlp.onnx", &o, m->graph, &applied, budget, &info, &err);
 *
 * The writer computes the lifetimes of the applied graph, gives every buffer
 * (persistent ones included, live over the whole step) a static offset in one
 * arena (mp_arena_assign, 16-byte alignment), checks it with
 * mp_offsets_verify, and writes plan.json through a temporary file and a
 * rename, so a failure never leaves a partial plan.
 *
 * The step is built "as executed": views that are byte-identical (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity) share their owner's bytes, and so
 * does a Transpose of the last two axes read only by GEMMs (MP_VAL_TVIEW:
 * the GEMM reads it transposed); any other Transpose gets its own buffer.
 * The step keeps the loss and every parameter gradient to the end.
 */
#ifndef MP_PLAN_H
#define MP_PLAN_H

#include <stdatomic.h>

#include "frontend/onnx.h"
#include "ir/ir.h"
#include "passes/schedule.h"
#include "passes/train.h"

#define MP_PLAN_VERSION 1
#define MP_PLAN_MAX_DIMS 16

typedef struct mp_plan_opts {
    int64_t batch;                         /* -1: not bound */
    int ndims;
    char dim_names[MP_PLAN_MAX_DIMS][64];
    int64_t dim_values[MP_PLAN_MAX_DIMS];
    mp_loss_kind loss;
    mp_opt_kind optimizer;
    mp_dtype precision;                    /* MP_FLOAT, MP_BFLOAT16, MP_FLOAT16 */
    int micro_batches;
    bool topo_sort;                        /* the model's nodes are sorted on import (--topo-sort) */
    bool params_as_inputs;                 /* --params-as-inputs */
    bool constants_as_params;              /* --constants-as-params */
    bool optimizer_in_backward;            /* --optimizer-in-backward */
    char data_inputs[1024];                /* --data-inputs A,B ("": not given) */
    char buffers[4096];                    /* --buffers A,B ("": not given) */
    char strategy[32];                     /* "ilp", "none", ... (recorded only) */
    int64_t budget_bytes, reserve_bytes;   /* -1: none (recorded; the budget is verified) */
    double arena_seconds;                  /* the placement search's limit (not recorded: it moves no tensor's meaning) */
    int64_t arena_target;                  /* an arena size the search tries first after the bound (0: none; not recorded) */
    int64_t arena_work;                    /* > 0: the search stops after this much work (mp_arena_opts.work_limit), not
                                              at arena_seconds, so an order is placed alike under any load (not recorded) */
    bool arena_target_only;                /* mp_arena_opts.target_only (not recorded) */
    const atomic_bool *arena_cancel;       /* mp_arena_opts.cancel (not recorded) */
} mp_plan_opts;

mp_plan_opts mp_plan_defaults(void);

/* The canonical options string the fingerprint hashes (deterministic order). */
int mp_plan_opts_string(const mp_plan_opts *o, char *buf, size_t n);

/* 64-bit FNV-1a. */
uint64_t mp_plan_fnv1a(uint64_t h, const void *p, size_t n);
#define MP_PLAN_FNV_INIT UINT64_C(0xcbf29ce484222325)
/* FNV-1a of a whole file's bytes and its size. */
int mp_plan_hash_file(const char *path, uint64_t *hash, int64_t *size, mp_err *err);
/* hash(model hash as 16 hex digits + "|" + options string). */
uint64_t mp_plan_fingerprint(uint64_t model_hash, const mp_plan_opts *o);

/* What a runner seeds value v with when the plan gives it no data (weights
 * absent, --random-weights, synthetic inputs): floats uniform in ±range
 * (1/sqrt(fan-in) for a parameter matrix or filter, PyTorch's default bound;
 * 0.1 otherwise), integers in [0, range) (below the length every Gather or
 * loss reading it indexes, at most 10). memplan-run and plan.cu share it. */
double mp_plan_seed_range(const mp_graph *g, int32_t v);

/* The outputs of the step as executed: the loss (the last loss node's
 * output) and each gradient the optimizer reads; the model's own outputs are
 * freed after their last read, as the runtime frees them. */
int mp_plan_step_outputs(mp_graph *g, mp_err *err);

/* Imports path, binds the options' dims, infers, builds the training step
 * as executed (see above) and its graph order s. NULL on failure. */
mp_model *mp_plan_step_new(const char *path, const mp_plan_opts *o, mp_schedule *s, mp_err *err);

typedef struct mp_plan_info {
    int64_t arena_bytes;     /* max(offset + bytes) over all buffers */
    int64_t lower_bound;     /* largest total of bytes live at one step */
    int32_t nbuffers;
} mp_plan_info;

/* Offsets for g under s (buffer owners; aliases carry their owner's), the
 * placement searched for up to o->arena_seconds, o->arena_target tried first. offsets gets g->nvalues entries (-1:
 * holds no memory). budget < 0: none; over it, info still gives the arena. */
int mp_plan_offsets(const mp_graph *g, const mp_schedule *s, int64_t budget, const mp_plan_opts *o, int64_t *offsets,
                    mp_plan_info *info, mp_err *err);

/* Writes dir/plan.json (dir is created if missing). */
int mp_plan_write(const char *dir, const char *model_path, const mp_plan_opts *o, const mp_graph *g,
                  const mp_schedule *s, int64_t budget, mp_plan_info *info, mp_err *err);

/* dir/plan.cu and dir/Makefile (codegen/plan_cu.c) for g under s with the
 * given offsets. Fails, writing nothing, on an op (or a case of one) the CUDA
 * runtime (runtime/cuda/) has no kernel for, naming the op and the node. */
int mp_plan_write_cuda(const char *dir, const mp_graph *g, const mp_schedule *s, const int64_t *offsets,
                       const mp_plan_info *info, mp_err *err);

/* The whole path from an order: a fresh step of model_path (mp_plan_step_new),
 * rs applied to it (mp_remat_apply; rs indexes the graph order of that step),
 * written to dir: plan.json, then (cuda) plan.cu with the same offsets. What
 * `memplan MODEL --budget B -o DIR` calls. A codegen failure leaves plan.json. */
struct mp_rsched;
int mp_plan_emit(const char *dir, const char *model_path, const mp_plan_opts *o, const struct mp_rsched *rs,
                 int64_t budget, bool cuda, mp_plan_info *info, mp_err *err);

/* The arena of rs on a fresh step of model_path, as mp_plan_emit would place
 * it, writing nothing: what the CLI checks against the budget before it
 * prints a plan (the ILP counts padded sizes; the placement may fragment). */
int mp_plan_measure(const char *model_path, const mp_plan_opts *o, const struct mp_rsched *rs, mp_plan_info *info,
                    mp_err *err);

/* Names used in plan.json. */
extern const char *const mp_plan_loss_names[];      /* mp_loss_kind order */
extern const char *const mp_plan_optimizer_names[]; /* mp_opt_kind order */
extern const char *const mp_plan_role_names[];      /* mp_role order */
extern const char *const mp_plan_phase_names[];     /* mp_phase order */
const char *mp_plan_precision_name(mp_dtype t);     /* "fp32", "bf16", "fp16" */

#endif
