/* autodiff.c - reverse-mode differentiation of the step's loss: a walk over
 * the nodes in reverse order that calls each op's gradient rule, summing the
 * gradients of values with several consumers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h" /* mp_unbound_symbol */
#include "frontend/shape.h"
#include "passes/autodiff.h"

/* The gradient rule of each op, from the grad column of the op table. */
static const mp_grad_rule rules[] = {
#define MP_OP(id, name, domain, shape, grad, cost) grad,
#include "ir/ops/all.def"
#undef MP_OP
};
_Static_assert(sizeof rules / sizeof rules[0] == MP_OP_COUNT, "one gradient rule slot per op id");

mp_grad_rule mp_grad_rule_for(mp_op_id op) { return op >= 0 && op < MP_OP_COUNT ? rules[op] : NULL; }

/* ---- emitting IR ---- */

int32_t ad_value(mp_ad *ad, const char *base, const char *suffix, mp_role role)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    int32_t id = mp_graph_add_unique(ad->g, name);
    ad->g->values[id].role = role;
    return id;
}

int32_t ad_add(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, int nout, const int32_t *out)
{
    static const char *const prefix[MP_PHASE_COUNT] = {"", "loss/", "grad/", "optim/"};
    char name[128];
    snprintf(name, sizeof name, "%s%s_%d", prefix[ad->phase], op, ad->g->nnodes);
    int32_t n = mp_graph_add_node(ad->g, name, op, domain, nin, in, nout, out);
    ad->g->nodes[n].phase = ad->phase;
    return n;
}

int32_t ad_add1(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, const char *base,
                int32_t *out)
{
    *out = ad_value(ad, base, "", ad->phase <= MP_PHASE_LOSS ? MP_ROLE_ACTIVATION : MP_ROLE_TRANSIENT);
    return ad_add(ad, op, domain, nin, in, 1, out);
}

/* A step node whose output has no size: say why, from the first forward value
 * without one (an unbound symbol, or a shape that depends on input values). */
static int unsized(mp_ad *ad, const mp_node *n, const mp_value *v)
{
    const mp_graph *g = ad->g;
    const char *sym = mp_unbound_symbol(g);
    if (sym)
        return mp_fail(ad->err, "node '%s' (%s): output '%s' has no known size: the symbolic dimension '%s' is "
                       "unbound (--batch N or --dim %s=V)", n->name, n->op_type, v->name, sym, sym);
    for (int32_t i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nout; k++) {
            const mp_value *u = mp_val((mp_graph *)g, g->nodes[i].out[k]);
            if (u && u->bytes < 0 && u != v)
                return mp_fail(ad->err, "node '%s' (%s): output '%s' has no known size, since '%s' (from node "
                               "'%s', %s) has none: its shape depends on values known only when the model runs",
                               n->name, n->op_type, v->name, u->name, g->nodes[i].name, g->nodes[i].op_type);
        }
    return mp_fail(ad->err, "node '%s' (%s): output '%s' has no known size", n->name, n->op_type, v->name);
}

int ad_infer(mp_ad *ad, int32_t id)
{
    mp_node *n = &ad->g->nodes[id];
    const mp_op_def *d = mp_op_find(n->op_type, n->domain);
    if (!d)
        return mp_fail(ad->err, "node '%s': op '%s' (domain '%s') is not in the op table", n->name, n->op_type,
                       n->domain);
    n->op = d->id;
    mp_err inner = {{0}};
    if (d->shape(ad->g, n, &inner))
        return mp_fail(ad->err, "node '%s' (%s): %s", n->name, n->op_type,
                       inner.msg[0] ? inner.msg : "shape inference failed");
    for (int k = 0; k < n->nout; k++) {
        const mp_value *v = mp_val(ad->g, n->out[k]);
        if (v && v->bytes < 0) return unsized(ad, n, v);
    }
    return 0;
}

int32_t ad_emit(mp_ad *ad, const char *op, const char *domain, int nin, const int32_t *in, const char *base)
{
    int32_t out;
    int32_t n = ad_add1(ad, op, domain, nin, in, base, &out);
    return ad_infer(ad, n) ? -1 : out;
}

static mp_attr *new_attr(mp_graph *g, mp_node *n, const char *name, mp_attr_type t)
{
    mp_attr *a = mp_arena_alloc(g->arena, (size_t)(n->nattrs + 1) * sizeof *a);
    if (n->nattrs) memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    n->attrs = a;
    mp_attr *r = &a[n->nattrs++];
    r->name = mp_arena_strdup(g->arena, name);
    r->type = t;
    return r;
}

void ad_attr_int(mp_graph *g, mp_node *n, const char *name, int64_t v) { new_attr(g, n, name, MP_ATTR_INT)->i = v; }
void ad_attr_float(mp_graph *g, mp_node *n, const char *name, float v) { new_attr(g, n, name, MP_ATTR_FLOAT)->f = v; }

void ad_attr_str(mp_graph *g, mp_node *n, const char *name, const char *v)
{
    mp_attr *a = new_attr(g, n, name, MP_ATTR_STRING);
    a->s = mp_arena_strdup(g->arena, v);
    a->slen = strlen(v);
}

void ad_attr_ints(mp_graph *g, mp_node *n, const char *name, const int64_t *v, int count)
{
    mp_attr *a = new_attr(g, n, name, MP_ATTR_INTS);
    a->n = count;
    a->ints = mp_arena_dup(g->arena, v, (size_t)(count ? count : 1) * sizeof *v);
}

void ad_attr_copy(mp_graph *g, mp_node *n, int32_t src)
{
    const mp_node *s = &g->nodes[src];
    if (!s->nattrs) return;
    mp_attr *a = mp_arena_alloc(g->arena, (size_t)(n->nattrs + s->nattrs) * sizeof *a);
    if (n->nattrs) memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    memcpy(a + n->nattrs, s->attrs, (size_t)s->nattrs * sizeof *a);
    n->attrs = a;
    n->nattrs += s->nattrs;
}

static int32_t const_node(mp_ad *ad, mp_tensor *t)
{
    int32_t out;
    int32_t n = ad_add1(ad, "Constant", "", 0, NULL, "const", &out);
    ad->g->values[out].role = MP_ROLE_CONST;
    mp_attr *a = new_attr(ad->g, &ad->g->nodes[n], "value", MP_ATTR_TENSOR);
    a->tensors = mp_arena_alloc(ad->g->arena, sizeof *a->tensors);
    a->tensors[0] = t;
    return ad_infer(ad, n) ? -1 : out;
}

int32_t ad_const_ints(mp_ad *ad, const int64_t *vals, int count)
{
    int64_t d = count;
    mp_tensor *t = mp_tensor_new(ad->g->arena, MP_INT64, 1, &d);
    for (int i = 0; i < count; i++) mp_tensor_set_i64(t, i, vals[i]);
    return const_node(ad, t);
}

int32_t ad_const_scalar(mp_ad *ad, mp_dtype dt, double x)
{
    mp_tensor *t = mp_tensor_new(ad->g->arena, dt, 0, NULL);
    mp_tensor_set_f64(t, 0, x);
    int32_t v = const_node(ad, t);
    if (v >= 0) ad->g->values[v].role = MP_ROLE_TRANSIENT;
    return v;
}

int ad_known_dims(mp_ad *ad, int32_t id, int64_t *dims, int *rank)
{
    const mp_value *v = &ad->g->values[id];
    if (v->rank < 0) return mp_fail(ad->err, "'%s' has an unknown rank", v->name);
    for (int i = 0; i < v->rank; i++) {
        mp_dim d = mp_dim_resolve(ad->g, v->dims[i]);
        if (d.v < 0)
            return mp_fail(ad->err, "'%s' has an unbound dimension %d (bind every symbolic dim first)", v->name, i);
        dims[i] = d.v;
    }
    *rank = v->rank;
    return 0;
}

static bool same_shape(const mp_graph *g, const mp_value *a, const mp_value *b)
{
    if (a->rank != b->rank || a->rank < 0) return false;
    for (int i = 0; i < a->rank; i++)
        if (!mp_dim_same(mp_dim_resolve(g, a->dims[i]), mp_dim_resolve(g, b->dims[i]))) return false;
    return true;
}

int32_t ad_sum_to(mp_ad *ad, int32_t dy, int32_t v, bool *own)
{
    if (same_shape(ad->g, &ad->g->values[dy], &ad->g->values[v])) {
        *own = false;
        return dy;
    }
    int64_t dims[MP_MAX_RANK];
    int rank;
    if (ad_known_dims(ad, v, dims, &rank)) return -1;
    int32_t out;
    int32_t n = ad_add1(ad, "SumToShape", "memplan", 1, &dy, "grad_sum", &out);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", dims, rank);
    *own = true;
    return ad_infer(ad, n) ? -1 : out;
}

int32_t ad_extra_output(mp_ad *ad, int32_t n, int k, const char *suffix, mp_dtype t, int32_t like)
{
    mp_graph *g = ad->g;
    mp_node *nd = &g->nodes[n];
    if (k < nd->nout && nd->out[k] >= 0) return nd->out[k];
    int32_t v = ad_value(ad, g->values[nd->out[0]].name, suffix, MP_ROLE_ACTIVATION);
    nd = &g->nodes[n]; /* ad_value adds a value: re-read the node */
    int32_t *outs = mp_arena_alloc(g->arena, (size_t)(k + 1) * sizeof *outs);
    for (int i = 0; i <= k; i++) outs[i] = i < nd->nout ? nd->out[i] : -1;
    outs[k] = v;
    nd->out = outs;
    nd->nout = k + 1;
    const mp_value *y = &g->values[like];
    mp_value_set(g, v, t, y->rank, y->dims);
    return v;
}

int ad_grad_node(mp_ad *ad, int32_t n, const char *op, int nin, const int32_t *in, int k, const char *const *suffix)
{
    const mp_node *f = &ad->g->nodes[n];
    int32_t out[8] = {0}, fin[8] = {0};
    for (int i = 0; i < k; i++) {
        fin[i] = i < f->nin ? f->in[i] : -1;
        out[i] = ad_needs(ad, fin[i]) ? ad_value(ad, suffix[i], "", MP_ROLE_TRANSIENT) : -1;
    }
    int32_t g = ad_add(ad, op, "memplan", nin, in, k, out);
    ad_attr_copy(ad->g, &ad->g->nodes[g], n);
    if (ad_infer(ad, g)) return -1;
    for (int i = 0; i < k; i++)
        if (out[i] >= 0 && ad_give(ad, fin[i], out[i], true)) return -1;
    return 0;
}

int ad_grad_one(mp_ad *ad, int32_t n, const char *op, const char *domain, int nin, const int32_t *in, const char *base)
{
    int32_t out, g = ad_add1(ad, op, domain, nin, in, base, &out);
    ad_attr_copy(ad->g, &ad->g->nodes[g], n);
    if (ad_infer(ad, g)) return -1;
    return ad_give(ad, ad->g->nodes[n].in[0], out, true);
}

int ad_give(mp_ad *ad, int32_t v, int32_t gval, bool own)
{
    if (gval < 0) return -1;
    if (!ad_needs(ad, v)) return 0;
    if (ad->grad[v] < 0) {
        ad->grad[v] = gval;
        ad->own[v] = own;
        return 0;
    }
    /* the buffer summed into comes first: the running sum when it is v's own,
     * else the new contribution when that is */
    bool swap = !ad->own[v] && own;
    int32_t in[2] = {swap ? gval : ad->grad[v], swap ? ad->grad[v] : gval};
    int32_t sum = ad_emit(ad, "Add", "", 2, in, "grad_acc");
    if (sum < 0) return -1;
    /* in place when in[0] is v's alone: nothing else reads it (v's own rule,
     * the only other reader of the running sum, runs later in the reverse walk).
     * Not for parameters: their gradient is a GRAD value of its own memory. */
    if ((ad->own[v] || own) && ad->g->values[v].role != MP_ROLE_PARAM &&
        ad->g->values[in[0]].bytes == ad->g->values[sum].bytes)
        ad->g->values[sum].alias = in[0];
    ad->grad[v] = sum;
    ad->own[v] = true;
    return 0;
}

int ad_give_sum(mp_ad *ad, int32_t v, int32_t gval, bool own)
{
    if (gval < 0) return -1;
    if (!ad_needs(ad, v)) return 0;
    bool own2;
    int32_t s = ad_sum_to(ad, gval, v, &own2);
    return ad_give(ad, v, s, own || own2);
}

/* ---- the walk ---- */

int mp_autodiff(mp_graph *g, int32_t loss, int32_t seed, int32_t *param_grad, mp_err *err)
{
    int32_t nfwd = g->nvalues, nnodes = g->nnodes;
    mp_ad ad = {g, err, MP_PHASE_BACKWARD, nfwd, NULL, NULL, NULL};
    ad.grad = malloc((size_t)nfwd * sizeof *ad.grad);
    ad.own = calloc((size_t)nfwd, sizeof *ad.own);
    ad.needs = calloc((size_t)nfwd, sizeof *ad.needs);
    int rc = -1;
    if (!ad.grad || !ad.own || !ad.needs) {
        mp_fail(err, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < nfwd; i++) {
        ad.grad[i] = -1;
        ad.needs[i] = g->values[i].role == MP_ROLE_PARAM;
    }
    /* forward: which values depend on a parameter through float tensors */
    for (int32_t i = 0; i < nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->nin; k++) any |= n->in[k] >= 0 && ad.needs[n->in[k]];
        for (int k = 0; k < n->nout && any; k++)
            if (n->out[k] >= 0 && mp_dtype_is_float(g->values[n->out[k]].dtype)) ad.needs[n->out[k]] = true;
    }
    if (!ad.needs[loss]) {
        mp_fail(err, "the loss '%s' does not depend on any parameter", g->values[loss].name);
        goto done;
    }
    ad.grad[loss] = seed;
    ad.own[loss] = true;
    int32_t dy[64];
    for (int32_t i = nnodes - 1; i >= 0; i--) {
        const mp_node *n = &g->nodes[i];
        bool reached = false, wanted = false;
        for (int k = 0; k < n->nout; k++) {
            dy[k < 64 ? k : 63] = n->out[k] >= 0 ? ad.grad[n->out[k]] : -1;
            reached |= n->out[k] >= 0 && ad.grad[n->out[k]] >= 0;
        }
        for (int k = 0; k < n->nin; k++) wanted |= ad_needs(&ad, n->in[k]);
        if (!reached || !wanted) continue;
        if (n->nout > 64) {
            mp_fail(err, "node '%s' (%s): more than 64 outputs", n->name, n->op_type);
            goto done;
        }
        mp_grad_rule r = n->op >= 0 ? mp_grad_rule_for((mp_op_id)n->op) : NULL;
        if (!r) {
            mp_fail(err, "node '%s' (%s): no gradient rule for op '%s', which lies between a parameter and the loss",
                    n->name, n->op_type, n->op_type);
            goto done;
        }
        mp_err inner = {{0}};
        ad.err = &inner;
        int bad = r(&ad, i, dy);
        ad.err = err;
        if (bad) {
            mp_fail(err, "gradient of node '%s' (%s): %s", g->nodes[i].name, g->nodes[i].op_type,
                    inner.msg[0] ? inner.msg : "rule failed");
            goto done;
        }
    }
    /* every parameter gets a gradient value of its own, role GRAD */
    for (int32_t v = 0; v < nfwd; v++) {
        param_grad[v] = -1;
        if (g->values[v].role != MP_ROLE_PARAM || ad.grad[v] < 0) continue;
        int32_t gv = ad.grad[v];
        if (!ad.own[v] || g->values[gv].role == MP_ROLE_GRAD) { /* a pass-through: copy it */
            char base[512];
            snprintf(base, sizeof base, "grad/%s", g->values[v].name);
            gv = ad_emit(&ad, "Identity", "", 1, &ad.grad[v], base);
            if (gv < 0) goto done;
        }
        g->values[gv].role = MP_ROLE_GRAD;
        param_grad[v] = gv;
    }
    rc = 0;
done:
    free(ad.grad);
    free(ad.own);
    free(ad.needs);
    return rc;
}
