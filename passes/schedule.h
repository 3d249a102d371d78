/* schedule.h - the order in which a graph's nodes run: step i runs node order[i].
 *
 *   mp_schedule s;
 *   if (mp_schedule_graph_order(g, &s, &err)) ...   // node ids 0..nnodes-1
 *   for (int32_t i = 0; i < s.n; i++) run(&g->nodes[s.order[i]]);
 *   mp_schedule_free(&s);
 *
 * The default is graph order, which for a training step is forward, loss,
 * backward, optimizer (the training pass appends them in that order). Later
 * passes (rematerialization) build their own order and check it with
 * mp_schedule_check() before lifetimes are computed from it.
 */
#ifndef MP_SCHEDULE_H
#define MP_SCHEDULE_H

#include "ir/ir.h"

typedef struct mp_schedule {
    int32_t *order;   /* n node ids (malloc'ed) */
    int32_t n;
} mp_schedule;

/* Every top-level node once, in graph order. */
int mp_schedule_graph_order(const mp_graph *g, mp_schedule *s, mp_err *err);

/* Checks that s runs every node of g exactly once and each node after the
 * producers of its inputs; fails naming the first node that breaks it. */
int mp_schedule_check(const mp_graph *g, const mp_schedule *s, mp_err *err);

void mp_schedule_free(mp_schedule *s);

/* Reorders g's nodes so that each node of `phase` runs as early as it may:
 * right after the producers of its inputs and after every earlier node that
 * touches memory it shares with others (a view, an in-place write); the other
 * nodes keep their order. With MP_PHASE_OPTIMIZER each parameter's update runs
 * as soon as its gradient is final and the backward has read the parameter
 * (PyTorch's optimizer step in the backward), so the gradient dies there. The
 * values computed are the same; only the order changes. */
int mp_graph_hoist_phase(mp_graph *g, mp_phase phase, mp_err *err);

#endif
