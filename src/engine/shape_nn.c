/* src/engine/shape_nn.c - shape rules of the neural-network operators:
 * convolutions and pools (kernel, strides, dilations, pads, auto_pad,
 * ceil_mode, ConvTranspose's output_shape and output_padding), batch
 * normalization, activations, element-wise arithmetic with numpy
 * broadcasting (folded on constant integer inputs), Gemm, MatMul and
 * Softmax, following ONNX opsets 11-21. */
#include <stdlib.h>
#include <string.h>

#include "shape_ops.h"

static int same_dtype(const vram__sx *c, const vram__value *a, const vram__value *b)
{
    if (a->dtype != b->dtype)
        return vram__sx_fail(c, VRAM_EINVAL, "inputs '%s' (%s) and '%s' (%s) must have one element type",
                             a->name, vram_dtype_name(a->dtype), b->name,
                             vram_dtype_name(b->dtype));
    return 0;
}

/* ---- convolutions and pools --------------------------------------------- */

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

typedef struct spatial {
    int nsp; /* spatial axes */
    int auto_pad;
    int64_t k[VRAM__MAX_RANK], s[VRAM__MAX_RANK], d[VRAM__MAX_RANK];
    int64_t pads[2 * VRAM__MAX_RANK]; /* begins, then ends */
} spatial;

/* Read a positive per-axis list attribute (default 1s). */
static int per_axis(const vram__sx *c, const char *name, int nsp, int64_t def, int64_t min,
                    int64_t *out)
{
    int n;
    int rc = vram__sx_attr_ints(c, name, out, VRAM__MAX_RANK * 2, &n);
    if (rc)
        return rc;
    if (n < 0) {
        for (int i = 0; i < nsp; i++)
            out[i] = def;
        return 0;
    }
    if (n != nsp)
        return vram__sx_fail(c, VRAM_EINVAL, "attribute '%s' has %d entries for %d spatial axes", name, n,
                             nsp);
    for (int i = 0; i < nsp; i++)
        if (out[i] < min)
            return vram__sx_fail(c, VRAM_EINVAL, "attribute '%s'[%d] is %lld; it must be at least %lld",
                                 name, i, (long long)out[i], (long long)min);
    return 0;
}

/* kernel_shape, strides, dilations, pads and auto_pad. `wk` holds the
 * weight's kernel dims for convolutions (kernel_shape optional, must agree)
 * and is NULL for pools (kernel_shape required). */
static int read_spatial(const vram__sx *c, int nsp, const int64_t *wk, spatial *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->nsp = nsp;
    int n, rc = vram__sx_attr_ints(c, "kernel_shape", sp->k, VRAM__MAX_RANK, &n);
    if (rc)
        return rc;
    if (n < 0 && !wk)
        return vram__sx_fail(c, VRAM_EPARSE, "attribute 'kernel_shape' is required");
    if (n >= 0 && n != nsp)
        return vram__sx_fail(c, VRAM_EINVAL, "attribute 'kernel_shape' has %d entries for %d spatial axes",
                             n, nsp);
    for (int i = 0; i < nsp; i++) {
        if (n < 0)
            sp->k[i] = wk[i];
        else if (wk && sp->k[i] != wk[i])
            return vram__sx_fail(c, VRAM_EINVAL, "kernel_shape[%d] = %lld but the weight's kernel is %lld",
                                 i, (long long)sp->k[i], (long long)wk[i]);
        if (sp->k[i] < 1)
            return vram__sx_fail(c, VRAM_EINVAL, "kernel size %lld on spatial axis %d", (long long)sp->k[i],
                                 i);
    }
    if ((rc = per_axis(c, "strides", nsp, 1, 1, sp->s)) || (rc = per_axis(c, "dilations", nsp, 1, 1, sp->d)))
        return rc;
    if ((rc = vram__sx_attr_ints(c, "pads", sp->pads, 2 * VRAM__MAX_RANK, &n)))
        return rc;
    if (n >= 0 && n != 2 * nsp)
        return vram__sx_fail(c, VRAM_EINVAL, "attribute 'pads' has %d entries; %d spatial axes need %d", n,
                             nsp, 2 * nsp);
    for (int i = 0; i < 2 * nsp; i++)
        if (sp->pads[i] < 0)
            return vram__sx_fail(c, VRAM_EINVAL, "pads[%d] is %lld; pads must be >= 0", i,
                                 (long long)sp->pads[i]);
    const char *ap = vram__attr_string(c->n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET"))
        sp->auto_pad = PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER"))
        sp->auto_pad = PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER"))
        sp->auto_pad = PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID"))
        sp->auto_pad = PAD_VALID;
    else
        return vram__sx_fail(c, VRAM_EINVAL, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID",
                             ap);
    return 0;
}

/* Output size of spatial axis i of a convolution or pool over `in`.
 * ceil_mode applies to explicit pads only: with auto_pad, ONNX's operator
 * text and reference give ceil(in / s) for SAME and floor((in - dk) / s) + 1
 * for VALID whatever ceil_mode says. */
static int forward_size(const vram__sx *c, const spatial *sp, int i, int64_t in, int ceil_mode,
                        int64_t *out)
{
    int64_t s = sp->s[i], dk = (sp->k[i] - 1) * sp->d[i] + 1, o;
    if (sp->auto_pad == PAD_SAME_UPPER || sp->auto_pad == PAD_SAME_LOWER) {
        o = (in + s - 1) / s; /* ceil(in / s) */
    } else {
        int64_t pb = sp->auto_pad == PAD_VALID ? 0 : sp->pads[i];
        int64_t pe = sp->auto_pad == PAD_VALID ? 0 : sp->pads[i + sp->nsp];
        int64_t span = in + pb + pe - dk;
        if (span < 0)
            return vram__sx_fail(c, VRAM_EINVAL,
                                 "spatial axis %d: the dilated kernel (%lld) is larger than the padded "
                                 "input (%lld + %lld + %lld)",
                                 i, (long long)dk, (long long)in, (long long)pb, (long long)pe);
        if (ceil_mode && sp->auto_pad == PAD_NOTSET) {
            o = (span + s - 1) / s + 1;
            /* a last window that would start in the right padding is dropped */
            if ((o - 1) * s >= in + pb)
                o--;
        } else {
            o = span / s + 1;
        }
    }
    if (o < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "spatial axis %d: output size %lld from input %lld",
                             i, (long long)o, (long long)in);
    *out = o;
    return 0;
}

/* What Conv and ConvTranspose check alike: N, C and a spatial axis, a
 * weight of the same rank and type, a positive group. */
static int conv_inputs(vram__sx *c, int64_t *group)
{
    const vram__value *x = vram__sx_in(c, 0), *w = vram__sx_in(c, 1);
    int r = x->shape.rank, rc;
    if (r < 3)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' has shape %s; it needs N, C and a spatial axis",
                             x->name, vram__sx_dims(&x->shape).s);
    if (w->shape.rank != r)
        return vram__sx_fail(c, VRAM_EINVAL, "weight '%s' %s has rank %d but input '%s' %s has %d", w->name,
                             vram__sx_dims(&w->shape).s, w->shape.rank, x->name,
                             vram__sx_dims(&x->shape).s, r);
    if ((rc = same_dtype(c, x, w)))
        return rc;
    *group = vram__attr_int(c->n, "group", 1);
    if (*group < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "group %lld", (long long)*group);
    return 0;
}

int vram__sx_conv(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *w = vram__sx_in(c, 1), *b = vram__sx_in(c, 2);
    int r = x->shape.rank, rc;
    int64_t group, m = w->shape.dim[0];
    if ((rc = conv_inputs(c, &group)))
        return rc;
    if (x->shape.dim[1] != w->shape.dim[1] * group || m % group)
        return vram__sx_fail(c, VRAM_EINVAL,
                             "input '%s' %s has %lld channels but weight '%s' %s takes %lld per group x %lld "
                             "groups (and its %lld outputs must divide by the groups)",
                             x->name, vram__sx_dims(&x->shape).s, (long long)x->shape.dim[1], w->name,
                             vram__sx_dims(&w->shape).s, (long long)w->shape.dim[1], (long long)group,
                             (long long)m);
    if (b && (b->shape.rank != 1 || b->shape.dim[0] != m))
        return vram__sx_fail(c, VRAM_EINVAL, "bias '%s' has shape %s; it must be [%lld]", b->name,
                             vram__sx_dims(&b->shape).s, (long long)m);
    spatial sp;
    if ((rc = read_spatial(c, r - 2, w->shape.dim + 2, &sp)))
        return rc;
    vram__shape y = {.rank = r, .dim = {x->shape.dim[0], m}};
    for (int i = 0; i < r - 2; i++)
        if ((rc = forward_size(c, &sp, i, x->shape.dim[i + 2], 0, &y.dim[i + 2])))
            return rc;
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_conv_transpose(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *w = vram__sx_in(c, 1), *b = vram__sx_in(c, 2);
    int r = x->shape.rank, nsp = r - 2, rc;
    int64_t group;
    if ((rc = conv_inputs(c, &group)))
        return rc;
    /* the weight is C x (M / group) x kernel */
    if (x->shape.dim[1] != w->shape.dim[0] || x->shape.dim[1] % group)
        return vram__sx_fail(c, VRAM_EINVAL,
                             "input '%s' %s has %lld channels but weight '%s' %s expects %lld (divisible by "
                             "group %lld)",
                             x->name, vram__sx_dims(&x->shape).s, (long long)x->shape.dim[1], w->name,
                             vram__sx_dims(&w->shape).s, (long long)w->shape.dim[0], (long long)group);
    int64_t m = w->shape.dim[1] * group;
    if (b && (b->shape.rank != 1 || b->shape.dim[0] != m))
        return vram__sx_fail(c, VRAM_EINVAL, "bias '%s' has shape %s; it must be [%lld]", b->name,
                             vram__sx_dims(&b->shape).s, (long long)m);
    spatial sp;
    int64_t opad[2 * VRAM__MAX_RANK], oshape[VRAM__MAX_RANK + 2];
    int n_os;
    if ((rc = read_spatial(c, nsp, w->shape.dim + 2, &sp)) ||
        (rc = per_axis(c, "output_padding", nsp, 0, 0, opad)) ||
        (rc = vram__sx_attr_ints(c, "output_shape", oshape, VRAM__MAX_RANK + 2, &n_os)))
        return rc;
    /* output_shape may list the spatial sizes, or N, C and the spatial sizes */
    if (n_os >= 0 && n_os != nsp && n_os != nsp + 2)
        return vram__sx_fail(c, VRAM_EINVAL, "attribute 'output_shape' has %d entries for %d spatial axes",
                             n_os, nsp);
    vram__shape y = {.rank = r, .dim = {x->shape.dim[0], m}};
    for (int i = 0; i < nsp; i++) {
        int64_t in = x->shape.dim[i + 2], o;
        if (n_os >= 0)
            o = oshape[i + n_os - nsp];
        else if (sp.auto_pad == PAD_SAME_UPPER || sp.auto_pad == PAD_SAME_LOWER)
            o = in * sp.s[i];
        else
            o = sp.s[i] * (in - 1) + opad[i] + (sp.k[i] - 1) * sp.d[i] + 1 -
                (sp.auto_pad == PAD_VALID ? 0 : sp.pads[i] + sp.pads[i + nsp]);
        if (o < 1)
            return vram__sx_fail(c, VRAM_EINVAL, "spatial axis %d: output size %lld from input %lld", i,
                                 (long long)o, (long long)in);
        y.dim[i + 2] = o;
    }
    if (n_os == nsp + 2 && (oshape[0] != y.dim[0] || oshape[1] != y.dim[1]))
        return vram__sx_fail(c, VRAM_EINVAL, "output_shape starts with %lld x %lld but the output is %lld x %lld",
                             (long long)oshape[0], (long long)oshape[1], (long long)y.dim[0],
                             (long long)y.dim[1]);
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_pool(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int r = x->shape.rank, rc;
    if (r < 3)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' has shape %s; it needs N, C and a spatial axis",
                             x->name, vram__sx_dims(&x->shape).s);
    spatial sp;
    if ((rc = read_spatial(c, r - 2, NULL, &sp)))
        return rc;
    int ceil_mode = vram__attr_int(c->n, "ceil_mode", 0) != 0;
    vram__shape y = {.rank = r, .dim = {x->shape.dim[0], x->shape.dim[1]}};
    for (int i = 0; i < r - 2; i++)
        if ((rc = forward_size(c, &sp, i, x->shape.dim[i + 2], ceil_mode, &y.dim[i + 2])))
            return rc;
    if (vram__sx_out_used(c, 1))
        return vram__sx_fail(c, VRAM_ENOSYS, "the Indices output '%s' is not supported",
                             vram__sx_out(c, 1)->name);
    if ((rc = vram__sx_set(c, 0, x->dtype, &y)))
        return rc;
    return vram__sx_set(c, 1, VRAM_DTYPE_INT64, &y);
}

int vram__sx_global_pool(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    if (x->shape.rank < 2)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' has shape %s; it needs N and C", x->name,
                             vram__sx_dims(&x->shape).s);
    vram__shape y = x->shape;
    for (int i = 2; i < y.rank; i++)
        y.dim[i] = 1;
    return vram__sx_set(c, 0, x->dtype, &y);
}

int vram__sx_batchnorm(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    static const char *const names[] = {"scale", "B", "mean", "var"};
    if (x->shape.rank < 2)
        return vram__sx_fail(c, VRAM_EINVAL, "input '%s' has shape %s; it needs N and C", x->name,
                             vram__sx_dims(&x->shape).s);
    int64_t ch = x->shape.dim[1];
    for (int i = 1; i <= 4; i++) {
        const vram__value *p = vram__sx_in(c, i);
        if (p->shape.rank != 1 || p->shape.dim[0] != ch)
            return vram__sx_fail(c, VRAM_EINVAL, "%s '%s' has shape %s; input '%s' %s needs [%lld]",
                                 names[i - 1], p->name, vram__sx_dims(&p->shape).s, x->name,
                                 vram__sx_dims(&x->shape).s, (long long)ch);
    }
    if (vram__attr_int(c->n, "training_mode", 0))
        return vram__sx_fail(c, VRAM_ENOSYS, "training mode is not supported");
    for (int i = 1; i < c->n->n_out; i++)
        if (vram__sx_out_used(c, i))
            return vram__sx_fail(c, VRAM_ENOSYS, "output %d '%s' (training statistics) is not supported", i,
                                 vram__sx_out(c, i)->name);
    int rc = vram__sx_set(c, 0, x->dtype, &x->shape);
    vram__shape stat = {.rank = 1, .dim = {ch}};
    for (int i = 1; !rc && i < c->n->n_out; i++)
        rc = vram__sx_set(c, i, vram__sx_in(c, 3)->dtype, &stat);
    return rc;
}

/* ---- element-wise --------------------------------------------------------- */

int vram__sx_unary(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    return vram__sx_set(c, 0, x->dtype, &x->shape);
}

int vram__sx_clip(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    static const char *const names[] = {"", "min", "max"};
    for (int i = 1; i <= 2; i++) {
        const vram__value *b = vram__sx_in(c, i);
        if (!b)
            continue;
        if (vram__shape_elems(&b->shape) != 1)
            return vram__sx_fail(c, VRAM_EINVAL, "%s '%s' has shape %s; it must be a scalar", names[i],
                                 b->name, vram__sx_dims(&b->shape).s);
        int rc = same_dtype(c, x, b);
        if (rc)
            return rc;
    }
    return vram__sx_set(c, 0, x->dtype, &x->shape);
}

int vram__sx_prelu(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0), *slope = vram__sx_in(c, 1);
    int rc = same_dtype(c, x, slope);
    if (rc)
        return rc;
    if (!vram__sx_unidir_ok(&slope->shape, &x->shape))
        return vram__sx_fail(c, VRAM_EINVAL, "slope '%s' %s does not broadcast to input '%s' %s",
                             slope->name, vram__sx_dims(&slope->shape).s, x->name,
                             vram__sx_dims(&x->shape).s);
    return vram__sx_set(c, 0, x->dtype, &x->shape);
}

/* Strides of `in` seen through the broadcast to `out`: 0 along axes it is
 * repeated over. */
static void bcast_strides(const vram__shape *in, const vram__shape *out, int64_t *st)
{
    int off = out->rank - in->rank;
    int64_t acc = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        int j = i - off;
        if (j < 0) {
            st[i] = 0;
            continue;
        }
        st[i] = in->dim[j] == 1 ? 0 : acc;
        acc *= in->dim[j];
    }
}

/* Integer arithmetic wraps (two's complement) instead of overflowing. */
static int fold_int(const vram__sx *c, char op, int64_t a, int64_t b, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case 'A': *out = (int64_t)(ua + ub); return 0;
    case 'S': *out = (int64_t)(ua - ub); return 0;
    case 'M': *out = (int64_t)(ua * ub); return 0;
    default:
        if (b == 0)
            return vram__sx_fail(c, VRAM_EINVAL, "integer division by zero in a constant");
        *out = a == INT64_MIN && b == -1 ? INT64_MIN : a / b; /* truncates toward zero */
        return 0;
    }
}

enum { FOLD_FLOAT_MAX_ELEMS = 64 };

int vram__sx_binary(vram__sx *c)
{
    const vram__value *a = vram__sx_in(c, 0), *b = vram__sx_in(c, 1);
    vram__shape y;
    int rc = same_dtype(c, a, b);
    if (rc || (rc = vram__sx_broadcast(c, &a->shape, &b->shape, &y)) ||
        (rc = vram__sx_set(c, 0, a->dtype, &y)))
        return rc;
    int64_t total = vram__shape_elems(&y);
    int is_int = a->dtype == VRAM_DTYPE_INT64 || a->dtype == VRAM_DTYPE_INT32;
    int is_float = a->dtype == VRAM_DTYPE_FLOAT || a->dtype == VRAM_DTYPE_DOUBLE;
    if (!c->fold || !(is_int || (is_float && total <= FOLD_FLOAT_MAX_ELEMS)))
        return 0;
    char op = c->n->op[0]; /* Add, Sub, Mul, Div */
    int64_t sa[VRAM__MAX_RANK], sb[VRAM__MAX_RANK], idx[VRAM__MAX_RANK] = {0};
    bcast_strides(&a->shape, &y, sa);
    bcast_strides(&b->shape, &y, sb);
    void *out = vram__sx_alloc_out(c, 0);
    if (!out)
        return VRAM_EHOSTMEM;
    int64_t ia = 0, ib = 0;
    for (int64_t e = 0; e < total; e++) {
        if (is_int) {
            int64_t v = 0;
            if ((rc = fold_int(c, op, vram__sx_get_i64(a->data, a->dtype, (size_t)ia),
                               vram__sx_get_i64(b->data, b->dtype, (size_t)ib), &v))) {
                free(out);
                return rc;
            }
            vram__sx_put_i64(out, a->dtype, (size_t)e, v);
        } else if (a->dtype == VRAM_DTYPE_FLOAT) {
            /* in float, as the kernels compute it */
            float x = (float)vram__sx_get_f64(a->data, a->dtype, (size_t)ia);
            float z = (float)vram__sx_get_f64(b->data, b->dtype, (size_t)ib);
            float v = op == 'A' ? x + z : op == 'S' ? x - z : op == 'M' ? x * z : x / z;
            vram__sx_put_f64(out, a->dtype, (size_t)e, v);
        } else {
            double x = vram__sx_get_f64(a->data, a->dtype, (size_t)ia);
            double z = vram__sx_get_f64(b->data, b->dtype, (size_t)ib);
            vram__sx_put_f64(out, a->dtype, (size_t)e,
                             op == 'A' ? x + z : op == 'S' ? x - z : op == 'M' ? x * z : x / z);
        }
        /* advance the output index, carrying into the input offsets */
        for (int d = y.rank - 1; d >= 0; d--) {
            ia += sa[d];
            ib += sb[d];
            if (++idx[d] < y.dim[d])
                break;
            ia -= sa[d] * y.dim[d];
            ib -= sb[d] * y.dim[d];
            idx[d] = 0;
        }
    }
    return vram__sx_set_data(c, 0, out);
}

/* ---- matrix products and softmax ------------------------------------------ */

int vram__sx_gemm(vram__sx *c)
{
    const vram__value *a = vram__sx_in(c, 0), *b = vram__sx_in(c, 1), *cc = vram__sx_in(c, 2);
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return vram__sx_fail(c, VRAM_EINVAL, "A '%s' %s and B '%s' %s must be matrices", a->name,
                             vram__sx_dims(&a->shape).s, b->name, vram__sx_dims(&b->shape).s);
    int rc = same_dtype(c, a, b);
    if (rc)
        return rc;
    int ta = vram__attr_int(c->n, "transA", 0) != 0, tb = vram__attr_int(c->n, "transB", 0) != 0;
    int64_t m = a->shape.dim[ta ? 1 : 0], ka = a->shape.dim[ta ? 0 : 1];
    int64_t kb = b->shape.dim[tb ? 1 : 0], n = b->shape.dim[tb ? 0 : 1];
    if (ka != kb)
        return vram__sx_fail(c, VRAM_EINVAL,
                             "A '%s' %s (transA=%d) and B '%s' %s (transB=%d) disagree on K: %lld vs %lld",
                             a->name, vram__sx_dims(&a->shape).s, ta, b->name,
                             vram__sx_dims(&b->shape).s, tb, (long long)ka, (long long)kb);
    vram__shape y = {.rank = 2, .dim = {m, n}};
    if (cc && ((rc = same_dtype(c, a, cc)) || !vram__sx_unidir_ok(&cc->shape, &y)))
        return rc ? rc
                  : vram__sx_fail(c, VRAM_EINVAL, "C '%s' %s does not broadcast to the product %s", cc->name,
                                  vram__sx_dims(&cc->shape).s, vram__sx_dims(&y).s);
    return vram__sx_set(c, 0, a->dtype, &y);
}

int vram__sx_matmul(vram__sx *c)
{
    const vram__value *a = vram__sx_in(c, 0), *b = vram__sx_in(c, 1);
    int rc = same_dtype(c, a, b);
    if (rc)
        return rc;
    if (a->shape.rank < 1 || b->shape.rank < 1)
        return vram__sx_fail(c, VRAM_EINVAL, "inputs '%s' %s and '%s' %s must not be scalars", a->name,
                             vram__sx_dims(&a->shape).s, b->name, vram__sx_dims(&b->shape).s);
    /* numpy: a vector operand becomes a 1 x K row (a) or a K x 1 column (b),
     * and that axis is dropped from the result */
    vram__shape as = a->shape, bs = b->shape;
    if (as.rank == 1)
        as = (vram__shape){.rank = 2, .dim = {1, a->shape.dim[0]}};
    if (bs.rank == 1)
        bs = (vram__shape){.rank = 2, .dim = {b->shape.dim[0], 1}};
    if (as.dim[as.rank - 1] != bs.dim[bs.rank - 2])
        return vram__sx_fail(c, VRAM_EINVAL, "'%s' %s and '%s' %s disagree on K: %lld vs %lld", a->name,
                             vram__sx_dims(&a->shape).s, b->name, vram__sx_dims(&b->shape).s,
                             (long long)as.dim[as.rank - 1], (long long)bs.dim[bs.rank - 2]);
    vram__shape ab = {.rank = as.rank - 2}, bb = {.rank = bs.rank - 2}, y;
    memcpy(ab.dim, as.dim, sizeof(int64_t) * (size_t)ab.rank);
    memcpy(bb.dim, bs.dim, sizeof(int64_t) * (size_t)bb.rank);
    if ((rc = vram__sx_broadcast(c, &ab, &bb, &y)))
        return rc;
    if (a->shape.rank > 1)
        y.dim[y.rank++] = as.dim[as.rank - 2];
    if (b->shape.rank > 1)
        y.dim[y.rank++] = bs.dim[bs.rank - 1];
    return vram__sx_set(c, 0, a->dtype, &y);
}

int vram__sx_softmax(vram__sx *c)
{
    const vram__value *x = vram__sx_in(c, 0);
    int axis;
    int64_t a = vram__attr_int(c->n, "axis", c->g->opset < 13 ? 1 : -1);
    int rc = x->shape.rank < 1
                 ? vram__sx_fail(c, VRAM_EINVAL, "input '%s' is a scalar", x->name)
                 : vram__sx_axis(c, a, x->shape.rank, "axis", &axis);
    return rc ? rc : vram__sx_set(c, 0, x->dtype, &x->shape);
}
