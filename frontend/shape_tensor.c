/* shape_tensor.c - shape rules of the data-movement ops (ir/ops/tensor.def),
 * part 1: the folding machinery, constants, and the shape-arithmetic ops that
 * torch.onnx.export chains (Shape, Size, Range, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape_tensor.h"

/* ---- folding by gather maps ------------------------------------------ */

/* Bytes of one konst element (strings are pointers); 0 when elements are not
 * addressable one by one (4-bit types), so such tensors are never folded. */
static size_t elem_size(mp_dtype t)
{
    if (t == MP_STRING) return sizeof(const char *);
    int bits = mp_dtype_bits(t);
    return bits >= 8 ? (size_t)bits / 8 : 0;
}

static bool has_contents(const mp_value *v) { return v && (v->konst || v->symdata); }

bool mp_gmap_begin(mp_gmap *f, mp_graph *g, const mp_node *n, int out, int nsrc, mp_value *const *srcs)
{
    memset(f, 0, sizeof *f);
    mp_value *y = mp_out(g, n, out);
    int64_t numel = mp_foldable_numel(y);
    if (numel < 0 || y->dtype == MP_UNDEFINED) return false;
    bool konst = elem_size(y->dtype) > 0;
    for (int k = 0; k < nsrc; k++) {
        if (!has_contents(srcs[k])) return false;
        konst = konst && srcs[k]->konst && srcs[k]->konst->dtype == y->dtype && srcs[k]->konst->data;
    }
    /* Otherwise only a small int64 shape vector can carry symbolic entries. */
    if (!konst && !(y->dtype == MP_INT64 && y->rank <= 1 && numel <= MP_MAX_RANK)) return false;
    size_t cnt = (size_t)(numel ? numel : 1);
    f->src = malloc(cnt * sizeof *f->src);
    f->idx = malloc(cnt * sizeof *f->idx);
    if (!f->src || !f->idx) {
        mp_gmap_cancel(f);
        return false;
    }
    f->g = g;
    f->n = n;
    f->out = out;
    f->nsrc = nsrc;
    f->srcs = srcs;
    f->numel = numel;
    f->sym = !konst;
    return true;
}

void mp_gmap_cancel(mp_gmap *f)
{
    free(f->src);
    free(f->idx);
    f->src = NULL;
    f->idx = NULL;
}

int mp_gmap_end(mp_gmap *f, mp_err *err)
{
    mp_value *y = mp_out(f->g, f->n, f->out);
    int rc = 0;
    if (!f->sym) {
        int64_t dims[MP_MAX_RANK];
        mp_known_dims(y, dims);
        mp_tensor *t = mp_tensor_new(f->g->arena, y->dtype, y->rank, dims);
        size_t es = elem_size(y->dtype);
        for (int64_t e = 0; e < f->numel && !rc; e++) {
            char *dst = (char *)t->data + (size_t)e * es;
            if (f->src[e] < 0) {
                if (y->dtype == MP_STRING) *(const char **)dst = "";
                continue; /* zero fill */
            }
            const mp_tensor *s = f->srcs[f->src[e]]->konst;
            if (f->idx[e] < 0 || f->idx[e] >= s->numel)
                rc = mp_fail(err, "index %lld is out of range for an input of %lld elements", (long long)f->idx[e],
                             (long long)s->numel);
            else
                memcpy(dst, (const char *)s->data + (size_t)f->idx[e] * es, es);
        }
        if (!rc) mp_set_out_const(f->g, f->n, f->out, t);
    } else {
        mp_dim d[MP_MAX_RANK], buf[MP_MAX_RANK];
        for (int64_t e = 0; e < f->numel && !rc; e++) {
            if (f->src[e] < 0) {
                d[e] = mp_dim_of(0);
                continue;
            }
            int cnt = mp_const_dims(f->g, f->srcs[f->src[e]], buf, MP_MAX_RANK);
            if (cnt < 0) { /* a konst source too long to read as dims */
                mp_gmap_cancel(f);
                return 0;
            }
            if (f->idx[e] < 0 || f->idx[e] >= cnt)
                rc = mp_fail(err, "index %lld is out of range for an input of %d elements", (long long)f->idx[e], cnt);
            else
                d[e] = buf[f->idx[e]];
        }
        if (!rc) mp_set_out_dims(f->g, f->n, f->out, d, (int)f->numel, y->rank == 0);
    }
    mp_gmap_cancel(f);
    return rc;
}

/* Folds output 0 as an element-for-element copy of x (Reshape, Flatten,
 * Squeeze, Unsqueeze keep the row-major order). */
static int fold_same_order(mp_graph *g, const mp_node *n, mp_value *x, mp_err *err)
{
    mp_gmap f;
    if (!mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    for (int64_t e = 0; e < f.numel; e++) {
        f.src[e] = 0;
        f.idx[e] = e;
    }
    return mp_gmap_end(&f, err);
}

void mp_dims_strides(const int64_t *dims, int rank, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i] ? dims[i] : 1;
    }
}

/* ---- reading arguments ------------------------------------------------ */

int mp_arg_ints(mp_graph *g, const mp_node *n, const char *attr, int in, int64_t *out, int max, int *count, mp_err *err)
{
    *count = 0;
    const int64_t *a;
    int na = attr ? mp_attr_ints(n, attr, &a) : -1;
    if (na >= 0) {
        if (na > max) return mp_fail(err, "attribute '%s' has %d entries (limit %d)", attr, na, max);
        if (na) memcpy(out, a, (size_t)na * sizeof *out);
        *count = na;
        return MP_ARG_KNOWN;
    }
    mp_value *v = in >= 0 ? mp_in(g, n, in) : NULL;
    if (!v) return MP_ARG_ABSENT;
    if (!v->konst) return MP_ARG_UNKNOWN;
    if (v->konst->numel > max)
        return mp_fail(err, "input %d has %lld entries (limit %d)", in, (long long)v->konst->numel, max);
    int k = mp_const_ints(v, out, max);
    if (k < 0) return mp_fail(err, "input %d must be an integer tensor of rank 0 or 1", in);
    *count = k;
    return MP_ARG_KNOWN;
}

bool mp_input_int(mp_graph *g, const mp_node *n, int in, int64_t *out)
{
    mp_value *v = mp_in(g, n, in);
    return v && v->konst && v->konst->numel == 1 && mp_const_ints(v, out, 1) == 1;
}

int mp_const_reals(const mp_value *v, double *out, int max)
{
    if (!v || !v->konst || v->konst->rank > 1 || v->konst->numel > max || !v->konst->data) return -1;
    if (!mp_dtype_readable(v->konst->dtype) || v->konst->dtype == MP_BOOL) return -1;
    for (int64_t i = 0; i < v->konst->numel; i++) out[i] = mp_tensor_get_f64(v->konst, i);
    return (int)v->konst->numel;
}

bool mp_known_dims(const mp_value *v, int64_t *dims)
{
    if (!v || v->rank < 0) return false;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i].v < 0) return false;
        dims[i] = v->dims[i].v;
    }
    return true;
}

int mp_dim_add(mp_dim a, mp_dim b, mp_dim *r, mp_err *err)
{
    if (a.v == 0) {
        *r = b;
    } else if (b.v == 0) {
        *r = a;
    } else if (a.v > 0 && b.v > 0) {
        int64_t s;
        if (!mp_add_ok(a.v, b.v, &s)) return mp_fail(err, "dimension sum overflows int64");
        *r = mp_dim_of(s);
    } else {
        *r = MP_DIM_UNKNOWN;
    }
    return 0;
}

int mp_dim_mul(mp_dim a, mp_dim b, mp_dim *r, mp_err *err)
{
    mp_dim d[2] = {a, b};
    return mp_dims_product(d, 2, r, err);
}

int mp_attr_dtype(const mp_node *n, const char *name, mp_dtype dflt, mp_dtype *out, mp_err *err)
{
    const mp_attr *a = mp_node_attr(n, name);
    if (!a) {
        *out = dflt;
        return 0;
    }
    if (a->type != MP_ATTR_INT || !mp_dtype_valid((int)a->i))
        return mp_fail(err, "attribute '%s' is not a known element type", name);
    *out = (mp_dtype)a->i;
    return 0;
}

/* "[4,-1]" from a list of ints, for error messages. */
static const char *ints_str(const int64_t *v, int n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)v[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* ---- Identity, Constant, ConstantOfShape -------------------------------- */

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
        y->seqlen = x->seqlen;
        y->elem_kind = x->elem_kind;
    }
    return 0;
}

/* A 0-D or 1-D tensor of n elements of t. */
static mp_tensor *small_tensor(mp_graph *g, mp_dtype t, bool scalar, int64_t count)
{
    return mp_tensor_new(g->arena, t, scalar ? 0 : 1, &count);
}

int shape_Constant(mp_graph *g, mp_node *n, mp_err *err)
{
    static const char *const kinds[] = {"value",     "sparse_value", "value_float",  "value_floats",
                                        "value_int", "value_ints",   "value_string", "value_strings"};
    const mp_attr *a = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        const mp_attr *c = mp_node_attr(n, kinds[i]);
        if (c && a) return mp_fail(err, "has both attributes '%s' and '%s'; exactly one is allowed", a->name, c->name);
        if (c) a = c;
    }
    if (!a) return mp_fail(err, "has none of the value attributes (value, value_float, value_ints, ...)");
    mp_tensor *t = NULL;
    switch (a->type) {
    case MP_ATTR_TENSOR:
    case MP_ATTR_SPARSE_TENSOR:
        t = a->tensors ? a->tensors[0] : NULL;
        if (!t) return mp_fail(err, "attribute '%s' holds no tensor", a->name);
        if (!t->data) { /* bytes not decoded: the shape is still known */
            mp_dim d[MP_MAX_RANK];
            if (t->rank > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", t->rank, MP_MAX_RANK);
            for (int i = 0; i < t->rank; i++) d[i] = mp_dim_of(t->dims[i]);
            return mp_set_out(g, n, 0, t->dtype, t->rank, d);
        }
        break;
    case MP_ATTR_FLOAT:
        t = small_tensor(g, MP_FLOAT, true, 1);
        ((float *)t->data)[0] = a->f;
        break;
    case MP_ATTR_INT:
        t = small_tensor(g, MP_INT64, true, 1);
        ((int64_t *)t->data)[0] = a->i;
        break;
    case MP_ATTR_STRING:
        t = small_tensor(g, MP_STRING, true, 1);
        ((const char **)t->data)[0] = a->s;
        break;
    case MP_ATTR_FLOATS:
        t = small_tensor(g, MP_FLOAT, false, a->n);
        if (a->n) memcpy(t->data, a->floats, (size_t)a->n * sizeof(float));
        break;
    case MP_ATTR_INTS:
        t = small_tensor(g, MP_INT64, false, a->n);
        if (a->n) memcpy(t->data, a->ints, (size_t)a->n * sizeof(int64_t));
        break;
    case MP_ATTR_STRINGS:
        t = small_tensor(g, MP_STRING, false, a->n);
        if (a->n) memcpy(t->data, a->strings, (size_t)a->n * sizeof(const char *));
        break;
    default: return mp_fail(err, "attribute '%s' has an unexpected type %d", a->name, a->type);
    }
    if (t->rank > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", t->rank, MP_MAX_RANK);
    return mp_set_out_const(g, n, 0, t);
}

int mp_shape_arg(mp_graph *g, const mp_value *v, mp_dim *d, int *count, int *len, mp_err *err)
{
    *count = *len = -1;
    if (!v) return 0;
    if (v->rank > 1) return mp_fail(err, "a shape input must be 1-D, not rank %d", v->rank);
    if (v->rank == 1 && v->dims[0].v > MP_MAX_RANK)
        return mp_fail(err, "shape input has %lld entries (limit %d)", (long long)v->dims[0].v, MP_MAX_RANK);
    if (v->rank >= 0) *len = v->rank == 0 ? 1 : (int)v->dims[0].v;
    *count = mp_const_dims(g, v, d, MP_MAX_RANK);
    return 0;
}

int shape_ConstantOfShape(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *s = mp_in(g, n, 0);
    if (!s) return mp_fail(err, "missing input 'input'");
    const mp_attr *a = mp_node_attr(n, "value");
    const mp_tensor *val = a && a->type == MP_ATTR_TENSOR && a->tensors ? a->tensors[0] : NULL;
    if (val && val->numel != 1)
        return mp_fail(err, "attribute 'value' must hold one element, not %lld", (long long)val->numel);
    mp_dtype t = val ? val->dtype : MP_FLOAT;
    mp_dim d[MP_MAX_RANK];
    int k, len;
    if (mp_shape_arg(g, s, d, &k, &len, err)) return -1;
    if (k < 0) {
        for (int i = 0; i < len; i++) d[i] = MP_DIM_UNKNOWN;
        return mp_set_out(g, n, 0, t, len, d);
    }
    for (int i = 0; i < k; i++)
        if (d[i].sym < 0 && d[i].v < 0 && s->konst)
            return mp_fail(err, "shape entry %d is %lld; dims cannot be negative", i, (long long)d[i].v);
    mp_set_out(g, n, 0, t, k, d);
    mp_value *y = mp_out(g, n, 0);
    size_t es = elem_size(t);
    if (!y || mp_foldable_numel(y) < 0 || !es || (val && !val->data)) return 0;
    int64_t dims[MP_MAX_RANK];
    mp_known_dims(y, dims);
    mp_tensor *c = mp_tensor_new(g->arena, t, k, dims);
    if (val)
        for (int64_t e = 0; e < c->numel; e++) memcpy((char *)c->data + (size_t)e * es, val->data, es);
    return mp_set_out_const(g, n, 0, c);
}

/* ---- Shape, Size, Range ------------------------------------------------- */

int shape_Shape(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    if (x->rank < 0) {
        mp_dim d = MP_DIM_UNKNOWN;
        return mp_set_out(g, n, 0, MP_INT64, 1, &d);
    }
    /* opset 15: start/end slice the shape, clamped into [0, rank] */
    int64_t r = x->rank, start = mp_attr_int(n, "start", 0), end = mp_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int count = end > start ? (int)(end - start) : 0;
    return mp_set_out_dims(g, n, 0, x->dims + start, count, false);
}

int shape_Size(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    if (x->rank < 0) return mp_set_out(g, n, 0, MP_INT64, 0, NULL);
    mp_dim d;
    if (mp_dims_product(x->dims, x->rank, &d, err)) return -1;
    return mp_set_out_dims(g, n, 0, &d, 1, true);
}

int shape_Range(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *v[3] = {mp_in(g, n, 0), mp_in(g, n, 1), mp_in(g, n, 2)};
    if (!v[0] || !v[1] || !v[2]) return mp_fail(err, "needs inputs start, limit and delta");
    mp_dtype t = v[0]->dtype;
    mp_dim len = MP_DIM_UNKNOWN;
    double r[3];
    bool known = true;
    for (int i = 0; i < 3; i++) {
        if (v[i]->rank > 0 && !(v[i]->rank == 1 && v[i]->dims[0].v == 1))
            return mp_fail(err, "input %d must be a scalar", i);
        known = known && mp_const_reals(v[i], &r[i], 1) == 1;
    }
    if (known) {
        if (r[2] == 0) return mp_fail(err, "delta is 0");
        double cnt = ceil((r[1] - r[0]) / r[2]);
        if (mp_dtype_is_int(t)) { /* exact for integers beyond 2^53 */
            int64_t s = mp_tensor_get_i64(v[0]->konst, 0), l = mp_tensor_get_i64(v[1]->konst, 0),
                    dl = mp_tensor_get_i64(v[2]->konst, 0), span;
            if (__builtin_sub_overflow(l, s, &span) || (span == INT64_MIN && dl == -1))
                return mp_fail(err, "range length overflows int64");
            int64_t q = span / dl, rem = span % dl;
            cnt = (double)(q + (rem != 0 && (rem > 0) == (dl > 0)));
        }
        if (!(cnt < 9.2e18)) return mp_fail(err, "range of %g elements is too long", cnt);
        len = mp_dim_of(cnt > 0 ? (int64_t)cnt : 0);
    } else {
        /* Range(0, n, 1) has length n, also when n is a symbol */
        mp_dim lim;
        if (mp_const_reals(v[0], &r[0], 1) == 1 && r[0] == 0 && mp_const_reals(v[2], &r[2], 1) == 1 && r[2] == 1 &&
            mp_const_dims(g, v[1], &lim, 1) == 1 && lim.sym >= 0)
            len = lim;
    }
    mp_set_out(g, n, 0, t, 1, &len);
    mp_value *y = mp_out(g, n, 0);
    if (!known || !y || mp_foldable_numel(y) < 0 || !mp_dtype_readable(t)) return 0;
    mp_tensor *c = mp_tensor_new(g->arena, t, 1, &len.v);
    for (int64_t i = 0; i < len.v; i++) {
        if (mp_dtype_is_int(t)) /* unsigned: wraps instead of overflowing, as the kernel's would */
            mp_tensor_set_i64(c, i,
                              (int64_t)((uint64_t)mp_tensor_get_i64(v[0]->konst, 0) +
                                        (uint64_t)i * (uint64_t)mp_tensor_get_i64(v[2]->konst, 0)));
        else
            mp_tensor_set_f64(c, i, r[0] + (double)i * r[2]);
    }
    return mp_set_out_const(g, n, 0, c);
}

/* ---- Reshape, Flatten ---------------------------------------------------- */

/* A product of dims as coefficient x symbols, so that -1 can cancel symbols:
 * [batch,3,4] -> [batch,-1] infers 12. False when a dim is unknown. */
typedef struct monomial {
    int64_t coef;
    int nsym;
    int32_t sym[MP_MAX_RANK];
} monomial;

static bool monomial_of(const mp_dim *d, int n, int skip, monomial *m)
{
    m->coef = 1;
    m->nsym = 0;
    for (int i = 0; i < n; i++) {
        if (i == skip) continue;
        if (d[i].v >= 0) {
            if (!mp_mul_ok(m->coef, d[i].v, &m->coef)) return false;
        } else if (d[i].sym >= 0) {
            m->sym[m->nsym++] = d[i].sym;
        } else {
            return false;
        }
    }
    return true;
}

/* Removes the symbols a and b share, one occurrence for one. */
static void monomial_cancel(monomial *a, monomial *b)
{
    for (int i = 0; i < b->nsym;) {
        int k = 0;
        while (k < a->nsym && a->sym[k] != b->sym[i]) k++;
        if (k == a->nsym) {
            i++;
            continue;
        }
        a->sym[k] = a->sym[--a->nsym];
        b->sym[i] = b->sym[--b->nsym];
    }
}

static int reshape_fail(const mp_graph *g, const mp_value *x, const char *target, mp_err *err)
{
    char buf[256];
    int64_t n = mp_value_numel(x);
    if (n >= 0) return mp_fail(err, "cannot reshape %lld elements into %s", (long long)n, target);
    return mp_fail(err, "cannot reshape %s into %s", mp_value_type_str(g, x, buf, sizeof buf), target);
}

/* The dim that makes out (with out[at] missing) hold as many elements as x;
 * unknown when symbols do not cancel; fails when the sizes cannot match. */
static int infer_dim(const mp_graph *g, const mp_value *x, const mp_dim *out, int rank, int at, const char *target,
                     mp_dim *r, mp_err *err)
{
    monomial a, b;
    *r = MP_DIM_UNKNOWN;
    if (x->rank < 0 || !monomial_of(x->dims, x->rank, -1, &a) || !monomial_of(out, rank, at, &b)) return 0;
    if (a.coef == 0 || b.coef == 0) {
        if (b.coef == 0 && a.coef != 0 && !a.nsym && !b.nsym) return reshape_fail(g, x, target, err);
        if (b.coef != 0 && !b.nsym) *r = mp_dim_of(0); /* zero elements, other dims nonzero */
        return 0;
    }
    monomial_cancel(&a, &b);
    if (b.nsym) return 0;
    if (a.coef % b.coef) return a.nsym ? 0 : reshape_fail(g, x, target, err);
    int64_t q = a.coef / b.coef;
    if (!a.nsym)
        *r = mp_dim_of(q);
    else if (a.nsym == 1 && q == 1)
        *r = (mp_dim){-1, a.sym[0]};
    return 0;
}

/* Fails when x and out certainly differ in element count (symbols cancelled). */
static int check_count(const mp_graph *g, const mp_value *x, const mp_dim *out, int rank, const char *target,
                       mp_err *err)
{
    monomial a, b;
    if (x->rank < 0 || !monomial_of(x->dims, x->rank, -1, &a) || !monomial_of(out, rank, -1, &b)) return 0;
    if ((a.coef == 0 || b.coef == 0) && (a.nsym || b.nsym)) return 0; /* a symbol might be 0 */
    monomial_cancel(&a, &b);
    return !a.nsym && !b.nsym && a.coef != b.coef ? reshape_fail(g, x, target, err) : 0;
}

int shape_Reshape(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0), *s = mp_in(g, n, 1);
    if (!x) return mp_fail(err, "missing input 'data'");
    bool allowzero = mp_attr_int(n, "allowzero", 0) != 0;
    mp_dim d[MP_MAX_RANK];
    int64_t vals[MP_MAX_RANK];
    int k, len = -1;
    const int64_t *attr_shape;
    int na = mp_attr_ints(n, "shape", &attr_shape); /* Reshape-1 */
    bool exact = na >= 0 || (s && s->konst);
    if (na >= 0) {
        if (na > MP_MAX_RANK) return mp_fail(err, "shape has %d entries (limit %d)", na, MP_MAX_RANK);
        k = na;
        memcpy(vals, attr_shape, (size_t)na * sizeof *vals);
    } else if (!s) {
        return mp_fail(err, "missing input 'shape'");
    } else if (s->konst) {
        if (s->konst->rank != 1) return mp_fail(err, "input 'shape' must be 1-D");
        if (s->konst->numel > MP_MAX_RANK)
            return mp_fail(err, "shape has %lld entries (limit %d)", (long long)s->konst->numel, MP_MAX_RANK);
        k = mp_const_ints(s, vals, MP_MAX_RANK);
        if (k < 0) return mp_fail(err, "input 'shape' must be int64");
    } else {
        if (mp_shape_arg(g, s, d, &k, &len, err)) return -1;
        if (k < 0) {
            for (int i = 0; i < len; i++) d[i] = MP_DIM_UNKNOWN;
            return mp_set_out(g, n, 0, x->dtype, len, d);
        }
    }
    /* pass 1: literal entries; -1 (or an entry whose value is not known) waits */
    int at = -1, nwait = 0;
    for (int i = 0; i < k; i++) {
        mp_dim e = exact ? mp_dim_of(vals[i]) : d[i];
        if (exact && vals[i] < -1) return mp_fail(err, "shape entry %d is %lld", i, (long long)vals[i]);
        if (e.sym < 0 && e.v == -1) {
            if (exact && at >= 0) return mp_fail(err, "shape has more than one -1");
            at = i;
            nwait++;
            d[i] = MP_DIM_UNKNOWN;
        } else if (e.v == 0 && e.sym < 0 && !allowzero) {
            if (x->rank >= 0 && i >= x->rank)
                return mp_fail(err, "shape entry %d is 0 (copy) but the input has rank %d", i, x->rank);
            d[i] = x->rank >= 0 ? x->dims[i] : MP_DIM_UNKNOWN;
        } else {
            d[i] = e;
        }
    }
    if (exact && allowzero && at >= 0)
        for (int i = 0; i < k; i++)
            if (vals[i] == 0) return mp_fail(err, "with allowzero=1 the shape cannot hold both 0 and -1");
    /* pass 2: the one waiting entry follows from the element count */
    char target[256];
    if (exact)
        ints_str(vals, k, target, sizeof target);
    else
        snprintf(target, sizeof target, "a shape of %d entries", k);
    if (nwait == 1 && infer_dim(g, x, d, k, at, target, &d[at], err)) return -1;
    if (nwait == 0 && check_count(g, x, d, k, target, err)) return -1;
    mp_set_out(g, n, 0, x->dtype, k, d);
    return fold_same_order(g, n, x, err);
}

int shape_Flatten(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input");
    mp_dim d[2] = {MP_DIM_UNKNOWN, MP_DIM_UNKNOWN};
    if (x->rank >= 0) {
        int64_t axis = mp_attr_int(n, "axis", 1); /* in [-r, r]; negative counts from the end */
        if (axis < -x->rank || axis > x->rank)
            return mp_fail(err, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
        if (axis < 0) axis += x->rank;
        if (mp_dims_product(x->dims, (int)axis, &d[0], err) ||
            mp_dims_product(x->dims + axis, x->rank - (int)axis, &d[1], err))
            return -1;
    }
    mp_set_out(g, n, 0, x->dtype, 2, d);
    return fold_same_order(g, n, x, err);
}

/* ---- Squeeze, Unsqueeze, Transpose ---------------------------------------- */

int shape_Squeeze(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    int64_t axes[MP_MAX_RANK];
    int na, st = mp_arg_ints(g, n, "axes", 1, axes, MP_MAX_RANK, &na, err);
    if (st < 0) return -1;
    if (x->rank < 0 || st == MP_ARG_UNKNOWN) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    bool drop[MP_MAX_RANK] = {false};
    if (st == MP_ARG_ABSENT) { /* every dim of size 1; unknowable while a dim is not known */
        for (int i = 0; i < x->rank; i++) {
            if (x->dims[i].v < 0) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
            drop[i] = x->dims[i].v == 1;
        }
    }
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (mp_norm_axis(axes[i], x->rank, false, &a, err)) return -1;
        if (drop[a]) return mp_fail(err, "axis %lld is listed twice", (long long)axes[i]);
        if (x->dims[a].v >= 0 && x->dims[a].v != 1)
            return mp_fail(err, "cannot squeeze axis %lld of size %lld", (long long)axes[i], (long long)x->dims[a].v);
        drop[a] = true;
    }
    mp_dim d[MP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) d[r++] = x->dims[i];
    mp_set_out(g, n, 0, x->dtype, r, d);
    return fold_same_order(g, n, x, err);
}

int shape_Unsqueeze(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    int64_t axes[MP_MAX_RANK];
    int na, st = mp_arg_ints(g, n, "axes", 1, axes, MP_MAX_RANK, &na, err);
    if (st < 0) return -1;
    if (st == MP_ARG_ABSENT) return mp_fail(err, "missing 'axes'");
    if (x->rank < 0 || st == MP_ARG_UNKNOWN) return mp_set_out(g, n, 0, x->dtype, -1, NULL);
    int r = x->rank + na;
    if (r > MP_MAX_RANK) return mp_fail(err, "rank %d exceeds the supported %d", r, MP_MAX_RANK);
    bool added[MP_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (mp_norm_axis(axes[i], r, false, &a, err)) return -1;
        if (added[a]) return mp_fail(err, "axis %lld is listed twice", (long long)axes[i]);
        added[a] = true;
    }
    mp_dim d[MP_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) d[i] = added[i] ? mp_dim_of(1) : x->dims[k++];
    mp_set_out(g, n, 0, x->dtype, r, d);
    return fold_same_order(g, n, x, err);
}

int shape_Transpose(mp_graph *g, mp_node *n, mp_err *err)
{
    mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input 'data'");
    const int64_t *perm;
    int np = mp_attr_ints(n, "perm", &perm);
    mp_dim d[MP_MAX_RANK];
    if (np > MP_MAX_RANK) return mp_fail(err, "perm has %d entries (limit %d)", np, MP_MAX_RANK);
    if (x->rank < 0) {
        for (int i = 0; i < np; i++) d[i] = MP_DIM_UNKNOWN;
        return mp_set_out(g, n, 0, x->dtype, np, d);
    }
    int r = x->rank;
    int64_t p[MP_MAX_RANK];
    if (np >= 0 && np != r) return mp_fail(err, "perm has %d entries for an input of rank %d", np, r);
    bool seen[MP_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) {
        p[i] = np >= 0 ? perm[i] : r - 1 - i;
        if (p[i] < 0) p[i] += r; /* negative entries count from the end, as in numpy */
        if (p[i] < 0 || p[i] >= r || seen[p[i]]) return mp_fail(err, "perm is not a permutation of 0..%d", r - 1);
        seen[p[i]] = true;
    }
    for (int i = 0; i < r; i++) d[i] = x->dims[p[i]];
    mp_set_out(g, n, 0, x->dtype, r, d);
    mp_gmap f;
    if (!mp_gmap_begin(&f, g, n, 0, 1, &x)) return 0;
    int64_t in[MP_MAX_RANK], st[MP_MAX_RANK], c[MP_MAX_RANK] = {0};
    mp_known_dims(x, in);
    mp_dims_strides(in, r, st);
    for (int64_t e = 0; e < f.numel; e++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += c[i] * st[p[i]];
        f.src[e] = 0;
        f.idx[e] = off;
        for (int i = r - 1; i >= 0 && ++c[i] == in[p[i]]; i--) c[i] = 0; /* next output index */
    }
    return mp_gmap_end(&f, err);
}
