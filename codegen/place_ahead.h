/* place_ahead.h - places the solver's plans while it searches.
 *
 * A time-limited solve often finds its plan long before it stops, and the
 * arena's placement of that plan takes up to a second more. So each plan the
 * solve offers (mp_rsolve_opts.on_plan) is turned into its order and placed on
 * a second thread; a newer plan cancels the placement of the last. When the
 * solve returns, the placement of its plan is done or under way: the caller
 * waits for it instead of placing the plan itself. With a fixed amount of
 * work (cfg.po.arena_work > 0, as the command sets it) a placement does not
 * depend on the time it gets, so its arena is the one the caller would have
 * got. */
#ifndef MEMPLAN_CODEGEN_PLACE_AHEAD_H
#define MEMPLAN_CODEGEN_PLACE_AHEAD_H

#include "codegen/plan.h"
#include "passes/remat.h"

typedef struct place_ahead place_ahead;

/* A plan becomes its order for target (mp_rplan_order: emitted from sp,
 * recounted, pruned), placed as model's step with po. */
typedef struct place_ahead_cfg {
    const char *model;
    const mp_rspace *sp;
    int64_t target;
    mp_plan_opts po;
} place_ahead_cfg;

/* NULL when no thread could start (or out of memory): the caller places the plan itself. */
place_ahead *place_ahead_start(const place_ahead_cfg *cfg);

/* mp_rsolve_opts.on_plan, with the place_ahead as ctx. */
void place_ahead_offer(void *ctx, const int32_t *choice);

/* Stops the thread and frees a. When final (the solve's plan; NULL: none)
 * was offered, waits for its placement and returns true with its order
 * (the caller owns it) and info; false otherwise, or when its placement
 * failed. */
bool place_ahead_finish(place_ahead *a, const int32_t *final, mp_rsched *order, mp_plan_info *info);

#endif
