/* offsets_verify.c - the offset checker: per-buffer bounds, then a sweep over
 * lifetime ends and starts with the live buffers held in a tree over their
 * (sorted, distinct) offsets, so that a new buffer meets only its neighbours
 * in address. Shares no code with the allocator. */
#include <stdio.h>
#include <stdlib.h>

#include "passes/offsets_verify.h"

static const char *label(const mp_arena_buf *b, int32_t i, char *buf, size_t n)
{
    if (b[i].name) snprintf(buf, n, "'%s'", b[i].name);
    else snprintf(buf, n, "buffer %d", i);
    return buf;
}

typedef struct point {
    int64_t t;
    int32_t start; /* ends (0) before starts (1) at equal times: lifetimes are half-open */
    int32_t id;
} point;

static int cmp_point(const void *pa, const void *pb)
{
    const point *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->start != b->start) return a->start - b->start;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* The ordered set: cnt[] counts occupied slots per subtree of a complete binary tree over the slots. */
typedef struct slots {
    int32_t leaves;
    int32_t *cnt;
} slots;

static void slot_add(slots *s, int32_t k, int32_t d)
{
    for (int32_t x = k + s->leaves; x >= 1; x /= 2) s->cnt[x] += d;
}

/* The highest occupied slot < p, or -1. */
static int32_t slot_before(const slots *s, int32_t x, int32_t lo, int32_t hi, int32_t p)
{
    if (lo >= p || !s->cnt[x]) return -1;
    if (hi - lo == 1) return lo;
    int32_t mid = lo + (hi - lo) / 2;
    int32_t r = slot_before(s, 2 * x + 1, mid, hi, p);
    return r >= 0 ? r : slot_before(s, 2 * x, lo, mid, p);
}

/* The lowest occupied slot > p, or -1. */
static int32_t slot_after(const slots *s, int32_t x, int32_t lo, int32_t hi, int32_t p)
{
    if (hi <= p + 1 || !s->cnt[x]) return -1;
    if (hi - lo == 1) return lo;
    int32_t mid = lo + (hi - lo) / 2;
    int32_t r = slot_after(s, 2 * x, lo, mid, p);
    return r >= 0 ? r : slot_after(s, 2 * x + 1, mid, hi, p);
}

static int overlap(const mp_arena_buf *b, const int64_t *off, int32_t i, int32_t j, int64_t t, mp_err *err)
{
    char x[160], y[160];
    return mp_fail(err, "offsets: %s and %s overlap: both live at %lld, at [%lld, %lld) and [%lld, %lld)",
                   label(b, j, x, sizeof x), label(b, i, y, sizeof y), (long long)t, (long long)off[j],
                   (long long)(off[j] + b[j].size), (long long)off[i], (long long)(off[i] + b[i].size));
}

int mp_offsets_verify(const mp_arena_buf *b, int32_t n, const int64_t *off, int64_t arena_size, int64_t budget,
                      mp_err *err)
{
    char x[160];
    if (n < 0 || (n > 0 && (!b || !off))) return mp_fail(err, "offsets: no buffers given");
    if (budget >= 0 && arena_size > budget)
        return mp_fail(err, "offsets: the arena of %lld bytes exceeds the budget of %lld bytes", (long long)arena_size,
                       (long long)budget);
    for (int32_t i = 0; i < n; i++) {
        int64_t end;
        if (b[i].lower >= b[i].upper || b[i].size < 0)
            return mp_fail(err, "offsets: %s is malformed: lifetime [%lld, %lld), size %lld", label(b, i, x, sizeof x),
                           (long long)b[i].lower, (long long)b[i].upper, (long long)b[i].size);
        if (off[i] < 0 || !mp_add_ok(off[i], b[i].size, &end) || end > arena_size)
            return mp_fail(err, "offsets: %s at [%lld, %lld + %lld) is outside the arena of %lld bytes",
                           label(b, i, x, sizeof x), (long long)off[i], (long long)off[i], (long long)b[i].size,
                           (long long)arena_size);
    }
    size_t m = (size_t)(n ? n : 1);
    point *p = malloc(2 * m * sizeof *p);
    int64_t *keys = malloc(m * sizeof *keys);
    int32_t *slot = malloc(m * sizeof *slot), *who = NULL;
    slots s = {.leaves = 1};
    int rc = -1;
    if (!p || !keys || !slot) goto oom;
    int32_t np = 0, nk = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!b[i].size) continue;
        p[np++] = (point){b[i].lower, 1, i};
        p[np++] = (point){b[i].upper, 0, i};
        keys[nk++] = off[i];
    }
    qsort(p, (size_t)np, sizeof *p, cmp_point);
    qsort(keys, (size_t)nk, sizeof *keys, cmp_i64);
    int32_t nd = 0;
    for (int32_t k = 0; k < nk; k++)
        if (!nd || keys[k] != keys[nd - 1]) keys[nd++] = keys[k];
    while (s.leaves < nd) s.leaves *= 2;
    s.cnt = calloc(2 * (size_t)s.leaves, sizeof *s.cnt);
    who = malloc((size_t)s.leaves * sizeof *who);
    if (!s.cnt || !who) goto oom;
    for (int32_t i = 0; i < n; i++) {
        if (!b[i].size) continue;
        int32_t lo = 0, hi = nd;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (keys[mid] < off[i]) lo = mid + 1;
            else hi = mid;
        }
        slot[i] = lo;
    }
    for (int32_t k = 0; k < np; k++) {
        int32_t i = p[k].id, q = slot[i];
        if (!p[k].start) {
            slot_add(&s, q, -1);
            continue;
        }
        /* the live set never overlaps itself, so only the neighbours in address can meet i */
        if (s.cnt[q + s.leaves]) {
            rc = overlap(b, off, i, who[q], p[k].t, err);
            goto done;
        }
        int32_t below = slot_before(&s, 1, 0, s.leaves, q), above = slot_after(&s, 1, 0, s.leaves, q);
        if (below >= 0 && off[who[below]] + b[who[below]].size > off[i]) {
            rc = overlap(b, off, i, who[below], p[k].t, err);
            goto done;
        }
        if (above >= 0 && off[i] + b[i].size > off[who[above]]) {
            rc = overlap(b, off, i, who[above], p[k].t, err);
            goto done;
        }
        who[q] = i;
        slot_add(&s, q, 1);
    }
    rc = 0;
    goto done;
oom:
    mp_fail(err, "out of memory");
done:
    free(p);
    free(keys);
    free(slot);
    free(who);
    free(s.cnt);
    return rc;
}
