/* ops.c - the op table, built from the rows in ir/ops/. */
#include <string.h>

#include "ops.h"

/* Every rule named in the table (defined in frontend/shape_*.c). */
#define MP_OP(id, name, domain, shape) int shape(mp_graph *, mp_node *, mp_err *);
#include "ops/all.def"
#undef MP_OP

const mp_op_def mp_op_table[MP_OP_COUNT] = {
#define MP_OP(id, name, domain, shape) [MP_OP_##id] = {MP_OP_##id, name, domain, shape},
#include "ops/all.def"
#undef MP_OP
};

const mp_op_def *mp_op_find(const char *op_type, const char *domain)
{
    if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
    for (int i = 0; i < MP_OP_COUNT; i++)
        if (!strcmp(mp_op_table[i].name, op_type) && !strcmp(mp_op_table[i].domain, domain))
            return &mp_op_table[i];
    return NULL;
}
