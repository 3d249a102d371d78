/* test_cpu_forward.c - the CPU reference executor against ONNX's own expected outputs.
 *
 *   test_cpu_forward [FILTER]        FILTER: substring of case names ("node/test_conv")
 *   MP_CPU_VERBOSE=1                 prints why each failing (=2: also each skipped) case did
 *   MP_CPU_MAX_FLOPS=N               skip cases estimated above N FLOPs (default below)
 *   MP_CPU_NOFORK=1                  run cases in-process (for a debugger)
 *
 * First a few checks of the executor itself (peak bytes, planned arenas and
 * their overlap check, Dropout's seeded masks, bit-exact reruns, rounding to
 * float16 / bfloat16 and a widened bf16 node). Then every
 * case of ../shared/onnx-backend/{node,pytorch-converted,pytorch-operator,
 * simple} whose ops all have kernels: import, bind input_K.pb (as data and,
 * when small, as known contents so data-dependent shapes infer), infer, run
 * every node through its kernel, compare every output with output_K.pb at
 * ONNX's default tolerance (rtol 1e-3, atol 1e-7). Then the light models
 * (input arange(n)/n) and the third-party models that ship data sets (mnist,
 * super_resolution). Each case runs in a child process. Exits non-zero when
 * an executor check or a fully covered case fails.
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"
#include "ir/ops.h"
#include "runtime/exec.h"
#include "test_files.h" /* defines: read_file, exists, read_pb */

#define RTOL 1e-3
#define ATOL 1e-7
#define DEFAULT_MAX_FLOPS 5e10 /* every light model; the whole run stays near a minute on two cores */
/* a guard against a hung case, not a speed test: light_vgg19's fp32 and float64 runs took over 60 s under
 * ASan on a loaded 2-core machine */
#define CASE_TIMEOUT_S 300
#define MAX_OPS 64
#define MAX_TABLE 512

static bool verbose, very_verbose;
static double max_flops = DEFAULT_MAX_FLOPS;
static int unit_failures;

#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond)) {                                       \
            printf("executor check failed: " __VA_ARGS__);   \
            printf(" (%s:%d)\n", __FILE__, __LINE__);        \
            unit_failures++;                                 \
        }                                                    \
    } while (0)

/* ---- executor checks on hand-built graphs --------------------------------- */

static mp_graph *new_graph(void)
{
    mp_graph *g = mp_graph_new(NULL);
    g->opsets = mp_arena_alloc(g->arena, sizeof *g->opsets);
    g->opsets[0] = (mp_opset){"", 17};
    g->nopsets = 1;
    return g;
}

static int32_t tensor_val(mp_graph *g, const char *name, mp_dtype t, int64_t n)
{
    int32_t id = mp_graph_value(g, name);
    mp_dim d = mp_dim_of(n);
    mp_value_set(g, id, t, n < 0 ? 0 : 1, &d);
    return id;
}

static void set_outputs(mp_graph *g, int n, const int32_t *ids)
{
    g->outputs = mp_arena_alloc(g->arena, (size_t)n * sizeof *g->outputs);
    memcpy(g->outputs, ids, (size_t)n * sizeof *ids);
    g->noutputs = n;
}

/* x[1000] -> Relu -> a -> Relu -> b -> Relu -> c */
static void check_peak_and_plans(void)
{
    mp_graph *g = new_graph();
    int32_t x = tensor_val(g, "x", MP_FLOAT, 1000), a = mp_graph_value(g, "a"), b = mp_graph_value(g, "b"),
            c = mp_graph_value(g, "c");
    mp_graph_add_node(g, "r1", "Relu", "", 1, &x, 1, &a);
    mp_graph_add_node(g, "r2", "Relu", "", 1, &a, 1, &b);
    mp_graph_add_node(g, "r3", "Relu", "", 1, &b, 1, &c);
    set_outputs(g, 1, &c);
    mp_err err = {""};
    if (mp_graph_link(g, &err) || mp_infer(g, &err)) {
        CHECK(0, "relu chain does not infer: %s", err.msg);
        mp_graph_free(g);
        return;
    }
    float xs[1000];
    int64_t n1000 = 1000;
    for (int i = 0; i < 1000; i++) xs[i] = (float)(i - 500);
    mp_tensor xt = {MP_FLOAT, 1, &n1000, 1000, xs};

    mp_exec *e = mp_exec_new(g, NULL, &err);
    CHECK(e && !mp_exec_bind(e, x, &xt, &err) && !mp_exec_run(e, &err), "unplanned run: %s", err.msg);
    if (e) {
        const mp_tensor *ct = mp_exec_value(e, c);
        CHECK(ct && ((float *)ct->data)[0] == 0 && ((float *)ct->data)[999] == 499, "relu values");
        CHECK(mp_exec_get_stats(e)->peak_bytes == 8000, "unplanned peak %lld, want 8000 (two live 4000-byte values)",
              (long long)mp_exec_get_stats(e)->peak_bytes);
        CHECK(mp_exec_value(e, a) == NULL, "'a' should be freed after its last use");
        mp_exec_free(e);
    }

    /* planned: c reuses a's bytes, which are dead once r2 has run */
    int64_t *off = malloc((size_t)g->nvalues * sizeof *off);
    for (int32_t i = 0; i < g->nvalues; i++) off[i] = -1;
    off[a] = 0, off[b] = 4000, off[c] = 0;
    char *arena = malloc(8000);
    mp_exec_opts o = {.offsets = off, .arena = arena, .arena_bytes = 8000, .check_overlap = true};
    e = mp_exec_new(g, &o, &err);
    CHECK(e && !mp_exec_bind(e, x, &xt, &err) && !mp_exec_run(e, &err), "planned run: %s", err.msg);
    if (e) {
        const mp_tensor *ct = mp_exec_value(e, c);
        CHECK(ct && ct->data == arena && ((float *)ct->data)[999] == 499, "planned output lives at its offset");
        CHECK(mp_exec_get_stats(e)->peak_bytes == 8000, "planned peak %lld", (long long)mp_exec_get_stats(e)->peak_bytes);
        CHECK(mp_exec_get_stats(e)->arena_used == 8000, "planned arena use %lld", (long long)mp_exec_get_stats(e)->arena_used);
        mp_exec_free(e);
    }
    off[b] = 2000; /* b overlaps a while both are live */
    e = mp_exec_new(g, &o, &err);
    int rc = e && !mp_exec_bind(e, x, &xt, &err) ? mp_exec_run(e, &err) : -1;
    CHECK(rc == -1 && strstr(err.msg, "overlaps"), "an overlapping plan must fail, got: %s", err.msg);
    mp_exec_free(e);
    off[b] = 4000, off[c] = 6000; /* c runs past the arena */
    e = mp_exec_new(g, &o, &err);
    CHECK(!e && strstr(err.msg, "outside the arena"), "a plan past the arena must fail, got: %s", err.msg);
    mp_exec_free(e);

    e = mp_exec_new(g, NULL, &err);
    CHECK(e && mp_exec_run(e, &err) == -1 && strstr(err.msg, "no data"), "an unbound input must fail, got: %s", err.msg);
    mp_exec_free(e);
    free(arena);
    free(off);
    mp_graph_free(g);
}

/* ---- 16-bit floats: rounding (runtime/cpu_half.c) and widened nodes ------- */

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* fp32 bit patterns and their roundings, worked out by hand: bf16 keeps the
 * top 16 bits (7 mantissa bits), fp16 10 mantissa bits, exponent bias 15,
 * subnormals k * 2^-24, largest finite 65504; ties go to the even neighbour. */
static const struct { uint32_t f32; uint16_t bf16, f16; const char *what; } half_cases[] = {
    {0x3f800000, 0x3f80, 0x3c00, "1"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x3f808000, 0x3f80, 0x3c04, "1 + 2^-8: bf16 tie, down to even"},
    {0x3f818000, 0x3f82, 0x3c0c, "1 + 3*2^-8: bf16 tie, up to even"},
    {0x3f808001, 0x3f81, 0x3c04, "1 + 2^-8 + 2^-23: bf16 past the tie, up"},
    {0x3f801000, 0x3f80, 0x3c00, "1 + 2^-11: fp16 tie, down to even"},
    {0x3f803000, 0x3f80, 0x3c02, "1 + 3*2^-11: fp16 tie, up to even"},
    {0x477fe000, 0x4780, 0x7bff, "65504, fp16's largest"},
    {0x477fefff, 0x4780, 0x7bff, "just under 65520: fp16 65504"},
    {0x477ff000, 0x4780, 0x7c00, "65520: fp16 tie with 2^16, to inf"},
    {0x49742400, 0x4974, 0x7c00, "1e6: fp16 overflows to inf"},
    {0xc9742400, 0xc974, 0xfc00, "-1e6: fp16 -inf"},
    {0x7f7fffff, 0x7f80, 0x7c00, "fp32's largest: bf16 rounds up to inf"},
    {0x7f7f7fff, 0x7f7f, 0x7c00, "under bf16's last tie: its largest"},
    {0x7f800000, 0x7f80, 0x7c00, "inf"},
    {0xff800000, 0xff80, 0xfc00, "-inf"},
    {0x7f800001, 0x7fc0, 0x7e00, "signaling NaN: quiet NaN, not inf"},
    {0xffffffff, 0xffff, 0xfe00 | 0x3ff, "NaN with every payload bit: stays NaN, no carry"},
    {0x38800000, 0x3880, 0x0400, "2^-14: fp16's least normal"},
    {0x387fe000, 0x3880, 0x0400, "2^-14 - 2^-25: fp16 tie between 0x3ff and 0x400, to even"},
    {0x33800000, 0x3380, 0x0001, "2^-24: fp16's least subnormal"},
    {0x33000000, 0x3300, 0x0000, "2^-25: fp16 tie between 0 and 2^-24, to zero"},
    {0x33400000, 0x3340, 0x0001, "1.5 * 2^-25: fp16 up to 2^-24"},
    {0x33c00000, 0x33c0, 0x0002, "3 * 2^-25: fp16 tie between 1 and 2 subnormal units, to 2"},
    {0xb3800000, 0xb380, 0x8001, "-2^-24"},
    {0x2edbe6ff, 0x2edc, 0x0000, "1e-10: fp16 zero"},
    {0x00008000, 0x0000, 0x0000, "fp32 subnormal on a bf16 tie: down to zero"},
    {0x00018000, 0x0002, 0x0000, "fp32 subnormal on a bf16 tie: up to even"},
};

static void check_half_rounding(void)
{
    for (size_t i = 0; i < sizeof half_cases / sizeof *half_cases; i++) {
        float f = from_bits(half_cases[i].f32);
        uint16_t b = mp_f32_to_bf16(f), h = mp_f32_to_f16(f);
        CHECK(b == half_cases[i].bf16, "bf16(%s) = 0x%04x, want 0x%04x", half_cases[i].what, b, half_cases[i].bf16);
        CHECK(h == half_cases[i].f16, "fp16(%s) = 0x%04x, want 0x%04x", half_cases[i].what, h, half_cases[i].f16);
    }
    /* widening is exact: every 16-bit pattern but NaN rounds back to itself, NaN stays NaN */
    int bad = 0;
    for (uint32_t p = 0; p <= 0xffff; p++) {
        float b = mp_bf16_to_f32((uint16_t)p), h = mp_f16_to_f32((uint16_t)p);
        bad += isnan(b) ? !isnan(mp_bf16_to_f32(mp_f32_to_bf16(b))) : mp_f32_to_bf16(b) != p;
        bad += isnan(h) ? !isnan(mp_f16_to_f32(mp_f32_to_f16(h))) : mp_f32_to_f16(h) != p;
    }
    CHECK(!bad, "%d 16-bit patterns do not survive widening and rounding", bad);
    CHECK(mp_f16_to_f32(0x0001) == 0x1p-24f && mp_f16_to_f32(0x03ff) == 1023 * 0x1p-24f && mp_f16_to_f32(0x7bff) == 65504,
          "fp16 widening of subnormals and the largest finite value");
#ifdef __FLT16_MAX__
    /* fp16 against the compiler's own conversion (libgcc's, round-to-nearest-even),
     * on fp32 patterns spread over the whole range */
    int off = 0;
    for (uint64_t p = 0; p <= 0xffffffffu; p += 65521) {
        float f = from_bits((uint32_t)p);
        _Float16 c = (_Float16)f;
        uint16_t want;
        memcpy(&want, &c, 2);
        uint16_t got = mp_f32_to_f16(f);
        off += isnan(f) ? (got & 0x7c00) != 0x7c00 || !(got & 0x3ff) : got != want;
    }
    CHECK(!off, "%d fp32 values round to fp16 unlike the compiler's conversion", off);
#endif

    /* a bf16 Add runs in fp32 and rounds once: 1 + 2^-8 is a tie (down to 1),
     * 1 + 3*2^-9 rounds up to 1 + 2^-7; the fp32 copies are scratch, not node outputs */
    mp_graph *g = new_graph();
    int32_t a = tensor_val(g, "a", MP_BFLOAT16, 2), b = tensor_val(g, "b", MP_BFLOAT16, 2), y = mp_graph_value(g, "y");
    int32_t in[2] = {a, b};
    mp_graph_add_node(g, "add", "Add", "", 2, in, 1, &y);
    set_outputs(g, 1, &y);
    mp_err err = {""};
    if (mp_graph_link(g, &err) || mp_infer(g, &err)) {
        CHECK(0, "bf16 add does not infer: %s", err.msg);
        mp_graph_free(g);
        return;
    }
    uint16_t av[2] = {0x3f80, 0x3f80}, bv[2] = {0x3b80, 0x3bc0}; /* 1, 1; 2^-8, 3*2^-9 */
    int64_t n2 = 2;
    mp_tensor at = {MP_BFLOAT16, 1, &n2, 2, av}, bt = {MP_BFLOAT16, 1, &n2, 2, bv};
    mp_exec *e = mp_exec_new(g, NULL, &err);
    CHECK(e && !mp_exec_bind(e, a, &at, &err) && !mp_exec_bind(e, b, &bt, &err) && !mp_exec_run(e, &err), "bf16 add: %s", err.msg);
    if (e) {
        const mp_tensor *yt = mp_exec_value(e, y);
        const uint16_t *yv = yt ? yt->data : NULL;
        CHECK(yv && yt->dtype == MP_BFLOAT16 && yv[0] == 0x3f80 && yv[1] == 0x3f81, "bf16 add gives 0x%04x 0x%04x, want 0x3f80 0x3f81",
              yv ? yv[0] : 0, yv ? yv[1] : 0);
        CHECK(mp_exec_get_stats(e)->peak_bytes == 4, "bf16 add peak %lld, want 4 (the bf16 output)", (long long)mp_exec_get_stats(e)->peak_bytes);
        CHECK(mp_exec_get_stats(e)->scratch_peak >= 3 * 8, "bf16 add scratch %lld, want the three fp32 copies",
              (long long)mp_exec_get_stats(e)->scratch_peak);
        mp_exec_free(e);
    }
    mp_graph_free(g);
}

/* y, mask = Dropout(x[4096], 0.25, training) and Y = MatMul(A[64,64], A) */
static void check_dropout_and_reruns(void)
{
    mp_graph *g = new_graph();
    int32_t x = tensor_val(g, "x", MP_FLOAT, 4096), r = tensor_val(g, "ratio", MP_FLOAT, -1), t = tensor_val(g, "train", MP_BOOL, -1);
    g->values[r].konst = mp_tensor_new(g->arena, MP_FLOAT, 0, NULL);
    mp_tensor_set_f64(g->values[r].konst, 0, 0.25);
    g->values[t].konst = mp_tensor_new(g->arena, MP_BOOL, 0, NULL);
    mp_tensor_set_i64(g->values[t].konst, 0, 1);
    int32_t in[3] = {x, r, t}, out[2] = {mp_graph_value(g, "y"), mp_graph_value(g, "mask")};
    mp_graph_add_node(g, "drop", "Dropout", "", 3, in, 2, out);
    int32_t A = mp_graph_value(g, "A"), Y = mp_graph_value(g, "Y"), mm[2] = {A, A};
    mp_dim d2[2] = {mp_dim_of(64), mp_dim_of(64)};
    mp_value_set(g, A, MP_FLOAT, 2, d2);
    mp_graph_add_node(g, "mm", "MatMul", "", 2, mm, 1, &Y);
    int32_t outs[3] = {out[0], out[1], Y};
    set_outputs(g, 3, outs);
    mp_err err = {""};
    if (mp_graph_link(g, &err) || mp_infer(g, &err)) {
        CHECK(0, "dropout graph does not infer: %s", err.msg);
        mp_graph_free(g);
        return;
    }
    static float xs[4096], as[4096];
    int64_t n4096 = 4096, d64[2] = {64, 64};
    for (int i = 0; i < 4096; i++) xs[i] = 1 + (float)i / 4096, as[i] = sinf((float)i);
    mp_tensor xt = {MP_FLOAT, 1, &n4096, 4096, xs}, at = {MP_FLOAT, 2, d64, 4096, as};
    static uint8_t masks[3][4096];
    static float ys[2][4096];
    uint64_t seeds[3] = {1, 1, 2};
    for (int run = 0; run < 3; run++) {
        mp_exec_opts o = {.seed = seeds[run], .poison = true};
        mp_exec *e = mp_exec_new(g, &o, &err);
        if (!e || mp_exec_bind(e, x, &xt, &err) || mp_exec_bind(e, A, &at, &err) || mp_exec_run(e, &err)) {
            CHECK(0, "dropout run: %s", err.msg);
            mp_exec_free(e);
            break;
        }
        const mp_tensor *y = mp_exec_value(e, out[0]), *m = mp_exec_value(e, out[1]), *yy = mp_exec_value(e, Y);
        memcpy(masks[run], m->data, 4096);
        int kept = 0, wrong = 0;
        for (int i = 0; i < 4096; i++) {
            float v = ((float *)y->data)[i];
            kept += masks[run][i];
            if (masks[run][i] ? fabsf(v - xs[i] / 0.75f) > 1e-6f : v != 0) wrong++;
        }
        CHECK(!wrong, "%d dropout outputs disagree with the mask", wrong);
        CHECK(kept > 4096 * 0.72 && kept < 4096 * 0.78, "kept %d of 4096 at ratio 0.25", kept);
        if (run < 2) memcpy(ys[run], yy->data, sizeof ys[run]);
        mp_exec_free(e);
    }
    CHECK(!memcmp(masks[0], masks[1], 4096), "the same seed must give the same mask");
    CHECK(memcmp(masks[0], masks[2], 4096), "another seed must give another mask");
    CHECK(!memcmp(ys[0], ys[1], sizeof ys[0]), "MatMul must give the same bits every run");
    mp_graph_free(g);
}

/* ---- files --------------------------------------------------------------------- */


static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char **list_dir(const char *dir, const char *prefix, int *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) return NULL;
    int cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        if (*n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

/* ---- one case ---------------------------------------------------------------------- */

/* R_NA: the float64 rerun does not apply (some value stays float32, e.g. a Constant). */
typedef enum { R_PASS, R_FAIL, R_UNSUPPORTED, R_INFER, R_BIG, R_NA, R_NCODES } result_code;
static const char *const code_names[R_NCODES] = {"passed", "failed", "unsupported variant", "inference failed", "too big", "n/a"};

typedef struct case_result {
    result_code code;
    int64_t peak;
    double flops, seconds;
    int folded_mismatch;
    char msg[600];
    result_code f64;          /* the rerun with float32 inputs as float64 */
    char f64_msg[300];
} case_result;

typedef struct case_data {
    const char *model;
    const char *in, *out;     /* <in>K.pb, <out>K.pb; in NULL: light model input arange(n)/n */
    bool rng;                 /* expected outputs drawn with numpy's RNG: check the structure only */
    bool squeezed;            /* data sets that drop the model's 1-dims (cONNXr's 224x224 for 1x1x224x224) */
} case_data;

/* Rough cost: 2 FLOPs per multiply-add of Conv/ConvTranspose/Gemm/MatMul/Einsum. */
static double estimate_flops(const mp_graph *g)
{
    double f = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        const mp_value *y = n->nout > 0 && n->out[0] >= 0 ? &g->values[n->out[0]] : NULL;
        const mp_value *a = n->nin > 0 && n->in[0] >= 0 ? &g->values[n->in[0]] : NULL;
        const mp_value *w = n->nin > 1 && n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;
        double ny = y ? (double)mp_value_numel(y) : 0, na = a ? (double)mp_value_numel(a) : 0, nw = w ? (double)mp_value_numel(w) : 0;
        if (!strcmp(n->op_type, "Conv") && w && w->rank > 0 && w->dims[0].v > 0) f += 2 * ny * nw / (double)w->dims[0].v;
        else if (!strcmp(n->op_type, "ConvTranspose") && w && w->rank > 0 && w->dims[0].v > 0) f += 2 * na * nw / (double)w->dims[0].v;
        else if ((!strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm")) && a && a->rank > 0) {
            int64_t kk = a->dims[a->rank - 1].v;
            if (!strcmp(n->op_type, "Gemm") && mp_attr_int(n, "transA", 0) && a->rank == 2) kk = a->dims[0].v;
            f += 2 * ny * (double)kk;
        } else if (!strcmp(n->op_type, "Einsum")) {
            f += 2 * ny * (na > 1 ? na : 1);
        } else {
            f += ny;
        }
    }
    return f;
}

static bool close_enough(double got, double want)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= ATOL + RTOL * fabs(want);
}

/* Dims without the 1s, for data sets that squeeze them. */
static int squeeze(const mp_tensor *t, int64_t *d)
{
    int n = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != 1) d[n++] = t->dims[i];
    return n;
}

static int compare(const mp_graph *g, int32_t id, const mp_tensor *got, const mp_tensor *want, const case_data *cd, mp_err *err)
{
    const char *name = g->values[id].name;
    bool rng = cd->rng;
    if (got->dtype != want->dtype && !(got->dtype == MP_DOUBLE && want->dtype == MP_FLOAT)) return mp_fail(err, "output '%s': dtype %s, expected %s", name, mp_dtype_name(got->dtype), mp_dtype_name(want->dtype));
    int64_t gd[MP_MAX_RANK], wd[MP_MAX_RANK];
    int gr = cd->squeezed ? squeeze(got, gd) : got->rank, wr = cd->squeezed ? squeeze(want, wd) : want->rank;
    if (!cd->squeezed) memcpy(gd, got->dims, (size_t)gr * 8), memcpy(wd, want->dims, (size_t)wr * 8);
    bool same = gr == wr;
    for (int i = 0; same && i < gr; i++) same = gd[i] == wd[i];
    if (!same || got->numel != want->numel) return mp_fail(err, "output '%s': shape differs from the expected", name);
    if (!want->data && want->numel) return mp_fail(err, "output '%s': expected tensor has no data", name);
    if (rng && want->dtype == MP_BOOL) return 0; /* a mask drawn by another RNG */
    bool flt = mp_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < want->numel; i++) {
        if (flt) {
            double a = mp_tensor_get_f64(got, i), b = mp_tensor_get_f64(want, i);
            if (rng && (a == 0 || b == 0)) continue; /* dropped here or there */
            if (!close_enough(a, b))
                return mp_fail(err, "output '%s' element %lld: got %.9g, expected %.9g", name, (long long)i, a, b);
        } else if (mp_tensor_get_i64(got, i) != mp_tensor_get_i64(want, i)) {
            return mp_fail(err, "output '%s' element %lld: got %lld, expected %lld", name, (long long)i,
                           (long long)mp_tensor_get_i64(got, i), (long long)mp_tensor_get_i64(want, i));
        }
    }
    return 0;
}

/* float32 -> float64 copy. */
static mp_tensor *widen(mp_arena *a, const mp_tensor *t)
{
    mp_tensor *d = mp_tensor_new(a, MP_DOUBLE, t->rank, t->dims);
    for (int64_t i = 0; i < t->numel; i++) ((double *)d->data)[i] = ((const float *)t->data)[i];
    return d;
}

/* Imports nothing itself: m is fresh. f64: float32 inputs are bound as
 * float64, and the case applies only if no value is left in float32. */
static void run_case(mp_model *m, const case_data *cd, case_result *res, bool f64)
{
    mp_graph *g = m->graph;
    mp_err err = {""};
    mp_tensor *inputs[256] = {0};
    int32_t ids[256];
    int nin = 0;
    /* 1. bind input data: shapes, and known contents when small */
    for (int32_t k = 0; k < g->ninputs && nin < 256; k++) {
        int32_t id = g->inputs[k];
        mp_value *v = &g->values[id];
        mp_tensor *t = NULL;
        if (cd->in) {
            char path[2600];
            snprintf(path, sizeof path, "%s%d.pb", cd->in, k);
            if (!exists(path)) break;
            if (v->kind != MP_KIND_TENSOR) {
                res->code = R_UNSUPPORTED;
                snprintf(res->msg, sizeof res->msg, "input '%s' is not a tensor", v->name);
                return;
            }
            if (!(t = read_pb(g->arena, path, &err))) {
                res->code = R_FAIL;
                snprintf(res->msg, sizeof res->msg, "%s", err.msg);
                return;
            }
        } else { /* light model: arange(n)/n in the declared shape */
            int64_t dims[MP_MAX_RANK];
            for (int i = 0; i < v->rank; i++) dims[i] = v->dims[i].v;
            if (!mp_value_shape_known(v) || v->dtype != MP_FLOAT) continue;
            t = mp_tensor_new(g->arena, MP_FLOAT, v->rank, dims);
            for (int64_t i = 0; i < t->numel; i++) ((float *)t->data)[i] = (float)((double)i / (double)t->numel);
        }
        if (f64 && t->dtype == MP_FLOAT) t = widen(g->arena, t);
        if (cd->squeezed && t->rank != v->rank && v->rank >= 0) { /* the model's dims, symbols as 1 */
            int64_t *dims = mp_arena_alloc(g->arena, (size_t)(v->rank ? v->rank : 1) * sizeof *dims), n = 1;
            for (int i = 0; i < v->rank; i++) n *= dims[i] = v->dims[i].v >= 0 ? v->dims[i].v : 1;
            if (n == t->numel) t->dims = dims, t->rank = v->rank;
        }
        mp_dim d[MP_MAX_RANK];
        for (int i = 0; i < t->rank; i++) d[i] = mp_dim_of(t->dims[i]);
        mp_value_set(g, id, t->dtype, t->rank, d);
        if (t->numel <= MP_FOLD_MAX_ELEMS) v->konst = t;
        inputs[nin] = t;
        ids[nin++] = id;
    }
    /* 2. infer */
    if (mp_infer(g, &err)) {
        res->code = R_INFER;
        snprintf(res->msg, sizeof res->msg, "%s", err.msg);
        return;
    }
    for (int32_t i = 0; f64 && i < g->nvalues; i++)
        if (g->values[i].dtype == MP_FLOAT && g->values[i].kind == MP_KIND_TENSOR) {
            res->code = R_NA;
            snprintf(res->msg, sizeof res->msg, "'%s' stays float32", g->values[i].name);
            return;
        }
    res->flops = estimate_flops(g);
    if (res->flops > max_flops) {
        res->code = R_BIG;
        snprintf(res->msg, sizeof res->msg, "about %.2g FLOPs (limit %.2g)", res->flops, max_flops);
        return;
    }
    /* 3. run */
    mp_exec_opts o = {.seed = 42, .check_folded = true, .poison = true};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mp_exec *e = mp_exec_new(g, &o, &err);
    int rc = e ? 0 : -1;
    for (int i = 0; i < nin && !rc; i++) rc = mp_exec_bind(e, ids[i], inputs[i], &err);
    if (!rc) rc = mp_exec_load_weights(e, m, &err);
    if (!rc) rc = mp_exec_run(e, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc) {
        res->code = rc == MP_EXEC_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
        snprintf(res->msg, sizeof res->msg, "%s", err.msg);
        mp_exec_free(e);
        return;
    }
    const mp_exec_stats *st = mp_exec_get_stats(e);
    res->peak = st->peak_bytes;
    res->folded_mismatch = st->folded_mismatch;
    /* 4. compare every output that has an expected tensor */
    res->code = R_PASS;
    for (int32_t k = 0; k < g->noutputs; k++) {
        char path[2600];
        snprintf(path, sizeof path, "%s%d.pb", cd->out, k);
        if (!exists(path)) continue;
        const mp_tensor *got = mp_exec_value(e, g->outputs[k]);
        mp_tensor *want = read_pb(g->arena, path, &err);
        if (!got || !want || compare(g, g->outputs[k], got, want, cd, &err)) {
            res->code = R_FAIL;
            snprintf(res->msg, sizeof res->msg, "%s", !got ? "an output was not computed" : err.msg);
            break;
        }
    }
    if (res->code == R_PASS && st->folded_mismatch)
        snprintf(res->msg, sizeof res->msg, "folded constant disagrees with the kernel: %s", st->first_mismatch);
    mp_exec_free(e);
}

/* The case as given, then (when it passed) again in float64 from a fresh import. */
static void run_both(mp_model *m, const case_data *cd, case_result *res)
{
    run_case(m, cd, res, false);
    res->f64 = R_NA;
    if (res->code != R_PASS || cd->rng) return;
    mp_err err = {""};
    mp_model *m2 = mp_onnx_load(cd->model, &err);
    if (!m2) return;
    case_result r2 = {0};
    run_case(m2, cd, &r2, true);
    res->f64 = r2.code == R_INFER || r2.code == R_UNSUPPORTED ? R_NA : r2.code;
    snprintf(res->f64_msg, sizeof res->f64_msg, "%.290s", r2.msg);
    mp_onnx_close(m2);
}

/* Runs run_both in a child process; the result comes back through a pipe. */
static void run_isolated(mp_model *m, const case_data *cd, case_result *res)
{
    memset(res, 0, sizeof *res);
    if (getenv("MP_CPU_NOFORK")) {
        run_both(m, cd, res);
        return;
    }
    int fd[2];
    if (pipe(fd)) {
        res->code = R_FAIL;
        snprintf(res->msg, sizeof res->msg, "pipe failed");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(CASE_TIMEOUT_S);
        run_both(m, cd, res);
        ssize_t w = write(fd[1], res, sizeof *res);
        _exit(w == (ssize_t)sizeof *res ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (pid > 0 && got < sizeof *res && (r = read(fd[0], (char *)res + got, sizeof *res - got)) > 0) got += (size_t)r;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid < 0 || got != sizeof *res) {
        memset(res, 0, sizeof *res);
        res->code = R_FAIL;
        if (pid > 0 && WIFSIGNALED(status))
            snprintf(res->msg, sizeof res->msg, WTERMSIG(status) == SIGALRM ? "timed out after %d s" : "crashed (signal %d)",
                     WTERMSIG(status) == SIGALRM ? CASE_TIMEOUT_S : WTERMSIG(status));
        else
            snprintf(res->msg, sizeof res->msg, "the case process failed");
    }
}

/* ---- the suite -------------------------------------------------------------- */

typedef struct op_row {
    char name[96];
    int count[R_NCODES];
    int no_kernel;            /* cases skipped because this op has no kernel */
} op_row;

static op_row table[MAX_TABLE];
static int ntable;
static int totals[R_NCODES], f64_totals[R_NCODES], no_kernel_cases;

static op_row *row_of(const char *name)
{
    for (int i = 0; i < ntable; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    if (ntable == MAX_TABLE) return NULL;
    snprintf(table[ntable].name, sizeof table[ntable].name, "%.95s", name);
    return &table[ntable++];
}

/* Distinct ops of g and its subgraphs ("domain.Op"); *covered: every op has a kernel. */
static void collect_ops(const mp_graph *g, char ops[][96], int *nops, bool *covered)
{
    for (int32_t i = 0; i < g->nnodes; i++) {
        const mp_node *n = &g->nodes[i];
        char key[96];
        snprintf(key, sizeof key, "%s%s%s", n->domain, *n->domain ? "." : "", n->op_type);
        const mp_op_def *d = mp_op_find(n->op_type, n->domain);
        if (!d || !mp_kernel_find(d->id)) *covered = false;
        bool seen = false;
        for (int j = 0; j < *nops && !seen; j++) seen = !strcmp(ops[j], key);
        if (!seen && *nops < MAX_OPS) snprintf(ops[(*nops)++], 96, "%s", key);
        for (int32_t a = 0; a < n->nattrs; a++)
            if (n->attrs[a].type == MP_ATTR_GRAPH || n->attrs[a].type == MP_ATTR_GRAPHS) {
                *covered = false; /* control flow: no kernels for subgraphs */
                for (int32_t s = 0; s < n->attrs[a].n; s++) collect_ops(n->attrs[a].graphs[s], ops, nops, covered);
            }
    }
}

static bool op_has_kernel(const char *key)
{
    const char *dot = strrchr(key, '.');
    char dom[96] = "";
    if (dot) snprintf(dom, sizeof dom, "%.*s", (int)(dot - key), key);
    const mp_op_def *d = mp_op_find(dot ? dot + 1 : key, dom);
    return d && mp_kernel_find(d->id);
}

static void one_case(const char *name, const char *model, const case_data *cd)
{
    mp_err err = {""};
    mp_model *m = mp_onnx_load(model, &err);
    if (!m) {
        totals[R_INFER]++;
        if (very_verbose) printf("SKIP %s: import failed: %s\n", name, err.msg);
        return;
    }
    char ops[MAX_OPS][96];
    int nops = 0;
    bool covered = true;
    collect_ops(m->graph, ops, &nops, &covered);
    if (!covered) {
        no_kernel_cases++;
        for (int i = 0; i < nops; i++) {
            op_row *r = row_of(ops[i]);
            if (r && !op_has_kernel(ops[i])) r->no_kernel++;
        }
        mp_onnx_close(m);
        return;
    }
    case_result res;
    run_isolated(m, cd, &res);
    totals[res.code]++;
    if (res.code == R_PASS) f64_totals[res.f64]++;
    if (res.code == R_PASS && res.f64 == R_FAIL && verbose) printf("FAIL (float64) %s: %s\n", name, res.f64_msg);
    for (int i = 0; i < nops; i++) {
        op_row *r = row_of(ops[i]);
        if (r) r->count[res.code]++;
    }
    if ((res.code == R_FAIL && verbose) || (res.code > R_FAIL && very_verbose))
        printf("%s %s: %s\n", res.code == R_FAIL ? "FAIL" : "SKIP", name, res.msg);
    if (res.code == R_PASS && res.msg[0]) printf("note %s: %s\n", name, res.msg);
    if (cd->in == NULL || strstr(name, "third-party"))
        printf("%s %s: %.2g FLOPs in %.2f s, peak live %.1f MiB\n", name, code_names[res.code], res.flops, res.seconds,
               (double)res.peak / (1 << 20));
    mp_onnx_close(m);
}

static void run_suite(const char *root, const char *suite, const char *filter)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", root, suite);
    int n;
    char **names = list_dir(dir, "test_", &n);
    for (int i = 0; i < n; i++) {
        char name[1200], model[2400], in[2400], out[2400];
        snprintf(name, sizeof name, "%s/%s", suite, names[i]);
        snprintf(model, sizeof model, "%s/%s/model.onnx", dir, names[i]);
        snprintf(in, sizeof in, "%s/%s/test_data_set_0/input_", dir, names[i]);
        snprintf(out, sizeof out, "%s/%s/test_data_set_0/output_", dir, names[i]);
        /* training-mode Dropout with ratio > 0: numpy drew the expected mask */
        bool rng = strstr(names[i], "training_dropout") && !strstr(names[i], "zero_ratio");
        if (strstr(name, filter) && exists(model)) one_case(name, model, &(case_data){model, in, out, rng, false});
        free(names[i]);
    }
    free(names);
}

static void run_light(const char *root, const char *filter)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/light", root);
    int n;
    char **names = list_dir(dir, "light_", &n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > 5 && !strcmp(names[i] + len - 5, ".onnx")) {
            char name[1200], model[2400], out[2400];
            snprintf(name, sizeof name, "light/%.*s", (int)(len - 5), names[i]);
            snprintf(model, sizeof model, "%s/%s", dir, names[i]);
            snprintf(out, sizeof out, "%s/%.*s_output_", dir, (int)(len - 5), names[i]);
            if (strstr(name, filter)) one_case(name, model, &(case_data){model, NULL, out, false, false});
        }
        free(names[i]);
    }
    free(names);
}

/* Third-party models that ship input/output data sets. */
static void run_third_party(const char *filter)
{
    static const char *const models[][2] = {{"mnist", "model.onnx"}, {"super_resolution", "super_resolution.onnx"}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int set = 0; set < 3; set++) {
            char name[256], model[1400], in[1400], out[1400];
            snprintf(name, sizeof name, "third-party/%s/%d", models[i][0], set);
            snprintf(model, sizeof model, "%s/models/third-party/%s/%s", MEMPLAN_SHARED, models[i][0], models[i][1]);
            snprintf(in, sizeof in, "%s/models/third-party/%s/test_data_set_%d/input_", MEMPLAN_SHARED, models[i][0], set);
            snprintf(out, sizeof out, "%s/models/third-party/%s/test_data_set_%d/output_", MEMPLAN_SHARED, models[i][0], set);
            char probe[1500];
            snprintf(probe, sizeof probe, "%s0.pb", in);
            if (strstr(name, filter) && exists(model) && exists(probe)) one_case(name, model, &(case_data){model, in, out, false, true});
        }
}

static int cmp_row(const void *a, const void *b) { return strcmp(((const op_row *)a)->name, ((const op_row *)b)->name); }

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    const char *v = getenv("MP_CPU_VERBOSE");
    verbose = v && atoi(v) > 0;
    very_verbose = v && atoi(v) > 1;
    if (getenv("MP_CPU_MAX_FLOPS")) max_flops = atof(getenv("MP_CPU_MAX_FLOPS"));
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* every kernel the runtime defines should be registered in kernels.def */
    int unreg = 0;
    for (const char *const *kn = mp_cpu_kernel_names; *kn; kn++) {
        bool found = false;
        for (int i = 0; i < MP_OP_COUNT && !found; i++) found = !strcmp(mp_op_table[i].name, *kn) && mp_kernel_find(i);
        if (!found) printf("%s%s", unreg++ ? ", " : "kernels not registered (no op row or no kernels.def row): ", *kn);
    }
    if (unreg) printf("\n");

    check_peak_and_plans();
    check_dropout_and_reruns();
    check_half_rounding();
    printf("executor checks: %s\n", unit_failures ? "FAILED" : "passed");

    char root[1024];
    snprintf(root, sizeof root, "%s/onnx-backend", MEMPLAN_SHARED);
    if (!exists(root)) {
        printf("conformance skipped: %s not found (the data lives in ../shared)\n", root);
        return unit_failures ? 1 : 0;
    }
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    for (size_t s = 0; s < sizeof suites / sizeof *suites; s++) run_suite(root, suites[s], filter);
    run_light(root, filter);
    run_third_party(filter);

    qsort(table, (size_t)ntable, sizeof *table, cmp_row);
    for (int i = 0; i < ntable; i++) {
        const op_row *r = &table[i];
        int skipped = r->count[R_UNSUPPORTED] + r->count[R_INFER] + r->count[R_BIG];
        if (!r->count[R_PASS] && !r->count[R_FAIL] && !skipped) continue;
        printf("%s: %d passed, %d failed", r->name, r->count[R_PASS], r->count[R_FAIL]);
        if (skipped) printf(" (%d skipped)", skipped);
        printf("\n");
    }
    int k = 0;
    for (int i = 0; i < ntable; i++)
        if (table[i].no_kernel) printf("%s%s (%d)", k++ ? ", " : "ops without a kernel (cases skipped): ", table[i].name, table[i].no_kernel);
    if (k) printf("\n");
    int skipped = totals[R_UNSUPPORTED] + totals[R_INFER] + totals[R_BIG] + no_kernel_cases;
    printf("skipped: %d no kernel, %d unsupported variant, %d inference failed, %d too big\n", no_kernel_cases,
           totals[R_UNSUPPORTED], totals[R_INFER], totals[R_BIG]);
    printf("float64 rerun of the passed cases: %d passed, %d failed, %d not applicable (a value stays float32)\n",
           f64_totals[R_PASS], f64_totals[R_FAIL], f64_totals[R_NA] + f64_totals[R_BIG]);
    printf("%d passed, %d failed, %d skipped\n", totals[R_PASS], totals[R_FAIL], skipped);
    return totals[R_FAIL] || f64_totals[R_FAIL] || unit_failures ? 1 : 0;
}
