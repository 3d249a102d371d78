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
void mp_onnx_close(mp_model *m);

/* Decodes a serialized TensorProto (e.g. a test's output_0.pb) into a tensor
 * in the arena (payload decoded only if want_data). */
mp_tensor *mp_onnx_read_tensor(mp_arena *a, const void *buf, size_t size, bool want_data, mp_err *err);

#endif
