/* test_plan_cuda.c - the CUDA codegen (codegen/plan_cu.c) and runtime
 * (runtime/cuda/), without a GPU:
 *   1. every op of the training steps of the project's models, the third-party
 *      MNIST model and the torch exports (training and forward-only) lowers:
 *      `memplan -o` writes plan.cu for each;
 *   2. the small models' plan.cu, linked with the host runtime
 *      (runtime/cuda/mp_cu_host.c: the GPU kernels' element functions run on
 *      the CPU, arena poisoned with NaN), gives the CPU executor's losses
 *      (memplan-run) over three steps, rematerialized plans included, run
 *      plainly and with the GPU's long sums and rows split into blocks
 *      (MP_CU_HOST_BLOCKS=1) as the GPU splits them; under
 *      the sanitizer build it runs with ASan, so index math that strays
 *      outside a tensor fails here;
 *   3. when nvcc is present, each plan.cu of step 1 compiles and links against
 *      the GPU runtime (compiled once: memplan_cuda.cu, mp_cu_cudnn.cu; cuBLAS,
 *      cuDNN), with every nvcc warning an error. */
#include <check.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_memplan.h"

#define CUDA_DIR MEMPLAN_SOURCE "/runtime/cuda"
#define TORCH MEMPLAN_SHARED "/models/torch/"
#define LOSS_RTOL 1e-5 /* fp32 sums in another order (Conv: direct vs im2col + BLAS) */

typedef struct model {
    const char *path, *args[8];
    int host;  /* 1: small enough to run on the host runtime; 2: too, but not under the sanitizers (minutes there) */
} model;

static const model models[] = {
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8"}, 1},
    {MEMPLAN_SOURCE "/models/mlp.onnx", {"--batch", "8", "--optimizer", "adafactor"}, 1},
    /* recomputes; SGD, whose step (unlike Adam's) scales with the gradient, so a wrong scale shows */
    {MEMPLAN_SOURCE "/models/cnn_bn.onnx", {"--batch", "16", "--budget", "80%", "--optimizer", "sgd"}, 1},
    /* sums of batch x sequence = 1024 terms: the GPU's block-per-output REDUCE */
    {MEMPLAN_SOURCE "/models/gpt_decoder.onnx", {"--batch", "8", "--dim", "sequence=128", "--budget", "70%"}, 1},
    {MEMPLAN_SHARED "/models/third-party/mnist/model.onnx", {"--optimizer", "momentum"}, 1},
    /* Paddle2ONNX weights as Constants; Clip with constant bounds, HardSigmoid/HardSwish */
    {MEMPLAN_SHARED "/models/third-party/ppocr-v4/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     {"--batch", "2", "--dim", "p2o.DynamicDimension.1=48", "--dim", "p2o.DynamicDimension.2=192", "--constants-as-params"},
     2},
    {MEMPLAN_SOURCE "/models/gpt2_124m.onnx", {"--batch", "1", "--dim", "sequence=512"}, 0}, /* masks too big to fold */
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

/* A bf16 plan (the CUDA runtime has no bf16 kernels): one line naming the op and node, exit 2, no plan.cu. */
START_TEST(refusal_names_the_op)
{
    char out[128], f[160];
    snprintf(out, sizeof out, "%s/refused", dir);
    run_result r = RUN(MEMPLAN_SOURCE "/models/mlp.onnx", "--batch", "4", "--budget", "1GB", "--precision", "bf16", "-o", out);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "plan.cu: op Gemm (node '") && strstr(r.err, "no bfloat16 tensors"), "%s", r.err);
    snprintf(f, sizeof f, "%s/plan.cu", out);
    ck_assert_int_ne(access(f, F_OK), 0);
    snprintf(f, sizeof f, "%s/plan.json", out);
    ck_assert_int_eq(access(f, R_OK), 0); /* plan.json stays: it runs on the CPU */
    run_free(&r);
}
END_TEST

/* The host runtime runs plan.cu's tables through the GPU kernels' element
 * functions: the losses must be the CPU executor's. */
START_TEST(host_runtime_matches_cpu)
{
    char run_bin[512];
    snprintf(run_bin, sizeof run_bin, "%s", MEMPLAN_BIN);
    snprintf(run_bin + strlen(run_bin), sizeof run_bin - strlen(run_bin), "-run"); /* memplan-run beside memplan */
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
        char out[128], cmd[2048], f[160];
        snprintf(out, sizeof out, "%s/h%d", dir, i);
        run_result r = plan(m, out);
        ck_assert_msg(r.status == 0, "%s: %s", m->path, r.err);
        run_free(&r);
        snprintf(cmd, sizeof cmd, "%s -O1 %s -I%s -o %s/plan-host -x c %s/plan.cu -x none %s -lm", MEMPLAN_CC,
                 MEMPLAN_CUDA_HOST_FLAGS, CUDA_DIR, out, out, MEMPLAN_CUDA_HOST_LIB);
        ck_assert_msg(sh(cmd) == 0, "failed: %s", cmd);
        snprintf(cmd, sizeof cmd, "%s %s --steps 3 --seed 5 --json --random-weights > %s/cpu.json", run_bin, out, out);
        snprintf(f, sizeof f, "%s/cpu.json", out);
        char *cpu = run_json(cmd, f);
        double hl[3], cl[3];
        ck_assert_int_eq(losses(cpu, cl, 3), 3);
        /* as the host runs it, then split into blocks as the GPU runs its long sums and rows */
        for (int blocks = 0; blocks < 2; blocks++) {
            snprintf(cmd, sizeof cmd, "MP_CU_HOST_BLOCKS=%d %s/plan-host --steps 3 --seed 5 --json > %s/host.json", blocks, out, out);
            snprintf(f, sizeof f, "%s/host.json", out);
            char *host = run_json(cmd, f);
            ck_assert_int_eq(losses(host, hl, 3), 3);
            for (int s = 0; s < 3; s++) {
                double rel = fabs(hl[s] - cl[s]) / fmax(fabs(cl[s]), 1e-30);
                ck_assert_msg(isfinite(hl[s]) && rel <= LOSS_RTOL, "%s%s step %d: host runtime loss %.9g, CPU executor %.9g",
                              m->path, blocks ? " (GPU blocks)" : "", s + 1, hl[s], cl[s]);
            }
            free(host);
        }
        char how[128] = "";
        for (int k = 0; k < 8 && m->args[k]; k++)
            snprintf(how + strlen(how), sizeof how - strlen(how), " %s", m->args[k]);
        printf("  %s%s: losses %.6g %.6g %.6g on the host runtime (threads and blocks) and on the CPU executor (relative <= %g)\n",
               basename((char *)m->path), how, hl[0], hl[1], hl[2], LOSS_RTOL);
        free(cpu);
        checked++;
    }
    ck_assert_int_gt(checked, 0);
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
    tcase_add_test(tc, every_op_lowers);
    suite_add_tcase(s, tc);
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
