/* shape_tensor.c - shape rules of the data-movement ops (ir/ops/tensor.def). */
#include "shape.h"

int shape_Identity(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    mp_set_out_like(g, n, 0, x->dtype, x);
    mp_value *y = mp_out(g, n, 0);
    if (y) {
        y->kind = x->kind;
        y->konst = x->konst;
        y->symdata = x->symdata;
        y->nsymdata = x->nsymdata;
    }
    return 0;
}
