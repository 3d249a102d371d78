/* test_contrib.c - onnxruntime's contrib ops written as ONNX ops
 * (passes/contrib.c), run on the CPU executor in float64 against the
 * operators' definitions written out here (onnxruntime's contrib op docs):
 * BiasGelu, FastGelu (tanh form, with and without bias), Gelu,
 * SkipLayerNormalization (all three outputs it can give: output, mean and
 * input_skip_bias_sum), SkipSimplifiedLayerNormalization,
 * SimplifiedLayerNormalization, FusedMatMul (transA, transB, alpha) and
 * Attention (a raw 2-D mask; unidirectional with a scale).
 * Their gradients are checked by finite differences in test_grad_rules; what
 * the rewrite refuses is checked here by name. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/infer.h"
#include "passes/autodiff.h"
#include "runtime/exec.h"

#define B 2
#define S 3
#define H 4

static double x[B * S * H], skip[B * S * H], gamma_[H], beta[H], bias[H], wqkv[H * 3 * H], bqkv[3 * H];

static void fill(void)
{
    uint64_t s = 7;
    double *all[] = {x, skip, gamma_, beta, bias, wqkv, bqkv};
    int64_t n[] = {B * S * H, B * S * H, H, H, H, H * 3 * H, 3 * H};
    for (int a = 0; a < 7; a++)
        for (int64_t i = 0; i < n[a]; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            all[a][i] = (double)(s >> 11) / 9007199254740992.0 * 3 - 1.5;
        }
}

enum { NIN = 8 };
typedef struct net {
    mp_graph *g;
    int32_t in[NIN]; /* x, skip, gamma, beta, bias, wqkv, bqkv (float64) and mask (int64): graph inputs */
} net;

static const int64_t mask[B * S] = {1, 1, 0, 1, 0, 0}; /* onnxruntime's raw attention mask: 1 keeps a key */

static int32_t value(mp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int32_t v = mp_graph_add_value(g, name);
    mp_dim d[3];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    if (rank >= 0) mp_value_set(g, v, MP_DOUBLE, rank, d);
    return v;
}

static net make(void)
{
    net n = {mp_graph_new(NULL), {0}};
    static const char *const names[NIN] = {"x", "skip", "gamma", "beta", "bias", "wqkv", "bqkv", "mask"};
    int64_t big[3] = {B, S, H}, small[1] = {H}, w[2] = {H, 3 * H}, b3[1] = {3 * H}, m[2] = {B, S};
    const int64_t *dims[NIN] = {big, big, small, small, small, w, b3, m};
    const int rank[NIN] = {3, 3, 1, 1, 1, 2, 1, 2};
    for (int k = 0; k < NIN; k++) n.in[k] = value(n.g, names[k], rank[k], dims[k]);
    mp_dim md[2] = {mp_dim_of(B), mp_dim_of(S)};
    mp_value_set(n.g, n.in[7], MP_INT64, 2, md);
    for (int k = 0; k < NIN; k++) n.g->values[n.in[k]].flags = MP_VAL_INPUT;
    n.g->inputs = mp_arena_dup(n.g->arena, n.in, sizeof n.in), n.g->ninputs = NIN;
    return n;
}

static mp_node *node(net *n, const char *op, const char *domain, int nin, const int32_t *in, int nout, int32_t *out)
{
    for (int k = 0; k < nout; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%d", op, (int)n->g->nvalues);
        if (out[k] == 0) out[k] = value(n->g, name, -1, NULL); /* 0: a new value named after the op */
    }
    int32_t id = mp_graph_add_node(n->g, op, op, domain, nin, in, nout, out);
    return &n->g->nodes[id];
}

/* Gives node nd the count attributes a (copied into the graph's arena). */
static void set_attrs(net *n, mp_node *nd, int count, const mp_attr *a)
{
    nd->attrs = mp_arena_dup(n->g->arena, a, (size_t)count * sizeof *a), nd->nattrs = count;
}

/* Rewrites and runs n with `outs` as its outputs; returns the executor (the caller frees it). */
static mp_exec *run(net *n, const int32_t *outs, int nouts)
{
    mp_err err = {{0}};
    mp_graph *g = n->g;
    g->outputs = mp_arena_dup(g->arena, outs, (size_t)nouts * sizeof *outs), g->noutputs = nouts;
    for (int k = 0; k < nouts; k++) g->values[outs[k]].flags |= MP_VAL_OUTPUT;
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    ck_assert_msg(!mp_contrib_lower(g, &err), "%s", err.msg);
    for (int32_t i = 0; i < g->nnodes; i++)
        ck_assert_msg(!g->nodes[i].domain || strcmp(g->nodes[i].domain, "com.microsoft"), "node '%s' left in com.microsoft",
                      g->nodes[i].name);
    mp_exec *ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s", err.msg);
    const void *data[NIN] = {x, skip, gamma_, beta, bias, wqkv, bqkv, mask};
    for (int k = 0; k < NIN; k++) {
        const mp_value *v = &g->values[n->in[k]];
        int64_t dims[3];
        for (int i = 0; i < v->rank; i++) dims[i] = v->dims[i].v;
        mp_tensor *t = mp_tensor_new(g->arena, v->dtype, v->rank, dims);
        memcpy(t->data, data[k], (size_t)t->numel * 8); /* float64 or int64 */
        ck_assert_msg(!mp_exec_bind(ex, n->in[k], t, &err), "%s", err.msg);
    }
    ck_assert_msg(!mp_exec_run(ex, &err), "%s", err.msg);
    return ex;
}

static void expect(const mp_exec *ex, int32_t v, const double *want, int64_t count, const char *what)
{
    const mp_tensor *t = mp_exec_value(ex, v);
    ck_assert_msg(t && t->numel == count, "%s: %lld elements", what, t ? (long long)t->numel : -1LL);
    double rtol = t->dtype == MP_DOUBLE ? 1e-12 : 1e-6; /* the statistics are float, as onnxruntime's */
    for (int64_t i = 0; i < count; i++) {
        double got = mp_tensor_get_f64(t, i);
        ck_assert_msg(fabs(got - want[i]) <= rtol * (1 + fabs(want[i])), "%s[%lld]: %.17g, want %.17g", what,
                      (long long)i, got, want[i]);
    }
}

static double gelu_erf(double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); }
static double gelu_tanh(double v) { return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }

START_TEST(gelus)
{
    net n = make();
    int32_t bg = 0, fg = 0, fgb = 0, g = 0;
    node(&n, "BiasGelu", "com.microsoft", 2, (int32_t[]){n.in[0], n.in[4]}, 1, &bg);
    node(&n, "FastGelu", "com.microsoft", 1, &n.in[0], 1, &fg);
    node(&n, "FastGelu", "com.microsoft", 2, (int32_t[]){n.in[1], n.in[4]}, 1, &fgb);
    node(&n, "Gelu", "com.microsoft", 1, &n.in[1], 1, &g);
    mp_exec *ex = run(&n, (int32_t[]){bg, fg, fgb, g}, 4);
    double w[4][B * S * H];
    for (int i = 0; i < B * S * H; i++) {
        w[0][i] = gelu_erf(x[i] + bias[i % H]);
        w[1][i] = gelu_tanh(x[i]);
        w[2][i] = gelu_tanh(skip[i] + bias[i % H]);
        w[3][i] = gelu_erf(skip[i]);
    }
    expect(ex, bg, w[0], B * S * H, "BiasGelu");
    expect(ex, fg, w[1], B * S * H, "FastGelu");
    expect(ex, fgb, w[2], B * S * H, "FastGelu with bias");
    expect(ex, g, w[3], B * S * H, "Gelu");
    mp_exec_free(ex);
    mp_graph_free(n.g);
}
END_TEST

/* s = x + skip + bias per row; the layer norm (or RMS norm) of each row of H. */
static void norm_rows(bool rms, double eps, double *y, double *mean, double *inv_std, double *sum)
{
    for (int r = 0; r < B * S; r++) {
        double s[H], mu = 0, var = 0;
        for (int j = 0; j < H; j++) s[j] = x[r * H + j] + skip[r * H + j] + bias[j], mu += s[j] / H;
        if (rms) mu = 0;
        for (int j = 0; j < H; j++) var += (s[j] - mu) * (s[j] - mu) / H;
        double is = 1 / sqrt(var + eps);
        for (int j = 0; j < H; j++) {
            y[r * H + j] = (s[j] - mu) * is * gamma_[j] + (rms ? 0 : beta[j]);
            if (sum) sum[r * H + j] = s[j];
        }
        if (mean) mean[r] = mu;
        if (inv_std) inv_std[r] = is;
    }
}

START_TEST(skip_layer_norms)
{
    net n = make();
    int32_t out[4] = {0, 0, 0, 0}, sout[4] = {0, -1, -1, 0};
    mp_node *ln = node(&n, "SkipLayerNormalization", "com.microsoft", 5, n.in, 4, out);
    set_attrs(&n, ln, 1, (mp_attr[]){{.name = "epsilon", .type = MP_ATTR_FLOAT, .f = 1e-3f}});
    /* no epsilon attribute: onnxruntime's default, 1e-12 */
    node(&n, "SkipSimplifiedLayerNormalization", "com.microsoft", 4, (int32_t[]){n.in[0], n.in[1], n.in[2], n.in[4]},
         4, sout);
    mp_exec *ex = run(&n, (int32_t[]){out[0], out[1], out[2], out[3], sout[0], sout[3]}, 6);
    double y[B * S * H], mean[B * S], is[B * S], sum[B * S * H];
    norm_rows(false, (double)1e-3f, y, mean, is, sum);
    expect(ex, out[0], y, B * S * H, "SkipLayerNormalization output");
    expect(ex, out[1], mean, B * S, "SkipLayerNormalization mean");
    expect(ex, out[2], is, B * S, "SkipLayerNormalization inv_std_var");
    expect(ex, out[3], sum, B * S * H, "SkipLayerNormalization input_skip_bias_sum");
    norm_rows(true, (double)1e-12f, y, NULL, NULL, NULL);
    expect(ex, sout[0], y, B * S * H, "SkipSimplifiedLayerNormalization output");
    expect(ex, sout[3], sum, B * S * H, "SkipSimplifiedLayerNormalization input_skip_bias_sum");
    mp_exec_free(ex);
    mp_graph_free(n.g);
}
END_TEST

/* SimplifiedLayerNormalization over the last axis; FusedMatMul alpha x^T skip (each [S, H] of a batch), as
 * x^T [B, H, S] times skip [B, S, H]. */
START_TEST(simplified_norm_and_fused_matmul)
{
    net n = make();
    int32_t y = 0, mm = 0;
    mp_node *sn = node(&n, "SimplifiedLayerNormalization", "", 2, (int32_t[]){n.in[0], n.in[2]}, 1, &y);
    set_attrs(&n, sn, 1, (mp_attr[]){{.name = "epsilon", .type = MP_ATTR_FLOAT, .f = 1e-2f}});
    mp_node *fm = node(&n, "FusedMatMul", "com.microsoft", 2, (int32_t[]){n.in[0], n.in[1]}, 1, &mm);
    set_attrs(&n, fm, 2, (mp_attr[]){{.name = "transA", .type = MP_ATTR_INT, .i = 1},
                                    {.name = "alpha", .type = MP_ATTR_FLOAT, .f = 0.25f}});
    mp_exec *ex = run(&n, (int32_t[]){y, mm}, 2);
    double wy[B * S * H], wm[B * H * H];
    for (int r = 0; r < B * S; r++) {
        double ms = 0;
        for (int j = 0; j < H; j++) ms += x[r * H + j] * x[r * H + j] / H;
        for (int j = 0; j < H; j++) wy[r * H + j] = x[r * H + j] / sqrt(ms + (double)1e-2f) * gamma_[j];
    }
    for (int b = 0; b < B; b++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++) {
                double acc = 0;
                for (int k = 0; k < S; k++) acc += x[(b * S + k) * H + i] * skip[(b * S + k) * H + j];
                wm[(b * H + i) * H + j] = 0.25 * acc;
            }
    expect(ex, y, wy, B * S * H, "SimplifiedLayerNormalization");
    expect(ex, mm, wm, B * H * H, "FusedMatMul");
    mp_exec_free(ex);
    mp_graph_free(n.g);
}
END_TEST

/* onnxruntime's Attention (2 heads of 2): x W + b split in thirds, scores / sqrt(2) (or `scale`), the raw
 * mask's zeros as mask_filter_value (-10000) added, or unidirectional (causal), softmax, times V. */
static void attention_ref(bool masked, bool causal, double scale, double *out)
{
    double qkv[B * S * 3 * H];
    for (int r = 0; r < B * S; r++)
        for (int o = 0; o < 3 * H; o++) {
            double acc = bqkv[o];
            for (int i = 0; i < H; i++) acc += x[r * H + i] * wqkv[i * 3 * H + o];
            qkv[r * 3 * H + o] = acc;
        }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < S; i++) {
                double sc[S], mx = -INFINITY, sum = 0;
                for (int j = 0; j < S; j++) {
                    double d = 0;
                    for (int e = 0; e < 2; e++) d += qkv[(b * S + i) * 3 * H + h * 2 + e] * qkv[(b * S + j) * 3 * H + H + h * 2 + e];
                    sc[j] = d * scale + (masked ? (1.0 - (double)mask[b * S + j]) * -10000.0 : 0);
                    if (causal && j > i) sc[j] = -INFINITY;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < S; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < 2; e++) {
                    double acc = 0;
                    for (int j = 0; j < S; j++) acc += sc[j] / sum * qkv[(b * S + j) * 3 * H + 2 * H + h * 2 + e];
                    out[(b * S + i) * H + h * 2 + e] = acc;
                }
            }
}

START_TEST(attention)
{
    net n = make();
    int32_t masked = 0, causal = 0;
    mp_node *a = node(&n, "Attention", "com.microsoft", 4, (int32_t[]){n.in[0], n.in[5], n.in[6], n.in[7]}, 1, &masked);
    set_attrs(&n, a, 1, (mp_attr[]){{.name = "num_heads", .type = MP_ATTR_INT, .i = 2}});
    a = node(&n, "Attention", "com.microsoft", 2, (int32_t[]){n.in[0], n.in[5]}, 1, &causal);
    set_attrs(&n, a, 3, (mp_attr[]){{.name = "num_heads", .type = MP_ATTR_INT, .i = 2},
                                    {.name = "unidirectional", .type = MP_ATTR_INT, .i = 1},
                                    {.name = "scale", .type = MP_ATTR_FLOAT, .f = 0.5f}});
    mp_exec *ex = run(&n, (int32_t[]){masked, causal}, 2);
    double want[B * S * H], keep[3 * H];
    attention_ref(true, false, 1 / sqrt(2.0), want);
    expect(ex, masked, want, B * S * H, "Attention with a raw mask");
    memcpy(keep, bqkv, sizeof keep); /* the second node has no bias */
    memset(bqkv, 0, sizeof bqkv);
    attention_ref(false, true, 0.5, want);
    memcpy(bqkv, keep, sizeof keep);
    expect(ex, causal, want, B * S * H, "Attention unidirectional, scale 0.5, no bias");
    mp_exec_free(ex);
    mp_graph_free(n.g);
}
END_TEST

/* What has no ONNX form is refused, naming the node and the reason. */
/* MeanVarianceNormalization over axes {0, 2} of [B, S, H] (the statistics per s), against its definition:
 * (x - mean) / (sqrt(variance) + 1e-9); at opset 17 (ReduceMean's axes an attribute) and 18 (an input). */
START_TEST(mean_variance_normalization)
{
    net n = make();
    n.g->opsets = mp_arena_alloc(n.g->arena, sizeof *n.g->opsets), n.g->nopsets = 1;
    n.g->opsets[0] = (mp_opset){"", 17 + _i};
    int32_t y = 0;
    mp_node *mv = node(&n, "MeanVarianceNormalization", "", 1, &n.in[0], 1, &y);
    set_attrs(&n, mv, 1, (mp_attr[]){{.name = "axes", .type = MP_ATTR_INTS, .n = 2, .ints = (int64_t[]){0, 2}}});
    mp_exec *ex = run(&n, &y, 1);
    double want[B * S * H];
    for (int s = 0; s < S; s++) {
        double mean = 0, var = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) mean += x[(b * S + s) * H + h] / (B * H);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) var += pow(x[(b * S + s) * H + h] - mean, 2) / (B * H);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) want[(b * S + s) * H + h] = (x[(b * S + s) * H + h] - mean) / (sqrt(var) + 1e-9);
    }
    expect(ex, y, want, B * S * H, "MeanVarianceNormalization");
    mp_exec_free(ex);
    mp_graph_free(n.g);
}
END_TEST

START_TEST(refused)
{
    for (int k = 0; k < 3; k++) {
        net n = make();
        mp_err err = {{0}};
        int32_t out[2] = {0, 0}, y = 0;
        if (k == 0) { /* the RMS form's inv_std_var, read */
            node(&n, "SimplifiedLayerNormalization", "", 2, (int32_t[]){n.in[0], n.in[2]}, 2, out);
            node(&n, "Identity", "", 1, &out[1], 1, &y);
        } else if (k == 2) { /* an empty axes list: nothing to normalize over */
            mp_node *mv = node(&n, "MeanVarianceNormalization", "", 1, &n.in[0], 1, &y);
            set_attrs(&n, mv, 1, (mp_attr[]){{.name = "axes", .type = MP_ATTR_INTS, .n = 0, .ints = NULL}});
        } else {
            mp_node *fm = node(&n, "FusedMatMul", "com.microsoft", 2, (int32_t[]){n.in[0], n.in[1]}, 1, &y);
            set_attrs(&n, fm, 1, (mp_attr[]){{.name = "transBatchA", .type = MP_ATTR_INT, .i = 1}});
        }
        n.g->outputs = mp_arena_dup(n.g->arena, &y, sizeof y), n.g->noutputs = 1;
        ck_assert_msg(!mp_graph_link(n.g, &err) && !mp_infer(n.g, &err), "%s", err.msg);
        ck_assert_int_eq(mp_contrib_lower(n.g, &err), -1);
        static const char *const wants[3] = {"'SimplifiedLayerNormalization'", "'FusedMatMul' (FusedMatMul, com.microsoft)",
                                             "'MeanVarianceNormalization' (MeanVarianceNormalization, ai.onnx)"};
        static const char *const whys[3] = {"output 1 (inv_std_var) has no ONNX form", "transBatchA", "empty axes"};
        const char *want = wants[k], *why = whys[k];
        ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, why), "message: %s", err.msg);
        mp_graph_free(n.g);
    }
}
END_TEST

int main(void)
{
    fill();
    Suite *s = suite_create("contrib");
    TCase *tc = tcase_create("rewrite");
    tcase_add_test(tc, gelus);
    tcase_add_test(tc, skip_layer_norms);
    tcase_add_test(tc, simplified_norm_and_fused_matmul);
    tcase_add_test(tc, attention);
    tcase_add_loop_test(tc, mean_variance_normalization, 0, 2);
    tcase_add_test(tc, refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
