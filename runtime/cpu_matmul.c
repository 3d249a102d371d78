/* cpu_matmul.c - MatMul, Gemm and Einsum.
 *
 * float32 and float64 go through OpenBLAS's cblas_dgemm, which the executor
 * pins to one thread: with a fixed blocking per shape, the same inputs give
 * the same bits every run. float32 is widened tile by tile and accumulated in
 * double, so its results do not depend on which sgemm kernel OpenBLAS picks
 * for the CPU: sgemm's kernels sum each row in their own order, and rows that
 * are equal in exact arithmetic came out one ulp apart on some CPUs.
 * Integer types use a plain triple loop with wrapping int64 accumulation.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ir/einsum.h"
#include "kernels.h"

/* Tiles of C (TM x TN), summed over K in TK steps: 22 MiB of double at most. */
enum { TM = 256, TN = 1024, TK = 2048 };

/* dst[r * cols + c] = x[r0 + r][c0 + c] of the rows x cols tile of x (ld: its row stride), widened to double;
 * transposed: x's element [c0 + c][r0 + r]. A transposed tile is copied in square blocks, so that reads and
 * writes both stay within a few cache lines: element by element, each read strode a whole row of x (GPT-2's
 * LM head: 50,257 x 768 floats), which under ASan cost minutes a step. */
static void widen(bool transposed, const float *x, int64_t ld, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                  double *dst)
{
    enum { BLOCK = 32 };
    if (!transposed) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = x[(r0 + r) * ld + c0 + c];
        return;
    }
    for (int64_t cb = 0; cb < cols; cb += BLOCK)
        for (int64_t rb = 0; rb < rows; rb += BLOCK) {
            int64_t ce = cb + BLOCK < cols ? cb + BLOCK : cols, re = rb + BLOCK < rows ? rb + BLOCK : rows;
            for (int64_t c = cb; c < ce; c++)
                for (int64_t r = rb; r < re; r++) dst[r * cols + c] = x[(c0 + c) * ld + r0 + r];
        }
}

/* float32 C = alpha op(A) op(B) + beta C, through dgemm on widened tiles; -1 when out of memory. */
static int sgemm_in_double(bool ta, bool tb, int64_t m, int64_t n, int64_t kk, double alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, double beta, float *c, int64_t ldc)
{
    int64_t tk = kk < TK ? (kk ? kk : 1) : TK;
    double *A = malloc((size_t)(TM * tk) * sizeof *A), *B = malloc((size_t)(tk * TN) * sizeof *B);
    double *C = malloc((size_t)(TM * TN) * sizeof *C);
    if (!A || !B || !C) {
        free(A), free(B), free(C);
        return -1;
    }
    for (int64_t j0 = 0; j0 < n; j0 += TN)
        for (int64_t i0 = 0; i0 < m; i0 += TM) {
            int64_t nb = n - j0 < TN ? n - j0 : TN, mb = m - i0 < TM ? m - i0 : TM;
            for (int64_t i = 0; i < mb; i++)
                for (int64_t j = 0; j < nb; j++) C[i * nb + j] = beta != 0 ? beta * c[(i0 + i) * ldc + j0 + j] : 0;
            for (int64_t p0 = 0; p0 < kk; p0 += tk) {
                int64_t kb = kk - p0 < tk ? kk - p0 : tk;
                widen(ta, a, lda, i0, p0, mb, kb, A);
                widen(tb, b, ldb, p0, j0, kb, nb, B);
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mb, (int)nb, (int)kb, alpha, A, (int)kb, B,
                            (int)nb, 1.0, C, (int)nb);
            }
            for (int64_t i = 0; i < mb; i++)
                for (int64_t j = 0; j < nb; j++) c[(i0 + i) * ldc + j0 + j] = (float)C[i * nb + j];
        }
    free(A), free(B), free(C);
    return 0;
}

void mp_cpu_gemm(mp_dtype t, bool ta, bool tb, int64_t m, int64_t n, int64_t kk, double alpha, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (t == MP_FLOAT) {
        if (sgemm_in_double(ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc)) /* no memory for the tiles */
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                        (int)kk, (float)alpha, a, (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
        return;
    }
    if (t == MP_DOUBLE) {
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)kk,
                    alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
        return;
    }
    /* integers: through int64 with wrap-around */
    int64_t d1 = 1;
    mp_tensor A = {t, 0, &d1, 1, (void *)a}, B = {t, 0, &d1, 1, (void *)b}, C = {t, 0, &d1, 1, c};
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            uint64_t acc = 0;
            for (int64_t p = 0; p < kk; p++) {
                uint64_t x = (uint64_t)mp_tensor_get_i64(&A, ta ? p * lda + i : i * lda + p);
                uint64_t y = (uint64_t)mp_tensor_get_i64(&B, tb ? j * ldb + p : p * ldb + j);
                acc += x * y;
            }
            uint64_t prev = beta != 0 ? (uint64_t)mp_tensor_get_i64(&C, i * ldc + j) * (uint64_t)(int64_t)beta : 0;
            mp_tensor_set_i64(&C, i * ldc + j, (int64_t)(acc * (uint64_t)(int64_t)alpha + prev));
        }
}

static bool gemm_type(mp_dtype t)
{
    return t == MP_FLOAT || t == MP_DOUBLE || t == MP_INT32 || t == MP_INT64 || t == MP_UINT32 || t == MP_UINT64;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

int mp_cpu_MatMul(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y) return mp_fail(err, "missing input or output");
    if (a->dtype != b->dtype || a->dtype != y->dtype) return mp_fail(err, "input and output dtypes differ");
    if (!gemm_type(a->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(a->dtype));
    if (a->rank < 1 || b->rank < 1) return mp_fail(err, "inputs must have rank >= 1");
    /* 1-D operands are promoted: A [K] -> [1,K], B [K] -> [K,1]. */
    int64_t m = a->rank == 1 ? 1 : a->dims[a->rank - 2], kk = a->dims[a->rank - 1];
    int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (kk != kb) return mp_fail(err, "inner dims differ: %lld and %lld", (long long)kk, (long long)kb);
    int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0, br = ba > bb ? ba : bb;
    int yr = br + (a->rank > 1) + (b->rank > 1);
    if (y->rank != yr) return mp_fail(err, "output rank %d, expected %d", y->rank, yr);
    if ((a->rank > 1 && y->dims[br] != m) || (b->rank > 1 && y->dims[yr - 1] != n)) return mp_fail(err, "output matrix dims disagree");
    if (!fits_int(m) || !fits_int(n) || !fits_int(kk)) return mp_kunsupported(err, "matrix dims beyond BLAS int range");
    /* batch broadcast: element strides of A's and B's matrices per batch axis */
    int64_t bdims[MP_MAX_RANK], sa[MP_MAX_RANK], sb[MP_MAX_RANK], nb = 1;
    int64_t as = m * kk, bs = kk * n;
    for (int i = br - 1; i >= 0; i--) {
        int ia = i - (br - ba), ib = i - (br - bb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d = da > db ? da : db;
        if ((da != d && da != 1) || (db != d && db != 1) || y->dims[i] != d) return mp_fail(err, "batch dims do not broadcast");
        bdims[i] = d;
        sa[i] = da == 1 ? 0 : as;
        sb[i] = db == 1 ? 0 : bs;
        as *= da;
        bs *= db;
        nb *= d;
    }
    size_t es = mp_elem_size(a->dtype);
    /* B shared by every batch: one GEMM with A's batches stacked into M. */
    if (bb == 0 && a->rank > 1 && fits_int(nb * m)) {
        mp_cpu_gemm(a->dtype, false, false, nb * m, n, kk, 1, a->data, kk, b->data, n, 0, y->data, n);
        return 0;
    }
    int64_t idx[MP_MAX_RANK] = {0}, oa = 0, ob = 0;
    for (int64_t t = 0; t < nb; t++) {
        mp_cpu_gemm(a->dtype, false, false, m, n, kk, 1, (const char *)a->data + oa * (int64_t)es, kk,
             (const char *)b->data + ob * (int64_t)es, n, 0, (char *)y->data + t * m * n * (int64_t)es, n);
        for (int i = br - 1; i >= 0; i--) {
            if (++idx[i] < bdims[i]) {
                oa += sa[i];
                ob += sb[i];
                break;
            }
            idx[i] = 0;
            oa -= sa[i] * (bdims[i] - 1);
            ob -= sb[i] * (bdims[i] - 1);
        }
    }
    return 0;
}

int mp_cpu_Gemm(const mp_kargs *k, mp_err *err)
{
    const mp_tensor *a = mp_kin(k, 0), *b = mp_kin(k, 1), *c = mp_kin(k, 2);
    mp_tensor *y = mp_kout(k, 0);
    if (!a || !b || !y) return mp_fail(err, "missing input or output");
    if (a->dtype != b->dtype || a->dtype != y->dtype || (c && c->dtype != y->dtype)) return mp_fail(err, "dtypes differ");
    if (!gemm_type(a->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(a->dtype));
    if (a->rank != 2 || b->rank != 2 || y->rank != 2) return mp_fail(err, "A, B and Y must be 2-D");
    bool ta = mp_attr_int(k->node, "transA", 0), tb = mp_attr_int(k->node, "transB", 0);
    double alpha = mp_attr_float(k->node, "alpha", 1.0f), beta = mp_attr_float(k->node, "beta", 1.0f);
    int64_t m = ta ? a->dims[1] : a->dims[0], kk = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0], n = tb ? b->dims[0] : b->dims[1];
    if (kk != kb || y->dims[0] != m || y->dims[1] != n) return mp_fail(err, "A, B and Y dims disagree");
    if (!fits_int(m) || !fits_int(n) || !fits_int(kk)) return mp_kunsupported(err, "matrix dims beyond BLAS int range");
    if (c && beta != 0) { /* Y = broadcast(C), then GEMM accumulates into it */
        int64_t str[2], ys[2] = {n, 1};
        for (int i = 0; i < 2; i++) {
            int j = i - (2 - c->rank);
            int64_t d = j >= 0 ? c->dims[j] : 1;
            if (d != 1 && d != y->dims[i]) return mp_fail(err, "C does not broadcast to (M, N)");
            str[i] = d == 1 ? 0 : (j == 0 && c->rank == 2 ? c->dims[1] : 1);
        }
        mp_copy_strided(y->data, ys, c->data, str, 2, y->dims, mp_elem_size(y->dtype));
    } else {
        beta = 0;
    }
    mp_cpu_gemm(a->dtype, ta, tb, m, n, kk, alpha, a->data, a->dims[1], b->data, b->dims[1], beta, y->data, n);
    return 0;
}

/* ---- Einsum ---------------------------------------------------------------------- */

int mp_cpu_Einsum(const mp_kargs *k, mp_err *err)
{
    mp_tensor *y = mp_kout(k, 0);
    const char *eq = mp_attr_str(k->node, "equation", NULL);
    if (!y || !eq || k->nin < 1 || k->nin > MP_EINSUM_MAX_IN) return mp_fail(err, "needs an equation, 1..8 inputs and an output");
    if (y->dtype != MP_FLOAT && y->dtype != MP_DOUBLE && !mp_dtype_is_int(y->dtype)) return mp_kunsupported(err, "dtype %s", mp_dtype_name(y->dtype));
    int ranks[MP_EINSUM_MAX_IN];
    for (int t = 0; t < k->nin; t++) {
        if (!k->in[t] || k->in[t]->dtype != y->dtype) return mp_fail(err, "input %d missing or of another dtype", t);
        ranks[t] = k->in[t]->rank;
    }
    mp_einsum e;
    if (mp_einsum_parse(eq, k->nin, ranks, &e, err)) return -1;
    /* a label's size: the one other than 1 (broadcasting), checked to agree */
    int64_t size[MP_EINSUM_LABELS];
    for (int l = 0; l < MP_EINSUM_LABELS; l++) size[l] = -1;
    for (int t = 0; t < k->nin; t++)
        for (int i = 0; i < e.rank[t]; i++) {
            int l = e.label[t][i];
            int64_t d = k->in[t]->dims[i];
            if (size[l] < 0 || size[l] == 1) size[l] = d;
            else if (d != size[l] && d != 1) return mp_fail(err, "label sizes disagree");
        }
    const int *olab = e.out;
    int no = e.out_rank;
    if (no != y->rank) return mp_fail(err, "output has rank %d, equation gives %d", y->rank, no);
    bool in_out[MP_EINSUM_LABELS] = {0};
    for (int i = 0; i < no; i++) {
        if (size[olab[i]] != y->dims[i]) return mp_fail(err, "output dim %d disagrees", i);
        in_out[olab[i]] = true;
    }
    int sum[MP_EINSUM_LABELS], ns = 0;
    for (int l = 0; l < MP_EINSUM_LABELS; l++)
        if (size[l] >= 0 && !in_out[l]) sum[ns++] = l;
    /* every input's element stride per label (0 for broadcast axes) */
    int64_t str[MP_EINSUM_MAX_IN][MP_EINSUM_LABELS];
    for (int t = 0; t < k->nin; t++) {
        int64_t xs[MP_MAX_RANK];
        memset(str[t], 0, sizeof str[t]);
        mp_strides(k->in[t]->rank, k->in[t]->dims, xs);
        for (int i = 0; i < e.rank[t]; i++)
            if (k->in[t]->dims[i] != 1) str[t][e.label[t][i]] += xs[i];
    }
    int64_t inner = 1;
    for (int i = 0; i < ns; i++) inner *= size[sum[i]];
    bool is_int = mp_dtype_is_int(y->dtype);
    int64_t oidx[MP_MAX_RANK] = {0};
    for (int64_t o = 0; o < y->numel; o++) {
        int64_t base[MP_EINSUM_MAX_IN] = {0};
        for (int t = 0; t < k->nin; t++)
            for (int i = 0; i < no; i++) base[t] += oidx[i] * str[t][olab[i]];
        double acc = 0;
        uint64_t iacc = 0;
        int64_t sidx[MP_EINSUM_LABELS] = {0};
        for (int64_t s = 0; s < inner; s++) {
            double prod = 1;
            uint64_t iprod = 1;
            for (int t = 0; t < k->nin; t++) {
                int64_t off = base[t];
                for (int i = 0; i < ns; i++) off += sidx[i] * str[t][sum[i]];
                if (is_int) iprod *= (uint64_t)mp_tensor_get_i64(k->in[t], off);
                else prod *= mp_tensor_get_f64(k->in[t], off);
            }
            acc += prod;
            iacc += iprod;
            for (int i = ns - 1; i >= 0; i--) {
                if (++sidx[i] < size[sum[i]]) break;
                sidx[i] = 0;
            }
        }
        if (is_int) mp_tensor_set_i64(y, o, (int64_t)iacc);
        else mp_tensor_set_f64(y, o, acc);
        for (int i = no - 1; i >= 0; i--) {
            if (++oidx[i] < y->dims[i]) break;
            oidx[i] = 0;
        }
    }
    return 0;
}
