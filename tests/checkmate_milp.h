/* checkmate_milp.h - Checkmate's integer program (Jain et al., "Checkmate:
 * Breaking the Memory Wall with Optimal Tensor Rematerialization", MLSys
 * 2020, section 4), written afresh for GLPK as an exact oracle on small
 * graphs. It ranges over every staged order of an rgraph: stage t runs node t
 * last, after the forward nodes i < t it runs again, each at most once and in
 * node order. Memory follows the recount (mp_rsched_count): a node needs its
 * inputs present and allocates its outputs, a value is freed after its last
 * use, resident values stay, graph outputs stay to the end.
 *
 *   R[t][i]    node i runs in stage t (R[t][t] = 1; i < t only if it may rerun)
 *   S[t][v]    value v is present when stage t starts (carried from stage t-1)
 *   F[t][v][k] v is freed right after node k of stage t (k its producer or a
 *              reader): only if k ran, no later reader of v runs in stage t and
 *              v is not carried into t+1 (continuous: the program may free less
 *              than it could, which only counts more)
 *   U[t][k]    bytes present while node k of stage t runs:
 *              U[t][0] = sum_v b_v S[t][v] + out_0 R[t][0],
 *              U[t][k] = U[t][k-1] - sum_v b_v F[t][v][k-1] + out_k R[t][k] <= budget - resident
 *
 * and min sum_{i<t} cost_i R[t][i]. The solution comes back as the order it
 * stands for, for the caller to recount. Not memplan's formulation (docs/ilp.md): O(n^2)
 * binaries, for graphs of a few dozen nodes. A pinned value stays from its
 * producer to its last reader, which does not run again meanwhile. Orders
 * outside the staged ones (a node run twice before one node, as two recipes of
 * one phase may) are not in it. Included by the tests. */
#ifndef MP_CHECKMATE_MILP_H
#define MP_CHECKMATE_MILP_H

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"

typedef struct checkmate_milp {
    const mp_rgraph *rg;
    int32_t n, nv;
    int *rcol;                /* R[t][i] at t*(t+1)/2 + i */
    int *scol;                /* S[t][v] at t*nv + v; 0 where v cannot be carried in (resident, made at t or later) */
    int32_t *last;            /* nvalues: its last reader in the store-everything order (its producer when none) */
    int32_t *use_off, *use;   /* the readers of each value, ascending (CSR) */
    int *fcol, *prev_fcol;    /* the frees after the node just written and the one before (columns) */
    double *fbytes, *prev_fbytes;
    int32_t nf, prev_nf;
    glp_prob *P;
    int *ind;
    double *val;
} checkmate_milp;

static void cm_row(checkmate_milp *m, int len, int type, double lb, double ub)
{
    int r = glp_add_rows(m->P, 1);
    glp_set_row_bnds(m->P, r, type, lb, ub);
    glp_set_mat_row(m->P, r, len, m->ind, m->val);
}

/* A binary column, or (GLP_CV) a continuous one in [0, ub]. */
static int cm_col(checkmate_milp *m, int kind, double ub)
{
    int c = glp_add_cols(m->P, 1);
    glp_set_col_kind(m->P, c, kind);
    if (kind != GLP_BV) glp_set_col_bnds(m->P, c, GLP_DB, 0, ub);
    return c;
}

static void cm_fix(checkmate_milp *m, int col, double v) { glp_set_col_bnds(m->P, col, GLP_FX, v, v); }
static int cm_R(const checkmate_milp *m, int32_t t, int32_t i) { return m->rcol[t * (t + 1) / 2 + i]; }
static int cm_S(const checkmate_milp *m, int32_t t, int32_t v) { return t < m->n ? m->scol[t * m->nv + v] : 0; }
static bool cm_flag(const uint8_t *a, int32_t i) { return a && a[i]; }

/* Node i makes a pinned value still needed at stage t: it may not run again (the value is never dropped). */
static bool cm_pinned_alive(const checkmate_milp *m, int32_t i, int32_t t)
{
    const mp_rgraph *rg = m->rg;
    for (int32_t k = rg->out_off[i]; k < rg->out_off[i + 1]; k++)
        if (cm_flag(rg->pinned, rg->out[k]) && t <= m->last[rg->out[k]]) return true;
    return false;
}

/* F[t][v][k] for v made or read by node k of stage t, with its three kinds of upper bound; its column and
 * bytes join m->fcol for the next node's U row. */
static void cm_frees(checkmate_milp *m, int32_t t, int32_t k)
{
    const mp_rgraph *rg = m->rg;
    m->nf = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t lo = pass ? rg->in_off[k] : rg->out_off[k], hi = pass ? rg->in_off[k + 1] : rg->out_off[k + 1];
        for (int32_t e = lo; e < hi; e++) {
            int32_t v = pass ? rg->in[e] : rg->out[e];
            if (rg->producer[v] < 0 || cm_flag(rg->keep_to_end, v) || rg->bytes[v] <= 0) continue;
            bool seen = false; /* a node reading v twice frees it once */
            for (int32_t q = lo; q < e && !seen; q++) seen = (pass ? rg->in[q] : rg->out[q]) == v;
            if (seen) continue;
            int F = cm_col(m, GLP_CV, 1);
            m->ind[1] = F, m->val[1] = 1;
            m->ind[2] = cm_R(m, t, k), m->val[2] = -1;
            cm_row(m, 2, GLP_UP, 0, 0);
            m->val[2] = 1;
            if (cm_S(m, t + 1, v)) {
                m->ind[2] = cm_S(m, t + 1, v);
                cm_row(m, 2, GLP_UP, 0, 1);
            }
            for (int32_t r = m->use_off[v]; r < m->use_off[v + 1]; r++)
                if (m->use[r] > k && m->use[r] <= t) {
                    m->ind[2] = cm_R(m, t, m->use[r]);
                    cm_row(m, 2, GLP_UP, 0, 1);
                }
            m->fcol[m->nf] = F, m->fbytes[m->nf++] = (double)rg->bytes[v];
        }
    }
}

static void cm_build(checkmate_milp *m, int64_t budget)
{
    const mp_rgraph *rg = m->rg;
    int32_t n = m->n, nv = m->nv;
    int64_t resident = 0;
    for (int32_t v = 0; v < nv; v++) resident += rg->producer[v] < 0 ? rg->bytes[v] : 0;
    glp_set_obj_dir(m->P, GLP_MIN);
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i <= t; i++) {
            int c = m->rcol[t * (t + 1) / 2 + i] = cm_col(m, GLP_BV, 1);
            if (i == t) cm_fix(m, c, 1);
            else if (!cm_flag(rg->recomputable, i) || cm_pinned_alive(m, i, t)) cm_fix(m, c, 0);
            else glp_set_obj_coef(m->P, c, rg->cost ? rg->cost[i] : 0);
        }
    for (int32_t t = 1; t < n; t++)
        for (int32_t v = 0; v < nv; v++) {
            int32_t p = rg->producer[v];
            if (p < 0 || p >= t) continue;
            int c = m->scol[t * nv + v] = cm_col(m, GLP_BV, 1);
            if (cm_flag(rg->keep_to_end, v) || (cm_flag(rg->pinned, v) && t <= m->last[v])) cm_fix(m, c, 1);
        }
    for (int32_t t = 0; t < n; t++) {
        for (int32_t j = 0; j <= t; j++) /* a node's inputs are present: made earlier in this stage, or carried in */
            for (int32_t k = rg->in_off[j]; k < rg->in_off[j + 1]; k++) {
                int32_t v = rg->in[k], p = rg->producer[v], len = 0;
                if (p < 0) continue;
                m->ind[++len] = cm_R(m, t, j), m->val[len] = 1;
                m->ind[++len] = cm_R(m, t, p), m->val[len] = -1;
                if (cm_S(m, t, v)) m->ind[++len] = cm_S(m, t, v), m->val[len] = -1;
                cm_row(m, len, GLP_UP, 0, 0);
            }
        for (int32_t v = 0; t + 1 < n && v < nv; v++) { /* what is carried into t+1 is present in t */
            if (!cm_S(m, t + 1, v)) continue;
            int32_t len = 0;
            m->ind[++len] = cm_S(m, t + 1, v), m->val[len] = 1;
            m->ind[++len] = cm_R(m, t, rg->producer[v]), m->val[len] = -1;
            if (cm_S(m, t, v)) m->ind[++len] = cm_S(m, t, v), m->val[len] = -1;
            cm_row(m, len, GLP_UP, 0, 0);
        }
        int prevU = 0;
        for (int32_t k = 0; k <= t; k++) { /* the bytes while each node of the stage runs */
            int U = cm_col(m, GLP_CV, (double)(budget - resident)), len = 0;
            m->ind[++len] = U, m->val[len] = 1;
            double out = 0;
            for (int32_t o = rg->out_off[k]; o < rg->out_off[k + 1]; o++) out += (double)rg->bytes[rg->out[o]];
            if (out > 0) m->ind[++len] = cm_R(m, t, k), m->val[len] = -out;
            if (k == 0) {
                for (int32_t v = 0; v < nv; v++)
                    if (cm_S(m, t, v) && rg->bytes[v] > 0)
                        m->ind[++len] = cm_S(m, t, v), m->val[len] = -(double)rg->bytes[v];
            } else {
                m->ind[++len] = prevU, m->val[len] = -1;
                for (int32_t f = 0; f < m->prev_nf; f++)
                    m->ind[++len] = m->prev_fcol[f], m->val[len] = m->prev_fbytes[f];
            }
            cm_row(m, len, GLP_FX, 0, 0);
            cm_frees(m, t, k); /* after k: they enter U[t][k+1]'s row */
            int *sc = m->prev_fcol;
            double *sb = m->prev_fbytes;
            m->prev_fcol = m->fcol, m->prev_fbytes = m->fbytes, m->prev_nf = m->nf;
            m->fcol = sc, m->fbytes = sb;
            prevU = U;
        }
    }
}

/* The least recompute cost over the staged orders of rg that fit budget, and
 * one order reaching it. 1: solved to optimality; 0: no staged order fits;
 * -1: out of memory or not solved within seconds. */
static int checkmate_solve(const mp_rgraph *rg, int64_t budget, double seconds, double *cost, mp_rsched *order)
{
    int32_t n = rg->nnodes, nv = rg->nvalues, nin = n ? rg->in_off[n] : 0;
    int32_t maxio = 1;
    for (int32_t k = 0; k < n; k++)
        if (rg->in_off[k + 1] - rg->in_off[k] + rg->out_off[k + 1] - rg->out_off[k] > maxio)
            maxio = rg->in_off[k + 1] - rg->in_off[k] + rg->out_off[k + 1] - rg->out_off[k];
    /* the longest row: a U row at k = 0 (the values carried in), one with a node's frees, or a rerun's readers */
    size_t width = (size_t)nv + (size_t)nin + (size_t)maxio + 8;
    checkmate_milp m = {.rg = rg, .n = n, .nv = nv};
    m.rcol = calloc((size_t)n * (size_t)(n + 1) / 2 + 1, sizeof *m.rcol);
    m.scol = calloc((size_t)n * (size_t)nv + 1, sizeof *m.scol);
    m.last = malloc(((size_t)nv + 1) * sizeof *m.last);
    m.use_off = calloc((size_t)nv + 2, sizeof *m.use_off);
    m.use = malloc(((size_t)nin + 1) * sizeof *m.use);
    m.fcol = malloc(((size_t)maxio + 1) * sizeof *m.fcol);
    m.prev_fcol = malloc(((size_t)maxio + 1) * sizeof *m.prev_fcol);
    m.fbytes = malloc(((size_t)maxio + 1) * sizeof *m.fbytes);
    m.prev_fbytes = malloc(((size_t)maxio + 1) * sizeof *m.prev_fbytes);
    m.ind = malloc((width + 1) * sizeof *m.ind);
    m.val = malloc((width + 1) * sizeof *m.val);
    int rc = -1;
    memset(order, 0, sizeof *order);
    int64_t resident = 0;
    for (int32_t v = 0; v < nv; v++) resident += rg->producer[v] < 0 ? rg->bytes[v] : 0;
    if (budget < resident) {
        rc = 0; /* the resident values alone are over */
        goto done;
    }
    if (!m.rcol || !m.scol || !m.last || !m.use_off || !m.use || !m.fcol || !m.prev_fcol || !m.fbytes ||
        !m.prev_fbytes || !m.ind || !m.val)
        goto done;
    for (int32_t v = 0; v < nv; v++) m.last[v] = rg->producer[v];
    for (int32_t j = 0; j < n; j++) /* readers, each once per value, in node order */
        for (int32_t k = rg->in_off[j]; k < rg->in_off[j + 1]; k++) {
            int32_t v = rg->in[k];
            bool seen = false;
            for (int32_t q = rg->in_off[j]; q < k && !seen; q++) seen = rg->in[q] == v;
            if (!seen) m.use_off[v + 1]++, m.last[v] = j;
        }
    for (int32_t v = 0; v < nv; v++) m.use_off[v + 1] += m.use_off[v];
    int32_t *fill = malloc(((size_t)nv + 1) * sizeof *fill);
    if (!fill) goto done;
    memcpy(fill, m.use_off, (size_t)nv * sizeof *fill);
    for (int32_t j = 0; j < n; j++)
        for (int32_t k = rg->in_off[j]; k < rg->in_off[j + 1]; k++) {
            int32_t v = rg->in[k];
            if (fill[v] == m.use_off[v] || m.use[fill[v] - 1] != j) m.use[fill[v]++] = j;
        }
    free(fill);
    m.P = glp_create_prob();
    cm_build(&m, budget);
    glp_iocp iocp;
    glp_init_iocp(&iocp);
    iocp.msg_lev = GLP_MSG_OFF;
    iocp.presolve = GLP_ON;
    iocp.tm_lim = (int)(seconds * 1000);
    int ret = glp_intopt(m.P, &iocp), st = glp_mip_status(m.P);
    if (ret == GLP_ENOPFS || ret == GLP_ENODFS || st == GLP_NOFEAS) {
        rc = 0;
        goto done;
    }
    if (ret != 0 || st != GLP_OPT) goto done;
    *cost = glp_mip_obj_val(m.P);
    order->node = malloc(((size_t)n * (size_t)(n + 1) / 2 + 1) * sizeof *order->node);
    order->recompute = malloc((size_t)n * (size_t)(n + 1) / 2 + 1);
    if (!order->node || !order->recompute) {
        mp_rsched_free(order);
        goto done;
    }
    for (int32_t t = 0; t < n; t++)
        for (int32_t i = 0; i <= t; i++)
            if (glp_mip_col_val(m.P, cm_R(&m, t, i)) > 0.5) {
                order->node[order->n] = i;
                order->recompute[order->n++] = i < t;
            }
    rc = 1;
done:
    if (m.P) glp_delete_prob(m.P);
    free(m.rcol), free(m.scol), free(m.last), free(m.use_off), free(m.use);
    free(m.fcol), free(m.prev_fcol), free(m.fbytes), free(m.prev_fbytes), free(m.ind), free(m.val);
    glp_free_env();
    return rc;
}

#endif
