/* grad_tensor.c - gradient rules of the ops that move data: reshapes,
 * transposes, concatenation, splitting, slicing, gathering, expanding and
 * nearest-neighbour resizing, padding.
 * None reads forward data except Gather (its indices), Slice (its bounds)
 * and Pad (its pads and axes). */
#include <stdint.h>
#include <string.h>

#include "frontend/shape.h"
#include "passes/autodiff.h"

#define NODE (&ad->g->nodes[node])
#define IN(k) (k < NODE->nin ? NODE->in[k] : -1)
#define OUT(k) (k < NODE->nout ? NODE->out[k] : -1)

/* Reshape, Flatten, Squeeze, Unsqueeze: a Reshape of dY back to X's shape. */
static int reshape_back(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int64_t dims[MP_MAX_RANK];
    int rank;
    int32_t x = IN(0);
    if (ad_known_dims(ad, x, dims, &rank)) return -1;
    int32_t in[2] = {dy[0], ad_const_ints(ad, dims, rank)};
    if (in[1] < 0) return -1;
    return ad_give(ad, x, ad_emit(ad, "Reshape", "", 2, in, "grad_reshape"), true);
}

int mp_grad_Reshape(mp_ad *ad, int32_t node, const int32_t *dy) { return reshape_back(ad, node, dy); }
int mp_grad_Flatten(mp_ad *ad, int32_t node, const int32_t *dy) { return reshape_back(ad, node, dy); }
int mp_grad_Squeeze(mp_ad *ad, int32_t node, const int32_t *dy) { return reshape_back(ad, node, dy); }
int mp_grad_Unsqueeze(mp_ad *ad, int32_t node, const int32_t *dy) { return reshape_back(ad, node, dy); }

/* Transpose: the inverse permutation. */
int mp_grad_Transpose(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int rank = ad->g->values[IN(0)].rank;
    if (rank < 0 || rank > MP_MAX_RANK) return mp_fail(ad->err, "input rank unknown");
    int64_t perm[MP_MAX_RANK], inv[MP_MAX_RANK];
    const int64_t *p;
    int np = mp_attr_ints(NODE, "perm", &p);
    for (int i = 0; i < rank; i++) perm[i] = np == rank ? p[i] : rank - 1 - i;
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank) return mp_fail(ad->err, "bad perm");
        inv[perm[i]] = i;
    }
    int32_t out;
    int32_t n = ad_add1(ad, "Transpose", "", 1, &dy[0], "grad_transpose", &out);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "perm", inv, rank);
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* Concat: a Split of dY into the inputs' extents along the axis. */
int mp_grad_Concat(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    int nin = NODE->nin;
    if (nin > MP_MAX_RANK) return mp_fail(ad->err, "more than %d inputs", MP_MAX_RANK);
    int64_t axis;
    mp_err e;
    if (mp_norm_axis(mp_attr_int(NODE, "axis", 0), g->values[dy[0]].rank, false, &axis, &e))
        return mp_fail(ad->err, "%s", e.msg);
    int64_t sizes[MP_MAX_RANK];
    int32_t outs[MP_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        int64_t dims[MP_MAX_RANK];
        int rank;
        if (ad_known_dims(ad, IN(k), dims, &rank)) return -1;
        sizes[k] = dims[axis];
        outs[k] = ad_value(ad, "grad_concat", "", MP_ROLE_TRANSIENT);
    }
    int32_t in[2] = {dy[0], ad_const_ints(ad, sizes, nin)};
    if (in[1] < 0) return -1;
    int32_t n = ad_add(ad, "Split", "", 2, in, nin, outs);
    ad_attr_int(g, &g->nodes[n], "axis", axis);
    if (ad_infer(ad, n)) return -1;
    for (int k = 0; k < nin; k++)
        if (ad_give(ad, IN(k), outs[k], true)) return -1;
    return 0;
}

/* Split: a Concat of the outputs' gradients (zeros for outputs none reached). */
int mp_grad_Split(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    int nout = NODE->nout;
    int32_t parts[64];
    if (nout > 64) return mp_fail(ad->err, "more than 64 outputs");
    for (int k = 0; k < nout; k++) {
        parts[k] = dy[k];
        if (parts[k] >= 0) continue;
        int64_t dims[MP_MAX_RANK];
        int rank;
        if (ad_known_dims(ad, OUT(k), dims, &rank)) return -1;
        int32_t n = ad_add1(ad, "Zeros", "memplan", 0, NULL, "grad_zeros", &parts[k]);
        ad_attr_ints(g, &g->nodes[n], "shape", dims, rank);
        ad_attr_int(g, &g->nodes[n], "dtype", g->values[OUT(k)].dtype);
        if (ad_infer(ad, n)) return -1;
    }
    int32_t out;
    int32_t n = ad_add1(ad, "Concat", "", nout, parts, "grad_split", &out);
    ad_attr_int(g, &g->nodes[n], "axis", mp_attr_int(NODE, "axis", 0));
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* A memplan op of (dY, extra inputs...) whose output has X's shape (attribute `shape`). */
static int scatter_back(mp_ad *ad, int32_t node, const char *op, int nin, const int32_t *in)
{
    int64_t dims[MP_MAX_RANK];
    int rank;
    if (ad_known_dims(ad, IN(0), dims, &rank)) return -1;
    int32_t out;
    int32_t n = ad_add1(ad, op, "memplan", nin, in, "grad_x", &out);
    ad_attr_copy(ad->g, &ad->g->nodes[n], node);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", dims, rank);
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* Slice: reads its bounds (starts, ends, axes, steps): dY is placed into zeros. */
int mp_grad_Slice(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[5] = {dy[0], IN(1), IN(2), IN(3), IN(4)};
    int nin = NODE->nin;
    return scatter_back(ad, node, "SliceGrad", nin < 1 ? 1 : nin > 5 ? 5 : nin, in);
}

/* Pad, every mode and opset: reads pads (input 1, or the attributes of opsets
 * before 11) and axes; dX sums dY at the input positions each output came from
 * (PadGrad). The constant fill's own gradient is not supported. */
int mp_grad_Pad(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(2))) return mp_fail(ad->err, "the gradient of constant_value is not supported");
    int32_t in[3] = {dy[0], IN(1), IN(3)};
    return scatter_back(ad, node, "PadGrad", in[2] >= 0 ? 3 : in[1] >= 0 ? 2 : 1, in);
}

/* Gather: reads the indices; dY rows are added into a zero table. */
int mp_grad_Gather(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(1)};
    return scatter_back(ad, node, "GatherGrad", 2, in);
}

/* Expand: dY summed back to X's shape. */
int mp_grad_Expand(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give_sum(ad, IN(0), dy[0], false); }

/* ResizeGrad(dY, roi, scales, sizes) (in, absent ones -1), dX of X's shape:
 * the adjoint of the forward kernel, each dY cell scattered back onto the
 * input cells it blended with the same weights. Attributes: the forward's
 * (copy), then `mode` when given, and asymmetric coordinates with floor
 * rounding written out where the forward's defaults were those (opset 10's
 * Resize, Upsample). */
static int resize_grad(mp_ad *ad, int32_t node, int32_t *in, bool copy, const char *mode, bool asymmetric)
{
    int64_t dims[MP_MAX_RANK];
    int rank, nin = 4;
    if (ad_known_dims(ad, IN(0), dims, &rank)) return -1;
    while (nin > 1 && in[nin - 1] < 0) nin--;
    int32_t out, n = ad_add1(ad, "ResizeGrad", "memplan", nin, in, "grad_x", &out);
    mp_node *m = &ad->g->nodes[n];
    if (copy) ad_attr_copy(ad->g, m, node);
    if (mode) ad_attr_str(ad->g, m, "mode", mode);
    if (asymmetric) {
        ad_attr_str(ad->g, m, "coordinate_transformation_mode", "asymmetric");
        ad_attr_str(ad->g, m, "nearest_mode", "floor");
    }
    ad_attr_ints(ad->g, m, "shape", dims, rank);
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* Resize, the general case (every mode, coordinate transformation, axes,
 * antialias): ResizeGrad in opset 11's input positions. Reads roi, scales
 * and sizes (constants). */
static int resize_grad_general(mp_ad *ad, int32_t node, int32_t dy, bool old)
{
    int32_t in[4] = {dy, old ? -1 : IN(1), old ? IN(1) : IN(2), old ? -1 : IN(3)};
    return resize_grad(ad, node, in, true, NULL, old);
}

/* Upsample (opset 9, scales as input 1; opset 7's `scales` attribute is not
 * supported): nearest or (bi)linear with Resize's asymmetric coordinates and
 * floor rounding. Reads the scales. */
int mp_grad_Upsample(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (IN(1) < 0) return mp_fail(ad->err, "the gradient of opset 7's Upsample (scales as an attribute) is not supported");
    int32_t in[4] = {dy[0], -1, IN(1), -1};
    return resize_grad(ad, node, in, false, strcmp(mp_attr_str(NODE, "mode", "nearest"), "nearest") ? "linear" : "nearest",
                       true);
}

/* Resize. Nearest mode where every output cell of axis i copies input cell
 * floor(o / s_i) for an integer factor s_i = out_i / in_i (the upsampling of
 * FPN / U-Net exports: asymmetric coordinates with floor rounding, half_pixel
 * or pytorch_half_pixel with either round mode, or s_i = 1) sums each s_i
 * block of dY: Reshape to [.., in_i, s_i, ..], SumToShape over the s_i axes,
 * Reshape to X's shape; it reads nothing and runs as plain reductions.
 * Every other case goes through ResizeGrad. */
int mp_grad_Resize(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    bool old = mp_graph_opset(g, "") > 0 && mp_graph_opset(g, "") < 11;
    const char *mode = mp_attr_str(NODE, "mode", "nearest");
    const char *coord = mp_attr_str(NODE, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel");
    const char *round = mp_attr_str(NODE, "nearest_mode", old ? "floor" : "round_prefer_floor");
    bool floor_ok = !strcmp(coord, "asymmetric") && !strcmp(round, "floor");
    bool half_ok = (!strcmp(coord, "half_pixel") || !strcmp(coord, "pytorch_half_pixel")) &&
                   (!strcmp(round, "round_prefer_floor") || !strcmp(round, "round_prefer_ceil"));
    int64_t xd[MP_MAX_RANK], yd[MP_MAX_RANK], split[MP_MAX_RANK], sum[MP_MAX_RANK], scales[MP_MAX_RANK];
    int xr, yr, r = 0;
    if (ad_known_dims(ad, IN(0), xd, &xr) || ad_known_dims(ad, OUT(0), yd, &yr)) return -1;
    if (strcmp(mode, "nearest") || xr != yr || xr > MP_MAX_RANK / 2) return resize_grad_general(ad, node, dy[0], old);
    /* given scales (for every axis, or those of the `axes` attribute): the
     * coordinates use them, so each must be the integer factor itself */
    int32_t sc = old ? IN(1) : IN(2);
    const mp_tensor *st = sc >= 0 ? g->values[sc].konst : NULL;
    const int64_t *axes;
    int na = mp_attr_ints(NODE, "axes", &axes), ns = st ? (int)st->numel : 0;
    for (int i = 0; i < xr; i++) scales[i] = 0; /* 0: not given */
    if (ns > 0 && ns != (na >= 0 ? na : xr)) return resize_grad_general(ad, node, dy[0], old);
    for (int i = 0; i < ns; i++) {
        int64_t a = na >= 0 ? (axes[i] < 0 ? axes[i] + xr : axes[i]) : i;
        double v = mp_tensor_get_f64(st, i);
        if (a < 0 || a >= xr) return resize_grad_general(ad, node, dy[0], old);
        scales[a] = v >= 1 && v <= 1e9 && (double)(int64_t)v == v ? (int64_t)v : -1;
    }
    for (int i = 0; i < xr; i++) {
        int64_t f = xd[i] > 0 && yd[i] % xd[i] == 0 ? yd[i] / xd[i] : 0;
        if (f < 1 || (scales[i] && scales[i] != f) || (f > 1 && !floor_ok && !half_ok))
            return resize_grad_general(ad, node, dy[0], old);
        split[r] = sum[r] = xd[i], r++;
        if (f > 1) split[r] = f, sum[r] = 1, r++;
    }
    int32_t in[2] = {dy[0], ad_const_ints(ad, split, r)}, blocks, total;
    if (in[1] < 0 || (blocks = ad_emit(ad, "Reshape", "", 2, in, "grad_resize")) < 0) return -1;
    int32_t n = ad_add1(ad, "SumToShape", "memplan", 1, &blocks, "grad_resize", &total);
    ad_attr_ints(g, &g->nodes[n], "shape", sum, r);
    if (ad_infer(ad, n)) return -1;
    int32_t back[2] = {total, ad_const_ints(ad, xd, xr)};
    if (back[1] < 0) return -1;
    return ad_give(ad, IN(0), ad_emit(ad, "Reshape", "", 2, back, "grad_resize"), true);
}

/* ---- permutations and repetitions ---- */

/* dY reshaped to split[r], transposed by perm, reshaped to X's dims: the
 * inverse of a Reshape-Transpose-Reshape forward (DepthToSpace, SpaceToDepth). */
static int permute_back(mp_ad *ad, int32_t node, int32_t dy, const int64_t *split, int r, const int64_t *perm)
{
    int64_t xd[MP_MAX_RANK];
    int xr;
    if (ad_known_dims(ad, IN(0), xd, &xr)) return -1;
    int32_t in[2] = {dy, ad_const_ints(ad, split, r)}, t, out;
    if (in[1] < 0 || (in[0] = ad_emit(ad, "Reshape", "", 2, in, "grad_perm")) < 0) return -1;
    int32_t n = ad_add1(ad, "Transpose", "", 1, in, "grad_perm", &t);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "perm", perm, r);
    if (ad_infer(ad, n)) return -1;
    int32_t back[2] = {t, ad_const_ints(ad, xd, xr)};
    if (back[1] < 0 || (out = ad_emit(ad, "Reshape", "", 2, back, "grad_perm")) < 0) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth move elements without changing
 * them: dY goes back through the inverse permutation. Read nothing. */
static int space_depth(mp_ad *ad, int32_t node, int32_t dy, bool to_space)
{
    int64_t xd[MP_MAX_RANK], b = mp_attr_int(NODE, "blocksize", 0);
    int xr;
    if (ad_known_dims(ad, IN(0), xd, &xr)) return -1;
    if (xr != 4 || b < 1) return mp_fail(ad->err, "needs X [N, C, H, W] and a blocksize");
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3];
    if (to_space) {
        bool crd = !strcmp(mp_attr_str(NODE, "mode", "DCR"), "CRD");
        int64_t split[6] = {N, C / (b * b), H, b, W, b};
        static const int64_t dcr[6] = {0, 3, 5, 1, 2, 4}, crd_perm[6] = {0, 1, 3, 5, 2, 4};
        return permute_back(ad, node, dy, split, 6, crd ? crd_perm : dcr);
    }
    int64_t split[6] = {N, b, b, C, H / b, W / b};
    static const int64_t perm[6] = {0, 3, 4, 1, 5, 2};
    return permute_back(ad, node, dy, split, 6, perm);
}

int mp_grad_DepthToSpace(mp_ad *ad, int32_t node, const int32_t *dy) { return space_depth(ad, node, dy[0], true); }
int mp_grad_SpaceToDepth(mp_ad *ad, int32_t node, const int32_t *dy) { return space_depth(ad, node, dy[0], false); }

/* Tile: each input cell gets the sum of its copies: dY reshaped to
 * [r_0, d_0, r_1, d_1, ..] (output index t d + j), SumToShape over the r_i,
 * Reshape to X. Reads the repeats (a constant). */
int mp_grad_Tile(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int64_t xd[MP_MAX_RANK], split[MP_MAX_RANK], sum[MP_MAX_RANK];
    int xr, r = 0;
    if (ad_known_dims(ad, IN(0), xd, &xr)) return -1;
    const mp_tensor *rep = IN(1) >= 0 ? ad->g->values[IN(1)].konst : NULL;
    if (!rep || rep->numel != xr) return mp_fail(ad->err, "the gradient needs constant repeats, one per axis");
    for (int i = 0; i < xr; i++) {
        int64_t t = mp_tensor_get_i64(rep, i);
        if (t > 1) {
            if (r == MP_MAX_RANK) return mp_fail(ad->err, "rank too large for the gradient");
            split[r] = t, sum[r++] = 1;
        }
        if (r == MP_MAX_RANK) return mp_fail(ad->err, "rank too large for the gradient");
        split[r] = sum[r] = xd[i], r++;
    }
    int32_t in[2] = {dy[0], ad_const_ints(ad, split, r)}, blocks, total;
    if (in[1] < 0 || (blocks = ad_emit(ad, "Reshape", "", 2, in, "grad_tile")) < 0) return -1;
    int32_t n = ad_add1(ad, "SumToShape", "memplan", 1, &blocks, "grad_tile", &total);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", sum, r);
    if (ad_infer(ad, n)) return -1;
    int32_t back[2] = {total, ad_const_ints(ad, xd, xr)};
    if (back[1] < 0) return -1;
    return ad_give(ad, IN(0), ad_emit(ad, "Reshape", "", 2, back, "grad_tile"), true);
}

/* Zeros of v's shape and dtype t. */
static int32_t zeros_like(mp_ad *ad, int32_t v, mp_dtype t)
{
    int64_t d[MP_MAX_RANK];
    int r;
    if (ad_known_dims(ad, v, d, &r)) return -1;
    int32_t z, n = ad_add1(ad, "Zeros", "memplan", 0, NULL, "grad_zeros", &z);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", d, r);
    ad_attr_int(ad->g, &ad->g->nodes[n], "dtype", t);
    return ad_infer(ad, n) ? -1 : z;
}

/* `op` (ScatterElements or ScatterND) of updates into data at indices; reduction "add" or NULL (none). */
static int32_t scatter(mp_ad *ad, const char *op, int32_t data, int32_t indices, int32_t updates, int64_t axis,
                       const char *reduction)
{
    int32_t in[3] = {data, indices, updates}, out;
    if (data < 0 || updates < 0) return -1;
    int32_t n = ad_add1(ad, op, "", 3, in, "grad_scatter", &out);
    if (axis >= -MP_MAX_RANK) ad_attr_int(ad->g, &ad->g->nodes[n], "axis", axis);
    if (reduction) ad_attr_str(ad->g, &ad->g->nodes[n], "reduction", reduction);
    return ad_infer(ad, n) ? -1 : out;
}

/* GatherElements: dData = ScatterElements(zeros, indices, dY){axis, reduction add}. Reads the indices. */
int mp_grad_GatherElements(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t z = zeros_like(ad, IN(0), ad->g->values[dy[0]].dtype);
    return ad_give(ad, IN(0), scatter(ad, "ScatterElements", z, IN(1), dy[0], mp_attr_int(NODE, "axis", 0), "add"), true);
}

/* TopK: the values' gradient goes back to where they were taken from
 * (ScatterElements add of dValues at Indices). Reads Indices. */
int mp_grad_TopK(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (dy[0] < 0) return 0; /* only the indices were used */
    if (OUT(1) < 0) return mp_fail(ad->err, "needs its Indices output for the gradient");
    int32_t z = zeros_like(ad, IN(0), ad->g->values[dy[0]].dtype);
    return ad_give(ad, IN(0), scatter(ad, "ScatterElements", z, OUT(1), dy[0], mp_attr_int(NODE, "axis", -1), "add"), true);
}

/* GatherND (batch_dims 0): dData = ScatterND(zeros, indices, dY){reduction add}. Reads the indices. */
int mp_grad_GatherND(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (mp_attr_int(NODE, "batch_dims", 0) != 0) return mp_fail(ad->err, "the gradient with batch_dims > 0 is not supported");
    int32_t z = zeros_like(ad, IN(0), ad->g->values[dy[0]].dtype);
    return ad_give(ad, IN(0), scatter(ad, "ScatterND", z, IN(1), dy[0], INT64_MIN, "add"), true);
}

/* ScatterND (reduction none or add): dUpdates = GatherND(dY, indices); dData
 * = dY where nothing was written over it (none: ScatterND of zeros there),
 * dY itself for add. Other reductions are not supported. Reads the indices. */
int mp_grad_ScatterND(mp_ad *ad, int32_t node, const int32_t *dy)
{
    const char *red = mp_attr_str(NODE, "reduction", "none");
    bool add = !strcmp(red, "add");
    if (!add && strcmp(red, "none")) return mp_fail(ad->err, "the gradient of reduction '%s' is not supported", red);
    if (ad_needs(ad, IN(2))) {
        int32_t in[2] = {dy[0], IN(1)};
        if (ad_give(ad, IN(2), ad_emit(ad, "GatherND", "", 2, in, "grad_scatter"), true)) return -1;
    }
    if (!ad_needs(ad, IN(0))) return 0;
    if (add) return ad_give(ad, IN(0), dy[0], false);
    int32_t z = zeros_like(ad, IN(2), ad->g->values[dy[0]].dtype);
    return ad_give(ad, IN(0), scatter(ad, "ScatterND", dy[0], IN(1), z, INT64_MIN, NULL), true);
}

/* GridSample: GridSampleGrad(dY, X, grid){mode, padding_mode, align_corners}
 * gives dX and dGrid at once. Reads X and grid. */
int mp_grad_GridSample(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[3] = {dy[0], IN(0), IN(1)};
    static const char *const suffix[2] = {"grad_x", "grad_grid"};
    return ad_grad_node(ad, node, "GridSampleGrad", 3, in, 2, suffix);
}

/* AffineGrid: dTheta = AffineGridGrad(dGrid, size){align_corners}, the base grid's
 * points weighted by dGrid. Reads size. */
int mp_grad_AffineGrid(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(1)};
    return ad_grad_one(ad, node, "AffineGridGrad", "memplan", 2, in, "grad_theta");
}

/* ScatterElements and Scatter (reduction none or add), as ScatterND along
 * `axis`: dUpdates = GatherElements(dY, indices); dData = dY where nothing was
 * written over it, dY itself for add. Reads the indices. */
int mp_grad_ScatterElements(mp_ad *ad, int32_t node, const int32_t *dy)
{
    const char *red = mp_attr_str(NODE, "reduction", "none");
    bool add = !strcmp(red, "add");
    if (!add && strcmp(red, "none")) return mp_fail(ad->err, "the gradient of reduction '%s' is not supported", red);
    int64_t axis = mp_attr_int(NODE, "axis", 0);
    if (ad_needs(ad, IN(2))) {
        int32_t in[2] = {dy[0], IN(1)}, out;
        int32_t n = ad_add1(ad, "GatherElements", "", 2, in, "grad_scatter", &out);
        ad_attr_int(ad->g, &ad->g->nodes[n], "axis", axis);
        if (ad_infer(ad, n) || ad_give(ad, IN(2), out, true)) return -1;
    }
    if (!ad_needs(ad, IN(0))) return 0;
    if (add) return ad_give(ad, IN(0), dy[0], false);
    int32_t z = zeros_like(ad, IN(2), ad->g->values[dy[0]].dtype);
    return ad_give(ad, IN(0), scatter(ad, "ScatterElements", dy[0], IN(1), z, axis, NULL), true);
}

/* Trilu: the same triangle of dY (k and upper as the forward). Reads nothing but k. */
int mp_grad_Trilu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(1)}, out;
    int32_t n = ad_add1(ad, "Trilu", "", IN(1) >= 0 ? 2 : 1, in, "grad_trilu", &out);
    ad_attr_int(ad->g, &ad->g->nodes[n], "upper", mp_attr_int(NODE, "upper", 1));
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* CumSum: dX is the cumulative sum of dY the other way (exclusive stays
 * exclusive). Reads nothing but the axis. */
int mp_grad_CumSum(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(1)}, out;
    int32_t n = ad_add1(ad, "CumSum", "", 2, in, "grad_cumsum", &out);
    ad_attr_int(ad->g, &ad->g->nodes[n], "exclusive", mp_attr_int(NODE, "exclusive", 0));
    ad_attr_int(ad->g, &ad->g->nodes[n], "reverse", !mp_attr_int(NODE, "reverse", 0));
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* MaxUnpool: X's entry i went to the output position Indices[i] (flat over
 * the whole unpooled tensor, as MaxPool gives it), so dX = dY flattened and
 * gathered at Indices. Reads the indices. Refused: an output_shape other than
 * the default (the positions are then not flat indices of dY), and windows
 * that overlap (kernel over stride: two entries sent to one position would
 * both read its gradient where the forward kept one). */
int mp_grad_MaxUnpool(mp_ad *ad, int32_t node, const int32_t *dy)
{
    char why[160];
    if (mp_max_unpool_irregular(ad->g, NODE, why, sizeof why))
        return mp_fail(ad->err, "the gradient with %s is not supported", why);
    int64_t all = -1;
    int32_t in[2] = {dy[0], ad_const_ints(ad, &all, 1)};
    int32_t flat = in[1] < 0 ? -1 : ad_emit(ad, "Reshape", "", 2, in, "grad_unpool");
    int32_t g[2] = {flat, IN(1)};
    return flat < 0 ? -1 : ad_give(ad, IN(0), ad_emit(ad, "Gather", "", 2, g, "grad_unpool"), true);
}

/* ReverseSequence: reversing the same prefixes again. Reads sequence_lens. */
int mp_grad_ReverseSequence(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(1)};
    return ad_grad_one(ad, node, "ReverseSequence", "", 2, in, "grad_reverse");
}

/* CenterCropPad: cropping and zero padding about the center are each other's
 * adjoint (both put the smaller extent at (larger - smaller) / 2), so dX is
 * dY cropped or padded back to X's extents on the same axes. Reads nothing. */
int mp_grad_CenterCropPad(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int64_t xd[MP_MAX_RANK], to[MP_MAX_RANK];
    int xr, nto = 0;
    if (ad_known_dims(ad, IN(0), xd, &xr)) return -1;
    const int64_t *axes;
    int na = mp_attr_ints(NODE, "axes", &axes);
    for (int i = 0; i < (na >= 0 ? na : xr); i++) {
        int64_t a = na >= 0 ? (axes[i] < 0 ? axes[i] + xr : axes[i]) : i;
        if (a < 0 || a >= xr) return mp_fail(ad->err, "axis %lld out of range", (long long)axes[i]);
        to[nto++] = xd[a];
    }
    int32_t in[2] = {dy[0], ad_const_ints(ad, to, nto)};
    return in[1] < 0 ? -1 : ad_grad_one(ad, node, "CenterCropPad", "", 2, in, "grad_crop");
}
