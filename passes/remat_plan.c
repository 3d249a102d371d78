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

/* Does candidate a run after candidate b? */
static bool runs_after(const mp_rcand *a, const mp_rcand *b)
{
    return mp_rspace_runs_after(a->step, a->group, b->step, b->group);
}

/* The retained spans of a plan (mp_rspace_span): a value retained after its
 * last use, or in the gap of its group while it is away there (a chosen recipe
 * reads it there, and it comes back later). */
static int32_t span_count(const mp_rspace *sp) { return sp->rg->nvalues + sp->ndrop; }

static int64_t span_bytes(const mp_rspace *sp, int32_t s)
{
    return sp->rg->bytes[s < sp->rg->nvalues ? s : sp->drop[s - sp->rg->nvalues]];
}

/* The span in which c's k-th leaving value is retained in the plan: after its last use, or in its gap when it is
 * away at c's step; -1 when it is resident then (not retained). */
static int32_t leave_span(const mp_rspace *sp, const mp_rplan *p, const mp_rcand *c, int32_t k)
{
    int32_t s = mp_rspace_span(sp, c->leave[k], c->step);
    if (s < sp->rg->nvalues) return s; /* -1, or after its last use */
    return back_at(sp, p, s - sp->rg->nvalues) > c->step ? s : -1;
}

/* The chosen recipe that reads each retained span last: (*last)[s] indexes
 * sp->cand, -1 when nothing is retained there. */
static int latest_readers(const mp_rspace *sp, const mp_rplan *p, int32_t **last, mp_err *err)
{
    *last = malloc(((size_t)span_count(sp) + 1) * sizeof **last);
    if (!*last) return mp_fail(err, "out of memory counting a remat plan");
    for (int32_t s = 0; s < span_count(sp); s++) (*last)[s] = -1;
    for (int32_t i = 0; i < sp->ndrop; i++) {
        int32_t c = p->choice[i];
        if (c < 0) continue;
        const mp_rcand *rc = &sp->cand[c];
        for (int32_t k = 0; k < rc->nleave; k++) {
            int32_t s = leave_span(sp, p, rc, k);
            if (s >= 0 && ((*last)[s] < 0 || runs_after(rc, &sp->cand[(*last)[s]]))) (*last)[s] = c;
        }
    }
    return 0;
}

/* No chosen recipe makes again a value while it is retained (last:
 * latest_readers): the recount would replace the retained instance, which
 * the model does not count. */
static int check_retained(const mp_rspace *sp, const mp_rplan *p, const int32_t *last, mp_err *err)
{
    const mp_rgraph *rg = sp->rg;
    int rc = 0;
    for (int32_t i = 0; i < sp->ndrop && !rc; i++) {
        if (p->choice[i] < 0) continue;
        const mp_rcand *c = &sp->cand[p->choice[i]];
        for (int32_t r = 0; r < c->nrecipe && !rc; r++)
            for (int32_t k = rg->out_off[c->recipe[r]]; k < rg->out_off[c->recipe[r] + 1] && !rc; k++) {
                int32_t y = rg->out[k], s = mp_rspace_span(sp, y, c->step);
                if (y == c->value || y == c->keep || s < 0 || last[s] < 0 || runs_after(c, &sp->cand[last[s]]))
                    continue;
                rc = mp_fail(err, "remat plan: recomputing value %d (output of '%s') before step %d makes value %d "
                             "(output of '%s') again while it is retained until step %d", c->value,
                             producer_name(rg, c->value), c->step, y, producer_name(rg, y), sp->cand[last[s]].step);
            }
    }
    return rc;
}

/* A recipe keeping a value it makes (mp_rcand.keep) starts that value's span
 * there: it is the span's only maker, and the span's readers all run after
 * it (in a gap, at its step: the value comes back after that step), at
 * least one of them. (*maker)[s] gets the chosen maker of span s, -1 none. */
static int check_makers(const mp_rspace *sp, const mp_rplan *p, const int32_t *last, int32_t **maker, mp_err *err)
{
    const mp_rgraph *rg = sp->rg;
    *maker = malloc(((size_t)span_count(sp) + 1) * sizeof **maker);
    if (!*maker) return mp_fail(err, "out of memory counting a remat plan");
    for (int32_t s = 0; s < span_count(sp); s++) (*maker)[s] = -1;
    for (int32_t i = 0; i < sp->ndrop; i++) {
        const mp_rcand *c = p->choice[i] < 0 ? NULL : &sp->cand[p->choice[i]];
        int32_t s = c ? mp_rspace_kept_span(sp, p->choice[i]) : -1;
        if (s >= 0 && (*maker)[s] >= 0)
            return mp_fail(err, "remat plan: recomputing values %d and %d both make value %d (output of '%s') to "
                           "keep it",
                           sp->cand[(*maker)[s]].value, c->value, c->keep, producer_name(rg, c->keep));
        if (s >= 0) (*maker)[s] = p->choice[i];
    }
    for (int32_t i = 0; i < sp->ndrop; i++) {
        if (p->choice[i] < 0) continue;
        const mp_rcand *c = &sp->cand[p->choice[i]];
        for (int32_t k = 0; k < c->nleave; k++) {
            int32_t s = leave_span(sp, p, c, k);
            if (s < 0 || (*maker)[s] < 0) continue;
            const mp_rcand *m = &sp->cand[(*maker)[s]];
            if (!runs_after(c, m) || (s >= rg->nvalues && c->step != m->step))
                return mp_fail(err, "remat plan: recomputing value %d (output of '%s') before step %d reads value %d "
                               "(output of '%s') where the recipe of value %d before step %d makes it",
                               c->value, producer_name(rg, c->value), c->step, c->leave[k],
                               producer_name(rg, c->leave[k]), m->value, m->step);
        }
    }
    for (int32_t s = 0; s < span_count(sp); s++) {
        if ((*maker)[s] < 0 || last[s] >= 0) continue;
        const mp_rcand *m = &sp->cand[(*maker)[s]];
        return mp_fail(err, "remat plan: recomputing value %d (output of '%s') before step %d keeps value %d (output "
                       "of '%s') for no later recipe", m->value, producer_name(rg, m->value), m->step, m->keep,
                       producer_name(rg, m->keep));
    }
    return 0;
}

/* Every choice is one of its group's candidates, every recipe input that
 * may be away is kept or back by the recipe's step in the group holding that
 * step (same step: its recipe runs first, in producer order) or, where the
 * space allows it, retained in that gap, every value a recipe makes for
 * itself is away at its step, no recipe makes a retained value again, and
 * each value a recipe keeps is read after it (check_makers). *last gets the
 * plan's latest_readers, *maker each span's maker (the caller frees both). */
static int check_plan(const mp_rspace *sp, const mp_rplan *p, int32_t **last, int32_t **maker, mp_err *err)
{
    *last = *maker = NULL;
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
        for (int32_t f = 0; f < c->nfront; f++) { /* away: retained in its gap where it may leave after c's read */
            int32_t x = c->front[f], back = back_at(sp, p, mp_rspace_group(sp, x, c->step));
            if (back > c->step && !mp_rcand_leaves(c, x))
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
    return latest_readers(sp, p, last, err) || check_retained(sp, p, *last, err) ||
                   check_makers(sp, p, *last, maker, err)
               ? -1
               : 0;
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
    int32_t nn = sp->rg->nnodes, *off, *at, *last, *maker;
    if (check_plan(sp, p, &last, &maker, err)) {
        free(last), free(maker);
        return -1;
    }
    int64_t *delta = calloc((size_t)nn + 2, sizeof *delta), *ends = calloc((size_t)nn + 2, sizeof *ends);
    if (!delta || !ends) {
        free(delta), free(ends), free(last), free(maker);
        return mp_fail(err, "out of memory counting a remat plan");
    }
    if (bucket_by_step(sp, p, &off, &at, err)) {
        free(delta), free(ends), free(last), free(maker);
        return -1;
    }
    /* a retained span is alive at nodes from its start (or its maker's step) to S - 1 and in the phase before
     * node S (ends[S]) up to its latest reader there, S its step */
    for (int32_t s = 0; s < span_count(sp); s++) {
        if (last[s] < 0) continue;
        int32_t S = sp->cand[last[s]].step;
        delta[maker[s] >= 0 ? sp->cand[maker[s]].step : mp_rspace_span_start(sp, s)] -= span_bytes(sp, s);
        delta[S] += span_bytes(sp, s);
        ends[S] += span_bytes(sp, s);
    }
    /* D_t, the bytes away at step t less those retained, as a running sum: a value dropped in gap a..b is away at
     * a+1 .. q-1 */
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
        /* the phase before node t: values of later recipes at t still away, and those they keep, each
         * recipe's extra on top, retained values freed after their latest reader */
        int64_t run = sp->base_between[t] - away + ends[t];
        for (int32_t k = off[t]; k < off[t + 1]; k++)
            run -= sp->rg->bytes[sp->cand[at[k]].value] + mp_rspace_kept_bytes(sp, at[k]);
        for (int32_t k = off[t]; k < off[t + 1]; k++) {
            /* the recipe's stretches: after its last read of a value it reads last, that value is gone */
            const mp_rcand *c = &sp->cand[at[k]];
            int64_t gone = 0;
            for (int32_t r = 0; r <= c->nleave; r++) {
                if (c->leave_peak[r] >= 0 && run - gone + c->leave_peak[r] > m) m = run - gone + c->leave_peak[r];
                int32_t s = r < c->nleave ? leave_span(sp, p, c, r) : -1;
                if (s >= 0 && last[s] == at[k]) gone += span_bytes(sp, s);
            }
            run += sp->rg->bytes[c->value] + mp_rspace_kept_bytes(sp, at[k]) - gone;
        }
        if (step_peak) step_peak[t] = m;
        if (m > top) top = m;
    }
    *peak = top;
    free(delta);
    free(ends);
    free(last);
    free(maker);
    free(off);
    free(at);
    return 0;
}

int mp_rplan_emit(const mp_rspace *sp, const mp_rplan *p, mp_rsched *s, mp_err *err)
{
    memset(s, 0, sizeof *s);
    int32_t nn = sp->rg->nnodes, *off, *at, *last, *maker;
    int bad = check_plan(sp, p, &last, &maker, err);
    free(last);
    free(maker);
    if (bad) return -1;
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
