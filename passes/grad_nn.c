/* grad_nn.c - gradient rules of the linear-algebra, convolution, pooling,
 * normalization, reduction and loss ops. Comments name the forward tensors
 * each rule reads. */
#include <string.h>

#include "passes/autodiff.h"

#define NODE (&ad->g->nodes[node])
#define IN(k) (k < NODE->nin ? NODE->in[k] : -1)
#define OUT(k) (k < NODE->nout ? NODE->out[k] : -1)

/* A memplan op whose output shape is given by the attribute `shape` (v's shape). */
static int32_t to_shape_of(mp_ad *ad, const char *op, int nin, const int32_t *in, int32_t v, int32_t copy_from)
{
    int64_t dims[MP_MAX_RANK];
    int rank;
    if (ad_known_dims(ad, v, dims, &rank)) return -1;
    int32_t out;
    int32_t n = ad_add1(ad, op, "memplan", nin, in, "grad_x", &out);
    if (copy_from >= 0) ad_attr_copy(ad->g, &ad->g->nodes[n], copy_from);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", dims, rank);
    return ad_infer(ad, n) ? -1 : out;
}

/* MatMul: dA reads B, dB reads A; both reduce over broadcast batch dims. A
 * 1-D operand (numpy's promotion: A [K] is [1, K], B [K] is [K, 1]) needs
 * nothing of its own here: the kernels promote it again from the shapes. */
int mp_grad_MatMul(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad->g->values[IN(0)].rank < 1 || ad->g->values[IN(1)].rank < 1)
        return mp_fail(ad->err, "MatMul operands must have rank 1 or more");
    if (ad_needs(ad, IN(0))) {
        int32_t in[2] = {dy[0], IN(1)};
        if (ad_give(ad, IN(0), to_shape_of(ad, "MatMulGradA", 2, in, IN(0), -1), true)) return -1;
    }
    if (ad_needs(ad, IN(1))) {
        int32_t in[2] = {IN(0), dy[0]};
        if (ad_give(ad, IN(1), to_shape_of(ad, "MatMulGradB", 2, in, IN(1), -1), true)) return -1;
    }
    return 0;
}

/* A Gemm computing alpha * op(P) op(Q). */
static int32_t gemm(mp_ad *ad, int32_t p, int tp, int32_t q, int tq, float alpha)
{
    int32_t in[2] = {p, q}, out;
    int32_t n = ad_add1(ad, "Gemm", "", 2, in, "grad_gemm", &out);
    mp_node *m = &ad->g->nodes[n];
    ad_attr_int(ad->g, m, "transA", tp);
    ad_attr_int(ad->g, m, "transB", tq);
    if (alpha != 1.0f) ad_attr_float(ad->g, m, "alpha", alpha);
    return ad_infer(ad, n) ? -1 : out;
}

/* Gemm (Y = alpha op(A) op(B) + beta C): dA reads B, dB reads A, dC reads nothing.
 *   dA = transA ? op(B) dY^T : dY op(B)^T      dB = transB ? dY^T op(A) : op(A)^T dY */
int mp_grad_Gemm(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int ta = (int)mp_attr_int(NODE, "transA", 0), tb = (int)mp_attr_int(NODE, "transB", 0);
    float alpha = mp_attr_float(NODE, "alpha", 1.0f), beta = mp_attr_float(NODE, "beta", 1.0f);
    int32_t a = IN(0), b = IN(1), c = IN(2);
    if (ad_needs(ad, a)) {
        int32_t g = ta ? gemm(ad, b, tb, dy[0], 1, alpha) : gemm(ad, dy[0], 0, b, !tb, alpha);
        if (ad_give(ad, a, g, true)) return -1;
    }
    if (ad_needs(ad, b)) {
        int32_t g = tb ? gemm(ad, dy[0], 1, a, ta, alpha) : gemm(ad, a, !ta, dy[0], 0, alpha);
        if (ad_give(ad, b, g, true)) return -1;
    }
    if (ad_needs(ad, c)) {
        int32_t g = dy[0];
        bool own = false;
        if (beta != 1.0f) {
            int32_t out;
            int32_t n = ad_add1(ad, "Scale", "memplan", 1, &dy[0], "grad_scale", &out);
            ad_attr_float(ad->g, &ad->g->nodes[n], "alpha", beta);
            if (ad_infer(ad, n)) return -1;
            g = out;
            own = true;
        }
        if (ad_give_sum(ad, c, g, own)) return -1;
    }
    return 0;
}

/* Conv: dX reads W, dW reads X, dB reads nothing; one ConvGrad node. */
int mp_grad_Conv(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[3] = {dy[0], IN(0), IN(1)};
    static const char *const suffix[3] = {"grad_x", "grad_w", "grad_b"};
    return ad_grad_node(ad, node, "ConvGrad", 3, in, 3, suffix);
}

/* Copies the window attributes ConvTranspose and Conv share (strides,
 * dilations, group) from node src and sets explicit pads. */
static void conv_attrs(mp_graph *g, mp_node *n, const mp_node *src, const int64_t *pads, int nsp)
{
    static const char *const names[] = {"strides", "dilations"};
    for (int i = 0; i < 2; i++) {
        const int64_t *v;
        int c = mp_attr_ints(src, names[i], &v);
        if (c >= 0) ad_attr_ints(g, n, names[i], v, c);
    }
    ad_attr_int(g, n, "group", mp_attr_int(src, "group", 1));
    ad_attr_ints(g, n, "pads", pads, 2 * nsp);
}

/* ConvTranspose (the adjoint of a Conv with the same W, strides, dilations,
 * pads and groups): dX = Conv(dY, W) reads W; dW = ConvGrad(X, dY, W)'s
 * weight gradient (the Conv's "dY" is X) reads X; dB sums dY over N and space.
 * Pads are made explicit, derived from the output size as the kernel does
 * for output_shape and SAME. */
int mp_grad_ConvTranspose(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    int64_t xd[MP_MAX_RANK], wd[MP_MAX_RANK], yd[MP_MAX_RANK];
    int xr, wr, yr;
    if (ad_known_dims(ad, IN(0), xd, &xr) || ad_known_dims(ad, IN(1), wd, &wr) || ad_known_dims(ad, OUT(0), yd, &yr))
        return -1;
    int nsp = xr - 2;
    if (nsp < 1 || wr != xr || yr != xr) return mp_fail(ad->err, "X, W and Y must have one rank of 3 or more");
    const int64_t *s, *d, *p, *op;
    int ns = mp_attr_ints(NODE, "strides", &s), nd = mp_attr_ints(NODE, "dilations", &d);
    int np = mp_attr_ints(NODE, "pads", &p), nop = mp_attr_ints(NODE, "output_padding", &op);
    const char *ap = mp_attr_str(NODE, "auto_pad", "NOTSET");
    bool derived = mp_node_attr(NODE, "output_shape") || !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    int64_t pads[2 * MP_MAX_RANK];
    for (int i = 0; i < nsp; i++) {
        int64_t si = ns == nsp ? s[i] : 1, di = nd == nsp ? d[i] : 1, opad = nop == nsp ? op[i] : 0;
        int64_t full = si * (xd[2 + i] - 1) + opad + (wd[2 + i] - 1) * di + 1;
        if (derived) {
            int64_t total = full - yd[2 + i], half = total >= 0 ? total / 2 : -((1 - total) / 2);
            pads[i] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
            pads[nsp + i] = total - pads[i];
        } else {
            pads[i] = np == 2 * nsp && strcmp(ap, "VALID") ? p[i] : 0;
            pads[nsp + i] = np == 2 * nsp && strcmp(ap, "VALID") ? p[nsp + i] : 0;
        }
        if (pads[i] < 0 || pads[nsp + i] < 0)
            return mp_fail(ad->err, "spatial dim %d: output larger than the kernel covers (negative pads)", i);
    }
    if (ad_needs(ad, IN(0))) {
        int32_t in[2] = {dy[0], IN(1)}, out;
        int32_t n = ad_add1(ad, "Conv", "", 2, in, "grad_x", &out);
        conv_attrs(g, &g->nodes[n], NODE, pads, nsp);
        if (ad_infer(ad, n) || ad_give(ad, IN(0), out, true)) return -1;
    }
    if (ad_needs(ad, IN(1))) {
        int32_t in[3] = {IN(0), dy[0], IN(1)}, out[3] = {-1, ad_value(ad, "grad_w", "", MP_ROLE_TRANSIENT), -1};
        int32_t n = ad_add(ad, "ConvGrad", "memplan", 3, in, 3, out);
        conv_attrs(g, &g->nodes[n], NODE, pads, nsp);
        if (ad_infer(ad, n) || ad_give(ad, IN(1), out[1], true)) return -1;
    }
    if (ad_needs(ad, IN(2))) { /* [N, M, ..] summed to [M, 1, ..], then [M] */
        int64_t to[MP_MAX_RANK];
        to[0] = yd[1];
        for (int i = 1; i < yr - 1; i++) to[i] = 1;
        int32_t sum, n = ad_add1(ad, "SumToShape", "memplan", 1, &dy[0], "grad_b", &sum);
        ad_attr_ints(g, &g->nodes[n], "shape", to, yr - 1);
        if (ad_infer(ad, n)) return -1;
        int32_t in[2] = {sum, ad_const_ints(ad, to, 1)};
        if (in[1] < 0 || ad_give(ad, IN(2), ad_emit(ad, "Reshape", "", 2, in, "grad_b"), true)) return -1;
    }
    return 0;
}

/* Normalizations: one node of (dY, X, scale[, mean, var]) giving dX, dScale, dBias. */
static int norm(mp_ad *ad, int32_t node, const int32_t *dy, const char *op, int nin)
{
    int32_t in[5] = {dy[0], IN(0), IN(1), IN(3), IN(4)};
    static const char *const suffix[3] = {"grad_x", "grad_scale", "grad_bias"};
    return ad_grad_node(ad, node, op, nin, in, 3, suffix);
}

/* BatchNormalization: reads X and scale (batch statistics are recomputed from
 * X); in inference mode also the running mean and variance. */
int mp_grad_BatchNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return norm(ad, node, dy, "BatchNormalizationGrad", 5);
}

/* LayerNormalization: reads X and scale (mean and 1/std recomputed from X). */
int mp_grad_LayerNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return norm(ad, node, dy, "LayerNormalizationGrad", 3);
}

/* MaxPool: reads X and the arg-max Indices (int64, Y's shape), as PyTorch's
 * max_pool2d_with_indices saves both; a MaxPool without an Indices output gets one. */
int mp_grad_MaxPool(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t idx = ad_extra_output(ad, node, 1, "_indices", MP_INT64, OUT(0));
    int32_t in[3] = {dy[0], IN(0), idx};
    return ad_grad_one(ad, node, "MaxPoolGrad", "memplan", 3, in, "grad_x");
}

/* AveragePool, GlobalAveragePool: read nothing (X's shape only). */
int mp_grad_AveragePool(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), to_shape_of(ad, "AveragePoolGrad", 1, &dy[0], IN(0), node), true);
}

int mp_grad_GlobalAveragePool(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), to_shape_of(ad, "GlobalAveragePoolGrad", 1, &dy[0], IN(0), -1), true);
}

/* ReduceMean, ReduceSum: read nothing (X's shape; axes as attribute or input). */
static int reduce(mp_ad *ad, int32_t node, const int32_t *dy, const char *op)
{
    int32_t in[2] = {dy[0], IN(1)};
    return ad_give(ad, IN(0), to_shape_of(ad, op, IN(1) >= 0 ? 2 : 1, in, IN(0), node), true);
}

int mp_grad_ReduceMean(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce(ad, node, dy, "ReduceMeanGrad"); }
int mp_grad_ReduceSum(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce(ad, node, dy, "ReduceSumGrad"); }

/* LRN: reads X; LRNGrad(dY, X) recomputes the window sums (the lead registers
 * the LRNGrad row in grad.def and its kernel mp_cpu_LRNGrad in kernels.def). */
int mp_grad_LRN(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], IN(0)};
    return ad_grad_one(ad, node, "LRNGrad", "memplan", 2, in, "grad_x");
}

/* NegativeLogLikelihoodLoss: -w dLoss / norm at each target (reduction, ignore_index as the forward's).
 * Reads the target and the weights. */
int mp_grad_NegativeLogLikelihoodLoss(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[4] = {dy[0], IN(0), IN(1), IN(2)};
    return ad_grad_one(ad, node, "NegativeLogLikelihoodGrad", "memplan", IN(2) >= 0 ? 4 : 3, in, "grad_x");
}

/* SoftmaxCrossEntropyLoss: reads log_prob (output 1) and the labels. A loss
 * exported without log_prob (PyTorch's CrossEntropyLoss) gets it, of the
 * scores' shape and type, as a training Dropout gets its mask. */
int mp_grad_SoftmaxCrossEntropyLoss(mp_ad *ad, int32_t node, const int32_t *dy)
{
    ad_extra_output(ad, node, 1, "_log_prob", ad->g->values[IN(0)].dtype, IN(0));
    int32_t in[4] = {dy[0], OUT(1), IN(1), IN(2)};
    return ad_grad_one(ad, node, "SoftmaxCrossEntropyGrad", "memplan", IN(2) >= 0 ? 4 : 3, in, "grad_logits");
}

/* ---- the other reductions: forward ops over dY and Y reshaped to keepdims ---- */

static int32_t emit2(mp_ad *ad, const char *op, int32_t a, int32_t b)
{
    int32_t in[2] = {a, b};
    return a < 0 || b < 0 ? -1 : ad_emit(ad, op, "", 2, in, "grad_reduce");
}
static int32_t emit1(mp_ad *ad, const char *op, int32_t a) { return a < 0 ? -1 : ad_emit(ad, op, "", 1, &a, "grad_reduce"); }

/* X's dims with the reduced axes 1 (the keepdims shape): axes as input 1 or attribute, negative allowed;
 * none given reduces every axis unless noop_with_empty_axes. */
static int keep_dims(mp_ad *ad, int32_t node, int64_t *kd, int *rank)
{
    if (ad_known_dims(ad, IN(0), kd, rank)) return -1;
    int64_t axes[MP_MAX_RANK];
    const int64_t *attr;
    int na;
    const mp_tensor *t = IN(1) >= 0 ? ad->g->values[IN(1)].konst : NULL;
    if (IN(1) >= 0) {
        if (!t || t->numel > MP_MAX_RANK) return mp_fail(ad->err, "the axes input must be a constant");
        na = (int)t->numel;
        for (int i = 0; i < na; i++) axes[i] = mp_tensor_get_i64(t, i);
    } else {
        na = mp_attr_ints(NODE, "axes", &attr);
        if (na > MP_MAX_RANK) return mp_fail(ad->err, "too many axes");
        for (int i = 0; i < na; i++) axes[i] = attr[i];
    }
    if (na <= 0 && mp_attr_int(NODE, "noop_with_empty_axes", 0)) return 0;
    for (int a = 0; na <= 0 && a < *rank; a++) kd[a] = 1;
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + *rank : axes[i];
        if (a < 0 || a >= *rank) return mp_fail(ad->err, "axis %lld out of range", (long long)axes[i]);
        kd[a] = 1;
    }
    return 0;
}

/* v (the reduction's output or its gradient) in the keepdims shape, so it broadcasts over X. */
static int32_t kept(mp_ad *ad, int32_t v, const int64_t *kd, int rank)
{
    return emit2(ad, "Reshape", v, ad_const_ints(ad, kd, rank));
}

/* The gradient of a max or min over the axes that are 1 in kd: g (dY, keepdims shape) shared evenly among
 * the elements of X equal to the extreme y (keepdims shape). */
static int32_t extreme_grad(mp_ad *ad, int32_t x, int32_t y, int32_t g, const int64_t *kd, int rank)
{
    int32_t eq = emit2(ad, "Equal", x, y), m;
    int32_t n = ad_add1(ad, "Cast", "", 1, &eq, "grad_reduce", &m);
    ad_attr_int(ad->g, &ad->g->nodes[n], "to", ad->g->values[x].dtype);
    if (eq < 0 || ad_infer(ad, n)) return -1;
    int32_t cnt, c = ad_add1(ad, "SumToShape", "memplan", 1, &m, "grad_reduce", &cnt);
    ad_attr_ints(ad->g, &ad->g->nodes[c], "shape", kd, rank);
    if (ad_infer(ad, c)) return -1;
    return emit2(ad, "Div", emit2(ad, "Mul", m, g), cnt);
}

/* ReduceMax, ReduceMin: dY shared among the elements equal to the extreme
 * (PyTorch's amax/amin split ties evenly). ReduceSumSquare 2 X dY, ReduceL1
 * sign(X) dY, ReduceL2 X / Y dY, ReduceLogSumExp exp(X - Y) dY, ReduceLogSum
 * dY / exp(Y), ReduceProd Y / X dY (X = 0 is not handled). All read X; the
 * ones with Y in them read Y. */
static int reduce_other(mp_ad *ad, int32_t node, const int32_t *dy, const char *kind)
{
    int64_t kd[MP_MAX_RANK];
    int rank;
    if (keep_dims(ad, node, kd, &rank)) return -1;
    bool reads_y = strcmp(kind, "L1") && strcmp(kind, "SumSquare");
    int32_t x = IN(0), g = kept(ad, dy[0], kd, rank), y = reads_y ? kept(ad, OUT(0), kd, rank) : -1, d;
    if (!strcmp(kind, "Extreme")) {
        d = extreme_grad(ad, x, y, g, kd, rank);
    } else if (!strcmp(kind, "SumSquare")) {
        d = emit2(ad, "Mul", emit2(ad, "Mul", x, g), ad_const_scalar(ad, ad->g->values[x].dtype, 2));
    } else if (!strcmp(kind, "L1")) {
        d = emit2(ad, "Mul", emit1(ad, "Sign", x), g);
    } else if (!strcmp(kind, "L2")) {
        d = emit2(ad, "Mul", emit2(ad, "Div", x, y), g);
    } else if (!strcmp(kind, "LogSumExp")) {
        d = emit2(ad, "Mul", emit1(ad, "Exp", emit2(ad, "Sub", x, y)), g);
    } else if (!strcmp(kind, "LogSum")) {
        d = emit2(ad, "Mul", g, emit1(ad, "Exp", emit1(ad, "Neg", y)));
    } else { /* Prod */
        d = emit2(ad, "Mul", emit2(ad, "Div", y, x), g);
    }
    return ad_give(ad, x, d, true);
}

int mp_grad_ReduceMax(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "Extreme"); }
int mp_grad_ReduceMin(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "Extreme"); }
int mp_grad_ReduceSumSquare(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "SumSquare"); }
int mp_grad_ReduceL1(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "L1"); }
int mp_grad_ReduceL2(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "L2"); }
int mp_grad_ReduceLogSumExp(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "LogSumExp"); }
int mp_grad_ReduceLogSum(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "LogSum"); }
int mp_grad_ReduceProd(mp_ad *ad, int32_t node, const int32_t *dy) { return reduce_other(ad, node, dy, "Prod"); }

/* InstanceNormalization, GroupNormalization: read X and scale (each group's
 * mean and 1/std recomputed from X, as LayerNormalization's). */
int mp_grad_InstanceNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return norm(ad, node, dy, "InstanceNormalizationGrad", 3);
}
int mp_grad_GroupNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return norm(ad, node, dy, "GroupNormalizationGrad", 3);
}

/* GlobalMaxPool: a ReduceMax over the spatial axes (Y is already [N, C, 1, ..]). Reads X and Y. */
int mp_grad_GlobalMaxPool(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int64_t kd[MP_MAX_RANK];
    int rank;
    if (ad_known_dims(ad, IN(0), kd, &rank)) return -1;
    for (int a = 2; a < rank; a++) kd[a] = 1;
    return ad_give(ad, IN(0), extreme_grad(ad, IN(0), OUT(0), dy[0], kd, rank), true);
}

/* RMSNormalization: reads X and scale (1/rms recomputed from X). */
int mp_grad_RMSNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return norm(ad, node, dy, "RMSNormalizationGrad", 3);
}

/* Attention (opset 23, 24): AttentionGrad(dY, Q, K, V, mask, past_key, past_value, nonpad) -> dQ, dK, dV,
 * and the additive mask's gradient when it needs one (summed to the mask's shape). Reads Q, K, V and the
 * mask: each row's softmax is recomputed, as a memory-efficient attention backward does. The gradient
 * through present_key / present_value / qk_matmul_output, and into the past cache, is not supported. */
int mp_grad_Attention(mp_ad *ad, int32_t node, const int32_t *dy)
{
    for (int k = 1; k < 4 && k < NODE->nout; k++)
        if (dy[k] >= 0) return mp_fail(ad->err, "the gradient through output %d (present_key, present_value or qk_matmul_output) is not supported", k);
    if (dy[0] < 0) return 0;
    if (ad_needs(ad, IN(4)) || ad_needs(ad, IN(5))) return mp_fail(ad->err, "the gradient of the past key/value cache is not supported");
    int32_t in[8] = {dy[0], IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6)}, out[4] = {-1, -1, -1, -1};
    static const char *const name[4] = {"grad_q", "grad_k", "grad_v", "grad_mask"};
    for (int k = 0; k < 4; k++)
        if (ad_needs(ad, IN(k))) out[k] = ad_value(ad, name[k], "", MP_ROLE_TRANSIENT);
    int nin = 8;
    while (nin > 4 && in[nin - 1] < 0) nin--;
    int32_t n = ad_add(ad, "AttentionGrad", "memplan", nin, in, out[3] >= 0 ? 4 : 3, out);
    ad_attr_copy(ad->g, &ad->g->nodes[n], node);
    if (ad_infer(ad, n)) return -1;
    for (int k = 0; k < 3; k++)
        if (out[k] >= 0 && ad_give(ad, IN(k), out[k], true)) return -1;
    return out[3] >= 0 ? ad_give_sum(ad, IN(3), out[3], true) : 0;
}

/* RotaryEmbedding: each pair is rotated by its position's angle, so the gradient is the rotation back:
 * RotaryEmbedding(dY, cos, -sin, position_ids) with the same attributes (the unrotated tail passes through
 * both ways). Reads the caches and position ids. */
int mp_grad_RotaryEmbedding(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(1)) || ad_needs(ad, IN(2))) return mp_fail(ad->err, "the gradient of the cos/sin caches is not supported");
    int32_t sin = IN(2), in[4] = {dy[0], IN(1), sin < 0 ? -1 : ad_emit(ad, "Neg", "", 1, &sin, "grad_rotary"), IN(3)};
    if (in[2] < 0) return -1;
    return ad_grad_one(ad, node, "RotaryEmbedding", "", IN(3) >= 0 ? 4 : 3, in, "grad_rotary");
}

/* v summed to the keepdims shape kd (SumToShape). */
static int32_t sum_keep(mp_ad *ad, int32_t v, const int64_t *kd, int rank)
{
    if (v < 0) return -1;
    int32_t out, n = ad_add1(ad, "SumToShape", "memplan", 1, &v, "grad_norm", &out);
    ad_attr_ints(ad->g, &ad->g->nodes[n], "shape", kd, rank);
    return ad_infer(ad, n) ? -1 : out;
}

/* LpNormalization: Y = X / ||X||_p along the axis, so dX = (dY - d sum(dY Y)) / ||X||_p,
 * d = Y for p = 2 and sign(X) for p = 1 (the norm recomputed from X). Reads X and Y. */
int mp_grad_LpNormalization(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int64_t p = mp_attr_int(NODE, "p", 2), axis = mp_attr_int(NODE, "axis", -1), kd[MP_MAX_RANK];
    int rank;
    if (p != 1 && p != 2) return mp_fail(ad->err, "p must be 1 or 2, not %lld", (long long)p);
    if (ad_known_dims(ad, IN(0), kd, &rank)) return -1;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return mp_fail(ad->err, "axis out of range");
    kd[axis] = 1;
    int32_t x = IN(0), y = OUT(0);
    int32_t s = sum_keep(ad, emit2(ad, "Mul", dy[0], y), kd, rank);
    int32_t norm = p == 2 ? emit1(ad, "Sqrt", sum_keep(ad, emit2(ad, "Mul", x, x), kd, rank))
                          : sum_keep(ad, emit1(ad, "Abs", x), kd, rank);
    int32_t d = p == 2 ? y : emit1(ad, "Sign", x);
    return ad_give(ad, x, emit2(ad, "Div", emit2(ad, "Sub", dy[0], emit2(ad, "Mul", d, s)), norm), true);
}
