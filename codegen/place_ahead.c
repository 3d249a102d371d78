/* place_ahead.c - places the solver's plans while it searches (place_ahead.h). */
#include "place_ahead.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct place_ahead {
    place_ahead_cfg cfg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int32_t *next;         /* the newest plan offered, while pending */
    bool pending;
    int32_t *job;          /* the plan being placed, while busy */
    bool busy;
    atomic_bool cancel;    /* the placement under way is of a stale plan */
    bool stop;             /* the solve returned: only final is still wanted */
    const int32_t *final;
    int32_t *placed;       /* the last plan placed, when have: its order and arena */
    bool have;
    mp_rsched order;
    mp_plan_info info;
};

static bool same_plan(const place_ahead *a, const int32_t *x, const int32_t *y)
{
    return x && y && !memcmp(x, y, (size_t)a->cfg.sp->ndrop * sizeof *x);
}

/* The plan's order as the caller makes it (mp_rplan_order), placed; false
 * when it does not fit or on an error (the caller then meets it itself). */
static bool place(place_ahead *a, int32_t *choice, mp_rsched *s, mp_plan_info *info)
{
    const place_ahead_cfg *c = &a->cfg;
    mp_err err = {{0}};
    mp_rcount count;
    mp_plan_opts po = c->po;
    po.arena_cancel = &a->cancel;
    if (mp_rplan_order(c->sp, &(mp_rplan){.choice = choice}, c->target, s, &count, NULL, &err) != 1) return false;
    memset(info, 0, sizeof *info);
    if (!mp_plan_measure(c->model, &po, s, info, &err)) return true;
    mp_rsched_free(s);
    return false;
}

static void *work(void *arg)
{
    place_ahead *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->pending && !a->stop) pthread_cond_wait(&a->wake, &a->lock);
        if (!a->pending) break;
        a->pending = false;
        if (a->stop && !same_plan(a, a->next, a->final)) continue;
        int32_t *t = a->job;
        a->job = a->next, a->next = t;
        a->busy = true;
        atomic_store(&a->cancel, false);
        pthread_mutex_unlock(&a->lock);
        mp_rsched s;
        mp_plan_info info;
        bool ok = place(a, a->job, &s, &info);
        pthread_mutex_lock(&a->lock);
        a->busy = false;
        if (ok && !atomic_load(&a->cancel)) {
            if (a->have) mp_rsched_free(&a->order);
            memcpy(a->placed, a->job, (size_t)a->cfg.sp->ndrop * sizeof *a->placed);
            a->order = s, a->info = info, a->have = true;
        } else if (ok) {
            mp_rsched_free(&s);
        }
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static void destroy(place_ahead *a)
{
    free(a->next);
    free(a->job);
    free(a->placed);
    free(a);
}

place_ahead *place_ahead_start(const place_ahead_cfg *cfg)
{
    place_ahead *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    size_t n = (size_t)cfg->sp->ndrop + 1;
    a->cfg = *cfg;
    a->next = malloc(n * sizeof *a->next), a->job = malloc(n * sizeof *a->job);
    a->placed = malloc(n * sizeof *a->placed);
    atomic_init(&a->cancel, false);
    if (!a->next || !a->job || !a->placed) {
        destroy(a);
        return NULL;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->wake, NULL);
    if (pthread_create(&a->thread, NULL, work, a)) {
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->wake);
        destroy(a);
        return NULL;
    }
    return a;
}

void place_ahead_offer(void *ctx, const int32_t *choice)
{
    place_ahead *a = ctx;
    pthread_mutex_lock(&a->lock);
    if (!a->busy && a->have && same_plan(a, a->placed, choice)) { /* the newest is placed already */
        a->pending = false;
    } else { /* (a placement under way is stopped even when of the same plan: it may have seen the flag) */
        memcpy(a->next, choice, (size_t)a->cfg.sp->ndrop * sizeof *a->next);
        a->pending = true;
        atomic_store(&a->cancel, true); /* the plan under way, if any, is stale */
        pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&a->lock);
}

bool place_ahead_finish(place_ahead *a, const int32_t *final, mp_rsched *order, mp_plan_info *info)
{
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    a->final = final;
    if (a->busy && !same_plan(a, a->job, final)) atomic_store(&a->cancel, true);
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    bool got = a->have && same_plan(a, a->placed, final);
    if (got) *order = a->order, *info = a->info;
    else if (a->have) mp_rsched_free(&a->order);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->wake);
    destroy(a);
    return got;
}
