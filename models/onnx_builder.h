/* onnx_builder.h - a small API that writes ONNX models named the way torch.onnx.export names them.
 *
 *   mp_ob *b = mp_ob_new("main_graph");
 *   const char *x = mp_ob_input(b, "input", MP_FLOAT, 2, (const char *[]){"batch", "784"});
 *   mp_ob_push(b, "fc1");                                   // node scope "/fc1", parameters "fc1.*"
 *   const char *w = mp_ob_param_uniform(b, "weight", 2, (int64_t[]){256, 784}, 1 / sqrtf(784));
 *   const char *bias = mp_ob_param_uniform(b, "bias", 1, (int64_t[]){256}, 1 / sqrtf(784));
 *   Onnx__NodeProto *n = mp_ob_node(b, "Gemm", 1, 3, (const char *[]){x, w, bias});  // "/fc1/Gemm"
 *   mp_ob_attr_int(b, n, "transB", 1);
 *   mp_ob_pop(b);
 *   mp_ob_output(b, n->output[0], "logits", MP_FLOAT, 2, (const char *[]){"batch", "256"});
 *   if (mp_ob_write(b, "mlp.onnx", &err) < 0) ...
 *   mp_ob_free(b);
 *
 * Nodes get unique names "<scope>/<OpType>[_k]" and outputs "<name>_output_<i>", as in
 * PyTorch >= 1.13 exports. Parameter values come from a PRNG seeded by the parameter's
 * name, so the same model is the same bytes on every run and every machine. With
 * mp_ob_set_external, large parameters become external data (offsets into a file that is
 * never written: planning needs only dtype and dims).
 * Misuse of the API (unbalanced scopes, too many attributes) is a bug and asserts.
 */
#ifndef MP_ONNX_BUILDER_H
#define MP_ONNX_BUILDER_H

#include <stdint.h>

#include "ir/ir.h"      /* mp_dtype (numbered as ONNX), mp_err */
#include "onnx.pb-c.h"  /* Onnx__NodeProto, onnx__model_proto__pack */

typedef struct mp_ob mp_ob;

mp_ob *mp_ob_new(const char *graph_name);
void mp_ob_free(mp_ob *b);

/* Large parameters (>= min_bytes) are written as EXTERNAL data at consecutive offsets in
 * `location`; their values are never generated. */
void mp_ob_set_external(mp_ob *b, const char *location, int64_t min_bytes);

/* Module scopes: push("blocks.0") then push("attn") gives nodes "/blocks.0/attn/..." and
 * parameters "blocks.0.attn.<name>". */
void mp_ob_push(mp_ob *b, const char *module);
void mp_ob_pop(mp_ob *b);

/* Graph inputs and outputs. Each dim is a decimal size ("784") or a symbol ("batch").
 * mp_ob_output renames `value` (a node output) to `name`; returns the new name. */
const char *mp_ob_input(mp_ob *b, const char *name, mp_dtype t, int rank, const char *const *dims);
const char *mp_ob_output(mp_ob *b, const char *value, const char *name, mp_dtype t, int rank,
                         const char *const *dims);

/* Float32 parameters in the current scope; the return is the initializer's name. */
const char *mp_ob_param_uniform(mp_ob *b, const char *name, int rank, const int64_t *dims, float bound);
const char *mp_ob_param_fill(mp_ob *b, const char *name, int rank, const int64_t *dims, float value);

/* A node in the current scope with n_out outputs; inputs may be "" for an omitted optional. */
Onnx__NodeProto *mp_ob_node(mp_ob *b, const char *op, int n_out, int n_in, const char *const *in);
/* The single output of a new one-output node: the common case. */
const char *mp_ob_op(mp_ob *b, const char *op, int n_in, const char *const *in);

void mp_ob_attr_int(mp_ob *b, Onnx__NodeProto *n, const char *name, int64_t v);
void mp_ob_attr_float(mp_ob *b, Onnx__NodeProto *n, const char *name, float v);
void mp_ob_attr_ints(mp_ob *b, Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
void mp_ob_attr_floats(mp_ob *b, Onnx__NodeProto *n, const char *name, int count, const float *v);
void mp_ob_attr_str(mp_ob *b, Onnx__NodeProto *n, const char *name, const char *v);
/* A float32 tensor of shape [1] holding v (ConstantOfShape's `value`). */
void mp_ob_attr_tensor_f32(mp_ob *b, Onnx__NodeProto *n, const char *name, float v);

/* Constant nodes (as torch emits them): int64 of rank 0 (count 1) or rank 1, float32 scalar. */
const char *mp_ob_const_i64(mp_ob *b, int rank, int count, const int64_t *v);
const char *mp_ob_const_f32(mp_ob *b, float v);

int64_t mp_ob_param_count(const mp_ob *b);  /* elements over all initializers */
int mp_ob_node_count(const mp_ob *b);

/* Serializes the model (ir_version 8, opset 17, producer "memplan-models"); returns the
 * file size, or -1 with err set. */
int64_t mp_ob_write(mp_ob *b, const char *path, mp_err *err);

#endif
