/* cpu_norm.c - normalizations (BatchNormalization in inference and training
 * mode, Instance/Layer/Group/RMS/MeanVariance/Lp), Dropout, and the losses
 * SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
 *
 * Statistics are computed in double, two passes (mean, then squared
 * deviations), with the biased variance as ONNX specifies.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

static inline double rd(const mp_tensor *t, int64_t i)
{
    if (t->dtype == MP_FLOAT) return ((const float *)t->data)[i];
    if (t->dtype == MP_DOUBLE) return ((const double *)t->data)[i];
    return mp_tensor_get_f64(t, i);
}
static inline void wr(mp_tensor *t, int64_t i, double v)
{
    if (t->dtype == MP_FLOAT) ((float *)t->data)[i] = (float)v;
    else if (t->dtype == MP_DOUBLE) ((double *)t->data)[i] = v;
    else mp_tensor_set_f64(t, i, v);
}
static bool is_f(const mp_tensor *t) { return t && (t->dtype == MP_FLOAT || t->dtype == MP_DOUBLE); }

/* Per-channel vector input (scale, B, mean, var) of C elements. */
static int check_vec(const mp_tensor *t, int64_t c, const char *what, mp_err *err)
{
    if (!t) return mp_fail(err, "missing %s", what);
    if (!is_f(t)) return mp_kunsupported(err, "%s dtype %s", what, mp_dtype_name(t->dtype));
    if (t->numel != c) return mp_fail(err, "%s has %lld elements for %lld channels", what, (long long)t->numel, (long long)c);
    return 0;
}

/* Mean and biased variance of x over the elements (n, c, i) of channel c. */
static void channel_stats(const mp_tensor *x, int64_t c, int64_t N, int64_t C, int64_t per, double *mean, double *var)
{
    double s = 0, q = 0, cnt = (double)(N * per);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < per; i++) s += rd(x, (n * C + c) * per + i);
    *mean = cnt ? s / cnt : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < per; i++) {
            double d = rd(x, (n * C + c) * per + i) - *mean;
            q += d * d;
        }
    *var = cnt ? q / cnt : 0;
}

int mp_cpu_BatchNormalization(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "output must match the input (rank >= 2)");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    if (k->opset < 9 && mp_attr_int(k->node, "spatial", 1) == 0) return mp_kunsupported(err, "spatial=0");
    int64_t N = x->dims[0], C = x->dims[1], per = (N * C) != 0 ? x->numel / (N * C) : 0;
    const char *names[4] = {"scale", "B", "mean", "var"};
    for (int i = 1; i <= 4; i++) {
        int rc = check_vec(mp_kin(k, i), C, names[i - 1], err);
        if (rc) return rc;
    }
    const mp_tensor *sc = k->in[1], *bi = k->in[2], *mu = k->in[3], *va = k->in[4];
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f), mom = mp_attr_float(k->node, "momentum", 0.9f);
    /* Training: opset 14+ says so with training_mode; before, asking for the
     * running statistics outputs meant training. */
    bool train = k->opset >= 14 ? mp_attr_int(k->node, "training_mode", 0) != 0 : mp_kout(k, 1) != NULL;
    mp_tensor *rm = mp_kout(k, 1), *rv = mp_kout(k, 2), *sm = mp_kout(k, 3), *sv = mp_kout(k, 4);
    for (int i = 1; i < k->nout; i++)
        if (k->out[i] && (k->out[i]->numel != C || !is_f(k->out[i]))) return mp_fail(err, "statistics outputs must have C elements");
    for (int64_t c = 0; c < C; c++) {
        double mean = rd(mu, c), var = rd(va, c);
        if (train) {
            double bm, bv;
            channel_stats(x, c, N, C, per, &bm, &bv);
            if (rm) wr(rm, c, mean * mom + bm * (1 - mom));
            if (rv) wr(rv, c, var * mom + bv * (1 - mom));
            if (sm) wr(sm, c, bm);
            if (sv) wr(sv, c, bv);
            mean = bm;
            var = bv;
        }
        double a = rd(sc, c) / sqrt(var + eps), b = rd(bi, c);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < per; i++) {
                int64_t at = (n * C + c) * per + i;
                wr(y, at, (rd(x, at) - mean) * a + b);
            }
    }
    return 0;
}

int mp_cpu_InstanceNormalization(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "output must match the input (rank >= 2)");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t N = x->dims[0], C = x->dims[1], per = (N * C) != 0 ? x->numel / (N * C) : 0;
    int rc = check_vec(mp_kin(k, 1), C, "scale", err);
    if (rc || (rc = check_vec(mp_kin(k, 2), C, "B", err))) return rc;
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0, q = 0;
            int64_t base = (n * C + c) * per;
            for (int64_t i = 0; i < per; i++) s += rd(x, base + i);
            double mean = per ? s / (double)per : 0;
            for (int64_t i = 0; i < per; i++) q += (rd(x, base + i) - mean) * (rd(x, base + i) - mean);
            double a = rd(k->in[1], c) / sqrt((per ? q / (double)per : 0) + eps), b = rd(k->in[2], c);
            for (int64_t i = 0; i < per; i++) wr(y, base + i, (rd(x, base + i) - mean) * a + b);
        }
    return 0;
}

/* Element offsets of t broadcast over the trailing dims `dims` (numel n). */
static int64_t *bcast_offsets(const mp_kargs *k, const mp_tensor *t, int rank, const int64_t *dims, int64_t n, mp_err *err)
{
    int64_t *off = mp_scratch_array(k->scratch, n ? n : 1, sizeof *off);
    if (!off) {
        mp_fail(err, "out of scratch memory");
        return NULL;
    }
    mp_tensor view = {t->dtype, rank, (int64_t *)dims, n, NULL};
    mp_bcast b;
    if (mp_bcast_init(&b, &view, 1, &t, err)) return NULL;
    for (int64_t r = 0, at = 0; r < b.rows; r++, mp_bcast_next(&b))
        for (int64_t i = 0; i < b.len; i++) off[at++] = b.off[0] + i * b.step[0];
    return off;
}

/* LayerNormalization (rms = false) and RMSNormalization over axes [axis, rank). */
static int run_layer_norm(const mp_kargs *k, bool rms, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *sc = mp_kin(k, 1), *bi = rms ? NULL : mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0), *mo = rms ? NULL : mp_kout(k, 1), *io = rms ? NULL : mp_kout(k, 2);
    if (!x || !sc || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "needs X, Scale and Y of X's shape");
    if (!is_f(x) || !is_f(sc) || (bi && !is_f(bi))) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t axis = mp_attr_int(k->node, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return mp_fail(err, "axis out of range for rank %d", x->rank);
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis; i < x->rank; i++) inner *= x->dims[i];
    if ((mo && (mo->numel != outer || !is_f(mo))) || (io && (io->numel != outer || !is_f(io))))
        return mp_fail(err, "Mean and InvStdDev must have one element per normalized row");
    int irank = x->rank - (int)axis;
    int64_t *so = bcast_offsets(k, sc, irank, x->dims + axis, inner, err), *bo = NULL;
    if (!so || (bi && !(bo = bcast_offsets(k, bi, irank, x->dims + axis, inner, err)))) return -1;
    for (int64_t o = 0; o < outer; o++) {
        int64_t base = o * inner;
        double s = 0, q = 0, mean = 0;
        if (!rms) {
            for (int64_t i = 0; i < inner; i++) s += rd(x, base + i);
            mean = inner ? s / (double)inner : 0;
        }
        for (int64_t i = 0; i < inner; i++) q += (rd(x, base + i) - mean) * (rd(x, base + i) - mean);
        double inv = 1 / sqrt((inner ? q / (double)inner : 0) + eps);
        for (int64_t i = 0; i < inner; i++)
            wr(y, base + i, (rd(x, base + i) - mean) * inv * rd(sc, so[i]) + (bi ? rd(bi, bo[i]) : 0));
        if (mo) wr(mo, o, mean);
        if (io) wr(io, o, inv);
    }
    return 0;
}

int mp_cpu_LayerNormalization(const mp_kargs *k, mp_err *err) { return run_layer_norm(k, false, err); }
int mp_cpu_RMSNormalization(const mp_kargs *k, mp_err *err) { return run_layer_norm(k, true, err); }

int mp_cpu_GroupNormalization(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0), *sc = mp_kin(k, 1), *bi = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !sc || !bi || !y || !mp_same_shape(x, y) || x->dtype != y->dtype || x->rank < 2) return mp_fail(err, "needs X, scale, bias and Y of X's shape");
    if (!is_f(x) || !is_f(sc) || !is_f(bi)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t G = mp_attr_int(k->node, "num_groups", 0), N = x->dims[0], C = x->dims[1];
    if (G < 1 || C % G) return mp_fail(err, "num_groups must divide the channels");
    /* scale/bias per channel (opset 21) or per group (opset 18) */
    bool per_channel = sc->numel == C;
    if ((!per_channel && sc->numel != G) || bi->numel != sc->numel) return mp_fail(err, "scale and bias must have C or num_groups elements");
    double eps = mp_attr_float(k->node, "epsilon", 1e-5f);
    int64_t per = (N * C) != 0 ? x->numel / (N * C) : 0, cg = C / G, len = cg * per;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            int64_t base = (n * C + g * cg) * per;
            double s = 0, q = 0;
            for (int64_t i = 0; i < len; i++) s += rd(x, base + i);
            double mean = len ? s / (double)len : 0;
            for (int64_t i = 0; i < len; i++) q += (rd(x, base + i) - mean) * (rd(x, base + i) - mean);
            double inv = 1 / sqrt((len ? q / (double)len : 0) + eps);
            for (int64_t i = 0; i < len; i++) {
                int64_t p = per_channel ? g * cg + i / (per ? per : 1) : g;
                wr(y, base + i, (rd(x, base + i) - mean) * inv * rd(sc, p) + rd(bi, p));
            }
        }
    return 0;
}

int mp_cpu_MeanVarianceNormalization(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "output must match the input");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t axes[MP_MAX_RANK] = {0, 2, 3};
    int n = mp_read_axes(k, "axes", 1, 1000, x->rank, axes, err);
    if (n < 0) return -1;
    if (n == 0 && mp_node_attr(k->node, "axes") == NULL) {
        if (x->rank < 4) return mp_fail(err, "default axes [0, 2, 3] need rank 4");
        axes[0] = 0, axes[1] = 2, axes[2] = 3, n = 3;
    }
    bool red[MP_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) red[axes[i]] = true;
    /* walk kept positions x reduced positions (odometers over split axes) */
    int64_t xs[MP_MAX_RANK], kd[MP_MAX_RANK], ks[MP_MAX_RANK], rdm[MP_MAX_RANK], rs[MP_MAX_RANK], nk = 0, nr = 0, kept = 1, cnt = 1;
    mp_strides(x->rank, x->dims, xs);
    for (int i = 0; i < x->rank; i++) {
        if (red[i]) rdm[nr] = x->dims[i], rs[nr++] = xs[i], cnt *= x->dims[i];
        else kd[nk] = x->dims[i], ks[nk++] = xs[i], kept *= x->dims[i];
    }
    int64_t *off = mp_scratch_array(k->scratch, cnt ? cnt : 1, sizeof *off);
    if (!off) return mp_fail(err, "out of scratch memory");
    int64_t idx[MP_MAX_RANK] = {0};
    for (int64_t r = 0; r < cnt; r++) {
        int64_t o = 0;
        for (int i = 0; i < nr; i++) o += idx[i] * rs[i];
        off[r] = o;
        for (int i = (int)nr - 1; i >= 0; i--) {
            if (++idx[i] < rdm[i]) break;
            idx[i] = 0;
        }
    }
    int64_t kidx[MP_MAX_RANK] = {0};
    for (int64_t o = 0; o < kept; o++) {
        int64_t base = 0;
        for (int i = 0; i < nk; i++) base += kidx[i] * ks[i];
        double s = 0, q = 0;
        for (int64_t r = 0; r < cnt; r++) s += rd(x, base + off[r]);
        double mean = cnt ? s / (double)cnt : 0;
        for (int64_t r = 0; r < cnt; r++) q += (rd(x, base + off[r]) - mean) * (rd(x, base + off[r]) - mean);
        double sd = sqrt(cnt ? q / (double)cnt : 0) + 1e-9; /* the function body's epsilon */
        for (int64_t r = 0; r < cnt; r++) wr(y, base + off[r], (rd(x, base + off[r]) - mean) / sd);
        for (int i = (int)nk - 1; i >= 0; i--) {
            if (++kidx[i] < kd[i]) break;
            kidx[i] = 0;
        }
    }
    return 0;
}

int mp_cpu_LpNormalization(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0);
    if (!x || !y || !mp_same_shape(x, y) || x->dtype != y->dtype) return mp_fail(err, "output must match the input");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    int64_t axis = mp_attr_int(k->node, "axis", -1), p = mp_attr_int(k->node, "p", 2);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank || (p != 1 && p != 2)) return mp_fail(err, "bad axis or p (1 or 2)");
    int64_t outer = 1, d = x->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) inner *= x->dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < d; j++) {
                double v = rd(x, (o * d + j) * inner + i);
                s += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? s : sqrt(s);
            for (int64_t j = 0; j < d; j++) {
                int64_t at = (o * d + j) * inner + i;
                wr(y, at, norm ? rd(x, at) / norm : 0); /* a zero vector stays zero */
            }
        }
    return 0;
}

/* ---- Dropout ------------------------------------------------------------------ */

/* Training mode keeps an element when its uniform draw is >= ratio and scales
 * it by 1/(1-ratio). Draws come from mp_rng_uniform(seed, node, i), so the
 * mask depends only on the run's seed, the node and the element. */
int mp_cpu_Dropout(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *y = mp_kout(k, 0), *mask = mp_kout(k, 1);
    if (!x || !y || x->numel != y->numel || x->dtype != y->dtype) return mp_fail(err, "output must match the input");
    if (mask && mask->numel != x->numel) return mp_fail(err, "mask must match the input");
    double ratio = k->opset >= 12 ? (mp_kin(k, 1) ? mp_scalar_f64(k->in[1]) : 0.5) : mp_attr_float(k->node, "ratio", 0.5f);
    bool train = k->opset >= 12 && mp_kin(k, 2) && mp_scalar_i64(k->in[2]) != 0;
    if (train && (ratio < 0 || ratio > 1)) return mp_fail(err, "ratio %g outside [0, 1]", ratio);
    if (!train || ratio == 0) {
        int rc = mp_copy_tensor(x, y, err);
        if (rc) return rc;
        if (mask) for (int64_t i = 0; i < mask->numel; i++) mp_tensor_set_i64(mask, i, 1);
        return 0;
    }
    if (!is_f(x)) return mp_kunsupported(err, "training dropout on %s", mp_dtype_name(x->dtype));
    double scale = ratio < 1 ? 1 / (1 - ratio) : 0;
    for (int64_t i = 0; i < x->numel; i++) {
        bool keep = mp_rng_uniform(k->seed, k->node_id, i) >= ratio;
        wr(y, i, keep ? rd(x, i) * scale : 0);
        if (mask) mp_tensor_set_i64(mask, i, keep);
    }
    return 0;
}

/* ---- losses ------------------------------------------------------------------- */

/* Shared by both losses: lp(n, c, d) reads the log-probability of class c. */
static int run_nll(const mp_kargs *k, const mp_tensor *lp, const mp_tensor *lab, const mp_tensor *w, mp_tensor *loss, mp_err *err)
{
    if (!lp || !lab || !loss) return mp_fail(err, "missing input or output");
    if (!is_f(lp) || !is_f(loss) || (w && !is_f(w))) return mp_kunsupported(err, "dtype %s", mp_dtype_name(lp->dtype));
    if (lab->dtype != MP_INT32 && lab->dtype != MP_INT64) return mp_fail(err, "labels must be int32 or int64");
    if (lp->rank < 2 || lab->rank != lp->rank - 1 || lab->dims[0] != lp->dims[0]) return mp_fail(err, "labels must be [N, d1, ...] for scores [N, C, d1, ...]");
    for (int i = 1; i < lab->rank; i++)
        if (lab->dims[i] != lp->dims[i + 1]) return mp_fail(err, "labels dim %d disagrees with the scores", i);
    int64_t N = lp->dims[0], C = lp->dims[1], D = N ? lab->numel / N : 0;
    if (w && w->numel != C) return mp_fail(err, "weights must have C elements");
    const char *red = mp_attr_str(k->node, "reduction", "mean");
    bool none = !strcmp(red, "none"), mean = !strcmp(red, "mean");
    if (!none && !mean && strcmp(red, "sum")) return mp_fail(err, "unknown reduction '%s'", red);
    if (none ? loss->numel != lab->numel : loss->numel != 1) return mp_fail(err, "loss shape disagrees with the reduction");
    const mp_attr *ig = mp_node_attr(k->node, "ignore_index");
    double total = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t t = mp_tensor_get_i64(lab, n * D + d), at = n * D + d;
            double l = 0, wt = 0;
            if (!(ig && t == ig->i)) {
                if (t < 0 || t >= C) return mp_fail(err, "label %lld out of range for %lld classes", (long long)t, (long long)C);
                wt = w ? rd(w, t) : 1;
                l = -rd(lp, (n * C + t) * D + d) * wt;
            }
            if (none) wr(loss, at, l);
            total += l;
            wsum += wt;
        }
    if (!none) wr(loss, 0, mean ? total / wsum : total);
    return 0;
}

int mp_cpu_NegativeLogLikelihoodLoss(const mp_kargs *k, mp_err *err)
{
    return run_nll(k, mp_kin(k, 0), mp_kin(k, 1), mp_kin(k, 2), mp_kout(k, 0), err);
}

int mp_cpu_SoftmaxCrossEntropyLoss(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *x = mp_kin(k, 0);
    mp_tensor *lpo = mp_kout(k, 1);
    if (!x || x->rank < 2) return mp_fail(err, "scores must be [N, C, ...]");
    if (!is_f(x)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(x->dtype));
    if (lpo && (!mp_same_shape(lpo, x) || lpo->dtype != x->dtype)) return mp_fail(err, "log_prob must match the scores");
    /* log_softmax over axis 1, into log_prob or scratch */
    mp_tensor tmp = *x;
    mp_tensor *lp = lpo;
    if (!lp) {
        tmp.data = mp_scratch_array(k->scratch, x->numel ? x->numel : 1, mp_elem_size(x->dtype));
        if (!tmp.data) return mp_fail(err, "out of scratch memory");
        lp = &tmp;
    }
    int64_t N = x->dims[0], C = x->dims[1], D = (N * C) != 0 ? x->numel / (N * C) : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) m = fmax(m, rd(x, (n * C + c) * D + d));
            for (int64_t c = 0; c < C; c++) s += exp(rd(x, (n * C + c) * D + d) - m);
            for (int64_t c = 0; c < C; c++) wr(lp, (n * C + c) * D + d, rd(x, (n * C + c) * D + d) - m - log(s));
        }
    return run_nll(k, lp, mp_kin(k, 1), mp_kin(k, 2), mp_kout(k, 0), err);
}
