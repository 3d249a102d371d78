/* test_import.c - the ONNX importer: a table of bad inputs, each of which must
 * fail with a message naming the problem, and good inputs whose details
 * (payload references, IR 3 initializers, symbols, outer names, every
 * attribute kind) must come through.
 *
 * Models are built here with protobuf-c (structs allocated in an arena that
 * each test frees), or are real conformance models cut and corrupted.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "ir/ops.h"
#include "onnx.pb-c.h"

/* ---- building models -------------------------------------------------------- */

static mp_arena *A; /* the current test's protobuf-c structs */

static void setup(void) { A = mp_arena_new(); }
static void teardown(void) { mp_arena_free(A); }

#define NEW(T, INIT) ((T *)mp_arena_dup(A, &(T)INIT, sizeof(T)))
/* Appends item to arr[0..n) (arena copies; fine for tests). */
#define PUSH(arr, n, item)                                                  \
    do {                                                                    \
        void *np_ = mp_arena_alloc(A, ((n) + 1) * sizeof *(arr));           \
        if (n) memcpy(np_, (arr), (n) * sizeof *(arr));                     \
        (arr) = np_;                                                        \
        (arr)[(n)++] = (item);                                              \
    } while (0)

/* Splits "a,b,,c" into strings (empty entries kept: omitted optional names). */
static char **split(const char *list, size_t *n)
{
    char **v = NULL;
    *n = 0;
    if (!list || !*list) return NULL;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        PUSH(v, *n, mp_arena_strndup(A, p, len));
        if (!e) break;
        p = e + 1;
    }
    return v;
}

/* A shape from "N,3,?": numbers are dim_value, names dim_param, ? neither. */
static Onnx__TensorShapeProto *shape(const char *dims)
{
    Onnx__TensorShapeProto *s = NEW(Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    size_t n;
    char **d = split(dims, &n);
    for (size_t i = 0; i < n; i++) {
        Onnx__TensorShapeProto__Dimension *dim =
            NEW(Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if ((d[i][0] >= '0' && d[i][0] <= '9') || d[i][0] == '-') {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = strtoll(d[i], NULL, 10);
        } else if (strcmp(d[i], "?")) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = d[i];
        }
        PUSH(s->dim, s->n_dim, dim);
    }
    return s;
}

static Onnx__TypeProto *tensor_type(int elem, const char *dims)
{
    Onnx__TypeProto *t = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = NEW(Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    t->tensor_type->has_elem_type = 1;
    t->tensor_type->elem_type = elem;
    if (dims) t->tensor_type->shape = shape(dims);
    return t;
}

static Onnx__ValueInfoProto *vi(const char *name, Onnx__TypeProto *type)
{
    Onnx__ValueInfoProto *v = NEW(Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    v->name = mp_arena_strdup(A, name);
    v->type = type;
    return v;
}

static Onnx__GraphProto *graph(const char *name)
{
    Onnx__GraphProto *g = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    g->name = mp_arena_strdup(A, name);
    return g;
}

static void input(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    PUSH(g->input, g->n_input, vi(name, tensor_type(elem, dims)));
}

static void output(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    PUSH(g->output, g->n_output, vi(name, dims || elem ? tensor_type(elem, dims) : NULL));
}

static Onnx__NodeProto *node(Onnx__GraphProto *g, const char *name, const char *op, const char *ins, const char *outs)
{
    Onnx__NodeProto *n = NEW(Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    n->name = name ? mp_arena_strdup(A, name) : NULL;
    n->op_type = op ? mp_arena_strdup(A, op) : NULL;
    n->input = split(ins, &n->n_input);
    n->output = split(outs, &n->n_output);
    if (g) PUSH(g->node, g->n_node, n);
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = NEW(Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    a->name = mp_arena_strdup(A, name);
    a->has_type = 1;
    a->type = type;
    PUSH(n->attribute, n->n_attribute, a);
    return a;
}

/* A tensor with raw_data (data may be NULL: no payload). */
static Onnx__TensorProto *tensor(const char *name, int dtype, const int64_t *dims, size_t rank, const void *data,
                                 size_t bytes)
{
    Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    t->name = name ? mp_arena_strdup(A, name) : NULL;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = rank;
    t->dims = mp_arena_alloc(A, (rank + 1) * sizeof *dims);
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    if (data) {
        t->has_raw_data = 1;
        t->raw_data.len = bytes;
        t->raw_data.data = mp_arena_dup(A, data, bytes);
    }
    return t;
}

static Onnx__TensorProto *initializer(Onnx__GraphProto *g, Onnx__TensorProto *t)
{
    PUSH(g->initializer, g->n_initializer, t);
    return t;
}

static Onnx__ModelProto *model(int64_t ir, int64_t opset, Onnx__GraphProto *g)
{
    Onnx__ModelProto *m = NEW(Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    m->has_ir_version = 1;
    m->ir_version = ir;
    m->producer_name = "test_import";
    Onnx__OperatorSetIdProto *o = NEW(Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    o->domain = "";
    o->has_version = 1;
    o->version = opset;
    PUSH(m->opset_import, m->n_opset_import, o);
    m->graph = g;
    return m;
}

static const float W3[3] = {1, 2, 3};

/* x: float[N,3] + w (initializer float[3]) -> y; Relu(y) -> z; output z. */
static Onnx__ModelProto *base(void)
{
    Onnx__GraphProto *g = graph("main");
    input(g, "x", MP_FLOAT, "N,3");
    initializer(g, tensor("w", MP_FLOAT, (int64_t[]){3}, 1, W3, sizeof W3));
    node(g, "add", "Add", "x,w", "y");
    node(g, "relu", "Relu", "y", "z");
    output(g, "z", MP_FLOAT, "N,3");
    return model(8, 17, g);
}

static uint8_t *pack(const Onnx__ModelProto *m, size_t *n)
{
    *n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = mp_arena_alloc(A, *n + 1);
    onnx__model_proto__pack(m, buf);
    return buf;
}

static mp_model *load_bytes(const uint8_t *buf, size_t n, mp_err *err)
{
    return mp_onnx_load_buffer(buf, n, ".", err);
}

static mp_model *load_model(const Onnx__ModelProto *m, mp_err *err)
{
    size_t n;
    const uint8_t *buf = pack(m, &n);
    return load_bytes(buf, n, err);
}

/* Writes bytes to a fresh temporary file; returns its path (arena). */
static const char *temp_file(const void *p, size_t n)
{
    char *path = mp_arena_strdup(A, "/tmp/mp_test_import_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return path;
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = mp_arena_alloc(A, *n + 1);
    size_t got = fread(buf, 1, *n, f);
    fclose(f);
    return got == *n ? buf : NULL;
}

static const char *shared_model(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/onnx-backend/node/%s/model.onnx", MEMPLAN_SHARED, name);
    return path;
}

/* ---- bad inputs: each returns the load result ------------------------------ */

static mp_model *bad_missing_file(mp_err *err) { return mp_onnx_load("/nonexistent/dir/model.onnx", err); }

static mp_model *bad_empty_file(mp_err *err)
{
    const char *p = temp_file("", 0);
    mp_model *m = mp_onnx_load(p, err);
    unlink(p);
    return m;
}

static mp_model *bad_not_protobuf(mp_err *err)
{
    static const char text[] = "ir_version: 8\ngraph { name: \"not binary\" }\n";
    return load_bytes((const uint8_t *)text, sizeof text - 1, err);
}

static mp_model *bad_truncated(mp_err *err)
{
    size_t n;
    const uint8_t *buf = pack(base(), &n);
    return load_bytes(buf, n / 2, err); /* inside the graph */
}

/* ModelProto.graph (field 7) written as a varint. */
static mp_model *bad_graph_wire_type(mp_err *err)
{
    static const uint8_t bytes[] = {0x08, 0x08, 0x38, 0x01};
    return load_bytes(bytes, sizeof bytes, err);
}

/* graph { node { input: <varint 5> } }: NodeProto.input as a varint. */
static mp_model *bad_node_wire_type(mp_err *err)
{
    static const uint8_t bytes[] = {0x08, 0x08, 0x3a, 0x04, 0x0a, 0x02, 0x08, 0x05};
    return load_bytes(bytes, sizeof bytes, err);
}

static mp_model *bad_no_graph(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph = NULL;
    return load_model(m, err);
}

static mp_model *bad_no_opset(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->n_opset_import = 0;
    return load_model(m, err);
}

static mp_model *bad_order(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__NodeProto *t = m->graph->node[0];
    m->graph->node[0] = m->graph->node[1];
    m->graph->node[1] = t;
    return load_model(m, err);
}

static mp_model *bad_cycle(mp_err *err)
{
    Onnx__GraphProto *g = graph("main");
    input(g, "x", MP_FLOAT, "3");
    node(g, "first", "Add", "x,c", "a");
    node(g, "second", "Relu", "a", "b");
    node(g, "third", "Neg", "b", "c");
    output(g, "b", MP_FLOAT, "3");
    return load_model(model(8, 17, g), err);
}

static mp_model *bad_self_loop(mp_err *err)
{
    Onnx__GraphProto *g = graph("main");
    input(g, "x", MP_FLOAT, "3");
    node(g, "loop", "Add", "x,a", "a");
    output(g, "a", MP_FLOAT, "3");
    return load_model(model(8, 17, g), err);
}

static mp_model *bad_duplicate_output(mp_err *err)
{
    Onnx__ModelProto *m = base();
    node(m->graph, "again", "Neg", "x", "y");
    return load_model(m, err);
}

static mp_model *bad_writes_input(mp_err *err)
{
    Onnx__ModelProto *m = base();
    node(m->graph, "clobber", "Neg", "z", "x");
    return load_model(m, err);
}

static mp_model *bad_writes_initializer(mp_err *err)
{
    Onnx__ModelProto *m = base();
    node(m->graph, "clobber", "Neg", "z", "w");
    return load_model(m, err);
}

static mp_model *bad_output_unproduced(mp_err *err)
{
    Onnx__ModelProto *m = base();
    output(m->graph, "ghost", MP_FLOAT, "3");
    return load_model(m, err);
}

static mp_model *bad_undefined_input(mp_err *err)
{
    Onnx__ModelProto *m = base();
    node(m->graph, "reader", "Neg", "nowhere", "q");
    return load_model(m, err);
}

static mp_model *bad_negative_dim(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->initializer[0]->dims[0] = -3;
    return load_model(m, err);
}

static mp_model *bad_negative_type_dim(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->input[0] = vi("x", tensor_type(MP_FLOAT, "2,-4"));
    return load_model(m, err);
}

static mp_model *bad_dims_overflow(mp_err *err)
{
    Onnx__ModelProto *m = base();
    initializer(m->graph, tensor("huge", MP_FLOAT, (int64_t[]){1ll << 40, 1ll << 40}, 2, W3, sizeof W3));
    return load_model(m, err);
}

static mp_model *bad_raw_length(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->initializer[0]->raw_data.len = 8; /* 2 floats for dims [3] */
    return load_model(m, err);
}

static mp_model *bad_typed_length(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__TensorProto *t = m->graph->initializer[0];
    t->has_raw_data = 0;
    t->n_float_data = 2;
    t->float_data = (float *)W3;
    return load_model(m, err);
}

static mp_model *bad_typed_field(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__TensorProto *t = initializer(m->graph, tensor("shape", MP_INT64, (int64_t[]){3}, 1, NULL, 0));
    t->n_float_data = 3;
    t->float_data = (float *)W3;
    return load_model(m, err);
}

static mp_model *bad_no_data(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->initializer[0]->has_raw_data = 0;
    return load_model(m, err);
}

static mp_model *bad_dtype(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->initializer[0]->data_type = 99;
    return load_model(m, err);
}

static mp_model *bad_elem_type(mp_err *err)
{
    Onnx__ModelProto *m = base();
    m->graph->input[0] = vi("x", tensor_type(77, "N,3"));
    return load_model(m, err);
}

static mp_model *bad_duplicate_initializer(mp_err *err)
{
    Onnx__ModelProto *m = base();
    initializer(m->graph, tensor("w", MP_FLOAT, (int64_t[]){3}, 1, W3, sizeof W3));
    return load_model(m, err);
}

static mp_model *bad_no_op_type(mp_err *err)
{
    Onnx__ModelProto *m = base();
    node(m->graph, "nameless", NULL, "z", "q");
    return load_model(m, err);
}

static mp_model *bad_external_no_location(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__TensorProto *t = m->graph->initializer[0];
    t->has_raw_data = 0;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    return load_model(m, err);
}

static mp_model *bad_attribute_type(mp_err *err)
{
    Onnx__ModelProto *m = base();
    attr(m->graph->node[1], "alpha", (Onnx__AttributeProto__AttributeType)42);
    return load_model(m, err);
}

static mp_model *bad_subgraph_name(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__GraphProto *body = graph("then_body");
    node(body, "inner", "Neg", "undefined_anywhere", "t");
    output(body, "t", MP_FLOAT, NULL);
    Onnx__NodeProto *n = node(m->graph, "branch", "If", "c", "r");
    input(m->graph, "c", MP_BOOL, "");
    attr(n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    attr(n, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    return load_model(m, err);
}

/* If bodies nested far deeper than any real model. */
static mp_model *bad_deep_nesting(mp_err *err)
{
    Onnx__ModelProto *m = base();
    Onnx__GraphProto *inner = graph("leaf");
    for (int i = 0; i < 60; i++) {
        Onnx__GraphProto *outer = graph("level");
        Onnx__NodeProto *n = node(outer, NULL, "If", "c", "r");
        attr(n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
        inner = outer;
    }
    Onnx__NodeProto *n = node(m->graph, "top", "If", "x", "r");
    attr(n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
    return load_model(m, err);
}

static mp_model *bad_rank(mp_err *err)
{
    Onnx__ModelProto *m = base();
    char dims[400] = "1";
    for (int i = 0; i < 80; i++) strcat(dims, ",1");
    m->graph->input[0] = vi("x", tensor_type(MP_FLOAT, dims));
    return load_model(m, err);
}

static const struct bad_case {
    const char *name;
    mp_model *(*load)(mp_err *);
    const char *expect[3]; /* substrings the message must contain */
} bad_cases[] = {
    {"missing file", bad_missing_file, {"cannot open", "/nonexistent/dir/model.onnx", "No such file"}},
    {"empty file", bad_empty_file, {"empty", "0 bytes"}},
    {"not a protobuf", bad_not_protobuf, {"not an ONNX model", "not a protobuf", "starts with text"}},
    {"truncated file", bad_truncated, {"truncated", "field 7"}},
    {"wrong wire type (top)", bad_graph_wire_type, {"graph", "wire type varint", "expected length-delimited"}},
    {"wrong wire type (node)", bad_node_wire_type, {"graph.node[0]", "'input'", "wire type varint"}},
    {"no graph", bad_no_graph, {"no graph"}},
    {"no opset", bad_no_opset, {"no opset"}},
    {"used before produced", bad_order, {"'relu' (Relu)", "uses 'y' before", "'add' (Add)"}},
    {"cycle", bad_cycle, {"cycle", "'first' (Add) -> 'second' (Relu) -> 'third' (Neg) -> 'first' (Add)"}},
    {"self loop", bad_self_loop, {"cycle", "'loop' (Add) -> 'loop' (Add)"}},
    {"duplicate output", bad_duplicate_output, {"duplicate output name", "'y'", "'again' (Neg)"}},
    {"writes an input", bad_writes_input, {"'clobber' (Neg)", "writes 'x'", "graph input"}},
    {"writes an initializer", bad_writes_initializer, {"'clobber' (Neg)", "writes 'w'", "initializer"}},
    {"output nothing produces", bad_output_unproduced, {"graph output 'ghost'", "not produced"}},
    {"undefined input", bad_undefined_input, {"'reader' (Neg)", "'nowhere'"}},
    {"negative dim", bad_negative_dim, {"initializer 'w'", "negative dimension -3"}},
    {"negative type dim", bad_negative_type_dim, {"'x'", "negative dimension -4"}},
    {"dims overflow", bad_dims_overflow, {"initializer 'huge'", "overflows int64"}},
    {"raw_data length", bad_raw_length, {"initializer 'w'", "raw_data holds 8 bytes", "needs 12"}},
    {"typed data length", bad_typed_length, {"initializer 'w'", "float_data holds 2 values", "needs 3"}},
    {"typed field for dtype", bad_typed_field, {"initializer 'shape'", "float_data cannot hold int64"}},
    {"no data", bad_no_data, {"initializer 'w'", "has no data"}},
    {"unknown dtype", bad_dtype, {"initializer 'w'", "unknown data type 99"}},
    {"unknown elem type", bad_elem_type, {"'x'", "unknown element type 77"}},
    {"duplicate initializer", bad_duplicate_initializer, {"initializer 'w'", "twice"}},
    {"node without op_type", bad_no_op_type, {"node #2", "no op_type"}},
    {"external without location", bad_external_no_location, {"initializer 'w'", "no location"}},
    {"attribute type", bad_attribute_type, {"'relu' (Relu)", "'alpha'", "unknown type 42"}},
    {"subgraph undefined name", bad_subgraph_name, {"'branch' (If)", "'then_branch'", "'undefined_anywhere'"}},
    {"deep nesting", bad_deep_nesting, {"nested more than"}},
    {"rank limit", bad_rank, {"'x'", "rank 81"}},
};
enum { NBAD = sizeof bad_cases / sizeof bad_cases[0] };

START_TEST(bad_input_is_rejected)
{
    const struct bad_case *c = &bad_cases[_i];
    mp_err err = {{0}};
    mp_model *m = c->load(&err);
    if (m) mp_onnx_close(m);
    ck_assert_msg(m == NULL, "%s: loaded, expected an error", c->name);
    if (getenv("MP_TEST_VERBOSE")) printf("%-28s %s\n", c->name, err.msg);
    for (int k = 0; k < 3 && c->expect[k]; k++)
        ck_assert_msg(strstr(err.msg, c->expect[k]), "%s: message \"%s\" lacks \"%s\"", c->name, err.msg, c->expect[k]);
}
END_TEST

/* Every prefix and many single-byte corruptions of a real model (with a
 * subgraph) load or fail cleanly: never crash, never hang. */
START_TEST(cut_and_corrupted_models_never_crash)
{
    size_t n;
    uint8_t *orig = read_all(shared_model("test_loop16_seq_none"), &n);
    if (!orig) {
        printf("skipped: %s not found\n", shared_model("test_loop16_seq_none"));
        return;
    }
    mp_err err;
    mp_model *m = load_bytes(orig, n, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_onnx_close(m);
    int failed = 0;
    for (size_t cut = 0; cut < n; cut++) {
        m = load_bytes(orig, cut, &err);
        if (!m) failed++, ck_assert(err.msg[0]);
        mp_onnx_close(m);
    }
    ck_assert_int_gt(failed, (int)n / 2); /* most prefixes are not models */
    uint8_t *buf = mp_arena_alloc(A, n);
    static const uint8_t flips[] = {0x00, 0xff, 0x80, 0x7f, 0x01};
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(buf, orig, n);
            buf[i] = flips[f];
            m = load_bytes(buf, n, &err);
            if (!m) ck_assert(err.msg[0]);
            mp_onnx_close(m);
        }
}
END_TEST

/* ---- good inputs -------------------------------------------------------------- */

START_TEST(base_model_imports)
{
    mp_err err;
    mp_model *m = load_model(base(), &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    ck_assert_int_eq(g->ir_version, 8);
    ck_assert_str_eq(g->producer, "test_import");
    ck_assert_int_eq(mp_graph_opset(g, ""), 17);
    ck_assert_int_eq(g->ninputs, 1);
    ck_assert_int_eq(g->ninits, 1);
    ck_assert_int_eq(g->noutputs, 1);
    ck_assert_int_eq(g->nnodes, 2);
    ck_assert_str_eq(g->nodes[0].name, "add");
    ck_assert_str_eq(g->nodes[1].op_type, "Relu");
    const mp_value *y = mp_val(g, mp_graph_find(g, "y"));
    ck_assert_int_eq(y->producer, 0);
    ck_assert_int_eq(y->ncons, 1);
    ck_assert_int_eq(y->cons[0], 1);
    const mp_value *z = mp_val(g, g->outputs[0]);
    ck_assert_str_eq(z->name, "z");
    ck_assert(z->flags & MP_VAL_OUTPUT);
    ck_assert_int_eq(z->rank, 2); /* the declared output type */
    mp_onnx_close(m);
}
END_TEST

/* Payloads stay in the buffer: raw_data and packed typed fields are found by
 * offset; small ones are also decoded into konst, big float ones are not. */
START_TEST(payloads_are_referenced_not_copied)
{
    Onnx__ModelProto *mp = base();
    int64_t shape_vals[4] = {1, -1, 300, 7};
    initializer(mp->graph, tensor("shape", MP_INT64, (int64_t[]){4}, 1, shape_vals, sizeof shape_vals));
    Onnx__TensorProto *typed = initializer(mp->graph, tensor("typed", MP_INT64, (int64_t[]){3}, 1, NULL, 0));
    typed->n_int64_data = 3;
    typed->int64_data = (int64_t[]){5, -6, 700};
    float big[100];
    for (int i = 0; i < 100; i++) big[i] = (float)i;
    initializer(mp->graph, tensor("big", MP_FLOAT, (int64_t[]){10, 10}, 2, big, sizeof big));
    Onnx__TensorProto *fl = initializer(mp->graph, tensor("fl", MP_FLOAT, (int64_t[]){3}, 1, NULL, 0));
    fl->n_float_data = 3;
    fl->float_data = (float *)W3;
    size_t n;
    const uint8_t *buf = pack(mp, &n);
    mp_err err;
    mp_model *m = load_bytes(buf, n, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    ck_assert_int_eq(g->ninits, 5);

    const mp_value *w = mp_val(g, mp_graph_find(g, "w"));
    ck_assert(w->flags & MP_VAL_INITIALIZER);
    ck_assert_int_eq(w->data.kind, MP_DATA_RAW);
    ck_assert_int_eq(w->data.length, 12);
    ck_assert(!memcmp(buf + w->data.offset, W3, 12));
    ck_assert_ptr_nonnull(w->konst); /* 3 floats: small enough to fold */
    ck_assert(((float *)w->konst->data)[2] == 3.0f);

    const mp_value *s = mp_val(g, mp_graph_find(g, "shape"));
    ck_assert_int_eq(s->data.kind, MP_DATA_RAW);
    ck_assert_ptr_nonnull(s->konst);
    ck_assert_int_eq(mp_tensor_get_i64(s->konst, 1), -1);
    ck_assert_int_eq(mp_tensor_get_i64(s->konst, 2), 300);

    const mp_value *t = mp_val(g, mp_graph_find(g, "typed"));
    ck_assert_int_eq(t->data.kind, MP_DATA_TYPED);
    ck_assert_int_eq(t->data.field, 7);
    ck_assert_int_eq(t->data.length, 1 + 10 + 2); /* varints: 5, -6 (10 bytes), 700 */
    ck_assert_ptr_nonnull(t->konst);
    ck_assert_int_eq(mp_tensor_get_i64(t->konst, 1), -6);

    const mp_value *b = mp_val(g, mp_graph_find(g, "big"));
    ck_assert_int_eq(b->data.kind, MP_DATA_RAW);
    ck_assert_int_eq(b->data.length, 400);
    ck_assert(!memcmp(buf + b->data.offset, big, 400));
    ck_assert_ptr_null(b->konst); /* 100 floats: not folded */
    ck_assert_int_eq(b->bytes, 400);

    const mp_value *f = mp_val(g, mp_graph_find(g, "fl"));
    ck_assert_int_eq(f->data.kind, MP_DATA_TYPED);
    ck_assert_int_eq(f->data.field, 4);
    ck_assert(!memcmp(buf + f->data.offset, W3, 12));
    mp_onnx_close(m);
}
END_TEST

START_TEST(external_data_is_referenced)
{
    Onnx__ModelProto *mp = base();
    Onnx__TensorProto *t = mp->graph->initializer[0];
    t->has_raw_data = 0;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    static const char *kv[][2] = {{"location", "weights.bin"}, {"offset", "4096"}, {"length", "12"}};
    for (int i = 0; i < 3; i++) {
        Onnx__StringStringEntryProto *e = NEW(Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
        e->key = (char *)kv[i][0];
        e->value = (char *)kv[i][1];
        PUSH(t->external_data, t->n_external_data, e);
    }
    size_t n;
    const uint8_t *buf = pack(mp, &n);
    char dir[] = "/tmp/mp_test_import_dirXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_int_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    mp_err err;
    mp_model *m = mp_onnx_load(path, &err);
    unlink(path);
    rmdir(dir);
    ck_assert_msg(m != NULL, "%s", err.msg);
    const mp_value *w = mp_val(m->graph, mp_graph_find(m->graph, "w"));
    ck_assert_int_eq(w->data.kind, MP_DATA_EXTERNAL);
    ck_assert_str_eq(w->data.location, "weights.bin");
    ck_assert_int_eq(w->data.offset, 4096);
    ck_assert_int_eq(w->data.length, 12);
    ck_assert_ptr_null(w->konst);
    ck_assert_str_eq(m->graph->model_dir, dir);
    mp_onnx_close(m);

    /* a length that disagrees with the dims is an error */
    t->external_data[2]->value = "16";
    m = load_model(mp, &err);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(err.msg, "external data length 16"));
}
END_TEST

/* IR 3 lists initializers among the graph inputs: they are initializers. */
START_TEST(ir3_initializers_listed_as_inputs)
{
    Onnx__ModelProto *mp = base();
    mp->ir_version = 3;
    input(mp->graph, "w", MP_FLOAT, "3");
    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    ck_assert_int_eq(g->ninputs, 1);
    ck_assert_str_eq(g->values[g->inputs[0]].name, "x");
    const mp_value *w = mp_val(g, mp_graph_find(g, "w"));
    ck_assert(w->flags & MP_VAL_INITIALIZER);
    ck_assert(!(w->flags & MP_VAL_INPUT));
    mp_onnx_close(m);
}
END_TEST

START_TEST(symbolic_and_unknown_dims)
{
    Onnx__ModelProto *mp = base();
    input(mp->graph, "mask", MP_BOOL, "N,?,seq");
    Onnx__TypeProto *noshape = tensor_type(MP_INT64, NULL);
    PUSH(mp->graph->input, mp->graph->n_input, vi("any", noshape));
    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    const mp_value *x = mp_val(g, mp_graph_find(g, "x")), *mask = mp_val(g, mp_graph_find(g, "mask"));
    ck_assert_int_eq(x->rank, 2);
    ck_assert(!mp_dim_known(x->dims[0]));
    ck_assert_int_ge(x->dims[0].sym, 0);
    ck_assert_int_eq(x->dims[1].v, 3);
    ck_assert_int_eq(mask->dims[0].sym, x->dims[0].sym); /* same name, same symbol */
    ck_assert_int_eq(mask->dims[1].sym, -1);             /* neither value nor name */
    ck_assert_int_eq(mask->dims[1].v, -1);
    ck_assert_str_eq(g->symbols[mask->dims[2].sym], "seq");
    ck_assert_int_eq(mp_val(g, mp_graph_find(g, "any"))->rank, -1);
    ck_assert_int_eq(x->bytes, -1);
    mp_onnx_close(m);
}
END_TEST

static Onnx__TypeProto *wrap(Onnx__TypeProto__ValueCase c, Onnx__TypeProto *elem)
{
    Onnx__TypeProto *t = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    t->value_case = c;
    if (c == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
        t->sequence_type = NEW(Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
        t->sequence_type->elem_type = elem;
    } else {
        t->optional_type = NEW(Onnx__TypeProto__Optional, ONNX__TYPE_PROTO__OPTIONAL__INIT);
        t->optional_type->elem_type = elem;
    }
    return t;
}

START_TEST(sequence_and_optional_types)
{
    Onnx__ModelProto *mp = base();
    PUSH(mp->graph->input, mp->graph->n_input,
         vi("seq", wrap(ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE, tensor_type(MP_INT32, "2,5"))));
    PUSH(mp->graph->input, mp->graph->n_input,
         vi("opt", wrap(ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE,
                        wrap(ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE, tensor_type(MP_FLOAT, "7")))));
    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    const mp_value *s = mp_val(m->graph, mp_graph_find(m->graph, "seq"));
    ck_assert_int_eq(s->kind, MP_KIND_SEQUENCE);
    ck_assert_int_eq(s->dtype, MP_INT32);
    ck_assert_int_eq(s->rank, 2);
    ck_assert_int_eq(s->dims[1].v, 5);
    const mp_value *o = mp_val(m->graph, mp_graph_find(m->graph, "opt"));
    ck_assert_int_eq(o->kind, MP_KIND_OPTIONAL);
    ck_assert_int_eq(o->elem_kind, MP_KIND_SEQUENCE);
    ck_assert_int_eq(o->dtype, MP_FLOAT);
    ck_assert_int_eq(o->dims[0].v, 7);
    mp_onnx_close(m);
}
END_TEST

/* A Loop body reads the main graph's initializer w and input x (outer names),
 * and a nested If inside it reads the body's own value. */
START_TEST(subgraph_outer_names)
{
    Onnx__ModelProto *mp = base();
    Onnx__GraphProto *body = graph("body");
    input(body, "i", MP_INT64, "");
    input(body, "cond_in", MP_BOOL, "");
    node(body, "scale", "Mul", "x,w", "s");
    Onnx__GraphProto *inner = graph("inner");
    node(inner, "neg", "Neg", "s", "t");
    node(inner, "deep", "Add", "t,w", "u");
    output(inner, "u", 0, NULL);
    Onnx__NodeProto *iff = node(body, "branch", "If", "cond_in", "v");
    attr(iff, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
    attr(iff, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
    output(body, "cond_in", MP_BOOL, "");
    output(body, "v", 0, NULL);
    Onnx__NodeProto *loop = node(mp->graph, "loop", "Loop", ",", "scan_out");
    attr(loop, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    const mp_node *ln = &g->nodes[2];
    ck_assert_int_eq(ln->in[0], -1); /* omitted optional inputs */
    const mp_attr *a = mp_node_attr(ln, "body");
    ck_assert_int_eq(a->type, MP_ATTR_GRAPH);
    mp_graph *b = a->graphs[0];
    ck_assert_ptr_eq(b->parent, g);
    ck_assert_str_eq(b->name, "body");
    ck_assert_int_eq(b->ninputs, 2);
    const mp_value *bx = mp_val(b, mp_graph_find(b, "x")), *bw = mp_val(b, mp_graph_find(b, "w"));
    ck_assert(bx->flags & MP_VAL_OUTER);
    ck_assert(bw->flags & MP_VAL_OUTER);
    ck_assert(!(mp_val(b, mp_graph_find(b, "s"))->flags & MP_VAL_OUTER));
    mp_graph *in = mp_node_attr(&b->nodes[1], "then_branch")->graphs[0];
    ck_assert_ptr_eq(in->parent, b);
    ck_assert(mp_val(in, mp_graph_find(in, "s"))->flags & MP_VAL_OUTER); /* from the body */
    ck_assert(mp_val(in, mp_graph_find(in, "w"))->flags & MP_VAL_OUTER); /* from the main graph */
    ck_assert_int_eq(mp_graph_find(b, "t"), -1);                          /* inner names stay inner */
    mp_onnx_close(m);

    /* the main graph producing what the body reads only after the Loop is an order error */
    node(mp->graph, "late", "Neg", "z", "late_value");
    node(body, "reader", "Neg", "late_value", "r");
    m = load_model(mp, &err);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(err.msg, "'loop' (Loop) uses 'late_value' before node 'late' (Neg)"));
}
END_TEST

static mp_model *load_sorted(const Onnx__ModelProto *m, mp_err *err)
{
    size_t n;
    const uint8_t *buf = pack(m, &n);
    mp_onnx_opts o = {.topo_sort = true};
    return mp_onnx_load_buffer_with(buf, n, ".", &o, err);
}

/* Out-of-order nodes are an error by default (the message names the option);
 * with topo_sort they are sorted stably: independent nodes keep the file's
 * order. A cycle stays an error, as does a subgraph reading a value its
 * parent produces later when the parent is sorted. */
START_TEST(topo_sort_is_opt_in_and_stable)
{
    Onnx__GraphProto *g = graph("main");
    input(g, "x", MP_FLOAT, "3");
    node(g, "c", "Relu", "b", "c_out"); /* needs b, which needs a */
    node(g, "b", "Neg", "a_out", "b");
    node(g, "free1", "Abs", "x", "f1");  /* independent: stays before free2 */
    node(g, "a", "Neg", "x", "a_out");
    node(g, "free2", "Abs", "x", "f2");
    output(g, "c_out", MP_FLOAT, "3");
    output(g, "f1", MP_FLOAT, "3");
    output(g, "f2", MP_FLOAT, "3");
    Onnx__ModelProto *mp = model(8, 17, g);
    mp_err err = {{0}};
    ck_assert_ptr_null(load_model(mp, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "'c' (Relu) uses 'b' before node 'b' (Neg)"));
    ck_assert_ptr_nonnull(strstr(err.msg, "--topo-sort"));
    mp_model *m = load_sorted(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    static const char *const want[] = {"free1", "a", "b", "c", "free2"};
    ck_assert_int_eq(m->graph->nnodes, 5);
    for (int i = 0; i < 5; i++) ck_assert_str_eq(m->graph->nodes[i].name, want[i]);
    const mp_value *b = mp_val(m->graph, mp_graph_find(m->graph, "b"));
    ck_assert_int_eq(b->producer, 2); /* links follow the new order */
    ck_assert_int_eq(b->ncons, 1);
    ck_assert_int_eq(b->cons[0], 3);
    mp_onnx_close(m);

    /* an ordered graph is left as it is */
    m = load_sorted(base(), &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_str_eq(m->graph->nodes[0].name, "add");
    mp_onnx_close(m);

    /* a cycle stays an error */
    node(g, "loop1", "Add", "x,loop2_out", "loop1_out");
    node(g, "loop2", "Neg", "loop1_out", "loop2_out");
    ck_assert_ptr_null(load_sorted(mp, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "cycle"));
    ck_assert_ptr_nonnull(strstr(err.msg, "'loop1' (Add) -> 'loop2' (Neg) -> 'loop1' (Add)"));

    /* a subgraph's outer name counts as an edge: the Loop moves after 'late' */
    mp = base();
    Onnx__GraphProto *body = graph("body");
    input(body, "i", MP_INT64, "");
    input(body, "cond_in", MP_BOOL, "");
    node(body, "reader", "Neg", "late_value", "r");
    output(body, "cond_in", MP_BOOL, "");
    output(body, "r", 0, NULL);
    Onnx__NodeProto *loop = node(mp->graph, "loop", "Loop", ",", "scan_out");
    attr(loop, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    node(mp->graph, "late", "Neg", "z", "late_value");
    ck_assert_ptr_null(load_model(mp, &err));
    m = load_sorted(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_str_eq(m->graph->nodes[2].name, "late");
    ck_assert_str_eq(m->graph->nodes[3].name, "loop");
    mp_onnx_close(m);
}
END_TEST

/* The shared out-of-order model: rejected by default, sorted on request.
 * gpt2_past.onnx (two nodes producing '284') stays invalid either way. */
START_TEST(topo_sort_real_model)
{
    const char *bert = MEMPLAN_SHARED "/models/third-party/ort-transformers/bert_toy_optimized.onnx";
    const char *gpt2 = MEMPLAN_SHARED "/models/third-party/ort-transformers/gpt2_past.onnx";
    if (access(bert, R_OK)) return;
    mp_err err = {{0}};
    mp_onnx_opts o = {.topo_sort = true};
    ck_assert_ptr_null(mp_onnx_load(bert, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "topological order"));
    mp_model *m = mp_onnx_load_with(bert, &o, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    for (int32_t i = 0; i < g->nnodes; i++) /* every input is produced earlier */
        for (int32_t k = 0; k < g->nodes[i].nin; k++) {
            const mp_value *v = mp_val(g, g->nodes[i].in[k]);
            ck_assert(!v || v->producer < i);
        }
    mp_onnx_close(m);
    if (access(gpt2, R_OK)) return;
    ck_assert_ptr_null(mp_onnx_load_with(gpt2, &o, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "'284'"));
}
END_TEST

START_TEST(attributes_of_every_kind)
{
    Onnx__ModelProto *mp = base();
    Onnx__NodeProto *n = node(mp->graph, "custom", "Custom", "z", "out");
    n->domain = "test.domain";
    Onnx__AttributeProto *a = attr(n, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = 0.5f;
    a = attr(n, "i", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = -7;
    a = attr(n, "s", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s = (ProtobufCBinaryData){5, (uint8_t *)"hello"};
    a = attr(n, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = tensor(NULL, MP_INT32, (int64_t[]){2}, 1, (int32_t[]){4, 5}, 8);
    Onnx__GraphProto *sub = graph("sub");
    node(sub, "copy", "Identity", "x", "g_out");
    output(sub, "g_out", 0, NULL);
    attr(n, "g", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = sub;
    a = attr(n, "floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = 2;
    a->floats = (float[]){1.5f, 2.5f};
    a = attr(n, "ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = 3;
    a->ints = (int64_t[]){1, -2, 3};
    a = attr(n, "strings", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->n_strings = 2;
    a->strings = (ProtobufCBinaryData[]){{1, (uint8_t *)"a"}, {2, (uint8_t *)"bc"}};
    a = attr(n, "tensors", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS);
    a->n_tensors = 2;
    a->tensors = (Onnx__TensorProto *[]){tensor(NULL, MP_FLOAT, NULL, 0, W3, 4),
                                         tensor(NULL, MP_INT64, (int64_t[]){0}, 1, NULL, 0)};
    a = attr(n, "graphs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS);
    a->n_graphs = 2;
    a->graphs = (Onnx__GraphProto *[]){sub, sub};
    Onnx__SparseTensorProto *sp = NEW(Onnx__SparseTensorProto, ONNX__SPARSE_TENSOR_PROTO__INIT);
    sp->values = tensor(NULL, MP_FLOAT, (int64_t[]){2}, 1, (float[]){7, 8}, 8);
    sp->indices = tensor(NULL, MP_INT64, (int64_t[]){2}, 1, (int64_t[]){1, 5}, 16);
    sp->n_dims = 2;
    sp->dims = (int64_t[]){2, 3};
    attr(n, "sparse", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR)->sparse_tensor = sp;
    attr(n, "tp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO)->tp =
        wrap(ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE, tensor_type(MP_FLOAT16, "4"));
    a = attr(n, "tps", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS);
    a->n_type_protos = 1;
    a->type_protos = (Onnx__TypeProto *[]){tensor_type(MP_BOOL, "")};
    /* IR 1 style: no type, the set field says what it is */
    a = attr(n, "untyped", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED);
    a->has_type = 0;
    a->has_i = 1;
    a->i = 99;

    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    const mp_node *c = &m->graph->nodes[2];
    ck_assert_str_eq(c->domain, "test.domain");
    ck_assert_int_eq(c->nattrs, 14);
    ck_assert(mp_attr_float(c, "f", 0) == 0.5f);
    ck_assert_int_eq(mp_attr_int(c, "i", 0), -7);
    ck_assert_str_eq(mp_attr_str(c, "s", ""), "hello");
    ck_assert_int_eq(mp_node_attr(c, "s")->slen, 5);
    const mp_tensor *t = mp_node_attr(c, "t")->tensors[0];
    ck_assert_int_eq(t->dtype, MP_INT32);
    ck_assert_int_eq(mp_tensor_get_i64(t, 1), 5);
    mp_graph *g = mp_node_attr(c, "g")->graphs[0];
    ck_assert_ptr_eq(g->parent, m->graph);
    ck_assert(mp_val(g, mp_graph_find(g, "x"))->flags & MP_VAL_OUTER);
    ck_assert_int_eq(mp_node_attr(c, "floats")->n, 2);
    ck_assert(mp_node_attr(c, "floats")->floats[1] == 2.5f);
    const int64_t *ints;
    ck_assert_int_eq(mp_attr_ints(c, "ints", &ints), 3);
    ck_assert_int_eq(ints[1], -2);
    ck_assert_str_eq(mp_node_attr(c, "strings")->strings[1], "bc");
    const mp_attr *ts = mp_node_attr(c, "tensors");
    ck_assert_int_eq(ts->n, 2);
    ck_assert_int_eq(ts->tensors[0]->rank, 0);
    ck_assert(*(float *)ts->tensors[0]->data == 1.0f);
    ck_assert_int_eq(ts->tensors[1]->numel, 0);
    ck_assert_int_eq(mp_node_attr(c, "graphs")->n, 2);
    ck_assert_ptr_ne(mp_node_attr(c, "graphs")->graphs[0], mp_node_attr(c, "graphs")->graphs[1]);
    const mp_tensor *dense = mp_node_attr(c, "sparse")->tensors[0];
    ck_assert_int_eq(dense->numel, 6);
    ck_assert(mp_tensor_get_f64(dense, 1) == 7.0 && mp_tensor_get_f64(dense, 5) == 8.0);
    ck_assert(mp_tensor_get_f64(dense, 0) == 0.0);
    const mp_type *tp = mp_node_attr(c, "tp")->types;
    ck_assert_int_eq(tp->kind, MP_KIND_SEQUENCE);
    ck_assert_int_eq(tp->dtype, MP_FLOAT16);
    ck_assert_int_eq(tp->dims[0].v, 4);
    ck_assert_int_eq(mp_node_attr(c, "tps")->types[0].dtype, MP_BOOL);
    ck_assert_int_eq(mp_node_attr(c, "tps")->types[0].rank, 0);
    ck_assert_int_eq(mp_attr_int(c, "untyped", 0), 99);
    mp_onnx_close(m);
}
END_TEST

/* Constant payloads decode up to MP_FOLD_MAX_ELEMS elements; bigger ones keep
 * dtype and dims only. */
START_TEST(constant_payloads_up_to_fold_limit)
{
    Onnx__ModelProto *mp = base();
    size_t big = MP_FOLD_MAX_ELEMS + 1;
    uint8_t *bytes = mp_arena_alloc(A, big);
    bytes[big - 1] = 1;
    attr(node(mp->graph, "small", "Constant", "", "c1"), "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(NULL, MP_UINT8, (int64_t[]){(int64_t)big - 1}, 1, bytes, big - 1);
    attr(node(mp->graph, "large", "Constant", "", "c2"), "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(NULL, MP_UINT8, (int64_t[]){(int64_t)big}, 1, bytes, big);
    mp_err err;
    mp_model *m = load_model(mp, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    const mp_tensor *s = mp_node_attr(&m->graph->nodes[2], "value")->tensors[0];
    const mp_tensor *l = mp_node_attr(&m->graph->nodes[3], "value")->tensors[0];
    ck_assert_ptr_nonnull(s->data);
    ck_assert_int_eq(s->numel, MP_FOLD_MAX_ELEMS);
    ck_assert_ptr_null(l->data);
    ck_assert_int_eq(l->dims[0], MP_FOLD_MAX_ELEMS + 1);
    mp_onnx_close(m);
}
END_TEST

START_TEST(read_tensor_decodes_test_data)
{
    Onnx__TensorProto *t = tensor("out", MP_FLOAT16, (int64_t[]){2, 2}, 2, NULL, 0);
    t->n_int32_data = 4;
    t->int32_data = (int32_t[]){0x3c00, 0x4000, 0, 0xbc00}; /* 1, 2, 0, -1 */
    size_t n = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = mp_arena_alloc(A, n);
    onnx__tensor_proto__pack(t, buf);
    mp_err err;
    mp_tensor *x = mp_onnx_read_tensor(A, buf, n, true, &err);
    ck_assert_msg(x != NULL, "%s", err.msg);
    ck_assert_int_eq(x->dtype, MP_FLOAT16);
    ck_assert_int_eq(x->rank, 2);
    ck_assert_int_eq(x->numel, 4);
    ck_assert(mp_tensor_get_f64(x, 1) == 2.0 && mp_tensor_get_f64(x, 3) == -1.0);
    x = mp_onnx_read_tensor(A, buf, n, false, &err);
    ck_assert_ptr_null(x->data);
    ck_assert_ptr_null(mp_onnx_read_tensor(A, buf, n - 1, true, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "malformed"));
}
END_TEST

/* Packs t and decodes it back with data (NULL and err set when rejected). */
static mp_tensor *round_trip(Onnx__TensorProto *t, mp_err *err)
{
    size_t n = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = mp_arena_alloc(A, n + 1);
    onnx__tensor_proto__pack(t, buf);
    return mp_onnx_read_tensor(A, buf, n, true, err);
}

/* 2- and 4-bit tensors: four (two) elements per raw byte, low bits first, and
 * one packed byte per int32_data value; signed types sign-extend. Sizes that
 * count elements instead of packed bytes are rejected. */
START_TEST(sub_byte_tensors_decode)
{
    static const struct {
        int dtype;
        int64_t numel;
        uint8_t packed[2];
        int8_t want[7];
    } cases[] = {
        {MP_UINT2, 7, {0x39, 0x39}, {1, 2, 3, 0, 1, 2, 3}},
        {MP_INT2, 7, {0x39, 0x39}, {1, -2, -1, 0, 1, -2, -1}},
        {MP_UINT4, 3, {0x9f, 0x07}, {15, 9, 7}},
        {MP_INT4, 3, {0x9f, 0x07}, {-1, -7, 7}},
    };
    mp_err err = {{0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t n = cases[k].numel;
        for (int typed = 0; typed < 2; typed++) {
            Onnx__TensorProto *t = tensor("q", cases[k].dtype, &n, 1, typed ? NULL : cases[k].packed, 2);
            if (typed) {
                t->n_int32_data = 2;
                t->int32_data = mp_arena_alloc(A, 2 * sizeof *t->int32_data);
                t->int32_data[0] = cases[k].packed[0];
                t->int32_data[1] = cases[k].packed[1];
            }
            mp_tensor *x = round_trip(t, &err);
            ck_assert_msg(x != NULL, "%s: %s", mp_dtype_name(cases[k].dtype), err.msg);
            ck_assert_int_eq(x->numel, n);
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(((int8_t *)x->data)[i] == cases[k].want[i], "%s %s [%lld]: %d, want %d",
                              mp_dtype_name(cases[k].dtype), typed ? "int32_data" : "raw_data", (long long)i,
                              ((int8_t *)x->data)[i], cases[k].want[i]);
        }
    }
    /* numel bytes (the old mistake) is not the packed size */
    uint8_t seven[7] = {0};
    ck_assert_ptr_null(round_trip(tensor("q", MP_INT2, (int64_t[]){7}, 1, seven, sizeof seven), &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "raw_data holds 7 bytes"));
    ck_assert_ptr_nonnull(strstr(err.msg, "needs 2"));
    Onnx__TensorProto *t = tensor("q", MP_UINT2, (int64_t[]){9}, 1, NULL, 0);
    t->n_int32_data = 2; /* 9 elements need 3 packed bytes */
    t->int32_data = (int32_t[]){0, 0};
    ck_assert_ptr_null(round_trip(t, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "int32_data holds 2 values"));
    /* float8e8m0: one byte per element, in raw_data or int32_data */
    t = tensor("s", MP_FLOAT8E8M0, (int64_t[]){2}, 1, NULL, 0);
    t->n_int32_data = 2;
    t->int32_data = (int32_t[]){0x7f, 0x80};
    mp_tensor *x = round_trip(t, &err);
    ck_assert_msg(x != NULL, "%s", err.msg);
    ck_assert_int_eq(((uint8_t *)x->data)[1], 0x80);
    ck_assert_str_eq(mp_dtype_name(MP_FLOAT8E8M0), "float8e8m0");
    ck_assert_int_eq(mp_dtype_bytes(MP_INT2, 9), 3);
    ck_assert_int_eq(mp_dtype_bytes(MP_UINT2, 8), 2);
}
END_TEST

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t k = 0;
    for (; v >= 0x80; v >>= 7) out[k++] = (uint8_t)(v | 0x80);
    out[k++] = (uint8_t)v;
    return k;
}

/* Appends a length-delimited field's tag and length. */
static size_t put_len(uint8_t *out, uint32_t field, uint64_t len)
{
    size_t k = put_varint(out, (uint64_t)field << 3 | 2);
    return k + put_varint(out + k, len);
}

/* A model with 256 MB of inline raw_data: the import must not copy it. */
START_TEST(inline_weights_are_not_copied)
{
    const size_t mib = 1 << 20, raw = 256 * mib;
    Onnx__ModelProto *mp = base();
    Onnx__GraphProto *g = mp->graph;
    /* file: model fields | graph tag | graph fields | initializer tag | tensor fields | raw_data tag | zeros */
    Onnx__TensorProto *big = tensor("big", MP_FLOAT, (int64_t[]){(int64_t)(raw / 4)}, 1, NULL, 0);
    size_t tn = onnx__tensor_proto__get_packed_size(big), gn = onnx__graph_proto__get_packed_size(g), mn;
    uint8_t *tbytes = mp_arena_alloc(A, tn), *gbytes = mp_arena_alloc(A, gn);
    onnx__tensor_proto__pack(big, tbytes);
    onnx__graph_proto__pack(g, gbytes);
    mp->graph = NULL;
    const uint8_t *mbytes = pack(mp, &mn);
    uint8_t rawtag[16], inittag[16], graphtag[16];
    size_t rk = put_len(rawtag, 9, raw);
    size_t ik = put_len(inittag, 5, tn + rk + raw);
    size_t gk = put_len(graphtag, 7, gn + ik + tn + rk + raw);
    char path[] = "/tmp/mp_test_import_bigXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "wb");
    fwrite(mbytes, 1, mn, f);
    fwrite(graphtag, 1, gk, f);
    fwrite(gbytes, 1, gn, f);
    fwrite(inittag, 1, ik, f);
    fwrite(tbytes, 1, tn, f);
    fwrite(rawtag, 1, rk, f);
    uint8_t *zero = calloc(1, mib);
    for (size_t i = 0; i < raw / mib; i++) fwrite(zero, 1, mib, f);
    free(zero);
    ck_assert_int_eq(ftell(f), (long)(mn + gk + gn + ik + tn + rk + raw));
    fclose(f);

    long before = max_rss_kb();
    mp_err err;
    mp_model *m = mp_onnx_load(path, &err);
    long after = max_rss_kb();
    unlink(path);
    ck_assert_msg(m != NULL, "%s", err.msg);
    const mp_value *v = mp_val(m->graph, mp_graph_find(m->graph, "big"));
    ck_assert_int_eq(v->data.kind, MP_DATA_RAW);
    ck_assert_int_eq(v->data.length, (int64_t)raw);
    ck_assert_int_eq(v->data.offset, (int64_t)(mn + gk + gn + ik + tn + rk));
    ck_assert_int_eq(v->bytes, (int64_t)raw);
    ck_assert_int_eq(m->graph->nnodes, 2);
    mp_onnx_close(m);
    /* a copying importer grows by >= 256 MiB; allow a tenth of it */
    ck_assert_msg(after - before < (long)(raw / 1024 / 10), "RSS grew by %ld KiB for a %zu MiB model", after - before,
                  raw / mib);
}
END_TEST

/* Every model of the conformance suites imports (their shapes are checked by
 * test_conformance), except those using an element type mp_dtype lacks. */
START_TEST(all_conformance_models_import)
{
    char list[512];
    snprintf(list, sizeof list, "ls -d %s/onnx-backend/*/test_*/model.onnx %s/onnx-backend/light/*.onnx 2>/dev/null",
             MEMPLAN_SHARED, MEMPLAN_SHARED);
    FILE *p = popen(list, "r");
    ck_assert_ptr_nonnull(p);
    char path[1024];
    int n = 0;
    while (fgets(path, sizeof path, p)) {
        path[strcspn(path, "\n")] = 0;
        mp_err err;
        mp_model *m = mp_onnx_load(path, &err);
        if (!m) ck_assert_msg(strstr(err.msg, "unknown element type") || strstr(err.msg, "unknown data type"), "%s", err.msg);
        else n++;
        mp_onnx_close(m);
    }
    pclose(p);
    if (!n) printf("skipped: no conformance models under %s\n", MEMPLAN_SHARED);
    else ck_assert_int_gt(n, 1800);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("import");
    TCase *bad = tcase_create("bad");
    tcase_add_checked_fixture(bad, setup, teardown);
    tcase_add_loop_test(bad, bad_input_is_rejected, 0, NBAD);
    tcase_add_test(bad, cut_and_corrupted_models_never_crash);
    tcase_set_timeout(bad, 300);
    suite_add_tcase(s, bad);
    TCase *good = tcase_create("good");
    tcase_add_checked_fixture(good, setup, teardown);
    tcase_add_test(good, base_model_imports);
    tcase_add_test(good, payloads_are_referenced_not_copied);
    tcase_add_test(good, external_data_is_referenced);
    tcase_add_test(good, ir3_initializers_listed_as_inputs);
    tcase_add_test(good, symbolic_and_unknown_dims);
    tcase_add_test(good, sequence_and_optional_types);
    tcase_add_test(good, subgraph_outer_names);
    tcase_add_test(good, topo_sort_is_opt_in_and_stable);
    tcase_add_test(good, topo_sort_real_model);
    tcase_add_test(good, attributes_of_every_kind);
    tcase_add_test(good, constant_payloads_up_to_fold_limit);
    tcase_add_test(good, read_tensor_decodes_test_data);
    tcase_add_test(good, sub_byte_tensors_decode);
    tcase_add_test(good, inline_weights_are_not_copied);
    tcase_add_test(good, all_conformance_models_import);
    tcase_set_timeout(good, 300);
    suite_add_tcase(s, good);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
