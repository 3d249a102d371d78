/* schedule.c - the default schedule (graph order) and the check any schedule must pass. */
#include <stdlib.h>

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
