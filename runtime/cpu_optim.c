/* cpu_optim.c - the optimizers of ai.onnx.preview.training: Adagrad,
 * Momentum (standard and Nesterov) and Adam. Inputs are R (learning rate),
 * T (step count), then n tensors X, n gradients G and n (or 2n for Adam)
 * state tensors; outputs the new X and the new states, in that order.
 * Each update is elementwise, computed in double. Then the memplan-domain
 * updates of the training step: MomentumUpdate, AdamUpdate, AdafactorUpdate. */
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

/* Checks the layout of an optimizer node with `states` state tensors per X;
 * returns n, or -1. */
static int64_t optim_check(const mp_kargs *k, int states, double *r, int64_t *t, mp_err *err)
{
    int groups = 2 + states;
    if (k->nin < 2 + groups || (k->nin - 2) % groups || k->nout != (k->nin - 2) / groups * (1 + states))
        return mp_fail(err, "needs R, T, then X, G and %d state tensor(s) per parameter", states);
    int64_t n = (k->nin - 2) / groups;
    if (!k->in[0] || !k->in[1] || k->in[0]->numel != 1 || k->in[1]->numel != 1) return mp_fail(err, "R and T must be scalars");
    *r = mp_scalar_f64(k->in[0]);
    *t = mp_scalar_i64(k->in[1]);
    for (int64_t i = 0; i < n; i++) {
        const mp_tensor *x = k->in[2 + i];
        if (!x || (x->dtype != MP_FLOAT && x->dtype != MP_DOUBLE)) return mp_kunsupported(err, "parameter dtype");
        for (int j = 1; j < groups; j++) {
            const mp_tensor *s = k->in[2 + j * n + i];
            if (!s || s->dtype != x->dtype || !mp_same_shape(s, x)) return mp_fail(err, "gradient and state %lld must match parameter %lld", (long long)i, (long long)i);
        }
        for (int j = 0; j <= states; j++) {
            const mp_tensor *o = k->out[j * n + i];
            if (o && (o->dtype != x->dtype || o->numel != x->numel)) return mp_fail(err, "output %lld must match its parameter", (long long)(j * n + i));
        }
    }
    return n;
}

int mp_cpu_Adagrad(const mp_kargs *k, mp_err *err)
{
    double r = 0;
    int64_t t = 0, n = optim_check(k, 1, &r, &t, err);
    if (n < 0) return (int)n;
    double decay = mp_attr_float(k->node, "decay_factor", 0.0f), eps = mp_attr_float(k->node, "epsilon", 0.0f);
    double norm = mp_attr_float(k->node, "norm_coefficient", 0.0f), lr = r / (1 + (double)t * decay);
    for (int64_t i = 0; i < n; i++) {
        const mp_tensor *x = k->in[2 + i], *g = k->in[2 + n + i], *h = k->in[2 + 2 * n + i];
        mp_tensor *xo = k->out[i], *ho = k->out[n + i];
        for (int64_t e = 0; e < x->numel; e++) {
            double gr = norm * rd(x, e) + rd(g, e), hn = rd(h, e) + gr * gr, xv = rd(x, e);
            if (ho) wr(ho, e, hn);
            if (xo) wr(xo, e, xv - lr * gr / (sqrt(hn) + eps));
        }
    }
    return 0;
}

int mp_cpu_Momentum(const mp_kargs *k, mp_err *err)
{
    double r = 0;
    int64_t t = 0, n = optim_check(k, 1, &r, &t, err);
    if (n < 0) return (int)n;
    double alpha = mp_attr_float(k->node, "alpha", 0.0f), beta = mp_attr_float(k->node, "beta", 0.0f);
    double norm = mp_attr_float(k->node, "norm_coefficient", 0.0f), b = t > 0 ? beta : 1; /* the first step takes the whole gradient */
    const char *mode = mp_attr_str(k->node, "mode", "standard");
    bool nesterov = !strcmp(mode, "nesterov");
    if (!nesterov && strcmp(mode, "standard")) return mp_fail(err, "unknown mode '%s'", mode);
    for (int64_t i = 0; i < n; i++) {
        const mp_tensor *x = k->in[2 + i], *g = k->in[2 + n + i], *v = k->in[2 + 2 * n + i];
        mp_tensor *xo = k->out[i], *vo = k->out[n + i];
        for (int64_t e = 0; e < x->numel; e++) {
            double xv = rd(x, e), gr = norm * xv + rd(g, e), vn = alpha * rd(v, e) + b * gr;
            if (vo) wr(vo, e, vn);
            if (xo) wr(xo, e, xv - r * (nesterov ? gr + alpha * vn : vn));
        }
    }
    return 0;
}

int mp_cpu_Adam(const mp_kargs *k, mp_err *err)
{
    double r = 0;
    int64_t t = 0, n = optim_check(k, 2, &r, &t, err);
    if (n < 0) return (int)n;
    double alpha = mp_attr_float(k->node, "alpha", 0.9f), beta = mp_attr_float(k->node, "beta", 0.999f);
    double eps = mp_attr_float(k->node, "epsilon", 0.0f), norm = mp_attr_float(k->node, "norm_coefficient", 0.0f);
    double post = mp_attr_float(k->node, "norm_coefficient_post", 0.0f);
    double lr = t > 0 ? r * sqrt(1 - pow(beta, (double)t)) / (1 - pow(alpha, (double)t)) : r; /* bias correction */
    for (int64_t i = 0; i < n; i++) {
        const mp_tensor *x = k->in[2 + i], *g = k->in[2 + n + i], *v = k->in[2 + 2 * n + i], *h = k->in[2 + 3 * n + i];
        mp_tensor *xo = k->out[i], *vo = k->out[n + i], *ho = k->out[2 * n + i];
        for (int64_t e = 0; e < x->numel; e++) {
            double xv = rd(x, e), gr = norm * xv + rd(g, e);
            double vn = alpha * rd(v, e) + (1 - alpha) * gr, hn = beta * rd(h, e) + (1 - beta) * gr * gr;
            if (vo) wr(vo, e, vn);
            if (ho) wr(ho, e, hn);
            if (xo) wr(xo, e, (1 - post) * (xv - lr * vn / (sqrt(hn) + eps)));
        }
    }
    return 0;
}

/* ---- the training step's memplan-domain updates (passes/optimizer.c) ------- */

/* Update inputs (p, g, state...[, finite, log2 scale]) and outputs (p',
 * state'...): every input a float tensor, every output present and the size
 * of its input. The two last inputs come with dynamic_loss_scale = 1 (fp16,
 * passes/loss_scale.c). A planned run may place an output over its input
 * (alias), so the kernels below read element i of an input before writing
 * element i of its output. */
static bool dynamic(const mp_kargs *k) { return mp_attr_int(k->node, "dynamic_loss_scale", 0) != 0; }

static int update_check(const mp_kargs *k, int nstate, mp_err *err)
{
    int extra = dynamic(k) ? 2 : 0;
    if (k->nin != 2 + nstate + extra || k->nout != 1 + nstate)
        return mp_fail(err, "needs (param, grad, %d state%s) -> (param', state')", nstate,
                       extra ? ", finite, log2 scale" : "");
    for (int i = 0; i < k->nin; i++)
        if (!k->in[i] || !mp_dtype_is_float(k->in[i]->dtype)) return mp_kunsupported(err, "input %d is not a float tensor", i);
    if (k->in[1]->numel != k->in[0]->numel) return mp_fail(err, "param and grad must have one shape");
    for (int i = 0; i < extra; i++)
        if (k->in[k->nin - 1 - i]->numel != 1) return mp_fail(err, "the finite flag and the log2 scale must be scalars");
    for (int i = 0; i < k->nout; i++) {
        const mp_tensor *in = k->in[i ? i + 1 : 0];
        if (!k->out[i] || k->out[i]->numel != in->numel) return mp_fail(err, "output %d must match its input", i);
    }
    return 0;
}

/* A step whose gradients are not all finite changes nothing: each output
 * keeps its input (already there when placed over it). */
static bool skipped(const mp_kargs *k)
{
    if (!dynamic(k) || mp_tensor_get_f64(k->in[k->nin - 2], 0) != 0) return false;
    for (int i = 0; i < k->nout; i++) {
        const mp_tensor *in = k->in[i ? i + 1 : 0];
        if (k->out[i]->data != in->data) memcpy(k->out[i]->data, in->data, (size_t)in->numel * mp_elem_size(in->dtype));
    }
    return true;
}

/* The gradient with fp16's loss scale divided out. */
static double grad_at(const mp_kargs *k, int64_t i, double inv_scale) { return mp_tensor_get_f64(k->in[1], i) * inv_scale; }

/* 1 / loss scale: the attribute, times 2^log2 when the scale is dynamic. */
static double inv_loss_scale(const mp_kargs *k)
{
    double scale = mp_attr_float(k->node, "loss_scale", 1.0f);
    if (dynamic(k)) scale = ldexp(scale, (int)mp_tensor_get_f64(k->in[k->nin - 1], 0));
    return 1.0 / scale;
}

/* PyTorch SGD: p -= lr g. */
int mp_cpu_SGDUpdate(const mp_kargs *k, mp_err *err)
{
    if (update_check(k, 0, err)) return -1;
    if (skipped(k)) return 0;
    double lr = mp_attr_float(k->node, "lr", 1e-2f), s = inv_loss_scale(k);
    for (int64_t i = 0; i < k->in[0]->numel; i++)
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(k->in[0], i) - lr * grad_at(k, i, s));
    return 0;
}

/* PyTorch SGD with momentum (dampening 0): m = mu m + g, p -= lr m. The first
 * step's buffer is g itself, which a zero-initialized m gives too. */
int mp_cpu_MomentumUpdate(const mp_kargs *k, mp_err *err)
{
    if (update_check(k, 1, err)) return -1;
    if (skipped(k)) return 0;
    double lr = mp_attr_float(k->node, "lr", 1e-2f), mu = mp_attr_float(k->node, "momentum", 0.9f), s = inv_loss_scale(k);
    for (int64_t i = 0; i < k->in[0]->numel; i++) {
        double m = mu * mp_tensor_get_f64(k->in[2], i) + grad_at(k, i, s);
        mp_tensor_set_f64(k->out[1], i, m);
        mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(k->in[0], i) - lr * m);
    }
    return 0;
}

/* PyTorch Adam / AdamW: t += 1, decoupled decay p *= 1 - lr wd (0 for Adam),
 * m and v the moving averages of g and g^2, p -= lr m^ / (sqrt(v^) + eps)
 * with the bias corrections m^ = m / (1 - b1^t), v^ = v / (1 - b2^t). */
int mp_cpu_AdamUpdate(const mp_kargs *k, mp_err *err)
{
    if (update_check(k, 3, err)) return -1;
    if (k->in[4]->numel != 1) return mp_fail(err, "the step counter must be a scalar");
    if (skipped(k)) return 0;
    double lr = mp_attr_float(k->node, "lr", 1e-3f), wd = mp_attr_float(k->node, "weight_decay", 0.0f);
    double b1 = mp_attr_float(k->node, "beta1", 0.9f), b2 = mp_attr_float(k->node, "beta2", 0.999f);
    double eps = mp_attr_float(k->node, "epsilon", 1e-8f), s = inv_loss_scale(k);
    double t = mp_tensor_get_f64(k->in[4], 0) + 1, c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
    for (int64_t i = 0; i < k->in[0]->numel; i++) {
        double gr = grad_at(k, i, s);
        double m = b1 * mp_tensor_get_f64(k->in[2], i) + (1 - b1) * gr;
        double v = b2 * mp_tensor_get_f64(k->in[3], i) + (1 - b2) * gr * gr;
        double p = mp_tensor_get_f64(k->in[0], i) * (1 - lr * wd);
        mp_tensor_set_f64(k->out[1], i, m);
        mp_tensor_set_f64(k->out[2], i, v);
        mp_tensor_set_f64(k->out[0], i, p - lr * (m / c1) / (sqrt(v / c2) + eps));
    }
    mp_tensor_set_f64(k->out[3], 0, t);
    return 0;
}

/* Adafactor (Shazeer & Stern 2018) without momentum. The step has no step
 * counter for this optimizer (passes/optimizer.c), so beta2 is a constant
 * (attribute beta2, default 0.999) instead of 1 - t^decay_rate, and the
 * paper's update clipping (RMS(u) <= 1) bounds the first steps, whose
 * second moments are not bias-corrected. Factored for [.., R, C]:
 *   r = b2 r + (1 - b2) mean_c(g^2 + e),  c = b2 c + (1 - b2) mean_r(g^2 + e),
 *   v^[i, j] = r[i] c[j] / mean(r),  u = g / sqrt(v^),  p -= lr u / max(1, RMS(u)).
 * 1-D parameters keep v like g. */
int mp_cpu_AdafactorUpdate(const mp_kargs *k, mp_err *err)
{
    bool factored = k->nin - (dynamic(k) ? 2 : 0) == 4;
    if (update_check(k, factored ? 2 : 1, err)) return -1;
    if (skipped(k)) return 0;
    const mp_tensor *p = k->in[0];
    double lr = mp_attr_float(k->node, "lr", 1e-2f), b2 = mp_attr_float(k->node, "beta2", 0.999f), s = inv_loss_scale(k);
    const double e = 1e-30;
    int64_t R = 1, C = p->numel, B = 1;
    if (factored) {
        if (p->rank < 2) return mp_fail(err, "factored moments need a parameter of rank >= 2");
        R = p->dims[p->rank - 2], C = p->dims[p->rank - 1];
        B = R > 0 && C > 0 ? p->numel / (R * C) : 0;
        if (k->in[2]->numel != B * R || k->in[3]->numel != B * C) return mp_fail(err, "row / column moments do not match the parameter");
    } else if (k->in[2]->numel != p->numel) {
        return mp_fail(err, "the second moment must match the parameter");
    }
    double *u = mp_scratch_array(k->scratch, p->numel, sizeof *u);
    double *colsum = mp_scratch_array(k->scratch, C ? C : 1, sizeof *colsum);
    if (!u || !colsum) return mp_fail(err, "out of scratch memory");
    double sq = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t base = b * R * C;
        if (!factored) {
            for (int64_t i = 0; i < C; i++) {
                double gr = grad_at(k, i, s), v = b2 * mp_tensor_get_f64(k->in[2], i) + (1 - b2) * (gr * gr + e);
                mp_tensor_set_f64(k->out[1], i, v);
                u[i] = gr / sqrt(v);
            }
        } else {
            double rsum = 0;
            memset(colsum, 0, (size_t)C * sizeof *colsum);
            for (int64_t i = 0; i < R; i++) {
                double row = 0;
                for (int64_t j = 0; j < C; j++) {
                    double gr = grad_at(k, base + i * C + j, s), g2 = gr * gr + e;
                    row += g2;
                    colsum[j] += g2;
                }
                double r = b2 * mp_tensor_get_f64(k->in[2], b * R + i) + (1 - b2) * row / (double)C;
                mp_tensor_set_f64(k->out[1], b * R + i, r);
                rsum += r;
            }
            for (int64_t j = 0; j < C; j++)
                mp_tensor_set_f64(k->out[2], b * C + j, b2 * mp_tensor_get_f64(k->in[3], b * C + j) + (1 - b2) * colsum[j] / (double)R);
            double rmean = rsum / (double)R;
            for (int64_t i = 0; i < R; i++)
                for (int64_t j = 0; j < C; j++) {
                    double v = mp_tensor_get_f64(k->out[1], b * R + i) * mp_tensor_get_f64(k->out[2], b * C + j) / rmean;
                    u[base + i * C + j] = grad_at(k, base + i * C + j, s) / sqrt(v);
                }
        }
    }
    for (int64_t i = 0; i < p->numel; i++) sq += u[i] * u[i];
    double rms = p->numel ? sqrt(sq / (double)p->numel) : 0, clip = rms > 1 ? rms : 1;
    for (int64_t i = 0; i < p->numel; i++) mp_tensor_set_f64(k->out[0], i, mp_tensor_get_f64(p, i) - lr * u[i] / clip);
    return 0;
}

/* ---- fp16's dynamic loss scale (passes/loss_scale.c) ----------------------- */

#define LOSS_SCALE_MIN_LOG2 (-39) /* 2^(15 - 39) = 2^-24, fp16's smallest step: the seed stays above 0 */

/* (log2) -> 2^(max_log2 + log2), a scalar of the output's dtype. */
int mp_cpu_LossScale(const mp_kargs *k, mp_err *err)
{
    if (k->nin != 1 || k->nout != 1 || !k->in[0] || k->in[0]->numel != 1 || !k->out[0] || k->out[0]->numel != 1)
        return mp_fail(err, "needs a scalar log2 scale and gives a scalar seed");
    int e = (int)mp_attr_int(k->node, "max_log2", 15) + (int)mp_tensor_get_f64(k->in[0], 0);
    mp_tensor_set_f64(k->out[0], 0, ldexp(1.0, e));
    return 0;
}

/* (tensors...) -> 1 when every element is finite, else 0. */
int mp_cpu_AllFinite(const mp_kargs *k, mp_err *err)
{
    if (k->nout != 1 || !k->out[0] || k->out[0]->numel != 1) return mp_fail(err, "gives one scalar");
    bool ok = true;
    for (int i = 0; i < k->nin && ok; i++) {
        if (!k->in[i] || !mp_dtype_is_float(k->in[i]->dtype)) return mp_kunsupported(err, "input %d is not a float tensor", i);
        for (int64_t e = 0; e < k->in[i]->numel && ok; e++) ok = isfinite(mp_tensor_get_f64(k->in[i], e));
    }
    mp_tensor_set_f64(k->out[0], 0, ok ? 1 : 0);
    return 0;
}

/* (log2, finite, good steps) -> (log2', good steps'): GradScaler's rule. */
int mp_cpu_LossScaleUpdate(const mp_kargs *k, mp_err *err)
{
    if (k->nin != 3 || k->nout != 2) return mp_fail(err, "needs (log2, finite, good steps) -> (log2', good steps')");
    for (int i = 0; i < 3; i++)
        if (!k->in[i] || k->in[i]->numel != 1) return mp_fail(err, "input %d must be a scalar", i);
    for (int i = 0; i < 2; i++)
        if (!k->out[i] || k->out[i]->numel != 1) return mp_fail(err, "output %d must be a scalar", i);
    double e = mp_tensor_get_f64(k->in[0], 0), good = mp_tensor_get_f64(k->in[2], 0);
    double interval = (double)mp_attr_int(k->node, "growth_interval", 2000);
    if (mp_tensor_get_f64(k->in[1], 0) == 0) {
        e = fmax(e - 1, LOSS_SCALE_MIN_LOG2), good = 0;
    } else if (++good >= interval) {
        e = fmin(e + 1, 0), good = 0;
    }
    mp_tensor_set_f64(k->out[0], 0, e);
    mp_tensor_set_f64(k->out[1], 0, good);
    return 0;
}
