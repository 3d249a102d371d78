/* expand.c - replaces nodes by the primitive nodes a rewrite appends for
 * them, each set in its node's place, so the node order (the schedule) keeps
 * running the replacement where the node ran. */
#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"

int mp_expand_nodes(mp_graph *g, bool (*match)(const mp_node *), int (*rewrite)(mp_graph *, int32_t, mp_err *),
                    mp_err *err)
{
    int32_t n0 = g->nnodes, nmatch = 0;
    for (int32_t i = 0; i < n0; i++) nmatch += match(&g->nodes[i]);
    if (!nmatch) return 0;
    /* 1. rewrite each at the end of the array, noting where its nodes lie */
    int32_t *begin = malloc((size_t)n0 * sizeof *begin), *end = malloc((size_t)n0 * sizeof *end);
    mp_node *order = NULL;
    int rc = -1;
    if (!begin || !end) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n0; i++) {
        begin[i] = end[i] = -1;
        if (!match(&g->nodes[i])) continue;
        begin[i] = g->nnodes;
        if (rewrite(g, i, err)) {
            g->nnodes = n0;
            goto done;
        }
        end[i] = g->nnodes;
    }
    /* 2. move each rewrite into its node's place, dropping the node */
    int32_t k = 0;
    if (!(order = malloc((size_t)g->nnodes * sizeof *order))) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n0; i++) {
        if (begin[i] < 0) order[k++] = g->nodes[i];
        for (int32_t j = begin[i]; j >= 0 && j < end[i]; j++) order[k++] = g->nodes[j];
    }
    memcpy(g->nodes, order, (size_t)k * sizeof *order);
    g->nnodes = k;
    rc = mp_graph_link(g, err);
done:
    free(begin), free(end), free(order);
    return rc;
}
