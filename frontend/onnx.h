/* onnx.h - ONNX model import into the IR.
 *
 *   mp_err err;
 *   mp_model *m = mp_onnx_load("model.onnx", &err);
 *   if (!m) { fprintf(stderr, "memplan: %s\n", err.msg); return 2; }
 *   mp_graph *g = m->graph;   // shapes not yet inferred: see infer.h
 *   mp_onnx_close(m);
 *
 * The file is mapped read-only and walked at the wire level so that tensor
 * payloads (raw_data, typed data) are never copied: initializers keep a
 * reference (mp_data_ref) into the file or their external data file. Small
 * integer initializers (shape constants) are decoded into value->konst so that
 * shape arithmetic can fold.
 */
#ifndef MP_ONNX_H
#define MP_ONNX_H

#include "ir/ir.h"

typedef struct mp_model {
    mp_graph *graph;
    const char *path;
    const unsigned char *map;  /* the mapped file (for the runtime to read weights) */
    size_t size;
} mp_model;

mp_model *mp_onnx_load(const char *path, mp_err *err);
/* Same from memory (the buffer must outlive the model); used by the fuzzer. */
mp_model *mp_onnx_load_buffer(const void *buf, size_t size, const char *model_dir, mp_err *err);

/* Load options; all off by default (a zeroed struct, or NULL, means mp_onnx_load). */
typedef struct mp_onnx_opts {
    /* ONNX requires nodes in topological order, and by default a graph that
     * breaks it is rejected. With topo_sort, such a graph (and each subgraph)
     * is sorted first, stably: nodes keep the file's order wherever the data
     * flow allows. A cycle stays an error. */
    bool topo_sort;
} mp_onnx_opts;

mp_model *mp_onnx_load_with(const char *path, const mp_onnx_opts *opts, mp_err *err);
mp_model *mp_onnx_load_buffer_with(const void *buf, size_t size, const char *model_dir, const mp_onnx_opts *opts,
                                   mp_err *err);
void mp_onnx_close(mp_model *m);

/* Decodes a serialized TensorProto (e.g. a test's output_0.pb) into a tensor
 * in the arena (payload decoded only if want_data). */
mp_tensor *mp_onnx_read_tensor(mp_arena *a, const void *buf, size_t size, bool want_data, mp_err *err);

/* ---- shared by the importer's files (onnx_import.c, onnx_tensor.c) ------ */

struct Onnx__TensorProto;
struct Onnx__SparseTensorProto;

/* A TensorProto payload that the importer dropped from the bytes protobuf-c
 * unpacked, found in the file by walking the wire format instead. */
typedef struct mp_onnx_payload {
    int field;                 /* 0: none dropped; 9 raw_data; 4, 5, 7, 10, 11: that packed typed field */
    int64_t offset, length;    /* bytes of the payload, from the start of the buffer */
    int64_t count;             /* typed fields: elements */
} mp_onnx_payload;

/* Checks a tensor's dtype, dims and payload size (what names it in messages);
 * fills *ref (offsets of a dropped payload, external data, INLINE when the
 * payload is in the struct, NONE when empty) and *numel. */
int mp_onnx_tensor_check(const struct Onnx__TensorProto *tp, const mp_onnx_payload *pl, const char *what,
                         mp_data_ref *ref, int64_t *numel, mp_arena *a, mp_err *err);
/* Decodes a checked tensor; its payload (if in the struct) only when want_data, else data = NULL. */
mp_tensor *mp_onnx_tensor_decode(mp_arena *a, const struct Onnx__TensorProto *tp, bool want_data);
/* Checks and densifies a sparse tensor (data only when want_data and at most MP_FOLD_MAX_ELEMS). */
mp_tensor *mp_onnx_sparse_decode(mp_arena *a, const struct Onnx__SparseTensorProto *sp, bool want_data,
                                 const char *what, mp_err *err);

#endif
