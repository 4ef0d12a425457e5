/* src/engine/cpu/dots.c - matrix times a few vectors as dot products: the
 * shape of a fully connected layer at batch 1 (Gemm with its weights
 * transposed) and of a 1x1 convolution on a 1x1 plane (a squeeze-and-
 * excitation block), where a register tile would compute one useful column
 * of its 32; and Gemm on them where it has that shape. Reading A once is the cost: each pass takes four of its rows
 * against one vector, 16 floats a step, in eight independent sums. Built
 * for AVX-512, AVX2 and any x86-64 (simd.h). */
#include <string.h>

#include "engine/cpu/fast.h"
#include "engine/cpu/simd.h"

#define VW 16

/* As in dwconv.c: memcpy loads, macros so no vector crosses a call. */
typedef float dots_vf __attribute__((vector_size(64)));
#define LOADV(v, ptr) memcpy(&(v), (ptr), sizeof(v))

/* s = the sum of v's lanes. */
#define HSUM(s, v)                                                                              \
    do {                                                                                        \
        (s) = 0.0f;                                                                             \
        for (int t_ = 0; t_ < VW; t_++)                                                         \
            (s) += (v)[t_];                                                                     \
    } while (0)

/* dot(a + r*lda, x) for r < R (R <= 4), added times alpha to out[r*ldo]. */
static inline __attribute__((always_inline)) void rows_dot(int64_t k, const float *a,
                                                           int64_t lda, const float *x,
                                                           float alpha, float *out, int64_t ldo,
                                                           const int R)
{
    dots_vf acc[4][2];
    memset(acc, 0, sizeof acc);
    int64_t p = 0;
    for (; p + 2 * VW <= k; p += 2 * VW) {
        dots_vf x0, x1;
        LOADV(x0, x + p);
        LOADV(x1, x + p + VW);
        for (int r = 0; r < R; r++) {
            dots_vf a0, a1;
            LOADV(a0, a + r * lda + p);
            LOADV(a1, a + r * lda + p + VW);
            acc[r][0] += a0 * x0;
            acc[r][1] += a1 * x1;
        }
    }
    for (int r = 0; r < R; r++) {
        dots_vf sum = acc[r][0] + acc[r][1];
        float s;
        HSUM(s, sum);
        for (int64_t q = p; q < k; q++)
            s += a[r * lda + q] * x[q];
        out[r * ldo] += alpha * s;
    }
}

VRAM__CPU_CLONES
static void dots(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float *y, int64_t ldy)
{
    for (int64_t j = 0; j < n; j++) {
        const float *x = b + j * ldb;
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            rows_dot(k, a + i * lda, lda, x, alpha, y + i * ldy + j, ldy, 4);
        for (; i < m; i++)
            rows_dot(k, a + i * lda, lda, x, alpha, y + i * ldy + j, ldy, 1);
    }
}

void vram__cpu_dots(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *y, int64_t ldy)
{
    if (m > 0 && n > 0 && k > 0)
        dots(m, n, k, alpha, a, lda, b, ldb, y, ldy);
}

/* A fully connected layer's rows at most: past that the weights are read
 * once per row, and the reference loop, which reads them once per block,
 * wins. */
#define GEMM_DOTS_MAX_ROWS 4

void vram__cpu_gemm_fast(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, const float *b, float beta, const float *c,
                         int64_t c_rows, int64_t c_cols, float *y)
{
    if (trans_a || !trans_b || m > GEMM_DOTS_MAX_ROWS) {
        vram__cpu_gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, c_rows, c_cols, y);
        return;
    }
    if (m <= 0 || n <= 0)
        return;
    vram__gemm_init_y(m, n, beta, c, c_rows, c_cols, y);
    /* Row r of Y, as a column: B [n,k] (row j: column j of B') times row r
     * of A'. */
    for (int64_t r = 0; r < m; r++)
        vram__cpu_dots(n, 1, k, alpha, b, k, a + r * k, k, y + r * n, 1);
}
