/* src/engine/shape_tensor.c - shape rules of the tensor-manipulation and
 * shape operators (Identity, Flatten, Reshape, Transpose, Concat, Split,
 * Slice, Squeeze, Unsqueeze, Pad, Resize), following ONNX opsets 11-21,
 * with the folding of those that shape sub-graphs are made of. The shape
 * and constant operators are in shape_const.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape_ops.h"

static size_t elem_bytes(const vram__value *v)
{
    return (size_t)vram__shape_elems(&v->shape) * vram_dtype_size(v->dtype);
}

/* Output 0 gets input x's contents unchanged (the reshaping operators). */
static int fold_copy(const vram__sx *c, const vram__value *x)
{
    void *out = vram__sx_alloc_out(c, 0);
    if (out && x->data)
        memcpy(out, x->data, elem_bytes(x));
    return vram__sx_set_data(c, 0, out);
}

/* Normalize a list of axes against `rank`, refusing repeats. */
static int norm_axes(const vram__sx *c, const int64_t *axes, int n, int rank, const char *what, int *out)
{
    unsigned seen = 0;
    for (int i = 0; i < n; i++) {
        int rc = vram__sx_axis(c, axes[i], rank, what, &out[i]);
        if (rc)
            return rc;
        if (seen & (1u << out[i]))
            return vram__sx_fail(c, VRAM_EINVAL, "%s %lld appears twice", what, (long long)axes[i]);
        seen |= 1u << out[i];
    }
    return 0;
}

int vram__sx_identity(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int rc = vram__sx_set(c, 0, x->dtype, &x->shape);
    return rc || !c->fold ? rc : fold_copy(c, x);
}

int vram__sx_flatten(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int r = x->shape.rank;
    int64_t axis = vram__attr_int(c->n, "axis", 1);
    if (axis < -(int64_t)r || axis > r)
        return vram__sx_fail(c, VRAM_EINVAL, "axis %lld is outside [%d, %d] for input '%s' %s", (long long)axis,
                             -r, r, x->name, vram__sx_dims(&x->shape).s);
    if (axis < 0)
        axis += r;
    vram__shape y = {.rank = 2, .dim = {1, 1}};
    for (int i = 0; i < r; i++)
        y.dim[i < axis ? 0 : 1] *= x->shape.dim[i];
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_reshape(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *sv = vram__sx_in(c, 1);
    int64_t s[VRAM__MAX_RANK];
    int n, rc;
    if (sv->shape.rank != 1)
        return vram__sx_fail(c, VRAM_EINVAL, "the shape input '%s' has shape %s; it must be a vector", sv->name,
                             vram__sx_dims(&sv->shape).s);
    if ((rc = vram__sx_const_ints(c, 1, "shape", s, VRAM__MAX_RANK, &n)))
        return rc;
    int allowzero = c->g->opset >= 14 && vram__attr_int(c->n, "allowzero", 0) != 0;
    int64_t xe = vram__shape_elems(&x->shape), known = 1;
    int infer = -1, zero = 0;
    vram__shape y = {.rank = n};
    for (int i = 0; i < n; i++) {
        int64_t d = s[i];
        if (d == -1) {
            if (infer >= 0)
                return vram__sx_fail(c, VRAM_EINVAL, "the shape has -1 at entries %d and %d", infer, i);
            infer = i;
            continue;
        }
        if (d == 0 && !allowzero) {
            /* 0 copies the input's dimension at the same index */
            if (i >= x->shape.rank)
                return vram__sx_fail(c, VRAM_EINVAL, "shape entry %d is 0 but input '%s' %s has rank %d", i,
                                     x->name, vram__sx_dims(&x->shape).s, x->shape.rank);
            d = x->shape.dim[i];
        } else if (d < 0) {
            return vram__sx_fail(c, VRAM_EINVAL, "shape entry %d is %lld", i, (long long)d);
        }
        zero |= d == 0;
        y.dim[i] = d;
        if (d && known > INT64_MAX / d)
            return vram__sx_fail(c, VRAM_EINVAL, "shape entries overflow int64");
        known *= d;
    }
    if (infer >= 0) {
        if (allowzero && zero)
            return vram__sx_fail(c, VRAM_EINVAL, "with allowzero, a shape cannot hold both 0 and -1");
        if (known == 0 || xe % known)
            return vram__sx_fail(c, VRAM_EINVAL,
                                 "cannot reshape input '%s' %s (%lld elements): the other dimensions make %lld",
                                 x->name, vram__sx_dims(&x->shape).s, (long long)xe, (long long)known);
        y.dim[infer] = xe / known;
    } else if (known != xe) {
        return vram__sx_fail(c, VRAM_EINVAL, "cannot reshape input '%s' %s (%lld elements) to %s (%lld)",
                             x->name, vram__sx_dims(&x->shape).s, (long long)xe, vram__sx_dims(&y).s,
                             (long long)known);
    }
    rc = vram__sx_set(c, 0, x->dtype, &y);
    return rc || !c->fold ? rc : fold_copy(c, x);
}

int vram__sx_transpose(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int r = x->shape.rank, n;
    int64_t perm[VRAM__MAX_RANK];
    int rc = vram__sx_attr_ints(c, "perm", perm, VRAM__MAX_RANK, &n);
    if (rc)
        return rc;
    if (n < 0) { /* default: reverse the axes */
        n = r;
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    }
    if (n != r)
        return vram__sx_fail(c, VRAM_EINVAL, "perm has %d entries for input '%s' %s", n, x->name,
                             vram__sx_dims(&x->shape).s);
    vram__shape y = {.rank = r};
    unsigned seen = 0;
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r || (seen & (1u << perm[i])))
            return vram__sx_fail(c, VRAM_EINVAL, "perm is not a permutation of the %d axes (entry %d is %lld)",
                                 r, i, (long long)perm[i]);
        seen |= 1u << perm[i];
        y.dim[i] = x->shape.dim[perm[i]];
    }
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_concat(vram__sx *c)
{
    const vram__value *x0 = vram__sx_in(c, 0);
    if (!vram__node_attr(c->n, "axis"))
        return vram__sx_fail(c, VRAM_EPARSE, "attribute 'axis' is required");
    int r = x0->shape.rank, axis, rc;
    if (r < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' is a scalar", x0->name);
    if ((rc = vram__sx_axis(c, vram__attr_int(c->n, "axis", 0), r, "axis", &axis)))
        return rc;
    vram__shape y = x0->shape;
    y.dim[axis] = 0;
    for (int i = 0; i < c->n->n_in; i++) {
        const vram__value *v = vram__sx_in(c, i);
        if (!v)
            return vram__sx_fail(c, VRAM_EPARSE, "input %d is missing", i);
        if (v->dtype != x0->dtype)
            return vram__sx_fail(c, VRAM_EINVAL, "input '%s' is %s but '%s' is %s", v->name,
                                 vram_dtype_name(v->dtype), x0->name, vram_dtype_name(x0->dtype));
        int bad = v->shape.rank != r;
        for (int d = 0; !bad && d < r; d++)
            bad = d != axis && v->shape.dim[d] != x0->shape.dim[d];
        if (bad)
            return vram__sx_fail(c, VRAM_EINVAL, "input '%s' %s does not match input '%s' %s off axis %d",
                                 v->name, vram__sx_dims(&v->shape).s, x0->name,
                                 vram__sx_dims(&x0->shape).s, axis);
        y.dim[axis] += v->shape.dim[axis];
    }
    if ((rc = vram__sx_set(c, 0, x0->dtype, &y)) || !c->fold)
        return rc;
    /* rows of the outer axes interleave one chunk from each input */
    size_t es = vram_dtype_size(x0->dtype), outer = 1, inner = es;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)y.dim[d];
    for (int d = axis + 1; d < r; d++)
        inner *= (size_t)y.dim[d];
    char *out = vram__sx_alloc_out(c, 0), *p = out;
    if (!out)
        return VRAM_EHOSTMEM;
    for (size_t o = 0; o < outer; o++)
        for (int i = 0; i < c->n->n_in; i++) {
            const vram__value *v = vram__sx_in(c, i);
            size_t chunk = inner * (size_t)v->shape.dim[axis];
            if (chunk)
                memcpy(p, (const char *)v->data + o * chunk, chunk);
            p += chunk;
        }
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_split(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int r = x->shape.rank, axis, nout = c->n->n_out, n = -1, rc;
    if (r < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' is a scalar", x->name);
    if ((rc = vram__sx_axis(c, vram__attr_int(c->n, "axis", 0), r, "axis", &axis)))
        return rc;
    int64_t dim = x->shape.dim[axis];
    int64_t *sizes = vram__calloc((size_t)nout, sizeof *sizes);
    if (!sizes)
        return VRAM_EHOSTMEM;
    int64_t num_outputs = c->g->opset >= 18 ? vram__attr_int(c->n, "num_outputs", 0) : 0;
    /* the split sizes: the `split` attribute before opset 13, the `split`
     * input from 13, else num_outputs (18+) or an equal split */
    if (c->g->opset < 13) {
        const vram__attr *a = vram__node_attr(c->n, "split");
        if (a && (a->type != VRAM__ATTR_INTS || a->n != (size_t)nout))
            rc = vram__sx_fail(c, VRAM_EINVAL, "attribute 'split' has %zu entries for %d outputs",
                               a->type == VRAM__ATTR_INTS ? a->n : 0, nout);
        else if (a)
            memcpy(sizes, a->ints, sizeof *sizes * (size_t)nout), n = nout;
    } else if (vram__sx_in(c, 1)) {
        const vram__value *sv = vram__sx_in(c, 1);
        if (sv->shape.rank != 1 || sv->shape.dim[0] != nout)
            rc = vram__sx_fail(c, VRAM_EINVAL, "the split input '%s' has shape %s for %d outputs", sv->name,
                               vram__sx_dims(&sv->shape).s, nout);
        else
            rc = vram__sx_const_ints(c, 1, "split", sizes, nout, &n);
    }
    if (!rc && n < 0 && num_outputs) {
        /* ceil(dim / num_outputs) each, the last one smaller */
        int64_t chunk = (dim + num_outputs - 1) / num_outputs;
        if (num_outputs != nout)
            rc = vram__sx_fail(c, VRAM_EINVAL, "num_outputs is %lld but the node has %d outputs",
                               (long long)num_outputs, nout);
        else if (num_outputs < 1 || dim - chunk * (num_outputs - 1) < 0)
            rc = vram__sx_fail(c, VRAM_EINVAL, "axis %d of size %lld cannot be split into %lld parts", axis,
                               (long long)dim, (long long)num_outputs);
        for (int i = 0; !rc && i < nout; i++)
            sizes[i] = i < nout - 1 ? chunk : dim - chunk * (nout - 1);
        n = nout;
    } else if (!rc && n < 0) {
        if (dim % nout)
            rc = vram__sx_fail(c, VRAM_EINVAL, "axis %d of input '%s' %s does not split equally into %d outputs",
                               axis, x->name, vram__sx_dims(&x->shape).s, nout);
        for (int i = 0; !rc && i < nout; i++)
            sizes[i] = dim / nout;
    }
    int64_t sum = 0;
    for (int i = 0; !rc && i < nout; i++) {
        if (sizes[i] < 0)
            rc = vram__sx_fail(c, VRAM_EINVAL, "split size %d is %lld", i, (long long)sizes[i]);
        sum += sizes[i];
    }
    if (!rc && sum != dim)
        rc = vram__sx_fail(c, VRAM_EINVAL, "split sizes add up to %lld but axis %d of input '%s' %s is %lld",
                           (long long)sum, axis, x->name, vram__sx_dims(&x->shape).s, (long long)dim);
    for (int i = 0; !rc && i < nout; i++) {
        vram__shape y = x->shape;
        y.dim[axis] = sizes[i];
        rc = vram__sx_set(c, i, x->dtype, &y);
    }
    free(sizes);
    return rc;
}

/* Copy the strided box of x that starts at start[] with step[] per axis into
 * output 0 (whose shape is the box's). */
static int fold_strided(const vram__sx *c, const vram__value *x, const int64_t *start,
                        const int64_t *step)
{
    const vram__value *y = vram__sx_out(c, 0);
    int r = x->shape.rank;
    size_t es = vram_dtype_size(x->dtype);
    int64_t total = vram__shape_elems(&y->shape), stride[VRAM__MAX_RANK], idx[VRAM__MAX_RANK] = {0};
    for (int d = r - 1; d >= 0; d--)
        stride[d] = d == r - 1 ? 1 : stride[d + 1] * x->shape.dim[d + 1];
    char *out = vram__sx_alloc_out(c, 0);
    if (!out)
        return VRAM_EHOSTMEM;
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        for (int d = 0; d < r; d++)
            off += (start[d] + idx[d] * step[d]) * stride[d];
        memcpy(out + (size_t)e * es, (const char *)x->data + (size_t)off * es, es);
        for (int d = r - 1; d >= 0 && ++idx[d] == y->shape.dim[d]; d--)
            idx[d] = 0;
    }
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_slice(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int64_t starts[VRAM__MAX_RANK], ends[VRAM__MAX_RANK], axes[VRAM__MAX_RANK], steps[VRAM__MAX_RANK];
    int r = x->shape.rank, n, ne, na = -1, ns = -1, ax[VRAM__MAX_RANK], rc;
    if ((rc = vram__sx_const_ints(c, 1, "starts", starts, VRAM__MAX_RANK, &n)) ||
        (rc = vram__sx_const_ints(c, 2, "ends", ends, VRAM__MAX_RANK, &ne)) ||
        (vram__sx_in(c, 3) && (rc = vram__sx_const_ints(c, 3, "axes", axes, VRAM__MAX_RANK, &na))) ||
        (vram__sx_in(c, 4) && (rc = vram__sx_const_ints(c, 4, "steps", steps, VRAM__MAX_RANK, &ns))))
        return rc;
    if (ne != n || (na >= 0 && na != n) || (ns >= 0 && ns != n))
        return vram__sx_fail(c, VRAM_EINVAL, "starts, ends, axes and steps have %d, %d, %d and %d entries", n, ne,
                             na, ns);
    if (na < 0)
        for (int i = 0; i < n; i++)
            axes[i] = i;
    if ((rc = norm_axes(c, axes, n, r, "axis", ax)))
        return rc;
    vram__shape y = x->shape;
    int64_t start[VRAM__MAX_RANK] = {0}, step[VRAM__MAX_RANK];
    for (int d = 0; d < r; d++)
        step[d] = 1;
    for (int i = 0; i < n; i++) {
        int64_t dim = x->shape.dim[ax[i]], st = ns >= 0 ? steps[i] : 1, s = starts[i], e = ends[i], len;
        if (st == 0)
            return vram__sx_fail(c, VRAM_EINVAL, "step %d is 0", i);
        /* a step longer than the axis takes one element: bound it so the
         * arithmetic below cannot overflow */
        if (st > dim + 1)
            st = dim + 1;
        if (st < -dim - 1)
            st = -dim - 1;
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        if (st > 0) { /* clamp into [0, dim] */
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > s ? (e - s + st - 1) / st : 0;
        } else { /* starts into [0, dim-1], ends into [-1, dim-1] */
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = s > e ? (s - e - st - 1) / -st : 0;
        }
        y.dim[ax[i]] = len;
        start[ax[i]] = s;
        step[ax[i]] = st;
    }
    rc = vram__sx_set(c, 0, x->dtype, &y);
    return rc || !c->fold ? rc : fold_strided(c, x, start, step);
}

/* The axes of Squeeze / Unsqueeze: the attribute before opset 13, the
 * optional second input from 13. *n = -1 when none are given. */
static int squeeze_axes(const vram__sx *c, int64_t *axes, int *n)
{
    if (c->g->opset < 13)
        return vram__sx_attr_ints(c, "axes", axes, VRAM__MAX_RANK, n);
    *n = -1;
    return vram__sx_in(c, 1) ? vram__sx_const_ints(c, 1, "axes", axes, VRAM__MAX_RANK, n) : 0;
}

int vram__sx_squeeze(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int64_t axes[VRAM__MAX_RANK];
    int n, ax[VRAM__MAX_RANK], r = x->shape.rank, rc;
    unsigned drop = 0;
    if ((rc = squeeze_axes(c, axes, &n)))
        return rc;
    if (n < 0) { /* every axis of size 1 */
        for (int d = 0; d < r; d++)
            if (x->shape.dim[d] == 1)
                drop |= 1u << d;
    } else {
        if ((rc = norm_axes(c, axes, n, r, "axis", ax)))
            return rc;
        for (int i = 0; i < n; i++) {
            if (x->shape.dim[ax[i]] != 1)
                return vram__sx_fail(c, VRAM_EINVAL, "cannot squeeze axis %d of input '%s' %s: it is not 1",
                                     ax[i], x->name, vram__sx_dims(&x->shape).s);
            drop |= 1u << ax[i];
        }
    }
    vram__shape y = {.rank = 0};
    for (int d = 0; d < r; d++)
        if (!(drop & (1u << d)))
            y.dim[y.rank++] = x->shape.dim[d];
    rc = vram__sx_set(c, 0, x->dtype, &y);
    return rc || !c->fold ? rc : fold_copy(c, x);
}

int vram__sx_unsqueeze(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int64_t axes[VRAM__MAX_RANK];
    int n, ax[VRAM__MAX_RANK], rc;
    if ((rc = squeeze_axes(c, axes, &n)))
        return rc;
    if (n < 0)
        return vram__sx_fail(c, VRAM_EPARSE, "the axes are required");
    int r = x->shape.rank + n;
    if (r > VRAM__MAX_RANK)
        return vram__sx_fail(c, VRAM_ENOSYS, "the output would have rank %d; at most %d is supported", r,
                             VRAM__MAX_RANK);
    /* axes count in the output's rank */
    if ((rc = norm_axes(c, axes, n, r, "axis", ax)))
        return rc;
    unsigned ones = 0;
    for (int i = 0; i < n; i++)
        ones |= 1u << ax[i];
    vram__shape y = {.rank = r};
    for (int d = 0, k = 0; d < r; d++)
        y.dim[d] = ones & (1u << d) ? 1 : x->shape.dim[k++];
    rc = vram__sx_set(c, 0, x->dtype, &y);
    return rc || !c->fold ? rc : fold_copy(c, x);
}

int vram__sx_pad(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *cv = vram__sx_in(c, 2);
    int64_t pads[2 * VRAM__MAX_RANK], axes[VRAM__MAX_RANK];
    int r = x->shape.rank, np, na = -1, ax[VRAM__MAX_RANK], rc;
    const char *mode = vram__attr_string(c->n, "mode", "constant");
    int reflect = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
    if (!reflect && !edge && strcmp(mode, "constant") && (strcmp(mode, "wrap") || c->g->opset < 19))
        return vram__sx_fail(c, VRAM_EINVAL, "mode '%s' is not constant, reflect, edge%s", mode,
                             c->g->opset >= 19 ? " or wrap" : "");
    if (!vram__sx_in(c, 1))
        return vram__sx_fail(c, VRAM_EPARSE, "the pads input is required");
    if ((rc = vram__sx_const_ints(c, 1, "pads", pads, 2 * VRAM__MAX_RANK, &np)))
        return rc;
    if (vram__sx_in(c, 3)) {
        if (c->g->opset < 18)
            return vram__sx_fail(c, VRAM_EPARSE, "the axes input exists from opset 18 (this is %lld)",
                                 (long long)c->g->opset);
        if ((rc = vram__sx_const_ints(c, 3, "axes", axes, VRAM__MAX_RANK, &na)))
            return rc;
    }
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    if ((rc = norm_axes(c, axes, na, r, "axis", ax)))
        return rc;
    if (np != 2 * na)
        return vram__sx_fail(c, VRAM_EINVAL, "pads has %d entries; %d axes need %d", np, na, 2 * na);
    if (cv && (vram__shape_elems(&cv->shape) > 1 || cv->dtype != x->dtype))
        return vram__sx_fail(c, VRAM_EINVAL, "constant_value '%s' (%s %s) must be one %s", cv->name,
                             vram_dtype_name(cv->dtype), vram__sx_dims(&cv->shape).s,
                             vram_dtype_name(x->dtype));
    vram__shape y = x->shape;
    for (int i = 0; i < na; i++) {
        int64_t dim = x->shape.dim[ax[i]], b = pads[i], e = pads[i + na];
        y.dim[ax[i]] = dim + b + e;
        if (y.dim[ax[i]] < 0)
            return vram__sx_fail(c, VRAM_EINVAL, "pads %lld and %lld make axis %d of input '%s' %s negative",
                                 (long long)b, (long long)e, ax[i], x->name, vram__sx_dims(&x->shape).s);
        /* reflect mirrors without repeating the edge: at most dim-1 each side */
        if ((reflect && (b >= dim || e >= dim) && (b > 0 || e > 0)) || (edge && dim == 0 && (b > 0 || e > 0)))
            return vram__sx_fail(c, VRAM_EINVAL, "%s padding of %lld and %lld on axis %d of size %lld", mode,
                                 (long long)b, (long long)e, ax[i], (long long)dim);
    }
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_resize(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *sc = vram__sx_in(c, 2), *sz = vram__sx_in(c, 3);
    int r = x->shape.rank, na = -1, n, ax[VRAM__MAX_RANK], rc;
    int64_t axes[VRAM__MAX_RANK], sizes[VRAM__MAX_RANK];
    double scales[VRAM__MAX_RANK];
    /* an empty tensor stands for an absent input (opset 11 has no other way) */
    int has_scales = sc && vram__shape_elems(&sc->shape) > 0;
    int has_sizes = sz && vram__shape_elems(&sz->shape) > 0;
    if (has_scales == has_sizes)
        return vram__sx_fail(c, VRAM_EINVAL, "exactly one of scales and sizes must be given (%s)",
                             has_scales ? "both are" : "neither is");
    if (c->g->opset >= 18 && (rc = vram__sx_attr_ints(c, "axes", axes, VRAM__MAX_RANK, &na)))
        return rc;
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    if ((rc = norm_axes(c, axes, na, r, "axis", ax)))
        return rc;
    vram__shape y = x->shape;
    if (has_scales) {
        if ((rc = vram__sx_const_floats(c, 2, "scales", scales, VRAM__MAX_RANK, &n)))
            return rc;
        if (n != na)
            return vram__sx_fail(c, VRAM_EINVAL, "scales has %d entries for %d axes", n, na);
        for (int i = 0; i < n; i++) {
            if (!(scales[i] > 0))
                return vram__sx_fail(c, VRAM_EINVAL, "scale %d is %g", i, scales[i]);
            /* floor(input * scale), computed in float as ONNX does; a hostile
             * scale must not overflow the conversion */
            float f = floorf((float)x->shape.dim[ax[i]] * (float)scales[i]);
            if (!(f <= (float)(INT64_C(1) << 40)))
                return vram__sx_fail(c, VRAM_EINVAL, "scale %d (%g) makes axis %d of %lld elements %g",
                                     i, scales[i], ax[i], (long long)x->shape.dim[ax[i]], (double)f);
            y.dim[ax[i]] = (int64_t)f;
        }
        return vram__sx_set(c, 0, x->dtype, &y);
    }
    if ((rc = vram__sx_const_ints(c, 3, "sizes", sizes, VRAM__MAX_RANK, &n)))
        return rc;
    if (n != na)
        return vram__sx_fail(c, VRAM_EINVAL, "sizes has %d entries for %d axes", n, na);
    const char *policy = c->g->opset >= 18 ? vram__attr_string(c->n, "keep_aspect_ratio_policy", "stretch")
                                           : "stretch";
    int larger = !strcmp(policy, "not_larger"), smaller = !strcmp(policy, "not_smaller");
    if (!larger && !smaller && strcmp(policy, "stretch"))
        return vram__sx_fail(c, VRAM_EINVAL, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or "
                             "not_smaller", policy);
    double scale = larger ? INFINITY : 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return vram__sx_fail(c, VRAM_EINVAL, "size %d is %lld", i, (long long)sizes[i]);
        double s = (double)sizes[i] / (double)x->shape.dim[ax[i]];
        scale = larger ? fmin(scale, s) : fmax(scale, s);
        y.dim[ax[i]] = sizes[i];
    }
    if (larger || smaller) {
        /* one scale for every axis listed, rounded half up */
        if (!isfinite(scale))
            return vram__sx_fail(c, VRAM_EINVAL, "input '%s' %s has an empty axis to keep the aspect of",
                                 x->name, vram__sx_dims(&x->shape).s);
        for (int i = 0; i < n; i++) {
            double f = floor(scale * (double)x->shape.dim[ax[i]] + 0.5);
            if (!(f <= (double)(INT64_C(1) << 40)))
                return vram__sx_fail(c, VRAM_EINVAL, "sizes make axis %d of %lld elements %g", ax[i],
                                     (long long)x->shape.dim[ax[i]], f);
            y.dim[ax[i]] = (int64_t)f;
        }
    }
    return vram__sx_set(c, 0, x->dtype, &y);
}
