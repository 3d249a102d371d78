/* grad_elementwise.c - gradient rules of elementwise ops. Broadcast inputs
 * get their gradient summed back to their shape (ad_give_sum). Each comment
 * names the forward tensors the rule reads (what the planner must keep). */
#include <string.h>

#include "passes/autodiff.h"

#define NODE (&ad->g->nodes[node])
#define IN(k) (k < NODE->nin ? NODE->in[k] : -1)
#define OUT(k) (k < NODE->nout ? NODE->out[k] : -1)

/* Add: reads nothing. */
int mp_grad_Add(mp_ad *ad, int32_t node, const int32_t *dy)
{
    for (int k = 0; k < 2; k++)
        if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), dy[0], false)) return -1;
    return 0;
}

/* Sum (n-ary Add): reads nothing; each input gets dY summed to its shape. */
int mp_grad_Sum(mp_ad *ad, int32_t node, const int32_t *dy)
{
    for (int k = 0; k < ad->g->nodes[node].nin; k++)
        if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), dy[0], false)) return -1;
    return 0;
}

/* Sub: reads nothing. */
int mp_grad_Sub(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(0)) && ad_give_sum(ad, IN(0), dy[0], false)) return -1;
    if (ad_needs(ad, IN(1))) {
        int32_t neg = ad_emit(ad, "Neg", "", 1, &dy[0], "grad_neg");
        if (ad_give_sum(ad, IN(1), neg, true)) return -1;
    }
    return 0;
}

/* Neg: reads nothing. */
int mp_grad_Neg(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), ad_emit(ad, "Neg", "", 1, &dy[0], "grad_neg"), true);
}

/* Mul: reads both inputs (each gradient needs the other factor). */
int mp_grad_Mul(mp_ad *ad, int32_t node, const int32_t *dy)
{
    for (int k = 0; k < 2; k++) {
        if (!ad_needs(ad, IN(k))) continue;
        int32_t in[2] = {dy[0], IN(1 - k)};
        if (ad_give_sum(ad, IN(k), ad_emit(ad, "Mul", "", 2, in, "grad_mul"), true)) return -1;
    }
    return 0;
}

/* Div: reads B and the output Y (dB = -dY * Y / B). */
int mp_grad_Div(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(0))) {
        int32_t in[2] = {dy[0], IN(1)};
        if (ad_give_sum(ad, IN(0), ad_emit(ad, "Div", "", 2, in, "grad_div"), true)) return -1;
    }
    if (ad_needs(ad, IN(1))) {
        int32_t a[2] = {dy[0], OUT(0)};
        int32_t t = ad_emit(ad, "Mul", "", 2, a, "grad_div");
        if (t < 0) return -1;
        int32_t b[2] = {t, IN(1)};
        int32_t q = ad_emit(ad, "Div", "", 2, b, "grad_div");
        if (q < 0) return -1;
        if (ad_give_sum(ad, IN(1), ad_emit(ad, "Neg", "", 1, &q, "grad_div"), true)) return -1;
    }
    return 0;
}

/* Mod (floats): Y = A - B * q with q = trunc(A / B) (fmod 1) or floor (fmod 0),
 * piecewise constant: dA = dY, dB = -dY * q, q = (A - Y) / B. Reads A, B and Y. */
int mp_grad_Mod(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(0)) && ad_give_sum(ad, IN(0), dy[0], false)) return -1;
    if (!ad_needs(ad, IN(1))) return 0;
    int32_t a[2] = {IN(0), OUT(0)};
    int32_t b[2] = {ad_emit(ad, "Sub", "", 2, a, "grad_mod"), IN(1)};
    if (b[0] < 0) return -1;
    int32_t c[2] = {dy[0], ad_emit(ad, "Div", "", 2, b, "grad_mod")};
    if (c[1] < 0) return -1;
    int32_t t = ad_emit(ad, "Mul", "", 2, c, "grad_mod");
    if (t < 0) return -1;
    return ad_give_sum(ad, IN(1), ad_emit(ad, "Neg", "", 1, &t, "grad_mod"), true);
}

/* Pow: dX = dY * E * X^(E-1) reads X and the exponent E; dE = dY * Y * ln X
 * (when E needs a gradient) reads Y and X. X <= 0 gives NaN there, as ln does. */
int mp_grad_Pow(mp_ad *ad, int32_t node, const int32_t *dy)
{
    if (ad_needs(ad, IN(0))) {
        int32_t in[3] = {dy[0], IN(0), IN(1)};
        if (ad_give_sum(ad, IN(0), ad_emit(ad, "PowGrad", "memplan", 3, in, "grad_pow"), true)) return -1;
    }
    if (ad_needs(ad, IN(1))) {
        int32_t a[2] = {dy[0], OUT(0)}, x = IN(0);
        int32_t b[2] = {ad_emit(ad, "Mul", "", 2, a, "grad_pow"), ad_emit(ad, "Log", "", 1, &x, "grad_pow")};
        if (b[0] < 0 || b[1] < 0) return -1;
        if (ad_give_sum(ad, IN(1), ad_emit(ad, "Mul", "", 2, b, "grad_pow"), true)) return -1;
    }
    return 0;
}

/* Exp: dX = dY * Y reads the output Y. */
int mp_grad_Exp(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t in[2] = {dy[0], OUT(0)};
    return ad_give(ad, IN(0), ad_emit(ad, "Mul", "", 2, in, "grad_exp"), true);
}

/* WhereGrad(dY, cond){branch}: dY where cond picks `branch` (0: true, 1: false), else 0. */
static int32_t where_grad(mp_ad *ad, int32_t dy, int32_t cond, int branch)
{
    int32_t in[2] = {dy, cond}, out;
    int32_t n = ad_add1(ad, "WhereGrad", "memplan", 2, in, "grad_where", &out);
    ad_attr_int(ad->g, &ad->g->nodes[n], "branch", branch);
    return ad_infer(ad, n) ? -1 : out;
}

/* A bool comparison op(a, b) in the backward. */
static int32_t compare(mp_ad *ad, const char *op, int32_t a, int32_t b)
{
    int32_t in[2] = {a, b};
    return ad_emit(ad, op, "", 2, in, "grad_mask");
}

/* Clip: reads X and the bounds. dX = dY where min <= X <= max (PyTorch's
 * clamp); dMin = dY where X < min, dMax = dY where X > max. The bounds are
 * inputs 1, 2 from opset 11, attributes before (made Constants here). */
int mp_grad_Clip(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    int32_t x = IN(0), lo = IN(1), hi = IN(2);
    if (mp_graph_opset(g, "") > 0 && mp_graph_opset(g, "") < 11) {
        const mp_attr *a = mp_node_attr(NODE, "min"), *b = mp_node_attr(NODE, "max");
        lo = a ? ad_const_scalar(ad, g->values[x].dtype, a->f) : -1;
        hi = b ? ad_const_scalar(ad, g->values[x].dtype, b->f) : -1;
    }
    int32_t below = lo >= 0 ? compare(ad, "Less", x, lo) : -1, above = hi >= 0 ? compare(ad, "Greater", x, hi) : -1;
    if ((lo >= 0 && below < 0) || (hi >= 0 && above < 0)) return -1;
    if (ad_needs(ad, lo) && ad_give_sum(ad, lo, where_grad(ad, dy[0], below, 0), true)) return -1;
    if (ad_needs(ad, hi) && ad_give_sum(ad, hi, where_grad(ad, dy[0], above, 0), true)) return -1;
    if (!ad_needs(ad, x)) return 0;
    int32_t outside = below >= 0 && above >= 0 ? compare(ad, "Or", below, above) : below >= 0 ? below : above;
    if (outside < 0) return ad_give(ad, x, dy[0], false); /* no bounds: the identity */
    return ad_give(ad, x, where_grad(ad, dy[0], outside, 1), true);
}

/* Min, Max: reads the inputs; dY goes to the input chosen (the first on ties). Two: where the second beats
 * the first. More: where an input equals Y and no earlier one does (a NaN in Y gives nothing). */
static int min_max(mp_ad *ad, int32_t node, const int32_t *dy, const char *beats)
{
    if (NODE->nin == 1) return ad_give(ad, IN(0), dy[0], false);
    if (NODE->nin == 2) {
        int32_t second = compare(ad, beats, IN(1), IN(0)); /* where the second input is chosen */
        if (second < 0) return -1;
        for (int k = 0; k < 2; k++)
            if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), where_grad(ad, dy[0], second, 1 - k), true)) return -1;
        return 0;
    }
    int32_t taken = -1; /* where an earlier input equals Y */
    for (int k = 0; k < NODE->nin; k++) {
        int32_t eq = compare(ad, "Equal", IN(k), OUT(0)), chosen = eq;
        if (eq < 0) return -1;
        if (k > 0) {
            int32_t free_ = ad_emit(ad, "Not", "", 1, &taken, "grad_mask");
            if (free_ < 0 || (chosen = compare(ad, "And", eq, free_)) < 0) return -1;
        }
        if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), where_grad(ad, dy[0], chosen, 0), true)) return -1;
        if (k + 1 < NODE->nin && (taken = k ? compare(ad, "Or", taken, eq) : eq) < 0) return -1;
    }
    return 0;
}

int mp_grad_Min(mp_ad *ad, int32_t node, const int32_t *dy) { return min_max(ad, node, dy, "Less"); }
int mp_grad_Max(mp_ad *ad, int32_t node, const int32_t *dy) { return min_max(ad, node, dy, "Greater"); }

/* One rule for the unary ops whose gradient is a memplan op of (dY, saved),
 * saved being the output (Relu, Sigmoid, Tanh, Sqrt) or the input (the rest). */
static int unary(mp_ad *ad, int32_t node, const int32_t *dy, const char *op, bool saves_output)
{
    int32_t in[2] = {dy[0], saves_output ? OUT(0) : IN(0)};
    return ad_grad_one(ad, node, op, "memplan", 2, in, "grad_x");
}

int mp_grad_Relu(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "ReluGrad", true); }
int mp_grad_Sigmoid(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "SigmoidGrad", true); }
int mp_grad_Tanh(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "TanhGrad", true); }
int mp_grad_Sqrt(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "SqrtGrad", true); }
int mp_grad_Erf(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "ErfGrad", false); }
int mp_grad_Gelu(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "GeluGrad", false); }
int mp_grad_HardSwish(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return unary(ad, node, dy, "HardSwishGrad", false);
}
int mp_grad_HardSigmoid(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return unary(ad, node, dy, "HardSigmoidGrad", false);
}
/* Softmax: reads the output Y (dX = Y * (dY - sum(dY * Y, axis))). */
int mp_grad_Softmax(mp_ad *ad, int32_t node, const int32_t *dy) { return unary(ad, node, dy, "SoftmaxGrad", true); }
/* LogSoftmax: reads the output Y (dX = dY - exp(Y) sum(dY, axis)), as PyTorch's LogSoftmaxBackward. */
int mp_grad_LogSoftmax(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return unary(ad, node, dy, "LogSoftmaxGrad", true);
}

/* Identity: reads nothing. */
int mp_grad_Identity(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), dy[0], false); }

/* Cast (and CastLike, whose second input gives only the type): reads nothing;
 * the gradient is cast back to the input's float type. */
int mp_grad_Cast(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_dtype t = ad->g->values[IN(0)].dtype;
    if (ad->g->values[dy[0]].dtype == t) return ad_give(ad, IN(0), dy[0], false);
    int32_t out;
    int32_t n = ad_add1(ad, "Cast", "", 1, &dy[0], "grad_cast", &out);
    ad_attr_int(ad->g, &ad->g->nodes[n], "to", t);
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* Dropout: reads the mask (bool); in inference mode it is the identity.
 * A training-mode Dropout without a mask output gets one. */
int mp_grad_Dropout(mp_ad *ad, int32_t node, const int32_t *dy)
{
    mp_graph *g = ad->g;
    /* opset 12+: training_mode input (absent: inference); before: a mask output means training */
    int32_t tm = IN(2);
    bool training = mp_graph_opset(g, "") >= 12
                        ? tm >= 0 && (!g->values[tm].konst || mp_tensor_get_i64(g->values[tm].konst, 0) != 0)
                        : OUT(1) >= 0;
    float ratio = 0.5f;
    if (IN(1) >= 0 && g->values[IN(1)].konst)
        ratio = (float)mp_tensor_get_f64(g->values[IN(1)].konst, 0);
    else
        ratio = mp_attr_float(NODE, "ratio", 0.5f);
    /* ratio 0 drops nothing: PyTorch returns the input itself and keeps no mask */
    if (!training || ratio == 0.0f) {
        if (g->values[OUT(0)].alias < 0 && g->values[OUT(0)].bytes == g->values[IN(0)].bytes)
            g->values[OUT(0)].alias = IN(0); /* the same storage */
        return ad_give(ad, IN(0), dy[0], false);
    }
    int32_t mask = ad_extra_output(ad, node, 1, "_mask", MP_BOOL, OUT(0));
    int32_t in[2] = {dy[0], mask};
    int32_t out;
    int32_t n = ad_add1(ad, "DropoutGrad", "memplan", 2, in, "grad_dropout", &out);
    ad_attr_float(g, &g->nodes[n], "ratio", ratio);
    if (ad_infer(ad, n)) return -1;
    return ad_give(ad, IN(0), out, true);
}

/* Where: reads the condition. */
int mp_grad_Where(mp_ad *ad, int32_t node, const int32_t *dy)
{
    for (int k = 1; k <= 2; k++)
        if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), where_grad(ad, dy[0], IN(0), k - 1), true)) return -1;
    return 0;
}

/* ---- unary math and activations, composed of forward ops ---- */

static int32_t un(mp_ad *ad, const char *op, int32_t a) { return a < 0 ? -1 : ad_emit(ad, op, "", 1, &a, "grad_x"); }
static int32_t bin(mp_ad *ad, const char *op, int32_t a, int32_t b)
{
    int32_t in[2] = {a, b};
    return a < 0 || b < 0 ? -1 : ad_emit(ad, op, "", 2, in, "grad_x");
}
static int32_t scalar(mp_ad *ad, int32_t like, double v) { return ad_const_scalar(ad, ad->g->values[like].dtype, v); }
static int32_t pick(mp_ad *ad, int32_t cond, int32_t a, int32_t b)
{
    int32_t in[3] = {cond, a, b};
    return cond < 0 || a < 0 || b < 0 ? -1 : ad_emit(ad, "Where", "", 3, in, "grad_x");
}
/* X > 0, the branch of the piecewise activations (PyTorch's: the input, not the output). */
static int32_t positive(mp_ad *ad, int32_t x) { return bin(ad, "Greater", x, scalar(ad, x, 0)); }

/* Log: dY / X reads X. */
int mp_grad_Log(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), bin(ad, "Div", dy[0], IN(0)), true); }

/* Reciprocal: -dY Y^2 reads Y. */
int mp_grad_Reciprocal(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), un(ad, "Neg", bin(ad, "Mul", bin(ad, "Mul", dy[0], OUT(0)), OUT(0))), true);
}

/* Abs: dY sign(X) reads X (0 at 0, as PyTorch). */
int mp_grad_Abs(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], un(ad, "Sign", IN(0))), true); }

/* Sin: dY cos(X); Cos: -dY sin(X). Read X. */
int mp_grad_Sin(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], un(ad, "Cos", IN(0))), true); }
int mp_grad_Cos(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), un(ad, "Neg", bin(ad, "Mul", dy[0], un(ad, "Sin", IN(0)))), true);
}

/* Floor, Ceil, Round, Sign: zero almost everywhere; nothing flows back (PyTorch gives zeros). */
int mp_grad_Zero(mp_ad *ad, int32_t node, const int32_t *dy)
{
    (void)ad, (void)node, (void)dy;
    return 0;
}

/* Softplus: dY sigmoid(X) reads X. */
int mp_grad_Softplus(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], un(ad, "Sigmoid", IN(0))), true);
}

/* Softsign: dY / (1 + |X|)^2 reads X. */
int mp_grad_Softsign(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t d = bin(ad, "Add", un(ad, "Abs", IN(0)), scalar(ad, IN(0), 1));
    return ad_give(ad, IN(0), bin(ad, "Div", dy[0], bin(ad, "Mul", d, d)), true);
}

/* LeakyRelu: dY where X > 0, else alpha dY. Reads X. */
int mp_grad_LeakyRelu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t neg = bin(ad, "Mul", dy[0], scalar(ad, dy[0], mp_attr_float(NODE, "alpha", 0.01f)));
    return ad_give(ad, IN(0), pick(ad, positive(ad, IN(0)), dy[0], neg), true);
}

/* ThresholdedRelu: dY where X > alpha. Reads X. */
int mp_grad_ThresholdedRelu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t above = bin(ad, "Greater", IN(0), scalar(ad, IN(0), mp_attr_float(NODE, "alpha", 1.0f)));
    return ad_give(ad, IN(0), above < 0 ? -1 : where_grad(ad, dy[0], above, 0), true);
}

/* Shrink: dY where |X| > lambd (the output is X -+ bias there, 0 between). Reads X. */
int mp_grad_Shrink(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t outside = bin(ad, "Greater", un(ad, "Abs", IN(0)), scalar(ad, IN(0), mp_attr_float(NODE, "lambd", 0.5f)));
    return ad_give(ad, IN(0), outside < 0 ? -1 : where_grad(ad, dy[0], outside, 0), true);
}

/* Elu, Selu, Celu: dY (times gamma for Selu) where X > 0; below, the
 * derivative from the output: Elu Y + alpha, Selu Y + gamma alpha, Celu
 * Y / alpha + 1. Read X and Y. */
static int exp_linear(mp_ad *ad, int32_t node, const int32_t *dy, double gamma, double scale_y, double shift)
{
    int32_t y = OUT(0);
    int32_t below = bin(ad, "Mul", dy[0], bin(ad, "Add", bin(ad, "Mul", y, scalar(ad, y, scale_y)), scalar(ad, y, shift)));
    int32_t above = gamma == 1 ? dy[0] : bin(ad, "Mul", dy[0], scalar(ad, dy[0], gamma));
    return ad_give(ad, IN(0), pick(ad, positive(ad, IN(0)), above, below), true);
}
int mp_grad_Elu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return exp_linear(ad, node, dy, 1, 1, mp_attr_float(NODE, "alpha", 1.0f));
}
int mp_grad_Selu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    double alpha = mp_attr_float(NODE, "alpha", 1.67326319217681884765625f);
    double gamma = mp_attr_float(NODE, "gamma", 1.05070102214813232421875f);
    return exp_linear(ad, node, dy, gamma, 1, gamma * alpha);
}
int mp_grad_Celu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    return exp_linear(ad, node, dy, 1, 1.0 / mp_attr_float(NODE, "alpha", 1.0f), 1);
}

/* Mish, X tanh(softplus(X)): dY (t + X sigmoid(X) (1 - t^2)), t = tanh(softplus(X)). Reads X. */
int mp_grad_Mish(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t x = IN(0), t = un(ad, "Tanh", un(ad, "Softplus", x));
    int32_t one_minus = bin(ad, "Sub", scalar(ad, x, 1), bin(ad, "Mul", t, t));
    int32_t g = bin(ad, "Add", t, bin(ad, "Mul", bin(ad, "Mul", x, un(ad, "Sigmoid", x)), one_minus));
    return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], g), true);
}

/* Swish, X sigmoid(alpha X): dY s (1 + alpha X (1 - s)), s = sigmoid(alpha X). Reads X. */
int mp_grad_Swish(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t x = IN(0), ax = bin(ad, "Mul", x, scalar(ad, x, mp_attr_float(NODE, "alpha", 1.0f)));
    int32_t s = un(ad, "Sigmoid", ax);
    int32_t g = bin(ad, "Mul", s, bin(ad, "Add", scalar(ad, x, 1), bin(ad, "Mul", ax, bin(ad, "Sub", scalar(ad, x, 1), s))));
    return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], g), true);
}

/* PRelu: dX = dY where X > 0, else slope dY; dSlope = X dY where X <= 0,
 * summed to the slope's shape. Reads X and the slope. */
int mp_grad_PRelu(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t x = IN(0), slope = IN(1), pos = positive(ad, x);
    if (pos < 0) return -1;
    if (ad_needs(ad, x) && ad_give_sum(ad, x, pick(ad, pos, dy[0], bin(ad, "Mul", dy[0], slope)), true)) return -1;
    if (!ad_needs(ad, slope)) return 0;
    int32_t xdy = bin(ad, "Mul", dy[0], x);
    return ad_give_sum(ad, slope, xdy < 0 ? -1 : where_grad(ad, xdy, pos, 1), true);
}

/* Mean (n-ary): dY / n, summed to each input's shape. Reads nothing. */
int mp_grad_Mean(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t share = bin(ad, "Div", dy[0], scalar(ad, dy[0], NODE->nin));
    for (int k = 0; k < NODE->nin; k++)
        if (ad_needs(ad, IN(k)) && ad_give_sum(ad, IN(k), share, false)) return -1;
    return 0;
}

/* Trigonometric and hyperbolic functions and their inverses, from forward ops. Tan reads Y, the rest X. */
int mp_grad_Tan(mp_ad *ad, int32_t node, const int32_t *dy) /* dY (1 + Y^2) */
{
    int32_t y = OUT(0);
    return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], bin(ad, "Add", scalar(ad, y, 1), bin(ad, "Mul", y, y))), true);
}
int mp_grad_Sinh(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], un(ad, "Cosh", IN(0))), true); }
int mp_grad_Cosh(mp_ad *ad, int32_t node, const int32_t *dy) { return ad_give(ad, IN(0), bin(ad, "Mul", dy[0], un(ad, "Sinh", IN(0))), true); }

/* dY / f(X) for the inverse functions: f = sqrt(1 - X^2) (Asin, and Acos negated), sqrt(X^2 + 1) (Asinh),
 * sqrt(X^2 - 1) (Acosh), 1 + X^2 (Atan), 1 - X^2 (Atanh). */
static int inverse_trig(mp_ad *ad, int32_t node, const int32_t *dy, double sign_x2, double one, bool root, bool negate)
{
    int32_t x = IN(0), x2 = bin(ad, "Mul", x, x);
    int32_t d = bin(ad, "Add", bin(ad, "Mul", x2, scalar(ad, x, sign_x2)), scalar(ad, x, one));
    int32_t g = bin(ad, "Div", dy[0], root ? un(ad, "Sqrt", d) : d);
    return ad_give(ad, IN(0), negate ? un(ad, "Neg", g) : g, true);
}
int mp_grad_Asin(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, -1, 1, true, false); }
int mp_grad_Acos(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, -1, 1, true, true); }
int mp_grad_Asinh(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, 1, 1, true, false); }
int mp_grad_Acosh(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, 1, -1, true, false); }
int mp_grad_Atan(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, 1, 1, false, false); }
int mp_grad_Atanh(mp_ad *ad, int32_t node, const int32_t *dy) { return inverse_trig(ad, node, dy, -1, 1, false, false); }

/* SwiGLU: Y = A s B with s = sigmoid(alpha A); dA = dY B s (1 + alpha A (1 - s)),
 * dB = dY A s (each summed back to its input's shape). Reads A and B. */
int mp_grad_SwiGLU(mp_ad *ad, int32_t node, const int32_t *dy)
{
    int32_t a = IN(0), b = IN(1);
    double alpha = mp_attr_float(NODE, "alpha", 1.0f);
    int32_t aa = bin(ad, "Mul", a, scalar(ad, a, alpha)), s = un(ad, "Sigmoid", aa);
    if (ad_needs(ad, b) && ad_give_sum(ad, b, bin(ad, "Mul", dy[0], bin(ad, "Mul", a, s)), true)) return -1;
    if (!ad_needs(ad, a)) return 0;
    int32_t slope = bin(ad, "Add", scalar(ad, a, 1), bin(ad, "Mul", aa, bin(ad, "Sub", scalar(ad, a, 1), s)));
    return ad_give_sum(ad, a, bin(ad, "Mul", bin(ad, "Mul", dy[0], b), bin(ad, "Mul", s, slope)), true);
}
