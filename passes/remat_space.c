/* remat_space.c - the decision space of rematerialization (docs/ilp.md): the
 * store-everything counts, the groups (a droppable value and one of its gaps
 * between uses), and for each the candidate steps it may come back at with
 * the recipe that brings it back (or, retaining, the producer alone, or on
 * small graphs the nodes near it), with the values it may free as it runs. Four
 * passes: uses and last uses, store-everything counts, groups, candidates
 * (latest producer first, so that chains cascade into earlier values; then,
 * on small graphs, the recipes again keeping what they make for later ones). */
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

mp_rspace_opts mp_rspace_defaults(void)
{
    return (mp_rspace_opts){.max_candidates = 6, .max_gaps = 4, .max_recipe = 64, .min_fraction = 0,
                            .retain = true, .retain_over = INT32_MAX, .retain_nodes = 200,
                            .wide_nodes = 32, .expand_nodes = 0, .every_step_nodes = 32, .keep_nodes = 32};
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
    int32_t value, step, group, nrecipe, roff, nfront, foff;
    int32_t nexpand, eoff; /* the values made inside, in epool */
    int32_t nretain, toff;
    int32_t nleave, loff, poff; /* leave values in lpool, their nleave + 1 peaks in ppool */
    int32_t keep;               /* mp_rcand.keep */
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
    ivec expand;              /* the values the recipe being built makes for itself although live at q */
    int32_t hold[2];          /* dead values the recipe being built retains wherever it reads them, -1 none */
    int32_t keep;             /* a value the recipe being built makes and keeps for later recipes, -1 none */
    uint8_t *inside;          /* nvalues: 1 for those values */
    ivec rec, front, ret;     /* the recipe being built; ret: the dead inputs a retaining one keeps */
    ivec depth;               /* beside rec: each node's distance from the value's producer */
    ivec rpool, fpool, tpool; /* recipes, frontiers and retained values of all candidates */
    ivec epool;               /* the values each candidate makes for itself (mp_rcand.expand) */
    ivec lpool;               /* the values each candidate may free while its recipe runs (mp_rcand.leave) */
    int64_t *ppool;           /* the peaks of the stretches between their last reads (mp_rcand.leave_peak) */
    int32_t np, capp;
    int64_t *profile;         /* the extra bytes at each entry of the recipe being built */
    int32_t capprofile;
    tcand *tc;
    int32_t ntc, captc;
    uint8_t *largest;         /* ndrop: the group is its value's largest gap (the earlier of equals) */
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
    if (sp->cand && sp->ncand) { /* recipes, frontiers and expansions live in pools owned by the first candidate */
        free(sp->cand[0].recipe);
        free(sp->cand[0].front);
        free(sp->cand[0].leave);
        free(sp->cand[0].leave_peak);
        free(sp->cand[0].expand);
        free(sp->cand[0].retain);
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

typedef struct gap {
    int32_t len, start;
} gap;

static int cmp_gap_size(const void *a, const void *b) /* larger first, then earlier */
{
    const gap *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static int cmp_gap_start(const void *a, const void *b)
{
    const gap *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* pass 3: the groups. For each droppable value, in producer order, its
 * max_gaps largest gaps of length >= 2 between consecutive events of
 * {p_v} and its uses (ties: the earlier), laid out by position. On small
 * graphs (every_step_nodes) also gaps of one step: the value is freed after
 * a node and made again before the next, away while the recipes before its
 * own in that phase run. */
static int find_gaps(build *b, mp_err *err)
{
    const mp_rgraph *rg = b->rg;
    mp_rspace *sp = b->sp;
    int32_t nv = rg->nvalues, G = b->o.max_gaps, least = rg->nnodes <= b->o.every_step_nodes ? 1 : 2;
    int64_t maxb = 0, cap = 0;
    uint8_t *ok = calloc((size_t)nv + 1, 1);
    gap *gs = malloc(((size_t)rg->nnodes + 1) * sizeof *gs); /* one value's gaps */
    int32_t *ev = malloc(((size_t)rg->nnodes + 2) * sizeof *ev); /* its events */
    int rc = -1;
    if (!ok || !gs || !ev) goto oom;
    for (int32_t v = 0; v < nv; v++) {
        sp->drop_index[v] = -1;
        int32_t p = rg->producer[v], prev = p, big = 0;
        if (p < 0 || !flag(rg->recomputable, p) || flag(rg->pinned, v) || flag(rg->keep_to_end, v) ||
            rg->bytes[v] <= 0)
            continue;
        for (int32_t k = b->use_off[v]; k < b->use_off[v + 1]; k++) {
            big += b->use[k] - prev >= least;
            prev = b->use[k];
        }
        if (!big) continue;
        ok[v] = 1;
        cap += big < G ? big : G;
        if (rg->bytes[v] > maxb) maxb = rg->bytes[v];
    }
    sp->drop = malloc(((size_t)cap + 1) * sizeof *sp->drop);
    sp->gap_start = malloc(((size_t)cap + 1) * sizeof *sp->gap_start);
    sp->gap_end = malloc(((size_t)cap + 1) * sizeof *sp->gap_end);
    sp->cand_off = malloc(((size_t)cap + 2) * sizeof *sp->cand_off);
    b->largest = calloc((size_t)cap + 1, 1);
    if (!sp->drop || !sp->gap_start || !sp->gap_end || !sp->cand_off || !b->largest) goto oom;
    double floor_bytes = b->o.min_fraction * (double)maxb;
    for (int32_t u = 0; u < rg->nnodes; u++)
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t v = rg->out[k], ne = 0, ng = 0;
            if (!ok[v] || (double)rg->bytes[v] < floor_bytes) continue;
            ev[ne++] = u;
            for (int32_t j = b->use_off[v]; j < b->use_off[v + 1]; j++) ev[ne++] = b->use[j];
            for (int32_t e = 0; e + 1 < ne; e++)
                if (ev[e + 1] - ev[e] >= least) gs[ng++] = (gap){ev[e + 1] - ev[e], ev[e]};
            if (ng > G) { /* the G largest, then back in position order */
                qsort(gs, (size_t)ng, sizeof *gs, cmp_gap_size);
                ng = G;
                qsort(gs, (size_t)ng, sizeof *gs, cmp_gap_start);
            }
            int32_t big = 0;
            for (int32_t g = 1; g < ng; g++) big = gs[g].len > gs[big].len ? g : big;
            b->largest[sp->ndrop + big] = 1;
            sp->drop_index[v] = sp->ndrop;
            for (int32_t g = 0; g < ng; g++) {
                sp->drop[sp->ndrop] = v;
                sp->gap_start[sp->ndrop] = gs[g].start, sp->gap_end[sp->ndrop] = gs[g].start + gs[g].len;
                sp->ndrop++;
            }
        }
    rc = 0;
    goto done;
oom:
    mp_fail(err, "out of memory building the remat space");
done:
    free(ok);
    free(gs);
    free(ev);
    return rc;
}

int32_t mp_rspace_group(const mp_rspace *sp, int32_t v, int32_t q)
{
    if (v < 0 || v >= sp->rg->nvalues) return -1;
    for (int32_t i = sp->drop_index[v]; i >= 0 && i < sp->ndrop && sp->drop[i] == v; i++)
        if (sp->gap_start[i] < q && q <= sp->gap_end[i]) return i;
    return -1;
}

int64_t mp_rspace_kept_bytes(const mp_rspace *sp, int32_t c)
{
    return sp->cand[c].keep >= 0 ? sp->rg->bytes[sp->cand[c].keep] : 0;
}

int32_t mp_rspace_kept_span(const mp_rspace *sp, int32_t c)
{
    return sp->cand[c].keep >= 0 ? mp_rspace_span(sp, sp->cand[c].keep, sp->cand[c].step) : -1;
}

bool mp_rcand_leaves(const mp_rcand *c, int32_t x)
{
    for (int32_t k = 0; k < c->nleave; k++)
        if (c->leave[k] == x) return true;
    return false;
}

int32_t mp_rspace_span(const mp_rspace *sp, int32_t x, int32_t q)
{
    if (sp->last_use[x] < q) return x;
    int32_t g = mp_rspace_group(sp, x, q);
    return g >= 0 ? sp->rg->nvalues + g : -1;
}

int32_t mp_rspace_span_start(const mp_rspace *sp, int32_t span)
{
    return span < sp->rg->nvalues ? sp->last_use[span] + 1 : sp->gap_start[span - sp->rg->nvalues] + 1;
}

/* A value alive at step q in the store-everything order (produced before q, needed at q or later). */
static bool live_at(const mp_rspace *sp, int32_t x, int32_t q)
{
    return sp->rg->producer[x] < q && q <= sp->last_use[x];
}

/* Alive at q for the recipe being built: the value it makes for itself is not. */
static bool live_for(const build *b, int32_t x, int32_t q) { return !b->inside[x] && live_at(b->sp, x, q); }

/* The values the recipe being built makes for itself: none. */
static void clear_inside(build *b)
{
    for (int32_t i = 0; i < b->expand.n; i++) b->inside[b->expand.a[i]] = 0;
    b->expand.n = 0;
}

static bool make_inside(build *b, int32_t v)
{
    if (b->inside[v]) return true;
    b->inside[v] = 1;
    return ivec_push(&b->expand, v);
}

/* R(w,q) into b->rec (node ids, increasing) and b->front; false when it is
 * not offered. Retaining (depth < INT32_MAX), only the nodes within depth
 * steps of w's producer rerun (0: the producer alone): the inputs that died
 * before q and come from deeper go to b->ret, kept alive until it runs (a
 * buffer overwritten in place, pinned, cannot be: then it is not offered,
 * nor when nothing is retained); so do b->hold's at any depth. A value
 * retained while its producer reruns would be made twice: not offered. */
static bool make_recipe(build *b, int32_t w, int32_t q, int32_t depth)
{
    const mp_rgraph *rg = b->rg;
    const mp_rspace *sp = b->sp;
    int32_t s = ++b->stamp;
    bool retain = depth < INT32_MAX || b->hold[0] >= 0;
    b->rec.n = b->front.n = b->ret.n = b->depth.n = 0;
    int32_t pw = rg->producer[w];
    if (!ivec_push(&b->rec, pw) || !ivec_push(&b->depth, 0)) return false;
    b->node_mark[pw] = s;
    for (int32_t i = 0; i < b->rec.n; i++) { /* rec doubles as the worklist, breadth first: depth[i] is rec[i]'s */
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k], px = rg->producer[x];
            if (mp_rgraph_next_write(rg, x, r) < q) return false; /* overwritten in place before q (an update) */
            if (px < 0) continue;
            if (live_for(b, x, q)) { /* the frontier: a plan constraint when x may be away at q */
                if (b->val_mark[x] != s && mp_rspace_group(sp, x, q) >= 0) {
                    b->val_mark[x] = s;
                    if (!ivec_push(&b->front, x)) return false;
                }
                continue;
            }
            if (b->node_mark[px] == s) continue;
            /* a value made inside is away, not dead: it reruns, never retained */
            if (retain && !b->inside[x] && (b->depth.a[i] >= depth || x == b->hold[0] || x == b->hold[1] ||
                           !flag(rg->recomputable, px))) {
                if (flag(rg->pinned, x)) return false;
                if (b->val_mark[x] == s) continue;
                b->val_mark[x] = s;
                if (!ivec_push(&b->ret, x)) return false;
                continue;
            }
            if (!flag(rg->recomputable, px)) return false;
            if (b->rec.n >= b->o.max_recipe) return false;
            b->node_mark[px] = s;
            if (!ivec_push(&b->rec, px) || !ivec_push(&b->depth, b->depth.a[i] + 1)) return false;
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
            if (y != w && live_for(b, y, q) && !flag(rg->keep_to_end, y)) return false;
        }
    }
    for (int32_t i = 0; i < b->ret.n; i++)
        if (b->node_mark[rg->producer[b->ret.a[i]]] == s) return false;
    return !retain || b->ret.n > 0;
}

/* Is x one of the dead inputs the recipe being built keeps alive? */
static bool retained(const build *b, int32_t x)
{
    for (int32_t k = 0; k < b->ret.n; k++)
        if (b->ret.a[k] == x) return true;
    return false;
}

/* Extra bytes while the recipe runs: intermediates freed after their last use
 * in the recipe, dead unused outputs right after their entry, w (and b->keep) kept.
 * b->profile gets the bytes at each entry (the caller sized it). */
static int64_t recipe_peak(build *b, int32_t w, int32_t q)
{
    const mp_rgraph *rg = b->rg;
    int32_t s = ++b->stamp;
    for (int32_t i = 0; i < b->rec.n; i++) {
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k];
            /* retained ones are not its own; the one it keeps stays */
            if (rg->producer[x] >= 0 && !live_for(b, x, q) && !retained(b, x) && x != b->keep)
                b->val_mark[x] = s, b->dead_last[x] = i;
        }
    }
    int64_t cur = 0, peak = 0;
    for (int32_t i = 0; i < b->rec.n; i++) {
        int32_t r = b->rec.a[i];
        for (int32_t k = rg->out_off[r]; k < rg->out_off[r + 1]; k++) {
            int32_t y = rg->out[k];
            if (y == w || !live_for(b, y, q)) cur += rg->bytes[y];
        }
        b->profile[i] = cur;
        if (cur > peak) peak = cur;
        for (int32_t k = rg->in_off[r]; k < rg->in_off[r + 1]; k++) {
            int32_t x = rg->in[k];
            if (b->val_mark[x] == s && b->dead_last[x] == i) cur -= rg->bytes[x], b->val_mark[x] = 0;
        }
        for (int32_t k = rg->out_off[r]; k < rg->out_off[r + 1]; k++) {
            int32_t y = rg->out[k];
            if (y != w && y != b->keep && !live_for(b, y, q) && b->val_mark[y] != s) cur -= rg->bytes[y];
        }
    }
    return peak;
}

/* The values the candidate just built may free while its recipe runs (the
 * retained ones; on small graphs its frontier inputs too), by the recipe's
 * last read of them, and the peak of each stretch between those reads. */
static int add_leaves(build *b, tcand *c)
{
    const mp_rgraph *rg = b->rg;
    int32_t n0 = b->lpool.n, nfront = rg->nnodes <= b->o.wide_nodes ? b->front.n : 0;
    for (int32_t i = 0; i < b->ret.n + nfront; i++)
        if (!ivec_push(&b->lpool, i < b->ret.n ? b->ret.a[i] : b->front.a[i - b->ret.n])) return -1;
    c->nleave = b->lpool.n - n0;
    int32_t *leave = b->lpool.a + n0, *last = b->dead_last; /* scratch: the last read of each */
    for (int32_t k = 0; k < c->nleave; k++) last[leave[k]] = -1;
    for (int32_t j = 0; j < b->rec.n; j++)
        for (int32_t k = rg->in_off[b->rec.a[j]]; k < rg->in_off[b->rec.a[j] + 1]; k++) last[rg->in[k]] = j;
    for (int32_t i = 1; i < c->nleave; i++) /* by last read (insertion sort: a handful) */
        for (int32_t j = i; j > 0 && last[leave[j - 1]] > last[leave[j]]; j--) {
            int32_t t = leave[j];
            leave[j] = leave[j - 1], leave[j - 1] = t;
        }
    if (b->np + c->nleave + 1 > b->capp) {
        int32_t cap = 2 * (b->np + c->nleave + 1);
        int64_t *p = realloc(b->ppool, (size_t)cap * sizeof *p);
        if (!p) return -1;
        b->ppool = p, b->capp = cap;
    }
    for (int32_t k = 0, from = 0; k <= c->nleave; k++) {
        int32_t to = k < c->nleave ? last[leave[k]] : b->rec.n - 1;
        int64_t peak = -1;
        for (int32_t j = from; j <= to; j++) peak = b->profile[j] > peak ? b->profile[j] : peak;
        b->ppool[b->np++] = peak;
        if (to + 1 > from) from = to + 1;
    }
    return 0;
}

static int add_cand(build *b, int32_t w, int32_t q, int32_t group, mp_err *err)
{
    if (b->ntc == b->captc) {
        int32_t cap = b->captc ? 2 * b->captc : 64;
        tcand *p = realloc(b->tc, (size_t)cap * sizeof *p);
        if (!p) return mp_fail(err, "out of memory building the remat space");
        b->tc = p;
        b->captc = cap;
    }
    if (b->rec.n > b->capprofile) {
        int64_t *p = realloc(b->profile, (size_t)b->rec.n * sizeof *p);
        if (!p) return mp_fail(err, "out of memory building the remat space");
        b->profile = p, b->capprofile = b->rec.n;
    }
    tcand *c = &b->tc[b->ntc++];
    *c = (tcand){.value = w, .step = q, .group = group, .nrecipe = b->rec.n, .roff = b->rpool.n, .nfront = b->front.n,
                 .foff = b->fpool.n, .nexpand = b->expand.n, .eoff = b->epool.n, .nretain = b->ret.n,
                 .toff = b->tpool.n, .peak = recipe_peak(b, w, q), .loff = b->lpool.n, .poff = b->np,
                 .keep = b->keep};
    for (int32_t i = 0; i < b->rec.n; i++) {
        c->cost += b->rg->cost ? b->rg->cost[b->rec.a[i]] : 0;
        if (!ivec_push(&b->rpool, b->rec.a[i])) return mp_fail(err, "out of memory building the remat space");
    }
    for (int32_t i = 0; i < b->front.n; i++)
        if (!ivec_push(&b->fpool, b->front.a[i])) return mp_fail(err, "out of memory building the remat space");
    for (int32_t i = 0; i < c->nretain; i++)
        if (!ivec_push(&b->tpool, b->ret.a[i])) return mp_fail(err, "out of memory building the remat space");
    for (int32_t i = 0; i < c->nexpand; i++)
        if (!ivec_push(&b->epool, b->expand.a[i])) return mp_fail(err, "out of memory building the remat space");
    return add_leaves(b, c) ? mp_fail(err, "out of memory building the remat space") : 0;
}

/* Each frontier input of the candidate just added that could come back at its
 * step (inside its gap, before its end) gets that step in its group's Q. */
static bool share_step(build *b, ivec *Q, int32_t step, int32_t sec)
{
    const mp_rspace *sp = b->sp;
    for (int32_t f = 0; f < b->front.n; f++) {
        int32_t g = mp_rspace_group(sp, b->front.a[f], step);
        if (sp->gap_start[g] + 2 <= step && step < sp->gap_end[g] && !ivec_push(&Q[g], 2 * step + sec)) return false;
    }
    return true;
}

/* Does the recipe just built repeat one of the candidates of (w, step) from
 * `from` on? The recipe and its step tell what it retains and makes inside. */
static bool offered(const build *b, int32_t from, int32_t step)
{
    for (int32_t k = from; k < b->ntc; k++) {
        const tcand *t = &b->tc[k];
        if (t->step == step && t->keep == b->keep && t->nrecipe == b->rec.n &&
            !memcmp(b->rpool.a + t->roff, b->rec.a, (size_t)b->rec.n * sizeof *b->rec.a))
            return true;
    }
    return false;
}

/* The deepest level of the recipe just built (0: the producer alone). */
static int32_t deepest_level(const build *b)
{
    int32_t deepest = 0;
    for (int32_t r = 0; r < b->depth.n; r++) deepest = b->depth.a[r] > deepest ? b->depth.a[r] : deepest;
    return deepest;
}

/* Recipes (w, step) cut short, on small graphs: the nodes within d steps of
 * the producer rerun and the dead values the deeper ones made are retained,
 * for each d below the whole recipe's deepest level (Checkmate's orders keep
 * such a value to rerun the end of a chain). The values the builder makes
 * inside stay made inside. With Q, their frontier inputs may come back at
 * step too (share_step). Candidates from `base` on are not repeated. */
static int add_cut_short(build *b, int32_t w, int32_t step, int32_t group, int32_t base, int32_t whole,
                         int32_t deepest, ivec *Q, int32_t sec, mp_err *err)
{
    for (int32_t d = 1, last = 1; whole > 1 && d < deepest; d++) {
        if (!make_recipe(b, w, step, d) || b->rec.n <= last || b->rec.n >= whole) continue;
        last = b->rec.n;
        if (offered(b, base, step)) continue; /* another way to the same recipe offered it */
        if (add_cand(b, w, step, group, err)) return -1;
        if (Q && !share_step(b, Q, step, sec)) return mp_fail(err, "out of memory building the remat space");
    }
    return 0;
}

/* Candidates (w, step) that retain one dead value x of the whole recipe (cand
 * `whole`), or two, wherever a recipe node reads them, rerunning the rest: x
 * runs over the outputs of the whole recipe's nodes but w's producer (a
 * recipe that repeats one offered is not offered again). Two: Checkmate's
 * orders rerun the end of a chain that reads two values kept since their
 * last use, one of them made deeper, which no depth cuts. */
static int add_holds(build *b, int32_t w, int32_t step, int32_t group, int32_t whole, mp_err *err)
{
    const mp_rgraph *rg = b->rg;
    int32_t nrec = b->tc[whole].nrecipe, roff = b->tc[whole].roff, nx = 0, rc = 0;
    int32_t *x = malloc(((size_t)rg->out_off[rg->nnodes] + 1) * sizeof *x);
    if (!x) return mp_fail(err, "out of memory building the remat space");
    for (int32_t j = 0; j < nrec - 1; j++) /* the last node makes w */
        for (int32_t k = rg->out_off[b->rpool.a[roff + j]]; k < rg->out_off[b->rpool.a[roff + j] + 1]; k++)
            x[nx++] = rg->out[k];
    for (int32_t i = 0; i < nx && !rc; i++)
        for (int32_t j = i; j < nx && !rc; j++) { /* j == i: x[i] alone */
            b->hold[0] = x[i], b->hold[1] = x[j];
            if (make_recipe(b, w, step, INT32_MAX) && b->rec.n > 1 && b->rec.n < nrec && !offered(b, whole, step))
                rc = add_cand(b, w, step, group, err);
        }
    b->hold[0] = b->hold[1] = -1;
    free(x);
    return rc;
}

/* Candidates (w, step) whose recipe makes a frontier input of the whole
 * recipe (candidate `base`) inside although it is away at step (its gap runs
 * past step), frees it after its read, as DTR does, and reads the rest where
 * they are; on small graphs each is also cut short (the dead values deeper
 * retained: Checkmate's orders rerun a chain's end from a value kept for it,
 * making an away input on the way). These add no steps. (Making a second
 * away input inside, one the first reads, gave one more of Checkmate's orders
 * on 17 nodes, but left a 15-node graph's least peak unproven in 60 s.) */
static int add_made_inside(build *b, int32_t w, int32_t step, int32_t group, int32_t base, mp_err *err)
{
    const mp_rspace *sp = b->sp;
    bool wide = b->rg->nnodes <= b->o.wide_nodes;
    int32_t nfront = b->tc[base].nfront, foff = b->tc[base].foff, nrec = b->tc[base].nrecipe;
    for (int32_t f = 0; f < nfront; f++) {
        int32_t v = b->fpool.a[foff + f], g = mp_rspace_group(sp, v, step);
        if (step >= sp->gap_end[g]) continue; /* node step reads v: it cannot be away */
        if (!make_inside(b, v)) return mp_fail(err, "out of memory building the remat space");
        bool ok = make_recipe(b, w, step, INT32_MAX) && b->rec.n > nrec;
        int rc = ok ? add_cand(b, w, step, group, err) : 0;
        if (!rc && ok && wide && b->o.retain)
            rc = add_cut_short(b, w, step, group, base, b->rec.n, deepest_level(b), NULL, 0, err);
        clear_inside(b);
        if (rc) return -1;
    }
    return 0;
}

/* Candidates (w, step) whose recipe makes every frontier input away at step
 * (its gap runs past step) for itself, level by level: each level also makes
 * the away inputs of the recipe the last level grew. A level of one such
 * input is the made-inside candidate already offered, and a level that adds
 * no node, or passes max_recipe, ends the ladder. */
static int add_deep(build *b, int32_t w, int32_t step, int32_t group, int32_t base, mp_err *err)
{
    const mp_rspace *sp = b->sp;
    int rc = 0;
    for (int32_t n = 0;;) {
        if (!make_recipe(b, w, step, INT32_MAX) || b->rec.n <= n) break;
        n = b->rec.n;
        if (b->expand.n > 1 && !offered(b, base, step) && (rc = add_cand(b, w, step, group, err))) break;
        int32_t before = b->expand.n;
        for (int32_t f = 0; f < b->front.n; f++) {
            int32_t v = b->front.a[f], g = mp_rspace_group(sp, v, step);
            if (step < sp->gap_end[g] && !make_inside(b, v)) {
                rc = mp_fail(err, "out of memory building the remat space");
                break;
            }
        }
        if (rc || b->expand.n == before) break;
    }
    clear_inside(b);
    return rc;
}

/* The recipe of candidate t into the builder again (rec, front, ret, the values it makes inside). */
static bool restore(build *b, const tcand *t)
{
    b->rec.n = b->front.n = b->ret.n = 0;
    clear_inside(b);
    for (int32_t i = 0; i < t->nrecipe; i++)
        if (!ivec_push(&b->rec, b->rpool.a[t->roff + i])) return false;
    for (int32_t i = 0; i < t->nfront; i++)
        if (!ivec_push(&b->front, b->fpool.a[t->foff + i])) return false;
    for (int32_t i = 0; i < t->nretain; i++)
        if (!ivec_push(&b->ret, b->tpool.a[t->toff + i])) return false;
    for (int32_t i = 0; i < t->nexpand; i++)
        if (!make_inside(b, b->epool.a[t->eoff + i])) return false;
    return true;
}

/* CSR over values of the candidates tc[0 .. n) that may read each value retained: a dead one (mp_rcand.retain),
 * or on small graphs an away one in its gap (the frontier). */
static int readers_of(const build *b, int32_t n, int32_t **off, int32_t **at)
{
    int32_t nv = b->rg->nvalues, total = 0;
    *off = calloc((size_t)nv + 2, sizeof **off);
    if (!*off) return -1;
    for (int32_t k = 0; k < n; k++) {
        const tcand *t = &b->tc[k];
        for (int32_t i = 0; i < t->nretain; i++) (*off)[b->tpool.a[t->toff + i] + 1]++, total++;
        for (int32_t i = 0; i < t->nfront; i++) (*off)[b->fpool.a[t->foff + i] + 1]++, total++;
    }
    for (int32_t v = 0; v < nv; v++) (*off)[v + 1] += (*off)[v];
    int32_t *fill = malloc(((size_t)nv + 1) * sizeof *fill);
    *at = malloc(((size_t)total + 1) * sizeof **at);
    if (!fill || !*at) {
        free(fill);
        return -1;
    }
    memcpy(fill, *off, (size_t)nv * sizeof *fill);
    for (int32_t k = 0; k < n; k++) {
        const tcand *t = &b->tc[k];
        for (int32_t i = 0; i < t->nretain; i++) (*at)[fill[b->tpool.a[t->toff + i]]++] = k;
        for (int32_t i = 0; i < t->nfront; i++) (*at)[fill[b->fpool.a[t->foff + i]]++] = k;
    }
    free(fill);
    return 0;
}

/* May a candidate of readers_of read x retained after t made it? A dead x at
 * any later place (a later step, or t's step and a later group); one made
 * inside, in its gap, only at t's step (it comes back after that step). */
static bool read_after(const build *b, const tcand *t, int32_t x, const int32_t *off, const int32_t *at)
{
    bool dead = b->sp->last_use[x] < t->step;
    for (int32_t k = off[x]; k < off[x + 1]; k++) {
        const tcand *r = &b->tc[at[k]];
        if (mp_rspace_runs_after(r->step, r->group, t->step, t->group) && (dead || r->step == t->step))
            return true; /* dead: r retains it (frontiers are live) */
    }
    return false;
}

/* On small graphs, a recipe that makes a value dead or away at its step (an
 * intermediate, freed after its last read) is offered again keeping it
 * (mp_rcand.keep) where a later recipe may read it retained: one rerun then
 * feeds both, where each recipe rerunning it costs twice, as Checkmate's
 * orders do (0, 1, 2, 3 rerun once before a node, where the recipes of 1, 2
 * and 3 each reran 0). After every candidate exists: the readers may come
 * back at later steps, in groups made earlier. */
static int add_makers(build *b, mp_err *err)
{
    const mp_rgraph *rg = b->rg;
    int32_t n = b->ntc, *off = NULL, *at = NULL;
    int rc = readers_of(b, n, &off, &at) ? mp_fail(err, "out of memory building the remat space") : 0;
    for (int32_t k = 0; k < n && !rc; k++) {
        tcand t = b->tc[k]; /* a copy: add_cand may move tc */
        for (int32_t j = 0; j + 1 < t.nrecipe && !rc; j++) { /* the last node makes the candidate's value */
            int32_t r = b->rpool.a[t.roff + j];
            for (int32_t o = rg->out_off[r]; o < rg->out_off[r + 1] && !rc; o++) {
                int32_t x = rg->out[o];
                bool inside = false;
                for (int32_t i = 0; i < t.nexpand; i++) inside |= b->epool.a[t.eoff + i] == x;
                if (!(inside || b->sp->last_use[x] < t.step) || !read_after(b, &t, x, off, at)) continue;
                if (!restore(b, &t)) {
                    rc = mp_fail(err, "out of memory building the remat space");
                    break;
                }
                b->keep = x;
                rc = add_cand(b, t.value, t.step, t.group, err);
                b->keep = -1;
            }
        }
    }
    clear_inside(b);
    free(off);
    free(at);
    return rc;
}

static int cmp_tcand(const void *a, const void *b) /* by group, then step, then the order they were made */
{
    const tcand *x = a, *y = b;
    if (x->group != y->group) return (x->group > y->group) - (x->group < y->group);
    if (x->step != y->step) return (x->step > y->step) - (x->step < y->step);
    return (x->roff > y->roff) - (x->roff < y->roff);
}

/* pass 4: candidates, latest group first. Q(g) starts as {b_g} (on small
 * graphs, every_step_nodes, every step of the gap, uncapped); each recipe
 * of w at q adds q to Q(g') of the group g' of each frontier input holding q
 * (when it could come back at q), so a run of dropped values can return in
 * one phase. g' belongs to an earlier producer, so it is still to come.
 * Steps are primary when they come from b_g or from primary steps of largest
 * gaps: exactly the steps of the one-gap space (max_gaps = 1). The cap keeps
 * b_g, then the latest primary steps, then the latest others, so the space
 * holds every plan of the one-gap space. Q holds 2 q + (1 when secondary). */
static int find_candidates(build *b, mp_err *err)
{
    mp_rspace *sp = b->sp;
    bool wide = b->rg->nnodes <= b->o.wide_nodes, every = b->rg->nnodes <= b->o.every_step_nodes;
    int32_t nd = sp->ndrop, maxc = every ? INT32_MAX : b->o.max_candidates;
    ivec *Q = calloc((size_t)nd + 1, sizeof *Q);
    uint8_t *take = malloc((size_t)b->rg->nnodes + 1);
    int rc = -1;
    if (!Q || !take) {
        mp_fail(err, "out of memory building the remat space");
        goto done;
    }
    for (int32_t i = 0; i < nd; i++) {
        /* where an in-place write (an update in the backward) changes what the producer reads before b_g,
         * the producer can run again only until that write: the latest such step joins b_g */
        int32_t p = b->rg->producer[sp->drop[i]], last = sp->gap_end[i];
        for (int32_t k = b->rg->in_off[p]; k < b->rg->in_off[p + 1]; k++) {
            int32_t wr = mp_rgraph_next_write(b->rg, b->rg->in[k], p);
            if (wr < last) last = wr;
        }
        for (int32_t t = sp->gap_start[i] + 2; every && t < sp->gap_end[i]; t++) /* small graphs: every step */
            if (!ivec_push(&Q[i], 2 * t + 1)) goto oom;
        if (!ivec_push(&Q[i], 2 * sp->gap_end[i]) ||
            (last < sp->gap_end[i] && last >= sp->gap_start[i] + 2 && !ivec_push(&Q[i], 2 * last))) {
            mp_fail(err, "out of memory building the remat space");
            goto done;
        }
    }
    for (int32_t i = nd - 1; i >= 0; i--) {
        int32_t w = sp->drop[i];
        ivec *q = &Q[i];
        qsort(q->a, (size_t)q->n, sizeof *q->a, cmp_i32);
        int32_t n = 0, left = maxc;
        for (int32_t k = 0; k < q->n; k++) /* one entry per step, primary if any is */
            if (!n || q->a[n - 1] >> 1 != q->a[k] >> 1) q->a[n++] = q->a[k];
        for (int32_t k = n - 1; k >= 0; k--) /* b_g (primary, the latest) and the latest primary steps */
            if ((take[k] = left > 0 && !(q->a[k] & 1))) left--;
        for (int32_t k = n - 1; k >= 0 && left > 0; k--)
            if (!take[k]) take[k] = 1, left--;
        for (int32_t k = 0; k < n; k++) {
            int32_t step = q->a[k] >> 1, sec = !b->largest[i] || (q->a[k] & 1);
            if (!take[k]) continue;
            int32_t base = b->ntc, whole = make_recipe(b, w, step, INT32_MAX) ? b->rec.n : 0;
            int32_t deepest = deepest_level(b);
            if (whole) {
                if (add_cand(b, w, step, i, err)) goto done;
                if (!share_step(b, Q, step, sec)) goto oom;
            }
            /* a third way, when the recipe is not offered (or reruns more than retain_over nodes):
             * the producer alone, its dead inputs retained */
            if (b->o.retain && whole != 1 && (whole == 0 || whole > b->o.retain_over)) {
                bool ok = make_recipe(b, w, step, 0);
                if (ok && add_cand(b, w, step, i, err)) goto done;
                if (ok && !share_step(b, Q, step, sec)) goto oom;
            }
            if (b->o.retain && wide && add_cut_short(b, w, step, i, base, whole, deepest, Q, sec, err)) goto done;
            /* and recipes that retain one or two dead values wherever they read them, rerunning the rest (cuts
             * the depths miss) */
            if (b->o.retain && wide && whole > 2 && add_holds(b, w, step, i, base, err)) goto done;
            /* a second way, on small graphs (or up to expand_nodes): a frontier input that is away at step made
             * inside the recipe */
            if (whole && (wide || b->rg->nnodes <= b->o.expand_nodes) && add_made_inside(b, w, step, i, base, err))
                goto done;
            /* on small graphs also recipes that make every away input for themselves, then those inputs' own,
             * level by level back to what is present (DTR's reruns from a checkpoint, freeing as they go) */
            if (whole && wide && add_deep(b, w, step, i, base, err)) goto done;
        }
    }
    if (b->rg->nnodes <= b->o.keep_nodes && add_makers(b, err)) goto done;
    /* lay the candidates out in drop order, each group's by step; recipes, frontiers and retained values stay in
     * their pools */
    if (b->ntc) qsort(b->tc, (size_t)b->ntc, sizeof *b->tc, cmp_tcand);
    sp->ncand = b->ntc;
    sp->cand = calloc((size_t)b->ntc + 1, sizeof *sp->cand);
    int32_t *rp = malloc(((size_t)b->rpool.n + 1) * sizeof *rp), *fp = malloc(((size_t)b->fpool.n + 1) * sizeof *fp);
    int32_t *ep = malloc(((size_t)b->epool.n + 1) * sizeof *ep), *tp = malloc(((size_t)b->tpool.n + 1) * sizeof *tp);
    int32_t *lp = malloc(((size_t)b->lpool.n + 1) * sizeof *lp);
    int64_t *pp = malloc(((size_t)b->np + 1) * sizeof *pp);
    if (!sp->cand || !rp || !fp || !ep || !tp || !lp || !pp) {
        free(rp);
        free(fp);
        free(ep);
        free(tp);
        free(lp);
        free(pp);
        goto oom;
    }
    int32_t nc = 0, nr = 0, nf = 0, ne = 0, nt = 0, nl = 0, npk = 0;
    for (int32_t i = 0, k = 0; i < nd; i++) {
        sp->cand_off[i] = nc;
        for (; k < b->ntc && b->tc[k].group == i; k++) {
            const tcand *t = &b->tc[k];
            mp_rcand *c = &sp->cand[nc++];
            *c = (mp_rcand){.value = t->value, .step = t->step, .group = t->group, .nrecipe = t->nrecipe, .recipe = rp + nr,
                            .cost = t->cost, .recipe_peak = t->peak, .nfront = t->nfront, .front = fp + nf,
                            .nleave = t->nleave, .leave = lp + nl, .leave_peak = pp + npk,
                            .nexpand = t->nexpand, .expand = ep + ne, .nretain = t->nretain, .retain = tp + nt,
                            .keep = t->keep};
            if (t->nexpand) memcpy(ep + ne, b->epool.a + t->eoff, (size_t)t->nexpand * sizeof *ep);
            ne += t->nexpand;
            if (t->nretain) memcpy(tp + nt, b->tpool.a + t->toff, (size_t)t->nretain * sizeof *tp);
            nt += t->nretain;
            memcpy(rp + nr, b->rpool.a + t->roff, (size_t)t->nrecipe * sizeof *rp);
            if (t->nfront) memcpy(fp + nf, b->fpool.a + t->foff, (size_t)t->nfront * sizeof *fp);
            if (t->nleave) memcpy(lp + nl, b->lpool.a + t->loff, (size_t)t->nleave * sizeof *lp);
            memcpy(pp + npk, b->ppool + t->poff, ((size_t)t->nleave + 1) * sizeof *pp);
            nl += t->nleave, npk += t->nleave + 1;
            nr += t->nrecipe, nf += t->nfront;
        }
    }
    sp->cand_off[nd] = nc;
    if (nc) {
        sp->cand[0].recipe = rp, sp->cand[0].front = fp, sp->cand[0].expand = ep, sp->cand[0].retain = tp;
        sp->cand[0].leave = lp, sp->cand[0].leave_peak = pp;
    } else {
        free(rp), free(fp), free(ep), free(tp), free(lp), free(pp); /* cand[0] owns the pools */
    }
    rc = 0;
    goto done;
oom:
    mp_fail(err, "out of memory building the remat space");
done:
    for (int32_t i = 0; Q && i < nd; i++) free(Q[i].a);
    free(Q);
    free(take);
    return rc;
}

int mp_rspace_build(const mp_rgraph *rg, const mp_rspace_opts *o, mp_rspace *sp, mp_err *err)
{
    memset(sp, 0, sizeof *sp);
    if (check_graph(rg, err)) return -1;
    build b = {.rg = rg, .sp = sp, .o = o ? *o : mp_rspace_defaults(), .hold = {-1, -1}, .keep = -1};
    if (b.o.max_candidates < 1) b.o.max_candidates = 1;
    if (b.o.max_recipe < 1) b.o.max_recipe = 1;
    if (b.o.max_gaps < 1) b.o.max_gaps = 1;
    if (rg->nnodes <= b.o.retain_nodes) b.o.retain_over = 1; /* small graphs: retaining candidates everywhere */
    sp->rg = rg;
    size_t nv = (size_t)rg->nvalues + 1, nn = (size_t)rg->nnodes + 1;
    sp->first_use = malloc(nv * sizeof *sp->first_use);
    sp->last_use = malloc(nv * sizeof *sp->last_use);
    sp->base_live = malloc(nn * sizeof *sp->base_live);
    sp->base_between = malloc(nn * sizeof *sp->base_between);
    sp->drop_index = malloc(nv * sizeof *sp->drop_index);
    b.node_mark = calloc(nn, sizeof *b.node_mark);
    b.val_mark = calloc(nv, sizeof *b.val_mark);
    b.dead_last = calloc(nv, sizeof *b.dead_last);
    b.inside = calloc(nv, 1);
    int rc = -1;
    if (!sp->first_use || !sp->last_use || !sp->base_live || !sp->base_between || !sp->drop_index || !b.node_mark ||
        !b.val_mark || !b.dead_last || !b.inside) {
        mp_fail(err, "out of memory building the remat space");
        goto done;
    }
    if (find_uses(&b, err) || count_base(&b, err) || find_gaps(&b, err)) goto done;
    if (find_candidates(&b, err)) goto done;
    rc = 0;
done:
    free(b.use_off);
    free(b.use);
    free(b.node_mark);
    free(b.val_mark);
    free(b.dead_last);
    free(b.inside);
    free(b.expand.a);
    free(b.epool.a);
    free(b.rec.a);
    free(b.front.a);
    free(b.ret.a);
    free(b.rpool.a);
    free(b.fpool.a);
    free(b.lpool.a);
    free(b.depth.a);
    free(b.ppool);
    free(b.profile);
    free(b.tpool.a);
    free(b.tc);
    free(b.largest);
    if (rc) mp_rspace_free(sp);
    return rc;
}
