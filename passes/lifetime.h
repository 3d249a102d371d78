/* lifetime.h - when each value's buffer is live under a schedule.
 *
 *   mp_lifetimes lt;
 *   if (mp_lifetime_compute(g, &sched, &lt, &err)) ...
 *   for (int32_t v = 0; v < g->nvalues; v++)
 *       if (lt.owner[v] == v && lt.start[v] >= 0) ... live over steps [start, end], lt.bytes[v] bytes
 *   mp_lifetime_free(&lt);
 *
 * Rules (steps are schedule positions; both ends inclusive, so the inputs and
 * the outputs of the node at step i are all live at i):
 *   - persistent values (parameters, buffers, constants, optimizer state, data
 *     inputs, and any value no node produces) are live for the whole step;
 *   - a produced value is live from its producer to its last consumer; graph
 *     outputs to the last step; a value nothing consumes only at its producer;
 *   - a value with alias >= 0 overwrites that value in place: it has no buffer
 *     of its own, it extends the lifetime of the buffer at the root of its
 *     alias chain (its owner) instead.
 * Every value that holds memory must have a known size: a size that depends
 * on an unbound symbolic dimension fails naming the symbol.
 */
#ifndef MP_LIFETIME_H
#define MP_LIFETIME_H

#include "ir/ir.h"
#include "passes/schedule.h"

typedef struct mp_lifetimes {
    int32_t nvalues, nsteps;
    int32_t *step_of;   /* nnodes: the step each node runs at */
    int32_t *owner;     /* nvalues: the value whose buffer it uses (itself unless aliased) */
    int32_t *start;     /* nvalues: first live step of an owner's buffer; -1 when it holds no memory */
    int32_t *end;       /* nvalues: last live step (inclusive) */
    int64_t *bytes;     /* nvalues: owners: buffer size (largest value sharing it); others 0 */
    bool *persistent;   /* nvalues: live for the whole step by its role */
} mp_lifetimes;

/* True for the roles that live for the whole training step. */
bool mp_lifetime_role_persistent(mp_role r);

/* Fails on a bad schedule, an alias cycle or an unsized value. */
int mp_lifetime_compute(const mp_graph *g, const mp_schedule *s, mp_lifetimes *lt, mp_err *err);

void mp_lifetime_free(mp_lifetimes *lt);

#endif
