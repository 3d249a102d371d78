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

#define MEMPLAN_VERSION "0.1.0"

enum { MP_EXIT_OK = 0, MP_EXIT_USAGE = 2 };

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
    MP_OPT_NO_INFER,
    MP_OPT_TOPO_SORT,
    MP_OPT_OPTIMIZER,
    MP_OPT_PRECISION,
    MP_OPT_MICRO_BATCHES,
    MP_OPT_LOSS,
    MP_OPT_TIMELINE,
    MP_OPT_INFERENCE,
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
} mp_cli_opts;

/* NULL-terminated names accepted by --optimizer, --precision, --loss. */
extern const char *const mp_cli_optimizer_names[];
extern const char *const mp_cli_precision_names[];
extern const char *const mp_cli_loss_names[];

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

/* Fills role[v] (and why[v] unless NULL) for every value of the top-level
 * graph, from the model as loaded (before binding: data inputs are told by
 * their unbound first dim). Fails on --data-inputs/--buffers naming nothing. */
int mp_cli_classify(const mp_graph *g, const mp_cli_opts *o, uint8_t *role, uint8_t *why, mp_err *err);

/* "memplan: MODEL: message" (a leading "MODEL: " in msg is not repeated). */
void mp_cli_model_error(const char *model, const char *msg);
/* Loads o->model; on failure prints "memplan: MODEL: message" and returns NULL. */
mp_model *mp_cli_load(const mp_cli_opts *o);
/* Applies --batch/--dim and infers shapes (unless --no-infer); on failure
 * prints the model error and returns -1. */
int mp_cli_bind_infer(mp_model *m, const mp_cli_opts *o);

#endif
