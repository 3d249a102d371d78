/* loss_scale.c - fp16's dynamic loss scale, PyTorch GradScaler's rule within
 * what an fp16 seed can hold. The scale is 2^(15 + e): e, a resident fp32
 * scalar state, starts at 0, so every backend's zeroed state gives the
 * largest scale fp16 represents (2^16 would seed the backward with inf).
 *
 *   seed   = LossScale(e)                   the backward's seed, 2^(15 + e)
 *   ok     = AllFinite(grad...)             1 when every gradient is finite
 *   update(param, grad, state..., ok, e)    skipped when ok is 0, else unscaled by 2^-(15 + e)
 *   e', n' = LossScaleUpdate(e, ok, n)      ok: n += 1, and every growth_interval
 *                                           good steps e += 1 (at most 0);
 *                                           not ok: e -= 1 (at least -39, the
 *                                           smallest fp16 step), n = 0
 *
 * The updates run after every gradient is made (graph order), so AllFinite
 * reads them where they are all alive anyway: the check costs no memory. */
#include "passes/autodiff.h"

#define GROWTH_INTERVAL 2000 /* PyTorch's default */

int32_t mp_loss_scale_seed(mp_ad *ad, mp_dtype t, mp_loss_scale *ls)
{
    ls->log2 = ad_value(ad, "loss_scale", ".log2", MP_ROLE_OPT_STATE);
    ls->good = ad_value(ad, "loss_scale", ".good_steps", MP_ROLE_OPT_STATE);
    mp_value_set(ad->g, ls->log2, MP_FLOAT, 0, NULL);
    mp_value_set(ad->g, ls->good, MP_FLOAT, 0, NULL);
    int32_t seed, n = ad_add1(ad, "LossScale", "memplan", 1, &ls->log2, "loss_scale", &seed);
    if (n < 0) return -1;
    ad_attr_int(ad->g, &ad->g->nodes[n], "to", t);
    ad_attr_int(ad->g, &ad->g->nodes[n], "max_log2", MP_FP16_LOSS_SCALE_LOG2);
    return ad_infer(ad, n) ? -1 : seed;
}

int32_t mp_loss_scale_check(mp_ad *ad, const int32_t *grads, int n)
{
    return ad_emit(ad, "AllFinite", "memplan", n, grads, "grads_finite");
}

int mp_loss_scale_update(mp_ad *ad, const mp_loss_scale *ls, int32_t finite)
{
    int32_t in[3] = {ls->log2, finite, ls->good}, out[2];
    out[0] = ad_value(ad, ad->g->values[ls->log2].name, "'", MP_ROLE_OPT_STATE);
    out[1] = ad_value(ad, ad->g->values[ls->good].name, "'", MP_ROLE_OPT_STATE);
    int32_t n = ad_add(ad, "LossScaleUpdate", "memplan", 3, in, 2, out);
    if (n < 0) return -1;
    ad_attr_int(ad->g, &ad->g->nodes[n], "growth_interval", GROWTH_INTERVAL);
    if (ad_infer(ad, n)) return -1;
    ad->g->values[out[0]].alias = ls->log2; /* in place */
    ad->g->values[out[1]].alias = ls->good;
    return 0;
}
