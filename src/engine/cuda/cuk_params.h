/* src/engine/cuda/cuk_params.h - the parameter blocks of the engine's CUDA
 * kernels (kernels.cu), shared by the device code (nvcc, C++) and the host
 * code that fills them (cuk.c, cuk_steps.c; C11). Every kernel takes one of
 * these by value as its only argument, so a launch passes `{&params}`.
 *
 * Plain C on purpose: only int32_t, int64_t, float, double, pointers and
 * fixed arrays of them, so that gcc and nvcc lay a struct out the same way.
 * Pointers are device pointers. Multi-dimensional shapes are stored
 * innermost axis first ("r" arrays: r[0] is the last, fastest axis) after
 * the host has merged the axes it could, so the kernels unroll over
 * VRAM__CUK_MAX_RANK with constant indices. */
#ifndef VRAM_ENGINE_CUDA_CUK_PARAMS_H
#define VRAM_ENGINE_CUDA_CUK_PARAMS_H

#include <stdint.h>

#define VRAM__CUK_MAX_RANK 8 /* VRAM__MAX_RANK (graph.h); cuk.c checks */
#define VRAM__CUK_THREADS 256

/* The device view of vram__cuk_error (cuk.h); cuk.c checks the layout. */
typedef struct vram__cuk_errword {
    int32_t code;
    int32_t step;
    int64_t value;
    int64_t bound;
} vram__cuk_errword;

/* ---- the helpers exec_cuda.c uses around cuDNN and cuBLAS ---------------- */

typedef struct vram__cuk_pad2d_p {
    int64_t total; /* planes * oh * ow */
    int64_t h, w, oh, ow, top, left;
    const float *x;
    float *y;
} vram__cuk_pad2d_p;

typedef struct vram__cuk_broadcast2d_p {
    int64_t m, n, rows, cols;
    float beta;
    int32_t pad_;
    const float *c;
    float *y;
} vram__cuk_broadcast2d_p;

/* What follows a convolution: y = relu?(x + bias[channel] + other), where
 * bias and other may be NULL, relu is 0 or 1, and y may equal x or other. */
typedef struct vram__cuk_epilogue_p {
    int64_t total, c, spatial;
    int32_t relu, pad_;
    const float *x, *bias, *other;
    float *y;
} vram__cuk_epilogue_p;

/* A depthwise convolution (group == c_in == c_out): one thread per output
 * cell, any kernel, stride, dilation and pads (unequal ones too). `fixed`
 * names an unrolled 32-bit variant for the common shapes (10 * kernel side
 * + stride: 31, 32, 51, 52; dilation 1, sizes below 2^31), 0 the general
 * loop. */
typedef struct vram__cuk_dwconv_p {
    int32_t fixed, pad_;
    int64_t total; /* n * c * oh * ow */
    int64_t c, h, w, kh, kw, oh, ow;
    int64_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    const float *x, *wt, *bias; /* bias may be NULL */
    float *y;
} vram__cuk_dwconv_p;

/* ---- steps ----------------------------------------------------------------- */

/* ConvTranspose as a gather: one thread per output cell. */
typedef struct vram__cuk_convt_p {
    int64_t total; /* n * c_out * oh * ow */
    int64_t c_in, h, w, c_out, kh, kw, oh, ow;
    int64_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, group;
    const float *x, *wt, *bias; /* bias may be NULL */
    float *y;
} vram__cuk_convt_p;

typedef struct vram__cuk_batchnorm_p {
    int64_t total, c, spatial;
    float eps;
    int32_t pad_;
    const float *x, *scale, *bias, *mean, *var;
    float *y;
} vram__cuk_batchnorm_p;

typedef struct vram__cuk_unary_p {
    int64_t n;
    int32_t op; /* enum vram__unary_op */
    float p0, p1;
    int32_t pad_;
    const float *x;
    float *y;
} vram__cuk_unary_p;

/* Float binary ops: enum vram__binary_op, plus PRelu (a = x, b = slope). */
#define VRAM__CUK_BIN_PRELU 100

/* Broadcasting a op b into y (contiguous): moving one step along output
 * axis r moves ra[r] elements in a and rb[r] in b (0 where it broadcasts). */
typedef struct vram__cuk_binary_p {
    int64_t total;
    int64_t b_elems; /* b's element count, for a division by zero's report */
    int32_t rank, op;
    int32_t step; /* for the error word */
    int32_t pad_;
    int64_t rdim[VRAM__CUK_MAX_RANK], ra[VRAM__CUK_MAX_RANK], rb[VRAM__CUK_MAX_RANK];
    const void *a, *b;
    void *y;
    vram__cuk_errword *err; /* int64 Div by zero; may be NULL */
} vram__cuk_binary_p;

/* MaxPool and AveragePool: one thread per output cell. */
typedef struct vram__cuk_pool_p {
    int64_t total; /* n * c * oh * ow */
    int64_t h, w, kh, kw, oh, ow;
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int32_t count_include_pad, pad_;
    const float *x;
    float *y;
} vram__cuk_pool_p;

/* GlobalAveragePool: `planes` rows of `spatial` floats, each reduced to one. */
typedef struct vram__cuk_gap_p {
    int64_t planes, spatial;
    const float *x;
    float *y;
} vram__cuk_gap_p;

/* y (contiguous, `total` units of `unit` bytes) gathered from x: moving one
 * step along output axis r moves rdelta[r] units in x (negative allowed),
 * starting at unit `base`. Transpose and Slice. */
typedef struct vram__cuk_strided_p {
    int64_t total, base;
    int32_t rank, unit; /* unit: 1, 2, 4, 8 or 16 bytes */
    int64_t rdim[VRAM__CUK_MAX_RANK], rdelta[VRAM__CUK_MAX_RANK];
    const void *x;
    void *y;
} vram__cuk_strided_p;

/* y[r * dst_ld + c] = x[r * src_ld + c] for r < rows, c < cols, in units of
 * `unit` bytes. Concat and Split, one input or output per launch. */
typedef struct vram__cuk_copy2d_p {
    int64_t rows, cols, src_ld, dst_ld;
    int32_t unit, pad_;
    const void *x;
    void *y;
} vram__cuk_copy2d_p;

/* Pad: per axis (innermost first) the input extent and stride, the output
 * extent and the begin pad; `value`'s low `elem` bytes fill constant mode. */
typedef struct vram__cuk_pad_p {
    int64_t total;
    int32_t rank, mode, elem, pad_;
    int64_t value; /* bit pattern, little-endian */
    int64_t rxdim[VRAM__CUK_MAX_RANK], rxst[VRAM__CUK_MAX_RANK], rydim[VRAM__CUK_MAX_RANK],
        rbegin[VRAM__CUK_MAX_RANK];
    const void *x;
    void *y;
} vram__cuk_pad_p;

/* Resize (float): per axis, innermost first. rlinear: 1 where the axis is
 * interpolated (linear mode and the axis changes). */
typedef struct vram__cuk_resize_p {
    int64_t total;
    int32_t rank, mode, ctm, nearest;
    int64_t rxdim[VRAM__CUK_MAX_RANK], rxst[VRAM__CUK_MAX_RANK], rydim[VRAM__CUK_MAX_RANK];
    float rscale[VRAM__CUK_MAX_RANK];
    int32_t rlinear[VRAM__CUK_MAX_RANK];
    const float *x;
    float *y;
} vram__cuk_resize_p;

/* Softmax over x viewed as [outer, n, inner]. rows: one row per group of
 * `group` threads (32 or 256) when inner == 1; cols: one thread per (outer,
 * inner) column otherwise. */
typedef struct vram__cuk_softmax_p {
    int64_t outer, n, inner;
    int32_t group, pad_;
    const float *x;
    float *y;
} vram__cuk_softmax_p;

/* Gather along an axis of extent n: x viewed as [outer, n, inner_units],
 * y as [outer, ni, inner_units], units of `unit` bytes. check_only: no
 * output (outer or inner is 0), only the ni indices are checked. */
typedef struct vram__cuk_gather_p {
    int64_t total, outer, n, ni, inner;
    int32_t unit, check_only;
    int32_t step, pad_;
    const void *x;
    const int64_t *idx;
    void *y;
    vram__cuk_errword *err; /* may be NULL */
} vram__cuk_gather_p;

/* Cast n elements between vram_dtype numbers (both supported, differing,
 * or both BOOL to normalize). */
typedef struct vram__cuk_cast_p {
    int64_t n;
    int32_t from, to;
    const void *x;
    void *y;
} vram__cuk_cast_p;

#endif
