/* build_models.c - writes memplan's own ONNX models: `memplan-models OUTDIR`.
 *
 * Each model is written the way torch.onnx.export (opset 17) writes the PyTorch module
 * sketched in its comment: name scopes, Constant nodes for shape arithmetic, Linear
 * weights as torch stores them. The output is the same bytes on every run (models/README.md).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_builder.h"  /* mp_ob_*: graph building in torch's naming */

/* Argument lists as compound literals: OP(b, "Add", x, y), INTS(0, 2, 1, 3). */
#define NARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *))
#define OP(b, op, ...) mp_ob_op(b, op, NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__})
#define NODE(b, op, n_out, ...) mp_ob_node(b, op, n_out, NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__})
#define INTS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define DIMS(...) NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__}

static float fan_in_bound(int64_t fan_in) { return (float)(1.0 / sqrt((double)fan_in)); }

/* ---- layers ---------------------------------------------------------------- */

/* nn.Linear on a 2-D input: Gemm with the [out, in] weight and transB=1. */
static const char *linear_gemm(mp_ob *b, const char *module, const char *x, int64_t in, int64_t out)
{
    mp_ob_push(b, module);
    float bound = fan_in_bound(in);
    const char *w = mp_ob_param_uniform(b, "weight", 2, (int64_t[]){out, in}, bound);
    const char *bias = mp_ob_param_uniform(b, "bias", 1, (int64_t[]){out}, bound);
    Onnx__NodeProto *n = NODE(b, "Gemm", 1, x, w, bias);
    mp_ob_attr_float(b, n, "alpha", 1.0f);
    mp_ob_attr_float(b, n, "beta", 1.0f);
    mp_ob_attr_int(b, n, "transB", 1);
    mp_ob_pop(b);
    return n->output[0];
}

/* A GPT-2 Conv1D-style linear on [batch, sequence, in]: the weight is stored [in, out],
 * so the export is MatMul then Add(bias, ...) with no Transpose. */
static const char *linear_matmul(mp_ob *b, const char *module, const char *x, int64_t in, int64_t out)
{
    mp_ob_push(b, module);
    float bound = fan_in_bound(in);
    const char *w = mp_ob_param_uniform(b, "weight", 2, (int64_t[]){in, out}, bound);
    const char *bias = mp_ob_param_uniform(b, "bias", 1, (int64_t[]){out}, bound);
    const char *y = OP(b, "Add", bias, OP(b, "MatMul", x, w));
    mp_ob_pop(b);
    return y;
}

static const char *relu(mp_ob *b, const char *module, const char *x)
{
    mp_ob_push(b, module);
    const char *y = OP(b, "Relu", x);
    mp_ob_pop(b);
    return y;
}

/* nn.Conv2d(cin, cout, 3, padding=1, bias=False), as before a BatchNorm. */
static const char *conv3x3(mp_ob *b, const char *module, const char *x, int64_t cin, int64_t cout)
{
    mp_ob_push(b, module);
    const char *w = mp_ob_param_uniform(b, "weight", 4, (int64_t[]){cout, cin, 3, 3}, fan_in_bound(cin * 9));
    Onnx__NodeProto *n = NODE(b, "Conv", 1, x, w);
    mp_ob_attr_ints(b, n, "dilations", INTS(1, 1));
    mp_ob_attr_int(b, n, "group", 1);
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(3, 3));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    mp_ob_attr_ints(b, n, "strides", INTS(1, 1));
    mp_ob_pop(b);
    return n->output[0];
}

/* nn.BatchNorm2d exported in training mode: training_mode=1 and the updated running
 * mean and variance as two more (unused) outputs, exactly as torch does. */
static const char *batchnorm(mp_ob *b, const char *module, const char *x, int64_t c)
{
    mp_ob_push(b, module);
    const int64_t dims[1] = {c};
    const char *scale = mp_ob_param_fill(b, "weight", 1, dims, 1.0f);
    const char *shift = mp_ob_param_fill(b, "bias", 1, dims, 0.0f);
    const char *mean = mp_ob_param_fill(b, "running_mean", 1, dims, 0.0f);
    const char *var = mp_ob_param_fill(b, "running_var", 1, dims, 1.0f);
    Onnx__NodeProto *n = NODE(b, "BatchNormalization", 3, x, scale, shift, mean, var);
    mp_ob_attr_float(b, n, "epsilon", 1e-5f);
    mp_ob_attr_float(b, n, "momentum", 0.9f);  /* ONNX's momentum is 1 - torch's 0.1 */
    mp_ob_attr_int(b, n, "training_mode", 1);
    mp_ob_pop(b);
    return n->output[0];
}

static const char *maxpool2x2(mp_ob *b, const char *module, const char *x)
{
    mp_ob_push(b, module);
    Onnx__NodeProto *n = NODE(b, "MaxPool", 1, x);
    mp_ob_attr_int(b, n, "ceil_mode", 0);
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(2, 2));
    mp_ob_attr_ints(b, n, "pads", INTS(0, 0, 0, 0));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    mp_ob_pop(b);
    return n->output[0];
}

static const char *layernorm(mp_ob *b, const char *module, const char *x, int64_t d)
{
    mp_ob_push(b, module);
    const char *w = mp_ob_param_fill(b, "weight", 1, (int64_t[]){d}, 1.0f);
    const char *bias = mp_ob_param_fill(b, "bias", 1, (int64_t[]){d}, 0.0f);
    Onnx__NodeProto *n = NODE(b, "LayerNormalization", 1, x, w, bias);
    mp_ob_attr_int(b, n, "axis", -1);
    mp_ob_attr_float(b, n, "epsilon", 1e-5f);
    mp_ob_pop(b);
    return n->output[0];
}

/* nn.GELU() below opset 20: x * 0.5 * (1 + erf(x / sqrt(2))) as Div, Erf, Add, Mul, Mul. */
static const char *gelu(mp_ob *b, const char *module, const char *x)
{
    mp_ob_push(b, module);
    const char *e = OP(b, "Erf", OP(b, "Div", x, mp_ob_const_f32(b, 1.41421353816986083984375f)));
    const char *y = OP(b, "Mul", OP(b, "Mul", x, OP(b, "Add", e, mp_ob_const_f32(b, 1.0f))),
                       mp_ob_const_f32(b, 0.5f));
    mp_ob_pop(b);
    return y;
}

/* Shape arithmetic as torch traces `x.size(i)`: Shape, Constant index, Gather -> int64 scalar. */
static const char *size_of(mp_ob *b, const char *shape, int64_t axis)
{
    Onnx__NodeProto *n = NODE(b, "Gather", 1, shape, mp_ob_const_i64(b, 0, 1, &axis));
    mp_ob_attr_int(b, n, "axis", 0);
    return n->output[0];
}

static const char *unsqueeze0(mp_ob *b, const char *scalar)
{
    return OP(b, "Unsqueeze", scalar, mp_ob_const_i64(b, 1, INTS(0)));
}

static const char *transpose(mp_ob *b, const char *x, int rank, const int64_t *perm)
{
    Onnx__NodeProto *n = NODE(b, "Transpose", 1, x);
    mp_ob_attr_ints(b, n, "perm", rank, perm);
    return n->output[0];
}

/* ---- models ---------------------------------------------------------------- */

/* mlp: Linear(784,256) ReLU Linear(256,128) ReLU Linear(128,10). */
static void build_mlp(mp_ob *b)
{
    const char *x = mp_ob_input(b, "input", MP_FLOAT, DIMS("batch", "784"));
    x = relu(b, "relu1", linear_gemm(b, "fc1", x, 784, 256));
    x = relu(b, "relu2", linear_gemm(b, "fc2", x, 256, 128));
    x = linear_gemm(b, "fc3", x, 128, 10);
    mp_ob_output(b, x, "logits", MP_FLOAT, DIMS("batch", "10"));
}

/* cnn_bn: (Conv3x3 BatchNorm ReLU MaxPool2) for 3->16 and 16->32 channels on 32x32,
 * then Flatten and Linear(32*8*8, 10). */
static void build_cnn_bn(mp_ob *b)
{
    const char *x = mp_ob_input(b, "input", MP_FLOAT, DIMS("batch", "3", "32", "32"));
    x = maxpool2x2(b, "pool1", relu(b, "relu1", batchnorm(b, "bn1", conv3x3(b, "conv1", x, 3, 16), 16)));
    x = maxpool2x2(b, "pool2", relu(b, "relu2", batchnorm(b, "bn2", conv3x3(b, "conv2", x, 16, 32), 32)));
    mp_ob_push(b, "flatten");
    Onnx__NodeProto *flat = NODE(b, "Flatten", 1, x);
    mp_ob_attr_int(b, flat, "axis", 1);
    mp_ob_pop(b);
    x = linear_gemm(b, "fc", flat->output[0], 32 * 8 * 8, 10);
    mp_ob_output(b, x, "logits", MP_FLOAT, DIMS("batch", "10"));
}

typedef struct gpt_config {
    int layers;
    int64_t d_model, heads, vocab, context;
} gpt_config;

/* nanoGPT's CausalSelfAttention on x [B, T, C]; `masked` [T, T] is true above the diagonal. */
static const char *attention(mp_ob *b, const gpt_config *cfg, const char *x, const char *masked)
{
    int64_t c = cfg->d_model, h = cfg->heads, hd = c / h;
    mp_ob_push(b, "attn");
    Onnx__NodeProto *split = NODE(b, "Split", 3, linear_matmul(b, "c_attn", x, c, 3 * c),
                                  mp_ob_const_i64(b, 1, INTS(c, c, c)));
    mp_ob_attr_int(b, split, "axis", 2);

    /* B, T = x.size(0), x.size(1); view(B, T, h, hd) and later view(B, T, C) */
    const char *shape = OP(b, "Shape", x);
    const char *b1 = unsqueeze0(b, size_of(b, shape, 0)), *t1 = unsqueeze0(b, size_of(b, shape, 1));
    Onnx__NodeProto *heads = NODE(b, "Concat", 1, b1, t1, mp_ob_const_i64(b, 1, INTS(h)),
                                  mp_ob_const_i64(b, 1, INTS(hd)));
    mp_ob_attr_int(b, heads, "axis", 0);
    const char *q = OP(b, "Reshape", split->output[0], heads->output[0]);
    const char *k = OP(b, "Reshape", split->output[1], heads->output[0]);
    const char *v = OP(b, "Reshape", split->output[2], heads->output[0]);
    q = transpose(b, q, INTS(0, 2, 1, 3));
    k = transpose(b, k, INTS(0, 2, 3, 1));  /* transpose(1,2) then (-2,-1): torch fuses the two */
    v = transpose(b, v, INTS(0, 2, 1, 3));

    const char *att = OP(b, "MatMul", q, k);
    att = OP(b, "Mul", att, mp_ob_const_f32(b, (float)(1.0 / sqrt((double)hd))));
    att = OP(b, "Where", masked, mp_ob_const_f32(b, -INFINITY), att);
    Onnx__NodeProto *sm = NODE(b, "Softmax", 1, att);
    mp_ob_attr_int(b, sm, "axis", -1);
    const char *y = transpose(b, OP(b, "MatMul", sm->output[0], v), INTS(0, 2, 1, 3));
    Onnx__NodeProto *merged = NODE(b, "Concat", 1, b1, t1, mp_ob_const_i64(b, 1, INTS(c)));
    mp_ob_attr_int(b, merged, "axis", 0);
    y = linear_matmul(b, "c_proj", OP(b, "Reshape", y, merged->output[0]), c, c);
    mp_ob_pop(b);
    return y;
}

static const char *mlp_block(mp_ob *b, const gpt_config *cfg, const char *x)
{
    int64_t c = cfg->d_model;
    mp_ob_push(b, "mlp");
    const char *y = linear_matmul(b, "c_proj", gelu(b, "gelu", linear_matmul(b, "c_fc", x, c, 4 * c)), 4 * c, c);
    mp_ob_pop(b);
    return y;
}

/* A nanoGPT-style GPT: token and learned position embeddings, pre-LN blocks, final
 * LayerNorm, LM head tied to the token embedding (logits = x @ tok_emb.weight^T). */
static void build_gpt(mp_ob *b, const gpt_config *cfg)
{
    int64_t c = cfg->d_model;
    const char *idx = mp_ob_input(b, "input", MP_INT64, DIMS("batch", "sequence"));
    const char *t = size_of(b, OP(b, "Shape", idx), 1);

    mp_ob_push(b, "tok_emb");
    const char *wte = mp_ob_param_uniform(b, "weight", 2, (int64_t[]){cfg->vocab, c}, 0.02f);
    const char *tok = OP(b, "Gather", wte, idx);
    mp_ob_pop(b);
    const char *pos = OP(b, "Range", mp_ob_const_i64(b, 0, 1, (int64_t[]){0}), t,
                         mp_ob_const_i64(b, 0, 1, (int64_t[]){1}));
    mp_ob_push(b, "pos_emb");
    const char *wpe = mp_ob_param_uniform(b, "weight", 2, (int64_t[]){cfg->context, c}, 0.02f);
    pos = OP(b, "Gather", wpe, pos);
    mp_ob_pop(b);
    const char *x = OP(b, "Add", tok, pos);

    /* masked = torch.tril(torch.ones(T, T)) == 0, shared by every block */
    const char *t1 = unsqueeze0(b, t);
    Onnx__NodeProto *tt = NODE(b, "Concat", 1, t1, t1);
    mp_ob_attr_int(b, tt, "axis", 0);
    Onnx__NodeProto *ones = NODE(b, "ConstantOfShape", 1, tt->output[0]);
    mp_ob_attr_tensor_f32(b, ones, "value", 1.0f);
    Onnx__NodeProto *tril = NODE(b, "Trilu", 1, ones->output[0]);
    mp_ob_attr_int(b, tril, "upper", 0);
    const char *masked = OP(b, "Equal", tril->output[0], mp_ob_const_f32(b, 0.0f));

    for (int l = 0; l < cfg->layers; l++) {
        char block[32];
        snprintf(block, sizeof block, "blocks.%d", l);
        mp_ob_push(b, block);
        x = OP(b, "Add", x, attention(b, cfg, layernorm(b, "ln_1", x, c), masked));
        x = OP(b, "Add", x, mlp_block(b, cfg, layernorm(b, "ln_2", x, c)));
        mp_ob_pop(b);
    }
    x = layernorm(b, "ln_f", x, c);
    mp_ob_push(b, "lm_head");
    const char *logits = OP(b, "MatMul", x, transpose(b, wte, INTS(1, 0)));
    mp_ob_pop(b);
    char vocab[24];
    snprintf(vocab, sizeof vocab, "%lld", (long long)cfg->vocab);
    mp_ob_output(b, logits, "logits", MP_FLOAT, DIMS("batch", "sequence", vocab));
}

static void build_gpt_decoder(mp_ob *b)
{
    build_gpt(b, &(gpt_config){.layers = 2, .d_model = 64, .heads = 4, .vocab = 512, .context = 128});
}

static void build_gpt2_124m(mp_ob *b)
{
    mp_ob_set_external(b, "gpt2_124m.weights", 4096);  /* that file is never written */
    build_gpt(b, &(gpt_config){.layers = 12, .d_model = 768, .heads = 12, .vocab = 50257, .context = 1024});
}

static const struct {
    const char *file;
    void (*build)(mp_ob *b);
} models[] = {
    {"mlp.onnx", build_mlp},
    {"cnn_bn.onnx", build_cnn_bn},
    {"gpt_decoder.onnx", build_gpt_decoder},
    {"gpt2_124m.onnx", build_gpt2_124m},
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: memplan-models OUTDIR\n");
        return 2;
    }
    if (mkdir(argv[1], 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "memplan-models: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], models[i].file);
        mp_ob *b = mp_ob_new("main_graph");
        models[i].build(b);
        mp_err err;
        int64_t size = mp_ob_write(b, path, &err);
        if (size < 0) {
            fprintf(stderr, "memplan-models: %s\n", err.msg);
            mp_ob_free(b);
            return 1;
        }
        printf("%-18s %5d nodes %11lld parameters %9lld bytes\n", models[i].file, mp_ob_node_count(b),
               (long long)mp_ob_param_count(b), (long long)size);
        mp_ob_free(b);
    }
    return 0;
}
