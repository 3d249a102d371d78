/* ops.c - the op table, built from the rows in ir/ops/ (the grad column
 * belongs to passes/autodiff.c and is ignored here). */
#include <string.h>

#include "ops.h"

/* Every rule named in the table (shape rules in frontend/shape_*.c, cost rules in ir/op_cost.c). */
#define MP_OP(id, name, domain, shape, grad, cost) \
    int shape(mp_graph *, mp_node *, mp_err *);    \
    int cost(const mp_graph *, const mp_node *, mp_op_cost *);
#include "ops/all.def"
#undef MP_OP

const mp_op_def mp_op_table[] = {
#define MP_OP(id, name, domain, shape, grad, cost) {MP_OP_##id, name, domain, shape, cost},
#include "ops/all.def"
#undef MP_OP
};
_Static_assert(sizeof mp_op_table / sizeof mp_op_table[0] == MP_OP_COUNT, "one op table row per op id");

const mp_op_def *mp_op_find(const char *op_type, const char *domain)
{
    if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
    for (int i = 0; i < MP_OP_COUNT; i++)
        if (!strcmp(mp_op_table[i].name, op_type) && !strcmp(mp_op_table[i].domain, domain))
            return &mp_op_table[i];
    return NULL;
}
