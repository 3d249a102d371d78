/* shape_grad.c - shape rules of the training step's memplan-domain ops
 * (ir/ops/grad.def). Gradients take the dtype of the incoming gradient
 * (input 0) and the shape of the tensor they are the gradient of. */
#include <string.h>

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

/* Checks that dY's spatial extents are what the forward window (kernel kd,
 * strides, dilations, pads or auto_pad, ceil_mode) gives over X's; dims not
 * known are skipped. x and dy: [N, C, spatial..] of rank `rank`. */
static int check_window(const mp_graph *g, const mp_node *n, int rank, const mp_dim *x, const mp_dim *dy,
                        const int64_t *kd, mp_err *err)
{
    int nsp = rank - 2;
    const int64_t *s, *d, *p;
    int ns = mp_attr_ints(n, "strides", &s), nd = mp_attr_ints(n, "dilations", &d), np = mp_attr_ints(n, "pads", &p);
    if ((ns >= 0 && ns != nsp) || (nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp))
        return mp_fail(err, "strides, dilations or pads do not fit %d spatial dims", nsp);
    const char *ap = mp_attr_str(n, "auto_pad", "NOTSET");
    bool same = np < 0 && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")), valid = !strcmp(ap, "VALID");
    bool ceil_mode = mp_attr_int(n, "ceil_mode", 0) != 0;
    for (int i = 0; i < nsp; i++) {
        mp_dim in = mp_dim_resolve(g, x[2 + i]), out = mp_dim_resolve(g, dy[2 + i]);
        int64_t si = ns >= 0 ? s[i] : 1, di = nd >= 0 ? d[i] : 1, want;
        if (si < 1 || di < 1 || kd[i] < 1) return mp_fail(err, "kernel, strides and dilations must be positive");
        if (in.v < 0 || out.v < 0) continue;
        if (same) {
            want = in.v / si + (in.v % si != 0);
        } else {
            int64_t pb = np >= 0 && !valid ? p[i] : 0, pe = np >= 0 && !valid ? p[nsp + i] : 0, span, len;
            if (!mp_mul_ok(kd[i] - 1, di, &span) || !mp_add_ok(in.v, pb, &len) || !mp_add_ok(len, pe, &len))
                return mp_fail(err, "window arithmetic overflows on spatial dim %d", i);
            len -= span + 1;
            if (len < 0) return mp_fail(err, "spatial dim %d: the kernel spans more than the padded input", i);
            want = (ceil_mode ? len / si + (len % si != 0) : len / si) + 1;
            if (ceil_mode && (want - 1) * si >= in.v + pb) want--; /* a window starting in the end pads is dropped */
        }
        if (want != out.v)
            return mp_fail(err, "dY's spatial dim %d is %lld, the window over X gives %lld", i, (long long)out.v,
                           (long long)want);
    }
    return 0;
}

/* Fails unless dY and X are [N, C, spatial..] of one rank with one N. */
static int check_nc(const mp_graph *g, const mp_value *dy, const mp_value *x, mp_err *err)
{
    if (x->rank < 0 || dy->rank < 0) return 0;
    if (x->rank < 3 || dy->rank != x->rank || x->rank > MP_MAX_RANK)
        return mp_fail(err, "dY (rank %d) and X (rank %d) must be [N, C, spatial..] of one rank", dy->rank, x->rank);
    mp_dim a = mp_dim_resolve(g, dy->dims[0]), b = mp_dim_resolve(g, x->dims[0]);
    if (a.v >= 0 && b.v >= 0 && a.v != b.v)
        return mp_fail(err, "dY has batch %lld, X %lld", (long long)a.v, (long long)b.v);
    return 0;
}

/* (dY, X, W) -> dX like X, dW like W, dB [W.dims[0]], for 1 to N spatial dims:
 * dY [N, M, out..], X [N, C, in..], W [M, C / group, k..] with out.. the
 * Conv window over in.. (ConvTranspose's rule passes (X, dY, W) the same way). */
int shape_ConvGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err) || need_float(g, n, 1, "X", err) || need_float(g, n, 2, "W", err)) return -1;
    mp_dtype t = mp_in(g, n, 0)->dtype;
    const mp_value *dy = mp_in(g, n, 0), *x = mp_in(g, n, 1), *w = mp_in(g, n, 2);
    if (check_nc(g, dy, x, err)) return -1;
    if (x->rank >= 3 && w->rank >= 0) {
        if (w->rank != x->rank) return mp_fail(err, "W has rank %d, X %d", w->rank, x->rank);
        int64_t group = mp_attr_int(n, "group", 1), kd[MP_MAX_RANK];
        mp_dim m = mp_dim_resolve(g, w->dims[0]), cg = mp_dim_resolve(g, w->dims[1]);
        mp_dim c = mp_dim_resolve(g, x->dims[1]), dm = mp_dim_resolve(g, dy->dims[1]);
        if (group < 1) return mp_fail(err, "group %lld must be positive", (long long)group);
        if (m.v >= 0 && dm.v >= 0 && m.v != dm.v)
            return mp_fail(err, "dY has %lld channels, W %lld filters", (long long)dm.v, (long long)m.v);
        if (cg.v >= 0 && c.v >= 0 && (cg.v > INT64_MAX / group || cg.v * group != c.v))
            return mp_fail(err, "X has %lld channels, W takes %lld per group x %lld groups", (long long)c.v,
                           (long long)cg.v, (long long)group);
        bool known = true;
        for (int i = 2; i < w->rank; i++) known &= (kd[i - 2] = mp_dim_resolve(g, w->dims[i]).v) >= 0;
        if (known && check_window(g, n, x->rank, x->dims, dy->dims, kd, err)) return -1;
    }
    if (mp_set_out_like(g, n, 0, t, x) || mp_set_out_like(g, n, 1, t, w)) return -1;
    if (w->rank < 1) return mp_set_out(g, n, 2, t, w->rank < 0 ? -1 : 1, (mp_dim[]){MP_DIM_UNKNOWN});
    return mp_set_out(g, n, 2, t, 1, &w->dims[0]);
}

/* (dY, X, grid) -> dX like X, dGrid like grid; dY [N, C, o..] is GridSample's output over them. */
int shape_GridSampleGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err) || need_float(g, n, 1, "X", err) || need_float(g, n, 2, "grid", err)) return -1;
    const mp_value *dy = mp_in(g, n, 0), *x = mp_in(g, n, 1), *grid = mp_in(g, n, 2);
    if (check_nc(g, dy, x, err)) return -1;
    if (grid->rank >= 0 && grid->rank != x->rank)
        return mp_fail(err, "grid has rank %d, X %d", grid->rank, x->rank);
    return mp_set_out_like(g, n, 0, dy->dtype, x) || mp_set_out_like(g, n, 1, dy->dtype, grid) ? -1 : 0;
}

/* (dGrid, size) -> dTheta [N, r, r + 1], dGrid [N, d.., r] AffineGrid's output. */
int shape_AffineGridGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dGrid", err)) return -1;
    const mp_value *dg = mp_in(g, n, 0);
    if (dg->rank >= 0 && dg->rank != 4 && dg->rank != 5) return mp_fail(err, "dGrid has rank %d; expected 4 or 5", dg->rank);
    if (dg->rank < 0) return mp_set_out(g, n, 0, dg->dtype, 3, (mp_dim[]){MP_DIM_UNKNOWN, MP_DIM_UNKNOWN, MP_DIM_UNKNOWN});
    int r = dg->rank - 2;
    return mp_set_out(g, n, 0, dg->dtype, 3, (mp_dim[]){dg->dims[0], mp_dim_of(r), mp_dim_of(r + 1)});
}

/* The pools' kernel_shape, checked against the spatial rank. */
static int pool_kernel(const mp_node *n, int rank, const int64_t **kd, mp_err *err)
{
    int nk = mp_attr_ints(n, "kernel_shape", kd);
    if (nk != rank - 2) return mp_fail(err, "kernel_shape has %d entries for %d spatial dims", nk, rank - 2);
    return 0;
}

/* (dY, X, Indices) -> dX like X; dY the MaxPool window over X, Indices like dY. */
int shape_MaxPoolGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (need_float(g, n, 0, "dY", err) || need_float(g, n, 1, "X", err)) return -1;
    const mp_value *dy = mp_in(g, n, 0), *x = mp_in(g, n, 1), *ind = mp_in(g, n, 2);
    const int64_t *kd;
    if (check_nc(g, dy, x, err)) return -1;
    if (ind && ind->dtype != MP_UNDEFINED && ind->dtype != MP_INT64)
        return mp_fail(err, "Indices must be int64, not %s", mp_dtype_name(ind->dtype));
    if (ind && ind->rank >= 0 && dy->rank >= 0 && ind->rank != dy->rank)
        return mp_fail(err, "Indices have rank %d, dY %d", ind->rank, dy->rank);
    if (x->rank >= 3 && (pool_kernel(n, x->rank, &kd, err) || check_window(g, n, x->rank, x->dims, dy->dims, kd, err)))
        return -1;
    return mp_set_out_like(g, n, 0, dy->dtype, x);
}

/* (dY) -> dX of the attribute `shape` (X's); dY the AveragePool window over it. */
int shape_AveragePoolGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    if (shape_GradToShape(g, n, err)) return -1;
    const mp_value *dy = mp_in(g, n, 0), *x = mp_out(g, n, 0);
    const int64_t *kd;
    if (!x || check_nc(g, dy, x, err)) return -1;
    if (x->rank >= 3 && (pool_kernel(n, x->rank, &kd, err) || check_window(g, n, x->rank, x->dims, dy->dims, kd, err)))
        return -1;
    return 0;
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

/* (param, grad, state...) -> (param', state'...): each like what it updates.
 * With dynamic_loss_scale = 1, two more inputs come last: whether every
 * gradient is finite and the loss scale's exponent (passes/loss_scale.c). */
int shape_OptUpdate(mp_graph *g, mp_node *n, mp_err *err)
{
    int extra = mp_attr_int(n, "dynamic_loss_scale", 0) ? 2 : 0;
    if (n->nin < 2 + extra || n->nout != n->nin - 1 - extra)
        return mp_fail(err, "takes (param, grad, state...%s) and gives (param', state'...): %d inputs, %d outputs",
                       extra ? ", finite, log2 scale" : "", n->nin, n->nout);
    for (int i = 0; i < n->nin; i++)
        if (need_float(g, n, i, i == 0 ? "param" : i == 1 ? "grad" : "state", err)) return -1;
    for (int k = 0; k < n->nout; k++) {
        const mp_value *v = mp_in(g, n, k == 0 ? 0 : k + 1);
        if (mp_set_out_like(g, n, k, v->dtype, v)) return -1;
    }
    return 0;
}

/* (log2 scale) -> the seed 2^(max_log2 + log2), a scalar of dtype `to`. */
int shape_LossScale(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin != 1 || n->nout != 1) return mp_fail(err, "takes (log2 scale) and gives (seed)");
    if (need_float(g, n, 0, "log2 scale", err)) return -1;
    int64_t t = mp_attr_int(n, "to", MP_FLOAT);
    if (!mp_dtype_valid((int)t) || !(MP_T(t) & MP_T_FLOATS))
        return mp_fail(err, "attribute 'to' %lld is not a float type", (long long)t);
    return mp_set_out(g, n, 0, (mp_dtype)t, 0, NULL);
}

/* (tensors...) -> 1 when every element of every input is finite, else 0 (a float scalar). */
int shape_AllFinite(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin < 1 || n->nout != 1) return mp_fail(err, "takes (tensors...) and gives (finite)");
    for (int i = 0; i < n->nin; i++)
        if (need_float(g, n, i, "tensor", err)) return -1;
    return mp_set_out(g, n, 0, MP_FLOAT, 0, NULL);
}
