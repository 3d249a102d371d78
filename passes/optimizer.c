/* optimizer.c - the update of each parameter: gradient accumulation over
 * micro-batches, then the optimizer's memplan-domain update node, which
 * writes the parameter and its state in place (value->alias); in fp16, after
 * the check that every gradient is finite (loss_scale.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/autodiff.h"

/* State tensors each optimizer keeps per parameter (beyond the parameter).
 * Adam's bias correction needs the step count t; PyTorch keeps it as a 0-D
 * fp32 tensor per parameter (4 bytes each), so memplan models it as a scalar
 * state tensor ("step", always the last state). */
typedef struct opt_def {
    const char *op;
    int nstate;
    const char *state[3];
    float lr, weight_decay;
    bool step; /* the last state is the 0-D step counter */
} opt_def;

static const opt_def opts[] = {
    [MP_OPT_SGD] = {"SGDUpdate", 0, {NULL, NULL, NULL}, 1e-2f, 0.0f, false},
    [MP_OPT_MOMENTUM] = {"MomentumUpdate", 1, {"momentum", NULL, NULL}, 1e-2f, 0.0f, false},
    [MP_OPT_ADAM] = {"AdamUpdate", 3, {"exp_avg", "exp_avg_sq", "step"}, 1e-3f, 0.0f, true},
    [MP_OPT_ADAMW] = {"AdamUpdate", 3, {"exp_avg", "exp_avg_sq", "step"}, 1e-3f, 1e-2f, true},
    [MP_OPT_ADAFACTOR] = {"AdafactorUpdate", 2, {"exp_avg_sq_row", "exp_avg_sq_col", NULL}, 1e-2f, 0.0f, false},
};

/* A persistent tensor of the step (no producer): optimizer state or an accumulation buffer. */
static int32_t state_value(mp_ad *ad, const char *param, const char *what, mp_role role, mp_dtype t, int rank,
                           const mp_dim *dims)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".%s", what);
    int32_t id = ad_value(ad, param, suffix, role);
    mp_value_set(ad->g, id, t, rank, dims);
    return id;
}

/* Adafactor's factored second moment for a 2-D+ param [.., R, C]: rows [.., R], columns [.., C]. */
static int factored_dims(const mp_value *p, int which, mp_dim *d)
{
    int r = 0;
    for (int i = 0; i < p->rank; i++)
        if (i != p->rank - 1 - which) d[r++] = p->dims[i];
    return r;
}

/* The update node of parameter p (its fp32 copy w) from its gradient; with ls,
 * it also reads whether every gradient is finite and the scale's exponent. */
static int emit_update(mp_ad *ad, const mp_train_opts *o, int32_t p, int32_t w, int32_t grad,
                       const mp_loss_scale *ls, int32_t finite)
{
    mp_graph *g = ad->g;
    const opt_def *od = &opts[o->optimizer];
    const mp_value *pv = &g->values[w];
    const char *name = g->values[p].name;
    int32_t in[7] = {w, grad, -1, -1, -1, -1, -1}, out[4] = {-1, -1, -1, -1};
    bool factored = o->optimizer == MP_OPT_ADAFACTOR && pv->rank >= 2;
    int nstate = o->optimizer == MP_OPT_ADAFACTOR && !factored ? 1 : od->nstate;
    for (int s = 0; s < nstate; s++) {
        mp_dim d[MP_MAX_RANK];
        int rank = pv->rank;
        if (od->step && s == nstate - 1)
            rank = 0; /* the step counter */
        else if (factored)
            rank = factored_dims(pv, s, d);
        else
            memcpy(d, pv->dims, (size_t)rank * sizeof *d);
        const char *what = o->optimizer == MP_OPT_ADAFACTOR && !factored ? "exp_avg_sq" : od->state[s];
        in[2 + s] = state_value(ad, name, what, MP_ROLE_OPT_STATE, MP_FLOAT, rank, d);
        out[1 + s] = ad_value(ad, g->values[in[2 + s]].name, "'", MP_ROLE_OPT_STATE);
    }
    int nin = 2 + nstate;
    if (ls) in[nin++] = finite, in[nin++] = ls->log2;
    out[0] = ad_value(ad, g->values[w].name, "'", g->values[w].role);
    int32_t n = ad_add(ad, od->op, "memplan", nin, in, 1 + nstate, out);
    mp_node *m = &g->nodes[n];
    ad_attr_float(g, m, "lr", od->lr);
    if (od->weight_decay != 0.0f) ad_attr_float(g, m, "weight_decay", od->weight_decay);
    if (o->optimizer == MP_OPT_MOMENTUM) ad_attr_float(g, m, "momentum", 0.9f);
    if (o->optimizer == MP_OPT_ADAM || o->optimizer == MP_OPT_ADAMW) {
        ad_attr_float(g, m, "beta1", 0.9f);
        ad_attr_float(g, m, "beta2", 0.999f);
        ad_attr_float(g, m, "epsilon", 1e-8f);
    }
    if (o->optimizer == MP_OPT_ADAFACTOR) ad_attr_float(g, m, "decay_rate", -0.8f);
    if (ls) { /* the scale is loss_scale * 2^log2 */
        ad_attr_float(g, m, "loss_scale", (float)MP_FP16_LOSS_SCALE);
        ad_attr_int(g, m, "dynamic_loss_scale", 1);
    }
    if (ad_infer(ad, n)) return -1;
    for (int k = 0; k <= nstate; k++) g->values[out[k]].alias = k ? in[1 + k] : w;
    if (w != p) { /* the new low-precision working copy, written over the old */
        int32_t c = ad_value(ad, name, "'", MP_ROLE_PARAM);
        int32_t cn = ad_add(ad, "Cast", "", 1, &out[0], 1, &c);
        ad_attr_int(g, &g->nodes[cn], "to", g->values[p].dtype);
        if (ad_infer(ad, cn)) return -1;
        g->values[c].alias = p;
    }
    return 0;
}

int mp_optimizer_build(mp_graph *g, const mp_train_opts *o, const int32_t *param_grad, const int32_t *master,
                       const mp_loss_scale *ls, mp_err *err)
{
    if (o->optimizer < MP_OPT_SGD || o->optimizer > MP_OPT_ADAFACTOR)
        return mp_fail(err, "unknown optimizer %d", o->optimizer);
    mp_ad ad = {g, err, MP_PHASE_OPTIMIZER, g->nvalues, NULL, NULL, NULL};
    /* with ls, every update waits for the check of every gradient: parameters, copies and gradients kept here */
    size_t cap = (size_t)ad.nfwd + 1;
    int32_t nparams = 0, *ps = NULL, *ws = NULL, *grads = NULL;
    if (ls) {
        if (!(ps = malloc(3 * cap * sizeof *ps))) return mp_fail(err, "out of memory");
        ws = ps + cap, grads = ps + 2 * cap;
    }
    int rc = -1;
    for (int32_t p = 0; p < ad.nfwd; p++) {
        if (g->values[p].role != MP_ROLE_PARAM || g->values[p].producer >= 0) continue;
        int32_t grad = param_grad[p];
        if (grad < 0) continue; /* the loss does not reach it: nothing to update */
        int32_t w = master && master[p] >= 0 ? master[p] : p; /* the fp32 copy the optimizer updates */
        const mp_value *pv = &g->values[w];
        if (o->micro_batches > 1) { /* acc += grad, in place, each micro-batch */
            int32_t acc = state_value(&ad, g->values[p].name, "grad_acc", MP_ROLE_GRAD, g->values[grad].dtype,
                                      pv->rank, pv->dims);
            int32_t in[2] = {acc, grad};
            int32_t sum = ad_emit(&ad, "Add", "", 2, in, "grad_acc");
            if (sum < 0) goto done;
            g->values[grad].role = MP_ROLE_TRANSIENT;
            g->values[sum].role = MP_ROLE_GRAD;
            g->values[sum].alias = acc;
            grad = sum;
        }
        if (ls) ps[nparams] = p, ws[nparams] = w, grads[nparams] = grad;
        else if (emit_update(&ad, o, p, w, grad, NULL, -1)) goto done;
        nparams++;
    }
    if (!nparams) {
        mp_fail(err, "the loss reaches no parameter");
        goto done;
    }
    if (ls) {
        int32_t finite = mp_loss_scale_check(&ad, grads, nparams);
        if (finite < 0) goto done;
        for (int32_t i = 0; i < nparams; i++)
            if (emit_update(&ad, o, ps[i], ws[i], grads[i], ls, finite)) goto done;
        if (mp_loss_scale_update(&ad, ls, finite)) goto done;
    }
    rc = 0;
done:
    free(ps);
    return rc;
}
