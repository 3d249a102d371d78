/* remat_space.c - the decision space of rematerialization (docs/ilp.md): the
 * store-everything counts, the droppable values and their gaps, and for each
 * the candidate steps it may come back at with the recipe that brings it back.
 * Four passes: uses and last uses, store-everything counts, gaps, candidates
 * (latest producer first, so that chains cascade into earlier values). */
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

mp_rspace_opts mp_rspace_defaults(void)
{
    return (mp_rspace_opts){.max_candidates = 6, .max_recipe = 64, .min_fraction = 0};
}

static bool flag(const uint8_t *a, int32_t i) { return a && a[i]; }

typedef struct ivec {
    int32_t n, cap, *a;
} ivec;

static bool ivec_push(ivec *v, int32_t x)
{
    if (v->n == v->cap) {
        int32_t cap = v->cap ? 2 * v->cap : 8;
        int32_t *p = realloc(v->a, (size_t)cap * sizeof *p);
        if (!p) return false;
        v->a = p;
        v->cap = cap;
    }
    v->a[v->n++] = x;
    return true;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A candidate while the space is built: recipe and frontier as offsets into pools. */
typedef struct tcand {
    int32_t value, step, nrecipe, roff, nfront, foff;
    double cost;
    int64_t peak;
} tcand;

typedef struct build {
    const mp_rgraph *rg;
    mp_rspace *sp;
    mp_rspace_opts o;
    int32_t *use_off, *use;   /* CSR: sorted distinct steps reading each value */
    int32_t *node_mark, *val_mark, *dead_last; /* stamped scratch */
    int32_t stamp;
    ivec rec, front;          /* the recipe being built */
    ivec rpool, fpool;        /* recipes and frontiers of all candidates */
    tcand *tc;
    int32_t ntc, captc;
} build;

void mp_rspace_free(mp_rspace *sp)
{
    if (!sp) return;
    free(sp->first_use);
    free(sp->last_use);
    free(sp->base_live);
    free(sp->base_between);
    free(sp->drop);
    free(sp->gap_start);
    free(sp->gap_end);
    free(sp->drop_index);
    if (sp->cand && sp->ncand) { /* recipes and frontiers live in two pools owned by the first candidate */
        free(sp->cand[0].recipe);
        free(sp->cand[0].front);
    }
    free(sp->cand);
    free(sp->cand_off);
    memset(sp, 0, sizeof *sp);
}

static int check_graph(const mp_rgraph *rg, mp_err *err)
{
    if (!rg || rg->nnodes < 0 || rg->nvalues < 0) return mp_fail(err, "remat space: no graph");
    if (rg->nnodes && (!rg->in_off || !rg->out_off)) return mp_fail(err, "remat space: node arrays missing");
    if (rg->nvalues && (!rg->bytes || !rg->producer)) return mp_fail(err, "remat space: value arrays missing");
    if (rg->nnodes && (rg->in_off[0] != 0 || rg->out_off[0] != 0))
        return mp_fail(err, "remat space: the CSR offsets do not start at 0");
    for (int32_t v = 0; v < rg->nvalues; v++) {
        if (rg->bytes[v] < 0) return mp_fail(err, "remat space: value %d has %lld bytes", v, (long long)rg->bytes[v]);
        if (rg->producer[v] < -1 || rg->producer[v] >= rg->nnodes)
            return mp_fail(err, "remat space: value %d has producer %d, outside -1..%d", v, rg->producer[v],
                           rg->nnodes - 1);
    }
    for (int32_t u = 0; u < rg->nnodes; u++) {
        const char *name = rg->node_name && rg->node_name[u] ? rg->node_name[u] : "?";
        if (rg->in_off[u + 1] < rg->in_off[u] || rg->out_off[u + 1] < rg->out_off[u])
            return mp_fail(err, "remat space: the CSR offsets decrease at node '%s'", name);
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
            int32_t x = rg->in ? rg->in[k] : -1;
            if (x < 0 || x >= rg->nvalues) return mp_fail(err, "remat space: node '%s' reads value %d", name, x);
            if (rg->producer[x] >= u)
                return mp_fail(err, "remat space: node '%s' reads value %d before its producer runs", name, x);
        }
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t y = rg->out ? rg->out[k] : -1;
            if (y < 0 || y >= rg->nvalues || rg->producer[y] != u)
                return mp_fail(err, "remat space: node '%s' outputs value %d, whose producer is another", name, y);
        }
    }
    return 0;
}

/* pass 1: the steps reading each value, and each value's first and last use */
static int find_uses(build *b, mp_err *err)
{
    const mp_rgraph *rg = b->rg;
    mp_rspace *sp = b->sp;
    int32_t nv = rg->nvalues, nn = rg->nnodes;
    b->use_off = calloc((size_t)nv + 1, sizeof *b->use_off);
    b->use = malloc(((size_t)(nn ? rg->in_off[nn] : 0) + 1) * sizeof *b->use);
    int32_t *fill = malloc(((size_t)nv + 1) * sizeof *fill);
    if (!b->use_off || !b->use || !fill) {
        free(fill);
        return mp_fail(err, "out of memory building the remat space");
    }
    for (int32_t v = 0; v < nv; v++) fill[v] = -1; /* last step counted for v, so a twice-read value counts once */
    for (int32_t u = 0; u < nn; u++)
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++)
            if (fill[rg->in[k]] != u) fill[rg->in[k]] = u, b->use_off[rg->in[k] + 1]++;
    for (int32_t v = 0; v < nv; v++) b->use_off[v + 1] += b->use_off[v];
    for (int32_t v = 0; v < nv; v++) fill[v] = b->use_off[v];
    for (int32_t u = 0; u < nn; u++)
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
            int32_t x = rg->in[k];
            if (fill[x] == b->use_off[x] || b->use[fill[x] - 1] != u) b->use[fill[x]++] = u;
        }
    free(fill);
    for (int32_t v = 0; v < nv; v++) {
        int32_t n = b->use_off[v + 1] - b->use_off[v];
        sp->first_use[v] = n ? b->use[b->use_off[v]] : -1;
        int32_t last = n ? b->use[b->use_off[v + 1] - 1] : rg->producer[v];
        if (rg->producer[v] < 0 || flag(rg->keep_to_end, v)) last = nn - 1;
        sp->last_use[v] = last;
    }
    return 0;
}

/* pass 2: store-everything counts as difference arrays: v is live at steps p_v..L_v and crosses into p_v+1..L_v */
static int count_base(build *b, mp_err *err)
{
    const mp_rgraph *rg = b->rg;
    mp_rspace *sp = b->sp;
    int32_t nn = rg->nnodes;
    int64_t *dl = calloc((size_t)nn + 2, sizeof *dl), *db = calloc((size_t)nn + 2, sizeof *db);
    if (!dl || !db) {
        free(dl);
        free(db);
        return mp_fail(err, "out of memory building the remat space");
    }
    int64_t total = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        if (!mp_add_ok(total, rg->bytes[v], &total)) {
            free(dl);
            free(db);
            return mp_fail(err, "remat space: the graph's bytes overflow 64 bits");
        }
        int32_t p = rg->producer[v];
        if (p < 0) {
            sp->resident_bytes += rg->bytes[v];
            continue;
        }
        dl[p] += rg->bytes[v], dl[sp->last_use[v] + 1] -= rg->bytes[v];
        db[p + 1] += rg->bytes[v], db[sp->last_use[v] + 1] -= rg->bytes[v];
    }
    int64_t l = sp->resident_bytes, c = sp->resident_bytes;
    sp->base_peak = sp->resident_bytes;
    for (int32_t t = 0; t < nn; t++) {
        l += dl[t], c += db[t];
        sp->base_live[t] = l, sp->base_between[t] = c;
        if (l > sp->base_peak) sp->base_peak = l;
    }
    free(dl);
    free(db);
    return 0;
}

/* pass 3: the droppable values, in producer order, with their largest gap a_v < b_v between events */
static void find_gaps(build *b)
{
    const mp_rgraph *rg = b->rg;
    mp_rspace *sp = b->sp;
    int64_t maxb = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        sp->gap_start[v] = sp->gap_end[v] = sp->drop_index[v] = -1;
        int32_t p = rg->producer[v];
        if (p < 0 || !flag(rg->recomputable, p) || flag(rg->pinned, v) || flag(rg->keep_to_end, v) ||
            rg->bytes[v] <= 0)
            continue;
        int32_t prev = p, a = -1, bb = -1;
        for (int32_t k = b->use_off[v]; k < b->use_off[v + 1]; k++) {
            int32_t u = b->use[k];
            if (u - prev > bb - a) a = prev, bb = u;
            prev = u;
        }
        if (a < 0 || bb - a < 2) continue;
        sp->gap_start[v] = a, sp->gap_end[v] = bb;
        if (rg->bytes[v] > maxb) maxb = rg->bytes[v];
    }
    double floor_bytes = b->o.min_fraction * (double)maxb;
    for (int32_t u = 0; u < rg->nnodes; u++)
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t v = rg->out[k];
            if (sp->gap_start[v] < 0) continue;
            if ((double)rg->bytes[v] < floor_bytes) {
                sp->gap_start[v] = sp->gap_end[v] = -1;
                continue;
            }
            sp->drop_index[v] = sp->ndrop;
            sp->drop[sp->ndrop++] = v;
        }
}

/* A value alive at step q in the store-everything order (produced before q, needed at q or later). */
static bool live_at(const mp_rspace *sp, int32_t x, int32_t q)
{
    return sp->rg->producer[x] < q && q <= sp->last_use[x];
}

/* R(w,q) into b->rec (node ids, increasing) and b->front; false when it is not offered. */
static bool make_recipe(build *b, int32_t w, int32_t q)
{
    const mp_rgraph *rg = b->rg;
    const mp_rspace *sp = b->sp;
    int32_t s = ++b->stamp;
    b->rec.n = b->front.n = 0;
    int32_t pw = rg->producer[w];
    if (!ivec_push(&b->rec, pw)) return false;
    b->node_mark[pw] = s;
    for (int32_t i = 0; i < b->rec.n; i++) { /* rec doubles as the worklist */
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k], px = rg->producer[x];
            if (px < 0) continue;
            if (live_at(sp, x, q)) { /* the frontier: a plan constraint when x may be away at q */
                if (sp->drop_index[x] >= 0 && sp->gap_start[x] < q && q <= sp->gap_end[x] && b->val_mark[x] != s) {
                    b->val_mark[x] = s;
                    if (!ivec_push(&b->front, x)) return false;
                }
                continue;
            }
            if (!flag(rg->recomputable, px)) return false;
            if (b->node_mark[px] == s) continue;
            if (b->rec.n >= b->o.max_recipe) return false;
            b->node_mark[px] = s;
            if (!ivec_push(&b->rec, px)) return false;
        }
    }
    qsort(b->rec.a, (size_t)b->rec.n, sizeof *b->rec.a, cmp_i32);
    /* Another output alive at q would be made again here while the recount had
     * freed its old instance after its last use before q (or it is away in its
     * own gap): the model would count it wrong, so such recipes are not offered.
     * Graph outputs (keep_to_end) are never freed, so they are replaced in place. */
    for (int32_t i = 0; i < b->rec.n; i++) {
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->out_off[r]; k < rg->out_off[r + 1]; k++) {
            int32_t y = rg->out[k];
            if (y != w && live_at(sp, y, q) && !flag(rg->keep_to_end, y)) return false;
        }
    }
    return true;
}

/* Extra bytes while the recipe runs: intermediates freed after their last use
 * in the recipe, dead unused outputs right after their entry, w kept. */
static int64_t recipe_peak(build *b, int32_t w, int32_t q)
{
    const mp_rgraph *rg = b->rg;
    int32_t s = ++b->stamp;
    for (int32_t i = 0; i < b->rec.n; i++) {
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k];
            if (rg->producer[x] >= 0 && !live_at(b->sp, x, q)) b->val_mark[x] = s, b->dead_last[x] = i;
        }
    }
    int64_t cur = 0, peak = 0;
    for (int32_t i = 0; i < b->rec.n; i++) {
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->out_off[r]; k < rg->out_off[r + 1]; k++) {
            int32_t y = rg->out[k];
            if (y == w || !live_at(b->sp, y, q)) cur += rg->bytes[y];
        }
        if (cur > peak) peak = cur;
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k];
            if (b->val_mark[x] == s && b->dead_last[x] == i) cur -= rg->bytes[x], b->val_mark[x] = 0;
        }
        for (int32_t k = rg->out_off[r]; k < rg->out_off[r + 1]; k++) {
            int32_t y = rg->out[k];
            if (y != w && !live_at(b->sp, y, q) && b->val_mark[y] != s) cur -= rg->bytes[y];
        }
    }
    return peak;
}

static int add_cand(build *b, int32_t w, int32_t q, mp_err *err)
{
    if (b->ntc == b->captc) {
        int32_t cap = b->captc ? 2 * b->captc : 64;
        tcand *p = realloc(b->tc, (size_t)cap * sizeof *p);
        if (!p) return mp_fail(err, "out of memory building the remat space");
        b->tc = p;
        b->captc = cap;
    }
    tcand *c = &b->tc[b->ntc++];
    *c = (tcand){.value = w, .step = q, .nrecipe = b->rec.n, .roff = b->rpool.n, .nfront = b->front.n,
                 .foff = b->fpool.n, .peak = recipe_peak(b, w, q)};
    for (int32_t i = 0; i < b->rec.n; i++) {
        c->cost += b->rg->cost ? b->rg->cost[b->rec.a[i]] : 0;
        if (!ivec_push(&b->rpool, b->rec.a[i])) return mp_fail(err, "out of memory building the remat space");
    }
    for (int32_t i = 0; i < b->front.n; i++)
        if (!ivec_push(&b->fpool, b->front.a[i])) return mp_fail(err, "out of memory building the remat space");
    return 0;
}

/* pass 4: candidates, latest producer first. Q(w) starts as {b_w}; each
 * recipe of w at q adds q to Q(v) of its droppable frontier inputs v that
 * could come back at q, so a run of dropped values can return in one phase. */
static int find_candidates(build *b, mp_err *err)
{
    mp_rspace *sp = b->sp;
    int32_t nd = sp->ndrop, maxc = b->o.max_candidates;
    ivec *Q = calloc((size_t)nd + 1, sizeof *Q);
    int32_t *first = malloc(((size_t)nd + 1) * sizeof *first), *count = calloc((size_t)nd + 1, sizeof *count);
    int rc = -1;
    if (!Q || !first || !count) {
        mp_fail(err, "out of memory building the remat space");
        goto done;
    }
    for (int32_t i = 0; i < nd; i++)
        if (!ivec_push(&Q[i], sp->gap_end[sp->drop[i]])) {
            mp_fail(err, "out of memory building the remat space");
            goto done;
        }
    for (int32_t i = nd - 1; i >= 0; i--) {
        int32_t w = sp->drop[i];
        ivec *q = &Q[i];
        qsort(q->a, (size_t)q->n, sizeof *q->a, cmp_i32);
        int32_t n = 0;
        for (int32_t k = 0; k < q->n; k++)
            if (!n || q->a[n - 1] != q->a[k]) q->a[n++] = q->a[k];
        int32_t lo = n > maxc ? n - maxc : 0; /* b_w is the largest: keep it and the latest others */
        first[i] = b->ntc;
        for (int32_t k = lo; k < n; k++) {
            int32_t step = q->a[k];
            if (!make_recipe(b, w, step)) continue;
            if (add_cand(b, w, step, err)) goto done;
            count[i]++;
            for (int32_t f = 0; f < b->front.n; f++) {
                int32_t v = b->front.a[f];
                if (sp->gap_start[v] + 2 <= step && step < sp->gap_end[v] && !ivec_push(&Q[sp->drop_index[v]], step)) {
                    mp_fail(err, "out of memory building the remat space");
                    goto done;
                }
            }
        }
    }
    /* lay the candidates out in drop order; recipes and frontiers stay in their pools */
    sp->ncand = b->ntc;
    sp->cand = calloc((size_t)b->ntc + 1, sizeof *sp->cand);
    int32_t *rp = malloc(((size_t)b->rpool.n + 1) * sizeof *rp), *fp = malloc(((size_t)b->fpool.n + 1) * sizeof *fp);
    if (!sp->cand || !rp || !fp) {
        free(rp);
        free(fp);
        mp_fail(err, "out of memory building the remat space");
        goto done;
    }
    int32_t nc = 0, nr = 0, nf = 0;
    for (int32_t i = 0; i < nd; i++) {
        sp->cand_off[i] = nc;
        for (int32_t k = first[i]; k < first[i] + count[i]; k++) {
            const tcand *t = &b->tc[k];
            mp_rcand *c = &sp->cand[nc++];
            *c = (mp_rcand){.value = t->value, .step = t->step, .nrecipe = t->nrecipe, .recipe = rp + nr,
                            .cost = t->cost, .recipe_peak = t->peak, .nfront = t->nfront, .front = fp + nf};
            memcpy(rp + nr, b->rpool.a + t->roff, (size_t)t->nrecipe * sizeof *rp);
            if (t->nfront) memcpy(fp + nf, b->fpool.a + t->foff, (size_t)t->nfront * sizeof *fp);
            nr += t->nrecipe, nf += t->nfront;
        }
    }
    sp->cand_off[nd] = nc;
    if (nc) sp->cand[0].recipe = rp, sp->cand[0].front = fp; /* the pools' owners (nr, nf > 0 when nc > 0) */
    else free(rp), free(fp);
    rc = 0;
done:
    for (int32_t i = 0; Q && i < nd; i++) free(Q[i].a);
    free(Q);
    free(first);
    free(count);
    return rc;
}

int mp_rspace_build(const mp_rgraph *rg, const mp_rspace_opts *o, mp_rspace *sp, mp_err *err)
{
    memset(sp, 0, sizeof *sp);
    if (check_graph(rg, err)) return -1;
    build b = {.rg = rg, .sp = sp, .o = o ? *o : mp_rspace_defaults()};
    if (b.o.max_candidates < 1) b.o.max_candidates = 1;
    if (b.o.max_recipe < 1) b.o.max_recipe = 1;
    sp->rg = rg;
    size_t nv = (size_t)rg->nvalues + 1, nn = (size_t)rg->nnodes + 1;
    sp->first_use = malloc(nv * sizeof *sp->first_use);
    sp->last_use = malloc(nv * sizeof *sp->last_use);
    sp->base_live = malloc(nn * sizeof *sp->base_live);
    sp->base_between = malloc(nn * sizeof *sp->base_between);
    sp->drop = malloc(nv * sizeof *sp->drop);
    sp->gap_start = malloc(nv * sizeof *sp->gap_start);
    sp->gap_end = malloc(nv * sizeof *sp->gap_end);
    sp->drop_index = malloc(nv * sizeof *sp->drop_index);
    sp->cand_off = malloc(nv * sizeof *sp->cand_off);
    b.node_mark = calloc(nn, sizeof *b.node_mark);
    b.val_mark = calloc(nv, sizeof *b.val_mark);
    b.dead_last = calloc(nv, sizeof *b.dead_last);
    int rc = -1;
    if (!sp->first_use || !sp->last_use || !sp->base_live || !sp->base_between || !sp->drop || !sp->gap_start ||
        !sp->gap_end || !sp->drop_index || !sp->cand_off || !b.node_mark || !b.val_mark || !b.dead_last) {
        mp_fail(err, "out of memory building the remat space");
        goto done;
    }
    if (find_uses(&b, err) || count_base(&b, err)) goto done;
    find_gaps(&b);
    if (find_candidates(&b, err)) goto done;
    rc = 0;
done:
    free(b.use_off);
    free(b.use);
    free(b.node_mark);
    free(b.val_mark);
    free(b.dead_last);
    free(b.rec.a);
    free(b.front.a);
    free(b.rpool.a);
    free(b.fpool.a);
    free(b.tc);
    if (rc) mp_rspace_free(sp);
    return rc;
}
