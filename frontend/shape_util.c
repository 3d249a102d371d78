/* shape_util.c - helpers shared by the shape rules. */
#include <string.h>

#include "shape.h"

mp_value *mp_in(mp_graph *g, const mp_node *n, int i) { return i < n->nin ? mp_val(g, n->in[i]) : NULL; }
mp_value *mp_out(mp_graph *g, const mp_node *n, int i) { return i < n->nout ? mp_val(g, n->out[i]) : NULL; }

int mp_set_out(mp_graph *g, const mp_node *n, int i, mp_dtype t, int rank, const mp_dim *dims)
{
    if (i >= n->nout || n->out[i] < 0) return 0;
    mp_value_set(g, n->out[i], t, rank, dims);
    return 0;
}

int mp_set_out_like(mp_graph *g, const mp_node *n, int i, mp_dtype t, const mp_value *like)
{
    return mp_set_out(g, n, i, t, like ? like->rank : -1, like ? like->dims : NULL);
}

int mp_broadcast(const mp_graph *g, int nv, const mp_value *const *vs, int *rank, mp_dim *dims, mp_err *err)
{
    char a[32], b[32];
    int r = 0;
    for (int k = 0; k < nv; k++) {
        if (!vs[k]) continue;
        if (vs[k]->rank < 0) {
            *rank = -1;
            return 0;
        }
        if (vs[k]->rank > r) r = vs[k]->rank;
    }
    if (r > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", r, MP_MAX_RANK);
    for (int i = 0; i < r; i++) dims[i] = mp_dim_of(1);
    for (int k = 0; k < nv; k++) {
        const mp_value *v = vs[k];
        if (!v) continue;
        for (int i = 0; i < v->rank; i++) {
            mp_dim *o = &dims[r - v->rank + i];
            mp_dim d = v->dims[i];
            if (d.v == 1) continue;
            if (o->v == 1) {
                *o = d;
            } else if (mp_dim_same(*o, d)) {
                continue;
            } else if (o->v >= 0 && d.v >= 0) {
                return mp_fail(err, "cannot broadcast dims %s and %s (axis %d from the end)", mp_dim_str(g, *o, a),
                               mp_dim_str(g, d, b), v->rank - i);
            } else if (o->v < 0 && d.v >= 0) {
                *o = d; /* an unknown dim that broadcasts against n must be n (or 1) */
            } else if (o->v >= 0) {
                continue;
            } else {
                *o = MP_DIM_UNKNOWN;
            }
        }
    }
    *rank = r;
    return 0;
}

int mp_norm_axis(int64_t axis, int rank, bool allow_end, int64_t *out, mp_err *err)
{
    int64_t lim = rank + (allow_end ? 1 : 0);
    int64_t a = axis < 0 ? axis + lim : axis;
    if (a < 0 || a >= lim) return mp_fail(err, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = a;
    return 0;
}

int mp_const_ints(const mp_value *v, int64_t *out, int max)
{
    if (!v || !v->konst || v->konst->rank > 1 || v->konst->numel > max) return -1;
    if (!mp_dtype_is_int(v->konst->dtype) && v->konst->dtype != MP_BOOL) return -1;
    for (int64_t i = 0; i < v->konst->numel; i++) out[i] = mp_tensor_get_i64(v->konst, i);
    return (int)v->konst->numel;
}

int mp_const_dims(const mp_graph *g, const mp_value *v, mp_dim *out, int max)
{
    if (!v) return -1;
    if (v->konst) {
        int64_t tmp[MP_MAX_RANK];
        int k = mp_const_ints(v, tmp, max < MP_MAX_RANK ? max : MP_MAX_RANK);
        for (int i = 0; i < k; i++) out[i] = tmp[i] >= 0 ? mp_dim_of(tmp[i]) : (mp_dim){tmp[i], MP_SYM_LITERAL};
        return k;
    }
    if (v->symdata && v->nsymdata <= max) {
        for (int i = 0; i < v->nsymdata; i++) out[i] = mp_dim_resolve(g, v->symdata[i]);
        return v->nsymdata;
    }
    return -1;
}

int mp_set_out_const(mp_graph *g, const mp_node *n, int i, mp_tensor *t)
{
    if (i >= n->nout || n->out[i] < 0) return 0;
    mp_dim dims[MP_MAX_RANK];
    if (t->rank > MP_MAX_RANK) return mp_fail(NULL, "rank");
    for (int k = 0; k < t->rank; k++) dims[k] = mp_dim_of(t->dims[k]);
    mp_value_set(g, n->out[i], t->dtype, t->rank, dims);
    mp_value *v = mp_val(g, n->out[i]);
    v->konst = t;
    v->symdata = NULL;
    v->nsymdata = 0;
    return 0;
}

int mp_set_out_dims(mp_graph *g, const mp_node *n, int i, const mp_dim *d, int count, bool scalar)
{
    if (i >= n->nout || n->out[i] < 0) return 0;
    bool known = true;
    for (int k = 0; k < count; k++) known = known && (mp_dim_resolve(g, d[k]).v >= 0 || d[k].sym == MP_SYM_LITERAL);
    if (known) {
        int64_t len = count;
        mp_tensor *t = mp_tensor_new(g->arena, MP_INT64, scalar ? 0 : 1, &len);
        for (int k = 0; k < count; k++) ((int64_t *)t->data)[k] = mp_dim_resolve(g, d[k]).v;
        return mp_set_out_const(g, n, i, t);
    }
    mp_dim shape = mp_dim_of(count);
    mp_value_set(g, n->out[i], MP_INT64, scalar ? 0 : 1, &shape);
    mp_value *v = mp_val(g, n->out[i]);
    v->konst = NULL;
    v->symdata = mp_arena_dup(g->arena, d, (size_t)(count ? count : 1) * sizeof *d);
    v->nsymdata = count;
    return 0;
}

int mp_dims_product(const mp_dim *d, int n, mp_dim *out, mp_err *err)
{
    int64_t p = 1;
    bool known = true;
    for (int i = 0; i < n; i++) {
        if (d[i].v == 0) {
            *out = mp_dim_of(0);
            return 0;
        }
        if (d[i].v < 0) {
            known = false;
            continue;
        }
        if (!mp_mul_ok(p, d[i].v, &p)) return mp_fail(err, "dimension product overflows int64");
    }
    if (!known) {
        /* one symbol times 1 is still that symbol */
        int nsym = 0, last = -1;
        for (int i = 0; i < n; i++)
            if (d[i].v < 0) {
                nsym++;
                last = i;
            }
        *out = (nsym == 1 && p == 1) ? d[last] : MP_DIM_UNKNOWN;
        return 0;
    }
    *out = mp_dim_of(p);
    return 0;
}

int64_t mp_foldable_numel(const mp_value *v)
{
    int64_t n = v ? mp_value_numel(v) : -1;
    return n >= 0 && n <= MP_FOLD_MAX_ELEMS ? n : -1;
}
