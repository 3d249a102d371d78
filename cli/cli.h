/* cli.h - the memplan command line: subcommands, their shared options, and
 * the model helpers every subcommand uses.
 *
 *   int mp_cmd_inspect(int argc, char **argv) {           // argv[0] = "inspect"
 *       mp_cli_opts o;
 *       int r = mp_cli_parse(argc, argv, INSPECT_OPTS, &o);  // prints usage errors itself
 *       if (r < 0) return MP_EXIT_USAGE;
 *       if (r > 0) { print usage; mp_cli_print_options(stdout, INSPECT_OPTS); return 0; }
 *       mp_model *m = mp_cli_load(&o);                       // prints model errors itself
 *       ...
 *   }
 *
 * Conventions (docs/cli.md): a usage error prints one line "memplan: <problem>"
 * on stderr and exits 2; a model error prints "memplan: MODEL: <message>" and
 * exits 2; nothing goes to stdout unless the whole command succeeded, so
 * subcommands build their output in memory and print it at the end
 * (mp_cli_emit).
 */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/memory.h"   /* mp_memory, mp_schedule: the step shared by memory and planning */
#include "passes/train.h"    /* mp_train_opts */

#define MEMPLAN_VERSION "0.1.0"

enum { MP_EXIT_OK = 0, MP_EXIT_USAGE = 2, MP_EXIT_INFEASIBLE = 3 /* the budget cannot be met (plan.c) */ };

/* Largest value accepted for --batch and --dim: 2^40, far above any real
 * dimension, low enough that products of a few dims stay in int64. */
#define MP_CLI_MAX_DIM_VALUE (INT64_C(1) << 40)
#define MP_CLI_MAX_DIMS 64
#define MP_CLI_MAX_MICRO_BATCHES 65536

/* ---- subcommands (main.c) ------------------------------------------------ */

typedef struct mp_cli_cmd {
    const char *name;
    int (*run)(int argc, char **argv);   /* argv[0] is the subcommand name; returns the exit status */
    const char *summary;                 /* one line for `memplan --help` */
} mp_cli_cmd;

int mp_cmd_inspect(int argc, char **argv);
/* `memplan MODEL.onnx ...` and `memplan memory MODEL.onnx ...` (analyze.c). */
int mp_cmd_memory(int argc, char **argv);

/* ---- options (args.c) ---------------------------------------------------- */

/* Every option any subcommand takes; a subcommand accepts a mask of them. */
typedef enum mp_cli_opt_id {
    MP_OPT_HELP,
    MP_OPT_BATCH,
    MP_OPT_DIM,
    MP_OPT_JSON,
    MP_OPT_PARAMS_AS_INPUTS,
    MP_OPT_DATA_INPUTS,
    MP_OPT_BUFFERS,
    MP_OPT_CONSTANTS_AS_PARAMS,
    MP_OPT_NO_INFER,
    MP_OPT_TOPO_SORT,
    MP_OPT_OPTIMIZER,
    MP_OPT_PRECISION,
    MP_OPT_MICRO_BATCHES,
    MP_OPT_OPTIMIZER_IN_BACKWARD,
    MP_OPT_LOSS,
    MP_OPT_TIMELINE,
    MP_OPT_INFERENCE,
    MP_OPT_BUDGET,           /* planning (plan.c) */
    MP_OPT_RESERVE,
    MP_OPT_GPU,
    MP_OPT_STRATEGY,
    MP_OPT_TIME_LIMIT,
    MP_OPT_SCHEDULE,
    MP_OPT_GRAPH_JSON,
    MP_OPT_OUT,              /* -o DIR: the executable plan (codegen/plan.h) */
    MP_OPT_DOT,              /* pictures (codegen/viz.h) */
    MP_OPT_SVG,
    MP_OPT_PNG,
    MP_OPT_DOT_LEVEL,
    MP_OPT_REPORT,
    MP_OPT_COUNT
} mp_cli_opt_id;

#define MP_OPT_BIT(id) (1u << MP_OPT_##id)

typedef struct mp_cli_opts {
    const char *model;                       /* the one positional argument */
    int64_t batch;                           /* --batch N, -1 when not given */
    int ndims;                               /* --dim NAME=V, in order */
    char *dim_names[MP_CLI_MAX_DIMS];        /* malloc'ed; mp_cli_opts_free() */
    int64_t dim_values[MP_CLI_MAX_DIMS];
    bool json;
    bool params_as_inputs;
    bool constants_as_params;                /* --constants-as-params: mp_train_opts.constants_as_params */
    bool optimizer_in_backward;              /* --optimizer-in-backward: mp_train_opts.optimizer_in_backward */
    bool no_infer;
    bool topo_sort;                          /* --topo-sort: mp_onnx_opts.topo_sort */
    const char *data_inputs;                 /* comma-separated names, NULL when not given */
    const char *buffers;                     /* comma-separated names, NULL when not given */
    /* the training step (memory analysis); -1 when not given. Each is an index
     * into its name list below, in the order of train.h's enums. */
    int optimizer;                           /* mp_cli_optimizer_names */
    int precision;                           /* mp_cli_precision_names */
    int loss;                                /* mp_cli_loss_names */
    int64_t micro_batches;                   /* --micro-batches K, -1 when not given */
    const char *timeline;                    /* --timeline FILE.csv, NULL when not given */
    bool inference;                          /* --inference: the graph as given, no training step */
    /* planning (plan.c); -1 (NULL, 0 for budget_pct) when not given */
    bool batch_max;                          /* --batch max */
    int64_t budget_bytes;                    /* --budget in bytes (-1 also for a percentage) */
    double budget_pct;                       /* --budget P%: percent of the store-everything peak */
    int64_t reserve_bytes;                   /* --reserve */
    const char *gpu;                         /* --gpu NAME */
    int strategy;                            /* --strategy: index into mp_cli_strategy_names */
    double time_limit;                       /* --time-limit seconds */
    const char *schedule;                    /* --schedule FILE.json */
    const char *graph_json;                  /* --graph-json FILE: a graph instead of a MODEL */
    const char *out_dir;                     /* -o DIR: write DIR/plan.json (docs/plan-format.md) */
    /* pictures (codegen/viz.h); NULL when not given */
    const char *dot, *svg, *png;             /* --dot, --svg, --png FILE: the lifetime graph */
    int dot_level;                           /* --dot-level: mp_viz_level (op, layer, stage), -1 auto */
    const char *report;                      /* --report FILE.html */
} mp_cli_opts;

/* NULL-terminated names accepted by --optimizer, --precision, --loss. */
extern const char *const mp_cli_optimizer_names[];
extern const char *const mp_cli_precision_names[];
extern const char *const mp_cli_loss_names[];
extern const char *const mp_cli_strategy_names[];   /* "ilp", then the baselines (plan.c) */

/* Parses argv[1..argc) against the options in `allowed` plus exactly one MODEL
 * argument. Returns 0, 1 when --help was asked (nothing else is checked), or
 * -1 after printing the usage error. */
int mp_cli_parse(int argc, char **argv, unsigned allowed, mp_cli_opts *o);
void mp_cli_opts_free(mp_cli_opts *o);
/* Prints the option list of `allowed`, one aligned line per option. */
void mp_cli_print_options(FILE *f, unsigned allowed);
/* The --batch/--dim bindings as infer.h wants them (points into o). */
mp_bindings mp_cli_bindings(const mp_cli_opts *o);

/* Calls fn(name, len, ctx) for each non-empty item of a comma-separated list;
 * stops at and returns the first nonzero result. */
int mp_cli_list_each(const char *list, int (*fn)(const char *name, size_t len, void *ctx), void *ctx);
/* True when name is an item of the comma-separated list (NULL list: false). */
bool mp_cli_list_has(const char *list, const char *name);

/* "memplan: <problem>" on stderr, as one line (newlines in the message become spaces). */
void mp_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Writes the finished output to stdout; MP_EXIT_OK, or MP_EXIT_USAGE after a write error. */
int mp_cli_emit(const char *buf, size_t len);
/* Builds a command's whole output in memory with render(f, ctx, json), so that
 * nothing reaches stdout on failure; 0, or -1 after printing the error.
 * *out (freed by the caller) holds *len bytes. */
int mp_cli_render(const char *model, int (*render)(FILE *f, const void *ctx, bool json), const void *ctx, bool json,
                  char **out, size_t *len);

/* ---- model roles (inspect.c): what each top-level value is ---------------- */

/* Roles are the IR's mp_role: inspect uses ACTIVATION, INPUT, PARAM, BUFFER, CONST. */

/* Why a value is a buffer. */
typedef enum mp_buffer_why {
    MP_BUF_NONE = 0,
    MP_BUF_BATCHNORM,        /* BatchNormalization input 3 or 4 (running mean/var) */
    MP_BUF_CROPPED_TABLE,    /* only ever sliced to a length taken from a Shape: a causal mask, a rotary cache */
    MP_BUF_NAMED,            /* named by --buffers */
    MP_BUF_WHY_COUNT
} mp_buffer_why;

extern const char *const mp_role_names[MP_ROLE_COUNT];       /* "activation", "input", "parameter", ... */
extern const char *const mp_buffer_why_names[MP_BUF_WHY_COUNT];

/* The training pass's options for what the command line says of roles
 * (--params-as-inputs, --data-inputs, --buffers; names copied into g's
 * arena), the rest as mp_train_defaults(). */
mp_train_opts mp_cli_train_opts(mp_graph *g, const mp_cli_opts *o);
/* Sets value->role of the top-level graph by mp_train_classify with those
 * options, from the model as loaded (before binding: data inputs are told by
 * their unbound first dim), and why[v] unless why is NULL. Fails on
 * --data-inputs/--buffers naming nothing. */
int mp_cli_classify(mp_graph *g, const mp_cli_opts *o, uint8_t *why, mp_err *err);

/* ---- the model's summary (inspect.c): inspect's output, also the head of the
 * memory command's JSON ---------------------------------------------------- */

struct mp_json;
typedef struct mp_cli_summary mp_cli_summary;
/* Summarizes g after mp_cli_classify (why: as it filled) and binding. What it
 * shows of values is copied, so a training step built on g afterwards leaves
 * it unchanged. NULL after printing the error. */
mp_cli_summary *mp_cli_summarize(const mp_cli_opts *o, mp_graph *g, const uint8_t *why);
void mp_cli_summary_free(mp_cli_summary *s);
/* Writes inspect's JSON members (docs/json.md) into the object open in j, with
 * `command` as the "command" member. */
void mp_cli_summary_json(struct mp_json *j, const mp_cli_summary *s, const char *command);

/* "memplan: MODEL: message" (a leading "MODEL: " in msg is not repeated). */
void mp_cli_model_error(const char *model, const char *msg);
/* Loads o->model; on failure prints "memplan: MODEL: message" and returns NULL. */
mp_model *mp_cli_load(const mp_cli_opts *o);
/* Applies --batch/--dim and infers shapes (unless --no-infer); on failure
 * prints the model error and returns -1. */
int mp_cli_bind_infer(mp_model *m, const mp_cli_opts *o);

/* ---- the step and its memory (analyze.c), shared with planning (plan.c) --- */

typedef struct mp_cli_step {
    const mp_cli_opts *o;
    mp_model *model;
    mp_graph *g;
    bool training;          /* the training step was built (else the graph as given) */
    mp_train_opts topts;
    mp_schedule sched;
    mp_memory mem;
    mp_cli_summary *summary; /* the model as given, bound (inspect's JSON members) */
    /* more members of the top-level JSON object, written after the memory ones (plan.c) */
    void (*json_extra)(struct mp_json *j, const void *ctx);
    const void *json_extra_ctx;
} mp_cli_step;

/* Loads o->model, classifies, binds (o->batch, o->dim), summarizes the model
 * as given (a->summary), builds the step
 * (unless --inference) and analyzes its memory in graph order; prints the
 * error and returns -1 on failure (a is then freed). */
int mp_cli_step_load(const mp_cli_opts *o, mp_cli_step *a);
void mp_cli_step_free(mp_cli_step *a);
/* The memory command's output of a (text, or the JSON object). */
int mp_cli_step_render(FILE *f, const mp_cli_step *a, bool json);

/* ---- pictures (analyze.c): --dot, --svg, --png, --timeline FILE.svg, --report ---- */

struct mp_viz_input;
/* Writes every picture o asks for, of in (a plan's decisions included when
 * in carries them); prints the error and returns -1 on failure. */
int mp_cli_write_pictures(const mp_cli_opts *o, const struct mp_viz_input *in);
/* --timeline FILE.csv: live bytes per schedule step and category (no partial file on failure). */
int mp_cli_write_timeline_csv(const mp_graph *g, const mp_schedule *s, const mp_memory *m, const char *path);
/* "wrote PATH" lines, one per picture (and --timeline) o asked for. */
void mp_cli_print_pictures(FILE *f, const mp_cli_opts *o);

/* ---- planning (plan.c) ----------------------------------------------------- */

/* Parses a size: 24GB = 24*10^9, 24GiB = 24*2^30, KB/KiB MB/MiB TB/TiB, plain
 * or B-suffixed bytes, fractions (1.5GiB); with allow_pct also P% (*pct, and
 * *bytes = -1). Prints the usage error and returns -1 on anything else. */
int mp_cli_parse_bytes(const char *what, const char *s, bool allow_pct, int64_t *bytes, double *pct);
/* args.c's hook for the planning options. */
int mp_cli_plan_option(mp_cli_opts *o, int id, const char *val);
/* True when a planning option was given: the memory command hands over to mp_cmd_plan. */
bool mp_cli_plan_wanted(const mp_cli_opts *o);
int mp_cmd_plan(const mp_cli_opts *o);

#endif
