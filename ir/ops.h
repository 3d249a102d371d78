/* ops.h - the op table: one line per ONNX op, the single source of the op enum,
 * its name and domain, and its rules.
 *
 *   const mp_op_def *d = mp_op_find("Conv", "");      // NULL: unsupported
 *   d->shape(g, node, &err);                          // infer types/shapes, fold constants
 *   mp_op_cost c;
 *   mp_op_cost_node(g, node_id, &c, &err);            // FLOPs and bytes moved, from the shapes
 *
 * The table rows live in ir/ops/<category>.def as
 *     MP_OP(Id, "OnnxName", "domain", shape_rule, grad_rule, cost_rule)
 * and are included in order, so categories are enum ranges (QBE-style).
 * shape_rule: frontend/shape_*.c. grad_rule: the op's gradient rule in
 * passes/grad_*.c (mp_grad_Add), 0 when it has none; ir/ ignores this column,
 * passes/autodiff.c builds its lookup from it. cost_rule: ir/op_cost.c.
 */
#ifndef MP_OPS_H
#define MP_OPS_H

#include "ir.h"

/* A shape rule sets dtype/shape of every output of n from its inputs and
 * attributes, and, when all inputs needed are known constants (value->konst)
 * and the result is small, fills the outputs' konst (shape arithmetic folding).
 * Returns 0, or -1 with err naming the problem (the driver prefixes the node). */
typedef int (*mp_shape_rule)(mp_graph *g, mp_node *n, mp_err *err);

/* What one run of a node costs: arithmetic (a multiply-add is 2 FLOPs) and the
 * bytes of its inputs and outputs actually read or written. Views and shape
 * ops cost 0 and 0; data movement costs bytes only. */
typedef struct mp_op_cost {
    double flops;
    double bytes;
} mp_op_cost;

/* A cost rule fills c from n's shapes (inferred, every dim known); -1 when
 * they do not fit the op (mp_op_cost_node names the node). */
typedef int (*mp_cost_rule)(const mp_graph *g, const mp_node *n, mp_op_cost *c);

typedef enum mp_op_id {
#define MP_OP(id, name, domain, shape, grad, cost) MP_OP_##id,
#include "ops/all.def"
#undef MP_OP
    MP_OP_COUNT
} mp_op_id;

typedef struct mp_op_def {
    mp_op_id id;
    const char *name;
    const char *domain;      /* "" for the default ai.onnx domain */
    mp_shape_rule shape;
    mp_cost_rule cost;
} mp_op_def;

extern const mp_op_def mp_op_table[MP_OP_COUNT];

/* Looks up an op by ONNX op_type and domain ("ai.onnx" == ""). */
const mp_op_def *mp_op_find(const char *op_type, const char *domain);

/* The cost of node `node` of g (inferred, dims bound); fails naming the node
 * when it is not inferred or a size it needs is not known (ir/op_cost.c). */
int mp_op_cost_node(const mp_graph *g, int32_t node, mp_op_cost *c, mp_err *err);

/* Largest tensor (elements) that rules fold into konst. */
#define MP_FOLD_MAX_ELEMS (1 << 16)

#endif
