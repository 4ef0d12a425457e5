/* src/engine/shape_ops.h - what the per-operator shape rules (shape_nn.c,
 * shape_tensor.c, shape_const.c) share with the driver in shape.c: the
 * context of the node being inferred, error sentences that name it, reading
 * constant inputs and attributes, axis normalization, broadcasting, and
 * element access for folding (shape_elem.c). Internal to shape inference. */
#ifndef VRAM_ENGINE_SHAPE_OPS_H
#define VRAM_ENGINE_SHAPE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "graph.h"

/* The node being inferred. `fold` is set when the operator folds and every
 * present input is constant: the rule then computes its outputs' data. */
typedef struct vram__sx {
    vram__graph *g;
    vram__node *n;
    int node;                  /* index of n */
    int fold;
    const unsigned char *used; /* per value: read by a node or a graph output */
} vram__sx;

/* "[1,3,224,224]" (or "[?]" for an unknown rank), for messages:
 * vram__sx_dims(&s).s stays valid until the end of the full expression. */
typedef struct vram__shape_text {
    char s[200];
} vram__shape_text;
vram__shape_text vram__sx_dims(const vram__shape *s);

/* Set the error `code` with "node 'name' (Op, node i): <formatted>" and
 * return code. */
int vram__sx_fail(const vram__sx *c, int code, const char *fmt, ...) VRAM__PRINTF(3, 4);

/* Input i, or NULL when absent (past n_in or -1). Inputs present are known
 * to have a dtype and a shape (the driver checked). */
const vram__value *vram__sx_in(const vram__sx *c, int i);
/* Output i, or NULL when absent. */
vram__value *vram__sx_out(const vram__sx *c, int i);
/* Does the value hold constant contents (data set, or an initializer with
 * no elements)? */
int vram__sx_is_const(const vram__value *v);

/* Give output i (if present) its dtype and shape. Checks the rank fits. */
int vram__sx_set(const vram__sx *c, int i, int dtype, const vram__shape *s);
/* Hand output i (present, its shape set) the folded contents `data`
 * (taken over, freed on error) of elems(shape) * dtype_size bytes. */
int vram__sx_set_data(const vram__sx *c, int i, void *data);
/* Allocate the folded contents of output i (shape and dtype set): zeroed,
 * at least one byte so that an empty constant is still marked constant. */
void *vram__sx_alloc_out(const vram__sx *c, int i);

/* The integer contents (int64 or int32) of constant input i, at most `cap`
 * of them, in out[0..*n). `what` names the input in messages ("shape").
 * VRAM_ENOSYS when the input is computed at run time. */
int vram__sx_const_ints(const vram__sx *c, int i, const char *what, int64_t *out, int cap,
                        int *n);
/* The same for float, double or float16 contents, read as double. */
int vram__sx_const_floats(const vram__sx *c, int i, const char *what, double *out, int cap,
                          int *n);
/* An INTS attribute: at most cap entries into out; *n = -1 if absent. */
int vram__sx_attr_ints(const vram__sx *c, const char *name, int64_t *out, int cap, int *n);

/* Normalize axis (negative counts from the back) into [0, rank); `what`
 * names it in the message. */
int vram__sx_axis(const vram__sx *c, int64_t axis, int rank, const char *what, int *out);

/* Multidirectional (numpy) broadcast of a and b. */
int vram__sx_broadcast(const vram__sx *c, const vram__shape *a, const vram__shape *b,
                       vram__shape *out);
/* Can `from` be broadcast to `to` (unidirectional, numpy rules)? */
int vram__sx_unidir_ok(const vram__shape *from, const vram__shape *to);

/* Is this output consumed by a node or a graph output? */
int vram__sx_out_used(const vram__sx *c, int i);

/* Element access for folding (shape_elem.c); dtype is one
 * vram_dtype_size() knows. Conversions follow C casts, except that NaN and
 * out-of-range floats saturate into integers instead of being undefined. */
int64_t vram__sx_get_i64(const void *data, int dtype, size_t i);
double vram__sx_get_f64(const void *data, int dtype, size_t i);
void vram__sx_put_i64(void *data, int dtype, size_t i, int64_t v);
void vram__sx_put_f64(void *data, int dtype, size_t i, double v);
int vram__sx_is_float_type(int dtype);
int vram__sx_is_int_type(int dtype);

/* Per-operator rules (shape_nn.c, shape_tensor.c, shape_const.c). Each
 * checks its inputs, sets its outputs' dtypes and shapes, and folds when
 * c->fold says so. */
int vram__sx_conv(vram__sx *c);
int vram__sx_conv_transpose(vram__sx *c);
int vram__sx_pool(vram__sx *c);
int vram__sx_global_pool(vram__sx *c);
int vram__sx_batchnorm(vram__sx *c);
int vram__sx_unary(vram__sx *c);
int vram__sx_clip(vram__sx *c);
int vram__sx_prelu(vram__sx *c);
int vram__sx_binary(vram__sx *c);
int vram__sx_gemm(vram__sx *c);
int vram__sx_matmul(vram__sx *c);
int vram__sx_softmax(vram__sx *c);

int vram__sx_identity(vram__sx *c);
int vram__sx_flatten(vram__sx *c);
int vram__sx_reshape(vram__sx *c);
int vram__sx_transpose(vram__sx *c);
int vram__sx_concat(vram__sx *c);
int vram__sx_split(vram__sx *c);
int vram__sx_slice(vram__sx *c);
int vram__sx_squeeze(vram__sx *c);
int vram__sx_unsqueeze(vram__sx *c);
int vram__sx_pad(vram__sx *c);
int vram__sx_resize(vram__sx *c);
int vram__sx_cast(vram__sx *c);
int vram__sx_constant_of_shape(vram__sx *c);
int vram__sx_shape(vram__sx *c);
int vram__sx_gather(vram__sx *c);
int vram__sx_constant(vram__sx *c);

#endif
