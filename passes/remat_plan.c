/* remat_plan.c - a keep/recompute plan: its check against the model, its
 * count by the model (the same running sums the ILP writes, docs/ilp.md), and
 * the order that runs it. */
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

int mp_rplan_init(const mp_rspace *sp, mp_rplan *p, mp_err *err)
{
    p->choice = malloc(((size_t)sp->ndrop + 1) * sizeof *p->choice);
    if (!p->choice) return mp_fail(err, "out of memory for a remat plan");
    for (int32_t i = 0; i < sp->ndrop; i++) p->choice[i] = -1;
    return 0;
}

void mp_rplan_free(mp_rplan *p)
{
    if (!p) return;
    free(p->choice);
    p->choice = NULL;
}

static const char *producer_name(const mp_rgraph *rg, int32_t v)
{
    int32_t u = rg->producer[v];
    return u >= 0 && rg->node_name && rg->node_name[u] ? rg->node_name[u] : "?";
}

/* Step at which group i is back (its chosen candidate's), -1 when kept. */
static int32_t back_at(const mp_rspace *sp, const mp_rplan *p, int32_t i)
{
    return i < 0 || p->choice[i] < 0 ? -1 : sp->cand[p->choice[i]].step;
}

/* Every choice is one of its group's candidates, every recipe input that
 * may be away is kept or back by the recipe's step in the group holding that
 * step (same step: its recipe runs first, in producer order), and every value
 * a recipe makes for itself is away at its step. */
static int check_plan(const mp_rspace *sp, const mp_rplan *p, mp_err *err)
{
    if (!p || (sp->ndrop && !p->choice)) return mp_fail(err, "remat plan: no choices");
    for (int32_t i = 0; i < sp->ndrop; i++) {
        int32_t c = p->choice[i];
        if (c != -1 && (c < sp->cand_off[i] || c >= sp->cand_off[i + 1]))
            return mp_fail(err, "remat plan: value %d (output of '%s') has choice %d in its gap %d..%d, not one of "
                           "its candidates there", sp->drop[i], producer_name(sp->rg, sp->drop[i]), c,
                           sp->gap_start[i], sp->gap_end[i]);
    }
    for (int32_t i = 0; i < sp->ndrop; i++) {
        if (p->choice[i] < 0) continue;
        const mp_rcand *c = &sp->cand[p->choice[i]];
        for (int32_t f = 0; f < c->nfront; f++) {
            int32_t x = c->front[f], back = back_at(sp, p, mp_rspace_group(sp, x, c->step));
            if (back > c->step)
                return mp_fail(err, "remat plan: recomputing value %d (output of '%s') before step %d needs value %d "
                               "(output of '%s'), which is not resident then (recomputed only before step %d)",
                               c->value, producer_name(sp->rg, c->value), c->step, x, producer_name(sp->rg, x), back);
        }
        for (int32_t e = 0; e < c->nexpand; e++) { /* a value its recipe makes again must be away then */
            int32_t x = c->expand[e], back = back_at(sp, p, mp_rspace_group(sp, x, c->step));
            if (back <= c->step)
                return mp_fail(err, "remat plan: recomputing value %d (output of '%s') before step %d makes value %d "
                               "(output of '%s') again, which is resident then", c->value,
                               producer_name(sp->rg, c->value), c->step, x, producer_name(sp->rg, x));
        }
    }
    return 0;
}

/* The chosen candidates bucketed by step, each bucket in group (producer) order:
 * at[off[q] .. off[q+1]) are indexes into sp->cand. */
static int bucket_by_step(const mp_rspace *sp, const mp_rplan *p, int32_t **off, int32_t **at, mp_err *err)
{
    int32_t nn = sp->rg->nnodes;
    *off = calloc((size_t)nn + 2, sizeof **off);
    *at = malloc(((size_t)sp->ndrop + 1) * sizeof **at);
    if (!*off || !*at) {
        free(*off), free(*at);
        *off = *at = NULL;
        return mp_fail(err, "out of memory counting a remat plan");
    }
    for (int32_t i = 0; i < sp->ndrop; i++)
        if (p->choice[i] >= 0) (*off)[sp->cand[p->choice[i]].step + 1]++;
    for (int32_t t = 0; t < nn; t++) (*off)[t + 1] += (*off)[t];
    int32_t *pos = malloc(((size_t)nn + 1) * sizeof *pos);
    if (!pos) {
        free(*off), free(*at);
        *off = *at = NULL;
        return mp_fail(err, "out of memory counting a remat plan");
    }
    memcpy(pos, *off, (size_t)nn * sizeof *pos);
    for (int32_t i = 0; i < sp->ndrop; i++)
        if (p->choice[i] >= 0) (*at)[pos[sp->cand[p->choice[i]].step]++] = p->choice[i];
    free(pos);
    return 0;
}

int mp_rplan_peak(const mp_rspace *sp, const mp_rplan *p, int64_t *step_peak, int64_t *peak, mp_err *err)
{
    if (check_plan(sp, p, err)) return -1;
    int32_t nn = sp->rg->nnodes, *off, *at;
    int64_t *delta = calloc((size_t)nn + 2, sizeof *delta);
    if (!delta) return mp_fail(err, "out of memory counting a remat plan");
    if (bucket_by_step(sp, p, &off, &at, err)) {
        free(delta);
        return -1;
    }
    /* D_t, the bytes away at step t, as a running sum: a value dropped in gap a..b is away at a+1 .. q-1 */
    for (int32_t i = 0; i < sp->ndrop; i++) {
        if (p->choice[i] < 0) continue;
        const mp_rcand *c = &sp->cand[p->choice[i]];
        int64_t bytes = sp->rg->bytes[c->value];
        delta[sp->gap_start[i] + 1] += bytes;
        delta[c->step] -= bytes;
    }
    int64_t away = 0, top = sp->resident_bytes;
    for (int32_t t = 0; t < nn; t++) {
        away += delta[t];
        int64_t m = sp->base_live[t] - away;
        /* the phase before node t: values of later recipes at t still away, each recipe's extra on top */
        int64_t run = sp->base_between[t] - away;
        for (int32_t k = off[t]; k < off[t + 1]; k++) run -= sp->rg->bytes[sp->cand[at[k]].value];
        for (int32_t k = off[t]; k < off[t + 1]; k++) {
            const mp_rcand *c = &sp->cand[at[k]];
            if (run + c->recipe_peak > m) m = run + c->recipe_peak;
            run += sp->rg->bytes[c->value];
        }
        if (step_peak) step_peak[t] = m;
        if (m > top) top = m;
    }
    *peak = top;
    free(delta);
    free(off);
    free(at);
    return 0;
}

int mp_rplan_emit(const mp_rspace *sp, const mp_rplan *p, mp_rsched *s, mp_err *err)
{
    memset(s, 0, sizeof *s);
    if (check_plan(sp, p, err)) return -1;
    int32_t nn = sp->rg->nnodes, *off, *at;
    if (bucket_by_step(sp, p, &off, &at, err)) return -1;
    int64_t n = nn;
    for (int32_t k = 0; k < off[nn]; k++) n += sp->cand[at[k]].nrecipe;
    int rc = -1;
    if (n > INT32_MAX) {
        mp_fail(err, "remat plan: the order would have %lld entries", (long long)n);
        goto done;
    }
    s->node = malloc((size_t)(n + 1) * sizeof *s->node);
    s->recompute = calloc((size_t)n + 1, 1);
    if (!s->node || !s->recompute) {
        mp_rsched_free(s);
        mp_fail(err, "out of memory for an order of %lld entries", (long long)n);
        goto done;
    }
    for (int32_t t = 0; t < nn; t++) {
        for (int32_t k = off[t]; k < off[t + 1]; k++) {
            const mp_rcand *c = &sp->cand[at[k]];
            for (int32_t r = 0; r < c->nrecipe; r++) {
                s->recompute[s->n] = 1;
                s->node[s->n++] = c->recipe[r];
            }
        }
        s->node[s->n++] = t;
    }
    rc = 0;
done:
    free(off);
    free(at);
    return rc;
}
