/* args.c - option parsing and the model helpers shared by every subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codegen/viz.h" /* mp_viz_level_names */

/* One row per option: the name, its value's metavariable (NULL: a flag) and help. */
static const struct {
    const char *name, *metavar, *help;
} opt_table[MP_OPT_COUNT] = {
    [MP_OPT_HELP] = {"--help", NULL, "print this help and exit"},
    [MP_OPT_BATCH] = {"--batch", "N", "bind the first dimension of every input whose first dimension is not fixed (1..2^40)"},
    [MP_OPT_DIM] = {"--dim", "NAME=V", "bind the symbolic dimension NAME to V (0..2^40); repeatable"},
    [MP_OPT_JSON] = {"--json", NULL, "print JSON (schema in docs/json.md) instead of text"},
    [MP_OPT_PARAMS_AS_INPUTS] = {"--params-as-inputs", NULL, "count float graph inputs other than the data inputs as parameters (export_params=False)"},
    [MP_OPT_DATA_INPUTS] = {"--data-inputs", "A,B", "the data inputs, for --params-as-inputs (implies it; default: inputs whose first dimension is not fixed)"},
    [MP_OPT_BUFFERS] = {"--buffers", "A,B", "count these initializers (or parameter inputs) as buffers, not parameters"},
    [MP_OPT_CONSTANTS_AS_PARAMS] = {"--constants-as-params", NULL, "count float Constant nodes of 2+ elements as parameters (weights exported as Constants, e.g. Paddle2ONNX)"},
    [MP_OPT_NO_INFER] = {"--no-infer", NULL, "skip shape inference: shapes only as the file declares them"},
    [MP_OPT_TOPO_SORT] = {"--topo-sort", NULL, "sort nodes topologically (stably) first, for files that list them out of order"},
    [MP_OPT_OPTIMIZER] = {"--optimizer", "NAME", "sgd, momentum, adam, adamw (default) or adafactor"},
    [MP_OPT_PRECISION] = {"--precision", "P", "fp32 (default), bf16 or fp16 compute (fp32 master weights and state)"},
    [MP_OPT_MICRO_BATCHES] = {"--micro-batches", "K", "gradient accumulation over K micro-batches (1..65536, default 1)"},
    [MP_OPT_OPTIMIZER_IN_BACKWARD] = {"--optimizer-in-backward", NULL, "run each parameter's update as soon as its gradient is final, freeing the gradient (PyTorch's optimizer step in the backward)"},
    [MP_OPT_LOSS] = {"--loss", "KIND", "auto (default), xent, mse or sum"},
    [MP_OPT_TIMELINE] = {"--timeline", "FILE.csv", "write the live bytes per category at every step to FILE.csv (a name ending in .svg: draw them)"},
    [MP_OPT_INFERENCE] = {"--inference", NULL, "analyze the graph as given (inference memory), no training step"},
    [MP_OPT_BUDGET] = {"--budget", "B", "plan recomputation to fit B: 24GB (10^9), 24GiB (2^30), KB..TiB, bytes, or P% of the store-everything peak"},
    [MP_OPT_RESERVE] = {"--reserve", "B", "memory kept back for the CUDA context and workspaces (default 512MiB; 0 for --graph-json)"},
    [MP_OPT_GPU] = {"--gpu", "NAME", "cost model device (default a100-80; a100-40 h100 h200 l4 rtx3090 rtx4090 v100 t4); its memory when no --budget"},
    [MP_OPT_STRATEGY] = {"--strategy", "S", "ilp (default), none, all, sqrt, greedy or lookahead"},
    [MP_OPT_TIME_LIMIT] = {"--time-limit", "SEC", "solver time limit in seconds (default 1.2)"},
    [MP_OPT_SCHEDULE] = {"--schedule", "FILE.json", "write the planned order: node names, recomputations repeated"},
    [MP_OPT_GRAPH_JSON] = {"--graph-json", "FILE", "plan a Checkmate/Moccasin graph (networkx node-link JSON) instead of a model"},
    [MP_OPT_OUT] = {"-o", "DIR", "write the executable plan DIR/plan.json (docs/plan-format.md), run by memplan-run DIR"},
    [MP_OPT_DOT] = {"--dot", "FILE.dot", "write the lifetime graph (ops, tensors with size and live interval) in DOT"},
    [MP_OPT_SVG] = {"--svg", "FILE.svg", "draw the lifetime graph (Graphviz dot layout) as SVG"},
    [MP_OPT_PNG] = {"--png", "FILE.png", "draw the lifetime graph as PNG"},
    [MP_OPT_DOT_LEVEL] = {"--dot-level", "L", "op, layer (clusters by name scope) or stage (one box per scope); default op up to 300 nodes, else layer"},
    [MP_OPT_REPORT] = {"--report", "FILE.html", "write one self-contained HTML page: tables, timeline, lifetime graph, tensors"},
};

/* Same order as train.h's mp_opt_kind, the precisions, and mp_loss_kind. */
const char *const mp_cli_optimizer_names[] = {"sgd", "momentum", "adam", "adamw", "adafactor", NULL};
const char *const mp_cli_precision_names[] = {"fp32", "bf16", "fp16", NULL};
const char *const mp_cli_loss_names[] = {"auto", "xent", "mse", "sum", NULL};

/* Sets *slot to the index of val in names; fails listing the choices. */
static int parse_choice(const char *option, const char *val, const char *const *names, int *slot)
{
    if (*slot >= 0) {
        mp_cli_error("%s given twice", option);
        return -1;
    }
    for (int i = 0; names[i]; i++)
        if (!strcmp(val, names[i])) {
            *slot = i;
            return 0;
        }
    char list[128] = "";
    for (int i = 0; names[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    mp_cli_error("%s: unknown value '%.100s' (one of %s)", option, val, list);
    return -1;
}

void mp_cli_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "memplan: %s\n", msg);
}

int mp_cli_emit(const char *buf, size_t len)
{
    if (fwrite(buf, 1, len, stdout) != len || fflush(stdout)) {
        mp_cli_error("cannot write the output: %s", strerror(errno));
        return MP_EXIT_USAGE;
    }
    return MP_EXIT_OK;
}

int mp_cli_render(const char *model, int (*render)(FILE *f, const void *ctx, bool json), const void *ctx, bool json,
                  char **out, size_t *len)
{
    FILE *mem = open_memstream(out, len);
    if (!mem) {
        mp_cli_error("out of memory");
        return -1;
    }
    int bad = render(mem, ctx, json);
    if (fclose(mem) || bad) {
        mp_cli_error("%s: cannot format the output", model);
        return -1;
    }
    return 0;
}

void mp_cli_print_options(FILE *f, unsigned allowed)
{
    for (int i = 0; i < MP_OPT_COUNT; i++) {
        if (!(allowed & 1u << i) && i != MP_OPT_HELP) continue;
        char lhs[64];
        snprintf(lhs, sizeof lhs, "%s%s%s", opt_table[i].name, opt_table[i].metavar ? " " : "",
                 opt_table[i].metavar ? opt_table[i].metavar : "");
        fprintf(f, "  %-20s %s\n", lhs, opt_table[i].help);
    }
}

void mp_cli_opts_free(mp_cli_opts *o)
{
    for (int i = 0; i < o->ndims; i++) free(o->dim_names[i]);
    o->ndims = 0;
}

mp_bindings mp_cli_bindings(const mp_cli_opts *o)
{
    return (mp_bindings){.batch = o->batch,
                         .nnamed = o->ndims,
                         .names = (const char **)o->dim_names,
                         .values = o->dim_values};
}

/* Parses a decimal integer in [min, MP_CLI_MAX_DIM_VALUE]; what names the
 * option in the message. */
static int parse_size(const char *what, const char *s, int64_t min, int64_t *out)
{
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    if (!*p) {
        mp_cli_error("%s: '%s' is not a number", what, s);
        return -1;
    }
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') {
            mp_cli_error("%s: '%s' is not a number", what, s);
            return -1;
        }
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE || v < min || v > MP_CLI_MAX_DIM_VALUE) {
        mp_cli_error("%s: %s is out of range (%lld..2^40)", what, s, (long long)min);
        return -1;
    }
    *out = v;
    return 0;
}

static int find_option(const char *arg, size_t len, unsigned allowed)
{
    for (int i = 0; i < MP_OPT_COUNT; i++)
        if ((allowed & 1u << i || i == MP_OPT_HELP) && strlen(opt_table[i].name) == len &&
            !strncmp(opt_table[i].name, arg, len))
            return i;
    return -1;
}

/* Applies option id with its value (NULL for flags). */
static int set_option(mp_cli_opts *o, int id, const char *val)
{
    const char *name = opt_table[id].name;
    switch (id) {
    case MP_OPT_BATCH:
        if (o->batch >= 0 || o->batch_max) {
            mp_cli_error("--batch given twice");
            return -1;
        }
        if (!strcmp(val, "max")) { /* the largest batch that fits: planning only */
            o->batch_max = true;
            return 0;
        }
        return parse_size("--batch", val, 1, &o->batch);
    case MP_OPT_DIM: {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val) {
            mp_cli_error("--dim: expected NAME=VALUE, got '%s'", val);
            return -1;
        }
        size_t n = (size_t)(eq - val);
        for (int i = 0; i < o->ndims; i++)
            if (strlen(o->dim_names[i]) == n && !strncmp(o->dim_names[i], val, n)) {
                mp_cli_error("--dim %.*s given twice", (int)n, val);
                return -1;
            }
        if (o->ndims == MP_CLI_MAX_DIMS) {
            mp_cli_error("--dim: more than %d dimensions", MP_CLI_MAX_DIMS);
            return -1;
        }
        char what[160];
        snprintf(what, sizeof what, "--dim %.*s", (int)(n < 100 ? n : 100), val);
        int64_t v;
        if (parse_size(what, eq + 1, 0, &v)) return -1;
        o->dim_names[o->ndims] = strndup(val, n);
        if (!o->dim_names[o->ndims]) {
            mp_cli_error("out of memory");
            return -1;
        }
        o->dim_values[o->ndims++] = v;
        return 0;
    }
    case MP_OPT_DATA_INPUTS:
    case MP_OPT_BUFFERS: {
        const char **slot = id == MP_OPT_DATA_INPUTS ? &o->data_inputs : &o->buffers;
        if (*slot) {
            mp_cli_error("%s given twice (give one comma-separated list)", name);
            return -1;
        }
        if (!val[strspn(val, ",")]) {
            mp_cli_error("%s: empty list", name);
            return -1;
        }
        *slot = val;
        if (id == MP_OPT_DATA_INPUTS) o->params_as_inputs = true;
        return 0;
    }
    case MP_OPT_OPTIMIZER: return parse_choice(name, val, mp_cli_optimizer_names, &o->optimizer);
    case MP_OPT_PRECISION: return parse_choice(name, val, mp_cli_precision_names, &o->precision);
    case MP_OPT_LOSS: return parse_choice(name, val, mp_cli_loss_names, &o->loss);
    case MP_OPT_MICRO_BATCHES:
        if (o->micro_batches >= 0) {
            mp_cli_error("--micro-batches given twice");
            return -1;
        }
        if (parse_size("--micro-batches", val, 1, &o->micro_batches)) return -1;
        if (o->micro_batches > MP_CLI_MAX_MICRO_BATCHES) {
            mp_cli_error("--micro-batches: %s is out of range (1..%d)", val, MP_CLI_MAX_MICRO_BATCHES);
            return -1;
        }
        return 0;
    case MP_OPT_TIMELINE:
        if (o->timeline) {
            mp_cli_error("--timeline given twice");
            return -1;
        }
        o->timeline = val;
        return 0;
    case MP_OPT_INFERENCE: o->inference = true; return 0;
    case MP_OPT_JSON: o->json = true; return 0;
    case MP_OPT_DOT:
    case MP_OPT_SVG:
    case MP_OPT_PNG:
    case MP_OPT_REPORT: {
        const char **slot = id == MP_OPT_DOT ? &o->dot : id == MP_OPT_SVG ? &o->svg : id == MP_OPT_PNG ? &o->png : &o->report;
        if (*slot) {
            mp_cli_error("%s given twice", name);
            return -1;
        }
        *slot = val;
        return 0;
    }
    case MP_OPT_DOT_LEVEL: return parse_choice(name, val, mp_viz_level_names, &o->dot_level);
    case MP_OPT_PARAMS_AS_INPUTS: o->params_as_inputs = true; return 0;
    case MP_OPT_CONSTANTS_AS_PARAMS: o->constants_as_params = true; return 0;
    case MP_OPT_OPTIMIZER_IN_BACKWARD: o->optimizer_in_backward = true; return 0;
    case MP_OPT_NO_INFER: o->no_infer = true; return 0;
    case MP_OPT_TOPO_SORT: o->topo_sort = true; return 0;
    default: return mp_cli_plan_option(o, id, val);
    }
    return 0;
}

int mp_cli_parse(int argc, char **argv, unsigned allowed, mp_cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->batch = -1;
    o->optimizer = o->precision = o->loss = -1;
    o->micro_batches = -1;
    o->dot_level = -1;
    o->budget_bytes = o->reserve_bytes = -1;
    o->strategy = -1;
    o->time_limit = -1;
    const char *cmd = argc > 0 ? argv[0] : "memplan";
    /* --help wins over everything else, wherever it is. */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;

    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_args || a[0] != '-' || !a[1]) {
            if (o->model) {
                mp_cli_error("%s: unexpected argument '%s' (one model only)", cmd, a);
                goto fail;
            }
            o->model = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_args = true;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        int id = find_option(a, len, allowed);
        if (id < 0) {
            mp_cli_error("%s: unknown option '%.*s' (see memplan %s --help)", cmd, (int)(len < 100 ? len : 100), a, cmd);
            goto fail;
        }
        const char *val = NULL;
        if (opt_table[id].metavar) {
            if (eq) {
                val = eq + 1;
            } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                val = argv[++i];
            } else {
                mp_cli_error("%s needs a value (%s %s)", opt_table[id].name, opt_table[id].name, opt_table[id].metavar);
                goto fail;
            }
            if (!*val) {
                mp_cli_error("%s needs a value (%s %s)", opt_table[id].name, opt_table[id].name, opt_table[id].metavar);
                goto fail;
            }
        } else if (eq) {
            mp_cli_error("%s takes no value", opt_table[id].name);
            goto fail;
        }
        if (set_option(o, id, val)) goto fail;
    }
    if (o->batch_max && !(allowed & MP_OPT_BIT(BUDGET))) {
        mp_cli_error("%s: --batch max is for planning (memplan MODEL.onnx --batch max --budget B)", cmd);
        goto fail;
    }
    if (!o->model && !o->graph_json) {
        mp_cli_error("%s: no model given (usage: memplan %s MODEL.onnx [options])", cmd, cmd);
        goto fail;
    }
    return 0;
fail:
    mp_cli_opts_free(o);
    return -1;
}

int mp_cli_list_each(const char *list, int (*fn)(const char *name, size_t len, void *ctx), void *ctx)
{
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n) {
            int r = fn(p, n, ctx);
            if (r) return r;
        }
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

static int same_name(const char *item, size_t len, void *ctx)
{
    const char *name = ctx;
    return strlen(name) == len && !strncmp(item, name, len);
}

bool mp_cli_list_has(const char *list, const char *name) { return mp_cli_list_each(list, same_name, (void *)name) != 0; }

/* ---- model helpers ---------------------------------------------------------- */

void mp_cli_model_error(const char *model, const char *msg)
{
    size_t n = strlen(model);
    if (!msg || !*msg) msg = "cannot load the model";
    if (!strncmp(msg, model, n) && !strncmp(msg + n, ": ", 2)) msg += n + 2; /* the importer named the file already */
    mp_cli_error("%s: %s", model, msg);
}

mp_model *mp_cli_load(const mp_cli_opts *o)
{
    mp_err err = {{0}};
    mp_onnx_opts lo = {.topo_sort = o->topo_sort};
    mp_model *m = mp_onnx_load_with(o->model, &lo, &err);
    if (!m) mp_cli_model_error(o->model, err.msg);
    return m;
}

int mp_cli_bind_infer(mp_model *m, const mp_cli_opts *o)
{
    mp_err err = {{0}};
    mp_bindings b = mp_cli_bindings(o);
    if (mp_bind_dims(m->graph, &b, &err) || (!o->no_infer && mp_infer(m->graph, &err))) {
        mp_cli_model_error(o->model, err.msg[0] ? err.msg : "shape inference failed");
        return -1;
    }
    return 0;
}
