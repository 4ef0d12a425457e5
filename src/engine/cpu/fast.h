/* src/engine/cpu/fast.h - the CPU executor's fast kernels: a packed GEMM on
 * register tiles for the CPU's vector unit (sgemm.c, sgemm_kernels.c), the
 * convolutions built on it with im2col packed straight into its panels
 * (conv_fast.c), a vectorized depthwise convolution (dwconv.c), and the
 * epilogue they share: bias, a residual Add and an activation applied while
 * the output is still in cache. The plain-C kernels of kernels_nn.h stay the
 * reference these are tested against. All work on the caller's memory
 * (scratch included) and allocate nothing. Each splits its work into parts
 * (part of parts, 0 <= part < parts) that may run on different threads at
 * once, each with its own scratch; parts == 1 runs it whole. */
#ifndef VRAM_ENGINE_CPU_FAST_H
#define VRAM_ENGINE_CPU_FAST_H

#include <stdint.h>

#include "engine/cpu/kernels_nn.h"

/* ---- register tiles and the CPU's level ------------------------------- */

enum { VRAM__ISA_PORTABLE, VRAM__ISA_AVX2, VRAM__ISA_AVX512 };

/* One tile: c[i*ldc + j] for i < mr, j < nr is set to (load: incremented
 * by) sum_{p < kc} a[p*mr + i] * b[p*nr + j]. */
typedef void (*vram__tile_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                              int load);

typedef struct vram__cpu_isa {
    const char *name; /* "avx512", "avx2", "portable" */
    int mr, nr;
    vram__tile_fn tile;
} vram__cpu_isa;

/* The tiles in use: the best the CPU has, unless forced. */
const vram__cpu_isa *vram__cpu_isa_get(void);
/* Use `level` (VRAM__ISA_...; above what the CPU has, or negative: the best)
 * from now on, process-wide; returns the level taken. */
int vram__cpu_isa_force(int level);
int vram__cpu_isa_best(void);

/* ---- epilogue ---------------------------------------------------------- */

/* Applied to each output element y[i, j] in this order, once its sum is
 * complete: + bias[i], + add[i*ld_add + j], then act (a vram__unary_op, with
 * act_p its parameters as vram__cpu_unary takes them; -1 none). Every
 * field optional; {.act = -1} is none. Rounds exactly as the separate
 * steps would. */
typedef struct vram__epilogue {
    const float *bias;
    const float *add;
    int64_t ld_add;
    int act;
    const float *act_p;
} vram__epilogue;

/* Apply ep to y[i*ldy + j] for i0 <= i < i0 + m, j0 <= j < j0 + nc (the
 * indices bias and add are read at). NULL ep: nothing. */
void vram__epilogue_rows(const vram__epilogue *ep, int64_t i0, int64_t m, int64_t j0, int64_t nc,
                         float *y, int64_t ldy);

/* ---- packed GEMM ------------------------------------------------------- */

/* Where B (k x n) comes from: a strided matrix, B(p, j) = b[p*brs + j*bcs],
 * or (conv non-NULL) the im2col view of a convolution's input planes x of
 * one group: row p = (ci*kh + ky)*kw + kx, column j = output position. */
typedef struct vram__sgemm_b {
    const float *b;
    int64_t brs, bcs;
    const vram__conv2d *conv;
    const float *x;
} vram__sgemm_b;

/* A (m x k): A(i, p) = a[i*lda + p]; and, when packed is not NULL, the
 * same matrix already in the panels of tiles packed_mr rows tall
 * (vram__cpu_sgemm_pack_a), which the GEMM reads instead of packing A
 * itself while the tiles in use are that tall. */
typedef struct vram__sgemm_a {
    const float *a;
    int64_t lda;
    const float *packed;
    int packed_mr;
} vram__sgemm_a;

/* Floats of A packed for tiles mr rows tall, and the packing: every k
 * block of KC columns in turn, all rows of it in panels of mr (the last
 * zero-padded). */
int64_t vram__cpu_sgemm_packed_floats(int64_t m, int64_t k, int mr);
void vram__cpu_sgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda, int mr,
                            float *dst);

/* Y[m, n] = A B, then the epilogue (ep may be NULL): Y(i, j) = y[i*ldy + j].
 * Split by parts over rows or columns, whichever has more tiles. scratch:
 * vram__cpu_sgemm_scratch(m, n, k) bytes, aligned to 64, for this part
 * alone. */
void vram__cpu_sgemm(int64_t m, int64_t n, int64_t k, const vram__sgemm_a *a,
                     const vram__sgemm_b *b, float *y, int64_t ldy, const vram__epilogue *ep,
                     void *scratch, int part, int parts);
uint64_t vram__cpu_sgemm_scratch(int64_t m, int64_t n, int64_t k);

/* y[i*ldy + j] += alpha * dot(a + i*lda, b + j*ldb) over k, for i < m and
 * j < n: A times n vectors, for n so small that a register tile would be
 * mostly waste (dots.c). */
void vram__cpu_dots(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *y, int64_t ldy);

/* GlobalAveragePool as vram__cpu_global_avgpool, on the vector unit
 * (reduce.c). */
void vram__cpu_global_avgpool_fast(int64_t n, int64_t c, int64_t spatial, const float *x,
                                   float *y);

/* Gemm as vram__cpu_gemm, on the dot products when B' is a transposed
 * matrix (each column of B' contiguous) and A' has few rows, and on the
 * reference loop otherwise. */
void vram__cpu_gemm_fast(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, const float *b, float beta, const float *c,
                         int64_t c_rows, int64_t c_cols, float *y);

/* ---- convolutions ------------------------------------------------------ */

/* Conv as vram__cpu_conv2d, with ep applied (ep->bias ignored: bias is the
 * convolution's), through the packed GEMM for dense and grouped
 * convolutions and the vectorized loop for depthwise ones. scratch:
 * vram__cpu_conv2d_fast_scratch(p) bytes for this part, aligned to 64.
 * packed_w: NULL, or w as vram__cpu_conv2d_pack packed it for tiles
 * packed_mr rows tall (read instead of w while the tiles in use are).
 * VRAM_EINVAL as vram__cpu_conv2d. */
int vram__cpu_conv2d_fast(const vram__conv2d *p, const float *x, const float *w,
                          const float *packed_w, int packed_mr, const float *bias,
                          const vram__epilogue *ep, float *y, void *scratch, int part, int parts);
/* The weights of a dense or grouped Conv packed for tiles mr rows tall,
 * each group's [c_out/group, K] in turn: the floats needed (0 for a
 * depthwise or empty one, which takes no packed weights), and the packing
 * into dst. */
int64_t vram__cpu_conv2d_packed_floats(const vram__conv2d *p, int mr);
void vram__cpu_conv2d_pack(const vram__conv2d *p, const float *w, int mr, float *dst);
uint64_t vram__cpu_conv2d_fast_scratch(const vram__conv2d *p);

/* Depthwise (one input channel per group, any multiplier) for channels
 * [c0, c1) of the output, all of the batch: y = conv + bias, then ep;
 * scratch: vram__cpu_dwconv_scratch(p) bytes. */
void vram__cpu_dwconv(const vram__conv2d *p, const float *x, const float *w, const float *bias,
                      const vram__epilogue *ep, float *y, int64_t c0, int64_t c1, float *scratch);
/* Its scratch: a padded copy of one input plane (dwconv.c says how). */
uint64_t vram__cpu_dwconv_scratch(const vram__conv2d *p);

#endif
