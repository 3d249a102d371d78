/* exec.c - the CPU reference executor (see exec.h): value buffers, lifetimes,
 * the kernel table, scratch, and reading weights from the model file. */
#include <cblas.h>  /* defines: openblas_set_num_threads */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* ---- the kernel table ------------------------------------------------------ */

static const mp_kernel_fn kernel_table[MP_OP_COUNT] = {
#define MP_KERNEL(id, fn) [MP_OP_##id] = fn,
#define MP_NATIVE16(id)
#include "kernels.def"
#undef MP_KERNEL
#undef MP_NATIVE16
};

/* Ops whose kernels take 16-bit floats as they are (the rest are widened). */
static const bool native16[MP_OP_COUNT] = {
#define MP_KERNEL(id, fn)
#define MP_NATIVE16(id) [MP_OP_##id] = true,
#include "kernels.def"
#undef MP_KERNEL
#undef MP_NATIVE16
};

mp_kernel_fn mp_kernel_find(int32_t op) { return op >= 0 && op < MP_OP_COUNT ? kernel_table[op] : NULL; }

#define MP_CPU_NAME(name) #name,
const char *const mp_cpu_kernel_names[] = {MP_CPU_KERNELS(MP_CPU_NAME) NULL};
#undef MP_CPU_NAME

/* ---- scratch: one block, grown to the high-water mark between nodes ----------- */

typedef struct scratch_chunk {
    struct scratch_chunk *next;
    max_align_t align[];
} scratch_chunk;

struct mp_scratch {
    char *buf;
    size_t cap, used;       /* in buf */
    scratch_chunk *extra;   /* overflow chunks of the current node */
    size_t node_bytes;      /* used by the current node, buf and chunks */
    size_t limit, peak;
};

void *mp_scratch_alloc(mp_scratch *s, size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (s->limit && s->node_bytes + bytes > s->limit) return NULL;
    s->node_bytes += bytes;
    if (s->node_bytes > s->peak) s->peak = s->node_bytes;
    if (s->used + bytes <= s->cap) {
        void *p = s->buf + s->used;
        s->used += bytes;
        return p;
    }
    scratch_chunk *c = malloc(sizeof *c + bytes);
    if (!c) return NULL;
    c->next = s->extra;
    s->extra = c;
    return c->align;
}

void *mp_scratch_array(mp_scratch *s, int64_t n, size_t elem)
{
    int64_t bytes;
    if (n < 0 || !mp_mul_ok(n, (int64_t)elem, &bytes) || bytes > (int64_t)1 << 46) return NULL;
    return mp_scratch_alloc(s, (size_t)bytes);
}

/* Ends a node: frees overflow chunks and grows buf to what the node needed. */
static void scratch_reset(mp_scratch *s)
{
    bool grow = s->extra != NULL;
    while (s->extra) {
        scratch_chunk *c = s->extra;
        s->extra = c->next;
        free(c);
    }
    if (grow) {
        free(s->buf);
        s->buf = malloc(s->node_bytes);
        s->cap = s->buf ? s->node_bytes : 0;
    }
    s->used = 0;
    s->node_bytes = 0;
}

/* ---- the executor ------------------------------------------------------------ */

enum { OWN_NONE, OWN_BOUND, OWN_KONST, OWN_WEIGHT, OWN_HEAP, OWN_ARENA };

struct mp_exec {
    mp_graph *g;
    mp_exec_opts o;
    int32_t nv;
    mp_tensor *t;            /* per value: dtype, dims, numel, data (NULL when not live) */
    int64_t *bytes;          /* per value: buffer bytes, -1 when the shape is unknown */
    uint8_t *own;            /* per value: OWN_* */
    int32_t *last;           /* per value: last node that reads it (-1: none) */
    bool *keep;              /* per value: graph output, kept after the run */
    int32_t maxin, maxout;
    const mp_tensor **ins;
    mp_tensor **outs;
    mp_tensor **narrow;      /* per output of the running node: its 16-bit tensor while the kernel writes fp32 */
    int32_t *live, nlive;    /* arena-placed live values, for the overlap check */
    int64_t live_bytes;
    mp_scratch scratch;
    mp_exec_stats st;
};

static const char *vname(const mp_exec *x, int32_t id) { return x->g->values[id].name ? x->g->values[id].name : "?"; }

mp_exec *mp_exec_new(mp_graph *g, const mp_exec_opts *opts, mp_err *err)
{
    mp_exec *x = calloc(1, sizeof *x);
    if (!x) {
        mp_fail(err, "out of memory");
        return NULL;
    }
    x->g = g;
    if (opts) x->o = *opts;
    x->nv = g->nvalues;
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    x->t = calloc(nv, sizeof *x->t);
    x->bytes = calloc(nv, sizeof *x->bytes);
    x->own = calloc(nv, 1);
    x->last = malloc(nv * sizeof *x->last);
    x->keep = calloc(nv, sizeof *x->keep);
    x->live = malloc(nv * sizeof *x->live);
    if (!x->t || !x->bytes || !x->own || !x->last || !x->keep || !x->live) goto oom;
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        mp_tensor *t = &x->t[i];
        x->last[i] = -1;
        x->bytes[i] = -1;
        t->dtype = v->dtype;
        t->rank = v->rank;
        t->numel = -1;
        if (v->kind != MP_KIND_TENSOR || v->rank < 0 || v->rank > MP_MAX_RANK) continue;
        t->dims = calloc((size_t)(v->rank ? v->rank : 1), sizeof *t->dims);
        if (!t->dims) goto oom;
        int64_t n = 1;
        bool known = true;
        for (int d = 0; d < v->rank; d++) {
            mp_dim r = mp_dim_resolve(g, v->dims[d]);
            t->dims[d] = r.v;
            if (r.v < 0 || !mp_mul_ok(n, r.v, &n)) known = false;
        }
        size_t es = mp_elem_size(v->dtype);
        int64_t b;
        if (known && es && mp_mul_ok(n, (int64_t)es, &b)) {
            t->numel = n;
            x->bytes[i] = b;
        }
        /* constants: folded contents or small initializers, used in place */
        if (v->producer < 0 && v->konst && v->konst->data && v->konst->dtype == v->dtype && v->konst->numel == t->numel) {
            t->data = v->konst->data;
            x->own[i] = OWN_KONST;
        }
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i] >= 0) x->keep[g->outputs[i]] = true;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const mp_node *nd = &g->nodes[n];
        if (nd->nin > x->maxin) x->maxin = nd->nin;
        if (nd->nout > x->maxout) x->maxout = nd->nout;
        for (int32_t k = 0; k < nd->nin; k++)
            if (nd->in[k] >= 0 && nd->in[k] < g->nvalues) x->last[nd->in[k]] = n;
    }
    /* a transposed view reads its base's bytes: the base lives as long as the view is read */
    for (int32_t i = 0; i < g->nvalues; i++) {
        if (!(g->values[i].flags & MP_VAL_TVIEW) || g->values[i].alias < 0) continue;
        int32_t base = g->values[i].alias;
        if (x->last[i] > x->last[base]) x->last[base] = x->last[i];
    }
    x->ins = calloc((size_t)(x->maxin + 1), sizeof *x->ins);
    x->outs = calloc((size_t)(x->maxout + 1), sizeof *x->outs);
    x->narrow = calloc((size_t)(x->maxout + 1), sizeof *x->narrow);
    if (!x->ins || !x->outs || !x->narrow) goto oom;
    if (x->o.offsets) { /* the plan must fit its arena, element-aligned */
        for (int32_t i = 0; i < g->nvalues; i++) {
            int64_t off = x->o.offsets[i], b = x->bytes[i], end;
            if (off < 0 || g->values[i].producer < 0) continue;
            if (b < 0) continue; /* reported when the node runs */
            if (!x->o.arena || !mp_add_ok(off, b, &end) || end > x->o.arena_bytes) {
                mp_fail(err, "plan: value '%s' at [%lld, +%lld) is outside the arena of %lld bytes", vname(x, i),
                        (long long)off, (long long)b, (long long)x->o.arena_bytes);
                mp_exec_free(x);
                return NULL;
            }
            size_t es = mp_elem_size(g->values[i].dtype);
            if (es && off % (int64_t)es) {
                mp_fail(err, "plan: value '%s' at offset %lld is not aligned to its %zu-byte elements", vname(x, i), (long long)off, es);
                mp_exec_free(x);
                return NULL;
            }
        }
    }
    x->scratch.limit = x->o.scratch_limit > 0 ? (size_t)x->o.scratch_limit : 0;
    openblas_set_num_threads(1); /* one thread: fixed blocking, the same bits every run */
    return x;
oom:
    mp_exec_free(x);
    mp_fail(err, "out of memory");
    return NULL;
}

static void release(mp_exec *x, int32_t id)
{
    if (x->own[id] == OWN_HEAP) free(x->t[id].data);
    if (x->own[id] == OWN_HEAP || x->own[id] == OWN_ARENA) {
        x->live_bytes -= x->bytes[id];
        x->t[id].data = NULL;
        x->own[id] = OWN_NONE;
        for (int32_t i = 0; i < x->nlive; i++)
            if (x->live[i] == id) {
                x->live[i] = x->live[--x->nlive];
                break;
            }
    }
}

void mp_exec_free(mp_exec *x)
{
    if (!x) return;
    for (int32_t i = 0; i < x->nv && x->t && x->own; i++) {
        release(x, i);
        if (x->own[i] == OWN_WEIGHT) free(x->t[i].data);
        free(x->t[i].dims);
    }
    scratch_reset(&x->scratch);
    free(x->scratch.buf);
    free(x->t);
    free(x->bytes);
    free(x->own);
    free(x->last);
    free(x->keep);
    free(x->live);
    free(x->ins);
    free(x->outs);
    free(x->narrow);
    free(x);
}

int mp_exec_bind(mp_exec *x, int32_t id, const mp_tensor *t, mp_err *err)
{
    if (id < 0 || id >= x->nv) return mp_fail(err, "bind: no value %d", id);
    const mp_value *v = &x->g->values[id];
    if (v->producer >= 0) return mp_fail(err, "bind: '%s' is computed by a node, not an input", vname(x, id));
    mp_tensor *s = &x->t[id];
    if (!mp_elem_size(v->dtype) && v->dtype != MP_UNDEFINED)
        return mp_kunsupported(err, "bind: '%s' has dtype %s, which the executor cannot hold", vname(x, id), mp_dtype_name(v->dtype));
    if (x->bytes[id] < 0) return mp_fail(err, "bind: '%s' has an unknown shape (bind its symbolic dims, then infer)", vname(x, id));
    bool same = t->dtype == s->dtype && t->rank == s->rank;
    for (int i = 0; same && i < t->rank; i++) same = t->dims[i] == s->dims[i];
    if (!same) {
        char buf[128];
        return mp_fail(err, "bind: '%s' is %s, the buffer is %s of rank %d", vname(x, id), mp_value_type_str(x->g, v, buf, sizeof buf),
                       mp_dtype_name(t->dtype), t->rank);
    }
    if (!t->data && s->numel > 0) return mp_fail(err, "bind: '%s' buffer has no data", vname(x, id));
    if (x->own[id] == OWN_WEIGHT) free(s->data);
    s->data = t->data;
    x->own[id] = OWN_BOUND;
    return 0;
}

/* ---- weights from the model file -------------------------------------------- */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* Decodes a packed typed field (TensorProto field number `field`) into t. */
static int decode_typed(mp_tensor *t, int field, const uint8_t *p, int64_t len, const char *name, mp_err *err)
{
    const uint8_t *end = p + len;
    int64_t n = 0;
    if (field == 4 || field == 10) { /* fixed32 floats, fixed64 doubles */
        int64_t w = field == 4 ? 4 : 8;
        if (t->dtype != (field == 4 ? MP_FLOAT : MP_DOUBLE) || len != t->numel * w)
            return mp_fail(err, "weights: '%s' typed data does not match its %s[%lld]", name, mp_dtype_name(t->dtype), (long long)t->numel);
        memcpy(t->data, p, (size_t)len);
        return 0;
    }
    for (; p < end && n < t->numel; n++) {
        uint64_t v;
        if (!varint(&p, end, &v)) return mp_fail(err, "weights: '%s' has a bad varint", name);
        if (t->dtype == MP_FLOAT16 || t->dtype == MP_BFLOAT16) ((uint16_t *)t->data)[n] = (uint16_t)v; /* the bits */
        else if (field == 5) mp_tensor_set_i64(t, n, (int32_t)(uint32_t)v);
        else mp_tensor_set_i64(t, n, (int64_t)v);
    }
    if (n != t->numel || p != end) return mp_fail(err, "weights: '%s' has %s elements than its shape", name, n < t->numel ? "fewer" : "more");
    return 0;
}

/* Reads value id's data reference (the file's dtype `ft`, `bytes` bytes) into
 * a new buffer *out: 0, 1 when its external file is absent, or -1. */
static int read_ref(mp_exec *x, const mp_model *m, int32_t id, mp_dtype ft, int64_t bytes, void **out, mp_err *err)
{
    const mp_data_ref *r = &x->g->values[id].data;
    int64_t end;
    FILE *f = NULL;
    char path[4096];
    if (r->kind == MP_DATA_EXTERNAL) {
        /* Weights are metadata to the planner, so their file may be absent:
         * such a weight is left unbound, and the caller seeds it. */
        snprintf(path, sizeof path, "%s/%s", x->g->model_dir ? x->g->model_dir : ".", r->location ? r->location : "");
        if (!(f = fopen(path, "rb"))) {
            if (!x->st.weights_absent++) snprintf(x->st.first_absent, sizeof x->st.first_absent, "%s", path);
            return 1;
        }
    }
    mp_tensor t = x->t[id];
    t.dtype = ft;
    t.data = *out = malloc((size_t)(bytes ? bytes : 1));
    if (!t.data) {
        if (f) fclose(f);
        return mp_fail(err, "weights: out of memory for '%s'", vname(x, id));
    }
    if (f) {
        bool ok = r->length == bytes && fseek(f, (long)r->offset, SEEK_SET) == 0 &&
                  fread(t.data, 1, (size_t)r->length, f) == (size_t)r->length;
        fclose(f);
        if (!ok) return mp_fail(err, "weights: cannot read %lld bytes at %lld of '%s'", (long long)r->length, (long long)r->offset, path);
        return 0;
    }
    if (!m || !m->map || !mp_add_ok(r->offset, r->length, &end) || end > (int64_t)m->size)
        return mp_fail(err, "weights: '%s' lies outside the model file", vname(x, id));
    const uint8_t *p = m->map + r->offset;
    if (r->kind == MP_DATA_RAW) {
        if (r->length != bytes) return mp_fail(err, "weights: '%s' raw data has %lld bytes, its shape %lld", vname(x, id), (long long)r->length, (long long)bytes);
        memcpy(t.data, p, (size_t)r->length); /* copied: file offsets are not aligned */
        return 0;
    }
    return decode_typed(&t, r->field, p, r->length, vname(x, id), err);
}

/* Gives value id buffer data, owned by the executor. */
static void own_weight(mp_exec *x, int32_t id, void *data, int64_t bytes)
{
    x->t[id].data = data;
    x->own[id] = OWN_WEIGHT;
    x->st.weight_bytes += bytes;
}

/* The fp32 master `<name>.master` of a lowered parameter, when it still needs data; -1 if none. */
static int32_t unloaded_master(const mp_exec *x, int32_t id)
{
    char name[600];
    snprintf(name, sizeof name, "%s.master", vname(x, id));
    int32_t mid = mp_graph_find(x->g, name);
    return mid >= 0 && x->own[mid] == OWN_NONE && x->t[mid].dtype == MP_FLOAT && x->t[mid].numel == x->t[id].numel ? mid : -1;
}

int mp_exec_load_weights(mp_exec *x, const mp_model *m, mp_err *err)
{
    mp_graph *g = x->g;
    for (int32_t i = 0; i < g->ninits; i++) {
        int32_t id = g->inits[i];
        const mp_value *v = &g->values[id];
        mp_tensor *t = &x->t[id];
        if (v->data.kind == MP_DATA_NONE || v->data.kind == MP_DATA_INLINE) continue;
        /* A mixed-precision step lowers each fp32 parameter to a 16-bit working
         * copy (passes/train.c) whose file data is still fp32: the copy gets the
         * rounded values, its fp32 master the exact ones (also when the copy
         * is a folded constant). */
        bool lowered = mp_dtype_is_half(t->dtype) && t->numel >= 0 &&
                       (v->data.kind == MP_DATA_TYPED ? v->data.field == 4 : v->data.length == t->numel * 4);
        int32_t master = lowered ? unloaded_master(x, id) : -1;
        if (x->own[id] != OWN_NONE && master < 0) continue;
        if (x->bytes[id] < 0) return mp_fail(err, "weights: '%s' has an unsupported dtype or unknown shape", vname(x, id));
        if (v->data.offset < 0 || v->data.length < 0) return mp_fail(err, "weights: '%s' has a bad data reference", vname(x, id));
        void *data = NULL;
        int64_t bytes = lowered ? t->numel * 4 : x->bytes[id];
        int rc = read_ref(x, m, id, lowered ? MP_FLOAT : t->dtype, bytes, &data, err);
        if (rc) {
            free(data);
            if (rc < 0) return -1;
            continue;
        }
        if (!lowered) {
            own_weight(x, id, data, bytes);
            continue;
        }
        if (x->own[id] == OWN_NONE) {
            uint16_t *low = malloc((size_t)(x->bytes[id] ? x->bytes[id] : 1));
            if (!low) {
                free(data);
                return mp_fail(err, "weights: out of memory for '%s'", vname(x, id));
            }
            mp_half_round(t->dtype, data, low, t->numel);
            own_weight(x, id, low, x->bytes[id]);
        }
        if (master >= 0) own_weight(x, master, data, bytes);
        else free(data);
    }
    return 0;
}

/* ---- running ----------------------------------------------------------------- */

/* Values on one alias chain (value->alias: an in-place write or a view) share
 * their bytes by design: the plan gives them their owner's offset. */
static bool same_storage(const mp_graph *g, int32_t a, int32_t b) { return mp_value_root(g, a) == mp_value_root(g, b); }

static int alloc_output(mp_exec *x, int32_t node, int32_t id, mp_err *err)
{
    mp_tensor *t = &x->t[id];
    const mp_value *v = &x->g->values[id];
    if (v->kind != MP_KIND_TENSOR) return mp_kunsupported(err, "output '%s' is not a tensor", vname(x, id));
    if (x->bytes[id] < 0) {
        char buf[128];
        if (!mp_elem_size(v->dtype) && v->dtype != MP_UNDEFINED) return mp_kunsupported(err, "output '%s' has dtype %s", vname(x, id), mp_dtype_name(v->dtype));
        return mp_fail(err, "output '%s' has no known shape (%s)", vname(x, id), mp_value_type_str(x->g, v, buf, sizeof buf));
    }
    int64_t off = x->o.offsets ? x->o.offsets[id] : -1, b = x->bytes[id];
    if (off >= 0) {
        t->data = (char *)x->o.arena + off;
        x->own[id] = OWN_ARENA;
        if (x->o.check_overlap && b > 0)
            for (int32_t i = 0; i < x->nlive; i++) {
                int32_t o = x->live[i];
                int64_t lo = x->o.offsets[o], hi = lo + x->bytes[o];
                if (x->bytes[o] > 0 && off < hi && lo < off + b && !same_storage(x->g, id, o))
                    return mp_fail(err, "plan: '%s' [%lld, +%lld) overlaps live '%s' [%lld, +%lld)", vname(x, id), (long long)off,
                                   (long long)b, vname(x, o), (long long)lo, (long long)x->bytes[o]);
            }
        x->live[x->nlive++] = id;
        if (off + b > x->st.arena_used) x->st.arena_used = off + b;
    } else {
        t->data = x->o.poison ? malloc((size_t)(b ? b : 1)) : calloc(1, (size_t)(b ? b : 1));
        if (!t->data) return mp_fail(err, "out of memory for '%s' (%lld bytes)", vname(x, id), (long long)b);
        x->own[id] = OWN_HEAP;
    }
    /* not over an input it shares an arena buffer with (a view, an in-place write): the kernel reads it */
    if (x->o.poison && !(off >= 0 && v->alias >= 0)) memset(t->data, 0xff, (size_t)b);
    x->live_bytes += b;
    (void)node;
    return 0;
}

/* Compares a computed output with its folded contents. */
static void check_folded(mp_exec *x, int32_t id)
{
    const mp_tensor *k = x->g->values[id].konst, *t = &x->t[id];
    if (!k || !k->data || k->numel != t->numel || k->dtype != t->dtype) return;
    x->st.folded_checked++;
    for (int64_t i = 0; i < t->numel; i++) {
        bool same;
        if (mp_dtype_is_float(t->dtype)) {
            double a = mp_tensor_get_f64(t, i), b = mp_tensor_get_f64(k, i);
            same = a == b || (a != a && b != b) || fabs(a - b) <= 1e-6 + 1e-4 * fabs(b);
        } else {
            same = mp_tensor_get_i64(t, i) == mp_tensor_get_i64(k, i);
        }
        if (!same) {
            if (!x->st.folded_mismatch++)
                snprintf(x->st.first_mismatch, sizeof x->st.first_mismatch, "'%s' element %lld: kernel %g, folded %g", vname(x, id),
                         (long long)i, mp_tensor_get_f64(t, i), mp_tensor_get_f64(k, i));
            return;
        }
    }
}

/* An op without a kernel whose outputs were all folded: copy the contents. */
static int run_folded(mp_exec *x, const mp_node *nd, mp_err *err)
{
    for (int32_t k = 0; k < nd->nout; k++) {
        int32_t id = nd->out[k];
        if (id < 0) continue;
        const mp_tensor *c = x->g->values[id].konst;
        if (!c || !c->data || c->numel != x->t[id].numel || c->dtype != x->t[id].dtype) return 1;
    }
    for (int32_t k = 0; k < nd->nout; k++)
        if (nd->out[k] >= 0 && mp_copy_tensor(x->g->values[nd->out[k]].konst, &x->t[nd->out[k]], err)) return -1;
    return 0;
}

/* The elements of transposed view v (MP_VAL_TVIEW) in v's own layout, in
 * scratch: the kernels read plain row-major tensors, and the arena holds only
 * the base's bytes (a GPU GEMM reads them with its transpose flag instead). */
static const mp_tensor *materialize_tview(mp_exec *x, int32_t v, mp_err *err)
{
    const mp_tensor *view = &x->t[v];
    mp_tensor *t = mp_scratch_alloc(&x->scratch, sizeof *t);
    void *data = t ? mp_scratch_array(&x->scratch, view->numel, mp_elem_size(view->dtype)) : NULL;
    if (!data) {
        mp_fail(err, "out of scratch memory for the transposed view '%s'", vname(x, v));
        return NULL;
    }
    *t = *view;
    t->data = data;
    int r = view->rank;
    int64_t dstr[MP_MAX_RANK], sstr[MP_MAX_RANK], step = 1;
    for (int a = r - 1; a >= 0; a--) dstr[a] = step, step *= view->dims[a];
    memcpy(sstr, dstr, sizeof sstr);
    /* the base is [.., b, a] when the view is [.., a, b]: swap the last two strides */
    sstr[r - 1] = view->dims[r - 2];
    sstr[r - 2] = 1;
    mp_copy_strided(data, dstr, view->data, sstr, r, view->dims, mp_elem_size(view->dtype));
    return t;
}

static bool is_tview(const mp_graph *g, int32_t v) { return v >= 0 && (g->values[v].flags & MP_VAL_TVIEW); }

/* ---- 16-bit floats: the fp32 kernel between widened inputs and rounded outputs ---- */

/* An fp32 tensor shaped like `like`, in scratch. */
static mp_tensor *scratch_f32(mp_exec *x, const mp_tensor *like)
{
    mp_tensor *t = mp_scratch_alloc(&x->scratch, sizeof *t);
    float *d = t ? mp_scratch_array(&x->scratch, like->numel > 0 ? like->numel : 1, sizeof *d) : NULL;
    if (!d) return NULL;
    *t = *like;
    t->dtype = MP_FLOAT;
    t->data = d;
    return t;
}

/* A node reading or writing float16/bfloat16 whose op has no 16-bit kernel
 * (kernels.def MP_NATIVE16) runs its fp32 kernel, as tensor-core kernels
 * accumulate in fp32: each 16-bit input is widened into scratch (exact), each
 * 16-bit output is computed into fp32 scratch (narrow[k] keeps its own tensor)
 * and rounded back by round16. The copies are kernel scratch, counted in
 * scratch_peak and never in the arena, so a plan's arena is unchanged.
 * Returns 0 (nothing to widen), 1 (widened) or -1. */
static int widen16(mp_exec *x, const mp_node *nd, mp_err *err)
{
    bool any = false;
    for (int32_t k = 0; k < nd->nin; k++) any |= x->ins[k] && mp_dtype_is_half(x->ins[k]->dtype);
    for (int32_t k = 0; k < nd->nout; k++) any |= x->outs[k] && mp_dtype_is_half(x->outs[k]->dtype);
    if (!any || native16[nd->op]) return 0;
    for (int32_t k = 0; k < nd->nin; k++) {
        const mp_tensor *in = x->ins[k];
        if (!in || !mp_dtype_is_half(in->dtype)) continue;
        mp_tensor *w = scratch_f32(x, in);
        if (!w) return mp_fail(err, "out of scratch memory widening input %d to fp32", k);
        mp_half_widen(in->dtype, in->data, w->data, in->numel);
        x->ins[k] = w;
    }
    for (int32_t k = 0; k < nd->nout; k++) {
        x->narrow[k] = NULL;
        mp_tensor *out = x->outs[k];
        if (!out || !mp_dtype_is_half(out->dtype)) continue;
        mp_tensor *w = scratch_f32(x, out);
        if (!w) return mp_fail(err, "out of scratch memory for output %d in fp32", k);
        if (x->o.poison) memset(w->data, 0xff, (size_t)out->numel * sizeof(float));
        x->narrow[k] = out;
        x->outs[k] = w;
    }
    return 1;
}

/* Rounds the fp32 outputs of a widened node into their 16-bit tensors. */
static void round16(mp_exec *x, const mp_node *nd)
{
    for (int32_t k = 0; k < nd->nout; k++)
        if (x->narrow[k]) mp_half_round(x->narrow[k]->dtype, x->outs[k]->data, x->narrow[k]->data, x->narrow[k]->numel);
}

static int run_node(mp_exec *x, int32_t n, mp_err *err)
{
    mp_graph *g = x->g;
    const mp_node *nd = &g->nodes[n];
    for (int32_t k = 0; k < nd->nin; k++) {
        int32_t id = nd->in[k];
        x->ins[k] = NULL;
        if (id < 0) continue;
        if (!x->t[id].data && x->t[id].numel != 0) {
            if (g->values[id].producer >= 0) return mp_fail(err, "input '%s' is not computed yet (graph out of order?)", vname(x, id));
            return mp_fail(err, "input '%s' has no data: bind it or load the weights", vname(x, id));
        }
        if (g->values[id].kind != MP_KIND_TENSOR) return mp_kunsupported(err, "input '%s' is not a tensor", vname(x, id));
        x->ins[k] = is_tview(g, id) ? materialize_tview(x, id, err) : &x->t[id];
        if (!x->ins[k]) return -1;
    }
    if (nd->nout == 1 && is_tview(g, nd->out[0]) && g->values[nd->out[0]].alias == nd->in[0]) {
        x->t[nd->out[0]].data = x->t[nd->in[0]].data; /* the Transpose of a view moves nothing */
        x->own[nd->out[0]] = OWN_NONE;
        return 0;
    }
    for (int32_t k = 0; k < nd->nout; k++) {
        int32_t id = nd->out[k];
        x->outs[k] = NULL;
        if (id < 0) continue;
        int rc = alloc_output(x, n, id, err);
        if (rc) return rc;
        x->outs[k] = &x->t[id];
    }
    if (x->live_bytes > x->st.peak_bytes) {
        x->st.peak_bytes = x->live_bytes;
        x->st.peak_node = n;
    }
    mp_kernel_fn fn = mp_kernel_find(nd->op);
    if (!fn) {
        int rc = run_folded(x, nd, err);
        if (rc == 1) return mp_kunsupported(err, "no CPU kernel for %s%s%s", *nd->domain ? nd->domain : "", *nd->domain ? "." : "", nd->op_type);
        return rc;
    }
    int wide = widen16(x, nd, err);
    if (wide < 0) return -1;
    mp_kargs k = {g, nd, n, mp_graph_opset(g, nd->domain), nd->nin, nd->nout, x->ins, x->outs, &x->scratch, x->o.seed};
    int rc = fn(&k, err);
    if (rc) return rc;
    if (wide) round16(x, nd);
    if (x->o.check_folded)
        for (int32_t j = 0; j < nd->nout; j++)
            if (nd->out[j] >= 0) check_folded(x, nd->out[j]);
    return 0;
}

int mp_exec_run(mp_exec *x, mp_err *err)
{
    mp_graph *g = x->g;
    for (int32_t i = 0; i < x->nv; i++) release(x, i);
    x->live_bytes = 0;
    x->st.peak_bytes = 0;
    x->st.peak_node = -1;
    x->st.arena_used = 0;
    x->st.nodes_run = 0;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const mp_node *nd = &g->nodes[n];
        mp_err inner = {""};
        int rc = run_node(x, n, &inner);
        if (x->scratch.peak > (size_t)x->st.scratch_peak) x->st.scratch_peak = (int64_t)x->scratch.peak;
        scratch_reset(&x->scratch);
        if (rc) {
            mp_fail(err, "node '%s' (%s): %s", nd->name, nd->op_type, inner.msg[0] ? inner.msg : "kernel failed");
            return rc;
        }
        x->st.nodes_run++;
        /* free what this node read last (a transposed view's base too: its last read may be through the
         * view), and outputs nobody reads */
        for (int32_t k = 0; k < nd->nin; k++) {
            int32_t id = nd->in[k];
            if (id < 0) continue;
            if (x->last[id] == n && !x->keep[id]) release(x, id);
            int32_t base = (g->values[id].flags & MP_VAL_TVIEW) ? g->values[id].alias : -1;
            if (base >= 0 && x->last[base] == n && !x->keep[base]) release(x, base);
        }
        for (int32_t k = 0; k < nd->nout; k++) {
            int32_t id = nd->out[k];
            if (id >= 0 && x->last[id] < 0 && !x->keep[id]) release(x, id);
        }
    }
    return 0;
}

const mp_tensor *mp_exec_value(const mp_exec *x, int32_t id)
{
    if (id < 0 || id >= x->nv || (!x->t[id].data && x->t[id].numel != 0) || x->t[id].numel < 0) return NULL;
    return &x->t[id];
}

const mp_exec_stats *mp_exec_get_stats(const mp_exec *x) { return &x->st; }
