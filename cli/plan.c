/* plan.c - `memplan MODEL.onnx --budget B ...` and `memplan --graph-json FILE
 * --budget B`: which activations to keep and which to recompute so that the
 * step fits the budget (passes/remat.h), compared with the baselines, and
 * --batch max, the largest batch that fits. The memory command hands over
 * here when a planning option is given (docs/cli.md).
 *
 * A plan is always recounted (mp_rsched_count) before it is shown: nothing
 * above the usable budget is ever printed or written. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "codegen/place_ahead.h" /* the solver's plans placed while it searches */
#include "passes/arena.h"  /* the arena's alignment */
#include "passes/cost.h"   /* mp_gpu_find, the GPU table */
#include "passes/remat.h"  /* mp_rgraph, mp_rspace, mp_remat_solve, baselines */
#include "codegen/plan.h"  /* -o DIR */
#include "codegen/viz.h"   /* the planned step's pictures */

const char *const mp_cli_strategy_names[] = {"ilp", "none", "all", "sqrt", "greedy", "lookahead", NULL};
enum { STRATEGY_ILP = 0 }; /* then the baselines, in mp_rbaseline order */

#define DEFAULT_RESERVE (INT64_C(512) << 20)
#define DEFAULT_TIME_LIMIT 1.2 /* with the rest of the command, ResNet-50 and GPT-2 plan in 2 s (docs/benchmarks.md) */
#define MAX_TIME_LIMIT 86400.0
#define BATCH_MAX_CAP (INT64_C(1) << 20)
#define LEAST_PEAK_MIN_SECONDS 1.5
#define SPACE_BOUND_SECONDS 0.7 /* for the LP bound that decides whether the least-peak search can matter */
#define REPLAN_TIME_SHARE 0.25 /* of the time limit, for a re-plan with the last plan repaired as its warm start */
#define ANY_BOUND_SECONDS 0.2 /* for the bound on every plan: it is only a report */
/* Every placement searches for this much work (buffers visited, about 1 s here; docs/memory.md) rather than
 * for a time, so that an order is placed alike on any load: a plan's placement, and so the re-plans it
 * causes, do not depend on the machine's load, and a budget an exit-3 line states is met given back */
#define ARENA_WORK INT64_C(400000000)

static double mib(int64_t b) { return b / (1024.0 * 1024.0); }

/* ---- the budget grammar ----------------------------------------------------------- */

static const struct {
    const char *suffix;
    int64_t unit;
} byte_units[] = {
    {"", 1},          {"B", 1},
    {"KB", 1000},     {"KiB", INT64_C(1) << 10},
    {"MB", 1000000},  {"MiB", INT64_C(1) << 20},
    {"GB", INT64_C(1000000000)},    {"GiB", INT64_C(1) << 30},
    {"TB", INT64_C(1000000000000)}, {"TiB", INT64_C(1) << 40},
};

int mp_cli_parse_bytes(const char *what, const char *s, bool allow_pct, int64_t *bytes, double *pct)
{
    /* digits [. digits] then a unit: exact in integers, rounded to the nearest byte */
    const char *p = s;
    __int128 whole = 0, frac = 0, scale = 1;
    int ndigits = 0;
    while (isdigit((unsigned char)*p) && ndigits < 19) whole = whole * 10 + (*p++ - '0'), ndigits++;
    if (ndigits == 0 && *p != '.') goto bad;
    if (isdigit((unsigned char)*p)) goto range;
    if (*p == '.') {
        p++;
        int nf = 0;
        while (isdigit((unsigned char)*p) && nf < 18) frac = frac * 10 + (*p++ - '0'), scale *= 10, nf++;
        if (nf == 0 && ndigits == 0) goto bad;
        while (isdigit((unsigned char)*p)) p++; /* digits past 10^-18 cannot change a byte count */
    }
    if (*p == '%') {
        if (!allow_pct || p[1]) goto bad;
        double v = (double)whole + (double)frac / (double)scale;
        if (!(v > 0) || v > 10000) {
            mp_cli_error("%s: %s is out of range (a percentage in (0, 10000])", what, s);
            return -1;
        }
        *pct = v;
        *bytes = -1;
        return 0;
    }
    for (size_t u = 0; u < sizeof byte_units / sizeof *byte_units; u++) {
        if (strcmp(p, byte_units[u].suffix)) continue;
        if (whole > INT64_MAX / byte_units[u].unit) goto range; /* and then nothing below overflows 128 bits */
        __int128 b = (whole * scale + frac) * byte_units[u].unit;
        if (b % scale && byte_units[u].unit == 1) goto whole_bytes;
        b = (b + scale / 2) / scale;
        if (b > INT64_MAX) goto range;
        *bytes = (int64_t)b;
        if (pct) *pct = 0;
        return 0;
    }
bad:
    mp_cli_error("%s: '%.100s' is not a size (e.g. 24GB = 24*10^9 bytes, 24GiB = 24*2^30, 123456789B%s)", what, s,
                 allow_pct ? ", 80%" : "");
    return -1;
whole_bytes:
    mp_cli_error("%s: '%.100s' is not a whole number of bytes", what, s);
    return -1;
range:
    mp_cli_error("%s: %.100s is out of range (at most 2^63-1 bytes)", what, s);
    return -1;
}

int mp_cli_plan_option(mp_cli_opts *o, int id, const char *val)
{
    switch (id) {
    case MP_OPT_BUDGET:
        if (o->budget_bytes >= 0 || o->budget_pct > 0) break;
        if (mp_cli_parse_bytes("--budget", val, true, &o->budget_bytes, &o->budget_pct)) return -1;
        if (o->budget_bytes == 0) {
            mp_cli_error("--budget: %s is no memory at all", val);
            return -1;
        }
        return 0;
    case MP_OPT_RESERVE:
        if (o->reserve_bytes >= 0) break;
        return mp_cli_parse_bytes("--reserve", val, false, &o->reserve_bytes, NULL);
    case MP_OPT_GPU:
        if (o->gpu) break;
        o->gpu = val;
        return 0;
    case MP_OPT_STRATEGY:
        if (o->strategy >= 0) break;
        for (int i = 0; mp_cli_strategy_names[i]; i++)
            if (!strcmp(val, mp_cli_strategy_names[i])) {
                o->strategy = i;
                return 0;
            }
        mp_cli_error("--strategy: unknown value '%.100s' (one of ilp, none, all, sqrt, greedy, lookahead)", val);
        return -1;
    case MP_OPT_TIME_LIMIT: {
        if (o->time_limit >= 0) break;
        char *end;
        errno = 0;
        double t = strtod(val, &end);
        if (errno || *end || end == val || !isdigit((unsigned char)val[0]) || !(t > 0) || t > MAX_TIME_LIMIT) {
            mp_cli_error("--time-limit: '%.100s' is not a number of seconds in (0, %.0f]", val, MAX_TIME_LIMIT);
            return -1;
        }
        o->time_limit = t;
        return 0;
    }
    case MP_OPT_SCHEDULE:
        if (o->schedule) break;
        o->schedule = val;
        return 0;
    case MP_OPT_GRAPH_JSON:
        if (o->graph_json) break;
        o->graph_json = val;
        return 0;
    case MP_OPT_OUT:
        if (o->out_dir) break;
        o->out_dir = val;
        return 0;
    default: return 0;
    }
    mp_cli_error("%s given twice", id == MP_OPT_BUDGET ? "--budget" : id == MP_OPT_RESERVE ? "--reserve" :
                 id == MP_OPT_GPU ? "--gpu" : id == MP_OPT_STRATEGY ? "--strategy" :
                 id == MP_OPT_TIME_LIMIT ? "--time-limit" : id == MP_OPT_SCHEDULE ? "--schedule" :
                 id == MP_OPT_OUT ? "-o" : "--graph-json");
    return -1;
}

bool mp_cli_plan_wanted(const mp_cli_opts *o)
{
    return o->budget_bytes >= 0 || o->budget_pct > 0 || o->gpu || o->graph_json || o->batch_max ||
           o->reserve_bytes >= 0 || o->strategy >= 0 || o->time_limit >= 0 || o->schedule || o->out_dir;
}

/* ---- one plan ------------------------------------------------------------------------ */

typedef struct baseline_row {
    bool ok;                    /* the baseline produced an order (greedy and lookahead fail when they cannot fit) */
    int64_t peak;
    double overhead_pct;
} baseline_row;

/* The bound on every plan, computed beside the planning (bound_start). */
typedef struct bound_job {
    const mp_rgraph *rg;
    int64_t usable;
    double cost;
    int32_t step;
    int rc;
    mp_err err;
    pthread_t thread;
    bool started, running;
} bound_job;

/* Which targets a fallback order was made for (adopt_baseline_order). */
typedef enum fallback_target {
    AT_BUDGET,   /* the budget itself */
    LESS_SLACK,  /* the budget less the re-plans' margin */
    THIRD,       /* the budget less what the baseline's order for the budget added when placed */
    RUNG,        /* spaced around the third */
    DOWN_CHAIN,  /* below the last order's live bytes (make_first_orders) */
    OWN_PEAK,    /* the least baseline's order pruned within its own peak */
} fallback_target;

/* An order tried as placed: a fallback's (a baseline's order for the budget, or
 * for a target below it), or fit_arena's runner-up; with its count. */
typedef struct fallback {
    mp_rsched s;
    mp_rcount c;
    int from;         /* the baseline */
    bool least;       /* the order of the baseline at its least target, pruned (least_orders) */
    int32_t pruned;   /* entries mp_rsched_prune removed */
    fallback_target target;
    int64_t work;     /* its placement's search work */
    bool known;       /* placed already (place_pair): whether without error, and its arena */
    bool placed;
    mp_plan_info info;
} fallback;

typedef struct plan {
    const mp_cli_opts *o;
    const char *source;         /* the model or graph file, for messages */
    mp_cli_step step;           /* the ONNX step; unused for --graph-json */
    bool onnx;
    mp_rgraph rg;
    const mp_gpu *gpu;          /* NULL: --graph-json without --gpu */
    int64_t budget, reserve, usable;
    int64_t slack;              /* bytes kept below usable for the arena's fragmentation (fit_arena) */
    int64_t best_arena;         /* the smallest arena placed for an order the exit-3 line names (0: none), by
                                   ARENA_WORK: a budget proven feasible, met again when given back */
    int64_t target;             /* what the plan's counted peak must fit: usable - slack */
    mp_plan_info arena;         /* the plan's arena (a model's plan only) */
    char out_failed[sizeof(mp_err) + 300]; /* -o failed after the arena fit: reported after the table */
    int strategy;
    double time_limit;
    bool have_base;             /* identity and base are made */
    mp_rsched identity;
    mp_rcount base;             /* the store-everything order */
    mp_rspace sp;
    bool have_sp;
    mp_rplan rp;
    bool have_rp;
    mp_rplan hint;              /* the last ILP plan, which fragmented: a re-plan starts from it, repaired */
    bool have_hint;
    const mp_cli_opts *place_o; /* fit_arena's options when it will place the plan (not -o): the solver's plans
                                   are placed while it searches (codegen/place_ahead.h); NULL: they are not */
    int round;                  /* fit_arena's round the plan is made for */
    bool have_ahead;            /* the ILP's plan was placed so: its order and arena */
    mp_rsched ahead_order;
    mp_plan_info ahead_info;
    mp_rsched order;            /* the plan's order */
    mp_rcount count;            /* its recount */
    bool have_runner;           /* the round's next cheapest order that fits as counted (use_cheaper_baseline), */
    fallback runner;            /* placed beside the order by fit_arena */
    bool have_spare;            /* the cheapest runner-up that fitted as placed where its round's order did not: */
    fallback spare;             /* given at the end when it costs less than the plan the rounds led to */
    mp_rsolve_info info;
    bool solved;                /* info holds a solver run */
    const char *status;         /* "optimal", "feasible", "baseline", "min-peak" */
    int order_from;             /* -1: the ILP's plan; else the baseline whose order was cheaper */
    int32_t pruned;             /* entries of the ILP's plan or that baseline's order removed by mp_rsched_prune */
    bool placed_fallback;       /* the order was taken because its arena fits where the ILP's plans fragmented */
    int64_t placed_target;      /* the arena target it was placed with, to be placed alike when written */
    int64_t placed_work;        /* and the work its search was given */
    bool have_least;            /* the least-peak search ran (it is slow: once per plan) */
    int64_t least_peak, least_lower;
    bool have_space_floor;      /* space_floor was computed */
    int64_t space_floor;        /* below every plan of the space (its LP): the least-peak plan fits no budget below */
    bool have_base_least;       /* least_baseline ran */
    int64_t base_least;         /* the least peak a baseline reaches (all, sqrt; greedy's, lookahead's least target) */
    mp_rbaseline base_least_of; /* that baseline, */
    int64_t base_least_target;  /* at that target */
    struct least_orders *least_orders; /* its orders for the fallback, made beside the arena (least_orders_start) */
    int8_t cand_placed[3];      /* candidate_order k placed with no target (1; -1 failed; 0 not yet), */
    mp_plan_info cand_info[3];  /* its arena: adopt_placed_order and report_infeasible place the same orders */
    mp_rplan least;
    char ilp_failed[sizeof(mp_err)]; /* the solver found no plan in time (not an infeasibility proof) */
    int64_t no_plan_at;         /* a target at which the solver found no plan (0: none): none is sought below it */
    char no_plan_why[sizeof(mp_err)]; /* then: ilp_failed of that solve ("": its space was proven empty) */
    uint8_t *recomputed;        /* nvalues: recomputed by the order */
    int32_t nkept, nrecomputed, ndroppable; /* values (a value may have several groups in sp) */
    baseline_row rows[MP_RBASE_COUNT];
    double any_bound;           /* no plan that fits the usable budget recomputes less (mp_remat_any_plan_bound) */
    int32_t any_bound_step;     /* the step that gives it; -1: not computed, or no step exceeds the budget */
    bound_job bound;            /* computing them beside the planning */
    /* --batch max */
    bool batch_max;
    int64_t batch, batch_plain; /* largest batch that fits with recomputation, without */
    int probes;
    bool capped;
} plan;

/* The bound on every plan depends only on the graph and the usable budget,
 * so it is computed on a second thread while the plan is made (GLPK keeps an
 * environment per thread): on two cores its time is hidden. */
static void *any_bound_thread(void *arg)
{
    bound_job *j = arg;
    j->rc = mp_remat_any_plan_bound(j->rg, j->usable, ANY_BOUND_SECONDS, &j->cost, &j->step, &j->err);
    return NULL;
}

static void bound_start(plan *p)
{
    p->bound = (bound_job){.rg = &p->rg, .usable = p->usable, .step = -1};
    p->bound.running = pthread_create(&p->bound.thread, NULL, any_bound_thread, &p->bound) == 0;
    p->bound.started = true;
}

/* Waits for the bound (or computes it here when no thread could start);
 * before p->rg is freed. report: say why it failed. */
static int bound_finish(plan *p, bool report)
{
    if (!p->bound.started) return 0;
    if (p->bound.running) pthread_join(p->bound.thread, NULL);
    else any_bound_thread(&p->bound);
    p->bound.started = p->bound.running = false;
    p->any_bound = p->bound.cost, p->any_bound_step = p->bound.step;
    if (p->bound.rc && report) mp_cli_model_error(p->source, p->bound.err.msg);
    return p->bound.rc;
}

/* The solve proved that no plan of the ILP's space fits (a baseline's order was given). */
static bool ilp_space_empty(const plan *p) { return p->solved && p->status && !strcmp(p->status, "infeasible"); }

static double overhead_pct(const plan *p, double recompute_cost)
{
    return p->base.cost > 0 ? 100.0 * recompute_cost / p->base.cost : 0;
}

static void forget_runner(plan *p)
{
    if (p->have_runner) mp_rsched_free(&p->runner.s);
    p->have_runner = false;
}

static void least_orders_free(struct least_orders *l);

static void plan_free(plan *p)
{
    least_orders_free(p->least_orders); /* first: its thread reads the graph */
    p->least_orders = NULL;
    mp_rsched_free(&p->identity);
    mp_rsched_free(&p->order);
    forget_runner(p);
    if (p->have_spare) mp_rsched_free(&p->spare.s);
    if (p->have_rp) mp_rplan_free(&p->rp);
    if (p->have_least) mp_rplan_free(&p->least);
    if (p->have_hint) mp_rplan_free(&p->hint);
    if (p->have_ahead) mp_rsched_free(&p->ahead_order);
    if (p->have_sp) mp_rspace_free(&p->sp);
    mp_rgraph_free(&p->rg);
    free(p->recomputed);
    if (p->onnx) mp_cli_step_free(&p->step);
    p->have_rp = p->have_hint = p->have_ahead = p->have_sp = p->have_base = false;
    p->have_least = p->have_space_floor = p->have_base_least = false;
    p->recomputed = NULL;
    p->onnx = false;
}

/* A value's name: the IR value's for a model, its producer's id for a graph file. */
static const char *value_name(const plan *p, int32_t v)
{
    if (p->onnx && p->rg.value_id[v] >= 0) return p->step.g->values[p->rg.value_id[v]].name;
    return p->rg.producer[v] >= 0 ? p->rg.node_name[p->rg.producer[v]] : "(resident)";
}

static mp_rsolve_opts solve_opts(const plan *p, const mp_rplan *warm)
{
    mp_rsolve_opts so = mp_rsolve_defaults();
    so.time_limit = p->time_limit;
    so.progress = isatty(STDERR_FILENO); /* long solves show progress on a terminal only */
    so.warm = warm;
    return so;
}

/* The least peak of the space (and a bound below it), searched once. */
static int least_peak(plan *p, mp_err *err)
{
    if (p->have_least) return 0;
    mp_rsolve_opts so = solve_opts(p, NULL);
    /* at least 1.5 s, the default before the solve's was cut to 1.2 s: the exit-3 line's range and the
     * fallback orders come from this search, so more time makes a budget it states likelier to plan */
    so.time_limit = fmax(so.time_limit, LEAST_PEAK_MIN_SECONDS);
    if (p->no_plan_at && !p->no_plan_why[0]) so.proven_above = p->no_plan_at; /* the solve proved none there */
    if (mp_remat_min_peak_range(&p->sp, &so, &p->least_peak, &p->least_lower, &p->least, err)) return -1;
    p->have_least = true;
    return 0;
}

/* Whether the space's least-peak plan may fit t. Its search takes seconds, so
 * it runs only when the space's LP bound (a fraction of that time) leaves
 * room: not above t, allowing GLPK's relative tolerance (about 1e-7). */
static int least_peak_may_fit(plan *p, int64_t t, bool *may, mp_err *err)
{
    if (p->have_least) {
        *may = p->least_peak <= t;
        return 0;
    }
    if (!p->have_space_floor) {
        mp_rsolve_opts so = solve_opts(p, NULL);
        so.progress = false;
        /* the LP takes 0.05-0.65 s on the models measured; where it does not finish (the unrolled RNNs, MaxViT)
         * the search runs anyway, 0.7 s later */
        so.time_limit = fmin(so.time_limit, SPACE_BOUND_SECONDS);
        if (mp_remat_min_peak_bound(&p->sp, &so, &p->space_floor, err)) return -1;
        p->have_space_floor = true;
    }
    *may = (double)p->space_floor * (1 - 1e-6) <= (double)t;
    return 0;
}

static bool plan_recordable(const mp_cli_opts *o);
static void plan_opts_of(const plan *p, const mp_cli_opts *o, mp_plan_opts *po);
static void round_opts(const plan *p, const mp_cli_opts *o, int round, mp_plan_opts *po);

/* Baseline b's order under target t, recounted into c; false when greedy or
 * lookahead cannot fit t (or the count fails). */
static bool baseline_count(const mp_rgraph *rg, mp_rbaseline b, int64_t t, mp_rcount *c)
{
    mp_err err = {{0}};
    mp_rsched s;
    if (mp_remat_baseline(rg, b, t, &s, &err)) return false;
    bool ok = mp_rsched_count(rg, &s, c, &err) == 0;
    mp_rsched_free(&s);
    return ok;
}

/* Its recounted peak; -1 when it does not fit. */
static int64_t baseline_peak(const mp_rgraph *rg, mp_rbaseline b, int64_t t)
{
    mp_rcount c;
    return baseline_count(rg, b, t, &c) ? c.peak_bytes : -1;
}

/* The least peak a baseline reaches: the ILP strategy takes a baseline's
 * order when it fits (use_cheaper_baseline), so these count toward the
 * smallest feasible budget. all and sqrt have one order each; greedy's and
 * lookahead's least targets are bisected below those (they evict more as the
 * target falls). stop (NULL, or set by a thread that no longer needs it)
 * ends the bisections early: what is returned is then not the least. */
static int64_t least_baseline_peak(const mp_rgraph *rg, const atomic_bool *stop, mp_rbaseline *which,
                                   int64_t *target)
{
    int64_t best = INT64_MAX;
    for (int b = MP_RBASE_ALL; b <= MP_RBASE_SQRT; b++) {
        int64_t peak = baseline_peak(rg, (mp_rbaseline)b, INT64_MAX);
        if (peak >= 0 && peak < best) best = peak, *which = (mp_rbaseline)b, *target = INT64_MAX;
    }
    /* the least target greedy and lookahead fit (their orders depend on the
     * target, so the target, not the peak reached, is what works given back) */
    for (int b = MP_RBASE_GREEDY; b <= MP_RBASE_LOOKAHEAD; b++) {
        int64_t lo = 0, top = best - 1, at = baseline_peak(rg, (mp_rbaseline)b, top);
        if (at < 0 || at > top) continue;
        while (top - lo > 1 && !(stop && atomic_load(stop))) {
            int64_t mid = lo + (top - lo) / 2, peak = baseline_peak(rg, (mp_rbaseline)b, mid);
            if (peak >= 0 && peak <= mid) top = mid;
            else lo = mid;
        }
        best = top, *which = (mp_rbaseline)b, *target = top;
    }
    return best;
}

/* least_baseline_peak, once per plan (the bisections are not free). */
static void least_baseline(plan *p)
{
    if (p->have_base_least) return;
    p->have_base_least = true;
    mp_rbaseline which = MP_RBASE_NONE;
    int64_t target = 0;
    p->base_least = least_baseline_peak(&p->rg, NULL, &which, &target);
    p->base_least_of = which;
    p->base_least_target = target;
}

/* The orders the exit-3 line places and fit_arena falls back to: 0 the
 * least-peak plan's (call least_peak first), 1 the least baseline's, 2 store
 * everything. *from as plan.order_from. */
static int candidate_order(plan *p, int k, mp_rsched *s, int *from, mp_err *err)
{
    if (k == 0) {
        *from = -1;
        return mp_rplan_emit(&p->sp, &p->least, s, err);
    }
    if (k == 1) {
        least_baseline(p);
        *from = (int)p->base_least_of;
        return p->base_least == INT64_MAX ? -1 : mp_remat_baseline(&p->rg, p->base_least_of, p->base_least_target, s, err);
    }
    *from = MP_RBASE_NONE;
    return mp_rsched_identity(&p->rg, s, err); /* a copy of p->identity the caller owns */
}

/* candidate_order k's order s placed with no target, once: the placement's
 * work is fixed, so the exit-3 line is given the arena the fallback measured
 * (0.4 s of GPT-2's 2.4 s just below its smallest budget). */
static int place_candidate(plan *p, int k, const mp_rsched *s, mp_plan_info *info, mp_err *err)
{
    if (!p->cand_placed[k]) {
        mp_plan_opts po;
        plan_opts_of(p, p->o, &po);
        po.arena_target = 0;
        memset(&p->cand_info[k], 0, sizeof p->cand_info[k]);
        p->cand_placed[k] = mp_plan_measure(p->o->model, &po, s, &p->cand_info[k], err) ? -1 : 1;
    } else if (p->cand_placed[k] < 0)
        mp_fail(err, "the order could not be placed");
    *info = p->cand_info[k];
    return p->cand_placed[k] > 0 ? 0 : -1;
}

/* The exit-3 line: the budget, the smallest feasible budget, what dominates it. */
static int report_infeasible(plan *p, const char *why)
{
    mp_err err = {{0}};
    /* The least of the space's least peak and a baseline's: the ILP strategy takes a baseline's order when it
     * fits (the line states the ILP strategy's smallest budget under every strategy). The space's is searched
     * (seconds) only when its LP bound leaves it room to go below the baselines'. */
    least_baseline(p);
    bool space;
    if (least_peak_may_fit(p, p->base_least - 1, &space, &err) || (space && least_peak(p, &err))) {
        mp_cli_model_error(p->source, err.msg);
        return MP_EXIT_USAGE;
    }
    int64_t min_peak = INT64_MAX, lower = INT64_MAX;
    mp_rsched o;
    mp_rcount c = {0};
    int from, k = -1; /* candidate_order's, of o */
    bool have = false;
    if (space) {
        min_peak = p->least_peak, lower = p->least_lower;
        have = candidate_order(p, k = 0, &o, &from, &err) == 0 && mp_rsched_count(&p->rg, &o, &c, &err) == 0;
        if (have && c.peak_bytes > min_peak) min_peak = c.peak_bytes; /* the recount is the referee */
    }
    if (p->base_least < min_peak) {
        if (have) mp_rsched_free(&o);
        have = candidate_order(p, k = 1, &o, &from, &err) == 0 && mp_rsched_count(&p->rg, &o, &c, &err) == 0;
        min_peak = p->base_least, lower = lower < min_peak ? lower : min_peak;
    }
    /* the live set at that order's peak, and the resident part of it */
    int32_t at = have && c.peak_entry >= 0 && c.peak_entry < o.n ? o.node[c.peak_entry] : -1;
    int64_t footprint = 0; /* what the node at the peak needs at once: its inputs and outputs */
    for (int32_t k = at >= 0 ? p->rg.in_off[at] : 0; at >= 0 && k < p->rg.in_off[at + 1]; k++)
        if (p->rg.producer[p->rg.in[k]] >= 0) footprint += p->rg.bytes[p->rg.in[k]];
    for (int32_t k = at >= 0 ? p->rg.out_off[at] : 0; at >= 0 && k < p->rg.out_off[at + 1]; k++)
        footprint += p->rg.bytes[p->rg.out[k]];
    int64_t resident = 0, params_state = 0;
    for (int32_t v = 0; v < p->rg.nvalues; v++) {
        if (p->rg.producer[v] >= 0) continue;
        resident += p->rg.bytes[v];
        if (p->onnx && p->rg.value_id[v] >= 0) {
            mp_mem_cat cat = (mp_mem_cat)p->step.mem.cat[p->rg.value_id[v]];
            if (cat == MP_MEM_PARAMS || cat == MP_MEM_OPT_STATE) params_state += p->rg.bytes[v];
        }
    }
    /* that order placed: when its arena fragments past its live bytes, the
     * smallest arena placed is what is proven feasible (the plan must fit as
     * placed), that order's or store-everything's, whose live bytes are more
     * but whose placement may pack tighter */
    if (have && p->onnx && plan_recordable(p->o)) {
        mp_plan_info info = {0};
        if (place_candidate(p, k, &o, &info, &err) == 0 && info.arena_bytes > min_peak) {
            if (!p->best_arena || info.arena_bytes < p->best_arena) p->best_arena = info.arena_bytes;
            if (info.arena_bytes - min_peak > p->slack) p->slack = info.arena_bytes - min_peak;
            if (place_candidate(p, 2, &p->identity, &info, &err) == 0 && info.arena_bytes < p->best_arena)
                p->best_arena = info.arena_bytes;
        }
    }
    if (have) mp_rsched_free(&o);
    char dom[768];
    int32_t floor_at = -1;
    int64_t floor_any = mp_remat_any_plan_least_peak(&p->rg, &floor_at); /* what every order needs, and where */
    if (p->usable <= 0)
        snprintf(dom, sizeof dom, "the reserve alone (%.2f MiB, --reserve) takes the whole budget", mib(p->reserve));
    else if (p->onnx && params_state > p->usable)
        snprintf(dom, sizeof dom, "parameters + optimizer state alone take %.2f MiB", mib(params_state));
    else if (resident > p->usable)
        snprintf(dom, sizeof dom, "resident tensors (parameters, optimizer state, buffers, inputs) alone take %.2f MiB",
                 mib(resident));
    else if (floor_any >= min_peak) /* proven for every order */
        snprintf(dom, sizeof dom, "the least peak any plan reaches is %.2f MiB, at node %.60s (its inputs and "
                 "outputs take %.2f MiB, resident tensors %.2f MiB)", mib(min_peak),
                 at >= 0 ? p->rg.node_name[at] : "?",
                 mib(footprint), mib(resident));
    else /* the least found; what any order needs is less (docs/ilp.md, "A bound on every plan") */
        snprintf(dom, sizeof dom, "the least peak of memplan's plans is %.2f MiB, at node %.60s (its inputs and "
                 "outputs take %.2f MiB, resident tensors %.2f MiB); no order goes below %.2f MiB (at node %.60s)",
                 mib(min_peak), at >= 0 ? p->rg.node_name[at] : "?", mib(footprint), mib(resident),
                 mib(floor_any > 0 ? floor_any : 0), floor_at >= 0 ? p->rg.node_name[floor_at] : "?");
    /* parameter gradients waiting for the optimizer at that peak or where every order peaks: updates inside the
     * backward would free them */
    int64_t waiting = 0;
    int32_t wait_at = -1;
    for (int k = 0; k < 2 && p->onnx && p->step.training && !p->o->optimizer_in_backward && p->usable > 0; k++) {
        int32_t t = k ? floor_at : at;
        int64_t sum = 0;
        for (int32_t v = 0; t >= 0 && v < p->rg.nvalues; v++)
            if (p->rg.producer[v] >= 0 && p->rg.producer[v] <= t && t <= p->sp.last_use[v] &&
                p->rg.value_id[v] >= 0 && p->step.g->values[p->rg.value_id[v]].role == MP_ROLE_GRAD)
                sum += p->rg.bytes[v];
        if (sum > waiting) waiting = sum, wait_at = t;
    }
    if (waiting > 0) {
        size_t len = strlen(dom);
        snprintf(dom + len, sizeof dom - len, "; at node %.60s, gradients waiting for their updates take %.2f MiB "
                 "(--optimizer-in-backward frees each at its update)", p->rg.node_name[wait_at], mib(waiting));
    }
    if (p->slack > 0) { /* the placement, not the live bytes, made it infeasible */
        size_t len = strlen(dom);
        snprintf(dom + len, sizeof dom - len, "; the arena's placement needs %.2f MiB more than the live bytes",
                 mib(p->slack));
    }
    /* Live bytes bound any plan from below. When the placement fragments, the
     * smallest arena placed so far is what is proven feasible above. */
    int64_t smallest = min_peak, floor_budget = lower, extra = p->reserve + p->slack;
    if (!mp_add_ok(min_peak, extra, &smallest)) smallest = INT64_MAX;
    if (p->slack > 0 && p->best_arena > 0 && !mp_add_ok(p->best_arena, p->reserve, &smallest)) smallest = INT64_MAX;
    if (!mp_add_ok(lower, p->slack > 0 ? p->reserve : extra, &floor_budget)) floor_budget = INT64_MAX;
    const char *how = p->strategy == STRATEGY_ILP ? "" : ", with --strategy ilp";
    if (floor_budget >= smallest)
        mp_cli_error("%s: budget %lld bytes (%.2f MiB; usable %.2f MiB after a %.2f MiB reserve) %s: the smallest "
                     "feasible budget is %lld bytes (%.2f MiB%s); %s",
                     p->source, (long long)p->budget, mib(p->budget), mib(p->usable), mib(p->reserve), why,
                     (long long)smallest, mib(smallest), how, dom);
    else /* the search ran out of time, or the placement fragments: say what is proven on both sides */
        mp_cli_error("%s: budget %lld bytes (%.2f MiB; usable %.2f MiB after a %.2f MiB reserve) %s: the smallest "
                     "feasible budget lies between %lld and %lld bytes (%.2f-%.2f MiB%s; %s); %s",
                     p->source, (long long)p->budget, mib(p->budget), mib(p->usable), mib(p->reserve), why,
                     (long long)floor_budget, (long long)smallest, mib(floor_budget), mib(smallest), how,
                     p->slack > 0 ? "the placement fragments: the upper end is the smallest arena placed"
                                  : "the search stopped at the time limit, raise --time-limit to narrow it",
                     dom);
    return MP_EXIT_INFEASIBLE;
}

/* Emits the ILP's plan p->rp and recounts it, then rids it of the
 * recomputations the budget does not need: a plan of a time-limited solve,
 * or a recipe's rerun of an intermediate that could stay, which the space
 * does not hold (mp_rsched_prune). */
static int emit_ilp_plan(plan *p, bool *fits)
{
    mp_err err = {{0}};
    int made = mp_rplan_order(&p->sp, &p->rp, p->target, &p->order, &p->count, &p->pruned, &err);
    if (made < 0) {
        mp_cli_model_error(p->source, err.msg);
        return -1;
    }
    if (!made) {
        mp_cli_model_error(p->source, "the solver's plan recounts above the usable budget: refusing it (a bug: "
                           "please report it)");
        return -1;
    }
    *fits = true;
    return 0;
}

/* Placements beside the planning (the solver's plans, the fallbacks' next)
 * run on a second thread only where a second core runs it: on one core the
 * thread would take the solver's time. */
static bool two_cores(void) { return sysconf(_SC_NPROCESSORS_ONLN) >= 2; }

/* A re-plan's warm start: the ILP's plan that fragmented (keep_hint),
 * repaired to this target. 1: made (warm), 0: none, -1: error (err). */
static int repaired_hint(plan *p, mp_rplan *warm, mp_err *err)
{
    int64_t peak;
    if (!p->have_hint) return 0;
    if (mp_rplan_init(&p->sp, warm, err)) return -1;
    return mp_remat_repair(&p->sp, p->target, &p->hint, warm->choice, &peak, err);
}

/* The ILP's plan: solved, emitted, recounted. A space proven empty leaves
 * the plan to a baseline's order, or to rescue_least_peak when none fits. */
static int plan_ilp(plan *p, bool *fits)
{
    mp_err err = {{0}};
    *fits = false;
    if (p->no_plan_at && p->target <= p->no_plan_at) { /* a re-plan below a target with no plan: none here either */
        snprintf(p->ilp_failed, sizeof p->ilp_failed, "%s", p->no_plan_why);
        p->solved = !p->no_plan_why[0]; /* p->info still holds that solve */
        p->status = p->solved ? "infeasible" : p->info.stalled ? "stalled" : "timeout";
        return 0;
    }
    /* a re-plan starts from the last plan, repaired to this target: its solve
     * is given a quarter of the time (measured: the same plans, docs/cli.md) */
    mp_rplan warm = {0};
    int repaired = repaired_hint(p, &warm, &err);
    if (repaired < 0) {
        mp_rplan_free(&warm);
        mp_cli_model_error(p->source, err.msg);
        return -1;
    }
    mp_rsolve_opts so = solve_opts(p, repaired ? &warm : NULL);
    if (repaired) so.time_limit *= REPLAN_TIME_SHARE;
    place_ahead *ahead = NULL;
    if (p->place_o && two_cores()) { /* placed as fit_arena will place it */
        place_ahead_cfg cfg = {.model = p->place_o->model, .sp = &p->sp, .target = p->target};
        round_opts(p, p->place_o, p->round, &cfg.po);
        ahead = place_ahead_start(&cfg);
    }
    so.on_plan = ahead ? place_ahead_offer : NULL;
    so.on_plan_ctx = ahead;
    memset(&p->rp, 0, sizeof p->rp);
    int failed = mp_remat_solve(&p->sp, p->target, &so, &p->rp, &p->info, &err);
    mp_rplan_free(&warm);
    if (ahead) {
        const int32_t *final = failed || p->info.status == MP_RSOLVE_INFEASIBLE ? NULL : p->rp.choice;
        if (p->have_ahead) mp_rsched_free(&p->ahead_order);
        p->have_ahead = place_ahead_finish(ahead, final, &p->ahead_order, &p->ahead_info);
    }
    if (failed) {
        snprintf(p->ilp_failed, sizeof p->ilp_failed, "%s", err.msg); /* a baseline may still fit */
        snprintf(p->no_plan_why, sizeof p->no_plan_why, "%s", err.msg);
        p->no_plan_at = p->target;
        p->status = p->info.stalled ? "stalled" : "timeout";
        return 0;
    }
    p->have_rp = true;
    p->solved = true;
    p->status = p->info.status == MP_RSOLVE_OPTIMAL ? "optimal" : "feasible";
    if (p->info.status == MP_RSOLVE_INFEASIBLE) {
        p->status = "infeasible";
        p->no_plan_why[0] = 0;
        p->no_plan_at = p->target;
        return 0;
    }
    return emit_ilp_plan(p, fits);
}

/* When the space was proven empty, or the solver found no plan in time, and
 * no baseline fits: GLPK's proof holds within its tolerances, and a search
 * stopped by the clock proves nothing, so the least-peak plan, searched for
 * the exit-3 line anyway, is tried; when it fits, a solve warm-started from
 * it, or itself. (Without it a budget the exit-3 line stated feasible could
 * fail on a loaded machine, its solve out of time.) */
static int rescue_least_peak(plan *p, bool *fits)
{
    mp_err err = {{0}};
    if (least_peak(p, &err)) goto fail;
    if (p->least_peak > p->target) return 0;
    mp_rsolve_opts warm = solve_opts(p, &p->least);
    mp_rplan_free(&p->rp);
    p->have_rp = false;
    if (mp_remat_solve(&p->sp, p->target, &warm, &p->rp, &p->info, &err) || p->info.status == MP_RSOLVE_INFEASIBLE) {
        mp_rplan_free(&p->rp);
        if (mp_rplan_init(&p->sp, &p->rp, &err)) goto fail; /* the least-peak plan fits: use it */
        memcpy(p->rp.choice, p->least.choice, (size_t)p->sp.ndrop * sizeof *p->rp.choice);
        p->status = "min-peak";
    } else {
        p->status = p->info.status == MP_RSOLVE_OPTIMAL ? "optimal" : "feasible";
        p->solved = true; /* warm-started, it found a plan where the first solve found none in time */
        p->ilp_failed[0] = 0;
    }
    p->have_rp = true;
    return emit_ilp_plan(p, fits);
fail:
    mp_cli_model_error(p->source, err.msg);
    return -1;
}

/* Baseline b's order for target t, rid of the recomputations target `within`
 * does not need (mp_rsched_prune) and recounted: 1; 0 when the baseline
 * makes none (greedy, lookahead: no fit); -1 on an error (err). */
static int pruned_baseline(const mp_rgraph *rg, mp_rbaseline b, int64_t t, int64_t within, const atomic_bool *stop,
                           mp_rsched *s, mp_rcount *c, int32_t *pruned, mp_err *err)
{
    if (mp_remat_baseline(rg, b, t, s, err)) return 0;
    *pruned = 0;
    if (mp_rsched_prune_with(rg, s, within, &(mp_prune_opts){.stop = stop}, pruned, err) ||
        mp_rsched_count(rg, s, c, err)) {
        mp_rsched_free(s);
        return -1;
    }
    return 1;
}

/* Greedy and lookahead are not monotone in their target: one may miss this
 * budget yet fit a lower one, the least of which the exit-3 line states as
 * feasible. So when nothing else fits, that order (rid of the
 * recomputations this budget does not need) is given: a budget above one
 * stated feasible never fails. */
static int rescue_least_baseline(plan *p, bool *fits)
{
    mp_err err = {{0}};
    least_baseline(p);
    if (p->base_least > p->target) return 0;
    mp_rsched s;
    mp_rcount c;
    int32_t pruned;
    if (pruned_baseline(&p->rg, p->base_least_of, p->base_least_target, p->target, NULL, &s, &c, &pruned, &err) != 1)
        goto fail;
    if (c.peak_bytes > p->target) {
        mp_rsched_free(&s);
        return 0;
    }
    p->order = s;
    p->count = c;
    p->order_from = p->base_least_of;
    p->pruned = pruned;
    *fits = true;
    return 0;
fail:
    mp_cli_model_error(p->source, err.msg);
    return -1;
}

/* Fills recomputed[] from the order and counts kept (droppable, not recomputed) values. */
static int mark_recomputed(plan *p)
{
    p->recomputed = calloc((size_t)p->rg.nvalues + 1, 1);
    if (!p->recomputed) {
        mp_cli_error("out of memory");
        return -1;
    }
    for (int32_t e = 0; e < p->order.n; e++) {
        if (!p->order.recompute[e]) continue;
        int32_t u = p->order.node[e];
        for (int32_t k = p->rg.out_off[u]; k < p->rg.out_off[u + 1]; k++) p->recomputed[p->rg.out[k]] = 1;
    }
    p->nkept = p->nrecomputed = p->ndroppable = 0;
    for (int32_t v = 0; v < p->rg.nvalues; v++) {
        p->nrecomputed += p->recomputed[v];
        p->ndroppable += p->sp.drop_index[v] >= 0;
        p->nkept += p->sp.drop_index[v] >= 0 && !p->recomputed[v];
    }
    return 0;
}

/* Keeps order s (counted c) as the runner-up when it costs less than the one
 * kept, else frees it. */
static void offer_runner(plan *p, mp_rsched *s, const mp_rcount *c, int from, int32_t pruned)
{
    if (p->have_runner && c->recompute_cost >= p->runner.c.recompute_cost) {
        mp_rsched_free(s);
        return;
    }
    forget_runner(p);
    p->runner = (fallback){.s = *s, .c = *c, .from = from, .pruned = pruned, .work = ARENA_WORK / 8};
    p->have_runner = true;
}

/* The ILP is optimal over its decision space (docs/ilp.md), which does not
 * hold every order: a baseline's order (all, sqrt, greedy, lookahead), rid of the
 * recomputations this budget does not need (mp_rsched_prune) and recounted,
 * that fits and costs less replaces the ILP's plan, so the order given is
 * never worse than the baselines shown next to it. */
static int use_cheaper_baseline(plan *p, bool *fits)
{
    mp_err err = {{0}};
    for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++) {
        mp_rsched s;
        mp_rcount c;
        int32_t pruned;
        int made = pruned_baseline(&p->rg, (mp_rbaseline)b, p->target, p->target, NULL, &s, &c, &pruned, &err);
        if (made == 0) continue; /* greedy, lookahead: no fit */
        if (made < 0) {
            mp_cli_model_error(p->source, err.msg);
            return -1;
        }
        if (c.peak_bytes <= p->target && (!*fits || c.recompute_cost < p->count.recompute_cost * (1 - 1e-9))) {
            if (*fits) offer_runner(p, &p->order, &p->count, p->order_from, p->pruned);
            p->order = s;
            p->count = c;
            p->order_from = b;
            p->pruned = pruned;
            *fits = true;
        } else if (c.peak_bytes <= p->target) {
            offer_runner(p, &s, &c, b, pruned);
        } else {
            mp_rsched_free(&s);
        }
    }
    return 0;
}

/* The store-everything order and its count, the budget, the usable budget. */
static int budget_of(plan *p)
{
    const mp_cli_opts *o = p->o;
    mp_err err = {{0}};
    if (!p->have_base &&
        (mp_rsched_identity(&p->rg, &p->identity, &err) || mp_rsched_count(&p->rg, &p->identity, &p->base, &err))) {
        mp_cli_model_error(p->source, err.msg);
        return -1;
    }
    p->have_base = true;
    if (o->budget_pct > 0) /* exact for whole percentages: the product fits a long double's 64-bit mantissa */
        p->budget = (int64_t)ceill((long double)p->base.peak_bytes * o->budget_pct / 100.0L);
    else if (o->budget_bytes >= 0) p->budget = o->budget_bytes;
    else p->budget = p->gpu->memory_bytes;
    p->reserve = o->reserve_bytes >= 0 ? o->reserve_bytes : p->onnx ? DEFAULT_RESERVE : 0;
    p->usable = p->budget - p->reserve;
    return 0;
}

/* Plans p->rg: budget, usable, strategy, baselines. MP_EXIT_OK, MP_EXIT_INFEASIBLE
 * (reported unless quiet), or MP_EXIT_USAGE (reported). */
static int plan_graph(plan *p, bool quiet, bool baselines)
{
    const mp_cli_opts *o = p->o;
    mp_err err = {{0}};
    if (budget_of(p)) return MP_EXIT_USAGE;
    p->target = p->usable - p->slack;
    p->strategy = o->strategy >= 0 ? o->strategy : STRATEGY_ILP;
    p->time_limit = o->time_limit > 0 ? o->time_limit : DEFAULT_TIME_LIMIT;
    if (!p->have_sp && mp_rspace_build(&p->rg, NULL, &p->sp, &err)) {
        mp_cli_model_error(p->source, err.msg);
        return MP_EXIT_USAGE;
    }
    p->have_sp = true;

    bool fits = false;
    if (p->usable <= 0) {
        if (quiet) return MP_EXIT_INFEASIBLE;
        return report_infeasible(p, "leaves nothing after the reserve");
    }
    p->order_from = -1;
    p->pruned = 0;
    if (p->strategy == STRATEGY_ILP) {
        if (plan_ilp(p, &fits) || use_cheaper_baseline(p, &fits)) return MP_EXIT_USAGE;
        bool may = false;
        if (!fits && (ilp_space_empty(p) || p->ilp_failed[0]) && least_peak_may_fit(p, p->target, &may, &err)) {
            mp_cli_model_error(p->source, err.msg);
            return MP_EXIT_USAGE;
        }
        if (may && rescue_least_peak(p, &fits)) return MP_EXIT_USAGE;
        if (!fits && (ilp_space_empty(p) || p->ilp_failed[0]) && rescue_least_baseline(p, &fits)) return MP_EXIT_USAGE;
        if (!fits && p->ilp_failed[0]) /* nothing found in time: say what is proven about the budget */
            return quiet ? MP_EXIT_INFEASIBLE : report_infeasible(p, "cannot be met by any plan found within the time limit");
    } else {
        mp_rbaseline b = (mp_rbaseline)(p->strategy - 1);
        p->status = "baseline";
        if (mp_remat_baseline(&p->rg, b, p->target, &p->order, &err) == 0) {
            if (mp_rsched_count(&p->rg, &p->order, &p->count, &err)) {
                mp_cli_model_error(p->source, err.msg);
                return MP_EXIT_USAGE;
            }
            fits = p->count.peak_bytes <= p->target;
            if (!fits) mp_rsched_free(&p->order);
        } else if (b != MP_RBASE_GREEDY && b != MP_RBASE_LOOKAHEAD) { /* these fail when they cannot fit; others: bugs */
            mp_cli_model_error(p->source, err.msg);
            return MP_EXIT_USAGE;
        }
    }
    if (!fits) {
        if (quiet) return MP_EXIT_INFEASIBLE;
        char why[160];
        if (p->strategy == STRATEGY_ILP) snprintf(why, sizeof why, "cannot be met");
        else snprintf(why, sizeof why, "cannot be met by --strategy %s", mp_cli_strategy_names[p->strategy]);
        return report_infeasible(p, why);
    }
    if (mark_recomputed(p)) return MP_EXIT_USAGE;
    for (int b = 0; baselines && b < MP_RBASE_COUNT; b++) {
        mp_rcount c;
        baseline_row *r = &p->rows[b];
        r->ok = baseline_count(&p->rg, (mp_rbaseline)b, p->target, &c);
        if (r->ok) {
            r->peak = c.peak_bytes;
            r->overhead_pct = overhead_pct(p, c.recompute_cost);
        }
    }
    return MP_EXIT_OK;
}

/* Loads the model at o's batch (or the graph file) into p->rg. */
static int load_graph(plan *p, const mp_cli_opts *o)
{
    mp_err err = {{0}};
    if (o->graph_json) {
        p->source = o->graph_json;
        if (mp_rgraph_from_json(o->graph_json, &p->rg, &err)) {
            mp_cli_model_error(o->graph_json, err.msg);
            return -1;
        }
        return 0;
    }
    p->source = o->model;
    if (mp_cli_step_load(o, &p->step)) return -1;
    p->onnx = true;
    /* the step memplan's runtime executes: the plan's outputs, lifetimes again */
    if (!o->inference) {
        mp_memory_free(&p->step.mem);
        if (mp_plan_step_outputs(p->step.g, &err) || mp_memory_analyze(p->step.g, &p->step.sched, &p->step.mem, &err)) {
            memset(&p->step.mem, 0, sizeof p->step.mem);
            mp_cli_model_error(o->model, err.msg);
            return -1;
        }
    }
    if (mp_rgraph_from_training(p->step.g, &p->step.sched, &p->step.mem.lt, p->gpu, &p->rg, &err)) {
        mp_cli_model_error(o->model, err.msg);
        return -1;
    }
    return 0;
}

/* ---- output ---------------------------------------------------------------------------- */

static const char *fits_str(const plan *p, const baseline_row *r)
{
    return !r->ok ? "fails" : r->peak <= p->usable ? "yes" : "no";
}

static void print_plan_text(FILE *f, const plan *p)
{
    char pruned[96] = "";
    if (p->pruned)
        snprintf(pruned, sizeof pruned, " (%sless %d recomputations this budget does not need)",
                 p->order_from >= 0 ? "" : "the solver's plan ", (int)p->pruned);
    if (p->batch_max) {
        fprintf(f, "%-18s%lld with recomputation (overhead %.2f %%), %lld without%s\n", "largest batch",
                (long long)p->batch, overhead_pct(p, p->count.recompute_cost), (long long)p->batch_plain,
                p->capped ? " (the search stops at 2^20)" : "");
        if (p->batch_plain == 0) fprintf(f, "%-18s%s\n", "", "(even batch 1 needs recomputation)");
    }
    fprintf(f, "%-18s%.2f MiB (%lld bytes)\n", "budget", mib(p->budget), (long long)p->budget);
    fprintf(f, "%-18s%.2f MiB\n", "reserve", mib(p->reserve));
    fprintf(f, "%-18s%.2f MiB\n", "usable", mib(p->usable));
    if (p->gpu) fprintf(f, "%-18s%s (%s)\n", "gpu", p->gpu->name, p->gpu->full_name);
    if (p->placed_fallback)
        fprintf(f, "%-18s%s: the ILP's plans fragmented past the budget when placed; %s's order fits as placed\n",
                "strategy", mp_cli_strategy_names[p->strategy],
                p->order_from >= 0 ? mp_rbaseline_names[p->order_from] : "the least-peak plan");
    else if (p->order_from >= 0)
        fprintf(f, "%-18s%s: %s's order%s %s, so it is the one given\n", "strategy", mp_cli_strategy_names[p->strategy],
                mp_rbaseline_names[p->order_from], pruned,
                !p->solved && p->info.stalled ? "fits where the ILP found no plan (GLPK stalled)"
                : !p->solved                  ? "fits where the ILP found no plan in time"
                : ilp_space_empty(p)          ? "fits where the ILP's decision space has no plan"
                                              : "is cheaper than the ILP's plan");
    else
        fprintf(f, "%-18s%s%s\n", "strategy", mp_cli_strategy_names[p->strategy], pruned);
    fprintf(f, "%-18s%.2f MiB (store everything: %.2f MiB)\n", "planned peak", mib(p->count.peak_bytes),
            mib(p->base.peak_bytes));
    if (p->arena.arena_bytes > 0)
        fprintf(f, "%-18s%.2f MiB (%lld bytes: every tensor at a fixed offset; live-bytes lower bound %.2f MiB, "
                "%.4fx)%s\n", "arena", mib(p->arena.arena_bytes), (long long)p->arena.arena_bytes,
                mib(p->arena.lower_bound), p->arena.lower_bound ? (double)p->arena.arena_bytes / p->arena.lower_bound : 1.0,
                p->slack ? " (planned below the usable budget: the first placement fragmented)" : "");
    if (p->onnx) /* seconds from the cost model */
        fprintf(f, "%-18s%.2f %% of the step time (%.3f of %.3f ms)\n", "recompute",
                overhead_pct(p, p->count.recompute_cost), 1e3 * p->count.recompute_cost, 1e3 * p->base.cost);
    else /* the file's own cost units */
        fprintf(f, "%-18s%.2f %% of the step cost (%.6g of %.6g)\n", "recompute",
                overhead_pct(p, p->count.recompute_cost), p->count.recompute_cost, p->base.cost);
    fprintf(f, "%-18skept %d, recomputed %d (%d values could be dropped)\n", "values", (int)p->nkept,
            (int)p->nrecomputed, (int)p->ndroppable);
    if (ilp_space_empty(p))
        fprintf(f, "%-18sinfeasible in %.2f s: no plan of the ILP's decision space fits (docs/ilp.md)\n", "solver",
                p->info.seconds);
    else if (p->solved && !p->info.bounded)
        fprintf(f, "%-18s%s in %.2f s; its LP relaxation did not finish in the time limit, so no bound on the "
                "space's best (raise --time-limit)\n", "solver", p->status, p->info.seconds);
    else if (p->solved)
        fprintf(f, "%-18s%s in %.2f s, MIP gap %.2f %%, LP bound %.2f %% overhead%s\n", "solver", p->status,
                p->info.seconds, 100 * p->info.mip_gap, overhead_pct(p, p->info.lp_bound),
                p->order_from >= 0 || p->pruned ? " (bounds of the ILP's decision space, docs/ilp.md)" : "");
    else if (!strcmp(p->status, "timeout"))
        fprintf(f, "%-18stimeout: the solver found no plan in %.2f s (--time-limit)\n", "solver", p->time_limit);
    else if (!strcmp(p->status, "min-peak") && !p->placed_fallback)
        fprintf(f, "%-18smin-peak: the least-peak search's plan fits where the solver found none in %.2f s "
                "(--time-limit)\n", "solver", p->time_limit);
    else if (!strcmp(p->status, "stalled"))
        fprintf(f, "%-18sstalled: GLPK stopped on numerical trouble after %.2f s, before finding a plan\n", "solver",
                p->info.seconds);
    else if (p->placed_fallback)
        fprintf(f, "%-18s%s (its plans fragmented when placed: the order given is a fallback's)\n", "solver", p->status);
    else
        fprintf(f, "%-18s%s (no solver run)\n", "solver", p->status);
    if (p->any_bound_step >= 0)
        fprintf(f, "%-18s%.2f %% overhead: no plan that fits recomputes less (at %.60s; docs/ilp.md)\n", "any plan",
                overhead_pct(p, p->any_bound), p->rg.node_name[p->any_bound_step]);
    fprintf(f, "%-18s%14s %10s %6s\n", "compared", "peak (MiB)", "overhead", "fits");
    char chosen[32];
    snprintf(chosen, sizeof chosen, "plan (%s)", mp_cli_strategy_names[p->strategy]);
    fprintf(f, "  %-16s%14.2f %8.2f %% %6s\n", chosen, mib(p->count.peak_bytes),
            overhead_pct(p, p->count.recompute_cost), "yes");
    for (int b = 0; b < MP_RBASE_COUNT; b++) {
        const baseline_row *r = &p->rows[b];
        if (r->ok)
            fprintf(f, "  %-16s%14.2f %8.2f %% %6s\n", mp_rbaseline_names[b], mib(r->peak), r->overhead_pct,
                    fits_str(p, r));
        else
            fprintf(f, "  %-16s%14s %10s %6s\n", mp_rbaseline_names[b], "-", "-", "fails");
    }
    if (p->placed_fallback) /* a row may fit in live bytes and still be cheaper: its arena did not fit */
        fprintf(f, "  (fits: live bytes within the usable budget; the plan is the cheapest order tried whose arena "
                "fits as placed)\n");
}

static void json_names(mp_json *j, const plan *p, bool recomputed)
{
    mp_json_begin_array(j);
    if (recomputed) {
        for (int32_t v = 0; v < p->rg.nvalues; v++)
            if (p->recomputed[v]) mp_json_str(j, value_name(p, v));
    } else {
        for (int32_t v = 0; v < p->rg.nvalues; v++)
            if (p->sp.drop_index[v] >= 0 && !p->recomputed[v]) mp_json_str(j, value_name(p, v));
    }
    mp_json_end(j);
}

/* The planning members of the top-level object. */
static void plan_json(mp_json *j, const void *ctx)
{
    const plan *p = ctx;
    if (p->batch_max) {
        mp_json_key(j, "batch_max");
        mp_json_begin_object(j);
        mp_json_key(j, "batch");
        mp_json_int(j, p->batch);
        mp_json_key(j, "recompute_overhead_pct");
        mp_json_num(j, overhead_pct(p, p->count.recompute_cost));
        mp_json_key(j, "peak_bytes");
        mp_json_int(j, p->count.peak_bytes);
        mp_json_key(j, "batch_without_recompute");
        mp_json_int(j, p->batch_plain);
        mp_json_key(j, "capped");
        mp_json_bool(j, p->capped);
        mp_json_key(j, "probes");
        mp_json_int(j, p->probes);
        mp_json_end(j);
    }
    mp_json_key(j, "plan");
    mp_json_begin_object(j);
    mp_json_key(j, "budget_bytes");
    mp_json_int(j, p->budget);
    mp_json_key(j, "reserve_bytes");
    mp_json_int(j, p->reserve);
    mp_json_key(j, "usable_bytes");
    mp_json_int(j, p->usable);
    mp_json_key(j, "gpu");
    mp_json_str(j, p->gpu ? p->gpu->name : NULL);
    mp_json_key(j, "strategy");
    mp_json_str(j, mp_cli_strategy_names[p->strategy]);
    mp_json_key(j, "order_from"); /* "ilp", or the baseline whose order was cheaper */
    mp_json_str(j, p->order_from >= 0 ? mp_rbaseline_names[p->order_from] : mp_cli_strategy_names[p->strategy]);
    mp_json_key(j, "pruned_recomputations"); /* of the ILP's plan or that baseline's order: not needed */
    mp_json_int(j, p->pruned);
    mp_json_key(j, "peak_bytes");
    mp_json_int(j, p->count.peak_bytes);
    mp_json_key(j, "store_everything_peak_bytes");
    mp_json_int(j, p->base.peak_bytes);
    mp_json_key(j, "arena_bytes"); /* null: not placed (--graph-json, options a plan cannot record) */
    if (p->arena.arena_bytes > 0) mp_json_int(j, p->arena.arena_bytes);
    else mp_json_null(j);
    mp_json_key(j, "arena_lower_bound_bytes");
    if (p->arena.arena_bytes > 0) mp_json_int(j, p->arena.lower_bound);
    else mp_json_null(j);
    mp_json_key(j, "recompute_overhead_pct");
    mp_json_num(j, overhead_pct(p, p->count.recompute_cost));
    mp_json_key(j, "recompute_cost");
    mp_json_num(j, p->count.recompute_cost);
    mp_json_key(j, "step_cost");
    mp_json_num(j, p->base.cost);
    mp_json_key(j, "kept");
    json_names(j, p, false);
    mp_json_key(j, "recomputed");
    json_names(j, p, true);
    mp_json_end(j);
    mp_json_key(j, "solver");
    mp_json_begin_object(j);
    mp_json_key(j, "status");
    mp_json_str(j, p->status);
    mp_json_key(j, "seconds");
    if (p->solved) mp_json_num(j, p->info.seconds);
    else mp_json_null(j);
    mp_json_key(j, "mip_gap");
    if (p->solved && !ilp_space_empty(p) && p->info.bounded) mp_json_num(j, p->info.mip_gap);
    else mp_json_null(j);
    mp_json_key(j, "lp_bound");
    if (p->solved && !ilp_space_empty(p) && p->info.bounded) mp_json_num(j, p->info.lp_bound);
    else mp_json_null(j);
    mp_json_key(j, "any_plan_bound"); /* every plan's, not only the ILP space's (docs/ilp.md) */
    if (p->any_bound_step >= 0) mp_json_num(j, p->any_bound);
    else mp_json_null(j);
    mp_json_key(j, "any_plan_bound_node");
    mp_json_str(j, p->any_bound_step >= 0 ? p->rg.node_name[p->any_bound_step] : NULL);
    mp_json_end(j);
    mp_json_key(j, "baselines");
    mp_json_begin_object(j);
    for (int b = 0; b < MP_RBASE_COUNT; b++) {
        const baseline_row *r = &p->rows[b];
        mp_json_key(j, mp_rbaseline_names[b]);
        mp_json_begin_object(j);
        mp_json_key(j, "peak_bytes");
        if (r->ok) mp_json_int(j, r->peak);
        else mp_json_null(j);
        mp_json_key(j, "recompute_overhead_pct");
        if (r->ok) mp_json_num(j, r->overhead_pct);
        else mp_json_null(j);
        mp_json_key(j, "fits");
        mp_json_bool(j, r->ok && r->peak <= p->usable);
        mp_json_end(j);
    }
    mp_json_end(j);
}

/* A graph file has no memory analysis: a header of its own, then the plan. */
static int render_graph(FILE *f, const plan *p, bool json)
{
    int64_t resident = 0;
    for (int32_t v = 0; v < p->rg.nvalues; v++)
        if (p->rg.producer[v] < 0) resident += p->rg.bytes[v];
    if (!json) {
        fprintf(f, "%-18s%s\n", "graph", p->o->graph_json);
        fprintf(f, "%-18s%d (values %d, resident %.2f MiB)\n\n", "nodes", (int)p->rg.nnodes, (int)p->rg.nvalues,
                mib(resident));
        print_plan_text(f, p);
        return 0;
    }
    mp_json j;
    mp_json_init(&j, f, 2);
    mp_json_begin_object(&j);
    mp_json_key(&j, "memplan_version");
    mp_json_str(&j, MEMPLAN_VERSION);
    mp_json_key(&j, "command");
    mp_json_str(&j, "plan");
    mp_json_key(&j, "file");
    mp_json_str(&j, p->o->graph_json);
    mp_json_key(&j, "graph");
    mp_json_begin_object(&j);
    mp_json_key(&j, "nodes");
    mp_json_int(&j, p->rg.nnodes);
    mp_json_key(&j, "values");
    mp_json_int(&j, p->rg.nvalues);
    mp_json_key(&j, "resident_bytes");
    mp_json_int(&j, resident);
    mp_json_end(&j);
    plan_json(&j, p);
    mp_json_end(&j);
    return mp_json_finish(&j);
}

static int render(FILE *f, const void *ctx, bool json)
{
    plan *p = (plan *)ctx;
    if (!p->onnx) return render_graph(f, p, json);
    if (json) {
        p->step.json_extra = plan_json;
        p->step.json_extra_ctx = p;
        return mp_cli_step_render(f, &p->step, true);
    }
    if (mp_cli_step_render(f, &p->step, false)) return -1;
    fputc('\n', f);
    print_plan_text(f, p);
    return 0;
}

/* ---- --batch max ---------------------------------------------------------------------- */

/* Plans the model at batch b quietly: 1 fits (with recomputation), 0 does not, -1 error.
 * *plain: fits without recomputation. */
static int probe(plan *p, const mp_cli_opts *o, int64_t b, bool *plain)
{
    mp_cli_opts po = *o; /* shares o's strings; never freed */
    po.batch = b;
    plan q = {.o = &po, .gpu = p->gpu};
    p->probes++;
    int rc = -1;
    if (load_graph(&q, &po) == 0) {
        int r = plan_graph(&q, true, false);
        *plain = q.base.peak_bytes <= q.usable && q.usable > 0;
        rc = r == MP_EXIT_OK ? 1 : r == MP_EXIT_INFEASIBLE ? 0 : -1;
    }
    plan_free(&q);
    return rc;
}

/* Largest b in [lo, cap] with fit(b), given fit(lo): doubling, then bisection. */
static int largest_batch(plan *p, const mp_cli_opts *o, bool want_plain, int64_t lo, int64_t *out)
{
    int64_t hi = -1; /* the smallest batch known not to fit */
    bool plain;
    while (hi < 0) {
        int64_t b = lo * 2 > BATCH_MAX_CAP ? BATCH_MAX_CAP : lo * 2;
        if (b == lo) {
            p->capped = true;
            break;
        }
        int r = probe(p, o, b, &plain);
        if (r < 0) return -1;
        if (want_plain ? plain : r) lo = b;
        else hi = b;
    }
    while (hi > lo + 1) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = probe(p, o, mid, &plain);
        if (r < 0) return -1;
        if (want_plain ? plain : r) lo = mid;
        else hi = mid;
    }
    *out = lo;
    return 0;
}

/* ---- the arena: every tensor at a fixed offset (codegen/plan.h) -------------------------- */

/* A plan is of an ONNX model's training step, rebuilt from the options it records. */
static bool plan_recordable(const mp_cli_opts *o)
{
    return !(o->graph_json || o->no_infer || o->inference);
}

static void plan_opts_of(const plan *p, const mp_cli_opts *o, mp_plan_opts *po)
{
    static const mp_dtype precisions[] = {MP_FLOAT, MP_BFLOAT16, MP_FLOAT16};
    *po = mp_plan_defaults();
    po->batch = o->batch;
    for (int i = 0; i < o->ndims && i < MP_PLAN_MAX_DIMS; i++) {
        snprintf(po->dim_names[po->ndims], sizeof po->dim_names[0], "%s", o->dim_names[i]);
        po->dim_values[po->ndims++] = o->dim_values[i];
    }
    if (o->loss >= 0) po->loss = (mp_loss_kind)o->loss;
    if (o->optimizer >= 0) po->optimizer = (mp_opt_kind)o->optimizer;
    if (o->precision >= 0) po->precision = precisions[o->precision];
    if (o->micro_batches >= 0) po->micro_batches = (int)o->micro_batches;
    po->topo_sort = o->topo_sort;
    po->params_as_inputs = o->params_as_inputs;
    po->constants_as_params = o->constants_as_params;
    po->optimizer_in_backward = o->optimizer_in_backward;
    snprintf(po->data_inputs, sizeof po->data_inputs, "%s", o->data_inputs ? o->data_inputs : "");
    snprintf(po->buffers, sizeof po->buffers, "%s", o->buffers ? o->buffers : "");
    snprintf(po->strategy, sizeof po->strategy, "%s", mp_cli_strategy_names[p->strategy]);
    po->budget_bytes = p->budget;
    po->reserve_bytes = p->reserve;
    po->arena_target = p->placed_fallback ? p->placed_target : p->usable; /* a fallback is placed as it was measured */
    po->arena_target_only = p->placed_fallback; /* as adopt_placed_order placed every fallback */
    po->arena_work = p->placed_fallback ? p->placed_work : ARENA_WORK;
}

/* The placement's options in fit_arena's round: a plan made again is placed with half the work (it has room). */
static void round_opts(const plan *p, const mp_cli_opts *o, int round, mp_plan_opts *po)
{
    plan_opts_of(p, o, po);
    if (round > 0 && !p->placed_fallback) po->arena_work /= 2;
}

/* Forgets the plan found for p->target, so that plan_graph can plan again. */
static void forget_solution(plan *p)
{
    mp_rsched_free(&p->order);
    memset(&p->order, 0, sizeof p->order);
    forget_runner(p);
    if (p->have_rp) mp_rplan_free(&p->rp);
    if (p->have_ahead) mp_rsched_free(&p->ahead_order);
    p->have_rp = p->solved = p->have_ahead = false;
    free(p->recomputed);
    p->recomputed = NULL;
    p->ilp_failed[0] = 0;
}

/* Keeps the ILP's plan, before a re-plan for a lower target forgets it:
 * repaired to that target it is the re-plan's warm start. */
static void keep_hint(plan *p)
{
    if (!p->have_rp || p->order_from != -1) return; /* a baseline's order was given: the last hint stays */
    if (p->have_hint) mp_rplan_free(&p->hint);
    p->hint = p->rp;
    p->rp = (mp_rplan){0}; /* the hint owns its choices now */
    p->have_hint = true, p->have_rp = false;
}

/* Takes x's order (placed as x->info with arena target `target` and x's
 * search work) as the plan; written with -o, it is placed alike. */
static bool adopt_order(plan *p, const fallback *x, int64_t target)
{
    forget_solution(p);
    p->order = x->s;
    p->count = x->c;
    p->arena = x->info;
    p->order_from = x->from;
    p->pruned = x->pruned;
    p->placed_fallback = true;
    p->placed_target = target;
    p->placed_work = x->work;
    return mark_recomputed(p) == 0;
}

/* One placement, run on a thread of its own. */
typedef struct place_job {
    const char *model;
    mp_plan_opts po;
    fallback *f;
    mp_err err;
} place_job;

static void *place_thread(void *arg)
{
    place_job *j = arg;
    memset(&j->f->info, 0, sizeof j->f->info);
    j->f->placed = !mp_plan_measure(j->model, &j->po, &j->f->s, &j->f->info, &j->err);
    j->f->known = true;
    return NULL;
}

/* Places a, and b (or NULL) beside it on a second thread when the machine
 * has two cores. Each placement's work is fixed, so its arena is the same
 * either way, and the caller takes them in the order it would have placed
 * them, so the order chosen is too. When a fits the usable budget, b's
 * search is cancelled: a is the one taken, and b is left unplaced. */
static void place_pair(const char *model, const mp_plan_opts *po, int64_t usable, fallback *a, fallback *b)
{
    atomic_bool stop = false;
    place_job ja = {.model = model, .po = *po, .f = a}, jb = {.model = model, .po = *po, .f = b};
    ja.po.arena_work = a->work;
    if (b) jb.po.arena_work = b->work;
    jb.po.arena_cancel = &stop;
    pthread_t t;
    bool second = b && two_cores() && pthread_create(&t, NULL, place_thread, &jb) == 0;
    place_thread(&ja);
    if (!second) return;
    if (a->placed && a->info.arena_bytes <= usable) atomic_store(&stop, true);
    pthread_join(t, NULL);
    if (atomic_load(&stop)) b->known = false;
}

static bool same_order(const mp_rsched *a, const mp_rsched *b)
{
    return a->n == b->n && !memcmp(a->node, b->node, (size_t)a->n * sizeof *a->node);
}

#define FALLBACK_RUNGS 3 /* above the third target, and as many below it */
/* How far down a baseline's orders the fallback looks: CHAIN_MAX orders, the
 * k-th for a target at least the budget's 2^k / CHAIN_STEP below it. */
#define CHAIN_MAX 8
#define CHAIN_STEP 5000
#define FALLBACK_MAX ((3 + 2 * FALLBACK_RUNGS + CHAIN_MAX) * (MP_RBASE_COUNT + 1))

/* The orders waiting to be placed (f), and those placed that missed. */
typedef struct fallbacks {
    fallback f[FALLBACK_MAX];
    int n;
    mp_rsched missed[FALLBACK_MAX];
    int nmissed;
} fallbacks;

/* Maker b's order for target, counted, into x: its live bytes; -1 when the
 * maker cannot make an order that fits the target. */
static int64_t make_fallback(plan *p, int b, fallback_target t, int64_t target, fallback *x)
{
    mp_err err = {{0}};
    /* an eighth of the search's work (on the 120-plan sweep the same plans as with the whole work, once the least
     * baseline's orders join: before, greedy's order 0.3 % above the LLaMA-like model's smallest budget fitted by
     * 3.9 kB with the whole work only); the least baseline's get theirs from add_first_orders */
    *x = (fallback){.from = b, .target = t, .work = ARENA_WORK / 8};
    if (target <= 0 || mp_remat_baseline(&p->rg, (mp_rbaseline)b, target, &x->s, &err)) return -1;
    if (mp_rsched_count(&p->rg, &x->s, &x->c, &err)) {
        mp_rsched_free(&x->s);
        return -1;
    }
    return x->c.peak_bytes;
}

/* Appends x when its live bytes fit and no order waiting or missed is the
 * same (a baseline may ignore the target); frees it otherwise. */
static void append_fallback(plan *p, fallbacks *fb, fallback *x)
{
    bool fresh = x->c.peak_bytes <= p->usable && fb->n < FALLBACK_MAX;
    for (int j = 0; j < fb->n && fresh; j++) fresh = !same_order(&x->s, &fb->f[j].s);
    for (int j = 0; j < fb->nmissed && fresh; j++) fresh = !same_order(&x->s, &fb->missed[j]);
    if (fresh) fb->f[fb->n++] = *x;
    else mp_rsched_free(&x->s);
}

static void add_fallback(plan *p, int b, fallback_target t, int64_t target, fallbacks *fb)
{
    fallback x;
    if (make_fallback(p, b, t, target, &x) >= 0) append_fallback(p, fb, &x);
}

/* A maker's first orders: its chain down from the budget, each next one for
 * a target below the last one's live bytes (greedy's and lookahead's orders
 * change with the target in steps: on GPT-2 near its smallest budget, eight
 * orders of lookahead's in the 0.8 % below it, whose arenas fragment by
 * 0.01-77 MB), and at least the budget's 2^k / CHAIN_STEP below it; then its
 * order for the budget less the re-plans' margin. The least baseline's: its
 * order pruned to the budget, and within its own peak. */
typedef struct first_orders {
    plan *p;
    int b;
    fallback x[CHAIN_MAX + 1];
    int n;
} first_orders;

static void *make_first_orders(void *arg)
{
    first_orders *o = arg;
    plan *p = o->p;
    int64_t t = p->usable, down = p->usable / CHAIN_STEP;
    for (int k = 0; k < CHAIN_MAX && t > 0; k++, down *= 2) {
        int64_t live = make_fallback(p, o->b, k ? DOWN_CHAIN : AT_BUDGET, t, &o->x[o->n]);
        if (live < 0) break;
        o->n++;
        if (o->b != MP_RBASE_GREEDY && o->b != MP_RBASE_LOOKAHEAD) break; /* all and sqrt: one order */
        t = live - 1 < p->usable - down ? live - 1 : p->usable - down;
    }
    if (p->slack) o->n += make_fallback(p, o->b, LESS_SLACK, p->usable - p->slack, &o->x[o->n]) >= 0;
    return NULL;
}

/* The fallback's orders besides the baselines': the order at the least
 * target a baseline fits (least_baseline), pruned to the budget, and within
 * its own peak: rid of more recomputations than the baselines' orders for
 * the budget, it can cost less (the LLaMA-like model 0.3 % above its smallest
 * budget: 25.02 % where greedy's order for the budget costs 26.27 %, and the
 * budget below 25.97 %). Their making is the fallback's slow part (GPT-2
 * near its smallest budget: the least baseline's bisection, 0.05 s, and two
 * prunes, 0.03-0.3 s as the load goes), and there the re-plans mostly come
 * to them; so fit_arena starts them on a second thread at the lowest
 * priority, on the time its placements leave idle (least_orders_start).
 * They read only what they are given. */
typedef struct least_orders {
    const mp_rgraph *rg;
    bool find;        /* the baseline, its least target and its peak there are to be found (least_baseline_peak) */
    mp_rbaseline of;
    int64_t at, usable, own_peak; /* its least target, the budget, the peak it reaches there */
    fallback x[2];
    int n;
    pthread_t thread;
    bool started;
    atomic_bool stop; /* set when they are not needed after all */
} least_orders;

static void least_order(least_orders *l, fallback_target t, int64_t within)
{
    mp_err err = {{0}};
    fallback *x = &l->x[l->n];
    *x = (fallback){.from = l->of, .least = true, .target = t};
    l->n += pruned_baseline(l->rg, l->of, l->at, within, &l->stop, &x->s, &x->c, &x->pruned, &err) == 1;
}

static void *make_least_orders(void *arg)
{
    least_orders *l = arg;
    if (l->find && (l->own_peak = least_baseline_peak(l->rg, &l->stop, &l->of, &l->at)) > l->usable) return NULL;
    least_order(l, AT_BUDGET, l->usable);
    least_order(l, OWN_PEAK, l->own_peak);
    return NULL;
}

static void *make_least_orders_idle(void *arg)
{
#ifdef __linux__
    /* the thread's own niceness (Linux keeps one per thread; the pruner's thread inherits it): a placement on the
     * critical path keeps its core */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* not lowered: made all the same */
#endif
    return make_least_orders(arg);
}

/* Their maker, not started: with the plan's least baseline, or to find it
 * (find); NULL when the plan's does not fit the budget. */
static least_orders *least_orders_new(plan *p, bool find)
{
    if (!find && !(p->have_base_least && p->base_least <= p->usable)) return NULL;
    least_orders *l = malloc(sizeof *l);
    if (!l) return NULL;
    *l = (least_orders){.rg = &p->rg, .find = find, .usable = p->usable};
    if (!find) l->of = p->base_least_of, l->at = p->base_least_target, l->own_peak = p->base_least;
    atomic_init(&l->stop, false);
    return l;
}

/* Starts them on a second thread near the smallest budget (the solver
 * found no plan at some target), when the machine has two cores; the least
 * baseline is found there too when the plan has not yet (GPT-2: 0.05 s
 * off the first placement's way). The plan's own least_baseline, where it
 * needs one, is the same. */
static void least_orders_start(plan *p)
{
    if (p->least_orders || !p->no_plan_at || !two_cores()) return;
    least_orders *l = least_orders_new(p, !p->have_base_least);
    if (!l) return;
    l->started = pthread_create(&l->thread, NULL, make_least_orders_idle, l) == 0;
    if (l->started) p->least_orders = l;
    else least_orders_free(l);
}

/* The least orders, made here or their thread joined; the caller frees
 * them (least_orders_free). NULL when there are none. */
static least_orders *least_orders_take(plan *p)
{
    if (!p->least_orders && p->no_plan_at) least_baseline(p); /* sought when the solver found no plan at some target */
    least_orders *l = p->least_orders ? p->least_orders : least_orders_new(p, false);
    p->least_orders = NULL;
    if (l && l->started) pthread_join(l->thread, NULL);
    else if (l) make_least_orders(l);
    return l;
}

static void least_orders_free(least_orders *l)
{
    if (!l) return;
    if (l->started) {
        atomic_store(&l->stop, true);
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; i < l->n; i++) mp_rsched_free(&l->x[i].s);
    free(l);
}

/* Every maker's first orders, appended maker by maker. They are made apart
 * (lookahead's on a second thread when the machine has two cores: GPT-2's
 * sixteen chain orders 0.35 -> 0.23 s; the least baseline's maybe since the
 * first arena) and appended in one order, so the list is the same either
 * way. The least baseline's are placed with least_work. */
static void add_first_orders(plan *p, fallbacks *fb, int64_t least_work)
{
    first_orders o[MP_RBASE_COUNT];
    for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++) o[b] = (first_orders){.p = p, .b = b};
    pthread_t t;
    bool side = two_cores() && pthread_create(&t, NULL, make_first_orders, &o[MP_RBASE_LOOKAHEAD]) == 0;
    for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++)
        if (b != MP_RBASE_LOOKAHEAD || !side) make_first_orders(&o[b]);
    if (side) pthread_join(t, NULL);
    for (int b = MP_RBASE_ALL; b < MP_RBASE_COUNT; b++)
        for (int i = 0; i < o[b].n; i++) append_fallback(p, fb, &o[b].x[i]);
    least_orders *l = least_orders_take(p);
    for (int i = 0; l && i < l->n; i++) {
        l->x[i].work = least_work;
        append_fallback(p, fb, &l->x[i]); /* which owns or frees its order */
    }
    free(l);
}

static void fallbacks_free(fallbacks *fb)
{
    for (int j = 0; j < fb->n; j++) mp_rsched_free(&fb->f[j].s);
    for (int j = 0; j < fb->nmissed; j++) mp_rsched_free(&fb->missed[j]);
}

/* The baselines' own orders at or below the budget that cost less than
 * ceiling, the cheapest whose arena fits as placed. They are placed cheapest
 * first (two at a time, place_pair), the budget the search's target, so the
 * first that fits is taken. The orders: each baseline's chain down from the
 * budget (make_first_orders; it starts at the budget, not at what the ILP's plans
 * did, so a budget a little higher looks at nearly the same orders: GPT-2 at
 * 39.7 % got 56.98 % before the chains, now 45.70 % as at 39.6 %), its order
 * for the budget less the re-plans' margin, and once its order for the
 * budget misses, its orders for a third target, the budget less what that
 * order added when placed, and for rungs spaced around the third (each order
 * fragments by its own amount: the GRU's by 1-2.4 %, so 0.3 % above its
 * smallest budget greedy's order at its least target, 226 %, was given until
 * a rung's, 96.8 %); near the smallest budget, the least baseline's two
 * (least_orders). At most `pairs` pairs are placed. True when one was
 * taken. */
static bool adopt_baseline_order(plan *p, const mp_cli_opts *o, double ceiling, int pairs)
{
    mp_plan_opts po;
    plan_opts_of(p, o, &po);
    po.arena_target = p->usable; /* the search stops once an order fits */
    po.arena_target_only = true; /* or once it misses: a fallback only fits or not */
    fallbacks fb = {.n = 0};
    /* the last resort places the least baseline's orders with the whole work (the LLaMA-like model's, 0.3 % above
     * its smallest budget, fits by 0.5 kB with it, misses by 7 MB with an eighth); a re-plan's check of two cheaper
     * orders with an eighth, as the others (ViT-B/16 0.3 % above its smallest budget: 41.45 -> 41.35 %) */
    add_first_orders(p, &fb, ceiling == INFINITY ? ARENA_WORK : ARENA_WORK / 8);
    fallback *f = fb.f;
    while (fb.n > 0) {
        int k = 0, next = -1; /* the cheapest, and the cheapest other not placed yet */
        for (int j = 1; j < fb.n; j++)
            if (f[j].c.recompute_cost < f[k].c.recompute_cost) k = j;
        for (int j = 0; j < fb.n; j++)
            if (j != k && !f[j].known && (next < 0 || f[j].c.recompute_cost < f[next].c.recompute_cost)) next = j;
        if (f[k].c.recompute_cost >= ceiling) break;
        if (next >= 0 && f[next].c.recompute_cost >= ceiling) next = -1;
        if (!f[k].known) {
            if (pairs-- <= 0) break;
            place_pair(o->model, &po, p->usable, &f[k], next >= 0 ? &f[next] : NULL);
        }
        fallback x = f[k];
        f[k] = f[--fb.n];
        if (x.placed && x.info.arena_bytes <= p->usable) {
            fallbacks_free(&fb);
            return adopt_order(p, &x, p->usable);
        }
        if (fb.nmissed < FALLBACK_MAX) fb.missed[fb.nmissed++] = x.s; /* not placed again (a rung may be it) */
        else mp_rsched_free(&x.s);
        if (x.placed && x.target == AT_BUDGET && !x.least && pairs > 0) { /* else none of them would be placed */
            int64_t margin = x.info.arena_bytes - x.info.lower_bound;
            if (margin < x.info.arena_bytes - p->usable) margin = x.info.arena_bytes - p->usable;
            int64_t third = p->usable - margin - mp_arena_defaults().alignment;
            int64_t step = (p->usable - third) / (FALLBACK_RUNGS + 1);
            add_fallback(p, x.from, THIRD, third, &fb);
            for (int r = 1; r <= FALLBACK_RUNGS && step > 0; r++) {
                add_fallback(p, x.from, RUNG, third + r * step, &fb);
                add_fallback(p, x.from, RUNG, third - r * step, &fb);
            }
        }
    }
    fallbacks_free(&fb);
    return false;
}

/* The last resort when re-planning keeps fragmenting: the chains' cheapest
 * order that fits as placed, else the orders the exit-3 line places (the
 * least-peak plan's, greedy's at its least target, store everything), the
 * first whose arena fits. So the order given costs no more than a baseline
 * shown beside it that fits, and a budget that line proves feasible succeeds
 * given back. With a spare (fit_arena's runner-up that fitted), only orders
 * cheaper than it, its cost the ceiling. True when one was taken. */
static bool adopt_placed_order(plan *p, const mp_cli_opts *o, double ceiling)
{
    if (adopt_baseline_order(p, o, ceiling, INT_MAX)) return true;
    if (ceiling < INFINITY) return false; /* a spare fits (take_spare) */
    mp_err err = {{0}};
    bool may;
    if (least_peak_may_fit(p, p->usable, &may, &err) || (may && least_peak(p, &err))) return false;
    /* the exit-3 line's placements (no target, the whole work), so that a budget it states is met given back */
    for (int k = may ? 0 : 1; k < 3; k++) {
        mp_rsched s = {0};
        int from;
        if (candidate_order(p, k, &s, &from, &err)) continue;
        mp_plan_info info = {0};
        mp_rcount c;
        if (place_candidate(p, k, &s, &info, &err) || info.arena_bytes > p->usable ||
            mp_rsched_count(&p->rg, &s, &c, &err)) {
            mp_rsched_free(&s);
            continue;
        }
        if (!adopt_order(p, &(fallback){.s = s, .c = c, .from = from, .work = ARENA_WORK, .info = info}, 0))
            return false;
        if (k == 0) p->status = "min-peak";
        return true;
    }
    return false;
}

/* The round's runner-up (use_cheaper_baseline), placed beside its order:
 * orders within hundredths of a percent of each other can fragment by
 * megabytes apart (MaxViT-T 3 % above its smallest budget: greedy's order,
 * 7.134 %, fragmented by 10 MB where lookahead's, 7.139 %, fitted; the
 * re-plans for lower targets then gave 7.62 %). One that fits where its
 * order did not is kept as the spare; the re-plans go on (a solver's plan
 * for a lower target can cost less), and the spare is given at the end when
 * it costs less than their plan. */
typedef struct runner_place {
    place_job job;
    atomic_bool stop;
    pthread_t thread;
    bool started;
} runner_place;

/* Readies the runner-up's placement, and starts it on a second thread when
 * beside (and the machine has two cores). */
static void runner_start(plan *p, const mp_cli_opts *o, const mp_plan_opts *po, bool beside, runner_place *rp)
{
    p->runner.known = false;
    rp->job = (place_job){.model = o->model, .po = *po, .f = &p->runner};
    atomic_init(&rp->stop, false);
    rp->job.po.arena_cancel = &rp->stop;
    rp->job.po.arena_target_only = true; /* it only fits or not, with an eighth of the work, as a fallback */
    rp->job.po.arena_work = p->runner.work;
    rp->started = beside && two_cores() && pthread_create(&rp->thread, NULL, place_thread, &rp->job) == 0;
}

/* Ends it: cancelled when the order's placement settled the round (it fit,
 * or failed for another reason than the budget); placed here when no thread
 * ran. A runner-up that fits, cheaper than the spare, becomes the spare. */
static void runner_finish(plan *p, runner_place *rp, bool settled)
{
    if (rp->started) {
        if (settled) atomic_store(&rp->stop, true);
        pthread_join(rp->thread, NULL);
    } else if (!settled) {
        place_thread(&rp->job);
    }
    const fallback *r = &p->runner;
    if (settled || !r->known || !r->placed || r->info.arena_bytes > p->usable ||
        (p->have_spare && r->c.recompute_cost >= p->spare.c.recompute_cost))
        return;
    if (p->have_spare) mp_rsched_free(&p->spare.s);
    p->spare = *r;
    p->have_spare = true;
    p->have_runner = false;
}

/* What the spare costs (infinity: none). */
static double spare_cost(const plan *p) { return p->have_spare ? p->spare.c.recompute_cost : INFINITY; }

/* Gives the spare when it costs less than the plan (or there is none):
 * true when it was taken. */
static bool take_spare(plan *p, bool have_plan)
{
    if (!p->have_spare || (have_plan && p->spare.c.recompute_cost >= p->count.recompute_cost * (1 - 1e-9)))
        return false;
    p->have_spare = false;
    return adopt_order(p, &p->spare, p->usable);
}

/* Places the plan's tensors in one arena (and with -o writes the plan there).
 * The ILP counts sizes padded as the arena pads them, but the placement can
 * still fragment: then the plan is made again for a budget lower by the
 * excess (at least by what the placement added to the live bytes), until the
 * arena fits the usable budget (a few rounds at most). */
#define LAST_ROUND 3 /* placements of the ILP's plans: the first, then three made for a lower budget */
static int fit_arena(plan *p, const mp_cli_opts *o)
{
    if (!p->onnx || !plan_recordable(o)) {
        if (o->out_dir) {
            mp_cli_error("-o: a plan is of an ONNX model's training step (not --graph-json, --inference or --no-infer)");
            return MP_EXIT_USAGE;
        }
        return MP_EXIT_OK;
    }
    mp_plan_opts cap;
    if ((o->data_inputs && strlen(o->data_inputs) >= sizeof cap.data_inputs) ||
        (o->buffers && strlen(o->buffers) >= sizeof cap.buffers)) {
        mp_cli_error("-o: the plan records --data-inputs up to %zu bytes and --buffers up to %zu bytes of names",
                     sizeof cap.data_inputs - 1, sizeof cap.buffers - 1);
        return MP_EXIT_USAGE;
    }
    least_orders_start(p);
    bool adopted = false;
    for (int round = 0;; round++) {
        if (adopted && !o->out_dir) return MP_EXIT_OK; /* placed by its fixed work when measured: the same again */
        mp_plan_opts po;
        round_opts(p, o, round, &po);
        mp_err err = {{0}};
        memset(&p->arena, 0, sizeof p->arena);
        int rc = 0;
        bool ahead = !o->out_dir && p->have_ahead && same_order(&p->ahead_order, &p->order);
        runner_place rp = {.started = false};
        bool runner = p->have_runner && !adopted;
        if (runner) runner_start(p, o, &po, !ahead, &rp);
        if (o->out_dir) rc = mp_plan_emit(o->out_dir, o->model, &po, &p->order, p->usable, true, &p->arena, &err);
        else if (ahead) p->arena = p->ahead_info; /* placed already */
        else rc = mp_plan_measure(o->model, &po, &p->order, &p->arena, &err);
        if (runner) runner_finish(p, &rp, rc || p->arena.arena_bytes <= p->usable);
        if (o->out_dir && p->arena.nbuffers) /* plan.json is written even when plan.cu is refused */
            fprintf(stderr, "plan: %s/plan.json: arena %lld bytes (lower bound %lld, %.4fx)\n", o->out_dir,
                    (long long)p->arena.arena_bytes, (long long)p->arena.lower_bound,
                    p->arena.lower_bound ? (double)p->arena.arena_bytes / (double)p->arena.lower_bound : 1.0);
        if (rc && p->arena.arena_bytes <= p->usable) { /* not the budget: codegen or I/O, said after the table */
            snprintf(p->out_failed, sizeof p->out_failed, "%s%s: %s", o->out_dir ? "-o " : "",
                     o->out_dir ? o->out_dir : o->model, err.msg);
            return MP_EXIT_OK;
        }
        if (!rc && p->arena.arena_bytes <= p->usable) {
            /* a baseline's order made again for a lower target fits: the fallback's orders may hold a cheaper one
             * (lookahead's cost is not monotone in its target: on GPT-2 at 39.9 % its order made again 28 MiB lower
             * cost 48.33 %, and greedy's chain held one of 43.62 %, the plan at 39.8 %). The two cheapest are
             * placed, side by side: MaxViT 3 % above its smallest budget placed four, none fitting, in 0.6 s */
            double ceiling = fmin(p->count.recompute_cost, spare_cost(p));
            if (!adopted && ((round > 0 && p->order_from >= 0 && adopt_baseline_order(p, o, ceiling, 1)) ||
                             take_spare(p, true))) {
                adopted = true, round = LAST_ROUND - 1; /* write it */
                continue;
            }
            return MP_EXIT_OK;
        }
        if (round < LAST_ROUND) {
            /* at least what the placement added to the live bytes (a plan that lowers only its peak keeps that),
             * and at least the last margin plus the excess. Not more: a margin doubled after a second miss
             * overshot below smaller budgets' targets (Swin-T at 54 % planned below 53 %'s, at more overhead) */
            int64_t over = p->slack + p->arena.arena_bytes - p->usable;
            int64_t need = p->arena.arena_bytes - p->arena.lower_bound;
            if (need < over) need = over;
            p->slack = need + mp_arena_defaults().alignment;
            p->round = round + 1;
            keep_hint(p);
            forget_solution(p);
            rc = plan_graph(p, true, true);
            if (rc == MP_EXIT_OK) continue;
            if (rc != MP_EXIT_INFEASIBLE) return rc;
        }
        /* the ILP's plans kept fragmenting, or none is left for the lower budget */
        if (!adopted && (adopt_placed_order(p, o, spare_cost(p)) || take_spare(p, false))) {
            adopted = true, round = LAST_ROUND - 1; /* write it */
            continue;
        }
        int64_t frag = p->arena.arena_bytes - p->arena.lower_bound;
        if (frag > p->slack) p->slack = frag;
        return report_infeasible(p, "cannot be met: the arena's placement fragments past it");
    }
}

/* ---- pictures of the planned step ---------------------------------------------------------- */

/* The plan applied to the IR (recomputed copies, passes/remat_apply.c) and
 * analyzed again, so the pictures show the step that runs: recomputed
 * tensors, the budget line, the store-everything peak and the baselines.
 * Rewrites p->step.g: call it last. */
static int write_plan_pictures(plan *p)
{
    const mp_cli_opts *o = p->o;
    if (!p->onnx || !(o->timeline || o->dot || o->svg || o->png || o->report)) return 0;
    mp_err err = {{0}};
    mp_graph *g = p->step.g;
    int32_t nold = g->nvalues;
    uint8_t *before = calloc((size_t)nold + 1, 1), *decision = NULL;
    mp_schedule planned = {0};
    mp_memory m;
    bool have_m = false;
    int rc = -1;
    if (!before) goto oom;
    for (int32_t v = 0; v < p->rg.nvalues; v++) {
        int32_t id = p->rg.value_id[v];
        if (id < 0 || id >= nold) continue;
        before[id] = p->recomputed[v] ? MP_VIZ_RECOMPUTED : p->rg.pinned[v] ? MP_VIZ_PINNED : MP_VIZ_KEPT;
    }
    if (mp_remat_apply(g, &p->step.sched, &p->order, &planned, &err) || mp_memory_analyze(g, &planned, &m, &err)) {
        mp_cli_model_error(p->source, err.msg);
        goto done;
    }
    have_m = true;
    decision = malloc((size_t)g->nvalues + 1);
    if (!decision) goto oom;
    for (int32_t v = 0; v < g->nvalues; v++) decision[v] = v < nold ? before[v] : MP_VIZ_RECOMPUTED;
    if (o->timeline && !strstr(o->timeline, ".svg") && mp_cli_write_timeline_csv(g, &planned, &m, o->timeline))
        goto done;
    mp_viz_baseline rows[MP_RBASE_COUNT + 1];
    int nrows = 0;
    rows[nrows++] = (mp_viz_baseline){"plan", p->count.peak_bytes, p->count.recompute_cost};
    for (int b = 0; b < MP_RBASE_COUNT; b++)
        if (p->rows[b].ok)
            rows[nrows++] = (mp_viz_baseline){mp_rbaseline_names[b], p->rows[b].peak,
                                              p->rows[b].overhead_pct / 100 * p->base.cost};
    char sub[200];
    snprintf(sub, sizeof sub, "plan: strategy %s, budget %.2f MiB (usable %.2f MiB), peak %.2f MiB",
             mp_cli_strategy_names[p->strategy], mib(p->budget), mib(p->usable), mib(p->count.peak_bytes));
    mp_viz_input in = mp_viz_input_of(g, &m);
    in.decision = decision;
    in.budget_bytes = p->usable;
    in.store_all_peak = p->base.peak_bytes;
    in.baselines = rows;
    in.nbaselines = nrows;
    in.title = p->source;
    in.subtitle = sub;
    rc = mp_cli_write_pictures(o, &in);
    goto done;
oom:
    mp_cli_error("out of memory");
done:
    if (have_m) mp_memory_free(&m);
    mp_schedule_free(&planned);
    free(before);
    free(decision);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------- */

static int check_options(const mp_cli_opts *o)
{
    if (o->graph_json && o->model) {
        mp_cli_error("give a model or --graph-json FILE, not both");
        return -1;
    }
    if (o->graph_json && (o->batch >= 0 || o->batch_max || o->ndims || o->inference || o->timeline ||
                          o->params_as_inputs || o->data_inputs || o->buffers || o->constants_as_params || o->optimizer_in_backward || o->optimizer >= 0 ||
                          o->precision >= 0 || o->loss >= 0 || o->micro_batches >= 0 || o->topo_sort)) {
        mp_cli_error("--graph-json takes only --budget, --reserve, --gpu, --strategy, --time-limit, --schedule "
                     "and --json");
        return -1;
    }
    if (o->budget_bytes < 0 && o->budget_pct <= 0 && !o->gpu) {
        mp_cli_error("planning needs --budget B (or --gpu NAME for its memory)");
        return -1;
    }
    if (o->batch_max && o->budget_pct > 0) {
        mp_cli_error("--batch max needs an absolute --budget, not a percentage");
        return -1;
    }
    if (o->graph_json && (o->dot || o->svg || o->png || o->report)) {
        mp_cli_error("--dot, --svg, --png and --report draw an ONNX model's step, not a --graph-json file");
        return -1;
    }
    return 0;
}

int mp_cmd_plan(const mp_cli_opts *o)
{
    if (check_options(o)) return MP_EXIT_USAGE;
    plan p = {.o = o, .any_bound_step = -1};
    mp_err err = {{0}};
    if (o->gpu || !o->graph_json) {
        p.gpu = mp_gpu_find(o->gpu ? o->gpu : MP_GPU_DEFAULT, &err);
        if (!p.gpu) {
            mp_cli_error("--gpu: %s", err.msg);
            return MP_EXIT_USAGE;
        }
    }
    int rc = MP_EXIT_USAGE;
    char *out = NULL;
    size_t outlen = 0;
    mp_cli_opts bo = *o; /* --batch max: the options of the chosen batch */
    if (o->batch_max) {
        bool plain;
        int r = probe(&p, o, 1, &plain);
        if (r < 0) goto done;
        int64_t best = 1, best_plain = 0;
        if (r == 1 && largest_batch(&p, o, false, 1, &best)) goto done;
        if (r == 1 && plain && largest_batch(&p, o, true, 1, &best_plain)) goto done;
        p.batch = best;
        p.batch_plain = best_plain;
        bo.batch = best; /* at batch 1 with no fit, the plan below reports the smallest budget */
        p.batch_max = true;
    }
    if (load_graph(&p, &bo) || budget_of(&p)) goto done;
    if (p.onnx && plan_recordable(&bo) && !bo.out_dir) p.place_o = &bo;
    int32_t floor_at;
    if (p.usable > 0 && p.usable >= mp_remat_any_plan_least_peak(&p.rg, &floor_at)) /* else no plan can fit */
        bound_start(&p);
    rc = plan_graph(&p, false, true);
    if (rc == MP_EXIT_OK) rc = fit_arena(&p, &bo);
    if (rc != MP_EXIT_OK) goto done;
    rc = MP_EXIT_USAGE;
    if (bound_finish(&p, true)) goto done;
    if (mp_cli_render(p.source, render, &p, o->json, &out, &outlen)) goto done;
    if (o->schedule && mp_rsched_write_json(&p.rg, &p.order, o->schedule, &err)) {
        mp_cli_error("--schedule: %s", err.msg);
        goto done;
    }
    if (write_plan_pictures(&p)) goto done;
    rc = mp_cli_emit(out, outlen);
    if (rc == MP_EXIT_OK && p.out_failed[0]) {
        mp_cli_error("%s", p.out_failed);
        rc = MP_EXIT_USAGE;
    }
done:
    bound_finish(&p, false); /* before the graph it reads is freed */
    free(out);
    plan_free(&p);
    return rc;
}
