/* lifetime.c - live intervals of value buffers, in three passes: each value's
 * own interval, its alias owner, then the intervals merged into the owners. */
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h" /* mp_unbound_symbol */
#include "passes/lifetime.h"

bool mp_lifetime_role_persistent(mp_role r)
{
    return r == MP_ROLE_PARAM || r == MP_ROLE_BUFFER || r == MP_ROLE_CONST || r == MP_ROLE_OPT_STATE ||
           r == MP_ROLE_INPUT;
}

void mp_lifetime_free(mp_lifetimes *lt)
{
    free(lt->step_of);
    free(lt->owner);
    free(lt->start);
    free(lt->end);
    free(lt->bytes);
    free(lt->persistent);
    memset(lt, 0, sizeof *lt);
}

/* Names the unbound symbol in v's dims, NULL if none. */
static const char *unbound_dim(const mp_graph *g, const mp_value *v)
{
    const mp_graph *root = mp_graph_root((mp_graph *)g);
    for (int i = 0; i < v->rank && v->dims; i++) {
        mp_dim d = mp_dim_resolve(root, v->dims[i]);
        if (d.v < 0 && d.sym >= 0 && d.sym < root->nsymbols) return root->symbols[d.sym];
    }
    return NULL;
}

static int fail_unsized(const mp_graph *g, const mp_value *v, mp_err *err)
{
    const char *sym = unbound_dim(g, v);
    if (!sym) sym = mp_unbound_symbol(g);
    if (sym)
        return mp_fail(err, "the size of '%s' depends on the unbound symbolic dimension '%s': bind it", v->name, sym);
    const char *p = v->producer >= 0 && v->producer < g->nnodes ? g->nodes[v->producer].name : NULL;
    return mp_fail(err, "'%s'%s%s has no known size, so its memory cannot be planned", v->name,
                   p ? ", produced by " : "", p ? p : "");
}

/* Bodies of If/Loop/Scan run with memory of their own that this pass does not see: refuse rather than undercount. */
static int check_no_subgraphs(const mp_graph *g, mp_err *err)
{
    for (int32_t i = 0; i < g->nnodes; i++)
        for (int32_t k = 0; k < g->nodes[i].nattrs; k++) {
            mp_attr_type t = g->nodes[i].attrs[k].type;
            if (t == MP_ATTR_GRAPH || t == MP_ATTR_GRAPHS)
                return mp_fail(err, "node '%s' (%s) has a subgraph body: memplan cannot plan memory through "
                               "If/Loop/Scan bodies yet", g->nodes[i].name, g->nodes[i].op_type);
        }
    return 0;
}

int mp_lifetime_compute(const mp_graph *g, const mp_schedule *s, mp_lifetimes *lt, mp_err *err)
{
    memset(lt, 0, sizeof *lt);
    if (mp_schedule_check(g, s, err) || check_no_subgraphs(g, err)) return -1;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes + 1;
    lt->nvalues = g->nvalues;
    lt->nsteps = s->n;
    lt->step_of = malloc(nn * sizeof *lt->step_of);
    lt->owner = malloc(nv * sizeof *lt->owner);
    lt->start = malloc(nv * sizeof *lt->start);
    lt->end = malloc(nv * sizeof *lt->end);
    lt->bytes = calloc(nv, sizeof *lt->bytes);
    lt->persistent = calloc(nv, sizeof *lt->persistent);
    int32_t *own_start = malloc(nv * sizeof *own_start), *own_end = malloc(nv * sizeof *own_end);
    int rc = -1;
    if (!lt->step_of || !lt->owner || !lt->start || !lt->end || !lt->bytes || !lt->persistent || !own_start ||
        !own_end) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < s->n; i++) lt->step_of[s->order[i]] = i;
    int32_t last = s->n > 0 ? s->n - 1 : 0;

    /* pass 1: each value's own interval, -1 when it needs no memory */
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *x = &g->values[v];
        own_start[v] = own_end[v] = -1;
        bool produced = x->producer >= 0 && x->producer < g->nnodes;
        bool outside = x->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER);
        if (!produced && !outside && !x->ncons) continue; /* a name nothing defines or uses */
        lt->persistent[v] = mp_lifetime_role_persistent(x->role) || !produced;
        if (lt->persistent[v]) {
            own_start[v] = 0;
            own_end[v] = last;
            continue;
        }
        own_start[v] = own_end[v] = lt->step_of[x->producer];
        if (x->flags & MP_VAL_OUTPUT) own_end[v] = last;
        for (int32_t c = 0; c < x->ncons; c++) {
            int32_t n = x->cons[c];
            if (n >= 0 && n < g->nnodes && lt->step_of[n] > own_end[v]) own_end[v] = lt->step_of[n];
        }
    }

    /* pass 2: owners (alias roots) */
    for (int32_t v = 0; v < g->nvalues; v++) {
        lt->owner[v] = mp_value_root(g, v);
        if (lt->owner[v] < 0) {
            mp_fail(err, "'%s' aliases itself through a cycle of in-place updates", g->values[v].name);
            goto done;
        }
        lt->start[v] = lt->end[v] = -1;
    }

    /* pass 3: merge every value's interval and size into its owner */
    for (int32_t v = 0; v < g->nvalues; v++) {
        if (own_start[v] < 0) continue;
        const mp_value *x = &g->values[v];
        if (x->bytes < 0) {
            fail_unsized(g, x, err);
            goto done;
        }
        int32_t o = lt->owner[v];
        if (lt->start[o] < 0 || own_start[v] < lt->start[o]) lt->start[o] = own_start[v];
        if (own_end[v] > lt->end[o]) lt->end[o] = own_end[v];
        if (x->bytes > lt->bytes[o]) lt->bytes[o] = x->bytes;
    }
    rc = 0;
done:
    free(own_start);
    free(own_end);
    if (rc) mp_lifetime_free(lt);
    return rc;
}
