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
 * that raises the limit from the order's peak to the budget in steps (side
 * by side on two cores). The result is an order of the same graph, never
 * dearer than the one given and never above the budget. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/remat.h"

/* Entries recounted at most in a pass, so that a long order with many
 * recomputations is pruned in bounded, load-independent work (about 8 ms a
 * million on the development machine: Swin-T's greedy order of 7,823
 * entries, 607 recomputations, 5.1 M in 42 ms): the costliest are tried
 * first, the rest kept. */
#define PRUNE_WORK INT64_C(30000000)
#define PRUNE_STAGES 8 /* the steps of the second pass's limit */

typedef struct costly {
    double cost;
    int32_t entry;
    int64_t over; /* the peak its removal reached when last over a limit (0: not tried) */
} costly;

/* One pass of removals over the order given, with buffers of its own (the
 * two passes run side by side on two cores). */
typedef struct pruner {
    const mp_rgraph *rg;
    const mp_rsched *s;  /* the order given */
    int64_t peak;        /* its own peak */
    int64_t budget;
    const atomic_bool *stop; /* NULL, or set when the result is no longer needed */
    int stages;          /* the steps of the limit, from the peak to the budget */
    costly *order;       /* the recomputations, costliest first */
    int32_t ncand;
    uint8_t *keep;       /* s->n: the entry stays */
    uint8_t *saved;      /* keep before a trial */
    int32_t *last;       /* nvalues: backward scan, a kept read of the instance after the entry */
    mp_rsched trial;     /* the kept entries, as an order */
    double kept;         /* the result: the cost of the recomputations kept */
} pruner;

static bool pruner_init(pruner *p, const mp_rgraph *rg, const mp_rsched *s, int64_t peak, int64_t budget,
                        const atomic_bool *stop, int stages)
{
    size_t n = (size_t)(s->n ? s->n : 1);
    *p = (pruner){.rg = rg, .s = s, .peak = peak, .budget = budget, .stop = stop, .stages = stages};
    p->order = malloc(n * sizeof *p->order);
    p->keep = malloc(n);
    p->saved = malloc(n);
    p->last = malloc((size_t)(rg->nvalues + 1) * sizeof *p->last);
    p->trial.node = malloc(n * sizeof *p->trial.node);
    p->trial.recompute = malloc(n);
    return p->order && p->keep && p->saved && p->last && p->trial.node && p->trial.recompute;
}

static void pruner_free(pruner *p)
{
    free(p->order);
    free(p->keep);
    free(p->saved);
    free(p->last);
    free(p->trial.node);
    free(p->trial.recompute);
}

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

/* Recounts the kept entries; true when they run and peak within limit.
 * The count stops above the budget: a removal over it is not tried again. */
static bool kept_fits(pruner *p, int64_t limit, mp_rcount *c)
{
    int32_t n = 0;
    for (int32_t e = 0; e < p->s->n; e++)
        if (p->keep[e]) {
            p->trial.node[n] = p->s->node[e];
            p->trial.recompute[n++] = p->s->recompute[e];
        }
    p->trial.n = n;
    mp_err ignored = {{0}}; /* an order that cannot run is one that does not fit, ever */
    if (mp_rsched_recount(p->rg, &p->trial, p->budget, c, &ignored)) c->peak_bytes = INT64_MAX;
    return c->peak_bytes <= limit;
}

static int cmp_costly(const void *pa, const void *pb)
{
    const costly *a = pa, *b = pb;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return (a->entry < b->entry) - (a->entry > b->entry); /* later first: the last of a run of equal ones */
}

/* One pass of removals, costliest first, from the order given: the room
 * above its own peak is given in p->stages steps (the first within the peak
 * itself), each trying the recomputations left. A removal that went over a
 * step's limit is tried again only once the limit passes the peak it reached
 * (removals mostly raise the memory), so the steps cost about one pass.
 * p->keep holds the result, p->kept its cost. */
static void *prune_pass(void *arg)
{
    pruner *p = arg;
    const mp_rsched *s = p->s;
    mp_rcount c;
    memset(p->keep, 1, (size_t)s->n);
    drop_unread(p);
    int64_t work = 0;
    for (int stage = p->peak < p->budget && p->stages > 1 ? 0 : p->stages; stage <= p->stages; stage++) {
        int64_t limit = stage == p->stages ? p->budget : p->peak + (p->budget - p->peak) / p->stages * stage;
        for (int32_t i = 0; i < p->ncand && work + s->n <= PRUNE_WORK && !(p->stop && atomic_load(p->stop)); i++) {
            int32_t e = p->order[i].entry;
            if (!p->keep[e] || p->order[i].over > limit) continue; /* gone with another (unread), or still over */
            memcpy(p->saved, p->keep, (size_t)s->n);
            p->keep[e] = 0;
            drop_unread(p);
            work += 2 * (int64_t)s->n;
            if (!kept_fits(p, limit, &c)) {
                memcpy(p->keep, p->saved, (size_t)s->n);
                p->order[i].over = c.peak_bytes;
            }
        }
    }
    p->kept = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (p->keep[e] && s->recompute[e] && p->rg->cost) p->kept += p->rg->cost[s->node[e]];
    return NULL;
}

int mp_rsched_prune(const mp_rgraph *rg, mp_rsched *s, int64_t budget, int32_t *removed, mp_err *err)
{
    return mp_rsched_prune_until(rg, s, budget, NULL, removed, err);
}

int mp_rsched_prune_until(const mp_rgraph *rg, mp_rsched *s, int64_t budget, const atomic_bool *stop,
                          int32_t *removed, mp_err *err)
{
    if (removed) *removed = 0;
    mp_rcount c;
    if (mp_rsched_count(rg, s, &c, err)) return -1;
    if (c.peak_bytes > budget || !s->recompute) return 0; /* nothing to keep within, or nothing recomputed */
    /* In one step, a costly removal can take the room that several cheaper
     * ones would have shared for more (test_prune_small_raises_first), and
     * the result jumps about as the budget grows (the LLaMA-like model's
     * greedy order at its least target, pruned 0.2 MB higher: 25.97 -> 27.17 %).
     * In steps, removals that raise the peak little go first and the result
     * falls with the budget (to 25.97 % there), but they can crowd out a
     * costly one the single step takes; so both are made, side by side on
     * two cores, and the cheaper kept. At the order's own peak they are one. */
    bool both = c.peak_bytes < budget;
    pruner one, steps = {0};
    int rc = -1;
    if (!pruner_init(&one, rg, s, c.peak_bytes, budget, stop, 1) ||
        (both && !pruner_init(&steps, rg, s, c.peak_bytes, budget, stop, PRUNE_STAGES))) {
        mp_fail(err, "prune: out of memory");
        goto done;
    }
    memset(one.keep, 1, (size_t)s->n);
    drop_unread(&one);
    for (int32_t e = 0; e < s->n; e++)
        if (one.keep[e] && s->recompute[e])
            one.order[one.ncand++] = (costly){rg->cost ? rg->cost[s->node[e]] : 0, e, 0};
    qsort(one.order, (size_t)one.ncand, sizeof *one.order, cmp_costly);
    if (both) {
        memcpy(steps.order, one.order, (size_t)one.ncand * sizeof *one.order);
        steps.ncand = one.ncand;
    }
    pthread_t t;
    bool side = both && sysconf(_SC_NPROCESSORS_ONLN) >= 2 && pthread_create(&t, NULL, prune_pass, &steps) == 0;
    prune_pass(&one);
    if (both && !side) prune_pass(&steps);
    if (side) pthread_join(t, NULL);
    pruner *best = both && steps.kept < one.kept ? &steps : &one;
    if (!kept_fits(best, budget, &c)) memset(best->keep, 1, (size_t)s->n); /* never: dropping unread frees only */
    int32_t n_kept = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (best->keep[e]) {
            s->node[n_kept] = s->node[e];
            s->recompute[n_kept++] = s->recompute[e];
        }
    if (removed) *removed = s->n - n_kept;
    s->n = n_kept;
    rc = 0;
done:
    pruner_free(&one);
    pruner_free(&steps);
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
