/* plan_load.c - reads plan.json (docs/plan-format.md) into an mp_plan: only
 * what running it needs; everything else in the file is for people and tools. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/json_read.h"
#include "runtime/plan_run.h"

typedef struct loader {
    const mp_jdoc *d;
    const char *path;
    mp_err *err;
} loader;

static int32_t need(loader *l, int32_t obj, const char *key, mp_jtype t)
{
    int32_t v = mp_jdoc_member(l->d, obj, key);
    if (v < 0 || l->d->node[v].type != t) {
        mp_fail(l->err, "%s: plan field '%s' is missing or not a%s", l->path, key,
                t == MP_JSTR ? " string" : t == MP_JNUM ? " number" : t == MP_JARR ? "n array" : t == MP_JOBJ ? "n object" : " boolean");
        return -1;
    }
    return v;
}

static int need_int(loader *l, int32_t obj, const char *key, int64_t *out)
{
    int32_t v = need(l, obj, key, MP_JNUM);
    if (v < 0) return -1;
    if (!l->d->node[v].is_int) return mp_fail(l->err, "%s: plan field '%s' is not an integer", l->path, key);
    *out = l->d->node[v].i;
    return 0;
}

static char *need_str(loader *l, int32_t obj, const char *key)
{
    int32_t v = need(l, obj, key, MP_JSTR);
    if (v < 0) return NULL;
    char *s = strdup(l->d->node[v].str);
    if (!s) mp_fail(l->err, "out of memory");
    return s;
}

static int need_hex(loader *l, int32_t obj, const char *key, uint64_t *out)
{
    int32_t v = need(l, obj, key, MP_JSTR);
    if (v < 0) return -1;
    const char *s = l->d->node[v].str;
    char *end;
    *out = strtoull(s, &end, 16);
    if (strlen(s) != 16 || *end) return mp_fail(l->err, "%s: plan field '%s' is not 16 hex digits", l->path, key);
    return 0;
}

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

static int load_options(loader *l, int32_t o, mp_plan_opts *po)
{
    *po = mp_plan_defaults();
    int64_t mb;
    if (need_int(l, o, "batch", &po->batch) || need_int(l, o, "micro_batches", &mb) ||
        need_int(l, o, "budget_bytes", &po->budget_bytes) || need_int(l, o, "reserve_bytes", &po->reserve_bytes))
        return -1;
    po->micro_batches = (int)mb;
    int32_t ts = mp_jdoc_member(l->d, o, "topo_sort"); /* absent in plans written before it existed */
    if (ts >= 0 && l->d->node[ts].type != MP_JBOOL) return mp_fail(l->err, "%s: plan option topo_sort is not a boolean", l->path);
    po->topo_sort = ts >= 0 && l->d->node[ts].b;
    /* the options recorded later (roles, updates in the backward), optional: absent in older plans */
    struct { const char *key; bool *dst; } flags[] = {{"params_as_inputs", &po->params_as_inputs},
                                                      {"constants_as_params", &po->constants_as_params},
                                                      {"optimizer_in_backward", &po->optimizer_in_backward}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        int32_t v = mp_jdoc_member(l->d, o, flags[i].key);
        if (v >= 0 && l->d->node[v].type != MP_JBOOL)
            return mp_fail(l->err, "%s: plan option %s is not a boolean", l->path, flags[i].key);
        *flags[i].dst = v >= 0 && l->d->node[v].b;
    }
    struct { const char *key; char *dst; size_t cap; } lists[] = {
        {"data_inputs", po->data_inputs, sizeof po->data_inputs}, {"buffers", po->buffers, sizeof po->buffers}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        int32_t v = mp_jdoc_member(l->d, o, lists[i].key);
        if (v < 0) continue;
        if (l->d->node[v].type != MP_JSTR || (size_t)l->d->node[v].len >= lists[i].cap)
            return mp_fail(l->err, "%s: plan option %s is not a string of at most %zu bytes", l->path, lists[i].key,
                           lists[i].cap - 1);
        memcpy(lists[i].dst, l->d->node[v].str, (size_t)l->d->node[v].len + 1);
    }
    int32_t dims = need(l, o, "dims", MP_JOBJ);
    if (dims < 0) return -1;
    for (int32_t k = mp_jdoc_first(l->d, dims); k >= 0; k = mp_jdoc_next(l->d, dims, k)) {
        const mp_jnode *v = &l->d->node[k + 1];
        if (po->ndims == MP_PLAN_MAX_DIMS || !v->is_int || strlen(l->d->node[k].str) >= sizeof po->dim_names[0])
            return mp_fail(l->err, "%s: plan option dims: bad entry '%s'", l->path, l->d->node[k].str);
        snprintf(po->dim_names[po->ndims], sizeof po->dim_names[0], "%s", l->d->node[k].str);
        po->dim_values[po->ndims++] = v->i;
    }
    static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
    static const mp_dtype precision_types[] = {MP_FLOAT, MP_BFLOAT16, MP_FLOAT16};
    const char *keys[] = {"loss", "optimizer", "precision", "strategy"};
    for (int i = 0; i < 4; i++) {
        int32_t v = need(l, o, keys[i], MP_JSTR);
        if (v < 0) return -1;
        const char *s = l->d->node[v].str;
        int k = i == 0 ? name_index(mp_plan_loss_names, s) : i == 1 ? name_index(mp_plan_optimizer_names, s)
                : i == 2 ? name_index(precisions, s) : (int)strlen(s) < (int)sizeof po->strategy ? 0 : -1;
        if (k < 0) return mp_fail(l->err, "%s: plan option %s: unknown value '%.64s'", l->path, keys[i], s);
        if (i == 0) po->loss = (mp_loss_kind)k;
        if (i == 1) po->optimizer = (mp_opt_kind)k;
        if (i == 2) po->precision = precision_types[k];
        if (i == 3) snprintf(po->strategy, sizeof po->strategy, "%s", s);
    }
    return 0;
}

static int load_doc(loader *l, mp_plan *p)
{
    const mp_jdoc *d = l->d;
    if (d->node[0].type != MP_JOBJ) return mp_fail(l->err, "%s: not a plan (no JSON object)", l->path);
    int32_t fmt = mp_jdoc_member(d, 0, "format");
    if (fmt < 0 || d->node[fmt].type != MP_JSTR || strcmp(d->node[fmt].str, "memplan-plan"))
        return mp_fail(l->err, "%s: not a memplan plan (format is not \"memplan-plan\")", l->path);
    int64_t version;
    if (need_int(l, 0, "version", &version)) return -1;
    if (version != MP_PLAN_VERSION)
        return mp_fail(l->err, "%s: plan version %" PRId64 " is not supported (this memplan reads version %d)",
                       l->path, version, MP_PLAN_VERSION);
    p->version = (int)version;
    int32_t m = need(l, 0, "model", MP_JOBJ), o = need(l, 0, "options", MP_JOBJ);
    if (m < 0 || o < 0) return -1;
    if (!(p->model_path = need_str(l, m, "path")) || !(p->model_abs = need_str(l, m, "absolute")) ||
        need_int(l, m, "size", &p->model_size) || need_hex(l, m, "fnv1a64", &p->model_hash) ||
        need_hex(l, 0, "fingerprint", &p->fingerprint) || load_options(l, o, &p->opts))
        return -1;
    int32_t devs = need(l, 0, "devices", MP_JARR);
    if (devs < 0) return -1;
    if (d->node[devs].count != 1)
        return mp_fail(l->err, "%s: plan has %d devices; this runtime runs one", l->path, d->node[devs].count);
    int32_t dev = mp_jdoc_first(d, devs);
    if (need_int(l, dev, "arena_bytes", &p->arena_bytes) || need_int(l, dev, "lower_bound_bytes", &p->lower_bound))
        return -1;
    if (p->arena_bytes < 0) return mp_fail(l->err, "%s: negative arena_bytes", l->path);
    int32_t ts = need(l, 0, "tensors", MP_JARR), is = need(l, 0, "instructions", MP_JARR);
    if (ts < 0 || is < 0) return -1;
    p->tensors = calloc((size_t)d->node[ts].count + 1, sizeof *p->tensors);
    p->instr = calloc((size_t)d->node[is].count + 1, sizeof *p->instr);
    if (!p->tensors || !p->instr) return mp_fail(l->err, "out of memory");
    for (int32_t t = mp_jdoc_first(d, ts); t >= 0; t = mp_jdoc_next(d, ts, t)) {
        mp_plan_tensor *pt = &p->tensors[p->ntensors++];
        if (!(pt->name = need_str(l, t, "name")) || need_int(l, t, "bytes", &pt->bytes) ||
            need_int(l, t, "offset", &pt->offset))
            return -1;
        if (pt->bytes < 0 || pt->offset < 0 || pt->offset > p->arena_bytes - pt->bytes)
            return mp_fail(l->err, "%s: tensor '%s' at [%" PRId64 ", +%" PRId64 ") is outside the arena of %" PRId64 " bytes",
                           l->path, pt->name, pt->offset, pt->bytes, p->arena_bytes);
    }
    for (int32_t i = mp_jdoc_first(d, is); i >= 0; i = mp_jdoc_next(d, is, i)) {
        mp_plan_instr *pi = &p->instr[p->ninstr++];
        int32_t rec = need(l, i, "recompute", MP_JBOOL), vc = need(l, i, "view_clone", MP_JBOOL);
        if (!(pi->node = need_str(l, i, "node")) || !(pi->source = need_str(l, i, "source")) || rec < 0 || vc < 0)
            return -1;
        pi->recompute = d->node[rec].b;
        pi->view_clone = d->node[vc].b;
    }
    return 0;
}

int mp_plan_load(const char *dir, mp_plan *p, mp_err *err)
{
    memset(p, 0, sizeof *p);
    char path[4096];
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/plan.json", dir);
    else snprintf(path, sizeof path, "%s", dir);
    mp_jdoc d;
    if (mp_jdoc_load(path, &d, err)) return -1;
    loader l = {&d, path, err};
    int rc = load_doc(&l, p);
    mp_jdoc_free(&d);
    if (rc) mp_plan_free(p);
    return rc;
}

void mp_plan_free(mp_plan *p)
{
    for (int32_t i = 0; i < p->ntensors; i++) free(p->tensors[i].name);
    for (int32_t i = 0; i < p->ninstr; i++) free(p->instr[i].node), free(p->instr[i].source);
    free(p->tensors);
    free(p->instr);
    free(p->model_path);
    free(p->model_abs);
    memset(p, 0, sizeof *p);
}
