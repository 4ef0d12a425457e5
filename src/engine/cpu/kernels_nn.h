/* src/engine/cpu/kernels_nn.h - the float32 neural-network kernels of the CPU
 * reference executor: convolution and transposed convolution (im2col/col2im
 * around a blocked GEMM, a direct loop for depthwise), pooling, Gemm, MatMul
 * with NumPy broadcasting, and inference BatchNormalization with its folding
 * into a preceding convolution. Tensors are dense NCHW, row-major, float32,
 * owned by the caller; no kernel keeps a pointer after it returns. Outputs
 * must not overlap inputs. */
#ifndef VRAM_ENGINE_CPU_KERNELS_NN_H
#define VRAM_ENGINE_CPU_KERNELS_NN_H

#include <stdint.h>

#include "engine/cpu/scalar.h" /* vram__valid_range */
#include "engine/graph.h"

typedef struct vram__conv2d {
    int64_t n, c_in, h, w;          /* input */
    int64_t c_out, kh, kw;          /* weight: [c_out, c_in/group, kh, kw] (Conv) */
    int64_t oh, ow;                 /* output spatial size (the caller computes it) */
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int64_t group;
} vram__conv2d;

/* y[n, c_out, oh, ow] = conv(x, w) + bias (bias may be NULL). Grouped and
 * depthwise (group == c_in == c_out) included. scratch: scratch_bytes of
 * the caller's memory for im2col tiles, as long as it allows; with less
 * than one column (or NULL) the convolution runs as a direct loop that needs
 * none. Depthwise and 1x1 stride-1 convolutions never use it. Returns 0, or
 * VRAM_EINVAL for a descriptor that makes no sense (negative sizes or pads,
 * strides/dilations/kernel/group below 1, channels not divisible by group);
 * on error y is untouched. Cells of the output grid whose window lies
 * wholly in the padding get the bias alone. Allocates nothing. */
int vram__cpu_conv2d(const vram__conv2d *p, const float *x, const float *w, const float *bias,
                     float *y, void *scratch, uint64_t scratch_bytes);
/* The most scratch vram__cpu_conv2d can use for p within `limit` bytes
 * (0: it needs none, or not even one column fits: the direct loop). */
uint64_t vram__cpu_conv2d_scratch(const vram__conv2d *p, uint64_t limit);

/* ConvTranspose: here c_in/c_out are the op's input/output channels, the
 * weight is [c_in, c_out/group, kh, kw], oh/ow already include
 * output_padding; pads as ONNX's (pads remove from the full output).
 * Scratch and returns as vram__cpu_conv2d (columns for col2im; without, a
 * direct scatter). */
int vram__cpu_conv_transpose2d(const vram__conv2d *p, const float *x, const float *w,
                               const float *bias, float *y, void *scratch, uint64_t scratch_bytes);
uint64_t vram__cpu_conv_transpose2d_scratch(const vram__conv2d *p, uint64_t limit);

typedef struct vram__pool2d {
    int64_t n, c, h, w, kh, kw, oh, ow;
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int count_include_pad;          /* AveragePool */
} vram__pool2d;

/* MaxPool: padding never wins; a window with no input cell (only possible
 * with an output grid larger than ONNX's) yields -FLT_MAX, as ONNX Runtime. */
void vram__cpu_maxpool2d(const vram__pool2d *p, const float *x, float *y);
/* AveragePool: the divisor counts the window's cells inside the input
 * (count_include_pad == 0) or is the whole window, kh * kw
 * (count_include_pad != 0), also where ceil_mode takes a window past the
 * padded input, as ONNX Runtime divides. A window with no cell in the
 * padded input gives 0. */
void vram__cpu_avgpool2d(const vram__pool2d *p, const float *x, float *y);
/* GlobalAveragePool over x[n, c, spatial] into y[n, c]. */
void vram__cpu_global_avgpool(int64_t n, int64_t c, int64_t spatial, const float *x, float *y);

/* Gemm: Y[m,n] = alpha * A' B' + beta * C, A' = trans_a ? A^T : A with A'
 * of shape [m,k] (likewise B' of shape [k,n]); C (may be NULL) broadcasts
 * from [c_rows, c_cols] with c_rows in {1, m} and c_cols in {1, n}. With
 * beta == 0 C is not read. */
void vram__cpu_gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, const float *b, float beta, const float *c, int64_t c_rows,
                    int64_t c_cols, float *y);

/* MatMul with NumPy semantics: 1-D operands promoted and the added axis
 * removed, batch dimensions broadcast. ys must be the result shape (the
 * caller infers it); returns VRAM_EINVAL with a message if shapes disagree
 * (y untouched then). */
int vram__cpu_matmul(const vram__shape *as, const float *a, const vram__shape *bs, const float *b,
                     const vram__shape *ys, float *y);

/* BatchNormalization (inference) on [n, c, spatial...] flattened to spatial:
 * y = (x - mean) / sqrt(var + eps) * scale + bias, per channel. */
void vram__cpu_batchnorm(int64_t n, int64_t c, int64_t spatial, const float *x, const float *scale,
                         const float *bias, const float *mean, const float *var, float eps,
                         float *y);

/* Fold a BatchNormalization that follows a Conv into the Conv's weights and
 * bias, in place: w is [c_out, w_per_out] and b has c_out entries (zeros if
 * the convolution had none). Conv only: ConvTranspose weights are laid out
 * [c_in, c_out/group, ...] and are not handled here. */
void vram__cpu_bn_fold(int64_t c_out, int64_t w_per_out, float *w, float *b, const float *scale,
                       const float *bias, const float *mean, const float *var, float eps);

/* The descriptor checks of vram__cpu_conv2d and vram__cpu_conv_transpose2d
 * (VRAM_EINVAL naming `op` and every parameter), shared with the CUDA
 * kernels' host side. */
int vram__conv2d_check(const vram__conv2d *p, const char *op);

/* ---- shared by the kernels' files ------------------------------------ */

/* y[i*ldy + j] += alpha * sum_p A(i,p) B(p,j) for i < m, j < n, p < k, with
 * A(i,p) = a[i*ars + p*acs] and B(p,j) = b[p*brs + j*bcs]: any strides, so
 * transposes are views. Blocked over k and n; a B with bcs != 1 is packed
 * block by block into a stack buffer so the inner loop stays contiguous. */
void vram__cpu_gemm_acc(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars,
                        int64_t acs, const float *b, int64_t brs, int64_t bcs, float *y,
                        int64_t ldy);

/* Gemm's start: y[m,n] = beta * C broadcast from [c_rows, c_cols], or 0
 * (c NULL or beta 0). */
void vram__gemm_init_y(int64_t m, int64_t n, float beta, const float *c, int64_t c_rows,
                       int64_t c_cols, float *y);

/* One row of a convolution's im2col matrix: out[0:ns] = the input cell tap
 * r = (ci*kh + ky)*kw + kx reads at output positions s0 .. s0+ns-1
 * (row-major over oh x ow), 0 in the padding; xg holds the group's input
 * planes. */
void vram__im2col_row(const vram__conv2d *p, const float *xg, int64_t r, int64_t s0, int64_t ns,
                      float *out);

#endif
