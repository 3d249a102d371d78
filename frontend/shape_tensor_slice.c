/* shape_tensor_slice.c - shape rules of the data-movement ops, part 2: the ops
 * that cut, join, repeat and pick (Concat, Split, Slice, Expand, Tile, Gather,
 * GatherElements, GatherND, Pad, Compress, DepthToSpace, SpaceToDepth,
 * ReverseSequence, CenterCropPad). */
#include <stdlib.h>
#include <string.h>

#include "shape_tensor.h"

/* Advances the multi-index c over dims (row-major); false after the last. */
static bool next_index(int64_t *c, const int64_t *dims, int rank)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (++c[i] < dims[i]) return true;
        c[i] = 0;
    }
    return false;
}

static int64_t prod(const int64_t *d, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

/* Merges dim b into a for dims that must agree: a known dim wins over a
 * symbol or unknown; two known dims that differ are an error. */
static int merge_dim(const mp_graph *g, mp_dim *a, mp_dim b, const char *what, int axis, mp_err *err)
{
    char x[32], y[32];
    if (a->v >= 0 && b.v >= 0 && a->v != b.v)
        return mp_fail(err, "%s: dims %s and %s differ at axis %d", what, mp_dim_str(g, *a, x), mp_dim_str(g, b, y),
                       axis);
    if (a->v < 0 && (b.v >= 0 || a->sym < 0)) *a = b;
    return 0;
}

/* ---- Concat, Split -------------------------------------------------------- */

int shape_Concat(mp_graph *g, mp_node *n, mp_err *err)
{
    if (n->nin < 1) return mp_fail(err, "needs at least one input");
    const mp_attr *aa = mp_node_attr(n, "axis");
    if (!aa || aa->type != MP_ATTR_INT) return mp_fail(err, "missing attribute 'axis'");
    int r = -1;
    mp_dtype t = MP_UNDEFINED;
    for (int k = 0; k < n->nin; k++) {
        mp_value *v = mp_in(g, n, k);
        if (!v) return mp_fail(err, "input %d is missing", k);
        if (t == MP_UNDEFINED) t = v->dtype;
        if (v->rank < 0) continue;
        if (r >= 0 && v->rank != r) return mp_fail(err, "input %d has rank %d, input 0 rank %d", k, v->rank, r);
        r = v->rank;
    }
    if (r < 0) return mp_set_out(g, n, 0, t, -1, NULL);
    int64_t axis;
    if (mp_norm_axis(aa->i, r, false, &axis, err)) return -1;
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < r; i++) d[i] = MP_DIM_UNKNOWN;
    d[axis] = mp_dim_of(0);
    bool all_ranked = true;
    for (int k = 0; k < n->nin; k++) {
        mp_value *v = mp_in(g, n, k);
        if (v->rank < 0) {
            all_ranked = false;
            continue;
        }
        for (int i = 0; i < r; i++) {
            if (i == axis) {
                if (mp_dim_add(d[i], v->dims[i], &d[i], err)) return -1;
            } else if (merge_dim(g, &d[i], v->dims[i], "inputs", i, err)) {
                return -1;
            }
        }
    }
    if (!all_ranked) d[axis] = MP_DIM_UNKNOWN;
    mp_set_out(g, n, 0, t, r, d);
    /* fold: for each outer index, the blocks of input 0, 1, ... in turn */
    mp_value **srcs = malloc((size_t)n->nin * sizeof *srcs);
    if (!srcs) return 0;
    for (int k = 0; k < n->nin; k++) srcs[k] = mp_in(g, n, k);
    int rc = 0;
    mp_gmap f;
    if (mp_gmap_begin(&f, g, n, 0, n->nin, srcs)) {
        int64_t od[MP_MAX_RANK], e = 0;
        mp_known_dims(mp_out(g, n, 0), od);
        int64_t outer = prod(od, (int)axis), inner = prod(od + axis + 1, r - (int)axis - 1);
        for (int64_t o = 0; o < outer; o++)
            for (int k = 0; k < n->nin; k++) {
                int64_t block = srcs[k]->dims[axis].v * inner;
                for (int64_t j = 0; j < block; j++, e++) {
                    f.src[e] = k;
                    f.idx[e] = o * block + j;
                }
            }
        rc = mp_gmap_end(&f, err);
    }
    free(srcs);
    return rc;
}

int shape_Split(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'input'");
    int nout = n->nout;
    if (nout < 1) return mp_fail(err, "has no outputs");
    if (x->rank < 0) {
        for (int k = 0; k < nout; k++) mp_set_out(g, n, k, x->dtype, -1, NULL);
        return 0;
    }
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x->rank, false, &axis, err)) return -1;
    int64_t *split = malloc((size_t)nout * sizeof *split);
    if (!split) return mp_fail(err, "out of memory");
    int ns, st = mp_arg_ints(g, n, "split", 1, split, nout, &ns, err);
    mp_dim dim = x->dims[axis];
    int rc = 0;
    if (st < 0) {
        rc = -1;
    } else if (st == MP_ARG_KNOWN) {
        if (ns != nout) rc = mp_fail(err, "'split' has %d entries for %d outputs", ns, nout);
        int64_t sum = 0;
        for (int k = 0; k < ns && !rc; k++)
            if (split[k] < 0 || !mp_add_ok(sum, split[k], &sum))
                rc = mp_fail(err, "'split' entry %d is %lld", k, (long long)split[k]);
        if (!rc && dim.v >= 0 && sum != dim.v)
            rc = mp_fail(err, "'split' sums to %lld but axis %lld has size %lld", (long long)sum, (long long)axis,
                         (long long)dim.v);
    } else if (st == MP_ARG_ABSENT && dim.v >= 0) {
        /* equal parts; opset 18's num_outputs lets the last part be smaller */
        int64_t num = mp_attr_int(n, "num_outputs", nout);
        if (num != nout) rc = mp_fail(err, "num_outputs is %lld but the node has %d outputs", (long long)num, nout);
        bool uneven = mp_node_attr(n, "num_outputs") != NULL;
        if (!rc && dim.v % nout && !uneven)
            rc = mp_fail(err, "axis %lld of size %lld does not split into %d equal parts", (long long)axis,
                         (long long)dim.v, nout);
        int64_t chunk = dim.v / nout + (dim.v % nout != 0);
        for (int k = 0; k < nout; k++) split[k] = chunk;
        split[nout - 1] = dim.v - chunk * (nout - 1);
        if (!rc && split[nout - 1] < 0)
            rc = mp_fail(err, "axis %lld of size %lld cannot be split into %d parts", (long long)axis, (long long)dim.v,
                         nout);
    }
    bool known = st == MP_ARG_KNOWN || (st == MP_ARG_ABSENT && dim.v >= 0);
    mp_dim d[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)x->rank * sizeof *d);
    int64_t off = 0;
    for (int k = 0; k < nout && !rc; k++) {
        d[axis] = known ? mp_dim_of(split[k]) : MP_DIM_UNKNOWN;
        if (st == MP_ARG_ABSENT && nout == 1) d[axis] = dim; /* one part: the whole axis, even symbolic */
        mp_set_out(g, n, k, x->dtype, x->rank, d);
        mp_gmap f;
        if (known && mp_gmap_begin(&f, g, n, k, 1, &x)) {
            int64_t in[MP_MAX_RANK];
            mp_known_dims(x, in);
            int64_t inner = prod(in + axis + 1, x->rank - (int)axis - 1), e = 0;
            int64_t outer = prod(in, (int)axis), block = split[k] * inner, stride = in[axis] * inner;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t j = 0; j < block; j++, e++) {
                    f.src[e] = 0;
                    f.idx[e] = o * stride + off * inner + j;
                }
            rc = mp_gmap_end(&f, err);
        }
        if (known) off += split[k];
    }
    free(split);
    return rc;
}

/* ---- Slice ------------------------------------------------------------------ */

/* First index and length of a slice of a known dim (ONNX clamping rules). */
static void slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *len)
{
    *first = *len = 0;
    if (dim == 0) return;
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
    start = start < 0 ? 0 : start > hi ? hi : start;
    end = end < lo ? lo : end > hi ? hi : end;
    int64_t span = step > 0 ? end - start : start - end, s = step > 0 ? step : step == INT64_MIN ? INT64_MAX : -step;
    *first = start;
    *len = span > 0 ? (span - 1) / s + 1 : 0;
}

int shape_Slice(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    int64_t starts[MP_MAX_RANK], ends[MP_MAX_RANK], axes[MP_MAX_RANK], steps[MP_MAX_RANK];
    int ns, ne, na, nt;
    int ss = mp_arg_ints(g, n, "starts", 1, starts, MP_MAX_RANK, &ns, err);
    int se = ss < 0 ? -1 : mp_arg_ints(g, n, "ends", 2, ends, MP_MAX_RANK, &ne, err);
    int sa = se < 0 ? -1 : mp_arg_ints(g, n, "axes", 3, axes, MP_MAX_RANK, &na, err);
    int st = sa < 0 ? -1 : mp_arg_ints(g, n, NULL, 4, steps, MP_MAX_RANK, &nt, err);
    if (st < 0) return -1;
    if (ss == MP_ARG_ABSENT || se == MP_ARG_ABSENT) return mp_fail(err, "needs starts and ends");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank;
    mp_dim d[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)r * sizeof *d);
    if (ss == MP_ARG_UNKNOWN || se == MP_ARG_UNKNOWN || sa == MP_ARG_UNKNOWN || st == MP_ARG_UNKNOWN) {
        /* Which axes are cut is known only from a known axes list. A symbolic
         * end S keeps a dim that is S itself: x[:S] of x[S, ...] is all of x. */
        mp_dim e[MP_MAX_RANK];
        bool sym_end = ss == MP_ARG_KNOWN && se == MP_ARG_UNKNOWN && st != MP_ARG_UNKNOWN &&
                       mp_const_dims(g, mp_in(g, n, 2), e, MP_MAX_RANK) == ns;
        for (int i = 0; i < r; i++)
            if (sa != MP_ARG_KNOWN) d[i] = MP_DIM_UNKNOWN;
        for (int i = 0; sa == MP_ARG_KNOWN && i < na; i++) {
            int64_t a;
            if (mp_norm_axis(axes[i], r, false, &a, err)) return -1;
            bool whole = sym_end && i < ns && starts[i] == 0 && (st == MP_ARG_ABSENT || (i < nt && steps[i] == 1)) &&
                         e[i].sym >= 0 && mp_dim_same(e[i], d[a]);
            if (!whole) d[a] = MP_DIM_UNKNOWN;
        }
        return mp_set_out(g, n, 0, x->dtype, r, d);
    }
    if (ne != ns) return mp_fail(err, "starts has %d entries but ends %d", ns, ne);
    if (sa == MP_ARG_ABSENT)
        for (na = 0; na < ns; na++) axes[na] = na;
    if (st == MP_ARG_ABSENT)
        for (nt = 0; nt < ns; nt++) steps[nt] = 1;
    if (na != ns || nt != ns) return mp_fail(err, "starts, ends, axes and steps differ in length");
    int64_t first[MP_MAX_RANK] = {0}, step[MP_MAX_RANK];
    bool cut[MP_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) step[i] = 1;
    for (int i = 0; i < ns; i++) {
        int64_t a, len;
        if (mp_norm_axis(axes[i], r, false, &a, err)) return -1;
        if (cut[a]) return mp_fail(err, "axis %lld is listed twice", (long long)axes[i]);
        if (steps[i] == 0) return mp_fail(err, "step of axis %lld is 0", (long long)axes[i]);
        cut[a] = true;
        step[a] = steps[i];
        if (d[a].v >= 0) {
            slice_range(d[a].v, starts[i], ends[i], steps[i], &first[a], &len);
            d[a] = mp_dim_of(len);
        } else { /* a symbolic dim survives only a slice of all of it */
            bool all = (steps[i] == 1 && starts[i] == 0 && ends[i] >= INT32_MAX) ||
                       (steps[i] == -1 && (starts[i] == -1 || starts[i] >= INT32_MAX) && ends[i] <= INT32_MIN);
            if (!all) d[a] = MP_DIM_UNKNOWN;
        }
    }
    mp_set_out(g, n, 0, x->dtype, r, d);
    mp_gmap f;
    if (!mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int64_t in[MP_MAX_RANK], od[MP_MAX_RANK], is[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_known_dims(mp_out(g, n, 0), od);
    mp_dims_strides(in, r, is);
    for (int64_t e = 0; e < f.numel; e++, next_index(c, od, r)) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += (first[i] + c[i] * step[i]) * is[i];
        f.src[e] = 0;
        f.idx[e] = off;
    }
    return mp_gmap_end(&f, err);
}

/* ---- Expand, Tile --------------------------------------------------------- */

/* Folds output 0 from x where each output index i reads x at map(i) per axis:
 * the per-axis source index is c % in (Tile), or 0 on broadcast axes (Expand). */
static int fold_repeat(mp_graph *g, const mp_node *n, mp_value *x, mp_err *err)
{
    mp_gmap f;
    if (!mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    mp_value *y = mp_out(g, n, 0);
    int r = y->rank, off = y->rank - x->rank;
    int64_t in[MP_MAX_RANK], od[MP_MAX_RANK], is[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_known_dims(y, od);
    mp_dims_strides(in, x->rank, is);
    for (int64_t e = 0; e < f.numel; e++, next_index(c, od, r)) {
        int64_t idx = 0;
        for (int i = 0; i < x->rank; i++) idx += (c[i + off] % in[i]) * is[i];
        f.src[e] = 0;
        f.idx[e] = idx;
    }
    return mp_gmap_end(&f, err);
}

int shape_Expand(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *s = mp_in(g, n, 1);
    if (!x || !s) return mp_fail(err, "needs inputs 'input' and 'shape'");
    mp_dim d[MP_MAX_RANK], out[MP_MAX_RANK];
    int k, len, r;
    if (mp_shape_arg(g, s, d, &k, &len, err)) return -1;
    if (k < 0) {
        r = len < 0 || x->rank < 0 ? -1 : len > x->rank ? len : x->rank;
        for (int i = 0; i < r; i++) out[i] = MP_DIM_UNKNOWN;
        return mp_set_out(g, n, 0, x->dtype, r, out);
    }
    for (int i = 0; i < k && s->konst; i++)
        if (d[i].v < 0) return mp_fail(err, "shape entry %d is %lld", i, (long long)d[i].v);
    mp_value target = {.rank = k, .dims = d};
    const mp_value *vs[2] = {x, &target};
    if (mp_broadcast(g, 2, vs, &r, out, err)) return -1;
    mp_set_out(g, n, 0, x->dtype, r, out);
    return r >= 0 ? fold_repeat(g, n, x, err) : 0;
}

int shape_Tile(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *rep = mp_in(g, n, 1);
    if (!x || !rep) return mp_fail(err, "needs inputs 'input' and 'repeats'");
    mp_dim d[MP_MAX_RANK], out[MP_MAX_RANK];
    int k, len;
    if (mp_shape_arg(g, rep, d, &k, &len, err)) return -1;
    int r = x->rank >= 0 ? x->rank : len;
    if (x->rank >= 0 && len >= 0 && len != x->rank)
        return mp_fail(err, "repeats has %d entries for an input of rank %d", len, x->rank);
    for (int i = 0; i < r; i++) {
        out[i] = MP_DIM_UNKNOWN;
        if (k < 0 || x->rank < 0) continue;
        if (rep->konst && d[i].v < 0) return mp_fail(err, "repeats entry %d is %lld", i, (long long)d[i].v);
        if (mp_dim_mul(x->dims[i], d[i], &out[i], err)) return -1;
    }
    mp_set_out(g, n, 0, x->dtype, r, out);
    return k >= 0 && x->rank >= 0 ? fold_repeat(g, n, x, err) : 0;
}

/* ---- Gather, GatherElements, GatherND ----------------------------------- */

/* Index v of an axis of size dim, negative counting from the end. */
static int norm_index(int64_t v, int64_t dim, int64_t *out, mp_err *err)
{
    int64_t a = v < 0 ? v + dim : v;
    if (a < 0 || a >= dim)
        return mp_fail(err, "index %lld is out of range for an axis of size %lld", (long long)v, (long long)dim);
    *out = a;
    return 0;
}

/* The indices input, when known and no bigger than the fold. */
static const mp_tensor *fold_indices(const mp_value *ind)
{
    const mp_tensor *t = ind ? ind->konst : NULL;
    return t && t->data && t->numel <= MP_FOLD_MAX_ELEMS && mp_dtype_is_int(t->dtype) && mp_dtype_readable(t->dtype)
               ? t
               : NULL;
}

int shape_Gather(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ind = mp_in(g, n, 1);
    if (!x || !ind) return mp_fail(err, "needs inputs 'data' and 'indices'");
    if (x->rank == 0) return mp_fail(err, "data must have rank >= 1");
    if (x->rank < 0 || ind->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x->rank, false, &axis, err)) return -1;
    int r = x->rank - 1 + ind->rank;
    if (r > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", r, MP_MAX_RANK);
    mp_dim d[MP_MAX_RANK];
    int k = 0;
    for (int i = 0; i < axis; i++) d[k++] = x->dims[i];
    for (int i = 0; i < ind->rank; i++) d[k++] = ind->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) d[k++] = x->dims[i];
    mp_set_out(g, n, 0, x->dtype, r, d);
    const mp_tensor *it = fold_indices(ind);
    mp_gmap f;
    if (!it || !mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int64_t in[MP_MAX_RANK], e = 0;
    mp_known_dims(x, in);
    int64_t outer = prod(in, (int)axis), dim = in[axis], inner = prod(in + axis + 1, x->rank - (int)axis - 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < it->numel; j++) {
            int64_t v = 0;
            if (norm_index(mp_tensor_get_i64(it, j), dim, &v, err)) {
                mp_gmap_cancel(&f);
                return -1;
            }
            for (int64_t i = 0; i < inner; i++, e++) {
                f.src[e] = 0;
                f.idx[e] = (o * dim + v) * inner + i;
            }
        }
    return mp_gmap_end(&f, err);
}

int shape_GatherElements(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ind = mp_in(g, n, 1);
    if (!x || !ind) return mp_fail(err, "needs inputs 'data' and 'indices'");
    if (x->rank >= 0 && ind->rank >= 0 && x->rank != ind->rank)
        return mp_fail(err, "data has rank %d but indices rank %d", x->rank, ind->rank);
    mp_set_out_like(g, n, 0, x->dtype, ind);
    if (x->rank < 1) return x->rank == 0 ? mp_fail(err, "data must have rank >= 1") : 0;
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x->rank, false, &axis, err)) return -1;
    for (int i = 0; ind->rank >= 0 && i < x->rank; i++) /* other axes index data by position */
        if (i != axis && x->dims[i].v >= 0 && ind->dims[i].v > x->dims[i].v)
            return mp_fail(err, "indices dim %lld exceeds data dim %lld at axis %d", (long long)ind->dims[i].v,
                           (long long)x->dims[i].v, i);
    const mp_tensor *it = fold_indices(ind);
    mp_gmap f;
    if (!it || !mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int r = x->rank;
    int64_t in[MP_MAX_RANK], is[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_dims_strides(in, r, is);
    for (int64_t e = 0; e < f.numel; e++, next_index(c, it->dims, r)) {
        int64_t v = 0, off = 0;
        if (norm_index(mp_tensor_get_i64(it, e), in[axis], &v, err)) {
            mp_gmap_cancel(&f);
            return -1;
        }
        for (int i = 0; i < r; i++) off += (i == axis ? v : c[i]) * is[i];
        f.src[e] = 0;
        f.idx[e] = off;
    }
    return mp_gmap_end(&f, err);
}

int shape_GatherND(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ind = mp_in(g, n, 1);
    if (!x || !ind) return mp_fail(err, "needs inputs 'data' and 'indices'");
    int64_t b = mp_attr_int(n, "batch_dims", 0);
    if (x->rank == 0 || ind->rank == 0) return mp_fail(err, "data and indices must have rank >= 1");
    if (x->rank < 0 || ind->rank < 0 || ind->dims[ind->rank - 1].v < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int q = ind->rank;
    if (b < 0 || b >= q || b >= x->rank)
        return mp_fail(err, "batch_dims %lld must be less than both ranks (%d and %d)", (long long)b, x->rank, q);
    int64_t m = ind->dims[q - 1].v;
    if (m > x->rank - b)
        return mp_fail(err, "indices tuples have %lld entries but data has only %lld dims after the batch",
                       (long long)m, (long long)(x->rank - b));
    int r = q - 1 + x->rank - (int)(b + m), k = 0;
    if (r > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", r, MP_MAX_RANK);
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < q - 1; i++) d[k++] = ind->dims[i];
    for (int i = (int)(b + m); i < x->rank; i++) d[k++] = x->dims[i];
    for (int i = 0; i < b; i++)
        if (merge_dim(g, &d[i], x->dims[i], "batch dims of data and indices", i, err)) return -1;
    mp_set_out(g, n, 0, x->dtype, r, d);
    const mp_tensor *it = fold_indices(ind);
    mp_gmap f;
    if (!it || !mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int64_t in[MP_MAX_RANK], is[MP_MAX_RANK], e = 0;
    mp_known_dims(x, in);
    mp_dims_strides(in, x->rank, is);
    int64_t nbatch = prod(in, (int)b), ntuple = prod(it->dims + b, q - 1 - (int)b);
    int64_t inner = prod(in + b + m, x->rank - (int)(b + m)), bstride = prod(in + b, x->rank - (int)b);
    for (int64_t bi = 0; bi < nbatch; bi++)
        for (int64_t t = 0; t < ntuple; t++) {
            int64_t off = bi * bstride, row = (bi * ntuple + t) * m;
            for (int64_t j = 0; j < m; j++) {
                int64_t v = 0;
                if (norm_index(mp_tensor_get_i64(it, row + j), in[b + j], &v, err)) {
                    mp_gmap_cancel(&f);
                    return -1;
                }
                off += v * is[b + j];
            }
            for (int64_t i = 0; i < inner; i++, e++) {
                f.src[e] = 0;
                f.idx[e] = off + i;
            }
        }
    return mp_gmap_end(&f, err);
}

/* ---- Pad -------------------------------------------------------------------- */

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* Source index on an axis of size dim for the padded position c (may be outside). */
static int64_t pad_source(pad_mode m, int64_t c, int64_t dim)
{
    if (c >= 0 && c < dim) return c;
    switch (m) {
    case PAD_EDGE: return c < 0 ? 0 : dim - 1;
    case PAD_WRAP: return ((c % dim) + dim) % dim;
    case PAD_REFLECT: {
        if (dim == 1) return 0;
        int64_t p = 2 * (dim - 1), j = ((c % p) + p) % p;
        return j < dim ? j : p - j;
    }
    default: return -1;
    }
}

int shape_Pad(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    const char *ms = mp_attr_str(n, "mode", "constant");
    int mode = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(ms, modes[i])) mode = i;
    if (mode < 0) return mp_fail(err, "unknown mode '%s'", ms);
    int64_t pads[2 * MP_MAX_RANK], axes[MP_MAX_RANK];
    int np, na;
    int sp = mp_arg_ints(g, n, "pads", 1, pads, 2 * MP_MAX_RANK, &np, err);
    int sa = sp < 0 ? -1 : mp_arg_ints(g, n, NULL, 3, axes, MP_MAX_RANK, &na, err);
    if (sa < 0) return -1;
    if (sp == MP_ARG_ABSENT) return mp_fail(err, "missing 'pads'");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank;
    mp_dim d[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)r * sizeof *d);
    if (sp == MP_ARG_UNKNOWN || sa == MP_ARG_UNKNOWN) {
        for (int i = 0; i < r; i++) d[i] = MP_DIM_UNKNOWN;
        return mp_set_out(g, n, 0, x->dtype, r, d);
    }
    if (sa == MP_ARG_ABSENT)
        for (na = 0; na < r; na++) axes[na] = na;
    if (np != 2 * na) return mp_fail(err, "pads has %d entries for %d axes (needs twice as many)", np, na);
    int64_t begin[MP_MAX_RANK] = {0};
    bool seen[MP_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int64_t a, sum;
        if (mp_norm_axis(axes[i], r, false, &a, err)) return -1;
        if (seen[a]) return mp_fail(err, "axis %lld is listed twice", (long long)axes[i]);
        seen[a] = true;
        if (pads[i] < -(INT64_C(1) << 62) || pads[i] > INT64_C(1) << 62 || pads[i + na] < -(INT64_C(1) << 62) ||
            pads[i + na] > INT64_C(1) << 62)
            return mp_fail(err, "pads of axis %lld are too large", (long long)a);
        begin[a] = pads[i];
        if (!mp_add_ok(pads[i], pads[i + na], &sum)) return mp_fail(err, "pads overflow int64");
        if (d[a].v >= 0) {
            if (!mp_add_ok(d[a].v, sum, &sum) || sum < 0)
                return mp_fail(err, "pads %lld,%lld make axis %lld of size %lld negative", (long long)pads[i],
                               (long long)pads[i + na], (long long)a, (long long)d[a].v);
            d[a] = mp_dim_of(sum);
        } else if (sum != 0) {
            d[a] = MP_DIM_UNKNOWN;
        }
        if (mode != PAD_CONSTANT && d[a].v > 0 && x->dims[a].v == 0)
            return mp_fail(err, "mode '%s' cannot pad axis %lld of size 0", ms, (long long)a);
    }
    mp_set_out(g, n, 0, x->dtype, r, d);
    /* fold: the fill of constant mode is input 2 (opset 11) or attribute value */
    mp_value fill = {0}, *srcs[2] = {x, &fill};
    int nsrc = 1;
    if (mode == PAD_CONSTANT) {
        mp_value *cv = mp_in(g, n, 2);
        const mp_attr *va = mp_node_attr(n, "value");
        if (cv) {
            srcs[1] = cv;
            nsrc = 2;
        } else if (va && va->type == MP_ATTR_FLOAT && va->f != 0 && mp_dtype_readable(x->dtype)) {
            int64_t one = 1;
            fill.dtype = x->dtype;
            fill.rank = 0;
            fill.konst = mp_tensor_new(g->arena, x->dtype, 0, &one);
            mp_tensor_set_f64(fill.konst, 0, va->f);
            nsrc = 2;
        }
    }
    mp_gmap f;
    if (!mp_gmap_begin(&f, g, n, 0, nsrc, srcs)) return 0;
    int64_t in[MP_MAX_RANK], od[MP_MAX_RANK], is[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_known_dims(mp_out(g, n, 0), od);
    mp_dims_strides(in, r, is);
    for (int64_t e = 0; e < f.numel; e++, next_index(c, od, r)) {
        int64_t off = 0;
        for (int i = 0; i < r && off >= 0; i++) {
            int64_t j = pad_source((pad_mode)mode, c[i] - begin[i], in[i]);
            off = j < 0 ? -1 : off + j * is[i];
        }
        f.src[e] = off >= 0 ? 0 : nsrc == 2 ? 1 : -1;
        f.idx[e] = off >= 0 ? off : 0;
    }
    return mp_gmap_end(&f, err);
}

/* ---- Compress --------------------------------------------------------------- */

int shape_Compress(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *cond = mp_in(g, n, 1);
    if (!x || !cond) return mp_fail(err, "needs inputs 'input' and 'condition'");
    if (cond->rank > 1) return mp_fail(err, "condition must be 1-D, not rank %d", cond->rank);
    const mp_attr *aa = mp_node_attr(n, "axis");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, aa ? -1 : 1, &(mp_dim){-1, -1});
    int64_t axis = -1;
    if (aa && mp_norm_axis(aa->i, x->rank, false, &axis, err)) return -1;
    mp_dim d[MP_MAX_RANK], len;
    if (axis < 0 && mp_dims_product(x->dims, x->rank, &len, err)) return -1;
    if (axis >= 0) len = x->dims[axis];
    /* selected: trues among the first min(len(condition), axis length) */
    const mp_tensor *c = cond->konst && cond->konst->data && mp_dtype_readable(cond->konst->dtype) ? cond->konst : NULL;
    int64_t count = 0, limit = c && len.v >= 0 ? (c->numel < len.v ? c->numel : len.v) : 0;
    if (c && len.v >= 0 && c->numel > len.v)
        for (int64_t i = len.v; i < c->numel; i++)
            if (mp_tensor_get_i64(c, i))
                return mp_fail(err, "condition selects index %lld beyond the axis length %lld", (long long)i,
                               (long long)len.v);
    for (int64_t i = 0; i < limit; i++) count += mp_tensor_get_i64(c, i) != 0;
    mp_dim sel = c && len.v >= 0 ? mp_dim_of(count) : MP_DIM_UNKNOWN;
    if (axis < 0) {
        mp_set_out(g, n, 0, x->dtype, 1, &sel);
    } else {
        memcpy(d, x->dims, (size_t)x->rank * sizeof *d);
        d[axis] = sel;
        mp_set_out(g, n, 0, x->dtype, x->rank, d);
    }
    mp_gmap f;
    if (!c || !mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int64_t in[MP_MAX_RANK], e = 0;
    mp_known_dims(x, in);
    int64_t outer = axis < 0 ? 1 : prod(in, (int)axis),
            inner = axis < 0 ? 1 : prod(in + axis + 1, x->rank - (int)axis - 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < limit; j++) {
            if (!mp_tensor_get_i64(c, j)) continue;
            for (int64_t i = 0; i < inner; i++, e++) {
                f.src[e] = 0;
                f.idx[e] = (o * len.v + j) * inner + i;
            }
        }
    return mp_gmap_end(&f, err);
}

/* ---- DepthToSpace, SpaceToDepth, ReverseSequence, CenterCropPad ---------- */

static int block_rule(mp_graph *g, mp_node *n, bool to_space, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    int64_t b = mp_attr_int(n, "blocksize", -1), bb;
    if (b <= 0 || !mp_mul_ok(b, b, &bb)) return mp_fail(err, "needs a positive 'blocksize'");
    if (to_space) {
        const char *m = mp_attr_str(n, "mode", "DCR");
        if (strcmp(m, "DCR") && strcmp(m, "CRD")) return mp_fail(err, "unknown mode '%s'", m);
    }
    if (x->rank < 0)
        return mp_set_out(g, n, 0, x->dtype, 4,
                          (mp_dim[4]){MP_DIM_UNKNOWN, MP_DIM_UNKNOWN, MP_DIM_UNKNOWN, MP_DIM_UNKNOWN});
    if (x->rank != 4) return mp_fail(err, "input must have rank 4, not %d", x->rank);
    mp_dim d[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    /* DepthToSpace: C / b^2, H * b, W * b; SpaceToDepth the inverse */
    for (int i = 1; i < 4; i++) {
        int64_t v = d[i].v, by = i == 1 ? bb : b;
        bool shrink = (i == 1) == to_space;
        if (v < 0) {
            d[i] = MP_DIM_UNKNOWN;
        } else if (shrink) {
            if (v % by)
                return mp_fail(err, "dim %d of size %lld is not a multiple of %lld", i, (long long)v, (long long)by);
            d[i] = mp_dim_of(v / by);
        } else {
            if (!mp_mul_ok(v, by, &v)) return mp_fail(err, "dim %d overflows", i);
            d[i] = mp_dim_of(v);
        }
    }
    return mp_set_out(g, n, 0, x->dtype, 4, d);
}

int shape_DepthToSpace(mp_graph *g, mp_node *n, mp_err *err) { return block_rule(g, n, true, err); }
int shape_SpaceToDepth(mp_graph *g, mp_node *n, mp_err *err) { return block_rule(g, n, false, err); }

int shape_ReverseSequence(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *lens = mp_in(g, n, 1);
    if (!x || !lens) return mp_fail(err, "needs inputs 'input' and 'sequence_lens'");
    int64_t ba = mp_attr_int(n, "batch_axis", 1), ta = mp_attr_int(n, "time_axis", 0);
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return mp_fail(err, "batch_axis and time_axis must be 0 and 1 in some order");
    if (x->rank >= 0 && x->rank < 2) return mp_fail(err, "input must have rank >= 2, not %d", x->rank);
    mp_dim batch = x->rank >= 0 ? x->dims[ba] : MP_DIM_UNKNOWN;
    if (lens->rank == 1 && merge_dim(g, &batch, lens->dims[0], "sequence_lens and the batch axis", (int)ba, err))
        return -1;
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

int shape_CenterCropPad(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *s = mp_in(g, n, 1);
    if (!x || !s) return mp_fail(err, "needs inputs 'input_data' and 'shape'");
    if (x->rank < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank;
    int64_t axes[MP_MAX_RANK];
    int na, k, len;
    const int64_t *aa;
    int cnt = mp_attr_ints(n, "axes", &aa);
    if (cnt > r) return mp_fail(err, "'axes' has %d entries for rank %d", cnt, r);
    for (na = 0; na < (cnt >= 0 ? cnt : r); na++) axes[na] = cnt >= 0 ? aa[na] : na;
    mp_dim sd[MP_MAX_RANK], d[MP_MAX_RANK];
    if (mp_shape_arg(g, s, sd, &k, &len, err)) return -1;
    if (len >= 0 && len != na) return mp_fail(err, "shape has %d entries for %d axes", len, na);
    memcpy(d, x->dims, (size_t)r * sizeof *d);
    bool seen[MP_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (mp_norm_axis(axes[i], r, false, &a, err)) return -1;
        if (seen[a]) return mp_fail(err, "axis %lld is listed twice", (long long)axes[i]);
        seen[a] = true;
        d[a] = k >= 0 ? sd[i] : MP_DIM_UNKNOWN;
        if (k >= 0 && s->konst && sd[i].v < 0) return mp_fail(err, "shape entry %d is %lld", i, (long long)sd[i].v);
    }
    return mp_set_out(g, n, 0, x->dtype, r, d);
}
