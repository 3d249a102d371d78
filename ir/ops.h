/* ops.h - the op table: one line per ONNX op, the single source of the op enum,
 * its name and domain, and its rules.
 *
 *   const mp_op_def *d = mp_op_find("Conv", "", 17);   // NULL: unsupported
 *   d->shape(g, node, &err);                          // infer types/shapes, fold constants
 *
 * The table rows live in ir/ops/<category>.def as
 *     MP_OP(Id, "OnnxName", "domain", shape_rule)
 * and are included in order by ops.c, so categories are enum ranges (QBE-style).
 * Later columns (gradient rule, cost) are added to the same rows.
 */
#ifndef MP_OPS_H
#define MP_OPS_H

#include "ir.h"

/* A shape rule sets dtype/shape of every output of n from its inputs and
 * attributes, and, when all inputs needed are known constants (value->konst)
 * and the result is small, fills the outputs' konst (shape arithmetic folding).
 * Returns 0, or -1 with err naming the problem (the driver prefixes the node). */
typedef int (*mp_shape_rule)(mp_graph *g, mp_node *n, mp_err *err);

typedef enum mp_op_id {
#define MP_OP(id, name, domain, shape) MP_OP_##id,
#include "ops/all.def"
#undef MP_OP
    MP_OP_COUNT
} mp_op_id;

typedef struct mp_op_def {
    mp_op_id id;
    const char *name;
    const char *domain;      /* "" for the default ai.onnx domain */
    mp_shape_rule shape;
} mp_op_def;

extern const mp_op_def mp_op_table[MP_OP_COUNT];

/* Looks up an op by ONNX op_type and domain ("ai.onnx" == ""). */
const mp_op_def *mp_op_find(const char *op_type, const char *domain);

/* Largest tensor (elements) that rules fold into konst. */
#define MP_FOLD_MAX_ELEMS (1 << 16)

#endif
