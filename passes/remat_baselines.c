/* remat_baselines.c - the orders a plan is compared with, each counted by
 * mp_rsched_count like any plan:
 *   none    the store-everything order;
 *   all     every articulation value of the forward graph kept (after its
 *           producer, the only forward value a later forward node reads);
 *           the rest of each segment between two of them is recomputed just
 *           before the first backward node that reads a value it dropped;
 *   sqrt    the same with every ceil(sqrt(k))-th of the k articulation values
 *           kept (Chen et al. 2016): fewer, longer segments, more recomputed;
 *   greedy  the store-everything order simulated under the budget: inputs
 *           that are gone are recomputed on demand, depth first, and while
 *           the budget is exceeded the value with the least cost / (bytes *
 *           staleness) is evicted, its cost counting the ancestors that are
 *           gone too (DTR, Kirisame et al. 2021);
 *   lookahead the same simulation, but the schedule is known ahead: staleness
 *           (how long ago a value was used) becomes the distance to its next
 *           use, so the value evicted is the one cheap to remake per byte and
 *           needed last (Belady's rule, weighted by cost as in DTR).
 * As in Chen et al., the last segment is never dropped: the backward starts
 * right after it. Values of non-forward producers, pinned values, graph
 * outputs and values read across more than half the forward pass are never
 * dropped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

const char *const mp_rbaseline_names[MP_RBASE_COUNT] = {"none", "all", "sqrt", "greedy", "lookahead"};

static bool flag(const uint8_t *a, int32_t i) { return a && a[i]; }

static const char *node_label(const mp_rgraph *rg, int32_t u)
{
    return rg->node_name && rg->node_name[u] ? rg->node_name[u] : "?";
}

/* A node a baseline may run again: forward, and writing no pinned value. */
static bool replayable(const mp_rgraph *rg, int32_t u)
{
    if (!flag(rg->recomputable, u)) return false;
    for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++)
        if (flag(rg->pinned, rg->out[k])) return false;
    return true;
}

/* ---- a growing order ---- */

typedef struct order {
    mp_rsched s;
    int32_t cap;
} order;

static int order_push(order *o, int32_t node, uint8_t recompute, mp_err *err)
{
    if (o->s.n == o->cap) {
        if (o->cap > INT32_MAX / 2) return mp_fail(err, "remat baseline: the order grew past 2^30 entries");
        int32_t cap = o->cap ? 2 * o->cap : 256;
        int32_t *nodes = realloc(o->s.node, (size_t)cap * sizeof *nodes);
        if (nodes) o->s.node = nodes;
        uint8_t *re = nodes ? realloc(o->s.recompute, (size_t)cap) : NULL;
        if (!re) return mp_fail(err, "remat baseline: out of memory for %d entries", cap);
        o->s.recompute = re;
        o->cap = cap;
    }
    o->s.node[o->s.n] = node;
    o->s.recompute[o->s.n++] = recompute;
    return 0;
}

/* ---- all and sqrt: checkpoints on the articulation values ---- */

/* Readers of each value, in node order (CSR). */
static int readers_build(const mp_rgraph *rg, int32_t **off, int32_t **rd, mp_err *err)
{
    int32_t nin = rg->in_off[rg->nnodes];
    *off = calloc((size_t)rg->nvalues + 1, sizeof **off);
    *rd = malloc(((size_t)nin + 1) * sizeof **rd);
    int32_t *fill = calloc((size_t)rg->nvalues + 1, sizeof *fill);
    if (!*off || !*rd || !fill) {
        free(fill);
        return mp_fail(err, "remat baseline: out of memory");
    }
    for (int32_t k = 0; k < nin; k++) (*off)[rg->in[k] + 1]++;
    for (int32_t v = 0; v < rg->nvalues; v++) (*off)[v + 1] += (*off)[v];
    for (int32_t u = 0; u < rg->nnodes; u++)
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
            int32_t v = rg->in[k];
            (*rd)[(*off)[v] + fill[v]++] = u;
        }
    free(fill);
    return 0;
}

static int checkpoint_order(const mp_rgraph *rg, bool sqrt_stride, mp_rsched *s, mp_err *err)
{
    int32_t n = rg->nnodes, nv = rg->nvalues;
    size_t nn = (size_t)n + 1, nvv = (size_t)nv + 1;
    int32_t *lastf = malloc(nvv * sizeof *lastf);    /* last forward reader of each value, -1 none */
    int32_t *diff = calloc(nn, sizeof *diff);        /* forward values crossing each cut, as differences */
    int32_t *arts = malloc(nvv * sizeof *arts);      /* articulation values in producer order */
    uint8_t *ckpt = calloc(nvv, 1), *kept = calloc(nvv, 1);
    int32_t *seg = malloc(nn * sizeof *seg);         /* segment of each forward node, -1 others */
    int32_t *seg_start = malloc(nn * sizeof *seg_start), *seg_end = malloc(nn * sizeof *seg_end);
    int32_t *point = malloc(nn * sizeof *point);     /* node before which a segment is recomputed, -1 never */
    int32_t *head = malloc(nn * sizeof *head), *next = malloc(nn * sizeof *next); /* segments by point */
    uint8_t *mark = calloc(nn, 1);                   /* nodes to recompute */
    int32_t *roff = NULL, *rd = NULL;
    order o = {{0}, 0};
    int rc = -1;
    if (!lastf || !diff || !arts || !ckpt || !kept || !seg || !seg_start || !seg_end || !point || !head || !next ||
        !mark) {
        mp_fail(err, "remat baseline: out of memory");
        goto done;
    }
    if (readers_build(rg, &roff, &rd, err)) goto done;

    /* pass 1: articulation values - after its producer, the only forward value a later forward node reads.
     * A value read across more than half the forward pass (a causal mask every layer reads, a U-Net's
     * outer skip) would leave no such cut: it is kept, like a resident one, and crosses nothing. */
    int32_t nfwd = 0;
    for (int32_t u = 0; u < n; u++) {
        seg[u] = nfwd; /* forward nodes before u, for now */
        nfwd += flag(rg->recomputable, u);
    }
    for (int32_t v = 0; v < nv; v++) lastf[v] = -1;
    for (int32_t u = 0; u < n; u++)
        if (flag(rg->recomputable, u))
            for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) lastf[rg->in[k]] = u;
    for (int32_t v = 0; v < nv; v++) {
        int32_t p = rg->producer[v];
        if (p < 0 || !flag(rg->recomputable, p) || lastf[v] <= p) continue;
        if (seg[lastf[v]] - seg[p] > nfwd / 2) {
            kept[v] = 1;
            continue;
        }
        diff[p]++;
        diff[lastf[v]]--;
    }
    int32_t narts = 0, crossing = 0;
    for (int32_t u = 0; u < n; u++) {
        crossing += diff[u];
        if (crossing != 1 || !flag(rg->recomputable, u)) continue;
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++)
            if (lastf[rg->out[k]] > u && !kept[rg->out[k]]) arts[narts++] = rg->out[k]; /* the one crossing */
    }

    /* pass 2: the checkpoints, and what no baseline drops */
    int32_t stride = sqrt_stride ? (int32_t)ceil(sqrt((double)narts)) : 1;
    for (int32_t j = stride - 1; stride > 0 && j < narts; j += stride) ckpt[arts[j]] = 1;
    for (int32_t v = 0; v < nv; v++) {
        int32_t p = rg->producer[v];
        kept[v] |= ckpt[v] || p < 0 || !replayable(rg, p) || flag(rg->keep_to_end, v) || flag(rg->pinned, v);
    }

    /* pass 3: segments of forward nodes, each ending at a checkpoint's producer */
    int32_t nseg = 0;
    for (int32_t u = 0; u < n; u++) {
        seg[u] = -1;
        head[u] = -1;
        if (!flag(rg->recomputable, u)) continue;
        if (nseg == 0 || seg_end[nseg - 1] < 0) {
            if (nseg == 0) nseg = 1;
            seg_start[nseg - 1] = u;
        }
        seg[u] = nseg - 1;
        seg_end[nseg - 1] = u;
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++)
            if (ckpt[rg->out[k]]) {
                seg_end[nseg] = -1; /* the next forward node opens a new segment */
                nseg++;
                break;
            }
    }
    if (nseg > 0 && seg_end[nseg - 1] < 0) nseg--;
    head[n] = -1;

    /* pass 4: each segment comes back before the first backward node after it that reads a value it drops;
     * the last one is not dropped at all, since the backward starts right after it */
    for (int32_t j = 0; j < nseg; j++) point[j] = -1;
    for (int32_t v = 0; v < nv; v++) {
        if (kept[v]) continue;
        int32_t j = seg[rg->producer[v]];
        if (j == nseg - 1) continue;
        for (int32_t r = roff[v]; r < roff[v + 1]; r++) {
            int32_t u = rd[r];
            if (!flag(rg->recomputable, u) && u > seg_end[j] && (point[j] < 0 || u < point[j])) point[j] = u;
        }
    }

    /* pass 5: recompute the dropped values read from the point on, and their dropped ancestors in the segment */
    for (int32_t v = 0; v < nv; v++) {
        if (kept[v]) continue;
        int32_t p = rg->producer[v], j = seg[p];
        if (point[j] < 0) continue;
        for (int32_t r = roff[v + 1] - 1; r >= roff[v] && rd[r] >= point[j]; r--)
            if (!flag(rg->recomputable, rd[r])) {
                mark[p] = 1;
                break;
            }
    }
    for (int32_t j = 0; j < nseg; j++) {
        if (point[j] < 0) continue;
        for (int32_t u = seg_end[j]; u >= seg_start[j]; u--) {
            if (seg[u] != j || !mark[u]) continue;
            for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
                int32_t w = rg->in[k];
                if (!kept[w] && seg[rg->producer[w]] == j) mark[rg->producer[w]] = 1;
            }
        }
        /* a segment that would read what an in-place write changed by then (an optimizer update) is kept */
        for (int32_t u = seg_start[j]; u <= seg_end[j] && point[j] >= 0; u++)
            for (int32_t k = rg->in_off[u]; seg[u] == j && mark[u] && k < rg->in_off[u + 1]; k++)
                if (mp_rgraph_next_write(rg, rg->in[k], u) < point[j]) point[j] = -1;
        if (point[j] < 0) continue;
        next[j] = head[point[j]];
        head[point[j]] = j;
    }

    /* pass 6: the store-everything order with each segment's recomputation before its point */
    for (int32_t u = 0; u < n; u++) {
        for (int32_t j = head[u]; j >= 0; j = next[j])
            for (int32_t x = seg_start[j]; x <= seg_end[j]; x++)
                if (seg[x] == j && mark[x] && order_push(&o, x, 1, err)) goto done;
        if (order_push(&o, u, 0, err)) goto done;
    }
    rc = 0;
done:
    free(lastf);
    free(diff);
    free(arts);
    free(ckpt);
    free(kept);
    free(seg);
    free(seg_start);
    free(seg_end);
    free(point);
    free(head);
    free(next);
    free(mark);
    free(roff);
    free(rd);
    if (rc) mp_rsched_free(&o.s);
    else *s = o.s;
    return rc;
}

/* ---- greedy and lookahead: DTR-style eviction under the budget ---- */

/* The simulation keeps at least what the recount keeps alive: an instance it
 * evicts or frees has no further use before its value is computed again, so
 * the recount freed it at its last use. Its live bytes bound the recount's. */
typedef struct greedy {
    const mp_rgraph *rg;
    int64_t budget, live;
    uint8_t *present;      /* nvalues: the value has an instance */
    uint8_t *replay;       /* nvalues: its producer may run again, so it may be evicted */
    int32_t *need;         /* nvalues: the last step whose recomputations may read it */
    int32_t step;          /* the store-everything step being run */
    int32_t *lock;         /* nvalues: inputs of pending entries and outputs of the running one */
    int32_t *touched;      /* nvalues: entry of the last access, for staleness */
    int32_t *pos, *pres;   /* the present non-resident values, and each one's index there (-1 absent) */
    int32_t npres;
    int32_t *stack, *stack_k; /* nodes whose inputs are being made present, and the next input to check */
    int32_t depth;
    int32_t *seen, stamp;  /* nnodes: marks of the search in g_remat_cost */
    bool lookahead;        /* evict by the distance to the next read, not by staleness */
    int32_t *rd_off, *rd;  /* readers of each value, in node order (CSR) */
    int32_t *next;         /* nvalues: index in rd of its next read in the store-everything order; the reads
                            * from there on are the ones left */
    int64_t max_entries;
    order o;
    mp_err *err;
} greedy;

static const char *g_name(const greedy *g)
{
    return mp_rbaseline_names[g->lookahead ? MP_RBASE_LOOKAHEAD : MP_RBASE_GREEDY];
}

/* Reads of v left in the store-everything order. */
static int32_t g_reads_left(const greedy *g, int32_t v) { return g->rd_off[v + 1] - g->next[v]; }

static void g_add(greedy *g, int32_t v)
{
    g->present[v] = 1;
    g->live += g->rg->bytes[v];
    g->pos[v] = g->npres;
    g->pres[g->npres++] = v;
}

static void g_drop(greedy *g, int32_t v)
{
    int32_t i = g->pos[v], last = g->pres[--g->npres];
    g->pres[i] = last;
    g->pos[last] = i;
    g->pos[v] = -1;
    g->present[v] = 0;
    g->live -= g->rg->bytes[v];
}

/* What bringing v back would cost: its producer and, transitively, the
 * producers of its inputs that are gone too (DTR's evicted neighbourhood),
 * looking at no more than LOOK nodes. */
enum { LOOK = 64 };
static double g_remat_cost(greedy *g, int32_t v)
{
    const mp_rgraph *rg = g->rg;
    int32_t todo[LOOK], n = 0, seen = 0;
    double sum = 0;
    g->stamp++;
    todo[n++] = rg->producer[v];
    g->seen[rg->producer[v]] = g->stamp;
    while (n > 0 && seen++ < LOOK) {
        int32_t p = todo[--n];
        sum += rg->cost ? rg->cost[p] : 0;
        for (int32_t k = rg->in_off[p]; k < rg->in_off[p + 1] && n < LOOK; k++) {
            int32_t w = rg->in[k], q = rg->producer[w];
            if (q >= 0 && !g->present[w] && g->seen[q] != g->stamp) {
                g->seen[q] = g->stamp;
                todo[n++] = q;
            }
        }
    }
    return sum;
}

/* The present value that is cheapest to lose: least cost / (bytes * staleness), or with lookahead / (bytes *
 * steps to its next read); -1 if none may go. */
static int32_t g_victim(greedy *g, int32_t now)
{
    const mp_rgraph *rg = g->rg;
    int32_t best = -1;
    double best_score = 0;
    for (int32_t i = 0; i < g->npres; i++) {
        int32_t v = g->pres[i];
        if (g->lock[v] || rg->bytes[v] <= 0 || flag(rg->keep_to_end, v) || !g->replay[v]) continue;
        /* dead ones, kept only in case a sibling recomputation reads them, go first */
        double score = -(double)rg->bytes[v];
        if (g_reads_left(g, v) > 0) { /* staleness in entries, or the steps to its next read */
            double away = g->lookahead ? (double)(g->rd[g->next[v]] - g->step + 1) : (double)(now - g->touched[v] + 1);
            score = g_remat_cost(g, v) / ((double)rg->bytes[v] * away);
        }
        if (best < 0 || score < best_score) {
            best = v;
            best_score = score;
        }
    }
    return best;
}

static void g_lock_inputs(greedy *g, int32_t u, int32_t d)
{
    for (int32_t k = g->rg->in_off[u]; k < g->rg->in_off[u + 1]; k++) g->lock[g->rg->in[k]] += d;
}

static void g_free_dead(greedy *g, int32_t v)
{
    if (g->rg->producer[v] >= 0 && g->present[v] && g_reads_left(g, v) == 0 && g->lock[v] == 0 &&
        !flag(g->rg->keep_to_end, v) && (g->replay[v] || g->step >= g->need[v]))
        g_drop(g, v);
}

/* Runs u (its inputs present and locked): allocates its outputs, evicts down to the budget, frees the dead. */
static int g_run(greedy *g, int32_t u, bool again)
{
    const mp_rgraph *rg = g->rg;
    int32_t e = g->o.s.n;
    if (e >= g->max_entries)
        return mp_fail(g->err, "%s: a budget of %lld bytes makes it thrash: more than %lld entries",
                       g_name(g), (long long)g->budget, (long long)g->max_entries);
    if (order_push(&g->o, u, again, g->err)) return -1;
    for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) g->touched[rg->in[k]] = e;
    for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
        int32_t v = rg->out[k];
        g->lock[v]++;
        if (!g->present[v]) g_add(g, v); /* a present one is replaced: counted once */
        g->touched[v] = e;
    }
    while (g->live > g->budget) {
        int32_t v = g_victim(g, e);
        if (v < 0)
            return mp_fail(g->err, "%s: a budget of %lld bytes cannot run node '%s': %lld bytes are live and "
                           "nothing more can be evicted", g_name(g), (long long)g->budget, node_label(rg, u),
                           (long long)g->live);
        g_drop(g, v);
    }
    for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) g->lock[rg->out[k]]--;
    g_lock_inputs(g, u, -1);
    if (!again)
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) { /* past u's reads (it may read v twice) */
            int32_t v = rg->in[k];
            while (g->next[v] < g->rd_off[v + 1] && g->rd[g->next[v]] <= u) g->next[v]++;
        }
    if (again) return 0; /* what it used last may serve the next recomputation; freed after the step */
    for (int32_t i = g->npres - 1; i >= 0; i--) g_free_dead(g, g->pres[i]); /* swap-removal keeps i valid */
    return 0;
}

static void g_push(greedy *g, int32_t u)
{
    g->stack[g->depth] = u;
    g->stack_k[g->depth++] = g->rg->in_off[u];
    g_lock_inputs(g, u, +1);
}

/* Runs node i of the store-everything order, first recomputing its evicted inputs, depth first. */
static int g_step(greedy *g, int32_t i)
{
    const mp_rgraph *rg = g->rg;
    g_push(g, i);
    while (g->depth > 0) {
        int32_t u = g->stack[g->depth - 1], k = g->stack_k[g->depth - 1];
        while (k < rg->in_off[u + 1] && (rg->producer[rg->in[k]] < 0 || g->present[rg->in[k]])) k++;
        g->stack_k[g->depth - 1] = k;
        if (k < rg->in_off[u + 1]) {
            int32_t w = rg->in[k], p = rg->producer[w];
            if (!replayable(rg, p))
                return mp_fail(g->err, "%s: node '%s' needs value %d of '%s' again, which cannot be recomputed",
                               g_name(g), node_label(rg, u), w, node_label(rg, p));
            g_push(g, p); /* p < u: the stack is at most as deep as the graph */
            continue;
        }
        if (g_run(g, u, g->depth > 1)) return -1;
        g->depth--;
    }
    return 0;
}

static int greedy_order(const mp_rgraph *rg, int64_t budget, bool lookahead, mp_rsched *s, mp_err *err)
{
    size_t nvv = (size_t)rg->nvalues + 1, nn = (size_t)rg->nnodes + 1;
    greedy g = {.rg = rg, .budget = budget, .lookahead = lookahead, .err = err};
    g.present = calloc(nvv, 1);
    g.replay = calloc(nvv, 1);
    g.need = malloc(nvv * sizeof *g.need);
    g.lock = calloc(nvv, sizeof *g.lock);
    g.touched = calloc(nvv, sizeof *g.touched);
    g.pos = malloc(nvv * sizeof *g.pos);
    g.pres = malloc(nvv * sizeof *g.pres);
    g.stack = malloc(nn * sizeof *g.stack);
    g.stack_k = malloc(nn * sizeof *g.stack_k);
    g.seen = calloc(nn, sizeof *g.seen);
    g.next = malloc(nvv * sizeof *g.next);
    g.max_entries = 16 * (int64_t)rg->nnodes + 1024; /* each node run 16 times: thrashing */
    if (g.max_entries > INT32_MAX / 2) g.max_entries = INT32_MAX / 2;
    int rc = -1;
    if (!g.present || !g.replay || !g.need || !g.lock || !g.touched || !g.pos || !g.pres || !g.stack || !g.stack_k || !g.seen ||
        !g.next) {
        mp_fail(err, "%s: out of memory", g_name(&g));
        goto done;
    }
    if (readers_build(rg, &g.rd_off, &g.rd, err)) goto done;
    for (int32_t v = 0; v < rg->nvalues; v++) g.next[v] = g.rd_off[v];
    int64_t total = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        g.pos[v] = -1;
        if (!mp_add_ok(total, rg->bytes[v], &total)) {
            mp_fail(err, "%s: the graph's bytes overflow 64 bits", g_name(&g));
            goto done;
        }
        if (rg->producer[v] < 0) g.live += rg->bytes[v];
    }
    if (g.live > budget) {
        mp_fail(err, "%s: the resident values alone (%lld bytes) exceed the budget of %lld bytes", g_name(&g),
                (long long)g.live, (long long)budget);
        goto done;
    }
    /* need: a value may be read up to its last use, and, as the input of a node run again, up to the need
     * of that node's outputs; one that cannot be recomputed (non-forward, pinned) stays until then */
    for (int32_t v = 0; v < rg->nvalues; v++) g.need[v] = rg->producer[v];
    for (int32_t u = 0; u < rg->nnodes; u++)
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) g.need[rg->in[k]] = u;
    for (int32_t u = rg->nnodes - 1; u >= 0; u--) {
        if (!replayable(rg, u)) continue;
        int32_t m = -1;
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            g.replay[rg->out[k]] = 1;
            if (g.need[rg->out[k]] > m) m = g.need[rg->out[k]];
        }
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++)
            if (g.need[rg->in[k]] < m) g.need[rg->in[k]] = m;
    }
    /* a value whose producer reads what an in-place write (an optimizer update) changes before the value's
     * last need could not be made again then: it is never evicted */
    for (int32_t u = 0; u < rg->nnodes; u++) {
        int32_t stale = rg->nnodes;
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
            int32_t w = mp_rgraph_next_write(rg, rg->in[k], u);
            if (w < stale) stale = w;
        }
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++)
            if (stale <= g.need[rg->out[k]]) g.replay[rg->out[k]] = 0;
    }
    for (int32_t i = 0; i < rg->nnodes; i++)
        if ((g.step = i, g_step(&g, i))) goto done;
    rc = 0;
done:
    free(g.present);
    free(g.replay);
    free(g.need);
    free(g.lock);
    free(g.touched);
    free(g.pos);
    free(g.pres);
    free(g.stack);
    free(g.stack_k);
    free(g.seen);
    free(g.rd_off);
    free(g.rd);
    free(g.next);
    if (rc) mp_rsched_free(&g.o.s);
    else *s = g.o.s;
    return rc;
}

/* ---- entry point ---- */

int mp_remat_baseline(const mp_rgraph *rg, mp_rbaseline b, int64_t budget, mp_rsched *s, mp_err *err)
{
    memset(s, 0, sizeof *s);
    /* the store-everything order must count: the graph is well formed and in topological order */
    mp_rsched id;
    mp_rcount c;
    if (mp_rsched_identity(rg, &id, err)) return -1;
    if (mp_rsched_count(rg, &id, &c, err)) {
        mp_rsched_free(&id);
        return -1;
    }
    if (b == MP_RBASE_NONE) {
        *s = id;
        return 0;
    }
    mp_rsched_free(&id);
    switch (b) {
    case MP_RBASE_ALL: return checkpoint_order(rg, false, s, err);
    case MP_RBASE_SQRT: return checkpoint_order(rg, true, s, err);
    case MP_RBASE_GREEDY: return greedy_order(rg, budget, false, s, err);
    case MP_RBASE_LOOKAHEAD: return greedy_order(rg, budget, true, s, err);
    default: return mp_fail(err, "unknown rematerialization baseline %d", (int)b);
    }
}
