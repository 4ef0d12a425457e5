/* src/engine/cpu/kernels_elem.h - the CPU reference executor's element-wise
 * and data-movement kernels: activations, broadcasting arithmetic, softmax,
 * transpose/concat/split/slice/pad/gather on any element size, resize and
 * cast. Implemented in elem.c (arithmetic, softmax, cast), movement.c (data
 * movement) and resize.c.
 *
 * Shapes are vram__shape (row-major, every dimension known) and the buffers
 * are the caller's: the kernels allocate nothing except resize's small
 * per-axis tables. Functions returning int check their arguments first and
 * return 0, or a negative VRAM_E* code with the sentence in
 * vram_last_error(); on an error they have written nothing to the output.
 * The void functions trust their caller (shapes already checked by shape
 * inference) and cannot fail. An `axis` may be negative (counted from the
 * end, as ONNX) wherever one is taken. */
#ifndef VRAM_ENGINE_CPU_KERNELS_ELEM_H
#define VRAM_ENGINE_CPU_KERNELS_ELEM_H

#include <stddef.h>
#include <stdint.h>

#include "engine/graph.h"

/* ---- element-wise ------------------------------------------------------ */

enum vram__unary_op {
    VRAM__UN_RELU,
    VRAM__UN_SIGMOID,
    VRAM__UN_TANH,
    VRAM__UN_LEAKY_RELU,   /* p[0] alpha (0.01 when params is NULL) */
    VRAM__UN_CLIP,         /* p[0] min, p[1] max (-inf, +inf when params is NULL) */
    VRAM__UN_HARD_SIGMOID, /* p[0] alpha, p[1] beta (0.2, 0.5 when params is NULL) */
    VRAM__UN_HARD_SWISH,
    VRAM__UN_IDENTITY,
};

/* y[i] = op(x[i]) for n elements; y may equal x (in place). NaN inputs stay
 * NaN for every op (Relu and Clip compare rather than use fmaxf). An op
 * outside the enum writes NaN everywhere, so a caller's bug cannot pass for
 * a result. */
void vram__cpu_unary(int op, const float *params, int64_t n, const float *x, float *y);

/* PRelu: y = x < 0 ? slope * x : x, slope broadcasting to x
 * (unidirectional, NumPy rules). y may equal x. VRAM_EINVAL if the slope's
 * shape does not broadcast to x's. */
int vram__cpu_prelu(const vram__shape *xs, const float *x, const vram__shape *ss, const float *slope,
                    float *y);

enum vram__binary_op { VRAM__BIN_ADD, VRAM__BIN_SUB, VRAM__BIN_MUL, VRAM__BIN_DIV };

/* y = a op b with NumPy broadcasting; ys must be the broadcast shape of as
 * and bs (vram__broadcast_shape), else VRAM_EINVAL; an unknown op is
 * VRAM_EINVAL. y may alias a or b when that operand has shape ys (in
 * place). Float division follows IEEE (x/0 is inf or NaN). */
int vram__cpu_binary(int op, const vram__shape *as, const float *a, const vram__shape *bs, const float *b,
                     const vram__shape *ys, float *y);

/* The same on int64. Add, Sub and Mul wrap around on overflow (two's
 * complement, as NumPy). Div truncates toward zero as ONNX; INT64_MIN / -1
 * gives INT64_MIN. A zero divisor anywhere in b is VRAM_EINVAL, found before
 * anything is written. */
int vram__cpu_binary_i64(int op, const vram__shape *as, const int64_t *a, const vram__shape *bs,
                         const int64_t *b, const vram__shape *ys, int64_t *y);

/* out = the broadcast of a and b (NumPy rules; out may be a or b). A
 * dimension of -1 (unknown) against 1 or -1 stays -1, and against n != 1
 * gives n (the only value a valid model allows). VRAM_EINVAL with both
 * shapes in the message if they are incompatible; out is then unchanged. */
int vram__broadcast_shape(const vram__shape *a, const vram__shape *b, vram__shape *out);

/* Softmax along `axis` (opset 13 semantics; the caller reshapes for older
 * opsets): the maximum is subtracted first, so large inputs do not
 * overflow. y may equal x. */
void vram__cpu_softmax(const vram__shape *s, int axis, const float *x, float *y);

/* ---- data movement, any element size `elem` in bytes ------------------- */

/* y = x with its axes permuted: y's axis i is x's axis perm[i]. y must not
 * overlap x. */
void vram__cpu_transpose(size_t elem, const vram__shape *xs, const int *perm, const void *x, void *y);

/* Concatenate n tensors xs[i]/x[i] along axis into y of shape ys. */
void vram__cpu_concat(size_t elem, int axis, int n, const vram__shape *const *xs, const void *const *x,
                      const vram__shape *ys, void *y);

/* Split x along axis into n tensors, y[i] holding sizes[i] slices of that
 * axis (the sizes add up to the axis' extent). */
void vram__cpu_split(size_t elem, int axis, const vram__shape *xs, const void *x, int n,
                     const int64_t *sizes, void *const *y);

/* Slice with per-axis normalized starts and steps for all rank axes (the
 * caller has clamped them as ONNX says); ys gives the output extents:
 * y[i0, i1, ...] = x[starts[0] + i0*steps[0], ...]. Negative steps allowed. */
void vram__cpu_slice(size_t elem, const vram__shape *xs, const void *x, const int64_t *starts,
                     const int64_t *steps, const vram__shape *ys, void *y);

enum vram__pad_mode { VRAM__PAD_CONSTANT, VRAM__PAD_REFLECT, VRAM__PAD_EDGE };

/* Pad x into y. pads: 2*rank entries, begins then ends, may be negative
 * (cropping); ys must be xs grown by the pads. value: one element (constant
 * mode) or NULL for zero bytes. Reflect mirrors without repeating the
 * border element and keeps mirroring when a pad is longer than the axis
 * (NumPy's "reflect"); an axis of extent 1 repeats its one element.
 * VRAM_EINVAL for a bad mode, a shape mismatch, or reflect/edge padding of
 * an axis with no elements. */
int vram__cpu_pad(size_t elem, int mode, const vram__shape *xs, const void *x, const int64_t *pads,
                  const void *value, const vram__shape *ys, void *y);

/* Gather along axis: y = x[..., idx[...], ...] with ys = xs[:axis] + is +
 * xs[axis+1:]. Indices are int64, negative ones count from the end. An
 * index out of [-dim, dim) is VRAM_EINVAL naming the index and the bound,
 * found before anything is written; so is a ys that does not match. */
int vram__cpu_gather(size_t elem, int axis, const vram__shape *xs, const void *x, const vram__shape *is,
                     const int64_t *idx, const vram__shape *ys, void *y);

/* ---- resize, float32 ----------------------------------------------------- */

/* Resize (opset 11+ semantics). mode: 0 nearest, 1 linear (N-linear over
 * every axis whose scale != 1 or whose extent changes; the others are
 * copied), 2 cubic is VRAM_ENOSYS. ctm (coordinate_transformation_mode):
 * 0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel,
 * 4 tf_half_pixel_for_nearest. nearest_mode: 0 round_prefer_floor,
 * 1 round_prefer_ceil, 2 floor, 3 ceil. scales per axis (output/input as
 * given, or derived from sizes by the caller). Source coordinates are
 * computed in float, as ONNX Runtime (the reference) does, and clamped to
 * the input's edge; align_corners divides by the output extent - 1 as ONNX
 * Runtime does (ONNX's reference uses in * scale - 1); pytorch_half_pixel
 * maps to 0 when the output extent is 1.
 * VRAM_EINVAL for ranks that differ, a scale <= 0 or not finite, an
 * unknown ctm or nearest_mode, or an empty input axis with a non-empty
 * output; VRAM_EHOSTMEM if the per-axis tables cannot be allocated.
 * scratch: at least vram__cpu_resize_scratch(ys) bytes for those tables, or
 * NULL to have the kernel allocate them per call. */
int vram__cpu_resize(int mode, int ctm, int nearest_mode, const vram__shape *xs, const float *x,
                     const float *scales, const vram__shape *ys, float *y, void *scratch);
uint64_t vram__cpu_resize_scratch(const vram__shape *ys);

/* ---- cast ---------------------------------------------------------------- */

/* Convert n elements between FLOAT, DOUBLE, FLOAT16, INT64, INT32, INT8,
 * UINT8 and BOOL (vram_dtype numbers). Floating to integer truncates
 * toward zero; NaN becomes 0 and values beyond the target's range saturate
 * to its minimum or maximum (ONNX leaves this undefined; e.g. 3e9f to int32
 * is 2147483647). Integer to narrower integer wraps (two's complement, as
 * NumPy). Anything to bool is x != 0 (so NaN is true); bool reads any
 * non-zero byte as 1. To float16 rounds to nearest even, overflowing to
 * inf, with subnormals and NaN kept. y may equal x only when the two types
 * have the same size. VRAM_ENOSYS for any other type. */
int vram__cpu_cast(int from, int to, int64_t n, const void *x, void *y);
/* 0 if Cast converts from `from` to `to` (every executor's kernels), else
 * VRAM_ENOSYS naming both types. */
int vram__cast_check(int from, int to);

/* ---- argument checks and helpers, shared with the CUDA kernels' host side */

/* ys must be the broadcast of as and bs with every dimension known:
 * VRAM_EINVAL naming `what` and the three shapes otherwise. */
int vram__bcast_check(const char *what, const vram__shape *as, const vram__shape *bs,
                      const vram__shape *ys);
/* Element strides of operand s seen through the output shape ys (s aligned
 * to the right, as NumPy): 0 on the axes s broadcasts along. */
void vram__bcast_strides(const vram__shape *s, const vram__shape *ys, int64_t *st);
/* "Add", "Sub", "Mul", "Div" for enum vram__binary_op. */
const char *vram__binary_name(int op);
/* vram__cpu_pad's shape checks (mode, output = input grown by the pads). */
int vram__pad_check(int mode, const vram__shape *xs, const int64_t *pads, const vram__shape *ys);
/* vram__cpu_gather's checks of the axis and shapes (not of the index
 * values); *axis comes back non-negative. */
int vram__gather_check(int *axis, const vram__shape *xs, const vram__shape *is,
                       const vram__shape *ys);
/* vram__cpu_resize's argument checks, with its messages. */
int vram__resize_check(int mode, int ctm, int nearest_mode, const vram__shape *xs,
                       const float *scales, const vram__shape *ys);

/* ---- helpers shared by the kernel files ------------------------------- */

/* Elements of a shape whose dimensions are all known (1 for a scalar). */
static inline int64_t vram__cpu_elems(const vram__shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dim[i];
    return n;
}

/* "[2,3,224,224]" (or "[]" for a scalar) into buf of cap bytes; returns buf. */
char *vram__cpu_shape_fmt(const vram__shape *s, char *buf, size_t cap);

#endif
