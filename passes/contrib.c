/* contrib.c - writes onnxruntime's fused contrib ops (what its transformer
 * optimizer leaves in a model), and the ONNX function ops that have no
 * gradient rule of their own, as the ONNX ops they stand for, before autodiff:
 *
 *   Gelu (com.microsoft)                      Gelu(X)
 *   BiasGelu (com.microsoft)                  Gelu(X + bias)
 *   FastGelu (com.microsoft)                  Gelu(X [+ bias]){approximate tanh}
 *   SimplifiedLayerNormalization              RMSNormalization(X, scale){axis, epsilon, stash_type}
 *   SkipLayerNormalization (com.microsoft)    s = input + skip [+ bias]; LayerNormalization(s, gamma[, beta])
 *   SkipSimplifiedLayerNormalization (c.m.)   s = input + skip [+ bias]; RMSNormalization(s, gamma)
 *   FusedMatMul (com.microsoft)               alpha * MatMul(A or A^T, B or B^T)
 *   Attention (com.microsoft)                 Split(input W + b) into q, k, v; Attention(q, k, v, mask)
 *   MeanVarianceNormalization                 d = X - mean(X); d / (sqrt(mean(d^2)) + 1e-9) over axes
 *
 * The rewrite writes the node's own output values (the Skip ops' sum goes to
 * input_skip_bias_sum, LayerNormalization's statistics to mean and
 * inv_std_var), so the step then trains by the ONNX ops' gradient rules,
 * runs on the CPU executor, lowers to CUDA, and saves what those rules save.
 * What has no ONNX form here is refused by name: the RMS forms' statistics
 * when something reads them, FusedMatMul's transBatch attributes,
 * Attention's past state and masks other than the 2-D raw one. */
#include <stdio.h>
#include <string.h>

#include "passes/autodiff.h"

typedef struct rw {
    mp_ad ad;          /* ad.err holds the first failure: once it has one, nothing more is emitted */
    mp_graph *g;
    const mp_node *n; /* the node rewritten (a copy: the node array grows) */
} rw;

#define IN(k) ((k) < r->n->nin ? r->n->in[k] : -1)
#define OUT(k) ((k) < r->n->nout ? r->n->out[k] : -1)

static bool failed(const rw *r) { return r->ad.err->msg[0] != 0; }

/* "<node>/<what>", the name of a node the rewrite adds. */
static void part_name(const rw *r, const char *what, char *name, size_t len)
{
    snprintf(name, len, "%s/%s", r->n->name ? r->n->name : "", what);
}

/* op(in...) named "<node>/<what>", its output out (-1: a new value), not yet inferred; -1 after a failure. */
static int32_t begin(rw *r, const char *op, int nin, const int32_t *in, int32_t *out, const char *what)
{
    if (failed(r)) return -1;
    char name[512];
    part_name(r, what, name, sizeof name);
    if (*out < 0) *out = ad_value(&r->ad, name, "", MP_ROLE_ACTIVATION);
    return mp_graph_add_node(r->g, name, op, "", nin, in, 1, out);
}

static int32_t finish(rw *r, int32_t node, int32_t out)
{
    return node < 0 || failed(r) || ad_infer(&r->ad, node) ? -1 : out;
}

static int32_t emit(rw *r, const char *op, int nin, const int32_t *in, int32_t out, const char *what)
{
    int32_t n = begin(r, op, nin, in, &out, what); /* sets out first */
    return finish(r, n, out);
}

static bool read_later(const rw *r, int32_t v)
{
    return v >= 0 && (r->g->values[v].ncons > 0 || (r->g->values[v].flags & MP_VAL_OUTPUT));
}

/* Fails, naming the node, when output k is read: its ONNX form has no such output. */
static void no_output(rw *r, int k, const char *what)
{
    if (!failed(r) && read_later(r, OUT(k))) mp_fail(r->ad.err, "its output %d (%s) has no ONNX form here", k, what);
}

/* Gelu(x) into the node's output, approximate "tanh" or none. */
static void gelu(rw *r, int32_t x, bool tanh)
{
    int32_t out = OUT(0), n = begin(r, "Gelu", 1, &x, &out, "gelu");
    if (n >= 0 && tanh) ad_attr_str(r->g, &r->g->nodes[n], "approximate", "tanh");
    finish(r, n, out);
}

/* input + skip [+ bias], written into input_skip_bias_sum when the node has it. */
static int32_t skip_sum(rw *r, int32_t bias)
{
    int32_t in[2] = {IN(0), IN(1)};
    int32_t s = emit(r, "Add", 2, in, bias >= 0 ? -1 : OUT(3), "skip_add");
    in[0] = s, in[1] = bias;
    return bias >= 0 ? emit(r, "Add", 2, in, OUT(3), "bias_add") : s;
}

static void rewrite_gelu(rw *r) { gelu(r, IN(0), false); }

static void rewrite_bias_gelu(rw *r)
{
    int32_t in[2] = {IN(0), IN(1)};
    gelu(r, IN(1) >= 0 ? emit(r, "Add", 2, in, -1, "bias_add") : IN(0), false);
}

static void rewrite_fast_gelu(rw *r)
{
    int32_t in[2] = {IN(0), IN(1)};
    gelu(r, IN(1) >= 0 ? emit(r, "Add", 2, in, -1, "bias_add") : IN(0), true);
}

/* RMSNormalization(x, scale) into the node's output, the node's axis, epsilon (default eps) and stash_type. */
static void rms(rw *r, int32_t x, int32_t scale, float eps)
{
    int32_t in[2] = {x, scale}, out = OUT(0);
    int32_t n = begin(r, "RMSNormalization", 2, in, &out, "rms");
    if (n < 0) return;
    mp_node *nd = &r->g->nodes[n];
    ad_attr_int(r->g, nd, "axis", mp_attr_int(r->n, "axis", -1));
    ad_attr_float(r->g, nd, "epsilon", mp_attr_float(r->n, "epsilon", eps));
    ad_attr_int(r->g, nd, "stash_type", mp_attr_int(r->n, "stash_type", MP_FLOAT));
    finish(r, n, out);
}

static void rewrite_simplified_norm(rw *r)
{
    no_output(r, 1, "inv_std_var");
    rms(r, IN(0), IN(1), 1e-5f); /* LayerNormalization's default */
}

static void rewrite_skip_simplified_norm(rw *r)
{
    no_output(r, 1, "mean");
    no_output(r, 2, "inv_std_var");
    rms(r, skip_sum(r, IN(3)), IN(2), 1e-12f); /* the Skip ops' default */
}

static void rewrite_skip_norm(rw *r)
{
    int32_t in[3] = {skip_sum(r, IN(4)), IN(2), IN(3)}, out[3] = {OUT(0), OUT(1), OUT(2)};
    if (failed(r)) return;
    char name[512];
    part_name(r, "layer_norm", name, sizeof name);
    int nout = out[2] >= 0 ? 3 : out[1] >= 0 ? 2 : 1;
    int32_t n = mp_graph_add_node(r->g, name, "LayerNormalization", "", in[2] >= 0 ? 3 : 2, in, nout, out);
    ad_attr_int(r->g, &r->g->nodes[n], "axis", -1);
    ad_attr_float(r->g, &r->g->nodes[n], "epsilon", mp_attr_float(r->n, "epsilon", 1e-12f));
    finish(r, n, out[0]);
}

/* A^T over the last two axes, for transA / transB. */
static int32_t last_two_swapped(rw *r, int32_t x, const char *what)
{
    int rank = x >= 0 ? r->g->values[x].rank : -1;
    if (rank < 2) {
        if (!failed(r)) mp_fail(r->ad.err, "a transposed operand needs rank 2 or more");
        return -1;
    }
    int64_t perm[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) perm[i] = i;
    perm[rank - 2] = rank - 1, perm[rank - 1] = rank - 2;
    int32_t out = -1, n = begin(r, "Transpose", 1, &x, &out, what);
    if (n >= 0) ad_attr_ints(r->g, &r->g->nodes[n], "perm", perm, rank);
    return finish(r, n, out);
}

static void rewrite_fused_matmul(rw *r)
{
    if (mp_attr_int(r->n, "transBatchA", 0) || mp_attr_int(r->n, "transBatchB", 0)) {
        mp_fail(r->ad.err, "transBatchA / transBatchB have no ONNX form here");
        return;
    }
    int32_t in[2] = {IN(0), IN(1)};
    if (mp_attr_int(r->n, "transA", 0)) in[0] = last_two_swapped(r, in[0], "a_t");
    if (mp_attr_int(r->n, "transB", 0)) in[1] = last_two_swapped(r, in[1], "b_t");
    double alpha = mp_attr_float(r->n, "alpha", 1.0f);
    int32_t y = emit(r, "MatMul", 2, in, alpha == 1.0 ? OUT(0) : -1, "matmul");
    if (alpha == 1.0 || y < 0) return;
    int32_t s[2] = {y, ad_const_scalar(&r->ad, r->g->values[y].dtype, alpha)};
    emit(r, "Mul", 2, s, OUT(0), "alpha");
}

/* Attention (com.microsoft), without past state: q, k, v = Split(input weights + bias) (qkv_hidden_sizes,
 * else thirds); a 2-D mask_index (1 keep, 0 mask: onnxruntime's raw attention mask) becomes the additive
 * (1 - mask) mask_filter_value over [B, 1, 1, T]; ONNX's Attention{q_num_heads = kv_num_heads =
 * num_heads, is_causal = unidirectional, scale} on the 3-D q, k, v. */
static void rewrite_attention(rw *r)
{
    static const char *const refused[] = {"the past state (input 4)", "attention_bias (input 5)",
                                          "past_sequence_length (input 6)"};
    for (int k = 4; k < 7; k++)
        if (IN(k) >= 0) {
            mp_fail(r->ad.err, "%s is not supported", refused[k - 4]);
            return;
        }
    no_output(r, 1, "present");
    if (!failed(r) && (mp_attr_int(r->n, "do_rotary", 0) || mp_attr_int(r->n, "past_present_share_buffer", 0)))
        mp_fail(r->ad.err, "do_rotary and past_present_share_buffer are not supported");
    int32_t mask = IN(3);
    if (!failed(r) && mask >= 0 && r->g->values[mask].rank != 2)
        mp_fail(r->ad.err, "a mask_index of rank %d is not supported (only the 2-D raw attention mask)",
                r->g->values[mask].rank);
    int32_t in[4] = {IN(0), IN(1)};
    int32_t qkv = emit(r, "MatMul", 2, in, -1, "qkv");
    in[0] = qkv, in[1] = IN(2);
    if (IN(2) >= 0) qkv = emit(r, "Add", 2, in, -1, "qkv_bias");
    if (failed(r)) return;
    const int64_t *sizes;
    int nsizes = mp_attr_ints(r->n, "qkv_hidden_sizes", &sizes);
    int32_t split_in[2] = {qkv, nsizes == 3 ? ad_const_ints(&r->ad, sizes, 3) : -1}, parts[3] = {-1, -1, -1};
    char name[512];
    part_name(r, "split", name, sizeof name);
    for (int k = 0; k < 3; k++) parts[k] = ad_value(&r->ad, name, k == 0 ? "_q" : k == 1 ? "_k" : "_v", MP_ROLE_ACTIVATION);
    int32_t sn = mp_graph_add_node(r->g, name, "Split", "", nsizes == 3 ? 2 : 1, split_in, 3, parts);
    ad_attr_int(r->g, &r->g->nodes[sn], "axis", -1);
    if (finish(r, sn, parts[0]) < 0) return;
    int32_t additive = -1;
    if (mask >= 0) {
        mp_dtype dt = r->g->values[IN(0)].dtype;
        int32_t m = -1, cn = begin(r, "Cast", 1, &mask, &m, "mask_float");
        if (cn >= 0) ad_attr_int(r->g, &r->g->nodes[cn], "to", dt);
        m = finish(r, cn, m);
        int32_t sub[2] = {ad_const_scalar(&r->ad, dt, 1), m};
        int32_t mul[2] = {emit(r, "Sub", 2, sub, -1, "mask_inverted"),
                          ad_const_scalar(&r->ad, dt, mp_attr_float(r->n, "mask_filter_value", -10000.0f))};
        int64_t shape[4] = {r->g->values[mask].dims[0].v, 1, 1, r->g->values[mask].dims[1].v};
        if (shape[0] < 0 || shape[3] < 0) {
            mp_fail(r->ad.err, "mask_index has unbound dims");
            return;
        }
        int32_t rs[2] = {emit(r, "Mul", 2, mul, -1, "mask_additive"), ad_const_ints(&r->ad, shape, 4)};
        additive = emit(r, "Reshape", 2, rs, -1, "mask_4d");
    }
    int32_t at[4] = {parts[0], parts[1], parts[2], additive}, out = OUT(0);
    int32_t an = begin(r, "Attention", additive >= 0 ? 4 : 3, at, &out, "attention");
    if (an < 0) return;
    mp_node *nd = &r->g->nodes[an];
    int64_t heads = mp_attr_int(r->n, "num_heads", 0);
    ad_attr_int(r->g, nd, "q_num_heads", heads);
    ad_attr_int(r->g, nd, "kv_num_heads", heads);
    if (mp_attr_int(r->n, "unidirectional", 0)) ad_attr_int(r->g, nd, "is_causal", 1);
    if (mp_node_attr(r->n, "scale")) ad_attr_float(r->g, nd, "scale", mp_attr_float(r->n, "scale", 1.0f));
    finish(r, an, out);
}

/* ReduceMean(x) over axes, keepdims 1: the axes an input from opset 18, an attribute before. */
static int32_t mean_over(rw *r, int32_t x, const int64_t *axes, int naxes, const char *what)
{
    bool input = mp_graph_opset(r->g, "") >= 18;
    int32_t in[2] = {x, input ? ad_const_ints(&r->ad, axes, naxes) : -1}, out = -1;
    int32_t n = begin(r, "ReduceMean", input ? 2 : 1, in, &out, what);
    if (n >= 0 && !input) ad_attr_ints(r->g, &r->g->nodes[n], "axes", axes, naxes);
    return finish(r, n, out);
}

/* MeanVarianceNormalization (axes, default [0, 2, 3]): the function body's epsilon, the variance taken
 * about the mean as runtime/cpu_norm.c takes it (the body's E[X^2] - E[X]^2 cancels). */
static void rewrite_mvn(rw *r)
{
    static const int64_t def[3] = {0, 2, 3};
    const int64_t *axes = def;
    int naxes = mp_attr_ints(r->n, "axes", &axes);
    if (naxes < 0) axes = def, naxes = 3;
    if (naxes == 0) {
        mp_fail(r->ad.err, "an empty axes list is not supported");
        return;
    }
    int32_t mean = mean_over(r, IN(0), axes, naxes, "mean");
    int32_t d = emit(r, "Sub", 2, (int32_t[]){IN(0), mean}, -1, "centered");
    int32_t sq = emit(r, "Mul", 2, (int32_t[]){d, d}, -1, "squared");
    int32_t sd = emit(r, "Sqrt", 1, (int32_t[]){mean_over(r, sq, axes, naxes, "variance")}, -1, "std");
    int32_t eps = ad_const_scalar(&r->ad, r->g->values[IN(0)].dtype, 1e-9);
    emit(r, "Div", 2, (int32_t[]){d, emit(r, "Add", 2, (int32_t[]){sd, eps}, -1, "std_eps")}, OUT(0), "normalized");
}

static const struct contrib_op {
    const char *op, *domain;
    void (*rewrite)(rw *r);
} contrib_ops[] = {
    {"Gelu", "com.microsoft", rewrite_gelu},
    {"BiasGelu", "com.microsoft", rewrite_bias_gelu},
    {"FastGelu", "com.microsoft", rewrite_fast_gelu},
    {"SimplifiedLayerNormalization", "", rewrite_simplified_norm},
    {"SkipLayerNormalization", "com.microsoft", rewrite_skip_norm},
    {"SkipSimplifiedLayerNormalization", "com.microsoft", rewrite_skip_simplified_norm},
    {"FusedMatMul", "com.microsoft", rewrite_fused_matmul},
    {"Attention", "com.microsoft", rewrite_attention},
    {"MeanVarianceNormalization", "", rewrite_mvn},
};

static const struct contrib_op *contrib_of(const char *op, const char *domain)
{
    const char *d = domain && strcmp(domain, "ai.onnx") ? domain : "";
    for (size_t k = 0; k < sizeof contrib_ops / sizeof *contrib_ops; k++)
        if (!strcmp(op, contrib_ops[k].op) && !strcmp(d, contrib_ops[k].domain)) return &contrib_ops[k];
    return NULL;
}

bool mp_contrib_rewrites(const char *op, const char *domain) { return contrib_of(op, domain) != NULL; }

static bool is_contrib(const mp_node *n) { return contrib_of(n->op_type, n->domain) != NULL; }

static int rewrite(mp_graph *g, int32_t node, mp_err *err)
{
    mp_err inner = {{0}};
    const mp_node n = g->nodes[node];
    rw r = {.ad = {g, &inner, MP_PHASE_FORWARD, g->nvalues, NULL, NULL, NULL}, .g = g, .n = &n};
    contrib_of(n.op_type, n.domain)->rewrite(&r);
    if (failed(&r))
        return mp_fail(err, "node '%s' (%s, %s): %s", n.name, n.op_type, n.domain && *n.domain ? n.domain : "ai.onnx",
                       inner.msg);
    return 0;
}

int mp_contrib_lower(mp_graph *g, mp_err *err) { return mp_expand_nodes(g, is_contrib, rewrite, err); }
