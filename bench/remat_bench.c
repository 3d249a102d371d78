/* remat_bench.c - the rematerialization ILP against the sqrt, greedy and
 * lookahead baselines on graph-json files (Checkmate, Moccasin). For each graph and
 * budget fraction of its store-everything peak it prints one markdown row:
 * the recompute overhead of each order (recounted by mp_rsched_count, as a %
 * of the store-everything step's cost), the ILP's order pruned of what the
 * budget does not need (mp_rsched_prune, as memplan gives it), the bound on
 * every plan's overhead (mp_remat_any_plan_bound, 0.2 s, as memplan gives
 * it), the ILP's gap to its LP bound, its status and its solve time. A
 * baseline that does not fit shows "—".
 *
 *   memplan-remat-bench [--time-limit SEC] [--expand NODES] [--retain-over N] [--wide NODES] FILE_OR_DIR...
 *
 * --expand: recipes that make an input for themselves on graphs of at most
 * NODES nodes (mp_rspace_opts.expand_nodes, default 0). --retain-over:
 * retaining candidates also where a recipe reruns more than N nodes
 * (mp_rspace_opts.retain_over; default only where no recipe is offered, and
 * everywhere on graphs of at most mp_rspace_opts.retain_nodes, 200, nodes).
 * --wide: the wide space (values retained in their gaps, recipes cut short)
 * on graphs of at most NODES nodes (mp_rspace_opts.wide_nodes, default 32).
 *
 * Exit status 1 if any ILP plan's recount exceeds the budget or differs from
 * the peak the ILP counted (the row says which), or its pruned order does
 * not fit. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "passes/remat.h"

static const double fractions[] = {0.5, 0.6, 0.7, 0.8, 0.9};
static int32_t expand_nodes; /* --expand */
static int32_t retain_over; /* --retain-over, from mp_rspace_defaults() */
static int32_t wide_nodes;  /* --wide, from mp_rspace_defaults() */
#define ANY_BOUND_SECONDS 0.2 /* as memplan's */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Recompute overhead of the baseline b at budget, in % of base_cost; -1 if it does not fit. */
static double baseline_overhead(const mp_rgraph *rg, mp_rbaseline b, int64_t budget, double base_cost)
{
    mp_err err = {{0}};
    mp_rsched s;
    mp_rcount c;
    if (mp_remat_baseline(rg, b, budget, &s, &err)) return -1;
    int rc = mp_rsched_count(rg, &s, &c, &err);
    mp_rsched_free(&s);
    if (rc || c.peak_bytes > budget) return -1;
    return 100.0 * c.recompute_cost / base_cost;
}

static void pct(char *buf, size_t n, double v)
{
    if (v < 0) snprintf(buf, n, "—");
    else snprintf(buf, n, "%.2f", v);
}

static const char *const status_names[] = {"optimal", "feasible", "infeasible"};

/* One graph: a row per budget fraction. Returns 1 if a plan's recount disagrees. */
static int bench_graph(const char *path, double time_limit)
{
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    mp_rgraph rg;
    mp_err err = {{0}};
    if (mp_rgraph_from_json(path, &rg, &err)) {
        printf("| %s | | | error: %s | | | | | | | |\n", name, err.msg);
        return 0;
    }
    int bad = 0;
    mp_rsched id;
    mp_rcount base;
    mp_rspace sp;
    memset(&sp, 0, sizeof sp);
    mp_rspace_opts ro = mp_rspace_defaults();
    ro.expand_nodes = expand_nodes;
    ro.retain_over = retain_over;
    ro.wide_nodes = wide_nodes;
    if (mp_rsched_identity(&rg, &id, &err) || mp_rsched_count(&rg, &id, &base, &err) ||
        mp_rspace_build(&rg, &ro, &sp, &err)) {
        printf("| %s | %d | | error: %s | | | | | | | |\n", name, rg.nnodes, err.msg);
        goto done;
    }
    double base_cost = base.cost > 0 ? base.cost : 1;
    for (size_t f = 0; f < sizeof fractions / sizeof *fractions; f++) {
        int64_t budget = (int64_t)((double)base.peak_bytes * fractions[f]);
        char ilp[32], pruned[32], sq[32], gr[32], la[32], gap[32], status[64], any[32];
        pct(sq, sizeof sq, baseline_overhead(&rg, MP_RBASE_SQRT, budget, base_cost));
        pct(gr, sizeof gr, baseline_overhead(&rg, MP_RBASE_GREEDY, budget, base_cost));
        pct(la, sizeof la, baseline_overhead(&rg, MP_RBASE_LOOKAHEAD, budget, base_cost));
        mp_rsolve_opts so = mp_rsolve_defaults();
        so.time_limit = time_limit;
        mp_rplan plan;
        mp_rsolve_info info;
        memset(&plan, 0, sizeof plan);
        memset(&info, 0, sizeof info);
        double t0 = now();
        int rc = mp_remat_solve(&sp, budget, &so, &plan, &info, &err);
        double secs = now() - t0;
        snprintf(ilp, sizeof ilp, "—");
        snprintf(pruned, sizeof pruned, "—");
        snprintf(gap, sizeof gap, "—");
        /* no plan within the time limit, none proven impossible either (the CLI gives a range then) */
        snprintf(status, sizeof status, "%s", rc ? "none found in time" : status_names[info.status % 3]);
        if (!rc && info.status != MP_RSOLVE_INFEASIBLE) {
            mp_rsched s;
            mp_rcount c;
            if (mp_rplan_emit(&sp, &plan, &s, &err) || mp_rsched_count(&rg, &s, &c, &err)) {
                snprintf(status, sizeof status, "%s, recount error", status_names[info.status % 3]);
                fprintf(stderr, "%s at %.1f: %s\n", name, fractions[f], err.msg);
                bad = 1;
            } else {
                pct(ilp, sizeof ilp, 100.0 * c.recompute_cost / base_cost);
                mp_rcount pc; /* what the command gives: the plan rid of what the budget does not need */
                if (mp_rsched_prune(&rg, &s, budget, NULL, &err) || mp_rsched_count(&rg, &s, &pc, &err) ||
                    pc.peak_bytes > budget) {
                    fprintf(stderr, "%s at %.1f: pruned order: %s\n", name, fractions[f],
                            err.msg[0] ? err.msg : "above the budget");
                    bad = 1;
                } else {
                    pct(pruned, sizeof pruned, 100.0 * pc.recompute_cost / base_cost);
                }
                double obj = info.objective > 1e-12 ? info.objective : 1e-12;
                if (info.bounded)
                    pct(gap, sizeof gap, info.objective > 1e-12 ? 100.0 * (info.objective - info.lp_bound) / obj : 0);
                else
                    snprintf(gap, sizeof gap, "no LP"); /* the relaxation did not finish in the time limit */
                if (c.peak_bytes > budget || c.peak_bytes != info.model_peak) {
                    snprintf(status, sizeof status, "%s, recount %lld vs model %lld", status_names[info.status % 3],
                             (long long)c.peak_bytes, (long long)info.model_peak);
                    bad = 1;
                }
                mp_rsched_free(&s);
            }
        }
        mp_rplan_free(&plan);
        double bound; /* on every plan, the ILP space's or not */
        int32_t at;
        if (mp_remat_any_plan_bound(&rg, budget, ANY_BOUND_SECONDS, &bound, &at, &err)) snprintf(any, sizeof any, "error");
        else if (isinf(bound)) snprintf(any, sizeof any, "none fits"); /* a step's own inputs and outputs exceed it */
        else pct(any, sizeof any, 100.0 * bound / base_cost);
        printf("| %s | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %.2f |\n", name, rg.nnodes, fractions[f], ilp,
               pruned, any, sq, gr, la, gap, status, secs);
        fflush(stdout);
    }
done:
    mp_rspace_free(&sp);
    mp_rsched_free(&id);
    mp_rgraph_free(&rg);
    return bad;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .json files of dir, sorted, run one by one. */
static int bench_dir(const char *dir, double time_limit)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **files = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(files, cap * sizeof *files);
            if (!grown) break;
            files = grown;
        }
        size_t plen = strlen(dir) + len + 2;
        if (!(files[n] = malloc(plen))) break;
        snprintf(files[n++], plen, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(files, n, sizeof *files, cmp_str);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= bench_graph(files[i], time_limit);
        free(files[i]);
    }
    free(files);
    return bad;
}

int main(int argc, char **argv)
{
    double time_limit = mp_rsolve_defaults().time_limit;
    retain_over = mp_rspace_defaults().retain_over;
    wide_nodes = mp_rspace_defaults().wide_nodes;
    int first = 1;
    for (; first + 1 < argc; first += 2)
        if (!strcmp(argv[first], "--time-limit")) time_limit = atof(argv[first + 1]);
        else if (!strcmp(argv[first], "--expand")) expand_nodes = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--retain-over")) retain_over = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--wide")) wide_nodes = atoi(argv[first + 1]);
        else break;
    if (first >= argc) {
        fprintf(stderr, "usage: memplan-remat-bench [--time-limit SEC] [--expand NODES] [--retain-over N] "
                        "[--wide NODES] FILE_OR_DIR...\n");
        return 2;
    }
    printf("| graph | nodes | budget | ILP overhead %% | pruned %% | any plan >= %% | sqrt %% | greedy %% | "
           "lookahead %% | gap to LP bound %% | ILP status | solve s |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
    int bad = 0;
    for (int a = first; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st)) {
            fprintf(stderr, "memplan-remat-bench: %s is absent, skipped\n", argv[a]);
            continue;
        }
        bad |= S_ISDIR(st.st_mode) ? bench_dir(argv[a], time_limit) : bench_graph(argv[a], time_limit);
    }
    return bad;
}
