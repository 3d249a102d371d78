/* test_unroll_rnn.c - the unrolling of RNN, GRU and LSTM (passes/unroll_rnn.c)
 * run on the CPU executor, against:
 *
 *   1. ONNX's backend cases ../shared/onnx-backend/node/test_{lstm,gru,rnn,
 *      simple_rnn}_*: import, bind input_K.pb (integer inputs, sequence_lens,
 *      also as known contents), infer, unroll, run, compare every output with
 *      output_K.pb (rtol 1e-5, atol 1e-7: tighter than ONNX's 1e-3);
 *   2. the spec's equations written out below, in float64 (rtol 1e-12), on
 *      what the backend cases leave out: reverse and bidirectional, layout 1,
 *      clip, every activation with its alpha and beta, linear_before_reset,
 *      input_forget, peepholes with bias and both initial states, a sequence
 *      longer than 64 steps (Split and Concat in rounds);
 *   3. what it refuses, each failure naming the node and the reason.
 *
 * Each graph has a node before and after the recurrent one, so the unrolled
 * nodes must take its place in the order the executor runs. Prints a summary;
 * exits non-zero when a case fails, or when the backend directory exists and
 * no case of it ran. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/autodiff.h" /* mp_unroll_rnn */
#include "runtime/exec.h"
#include "test_files.h" /* defines: read_file, exists, read_pb */

/* The rows below leave trailing fields (activations, alpha, beta) zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define RTOL 1e-5
#define ATOL 1e-7
#define RTOL64 1e-12

static int failures;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            printf("FAIL ");                            \
            printf(__VA_ARGS__);                        \
            printf(" (%s:%d)\n", __FILE__, __LINE__);  \
            failures++;                                 \
        }                                               \
    } while (0)

static bool recurrent_left(const mp_graph *g)
{
    for (int32_t i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].op_type, "LSTM") || !strcmp(g->nodes[i].op_type, "GRU") ||
            !strcmp(g->nodes[i].op_type, "RNN"))
            return true;
    return false;
}

/* Worst |got - want| / (atol + rtol |want|) over the elements; > 1 fails. */
static double off(const mp_tensor *got, const mp_tensor *want, double rtol, double atol)
{
    if (!got || !want || got->numel != want->numel || got->rank != want->rank) return INFINITY;
    for (int i = 0; i < got->rank; i++)
        if (got->dims[i] != want->dims[i]) return INFINITY;
    double worst = 0;
    for (int64_t i = 0; i < want->numel; i++) {
        double a = mp_tensor_get_f64(got, i), b = mp_tensor_get_f64(want, i);
        worst = fmax(worst, isnan(a) ? INFINITY : fabs(a - b) / (atol + rtol * fabs(b)));
    }
    return worst;
}

/* ---- 1. ONNX's backend cases ------------------------------------------------ */

/* 0 passed, -1 failed (err says why); *worst: the worst error against the tolerance. */
static int backend_case(const char *dir, double *worst)
{
    char path[1600];
    mp_err err = {""};
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    mp_model *m = mp_onnx_load(path, &err);
    if (!m) return printf("  %s: import: %s\n", dir, err.msg), -1;
    mp_graph *g = m->graph;
    mp_tensor *in[16];
    int32_t ids[16];
    int nin = 0, rc = -1;
    mp_exec *x = NULL;
    for (int32_t k = 0; k < g->ninputs && nin < 16; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
        if (!exists(path)) break;
        mp_tensor *t = read_pb(g->arena, path, &err);
        if (!t) goto done;
        mp_dim d[MP_MAX_RANK];
        for (int i = 0; i < t->rank; i++) d[i] = mp_dim_of(t->dims[i]);
        mp_value_set(g, g->inputs[k], t->dtype, t->rank, d);
        if (mp_dtype_is_int(t->dtype)) g->values[g->inputs[k]].konst = t; /* sequence_lens */
        in[nin] = t, ids[nin++] = g->inputs[k];
    }
    if (mp_infer(g, &err) || mp_unroll_rnn(g, &err)) goto done;
    if (recurrent_left(g)) {
        mp_fail(&err, "a recurrent node is left after unrolling");
        goto done;
    }
    mp_exec_opts o = {.poison = true};
    if (!(x = mp_exec_new(g, &o, &err))) goto done;
    for (int i = 0; i < nin; i++)
        if (mp_exec_bind(x, ids[i], in[i], &err)) goto done;
    if (mp_exec_run(x, &err)) goto done;
    *worst = 0;
    for (int32_t k = 0; k < g->noutputs; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", dir, k);
        mp_tensor *want = exists(path) ? read_pb(g->arena, path, &err) : NULL;
        if (!want) continue;
        double w = off(mp_exec_value(x, g->outputs[k]), want, RTOL, ATOL);
        *worst = fmax(*worst, w);
        if (w > 1) {
            mp_fail(&err, "output '%s' is off by %.3g of the tolerance", g->values[g->outputs[k]].name, w);
            goto done;
        }
    }
    rc = 0;
done:
    if (rc) printf("  %s: %s\n", dir, err.msg);
    mp_exec_free(x);
    mp_onnx_close(m);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every case; returns the number that ran (-1: no directory). */
static int backend_cases(int *passed)
{
    char root[1100];
    snprintf(root, sizeof root, "%s/onnx-backend/node", MEMPLAN_SHARED);
    DIR *d = opendir(root);
    if (!d) return -1;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (!strncmp(e->d_name, "test_", 5) &&
            (strstr(e->d_name, "lstm") || strstr(e->d_name, "gru") || strstr(e->d_name, "rnn")))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char dir[1400];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        double worst = INFINITY;
        int rc = backend_case(dir, &worst);
        *passed += !rc;
        failures += rc != 0;
        printf("  %-36s %s", names[i], rc ? "FAILED\n" : "passed");
        if (!rc) printf(", worst error %.2f of the tolerance\n", worst);
        free(names[i]);
    }
    return n;
}

/* ---- 2. the spec's equations ------------------------------------------------- */

typedef struct rcase {
    const char *name, *op;
    int T, B, I, H;
    const char *direction; /* NULL: forward */
    int layout;
    bool bias, h0, c0, peep, seq_lens;
    float clip;            /* 0: none */
    int lbr, input_forget;
    const char *acts[6];   /* NULL-ended; none: the defaults */
    float alpha[4], beta[4];
    int nalpha, nbeta;
    int opset;             /* 0: 22 */
} rcase;

static const rcase rcases[] = {
    {"lstm_bidirectional_peepholes_clip_acts", "LSTM", 4, 3, 2, 3, "bidirectional", 0, true, true, true, true, true, 0.7f,
     0, 0, {"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "ScaledTanh", "Softsign"}, {0.3f, 0.9f}, {0.4f, 1.1f}, 2, 2},
    {"lstm_reverse_layout1_input_forget", "LSTM", 5, 2, 3, 2, "reverse", 1, false, true, false, false, false, 0, 0, 1},
    {"lstm_layout1_bidirectional_c0_only", "LSTM", 3, 2, 2, 2, "bidirectional", 1, true, false, true, true, false, 0, 0, 0},
    {"gru_bidirectional_lbr_acts", "GRU", 4, 2, 3, 3, "bidirectional", 0, true, true, false, false, false, 0, 1, 0,
     {"LeakyRelu", "Tanh", "Sigmoid", "Elu"}, {0.2f}, {0}, 1, 0},
    {"gru_reverse_layout1_clip", "GRU", 3, 2, 2, 4, "reverse", 1, true, false, false, false, false, 0.5f, 0, 0},
    {"gru_lbr_no_bias", "GRU", 3, 2, 2, 2, NULL, 0, false, true, false, false, false, 0, 1, 0},
    {"gru_lbr_bias_zero_state", "GRU", 3, 2, 2, 2, NULL, 0, true, false, false, false, false, 0, 1, 0},
    {"rnn_bidirectional_affine_relu", "RNN", 3, 2, 3, 2, "bidirectional", 0, true, true, false, false, false, 0, 0, 0,
     {"Affine", "Relu"}, {0.5f}, {0.1f}, 1, 1},
    {"rnn_relu_leakyrelu_default_alpha", "RNN", 3, 2, 3, 2, "bidirectional", 0, true, true, false, false, false, 0, 0,
     0, {"Relu", "LeakyRelu"}},
    {"rnn_thresholdedrelu_softplus", "RNN", 3, 2, 2, 3, "bidirectional", 1, true, false, false, false, false, 0, 0, 0,
     {"ThresholdedRelu", "Softplus"}, {0.1f}, {0}, 1, 0},
    {"rnn_70_steps", "RNN", 70, 1, 2, 2, NULL, 0, true, true, false, false, false, 0, 0, 0},
    {"lstm_opset10_clip", "LSTM", 3, 2, 2, 2, "bidirectional", 0, true, true, true, false, false, 0.6f, 0, 0, {NULL},
     {0}, {0}, 0, 0, 10},
};

static uint64_t rng = 1;
static double urand(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 4503599627370496.0 - 1;
}

static int gates_of(const char *op) { return !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1; }
static int dirs_of(const rcase *c) { return c->direction && !strcmp(c->direction, "bidirectional") ? 2 : 1; }

static mp_attr *attr(mp_graph *g, mp_node *n, const char *name, mp_attr_type t)
{
    mp_attr *a = mp_arena_alloc(g->arena, (size_t)(n->nattrs + 1) * sizeof *a);
    if (n->nattrs) memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    n->attrs = a;
    a[n->nattrs] = (mp_attr){.name = name, .type = t};
    return &a[n->nattrs++];
}

static int32_t value(mp_graph *g, const char *name, mp_dtype t, int rank, const int64_t *dims)
{
    int32_t id = mp_graph_add_value(g, name);
    mp_dim d[4];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    mp_value_set(g, id, t, rank, d);
    return id;
}

/* The case's graph: X = Identity(X_in); Y, Y_h, Y_c = op(X, ...); Y_out = Identity(Y).
 * seq: the sequence_lens contents (NULL: absent; seq_konst false: an input of unknown contents). */
static mp_graph *build(const rcase *c, const int32_t *seq, bool seq_konst, const char *const *acts)
{
    mp_graph *g = mp_graph_new(NULL);
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", c->opset ? c->opset : 22};
    g->nopsets = 1;
    int D = dirs_of(c), G = gates_of(c->op);
    int64_t T = c->T, B = c->B, I = c->I, H = c->H;
    int64_t xd[3] = {T, B, I}, xl[3] = {B, T, I}, wd[3] = {D, G * H, I}, rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H};
    int64_t sd[3] = {D, B, H}, sl[3] = {B, D, H}, pd[2] = {D, 3 * H}, bb = B;
    int32_t ins[8], inputs[8], nin = 0;
    int32_t xin = value(g, "X_in", MP_DOUBLE, 3, c->layout ? xl : xd);
    inputs[nin++] = xin;
    ins[0] = mp_graph_add_value(g, "X");
    mp_graph_add_node(g, "before", "Identity", "", 1, &xin, 1, &ins[0]);
    inputs[nin++] = ins[1] = value(g, "W", MP_DOUBLE, 3, wd);
    inputs[nin++] = ins[2] = value(g, "R", MP_DOUBLE, 3, rd);
    ins[3] = c->bias ? (inputs[nin++] = value(g, "B", MP_DOUBLE, 2, bd)) : -1;
    ins[4] = seq ? (inputs[nin++] = value(g, "sequence_lens", MP_INT32, 1, &bb)) : -1;
    if (seq && seq_konst) {
        mp_tensor *t = mp_tensor_new(g->arena, MP_INT32, 1, &bb);
        for (int64_t b = 0; b < B; b++) mp_tensor_set_i64(t, b, seq[b]);
        g->values[ins[4]].konst = t;
    }
    ins[5] = c->h0 ? (inputs[nin++] = value(g, "initial_h", MP_DOUBLE, 3, c->layout ? sl : sd)) : -1;
    ins[6] = c->c0 ? (inputs[nin++] = value(g, "initial_c", MP_DOUBLE, 3, c->layout ? sl : sd)) : -1;
    ins[7] = c->peep ? (inputs[nin++] = value(g, "P", MP_DOUBLE, 2, pd)) : -1;
    int nins = G == 4 ? 8 : 6;
    while (nins > 3 && ins[nins - 1] < 0) nins--;
    int32_t outs[3] = {mp_graph_add_value(g, "Y"), mp_graph_add_value(g, "Y_h"), G == 4 ? mp_graph_add_value(g, "Y_c") : -1};
    int32_t n = mp_graph_add_node(g, "rnn_node", c->op, "", nins, ins, G == 4 ? 3 : 2, outs);
    mp_node *nd = &g->nodes[n];
    attr(g, nd, "hidden_size", MP_ATTR_INT)->i = H;
    if (c->direction) attr(g, nd, "direction", MP_ATTR_STRING)->s = c->direction;
    if (c->layout) attr(g, nd, "layout", MP_ATTR_INT)->i = c->layout;
    if (c->clip > 0) attr(g, nd, "clip", MP_ATTR_FLOAT)->f = c->clip;
    if (c->lbr) attr(g, nd, "linear_before_reset", MP_ATTR_INT)->i = 1;
    if (c->input_forget) attr(g, nd, "input_forget", MP_ATTR_INT)->i = 1;
    int na = 0;
    while (na < 6 && acts[na]) na++;
    if (na) {
        mp_attr *a = attr(g, nd, "activations", MP_ATTR_STRINGS);
        a->n = na, a->strings = (const char **)acts;
    }
    if (c->nalpha) {
        mp_attr *a = attr(g, nd, "activation_alpha", MP_ATTR_FLOATS);
        a->n = c->nalpha, a->floats = (float *)c->alpha;
    }
    if (c->nbeta) {
        mp_attr *a = attr(g, nd, "activation_beta", MP_ATTR_FLOATS);
        a->n = c->nbeta, a->floats = (float *)c->beta;
    }
    int32_t yo = mp_graph_add_value(g, "Y_out");
    mp_graph_add_node(g, "after", "Identity", "", 1, &outs[0], 1, &yo);
    int32_t gout[3] = {yo, outs[1], outs[2]};
    for (int k = 0; k < (G == 4 ? 3 : 2); k++) g->values[gout[k]].flags |= MP_VAL_OUTPUT;
    for (int k = 0; k < nin; k++) g->values[inputs[k]].flags |= MP_VAL_INPUT;
    g->inputs = mp_arena_dup(g->arena, inputs, sizeof inputs), g->ninputs = nin;
    g->outputs = mp_arena_dup(g->arena, gout, sizeof gout), g->noutputs = G == 4 ? 3 : 2;
    return g;
}

static bool among(const char *f, const char *const *list)
{
    for (; *list; list++)
        if (!strcasecmp(f, *list)) return true;
    return false;
}

static double act(const char *f, double x, double a, double b)
{
    if (!strcasecmp(f, "Sigmoid")) return 1 / (1 + exp(-x));
    if (!strcasecmp(f, "Tanh")) return tanh(x);
    if (!strcasecmp(f, "Relu")) return x > 0 ? x : 0;
    if (!strcasecmp(f, "Affine")) return a * x + b;
    if (!strcasecmp(f, "LeakyRelu")) return x >= 0 ? x : a * x;
    if (!strcasecmp(f, "ThresholdedRelu")) return x > a ? x : 0;
    if (!strcasecmp(f, "ScaledTanh")) return a * tanh(b * x);
    if (!strcasecmp(f, "HardSigmoid")) return fmin(fmax(a * x + b, 0), 1);
    if (!strcasecmp(f, "Elu")) return x >= 0 ? x : a * (exp(x) - 1);
    if (!strcasecmp(f, "Softsign")) return x / (1 + fabs(x));
    return log(1 + exp(x)); /* Softplus */
}

/* The spec's equations for case c over the bound data (in[k]: the node's
 * input k, NULL when absent): y [T, D, B, H] (layout 1: [B, T, D, H]), yh, yc. */
static void reference(const rcase *c, const double *const *in, const char *const *acts, double *y, double *yh,
                      double *yc)
{
    int D = dirs_of(c), G = gates_of(c->op), T = c->T, B = c->B, I = c->I, H = c->H, nact = G == 4 ? 3 : G == 3 ? 2 : 1;
    const double *x = in[0], *w = in[1], *r = in[2], *bias = in[3], *h0 = in[5], *c0 = in[6], *p = in[7];
    /* activations and their alpha, beta: consumed in order by those that take them */
    static const char *const dflt[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const char *fn[2][3];
    double fa[2][3], fb[2][3];
    int ia = 0, ib = 0, na = 0;
    while (na < 6 && acts[na]) na++;
    for (int d = 0; d < D; d++)
        for (int k = 0; k < nact; k++) {
            const char *f = fn[d][k] = na ? acts[na == nact ? k : d * nact + k] : dflt[nact - 1][k];
            static const char *const with_alpha[] = {"Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", NULL};
            bool ta = among(f, with_alpha), tb = among(f, with_alpha + 3) || !strcasecmp(f, "Affine");
            float da = !strcasecmp(f, "LeakyRelu") ? 0.01f : !strcasecmp(f, "HardSigmoid") ? 0.2f : 1; /* float attributes */
            float db = !strcasecmp(f, "HardSigmoid") ? 0.5f : !strcasecmp(f, "ScaledTanh") ? 1 : 0;
            fa[d][k] = ta ? (ia < c->nalpha ? c->alpha[ia++] : da) : 0;
            fb[d][k] = tb ? (ib < c->nbeta ? c->beta[ib++] : db) : 0;
        }
#define X(t, b, i) x[c->layout ? ((b) * T + (t)) * I + (i) : ((t) * B + (b)) * I + (i)]
#define S(d, b, j) (c->layout ? ((b) * D + (d)) * H + (j) : ((d) * B + (b)) * H + (j))
#define CLIP(v) (c->clip > 0 ? fmin(fmax(v, -c->clip), c->clip) : (v))
#define F(k, v) act(fn[d][k], v, fa[d][k], fb[d][k])
    for (int d = 0; d < D; d++) {
        bool rev = D == 2 ? d == 1 : c->direction && !strcmp(c->direction, "reverse");
        const double *wd = w + (size_t)d * G * H * I, *rd = r + (size_t)d * G * H * H;
        const double *wb = bias ? bias + (size_t)d * 2 * G * H : NULL, *rb = wb ? wb + G * H : NULL;
        const double *pd = p ? p + (size_t)d * 3 * H : NULL;
        double h[16][16], cc[16][16], nh[16][16], nc[16][16], gate[64];
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) h[b][j] = h0 ? h0[S(d, b, j)] : 0, cc[b][j] = c0 ? c0[S(d, b, j)] : 0;
        for (int k = 0; k < T; k++) {
            int t = rev ? T - 1 - k : k;
            for (int b = 0; b < B; b++) {
                /* gate[row] = Xt W^T + Wb (+ Ht-1 R^T + Rb, but GRU's h gate) */
                for (int row = 0; row < G * H; row++) {
                    double s = wb ? wb[row] : 0;
                    for (int i = 0; i < I; i++) s += X(t, b, i) * wd[row * I + i];
                    if (G == 3 && row >= 2 * H) {
                        gate[row] = s;
                        continue;
                    }
                    s += rb ? rb[row] : 0;
                    for (int i = 0; i < H; i++) s += h[b][i] * rd[row * H + i];
                    gate[row] = s;
                }
                for (int j = 0; j < H; j++) {
                    if (G == 1) {
                        nh[b][j] = F(0, CLIP(gate[j]));
                    } else if (G == 4) {
                        double it = F(0, CLIP(gate[j] + (pd ? pd[j] * cc[b][j] : 0)));
                        double ft = c->input_forget ? 1 - it : F(0, CLIP(gate[2 * H + j] + (pd ? pd[2 * H + j] * cc[b][j] : 0)));
                        double ct = F(1, CLIP(gate[3 * H + j]));
                        nc[b][j] = ft * cc[b][j] + it * ct;
                        double ot = F(0, CLIP(gate[H + j] + (pd ? pd[H + j] * nc[b][j] : 0)));
                        nh[b][j] = ot * F(2, nc[b][j]);
                    } else {
                        double zt = F(0, CLIP(gate[j])), rec = 0;
                        double rbh = rb ? rb[2 * H + j] : 0;
                        if (c->lbr) {
                            for (int i = 0; i < H; i++) rec += h[b][i] * rd[(2 * H + j) * H + i];
                            rec = F(0, CLIP(gate[H + j])) * (rec + rbh);
                        } else {
                            for (int i = 0; i < H; i++) rec += F(0, CLIP(gate[H + i])) * h[b][i] * rd[(2 * H + j) * H + i];
                            rec += rbh;
                        }
                        double ht = F(1, CLIP(gate[2 * H + j] + rec));
                        nh[b][j] = (1 - zt) * ht + zt * h[b][j];
                    }
                }
            }
            for (int b = 0; b < B; b++)
                for (int j = 0; j < H; j++) {
                    h[b][j] = nh[b][j], cc[b][j] = G == 4 ? nc[b][j] : 0;
                    y[c->layout ? (((size_t)b * T + t) * D + d) * H + j : (((size_t)t * D + d) * B + b) * H + j] = h[b][j];
                }
        }
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) yh[S(d, b, j)] = h[b][j], yc[S(d, b, j)] = cc[b][j];
    }
#undef X
#undef S
#undef CLIP
#undef F
}

static void reference_case(const rcase *c)
{
    mp_err err = {""};
    mp_graph *g = build(c, NULL, false, c->acts);
    mp_exec *x = NULL;
    double *data[8] = {0};
    if (mp_graph_link(g, &err) || mp_infer(g, &err) || mp_unroll_rnn(g, &err)) goto done;
    if (recurrent_left(g)) {
        mp_fail(&err, "a recurrent node is left after unrolling");
        goto done;
    }
    if (!(x = mp_exec_new(g, NULL, &err))) goto done;
    /* random data for every input, data[k] for the node's input k */
    static const char *const names[8] = {"X_in", "W", "R", "B", "", "initial_h", "initial_c", "P"};
    mp_tensor ts[8];
    for (int k = 0; k < 8; k++) {
        int32_t v = k == 4 ? -1 : mp_graph_find(g, names[k]);
        if (v < 0) continue;
        const mp_value *val = &g->values[v];
        int64_t *dims = mp_arena_alloc(g->arena, 4 * sizeof *dims), numel = 1;
        for (int i = 0; i < val->rank; i++) numel *= dims[i] = val->dims[i].v;
        data[k] = malloc((size_t)numel * sizeof(double));
        double scale = k == 1 || k == 2 ? 0.6 : k == 6 ? 3 : 1; /* a large initial_c: Ct passes clip */
        for (int64_t i = 0; i < numel; i++) data[k][i] = scale * urand();
        ts[k] = (mp_tensor){MP_DOUBLE, val->rank, dims, numel, data[k]};
        if (mp_exec_bind(x, v, &ts[k], &err)) goto done;
    }
    if (mp_exec_run(x, &err)) goto done;
    int D = dirs_of(c);
    size_t ny = (size_t)c->T * D * c->B * c->H, ns = (size_t)D * c->B * c->H;
    double *want = calloc(ny + 2 * ns, sizeof *want);
    reference(c, (const double *const *)data, c->acts, want, want + ny, want + ny + ns);
    int64_t shapes[3][4];
    int nout = g->noutputs;
    double worst = 0;
    for (int k = 0; k < nout; k++) {
        const mp_tensor *got = mp_exec_value(x, g->outputs[k]);
        if (!got) {
            mp_fail(&err, "output %d was not computed", k);
            break;
        }
        memcpy(shapes[k], got->dims, (size_t)got->rank * sizeof *got->dims);
        mp_tensor w = {MP_DOUBLE, got->rank, shapes[k], (int64_t)(k ? ns : ny), want + (k ? ny + (k - 1) * ns : 0)};
        worst = fmax(worst, off(got, &w, RTOL64, 0));
    }
    free(want);
    if (!err.msg[0] && worst > 1) mp_fail(&err, "off by %.3g of the tolerance (rtol %g)", worst, RTOL64);
done:
    CHECK(!err.msg[0], "%s: %s", c->name, err.msg);
    if (!err.msg[0]) printf("  %-40s passed (%d nodes)\n", c->name, g->nnodes);
    for (int k = 0; k < 8; k++) free(data[k]);
    mp_exec_free(x);
    mp_graph_free(g);
}

/* ---- 3. what it refuses ------------------------------------------------------ */

static void refused(const char *what, const rcase *c, const int32_t *seq, bool seq_konst, const char *const *acts,
                    const char *want)
{
    mp_err err = {""};
    mp_graph *g = build(c, seq, seq_konst, acts);
    int32_t n0 = -1;
    int rc = mp_graph_link(g, &err) || mp_infer(g, &err);
    if (!rc) {
        n0 = g->nnodes;
        rc = mp_unroll_rnn(g, &err);
    }
    CHECK(rc && strstr(err.msg, "rnn_node") && strstr(err.msg, want), "%s: want an error naming the node and '%s', got: %s",
          what, want, rc ? err.msg : "no error");
    CHECK(n0 < 0 || g->nnodes == n0, "%s: the graph keeps %d nodes, not %d", what, g->nnodes, n0);
    if (rc && strstr(err.msg, want)) printf("  %-40s refused: %s\n", what, err.msg);
    mp_graph_free(g);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int passed = 0;
    printf("backend cases (rtol %g, atol %g):\n", RTOL, ATOL);
    int ran = backend_cases(&passed);
    if (ran < 0) printf("  skipped: %s/onnx-backend/node not found (the data lives in ../shared)\n", MEMPLAN_SHARED);
    CHECK(ran != 0, "the backend directory holds no lstm, gru or rnn case");

    printf("the spec's equations (float64, rtol %g):\n", RTOL64);
    int nref = (int)(sizeof rcases / sizeof *rcases), before = failures;
    for (int i = 0; i < nref; i++) reference_case(&rcases[i]);
    int ref_failed = failures - before;

    printf("refused:\n");
    before = failures;
    const rcase lstm = {"refused", "LSTM", 3, 2, 2, 2, NULL, 0, true, false, false, false, false, 0, 0, 0};
    const rcase gru = {"refused", "GRU", 3, 2, 2, 2, NULL, 0, true, false, false, false, false, 0, 0, 0};
    static const char *const none[1] = {NULL}, *const foo[] = {"Sigmoid", "Foo", NULL};
    refused("sequence_lens shorter than T", &lstm, (const int32_t[]){3, 2}, true, none,
            "sequence_lens shorter than the sequence is not supported");
    refused("sequence_lens of unknown contents", &lstm, (const int32_t[]){3, 3}, false, none,
            "sequence_lens shorter than the sequence is not supported");
    refused("an activation not in the spec", &gru, NULL, false, foo, "activation 'Foo'");
    static const char *const three[] = {"Sigmoid", "Tanh", "Tanh", NULL};
    refused("three activations for a GRU", &gru, NULL, false, three, "takes 2 per direction");
    int refused_failed = failures - before;
    /* sequence_lens equal to T everywhere is the same as none */
    {
        mp_err err = {""};
        mp_graph *g = build(&lstm, (const int32_t[]){3, 3}, true, none);
        CHECK(!mp_graph_link(g, &err) && !mp_infer(g, &err) && !mp_unroll_rnn(g, &err) && !recurrent_left(g),
              "sequence_lens of T everywhere: %s", err.msg);
        mp_graph_free(g);
    }

    printf("unroll_rnn: backend %d passed, %d failed%s; spec equations %d passed, %d failed; refusals %d checked, %d "
           "wrong\n",
           passed, ran > 0 ? ran - passed : 0, ran < 0 ? " (skipped: no ../shared)" : "", nref - ref_failed, ref_failed,
           4, refused_failed);
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
