/* src/engine/cpu/gemm.c - the CPU executor's matrix products: the blocked
 * accumulate-GEMM every other kernel builds on (convolutions included), ONNX
 * Gemm with its transposes and broadcast C, and MatMul with NumPy's 1-D
 * promotion and batch broadcasting. No BLAS: a 4-row register block whose
 * inner loop runs over contiguous columns of B and Y, which compilers turn
 * into vector code. */
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/kernels_nn.h"
#include "engine/cpu/simd.h"

/* Block sizes: a KC x NC block of B (128 KiB) stays in L2 while every row
 * of A streams over it; four rows of Y (4 KiB) stay in L1. The packed path
 * (transposed B) uses a smaller block so its stack buffer is 32 KiB. */
#define KC 128
#define NC 256
#define PKC 64
#define PNC 128

/* y[i, 0:nc] += alpha * sum_{p<kc} A(i,p) b[p*ldb + j]; b rows contiguous.
 * Built twice, for CPUs with AVX2 and FMA (x86-64-v3) and for any x86-64;
 * the loader picks one at run time. */
VRAM__CPU_CLONES
static void block_kernel(int64_t m, int64_t nc, int64_t kc, float alpha, const float *a,
                         int64_t ars, int64_t acs, const float *b, int64_t ldb, float *y,
                         int64_t ldy)
{
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
        float *restrict y0 = y + i * ldy;
        float *restrict y1 = y0 + ldy;
        float *restrict y2 = y1 + ldy;
        float *restrict y3 = y2 + ldy;
        const float *ai = a + i * ars;
        for (int64_t p = 0; p < kc; p++) {
            const float *ap = ai + p * acs;
            float a0 = alpha * ap[0], a1 = alpha * ap[ars], a2 = alpha * ap[2 * ars],
                  a3 = alpha * ap[3 * ars];
            const float *restrict bp = b + p * ldb;
            for (int64_t j = 0; j < nc; j++) {
                float bv = bp[j];
                y0[j] += a0 * bv;
                y1[j] += a1 * bv;
                y2[j] += a2 * bv;
                y3[j] += a3 * bv;
            }
        }
    }
    for (; i < m; i++) {
        float *restrict yi = y + i * ldy;
        for (int64_t p = 0; p < kc; p++) {
            float av = alpha * a[i * ars + p * acs];
            const float *restrict bp = b + p * ldb;
            for (int64_t j = 0; j < nc; j++)
                yi[j] += av * bp[j];
        }
    }
}

void vram__cpu_gemm_acc(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars,
                        int64_t acs, const float *b, int64_t brs, int64_t bcs, float *y,
                        int64_t ldy)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return;
    if (bcs == 1) {
        for (int64_t j0 = 0; j0 < n; j0 += NC) {
            int64_t nc = n - j0 < NC ? n - j0 : NC;
            for (int64_t p0 = 0; p0 < k; p0 += KC) {
                int64_t kc = k - p0 < KC ? k - p0 : KC;
                block_kernel(m, nc, kc, alpha, a + p0 * acs, ars, acs, b + p0 * brs + j0, brs,
                             y + j0, ldy);
            }
        }
        return;
    }
    float buf[PKC * PNC];
    for (int64_t j0 = 0; j0 < n; j0 += PNC) {
        int64_t nc = n - j0 < PNC ? n - j0 : PNC;
        for (int64_t p0 = 0; p0 < k; p0 += PKC) {
            int64_t kc = k - p0 < PKC ? k - p0 : PKC;
            /* j outer: a transposed B is contiguous along p. */
            for (int64_t j = 0; j < nc; j++) {
                const float *src = b + p0 * brs + (j0 + j) * bcs;
                for (int64_t p = 0; p < kc; p++)
                    buf[p * nc + j] = src[p * brs];
            }
            block_kernel(m, nc, kc, alpha, a + p0 * acs, ars, acs, buf, nc, y + j0, ldy);
        }
    }
}

void vram__cpu_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, const float *b, float beta, const float *c, int64_t c_rows,
                    int64_t c_cols, float *y)
{
    if (m <= 0 || n <= 0)
        return;
    vram__gemm_init_y(m, n, beta, c, c_rows, c_cols, y);
    /* A' [m,k]: stored [k,m] when transposed. B' [k,n]: stored [n,k] then. */
    vram__cpu_gemm_acc(m, n, k, alpha, a, trans_a ? 1 : k, trans_a ? m : 1, b, trans_b ? 1 : n,
                       trans_b ? k : 1, y, n);
}

void vram__gemm_init_y(int64_t m, int64_t n, float beta, const float *c, int64_t c_rows,
                       int64_t c_cols, float *y)
{
    if (c && beta != 0.0f) {
        for (int64_t i = 0; i < m; i++) {
            const float *crow = c + (c_rows == 1 ? 0 : i) * c_cols;
            float *yrow = y + i * n;
            if (c_cols == 1)
                for (int64_t j = 0; j < n; j++)
                    yrow[j] = beta * crow[0];
            else
                for (int64_t j = 0; j < n; j++)
                    yrow[j] = beta * crow[j];
        }
    } else {
        memset(y, 0, (size_t)(m * n) * sizeof *y);
    }
}

/* "[2,3,4]" into buf. */
static const char *shape_str(const vram__shape *s, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int i = 0; i < s->rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "",
                                (long long)s->dim[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

static int shape_ok(const vram__shape *s)
{
    if (s->rank < 0 || s->rank > VRAM__MAX_RANK)
        return 0;
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] < 0)
            return 0;
    return 1;
}

int vram__cpu_matmul(const vram__shape *as, const float *a, const vram__shape *bs, const float *b,
                     const vram__shape *ys, float *y)
{
    char s1[160], s2[160], s3[160], s4[160];
    if (!shape_ok(as) || !shape_ok(bs) || !shape_ok(ys) || as->rank == 0 || bs->rank == 0)
        return vram__fail(VRAM_EINVAL, "MatMul of %s and %s into %s: operands need rank 1 to %d "
                          "and known dimensions",
                          shape_str(as, s1, sizeof s1), shape_str(bs, s2, sizeof s2),
                          shape_str(ys, s3, sizeof s3), VRAM__MAX_RANK);
    /* Promote: a [k] is [1,k], b [k] is [k,1]; those axes leave the result. */
    int64_t m = as->rank == 1 ? 1 : as->dim[as->rank - 2];
    int64_t k = as->dim[as->rank - 1];
    int64_t kb = bs->rank == 1 ? bs->dim[0] : bs->dim[bs->rank - 2];
    int64_t n = bs->rank == 1 ? 1 : bs->dim[bs->rank - 1];
    if (k != kb)
        return vram__fail(VRAM_EINVAL, "MatMul of %s and %s: inner dimensions %lld and %lld differ",
                          shape_str(as, s1, sizeof s1), shape_str(bs, s2, sizeof s2),
                          (long long)k, (long long)kb);
    int ra = as->rank > 2 ? as->rank - 2 : 0, rb = bs->rank > 2 ? bs->rank - 2 : 0;
    int rbatch = ra > rb ? ra : rb;
    vram__shape want = {.rank = 0};
    int64_t astr[VRAM__MAX_RANK], bstr[VRAM__MAX_RANK]; /* batch strides in matrices, 0 = broadcast */
    int64_t bdim[VRAM__MAX_RANK];
    int64_t acc_a = 1, acc_b = 1;
    for (int i = rbatch - 1; i >= 0; i--) {
        int ia = i - (rbatch - ra), ib = i - (rbatch - rb);
        int64_t da = ia >= 0 ? as->dim[ia] : 1, db = ib >= 0 ? bs->dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return vram__fail(VRAM_EINVAL,
                              "MatMul of %s and %s: batch dimensions %lld and %lld do not broadcast",
                              shape_str(as, s1, sizeof s1), shape_str(bs, s2, sizeof s2),
                              (long long)da, (long long)db);
        bdim[i] = da == 1 ? db : da;
        astr[i] = da == 1 ? 0 : acc_a;
        bstr[i] = db == 1 ? 0 : acc_b;
        acc_a *= da;
        acc_b *= db;
    }
    for (int i = 0; i < rbatch; i++)
        want.dim[want.rank++] = bdim[i];
    if (as->rank > 1)
        want.dim[want.rank++] = m;
    if (bs->rank > 1)
        want.dim[want.rank++] = n;
    int same = want.rank == ys->rank;
    for (int i = 0; same && i < want.rank; i++)
        same = want.dim[i] == ys->dim[i];
    if (!same)
        return vram__fail(VRAM_EINVAL, "MatMul of %s and %s gives %s, not %s",
                          shape_str(as, s1, sizeof s1), shape_str(bs, s2, sizeof s2),
                          shape_str(&want, s3, sizeof s3), shape_str(ys, s4, sizeof s4));

    int64_t batches = 1;
    for (int i = 0; i < rbatch; i++)
        batches *= bdim[i];
    if (batches == 0 || m == 0 || n == 0)
        return 0;
    memset(y, 0, (size_t)(batches * m * n) * sizeof *y);
    if (rb == 0) {
        /* b is one matrix: the batches of a stack into one tall product. */
        vram__cpu_gemm_acc(batches * m, n, k, 1.0f, a, k, 1, b, n, 1, y, n);
        return 0;
    }
    int64_t idx[VRAM__MAX_RANK] = {0};
    int64_t aoff = 0, boff = 0;
    for (int64_t t = 0; t < batches; t++) {
        vram__cpu_gemm_acc(m, n, k, 1.0f, a + aoff * m * k, k, 1, b + boff * k * n, n, 1,
                           y + t * m * n, n);
        /* Odometer over the batch index, moving both operands' offsets. */
        for (int i = rbatch - 1; i >= 0; i--) {
            aoff += astr[i];
            boff += bstr[i];
            if (++idx[i] < bdim[i])
                break;
            aoff -= astr[i] * bdim[i];
            boff -= bstr[i] * bdim[i];
            idx[i] = 0;
        }
    }
    return 0;
}
