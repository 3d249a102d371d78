/* infer.h - type and shape inference over a whole graph, with folding.
 *
 *   mp_err err;
 *   if (mp_bind_dims(g, &binds, &err) || mp_infer(g, &err)) { puts(err.msg); ... }
 *
 * Walks nodes in file order (ONNX requires topological order), looks each op
 * up in the op table and runs its shape rule. Subgraphs are inferred by the
 * rules of If/Loop/Scan through mp_infer_subgraph().
 */
#ifndef MP_INFER_H
#define MP_INFER_H

#include "ir/ir.h"

typedef struct mp_bindings {
    int64_t batch;            /* --batch N: binds dim 0 of every graph input; -1 = unset */
    int nnamed;
    const char **names;       /* --dim NAME=VALUE */
    const int64_t *values;
} mp_bindings;

/* Applies the bindings to the inputs' dims; fails on a name that no input uses. */
int mp_bind_dims(mp_graph *g, const mp_bindings *b, mp_err *err);

/* Infers every node; fails on an unsupported op or a model error, with a
 * message naming the node, op, domain and opset. */
int mp_infer(mp_graph *g, mp_err *err);

/* Infers a subgraph whose formal inputs the caller has already typed; outer
 * names (MP_VAL_OUTER) are copied from the enclosing graphs first. */
int mp_infer_subgraph(mp_graph *sub, mp_err *err);

/* Names the first symbolic dim left unbound in any value (NULL if none). */
const char *mp_unbound_symbol(const mp_graph *g);

#endif
