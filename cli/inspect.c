/* inspect.c - `memplan inspect`: what a model holds (ops, parameters, buffers,
 * inputs, outputs, largest tensors), as text or JSON (docs/json.md).
 *
 * The value roles (parameter, buffer, constant, ...) are the training pass's
 * (mp_train_classify), so inspect counts what the memory command trains; the
 * JSON members written here head the memory command's object too. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

#define INSPECT_OPTS                                                                                                 \
    (MP_OPT_BIT(BATCH) | MP_OPT_BIT(DIM) | MP_OPT_BIT(JSON) | MP_OPT_BIT(PARAMS_AS_INPUTS) | MP_OPT_BIT(DATA_INPUTS) | \
     MP_OPT_BIT(BUFFERS) | MP_OPT_BIT(CONSTANTS_AS_PARAMS) | MP_OPT_BIT(NO_INFER) | MP_OPT_BIT(TOPO_SORT))
#define LARGEST_N 10

const char *const mp_role_names[MP_ROLE_COUNT] = {
    [MP_ROLE_ACTIVATION] = "activation", [MP_ROLE_INPUT] = "input",       [MP_ROLE_PARAM] = "parameter",
    [MP_ROLE_BUFFER] = "buffer",         [MP_ROLE_CONST] = "constant",
    [MP_ROLE_NONE] = "none", [MP_ROLE_GRAD] = "gradient", [MP_ROLE_OPT_STATE] = "optimizer_state",
    [MP_ROLE_TRANSIENT] = "transient",
};
const char *const mp_buffer_why_names[MP_BUF_WHY_COUNT] = {
    [MP_BUF_NONE] = "none",
    [MP_BUF_BATCHNORM] = "batchnorm_running_stats",
    [MP_BUF_CROPPED_TABLE] = "cropped_table",
    [MP_BUF_NAMED] = "named",
};

/* ---- classification: mp_train_classify, plus what the command line adds ---- */

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }
static bool node_is(const mp_node *n, const char *op) { return is_default_domain(n->domain) && !strcmp(n->op_type, op); }

/* A comma-separated list as train.h takes it: NULL-terminated, in g's arena. */
struct name_list {
    mp_graph *g;
    const char **names;
    int n;
};

static int collect_name(const char *name, size_t len, void *ctx)
{
    struct name_list *l = ctx;
    l->names[l->n++] = mp_arena_strndup(l->g->arena, name, len);
    return 0;
}

static const char *const *name_list(mp_graph *g, const char *list)
{
    if (!list) return NULL;
    /* at most one name per byte of the list, plus the NULL */
    struct name_list l = {g, mp_arena_alloc(g->arena, (strlen(list) + 2) * sizeof(char *)), 0};
    mp_cli_list_each(list, collect_name, &l);
    return l.names;
}

mp_train_opts mp_cli_train_opts(mp_graph *g, const mp_cli_opts *o)
{
    mp_train_opts t = mp_train_defaults();
    t.params_as_inputs = o->params_as_inputs;
    t.constants_as_params = o->constants_as_params;
    t.optimizer_in_backward = o->optimizer_in_backward;
    t.data_inputs = name_list(g, o->data_inputs);
    t.buffers = name_list(g, o->buffers);
    return t;
}

struct name_check {
    const mp_graph *g;
    const char *option;
    mp_err *err;
    bool want_input;     /* --data-inputs: must be a graph input; --buffers: an initializer or parameter input */
};

static int check_name(const char *name, size_t len, void *ctx)
{
    struct name_check *c = ctx;
    for (int32_t i = 0; i < c->g->nvalues; i++) {
        const mp_value *v = &c->g->values[i];
        if (strlen(v->name) != len || strncmp(v->name, name, len)) continue;
        if (c->want_input ? (v->flags & MP_VAL_INPUT) != 0
                          : v->producer < 0 && v->role != MP_ROLE_ACTIVATION && v->role != MP_ROLE_INPUT)
            return 0;
    }
    int shown = len < 200 ? (int)len : 200;
    return mp_fail(c->err, "%s: the model has no %s '%.*s'", c->option,
                   c->want_input ? "graph input" : "initializer or parameter input", shown, name);
}

/* Why each buffer is one, in the order the rules override each other: a name
 * given with --buffers, then BatchNorm statistics, else a cropped table (the
 * only other rule that makes buffers). */
static int buffer_whys(const mp_graph *g, const mp_cli_opts *o, uint8_t *why, mp_err *err)
{
    bool *bn = calloc((size_t)g->nvalues + 1, sizeof *bn);
    if (!bn) return mp_fail(err, "out of memory");
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (!node_is(n, "BatchNormalization")) continue;
        for (int k = 3; k <= 4 && k < n->nin; k++)
            if (n->in[k] >= 0) bn[n->in[k]] = true;
    }
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        if (v->role != MP_ROLE_BUFFER) why[i] = MP_BUF_NONE;
        else if (mp_cli_list_has(o->buffers, v->name)) why[i] = MP_BUF_NAMED;
        else why[i] = bn[i] ? MP_BUF_BATCHNORM : MP_BUF_CROPPED_TABLE;
    }
    free(bn);
    return 0;
}

int mp_cli_classify(mp_graph *g, const mp_cli_opts *o, uint8_t *why, mp_err *err)
{
    struct name_check chk = {g, "--data-inputs", err, true};
    if (o->data_inputs && mp_cli_list_each(o->data_inputs, check_name, &chk)) return -1;
    mp_train_opts t = mp_cli_train_opts(g, o);
    mp_err inner = {{0}};
    if (mp_train_classify(g, &t, &inner)) { /* its messages name train.h's fields: say which flag helps */
        static const char field[] = "params_as_inputs: ";
        if (strncmp(inner.msg, field, sizeof field - 1)) return mp_fail(err, "%s", inner.msg);
        return mp_fail(err, "--params-as-inputs: %s: name them with --data-inputs", inner.msg + sizeof field - 1);
    }
    /* checked on the roles: a parameter input is one only after classification */
    chk = (struct name_check){g, "--buffers", err, false};
    if (o->buffers && mp_cli_list_each(o->buffers, check_name, &chk)) return -1;
    return why ? buffer_whys(g, o, why, err) : 0;
}

/* ---- the summary ---------------------------------------------------------- */

typedef struct tally {
    int64_t tensors, count, bytes;  /* count: elements (PyTorch's numel) */
    int64_t unsized;                /* tensors whose shape is not fully known (not in count/bytes) */
} tally;

typedef struct role_sum {
    tally all;
    tally by_dtype[MP_DTYPE_COUNT];
    int64_t why[MP_BUF_WHY_COUNT];
} role_sum;

typedef struct op_count {
    const char *key;                /* "Conv", or "domain:Op" outside ai.onnx (in g's arena) */
    int64_t n;
} op_count;

/* A value as summarized: the memory command builds the training step on the
 * same graph afterwards, which adds inputs and may lower dtypes. */
typedef struct shown_value {
    mp_value v;                     /* name, kind, dtype, rank, bytes; dims point to dims[] */
    mp_dim dims[MP_MAX_RANK];
    uint8_t role;
    const char *producer;           /* node name, NULL for inputs and initializers */
} shown_value;

struct mp_cli_summary {
    const mp_cli_opts *o;
    const mp_graph *g;              /* header, opsets, symbols: the step leaves them as they are */
    int32_t nnodes;
    int64_t nodes_total;
    role_sum roles[MP_ROLE_COUNT];
    role_sum constant_nodes;        /* outputs of Constant nodes (some exporters store weights so) */
    op_count *ops;
    int nops;
    shown_value *inputs;            /* the graph inputs that are data (role input) */
    int32_t ninputs, ninputs_all;
    shown_value *outputs;
    int32_t noutputs;
    shown_value largest[LARGEST_N];
    int nlargest;
    int64_t unsized;                /* values not ranked among the largest */
};

/* What inspect calls a value: a node's output is an activation (a Constant's
 * too: constant_nodes counts those), anything else has its classified role. */
static uint8_t shown_role(const mp_graph *g, int32_t v)
{
    const mp_value *x = &g->values[v];
    return x->producer >= 0 ? MP_ROLE_ACTIVATION : (uint8_t)x->role;
}

static void show_value(shown_value *sv, const mp_graph *g, int32_t id)
{
    const mp_value *v = &g->values[id];
    sv->v = *v;
    sv->v.rank = v->rank > MP_MAX_RANK ? -1 : v->rank;
    if (sv->v.rank > 0) memcpy(sv->dims, v->dims, (size_t)sv->v.rank * sizeof *sv->dims);
    sv->v.dims = sv->dims;
    sv->role = shown_role(g, id);
    sv->producer = v->producer >= 0 && v->producer < g->nnodes ? g->nodes[v->producer].name : NULL;
}

static void tally_add(tally *t, const mp_value *v)
{
    int64_t n = mp_value_numel(v);
    t->tensors++;
    if (n < 0 || v->bytes < 0 || !mp_add_ok(t->count, n, &t->count) || !mp_add_ok(t->bytes, v->bytes, &t->bytes))
        t->unsized++;
}

static int cmp_ops(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int count_ops(mp_cli_summary *s, mp_graph *g)
{
    s->ops = calloc((size_t)g->nnodes + 1, sizeof *s->ops);
    if (!s->ops) return -1;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        char key[256];
        if (is_default_domain(n->domain))
            snprintf(key, sizeof key, "%s", n->op_type);
        else
            snprintf(key, sizeof key, "%s:%s", n->domain, n->op_type);
        int k = 0;
        while (k < s->nops && strcmp(s->ops[k].key, key)) k++;
        if (k == s->nops) s->ops[s->nops++].key = mp_arena_strdup(g->arena, key);
        s->ops[k].n++;
    }
    qsort(s->ops, (size_t)s->nops, sizeof *s->ops, cmp_ops);
    return 0;
}

/* Keeps the LARGEST_N biggest sized values, biggest first, ties by id. */
static void rank_largest(mp_cli_summary *s, const mp_graph *g)
{
    int32_t top[LARGEST_N];
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        if (v->bytes < 0 || v->dtype == MP_UNDEFINED) {
            s->unsized++;
            continue;
        }
        int k = s->nlargest;
        while (k > 0 && g->values[top[k - 1]].bytes < v->bytes) k--;
        if (k == LARGEST_N) continue;
        int last = s->nlargest < LARGEST_N ? s->nlargest++ : LARGEST_N - 1;
        memmove(&top[k + 1], &top[k], (size_t)(last - k) * sizeof *top);
        top[k] = i;
    }
    for (int i = 0; i < s->nlargest; i++) show_value(&s->largest[i], g, top[i]);
}

/* Nodes of g plus those of every If/Loop/Scan body in it, at any depth (the
 * importer bounds the nesting). */
static int64_t count_nodes_total(const mp_graph *g)
{
    int64_t n = g->nnodes;
    for (int32_t i = 0; i < g->nnodes; i++)
        for (int32_t a = 0; a < g->nodes[i].nattrs; a++) {
            const mp_attr *at = &g->nodes[i].attrs[a];
            if (at->type == MP_ATTR_GRAPH || at->type == MP_ATTR_GRAPHS)
                for (int32_t k = 0; k < at->n; k++) n += count_nodes_total(at->graphs[k]);
        }
    return n;
}

static int summarize(mp_cli_summary *s, mp_graph *g, const uint8_t *why)
{
    s->g = g;
    s->nnodes = g->nnodes;
    s->nodes_total = count_nodes_total(g);
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        role_sum *r = &s->roles[shown_role(g, i)];
        mp_dtype t = mp_dtype_valid(v->dtype) ? v->dtype : MP_UNDEFINED;
        tally_add(&r->all, v);
        tally_add(&r->by_dtype[t], v);
        r->why[why[i] < MP_BUF_WHY_COUNT ? why[i] : MP_BUF_NONE]++;
        if (v->producer >= 0 && v->producer < g->nnodes && node_is(&g->nodes[v->producer], "Constant")) {
            tally_add(&s->constant_nodes.all, v);
            tally_add(&s->constant_nodes.by_dtype[t], v);
        }
    }
    s->inputs = calloc((size_t)g->ninputs + 1, sizeof *s->inputs);
    s->outputs = calloc((size_t)g->noutputs + 1, sizeof *s->outputs);
    if (!s->inputs || !s->outputs) return -1;
    /* graph inputs that are parameters are left out (they can be hundreds) */
    s->ninputs_all = g->ninputs;
    for (int32_t i = 0; i < g->ninputs; i++)
        if (shown_role(g, g->inputs[i]) == MP_ROLE_INPUT) show_value(&s->inputs[s->ninputs++], g, g->inputs[i]);
    for (int32_t i = 0; i < g->noutputs; i++) show_value(&s->outputs[s->noutputs++], g, g->outputs[i]);
    rank_largest(s, g);
    return count_ops(s, g);
}

void mp_cli_summary_free(mp_cli_summary *s)
{
    if (!s) return;
    free(s->ops);
    free(s->inputs);
    free(s->outputs);
    free(s);
}

mp_cli_summary *mp_cli_summarize(const mp_cli_opts *o, mp_graph *g, const uint8_t *why)
{
    mp_cli_summary *s = calloc(1, sizeof *s);
    if (s) s->o = o;
    if (!s || summarize(s, g, why)) {
        mp_cli_summary_free(s);
        mp_cli_error("out of memory");
        return NULL;
    }
    return s;
}

/* ---- shared formatting -------------------------------------------------------- */

static const char *fmt_count(int64_t n, char buf[32])
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)n);
    int k = 0;
    for (int i = 0; i < len; i++) {
        buf[k++] = digits[i];
        int left = len - 1 - i;
        if (left > 0 && left % 3 == 0 && digits[i] != '-') buf[k++] = ',';
    }
    buf[k] = 0;
    return buf;
}

static const char *fmt_bytes(int64_t b, char buf[32])
{
    if (b < 1024)
        snprintf(buf, 32, "%lld B", (long long)b);
    else if (b < (1 << 20))
        snprintf(buf, 32, "%.1f KiB", b / 1024.0);
    else if (b < (INT64_C(1) << 30))
        snprintf(buf, 32, "%.2f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, 32, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    return buf;
}

static const char *domain_name(const char *d) { return is_default_domain(d) ? "ai.onnx" : d; }

static const char *kind_name(mp_value_kind k)
{
    static const char *const names[] = {"tensor", "sequence", "optional", "map", "sparse", "other"};
    return k >= 0 && k <= MP_KIND_OTHER ? names[k] : "other";
}

static const char *type_str(const mp_graph *g, const mp_value *v, char *buf, size_t n)
{
    if (v->kind == MP_KIND_TENSOR) return mp_value_type_str(g, v, buf, n);
    char inner[448];
    snprintf(buf, n, "%s(%s)", kind_name(v->kind), mp_value_type_str(g, v, inner, sizeof inner));
    return buf;
}

/* ---- text ------------------------------------------------------------------- */

static void text_tally(FILE *f, const char *label, const tally *t)
{
    char c[32], b[32];
    if (!t->tensors) {
        fprintf(f, "%-12snone\n", label);
        return;
    }
    fprintf(f, "%-12s%s in %lld tensor%s, %s", label, fmt_count(t->count, c), (long long)t->tensors,
            t->tensors == 1 ? "" : "s", fmt_bytes(t->bytes, b));
    if (t->unsized) fprintf(f, " (%lld of unknown size)", (long long)t->unsized);
    fputc('\n', f);
}

static void text_role(FILE *f, const char *label, const role_sum *r)
{
    text_tally(f, label, &r->all);
    for (int t = 0; t < MP_DTYPE_COUNT; t++) {
        if (!r->by_dtype[t].tensors) continue;
        char sub[32];
        snprintf(sub, sizeof sub, "  %s", mp_dtype_name(t));
        text_tally(f, sub, &r->by_dtype[t]);
    }
}

static void text_values(FILE *f, const mp_cli_summary *s, const char *label, const shown_value *vs, int32_t n,
                        int32_t hidden)
{
    int width = 0;
    for (int32_t i = 0; i < n; i++) {
        int w = (int)strlen(vs[i].v.name);
        if (w > width) width = w < 40 ? w : 40;
    }
    fprintf(f, "%s", label);
    if (hidden) fprintf(f, " (%lld more are parameters or buffers)", (long long)hidden);
    fputc('\n', f);
    for (int32_t i = 0; i < n; i++) {
        char t[512];
        fprintf(f, "  %-*s  %s\n", width, vs[i].v.name, type_str(s->g, &vs[i].v, t, sizeof t));
    }
}

static void print_text(FILE *f, const mp_cli_summary *s)
{
    const mp_graph *g = s->g;
    char c[32], b[32];
    fprintf(f, "%-12s%s\n", "model", s->o->model);
    fprintf(f, "%-12s%s%s%s\n", "producer", g->producer && *g->producer ? g->producer : "(none)",
            g->producer_version && *g->producer_version ? " " : "", g->producer_version ? g->producer_version : "");
    fprintf(f, "%-12s%lld\n", "ir_version", (long long)g->ir_version);
    fprintf(f, "%-12s", "opsets");
    for (int i = 0; i < g->nopsets; i++)
        fprintf(f, "%s%s %lld", i ? ", " : "", domain_name(g->opsets[i].domain), (long long)g->opsets[i].version);
    fputc('\n', f);
    if (g->nsymbols) {
        fprintf(f, "%-12s", "symbols");
        for (int i = 0; i < g->nsymbols; i++) {
            fprintf(f, "%s%s", i ? ", " : "", g->symbols[i]);
            if (g->symbol_values[i] >= 0) fprintf(f, "=%lld", (long long)g->symbol_values[i]);
            else fprintf(f, " (unbound)");
        }
        fputc('\n', f);
    }
    fprintf(f, "%-12s%s", "nodes", fmt_count(s->nnodes, c));
    if (s->nodes_total != s->nnodes) fprintf(f, " (%s with If/Loop/Scan bodies)", fmt_count(s->nodes_total, c));
    fputc('\n', f);
    int width = 0;
    for (int i = 0; i < s->nops; i++)
        if ((int)strlen(s->ops[i].key) > width) width = (int)strlen(s->ops[i].key);
    for (int i = 0; i < s->nops; i++) fprintf(f, "  %-*s  %s\n", width, s->ops[i].key, fmt_count(s->ops[i].n, c));

    text_role(f, "parameters", &s->roles[MP_ROLE_PARAM]);
    text_role(f, "buffers", &s->roles[MP_ROLE_BUFFER]);
    static const char *const why_text[MP_BUF_WHY_COUNT] = {
        [MP_BUF_BATCHNORM] = "BatchNorm running statistics",
        [MP_BUF_CROPPED_TABLE] = "tables cropped to the input (masks, caches)",
        [MP_BUF_NAMED] = "named by --buffers",
    };
    for (int w = 1; w < MP_BUF_WHY_COUNT; w++)
        if (s->roles[MP_ROLE_BUFFER].why[w])
            fprintf(f, "  %-10s%s: %lld\n", "why", why_text[w], (long long)s->roles[MP_ROLE_BUFFER].why[w]);
    text_role(f, "constants", &s->roles[MP_ROLE_CONST]);
    if (s->constant_nodes.all.tensors) text_role(f, "Constant op", &s->constant_nodes);
    text_values(f, s, "inputs", s->inputs, s->ninputs, s->ninputs_all - s->ninputs);
    text_values(f, s, "outputs", s->outputs, s->noutputs, 0);

    /* size and type first, aligned; the name (often long) last, then where it comes from */
    fprintf(f, "largest tensors\n");
    int tw = 4;
    char t[512];
    for (int i = 0; i < s->nlargest; i++) {
        int x = (int)strlen(type_str(g, &s->largest[i].v, t, sizeof t));
        if (x > tw) tw = x < 40 ? x : 40;
    }
    for (int i = 0; i < s->nlargest; i++) {
        const shown_value *sv = &s->largest[i];
        fprintf(f, "  %10s  %-*s  %s", fmt_bytes(sv->v.bytes, b), tw, type_str(g, &sv->v, t, sizeof t), sv->v.name);
        if (sv->producer) fprintf(f, "  <- %s\n", sv->producer);
        else fprintf(f, "  (%s)\n", mp_role_names[sv->role]);
    }
    if (s->unsized)
        fprintf(f, "  (%s tensor%s of unknown size not ranked%s)\n", fmt_count(s->unsized, c), s->unsized == 1 ? "" : "s",
                mp_unbound_symbol(g) ? ": bind the symbolic dims with --batch or --dim" : "");
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_tally_fields(mp_json *j, const tally *t)
{
    mp_json_key(j, "count");
    mp_json_int(j, t->count);
    mp_json_key(j, "tensors");
    mp_json_int(j, t->tensors);
    mp_json_key(j, "bytes");
    mp_json_int(j, t->bytes);
    mp_json_key(j, "unsized");
    mp_json_int(j, t->unsized);
}

static void json_role(mp_json *j, const char *key, const role_sum *r, bool with_why)
{
    mp_json_key(j, key);
    mp_json_begin_object(j);
    json_tally_fields(j, &r->all);
    mp_json_key(j, "by_dtype");
    mp_json_begin_object(j);
    for (int t = 0; t < MP_DTYPE_COUNT; t++) {
        if (!r->by_dtype[t].tensors) continue;
        mp_json_key(j, mp_dtype_name(t));
        mp_json_begin_object(j);
        json_tally_fields(j, &r->by_dtype[t]);
        mp_json_end(j);
    }
    mp_json_end(j);
    if (with_why) {
        mp_json_key(j, "why");
        mp_json_begin_object(j);
        for (int w = 1; w < MP_BUF_WHY_COUNT; w++) {
            mp_json_key(j, mp_buffer_why_names[w]);
            mp_json_int(j, r->why[w]);
        }
        mp_json_end(j);
    }
    mp_json_end(j);
}

static void json_shape(mp_json *j, const mp_graph *g, const mp_value *v)
{
    if (v->rank < 0) {
        mp_json_null(j);
        return;
    }
    const mp_graph *root = mp_graph_root((mp_graph *)g);
    mp_json_begin_inline_array(j);
    for (int i = 0; i < v->rank; i++) {
        mp_dim d = mp_dim_resolve(g, v->dims[i]);
        if (d.v >= 0) mp_json_int(j, d.v);
        else if (d.sym >= 0 && d.sym < root->nsymbols) mp_json_str(j, root->symbols[d.sym]);
        else mp_json_null(j);
    }
    mp_json_end(j);
}

static void json_value_fields(mp_json *j, const mp_graph *g, const mp_value *v)
{
    mp_json_key(j, "name");
    mp_json_str(j, v->name);
    if (v->kind != MP_KIND_TENSOR) {
        mp_json_key(j, "kind");
        mp_json_str(j, kind_name(v->kind));
    }
    mp_json_key(j, "dtype");
    mp_json_str(j, v->dtype == MP_UNDEFINED ? NULL : mp_dtype_name(v->dtype));
    mp_json_key(j, "shape");
    json_shape(j, g, v);
}

static void json_values(mp_json *j, const mp_cli_summary *s, const char *key, const shown_value *vs, int32_t n)
{
    mp_json_key(j, key);
    mp_json_begin_array(j);
    for (int32_t i = 0; i < n; i++) {
        mp_json_begin_object(j);
        json_value_fields(j, s->g, &vs[i].v);
        mp_json_end(j);
    }
    mp_json_end(j);
}

void mp_cli_summary_json(mp_json *j, const mp_cli_summary *s, const char *command)
{
    const mp_graph *g = s->g;
    mp_json_key(j, "memplan_version");
    mp_json_str(j, MEMPLAN_VERSION);
    mp_json_key(j, "command");
    mp_json_str(j, command);
    mp_json_key(j, "file");
    mp_json_str(j, s->o->model);
    mp_json_key(j, "inferred");
    mp_json_bool(j, !s->o->no_infer);

    mp_json_key(j, "model");
    mp_json_begin_object(j);
    mp_json_key(j, "ir_version");
    mp_json_int(j, g->ir_version);
    mp_json_key(j, "producer");
    mp_json_str(j, g->producer ? g->producer : "");
    mp_json_key(j, "producer_version");
    mp_json_str(j, g->producer_version ? g->producer_version : "");
    mp_json_key(j, "opsets");
    mp_json_begin_object(j);
    for (int i = 0; i < g->nopsets; i++) {
        mp_json_key(j, domain_name(g->opsets[i].domain));
        mp_json_int(j, g->opsets[i].version);
    }
    mp_json_end(j);
    mp_json_end(j);

    mp_json_key(j, "symbols");
    mp_json_begin_object(j);
    for (int i = 0; i < g->nsymbols; i++) {
        mp_json_key(j, g->symbols[i]);
        if (g->symbol_values[i] >= 0) mp_json_int(j, g->symbol_values[i]);
        else mp_json_null(j);
    }
    mp_json_end(j);

    mp_json_key(j, "nodes");
    mp_json_int(j, s->nnodes);
    mp_json_key(j, "nodes_total");
    mp_json_int(j, s->nodes_total);
    mp_json_key(j, "ops");
    mp_json_begin_object(j);
    for (int i = 0; i < s->nops; i++) {
        mp_json_key(j, s->ops[i].key);
        mp_json_int(j, s->ops[i].n);
    }
    mp_json_end(j);

    json_role(j, "parameters", &s->roles[MP_ROLE_PARAM], false);
    json_role(j, "buffers", &s->roles[MP_ROLE_BUFFER], true);
    json_role(j, "constants", &s->roles[MP_ROLE_CONST], false);
    json_role(j, "constant_nodes", &s->constant_nodes, false);
    json_values(j, s, "inputs", s->inputs, s->ninputs);
    json_values(j, s, "outputs", s->outputs, s->noutputs);

    mp_json_key(j, "largest_tensors");
    mp_json_begin_array(j);
    for (int i = 0; i < s->nlargest; i++) {
        const shown_value *sv = &s->largest[i];
        mp_json_begin_object(j);
        json_value_fields(j, g, &sv->v);
        mp_json_key(j, "bytes");
        mp_json_int(j, sv->v.bytes);
        mp_json_key(j, "role");
        mp_json_str(j, mp_role_names[sv->role]);
        mp_json_key(j, "producer");
        mp_json_str(j, sv->producer);
        mp_json_end(j);
    }
    mp_json_end(j);
    mp_json_key(j, "unsized_tensors");
    mp_json_int(j, s->unsized);
}

/* ---- the subcommand ------------------------------------------------------------ */

static int inspect_help(void)
{
    printf("usage: memplan inspect MODEL.onnx [options]\n\n"
           "Prints what an ONNX model holds: producer, IR version, opsets, node counts by op,\n"
           "parameters, buffers and constants (count and bytes by dtype), inputs and outputs\n"
           "with shapes (symbolic names while unbound) and the %d largest tensors.\n\n"
           "options:\n",
           LARGEST_N);
    mp_cli_print_options(stdout, INSPECT_OPTS);
    return MP_EXIT_OK;
}

/* Text or JSON, as the command asked. */
static int render(FILE *f, const void *ctx, bool json)
{
    const mp_cli_summary *s = ctx;
    if (!json) {
        print_text(f, s);
        return 0;
    }
    mp_json j;
    mp_json_init(&j, f, 2);
    mp_json_begin_object(&j);
    mp_cli_summary_json(&j, s, "inspect");
    mp_json_end(&j);
    return mp_json_finish(&j);
}

int mp_cmd_inspect(int argc, char **argv)
{
    mp_cli_opts o;
    int r = mp_cli_parse(argc, argv, INSPECT_OPTS, &o);
    if (r) return r < 0 ? MP_EXIT_USAGE : inspect_help();

    int rc = MP_EXIT_USAGE;
    mp_cli_summary *s = NULL;
    uint8_t *why = NULL;
    char *out = NULL;
    size_t outlen = 0;
    mp_model *m = mp_cli_load(&o);
    if (!m) goto done;
    why = malloc((size_t)m->graph->nvalues + 1);
    if (!why) {
        mp_cli_error("out of memory");
        goto done;
    }
    mp_err err = {{0}};
    if (mp_cli_classify(m->graph, &o, why, &err)) {
        mp_cli_model_error(o.model, err.msg);
        goto done;
    }
    if (mp_cli_bind_infer(m, &o)) goto done;
    if (!(s = mp_cli_summarize(&o, m->graph, why))) goto done;
    if (mp_cli_render(o.model, render, s, o.json, &out, &outlen)) goto done;
    rc = mp_cli_emit(out, outlen);
done:
    free(out);
    free(why);
    mp_cli_summary_free(s);
    if (m) mp_onnx_close(m);
    mp_cli_opts_free(&o);
    return rc;
}
