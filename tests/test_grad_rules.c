/* test_grad_rules.c - every gradient rule against central finite differences.
 *
 * Each row of `cases` is a small float64 graph built with the IR API: values
 * (graph inputs, parameters, constants) and nodes with their attributes. The
 * runner builds the training step (SGD, the row's loss), runs it on the CPU
 * executor with random data, and compares every parameter entry's gradient
 * with (L(p + eps) - L(p - eps)) / 2 eps of the step's own loss (eps 1e-6,
 * |fd - ad| <= 1e-6 (1 + |fd|)), as tests/test_train.c does.
 *
 * Rows whose forward op has no rule registered in the op table yet (or that
 * need a backward op the table lacks) are skipped with a message. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/infer.h"
#include "passes/autodiff.h"
#include "passes/train.h"
#include "runtime/exec.h"
#include "fd_check.h" /* defines: fd_compare */

/* The rows below leave trailing fields (constants' contents, attributes, `requires`) zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* An attribute: ints (count n >= 0 in v), or one INT (n = AINT), FLOAT, STRING. */
enum { AINT = -1, AFLOAT = -2, ASTR = -3 };
typedef struct tattr {
    const char *name;
    int n;
    int64_t v[8];
    float f;
    const char *s;
} tattr;
#define I(nm, x) {nm, AINT, {x}, 0, NULL}
#define F(nm, x) {nm, AFLOAT, {0}, x, NULL}
#define S(nm, x) {nm, ASTR, {0}, 0, x}
#define IS(nm, ...) {nm, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}, 0, NULL}

/* A leaf value: kind 'x' float64 input, 'p' parameter (float64 initializer),
 * 'b' bool input (random), 'i' int64 Constant, 'f' float64 Constant, 'B' bool Constant. */
typedef struct tval {
    const char *name;
    char kind;
    int rank;
    int64_t dims[6];
    double c[8]; /* contents of the constants */
} tval;

typedef struct tnode {
    const char *op;    /* "domain:op" outside the default domain (com.microsoft:SkipLayerNormalization) */
    const char *in[8]; /* "" : an omitted optional input (the recurrent ops take up to 8) */
    const char *out[4];
    tattr a[6];
} tnode;

typedef struct tcase {
    const char *name;
    int opset;
    mp_loss_kind loss;
    double lo, hi; /* range of the random inputs and parameters */
    tval v[8];
    tnode n[4];
    const char *requires; /* a memplan backward op the row needs, or NULL */
} tcase;

#define STD 0.2, 1.2 /* positive, no kinks: as tests/test_train.c */
#define SIGNED -1.5, 1.5

static const tcase cases[] = {
    /* ---- elementwise ---- */
    {"add_sub_broadcast", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 1, {4}}, {"q", 'p', 2, {3, 1}}},
     {{"Add", {"x", "p"}, {"a"}}, {"Sub", {"a", "q"}, {"y"}}}},
    {"mul_div_broadcast", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 1, {4}}, {"q", 'p', 2, {3, 1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Div", {"a", "q"}, {"y"}}}},
    {"neg_sum", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}},
     {{"Neg", {"p"}, {"a"}}, {"Sum", {"a", "x", "q"}, {"y"}}}},
    {"pow_base_and_exponent", 17, MP_LOSS_MSE, STD,
     {{"p", 'p', 2, {3, 4}}, {"e", 'p', 1, {4}}, {"x", 'x', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Pow", {"a", "e"}, {"y"}}}},
    {"pow_scalar_exponent", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"e", 'p', 0, {0}}},
     {{"Pow", {"p", "e"}, {"a"}}, {"Mul", {"a", "x"}, {"y"}}}},
    {"relu", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Relu", {"a"}, {"y"}}}},
    {"sigmoid", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Sigmoid", {"a"}, {"y"}}}},
    {"tanh", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Tanh", {"a"}, {"y"}}}},
    {"sqrt", 17, MP_LOSS_MSE, STD, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Sqrt", {"a"}, {"y"}}}},
    {"erf", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Erf", {"a"}, {"y"}}}},
    {"exp", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Exp", {"a"}, {"y"}}}},
    {"gelu_tanh", 20, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Gelu", {"a"}, {"y"}, {S("approximate", "tanh")}}}},
    {"hardswish_hardsigmoid", 17, MP_LOSS_MSE, -3, 3, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"HardSwish", {"a"}, {"h"}}, {"HardSigmoid", {"h"}, {"y"}, {F("alpha", 0.3f)}}}},
    {"softmax_axis0", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Softmax", {"a"}, {"y"}, {I("axis", 0)}}}},
    {"identity_cast", 17, MP_LOSS_MSE, STD, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Identity", {"a"}, {"b"}}, {"Cast", {"b"}, {"y"}, {I("to", MP_DOUBLE)}}}},
    {"castlike", 17, MP_LOSS_MSE, STD, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"t", 'f', 0, {0}, {1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"CastLike", {"a", "t"}, {"y"}}}},
    {"mod_fmod_broadcast", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Mod", {"a", "q"}, {"y"}, {I("fmod", 1)}}}},
    {"dropout_training", 17, MP_LOSS_MSE, STD,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"r", 'f', 0, {0}, {0.25}}, {"t", 'B', 0, {0}, {1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Dropout", {"a", "r", "t"}, {"y"}}}},
    {"where", 17, MP_LOSS_MSE, STD, {{"c", 'b', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}},
     {{"Where", {"c", "p", "q"}, {"y"}}}},
    {"clip_const_bounds", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"lo", 'f', 0, {0}, {-0.5}}, {"hi", 'f', 0, {0}, {0.6}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Clip", {"a", "lo", "hi"}, {"y"}}}},
    {"clip_param_min_no_max", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"lo", 'p', 0, {0}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Clip", {"a", "lo"}, {"y"}}}},
    {"clip_opset6_attributes", 6, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Clip", {"a"}, {"y"}, {F("min", -0.4f), F("max", 0.5f)}}}},
    {"min_max_broadcast", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}, {"r", 'p', 2, {3, 1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Min", {"a", "q"}, {"b"}}, {"Max", {"b", "r"}, {"y"}}}},
    /* more inputs, broadcast; a twice: the first takes the tie */
    {"min_max_many_inputs", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}, {"r", 'p', 2, {3, 1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Min", {"a", "q", "r"}, {"b"}}, {"Max", {"b", "r", "a", "q", "a"}, {"y"}}}},

    /* unary math and activations composed of forward ops (grad_elementwise.c) */
    {"log", 17, MP_LOSS_MSE, STD, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Log", {"a"}, {"y"}}}},
    {"reciprocal", 17, MP_LOSS_MSE, STD, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Reciprocal", {"a"}, {"y"}}}},
    {"abs_sin_cos", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Abs", {"a"}, {"b"}}, {"Sin", {"b"}, {"c"}}, {"Cos", {"c"}, {"y"}}}},
    {"floor_gives_nothing", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Floor", {"a"}, {"b"}}, {"Add", {"a", "b"}, {"y"}}}},
    {"softplus_softsign", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Softplus", {"a"}, {"b"}}, {"Sub", {"b", "x"}, {"c"}}, {"Softsign", {"c"}, {"y"}}}},
    {"leaky_thresholded_relu", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LeakyRelu", {"a"}, {"b"}, {F("alpha", 0.2f)}},
      {"ThresholdedRelu", {"b"}, {"y"}, {F("alpha", -0.1f)}}}},
    {"shrink", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {6, 8}}, {"p", 'p', 2, {6, 8}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Shrink", {"a"}, {"y"}, {F("lambd", 0.7f), F("bias", 0.1f)}}}},
    {"elu_selu_celu", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Elu", {"a"}, {"b"}, {F("alpha", 0.7f)}}, {"Selu", {"b"}, {"c"}},
      {"Celu", {"c"}, {"y"}, {F("alpha", 1.3f)}}}},
    {"mish_swish", 24, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Mish", {"a"}, {"b"}}, {"Swish", {"b"}, {"y"}, {F("alpha", 1.5f)}}}},
    {"prelu_broadcast_slope", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"s", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"PRelu", {"a", "s"}, {"y"}}}},
    {"mean_broadcast", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 1, {4}}, {"r", 'p', 2, {3, 1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Mean", {"a", "q", "r"}, {"y"}}}},
    {"log_softmax_axis1", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LogSoftmax", {"a"}, {"y"}, {I("axis", 1)}}}},
    {"log_softmax_opset11_coerced", 11, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LogSoftmax", {"a"}, {"y"}}}}, /* axis 1: rows of 3 x 4 */
    {"tan_sinh_cosh", 17, MP_LOSS_MSE, STD, {{"p", 'p', 2, {3, 4}}},
     {{"Tan", {"p"}, {"b"}}, {"Sinh", {"p"}, {"c"}}, {"Cosh", {"p"}, {"d"}}, {"Sum", {"b", "c", "d"}, {"y"}}}},
    {"asin_acos_atanh", 17, MP_LOSS_MSE, 0.1, 0.9, {{"p", 'p', 2, {3, 4}}},
     {{"Asin", {"p"}, {"a"}}, {"Acos", {"p"}, {"b"}}, {"Atanh", {"p"}, {"d"}}, {"Sum", {"a", "b", "d"}, {"y"}}}},
    {"atan_asinh", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}},
     {{"Atan", {"p"}, {"a"}}, {"Asinh", {"p"}, {"b"}}, {"Mul", {"a", "b"}, {"y"}}}},
    {"acosh", 17, MP_LOSS_MSE, 1.2, 2.5, {{"p", 'p', 2, {3, 4}}}, {{"Acosh", {"p"}, {"y"}}}},

    /* ---- linear algebra ---- */
    {"matmul_1d_by_2d", 17, MP_LOSS_MSE, SIGNED, {{"a", 'p', 1, {4}}, {"B", 'p', 2, {4, 3}}},
     {{"MatMul", {"a", "B"}, {"y"}}}},
    {"matmul_2d_by_1d", 17, MP_LOSS_MSE, SIGNED, {{"A", 'p', 2, {3, 4}}, {"b", 'p', 1, {4}}},
     {{"MatMul", {"A", "b"}, {"y"}}}},
    {"matmul_1d_by_1d", 17, MP_LOSS_MSE, SIGNED, {{"a", 'p', 1, {4}}, {"b", 'p', 1, {4}}},
     {{"MatMul", {"a", "b"}, {"y"}}}},
    {"matmul_1d_by_batched", 17, MP_LOSS_MSE, SIGNED, {{"a", 'p', 1, {4}}, {"B", 'p', 3, {2, 4, 3}}},
     {{"MatMul", {"a", "B"}, {"y"}}}},
    {"matmul_batched_by_1d", 17, MP_LOSS_MSE, SIGNED, {{"A", 'p', 3, {2, 3, 4}}, {"b", 'p', 1, {4}}},
     {{"MatMul", {"A", "b"}, {"y"}}}},
    {"matmul_batched_broadcast", 17, MP_LOSS_MSE, SIGNED, {{"A", 'p', 4, {2, 1, 3, 4}}, {"B", 'p', 3, {3, 4, 2}}},
     {{"MatMul", {"A", "B"}, {"y"}}}},
    {"gemm_trans_alpha_beta", 17, MP_LOSS_MSE, SIGNED,
     {{"A", 'p', 2, {4, 3}}, {"B", 'p', 2, {5, 4}}, {"C", 'p', 1, {5}}},
     {{"Gemm", {"A", "B", "C"}, {"y"}, {I("transA", 1), I("transB", 1), F("alpha", 0.5f), F("beta", 2.0f)}}}},

    {"einsum_batched_matmul", 17, MP_LOSS_MSE, SIGNED, {{"A", 'p', 3, {2, 3, 4}}, {"B", 'p', 3, {2, 4, 3}}},
     {{"Einsum", {"A", "B"}, {"y"}, {S("equation", "bij,bjk->bik")}}}},
    {"einsum_implicit_ascii_order", 17, MP_LOSS_MSE, SIGNED, {{"A", 'p', 2, {3, 4}}, {"B", 'p', 2, {4, 5}}},
     {{"Einsum", {"A", "B"}, {"y"}, {S("equation", "Ab,bc")}}}}, /* y is [A, c]: 'A' sorts before 'c' */
    {"einsum_ellipsis_broadcast", 17, MP_LOSS_MSE, SIGNED,
     {{"A", 'p', 3, {2, 3, 4}}, {"B", 'p', 3, {1, 4, 2}}, {"C", 'p', 2, {2, 3}}},
     {{"Einsum", {"A", "B"}, {"a"}, {S("equation", "...ij,...jk->...ik")}},
      {"Einsum", {"a", "C"}, {"y"}, {S("equation", "...ik,kl->...il")}}}},
    {"einsum_summed_labels_transpose", 17, MP_LOSS_MSE, SIGNED,
     {{"A", 'p', 2, {3, 4}}, {"B", 'p', 2, {4, 5}}, {"C", 'p', 3, {2, 2, 3}}},
     {{"Einsum", {"A", "B"}, {"a"}, {S("equation", "ij,jk->i")}}, /* k: B's alone, summed */
      {"Einsum", {"C"}, {"c"}, {S("equation", "...i->i...")}}, /* C's "..." moved after i */
      {"Einsum", {"a", "c"}, {"y"}, {S("equation", "i,ijk->jk")}}}},
    {"einsum_three_operands_size1_label", 17, MP_LOSS_MSE, SIGNED,
     {{"A", 'p', 2, {3, 4}}, {"B", 'p', 2, {4, 5}}, {"C", 'p', 2, {5, 2}}, {"D", 'p', 2, {2, 1}}},
     {{"Einsum", {"A", "B", "C"}, {"a"}, {S("equation", "ij,jk,kl->il")}},
      {"Einsum", {"a", "D"}, {"y"}, {S("equation", "il,jl->ij")}}}}, /* D's l is 1: broadcast */

    /* Attention (opset 23): AttentionGrad recomputes each row's softmax */
    {"attention_4d_causal", 23, MP_LOSS_MSE, SIGNED,
     {{"Q", 'p', 4, {1, 2, 3, 4}}, {"K", 'p', 4, {1, 2, 3, 4}}, {"V", 'p', 4, {1, 2, 3, 4}}},
     {{"Attention", {"Q", "K", "V"}, {"y"}, {I("is_causal", 1)}}}},
    {"attention_3d_gqa_softcap_scale", 23, MP_LOSS_MSE, SIGNED,
     {{"Q", 'p', 3, {2, 3, 8}}, {"K", 'p', 3, {2, 3, 4}}, {"V", 'p', 3, {2, 3, 4}}},
     {{"Attention", {"Q", "K", "V"}, {"y"},
       {I("q_num_heads", 4), I("kv_num_heads", 2), F("softcap", 2.0f), F("scale", 0.5f)}}}},
    {"attention_trainable_additive_mask", 23, MP_LOSS_MSE, SIGNED,
     {{"Q", 'p', 4, {1, 2, 3, 2}}, {"K", 'p', 4, {1, 2, 4, 2}}, {"V", 'p', 4, {1, 2, 4, 2}}, {"M", 'p', 2, {3, 4}}},
     {{"Attention", {"Q", "K", "V", "M"}, {"y"}}}}, /* M broadcast over batch and heads: its gradient is summed */
    {"attention_bool_mask", 23, MP_LOSS_MSE, SIGNED,
     {{"Q", 'p', 4, {1, 1, 3, 2}}, {"K", 'p', 4, {1, 1, 2, 2}}, {"V", 'p', 4, {1, 1, 2, 2}},
      {"M", 'B', 2, {3, 2}, {1, 0, 1, 1, 0, 1}}},
     {{"Attention", {"Q", "K", "V", "M"}, {"y"}}}},

    {"rotary_4d_position_ids_partial", 23, MP_LOSS_MSE, SIGNED,
     {{"X", 'p', 4, {1, 2, 3, 6}}, {"cos", 'f', 2, {3, 2}, {1, 0.8, 0.6, 0.3, -0.2, 0.9}},
      {"sin", 'f', 2, {3, 2}, {0, 0.6, 0.8, 0.95, 0.98, -0.4}}, {"pos", 'i', 2, {1, 3}, {2, 0, 1}}},
     {{"RotaryEmbedding", {"X", "cos", "sin", "pos"}, {"y"}, {I("rotary_embedding_dim", 4)}}}},
    {"rotary_3d_interleaved", 23, MP_LOSS_MSE, SIGNED,
     {{"X", 'p', 3, {1, 2, 8}}, {"cos", 'f', 2, {2, 2}, {1, 0.8, 0.6, 0.3}}, {"sin", 'f', 2, {2, 2}, {0, 0.6, 0.8, 0.95}},
      {"pos", 'i', 2, {1, 2}, {1, 0}}},
     {{"RotaryEmbedding", {"X", "cos", "sin", "pos"}, {"y"}, {I("num_heads", 2), I("interleaved", 1)}}}},

    /* ---- convolutions ---- */
    {"conv1d_pads_strides_dilations_groups", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 4, 9}}, {"p", 'p', 3, {2, 4, 9}}, {"W", 'p', 3, {6, 2, 3}}, {"B", 'p', 1, {6}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Conv", {"a", "W", "B"}, {"y"}, {IS("pads", 1, 2), IS("strides", 2), IS("dilations", 2), I("group", 2)}}}},
    {"conv2d_same_upper_stride2", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {1, 2, 5, 6}}, {"p", 'p', 4, {1, 2, 5, 6}}, {"W", 'p', 4, {3, 2, 3, 2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Conv", {"a", "W"}, {"y"}, {S("auto_pad", "SAME_UPPER"), IS("strides", 2, 2)}}}},
    {"conv3d_pads_strides_dilations_groups", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 5, {1, 4, 5, 6, 5}}, {"p", 'p', 5, {1, 4, 5, 6, 5}}, {"W", 'p', 5, {2, 2, 2, 3, 2}}, {"B", 'p', 1, {2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Conv", {"a", "W", "B"}, {"y"},
       {IS("pads", 1, 0, 1, 0, 1, 1), IS("strides", 2, 1, 2), IS("dilations", 1, 2, 1), I("group", 2)}}}},
    {"conv_transpose1d_output_padding_groups", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 4, 4}}, {"p", 'p', 3, {2, 4, 4}}, {"W", 'p', 3, {4, 3, 3}}, {"B", 'p', 1, {6}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"ConvTranspose", {"a", "W", "B"}, {"y"},
       {IS("strides", 2), IS("pads", 1, 0), IS("output_padding", 1), IS("dilations", 2), I("group", 2)}}}},
    {"conv_transpose2d_output_shape", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {1, 2, 3, 3}}, {"p", 'p', 4, {1, 2, 3, 3}}, {"W", 'p', 4, {2, 3, 2, 2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"ConvTranspose", {"a", "W"}, {"y"}, {IS("strides", 2, 2), IS("output_shape", 5, 6)}}}},

    /* ---- pools ---- */
    {"maxpool1d_ceil_dilations", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 10}}, {"p", 'p', 3, {2, 3, 10}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"y"}, {IS("kernel_shape", 3), IS("strides", 2), IS("pads", 1, 1), IS("dilations", 2),
                                  I("ceil_mode", 1)}}}},
    {"maxpool2d_indices_output", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {1, 2, 5, 5}}, {"p", 'p', 4, {1, 2, 5, 5}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"y", "idx"}, {IS("kernel_shape", 2, 3), IS("strides", 2, 1), IS("pads", 0, 1, 1, 1)}}}},
    {"maxpool3d_pads_strides", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 5, {1, 2, 5, 6, 4}}, {"p", 'p', 5, {1, 2, 5, 6, 4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"y"}, {IS("kernel_shape", 2, 3, 2), IS("strides", 2, 2, 1), IS("pads", 0, 1, 1, 1, 1, 0)}}}},
    {"maxpool2d_storage_order1_same_upper", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {1, 2, 5, 4}}, {"p", 'p', 4, {1, 2, 5, 4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"y", "idx"},
       {IS("kernel_shape", 3, 2), IS("strides", 2, 2), S("auto_pad", "SAME_UPPER"), I("storage_order", 1)}}}},
    {"avgpool2d_same_lower_include_pad", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {1, 2, 5, 4}}, {"p", 'p', 4, {1, 2, 5, 4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"AveragePool", {"a"}, {"y"},
       {IS("kernel_shape", 2, 3), IS("strides", 2, 1), S("auto_pad", "SAME_LOWER"), I("count_include_pad", 1)}}}},
    {"avgpool1d_include_pad_ceil", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 8}}, {"p", 'p', 3, {2, 3, 8}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"AveragePool", {"a"}, {"y"}, {IS("kernel_shape", 3), IS("strides", 2), IS("pads", 1, 1), I("ceil_mode", 1),
                                      I("count_include_pad", 1)}}}},
    {"avgpool2d_exclude_pad", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {1, 2, 5, 4}}, {"p", 'p', 4, {1, 2, 5, 4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"AveragePool", {"a"}, {"y"}, {IS("kernel_shape", 3, 2), IS("strides", 2, 2), IS("pads", 1, 1, 1, 0)}}}},
    {"avgpool3d_pads_strides", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 5, {1, 2, 4, 5, 3}}, {"p", 'p', 5, {1, 2, 4, 5, 3}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"AveragePool", {"a"}, {"y"}, {IS("kernel_shape", 2, 3, 2), IS("strides", 1, 2, 2), IS("pads", 1, 1, 0, 0, 1, 1),
                                      I("count_include_pad", 1)}}}},
    {"global_average_pool_1d", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 5}}, {"p", 'p', 3, {2, 3, 5}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"GlobalAveragePool", {"a"}, {"y"}}}},

    /* ---- normalizations ---- */
    {"batchnorm_training_1d", 15, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {3, 2, 4}}, {"g", 'p', 1, {2}}, {"b", 'p', 1, {2}}, {"bn.running_mean", 'p', 1, {2}},
      {"bn.running_var", 'p', 1, {2}}, {"W", 'p', 3, {3, 2, 4}}},
     {{"Mul", {"x", "W"}, {"a"}},
      {"BatchNormalization", {"a", "g", "b", "bn.running_mean", "bn.running_var"}, {"y"}, {I("training_mode", 1)}}}},
    {"layernorm_axis1", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"g", 'p', 2, {3, 4}}, {"b", 'p', 2, {3, 4}}},
     {{"LayerNormalization", {"x", "g", "b"}, {"y"}, {I("axis", 1)}}}},
    {"instancenorm", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {2, 3, 2, 3}}, {"p", 'p', 4, {2, 3, 2, 3}}, {"g", 'p', 1, {3}}, {"b", 'p', 1, {3}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"InstanceNormalization", {"a", "g", "b"}, {"y"}, {F("epsilon", 1e-3f)}}}},
    {"groupnorm_per_channel", 21, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 4, 3}}, {"p", 'p', 3, {2, 4, 3}}, {"g", 'p', 1, {4}}, {"b", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"GroupNormalization", {"a", "g", "b"}, {"y"}, {I("num_groups", 2)}}}},
    {"groupnorm_opset18_per_group", 18, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 4, 3}}, {"p", 'p', 3, {2, 4, 3}}, {"g", 'p', 1, {2}}, {"b", 'p', 1, {2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"GroupNormalization", {"a", "g", "b"}, {"y"}, {I("num_groups", 2)}}}},
    {"lrn", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {2, 5, 2, 3}}, {"p", 'p', 4, {2, 5, 2, 3}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LRN", {"a"}, {"y"}, {I("size", 3), F("alpha", 0.5f), F("bias", 2.0f)}}},
     "LRNGrad"},

    {"rmsnorm", 23, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}, {"g", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"RMSNormalization", {"a", "g"}, {"y"}, {F("epsilon", 1e-3f)}}}},
    {"global_max_pool", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {2, 3, 2, 2}}, {"p", 'p', 4, {2, 3, 2, 2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"GlobalMaxPool", {"a"}, {"y"}}}},

    /* ---- reductions ---- */
    {"reducesum_axes_input_keepdims0", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"ax", 'i', 1, {2}, {0, 2}}},
     {{"ReduceSum", {"p", "ax"}, {"y"}, {I("keepdims", 0)}}}},
    {"reducesum_axes_input_keepdims1", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"ax", 'i', 1, {1}, {-2}}},
     {{"ReduceSum", {"p", "ax"}, {"y"}, {I("keepdims", 1)}}}},
    {"reducesum_attribute_keepdims0", 11, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 4}}},
     {{"ReduceSum", {"p"}, {"y"}, {IS("axes", 1), I("keepdims", 0)}}}},
    {"reducesum_all_keepdims1", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"x", 'x', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"ReduceSum", {"a"}, {"y"}}}},
    {"reducemean_attribute_keepdims0", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 4}}},
     {{"ReduceMean", {"p"}, {"y"}, {IS("axes", 0, -1), I("keepdims", 0)}}}},
    /* ReduceMax/Min share dY among the maxima: a tie (two equal parameters) halves it */
    {"reducemax_attribute_keepdims0", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 4}}},
     {{"ReduceMax", {"p"}, {"y"}, {IS("axes", 1), I("keepdims", 0)}}}},
    {"reducemin_axes_input_all", 18, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"x", 'x', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"ReduceMin", {"a"}, {"y"}}}},
    {"reducemax_tie", 18, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 1, {2}}, {"q", 'p', 1, {2}}, {"ax", 'i', 1, {1}, {0}}, {"two", 'f', 0, {0}, {2}}},
     {{"Max", {"p", "q"}, {"m"}}, {"Concat", {"m", "m"}, {"c"}, {I("axis", 0)}}, {"ReduceMax", {"c", "ax"}, {"r"}},
      {"Mul", {"r", "two"}, {"y"}}}},
    {"reduce_sumsquare_l1_l2", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 4}}, {"x", 'x', 3, {2, 3, 4}}},
     {{"ReduceSumSquare", {"p"}, {"a"}, {IS("axes", 2)}}, {"ReduceL1", {"p"}, {"b"}, {IS("axes", 2)}},
      {"ReduceL2", {"x"}, {"c"}, {IS("axes", 2)}}, {"Sum", {"a", "b", "c"}, {"y"}}}},
    {"reduce_l2_logsumexp", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 4}}},
     {{"ReduceL2", {"p"}, {"a"}, {IS("axes", 0, 2), I("keepdims", 0)}},
      {"ReduceLogSumExp", {"p"}, {"b"}, {IS("axes", 0, 2), I("keepdims", 0)}}, {"Add", {"a", "b"}, {"y"}}}},
    {"reduce_logsum_prod", 17, MP_LOSS_MSE, STD, {{"p", 'p', 3, {2, 3, 4}}},
     {{"ReduceLogSum", {"p"}, {"a"}, {IS("axes", 1)}}, {"ReduceProd", {"p"}, {"b"}, {IS("axes", 1)}},
      {"Add", {"a", "b"}, {"y"}}}},
    {"reducemean_axes_input_keepdims1", 18, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"ax", 'i', 1, {1}, {1}}},
     {{"ReduceMean", {"p", "ax"}, {"y"}}}},

    /* ---- data movement ---- */
    {"reshape_transpose_flatten", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"s", 'i', 1, {3}, {4, 3, 2}}},
     {{"Reshape", {"p", "s"}, {"a"}}, {"Transpose", {"a"}, {"b"}, {IS("perm", 1, 2, 0)}},
      {"Flatten", {"b"}, {"y"}, {I("axis", 2)}}}},
    {"squeeze_unsqueeze", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {3, 1, 4}}, {"ax", 'i', 1, {1}, {1}}},
     {{"Squeeze", {"p", "ax"}, {"a"}}, {"Unsqueeze", {"a", "ax"}, {"b"}}, {"Tanh", {"b"}, {"y"}}}},
    {"split_concat", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 5}}, {"sz", 'i', 1, {2}, {2, 3}}},
     {{"Split", {"p", "sz"}, {"a", "b"}, {I("axis", 1)}}, {"Tanh", {"a"}, {"t"}},
      {"Concat", {"b", "t"}, {"y"}, {I("axis", -1)}}}},
    {"slice_steps", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {4, 6}}, {"st", 'i', 1, {2}, {3, 1}}, {"en", 'i', 1, {2}, {0, 6}}, {"ax", 'i', 1, {2}, {0, 1}},
      {"sp", 'i', 1, {2}, {-1, 2}}},
     {{"Slice", {"p", "st", "en", "ax", "sp"}, {"y"}}}},
    {"gather_repeated_indices", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"ix", 'i', 1, {4}, {2, 0, 2, 1}}},
     {{"Gather", {"p", "ix"}, {"y"}, {I("axis", 1)}}}},
    {"depth_to_space_dcr_crd", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 4, {1, 8, 2, 3}}},
     {{"DepthToSpace", {"p"}, {"a"}, {I("blocksize", 2)}}, {"DepthToSpace", {"p"}, {"b"}, {I("blocksize", 2), S("mode", "CRD")}},
      {"Mul", {"a", "b"}, {"y"}}}}, /* a product, so a wrong permutation of either shows */
    {"space_to_depth", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 4, {1, 2, 4, 6}}, {"x", 'x', 4, {1, 8, 2, 3}}},
     {{"SpaceToDepth", {"p"}, {"a"}, {I("blocksize", 2)}}, {"Mul", {"a", "x"}, {"y"}}}},
    {"tile", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {2, 3}}, {"r", 'i', 1, {2}, {3, 2}}, {"x", 'x', 2, {6, 6}}},
     {{"Tile", {"p", "r"}, {"a"}}, {"Mul", {"a", "x"}, {"y"}}}},
    {"gather_elements_repeats", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 2}}, {"ix", 'i', 2, {2, 2}, {2, 0, 2, 1}}, {"x", 'x', 2, {2, 2}}},
     {{"GatherElements", {"p", "ix"}, {"a"}}, {"Mul", {"a", "x"}, {"y"}}}},
    {"cumsum_exclusive_reverse", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"ax", 'i', 0, {0}, {1}}, {"x", 'x', 2, {3, 4}}},
     {{"CumSum", {"p", "ax"}, {"a"}, {I("exclusive", 1)}}, {"CumSum", {"a", "ax"}, {"b"}, {I("reverse", 1)}},
      {"Mul", {"b", "x"}, {"y"}}}},
    {"topk_values", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 5}}, {"k", 'i', 1, {1}, {2}}},
     {{"TopK", {"p", "k"}, {"y", "ix"}}}},
    {"trilu_lower_k1", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"k", 'i', 0, {0}, {1}}},
     {{"Trilu", {"p", "k"}, {"y"}, {I("upper", 0)}}}},
    {"gather_nd_repeats", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"ix", 'i', 2, {3, 1}, {2, 0, 2}}},
     {{"GatherND", {"p", "ix"}, {"y"}}}},
    {"scatter_nd_none", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"u", 'p', 2, {2, 4}}, {"ix", 'i', 2, {2, 1}, {1, 2}}},
     {{"ScatterND", {"p", "ix", "u"}, {"y"}}}},
    {"scatter_nd_add", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"u", 'p', 2, {2, 4}}, {"ix", 'i', 2, {2, 1}, {1, 1}}},
     {{"ScatterND", {"p", "ix", "u"}, {"y"}, {S("reduction", "add")}}}},
    {"scatter_elements_none_axis1", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"u", 'p', 2, {3, 2}}, {"ix", 'i', 2, {3, 2}, {0, 3, 2, 1, 3, 0}}},
     {{"ScatterElements", {"p", "ix", "u"}, {"y"}, {I("axis", 1)}}}},
    {"scatter_elements_add_repeats", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"u", 'p', 2, {2, 4}}, {"ix", 'i', 2, {2, 4}, {1, 1, 0, 2, 1, 2, 0, 2}}},
     {{"ScatterElements", {"p", "ix", "u"}, {"y"}, {S("reduction", "add")}}}},
    {"scatter_opset10", 10, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"u", 'p', 2, {2, 4}}, {"ix", 'i', 2, {2, 4}, {2, 0, 1, 2, 0, 1, 2, 0}}},
     {{"Scatter", {"p", "ix", "u"}, {"y"}}}},
    /* MaxUnpool after the MaxPool whose indices it reads (non-overlapping windows), 2-D and 1-D */
    {"maxpool_maxunpool_2d", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 4, {1, 2, 4, 6}}, {"p", 'p', 4, {1, 2, 4, 6}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"m", "idx"}, {IS("kernel_shape", 2, 2), IS("strides", 2, 2)}},
      {"MaxUnpool", {"m", "idx"}, {"y"}, {IS("kernel_shape", 2, 2), IS("strides", 2, 2)}}}},
    {"maxpool_maxunpool_1d_pads", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 2, 7}}, {"p", 'p', 3, {2, 2, 7}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"MaxPool", {"a"}, {"m", "idx"}, {IS("kernel_shape", 2), IS("strides", 2), IS("pads", 1, 0)}},
      {"MaxUnpool", {"m", "idx"}, {"y"}, {IS("kernel_shape", 2), IS("strides", 2), IS("pads", 1, 0)}}}},
    /* LpNormalization: p = 2 on signed values, p = 1 (sign(X)) on an inner axis */
    {"lp_normalization_p2", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LpNormalization", {"a"}, {"y"}}}},
    {"lp_normalization_p1_axis", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 3, 2}}, {"p", 'p', 3, {2, 3, 2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"LpNormalization", {"a"}, {"y"}, {I("p", 1), I("axis", 1)}}}},
    /* SwiGLU (opset 28): both halves trained, alpha not 1 */
    {"swiglu_alpha", 28, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"q", 'p', 2, {3, 4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Mul", {"x", "q"}, {"b"}}, {"SwiGLU", {"a", "b"}, {"y"}, {F("alpha", 1.5f)}}}},
    /* ReverseSequence: time-major, three lengths; CenterCropPad cropping one axis and padding another */
    {"reverse_sequence", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {4, 3, 2}}, {"p", 'p', 3, {4, 3, 2}}, {"len", 'i', 1, {3}, {4, 2, 1}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"ReverseSequence", {"a", "len"}, {"y"}, {I("batch_axis", 1), I("time_axis", 0)}}}},
    {"center_crop_pad", 18, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 5, 4}}, {"p", 'p', 3, {2, 5, 4}}, {"to", 'i', 1, {2}, {3, 7}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"CenterCropPad", {"a", "to"}, {"y"}, {IS("axes", 1, -1)}}}},
    /* onnxruntime's contrib ops, written as the ONNX ops they fuse (passes/contrib.c); the Skip forms'
     * sum (input_skip_bias_sum) feeds the next residual, as the transformer optimizer leaves it */
    {"ms_bias_gelu_fast_gelu", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 2, {3, 4}}, {"p", 'p', 2, {3, 4}}, {"b", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"com.microsoft:BiasGelu", {"a", "b"}, {"g"}},
      {"com.microsoft:FastGelu", {"g", "b"}, {"h"}}, {"com.microsoft:Gelu", {"h"}, {"y"}}}},
    {"ms_skip_layer_norm", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}, {"s", 'p', 3, {2, 3, 4}}, {"g", 'p', 1, {4}},
      {"be", 'p', 1, {4}}, {"bi", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"com.microsoft:SkipLayerNormalization", {"a", "s", "g", "be", "bi"}, {"n", "", "", "sum"}, {F("epsilon", 1e-3f)}},
      {"Mul", {"n", "sum"}, {"y"}}}},
    {"ms_skip_simplified_norm", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}, {"s", 'p', 3, {2, 3, 4}}, {"g", 'p', 1, {4}},
      {"bi", 'p', 1, {4}}, {"g2", 'p', 1, {4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"com.microsoft:SkipSimplifiedLayerNormalization", {"a", "s", "g", "bi"}, {"n", "", "", "sum"}, {F("epsilon", 1e-3f)}},
      {"Add", {"n", "sum"}, {"r"}}, {"SimplifiedLayerNormalization", {"r", "g2"}, {"y"}, {F("epsilon", 1e-3f)}}}},
    /* MeanVarianceNormalization (written as its function body, passes/contrib.c): default axes, and {1} at
     * opset 18 (ReduceMean's axes an input); times a parameter, since its squares sum to a constant */
    {"mean_variance_norm", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {2, 3, 2, 2}}, {"p", 'p', 4, {2, 3, 2, 2}}, {"w", 'p', 4, {2, 3, 2, 2}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"MeanVarianceNormalization", {"a"}, {"n"}}, {"Mul", {"n", "w"}, {"y"}}}},
    {"mean_variance_norm_axes", 18, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 4, 3}}, {"p", 'p', 3, {2, 4, 3}}, {"w", 'p', 1, {3}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"MeanVarianceNormalization", {"a"}, {"n"}, {IS("axes", 1)}}, {"Mul", {"n", "w"}, {"y"}}}},
    {"ms_fused_matmul", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {2, 4, 3}}, {"p", 'p', 3, {2, 4, 3}}, {"w", 'p', 2, {5, 4}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"com.microsoft:FusedMatMul", {"a", "w"}, {"y"}, {I("transA", 1), I("transB", 1), F("alpha", 0.5f)}}}},
    {"ms_attention_masked", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"w", 'p', 2, {4, 12}}, {"b", 'p', 1, {12}}, {"m", 'i', 2, {2, 3}, {1, 1, 0, 1, 0, 1}}},
     {{"com.microsoft:Attention", {"x", "w", "b", "m"}, {"y"}, {I("num_heads", 2)}}}},
    {"ms_attention_causal_qkv_sizes", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {2, 3, 4}}, {"p", 'p', 3, {2, 3, 4}}, {"w", 'p', 2, {4, 10}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"com.microsoft:Attention", {"a", "w"}, {"y"},
       {I("num_heads", 2), I("unidirectional", 1), IS("qkv_hidden_sizes", 4, 4, 2), F("scale", 0.7f)}}}},
    /* GridSample: X and the grid both trained; grid values past [-1, 1] reach the padding */
    {"grid_sample_linear_zeros", 20, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 2, 3, 4}}, {"g", 'p', 4, {1, 2, 3, 2}}},
     {{"GridSample", {"p", "g"}, {"y"}}}},
    {"grid_sample_bicubic_border_align", 16, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {2, 1, 4, 3}}, {"g", 'p', 4, {2, 2, 2, 2}}},
     {{"GridSample", {"p", "g"}, {"y"}, {S("mode", "bicubic"), S("padding_mode", "border"), I("align_corners", 1)}}}},
    {"grid_sample_linear_reflection", 20, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 2, 3, 3}}, {"g", 'p', 4, {1, 3, 2, 2}}},
     {{"GridSample", {"p", "g"}, {"y"}, {S("padding_mode", "reflection")}}}},
    {"grid_sample_cubic_reflection_align", 20, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 1, 4, 4}}, {"g", 'p', 4, {1, 2, 3, 2}}},
     {{"GridSample", {"p", "g"}, {"y"}, {S("mode", "cubic"), S("padding_mode", "reflection"), I("align_corners", 1)}}}},
    {"grid_sample_nearest", 20, MP_LOSS_MSE, SIGNED, {{"p", 'p', 4, {1, 2, 3, 4}}, {"g", 'x', 4, {1, 2, 3, 2}}},
     {{"GridSample", {"p", "g"}, {"y"}, {S("mode", "nearest")}}}},
    {"grid_sample_volumetric_linear", 20, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 5, {1, 1, 2, 3, 3}}, {"g", 'p', 5, {1, 2, 2, 2, 3}}},
     {{"GridSample", {"p", "g"}, {"y"}}}},
    {"affine_grid_2d", 20, MP_LOSS_MSE, SIGNED, {{"t", 'p', 3, {2, 2, 3}}, {"s", 'i', 1, {4}, {2, 1, 3, 4}}},
     {{"AffineGrid", {"t", "s"}, {"y"}}}},
    {"affine_grid_3d_align", 20, MP_LOSS_MSE, SIGNED, {{"t", 'p', 3, {1, 3, 4}}, {"s", 'i', 1, {5}, {1, 1, 2, 3, 2}}},
     {{"AffineGrid", {"t", "s"}, {"y"}, {I("align_corners", 1)}}}},
    /* a spatial transformer: the sampled image's gradient reaches theta through the grid */
    {"spatial_transformer", 20, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 2, 4, 4}}, {"t", 'p', 3, {1, 2, 3}}, {"s", 'i', 1, {4}, {1, 2, 3, 3}}},
     {{"AffineGrid", {"t", "s"}, {"g"}}, {"GridSample", {"p", "g"}, {"y"}}}},
    {"upsample_opset9_linear", 9, MP_LOSS_MSE, SIGNED, {{"p", 'p', 4, {1, 1, 2, 3}}, {"sc", 'f', 1, {4}, {1, 1, 2, 2.5}}},
     {{"Upsample", {"p", "sc"}, {"y"}, {S("mode", "linear")}}}},
    {"expand", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 1}}, {"s", 'i', 1, {3}, {2, 3, 4}}},
     {{"Expand", {"p", "s"}, {"y"}}}},
    {"resize_nearest_asymmetric_floor", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 4, {1, 2, 3, 2}}, {"p", 'p', 4, {1, 2, 3, 2}}, {"sc", 'f', 1, {4}, {1, 1, 2, 3}}},
     {{"Mul", {"x", "p"}, {"a"}},
      {"Resize", {"a", "", "sc"}, {"y"}, {S("coordinate_transformation_mode", "asymmetric"), S("nearest_mode", "floor")}}}},
    {"resize_nearest_half_pixel_sizes", 17, MP_LOSS_MSE, SIGNED,
     {{"x", 'x', 3, {1, 2, 3}}, {"p", 'p', 3, {1, 2, 3}}, {"sz", 'i', 1, {3}, {1, 2, 9}}},
     {{"Mul", {"x", "p"}, {"a"}}, {"Resize", {"a", "", "", "sz"}, {"y"}}}},

    /* the general case, ResizeGrad: linear, cubic, antialias, non-integer factors, axes, crops, opset 10 */
    {"resize_linear_half_pixel_non_integer", 17, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 2, 3, 4}}, {"sz", 'i', 1, {4}, {1, 2, 5, 7}}},
     {{"Resize", {"p", "", "", "sz"}, {"y"}, {S("mode", "linear")}}}},
    {"resize_linear_align_corners_axes_down", 18, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"sz", 'i', 1, {2}, {5, 3}}},
     {{"Resize", {"p", "", "", "sz"}, {"y"}, {S("mode", "linear"), S("coordinate_transformation_mode", "align_corners"),
                                             IS("axes", 1, 2)}}}},
    {"resize_cubic_antialias_down", 18, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 1, 6, 5}}, {"sz", 'i', 1, {4}, {1, 1, 4, 3}}},
     {{"Resize", {"p", "", "", "sz"}, {"y"}, {S("mode", "cubic"), I("antialias", 1)}}}},
    {"resize_nearest_factor_1_5", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {1, 2, 4}}, {"sz", 'i', 1, {3}, {1, 2, 6}}},
     {{"Resize", {"p", "", "", "sz"}, {"y"}}}},
    {"resize_opset10_linear_scales", 10, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 4, {1, 1, 2, 2}}, {"sc", 'f', 1, {4}, {1, 1, 2, 1.5}}},
     {{"Resize", {"p", "sc"}, {"y"}, {S("mode", "linear")}}}},
    {"resize_tf_crop_extrapolation", 13, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"roi", 'f', 1, {4}, {0, -0.2, 1, 1.3}}, {"sz", 'i', 1, {2}, {3, 5}}},
     {{"Resize", {"p", "roi", "", "sz"}, {"y"}, {S("mode", "linear"), S("coordinate_transformation_mode", "tf_crop_and_resize"),
                                                 F("extrapolation_value", 0.5f)}}}},
    /* Pad: every mode, pads as input (11+) or attribute (2..10), cropping, the axes input (18+) */
    {"pad_constant_value_input", 11, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 2, {3, 4}}, {"pd", 'i', 1, {4}, {1, 2, 0, 1}}, {"cv", 'f', 0, {0}, {0.5}}},
     {{"Pad", {"p", "pd", "cv"}, {"y"}}}},
    {"pad_reflect", 13, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 5}}, {"pd", 'i', 1, {4}, {1, 2, 2, 4}}},
     {{"Pad", {"p", "pd"}, {"y"}, {S("mode", "reflect")}}}},
    {"pad_edge", 13, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"pd", 'i', 1, {4}, {2, 1, 1, 3}}},
     {{"Pad", {"p", "pd"}, {"y"}, {S("mode", "edge")}}}},
    {"pad_wrap", 19, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}, {"pd", 'i', 1, {4}, {1, 5, 2, 1}}},
     {{"Pad", {"p", "pd"}, {"y"}, {S("mode", "wrap")}}}},
    {"pad_negative_crop", 13, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {4, 5}}, {"pd", 'i', 1, {4}, {-1, 2, 1, -2}}},
     {{"Pad", {"p", "pd"}, {"y"}}}},
    {"pad_reflect_negative", 13, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {4, 5}}, {"pd", 'i', 1, {4}, {2, -1, -1, 3}}},
     {{"Pad", {"p", "pd"}, {"y"}, {S("mode", "reflect")}}}},
    {"pad_wrap_negative", 19, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 5}}, {"pd", 'i', 1, {4}, {-1, 2, 2, -1}}},
     {{"Pad", {"p", "pd"}, {"y"}, {S("mode", "wrap")}}}},
    {"pad_axes_input_edge", 18, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"pd", 'i', 1, {4}, {2, -1, 1, 1}}, {"ax", 'i', 1, {2}, {-1, 0}}},
     {{"Pad", {"p", "pd", "", "ax"}, {"y"}, {S("mode", "edge")}}}},
    {"pad_axes_input_constant", 21, MP_LOSS_MSE, SIGNED,
     {{"p", 'p', 3, {2, 3, 4}}, {"pd", 'i', 1, {2}, {1, 2}}, {"cv", 'f', 0, {0}, {-0.25}}, {"ax", 'i', 1, {1}, {1}}},
     {{"Pad", {"p", "pd", "cv", "ax"}, {"y"}}}},
    {"pad_opset2_attribute_reflect", 2, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 4}}},
     {{"Pad", {"p"}, {"y"}, {IS("pads", 2, 1, 1, 3), S("mode", "reflect")}}}},
    {"pad_opset2_attribute_constant", 2, MP_LOSS_MSE, SIGNED, {{"p", 'p', 3, {2, 3, 2}}},
     {{"Pad", {"p"}, {"y"}, {IS("pads", 0, -1, 1, 1, 2, 0), F("value", 0.3f)}}}},
    /* ---- recurrences: unrolled before autodiff (passes/unroll_rnn.c); T 3, B 2, I 3, H 2 ---- */
    {"lstm_bias_initial_states", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {1, 8, 3}}, {"R", 'p', 3, {1, 8, 2}}, {"B", 'p', 2, {1, 16}},
      {"h0", 'p', 3, {1, 2, 2}}, {"c0", 'p', 3, {1, 2, 2}}},
     {{"LSTM", {"X", "W", "R", "B", "", "h0", "c0"}, {"Y", "Y_h"}, {I("hidden_size", 2)}}}},
    {"lstm_bidirectional", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {2, 8, 3}}, {"R", 'p', 3, {2, 8, 2}}, {"B", 'p', 2, {2, 16}},
      {"h0", 'p', 3, {2, 2, 2}}},
     {{"LSTM", {"X", "W", "R", "B", "", "h0"}, {"Y"}, {I("hidden_size", 2), S("direction", "bidirectional")}}}},
    {"lstm_peepholes", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {1, 8, 3}}, {"R", 'p', 3, {1, 8, 2}}, {"B", 'p', 2, {1, 16}},
      {"c0", 'p', 3, {1, 2, 2}}, {"P", 'p', 2, {1, 6}}},
     {{"LSTM", {"X", "W", "R", "B", "", "", "c0", "P"}, {"Y"}, {I("hidden_size", 2)}}}},
    {"lstm_layout1", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {2, 3, 3}}, {"W", 'p', 3, {1, 8, 3}}, {"R", 'p', 3, {1, 8, 2}}, {"h0", 'p', 3, {2, 1, 2}},
      {"c0", 'p', 3, {2, 1, 2}}},
     {{"LSTM", {"X", "W", "R", "", "", "h0", "c0"}, {"Y"}, {I("hidden_size", 2), I("layout", 1)}}}},
    {"gru_linear_before_reset0", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {1, 6, 3}}, {"R", 'p', 3, {1, 6, 2}}, {"B", 'p', 2, {1, 12}},
      {"h0", 'p', 3, {1, 2, 2}}},
     {{"GRU", {"X", "W", "R", "B", "", "h0"}, {"Y"}, {I("hidden_size", 2)}}}},
    {"gru_linear_before_reset1", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {1, 6, 3}}, {"R", 'p', 3, {1, 6, 2}}, {"B", 'p', 2, {1, 12}},
      {"h0", 'p', 3, {1, 2, 2}}},
     {{"GRU", {"X", "W", "R", "B", "", "h0"}, {"Y"}, {I("hidden_size", 2), I("linear_before_reset", 1)}}}},
    {"rnn_reverse_clip", 17, MP_LOSS_MSE, SIGNED,
     {{"X", 'x', 3, {3, 2, 3}}, {"W", 'p', 3, {1, 2, 3}}, {"R", 'p', 3, {1, 2, 2}}, {"B", 'p', 2, {1, 4}},
      {"h0", 'p', 3, {1, 2, 2}}},
     {{"RNN", {"X", "W", "R", "B", "", "h0"}, {"Y"}, {I("hidden_size", 2), S("direction", "reverse"), F("clip", 0.8f)}}}},

    /* ---- losses ---- */
    {"softmax_cross_entropy", 17, MP_LOSS_XENT, SIGNED, {{"x", 'x', 2, {4, 3}}, {"W", 'p', 2, {3, 5}}},
     {{"MatMul", {"x", "W"}, {"y"}}}},
    /* a model whose output is its own loss: SoftmaxCrossEntropyLoss without its log_prob output (it gets one),
     * LogSoftmax then NegativeLogLikelihoodLoss */
    {"sce_loss_without_log_prob", 17, MP_LOSS_SUM, SIGNED,
     {{"x", 'x', 2, {4, 3}}, {"W", 'p', 2, {3, 5}}, {"t", 'i', 1, {4}, {1, 4, 0, 2}}},
     {{"MatMul", {"x", "W"}, {"s"}}, {"SoftmaxCrossEntropyLoss", {"s", "t"}, {"y"}}}},
    {"nll_mean_weights_ignore_index", 17, MP_LOSS_SUM, SIGNED,
     {{"x", 'p', 2, {3, 4}}, {"t", 'i', 1, {3}, {1, 2, 0}}, {"w", 'f', 1, {4}, {0.5, 1, 2, 1.5}}},
     {{"LogSoftmax", {"x"}, {"lp"}, {I("axis", 1)}},
      {"NegativeLogLikelihoodLoss", {"lp", "t", "w"}, {"y"}, {I("ignore_index", 2)}}}},
    {"nll_none_spatial", 17, MP_LOSS_MSE, SIGNED, {{"x", 'p', 3, {2, 3, 2}}, {"t", 'i', 2, {2, 2}, {0, 2, 1, 1}}},
     {{"LogSoftmax", {"x"}, {"lp"}, {I("axis", 1)}},
      {"NegativeLogLikelihoodLoss", {"lp", "t"}, {"y"}, {S("reduction", "none")}}}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static uint64_t rng;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* a: up to 6 attributes, ended by a NULL name when fewer. */
static void set_attrs(mp_graph *g, mp_node *n, const tattr *a)
{
    int na = 0;
    while (na < 6 && a[na].name) na++;
    n->attrs = mp_arena_alloc(g->arena, (size_t)(na ? na : 1) * sizeof *n->attrs);
    n->nattrs = na;
    for (int i = 0; i < na; i++) {
        mp_attr *t = &n->attrs[i];
        memset(t, 0, sizeof *t);
        t->name = a[i].name;
        if (a[i].n == AINT) t->type = MP_ATTR_INT, t->i = a[i].v[0];
        else if (a[i].n == AFLOAT) t->type = MP_ATTR_FLOAT, t->f = a[i].f;
        else if (a[i].n == ASTR) t->type = MP_ATTR_STRING, t->s = a[i].s, t->slen = strlen(a[i].s);
        else t->type = MP_ATTR_INTS, t->n = a[i].n, t->ints = mp_arena_dup(g->arena, a[i].v, sizeof a[i].v);
    }
}

/* A leaf value of the row. */
static void add_leaf(mp_graph *g, const tval *v, int32_t *ins, int *nins)
{
    int32_t id = mp_graph_add_value(g, v->name);
    mp_dim d[6];
    for (int i = 0; i < v->rank; i++) d[i] = mp_dim_of(v->dims[i]);
    bool konst = v->kind == 'i' || v->kind == 'f' || v->kind == 'B';
    mp_dtype t = v->kind == 'i' ? MP_INT64 : v->kind == 'b' || v->kind == 'B' ? MP_BOOL : MP_DOUBLE;
    if (konst) {
        mp_tensor *te = mp_tensor_new(g->arena, t, v->rank, v->dims);
        for (int64_t i = 0; i < te->numel && i < 8; i++) mp_tensor_set_f64(te, i, v->c[i]);
        int32_t n = mp_graph_add_node(g, NULL, "Constant", "", 0, NULL, 1, &id);
        mp_node *nd = &g->nodes[n];
        nd->attrs = mp_arena_alloc(g->arena, sizeof *nd->attrs), nd->nattrs = 1;
        nd->attrs[0] = (mp_attr){.name = "value", .type = MP_ATTR_TENSOR,
                                 .tensors = mp_arena_alloc(g->arena, sizeof(mp_tensor *))};
        nd->attrs[0].tensors[0] = te;
        return;
    }
    mp_value_set(g, id, t, v->rank, d);
    g->values[id].flags = v->kind == 'p' ? MP_VAL_INITIALIZER : MP_VAL_INPUT;
    if (v->kind != 'p') ins[(*nins)++] = id;
}

/* Builds the row's graph; its output is the last node's first output. */
static mp_graph *build(const tcase *c)
{
    mp_graph *g = mp_graph_new(NULL);
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", c->opset};
    g->nopsets = 1;
    int32_t ins[8], inits[8], nin = 0, ninit = 0, y = -1;
    for (int i = 0; i < 8 && c->v[i].name; i++) add_leaf(g, &c->v[i], ins, &nin);
    for (int k = 0; k < 4 && c->n[k].op; k++) {
        const tnode *t = &c->n[k];
        int32_t in[8], out[4];
        int ni = 0, no = 0;
        for (; ni < 8 && t->in[ni]; ni++) {
            in[ni] = !*t->in[ni] ? -1 : mp_graph_find(g, t->in[ni]);
            ck_assert_msg(!*t->in[ni] || in[ni] >= 0, "%s: no value '%s'", c->name, t->in[ni]);
        }
        for (; no < 4 && t->out[no]; no++) out[no] = !*t->out[no] ? -1 : mp_graph_add_value(g, t->out[no]);
        char domain[32] = "";
        const char *op = strchr(t->op, ':') ? strchr(t->op, ':') + 1 : t->op;
        if (op != t->op) snprintf(domain, sizeof domain, "%.*s", (int)(op - t->op - 1), t->op);
        int32_t n = mp_graph_add_node(g, t->op, op, domain, ni, in, no, out);
        set_attrs(g, &g->nodes[n], t->a);
        y = out[0];
    }
    for (int32_t v = 0; v < g->nvalues; v++)
        if (g->values[v].flags & MP_VAL_INITIALIZER) inits[ninit++] = v;
    g->inputs = mp_arena_dup(g->arena, ins, sizeof ins), g->ninputs = nin;
    g->inits = mp_arena_dup(g->arena, inits, sizeof inits), g->ninits = ninit;
    g->values[y].flags |= MP_VAL_OUTPUT;
    g->outputs = mp_arena_dup(g->arena, &y, sizeof y), g->noutputs = 1;
    return g;
}

/* Why the row cannot run yet (a forward op without a registered rule, or a
 * missing backward op), or NULL. */
static const char *missing(const tcase *c)
{
    static char why[128];
    for (int k = 0; k < 4 && c->n[k].op; k++) {
        const char *op = c->n[k].op, *colon = strchr(op, ':');
        char domain[32] = "";
        if (colon) snprintf(domain, sizeof domain, "%.*s", (int)(colon - op), op);
        const mp_op_def *d = mp_op_find(colon ? colon + 1 : op, domain);
        /* the recurrent ops, onnxruntime's contrib ops and the function ops contrib.c writes out have no rule:
         * the training step rewrites them first */
        bool unrolled = !strcmp(op, "RNN") || !strcmp(op, "GRU") || !strcmp(op, "LSTM") ||
                        mp_contrib_rewrites(colon ? colon + 1 : op, domain);
        if (!d || (!mp_grad_rule_for(d->id) && !unrolled)) {
            snprintf(why, sizeof why, "no gradient rule registered for %s", c->n[k].op);
            return why;
        }
    }
    if (c->requires && !mp_op_find(c->requires, "memplan")) {
        snprintf(why, sizeof why, "no %s op in the table", c->requires);
        return why;
    }
    return NULL;
}

static int skipped;

START_TEST(finite_differences)
{
    const tcase *c = &cases[_i];
    const char *why = missing(c);
    if (why) {
        printf("  %-40s SKIPPED: %s\n", c->name, why);
        skipped++;
        return;
    }
    mp_err err = {""};
    mp_graph *g = build(c);
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s: %s", c->name, err.msg);
    const mp_value *y = &g->values[g->outputs[0]];
    int64_t classes = y->rank > 0 ? y->dims[y->rank - 1].v : 1; /* the cross-entropy labels index the last axis */
    mp_train_opts o = mp_train_defaults();
    o.loss = c->loss;
    o.optimizer = MP_OPT_SGD;
    ck_assert_msg(!mp_train_build(g, &o, &err), "%s: %s", c->name, err.msg);
    /* keep the loss and every parameter's gradient (the updates' input 1) */
    int32_t *keep = mp_arena_alloc(g->arena, (size_t)(g->nnodes + 1) * sizeof *keep), nkeep = 1;
    int32_t *param = mp_arena_alloc(g->arena, (size_t)(g->nnodes + 1) * sizeof *param);
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        if (n->phase == MP_PHASE_LOSS) keep[0] = n->out[0];
        if (n->phase == MP_PHASE_OPTIMIZER) param[nkeep] = n->in[0], keep[nkeep++] = n->in[1];
    }
    ck_assert_msg(nkeep >= 2, "%s: no parameter gets a gradient", c->name);
    g->outputs = keep, g->noutputs = nkeep;
    mp_exec *ex = mp_exec_new(g, NULL, &err);
    ck_assert_msg(ex, "%s: %s", c->name, err.msg);
    rng = 12345;
    mp_tensor **data = mp_arena_alloc(g->arena, (size_t)g->nvalues * sizeof *data);
    for (int32_t v = 0; v < g->nvalues; v++) {
        const mp_value *val = &g->values[v];
        data[v] = NULL;
        if (!(val->flags & (MP_VAL_INPUT | MP_VAL_INITIALIZER)) || val->producer >= 0) continue;
        int64_t dims[MP_MAX_RANK];
        for (int i = 0; i < val->rank; i++) dims[i] = val->dims[i].v;
        mp_tensor *t = data[v] = mp_tensor_new(g->arena, val->dtype, val->rank, dims);
        for (int64_t i = 0; i < t->numel; i++) {
            double u = urand();
            if (val->dtype == MP_DOUBLE) mp_tensor_set_f64(t, i, c->lo + (c->hi - c->lo) * u);
            else mp_tensor_set_i64(t, i, (int64_t)(u * (double)(val->dtype == MP_BOOL ? 2 : classes)));
        }
        ck_assert_msg(!mp_exec_bind(ex, v, t, &err), "%s: %s", c->name, err.msg);
    }
    ck_assert_msg(!mp_exec_run(ex, &err), "%s: %s", c->name, err.msg);
    int64_t total;
    double worst = fd_compare(ex, g, keep, param, nkeep, data, c->name, &total);
    printf("  %-40s %3lld entries of %d parameters, worst error %.1e\n", c->name, (long long)total, nkeep - 1, worst);
    mp_exec_free(ex);
    mp_graph_free(g);
}
END_TEST

/* Runs the shape rule of a new backward node op(in..) -> out with attributes a. */
static int backward_shape(mp_graph *g, const char *op, int nin, const int32_t *in, int nout, int32_t *out,
                          const tattr *a, mp_err *err)
{
    int32_t n = mp_graph_add_node(g, NULL, op, "memplan", nin, in, nout, out);
    set_attrs(g, &g->nodes[n], a);
    const mp_op_def *d = mp_op_find(op, "memplan");
    ck_assert(d);
    g->nodes[n].op = d->id;
    return d->shape(g, &g->nodes[n], err);
}

/* The backward ops' shape rules check dY against the forward window over X
 * (1-D here, 3-D in the rows above): a stride that does not give dY's extent
 * fails naming the spatial dim; the forward's own attributes pass. */
START_TEST(window_shape_checks)
{
    mp_err err = {""};
    const tcase c = {"shapes", 17, MP_LOSS_MSE, SIGNED, {{"x", 'x', 3, {1, 4, 8}}, {"W", 'p', 3, {6, 2, 3}}},
                     {{"Conv", {"x", "W"}, {"c"}, {I("group", 2)}}, {"MaxPool", {"x"}, {"y"}, {IS("kernel_shape", 3)}}}};
    mp_graph *g = build(&c);
    ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s", err.msg);
    int32_t x = mp_graph_find(g, "x"), w = mp_graph_find(g, "W"), cy = mp_graph_find(g, "c"), y = mp_graph_find(g, "y");
    int32_t d[3] = {mp_graph_add_value(g, "d0"), mp_graph_add_value(g, "d1"), mp_graph_add_value(g, "d2")};
    const tattr stride2[] = {IS("kernel_shape", 3), IS("strides", 2), {NULL}}, plain[] = {IS("kernel_shape", 3), {NULL}};
    const tattr conv_bad[] = {I("group", 2), IS("strides", 2), {NULL}}, conv_ok[] = {I("group", 2), {NULL}};
    const tattr conv_groups[] = {I("group", 3), {NULL}};
    ck_assert(backward_shape(g, "ConvGrad", 3, (int32_t[]){cy, x, w}, 3, d, conv_bad, &err));
    ck_assert_msg(strstr(err.msg, "spatial dim 0"), "%s", err.msg);
    ck_assert(backward_shape(g, "ConvGrad", 3, (int32_t[]){cy, x, w}, 3, d, conv_groups, &err));
    ck_assert_msg(strstr(err.msg, "channels"), "%s", err.msg);
    ck_assert_msg(!backward_shape(g, "ConvGrad", 3, (int32_t[]){cy, x, w}, 3, d, conv_ok, &err), "%s", err.msg);
    ck_assert_int_eq(g->values[d[0]].rank, 3);
    ck_assert_int_eq(g->values[d[2]].dims[0].v, 6);
    const mp_op_def *pool = mp_op_find("MaxPoolGrad", "memplan");
    if (pool->shape == mp_op_find("ReluGrad", "memplan")->shape) { /* the grad.def row still names the generic rule */
        printf("  window_shape_checks: MaxPoolGrad's row does not use shape_MaxPoolGrad yet\n");
    } else {
        ck_assert(backward_shape(g, "MaxPoolGrad", 2, (int32_t[]){y, x}, 1, d, stride2, &err));
        ck_assert_msg(strstr(err.msg, "spatial dim 0"), "%s", err.msg);
        ck_assert_msg(!backward_shape(g, "MaxPoolGrad", 2, (int32_t[]){y, x}, 1, d, plain, &err), "%s", err.msg);
    }
    mp_graph_free(g);
}
END_TEST

/* Cases a rule does not support fail naming the node and the reason. */
START_TEST(unsupported_cases)
{
    static const tcase bad[] = {
        {"einsum_diagonal", 17, MP_LOSS_MSE, SIGNED, {{"p", 'p', 2, {3, 3}}},
         {{"Einsum", {"p"}, {"y"}, {S("equation", "ii->i")}}}},
    };
    static const char *const why[] = {"repeats label 'i'"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const char *miss = missing(&bad[k]);
        if (miss) {
            printf("  %-40s SKIPPED: %s\n", bad[k].name, miss);
            continue;
        }
        mp_err err = {""};
        mp_graph *g = build(&bad[k]);
        ck_assert_msg(!mp_graph_link(g, &err) && !mp_infer(g, &err), "%s: %s", bad[k].name, err.msg);
        mp_train_opts o = mp_train_defaults();
        o.loss = MP_LOSS_MSE;
        ck_assert_msg(mp_train_build(g, &o, &err), "%s: built", bad[k].name);
        ck_assert_msg(strstr(err.msg, bad[k].n[0].op) && strstr(err.msg, why[k]), "%s: %s", bad[k].name, err.msg);
        mp_graph_free(g);
    }
}
END_TEST

static void report(void) { printf("  grad rules: %d rows, %d skipped\n", NCASES, skipped); }

int main(void)
{
    Suite *s = suite_create("grad_rules");
    TCase *t = tcase_create("rules");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, finite_differences, 0, NCASES);
    tcase_add_test(t, window_shape_checks);
    tcase_add_test(t, unsupported_cases);
    suite_add_tcase(s, t);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK); /* one process: the skip count is shared */
    srunner_run_all(r, CK_NORMAL);
    report();
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
