/* remat_apply.c - turns a rematerialization order into IR: every recompute
 * entry becomes a clone of its node writing fresh copies of the outputs
 * ("x@r1"), and every later reader is rewired to the newest copy. The graph's
 * node order becomes the planned order, so lifetimes, memory, offsets and the
 * executor all see the plan without knowing about recomputation.
 *
 * Views (outputs that alias their input) hold no buffer of their own, so they
 * never appear in a recipe; when a reader needs a view of a value that was
 * recomputed, the view node is cloned on top of the new copy just before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/remat.h"
#include "passes/schedule.h"

typedef struct apply {
    mp_graph *g;
    mp_err *err;
    int32_t *cur;          /* value -> its newest copy */
    int32_t ncur;
    int32_t *copies;       /* original value -> copies made so far (for names) */
    mp_node *nodes;        /* the new node list, in planned order */
    int32_t n, cap;
    int32_t norig_values;
} apply;

static int push_node(apply *a, const mp_node *n)
{
    if (a->n == a->cap) {
        int32_t cap = a->cap ? 2 * a->cap : 64;
        mp_node *p = realloc(a->nodes, (size_t)cap * sizeof *p);
        if (!p) return mp_fail(a->err, "out of memory applying the plan");
        a->nodes = p;
        a->cap = cap;
    }
    a->nodes[a->n++] = *n;
    return 0;
}

static int grow_cur(apply *a)
{
    int32_t need = a->g->nvalues;
    if (need <= a->ncur) return 0;
    int32_t *p = realloc(a->cur, (size_t)need * sizeof *p);
    if (!p) return mp_fail(a->err, "out of memory applying the plan");
    for (int32_t v = a->ncur; v < need; v++) p[v] = v;
    a->cur = p;
    a->ncur = need;
    return 0;
}

/* A fresh copy of value v (same type, role and size), aliasing base when v is a view. */
static int32_t copy_value(apply *a, int32_t v, int32_t base)
{
    mp_graph *g = a->g;
    int32_t orig = v < a->norig_values ? v : -1;
    char name[512];
    snprintf(name, sizeof name, "%s@r%d", g->values[v].name, orig >= 0 ? ++a->copies[orig] : 1);
    int32_t c = mp_graph_add_value(g, name);
    if (c < 0 || grow_cur(a)) return -1;
    mp_value *src = &g->values[v], *dst = &g->values[c];
    const char *keep_name = dst->name;
    *dst = *src;
    dst->name = keep_name;
    dst->flags &= ~(uint32_t)(MP_VAL_OUTPUT | MP_VAL_INPUT | MP_VAL_INITIALIZER);
    dst->producer = -1;
    dst->ncons = 0;
    dst->cons = NULL;
    dst->flags |= MP_VAL_RECOMPUTED;
    dst->alias = base;
    return c;
}

static int32_t current(apply *a, int32_t v);

/* Re-emits view node p (whose output is v) over the current copies of its inputs. */
static int32_t clone_view(apply *a, int32_t v)
{
    mp_graph *g = a->g;
    const mp_node *p = &g->nodes[g->values[v].producer];
    mp_node n = *p;
    n.in = mp_arena_alloc(g->arena, (size_t)(p->nin ? p->nin : 1) * sizeof *n.in);
    n.out = mp_arena_alloc(g->arena, (size_t)(p->nout ? p->nout : 1) * sizeof *n.out);
    for (int32_t k = 0; k < p->nin; k++) n.in[k] = p->in[k] < 0 ? -1 : current(a, p->in[k]);
    for (int32_t k = 0; k < p->nout; k++) {
        if (p->out[k] < 0) { n.out[k] = -1; continue; }
        int32_t base = p->out[k] == v ? n.in[0] : -1;
        int32_t c = copy_value(a, p->out[k], base);
        if (c < 0) return -1;
        n.out[k] = c;
        a->cur[p->out[k]] = c;
    }
    char name[512];
    snprintf(name, sizeof name, "%s@view", p->name);
    n.name = mp_arena_strdup(g->arena, name);
    if (push_node(a, &n)) return -1;
    return a->cur[v];
}

/* The copy of v a reader sees now: v's newest copy, or for a view whose base
 * has a newer copy than the one it was taken of, a fresh view of it. */
static int32_t current(apply *a, int32_t v)
{
    mp_graph *g = a->g;
    int32_t c = a->cur[v];
    int32_t base = g->values[v].alias;
    if (base < 0 || g->values[v].producer < 0) return c;
    int32_t want = current(a, base);
    if (want < 0) return -1;
    int32_t have = c == v ? base : g->values[c].alias;
    if (have == want) return c;
    return clone_view(a, v);
}

int mp_remat_apply(mp_graph *g, const mp_schedule *s, const mp_rsched *rs, mp_schedule *out, mp_err *err)
{
    out->order = NULL;
    out->n = 0;
    apply a = {.g = g, .err = err, .norig_values = g->nvalues};
    a.copies = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof *a.copies);
    int rc = -1;
    if (!a.copies || grow_cur(&a)) goto done;
    for (int32_t e = 0; e < rs->n; e++) {
        int32_t step = rs->node[e];
        if (step < 0 || step >= s->n) {
            mp_fail(err, "plan entry %d names step %d of a %d-step schedule", e, step, s->n);
            goto done;
        }
        const mp_node *src = &g->nodes[s->order[step]];
        mp_node n = *src;
        n.in = mp_arena_alloc(g->arena, (size_t)(src->nin ? src->nin : 1) * sizeof *n.in);
        for (int32_t k = 0; k < src->nin; k++) {
            n.in[k] = src->in[k] < 0 ? -1 : current(&a, src->in[k]);
            if (src->in[k] >= 0 && n.in[k] < 0) goto done;
        }
        if (rs->recompute[e]) {
            n.out = mp_arena_alloc(g->arena, (size_t)(src->nout ? src->nout : 1) * sizeof *n.out);
            for (int32_t k = 0; k < src->nout; k++) {
                int32_t v = src->out[k];
                if (v < 0) { n.out[k] = -1; continue; }
                if (g->values[v].alias >= 0) {
                    mp_fail(err, "node '%s' writes '%s' in place and cannot be recomputed", src->name,
                            g->values[v].name);
                    goto done;
                }
                int32_t c = copy_value(&a, v, -1);
                if (c < 0) goto done;
                n.out[k] = c;
                a.cur[v] = c;
            }
            char name[512];
            snprintf(name, sizeof name, "%s@r", src->name);
            n.name = mp_arena_strdup(g->arena, name);
        }
        if (push_node(&a, &n)) goto done;
    }
    /* the new node list replaces the old one; links follow */
    g->nodes = mp_arena_dup(g->arena, a.nodes, (size_t)(a.n ? a.n : 1) * sizeof *a.nodes);
    g->nnodes = g->capnodes = a.n;
    if (mp_graph_link(g, err)) goto done;
    rc = mp_schedule_graph_order(g, out, err);
done:
    free(a.cur);
    free(a.copies);
    free(a.nodes);
    return rc;
}
