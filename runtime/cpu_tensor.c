/* cpu_tensor.c - data movement: copies and views (Reshape, Transpose, Slice,
 * Concat, Split, Expand, Tile, Pad), indexing (Gather*, Scatter*, OneHot,
 * Compress), and generators (Constant, ConstantOfShape, Range, Shape, Size,
 * EyeLike, Trilu).
 *
 * These kernels move elements by size, so they serve every fixed-size dtype.
 * Output dims come from shape inference; each kernel checks that they agree
 * with what it computes before writing.
 */
#include <string.h>

#include "kernels.h"

#define ES(t) ((int64_t)mp_elem_size((t)->dtype))

/* Checks x and y exist, y has x's dtype and elements are fixed-size. */
static int check_xy(const mp_tensor *x, const mp_tensor *y, mp_err *err)
{
    if (!x || !y) return mp_fail(err, "missing input or output");
    if (x->dtype != y->dtype) return mp_fail(err, "output dtype %s differs from input %s", mp_dtype_name(y->dtype), mp_dtype_name(x->dtype));
    if (!mp_elem_size(x->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    return 0;
}

static int64_t norm_index(int64_t i, int64_t d) { return i < 0 ? i + d : i; }

/* ---- copies ------------------------------------------------------------------ */

static int copy_op(const mp_kargs *k, mp_err *err)
{
    int rc = check_xy(mp_kin(k, 0), mp_kout(k, 0), err);
    return rc ? rc : mp_copy_tensor(k->in[0], k->out[0], err);
}

int mp_cpu_Identity(const mp_kargs *k, mp_err *err) { return copy_op(k, err); }
int mp_cpu_Reshape(const mp_kargs *k, mp_err *err) { return copy_op(k, err); }
int mp_cpu_Flatten(const mp_kargs *k, mp_err *err) { return copy_op(k, err); }
int mp_cpu_Squeeze(const mp_kargs *k, mp_err *err) { return copy_op(k, err); }
int mp_cpu_Unsqueeze(const mp_kargs *k, mp_err *err) { return copy_op(k, err); }

int mp_cpu_Transpose(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int64_t perm[MP_MAX_RANK], xs[MP_MAX_RANK], ys[MP_MAX_RANK], src[MP_MAX_RANK];
    const int64_t *p;
    int n = mp_attr_ints(k->node, "perm", &p);
    if (n >= 0 && n != x->rank) return mp_fail(err, "perm has %d entries for rank %d", n, x->rank);
    if (y->rank != x->rank) return mp_fail(err, "output rank %d differs from input %d", y->rank, x->rank);
    bool seen[MP_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        perm[i] = n >= 0 ? norm_index(p[i], x->rank) : x->rank - 1 - i;
        if (perm[i] < 0 || perm[i] >= x->rank || seen[perm[i]]) return mp_fail(err, "perm is not a permutation");
        seen[perm[i]] = true;
    }
    mp_strides(x->rank, x->dims, xs);
    mp_strides(y->rank, y->dims, ys);
    for (int i = 0; i < x->rank; i++) {
        if (y->dims[i] != x->dims[perm[i]]) return mp_fail(err, "output dim %d disagrees with perm", i);
        src[i] = xs[perm[i]];
    }
    mp_copy_strided(y->data, ys, x->data, src, y->rank, y->dims, (size_t)ES(x));
    return 0;
}

int mp_cpu_Concat(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y || k->nin < 1) return mp_fail(err, "missing input or output");
    int64_t axis = mp_attr_int(k->node, "axis", 0);
    axis = norm_index(axis, y->rank);
    if (axis < 0 || axis >= y->rank) return mp_fail(err, "axis out of range for rank %d", y->rank);
    int64_t ys[MP_MAX_RANK], xs[MP_MAX_RANK], at = 0;
    mp_strides(y->rank, y->dims, ys);
    for (int i = 0; i < k->nin; i++) {
        const mp_tensor *x = k->in[i];
        int rc = check_xy(x, y, err);
        if (rc) return rc;
        if (x->rank != y->rank) return mp_fail(err, "input %d has rank %d, output %d", i, x->rank, y->rank);
        for (int d = 0; d < y->rank; d++)
            if (d != axis && x->dims[d] != y->dims[d]) return mp_fail(err, "input %d dim %d differs from the output's", i, d);
        if (at + x->dims[axis] > y->dims[axis]) return mp_fail(err, "inputs are longer than the output along the axis");
        mp_strides(x->rank, x->dims, xs);
        mp_copy_strided((char *)y->data + at * ys[axis] * ES(y), ys, x->data, xs, x->rank, x->dims, (size_t)ES(y));
        at += x->dims[axis];
    }
    if (at != y->dims[axis]) return mp_fail(err, "inputs are shorter than the output along the axis");
    return 0;
}

int mp_cpu_Split(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    if (!x) return mp_fail(err, "missing input");
    int64_t axis = norm_index(mp_attr_int(k->node, "axis", 0), x->rank);
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    int64_t xs[MP_MAX_RANK], ys[MP_MAX_RANK], at = 0;
    mp_strides(x->rank, x->dims, xs);
    for (int i = 0; i < k->nout; i++) {
        mp_tensor *y = k->out[i];
        if (!y) continue;
        int rc = check_xy(x, y, err);
        if (rc) return rc;
        if (y->rank != x->rank) return mp_fail(err, "output %d has rank %d, input %d", i, y->rank, x->rank);
        for (int d = 0; d < x->rank; d++)
            if (d != axis && x->dims[d] != y->dims[d]) return mp_fail(err, "output %d dim %d differs from the input's", i, d);
        if (at + y->dims[axis] > x->dims[axis]) return mp_fail(err, "outputs are longer than the input along the axis");
        mp_strides(y->rank, y->dims, ys);
        mp_copy_strided(y->data, ys, (const char *)x->data + at * xs[axis] * ES(x), xs, y->rank, y->dims, (size_t)ES(x));
        at += y->dims[axis];
    }
    return 0;
}

int mp_cpu_Slice(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int r = x->rank;
    if (y->rank != r) return mp_fail(err, "output rank %d differs from input %d", y->rank, r);
    int64_t starts[MP_MAX_RANK], ends[MP_MAX_RANK], axes[MP_MAX_RANK], steps[MP_MAX_RANK];
    int ns, ne, na, nst;
    if (k->opset < 10) {
        const int64_t *a;
        ns = mp_attr_ints(k->node, "starts", &a);
        if (ns > MP_MAX_RANK) return mp_fail(err, "too many starts");
        if (ns > 0) memcpy(starts, a, (size_t)ns * 8);
        ne = mp_attr_ints(k->node, "ends", &a);
        if (ne > MP_MAX_RANK) return mp_fail(err, "too many ends");
        if (ne > 0) memcpy(ends, a, (size_t)ne * 8);
        na = mp_attr_ints(k->node, "axes", &a);
        if (na > MP_MAX_RANK) return mp_fail(err, "too many axes");
        if (na > 0) memcpy(axes, a, (size_t)na * 8);
        nst = -1;
    } else {
        if ((ns = mp_read_ints(mp_kin(k, 1), starts, MP_MAX_RANK, "starts", err)) < 0) return -1;
        if ((ne = mp_read_ints(mp_kin(k, 2), ends, MP_MAX_RANK, "ends", err)) < 0) return -1;
        na = mp_kin(k, 3) ? mp_read_ints(k->in[3], axes, MP_MAX_RANK, "axes", err) : -1;
        if (mp_kin(k, 3) && na < 0) return -1;
        nst = mp_kin(k, 4) ? mp_read_ints(k->in[4], steps, MP_MAX_RANK, "steps", err) : -1;
        if (mp_kin(k, 4) && nst < 0) return -1;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) return mp_fail(err, "starts, ends, axes and steps differ in length");
    int64_t beg[MP_MAX_RANK], step[MP_MAX_RANK];
    for (int i = 0; i < r; i++) beg[i] = 0, step[i] = 1;
    bool seen[MP_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int64_t a = na >= 0 ? norm_index(axes[i], r) : i;
        if (a < 0 || a >= r || seen[a]) return mp_fail(err, "bad or repeated axis %lld", (long long)(na >= 0 ? axes[i] : i));
        seen[a] = true;
        int64_t d = x->dims[a], st = nst >= 0 ? steps[i] : 1, s = starts[i], e = ends[i];
        if (st == 0) return mp_fail(err, "step 0 on axis %lld", (long long)a);
        if (s < 0) s += d;
        if (e < 0) e += d;
        if (st > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
        } else {
            s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        }
        int64_t cnt = st > 0 ? (e > s ? (e - s + st - 1) / st : 0) : (s > e ? (s - e + (-st) - 1) / (-st) : 0);
        if (cnt != y->dims[a]) return mp_fail(err, "axis %lld: slice has %lld elements, output dim is %lld", (long long)a, (long long)cnt, (long long)y->dims[a]);
        beg[a] = cnt ? s : 0;
        step[a] = st;
    }
    for (int i = 0; i < r; i++)
        if (!seen[i] && y->dims[i] != x->dims[i]) return mp_fail(err, "unsliced axis %d changed size", i);
    int64_t xs[MP_MAX_RANK], ys[MP_MAX_RANK], src[MP_MAX_RANK], off = 0;
    mp_strides(r, x->dims, xs);
    mp_strides(r, y->dims, ys);
    for (int i = 0; i < r; i++) {
        off += beg[i] * xs[i];
        src[i] = step[i] * xs[i];
    }
    if (y->numel) mp_copy_strided(y->data, ys, (const char *)x->data + off * ES(x), src, r, y->dims, (size_t)ES(x));
    return 0;
}

/* Source strides broadcasting x into y's dims (0 where x is 1 or missing). */
static int bcast_strides(const mp_tensor *x, const mp_tensor *y, int64_t *str, mp_err *err)
{
    int64_t xs[MP_MAX_RANK];
    if (x->rank > y->rank) return mp_fail(err, "input rank %d exceeds the output's %d", x->rank, y->rank);
    mp_strides(x->rank, x->dims, xs);
    for (int i = 0; i < y->rank; i++) {
        int j = i - (y->rank - x->rank);
        int64_t d = j >= 0 ? x->dims[j] : 1;
        if (d != 1 && d != y->dims[i]) return mp_fail(err, "input dim %lld does not broadcast to %lld", (long long)d, (long long)y->dims[i]);
        str[i] = d == 1 ? 0 : xs[j];
    }
    return 0;
}

int mp_cpu_Expand(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int64_t src[MP_MAX_RANK], ys[MP_MAX_RANK];
    if (bcast_strides(x, y, src, err)) return -1;
    mp_strides(y->rank, y->dims, ys);
    mp_copy_strided(y->data, ys, x->data, src, y->rank, y->dims, (size_t)ES(x));
    return 0;
}

int mp_cpu_Tile(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int r = x->rank;
    if (y->rank != r) return mp_fail(err, "output rank differs from input");
    if (2 * r > MP_MAX_RANK) return mp_kunsupported(err, "rank %d", r);
    /* y viewed as (rep0, d0, rep1, d1, ...) reading x with strides (0, s0, 0, s1, ...). */
    int64_t xs[MP_MAX_RANK], ys[MP_MAX_RANK], dims[MP_MAX_RANK], dstr[MP_MAX_RANK], sstr[MP_MAX_RANK];
    mp_strides(r, x->dims, xs);
    mp_strides(r, y->dims, ys);
    for (int i = 0; i < r; i++) {
        if (x->dims[i] == 0 ? y->dims[i] != 0 : y->dims[i] % x->dims[i])
            return mp_fail(err, "output dim %d is not a multiple of the input's", i);
        dims[2 * i] = x->dims[i] ? y->dims[i] / x->dims[i] : 0;
        dims[2 * i + 1] = x->dims[i];
        dstr[2 * i] = x->dims[i] * ys[i];
        dstr[2 * i + 1] = ys[i];
        sstr[2 * i] = 0;
        sstr[2 * i + 1] = xs[i];
    }
    mp_copy_strided(y->data, dstr, x->data, sstr, 2 * r, dims, (size_t)ES(x));
    return 0;
}

/* One element of dtype t holding v (bytes in out[8]). */
static void scalar_bytes(mp_dtype t, double v, unsigned char out[8])
{
    int64_t d1 = 1;
    mp_tensor s = {t, 0, &d1, 1, out};
    memset(out, 0, 8);
    mp_tensor_set_f64(&s, 0, v);
}

static void fill(mp_tensor *y, const void *elem)
{
    size_t es = mp_elem_size(y->dtype);
    for (int64_t i = 0; i < y->numel; i++) memcpy((char *)y->data + i * (int64_t)es, elem, es);
}

int mp_cpu_Pad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int r = x->rank;
    if (y->rank != r) return mp_fail(err, "output rank differs from input");
    int64_t pads[2 * MP_MAX_RANK] = {0}, raw[2 * MP_MAX_RANK], axes[MP_MAX_RANK];
    unsigned char value[8] = {0};
    const char *mode = mp_attr_str(k->node, "mode", "constant");
    int np, na = -1;
    if (k->opset < 11) {
        const int64_t *p;
        np = mp_attr_ints(k->node, k->opset < 2 ? "paddings" : "pads", &p);
        if (np < 0 || np > 2 * MP_MAX_RANK) return mp_fail(err, "bad pads attribute");
        memcpy(raw, p, (size_t)np * 8);
        scalar_bytes(x->dtype, mp_attr_float(k->node, "value", 0.0f), value);
    } else {
        if ((np = mp_read_ints(mp_kin(k, 1), raw, 2 * MP_MAX_RANK, "pads", err)) < 0) return -1;
        const mp_tensor *cv = mp_kin(k, 2);
        if (cv && cv->numel > 0) {
            if (cv->dtype != x->dtype) return mp_fail(err, "constant_value dtype differs from data");
            memcpy(value, cv->data, (size_t)ES(x));
        }
        if (mp_kin(k, 3) && (na = mp_read_axes(k, "axes", 3, 18, r, axes, err)) < 0) return -1;
    }
    int n_ax = na >= 0 ? na : r;
    if (np != 2 * n_ax) return mp_fail(err, "pads has %d entries for %d axes", np, n_ax);
    for (int i = 0; i < n_ax; i++) {
        int64_t a = na >= 0 ? axes[i] : i;
        pads[a] = raw[i];
        pads[r + a] = raw[n_ax + i];
    }
    for (int i = 0; i < r; i++)
        if (y->dims[i] != x->dims[i] + pads[i] + pads[r + i]) return mp_fail(err, "output dim %d disagrees with pads", i);
    int64_t *map, base[MP_MAX_RANK];
    if (mp_pad_index_map(k, mode, r, x->dims, y->dims, pads, &map, base, err)) return -1;
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(r, x->dims, xs);
    size_t es = (size_t)ES(x);
    for (int64_t o = 0; o < y->numel; o++) {
        int64_t src = 0;
        for (int i = 0; i < r && src >= 0; i++) {
            int64_t j = map[base[i] + idx[i]];
            src = j < 0 ? -1 : src + j * xs[i];
        }
        memcpy((char *)y->data + o * (int64_t)es, src < 0 ? (const void *)value : (const char *)x->data + src * (int64_t)es, es);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < y->dims[i]) break;
            idx[i] = 0;
        }
    }
    return 0;
}

/* ---- indexing ------------------------------------------------------------------ */

/* Reads index i of an int32/int64 tensor, normalized into [0, d); -1 if out of range. */
static int64_t index_at(const mp_tensor *t, int64_t i, int64_t d)
{
    int64_t v = t->dtype == MP_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
    if (v < 0) v += d;
    return v < 0 || v >= d ? -1 : v;
}

static int check_indices(const mp_tensor *t, mp_err *err)
{
    if (!t) return mp_fail(err, "missing indices");
    if (t->dtype != MP_INT32 && t->dtype != MP_INT64) return mp_fail(err, "indices must be int32 or int64, got %s", mp_dtype_name(t->dtype));
    return 0;
}

int mp_cpu_Gather(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc || check_indices(ix, err)) return rc ? rc : -1;
    int64_t axis = norm_index(mp_attr_int(k->node, "axis", 0), x->rank);
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    if (y->rank != x->rank - 1 + ix->rank) return mp_fail(err, "output rank disagrees with data and indices");
    int64_t outer = 1, inner = 1, d = x->dims[axis];
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    if (y->numel != outer * ix->numel * inner) return mp_fail(err, "output size disagrees with data and indices");
    size_t blk = (size_t)(inner * ES(x));
    char *out = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ix->numel; j++) {
            int64_t v = index_at(ix, j, d);
            if (v < 0) return mp_fail(err, "index %lld is out of range for dim %lld", (long long)mp_tensor_get_i64(ix, j), (long long)d);
            memcpy(out, (const char *)x->data + (o * d + v) * (int64_t)blk, blk);
            out += blk;
        }
    return 0;
}

int mp_cpu_GatherElements(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc || check_indices(ix, err)) return rc ? rc : -1;
    int r = x->rank;
    int64_t axis = norm_index(mp_attr_int(k->node, "axis", 0), r);
    if (axis < 0 || axis >= r || ix->rank != r || !mp_same_shape(ix, y)) return mp_fail(err, "bad axis or index shape");
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(r, x->dims, xs);
    for (int i = 0; i < r; i++)
        if (i != axis && ix->dims[i] > x->dims[i]) return mp_fail(err, "indices dim %d exceeds data's", i);
    size_t es = (size_t)ES(x);
    for (int64_t o = 0; o < y->numel; o++) {
        int64_t v = index_at(ix, o, x->dims[axis]), src = 0;
        if (v < 0) return mp_fail(err, "index %lld is out of range", (long long)mp_tensor_get_i64(ix, o));
        for (int i = 0; i < r; i++) src += (i == axis ? v : idx[i]) * xs[i];
        memcpy((char *)y->data + o * (int64_t)es, (const char *)x->data + src * (int64_t)es, es);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < ix->dims[i]) break;
            idx[i] = 0;
        }
    }
    return 0;
}

int mp_cpu_GatherND(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc || check_indices(ix, err)) return rc ? rc : -1;
    int64_t b = mp_attr_int(k->node, "batch_dims", 0);
    if (ix->rank < 1) return mp_fail(err, "indices must have rank >= 1");
    int64_t q = ix->dims[ix->rank - 1];
    if (b < 0 || b >= ix->rank || b + q > x->rank) return mp_fail(err, "bad batch_dims or index depth");
    int64_t batch = 1, per = 1, slice = 1, xs[MP_MAX_RANK];
    for (int i = 0; i < b; i++) batch *= x->dims[i];
    for (int i = (int)b; i < ix->rank - 1; i++) per *= ix->dims[i];
    for (int i = (int)(b + q); i < x->rank; i++) slice *= x->dims[i];
    if (y->numel != batch * per * slice) return mp_fail(err, "output size disagrees with data and indices");
    mp_strides(x->rank, x->dims, xs);
    int64_t bstride = b ? xs[b - 1] : x->numel;
    size_t blk = (size_t)(slice * ES(x));
    char *out = y->data;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t j = 0; j < per; j++) {
            int64_t src = bi * bstride, row = (bi * per + j) * q;
            for (int64_t t = 0; t < q; t++) {
                int64_t v = index_at(ix, row + t, x->dims[b + t]);
                if (v < 0) return mp_fail(err, "index out of range");
                src += v * xs[b + t];
            }
            memcpy(out, (const char *)x->data + src * ES(x), blk);
            out += blk;
        }
    return 0;
}

/* out = combine(out, upd) for the Scatter reductions. */
typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

static int read_reduction(const mp_kargs *k, reduction *r, mp_err *err)
{
    const char *s = mp_attr_str(k->node, "reduction", "none");
    static const char *names[] = {"none", "add", "mul", "max", "min"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *r = (reduction)i;
            return 0;
        }
    return mp_fail(err, "unknown reduction '%s'", s);
}

static void scatter_one(mp_tensor *y, int64_t dst, const mp_tensor *u, int64_t src, reduction r)
{
    size_t es = mp_elem_size(y->dtype);
    if (r == RED_NONE) {
        memcpy((char *)y->data + dst * (int64_t)es, (const char *)u->data + src * (int64_t)es, es);
        return;
    }
    if (mp_dtype_is_int(y->dtype)) {
        int64_t a = mp_tensor_get_i64(y, dst), b = mp_tensor_get_i64(u, src);
        int64_t v = r == RED_ADD ? (int64_t)((uint64_t)a + (uint64_t)b) : r == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                  : r == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
        mp_tensor_set_i64(y, dst, v);
    } else {
        double a = mp_tensor_get_f64(y, dst), b = mp_tensor_get_f64(u, src);
        double v = r == RED_ADD ? a + b : r == RED_MUL ? a * b : r == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
        mp_tensor_set_f64(y, dst, v);
    }
}

int mp_cpu_ScatterElements(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1), *u = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc || check_indices(ix, err)) return rc ? rc : -1;
    reduction red = RED_NONE;
    if (read_reduction(k, &red, err)) return -1;
    int r = x->rank;
    int64_t axis = norm_index(mp_attr_int(k->node, "axis", 0), r);
    if (!u || u->dtype != x->dtype || !mp_same_shape(u, ix) || ix->rank != r || axis < 0 || axis >= r)
        return mp_fail(err, "updates must match indices, with the data's rank");
    if (mp_copy_tensor(x, y, err)) return -1;
    int64_t xs[MP_MAX_RANK], idx[MP_MAX_RANK] = {0};
    mp_strides(r, x->dims, xs);
    for (int i = 0; i < r; i++)
        if (i != axis && ix->dims[i] > x->dims[i]) return mp_fail(err, "indices dim %d exceeds data's", i);
    for (int64_t o = 0; o < ix->numel; o++) {
        int64_t v = index_at(ix, o, x->dims[axis]), dst = 0;
        if (v < 0) return mp_fail(err, "index out of range");
        for (int i = 0; i < r; i++) dst += (i == axis ? v : idx[i]) * xs[i];
        scatter_one(y, dst, u, o, red);
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < ix->dims[i]) break;
            idx[i] = 0;
        }
    }
    return 0;
}

int mp_cpu_Scatter(const mp_kargs *k, mp_err *err) { return mp_cpu_ScatterElements(k, err); }

int mp_cpu_ScatterND(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *ix = mp_kin(k, 1), *u = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc || check_indices(ix, err)) return rc ? rc : -1;
    reduction red = RED_NONE;
    if (read_reduction(k, &red, err)) return -1;
    if (ix->rank < 1 || !u || u->dtype != x->dtype) return mp_fail(err, "bad indices or updates");
    int64_t q = ix->dims[ix->rank - 1], n = ix->numel / (q ? q : 1), slice = 1, xs[MP_MAX_RANK];
    if (q > x->rank) return mp_fail(err, "index depth %lld exceeds the data's rank", (long long)q);
    for (int i = (int)q; i < x->rank; i++) slice *= x->dims[i];
    if (u->numel != n * slice) return mp_fail(err, "updates size disagrees with indices");
    if (mp_copy_tensor(x, y, err)) return -1;
    mp_strides(x->rank, x->dims, xs);
    for (int64_t j = 0; j < n; j++) {
        int64_t dst = 0;
        for (int64_t t = 0; t < q; t++) {
            int64_t v = index_at(ix, j * q + t, x->dims[t]);
            if (v < 0) return mp_fail(err, "index out of range");
            dst += v * xs[t];
        }
        for (int64_t e = 0; e < slice; e++) scatter_one(y, dst + e, u, j * slice + e, red);
    }
    return 0;
}

int mp_cpu_OneHot(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *ix = mp_kin(k, 0), *depth = mp_kin(k, 1), *vals = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!ix || !depth || !vals || !y || vals->numel != 2 || vals->dtype != y->dtype) return mp_fail(err, "bad inputs");
    if (!mp_elem_size(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    int64_t d = (int64_t)mp_scalar_f64(depth);
    int64_t axis = norm_index(mp_attr_int(k->node, "axis", -1), y->rank);
    if (axis < 0 || axis >= y->rank || y->rank != ix->rank + 1 || y->dims[axis] != d) return mp_fail(err, "output shape disagrees with depth/axis");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= y->dims[i];
    for (int i = (int)axis + 1; i < y->rank; i++) inner *= y->dims[i];
    size_t es = (size_t)ES(y);
    const char *off = vals->data, *on = (const char *)vals->data + es;
    fill(y, off);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t v = mp_tensor_get_i64(ix, o * inner + i); /* truncates float indices, NaN reads 0 */
            if (v < 0) v += d;
            if (v >= 0 && v < d) memcpy((char *)y->data + ((o * d + v) * inner + i) * (int64_t)es, on, es);
        }
    return 0;
}

int mp_cpu_Compress(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *c = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    if (!c || c->dtype != MP_BOOL || c->rank != 1) return mp_fail(err, "condition must be a 1-D bool tensor");
    const mp_attr *a = mp_node_attr(k->node, "axis");
    int64_t outer = 1, d = x->numel, inner = 1;
    if (a) {
        int64_t axis = norm_index(a->i, x->rank);
        if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range");
        d = x->dims[axis];
        for (int i = 0; i < axis; i++) outer *= x->dims[i];
        for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    }
    const uint8_t *cs = c->data;
    int64_t n = c->numel < d ? c->numel : d, kept = 0;
    for (int64_t j = 0; j < n; j++) kept += cs[j] != 0;
    if (y->numel != outer * kept * inner) return mp_fail(err, "output size disagrees with the condition");
    size_t blk = (size_t)(inner * ES(x));
    char *out = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            if (cs[j]) {
                memcpy(out, (const char *)x->data + (o * d + j) * (int64_t)blk, blk);
                out += blk;
            }
    return 0;
}

/* DepthToSpace / SpaceToDepth: a 6-D transpose. */
static int block_transpose(const mp_kargs *k, bool to_space, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    int64_t b = mp_attr_int(k->node, "blocksize", 0);
    if (x->rank != 4 || y->rank != 4 || b <= 0) return mp_fail(err, "needs 4-D tensors and a positive blocksize");
    int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
    int64_t sd[6], ss[6], perm[6], od[6], src[6], os[6];
    if (to_space) {
        bool crd = !strcmp(mp_attr_str(k->node, "mode", "DCR"), "CRD");
        int64_t c2 = c / (b * b);
        if (c % (b * b) || y->dims[1] != c2 || y->dims[2] != h * b || y->dims[3] != w * b) return mp_fail(err, "output shape disagrees");
        int64_t dcr[6] = {n, b, b, c2, h, w}, crdd[6] = {n, c2, b, b, h, w};
        int64_t pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
        memcpy(sd, crd ? crdd : dcr, sizeof sd);
        memcpy(perm, crd ? pc : pd, sizeof perm);
    } else {
        if (h % b || w % b || y->dims[1] != c * b * b || y->dims[2] != h / b || y->dims[3] != w / b) return mp_fail(err, "output shape disagrees");
        int64_t d6[6] = {n, c, h / b, b, w / b, b}, p6[6] = {0, 3, 5, 1, 2, 4};
        memcpy(sd, d6, sizeof sd);
        memcpy(perm, p6, sizeof perm);
    }
    mp_strides(6, sd, ss);
    for (int i = 0; i < 6; i++) {
        od[i] = sd[perm[i]];
        src[i] = ss[perm[i]];
    }
    mp_strides(6, od, os);
    mp_copy_strided(y->data, os, x->data, src, 6, od, (size_t)ES(x));
    return 0;
}

int mp_cpu_DepthToSpace(const mp_kargs *k, mp_err *err) { return block_transpose(k, true, err); }
int mp_cpu_SpaceToDepth(const mp_kargs *k, mp_err *err) { return block_transpose(k, false, err); }

/* ---- generators ------------------------------------------------------------------ */

int mp_cpu_Shape(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || y->dtype != MP_INT64) return mp_fail(err, "needs an input and an int64 output");
    int64_t r = x->rank, s = mp_attr_int(k->node, "start", 0), e = mp_attr_int(k->node, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    if (y->numel != (e > s ? e - s : 0)) return mp_fail(err, "output length disagrees with start/end");
    for (int64_t i = s; i < e; i++) ((int64_t *)y->data)[i - s] = x->dims[i];
    return 0;
}

int mp_cpu_Size(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!mp_kin(k, 0) || !y || y->dtype != MP_INT64 || y->numel != 1) return mp_fail(err, "needs an input and an int64 scalar output");
    *(int64_t *)y->data = k->in[0]->numel;
    return 0;
}

/* Copies tensor t into y, converting when the dtypes differ. */
static int from_tensor(const mp_tensor *t, mp_tensor *y, mp_err *err)
{
    if (!t->data) return mp_fail(err, "attribute tensor has no data");
    if (t->numel != y->numel) return mp_fail(err, "attribute tensor has %lld elements, output %lld", (long long)t->numel, (long long)y->numel);
    if (t->dtype != y->dtype) return mp_fail(err, "attribute tensor dtype differs from the output's");
    return mp_copy_tensor(t, y, err);
}

int mp_cpu_Constant(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y) return mp_fail(err, "missing output");
    if (!mp_elem_size(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    for (int i = 0; i < k->node->nattrs; i++) {
        const mp_attr *a = &k->node->attrs[i];
        if ((!strcmp(a->name, "value") || !strcmp(a->name, "sparse_value")) && a->tensors && a->tensors[0])
            return from_tensor(a->tensors[0], y, err);
        if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_int")) {
            if (y->numel != 1) return mp_fail(err, "scalar constant into %lld elements", (long long)y->numel);
            if (a->type == MP_ATTR_FLOAT) mp_tensor_set_f64(y, 0, a->f);
            else mp_tensor_set_i64(y, 0, a->i);
            return 0;
        }
        if (!strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints")) {
            if (y->numel != a->n) return mp_fail(err, "list of %d into %lld elements", a->n, (long long)y->numel);
            for (int j = 0; j < a->n; j++) {
                if (a->type == MP_ATTR_FLOATS) mp_tensor_set_f64(y, j, a->floats[j]);
                else mp_tensor_set_i64(y, j, a->ints[j]);
            }
            return 0;
        }
    }
    return mp_kunsupported(err, "no supported value attribute");
}

int mp_cpu_ConstantOfShape(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y) return mp_fail(err, "missing output");
    if (!mp_elem_size(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    const mp_attr *a = mp_node_attr(k->node, "value");
    unsigned char elem[8] = {0};
    if (a && a->tensors && a->tensors[0]) {
        const mp_tensor *t = a->tensors[0];
        if (t->numel != 1 || t->dtype != y->dtype || !t->data) return mp_fail(err, "value must be one element of the output's dtype");
        memcpy(elem, t->data, (size_t)ES(y));
    }
    fill(y, elem);
    return 0;
}

int mp_cpu_Range(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *s = mp_kin(k, 0), *l = mp_kin(k, 1), *d = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!s || !l || !d || !y || s->numel != 1 || d->numel != 1) return mp_fail(err, "needs scalar start, limit, delta");
    if (!mp_elem_size(y->dtype) || y->dtype == MP_BOOL) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    if (mp_dtype_is_int(y->dtype)) {
        int64_t a = mp_scalar_i64(s), st = mp_scalar_i64(d);
        for (int64_t i = 0; i < y->numel; i++) mp_tensor_set_i64(y, i, (int64_t)((uint64_t)a + (uint64_t)i * (uint64_t)st));
    } else {
        double a = mp_scalar_f64(s), st = mp_scalar_f64(d);
        for (int64_t i = 0; i < y->numel; i++) mp_tensor_set_f64(y, i, a + (double)i * st);
    }
    return 0;
}

int mp_cpu_EyeLike(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    if (!y || y->rank != 2) return mp_fail(err, "needs a 2-D output");
    if (!mp_elem_size(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    int64_t kk = mp_attr_int(k->node, "k", 0);
    memset(y->data, 0, (size_t)(y->numel * ES(y)));
    for (int64_t i = 0; i < y->dims[0]; i++) {
        int64_t j = i + kk;
        if (j >= 0 && j < y->dims[1]) mp_tensor_set_i64(y, i * y->dims[1] + j, 1);
    }
    return 0;
}

int mp_cpu_Trilu(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    int rc = check_xy(x, y, err);
    if (rc) return rc;
    if (x->rank < 2 || !mp_same_shape(x, y)) return mp_fail(err, "needs rank >= 2 and the output shape of the input");
    int64_t kk = mp_kin(k, 1) ? mp_scalar_i64(k->in[1]) : 0;
    bool upper = mp_attr_int(k->node, "upper", 1) != 0;
    int64_t n = x->dims[x->rank - 2], m = x->dims[x->rank - 1], mats = (n * m) != 0 ? x->numel / (n * m) : 0;
    size_t es = (size_t)ES(x);
    memcpy(y->data, x->data, (size_t)x->numel * es);
    for (int64_t b = 0; b < mats; b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                bool keep = upper ? j - i >= kk : j - i <= kk;
                if (!keep) memset((char *)y->data + ((b * n + i) * m + j) * (int64_t)es, 0, es);
            }
    return 0;
}

/* BitCast: the same bytes read as another dtype (output shape from inference). */
int mp_cpu_BitCast(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y) return mp_fail(err, "missing input or output");
    size_t ex = mp_elem_size(x->dtype), ey = mp_elem_size(y->dtype);
    if (!ex || !ey) return mp_kunsupported(err, "bitcast between %s and %s", mp_dtype_name(x->dtype), mp_dtype_name(y->dtype));
    if ((size_t)x->numel * ex != (size_t)y->numel * ey) return mp_fail(err, "input has %lld bytes, output %lld", (long long)(x->numel * (int64_t)ex), (long long)(y->numel * (int64_t)ey));
    memcpy(y->data, x->data, (size_t)x->numel * ex);
    return 0;
}
