/* cpu_optim.c - the optimizers of ai.onnx.preview.training: Adagrad,
 * Momentum (standard and Nesterov) and Adam. Inputs are R (learning rate),
 * T (step count), then n tensors X, n gradients G and n (or 2n for Adam)
 * state tensors; outputs the new X and the new states, in that order.
 * Each update is elementwise, computed in double. */
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
