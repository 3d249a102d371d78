/* analyze.c - `memplan MODEL.onnx --batch N ...` (also `memplan memory ...`):
 * the memory of one training step (or of inference, with --inference) under
 * the default schedule: the breakdown at the peak and in total, the peak and
 * its step, the largest tensors live at the peak (docs/memory.md). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "codegen/viz.h"     /* the pictures: mp_viz_write_graph, _timeline, _report */
#include "passes/memory.h"   /* mp_memory_analyze, mp_mem_cat_names */
#include "passes/schedule.h" /* mp_schedule_graph_order */
#include "passes/train.h"    /* mp_train_build, mp_train_opts */

#define MEMORY_OPTS                                                                                            \
    (MP_OPT_BIT(BATCH) | MP_OPT_BIT(DIM) | MP_OPT_BIT(JSON) | MP_OPT_BIT(PARAMS_AS_INPUTS) |                   \
     MP_OPT_BIT(DATA_INPUTS) | MP_OPT_BIT(BUFFERS) | MP_OPT_BIT(CONSTANTS_AS_PARAMS) | MP_OPT_BIT(OPTIMIZER) | MP_OPT_BIT(PRECISION) |           \
     MP_OPT_BIT(MICRO_BATCHES) | MP_OPT_BIT(OPTIMIZER_IN_BACKWARD) | MP_OPT_BIT(LOSS) | MP_OPT_BIT(TIMELINE) |   \
     MP_OPT_BIT(INFERENCE) |                                                                                  \
     MP_OPT_BIT(TOPO_SORT) | MP_OPT_BIT(BUDGET) | MP_OPT_BIT(RESERVE) | MP_OPT_BIT(GPU) | MP_OPT_BIT(STRATEGY) |   \
     MP_OPT_BIT(TIME_LIMIT) | MP_OPT_BIT(SCHEDULE) | MP_OPT_BIT(GRAPH_JSON) | MP_OPT_BIT(OUT) | MP_OPT_BIT(DOT) |    \
     MP_OPT_BIT(SVG) |                                                                                          \
     MP_OPT_BIT(PNG) | MP_OPT_BIT(DOT_LEVEL) | MP_OPT_BIT(REPORT))

static const char *const phase_names[MP_PHASE_COUNT] = {"forward", "loss", "backward", "optimizer"};

typedef mp_cli_step analysis; /* cli.h: planning (plan.c) loads the step the same way */

static double mib(int64_t b) { return b / (1024.0 * 1024.0); }

static const char *producer_name(const mp_graph *g, const mp_value *v)
{
    return v->producer >= 0 && v->producer < g->nnodes ? g->nodes[v->producer].name : NULL;
}

/* ---- the training step ---------------------------------------------------- */

static const mp_dtype precision_dtypes[] = {MP_FLOAT, MP_BFLOAT16, MP_FLOAT16}; /* mp_cli_precision_names */

static int build_step(analysis *a)
{
    const mp_cli_opts *o = a->o;
    mp_train_opts t = mp_cli_train_opts(a->g, o); /* the roles as inspect classified them */
    if (o->optimizer >= 0) t.optimizer = (mp_opt_kind)o->optimizer;
    if (o->precision >= 0) t.precision = precision_dtypes[o->precision];
    if (o->loss >= 0) t.loss = (mp_loss_kind)o->loss;
    if (o->micro_batches > 0) t.micro_batches = (int)o->micro_batches;
    a->topts = t;
    mp_err err = {{0}};
    if (mp_train_build(a->g, &t, &err)) {
        mp_cli_model_error(o->model, err.msg[0] ? err.msg : "cannot build the training step");
        return -1;
    }
    a->training = true;
    return 0;
}

/* ---- text ------------------------------------------------------------------- */

static void print_text(FILE *f, const analysis *a)
{
    const mp_graph *g = a->g;
    const mp_memory *m = &a->mem;
    fprintf(f, "%-18s%s\n", "model", a->o->model);
    if (a->training)
        fprintf(f, "%-18straining: %s, %s, %d micro-batch%s, loss %s%s\n", "step",
                mp_cli_optimizer_names[a->topts.optimizer],
                a->topts.precision == MP_BFLOAT16 ? "bf16" : a->topts.precision == MP_FLOAT16 ? "fp16" : "fp32",
                a->topts.micro_batches, a->topts.micro_batches == 1 ? "" : "es", mp_cli_loss_names[a->topts.loss],
                a->topts.optimizer_in_backward ? ", updates in the backward" : "");
    else
        fprintf(f, "%-18sinference: the graph as given (forward only)\n", "step");
    fprintf(f, "%-18s%d (", "nodes", (int)g->nnodes);
    for (int p = 0, first = 1; p < MP_PHASE_COUNT; p++)
        if (m->phase_nodes[p]) {
            fprintf(f, "%s%s %d", first ? "" : ", ", phase_names[p], (int)m->phase_nodes[p]);
            first = 0;
        }
    fprintf(f, ")\n\n");

    fprintf(f, "%-18s%12s %12s\n", "memory (MiB)", "at peak", "total");
    int64_t sum_peak = 0, sum_total = 0;
    for (int c = 0; c < MP_MEM_COUNT; c++) {
        fprintf(f, "  %-16s%12.2f %12.2f\n", mp_mem_cat_names[c], mib(m->at_peak[c]), mib(m->totals[c]));
        sum_peak += m->at_peak[c];
        sum_total += m->totals[c];
    }
    fprintf(f, "  %-16s%12.2f %12.2f\n\n", "total", mib(sum_peak), mib(sum_total));

    if (m->peak_node >= 0)
        fprintf(f, "%-18s%.2f MiB at step %d of %d: %s (%s)\n", "peak", mib(m->peak_bytes), (int)m->peak_step,
                (int)m->nsteps, g->nodes[m->peak_node].name, phase_names[g->nodes[m->peak_node].phase % MP_PHASE_COUNT]);
    else
        fprintf(f, "%-18s%.2f MiB (the graph has no nodes)\n", "peak", mib(m->peak_bytes));
    fprintf(f, "%-18s%.2f MiB\n", "saved activations", mib(m->saved_activation_bytes));
    fprintf(f, "largest live tensors at the peak\n");
    char t[512];
    for (int i = 0; i < m->ntop; i++) {
        int32_t v = m->top[i];
        const mp_value *x = &g->values[v];
        const char *p = producer_name(g, x);
        fprintf(f, "  %10.2f MiB  %-15s  %s  %s", mib(m->lt.bytes[v]), mp_mem_cat_names[m->cat[v]], x->name,
                mp_value_type_str(g, x, t, sizeof t));
        if (p) fprintf(f, "  <- %s", p);
        fputc('\n', f);
    }
    mp_cli_print_pictures(f, a->o);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_shape(mp_json *j, const mp_graph *g, const mp_value *v)
{
    if (v->rank < 0) {
        mp_json_null(j);
        return;
    }
    mp_json_begin_inline_array(j);
    for (int i = 0; i < v->rank; i++) {
        mp_dim d = mp_dim_resolve(g, v->dims[i]);
        if (d.v >= 0) mp_json_int(j, d.v);
        else mp_json_null(j);
    }
    mp_json_end(j);
}

static void json_cats(mp_json *j, const char *key, const int64_t *bytes)
{
    mp_json_key(j, key);
    mp_json_begin_object(j);
    for (int c = 0; c < MP_MEM_COUNT; c++) {
        mp_json_key(j, mp_mem_cat_names[c]);
        mp_json_int(j, bytes[c]);
    }
    mp_json_end(j);
}

static int print_json(FILE *f, const analysis *a)
{
    const mp_graph *g = a->g;
    const mp_memory *m = &a->mem;
    mp_json j;
    mp_json_init(&j, f, 2);
    mp_json_begin_object(&j);
    mp_cli_summary_json(&j, a->summary, "memory"); /* inspect's members: the model as given */

    mp_json_key(&j, "step");
    mp_json_begin_object(&j);
    mp_json_key(&j, "training");
    mp_json_bool(&j, a->training);
    if (a->training) {
        mp_json_key(&j, "optimizer");
        mp_json_str(&j, mp_cli_optimizer_names[a->topts.optimizer]);
        mp_json_key(&j, "precision");
        mp_json_str(&j, mp_dtype_name(a->topts.precision));
        mp_json_key(&j, "micro_batches");
        mp_json_int(&j, a->topts.micro_batches);
        mp_json_key(&j, "loss");
        mp_json_str(&j, mp_cli_loss_names[a->topts.loss]);
        mp_json_key(&j, "optimizer_in_backward");
        mp_json_bool(&j, a->topts.optimizer_in_backward);
    }
    mp_json_key(&j, "phases");
    mp_json_begin_object(&j);
    for (int p = 0; p < MP_PHASE_COUNT; p++) {
        mp_json_key(&j, phase_names[p]);
        mp_json_int(&j, m->phase_nodes[p]);
    }
    mp_json_end(&j);
    mp_json_end(&j);

    mp_json_key(&j, "memory");
    mp_json_begin_object(&j);
    mp_json_key(&j, "peak_bytes");
    mp_json_int(&j, m->peak_bytes);
    mp_json_key(&j, "peak_step");
    mp_json_int(&j, m->peak_step);
    mp_json_key(&j, "peak_node");
    mp_json_str(&j, m->peak_node >= 0 ? g->nodes[m->peak_node].name : NULL);
    json_cats(&j, "at_peak", m->at_peak);
    json_cats(&j, "totals", m->totals);
    mp_json_key(&j, "largest_live");
    mp_json_begin_array(&j);
    for (int i = 0; i < m->ntop; i++) {
        const mp_value *x = &g->values[m->top[i]];
        mp_json_begin_object(&j);
        mp_json_key(&j, "name");
        mp_json_str(&j, x->name);
        mp_json_key(&j, "dtype");
        mp_json_str(&j, x->dtype == MP_UNDEFINED ? NULL : mp_dtype_name(x->dtype));
        mp_json_key(&j, "shape");
        json_shape(&j, g, x);
        mp_json_key(&j, "bytes");
        mp_json_int(&j, m->lt.bytes[m->top[i]]);
        mp_json_key(&j, "category");
        mp_json_str(&j, mp_mem_cat_names[m->cat[m->top[i]]]);
        mp_json_key(&j, "producer");
        mp_json_str(&j, producer_name(g, x));
        mp_json_end(&j);
    }
    mp_json_end(&j);
    mp_json_end(&j);
    mp_json_key(&j, "saved_activation_bytes");
    mp_json_int(&j, m->saved_activation_bytes);
    if (a->json_extra) a->json_extra(&j, a->json_extra_ctx);
    mp_json_end(&j);
    return mp_json_finish(&j);
}

/* ---- timeline CSV ------------------------------------------------------------ */

static void csv_field(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Written to a temporary file beside the target, then renamed: a failure leaves no partial file. */
int mp_cli_write_timeline_csv(const mp_graph *g, const mp_schedule *s, const mp_memory *m, const char *path)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        mp_cli_error("out of memory");
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        mp_cli_error("--timeline: cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return -1;
    }
    fprintf(f, "step,node,phase,total");
    for (int c = 0; c < MP_MEM_COUNT; c++) fprintf(f, ",%s", mp_mem_cat_names[c]);
    fputc('\n', f);
    for (int32_t i = 0; i < m->nsteps; i++) {
        const mp_node *nd = &g->nodes[s->order[i]];
        fprintf(f, "%d,", (int)i);
        csv_field(f, nd->name);
        fprintf(f, ",%s,%lld", phase_names[nd->phase % MP_PHASE_COUNT], (long long)mp_memory_live_total(m, i));
        for (int c = 0; c < MP_MEM_COUNT; c++) fprintf(f, ",%lld", (long long)m->live[(size_t)i * MP_MEM_COUNT + c]);
        fputc('\n', f);
    }
    bool bad = ferror(f) != 0;
    if (fclose(f)) bad = true;
    if (bad || rename(tmp, path)) {
        mp_cli_error("--timeline: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

/* ---- pictures ------------------------------------------------------------------ */

static bool is_svg(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && !strcasecmp(path + n - 4, ".svg");
}

int mp_cli_write_pictures(const mp_cli_opts *o, const mp_viz_input *in)
{
    static const struct {
        const char *option;
        size_t off;
        mp_viz_format fmt;
    } graphs[] = {{"--dot", offsetof(mp_cli_opts, dot), MP_VIZ_DOT},
                  {"--svg", offsetof(mp_cli_opts, svg), MP_VIZ_SVG},
                  {"--png", offsetof(mp_cli_opts, png), MP_VIZ_PNG}};
    mp_err err = {{0}};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        const char *path = *(const char *const *)((const char *)o + graphs[i].off);
        if (path && mp_viz_write_graph(in, (mp_viz_level)o->dot_level, graphs[i].fmt, path, &err)) {
            mp_cli_error("%s: %s", graphs[i].option, err.msg);
            return -1;
        }
    }
    if (o->timeline && is_svg(o->timeline) && mp_viz_write_timeline(in, o->timeline, &err)) {
        mp_cli_error("--timeline: %s", err.msg);
        return -1;
    }
    if (o->report && mp_viz_write_report(in, (mp_viz_level)o->dot_level, o->report, &err)) {
        mp_cli_error("--report: %s", err.msg);
        return -1;
    }
    return 0;
}

void mp_cli_print_pictures(FILE *f, const mp_cli_opts *o)
{
    const char *paths[] = {o->timeline, o->dot, o->svg, o->png, o->report};
    bool first = true;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (paths[i]) {
            fprintf(f, "%s%-18s%s\n", first ? "\n" : "", "wrote", paths[i]);
            first = false;
        }
}

/* The memory command's pictures: the step as analyzed, every tensor kept. */
static int write_step_pictures(const analysis *a)
{
    const mp_cli_opts *o = a->o;
    if (!o->dot && !o->svg && !o->png && !o->report && !(o->timeline && is_svg(o->timeline))) return 0;
    char sub[200];
    if (a->training)
        snprintf(sub, sizeof sub, "training: %s, %s, %d micro-batch%s, loss %s", mp_cli_optimizer_names[a->topts.optimizer],
                 a->topts.precision == MP_BFLOAT16 ? "bf16" : a->topts.precision == MP_FLOAT16 ? "fp16" : "fp32",
                 a->topts.micro_batches, a->topts.micro_batches == 1 ? "" : "es", mp_cli_loss_names[a->topts.loss]);
    else
        snprintf(sub, sizeof sub, "inference: the graph as given");
    mp_viz_input in = mp_viz_input_of(a->g, &a->mem);
    in.title = o->model;
    in.subtitle = sub;
    return mp_cli_write_pictures(o, &in);
}

/* ---- the command -------------------------------------------------------------- */

static int memory_help(void)
{
    printf("usage: memplan MODEL.onnx --batch N [options]\n"
           "       memplan memory MODEL.onnx --batch N [options]\n\n"
           "Builds the training step (forward, loss, backward, optimizer) and prints its memory\n"
           "under the default schedule, in MiB: parameters, buffers, constants, gradients,\n"
           "optimizer state, activations, transient tensors and inputs, at the peak and in total;\n"
           "the peak and the step it is reached at; the %d largest tensors live at the peak.\n"
           "Every symbolic dimension must be bound (docs/memory.md).\n"
           "With --budget (or --gpu, --graph-json FILE) it plans which activations to recompute\n"
           "so that the step fits (docs/cli.md).\n\n"
           "options:\n",
           MP_MEM_TOP_N);
    mp_cli_print_options(stdout, MEMORY_OPTS);
    return MP_EXIT_OK;
}

/* Text or JSON, as the command asked. */
static int render(FILE *f, const void *ctx, bool json)
{
    const analysis *x = ctx;
    if (json) return print_json(f, x);
    print_text(f, x);
    return 0;
}

int mp_cli_step_render(FILE *f, const mp_cli_step *a, bool json) { return render(f, a, json); }

void mp_cli_step_free(mp_cli_step *a)
{
    mp_cli_summary_free(a->summary);
    mp_memory_free(&a->mem);
    mp_schedule_free(&a->sched);
    if (a->model) mp_onnx_close(a->model);
    memset(a, 0, sizeof *a);
}

int mp_cli_step_load(const mp_cli_opts *o, mp_cli_step *a)
{
    memset(a, 0, sizeof *a);
    a->o = o;
    int rc = -1;
    uint8_t *why = NULL;
    mp_err err = {{0}};
    a->model = mp_cli_load(o);
    if (!a->model) goto done;
    a->g = a->model->graph;
    /* roles as inspect decides them, for the graph as given; the training pass classifies again */
    why = malloc((size_t)a->g->nvalues + 1);
    if (!why) {
        mp_cli_error("out of memory");
        goto done;
    }
    if (mp_cli_classify(a->g, o, why, &err)) {
        mp_cli_model_error(o->model, err.msg);
        goto done;
    }
    if (mp_cli_bind_infer(a->model, o)) goto done;
    const char *sym = mp_unbound_symbol(a->g);
    if (sym) {
        char msg[400];
        snprintf(msg, sizeof msg, "the symbolic dimension '%.100s' is unbound: memory planning needs every size "
                 "(bind it with --batch N or --dim %.100s=V)", sym, sym);
        mp_cli_model_error(o->model, msg);
        goto done;
    }
    if (!(a->summary = mp_cli_summarize(o, a->g, why))) goto done;
    if (!o->inference && build_step(a)) goto done;
    if (mp_schedule_graph_order(a->g, &a->sched, &err) || mp_memory_analyze(a->g, &a->sched, &a->mem, &err)) {
        mp_cli_model_error(o->model, err.msg);
        goto done;
    }
    rc = 0;
done:
    free(why);
    if (rc) mp_cli_step_free(a);
    return rc;
}

int mp_cmd_memory(int argc, char **argv)
{
    mp_cli_opts o;
    int r = mp_cli_parse(argc, argv, MEMORY_OPTS, &o);
    if (r) return r < 0 ? MP_EXIT_USAGE : memory_help();
    if (o.inference && (o.optimizer >= 0 || o.precision >= 0 || o.loss >= 0 || o.micro_batches >= 0 ||
                        o.optimizer_in_backward)) {
        mp_cli_error("--inference takes no --optimizer, --precision, --loss, --micro-batches or --optimizer-in-backward");
        mp_cli_opts_free(&o);
        return MP_EXIT_USAGE;
    }
    if (mp_cli_plan_wanted(&o)) { /* --budget, --gpu, --graph-json, --batch max, ...: plan.c */
        int rc = mp_cmd_plan(&o);
        mp_cli_opts_free(&o);
        return rc;
    }

    int rc = MP_EXIT_USAGE;
    analysis a;
    char *out = NULL;
    size_t outlen = 0;
    if (mp_cli_step_load(&o, &a)) goto done;
    if (mp_cli_render(o.model, render, &a, o.json, &out, &outlen)) goto done;
    if (o.timeline && !is_svg(o.timeline) && mp_cli_write_timeline_csv(a.g, &a.sched, &a.mem, o.timeline)) goto done;
    if (write_step_pictures(&a)) goto done;
    rc = mp_cli_emit(out, outlen);
done:
    free(out);
    mp_cli_step_free(&a);
    mp_cli_opts_free(&o);
    return rc;
}
