/* onnx_import.c - ONNX ModelProto -> mp_graph.
 *
 * The file is mapped read-only and loaded in four passes:
 *   1. validate the whole message against protobuf-c's descriptors at the wire
 *      level (mp_wire_check), so a bad file gets one message saying where;
 *   2. copy the model minus the payloads of the top-level initializers
 *      (raw_data, packed float_data, ...), recording where each payload is in
 *      the file instead: weights are never copied;
 *   3. unpack that copy with protobuf-c;
 *   4. build the graph (import_graph), checking names, order and types.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "frontend/wire.h"
#include "ir/ops.h"   /* defines: MP_FOLD_MAX_ELEMS */
#include "onnx.pb-c.h"

enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW = 9 };

/* Where a top-level initializer is in the buffer, and its dropped payload. */
typedef struct init_src {
    const uint8_t *start;
    size_t len;
    mp_onnx_payload pl;
} init_src;

typedef struct importer {
    const uint8_t *buf;
    size_t size;
    init_src *inits;
    size_t ninits, capinits;
    bool topo_sort;  /* mp_onnx_opts.topo_sort */
    mp_err *err;
} importer;

/* A dependency a node has through the outer names its subgraphs use. */
typedef struct dep {
    int32_t node, value;
} dep;

typedef struct deps {
    dep *v;
    int32_t n, cap;
} deps;

static int import_graph(importer *im, mp_graph *g, const Onnx__GraphProto *gp, const init_src *srcs, size_t nsrcs);

/* ---- pass 2: the model minus initializer payloads ---------------------- */

/* The protobuf-c type of each packed payload field, to count its elements. */
static ProtobufCType payload_type(uint32_t field)
{
    switch (field) {
    case 4: return PROTOBUF_C_TYPE_FLOAT;
    case 5: return PROTOBUF_C_TYPE_INT32;
    case 7: return PROTOBUF_C_TYPE_INT64;
    case 10: return PROTOBUF_C_TYPE_DOUBLE;
    case 11: return PROTOBUF_C_TYPE_UINT64;
    default: return PROTOBUF_C_TYPE_BYTES;
    }
}

static bool is_payload_field(uint32_t f) { return f == TENSOR_RAW || payload_type(f) != PROTOBUF_C_TYPE_BYTES; }

/* Appends the TensorProto [p, p+n) to out without its payload, and records
 * where the payload is. raw_data is always dropped (the last one counts, as in
 * protobuf); a typed field only when it is one packed run, else protobuf-c
 * decodes it (never written that way by ONNX's own writers). */
static void filter_tensor(importer *im, const uint8_t *p, size_t n, mp_wbuf *out)
{
    init_src src = {p, n, {0}};
    int packed[12] = {0}, loose[12] = {0};
    mp_wire w = {p, p + n, im->buf, MP_WIRE_OK};
    mp_wire_field f, raw = {0}, typed[12];
    while (mp_wire_next(&w, &f) > 0) {
        if (!is_payload_field(f.num)) continue;
        if (f.type != MP_WIRE_LEN) {
            loose[f.num]++;
            continue;
        }
        packed[f.num]++;
        if (f.num == TENSOR_RAW) raw = f;
        typed[f.num] = f;
    }
    uint32_t drop = 0;
    if (packed[TENSOR_RAW]) {
        drop = TENSOR_RAW;
        src.pl = (mp_onnx_payload){TENSOR_RAW, raw.data - im->buf, (int64_t)raw.len, (int64_t)raw.len};
    } else {
        static const uint32_t order[] = {4, 5, 7, 10, 11};
        for (size_t k = 0; k < sizeof order / sizeof *order && !drop; k++) {
            uint32_t t = order[k];
            if (packed[t] != 1 || loose[t]) continue;
            drop = t;
            src.pl = (mp_onnx_payload){(int)t, typed[t].data - im->buf, (int64_t)typed[t].len,
                                       mp_wire_packed_count(payload_type(t), typed[t].data, typed[t].len)};
        }
    }
    /* the kept length first, for the length prefix */
    size_t kept = 0;
    w = (mp_wire){p, p + n, im->buf, MP_WIRE_OK};
    while (mp_wire_next(&w, &f) > 0)
        if (!(f.num == drop && f.type == MP_WIRE_LEN)) kept += (size_t)(f.end - f.start);
    mp_wbuf_varint(out, (uint64_t)GRAPH_INITIALIZER << 3 | MP_WIRE_LEN);
    mp_wbuf_varint(out, kept);
    w = (mp_wire){p, p + n, im->buf, MP_WIRE_OK};
    while (mp_wire_next(&w, &f) > 0)
        if (!(f.num == drop && f.type == MP_WIRE_LEN)) mp_wbuf_put(out, f.start, (size_t)(f.end - f.start));

    if (im->ninits == im->capinits) {
        im->capinits = im->capinits ? im->capinits * 2 : 64;
        init_src *v = realloc(im->inits, im->capinits * sizeof *v);
        if (!v) abort();
        im->inits = v;
    }
    im->inits[im->ninits++] = src;
}

static void filter_graph(importer *im, const uint8_t *p, size_t n, mp_wbuf *out)
{
    mp_wire w = {p, p + n, im->buf, MP_WIRE_OK};
    mp_wire_field f;
    while (mp_wire_next(&w, &f) > 0) {
        if (f.num == GRAPH_INITIALIZER && f.type == MP_WIRE_LEN)
            filter_tensor(im, f.data, f.len, out);
        else
            mp_wbuf_put(out, f.start, (size_t)(f.end - f.start));
    }
}

static void filter_model(importer *im, mp_wbuf *out)
{
    mp_wire w = {im->buf, im->buf + im->size, im->buf, MP_WIRE_OK};
    mp_wire_field f;
    while (mp_wire_next(&w, &f) > 0) {
        if (f.num != MODEL_GRAPH || f.type != MP_WIRE_LEN) {
            mp_wbuf_put(out, f.start, (size_t)(f.end - f.start));
            continue;
        }
        mp_wbuf g = {0};
        filter_graph(im, f.data, f.len, &g);
        mp_wbuf_field(out, MODEL_GRAPH, g.p, g.n);
        free(g.p);
    }
}

/* ---- pass 1: is it a protobuf at all ------------------------------------ */

static bool starts_with_text(const uint8_t *p, size_t n)
{
    size_t k = n < 32 ? n : 32;
    for (size_t i = 0; i < k; i++)
        if (!((p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) return false;
    return true;
}

/* The top level once more, for messages that say "not a protobuf" or
 * "truncated" rather than a generic error. */
static int check_top(importer *im)
{
    mp_wire w = {im->buf, im->buf + im->size, im->buf, MP_WIRE_OK};
    mp_wire_field f;
    int r, nfields = 0, ngraphs = 0;
    while ((r = mp_wire_next(&w, &f)) > 0) {
        nfields++;
        if (f.num == MODEL_GRAPH) ngraphs++;
    }
    const char *hint = starts_with_text(im->buf, im->size) ? ", and the file starts with text" : "";
    long long at = (long long)(f.start - im->buf);
    if (r < 0 && w.bad == MP_WIRE_TRUNCATED && nfields > 0) {
        if (f.type == MP_WIRE_LEN && f.data == NULL && f.len)
            return mp_fail(im->err, "the file is truncated: field %u at byte %lld needs %zu bytes, only %lld remain",
                           f.num, at, f.len, (long long)im->size - at);
        return mp_fail(im->err, "the file is truncated: it ends inside a field at byte %lld", at);
    }
    if (r < 0)
        return mp_fail(im->err, "not an ONNX model: not a protobuf (%s at byte %lld%s)",
                       w.bad == MP_WIRE_TRUNCATED ? "a field longer than the file"
                       : w.bad == MP_WIRE_BAD_VARINT ? "a varint longer than 10 bytes"
                                                      : "an invalid field tag",
                       at, hint);
    if (ngraphs > 1) return mp_fail(im->err, "the model has %d graph fields (ModelProto.graph must appear once)", ngraphs);
    if (mp_wire_check(&onnx__model_proto__descriptor, im->buf, im->size, im->buf, "", im->err)) {
        char inner[sizeof im->err->msg];
        snprintf(inner, sizeof inner, "%s", im->err->msg);
        return mp_fail(im->err, "not a valid ONNX model: %s%s", inner, *hint ? " (the file starts with text)" : "");
    }
    return 0;
}

/* ---- types ------------------------------------------------------------------ */

static int read_tensor_type(mp_graph *g, int32_t elem, const Onnx__TensorShapeProto *shape, const char *name,
                            mp_type *out, mp_err *err)
{
    if (elem != MP_UNDEFINED && !mp_dtype_valid(elem))
        return mp_fail(err, "value '%s' has unknown element type %d", name, elem);
    out->dtype = (mp_dtype)elem;
    out->rank = -1;
    out->dims = NULL;
    if (!shape) return 0;
    if (shape->n_dim > MP_MAX_RANK) return mp_fail(err, "value '%s' has rank %zu (limit %d)", name, shape->n_dim, MP_MAX_RANK);
    out->rank = (int)shape->n_dim;
    out->dims = mp_arena_alloc(g->arena, (shape->n_dim ? shape->n_dim : 1) * sizeof *out->dims);
    int64_t n = 1;
    for (size_t i = 0; i < shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
        out->dims[i] = MP_DIM_UNKNOWN;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return mp_fail(err, "value '%s' has a negative dimension %lld (dim %zu)", name, (long long)d->dim_value, i);
            if (!mp_mul_ok(n, d->dim_value, &n))
                return mp_fail(err, "value '%s' has dims whose product overflows int64", name);
            out->dims[i] = mp_dim_of(d->dim_value);
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   *d->dim_param) {
            out->dims[i] = mp_sym_dim(g, d->dim_param);
        }
    }
    return 0;
}

/* The outermost kind (and, for an optional, the kind it holds), with the
 * innermost tensor's dtype and shape. */
static int read_type(mp_graph *g, const Onnx__TypeProto *tp, const char *name, mp_type *out, mp_err *err)
{
    *out = (mp_type){MP_KIND_TENSOR, MP_KIND_TENSOR, MP_UNDEFINED, -1, NULL};
    mp_value_kind kinds[2] = {MP_KIND_TENSOR, MP_KIND_TENSOR};
    int level = 0;
    /* nesting is bounded by the wire check's depth limit */
    for (; tp; level++) {
        mp_value_kind k;
        const Onnx__TypeProto *next = NULL;
        const Onnx__TypeProto__Tensor *t = NULL;
        const Onnx__TypeProto__SparseTensor *st = NULL;
        switch (tp->value_case) {
        case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: k = MP_KIND_TENSOR; t = tp->tensor_type; break;
        case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: k = MP_KIND_SPARSE; st = tp->sparse_tensor_type; break;
        case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: k = MP_KIND_SEQUENCE; next = tp->sequence_type->elem_type; break;
        case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: k = MP_KIND_OPTIONAL; next = tp->optional_type->elem_type; break;
        case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: k = MP_KIND_MAP; next = tp->map_type->value_type; break;
        default: k = level ? MP_KIND_OTHER : MP_KIND_TENSOR; break;
        }
        if (level < 2) kinds[level] = k;
        if (t && read_tensor_type(g, t->has_elem_type ? t->elem_type : 0, t->shape, name, out, err)) return -1;
        if (st && read_tensor_type(g, st->has_elem_type ? st->elem_type : 0, st->shape, name, out, err)) return -1;
        if (!next) break;
        tp = next;
    }
    out->kind = kinds[0];
    out->elem_kind = kinds[0] == MP_KIND_OPTIONAL ? kinds[1] : MP_KIND_TENSOR;
    return 0;
}

static void apply_type(mp_graph *g, int32_t id, const mp_type *t)
{
    mp_value_set(g, id, t->dtype, t->rank, t->dims);
    g->values[id].kind = t->kind;
    g->values[id].elem_kind = t->elem_kind;
}

/* ---- tensors ---------------------------------------------------------------- */

static bool foldable(mp_dtype t, int64_t n)
{
    if (mp_dtype_is_int(t) || t == MP_BOOL) return n <= MP_FOLD_MAX_ELEMS;
    if (mp_dtype_is_float(t)) return n <= 64;
    return false;
}

static void set_from_tensor(mp_graph *g, int32_t id, const mp_tensor *x)
{
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = mp_dim_of(x->dims[i]);
    mp_value_set(g, id, x->dtype, x->rank, d);
}

/* An initializer: dtype/dims, where its bytes are, and konst when small
 * enough to fold (or when the bytes are only in memory). */
static int import_initializer(importer *im, mp_graph *g, const Onnx__TensorProto *tp, size_t i, const init_src *src)
{
    char what[160];
    if (!tp->name || !*tp->name) return mp_fail(im->err, "initializer #%zu has no name", i);
    snprintf(what, sizeof what, "initializer '%.100s'", tp->name);
    mp_data_ref ref;
    int64_t numel;
    if (mp_onnx_tensor_check(tp, src ? &src->pl : NULL, what, &ref, &numel, g->arena, im->err)) return -1;
    int32_t id = mp_graph_add_value(g, tp->name);
    if (id < 0) return mp_fail(im->err, "initializer '%.100s' is defined twice", tp->name);
    mp_tensor *x = mp_onnx_tensor_decode(g->arena, tp, false);
    set_from_tensor(g, id, x);
    mp_tensor *k = NULL;
    if (ref.kind == MP_DATA_INLINE || ref.kind == MP_DATA_NONE) {
        k = mp_onnx_tensor_decode(g->arena, tp, true);
    } else if ((ref.kind == MP_DATA_RAW || ref.kind == MP_DATA_TYPED) && foldable(x->dtype, numel)) {
        /* small: unpack the whole initializer again, payload included */
        Onnx__TensorProto *full = onnx__tensor_proto__unpack(NULL, src->len, src->start);
        mp_data_ref r2;
        int64_t n2;
        if (!full) return mp_fail(im->err, "%s: protobuf-c could not unpack it", what);
        int rc = mp_onnx_tensor_check(full, NULL, what, &r2, &n2, g->arena, im->err);
        if (!rc) k = mp_onnx_tensor_decode(g->arena, full, true);
        onnx__tensor_proto__free_unpacked(full, NULL);
        if (rc) return -1;
    }
    mp_value *v = &g->values[id];
    v->flags |= MP_VAL_INITIALIZER;
    v->data = ref;
    v->konst = k;
    g->inits[g->ninits++] = id;
    return 0;
}

static int import_sparse_initializer(importer *im, mp_graph *g, const Onnx__SparseTensorProto *sp, size_t i)
{
    char what[160];
    const char *name = sp->values ? sp->values->name : NULL;
    if (!name || !*name) return mp_fail(im->err, "sparse initializer #%zu has no name", i);
    snprintf(what, sizeof what, "sparse initializer '%.100s'", name);
    mp_tensor *x = mp_onnx_sparse_decode(g->arena, sp, true, what, im->err);
    if (!x) return -1;
    int32_t id = mp_graph_add_value(g, name);
    if (id < 0) return mp_fail(im->err, "initializer '%.100s' is defined twice", name);
    set_from_tensor(g, id, x);
    mp_value *v = &g->values[id];
    v->flags |= MP_VAL_INITIALIZER;
    v->data.kind = x->data ? MP_DATA_INLINE : MP_DATA_NONE;
    v->konst = x->data ? x : NULL;
    g->inits[g->ninits++] = id;
    return 0;
}

/* ---- attributes --------------------------------------------------------------- */

static int attr_tensor(mp_graph *g, const Onnx__TensorProto *tp, const char *what, mp_tensor **out, mp_err *err)
{
    mp_data_ref ref;
    int64_t numel;
    if (mp_onnx_tensor_check(tp, NULL, what, &ref, &numel, g->arena, err)) return -1;
    *out = mp_onnx_tensor_decode(g->arena, tp, numel <= MP_FOLD_MAX_ELEMS);
    return 0;
}

static int attr_sparse(mp_graph *g, const Onnx__SparseTensorProto *sp, const char *what, mp_tensor **out, mp_err *err)
{
    *out = mp_onnx_sparse_decode(g->arena, sp, true, what, err);
    return *out ? 0 : -1;
}

static int attr_graph(importer *im, mp_graph *g, const Onnx__GraphProto *gp, const char *what, mp_graph **out)
{
    mp_graph *sub = mp_graph_new(g);
    if (import_graph(im, sub, gp, NULL, 0)) {
        char inner[sizeof im->err->msg];
        snprintf(inner, sizeof inner, "%s", im->err->msg);
        return mp_fail(im->err, "%s: %s", what, inner);
    }
    *out = sub;
    return 0;
}

/* IR 1 files have no attribute type: it is the field that is set. */
static int attr_type_of(const Onnx__AttributeProto *ap)
{
    if (ap->has_type) return (int)ap->type;
    if (ap->has_f) return MP_ATTR_FLOAT;
    if (ap->has_i) return MP_ATTR_INT;
    if (ap->has_s) return MP_ATTR_STRING;
    if (ap->t) return MP_ATTR_TENSOR;
    if (ap->g) return MP_ATTR_GRAPH;
    if (ap->sparse_tensor) return MP_ATTR_SPARSE_TENSOR;
    if (ap->tp) return MP_ATTR_TYPE_PROTO;
    if (ap->n_floats) return MP_ATTR_FLOATS;
    if (ap->n_ints) return MP_ATTR_INTS;
    if (ap->n_strings) return MP_ATTR_STRINGS;
    if (ap->n_tensors) return MP_ATTR_TENSORS;
    if (ap->n_graphs) return MP_ATTR_GRAPHS;
    if (ap->n_sparse_tensors) return MP_ATTR_SPARSE_TENSORS;
    if (ap->n_type_protos) return MP_ATTR_TYPE_PROTOS;
    return MP_ATTR_UNDEFINED;
}

static void *arena_array(mp_graph *g, size_t n, size_t elem) { return mp_arena_alloc(g->arena, (n ? n : 1) * elem); }

static int convert_attr(importer *im, mp_graph *g, const char *node, const Onnx__AttributeProto *ap, mp_attr *a)
{
    mp_err *err = im->err;
    if (!ap->name || !*ap->name) return mp_fail(err, "node %s has an attribute without a name", node);
    char what[240];
    snprintf(what, sizeof what, "node %s attribute '%.60s'", node, ap->name);
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return mp_fail(err, "%s refers to function attribute '%.60s' outside a function", what, ap->ref_attr_name);
    a->name = mp_arena_strdup(g->arena, ap->name);
    a->type = (mp_attr_type)attr_type_of(ap);
    switch (a->type) {
    case MP_ATTR_FLOAT: a->f = ap->f; break;
    case MP_ATTR_INT: a->i = ap->i; break;
    case MP_ATTR_STRING:
        a->s = mp_arena_strndup(g->arena, ap->s.data ? (const char *)ap->s.data : "", ap->s.len);
        a->slen = ap->s.len;
        break;
    case MP_ATTR_FLOATS:
        a->n = (int32_t)ap->n_floats;
        a->floats = arena_array(g, ap->n_floats, sizeof *a->floats);
        if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof *a->floats);
        break;
    case MP_ATTR_INTS:
        a->n = (int32_t)ap->n_ints;
        a->ints = arena_array(g, ap->n_ints, sizeof *a->ints);
        if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof *a->ints);
        break;
    case MP_ATTR_STRINGS:
        a->n = (int32_t)ap->n_strings;
        a->strings = arena_array(g, ap->n_strings, sizeof *a->strings);
        for (size_t i = 0; i < ap->n_strings; i++)
            a->strings[i] = mp_arena_strndup(g->arena, ap->strings[i].data ? (const char *)ap->strings[i].data : "",
                                             ap->strings[i].len);
        break;
    case MP_ATTR_TENSOR:
        if (!ap->t) return mp_fail(err, "%s has type TENSOR but no tensor", what);
        a->n = 1;
        a->tensors = arena_array(g, 1, sizeof *a->tensors);
        return attr_tensor(g, ap->t, what, &a->tensors[0], err);
    case MP_ATTR_TENSORS:
        a->n = (int32_t)ap->n_tensors;
        a->tensors = arena_array(g, ap->n_tensors, sizeof *a->tensors);
        for (size_t i = 0; i < ap->n_tensors; i++)
            if (attr_tensor(g, ap->tensors[i], what, &a->tensors[i], err)) return -1;
        break;
    case MP_ATTR_SPARSE_TENSOR:
        if (!ap->sparse_tensor) return mp_fail(err, "%s has type SPARSE_TENSOR but no tensor", what);
        a->n = 1;
        a->tensors = arena_array(g, 1, sizeof *a->tensors);
        return attr_sparse(g, ap->sparse_tensor, what, &a->tensors[0], err);
    case MP_ATTR_SPARSE_TENSORS:
        a->n = (int32_t)ap->n_sparse_tensors;
        a->tensors = arena_array(g, ap->n_sparse_tensors, sizeof *a->tensors);
        for (size_t i = 0; i < ap->n_sparse_tensors; i++)
            if (attr_sparse(g, ap->sparse_tensors[i], what, &a->tensors[i], err)) return -1;
        break;
    case MP_ATTR_GRAPH:
        if (!ap->g) return mp_fail(err, "%s has type GRAPH but no graph", what);
        a->n = 1;
        a->graphs = arena_array(g, 1, sizeof *a->graphs);
        return attr_graph(im, g, ap->g, what, &a->graphs[0]);
    case MP_ATTR_GRAPHS:
        a->n = (int32_t)ap->n_graphs;
        a->graphs = arena_array(g, ap->n_graphs, sizeof *a->graphs);
        for (size_t i = 0; i < ap->n_graphs; i++)
            if (attr_graph(im, g, ap->graphs[i], what, &a->graphs[i])) return -1;
        break;
    case MP_ATTR_TYPE_PROTO:
        if (!ap->tp) return mp_fail(err, "%s has type TYPE_PROTO but no type", what);
        a->n = 1;
        a->types = arena_array(g, 1, sizeof *a->types);
        return read_type(g, ap->tp, a->name, &a->types[0], err);
    case MP_ATTR_TYPE_PROTOS:
        a->n = (int32_t)ap->n_type_protos;
        a->types = arena_array(g, ap->n_type_protos, sizeof *a->types);
        for (size_t i = 0; i < ap->n_type_protos; i++)
            if (read_type(g, ap->type_protos[i], a->name, &a->types[i], err)) return -1;
        break;
    case MP_ATTR_UNDEFINED: return mp_fail(err, "%s has no type and no value", what);
    default: return mp_fail(err, "%s has unknown type %d", what, (int)a->type);
    }
    return 0;
}

/* ---- names, scopes, order ------------------------------------------------------- */

static const char *node_label(const Onnx__NodeProto *np, size_t idx, char *buf, size_t n)
{
    const char *op = np->op_type ? np->op_type : "";
    if (np->name && *np->name)
        snprintf(buf, n, "'%.80s' (%.40s)", np->name, op);
    else
        snprintf(buf, n, "'%.40s_%zu' (%.40s)", op, idx, op);
    return buf;
}

/* Some enclosing graph defines the name (or uses it from further out). */
static bool defined_above(const mp_graph *g, const char *name)
{
    for (const mp_graph *p = g->parent; p; p = p->parent)
        if (mp_graph_find(p, name) >= 0) return true;
    return false;
}

static void deps_push(mp_graph *g, deps *d, int32_t node, int32_t value)
{
    if (d->n == d->cap) {
        int32_t cap = d->cap ? d->cap * 2 : 16;
        dep *v = mp_arena_alloc(g->arena, (size_t)cap * sizeof *v);
        if (d->n) memcpy(v, d->v, (size_t)d->n * sizeof *v);
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = (dep){node, value};
}

/* Outer names used anywhere inside sub (a subgraph of node `node` of g) that g defines. */
static void add_outer_deps(mp_graph *g, int32_t node, const mp_graph *sub, deps *d)
{
    for (int32_t i = 0; i < sub->nvalues; i++) {
        const mp_value *v = &sub->values[i];
        if (!(v->flags & MP_VAL_OUTER)) continue;
        bool inner = false; /* defined by a graph between sub and g */
        for (const mp_graph *p = sub->parent; p && p != g && !inner; p = p->parent) {
            int32_t id = mp_graph_find(p, v->name);
            inner = id >= 0 && !(p->values[id].flags & MP_VAL_OUTER);
        }
        int32_t id = inner ? -1 : mp_graph_find(g, v->name);
        if (id >= 0 && !(g->values[id].flags & MP_VAL_OUTER)) deps_push(g, d, node, id);
    }
    for (int32_t n = 0; n < sub->nnodes; n++)
        for (int32_t a = 0; a < sub->nodes[n].nattrs; a++) {
            const mp_attr *at = &sub->nodes[n].attrs[a];
            if (at->type == MP_ATTR_GRAPH || at->type == MP_ATTR_GRAPHS)
                for (int32_t k = 0; k < at->n; k++) add_outer_deps(g, node, at->graphs[k], d);
        }
}

static const char *nlabel(const mp_graph *g, int32_t n, char *buf, size_t len)
{
    snprintf(buf, len, "'%.60s' (%.30s)", g->nodes[n].name, g->nodes[n].op_type);
    return buf;
}

/* Node -> the producers of what it uses (inputs, and outer names its
 * subgraphs use), as compressed rows: edge[start[i] .. start[i+1]). */
typedef struct edges {
    int32_t *start, *edge;
} edges;

static void edges_build(mp_graph *g, const deps *d, edges *e)
{
    int32_t n = g->nnodes, total = 0, k = 0;
    for (int32_t i = 0; i < n; i++) total += g->nodes[i].nin;
    e->start = malloc(((size_t)n + 1) * sizeof *e->start);
    e->edge = malloc(((size_t)total + (size_t)d->n + 1) * sizeof *e->edge);
    if (!e->start || !e->edge) abort();
    for (int32_t i = 0; i < n; i++) {
        e->start[i] = k;
        for (int32_t j = 0; j < g->nodes[i].nin; j++) {
            const mp_value *v = mp_val(g, g->nodes[i].in[j]);
            if (v && v->producer >= 0) e->edge[k++] = v->producer;
        }
        for (int32_t j = 0; j < d->n; j++)
            if (d->v[j].node == i && g->values[d->v[j].value].producer >= 0)
                e->edge[k++] = g->values[d->v[j].value].producer;
    }
    e->start[n] = k;
}

static void edges_free(edges *e)
{
    free(e->start);
    free(e->edge);
}

/* A node uses a value that a later node (or itself) produces: say which
 * nodes form a cycle, or, when there is none, that the order is wrong. */
static int report_order(importer *im, mp_graph *g, const deps *d, int32_t bad_node, int32_t bad_value)
{
    int32_t n = g->nnodes;
    edges e;
    edges_build(g, d, &e);
    const int32_t *start = e.start, *edge = e.edge;
    int32_t *color = calloc((size_t)n + 1, sizeof *color);
    int32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
    int32_t *next = malloc(((size_t)n + 1) * sizeof *next);
    if (!color || !stack || !next) abort();
    int32_t cyc_from = -1, sp = 0;
    for (int32_t root = 0; root < n && cyc_from < 0; root++) {
        if (color[root]) continue;
        stack[sp] = root;
        next[sp++] = start[root];
        color[root] = 1;
        while (sp > 0 && cyc_from < 0) {
            int32_t u = stack[sp - 1];
            if (next[sp - 1] == start[u + 1]) {
                color[u] = 2;
                sp--;
                continue;
            }
            int32_t w = edge[next[sp - 1]++];
            if (color[w] == 1) {
                cyc_from = w;
            } else if (color[w] == 0) {
                color[w] = 1;
                stack[sp] = w;
                next[sp++] = start[w];
            }
        }
    }
    char msg[400], lbl[112];
    int rc;
    if (cyc_from >= 0) {
        /* stack[i] uses stack[i+1]'s output, and the top uses cyc_from's: data flows top-down reversed */
        int32_t at = sp - 1;
        while (stack[at] != cyc_from) at--;
        size_t m = (size_t)snprintf(msg, sizeof msg, "%s", nlabel(g, cyc_from, lbl, sizeof lbl));
        for (int32_t i = sp - 1; i > at && m < sizeof msg; i--)
            m += (size_t)snprintf(msg + m, sizeof msg - m, " -> %s", nlabel(g, stack[i], lbl, sizeof lbl));
        if (m < sizeof msg) snprintf(msg + m, sizeof msg - m, " -> %s", nlabel(g, cyc_from, lbl, sizeof lbl));
        rc = mp_fail(im->err, "the graph has a cycle: %s", msg);
    } else {
        char lbl2[112];
        rc = mp_fail(im->err,
                     "node %s uses '%.60s' before node %s produces it (nodes must be in topological order; "
                     "the topo_sort load option, memplan's --topo-sort, sorts them)",
                     nlabel(g, bad_node, lbl, sizeof lbl), g->values[bad_value].name,
                     nlabel(g, g->values[bad_value].producer, lbl2, sizeof lbl2));
    }
    edges_free(&e);
    free(color);
    free(stack);
    free(next);
    return rc;
}

/* Min-heap of node ids: the stable sort always takes the earliest ready node. */
static void heap_push(int32_t *h, int32_t *n, int32_t v)
{
    int32_t i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = v;
}

static int32_t heap_pop(int32_t *h, int32_t *n)
{
    int32_t top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* Reorders g's nodes topologically, keeping the file's order wherever the
 * data flow allows (Kahn's algorithm, earliest ready node first). Returns -1
 * when nodes are left over: they form a cycle, which report_order names. */
static int sort_nodes(mp_graph *g, const deps *d)
{
    int32_t n = g->nnodes, nready = 0, done = 0;
    edges e;
    edges_build(g, d, &e);
    int32_t *waiting = calloc((size_t)n + 1, sizeof *waiting);  /* producers not yet placed */
    int32_t *ustart = calloc((size_t)n + 2, sizeof *ustart);    /* producer -> its users */
    int32_t *users = malloc(((size_t)e.start[n] + 1) * sizeof *users);
    int32_t *ready = malloc(((size_t)n + 1) * sizeof *ready);
    int32_t *order = malloc(((size_t)n + 1) * sizeof *order);
    if (!waiting || !ustart || !users || !ready || !order) abort();
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = e.start[i]; k < e.start[i + 1]; k++) {
            waiting[i]++;
            ustart[e.edge[k] + 2]++;
        }
    for (int32_t i = 0; i < n; i++) ustart[i + 2] += ustart[i + 1];
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = e.start[i]; k < e.start[i + 1]; k++) users[ustart[e.edge[k] + 1]++] = i;
    for (int32_t i = 0; i < n; i++)
        if (!waiting[i]) heap_push(ready, &nready, i);
    while (nready) {
        int32_t u = heap_pop(ready, &nready);
        order[done++] = u;
        for (int32_t k = ustart[u]; k < ustart[u + 1]; k++)
            if (--waiting[users[k]] == 0) heap_push(ready, &nready, users[k]);
    }
    if (done == n) {
        mp_node *old = malloc(((size_t)n + 1) * sizeof *old);
        if (!old) abort();
        memcpy(old, g->nodes, (size_t)n * sizeof *old);
        for (int32_t i = 0; i < n; i++) g->nodes[i] = old[order[i]];
        free(old);
    }
    edges_free(&e);
    free(waiting);
    free(ustart);
    free(users);
    free(ready);
    free(order);
    return done == n ? 0 : -1;
}

/* ---- pass 4: a graph ------------------------------------------------------------- */

static int import_graph(importer *im, mp_graph *g, const Onnx__GraphProto *gp, const init_src *srcs, size_t nsrcs)
{
    mp_err *err = im->err;
    char lbl[160], lbl2[160];
    mp_type ty;
    g->name = mp_arena_strdup(g->arena, gp->name ? gp->name : "");

    /* 1: initializers */
    g->inits = arena_array(g, gp->n_initializer + gp->n_sparse_initializer, sizeof *g->inits);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (import_initializer(im, g, gp->initializer[i], i, i < nsrcs ? &srcs[i] : NULL)) return -1;
    for (size_t i = 0; i < gp->n_sparse_initializer; i++)
        if (import_sparse_initializer(im, g, gp->sparse_initializer[i], i)) return -1;

    /* 2: inputs; IR 3 files also list the initializers here: those stay initializers */
    g->inputs = arena_array(g, gp->n_input, sizeof *g->inputs);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name) return mp_fail(err, "graph input #%zu has no name", i);
        if (read_type(g, vi->type, vi->name, &ty, err)) return -1;
        int32_t id = mp_graph_find(g, vi->name);
        if (id >= 0 && (g->values[id].flags & MP_VAL_INITIALIZER)) continue;
        if (id >= 0) return mp_fail(err, "graph input '%.100s' is listed twice", vi->name);
        id = mp_graph_add_value(g, vi->name);
        g->values[id].flags |= MP_VAL_INPUT;
        apply_type(g, id, &ty);
        g->inputs[g->ninputs++] = id;
    }

    /* 3: every node output, so that order problems can be told from undefined names */
    for (size_t j = 0; j < gp->n_node; j++) {
        const Onnx__NodeProto *np = gp->node[j];
        if (!np->op_type || !*np->op_type) return mp_fail(err, "node #%zu has no op_type", j);
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k];
            if (!name || !*name) continue;
            int32_t id = mp_graph_find(g, name);
            if (id >= 0) {
                const mp_value *v = &g->values[id];
                node_label(np, j, lbl, sizeof lbl);
                if (v->flags & MP_VAL_INITIALIZER)
                    return mp_fail(err, "node %s writes '%.100s', which is an initializer", lbl, name);
                if (v->flags & MP_VAL_INPUT)
                    return mp_fail(err, "node %s writes '%.100s', which is a graph input", lbl, name);
                if (v->producer == (int32_t)j) return mp_fail(err, "node %s lists output '%.100s' twice", lbl, name);
                return mp_fail(err, "duplicate output name: '%.100s' is produced by node %s and node %s", name,
                               node_label(gp->node[v->producer], (size_t)v->producer, lbl2, sizeof lbl2), lbl);
            }
            id = mp_graph_add_value(g, name);
            g->values[id].producer = (int32_t)j;
        }
    }

    /* 4: nodes, resolving names from enclosing graphs (MP_VAL_OUTER) */
    deps implicit = {0};
    int32_t bad_node = -1, bad_value = -1;
    for (size_t j = 0; j < gp->n_node; j++) {
        const Onnx__NodeProto *np = gp->node[j];
        node_label(np, j, lbl, sizeof lbl);
        int32_t *in = arena_array(g, np->n_input, sizeof *in), *out = arena_array(g, np->n_output, sizeof *out);
        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = np->input[k];
            in[k] = -1;
            if (!name || !*name) continue;
            int32_t id = mp_graph_find(g, name);
            if (id < 0 && defined_above(g, name)) {
                id = mp_graph_add_value(g, name);
                g->values[id].flags |= MP_VAL_OUTER;
            }
            if (id < 0)
                return mp_fail(err, "node %s uses '%.100s', which is not a graph input, an initializer or any node's output",
                               lbl, name);
            if (g->values[id].producer >= (int32_t)j && bad_node < 0) {
                bad_node = (int32_t)j;
                bad_value = id;
            }
            in[k] = id;
        }
        for (size_t k = 0; k < np->n_output; k++)
            out[k] = np->output[k] && *np->output[k] ? mp_graph_find(g, np->output[k]) : -1;
        int32_t nid = mp_graph_add_node(g, np->name, np->op_type, np->domain, (int32_t)np->n_input, in,
                                        (int32_t)np->n_output, out);
        mp_attr *attrs = arena_array(g, np->n_attribute, sizeof *attrs);
        for (size_t k = 0; k < np->n_attribute; k++) {
            if (convert_attr(im, g, lbl, np->attribute[k], &attrs[k])) return -1;
            for (size_t m = 0; m < k; m++)
                if (!strcmp(attrs[m].name, attrs[k].name))
                    return mp_fail(err, "node %s has attribute '%.60s' twice", lbl, attrs[k].name);
            if (attrs[k].type == MP_ATTR_GRAPH || attrs[k].type == MP_ATTR_GRAPHS)
                for (int32_t s = 0; s < attrs[k].n; s++) add_outer_deps(g, nid, attrs[k].graphs[s], &implicit);
        }
        g->nodes[nid].attrs = attrs;
        g->nodes[nid].nattrs = (int32_t)np->n_attribute;
    }
    for (int32_t i = 0; i < implicit.n && bad_node < 0; i++)
        if (g->values[implicit.v[i].value].producer >= implicit.v[i].node) {
            bad_node = implicit.v[i].node;
            bad_value = implicit.v[i].value;
        }

    /* 5: outputs */
    g->outputs = arena_array(g, gp->n_output, sizeof *g->outputs);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi->name || !*vi->name) return mp_fail(err, "graph output #%zu has no name", i);
        if (read_type(g, vi->type, vi->name, &ty, err)) return -1;
        int32_t id = mp_graph_find(g, vi->name);
        if (id < 0 && defined_above(g, vi->name)) {
            id = mp_graph_add_value(g, vi->name);
            g->values[id].flags |= MP_VAL_OUTER;
        }
        if (id < 0)
            return mp_fail(err, "graph output '%.100s' is not produced by any node (nor a graph input or initializer)",
                           vi->name);
        mp_value *v = &g->values[id];
        if (v->flags & MP_VAL_OUTPUT) return mp_fail(err, "graph output '%.100s' is listed twice", vi->name);
        v->flags |= MP_VAL_OUTPUT;
        if (!(v->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER | MP_VAL_OUTER))) apply_type(g, id, &ty);
        g->outputs[g->noutputs++] = id;
    }

    /* 6: value_info types for values nothing else typed */
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        if (!vi->name || !*vi->name) continue;
        if (read_type(g, vi->type, vi->name, &ty, err)) return -1;
        int32_t id = mp_graph_find(g, vi->name);
        if (id < 0) continue;
        const mp_value *v = &g->values[id];
        if (!(v->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER | MP_VAL_OUTER)) && v->dtype == MP_UNDEFINED && v->rank < 0)
            apply_type(g, id, &ty);
    }

    if (mp_graph_link(g, err)) return -1;
    if (bad_node >= 0 && im->topo_sort && !sort_nodes(g, &implicit)) return mp_graph_link(g, err);
    if (bad_node >= 0) return report_order(im, g, &implicit, bad_node, bad_value);
    return 0;
}

/* ---- the model ---------------------------------------------------------------------- */

typedef struct model_box {
    mp_model m;
    bool mapped;
} model_box;

static mp_graph *import_model(importer *im, const char *model_dir)
{
    mp_err *err = im->err;
    if (check_top(im)) return NULL;
    mp_wbuf fb = {0};
    filter_model(im, &fb);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, fb.n, fb.p ? fb.p : (const uint8_t *)"");
    free(fb.p);
    if (!mp) {
        mp_fail(err, "protobuf-c could not unpack the model");
        return NULL;
    }
    mp_graph *g = NULL;
    if (!mp->graph) {
        mp_fail(err, "the model has no graph (ModelProto.graph, field 7, is missing)");
        goto done;
    }
    if (mp->graph->n_initializer != im->ninits) {
        mp_fail(err, "the graph's initializers could not be matched to the file (%zu vs %zu)",
                mp->graph->n_initializer, im->ninits);
        goto done;
    }
    g = mp_graph_new(NULL);
    g->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    g->producer = mp_arena_strdup(g->arena, mp->producer_name ? mp->producer_name : "");
    g->producer_version = mp_arena_strdup(g->arena, mp->producer_version ? mp->producer_version : "");
    g->model_dir = mp_arena_strdup(g->arena, model_dir ? model_dir : ".");
    g->opsets = arena_array(g, mp->n_opset_import + 1, sizeof *g->opsets);
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        g->opsets[g->nopsets++] = (mp_opset){mp_arena_strdup(g->arena, o->domain ? o->domain : ""), o->version};
    }
    if (!g->nopsets) {
        if (g->ir_version >= 3) {
            mp_fail(err, "the model imports no opset (ModelProto.opset_import is empty)");
            goto fail;
        }
        g->opsets[g->nopsets++] = (mp_opset){"", 1}; /* IR < 3: the default domain at version 1 */
    }
    if (import_graph(im, g, mp->graph, im->inits, im->ninits)) goto fail;
    goto done;
fail:
    mp_graph_free(g);
    g = NULL;
done:
    onnx__model_proto__free_unpacked(mp, NULL);
    return g;
}

static mp_model *load(const uint8_t *buf, size_t size, const char *label, const char *model_dir,
                      const mp_onnx_opts *opts, mp_err *err)
{
    mp_err inner = {{0}};
    importer im = {.buf = buf, .size = size, .topo_sort = opts && opts->topo_sort, .err = &inner};
    mp_graph *g = size ? import_model(&im, model_dir) : NULL;
    free(im.inits);
    if (!size) mp_fail(&inner, "the file is empty (0 bytes): not an ONNX model");
    if (!g) {
        mp_fail(err, "%s: %s", label, inner.msg);
        return NULL;
    }
    model_box *b = calloc(1, sizeof *b);
    if (!b) abort();
    b->m.graph = g;
    b->m.path = strdup(label);
    b->m.map = buf;
    b->m.size = size;
    return &b->m;
}

mp_model *mp_onnx_load_buffer(const void *buf, size_t size, const char *model_dir, mp_err *err)
{
    return mp_onnx_load_buffer_with(buf, size, model_dir, NULL, err);
}

mp_model *mp_onnx_load_buffer_with(const void *buf, size_t size, const char *model_dir, const mp_onnx_opts *opts,
                                   mp_err *err)
{
    return load(buf, size, "<memory>", model_dir, opts, err);
}

mp_model *mp_onnx_load(const char *path, mp_err *err) { return mp_onnx_load_with(path, NULL, err); }

mp_model *mp_onnx_load_with(const char *path, const mp_onnx_opts *opts, mp_err *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        mp_fail(err, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        mp_fail(err, "'%s' is not a regular file", path);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            mp_fail(err, "cannot map '%s': %s", path, strerror(errno));
            close(fd);
            return NULL;
        }
    }
    close(fd);
    char *dir = strdup(path);
    if (!dir) abort();
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = 0;
    else if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    mp_model *m = load(map ? map : (const uint8_t *)"", size, path, dir, opts, err);
    free(dir);
    if (!m) {
        if (map) munmap(map, size);
        return NULL;
    }
    ((model_box *)m)->mapped = map != NULL;
    return m;
}

void mp_onnx_close(mp_model *m)
{
    if (!m) return;
    model_box *b = (model_box *)m;
    mp_graph_free(m->graph);
    if (b->mapped) munmap((void *)m->map, m->size);
    free((void *)m->path);
    free(b);
}
