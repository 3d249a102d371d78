/* test_arena.c - static offsets (passes/arena.h) and their verifier
 * (passes/offsets_verify.h): hand instances reach their known optimum
 * (MiniMalloc's 5-buffer example, the omnimalloc-small cases, optimum in the
 * name), random instances always verify and never beat the lower bound, the
 * training step of models/cnn_bn.onnx stays within 1.01x of its bound, a
 * work or node limit places alike on every run, bad
 * input is refused, and the verifier catches each corruption of a valid plan. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/arena.h"
#include "passes/lifetime.h"
#include "passes/offsets_verify.h"
#include "passes/schedule.h"
#include "passes/train.h"

/* Assigns with alignment `align` and checks what holds for every result. */
static mp_arena_result assign_checked(const mp_arena_buf *b, int32_t n, int64_t align, double time_limit,
                                      int64_t *off)
{
    mp_arena_opts o = mp_arena_defaults();
    o.alignment = align;
    o.time_limit = time_limit;
    mp_arena_result r;
    mp_err err = {{0}};
    ck_assert_msg(mp_arena_assign(b, n, &o, off, &r, &err) == 0, "%s", err.msg);
    ck_assert_msg(mp_offsets_verify(b, n, off, r.arena_bytes, -1, &err) == 0, "%s", err.msg);
    ck_assert_int_ge(r.arena_bytes, r.lower_bound);
    ck_assert_int_ge(r.aligned_bound, r.lower_bound);
    for (int32_t i = 0; i < n; i++) ck_assert_int_eq(off[i] % align, 0);
    for (int k = 0; k < MP_ARENA_METHOD_COUNT; k++)
        if (r.method_bytes[k] >= 0) ck_assert_int_ge(r.method_bytes[k], r.arena_bytes);
    ck_assert_int_eq(r.method_bytes[r.method], r.arena_bytes);
    return r;
}

/* ---- hand instances ------------------------------------------------------------ */

/* MiniMalloc's README example: capacity 12 is the optimum and the bound. */
START_TEST(test_minimalloc_example)
{
    static const mp_arena_buf b[] = {
        {0, 3, 4, "b1"}, {3, 9, 4, "b2"}, {0, 9, 4, "b3"}, {9, 21, 4, "b4"}, {0, 21, 4, "b5"},
    };
    int64_t off[5];
    mp_arena_result r = assign_checked(b, 5, 1, 1.0, off);
    ck_assert_int_eq(r.lower_bound, 12);
    ck_assert_int_eq(r.arena_bytes, 12);
    ck_assert(r.optimal);
}
END_TEST

/* omnimalloc's a.6: greedy by size misses it; the best method must not. */
START_TEST(test_omnimalloc_inline)
{
    static const mp_arena_buf b[] = {
        {0, 3, 2, NULL}, {2, 5, 2, NULL}, {0, 2, 3, NULL}, {3, 5, 3, NULL}, {1, 4, 1, NULL},
    };
    int64_t off[5];
    mp_arena_result r = assign_checked(b, 5, 1, 1.0, off);
    ck_assert_int_eq(r.lower_bound, 6);
    ck_assert_int_eq(r.arena_bytes, 6);
    ck_assert(r.optimal);
    ck_assert_int_gt(r.method_bytes[MP_ARENA_BY_SIZE], 6);
}
END_TEST

/* omnimalloc's f.14: by size and by start miss it; by contention puts the
 * buffers that cross the busiest instants (4 and 5 units at [1, 2)) first
 * within their size class and reaches it with the search off. */
START_TEST(test_contention_inline)
{
    static const mp_arena_buf b[] = {
        {0, 5, 4, NULL}, {0, 6, 3, NULL}, {1, 6, 2, NULL}, {5, 8, 5, NULL}, {2, 8, 4, NULL}, {1, 2, 5, NULL},
    };
    int64_t off[6];
    mp_arena_result r = assign_checked(b, 6, 1, 0, off);
    ck_assert_int_eq(r.lower_bound, 14);
    ck_assert_int_gt(r.method_bytes[MP_ARENA_BY_SIZE], 14);
    ck_assert_int_gt(r.method_bytes[MP_ARENA_BY_START], 14);
    ck_assert_int_eq(r.method_bytes[MP_ARENA_BY_CONTENTION], 14);
    ck_assert_int_eq(r.method, MP_ARENA_BY_CONTENTION);
    ck_assert(r.optimal);
}
END_TEST

static int read_csv(const char *path, mp_arena_buf *b, int max)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        long long id, lo, up, sz;
        if (sscanf(line, "%lld,%lld,%lld,%lld", &id, &lo, &up, &sz) == 4)
            b[n++] = (mp_arena_buf){.lower = lo, .upper = up, .size = sz};
    }
    fclose(f);
    return n;
}

/* Every omnimalloc-small case (X.OPT.csv) at its optimum, proven; with the
 * search off, the heuristics alone reach every optimum, by contention where
 * by size and by start miss one. */
START_TEST(test_omnimalloc_small)
{
    const char *dir = MEMPLAN_SHARED "/alloc-benchmarks/omnimalloc-small";
    DIR *d = opendir(dir);
    if (!d) {
        printf("test_omnimalloc_small: %s absent, skipped\n", dir);
        return;
    }
    int cases = 0, missed_by_heuristics = 0, missed_by_size_and_start = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strchr(e->d_name, '.');
        if (!dot || !strstr(e->d_name, ".csv")) continue;
        long long opt = atoll(dot + 1);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mp_arena_buf b[64];
        int64_t off[64];
        int n = read_csv(path, b, 64);
        ck_assert_int_gt(n, 0);
        mp_arena_result r = assign_checked(b, n, 1, 1.0, off);
        ck_assert_msg(r.arena_bytes == opt && r.optimal, "%s: arena %lld, optimum %lld", e->d_name,
                      (long long)r.arena_bytes, opt);
        mp_arena_result h = assign_checked(b, n, 1, 0, off);
        missed_by_heuristics += h.arena_bytes > opt;
        missed_by_size_and_start += h.method_bytes[MP_ARENA_BY_SIZE] > opt && h.method_bytes[MP_ARENA_BY_START] > opt;
        ck_assert_int_eq(h.method_bytes[MP_ARENA_SEARCH], -1);
        cases++;
    }
    closedir(d);
    ck_assert_int_eq(cases, 7);
    ck_assert_int_ge(missed_by_size_and_start, 1); /* f.14: by size and by start miss it */
    ck_assert_int_eq(missed_by_heuristics, 0);      /* and by contention reaches it */
}
END_TEST

/* ---- random instances ------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;
static int64_t rnd(int64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)n);
}

START_TEST(test_random_instances)
{
    enum { MAXB = 80 };
    mp_arena_buf b[MAXB];
    int64_t off[MAXB];
    int reached = 0;
    for (int t = 0; t < 300; t++) {
        int32_t n = 1 + (int32_t)rnd(MAXB);
        int64_t horizon = 2 + rnd(60), maxsize = t % 3 ? 1 + rnd(5000) : 8;
        for (int32_t i = 0; i < n; i++) {
            int64_t lo = rnd(horizon);
            b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(horizon / 2 + 1), .size = rnd(maxsize + 1)};
        }
        int64_t align = t % 4 == 0 ? 256 : 1;
        mp_arena_result r = assign_checked(b, n, align, t % 2 ? 0.02 : 0, off);
        if (r.optimal) ck_assert_int_le(r.arena_bytes, r.aligned_bound);
        reached += r.arena_bytes == r.lower_bound;
    }
    ck_assert_int_gt(reached, 100);
}
END_TEST

/* The optimum by brute force: placing buffers in increasing order of their
 * offsets in an optimal solution, each at the lowest offset free of the
 * conflicting ones placed, never goes above it; so the best such greedy over
 * all orders is the optimum. */
static int64_t brute_force(const mp_arena_buf *b, int n, int *perm, int k, int64_t *off, int64_t best)
{
    if (k == n) {
        int64_t a = 0;
        for (int i = 0; i < n; i++) a = off[i] + b[i].size > a ? off[i] + b[i].size : a;
        return a < best ? a : best;
    }
    for (int j = k; j < n; j++) {
        int t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
        int i = perm[k];
        /* lowest offset: 0 or the top of a placed conflicting buffer, whichever fits */
        int64_t at = INT64_MAX;
        for (int c = -1; c < k; c++) {
            int64_t o = c < 0 ? 0 : off[perm[c]] + b[perm[c]].size;
            bool ok = true;
            for (int q = 0; q < k && ok; q++) {
                int p = perm[q];
                bool live = b[p].lower < b[i].upper && b[i].lower < b[p].upper;
                ok = !live || o + b[i].size <= off[p] || off[p] + b[p].size <= o;
            }
            if (ok && o < at) at = o;
        }
        off[i] = at;
        best = brute_force(b, n, perm, k + 1, off, best);
        perm[j] = perm[k];
        perm[k] = t;
    }
    return best;
}

/* Tiny instances: the search reaches the brute-force optimum and says so
 * (checks that its pruning rules never cut the optimum away). */
START_TEST(test_search_matches_brute_force)
{
    mp_arena_buf b[7];
    int64_t off[7], tmp[7];
    int perm[7], searched = 0;
    for (int t = 0; t < 1000; t++) {
        int n = 4 + (int)rnd(4);
        for (int i = 0; i < n; i++) { /* dense lifetimes of varied sizes: the optimum often lies above the bound */
            int64_t lo = rnd(3);
            b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(3), .size = 1 + rnd(20)};
            perm[i] = i;
        }
        int64_t opt = brute_force(b, n, perm, 0, tmp, INT64_MAX);
        mp_arena_result r = assign_checked(b, n, 1, 1.0, off);
        ck_assert_msg(r.arena_bytes == opt && r.optimal, "instance %d: arena %lld, optimum %lld", t,
                      (long long)r.arena_bytes, (long long)opt);
        searched += r.method_bytes[MP_ARENA_SEARCH] >= 0 || r.arena_bytes > r.lower_bound;
    }
    ck_assert_msg(searched >= 10, "searched %d", searched); /* cases the heuristics alone missed */
}
END_TEST

/* n buffers over 150 instants: enough overlap that the heuristics often miss the bound. */
static void random_buffers(mp_arena_buf *b, int n)
{
    for (int i = 0; i < n; i++) {
        int64_t lo = rnd(120);
        b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(30), .size = 1 + rnd(100)};
    }
}

/* The heuristics of b with the greedy by size sweeping the placed buffers
 * (the default) and collecting each one's conflicts in a tree (the
 * reference): the same offsets, and each method the same arena. */
static void sweep_matches_tree(const mp_arena_buf *b, int32_t n, int64_t align)
{
    int64_t *off1 = malloc((size_t)n * sizeof *off1), *off2 = malloc((size_t)n * sizeof *off2);
    ck_assert(off1 && off2);
    mp_arena_opts o = mp_arena_defaults();
    o.alignment = align;
    o.time_limit = 0;
    mp_arena_result r1, r2;
    mp_err err = {{0}};
    ck_assert_msg(mp_arena_assign(b, n, &o, off1, &r1, &err) == 0, "%s", err.msg);
    o.sweep_max_buffers = 0;
    ck_assert_msg(mp_arena_assign(b, n, &o, off2, &r2, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(memcmp(off1, off2, (size_t)n * sizeof *off1), 0);
    for (int k = 0; k < MP_ARENA_METHOD_COUNT; k++) ck_assert_int_eq(r1.method_bytes[k], r2.method_bytes[k]);
    ck_assert_int_eq(r1.method, r2.method);
    free(off1);
    free(off2);
}

START_TEST(test_greedy_sweep_matches_tree)
{
    enum { NB = 700 };
    static mp_arena_buf b[4096];
    for (int t = 0; t < 40; t++) { /* sizes from a few values at times, so that offsets tie */
        int32_t n = 20 + (int32_t)rnd(NB - 20);
        int64_t span = 30 + rnd(500), sizes = t % 3 ? 1 + rnd(1000) : 4;
        for (int32_t i = 0; i < n; i++) {
            int64_t lo = rnd(span);
            b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(span / 3 + 1), .size = 1 + rnd(sizes) * 16};
        }
        sweep_matches_tree(b, n, t % 2 ? 1 : 16);
    }
    const char *dir = MEMPLAN_SHARED "/alloc-benchmarks/minimalloc/challenging";
    static const char *const names[] = {"A.1048576.csv", "D.1048576.csv", "J.1048576.csv"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (access(path, R_OK)) {
            printf("test_greedy_sweep_matches_tree: %s is absent, skipped\n", path);
            continue;
        }
        sweep_matches_tree(b, read_csv(path, b, 4096), 1);
    }
}
END_TEST

/* With a work limit (or a node limit) the search is the same under any load:
 * two runs place every buffer alike and search the same nodes. */
START_TEST(test_node_limit_reproducible)
{
    enum { NB = 160 };
    mp_arena_buf b[NB];
    int64_t off1[NB], off2[NB];
    int searched = 0;
    for (int t = 0; t < 12; t++) {
        random_buffers(b, NB);
        mp_arena_opts o = mp_arena_defaults();
        o.alignment = 1;
        o.time_limit = 60; /* a safety net: the nodes end the search long before */
        if (t % 2) o.node_limit = 2000;
        else o.work_limit = 2000000;
        mp_arena_result r1, r2;
        mp_err err = {{0}};
        ck_assert_msg(mp_arena_assign(b, NB, &o, off1, &r1, &err) == 0, "%s", err.msg);
        ck_assert_msg(mp_arena_assign(b, NB, &o, off2, &r2, &err) == 0, "%s", err.msg);
        ck_assert_msg(mp_offsets_verify(b, NB, off1, r1.arena_bytes, -1, &err) == 0, "%s", err.msg);
        if (o.node_limit) ck_assert_int_le(r1.nodes, o.node_limit);
        ck_assert_int_eq(r1.nodes, r2.nodes);
        ck_assert_int_eq(r1.arena_bytes, r2.arena_bytes);
        ck_assert_int_eq(memcmp(off1, off2, sizeof off1), 0);
        searched += r1.nodes > 0;
    }
    ck_assert_int_gt(searched, 6); /* the heuristics alone left most of them above the bound */
}
END_TEST

/* The heuristics' assignment of b (alignment 1) in h, and the options for a
 * search after them: node_limit nodes, and a minute of time, a safety net the
 * nodes end long before. */
static mp_arena_opts heuristics_first(const mp_arena_buf *b, int32_t n, int64_t *off, mp_arena_result *h,
                                      int64_t node_limit)
{
    mp_arena_opts o = mp_arena_defaults();
    o.alignment = 1;
    o.time_limit = 0;
    mp_err err = {{0}};
    ck_assert_msg(mp_arena_assign(b, n, &o, off, h, &err) == 0, "%s", err.msg);
    o.time_limit = 60;
    o.node_limit = node_limit;
    return o;
}

/* A target the heuristics already meet, but not within 1 % of the bound: the
 * search goes on for a smaller arena with half its node limit at most, where
 * without the target it spends more. */
START_TEST(test_target_met_halves_limit)
{
    enum { NB = 160, LIMIT = 2000 };
    mp_arena_buf b[NB];
    int64_t off[NB];
    int cases = 0;
    for (int t = 0; t < 12; t++) {
        random_buffers(b, NB);
        mp_arena_result h, free_run, met;
        mp_arena_opts o = heuristics_first(b, NB, off, &h, LIMIT);
        if (h.arena_bytes * 100 <= h.lower_bound * 101) continue; /* the target would be met within 1 % */
        mp_err err = {{0}};
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &free_run, &err) == 0, "%s", err.msg);
        if (free_run.optimal || free_run.nodes <= LIMIT / 2) continue; /* the search ended by itself */
        o.target = h.arena_bytes;
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &met, &err) == 0, "%s", err.msg);
        ck_assert_msg(mp_offsets_verify(b, NB, off, met.arena_bytes, -1, &err) == 0, "%s", err.msg);
        ck_assert_int_le(met.nodes, LIMIT / 2);
        ck_assert_int_le(met.arena_bytes, h.arena_bytes);
        cases++;
    }
    ck_assert_int_gt(cases, 3);
}
END_TEST

/* A caller that needs only its target (target_only): a target below the
 * bound is not searched at all, and one the first probe misses ends the
 * search (with what that probe left: the parts it placed within the target),
 * where without the option the bisection goes on. */
START_TEST(test_target_only_stops_at_miss)
{
    enum { NB = 160, LIMIT = 600 };
    mp_arena_buf b[NB];
    int64_t off[NB];
    int missed = 0;
    for (int t = 0; t < 24; t++) {
        random_buffers(b, NB);
        mp_arena_result h, r, full;
        mp_arena_opts o = heuristics_first(b, NB, off, &h, LIMIT);
        if (h.arena_bytes == h.lower_bound) continue; /* nothing to search */
        mp_err err = {{0}};
        o.target_only = true;
        o.target = h.lower_bound - 1; /* below the bound: out of reach, proven */
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &r, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(r.nodes, 0);
        ck_assert_int_eq(r.arena_bytes, h.arena_bytes);
        o.target = h.lower_bound + 1; /* above the bound: the first probe's (sizes here have gcd 1) */
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &r, &err) == 0, "%s", err.msg);
        ck_assert_msg(mp_offsets_verify(b, NB, off, r.arena_bytes, -1, &err) == 0, "%s", err.msg);
        if (r.arena_bytes <= o.target) continue; /* met */
        ck_assert_int_le(r.arena_bytes, h.arena_bytes);
        ck_assert_int_le(r.nodes, LIMIT / 2); /* the first probe's half */
        missed++;
        o.target_only = false;
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &full, &err) == 0, "%s", err.msg);
        ck_assert_int_gt(full.nodes, r.nodes); /* the bisection that follows a miss */
    }
    ck_assert_int_gt(missed, 2);
}
END_TEST

/* A search cancelled by another thread (which no longer needs its result)
 * stops at once: set before it starts, the heuristics' assignment comes back
 * after a few nodes; set while it runs (half a minute of time, no node
 * limit), it returns soon after. Either way the offsets are valid. */
typedef struct cancel_job {
    const mp_arena_buf *b;
    int32_t n;
    mp_arena_opts o;
    int64_t *off;
    mp_arena_result r;
    int rc;
} cancel_job;

static void *cancel_job_run(void *arg)
{
    cancel_job *j = arg;
    mp_err err = {{0}};
    j->rc = mp_arena_assign(j->b, j->n, &j->o, j->off, &j->r, &err);
    return NULL;
}

START_TEST(test_cancel_stops_search)
{
    enum { NB = 160, LIMIT = 2000 };
    mp_arena_buf b[NB];
    int64_t off[NB];
    int before = 0, during = 0;
    for (int t = 0; t < 40 && during < 2; t++) {
        random_buffers(b, NB);
        mp_arena_opts o = mp_arena_defaults();
        o.alignment = 1;
        o.time_limit = 60;
        o.node_limit = LIMIT;
        mp_arena_result run;
        mp_err err = {{0}};
        ck_assert_msg(mp_arena_assign(b, NB, &o, off, &run, &err) == 0, "%s", err.msg);
        if (run.nodes <= LIMIT / 2) continue; /* the search ends by itself: nothing to cancel */
        atomic_bool cancel = true;
        cancel_job j = {.b = b, .n = NB, .o = o, .off = off};
        j.o.cancel = &cancel;
        cancel_job_run(&j);
        ck_assert_int_eq(j.rc, 0);
        ck_assert_msg(mp_offsets_verify(b, NB, off, j.r.arena_bytes, -1, &err) == 0, "%s", err.msg);
        ck_assert_int_le(j.r.nodes, 16 * MP_ARENA_METHOD_COUNT);
        ck_assert_int_ge(j.r.arena_bytes, run.arena_bytes);
        before++;

        atomic_store(&cancel, false);
        j.o.time_limit = 30;
        j.o.node_limit = 0;
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, cancel_job_run, &j), 0);
        struct timespec pause = {0, 50 * 1000 * 1000}, t0, t1;
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        atomic_store(&cancel, true);
        pthread_join(th, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        ck_assert_int_eq(j.rc, 0);
        ck_assert_msg(mp_offsets_verify(b, NB, off, j.r.arena_bytes, -1, &err) == 0, "%s", err.msg);
        if (j.r.optimal) continue; /* proven before the flag was set */
        ck_assert_msg(waited < 10, "the search went on %.1f s after it was cancelled", waited);
        during++;
    }
    ck_assert_int_gt(before, 1);
    ck_assert_int_ge(during, 1);
}
END_TEST

/* Buffers over the whole horizon (parameters, optimizer state) are stacked at
 * the bottom and the rest assigned above them: still the brute-force optimum,
 * the bound still counts them, and each stacked buffer lies below every other. */
START_TEST(test_whole_horizon_stacked)
{
    mp_arena_buf b[7];
    int64_t off[7], tmp[7];
    int perm[7];
    for (int t = 0; t < 200; t++) {
        int n = 4 + (int)rnd(4), nfull = 1 + (int)rnd(2);
        for (int i = 0; i < n; i++) {
            int64_t lo = rnd(8);
            b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(5), .size = 1 + rnd(6)};
            perm[i] = i;
        }
        int64_t t0 = b[0].lower, t1 = b[0].upper, full = 0;
        for (int i = 1; i < n; i++) t0 = b[i].lower < t0 ? b[i].lower : t0, t1 = b[i].upper > t1 ? b[i].upper : t1;
        for (int i = n - nfull; i < n; i++) b[i].lower = t0, b[i].upper = t1, full += b[i].size;
        int64_t opt = brute_force(b, n, perm, 0, tmp, INT64_MAX);
        mp_arena_result r = assign_checked(b, n, 1, 1.0, off);
        ck_assert_msg(r.arena_bytes == opt && r.optimal, "instance %d: arena %lld, optimum %lld", t,
                      (long long)r.arena_bytes, (long long)opt);
        ck_assert_int_ge(r.lower_bound, full);
        ck_assert_int_le(r.lower_bound, r.arena_bytes);
        for (int i = n - nfull; i < n; i++)
            for (int j = 0; j < n - nfull; j++)
                if (b[j].lower != t0 || b[j].upper != t1) ck_assert_int_le(off[i] + b[i].size, off[j]);
    }
}
END_TEST

/* 60,000 short-lived buffers: the sweep, not n^2; the result still verifies. */
START_TEST(test_large_instance)
{
    int32_t n = 60000;
    mp_arena_buf *b = malloc((size_t)n * sizeof *b);
    int64_t *off = malloc((size_t)n * sizeof *off);
    for (int32_t i = 0; i < n; i++) {
        int64_t lo = i / 4 + rnd(8);
        b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(40), .size = 256 * (1 + rnd(64))};
    }
    mp_arena_result r = assign_checked(b, n, 256, 0.2, off);
    ck_assert_int_le(r.arena_bytes, r.lower_bound * 13 / 10);
    free(b);
    free(off);
}
END_TEST

/* ---- a training step ---------------------------------------------------------------- */

/* cnn_bn's AdamW step at batch 8: every transient buffer (owners with a step,
 * not persistent) over [start, end + 1), device alignment. */
START_TEST(test_training_step)
{
    mp_err err = {{0}};
    mp_model *m = mp_onnx_load(MEMPLAN_SOURCE "/models/cnn_bn.onnx", &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    mp_graph *g = m->graph;
    mp_bindings bd = {.batch = 8};
    mp_train_opts to = mp_train_defaults();
    ck_assert_msg(!mp_bind_dims(g, &bd, &err) && !mp_infer(g, &err) && !mp_train_build(g, &to, &err), "%s", err.msg);
    mp_schedule s;
    mp_lifetimes lt;
    ck_assert_int_eq(mp_schedule_graph_order(g, &s, &err), 0);
    ck_assert_msg(mp_lifetime_compute(g, &s, &lt, &err) == 0, "%s", err.msg);
    mp_arena_buf *b = malloc((size_t)lt.nvalues * sizeof *b);
    int64_t *off = malloc((size_t)lt.nvalues * sizeof *off);
    int32_t n = 0;
    for (int32_t v = 0; v < lt.nvalues; v++)
        if (lt.owner[v] == v && lt.start[v] >= 0 && !lt.persistent[v])
            b[n++] = (mp_arena_buf){lt.start[v], lt.end[v] + 1, lt.bytes[v], g->values[v].name};
    ck_assert_int_gt(n, 20);
    mp_arena_result r = assign_checked(b, n, 256, 1.0, off);
    ck_assert_msg(r.arena_bytes * 100 <= r.lower_bound * 101, "arena %lld, bound %lld", (long long)r.arena_bytes,
                  (long long)r.lower_bound);
    free(b);
    free(off);
    mp_lifetime_free(&lt);
    mp_schedule_free(&s);
    mp_onnx_close(m);
}
END_TEST

/* ---- bad input ---------------------------------------------------------------------- */

START_TEST(test_bad_input)
{
    mp_arena_opts o = mp_arena_defaults();
    mp_arena_result r;
    mp_err err = {{0}};
    int64_t off[2];
    mp_arena_buf empty[] = {{0, 2, 8, "x"}, {3, 3, 8, "y"}};
    ck_assert_int_eq(mp_arena_assign(empty, 2, &o, off, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'y' has an empty lifetime [3, 3)"));
    mp_arena_buf neg[] = {{0, 2, -1, NULL}};
    ck_assert_int_eq(mp_arena_assign(neg, 1, &o, off, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "buffer 0 has a negative size"));
    mp_arena_buf huge[] = {{0, 2, INT64_MAX - 10, NULL}, {0, 2, INT64_MAX - 10, NULL}};
    ck_assert_int_eq(mp_arena_assign(huge, 2, &o, off, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "overflows"));
    o.alignment = 0;
    ck_assert_int_eq(mp_arena_assign(empty, 1, &o, off, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "alignment"));
    /* nothing to place is an empty arena */
    o = mp_arena_defaults();
    ck_assert_int_eq(mp_arena_assign(NULL, 0, &o, NULL, &r, &err), 0);
    ck_assert_int_eq(r.arena_bytes, 0);
    ck_assert(r.optimal);
}
END_TEST

/* ---- the verifier -------------------------------------------------------------------- */

START_TEST(test_verify_catches_corruption)
{
    /* a, b, c live together; d reuses a's space after a dies (touching lifetimes do not conflict) */
    mp_arena_buf b[] = {{0, 4, 100, "a"}, {0, 6, 50, "b"}, {2, 6, 30, "c"}, {4, 8, 100, "d"}, {1, 2, 0, "z"}};
    int64_t off[] = {0, 100, 150, 0, 0};
    mp_err err = {{0}};
    ck_assert_msg(mp_offsets_verify(b, 5, off, 180, 180, &err) == 0, "%s", err.msg);
    ck_assert_msg(mp_offsets_verify(b, 5, off, 180, -1, &err) == 0, "%s", err.msg);

    /* overlap: c moved down into b */
    off[2] = 120;
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'b' and 'c' overlap"));
    /* overlap at the same offset, and an overlap found only through a neighbour in address */
    off[2] = 100;
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'b' and 'c' overlap"));
    off[2] = 150;
    off[3] = 60;
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'b' and 'd' overlap"));
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    off[3] = 0;

    /* out of the arena: past its end, and below 0 */
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 179, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'c' at [150, 150 + 30) is outside the arena of 179 bytes"));
    off[0] = -1;
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'a'"));
    off[0] = 0;

    /* over budget */
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, 179, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "exceeds the budget of 179 bytes"));

    /* a malformed buffer */
    b[4].upper = 1;
    ck_assert_int_eq(mp_offsets_verify(b, 5, off, 180, -1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'z' is malformed"));
}
END_TEST

/* Corrupting allocator output: each random plan verifies, and moving one
 * buffer onto a conflicting one is always caught. */
START_TEST(test_verify_random_corruption)
{
    enum { N = 200 };
    mp_arena_buf b[N];
    int64_t off[N];
    for (int t = 0; t < 50; t++) {
        for (int i = 0; i < N; i++) {
            int64_t lo = rnd(100);
            b[i] = (mp_arena_buf){.lower = lo, .upper = lo + 1 + rnd(20), .size = 1 + rnd(1000)};
        }
        mp_arena_result r = assign_checked(b, N, 1, 0, off);
        int i = (int)rnd(N), j = -1;
        for (int k = 0; k < N && j < 0; k++)
            if (k != i && b[k].lower < b[i].upper && b[i].lower < b[k].upper) j = k;
        if (j < 0) continue;
        int64_t keep = off[i];
        off[i] = off[j];
        mp_err err = {{0}};
        ck_assert_int_eq(mp_offsets_verify(b, N, off, r.arena_bytes + 2000, -1, &err), -1);
        ck_assert_ptr_nonnull(strstr(err.msg, "overlap"));
        off[i] = keep;
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_minimalloc_example);
    tcase_add_test(tc, test_omnimalloc_inline);
    tcase_add_test(tc, test_contention_inline);
    tcase_add_test(tc, test_omnimalloc_small);
    tcase_add_test(tc, test_random_instances);
    tcase_add_test(tc, test_search_matches_brute_force);
    tcase_add_test(tc, test_greedy_sweep_matches_tree);
    tcase_add_test(tc, test_node_limit_reproducible);
    tcase_add_test(tc, test_target_met_halves_limit);
    tcase_add_test(tc, test_target_only_stops_at_miss);
    tcase_add_test(tc, test_cancel_stops_search);
    tcase_add_test(tc, test_whole_horizon_stacked);
    tcase_add_test(tc, test_large_instance);
    tcase_add_test(tc, test_training_step);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_verify_catches_corruption);
    tcase_add_test(tc, test_verify_random_corruption);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
