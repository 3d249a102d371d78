/* fuse.c - folds the elementwise expansions that exporters write for fused
 * ops back into the fused op before autodiff, so the backward saves what the
 * fused op's gradient saves (as PyTorch's autograd does) rather than every
 * intermediate of the expansion:
 *
 *   GELU (erf):  Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)      -> Gelu(x)
 *   LayerNorm:   d = Sub(x, ReduceMean(x)); Add(Mul(Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))), w), b)
 *                                                                  -> LayerNormalization(x, w, b)
 *
 * Each intermediate must be read only inside the pattern; the fused node
 * replaces the pattern's last node, the other nodes are removed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"

static bool is_op(const mp_graph *g, int32_t n, const char *op)
{
    if (n < 0 || n >= g->nnodes) return false;
    const mp_node *x = &g->nodes[n];
    return (!x->domain || !*x->domain || !strcmp(x->domain, "ai.onnx")) && !strcmp(x->op_type, op) &&
           x->phase == MP_PHASE_FORWARD;
}

/* The producer of v when it is op, else -1. */
static int32_t made_by(const mp_graph *g, int32_t v, const char *op)
{
    if (v < 0 || v >= g->nvalues) return -1;
    int32_t p = g->values[v].producer;
    return is_op(g, p, op) ? p : -1;
}

/* v is read by exactly n uses and is not a graph output. */
static bool used(const mp_graph *g, int32_t v, int n)
{
    return v >= 0 && g->values[v].ncons == n && !(g->values[v].flags & MP_VAL_OUTPUT);
}

/* v is a known one-element constant equal to x (to 1e-2 relative: bf16 constants round). */
static bool is_scalar(const mp_graph *g, int32_t v, double x)
{
    if (v < 0 || !g->values[v].konst || g->values[v].konst->numel != 1) return false;
    double y = mp_tensor_get_f64(g->values[v].konst, 0);
    return fabs(y - x) <= 1e-2 * fabs(x);
}

/* The binary node n with one input the scalar c: its other input, else -1. */
static int32_t with_scalar(const mp_graph *g, int32_t n, double c, bool commutes)
{
    const mp_node *x = &g->nodes[n];
    if (x->nin != 2) return -1;
    if (is_scalar(g, x->in[1], c)) return x->in[0];
    return commutes && is_scalar(g, x->in[0], c) ? x->in[1] : -1;
}

/* ReduceMean node r over the last axis only (axes attribute, or a constant input). */
static bool mean_of_last(const mp_graph *g, int32_t r)
{
    const mp_node *n = &g->nodes[r];
    int rank = g->values[n->in[0]].rank;
    const int64_t *axes;
    int na = mp_attr_ints(n, "axes", &axes);
    int64_t a;
    if (na == 1)
        a = axes[0];
    else if (na <= 0 && n->nin > 1 && n->in[1] >= 0 && g->values[n->in[1]].konst &&
             g->values[n->in[1]].konst->numel == 1)
        a = mp_tensor_get_i64(g->values[n->in[1]].konst, 0);
    else
        return false;
    return rank > 0 && (a == -1 || a == rank - 1) && mp_attr_int(n, "keepdims", 1) == 1;
}

/* Turns node n into op(in...) with no attributes. */
static void rewrite(mp_graph *g, int32_t n, const char *op, int nin, const int32_t *in)
{
    mp_node *x = &g->nodes[n];
    x->op_type = op;
    x->domain = "";
    x->nin = nin;
    x->in = mp_arena_dup(g->arena, in, (size_t)nin * sizeof *in);
    x->nattrs = 0;
    x->attrs = NULL;
}

/* GELU ending at the final Mul m; marks the removed nodes. */
static bool fuse_gelu(mp_ad *ad, int32_t m, bool *dead)
{
    mp_graph *g = ad->g;
    int32_t prod = with_scalar(g, m, 0.5, true); /* x * (1 + erf) */
    int32_t mul = made_by(g, prod, "Mul");
    if (mul < 0 || !used(g, prod, 1)) return false;
    const mp_node *mn = &g->nodes[mul];
    for (int side = 0; side < 2; side++) {
        int32_t x = mn->in[side], plus = mn->in[1 - side];
        int32_t add = made_by(g, plus, "Add");
        if (add < 0 || !used(g, plus, 1)) continue;
        int32_t erf_out = with_scalar(g, add, 1.0, true);
        int32_t erf = made_by(g, erf_out, "Erf");
        if (erf < 0 || !used(g, erf_out, 1)) continue;
        int32_t scaled = g->nodes[erf].in[0];
        int32_t div = made_by(g, scaled, "Div");
        if (div < 0 || !used(g, scaled, 1) || with_scalar(g, div, sqrt(2.0), false) != x) continue;
        rewrite(g, m, "Gelu", 1, &x);
        dead[mul] = dead[add] = dead[erf] = dead[div] = true;
        return true;
    }
    return false;
}

/* LayerNorm ending at the bias Add a; marks the removed nodes. */
static bool fuse_layernorm(mp_ad *ad, int32_t a, bool *dead)
{
    mp_graph *g = ad->g;
    const mp_node *an = &g->nodes[a];
    for (int side = 0; side < 2; side++) {
        int32_t scaled = an->in[side], b = an->in[1 - side];
        int32_t mul = made_by(g, scaled, "Mul");
        if (mul < 0 || !used(g, scaled, 1) || g->values[b].role != MP_ROLE_PARAM) continue;
        for (int s2 = 0; s2 < 2; s2++) {
            int32_t normed = g->nodes[mul].in[s2], w = g->nodes[mul].in[1 - s2];
            int32_t div = made_by(g, normed, "Div");
            if (div < 0 || !used(g, normed, 1) || g->values[w].role != MP_ROLE_PARAM) continue;
            int32_t d = g->nodes[div].in[0], den = g->nodes[div].in[1];
            int32_t sub = made_by(g, d, "Sub"), sq = made_by(g, den, "Sqrt");
            if (sub < 0 || sq < 0 || !used(g, d, 2) || !used(g, den, 1)) continue;
            int32_t x = g->nodes[sub].in[0], mean = g->nodes[sub].in[1];
            int32_t r1 = made_by(g, mean, "ReduceMean");
            if (r1 < 0 || !used(g, mean, 1) || g->nodes[r1].in[0] != x || !mean_of_last(g, r1)) continue;
            int32_t var_eps = g->nodes[sq].in[0], add = made_by(g, var_eps, "Add");
            if (add < 0 || !used(g, var_eps, 1)) continue;
            const mp_node *addn = &g->nodes[add];
            int32_t var = -1;
            double eps = 0;
            for (int k = 0; k < 2 && var < 0; k++) {
                const mp_value *c = &g->values[addn->in[1 - k]];
                if (addn->nin == 2 && c->konst && c->konst->numel == 1) {
                    var = addn->in[k];
                    eps = mp_tensor_get_f64(c->konst, 0);
                }
            }
            int32_t r2 = made_by(g, var, "ReduceMean");
            if (r2 < 0 || !used(g, var, 1) || !mean_of_last(g, r2)) continue;
            int32_t sqd = g->nodes[r2].in[0], pow = made_by(g, sqd, "Pow");
            if (pow < 0 || !used(g, sqd, 1) || with_scalar(g, pow, 2.0, false) != d) continue;
            int32_t in[3] = {x, w, b};
            rewrite(g, a, "LayerNormalization", 3, in);
            ad_attr_int(g, &g->nodes[a], "axis", -1);
            ad_attr_float(g, &g->nodes[a], "epsilon", (float)eps);
            dead[r1] = dead[sub] = dead[pow] = dead[r2] = dead[add] = dead[sq] = dead[div] = dead[mul] = true;
            return true;
        }
    }
    return false;
}

int mp_train_fuse(mp_graph *g, mp_err *err)
{
    if (mp_graph_link(g, err)) return -1;
    bool *dead = calloc((size_t)g->nnodes + 1, sizeof *dead);
    if (!dead) return mp_fail(err, "out of memory");
    mp_ad ad = {g, err, MP_PHASE_FORWARD, g->nvalues, NULL, NULL, NULL};
    int rc = -1, nfused = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        if (dead[i]) continue;
        bool f = (is_op(g, i, "Mul") && fuse_gelu(&ad, i, dead)) ||
                 (is_op(g, i, "Add") && fuse_layernorm(&ad, i, dead));
        if (f && ad_infer(&ad, i)) goto done;
        nfused += f;
    }
    if (nfused) { /* drop the removed nodes, keeping the order */
        int32_t k = 0;
        for (int32_t i = 0; i < g->nnodes; i++)
            if (!dead[i]) g->nodes[k++] = g->nodes[i];
        g->nnodes = k;
        if (mp_graph_link(g, err)) goto done;
    }
    rc = 0;
done:
    free(dead);
    return rc;
}
