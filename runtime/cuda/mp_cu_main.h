/* mp_cu_main.h - the host side both runtimes share (memplan_cuda.cu on the
 * GPU, mp_cu_host.c on the CPU): options, seeded contents exactly as the CPU
 * runner makes them (runtime/plan_run.c fill_seeded), the launch arguments of
 * an instruction, and the step loop with its report. A backend supplies the
 * memory and the launches (mp_cu_backend). Included once per runtime. */
#ifndef MP_CU_MAIN_H
#define MP_CU_MAIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mp_cu_kernels.h"

typedef struct mp_cu_backend {
    const char *name;
    /* the arena (exactly arena_bytes) and the workspaces; *taken: device bytes the arena took */
    char *(*alloc)(const mp_cu_plan *p, void **ws, size_t *taken);
    void (*upload)(char *dst, const void *src, int64_t bytes);
    void (*download)(void *dst, const char *src, int64_t bytes);
    void (*run)(const mp_cu_plan *p, const mp_cu_instr *I, mp_cu_args *a); /* one instruction */
    void (*sync)(void);
    void (*release)(char *arena, void *ws);
} mp_cu_backend;

static uint64_t mp_cu_fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The CPU runner's seeded contents: keyed by name (a ".master" copy takes its
 * parameter's), floats uniform in [-bound, bound], integers in [0, bound). */
static void mp_cu_fill_seeded(const mp_cu_tensor *t, void *host, uint64_t seed)
{
    char base[512];
    snprintf(base, sizeof base, "%s", t->name);
    size_t n = strlen(base);
    if (n > 7 && !strcmp(base + n - 7, ".master")) base[n - 7] = 0;
    uint64_t r = mp_cu_fnv1a(base) ^ seed;
    for (int64_t i = 0; i < t->numel; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(r >> 11) / 9007199254740992.0;
        if (t->dtype == MP_CU_F32 || t->dtype == MP_CU_F64 || mp_cu_is_half(t->dtype)) mp_cu_st(host, t->dtype, i, t->bound * (2 * u - 1));
        else mp_cu_st(host, t->dtype, i, (double)(int64_t)(u * t->bound));
    }
}

static void mp_cu_args_of(const mp_cu_plan *p, const mp_cu_instr *I, char *arena, void *ws, uint64_t seed, mp_cu_args *a)
{
    memset(a, 0, sizeof *a);
    for (int k = 0; k < MP_CU_NT; k++) {
        int32_t t = I->t[k];
        a->x[k] = t == MP_CU_WS || t == MP_CU_WS32 ? ws : t >= 0 ? (void *)(arena + p->t[t].offset) : NULL;
        a->dt[k] = t >= 0 ? p->t[t].dtype : t == MP_CU_WS32 ? MP_CU_F32 : MP_CU_F64;
    }
    a->n = I->n;
    memcpy(a->p, I->p, sizeof a->p);
    memcpy(a->f, I->f, sizeof a->f);
    a->seed = seed;
}

static double mp_cu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int mp_cu_run_main(int argc, char **argv, const mp_cu_plan *p, const mp_cu_backend *be)
{
    long steps = 3;
    unsigned long long seed = 0;
    int json = 0;
    const char *dump = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--steps N] [--seed S] [--json] [--dump FILE]\n", argv[0]);
            return 2;
        }
    }
    void *ws = NULL;
    size_t taken = 0;
    char *arena = be->alloc(p, &ws, &taken);
    for (int32_t i = 0; i < p->ntensors; i++) {
        const mp_cu_tensor *t = &p->t[i];
        if (!t->init || !t->bytes) continue;
        void *host = calloc(1, (size_t)t->bytes);
        if (!host) {
            fprintf(stderr, "plan: out of host memory for '%s'\n", t->name);
            return 1;
        }
        if (t->init == 1) mp_cu_fill_seeded(t, host, seed);
        if (t->init == 3) memcpy(host, t->data, (size_t)t->bytes);
        be->upload(arena + t->offset, host, t->bytes);
        free(host);
    }
    if (json)
        printf("{\"backend\": \"%s\", \"arena_bytes\": %lld, \"lower_bound_bytes\": %lld, \"workspace_bytes\": %lld, "
               "\"conv_workspace_bytes\": %lld, \"steps\": [",
               be->name, (long long)p->arena_bytes, (long long)p->lower_bound, (long long)p->workspace_bytes,
               (long long)p->conv_workspace_bytes);
    for (long s = 0; s < steps; s++) {
        be->sync();
        double t0 = mp_cu_now();
        for (int32_t i = 0; i < p->ninstr; i++) {
            mp_cu_args a;
            mp_cu_args_of(p, &p->ins[i], arena, ws, seed, &a);
            be->run(p, &p->ins[i], &a);
        }
        be->sync();
        double dt = mp_cu_now() - t0;
        double raw = 0; /* room for any element: an fp32 or a 16-bit loss (widened) */
        int ldt = p->t[p->loss].dtype;
        be->download(&raw, arena + p->t[p->loss].offset, mp_cu_esize(ldt));
        float loss = (float)mp_cu_ld(&raw, ldt, 0);
        if (json) printf("%s{\"loss\": %.9g, \"seconds\": %.6f}", s ? ", " : "", loss, dt);
        else printf("step %ld: loss %.6f  %.4f s\n", s + 1, loss, dt);
    }
    /* every byte a kernel touches lies in the arena (or the workspace), so the measured peak is the arena */
    if (json)
        printf("], \"measured_peak_bytes\": %lld, \"allocation_bytes\": %zu}\n", (long long)p->arena_bytes, taken);
    else
        printf("arena: planned %lld bytes (lower bound %lld); workspace %lld + %lld bytes (statistics + cuDNN); "
               "the arena's allocation took %zu bytes\n",
               (long long)p->arena_bytes, (long long)p->lower_bound, (long long)p->workspace_bytes,
               (long long)p->conv_workspace_bytes, taken);
    if (dump) { /* the arena's bytes after the last step, for comparing tensors with another runner */
        char *host = (char *)malloc((size_t)(p->arena_bytes ? p->arena_bytes : 1));
        FILE *f = host ? fopen(dump, "wb") : NULL;
        if (f) be->download(host, arena, p->arena_bytes);
        if (!f || fwrite(host, 1, (size_t)p->arena_bytes, f) != (size_t)p->arena_bytes || fclose(f)) {
            fprintf(stderr, "plan: --dump %s: cannot write\n", dump);
            return 1;
        }
        free(host);
    }
    be->release(arena, ws);
    return 0;
}

#endif
