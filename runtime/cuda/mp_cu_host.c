/* mp_cu_host.c - the CUDA runtime's kernels run on the host: the same plan.cu
 * tables and the same element functions (mp_cu_kernels.h), a loop over the
 * threads instead of a launch, and a plain GEMM instead of cuBLAS. It is how
 * the tests check codegen and every kernel against the CPU executor on a
 * machine without a GPU (MP_CU_HOST_BLOCKS=1: the GPU's block-per-output
 * launches too, split as the GPU splits them):
 *
 *   cc -x c OUT/plan.cu runtime/cuda/mp_cu_host.c -Iruntime/cuda -lm -o plan-host
 *
 * One malloc of exactly the arena (and the workspace the plan states). */
#include <stdbool.h>

#include "mp_cu_main.h"

typedef void (*mp_cu_elem_fn)(const mp_cu_args *a, int64_t i);

/* The element function of each runtime op (MP_CU_CONSTANT is a copy, not a loop). */
static const mp_cu_elem_fn elem_fns[MP_CU_OP_COUNT] = {
    [MP_CU_FILL] = k_fill,         [MP_CU_COPY] = k_copy,           [MP_CU_MAP] = k_map,
    [MP_CU_REDUCE] = k_reduce,     [MP_CU_GEMM] = k_gemm_elem,      [MP_CU_SOFTMAX] = k_softmax,
    [MP_CU_SCE_LOSS] = k_sce_loss, [MP_CU_SCE_GRAD] = k_sce_grad,   [MP_CU_LN_ROWS] = k_ln_rows,
    [MP_CU_LN_COLS] = k_ln_cols,   [MP_CU_BN_STATS] = k_bn_stats,   [MP_CU_BN_APPLY] = k_bn_apply,
    [MP_CU_CONV] = k_conv,         [MP_CU_CONV_DX] = k_conv_dx,     [MP_CU_CONV_DW] = k_conv_dw,
    [MP_CU_POOL] = k_pool,         [MP_CU_POOL_DX] = k_pool_dx,     [MP_CU_GATHER] = k_gather,
    [MP_CU_SCATTER_ADD] = k_scatter_add, [MP_CU_DROPOUT] = k_dropout, [MP_CU_TRILU] = k_trilu,
    [MP_CU_OPTIM] = k_optim,       [MP_CU_ADAFACTOR] = k_adafactor, [MP_CU_RESIZE] = k_resize,
    [MP_CU_PAD] = k_pad,           [MP_CU_PAD_DX] = k_pad_dx,       [MP_CU_EINSUM] = k_einsum,
    [MP_CU_RESIZE_DX] = k_resize_dx, [MP_CU_CUMSUM] = k_cumsum,   [MP_CU_GATHER_ELEMENTS] = k_gather_elements,
    [MP_CU_SCATTER_ELEMENTS] = k_scatter_elements, [MP_CU_GATHER_ND] = k_gather_nd, [MP_CU_SCATTER_ND] = k_scatter_nd,
    [MP_CU_ROTARY] = k_rotary,     [MP_CU_ATTENTION] = k_attention,
    [MP_CU_GRID_SAMPLE] = k_grid_sample, [MP_CU_AFFINE_GRID] = k_affine_grid,
    [MP_CU_LP_NORM] = k_lp_norm,   [MP_CU_REVERSE_SEQ] = k_reverse_seq,
    [MP_CU_LRN] = k_lrn,           [MP_CU_ARG] = k_arg,             [MP_CU_ONE_HOT] = k_one_hot,
    [MP_CU_TOPK] = k_topk,         [MP_CU_RANGE] = k_range,         [MP_CU_MAP_INT] = k_map_int,
    [MP_CU_ALL_FINITE] = k_all_finite, [MP_CU_DET] = k_det,
};

static char *host_alloc(const mp_cu_plan *p, void **ws, size_t *taken)
{
    int64_t arena_bytes = p->arena_bytes, ws_bytes = p->workspace_bytes; /* no cuDNN here */
    char *arena = malloc((size_t)(arena_bytes ? arena_bytes : 1)); /* the one allocation of the arena */
    *ws = ws_bytes ? malloc((size_t)ws_bytes) : NULL;
    if (!arena || (ws_bytes && !*ws)) {
        fprintf(stderr, "plan: cannot allocate the arena of %lld bytes\n", (long long)arena_bytes);
        exit(1);
    }
    memset(arena, 0xff, (size_t)arena_bytes); /* NaN: an element no kernel wrote shows in the loss */
    *taken = (size_t)arena_bytes;
    return arena;
}

static void host_upload(char *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void host_download(void *dst, const char *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void host_sync(void) {}
static void host_release(char *arena, void *ws)
{
    free(arena);
    free(ws);
}

/* ---- the GPU's block-per-output launches, emulated (MP_CU_HOST_BLOCKS=1): the same split into
 * MP_CU_BLOCK strided partial sums as memplan_cuda.cu, combined in thread order ---- */

typedef double (*part_fn)(const mp_cu_args *a, int64_t j, int what, double u, double v, int64_t t, int64_t step);

/* The partials combined in thread order by mp_cu_comb's kind (RC_SUM, RC_FMAX, ...). */
static double comb_parts(const mp_cu_args *a, int64_t j, part_fn f, int what, double u, double v, int kind)
{
    double s = mp_cu_comb_init(kind);
    for (int64_t t = 0; t < MP_CU_BLOCK; t++) s = mp_cu_comb(kind, s, f(a, j, what, u, v, t, MP_CU_BLOCK));
    return s;
}

static double sum_parts(const mp_cu_args *a, int64_t j, part_fn f, int what, double u, double v, bool max)
{
    return comb_parts(a, j, f, what, u, v, max ? RC_FMAX : RC_SUM);
}

static double reduce_part(const mp_cu_args *a, int64_t j, int what, double u, double v, int64_t t, int64_t step)
{
    (void)v;
    return mp_cu_reduce_part(a, j, what, u, t, step);
}

static double sm_part(const mp_cu_args *a, int64_t j, int what, double u, double v, int64_t t, int64_t step)
{
    (void)v;
    return mp_cu_softmax_part(a, j, what, u, t, step);
}

static double af_part(const mp_cu_args *a, int64_t j, int what, double u, double v, int64_t t, int64_t step)
{
    (void)j, (void)what, (void)u, (void)v;
    return mp_cu_af_sq_part(a, t, step);
}

static void host_block(int op, const mp_cu_args *a, int64_t j)
{
    double n = (double)a->p[1], mu = 0, var = 0, sx = 0, sd = 0;
    switch (op) {
    case MP_CU_REDUCE: {
        double m = 0;
        if (mp_cu_reduce_mode(a) == RED_LOGSUMEXP) m = mp_cu_reduce_shift(sum_parts(a, j, reduce_part, 1, 0, 0, true));
        mp_cu_reduce_store(a, j, m, comb_parts(a, j, reduce_part, 0, m, 0, mp_cu_reduce_kind(a)));
        break;
    }
    case MP_CU_ADAFACTOR: ((double *)a->x[7])[0] = sum_parts(a, j, af_part, 0, 0, 0, false); break;
    case MP_CU_SOFTMAX: {
        if (a->p[3] >= SM_GRAD) {
            double dot = sum_parts(a, j, sm_part, mp_cu_sm_grad_sum(a), 0, 0, false);
            for (int64_t t = 0; t < MP_CU_BLOCK; t++) mp_cu_softmax_write(a, j, 0, dot, t, MP_CU_BLOCK);
            break;
        }
        double m = sum_parts(a, j, sm_part, SM_MAX, 0, 0, true);
        double s = sum_parts(a, j, sm_part, SM_SUM_EXP, m, 0, false);
        for (int64_t t = 0; t < MP_CU_BLOCK; t++) mp_cu_softmax_write(a, j, m, s, t, MP_CU_BLOCK);
        break;
    }
    case MP_CU_LN_ROWS: {
        mu = sum_parts(a, j, mp_cu_ln_part, LN_SUM_X, 0, 0, false) / n;
        double rstd = mp_cu_ln_rstd(a, sum_parts(a, j, mp_cu_ln_part, LN_SUM_DEV2, mu, 0, false)), m1 = 0, m2 = 0;
        if (a->p[2]) {
            m1 = sum_parts(a, j, mp_cu_ln_part, LN_SUM_DXH, mu, rstd, false) / n;
            m2 = sum_parts(a, j, mp_cu_ln_part, LN_SUM_DXH_XH, mu, rstd, false) / n;
        }
        for (int64_t t = 0; t < MP_CU_BLOCK; t++) mp_cu_ln_write(a, j, mu, rstd, m1, m2, t, MP_CU_BLOCK);
        break;
    }
    default: { /* MP_CU_BN_STATS */
        if (mp_cu_bn_train(a)) {
            sx = sum_parts(a, j, mp_cu_bn_part, BN_SUM_X, 0, 0, false);
            mp_cu_bn_stats_of(a, j, sx, 0, &mu, &var);
            sd = sum_parts(a, j, mp_cu_bn_part, BN_SUM_DEV2, mu, 0, false);
        }
        mp_cu_bn_stats_of(a, j, sx, sd, &mu, &var);
        if (a->p[BN_MODE] <= BN_FWD_INFER) {
            mp_cu_bn_fwd_finish(a, j, mu, var);
            break;
        }
        double rstd = 1 / sqrt(var + a->f[0]);
        mp_cu_bn_grad_finish(a, j, mu, rstd, sum_parts(a, j, mp_cu_bn_part, BN_SUM_DY, mu, rstd, false),
                             sum_parts(a, j, mp_cu_bn_part, BN_SUM_DY_XH, mu, rstd, false));
        break;
    }
    }
}

static void host_run(const mp_cu_plan *p, const mp_cu_instr *I, mp_cu_args *a)
{
    if (I->op == MP_CU_CONSTANT) {
        memcpy(a->x[0], I->konst, (size_t)p->t[I->t[0]].bytes);
        return;
    }
    mp_cu_elem_fn fn = I->op > 0 && I->op < MP_CU_OP_COUNT ? elem_fns[I->op] : NULL;
    if (!fn) {
        fprintf(stderr, "plan: unknown runtime op %d at '%s'\n", I->op, p->nodes[I->node]);
        exit(1);
    }
    static int blocks = -1;
    if (blocks < 0) blocks = getenv("MP_CU_HOST_BLOCKS") && atoi(getenv("MP_CU_HOST_BLOCKS"));
    if (blocks && mp_cu_blocked(I->op, a)) {
        for (int64_t j = 0; j < (I->op == MP_CU_ADAFACTOR ? 1 : a->n); j++) host_block(I->op, a, j);
        return;
    }
    for (int64_t i = 0; i < a->n; i++) fn(a, i);
}

int mp_cu_main(int argc, char **argv, const mp_cu_plan *p)
{
    static const mp_cu_backend host = {"host", host_alloc, host_upload, host_download, host_run, host_sync, host_release};
    return mp_cu_run_main(argc, argv, p, &host);
}
