/* test_plan_cuda.c - the CUDA codegen (codegen/plan_cu.c) and runtime
 * (runtime/cuda/), without a GPU:
 *   1. every op of the training steps of the project's models, the third-party
 *      models (MNIST, super_resolution, PP-OCRv4, ORT's gpt2_megatron, bert_toy,
 *      eval_model) and the torch exports (training and forward-only) lowers:
 *      `memplan -o` writes plan.cu for each;
 *   2. the small models' plan.cu, linked with the host runtime
 *      (runtime/cuda/mp_cu_host.c: the GPU kernels' element functions run on
 *      the CPU, arena poisoned with NaN), gives the CPU executor's losses
 *      (memplan-run) over three steps, rematerialized plans included, run
 *      plainly and with the GPU's long sums and rows split into blocks
 *      (MP_CU_HOST_BLOCKS=1) as the GPU splits them; under
 *      the sanitizer build it runs with ASan, so index math that strays
 *      outside a tensor fails here; a model written here holds the forms of
 *      ReduceMean/ReduceSum, Resize, ConvTranspose, Pad, Einsum, the
 *      activations, LogSoftmax, Instance/GroupNormalization, the other Reduce*,
 *      CumSum, DepthToSpace/SpaceToDepth, Tile, Gather/ScatterElements, the
 *      trigonometric functions, RMSNormalization, NegativeLogLikelihoodLoss,
 *      GatherND/ScatterND, RotaryEmbedding and Attention no real model shows;
 *      another the sampling grids (GridSample in each mode and padding mode,
 *      volumetric, AffineGrid 2-D and 3-D, with their gradients); another
 *      EyeLike, Range too long to fold, the bitwise ops and BitShift,
 *      Quantize/DequantizeLinear, LpPool, GlobalLpPool and Upsample; another, a
 *      parameter small enough that the importer folds its Reshape, which must
 *      still train (not be baked into plan.cu);
 *   3. when nvcc is present, each plan.cu of step 1 compiles and links against
 *      the GPU runtime (compiled once: memplan_cuda.cu, mp_cu_cudnn.cu; cuBLAS,
 *      cuDNN), with every nvcc warning an error;
 *   4. (case "half") mlp's (also with the MSE and sum losses), gpt_decoder's,
 *      cnn_bn's and a small model's (AveragePool, GlobalAveragePool, HardSwish,
 *      HardSigmoid, Dropout, Expand, Slice, Sum and Mean of three inputs,
 *      ReduceMean, ReduceSum) bf16 and fp16 steps and mobilenet_v3's bf16 step
 *      (fp32 masters, fp16's dynamic loss scale) give the CPU executor's losses,
 *      parameters, optimizer state and gradients bit for bit on the host
 *      runtime; an op without a 16-bit lowering is refused by name
 *      (refusal_names_the_op);
 *   5. Det (float32 and float64), MatMulInteger and ConvInteger with each form of
 *      zero point give the CPU executor's bits (integer_forms_match_cpu). */
#include <check.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx_builder.h" /* mp_ob_*: the op-forms model */
#include "run_memplan.h"

#define CUDA_DIR MEMPLAN_SOURCE "/runtime/cuda"
#define TORCH MEMPLAN_SHARED "/models/torch/"
#define TP MEMPLAN_SHARED "/models/third-party/"
#define LOSS_RTOL 1e-5 /* fp32 sums in another order (Conv: direct vs im2col + BLAS) */
#define FORMS_RTOL 1e-6 /* the op-forms model: a wrong tap, pad or scale in one of its 100 branches moves the loss by > 1.3e-6 */

typedef struct model {
    const char *path, *args[8];
    int host;  /* 1: small enough to run on the host runtime; 2: too, but not under the sanitizers (minutes there) */
} model;

static const model models[] = {
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--optimizer", "adafactor"}, 1},
    /* recomputes; SGD, whose step (unlike Adam's) scales with the gradient, so a wrong scale shows */
    {MEMPLAN_SOURCE "/models/cnn_bn.onnx", {"--batch", "16", "--budget", "80%", "--optimizer", "sgd"}, 1},
    /* each update inside the backward, between the recomputations */
    {MEMPLAN_SOURCE "/models/cnn_bn.onnx", {"--batch", "16", "--budget", "70%", "--optimizer", "sgd", "--optimizer-in-backward"}, 1},
    /* sums of batch x sequence = 1024 terms: the GPU's block-per-output REDUCE */
    {MEMPLAN_SOURCE "/models/gpt_decoder.onnx", {"--batch", "8", "--dim", "sequence=128", "--budget", "70%"}, 1},
    {MEMPLAN_SHARED "/models/third-party/mnist/model.onnx", {"--optimizer", "momentum"}, 1},
    /* Paddle2ONNX weights as Constants; Clip with constant bounds, HardSigmoid/HardSwish */
    {MEMPLAN_SHARED "/models/third-party/ppocr-v4/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     {"--batch", "2", "--dim", "p2o.DynamicDimension.1=48", "--dim", "p2o.DynamicDimension.2=192", "--constants-as-params"},
     2},
    {MEMPLAN_SOURCE "/models/gpt2_124m.onnx", {"--batch", "1", "--dim", "sequence=512"}, 0}, /* masks too big to fold */
    /* 16-bit working copies: compiled here (cublasGemmEx on bf16 / fp16); half_precision_matches_cpu runs them */
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16"}, 0},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--optimizer", "adafactor"}, 0},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16", "--loss", "mse"}, 0}, /* ReduceMean in 16 bits */
    {MEMPLAN_SOURCE "/models/gpt_decoder.onnx", {"--batch", "8", "--dim", "sequence=128", "--precision", "bf16"}, 0},
    {TORCH "resnet50_train.onnx", {"--batch", "2"}, 0},
    {TORCH "resnet50.onnx", {"--batch", "2"}, 0},
    {TORCH "vgg16_train.onnx", {"--batch", "2"}, 0},
    {TORCH "vgg16.onnx", {"--batch", "2"}, 0},
    /* depthwise and grouped convolutions, squeeze-excite broadcasts, a pool's gradient, training Dropout */
    {TORCH "mobilenet_v3_large_train.onnx", {"--batch", "1", "--optimizer", "sgd"}, 2},
    {TORCH "mobilenet_v3_large.onnx", {"--batch", "2"}, 0},
    {TORCH "vit_b_16_train.onnx", {"--batch", "2"}, 0},
    {TORCH "vit_b_16.onnx", {"--batch", "2"}, 0},
    {TORCH "gpt2_small_like_train.onnx", {"--batch", "2", "--dim", "sequence=32"}, 0},
    {TORCH "gpt2_small_like.onnx", {"--batch", "2", "--dim", "sequence=32"}, 0},
    /* their training steps in bf16 and fp16 (GlobalAveragePool, AveragePool, HardSwish, HardSigmoid, Dropout,
     * Expand, Slice and the gradients in 16 bits; half_precision_matches_cpu runs them in a small model) */
    {TORCH "resnet50_train.onnx", {"--batch", "2", "--precision", "bf16"}, 0},
    {TORCH "resnet50_train.onnx", {"--batch", "2", "--precision", "fp16"}, 0},
    {TORCH "mobilenet_v3_large_train.onnx", {"--batch", "2", "--precision", "bf16"}, 0},
    {TORCH "mobilenet_v3_large_train.onnx", {"--batch", "2", "--precision", "fp16"}, 0},
    {TORCH "vit_b_16_train.onnx", {"--batch", "2", "--precision", "bf16"}, 0},
    {TORCH "vit_b_16_train.onnx", {"--batch", "2", "--precision", "fp16"}, 0},
    {TORCH "vgg16_train.onnx", {"--batch", "2", "--precision", "bf16"}, 0},
    {TORCH "vgg16_train.onnx", {"--batch", "2", "--precision", "fp16"}, 0},
    {TORCH "gpt2_small_like_train.onnx", {"--batch", "1", "--dim", "sequence=64", "--precision", "bf16"}, 0},
    {TORCH "gpt2_small_like_train.onnx", {"--batch", "1", "--dim", "sequence=64", "--precision", "fp16"}, 0},
    /* ReduceMean and its gradient (in the loss, LayerNorm's statistics); Resize, ConvTranspose (PP-OCR det) */
    {TP "ort-transformers/gpt2_megatron.onnx",
     {"--batch", "2", "--dim", "seq_len=64", "--dim", "past_seq_len=0", "--dim", "total_seq_len=64"}, 1},
    {TP "ort-transformers/bert_toy_optimized.onnx", {"--topo-sort", "--batch", "2", "--dim", "max_seq_len_in_batch=16"}, 1},
    {TP "ort-training/eval_model.onnx", {"--batch", "4", "--dim", "input-0_dim1=784", "--params-as-inputs"}, 1},
    /* these two take 1.5 and 1 minute a run on the host's direct convolutions: lowered and compiled only */
    {TP "super_resolution/super_resolution.onnx", {"--batch", "2"}, 0},
    {TP "ppocr-v4/ch_PP-OCRv4_det_infer.onnx",
     {"--batch", "2", "--dim", "p2o.DynamicDimension.1=320", "--dim", "p2o.DynamicDimension.2=320", "--constants-as-params"}, 0},
};
#define NMODELS (int)(sizeof models / sizeof *models)

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/mp_plan_cuda_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* memplan MODEL ARGS --budget 100GB --reserve 0 -o OUT (a budget in args comes first and wins). */
static run_result plan(const model *m, const char *out)
{
    const char *argv[16] = {m->path};
    int n = 1;
    for (int k = 0; k < 8 && m->args[k]; k++) argv[n++] = m->args[k];
    bool budget = false;
    for (int k = 1; k < n; k++) budget |= !strcmp(argv[k], "--budget");
    if (!budget) argv[n++] = "--budget", argv[n++] = "100GB";
    argv[n++] = "--reserve", argv[n++] = "0", argv[n++] = "-o", argv[n++] = out, argv[n] = NULL;
    return run_args(argv);
}

/* The losses of a --json run's "steps". */
static int losses(const char *json, double *out, int max)
{
    int n = 0;
    for (const char *p = json; n < max && (p = strstr(p, "\"loss\": ")); p += 8) out[n++] = strtod(p + 8, NULL);
    return n;
}

static char *run_json(const char *cmd, const char *file)
{
    ck_assert_msg(sh(cmd) == 0, "failed: %s", cmd);
    char *s = slurp(file, NULL);
    ck_assert_msg(s, "no output from %s", cmd);
    return s;
}

static void write_tanh_mlp(const char *path);

/* A bf16 plan with an op the CUDA runtime has no 16-bit lowering for (a small model's Tanh, the first of
 * them; its gradient is refused too): one line naming the op and node, exit 2, no plan.cu. */
START_TEST(refusal_names_the_op)
{
    char path[128], out[128], f[160];
    snprintf(path, sizeof path, "%s/tanh_mlp.onnx", dir);
    snprintf(out, sizeof out, "%s/refused", dir);
    write_tanh_mlp(path);
    run_result r = RUN(path, "--batch", "2", "--budget", "1GB", "--precision", "bf16", "-o", out);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "plan.cu: op Tanh (node '") && strstr(r.err, "float16 / bfloat16 operands") &&
                  strstr(r.err, "ops refused: Tanh, TanhGrad)"), "%s", r.err);
    snprintf(f, sizeof f, "%s/plan.cu", out);
    ck_assert_int_ne(access(f, F_OK), 0);
    snprintf(f, sizeof f, "%s/plan.json", out);
    ck_assert_int_eq(access(f, R_OK), 0); /* plan.json stays: it runs on the CPU */
    run_free(&r);
}
END_TEST

/* The persistent tensors after the last step (parameters, fp32 masters, optimizer state: plan.json's roles
 * param and opt_state) and the gradients (role grad: the step's outputs, which the updates read) in the two
 * runners' arena dumps: how many differ, the first named in *first. A 16-bit loss keeps 8 or 11 bits and
 * Adam's step hardly depends on the gradient's size, so the losses alone would let a gradient one 16-bit
 * rounding off pass; the moments and the gradients hold every gradient bit (SGD keeps no moments, and
 * its small step drops a gradient's low bits from the parameter). */
static int state_differs(const char *out, const char *cpu_dump, const char *host_dump, char *first, size_t len, int *compared)
{
    char f[192];
    snprintf(f, sizeof f, "%s/plan.json", out);
    size_t nc = 0, nh = 0;
    char *json = slurp(f, NULL), *cpu = slurp(cpu_dump, &nc), *host = slurp(host_dump, &nh);
    ck_assert_msg(json && cpu && host && nc == nh, "%s: the plan or the arena dumps are missing", out);
    int differ = 0, seen = 0;
    for (char *l = json; (l = strstr(l, "{\"id\": ")); l++) {
        char *end = strchr(l, '}'), *role = strstr(l, "\"role\": "), name[160];
        long long bytes, off;
        if (!end || !role || role > end ||
            (strncmp(role + 8, "\"param\"", 7) && strncmp(role + 8, "\"opt_state\"", 11) && strncmp(role + 8, "\"grad\"", 6)))
            continue;
        ck_assert_int_eq(sscanf(strstr(l, "\"name\": "), "\"name\": \"%159[^\"]\"", name), 1);
        ck_assert_int_eq(sscanf(strstr(l, "\"bytes\": "), "\"bytes\": %lld, \"offset\": %lld", &bytes, &off), 2);
        ck_assert(off >= 0 && (size_t)(off + bytes) <= nc);
        seen++;
        if (!memcmp(cpu + off, host + off, (size_t)bytes)) continue;
        if (!differ++) snprintf(first, len, "%s", name);
    }
    ck_assert_int_gt(seen, 0);
    *compared = seen;
    free(json), free(cpu), free(host);
    return differ;
}

/* Plans m into out, links plan.cu with the host runtime and checks its losses
 * against the CPU executor's over three steps, run by threads and split into
 * blocks as the GPU runs its long sums and rows; bit for bit (rtol 0), the
 * parameters and optimizer state after them too. */
static void check_on_host(const model *m, const char *out, const char *label, double rtol)
{
    char run_bin[512], cmd[2048], f[160];
    snprintf(run_bin, sizeof run_bin, "%s-run", MEMPLAN_BIN); /* memplan-run beside memplan */
    run_result r = plan(m, out);
    ck_assert_msg(r.status == 0, "%s: %s", m->path, r.err);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "%s -O1 %s -I%s -o %s/plan-host -x c %s/plan.cu -x none %s -lm", MEMPLAN_CC,
             MEMPLAN_CUDA_HOST_FLAGS, CUDA_DIR, out, out, MEMPLAN_CUDA_HOST_LIB);
    ck_assert_msg(sh(cmd) == 0, "failed: %s", cmd);
    snprintf(cmd, sizeof cmd, "%s %s --steps 3 --seed 5 --json --random-weights --dump %s/cpu.arena > %s/cpu.json", run_bin,
             out, out, out);
    snprintf(f, sizeof f, "%s/cpu.json", out);
    char *cpu = run_json(cmd, f);
    double hl[3], cl[3];
    int state = 0;
    ck_assert_int_eq(losses(cpu, cl, 3), 3);
    for (int blocks = 0; blocks < 2; blocks++) {
        snprintf(cmd, sizeof cmd, "MP_CU_HOST_BLOCKS=%d %s/plan-host --steps 3 --seed 5 --json --dump %s/host.arena > %s/host.json",
                 blocks, out, out, out);
        snprintf(f, sizeof f, "%s/host.json", out);
        char *host = run_json(cmd, f);
        ck_assert_int_eq(losses(host, hl, 3), 3);
        for (int s = 0; s < 3; s++) {
            double rel = fabs(hl[s] - cl[s]) / fmax(fabs(cl[s]), 1e-30);
            ck_assert_msg(isfinite(hl[s]) && rel <= rtol, "%s%s step %d: host runtime loss %.9g, CPU executor %.9g",
                          m->path, blocks ? " (GPU blocks)" : "", s + 1, hl[s], cl[s]);
        }
        free(host);
        if (rtol == 0) {
            char a[160], b[160], first[160] = "";
            snprintf(a, sizeof a, "%s/cpu.arena", out), snprintf(b, sizeof b, "%s/host.arena", out);
            int d = state_differs(out, a, b, first, sizeof first, &state);
            ck_assert_msg(!d, "%s%s: after 3 steps %d parameters / optimizer states / gradients differ from the CPU executor's (first: %s)",
                          m->path, blocks ? " (GPU blocks)" : "", d, first);
        }
    }
    char how[256] = "", also[96] = "";
    if (state) snprintf(also, sizeof also, "; %d parameters / optimizer states / gradients equal too", state);
    for (int k = 0; k < 8 && m->args[k]; k++) snprintf(how + strlen(how), sizeof how - strlen(how), " %s", m->args[k]);
    printf("  %s%s: losses %.6g %.6g %.6g on the host runtime (threads and blocks) and on the CPU executor (relative <= %g%s)\n",
           label, how, hl[0], hl[1], hl[2], rtol, also);
    free(cpu);
}

/* The host runtime runs plan.cu's tables through the GPU kernels' element
 * functions: the losses must be the CPU executor's. */
START_TEST(host_runtime_matches_cpu)
{
    int checked = 0;
    for (int i = 0; i < NMODELS; i++) {
        const model *m = &models[i];
        if (!m->host) continue;
        if (m->host == 2 && *MEMPLAN_CUDA_HOST_FLAGS) {
            printf("  skipped under the sanitizers: %s on the host runtime\n", m->path);
            continue;
        }
        if (access(m->path, R_OK)) {
            printf("  skipped: %s is absent\n", m->path);
            continue;
        }
        char out[128];
        snprintf(out, sizeof out, "%s/h%d", dir, i);
        check_on_host(m, out, basename((char *)m->path), LOSS_RTOL);
        checked++;
    }
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* --precision bf16 and fp16 (16-bit working copies, fp32 masters and optimizer state; fp16's dynamic loss
 * scale): the host runtime loads 16-bit tensors widened and rounds each store to fp32, then to 16 bits, as
 * the CPU executor's widen-run-round dispatch does, so the losses are the CPU's bit for bit (both print
 * the same float with 9 digits). A bf16 loss has 8 significant bits, so a slip shows after it has moved
 * a rounding: bf16 rounding toward zero gives 2.25 at step 2 where the CPU has 2.265625. */
static const model half_models[] = {
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16"}, 1},
    /* the update scales with the gradient: a loss scale not divided out shows */
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--optimizer", "sgd"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--optimizer", "momentum"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--optimizer", "adafactor"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16", "--optimizer", "adafactor", "--micro-batches", "2"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--micro-batches", "2"}, 1},
    /* Gather / GatherGrad (double sums in the workspace), LayerNorm and its gradient, Softmax and its gradient,
     * the causal mask (Trilu, Equal, Where), Gelu, and weight gradients summed over the batch (fp32 in the
     * workspace, rounded once), at a rematerializing budget */
    {MEMPLAN_SOURCE "/models/gpt_decoder.onnx", {"--batch", "8", "--dim", "sequence=128", "--budget", "70%", "--precision", "bf16"}, 1},
    {MEMPLAN_SOURCE "/models/gpt_decoder.onnx", {"--batch", "8", "--dim", "sequence=128", "--budget", "70%", "--precision", "fp16"}, 1},
    /* Conv and ConvGrad (the direct kernels; dB a REDUCE), BatchNormalization and its gradient (statistics in
     * double, running mean and variance rounded once), MaxPool and its gradient, at a rematerializing budget;
     * SGD, whose step scales with the gradient */
    {MEMPLAN_SOURCE "/models/cnn_bn.onnx", {"--batch", "16", "--budget", "80%", "--optimizer", "sgd", "--precision", "bf16"}, 1},
    {MEMPLAN_SOURCE "/models/cnn_bn.onnx", {"--batch", "16", "--budget", "80%", "--precision", "fp16"}, 1},
    /* the MSE and sum losses: ReduceMean, ReduceSum and their gradients in 16 bits (SGD: the step scales with
     * the gradient) */
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16", "--loss", "mse", "--optimizer", "sgd"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "fp16", "--loss", "mse"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--precision", "bf16", "--loss", "sum", "--optimizer", "sgd"}, 1},
    /* a torch export: HardSwish, HardSigmoid, GlobalAveragePool, training Dropout and their gradients among
     * depthwise convolutions and squeeze-excite broadcasts (20 s a run here; minutes under the sanitizers) */
    {TORCH "mobilenet_v3_large_train.onnx", {"--batch", "1", "--optimizer", "sgd", "--precision", "bf16"}, 2},
};

static void write_half_forms(const char *path);

START_TEST(half_precision_matches_cpu)
{
    for (size_t i = 0; i < sizeof half_models / sizeof *half_models; i++) {
        char out[128];
        if (half_models[i].host == 2 && *MEMPLAN_CUDA_HOST_FLAGS) {
            printf("  skipped under the sanitizers: %s on the host runtime\n", half_models[i].path);
            continue;
        }
        if (access(half_models[i].path, R_OK)) {
            printf("  skipped: %s is absent\n", half_models[i].path);
            continue;
        }
        snprintf(out, sizeof out, "%s/half%zu", dir, i);
        check_on_host(&half_models[i], out, basename((char *)half_models[i].path), 0);
    }
    /* the ops of the torch exports that cnn_bn, mlp and gpt_decoder lack (write_half_forms), bf16 with SGD
     * and fp16 with AdamW */
    char path[128], out[128];
    snprintf(path, sizeof path, "%s/half_forms.onnx", dir);
    write_half_forms(path);
    const model forms[] = {{path, {"--batch", "4", "--optimizer", "sgd", "--precision", "bf16"}, 1},
                           {path, {"--batch", "4", "--precision", "fp16"}, 1}};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/half_forms%d", dir, i);
        check_on_host(&forms[i], out, "half_forms (AveragePool, GlobalAveragePool, HardSwish, HardSigmoid, Dropout, Expand, Slice, Sum, Mean, ReduceMean, ReduceSum)", 0);
    }
}
END_TEST

/* ---- the op forms no model shows ------------------------------------------------------- */

#define NARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *))
#define OP(b, op, ...) mp_ob_op(b, op, NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__})
#define NODE(b, op, ...) mp_ob_node(b, op, 1, NARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__})
#define INTS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* Adds mean(v * v) to the running total *acc. */
static void add_sq(mp_ob *b, const char **acc, const char *v)
{
    Onnx__NodeProto *n = NODE(b, "ReduceMean", OP(b, "Mul", v, v));
    mp_ob_attr_int(b, n, "keepdims", 0);
    *acc = *acc ? OP(b, "Add", *acc, n->output[0]) : n->output[0];
}

/* Cast(v){to}. */
static const char *cast(mp_ob *b, const char *v, mp_dtype to)
{
    Onnx__NodeProto *n = NODE(b, "Cast", v);
    mp_ob_attr_int(b, n, "to", to);
    return n->output[0];
}

/* Adds sum(v): v's bits are then the gradient of whatever parameter multiplies into v. */
static void add_sum(mp_ob *b, const char **acc, const char *v)
{
    Onnx__NodeProto *n = NODE(b, "ReduceSum", v);
    mp_ob_attr_int(b, n, "keepdims", 0);
    *acc = *acc ? OP(b, "Add", *acc, n->output[0]) : n->output[0];
}

/* Adds mean((s v)^2). */
static void add_scaled(mp_ob *b, const char **acc, const char *v, float s) { add_sq(b, acc, OP(b, "Mul", v, mp_ob_const_f32(b, s))); }

/* Every form of ReduceMean's axes (attribute at opset 17: given, negative,
 * default; keepdims 0 and 1; noop_with_empty_axes) and ReduceSum's axes
 * input; Resize in each mode, coordinate transformation, nearest rounding,
 * cubic coefficient, exclude_outside and antialias (sizes given); ConvTranspose
 * with strides, pads, output_padding, dilations, groups, output_shape,
 * SAME_UPPER, a bias and one spatial dim; Pad in each mode, pads wider than
 * the input and negative (a crop); Einsum as a batched matmul, with an
 * implicit output, "..." broadcasting a size-1 axis, labels summed by one
 * operand alone, and a diagonal; the activations (Sin .. Swish, alphas not
 * their defaults), SwiGLU, MaxUnpool, CenterCropPad, LpNormalization (p 1, 2), ReverseSequence (batch-major,
 * a partial length), LRN (sizes 3 and 2), GlobalMaxPool, Sum/Mean/Max of three inputs and Min of one,
 * GreaterOrEqual/LessOrEqual/Xor/Not/IsInf/IsNaN/Mod masks, Shrink, MeanVarianceNormalization, ArgMax/ArgMin,
 * OneHot, TopK (largest, and smallest over ties), Hardmax (over ties),
 * Floor/Ceil/Round/Sign, PRelu, LogSoftmax, Instance- and
 * GroupNormalization (scale per channel and per group), ReduceMax/Min (ties,
 * keepdims 0 and 1), SumSquare, L1, L2, LogSum, LogSumExp, Prod, CumSum and CumProd
 * (exclusive, reverse), DepthToSpace (DCR, CRD), SpaceToDepth, Tile,
 * GatherElements and ScatterElements (mul, none). All but the diagonal and
 * ScatterElements read x * p, so their gradients run too (ResizeGrad, PadGrad,
 * the gradient's Einsums, LogSoftmaxGrad, the normalizations' gradients,
 * GatherElements' ScatterElements add); each branch adds mean(v^2) to a scalar
 * output (an MSE loss). Then Tan .. Atanh; RMSNormalization (rows of 6 and
 * 72); NegativeLogLikelihoodLoss (mean with weights and ignore_index, sum,
 * none); GatherND (batch_dims 0 and 1), ScatterND (add, none); RotaryEmbedding
 * (4-D interleaved with position_ids and a partial rotary dim, 3-D); Attention
 * (4-D grouped-query, causal, softcap, scale, additive mask parameter,
 * nonpad_kv_seqlen; 3-D with a past cache and a short bool mask; present_key,
 * present_value and qk_matmul_output), all but GatherND's batch_dims form and
 * the last Attention reading x * p so their gradients run (RMSNormalizationGrad,
 * NegativeLogLikelihoodGrad, ScatterND / GatherND, RotaryEmbedding with -sin,
 * AttentionGrad with dMask). The builder writes opset 17, and the importer takes
 * GroupNormalization (18), Mish (18), Swish (24), RMSNormalization, Attention
 * and RotaryEmbedding (23), SwiGLU (28) at it; Pad's axes input and the other Reduce*'s axes
 * input (opset 18) are not among the forms. */
static void write_op_forms(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 4, (const char *[]){"2", "2", "6", "6"});
    const char *xp = OP(b, "Mul", x, mp_ob_param_uniform(b, "p", 3, (int64_t[]){2, 1, 1}, 1.0f)), *acc = NULL;
    static const struct {
        const char *op;
        int naxes;
        int64_t axes[3];
        int keepdims, noop;
    } reds[] = {
        {"ReduceMean", 1, {1}, 1, 0}, {"ReduceMean", 2, {-1, 2}, 0, 0}, {"ReduceMean", 0, {0}, 1, 0},
        {"ReduceMean", 0, {0}, 0, 0}, {"ReduceMean", 3, {0, 2, 3}, 1, 1}, {"ReduceSum", 2, {0, 3}, 0, 0},
        {"ReduceSum", 0, {0}, 1, 1}, /* no axes input: a no-op */
    };
    for (size_t k = 0; k < sizeof reds / sizeof *reds; k++) {
        bool sum = !strcmp(reds[k].op, "ReduceSum");
        const char *in[2] = {xp, sum && reds[k].naxes ? mp_ob_const_i64(b, 1, reds[k].naxes, reds[k].axes) : ""};
        Onnx__NodeProto *n = mp_ob_node(b, reds[k].op, 1, sum ? 2 : 1, in);
        if (!sum && reds[k].naxes) mp_ob_attr_ints(b, n, "axes", reds[k].naxes, reds[k].axes);
        mp_ob_attr_int(b, n, "keepdims", reds[k].keepdims);
        if (reds[k].noop) mp_ob_attr_int(b, n, "noop_with_empty_axes", 1);
        add_sq(b, &acc, n->output[0]);
    }
    static const struct {
        const char *mode, *coord, *round;
        int64_t h, w;
        float cubic_a;
        int exclude, antialias;
    } rs[] = {
        {"nearest", "asymmetric", "floor", 12, 12, 0, 0, 0}, {"nearest", "half_pixel", "round_prefer_ceil", 9, 15, 0, 0, 0},
        {"nearest", "align_corners", "ceil", 4, 7, 0, 0, 0}, {"linear", "half_pixel", NULL, 4, 3, 0, 0, 0},
        {"linear", "align_corners", NULL, 11, 7, 0, 0, 0},   {"linear", "pytorch_half_pixel", NULL, 1, 5, 0, 0, 0},
        {"linear", "half_pixel_symmetric", NULL, 9, 9, 0, 0, 0}, {"cubic", "half_pixel", NULL, 8, 5, -0.5f, 1, 0},
        {"cubic", "asymmetric", NULL, 13, 6, 0, 0, 0},       {"linear", "half_pixel", NULL, 3, 4, 0, 0, 1},
        {"cubic", "pytorch_half_pixel", NULL, 4, 2, 0, 0, 1},
    };
    for (size_t k = 0; k < sizeof rs / sizeof *rs; k++) {
        const char *sizes = mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, rs[k].h, rs[k].w});
        Onnx__NodeProto *n = NODE(b, "Resize", xp, "", "", sizes);
        mp_ob_attr_str(b, n, "mode", rs[k].mode);
        mp_ob_attr_str(b, n, "coordinate_transformation_mode", rs[k].coord);
        if (rs[k].round) mp_ob_attr_str(b, n, "nearest_mode", rs[k].round);
        if (rs[k].cubic_a) mp_ob_attr_float(b, n, "cubic_coeff_a", rs[k].cubic_a);
        if (rs[k].exclude) mp_ob_attr_int(b, n, "exclude_outside", 1);
        if (rs[k].antialias) mp_ob_attr_int(b, n, "antialias", 1);
        char name[16];
        snprintf(name, sizeof name, "q%zu", k);
        add_sq(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, name, 1, (int64_t[]){1}, 1.0f)));
    }
    /* scales and roi as folded float constants: integers over a common divisor */
    static const struct {
        const char *mode, *coord;
        int64_t num[8], den;
        int antialias;
    } rsc[] = {
        {"linear", "half_pixel_symmetric", {4, 4, 6, 5}, 4, 0}, {"nearest", "half_pixel", {4, 4, 2, 3}, 4, 0},
        {"cubic", "asymmetric", {2, 2, 4, 1}, 2, 0},             {"cubic", "half_pixel", {5, 5, 2, 2}, 5, 1},
        {"linear", "tf_crop_and_resize", {0, 0, 1, 2, 10, 10, 9, 12}, 10, 0},
    };
    for (size_t k = 0; k < sizeof rsc / sizeof *rsc; k++) {
        bool crop = !strcmp(rsc[k].coord, "tf_crop_and_resize");
        const char *v = OP(b, "Div", cast(b, mp_ob_const_i64(b, 1, crop ? 8 : 4, rsc[k].num), MP_FLOAT),
                           mp_ob_const_f32(b, (float)rsc[k].den));
        const char *sizes = crop ? mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 5, 4}) : "";
        Onnx__NodeProto *n = crop ? NODE(b, "Resize", xp, v, "", sizes) : NODE(b, "Resize", xp, "", v);
        mp_ob_attr_str(b, n, "mode", rsc[k].mode);
        mp_ob_attr_str(b, n, "coordinate_transformation_mode", rsc[k].coord);
        if (crop) mp_ob_attr_float(b, n, "extrapolation_value", 0.5f);
        if (rsc[k].antialias) mp_ob_attr_int(b, n, "antialias", 1);
        char name[16];
        snprintf(name, sizeof name, "qs%zu", k);
        add_sq(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, name, 1, (int64_t[]){1}, 1.0f)));
    }
    /* ConvTranspose: X [2, 2, 6, 6] */
    Onnx__NodeProto *n = NODE(b, "ConvTranspose", xp, mp_ob_param_uniform(b, "w0", 4, (int64_t[]){2, 3, 3, 3}, 0.5f));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 0, 1, 2));
    mp_ob_attr_ints(b, n, "output_padding", INTS(1, 0));
    add_sq(b, &acc, n->output[0]);
    n = NODE(b, "ConvTranspose", xp, mp_ob_param_uniform(b, "w1", 4, (int64_t[]){2, 2, 3, 2}, 0.5f),
             mp_ob_param_uniform(b, "b1", 1, (int64_t[]){4}, 0.5f));
    mp_ob_attr_int(b, n, "group", 2);
    mp_ob_attr_ints(b, n, "dilations", INTS(2, 3));
    add_sq(b, &acc, n->output[0]);
    n = NODE(b, "ConvTranspose", xp, mp_ob_param_uniform(b, "w2", 4, (int64_t[]){2, 1, 3, 3}, 0.5f));
    mp_ob_attr_ints(b, n, "output_shape", INTS(7, 6));
    add_sq(b, &acc, n->output[0]);
    n = NODE(b, "ConvTranspose", xp, mp_ob_param_uniform(b, "w3", 4, (int64_t[]){2, 2, 3, 3}, 0.5f));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    mp_ob_attr_str(b, n, "auto_pad", "SAME_UPPER");
    add_sq(b, &acc, n->output[0]);
    const char *x1 = OP(b, "Reshape", xp, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 2, 36}));
    n = NODE(b, "ConvTranspose", x1, mp_ob_param_uniform(b, "w4", 3, (int64_t[]){2, 2, 4}, 0.5f));
    mp_ob_attr_ints(b, n, "strides", INTS(3));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 2));
    add_sq(b, &acc, n->output[0]);
    /* Pad: X [2, 2, 6, 6], pads (begin per axis, then end) wider than an axis (reflect and wrap
     * fold more than once) and negative (cropped) */
    static const struct {
        const char *mode;
        int64_t pads[8];
        float value;
    } pads[] = {
        {"constant", {0, 0, 1, 2, 0, 1, 2, 0}, 0.5f}, {"reflect", {0, 0, 2, 7, 0, 0, 5, 1}, 0},
        {"edge", {0, 1, -1, 3, 0, -1, 2, -2}, 0},      {"wrap", {0, 0, 3, 8, 0, 0, 7, 2}, 0},
        {"constant", {0, 0, -2, 1, 0, 0, 1, -3}, 0},
    };
    for (size_t k = 0; k < sizeof pads / sizeof *pads; k++) {
        const char *pv = mp_ob_const_i64(b, 1, 8, pads[k].pads);
        n = pads[k].value ? NODE(b, "Pad", xp, pv, mp_ob_const_f32(b, pads[k].value)) : NODE(b, "Pad", xp, pv);
        mp_ob_attr_str(b, n, "mode", pads[k].mode);
        add_sq(b, &acc, n->output[0]);
    }
    /* Einsum on X [2, 2, 6, 6] (labels n b i j) and parameters */
    static const struct {
        const char *eq;
        int rank;
        int64_t dims[4];
    } eins[] = {
        {"nbij,bjk->nbik", 3, {2, 6, 4}},         /* a batched matmul */
        {"nbij,jk", 2, {6, 5}},                   /* implicit output: "bikn" */
        {"...ij,...jk->...ik", 4, {2, 1, 6, 3}},  /* "..." broadcast along a size-1 axis */
        {"nbij,jkm->nbk", 3, {6, 3, 2}},          /* i summed by X alone, m by the parameter alone */
    };
    for (size_t k = 0; k < sizeof eins / sizeof *eins; k++) {
        char name[16];
        snprintf(name, sizeof name, "e%zu", k);
        n = NODE(b, "Einsum", xp, mp_ob_param_uniform(b, name, eins[k].rank, eins[k].dims, 1.0f));
        mp_ob_attr_str(b, n, "equation", eins[k].eq);
        add_sq(b, &acc, n->output[0]);
    }
    n = NODE(b, "Einsum", x); /* a diagonal (its gradient is not supported: it reads x) */
    mp_ob_attr_str(b, n, "equation", "nbii->nbi");
    add_sq(b, &acc, n->output[0]);
    /* the branches below read xp scaled to about [-1, 1] (x10), where their functions bend, and add
     * mean((v / 10)^2), or mean((0.3 v)^2) where a gradient's slip would show less. Activations (their gradients are forward ops), each alpha other than its
     * default; Floor, Ceil, Round (of halves: ties to even) and Sign pass no gradient */
    const char *x10 = OP(b, "Mul", xp, mp_ob_const_f32(b, 10.0f));
    static const struct {
        const char *op;
        float alpha, gamma;
    } acts[] = {
        {"Sin", 0, 0}, {"Cos", 0, 0}, {"Softplus", 0, 0}, {"Softsign", 0, 0}, {"Elu", 0.7f, 0}, {"Selu", 1.5f, 1.2f},
        {"Celu", 1.3f, 0}, {"LeakyRelu", 0.2f, 0}, {"ThresholdedRelu", 0.3f, 0}, {"Mish", 0, 0}, {"Swish", 1.5f, 0},
    };
    for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
        n = NODE(b, acts[k].op, x10);
        if (acts[k].alpha) mp_ob_attr_float(b, n, "alpha", acts[k].alpha);
        if (acts[k].gamma) mp_ob_attr_float(b, n, "gamma", acts[k].gamma);
        add_scaled(b, &acc, n->output[0], 0.1f);
    }
    /* MaxUnpool after the MaxPool whose indices it reads; CenterCropPad cropping one axis, padding another */
    n = mp_ob_node(b, "MaxPool", 2, 1, (const char *[]){x10});
    mp_ob_attr_ints(b, n, "kernel_shape", 2, (int64_t[]){2, 2});
    mp_ob_attr_ints(b, n, "strides", 2, (int64_t[]){2, 2});
    Onnx__NodeProto *un = NODE(b, "MaxUnpool", n->output[0], n->output[1]);
    mp_ob_attr_ints(b, un, "kernel_shape", 2, (int64_t[]){2, 2});
    mp_ob_attr_ints(b, un, "strides", 2, (int64_t[]){2, 2});
    add_scaled(b, &acc, un->output[0], 1.0f);
    n = NODE(b, "CenterCropPad", x10, mp_ob_const_i64(b, 1, 2, (int64_t[]){3, 9}));
    mp_ob_attr_ints(b, n, "axes", 2, (int64_t[]){2, -1});
    add_scaled(b, &acc, n->output[0], 1.0f);
    n = NODE(b, "SwiGLU", x10, OP(b, "Neg", x10)); /* opset 28's, at full scale: alpha 1 instead of 1.5 shows */
    mp_ob_attr_float(b, n, "alpha", 1.5f);
    add_scaled(b, &acc, n->output[0], 1.0f);
    /* LpNormalization p 2 (the default last axis) and p 1 along the channels; ReverseSequence batch-major on
     * rows of 12 steps, one reversed in part (5 of 12), one whole; each times a parameter (a unit vector's
     * squares, or a permutation's, would sum to a constant), so their gradients run too */
    const char *plp = mp_ob_param_uniform(b, "plp", 2, (int64_t[]){6, 6}, 1.0f);
    add_scaled(b, &acc, OP(b, "Mul", OP(b, "LpNormalization", x10), plp), 3.0f);
    n = NODE(b, "LpNormalization", x10);
    mp_ob_attr_int(b, n, "p", 1);
    mp_ob_attr_int(b, n, "axis", 1);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], plp), 3.0f);
    n = NODE(b, "ReverseSequence", OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 12, 6})),
             mp_ob_const_i64(b, 1, 2, (int64_t[]){5, 12}));
    mp_ob_attr_int(b, n, "batch_axis", 0);
    mp_ob_attr_int(b, n, "time_axis", 1);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "prs", 2, (int64_t[]){12, 6}, 1.0f)), 1.0f);
    /* LRN over 6 channels (size 3) and over 2 (size 2: a window past both ends), alphas large enough to
     * show; GlobalMaxPool; the variadic Sum, Mean and Max of three broadcast inputs and Min of one, so the
     * many-input gradient of Max (Equal, Not, And, Or masks) runs too */
    n = NODE(b, "LRN", OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12})));
    mp_ob_attr_int(b, n, "size", 3);
    mp_ob_attr_float(b, n, "alpha", 0.6f);
    mp_ob_attr_float(b, n, "beta", 0.7f);
    mp_ob_attr_float(b, n, "bias", 1.5f);
    add_scaled(b, &acc, n->output[0], 1.0f);
    n = NODE(b, "LRN", x10);
    mp_ob_attr_int(b, n, "size", 2);
    mp_ob_attr_float(b, n, "alpha", 0.9f);
    add_scaled(b, &acc, n->output[0], 1.0f);
    add_scaled(b, &acc, OP(b, "GlobalMaxPool", x10), 1.0f);
    const char *prow = mp_ob_param_uniform(b, "prow", 1, (int64_t[]){6}, 1.0f);
    n = mp_ob_node(b, "Sum", 1, 3, (const char *[]){x10, prow, OP(b, "Neg", xp)});
    add_scaled(b, &acc, n->output[0], 0.3f);
    n = mp_ob_node(b, "Mean", 1, 3, (const char *[]){x10, prow, mp_ob_const_f32(b, 0.25f)});
    add_scaled(b, &acc, n->output[0], 1.0f);
    n = mp_ob_node(b, "Max", 1, 3, (const char *[]){x10, OP(b, "Neg", x10), prow});
    add_scaled(b, &acc, n->output[0], 1.0f);
    add_scaled(b, &acc, NODE(b, "Min", x10)->output[0], 1.0f);
    /* the masks and integer ops of a data path, on xs = 10 x (the input is seeded in [-0.1, 0.1]):
     * GreaterOrEqual and LessOrEqual at ties (Floor(3 xs) is 0 on a sixth of it), Xor and Not of them, IsInf
     * (detect_negative 0) of xs / 0, IsNaN of 0 / 0, Mod of floats (fmod 1) and of int64 (Python's sign, a
     * zero divisor giving 0), CastLike to int64 (truncating), each a float mask by Where over x10 (so Where's
     * gradient runs); Shrink of x10
     * (its gradient: dY where |X| > lambd) */
    const char *xs = OP(b, "Mul", x, mp_ob_const_f32(b, 10.0f)), *zero = mp_ob_const_f32(b, 0.0f);
    const char *f3 = OP(b, "Floor", OP(b, "Mul", xs, mp_ob_const_f32(b, 3.0f))), *r0 = OP(b, "Relu", f3), *masks[7];
    masks[0] = OP(b, "Xor", OP(b, "GreaterOrEqual", f3, zero), OP(b, "Not", OP(b, "LessOrEqual", f3, zero)));
    n = NODE(b, "IsInf", OP(b, "Div", xs, r0));
    mp_ob_attr_int(b, n, "detect_negative", 0);
    masks[1] = n->output[0];
    masks[2] = OP(b, "IsNaN", OP(b, "Div", r0, r0));
    n = NODE(b, "Mod", xs, mp_ob_const_f32(b, 0.3f));
    mp_ob_attr_int(b, n, "fmod", 1);
    masks[3] = OP(b, "Greater", n->output[0], mp_ob_const_f32(b, 0.1f));
    const char *ints = OP(b, "Mod", cast(b, OP(b, "Mul", xs, mp_ob_const_f32(b, 7.0f)), MP_INT64), mp_ob_const_i64(b, 1, 6, (int64_t[]){0, 3, -4, 5, -2, 7}));
    masks[4] = OP(b, "Greater", ints, mp_ob_const_i64(b, 0, 1, (int64_t[]){0}));
    masks[5] = OP(b, "Equal", ints, mp_ob_const_i64(b, 0, 1, (int64_t[]){0}));
    const char *truncated = OP(b, "CastLike", OP(b, "Mul", xs, mp_ob_const_f32(b, 3.0f)), ints);
    masks[6] = OP(b, "Equal", truncated, mp_ob_const_i64(b, 0, 1, (int64_t[]){0})); /* -0.5 truncates to 0 */
    for (int k = 0; k < 7; k++) /* weights apart: one mask's gain must not be another's loss */
        add_scaled(b, &acc, OP(b, "Where", masks[k], x10, zero), 0.2f + 0.1f * (float)k);
    /* ArgMax along the last axis (keepdims 0); ArgMin of x10 beside itself (every minimum a tie) with
     * select_last_index, as floats; OneHot of ArgMax - 3 (negative indices wrap) along the last axis and along
     * axis 1, values [0.5, 2] */
    n = NODE(b, "ArgMax", x10);
    mp_ob_attr_int(b, n, "axis", 3);
    mp_ob_attr_int(b, n, "keepdims", 0);
    const char *am = OP(b, "Sub", n->output[0], mp_ob_const_i64(b, 0, 1, (int64_t[]){3}));
    n = NODE(b, "Concat", x10, x10);
    mp_ob_attr_int(b, n, "axis", 3);
    n = NODE(b, "ArgMin", n->output[0]);
    mp_ob_attr_int(b, n, "axis", 3);
    mp_ob_attr_int(b, n, "select_last_index", 1);
    add_scaled(b, &acc, cast(b, n->output[0], MP_FLOAT), 0.05f);
    const char *one = mp_ob_const_i64(b, 1, 1, (int64_t[]){1}), *depth = mp_ob_const_i64(b, 0, 1, (int64_t[]){6});
    n = NODE(b, "Concat", OP(b, "Reshape", mp_ob_const_f32(b, 0.5f), one), OP(b, "Reshape", mp_ob_const_f32(b, 2.0f), one));
    mp_ob_attr_int(b, n, "axis", 0);
    const char *vals = n->output[0];
    n = NODE(b, "Transpose", x10);
    mp_ob_attr_ints(b, n, "perm", 4, (int64_t[]){0, 2, 1, 3});
    const char *x10t = n->output[0]; /* [2, 6, 2, 6]: OneHot's shape along axis 1 */
    for (int k = 0; k < 2; k++) {
        n = NODE(b, "OneHot", am, depth, vals);
        if (k) mp_ob_attr_int(b, n, "axis", 1);
        add_scaled(b, &acc, OP(b, "Mul", n->output[0], k ? x10t : x10), 0.5f + 0.2f * (float)k);
    }
    /* Hardmax (no gradient rule: of 10 x alone) along axis 2 of 10 x beside itself (every maximum a tie: the
     * first wins), times x10 beside itself so the place of the 1 shows */
    n = NODE(b, "Concat", xs, xs);
    mp_ob_attr_int(b, n, "axis", 2);
    Onnx__NodeProto *hm = NODE(b, "Hardmax", n->output[0]);
    mp_ob_attr_int(b, hm, "axis", 2);
    n = NODE(b, "Concat", x10, OP(b, "Mul", x10, mp_ob_const_f32(b, 2.0f)));
    mp_ob_attr_int(b, n, "axis", 2);
    add_scaled(b, &acc, OP(b, "Mul", hm->output[0], n->output[0]), 1.0f);
    /* TopK: the 3 largest along the last axis (values times a parameter per rank, so the order shows and its
     * gradient, a ScatterElements add, runs); the 4 smallest along axis 2 of x10 beside itself (every key a
     * tie: the lower index first), indices as floats times a parameter per rank */
    n = mp_ob_node(b, "TopK", 2, 2, (const char *[]){x10, mp_ob_const_i64(b, 1, 1, (int64_t[]){3})});
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "ptk", 1, (int64_t[]){3}, 1.0f)), 1.0f);
    n = NODE(b, "Concat", x10, x10);
    mp_ob_attr_int(b, n, "axis", 2);
    n = mp_ob_node(b, "TopK", 2, 2, (const char *[]){n->output[0], mp_ob_const_i64(b, 1, 1, (int64_t[]){4})});
    mp_ob_attr_int(b, n, "axis", 2);
    mp_ob_attr_int(b, n, "largest", 0);
    add_scaled(b, &acc, OP(b, "Mul", cast(b, n->output[1], MP_FLOAT), mp_ob_param_uniform(b, "ptk4", 2, (int64_t[]){4, 1}, 1.0f)), 0.05f);
    add_scaled(b, &acc, OP(b, "Mul", OP(b, "MeanVarianceNormalization", x10), plp), 1.0f); /* as its body */
    n = NODE(b, "Shrink", x10);
    mp_ob_attr_float(b, n, "lambd", 0.4f);
    mp_ob_attr_float(b, n, "bias", 0.1f);
    add_scaled(b, &acc, n->output[0], 1.0f);
    const char *halves = OP(b, "Div", OP(b, "Floor", OP(b, "Mul", x10, mp_ob_const_f32(b, 4.0f))), mp_ob_const_f32(b, 2.0f));
    add_scaled(b, &acc, OP(b, "Add", OP(b, "Round", halves), OP(b, "Ceil", OP(b, "Mul", OP(b, "Sign", xp), halves))), 0.1f);
    add_scaled(b, &acc, OP(b, "PRelu", x10, mp_ob_param_uniform(b, "slope", 3, (int64_t[]){2, 1, 1}, 1.0f)), 0.1f);
    /* LogSoftmax along axis 2 (rows of 6 across an inner axis) and along rows of 72 (a block per row on
     * the GPU), plus log(row length): their gradients, LogSoftmaxGrad, overwrite dY */
    n = NODE(b, "LogSoftmax", x10);
    mp_ob_attr_int(b, n, "axis", 2);
    add_scaled(b, &acc, OP(b, "Add", n->output[0], mp_ob_const_f32(b, 1.79175947f)), 0.3f);
    const char *ls72 = OP(b, "LogSoftmax", OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 2, (int64_t[]){2, 72})));
    add_scaled(b, &acc, OP(b, "Add", ls72, mp_ob_const_f32(b, 4.27666612f)), 0.3f);
    /* InstanceNormalization; GroupNormalization with a scale per channel (opset 21's form: two groups of
     * two channels) and per group (opset 18's: one group of 72, a block per row on the GPU); of
     * x * p * pn, pn per position (p alone would cancel) */
    const char *xn = OP(b, "Mul", xp, mp_ob_param_uniform(b, "pn", 2, (int64_t[]){6, 6}, 1.0f));
    add_scaled(b, &acc, OP(b, "InstanceNormalization", xn, mp_ob_param_uniform(b, "in_s", 1, (int64_t[]){2}, 1.0f),
                          mp_ob_param_uniform(b, "in_b", 1, (int64_t[]){2}, 1.0f)), 0.3f);
    n = NODE(b, "GroupNormalization", OP(b, "Reshape", xn, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 4, 18})),
             mp_ob_param_uniform(b, "gn_s", 1, (int64_t[]){4}, 1.0f), mp_ob_param_uniform(b, "gn_b", 1, (int64_t[]){4}, 1.0f));
    mp_ob_attr_int(b, n, "num_groups", 2);
    mp_ob_attr_float(b, n, "epsilon", 1e-3f);
    add_scaled(b, &acc, n->output[0], 0.3f);
    n = NODE(b, "GroupNormalization", xn, mp_ob_param_uniform(b, "gn1_s", 1, (int64_t[]){1}, 1.0f),
             mp_ob_param_uniform(b, "gn1_b", 1, (int64_t[]){1}, 1.0f));
    mp_ob_attr_int(b, n, "num_groups", 1);
    add_scaled(b, &acc, n->output[0], 0.3f);
    /* the other reductions (axes as attributes at opset 17), keepdims 0 and 1, the default axes:
     * ReduceMax of x10 beside itself (every maximum a tie) and of x10 repeated 8 times (an 8-way tie, and
     * 1152 terms: a block per output on the GPU, as LogSumExp's two passes there) */
    n = NODE(b, "Concat", x10, x10);
    mp_ob_attr_int(b, n, "axis", 3);
    const char *twice = n->output[0];
    const char *rep8 = OP(b, "Expand", x10, mp_ob_const_i64(b, 1, 5, (int64_t[]){8, 2, 2, 6, 6}));
    const char *sq = OP(b, "Mul", x10, x10), *near1 = OP(b, "Add", OP(b, "Mul", xp, mp_ob_const_f32(b, 3.0f)), mp_ob_const_f32(b, 1.0f));
    static const struct {
        const char *op;
        int in, naxes; /* in: x10, twice, rep8, x10^2, 1 + 3 xp, xp */
        int64_t axes[2];
        int keepdims;
        float shift; /* added to the result */
    } reds2[] = {
        {"ReduceMax", 1, 1, {3}, 0, 0},           {"ReduceMin", 0, 2, {1, -2}, 1, 0},  {"ReduceMax", 2, 0, {0}, 1, 0},
        {"ReduceLogSumExp", 2, 0, {0}, 0, -7.0492f}, {"ReduceSumSquare", 0, 1, {1}, 0, 0}, {"ReduceL1", 5, 2, {2, 3}, 1, 0},
        {"ReduceL2", 0, 1, {0}, 0, 0},            {"ReduceLogSum", 3, 2, {2, 3}, 0, 0}, {"ReduceProd", 4, 1, {3}, 1, 0},
        {"ReduceLogSumExp", 0, 1, {1}, 1, -0.6931f}, {"ReduceMin", 1, 1, {-1}, 0, 0},
    };
    for (size_t k = 0; k < sizeof reds2 / sizeof *reds2; k++) {
        const char *ins[6] = {x10, twice, rep8, sq, near1, xp};
        n = NODE(b, reds2[k].op, ins[reds2[k].in]);
        if (reds2[k].naxes) mp_ob_attr_ints(b, n, "axes", reds2[k].naxes, reds2[k].axes);
        mp_ob_attr_int(b, n, "keepdims", reds2[k].keepdims);
        add_scaled(b, &acc, reds2[k].shift ? OP(b, "Add", n->output[0], mp_ob_const_f32(b, reds2[k].shift)) : n->output[0], 0.1f);
    }
    /* CumSum: exclusive, reverse, both */
    static const struct {
        int64_t axis;
        int exclusive, reverse;
    } cums[] = {{2, 1, 0}, {-1, 0, 1}, {1, 1, 1}};
    for (size_t k = 0; k < sizeof cums / sizeof *cums; k++) {
        n = NODE(b, "CumSum", x10, mp_ob_const_i64(b, 0, 1, &cums[k].axis));
        if (cums[k].exclusive) mp_ob_attr_int(b, n, "exclusive", 1);
        if (cums[k].reverse) mp_ob_attr_int(b, n, "reverse", 1);
        add_scaled(b, &acc, n->output[0], 0.1f);
    }
    /* CumProd (no gradient rule: of the input alone), of 1 + 5 x, in the same three forms, and of int64 */
    const char *near_one = OP(b, "Add", OP(b, "Mul", x, mp_ob_const_f32(b, 5.0f)), mp_ob_const_f32(b, 1.0f));
    for (size_t k = 0; k < sizeof cums / sizeof *cums; k++) {
        n = NODE(b, "CumProd", near_one, mp_ob_const_i64(b, 0, 1, &cums[k].axis));
        if (cums[k].exclusive) mp_ob_attr_int(b, n, "exclusive", 1);
        if (cums[k].reverse) mp_ob_attr_int(b, n, "reverse", 1);
        add_scaled(b, &acc, n->output[0], 0.2f + 0.1f * (float)k);
    }
    const char *i30 = cast(b, OP(b, "Mul", x, mp_ob_const_f32(b, 30.0f)), MP_INT64);
    add_scaled(b, &acc, cast(b, OP(b, "CumProd", i30, mp_ob_const_i64(b, 0, 1, (int64_t[]){3})), MP_FLOAT), 1e-3f);
    /* the permutations and repetitions (DepthToSpace DCR and CRD, SpaceToDepth, Tile) and GatherElements
     * (indices negative and repeated: its gradient's ScatterElements adds several into one cell), each
     * times a parameter per position, or the loss would not see the order */
    const char *x8 = OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 8, 3, 3}));
    const char *wpos = mp_ob_param_uniform(b, "wpos", 3, (int64_t[]){2, 6, 6}, 1.0f);
    for (int crd = 0; crd < 2; crd++) {
        n = NODE(b, "DepthToSpace", x8);
        mp_ob_attr_int(b, n, "blocksize", 2);
        if (crd) mp_ob_attr_str(b, n, "mode", "CRD");
        add_scaled(b, &acc, OP(b, "Mul", n->output[0], wpos), 0.3f);
    }
    n = NODE(b, "SpaceToDepth", x10);
    mp_ob_attr_int(b, n, "blocksize", 3);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "ws2d", 3, (int64_t[]){18, 2, 2}, 1.0f)), 0.3f);
    const char *tiled = OP(b, "Tile", x10, mp_ob_const_i64(b, 1, 4, (int64_t[]){1, 2, 1, 3}));
    add_scaled(b, &acc, OP(b, "Mul", tiled, mp_ob_param_uniform(b, "wtile", 3, (int64_t[]){4, 6, 18}, 1.0f)), 0.3f);
    const char *idx = OP(b, "Expand", OP(b, "Reshape", mp_ob_const_i64(b, 1, 12, (int64_t[]){0, 5, -1, 2, 3, 3, 0, -1, 5, -4, 3, 1}),
                                         mp_ob_const_i64(b, 1, 4, (int64_t[]){1, 1, 2, 6})),
                         mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 2, 6}));
    n = NODE(b, "GatherElements", x10, idx);
    mp_ob_attr_int(b, n, "axis", 2);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "wge", 3, (int64_t[]){2, 2, 6}, 1.0f)), 0.3f);
    /* ScatterElements of 10 x's first two rows into 10 x (no gradient: it reads no parameter), mul and none,
     * and Scatter (its name at opsets 9-10) */
    const char *xs10 = OP(b, "Mul", x, mp_ob_const_f32(b, 10.0f));
    const char *rows = OP(b, "Slice", xs10, mp_ob_const_i64(b, 1, 1, (int64_t[]){0}), mp_ob_const_i64(b, 1, 1, (int64_t[]){2}),
                          mp_ob_const_i64(b, 1, 1, (int64_t[]){2}));
    for (int k = 0; k < 3; k++) {
        n = NODE(b, k < 2 ? "ScatterElements" : "Scatter", xs10, idx, rows);
        mp_ob_attr_int(b, n, "axis", 2);
        if (k < 2) mp_ob_attr_str(b, n, "reduction", k ? "none" : "mul");
        add_scaled(b, &acc, n->output[0], 0.1f + 0.1f * (float)k);
    }
    /* the inverse and hyperbolic trigonometric functions (their gradients are Sqrt, Div, Mul ...), the
     * inverse ones of 0.9 tanh(x10) (Acosh: of 1.5 + 0.4 tanh(x10)) to stay inside their domains */
    const char *t9 = OP(b, "Mul", OP(b, "Tanh", x10), mp_ob_const_f32(b, 0.9f));
    const char *trig_in[9] = {x10, x10, x10, t9, t9, x10, x10, OP(b, "Add", OP(b, "Mul", OP(b, "Tanh", x10), mp_ob_const_f32(b, 0.4f)), mp_ob_const_f32(b, 1.5f)), t9};
    static const char *const trig[9] = {"Tan", "Sinh", "Cosh", "Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh"};
    for (int k = 0; k < 9; k++) add_scaled(b, &acc, OP(b, trig[k], trig_in[k]), 0.3f);
    /* RMSNormalization over the last axis (a scale of 6) and over axes 1.. (rows of 72: a block per row on
     * the GPU), epsilon other than its default; their gradients RMSNormalizationGrad */
    n = NODE(b, "RMSNormalization", xn, mp_ob_param_uniform(b, "rms_s", 1, (int64_t[]){6}, 1.0f));
    add_scaled(b, &acc, n->output[0], 0.3f);
    n = NODE(b, "RMSNormalization", xn, mp_ob_param_uniform(b, "rms72_s", 3, (int64_t[]){2, 6, 6}, 1.0f));
    mp_ob_attr_int(b, n, "axis", 1);
    mp_ob_attr_float(b, n, "epsilon", 1e-2f);
    add_scaled(b, &acc, n->output[0], 0.3f);
    /* NegativeLogLikelihoodLoss of a LogSoftmax over 6 classes ([2, 6, 12]), targets with an ignored one:
     * mean with class weights (of x alone: no gradient for them), sum without, none with; gradients
     * NegativeLogLikelihoodGrad */
    n = NODE(b, "LogSoftmax", OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12})));
    mp_ob_attr_int(b, n, "axis", 1);
    const char *lsm = n->output[0];
    n = NODE(b, "Concat", mp_ob_const_i64(b, 1, 12, (int64_t[]){0, 5, 2, 2, 4, 1, 3, 5, 0, 4, 2, 1}),
             mp_ob_const_i64(b, 1, 12, (int64_t[]){5, 5, 3, 0, 1, 4, 2, 3, 3, 0, 1, 4})); /* (the builder's constants hold up to 16) */
    mp_ob_attr_int(b, n, "axis", 0);
    const char *tgt = OP(b, "Reshape", n->output[0], mp_ob_const_i64(b, 1, 2, (int64_t[]){2, 12}));
    const char *xflat = OP(b, "Reshape", xs10, mp_ob_const_i64(b, 1, 1, (int64_t[]){-1}));
    const char *cw = OP(b, "Add", OP(b, "Abs", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){0}), mp_ob_const_i64(b, 1, 1, (int64_t[]){6}))),
                        mp_ob_const_f32(b, 0.5f));
    static const char *const nll_red[3] = {"mean", "sum", "none"};
    for (int k = 0; k < 3; k++) {
        n = k == 1 ? NODE(b, "NegativeLogLikelihoodLoss", lsm, tgt) : NODE(b, "NegativeLogLikelihoodLoss", lsm, tgt, cw);
        mp_ob_attr_str(b, n, "reduction", nll_red[k]);
        if (k != 1) mp_ob_attr_int(b, n, "ignore_index", k ? 4 : 5);
        add_scaled(b, &acc, n->output[0], k == 1 ? 0.01f : 0.3f);
    }
    /* GatherND (rows of 2 indices into [2, 2, 6, 6], one negative, one repeated: its gradient's ScatterND
     * adds two into one slice) times a parameter per position; GatherND with batch_dims 1 of 10 x (its
     * gradient is not supported); ScatterND add and none of x10's first 108 values into x10 (gradients:
     * GatherND of dY, ScatterND of zeros over dY) */
    const char *nd_idx = OP(b, "Reshape", mp_ob_const_i64(b, 1, 6, (int64_t[]){0, 1, 1, -1, 0, 1}), mp_ob_const_i64(b, 1, 2, (int64_t[]){3, 2}));
    add_scaled(b, &acc, OP(b, "Mul", OP(b, "GatherND", x10, nd_idx), mp_ob_param_uniform(b, "wgnd", 3, (int64_t[]){3, 6, 6}, 1.0f)), 0.3f);
    n = NODE(b, "GatherND", xs10, OP(b, "Reshape", mp_ob_const_i64(b, 1, 12, (int64_t[]){1, 5, 0, -1, 1, 2, 0, 4, 1, 0, -2, 3}),
                                          mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 3, 2})));
    mp_ob_attr_int(b, n, "batch_dims", 1);
    add_scaled(b, &acc, n->output[0], 0.1f);
    const char *x10flat = OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 1, (int64_t[]){-1}));
    const char *upd = OP(b, "Reshape", OP(b, "Slice", x10flat, mp_ob_const_i64(b, 1, 1, (int64_t[]){0}), mp_ob_const_i64(b, 1, 1, (int64_t[]){108})),
                         mp_ob_const_i64(b, 1, 3, (int64_t[]){3, 6, 6}));
    for (int k = 0; k < 2; k++) {
        n = NODE(b, "ScatterND", OP(b, "Mul", x10, mp_ob_const_f32(b, 0.5f)), nd_idx, upd);
        mp_ob_attr_str(b, n, "reduction", k ? "none" : "add");
        add_scaled(b, &acc, OP(b, "Mul", n->output[0], wpos), 0.3f);
    }
    /* RotaryEmbedding: 4-D with position_ids into a cache of 8 positions, interleaved, rotary_embedding_dim
     * 4 of 6; 3-D (2 heads) with caches [B, S, 3]; caches of 10 x alone (no gradient for them). Their
     * gradients are RotaryEmbeddings with the sin cache negated */
    const char *ang8 = OP(b, "Reshape", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){10}), mp_ob_const_i64(b, 1, 1, (int64_t[]){26})),
                          mp_ob_const_i64(b, 1, 2, (int64_t[]){8, 2}));
    const char *pos = OP(b, "Reshape", mp_ob_const_i64(b, 1, 12, (int64_t[]){0, 3, 7, 1, 1, 5, 6, 2, 0, 4, 7, 3}), mp_ob_const_i64(b, 1, 2, (int64_t[]){2, 6}));
    n = NODE(b, "RotaryEmbedding", x10, OP(b, "Cos", ang8), OP(b, "Sin", ang8), pos);
    mp_ob_attr_int(b, n, "interleaved", 1);
    mp_ob_attr_int(b, n, "rotary_embedding_dim", 4);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], wpos), 3.0f);
    const char *ang36 = OP(b, "Reshape", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){40}), mp_ob_const_i64(b, 1, 1, (int64_t[]){76})),
                           mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 3}));
    const char *x3d = OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12}));
    n = NODE(b, "RotaryEmbedding", x3d, OP(b, "Cos", ang36), OP(b, "Sin", ang36));
    mp_ob_attr_int(b, n, "num_heads", 2);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "wrot", 1, (int64_t[]){12}, 1.0f)), 1.0f);
    /* Attention, 4-D: two query heads on one kv head, causal, softcap, a scale, an additive mask parameter
     * [6, 6] (its gradient: dMask summed to its shape) and nonpad_kv_seqlen {6, 4} (rows of batch 1
     * fully masked by the causal frontier); 3-D: a past cache of 2 (of 10 x), a bool mask [2, 1, 6, 7]
     * (shorter than the 8 keys), default scale. Gradients AttentionGrad (dQ, dK, dV, dMask); with 10 x alone
     * (no gradient), present_key, present_value and the softmax as qk_matmul_output */
    const char *kq = OP(b, "Mul", OP(b, "Slice", x10, mp_ob_const_i64(b, 1, 1, (int64_t[]){0}), mp_ob_const_i64(b, 1, 1, (int64_t[]){1}),
                                     mp_ob_const_i64(b, 1, 1, (int64_t[]){1})),
                        mp_ob_param_uniform(b, "wk", 2, (int64_t[]){6, 6}, 1.0f));
    const char *vq = OP(b, "Mul", OP(b, "Slice", x10, mp_ob_const_i64(b, 1, 1, (int64_t[]){1}), mp_ob_const_i64(b, 1, 1, (int64_t[]){2}),
                                     mp_ob_const_i64(b, 1, 1, (int64_t[]){1})),
                        mp_ob_param_uniform(b, "wv", 2, (int64_t[]){6, 6}, 1.0f));
    const char *q5 = OP(b, "Mul", x10, mp_ob_const_f32(b, 5.0f));
    n = mp_ob_node(b, "Attention", 1, 7, (const char *[]){q5, kq, vq,
                                                        mp_ob_param_uniform(b, "amask", 2, (int64_t[]){6, 6}, 1.0f),
                                                        "", "", mp_ob_const_i64(b, 1, 2, (int64_t[]){6, 4})});
    mp_ob_attr_int(b, n, "is_causal", 1);
    mp_ob_attr_float(b, n, "softcap", 2.0f);
    mp_ob_attr_float(b, n, "scale", 0.8f);
    const char *watt4 = mp_ob_param_uniform(b, "watt4", 4, (int64_t[]){2, 2, 6, 6}, 1.0f);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], watt4), 20.0f);
    const char *past = OP(b, "Reshape", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){20}), mp_ob_const_i64(b, 1, 1, (int64_t[]){44})),
                          mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 1, 2, 6}));
    const char *bmask = OP(b, "Greater", OP(b, "Reshape", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){50}), mp_ob_const_i64(b, 1, 1, (int64_t[]){134})),
                                            mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 1, 6, 7})),
                           mp_ob_const_f32(b, -0.3f));
    const char *k3 = OP(b, "Reshape", kq, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 6})), *v3 = OP(b, "Reshape", vq, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 6}));
    n = mp_ob_node(b, "Attention", 1, 6, (const char *[]){OP(b, "Reshape", q5, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12})), k3, v3, bmask, past,
                                                        OP(b, "Neg", past)});
    mp_ob_attr_int(b, n, "q_num_heads", 2);
    mp_ob_attr_int(b, n, "kv_num_heads", 1);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], OP(b, "Reshape", watt4, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12}))), 20.0f);
    const char *xs3d = OP(b, "Reshape", xs10, mp_ob_const_i64(b, 1, 3, (int64_t[]){2, 6, 12}));
    const char *past2 = OP(b, "Reshape", OP(b, "Slice", xflat, mp_ob_const_i64(b, 1, 1, (int64_t[]){20}), mp_ob_const_i64(b, 1, 1, (int64_t[]){68})),
                           mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 2, 6}));
    n = mp_ob_node(b, "Attention", 4, 6, (const char *[]){xs3d, OP(b, "Mul", xs3d, mp_ob_const_f32(b, 0.5f)), OP(b, "Neg", xs3d), bmask, past2,
                                                        OP(b, "Neg", past2)});
    mp_ob_attr_int(b, n, "q_num_heads", 2);
    mp_ob_attr_int(b, n, "kv_num_heads", 2);
    mp_ob_attr_int(b, n, "qk_matmul_output_mode", 3);
    for (int k = 0; k < 4; k++) add_scaled(b, &acc, n->output[k], 0.3f);
    mp_ob_output(b, acc, "total", MP_FLOAT, 0, NULL);
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

/* Writes a forms model with `write` into the test's folder as NAME.onnx and checks it on the host runtime
 * (SGD: a gradient's scale shows in the losses). */
static void check_forms(void (*write)(const char *), const char *name, const char *label)
{
    char path[128], out[128];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(out, sizeof out, "%s/%s", dir, name);
    write(path);
    const model m = {path, {"--optimizer", "sgd"}, 1};
    check_on_host(&m, out, label, FORMS_RTOL);
}

START_TEST(op_forms_match_cpu)
{
    check_forms(write_op_forms, "op_forms",
                "Reduce*/Resize/ConvTranspose/Pad/Einsum/activation/normalization/CumSum/permutation/ND/attention forms");
}
END_TEST

/* Sampling grids: GridSample in each mode and padding mode, align_corners both
 * ways, 2-D grids as parameters (values past [-1, 1] reach the padding) and one
 * volumetric; AffineGrid (2-D, and 3-D with align_corners) from parameter
 * thetas feeding GridSamples. X and every grid train, so GridSampleGrad's dX
 * and dGrid and AffineGridGrad's dTheta run. */
static void write_grid_forms(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 4, (const char *[]){"2", "2", "6", "6"});
    const char *xp = OP(b, "Mul", x, mp_ob_param_uniform(b, "p", 3, (int64_t[]){2, 1, 1}, 1.0f)), *acc = NULL;
    static const struct {
        const char *mode, *pad;
        int align;
    } gs[] = {{"bilinear", "zeros", 0}, {"nearest", "border", 1}, {"bicubic", "reflection", 0},
              {"bicubic", "border", 1}, {"bilinear", "reflection", 1}, {"nearest", "zeros", 0}};
    for (size_t k = 0; k < sizeof gs / sizeof *gs; k++) {
        char name[16];
        snprintf(name, sizeof name, "grid%zu", k);
        Onnx__NodeProto *n = NODE(b, "GridSample", xp, mp_ob_param_uniform(b, name, 4, (int64_t[]){2, 4, 5, 2}, 1.3f));
        mp_ob_attr_str(b, n, "mode", gs[k].mode);
        mp_ob_attr_str(b, n, "padding_mode", gs[k].pad);
        mp_ob_attr_int(b, n, "align_corners", gs[k].align);
        add_scaled(b, &acc, n->output[0], 5.0f);
    }
    const char *x5 = OP(b, "Reshape", xp, mp_ob_const_i64(b, 1, 5, (int64_t[]){2, 2, 3, 2, 6}));
    add_scaled(b, &acc, OP(b, "GridSample", x5, mp_ob_param_uniform(b, "grid3d", 5, (int64_t[]){2, 2, 3, 2, 3}, 1.2f)), 5.0f);
    Onnx__NodeProto *a = NODE(b, "AffineGrid", mp_ob_param_uniform(b, "theta", 3, (int64_t[]){2, 2, 3}, 0.9f),
                              mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 5, 4}));
    add_scaled(b, &acc, OP(b, "GridSample", xp, a->output[0]), 5.0f);
    a = NODE(b, "AffineGrid", mp_ob_param_uniform(b, "theta3", 3, (int64_t[]){2, 3, 4}, 0.9f),
             mp_ob_const_i64(b, 1, 5, (int64_t[]){2, 2, 2, 3, 2}));
    mp_ob_attr_int(b, a, "align_corners", 1);
    add_scaled(b, &acc, OP(b, "GridSample", x5, a->output[0]), 5.0f);
    mp_ob_output(b, acc, "total", MP_FLOAT, 0, NULL);
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

START_TEST(grid_forms_match_cpu) { check_forms(write_grid_forms, "grid_forms", "GridSample/AffineGrid forms"); }
END_TEST

/* A 1-D int64 constant of any length (the builder's hold at most 16): a Concat of such pieces, folded. */
static const char *const_i64s(mp_ob *b, int count, const int64_t *v)
{
    const char *parts[8];
    int np = 0;
    for (int at = 0; at < count && np < 8; at += 16, np++) parts[np] = mp_ob_const_i64(b, 1, count - at < 16 ? count - at : 16, v + at);
    if (np == 1) return parts[0];
    Onnx__NodeProto *n = mp_ob_node(b, "Concat", 1, np, parts);
    mp_ob_attr_int(b, n, "axis", 0);
    return n->output[0];
}

/* Floats k / den, a constant folded from int64s, Reshaped to dims[rank]. */
static const char *const_ratios(mp_ob *b, int count, const int64_t *k, float den, int rank, const int64_t *dims)
{
    const char *v = OP(b, "Div", cast(b, const_i64s(b, count, k), MP_FLOAT), mp_ob_const_f32(b, den));
    return OP(b, "Reshape", v, mp_ob_const_i64(b, 1, rank, dims));
}

/* Generators, integer and quantization ops, Lp pools and Upsample, each adding mean((s v)^2):
 * EyeLike of x * p (so computed, not folded) with k 1, and int64 with k -2, times x * p; Range of 70000
 * int64s (from -5 by 3) and of floats (from 0.25 by 0.001), too long to fold; BitwiseAnd, Or, Xor, Not of
 * int64 data (10^4 x truncated, negatives too) with 0x7ff0000000001234, whose low 20 bits survive only
 * exact 64-bit arithmetic, and of int32; BitShift LEFT and RIGHT of uint8 and uint16 data (negatives
 * wrapped) by 0, 1, 3, 7, 8 and 17 (past the width: 0); QuantizeLinear then DequantizeLinear per tensor to
 * uint8 (zero point 128, clamped both ways), per axis to int8 (two scales, two zero points), per block of 3
 * along the last axis to int16, to int16 at ties in float (not in double), and DequantizeLinear of int32
 * without a zero point; LpPool (p 3, strides 2,
 * pads 1; p 2 default over [2, 3]), GlobalLpPool (p 3 and the default 2); Upsample nearest (scales input,
 * [1, 1, 2, 1.5]) and bilinear (scales attribute, opset 7's) of x * p, whose gradient (a ResizeGrad) runs
 * for the first. The importer takes Upsample, and QuantizeLinear's block_size (opset 21), at the builder's
 * opset 17. */
static void write_int_forms(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 4, (const char *[]){"2", "2", "6", "6"});
    const char *xp = OP(b, "Mul", x, mp_ob_param_uniform(b, "p", 3, (int64_t[]){2, 1, 1}, 1.0f)), *acc = NULL;
    const char *x10 = OP(b, "Mul", x, mp_ob_const_f32(b, 10.0f)), *xp10 = OP(b, "Mul", xp, mp_ob_const_f32(b, 10.0f));
    /* EyeLike (no gradient rule: of 10 x, so computed, not folded) */
    const char *m12 = OP(b, "Reshape", xp10, mp_ob_const_i64(b, 1, 2, (int64_t[]){12, 12})),
               *d12 = OP(b, "Reshape", x10, mp_ob_const_i64(b, 1, 2, (int64_t[]){12, 12}));
    Onnx__NodeProto *n = NODE(b, "EyeLike", d12);
    mp_ob_attr_int(b, n, "k", 1);
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], m12), 3.0f);
    n = NODE(b, "EyeLike", d12);
    mp_ob_attr_int(b, n, "k", -2);
    mp_ob_attr_int(b, n, "dtype", MP_INT64);
    add_scaled(b, &acc, OP(b, "Mul", cast(b, n->output[0], MP_FLOAT), m12), 3.0f);
    /* Range */
    const char *ri = OP(b, "Range", mp_ob_const_i64(b, 0, 1, (int64_t[]){-5}), mp_ob_const_i64(b, 0, 1, (int64_t[]){209995}),
                        mp_ob_const_i64(b, 0, 1, (int64_t[]){3}));
    add_scaled(b, &acc, cast(b, ri, MP_FLOAT), 1e-5f);
    const char *rf = OP(b, "Range", mp_ob_const_f32(b, 0.25f), mp_ob_const_f32(b, 70.25f), mp_ob_const_f32(b, 0.001f));
    add_scaled(b, &acc, rf, 0.02f);
    /* bitwise ops of int64 and int32 data */
    const char *a64 = cast(b, OP(b, "Mul", x, mp_ob_const_f32(b, 1e4f)), MP_INT64);
    const char *b64 = cast(b, OP(b, "Mul", OP(b, "Transpose", x), mp_ob_const_f32(b, 7777.0f)), MP_INT64);
    const char *hi = OP(b, "BitwiseXor", a64, mp_ob_const_i64(b, 0, 1, (int64_t[]){0x7ff0000000001234}));
    const char *lo = OP(b, "BitwiseAnd", hi, mp_ob_const_i64(b, 0, 1, (int64_t[]){0xfffff}));
    const char *bits = OP(b, "BitwiseNot", OP(b, "BitwiseOr", lo, OP(b, "Reshape", b64, mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 6, 6}))));
    add_scaled(b, &acc, cast(b, bits, MP_FLOAT), 1e-6f);
    const char *a32 = cast(b, a64, MP_INT32), *b32 = cast(b, OP(b, "Reshape", b64, mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 6, 6})), MP_INT32);
    add_scaled(b, &acc, cast(b, OP(b, "BitwiseXor", OP(b, "BitwiseAnd", a32, b32), OP(b, "BitwiseNot", b32)), MP_FLOAT), 1e-3f);
    const char *shifts = mp_ob_const_i64(b, 1, 6, (int64_t[]){0, 1, 3, 7, 8, 17});
    static const mp_dtype utypes[] = {MP_UINT8, MP_UINT16};
    for (int k = 0; k < 4; k++) {
        n = NODE(b, "BitShift", cast(b, cast(b, OP(b, "Mul", x, mp_ob_const_f32(b, k < 2 ? 2000.0f : 3e5f)), MP_INT64), utypes[k / 2]),
                 cast(b, shifts, utypes[k / 2]));
        mp_ob_attr_str(b, n, "direction", k % 2 ? "RIGHT" : "LEFT");
        add_scaled(b, &acc, cast(b, n->output[0], MP_FLOAT), k < 2 ? 0.01f : 3e-5f);
    }
    /* QuantizeLinear, DequantizeLinear */
    const char *s1 = mp_ob_const_f32(b, 0.005f), *z1 = cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){128}), MP_UINT8);
    add_scaled(b, &acc, OP(b, "DequantizeLinear", OP(b, "QuantizeLinear", x10, s1, z1), s1, z1), 1.0f);
    const char *s2 = const_ratios(b, 2, (int64_t[]){3, 5}, 1000.0f, 1, (int64_t[]){2});
    const char *z2 = cast(b, mp_ob_const_i64(b, 1, 2, (int64_t[]){-3, 4}), MP_INT8);
    n = NODE(b, "QuantizeLinear", x10, s2, z2);
    mp_ob_attr_int(b, n, "axis", 1);
    Onnx__NodeProto *dq = NODE(b, "DequantizeLinear", n->output[0], s2, z2);
    mp_ob_attr_int(b, dq, "axis", 1);
    add_scaled(b, &acc, dq->output[0], 1.0f);
    int64_t k48[48], z48[48];
    for (int i = 0; i < 48; i++) k48[i] = 1 + (i * 7) % 11, z48[i] = (i * 37) % 201 - 100;
    const char *s3 = const_ratios(b, 48, k48, 3e4f, 4, (int64_t[]){2, 2, 6, 2});
    const char *z3 = cast(b, OP(b, "Reshape", const_i64s(b, 48, z48), mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 2, 6, 2})), MP_INT16);
    n = NODE(b, "QuantizeLinear", x10, s3, z3);
    mp_ob_attr_int(b, n, "axis", -1);
    mp_ob_attr_int(b, n, "block_size", 3);
    dq = NODE(b, "DequantizeLinear", n->output[0], s3, z3);
    mp_ob_attr_int(b, dq, "axis", -1);
    mp_ob_attr_int(b, dq, "block_size", 3);
    add_scaled(b, &acc, dq->output[0], 1.0f);
    add_scaled(b, &acc, OP(b, "DequantizeLinear", cast(b, a64, MP_INT32), mp_ob_const_f32(b, 0.001f)), 1.0f);
    /* float32 x over a float32 scale is divided in float: i / 100 over 0.02 is exactly -148.5 in float (even: -148),
     * not in double (-148.500005: -149); those values plus 0 x, so computed, not folded */
    const char *ties = OP(b, "Add", const_ratios(b, 12, (int64_t[]){-297, -293, -287, -283, -281, -277, -273, -269, -259, -253, -249, -235},
                                                 100.0f, 1, (int64_t[]){12}),
                          OP(b, "Mul", NODE(b, "ReduceMean", x)->output[0], mp_ob_const_f32(b, 0.0f)));
    const char *s4 = mp_ob_const_f32(b, 0.02f), *z4 = cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){0}), MP_INT16);
    add_scaled(b, &acc, OP(b, "DequantizeLinear", OP(b, "QuantizeLinear", ties, s4, z4), s4, z4), 1.0f);
    /* LpPool, GlobalLpPool */
    n = NODE(b, "LpPool", x10);
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(3, 3));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    mp_ob_attr_int(b, n, "p", 3);
    add_scaled(b, &acc, n->output[0], 1.0f);
    n = NODE(b, "LpPool", x10);
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(2, 3));
    add_scaled(b, &acc, n->output[0], 1.0f);
    n = NODE(b, "GlobalLpPool", x10);
    mp_ob_attr_int(b, n, "p", 3);
    add_scaled(b, &acc, n->output[0], 1.0f);
    add_scaled(b, &acc, OP(b, "GlobalLpPool", x10), 0.3f);
    /* float to integer as the CPU stores it (ir/graph.c mp_tensor_set_f64): NaN 0, clamped to int64, wrapped */
    const char *nan = OP(b, "Sqrt", x), *mid = OP(b, "Mul", x, mp_ob_const_f32(b, 1e11f));
    add_scaled(b, &acc, cast(b, cast(b, nan, MP_INT32), MP_FLOAT), 1e-9f);
    add_scaled(b, &acc, cast(b, cast(b, OP(b, "Mul", x, mp_ob_const_f32(b, 1e21f)), MP_INT64), MP_FLOAT), 1e-19f);
    add_scaled(b, &acc, cast(b, cast(b, mid, MP_INT32), MP_FLOAT), 1e-9f);
    add_scaled(b, &acc, cast(b, cast(b, mid, MP_INT16), MP_FLOAT), 1e-4f);
    /* Upsample */
    n = NODE(b, "Upsample", xp10, const_ratios(b, 4, (int64_t[]){2, 2, 4, 3}, 2.0f, 1, (int64_t[]){4}));
    add_scaled(b, &acc, OP(b, "Mul", n->output[0], mp_ob_param_uniform(b, "pu", 1, (int64_t[]){9}, 1.0f)), 1.0f);
    n = NODE(b, "Upsample", x10);
    mp_ob_attr_str(b, n, "mode", "bilinear");
    mp_ob_attr_floats(b, n, "scales", 4, (const float[]){1, 1, 1.5f, 2});
    add_scaled(b, &acc, n->output[0], 1.0f);
    mp_ob_output(b, acc, "total", MP_FLOAT, 0, NULL);
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

START_TEST(int_forms_match_cpu)
{
    check_forms(write_int_forms, "int_forms", "EyeLike/Range/bitwise/quantization/LpPool/Upsample/float-to-int forms");
}
END_TEST

/* A float initializer of at most 64 elements holds its values, so the importer
 * folds a Reshape of it as shape arithmetic; the parameter is still trained, so
 * plan.cu must read it each step, not bake the file's values into the Reshape
 * (a frozen copy gave the first step's loss three times). */
static void write_folded_param(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 2, (const char *[]){"batch", "6"}), *acc = NULL;
    const char *w = OP(b, "Reshape", mp_ob_param_uniform(b, "p", 1, (int64_t[]){36}, 1.0f), mp_ob_const_i64(b, 1, 2, (int64_t[]){6, 6}));
    /* 10 x: the synthetic data is small; so scaled, each SGD step moves the loss by ~1% (by 1e-6 unscaled) */
    add_sq(b, &acc, OP(b, "MatMul", OP(b, "Mul", x, mp_ob_const_f32(b, 10.0f)), w));
    mp_ob_output(b, acc, "total", MP_FLOAT, 0, NULL);
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

/* The ops of mobilenet_v3, resnet50, vgg16, vit_b_16 and gpt2's torch exports that the other 16-bit models lack,
 * with their gradients: Conv 3x3 (bias) -> HardSwish -> AveragePool 3x3 stride 2 pads 1 (count_include_pad 0:
 * divisors 4, 6 and 9, whose reciprocals are inexact) -> AveragePool 3x3 stride 1 pads 1 (count_include_pad 1)
 * -> squeeze-excite (GlobalAveragePool, Conv 1x1, HardSigmoid with torch's alpha 1/6, Mul) -> Add of a
 * parameter Expanded to [1, 8, 4, 4] -> Mean of (Sum of three, one broadcast) and another, Mean of three
 * (one broadcast) -> less its ReduceMean over H, W (attribute axes) -> plus a quarter of its ReduceSum over
 * W (axes input, keepdims) -> Slice (W from 1 by step 2, C from 0 to 6) -> less its ReduceMean over the 6
 * channels -> Flatten -> training Dropout (ratio 0.3, so a mask) -> Gemm to 10 logits. */
static void write_half_forms(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 4, (const char *[]){"batch", "4", "8", "8"});
    Onnx__NodeProto *n = NODE(b, "Conv", x, mp_ob_param_uniform(b, "c1.weight", 4, (int64_t[]){8, 4, 3, 3}, 0.5f),
                              mp_ob_param_uniform(b, "c1.bias", 1, (int64_t[]){8}, 0.5f));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    n = NODE(b, "AveragePool", OP(b, "HardSwish", n->output[0]));
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(3, 3));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    n = NODE(b, "AveragePool", n->output[0]);
    mp_ob_attr_ints(b, n, "kernel_shape", INTS(3, 3));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    mp_ob_attr_int(b, n, "count_include_pad", 1);
    const char *a = n->output[0];
    n = NODE(b, "Conv", OP(b, "GlobalAveragePool", a), mp_ob_param_uniform(b, "se.weight", 4, (int64_t[]){8, 8, 1, 1}, 1.0f),
             mp_ob_param_uniform(b, "se.bias", 1, (int64_t[]){8}, 1.0f));
    n = NODE(b, "HardSigmoid", n->output[0]);
    mp_ob_attr_float(b, n, "alpha", 1.0f / 6);
    const char *e = OP(b, "Mul", a, n->output[0]);
    const char *pos = mp_ob_param_uniform(b, "pos", 4, (int64_t[]){1, 8, 1, 1}, 1.0f);
    e = OP(b, "Add", e, OP(b, "Expand", pos, mp_ob_const_i64(b, 1, 4, (int64_t[]){1, 8, 4, 4})));
    /* the variadic sums whose intermediates the CPU keeps in fp32, and reductions over some axes */
    e = OP(b, "Mean", OP(b, "Sum", e, a, pos), a);
    e = OP(b, "Mean", e, n->output[0], pos);
    Onnx__NodeProto *r = NODE(b, "ReduceMean", e);
    mp_ob_attr_ints(b, r, "axes", INTS(2, 3));
    e = OP(b, "Sub", e, r->output[0]);
    r = NODE(b, "ReduceSum", e, mp_ob_const_i64(b, 1, 1, (int64_t[]){-1}));
    e = OP(b, "Add", e, OP(b, "Mul", r->output[0], mp_ob_const_f32(b, 0.25f)));
    e = OP(b, "Slice", e, mp_ob_const_i64(b, 1, 2, (int64_t[]){0, 1}), mp_ob_const_i64(b, 1, 2, (int64_t[]){6, 4}),
           mp_ob_const_i64(b, 1, 2, (int64_t[]){1, 3}), mp_ob_const_i64(b, 1, 2, (int64_t[]){1, 2}));
    r = NODE(b, "ReduceMean", e); /* over 6 channels: 1 / 6 is inexact */
    mp_ob_attr_ints(b, r, "axes", INTS(1));
    e = OP(b, "Sub", e, r->output[0]);
    n = NODE(b, "Flatten", e);
    mp_ob_attr_int(b, n, "axis", 1);
    const char *train = cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){1}), MP_BOOL);
    const char *d = OP(b, "Dropout", n->output[0], mp_ob_const_f32(b, 0.3f), train);
    n = NODE(b, "Gemm", d, mp_ob_param_uniform(b, "fc.weight", 2, (int64_t[]){10, 6 * 4 * 2}, 0.3f),
             mp_ob_param_uniform(b, "fc.bias", 1, (int64_t[]){10}, 0.3f));
    mp_ob_attr_int(b, n, "transB", 1);
    mp_ob_output(b, n->output[0], "logits", MP_FLOAT, 2, (const char *[]){"batch", "10"});
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

/* Det, MatMulInteger and ConvInteger, each result times a parameter (so the step trains it): Det of 16 3x3
 * and 9 4x4 matrices of the data, three of them with a zero first column (det 0 at the first pivot), and in
 * float64, whose bits below float32's come out in two more float32 pieces (d - float(d) scaled by 2^24, and
 * what that drops scaled by 2^48), each summed times a parameter, whose gradient is then the determinant's
 * bits; MatMulInteger int8 x uint8 (data wrapped as the CPU stores it) with zero points per row of A and per
 * column of B, uint8 x int8 with scalar ones, and int8 x int8 with none; ConvInteger uint8 x int8 with pads
 * 1, strides 2, X's zero point a scalar and W's per output channel, and int8 x int8 with groups 2, dilations
 * 2 and no zero points, each adding mean((s v)^2). */
static void write_integer_forms(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 4, (const char *[]){"2", "2", "6", "6"}), *acc = NULL;
    /* Det: each determinant d times a parameter p, summed, so p's gradient is d itself */
    const char *m3 = OP(b, "Reshape", OP(b, "Mul", x, mp_ob_const_f32(b, 3.0f)), mp_ob_const_i64(b, 1, 3, (int64_t[]){16, 3, 3}));
    add_sum(b, &acc, OP(b, "Mul", OP(b, "Det", m3), mp_ob_param_uniform(b, "pd3", 1, (int64_t[]){16}, 1.0f)));
    int64_t cols[36];
    for (int i = 0; i < 36; i++) cols[i] = i >= 12 || i % 4; /* matrices 0-2: column 0 zeroed */
    const char *m4 = OP(b, "Mul", OP(b, "Reshape", OP(b, "Mul", x, mp_ob_const_f32(b, 2.0f)), mp_ob_const_i64(b, 1, 3, (int64_t[]){9, 4, 4})),
                        const_ratios(b, 36, cols, 1.0f, 3, (int64_t[]){9, 1, 4}));
    add_sum(b, &acc, OP(b, "Mul", OP(b, "Det", m4), mp_ob_param_uniform(b, "pd4", 1, (int64_t[]){9}, 1.0f)));
    const char *d64 = OP(b, "Det", cast(b, m4, MP_DOUBLE)), *part = d64;
    for (int k = 1; k <= 2; k++) { /* the bits float32 drops, scaled up */
        part = OP(b, "Sub", part, cast(b, cast(b, part, MP_FLOAT), MP_DOUBLE));
        const char *up = OP(b, "Mul", cast(b, part, MP_FLOAT), mp_ob_const_f32(b, k == 1 ? 0x1p24f : 0x1p48f));
        add_sum(b, &acc, OP(b, "Mul", up, mp_ob_param_uniform(b, k == 1 ? "pd64a" : "pd64b", 1, (int64_t[]){9}, 1.0f)));
    }
    /* MatMulInteger */
    const char *a12 = OP(b, "Reshape", OP(b, "Mul", x, mp_ob_const_f32(b, 100.0f)), mp_ob_const_i64(b, 1, 2, (int64_t[]){12, 12}));
    const char *b12 = OP(b, "Reshape", OP(b, "Mul", OP(b, "Transpose", x), mp_ob_const_f32(b, 150.0f)), mp_ob_const_i64(b, 1, 2, (int64_t[]){12, 12}));
    int64_t zr[12], zc[12];
    for (int i = 0; i < 12; i++) zr[i] = (i * 37) % 41 - 20, zc[i] = (i * 53) % 200;
    const char *mm[3] = {
        OP(b, "MatMulInteger", cast(b, a12, MP_INT8), cast(b, b12, MP_UINT8), cast(b, mp_ob_const_i64(b, 1, 12, zr), MP_INT8),
           cast(b, mp_ob_const_i64(b, 1, 12, zc), MP_UINT8)),
        OP(b, "MatMulInteger", cast(b, b12, MP_UINT8), cast(b, a12, MP_INT8), cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){131}), MP_UINT8),
           cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){-7}), MP_INT8)),
        OP(b, "MatMulInteger", cast(b, a12, MP_INT8), cast(b, b12, MP_INT8))};
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "pm%d", k);
        add_scaled(b, &acc, OP(b, "Mul", cast(b, mm[k], MP_FLOAT), mp_ob_param_uniform(b, name, 1, (int64_t[]){12}, 1.0f)), 1e-5f);
    }
    /* ConvInteger */
    int64_t w72[72], zw[4] = {3, -5, 0, 17};
    for (int i = 0; i < 72; i++) w72[i] = (i * 29) % 255 - 127;
    const char *w = cast(b, OP(b, "Reshape", const_i64s(b, 72, w72), mp_ob_const_i64(b, 1, 4, (int64_t[]){4, 2, 3, 3})), MP_INT8);
    const char *x100 = OP(b, "Mul", x, mp_ob_const_f32(b, 100.0f));
    Onnx__NodeProto *n = NODE(b, "ConvInteger", cast(b, x100, MP_UINT8), w, cast(b, mp_ob_const_i64(b, 0, 1, (int64_t[]){128}), MP_UINT8),
                              cast(b, mp_ob_const_i64(b, 1, 4, zw), MP_INT8));
    mp_ob_attr_ints(b, n, "pads", INTS(1, 1, 1, 1));
    mp_ob_attr_ints(b, n, "strides", INTS(2, 2));
    add_scaled(b, &acc, OP(b, "Mul", cast(b, n->output[0], MP_FLOAT), mp_ob_param_uniform(b, "pc0", 3, (int64_t[]){4, 1, 1}, 1.0f)), 1e-5f);
    const char *w2 = cast(b, OP(b, "Reshape", const_i64s(b, 8, w72 + 5), mp_ob_const_i64(b, 1, 4, (int64_t[]){2, 1, 2, 2})), MP_INT8);
    n = NODE(b, "ConvInteger", cast(b, x100, MP_INT8), w2);
    mp_ob_attr_int(b, n, "group", 2);
    mp_ob_attr_ints(b, n, "dilations", INTS(2, 2));
    add_scaled(b, &acc, OP(b, "Mul", cast(b, n->output[0], MP_FLOAT), mp_ob_param_uniform(b, "pc1", 3, (int64_t[]){2, 1, 1}, 1.0f)), 1e-4f);
    mp_ob_output(b, acc, "total", MP_FLOAT, 0, NULL);
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

/* Exact arithmetic (integers; Det's elimination in the CPU's order) must give the CPU's bits: the losses,
 * parameters and gradients after three SGD steps compared bit for bit (Det's parameters' gradients are the
 * determinants). */
START_TEST(integer_forms_match_cpu)
{
    char path[128], out[128];
    snprintf(path, sizeof path, "%s/integer_forms.onnx", dir);
    snprintf(out, sizeof out, "%s/integer_forms", dir);
    write_integer_forms(path);
    const model m = {path, {"--optimizer", "sgd"}, 1};
    check_on_host(&m, out, "Det/MatMulInteger/ConvInteger forms", 0);
}
END_TEST

/* Gemm -> Tanh -> Gemm to 10 logits: Tanh has no 16-bit lowering (refusal_names_the_op). */
static void write_tanh_mlp(const char *path)
{
    mp_ob *b = mp_ob_new("main_graph");
    const char *x = mp_ob_input(b, "input", MP_FLOAT, 2, (const char *[]){"batch", "16"});
    Onnx__NodeProto *n = NODE(b, "Gemm", x, mp_ob_param_uniform(b, "fc1.weight", 2, (int64_t[]){16, 16}, 0.25f));
    n = NODE(b, "Gemm", OP(b, "Tanh", n->output[0]), mp_ob_param_uniform(b, "fc2.weight", 2, (int64_t[]){16, 10}, 0.25f));
    mp_ob_output(b, n->output[0], "logits", MP_FLOAT, 2, (const char *[]){"batch", "10"});
    mp_err err = {0};
    ck_assert_msg(mp_ob_write(b, path, &err) > 0, "%s: %s", path, err.msg);
    mp_ob_free(b);
}

START_TEST(folded_param_trains)
{
    char path[128], out[128], f[160];
    snprintf(path, sizeof path, "%s/folded_param.onnx", dir);
    snprintf(out, sizeof out, "%s/folded", dir);
    write_folded_param(path);
    const model m = {path, {"--batch", "4", "--optimizer", "sgd"}, 1};
    check_on_host(&m, out, "Reshape of a folded parameter", FORMS_RTOL);
    snprintf(f, sizeof f, "%s/cpu.json", out);
    char *cpu = slurp(f, NULL);
    double cl[3];
    ck_assert_int_eq(losses(cpu, cl, 3), 3);
    /* each step must move the loss by far more than the tolerance, or a frozen copy would pass */
    for (int s = 1; s < 3; s++)
        ck_assert_msg(fabs(cl[s] - cl[s - 1]) > 100 * FORMS_RTOL * fabs(cl[s - 1]), "the CPU executor's losses barely change: %.9g %.9g %.9g",
                      cl[0], cl[1], cl[2]);
    free(cpu);
}
END_TEST

/* Every model's step lowers; with nvcc, each plan.cu compiles and links
 * against the GPU runtime, compiled once (each plan.cu is only tables). */
START_TEST(every_op_lowers)
{
    char cmd[2048];
    bool nvcc = *MEMPLAN_NVCC && !access(MEMPLAN_NVCC, X_OK);
    if (nvcc) {
        static const char *const srcs[] = {"memplan_cuda", "mp_cu_cudnn"};
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd, "%s -O2 -arch=sm_90 -Werror all-warnings -I%s -c %s/%s.cu -o %s/%s.o", MEMPLAN_NVCC,
                     CUDA_DIR, CUDA_DIR, srcs[k], dir, srcs[k]);
            ck_assert_msg(sh(cmd) == 0, "failed: %s", cmd);
        }
    } else {
        printf("  nvcc not found (configure with the CUDA toolkit): plan.cu is written, not compiled\n");
    }
    int done = 0;
    for (int i = 0; i < NMODELS; i++) {
        const model *m = &models[i];
        if (access(m->path, R_OK)) {
            printf("  skipped: %s is absent\n", m->path);
            continue;
        }
        char out[128], f[160];
        snprintf(out, sizeof out, "%s/m%d", dir, i);
        run_result r = plan(m, out);
        snprintf(f, sizeof f, "%s/plan.cu", out);
        ck_assert_msg(r.status == 0 && !access(f, R_OK), "%s: exit %d: %s", m->path, r.status, r.err);
        run_free(&r);
        if (nvcc) {
            snprintf(cmd, sizeof cmd,
                     "%s -O2 -arch=sm_90 -Werror all-warnings -I%s -o %s/plan %s/plan.cu %s/memplan_cuda.o %s/mp_cu_cudnn.o -lcublas -lcudnn",
                     MEMPLAN_NVCC, CUDA_DIR, out, out, dir, dir);
            ck_assert_msg(sh(cmd) == 0, "%s: failed: %s", m->path, cmd);
            snprintf(f, sizeof f, "%s/plan", out);
            ck_assert_int_eq(access(f, X_OK), 0);
        }
        done++;
    }
    printf("  plan.cu written%s for %d models: every op of their steps has a CUDA kernel\n",
           nvcc ? ", compiled and linked with nvcc (not run: no GPU here)," : "", done);
    ck_assert_int_gt(done, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("plan_cuda");
    TCase *tc = tcase_create("plan_cuda");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, refusal_names_the_op);
    tcase_add_test(tc, host_runtime_matches_cpu);
    tcase_add_test(tc, op_forms_match_cpu);
    tcase_add_test(tc, grid_forms_match_cpu);
    tcase_add_test(tc, int_forms_match_cpu);
    tcase_add_test(tc, integer_forms_match_cpu);
    tcase_add_test(tc, folded_param_trains);
    tcase_add_test(tc, every_op_lowers);
    suite_add_tcase(s, tc);
    TCase *half = tcase_create("half"); /* CK_RUN_CASE=half runs it alone */
    tcase_add_checked_fixture(half, setup, teardown);
    tcase_set_timeout(half, 600);
    tcase_add_test(half, half_precision_matches_cpu);
    suite_add_tcase(s, half);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
