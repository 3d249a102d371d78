/* onnx_builder.c - builds Onnx__ModelProto messages in an arena and packs them. See onnx_builder.h. */
#include "onnx_builder.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OB_MAX_DEPTH = 16, OB_MAX_NAME = 256, OB_MAX_ATTRS = 8, OB_MAX_OUTS = 4 };

typedef struct ob_count {
    const char *key;  /* "<scope>/<OpType>" */
    int used;         /* nodes already named from this key */
} ob_count;

struct mp_ob {
    mp_arena *arena;  /* every message, string and array of the model */
    const char *graph_name;
    Onnx__NodeProto **nodes;
    Onnx__TensorProto **inits;
    Onnx__ValueInfoProto **inputs, **outputs;
    size_t n_nodes, cap_nodes, n_inits, cap_inits, n_inputs, cap_inputs, n_outputs, cap_outputs;
    ob_count *counts;
    size_t n_counts, cap_counts;
    /* scope "/blocks.0/attn" for nodes and prefix "blocks.0.attn." for parameters */
    char scope[OB_MAX_NAME], prefix[OB_MAX_NAME];
    size_t scope_len[OB_MAX_DEPTH], prefix_len[OB_MAX_DEPTH];
    int depth;
    const char *ext_location;  /* NULL: every parameter inline */
    int64_t ext_min_bytes, ext_offset;
    int64_t params;
};

/* Appends item to a typed arena array, doubling its capacity (the old block is simply left in the arena). */
#define OB_PUSH(b, arr, n, cap, item)                                        \
    do {                                                                     \
        if ((n) == (cap)) {                                                  \
            (cap) = (cap) ? 2 * (cap) : 16;                                  \
            void *grown_ = mp_arena_alloc((b)->arena, (cap) * sizeof *(arr)); \
            if (n) memcpy(grown_, (arr), (n) * sizeof *(arr));               \
            (arr) = grown_;                                                  \
        }                                                                    \
        (arr)[(n)++] = (item);                                               \
    } while (0)

mp_ob *mp_ob_new(const char *graph_name)
{
    mp_arena *a = mp_arena_new();
    mp_ob *b = mp_arena_alloc(a, sizeof *b);
    b->arena = a;
    b->graph_name = mp_arena_strdup(a, graph_name);
    return b;
}

void mp_ob_free(mp_ob *b)
{
    if (b) mp_arena_free(b->arena);
}

void mp_ob_set_external(mp_ob *b, const char *location, int64_t min_bytes)
{
    b->ext_location = mp_arena_strdup(b->arena, location);
    b->ext_min_bytes = min_bytes;
}

/* ---- scopes -------------------------------------------------------------- */

void mp_ob_push(mp_ob *b, const char *module)
{
    assert(b->depth < OB_MAX_DEPTH);
    size_t s = strlen(b->scope), p = strlen(b->prefix);
    b->scope_len[b->depth] = s;
    b->prefix_len[b->depth] = p;
    b->depth++;
    int ns = snprintf(b->scope + s, sizeof b->scope - s, "/%s", module);
    int np = snprintf(b->prefix + p, sizeof b->prefix - p, "%s.", module);
    assert(ns > 0 && (size_t)ns < sizeof b->scope - s && np > 0 && (size_t)np < sizeof b->prefix - p);
    (void)ns, (void)np;
}

void mp_ob_pop(mp_ob *b)
{
    assert(b->depth > 0);
    b->depth--;
    b->scope[b->scope_len[b->depth]] = 0;
    b->prefix[b->prefix_len[b->depth]] = 0;
}

/* ---- graph inputs and outputs -------------------------------------------- */

static Onnx__ValueInfoProto *ob_value_info(mp_ob *b, const char *name, mp_dtype t, int rank,
                                           const char *const *dims)
{
    mp_arena *a = b->arena;
    Onnx__TensorShapeProto *shape = mp_arena_alloc(a, sizeof *shape);
    onnx__tensor_shape_proto__init(shape);
    shape->n_dim = (size_t)rank;
    shape->dim = mp_arena_alloc(a, (size_t)rank * sizeof *shape->dim + 1);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = mp_arena_alloc(a, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        char *end;
        long long v = strtoll(dims[i], &end, 10);
        if (*dims[i] && !*end) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v;
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = mp_arena_strdup(a, dims[i]);
        }
        shape->dim[i] = d;
    }
    Onnx__TypeProto__Tensor *tt = mp_arena_alloc(a, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t;
    tt->shape = shape;
    Onnx__TypeProto *type = mp_arena_alloc(a, sizeof *type);
    onnx__type_proto__init(type);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    Onnx__ValueInfoProto *vi = mp_arena_alloc(a, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = mp_arena_strdup(a, name);
    vi->type = type;
    return vi;
}

const char *mp_ob_input(mp_ob *b, const char *name, mp_dtype t, int rank, const char *const *dims)
{
    Onnx__ValueInfoProto *vi = ob_value_info(b, name, t, rank, dims);
    OB_PUSH(b, b->inputs, b->n_inputs, b->cap_inputs, vi);
    return vi->name;
}

/* Renames every use of a value, as torch does when it names the graph outputs. */
const char *mp_ob_output(mp_ob *b, const char *value, const char *name, mp_dtype t, int rank,
                         const char *const *dims)
{
    Onnx__ValueInfoProto *vi = ob_value_info(b, name, t, rank, dims);
    char *old = mp_arena_strdup(b->arena, value);  /* value may point into a name we overwrite */
    for (size_t i = 0; i < b->n_nodes; i++) {
        Onnx__NodeProto *n = b->nodes[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (!strcmp(n->input[k], old)) n->input[k] = vi->name;
        for (size_t k = 0; k < n->n_output; k++)
            if (!strcmp(n->output[k], old)) n->output[k] = vi->name;
    }
    OB_PUSH(b, b->outputs, b->n_outputs, b->cap_outputs, vi);
    return vi->name;
}

/* ---- parameters ---------------------------------------------------------- */

/* splitmix64: a tiny PRNG whose stream is fixed by its seed on every platform. */
static uint64_t ob_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t ob_hash(const char *s)  /* FNV-1a: seeds a parameter by its name, not its order */
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

static void ob_put_f32(uint8_t *p, float f)  /* ONNX raw_data is little-endian */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}

static Onnx__StringStringEntryProto *ob_entry(mp_ob *b, const char *key, const char *value)
{
    Onnx__StringStringEntryProto *e = mp_arena_alloc(b->arena, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = mp_arena_strdup(b->arena, key);
    e->value = mp_arena_strdup(b->arena, value);
    return e;
}

/* uniform: values in [-bound, bound) from the name's stream; otherwise all equal to value. */
static const char *ob_param(mp_ob *b, const char *name, int rank, const int64_t *dims, bool uniform,
                            float value)
{
    mp_arena *a = b->arena;
    Onnx__TensorProto *t = mp_arena_alloc(a, sizeof *t);
    onnx__tensor_proto__init(t);
    size_t p = strlen(b->prefix);
    char *full = mp_arena_alloc(a, p + strlen(name) + 1);
    memcpy(full, b->prefix, p);
    strcpy(full + p, name);
    t->name = full;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = mp_arena_dup(a, dims, (size_t)rank * sizeof *dims);
    int64_t count = 1, bytes;
    for (int i = 0; i < rank; i++) {
        bool ok = mp_mul_ok(count, dims[i], &count);
        assert(ok && dims[i] >= 0);
        (void)ok;
    }
    bool ok = mp_mul_ok(count, 4, &bytes) && mp_add_ok(b->params, count, &b->params);
    assert(ok);
    (void)ok;

    if (b->ext_location && bytes >= b->ext_min_bytes) {
        char num[32];
        t->n_external_data = 3;
        t->external_data = mp_arena_alloc(a, 3 * sizeof *t->external_data);
        t->external_data[0] = ob_entry(b, "location", b->ext_location);
        snprintf(num, sizeof num, "%" PRId64, b->ext_offset);
        t->external_data[1] = ob_entry(b, "offset", num);
        snprintf(num, sizeof num, "%" PRId64, bytes);
        t->external_data[2] = ob_entry(b, "length", num);
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        b->ext_offset += bytes;
    } else {
        uint8_t *raw = mp_arena_alloc(a, (size_t)bytes + 1);
        uint64_t state = ob_hash(full);
        /* A 24-bit signed integer times one float scale: a single rounding, so the
         * values cannot depend on the compiler contracting into FMAs. */
        float scale = value / 8388608.0f;  /* exact: a power of two */
        for (int64_t i = 0; i < count; i++) {
            float v = value;
            if (uniform) v = (float)((int32_t)(ob_next(&state) >> 40) - 8388608) * scale;
            ob_put_f32(raw + 4 * i, v);
        }
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)bytes;
        t->raw_data.data = raw;
    }
    OB_PUSH(b, b->inits, b->n_inits, b->cap_inits, t);
    return t->name;
}

const char *mp_ob_param_uniform(mp_ob *b, const char *name, int rank, const int64_t *dims, float bound)
{
    return ob_param(b, name, rank, dims, true, bound);
}

const char *mp_ob_param_fill(mp_ob *b, const char *name, int rank, const int64_t *dims, float value)
{
    return ob_param(b, name, rank, dims, false, value);
}

/* ---- nodes --------------------------------------------------------------- */

/* "<scope>/<op>", then "<scope>/<op>_1", "_2", ... as torch numbers repeats within a scope. */
static char *ob_node_name(mp_ob *b, const char *op)
{
    char key[OB_MAX_NAME + 64];
    snprintf(key, sizeof key, "%s/%s", b->scope, op);
    ob_count *c = NULL;
    for (size_t i = 0; i < b->n_counts && !c; i++)
        if (!strcmp(b->counts[i].key, key)) c = &b->counts[i];
    if (!c) {
        ob_count fresh = {mp_arena_strdup(b->arena, key), 0};
        OB_PUSH(b, b->counts, b->n_counts, b->cap_counts, fresh);
        c = &b->counts[b->n_counts - 1];
    }
    char name[OB_MAX_NAME + 96];
    if (c->used) snprintf(name, sizeof name, "%s_%d", key, c->used);
    else snprintf(name, sizeof name, "%s", key);
    c->used++;
    return mp_arena_strdup(b->arena, name);
}

Onnx__NodeProto *mp_ob_node(mp_ob *b, const char *op, int n_out, int n_in, const char *const *in)
{
    assert(n_out >= 1 && n_out <= OB_MAX_OUTS && n_in >= 0);
    mp_arena *a = b->arena;
    Onnx__NodeProto *n = mp_arena_alloc(a, sizeof *n);
    onnx__node_proto__init(n);
    n->name = ob_node_name(b, op);
    n->op_type = mp_arena_strdup(a, op);
    n->n_input = (size_t)n_in;
    n->input = mp_arena_alloc(a, (size_t)n_in * sizeof *n->input + 1);
    for (int i = 0; i < n_in; i++) n->input[i] = mp_arena_strdup(a, in[i]);
    n->n_output = (size_t)n_out;
    n->output = mp_arena_alloc(a, (size_t)n_out * sizeof *n->output);
    for (int i = 0; i < n_out; i++) {
        char out[OB_MAX_NAME + 128];
        snprintf(out, sizeof out, "%s_output_%d", n->name, i);
        n->output[i] = mp_arena_strdup(a, out);
    }
    n->attribute = mp_arena_alloc(a, OB_MAX_ATTRS * sizeof *n->attribute);
    OB_PUSH(b, b->nodes, b->n_nodes, b->cap_nodes, n);
    return n;
}

const char *mp_ob_op(mp_ob *b, const char *op, int n_in, const char *const *in)
{
    return mp_ob_node(b, op, 1, n_in, in)->output[0];
}

static Onnx__AttributeProto *ob_attr(mp_ob *b, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    assert(n->n_attribute < OB_MAX_ATTRS);
    Onnx__AttributeProto *at = mp_arena_alloc(b->arena, sizeof *at);
    onnx__attribute_proto__init(at);
    at->name = mp_arena_strdup(b->arena, name);
    at->has_type = 1;
    at->type = type;
    n->attribute[n->n_attribute++] = at;
    return at;
}

void mp_ob_attr_int(mp_ob *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *at = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    at->has_i = 1;
    at->i = v;
}

void mp_ob_attr_float(mp_ob *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *at = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = v;
}

void mp_ob_attr_ints(mp_ob *b, Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    Onnx__AttributeProto *at = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    at->n_ints = (size_t)count;
    at->ints = mp_arena_dup(b->arena, v, (size_t)count * sizeof *v);
}

void mp_ob_attr_floats(mp_ob *b, Onnx__NodeProto *n, const char *name, int count, const float *v)
{
    Onnx__AttributeProto *at = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    at->n_floats = (size_t)count;
    at->floats = mp_arena_dup(b->arena, v, (size_t)count * sizeof *v);
}

void mp_ob_attr_str(mp_ob *b, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *at = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    at->has_s = 1;
    at->s.len = strlen(v);
    at->s.data = (uint8_t *)mp_arena_strdup(b->arena, v);
}

/* A small tensor of rank 0 (count 1) or rank 1 whose bytes are already little-endian. */
static Onnx__TensorProto *ob_small_tensor(mp_ob *b, mp_dtype t, int rank, int count, const void *le_bytes,
                                          size_t bytes)
{
    assert(rank == 0 ? count == 1 : rank == 1);
    Onnx__TensorProto *v = mp_arena_alloc(b->arena, sizeof *v);
    onnx__tensor_proto__init(v);
    v->has_data_type = 1;
    v->data_type = (int32_t)t;
    v->n_dims = (size_t)rank;
    v->dims = mp_arena_alloc(b->arena, sizeof *v->dims);
    v->dims[0] = count;
    v->has_raw_data = 1;
    v->raw_data.len = bytes;
    v->raw_data.data = mp_arena_dup(b->arena, le_bytes, bytes);
    return v;
}

void mp_ob_attr_tensor_f32(mp_ob *b, Onnx__NodeProto *n, const char *name, float v)
{
    uint8_t raw[4];
    ob_put_f32(raw, v);
    ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = ob_small_tensor(b, MP_FLOAT, 1, 1, raw, 4);
}

/* A Constant node whose `value` holds the tensor. */
static const char *ob_const(mp_ob *b, mp_dtype t, int rank, int count, const void *le_bytes, size_t bytes)
{
    Onnx__NodeProto *n = mp_ob_node(b, "Constant", 1, 0, NULL);
    ob_attr(b, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        ob_small_tensor(b, t, rank, count, le_bytes, bytes);
    return n->output[0];
}

const char *mp_ob_const_i64(mp_ob *b, int rank, int count, const int64_t *v)
{
    uint8_t raw[8 * 16];
    assert(count >= 1 && count <= 16);
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 8; k++) raw[8 * i + k] = (uint8_t)((uint64_t)v[i] >> (8 * k));
    return ob_const(b, MP_INT64, rank, count, raw, 8 * (size_t)count);
}

const char *mp_ob_const_f32(mp_ob *b, float v)
{
    uint8_t raw[4];
    ob_put_f32(raw, v);
    return ob_const(b, MP_FLOAT, 0, 1, raw, 4);
}

/* ---- summary and output -------------------------------------------------- */

int64_t mp_ob_param_count(const mp_ob *b) { return b->params; }
int mp_ob_node_count(const mp_ob *b) { return (int)b->n_nodes; }

int64_t mp_ob_write(mp_ob *b, const char *path, mp_err *err)
{
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)b->graph_name;
    graph.n_node = b->n_nodes, graph.node = b->nodes;
    graph.n_initializer = b->n_inits, graph.initializer = b->inits;
    graph.n_input = b->n_inputs, graph.input = b->inputs;
    graph.n_output = b->n_outputs, graph.output = b->outputs;

    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 17;

    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.producer_name = "memplan-models";
    model.producer_version = "1";
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;

    size_t size = onnx__model_proto__get_packed_size(&model);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return mp_fail(err, "%s: out of memory packing %zu bytes", path, size);
    onnx__model_proto__pack(&model, buf);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return mp_fail(err, "%s: cannot create: %s", path, strerror(errno));
    }
    size_t wrote = fwrite(buf, 1, size, f);
    int closed = fclose(f);
    free(buf);
    if (wrote != size || closed != 0) return mp_fail(err, "%s: write failed: %s", path, strerror(errno));
    return (int64_t)size;
}
