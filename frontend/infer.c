/* infer.c - the inference driver: binds symbolic dims, then runs each node's
 * shape rule in order, checking what every rule produced. */
#include <stdio.h>
#include <string.h>

#include "infer.h"
#include "ir/ops.h"

int mp_bind_dims(mp_graph *g, const mp_bindings *b, mp_err *err)
{
    for (int i = 0; i < b->nnamed; i++) {
        if (b->values[i] < 0) return mp_fail(err, "--dim %s=%lld: a dimension cannot be negative", b->names[i], (long long)b->values[i]);
        if (mp_symbol_find(g, b->names[i]) < 0) {
            char known[256] = "";
            size_t k = 0;
            for (int s = 0; s < g->nsymbols && k < sizeof known - 40; s++)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", s ? ", " : "", g->symbols[s]);
            return mp_fail(err, "--dim %s: the model has no symbolic dimension of that name (it has: %s)", b->names[i],
                           g->nsymbols ? known : "none");
        }
        mp_symbol_bind(g, b->names[i], b->values[i]);
    }
    if (b->batch >= 0) {
        bool used = false;
        for (int i = 0; i < g->ninputs; i++) {
            mp_value *v = mp_val(g, g->inputs[i]);
            if (v->rank < 1 || v->dims[0].v >= 0) continue;
            used = true;
            if (v->dims[0].sym >= 0)
                mp_symbol_bind(g, g->symbols[v->dims[0].sym], b->batch);
            else
                v->dims[0] = mp_dim_of(b->batch);
        }
        if (!used)
            return mp_fail(err, "--batch %lld: no graph input has a symbolic first dimension to bind", (long long)b->batch);
    }
    for (int i = 0; i < g->nvalues; i++) {
        mp_value *v = &g->values[i];
        if (v->rank >= 0) mp_value_set(g, i, v->dtype, v->rank, v->dims);
    }
    return 0;
}

/* Rejects dims a rule or the file produced that no tensor can have. */
static int check_value(const mp_graph *g, const mp_value *v, mp_err *err)
{
    if (v->rank > MP_MAX_RANK) return mp_fail(err, "output '%s' has rank %d (limit %d)", v->name, v->rank, MP_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) {
        int64_t d = v->dims[i].v;
        if (v->dims[i].sym < 0 && d < -1)
            return mp_fail(err, "output '%s' has a negative dimension %lld", v->name, (long long)d);
        if (d >= 0 && !mp_mul_ok(n, d, &n))
            return mp_fail(err, "output '%s' has dims whose product overflows int64", v->name);
    }
    if (mp_value_shape_known(v) && v->dtype != MP_UNDEFINED && v->dtype != MP_STRING && v->bytes < 0)
        return mp_fail(err, "output '%s' is too large to address (%lld elements of %s)", v->name, (long long)n,
                       mp_dtype_name(v->dtype));
    (void)g;
    return 0;
}

static const mp_value *find_outer(const mp_graph *g, const char *name)
{
    for (const mp_graph *p = g->parent; p; p = p->parent) {
        int32_t id = mp_graph_find(p, name);
        if (id >= 0 && !(p->values[id].flags & MP_VAL_OUTER)) return &p->values[id];
        if (id >= 0 && p->values[id].dtype != MP_UNDEFINED) return &p->values[id];
    }
    return NULL;
}

static int infer_nodes(mp_graph *g, mp_err *err)
{
    mp_err inner;
    for (int32_t i = 0; i < g->nnodes; i++) {
        mp_node *n = &g->nodes[i];
        const mp_op_def *d = mp_op_find(n->op_type, n->domain);
        if (!d)
            return mp_fail(err, "node '%s': unsupported op '%s' (domain '%s', opset %lld)", n->name, n->op_type,
                           *n->domain ? n->domain : "ai.onnx", (long long)mp_graph_opset(g, n->domain));
        n->op = d->id;
        inner.msg[0] = 0;
        if (d->shape(g, n, &inner))
            return mp_fail(err, "node '%s' (%s): %s", n->name, n->op_type, inner.msg[0] ? inner.msg : "shape inference failed");
        for (int32_t k = 0; k < n->nout; k++) {
            const mp_value *v = mp_val(g, n->out[k]);
            if (v && check_value(g, v, &inner)) return mp_fail(err, "node '%s' (%s): %s", n->name, n->op_type, inner.msg);
        }
    }
    return 0;
}

int mp_infer_subgraph(mp_graph *sub, mp_err *err)
{
    for (int32_t i = 0; i < sub->nvalues; i++) {
        mp_value *v = &sub->values[i];
        if (!(v->flags & MP_VAL_OUTER)) continue;
        const mp_value *o = find_outer(sub, v->name);
        if (!o) continue;
        v->kind = o->kind;
        v->elem_kind = o->elem_kind;
        v->seqlen = o->seqlen;
        v->elems = o->elems;
        mp_value_set(sub, i, o->dtype, o->rank, o->dims);
        v->konst = o->konst;
        v->symdata = o->symdata;
        v->nsymdata = o->nsymdata;
    }
    return infer_nodes(sub, err);
}

int mp_infer(mp_graph *g, mp_err *err) { return infer_nodes(g, err); }

static const char *unbound_in(const mp_graph *g, const mp_graph *root)
{
    for (int32_t i = 0; i < g->nvalues; i++) {
        const mp_value *v = &g->values[i];
        for (int k = 0; k < v->rank; k++)
            if (v->dims[k].v < 0 && v->dims[k].sym >= 0) return root->symbols[v->dims[k].sym];
    }
    return NULL;
}

const char *mp_unbound_symbol(const mp_graph *g) { return unbound_in(g, mp_graph_root((mp_graph *)g)); }
