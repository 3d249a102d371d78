/* remat_prune.c - an order made by a rule that does not look at the budget
 * everywhere (all's and sqrt's checkpoints; greedy's evictions, each made
 * under a pressure that later passed) may recompute values that the budget
 * could have kept. mp_rsched_prune removes such recomputations, costliest
 * first: each goes when the order without it still peaks within the limit
 * (readers of the value then read its earlier instance, which lives on to
 * them). Removing one leaves the recomputations that only fed it unread;
 * they go with it, since a recomputation nobody reads before its value is
 * made again only costs. A removal is checked by the lifetimes it changes
 * (the earlier instance's, now longer; those of the values the removed
 * entries read, which may end sooner; the removed entries' own), as range
 * adds on a max tree of the live bytes at each entry, undone when the peak
 * passes the limit; the index is made again only when a removal stays
 * (recounting the whole order for each trial took a third of the CPU time
 * of GPT-2's planning near its smallest budget).
 * Two passes, the cheaper result kept: one with the budget as the limit, one
 * that raises the limit from the order's peak to the budget in steps (side
 * by side on two cores). The result is an order of the same graph, never
 * dearer than the one given and never above the budget. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/remat.h"

/* Work at most in a pass, counted as twice the order's entries a trial,
 * so that a long order with many recomputations is pruned in bounded,
 * load-independent work (Swin-T's greedy order of 7,823 entries, 607
 * recomputations: 5.1 M): the costliest are tried first, the rest kept. */
#define PRUNE_WORK INT64_C(30000000)
#define PRUNE_STAGES 8 /* the steps of the second pass's limit */
#define GONE (INT64_MIN / 4) /* the live bytes of a removed entry: below every count, far from overflowing */

typedef struct costly {
    double cost;
    int32_t entry;
    int64_t over; /* the peak its removal reached when last over a limit (0: not tried) */
} costly;

/* A max tree with range adds over the live bytes at each entry of the order. */
typedef struct live_tree {
    int32_t n;
    int64_t *mx, *add; /* 4n: the largest of a node's range, and what was added to all of it */
} live_tree;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static void tree_build(live_tree *t, const int64_t *v, int32_t x, int32_t l, int32_t r)
{
    t->add[x] = 0;
    if (l == r) {
        t->mx[x] = v[l];
        return;
    }
    int32_t m = l + (r - l) / 2;
    tree_build(t, v, 2 * x, l, m);
    tree_build(t, v, 2 * x + 1, m + 1, r);
    t->mx[x] = max64(t->mx[2 * x], t->mx[2 * x + 1]);
}

static void tree_add(live_tree *t, int32_t x, int32_t l, int32_t r, int32_t lo, int32_t hi, int64_t d)
{
    if (hi < l || r < lo) return;
    if (lo <= l && r <= hi) {
        t->mx[x] += d;
        t->add[x] += d;
        return;
    }
    int32_t m = l + (r - l) / 2;
    tree_add(t, 2 * x, l, m, lo, hi, d);
    tree_add(t, 2 * x + 1, m + 1, r, lo, hi, d);
    t->mx[x] = max64(t->mx[2 * x], t->mx[2 * x + 1]) + t->add[x];
}

typedef struct change {
    int32_t lo, hi;
    int64_t d;
} change;

/* One pass of removals over the order given, with buffers of its own (the
 * two passes run side by side on two cores). */
typedef struct pruner {
    const mp_rgraph *rg;
    const mp_rsched *s;  /* the order given */
    int64_t peak;        /* its own peak */
    int64_t budget;
    const atomic_bool *stop; /* NULL, or set when the result is no longer needed */
    bool recount_each;   /* each trial recounted whole (mp_prune_opts) */
    int stages;          /* the steps of the limit, from the peak to the budget */
    costly *order;       /* the recomputations, costliest first */
    int32_t ncand;
    uint8_t *keep;       /* s->n: the entry stays */
    uint8_t *saved;      /* keep before a trial */
    int32_t *last;       /* nvalues: backward scan, a kept read of the instance after the entry */
    mp_rsched trial;     /* the kept entries, as an order */
    double kept;         /* the result: the cost of the recomputations kept */
    /* The kept entries' instances (index_build): an instance is an output slot of an entry, numbered over
     * every entry of the order; a read, an input slot likewise. */
    int32_t *slot_at, *read_at; /* n + 1: an entry's first instance, its first read */
    int32_t *birth;      /* slots: the entry that makes the instance */
    int32_t *prev;       /* slots: the kept instance of its value before it (-1: none) */
    int32_t *death;      /* slots: its last kept reader (its birth when unread) */
    int32_t *nread;      /* slots: its kept reads */
    int32_t *rd_at, *rd; /* CSR over slots: its kept readers, in order */
    int32_t *reads;      /* reads: the instance a read reads (-1: a resident value) */
    int32_t *latest;     /* nvalues: while indexing, the value's latest instance */
    int64_t *live;       /* n + 1: the live bytes at each entry (GONE: removed) */
    live_tree tree;      /* over live */
    /* a trial */
    int32_t *left, *seen; /* slots: reads left to the instance, and the trial that set it */
    int32_t *done;       /* slots: the trial that handled the instance's lifetime */
    int32_t trial_no;
    uint8_t *gone;       /* n: removed by the trial */
    int32_t *removed, nremoved; /* n: the entries it removes, in the order found */
    change *changes;     /* its range adds, undone when the peak passes the limit */
    int32_t nchanges;
} pruner;

static bool pruner_init(pruner *p, const mp_rgraph *rg, const mp_rsched *s, int64_t peak, int64_t budget,
                        const mp_prune_opts *o, int stages)
{
    size_t n = (size_t)(s->n ? s->n : 1), nslots = 0, nreads = 0;
    *p = (pruner){.rg = rg, .s = s, .peak = peak, .budget = budget, .stop = o->stop,
                  .recount_each = o->recount_each, .stages = stages};
    for (int32_t e = 0; e < s->n; e++) {
        nslots += (size_t)(rg->out_off[s->node[e] + 1] - rg->out_off[s->node[e]]);
        nreads += (size_t)(rg->in_off[s->node[e] + 1] - rg->in_off[s->node[e]]);
    }
    nslots += !nslots, nreads += !nreads;
    p->order = malloc(n * sizeof *p->order);
    p->keep = malloc(n);
    p->saved = malloc(n);
    p->last = malloc((size_t)(rg->nvalues + 1) * sizeof *p->last);
    p->trial.node = malloc(n * sizeof *p->trial.node);
    p->trial.recompute = malloc(n);
    bool ok = p->order && p->keep && p->saved && p->last && p->trial.node && p->trial.recompute;
    if (!ok || p->recount_each) return ok;
    p->slot_at = malloc((n + 1) * sizeof *p->slot_at);
    p->read_at = malloc((n + 1) * sizeof *p->read_at);
    p->birth = malloc(nslots * sizeof *p->birth);
    p->prev = malloc(nslots * sizeof *p->prev);
    p->death = malloc(nslots * sizeof *p->death);
    p->nread = malloc(nslots * sizeof *p->nread);
    p->rd_at = malloc((nslots + 1) * sizeof *p->rd_at);
    p->rd = malloc(nreads * sizeof *p->rd);
    p->reads = malloc(nreads * sizeof *p->reads);
    p->latest = malloc((size_t)(rg->nvalues + 1) * sizeof *p->latest);
    p->live = malloc((n + 1) * sizeof *p->live);
    p->tree = (live_tree){.n = s->n, .mx = malloc(4 * n * sizeof(int64_t)), .add = malloc(4 * n * sizeof(int64_t))};
    p->left = malloc(nslots * sizeof *p->left);
    p->seen = calloc(nslots, sizeof *p->seen);
    p->done = calloc(nslots, sizeof *p->done);
    p->gone = calloc(n, 1);
    p->removed = malloc(n * sizeof *p->removed);
    p->changes = malloc((nreads + nslots + n) * sizeof *p->changes);
    if (!p->slot_at || !p->read_at || !p->birth || !p->prev || !p->death || !p->nread || !p->rd_at || !p->rd ||
        !p->reads || !p->latest || !p->live || !p->tree.mx || !p->tree.add || !p->left || !p->seen || !p->done ||
        !p->gone || !p->removed || !p->changes)
        return false;
    p->slot_at[0] = p->read_at[0] = 0;
    for (int32_t e = 0; e < s->n; e++) {
        int32_t u = s->node[e];
        p->slot_at[e + 1] = p->slot_at[e] + rg->out_off[u + 1] - rg->out_off[u];
        p->read_at[e + 1] = p->read_at[e] + rg->in_off[u + 1] - rg->in_off[u];
        for (int32_t j = p->slot_at[e]; j < p->slot_at[e + 1]; j++) p->birth[j] = e;
    }
    return true;
}

static void pruner_free(pruner *p)
{
    free(p->order);
    free(p->keep);
    free(p->saved);
    free(p->last);
    free(p->trial.node);
    free(p->trial.recompute);
    free(p->slot_at);
    free(p->read_at);
    free(p->birth);
    free(p->prev);
    free(p->death);
    free(p->nread);
    free(p->rd_at);
    free(p->rd);
    free(p->reads);
    free(p->latest);
    free(p->live);
    free(p->tree.mx);
    free(p->tree.add);
    free(p->left);
    free(p->seen);
    free(p->done);
    free(p->gone);
    free(p->removed);
    free(p->changes);
}

static bool to_end(const mp_rgraph *rg, int32_t v) { return rg->keep_to_end && rg->keep_to_end[v]; }

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

/* Indexes the kept entries' instances and counts the live bytes at each
 * entry as mp_rsched_recount does (an instance lives from its entry to its
 * last reader; one kept to the end, until its value is made again), into
 * the tree. */
static void index_build(pruner *p)
{
    const mp_rgraph *rg = p->rg;
    const mp_rsched *s = p->s;
    int32_t nslots = p->slot_at[s->n];
    int64_t resident = 0;
    for (int32_t v = 0; v < rg->nvalues; v++) {
        p->latest[v] = -1;
        if (rg->producer[v] < 0) resident += rg->bytes[v];
    }
    memset(p->nread, 0, (size_t)nslots * sizeof *p->nread);
    memset(p->live, 0, (size_t)(s->n + 1) * sizeof *p->live); /* differences first */
    for (int32_t e = 0; e < s->n; e++) {
        if (!p->keep[e]) continue;
        int32_t u = s->node[e];
        for (int32_t k = rg->in_off[u]; k < rg->in_off[u + 1]; k++) {
            int32_t v = rg->in[k], i = rg->producer[v] < 0 ? -1 : p->latest[v];
            p->reads[p->read_at[e] + k - rg->in_off[u]] = i;
            if (i >= 0) p->nread[i]++;
        }
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t v = rg->out[k], i = p->slot_at[e] + k - rg->out_off[u];
            /* a value kept to the end lives from its first instance on: a new one replaces the old */
            if (to_end(rg, v) && p->latest[v] < 0) p->live[e] += rg->bytes[v];
            p->prev[i] = p->latest[v];
            p->latest[v] = i;
            p->death[i] = e;
        }
    }
    p->rd_at[0] = 0;
    for (int32_t i = 0; i < nslots; i++) p->rd_at[i + 1] = p->rd_at[i] + p->nread[i];
    for (int32_t i = 0; i < nslots; i++) p->left[i] = p->rd_at[i]; /* the fill's cursors */
    for (int32_t e = 0; e < s->n; e++) {
        if (!p->keep[e]) continue;
        for (int32_t q = p->read_at[e]; q < p->read_at[e + 1]; q++) {
            int32_t i = p->reads[q];
            if (i >= 0) p->rd[p->left[i]++] = e, p->death[i] = e;
        }
    }
    for (int32_t e = 0; e < s->n; e++) {
        if (!p->keep[e]) continue;
        int32_t u = s->node[e];
        for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
            int32_t v = rg->out[k], i = p->slot_at[e] + k - rg->out_off[u];
            if (to_end(rg, v)) continue;
            p->live[e] += rg->bytes[v];
            p->live[p->death[i] + 1] -= rg->bytes[v];
        }
    }
    int64_t run = resident;
    for (int32_t e = 0; e < s->n; e++) {
        run += p->live[e];
        p->live[e] = p->keep[e] ? run : GONE;
    }
    tree_build(&p->tree, p->live, 1, 0, s->n - 1);
}

static void change_add(pruner *p, int32_t lo, int32_t hi, int64_t d)
{
    if (lo > hi || !d) return;
    p->changes[p->nchanges++] = (change){lo, hi, d};
    tree_add(&p->tree, 1, 0, p->s->n - 1, lo, hi, d);
}

/* The reads left to instance i in this trial. */
static int32_t *reads_left(pruner *p, int32_t i)
{
    if (p->seen[i] != p->trial_no) p->seen[i] = p->trial_no, p->left[i] = p->nread[i];
    return &p->left[i];
}

/* A kept recomputation none of whose instances is read any more (nor kept to the end). */
static bool unread(pruner *p, int32_t x)
{
    const mp_rgraph *rg = p->rg;
    int32_t u = p->s->node[x];
    for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
        int32_t i = p->slot_at[x] + k - rg->out_off[u];
        if (to_end(rg, rg->out[k]) || (p->seen[i] == p->trial_no ? p->left[i] : p->nread[i]) > 0) return false;
    }
    return true;
}

/* The peak of the kept entries without e and the recomputations that then
 * go unread (drop_unread's), its lifetimes changed in the tree until
 * trial_end; INT64_MAX when the order would not run (e's readers would
 * find no earlier instance of its value). */
static int64_t trial_peak(pruner *p, int32_t e)
{
    const mp_rgraph *rg = p->rg;
    const mp_rsched *s = p->s;
    p->trial_no++;
    p->nchanges = p->nremoved = 0;
    int32_t u = s->node[e];
    for (int32_t i = p->slot_at[e]; i < p->slot_at[e + 1]; i++)
        if (p->nread[i] > 0 && p->prev[i] < 0) return INT64_MAX;
    /* e's readers read the earlier instance, which lives on to them */
    for (int32_t k = rg->out_off[u]; k < rg->out_off[u + 1]; k++) {
        int32_t v = rg->out[k], i = p->slot_at[e] + k - rg->out_off[u], j = p->prev[i];
        if (!p->nread[i]) continue;
        *reads_left(p, j) += p->nread[i];
        p->done[j] = p->trial_no; /* its lifetime: handled here */
        if (!to_end(rg, v)) change_add(p, p->death[j] + 1, e - 1, rg->bytes[v]);
    }
    /* e, and what goes unread with it */
    p->gone[e] = 1;
    p->removed[p->nremoved++] = e;
    for (int32_t r = 0; r < p->nremoved; r++) {
        int32_t x = p->removed[r];
        for (int32_t q = p->read_at[x]; q < p->read_at[x + 1]; q++) {
            int32_t i = p->reads[q];
            if (i < 0 || --*reads_left(p, i) > 0) continue;
            int32_t y = p->birth[i];
            if (!p->gone[y] && s->recompute[y] && unread(p, y)) p->gone[y] = 1, p->removed[p->nremoved++] = y;
        }
    }
    for (int32_t r = 0; r < p->nremoved; r++) {
        int32_t x = p->removed[r], w = s->node[x];
        change_add(p, x, x, GONE);
        if (x != e) /* an unread recomputation's instances go whole */
            for (int32_t k = rg->out_off[w]; k < rg->out_off[w + 1]; k++) {
                int32_t i = p->slot_at[x] + k - rg->out_off[w];
                change_add(p, x, p->death[i], -rg->bytes[rg->out[k]]);
            }
        /* what the removed entries read may die sooner: at its last reader left, or at its birth */
        for (int32_t k = rg->in_off[w]; k < rg->in_off[w + 1]; k++) {
            int32_t v = rg->in[k], i = p->reads[p->read_at[x] + k - rg->in_off[w]];
            if (i < 0 || p->done[i] == p->trial_no || to_end(rg, v) || p->gone[p->birth[i]]) continue;
            p->done[i] = p->trial_no;
            int32_t q = p->rd_at[i + 1] - 1;
            while (q >= p->rd_at[i] && p->gone[p->rd[q]]) q--;
            int32_t end = q >= p->rd_at[i] ? p->rd[q] : p->birth[i];
            change_add(p, end + 1, p->death[i], -rg->bytes[v]);
        }
    }
    return p->tree.mx[1];
}

/* Ends the trial: its removals stay (the index made again), or are undone. */
static void trial_end(pruner *p, bool stays)
{
    for (int32_t r = 0; r < p->nremoved; r++) {
        p->gone[p->removed[r]] = 0;
        if (stays) p->keep[p->removed[r]] = 0;
    }
    if (stays) {
        index_build(p);
        return;
    }
    for (int32_t c = p->nchanges - 1; c >= 0; c--)
        tree_add(&p->tree, 1, 0, p->s->n - 1, p->changes[c].lo, p->changes[c].hi, -p->changes[c].d);
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

/* Removes entry e and what goes unread with it when the order still peaks
 * within limit; *peak gets the peak it would reach (INT64_MAX: it would not
 * run; with recount_each, above the budget, any count above it). */
static bool try_removal(pruner *p, int32_t e, int64_t limit, int64_t *peak)
{
    if (!p->recount_each) {
        *peak = trial_peak(p, e);
        trial_end(p, *peak <= limit);
        return *peak <= limit;
    }
    mp_rcount c;
    memcpy(p->saved, p->keep, (size_t)p->s->n);
    p->keep[e] = 0;
    drop_unread(p);
    bool fits = kept_fits(p, limit, &c);
    if (!fits) memcpy(p->keep, p->saved, (size_t)p->s->n);
    *peak = c.peak_bytes;
    return fits;
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
    memset(p->keep, 1, (size_t)s->n);
    drop_unread(p);
    if (!p->recount_each) index_build(p);
    int64_t work = 0;
    for (int stage = p->peak < p->budget && p->stages > 1 ? 0 : p->stages; stage <= p->stages; stage++) {
        int64_t limit = stage == p->stages ? p->budget : p->peak + (p->budget - p->peak) / p->stages * stage;
        for (int32_t i = 0; i < p->ncand && work + s->n <= PRUNE_WORK && !(p->stop && atomic_load(p->stop)); i++) {
            int32_t e = p->order[i].entry;
            if (!p->keep[e] || p->order[i].over > limit) continue; /* gone with another (unread), or still over */
            work += 2 * (int64_t)s->n;
            int64_t peak;
            if (!try_removal(p, e, limit, &peak)) p->order[i].over = peak;
        }
    }
    p->kept = 0;
    for (int32_t e = 0; e < s->n; e++)
        if (p->keep[e] && s->recompute[e] && p->rg->cost) p->kept += p->rg->cost[s->node[e]];
    return NULL;
}

int mp_rsched_prune(const mp_rgraph *rg, mp_rsched *s, int64_t budget, int32_t *removed, mp_err *err)
{
    return mp_rsched_prune_with(rg, s, budget, NULL, removed, err);
}

int mp_rsched_prune_with(const mp_rgraph *rg, mp_rsched *s, int64_t budget, const mp_prune_opts *o,
                         int32_t *removed, mp_err *err)
{
    mp_prune_opts plain = {0};
    if (!o) o = &plain;
    if (removed) *removed = 0;
    mp_rcount c;
    if (mp_rsched_count(rg, s, &c, err)) return -1;
    if (c.peak_bytes > budget || !s->recompute || !s->n) return 0; /* nothing to keep within, or to remove */
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
    if (!pruner_init(&one, rg, s, c.peak_bytes, budget, o, 1) ||
        (both && !pruner_init(&steps, rg, s, c.peak_bytes, budget, o, PRUNE_STAGES))) {
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
