/* test_shape_control.c - shape rules of If/Loop/Scan/SequenceMap, sequences,
 * optionals, the ai.onnx.ml ops and ImageDecoder, on tiny graphs built with
 * the IR API. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "ir/ir.h"

/* ---- building graphs ---------------------------------------------------- */

static mp_graph *new_model(int64_t opset)
{
    mp_graph *g = mp_graph_new(NULL);
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", opset};
    g->nopsets = 1;
    return g;
}

/* A value of dtype t and known dims (rank -1: untyped). */
static int32_t val(mp_graph *g, const char *name, mp_dtype t, int rank, const int64_t *dims)
{
    int32_t id = mp_graph_add_value(g, name);
    ck_assert_int_ge(id, 0);
    if (rank >= 0) {
        mp_dim d[8];
        for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
        mp_value_set(g, id, t, rank, d);
    }
    return id;
}

static void add_id(mp_graph *g, int32_t **arr, int32_t *count, int32_t id)
{
    int32_t *a = mp_arena_alloc(g->arena, (size_t)(*count + 1) * sizeof *a);
    if (*count) memcpy(a, *arr, (size_t)*count * sizeof *a);
    a[(*count)++] = id;
    *arr = a;
}

static int32_t input(mp_graph *g, const char *name, mp_dtype t, int rank, const int64_t *dims)
{
    int32_t id = val(g, name, t, rank, dims);
    g->values[id].flags |= MP_VAL_INPUT;
    add_id(g, &g->inputs, &g->ninputs, id);
    return id;
}

static void output(mp_graph *g, int32_t id)
{
    g->values[id].flags |= MP_VAL_OUTPUT;
    add_id(g, &g->outputs, &g->noutputs, id);
}

/* A name a subgraph reads from an enclosing graph. */
static int32_t outer(mp_graph *sub, const char *name)
{
    int32_t id = mp_graph_add_value(sub, name);
    sub->values[id].flags |= MP_VAL_OUTER;
    return id;
}

/* A known int64 (or bool) tensor. */
static int32_t konst(mp_graph *g, const char *name, mp_dtype t, int rank, const int64_t *dims, const int64_t *data)
{
    int32_t id = mp_graph_add_value(g, name);
    mp_tensor *k = mp_tensor_new(g->arena, t, rank, dims);
    for (int64_t i = 0; i < k->numel; i++) mp_tensor_set_i64(k, i, data[i]);
    mp_dim d[8];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    mp_value_set(g, id, t, rank, d);
    g->values[id].konst = k;
    g->values[id].flags |= MP_VAL_INITIALIZER;
    return id;
}

static int32_t node(mp_graph *g, const char *op, int nin, const int32_t *in, int nout, const int32_t *out)
{
    static const char *const ml[] = {"ArrayFeatureExtractor", "Binarizer", "LabelEncoder", "TreeEnsemble"};
    const char *domain = "";
    for (size_t i = 0; i < sizeof ml / sizeof *ml; i++)
        if (!strcmp(op, ml[i])) domain = "ai.onnx.ml";
    return mp_graph_add_node(g, NULL, op, domain, nin, in, nout, out);
}

static mp_attr *add_attr(mp_graph *g, int32_t nid, const char *name, mp_attr_type type)
{
    mp_node *n = &g->nodes[nid];
    mp_attr *a = mp_arena_alloc(g->arena, (size_t)(n->nattrs + 1) * sizeof *a);
    if (n->nattrs) memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    n->attrs = a;
    a = &a[n->nattrs++];
    a->name = name;
    a->type = type;
    return a;
}

static void attr_graph(mp_graph *g, int32_t nid, const char *name, mp_graph *sub)
{
    mp_attr *a = add_attr(g, nid, name, MP_ATTR_GRAPH);
    a->graphs = mp_arena_alloc(g->arena, sizeof *a->graphs);
    a->graphs[0] = sub;
    sub->name = name;
}

static void attr_int(mp_graph *g, int32_t nid, const char *name, int64_t v)
{
    add_attr(g, nid, name, MP_ATTR_INT)->i = v;
}

static void attr_ints(mp_graph *g, int32_t nid, const char *name, int n, const int64_t *v)
{
    mp_attr *a = add_attr(g, nid, name, MP_ATTR_INTS);
    a->n = n;
    a->ints = mp_arena_dup(g->arena, v, (size_t)n * sizeof *v);
}

static void attr_str(mp_graph *g, int32_t nid, const char *name, const char *s)
{
    mp_attr *a = add_attr(g, nid, name, MP_ATTR_STRING);
    a->s = s;
    a->slen = strlen(s);
}

/* Infers g; returns the error message, or NULL on success. */
static const char *infer(mp_graph *g)
{
    static mp_err err;
    err.msg[0] = 0;
    ck_assert_int_eq(mp_graph_link(g, &err), 0);
    return mp_infer(g, &err) ? err.msg : NULL;
}

static void infer_ok(mp_graph *g)
{
    const char *msg = infer(g);
    if (msg) ck_abort_msg("inference failed: %s", msg);
}

/* The value's type as "kind dtype[dims] len=N", e.g. "tensor float32[2,?]". */
static const char *type_str(mp_graph *g, int32_t id)
{
    static char buf[256];
    static const char *const kinds[] = {"tensor", "seq", "opt", "map", "sparse", "other"};
    const mp_value *v = &g->values[id];
    char t[160];
    mp_value_type_str(g, v, t, sizeof t);
    int k = snprintf(buf, sizeof buf, "%s%s%s %s", kinds[v->kind], v->kind == MP_KIND_OPTIONAL ? "-" : "",
                     v->kind == MP_KIND_OPTIONAL ? kinds[v->elem_kind] : "", t);
    if (v->kind == MP_KIND_SEQUENCE || (v->kind == MP_KIND_OPTIONAL && v->elem_kind == MP_KIND_SEQUENCE))
        snprintf(buf + k, sizeof buf - (size_t)k, " len=%lld", (long long)v->seqlen);
    return buf;
}

#define ck_type(g, id, want) ck_assert_str_eq(type_str(g, id), want)

/* ---- If ------------------------------------------------------------------ */

/* then: Identity(a), else: Identity(b), both read from the enclosing graph */
static int32_t build_if(mp_graph *g, int32_t cond, const char *a, const char *b)
{
    mp_graph *br[2] = {mp_graph_new(g), mp_graph_new(g)};
    const char *src[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        int32_t x = outer(br[k], src[k]), y = mp_graph_add_value(br[k], "y");
        node(br[k], "Identity", 1, &x, 1, &y);
        output(br[k], y);
    }
    int32_t out = mp_graph_add_value(g, "res");
    int32_t n = node(g, "If", 1, &cond, 1, &out);
    attr_graph(g, n, "then_branch", br[0]);
    attr_graph(g, n, "else_branch", br[1]);
    return out;
}

START_TEST(if_merges_branch_shapes)
{
    mp_graph *g = new_model(17);
    input(g, "a", MP_FLOAT, 2, (int64_t[]){2, 3});
    input(g, "b", MP_FLOAT, 2, (int64_t[]){2, 4});
    input(g, "c", MP_FLOAT, 3, (int64_t[]){2, 3, 1});
    int32_t cond = input(g, "cond", MP_BOOL, 0, NULL);
    int32_t r1 = build_if(g, cond, "a", "b");
    infer_ok(g);
    ck_type(g, r1, "tensor float32[2,?]");
    mp_graph_free(g);

    g = new_model(17); /* different ranks: rank unknown */
    input(g, "a", MP_FLOAT, 2, (int64_t[]){2, 3});
    input(g, "c", MP_FLOAT, 3, (int64_t[]){2, 3, 1});
    cond = input(g, "cond", MP_BOOL, 0, NULL);
    r1 = build_if(g, cond, "a", "c");
    infer_ok(g);
    ck_type(g, r1, "tensor float32[...]");
    mp_graph_free(g);
}
END_TEST

START_TEST(if_known_cond_takes_one_branch)
{
    mp_graph *g = new_model(17);
    konst(g, "a", MP_INT64, 1, (int64_t[]){3}, (int64_t[]){7, 8, 9});
    input(g, "b", MP_INT64, 1, (int64_t[]){5});
    int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
    int32_t r = build_if(g, cond, "a", "b");
    infer_ok(g);
    ck_type(g, r, "tensor int64[3]");
    ck_assert_ptr_nonnull(g->values[r].konst); /* the taken branch's contents pass through */
    ck_assert_int_eq(mp_tensor_get_i64(g->values[r].konst, 2), 9);
    mp_graph_free(g);
}
END_TEST

START_TEST(if_rejects_branches_of_different_dtypes)
{
    mp_graph *g = new_model(17);
    input(g, "a", MP_FLOAT, 1, (int64_t[]){3});
    input(g, "b", MP_INT64, 1, (int64_t[]){3});
    int32_t cond = input(g, "cond", MP_BOOL, 0, NULL);
    build_if(g, cond, "a", "b");
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "element types differ (float32 vs int64)"));
    mp_graph_free(g);
}
END_TEST

START_TEST(control_ops_need_their_subgraph)
{
    mp_graph *g = new_model(17);
    int32_t cond = input(g, "cond", MP_BOOL, 0, NULL), y = mp_graph_add_value(g, "y");
    node(g, "If", 1, &cond, 1, &y);
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "missing graph attribute 'else_branch'"));
    mp_graph_free(g);
}
END_TEST

/* ---- Loop ------------------------------------------------------------------ */

/* Loop(M, cond, y) whose body passes cond and y through and scans y; the body's
 * cond comes from `cond_src` (NULL: its own cond input) and its next y from
 * `y_src` (NULL: y_in). Returns the node; outputs are "y_final", "y_scan". */
static int32_t build_loop(mp_graph *g, int32_t m, int32_t cond, int32_t y, const char *cond_src, const char *y_src)
{
    mp_graph *b = mp_graph_new(g);
    int32_t it = input(b, "i", MP_INT64, 0, NULL), c_in = input(b, "cond_in", MP_BOOL, 0, NULL);
    int32_t y_in = input(b, "y_in", MP_UNDEFINED, -1, NULL);
    int32_t c_src = cond_src ? outer(b, cond_src) : c_in, yy = y_src ? outer(b, y_src) : y_in;
    int32_t c_out = mp_graph_add_value(b, "cond_out"), y_out = mp_graph_add_value(b, "y_out");
    int32_t scan = mp_graph_add_value(b, "scan");
    (void)it;
    node(b, "Identity", 1, &c_src, 1, &c_out);
    node(b, "Identity", 1, &yy, 1, &y_out);
    node(b, "Identity", 1, &y_in, 1, &scan);
    output(b, c_out);
    output(b, y_out);
    output(b, scan);
    int32_t outs[2] = {mp_graph_add_value(g, "y_final"), mp_graph_add_value(g, "y_scan")};
    int32_t n = node(g, "Loop", 3, (int32_t[]){m, cond, y}, 2, outs);
    attr_graph(g, n, "body", b);
    return n;
}

START_TEST(loop_known_trip_count_sizes_scan_outputs)
{
    mp_graph *g = new_model(17);
    int32_t m = konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){4});
    int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
    int32_t y = input(g, "y", MP_FLOAT, 1, (int64_t[]){1});
    build_loop(g, m, cond, y, NULL, NULL);
    infer_ok(g);
    ck_type(g, mp_graph_find(g, "y_final"), "tensor float32[1]");
    ck_type(g, mp_graph_find(g, "y_scan"), "tensor float32[4,1]");
    mp_graph_free(g);
}
END_TEST

START_TEST(loop_unknown_trip_count_leaves_scan_dim_unknown)
{
    /* M not known; then M known but the body's cond not: both unknown */
    for (int k = 0; k < 2; k++) {
        mp_graph *g = new_model(17);
        int32_t m = k ? konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){4}) : input(g, "M", MP_INT64, 0, NULL);
        int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
        int32_t y = input(g, "y", MP_FLOAT, 1, (int64_t[]){1});
        input(g, "stop", MP_BOOL, 0, NULL);
        build_loop(g, m, cond, y, k ? "stop" : NULL, NULL);
        infer_ok(g);
        ck_type(g, mp_graph_find(g, "y_scan"), "tensor float32[?,1]");
        mp_graph_free(g);
    }
}
END_TEST

START_TEST(loop_carried_value_that_changes_shape)
{
    /* y starts [1] and becomes w [5]: the body sees [?]; after >= 1 known
     * iteration the output is the body's last output, else either */
    for (int k = 0; k < 2; k++) {
        mp_graph *g = new_model(17);
        int32_t m = k ? konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){3}) : input(g, "M", MP_INT64, 0, NULL);
        int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
        int32_t y = input(g, "y", MP_FLOAT, 1, (int64_t[]){1});
        input(g, "w", MP_FLOAT, 1, (int64_t[]){5});
        int32_t n = build_loop(g, m, cond, y, NULL, "w");
        infer_ok(g);
        ck_type(g, mp_graph_find(g, "y_final"), k ? "tensor float32[5]" : "tensor float32[?]");
        mp_graph *b = g->nodes[n].attrs[0].graphs[0];
        ck_type(b, mp_graph_find(b, "y_in"), "tensor float32[?]");
        ck_type(g, mp_graph_find(g, "y_scan"), k ? "tensor float32[3,?]" : "tensor float32[?,?]");
        mp_graph_free(g);
    }
}
END_TEST

/* Loop(M, true, SequenceEmpty(int64)) appending the iteration number, and
 * scanning the stacked sequence so far: a shape that grows each iteration. */
static int32_t build_growing_loop(mp_graph *g, int32_t m)
{
    int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
    int32_t empty = mp_graph_add_value(g, "empty");
    int32_t e = node(g, "SequenceEmpty", 0, NULL, 1, &empty);
    attr_int(g, e, "dtype", MP_INT64);
    mp_graph *b = mp_graph_new(g);
    int32_t it = input(b, "i", MP_INT64, 0, NULL), c_in = input(b, "cond_in", MP_BOOL, 0, NULL);
    int32_t s_in = input(b, "s_in", MP_UNDEFINED, -1, NULL);
    int32_t c_out = mp_graph_add_value(b, "cond_out"), s_out = mp_graph_add_value(b, "s_out");
    int32_t stacked = mp_graph_add_value(b, "stacked");
    node(b, "Identity", 1, &c_in, 1, &c_out);
    node(b, "SequenceInsert", 2, (int32_t[]){s_in, it}, 1, &s_out);
    int32_t cat = node(b, "ConcatFromSequence", 1, &s_out, 1, &stacked);
    attr_int(b, cat, "axis", 0);
    attr_int(b, cat, "new_axis", 1);
    output(b, c_out);
    output(b, s_out);
    output(b, stacked);
    int32_t outs[2] = {mp_graph_add_value(g, "seq"), mp_graph_add_value(g, "scan")};
    int32_t n = node(g, "Loop", 3, (int32_t[]){m, cond, empty}, 2, outs);
    attr_graph(g, n, "body", b);
    int32_t len = mp_graph_add_value(g, "len");
    node(g, "SequenceLength", 1, &outs[0], 1, &len);
    return n;
}

START_TEST(loop_known_trip_count_runs_iterations)
{
    mp_graph *g = new_model(17);
    int32_t n = build_growing_loop(g, konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){3}));
    infer_ok(g);
    ck_type(g, mp_graph_find(g, "seq"), "seq int64[] len=3");
    ck_type(g, mp_graph_find(g, "scan"), "tensor int64[3,?]");
    const mp_value *len = &g->values[mp_graph_find(g, "len")];
    ck_assert_ptr_nonnull(len->konst);
    ck_assert_int_eq(mp_tensor_get_i64(len->konst, 0), 3);
    /* the body's values describe every iteration, not the last one */
    mp_graph *b = g->nodes[n].attrs[0].graphs[0];
    ck_type(b, mp_graph_find(b, "stacked"), "tensor int64[?]");
    ck_assert_ptr_null(b->values[mp_graph_find(b, "i")].konst);
    mp_graph_free(g);

    g = new_model(17);
    build_growing_loop(g, input(g, "M", MP_INT64, 0, NULL));
    infer_ok(g);
    ck_type(g, mp_graph_find(g, "seq"), "seq int64[] len=-1");
    ck_type(g, mp_graph_find(g, "scan"), "tensor int64[?,?]");
    ck_assert_ptr_null(g->values[mp_graph_find(g, "len")].konst);
    mp_graph_free(g);

    g = new_model(17); /* zero iterations: the initial value, and empty scans */
    build_growing_loop(g, konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){0}));
    infer_ok(g);
    ck_type(g, mp_graph_find(g, "seq"), "seq int64[...] len=0");
    ck_type(g, mp_graph_find(g, "scan"), "tensor int64[0,?]");
    mp_graph_free(g);
}
END_TEST

START_TEST(loop_inside_loop)
{
    /* the outer body runs the growing loop and scans its stacked output */
    mp_graph *g = new_model(17);
    int32_t m = konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){2});
    int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
    mp_graph *b = mp_graph_new(g);
    input(b, "i", MP_INT64, 0, NULL);
    int32_t c_in = input(b, "cond_in", MP_BOOL, 0, NULL);
    build_growing_loop(b, konst(b, "M3", MP_INT64, 0, NULL, (int64_t[]){3}));
    output(b, c_in);
    output(b, mp_graph_find(b, "scan"));
    int32_t out = mp_graph_add_value(g, "out");
    int32_t n = node(g, "Loop", 2, (int32_t[]){m, cond}, 1, &out);
    attr_graph(g, n, "body", b);
    infer_ok(g);
    ck_type(b, mp_graph_find(b, "seq"), "seq int64[] len=3");
    ck_type(g, out, "tensor int64[2,3,?]");
    mp_graph_free(g);
}
END_TEST

START_TEST(loop_body_if_reads_body_values)
{
    /* an If inside the body reads the body's carried input from its branches */
    mp_graph *g = new_model(17);
    int32_t m = konst(g, "M", MP_INT64, 0, NULL, (int64_t[]){2});
    int32_t cond = konst(g, "cond", MP_BOOL, 0, NULL, (int64_t[]){1});
    int32_t y = input(g, "y", MP_FLOAT, 2, (int64_t[]){2, 2});
    mp_graph *b = mp_graph_new(g);
    input(b, "i", MP_INT64, 0, NULL);
    int32_t c_in = input(b, "cond_in", MP_BOOL, 0, NULL), y_in = input(b, "y_in", MP_UNDEFINED, -1, NULL);
    int32_t y_out = build_if(b, c_in, "y_in", "y_in");
    (void)y_in;
    output(b, c_in);
    output(b, y_out);
    int32_t out = mp_graph_add_value(g, "out");
    int32_t n = node(g, "Loop", 3, (int32_t[]){m, cond, y}, 1, &out);
    attr_graph(g, n, "body", b);
    infer_ok(g);
    ck_type(g, out, "tensor float32[2,2]");
    mp_graph_free(g);
}
END_TEST

START_TEST(loop_rejects_body_of_wrong_arity)
{
    mp_graph *g = new_model(17);
    int32_t m = input(g, "M", MP_INT64, 0, NULL), y = input(g, "y", MP_FLOAT, 1, (int64_t[]){1});
    mp_graph *b = mp_graph_new(g);
    int32_t c_in = input(b, "cond_in", MP_BOOL, 0, NULL); /* no iteration number */
    output(b, c_in);
    int32_t out = mp_graph_add_value(g, "out");
    int32_t n = node(g, "Loop", 3, (int32_t[]){m, -1, y}, 1, &out);
    attr_graph(g, n, "body", b);
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "takes 1 inputs; the node passes 3"));
    mp_graph_free(g);
}
END_TEST

/* ---- Scan -------------------------------------------------------------------- */

/* Scan(state, x) with body (s_in, x_t) -> (Identity(s_in), Identity(x_t)). */
static int32_t build_scan(mp_graph *g, int32_t lens, int32_t state, int32_t x, bool v8)
{
    mp_graph *b = mp_graph_new(g);
    int32_t s_in = input(b, "s_in", MP_UNDEFINED, -1, NULL), x_t = input(b, "x_t", MP_UNDEFINED, -1, NULL);
    int32_t s_out = mp_graph_add_value(b, "s_out"), y_t = mp_graph_add_value(b, "y_t");
    node(b, "Identity", 1, &s_in, 1, &s_out);
    node(b, "Identity", 1, &x_t, 1, &y_t);
    output(b, s_out);
    output(b, y_t);
    int32_t outs[2] = {mp_graph_add_value(g, "s_final"), mp_graph_add_value(g, "ys")};
    int32_t n = v8 ? node(g, "Scan", 3, (int32_t[]){lens, state, x}, 2, outs)
                   : node(g, "Scan", 2, (int32_t[]){state, x}, 2, outs);
    attr_graph(g, n, "body", b);
    attr_int(g, n, "num_scan_inputs", 1);
    return n;
}

START_TEST(scan9_slices_and_stacks_along_axes)
{
    mp_graph *g = new_model(11);
    int32_t s = input(g, "s", MP_FLOAT, 1, (int64_t[]){2}), x = input(g, "x", MP_FLOAT, 2, (int64_t[]){3, 2});
    build_scan(g, -1, s, x, false);
    infer_ok(g);
    ck_type(g, mp_graph_find(g, "s_final"), "tensor float32[2]");
    ck_type(g, mp_graph_find(g, "ys"), "tensor float32[3,2]");
    mp_graph_free(g);

    g = new_model(11); /* scan along axis 1, stack along axis -1 */
    s = input(g, "s", MP_FLOAT, 1, (int64_t[]){2});
    x = input(g, "x", MP_FLOAT, 2, (int64_t[]){2, 5});
    int32_t n = build_scan(g, -1, s, x, false);
    attr_ints(g, n, "scan_input_axes", 1, (int64_t[]){1});
    attr_ints(g, n, "scan_output_axes", 1, (int64_t[]){-1});
    infer_ok(g);
    mp_graph *b = g->nodes[n].attrs[0].graphs[0];
    ck_type(b, mp_graph_find(b, "x_t"), "tensor float32[2]");
    ck_type(g, mp_graph_find(g, "ys"), "tensor float32[2,5]");
    mp_graph_free(g);
}
END_TEST

START_TEST(scan8_has_batch_axis_and_sequence_lens)
{
    mp_graph *g = new_model(8);
    int32_t s = input(g, "s", MP_FLOAT, 2, (int64_t[]){1, 2}), x = input(g, "x", MP_FLOAT, 3, (int64_t[]){1, 3, 2});
    int32_t n = build_scan(g, -1, s, x, true);
    infer_ok(g);
    mp_graph *b = g->nodes[n].attrs[0].graphs[0];
    ck_type(b, mp_graph_find(b, "s_in"), "tensor float32[2]");
    ck_type(b, mp_graph_find(b, "x_t"), "tensor float32[2]");
    ck_type(g, mp_graph_find(g, "s_final"), "tensor float32[1,2]");
    ck_type(g, mp_graph_find(g, "ys"), "tensor float32[1,3,2]");
    mp_graph_free(g);

    g = new_model(8); /* batch sizes disagree */
    s = input(g, "s", MP_FLOAT, 2, (int64_t[]){2, 2});
    x = input(g, "x", MP_FLOAT, 3, (int64_t[]){1, 3, 2});
    build_scan(g, -1, s, x, true);
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "batch size"));
    mp_graph_free(g);
}
END_TEST

/* ---- sequences ------------------------------------------------------------- */

START_TEST(sequence_ops_track_elements_and_length)
{
    mp_graph *g = new_model(17);
    int32_t a = input(g, "a", MP_FLOAT, 2, (int64_t[]){2, 3}), b = input(g, "b", MP_FLOAT, 2, (int64_t[]){2, 4});
    int32_t same = mp_graph_add_value(g, "same"), mixed = mp_graph_add_value(g, "mixed");
    node(g, "SequenceConstruct", 2, (int32_t[]){a, a}, 1, &same);
    node(g, "SequenceConstruct", 2, (int32_t[]){a, b}, 1, &mixed);
    int32_t ins = mp_graph_add_value(g, "ins"), at = mp_graph_add_value(g, "at"), er = mp_graph_add_value(g, "er");
    int32_t pos = konst(g, "pos", MP_INT64, 0, NULL, (int64_t[]){-1});
    node(g, "SequenceInsert", 3, (int32_t[]){same, a, pos}, 1, &ins);
    node(g, "SequenceAt", 2, (int32_t[]){mixed, pos}, 1, &at);
    node(g, "SequenceErase", 1, &ins, 1, &er);
    int32_t len = mp_graph_add_value(g, "len");
    node(g, "SequenceLength", 1, &ins, 1, &len);
    int32_t cat0 = mp_graph_add_value(g, "cat0"), stack = mp_graph_add_value(g, "stack");
    int32_t cat1 = mp_graph_add_value(g, "cat1");
    int32_t c = node(g, "ConcatFromSequence", 1, &same, 1, &cat0);
    attr_int(g, c, "axis", 0);
    c = node(g, "ConcatFromSequence", 1, &ins, 1, &stack);
    attr_int(g, c, "axis", -1);
    attr_int(g, c, "new_axis", 1);
    c = node(g, "ConcatFromSequence", 1, &mixed, 1, &cat1);
    attr_int(g, c, "axis", 1);
    infer_ok(g);
    ck_type(g, same, "seq float32[2,3] len=2");
    ck_type(g, mixed, "seq float32[2,?] len=2");
    ck_type(g, ins, "seq float32[2,3] len=3");
    ck_type(g, at, "tensor float32[2,4]"); /* the last element, b */
    ck_type(g, er, "seq float32[2,3] len=2");
    ck_assert_int_eq(mp_tensor_get_i64(g->values[len].konst, 0), 3);
    ck_type(g, cat0, "tensor float32[4,3]");
    ck_type(g, stack, "tensor float32[2,3,3]");
    ck_type(g, cat1, "tensor float32[2,7]"); /* 3 + 4 */
    mp_graph_free(g);
}
END_TEST

START_TEST(sequence_elements_are_typed_one_by_one)
{
    /* [x, y] then z inserted at 1: [x[2,3,4], z[3,3,4], y[1,3,4]] */
    mp_graph *g = new_model(17);
    int32_t x = input(g, "x", MP_FLOAT, 3, (int64_t[]){2, 3, 4}), y = input(g, "y", MP_FLOAT, 3, (int64_t[]){1, 3, 4});
    int32_t z = input(g, "z", MP_FLOAT, 3, (int64_t[]){3, 3, 4});
    int32_t one = konst(g, "one", MP_INT64, 0, NULL, (int64_t[]){1});
    int32_t last = konst(g, "last", MP_INT64, 1, (int64_t[]){1}, (int64_t[]){-1});
    int32_t anywhere = input(g, "anywhere", MP_INT64, 0, NULL);
    int32_t e = mp_graph_add_value(g, "e"), s1 = mp_graph_add_value(g, "s1"), s2 = mp_graph_add_value(g, "s2");
    int32_t s3 = mp_graph_add_value(g, "s3");
    node(g, "SequenceEmpty", 0, NULL, 1, &e);
    node(g, "SequenceInsert", 2, (int32_t[]){e, x}, 1, &s1);
    node(g, "SequenceInsert", 2, (int32_t[]){s1, y}, 1, &s2);
    node(g, "SequenceInsert", 3, (int32_t[]){s2, z, one}, 1, &s3);
    int32_t at1 = mp_graph_add_value(g, "at1"), at_last = mp_graph_add_value(g, "at_last");
    int32_t at_any = mp_graph_add_value(g, "at_any"), er = mp_graph_add_value(g, "er");
    int32_t er_any = mp_graph_add_value(g, "er_any");
    node(g, "SequenceAt", 2, (int32_t[]){s3, one}, 1, &at1);
    node(g, "SequenceAt", 2, (int32_t[]){s3, last}, 1, &at_last);
    node(g, "SequenceAt", 2, (int32_t[]){s3, anywhere}, 1, &at_any);
    node(g, "SequenceErase", 2, (int32_t[]){s3, one}, 1, &er);
    node(g, "SequenceErase", 2, (int32_t[]){s3, anywhere}, 1, &er_any);
    int32_t cat = mp_graph_add_value(g, "cat"), cat_any = mp_graph_add_value(g, "cat_any");
    int32_t c = node(g, "ConcatFromSequence", 1, &s3, 1, &cat);
    attr_int(g, c, "axis", 0);
    c = node(g, "ConcatFromSequence", 1, &er_any, 1, &cat_any);
    attr_int(g, c, "axis", 0);
    infer_ok(g);
    ck_type(g, s3, "seq float32[?,3,4] len=3");
    ck_type(g, at1, "tensor float32[3,3,4]");
    ck_type(g, at_last, "tensor float32[1,3,4]");
    ck_type(g, at_any, "tensor float32[?,3,4]");
    ck_type(g, er, "seq float32[?,3,4] len=2");
    ck_type(g, er_any, "seq float32[?,3,4] len=2");
    ck_type(g, cat, "tensor float32[6,3,4]");
    ck_type(g, cat_any, "tensor float32[?,3,4]");
    mp_graph_free(g);

    /* split into 4 + 2: the last piece is shorter */
    g = new_model(17);
    x = input(g, "x", MP_FLOAT, 2, (int64_t[]){3, 6});
    int32_t four = konst(g, "four", MP_INT64, 0, NULL, (int64_t[]){4});
    last = konst(g, "last", MP_INT64, 0, NULL, (int64_t[]){-1});
    int32_t sp = mp_graph_add_value(g, "sp"), piece = mp_graph_add_value(g, "piece");
    int32_t back = mp_graph_add_value(g, "back");
    c = node(g, "SplitToSequence", 2, (int32_t[]){x, four}, 1, &sp);
    attr_int(g, c, "axis", 1);
    node(g, "SequenceAt", 2, (int32_t[]){sp, last}, 1, &piece);
    c = node(g, "ConcatFromSequence", 1, &sp, 1, &back);
    attr_int(g, c, "axis", 1);
    infer_ok(g);
    ck_type(g, sp, "seq float32[3,?] len=2");
    ck_type(g, piece, "tensor float32[3,2]");
    ck_type(g, back, "tensor float32[3,6]");
    mp_graph_free(g);
}
END_TEST

START_TEST(sequence_ops_reject_bad_inputs)
{
    mp_graph *g = new_model(17);
    int32_t a = input(g, "a", MP_FLOAT, 1, (int64_t[]){2}), b = input(g, "b", MP_INT64, 1, (int64_t[]){2});
    int32_t s = mp_graph_add_value(g, "s");
    node(g, "SequenceConstruct", 2, (int32_t[]){a, b}, 1, &s);
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "element types differ"));
    mp_graph_free(g);

    g = new_model(17); /* a tensor where a sequence belongs */
    a = input(g, "a", MP_FLOAT, 1, (int64_t[]){2});
    s = mp_graph_add_value(g, "s");
    node(g, "SequenceLength", 1, &a, 1, &s);
    msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "is a tensor, not a sequence"));
    mp_graph_free(g);

    g = new_model(17); /* position past the end */
    a = input(g, "a", MP_FLOAT, 1, (int64_t[]){2});
    s = mp_graph_add_value(g, "s");
    int32_t pos = konst(g, "pos", MP_INT64, 0, NULL, (int64_t[]){2}), e = mp_graph_add_value(g, "e");
    node(g, "SequenceConstruct", 2, (int32_t[]){a, a}, 1, &s);
    node(g, "SequenceAt", 2, (int32_t[]){s, pos}, 1, &e);
    msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "position 2 is out of range for a sequence of 2 elements"));
    mp_graph_free(g);
}
END_TEST

START_TEST(split_to_sequence_shapes)
{
    static const struct {
        int nsplit;          /* -1: no split input */
        int64_t split[3];
        int64_t axis, keepdims;
        const char *want;
    } cases[] = {
        {-1, {0}, 1, 0, "seq float32[3] len=6"},
        {-1, {0}, 0, 1, "seq float32[1,6] len=3"},
        {0, {2}, 1, 1, "seq float32[3,2] len=3"},
        {0, {4}, 1, 1, "seq float32[3,?] len=2"}, /* 4 + 2 */
        {0, {8}, 1, 1, "seq float32[3,6] len=1"},
        {2, {1, 2}, 0, 1, "seq float32[?,6] len=2"},
        {3, {2, 2, 2}, 1, 1, "seq float32[3,2] len=3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mp_graph *g = new_model(17);
        int32_t x = input(g, "x", MP_FLOAT, 2, (int64_t[]){3, 6}), s = mp_graph_add_value(g, "s");
        int64_t n = cases[i].nsplit;
        int32_t split = n < 0 ? -1 : konst(g, "split", MP_INT64, n ? 1 : 0, &n, cases[i].split);
        int32_t nd = node(g, "SplitToSequence", 2, (int32_t[]){x, split}, 1, &s);
        attr_int(g, nd, "axis", cases[i].axis);
        attr_int(g, nd, "keepdims", cases[i].keepdims);
        infer_ok(g);
        ck_type(g, s, cases[i].want);
        mp_graph_free(g);
    }
    mp_graph *g = new_model(17);
    int32_t x = input(g, "x", MP_FLOAT, 2, (int64_t[]){3, 6}), s = mp_graph_add_value(g, "s");
    int32_t split = konst(g, "split", MP_INT64, 1, (int64_t[]){2}, (int64_t[]){1, 1});
    node(g, "SplitToSequence", 2, (int32_t[]){x, split}, 1, &s);
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "split lengths sum to 2, the axis has 3"));
    mp_graph_free(g);
}
END_TEST

START_TEST(sequence_map_applies_body_per_element)
{
    mp_graph *g = new_model(17);
    int32_t a = input(g, "a", MP_FLOAT, 2, (int64_t[]){2, 3}), t = input(g, "t", MP_INT64, 1, (int64_t[]){5});
    int32_t s = mp_graph_add_value(g, "s");
    node(g, "SequenceConstruct", 3, (int32_t[]){a, a, a}, 1, &s);
    mp_graph *b = mp_graph_new(g);
    int32_t e = input(b, "e", MP_UNDEFINED, -1, NULL), u = input(b, "u", MP_UNDEFINED, -1, NULL);
    int32_t e2 = mp_graph_add_value(b, "e2"), u2 = mp_graph_add_value(b, "u2");
    node(b, "Identity", 1, &e, 1, &e2);
    node(b, "Identity", 1, &u, 1, &u2);
    output(b, e2);
    output(b, u2);
    int32_t outs[2] = {mp_graph_add_value(g, "y0"), mp_graph_add_value(g, "y1")};
    int32_t n = node(g, "SequenceMap", 2, (int32_t[]){s, t}, 2, outs);
    attr_graph(g, n, "body", b);
    infer_ok(g);
    ck_type(b, e, "tensor float32[2,3]");
    ck_type(g, outs[0], "seq float32[2,3] len=3");
    ck_type(g, outs[1], "seq int64[5] len=3");
    mp_graph_free(g);
}
END_TEST

/* ---- optionals ------------------------------------------------------------- */

START_TEST(optional_ops_wrap_and_unwrap)
{
    mp_graph *g = new_model(18);
    int32_t x = input(g, "x", MP_FLOAT, 1, (int64_t[]){4});
    int32_t s = mp_graph_add_value(g, "s"), ox = mp_graph_add_value(g, "ox"), os = mp_graph_add_value(g, "os");
    node(g, "SequenceConstruct", 2, (int32_t[]){x, x}, 1, &s);
    node(g, "Optional", 1, &x, 1, &ox);
    node(g, "Optional", 1, &s, 1, &os);
    int32_t gx = mp_graph_add_value(g, "gx"), gs = mp_graph_add_value(g, "gs"), gt = mp_graph_add_value(g, "gt");
    node(g, "OptionalGetElement", 1, &ox, 1, &gx);
    node(g, "OptionalGetElement", 1, &os, 1, &gs);
    node(g, "OptionalGetElement", 1, &x, 1, &gt); /* opset 18: a plain tensor passes */
    int32_t h_opt = mp_graph_add_value(g, "h_opt"), h_none = mp_graph_add_value(g, "h_none");
    int32_t h_t = mp_graph_add_value(g, "h_t");
    node(g, "OptionalHasElement", 1, &ox, 1, &h_opt);
    node(g, "OptionalHasElement", 0, NULL, 1, &h_none);
    node(g, "OptionalHasElement", 1, &x, 1, &h_t);
    infer_ok(g);
    ck_type(g, ox, "opt-tensor float32[4]");
    ck_type(g, os, "opt-seq float32[4] len=2");
    ck_type(g, gx, "tensor float32[4]");
    ck_type(g, gs, "seq float32[4] len=2");
    ck_type(g, gt, "tensor float32[4]");
    ck_type(g, h_opt, "tensor bool[]");
    ck_assert_ptr_null(g->values[h_opt].konst);
    ck_assert_int_eq(mp_tensor_get_i64(g->values[h_none].konst, 0), 0);
    ck_assert_int_eq(mp_tensor_get_i64(g->values[h_t].konst, 0), 1);
    mp_graph_free(g);
}
END_TEST

START_TEST(if_merges_optional_with_what_it_holds)
{
    /* then: Optional(SequenceConstruct(x)), else: SequenceConstruct(x) */
    mp_graph *g = new_model(18);
    input(g, "x", MP_FLOAT, 1, (int64_t[]){4});
    int32_t cond = input(g, "cond", MP_BOOL, 0, NULL);
    mp_graph *br[2] = {mp_graph_new(g), mp_graph_new(g)};
    for (int k = 0; k < 2; k++) {
        int32_t x = outer(br[k], "x"), s = mp_graph_add_value(br[k], "s"), o = mp_graph_add_value(br[k], "o");
        node(br[k], "SequenceConstruct", 1, &x, 1, &s);
        if (k == 0) node(br[k], "Optional", 1, &s, 1, &o);
        output(br[k], k == 0 ? o : s);
    }
    int32_t r = mp_graph_add_value(g, "r");
    int32_t n = node(g, "If", 1, &cond, 1, &r);
    attr_graph(g, n, "then_branch", br[0]);
    attr_graph(g, n, "else_branch", br[1]);
    infer_ok(g);
    ck_type(g, r, "opt-seq float32[4] len=1");
    mp_graph_free(g);
}
END_TEST

/* ---- ai.onnx.ml, TfIdfVectorizer --------------------------------------------- */

START_TEST(ml_ops_shapes)
{
    mp_graph *g = new_model(17);
    int32_t x2 = input(g, "x2", MP_FLOAT, 2, (int64_t[]){3, 4}), x1 = input(g, "x1", MP_FLOAT, 1, (int64_t[]){4});
    int32_t idx = input(g, "idx", MP_INT64, 1, (int64_t[]){2});
    int32_t xs = input(g, "xs", MP_STRING, 1, (int64_t[]){5}), xd = input(g, "xd", MP_DOUBLE, 2, (int64_t[]){3, 2});
    int32_t xi = input(g, "xi", MP_INT32, 2, (int64_t[]){2, 6}), xi1 = input(g, "xi1", MP_INT32, 1, (int64_t[]){12});
    int32_t o[8];
    for (int i = 0; i < 8; i++) {
        char name[8];
        snprintf(name, sizeof name, "o%d", i);
        o[i] = mp_graph_add_value(g, name);
    }
    node(g, "ArrayFeatureExtractor", 2, (int32_t[]){x2, idx}, 1, &o[0]);
    node(g, "ArrayFeatureExtractor", 2, (int32_t[]){x1, idx}, 1, &o[1]);
    node(g, "Binarizer", 1, &x2, 1, &o[2]);
    int32_t n = node(g, "LabelEncoder", 1, &xs, 1, &o[3]);
    attr_ints(g, n, "values_int64s", 2, (int64_t[]){0, 1});
    n = node(g, "TreeEnsemble", 1, &xd, 1, &o[4]);
    attr_int(g, n, "n_targets", 4);
    n = node(g, "TfIdfVectorizer", 1, &xi, 1, &o[5]);
    attr_ints(g, n, "ngram_indexes", 3, (int64_t[]){0, 6, 2});
    n = node(g, "TfIdfVectorizer", 1, &xi1, 1, &o[6]);
    attr_ints(g, n, "ngram_indexes", 3, (int64_t[]){0, 6, 2});
    n = node(g, "LabelEncoder", 1, &xs, 1, &o[7]);
    attr_str(g, n, "values_strings", "x"); /* only the attribute's presence matters here */
    infer_ok(g);
    ck_type(g, o[0], "tensor float32[3,2]");
    ck_type(g, o[1], "tensor float32[1,2]");
    ck_type(g, o[2], "tensor float32[3,4]");
    ck_type(g, o[3], "tensor int64[5]");
    ck_type(g, o[4], "tensor float64[3,4]");
    ck_type(g, o[5], "tensor float32[2,7]");
    ck_type(g, o[6], "tensor float32[7]");
    ck_type(g, o[7], "tensor string[5]");
    mp_graph_free(g);

    g = new_model(17);
    int32_t x3 = input(g, "x3", MP_INT32, 3, (int64_t[]){1, 2, 3}), y = mp_graph_add_value(g, "y");
    n = node(g, "TfIdfVectorizer", 1, &x3, 1, &y);
    attr_ints(g, n, "ngram_indexes", 1, (int64_t[]){0});
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "X must be 1-D or 2-D, has rank 3"));
    mp_graph_free(g);
}
END_TEST

/* ---- ImageDecoder ----------------------------------------------------------- */

/* Decodes the header bytes (as a known input) and returns the output type. */
static const char *decode(const void *bytes, int64_t n, const char *pixel_format)
{
    static char buf[128];
    mp_graph *g = new_model(20);
    int64_t *data = malloc((size_t)(n ? n : 1) * sizeof *data);
    for (int64_t i = 0; i < n; i++) data[i] = ((const uint8_t *)bytes)[i];
    int32_t x = konst(g, "x", MP_UINT8, 1, &n, data), y = mp_graph_add_value(g, "y");
    free(data);
    int32_t nd = node(g, "ImageDecoder", 1, &x, 1, &y);
    if (pixel_format) attr_str(g, nd, "pixel_format", pixel_format);
    infer_ok(g);
    snprintf(buf, sizeof buf, "%s", type_str(g, y));
    mp_graph_free(g);
    return buf;
}

START_TEST(image_decoder_reads_header_sizes)
{
    static const uint8_t png[24] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                    0, 0, 0x01, 0x40, 0, 0, 0, 0xf0};
    uint8_t bmp[26] = {'B', 'M'};
    bmp[14] = 40;
    bmp[18] = 0x20;                                   /* width 32 */
    bmp[22] = 0xf0, bmp[23] = 0xff, bmp[24] = 0xff, bmp[25] = 0xff; /* height -16: top-down */
    static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xff, 0xc2, 0, 11, 8, 0, 48, 0, 64, 3};
    static const char pnm[] = "P6\n# a comment\n 17 9\n255\n";
    static const uint8_t tiff[] = {'M', 'M', 0, '*', 0, 0, 0, 8, 0, 2, 1, 0, 0, 3, 0, 0, 0, 1, 0, 5, 0, 0,
                                   1, 1, 0, 4, 0, 0, 0, 1, 0, 0, 0, 7};
    uint8_t vp8[30] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', ' '};
    vp8[23] = 0x9d, vp8[24] = 0x01, vp8[25] = 0x2a, vp8[26] = 10, vp8[28] = 20;
    uint8_t vp8l[25] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L'};
    vp8l[20] = 0x2f;
    uint32_t bits = (100 - 1) | ((uint32_t)(50 - 1) << 14);
    for (int i = 0; i < 4; i++) vp8l[21 + i] = (uint8_t)(bits >> (8 * i));
    uint8_t vp8x[30] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X'};
    vp8x[24] = 199, vp8x[27] = 99;
    static const uint8_t j2k[24] = {0xff, 0x4f, 0xff, 0x51, 0, 41, 0, 0, 0, 0, 0, 40, 0, 0, 0, 30,
                                    0, 0, 0, 8, 0, 0, 0, 6};
    static const uint8_t jp2[] = {0, 0, 0, 12, 'j', 'P', ' ', ' ', '\r', '\n', 0x87, '\n', 0, 0, 0, 20,
                                  'f', 't', 'y', 'p', 'j', 'p', '2', ' ', 0, 0, 0, 0, 'j', 'p', '2', ' ',
                                  0, 0, 0, 30, 'j', 'p', '2', 'h', 0, 0, 0, 22, 'i', 'h', 'd', 'r',
                                  0, 0, 0, 12, 0, 0, 0, 34, 0, 3, 7, 7, 0, 0};
    ck_assert_str_eq(decode(png, sizeof png, NULL), "tensor uint8[240,320,3]");
    ck_assert_str_eq(decode(bmp, sizeof bmp, "BGR"), "tensor uint8[16,32,3]");
    ck_assert_str_eq(decode(jpeg, sizeof jpeg, "Grayscale"), "tensor uint8[48,64,1]");
    ck_assert_str_eq(decode(pnm, sizeof pnm - 1, NULL), "tensor uint8[9,17,3]");
    ck_assert_str_eq(decode(tiff, sizeof tiff, NULL), "tensor uint8[7,5,3]");
    ck_assert_str_eq(decode(vp8, sizeof vp8, NULL), "tensor uint8[20,10,3]");
    ck_assert_str_eq(decode(vp8l, sizeof vp8l, NULL), "tensor uint8[50,100,3]");
    ck_assert_str_eq(decode(vp8x, sizeof vp8x, NULL), "tensor uint8[100,200,3]");
    ck_assert_str_eq(decode(j2k, sizeof j2k, NULL), "tensor uint8[24,32,3]");
    ck_assert_str_eq(decode(jp2, sizeof jp2, NULL), "tensor uint8[12,34,3]");
    /* cut-off or unknown headers leave the size unknown, never read past the end */
    for (size_t cut = 0; cut < sizeof jp2; cut++) decode(jp2, (int64_t)cut, NULL);
    for (size_t cut = 0; cut < sizeof jpeg; cut++) decode(jpeg, (int64_t)cut, NULL);
    ck_assert_str_eq(decode(png, 20, NULL), "tensor uint8[?,?,3]");
    ck_assert_str_eq(decode("GIF89a", 6, NULL), "tensor uint8[?,?,3]");
}
END_TEST

START_TEST(image_decoder_without_known_bytes)
{
    mp_graph *g = new_model(20);
    int32_t x = input(g, "x", MP_UINT8, 1, (int64_t[]){100}), y = mp_graph_add_value(g, "y");
    int32_t n = node(g, "ImageDecoder", 1, &x, 1, &y);
    attr_str(g, n, "pixel_format", "Grayscale");
    infer_ok(g);
    ck_type(g, y, "tensor uint8[?,?,1]");
    mp_graph_free(g);

    g = new_model(20);
    x = input(g, "x", MP_UINT8, 1, (int64_t[]){100});
    y = mp_graph_add_value(g, "y");
    n = node(g, "ImageDecoder", 1, &x, 1, &y);
    attr_str(g, n, "pixel_format", "CMYK");
    const char *msg = infer(g);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "pixel_format 'CMYK'"));
    mp_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shape_control");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, if_merges_branch_shapes);
    tcase_add_test(tc, if_known_cond_takes_one_branch);
    tcase_add_test(tc, if_rejects_branches_of_different_dtypes);
    tcase_add_test(tc, control_ops_need_their_subgraph);
    tcase_add_test(tc, loop_known_trip_count_sizes_scan_outputs);
    tcase_add_test(tc, loop_unknown_trip_count_leaves_scan_dim_unknown);
    tcase_add_test(tc, loop_carried_value_that_changes_shape);
    tcase_add_test(tc, loop_known_trip_count_runs_iterations);
    tcase_add_test(tc, loop_inside_loop);
    tcase_add_test(tc, loop_body_if_reads_body_values);
    tcase_add_test(tc, loop_rejects_body_of_wrong_arity);
    tcase_add_test(tc, scan9_slices_and_stacks_along_axes);
    tcase_add_test(tc, scan8_has_batch_axis_and_sequence_lens);
    tcase_add_test(tc, sequence_ops_track_elements_and_length);
    tcase_add_test(tc, sequence_elements_are_typed_one_by_one);
    tcase_add_test(tc, sequence_ops_reject_bad_inputs);
    tcase_add_test(tc, split_to_sequence_shapes);
    tcase_add_test(tc, sequence_map_applies_body_per_element);
    tcase_add_test(tc, optional_ops_wrap_and_unwrap);
    tcase_add_test(tc, if_merges_optional_with_what_it_holds);
    tcase_add_test(tc, ml_ops_shapes);
    tcase_add_test(tc, image_decoder_reads_header_sizes);
    tcase_add_test(tc, image_decoder_without_known_bytes);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
