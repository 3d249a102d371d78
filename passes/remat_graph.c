/* remat_graph.c - the rematerialization graph of a training step: one node per
 * schedule step, one value per buffer (alias owner), in two passes: which
 * values exist and which are resident, then the nodes' inputs and outputs
 * and what must never be dropped. Counted with Checkmate's semantics (remat.h), the
 * store-everything order of this graph has exactly the lifetimes of
 * passes/lifetime.c, so its peak is mp_memory_analyze's. */
#include <stdlib.h>
#include <string.h>

#include "passes/arena.h"
#include "passes/cost.h"
#include "passes/lifetime.h"
#include "passes/remat.h"

/* Ops whose output is a view of input 0 (train.c marks them so): no buffer, nothing in place. */
static const char *const view_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose"};
/* Ops with random outputs: running them again gives other values unless seeded, so they are never recomputed. */
static const char *const random_ops[] = {"Dropout", "RandomUniform", "RandomNormal", "RandomUniformLike",
                                         "RandomNormalLike", "Bernoulli", "Multinomial"};

static bool op_in(const mp_node *n, const char *const *ops, size_t count)
{
    for (size_t k = 0; k < count; k++)
        if (!strcmp(n->op_type, ops[k])) return true;
    return false;
}
#define OP_IN(n, list) op_in(n, list, sizeof list / sizeof *list)

/* A Dropout whose output shares its input's buffer (ratio 0 or inference:
 * autodiff's rule makes it so) is the identity: that output is a view, not an
 * in-place write, so the value under it stays droppable (a mask it may still
 * output stays pinned, and the node is never rerun). */
static bool identity_dropout(const mp_node *nd, const mp_graph *g, const struct mp_lifetimes *lt)
{
    if (strcmp(nd->op_type, "Dropout") || nd->nin < 1 || nd->nout < 1) return false;
    int32_t x = nd->in[0], y = nd->out[0];
    return x >= 0 && x < g->nvalues && y >= 0 && y < g->nvalues && lt->owner[y] == lt->owner[x];
}

void mp_rgraph_free(mp_rgraph *rg)
{
    if (rg->node_name)
        for (int32_t i = 0; i < rg->nnodes; i++) free(rg->node_name[i]);
    free(rg->node_name);
    free(rg->cost);
    free(rg->recomputable);
    free(rg->in_off);
    free(rg->in);
    free(rg->out_off);
    free(rg->out);
    free(rg->bytes);
    free(rg->producer);
    free(rg->keep_to_end);
    free(rg->pinned);
    free(rg->value_id);
    free(rg->write_off);
    free(rg->write);
    memset(rg, 0, sizeof *rg);
}

int32_t mp_rgraph_next_write(const mp_rgraph *rg, int32_t v, int32_t after)
{
    if (!rg->write_off) return rg->nnodes;
    int32_t lo = rg->write_off[v], hi = rg->write_off[v + 1];
    while (lo < hi) { /* the first write step > after */
        int32_t mid = lo + (hi - lo) / 2;
        if (rg->write[mid] <= after) lo = mid + 1;
        else hi = mid;
    }
    return lo < rg->write_off[v + 1] ? rg->write[lo] : rg->nnodes;
}

/* Appends v to list[*n] unless already there since `from` (a node's inputs are few). */
static void add_unique(int32_t *list, int32_t from, int32_t *n, int32_t v)
{
    for (int32_t k = from; k < *n; k++)
        if (list[k] == v) return;
    list[(*n)++] = v;
}

int mp_rgraph_from_training(const mp_graph *g, const struct mp_schedule *s, const struct mp_lifetimes *lt,
                            const struct mp_gpu *gpu, mp_rgraph *rg, mp_err *err)
{
    memset(rg, 0, sizeof *rg);
    if (!gpu) gpu = mp_gpu_find(MP_GPU_DEFAULT, err);
    if (!gpu) return -1;
    if (lt->nvalues != g->nvalues || lt->nsteps != s->n)
        return mp_fail(err, "the lifetimes were computed for another graph or schedule");
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)s->n + 1;
    int32_t *vmap = malloc(nv * sizeof *vmap);
    uint8_t *resident = calloc(nv, 1);
    int32_t nio = 0; /* input and output slots, bounded by the IR's */
    for (int32_t i = 0; i < s->n; i++) nio += g->nodes[s->order[i]].nin + g->nodes[s->order[i]].nout;
    rg->nnodes = s->n;
    rg->node_name = calloc(nn, sizeof *rg->node_name);
    rg->cost = calloc(nn, sizeof *rg->cost);
    rg->recomputable = calloc(nn, 1);
    rg->in_off = calloc(nn + 1, sizeof *rg->in_off);
    rg->out_off = calloc(nn + 1, sizeof *rg->out_off);
    rg->in = malloc(((size_t)nio + 1) * sizeof *rg->in);
    rg->out = malloc(((size_t)nio + 1) * sizeof *rg->out);
    rg->bytes = calloc(nv, sizeof *rg->bytes);
    rg->producer = malloc(nv * sizeof *rg->producer);
    rg->keep_to_end = calloc(nv, 1);
    rg->pinned = calloc(nv, 1);
    rg->value_id = malloc(nv * sizeof *rg->value_id);
    rg->write_off = calloc(nv + 1, sizeof *rg->write_off);
    int32_t *wval = malloc(((size_t)nio + 1) * sizeof *wval), *wstep = malloc(((size_t)nio + 1) * sizeof *wstep);
    int32_t nw = 0; /* in-place writes, (value, step) in step order */
    int rc = -1;
    if (!vmap || !resident || !rg->node_name || !rg->cost || !rg->recomputable || !rg->in_off || !rg->out_off ||
        !rg->in || !rg->out || !rg->bytes || !rg->producer || !rg->keep_to_end || !rg->pinned || !rg->value_id ||
        !rg->write_off || !wval || !wstep) {
        mp_fail(err, "out of memory");
        goto done;
    }

    /* pass 1: a value per owner that holds memory; every alias maps to its owner's.
     * An owner is resident when any value sharing it is persistent. */
    int32_t n = 0;
    for (int32_t v = 0; v < g->nvalues; v++) {
        vmap[v] = -1;
        if (lt->owner[v] != v || lt->start[v] < 0) continue;
        vmap[v] = n;
        /* padded as the arena pads it (passes/arena.h), so a plan that fits here fits the arena's bound */
        int64_t align = mp_arena_defaults().alignment, b = lt->bytes[v];
        rg->bytes[n] = b > INT64_MAX - align ? b : (b + align - 1) / align * align;
        rg->producer[n] = -1;
        rg->value_id[n] = v;
        /* shapes (non-float scalars and vectors): tiny, and their Shape/Gather chains are not worth a recipe */
        rg->pinned[n] = !mp_dtype_is_float(g->values[v].dtype) && g->values[v].rank <= 1;
        n++;
    }
    rg->nvalues = n;
    for (int32_t v = 0; v < g->nvalues; v++) {
        int32_t o = lt->owner[v];
        if (o < 0 || o >= g->nvalues || vmap[o] < 0) continue;
        vmap[v] = vmap[o];
        if (lt->persistent[v]) resident[vmap[o]] = 1;
        if (g->values[v].flags & MP_VAL_OUTPUT) rg->keep_to_end[vmap[o]] = 1;
    }

    /* pass 2: nodes in schedule order. A node reads its inputs' owners; an
     * output that aliases (a view, an in-place update) writes into its owner,
     * so the node reads that owner instead of making a value. */
    int32_t nin = 0, nout = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const mp_node *nd = &g->nodes[s->order[i]];
        rg->node_name[i] = strdup(nd->name ? nd->name : "");
        if (!rg->node_name[i]) {
            mp_fail(err, "out of memory");
            goto done;
        }
        rg->cost[i] = mp_cost_node_seconds(g, s->order[i], gpu);
        bool view = OP_IN(nd, view_ops) || identity_dropout(nd, g, lt);
        bool random = OP_IN(nd, random_ops), in_place = false;
        int32_t in0 = nin;
        for (int k = 0; k < nd->nin; k++)
            if (nd->in[k] >= 0 && nd->in[k] < g->nvalues && vmap[nd->in[k]] >= 0)
                add_unique(rg->in, in0, &nin, vmap[nd->in[k]]);
        for (int k = 0; k < nd->nout; k++) {
            int32_t y = nd->out[k];
            if (y < 0 || y >= g->nvalues || vmap[y] < 0) continue;
            int32_t r = vmap[y];
            if (lt->owner[y] != y) {
                add_unique(rg->in, in0, &nin, r);
                if (!view) { /* a later write into r's buffer: r cannot be dropped and rebuilt */
                    in_place = true;
                    rg->pinned[r] = 1;
                    wval[nw] = r, wstep[nw++] = i;
                }
            } else if (!resident[r]) {
                rg->out[nout++] = r;
                rg->producer[r] = i;
                if (random) rg->pinned[r] = 1;
            }
        }
        rg->in_off[i + 1] = nin;
        rg->out_off[i + 1] = nout;
        rg->recomputable[i] = nd->phase == MP_PHASE_FORWARD && !random && !in_place;
    }
    /* the writes by value (a counting sort keeps each value's steps ascending) */
    rg->write = malloc(((size_t)nw + 1) * sizeof *rg->write);
    int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!rg->write || !fill) {
        free(fill);
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t k = 0; k < nw; k++) rg->write_off[wval[k] + 1]++;
    for (int32_t v = 0; v < n; v++) rg->write_off[v + 1] += rg->write_off[v];
    memcpy(fill, rg->write_off, (size_t)n * sizeof *fill);
    for (int32_t k = 0; k < nw; k++) rg->write[fill[wval[k]]++] = wstep[k];
    free(fill);
    rc = 0;
done:
    free(vmap);
    free(resident);
    free(wval);
    free(wstep);
    if (rc) mp_rgraph_free(rg);
    return rc;
}
