/* plan_write.c - the training step as executed, its static offsets, and
 * plan.json (docs/plan-format.md). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/plan.h"
#include "frontend/infer.h"
#include "passes/arena.h"
#include "passes/lifetime.h"
#include "passes/offsets_verify.h"
#include "passes/remat.h"

const char *const mp_plan_loss_names[] = {"auto", "xent", "mse", "sum", NULL};
const char *const mp_plan_optimizer_names[] = {"sgd", "momentum", "adam", "adamw", "adafactor", NULL};
const char *const mp_plan_role_names[] = {"none",       "input", "param",            "buffer",    "const",
                                          "activation", "grad",  "opt_state",        "transient", NULL};
const char *const mp_plan_phase_names[] = {"forward", "loss", "backward", "optimizer", NULL};

const char *mp_plan_precision_name(mp_dtype t)
{
    return t == MP_BFLOAT16 ? "bf16" : t == MP_FLOAT16 ? "fp16" : "fp32";
}

mp_plan_opts mp_plan_defaults(void)
{
    mp_train_opts t = mp_train_defaults();
    mp_plan_opts o = {.batch = -1, .loss = t.loss, .optimizer = t.optimizer, .precision = t.precision,
                      .micro_batches = t.micro_batches, .budget_bytes = -1, .reserve_bytes = -1,
                      .arena_seconds = 1.0};
    snprintf(o.strategy, sizeof o.strategy, "none");
    return o;
}

int mp_plan_opts_string(const mp_plan_opts *o, char *buf, size_t n)
{
    size_t len = 0;
    int w = snprintf(buf, n, "batch=%" PRId64 ";dims=", o->batch);
    for (int i = 0; w >= 0 && (size_t)w < n - len && i < o->ndims; i++) {
        len += (size_t)w;
        w = snprintf(buf + len, n - len, "%s%s=%" PRId64, i ? "," : "", o->dim_names[i], o->dim_values[i]);
    }
    if (w < 0 || (size_t)w >= n - len) return -1;
    len += (size_t)w;
    w = snprintf(buf + len, n - len, ";loss=%s;optimizer=%s;precision=%s;micro_batches=%d;strategy=%s;budget=%" PRId64
                 ";reserve=%" PRId64, mp_plan_loss_names[o->loss], mp_plan_optimizer_names[o->optimizer],
                 mp_plan_precision_name(o->precision), o->micro_batches, o->strategy, o->budget_bytes,
                 o->reserve_bytes);
    /* each only when set: older plans keep their fingerprints */
    if (w >= 0 && (size_t)w < n - len && o->topo_sort) {
        len += (size_t)w;
        w = snprintf(buf + len, n - len, ";topo_sort=1");
    }
    if (w >= 0 && (size_t)w < n - len && o->constants_as_params) {
        len += (size_t)w;
        w = snprintf(buf + len, n - len, ";constants_as_params=1");
    }
    if (w >= 0 && (size_t)w < n - len && o->optimizer_in_backward) {
        len += (size_t)w;
        w = snprintf(buf + len, n - len, ";optimizer_in_backward=1");
    }
    if (w >= 0 && (size_t)w < n - len && (o->params_as_inputs || o->data_inputs[0] || o->buffers[0])) {
        len += (size_t)w;
        w = snprintf(buf + len, n - len, ";params_as_inputs=%d;data_inputs=%s;buffers=%s", o->params_as_inputs,
                     o->data_inputs, o->buffers);
    }
    return w < 0 || (size_t)w >= n - len ? -1 : 0;
}

uint64_t mp_plan_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

int mp_plan_hash_file(const char *path, uint64_t *hash, int64_t *size, mp_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return mp_fail(err, "%s: %s", path, strerror(errno));
    uint64_t h = MP_PLAN_FNV_INIT;
    int64_t total = 0;
    static unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = mp_plan_fnv1a(h, buf, got), total += (int64_t)got;
    int bad = ferror(f);
    fclose(f);
    if (bad) return mp_fail(err, "%s: read error", path);
    *hash = h;
    *size = total;
    return 0;
}

uint64_t mp_plan_fingerprint(uint64_t model_hash, const mp_plan_opts *o)
{
    char s[8192];
    int n = snprintf(s, sizeof s, "%016" PRIx64 "|", model_hash);
    if (mp_plan_opts_string(o, s + n, sizeof s - (size_t)n)) s[n] = 0;
    return mp_plan_fnv1a(MP_PLAN_FNV_INIT, s, strlen(s));
}

/* ---- seeded contents ------------------------------------------------------------ */

/* The exclusive upper bound (at most `bound`) an integer value must stay
 * under to be a valid index for every node that reads it as one: Gather's
 * indices (the length of the gathered axis), a loss's labels (the class
 * count), looking through the reshapes between (the loss flattens labels). */
static int64_t index_bound(const mp_graph *g, int32_t id, int64_t bound, int depth)
{
    const mp_value *v = &g->values[id];
    for (int32_t c = 0; c < v->ncons; c++) {
        const mp_node *n = &g->nodes[v->cons[c]];
        static const char *const reshapes[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
        for (size_t r = 0; r < sizeof reshapes / sizeof *reshapes; r++)
            if (!strcmp(n->op_type, reshapes[r]) && n->in[0] == id && n->nout > 0 && n->out[0] >= 0 && depth < 8)
                bound = index_bound(g, n->out[0], bound, depth + 1);
        const mp_value *data = n->nin > 0 && n->in[0] >= 0 ? &g->values[n->in[0]] : NULL;
        if (!data || n->nin < 2 || n->in[1] != id) continue;
        int64_t axis = -1;
        if (!strcmp(n->op_type, "Gather")) axis = mp_attr_int(n, "axis", 0);
        else if (!strcmp(n->op_type, "SoftmaxCrossEntropyLoss") || !strcmp(n->op_type, "NegativeLogLikelihoodLoss")) axis = 1;
        else continue;
        if (axis < 0) axis += data->rank;
        if (axis >= 0 && axis < data->rank && data->dims[axis].v > 0 && data->dims[axis].v < bound)
            bound = data->dims[axis].v;
    }
    return bound;
}

/* The fan-in of a weight, from the node that reads it: MatMul's B [.., K, N]
 * and Gemm's B ([K, N], or [N, K] with transB) reduce over K; otherwise the
 * first axis is the output one, as in PyTorch's Linear [out, in] and Conv
 * [out, in/groups, k..] (0 when the value is not a matrix or filter). */
static int64_t fan_in(const mp_graph *g, int32_t id)
{
    const mp_value *v = &g->values[id];
    if (v->rank < 2 || v->dims[0].v <= 0) return 0;
    int64_t numel = 1;
    for (int i = 0; i < v->rank; i++) numel *= v->dims[i].v > 0 ? v->dims[i].v : 1;
    for (int32_t c = 0; c < v->ncons; c++) {
        const mp_node *n = &g->nodes[v->cons[c]];
        if (n->nin < 2 || n->in[1] != id) continue;
        if (!strcmp(n->op_type, "MatMul")) return v->dims[v->rank - 2].v;
        if (!strcmp(n->op_type, "Gemm") && v->rank == 2) return v->dims[mp_attr_int(n, "transB", 0) ? 1 : 0].v;
    }
    return numel / v->dims[0].v;
}

double mp_plan_seed_range(const mp_graph *g, int32_t v)
{
    const mp_value *val = &g->values[v];
    if (!mp_dtype_is_float(val->dtype)) return (double)index_bound(g, v, 10, 0);
    /* a master copy is seeded as its working copy, which the GEMM reads */
    size_t len = strlen(val->name);
    bool master = len > 7 && !strcmp(val->name + len - 7, ".master");
    char base[512];
    snprintf(base, sizeof base, "%.*s", master ? (int)len - 7 : (int)len, val->name);
    int32_t w = master ? mp_graph_find(g, base) : v;
    int64_t fan = w >= 0 && (val->role == MP_ROLE_PARAM || master) ? fan_in(g, w) : 0;
    return fan > 0 ? 1.0 / sqrt((double)fan) : 0.1;
}

/* ---- the step as executed ------------------------------------------------------- */

int mp_plan_step_outputs(mp_graph *g, mp_err *err)
{
    int32_t *keep = mp_arena_alloc(g->arena, (size_t)(g->nnodes + 1) * sizeof *keep), n = 0, loss = -1;
    if (!keep) return mp_fail(err, "out of memory");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].phase == MP_PHASE_LOSS && g->nodes[i].nout) loss = g->nodes[i].out[0];
    if (loss < 0) return mp_fail(err, "the training step has no loss");
    keep[n++] = loss;
    /* the gradient each in-place update reads (not fp16's gradient check, nor its loss scale update's flag);
     * when updates run inside the backward (--optimizer-in-backward) each frees its gradient, which kept to the
     * end would undo that: then the updated parameters, resident anyway, are what is checked */
    int32_t last_backward = -1;
    bool inside = false;
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].phase == MP_PHASE_BACKWARD) last_backward = i;
    for (int32_t i = 0; i < last_backward; i++) inside |= g->nodes[i].phase == MP_PHASE_OPTIMIZER;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *nd = &g->nodes[i];
        bool update = nd->phase == MP_PHASE_OPTIMIZER && nd->nin > 1 && nd->nout && g->values[nd->out[0]].alias >= 0;
        int32_t v = update && g->values[nd->in[1]].role == MP_ROLE_GRAD ? (inside ? nd->out[0] : nd->in[1]) : -1;
        bool dup = false;
        for (int32_t k = 0; k < n && !dup; k++) dup = keep[k] == v;
        if (v >= 0 && !dup) keep[n++] = v;
    }
    for (int32_t k = 0; k < g->noutputs; k++)
        if (g->outputs[k] >= 0) g->values[g->outputs[k]].flags &= ~(uint32_t)MP_VAL_OUTPUT;
    for (int32_t k = 0; k < n; k++) g->values[keep[k]].flags |= MP_VAL_OUTPUT;
    g->outputs = keep;
    g->noutputs = n;
    return mp_train_share_buffers(g, err); /* the model's outputs may now die in the loss */
}

/* A comma-separated list as train.h takes it (NULL-terminated, in g's
 * arena); NULL for "". */
static const char *const *name_list(mp_graph *g, const char *list)
{
    if (!*list) return NULL;
    const char **names = mp_arena_alloc(g->arena, (strlen(list) + 2) * sizeof *names); /* one per byte at most */
    if (!names) return NULL;
    int n = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len) names[n++] = mp_arena_strndup(g->arena, p, len);
        p += len + (p[len] == ',');
    }
    names[n] = NULL;
    return names;
}

mp_model *mp_plan_step_new(const char *path, const mp_plan_opts *o, mp_schedule *s, mp_err *err)
{
    s->order = NULL;
    s->n = 0;
    mp_onnx_opts lo = {.topo_sort = o->topo_sort};
    mp_model *m = mp_onnx_load_with(path, &lo, err);
    if (!m) return NULL;
    mp_graph *g = m->graph;
    const char *names[MP_PLAN_MAX_DIMS];
    for (int i = 0; i < o->ndims; i++) names[i] = o->dim_names[i];
    mp_bindings b = {.batch = o->batch, .nnamed = o->ndims, .names = names, .values = o->dim_values};
    mp_train_opts t = mp_train_defaults();
    t.loss = o->loss;
    t.optimizer = o->optimizer;
    t.precision = o->precision;
    t.micro_batches = o->micro_batches;
    t.params_as_inputs = o->params_as_inputs;
    t.constants_as_params = o->constants_as_params;
    t.optimizer_in_backward = o->optimizer_in_backward;
    t.data_inputs = name_list(g, o->data_inputs);
    t.buffers = name_list(g, o->buffers);
    if (mp_bind_dims(g, &b, err) || mp_infer(g, err) || mp_train_build(g, &t, err)) goto fail;
    if (mp_plan_step_outputs(g, err) || mp_schedule_graph_order(g, s, err)) goto fail;
    return m;
fail:
    mp_onnx_close(m);
    return NULL;
}

/* ---- offsets ----------------------------------------------------------------------- */

int mp_plan_offsets(const mp_graph *g, const mp_schedule *s, int64_t budget, const mp_plan_opts *o, int64_t *offsets,
                    mp_plan_info *info, mp_err *err)
{
    mp_lifetimes lt;
    if (mp_lifetime_compute(g, s, &lt, err)) return -1;
    int32_t nv = g->nvalues, nb = 0;
    mp_arena_buf *bufs = calloc((size_t)(nv ? nv : 1), sizeof *bufs);
    int32_t *of = calloc((size_t)(nv ? nv : 1), sizeof *of);
    int64_t *off = calloc((size_t)(nv ? nv : 1), sizeof *off);
    int rc = -1;
    if (!bufs || !of || !off) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t v = 0; v < nv; v++) {
        offsets[v] = -1;
        if (lt.owner[v] != v || lt.start[v] < 0) continue;
        bool whole = lt.persistent[v];
        bufs[nb] = (mp_arena_buf){.lower = whole ? 0 : lt.start[v], .upper = whole ? s->n : lt.end[v] + 1,
                                  .size = lt.bytes[v], .name = g->values[v].name};
        if (bufs[nb].upper <= bufs[nb].lower) bufs[nb].upper = bufs[nb].lower + 1;
        of[nb++] = v;
    }
    mp_arena_opts ao = mp_arena_defaults();
    ao.time_limit = o->arena_seconds;
    ao.target = o->arena_target;
    ao.cancel = o->arena_cancel;
    ao.target_only = o->arena_target_only;
    if (o->arena_work > 0) { /* the work, not the clock: time is only a safety net, far above what it takes */
        ao.work_limit = o->arena_work;
        ao.time_limit = 30 * o->arena_seconds;
    }
    mp_arena_result r;
    if (mp_arena_assign(bufs, nb, &ao, off, &r, err)) goto done;
    /* the arena ends where the highest buffer does: the last one needs no padding */
    int64_t arena = 0;
    for (int32_t i = 0; i < nb; i++)
        if (bufs[i].size > 0 && off[i] + bufs[i].size > arena) arena = off[i] + bufs[i].size;
    info->arena_bytes = arena; /* also when over the budget: the caller may plan again below it */
    info->lower_bound = r.lower_bound;
    if (mp_offsets_verify(bufs, nb, off, arena, budget, err)) goto done;
    for (int32_t i = 0; i < nb; i++) offsets[of[i]] = off[i];
    for (int32_t v = 0; v < nv; v++)
        if (lt.owner[v] != v && offsets[lt.owner[v]] >= 0) offsets[v] = offsets[lt.owner[v]];
    info->nbuffers = nb;
    rc = 0;
done:
    free(bufs);
    free(of);
    free(off);
    mp_lifetime_free(&lt);
    return rc;
}

/* ---- plan.json ----------------------------------------------------------------------- */

static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void put_ids(FILE *f, const int32_t *ids, int32_t n, const int64_t *offsets)
{
    fputc('[', f);
    int first = 1;
    for (int32_t k = 0; k < n; k++) {
        if (ids[k] < 0 || offsets[ids[k]] < 0) continue; /* absent optional, or no memory */
        fprintf(f, "%s%d", first ? "" : ", ", ids[k]);
        first = 0;
    }
    fputc(']', f);
}

static void write_json(FILE *f, const char *model_path, const char *abs, int64_t size, uint64_t hash,
                       const mp_plan_opts *o, const mp_graph *g, const mp_schedule *s, const int64_t *offsets,
                       const mp_plan_info *info, const mp_lifetimes *lt)
{
    fprintf(f, "{\n  \"format\": \"memplan-plan\",\n  \"version\": %d,\n  \"model\": {\"path\": ", MP_PLAN_VERSION);
    put_str(f, model_path);
    fprintf(f, ", \"absolute\": ");
    put_str(f, abs);
    fprintf(f, ", \"size\": %" PRId64 ", \"fnv1a64\": \"%016" PRIx64 "\"},\n", size, hash);
    fprintf(f, "  \"options\": {\"batch\": %" PRId64 ", \"dims\": {", o->batch);
    for (int i = 0; i < o->ndims; i++) {
        fprintf(f, "%s", i ? ", " : "");
        put_str(f, o->dim_names[i]);
        fprintf(f, ": %" PRId64, o->dim_values[i]);
    }
    fprintf(f, "}, \"loss\": \"%s\", \"optimizer\": \"%s\", \"precision\": \"%s\", \"micro_batches\": %d, ",
            mp_plan_loss_names[o->loss], mp_plan_optimizer_names[o->optimizer], mp_plan_precision_name(o->precision),
            o->micro_batches);
    fprintf(f, "\"strategy\": ");
    put_str(f, o->strategy);
    fprintf(f, ", \"budget_bytes\": %" PRId64 ", \"reserve_bytes\": %" PRId64 ", \"topo_sort\": %s",
            o->budget_bytes, o->reserve_bytes, o->topo_sort ? "true" : "false");
    fprintf(f, ", \"params_as_inputs\": %s, \"constants_as_params\": %s, \"optimizer_in_backward\": %s, \"data_inputs\": ",
            o->params_as_inputs ? "true" : "false", o->constants_as_params ? "true" : "false",
            o->optimizer_in_backward ? "true" : "false");
    put_str(f, o->data_inputs);
    fprintf(f, ", \"buffers\": ");
    put_str(f, o->buffers);
    fprintf(f, "},\n");
    fprintf(f, "  \"fingerprint\": \"%016" PRIx64 "\",\n", mp_plan_fingerprint(hash, o));
    fprintf(f, "  \"devices\": [{\"arena_bytes\": %" PRId64 ", \"lower_bound_bytes\": %" PRId64 "}],\n",
            info->arena_bytes, info->lower_bound);
    fprintf(f, "  \"tensors\": [");
    int first = 1;
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        if (offsets[v] < 0) continue;
        int32_t ow = lt->owner[v];
        bool whole = lt->persistent[ow];
        fprintf(f, "%s\n    {\"id\": %d, \"name\": ", first ? "" : ",", v);
        put_str(f, val->name);
        fprintf(f, ", \"dtype\": \"%s\", \"shape\": [", mp_dtype_name(val->dtype));
        for (int i = 0; i < val->rank; i++) fprintf(f, "%s%" PRId64, i ? ", " : "", val->dims[i].v);
        fprintf(f, "], \"bytes\": %" PRId64 ", \"offset\": %" PRId64 ", \"role\": \"%s\", \"recomputed\": %s, ",
                val->bytes, offsets[v], mp_plan_role_names[val->role],
                val->flags & MP_VAL_RECOMPUTED ? "true" : "false");
        if (ow != v) {
            fprintf(f, "\"alias_of\": ");
            put_str(f, g->values[ow].name);
            fprintf(f, ", ");
        }
        if (val->flags & MP_VAL_TVIEW) fprintf(f, "\"transposed_view\": true, ");
        fprintf(f, "\"live\": [%d, %d]}", whole ? 0 : lt->start[ow], whole ? s->n - 1 : lt->end[ow]);
        first = 0;
    }
    fprintf(f, "\n  ],\n  \"instructions\": [");
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        /* the node it was cloned from: "X@r" recomputes X, "X@view" re-takes view X */
        char src[512];
        snprintf(src, sizeof src, "%s", n->name ? n->name : "");
        char *at = strrchr(src, '@');
        bool view_clone = at && !strcmp(at, "@view"), rec = at && !strcmp(at, "@r");
        if (view_clone || rec) *at = 0;
        fprintf(f, "%s\n    {\"step\": %d, \"node\": ", i ? "," : "", i);
        put_str(f, n->name);
        fprintf(f, ", \"source\": ");
        put_str(f, src);
        fprintf(f, ", \"op\": ");
        put_str(f, n->op_type);
        fprintf(f, ", \"phase\": \"%s\", \"recompute\": %s, \"view_clone\": %s, \"inputs\": ",
                mp_plan_phase_names[n->phase], rec ? "true" : "false", view_clone ? "true" : "false");
        put_ids(f, n->in, n->nin, offsets);
        fprintf(f, ", \"outputs\": ");
        put_ids(f, n->out, n->nout, offsets);
        fprintf(f, ", \"collectives\": []}");
    }
    fprintf(f, "\n  ]\n}\n");
}

static int write_plan(const char *dir, const char *model_path, const mp_plan_opts *o, const mp_graph *g,
                      const mp_schedule *s, int64_t budget, bool cuda, mp_plan_info *info, mp_err *err)
{
    info->nbuffers = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const char *nm = g->nodes[s->order[i]].name;
        if (!nm || !*nm) return mp_fail(err, "plan: node %d (%s) has no name", s->order[i], g->nodes[s->order[i]].op_type);
    }
    uint64_t hash;
    int64_t size;
    if (mp_plan_hash_file(model_path, &hash, &size, err)) return -1;
    char abs[PATH_MAX];
    if (!realpath(model_path, abs)) return mp_fail(err, "%s: %s", model_path, strerror(errno));
    if (mkdir(dir, 0777) && errno != EEXIST) return mp_fail(err, "%s: %s", dir, strerror(errno));
    int64_t *offsets = malloc((size_t)(g->nvalues ? g->nvalues : 1) * sizeof *offsets);
    if (!offsets) return mp_fail(err, "out of memory");
    mp_lifetimes lt;
    int rc = -1;
    bool have_lt = false, written = false;
    if (mp_plan_offsets(g, s, budget, o, offsets, info, err) || mp_lifetime_compute(g, s, &lt, err)) goto done;
    have_lt = true;
    char tmp[PATH_MAX], final[PATH_MAX];
    if (snprintf(final, sizeof final, "%s/plan.json", dir) >= (int)sizeof final ||
        snprintf(tmp, sizeof tmp, "%s/.plan.json.%ld.tmp", dir, (long)getpid()) >= (int)sizeof tmp) {
        mp_fail(err, "%s: path too long", dir);
        goto done;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        mp_fail(err, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    write_json(f, model_path, abs, size, hash, o, g, s, offsets, info, &lt);
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad) {
        remove(tmp);
        mp_fail(err, "%s: write error", tmp);
        goto done;
    }
    if (rename(tmp, final)) {
        remove(tmp);
        mp_fail(err, "%s: %s", final, strerror(errno));
        goto done;
    }
    written = true;
    rc = cuda ? mp_plan_write_cuda(dir, g, s, offsets, info, err) : 0;
done:
    if (!written) info->nbuffers = 0; /* tells the caller no plan.json was written */
    if (have_lt) mp_lifetime_free(&lt);
    free(offsets);
    return rc;
}

int mp_plan_write(const char *dir, const char *model_path, const mp_plan_opts *o, const mp_graph *g,
                  const mp_schedule *s, int64_t budget, mp_plan_info *info, mp_err *err)
{
    return write_plan(dir, model_path, o, g, s, budget, false, info, err);
}

int mp_plan_emit(const char *dir, const char *model_path, const mp_plan_opts *o, const mp_rsched *rs,
                 int64_t budget, bool cuda, mp_plan_info *info, mp_err *err)
{
    mp_schedule s, applied = {0};
    mp_model *m = mp_plan_step_new(model_path, o, &s, err);
    if (!m) return -1;
    int rc = mp_remat_apply(m->graph, &s, rs, &applied, err) ||
             write_plan(dir, model_path, o, m->graph, &applied, budget, cuda, info, err) ? -1 : 0;
    mp_schedule_free(&applied);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    return rc;
}

int mp_plan_measure(const char *model_path, const mp_plan_opts *o, const mp_rsched *rs, mp_plan_info *info,
                    mp_err *err)
{
    mp_schedule s, applied = {0};
    mp_model *m = mp_plan_step_new(model_path, o, &s, err);
    if (!m) return -1;
    int64_t *offsets = NULL;
    int rc = -1;
    if (!mp_remat_apply(m->graph, &s, rs, &applied, err)) { /* which adds the recomputed copies */
        offsets = malloc((size_t)(m->graph->nvalues + 1) * sizeof *offsets);
        if (!offsets) mp_fail(err, "out of memory");
        else if (!mp_plan_offsets(m->graph, &applied, -1, o, offsets, info, err)) rc = 0;
    }
    free(offsets);
    mp_schedule_free(&applied);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    return rc;
}
