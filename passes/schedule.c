/* schedule.c - the default schedule (graph order), the check any schedule
 * must pass, and the reorder that runs a phase's nodes early. */
#include <stdlib.h>
#include <string.h>

#include "passes/schedule.h"

int mp_schedule_graph_order(const mp_graph *g, mp_schedule *s, mp_err *err)
{
    s->n = 0;
    s->order = malloc(((size_t)g->nnodes + 1) * sizeof *s->order);
    if (!s->order) return mp_fail(err, "out of memory");
    for (int32_t i = 0; i < g->nnodes; i++) s->order[i] = i;
    s->n = g->nnodes;
    return 0;
}

int mp_schedule_check(const mp_graph *g, const mp_schedule *s, mp_err *err)
{
    if (s->n != g->nnodes)
        return mp_fail(err, "schedule has %d steps for %d nodes", (int)s->n, (int)g->nnodes);
    /* step[node] = when it runs; -1 while not yet seen */
    int32_t *step = malloc(((size_t)g->nnodes + 1) * sizeof *step);
    if (!step) return mp_fail(err, "out of memory");
    for (int32_t i = 0; i < g->nnodes; i++) step[i] = -1;
    int rc = 0;
    for (int32_t i = 0; i < s->n && !rc; i++) {
        int32_t id = s->order[i];
        if (id < 0 || id >= g->nnodes) rc = mp_fail(err, "schedule step %d: no node %d", (int)i, (int)id);
        else if (step[id] >= 0) rc = mp_fail(err, "schedule runs node '%s' twice", g->nodes[id].name);
        else step[id] = i;
    }
    /* every input's producer runs earlier */
    for (int32_t i = 0; i < s->n && !rc; i++) {
        const mp_node *n = &g->nodes[s->order[i]];
        for (int k = 0; k < n->nin && !rc; k++) {
            if (n->in[k] < 0 || n->in[k] >= g->nvalues) continue;
            int32_t p = g->values[n->in[k]].producer;
            if (p >= 0 && p < g->nnodes && step[p] >= i)
                rc = mp_fail(err, "schedule runs node '%s' before '%s', which produces its input '%s'", n->name,
                             g->nodes[p].name, g->values[n->in[k]].name);
        }
    }
    free(step);
    return rc;
}

void mp_schedule_free(mp_schedule *s)
{
    free(s->order);
    s->order = NULL;
    s->n = 0;
}

typedef struct keyed {
    int64_t key;
    int32_t node;
} keyed;

static int cmp_keyed(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->node > b->node) - (a->node < b->node);
}

/* Each node gets a key that grows along every dependency: a node outside the
 * phase its place times (n + 1), a node of the phase one more than the
 * largest key it depends on. Dependencies are the producers of its inputs
 * and, for each buffer shared by several values, the node before it that
 * touches that buffer (so reads and writes of one buffer keep their order).
 * Sorted by key, the nodes are in an order that respects them all. */
int mp_graph_hoist_phase(mp_graph *g, mp_phase phase, mp_err *err)
{
    int32_t n = g->nnodes, nv = g->nvalues;
    int32_t *owner = malloc(((size_t)nv + 1) * sizeof *owner), *last = malloc(((size_t)nv + 1) * sizeof *last);
    uint8_t *shared = calloc((size_t)nv + 1, 1);
    keyed *k = malloc(((size_t)n + 1) * sizeof *k);
    mp_node *nodes = malloc(((size_t)n + 1) * sizeof *nodes);
    int rc = -1;
    if (!owner || !last || !shared || !k || !nodes) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t v = 0; v < nv; v++) {
        int32_t r = mp_value_root(g, v);
        owner[v] = r < 0 ? v : r; /* a broken chain: its own buffer (the lifetimes refuse it later) */
        last[v] = -1;
        if (owner[v] != v) shared[owner[v]] = 1;
    }
    for (int32_t i = 0; i < n; i++) {
        const mp_node *nd = &g->nodes[i];
        int64_t after = -1;
        for (int pass = 0; pass < 2; pass++) {
            int32_t cnt = pass ? nd->nout : nd->nin, *ids = pass ? nd->out : nd->in;
            for (int32_t j = 0; j < cnt; j++) {
                int32_t v = ids[j];
                if (v < 0 || v >= nv) continue;
                int32_t p = g->values[v].producer, r = owner[v];
                if (!pass && p >= 0 && p < i && k[p].key > after) after = k[p].key;
                if (shared[r] && last[r] >= 0 && last[r] != i && k[last[r]].key > after) after = k[last[r]].key;
            }
        }
        k[i] = (keyed){nd->phase == phase ? after + 1 : (int64_t)i * ((int64_t)n + 1), i};
        for (int pass = 0; pass < 2; pass++) {
            int32_t cnt = pass ? nd->nout : nd->nin, *ids = pass ? nd->out : nd->in;
            for (int32_t j = 0; j < cnt; j++)
                if (ids[j] >= 0 && ids[j] < nv && shared[owner[ids[j]]]) last[owner[ids[j]]] = i;
        }
    }
    qsort(k, (size_t)n, sizeof *k, cmp_keyed);
    memcpy(nodes, g->nodes, (size_t)n * sizeof *nodes);
    for (int32_t i = 0; i < n; i++) g->nodes[i] = nodes[k[i].node];
    rc = mp_graph_link(g, err);
done:
    free(owner);
    free(last);
    free(shared);
    free(k);
    free(nodes);
    return rc;
}
