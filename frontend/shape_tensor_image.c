/* shape_tensor_image.c - shape rules of the data-movement ops, part 4: image
 * resampling (Resize, Upsample, Col2Im) and the signal ops (the windows,
 * MelWeightMatrix, DFT, STFT). Their values are never folded. */
#include <math.h>
#include <string.h>

#include "shape_tensor.h"

/* floor(dim * scale) as a dim; a scale of 1 keeps a symbolic dim. */
static int scaled_dim(mp_dim d, double scale, mp_dim *out, mp_err *err)
{
    if (!(scale > 0) || !isfinite(scale)) return mp_fail(err, "scale %g must be positive", scale);
    if (scale == 1 || d.v < 0) {
        *out = scale == 1 ? d : MP_DIM_UNKNOWN;
        return 0;
    }
    double v = floor((double)d.v * scale);
    if (!(v < 9.2e18)) return mp_fail(err, "scaled dim %g overflows", v);
    *out = mp_dim_of((int64_t)v);
    return 0;
}

/* Output dims of X resized on `axes` by known scales (sizes == NULL) or
 * sizes, with opset 18's keep_aspect_ratio_policy for sizes. */
static int resize_dims(const mp_value *x, const int64_t *axes, int na, const double *scales, const mp_dim *sizes,
                       const char *policy, mp_dim *d, mp_err *err)
{
    if (!sizes) {
        for (int i = 0; i < na; i++)
            if (scaled_dim(x->dims[axes[i]], scales[i], &d[axes[i]], err)) return -1;
        return 0;
    }
    bool stretch = !strcmp(policy, "stretch"), larger = !strcmp(policy, "not_smaller");
    if (!stretch && !larger && strcmp(policy, "not_larger"))
        return mp_fail(err, "unknown keep_aspect_ratio_policy '%s'", policy);
    double scale = larger ? 0 : INFINITY;
    for (int i = 0; i < na; i++) {
        mp_dim in = x->dims[axes[i]];
        if (sizes[i].sym < 0 && sizes[i].v < 0 && sizes[i].v != -1)
            return mp_fail(err, "sizes entry %d is %lld", i, (long long)sizes[i].v);
        d[axes[i]] = sizes[i];
        if (stretch) continue;
        if (in.v <= 0 || sizes[i].v < 0) { /* one scale for all axes: needs every size */
            for (int k = 0; k < na; k++) d[axes[k]] = MP_DIM_UNKNOWN;
            return 0;
        }
        double s = (double)sizes[i].v / (double)in.v;
        scale = larger ? fmax(scale, s) : fmin(scale, s);
    }
    for (int i = 0; i < na && !stretch; i++)
        d[axes[i]] = mp_dim_of((int64_t)floor(scale * (double)x->dims[axes[i]].v + 0.5));
    return 0;
}

/* Input i when given and not empty (opsets 11-13 pass "" or an empty tensor). */
static mp_value *nonempty_in(mp_graph *g, const mp_node *n, int i)
{
    mp_value *v = mp_in(g, n, i);
    if (v && v->rank == 1 && v->dims[0].v == 0) return NULL;
    return v;
}

int shape_Resize(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'X'");
    const char *mode = mp_attr_str(n, "mode", "nearest");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return mp_fail(err, "unknown mode '%s'", mode);
    /* Resize-10 has (X, scales); Resize-11 and later (X, roi, scales, sizes) */
    mp_value *sc = n->nin == 2 ? nonempty_in(g, n, 1) : nonempty_in(g, n, 2),
             *sz = n->nin == 2 ? NULL : nonempty_in(g, n, 3);
    if (sc && sz) return mp_fail(err, "gives both scales and sizes; only one is allowed");
    if (!sc && !sz) return mp_fail(err, "needs scales or sizes");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank;
    int64_t axes[MP_MAX_RANK];
    const int64_t *aa;
    int na = mp_attr_ints(n, "axes", &aa);
    if (na > r) return mp_fail(err, "'axes' has %d entries for rank %d", na, r);
    bool seen[MP_MAX_RANK] = {false};
    for (int i = 0; i < (na >= 0 ? na : r); i++) {
        if (na < 0) {
            axes[i] = i;
            continue;
        }
        if (mp_norm_axis(aa[i], r, false, &axes[i], err)) return -1;
        if (seen[axes[i]]) return mp_fail(err, "axis %lld is listed twice", (long long)aa[i]);
        seen[axes[i]] = true;
    }
    if (na < 0) na = r;
    mp_dim d[MP_MAX_RANK], sizes[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)r * sizeof *d);
    double scales[MP_MAX_RANK];
    int k, len = -1;
    if (sc) {
        k = mp_const_reals(sc, scales, MP_MAX_RANK);
        if (sc->rank == 1) len = (int)sc->dims[0].v;
    } else if (mp_shape_arg(g, sz, sizes, &k, &len, err)) {
        return -1;
    }
    if (k >= 0) len = k;
    if (len >= 0 && len != na) return mp_fail(err, "%s has %d entries for %d axes", sc ? "scales" : "sizes", len, na);
    if (k < 0) {
        for (int i = 0; i < na; i++) d[axes[i]] = MP_DIM_UNKNOWN;
    } else if (resize_dims(x, axes, na, scales, sc ? NULL : sizes,
                           mp_attr_str(n, "keep_aspect_ratio_policy", "stretch"), d, err)) {
        return -1;
    }
    return mp_set_out(g, n, 0, x->dtype, r, d);
}

int shape_Upsample(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'X'");
    const char *mode = mp_attr_str(n, "mode", "nearest");
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear"))
        return mp_fail(err, "unknown mode '%s'", mode);
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    /* Upsample-7 takes the scales attribute, Upsample-9 the scales input */
    double scales[MP_MAX_RANK];
    const mp_attr *sa = mp_node_attr(n, "scales");
    int k = -1;
    if (sa && sa->type == MP_ATTR_FLOATS) {
        if (sa->n > MP_MAX_RANK) return mp_fail(err, "scales has %d entries (limit %d)", sa->n, MP_MAX_RANK);
        for (k = 0; k < sa->n; k++) scales[k] = sa->floats[k];
    } else if (mp_in(g, n, 1)) {
        k = mp_const_reals(mp_in(g, n, 1), scales, MP_MAX_RANK);
    } else {
        return mp_fail(err, "missing scales");
    }
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = MP_DIM_UNKNOWN;
    if (k >= 0 && k != x->rank) return mp_fail(err, "scales has %d entries for rank %d", k, x->rank);
    for (int i = 0; i < k; i++)
        if (scaled_dim(x->dims[i], scales[i], &d[i], err)) return -1;
    return mp_set_out(g, n, 0, x->dtype, x->rank, d);
}

/* Reads a spatial attribute list (Col2Im dilations, pads, strides) with a default. */
static int spatial_attr(const mp_node *n, const char *name, int count, int64_t dflt, int64_t *out, mp_err *err)
{
    const int64_t *a;
    int na = mp_attr_ints(n, name, &a);
    for (int i = 0; i < count; i++) out[i] = na < 0 ? dflt : i < na ? a[i] : 0;
    if (na >= 0 && na != count) return mp_fail(err, "'%s' has %d entries, expected %d", name, na, count);
    return 0;
}

int shape_Col2Im(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x || !mp_in(g, n, 1) || !mp_in(g, n, 2))
        return mp_fail(err, "needs inputs 'input', 'image_shape' and 'block_shape'");
    if (x->rank >= 0 && x->rank != 3)
        return mp_fail(err, "input must be [N, C*prod(block_shape), L], not rank %d", x->rank);
    int64_t img[MP_MAX_RANK], blk[MP_MAX_RANK];
    int ni, nb;
    int si = mp_arg_ints(g, n, NULL, 1, img, MP_MAX_RANK - 2, &ni, err);
    int sb = si < 0 ? -1 : mp_arg_ints(g, n, NULL, 2, blk, MP_MAX_RANK - 2, &nb, err);
    if (sb < 0) return -1;
    if (si != MP_ARG_KNOWN) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    mp_dim d[MP_MAX_RANK];
    d[0] = x->rank >= 0 ? x->dims[0] : MP_DIM_UNKNOWN;
    d[1] = MP_DIM_UNKNOWN;
    for (int i = 0; i < ni; i++) d[2 + i] = mp_dim_of(img[i]);
    if (sb == MP_ARG_KNOWN && x->rank >= 0) {
        if (nb != ni) return mp_fail(err, "image_shape has %d entries but block_shape %d", ni, nb);
        int64_t dil[MP_MAX_RANK], pads[2 * MP_MAX_RANK], str[MP_MAX_RANK], p = 1, blocks = 1;
        if (spatial_attr(n, "dilations", ni, 1, dil, err) || spatial_attr(n, "pads", 2 * ni, 0, pads, err) ||
            spatial_attr(n, "strides", ni, 1, str, err))
            return -1;
        for (int i = 0; i < ni; i++) {
            if (blk[i] <= 0 || str[i] <= 0 || dil[i] <= 0 || img[i] < 0)
                return mp_fail(err, "image_shape, block_shape, strides and dilations must be positive");
            if (!mp_mul_ok(p, blk[i], &p)) return mp_fail(err, "block_shape overflows");
            /* blocks along this axis, as a convolution of the padded image would slide */
            int64_t span = img[i] + pads[i] + pads[i + ni] - dil[i] * (blk[i] - 1) - 1;
            if (span < 0) return mp_fail(err, "block %lld does not fit the padded image axis %d", (long long)blk[i], i);
            blocks *= span / str[i] + 1;
        }
        int64_t c = x->dims[1].v;
        if (c >= 0 && c % p)
            return mp_fail(err, "channel dim %lld is not a multiple of prod(block_shape) %lld", (long long)c,
                           (long long)p);
        if (c >= 0) d[1] = mp_dim_of(c / p);
        if (x->dims[2].v >= 0 && x->dims[2].v != blocks)
            return mp_fail(err, "input has %lld blocks but the image holds %lld", (long long)x->dims[2].v,
                           (long long)blocks);
    }
    return mp_set_out(g, n, 0, x->dtype, 2 + ni, d);
}

/* ---- signal ops ------------------------------------------------------------- */

/* Reads a scalar length input as a dim (known, symbolic, or unknown). */
static mp_dim scalar_dim(mp_graph *g, const mp_node *n, int i)
{
    mp_value *v = mp_in(g, n, i);
    mp_dim d = MP_DIM_UNKNOWN;
    if (v && (v->rank == 0 || v->rank == 1)) mp_const_dims(g, v, &d, 1);
    return d;
}

static int window_rule(mp_graph *g, mp_node *n, mp_err *err)
{
    if (!mp_in(g, n, 0)) return mp_fail(err, "missing input 'size'");
    mp_dtype t;
    if (mp_attr_dtype(n, "output_datatype", MP_FLOAT, &t, err)) return -1;
    mp_dim d = scalar_dim(g, n, 0);
    if (d.sym < 0 && d.v < -1) return mp_fail(err, "size is %lld", (long long)d.v);
    return mp_set_out(g, n, 0, t, 1, &d);
}

int shape_BlackmanWindow(mp_graph *g, mp_node *n, mp_err *err) { return window_rule(g, n, err); }
int shape_HammingWindow(mp_graph *g, mp_node *n, mp_err *err) { return window_rule(g, n, err); }
int shape_HannWindow(mp_graph *g, mp_node *n, mp_err *err) { return window_rule(g, n, err); }

int shape_MelWeightMatrix(mp_graph *g, mp_node *n, mp_err *err)
{
    for (int i = 0; i < 5; i++)
        if (!mp_in(g, n, i))
            return mp_fail(err,
                           "needs inputs num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz");
    mp_dtype t;
    if (mp_attr_dtype(n, "output_datatype", MP_FLOAT, &t, err)) return -1;
    mp_dim d[2] = {scalar_dim(g, n, 1), scalar_dim(g, n, 0)};
    if (d[0].v >= 0)
        d[0] = mp_dim_of(d[0].v / 2 + 1); /* the one-sided DFT bins */
    else
        d[0] = MP_DIM_UNKNOWN;
    return mp_set_out(g, n, 0, t, 2, d);
}

int shape_DFT(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'input'");
    bool inverse = mp_attr_int(n, "inverse", 0) != 0, onesided = mp_attr_int(n, "onesided", 0) != 0;
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank;
    if (r < 2) return mp_fail(err, "input must have rank >= 2, not %d", r);
    if (x->dims[r - 1].v >= 0 && x->dims[r - 1].v != 1 && x->dims[r - 1].v != 2)
        return mp_fail(err, "the last dim must be 1 (real) or 2 (complex), not %lld", (long long)x->dims[r - 1].v);
    /* DFT-17 takes axis as an attribute (default 1), DFT-20 as input 2 (default -2) */
    int64_t opset = mp_graph_opset(g, ""), axis = opset && opset < 20 ? 1 : -2;
    mp_value *av = mp_in(g, n, 2);
    mp_dim d[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)r * sizeof *d);
    if (mp_node_attr(n, "axis")) {
        axis = mp_attr_int(n, "axis", axis);
    } else if (av && !mp_input_int(g, n, 2, &axis)) { /* axis unknown: which dim changes is unknown */
        for (int i = 0; i < r; i++) d[i] = MP_DIM_UNKNOWN;
        d[0] = x->dims[0];
        d[r - 1] = mp_dim_of(inverse && onesided ? 1 : 2);
        return mp_set_out(g, n, 0, x->dtype, r, d);
    }
    if (mp_norm_axis(axis, r, false, &axis, err)) return -1;
    if (axis == 0 || axis == r - 1)
        return mp_fail(err, "axis %lld must be a signal axis, not the batch or last", (long long)axis);
    /* length of the transform; an inverse one-sided one restores 2 * (n - 1) */
    mp_dim len = mp_in(g, n, 1) ? scalar_dim(g, n, 1) : x->dims[axis];
    if (!mp_in(g, n, 1) && inverse && onesided) len = len.v >= 1 ? mp_dim_of(2 * (len.v - 1)) : MP_DIM_UNKNOWN;
    if (len.sym < 0 && len.v == 0) return mp_fail(err, "dft_length must be positive");
    if (onesided && !inverse) len = len.v >= 0 ? mp_dim_of(len.v / 2 + 1) : MP_DIM_UNKNOWN;
    d[axis] = len;
    d[r - 1] = mp_dim_of(inverse && onesided ? 1 : 2);
    return mp_set_out(g, n, 0, x->dtype, r, d);
}

int shape_STFT(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *win = mp_in(g, n, 2);
    if (!x || !mp_in(g, n, 1)) return mp_fail(err, "needs inputs 'signal' and 'frame_step'");
    if (x->rank >= 0 && x->rank != 3)
        return mp_fail(err, "signal must be [batch, length, 1 or 2], not rank %d", x->rank);
    bool onesided = mp_attr_int(n, "onesided", 1) != 0;
    /* the frame length is input 3, else the window's length */
    mp_dim fl = mp_in(g, n, 3) ? scalar_dim(g, n, 3) : win && win->rank == 1 ? win->dims[0] : MP_DIM_UNKNOWN;
    if (!mp_in(g, n, 3) && !win) return mp_fail(err, "needs a window or a frame_length");
    if (mp_in(g, n, 3) && win && win->rank == 1 && fl.v >= 0 && win->dims[0].v >= 0 && fl.v != win->dims[0].v)
        return mp_fail(err, "frame_length %lld differs from the window length %lld", (long long)fl.v,
                       (long long)win->dims[0].v);
    mp_dim step = scalar_dim(g, n, 1), frames = MP_DIM_UNKNOWN, bins = MP_DIM_UNKNOWN;
    mp_dim len = x->rank == 3 ? x->dims[1] : MP_DIM_UNKNOWN;
    if (step.sym < 0 && step.v == 0) return mp_fail(err, "frame_step must be positive");
    if (fl.v > 0 && step.v > 0 && len.v >= 0) {
        if (len.v < fl.v)
            return mp_fail(err, "signal of length %lld is shorter than a frame of %lld", (long long)len.v,
                           (long long)fl.v);
        frames = mp_dim_of((len.v - fl.v) / step.v + 1);
    }
    if (fl.v >= 0) bins = mp_dim_of(onesided ? fl.v / 2 + 1 : fl.v);
    mp_dim d[4] = {x->rank == 3 ? x->dims[0] : MP_DIM_UNKNOWN, frames, bins, mp_dim_of(2)};
    return mp_set_out(g, n, 0, x->dtype, 4, d);
}
