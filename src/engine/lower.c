/* src/engine/lower.c - from graph nodes to executor steps. Every parameter a
 * kernel needs (padding from auto_pad, Gemm's broadcast of C, a Slice's
 * clamped starts, a Resize's scales...) is computed here, once, from the
 * shapes that inference fixed and from constant inputs; an input the
 * executor would need at run time to decide its parameters is refused.
 * A BatchNormalization whose input is a Conv's output read by nothing else
 * is folded into that Conv's weights and bias. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine_internal.h"

static int node_fail(const vram__graph *g, int ni, int code, const char *what)
{
    const vram__node *n = &g->nodes[ni];
    return vram__fail(code, "node '%s' (%s, node %d): %s", n->name, n->op, ni, what);
}

static const vram__value *in_value(const vram__graph *g, const vram__node *n, int i)
{
    return i < n->n_in && n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
}

static int is_float(const vram__value *v) { return v && v->dtype == VRAM_DTYPE_FLOAT; }

/* Constant int64 contents of input i (int32 is widened); n entries. */
static int const_ints(const vram__graph *g, const vram__node *n, int i, int64_t *out, size_t cap,
                      size_t *count)
{
    const vram__value *v = in_value(g, n, i);
    if (!v || !v->data)
        return -1;
    size_t es = vram_dtype_size(v->dtype);
    if (v->dtype != VRAM_DTYPE_INT64 && v->dtype != VRAM_DTYPE_INT32)
        return -1;
    size_t k = es ? v->nbytes / es : 0;
    if (k > cap)
        return -1;
    for (size_t j = 0; j < k; j++)
        out[j] = v->dtype == VRAM_DTYPE_INT64 ? ((const int64_t *)v->data)[j]
                                            : ((const int32_t *)v->data)[j];
    *count = k;
    return 0;
}

/* Constant float scalar of input i, if present. */
static int const_float(const vram__graph *g, const vram__node *n, int i, float *out)
{
    const vram__value *v = in_value(g, n, i);
    if (!v)
        return 1; /* absent */
    if (!v->data || v->dtype != VRAM_DTYPE_FLOAT || v->nbytes != sizeof(float))
        return -1;
    memcpy(out, v->data, sizeof *out);
    return 0;
}

/* Padding of one spatial axis: explicit pads, or auto_pad's rule. */
static void axis_pads(const char *auto_pad, int64_t in, int64_t out, int64_t k, int64_t stride,
                      int64_t dil, int64_t explicit_begin, int64_t explicit_end, int64_t *begin,
                      int64_t *end)
{
    if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
        int64_t total = (out - 1) * stride + (k - 1) * dil + 1 - in;
        if (total < 0)
            total = 0;
        int64_t small = total / 2;
        *begin = !strcmp(auto_pad, "SAME_UPPER") ? small : total - small;
        *end = total - *begin;
    } else if (!strcmp(auto_pad, "VALID")) {
        *begin = *end = 0;
    } else {
        *begin = explicit_begin;
        *end = explicit_end;
    }
}

/* The 2-D view of a convolution-like node's spatial axes: rank-3 tensors
 * (1-D) run as height 1. Fills h, w, kernel, strides, dilations, pads. */
typedef struct spatial2d {
    int64_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
} spatial2d;

static int spatial_params(const vram__graph *g, int ni, const vram__shape *xs,
                          const vram__shape *ys, const int64_t *kernel, int transpose,
                          spatial2d *s)
{
    const vram__node *n = &g->nodes[ni];
    int sp = xs->rank - 2;
    if (sp < 1 || sp > 2)
        return node_fail(g, ni, VRAM_ENOSYS, "only 1-D and 2-D spatial inputs are supported");
    const int64_t *a;
    int64_t strides[2] = {1, 1}, dils[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    size_t k = vram__attr_ints(n, "strides", &a);
    for (size_t i = 0; i < k && i < 2; i++)
        strides[i] = a[i];
    k = vram__attr_ints(n, "dilations", &a);
    for (size_t i = 0; i < k && i < 2; i++)
        dils[i] = a[i];
    k = vram__attr_ints(n, "pads", &a);
    if (k && k != (size_t)(2 * sp))
        return node_fail(g, ni, VRAM_EPARSE, "pads must have two entries per spatial axis");
    for (size_t i = 0; i < k; i++)
        pads[i] = a[i];
    const char *auto_pad = vram__attr_string(n, "auto_pad", "NOTSET");
    int64_t in[2] = {1, xs->dim[2]}, out[2] = {1, ys->dim[2]}, ker[2] = {1, kernel[0]};
    int64_t st[2] = {1, strides[0]}, dl[2] = {1, dils[0]}, pb[2] = {0, pads[0]},
            pe[2] = {0, sp == 1 ? pads[1] : 0};
    if (sp == 2) {
        in[0] = xs->dim[2], in[1] = xs->dim[3];
        out[0] = ys->dim[2], out[1] = ys->dim[3];
        ker[0] = kernel[0], ker[1] = kernel[1];
        st[0] = strides[0], st[1] = strides[1];
        dl[0] = dils[0], dl[1] = dils[1];
        pb[0] = pads[0], pb[1] = pads[1], pe[0] = pads[2], pe[1] = pads[3];
    }
    int64_t b[2], e[2];
    for (int i = 0; i < 2; i++) {
        if (st[i] < 1 || dl[i] < 1 || pb[i] < 0 || pe[i] < 0 || ker[i] < 1)
            return node_fail(g, ni, VRAM_EPARSE,
                             "strides, dilations and kernel must be >= 1, pads >= 0");
        if (transpose) {
            /* ConvTranspose: the full output is (in-1)*stride + (k-1)*dil + 1
             * (+ output_padding); pads remove from it. */
            if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
                int64_t total = st[i] * (in[i] - 1) + (ker[i] - 1) * dl[i] + 1 - out[i];
                if (total < 0)
                    total = 0;
                b[i] = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
                e[i] = total - b[i];
            } else if (!strcmp(auto_pad, "VALID")) {
                b[i] = e[i] = 0;
            } else {
                b[i] = pb[i], e[i] = pe[i];
            }
        } else {
            axis_pads(auto_pad, in[i], out[i], ker[i], st[i], dl[i], pb[i], pe[i], &b[i], &e[i]);
        }
    }
    *s = (spatial2d){in[0], in[1], out[0], out[1], ker[0], ker[1], st[0], st[1],
                     dl[0], dl[1], b[0], b[1], e[0], e[1]};
    return 0;
}

static int lower_conv(vram_engine *e, int ni, vram__step *st, int transpose)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0), *w = in_value(g, n, 1), *b = in_value(g, n, 2);
    const vram__value *y = &g->values[n->out[0]];
    if (!is_float(x) || !is_float(w) || (b && !is_float(b)))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 convolutions are supported");
    if (!w->data || (b && !b->data))
        return node_fail(g, ni, VRAM_ENOSYS, "weights computed at run time are not supported");
    if (w->shape.rank != x->shape.rank)
        return node_fail(g, ni, VRAM_EPARSE, "weight rank differs from the input's");
    int64_t kernel[2] = {w->shape.dim[2], w->shape.rank > 3 ? w->shape.dim[3] : 1};
    spatial2d s;
    int rc = spatial_params(g, ni, &x->shape, &y->shape, kernel, transpose, &s);
    if (rc)
        return rc;
    st->op = transpose ? VRAM__OP_CONV_TRANSPOSE : VRAM__OP_CONV;
    st->p.conv = (vram__conv2d){
        .n = x->shape.dim[0], .c_in = x->shape.dim[1], .h = s.h, .w = s.w,
        .c_out = y->shape.dim[1], .kh = s.kh, .kw = s.kw, .oh = s.oh, .ow = s.ow,
        .stride_h = s.sh, .stride_w = s.sw, .dil_h = s.dh, .dil_w = s.dw,
        .pad_top = s.pt, .pad_left = s.pl, .pad_bottom = s.pb, .pad_right = s.pr,
        .group = vram__attr_int(n, "group", 1)};
    if (st->p.conv.group < 1 || st->p.conv.c_in % st->p.conv.group ||
        st->p.conv.c_out % st->p.conv.group)
        return node_fail(g, ni, VRAM_EPARSE, "group must divide the input and output channels");
    return 0;
}

static int lower_pool(vram_engine *e, int ni, vram__step *st, int max)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0), *y = &g->values[n->out[0]];
    if (!is_float(x))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 pooling is supported");
    if (n->n_out > 1 && n->out[1] >= 0)
        return node_fail(g, ni, VRAM_ENOSYS, "MaxPool's Indices output is not supported");
    const int64_t *ks;
    size_t nk = vram__attr_ints(n, "kernel_shape", &ks);
    if (nk != (size_t)(x->shape.rank - 2) || nk < 1 || nk > 2)
        return node_fail(g, ni, VRAM_EPARSE, "kernel_shape must have one entry per spatial axis");
    int64_t kernel[2] = {ks[0], nk > 1 ? ks[1] : 1};
    spatial2d s;
    int rc = spatial_params(g, ni, &x->shape, &y->shape, kernel, 0, &s);
    if (rc)
        return rc;
    st->op = max ? VRAM__OP_MAXPOOL : VRAM__OP_AVGPOOL;
    st->p.pool = (vram__pool2d){
        .n = x->shape.dim[0], .c = x->shape.dim[1], .h = s.h, .w = s.w, .kh = s.kh, .kw = s.kw,
        .oh = s.oh, .ow = s.ow, .stride_h = s.sh, .stride_w = s.sw, .dil_h = s.dh, .dil_w = s.dw,
        .pad_top = s.pt, .pad_left = s.pl, .pad_bottom = s.pb, .pad_right = s.pr,
        .count_include_pad = (int)vram__attr_int(n, "count_include_pad", 0)};
    return 0;
}

static int lower_gemm(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *a = in_value(g, n, 0), *b = in_value(g, n, 1), *c = in_value(g, n, 2);
    const vram__value *y = &g->values[n->out[0]];
    if (!is_float(a) || !is_float(b) || (c && !is_float(c)))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 Gemm is supported");
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return node_fail(g, ni, VRAM_EPARSE, "Gemm needs 2-D A and B");
    int ta = (int)vram__attr_int(n, "transA", 0), tb = (int)vram__attr_int(n, "transB", 0);
    int64_t m = y->shape.dim[0], nn = y->shape.dim[1];
    int64_t k = ta ? a->shape.dim[0] : a->shape.dim[1];
    int64_t cr = 1, cc = 1;
    if (c) {
        if (c->shape.rank == 1) {
            cc = c->shape.dim[0];
        } else if (c->shape.rank == 2) {
            cr = c->shape.dim[0];
            cc = c->shape.dim[1];
        } else if (c->shape.rank != 0) {
            return node_fail(g, ni, VRAM_EPARSE, "Gemm's C must have rank 0, 1 or 2");
        }
        if ((cr != 1 && cr != m) || (cc != 1 && cc != nn))
            return node_fail(g, ni, VRAM_EPARSE, "Gemm's C does not broadcast to the output");
    }
    st->op = VRAM__OP_GEMM;
    st->p.gemm.trans_a = ta;
    st->p.gemm.trans_b = tb;
    st->p.gemm.alpha = vram__attr_float(n, "alpha", 1.0f);
    st->p.gemm.beta = vram__attr_float(n, "beta", 1.0f);
    st->p.gemm.m = m;
    st->p.gemm.n = nn;
    st->p.gemm.k = k;
    st->p.gemm.c_rows = cr;
    st->p.gemm.c_cols = cc;
    return 0;
}

static int lower_unary(vram_engine *e, int ni, vram__step *st, const char *op)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    if (!is_float(in_value(g, n, 0)))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 activations are supported");
    st->op = VRAM__OP_UNARY;
    float *p = st->p.unary.p;
    if (!strcmp(op, "Relu")) {
        st->p.unary.op = VRAM__UN_RELU;
    } else if (!strcmp(op, "Sigmoid")) {
        st->p.unary.op = VRAM__UN_SIGMOID;
    } else if (!strcmp(op, "Tanh")) {
        st->p.unary.op = VRAM__UN_TANH;
    } else if (!strcmp(op, "LeakyRelu")) {
        st->p.unary.op = VRAM__UN_LEAKY_RELU;
        p[0] = vram__attr_float(n, "alpha", 0.01f);
    } else if (!strcmp(op, "HardSigmoid")) {
        st->p.unary.op = VRAM__UN_HARD_SIGMOID;
        p[0] = vram__attr_float(n, "alpha", 0.2f);
        p[1] = vram__attr_float(n, "beta", 0.5f);
    } else if (!strcmp(op, "HardSwish")) {
        st->p.unary.op = VRAM__UN_HARD_SWISH;
    } else { /* Clip: min and max are optional inputs (opset 11+) */
        st->p.unary.op = VRAM__UN_CLIP;
        p[0] = -INFINITY;
        p[1] = INFINITY;
        if (const_float(g, n, 1, &p[0]) < 0 || const_float(g, n, 2, &p[1]) < 0)
            return node_fail(g, ni, VRAM_ENOSYS, "Clip's min and max must be float constants");
    }
    return 0;
}

static int lower_binary(vram_engine *e, int ni, vram__step *st, const char *op)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *a = in_value(g, n, 0), *b = in_value(g, n, 1);
    if (!a || !b || a->dtype != b->dtype ||
        (a->dtype != VRAM_DTYPE_FLOAT && a->dtype != VRAM_DTYPE_INT64))
        return node_fail(g, ni, VRAM_ENOSYS,
                         "element-wise arithmetic needs two float32 or two int64 inputs");
    st->op = VRAM__OP_BINARY;
    st->p.binary.i64 = a->dtype == VRAM_DTYPE_INT64;
    st->p.binary.op = !strcmp(op, "Add")   ? VRAM__BIN_ADD
                      : !strcmp(op, "Sub") ? VRAM__BIN_SUB
                      : !strcmp(op, "Mul") ? VRAM__BIN_MUL
                                           : VRAM__BIN_DIV;
    return 0;
}

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

static int lower_slice(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0);
    int r = x->shape.rank;
    int64_t starts[VRAM__MAX_RANK], ends[VRAM__MAX_RANK], axes[VRAM__MAX_RANK],
        steps[VRAM__MAX_RANK];
    size_t ns, ne, na = 0, nst = 0;
    if (const_ints(g, n, 1, starts, VRAM__MAX_RANK, &ns) || const_ints(g, n, 2, ends, VRAM__MAX_RANK, &ne))
        return node_fail(g, ni, VRAM_ENOSYS, "Slice's starts and ends must be constants");
    if (in_value(g, n, 3) && const_ints(g, n, 3, axes, VRAM__MAX_RANK, &na))
        return node_fail(g, ni, VRAM_ENOSYS, "Slice's axes must be constants");
    if (in_value(g, n, 4) && const_ints(g, n, 4, steps, VRAM__MAX_RANK, &nst))
        return node_fail(g, ni, VRAM_ENOSYS, "Slice's steps must be constants");
    if (ne != ns || (na && na != ns) || (nst && nst != ns))
        return node_fail(g, ni, VRAM_EPARSE, "Slice's starts, ends, axes and steps differ in length");
    st->op = VRAM__OP_SLICE;
    for (int i = 0; i < r; i++) {
        st->p.slice.starts[i] = 0;
        st->p.slice.steps[i] = 1;
    }
    for (size_t i = 0; i < ns; i++) {
        int ax = norm_axis(na ? axes[i] : (int64_t)i, r);
        if (ax < 0 || ax >= r)
            return node_fail(g, ni, VRAM_EPARSE, "Slice axis out of range");
        int64_t step = nst ? steps[i] : 1, dim = x->shape.dim[ax], s = starts[i];
        if (step == 0)
            return node_fail(g, ni, VRAM_EPARSE, "Slice step 0");
        if (s < 0)
            s += dim;
        if (step > 0)
            s = s < 0 ? 0 : s > dim ? dim : s;
        else
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        st->p.slice.starts[ax] = s;
        st->p.slice.steps[ax] = step;
    }
    return 0;
}

static int lower_pad(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0);
    int r = x->shape.rank;
    int64_t pads[2 * VRAM__MAX_RANK];
    size_t np;
    if (const_ints(g, n, 1, pads, 2 * VRAM__MAX_RANK, &np))
        return node_fail(g, ni, VRAM_ENOSYS, "Pad's pads must be a constant");
    if (np != (size_t)(2 * r))
        return node_fail(g, ni, VRAM_EPARSE, "Pad's pads must have two entries per axis");
    if (in_value(g, n, 3))
        return node_fail(g, ni, VRAM_ENOSYS, "Pad's axes input is not supported");
    const char *mode = vram__attr_string(n, "mode", "constant");
    st->op = VRAM__OP_PAD;
    st->p.pad.mode = !strcmp(mode, "reflect") ? VRAM__PAD_REFLECT
                     : !strcmp(mode, "edge")  ? VRAM__PAD_EDGE
                                              : VRAM__PAD_CONSTANT;
    if (strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "constant"))
        return node_fail(g, ni, VRAM_ENOSYS, "Pad mode must be constant, reflect or edge");
    memcpy(st->p.pad.pads, pads, np * sizeof *pads);
    st->p.pad.value = 0;
    const vram__value *v = in_value(g, n, 2);
    if (v) {
        if (!v->data || v->dtype != x->dtype)
            return node_fail(g, ni, VRAM_ENOSYS, "Pad's constant_value must be a constant");
        if (v->dtype == VRAM_DTYPE_FLOAT)
            st->p.pad.value = *(const float *)v->data;
        else if (v->dtype == VRAM_DTYPE_INT64)
            st->p.pad.value = (double)*(const int64_t *)v->data;
        else
            return node_fail(g, ni, VRAM_ENOSYS, "Pad's constant_value must be float or int64");
    }
    return 0;
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static int lower_resize(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0), *y = &g->values[n->out[0]];
    if (!is_float(x))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 Resize is supported");
    static const char *const modes[] = {"nearest", "linear"};
    static const char *const ctms[] = {"half_pixel", "asymmetric", "align_corners",
                                       "pytorch_half_pixel", "tf_half_pixel_for_nearest"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"};
    st->op = VRAM__OP_RESIZE;
    st->p.resize.mode = lookup(vram__attr_string(n, "mode", "nearest"), modes, 2);
    st->p.resize.ctm =
        lookup(vram__attr_string(n, "coordinate_transformation_mode", "half_pixel"), ctms, 5);
    st->p.resize.nearest =
        lookup(vram__attr_string(n, "nearest_mode", "round_prefer_floor"), nearest, 4);
    if (st->p.resize.mode < 0 || st->p.resize.ctm < 0 || st->p.resize.nearest < 0)
        return node_fail(g, ni, VRAM_ENOSYS,
                         "Resize mode, coordinate_transformation_mode or nearest_mode not supported");
    const vram__value *sc = in_value(g, n, 2);
    int r = x->shape.rank;
    if (sc && sc->nbytes) {
        if (!sc->data || sc->dtype != VRAM_DTYPE_FLOAT || sc->nbytes != (size_t)r * sizeof(float))
            return node_fail(g, ni, VRAM_ENOSYS, "Resize's scales must be a float constant per axis");
        memcpy(st->p.resize.scales, sc->data, sc->nbytes);
    } else {
        for (int i = 0; i < r; i++)
            st->p.resize.scales[i] = (float)((double)y->shape.dim[i] / (double)x->shape.dim[i]);
    }
    return 0;
}

static int lower_softmax(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0);
    if (!is_float(x))
        return node_fail(g, ni, VRAM_ENOSYS, "only float32 Softmax is supported");
    int r = x->shape.rank;
    int axis = norm_axis(vram__attr_int(n, "axis", g->opset >= 13 ? -1 : 1), r);
    if (axis < 0 || axis >= (r ? r : 1))
        return node_fail(g, ni, VRAM_EPARSE, "Softmax axis out of range");
    st->op = VRAM__OP_SOFTMAX;
    if (g->opset >= 13) {
        st->p.softmax.shape = x->shape;
        st->p.softmax.axis = axis;
    } else { /* coerced to 2-D at axis */
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < r; i++)
            *(i < axis ? &outer : &inner) *= x->shape.dim[i];
        st->p.softmax.shape = (vram__shape){2, {outer, inner}};
        st->p.softmax.axis = 1;
    }
    return 0;
}

static int lower_split(vram_engine *e, int ni, vram__step *st)
{
    vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[ni];
    const vram__value *x = in_value(g, n, 0);
    st->op = VRAM__OP_SPLIT;
    st->p.axis = norm_axis(vram__attr_int(n, "axis", 0), x->shape.rank);
    st->split_sizes = vram__calloc((size_t)n->n_out, sizeof *st->split_sizes);
    if (!st->split_sizes)
        return VRAM_EHOSTMEM;
    for (int i = 0; i < n->n_out; i++) {
        if (n->out[i] < 0)
            return node_fail(g, ni, VRAM_ENOSYS, "Split with an empty output name");
        st->split_sizes[i] = g->values[n->out[i]].shape.dim[st->p.axis];
    }
    return 0;
}

/* Can BatchNormalization node bi fold into the Conv that makes its input? */
static int bn_foldable(const vram__graph *g, int bi, const int *readers, int *conv_node)
{
    const vram__node *bn = &g->nodes[bi];
    const vram__value *x = in_value(g, bn, 0);
    if (!x || x->producer < 0 || readers[bn->in[0]] != 1 || (x->flags & VRAM__VALUE_OUTPUT))
        return 0;
    const vram__node *c = &g->nodes[x->producer];
    if (strcmp(c->op, "Conv") || c->n_out != 1)
        return 0;
    for (int i = 1; i < 5; i++) {
        const vram__value *p = in_value(g, bn, i);
        if (!is_float(p) || !p->data)
            return 0;
    }
    const vram__value *w = in_value(g, c, 1), *b = in_value(g, c, 2);
    if (!is_float(w) || !w->data || (b && (!is_float(b) || !b->data)))
        return 0;
    for (int i = 1; i < bn->n_out; i++)
        if (bn->out[i] >= 0 && readers[bn->out[i]])
            return 0;
    *conv_node = x->producer;
    return 1;
}

/* A folded constant's value: `data` (owned), or, when the graph at the
 * largest batch (`like`) holds the same constant already, that graph's data,
 * borrowed: the weights do not depend on the batch, so they are folded once. */
static int add_folded(vram__graph *g, const vram__graph *like, const char *name,
                      const vram__shape *shape, void **data, size_t nbytes)
{
    int i = vram__graph_add_value(g, name);
    if (i < 0)
        return -1;
    vram__value *v = &g->values[i];
    v->dtype = VRAM_DTYPE_FLOAT;
    v->shape = *shape;
    int j = like ? vram__graph_find(like, name) : -1;
    if (j >= 0 && like->values[j].data && like->values[j].nbytes == nbytes) {
        v->data = like->values[j].data;
        v->nbytes = nbytes;
        v->flags |= VRAM__VALUE_BORROWED;
        return i;
    }
    vram__value_set_data(v, *data, nbytes);
    *data = NULL;
    return i;
}

/* Replace the conv's weight and bias by folded copies (new constant values,
 * as the originals may be shared), and make the conv write the BN's output.
 * At a smaller batch the copies of the largest batch's graph are reused. */
static int fold_bn(vram_engine *e, int ci, int bi, const vram__graph *like)
{
    vram__graph *g = &e->g;
    vram__node *c = &g->nodes[ci];
    const vram__node *bn = &g->nodes[bi];
    const vram__value *w = &g->values[c->in[1]];
    int64_t c_out = w->shape.dim[0], per = vram__shape_elems(&w->shape) / c_out;
    size_t w_bytes = (size_t)(c_out * per) * sizeof(float), b_bytes = (size_t)c_out * sizeof(float);
    char wname[256], bname[256];
    snprintf(wname, sizeof wname, "%s/folded_w", c->name);
    snprintf(bname, sizeof bname, "%s/folded_b", c->name);
    int reuse = like && vram__graph_find(like, wname) >= 0 && vram__graph_find(like, bname) >= 0;
    float *nw = NULL, *nb = NULL;
    if (!reuse) {
        nw = malloc(w->nbytes);
        nb = calloc((size_t)c_out, sizeof *nb);
        if (!nw || !nb) {
            free(nw);
            free(nb);
            return vram__fail(VRAM_EHOSTMEM, "folding a BatchNormalization: out of host memory");
        }
        memcpy(nw, w->data, w->nbytes);
        if (c->n_in > 2 && c->in[2] >= 0)
            memcpy(nb, g->values[c->in[2]].data, b_bytes);
        vram__cpu_bn_fold(c_out, per, nw, nb, g->values[bn->in[1]].data,
                          g->values[bn->in[2]].data, g->values[bn->in[3]].data,
                          g->values[bn->in[4]].data, vram__attr_float(bn, "epsilon", 1e-5f));
    }
    vram__shape ws = w->shape, bs = {1, {c_out}};
    int iw = add_folded(g, reuse ? like : NULL, wname, &ws, (void **)&nw, w_bytes);
    int ib = iw < 0 ? -1 : add_folded(g, reuse ? like : NULL, bname, &bs, (void **)&nb, b_bytes);
    free(nw);
    free(nb);
    if (ib < 0)
        return VRAM_EHOSTMEM;
    c = &g->nodes[ci]; /* values may have moved, nodes did not; reload anyway */
    if (c->n_in < 3) {
        int *in = realloc(c->in, 3 * sizeof *in);
        if (!in)
            return vram__fail(VRAM_EHOSTMEM, "folding a BatchNormalization: out of host memory");
        c->in = in;
        c->n_in = 3;
    }
    c->in[1] = iw;
    c->in[2] = ib;
    /* The conv now produces the BN's output; its old output is dead. */
    int old = c->out[0], y = bn->out[0];
    g->values[old].producer = -1;
    c->out[0] = y;
    g->values[y].producer = ci;
    return 0;
}

int vram__lower(vram_engine *e, const unsigned char *folded, const vram__graph *like)
{
    vram__graph *g = &e->g;
    int *readers = vram__calloc((size_t)g->n_values + 1, sizeof *readers);
    unsigned char *skip = vram__calloc((size_t)g->n_nodes + 1, 1);
    e->steps = vram__calloc((size_t)g->n_nodes + 1, sizeof *e->steps);
    int rc = readers && skip && e->steps ? 0 : VRAM_EHOSTMEM;
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        if (folded && folded[i])
            continue;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0)
                readers[g->nodes[i].in[k]]++;
    }
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        int ci;
        if ((folded && folded[i]) || strcmp(g->nodes[i].op, "BatchNormalization") ||
            !bn_foldable(g, i, readers, &ci))
            continue;
        rc = fold_bn(e, ci, i, like);
        if (!rc) {
            skip[i] = 1;
            e->fused_bn++;
        }
    }
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        if ((folded && folded[i]) || skip[i])
            continue;
        const vram__node *n = &g->nodes[i];
        const char *op = n->op;
        vram__step *st = &e->steps[e->n_steps];
        *st = (vram__step){.node = i, .x = n->n_in ? n->in[0] : -1, .y = n->n_out ? n->out[0] : -1};
        if (!strcmp(op, "Conv")) {
            rc = lower_conv(e, i, st, 0);
        } else if (!strcmp(op, "ConvTranspose")) {
            if (vram__attr_ints(n, "output_shape", &(const int64_t *){0}) &&
                strcmp(vram__attr_string(n, "auto_pad", "NOTSET"), "NOTSET") == 0 &&
                vram__attr_ints(n, "pads", &(const int64_t *){0}))
                rc = node_fail(g, i, VRAM_ENOSYS, "ConvTranspose with both output_shape and pads");
            else
                rc = lower_conv(e, i, st, 1);
        } else if (!strcmp(op, "BatchNormalization")) {
            const vram__value *x = in_value(g, n, 0);
            st->op = VRAM__OP_BATCHNORM;
            int64_t sp = 1;
            for (int d = 2; d < x->shape.rank; d++)
                sp *= x->shape.dim[d];
            st->p.bn.n = x->shape.dim[0];
            st->p.bn.c = x->shape.rank > 1 ? x->shape.dim[1] : 1;
            st->p.bn.spatial = sp;
            st->p.bn.eps = vram__attr_float(n, "epsilon", 1e-5f);
            for (int k = 0; k < 5; k++)
                if (!is_float(in_value(g, n, k)) || (k && !in_value(g, n, k)->data))
                    rc = node_fail(g, i, VRAM_ENOSYS,
                                   "BatchNormalization needs float32 input and constant parameters");
        } else if (!strcmp(op, "Relu") || !strcmp(op, "Sigmoid") || !strcmp(op, "Tanh") ||
                   !strcmp(op, "LeakyRelu") || !strcmp(op, "HardSigmoid") ||
                   !strcmp(op, "HardSwish") || !strcmp(op, "Clip")) {
            rc = lower_unary(e, i, st, op);
        } else if (!strcmp(op, "PRelu")) {
            st->op = VRAM__OP_PRELU;
            if (!is_float(in_value(g, n, 0)) || !is_float(in_value(g, n, 1)))
                rc = node_fail(g, i, VRAM_ENOSYS, "only float32 PRelu is supported");
        } else if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") ||
                   !strcmp(op, "Div")) {
            rc = lower_binary(e, i, st, op);
        } else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) {
            rc = lower_pool(e, i, st, op[0] == 'M');
        } else if (!strcmp(op, "GlobalAveragePool")) {
            const vram__value *x = in_value(g, n, 0);
            st->op = VRAM__OP_GLOBAL_AVGPOOL;
            int64_t sp = 1;
            for (int d = 2; d < x->shape.rank; d++)
                sp *= x->shape.dim[d];
            st->p.gap.n = x->shape.dim[0];
            st->p.gap.c = x->shape.dim[1];
            st->p.gap.spatial = sp;
            if (!is_float(x))
                rc = node_fail(g, i, VRAM_ENOSYS, "only float32 pooling is supported");
        } else if (!strcmp(op, "Gemm")) {
            rc = lower_gemm(e, i, st);
        } else if (!strcmp(op, "MatMul")) {
            st->op = VRAM__OP_MATMUL;
            if (!is_float(in_value(g, n, 0)) || !is_float(in_value(g, n, 1)))
                rc = node_fail(g, i, VRAM_ENOSYS, "only float32 MatMul is supported");
        } else if (!strcmp(op, "Flatten") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
                   !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity")) {
            st->op = VRAM__OP_COPY;
        } else if (!strcmp(op, "Transpose")) {
            const vram__value *x = in_value(g, n, 0);
            const int64_t *perm;
            size_t np = vram__attr_ints(n, "perm", &perm);
            st->op = VRAM__OP_TRANSPOSE;
            for (int d = 0; d < x->shape.rank; d++)
                st->p.perm[d] = np ? (int)perm[d] : x->shape.rank - 1 - d;
        } else if (!strcmp(op, "Concat")) {
            st->op = VRAM__OP_CONCAT;
            st->p.axis = norm_axis(vram__attr_int(n, "axis", 0), g->values[st->y].shape.rank);
        } else if (!strcmp(op, "Split")) {
            rc = lower_split(e, i, st);
        } else if (!strcmp(op, "Slice")) {
            rc = lower_slice(e, i, st);
        } else if (!strcmp(op, "Pad")) {
            rc = lower_pad(e, i, st);
        } else if (!strcmp(op, "Resize")) {
            rc = lower_resize(e, i, st);
        } else if (!strcmp(op, "Softmax")) {
            rc = lower_softmax(e, i, st);
        } else if (!strcmp(op, "Gather")) {
            const vram__value *x = in_value(g, n, 0), *ix = in_value(g, n, 1);
            st->op = VRAM__OP_GATHER;
            st->p.axis = norm_axis(vram__attr_int(n, "axis", 0), x->shape.rank);
            if (!ix || ix->dtype != VRAM_DTYPE_INT64)
                rc = node_fail(g, i, VRAM_ENOSYS, "Gather needs int64 indices");
        } else if (!strcmp(op, "Cast")) {
            st->op = VRAM__OP_CAST;
            st->p.cast.from = g->values[st->x].dtype;
            st->p.cast.to = (int)vram__attr_int(n, "to", 0);
        } else {
            rc = node_fail(g, i, VRAM_ENOSYS, "the executor cannot run this operator");
        }
        if (!rc)
            e->n_steps++;
    }
    free(readers);
    free(skip);
    return rc;
}
