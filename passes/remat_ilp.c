/* remat_ilp.c - the keep/recompute integer program on GLPK (docs/ilp.md):
 * one binary per candidate, at most one per group (value, gap), frontier rows so a recipe
 * only reads what is resident, and memory as running sums over the steps
 * (D_t = bytes away at step t, less those retained), so the matrix stays
 * O(nodes + candidates); retention adds a continuous column per (retained
 * value, reader).
 * The LP relaxation gives the bound; a greedy plan, counted by the model
 * itself (mp_rplan_peak), is the warm start. */
#include <float.h>
#define GLP_UNDOC /* glp_gmi_gen: in GLPK 5.0's library, declared only under this */
#include <glpk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/remat.h"

mp_rsolve_opts mp_rsolve_defaults(void)
{
    return (mp_rsolve_opts){.time_limit = 5, .gap_limit = 0.01, .progress = false, .warm = NULL};
}

/* Dual simplex pricing by the program's size: Dantzig's (cheap iterations)
 * wins on the programs of ResNet-50, GPT-2 and ViT-B/16 (500-3,000 rows);
 * projected steepest edge on large ones, where Dantzig's needs many times the
 * iterations: Moccasin's n500 (17,000 rows) did not finish its LP in 10 s and
 * finishes in under 2 s (docs/benchmarks.md). */
enum { PSE_ROWS = 8000 };
static int pricing_for(glp_prob *P) { return glp_get_num_rows(P) >= PSE_ROWS ? GLP_PT_PSE : GLP_PT_STD; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GLPK's time limit (ms, at least 1) for what is left until deadline. */
static int ms_left(double deadline)
{
    double left = deadline - now();
    return left > 0.001 ? (int)fmin(left * 1000, 1e9) : 1;
}

static int64_t vbytes(const mp_rspace *sp, int32_t c) { return sp->rg->bytes[sp->cand[c].value]; }

static double plan_cost(const mp_rspace *sp, const int32_t *choice)
{
    double s = 0;
    for (int32_t i = 0; i < sp->ndrop; i++)
        if (choice[i] >= 0) s += sp->cand[choice[i]].cost;
    return s;
}

/* ---- the greedy warm start ---- */

typedef struct greedy_cand {
    int32_t c;
    double first, ratio;      /* a preference (e.g. minus the LP value), then cost per byte-step freed */
} greedy_cand;

static int cmp_ratio(const void *a, const void *b)
{
    const greedy_cand *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->ratio != y->ratio) return x->ratio < y->ratio ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

/* Bytes over budget, summed over the steps: smoother than the peak, so a
 * candidate that helps one of several steps at the peak still counts. */
static int64_t excess(const int64_t *step_peak, int32_t n, int64_t budget)
{
    int64_t e = 0;
    for (int32_t t = 0; t < n; t++)
        if (step_peak[t] > budget) e += step_peak[t] - budget;
    return e;
}

/* c may join the plan: its frontier inputs are not away at its step, what it
 * makes for itself is, and no chosen recipe reading its value needs it earlier. readers[off[i]..off[i+1])
 * are the candidates having drop[i] in their frontier. */
static bool compatible(const mp_rspace *sp, const int32_t *choice, const int32_t *off, const int32_t *readers,
                       int32_t c)
{
    const mp_rcand *rc = &sp->cand[c];
    for (int32_t f = 0; f < rc->nfront; f++) {
        int32_t j = mp_rspace_group(sp, rc->front[f], rc->step);
        if (j >= 0 && choice[j] >= 0 && sp->cand[choice[j]].step > rc->step) return false;
    }
    for (int32_t e = 0; e < rc->nexpand; e++) { /* what the recipe makes for itself must be away */
        int32_t j = mp_rspace_group(sp, rc->expand[e], rc->step);
        if (j < 0 || choice[j] < 0 || sp->cand[choice[j]].step <= rc->step) return false;
    }
    int32_t i = rc->group;
    for (int32_t k = off[i]; k < off[i + 1]; k++) {
        const mp_rcand *r = &sp->cand[readers[k]];
        if (choice[r->group] == readers[k] && r->step < rc->step) return false;
    }
    return true;
}

/* Drops values in order of cost per byte-step freed (after those whose LP
 * value is at least theta when lp is given, the largest first) while that lowers the bytes over
 * budget, then keeps again the costliest ones it can afford to. choice gets
 * the plan (feasible or not), *peak its model peak. */
static int greedy(const mp_rspace *sp, int64_t budget, const double *lp, double theta, int32_t *choice,
                  int64_t *peak, mp_err *err)
{
    int32_t nn = sp->rg->nnodes, nd = sp->ndrop, nc = sp->ncand;
    mp_rplan p = {.choice = choice};
    for (int32_t i = 0; i < nd; i++) choice[i] = -1;
    int64_t *cur = malloc(((size_t)nn + 1) * sizeof *cur), *tmp = malloc(((size_t)nn + 1) * sizeof *tmp);
    greedy_cand *order = malloc(((size_t)nc + 1) * sizeof *order);
    int32_t *off = calloc((size_t)nd + 2, sizeof *off), *readers = NULL, *chosen = NULL;
    int rc = -1;
    if (!cur || !tmp || !order || !off) {
        mp_fail(err, "out of memory in the remat greedy");
        goto done;
    }
    if (mp_rplan_peak(sp, &p, cur, peak, err)) goto done;
    int64_t ex = excess(cur, nn, budget);
    /* who reads each value through a frontier */
    int32_t nr = 0;
    for (int32_t c = 0; c < nc; c++)
        for (int32_t f = 0; f < sp->cand[c].nfront; f++)
            off[mp_rspace_group(sp, sp->cand[c].front[f], sp->cand[c].step) + 1]++, nr++;
    for (int32_t i = 0; i < nd; i++) off[i + 1] += off[i];
    readers = malloc(((size_t)nr + 1) * sizeof *readers);
    chosen = malloc(((size_t)nd + 1) * sizeof *chosen);
    if (!readers || !chosen) {
        mp_fail(err, "out of memory in the remat greedy");
        goto done;
    }
    for (int32_t i = 0; i < nd; i++) chosen[i] = off[i]; /* chosen: fill positions for now */
    for (int32_t c = 0; c < nc; c++)
        for (int32_t f = 0; f < sp->cand[c].nfront; f++)
            readers[chosen[mp_rspace_group(sp, sp->cand[c].front[f], sp->cand[c].step)]++] = c;
    int32_t no = 0;
    for (int32_t c = 0; c < nc; c++) {
        const mp_rcand *r = &sp->cand[c];
        int32_t away = r->step - sp->gap_start[r->group] - 1; /* 0 in a gap of one step: away in a phase only */
        double len = away > 0 ? away : 0.5;
        double first = lp && lp[c] >= theta ? -floor(lp[c] * 20 + 1e-9) : 0; /* LP values in steps of 0.05 */
        if (vbytes(sp, c) > 0) order[no++] = (greedy_cand){c, first, r->cost / ((double)vbytes(sp, c) * len)};
    }
    qsort(order, (size_t)no, sizeof *order, cmp_ratio);
    for (int32_t k = 0; k < no && ex > 0; k++) {
        int32_t c = order[k].c, i = sp->cand[c].group;
        if (choice[i] >= 0) continue;
        bool helps = false; /* it frees bytes only at steps a+1 .. q-1 */
        for (int32_t t = sp->gap_start[i] + 1; t < sp->cand[c].step && !helps; t++)
            helps = cur[t] > budget;
        if (!helps || !compatible(sp, choice, off, readers, c)) continue;
        choice[i] = c;
        int64_t pk;
        mp_err broke; /* c's recipe makes a retained value again, or retains one that a chosen recipe makes */
        if (mp_rplan_peak(sp, &p, tmp, &pk, &broke)) {
            choice[i] = -1;
            continue;
        }
        int64_t e = excess(tmp, nn, budget);
        if (e < ex) {
            int64_t *sw = cur;
            cur = tmp, tmp = sw;
            ex = e, *peak = pk;
        } else {
            choice[i] = -1;
        }
    }
    if (ex == 0) { /* keep again what the budget allows, costliest first */
        int32_t nch = 0;
        for (int32_t i = 0; i < nd; i++)
            if (choice[i] >= 0) order[nch++] = (greedy_cand){choice[i], -sp->cand[choice[i]].cost, 0};
        qsort(order, (size_t)nch, sizeof *order, cmp_ratio);
        for (int32_t k = 0; k < nch; k++) chosen[k] = order[k].c;
        for (int32_t k = 0; k < nch; k++) {
            int32_t i = sp->cand[chosen[k]].group;
            choice[i] = -1;
            int64_t pk; /* a kept value is resident for every reader, but a recipe may need it away */
            mp_err broke;
            if (mp_rplan_peak(sp, &p, NULL, &pk, &broke) || pk > budget) choice[i] = chosen[k];
        }
    }
    if (mp_rplan_peak(sp, &p, NULL, peak, err)) goto done;
    rc = 0;
done:
    free(cur);
    free(tmp);
    free(order);
    free(off);
    free(readers);
    free(chosen);
    return rc;
}

/* ---- the integer program ---- */

#define SMALL_PROGRAM 2000 /* candidates: cuts (and the cover rows they need) pay off up to about this size */
#define MFV_NZ 100000      /* non-zeros above which the second search branches on the most fractional candidate */

/* A retained value and a candidate whose recipe reads it, with the reader's place in the order. The span says
 * where the value is kept alive: after its last use (span = value), or in the gap of its group g while it is
 * away there (span = nvalues + g: gap retention, where the space allows it). */
typedef struct ret_entry {
    int32_t value, step, group, cand, span;
} ret_entry;

/* Two entries of one span read at the same place in the order: the same step, the same group. */
static bool same_place(const ret_entry *x, const ret_entry *y)
{
    return x->span == y->span && x->step == y->step && x->group == y->group;
}

static int cmp_ret(const void *a, const void *b)
{
    const ret_entry *x = a, *y = b;
    if (x->span != y->span) return (x->span > y->span) - (x->span < y->span);
    if (x->step != y->step) return (x->step > y->step) - (x->step < y->step);
    return (x->group > y->group) - (x->group < y->group);
}

typedef struct ilp {
    const mp_rspace *sp;
    int64_t budget;
    bool peak_mode;           /* B is a column to minimize */
    int64_t floor;            /* rows that cannot exceed it are not written: the budget, or a bound below any peak */
    glp_prob *P;
    int *ia, *ja;             /* triplets, 1-based as GLPK wants them */
    double *ar;
    int nz, cap;
    int *dcol;                /* nnodes: column of D_t, 0 where no row needs it */
    int bcol;
    double oscale;            /* objective coefficients are cost * oscale (largest 1): GLPK's tolerances are absolute */
    double unit;              /* bytes per unit of the memory rows: a power of two keeping them near 10^4 (1 on small graphs) */
    double *heur;             /* a warm start for the callback, 1-based over all columns, or NULL */
    bool fed;
    double bound;             /* best bound seen in the search */
    double deadline;          /* the search stops here: GLPK looks at its own limit only between nodes */
    double branched_at;       /* when the callback last let GLPK branch (0: not since the last call) */
    double branch_cost;       /* the longest time from there to the next call: choosing the column, branching */
    double stop_gap;          /* when > 0, the search stops once its plan is this close to bound (closed) */
    bool closed;
    int32_t *front;           /* frontier rows not yet written: (candidate, drop index of its input) pairs */
    int32_t nfront, capfront;
    uint8_t *written;         /* nfront */
    int *prow;                /* cost mode: the phase rows, and the step of each (set_budget moves their bounds) */
    int32_t *pstep, nphase;
    /* retention: a column z_e per entry, by span, then in the order the readers run; z_e = 1 when a chosen
     * reader at e or later keeps the value alive, so the value lives until the latest one */
    ret_entry *ret;
    int32_t nret;
    int *zcol;
    uint8_t *away_before;     /* ncand: the phase rows count the candidate's value away before its recipe, not after
                               * (it reads retained values there, or keeps one: add_phase_rows) */
    int32_t *ret_first;       /* nvalues + ndrop + 1: the entries of span s are ret[ret_first[s] .. ret_first[s + 1]) */
    int32_t *at_off, *at;     /* the entries by step (nnodes + 1 offsets), each step's by value, then group */
    int64_t *ret_node, *ret_phase; /* nnodes: the most bytes retention can add at node t, and before it */
    const mp_rsolve_opts *offer; /* cost mode: on_plan gets each incumbent */
    int32_t *offered;         /* ndrop: the incumbent as choices */
    double offered_cost;      /* the cost of the last plan offered (the warm start's, the rounding's, ...) */
} ilp;

static int put(ilp *m, int row, int col, double v)
{
    if (v == 0) return 0;
    if (m->nz + 1 >= m->cap) {
        int cap = m->cap ? 2 * m->cap : 1024;
        int *ia = realloc(m->ia, (size_t)cap * sizeof *ia);
        if (ia) m->ia = ia;
        int *ja = realloc(m->ja, (size_t)cap * sizeof *ja);
        if (ja) m->ja = ja;
        double *ar = realloc(m->ar, (size_t)cap * sizeof *ar);
        if (ar) m->ar = ar;
        if (!ia || !ja || !ar) return -1;
        m->cap = cap;
    }
    m->nz++;
    m->ia[m->nz] = row, m->ja[m->nz] = col, m->ar[m->nz] = v;
    return 0;
}

static int new_row(ilp *m, int type, double lb, double ub)
{
    int r = glp_add_rows(m->P, 1);
    glp_set_row_bnds(m->P, r, type, lb, ub);
    return r;
}

/* Can the phase row of candidate c bind? Alone it adds recipe_peak - bytes to what crosses into its step. */
static bool phase_binds(const ilp *m, int32_t c)
{
    const mp_rspace *sp = m->sp;
    int32_t q = sp->cand[c].step;
    return sp->base_between[q] - vbytes(sp, c) + sp->cand[c].recipe_peak + m->ret_phase[q] > m->floor;
}

/* The group of c's f-th frontier input when that input may be away at c's step (a candidate of the group holding
 * that step comes back later), -1 otherwise. */
static int32_t away_group(const mp_rspace *sp, int32_t c, int32_t f)
{
    int32_t j = mp_rspace_group(sp, sp->cand[c].front[f], sp->cand[c].step);
    return j >= 0 && sp->cand_off[j + 1] > sp->cand_off[j] && sp->cand[sp->cand_off[j + 1] - 1].step > sp->cand[c].step
               ? j
               : -1;
}

/* The entries of the retention columns, bucketed by span and by step, and
 * the most bytes retention can add at each node (a value from its span's
 * start to its latest reader's step) and each phase (to that step's phase). */
static int build_retention(ilp *m)
{
    const mp_rspace *sp = m->sp;
    int32_t nn = sp->rg->nnodes, nv = sp->rg->nvalues + sp->ndrop, n = 0; /* nv: spans */
    for (int32_t c = 0; c < sp->ncand; c++) n += sp->cand[c].nretain + sp->cand[c].nfront;
    m->ret = malloc(((size_t)n + 1) * sizeof *m->ret);
    m->zcol = calloc((size_t)n + 1, sizeof *m->zcol);
    m->away_before = calloc((size_t)sp->ncand + 1, 1);
    m->at = malloc(((size_t)n + 1) * sizeof *m->at);
    m->ret_first = calloc((size_t)nv + 2, sizeof *m->ret_first);
    m->at_off = calloc((size_t)nn + 2, sizeof *m->at_off);
    m->ret_node = calloc((size_t)nn + 2, sizeof *m->ret_node);
    m->ret_phase = calloc((size_t)nn + 2, sizeof *m->ret_phase);
    int32_t *pos = malloc(((size_t)nn + 1) * sizeof *pos);
    if (!m->ret || !m->zcol || !m->away_before || !m->at || !m->ret_first || !m->at_off || !m->ret_node ||
        !m->ret_phase || !pos) {
        free(pos);
        return -1;
    }
    for (int32_t c = 0; c < sp->ncand; c++) {
        const mp_rcand *rc = &sp->cand[c];
        for (int32_t k = 0; k < rc->nretain; k++)
            m->ret[m->nret++] = (ret_entry){rc->retain[k], rc->step, rc->group, c, rc->retain[k]};
        for (int32_t f = 0; f < rc->nfront; f++) {
            int32_t j = away_group(sp, c, f);
            if (j >= 0 && mp_rcand_leaves(rc, rc->front[f]))
                m->ret[m->nret++] = (ret_entry){rc->front[f], rc->step, rc->group, c, sp->rg->nvalues + j};
        }
    }
    qsort(m->ret, (size_t)m->nret, sizeof *m->ret, cmp_ret);
    for (int32_t e = 0; e < m->nret; e++) m->away_before[m->ret[e].cand] = 1;
    for (int32_t c = 0; c < sp->ncand; c++) m->away_before[c] |= sp->cand[c].keep >= 0;
    for (int32_t e = 0; e < m->nret; e++) m->ret_first[m->ret[e].span + 1]++, m->at_off[m->ret[e].step + 1]++;
    for (int32_t x = 0; x < nv; x++) m->ret_first[x + 1] += m->ret_first[x];
    for (int32_t t = 0; t < nn; t++) m->at_off[t + 1] += m->at_off[t];
    memcpy(pos, m->at_off, (size_t)nn * sizeof *pos);
    for (int32_t e = 0; e < m->nret; e++) m->at[pos[m->ret[e].step]++] = e;
    free(pos);
    for (int32_t x = 0; x < nv; x++) { /* difference arrays, summed below */
        if (m->ret_first[x] == m->ret_first[x + 1]) continue;
        int64_t b = sp->rg->bytes[m->ret[m->ret_first[x]].value];
        int32_t from = mp_rspace_span_start(sp, x), to = m->ret[m->ret_first[x + 1] - 1].step;
        m->ret_node[from] += b, m->ret_node[to] -= b;
        m->ret_phase[from] += b, m->ret_phase[to + 1] -= b;
    }
    for (int32_t t = 1; t <= nn; t++) m->ret_node[t] += m->ret_node[t - 1], m->ret_phase[t] += m->ret_phase[t - 1];
    return 0;
}

/* The least D_t: in cost mode the node row base_live[t] - D_t <= B; D_t is
 * below 0 only where retained values may outweigh those away. */
static double d_lower(const ilp *m, int32_t t, double B)
{
    double lb = -(double)m->ret_node[t] / m->unit;
    return m->peak_mode ? lb : fmax(lb, (double)m->sp->base_live[t] / m->unit - B);
}

/* Adds to row sign * bytes * (z of the first entry at e's place - z of the next entry of its span after that
 * place): the presence of e's value that only the readers at that place hold (several candidates of one group may
 * read it there). */
static int put_place(ilp *m, int row, int32_t e, double sign)
{
    const ret_entry *r = &m->ret[e];
    int32_t first = e, after = e + 1, end = m->ret_first[r->span + 1];
    while (first > m->ret_first[r->span] && same_place(&m->ret[first - 1], r)) first--;
    while (after < end && same_place(&m->ret[after], r)) after++;
    double b = sign * (double)m->sp->rg->bytes[r->value] / m->unit;
    return put(m, row, m->zcol[first], b) || (after < end && put(m, row, m->zcol[after], -b)) ? -1 : 0;
}

/* The retention entry of candidate c reading x, -1 when none (x is never retained for it). */
static int32_t entry_of(const ilp *m, int32_t c, int32_t x)
{
    int32_t q = m->sp->cand[c].step;
    for (int32_t k = m->at_off[q]; k < m->at_off[q + 1]; k++)
        if (m->ret[m->at[k]].cand == c && m->ret[m->at[k]].value == x) return m->at[k];
    return -1;
}

/* The phase rows of step q: before node q the chosen recipes run in group
 * order, the j-th while its own value and the later ones' are still away and
 * the retained values read at or after it are alive. Both are suffix sums
 * over the positions (distinct groups) at q, so one free column A_p per
 * position carries them, A_p = A_{p+1} + (values of position p+1) -
 * (retention alive at p beyond node q), and each row is short:
 *   -D_q + (recipe_peak_c - v_c) x_c - A_p <= B - between_q.
 * With c not chosen the row is the memory after the recipe of its group's
 * chosen candidate k, which is no state of the order when k frees retained
 * values or keeps one (the value counted back, those still counted): such a
 * k's value counts in A_p of its own position instead (away_before), so that
 * c's row is the memory before k's recipe, and k's own rows take no v_k.
 * A value with readers at q is alive at p while a reader at p or later is
 * chosen: z of its first reader at or after p, less z of its first after q,
 * which D_q already holds. A recipe that may free values it reads last gets
 * a row per stretch between those reads instead (mp_rcand.leave_peak).
 * cat[from .. to) are the candidates at q, by group. */
static int add_phase_rows(ilp *m, int32_t q, const int32_t *cat, int32_t from, int32_t to)
{
    const mp_rspace *sp = m->sp;
    const double u = m->unit, ub = (m->peak_mode ? 0 : (double)m->budget / u) - (double)sp->base_between[q] / u;
    int32_t last_reader = -1; /* the latest group reading a retained value at q */
    for (int32_t k = m->at_off[q]; k < m->at_off[q + 1]; k++)
        if (m->ret[m->at[k]].group > last_reader) last_reader = m->ret[m->at[k]].group;
    int32_t first = -1; /* the first candidate whose row can bind */
    for (int32_t j = from; j < to && first < 0; j++) {
        int32_t c = cat[j];
        /* alone its recipe adds no more than node q's own outputs, and no retained value is alive then: node row
         * q covers it */
        bool covered = sp->base_between[q] + sp->cand[c].recipe_peak - vbytes(sp, c) <= sp->base_live[q] &&
                       sp->cand[c].group > last_reader;
        if (phase_binds(m, c) && !covered) first = j;
    }
    if (first < 0) return 0;
    int next_l = 0; /* A of the next position, 0 after the last */
    for (int32_t hi = to; hi > first;) { /* positions from the last: cat[lo .. hi) share a group */
        int32_t lo = hi - 1, g = sp->cand[cat[lo]].group;
        while (lo > first && sp->cand[cat[lo - 1]].group == g) lo--;
        int l = glp_add_cols(m->P, 1), row = new_row(m, GLP_FX, 0, 0);
        glp_set_col_bnds(m->P, l, GLP_FR, 0, 0);
        if (put(m, row, l, 1) || (next_l && put(m, row, next_l, -1))) return -1;
        for (int32_t k = m->at_off[q]; k < m->at_off[q + 1]; k++) {
            int32_t e = m->at[k]; /* once per run of entries at this position */
            const ret_entry *r = &m->ret[e];
            if (r->group != g || (e > m->ret_first[r->span] && same_place(&m->ret[e - 1], r))) continue;
            if (put_place(m, row, e, 1)) return -1;
        }
        /* the position's value, and a value a recipe here keeps: neither is made yet at this position and before
         * (the kept one: its span's presence, which D_q and the entries count, less the makers at or after p),
         * for every candidate of the group, those before `first` too, that frees or keeps something here
         * (away_before); the others' value is away in their own rows only, so that a sibling's row is the
         * memory after their recipe, a tighter LP */
        int32_t start = lo;
        while (start > from && sp->cand[cat[start - 1]].group == g) start--;
        for (int32_t j = start; j < hi; j++)
            if (m->away_before[cat[j]] &&
                put(m, row, cat[j] + 1, -(double)(vbytes(sp, cat[j]) + mp_rspace_kept_bytes(sp, cat[j])) / u))
                return -1;
        for (int32_t k = hi; next_l && k < to && sp->cand[cat[k]].group == sp->cand[cat[hi]].group; k++)
            if (!m->away_before[cat[k]] && put(m, row, cat[k] + 1, -(double)vbytes(sp, cat[k]) / u)) return -1;
        for (int32_t j = lo; j < hi; j++) {
            int32_t c = cat[j];
            if (j < first || !phase_binds(m, c)) continue;
            /* a row per stretch of the recipe: after its last read of leave[k], that value is gone when c reads it
             * last (z of c's entry less z of the next); a stretch no higher than an earlier one cannot bind */
            const mp_rcand *rc = &sp->cand[c];
            int64_t highest = -1;
            for (int32_t k = 0; k <= rc->nleave; k++) {
                int64_t peak = rc->leave_peak[k];
                if (peak <= highest || sp->base_between[q] - vbytes(sp, c) + peak + m->ret_phase[q] <= m->floor)
                    continue;
                highest = peak;
                int pr = new_row(m, GLP_UP, 0, ub);
                if (m->prow) m->prow[m->nphase] = pr, m->pstep[m->nphase++] = q;
                if (put(m, pr, m->dcol[q], -1) || put(m, pr, l, -1) ||
                    put(m, pr, c + 1, (double)(peak - (m->away_before[c] ? 0 : vbytes(sp, c))) / u) ||
                    (m->peak_mode && put(m, pr, m->bcol, -1)))
                    return -1;
                for (int32_t i = 0; i < k; i++) {
                    int32_t e = entry_of(m, c, rc->leave[i]);
                    if (e >= 0 && put_place(m, pr, e, -1)) return -1; /* (none: never retained, resident) */
                }
            }
        }
        next_l = l, hi = lo;
    }
    return 0;
}

/* A recipe keeping a value it makes (mp_rcand.keep) starts the value's span
 * at its step: the span's only maker, x_m summed <= 1; a reader after it
 * (in a gap, at its step), x_m <= sum of their x; none at or before it,
 * x_m + (one group's readers there) <= 1, and in a gap none at a later step,
 * x_m + z (the first entry after its step) <= 1. (In the running sums the
 * span's value is away from the span's start to the maker's step, as a
 * candidate's own value is in its gap: build_model.) */
static int add_maker_rows(ilp *m)
{
    const mp_rspace *sp = m->sp;
    int32_t nspan = sp->rg->nvalues + sp->ndrop;
    int *one = calloc((size_t)nspan + 1, sizeof *one), *byg = calloc((size_t)sp->ndrop + 1, sizeof *byg);
    int rc = one && byg ? 0 : -1;
    for (int32_t c = 0; c < sp->ncand && !rc; c++) {
        const mp_rcand *mk = &sp->cand[c];
        int32_t s = mp_rspace_kept_span(sp, c);
        if (s < 0) continue;
        bool gap = s >= sp->rg->nvalues;
        if (!one[s]) one[s] = new_row(m, GLP_UP, 0, 1);
        int after = new_row(m, GLP_UP, 0, 0);
        rc = put(m, one[s], c + 1, 1) || put(m, after, c + 1, 1);
        int32_t later = -1; /* in a gap: the first entry at a later step */
        for (int32_t e = m->ret_first[s]; e < m->ret_first[s + 1] && !rc; e++) {
            const ret_entry *r = &m->ret[e];
            if (mp_rspace_runs_after(r->step, r->group, mk->step, mk->group)) {
                if (!gap || r->step == mk->step) rc = put(m, after, r->cand + 1, -1);
                else if (later < 0) later = e;
                continue;
            }
            if (!byg[r->group]) { /* one row per group of readers before it (a group chooses one of them) */
                byg[r->group] = new_row(m, GLP_UP, 0, 1);
                rc = put(m, byg[r->group], c + 1, 1);
            }
            rc = rc || put(m, byg[r->group], r->cand + 1, 1);
        }
        for (int32_t e = m->ret_first[s]; e < m->ret_first[s + 1]; e++) byg[m->ret[e].group] = 0;
        if (!rc && later >= 0) {
            int row = new_row(m, GLP_UP, 0, 1);
            rc = put(m, row, c + 1, 1) || put(m, row, m->zcol[later], 1);
        }
    }
    free(one);
    free(byg);
    return rc ? -1 : 0;
}

/* A lower bound on every plan's peak: at each step, what no candidate can take away. */
static int64_t peak_floor(const mp_rspace *sp, mp_err *err, bool *ok)
{
    int32_t nn = sp->rg->nnodes;
    int64_t *away = calloc((size_t)nn + 2, sizeof *away), lb = sp->resident_bytes;
    *ok = away != NULL;
    if (!away) return mp_fail(err, "out of memory building the remat ILP");
    for (int32_t i = 0; i < sp->ndrop; i++) {
        if (sp->cand_off[i + 1] == sp->cand_off[i]) continue;
        int32_t v = sp->drop[i];
        away[sp->gap_start[i] + 1] += sp->rg->bytes[v];
        away[sp->cand[sp->cand_off[i + 1] - 1].step] -= sp->rg->bytes[v]; /* its latest way back */
    }
    int64_t a = 0;
    for (int32_t t = 0; t < nn; t++) {
        a += away[t];
        if (sp->base_live[t] - a > lb) lb = sp->base_live[t] - a;
    }
    free(away);
    return lb;
}

/* The cuts need to see knapsacks: in cost mode, for the local peaks of the
 * store-everything count above the budget (the largest excess first), the
 * bytes away at step t written out over the candidates away then,
 * sum bytes_c x_c >= base_live[t] - B. The running sums imply them; GLPK's
 * cover and MIR cuts cannot find them there. At most MAX_COVER_NZ non-zeros. */
#define MAX_COVER_NZ 200000
static int add_cover_rows(ilp *m)
{
    const mp_rspace *sp = m->sp;
    int32_t nn = sp->rg->nnodes, ns = 0, nz = 0;
    int *ind = malloc(((size_t)sp->ncand + 1) * sizeof *ind);
    double *val = malloc(((size_t)sp->ncand + 1) * sizeof *val);
    int32_t *steps = malloc(((size_t)nn + 1) * sizeof *steps);
    if (!ind || !val || !steps) {
        free(ind), free(val), free(steps);
        return -1;
    }
    for (int32_t t = 0; t < nn; t++)
        if (sp->base_live[t] > m->budget && (t == 0 || sp->base_live[t - 1] <= sp->base_live[t]) &&
            (t + 1 == nn || sp->base_live[t + 1] < sp->base_live[t]))
            steps[ns++] = t;
    for (int32_t i = 1; i < ns; i++) /* larger excess first (insertion sort: local peaks are few) */
        for (int32_t j = i; j > 0 && sp->base_live[steps[j - 1]] < sp->base_live[steps[j]]; j--) {
            int32_t x = steps[j];
            steps[j] = steps[j - 1], steps[j - 1] = x;
        }
    for (int32_t k = 0; k < ns; k++) {
        int32_t t = steps[k], len = 0;
        for (int32_t c = 0; c < sp->ncand; c++)
            if (sp->gap_start[sp->cand[c].group] < t && t < sp->cand[c].step)
                ind[++len] = c + 1, val[len] = (double)vbytes(sp, c) / m->unit;
        if (nz + len > MAX_COVER_NZ) break;
        nz += len;
        int r = new_row(m, GLP_LO, (double)(sp->base_live[t] - m->budget) / m->unit, 0);
        glp_set_mat_row(m->P, r, len, ind, val);
    }
    free(ind), free(val), free(steps);
    return 0;
}

static int build_model(ilp *m, mp_err *err)
{
    const mp_rspace *sp = m->sp;
    int32_t nn = sp->rg->nnodes, nc = sp->ncand;
    m->unit = 1;
    while ((double)sp->base_peak / m->unit > 1e4) m->unit *= 2;
    const double u = m->unit;
    double B = (double)m->budget / u;
    int32_t *coff = calloc((size_t)nn + 2, sizeof *coff), *cat = malloc(((size_t)nc + 1) * sizeof *cat);
    int32_t *next = malloc(((size_t)nn + 2) * sizeof *next), *chain = calloc((size_t)nn + 1, sizeof *chain);
    uint8_t *need = calloc((size_t)nn + 1, 1);
    m->dcol = calloc((size_t)nn + 1, sizeof *m->dcol);
    int rc = -1;
    if (!coff || !cat || !next || !chain || !need || !m->dcol || build_retention(m)) goto oom;
    /* candidates bucketed by step, in drop (producer) order: the order their recipes run */
    for (int32_t c = 0; c < nc; c++) coff[sp->cand[c].step + 1]++;
    for (int32_t t = 0; t < nn; t++) coff[t + 1] += coff[t];
    for (int32_t t = 0; t <= nn; t++) next[t] = coff[t];
    for (int32_t c = 0; c < nc; c++) cat[next[sp->cand[c].step]++] = c;
    /* steps whose memory can exceed the floor: only there D_t is needed. In
     * peak mode a row below a bound on every plan's peak cannot set the peak. */
    m->floor = m->budget;
    if (m->peak_mode) {
        bool ok;
        m->floor = peak_floor(sp, err, &ok);
        if (!ok) goto done;
    }
    for (int32_t t = 0; t < nn; t++) need[t] = sp->base_live[t] + m->ret_node[t] > m->floor;
    for (int32_t c = 0; c < nc; c++)
        if (phase_binds(m, c)) need[sp->cand[c].step] = 1;
    next[nn] = -1;
    for (int32_t t = nn - 1; t >= 0; t--) next[t] = need[t] ? t : next[t + 1];

    m->P = glp_create_prob();
    glp_set_obj_dir(m->P, GLP_MIN);
    if (nc) glp_add_cols(m->P, nc);
    double cmax = 0;
    for (int32_t c = 0; c < nc; c++) cmax = fmax(cmax, sp->cand[c].cost);
    m->oscale = m->peak_mode ? 1 / u : cmax <= 0 ? 1 : 1 / cmax; /* peak mode: the objective is B, in units */
    for (int32_t c = 0; c < nc; c++) {
        glp_set_col_kind(m->P, c + 1, GLP_BV);
        if (!m->peak_mode) glp_set_obj_coef(m->P, c + 1, sp->cand[c].cost * m->oscale);
    }
    for (int32_t t = 0; t < nn; t++) {
        if (!need[t]) continue;
        int j = m->dcol[t] = glp_add_cols(m->P, 1);
        glp_set_col_bnds(m->P, j, GLP_LO, d_lower(m, t, B), 0); /* cost mode: the node row is a bound on D_t */
    }
    if (m->peak_mode) {
        m->bcol = glp_add_cols(m->P, 1);
        glp_set_col_bnds(m->P, m->bcol, GLP_LO, (double)m->floor / u, 0);
        glp_set_obj_coef(m->P, m->bcol, 1);
        /* bytes in units of one: the peak is an integer, and GLPK, seeing an integral objective, drops the nodes
         * whose bound rounds up to the best peak (Checkmate's case, seed 42: 11,719 nodes where 19,005) */
        if (u == 1) glp_set_col_kind(m->P, m->bcol, GLP_IV);
    }
    for (int32_t e = 0; e < m->nret; e++) {
        m->zcol[e] = glp_add_cols(m->P, 1);
        glp_set_col_bnds(m->P, m->zcol[e], GLP_DB, 0, 1);
    }

    /* at most one candidate per group */
    for (int32_t i = 0; i < sp->ndrop; i++) {
        if (sp->cand_off[i + 1] - sp->cand_off[i] < 2) continue;
        int r = new_row(m, GLP_UP, 0, 1);
        for (int32_t c = sp->cand_off[i]; c < sp->cand_off[i + 1]; c++)
            if (put(m, r, c + 1, 1)) goto oom;
    }
    /* what a recipe makes for itself is away at its step: x_c <= (its group's candidates after step(c)) */
    for (int32_t c = 0; c < nc; c++)
        for (int32_t e = 0; e < sp->cand[c].nexpand; e++) {
            int32_t j = mp_rspace_group(sp, sp->cand[c].expand[e], sp->cand[c].step);
            int r = new_row(m, GLP_UP, 0, 0);
            if (put(m, r, c + 1, 1)) goto oom;
            for (int32_t o = j >= 0 ? sp->cand_off[j] : 0; j >= 0 && o < sp->cand_off[j + 1]; o++)
                if (sp->cand[o].step > sp->cand[c].step && put(m, r, o + 1, -1)) goto oom;
        }
    /* frontier rows x_c + (v's candidates after step(c)) <= 1 are many and
     * seldom bind: they join the LP when its solution breaks them (add_front).
     * An input that may leave after c reads it gets retention rows instead (below). */
    for (int32_t c = 0; c < nc; c++)
        for (int32_t f = 0; f < sp->cand[c].nfront; f++) {
            int32_t j = away_group(sp, c, f);
            if (j < 0 || mp_rcand_leaves(&sp->cand[c], sp->cand[c].front[f])) continue; /* never away, or retained */
            if (m->nfront == m->capfront) {
                int32_t cap = m->capfront ? 2 * m->capfront : 256;
                int32_t *p = realloc(m->front, (size_t)cap * 2 * sizeof *p);
                if (!p) goto oom;
                m->front = p, m->capfront = cap;
            }
            m->front[2 * m->nfront] = c, m->front[2 * m->nfront + 1] = j;
            m->nfront++;
        }
    /* running sums between needed steps: D_t = D_prev + (away since prev) - (back since prev) */
    int32_t prev = -1;
    for (int32_t t = 0; t < nn; t++) {
        if (!need[t]) continue;
        chain[t] = new_row(m, GLP_FX, 0, 0);
        if (put(m, chain[t], m->dcol[t], 1) || (prev >= 0 && put(m, chain[t], m->dcol[prev], -1))) goto oom;
        prev = t;
    }
    for (int32_t c = 0; c < nc; c++) { /* its value, and the one it keeps (add_maker_rows): one entry per row */
        const mp_rcand *rc = &sp->cand[c];
        int32_t s = mp_rspace_kept_span(sp, c), ks = next[rc->step];
        int32_t at[3] = {next[sp->gap_start[rc->group] + 1], s >= 0 ? next[mp_rspace_span_start(sp, s)] : ks, ks};
        double v[3] = {-(double)vbytes(sp, c) / u, s >= 0 ? -(double)sp->rg->bytes[rc->keep] / u : 0, 0};
        v[2] = -v[0] - v[1];
        for (int32_t i = 0; i < 3; i++) /* away and back between the same two needed steps cancel */
            for (int32_t j = i + 1; j < 3; j++)
                if (at[j] == at[i]) v[i] += v[j], v[j] = 0;
        for (int32_t i = 0; i < 3; i++)
            if (at[i] >= 0 && fabs(v[i]) > 1e-12 && put(m, chain[at[i]], c + 1, v[i])) goto oom;
    }
    /* retention: z_e >= x of its reader (in a gap: and the value back only after it, x_c + (its group's
     * candidates after step(c)) - 1), z_e >= z_{e+1} (the span's next reader), and z_e keeps its value's bytes in
     * D_t at the nodes from the previous reader's step (the first: the span's start) to its own */
    for (int32_t e = 0; e < m->nret; e++) {
        const ret_entry *r = &m->ret[e];
        bool gap = r->span >= sp->rg->nvalues;
        int32_t j = r->span - sp->rg->nvalues;
        int row = new_row(m, GLP_LO, gap ? -1 : 0, 0);
        if (put(m, row, m->zcol[e], 1) || put(m, row, r->cand + 1, -1)) goto oom;
        for (int32_t o = gap ? sp->cand_off[j] : 0; gap && o < sp->cand_off[j + 1]; o++)
            if (sp->cand[o].step > r->step && put(m, row, o + 1, -1)) goto oom;
        bool first = e == m->ret_first[r->span], more = e + 1 < m->ret_first[r->span + 1];
        if (more) {
            row = new_row(m, GLP_LO, 0, 0);
            if (put(m, row, m->zcol[e], 1) || put(m, row, m->zcol[e + 1], -1)) goto oom;
        }
        int32_t from = first ? mp_rspace_span_start(sp, r->span) : m->ret[e - 1].step, ks = next[from], ke = next[r->step];
        double b = (double)sp->rg->bytes[r->value] / u;
        if (from >= r->step || ks == ke) continue;
        if ((ks >= 0 && put(m, chain[ks], m->zcol[e], b)) || (ke >= 0 && put(m, chain[ke], m->zcol[e], -b))) goto oom;
    }
    if (add_maker_rows(m)) goto oom;
    /* a recipe making again a value retained while it runs would replace it: x_c + z (the value's first reader
     * running at or after c) <= 1 */
    for (int32_t c = 0; c < nc && m->nret; c++) {
        const mp_rcand *cc = &sp->cand[c];
        for (int32_t i = 0; i < cc->nrecipe; i++)
            for (int32_t k = sp->rg->out_off[cc->recipe[i]]; k < sp->rg->out_off[cc->recipe[i] + 1]; k++) {
                int32_t y = sp->rg->out[k], s = mp_rspace_span(sp, y, cc->step);
                if (y == cc->value || y == cc->keep || s < 0) continue;
                int32_t e = m->ret_first[s];
                while (e < m->ret_first[s + 1] &&
                       mp_rspace_runs_after(cc->step, cc->group, m->ret[e].step, m->ret[e].group))
                    e++;
                if (e == m->ret_first[s + 1]) continue;
                int row = new_row(m, GLP_UP, 0, 1);
                if (put(m, row, c + 1, 1) || put(m, row, m->zcol[e], 1)) goto oom;
            }
    }
    /* node rows (peak mode; in cost mode they are the bounds on D_t) */
    if (m->peak_mode)
        for (int32_t t = 0; t < nn; t++) {
            if (!need[t] || sp->base_live[t] + m->ret_node[t] <= m->floor) continue;
            int r = new_row(m, GLP_UP, 0, -(double)sp->base_live[t] / u);
            if (put(m, r, m->dcol[t], -1) || put(m, r, m->bcol, -1)) goto oom;
        }
    /* phase rows: before node q, the j-th recipe at q runs while the later ones' values are still away */
    if (!m->peak_mode) {
        size_t rows = 1; /* at most a row per stretch of each recipe */
        for (int32_t c = 0; c < nc; c++) rows += (size_t)sp->cand[c].nleave + 1;
        m->prow = malloc(rows * sizeof *m->prow);
        m->pstep = malloc(rows * sizeof *m->pstep);
        if (!m->prow || !m->pstep) goto oom;
    }
    for (int32_t q = 0; q < nn; q++)
        if (add_phase_rows(m, q, cat, coff[q], coff[q + 1])) goto oom;
    glp_load_matrix(m->P, m->nz, m->ia, m->ja, m->ar);
    rc = 0;
    goto done;
oom:
    mp_fail(err, "out of memory building the remat ILP");
done:
    free(coff);
    free(cat);
    free(next);
    free(chain);
    free(need);
    return rc;
}

/* The column values of plan choice (1-based): x, the exact D_t, and B = peak. */
static int plan_columns(const ilp *m, const int32_t *choice, int64_t peak, double *x)
{
    const mp_rspace *sp = m->sp;
    int32_t nn = sp->rg->nnodes;
    int64_t *delta = calloc((size_t)nn + 2, sizeof *delta);
    if (!delta) return -1;
    for (int j = 1; j <= glp_get_num_cols(m->P); j++) x[j] = 0;
    for (int32_t i = 0; i < sp->ndrop; i++) {
        int32_t c = choice[i];
        if (c < 0) continue;
        x[c + 1] = 1;
        delta[sp->gap_start[sp->cand[c].group] + 1] += vbytes(sp, c);
        delta[sp->cand[c].step] -= vbytes(sp, c);
        int32_t s = mp_rspace_kept_span(sp, c);
        if (s >= 0) { /* a value it keeps: away from its span's start to here */
            delta[mp_rspace_span_start(sp, s)] += sp->rg->bytes[sp->cand[c].keep];
            delta[sp->cand[c].step] -= sp->rg->bytes[sp->cand[c].keep];
        }
    }
    for (int32_t e = m->nret - 1; e >= 0; e--) { /* z_e: a chosen reader at e or later; the latest keeps it */
        const ret_entry *r = &m->ret[e];
        bool later = e + 1 < m->ret_first[r->span + 1] && x[m->zcol[e + 1]] > 0.5;
        int32_t j = r->span - sp->rg->nvalues; /* in a gap: only while the value is away at the reader's step */
        bool away = j < 0 || (choice[j] >= 0 && sp->cand[choice[j]].step > r->step);
        x[m->zcol[e]] = later || (choice[r->group] == r->cand && away);
        if (x[m->zcol[e]] > 0.5 && !later) {
            delta[mp_rspace_span_start(sp, r->span)] -= sp->rg->bytes[r->value];
            delta[r->step] += sp->rg->bytes[r->value];
        }
    }
    int64_t away = 0;
    for (int32_t t = 0; t < nn; t++) {
        away += delta[t];
        if (m->dcol[t]) x[m->dcol[t]] = (double)away / m->unit;
    }
    if (m->bcol) x[m->bcol] = (double)peak / m->unit;
    free(delta);
    return 0;
}

/* Writes the pending frontier rows that the current LP solution breaks (all
 * of them when all is set); returns how many, -1 when out of memory. */
static int add_front(ilp *m, bool all)
{
    const mp_rspace *sp = m->sp;
    if (!m->written && !(m->written = calloc((size_t)m->nfront + 1, 1))) return -1;
    int32_t maxg = 1;
    for (int32_t i = 0; i < sp->ndrop; i++)
        if (sp->cand_off[i + 1] - sp->cand_off[i] > maxg) maxg = sp->cand_off[i + 1] - sp->cand_off[i];
    int *ind = malloc(((size_t)2 * maxg + 2) * sizeof *ind);
    double *val = malloc(((size_t)2 * maxg + 2) * sizeof *val);
    int added = 0;
    if (!ind || !val) added = -1;
    for (int32_t k = 0; k < m->nfront && added >= 0; k++) {
        if (m->written[k]) continue;
        int32_t c = m->front[2 * k], j = m->front[2 * k + 1], len = 0;
        double act = 0;
        /* w's candidates up to step(c) that read v in the same gap of v all
         * need it by then: one row for them together is valid and tighter
         * than x_c alone */
        int32_t iw = sp->cand[c].group;
        for (int32_t o = sp->cand_off[iw]; o < sp->cand_off[iw + 1] && sp->cand[o].step <= sp->cand[c].step; o++) {
            bool reads = false;
            for (int32_t f = 0; f < sp->cand[o].nfront && !reads; f++) /* (not those that may retain it) */
                reads = sp->cand[o].front[f] == sp->drop[j] && !mp_rcand_leaves(&sp->cand[o], sp->drop[j]);
            if (!reads || mp_rspace_group(sp, sp->drop[j], sp->cand[o].step) != j) continue;
            ind[++len] = o + 1, val[len] = 1;
            act += glp_get_col_prim(m->P, o + 1);
        }
        for (int32_t o = sp->cand_off[j]; o < sp->cand_off[j + 1]; o++)
            if (sp->cand[o].step > sp->cand[c].step) {
                ind[++len] = o + 1, val[len] = 1;
                act += glp_get_col_prim(m->P, o + 1);
            }
        if (!all && act <= 1 + 1e-7) continue;
        int r = new_row(m, GLP_UP, 0, 1);
        glp_set_mat_row(m->P, r, len, ind, val);
        m->written[k] = 1;
        added++;
    }
    free(ind);
    free(val);
    return added;
}

/* The plan of P's MIP solution (or of the columns heur), P m's program or a
 * copy of it with the same columns. */
static void mip_choice(const ilp *m, glp_prob *P, const double *heur, int32_t *choice)
{
    const mp_rspace *sp = m->sp;
    for (int32_t i = 0; i < sp->ndrop; i++) {
        choice[i] = -1;
        for (int32_t c = sp->cand_off[i]; c < sp->cand_off[i + 1]; c++)
            if ((heur ? heur[c + 1] : glp_mip_col_val(P, c + 1)) > 0.5) {
                choice[i] = c;
                break;
            }
    }
}

/* Hands a plan found to the caller's on_plan (o may be NULL: none). */
static void offer(const mp_rsolve_opts *o, const int32_t *choice)
{
    if (o && o->on_plan) o->on_plan(o->on_plan_ctx, choice);
}

static void on_tree(glp_tree *T, void *info)
{
    ilp *m = info;
    /* a better incumbent, in P's MIP solution: the search's (GLP_IBINGO) or one of GLPK's own heuristics,
     * which raise no reason of their own, so it is looked for at every call */
    int ms = glp_mip_status(m->P);
    bool have = ms == GLP_FEAS || ms == GLP_OPT;
    double obj = have ? glp_mip_obj_val(m->P) / m->oscale : INFINITY;
    if (m->offered && have && obj < m->offered_cost * (1 - 1e-9)) {
        m->offered_cost = obj;
        mip_choice(m, m->P, NULL, m->offered);
        offer(m->offer, m->offered);
    }
    if (glp_ios_reason(T) == GLP_IHEUR && m->heur && !m->fed) {
        m->fed = true;
        glp_ios_heur_sol(T, m->heur);
    }
    int p = glp_ios_best_node(T);
    if (p) {
        double b = glp_ios_node_bound(T, p) / m->oscale;
        if (b > m->bound) m->bound = b;
    }
    m->closed = m->stop_gap > 0 && have && obj - m->bound <= m->stop_gap * obj;
    /* past the deadline, or a branching that would end past it: Driebeck and Tomlin's rule computes a tableau
     * row per fractional candidate, on Moccasin's n500 (16,787 rows) 0.6 s a node */
    double t = now();
    if (m->branched_at > 0) m->branch_cost = fmax(m->branch_cost, t - m->branched_at);
    m->branched_at = glp_ios_reason(T) == GLP_IBRANCH ? t : 0;
    bool late = m->deadline > 0 && t + (m->branched_at > 0 ? m->branch_cost : 0) > m->deadline;
    if (m->closed || late) glp_ios_terminate(T);
}

static int to_stderr(void *info, const char *s)
{
    (void)info;
    fputs(s, stderr);
    return 1;
}

static void free_model(ilp *m)
{
    if (m->P) glp_delete_prob(m->P);
    free(m->ia);
    free(m->ja);
    free(m->ar);
    free(m->dcol);
    free(m->heur);
    free(m->front);
    free(m->written);
    free(m->prow);
    free(m->pstep);
    free(m->ret);
    free(m->zcol);
    free(m->away_before);
    free(m->ret_first);
    free(m->at_off);
    free(m->at);
    free(m->ret_node);
    free(m->ret_phase);
    free(m->offered);
    memset(m, 0, sizeof *m);
    glp_free_env(); /* GLPK keeps an environment per thread: give it back so leak checks stay clean */
}

/* A callback that only stops the search past the deadline (*info): GLPK looks at its own limit between nodes,
 * and one node of a big program can take a second. */
static void stop_at(glp_tree *T, void *info)
{
    if (now() > *(const double *)info) glp_ios_terminate(T);
}

/* A search on a copy of the program m->P (which holds the LP's optimum).
 * With inc, RINS (Danna, Rothberg and Le Pape, 2005): a plan near both the
 * LP's optimum and the plan inc; the candidates on which the two agree are
 * fixed, and the far smaller program left is searched for `seconds`, for a
 * plan cheaper than inc. Without inc, the whole program is searched for any
 * plan (the first one found). 1: a plan that fits the budget as the model
 * counts it, in better (its peak in *peak); 0: none; -1: error. */
static int search_copy(const ilp *m, const int32_t *inc, double seconds, double gap_limit, int32_t *better,
                       int64_t *peak, int32_t *open, mp_err *err)
{
    const mp_rspace *sp = m->sp;
    glp_prob *Q = glp_create_prob();
    glp_copy_prob(Q, m->P, GLP_OFF);
    *open = inc ? 0 : sp->ncand;
    for (int32_t i = 0; inc && i < sp->ndrop; i++)
        for (int32_t c = sp->cand_off[i]; c < sp->cand_off[i + 1]; c++) {
            double v = inc[i] == c;
            if (fabs(glp_get_col_prim(m->P, c + 1) - v) < 1e-6) glp_set_col_bnds(Q, c + 1, GLP_FX, v, v);
            else ++*open;
        }
    glp_iocp iocp;
    glp_init_iocp(&iocp);
    iocp.msg_lev = GLP_MSG_OFF;
    /* the presolver drops the fixed columns and the rows they settle, and the most fractional candidate is branched
     * on (Driebeck and Tomlin's rule costs a tableau row per fractional one): DenseNet-121 at 50 %, within 1 % of the
     * sub-program's bound in 0.35 s, where with neither 0.28 s found nothing and 0.95 s a dearer plan. With nothing
     * fixed the presolver only costs: RegNet-Y-400MF at 50 %, the first plan in 0.08 s without it, 0.55 s with. */
    iocp.presolve = inc ? GLP_ON : GLP_OFF;
    iocp.br_tech = GLP_BR_MFV;
    iocp.mip_gap = !inc ? 1 : gap_limit > 0 ? gap_limit : 0; /* without inc, the first plan will do */
    iocp.tm_lim = (int)fmax(1, fmin(seconds * 1000, 1e9));
    double deadline = m->deadline; /* its share may run over by a node (GLPK's limit), the solve's time not */
    iocp.cb_func = stop_at, iocp.cb_info = &deadline;
    double inc_cost = inc ? plan_cost(sp, inc) : INFINITY;
    int found = 0, ret = *open ? glp_intopt(Q, &iocp) : GLP_EFAIL;
    int ms = glp_mip_status(Q);
    /* a plan found by the time limit stands */
    if ((ret == 0 || ret == GLP_ETMLIM || ret == GLP_EMIPGAP) && (ms == GLP_OPT || ms == GLP_FEAS)) {
        mip_choice(m, Q, NULL, better);
        if (mp_rplan_peak(sp, &(mp_rplan){better}, NULL, peak, err)) found = -1;
        else found = *peak <= m->budget && plan_cost(sp, better) < inc_cost * (1 - 1e-9);
    }
    glp_delete_prob(Q);
    return found;
}

#define GOMORY_ROUNDS 8 /* DenseNet-121 at 50 %: five rounds of 5-36 cuts raise its bound by 1.4 %, in 0.13 s */
#define GOMORY_CUTS 100

/* A bound above the LP's: Gomory's mixed-integer cuts (glp_gmi_gen) from the
 * optimal basis of a copy of the program m->P, in rounds, each re-solved from
 * the last basis, while they raise the bound and an eighth of the time left
 * lasts. The cuts stay out of the search's program: with them GLPK's MIR cuts
 * stalled it (Checkmate's FCN-8 at 0.9, proven optimal at once without them,
 * 89.5 % from its bound after 5 s). A cut that the plan so far (m->heur)
 * breaks is rounding noise in the tableau, not a valid cut: it is dropped.
 * Returns the number of cuts (*bound: the bound they prove, in cost units),
 * 0 when none helped, -1 when out of memory. */
static int gomory_bound(const ilp *m, const glp_smcp *lp_parm, double *bound)
{
    int nc = glp_get_num_cols(m->P), added = 0;
    int *ind = malloc(((size_t)nc + 1) * sizeof *ind);
    double *val = malloc(((size_t)nc + 1) * sizeof *val);
    glp_prob *Q = ind && val ? glp_create_prob() : NULL;
    if (!Q) {
        free(ind), free(val);
        return -1;
    }
    glp_copy_prob(Q, m->P, GLP_OFF);
    glp_smcp smcp = *lp_parm;
    smcp.presolve = GLP_OFF; /* from the copied optimal basis */
    double t0 = now(), spend = (m->deadline - t0) / 8;
    smcp.tm_lim = ms_left(m->deadline);
    int st = glp_simplex(Q, &smcp) ? GLP_UNDEF : glp_get_status(Q);
    double best = st == GLP_OPT ? glp_get_obj_val(Q) : -INFINITY;
    for (int round = 0; round < GOMORY_ROUNDS && st == GLP_OPT && now() - t0 < spend; round++) {
        glp_prob *pool = glp_create_prob();
        glp_add_cols(pool, nc);
        glp_gmi_gen(Q, pool, GOMORY_CUTS);
        int kept = 0;
        for (int i = 1; i <= glp_get_num_rows(pool); i++) {
            int len = glp_get_mat_row(pool, i, ind, val);
            double lb = glp_get_row_lb(pool, i), act = 0;
            for (int k = 1; k <= len; k++) act += val[k] * m->heur[ind[k]];
            if (act < lb - 1e-6 * (1 + fabs(lb))) continue;
            int r = glp_add_rows(Q, 1);
            glp_set_row_bnds(Q, r, GLP_LO, lb, 0);
            glp_set_mat_row(Q, r, len, ind, val);
            kept++;
        }
        glp_delete_prob(pool);
        if (!kept) break;
        smcp.tm_lim = ms_left(m->deadline);
        st = glp_simplex(Q, &smcp) ? GLP_UNDEF : glp_get_status(Q);
        if (st != GLP_OPT) break;
        added += kept;
        double obj = glp_get_obj_val(Q);
        bool tailing = obj - best < 1e-4 * fabs(best);
        best = obj;
        if (tailing) break;
    }
    *bound = best / m->oscale;
    glp_delete_prob(Q);
    free(ind), free(val);
    return added;
}

/* What one solve found (solve_once). */
typedef struct solve_out {
    mp_rstatus status;
    bool found;
    bool stalled;             /* a simplex or the search failed on numerical trouble (not on the time limit) */
    bool lp_done;             /* the LP relaxation was solved: bound is a bound */
    bool rins_cheaper;        /* near_plan found a cheaper plan */
    bool first_searched;      /* near_plan's search for any plan found the first one */
    int32_t gomory_cuts;      /* Gomory's cuts that raised the bound before the search */
    double gomory_bound;
    double lp_bound, bound;
    int32_t rows, cols;
} solve_out;

/* Makes plan (peak: its model peak) the plan so far: the fallback in choice, and the search's first heuristic call
 * is given it. */
static int adopt(ilp *m, const int32_t *plan, int64_t peak, int32_t *choice, bool *rounded, mp_err *err)
{
    int nc = glp_get_num_cols(m->P);
    if (!m->heur && !(m->heur = malloc(((size_t)nc + 1) * sizeof *m->heur)))
        return mp_fail(err, "out of memory in the remat ILP");
    if (plan_columns(m, plan, peak, m->heur)) return mp_fail(err, "out of memory in the remat ILP");
    memcpy(choice, plan, (size_t)m->sp->ndrop * sizeof *choice);
    *rounded = true;
    m->fed = false;
    offer(m->offer, choice);
    m->offered_cost = plan_cost(m->sp, choice);
    return 0;
}

/* Before the search: RINS from the plan so far (inc: the LP's rounding or
 * the warm start), on a quarter of the time left; a cheaper plan it finds
 * replaces the plan so far (choice, *rounded) and the search starts from it.
 * On DenseNet-121 at 50 % the search alone keeps the rounding's plan (a gap
 * of 21 % at 1.2 s) and RINS, over the 67 candidates the two disagree on,
 * closes it to 2.3 %; MobileNetV3 at 50 % gets within 1 % of its bound at
 * once (docs/ilp.md). With no plan so far (inc NULL: near the space's least
 * peak, where the greedy stops short of the budget), the first plan of a
 * search on the whole program, on a quarter of the time left, is the plan
 * RINS starts from. -1 on an error (err). */
static int near_plan(ilp *m, const int32_t *inc, double gap_limit, bool progress, int32_t *choice, bool *rounded,
                     solve_out *out, mp_err *err)
{
    const mp_rspace *sp = m->sp;
    double deadline = m->deadline;
    if (deadline - now() < 0.05) return 0;
    int32_t *near = malloc(((size_t)sp->ndrop + 1) * sizeof *near), open = 0;
    if (!near) return mp_fail(err, "out of memory in the remat ILP");
    int64_t peak;
    int r = 0;
    if (!inc) {
        r = search_copy(m, NULL, (deadline - now()) / 4, gap_limit, near, &peak, &open, err);
        if (progress)
            fprintf(stderr, "remat ilp: no plan yet, a first search: %s, %.2f s left\n", r == 1 ? "a plan" : "none",
                    deadline - now());
        if (r == 1 && (r = adopt(m, near, peak, choice, rounded, err)) == 0) inc = choice, out->first_searched = true;
    }
    if (inc) {
        r = search_copy(m, inc, (deadline - now()) / 4, gap_limit, near, &peak, &open, err);
        if (progress)
            fprintf(stderr, "remat ilp: RINS over %d candidates: %s, %.2f s left\n", open,
                    r == 1 ? "a cheaper plan" : "none cheaper", deadline - now());
        if (r == 1 && (r = adopt(m, near, peak, choice, rounded, err)) == 0) out->rins_cheaper = true;
    }
    free(near);
    return r < 0 ? -1 : 0;
}

/* One solve. warm (or NULL) is a plan that fits (cost mode) or any plan (peak
 * mode); choice gets the solver's plan, out->status what GLPK proved, and
 * out->found = false when no plan came back. lp_only stops after the LP
 * (out->lp_bound; no rounding, no branch and bound). Returns -1 on error. */
static int solve_once(const mp_rspace *sp, int64_t budget, bool peak_mode, bool lp_only, const int32_t *warm,
                      int64_t warm_peak, double deadline, double gap_limit, bool progress, const mp_rsolve_opts *offers,
                      int32_t *choice, solve_out *out, mp_err *err)
{
    ilp m = {.sp = sp, .budget = budget, .peak_mode = peak_mode, .bound = -INFINITY, .oscale = 1, .unit = 1,
             .deadline = deadline,
             .offer = offers, .offered_cost = offers && warm ? plan_cost(sp, warm) : INFINITY};
    memset(out, 0, sizeof *out);
    glp_term_out(progress ? GLP_ON : GLP_OFF);
    if (progress) glp_term_hook(to_stderr, NULL);
    int rc = -1;
    if (build_model(&m, err)) goto done;
    if (offers && offers->on_plan && !(m.offered = malloc(((size_t)sp->ndrop + 1) * sizeof *m.offered))) {
        mp_fail(err, "out of memory in the remat ILP");
        goto done;
    }
    out->rows = glp_get_num_rows(m.P), out->cols = glp_get_num_cols(m.P);
    if (warm) {
        m.heur = malloc(((size_t)out->cols + 1) * sizeof *m.heur);
        if (!m.heur || plan_columns(&m, warm, warm_peak, m.heur)) {
            mp_fail(err, "out of memory in the remat ILP");
            goto done;
        }
    }
    if (progress)
        fprintf(stderr, "remat ilp: %d rows, %d columns (%d binaries, %d retention), %d non-zeros%s\n", out->rows,
                out->cols, sp->ncand, m.nret, m.nz, warm ? ", warm start given" : "");
    glp_scale_prob(m.P, GLP_SF_AUTO);
    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = progress ? GLP_MSG_ON : GLP_MSG_OFF;
    smcp.meth = GLP_DUALP;
    smcp.pricing = pricing_for(m.P);
    smcp.presolve = GLP_ON; /* first solve only: later ones start from its basis */
    int st = GLP_UNDEF, added = 0;
    bool rounded = false;
    do { /* the LP, then again while it breaks pending frontier rows */
        smcp.tm_lim = ms_left(deadline);
        int ret = glp_simplex(m.P, &smcp);
        out->stalled |= ret == GLP_ESING || ret == GLP_ECOND || ret == GLP_EFAIL;
        smcp.presolve = GLP_OFF;
        st = ret == GLP_ENOPFS ? GLP_NOFEAS : glp_get_status(m.P); /* the presolver proves it without a status */
        if (st != GLP_OPT) break;
        if ((added = add_front(&m, false)) < 0) {
            mp_fail(err, "out of memory in the remat ILP");
            goto done;
        }
        if (progress && added) fprintf(stderr, "remat ilp: %d frontier rows join the LP\n", added);
    } while (added);
    if (st == GLP_OPT && m.nfront) { /* the rest hold already: the basis stays optimal */
        if (add_front(&m, true) < 0) {
            mp_fail(err, "out of memory in the remat ILP");
            goto done;
        }
        smcp.tm_lim = ms_left(deadline);
        glp_simplex(m.P, &smcp);
        st = glp_get_status(m.P);
    }
    out->rows = glp_get_num_rows(m.P);
    if (progress) fprintf(stderr, "remat ilp: LP done, %.2f s left\n", deadline - now());
    if (st == GLP_NOFEAS) {
        out->status = MP_RSOLVE_INFEASIBLE;
        rc = 0;
        goto done;
    }
    out->lp_done = st == GLP_OPT;
    if (st == GLP_OPT) out->lp_bound = out->bound = glp_get_obj_val(m.P) / m.oscale;
    else out->lp_bound = out->bound = peak_mode ? (double)sp->resident_bytes : 0; /* time limit in the LP */
    if (st == GLP_OPT && sp->ncand && !lp_only) { /* round the LP: a warm start near its optimum */
        double *lp = malloc(((size_t)sp->ncand + 1) * sizeof *lp);
        int32_t *rp = malloc(((size_t)sp->ndrop + 1) * sizeof *rp);
        int32_t *best = malloc(((size_t)sp->ndrop + 1) * sizeof *best);
        /* peak mode: aim at the LP's B, and a lower peak is better */
        int64_t target = peak_mode ? (int64_t)(glp_get_obj_val(m.P) / m.oscale) : budget;
        double best_cost = !warm ? INFINITY : peak_mode ? (double)warm_peak : plan_cost(sp, warm);
        int64_t rpk, best_peak = 0;
        bool better = false;
        static const double thetas[] = {0, 0.05, 0.3, 0.7}; /* which LP values lead; the rest by ratio */
        for (size_t k = 0; lp && rp && best && k < sizeof thetas / sizeof *thetas && now() < deadline; k++) {
            if (!k)
                for (int32_t c = 0; c < sp->ncand; c++) lp[c] = glp_get_col_prim(m.P, c + 1);
            if (greedy(sp, target, lp, thetas[k], rp, &rpk, err)) {
                free(lp), free(rp), free(best);
                goto done;
            }
            double score = peak_mode ? (double)rpk : plan_cost(sp, rp);
            if ((peak_mode || rpk <= budget) && score < best_cost) {
                memcpy(best, rp, (size_t)sp->ndrop * sizeof *best);
                best_cost = score, best_peak = rpk, better = true;
            }
        }
        if (better && adopt(&m, best, best_peak, choice, &rounded, err)) { /* the fallback if the search finds none */
            free(lp), free(rp), free(best);
            goto done;
        }
        if (progress && better)
            fprintf(stderr, "remat ilp: LP rounding gives %s %g, %.2f s left\n", peak_mode ? "peak" : "cost", best_cost,
                    deadline - now());
        free(lp), free(rp), free(best);
    }
    if (st == GLP_OPT && !peak_mode && !lp_only &&
        near_plan(&m, rounded ? choice : warm, gap_limit, progress, choice, &rounded, out, err))
        goto done;
    double so_far = !m.heur ? 0 : plan_cost(sp, rounded ? choice : warm), cut_bound;
    if (st == GLP_OPT && !peak_mode && !lp_only && m.heur && so_far - out->bound > gap_limit * so_far) {
        int cuts = gomory_bound(&m, &smcp, &cut_bound);
        if (cuts < 0) {
            mp_fail(err, "out of memory in the remat ILP");
            goto done;
        }
        if (cuts && cut_bound > out->bound) {
            out->gomory_cuts = cuts, out->gomory_bound = cut_bound;
            out->bound = m.bound = cut_bound;
            m.stop_gap = gap_limit; /* the search's own bound may stay below it: the callback stops it */
        }
        if (progress && cuts)
            fprintf(stderr, "remat ilp: %d Gomory cuts raise the bound to %g, %.2f s left\n", cuts, out->bound,
                    deadline - now());
    }
    if (st == GLP_OPT && deadline - now() > 0.01 && !lp_only) {
        glp_iocp iocp;
        glp_init_iocp(&iocp);
        iocp.msg_lev = progress ? GLP_MSG_ON : GLP_MSG_OFF;
        iocp.out_frq = 1000;
        iocp.cb_func = on_tree;
        iocp.cb_info = &m;
        bool small = sp->ncand <= SMALL_PROGRAM; /* on big programs the root's cut rounds cost more than they close */
        iocp.mir_cuts = small ? GLP_ON : GLP_OFF;
        iocp.cov_cuts = small ? GLP_ON : GLP_OFF;
        iocp.mip_gap = gap_limit > 0 ? gap_limit : 0; /* close enough: GLPK stops with the plan it has */
        /* small cost programs: half the time without the cover rows, then, if the
         * gap is still open, the rest with them, from the plan found (measured:
         * each way wins on some of the remat-graphs) */
        bool covers = small && !peak_mode && gap_limit > 0;
        double left = deadline - now();
        iocp.tm_lim = left > 0.001 ? (int)fmin(left * (covers ? 500 : 1000), 1e9) : 1;
        int ret = glp_intopt(m.P, &iocp);
        if (m.closed) ret = GLP_EMIPGAP; /* the callback stopped it within gap_limit of the cuts' bound */
        out->stalled |= ret == GLP_EFAIL;
        int ms = glp_mip_status(m.P);
        bool from_heur = false; /* the plan is the first search's, kept in m.heur */
        if (covers && ms != GLP_OPT && ms != GLP_NOFEAS && ret != GLP_EMIPGAP && deadline - now() > 0.05) {
            bool had = ms == GLP_FEAS; /* else the second search looks for a first plan */
            int nc = glp_get_num_cols(m.P);
            if (!m.heur) m.heur = had ? malloc(((size_t)nc + 1) * sizeof *m.heur) : NULL;
            if ((had && !m.heur) || add_cover_rows(&m)) {
                mp_fail(err, "out of memory in the remat ILP");
                goto done;
            }
            for (int j = 1; had && j <= nc; j++) m.heur[j] = glp_mip_col_val(m.P, j);
            m.fed = false; /* the first search's plan, or the warm start again */
            /* no plan yet (near the space's least peak): GLPK's feasibility pump looks for a first one (ResNet-50
             * at 38 %: none in 1.2 s without it; on every search, it cost other solves their plans' quality) */
            if (!had && !m.heur) iocp.fp_heur = GLP_ON;
            /* the cover rows are dense: on a program of many non-zeros a tableau row per fractional candidate
             * (Driebeck and Tomlin's rule) costs too much (DenseNet-121 at 50 %, 247,000: 0.65 s at the root, past
             * the time limit), and the most fractional one is branched on; on small ones the rule pays (Checkmate's
             * SegNet at 0.8, 2,400: 0.30 % from the bound, against 0.73 %) */
            if (glp_get_num_nz(m.P) > MFV_NZ) iocp.br_tech = GLP_BR_MFV;
            smcp.tm_lim = ms_left(deadline);
            glp_simplex(m.P, &smcp); /* the rows are implied: the basis stays optimal */
            iocp.tm_lim = ms_left(deadline);
            if (glp_get_status(m.P) == GLP_OPT) ret = glp_intopt(m.P, &iocp);
            if (m.closed) ret = GLP_EMIPGAP;
            out->stalled |= ret == GLP_EFAIL;
            int ms2 = glp_mip_status(m.P);
            if (ms2 == GLP_OPT || ms2 == GLP_FEAS || !had) ms = ms2;
            else from_heur = true;
        }
        if (ret == GLP_EMIPGAP && !from_heur) /* stopped within gap_limit of a bound the callback may not have seen */
            m.bound = fmax(m.bound, (glp_mip_obj_val(m.P) - gap_limit * (fabs(glp_mip_obj_val(m.P)) + DBL_EPSILON)) /
                                        m.oscale);
        if (ms == GLP_NOFEAS) {
            out->status = MP_RSOLVE_INFEASIBLE;
            rc = 0;
            goto done;
        }
        if (m.bound > out->bound) out->bound = m.bound;
        if (ms == GLP_OPT || ms == GLP_FEAS) {
            out->found = true;
            out->status = ms == GLP_OPT ? MP_RSOLVE_OPTIMAL : MP_RSOLVE_FEASIBLE;
            if (ms == GLP_OPT) out->bound = glp_mip_obj_val(m.P) / m.oscale;
            mip_choice(&m, m.P, from_heur ? m.heur : NULL, choice);
        }
    }
    if (!out->found && (rounded || warm)) { /* out of time: the best warm start is all there is */
        if (!rounded) memcpy(choice, warm, (size_t)sp->ndrop * sizeof *choice);
        out->found = true;
        out->status = MP_RSOLVE_FEASIBLE;
    }
    rc = 0;
done:
    free_model(&m);
    return rc;
}

/* Cost mode: moves the budget of a model built for a lower one (which holds
 * every row that can bind at this one): the node bounds on D_t and the
 * phase rows' right-hand sides. */
static void set_budget(ilp *m, int64_t budget)
{
    const mp_rspace *sp = m->sp;
    double u = m->unit, B = (double)budget / u;
    for (int32_t t = 0; t < sp->rg->nnodes; t++)
        if (m->dcol[t]) glp_set_col_bnds(m->P, m->dcol[t], GLP_LO, d_lower(m, t, B), 0);
    for (int32_t k = 0; k < m->nphase; k++)
        glp_set_row_bnds(m->P, m->prow[k], GLP_UP, 0, B - (double)sp->base_between[m->pstep[k]] / u);
    m->budget = budget;
}

/* Is there a plan with peak <= budget? One probe of the least-peak search on
 * the model m, built once: the LP (dual simplex from the last basis), then
 * its rounding, then a short branch and bound. 1: choice gets a plan whose
 * model peak *peak fits, 0: proven none (the LP, within GLPK's tolerance, or
 * the search), 2: not known in time, -1: error. */
static int probe_budget(ilp *m, int64_t budget, double deadline, bool progress, int32_t *choice, int64_t *peak,
                        mp_err *err)
{
    const mp_rspace *sp = m->sp;
    set_budget(m, budget);
    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    smcp.meth = GLP_DUALP;
    smcp.pricing = pricing_for(m->P);
    double left = deadline - now();
    if (left < 0.005) return 2;
    smcp.tm_lim = (int)fmin(left * 1000, 1e9);
    int ret = glp_simplex(m->P, &smcp);
    if (ret == GLP_EFAIL || ret == GLP_ESING || ret == GLP_ECOND || ret == GLP_EBADB) { /* a bad basis: start over */
        glp_adv_basis(m->P, 0);
        ret = glp_simplex(m->P, &smcp);
    }
    int st = glp_get_status(m->P);
    if (st == GLP_NOFEAS) return 0;
    if (st != GLP_OPT) return 2;
    double *lp = malloc(((size_t)sp->ncand + 1) * sizeof *lp);
    if (!lp) return mp_fail(err, "out of memory in the remat least-peak search");
    for (int32_t c = 0; c < sp->ncand; c++) lp[c] = glp_get_col_prim(m->P, c + 1);
    static const double thetas[] = {0.7, 0.3, 0.05, 0}; /* which LP values lead the rounding */
    int found = 2;
    for (size_t k = 0; k < sizeof thetas / sizeof *thetas && found == 2 && now() < deadline; k++) {
        if (greedy(sp, budget, lp, thetas[k], choice, peak, err)) {
            free(lp);
            return -1;
        }
        if (*peak <= budget) found = 1;
    }
    free(lp);
    left = deadline - now();
    if (found == 2 && left > 0.01) { /* the rounding missed: a short search */
        glp_iocp iocp;
        glp_init_iocp(&iocp);
        iocp.msg_lev = progress ? GLP_MSG_ON : GLP_MSG_OFF;
        iocp.out_frq = 1000;
        iocp.cb_func = on_tree;
        iocp.cb_info = m;
        iocp.mip_gap = 1; /* any plan will do */
        iocp.tm_lim = (int)fmin(fmin(left, 0.25) * 1000, 1e9);
        glp_intopt(m->P, &iocp);
        int ms = glp_mip_status(m->P);
        if (ms == GLP_NOFEAS) return 0;
        if (ms == GLP_OPT || ms == GLP_FEAS) {
            mip_choice(m, m->P, NULL, choice);
            if (mp_rplan_peak(sp, &(mp_rplan){choice}, NULL, peak, err)) return -1;
            if (*peak <= budget) found = 1;
        }
    }
    return found;
}

/* Bisects the least peak between *lo (a bound below every plan's peak) and
 * *hi (the peak of best, a plan) on one LP built for *lo: each probe only
 * moves its bounds, so dual simplex restarts from the last basis. A probe
 * left open (2) narrows where the next one looks, not the bounds. */
static int bisect_peak(const mp_rspace *sp, int64_t *lo, int64_t *hi, int32_t *best, double deadline, bool progress,
                       mp_err *err)
{
    ilp m = {.sp = sp, .budget = *lo, .bound = -INFINITY, .oscale = 1, .unit = 1};
    int32_t *got = malloc(((size_t)sp->ndrop + 1) * sizeof *got);
    int rc = -1, probes = 0;
    if (!got) {
        mp_fail(err, "out of memory in the remat least-peak search");
        goto done;
    }
    glp_term_out(GLP_OFF);
    if (build_model(&m, err)) goto done;
    if (add_front(&m, true) < 0) {
        mp_fail(err, "out of memory in the remat least-peak search");
        goto done;
    }
    glp_scale_prob(m.P, GLP_SF_AUTO);
    int64_t look = *lo; /* probes below it were left open */
    while (look < *hi && deadline - now() > 0.005) {
        int64_t mid = look + (*hi - look) / 2, pk = 0;
        int r = probe_budget(&m, mid, deadline, progress, got, &pk, err);
        probes++;
        if (r < 0) goto done;
        if (r == 0) *lo = look = mid + 1;
        else if (r == 1) *hi = pk, memcpy(best, got, (size_t)sp->ndrop * sizeof *best);
        else look = mid + 1;
    }
    if (progress)
        fprintf(stderr, "remat least peak: %d probes, between %lld and %lld bytes\n", probes, (long long)*lo,
                (long long)*hi);
    rc = 0;
done:
    free(got);
    free_model(&m);
    return rc;
}

int mp_remat_repair(const mp_rspace *sp, int64_t budget, const mp_rplan *plan, int32_t *out, int64_t *peak,
                    mp_err *err)
{
    double *lead = calloc((size_t)sp->ncand + 1, sizeof *lead);
    if (!lead) return mp_fail(err, "out of memory in the remat repair");
    for (int32_t i = 0; i < sp->ndrop; i++) /* its choices lead the rounding, as LP values of 1 */
        if (plan->choice[i] >= sp->cand_off[i] && plan->choice[i] < sp->cand_off[i + 1]) lead[plan->choice[i]] = 1;
    int rc = greedy(sp, budget, lead, 0.5, out, peak, err);
    free(lead);
    return rc ? -1 : *peak <= budget;
}

/* The better of the greedy plan and o->warm as a warm start: fits the budget
 * (cost mode, least cost) or the lower peak (peak mode). *ok = false when none fits. */
static int warm_start(const mp_rspace *sp, int64_t budget, bool peak_mode, const mp_rsolve_opts *o, double deadline,
                      int32_t *plan, int64_t *peak, bool *ok, mp_err *err)
{
    if (greedy(sp, peak_mode ? 0 : budget, NULL, 0, plan, peak, err)) return -1;
    *ok = peak_mode || *peak <= budget;
    if (!*ok) { /* the greedy stops short of the budget: aim it lower, by a growing step (near the least peak) */
        int32_t *try = malloc(((size_t)sp->ndrop + 1) * sizeof *try);
        if (!try) return mp_fail(err, "out of memory in the remat warm start");
        int64_t step = (sp->base_peak - budget) / 64 + 1, pk;
        for (int k = 0; k < 8 && !*ok && budget - step > 0 && now() < deadline; k++, step *= 2) {
            if (greedy(sp, budget - step, NULL, 0, try, &pk, err)) {
                free(try);
                return -1;
            }
            if (pk <= budget) memcpy(plan, try, (size_t)sp->ndrop * sizeof *plan), *peak = pk, *ok = true;
        }
        free(try);
    }
    if (peak_mode && *peak > sp->base_peak) { /* store everything does better */
        for (int32_t i = 0; i < sp->ndrop; i++) plan[i] = -1;
        *peak = sp->base_peak;
    }
    if (peak_mode) { /* bisect the greedy's budget between a bound below every peak and the best peak so far */
        bool okf;
        int64_t lo = peak_floor(sp, err, &okf), pk;
        int32_t *try = malloc(((size_t)sp->ndrop + 1) * sizeof *try);
        if (!okf || !try) {
            free(try);
            return okf ? mp_fail(err, "out of memory in the remat warm start") : -1;
        }
        for (int k = 0; k < 16 && lo < *peak - 1 && now() < deadline; k++) {
            int64_t mid = lo + (*peak - lo) / 2;
            if (greedy(sp, mid, NULL, 0, try, &pk, err)) {
                free(try);
                return -1;
            }
            if (pk > mid) lo = mid; /* the greedy does not get there: aim higher */
            if (pk < *peak) memcpy(plan, try, (size_t)sp->ndrop * sizeof *plan), *peak = pk;
        }
        free(try);
    }
    if (o->warm && o->warm->choice) {
        int64_t wp;
        mp_err ignored;
        if (mp_rplan_peak(sp, o->warm, NULL, &wp, &ignored)) return 0; /* not a plan of this space: ignore it */
        bool better = peak_mode ? wp < *peak
                                : wp <= budget && (!*ok || plan_cost(sp, o->warm->choice) < plan_cost(sp, plan));
        if (better) {
            memcpy(plan, o->warm->choice, (size_t)sp->ndrop * sizeof *plan);
            *peak = wp;
            *ok = true;
        }
    }
    return 0;
}

int mp_remat_solve(const mp_rspace *sp, int64_t budget, const mp_rsolve_opts *o, mp_rplan *p, mp_rsolve_info *info,
                   mp_err *err)
{
    double t0 = now();
    mp_rsolve_opts def = mp_rsolve_defaults();
    if (!o) o = &def;
    memset(info, 0, sizeof *info);
    p->choice = NULL;
    if (!sp || !sp->rg) return mp_fail(err, "remat solve: no decision space");
    if (mp_rplan_init(sp, p, err)) return -1;
    info->binaries = sp->ncand;
    info->model_peak = sp->base_peak;
    if (sp->base_peak <= budget || sp->ncand == 0) { /* store everything fits, or nothing can move */
        info->status = sp->base_peak <= budget ? MP_RSOLVE_OPTIMAL : MP_RSOLVE_INFEASIBLE;
        info->bounded = info->status == MP_RSOLVE_OPTIMAL; /* nothing to recompute: cost 0 is optimal */
        info->seconds = now() - t0;
        return 0;
    }
    int32_t *warm = malloc(((size_t)sp->ndrop + 1) * sizeof *warm);
    int32_t *got = malloc(((size_t)sp->ndrop + 1) * sizeof *got);
    int rc = -1;
    int64_t wpeak;
    bool wok;
    if (!warm || !got) {
        mp_fail(err, "out of memory in the remat solve");
        goto done;
    }
    double deadline = t0 + (o->time_limit > 0 ? o->time_limit : 5);
    if (warm_start(sp, budget, false, o, deadline, warm, &wpeak, &wok, err)) goto done;
    if (wok) offer(o, warm);
    /* GLPK's tolerances are relative: on huge byte counts a row may be met only
     * within them. The model's own count decides; a plan over budget makes the
     * next solve's budget tighter by the excess. */
    int64_t target = budget;
    solve_out so = {0};
    bool have = false;
    for (int attempt = 0; attempt < 4 && !have; attempt++) {
        if (solve_once(sp, target, false, false, wok ? warm : NULL, wpeak, deadline, o->gap_limit, o->progress, o,
                       got, &so, err))
            goto done;
        if (so.status == MP_RSOLVE_INFEASIBLE) {
            if (attempt > 0 && !wok) break; /* only the tightened budget is proven infeasible */
            if (wok) { /* only the tightened budget is infeasible: keep the warm start */
                memcpy(got, warm, (size_t)sp->ndrop * sizeof *got);
                so.found = true, so.status = MP_RSOLVE_FEASIBLE;
            } else {
                info->status = MP_RSOLVE_INFEASIBLE;
                info->rows = so.rows, info->cols = so.cols;
                rc = 0;
                goto done;
            }
        }
        if (!so.found) break;
        int64_t pk;
        if (mp_rplan_peak(sp, &(mp_rplan){got}, NULL, &pk, err)) goto done;
        if (pk <= budget) {
            have = true;
            if (wok && plan_cost(sp, warm) < plan_cost(sp, got) - 1e-9) memcpy(got, warm, (size_t)sp->ndrop * sizeof *got);
        } else {
            target -= pk - budget;
        }
    }
    if (!have && wok) {
        memcpy(got, warm, (size_t)sp->ndrop * sizeof *got);
        have = true, so.status = MP_RSOLVE_FEASIBLE;
    }
    info->stalled = so.stalled;
    info->rins_cheaper = so.rins_cheaper;
    info->first_searched = so.first_searched;
    info->gomory_cuts = so.gomory_cuts, info->gomory_bound = so.gomory_bound;
    if (!have) {
        if (so.stalled)
            mp_fail(err, "remat solve: GLPK stopped on a relaxation it could not solve (numerical trouble) after "
                    "%.2f s, before any plan was found (the budget of %lld bytes may be infeasible)", now() - t0,
                    (long long)budget);
        else
            mp_fail(err, "remat solve: no plan found within the time limit of %g s (the budget of %lld bytes may be "
                    "infeasible; try a longer --time-limit)", o->time_limit, (long long)budget);
        goto done;
    }
    memcpy(p->choice, got, (size_t)sp->ndrop * sizeof *got);
    if (mp_rplan_peak(sp, p, NULL, &info->model_peak, err)) goto done;
    info->status = so.status;
    info->objective = plan_cost(sp, p->choice);
    if (info->status == MP_RSOLVE_FEASIBLE && so.lp_done && so.bound >= info->objective * (1 - 1e-9))
        info->status = MP_RSOLVE_OPTIMAL; /* a bound (the cuts', when they stopped the search) meets the plan */
    info->lp_bound = fmin(so.bound, info->objective);
    if (info->status == MP_RSOLVE_OPTIMAL) info->lp_bound = info->objective;
    info->mip_gap = fmax(0, (info->objective - info->lp_bound) / fmax(info->objective, 1e-12));
    info->bounded = so.lp_done || info->status == MP_RSOLVE_OPTIMAL;
    info->rows = so.rows, info->cols = so.cols;
    rc = 0;
done:
    info->seconds = now() - t0;
    free(warm);
    free(got);
    if (rc) mp_rplan_free(p);
    return rc;
}

int mp_remat_min_peak(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *peak, mp_rplan *p, mp_err *err)
{
    int64_t lower;
    return mp_remat_min_peak_range(sp, o, peak, &lower, p, err);
}

/* Below every plan's peak: the floor, raised to the min-peak program's bound
 * when its LP finished (so->bound: the LP's, raised by the branch and bound
 * where it went higher, Moccasin's n100: 29,118 -> 31,823 bytes), less GLPK's
 * relative tolerance. */
static int64_t peak_lower(const mp_rspace *sp, const solve_out *so, mp_err *err, bool *ok)
{
    int64_t lo = peak_floor(sp, err, ok);
    double lp = so->bound * (1 - 1e-9);
    if (*ok && so->lp_done && lp > (double)lo) lo = (int64_t)floor(lp);
    return lo;
}

int mp_remat_min_peak_bound(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *lower, mp_err *err)
{
    double t0 = now();
    mp_rsolve_opts def = mp_rsolve_defaults();
    if (!o) o = &def;
    if (!sp || !sp->rg) return mp_fail(err, "remat min peak: no decision space");
    *lower = sp->base_peak;
    if (sp->ncand == 0 || sp->rg->nnodes == 0) return 0;
    int32_t *got = malloc(((size_t)sp->ndrop + 1) * sizeof *got);
    if (!got) return mp_fail(err, "out of memory in the remat min peak");
    /* the LP alone: no rounding, no branch and bound */
    solve_out so;
    double limit = o->time_limit > 0 ? o->time_limit : 5;
    int rc = solve_once(sp, 0, true, true, NULL, 0, t0 + limit, 0, o->progress, NULL, got, &so, err);
    free(got);
    bool ok = false;
    if (!rc) *lower = peak_lower(sp, &so, err, &ok);
    return ok ? 0 : -1;
}

int mp_remat_min_peak_range(const mp_rspace *sp, const mp_rsolve_opts *o, int64_t *peak, int64_t *lower, mp_rplan *p,
                            mp_err *err)
{
    double t0 = now();
    mp_rsolve_opts def = mp_rsolve_defaults();
    if (!o) o = &def;
    p->choice = NULL;
    if (!sp || !sp->rg) return mp_fail(err, "remat min peak: no decision space");
    if (mp_rplan_init(sp, p, err)) return -1;
    *peak = *lower = sp->base_peak;
    if (sp->ncand == 0 || sp->rg->nnodes == 0) return 0;
    int32_t *warm = malloc(((size_t)sp->ndrop + 1) * sizeof *warm);
    int32_t *got = malloc(((size_t)sp->ndrop + 1) * sizeof *got);
    int rc = -1;
    int64_t wpeak;
    bool wok;
    if (!warm || !got) {
        mp_fail(err, "out of memory in the remat min peak");
        goto done;
    }
    double limit = o->time_limit > 0 ? o->time_limit : 5, deadline = t0 + limit;
    if (warm_start(sp, 0, true, o, t0 + limit / 3, warm, &wpeak, &wok, err)) goto done;
    solve_out so;
    if (solve_once(sp, 0, true, false, warm, wpeak, t0 + limit * 0.75, 0, o->progress, NULL, got, &so, err)) goto done;
    int64_t gp = INT64_MAX;
    if (so.found && mp_rplan_peak(sp, &(mp_rplan){got}, NULL, &gp, err)) goto done;
    if (gp > wpeak) memcpy(got, warm, (size_t)sp->ndrop * sizeof *got), gp = wpeak;
    memcpy(p->choice, got, (size_t)sp->ndrop * sizeof *got);
    /* Not proven: bisect the budget with the cost program between a bound
     * below every peak and the best peak so far, while time is left. */
    bool ok;
    int64_t lo = peak_lower(sp, &so, err, &ok);
    if (!ok) goto done;
    if (so.found && so.status == MP_RSOLVE_OPTIMAL) lo = gp;
    if (o->proven_above >= lo && o->proven_above < gp) lo = o->proven_above + 1;
    if (lo < gp && bisect_peak(sp, &lo, &gp, p->choice, deadline, o->progress, err)) goto done;
    *peak = gp;
    *lower = lo < gp ? lo : gp;
    mp_rsolve_opts rest = *o;
    /* the cheapest plan at that peak, with what time is left */
    rest.time_limit = deadline - now();
    rest.warm = p;
    if (rest.time_limit > 0.05) {
        mp_rplan q;
        mp_rsolve_info qi;
        if (mp_remat_solve(sp, gp, &rest, &q, &qi, err)) goto done;
        if (qi.status != MP_RSOLVE_INFEASIBLE && qi.model_peak <= gp) memcpy(p->choice, q.choice, (size_t)sp->ndrop * sizeof *got);
        mp_rplan_free(&q);
    }
    rc = 0;
done:
    free(warm);
    free(got);
    if (rc) mp_rplan_free(p);
    return rc;
}
