/* op_cost.c - the cost column of the op table: FLOPs and bytes moved by one
 * node, from its shapes (ir/ops.h mp_op_cost).
 *
 * Conventions: a multiply-add is 2 FLOPs; bias adds inside MatMul/Gemm/Conv
 * are not counted (the matrix products dominate, as in Kaplan et al.'s 2N).
 * Bytes are what the node reads and writes once: every input and output, except
 * that views cost nothing and gathers/slices read only what they pick.
 * Per-element factors are estimates (a transcendental counts 8); ops whose
 * work depends on data or subgraphs (control flow, sequences, strings,
 * classical ML) are costed by their bytes only.
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "ops.h"

/* ---- reading shapes -------------------------------------------------------- */

static const mp_value *in_v(const mp_graph *g, const mp_node *n, int k)
{
    return k < n->nin && n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
}

static const mp_value *out_v(const mp_graph *g, const mp_node *n, int k)
{
    return k < n->nout && n->out[k] >= 0 ? &g->values[n->out[k]] : NULL;
}

/* Elements of v; -1 when v is absent or its shape not known. */
static double numel(const mp_value *v) { return v ? (double)mp_value_numel(v) : -1; }

/* Dim i of v (counted from the end when negative); -1 when missing or unknown. */
static double dim(const mp_value *v, int i)
{
    if (!v || v->rank < 0) return -1;
    if (i < 0) i += v->rank;
    return i >= 0 && i < v->rank && v->dims[i].v >= 0 ? (double)v->dims[i].v : -1;
}

/* Bytes of every present input (from input `first_in` on) and output; -1 when one is unknown. */
static double io_bytes(const mp_graph *g, const mp_node *n, int first_in, bool outputs)
{
    double sum = 0;
    for (int k = first_in; k < n->nin; k++)
        if (n->in[k] >= 0) {
            if (g->values[n->in[k]].bytes < 0) return -1;
            sum += (double)g->values[n->in[k]].bytes;
        }
    for (int k = 0; outputs && k < n->nout; k++)
        if (n->out[k] >= 0) {
            if (g->values[n->out[k]].bytes < 0) return -1;
            sum += (double)g->values[n->out[k]].bytes;
        }
    return sum;
}

/* Sets c to flops and every input and output's bytes; -1 when either is unknown. */
static int work(const mp_graph *g, const mp_node *n, mp_op_cost *c, double flops)
{
    c->flops = flops;
    c->bytes = io_bytes(g, n, 0, true);
    return flops < 0 || c->bytes < 0 || isnan(flops) ? -1 : 0;
}

/* ---- per-element rules: k FLOPs per output element or per input element ---- */

#define MP_COST_TRANSCENDENTAL 8 /* exp, log, tanh, erf, sin...: a few polynomial terms */

#define PER_OUTPUT(fn, k) \
    int fn(const mp_graph *g, const mp_node *n, mp_op_cost *c) { return work(g, n, c, (k) * numel(out_v(g, n, 0))); }
#define PER_INPUT(fn, k) \
    int fn(const mp_graph *g, const mp_node *n, mp_op_cost *c) { return work(g, n, c, (k) * numel(in_v(g, n, 0))); }

PER_OUTPUT(cost_eltwise, 1)                                  /* add, mul, compare, relu, where, sqrt */
PER_OUTPUT(cost_eltwise_few, 4)                              /* a few multiply-adds: hard sigmoid, dtanh, dropout */
PER_OUTPUT(cost_eltwise_transcendental, MP_COST_TRANSCENDENTAL) /* exp, erf, gelu, sigmoid and their gradients */
PER_OUTPUT(cost_interp, 4)                                   /* resampling: a blend of neighbours per output */
PER_INPUT(cost_interp_grad, 4)                               /* its adjoint: each dY cell spread back */
PER_INPUT(cost_reduce, 1)                                    /* one op per element read: sum, max, scan, sort */
PER_INPUT(cost_softmax, 4 + MP_COST_TRANSCENDENTAL)          /* max, subtract, exp, sum, divide */
PER_INPUT(cost_norm, 7)                                      /* mean, variance, normalize, scale, shift */
PER_INPUT(cost_norm_grad, 12)                                /* x-hat again, two reductions, dX, dScale, dBias */
/* optimizer updates, per parameter element (output 0 is the parameter) */
PER_OUTPUT(cost_sgd, 2)                                      /* p -= lr * g */
PER_OUTPUT(cost_momentum, 4)                                 /* v = mu v + g; p -= lr v */
PER_OUTPUT(cost_adagrad, 6)                                  /* h += g^2; p -= lr g / (sqrt h + eps) */
PER_OUTPUT(cost_adam, 14)                                    /* m, v, m / (sqrt v + eps), lr, decoupled decay */
PER_OUTPUT(cost_adafactor, 14)                               /* row/column means of g^2, rsqrt, clip, update */

/* Sum/Mean/Max/Min of k inputs: k - 1 binary ops per output element. */
int cost_variadic(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    return work(g, n, c, (n->nin > 1 ? n->nin - 1 : 0) * numel(out_v(g, n, 0)));
}

/* ---- data movement --------------------------------------------------------- */

/* Views and shape ops (Reshape, Squeeze, Identity, Shape, Constant): no kernel runs. */
int cost_view(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    (void)g, (void)n;
    c->flops = c->bytes = 0;
    return 0;
}

/* Copies (Transpose, Concat, Expand, Pad, Cast...): reads the inputs, writes the outputs. */
int cost_move(const mp_graph *g, const mp_node *n, mp_op_cost *c) { return work(g, n, c, 0); }

/* Data-dependent or subgraph work that is not modelled (control flow, sequences,
 * strings, classical ML): the bytes in and out only. */
int cost_opaque(const mp_graph *g, const mp_node *n, mp_op_cost *c) { return work(g, n, c, 0); }

/* Gather, Slice, Compress: read as much of input 0 as they write (output 0),
 * plus the index/bound inputs. */
int cost_select(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *y = out_v(g, n, 0);
    double rest = io_bytes(g, n, 1, true);
    c->flops = 0;
    c->bytes = y && y->bytes >= 0 && rest >= 0 ? (double)y->bytes + rest : -1;
    return c->bytes < 0 ? -1 : 0;
}

/* ConstantOfShape, Range, Zeros, windows: write the outputs. */
int cost_fill(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    c->flops = 0;
    c->bytes = io_bytes(g, n, n->nin, true);
    return c->bytes < 0 ? -1 : 0;
}

/* GatherGrad(dY, indices): a zeroed table, dY's rows added in. */
int cost_gather_grad(const mp_graph *g, const mp_node *n, mp_op_cost *c) { return work(g, n, c, numel(in_v(g, n, 0))); }

/* ---- matrix products --------------------------------------------------------- */

/* MatMul, MatMulInteger, QLinearMatMul (A is input 0 in all), FusedMatMul
 * (transA): Y[..., M, N] from A[..., M, K]: 2 K FLOPs per element of Y,
 * over the broadcast batch. A 1-D A is [K]. */
int cost_matmul(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *a = in_v(g, n, 0);
    double k = a && a->rank >= 2 && mp_attr_int(n, "transA", 0) ? dim(a, -2) : dim(a, -1);
    return work(g, n, c, k < 0 ? -1 : 2 * k * numel(out_v(g, n, 0)));
}

/* Gemm: Y[M, N] = A'[M, K] B'[K, N] (+ C, not counted). */
int cost_gemm(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *a = in_v(g, n, 0);
    if (!a || a->rank != 2) return -1;
    double k = dim(a, mp_attr_int(n, "transA", 0) ? 0 : 1);
    return work(g, n, c, 2 * k * numel(out_v(g, n, 0)));
}

/* MatMulGradA(dY, B) -> dA = dY B^T and MatMulGradB(A, dY) -> dB = A^T dY:
 * each a MatMul of 2 K FLOPs per element of dY[..., M, N], K being A's last
 * dim (B's second last; for 1-D operands their only dim). */
int cost_matmul_grad(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    bool grad_a = n->op == MP_OP_MatMulGradA;
    const mp_value *dy = in_v(g, n, grad_a ? 0 : 1), *other = in_v(g, n, grad_a ? 1 : 0);
    double k = grad_a && other && other->rank >= 2 ? dim(other, -2) : dim(other, -1);
    return work(g, n, c, k < 0 ? -1 : 2 * k * numel(dy));
}

/* Einsum: 2 FLOPs (1 for a single operand) per element of the output and per
 * combination of the contracted labels (those missing from the output), as
 * if all operands were contracted at once. */
int cost_einsum(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const char *eq = mp_attr_str(n, "equation", NULL);
    if (!eq) return -1;
    const char *arrow = strstr(eq, "->");
    double size[128];
    int uses[128] = {0};
    for (int i = 0; i < 128; i++) size[i] = 1;
    const char *p = eq;
    for (int k = 0; k < n->nin; k++) {
        const mp_value *v = in_v(g, n, k);
        if (!v || v->rank < 0) return -1;
        const char *end = p;
        int letters = 0;
        while (*end && *end != ',' && end != arrow) letters += isalpha((unsigned char)*end) != 0, end++;
        for (int d = 0; p < end; p++) {
            if (*p == '.') { /* "...": the dims no letter names */
                d += v->rank - letters;
                p += 2;
            } else if (isalpha((unsigned char)*p)) {
                if (dim(v, d) < 0) return -1;
                size[(int)*p] = dim(v, d++), uses[(int)*p]++;
            }
        }
        if (*p == ',') p++;
    }
    double contracted = 1;
    for (int l = 0; l < 128; l++) {
        bool kept = arrow ? strchr(arrow + 2, l) != NULL : uses[l] == 1;
        if (uses[l] && !kept) contracted *= size[l];
    }
    return work(g, n, c, (n->nin >= 2 ? 2 : 1) * contracted * numel(out_v(g, n, 0)));
}

/* ---- convolutions ------------------------------------------------------------ */

/* Conv (and ConvInteger, QLinearConv, DeformConv, the depthwise
 * CausalConvWithState): Y[N, Cout, spatial] from W[Cout, Cin/group, kernel]:
 * 2 (Cin/group) kernel FLOPs per element of Y, i.e. 2 numel(Y) numel(W) / Cout. */
int cost_conv(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *w = in_v(g, n, n->op == MP_OP_QLinearConv ? 3 : 1);
    double cout = dim(w, 0);
    return work(g, n, c, cout > 0 ? 2 * numel(out_v(g, n, 0)) * numel(w) / cout : -1);
}

/* ConvTranspose: each element of X[N, Cin, spatial] meets W[Cin, Cout/group,
 * kernel]'s (Cout/group) kernel weights: 2 numel(X) numel(W) / Cin. */
int cost_conv_transpose(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *w = in_v(g, n, 1);
    double cin = dim(w, 0);
    return work(g, n, c, cin > 0 ? 2 * numel(in_v(g, n, 0)) * numel(w) / cin : -1);
}

/* ConvGrad(dY, X, W) -> dX, dW, dB: dX (a transposed conv) and dW (a conv
 * of X with dY) cost the forward conv each; dB sums dY. Absent outputs cost nothing. */
int cost_conv_grad(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *dy = in_v(g, n, 0), *w = in_v(g, n, 2);
    double cout = dim(w, 0), conv = cout > 0 ? 2 * numel(dy) * numel(w) / cout : -1;
    double flops = (out_v(g, n, 0) ? conv : 0) + (out_v(g, n, 1) ? conv : 0) + (out_v(g, n, 2) ? numel(dy) : 0);
    return work(g, n, c, conv < 0 ? -1 : flops);
}

/* MaxPool, AveragePool, LpPool and AveragePoolGrad: one op per window element
 * of each pooled value (Y forward, dY backward: the smaller side). */
int cost_pool(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const int64_t *k;
    int nk = mp_attr_ints(n, "kernel_shape", &k);
    if (nk < 1) return -1;
    double window = 1;
    for (int i = 0; i < nk; i++) window *= (double)k[i];
    double x = numel(in_v(g, n, 0)), y = numel(out_v(g, n, 0));
    return work(g, n, c, x < 0 || y < 0 ? -1 : window * (x < y ? x : y));
}

/* ---- attention, recurrences, linear algebra, signal ---------------------------- */

/* Attention (Q, K, V, mask, past_key, ...) and FlexAttention: Q K^T and P V
 * are 2 S FLOPs per element of Q and of Y, softmax over the B Hq L S scores.
 * 4-D Q[B, Hq, L, E], K[B, Hkv, S, E]; 3-D Q[B, L, Hq E], K[B, S, Hkv E]. */
int cost_attention(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *q = in_v(g, n, 0), *k = in_v(g, n, 1);
    const mp_value *past = n->op == MP_OP_Attention ? in_v(g, n, 4) : NULL;
    if (!q || !k || (q->rank != 3 && q->rank != 4) || k->rank != q->rank) return -1;
    double heads = q->rank == 4 ? 1 : (double)mp_attr_int(n, "q_num_heads", 0);
    if (!(heads > 0)) return -1;
    double e = dim(q, -1) / heads, s = dim(k, -2) + (past ? dim(past, 2) : 0);
    if (!(e > 0) || s < 0) return -1;
    double scores = numel(q) / e * s;
    return work(g, n, c, 2 * numel(q) * s + 2 * numel(out_v(g, n, 0)) * s + (4 + MP_COST_TRANSCENDENTAL) * scores);
}

/* AttentionGrad: the scores again, dY V^T, and dQ, dK, dV: about 2.5 times the forward's work. */
int cost_attention_grad(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *q = in_v(g, n, 1), *k = in_v(g, n, 2), *past = in_v(g, n, 5), *dy = in_v(g, n, 0);
    if (!q || !k || !dy || (q->rank != 3 && q->rank != 4) || k->rank != q->rank) return -1;
    double heads = q->rank == 4 ? 1 : (double)mp_attr_int(n, "q_num_heads", 0);
    if (!(heads > 0)) return -1;
    double e = dim(q, -1) / heads, s = dim(k, -2) + (past ? dim(past, 2) : 0);
    if (!(e > 0) || s < 0) return -1;
    double scores = numel(q) / e * s;
    return work(g, n, c, 2.5 * (2 * numel(q) * s + 2 * numel(dy) * s) + (6 + MP_COST_TRANSCENDENTAL) * scores);
}

/* com.microsoft Attention: input[B, S, Din] times weights[Din, 3 H] gives Q,
 * K, V, then attention over S keys with num_heads heads. */
int cost_ms_attention(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *x = in_v(g, n, 0), *w = in_v(g, n, 1), *y = out_v(g, n, 0);
    double heads = (double)mp_attr_int(n, "num_heads", 0), s = dim(x, 1), hv = dim(y, -1);
    if (!x || x->rank != 3 || !(heads > 0) || s < 0 || hv < 0 || dim(w, 1) < 0) return -1;
    double tokens = numel(x) / dim(x, -1), hqk = (dim(w, 1) - hv) / 2;
    double flops = 2 * tokens * numel(w) + 2 * tokens * s * (hqk + hv) +
                   (4 + MP_COST_TRANSCENDENTAL) * tokens * heads * s;
    return work(g, n, c, flops);
}

/* LinearAttention -> output[B, T, Hq dv], state[B, Hkv, dk, dv]: each token
 * reads the state (2 dk FLOPs per output element) and updates it (about 4 per
 * state element). */
int cost_linear_attention(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *y = out_v(g, n, 0), *st = out_v(g, n, 1);
    double t = dim(y, 1), dk = dim(st, 2);
    return work(g, n, c, t < 0 || dk < 0 ? -1 : 2 * numel(y) * dk + 4 * t * numel(st));
}

/* RNN, GRU, LSTM: X[T, B, I] (or [B, T, I]), W[D, G H, I], R[D, G H, H]: per
 * step and batch row, W x and R h (2 numel FLOPs each) and an activation per gate value. */
int cost_rnn(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *x = in_v(g, n, 0), *w = in_v(g, n, 1), *r = in_v(g, n, 2);
    double rows = numel(x) / dim(x, -1), gates = dim(w, 0) * dim(w, 1);
    if (!(rows >= 0) || gates < 0 || numel(r) < 0) return -1;
    return work(g, n, c, rows * (2 * (numel(w) + numel(r)) + MP_COST_TRANSCENDENTAL * gates));
}

/* Det of [..., M, M]: an LU factorization, 2/3 M^3 per matrix. */
int cost_det(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *x = in_v(g, n, 0);
    double m = dim(x, -1);
    return work(g, n, c, m < 0 ? -1 : numel(x) * m * 2 / 3);
}

/* DFT, STFT: an FFT, 5 L log2 L FLOPs per complex signal of length L (the
 * output's second-last dim; its last holds real and imaginary parts). */
int cost_fft(const mp_graph *g, const mp_node *n, mp_op_cost *c)
{
    const mp_value *y = out_v(g, n, 0);
    double l = dim(y, -2);
    return work(g, n, c, l < 0 ? -1 : 5 * numel(y) / 2 * log2(l > 2 ? l : 2));
}

/* ---- the entry --------------------------------------------------------------- */

int mp_op_cost_node(const mp_graph *g, int32_t node, mp_op_cost *c, mp_err *err)
{
    if (node < 0 || node >= g->nnodes) return mp_fail(err, "no node %d (the graph has %d)", node, g->nnodes);
    const mp_node *n = &g->nodes[node];
    if (n->op < 0 || n->op >= MP_OP_COUNT)
        return mp_fail(err, "node '%s' (%s): not inferred, so it has no cost", n->name, n->op_type);
    for (int k = 0; k < n->nin + n->nout; k++) {
        int32_t id = k < n->nin ? n->in[k] : n->out[k - n->nin];
        if (id < 0 || g->values[id].bytes >= 0) continue;
        char type[128];
        return mp_fail(err, "node '%s' (%s): the cost needs the size of %s '%s', which is not known (%s)", n->name,
                       n->op_type, k < n->nin ? "input" : "output", g->values[id].name,
                       mp_value_type_str(g, &g->values[id], type, sizeof type));
    }
    *c = (mp_op_cost){0, 0};
    if (mp_op_table[n->op].cost(g, n, c))
        return mp_fail(err, "node '%s' (%s): its shapes do not fit the op's cost rule", n->name, n->op_type);
    return 0;
}
