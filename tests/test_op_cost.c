/* test_op_cost.c - the op table's grad and cost columns: every gradient rule
 * that existed before the columns is still registered; hand-computed FLOPs and
 * bytes of MatMul (batched, broadcast), Gemm, grouped strided Conv, a view and
 * elementwise ops; an unknown size fails naming the node; every node of the
 * training steps of models/cnn_bn.onnx and gpt_decoder.onnx gets a cost, with
 * the backward's products exactly those of the forward done twice (once per
 * operand); and GPT-2 124M's forward FLOPs against Kaplan et al. (2020). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "passes/autodiff.h" /* defines: mp_grad_rule_for */
#include "passes/train.h"

#define MODEL(f) MEMPLAN_SOURCE "/models/" f

/* ---- grad column ------------------------------------------------------------ */

/* The 41 ops of the MP_GRAD_RULES list that the grad column replaced. */
START_TEST(grad_column_keeps_every_rule)
{
    static const mp_op_id had[] = {
        MP_OP_Add, MP_OP_Sub, MP_OP_Mul, MP_OP_Div, MP_OP_Pow, MP_OP_Relu, MP_OP_Sigmoid, MP_OP_Tanh, MP_OP_Sqrt,
        MP_OP_Erf, MP_OP_Gelu, MP_OP_HardSwish, MP_OP_HardSigmoid, MP_OP_Identity, MP_OP_Cast, MP_OP_Dropout,
        MP_OP_Where, MP_OP_Neg, MP_OP_MatMul, MP_OP_Gemm, MP_OP_Conv, MP_OP_BatchNormalization,
        MP_OP_LayerNormalization, MP_OP_MaxPool, MP_OP_AveragePool, MP_OP_GlobalAveragePool, MP_OP_Softmax,
        MP_OP_Flatten, MP_OP_Reshape, MP_OP_Squeeze, MP_OP_Unsqueeze, MP_OP_Transpose, MP_OP_Concat, MP_OP_Split,
        MP_OP_Slice, MP_OP_Gather, MP_OP_Expand, MP_OP_ReduceMean, MP_OP_ReduceSum, MP_OP_SoftmaxCrossEntropyLoss,
        MP_OP_Sum,
    };
    ck_assert_int_eq(sizeof had / sizeof had[0], 41);
    for (size_t i = 0; i < sizeof had / sizeof had[0]; i++)
        ck_assert_msg(mp_grad_rule_for(had[i]) != NULL, "%s lost its gradient rule", mp_op_table[had[i]].name);
    int with = 0;
    for (int op = 0; op < MP_OP_COUNT; op++) {
        with += mp_grad_rule_for((mp_op_id)op) != NULL;
        /* backward and optimizer ops are never differentiated */
        if (!strcmp(mp_op_table[op].domain, "memplan"))
            ck_assert_msg(!mp_grad_rule_for((mp_op_id)op), "%s has a rule", mp_op_table[op].name);
        ck_assert_msg(mp_op_table[op].cost != NULL, "%s has no cost rule", mp_op_table[op].name);
    }
    ck_assert_int_ge(with, 41);
    ck_assert_ptr_null(mp_grad_rule_for(MP_OP_COUNT));
    ck_assert_ptr_eq(mp_grad_rule_for(MP_OP_Add), mp_grad_Add);
}
END_TEST

/* ---- hand-built nodes --------------------------------------------------------- */

/* A float input of the given known dims. */
static int32_t val(mp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int32_t id = mp_graph_value(g, name);
    mp_dim d[MP_MAX_RANK];
    for (int i = 0; i < rank; i++) d[i] = mp_dim_of(dims[i]);
    mp_value_set(g, id, MP_FLOAT, rank, d);
    g->values[id].flags |= MP_VAL_INPUT;
    return id;
}

/* Node op(in...) -> y, room for a few attributes. */
static mp_node *node(mp_graph *g, const char *op, int nin, const int32_t *in)
{
    int32_t y = mp_graph_value(g, "y");
    int32_t id = mp_graph_add_node(g, op, op, "", nin, in, 1, &y);
    mp_node *n = &g->nodes[id];
    n->attrs = mp_arena_alloc(g->arena, 4 * sizeof *n->attrs);
    return n;
}

static void attr_i(mp_graph *g, mp_node *n, const char *name, int64_t v)
{
    mp_attr *a = &n->attrs[n->nattrs++];
    a->name = mp_arena_strdup(g->arena, name), a->type = MP_ATTR_INT, a->i = v;
}

static void attr_ints(mp_graph *g, mp_node *n, const char *name, int count, const int64_t *v)
{
    mp_attr *a = &n->attrs[n->nattrs++];
    a->name = mp_arena_strdup(g->arena, name), a->type = MP_ATTR_INTS, a->n = count;
    a->ints = mp_arena_dup(g->arena, v, (size_t)count * sizeof *v);
}

/* Infers g (one node) and returns node 0's cost. */
static mp_op_cost cost_of(mp_graph *g)
{
    mp_err err = {{0}};
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    mp_op_cost c;
    ck_assert_msg(!mp_op_cost_node(g, 0, &c, &err), "%s", err.msg);
    return c;
}

/* A[3, 1, 4, 5] x B[2, 5, 6] -> Y[3, 2, 4, 6]: 144 outputs of K = 5 multiply-adds. */
START_TEST(matmul_batched_broadcast)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t in[2] = {val(g, "a", 4, (int64_t[]){3, 1, 4, 5}), val(g, "b", 3, (int64_t[]){2, 5, 6})};
    node(g, "MatMul", 2, in);
    mp_op_cost c = cost_of(g);
    ck_assert_double_eq(c.flops, 2.0 * (3 * 2 * 4 * 6) * 5);
    ck_assert_double_eq(c.bytes, 4.0 * (60 + 60 + 144));
    mp_graph_free(g);
}
END_TEST

/* Gemm with transA: A[K=7, M=3], B[7, 5], C[5] -> Y[3, 5]: 2 M N K (C's add not counted). */
START_TEST(gemm_trans_a)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t in[3] = {val(g, "a", 2, (int64_t[]){7, 3}), val(g, "b", 2, (int64_t[]){7, 5}),
                     val(g, "c", 1, (int64_t[]){5})};
    attr_i(g, node(g, "Gemm", 3, in), "transA", 1);
    mp_op_cost c = cost_of(g);
    ck_assert_double_eq(c.flops, 2.0 * 3 * 5 * 7);
    ck_assert_double_eq(c.bytes, 4.0 * (21 + 35 + 5 + 15));
    mp_graph_free(g);
}
END_TEST

/* Conv group 2, stride 2, pad 1: X[2, 8, 10, 10], W[6, 4, 3, 3] -> Y[2, 6, 5, 5];
 * each output sums Cin/group * kernel = 4 * 9 products. */
START_TEST(conv_grouped_strided)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t in[2] = {val(g, "x", 4, (int64_t[]){2, 8, 10, 10}), val(g, "w", 4, (int64_t[]){6, 4, 3, 3})};
    mp_node *n = node(g, "Conv", 2, in);
    attr_i(g, n, "group", 2);
    attr_ints(g, n, "strides", 2, (int64_t[]){2, 2});
    attr_ints(g, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mp_op_cost c = cost_of(g);
    ck_assert_int_eq(g->values[n->out[0]].dims[3].v, 5);
    ck_assert_double_eq(c.flops, 2.0 * (2 * 6 * 5 * 5) * (4 * 9));
    ck_assert_double_eq(c.bytes, 4.0 * (1600 + 216 + 300));
    mp_graph_free(g);
}
END_TEST

/* Reshape is a view: nothing computed, nothing moved. */
START_TEST(view_is_free)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t shape = mp_graph_value(g, "shape");
    mp_value_set(g, shape, MP_INT64, 1, (mp_dim[]){mp_dim_of(2)});
    g->values[shape].flags |= MP_VAL_INITIALIZER;
    g->values[shape].konst = mp_tensor_new(g->arena, MP_INT64, 1, (int64_t[]){2});
    mp_tensor_set_i64(g->values[shape].konst, 0, 6), mp_tensor_set_i64(g->values[shape].konst, 1, -1);
    int32_t in[2] = {val(g, "x", 3, (int64_t[]){2, 3, 4}), shape};
    node(g, "Reshape", 2, in);
    mp_op_cost c = cost_of(g);
    ck_assert_double_eq(c.flops, 0);
    ck_assert_double_eq(c.bytes, 0);
    mp_graph_free(g);
}
END_TEST

/* Add with broadcasting: one FLOP per output element, both inputs read once;
 * Tanh: a transcendental per element. */
START_TEST(elementwise)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t in[2] = {val(g, "a", 2, (int64_t[]){4, 3}), val(g, "b", 1, (int64_t[]){3})};
    node(g, "Add", 2, in);
    mp_op_cost c = cost_of(g);
    ck_assert_double_eq(c.flops, 12);
    ck_assert_double_eq(c.bytes, 4.0 * (12 + 3 + 12));
    mp_graph_free(g);

    g = mp_graph_new(NULL);
    int32_t x = val(g, "x", 1, (int64_t[]){10});
    node(g, "Tanh", 1, &x);
    c = cost_of(g);
    ck_assert_double_eq(c.flops, 80);
    ck_assert_double_eq(c.bytes, 80);
    mp_graph_free(g);
}
END_TEST

/* An unbound batch dim: the error names the node and the value. */
START_TEST(unknown_size_names_node)
{
    mp_graph *g = mp_graph_new(NULL);
    int32_t x = mp_graph_value(g, "x");
    mp_value_set(g, x, MP_FLOAT, 2, (mp_dim[]){mp_sym_dim(g, "batch"), mp_dim_of(3)});
    g->values[x].flags |= MP_VAL_INPUT;
    node(g, "Relu", 1, &x)->name = "act";
    mp_err err = {{0}};
    ck_assert(!mp_graph_link(g, &err) && !mp_infer(g, &err));
    mp_op_cost c;
    ck_assert_int_eq(mp_op_cost_node(g, 0, &c, &err), -1);
    ck_assert_msg(strstr(err.msg, "'act' (Relu)") && strstr(err.msg, "'x'"), "%s", err.msg);
    ck_assert_int_eq(mp_op_cost_node(g, 1, &c, &err), -1);
    mp_graph_free(g);
}
END_TEST

/* ---- whole models ------------------------------------------------------------ */

typedef struct totals {
    double flops[MP_PHASE_COUNT], bytes[MP_PHASE_COUNT];
    double products[MP_PHASE_COUNT]; /* MatMul, Gemm, Conv and their gradient nodes */
} totals;

static bool is_product(int op)
{
    return op == MP_OP_MatMul || op == MP_OP_Gemm || op == MP_OP_Conv || op == MP_OP_MatMulGradA ||
           op == MP_OP_MatMulGradB || op == MP_OP_ConvGrad;
}

/* Costs every node of g (each must succeed) and sums them by phase. */
static totals cost_all(const mp_graph *g)
{
    totals t = {{0}, {0}, {0}};
    for (int32_t i = 0; i < g->nnodes; i++) {
        mp_op_cost c;
        mp_err err = {{0}};
        ck_assert_msg(!mp_op_cost_node(g, i, &c, &err), "%s", err.msg);
        ck_assert_msg(c.flops >= 0 && c.bytes >= 0, "node '%s': %g FLOPs, %g bytes", g->nodes[i].name, c.flops, c.bytes);
        const mp_node *n = &g->nodes[i];
        t.flops[n->phase] += c.flops, t.bytes[n->phase] += c.bytes;
        if (is_product(n->op)) t.products[n->phase] += c.flops;
    }
    return t;
}

/* Loads a model, binds dims (NAME=VALUE pairs), infers, and builds the training step when train. */
static mp_model *load(const char *path, int nd, const char **names, const int64_t *vals, bool train)
{
    mp_err err = {{0}};
    mp_model *m = mp_onnx_load(path, &err);
    ck_assert_msg(m, "%s: %s", path, err.msg);
    mp_bindings b = {.batch = -1, .nnamed = nd, .names = names, .values = vals};
    ck_assert_msg(!mp_bind_dims(m->graph, &b, &err) && !mp_infer(m->graph, &err), "%s", err.msg);
    mp_train_opts o = mp_train_defaults();
    if (train) ck_assert_msg(!mp_train_build(m->graph, &o, &err), "%s", err.msg);
    return m;
}

/* cnn_bn at batch 2: conv1 3->16 on 32x32, conv2 16->32 on 16x16 (3x3), Gemm
 * 2048->10. The backward runs conv1 once (dW only: its input is data), conv2
 * and the Gemm twice (dX and dW). */
START_TEST(cnn_bn_training_step)
{
    mp_model *m = load(MODEL("cnn_bn.onnx"), 1, (const char *[]){"batch"}, (int64_t[]){2}, true);
    totals t = cost_all(m->graph);
    double conv1 = 2.0 * (2 * 16 * 32 * 32) * (3 * 9), conv2 = 2.0 * (2 * 32 * 16 * 16) * (16 * 9);
    double gemm = 2.0 * 2 * 10 * 2048;
    ck_assert_double_eq(t.products[MP_PHASE_FORWARD], conv1 + conv2 + gemm);
    ck_assert_double_eq(t.products[MP_PHASE_BACKWARD], conv1 + 2 * conv2 + 2 * gemm);
    ck_assert(t.flops[MP_PHASE_OPTIMIZER] > 0 && t.bytes[MP_PHASE_OPTIMIZER] > 0);
    printf("cnn_bn step (batch 2): forward %.4g FLOPs, backward %.4g, optimizer %.4g; %.4g bytes moved\n",
           t.flops[MP_PHASE_FORWARD], t.flops[MP_PHASE_BACKWARD], t.flops[MP_PHASE_OPTIMIZER],
           t.bytes[MP_PHASE_FORWARD] + t.bytes[MP_PHASE_LOSS] + t.bytes[MP_PHASE_BACKWARD] +
               t.bytes[MP_PHASE_OPTIMIZER]);
    mp_onnx_close(m);
}
END_TEST

/* Matrix-product FLOPs per token of a GPT block stack (d model width, T
 * context, L layers, V vocabulary, tied head): the four linears (12 d^2
 * weights), Q K^T and P V (2 T d each), and the head (d V). */
static double gpt_products_per_token(double d, double t, double l, double v)
{
    return l * (2 * 12 * d * d + 2 * 2 * t * d) + 2 * d * v;
}

/* gpt_decoder at batch 2, sequence 16: every product has both operands
 * trainable or activations, so the backward does each forward product twice. */
START_TEST(gpt_decoder_training_step)
{
    mp_model *m = load(MODEL("gpt_decoder.onnx"), 2, (const char *[]){"batch", "sequence"}, (int64_t[]){2, 16}, true);
    totals t = cost_all(m->graph);
    double tokens = 2 * 16;
    ck_assert_double_eq(t.products[MP_PHASE_FORWARD], tokens * gpt_products_per_token(64, 16, 2, 512));
    ck_assert_double_eq(t.products[MP_PHASE_BACKWARD], 2 * t.products[MP_PHASE_FORWARD]);
    /* the rest (softmax, LayerNorm, GELU, adds) is a small share at this width */
    ck_assert(t.flops[MP_PHASE_FORWARD] < 1.25 * t.products[MP_PHASE_FORWARD]);
    ck_assert(t.flops[MP_PHASE_BACKWARD] < 1.25 * t.products[MP_PHASE_BACKWARD]);
    mp_onnx_close(m);
}
END_TEST

/* GPT-2 small forward at batch 1, context 1024 (docs/validation.md): Kaplan et
 * al. (2020) count C_forward = 2 N + 2 n_layer n_ctx d_attn per token (N
 * non-embedding parameters, the second term Q K^T), and 2 d_model n_vocab for
 * the de-embedding; memplan also counts P V (another 2 n_layer n_ctx d) and
 * the elementwise work. */
START_TEST(gpt2_124m_forward_vs_kaplan)
{
    mp_model *m = load(MODEL("gpt2_124m.onnx"), 2, (const char *[]){"batch", "sequence"}, (int64_t[]){1, 1024}, false);
    totals t = cost_all(m->graph);
    const double d = 768, l = 12, ctx = 1024, v = 50257, tokens = 1024;
    const double n_nonembed = 124439808.0 - v * d - ctx * d; /* 85,056,000 */
    double kaplan = tokens * (2 * n_nonembed + 2 * l * ctx * d);
    double deembed = tokens * 2 * d * v, pv = tokens * 2 * l * ctx * d;
    double products = t.products[MP_PHASE_FORWARD], total = t.flops[MP_PHASE_FORWARD];
    ck_assert_double_eq(products, tokens * gpt_products_per_token(d, ctx, l, v));
    /* Kaplan's 2N counts biases and LayerNorm weights as 2 FLOPs each; memplan
     * counts the bias adds and norms among the elementwise ops */
    double rest = total - products;
    ck_assert(rest > 0 && rest < 0.05 * total);
    ck_assert(fabs(products - (kaplan + deembed + pv)) < 0.001 * products);
    printf("gpt2_124m forward (1 x 1024): memplan %.5g FLOPs (products %.5g, other %.4g); "
           "Kaplan 2N + 2 n_layer n_ctx d %.5g, + de-embedding %.5g, + P V %.5g\n",
           total, products, rest, kaplan, kaplan + deembed, kaplan + deembed + pv);
    mp_onnx_close(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("op_cost");
    TCase *tc = tcase_create("op_cost");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, grad_column_keeps_every_rule);
    tcase_add_test(tc, matmul_batched_broadcast);
    tcase_add_test(tc, gemm_trans_a);
    tcase_add_test(tc, conv_grouped_strided);
    tcase_add_test(tc, view_is_free);
    tcase_add_test(tc, elementwise);
    tcase_add_test(tc, unknown_size_names_node);
    tcase_add_test(tc, cnn_bn_training_step);
    tcase_add_test(tc, gpt_decoder_training_step);
    tcase_add_test(tc, gpt2_124m_forward_vs_kaplan);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
