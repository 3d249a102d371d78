/* mp_cu_host.c - the CUDA runtime's kernels run on the host: the same plan.cu
 * tables and the same element functions (mp_cu_kernels.h), a loop over the
 * threads instead of a launch, and a plain GEMM instead of cuBLAS. It is how
 * the tests check codegen and every kernel against the CPU executor on a
 * machine without a GPU:
 *
 *   cc -x c OUT/plan.cu runtime/cuda/mp_cu_host.c -Iruntime/cuda -lm -o plan-host
 *
 * One malloc of exactly the arena (and the workspace the plan states). */
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
    [MP_CU_OPTIM] = k_optim,       [MP_CU_ADAFACTOR] = k_adafactor,
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
    for (int64_t i = 0; i < a->n; i++) fn(a, i);
}

int mp_cu_main(int argc, char **argv, const mp_cu_plan *p)
{
    static const mp_cu_backend host = {"host", host_alloc, host_upload, host_download, host_run, host_sync, host_release};
    return mp_cu_run_main(argc, argv, p, &host);
}
