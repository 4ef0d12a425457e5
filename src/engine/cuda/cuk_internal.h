/* src/engine/cuda/cuk_internal.h - what the host side of the engine's CUDA
 * kernels shares between its two files: the list of kernels in kernels.cu,
 * the loaded module, and the launch plumbing (cuk.c), used by the per-step
 * parameter building (cuk_steps.c). */
#ifndef VRAM_ENGINE_CUDA_CUK_INTERNAL_H
#define VRAM_ENGINE_CUDA_CUK_INTERNAL_H

#include "cuk.h"
#include "cuk_params.h"

/* Every kernel of kernels.cu: X(name) for extern "C" vram_cuk_<name>. */
#define VRAM__CUK_KERNELS(X)                                                                  \
    X(pad2d) X(broadcast2d) X(epilogue) X(dwconv) X(convt) X(batchnorm) X(unary) X(binary) X(binary_i64)    \
    X(maxpool) X(avgpool) X(gap_warp) X(gap_block) X(softmax_rows) X(softmax_cols)            \
    X(strided) X(copy2d) X(pad) X(gather) X(resize) X(cast)

enum {
#define VRAM__CUK_ENUM(name) VRAM__CUK_K_##name,
    VRAM__CUK_KERNELS(VRAM__CUK_ENUM)
#undef VRAM__CUK_ENUM
    VRAM__CUK_K_COUNT
};

struct vram__cuk {
    CUmodule mod;
    CUfunction fn[VRAM__CUK_K_COUNT];
};

/* The most blocks a launch gets; the kernels' grid-stride loops do the rest
 * (132 SMs of an H200, 32 blocks' worth each). */
#define VRAM__CUK_MAX_BLOCKS (132 * 32)

/* Launch kernel `kid` with VRAM__CUK_THREADS threads per block and enough
 * blocks for `threads` threads (capped at VRAM__CUK_MAX_BLOCKS); nothing
 * for threads <= 0. params: the kernel's parameter block. */
int vram__cuk_launch(const vram__cuk *k, int kid, CUstream stream, int64_t threads, void *params);

/* Enqueue a device-to-device copy of n bytes (nothing for n == 0 or
 * dst == src). */
int vram__cuk_memcpy(CUstream stream, void *dst, const void *src, uint64_t n);

/* Where value v's shape is in the context's variant. */
static inline const vram__shape *vram__cuk_shape(const vram_exec *c, int v)
{
    return &c->var->shape[v];
}

/* Row-major element strides of s. */
static inline void vram__cuk_strides(const vram__shape *s, int64_t *st)
{
    int64_t acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= s->dim[i];
    }
}

/* Products of the extents before and after `axis`. */
static inline void vram__cuk_outer_inner(const vram__shape *s, int axis, int64_t *outer,
                                         int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= s->dim[i];
    for (int i = axis + 1; i < s->rank; i++)
        *inner *= s->dim[i];
}

/* cuk_move.c: drop the axes of extent 1 (dim is outermost first) and merge
 * an axis into the one before it when each of the nops operands' strides
 * make the pair one axis (outer stride == inner stride * inner extent).
 * Returns the rank left; dim and st are rewritten in place. */
int vram__cuk_merge_axes(int rank, int64_t *dim, int nops, int64_t (*st)[VRAM__MAX_RANK]);

/* cuk_move.c: the data-movement steps (Flatten/Reshape/... copies,
 * Transpose, Concat, Split, Slice, Pad, Gather), as vram__cuk_step. */
int vram__cuk_move_step(const vram__cuk *k, CUstream stream, const vram_exec *ctx, int index,
                        vram__cuk_error *err);

#endif
