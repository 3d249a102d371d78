/* remat_bound.c - a lower bound on the recompute cost of every plan, not only
 * those of the ILP's decision space: any order that runs the schedule with
 * recomputations inserted (Checkmate's semantics) and fits the budget costs
 * at least this much.
 *
 * Take the original run of one node t. Memory then holds the resident values,
 * t's inputs and outputs, and each other value v made before t that is still
 * present (x_v = 1). A value read after t (or kept to the end) that is away at
 * t must be made again after t, by rerunning its producer (y_p = 1); a rerun
 * after t reads inputs that were present at t or were made again after t. So
 * every plan that fits gives a 0/1 point of
 *
 *     x_v + y_p(v) >= 1              v made before t, read after t
 *     y_p - x_u - y_p(u) <= 0        p rerun after t, u an input of p
 *     sum bytes_v x_v <= budget - resident - bytes(t's inputs and outputs)
 *
 * and costs at least sum cost_p y_p: the LP's minimum bounds every plan's.
 * Only the memory row couples the values, so the LP stays near the integer
 * minimum. The bound is the largest over the steps where store-everything
 * memory exceeds the budget most (docs/ilp.md, "A bound on every plan"). */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/remat.h"

#define BOUND_STEPS 64         /* the steps tried, largest store-everything memory first, while time lasts */
#define BOUND_INTEGER_COLS 1000 /* programs searched as 0/1, not only as an LP */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct bound_lp {
    const mp_rgraph *rg;
    int32_t *last_use;           /* nvalues: latest reader, -1 when none */
    int32_t *stamp;              /* nvalues: == t when the value is an input or output of t */
    int *xcol, *ycol;            /* nvalues / nnodes: GLPK columns, 0 when absent */
    int *ind;                    /* row scratch */
    double *val;
} bound_lp;

static bool needed_after(const bound_lp *b, int32_t v, int32_t t)
{
    return b->last_use[v] > t || b->rg->keep_to_end[v];
}

/* last[v] = the latest node reading v (-1: none; with to_end, nnodes for a
 * value kept to the end); every stamp cleared to -1. */
static void last_readers(const mp_rgraph *rg, int32_t *last, int32_t *stamp, bool to_end)
{
    for (int32_t v = 0; v < rg->nvalues; v++) last[v] = to_end && rg->keep_to_end[v] ? rg->nnodes : -1, stamp[v] = -1;
    for (int32_t i = 0; i < rg->nnodes; i++)
        for (int k = rg->in_off[i]; k < rg->in_off[i + 1]; k++)
            if (last[rg->in[k]] < i) last[rg->in[k]] = i;
}

/* Column of value v in the LP at step t: made before t, not resident, not
 * touched by t. Created on first use. */
static int x_of(bound_lp *b, glp_prob *P, int32_t v)
{
    if (!b->xcol[v]) {
        b->xcol[v] = glp_add_cols(P, 1);
        glp_set_col_bnds(P, b->xcol[v], GLP_DB, 0, 1);
    }
    return b->xcol[v];
}

/* The lower bound of the search: the bound of its best open node. */
static void best_bound(glp_tree *T, void *info)
{
    double *bound = info;
    int p = glp_ios_best_node(T);
    if (p && glp_ios_node_bound(T, p) > *bound) *bound = glp_ios_node_bound(T, p);
}

/* The program's minimum at step t (the LP's; the 0/1 program's, as far as the
 * search gets in time, on small programs), INFINITY when no plan fits there,
 * -1 when GLPK gives no answer in time. */
static double bound_at(bound_lp *b, int32_t t, int64_t budget, int64_t resident, double cost_unit, double seconds)
{
    const mp_rgraph *rg = b->rg;
    int64_t touched = 0;
    for (int k = rg->in_off[t]; k < rg->in_off[t + 1]; k++) b->stamp[rg->in[k]] = t;
    for (int k = rg->out_off[t]; k < rg->out_off[t + 1]; k++) b->stamp[rg->out[k]] = t;
    for (int32_t v = 0; v < rg->nvalues; v++)
        if (b->stamp[v] == t && rg->producer[v] >= 0) touched += rg->bytes[v];
    double cap = (double)(budget - resident - touched);
    if (cap < 0) return INFINITY;
    memset(b->xcol, 0, (size_t)rg->nvalues * sizeof *b->xcol);
    memset(b->ycol, 0, (size_t)rg->nnodes * sizeof *b->ycol);

    glp_prob *P = glp_create_prob();
    glp_set_obj_dir(P, GLP_MIN);
    for (int32_t p = 0; p < t; p++)
        if (rg->recomputable[p]) {
            b->ycol[p] = glp_add_cols(P, 1);
            glp_set_col_bnds(P, b->ycol[p], GLP_DB, 0, 1);
            glp_set_obj_coef(P, b->ycol[p], rg->cost[p] / cost_unit);
        }
    /* in the model: made before t, not resident, not t's own */
    #define IN_LP(v) (rg->producer[v] >= 0 && rg->producer[v] < t && b->stamp[v] != t)
    for (int32_t v = 0; v < rg->nvalues; v++) { /* needed after t: present, or made again */
        if (!IN_LP(v) || !needed_after(b, v, t)) continue;
        int32_t p = rg->producer[v];
        int x = x_of(b, P, v);
        if (!b->ycol[p] || rg->pinned[v] || rg->keep_to_end[v]) { /* never away */
            glp_set_col_bnds(P, x, GLP_FX, 1, 1);
            continue;
        }
        int r = glp_add_rows(P, 1);
        b->ind[1] = x, b->val[1] = 1, b->ind[2] = b->ycol[p], b->val[2] = 1;
        glp_set_mat_row(P, r, 2, b->ind, b->val);
        glp_set_row_bnds(P, r, GLP_LO, 1, 0);
    }
    for (int32_t p = 0; p < t; p++) { /* a rerun reads its inputs */
        if (!b->ycol[p]) continue;
        for (int k = rg->in_off[p]; k < rg->in_off[p + 1]; k++) {
            int32_t u = rg->in[k];
            bool dup = false;
            for (int j = rg->in_off[p]; j < k; j++) dup |= rg->in[j] == u;
            if (dup || !IN_LP(u)) continue;
            int len = 0;
            b->ind[++len] = b->ycol[p], b->val[len] = 1;
            b->ind[++len] = x_of(b, P, u), b->val[len] = -1;
            if (b->ycol[rg->producer[u]]) b->ind[++len] = b->ycol[rg->producer[u]], b->val[len] = -1;
            int r = glp_add_rows(P, 1);
            glp_set_mat_row(P, r, len, b->ind, b->val);
            glp_set_row_bnds(P, r, GLP_UP, 0, 0);
        }
    }
    #undef IN_LP
    /* memory, in units of the largest value so the row stays well scaled */
    int64_t big = 1;
    for (int32_t v = 0; v < rg->nvalues; v++)
        if (b->xcol[v] && rg->bytes[v] > big) big = rg->bytes[v];
    int len = 0;
    for (int32_t v = 0; v < rg->nvalues; v++)
        if (b->xcol[v] && rg->bytes[v] > 0) b->ind[++len] = b->xcol[v], b->val[len] = (double)rg->bytes[v] / big;
    int r = glp_add_rows(P, 1);
    if (len) glp_set_mat_row(P, r, len, b->ind, b->val);
    glp_set_row_bnds(P, r, GLP_UP, 0, cap / big);

    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    smcp.presolve = GLP_ON;
    smcp.tm_lim = (int)fmax(1, fmin(seconds * 1000, 1e9));
    double start = now(), out = -1;
    int ret = glp_simplex(P, &smcp);
    if (ret == GLP_ENOPFS) { /* "no plan fits" is a strong claim: the presolver's, on scaled rows, is checked */
        smcp.presolve = GLP_OFF;
        smcp.tm_lim = (int)fmax(1, fmin((seconds - (now() - start)) * 1000, 1e9));
        ret = glp_simplex(P, &smcp);
    }
    int st = ret ? GLP_UNDEF : glp_get_status(P);
    if (st == GLP_OPT) out = glp_get_obj_val(P);
    else if (st == GLP_NOFEAS) out = INFINITY;
    double left = seconds - (now() - start);
    /* the 0/1 program, where a whole value is away or not: on small programs,
     * whose LP one fractional value can leave far below (on large ones the
     * search costs its whole time and gains nothing, measured on GPT-2) */
    if (st == GLP_OPT && left > 0.01 && glp_get_num_cols(P) <= BOUND_INTEGER_COLS) {
        for (int j = 1; j <= glp_get_num_cols(P); j++)
            if (glp_get_col_type(P, j) != GLP_FX) glp_set_col_kind(P, j, GLP_BV);
        glp_iocp iocp;
        glp_init_iocp(&iocp);
        iocp.msg_lev = GLP_MSG_OFF;
        iocp.tm_lim = (int)fmax(1, fmin(left * 1000, 1e9));
        iocp.cb_func = best_bound;
        double found = out;
        iocp.cb_info = &found;
        glp_intopt(P, &iocp);
        if (glp_mip_status(P) == GLP_OPT) found = glp_mip_obj_val(P);
        else if (glp_mip_status(P) == GLP_NOFEAS) found = INFINITY;
        out = fmax(out, found); /* stopped early: the search's best bound, never below the LP's */
    }
    glp_delete_prob(P);
    return out < 0 || isinf(out) ? out : fmax(0, out * cost_unit);
}

/* steps by decreasing live[], ties by step (a merge sort: stable, n log n) */
static void sort_by_live(int32_t *a, int32_t n, const int64_t *live)
{
    if (n < 2) return;
    int32_t h = n / 2, *tmp = malloc((size_t)n * sizeof *tmp);
    sort_by_live(a, h, live);
    sort_by_live(a + h, n - h, live);
    if (!tmp) { /* out of memory: insertion, slow but right */
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = i; j > 0 && live[a[j]] > live[a[j - 1]]; j--) {
                int32_t t = a[j];
                a[j] = a[j - 1], a[j - 1] = t;
            }
        return;
    }
    for (int32_t i = 0, j = h, k = 0; k < n; k++)
        tmp[k] = j >= n || (i < h && live[a[i]] >= live[a[j]]) ? a[i++] : a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
    free(tmp);
}

int mp_remat_any_plan_bound(const mp_rgraph *rg, int64_t budget, double seconds, double *cost, int32_t *step,
                            mp_err *err)
{
    *cost = 0, *step = -1;
    int32_t n = rg->nnodes, nv = rg->nvalues;
    if (n == 0) return 0;
    bound_lp b = {.rg = rg};
    int64_t *live = calloc((size_t)n + 1, sizeof *live);
    int32_t *steps = malloc((size_t)n * sizeof *steps);
    b.last_use = malloc(((size_t)nv + 1) * sizeof *b.last_use);
    b.stamp = malloc(((size_t)nv + 1) * sizeof *b.stamp);
    b.xcol = malloc(((size_t)nv + 1) * sizeof *b.xcol);
    b.ycol = malloc(((size_t)n + 1) * sizeof *b.ycol);
    size_t row = (size_t)nv + 4;
    b.ind = malloc(row * sizeof *b.ind);
    b.val = malloc(row * sizeof *b.val);
    int rc = -1;
    if (!live || !steps || !b.last_use || !b.stamp || !b.xcol || !b.ycol || !b.ind || !b.val) {
        mp_fail(err, "out of memory in the recompute bound");
        goto done;
    }
    last_readers(rg, b.last_use, b.stamp, false);
    int64_t resident = 0;
    for (int32_t v = 0; v < nv; v++) { /* store-everything memory at each step, as a difference array */
        int32_t p = rg->producer[v];
        if (p < 0) {
            resident += rg->bytes[v];
            continue;
        }
        int32_t end = rg->keep_to_end[v] ? n - 1 : b.last_use[v] > p ? b.last_use[v] : p;
        live[p] += rg->bytes[v], live[end + 1] -= rg->bytes[v];
    }
    for (int32_t i = 1; i < n; i++) live[i] += live[i - 1];
    int32_t ns = 0; /* the steps above the budget, largest first */
    for (int32_t i = 0; i < n; i++)
        if (resident + live[i] > budget) steps[ns++] = i;
    sort_by_live(steps, ns, live);
    double unit = 0;
    for (int32_t i = 0; i < n; i++) unit = fmax(unit, rg->cost[i]);
    if (unit <= 0) unit = 1;
    glp_term_out(GLP_OFF);
    /* the largest steps first: the step with the most to take away usually
     * bounds most, so it gets up to 3x the time, and a bound on big graphs */
    double start = now(), deadline = start + seconds, best = -1;
    for (int32_t k = 0; k < ns && k < BOUND_STEPS && (k == 0 || now() < deadline); k++) {
        double c = bound_at(&b, steps[k], budget, resident, unit, k ? deadline - now() : 3 * seconds);
        if (c > best) best = c, *step = steps[k];
        if (isinf(c)) break;
    }
    if (best > 0) *cost = best;
    glp_free_env();
    rc = 0;
done:
    free(live), free(steps), free(b.last_use), free(b.stamp), free(b.xcol), free(b.ycol), free(b.ind), free(b.val);
    return rc;
}

/* Whether v stays live from its producer to its last use in every order: it
 * cannot be made again. */
static bool fixed_value(const mp_rgraph *rg, int32_t v)
{
    return !rg->recomputable[rg->producer[v]] || rg->pinned[v] || rg->keep_to_end[v];
}

/* v's bytes at node t's run, once per node (stamp), unless v is fixed and t
 * lies strictly inside its life (counted with what crosses t). */
static int64_t own_bytes(const mp_rgraph *rg, int32_t t, int32_t v, const int32_t *end, int32_t *stamp)
{
    if (rg->producer[v] < 0 || stamp[v] == t) return 0;
    stamp[v] = t;
    return fixed_value(rg, v) && rg->producer[v] < t && t < end[v] ? 0 : rg->bytes[v];
}

int64_t mp_remat_any_plan_least_peak(const mp_rgraph *rg, int32_t *step)
{
    int32_t n = rg->nnodes, nv = rg->nvalues;
    int64_t resident = 0, best = 0, run = 0, *cross = calloc((size_t)n + 1, sizeof *cross);
    int32_t *end = malloc(((size_t)nv + 1) * sizeof *end), *stamp = malloc(((size_t)nv + 1) * sizeof *stamp);
    *step = -1;
    if (!cross || !end || !stamp) {
        free(cross), free(end), free(stamp);
        return -1;
    }
    last_readers(rg, end, stamp, true); /* kept to the end: n, live at the last step too */
    for (int32_t v = 0; v < nv; v++) { /* fixed values strictly inside their lives, as a difference array */
        int32_t p = rg->producer[v];
        if (p < 0) resident += rg->bytes[v];
        else if (fixed_value(rg, v) && end[v] > p + 1) cross[p + 1] += rg->bytes[v], cross[end[v]] -= rg->bytes[v];
    }
    for (int32_t t = 0; t < n; t++) {
        run += cross[t];
        int64_t here = resident + run;
        for (int k = rg->in_off[t]; k < rg->in_off[t + 1]; k++) here += own_bytes(rg, t, rg->in[k], end, stamp);
        for (int k = rg->out_off[t]; k < rg->out_off[t + 1]; k++) here += own_bytes(rg, t, rg->out[k], end, stamp);
        if (here > best) best = here, *step = t;
    }
    free(cross), free(end), free(stamp);
    return best;
}
