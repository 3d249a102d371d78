/* shape_grad.c - shape rules of the training step's memplan-domain ops
 * (ir/ops/grad.def). Gradients take the dtype of the incoming gradient
 * (input 0) and the shape of the tensor they are the gradient of. */
#include "shape.h"

static int need_float(mp_graph *g, const mp_node *n, int i, const char *what, mp_err *err)
{
    const mp_value *v = mp_in(g, n, i);
    if (!v) return mp_fail(err, "missing input %d (%s)", i, what);
    if (v->dtype != MP_UNDEFINED && !(MP_T(v->dtype) & MP_T_FLOATS))
        return mp_fail(err, "input %d (%s) must be a float tensor, not %s", i, what, mp_dtype_name(v->dtype));
    return 0;
}

/* (dY, saved) -> dX like saved. */
int shape_GradLikeSaved(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err)) return -1;
    const mp_value *s = mp_in(g, n, 1);
    if (!s) return mp_fail(err, "missing input 1 (the saved forward tensor)");
    return mp_set_out_like(g, n, 0, mp_in(g, n, 0)->dtype, s);
}

/* (dY, ...) -> like dY. */
int shape_GradLikeDy(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err)) return -1;
    const mp_value *d = mp_in(g, n, 0);
    return mp_set_out_like(g, n, 0, d->dtype, d);
}

/* Output shape from the INTS attribute `shape`; dtype of input 0, or attribute `dtype` without inputs. */
int shape_GradToShape(mp_graph *g, mp_node *n, mp_err *err)
{
    const int64_t *s;
    int rank = mp_attr_ints(n, "shape", &s);
    if (rank < 0) return mp_fail(err, "missing attribute 'shape'");
    if (rank > MP_MAX_RANK) return mp_fail(err, "attribute 'shape' has rank %d (limit %d)", rank, MP_MAX_RANK);
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        if (s[i] < 0) return mp_fail(err, "attribute 'shape' has a negative dimension %lld", (long long)s[i]);
        d[i] = mp_dim_of(s[i]);
    }
    mp_dtype t;
    if (n->nin > 0) {
        if (need_float(g, n, 0, "dY", err)) return -1;
        t = mp_in(g, n, 0)->dtype;
    } else {
        int64_t a = mp_attr_int(n, "dtype", MP_FLOAT);
        if (!mp_dtype_valid((int)a) || !(MP_T(a) & MP_T_FLOATS))
            return mp_fail(err, "attribute 'dtype' %lld is not a float type", (long long)a);
        t = (mp_dtype)a;
    }
    return mp_set_out(g, n, 0, t, rank, d);
}

/* (dY, X, W) -> dX like X, dW like W, dB [W.dims[0]]. */
int shape_ConvGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err) || need_float(g, n, 1, "X", err) || need_float(g, n, 2, "W", err)) return -1;
    mp_dtype t = mp_in(g, n, 0)->dtype;
    const mp_value *w = mp_in(g, n, 2);
    if (mp_set_out_like(g, n, 0, t, mp_in(g, n, 1)) || mp_set_out_like(g, n, 1, t, w)) return -1;
    if (w->rank < 1) return mp_set_out(g, n, 2, t, w->rank < 0 ? -1 : 1, (mp_dim[]){MP_DIM_UNKNOWN});
    return mp_set_out(g, n, 2, t, 1, &w->dims[0]);
}

/* (dY, X, scale, ...) -> dX like X, dScale and dBias like scale. */
int shape_NormGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err) || need_float(g, n, 1, "X", err) || need_float(g, n, 2, "scale", err)) return -1;
    mp_dtype t = mp_in(g, n, 0)->dtype;
    const mp_value *s = mp_in(g, n, 2);
    if (mp_set_out_like(g, n, 0, t, mp_in(g, n, 1)) || mp_set_out_like(g, n, 1, s->dtype, s)) return -1;
    return mp_set_out_like(g, n, 2, s->dtype, s);
}

/* (param, grad, state...) -> (param', state'...): each like what it updates. */
int shape_OptUpdate(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin < 2 || n->nout != n->nin - 1)
        return mp_fail(err, "takes (param, grad, state...) and gives (param', state'...): %d inputs, %d outputs",
                       n->nin, n->nout);
    for (int i = 0; i < n->nin; i++)
        if (need_float(g, n, i, i == 0 ? "param" : i == 1 ? "grad" : "state", err)) return -1;
    for (int k = 0; k < n->nout; k++) {
        const mp_value *v = mp_in(g, n, k == 0 ? 0 : k + 1);
        if (mp_set_out_like(g, n, k, v->dtype, v)) return -1;
    }
    return 0;
}
