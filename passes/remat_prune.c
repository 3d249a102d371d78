/* remat_prune.c - an order made by a rule that does not look at the budget
 * everywhere (all's and sqrt's checkpoints; greedy's evictions, each made
 * under a pressure that later passed) may recompute values that the budget
 * could have kept. mp_rsched_prune removes such recomputations, costliest
 * first: each goes when the order without it still peaks within the limit
 * (readers of the value then read its earlier instance, which lives on to
 * them), checked by recounting the whole order. Removing one leaves the
 * recomputations that only fed it unread; they go with it, since a
 * recomputation nobody reads before its value is made again only costs.
 * Two passes, the cheaper result kept: one with the budget as the limit, one
 * that raises the limit from the order's peak to the budget in steps. The
 * result is an order of the same graph, never dearer than the one given and
 * never above the budget. */
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

/* Entries recounted at most in a pass, so that a long order with many
 * recomputations is pruned in bounded, load-independent work (about 8 ms a
 * million on the development machine: Swin-T's greedy order of 7,823
 * entries, 607 recomputations, 5.1 M in 42 ms): the costliest are tried
 * first, the rest kept. */
#define PRUNE_WORK INT64_C(30000000)
#define PRUNE_STAGES 8 /* the steps of the second pass's limit */

typedef struct pruner {
    const mp_rgraph *rg;
    const mp_rsched *s;   /* the order given */
    uint8_t *keep;        /* s->n: the entry stays */
    int32_t *last;        /* nvalues: backward scan, a kept read of the instance after the entry */
    mp_rsched trial;      /* the kept entries, as an order */
} pruner;

/* Drops every kept recomputation none of whose outputs is read before its
 * value is made again (nor kept to the end). One backward scan: the readers
 * of an entry's outputs come after it, so they are decided before it, and a
 * chain of unread recomputations goes at once. */
static void drop_unread(pruner *p)
{
    const mp_rgraph *rg = p->rg;
    for (int32_t v = 0; v < rg->nvalues; v++) p->last[v] = -1;
    for (int32_t e = p->s->n - 1; e >= 0; e--) {
        if (!p->keep[e]) continue;
        int32_t u = p->s->node[e];
        bool read = !p->s->recompute[e]; /* a first run stays */
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1] && !read; k++) {
            int32_t v = rg->out[k];
            read = p->last[v] >= 0 || (rg->keep_to_end && rg->keep_to_end[v]);
        }
        if (!read) {
            p->keep[e] = 0;
            continue;
        }
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) p->last[rg->out[k]] = -1;
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) p->last[rg->in[k]] = e;
    }
}

/* Recounts the kept entries; true when they run and peak within budget. */
static bool kept_fits(pruner *p, int64_t budget, mp_rcount *c)
{
    int32_t n = 0;
    for (int32_t e = 0; e < p->s->n; e++)
        if (p->keep[e]) {
            p->trial.node[n] = p->s->node[e];
            p->trial.recompute[n++] = p->s->recompute[e];
        }
    p->trial.n = n;
    mp_err ignored = {{0}}; /* an order that cannot run is one that does not fit, ever */
    if (mp_rsched_recount(p->rg, &p->trial, c, &ignored)) c->peak_bytes = INT64_MAX;
    return c->peak_bytes <= budget;
}

typedef struct costly {
    double cost;
    int32_t entry;
    int64_t over;    /* the peak its removal reached when last over a limit (0: not tried) */
} costly;

static int cmp_costly(const void *pa, const void *pb)
{
    const costly *a = pa, *b = pb;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return (a->entry < b->entry) - (a->entry > b->entry); /* later first: the last of a run of equal ones */
}

/* One pass of removals, costliest first, from the order given: the room
 * above its own peak is given in `stages` steps (the first within the peak
 * itself), each trying the recomputations left. A removal that went over a
 * step's limit is tried again only once the limit passes the peak it reached
 * (removals mostly raise the memory), so the steps cost about one pass.
 * p->keep holds the result; returns the cost of the recomputations kept. */
static double prune_pass(pruner *p, costly *order, int32_t ncand, int64_t peak, int64_t budget, int stages,
                         uint8_t *saved)
{
    const mp_rsched *s = p->s;
    mp_rcount c;
    memset(p->keep, 1, (size_t)s->n);
    drop_unread(p);
    for (int32_t i = 0; i < ncand; i++) order[i].over = 0;
    int64_t work = 0;
    for (int stage = peak < budget && stages > 1 ? 0 : stages; stage <= stages; stage++) {
        int64_t limit = stage == stages ? budget : peak + (budget - peak) / stages * stage;
        for (int32_t i = 0; i < ncand && work + s->n <= PRUNE_WORK; i++) {
            int32_t e = order[i].entry;
            if (!p->keep[e] || order[i].over > limit) continue; /* gone with another (unread), or still over */
            memcpy(saved, p->keep, (size_t)s->n);
            p->keep[e] = 0;
            drop_unread(p);
            work += 2 * (int64_t)s->n;
            if (!kept_fits(p, limit, &c)) {
                memcpy(p->keep, saved, (size_t)s->n);
                order[i].over = c.peak_bytes;
            }
        }
    }
    double kept = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (p->keep[e] && s->recompute[e] && p->rg->cost) kept += p->rg->cost[s->node[e]];
    return kept;
}

int mp_rsched_prune(const mp_rgraph *rg, mp_rsched *s, int64_t budget, int32_t *removed, mp_err *err)
{
    if (removed) *removed = 0;
    mp_rcount c;
    if (mp_rsched_count(rg, s, &c, err)) return -1;
    if (c.peak_bytes > budget || !s->recompute) return 0; /* nothing to keep within, or nothing recomputed */
    size_t n = (size_t)(s->n ? s->n : 1);
    pruner p = {.rg = rg, .s = s};
    p.keep = malloc(n);
    p.last = malloc((size_t)(rg->nvalues + 1) * sizeof *p.last);
    p.trial.node = malloc(n * sizeof *p.trial.node);
    p.trial.recompute = malloc(n);
    costly *order = malloc(n * sizeof *order);
    uint8_t *saved = malloc(n), *one_step = malloc(n); /* keep before a trial; the one-step pass's result */
    int rc = -1;
    if (!p.keep || !p.last || !p.trial.node || !p.trial.recompute || !order || !saved || !one_step) {
        mp_fail(err, "prune: out of memory");
        goto done;
    }
    memset(p.keep, 1, n);
    drop_unread(&p);
    int32_t ncand = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (p.keep[e] && s->recompute[e]) order[ncand++] = (costly){rg->cost ? rg->cost[s->node[e]] : 0, e, 0};
    qsort(order, (size_t)ncand, sizeof *order, cmp_costly);
    /* In one step, a costly removal can take the room that several cheaper
     * ones would have shared for more (test_prune_small_raises_first), and
     * the result jumps about as the budget grows (the LLaMA-like model's
     * greedy order at its least target, pruned 0.2 MB higher: 25.97 -> 27.17 %).
     * In steps, removals that raise the peak little go first and the result
     * falls with the budget (to 25.97 % there), but they can crowd out a
     * costly one the single step takes; so both are made. */
    double one = prune_pass(&p, order, ncand, c.peak_bytes, budget, 1, saved);
    if (c.peak_bytes < budget && one > 0) { /* else the steps are the one step, or nothing is left to remove */
        memcpy(one_step, p.keep, n);
        double staged = prune_pass(&p, order, ncand, c.peak_bytes, budget, PRUNE_STAGES, saved);
        if (one <= staged) memcpy(p.keep, one_step, n);
    }
    if (!kept_fits(&p, budget, &c)) memset(p.keep, 1, n); /* never: dropping unread entries frees only */
    int32_t n_kept = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (p.keep[e]) {
            s->node[n_kept] = s->node[e];
            s->recompute[n_kept++] = s->recompute[e];
        }
    if (removed) *removed = s->n - n_kept;
    s->n = n_kept;
    rc = 0;
done:
    free(p.keep);
    free(p.last);
    free(p.trial.node);
    free(p.trial.recompute);
    free(order);
    free(saved);
    free(one_step);
    return rc;
}

int mp_rplan_order(const mp_rspace *sp, const mp_rplan *p, int64_t budget, mp_rsched *s, mp_rcount *c,
                   int32_t *removed, mp_err *err)
{
    if (mp_rplan_emit(sp, p, s, err)) return -1;
    int rc = mp_rsched_count(sp->rg, s, c, err) ? -1 : c->peak_bytes > budget ? 0 : 1;
    if (rc == 1 && (mp_rsched_prune(sp->rg, s, budget, removed, err) || mp_rsched_count(sp->rg, s, c, err))) rc = -1;
    if (rc != 1) mp_rsched_free(s);
    return rc;
}
