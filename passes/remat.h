/* remat.h - rematerialization: which activations to keep, which to recompute.
 *
 *   mp_rgraph rg;                                  // from a training step or a --graph-json file
 *   mp_rgraph_from_training(g, &sched, &lt, &cm, &rg, &err);
 *   mp_rspace sp;                                  // what may be dropped, when it may come back
 *   mp_rspace_build(&rg, NULL, &sp, &err);
 *   mp_rplan plan;                                 // the keep/recompute decision
 *   mp_rsolve_opts so = mp_rsolve_defaults();
 *   mp_remat_solve(&sp, budget, &so, &plan, &info, &err);
 *   mp_rsched out;                                 // the order that runs, recomputations repeated
 *   mp_rplan_emit(&sp, &plan, &out, &err);
 *   mp_rsched_count(&rg, &out, &count, &err);      // its true peak and cost, recounted
 *
 * The model (docs/ilp.md has the full statement):
 *   - an rgraph is a DAG of nodes in a fixed order (node i runs at step i) that
 *     produce values; a node needs its inputs resident and allocates its
 *     outputs; a value is freed after its last use (Checkmate's semantics);
 *     resident values (no producer) are live throughout;
 *   - a droppable value v (a forward value) has gaps between consecutive
 *     events of {producer} and its uses (e.g. its last forward use a and its
 *     first backward use b, or between two backward uses); its G largest gaps
 *     of length >= 2 are groups (value, gap). In each group v is either kept,
 *     or freed after a and recomputed at one of the group's candidate steps q
 *     in (a, b], living from q to the start of its next dropped gap (or its
 *     last use): a value may be recomputed once per dropped gap;
 *   - recomputing v at q runs its recipe: v's producer and every ancestor that
 *     is no longer live at q (values that died after the forward), in order;
 *     the recipe's inputs that are droppable must be resident at q (kept, or
 *     themselves recomputed at or before q) - or, in a second candidate, one
 *     of them that is away at q is made again inside the recipe and freed
 *     right after it is read;
 *   - or (retention) a third candidate runs v's producer alone, keeping each
 *     of its inputs that died before q alive from its last use until the
 *     latest chosen recipe reading it (Moccasin's retention intervals),
 *     instead of rerunning that input's cone; on small graphs also recipes
 *     cut short (the nodes within d steps of the producer rerun, the dead
 *     values deeper ones made retained, also with an away input made inside,
 *     or one or two dead values retained wherever the recipe reads them),
 *     recipes that make every away input for
 *     themselves, level by level, every step of a gap (gaps of one step
 *     too) a candidate step, and a droppable input away at q may
 *     be retained the same way inside its gap, from the gap's start until its
 *     latest reader, coming back after that; a recipe's count then follows
 *     what it frees after its last read of a value it reads last; and a
 *     recipe may keep a value it makes, retained for later recipes from
 *     there on (one rerun of a shared intermediate feeding several);
 *   - the cost of a plan is the sum of its recipes' costs; its peak is counted
 *     step by step, recipe nodes included.
 * The ILP (GLPK) chooses at most one candidate per group; mp_rsched_count()
 * recounts the emitted order independently, and equals the ILP's peak.
 */
#ifndef MP_REMAT_H
#define MP_REMAT_H

#include <stdatomic.h>

#include "ir/ir.h"

/* ---- the graph (remat_graph.c) ---- */

typedef struct mp_rgraph {
    int32_t nnodes, nvalues;
    char **node_name;       /* nnodes: ONNX node name or graph-json id, printed in schedules */
    double *cost;           /* nnodes: seconds (ONNX: the cost model) or the file's relative units */
    uint8_t *recomputable;  /* nnodes: 1 for forward nodes, which a plan may run again */
    int32_t *in_off, *in;   /* CSR: inputs of node i are in[in_off[i] .. in_off[i+1]) (value ids) */
    int32_t *out_off, *out; /* CSR: outputs of node i */
    int64_t *bytes;         /* nvalues */
    int32_t *producer;      /* nvalues: node id, -1 for a resident value (live throughout) */
    uint8_t *keep_to_end;   /* nvalues: graph outputs, live to the last step */
    uint8_t *pinned;        /* nvalues: never dropped (e.g. a buffer a later node overwrites in place) */
    int32_t *value_id;      /* nvalues: the IR value it stands for, -1 for graph-json */
    int32_t *write_off, *write; /* CSR over values: the steps that overwrite each value in place, ascending
                                 * (an optimizer update, a gradient written over its input); NULL: none */
} mp_rgraph;

/* The first step after `after` that overwrites v in place, nnodes when none.
 * A node that read v at step `after` reads something else once that step has
 * run, so it may run again only before it. */
int32_t mp_rgraph_next_write(const mp_rgraph *rg, int32_t v, int32_t after);

/* Value-less graph-json files (Checkmate, Moccasin): one value per node, of the node's output size. */
int mp_rgraph_from_json(const char *path, mp_rgraph *rg, mp_err *err);

/* The training step g under schedule s (lifetimes lt): one node per step, one
 * value per buffer owner (aliases follow their owner), persistent buffers
 * resident, node cost = the cost model's seconds on gpu (passes/cost.h). */
struct mp_lifetimes;
struct mp_schedule;
struct mp_gpu;
int mp_rgraph_from_training(const mp_graph *g, const struct mp_schedule *s, const struct mp_lifetimes *lt,
                            const struct mp_gpu *gpu, mp_rgraph *rg, mp_err *err);

void mp_rgraph_free(mp_rgraph *rg);

/* ---- schedules and their recount (remat_count.c) ---- */

/* An order that runs: node ids, recomputations repeated. */
typedef struct mp_rsched {
    int32_t n;
    int32_t *node;          /* n node ids */
    uint8_t *recompute;     /* n: 1 where this entry runs a node again */
} mp_rsched;

typedef struct mp_rcount {
    int64_t peak_bytes;     /* resident included */
    int32_t peak_entry;     /* the schedule entry at the peak */
    double cost;            /* sum of the costs of all entries */
    double recompute_cost;  /* sum over recompute entries */
} mp_rcount;

/* The store-everything order: every node once, in order. */
int mp_rsched_identity(const mp_rgraph *rg, mp_rsched *s, mp_err *err);

/* Recounts s with Checkmate's semantics, independently of how s was made:
 * each entry needs the latest instance of every input resident (fails naming
 * the entry otherwise), allocates its outputs (a recomputed value replaces its
 * old instance), and every instance is freed after its last use. */
int mp_rsched_count(const mp_rgraph *rg, const mp_rsched *s, mp_rcount *c, mp_err *err);
/* The same, for a graph mp_rsched_count accepted already: the graph's checks are not repeated, and the
 * count stops once the live bytes pass stop_above (c->peak_bytes is then above it, the rest of c partial). */
int mp_rsched_recount(const mp_rgraph *rg, const mp_rsched *s, int64_t stop_above, mp_rcount *c, mp_err *err);

/* Live bytes after each entry (n values), for timelines. */
int mp_rsched_profile(const mp_rgraph *rg, const mp_rsched *s, int64_t *live, mp_err *err);

/* JSON list of node names in order (the --schedule file). */
int mp_rsched_write_json(const mp_rgraph *rg, const mp_rsched *s, const char *path, mp_err *err);

void mp_rsched_free(mp_rsched *s);

/* Removes from s (which must fit budget) the recomputations it does not need
 * to fit it, costliest first, each checked against the peak the order would
 * have without it, and with each the recomputations that only fed it
 * (remat_prune.c). s stays an order of rg within budget and costs no more;
 * *removed (may be NULL) gets the entries removed. Fails on an order that
 * does not run, or on allocation. */
int mp_rsched_prune(const mp_rgraph *rg, mp_rsched *s, int64_t budget, int32_t *removed, mp_err *err);

typedef struct mp_prune_opts {
    const atomic_bool *stop; /* NULL, or set by another thread that no longer needs the result: s is then pruned
                                in part, still an order of rg within budget */
    bool recount_each;       /* check each removal by recounting the whole order (mp_rsched_recount), not by the
                                lifetimes it changes: the same result, slower; the tests' reference */
} mp_prune_opts;
int mp_rsched_prune_with(const mp_rgraph *rg, mp_rsched *s, int64_t budget, const mp_prune_opts *o,
                         int32_t *removed, mp_err *err);

/* ---- the decision space (remat_space.c) ---- */

typedef struct mp_rspace_opts {
    int max_candidates;     /* candidate recompute steps per group (default 6; the one-gap space's steps first) */
    int max_gaps;           /* groups per value: its largest gaps of length >= 2 (default 4; 1: the largest only) */
    int max_recipe;         /* nodes in one recipe (default 64); longer ones are not offered */
    double min_fraction;    /* values under this fraction of the largest droppable are always kept (0) */
    bool retain;            /* candidates that keep dead inputs alive until they read them (default on), */
    int32_t retain_over;    /* where the recipe is not offered or reruns more than this many nodes (default
                             * INT32_MAX: only where it is not offered; 1 everywhere doubles the programs of
                             * ResNet-50 and GPT-2, whose LPs then miss the time limit, docs/benchmarks.md) */
    int32_t retain_nodes;   /* on graphs of at most this many nodes, retain_over = 1 (default 200): Checkmate's exact
                             * program (tests/checkmate_milp.h) finds cheaper orders at a fifth of the budgets of
                             * small random graphs without them, 4 % with them (docs/ilp.md) */
    int32_t wide_nodes;     /* on graphs of at most this many nodes (default 32) the space is wider, nearer
                             * every order, as Checkmate's orders show: a recipe may read a value in the gap it
                             * is away in (the value leaves after its latest such reader, retained in its gap,
                             * and comes back later), recipes are also cut short (the nodes within d steps of
                             * the producer rerun, the dead values deeper ones made retained), and recipes make
                             * away inputs for themselves (as expand_nodes), also all of them at once, then
                             * theirs, level by level (a rerun from what is present, DTR's). It weakens the LP:
                             * on Checkmate's graphs (45-185 nodes) it made one plan cheaper and slowed the
                             * searches (fcn_8 at 0.7: 30 % from its bound after 5 s, 0.03 % without;
                             * docs/benchmarks.md) */
    int32_t expand_nodes;   /* second candidates whose recipe makes an away input for itself, on graphs of at
                             * most this many nodes (default 0: only in the wide space; they more than double the
                             * program and weaken its LP, so the time-limited search loses more than they win on
                             * big graphs, docs/ilp.md) */
    int32_t every_step_nodes; /* on graphs of at most this many nodes (default 32) every step of a gap is a
                               * candidate step, uncapped, and gaps of one step are groups too (a value freed
                               * after a node and made again before the next, away while the recipes before its
                               * own in that phase run): Checkmate's orders bring values back where the memory is
                               * lowest or beside a recipe that makes their inputs (docs/ilp.md) */
    int32_t keep_nodes;     /* on graphs of at most this many nodes (default 32) a recipe that makes a value dead or
                             * away at its step is also offered keeping it for later recipes (mp_rcand.keep): one
                             * rerun of a shared intermediate feeds them all, as in Checkmate's orders */
} mp_rspace_opts;

mp_rspace_opts mp_rspace_defaults(void);

/* One way to bring a value back: recompute it before step q by running recipe nodes. */
typedef struct mp_rcand {
    int32_t value, step;
    int32_t group;            /* the group (value, gap) it brings back: gap_start[group] + 2 <= step <= gap_end[group] */
    int32_t nrecipe, *recipe; /* node ids in order; the last produces value */
    double cost;
    int64_t recipe_peak;      /* extra bytes while the recipe runs, value included */
    int32_t nfront, *front;   /* values read by the recipe and inside one of their groups' gaps at step
                               * (mp_rspace_group): that group must be kept or back by step, unless it may leave */
    int32_t nleave, *leave;   /* values the recipe may be the last to read, freed after its last read of them (in
                               * that order): the retained ones, and on small graphs (mp_rspace_opts.wide_nodes)
                               * its frontier inputs, which may then stay away until later, retained in their gap
                               * until their latest chosen reader */
    int64_t *leave_peak;      /* nleave + 1: the most extra bytes while the recipe runs up to its last read of
                               * leave[0], then up to that of leave[k] (k >= 1), then to its end (-1 where no node
                               * runs); their largest is recipe_peak */
    int32_t nexpand, *expand; /* values the recipe makes again for itself although they are live at step (one;
                               * on small graphs also several, level by level): they must be away then (their
                               * group comes back after step), and the recipe frees its copy after its last read,
                               * as it frees intermediates */
    int32_t nretain, *retain; /* values the recipe reads that died before step (last_use < step): kept alive
                               * from last_use + 1 until the latest chosen recipe reading them runs; no chosen
                               * recipe may make one of them again while it is so kept */
    int32_t keep;             /* -1, or (small graphs) a value the recipe makes and does not free: retained for
                               * later recipes from here on instead of from its span's start (the recipe *makes*
                               * its span, mp_rspace_span); chosen, a later recipe must read it (the same step
                               * when it is made inside, in its gap), none earlier, and no other recipe makes
                               * that span: one rerun of a shared intermediate feeds several recipes */
} mp_rcand;

typedef struct mp_rspace {
    const mp_rgraph *rg;
    int32_t *first_use, *last_use; /* nvalues: steps in the store-everything order */
    int64_t *base_live;       /* nnodes: live bytes at each step, store everything (resident included) */
    int64_t *base_between;    /* nnodes: bytes crossing into step q (alive after q-1 and needed at q or later) */
    int64_t base_peak;
    int64_t resident_bytes;
    /* Groups: one per (droppable value, gap), in producer order of the value,
     * a value's groups consecutive and by gap. (Before, one group per value:
     * gap_start and gap_end were indexed by value.) */
    int32_t ndrop;            /* groups */
    int32_t *drop;            /* ndrop: the value of group i (a value may have several groups) */
    int32_t *gap_start, *gap_end; /* ndrop: the gap a < b of group i, both events (producer or uses) of its value */
    int32_t *drop_index;      /* nvalues: the first group of the value, -1 when it is always kept */
    int32_t ncand;
    mp_rcand *cand;           /* by group, each group by step */
    int32_t *cand_off;        /* ndrop + 1: candidates of group i are cand[cand_off[i] .. cand_off[i+1]) */
} mp_rspace;

int mp_rspace_build(const mp_rgraph *rg, const mp_rspace_opts *o, mp_rspace *sp, mp_err *err);
void mp_rspace_free(mp_rspace *sp);

/* The bytes of the value candidate c keeps for later recipes (mp_rcand.keep), 0 when none, and the span it
 * keeps it in (mp_rspace_span at its step), -1 when none. */
int64_t mp_rspace_kept_bytes(const mp_rspace *sp, int32_t c);
int32_t mp_rspace_kept_span(const mp_rspace *sp, int32_t c);

/* Does a recipe at (step, group) run after one at (step0, group0)? Before a node the chosen recipes run by step,
 * and within a step in group (producer) order. */
static inline bool mp_rspace_runs_after(int32_t step, int32_t group, int32_t step0, int32_t group0)
{
    return step > step0 || (step == step0 && group > group0);
}

/* May c's recipe free x after its last read of it (x is one of c->leave)? */
bool mp_rcand_leaves(const mp_rcand *c, int32_t x);

/* Where a value is kept alive for a reader at step q, a *span*: after its
 * last use (span x, when last_use[x] < q), or in the gap of its group g
 * holding q (span nvalues + g); -1 when neither. mp_rspace_span_start gives
 * the first step a span keeps its value alive at. */
int32_t mp_rspace_span(const mp_rspace *sp, int32_t x, int32_t q);
int32_t mp_rspace_span_start(const mp_rspace *sp, int32_t span);

/* The group of value v whose gap holds step q (gap_start < q <= gap_end), -1 when none. */
int32_t mp_rspace_group(const mp_rspace *sp, int32_t v, int32_t q);

/* ---- plans (remat_plan.c) ---- */

typedef struct mp_rplan {
    int32_t *choice;          /* ndrop (per group): index into sp->cand of the chosen candidate, -1 kept */
} mp_rplan;

int mp_rplan_init(const mp_rspace *sp, mp_rplan *p, mp_err *err); /* keeps everything */

/* The order the plan runs: the store-everything order with, before each step
 * q, the recipes of the candidates chosen at q (in group order). Fails when
 * the plan breaks the model (a recipe input not resident). */
int mp_rplan_emit(const mp_rspace *sp, const mp_rplan *p, mp_rsched *s, mp_err *err);

/* The order memplan gives for p at budget: emitted, recounted, rid of the
 * recomputations budget does not need (mp_rsched_prune, *removed may be
 * NULL) and recounted into c (remat_prune.c). 1: s and c made; 0: the emitted
 * order peaks above budget (s left empty); -1: error (err; s left empty). */
int mp_rplan_order(const mp_rspace *sp, const mp_rplan *p, int64_t budget, mp_rsched *s, mp_rcount *c,
                   int32_t *removed, mp_err *err);

/* The model's count of p (docs/ilp.md): step_peak (nnodes, or NULL) gets the
 * most bytes alive at each step, its recompute phase included, *peak the
 * largest (resident included). Equals mp_rsched_count() of the emitted order.
 * Fails, naming the value, when p breaks the model. */
int mp_rplan_peak(const mp_rspace *sp, const mp_rplan *p, int64_t *step_peak, int64_t *peak, mp_err *err);

void mp_rplan_free(mp_rplan *p);

/* ---- the integer program (remat_ilp.c) ---- */

typedef struct mp_rsolve_opts {
    double time_limit;        /* seconds (default 5) */
    double gap_limit;         /* branch and bound stops once the plan is within this fraction of the best bound
                               * (default 0.01; 0: search to proven optimality or the time limit) */
    bool progress;            /* solver progress on stderr */
    const mp_rplan *warm;     /* a feasible plan to start from, or NULL */
    /* called (cost mode) with plans as the solve finds them: the warm start, the LP's rounding when better,
     * each better incumbent of the search, found by branching or by GLPK's heuristics (ndrop choices, valid
     * during the call); the caller may work on them while the search goes on. The solve's plan may be an
     * earlier one (a cheaper warm start). Plans past the budget by GLPK's tolerance are offered too: recount
     * them */
    void (*on_plan)(void *ctx, const int32_t *choice);
    void *on_plan_ctx;
    /* least-peak searches: a solve proved that no plan of the space peaks at or below it (0: none known); the
     * search looks above it for the least peak */
    int64_t proven_above;
} mp_rsolve_opts;

mp_rsolve_opts mp_rsolve_defaults(void);

typedef enum mp_rstatus {
    MP_RSOLVE_OPTIMAL = 0,    /* proven optimal */
    MP_RSOLVE_FEASIBLE,       /* time limit: best plan found, gap below */
    MP_RSOLVE_INFEASIBLE      /* no plan in the space fits the budget */
} mp_rstatus;

typedef struct mp_rsolve_info {
    mp_rstatus status;
    double seconds;
    double objective;         /* recompute cost of the plan */
    double lp_bound;          /* LP relaxation (or best bound) of the objective */
    double mip_gap;           /* (objective - bound) / max(objective, tiny), 0 when optimal */
    bool bounded;             /* the LP relaxation finished (or the plan is proven optimal); without it lp_bound
                               * is 0 and mip_gap 1: they bound nothing */
    int64_t model_peak;       /* the peak the ILP counts for the plan */
    int32_t rows, cols, binaries;
    bool stalled;             /* GLPK stopped on a relaxation it could not solve (numerical trouble), before the
                               * time limit: when no plan was found, that, not the limit, is why */
    bool rins_cheaper;        /* RINS found a plan cheaper than the LP's rounding before the search (docs/ilp.md) */
    bool first_searched;      /* neither the warm start nor the LP's rounding fit: a search for any plan found the
                               * first one, before RINS and the search (docs/ilp.md) */
    int32_t gomory_cuts;      /* Gomory's cuts that raised the LP's bound before the search (docs/ilp.md) */
    double gomory_bound;      /* the bound they prove (cost units), when gomory_cuts > 0 */
} mp_rsolve_info;

/* plan, repaired to fit budget: the rounding keeps what it can of plan's
 * choices first (the ones that lower the peak where it is over budget), then
 * adds others by cost per byte freed, then keeps again what the budget
 * allows. 1: out (ndrop entries) fits, *peak its peak; 0: it does not;
 * -1: error (err). A re-plan for a lower budget starts from it. */
int mp_remat_repair(const mp_rspace *sp, int64_t budget, const mp_rplan *plan, int32_t *out, int64_t *peak,
                    mp_err *err);

/* Least recompute cost with peak <= budget. INFEASIBLE is not an error. */
int mp_remat_solve(const mp_rspace *sp, int64_t budget, const mp_rsolve_opts *o, mp_rplan *p,
                   mp_rsolve_info *info, mp_err *err);

/* The smallest peak any plan of the space reaches, and one plan that reaches
 * it: exact when the search finishes within the time limit; otherwise *peak
 * is the best plan's and *lower a proven bound below every plan's peak
 * (*lower == *peak when exact). mp_remat_min_peak drops the bound. */
int mp_remat_min_peak_range(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *peak, int64_t *lower, mp_rplan *p,
                            mp_err *err);
int mp_remat_min_peak(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *peak, mp_rplan *p, mp_err *err);

/* A bound below the peak of every plan of the space, from the min-peak
 * program's LP alone (no search): a small part of mp_remat_min_peak_range's
 * time, and the bound it starts from. */
int mp_remat_min_peak_bound(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *lower, mp_err *err);

/* ---- a bound on every plan (remat_bound.c) ---- */

/* A lower bound on the recompute cost of every order that runs rg's schedule
 * with recomputations inserted and peaks at most budget - any plan, not only
 * those of the ILP's space: at a step t where store-everything memory exceeds
 * the budget, values away at t must be made again after t, from inputs that
 * were present at t or made again too; *cost is the largest minimum of that
 * (LP, or 0/1 on small programs) over the steps tried, largest memory first,
 * within seconds (the first step: 3x), *step its step (-1: no step exceeds the
 * budget or none was solved in time, *cost 0). *cost is INFINITY when no plan
 * fits at some step. */
int mp_remat_any_plan_bound(const mp_rgraph *rg, int64_t budget, double seconds, double *cost, int32_t *step,
                            mp_err *err);

/* A lower bound on the peak of every such order: at some node, the resident
 * values, its inputs and outputs and the values crossing it that cannot be made
 * again (their producer cannot rerun, or they are pinned or kept to the end)
 * are all live. *step gets that node. -1 when out of memory. */
int64_t mp_remat_any_plan_least_peak(const mp_rgraph *rg, int32_t *step);

/* ---- baselines (remat_baselines.c): orders, counted with mp_rsched_count ---- */

typedef enum mp_rbaseline {
    MP_RBASE_NONE = 0,        /* store everything */
    MP_RBASE_ALL,             /* keep only segment inputs (articulation values), recompute the rest */
    MP_RBASE_SQRT,            /* Chen et al.: every sqrt(n)-th articulation value kept */
    MP_RBASE_GREEDY,          /* DTR-style eviction under the budget: cost / (bytes * staleness) */
    MP_RBASE_LOOKAHEAD,       /* the same, knowing the schedule: cost / (bytes * steps to the next read) */
    MP_RBASE_COUNT
} mp_rbaseline;

extern const char *const mp_rbaseline_names[MP_RBASE_COUNT]; /* "none", "all", "sqrt", "greedy", "lookahead" */

/* The baseline's order; budget is used by greedy and lookahead only, which
 * fail (status -1 with a message) when they cannot fit the budget. */
int mp_remat_baseline(const mp_rgraph *rg, mp_rbaseline b, int64_t budget, mp_rsched *s, mp_err *err);

/* ---- into IR (remat_apply.c) ---- */

/* Rewrites g (the graph the rgraph was made from under schedule s) so that
 * its node order is the order rs: each recompute entry becomes a clone of its
 * node writing new copies of the outputs (named "x@r1", flag MP_VAL_RECOMPUTED),
 * and every later reader reads the newest copy. *out gets the new graph order. */
int mp_remat_apply(mp_graph *g, const struct mp_schedule *s, const mp_rsched *rs, struct mp_schedule *out,
                   mp_err *err);

#endif
