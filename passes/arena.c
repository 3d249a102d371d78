/* arena.c - static offsets, in four passes: check and pad the buffers, bound
 * (load sweep and time-disjoint parts), the greedy placements, then the
 * branch and bound on the parts that keep the arena above the bound.
 * Sizes and offsets are held in units of the alignment throughout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/arena.h"

const char *const mp_arena_method_names[MP_ARENA_METHOD_COUNT] = {"by-size", "by-start", "by-contention", "search"};

mp_arena_opts mp_arena_defaults(void)
{
    return (mp_arena_opts){.alignment = 16, .time_limit = 5.0, .node_limit = 0, .search_max_buffers = 3000,
                           .sweep_max_buffers = 4096};
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* upper - lower, saturated */
static int64_t life(const mp_arena_buf *b)
{
    int64_t d;
    return __builtin_sub_overflow(b->upper, b->lower, &d) ? INT64_MAX : d;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ---- the instance ----------------------------------------------------------- */

typedef struct inst {
    const mp_arena_buf *b;
    int32_t n;
    int64_t align;
    int64_t *u;          /* n: size in units (rounded up) */
    int32_t *by_lower;   /* n: ids sorted by lower, then id */
    int32_t *pos;        /* n: position of each id in by_lower */
    int64_t *lowers;     /* n: lower of by_lower[k] */
    int32_t *part_at;    /* nparts + 1: part k is by_lower[part_at[k] .. part_at[k+1]) */
    int32_t nparts;
    const atomic_bool *cancel; /* mp_arena_opts.cancel */
    int32_t sweep_max;         /* mp_arena_opts.sweep_max_buffers */
} inst;

static bool cancelled(const inst *in) { return in->cancel && atomic_load(in->cancel); }

typedef struct key3 {
    int64_t k1, k2;
    int32_t id;
} key3;

static int cmp_key3(const void *pa, const void *pb)
{
    const key3 *a = pa, *b = pb;
    if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2) return a->k2 < b->k2 ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* ids sorted by (k1, k2, id) ascending, into out[n]. */
static int sort_ids(int32_t n, const int64_t *k1, const int64_t *k2, int32_t *out)
{
    key3 *k = malloc((size_t)(n ? n : 1) * sizeof *k);
    if (!k) return -1;
    for (int32_t i = 0; i < n; i++) k[i] = (key3){k1[i], k2 ? k2[i] : 0, i};
    qsort(k, (size_t)n, sizeof *k, cmp_key3);
    for (int32_t i = 0; i < n; i++) out[i] = k[i].id;
    free(k);
    return 0;
}

static void inst_free(inst *in)
{
    free(in->u);
    free(in->by_lower);
    free(in->pos);
    free(in->lowers);
    free(in->part_at);
}

/* Pass 1: checks the buffers, pads the sizes and sorts by start. */
static int inst_init(inst *in, const mp_arena_buf *b, int32_t n, int64_t align, mp_err *err)
{
    memset(in, 0, sizeof *in);
    in->b = b;
    in->n = n;
    in->align = align;
    size_t m = (size_t)(n ? n : 1);
    in->u = malloc(m * sizeof *in->u);
    in->by_lower = malloc(m * sizeof *in->by_lower);
    in->pos = malloc(m * sizeof *in->pos);
    in->lowers = malloc(m * sizeof *in->lowers);
    in->part_at = malloc((m + 1) * sizeof *in->part_at);
    int64_t *lo = calloc(m, sizeof *lo);
    if (!in->u || !in->by_lower || !in->pos || !in->lowers || !in->part_at || !lo) {
        free(lo);
        return mp_fail(err, "out of memory");
    }
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        char nm[160];
        if (b[i].name) snprintf(nm, sizeof nm, "'%s'", b[i].name);
        else snprintf(nm, sizeof nm, "buffer %d", i);
        if (b[i].lower >= b[i].upper) {
            free(lo);
            return mp_fail(err, "arena: %s has an empty lifetime [%lld, %lld)", nm, (long long)b[i].lower,
                           (long long)b[i].upper);
        }
        if (b[i].size < 0) {
            free(lo);
            return mp_fail(err, "arena: %s has a negative size %lld", nm, (long long)b[i].size);
        }
        in->u[i] = b[i].size / align + (b[i].size % align != 0);
        /* every offset stays below the sum of the padded sizes: keep that in range */
        if (!mp_add_ok(total, in->u[i], &total) || !mp_mul_ok(total, align, &(int64_t){0})) {
            free(lo);
            return mp_fail(err, "arena: the buffers' total size overflows 64 bits");
        }
        lo[i] = b[i].lower;
    }
    if (sort_ids(n, lo, NULL, in->by_lower)) {
        free(lo);
        return mp_fail(err, "out of memory");
    }
    free(lo);
    /* parts: cut wherever no buffer started so far lives past the next start */
    int64_t reach = INT64_MIN;
    for (int32_t k = 0; k < n; k++) {
        int32_t i = in->by_lower[k];
        in->pos[i] = k;
        in->lowers[k] = b[i].lower;
        if (b[i].lower >= reach) in->part_at[in->nparts++] = k;
        reach = max64(reach, b[i].upper);
    }
    in->part_at[in->nparts] = n;
    return 0;
}

/* Pass 2: the most live at one instant, in bytes and in padded units (ends
 * before starts at equal times: lifetimes are half-open). */
typedef struct event {
    int64_t t;
    int32_t start; /* 0 end, 1 start */
    int32_t id;
} event;

static int cmp_event(const void *pa, const void *pb)
{
    const event *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->start - b->start;
}

static int load_bound(const inst *in, int64_t *bytes, int64_t *units)
{
    event *e = malloc((size_t)(2 * in->n + 1) * sizeof *e);
    if (!e) return -1;
    for (int32_t i = 0; i < in->n; i++) {
        e[2 * i] = (event){in->b[i].lower, 1, i};
        e[2 * i + 1] = (event){in->b[i].upper, 0, i};
    }
    qsort(e, (size_t)(2 * in->n), sizeof *e, cmp_event);
    int64_t lb = 0, lu = 0, cb = 0, cu = 0;  /* totals fit: inst_init checked the sum of padded sizes */
    for (int32_t k = 0; k < 2 * in->n; k++) {
        int64_t s = in->b[e[k].id].size, u = in->u[e[k].id];
        cb += e[k].start ? s : -s;
        cu += e[k].start ? u : -u;
        lb = max64(lb, cb);
        lu = max64(lu, cu);
    }
    free(e);
    *bytes = lb;
    *units = lu;
    return 0;
}

static int64_t arena_units(const inst *in, const int64_t *off, int32_t from, int32_t to)
{
    int64_t a = 0;
    for (int32_t k = from; k < to; k++) {
        int32_t i = in->by_lower[k];
        if (in->u[i]) a = max64(a, off[i] + in->u[i]);
    }
    return a;
}

static int64_t arena_bytes(const inst *in, const int64_t *off)
{
    int64_t a = 0;
    for (int32_t i = 0; i < in->n; i++)
        if (in->b[i].size) a = max64(a, off[i] * in->align + in->b[i].size);
    return a;
}

/* ---- pass 3: greedy placement over an interval sweep ------------------------- */

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* The position of v in the sorted t[n] (the first element >= v). */
static int64_t find_time(const int64_t *t, int32_t n, int64_t v)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (t[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* c[i]: the most units live at one instant of buffer i's lifetime, its
 * contention. The distinct times cut the horizon into intervals of constant
 * load; a sparse table of their maxima answers each lifetime in O(1). */
static int contention(const inst *in, int64_t *c)
{
    int32_t n = in->n, nt = 0, levels = 1;
    int64_t *t = malloc((size_t)(2 * n + 1) * sizeof *t), *table = NULL;
    if (!t) return -1;
    for (int32_t i = 0; i < n; i++) t[nt++] = in->b[i].lower, t[nt++] = in->b[i].upper;
    qsort(t, (size_t)nt, sizeof *t, cmp_i64);
    int32_t m = 0;
    for (int32_t k = 0; k < nt; k++)
        if (m == 0 || t[k] != t[m - 1]) t[m++] = t[k];
    while ((INT32_C(1) << levels) <= m) levels++;
    table = calloc((size_t)levels * (size_t)(m ? m : 1), sizeof *table); /* level j: max of 2^j intervals */
    if (!table) {
        free(t);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) { /* the load of interval k, [t[k], t[k+1]), as a difference array */
        table[find_time(t, m, in->b[i].lower)] += in->u[i];
        table[find_time(t, m, in->b[i].upper)] -= in->u[i];
    }
    for (int32_t k = 1; k < m; k++) table[k] += table[k - 1];
    for (int32_t j = 1; j < levels; j++)
        for (int32_t k = 0; k + (INT32_C(1) << j) <= m; k++)
            table[(size_t)j * m + k] =
                max64(table[(size_t)(j - 1) * m + k], table[(size_t)(j - 1) * m + k + (INT32_C(1) << (j - 1))]);
    for (int32_t i = 0; i < n; i++) {
        int32_t a = (int32_t)find_time(t, m, in->b[i].lower), b = (int32_t)find_time(t, m, in->b[i].upper);
        int32_t j = 0; /* intervals a .. b-1: two overlapping runs of 2^j */
        while ((INT32_C(2) << j) <= b - a) j++;
        c[i] = max64(table[(size_t)j * m + a], table[(size_t)j * m + b - (INT32_C(1) << j)]);
    }
    free(t);
    free(table);
    return 0;
}

/* A max tree over the buffers in by_lower order: the upper of each placed
 * buffer, INT64_MIN for the others. The placed buffers that conflict with
 * [lo, up) are those before the first start >= up whose upper > lo. */
typedef struct span {
    int64_t off, end;
} span;

typedef struct greedy {
    const inst *in;
    int32_t leaves;
    int64_t *mx;       /* 2 * leaves */
    span *hits;        /* n */
    int32_t nhits;
} greedy;

static void tree_set(greedy *g, int32_t k, int64_t v)
{
    int32_t x = k + g->leaves;
    g->mx[x] = v;
    for (x /= 2; x >= 1; x /= 2) g->mx[x] = max64(g->mx[2 * x], g->mx[2 * x + 1]);
}

static void tree_collect(greedy *g, const int64_t *off, int32_t x, int32_t xlo, int32_t xhi, int32_t p, int64_t lo)
{
    if (xlo >= p || g->mx[x] <= lo) return;
    if (x >= g->leaves) {
        int32_t i = g->in->by_lower[xlo];
        g->hits[g->nhits++] = (span){off[i], off[i] + g->in->u[i]};
        return;
    }
    int32_t mid = xlo + (xhi - xlo) / 2;
    tree_collect(g, off, 2 * x, xlo, mid, p, lo);
    tree_collect(g, off, 2 * x + 1, mid, xhi, p, lo);
}

/* static void NAME(T *a, int32_t n): sorts a by LESS(x, y) (on values), a
 * quicksort with the comparison inlined (the median of three its pivot,
 * insertion below 16), for the hot loops: glibc's qsort, a call per
 * comparison, took a tenth of GPT-2's planning. */
#define DEFINE_SORT(NAME, T, LESS)                                                                            \
    static void NAME(T *a, int32_t n)                                                                         \
    {                                                                                                         \
        while (n > 16) {                                                                                      \
            T x = a[0], y = a[n / 2], z = a[n - 1], p;                                                        \
            if (LESS(y, x)) p = x, x = y, y = p;                                                              \
            if (LESS(z, y)) y = z;                                                                            \
            p = LESS(y, x) ? x : y;                                                                           \
            int32_t i = 0, j = n - 1;                                                                         \
            while (i <= j) {                                                                                  \
                while (LESS(a[i], p)) i++;                                                                    \
                while (LESS(p, a[j])) j--;                                                                    \
                if (i <= j) {                                                                                 \
                    T t = a[i];                                                                               \
                    a[i++] = a[j];                                                                            \
                    a[j--] = t;                                                                               \
                }                                                                                             \
            }                                                                                                 \
            if (j + 1 < n - i) { /* recurse into the smaller side, loop on the larger */                      \
                NAME(a, j + 1);                                                                               \
                a += i;                                                                                       \
                n -= i;                                                                                       \
            } else {                                                                                          \
                NAME(a + i, n - i);                                                                           \
                n = j + 1;                                                                                    \
            }                                                                                                 \
        }                                                                                                     \
        for (int32_t i = 1; i < n; i++) {                                                                     \
            T t = a[i];                                                                                       \
            int32_t j = i;                                                                                    \
            for (; j > 0 && LESS(t, a[j - 1]); j--) a[j] = a[j - 1];                                          \
            a[j] = t;                                                                                         \
        }                                                                                                     \
    }

/* Spans by offset, the greedy's conflicts: equal offsets in either order leave the same gaps. */
static bool span_less(span a, span b) { return a.off < b.off; }
DEFINE_SORT(sort_spans, span, span_less)

/* Sorts n spans by offset into a (tmp: n scratch spans): LSD radix by bytes
 * of the offset for long runs (the conflicts of one buffer can be thousands),
 * the quicksort for short ones. */
static void radix_spans(span *a, span *tmp, int32_t n)
{
    if (n <= 64) {
        sort_spans(a, n);
        return;
    }
    int64_t top = 0;
    for (int32_t i = 0; i < n; i++) top = max64(top, a[i].off);
    span *src = a, *dst = tmp;
    for (int shift = 0; shift < 64 && (top >> shift) > 0; shift += 8) {
        int32_t count[257] = {0};
        for (int32_t i = 0; i < n; i++) count[((src[i].off >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (int32_t i = 0; i < n; i++) dst[count[(src[i].off >> shift) & 255]++] = src[i];
        span *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

typedef struct placed {
    int64_t off, end, lower, upper;
} placed;

/* greedy_by_size's placement, by a sweep over every placed buffer, kept in
 * offset order, instead of collecting and sorting each one's conflicts:
 * quadratic, but a tight scan (GPT-2's step, 1,600 buffers: the seven passes
 * of a placement 33-48 -> 11-19 ms). The same gaps in the same order (buffers
 * at one offset in either order leave the same gap before them). */
static int greedy_by_size_sweep(const inst *in, const int32_t *order, bool first_fit, int64_t *off)
{
    placed *pl = malloc((size_t)(in->n ? in->n : 1) * sizeof *pl);
    if (!pl) return -1;
    int32_t np = 0;
    for (int32_t k = 0; k < in->n; k++) {
        int32_t i = order[k];
        off[i] = 0;
        int64_t need = in->u[i], lo = in->b[i].lower, up = in->b[i].upper;
        if (!need) continue;
        int64_t cur = 0, at = -1, gap = INT64_MAX;
        for (int32_t h = 0; h < np; h++) {
            if (pl[h].lower >= up || pl[h].upper <= lo) continue; /* no conflict */
            int64_t room = pl[h].off - cur;
            if (room >= need && room < gap) {
                at = cur;
                gap = room;
                if (first_fit) break;
            }
            cur = max64(cur, pl[h].end);
        }
        off[i] = at >= 0 ? at : cur;
        int32_t a = 0, z = np; /* after the placed ones at offsets <= its own */
        while (a < z) {
            int32_t mid = a + (z - a) / 2;
            if (pl[mid].off <= off[i]) a = mid + 1;
            else z = mid;
        }
        memmove(pl + a + 1, pl + a, (size_t)(np - a) * sizeof *pl);
        pl[a] = (placed){off[i], off[i] + need, lo, up};
        np++;
    }
    free(pl);
    return 0;
}

/* Places buffers in `order`, each in the smallest gap that holds it among the
 * placed buffers it conflicts with (the lowest of equal gaps), on top when none;
 * with first_fit in the lowest gap that holds it. */
static int greedy_by_size(const inst *in, const int32_t *order, bool first_fit, int64_t *off)
{
    if (in->n <= in->sweep_max) return greedy_by_size_sweep(in, order, first_fit, off);
    greedy g = {.in = in, .leaves = 1};
    while (g.leaves < in->n) g.leaves *= 2;
    g.mx = malloc((size_t)(2 * g.leaves) * sizeof *g.mx);
    g.hits = malloc((size_t)(in->n ? in->n : 1) * sizeof *g.hits);
    span *tmp = malloc((size_t)(in->n ? in->n : 1) * sizeof *tmp);
    if (!g.mx || !g.hits || !tmp) {
        free(g.mx);
        free(g.hits);
        free(tmp);
        return -1;
    }
    for (int32_t x = 0; x < 2 * g.leaves; x++) g.mx[x] = INT64_MIN;
    for (int32_t k = 0; k < in->n; k++) {
        int32_t i = order[k];
        off[i] = 0;
        int64_t need = in->u[i];
        if (!need) continue;
        /* p: the first position whose start is >= this buffer's end */
        int32_t p0 = 0, p1 = in->n;
        while (p0 < p1) {
            int32_t mid = p0 + (p1 - p0) / 2;
            if (in->lowers[mid] < in->b[i].upper) p0 = mid + 1;
            else p1 = mid;
        }
        g.nhits = 0;
        tree_collect(&g, off, 1, 0, g.leaves, p0, in->b[i].lower);
        radix_spans(g.hits, tmp, g.nhits);
        int64_t cur = 0, at = -1, gap = INT64_MAX;
        for (int32_t h = 0; h < g.nhits; h++) {
            int64_t room = g.hits[h].off - cur;
            if (room >= need && room < gap) {
                at = cur;
                gap = room;
                if (first_fit) break;
            }
            cur = max64(cur, g.hits[h].end);
        }
        off[i] = at >= 0 ? at : cur;
        tree_set(&g, in->pos[i], in->b[i].upper);
    }
    free(g.mx);
    free(g.hits);
    free(tmp);
    return 0;
}

/* First fit in order of start: the buffers placed before one that it
 * conflicts with are exactly those still live at its start, so a sweep keeps
 * them in an array sorted by offset and needs no sort per buffer. */
static int greedy_by_start(const inst *in, const int32_t *order, int64_t *off)
{
    span *live = malloc((size_t)(in->n ? in->n : 1) * sizeof *live);
    int32_t *ends = malloc((size_t)(in->n ? in->n : 1) * sizeof *ends);  /* placed ids by upper */
    int64_t *up = malloc((size_t)(in->n ? in->n : 1) * sizeof *up);
    if (!live || !ends || !up) {
        free(live);
        free(ends);
        free(up);
        return -1;
    }
    for (int32_t i = 0; i < in->n; i++) up[i] = in->b[i].upper;
    if (sort_ids(in->n, up, NULL, ends)) {
        free(live);
        free(ends);
        free(up);
        return -1;
    }
    int32_t nlive = 0, e = 0;
    for (int32_t k = 0; k < in->n; k++) {
        int32_t i = order[k];
        /* retire what ends by this start (found by its offset: live offsets are distinct) */
        for (; e < in->n && in->b[ends[e]].upper <= in->b[i].lower; e++) {
            int32_t j = ends[e];
            if (!in->u[j]) continue;
            int32_t lo = 0, hi = nlive;
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if (live[mid].off < off[j]) lo = mid + 1;
                else hi = mid;
            }
            memmove(live + lo, live + lo + 1, (size_t)(nlive - lo - 1) * sizeof *live);
            nlive--;
        }
        off[i] = 0;
        if (!in->u[i]) continue;
        int64_t cur = 0;
        int32_t at = 0;
        for (; at < nlive && live[at].off - cur < in->u[i]; at++) cur = max64(cur, live[at].end);
        off[i] = cur;
        memmove(live + at + 1, live + at, (size_t)(nlive - at) * sizeof *live);
        live[at] = (span){cur, cur + in->u[i]};
        nlive++;
    }
    free(live);
    free(ends);
    free(up);
    return 0;
}

/* ---- pass 4: branch and bound on one part --------------------------------------- */

enum { FOUND, INFEASIBLE, LIMIT };

typedef struct undo {
    int32_t idx;
    int64_t val;
} undo;

typedef struct undo_stack {
    undo *a;
    size_t n, cap;
    bool oom;
} undo_stack;

static void push_undo(undo_stack *s, int32_t idx, int64_t val)
{
    if (s->n == s->cap) {
        size_t c = s->cap ? 2 * s->cap : 1024;
        undo *a = realloc(s->a, c * sizeof *a);
        if (!a) {
            s->oom = true;
            return;
        }
        s->a = a;
        s->cap = c;
    }
    s->a[s->n++] = (undo){idx, val};
}

typedef struct cand {
    int64_t off;
    int32_t pre, b;
} cand;

/* Candidates by (offset, preorder rank), at every node of the search: the
 * ranks are distinct, so their order is the one any sort gives
 * (raised_sections' ties in offset may come in any order: the set it finds
 * is the same). */
static bool cand_less(cand a, cand b) { return a.off < b.off || (a.off == b.off && a.pre < b.pre); }
DEFINE_SORT(sort_cands, cand, cand_less)

/* One part's search state; buffers are local indices 0..m-1, sections the
 * elementary intervals between the part's distinct lifetime ends (every
 * buffer of a section is live through all of it, so they stack). */
typedef struct search {
    int32_t m, nsec;
    int32_t *id;             /* m: global id */
    int64_t *sz;             /* m: units */
    int32_t *pre;            /* m: rank in the preorder */
    int32_t *slo, *shi;      /* m: sections [slo, shi) */
    int32_t *ov_at, *ov;     /* CSR: conflicting buffers */
    int32_t *sm_at, *sm;     /* CSR: buffers of each section, the unplaced first */
    int32_t *nun;            /* nsec: how many of a section's buffers are unplaced */
    int32_t *pos_at, *pos;   /* CSR over buffers: where b's entry of section slo[b] + j is in sm */
    int64_t *floor_;         /* nsec: no unplaced buffer of the section can go lower */
    int64_t *total;          /* nsec: units of the unplaced buffers of the section */
    int64_t *sec_total;      /* nsec: units of all its buffers */
    int64_t *minoff;         /* m: lowest offset left to an unplaced buffer (top of its placed conflicts) */
    int64_t *off;            /* m: -1 while unplaced */
    int32_t *unplaced, nunplaced; /* m: the unplaced buffers first (a placement swaps its buffer past them;
                                   * undone in LIFO order, counting it back restores the set) */
    int32_t *unplaced_at;    /* m: where each buffer is in unplaced */
    int64_t *sol;            /* m: the solution found */
    int32_t *cuts;           /* nsec: unplaced buffers live in both section x and x + 1 */
    int32_t *stamp, stampc;  /* nsec: dedup of affected sections */
    int32_t *seen, *next_at; /* nsec: a section seen in this placement (== stampc) points past itself */
    int32_t *affected;       /* nsec */
    cand *scratch;           /* m: candidates being sorted */
    int32_t *pool;           /* m (m + 1) / 2: the sorted candidates of each depth */
    undo_stack umin, ufloor;
    int64_t cap;
    int64_t nodes, node_budget;
    int64_t work, work_budget; /* buffers visited: a measure of time that is the same on every run */
    double deadline;
    const inst *in;
} search;

static void search_free(search *s)
{
    free(s->id);
    free(s->sz);
    free(s->pre);
    free(s->slo);
    free(s->shi);
    free(s->ov_at);
    free(s->ov);
    free(s->sm_at);
    free(s->sm);
    free(s->nun);
    free(s->pos_at);
    free(s->pos);
    free(s->floor_);
    free(s->total);
    free(s->sec_total);
    free(s->minoff);
    free(s->off);
    free(s->unplaced);
    free(s->unplaced_at);
    free(s->sol);
    free(s->stamp);
    free(s->seen);
    free(s->next_at);
    free(s->cuts);
    free(s->affected);
    free(s->pool);
    free(s->scratch);
    free(s->umin.a);
    free(s->ufloor.a);
}

/* Builds the state of part k (its buffers of nonzero size); -1 on OOM. */
static int search_init(search *s, const inst *in, int32_t k)
{
    memset(s, 0, sizeof *s);
    int32_t m = 0;
    for (int32_t q = in->part_at[k]; q < in->part_at[k + 1]; q++) m += in->u[in->by_lower[q]] > 0;
    s->m = s->nunplaced = m;
    size_t mm = (size_t)(m ? m : 1);
    s->id = malloc(mm * sizeof *s->id);
    s->sz = malloc(mm * sizeof *s->sz);
    s->pre = malloc(mm * sizeof *s->pre);
    s->slo = malloc(mm * sizeof *s->slo);
    s->shi = malloc(mm * sizeof *s->shi);
    s->minoff = calloc(mm, sizeof *s->minoff);
    s->off = malloc(mm * sizeof *s->off);
    s->unplaced = malloc(mm * sizeof *s->unplaced);
    s->unplaced_at = malloc(mm * sizeof *s->unplaced_at);
    s->sol = malloc(mm * sizeof *s->sol);
    s->ov_at = calloc(mm + 1, sizeof *s->ov_at);
    s->pool = malloc(mm * (mm + 1) / 2 * sizeof *s->pool);
    s->scratch = malloc(mm * sizeof *s->scratch);
    int64_t *t = malloc(2 * mm * sizeof *t);
    if (!s->id || !s->sz || !s->pre || !s->slo || !s->shi || !s->minoff || !s->off || !s->unplaced ||
        !s->unplaced_at || !s->sol || !s->ov_at || !s->pool || !s->scratch || !t) {
        free(t);
        return -1;
    }
    m = 0;
    for (int32_t q = in->part_at[k]; q < in->part_at[k + 1]; q++) {
        int32_t i = in->by_lower[q];
        if (!in->u[i]) continue;
        s->id[m] = i;
        s->sz[m] = in->u[i];
        s->off[m] = -1;
        s->unplaced[m] = s->unplaced_at[m] = m;
        t[2 * m] = in->b[i].lower;
        t[2 * m + 1] = in->b[i].upper;
        m++;
    }
    /* sections between distinct times */
    qsort(t, 2 * (size_t)m, sizeof *t, cmp_i64);
    int32_t nt = 0;
    for (int32_t j = 0; j < 2 * m; j++)
        if (!nt || t[j] != t[nt - 1]) t[nt++] = t[j];
    s->nsec = nt > 1 ? nt - 1 : 1;
    size_t ns = (size_t)s->nsec;
    s->floor_ = calloc(ns, sizeof *s->floor_);
    s->total = calloc(ns, sizeof *s->total);
    s->sec_total = calloc(ns, sizeof *s->sec_total);
    s->stamp = calloc(ns, sizeof *s->stamp);
    s->seen = calloc(ns, sizeof *s->seen);
    s->next_at = calloc(ns, sizeof *s->next_at);
    s->cuts = calloc(ns, sizeof *s->cuts);
    s->affected = malloc(ns * sizeof *s->affected);
    s->sm_at = calloc(ns + 1, sizeof *s->sm_at);
    if (!s->floor_ || !s->total || !s->sec_total || !s->stamp || !s->seen || !s->next_at || !s->cuts ||
        !s->affected || !s->sm_at) {
        free(t);
        return -1;
    }
    int64_t members = 0;
    for (int32_t b = 0; b < m; b++) {
        s->slo[b] = (int32_t)find_time(t, nt, in->b[s->id[b]].lower);
        s->shi[b] = (int32_t)find_time(t, nt, in->b[s->id[b]].upper);
        members += s->shi[b] - s->slo[b];
        for (int32_t c = s->slo[b]; c < s->shi[b]; c++) {
            s->total[c] += s->sz[b];
            s->sm_at[c + 1]++;
            if (c + 1 < s->shi[b]) s->cuts[c]++;
        }
    }
    free(t);
    for (int32_t c = 0; c < s->nsec; c++) s->sm_at[c + 1] += s->sm_at[c];
    memcpy(s->sec_total, s->total, ns * sizeof *s->total);
    s->sm = malloc((size_t)(members ? members : 1) * sizeof *s->sm);
    s->pos = malloc((size_t)(members ? members : 1) * sizeof *s->pos);
    s->pos_at = malloc((mm + 1) * sizeof *s->pos_at);
    s->nun = calloc(ns, sizeof *s->nun);
    if (!s->sm || !s->pos || !s->pos_at || !s->nun) return -1;
    s->pos_at[0] = 0;
    for (int32_t b = 0; b < m; b++) {
        s->pos_at[b + 1] = s->pos_at[b] + (s->shi[b] - s->slo[b]);
        for (int32_t c = s->slo[b]; c < s->shi[b]; c++) {
            int32_t q = s->sm_at[c] + s->nun[c]++;
            s->sm[q] = b;
            s->pos[s->pos_at[b] + c - s->slo[b]] = q;
        }
    }
    /* conflicts: pairs sharing a section (the part is small, m^2 is fine) */
    int64_t pairs = 0;
    for (int32_t a = 0; a < m; a++)
        for (int32_t b = 0; b < m; b++)
            if (a != b && s->slo[a] < s->shi[b] && s->slo[b] < s->shi[a]) s->ov_at[a + 1]++, pairs++;
    for (int32_t a = 0; a < m; a++) s->ov_at[a + 1] += s->ov_at[a];
    s->ov = malloc((size_t)(pairs ? pairs : 1) * sizeof *s->ov);
    if (!s->ov) return -1;
    for (int32_t a = 0, w = 0; a < m; a++)
        for (int32_t b = 0; b < m; b++)
            if (a != b && s->slo[a] < s->shi[b] && s->slo[b] < s->shi[a]) s->ov[w++] = b;
    return 0;
}

/* Preorders (ties of the dynamic order), as MiniMalloc's heuristics: T the
 * largest total of a section the buffer lives in, W its width in sections,
 * A its area. Sorted descending by the three keys in the given order. */
static const char heuristics[][4] = {"WAT", "TAW", "TWA"};

typedef struct key4 {
    int64_t k[3];
    int32_t id;
} key4;

static int cmp_key4_desc(const void *pa, const void *pb)
{
    const key4 *a = pa, *b = pb;
    for (int j = 0; j < 3; j++)
        if (a->k[j] != b->k[j]) return a->k[j] > b->k[j] ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static void search_preorder(search *s, const inst *in, const char *h)
{
    key4 *keys = malloc((size_t)(s->m ? s->m : 1) * sizeof *keys);
    if (!keys) { /* any preorder is correct, only slower */
        for (int32_t b = 0; b < s->m; b++) s->pre[b] = b;
        return;
    }
    for (int32_t b = 0; b < s->m; b++) {
        int64_t tot = 0, area;
        for (int32_t c = s->slo[b]; c < s->shi[b]; c++) tot = max64(tot, s->sec_total[c]);
        const mp_arena_buf *x = &in->b[s->id[b]];
        if (!mp_mul_ok(s->sz[b], life(x), &area)) area = INT64_MAX;
        keys[b].id = b;
        for (int j = 0; j < 3; j++) keys[b].k[j] = h[j] == 'T' ? tot : h[j] == 'W' ? s->shi[b] - s->slo[b] : area;
    }
    qsort(keys, (size_t)s->m, sizeof *keys, cmp_key4_desc);
    for (int32_t q = 0; q < s->m; q++) s->pre[keys[q].id] = q;
    free(keys);
}

/* The capacity check of a node: in every section the unplaced buffers stack
 * above its floor, and above the offset just used (placements never go lower). */
static bool search_fits(const search *s, int32_t lo, int32_t hi, int64_t at)
{
    const int64_t *fl = s->floor_, *total = s->total;
    int32_t c = lo;
    for (; c + 8 <= hi; c += 8) { /* eight sections a branch: most nodes pass */
        bool over = false;
        for (int32_t k = c; k < c + 8; k++) over |= max64(fl[k], at) + total[k] > s->cap;
        if (over) return false;
    }
    for (; c < hi; c++)
        if (max64(fl[c], at) + total[c] > s->cap) return false;
    return true;
}

/* The first section at or after x not seen yet in this placement (path
 * halving keeps the runs of seen sections short to cross). */
static int32_t unseen_from(search *s, int32_t x)
{
    while (x < s->nsec && s->seen[x] == s->stampc) {
        int32_t y = s->next_at[x];
        if (y < s->nsec && s->seen[y] == s->stampc) s->next_at[x] = s->next_at[y];
        x = y;
    }
    return x;
}

/* The sections whose floor may rise now that the raised buffers' lowest
 * offsets went up: a section whose floor lies below a raised buffer's old
 * offset has its lowest buffer elsewhere, so it stays. Where the raised
 * buffers' lifetimes overlap much (spans, their sections in all, over 4 times
 * the part's: a training step's near its least peak), each section is
 * visited once instead of once per buffer over it: the buffers by old
 * offset, the least first, so the first to reach a section decides it. The
 * set is the same either way; the sort and the skips cost more than they
 * save on short lifetimes (MiniMalloc's G: half the nodes a second). */
static int32_t raised_sections(search *s, cand *raised, int32_t nr, int64_t spans)
{
    int32_t na = 0;
    if (spans <= 4 * (int64_t)s->nsec) {
        for (int32_t j = 0; j < nr; j++)
            for (int32_t x = s->slo[raised[j].b]; x < s->shi[raised[j].b]; x++)
                if (raised[j].off <= s->floor_[x] && s->stamp[x] != s->stampc)
                    s->stamp[x] = s->stampc, s->affected[na++] = x;
        return na;
    }
    sort_cands(raised, nr);
    for (int32_t j = 0; j < nr; j++) {
        int32_t c = raised[j].b;
        for (int32_t x = unseen_from(s, s->slo[c]); x < s->shi[c]; x = unseen_from(s, x + 1)) {
            s->seen[x] = s->stampc;
            s->next_at[x] = x + 1;
            if (raised[j].off <= s->floor_[x]) s->stamp[x] = s->stampc, s->affected[na++] = x;
        }
    }
    return na;
}

static void search_place(search *s, int32_t b, int64_t at)
{
    int64_t top = at + s->sz[b], spans = 0;
    s->off[b] = at;
    int32_t last = s->unplaced[--s->nunplaced], at_b = s->unplaced_at[b]; /* b swapped past the unplaced */
    s->unplaced[at_b] = last;
    s->unplaced_at[last] = at_b;
    s->unplaced[s->nunplaced] = b;
    s->unplaced_at[b] = s->nunplaced;
    s->stampc++;
    int32_t nr = 0;
    cand *raised = s->scratch; /* free here: search_dfs has copied its candidates out */
    s->work += s->ov_at[b + 1] - s->ov_at[b];
    for (int32_t q = s->ov_at[b]; q < s->ov_at[b + 1]; q++) {
        int32_t c = s->ov[q];
        if (s->off[c] >= 0 || s->minoff[c] >= top) continue;
        push_undo(&s->umin, c, s->minoff[c]);
        raised[nr++] = (cand){s->minoff[c], 0, c}; /* its old offset */
        s->minoff[c] = top;
        spans += s->shi[c] - s->slo[c];
    }
    s->work += spans; /* the measure of work stays the sections of each raised buffer, however they are visited */
    int32_t na = raised_sections(s, raised, nr, spans);
    for (int32_t x = s->slo[b]; x < s->shi[b]; x++) {
        if (s->stamp[x] != s->stampc) s->stamp[x] = s->stampc, s->affected[na++] = x; /* b may have been its lowest */
        /* swap b's entry with the section's last unplaced one (undone in LIFO order: just count it back) */
        int32_t *pb = &s->pos[s->pos_at[b] + x - s->slo[b]], last = s->sm_at[x] + --s->nun[x], c = s->sm[last];
        s->sm[*pb] = c;
        s->pos[s->pos_at[c] + x - s->slo[c]] = *pb;
        s->sm[last] = b;
        *pb = last;
        push_undo(&s->ufloor, x, s->floor_[x]);
        s->floor_[x] = max64(s->floor_[x], top);
        s->total[x] -= s->sz[b];
        if (x + 1 < s->shi[b]) s->cuts[x]--;
    }
    /* a section's floor is no lower than the lowest offset left to its unplaced buffers; the scan stops after
     * the first at or below the floor (no raise). Four at a time, their least checked once: the hot loop of
     * the search */
    const int32_t *sm = s->sm;
    const int64_t *minoff = s->minoff;
    for (int32_t j = 0; j < na; j++) {
        int32_t x = s->affected[j], q = s->sm_at[x], end = q + s->nun[x];
        int64_t lo = INT64_MAX, bottom = s->floor_[x];
        for (; q + 4 <= end; q += 4) {
            int64_t m = min64(min64(minoff[sm[q]], minoff[sm[q + 1]]), min64(minoff[sm[q + 2]], minoff[sm[q + 3]]));
            if (m <= bottom) break; /* the stop is in these four */
            lo = min64(lo, m);
        }
        for (; q < end && lo > bottom; q++) lo = min64(lo, minoff[sm[q]]);
        s->work += q - s->sm_at[x] + 1;
        if (lo != INT64_MAX && s->floor_[x] < lo) {
            push_undo(&s->ufloor, x, s->floor_[x]);
            s->floor_[x] = lo;
        }
    }
}

static void search_unplace(search *s, int32_t b, size_t mark_min, size_t mark_floor)
{
    while (s->ufloor.n > mark_floor) {
        undo u = s->ufloor.a[--s->ufloor.n];
        s->floor_[u.idx] = u.val;
    }
    while (s->umin.n > mark_min) {
        undo u = s->umin.a[--s->umin.n];
        s->minoff[u.idx] = u.val;
    }
    for (int32_t x = s->slo[b]; x < s->shi[b]; x++) {
        s->nun[x]++; /* b's entry sits just past the unplaced ones: every later placement is undone */
        s->total[x] += s->sz[b];
        if (x + 1 < s->shi[b]) s->cuts[x]++;
    }
    s->off[b] = -1;
    s->nunplaced++; /* b sits just past the unplaced: every later placement is undone */
}

static int search_split(search *s, int32_t lo, int32_t hi, int32_t depth, int64_t last_off, int32_t last_pre);

/* Depth-first over the unplaced buffers of sections [lo, hi): each at the
 * lowest offset left to it, in (offset, preorder) order no lower than the last
 * placement (canonical), none at or above the lowest top an unplaced buffer
 * could reach (that would leave a gap it could drop into: dominated). */
static int search_dfs(search *s, int32_t lo, int32_t hi, int32_t depth, int64_t last_off, int32_t last_pre)
{
    if (s->nodes >= s->node_budget || s->work >= s->work_budget || s->umin.oom || s->ufloor.oom) return LIMIT;
    if ((++s->nodes & 15) == 0 && (now() > s->deadline || cancelled(s->in))) return LIMIT; /* a node: up to 0.3 ms */
    cand *c = s->scratch;
    int32_t nc = 0;
    int64_t min_top = INT64_MAX;
    s->work += s->m; /* counted as a visit of every buffer, however few are left */
    for (int32_t k = 0; k < s->nunplaced; k++) {
        int32_t b = s->unplaced[k];
        if (s->slo[b] >= lo && s->shi[b] <= hi) {
            c[nc++] = (cand){s->minoff[b], s->pre[b], b};
            min_top = s->minoff[b] + s->sz[b] < min_top ? s->minoff[b] + s->sz[b] : min_top;
        }
    }
    if (!nc) { /* every placed buffer: the groups solved before this one have written theirs */
        for (int32_t b = 0; b < s->m; b++)
            if (s->off[b] >= 0) s->sol[b] = s->off[b];
        return FOUND;
    }
    int32_t nt = 0; /* only those below min_top are ever tried: sort just them */
    for (int32_t j = 0; j < nc; j++)
        if (c[j].off < min_top) c[nt++] = c[j];
    nc = nt;
    sort_cands(c, nc);
    /* the order is kept by id: children reuse scratch, and undo restores every minoff */
    int32_t *ids = s->pool + ((size_t)depth * (size_t)(2 * s->m - depth + 1)) / 2;
    for (int32_t j = 0; j < nc; j++) ids[j] = c[j].b;
    for (int32_t j = 0; j < nc; j++) {
        int32_t b = ids[j];
        int64_t at = s->minoff[b];
        if (at >= min_top) break;
        if (at < last_off || (at == last_off && s->pre[b] < last_pre)) continue;
        bool hatless = true; /* no unplaced buffer conflicts with b: none could ever sit on it */
        for (int32_t q = s->ov_at[b]; q < s->ov_at[b + 1] && hatless; q++) hatless = s->off[s->ov[q]] >= 0;
        size_t mark_min = s->umin.n, mark_floor = s->ufloor.n;
        search_place(s, b, at);
        int rc = search_fits(s, lo, hi, at) ? search_split(s, lo, hi, depth + 1, at, s->pre[b]) : INFEASIBLE;
        search_unplace(s, b, mark_min, mark_floor);
        /* a hatless b can drop to this offset in any solution, which then starts with b or with a
         * candidate already tried: nothing else is left to try (MiniMalloc's hatless pruning) */
        if (rc != INFEASIBLE || hatless) return rc;
    }
    return INFEASIBLE;
}

/* Where no unplaced buffer lives across a section boundary, the buffers on
 * either side no longer interact: solve the groups one after the other, each
 * from a fresh canonical order (MiniMalloc's dynamic decomposition), instead
 * of backtracking through their product. */
static int search_split(search *s, int32_t lo, int32_t hi, int32_t depth, int64_t last_off, int32_t last_pre)
{
    int32_t x = lo;
    while (x + 1 < hi && s->cuts[x] > 0) x++;
    if (x + 1 >= hi) return search_dfs(s, lo, hi, depth, last_off, last_pre);
    for (int32_t from = lo; from < hi;) {
        int32_t to = from + 1;
        while (to < hi && s->cuts[to - 1] > 0) to++;
        int rc = search_dfs(s, from, to, depth, 0, -1);
        if (rc != FOUND) return rc;
        from = to;
    }
    return FOUND;
}

/* What a search may still spend, besides time. */
typedef struct effort {
    int64_t nodes, work;
} effort;

/* Is there an assignment of part k within cap units? Round robin over the
 * preorders with doubling node budgets. FOUND writes the part's offsets. */
static int search_part(const inst *in, int32_t k, int64_t cap, double deadline, effort *left, int64_t *nodes,
                       int64_t *off)
{
    search s;
    if (search_init(&s, in, k)) {
        search_free(&s);
        return LIMIT;
    }
    s.cap = cap;
    s.deadline = deadline;
    s.in = in;
    int rc = LIMIT;
    int64_t budget = 2 * (int64_t)s.m + 16;
    if (!search_fits(&s, 0, s.nsec, 0)) rc = INFEASIBLE;
    while (rc == LIMIT && now() < deadline && left->nodes > 0 && left->work > 0 && !cancelled(in)) {
        for (size_t h = 0; h < sizeof heuristics / sizeof *heuristics && rc == LIMIT; h++) {
            search_preorder(&s, in, heuristics[h]);
            s.nodes = s.work = 0;
            s.node_budget = budget < left->nodes ? budget : left->nodes;
            s.work_budget = left->work;
            rc = search_split(&s, 0, s.nsec, 0, 0, -1);
            *nodes += s.nodes;
            left->nodes -= s.nodes;
            left->work -= s.work;
            if (now() > deadline || left->nodes <= 0 || left->work <= 0 || cancelled(in)) break;
        }
        budget = budget < INT64_MAX / 2 ? 2 * budget : INT64_MAX;
    }
    if (rc == FOUND)
        for (int32_t b = 0; b < s.m; b++) off[s.id[b]] = s.sol[b];
    search_free(&s);
    return rc;
}

/* Lowers the arena of `off` (units) by probing capacities: the caller's
 * target when the heuristics miss it, then the bound, then a bisection
 * between the proven floor and the best found; a probe searches only the
 * parts above its capacity. Capacities step by g, the gcd of the sizes
 * (canonical arenas are sums of sizes). A target just above the bound is far
 * easier to reach than the bound, and the bisection's first probes may stay
 * above it; a target missed in time skips the bound (lower, so no easier) for
 * the bisection, which then finds the smallest arena above it that it can
 * (with target_only the search ends there: the caller needs the target).
 * Under a work or node limit (the command's placements), two probes in a row
 * out of reach in their work end the search too: each later probe has half
 * the work of the last (planning the 24 models of docs/benchmarks.md's sweep
 * near their smallest budgets and at 40-70 % of their peaks, 1 of 149 probes
 * that lowered an arena came after two such misses; the misses' tail took
 * 0.3 s of each GPT-2 placement). A time limit is spent whole: on MiniMalloc's
 * G the tail lowers the arena from 1.082x to 1.071x of best known in 10 s.
 * Once the target is met the search ends by half the time limit (and half
 * the work and node limits, when given), and an arena that fits the target
 * within 1 % of the bound ends it at once: the caller has what it needs, and
 * the rest of the time would buy less than 1 %. */
/* An arena of hi units fits the caller's target (0: none) within 1 % of the bound. */
static bool target_met(int64_t target, int64_t hi, int64_t bound)
{
    return target && hi <= target && hi <= bound + bound / 100;
}

static void search_improve(const inst *in, const mp_arena_opts *o, int64_t bound, int64_t g, int64_t *off,
                           mp_arena_result *r)
{
    double t0 = now(), end = t0 + o->time_limit;
    effort spend = {o->node_limit > 0 ? o->node_limit : INT64_MAX, o->work_limit > 0 ? o->work_limit : INT64_MAX};
    int64_t hi = arena_units(in, off, 0, in->n);
    int64_t proven = (bound + g - 1) / g * g, lo = proven; /* every cap < proven is infeasible */
    int64_t target = o->target > 0 ? o->target / o->alignment / g * g : 0;
    bool first_target = target > lo && target < hi;
    bool counted = o->node_limit > 0 || o->work_limit > 0; /* then it is spent in vain at the bound: start halfway */
    bool target_missed = false; /* the bound, lower still, is out of reach too: bisect above it */
    bool met = false;           /* the target: the rest buys a smaller arena, with half of each limit at most */
    int limits = 0;             /* probes in a row that ran out of work, nodes or time */
    for (int probe = 0;; probe++) {
        if (!met && target && hi <= target) {
            met = true;
            end = fmin(end, t0 + o->time_limit / 2);
            if (o->work_limit > 0) spend.work = max64(0, spend.work - (o->work_limit - o->work_limit / 2));
            if (o->node_limit > 0) spend.nodes = max64(0, spend.nodes - (o->node_limit - o->node_limit / 2));
        }
        bool out_of_reach = target && !met && (target_missed || target < lo); /* missed, or below a proven floor */
        if (lo >= hi || target_met(target, hi, bound) || (o->target_only && out_of_reach) || (counted && limits >= 2) ||
            now() >= end || spend.nodes <= 0 || spend.work <= 0 || cancelled(in))
            break;
        bool at_bound = probe <= first_target && !counted && !target_missed;
        int64_t cap = probe == 0 && first_target ? target : at_bound ? lo : lo + ((hi - lo) / g / 2) * g;
        double left = end - now();
        double deadline = now() + (left > 0.002 ? left / 2 : left);
        /* half of what is left, of time, nodes and work: a probe out of reach leaves the rest to easier ones */
        effort given = {spend.nodes > 1 ? spend.nodes / 2 : 1, spend.work > 1 ? spend.work / 2 : 1}, probe_left = given;
        int rc = FOUND;
        for (int32_t k = 0; k < in->nparts && rc == FOUND; k++) {
            if (arena_units(in, off, in->part_at[k], in->part_at[k + 1]) <= cap) continue;
            if (in->part_at[k + 1] - in->part_at[k] > o->search_max_buffers) rc = LIMIT;
            else rc = search_part(in, k, cap, deadline, &probe_left, &r->nodes, off);
        }
        spend.nodes -= given.nodes - probe_left.nodes;
        spend.work -= given.work - probe_left.work;
        limits = rc == LIMIT ? limits + 1 : 0;
        if (rc == FOUND) hi = arena_units(in, off, 0, in->n);
        else if (rc == INFEASIBLE) lo = proven = cap + g; /* and so is every smaller cap */
        else if (cap != target) lo = cap + g; /* a target out of reach in time leaves the bisection below it */
        else target_missed = true;
    }
    r->optimal = hi <= proven;
}

/* ---- the driver ---------------------------------------------------------------- */

/* the greedy passes after the first by size only up to this many buffers: on huge instances one pass costs
 * seconds (idealloc's S_1: 28,526 buffers, 43 M conflicting pairs) */
#define MORE_PASSES_MAX 20000

static int assign_all(const mp_arena_buf *bufs, int32_t n, const mp_arena_opts *o, int64_t *offsets,
                      mp_arena_result *r, mp_err *err)
{
    mp_arena_opts def = mp_arena_defaults();
    if (!o) o = &def;
    memset(r, 0, sizeof *r);
    for (int k = 0; k < MP_ARENA_METHOD_COUNT; k++) r->method_bytes[k] = -1;
    if (n < 0 || (n > 0 && (!bufs || !offsets))) return mp_fail(err, "arena: no buffers given");
    if (o->alignment < 1) return mp_fail(err, "arena: the alignment must be >= 1 (got %lld)", (long long)o->alignment);
    if (o->time_limit < 0 || o->node_limit < 0)
        return mp_fail(err, "arena: negative time or node limit");
    inst in;
    int rc = inst_init(&in, bufs, n, o->alignment, err);
    in.cancel = o->cancel;
    in.sweep_max = o->sweep_max_buffers;
    int64_t lb_units = 0;
    int32_t *order = NULL;
    int64_t *k1 = NULL, *k2 = NULL, *alt = NULL;
    if (rc) goto done;
    rc = -1;
    order = malloc((size_t)(n ? n : 1) * sizeof *order);
    k1 = malloc((size_t)(n ? n : 1) * sizeof *k1);
    k2 = malloc((size_t)(n ? n : 1) * sizeof *k2);
    alt = malloc((size_t)(n ? n : 1) * sizeof *alt);
    if (!order || !k1 || !k2 || !alt || load_bound(&in, &r->lower_bound, &lb_units)) {
        mp_fail(err, "out of memory");
        goto done;
    }
    r->aligned_bound = lb_units * o->alignment;
    r->parts = in.nparts;

    /* by size: largest first, earlier starts first among equals (better than longer lifetimes first on
     * the idealloc traces: S_1 1.0158x against 1.0249x of the bound) */
    for (int32_t i = 0; i < n; i++) k1[i] = -in.u[i], k2[i] = bufs[i].lower;
    if (sort_ids(n, k1, k2, order) || greedy_by_size(&in, order, false, offsets)) {
        mp_fail(err, "out of memory");
        goto done;
    }
    /* and longer lifetimes first among equals: better where many equal sizes live side by side (a training
     * step with recomputed copies: GPT-2 near its least peak, 1.042x of the bound against 1.079x) */
    if (n <= MORE_PASSES_MAX) {
        for (int32_t i = 0; i < n; i++) k2[i] = bufs[i].lower - bufs[i].upper;
        if (sort_ids(n, k1, k2, order) || greedy_by_size(&in, order, false, alt)) {
            mp_fail(err, "out of memory");
            goto done;
        }
        if (arena_units(&in, alt, 0, n) < arena_units(&in, offsets, 0, n))
            memcpy(offsets, alt, (size_t)n * sizeof *alt);
    }
    r->method_bytes[MP_ARENA_BY_SIZE] = arena_bytes(&in, offsets);
    r->method = MP_ARENA_BY_SIZE;
    /* by start: earliest first, larger first among equals */
    for (int32_t i = 0; i < n; i++) k1[i] = bufs[i].lower, k2[i] = -in.u[i];
    if (sort_ids(n, k1, k2, order) || greedy_by_start(&in, order, alt)) {
        mp_fail(err, "out of memory");
        goto done;
    }
    r->method_bytes[MP_ARENA_BY_START] = arena_bytes(&in, alt);
    if (r->method_bytes[MP_ARENA_BY_START] < r->method_bytes[MP_ARENA_BY_SIZE]) {
        memcpy(offsets, alt, (size_t)n * sizeof *alt);
        r->method = MP_ARENA_BY_START;
    }

    /* by contention: size classes (one size, then classes 2x, 4x and 16x wide) largest first, and within a
     * class the buffers that cross the busiest instants first, each at the lowest offset that holds it. Where many
     * sizes differ by little, a class lets the buffers that decide the peak pack before the others (GPT-2's
     * step at 40 % of its peak: 1.0016x of the bound, where by size left 1.0157x and 2 s of search 1.0030x) */
    if (n <= MORE_PASSES_MAX) {
        if (contention(&in, k2)) {
            mp_fail(err, "out of memory");
            goto done;
        }
        for (int32_t i = 0; i < n; i++) k2[i] = -k2[i];
        for (int shift = -1; shift <= 2; shift++) { /* a class spans 2^shift octaves (-1: one size) */
            for (int32_t i = 0; i < n; i++) {
                int lg = 0;
                for (int64_t u = in.u[i]; u > 1; u >>= 1) lg++;
                k1[i] = shift < 0 ? -in.u[i] : -(lg >> shift);
            }
            if (sort_ids(n, k1, k2, order) || greedy_by_size(&in, order, true, alt)) {
                mp_fail(err, "out of memory");
                goto done;
            }
            int64_t b = arena_bytes(&in, alt);
            if (r->method_bytes[MP_ARENA_BY_CONTENTION] < 0 || b < r->method_bytes[MP_ARENA_BY_CONTENTION])
                r->method_bytes[MP_ARENA_BY_CONTENTION] = b;
            if (b < arena_bytes(&in, offsets)) {
                memcpy(offsets, alt, (size_t)n * sizeof *alt);
                r->method = MP_ARENA_BY_CONTENTION;
            }
        }
    }

    int64_t units = arena_units(&in, offsets, 0, n);
    r->optimal = units <= lb_units;
    if (!r->optimal && o->time_limit > 0) {
        int64_t g = 0;
        for (int32_t i = 0; i < n; i++) g = gcd64(g, in.u[i]);
        memcpy(alt, offsets, (size_t)n * sizeof *alt);
        search_improve(&in, o, lb_units, g ? g : 1, alt, r);
        int64_t b = arena_bytes(&in, alt);
        if (arena_units(&in, alt, 0, n) < units) {
            r->method_bytes[MP_ARENA_SEARCH] = b;
            memcpy(offsets, alt, (size_t)n * sizeof *alt);
            r->method = MP_ARENA_SEARCH;
        }
    }
    r->arena_bytes = arena_bytes(&in, offsets);
    for (int32_t i = 0; i < n; i++) offsets[i] *= o->alignment;
    rc = 0;
done:
    inst_free(&in);
    free(order);
    free(k1);
    free(k2);
    free(alt);
    return rc;
}

/* Buffers live over the whole horizon (a training step's parameters and
 * optimizer state) conflict with every other buffer, so each other buffer
 * lies wholly above or below each of them: stacking them at the bottom loses
 * nothing (drop one, shift what lay above it down, put it back at 0). The
 * rest, a smaller instance that may split into time-disjoint parts, is what
 * the heuristics and the search work on. */
int mp_arena_assign(const mp_arena_buf *bufs, int32_t n, const mp_arena_opts *o, int64_t *offsets,
                    mp_arena_result *r, mp_err *err)
{
    mp_arena_opts def = mp_arena_defaults();
    if (!o) o = &def;
    if (n <= 0 || !bufs || !offsets || o->alignment < 1) return assign_all(bufs, n, o, offsets, r, err);
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (int32_t i = 0; i < n; i++) t0 = bufs[i].lower < t0 ? bufs[i].lower : t0, t1 = max64(t1, bufs[i].upper);
    int32_t nfull = 0;
    for (int32_t i = 0; i < n; i++) nfull += bufs[i].lower == t0 && bufs[i].upper == t1 && bufs[i].size > 0;
    if (nfull == 0 || nfull == n) return assign_all(bufs, n, o, offsets, r, err);
    mp_arena_buf *rest = malloc((size_t)(n - nfull) * sizeof *rest);
    int32_t *at = malloc((size_t)(n - nfull) * sizeof *at);
    int64_t *roff = malloc((size_t)(n - nfull) * sizeof *roff);
    int rc = -1;
    if (!rest || !at || !roff) {
        mp_fail(err, "out of memory");
        goto done;
    }
    int32_t nr = 0;
    int64_t units = 0, bytes = 0, top = 0; /* the stack, in alignment units; its bytes; its highest byte */
    for (int32_t i = 0; i < n; i++) {
        if (!(bufs[i].lower == t0 && bufs[i].upper == t1 && bufs[i].size > 0)) {
            rest[nr] = bufs[i], at[nr++] = i;
            continue;
        }
        int64_t u = bufs[i].size / o->alignment + (bufs[i].size % o->alignment != 0);
        offsets[i] = units * o->alignment;
        top = offsets[i] + bufs[i].size;
        bytes += bufs[i].size;
        if (!mp_add_ok(units, u, &units) || !mp_mul_ok(units, o->alignment, &(int64_t){0})) {
            mp_fail(err, "arena: the buffers' total size overflows 64 bits");
            goto done;
        }
    }
    mp_arena_opts ro = *o; /* the rest's target sits above the stack */
    ro.target = o->target > units * o->alignment ? o->target - units * o->alignment : 0;
    if (assign_all(rest, nr, &ro, roff, r, err)) goto done;
    int64_t base = units * o->alignment;
    for (int32_t k = 0; k < nr; k++) offsets[at[k]] = rest[k].size ? roff[k] + base : 0; /* 0 bytes: at 0, as ever */
    r->arena_bytes = r->arena_bytes ? base + r->arena_bytes : top;
    r->lower_bound += bytes;
    r->aligned_bound += base;
    for (int k = 0; k < MP_ARENA_METHOD_COUNT; k++)
        if (r->method_bytes[k] >= 0) r->method_bytes[k] = r->method_bytes[k] ? base + r->method_bytes[k] : top;
    rc = 0;
done:
    free(rest);
    free(at);
    free(roff);
    return rc;
}
