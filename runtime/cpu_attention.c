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

/* What the forward and the backward share: the views, the key length and the masking rules. */
typedef struct attn {
    const mp_tensor *q, *pk, *pv, *mask, *nonpad;
    head_view Q, K, V;
    int64_t B, Hq, Hkv, Sq, D, Dv, P, T, reps;
    double scale, softcap;
    bool causal;
    int64_t mdims[4], mstr[4];
} attn;

/* Reads Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen from inputs `first` on, and the attributes. */
static int attn_setup(const mp_kargs *k, int first, attn *a, mp_err *err)
{
    const mp_tensor *q = mp_kin(k, first), *kt = mp_kin(k, first + 1), *vt = mp_kin(k, first + 2);
    memset(a, 0, sizeof *a);
    a->mask = mp_kin(k, first + 3), a->pk = mp_kin(k, first + 4), a->pv = mp_kin(k, first + 5), a->nonpad = mp_kin(k, first + 6);
    if (!q || !kt || !vt) return mp_fail(err, "needs Q, K and V");
    mp_dtype t = q->dtype;
    if ((t != MP_FLOAT && t != MP_DOUBLE) || kt->dtype != t || vt->dtype != t) return mp_kunsupported(err, "dtype %s", mp_dtype_name(t));
    if (q->rank != kt->rank || q->rank != vt->rank) return mp_fail(err, "Q, K and V ranks differ");
    if (view_init(&a->Q, q, mp_attr_int(k->node, "q_num_heads", 0), "Q", err) ||
        view_init(&a->K, kt, mp_attr_int(k->node, "kv_num_heads", 0), "K", err) ||
        view_init(&a->V, vt, mp_attr_int(k->node, "kv_num_heads", 0), "V", err))
        return -1;
    a->q = q, a->B = q->dims[0], a->Hq = a->Q.H, a->Hkv = a->K.H, a->Sq = a->Q.S, a->D = a->Q.D, a->Dv = a->V.D;
    if (kt->dims[0] != a->B || vt->dims[0] != a->B || a->V.H != a->Hkv || a->V.S != a->K.S || a->K.D != a->D)
        return mp_fail(err, "Q, K and V shapes disagree");
    if (a->Hkv <= 0 || a->Hq % a->Hkv)
        return mp_fail(err, "q heads (%lld) must be a multiple of kv heads (%lld)", (long long)a->Hq, (long long)a->Hkv);
    a->reps = a->Hq / a->Hkv;
    const mp_tensor *pk = a->pk, *pv = a->pv;
    if (pk || pv) {
        if (!pk || !pv || pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a->B || pk->dims[1] != a->Hkv || pk->dims[3] != a->D ||
            pv->dims[2] != pk->dims[2] || pv->dims[3] != a->Dv || pk->dtype != t || pv->dtype != t)
            return mp_fail(err, "past_key and past_value must be [B, kv_heads, past, D] of Q's dtype");
        a->P = pk->dims[2];
    }
    a->T = a->P + a->K.S; /* total key length */
    a->scale = mp_node_attr(k->node, "scale") ? mp_attr_float(k->node, "scale", 1.0f) : 1 / sqrt((double)a->D);
    a->softcap = mp_attr_float(k->node, "softcap", 0.0f);
    a->causal = mp_attr_int(k->node, "is_causal", 0) != 0;
    /* the mask broadcasts (right-aligned) to [B, Hq, Sq, T]; shorter last dims pad with "masked" */
    for (int o = 0; o < 4; o++) a->mdims[o] = 1, a->mstr[o] = 0;
    const mp_tensor *mask = a->mask;
    if (mask) {
        if (mask->rank < 1 || mask->rank > 4 || (mask->dtype != MP_BOOL && mask->dtype != t)) return mp_fail(err, "attn_mask must be bool or Q's dtype, rank 1..4");
        int64_t s = 1;
        for (int i = mask->rank - 1; i >= 0; i--) {
            int o = 4 - mask->rank + i;
            a->mdims[o] = mask->dims[i];
            a->mstr[o] = mask->dims[i] == 1 && o != 3 ? 0 : s;
            s *= mask->dims[i];
        }
        int64_t want[4] = {a->B, a->Hq, a->Sq, a->T};
        for (int o = 0; o < 3; o++)
            if (a->mdims[o] != 1 && a->mdims[o] != want[o]) return mp_fail(err, "attn_mask does not broadcast to [B, H, Sq, T]");
        if (a->mdims[3] > a->T) return mp_fail(err, "attn_mask is longer than the keys");
    }
    if (a->nonpad && a->nonpad->numel != a->B) return mp_fail(err, "nonpad_kv_seqlen must have B entries");
    return 0;
}

/* Element (b, h, s, d) of the present key or value cache. */
static double key_at(const attn *a, int64_t b, int64_t h, int64_t s, int64_t d) { return kv_at(a->pk, &a->K, a->P, b, h, s, d); }
static double value_at(const attn *a, int64_t b, int64_t h, int64_t s, int64_t d) { return kv_at(a->pv, &a->V, a->P, b, h, s, d); }

/* Row (b, h, i) of the attention: capped[j] the (softcapped) scaled Q.K^T, masked[j] that plus the mask's
 * bias, p[j] the softmax (a fully masked row attends to nothing: zeros). */
static void attn_row(const attn *a, int64_t b, int64_t h, int64_t i, double *capped, double *masked, double *p)
{
    int64_t valid = a->nonpad ? mp_tensor_get_i64(a->nonpad, b) : a->T;
    int64_t offset = a->P > 0 || !a->nonpad ? a->P : valid - a->Sq; /* causal frontier: j <= i + offset */
    int64_t hk = h / a->reps;
    double m = -INFINITY;
    for (int64_t j = 0; j < a->T; j++) {
        double dot = 0;
        for (int64_t d = 0; d < a->D; d++) dot += rd(a->q, view_at(&a->Q, b, h, i, d)) * key_at(a, b, hk, j, d);
        double s = dot * a->scale, bias = 0;
        if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap); /* before the mask: masked stays -inf */
        capped[j] = s;
        if (a->mask) {
            if (j >= a->mdims[3]) {
                bias = -INFINITY;
            } else {
                int64_t ix[4] = {b, h, i, j}, at = 0;
                for (int o = 0; o < 4; o++) at += (a->mdims[o] == 1 ? 0 : ix[o]) * a->mstr[o];
                bias = a->mask->dtype == MP_BOOL ? (((const uint8_t *)a->mask->data)[at] ? 0 : -INFINITY) : rd(a->mask, at);
            }
        }
        if (a->causal && j > i + offset) bias = -INFINITY;
        if (j >= valid) bias = -INFINITY;
        masked[j] = s + bias;
        m = fmax(m, masked[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < a->T; j++) sum += p[j] = m == -INFINITY ? 0 : exp(masked[j] - m);
    for (int64_t j = 0; j < a->T; j++) p[j] = sum > 0 ? p[j] / sum : 0;
}

int mp_cpu_Attention(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0), *ok = mp_kout(k, 1), *ov = mp_kout(k, 2), *oqk = mp_kout(k, 3);
    attn a;
    if (attn_setup(k, 0, &a, err)) return -1;
    if (!y || y->dtype != a.q->dtype) return mp_fail(err, "needs Y of Q's dtype");
    int64_t B = a.B, Hq = a.Hq, Hkv = a.Hkv, Sq = a.Sq, D = a.D, Dv = a.Dv, T = a.T;
    int64_t mode = mp_attr_int(k->node, "qk_matmul_output_mode", 0);
    bool y_flat = y->rank == 3;
    if (y->numel != B * Hq * Sq * Dv) return mp_fail(err, "Y has %lld elements, expected %lld", (long long)y->numel, (long long)(B * Hq * Sq * Dv));
    if ((ok && ok->numel != B * Hkv * T * D) || (ov && ov->numel != B * Hkv * T * Dv)) return mp_fail(err, "present_key/value sizes disagree");
    if (oqk && oqk->numel != B * Hq * Sq * T) return mp_fail(err, "qk_matmul_output size disagrees");
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t s = 0; s < T; s++) {
                for (int64_t d = 0; ok && d < D; d++) wr(ok, ((b * Hkv + h) * T + s) * D + d, key_at(&a, b, h, s, d));
                for (int64_t d = 0; ov && d < Dv; d++) wr(ov, ((b * Hkv + h) * T + s) * Dv + d, value_at(&a, b, h, s, d));
            }
    double *row = mp_scratch_array(k->scratch, 3 * (T ? T : 1), sizeof *row);
    if (!row) return mp_fail(err, "out of scratch memory");
    double *capped = row, *masked = row + T, *p = row + 2 * T;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < Sq; i++) {
                attn_row(&a, b, h, i, capped, masked, p);
                const double *qk = mode == 0 || mode == 1 ? capped : mode == 2 ? masked : p;
                for (int64_t j = 0; oqk && j < T; j++) wr(oqk, ((b * Hq + h) * Sq + i) * T + j, qk[j]);
                for (int64_t d = 0; d < Dv; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) acc += p[j] * value_at(&a, b, h / a.reps, j, d);
                    wr(y, y_flat ? (b * Sq + i) * Hq * Dv + h * Dv + d : ((b * Hq + h) * Sq + i) * Dv + d, acc);
                }
            }
    return 0;
}

/* AttentionGrad(dY, Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen){Attention's attributes}
 * -> dQ, dK, dV, dMask: each row's softmax recomputed from Q and K (as a memory-efficient attention
 * backward saves only its inputs), then dP = dY V^T, dS = P (dP - sum(P dP)) (times 1 - (capped /
 * softcap)^2 under a softcap), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dY, summed over the query
 * heads sharing a kv head. dMask (optional) is dS before the softcap's factor, [B, Hq, Sq, T]. The past
 * cache gets no gradient. Sums in double, stored once. */
int mp_cpu_AttentionGrad(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *dy = mp_kin(k, 0);
    mp_tensor *dq = mp_kout(k, 0), *dk = mp_kout(k, 1), *dv = mp_kout(k, 2), *dm = mp_kout(k, 3);
    attn a;
    if (!dy || attn_setup(k, 1, &a, err)) return dy ? -1 : mp_fail(err, "needs dY");
    int64_t B = a.B, Hq = a.Hq, Sq = a.Sq, D = a.D, Dv = a.Dv, T = a.T, P = a.P;
    bool y_flat = dy->rank == 3;
    if (dy->numel != B * Hq * Sq * Dv) return mp_fail(err, "dY has %lld elements, expected %lld", (long long)dy->numel, (long long)(B * Hq * Sq * Dv));
    if (dm && dm->numel != B * Hq * Sq * T) return mp_fail(err, "dMask must be [B, Hq, Sq, T]");
    const mp_tensor *kt = mp_kin(k, 2), *vt = mp_kin(k, 3);
    double *acc_k = mp_scratch_array(k->scratch, kt->numel ? kt->numel : 1, sizeof *acc_k);
    double *acc_v = mp_scratch_array(k->scratch, vt->numel ? vt->numel : 1, sizeof *acc_v);
    double *row = mp_scratch_array(k->scratch, 4 * (T ? T : 1) + (D ? D : 1), sizeof *row);
    if (!acc_k || !acc_v || !row) return mp_fail(err, "out of scratch memory");
    memset(acc_k, 0, (size_t)(kt->numel ? kt->numel : 1) * sizeof *acc_k);
    memset(acc_v, 0, (size_t)(vt->numel ? vt->numel : 1) * sizeof *acc_v);
    double *capped = row, *masked = row + T, *p = row + 2 * T, *ds = row + 3 * T, *gq = row + 4 * T;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / a.reps;
            for (int64_t i = 0; i < Sq; i++) {
                attn_row(&a, b, h, i, capped, masked, p);
                int64_t yrow = y_flat ? (b * Sq + i) * Hq * Dv + h * Dv : ((b * Hq + h) * Sq + i) * Dv;
                double dot = 0;
                for (int64_t j = 0; j < T; j++) {
                    double dp = 0;
                    for (int64_t d = 0; d < Dv; d++) dp += rd(dy, yrow + d) * value_at(&a, b, hk, j, d);
                    ds[j] = dp, dot += p[j] * dp;
                }
                for (int64_t d = 0; d < D; d++) gq[d] = 0;
                for (int64_t j = 0; j < T; j++) {
                    double g = p[j] * (ds[j] - dot);
                    if (dm) wr(dm, ((b * Hq + h) * Sq + i) * T + j, g);
                    if (a.softcap > 0) g *= 1 - (capped[j] / a.softcap) * (capped[j] / a.softcap);
                    g *= a.scale;
                    for (int64_t d = 0; d < D; d++) gq[d] += g * key_at(&a, b, hk, j, d);
                    if (j < P) continue; /* the past cache: no gradient */
                    for (int64_t d = 0; d < D; d++) acc_k[view_at(&a.K, b, hk, j - P, d)] += g * rd(a.q, view_at(&a.Q, b, h, i, d));
                    for (int64_t d = 0; d < Dv; d++) acc_v[view_at(&a.V, b, hk, j - P, d)] += p[j] * rd(dy, yrow + d);
                }
                for (int64_t d = 0; dq && d < D; d++) wr(dq, view_at(&a.Q, b, h, i, d), gq[d]);
            }
        }
    for (int64_t e = 0; dk && e < dk->numel; e++) wr(dk, e, acc_k[e]);
    for (int64_t e = 0; dv && e < dv->numel; e++) wr(dv, e, acc_v[e]);
    return 0;
}
