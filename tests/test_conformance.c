/* test_conformance.c - ONNX's backend test cases as shape-inference checks.
 *
 *   test_conformance [FILTER]          FILTER: substring of case names ("node/test_conv")
 *   MP_CONF_VERBOSE=1 test_conformance  also prints why each failing case failed (2: and each output compared)
 *   MP_CONF_NOFORK=1                    run cases in-process (for a debugger)
 *
 * For each case in ../shared/onnx-backend/{node,pytorch-converted,
 * pytorch-operator,simple} and the light models: import, bind each graph
 * input's data from input_K.pb as a known constant, forget every type the
 * file declares for node outputs, run mp_infer, and compare each graph
 * output's dtype and dims with output_K.pb. A case whose ops are not all in
 * the op table is skipped. Each case runs in a child process, so a crash or
 * hang in one rule is a failed case, not a dead runner. Exits non-zero when
 * a supported case fails.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "frontend/wire.h"
#include "ir/ops.h"
#include "test_files.h" /* defines: read_file, exists */

#define MAX_OPS 64     /* distinct ops per case */
#define MAX_TABLE 1024 /* distinct ops overall */
#define CASE_TIMEOUT_S 20

typedef struct op_key {
    char name[64];
    char domain[48];
} op_key;

typedef struct op_row {
    op_key key;
    int passed, failed, skipped;
    bool supported;
} op_row;

static op_row table[MAX_TABLE];
static int ntable;
static int verbose; /* MP_CONF_VERBOSE: 1 failures, 2 also each output compared */

static op_row *row_of(const op_key *k)
{
    for (int i = 0; i < ntable; i++)
        if (!strcmp(table[i].key.name, k->name) && !strcmp(table[i].key.domain, k->domain)) return &table[i];
    if (ntable == MAX_TABLE) return NULL;
    table[ntable].key = *k;
    return &table[ntable++];
}

/* ---- files -------------------------------------------------------------- */


/* ---- expected values: TensorProto, SequenceProto, OptionalProto --------- */

/* What a .pb describes: a tensor, or a sequence/optional of tensors. */
typedef struct expect {
    mp_value_kind kind;
    mp_value_kind elem_kind;  /* OPTIONAL: TENSOR or SEQUENCE */
    bool empty;               /* optional without a value */
    int64_t count;            /* SEQUENCE: elements */
    bool same_shape;          /* SEQUENCE: all elements share dtype and shape */
    mp_tensor *t;             /* the (first) tensor; NULL when none */
    mp_tensor **elems;        /* SEQUENCE: count tensors (no data) */
} expect;

/* SequenceProto (onnx-data.proto, not in onnx.proto): tensor_values = 3. */
static int read_sequence(mp_arena *a, const uint8_t *p, size_t n, expect *e, mp_err *err)
{
    mp_wire w = {p, p + n, p, MP_WIRE_OK};
    mp_wire_field f;
    int r;
    e->kind = MP_KIND_SEQUENCE;
    e->same_shape = true;
    while ((r = mp_wire_next(&w, &f)) > 0) {
        if (f.num != 3 || f.type != MP_WIRE_LEN) continue;
        mp_tensor *t = mp_onnx_read_tensor(a, f.data, f.len, false, err);
        if (!t) return -1;
        mp_tensor **grown = mp_arena_alloc(a, (size_t)(e->count + 1) * sizeof *grown);
        if (e->count) memcpy(grown, e->elems, (size_t)e->count * sizeof *grown);
        grown[e->count] = t;
        e->elems = grown;
        if (!e->t) {
            e->t = t;
        } else if (t->dtype != e->t->dtype || t->rank != e->t->rank ||
                   memcmp(t->dims, e->t->dims, (size_t)t->rank * sizeof *t->dims)) {
            e->same_shape = false;
        }
        e->count++;
    }
    return r < 0 ? mp_fail(err, "malformed SequenceProto") : 0;
}

/* OptionalProto: tensor_value = 3, sequence_value = 5. */
static int read_optional(mp_arena *a, const uint8_t *p, size_t n, expect *e, bool want_data, mp_err *err)
{
    mp_wire w = {p, p + n, p, MP_WIRE_OK};
    mp_wire_field f;
    int r;
    e->kind = MP_KIND_OPTIONAL;
    e->empty = true;
    while ((r = mp_wire_next(&w, &f)) > 0) {
        if (f.type != MP_WIRE_LEN) continue;
        if (f.num == 3) {
            e->empty = false;
            e->elem_kind = MP_KIND_TENSOR;
            if (!(e->t = mp_onnx_read_tensor(a, f.data, f.len, want_data, err))) return -1;
        } else if (f.num == 5) {
            e->empty = false;
            e->elem_kind = MP_KIND_SEQUENCE;
            if (read_sequence(a, f.data, f.len, e, err)) return -1;
            e->kind = MP_KIND_OPTIONAL;
        }
    }
    return r < 0 ? mp_fail(err, "malformed OptionalProto") : 0;
}

/* Reads a .pb as the kind the model declares for that value. Tensor data is
 * read only when small enough to bind as a constant. */
static int read_expect(mp_arena *a, const char *path, mp_value_kind kind, bool want_data, expect *e, mp_err *err)
{
    size_t n;
    unsigned char *buf = read_file(path, &n);
    memset(e, 0, sizeof *e);
    if (!buf) return mp_fail(err, "cannot read %s", path);
    int rc = 0;
    if (kind == MP_KIND_SEQUENCE) {
        rc = read_sequence(a, buf, n, e, err);
    } else if (kind == MP_KIND_OPTIONAL) {
        rc = read_optional(a, buf, n, e, want_data, err);
    } else {
        e->kind = MP_KIND_TENSOR;
        e->t = mp_onnx_read_tensor(a, buf, n, false, err);
        if (!e->t) rc = -1;
        else if (want_data && e->t->numel <= MP_FOLD_MAX_ELEMS && !(e->t = mp_onnx_read_tensor(a, buf, n, true, err)))
            rc = -1;
    }
    free(buf);
    return rc;
}

/* ---- one case ------------------------------------------------------------ */

static void collect_ops(const mp_graph *g, op_key *ops, int *nops)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        op_key k = {{0}, {0}};
        snprintf(k.name, sizeof k.name, "%s", n->op_type);
        snprintf(k.domain, sizeof k.domain, "%s", n->domain);
        bool seen = false;
        for (int j = 0; j < *nops && !seen; j++) seen = !strcmp(ops[j].name, k.name) && !strcmp(ops[j].domain, k.domain);
        if (!seen && *nops < MAX_OPS) ops[(*nops)++] = k;
        for (int32_t a = 0; a < n->nattrs; a++)
            for (int32_t s = 0; (n->attrs[a].type == MP_ATTR_GRAPH || n->attrs[a].type == MP_ATTR_GRAPHS) && s < n->attrs[a].n; s++)
                collect_ops(n->attrs[a].graphs[s], ops, nops);
    }
}

/* Forgets what the file declares for node outputs: inference must find it. */
static void forget_types(mp_graph *g)
{
    for (int32_t i = 0; i < g->nvalues; i++) {
        mp_value *v = &g->values[i];
        if (v->producer < 0) continue;
        v->kind = MP_KIND_TENSOR;
        v->elem_kind = MP_KIND_TENSOR;
        v->seqlen = -1;
        v->elems = NULL;
        v->konst = NULL;
        v->symdata = NULL;
        v->nsymdata = 0;
        mp_value_set(g, i, MP_UNDEFINED, -1, NULL);
    }
    for (int32_t i = 0; i < g->nnodes; i++)
        for (int32_t a = 0; a < g->nodes[i].nattrs; a++) {
            const mp_attr *at = &g->nodes[i].attrs[a];
            if (at->type == MP_ATTR_GRAPH || at->type == MP_ATTR_GRAPHS)
                for (int32_t s = 0; s < at->n; s++) forget_types(at->graphs[s]);
        }
}

static void set_shape_from(mp_graph *g, int32_t id, const mp_tensor *t)
{
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < t->rank; i++) d[i] = mp_dim_of(t->dims[i]);
    mp_value_set(g, id, t->dtype, t->rank, d);
}

/* Where a case's data is: <in>K.pb for inputs (in may be NULL), <out>K.pb for outputs. */
typedef struct case_data {
    const char *in, *out;
} case_data;

/* A sequence input's length and element types, known like a constant's contents. */
static void bind_sequence(mp_graph *g, mp_value *v, const expect *e)
{
    v->seqlen = e->count;
    v->elems = mp_arena_alloc(g->arena, (size_t)(e->count + 1) * sizeof *v->elems);
    for (int64_t i = 0; i < e->count; i++) {
        const mp_tensor *t = e->elems[i];
        mp_type *ty = &v->elems[i];
        ty->kind = MP_KIND_TENSOR;
        ty->dtype = t->dtype;
        ty->rank = t->rank;
        ty->dims = mp_arena_alloc(g->arena, (size_t)(t->rank + 1) * sizeof *ty->dims);
        for (int d = 0; d < t->rank; d++) ty->dims[d] = mp_dim_of(t->dims[d]);
    }
}

static int bind_inputs(mp_graph *g, const char *in, mp_err *err)
{
    for (int32_t k = 0; k < g->ninputs; k++) {
        char path[2600];
        snprintf(path, sizeof path, "%s%d.pb", in, k);
        if (!exists(path)) break;
        int32_t id = g->inputs[k];
        mp_value *v = &g->values[id];
        expect e;
        if (read_expect(g->arena, path, v->kind, true, &e, err)) return -1;
        bool complete = v->dtype != MP_UNDEFINED && mp_value_shape_known(v);
        if (e.kind == MP_KIND_SEQUENCE || (e.kind == MP_KIND_OPTIONAL && e.elem_kind == MP_KIND_SEQUENCE)) {
            if (e.t && e.same_shape && !complete) set_shape_from(g, id, e.t);
            else if (e.t && v->dtype == MP_UNDEFINED) mp_value_set(g, id, e.t->dtype, v->rank, v->dims);
            bind_sequence(g, &g->values[id], &e);
            continue;
        }
        if (!e.t) continue; /* an empty optional */
        if (!complete) set_shape_from(g, id, e.t);
        if (e.t->data && e.kind == MP_KIND_TENSOR) g->values[id].konst = e.t;
    }
    return 0;
}

static const char *type_str(char *buf, size_t n, mp_dtype t, int rank, const int64_t *dims)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", mp_dtype_name(t));
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

static bool same_shape(const mp_value *v, const mp_tensor *t)
{
    if (v->dtype != t->dtype || v->rank != t->rank) return false;
    for (int i = 0; i < t->rank; i++)
        if (v->dims[i].v != t->dims[i]) return false;
    return true;
}

static const char *kind_name(mp_value_kind k)
{
    static const char *const names[] = {"tensor", "sequence", "optional", "map", "sparse tensor", "other"};
    return k <= MP_KIND_OTHER ? names[k] : "?";
}

static int compare_outputs(mp_graph *g, const char *out, const mp_value_kind *declared, mp_err *err)
{
    int compared = 0;
    for (int32_t k = 0; k < g->noutputs; k++) {
        char path[2600], want[256], got[256];
        snprintf(path, sizeof path, "%s%d.pb", out, k);
        if (!exists(path)) continue;
        compared++;
        const mp_value *v = &g->values[g->outputs[k]];
        expect e;
        if (read_expect(g->arena, path, declared[k], false, &e, err)) return -1;
        if (e.kind != MP_KIND_TENSOR && v->kind != e.kind)
            return mp_fail(err, "output '%s': expected a %s, got a %s", v->name, kind_name(e.kind), kind_name(v->kind));
        bool seq = e.kind == MP_KIND_SEQUENCE || (e.kind == MP_KIND_OPTIONAL && e.elem_kind == MP_KIND_SEQUENCE);
        if (!e.t) continue; /* empty sequence or optional: only the kind to check */
        mp_value_type_str(g, v, got, sizeof got);
        if (seq && !e.same_shape) {
            if (v->dtype != e.t->dtype)
                return mp_fail(err, "output '%s': expected a sequence of %s, got %s", v->name, mp_dtype_name(e.t->dtype), got);
            continue;
        }
        if (!same_shape(v, e.t))
            return mp_fail(err, "output '%s': expected %s%s, got %s", v->name, seq ? "a sequence of " : "",
                           type_str(want, sizeof want, e.t->dtype, e.t->rank, e.t->dims), got);
        if (verbose > 1) printf("  output '%s': %s%s as expected\n", v->name, seq ? "sequence of " : "", got);
    }
    if (!compared && g->noutputs) return mp_fail(err, "no expected output (%s0.pb) to compare with", out);
    return 0;
}

/* Binds, infers and compares; 0 when the case passes. */
static int run_case(mp_model *m, const case_data *cd, mp_err *err)
{
    mp_graph *g = m->graph;
    mp_value_kind declared[256];
    for (int32_t k = 0; k < g->noutputs && k < 256; k++) declared[k] = g->values[g->outputs[k]].kind;
    if (g->noutputs > 256) return mp_fail(err, "more than 256 outputs");
    if (cd->in && bind_inputs(g, cd->in, err)) return -1;
    forget_types(g);
    if (mp_infer(g, err)) return -1;
    return compare_outputs(g, cd->out, declared, err);
}

/* Runs run_case in a child; the reason comes back through a pipe. */
static int run_isolated(mp_model *m, const case_data *cd, mp_err *err)
{
    if (getenv("MP_CONF_NOFORK")) return run_case(m, cd, err);
    int fd[2];
    if (pipe(fd)) return mp_fail(err, "pipe failed");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return mp_fail(err, "fork failed");
    if (pid == 0) {
        close(fd[0]);
        alarm(CASE_TIMEOUT_S);
        mp_err e = {{0}};
        int rc = run_case(m, cd, &e);
        if (rc && write(fd[1], e.msg, strlen(e.msg)) < 0) rc = 2;
        _exit(rc ? 1 : 0);
    }
    close(fd[1]);
    char msg[sizeof err->msg];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof msg && (r = read(fd[0], msg + n, sizeof msg - 1 - n)) > 0) n += (size_t)r;
    msg[n] = 0;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        return mp_fail(err, WTERMSIG(status) == SIGALRM ? "timed out after %d s" : "crashed (signal %d)",
                       WTERMSIG(status) == SIGALRM ? CASE_TIMEOUT_S : WTERMSIG(status));
    if (WEXITSTATUS(status)) return mp_fail(err, "%s", msg[0] ? msg : "failed");
    return 0;
}

typedef struct totals {
    int passed, failed, skipped;
} totals;

static void one_case(const char *name, const char *model, const case_data *cd, totals *tot)
{
    mp_err err = {{0}};
    mp_model *m = mp_onnx_load(model, &err);
    if (!m) {
        /* a valid model whose element type mp_dtype lacks is unsupported, not failed */
        bool dtype = strstr(err.msg, "unknown element type") || strstr(err.msg, "unknown data type");
        op_key k = {{0}, {0}};
        snprintf(k.name, sizeof k.name, "%s", dtype ? "(element type not in mp_dtype)" : "(import)");
        op_row *r = row_of(&k);
        if (r && dtype) r->skipped++;
        if (r && !dtype) r->failed++, r->supported = true;
        if (dtype) tot->skipped++;
        else tot->failed++;
        if (verbose) printf("%s %s: %s\n", dtype ? "SKIP" : "FAIL", name, err.msg);
        return;
    }
    op_key ops[MAX_OPS];
    int nops = 0;
    collect_ops(m->graph, ops, &nops);
    bool supported = true;
    for (int i = 0; i < nops; i++) supported &= mp_op_find(ops[i].name, ops[i].domain) != NULL;
    int rc = supported ? run_isolated(m, cd, &err) : 0;
    for (int i = 0; i < nops; i++) {
        op_row *r = row_of(&ops[i]);
        if (!r) continue;
        r->supported = mp_op_find(ops[i].name, ops[i].domain) != NULL;
        if (!supported) r->skipped++;
        else if (rc) r->failed++;
        else r->passed++;
    }
    if (!supported) tot->skipped++;
    else if (rc) tot->failed++;
    else tot->passed++;
    if (rc && verbose) printf("FAIL %s: %s\n", name, err.msg);
    mp_onnx_close(m);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of a directory starting with prefix (caller frees). */
static char **list_dir(const char *dir, const char *prefix, int *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    int cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        if (*n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static int cmp_row(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    int c = strcmp(x->key.domain, y->key.domain);
    return c ? c : strcmp(x->key.name, y->key.name);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    verbose = getenv("MP_CONF_VERBOSE") ? atoi(getenv("MP_CONF_VERBOSE")) : 0;
    char root[1024];
    snprintf(root, sizeof root, "%s/onnx-backend", MEMPLAN_SHARED);
    if (!exists(root)) {
        printf("skipped: %s not found (the conformance data lives in ../shared)\n", root);
        return 0;
    }
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    totals tot = {0, 0, 0};
    for (size_t s = 0; s < sizeof suites / sizeof *suites; s++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", root, suites[s]);
        int n;
        char **names = list_dir(dir, "test_", &n);
        for (int i = 0; i < n; i++) {
            char name[1200], model[2400], in[2400], out[2400];
            snprintf(name, sizeof name, "%s/%s", suites[s], names[i]);
            snprintf(model, sizeof model, "%s/%s/model.onnx", dir, names[i]);
            snprintf(in, sizeof in, "%s/%s/test_data_set_0/input_", dir, names[i]);
            snprintf(out, sizeof out, "%s/%s/test_data_set_0/output_", dir, names[i]);
            if (strstr(name, filter) && exists(model)) one_case(name, model, &(case_data){in, out}, &tot);
            free(names[i]);
        }
        free(names);
    }
    /* light models: light_<name>.onnx + light_<name>_output_0.pb, no inputs to bind */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/light", root);
    int n;
    char **names = list_dir(dir, "light_", &n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > 5 && !strcmp(names[i] + len - 5, ".onnx")) {
            char name[1200], model[2400], out[2400];
            snprintf(name, sizeof name, "light/%.*s", (int)(len - 5), names[i]);
            snprintf(model, sizeof model, "%s/%s", dir, names[i]);
            snprintf(out, sizeof out, "%s/%.*s_output_", dir, (int)(len - 5), names[i]);
            if (strstr(name, filter)) one_case(name, model, &(case_data){NULL, out}, &tot);
        }
        free(names[i]);
    }
    free(names);

    qsort(table, (size_t)ntable, sizeof *table, cmp_row);
    for (int i = 0; i < ntable; i++) {
        const op_row *r = &table[i];
        if (!r->passed && !r->failed) continue;
        printf("%s%s%s: %d passed, %d failed\n", r->key.domain, *r->key.domain ? "." : "", r->key.name, r->passed,
               r->failed);
    }
    int k = 0;
    for (int i = 0; i < ntable; i++) {
        const op_row *r = &table[i];
        if (r->supported || !r->skipped) continue;
        printf("%s%s%s%s (%d)", k++ ? ", " : "unsupported ops (cases skipped): ", r->key.domain,
               *r->key.domain ? "." : "", r->key.name, r->skipped);
    }
    if (k) printf("\n");
    printf("%d passed, %d failed, %d skipped\n", tot.passed, tot.failed, tot.skipped);
    return tot.failed ? 1 : 0;
}
