/* ir.h - memplan's graph IR: values (tensors), nodes, and the arena that owns them.
 *
 *   mp_graph *g = mp_graph_new(NULL);              // top-level graph, owns an arena
 *   int x = mp_graph_add_value(g, "x");            // dense value id
 *   mp_value_set_tensor(g, x, MP_FLOAT, 2, (mp_dim[]){mp_sym(g,"batch"), mp_dim_of(784)});
 *   int n = mp_graph_add_node(g, "fc1", "Gemm", "", ...);
 *   ...
 *   mp_graph_free(g);                              // frees everything at once
 *
 * Values and nodes are dense integer ids into g->values / g->nodes; every
 * array hanging off them lives in g->arena. Subgraphs (If/Loop/Scan bodies)
 * are mp_graph objects that share the top-level arena and point at their parent
 * for outer-scope names.
 */
#ifndef MP_IR_H
#define MP_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors: library code reports, never exits ------------------------- */

typedef struct mp_err {
    char msg[512];
} mp_err;

/* Formats msg into err (if err) and returns -1, so callers can `return mp_fail(...)`. */
int mp_fail(mp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- arena: one bump allocator per model, freed at once ---------------- */

typedef struct mp_arena mp_arena;

mp_arena *mp_arena_new(void);
void mp_arena_free(mp_arena *a);
void *mp_arena_alloc(mp_arena *a, size_t bytes);           /* zeroed, 16-aligned; aborts on OOM */
void *mp_arena_dup(mp_arena *a, const void *p, size_t bytes);
char *mp_arena_strdup(mp_arena *a, const char *s);
char *mp_arena_strndup(mp_arena *a, const char *s, size_t n);
size_t mp_arena_used(const mp_arena *a);

/* ---- dtypes: numbered as ONNX TensorProto.DataType ---------------------- */

typedef enum mp_dtype {
    MP_UNDEFINED = 0,
    MP_FLOAT = 1,
    MP_UINT8 = 2,
    MP_INT8 = 3,
    MP_UINT16 = 4,
    MP_INT16 = 5,
    MP_INT32 = 6,
    MP_INT64 = 7,
    MP_STRING = 8,
    MP_BOOL = 9,
    MP_FLOAT16 = 10,
    MP_DOUBLE = 11,
    MP_UINT32 = 12,
    MP_UINT64 = 13,
    MP_COMPLEX64 = 14,
    MP_COMPLEX128 = 15,
    MP_BFLOAT16 = 16,
    MP_FLOAT8E4M3FN = 17,
    MP_FLOAT8E4M3FNUZ = 18,
    MP_FLOAT8E5M2 = 19,
    MP_FLOAT8E5M2FNUZ = 20,
    MP_UINT4 = 21,
    MP_INT4 = 22,
    MP_FLOAT4E2M1 = 23,
    MP_FLOAT8E8M0 = 24,       /* exponent only: scales of microscaling formats */
    MP_UINT2 = 25,
    MP_INT2 = 26,
    MP_DTYPE_COUNT
} mp_dtype;

const char *mp_dtype_name(mp_dtype t);       /* "float32", "int64", ... ; "?" if unknown */
int mp_dtype_bits(mp_dtype t);               /* storage bits per element; 0 if unknown/string */
bool mp_dtype_is_float(mp_dtype t);          /* real floating point (fp8..fp64) */
bool mp_dtype_is_int(mp_dtype t);            /* signed or unsigned integer (incl. 2- and 4-bit) */
bool mp_dtype_is_half(mp_dtype t);           /* MP_FLOAT16 or MP_BFLOAT16 */
bool mp_dtype_valid(int t);                  /* a known element type, not UNDEFINED */
/* Bytes for n elements of t (sub-byte types round up); -1 if unknown or overflow. */
int64_t mp_dtype_bytes(mp_dtype t, int64_t n);
/* Bytes per element of a whole-byte type (bool 1; sub-byte types and string: 0). */
size_t mp_elem_size(mp_dtype t);

/* ---- dims and shapes ----------------------------------------------------- */

/* A dimension is a known value (v >= 0), a named symbol (sym >= 0, v < 0
 * until bound), or unknown (both -1). Symbols index g->symbols of the
 * top-level graph. */
typedef struct mp_dim {
    int64_t v;
    int32_t sym;
} mp_dim;

#define MP_DIM_UNKNOWN ((mp_dim){-1, -1})
/* Only in a shape vector's entries (mp_value.symdata): a known value that is
 * no dim, such as Reshape's -1, is held as {value, MP_SYM_LITERAL}, so that
 * (batch, -1) keeps its -1 apart from an unknown entry. */
#define MP_SYM_LITERAL (-2)
static inline mp_dim mp_dim_of(int64_t v) { return (mp_dim){v, -1}; }
static inline bool mp_dim_known(mp_dim d) { return d.v >= 0; }
/* Same dimension: equal values, or the same unbound symbol. */
static inline bool mp_dim_same(mp_dim a, mp_dim b)
{
    if (a.v >= 0 || b.v >= 0) return a.v == b.v;
    return a.sym >= 0 && a.sym == b.sym;
}

#define MP_MAX_RANK 64

/* ---- constant tensor data (initializer bytes on demand, folded values) --- */

/* Where an initializer's bytes are. Planning never reads them; the runtime does. */
typedef enum mp_data_kind {
    MP_DATA_NONE = 0,     /* no data (graph input, activation) */
    MP_DATA_RAW,          /* raw_data bytes at file offset */
    MP_DATA_TYPED,        /* packed typed field (float_data, int64_data, ...) at file offset */
    MP_DATA_EXTERNAL,     /* external file: location, offset, length */
    MP_DATA_INLINE,       /* bytes held in memory (small tensors, Constant nodes) */
} mp_data_kind;

typedef struct mp_data_ref {
    mp_data_kind kind;
    int32_t field;        /* TYPED: TensorProto field number (4 float, 5 int32, 7 int64, 10 double, 11 uint64) */
    int64_t offset;       /* RAW/TYPED: offset in the model file; EXTERNAL: in `location` */
    int64_t length;       /* bytes (for TYPED: bytes of the packed wire field) */
    const char *location; /* EXTERNAL: path relative to the model's directory */
} mp_data_ref;

/* A fully known tensor, row-major, elements in native C layout of its dtype
 * (bool as uint8, fp16/bf16 as uint16 bits, string as const char*). */
typedef struct mp_tensor {
    mp_dtype dtype;
    int rank;
    int64_t *dims;
    int64_t numel;
    void *data;
} mp_tensor;

/* ---- values ---------------------------------------------------------------- */

enum {
    MP_VAL_INITIALIZER = 1 << 0,
    MP_VAL_INPUT = 1 << 1,        /* graph input (not an initializer) */
    MP_VAL_OUTPUT = 1 << 2,       /* graph output */
    MP_VAL_OUTER = 1 << 3,        /* subgraph: a name resolved in an enclosing graph */
    MP_VAL_RECOMPUTED = 1 << 4,   /* a copy made by rematerialization (passes/remat_apply.c) */
    /* a Transpose output that is a view of its input (alias): the same bytes,
     * read as the transpose of the last two axes. Only GEMM operands (MatMul,
     * Gemm, MatMulGradA/B) read it, through their transpose flags; the
     * Transpose node itself moves nothing (passes/train.c). */
    MP_VAL_TVIEW = 1 << 5,
};

typedef enum mp_value_kind {
    MP_KIND_TENSOR = 0,
    MP_KIND_SEQUENCE,             /* sequence of tensors: dtype/shape describe the elements */
    MP_KIND_OPTIONAL,             /* optional: dtype/shape describe the contained tensor */
    MP_KIND_MAP,
    MP_KIND_SPARSE,
    MP_KIND_OTHER,
} mp_value_kind;

/* What a tensor is in the training step: memory is reported by these roles. */
typedef enum mp_role {
    MP_ROLE_NONE = 0,
    MP_ROLE_INPUT,                /* data (and labels) fed to the step */
    MP_ROLE_PARAM,                /* trainable weight */
    MP_ROLE_BUFFER,               /* non-trainable state the step keeps (BatchNorm running stats) */
    MP_ROLE_CONST,                /* integer / shape constants */
    MP_ROLE_ACTIVATION,           /* produced by the forward pass */
    MP_ROLE_GRAD,                 /* gradient of a parameter */
    MP_ROLE_OPT_STATE,            /* optimizer state (moments, master weights) */
    MP_ROLE_TRANSIENT,            /* backward/optimizer temporaries */
    MP_ROLE_COUNT
} mp_role;

/* Which part of the step a node belongs to. */
typedef enum mp_phase {
    MP_PHASE_FORWARD = 0,
    MP_PHASE_LOSS,
    MP_PHASE_BACKWARD,
    MP_PHASE_OPTIMIZER,
    MP_PHASE_COUNT
} mp_phase;

typedef struct mp_value {
    const char *name;
    mp_value_kind kind;
    mp_dtype dtype;               /* MP_UNDEFINED until known */
    int rank;                     /* -1: unknown rank */
    mp_dim *dims;                 /* rank entries */
    int64_t bytes;                /* -1 until the shape is fully known */
    int32_t producer;             /* node id, -1 for inputs/initializers */
    int32_t ncons;
    int32_t *cons;                /* consumer node ids (a node appears once per use) */
    uint32_t flags;
    mp_data_ref data;             /* initializers: where the bytes are */
    mp_tensor *konst;             /* known contents (folded or small initializer), else NULL */
    /* Contents of a 0-D/1-D int64 shape tensor whose entries may be symbolic
     * (e.g. Shape of [batch, 3]); nsymdata entries, NULL when not tracked. */
    mp_dim *symdata;
    int32_t nsymdata;
    /* SEQUENCE (or OPTIONAL holding one): element count, -1 until known; a
     * known-empty sequence (0) constrains no element type. OPTIONAL: what it
     * holds, MP_KIND_TENSOR or MP_KIND_SEQUENCE (dtype/shape describe the tensors). */
    int64_t seqlen;
    mp_value_kind elem_kind;
    /* SEQUENCE (or OPTIONAL holding one) of known length: each element's
     * dtype and shape (seqlen entries), NULL when not tracked. */
    struct mp_type *elems;
    mp_role role;                 /* set by the training-graph pass; NONE before */
    int32_t alias;                /* value whose memory this one overwrites in place, -1 none */
    int32_t last_suffix;          /* the last K of a value named name_K by mp_graph_add_unique (0: none) */
} mp_value;

/* ---- attributes (every ONNX kind) --------------------------------------- */

typedef enum mp_attr_type {
    MP_ATTR_UNDEFINED = 0,
    MP_ATTR_FLOAT = 1,
    MP_ATTR_INT = 2,
    MP_ATTR_STRING = 3,
    MP_ATTR_TENSOR = 4,
    MP_ATTR_GRAPH = 5,
    MP_ATTR_FLOATS = 6,
    MP_ATTR_INTS = 7,
    MP_ATTR_STRINGS = 8,
    MP_ATTR_TENSORS = 9,
    MP_ATTR_GRAPHS = 10,
    MP_ATTR_SPARSE_TENSOR = 11,
    MP_ATTR_SPARSE_TENSORS = 12,
    MP_ATTR_TYPE_PROTO = 13,
    MP_ATTR_TYPE_PROTOS = 14,
} mp_attr_type;

struct mp_graph;

/* A value type as a TYPE_PROTO attribute gives it (e.g. Optional's `type`):
 * the outermost kind, and the element tensor's dtype and shape (rank -1: unknown). */
typedef struct mp_type {
    mp_value_kind kind;
    mp_value_kind elem_kind;      /* OPTIONAL: what it holds (as mp_value.elem_kind) */
    mp_dtype dtype;
    int rank;
    mp_dim *dims;
} mp_type;

typedef struct mp_attr {
    const char *name;
    mp_attr_type type;
    int64_t i;
    float f;
    const char *s;                /* STRING (NUL-terminated copy) */
    size_t slen;
    int32_t n;                    /* element count of the list kinds */
    int64_t *ints;
    float *floats;
    const char **strings;
    mp_tensor **tensors;          /* TENSOR: tensors[0]; TENSORS: n of them; SPARSE: densified */
    struct mp_graph **graphs;     /* GRAPH: graphs[0]; GRAPHS: n of them */
    mp_type *types;               /* TYPE_PROTO: types[0]; TYPE_PROTOS: n of them */
} mp_attr;

/* ---- nodes -------------------------------------------------------------- */

typedef struct mp_node {
    const char *name;             /* ONNX node name, or "<op>_<id>" when the file has none */
    const char *op_type;
    const char *domain;           /* "" for ai.onnx */
    int32_t op;                   /* index into the op table, -1 if unsupported */
    int32_t nin, nout;
    int32_t *in;                  /* value ids; -1 for an omitted optional input */
    int32_t *out;                 /* value ids; -1 for an omitted optional output */
    int32_t nattrs;
    mp_attr *attrs;
    mp_phase phase;               /* FORWARD for imported nodes */
} mp_node;

/* ---- graphs -------------------------------------------------------------- */

typedef struct mp_opset {
    const char *domain;           /* "" or "ai.onnx" both mean the default domain */
    int64_t version;
} mp_opset;

typedef struct mp_graph {
    mp_arena *arena;              /* shared with subgraphs; owned by the top graph */
    struct mp_graph *parent;      /* enclosing graph for subgraphs, else NULL */
    const char *name;

    mp_value *values;
    int32_t nvalues, capvalues;
    mp_node *nodes;
    int32_t nnodes, capnodes;

    int32_t *inputs, ninputs;     /* graph inputs that are not initializers */
    int32_t *outputs, noutputs;
    int32_t *inits, ninits;       /* initializers */

    /* top-level graph only */
    mp_opset *opsets;
    int32_t nopsets;
    int64_t ir_version;
    const char *producer;
    const char *producer_version;
    const char *model_dir;        /* directory of the model file, for external data */
    const char **symbols;         /* symbolic dim names */
    int64_t *symbol_values;       /* bound value or -1 */
    int32_t nsymbols, capsymbols;

    struct mp_name_map *names;    /* value name -> id (this graph's scope) */
} mp_graph;

mp_graph *mp_graph_new(mp_graph *parent);      /* parent NULL: new arena */
void mp_graph_free(mp_graph *g);                /* top-level graph only */
mp_graph *mp_graph_root(mp_graph *g);

/* Finds a value by name in this graph's scope (not the parent's); -1 if none. */
int32_t mp_graph_find(const mp_graph *g, const char *name);
/* The root of v's alias chain (value->alias: a view or an in-place write), the
 * value whose buffer v lives in; -1 on a cycle or an alias outside the graph. */
int32_t mp_value_root(const mp_graph *g, int32_t v);
/* Adds a value with that name; fails (-1) if the name is already defined here. */
int32_t mp_graph_add_value(mp_graph *g, const char *name);
/* Adds a value named name, or name_K with the least K >= 1 whose name is
 * free (passes name many values after one: each slice of a Concat's gradient). */
int32_t mp_graph_add_unique(mp_graph *g, const char *name);
/* Finds or adds. */
int32_t mp_graph_value(mp_graph *g, const char *name);
/* Adds a node; inputs/outputs are value ids (-1 = omitted). Consumers are
 * not linked until mp_graph_link(). */
int32_t mp_graph_add_node(mp_graph *g, const char *name, const char *op_type, const char *domain,
                          int32_t nin, const int32_t *in, int32_t nout, const int32_t *out);
/* Fills producer/consumer links from the nodes; fails if a value has two producers. */
int mp_graph_link(mp_graph *g, mp_err *err);

/* Symbolic dims, shared by the whole model. */
int32_t mp_symbol(mp_graph *g, const char *name);          /* find or add */
int32_t mp_symbol_find(const mp_graph *g, const char *name);
mp_dim mp_sym_dim(mp_graph *g, const char *name);         /* a dim that is that symbol */
/* Binds the symbol (adds it if new). */
void mp_symbol_bind(mp_graph *g, const char *name, int64_t v);
/* Replaces bound symbols in d by their value. */
mp_dim mp_dim_resolve(const mp_graph *g, mp_dim d);
const char *mp_dim_str(const mp_graph *g, mp_dim d, char buf[32]);

/* ---- value helpers for shape rules ------------------------------------- */

mp_value *mp_val(mp_graph *g, int32_t id);                /* NULL for -1 */
/* Sets dtype and shape (dims copied; rank -1 = unknown) and recomputes bytes. */
void mp_value_set(mp_graph *g, int32_t id, mp_dtype t, int rank, const mp_dim *dims);
bool mp_value_shape_known(const mp_value *v);            /* rank >= 0 and every dim known */
int64_t mp_value_numel(const mp_value *v);               /* -1 if not fully known */
/* "float32[batch,3,224,224]" */
const char *mp_value_type_str(const mp_graph *g, const mp_value *v, char *buf, size_t n);

/* ---- constant tensors ----------------------------------------------------- */

mp_tensor *mp_tensor_new(mp_arena *a, mp_dtype t, int rank, const int64_t *dims);  /* zeroed data */
/* Element i converted to int64 / double (any numeric or bool dtype). */
int64_t mp_tensor_get_i64(const mp_tensor *t, int64_t i);
/* 16-bit floats (ir/half.c): widening is exact; rounding to float16 /
 * bfloat16 is round-to-nearest-even, float16 with subnormals and overflow to
 * inf; NaN stays NaN (quiet, sign and top payload bits kept). */
float mp_f16_to_f32(uint16_t h);
float mp_bf16_to_f32(uint16_t h);
uint16_t mp_f32_to_f16(float f);
uint16_t mp_f32_to_bf16(float f);

double mp_tensor_get_f64(const mp_tensor *t, int64_t i);
/* Element i set from an int64 / double, converted to the tensor's dtype (any
 * integer, bool, float32/64, float16, bfloat16); a dtype without an encoding
 * here (8- and 4-bit floats, 4-bit ints, strings) is left unchanged. */
void mp_tensor_set_i64(mp_tensor *t, int64_t i, int64_t v);
void mp_tensor_set_f64(mp_tensor *t, int64_t i, double v);

/* ---- attributes ------------------------------------------------------------ */

const mp_attr *mp_node_attr(const mp_node *n, const char *name);
int64_t mp_attr_int(const mp_node *n, const char *name, int64_t dflt);
float mp_attr_float(const mp_node *n, const char *name, float dflt);
const char *mp_attr_str(const mp_node *n, const char *name, const char *dflt);
/* INTS attribute: returns count (-1 if absent), *out points into the arena. */
int mp_attr_ints(const mp_node *n, const char *name, const int64_t **out);

/* Opset version of a domain in the model ("" == "ai.onnx"); 0 if not imported. */
int64_t mp_graph_opset(const mp_graph *g, const char *domain);

/* Checked integer arithmetic for dims: false on overflow. */
static inline bool mp_mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool mp_add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

#endif
