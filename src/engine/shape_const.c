/* src/engine/shape_const.c - shape rules of the operators that make or
 * convert constants and shape vectors: Cast, ConstantOfShape, Shape, Gather
 * and Constant (ONNX opsets 11-21), all folded when their inputs are
 * constant; Shape whenever its input's shape is known. */
#include <stdlib.h>
#include <string.h>

#include "shape_ops.h"

static size_t elem_bytes(const vram__value *v)
{
    return (size_t)vram__shape_elems(&v->shape) * vram_dtype_size(v->dtype);
}

int vram__sx_cast(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    const vram__attr *a = vram__node_attr(c->n, "to");
    if (!a || a->type != VRAM__ATTR_INT)
        return vram__sx_fail(c, VRAM_EPARSE, "attribute 'to' is required");
    int to = (int)a->i;
    if (a->i != to || !vram_dtype_size(to))
        return vram__sx_fail(c, VRAM_ENOSYS, "cast to %s is not supported", vram_dtype_name((int)a->i));
    int rc = vram__sx_set(c, 0, to, &x->shape);
    if (rc || !c->fold)
        return rc;
    void *out = vram__sx_alloc_out(c, 0);
    if (!out)
        return VRAM_EHOSTMEM;
    size_t total = (size_t)vram__shape_elems(&x->shape);
    int via_float = vram__sx_is_float_type(x->dtype) || vram__sx_is_float_type(to);
    for (size_t i = 0; i < total; i++) {
        if (via_float)
            vram__sx_put_f64(out, to, i, vram__sx_get_f64(x->data, x->dtype, i));
        else
            vram__sx_put_i64(out, to, i, vram__sx_get_i64(x->data, x->dtype, i));
    }
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_constant_of_shape(vram__sx *c)
{
    const vram__value *sv = vram__sx_in(c, 0), *val = NULL;
    int64_t dims[VRAM__MAX_RANK];
    int n, rc;
    if (sv->shape.rank != 1)
        return vram__sx_fail(c, VRAM_EINVAL, "the shape input '%s' has shape %s; it must be a vector", sv->name,
                             vram__sx_dims(&sv->shape).s);
    if ((rc = vram__sx_const_ints(c, 0, "shape", dims, VRAM__MAX_RANK, &n)))
        return rc;
    const vram__attr *a = vram__node_attr(c->n, "value");
    if (a) {
        if (a->type != VRAM__ATTR_TENSOR || a->tensor < 0 || a->tensor >= c->g->n_values)
            return vram__sx_fail(c, VRAM_EPARSE, "attribute 'value' is not a tensor");
        val = &c->g->values[a->tensor];
        if (vram__shape_elems(&val->shape) != 1 || !val->data || !vram_dtype_size(val->dtype) ||
            val->nbytes < vram_dtype_size(val->dtype))
            return vram__sx_fail(c, VRAM_EINVAL, "attribute 'value' must hold one element (it is %s %s)",
                                 vram_dtype_name(val->dtype), vram__sx_dims(&val->shape).s);
    }
    vram__shape y = {.rank = n};
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0)
            return vram__sx_fail(c, VRAM_EINVAL, "shape entry %d is %lld", i, (long long)dims[i]);
        y.dim[i] = dims[i];
    }
    if ((rc = vram__sx_set(c, 0, val ? val->dtype : VRAM_DTYPE_FLOAT, &y)))
        return rc;
    char *out = vram__sx_alloc_out(c, 0);
    if (!out)
        return VRAM_EHOSTMEM;
    if (val) { /* the default is float 0, which calloc already wrote */
        size_t es = vram_dtype_size(val->dtype), total = (size_t)vram__shape_elems(&y);
        for (size_t i = 0; i < total; i++)
            memcpy(out + i * es, val->data, es);
    }
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_shape(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int64_t r = x->shape.rank, start = 0, end = r;
    if (c->g->opset >= 15) {
        start = vram__attr_int(c->n, "start", 0);
        end = vram__attr_int(c->n, "end", r);
    }
    /* negative counts from the back; both are clamped into [0, rank] */
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    vram__shape y = {.rank = 1, .dim = {len}};
    int rc = vram__sx_set(c, 0, VRAM_DTYPE_INT64, &y);
    if (rc)
        return rc;
    /* the shape is known here, constant input or not: always folded */
    int64_t *out = vram__sx_alloc_out(c, 0);
    if (!out)
        return VRAM_EHOSTMEM;
    for (int64_t i = 0; i < len; i++)
        out[i] = x->shape.dim[start + i];
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_gather(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *ix = vram__sx_in(c, 1);
    int r = x->shape.rank, axis, rc;
    if (ix->dtype != VRAM_DTYPE_INT64 && ix->dtype != VRAM_DTYPE_INT32)
        return vram__sx_fail(c, VRAM_EINVAL, "indices '%s' must be int64 or int32, not %s", ix->name,
                             vram_dtype_name(ix->dtype));
    if (r < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "data '%s' is a scalar", x->name);
    if ((rc = vram__sx_axis(c, vram__attr_int(c->n, "axis", 0), r, "axis", &axis)))
        return rc;
    if (r - 1 + ix->shape.rank > VRAM__MAX_RANK)
        return vram__sx_fail(c, VRAM_ENOSYS, "the output would have rank %d; at most %d is supported",
                             r - 1 + ix->shape.rank, VRAM__MAX_RANK);
    /* data.shape[:axis] + indices.shape + data.shape[axis+1:] */
    vram__shape y = {.rank = 0};
    for (int d = 0; d < axis; d++)
        y.dim[y.rank++] = x->shape.dim[d];
    for (int d = 0; d < ix->shape.rank; d++)
        y.dim[y.rank++] = ix->shape.dim[d];
    for (int d = axis + 1; d < r; d++)
        y.dim[y.rank++] = x->shape.dim[d];
    int64_t dim = x->shape.dim[axis], nidx = vram__shape_elems(&ix->shape);
    if (vram__sx_is_const(ix) && ix->data)
        for (int64_t j = 0; j < nidx; j++) {
            int64_t k = vram__sx_get_i64(ix->data, ix->dtype, (size_t)j);
            if (k < -dim || k >= dim)
                return vram__sx_fail(c, VRAM_EINVAL, "index %lld is outside [%lld, %lld] for axis %d of '%s' %s",
                                     (long long)k, (long long)-dim, (long long)dim - 1, axis, x->name,
                                     vram__sx_dims(&x->shape).s);
        }
    if ((rc = vram__sx_set(c, 0, x->dtype, &y)) || !c->fold)
        return rc;
    size_t es = vram_dtype_size(x->dtype), outer = 1, inner = es;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)x->shape.dim[d];
    for (int d = axis + 1; d < r; d++)
        inner *= (size_t)x->shape.dim[d];
    char *out = vram__sx_alloc_out(c, 0), *p = out;
    if (!out)
        return VRAM_EHOSTMEM;
    for (size_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < nidx; j++, p += inner) {
            int64_t k = vram__sx_get_i64(ix->data, ix->dtype, (size_t)j);
            k += k < 0 ? dim : 0;
            memcpy(p, (const char *)x->data + (o * (size_t)dim + (size_t)k) * inner, inner);
        }
    return vram__sx_set_data(c, 0, out);
}

int vram__sx_constant(vram__sx *c)
{
    static const char *const unsupported[] = {"sparse_value", "value_string", "value_strings"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (vram__node_attr(c->n, unsupported[i]))
            return vram__sx_fail(c, VRAM_ENOSYS, "attribute '%s' is not supported", unsupported[i]);
    static const char *const kinds[] = {"value", "value_float", "value_floats", "value_int", "value_ints"};
    const vram__attr *a = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        const vram__attr *k = vram__node_attr(c->n, kinds[i]);
        if (k && a)
            return vram__sx_fail(c, VRAM_EPARSE, "has both '%s' and '%s'", a->name, k->name);
        a = k ? k : a;
    }
    if (!a)
        return vram__sx_fail(c, VRAM_EPARSE, "has no value attribute");
    int rc;
    char *out;
    if (!strcmp(a->name, "value")) {
        if (a->type != VRAM__ATTR_TENSOR || a->tensor < 0 || a->tensor >= c->g->n_values)
            return vram__sx_fail(c, VRAM_EPARSE, "attribute 'value' is not a tensor");
        const vram__value *t = &c->g->values[a->tensor];
        if (!vram_dtype_size(t->dtype))
            return vram__sx_fail(c, VRAM_ENOSYS, "a constant of type %s is not supported",
                                 vram_dtype_name(t->dtype));
        if (t->shape.rank < 0 || vram__shape_elems(&t->shape) < 0 || (!t->data && elem_bytes(t)) ||
            t->nbytes < elem_bytes(t))
            return vram__sx_fail(c, VRAM_EPARSE, "the tensor of attribute 'value' holds %zu bytes for %s %s",
                                 t->nbytes, vram_dtype_name(t->dtype), vram__sx_dims(&t->shape).s);
        if ((rc = vram__sx_set(c, 0, t->dtype, &t->shape)) || !(out = vram__sx_alloc_out(c, 0)))
            return rc ? rc : VRAM_EHOSTMEM;
        if (elem_bytes(t))
            memcpy(out, t->data, elem_bytes(t));
        return vram__sx_set_data(c, 0, out);
    }
    int is_float = a->name[6] == 'f', is_list = a->name[strlen(a->name) - 1] == 's';
    int want = is_list ? (is_float ? VRAM__ATTR_FLOATS : VRAM__ATTR_INTS) : (is_float ? VRAM__ATTR_FLOAT : VRAM__ATTR_INT);
    if (a->type != want)
        return vram__sx_fail(c, VRAM_EPARSE, "attribute '%s' has attribute type %d", a->name, a->type);
    vram__shape y = {.rank = is_list, .dim = {(int64_t)a->n}};
    if ((rc = vram__sx_set(c, 0, is_float ? VRAM_DTYPE_FLOAT : VRAM_DTYPE_INT64, &y)) ||
        !(out = vram__sx_alloc_out(c, 0)))
        return rc ? rc : VRAM_EHOSTMEM;
    if (!is_list && is_float)
        memcpy(out, &a->f, sizeof a->f);
    else if (!is_list)
        memcpy(out, &a->i, sizeof a->i);
    else if (a->n)
        memcpy(out, is_float ? (const void *)a->floats : (const void *)a->ints, a->n * (is_float ? 4 : 8));
    return vram__sx_set_data(c, 0, out);
}
