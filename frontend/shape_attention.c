/* shape_attention.c - shape rules of the transformer-era ops (ir/ops/nn.def):
 * Attention (opset 23, 24), RotaryEmbedding (23), LinearAttention and
 * CausalConvWithState (27), SwiGLU (28), FlexAttention (ai.onnx.preview 1). */
#include <string.h>

#include "shape_nn.h"

/* a + b as a dim: known when both are; x + 0 stays x. */
static mp_dim dim_add(mp_dim a, mp_dim b)
{
    if (a.v >= 0 && b.v >= 0) {
        int64_t r;
        return mp_add_ok(a.v, b.v, &r) ? mp_dim_of(r) : mp_dim_of(-2);
    }
    if (a.v == 0) return b;
    if (b.v == 0) return a;
    return MP_DIM_UNKNOWN;
}

/* d / heads when d is known and divisible (fails otherwise); unknown stays unknown. */
static int dim_split(const mp_graph *g, mp_dim d, int64_t heads, const char *what, mp_dim *out, mp_err *err)
{
    char b[32];
    *out = MP_DIM_UNKNOWN;
    if (d.v < 0) return 0;
    if (d.v % heads)
        return mp_fail(err, "%s %s is not divisible by %lld heads", what, mp_dim_str(g, d, b), (long long)heads);
    *out = mp_dim_of(d.v / heads);
    return 0;
}

static int read_heads(const mp_node *n, const char *name, int64_t *h, mp_err *err)
{
    *h = mp_attr_int(n, name, 0);
    if (*h <= 0) return mp_fail(err, "attribute '%s' must be positive", name);
    return 0;
}

/* One attention operand seen as [batch, heads, seq, head_size], whether it
 * came 4-D or 3-D packed [batch, seq, heads * head_size]. */
typedef struct heads_view {
    mp_dim batch, heads, seq, head_size;
} heads_view;

/* rank: the rank v must have, 0 for "3 or 4"; heads: the heads attribute
 * named heads_attr (0 when absent), needed to unpack a 3-D v. */
static int view_heads(const mp_graph *g, const mp_value *v, int rank, int64_t heads, const char *heads_attr,
                      const char *what, heads_view *o, mp_err *err)
{
    o->batch = o->heads = o->seq = o->head_size = MP_DIM_UNKNOWN;
    if (heads > 0) o->heads = mp_dim_of(heads);
    if (!v || v->rank < 0) return 0;
    if (rank ? v->rank != rank : v->rank != 3 && v->rank != 4)
        return rank ? mp_fail(err, "%s has rank %d, expected %d", what, v->rank, rank)
                    : mp_fail(err, "%s has rank %d, expected 3 or 4", what, v->rank);
    o->batch = v->dims[0];
    if (v->rank == 3 && heads <= 0) return mp_fail(err, "a 3-D %s needs attribute '%s'", what, heads_attr);
    if (v->rank == 4) {
        o->heads = v->dims[1];
        o->seq = v->dims[2];
        o->head_size = v->dims[3];
        return 0;
    }
    o->seq = v->dims[1];
    return dim_split(g, v->dims[2], heads, what, &o->head_size, err);
}

/* Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen ->
 * Y, present_key, present_value, qk_matmul_output. 3-D inputs are packed
 * [batch, seq, heads * head_size] with q_num_heads / kv_num_heads given. */
int shape_Attention(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *q = mp_in(g, n, 0), *k = mp_in(g, n, 1), *v = mp_in(g, n, 2);
    const mp_value *pk = mp_in(g, n, 4), *pv = mp_in(g, n, 5);
    if (!q || !k || !v) return mp_fail(err, "missing input %s", !q ? "Q" : !k ? "K" : "V");
    if (q->rank < 0) {
        for (int i = 0; i < 4; i++) nn_set_unknown(g, n, i, i == 1 ? k->dtype : i == 2 ? v->dtype : q->dtype);
        return 0;
    }
    int64_t hq = mp_attr_int(n, "q_num_heads", 0), hkv = mp_attr_int(n, "kv_num_heads", 0);
    heads_view vq, vk, vv, vpk, vpv;
    if (view_heads(g, q, 0, hq, "q_num_heads", "Q", &vq, err) ||
        view_heads(g, k, 0, hkv, "kv_num_heads", "K", &vk, err) ||
        view_heads(g, v, 0, hkv, "kv_num_heads", "V", &vv, err) || view_heads(g, pk, 4, 0, "", "past_key", &vpk, err) ||
        view_heads(g, pv, 4, 0, "", "past_value", &vpv, err))
        return -1;
    if (nn_check_dim(g, vk.head_size, vq.head_size, "K's head size", err) ||
        nn_check_dim(g, vv.seq, vk.seq, "V's sequence length", err) ||
        (pk && nn_check_dim(g, vpk.head_size, vk.head_size, "past_key's head size", err)) ||
        (pv && nn_check_dim(g, vpv.head_size, vv.head_size, "past_value's head size", err)))
        return -1;
    mp_dim kv_heads = nn_dim_merge(vk.heads, vv.heads);
    if (vq.heads.v > 0 && kv_heads.v > 0 && vq.heads.v % kv_heads.v)
        return mp_fail(err, "q_num_heads %lld is not a multiple of kv_num_heads %lld", (long long)vq.heads.v,
                       (long long)kv_heads.v);
    mp_dim batch = nn_dim_merge(vq.batch, nn_dim_merge(vk.batch, vv.batch));
    mp_dim past = pk ? vpk.seq : mp_dim_of(0);
    mp_dim total = dim_add(past, vk.seq);

    mp_dim y[4];
    if (q->rank == 4) {
        y[0] = vq.batch, y[1] = vq.heads, y[2] = vq.seq, y[3] = vv.head_size;
    } else {
        y[0] = vq.batch, y[1] = vq.seq, y[2] = nn_dim_affine(vv.head_size, hq, 0);
    }
    mp_set_out(g, n, 0, q->dtype, q->rank, y);
    mp_dim pkd[4] = {batch, kv_heads, total, vk.head_size}, pvd[4] = {batch, kv_heads, total, vv.head_size};
    mp_set_out(g, n, 1, k->dtype, 4, pkd);
    mp_set_out(g, n, 2, v->dtype, 4, pvd);
    mp_dim qk[4] = {batch, vq.heads, vq.seq, total};
    return mp_set_out(g, n, 3, q->dtype, 4, qk);
}

/* AttentionGrad(dY, Q, K, V, attn_mask, past_key, past_value, nonpad){Attention's attributes} -> dQ like Q,
 * dK like K, dV like V, and (optional) dMask [B, Hq, Sq, past + S] (passes/grad_nn.c). */
int shape_AttentionGrad(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *q = mp_in(g, n, 1), *k = mp_in(g, n, 2), *v = mp_in(g, n, 3), *pk = mp_in(g, n, 5);
    if (!mp_in(g, n, 0) || !q || !k || !v) return mp_fail(err, "takes dY, Q, K and V");
    for (int i = 0; i < 3 && i < n->nout; i++) {
        const mp_value *x = i == 0 ? q : i == 1 ? k : v;
        if (mp_set_out_like(g, n, i, x->dtype, x)) return -1;
    }
    if (n->nout < 4 || n->out[3] < 0) return 0;
    heads_view vq, vk, vpk;
    if (view_heads(g, q, 0, mp_attr_int(n, "q_num_heads", 0), "q_num_heads", "Q", &vq, err) ||
        view_heads(g, k, 0, mp_attr_int(n, "kv_num_heads", 0), "kv_num_heads", "K", &vk, err) ||
        view_heads(g, pk, 4, 0, "", "past_key", &vpk, err))
        return -1;
    mp_dim qk[4] = {vq.batch, vq.heads, vq.seq, dim_add(pk ? vpk.seq : mp_dim_of(0), vk.seq)};
    return mp_set_out(g, n, 3, q->dtype, 4, qk);
}

/* Q[B, Hq, L, E], K[B, Hkv, S, E], V[B, Hkv, S, Ev] -> Y[B, Hq, L, Ev] */
int shape_FlexAttention(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *q = mp_in(g, n, 0), *k = mp_in(g, n, 1), *v = mp_in(g, n, 2);
    if (!q || !k || !v) return mp_fail(err, "missing input %s", !q ? "Q" : !k ? "K" : "V");
    heads_view vq, vk, vv;
    if (view_heads(g, q, 4, 0, "", "Q", &vq, err) || view_heads(g, k, 4, 0, "", "K", &vk, err) ||
        view_heads(g, v, 4, 0, "", "V", &vv, err))
        return -1;
    if (nn_check_dim(g, vk.head_size, vq.head_size, "K's head size", err) ||
        nn_check_dim(g, vv.seq, vk.seq, "V's sequence length", err))
        return -1;
    if (vq.heads.v > 0 && vk.heads.v > 0 && vq.heads.v % vk.heads.v)
        return mp_fail(err, "Q's %lld heads are not a multiple of K's %lld", (long long)vq.heads.v,
                       (long long)vk.heads.v);
    mp_dim y[4] = {vq.batch, vq.heads, vq.seq, vv.head_size};
    return mp_set_out(g, n, 0, q->dtype, 4, y);
}

/* input, cos_cache, sin_cache, position_ids -> output like input */
int shape_RotaryEmbedding(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0);
    if (!x) return mp_fail(err, "missing input X");
    if (x->rank >= 0 && x->rank != 3 && x->rank != 4)
        return mp_fail(err, "input has rank %d; expected 3 or 4", x->rank);
    if (x->rank == 3 && mp_attr_int(n, "num_heads", 0) <= 0)
        return mp_fail(err, "attribute 'num_heads' is required for a 3-D input");
    return mp_set_out_like(g, n, 0, x->dtype, x);
}

/* query[B, T, Hq * dk], key[B, T, Hk * dk], value[B, T, Hkv * dv],
 * past_state, decay, beta -> output[B, T, Hq * dv], present_state[B, Hkv, dk, dv] */
int shape_LinearAttention(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *q = mp_in(g, n, 0), *k = mp_in(g, n, 1), *v = mp_in(g, n, 2), *past = mp_in(g, n, 3);
    if (!q || !k || !v) return mp_fail(err, "missing input %s", !q ? "query" : !k ? "key" : "value");
    int64_t hq, hkv;
    if (read_heads(n, "q_num_heads", &hq, err) || read_heads(n, "kv_num_heads", &hkv, err)) return -1;
    if (hq % hkv)
        return mp_fail(err, "q_num_heads %lld is not a multiple of kv_num_heads %lld", (long long)hq, (long long)hkv);
    const char *rule = mp_attr_str(n, "update_rule", "gated_delta");
    if (strcmp(rule, "linear") && strcmp(rule, "gated") && strcmp(rule, "delta") && strcmp(rule, "gated_delta"))
        return mp_fail(err, "update_rule '%s' is not one of linear, gated, delta, gated_delta", rule);
    heads_view vq, vv;
    if (nn_check_rank(k, 3, "key", err) || view_heads(g, q, 3, hq, "q_num_heads", "query", &vq, err) ||
        view_heads(g, v, 3, hkv, "kv_num_heads", "value", &vv, err))
        return -1;
    mp_dim batch = nn_dim_merge(vq.batch, vv.batch), dk = vq.head_size, dv = vv.head_size;
    if (past && past->rank >= 0) {
        if (past->rank != 4) return mp_fail(err, "past_state has rank %d; expected (B, H_kv, d_k, d_v)", past->rank);
        if (nn_check_dim(g, past->dims[1], mp_dim_of(hkv), "past_state's heads", err) ||
            nn_check_dim(g, past->dims[2], dk, "past_state's d_k", err) ||
            nn_check_dim(g, past->dims[3], dv, "past_state's d_v", err))
            return -1;
        dk = nn_dim_merge(dk, past->dims[2]);
        dv = nn_dim_merge(dv, past->dims[3]);
    }
    if (q->rank == 3 && v->rank == 3 && nn_check_dim(g, v->dims[1], q->dims[1], "value's sequence length", err))
        return -1;
    mp_dim out[3] = {vq.batch, vq.seq, nn_dim_affine(dv, hq, 0)};
    mp_set_out(g, n, 0, q->dtype, q->rank < 0 && v->rank < 0 ? -1 : 3, out);
    mp_dim st[4] = {batch, mp_dim_of(hkv), dk, dv};
    return mp_set_out(g, n, 1, past ? past->dtype : q->dtype, 4, st);
}

/* input[B, C, L], weight[C, 1, k], bias[C], past_state[B, C, k - 1] ->
 * output like input, present_state[B, C, k - 1] */
int shape_CausalConvWithState(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *x = mp_in(g, n, 0), *w = mp_in(g, n, 1), *past = mp_in(g, n, 3);
    if (!x || !w) return mp_fail(err, "missing input %s", !x ? "input" : "weight");
    if (nn_check_rank(x, 3, "input", err) || nn_check_rank(w, 3, "weight", err) ||
        nn_check_rank(past, 3, "past_state", err))
        return -1;
    const char *act = mp_attr_str(n, "activation", "none");
    if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish"))
        return mp_fail(err, "activation '%s' is not one of none, silu, swish", act);
    mp_dim batch = x->rank == 3 ? x->dims[0] : MP_DIM_UNKNOWN, ch = x->rank == 3 ? x->dims[1] : MP_DIM_UNKNOWN;
    mp_dim state = MP_DIM_UNKNOWN;
    if (w->rank == 3) {
        if (nn_check_dim(g, w->dims[0], ch, "weight's channels", err) ||
            nn_check_dim(g, w->dims[1], mp_dim_of(1), "weight dim 1 (depthwise)", err))
            return -1;
        ch = nn_dim_merge(ch, w->dims[0]);
        if (w->dims[2].v == 0) return mp_fail(err, "weight has kernel size 0");
        state = nn_dim_affine(w->dims[2], 1, -1);
    }
    if (past && past->rank == 3) {
        if (nn_check_dim(g, past->dims[2], state, "past_state's length (kernel size - 1)", err) ||
            nn_check_dim(g, past->dims[1], ch, "past_state's channels", err))
            return -1;
        state = nn_dim_merge(state, past->dims[2]);
        batch = nn_dim_merge(batch, past->dims[0]);
    }
    mp_set_out_like(g, n, 0, x->dtype, x);
    mp_dim st[3] = {batch, ch, state};
    return mp_set_out(g, n, 1, x->dtype, 3, st);
}

/* Y = Swish(A) * B with A and B of one shape (no broadcasting). */
int shape_SwiGLU(mp_graph *g, mp_node *n, mp_err *err)
{
    const mp_value *a = mp_in(g, n, 0), *b = mp_in(g, n, 1);
    if (!a || !b) return mp_fail(err, "missing input %s", !a ? "A" : "B");
    if (a->rank >= 0 && b->rank >= 0) {
        if (a->rank != b->rank)
            return mp_fail(err, "A has rank %d but B has rank %d; they must match", a->rank, b->rank);
        mp_dim dims[MP_MAX_RANK];
        for (int i = 0; i < a->rank; i++) {
            if (nn_check_dim(g, b->dims[i], a->dims[i], "a dim of B (must equal A's)", err)) return -1;
            dims[i] = nn_dim_merge(a->dims[i], b->dims[i]);
        }
        return mp_set_out(g, n, 0, a->dtype, a->rank, dims);
    }
    return mp_set_out_like(g, n, 0, a->dtype, a->rank >= 0 ? a : b);
}
