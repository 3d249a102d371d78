/* plan_run.c - runs a loaded plan on the CPU executor: the rebuilt step in the
 * plan's order, every tensor at the plan's offset in one arena. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes/remat.h"
#include "runtime/plan_run.h"

struct mp_plan_exec {
    mp_model *m;
    mp_graph *g;
    mp_schedule s;
    int64_t *offsets;
    void *arena;
    mp_exec *x;
    int64_t top;            /* highest arena byte of the bound tensors */
};

/* ---- inputs ---------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *r)
{
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    return *r >> 11;
}

/* Seeded contents, from the value's name: the same name gets the same bits in
 * every step built from the model, whatever its value id. A ".master" copy
 * gets its parameter's values (in fp32). Floats lie in ±range, integers in
 * [0, range) (mp_plan_seed_range). */
static void fill_seeded(mp_tensor *t, const mp_value *v, uint64_t seed, double range)
{
    char base[512];
    snprintf(base, sizeof base, "%s", v->name);
    size_t n = strlen(base);
    bool master = n > 7 && !strcmp(base + n - 7, ".master");
    if (master) base[n - 7] = 0;
    if (v->role == MP_ROLE_OPT_STATE && !master) return; /* moments start at zero */
    uint64_t r = mp_plan_fnv1a(MP_PLAN_FNV_INIT, base, strlen(base)) ^ seed;
    for (int64_t i = 0; i < t->numel; i++) {
        double u = (double)rng_next(&r) / 9007199254740992.0;
        if (mp_dtype_is_float(t->dtype)) mp_tensor_set_f64(t, i, range * (2 * u - 1));
        else mp_tensor_set_i64(t, i, (int64_t)(u * range));
    }
}

/* The data a ".master" copy starts from: its working copy's, when the step
 * holds it (small initializers are decoded), so that the copy the forward
 * reads is the master rounded; NULL otherwise (both are seeded alike). */
static const mp_tensor *master_source(const mp_graph *g, int32_t v)
{
    const char *name = g->values[v].name;
    size_t n = strlen(name);
    if (n <= 7 || strcmp(name + n - 7, ".master")) return NULL;
    char base[512];
    snprintf(base, sizeof base, "%.*s", (int)(n - 7), name);
    int32_t w = mp_graph_find(g, base);
    const mp_tensor *k = w >= 0 ? g->values[w].konst : NULL;
    return k && k->data ? k : NULL;
}

int mp_plan_bind_inputs(mp_exec *x, mp_graph *g, void *arena, const int64_t *offsets, uint64_t seed,
                        const char *data, int64_t *top, mp_err *err)
{
    FILE *df = NULL;
    if (data && !(df = fopen(data, "rb"))) return mp_fail(err, "--data %s: %s", data, strerror(errno));
    int64_t hi = 0;
    int rc = -1;
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        size_t es = mp_elem_size(val->dtype);
        if (val->producer >= 0 || val->kind != MP_KIND_TENSOR || !es || val->bytes < 0) continue;
        if (arena && offsets[v] < 0) continue; /* holds no memory in the plan: nothing reads it */
        int64_t dims[MP_MAX_RANK];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        mp_tensor *t = mp_tensor_new(g->arena, val->dtype, val->rank, dims);
        if (!t) {
            mp_fail(err, "out of memory for '%s'", val->name);
            goto done;
        }
        if (arena) {
            t->data = (char *)arena + offsets[v];
            memset(t->data, 0, (size_t)val->bytes);
            if (offsets[v] + val->bytes > hi) hi = offsets[v] + val->bytes;
        }
        const mp_tensor *src = mp_exec_value(x, v);
        if (df && val->role == MP_ROLE_INPUT && !src) {
            if (fread(t->data, 1, (size_t)val->bytes, df) != (size_t)val->bytes) {
                mp_fail(err, "--data %s: too short for input '%s' (%" PRId64 " bytes)", data, val->name, val->bytes);
                goto done;
            }
        } else if (src && src->data && src->numel == t->numel && src->dtype == t->dtype) {
            memcpy(t->data, src->data, (size_t)val->bytes);
        } else if ((src = master_source(g, v)) && src->numel == t->numel) {
            for (int64_t i = 0; i < t->numel; i++) mp_tensor_set_f64(t, i, mp_tensor_get_f64(src, i));
        } else {
            fill_seeded(t, val, seed, mp_plan_seed_range(g, v));
        }
        if (mp_exec_bind(x, v, t, err)) goto done;
    }
    if (df && fgetc(df) != EOF) {
        mp_fail(err, "--data %s: longer than the step's data inputs", data);
        goto done;
    }
    if (top) *top = hi;
    rc = 0;
done:
    if (df) fclose(df);
    return rc;
}

int mp_plan_loss(const mp_exec *x, const mp_graph *g, double *loss, mp_err *err)
{
    const mp_tensor *t = g->noutputs ? mp_exec_value(x, g->outputs[0]) : NULL;
    if (!t || t->numel != 1) return mp_fail(err, "the step's loss is not a computed scalar");
    *loss = mp_tensor_get_f64(t, 0);
    return 0;
}

/* ---- the step, rebuilt in the plan's order ---------------------------------------------- */

typedef struct name_ix {
    const char *name;
    int32_t node;
} name_ix;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

/* The plan's instruction stream as an order of g's nodes (schedule s = graph order). */
static int plan_order(const mp_plan *p, const mp_graph *g, mp_rsched *rs, mp_err *err)
{
    name_ix *ix = malloc((size_t)(g->nnodes + 1) * sizeof *ix);
    rs->node = malloc((size_t)(p->ninstr + 1) * sizeof *rs->node);
    rs->recompute = calloc((size_t)p->ninstr + 1, 1);
    rs->n = 0;
    int rc = -1;
    if (!ix || !rs->node || !rs->recompute) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < g->nnodes; i++) ix[i] = (name_ix){g->nodes[i].name ? g->nodes[i].name : "", i};
    qsort(ix, (size_t)g->nnodes, sizeof *ix, cmp_name);
    for (int32_t i = 1; i < g->nnodes; i++)
        if (!strcmp(ix[i].name, ix[i - 1].name)) {
            mp_fail(err, "the rebuilt step has two nodes named '%s'", ix[i].name);
            goto done;
        }
    for (int32_t e = 0; e < p->ninstr; e++) {
        if (p->instr[e].view_clone) continue; /* mp_remat_apply re-takes views itself */
        name_ix key = {p->instr[e].source, 0}, *hit = bsearch(&key, ix, (size_t)g->nnodes, sizeof *ix, cmp_name);
        if (!hit) {
            mp_fail(err, "plan instruction %d runs node '%s', which the rebuilt step does not have", e, key.name);
            goto done;
        }
        rs->node[rs->n] = hit->node;
        rs->recompute[rs->n++] = p->instr[e].recompute;
    }
    rc = 0;
done:
    free(ix);
    return rc;
}

static int check_model(const mp_plan *p, const char **path, mp_err *err)
{
    uint64_t hash;
    int64_t size;
    mp_err e1 = {""};
    *path = p->model_path;
    if (mp_plan_hash_file(*path, &hash, &size, &e1)) {
        *path = p->model_abs;
        if (mp_plan_hash_file(*path, &hash, &size, err)) return -1;
    }
    if (hash != p->model_hash || size != p->model_size)
        return mp_fail(err, "plan: model %s changed since planning (fnv1a64 %016" PRIx64 ", %" PRId64
                       " bytes; the plan has %016" PRIx64 ", %" PRId64 " bytes)",
                       *path, hash, size, p->model_hash, p->model_size);
    if (mp_plan_fingerprint(hash, &p->opts) != p->fingerprint)
        return mp_fail(err, "plan: fingerprint %016" PRIx64 " does not match the model and options (expected %016" PRIx64 ")",
                       p->fingerprint, mp_plan_fingerprint(hash, &p->opts));
    return 0;
}

/* Offsets by name; every tensor of the step that holds memory must have one, of its size. */
static int plan_offsets(const mp_plan *p, const mp_graph *g, int64_t *offsets, mp_err *err)
{
    for (int32_t v = 0; v < g->nvalues; v++) offsets[v] = -1;
    for (int32_t i = 0; i < p->ntensors; i++) {
        const mp_plan_tensor *t = &p->tensors[i];
        int32_t v = mp_graph_find(g, t->name);
        if (v < 0) return mp_fail(err, "plan: tensor '%s' is not in the rebuilt step", t->name);
        if (g->values[v].bytes != t->bytes)
            return mp_fail(err, "plan: tensor '%s' is %" PRId64 " bytes in the plan, %" PRId64 " in the model", t->name,
                           t->bytes, g->values[v].bytes);
        offsets[v] = t->offset;
    }
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        bool used = val->producer >= 0 || val->ncons > 0;
        if (offsets[v] < 0 && used && val->kind == MP_KIND_TENSOR && val->bytes > 0 && mp_elem_size(val->dtype))
            return mp_fail(err, "plan: tensor '%s' of the step has no offset in the plan", val->name);
    }
    return 0;
}

mp_plan_exec *mp_plan_exec_new(const mp_plan *p, const mp_plan_run_opts *ro, mp_err *err)
{
    mp_plan_exec *pe = calloc(1, sizeof *pe);
    if (!pe) {
        mp_fail(err, "out of memory");
        return NULL;
    }
    const char *path;
    mp_rsched rs = {0};
    mp_schedule applied = {0};
    if (check_model(p, &path, err) || !(pe->m = mp_plan_step_new(path, &p->opts, &pe->s, err))) goto fail;
    pe->g = pe->m->graph;
    if (plan_order(p, pe->g, &rs, err) || mp_remat_apply(pe->g, &pe->s, &rs, &applied, err)) goto fail;
    mp_schedule_free(&pe->s);
    pe->s = applied;
    applied.order = NULL;
    if (pe->s.n != p->ninstr) {
        mp_fail(err, "plan: %d instructions, the rebuilt step runs %d", p->ninstr, pe->s.n);
        goto fail;
    }
    for (int32_t i = 0; i < pe->s.n; i++) {
        const char *have = pe->g->nodes[pe->s.order[i]].name;
        if (strcmp(have ? have : "", p->instr[i].node)) {
            mp_fail(err, "plan: instruction %d is '%s', the rebuilt step runs '%s'", i, p->instr[i].node, have);
            goto fail;
        }
    }
    pe->offsets = malloc((size_t)(pe->g->nvalues + 1) * sizeof *pe->offsets);
    if (!pe->offsets) {
        mp_fail(err, "out of memory");
        goto fail;
    }
    if (plan_offsets(p, pe->g, pe->offsets, err)) goto fail;
    /* the one allocation: exactly the planned arena */
    if (posix_memalign(&pe->arena, 256, (size_t)(p->arena_bytes ? p->arena_bytes : 1))) {
        mp_fail(err, "cannot allocate the arena of %" PRId64 " bytes", p->arena_bytes);
        pe->arena = NULL;
        goto fail;
    }
    mp_exec_opts xo = {.offsets = pe->offsets, .arena = pe->arena, .arena_bytes = p->arena_bytes,
                       .check_overlap = true, .seed = ro ? ro->seed : 0};
    if (!(pe->x = mp_exec_new(pe->g, &xo, err))) goto fail;
    if (ro && ro->weights_from_model && mp_exec_load_weights(pe->x, pe->m, err)) goto fail;
    if (mp_plan_bind_inputs(pe->x, pe->g, pe->arena, pe->offsets, ro ? ro->seed : 0, ro ? ro->data : NULL, &pe->top,
                            err))
        goto fail;
    mp_rsched_free(&rs);
    return pe;
fail:
    free(rs.node);
    free(rs.recompute);
    mp_plan_exec_free(pe);
    return NULL;
}

int mp_plan_exec_step(mp_plan_exec *pe, double *loss, double *seconds, mp_err *err)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (mp_exec_run(pe->x, err)) return -1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (seconds) *seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    return loss ? mp_plan_loss(pe->x, pe->g, loss, err) : 0;
}

int64_t mp_plan_exec_peak(const mp_plan_exec *pe)
{
    int64_t used = mp_exec_get_stats(pe->x)->arena_used;
    return used > pe->top ? used : pe->top;
}

mp_graph *mp_plan_exec_graph(const mp_plan_exec *pe) { return pe->g; }
mp_exec *mp_plan_exec_executor(const mp_plan_exec *pe) { return pe->x; }
const void *mp_plan_exec_arena(const mp_plan_exec *pe) { return pe->arena; }

void mp_plan_exec_free(mp_plan_exec *pe)
{
    if (!pe) return;
    if (pe->x) mp_exec_free(pe->x);
    free(pe->arena);
    free(pe->offsets);
    mp_schedule_free(&pe->s);
    if (pe->m) mp_onnx_close(pe->m);
    free(pe);
}
