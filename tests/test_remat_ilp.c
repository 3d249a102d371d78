/* test_remat_ilp.c - the rematerialization decision space and its ILP
 * (passes/remat_space.c, remat_plan.c, remat_ilp.c) against an exhaustive
 * oracle: on seeded random training-like DAGs of at most 20 nodes, every
 * choice vector (keep, or one candidate per droppable value) is emitted and
 * recounted by mp_rsched_count; the ILP must reach the oracle's least cost at
 * every budget, mp_remat_min_peak its least peak, and the model's peak must
 * equal the recount. Choices are per group (a value and one of its gaps), so
 * a value may come back once per dropped gap; every plan with one gap per
 * value is one of them, and some budgets are strictly cheaper. Retaining
 * candidates (a producer rerun alone, its dead inputs kept alive) join the
 * enumeration like any other, and make some budgets cheaper still. Beside
 * it, Checkmate's exact program over every staged order of the same kind of
 * graphs (tests/checkmate_milp.h): how often the space reaches the optimum of
 * all orders, not only its own. Plus a hand-counted chain, an impossible
 * budget, and a value that must go in two gaps.
 *
 * MP_ILP_SCALE=1 build-NAME/tests/test_remat_ilp prints a 10,000-node scaling
 * run (not a timed test). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/remat.h"
#include "tests/checkmate_milp.h"

/* ---- graphs built by hand ---- */

enum { MAXIO = 8 };

typedef struct tnode {
    int32_t nin, in[MAXIO], nout, out[MAXIO];
    double cost;
    bool recomputable;
} tnode;

typedef struct tgraph {
    int32_t nn, nv, capn, capv;
    tnode *node;
    int64_t *bytes;
    int32_t *producer;
    uint8_t *keep, *pinned;
} tgraph;

static int32_t tg_value(tgraph *g, int32_t producer, int64_t bytes)
{
    if (g->nv == g->capv) {
        g->capv = g->capv ? 2 * g->capv : 64;
        g->bytes = realloc(g->bytes, (size_t)g->capv * sizeof *g->bytes);
        g->producer = realloc(g->producer, (size_t)g->capv * sizeof *g->producer);
        g->keep = realloc(g->keep, (size_t)g->capv);
        g->pinned = realloc(g->pinned, (size_t)g->capv);
        ck_assert(g->bytes && g->producer && g->keep && g->pinned);
    }
    g->bytes[g->nv] = bytes, g->producer[g->nv] = producer, g->keep[g->nv] = g->pinned[g->nv] = 0;
    if (producer >= 0) {
        tnode *n = &g->node[producer];
        ck_assert_int_lt(n->nout, MAXIO);
        n->out[n->nout++] = g->nv;
    }
    return g->nv++;
}

/* A node reading in[0..nin) and making one output of out_bytes; returns the output. */
static int32_t tg_node(tgraph *g, const int32_t *in, int32_t nin, int64_t out_bytes, double cost, bool recomputable)
{
    if (g->nn == g->capn) {
        g->capn = g->capn ? 2 * g->capn : 64;
        g->node = realloc(g->node, (size_t)g->capn * sizeof *g->node);
        ck_assert(g->node);
    }
    tnode *n = &g->node[g->nn];
    memset(n, 0, sizeof *n);
    ck_assert_int_le(nin, MAXIO);
    if (nin) memcpy(n->in, in, (size_t)nin * sizeof *in);
    n->nin = nin, n->cost = cost, n->recomputable = recomputable;
    g->nn++;
    return tg_value(g, g->nn - 1, out_bytes);
}

static void tg_free(tgraph *g)
{
    free(g->node);
    free(g->bytes);
    free(g->producer);
    free(g->keep);
    free(g->pinned);
    memset(g, 0, sizeof *g);
}

static void to_rgraph(const tgraph *g, mp_rgraph *rg)
{
    memset(rg, 0, sizeof *rg);
    rg->nnodes = g->nn, rg->nvalues = g->nv;
    size_t nn = (size_t)g->nn + 1, nv = (size_t)g->nv + 1;
    rg->node_name = calloc(nn, sizeof *rg->node_name);
    rg->cost = malloc(nn * sizeof *rg->cost);
    rg->recomputable = malloc(nn);
    rg->in_off = malloc(nn * sizeof *rg->in_off);
    rg->out_off = malloc(nn * sizeof *rg->out_off);
    rg->in = malloc(nn * MAXIO * sizeof *rg->in);
    rg->out = malloc(nn * MAXIO * sizeof *rg->out);
    rg->bytes = malloc(nv * sizeof *rg->bytes);
    rg->producer = malloc(nv * sizeof *rg->producer);
    rg->keep_to_end = malloc(nv);
    rg->pinned = malloc(nv);
    rg->value_id = malloc(nv * sizeof *rg->value_id);
    rg->in_off[0] = rg->out_off[0] = 0;
    for (int32_t i = 0; i < g->nn; i++) {
        const tnode *n = &g->node[i];
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        rg->node_name[i] = strdup(name);
        rg->cost[i] = n->cost, rg->recomputable[i] = n->recomputable;
        memcpy(rg->in + rg->in_off[i], n->in, (size_t)n->nin * sizeof *n->in);
        memcpy(rg->out + rg->out_off[i], n->out, (size_t)n->nout * sizeof *n->out);
        rg->in_off[i + 1] = rg->in_off[i] + n->nin;
        rg->out_off[i + 1] = rg->out_off[i] + n->nout;
    }
    for (int32_t v = 0; v < g->nv; v++) {
        rg->bytes[v] = g->bytes[v], rg->producer[v] = g->producer[v];
        rg->keep_to_end[v] = g->keep[v], rg->pinned[v] = g->pinned[v], rg->value_id[v] = -1;
    }
}

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng >> 33) % n);
}

/* A training-like DAG: resident parameters, a forward chain with random skip
 * reads and an occasional second output, a loss, and a backward pass reading
 * the forward values in reverse order (so they have gaps), some of them
 * again at a later backward node (so they have several gaps). */
static void random_graph(uint64_t seed, tgraph *g)
{
    memset(g, 0, sizeof *g);
    rng = seed * 2654435761u + 1;
    int32_t nparam = 1 + (int32_t)rnd(2), F = 3 + (int32_t)rnd(6), fwd[16], param[4];
    for (int32_t k = 0; k < nparam; k++) param[k] = tg_value(g, -1, 1 + rnd(30));
    for (int32_t i = 0; i < F; i++) {
        int32_t in[4], nin = 0;
        in[nin++] = i ? fwd[i - 1] : param[0];
        if (i > 1 && rnd(10) < 4) in[nin++] = fwd[rnd((uint32_t)i - 1)];
        if (rnd(10) < 3) in[nin++] = param[rnd((uint32_t)nparam)];
        fwd[i] = tg_node(g, in, nin, 1 + rnd(100), 1 + rnd(10), true);
        if (rnd(100) < 15) tg_value(g, g->nn - 1, 1 + rnd(20)); /* a second output nobody reads */
    }
    int32_t grad = tg_node(g, &fwd[F - 1], 1, 1 + rnd(40), 1, false);
    for (int32_t i = F - 1; i >= 0 && g->nn < 20; i--) {
        int32_t in[4], nin = 0;
        in[nin++] = grad;
        if (rnd(10) < 8) in[nin++] = fwd[i];
        if (i > 0 && rnd(10) < 3) in[nin++] = fwd[i - 1];
        if (i + 2 < F && rnd(10) < 3) in[nin++] = fwd[i + 2 + rnd((uint32_t)(F - i - 2))]; /* read again, later */
        grad = tg_node(g, in, nin, 1 + rnd(100), 1 + rnd(10), false);
        if (rnd(100) < 20) g->keep[tg_value(g, g->nn - 1, 1 + rnd(10))] = 1; /* a parameter's gradient */
    }
    g->keep[grad] = 1;
    if (rnd(10) == 0) g->pinned[fwd[rnd((uint32_t)F)]] = 1;
}

/* ---- the oracle ---- */

typedef struct outcome {
    int64_t peak;
    double cost;
} outcome;

/* The order of plan p built here, independently of mp_rplan_emit. */
static void own_order(const mp_rspace *sp, const mp_rplan *p, mp_rsched *s)
{
    int32_t n = sp->rg->nnodes;
    for (int32_t c = 0; c < sp->ncand; c++) n += sp->cand[c].nrecipe;
    s->node = malloc((size_t)n * sizeof *s->node);
    s->recompute = calloc((size_t)n, 1);
    s->n = 0;
    for (int32_t t = 0; t < sp->rg->nnodes; t++) {
        for (int32_t i = 0; i < sp->ndrop; i++) {
            if (p->choice[i] < 0 || sp->cand[p->choice[i]].step != t) continue;
            const mp_rcand *c = &sp->cand[p->choice[i]];
            for (int32_t r = 0; r < c->nrecipe; r++) s->recompute[s->n] = 1, s->node[s->n++] = c->recipe[r];
        }
        s->node[s->n++] = t;
    }
}

/* Every choice vector: the outcomes of the plans emit accepts, checking on
 * the way that they run (the recount accepts them), that emit's order is the
 * one built here, and that the model's peak is the recount's. Returns the number of outcomes, -1 when there are too many. */
static int32_t enumerate(const mp_rgraph *rg, const mp_rspace *sp, outcome **out, int32_t limit)
{
    double combos = 1;
    for (int32_t i = 0; i < sp->ndrop; i++) combos *= 1 + sp->cand_off[i + 1] - sp->cand_off[i];
    if (combos > limit) return -1;
    *out = malloc((size_t)combos * sizeof **out);
    mp_rplan p;
    mp_err err = {""};
    ck_assert(!mp_rplan_init(sp, &p, &err));
    int32_t n = 0;
    for (;;) {
        mp_rsched own, em;
        mp_rcount cnt;
        own_order(sp, &p, &own);
        bool runs = mp_rsched_count(rg, &own, &cnt, &err) == 0;
        int erc = mp_rplan_emit(sp, &p, &em, &err);
        /* what emit accepts runs. The converse fails in one case: a recipe
         * reading a value away until a later step extends the old instance's
         * life up to the read (the value leaves later than its gap start),
         * on spaces that do not retain values in their gaps (big graphs);
         * the oracle, like the ILP, skips those (mp_rcand.leave). */
        ck_assert_msg(runs || erc, "emit accepts a plan the recount rejects");
        if (!erc) {
            ck_assert_int_eq(em.n, own.n);
            ck_assert(!memcmp(em.node, own.node, (size_t)own.n * sizeof *own.node));
            ck_assert(!memcmp(em.recompute, own.recompute, (size_t)own.n));
            int64_t mp;
            ck_assert_msg(!mp_rplan_peak(sp, &p, NULL, &mp, &err), "%s", err.msg);
            ck_assert_int_eq(mp, cnt.peak_bytes);
            mp_rsched_free(&em);
            double cost = 0;
            for (int32_t i = 0; i < sp->ndrop; i++)
                if (p.choice[i] >= 0) cost += sp->cand[p.choice[i]].cost;
            ck_assert_double_eq_tol(cost, cnt.recompute_cost, 1e-9);
            (*out)[n++] = (outcome){cnt.peak_bytes, cost};
        }
        mp_rsched_free(&own);
        int32_t i = 0; /* next choice vector, mixed radix */
        for (; i < sp->ndrop; i++) {
            int32_t c = p.choice[i] < 0 ? sp->cand_off[i] : p.choice[i] + 1;
            if (c < sp->cand_off[i + 1]) {
                p.choice[i] = c;
                break;
            }
            p.choice[i] = -1;
        }
        if (i == sp->ndrop) break;
    }
    mp_rplan_free(&p);
    return n;
}

static double oracle_cost(const outcome *o, int32_t n, int64_t budget)
{
    double best = INFINITY;
    for (int32_t k = 0; k < n; k++)
        if (o[k].peak <= budget && o[k].cost < best) best = o[k].cost;
    return best;
}

/* The searches' guard, not a budget (seconds): the hardest least-peak search
 * of Checkmate's case (seed 42, 13 nodes) takes about 25 s alone, and the
 * sanitizers run it several times slower, beside other tests. */
#ifdef __SANITIZE_ADDRESS__
#define GUARD_SECONDS 240
#else
#define GUARD_SECONDS 60
#endif

/* Solves at budget and checks the plan against the recount; returns the objective (INFINITY: infeasible). */
static double solve_checked(const mp_rgraph *rg, const mp_rspace *sp, int64_t budget, mp_rsolve_info *info,
                            const mp_rplan *warm, mp_rplan *keep)
{
    mp_err err = {""};
    mp_rsolve_opts o = mp_rsolve_defaults();
    o.gap_limit = 0; /* proven optimal, as the oracle is */
    o.time_limit = GUARD_SECONDS; /* the wide space's hardest cost programs here take 0.7 s on a loaded
                                   * machine, and one ran past 5 s beside two other searches on two cores */
    o.warm = warm;
    mp_rplan p;
    if (keep) keep->choice = NULL;
    ck_assert_msg(!mp_remat_solve(sp, budget, &o, &p, info, &err), "%s", err.msg);
    if (info->status == MP_RSOLVE_INFEASIBLE) {
        mp_rplan_free(&p);
        return INFINITY;
    }
    ck_assert_int_eq(info->status, MP_RSOLVE_OPTIMAL);
    mp_rsched s;
    mp_rcount c;
    ck_assert_msg(!mp_rplan_emit(sp, &p, &s, &err), "%s", err.msg);
    ck_assert_msg(!mp_rsched_count(rg, &s, &c, &err), "%s", err.msg);
    ck_assert_int_le(c.peak_bytes, budget);
    ck_assert_int_eq(c.peak_bytes, info->model_peak);
    ck_assert_double_eq_tol(c.recompute_cost, info->objective, 1e-9);
    ck_assert(info->mip_gap <= 1e-9 && info->lp_bound <= info->objective + 1e-9);
    mp_rsched_free(&s);
    if (keep) *keep = p;
    else mp_rplan_free(&p);
    return info->objective;
}

/* The space's least peak as the search leaves it in GUARD_SECONDS: *lower == the
 * result when proven (the plan that reaches it is not kept). */
static int64_t least_peak_range(const mp_rspace *sp, int64_t *lower)
{
    mp_err err = {""};
    mp_rsolve_opts o = mp_rsolve_defaults();
    o.gap_limit = 0;
    o.time_limit = GUARD_SECONDS;
    int64_t least;
    mp_rplan p;
    ck_assert_msg(!mp_remat_min_peak_range(sp, &o, &least, lower, &p, &err), "%s", err.msg);
    mp_rplan_free(&p);
    return least;
}

/* The space's least peak, proven. */
static int64_t least_peak_checked(const mp_rspace *sp)
{
    int64_t lower, least = least_peak_range(sp, &lower);
    ck_assert_int_eq(lower, least);
    return least;
}

/* The bound on every plan at budget: never above the least cost of the
 * space's plans (they are plans), 0 at step -1 when nothing exceeds it. */
static double any_plan_bound_checked(const mp_rgraph *rg, const mp_rspace *sp, int64_t budget, double least)
{
    mp_err err = {""};
    double bound;
    int32_t step;
    ck_assert_msg(!mp_remat_any_plan_bound(rg, budget, 10, &bound, &step, &err), "%s", err.msg);
    if (budget >= sp->base_peak) ck_assert(bound == 0 && step == -1);
    else ck_assert(step >= 0 && step < rg->nnodes && bound >= 0);
    if (isfinite(least)) ck_assert_msg(bound <= least + 1e-9, "budget %lld: bound %g above a plan's cost %g",
                                       (long long)budget, bound, least);
    return bound;
}

START_TEST(oracle)
{
    int32_t tested = 0, budgets = 0, with_drops = 0, nontrivial = 0, several = 0, cheaper = 0, inside = 0;
    int32_t repairs = 0, repaired = 0, repaired_least = 0, proof_raised = 0, near_cheaper = 0, first_searched = 0;
    int32_t cut = 0;
    int32_t bounded = 0, tight = 0, peak_tight = 0, bound_tight = 0, retaining = 0, retain_cheaper = 0, retain_dearer = 0;
    int32_t gap_kept = 0, gap_cheaper = 0, more_cands = 0, deep = 0, keeping = 0, keep_chosen = 0;
    for (uint64_t seed = 1; tested < 250; seed++) {
        ck_assert_msg(seed < 2000, "too few instances small enough to enumerate");
        tgraph tg;
        random_graph(seed, &tg);
        mp_rgraph rg;
        to_rgraph(&tg, &rg);
        mp_rspace sp;
        mp_err err = {""};
        mp_rspace_opts so = mp_rspace_defaults(); /* odd seeds: recipes that make an input for themselves too */
        so.expand_nodes = seed % 2 ? 1000 : 0;
        so.retain_over = seed % 4 ? 1 : INT32_MAX; /* retaining candidates wherever a recipe reruns an input (the
                                                    * default on graphs this small), or only where no recipe is (the
                                                    * default on big ones, rare here) */
        so.retain_nodes = 0;
        so.wide_nodes = seed % 3 ? 1000 : 0; /* two in three: the wide space of small graphs */
        so.every_step_nodes = seed % 6 == 1 ? 1000 : 0; /* one in six: every step of a gap (more steps, no new kind
                                                         * of candidate: few instances would be small enough) */
        ck_assert_msg(!mp_rspace_build(&rg, &so, &sp, &err), "%s", err.msg);
        outcome *oc = NULL;
        int32_t n = enumerate(&rg, &sp, &oc, 4000);
        if (n < 0) {
            mp_rspace_free(&sp);
            mp_rgraph_free(&rg);
            tg_free(&tg);
            continue;
        }
        tested++;
        with_drops += sp.ndrop > 0;
        for (int32_t c = 0; c < sp.ncand; c++) {
            inside += sp.cand[c].nexpand > 0, deep += sp.cand[c].nexpand > 1;
            retaining += sp.cand[c].nretain > 0;
            keeping += sp.cand[c].keep >= 0;
        }
        /* the space without retention, to see what it buys */
        mp_rspace_opts o0 = so;
        o0.retain = false;
        mp_rspace sp0;
        ck_assert_msg(!mp_rspace_build(&rg, &o0, &sp0, &err), "%s", err.msg);
        outcome *oc0 = NULL;
        int32_t n0 = enumerate(&rg, &sp0, &oc0, 1 << 20);
        ck_assert_int_ge(n0, 1);
        /* and the narrow space of big graphs (no value retained in its gap, no recipe cut short, none making an
         * input inside on even seeds): each of its plans is one here */
        mp_rspace_opts o2 = so;
        o2.wide_nodes = 0;
        mp_rspace sp2 = {0};
        outcome *oc2 = NULL;
        int32_t n2 = 0;
        if (so.wide_nodes) {
            ck_assert_msg(!mp_rspace_build(&rg, &o2, &sp2, &err), "%s", err.msg);
            ck_assert_int_le(sp2.ncand, sp.ncand);
            more_cands += sp.ncand - sp2.ncand;
            for (int32_t c = 0; c < sp.ncand; c++) gap_kept += sp.cand[c].nleave - sp.cand[c].nretain;
            n2 = enumerate(&rg, &sp2, &oc2, 4000);
        }
        /* the space of one gap per value (the largest), as before groups: every plan of it is one here */
        mp_rspace_opts o1 = so;
        o1.max_gaps = 1;
        mp_rspace sp1;
        ck_assert_msg(!mp_rspace_build(&rg, &o1, &sp1, &err), "%s", err.msg);
        outcome *oc1 = NULL;
        int32_t n1 = enumerate(&rg, &sp1, &oc1, 4000);
        ck_assert_int_ge(n1, 1);
        ck_assert_int_le(sp1.ndrop, sp.ndrop);
        for (int32_t k = 0; k < sp1.ncand; k++) { /* the same candidate, in the group of the same gap */
            const mp_rcand *c1 = &sp1.cand[k];
            int32_t g = mp_rspace_group(&sp, c1->value, c1->step), j = g < 0 ? sp.cand_off[sp.ndrop] : sp.cand_off[g];
            while (j < sp.cand_off[g + 1] && (sp.cand[j].step != c1->step || sp.cand[j].nexpand != c1->nexpand ||
                                              sp.cand[j].nretain != c1->nretain || sp.cand[j].keep != c1->keep ||
                                              sp.cand[j].nrecipe != c1->nrecipe ||
                                              memcmp(sp.cand[j].recipe, c1->recipe, (size_t)c1->nrecipe * sizeof *c1->recipe) ||
                                              (c1->nexpand && sp.cand[j].expand[0] != c1->expand[0])))
                j++;
            ck_assert_msg(g >= 0 && j < sp.cand_off[g + 1], "seed %llu: candidate %d of the one-gap space is missing",
                          (unsigned long long)seed, k);
            ck_assert(sp.gap_start[g] == sp1.gap_start[c1->group] && sp.gap_end[g] == sp1.gap_end[c1->group]);
            ck_assert(sp.cand[j].cost == c1->cost);
        }
        for (int32_t v = 0; v < rg.nvalues; v++) several += sp.drop_index[v] >= 0 && sp.drop_index[v] + 1 < sp.ndrop &&
                                                            sp.drop[sp.drop_index[v] + 1] == v;
        int64_t minp = INT64_MAX;
        for (int32_t k = 0; k < n; k++)
            if (oc[k].peak < minp) minp = oc[k].peak;
        ck_assert_int_eq(oc[0].peak, sp.base_peak); /* the first vector keeps everything */
        int32_t lb_at; /* no order peaks below the bound on every plan's peak */
        int64_t lb = mp_remat_any_plan_least_peak(&rg, &lb_at);
        ck_assert_msg(lb > 0 && lb <= minp && lb_at >= 0, "seed %llu: least peak bound %lld, oracle %lld",
                      (unsigned long long)seed, (long long)lb, (long long)minp);
        peak_tight += lb == minp;

        /* (2) the least peak */
        mp_rsolve_opts o = mp_rsolve_defaults();
        o.gap_limit = 0; /* proven optimal, as the oracle is */
        mp_rplan mpp;
        int64_t got;
        ck_assert_msg(!mp_remat_min_peak(&sp, &o, &got, &mpp, &err), "%s", err.msg);
        ck_assert_msg(got == minp, "seed %llu: min peak %lld, oracle %lld", (unsigned long long)seed,
                      (long long)got, (long long)minp);
        int64_t mpk;
        ck_assert(!mp_rplan_peak(&sp, &mpp, NULL, &mpk, &err) && mpk == minp);
        mp_rplan_free(&mpp);
        int64_t lp_lower; /* the LP's bound: below the least peak (the CLI skips the search when it is above) */
        ck_assert_msg(!mp_remat_min_peak_bound(&sp, &o, &lp_lower, &err), "%s", err.msg);
        ck_assert_msg(lp_lower <= minp && lp_lower >= sp.resident_bytes, "seed %llu: min-peak LP bound %lld, oracle %lld",
                      (unsigned long long)seed, (long long)lp_lower, (long long)minp);
        bound_tight += lp_lower == minp;
        /* a proof from elsewhere that no plan peaks at or below minp - 1 (a solve at that budget found the space
         * empty): with no time to search, the range starts there, and its plan is still a plan */
        mp_rsolve_opts quick = o;
        quick.time_limit = 1e-9;
        int64_t qpeak, qlower, qpk;
        for (int k = 0; k < 2; k++) {
            quick.proven_above = k ? minp - 1 : 0;
            ck_assert_msg(!mp_remat_min_peak_range(&sp, &quick, &qpeak, &qlower, &mpp, &err), "%s", err.msg);
            ck_assert(!mp_rplan_peak(&sp, &mpp, NULL, &qpk, &err) && qpk == qpeak && qpeak >= minp);
            ck_assert_msg(qlower <= minp, "seed %llu: lower %lld above the least peak %lld", (unsigned long long)seed,
                          (long long)qlower, (long long)minp);
            if (k) ck_assert_int_eq(qlower, minp);
            else proof_raised += qlower < minp;
            mp_rplan_free(&mpp);
        }

        /* (1) + (3) + (5): budgets from below the least peak to store everything, ascending */
        int64_t b[8];
        int nb = 0;
        b[nb++] = minp - 1;
        b[nb++] = minp;
        for (int k = 0; k < 4; k++) b[nb++] = minp + (int64_t)rnd((uint32_t)(sp.base_peak - minp + 1));
        b[nb++] = sp.base_peak - 1;
        b[nb++] = sp.base_peak;
        for (int i = 1; i < nb; i++) /* insertion sort */
            for (int j = i; j > 0 && b[j - 1] > b[j]; j--) {
                int64_t t = b[j];
                b[j] = b[j - 1], b[j - 1] = t;
            }
        double prev = INFINITY, wants[8];
        mp_rplan plans[8] = {{0}};
        for (int k = 0; k < nb; k++) {
            if (b[k] < 0) continue;
            mp_rsolve_info info;
            double want = oracle_cost(oc, n, b[k]), obj = solve_checked(&rg, &sp, b[k], &info, NULL, &plans[k]);
            ck_assert_msg(obj == want || fabs(obj - want) < 1e-9, "seed %llu budget %lld: ILP %g, oracle %g",
                          (unsigned long long)seed, (long long)b[k], obj, want);
            if (b[k] < minp) ck_assert_int_eq(info.status, MP_RSOLVE_INFEASIBLE);
            near_cheaper += info.rins_cheaper; /* and the plan is the oracle's all the same */
            first_searched += info.first_searched;
            if (info.gomory_cuts > 0) /* a valid bound: no cut removed the optimum */
                ck_assert_msg(info.gomory_bound <= want + 1e-9 * (1 + want), "seed %llu budget %lld: cuts' bound %g "
                              "above the least cost %g", (unsigned long long)seed, (long long)b[k], info.gomory_bound,
                              want);
            cut += info.gomory_cuts > 0;
            bool keeps = false; /* the optimal plan reruns a shared intermediate once for several recipes */
            for (int32_t i = 0; plans[k].choice && i < sp.ndrop; i++)
                keeps |= plans[k].choice[i] >= 0 && sp.cand[plans[k].choice[i]].keep >= 0;
            keep_chosen += keeps;
            ck_assert(obj <= prev); /* monotone */
            double single = oracle_cost(oc1, n1, b[k]);
            ck_assert_msg(want <= single, "seed %llu budget %lld: groups %g, one gap %g", (unsigned long long)seed,
                          (long long)b[k], want, single);
            cheaper += want < single;
            double plain = oracle_cost(oc0, n0, b[k]);
            retain_cheaper += want < plain, retain_dearer += want > plain;
            if (n2) {
                double strict = oracle_cost(oc2, n2, b[k]);
                ck_assert_msg(want <= strict, "seed %llu budget %lld: the wide space %g, the narrow %g",
                              (unsigned long long)seed, (long long)b[k], want, strict);
                gap_cheaper += want < strict;
            }
            double bound = any_plan_bound_checked(&rg, &sp, b[k], want);
            bounded += bound > 0 && isfinite(bound);
            tight += bound > 0 && fabs(bound - want) < 1e-9;
            prev = obj;
            wants[k] = want;
            budgets++;
            nontrivial += want > 0 && isfinite(want);
        }
        /* (6) a re-plan's start: each budget's optimal plan repaired to the next lower budget fits it and costs
         * no less than the least there; as the warm start, the solve still reaches the oracle */
        for (int k = nb - 1; k > 0; k--) {
            if (!plans[k].choice || b[k - 1] < minp) continue;
            mp_rplan r;
            int64_t pk, got_pk;
            ck_assert(!mp_rplan_init(&sp, &r, &err));
            int fit = mp_remat_repair(&sp, b[k - 1], &plans[k], r.choice, &pk, &err);
            ck_assert_msg(fit >= 0, "%s", err.msg);
            ck_assert(!mp_rplan_peak(&sp, &r, NULL, &got_pk, &err) && got_pk == pk); /* the peak it states */
            bool keeps_all = true; /* then the repair is the plain greedy: not counted */
            for (int32_t i = 0; i < sp.ndrop; i++) keeps_all &= plans[k].choice[i] < 0;
            bool counted = b[k - 1] < b[k] && !keeps_all;
            repairs += counted;
            if (fit) {
                repaired += counted;
                double cost = 0;
                for (int32_t i = 0; i < sp.ndrop; i++) cost += r.choice[i] >= 0 ? sp.cand[r.choice[i]].cost : 0;
                ck_assert_msg(cost >= wants[k - 1] - 1e-9, "seed %llu: repair costs %g below the least %g",
                              (unsigned long long)seed, cost, wants[k - 1]);
                repaired_least += counted && fabs(cost - wants[k - 1]) < 1e-9;
                mp_rsolve_info info;
                double obj = solve_checked(&rg, &sp, b[k - 1], &info, &r, NULL);
                ck_assert_msg(fabs(obj - wants[k - 1]) < 1e-9, "seed %llu: warm from the repair %g, oracle %g",
                              (unsigned long long)seed, obj, wants[k - 1]);
            }
            mp_rplan_free(&r);
        }
        for (int k = 0; k < nb; k++) mp_rplan_free(&plans[k]);
        free(oc);
        free(oc0);
        free(oc2);
        mp_rspace_free(&sp2);
        free(oc1);
        mp_rspace_free(&sp0);
        mp_rspace_free(&sp1);
        mp_rspace_free(&sp);
        mp_rgraph_free(&rg);
        tg_free(&tg);
    }
    printf("oracle: %d instances (%d with droppable values), %d budgets, %d with a recompute cost; %d values with "
           "several gaps, %d budgets cheaper than with one gap per value, %d candidates making an input inside; "
           "the bound on every plan is above 0 at %d budgets, equal to the least cost at %d; the bound on every "
           "plan's peak equals the least peak on %d instances, the space's LP bound on %d; %d retaining candidates, retention cheaper at %d "
           "budgets, dearer at %d; %d of %d plans repaired to a lower budget fit it, %d at its least cost\n",
           tested, with_drops, budgets, nontrivial, several, cheaper, inside, bounded, tight, peak_tight, bound_tight,
           retaining, retain_cheaper, retain_dearer, repaired, repairs, repaired_least);
    printf("oracle: a solve's proof raised the least peak's lower bound (no time to search) on %d instances; RINS "
           "found a plan cheaper than the LP's rounding at %d budgets; where neither the warm start nor the rounding "
           "fit, a search for any plan found the first at %d; Gomory's cuts raised the LP's bound at %d\n",
           proof_raised, near_cheaper, first_searched, cut);
    printf("oracle: the wide space of small graphs (on two instances in three): %d frontier inputs may leave after "
           "a recipe reads them, %d more candidates (recipes cut short or making inputs inside, %d of them several, level "
           "by level); cheaper than the narrow one at %d budgets, never dearer\n",
           gap_kept, more_cands, deep, gap_cheaper);
    printf("oracle: %d candidates keep a value they make for later recipes; the optimal plan takes one at %d "
           "budgets\n", keeping, keep_chosen);
    ck_assert_int_ge(keeping, 50);
    ck_assert_int_ge(keep_chosen, 5);
    ck_assert_int_ge(gap_cheaper, 10);
    ck_assert_int_ge(proof_raised, 50);
    ck_assert_int_ge(near_cheaper, 20);
    ck_assert_int_ge(first_searched, 20);
    ck_assert_int_ge(cut, 100);
    ck_assert_int_ge(repaired, repairs / 2);
    ck_assert_int_ge(peak_tight, 100);
    ck_assert_int_ge(bounded, 100);
    ck_assert_int_ge(tight, 50);
    ck_assert_int_ge(several, 50);
    ck_assert_int_ge(cheaper, 1);
    ck_assert_int_ge(inside, 20);
    ck_assert_int_ge(deep, 10);
    ck_assert_int_ge(retaining, 50);
    ck_assert_int_ge(retain_cheaper, 10);
    ck_assert_int_ge(with_drops, 150);
    ck_assert_int_ge(nontrivial, 200);
}
END_TEST

/* a (10 B, node f0, cost 5) -> b (10 B, f1, cost 2) -> c (10 B, f2) -> loss,
 * then the backward reads c, b, a in reverse. Steps 0..6 = f0 f1 f2 loss bw2 bw1 bw0.
 * Store everything: live 10 20 30 31 32 22 12 (peak 32 at bw2). a's gap is
 * 1..6, b's 2..5, c has none. Candidates: b at 5 (recipe f1, reads a), b at 5
 * making a for itself (recipe f0 f1, a must be away), a at 5 and at 6 (recipe
 * f0). Dropping b: away at 3, 4 -> peak 30 at f2, cost 2. Dropping a: away at
 * 2.. -> peak 22 (bw2 or bw1), cost 5. Step 1 (a, b) is 20 and bw1 (a, b, g2,
 * g1) is 22 unless a is away; a at 6 cannot join b at 5 (b's recipe reads a)
 * unless b's recipe makes a again: then the phase before bw1 holds g2, a and b
 * (21) and the least peak is 21, cost 12. */
/* Checkmate's exact program (tests/checkmate_milp.h) over the staged orders of
 * the oracle's random graphs, beside the space's least cost (the ILP's, proven
 * optimal, which the oracle above checks against every choice vector), from
 * just below the space's least peak to store everything. Checkmate's orders
 * recount within the budget at the cost it states, the bound on every plan
 * is never above it, and none fits below the bound on every plan's peak.
 * Where both fit, the space's least cost is counted as equal to Checkmate's,
 * above it (an order the space misses), or below it (two recipes of one phase
 * running a node twice, outside the staged orders); below the space's least
 * peak, where a staged order still fits. */
START_TEST(checkmate)
{
    int32_t graphs = 0, budgets = 0, equal = 0, above = 0, below = 0, peak_above = 0, bound_tight = 0, unsolved = 0;
    int32_t outside = 0, given_equal = 0, given_below = 0, unproven = 0;
    /* by hand, larger graphs: MP_CHECKMATE_NODES=16 (the least), MP_CHECKMATE_SECONDS (per program, 5),
     * MP_CHECKMATE_GRAPHS (100); on 17-20 nodes some of Checkmate's programs take GLPK over 20 s */
    const char *by_hand = getenv("MP_CHECKMATE_NODES");
    int32_t least_nodes = by_hand ? atoi(by_hand) : 0, ngraphs = 100;
    double seconds = 5;
    if (getenv("MP_CHECKMATE_SECONDS")) seconds = atof(getenv("MP_CHECKMATE_SECONDS"));
    if (getenv("MP_CHECKMATE_GRAPHS")) ngraphs = atoi(getenv("MP_CHECKMATE_GRAPHS"));
    for (uint64_t seed = 1; graphs < ngraphs; seed++) {
        ck_assert_msg(seed < 100000, "too few graphs of %d nodes or more", least_nodes);
        tgraph tg;
        random_graph(seed, &tg);
        if (by_hand ? tg.nn < least_nodes : tg.nn > 15) {
            tg_free(&tg);
            continue;
        }
        mp_rgraph rg;
        to_rgraph(&tg, &rg);
        mp_rspace sp;
        mp_err err = {""};
        ck_assert_msg(!mp_rspace_build(&rg, NULL, &sp, &err), "%s", err.msg);
        graphs++;
        int64_t lower, least = least_peak_range(&sp, &lower);
        if (by_hand && lower < least) { /* not proven in the guard's time (16-20 nodes): the graph is left out */
            unproven++;
            mp_rspace_free(&sp);
            mp_rgraph_free(&rg);
            tg_free(&tg);
            continue;
        }
        ck_assert_msg(lower == least, "seed %llu: the least peak (%lld) not proven in %d s: above %lld",
                      (unsigned long long)seed, (long long)least, GUARD_SECONDS, (long long)lower);
        /* no staged order goes below the bound on every plan's peak */
        int32_t lb_at;
        int64_t lb = mp_remat_any_plan_least_peak(&rg, &lb_at);
        double x0;
        mp_rsched o0;
        int below_lb = checkmate_solve(&rg, lb - 1, seconds, &x0, &o0);
        unsolved += below_lb < 0;
        ck_assert_msg(below_lb <= 0, "seed %llu: a staged order fits %lld, below the bound on every plan's peak",
                      (unsigned long long)seed, (long long)(lb - 1));
        int64_t b[6] = {least - 1, least, 0, 0, 0, sp.base_peak};
        for (int k = 2; k < 5; k++) b[k] = least + (int64_t)rnd((uint32_t)(sp.base_peak - least + 1));
        for (int k = 0; k < 6; k++) {
            double x;
            mp_rsched o;
            mp_rcount c;
            int got = checkmate_solve(&rg, b[k], seconds, &x, &o);
            mp_rsolve_info info;
            mp_rplan plan;
            double space = solve_checked(&rg, &sp, b[k], &info, NULL, &plan);
            ck_assert(k > 0 || !isfinite(space));
            mp_rsched given; /* the order the command gives: emitted, pruned of what the budget does not need */
            mp_rcount gc = {.recompute_cost = INFINITY};
            if (isfinite(space)) {
                ck_assert_int_eq(mp_rplan_order(&sp, &plan, b[k], &given, &gc, NULL, &err), 1);
                ck_assert(gc.peak_bytes <= b[k] && gc.recompute_cost <= space + 1e-9);
                mp_rsched_free(&given);
                mp_rplan_free(&plan);
            }
            unsolved += got < 0; /* GLPK's search not done in time (a few instances; the test allows 3 %) */
            outside += !got && isfinite(space);
            if (got <= 0) continue;
            ck_assert_msg(!mp_rsched_count(&rg, &o, &c, &err), "%s", err.msg);
            ck_assert_int_le(c.peak_bytes, b[k]);
            ck_assert_double_eq_tol(c.recompute_cost, x, 1e-9);
            mp_rsched_free(&o);
            bound_tight += fabs(any_plan_bound_checked(&rg, &sp, b[k], x) - x) < 1e-9; /* never above Checkmate's */
            if (!isfinite(space)) {
                peak_above++;
                continue;
            }
            budgets++;
            equal += fabs(space - x) < 1e-9;
            above += space > x + 1e-9;
            below += space < x - 1e-9;
            given_equal += fabs(gc.recompute_cost - x) < 1e-9;
            given_below += gc.recompute_cost < x - 1e-9; /* pruning may leave the staged orders */
        }
        mp_rspace_free(&sp);
        mp_rgraph_free(&rg);
        tg_free(&tg);
    }
    printf("checkmate: %d graphs of %s %d nodes, %d programs unsolved in %g s; at %d budgets where both fit, the "
           "space's least cost equal to Checkmate's at %d, above at %d, below at %d; just below the space's least peak "
           "a staged order fits on %d graphs; the space fits where no staged order does at %d budgets; the bound on "
           "every plan equal to Checkmate's cost at %d budgets; the order given (pruned) equal to Checkmate's at %d, "
           "below at %d; %d graphs left out (the space's least peak not proven in %d s)\n",
           graphs, by_hand ? "at least" : "at most", by_hand ? least_nodes : 15, unsolved, seconds, budgets, equal,
           above, below, peak_above, outside, bound_tight, given_equal, given_below, unproven, GUARD_SECONDS);
    ck_assert_int_ge(equal, budgets * 9 / 10);
    if (by_hand) return;
    /* every budget: 98.6 % without recipes keeping what they make for later ones (keep_nodes), 96.2 % without
     * the wide space either (wide_nodes), 80 % without retaining candidates everywhere */
    ck_assert_int_eq(equal, budgets);
    ck_assert_int_eq(given_equal, budgets); /* the order given, pruned, never costs more than the plan */
    /* 6-14 of 700 from run to run, with the machine's load: the budgets just below the wide space's least peak
     * are the hardest to prove empty */
    ck_assert_int_le(unsolved, graphs * 21 / 100);
    /* the space's least peak is every staged order's on every graph: 1 graph above without the gaps of one step,
     * 4 without every step of a gap either (every_step_nodes), 5 without the values retained wherever read, 9
     * without the level-by-level recipes, 26 without the wide space */
    ck_assert_int_eq(peak_above, 0);
}
END_TEST

/* n forward values of 10 B in a chain (costs cost[k]), a 1 B node after the
 * last, and a backward of 1 B nodes reading them again in reverse, each with
 * the gradient before it; the last is a graph output. */
static void reverse_chain(tgraph *tg, int32_t n, const double *cost, int32_t *v)
{
    memset(tg, 0, sizeof *tg);
    for (int32_t k = 0; k < n; k++) v[k] = tg_node(tg, k ? &v[k - 1] : NULL, k ? 1 : 0, 10, cost[k], true);
    int32_t g = tg_node(tg, &v[n - 1], 1, 1, 1, false);
    for (int32_t k = n - 1; k >= 0; k--) {
        int32_t in[2] = {g, v[k]};
        g = tg_node(tg, in, 2, 1, 1, false);
    }
    tg->keep[g] = 1;
}

/* A chain of four forward values, read again by the backward in reverse. At
 * its least peak (21 B, the least of every order: Checkmate's program finds
 * none at 20) c comes back before its backward reader from a alone, making b
 * and a for itself and freeing each after its read: a candidate with two
 * levels of made-inside inputs. With one level the space's least peak is 22. */
START_TEST(deep)
{
    tgraph tg;
    int32_t v[4];
    reverse_chain(&tg, 4, (const double[]){5, 2, 3, 4}, v);
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace sp;
    mp_err err = {""};
    mp_rspace_opts ro = mp_rspace_defaults();
    ro.every_step_nodes = 0; /* one candidate of each kind at c's reader */
    ck_assert_msg(!mp_rspace_build(&rg, &ro, &sp, &err), "%s", err.msg);
    int32_t deep = -1;
    for (int32_t c = 0; c < sp.ncand; c++)
        if (sp.cand[c].nexpand == 2) {
            ck_assert_int_eq(deep, -1);
            deep = c;
        }
    ck_assert_int_ge(deep, 0);
    const mp_rcand *cd = &sp.cand[deep];
    ck_assert(cd->value == v[2] && cd->nrecipe == 3 && cd->nfront == 0 && cd->cost == 10 && cd->recipe_peak == 20);
    ck_assert(cd->expand[0] == v[1] && cd->expand[1] == v[0]);
    int64_t least = least_peak_checked(&sp);
    ck_assert_int_eq(least, 21);
    double x;
    mp_rsched o;
    ck_assert_int_eq(checkmate_solve(&rg, least - 1, 10, &x, &o), 0);
    ck_assert_int_eq(checkmate_solve(&rg, least, 10, &x, &o), 1);
    mp_rsched_free(&o);
    mp_rsolve_info info;
    mp_rplan p;
    ck_assert_double_eq_tol(solve_checked(&rg, &sp, least, &info, NULL, &p), x, 1e-9);
    ck_assert_int_eq(p.choice[cd->group], deep);
    mp_rsched s;
    ck_assert(!mp_rplan_emit(&sp, &p, &s, &err));
    int32_t made[4] = {0}; /* reruns of the forward nodes, the only ones that rerun */
    for (int32_t k = 0; k < s.n; k++)
        if (s.recompute[k]) made[s.node[k]]++;
    /* a, b, c before c's reader; a, b (a made for b) before b's; a before its own: 3 * 5 + 2 * 2 + 3 */
    ck_assert(made[0] == 3 && made[1] == 2 && made[2] == 1 && made[3] == 0 && x == 22);
    mp_rsched_free(&s);
    mp_rplan_free(&p);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

/* a (10 B, cost 5), b = f(a) (20 B), c = f(b, a) (40 B), d = f(c) (50 B),
 * each but a of cost 1, then the backward: g = f(d) and a node reading g, c
 * and b, so b and c come back in one phase before it. At the least peak
 * (90 B: c and d at d's step, b away) c must be away at g's step too, and a,
 * dead since c's producer, feeds both recipes: b's recipe keeping a for c's
 * (its producer alone, reading a retained) reruns a once (7) where each
 * recipe rerunning it costs it twice (12), and keeping a from its last use
 * passes the budget. At every budget from the least peak to store
 * everything the space's least cost is Checkmate's. */
START_TEST(shared)
{
    tgraph tg = {0};
    int32_t a = tg_node(&tg, NULL, 0, 10, 5, true), b = tg_node(&tg, &a, 1, 20, 1, true);
    int32_t c = tg_node(&tg, (const int32_t[]){b, a}, 2, 40, 1, true), d = tg_node(&tg, &c, 1, 50, 1, true);
    int32_t g = tg_node(&tg, &d, 1, 1, 1, false), h = tg_node(&tg, (const int32_t[]){g, c, b}, 3, 1, 1, false);
    tg.keep[h] = 1;
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace sp, plain;
    mp_err err = {""};
    mp_rspace_opts ro = mp_rspace_defaults();
    ck_assert_msg(!mp_rspace_build(&rg, &ro, &sp, &err), "%s", err.msg);
    ro.keep_nodes = 0;
    ck_assert_msg(!mp_rspace_build(&rg, &ro, &plain, &err), "%s", err.msg);
    int32_t cheaper = 0, equal = 0, budgets = 0;
    int64_t least = least_peak_checked(&sp);
    ck_assert_int_eq(least, 90);
    ck_assert_int_eq(least_peak_checked(&plain), 90); /* keeping lowers the cost, not the peak, here */
    for (int64_t B = least; B <= sp.base_peak; B++) {
        double x;
        mp_rsched o;
        mp_rsolve_info info;
        mp_rplan p;
        double with = solve_checked(&rg, &sp, B, &info, NULL, &p);
        double without = solve_checked(&rg, &plain, B, &info, NULL, NULL);
        ck_assert(with <= without);
        budgets++;
        if (checkmate_solve(&rg, B, 10, &x, &o) > 0) {
            equal += fabs(with - x) < 1e-9;
            mp_rsched_free(&o);
        }
        if (with < without) { /* a recipe keeps a for another */
            ck_assert(with == 7 && without == 12);
            cheaper++;
            bool keeps = false;
            for (int32_t i = 0; i < sp.ndrop; i++)
                keeps |= p.choice[i] >= 0 && sp.cand[p.choice[i]].keep == a;
            ck_assert(keeps);
        }
        mp_rplan_free(&p);
    }
    printf("shared: %d budgets, the least cost equal to Checkmate's at %d, below the space without keeping at %d\n",
           budgets, equal, cheaper);
    ck_assert_int_eq(equal, budgets);
    ck_assert_int_ge(cheaper, 1);
    mp_rspace_free(&plain);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

/* Seed 488 of the oracle's graphs: at 259 B the least cost (12) takes v5
 * back by its producer cut short, retaining v3, beside its whole recipe at
 * the same step. The whole recipe's phase row, not chosen, counted v5 present
 * beside the retained v3 (303 B), as if no candidate of its group ran there:
 * the ILP's least cost was 19. */
START_TEST(sibling)
{
    tgraph tg;
    random_graph(488, &tg);
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace_opts so = mp_rspace_defaults(); /* the oracle's options for seed 488 */
    so.retain_over = INT32_MAX, so.retain_nodes = 0, so.wide_nodes = 1000, so.every_step_nodes = 0;
    mp_rspace sp;
    mp_err err = {""};
    ck_assert_msg(!mp_rspace_build(&rg, &so, &sp, &err), "%s", err.msg);
    outcome *oc = NULL;
    int32_t n = enumerate(&rg, &sp, &oc, 1 << 20);
    ck_assert_int_gt(n, 0);
    double want = oracle_cost(oc, n, 259);
    ck_assert_double_eq_tol(want, 12, 1e-9);
    mp_rsolve_info info;
    ck_assert_double_eq_tol(solve_checked(&rg, &sp, 259, &info, NULL, NULL), want, 1e-9);
    free(oc);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

/* Two of the by-hand run's graphs of 17 nodes (MP_CHECKMATE_NODES=16), where
 * Checkmate's staged orders were cheaper than every plan of the space: seed 93
 * reruns the end of a chain (2 nodes) reading two values kept since their last
 * use, one made deeper than the other, which no depth cuts and one held value
 * does not give (13 and 17 where Checkmate's cost 4 and 8); seed 19 makes an
 * away input inside a recipe cut short, the dead value before it retained (53
 * where Checkmate's costs 42). Each budget's least cost is Checkmate's, and the
 * plan takes such a recipe. */
START_TEST(cut_recipes)
{
    const struct {
        uint64_t seed;
        int64_t budget;
        int32_t nretain, nexpand; /* the least a candidate the plan takes has */
    } cases[] = {{93, 407, 2, 0}, {93, 384, 2, 0}, {19, 303, 1, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tgraph tg;
        random_graph(cases[k].seed, &tg);
        mp_rgraph rg;
        to_rgraph(&tg, &rg);
        mp_rspace sp;
        mp_err err = {""};
        ck_assert_msg(!mp_rspace_build(&rg, NULL, &sp, &err), "%s", err.msg);
        double want;
        mp_rsched o;
        ck_assert_int_eq(checkmate_solve(&rg, cases[k].budget, GUARD_SECONDS, &want, &o), 1);
        mp_rsched_free(&o);
        mp_rsolve_info info;
        mp_rplan p;
        ck_assert_double_eq_tol(solve_checked(&rg, &sp, cases[k].budget, &info, NULL, &p), want, 1e-9);
        bool taken = false;
        for (int32_t g = 0; g < sp.ndrop; g++) {
            const mp_rcand *c = p.choice[g] >= 0 ? &sp.cand[p.choice[g]] : NULL;
            taken |= c && c->nrecipe > 1 && c->nretain >= cases[k].nretain && c->nexpand >= cases[k].nexpand;
        }
        ck_assert_msg(taken, "seed %llu: no recipe cut short as Checkmate's", (unsigned long long)cases[k].seed);
        mp_rplan_free(&p);
        mp_rspace_free(&sp);
        mp_rgraph_free(&rg);
        tg_free(&tg);
    }
}
END_TEST

START_TEST(chain)
{
    tgraph tg;
    int32_t v[3];
    reverse_chain(&tg, 3, (const double[]){5, 2, 4}, v);
    int32_t a = v[0], b = v[1], c = v[2];
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace sp;
    mp_err err = {""};
    mp_rspace_opts so = mp_rspace_defaults();
    so.expand_nodes = 1000;
    so.every_step_nodes = 0; /* the steps counted by hand */
    ck_assert_msg(!mp_rspace_build(&rg, &so, &sp, &err), "%s", err.msg);
    const int64_t live[7] = {10, 20, 30, 31, 32, 22, 12};
    for (int t = 0; t < 7; t++) ck_assert_int_eq(sp.base_live[t], live[t]);
    ck_assert_int_eq(sp.base_peak, 32);
    ck_assert_int_eq(sp.ndrop, 2);
    ck_assert(sp.drop[0] == a && sp.drop[1] == b);
    ck_assert(sp.drop_index[a] == 0 && sp.drop_index[b] == 1 && sp.drop_index[c] == -1);
    ck_assert(sp.gap_start[0] == 1 && sp.gap_end[0] == 6 && sp.gap_start[1] == 2 && sp.gap_end[1] == 5);
    ck_assert_int_eq(sp.ncand, 4);
    ck_assert(sp.cand[0].value == a && sp.cand[0].step == 5 && sp.cand[1].value == a && sp.cand[1].step == 6);
    const mp_rcand *cb = &sp.cand[2], *cx = &sp.cand[3];
    ck_assert(sp.cand[0].group == 0 && sp.cand[1].group == 0 && cb->group == 1 && cx->group == 1);
    ck_assert(cb->value == b && cb->step == 5 && cb->nrecipe == 1 && cb->recipe[0] == 1 && cb->cost == 2);
    ck_assert(cb->nfront == 1 && cb->front[0] == a && cb->recipe_peak == 10 && cb->nexpand == 0);
    ck_assert(cx->value == b && cx->step == 5 && cx->nrecipe == 2 && cx->recipe[0] == 0 && cx->recipe[1] == 1);
    ck_assert(cx->cost == 7 && cx->nfront == 0 && cx->nexpand == 1 && cx->expand[0] == a && cx->recipe_peak == 20);

    const struct {
        int64_t budget;
        double cost;
        int64_t peak;
    } want[] = {{32, 0, 32}, {31, 2, 30}, {30, 2, 30}, {29, 5, 22}, {22, 5, 22}, {21, 12, 21}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        mp_rsolve_info info;
        ck_assert_double_eq(solve_checked(&rg, &sp, want[k].budget, &info, NULL, NULL), want[k].cost);
        ck_assert_int_eq(info.model_peak, want[k].peak);
    }
    /* The bound on every plan, by hand. At bw2 (step 4) its inputs and output
     * take 12 B and a, b must stay or be made again; at f2 (step 2) b, c take
     * 20 and a crosses it. 31, 30: 2 B or more must go at bw2, b is cheapest
     * (2). 29: 9 B are left for a at f2, so a goes (5). 21: 9 B at bw2, both
     * go (5 + 2), below the space's 12 (a is made twice there, which the bound
     * does not see). */
    const struct {
        int64_t budget;
        double bound;
    } any[] = {{32, 0}, {31, 2}, {30, 2}, {29, 5}, {22, 5}, {21, 7}};
    for (size_t k = 0; k < sizeof any / sizeof *any; k++)
        ck_assert_double_eq_tol(any_plan_bound_checked(&rg, &sp, any[k].budget, want[k].cost), any[k].bound, 1e-9);
    /* at 30 the plan drops b and recomputes it with f1 just before bw1 */
    mp_rplan p;
    mp_rsolve_info info;
    mp_rsolve_opts o = mp_rsolve_defaults();
    o.gap_limit = 0; /* proven optimal, as the oracle is */
    ck_assert(!mp_remat_solve(&sp, 30, &o, &p, &info, &err));
    mp_rsched s;
    ck_assert(!mp_rplan_emit(&sp, &p, &s, &err));
    const int32_t order[8] = {0, 1, 2, 3, 4, 1, 5, 6};
    ck_assert_int_eq(s.n, 8);
    for (int k = 0; k < 8; k++) ck_assert_int_eq(s.node[k], order[k]);
    ck_assert(s.recompute[5] && !s.recompute[4] && !s.recompute[6]);
    mp_rsched_free(&s);
    /* b back at 5 reads a, which comes back only at 6: a is retained in its gap until f1 reads it before bw1,
     * then freed and made again before bw0. f2 still holds a, b and c (30 B); cost 5 + 2 */
    p.choice[0] = 1, p.choice[1] = 2;
    ck_assert_msg(!mp_rplan_emit(&sp, &p, &s, &err), "%s", err.msg);
    const int32_t kept_in_gap[9] = {0, 1, 2, 3, 4, 1, 5, 0, 6};
    ck_assert_int_eq(s.n, 9);
    for (int k = 0; k < 9; k++) ck_assert_int_eq(s.node[k], kept_in_gap[k]);
    mp_rcount gap_cnt;
    int64_t gap_peak;
    ck_assert(!mp_rsched_count(&rg, &s, &gap_cnt, &err) && !mp_rplan_peak(&sp, &p, NULL, &gap_peak, &err));
    ck_assert(gap_cnt.peak_bytes == 30 && gap_peak == 30 && gap_cnt.recompute_cost == 7);
    mp_rsched_free(&s);
    /* a space without gap retention (big graphs) refuses that plan: b's recipe needs a resident at 5 */
    mp_rspace sp_strict;
    so.wide_nodes = 0;
    ck_assert(!mp_rspace_build(&rg, &so, &sp_strict, &err) && sp_strict.ncand == sp.ncand);
    ck_assert(sp.cand[2].nleave == 1 && sp.cand[2].leave[0] == a && sp_strict.cand[2].nleave == 0);
    ck_assert_int_eq(mp_rplan_emit(&sp_strict, &p, &s, &err), -1);
    ck_assert_msg(strstr(err.msg, "needs value 0"), "%s", err.msg);
    mp_rspace_free(&sp_strict);
    /* and one that makes a again while a is kept */
    p.choice[0] = -1, p.choice[1] = 3;
    ck_assert_int_eq(mp_rplan_emit(&sp, &p, &s, &err), -1);
    ck_assert_msg(strstr(err.msg, "makes value 0 (output of"), "%s", err.msg);
    /* a at 6 and b making a for itself at 5: a runs twice, once freed right after f1 reads it */
    p.choice[0] = 1, p.choice[1] = 3;
    ck_assert(!mp_rplan_emit(&sp, &p, &s, &err));
    const int32_t twice[10] = {0, 1, 2, 3, 4, 0, 1, 5, 0, 6};
    ck_assert_int_eq(s.n, 10);
    for (int k = 0; k < 10; k++) ck_assert_int_eq(s.node[k], twice[k]);
    mp_rcount cnt;
    ck_assert(!mp_rsched_count(&rg, &s, &cnt, &err));
    ck_assert(cnt.peak_bytes == 21 && cnt.recompute_cost == 12);
    mp_rsched_free(&s);
    mp_rplan_free(&p);

    ck_assert_int_eq(least_peak_checked(&sp), 21);

    /* (5) below the least peak */
    ck_assert(!mp_remat_solve(&sp, 20, &o, &p, &info, &err));
    ck_assert_int_eq(info.status, MP_RSOLVE_INFEASIBLE);
    mp_rplan_free(&p);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

/* A value read in the forward and at two backward nodes, with a memory peak
 * in each of its two long gaps: only dropping it in both gaps helps both.
 * Steps 0..8 = f0 fz f1 f2 g3 u4 f5 g6 u7:
 *   f0 -> A (100 B, cost 1), fz -> Z (60 B, cost 10), f1(A, Z) -> x1 (1),
 *   f2(x1) -> X2 (200), g3(X2) -> y3 (1), u4(A, y3) -> y4 (1),
 *   f5(y4) -> X5 (200), g6(X5) -> y6 (1), u7(A, Z, y6) -> out (1, kept).
 * Store everything: live 100 160 161 361 361 162 361 361 162. A's gaps are
 * 0..2, 2..5, 5..8 (groups 0, 1, 2), Z's 2..8 (group 3). At 301: dropping
 * A in 2..5 and 5..8 costs 2 (peak 261); with one gap per value A goes away
 * only in 2..5 and Z must go (cost 10). Least peaks: 201 and 301. */
START_TEST(multigap)
{
    tgraph tg;
    memset(&tg, 0, sizeof tg);
    int32_t A = tg_node(&tg, NULL, 0, 100, 1, true);
    int32_t Z = tg_node(&tg, NULL, 0, 60, 10, true);
    int32_t in[3] = {A, Z, 0};
    int32_t x = tg_node(&tg, in, 2, 1, 1, true);
    x = tg_node(&tg, &x, 1, 200, 1, true);
    x = tg_node(&tg, &x, 1, 1, 1, false);
    int32_t in4[2] = {A, x};
    x = tg_node(&tg, in4, 2, 1, 1, false);
    x = tg_node(&tg, &x, 1, 200, 1, false);
    x = tg_node(&tg, &x, 1, 1, 1, false);
    int32_t in7[3] = {A, Z, x};
    tg.keep[tg_node(&tg, in7, 3, 1, 1, false)] = 1;
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace sp, sp1;
    mp_err err = {""};
    mp_rspace_opts hand = mp_rspace_defaults(), o1;
    hand.every_step_nodes = 0; /* the steps counted by hand: each gap's end */
    o1 = hand;
    o1.max_gaps = 1;
    ck_assert_msg(!mp_rspace_build(&rg, &hand, &sp, &err), "%s", err.msg);
    ck_assert_msg(!mp_rspace_build(&rg, &o1, &sp1, &err), "%s", err.msg);
    const int64_t live[9] = {100, 160, 161, 361, 361, 162, 361, 361, 162};
    for (int t = 0; t < 9; t++) ck_assert_int_eq(sp.base_live[t], live[t]);
    ck_assert_int_eq(sp.ndrop, 4);
    ck_assert(sp.drop_index[A] == 0 && sp.drop_index[Z] == 3);
    const int32_t gs[4] = {0, 2, 5, 2}, ge[4] = {2, 5, 8, 8};
    for (int i = 0; i < 4; i++) {
        ck_assert(sp.drop[i] == (i < 3 ? A : Z) && sp.gap_start[i] == gs[i] && sp.gap_end[i] == ge[i]);
        ck_assert_int_eq(sp.cand_off[i + 1] - sp.cand_off[i], 1); /* back at the gap's end */
        ck_assert(sp.cand[sp.cand_off[i]].group == i && sp.cand[sp.cand_off[i]].step == ge[i]);
    }
    ck_assert(mp_rspace_group(&sp, A, 0) == -1 && mp_rspace_group(&sp, A, 1) == 0 && mp_rspace_group(&sp, A, 5) == 1);
    ck_assert(mp_rspace_group(&sp, A, 6) == 2 && mp_rspace_group(&sp, A, 9) == -1 && mp_rspace_group(&sp, x, 3) == -1);
    ck_assert(sp1.ndrop == 2 && sp1.gap_start[0] == 2 && sp1.gap_end[0] == 5); /* the earlier of two largest */

    mp_rsolve_info info;
    ck_assert_double_eq(solve_checked(&rg, &sp, 301, &info, NULL, NULL), 2);
    ck_assert_int_eq(info.model_peak, 261);
    ck_assert_double_eq(solve_checked(&rg, &sp1, 301, &info, NULL, NULL), 10);
    ck_assert_int_eq(info.model_peak, 301);
    mp_rplan p;
    mp_rsolve_opts o = mp_rsolve_defaults();
    o.gap_limit = 0; /* proven optimal, as the oracle is */
    ck_assert(!mp_remat_solve(&sp, 301, &o, &p, &info, &err));
    mp_rsched s;
    ck_assert(!mp_rplan_emit(&sp, &p, &s, &err));
    const int32_t order[11] = {0, 1, 2, 3, 4, 0, 5, 6, 7, 0, 8}; /* A made three times */
    ck_assert_int_eq(s.n, 11);
    for (int k = 0; k < 11; k++) ck_assert_int_eq(s.node[k], order[k]);
    ck_assert(s.recompute[5] && s.recompute[9] && !s.recompute[6]);
    mp_rcount c;
    ck_assert(!mp_rsched_count(&rg, &s, &c, &err));
    ck_assert(c.peak_bytes == 261 && c.recompute_cost == 2);
    mp_rsched_free(&s);
    mp_rplan_free(&p);

    ck_assert_int_eq(least_peak_checked(&sp), 201);
    ck_assert_int_eq(least_peak_checked(&sp1), 301);
    mp_rspace_free(&sp);
    mp_rspace_free(&sp1);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

/* ---- the scaling run (by hand) ---- */

/* A chain of F forward nodes with a residual read every 3rd node, a loss, and
 * per forward node two backward nodes (input and weight gradients). */
static void scaling_graph(int32_t F, tgraph *g)
{
    memset(g, 0, sizeof *g);
    rng = 7;
    int32_t *fwd = malloc((size_t)F * sizeof *fwd), *w = malloc((size_t)F * sizeof *w);
    for (int32_t i = 0; i < F; i++) w[i] = tg_value(g, -1, 1000 + rnd(4000));
    int32_t x = tg_value(g, -1, 100000);
    for (int32_t i = 0; i < F; i++) {
        int32_t in[3] = {i ? fwd[i - 1] : x, w[i], 0}, nin = 2;
        if (i >= 3 && i % 3 == 0) in[nin++] = fwd[i - 3];
        fwd[i] = tg_node(g, in, nin, 50000 + rnd(200000), 1 + rnd(100) / 10.0, true);
    }
    int32_t grad = tg_node(g, &fwd[F - 1], 1, 100000, 1, false);
    for (int32_t i = F - 1; i >= 0; i--) {
        int32_t in[3] = {grad, w[i], i ? fwd[i - 1] : x};
        int32_t gw = tg_node(g, in, 3, g->bytes[w[i]], 2, false);
        g->keep[gw] = 1;
        int32_t in2[3] = {grad, fwd[i], w[i]};
        grad = tg_node(g, in2, 3, g->bytes[fwd[i]], 2, false);
    }
    g->keep[grad] = 1;
    free(fwd);
    free(w);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(scaling)
{
    tgraph tg;
    scaling_graph(3300, &tg);
    mp_rgraph rg;
    to_rgraph(&tg, &rg);
    mp_rspace sp;
    mp_err err = {""};
    mp_rspace_opts so = mp_rspace_defaults();
    if (getenv("MP_ILP_GAPS")) so.max_gaps = atoi(getenv("MP_ILP_GAPS"));
    if (getenv("MP_ILP_CANDS")) so.max_candidates = atoi(getenv("MP_ILP_CANDS"));
    double t0 = seconds();
    ck_assert_msg(!mp_rspace_build(&rg, &so, &sp, &err), "%s", err.msg);
    double t1 = seconds();
    printf("scaling: %d nodes, %d values, %d groups (at most %d per value), %d candidates; space built in %.3f s\n",
           rg.nnodes, rg.nvalues, sp.ndrop, so.max_gaps, sp.ncand, t1 - t0);
    const char *tl = getenv("MP_ILP_TIME");
    mp_rsolve_opts o = mp_rsolve_defaults();
    o.time_limit = tl ? atof(tl) : 10;
    o.progress = getenv("MP_ILP_PROGRESS") != NULL;
    for (double f = getenv("MP_ILP_F") ? atof(getenv("MP_ILP_F")) : 0.9; f > 0.25; f -= 0.2) {
        int64_t budget = (int64_t)(f * (double)sp.base_peak);
        mp_rplan p;
        mp_rsolve_info info;
        if (mp_remat_solve(&sp, budget, &o, &p, &info, &err)) {
            printf("  %.0f%%: %s\n", 100 * f, err.msg);
            continue;
        }
        mp_rsched s;
        mp_rcount c = {0};
        if (info.status != MP_RSOLVE_INFEASIBLE && (mp_rplan_emit(&sp, &p, &s, &err) ||
                                                    mp_rsched_count(&rg, &s, &c, &err)))
            printf("  recount failed: %s\n", err.msg);
        else if (info.status != MP_RSOLVE_INFEASIBLE)
            mp_rsched_free(&s);
        printf("  budget %.0f%% of %lld: status %d, %d rows, %d cols, %d binaries, %.2f s, objective %.2f, "
               "bound %.2f, gap %.4f%%, model peak %lld, recount %lld\n",
               100 * f, (long long)sp.base_peak, info.status, info.rows, info.cols, info.binaries, info.seconds,
               info.objective, info.lp_bound, 100 * info.mip_gap, (long long)info.model_peak,
               (long long)c.peak_bytes);
        mp_rplan_free(&p);
    }
    int64_t peak;
    mp_rplan p;
    t0 = seconds();
    if (!mp_remat_min_peak(&sp, &o, &peak, &p, &err))
        printf("  least peak %lld (%.1f%% of store-everything) in %.2f s\n", (long long)peak,
               100.0 * (double)peak / (double)sp.base_peak, seconds() - t0);
    mp_rplan_free(&p);
    mp_rspace_free(&sp);
    mp_rgraph_free(&rg);
    tg_free(&tg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remat_ilp");
    TCase *tc = tcase_create("ilp"); /* CK_RUN_CASE=ilp: the small cases alone, in seconds */
    tcase_set_timeout(tc, 600);
    suite_add_tcase(s, tc);
    if (getenv("MP_ILP_SCALE")) {
        tcase_add_test(tc, scaling);
    } else {
        tcase_add_test(tc, chain);
        tcase_add_test(tc, deep);
        tcase_add_test(tc, shared);
        tcase_add_test(tc, sibling);
        tcase_add_test(tc, cut_recipes);
        tcase_add_test(tc, multigap);
        TCase *exact = tcase_create("exact"); /* the exhaustive oracle and Checkmate's program: minutes */
        tcase_set_timeout(exact, 600);
        tcase_add_test(exact, oracle);
        tcase_add_test(exact, checkmate);
        suite_add_tcase(s, exact);
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
