/* shape_tensor_index.c - shape rules of the data-movement ops, part 3: ops
 * driven by index or value data (Scatter, ScatterElements, ScatterND,
 * TensorScatter, TopK, NonZero, Unique, OneHot, Trilu, EyeLike). The
 * data-dependent ones (NonZero, Unique) are computed when their input is known. */
#include <stdlib.h>
#include <string.h>

#include "shape_tensor.h"

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

static int same_rank(const mp_value *a, const mp_value *b, const char *an, const char *bn, mp_err *err)
{
    if (a->rank >= 0 && b->rank >= 0 && a->rank != b->rank)
        return mp_fail(err, "%s has rank %d but %s rank %d", an, a->rank, bn, b->rank);
    return 0;
}

/* ---- Scatter, ScatterElements, ScatterND, TensorScatter ----------------- */

/* Starts folding a scatter: a copy of data (source 0) that the caller then
 * overwrites from updates (source 1). Only reduction "none" folds. */
static bool scatter_begin(mp_gmap *f, mp_graph *g, const mp_node *n, mp_value **srcs, const mp_value *ind)
{
    if (strcmp(mp_attr_str(n, "reduction", "none"), "none")) return false;
    const mp_tensor *t = ind->konst;
    if (!t || !t->data || !mp_dtype_is_int(t->dtype) || !mp_dtype_readable(t->dtype)) return false;
    if (!mp_gmap_begin(f, g, n, 0, 2, srcs)) return false;
    for (int64_t e = 0; e < f->numel; e++) {
        f->src[e] = 0;
        f->idx[e] = e;
    }
    return true;
}

static int scatter_elements(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ind = mp_in(g, n, 1), *upd = mp_in(g, n, 2);
    if (!x || !ind || !upd) return mp_fail(err, "needs inputs 'data', 'indices' and 'updates'");
    if (same_rank(x, ind, "data", "indices", err) || same_rank(ind, upd, "indices", "updates", err)) return -1;
    static const char *const reds[] = {"none", "add", "mul", "max", "min"};
    const char *red = mp_attr_str(n, "reduction", "none");
    bool ok = false;
    for (int i = 0; i < 5; i++) ok = ok || !strcmp(red, reds[i]);
    if (!ok) return mp_fail(err, "unknown reduction '%s'", red);
    mp_set_out_like(g, n, 0, x->dtype, x);
    if (x->rank < 1) return x->rank == 0 ? mp_fail(err, "data must have rank >= 1") : 0;
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", 0), x->rank, false, &axis, err)) return -1;
    for (int i = 0; ind->rank >= 0 && i < x->rank; i++) /* other axes write data by position */
        if (i != axis && x->dims[i].v >= 0 && ind->dims[i].v > x->dims[i].v)
            return mp_fail(err, "indices dim %lld exceeds data dim %lld at axis %d", (long long)ind->dims[i].v,
                           (long long)x->dims[i].v, i);
    mp_value *srcs[2] = {x, upd};
    mp_gmap f;
    if (!scatter_begin(&f, g, n, srcs, ind)) return 0;
    const mp_tensor *it = ind->konst;
    int r = x->rank;
    int64_t in[MP_MAX_RANK], is[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_dims_strides(in, r, is);
    for (int64_t e = 0; e < it->numel; e++, next_index(c, it->dims, r)) {
        int64_t v = mp_tensor_get_i64(it, e), off = 0;
        if (v < 0) v += in[axis];
        if (v < 0 || v >= in[axis]) {
            mp_gmap_cancel(&f);
            return mp_fail(err, "index %lld is out of range for axis %lld of size %lld",
                           (long long)mp_tensor_get_i64(it, e), (long long)axis, (long long)in[axis]);
        }
        for (int i = 0; i < r; i++) off += (i == axis ? v : c[i]) * is[i];
        f.src[off] = 1;
        f.idx[off] = e;
    }
    return mp_gmap_end(&f, err);
}

int shape_Scatter(mp_graph *g, mp_node *n, mp_err *err) { return scatter_elements(g, n, err); }
int shape_ScatterElements(mp_graph *g, mp_node *n, mp_err *err) { return scatter_elements(g, n, err); }

int shape_ScatterND(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *ind = mp_in(g, n, 1), *upd = mp_in(g, n, 2);
    if (!x || !ind || !upd) return mp_fail(err, "needs inputs 'data', 'indices' and 'updates'");
    mp_set_out_like(g, n, 0, x->dtype, x);
    if (x->rank < 0 || ind->rank < 0) return 0;
    if (x->rank < 1 || ind->rank < 1) return mp_fail(err, "data and indices must have rank >= 1");
    int64_t k = ind->dims[ind->rank - 1].v;
    if (k > x->rank) return mp_fail(err, "index tuples have %lld entries for data of rank %d", (long long)k, x->rank);
    if (k >= 0 && upd->rank >= 0 && upd->rank != ind->rank - 1 + x->rank - k)
        return mp_fail(err, "updates has rank %d, expected %lld", upd->rank, (long long)(ind->rank - 1 + x->rank - k));
    mp_value *srcs[2] = {x, upd};
    mp_gmap f;
    if (!scatter_begin(&f, g, n, srcs, ind)) return 0;
    const mp_tensor *it = ind->konst;
    int64_t in[MP_MAX_RANK], is[MP_MAX_RANK];
    mp_known_dims(x, in);
    mp_dims_strides(in, x->rank, is);
    int64_t ntuple = k ? it->numel / k : 0, inner = prod(in + k, x->rank - (int)k);
    for (int64_t t = 0; t < ntuple; t++) {
        int64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t v = mp_tensor_get_i64(it, t * k + j);
            if (v < 0) v += in[j];
            if (v < 0 || v >= in[j]) {
                mp_gmap_cancel(&f);
                return mp_fail(err, "index %lld is out of range for axis %lld of size %lld",
                               (long long)mp_tensor_get_i64(it, t * k + j), (long long)j, (long long)in[j]);
            }
            off += v * is[j];
        }
        for (int64_t i = 0; i < inner; i++) {
            f.src[off + i] = 1;
            f.idx[off + i] = t * inner + i;
        }
    }
    return mp_gmap_end(&f, err);
}

int shape_TensorScatter(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *cache = mp_in(g, n, 0), *upd = mp_in(g, n, 1);
    if (!cache || !upd) return mp_fail(err, "needs inputs 'past_cache' and 'update'");
    const char *mode = mp_attr_str(n, "mode", "linear");
    if (strcmp(mode, "linear") && strcmp(mode, "circular")) return mp_fail(err, "unknown mode '%s'", mode);
    if (same_rank(cache, upd, "past_cache", "update", err)) return -1;
    if (cache->rank >= 0) {
        int64_t axis;
        if (mp_norm_axis(mp_attr_int(n, "axis", -2), cache->rank, false, &axis, err)) return -1;
        if (axis == 0) return mp_fail(err, "axis cannot be the batch axis 0");
    }
    return mp_set_out_like(g, n, 0, cache->dtype, cache);
}

/* ---- TopK ---------------------------------------------------------------- */

int shape_TopK(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'X'");
    mp_dim k = MP_DIM_UNKNOWN;
    const mp_attr *ka = mp_node_attr(n, "k"); /* TopK-1 */
    mp_value *kv = mp_in(g, n, 1);
    if (ka) {
        k = mp_dim_of(ka->i);
    } else if (kv) {
        if (kv->rank > 1 || (kv->rank == 1 && kv->dims[0].v >= 0 && kv->dims[0].v != 1))
            return mp_fail(err, "K must hold one value");
        mp_const_dims(g, kv, &k, 1);
    } else {
        return mp_fail(err, "missing K");
    }
    if (k.sym < 0 && k.v < -1) return mp_fail(err, "K is %lld; it cannot be negative", (long long)k.v);
    if (x->rank < 0) {
        mp_set_out(g, n, 0, x->dtype, -1, NULL);
        return mp_set_out(g, n, 1, MP_INT64, -1, NULL);
    }
    if (x->rank == 0) return mp_fail(err, "X must have rank >= 1");
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", -1), x->rank, false, &axis, err)) return -1;
    mp_dim d[MP_MAX_RANK];
    memcpy(d, x->dims, (size_t)x->rank * sizeof *d);
    if (k.v >= 0 && d[axis].v >= 0 && k.v > d[axis].v)
        return mp_fail(err, "K = %lld exceeds axis %lld of size %lld", (long long)k.v, (long long)axis,
                       (long long)d[axis].v);
    d[axis] = k;
    mp_set_out(g, n, 0, x->dtype, x->rank, d);
    return mp_set_out(g, n, 1, MP_INT64, x->rank, d);
}

/* ---- NonZero --------------------------------------------------------------- */

/* String element i ("" for a missing one). */
static const char *str_at(const mp_tensor *t, int64_t i)
{
    const char *s = ((const char *const *)t->data)[i];
    return s ? s : "";
}

static bool elem_nonzero(const mp_tensor *t, int64_t i)
{
    if (t->dtype == MP_STRING) return str_at(t, i)[0] != 0;
    return mp_dtype_is_float(t->dtype) ? mp_tensor_get_f64(t, i) != 0 : mp_tensor_get_i64(t, i) != 0;
}

int shape_NonZero(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'X'");
    mp_dim d[2] = {x->rank >= 0 ? mp_dim_of(x->rank) : MP_DIM_UNKNOWN, MP_DIM_UNKNOWN};
    const mp_tensor *t =
        x->konst && x->konst->data && (mp_dtype_readable(x->dtype) || x->dtype == MP_STRING) ? x->konst : NULL;
    if (!t || t->numel > MP_FOLD_MAX_ELEMS) return mp_set_out(g, n, 0, MP_INT64, 2, d);
    int64_t nnz = 0;
    for (int64_t i = 0; i < t->numel; i++) nnz += elem_nonzero(t, i);
    d[1] = mp_dim_of(nnz);
    mp_set_out(g, n, 0, MP_INT64, 2, d);
    /* row r holds coordinate r of each nonzero element, in row-major order */
    int64_t dims[2] = {t->rank, nnz}, c[MP_MAX_RANK] = {0}, j = 0;
    mp_tensor *y = mp_tensor_new(g->arena, MP_INT64, 2, dims);
    int64_t *yd = y->data;
    for (int64_t i = 0; i < t->numel; i++, next_index(c, t->dims, t->rank)) {
        if (!elem_nonzero(t, i)) continue;
        for (int r = 0; r < t->rank; r++) yd[r * nnz + j] = c[r];
        j++;
    }
    return mp_set_out_const(g, n, 0, y);
}

/* ---- Unique ----------------------------------------------------------------- */

/* Slices of x along an axis (or its elements when flat), compared element by
 * element in row-major order of the other axes, as numpy.unique does. */
typedef struct slices {
    const mp_tensor *t;
    int64_t outer, len, inner; /* x viewed as [outer, len, inner]; slices index len */
} slices;

static int elem_cmp(const mp_tensor *t, int64_t a, int64_t b)
{
    if (t->dtype == MP_STRING) return strcmp(str_at(t, a), str_at(t, b));
    if (mp_dtype_is_float(t->dtype)) {
        double x = mp_tensor_get_f64(t, a), y = mp_tensor_get_f64(t, b);
        return x < y ? -1 : x > y;
    }
    if (t->dtype == MP_UINT64) {
        uint64_t x = ((const uint64_t *)t->data)[a], y = ((const uint64_t *)t->data)[b];
        return x < y ? -1 : x > y;
    }
    int64_t x = mp_tensor_get_i64(t, a), y = mp_tensor_get_i64(t, b);
    return x < y ? -1 : x > y;
}

static int slice_cmp(const slices *s, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t i = 0; i < s->inner; i++) {
            int64_t base = o * s->len * s->inner + i;
            int c = elem_cmp(s->t, base + a * s->inner, base + b * s->inner);
            if (c) return c;
        }
    return 0;
}

/* Stable merge sort of idx[0..n) by key: slice order, or by the first
 * occurrence in first[] when first != NULL. */
static void sort_idx(const slices *s, const int64_t *first, int64_t *idx, int64_t *tmp, int64_t n)
{
    if (n < 2) return;
    int64_t h = n / 2;
    sort_idx(s, first, idx, tmp, h);
    sort_idx(s, first, idx + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c = first ? (first[idx[j]] < first[idx[i]] ? -1 : 1) : slice_cmp(s, idx[j], idx[i]);
        tmp[k++] = c < 0 ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* Computes the unique slices of a known x: fills outputs 0..3 when small. */
static int unique_fold(mp_graph *g, mp_node *n, mp_value *x, int64_t axis, mp_err *err)
{
    slices s = {x->konst, 1, x->konst->numel, 1};
    if (axis >= 0) {
        s.len = x->konst->dims[axis];
        s.outer = prod(x->konst->dims, (int)axis);
        s.inner = prod(x->konst->dims + axis + 1, x->rank - (int)axis - 1);
    }
    int64_t m = s.len, nu = 0, cap = m ? m : 1;
    int64_t *order = malloc((size_t)cap * sizeof *order), *tmp = malloc((size_t)cap * sizeof *tmp);
    int64_t *group = malloc((size_t)cap * sizeof *group), *first = malloc((size_t)cap * sizeof *first);
    int64_t *count = malloc((size_t)cap * sizeof *count), *rank = malloc((size_t)cap * sizeof *rank);
    int rc = 0;
    if (!order || !tmp || !group || !first || !count || !rank) {
        rc = mp_fail(err, "out of memory");
        goto out;
    }
    /* pass 1: sort slice ids (stably), then group equal neighbours */
    for (int64_t j = 0; j < m; j++) order[j] = j;
    sort_idx(&s, NULL, order, tmp, m);
    for (int64_t j = 0; j < m; j++) {
        if (j == 0 || slice_cmp(&s, order[j - 1], order[j])) {
            first[nu] = order[j]; /* stable: the earliest of its group */
            count[nu++] = 0;
        }
        group[order[j]] = nu - 1;
        count[nu - 1]++;
    }
    /* pass 2: output position of each group: sorted, or by first occurrence */
    for (int64_t u = 0; u < nu; u++) order[u] = u;
    if (!mp_attr_int(n, "sorted", 1)) sort_idx(&s, first, order, tmp, nu);
    for (int64_t u = 0; u < nu; u++) rank[order[u]] = u;
    /* pass 3: shapes, then contents */
    mp_dim d[MP_MAX_RANK], du = mp_dim_of(nu);
    memcpy(d, x->dims, (size_t)(x->rank > 0 ? x->rank : 1) * sizeof *d);
    if (axis >= 0) d[axis] = du;
    mp_set_out(g, n, 0, x->dtype, axis >= 0 ? x->rank : 1, axis >= 0 ? d : &du);
    int64_t lens[3] = {nu, m, nu};
    for (int o = 1; o < 4; o++) {
        mp_tensor *t = mp_tensor_new(g->arena, MP_INT64, 1, &lens[o - 1]);
        int64_t *td = t->data;
        for (int64_t j = 0; j < lens[o - 1]; j++)
            td[j] = o == 1 ? first[order[j]] : o == 2 ? rank[group[j]] : count[order[j]];
        mp_set_out_const(g, n, o, t);
    }
    mp_gmap f;
    if (mp_gmap_begin(&f, g, n, 0, 1, &x)) {
        int64_t e = 0;
        for (int64_t o = 0; o < s.outer; o++)
            for (int64_t u = 0; u < nu; u++)
                for (int64_t i = 0; i < s.inner; i++, e++) {
                    f.src[e] = 0;
                    f.idx[e] = (o * s.len + first[order[u]]) * s.inner + i;
                }
        rc = mp_gmap_end(&f, err);
    }
out:
    free(order);
    free(tmp);
    free(group);
    free(first);
    free(count);
    free(rank);
    return rc;
}

int shape_Unique(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'X'");
    const mp_attr *aa = mp_node_attr(n, "axis");
    int64_t axis = -1;
    if (aa && x->rank >= 0 && mp_norm_axis(aa->i, x->rank, false, &axis, err)) return -1;
    if (x->konst && x->konst->data && x->konst->numel <= MP_FOLD_MAX_ELEMS &&
        (mp_dtype_readable(x->dtype) || x->dtype == MP_STRING))
        return unique_fold(g, n, x, axis, err);
    /* unknown count of unique slices; inverse_indices has one entry per slice */
    mp_dim d[MP_MAX_RANK], u = MP_DIM_UNKNOWN, inv = MP_DIM_UNKNOWN;
    int r = aa ? x->rank : 1;
    if (x->rank >= 0) {
        memcpy(d, x->dims, (size_t)x->rank * sizeof *d);
        if (axis >= 0) {
            inv = d[axis];
            d[axis] = u;
        } else if (mp_dims_product(x->dims, x->rank, &inv, err)) {
            return -1;
        }
    }
    if (!aa) d[0] = u;
    mp_set_out(g, n, 0, x->dtype, r, d);
    mp_set_out(g, n, 1, MP_INT64, 1, &u);
    mp_set_out(g, n, 2, MP_INT64, 1, &inv);
    return mp_set_out(g, n, 3, MP_INT64, 1, &u);
}

/* ---- OneHot, Trilu, EyeLike --------------------------------------------- */

int shape_OneHot(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *ind = mp_in(g, n, 0), *depth = mp_in(g, n, 1), *vals = mp_in(g, n, 2);
    if (!ind || !depth || !vals) return mp_fail(err, "needs inputs 'indices', 'depth' and 'values'");
    if (vals->rank >= 0 && !(vals->rank == 1 && (vals->dims[0].v < 0 || vals->dims[0].v == 2)))
        return mp_fail(err, "values must be a 1-D tensor of [off_value, on_value]");
    mp_dim dd = MP_DIM_UNKNOWN;
    double dv;
    if (mp_const_reals(depth, &dv, 1) == 1) {
        if (!(dv >= 1 && dv < 9.2e18)) return mp_fail(err, "depth is %g; it must be positive", dv);
        dd = mp_dim_of((int64_t)dv);
    } else if (depth->dtype == MP_INT64) {
        mp_const_dims(g, depth, &dd, 1); /* a symbolic depth, e.g. from Shape */
    }
    if (ind->rank < 0) return mp_set_out(g, n, 0, vals->dtype, -1, NULL);
    int r = ind->rank + 1;
    if (r > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", r, MP_MAX_RANK);
    int64_t axis;
    if (mp_norm_axis(mp_attr_int(n, "axis", -1), r, false, &axis, err)) return -1;
    mp_dim d[MP_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) d[i] = i == axis ? dd : ind->dims[k++];
    return mp_set_out(g, n, 0, vals->dtype, r, d);
}

int shape_Trilu(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *k = mp_in(g, n, 1);
    if (!x) return mp_fail(err, "missing input 'input'");
    if (x->rank >= 0 && x->rank < 2) return mp_fail(err, "input must have rank >= 2, not %d", x->rank);
    if (k && k->rank > 0 && !(k->rank == 1 && k->dims[0].v == 1)) return mp_fail(err, "k must be a scalar");
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

int shape_EyeLike(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'input'");
    if (x->rank >= 0 && x->rank != 2) return mp_fail(err, "input must be 2-D, not rank %d", x->rank);
    mp_dtype t;
    if (mp_attr_dtype(n, "dtype", x->dtype, &t, err)) return -1;
    mp_set_out_like(g, n, 0, t, x);
    /* the contents follow from the shape alone */
    mp_value *y = mp_out(g, n, 0);
    int64_t dims[2], k = mp_attr_int(n, "k", 0);
    if (!y || mp_foldable_numel(y) < 0 || !mp_dtype_readable(t) || !mp_known_dims(y, dims)) return 0;
    mp_tensor *e = mp_tensor_new(g->arena, t, 2, dims);
    for (int64_t i = 0; i < dims[0]; i++)
        if (k > -dims[1] && k < dims[1] && i + k >= 0 && i + k < dims[1]) mp_tensor_set_f64(e, i * dims[1] + i + k, 1);
    return mp_set_out_const(g, n, 0, e);
}
