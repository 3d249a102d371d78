/* run_main.c - memplan-run OUT/ [--backend cpu|cuda] [--steps N] [--json] [--data FILE] [--seed S]
 *                           [--random-weights] [--dump FILE]
 *
 * Runs N training steps of a plan (runtime/plan_run.h) in one arena of
 * exactly the planned size. Exit 0 on success, 2 when the plan is rejected
 * (version, fingerprint, model, tensor size) or the usage is wrong, 1 when a
 * step fails or the measured peak exceeds the planned arena. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan_run.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: memplan-run OUT/ [--backend cpu|cuda] [--steps N] [--json] [--data FILE] [--seed S] [--random-weights]\n"
               "                  [--dump FILE]\n"
               "  runs the plan OUT/plan.json (written by memplan MODEL.onnx --budget B -o OUT/) on the CPU;\n"
               "  --data FILE: raw little-endian bytes of the data inputs, in input order (default: seeded synthetic)\n"
               "  --random-weights: seeded weights even when the model has data (as OUT/plan, the CUDA build, does)\n"
               "  --dump FILE: the arena's bytes after the last step (as OUT/plan --dump), to compare tensors\n");
}

static int parse_count(const char *what, const char *s, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > max) {
        fprintf(stderr, "memplan-run: %s: '%s' is not a number in [0, %" PRId64 "]\n", what, s, max);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *backend = "cpu", *data = NULL, *dump = NULL;
    int64_t steps = 1, seed = 0;
    bool json = false, random_weights = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--random-weights")) random_weights = true;
        else if (!strcmp(a, "--backend") && has) backend = argv[++i];
        else if (!strcmp(a, "--data") && has) data = argv[++i];
        else if (!strcmp(a, "--dump") && has) dump = argv[++i];
        else if (!strcmp(a, "--steps") && has) {
            if (parse_count("--steps", argv[++i], 1000000, &steps)) return 2;
        } else if (!strcmp(a, "--seed") && has) {
            if (parse_count("--seed", argv[++i], INT64_MAX, &seed)) return 2;
        } else if (a[0] == '-' || dir) {
            fprintf(stderr, "memplan-run: unexpected argument '%s'\n", a);
            return usage(stderr), 2;
        } else dir = a;
    }
    if (!dir) return usage(stderr), 2;
    if (strcmp(backend, "cpu")) {
        if (!strcmp(backend, "cuda"))
            fprintf(stderr, "memplan-run: the cuda backend is the executable built from %s/plan.cu (make -C %s)\n", dir, dir);
        else
            fprintf(stderr, "memplan-run: --backend: unknown value '%s' (cpu or cuda)\n", backend);
        return 2;
    }
    mp_err err = {""};
    mp_plan p;
    if (mp_plan_load(dir, &p, &err)) {
        fprintf(stderr, "memplan-run: %s\n", err.msg);
        return 2;
    }
    mp_plan_run_opts ro = {.seed = (uint64_t)seed, .weights_from_model = !random_weights, .data = data};
    mp_plan_exec *pe = mp_plan_exec_new(&p, &ro, &err);
    if (!pe) {
        fprintf(stderr, "memplan-run: %s\n", err.msg);
        mp_plan_free(&p);
        return 2;
    }
    const mp_exec_stats *st = mp_exec_get_stats(mp_plan_exec_executor(pe));
    if (st->weights_absent)
        fprintf(stderr, "memplan-run: %d weights have no data file (first: %s): seeded random instead\n", (int)st->weights_absent,
                st->first_absent);
    double *loss = calloc((size_t)steps + 1, sizeof *loss), *secs = calloc((size_t)steps + 1, sizeof *secs);
    int rc = 0;
    for (int64_t s = 0; s < steps && !rc; s++) {
        if (mp_plan_exec_step(pe, &loss[s], &secs[s], &err)) {
            fprintf(stderr, "memplan-run: step %" PRId64 ": %s\n", s + 1, err.msg);
            rc = 1;
        } else if (!json) {
            printf("step %" PRId64 ": loss %.6f  %.4f s\n", s + 1, loss[s], secs[s]);
        }
    }
    int64_t peak = mp_plan_exec_peak(pe);
    if (!rc && json) {
        printf("{\"arena_bytes\": %" PRId64 ", \"measured_peak_bytes\": %" PRId64 ", \"lower_bound_bytes\": %" PRId64
               ", \"steps\": [", p.arena_bytes, peak, p.lower_bound);
        for (int64_t s = 0; s < steps; s++)
            printf("%s{\"loss\": %.9g, \"seconds\": %.6f}", s ? ", " : "", loss[s], secs[s]);
        printf("]}\n");
    } else if (!rc) {
        printf("arena: planned %" PRId64 " bytes (lower bound %" PRId64 "), measured peak %" PRId64 " bytes\n",
               p.arena_bytes, p.lower_bound, peak);
    }
    if (!rc && peak > p.arena_bytes) {
        fprintf(stderr, "memplan-run: measured peak %" PRId64 " bytes exceeds the planned arena of %" PRId64 "\n", peak,
                p.arena_bytes);
        rc = 1;
    }
    if (!rc && dump) {
        FILE *f = fopen(dump, "wb");
        bool ok = f && fwrite(mp_plan_exec_arena(pe), 1, (size_t)p.arena_bytes, f) == (size_t)p.arena_bytes;
        if (f && fclose(f)) ok = false;
        if (!ok) {
            if (f) remove(dump); /* no partial file */
            fprintf(stderr, "memplan-run: --dump %s: cannot write\n", dump);
            rc = 1;
        }
    }
    free(loss);
    free(secs);
    mp_plan_exec_free(pe);
    mp_plan_free(&p);
    return rc;
}
