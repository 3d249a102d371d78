/* alloc_bench.c - the static arena (passes/arena.h) on published allocation
 * instances and on training steps. One markdown row per input: the arena
 * against the lower bound and the best known arena, the method kept, whether
 * it is proven optimal, the search nodes, and the time of mp_arena_assign. Every assignment is
 * checked by mp_offsets_verify; a row that fails says so.
 *
 *   memplan-alloc-bench [--time-limit SEC] [--align BYTES] FILE.csv...     (CSV: id,lower,upper,size)
 *   memplan-alloc-bench [--time-limit SEC] --model FILE.onnx --batch N [--dim NAME=V]...
 *
 * CSV instances use alignment 1 (their sizes are exact), training steps 256.
 * A training step's buffers are the non-persistent owners of
 * mp_lifetime_compute live over [start, end + 1); the persistent bytes
 * (parameters, optimizer state, ...) sit beside the arena and are not in it.
 * Exit status 1 if any assignment fails the verifier. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/arena.h"
#include "passes/lifetime.h"
#include "passes/offsets_verify.h"
#include "passes/schedule.h"
#include "passes/train.h"

/* Best known arenas of ../shared/alloc-benchmarks (its README), by path suffix. */
static const struct {
    const char *suffix;
    int64_t best;
} best_known[] = {
    {"challenging/A.1048576.csv", 1048576}, {"challenging/B.1048576.csv", 1048576},
    {"challenging/D.1048576.csv", 1038336}, {"challenging/E.1048576.csv", 1048576},
    {"challenging/F.1048576.csv", 1048576}, {"challenging/G.1048576.csv", 1048576},
    {"challenging/H.1048576.csv", 1048576}, {"challenging/I.1048576.csv", 1048576},
    {"challenging/J.1048576.csv", 1041408}, {"examples/input.12.csv", 12},
    {"omnimalloc-small/a.6.csv", 6},        {"omnimalloc-small/b.6.csv", 6},
    {"omnimalloc-small/c.8.csv", 8},        {"omnimalloc-small/d.9.csv", 9},
    {"omnimalloc-small/e.12.csv", 12},      {"omnimalloc-small/f.14.csv", 14},
    {"omnimalloc-small/g.7.csv", 7},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int64_t lookup_best(const char *path)
{
    size_t n = strlen(path);
    for (size_t k = 0; k < sizeof best_known / sizeof *best_known; k++) {
        size_t m = strlen(best_known[k].suffix);
        if (n >= m && !strcmp(path + n - m, best_known[k].suffix) && (n == m || path[n - m - 1] == '/'))
            return best_known[k].best;
    }
    return -1;
}

/* Reads id,lower,upper,size rows; names are strdup'ed into names[]. */
static int read_csv(const char *path, mp_arena_buf **out, int32_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int32_t cap = 0, len = 0;
    mp_arena_buf *b = NULL;
    bool header = true;
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = false;
            if (strncmp(line, "id,", 3) == 0) continue;
        }
        char id[256];
        long long lo, up, sz;
        if (sscanf(line, "%255[^,],%lld,%lld,%lld", id, &lo, &up, &sz) != 4) continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 1024;
            mp_arena_buf *nb = realloc(b, (size_t)cap * sizeof *nb);
            if (!nb) break;
            b = nb;
        }
        b[len++] = (mp_arena_buf){.lower = lo, .upper = up, .size = sz, .name = strdup(id)};
    }
    fclose(f);
    *out = b;
    *n = len;
    return 0;
}

static void free_bufs(mp_arena_buf *b, int32_t n, bool names)
{
    for (int32_t i = 0; names && i < n; i++) free((char *)b[i].name);
    free(b);
}

/* Runs, verifies and prints one row; returns 1 if the verifier fails. */
static int bench_one(const char *name, const mp_arena_buf *b, int32_t n, int64_t best, const mp_arena_opts *o,
                     const char *extra)
{
    int64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    mp_arena_result r;
    mp_err err = {{0}};
    double t0 = now();
    int rc = off ? mp_arena_assign(b, n, o, off, &r, &err) : -1;
    double ms = (now() - t0) * 1e3;
    if (rc) {
        printf("| %s | %d | | | | | error: %s | | |\n", name, n, off ? err.msg : "out of memory");
        free(off);
        return 1;
    }
    int bad = mp_offsets_verify(b, n, off, r.arena_bytes, -1, &err) != 0;
    char bk[32] = "—", ratio[32] = "—";
    if (best > 0) {
        snprintf(bk, sizeof bk, "%lld", (long long)best);
        snprintf(ratio, sizeof ratio, "%.4f", (double)r.arena_bytes / (double)best);
    }
    printf("| %s | %d | %lld | %s | %lld | %s | %.4f | %s%s | %lld | %.1f |%s%s\n", name, n, (long long)r.lower_bound,
           bk, (long long)r.arena_bytes, ratio, r.lower_bound ? (double)r.arena_bytes / (double)r.lower_bound : 1.0,
           mp_arena_method_names[r.method], r.optimal ? ", optimal" : "", (long long)r.nodes, ms, extra ? extra : "",
           bad ? " VERIFY FAILED" : "");
    if (bad) fprintf(stderr, "alloc_bench: %s: %s\n", name, err.msg);
    free(off);
    return bad;
}

/* A training step's transient buffers (see the file comment). */
static int bench_model(const char *path, int64_t batch, int nd, const char **names, const int64_t *vals,
                       const mp_arena_opts *o)
{
    mp_err err = {{0}};
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    mp_model *m = mp_onnx_load(path, &err);
    if (!m) {
        printf("| %s | | | | | | error: %s | | |\n", name, err.msg);
        return 1;
    }
    mp_graph *g = m->graph;
    mp_bindings bd = {.batch = batch, .nnamed = nd, .names = names, .values = vals};
    mp_train_opts to = mp_train_defaults();
    mp_schedule s = {0};
    mp_lifetimes lt = {0};
    int bad = 1;
    if (mp_bind_dims(g, &bd, &err) || mp_infer(g, &err) || mp_train_build(g, &to, &err) ||
        mp_schedule_graph_order(g, &s, &err) || mp_lifetime_compute(g, &s, &lt, &err)) {
        printf("| %s | | | | | | error: %s | | |\n", name, err.msg);
        goto done;
    }
    mp_arena_buf *b = malloc((size_t)(lt.nvalues ? lt.nvalues : 1) * sizeof *b);
    int32_t n = 0;
    int64_t persistent = 0;
    for (int32_t v = 0; b && v < lt.nvalues; v++) {
        if (lt.owner[v] != v || lt.start[v] < 0) continue;
        if (lt.persistent[v]) persistent += lt.bytes[v];
        else b[n++] = (mp_arena_buf){.lower = lt.start[v], .upper = lt.end[v] + 1, .size = lt.bytes[v],
                                     .name = g->values[v].name};
    }
    char label[256], extra[96];
    snprintf(label, sizeof label, "%s (batch %lld, %d steps)", name, (long long)batch, lt.nsteps);
    snprintf(extra, sizeof extra, " %.1f MiB persistent |", (double)persistent / 1048576.0);
    bad = b ? bench_one(label, b, n, -1, o, extra) : 1;
    free(b);
done:
    mp_lifetime_free(&lt);
    mp_schedule_free(&s);
    mp_onnx_close(m);
    return bad;
}

int main(int argc, char **argv)
{
    mp_arena_opts o = mp_arena_defaults();
    o.time_limit = 10;
    const char *model = NULL;
    int64_t batch = -1, align = -1;
    const char *dnames[8];
    int64_t dvals[8];
    int nd = 0, first = argc, bad = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--time-limit") && i + 1 < argc) o.time_limit = atof(argv[++i]);
        else if (!strcmp(argv[i], "--align") && i + 1 < argc) align = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc && nd < 8) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) {
                fprintf(stderr, "alloc_bench: --dim wants NAME=VALUE\n");
                return 2;
            }
            *eq = 0;
            dnames[nd] = argv[i];
            dvals[nd++] = atoll(eq + 1);
        } else {
            first = i;
            break;
        }
    }
    if (model) {
        o.alignment = align > 0 ? align : 256;
        return bench_model(model, batch, nd, dnames, dvals, &o);
    }
    if (first >= argc) {
        fprintf(stderr, "usage: memplan-alloc-bench [--time-limit SEC] [--align BYTES] FILE.csv...\n"
                        "       memplan-alloc-bench [--time-limit SEC] --model FILE.onnx --batch N "
                        "[--dim NAME=V]...\n");
        return 2;
    }
    o.alignment = align > 0 ? align : 1;
    for (int i = first; i < argc; i++) {
        mp_arena_buf *b;
        int32_t n;
        const char *name = strstr(argv[i], "alloc-benchmarks/");
        name = name ? name + strlen("alloc-benchmarks/") : argv[i];
        if (read_csv(argv[i], &b, &n)) {
            printf("| %s | | | | | | error: cannot read | | |\n", name);
            bad = 1;
            continue;
        }
        bad |= bench_one(name, b, n, lookup_best(argv[i]), &o, NULL);
        free_bufs(b, n, true);
    }
    return bad;
}
