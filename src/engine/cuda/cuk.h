/* src/engine/cuda/cuk.h - vramkit's own CUDA kernels for the engine: every
 * step that is not a convolution or a matrix product (those go to cuDNN and
 * cuBLAS, exec_cuda.c), plus the two small kernels that path needs. The
 * kernels are compiled into a fatbin embedded in the library and launched
 * through the driver API (cu.h): the library does not link the CUDA runtime.
 *
 * Every function enqueues work on `stream` and returns at once: 0, or a
 * negative VRAM_E* code with the sentence in vram_last_error(). Pointers
 * are device pointers. Kernels follow the CPU reference kernels' semantics
 * (src/engine/cpu/kernels_*.h) exactly, and where a value in the data makes
 * a step invalid (a Gather index out of range, an integer division by zero)
 * the kernel records it in the context's error word (vram__cuk_error, in
 * device memory) instead of writing garbage silently; the executor reads it
 * after the run. */
#ifndef VRAM_ENGINE_CUDA_CUK_H
#define VRAM_ENGINE_CUDA_CUK_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine_internal.h"
#include "base/internal.h"
#include "cu_engine.h"

/* The fatbin of kernels.cu (sm_90 code and compute_90 PTX), generated into
 * the build tree. */
extern const unsigned char vram__cuk_image[];
extern const size_t vram__cuk_image_size;

/* What a kernel found wrong in the data: the first error of a run wins. */
enum { VRAM__CUK_OK = 0, VRAM__CUK_GATHER_INDEX = 1, VRAM__CUK_DIV_ZERO = 2 };
typedef struct vram__cuk_error {
    int code;      /* VRAM__CUK_* */
    int step;      /* index of the step in its variant */
    long long value; /* the offending index (Gather) */
    long long bound; /* the axis' extent (Gather) */
} vram__cuk_error;

typedef struct vram__cuk vram__cuk;

/* Load the module into the current context and look up every kernel. */
int vram__cuk_load(vram__cuk **out);
void vram__cuk_unload(vram__cuk *k);

/* Enqueue step number `index` of ctx's variant (ctx->var->steps[index]),
 * whose values are at ctx->ptr[...] (device memory) with shapes
 * ctx->var->shape[...]. Any op but VRAM__OP_CONV, VRAM__OP_GEMM and
 * VRAM__OP_MATMUL (VRAM_EINVAL for those). err: the context's error word. */
int vram__cuk_step(const vram__cuk *k, CUstream stream, const vram_exec *ctx, int index,
                   vram__cuk_error *err);

/* y[n, c, h + top + bottom, w + left + right] = x zero-padded (NCHW, float). */
int vram__cuk_pad2d(const vram__cuk *k, CUstream stream, int64_t n, int64_t c, int64_t h,
                    int64_t w, int64_t top, int64_t left, int64_t bottom, int64_t right,
                    const float *x, float *y);

/* y[i, j] = beta * c[i % rows, j % cols] for i < m, j < n (rows in {1, m},
 * cols in {1, n}): Gemm's C broadcast into its output before cuBLAS adds
 * alpha * A B with beta = 1. With beta == 0, c is not read (y = 0). */
int vram__cuk_broadcast2d(const vram__cuk *k, CUstream stream, int64_t m, int64_t n, int64_t rows,
                          int64_t cols, float beta, const float *c, float *y);

/* What follows a convolution cuDNN ran without its bias, in one pass over
 * n * c * spatial elements: y[i] = x[i] + bias[(i / spatial) % c], plus
 * other[i] (a residual Add) unless other is NULL, then max(., 0) if relu;
 * bias may be NULL too. y may equal x or other. */
int vram__cuk_epilogue(const vram__cuk *k, CUstream stream, int64_t n, int64_t c, int64_t spatial,
                       const float *x, const float *bias, const float *other, int relu, float *y);

/* A depthwise convolution (group == c_in == c_out) with its bias (NULL:
 * none) in one kernel: unequal pads need no padded copy. */
int vram__cuk_dwconv(const vram__cuk *k, CUstream stream, const vram__conv2d *p, const float *x,
                     const float *w, const float *bias, float *y);

#endif
