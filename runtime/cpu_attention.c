/* cpu_attention.c - ONNX Attention (opsets 23-24): scaled dot-product
 * attention with a past KV cache, boolean or additive masks, causal masking,
 * grouped-query heads, softcap and the optional QK output.
 *
 * Q, K, V are [B, H, S, D] or, in 3-D, [B, S, H*D] (q_num_heads and
 * kv_num_heads give H). Scores and the softmax are computed in double, one
 * query row at a time. As ONNX's reference: softcap applies to Q.K^T before
 * the mask; qk_matmul_output is the (softcapped) Q.K^T for modes 0 and 1,
 * plus the mask for 2, the softmax for 3; a fully masked row gives zeros.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

static inline double rd(const mp_tensor *t, int64_t i)
{
    return t->dtype == MP_FLOAT ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}
static inline void wr(mp_tensor *t, int64_t i, double v)
{
    if (t->dtype == MP_FLOAT) ((float *)t->data)[i] = (float)v;
    else ((double *)t->data)[i] = v;
}

/* A Q/K/V view: element (b, h, s, d) of a 4-D or 3-D tensor. */
typedef struct head_view {
    const mp_tensor *t;
    int64_t H, S, D;
    bool flat;                   /* 3-D [B, S, H*D] */
} head_view;

static int view_init(head_view *v, const mp_tensor *t, int64_t heads, const char *what, mp_err *err)
{
    v->t = t;
    if (t->rank == 4) {
        v->H = t->dims[1], v->S = t->dims[2], v->D = t->dims[3], v->flat = false;
        return 0;
    }
    if (t->rank != 3) return mp_fail(err, "%s must be 3-D or 4-D", what);
    if (heads <= 0 || t->dims[2] % heads) return mp_fail(err, "%s: 3-D input needs a head count dividing %lld", what, (long long)t->dims[2]);
    v->H = heads, v->S = t->dims[1], v->D = t->dims[2] / heads, v->flat = true;
    return 0;
}

static inline int64_t view_at(const head_view *v, int64_t b, int64_t h, int64_t s, int64_t d)
{
    return v->flat ? (b * v->S + s) * v->H * v->D + h * v->D + d : ((b * v->H + h) * v->S + s) * v->D + d;
}

/* Element (b, h, s, d) of the present cache: past rows first, then the new ones. */
static double kv_at(const mp_tensor *past, const head_view *v, int64_t P, int64_t b, int64_t h, int64_t s, int64_t d)
{
    if (s < P) return rd(past, ((b * v->H + h) * P + s) * v->D + d);
    return rd(v->t, view_at(v, b, h, s - P, d));
}

int mp_cpu_Attention(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *q = mp_kin(k, 0), *kt = mp_kin(k, 1), *vt = mp_kin(k, 2), *mask = mp_kin(k, 3);
    const mp_tensor *pk = mp_kin(k, 4), *pv = mp_kin(k, 5), *nonpad = mp_kin(k, 6);
    mp_tensor *y = mp_kout(k, 0), *ok = mp_kout(k, 1), *ov = mp_kout(k, 2), *oqk = mp_kout(k, 3);
    if (!q || !kt || !vt || !y) return mp_fail(err, "needs Q, K, V and Y");
    mp_dtype t = q->dtype;
    if ((t != MP_FLOAT && t != MP_DOUBLE) || kt->dtype != t || vt->dtype != t || y->dtype != t) return mp_kunsupported(err, "dtype %s", mp_dtype_name(t));
    head_view Q = {0}, K = {0}, V = {0};
    if (q->rank != kt->rank || q->rank != vt->rank) return mp_fail(err, "Q, K and V ranks differ");
    if (view_init(&Q, q, mp_attr_int(k->node, "q_num_heads", 0), "Q", err) || view_init(&K, kt, mp_attr_int(k->node, "kv_num_heads", 0), "K", err) ||
        view_init(&V, vt, mp_attr_int(k->node, "kv_num_heads", 0), "V", err))
        return -1;
    int64_t B = q->dims[0], Hq = Q.H, Hkv = K.H, Sq = Q.S, D = Q.D, Dv = V.D;
    if (kt->dims[0] != B || vt->dims[0] != B || V.H != Hkv || V.S != K.S || K.D != D) return mp_fail(err, "Q, K and V shapes disagree");
    if (Hkv <= 0 || Hq % Hkv) return mp_fail(err, "q heads (%lld) must be a multiple of kv heads (%lld)", (long long)Hq, (long long)Hkv);
    int64_t P = 0;
    if (pk || pv) {
        if (!pk || !pv || pk->rank != 4 || pv->rank != 4 || pk->dims[0] != B || pk->dims[1] != Hkv || pk->dims[3] != D ||
            pv->dims[2] != pk->dims[2] || pv->dims[3] != Dv || pk->dtype != t || pv->dtype != t)
            return mp_fail(err, "past_key and past_value must be [B, kv_heads, past, D] of Q's dtype");
        P = pk->dims[2];
    }
    int64_t T = P + K.S; /* total key length */
    double scale = mp_node_attr(k->node, "scale") ? mp_attr_float(k->node, "scale", 1.0f) : 1 / sqrt((double)D);
    double softcap = mp_attr_float(k->node, "softcap", 0.0f);
    bool causal = mp_attr_int(k->node, "is_causal", 0) != 0;
    int64_t mode = mp_attr_int(k->node, "qk_matmul_output_mode", 0);
    /* the mask broadcasts (right-aligned) to [B, Hq, Sq, T]; shorter last dims pad with "masked" */
    int64_t mdims[4] = {1, 1, 1, 1}, mstr[4] = {0, 0, 0, 0};
    if (mask) {
        if (mask->rank < 1 || mask->rank > 4 || (mask->dtype != MP_BOOL && mask->dtype != t)) return mp_fail(err, "attn_mask must be bool or Q's dtype, rank 1..4");
        int64_t s = 1;
        for (int i = mask->rank - 1; i >= 0; i--) {
            int o = 4 - mask->rank + i;
            mdims[o] = mask->dims[i];
            mstr[o] = mask->dims[i] == 1 && o != 3 ? 0 : s;
            s *= mask->dims[i];
        }
        int64_t want[4] = {B, Hq, Sq, T};
        for (int o = 0; o < 3; o++)
            if (mdims[o] != 1 && mdims[o] != want[o]) return mp_fail(err, "attn_mask does not broadcast to [B, H, Sq, T]");
        if (mdims[3] > T) return mp_fail(err, "attn_mask is longer than the keys");
    }
    if (nonpad && nonpad->numel != B) return mp_fail(err, "nonpad_kv_seqlen must have B entries");
    /* outputs */
    bool y_flat = y->rank == 3;
    if (y->numel != B * Hq * Sq * Dv) return mp_fail(err, "Y has %lld elements, expected %lld", (long long)y->numel, (long long)(B * Hq * Sq * Dv));
    if ((ok && ok->numel != B * Hkv * T * D) || (ov && ov->numel != B * Hkv * T * Dv)) return mp_fail(err, "present_key/value sizes disagree");
    if (oqk && oqk->numel != B * Hq * Sq * T) return mp_fail(err, "qk_matmul_output size disagrees");
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t s = 0; s < T; s++) {
                for (int64_t d = 0; ok && d < D; d++) wr(ok, ((b * Hkv + h) * T + s) * D + d, kv_at(pk, &K, P, b, h, s, d));
                for (int64_t d = 0; ov && d < Dv; d++) wr(ov, ((b * Hkv + h) * T + s) * Dv + d, kv_at(pv, &V, P, b, h, s, d));
            }
    double *sc = mp_scratch_array(k->scratch, T ? T : 1, sizeof *sc);
    if (!sc) return mp_fail(err, "out of scratch memory");
    int64_t reps = Hq / Hkv;
    for (int64_t b = 0; b < B; b++) {
        int64_t valid = nonpad ? mp_tensor_get_i64(nonpad, b) : T;
        int64_t offset = P > 0 || !nonpad ? P : valid - Sq; /* causal frontier: j <= i + offset */
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / reps;
            for (int64_t i = 0; i < Sq; i++) {
                double m = -INFINITY;
                for (int64_t j = 0; j < T; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += rd(q, view_at(&Q, b, h, i, d)) * kv_at(pk, &K, P, b, hk, j, d);
                    double s = dot * scale, bias = 0;
                    if (softcap > 0) s = softcap * tanh(s / softcap); /* before the mask: masked stays -inf */
                    if ((mode == 0 || mode == 1) && oqk) wr(oqk, ((b * Hq + h) * Sq + i) * T + j, s);
                    if (mask) {
                        if (j >= mdims[3]) {
                            bias = -INFINITY;
                        } else {
                            int64_t ix[4] = {b, h, i, j}, at = 0;
                            for (int o = 0; o < 4; o++) at += (mdims[o] == 1 ? 0 : ix[o]) * mstr[o];
                            bias = mask->dtype == MP_BOOL ? (((const uint8_t *)mask->data)[at] ? 0 : -INFINITY) : rd(mask, at);
                        }
                    }
                    if (causal && j > i + offset) bias = -INFINITY;
                    if (j >= valid) bias = -INFINITY;
                    s += bias;
                    if (mode == 2 && oqk) wr(oqk, ((b * Hq + h) * Sq + i) * T + j, s);
                    sc[j] = s;
                    m = fmax(m, s);
                }
                double sum = 0;
                for (int64_t j = 0; j < T; j++) sum += sc[j] = m == -INFINITY ? 0 : exp(sc[j] - m);
                for (int64_t j = 0; j < T; j++) {
                    sc[j] = sum > 0 ? sc[j] / sum : 0; /* a fully masked row attends to nothing */
                    if (mode == 3 && oqk) wr(oqk, ((b * Hq + h) * Sq + i) * T + j, sc[j]);
                }
                for (int64_t d = 0; d < Dv; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) acc += sc[j] * kv_at(pv, &V, P, b, hk, j, d);
                    wr(y, y_flat ? (b * Sq + i) * Hq * Dv + h * Dv + d : ((b * Hq + h) * Sq + i) * Dv + d, acc);
                }
            }
        }
    }
    return 0;
}
