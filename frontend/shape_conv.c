/* shape_conv.c - shape rules of the sliding-window ops (ir/ops/nn.def): the
 * convolutions (Conv, ConvInteger, QLinearConv, DeformConv, ConvTranspose),
 * the pools (Average/Max/Lp, their Global forms, MaxUnpool) and the ROI pools.
 *
 * All share one window model: per spatial axis a kernel k, stride s, dilation
 * d and pads (begin, end); the dilated kernel spans (k - 1) * d + 1 inputs. */
#include <stdio.h>
#include <string.h>

#include "shape_nn.h"

typedef enum { PAD_NOTSET, PAD_VALID, PAD_SAME_UPPER, PAD_SAME_LOWER } auto_pad;

/* One node's window attributes, read and checked once. */
typedef struct window {
    int nsp;                     /* spatial axes */
    int64_t kernel[MP_MAX_RANK]; /* 0: unknown (from weights whose shape is not known) */
    int64_t strides[MP_MAX_RANK];
    int64_t dilations[MP_MAX_RANK];
    int64_t pads[2 * MP_MAX_RANK]; /* all begins, then all ends (ONNX order) */
    bool explicit_pads;            /* a pads attribute wins over auto_pad, as in ONNX's own inference */
    auto_pad pad_mode;
    bool ceil_mode;
} window;

static int read_auto_pad(const mp_node *n, auto_pad *out, mp_err *err)
{
    static const char *const names[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const char *s = mp_attr_str(n, "auto_pad", "NOTSET");
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (auto_pad)i;
            return 0;
        }
    if (!*s) { /* some exporters write an empty string for the default */
        *out = PAD_NOTSET;
        return 0;
    }
    return mp_fail(err, "auto_pad '%s' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", s);
}

/* Reads kernel_shape (or the spatial dims of weights w), strides, dilations,
 * pads, auto_pad and ceil_mode for nsp spatial axes. */
static int read_window(const mp_node *n, int nsp, const mp_value *w, window *win, mp_err *err)
{
    memset(win, 0, sizeof *win);
    win->nsp = nsp;
    if (mp_node_attr(n, "kernel_shape")) {
        if (nn_ints_attr(n, "kernel_shape", nsp, 0, win->kernel, err)) return -1;
        for (int i = 0; i < nsp; i++) {
            if (win->kernel[i] <= 0)
                return mp_fail(err, "kernel_shape[%d] is %lld; kernel sizes must be positive", i,
                               (long long)win->kernel[i]);
            if (w && w->rank == nsp + 2 && w->dims[2 + i].v >= 0 && w->dims[2 + i].v != win->kernel[i])
                return mp_fail(err, "kernel_shape[%d] is %lld but W's spatial dim is %lld", i,
                               (long long)win->kernel[i], (long long)w->dims[2 + i].v);
        }
    } else if (!w) {
        return mp_fail(err, "attribute 'kernel_shape' is required");
    } else if (w->rank == nsp + 2) {
        for (int i = 0; i < nsp; i++) win->kernel[i] = w->dims[2 + i].v > 0 ? w->dims[2 + i].v : 0;
    }
    if (nn_ints_attr(n, "strides", nsp, 1, win->strides, err) ||
        nn_ints_attr(n, "dilations", nsp, 1, win->dilations, err) ||
        nn_ints_attr(n, "pads", 2 * nsp, 0, win->pads, err) || read_auto_pad(n, &win->pad_mode, err))
        return -1;
    win->explicit_pads = mp_node_attr(n, "pads") != NULL;
    win->ceil_mode = mp_attr_int(n, "ceil_mode", 0) != 0;
    for (int i = 0; i < nsp; i++) {
        if (win->strides[i] <= 0)
            return mp_fail(err, "strides[%d] is %lld; strides must be positive", i, (long long)win->strides[i]);
        if (win->dilations[i] <= 0)
            return mp_fail(err, "dilations[%d] is %lld; dilations must be positive", i, (long long)win->dilations[i]);
    }
    for (int i = 0; i < 2 * nsp; i++)
        if (win->pads[i] < 0)
            return mp_fail(err, "pads[%d] is %lld; pads cannot be negative", i, (long long)win->pads[i]);
    return 0;
}

static bool same_padding(const window *w)
{
    return !w->explicit_pads && (w->pad_mode == PAD_SAME_UPPER || w->pad_mode == PAD_SAME_LOWER);
}

/* Dilated kernel extent (k - 1) * d + 1, or -1 on overflow. */
static int64_t dilated_kernel(const window *w, int i)
{
    int64_t e;
    if (!mp_mul_ok(w->kernel[i] - 1, w->dilations[i], &e) || !mp_add_ok(e, 1, &e)) return -1;
    return e;
}

/* Output size of a forward window (conv, pool) along spatial axis i. */
static int window_out(const window *w, int i, mp_dim in, mp_dim *out, mp_err *err)
{
    *out = MP_DIM_UNKNOWN;
    if (w->kernel[i] <= 0) return 0;
    int64_t ek = dilated_kernel(w, i), s = w->strides[i];
    if (ek < 0) return mp_fail(err, "dilated kernel size overflows on spatial axis %d", i);
    bool same = same_padding(w);
    int64_t pb = 0, pe = 0;
    if (!same && w->pad_mode != PAD_VALID) {
        pb = w->pads[i];
        pe = w->pads[i + w->nsp];
    }
    if (!mp_dim_known(in)) {
        /* stride 1 keeps a symbolic size when the window adds nothing: SAME, or pads == ek - 1 */
        if (same && s == 1)
            *out = in;
        else if (!same && s == 1 && pb <= INT64_MAX / 4 && pe <= INT64_MAX / 4)
            *out = nn_dim_affine(in, 1, pb + pe - ek + 1);
        return 0;
    }
    int64_t d = in.v;
    if (same) {
        /* ONNX: total padding makes out = ceil(d / s), split evenly; the odd one goes at the end for UPPER */
        int64_t want = d / s + (d % s != 0), total;
        if (!mp_mul_ok(want > 0 ? want - 1 : 0, s, &total) || !mp_add_ok(total, ek, &total)) goto overflow;
        total -= d;
        if (total < 0) total = 0;
        pb = w->pad_mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
        pe = total - pb;
    }
    int64_t len;
    if (!mp_add_ok(d, pb, &len) || !mp_add_ok(len, pe, &len)) goto overflow;
    len -= ek;
    if (len < 0)
        return mp_fail(err, "kernel %lld (dilation %lld) spans %lld but the padded input is %lld on spatial axis %d",
                       (long long)w->kernel[i], (long long)w->dilations[i], (long long)ek, (long long)(len + ek), i);
    int64_t o = (w->ceil_mode ? len / s + (len % s != 0) : len / s) + 1;
    /* ceil mode: a last window that would start inside the end padding is dropped */
    int64_t last_start;
    if (w->ceil_mode && mp_mul_ok(o - 1, s, &last_start) && last_start >= d + pb) o--;
    *out = mp_dim_of(o);
    return 0;
overflow:
    return mp_fail(err, "window arithmetic overflows on spatial axis %d", i);
}

/* Fills out[0..rank-2) with the forward window sizes over x's spatial axes
 * (all unknown when x's rank is not known). */
static int forward_spatial(const mp_node *n, const mp_value *x, const mp_value *w, int rank, mp_dim *out, mp_err *err)
{
    window win;
    if (read_window(n, rank - 2, w, &win, err)) return -1;
    for (int i = 0; i < rank - 2; i++) {
        if (x->rank < 0)
            out[i] = MP_DIM_UNKNOWN;
        else if (window_out(&win, i, x->dims[2 + i], &out[i], err))
            return -1;
    }
    return 0;
}

/* The rank of a conv's output: from X, else from W; -1 when neither is known. */
static int conv_rank(const mp_value *x, const mp_value *w, int *rank, mp_err *err)
{
    if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
        return mp_fail(err, "X has rank %d but W has rank %d; they must match", x->rank, w->rank);
    *rank = x->rank >= 0 ? x->rank : w->rank;
    if (*rank >= 0 && *rank < 3) return mp_fail(err, "rank %d is too small; expected (N, C, D1, ...)", *rank);
    return 0;
}

static int read_group(const mp_node *n, int64_t *group, mp_err *err)
{
    *group = mp_attr_int(n, "group", 1);
    if (*group <= 0) return mp_fail(err, "group is %lld; it must be positive", (long long)*group);
    return 0;
}

static int check_bias(const mp_graph *g, const mp_value *b, mp_dim m, mp_err *err)
{
    if (!b || b->rank < 0) return 0;
    if (b->rank != 1) return mp_fail(err, "bias B has rank %d; expected 1-D (M)", b->rank);
    return nn_check_dim(g, b->dims[0], m, "bias length", err);
}

/* Y[N, M, out...] = conv(X[N, C, D...], W[M, C/group, k...]) with X, W and
 * bias B at the given input indices (bi -1: no bias). */
static int conv_rule(mp_graph *g, mp_node *n, int xi, int wi, int bi, mp_dtype t, mp_err *err)
{
    char b1[32];
    const mp_value *x = mp_in(g, n, xi), *w = mp_in(g, n, wi);
    if (!x || !w) return mp_fail(err, "missing input %s", !x ? "X" : "W");
    int rank = -1; /* set by conv_rank; initialized for the optimizer's sake */
    if (conv_rank(x, w, &rank, err)) return -1;
    if (rank < 0) return nn_set_unknown(g, n, 0, t);
    int64_t group;
    if (read_group(n, &group, err)) return -1;
    mp_dim dims[MP_MAX_RANK];
    dims[0] = x->rank >= 0 ? x->dims[0] : MP_DIM_UNKNOWN;
    dims[1] = w->rank >= 0 ? w->dims[0] : MP_DIM_UNKNOWN;
    if (x->rank >= 0 && w->rank >= 0) {
        mp_dim c = x->dims[1], wc = w->dims[1];
        int64_t want;
        if (c.v >= 0 && wc.v >= 0 && (!mp_mul_ok(wc.v, group, &want) || c.v != want))
            return mp_fail(err, "X has %lld channels but W expects %lld per group x group %lld", (long long)c.v,
                           (long long)wc.v, (long long)group);
    }
    if (dims[1].v >= 0 && dims[1].v % group)
        return mp_fail(err, "W has %s output channels, not divisible by group %lld", mp_dim_str(g, dims[1], b1),
                       (long long)group);
    if (bi >= 0 && check_bias(g, mp_in(g, n, bi), dims[1], err)) return -1;
    if (forward_spatial(n, x, w, rank, dims + 2, err)) return -1;
    return mp_set_out(g, n, 0, t, rank, dims);
}

int shape_Conv(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    return conv_rule(g, n, 0, 1, 2, x ? x->dtype : MP_UNDEFINED, err);
}

int shape_ConvInteger(mp_graph *g, mp_node *n, mp_err *err) { return conv_rule(g, n, 0, 1, -1, MP_INT32, err); }

/* x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B */
int shape_QLinearConv(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *yz = mp_in(g, n, 7);
    return conv_rule(g, n, 0, 3, 8, yz ? yz->dtype : x ? x->dtype : MP_UNDEFINED, err);
}

/* X, W, offset, B, mask: the output grid is a plain conv's. */
int shape_DeformConv(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    return conv_rule(g, n, 0, 1, 3, x ? x->dtype : MP_UNDEFINED, err);
}

/* Y[N, W1 * group, out...] from X[N, C, D...] and W[C, M/group, k...]:
 * out = s * (D - 1) + output_padding + (k - 1) * d + 1 - pads, or D * s for
 * SAME, or the output_shape attribute when given. */
int shape_ConvTranspose(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *w = mp_in(g, n, 1);
    if (!x || !w) return mp_fail(err, "missing input %s", !x ? "X" : "W");
    int rank = -1; /* set by conv_rank; initialized for the optimizer's sake */
    if (conv_rank(x, w, &rank, err)) return -1;
    if (rank < 0) return nn_set_unknown(g, n, 0, x->dtype);
    int64_t group;
    if (read_group(n, &group, err)) return -1;
    int nsp = rank - 2;
    mp_dim dims[MP_MAX_RANK];
    dims[0] = x->rank >= 0 ? x->dims[0] : MP_DIM_UNKNOWN;
    dims[1] = w->rank >= 0 ? nn_dim_affine(w->dims[1], group, 0) : MP_DIM_UNKNOWN;
    if (x->rank >= 0 && w->rank >= 0 && nn_check_dim(g, x->dims[1], w->dims[0], "X's channel count (W dim 0)", err))
        return -1;
    if (check_bias(g, mp_in(g, n, 2), dims[1], err)) return -1;

    const int64_t *os;
    int nos = mp_attr_ints(n, "output_shape", &os);
    if (nos >= 0) {
        /* spatial sizes; some exporters include N and C in front */
        if (nos != nsp && nos != nsp + 2)
            return mp_fail(err, "output_shape has %d values, expected %d (one per spatial axis)", nos, nsp);
        for (int i = 0; i < nsp; i++) {
            int64_t v = os[nos - nsp + i];
            if (v < 0) return mp_fail(err, "output_shape[%d] is %lld", nos - nsp + i, (long long)v);
            dims[2 + i] = mp_dim_of(v);
        }
        return mp_set_out(g, n, 0, x->dtype, rank, dims);
    }
    window win;
    int64_t outpad[MP_MAX_RANK];
    if (read_window(n, nsp, w, &win, err) || nn_ints_attr(n, "output_padding", nsp, 0, outpad, err)) return -1;
    for (int i = 0; i < nsp; i++) {
        int64_t ek = dilated_kernel(&win, i), s = win.strides[i];
        mp_dim in = x->rank >= 0 ? x->dims[2 + i] : MP_DIM_UNKNOWN;
        if (win.kernel[i] <= 0 || ek < 0 || outpad[i] < 0 || outpad[i] > INT64_MAX / 4 || ek > INT64_MAX / 4) {
            if (ek < 0) return mp_fail(err, "dilated kernel size overflows on spatial axis %d", i);
            if (outpad[i] < 0) return mp_fail(err, "output_padding[%d] is negative", i);
            dims[2 + i] = MP_DIM_UNKNOWN;
            continue;
        }
        if (same_padding(&win)) {
            dims[2 + i] = nn_dim_affine(in, s, 0);
        } else {
            int64_t pads = win.pad_mode == PAD_VALID ? 0 : win.pads[i] + win.pads[i + nsp];
            /* s * (D - 1) + op + ek - pads  ==  s * D + (op + ek - pads - s) */
            dims[2 + i] = nn_dim_affine(in, s, outpad[i] + ek - pads - s);
        }
        if (mp_dim_known(in) && dims[2 + i].v <= 0)
            return mp_fail(err, "output size on spatial axis %d would be %lld (input %lld, stride %lld, kernel %lld)",
                           i, (long long)dims[2 + i].v, (long long)in.v, (long long)s, (long long)ek);
    }
    return mp_set_out(g, n, 0, x->dtype, rank, dims);
}

/* Y[N, C, out...] over X[N, C, D...] with the kernel_shape attribute; a
 * second output (MaxPool's Indices) has the same shape in int64. */
static int pool_rule(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank < 0) {
        nn_set_unknown(g, n, 1, MP_INT64);
        return nn_set_unknown(g, n, 0, x->dtype);
    }
    if (x->rank < 3) return mp_fail(err, "X has rank %d; pooling expects (N, C, D1, ...)", x->rank);
    mp_dim dims[MP_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    if (forward_spatial(n, x, NULL, x->rank, dims + 2, err)) return -1;
    mp_set_out(g, n, 1, MP_INT64, x->rank, dims);
    return mp_set_out(g, n, 0, x->dtype, x->rank, dims);
}

int shape_AveragePool(mp_graph *g, mp_node *n, mp_err *err) { return pool_rule(g, n, err); }
int shape_MaxPool(mp_graph *g, mp_node *n, mp_err *err) { return pool_rule(g, n, err); }
int shape_LpPool(mp_graph *g, mp_node *n, mp_err *err) { return pool_rule(g, n, err); }

/* Y[N, C, 1, ...]: one value per channel. */
int shape_GlobalPool(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank < 0) return nn_set_unknown(g, n, 0, x->dtype);
    if (x->rank < 2) return mp_fail(err, "X has rank %d; global pooling expects (N, C, ...)", x->rank);
    mp_dim dims[MP_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++) dims[i] = mp_dim_of(1);
    return mp_set_out(g, n, 0, x->dtype, x->rank, dims);
}

/* X, I, optional output_shape: the shape is that input when given, else the
 * inverse of the pool: (D - 1) * s + k - pads. */
int shape_MaxUnpool(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *shp = mp_in(g, n, 2);
    if (!x) return mp_fail(err, "missing input X");
    mp_dim dims[MP_MAX_RANK];
    if (shp) {
        int k = mp_const_dims(g, shp, dims, MP_MAX_RANK);
        if (k < 0) {
            bool len_known = shp->rank == 1 && shp->dims[0].v >= 0 && shp->dims[0].v <= MP_MAX_RANK;
            if (!len_known) return nn_set_unknown(g, n, 0, x->dtype);
            k = (int)shp->dims[0].v;
            for (int i = 0; i < k; i++) dims[i] = MP_DIM_UNKNOWN;
        }
        if (x->rank >= 0 && k != x->rank)
            return mp_fail(err, "output_shape has %d entries but X has rank %d", k, x->rank);
        for (int i = 0; i < k; i++)
            if (dims[i].v < -1) return mp_fail(err, "output_shape[%d] is negative", i);
        return mp_set_out(g, n, 0, x->dtype, k, dims);
    }
    if (x->rank < 0) return nn_set_unknown(g, n, 0, x->dtype);
    if (x->rank < 3) return mp_fail(err, "X has rank %d; MaxUnpool expects (N, C, D1, ...)", x->rank);
    window win;
    int nsp = x->rank - 2;
    if (read_window(n, nsp, NULL, &win, err)) return -1;
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < nsp; i++) {
        int64_t s = win.strides[i], pads = win.pads[i] + win.pads[i + nsp];
        if (win.kernel[i] > INT64_MAX / 4 || pads > INT64_MAX / 4) return mp_fail(err, "window arithmetic overflows");
        dims[2 + i] = nn_dim_affine(x->dims[2 + i], s, win.kernel[i] - pads - s);
        if (mp_dim_known(x->dims[2 + i]) && dims[2 + i].v < 0)
            return mp_fail(err, "output size on spatial axis %d would be negative", i);
    }
    return mp_set_out(g, n, 0, x->dtype, x->rank, dims);
}

int mp_max_unpool_irregular(const mp_graph *g, const mp_node *n, char *why, size_t len)
{
    const mp_value *x = mp_in((mp_graph *)g, n, 0), *y = mp_out((mp_graph *)g, n, 0);
    const mp_graph *root = mp_graph_root((mp_graph *)g);
    mp_err err = {{0}};
    window win;
    if (!x || !y || x->rank < 3 || y->rank != x->rank || read_window(n, x->rank - 2, NULL, &win, &err)) {
        snprintf(why, len, "shapes or a window that do not fit MaxUnpool%s%s", err.msg[0] ? ": " : "", err.msg);
        return 1;
    }
    int nsp = x->rank - 2;
    for (int i = 0; i < nsp; i++) {
        int64_t xd = mp_dim_resolve(root, x->dims[2 + i]).v, yd = mp_dim_resolve(root, y->dims[2 + i]).v;
        int64_t def = (xd - 1) * win.strides[i] + win.kernel[i] - win.pads[i] - win.pads[i + nsp];
        if (xd < 0 || yd != def) {
            snprintf(why, len, "an output_shape other than the default (%lld, not %lld, at spatial axis %d)",
                     (long long)yd, (long long)def, i);
            return 1;
        }
        if (win.kernel[i] > win.strides[i]) {
            snprintf(why, len, "overlapping windows (kernel %lld over stride %lld at spatial axis %d)",
                     (long long)win.kernel[i], (long long)win.strides[i], i);
            return 1;
        }
    }
    return 0;
}

/* Y[num_rois, C, h, w] from X[N, C, H, W] and rois[num_rois, k]. */
static int roi_rule(mp_graph *g, mp_node *n, int64_t h, int64_t w, int roi_cols, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *rois = mp_in(g, n, 1);
    if (!x || !rois) return mp_fail(err, "missing input %s", !x ? "X" : "rois");
    if (h <= 0 || w <= 0) return mp_fail(err, "pooled size %lldx%lld must be positive", (long long)h, (long long)w);
    if (nn_check_rank(x, 4, "X", err) || nn_check_rank(rois, 2, "rois", err)) return -1;
    if (rois->rank == 2 && nn_check_dim(g, rois->dims[1], mp_dim_of(roi_cols), "rois' second dim", err)) return -1;
    const mp_value *bi = mp_in(g, n, 2);
    if (bi && rois->rank == 2 && bi->rank == 1 &&
        nn_check_dim(g, bi->dims[0], rois->dims[0], "batch_indices length", err))
        return -1;
    mp_dim dims[4] = {rois->rank == 2 ? rois->dims[0] : MP_DIM_UNKNOWN, x->rank == 4 ? x->dims[1] : MP_DIM_UNKNOWN,
                      mp_dim_of(h), mp_dim_of(w)};
    return mp_set_out(g, n, 0, x->dtype, 4, dims);
}

int shape_MaxRoiPool(mp_graph *g, mp_node *n, mp_err *err)
{
    int64_t ps[2];
    if (!mp_node_attr(n, "pooled_shape")) return mp_fail(err, "attribute 'pooled_shape' is required");
    if (nn_ints_attr(n, "pooled_shape", 2, 0, ps, err)) return -1;
    return roi_rule(g, n, ps[0], ps[1], 5, err);
}

int shape_RoiAlign(mp_graph *g, mp_node *n, mp_err *err)
{
    return roi_rule(g, n, mp_attr_int(n, "output_height", 1), mp_attr_int(n, "output_width", 1), 4, err);
}
