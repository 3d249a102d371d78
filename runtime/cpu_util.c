/* cpu_util.c - helpers shared by the CPU kernels: broadcasting, strided
 * copies, reading small integer inputs, the counter-based RNG. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

int mp_kunsupported(mp_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return MP_EXEC_UNSUPPORTED;
}

void mp_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

bool mp_same_shape(const mp_tensor *a, const mp_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

int mp_read_ints(const mp_tensor *t, int64_t *out, int max, const char *what, mp_err *err)
{
    if (!t) return 0;
    if (t->rank > 1) return mp_fail(err, "%s must be 0-D or 1-D, got rank %d", what, t->rank);
    if (!mp_dtype_is_int(t->dtype)) return mp_fail(err, "%s must be an integer tensor, got %s", what, mp_dtype_name(t->dtype));
    if (t->numel > max) return mp_fail(err, "%s has %lld entries (limit %d)", what, (long long)t->numel, max);
    for (int64_t i = 0; i < t->numel; i++) out[i] = mp_tensor_get_i64(t, i);
    return (int)t->numel;
}

int mp_read_axes(const mp_kargs *k, const char *name, int idx, int64_t input_since, int rank, int64_t *axes,
                 mp_err *err)
{
    int n = 0;
    if (k->opset >= input_since) {
        n = mp_read_ints(mp_kin(k, idx), axes, MP_MAX_RANK, name, err);
        if (n < 0) return -1;
    } else {
        const int64_t *a;
        n = mp_attr_ints(k->node, name, &a);
        if (n < 0) return 0;
        if (n > MP_MAX_RANK) return mp_fail(err, "%s has %d entries (limit %d)", name, n, MP_MAX_RANK);
        memcpy(axes, a, (size_t)n * sizeof *axes);
    }
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= (rank ? rank : 1)) return mp_fail(err, "%s: axis %lld out of range for rank %d", name, (long long)axes[i], rank);
        axes[i] = a;
    }
    return n;
}

double mp_scalar_f64(const mp_tensor *t) { return t && t->numel > 0 ? mp_tensor_get_f64(t, 0) : 0; }
int64_t mp_scalar_i64(const mp_tensor *t) { return t && t->numel > 0 ? mp_tensor_get_i64(t, 0) : 0; }

/* ---- broadcasting -------------------------------------------------------- */

int mp_bcast_init(mp_bcast *b, const mp_tensor *y, int n, const mp_tensor *const *x, mp_err *err)
{
    memset(b, 0, sizeof *b);
    b->rank = y->rank;
    b->n = n;
    for (int i = 0; i < y->rank; i++) b->dims[i] = y->dims[i];
    for (int k = 0; k < n; k++) {
        const mp_tensor *t = x[k];
        if (t->rank > y->rank)
            return mp_fail(err, "input %d has rank %d, more than the output's %d", k, t->rank, y->rank);
        int64_t s = 1;
        for (int i = t->rank - 1; i >= 0; i--) {
            int o = y->rank - t->rank + i;
            if (t->dims[i] == y->dims[o])
                b->str[k][o] = t->dims[i] == 1 ? 0 : s;
            else if (t->dims[i] == 1)
                b->str[k][o] = 0;
            else
                return mp_fail(err, "input %d dim %d (%lld) does not broadcast to the output's %lld", k, i,
                               (long long)t->dims[i], (long long)y->dims[o]);
            s *= t->dims[i];
        }
    }
    b->len = y->rank ? y->dims[y->rank - 1] : 1;
    b->rows = b->len ? y->numel / b->len : 0;
    for (int k = 0; k < n; k++) b->step[k] = y->rank ? b->str[k][y->rank - 1] : 0;
    return 0;
}

void mp_bcast_next(mp_bcast *b)
{
    for (int i = b->rank - 2; i >= 0; i--) {
        if (++b->idx[i] < b->dims[i]) {
            for (int k = 0; k < b->n; k++) b->off[k] += b->str[k][i];
            return;
        }
        b->idx[i] = 0;
        for (int k = 0; k < b->n; k++) b->off[k] -= b->str[k][i] * (b->dims[i] - 1);
    }
}

/* ---- copies --------------------------------------------------------------- */

void mp_copy_strided(void *dst, const int64_t *dstr, const void *src, const int64_t *sstr, int rank,
                     const int64_t *dims, size_t esize)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (n == 0) return;
    if (rank == 0) {
        memcpy(dst, src, esize);
        return;
    }
    int64_t idx[MP_MAX_RANK] = {0};
    int64_t len = dims[rank - 1], ds = dstr[rank - 1], ss = sstr[rank - 1];
    char *d = dst;
    const char *s = src;
    bool contiguous = ds == 1 && ss == 1;
    for (int64_t r = 0; r < n / len; r++) {
        if (contiguous) {
            memcpy(d, s, (size_t)len * esize);
        } else if (esize == 4) {
            for (int64_t j = 0; j < len; j++) memcpy(d + j * ds * 4, s + j * ss * 4, 4);
        } else {
            for (int64_t j = 0; j < len; j++) memcpy(d + j * ds * (int64_t)esize, s + j * ss * (int64_t)esize, esize);
        }
        for (int i = rank - 2; i >= 0; i--) {
            if (++idx[i] < dims[i]) {
                d += dstr[i] * (int64_t)esize;
                s += sstr[i] * (int64_t)esize;
                break;
            }
            idx[i] = 0;
            d -= dstr[i] * (dims[i] - 1) * (int64_t)esize;
            s -= sstr[i] * (dims[i] - 1) * (int64_t)esize;
        }
    }
}

int mp_copy_tensor(const mp_tensor *x, mp_tensor *y, mp_err *err)
{
    if (x->dtype != y->dtype) return mp_fail(err, "output dtype %s differs from input %s", mp_dtype_name(y->dtype), mp_dtype_name(x->dtype));
    if (x->numel != y->numel)
        return mp_fail(err, "output has %lld elements, input %lld", (long long)y->numel, (long long)x->numel);
    size_t es = mp_elem_size(x->dtype);
    if (!es) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    if (x->data != y->data && x->numel) memmove(y->data, x->data, (size_t)x->numel * es);
    return 0;
}

/* ---- RNG ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double mp_rng_uniform(uint64_t seed, int32_t node, int64_t i)
{
    uint64_t h = splitmix64(seed ^ splitmix64((uint64_t)(uint32_t)node + 0x51ed2701ull));
    h = splitmix64(h ^ (uint64_t)i);
    return (double)(h >> 11) * 0x1.0p-53;
}

int mp_pad_index_map(const mp_kargs *k, const char *mode, int r, const int64_t *in_dims, const int64_t *out_dims,
                     const int64_t *begin, int64_t **map, int64_t *base, mp_err *err)
{
    enum { CONSTANT, REFLECT, EDGE, WRAP } m;
    if (!strcmp(mode, "constant")) m = CONSTANT;
    else if (!strcmp(mode, "reflect")) m = REFLECT;
    else if (!strcmp(mode, "edge")) m = EDGE;
    else if (!strcmp(mode, "wrap")) m = WRAP;
    else return mp_fail(err, "unknown mode '%s'", mode);
    int64_t total = 0;
    for (int a = 0; a < r; a++) {
        if (m != CONSTANT && in_dims[a] == 0 && out_dims[a] > 0)
            return mp_fail(err, "mode %s cannot pad an empty axis", mode);
        base[a] = total, total += out_dims[a];
    }
    int64_t *mp = *map = mp_scratch_array(k->scratch, total ? total : 1, sizeof *mp);
    if (!mp) return mp_fail(err, "out of scratch memory");
    for (int a = 0; a < r; a++) {
        int64_t d = in_dims[a], per = 2 * (d - 1);
        for (int64_t o = 0; o < out_dims[a]; o++) {
            int64_t j = o - begin[a];
            if (j < 0 || j >= d) {
                if (m == CONSTANT) j = -1;
                else if (m == EDGE) j = j < 0 ? 0 : d - 1;
                else if (m == WRAP) j = (j % d + d) % d;
                else if (d == 1) j = 0;
                else j = (j % per + per) % per, j = j >= d ? per - j : j;
            }
            mp[base[a] + o] = j;
        }
    }
    return 0;
}
