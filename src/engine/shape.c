/* src/engine/shape.c - shape inference and constant folding (shape.h): the
 * driver that substitutes the batch into the graph inputs, walks the nodes
 * in order through the operator table, checks the declared graph outputs,
 * and the helpers the per-operator rules (shape_nn.c, shape_tensor.c,
 * shape_const.c) share:
 * messages naming the node, constant inputs, axes and broadcasting. Element
 * access for folding is in shape_elem.c. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape.h"
#include "shape_ops.h"

/* ---- the operator table ------------------------------------------------ */

typedef struct op_rule {
    const char *op;
    int (*infer)(vram__sx *c);
    int folds;  /* folds when every present input is constant */
    int min_in; /* inputs 0..min_in-1 must be present */
    int max_in; /* -1: any number */
} op_rule;

static const op_rule rules[] = {
    {"Conv", vram__sx_conv, 0, 2, 3},
    {"ConvTranspose", vram__sx_conv_transpose, 0, 2, 3},
    {"BatchNormalization", vram__sx_batchnorm, 0, 5, 5},
    {"Relu", vram__sx_unary, 0, 1, 1},
    {"PRelu", vram__sx_prelu, 0, 2, 2},
    {"LeakyRelu", vram__sx_unary, 0, 1, 1},
    {"Sigmoid", vram__sx_unary, 0, 1, 1},
    {"Tanh", vram__sx_unary, 0, 1, 1},
    {"Clip", vram__sx_clip, 0, 1, 3},
    {"HardSigmoid", vram__sx_unary, 0, 1, 1},
    {"HardSwish", vram__sx_unary, 0, 1, 1},
    {"Add", vram__sx_binary, 1, 2, 2},
    {"Sub", vram__sx_binary, 1, 2, 2},
    {"Mul", vram__sx_binary, 1, 2, 2},
    {"Div", vram__sx_binary, 1, 2, 2},
    {"MaxPool", vram__sx_pool, 0, 1, 1},
    {"AveragePool", vram__sx_pool, 0, 1, 1},
    {"GlobalAveragePool", vram__sx_global_pool, 0, 1, 1},
    {"Gemm", vram__sx_gemm, 0, 2, 3},
    {"MatMul", vram__sx_matmul, 0, 2, 2},
    {"Flatten", vram__sx_flatten, 0, 1, 1},
    {"Reshape", vram__sx_reshape, 1, 2, 2},
    {"Transpose", vram__sx_transpose, 0, 1, 1},
    {"Concat", vram__sx_concat, 1, 1, -1},
    {"Split", vram__sx_split, 0, 1, 2},
    {"Slice", vram__sx_slice, 1, 3, 5},
    {"Squeeze", vram__sx_squeeze, 1, 1, 2},
    {"Unsqueeze", vram__sx_unsqueeze, 1, 1, 2},
    {"Pad", vram__sx_pad, 0, 1, 4},
    {"Resize", vram__sx_resize, 0, 1, 4},
    {"Softmax", vram__sx_softmax, 0, 1, 1},
    {"Identity", vram__sx_identity, 1, 1, 1},
    {"Cast", vram__sx_cast, 1, 1, 1},
    {"ConstantOfShape", vram__sx_constant_of_shape, 1, 1, 1},
    {"Shape", vram__sx_shape, 1, 1, 1},
    {"Gather", vram__sx_gather, 1, 2, 2},
    {"Constant", vram__sx_constant, 1, 0, 0},
};

static const op_rule *find_rule(const char *op)
{
    if (!op)
        return NULL;
    for (size_t i = 0; i < VRAM__ARRAY_LEN(rules); i++)
        if (strcmp(rules[i].op, op) == 0)
            return &rules[i];
    return NULL;
}

int vram__op_supported(const char *op) { return find_rule(op) != NULL; }

/* ---- helpers shared by the rules --------------------------------------- */

vram__shape_text vram__sx_dims(const vram__shape *s)
{
    vram__shape_text t;
    if (s->rank < 0 || s->rank > VRAM__MAX_RANK) {
        snprintf(t.s, sizeof t.s, "[?]");
        return t;
    }
    size_t len = 0;
    t.s[len++] = '[';
    for (int i = 0; i < s->rank; i++) {
        int w = s->dim[i] < 0
                    ? snprintf(t.s + len, sizeof t.s - len, "%s?", i ? "," : "")
                    : snprintf(t.s + len, sizeof t.s - len, "%s%lld", i ? "," : "",
                               (long long)s->dim[i]);
        if (w < 0 || (size_t)w >= sizeof t.s - len - 1)
            break; /* cannot happen with 8 dims of at most 20 digits */
        len += (size_t)w;
    }
    t.s[len++] = ']';
    t.s[len] = '\0';
    return t;
}

int vram__sx_fail(const vram__sx *c, int code, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vram__fail(code, "node '%s' (%s, node %d): %s", c->n->name ? c->n->name : "",
                      c->n->op, c->node, what);
}

const vram__value *vram__sx_in(const vram__sx *c, int i)
{
    return i >= 0 && i < c->n->n_in && c->n->in[i] >= 0 ? &c->g->values[c->n->in[i]] : NULL;
}

vram__value *vram__sx_out(const vram__sx *c, int i)
{
    return i >= 0 && i < c->n->n_out && c->n->out[i] >= 0 ? &c->g->values[c->n->out[i]] : NULL;
}

int vram__sx_is_const(const vram__value *v)
{
    return v && (v->data != NULL ||
                 ((v->flags & VRAM__VALUE_INITIALIZER) && vram__shape_elems(&v->shape) == 0));
}

int vram__sx_out_used(const vram__sx *c, int i)
{
    return i >= 0 && i < c->n->n_out && c->n->out[i] >= 0 && c->used[c->n->out[i]];
}

int vram__sx_set(const vram__sx *c, int i, int dtype, const vram__shape *s)
{
    vram__value *v = vram__sx_out(c, i);
    if (!v)
        return 0;
    if (s->rank < 0 || s->rank > VRAM__MAX_RANK)
        return vram__sx_fail(c, VRAM_ENOSYS, "output '%s' would have rank %d; at most %d is supported",
                             v->name, s->rank, VRAM__MAX_RANK);
    if (vram__shape_elems(s) < 0)
        return vram__sx_fail(c, VRAM_EINVAL, "output '%s' would have shape %s", v->name,
                             vram__sx_dims(s).s);
    v->dtype = dtype;
    v->shape = *s;
    return 0;
}

void *vram__sx_alloc_out(const vram__sx *c, int i)
{
    const vram__value *v = vram__sx_out(c, i);
    size_t bytes = (size_t)vram__shape_elems(&v->shape) * vram_dtype_size(v->dtype);
    return vram__calloc(bytes ? bytes : 1, 1);
}

int vram__sx_set_data(const vram__sx *c, int i, void *data)
{
    vram__value *v = vram__sx_out(c, i);
    if (!data)
        return VRAM_EHOSTMEM; /* vram__calloc recorded it */
    if (!v) {
        free(data);
        return 0;
    }
    vram__value_set_data(v, data, (size_t)vram__shape_elems(&v->shape) * vram_dtype_size(v->dtype));
    return 0;
}

/* The element count of a constant input, checked against its bytes. */
static int const_count(const vram__sx *c, const vram__value *v, const char *what, int cap, int *n)
{
    if (!vram__sx_is_const(v))
        return vram__sx_fail(c, VRAM_ENOSYS,
                             "the %s input '%s' is computed at run time; shapes that depend on "
                             "data are not supported",
                             what, v->name);
    int64_t k = vram__shape_elems(&v->shape);
    if (k > cap)
        return vram__sx_fail(c, VRAM_EINVAL, "the %s input '%s' has %lld entries, more than %d", what,
                             v->name, (long long)k, cap);
    if (k > 0 && v->nbytes < (size_t)k * vram_dtype_size(v->dtype))
        return vram__sx_fail(c, VRAM_EPARSE, "the %s input '%s' holds %zu bytes for shape %s", what,
                             v->name, v->nbytes, vram__sx_dims(&v->shape).s);
    *n = (int)k;
    return 0;
}

int vram__sx_const_ints(const vram__sx *c, int i, const char *what, int64_t *out, int cap, int *n)
{
    const vram__value *v = vram__sx_in(c, i);
    if (!v)
        return vram__sx_fail(c, VRAM_EINVAL, "the %s input is missing", what);
    if (v->dtype != VRAM_DTYPE_INT64 && v->dtype != VRAM_DTYPE_INT32)
        return vram__sx_fail(c, VRAM_EINVAL, "the %s input '%s' must be int64, not %s", what, v->name,
                             vram_dtype_name(v->dtype));
    int rc = const_count(c, v, what, cap, n);
    if (rc)
        return rc;
    for (int j = 0; j < *n; j++)
        out[j] = vram__sx_get_i64(v->data, v->dtype, (size_t)j);
    return 0;
}

int vram__sx_const_floats(const vram__sx *c, int i, const char *what, double *out, int cap,
                          int *n)
{
    const vram__value *v = vram__sx_in(c, i);
    if (!v)
        return vram__sx_fail(c, VRAM_EINVAL, "the %s input is missing", what);
    if (!vram__sx_is_float_type(v->dtype))
        return vram__sx_fail(c, VRAM_EINVAL, "the %s input '%s' must be float, not %s", what, v->name,
                             vram_dtype_name(v->dtype));
    int rc = const_count(c, v, what, cap, n);
    if (rc)
        return rc;
    for (int j = 0; j < *n; j++)
        out[j] = vram__sx_get_f64(v->data, v->dtype, (size_t)j);
    return 0;
}

int vram__sx_attr_ints(const vram__sx *c, const char *name, int64_t *out, int cap, int *n)
{
    const vram__attr *a = vram__node_attr(c->n, name);
    if (!a) {
        *n = -1;
        return 0;
    }
    if (a->type != VRAM__ATTR_INTS)
        return vram__sx_fail(c, VRAM_EPARSE, "attribute '%s' must be a list of ints", name);
    if (a->n > (size_t)cap)
        return vram__sx_fail(c, VRAM_EINVAL, "attribute '%s' has %zu entries, more than %d", name,
                             a->n, cap);
    for (size_t j = 0; j < a->n; j++)
        out[j] = a->ints[j];
    *n = (int)a->n;
    return 0;
}

int vram__sx_axis(const vram__sx *c, int64_t axis, int rank, const char *what, int *out)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return vram__sx_fail(c, VRAM_EINVAL, "%s %lld is outside [%d, %d] for rank %d", what,
                             (long long)axis, -rank, rank - 1, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

int vram__sx_broadcast(const vram__sx *c, const vram__shape *a, const vram__shape *b,
                       vram__shape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    vram__shape s = {.rank = r};
    for (int i = 0; i < r; i++) {
        /* align from the right; a missing leading dimension is 1 */
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return vram__sx_fail(c, VRAM_EINVAL, "shapes %s and %s do not broadcast (axis %d: %lld vs %lld)",
                                 vram__sx_dims(a).s, vram__sx_dims(b).s, i, (long long)da,
                                 (long long)db);
        s.dim[i] = da == 1 ? db : da;
    }
    *out = s;
    return 0;
}

int vram__sx_unidir_ok(const vram__shape *from, const vram__shape *to)
{
    if (from->rank > to->rank)
        return 0;
    for (int i = 0; i < from->rank; i++) {
        int64_t f = from->dim[from->rank - 1 - i], t = to->dim[to->rank - 1 - i];
        if (f != 1 && f != t)
            return 0;
    }
    return 1;
}

/* ---- the driver --------------------------------------------------------- */

/* What a graph output declared before inference; dims that were unknown or
 * symbolic are -1 (not checked). */
typedef struct declared {
    int dtype;
    vram__shape shape;
} declared;

static int set_symbolic(vram__value *v, int axis)
{
    if (v->dim_param[axis])
        return 0;
    v->dim_param[axis] = vram__strdup("?");
    return v->dim_param[axis] ? 0 : VRAM_EHOSTMEM;
}

static int bind_inputs(vram__graph *g, int64_t batch)
{
    for (int k = 0; k < g->n_inputs; k++) {
        if (g->inputs[k] < 0 || g->inputs[k] >= g->n_values)
            return vram__fail(VRAM_EPARSE, "graph input %d refers to value %d of %d", k, g->inputs[k],
                              g->n_values);
        vram__value *v = &g->values[g->inputs[k]];
        if (v->shape.rank < 0 || v->shape.rank > VRAM__MAX_RANK)
            return vram__fail(VRAM_EINVAL, "graph input '%s' has no declared shape (rank %d)", v->name,
                              v->shape.rank);
        if (!vram_dtype_size(v->dtype))
            return vram__fail(VRAM_ENOSYS, "graph input '%s' has element type %s, which the engine does not handle",
                              v->name, vram_dtype_name(v->dtype));
        for (int d = 0; d < v->shape.rank; d++) {
            if (d == 0 && (v->dim_param[0] || v->shape.dim[0] < 0)) {
                int rc = set_symbolic(v, 0);
                if (rc)
                    return rc;
                v->shape.dim[0] = batch;
            } else if (v->shape.dim[d] < 0) {
                return vram__fail(VRAM_EINVAL,
                                  "graph input '%s' has an unknown dimension at axis %d%s%s%s of %s; "
                                  "only the first (batch) axis may be left open",
                                  v->name, d, v->dim_param[d] ? " ('" : "",
                                  v->dim_param[d] ? v->dim_param[d] : "", v->dim_param[d] ? "')" : "",
                                  vram__sx_dims(&v->shape).s);
            }
        }
    }
    return 0;
}

/* Forget what an earlier call derived for node outputs, keeping what graph
 * outputs declared (in decl) and marking which values something reads. */
static int reset_outputs(vram__graph *g, declared *decl, unsigned char *used)
{
    for (int k = 0; k < g->n_outputs; k++) {
        int vi = g->outputs[k];
        if (vi < 0 || vi >= g->n_values)
            return vram__fail(VRAM_EPARSE, "graph output %d refers to value %d of %d", k, vi,
                              g->n_values);
        const vram__value *v = &g->values[vi];
        decl[k].dtype = v->dtype;
        decl[k].shape = v->shape;
        if (v->shape.rank > VRAM__MAX_RANK)
            decl[k].shape.rank = -1;
        for (int d = 0; d < decl[k].shape.rank; d++)
            if (v->dim_param[d])
                decl[k].shape.dim[d] = -1;
        used[vi] = 1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vram__node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] >= g->n_values || n->in[j] < -1)
                return vram__fail(VRAM_EPARSE, "node '%s' (%s, node %d): input %d refers to value %d of %d",
                                  n->name ? n->name : "", n->op, i, j, n->in[j], g->n_values);
            if (n->in[j] >= 0)
                used[n->in[j]] = 1;
        }
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] >= g->n_values || n->out[j] < -1)
                return vram__fail(VRAM_EPARSE, "node '%s' (%s, node %d): output %d refers to value %d of %d",
                                  n->name ? n->name : "", n->op, i, j, n->out[j], g->n_values);
            if (n->out[j] < 0)
                continue;
            vram__value *v = &g->values[n->out[j]];
            if (v->flags & (VRAM__VALUE_INPUT | VRAM__VALUE_INITIALIZER))
                return vram__fail(VRAM_EPARSE, "node '%s' (%s, node %d) writes '%s', which is a graph %s",
                                  n->name ? n->name : "", n->op, i, v->name,
                                  v->flags & VRAM__VALUE_INPUT ? "input" : "initializer");
            vram__value_set_data(v, NULL, 0);
            v->dtype = VRAM_DTYPE_UNDEFINED;
            v->shape.rank = -1;
        }
    }
    return 0;
}

static int check_inputs_known(const vram__sx *c)
{
    for (int j = 0; j < c->n->n_in; j++) {
        const vram__value *v = vram__sx_in(c, j);
        if (!v)
            continue;
        if (v->shape.rank < 0 || v->shape.rank > VRAM__MAX_RANK || vram__shape_elems(&v->shape) < 0)
            return vram__sx_fail(c, VRAM_EPARSE,
                                 "input '%s' has no known shape (%s): no earlier node produces it", v->name,
                                 vram__sx_dims(&v->shape).s);
        if (!vram_dtype_size(v->dtype))
            return vram__sx_fail(c, VRAM_ENOSYS, "input '%s' has element type %s, which the engine does not handle",
                                 v->name, vram_dtype_name(v->dtype));
    }
    return 0;
}

static int infer_node(vram__graph *g, int i, const unsigned char *used, unsigned char *folded)
{
    vram__node *n = &g->nodes[i];
    vram__sx c = {.g = g, .n = n, .node = i, .used = used};
    const op_rule *r = find_rule(n->op);
    if (!r)
        return vram__fail(VRAM_ENOSYS, "unsupported operator '%s' at node '%s' (node %d)",
                          n->op ? n->op : "", n->name ? n->name : "", i);
    if (r->max_in >= 0 && n->n_in > r->max_in)
        return vram__sx_fail(&c, VRAM_EPARSE, "has %d inputs, at most %d", n->n_in, r->max_in);
    for (int j = 0; j < r->min_in; j++)
        if (!vram__sx_in(&c, j))
            return vram__sx_fail(&c, VRAM_EPARSE, "input %d is required but missing", j);
    if (n->n_out < 1 || n->out[0] < 0)
        return vram__sx_fail(&c, VRAM_EPARSE, "has no first output");
    int rc = check_inputs_known(&c);
    if (rc)
        return rc;

    c.fold = r->folds;
    for (int j = 0; j < n->n_in; j++)
        if (n->in[j] >= 0 && !vram__sx_is_const(&g->values[n->in[j]]))
            c.fold = 0;
    rc = r->infer(&c);
    if (rc)
        return rc;

    int all_data = 1;
    for (int j = 0; j < n->n_out; j++) {
        const vram__value *v = vram__sx_out(&c, j);
        if (!v)
            continue;
        if (v->shape.rank < 0)
            return vram__sx_fail(&c, VRAM_EPARSE, "output %d '%s' got no shape", j, v->name);
        all_data &= v->data != NULL;
    }
    if (folded)
        folded[i] = (unsigned char)all_data;
    return 0;
}

static int check_outputs(vram__graph *g, const declared *decl)
{
    for (int k = 0; k < g->n_outputs; k++) {
        vram__value *v = &g->values[g->outputs[k]];
        if (v->shape.rank < 0)
            return vram__fail(VRAM_EPARSE, "graph output '%s' is produced by no node", v->name);
        const declared *d = &decl[k];
        if (d->dtype != VRAM_DTYPE_UNDEFINED && d->dtype != v->dtype)
            return vram__fail(VRAM_EINVAL, "graph output '%s' is declared %s but computed as %s", v->name,
                              vram_dtype_name(d->dtype), vram_dtype_name(v->dtype));
        int bad = d->shape.rank >= 0 && d->shape.rank != v->shape.rank;
        for (int a = 0; !bad && a < d->shape.rank; a++)
            bad = d->shape.dim[a] >= 0 && d->shape.dim[a] != v->shape.dim[a];
        if (bad)
            return vram__fail(VRAM_EINVAL, "graph output '%s' is declared with shape %s but computed as %s",
                              v->name, vram__sx_dims(&d->shape).s, vram__sx_dims(&v->shape).s);
    }
    /* Dimensions the file left open are named, so a later call with another
     * batch does not take the values filled in now for declared ones. */
    for (int k = 0; k < g->n_outputs; k++) {
        vram__value *v = &g->values[g->outputs[k]];
        if (v->producer < 0 && (v->flags & (VRAM__VALUE_INPUT | VRAM__VALUE_INITIALIZER)))
            continue;
        for (int a = 0; a < v->shape.rank && a < decl[k].shape.rank; a++)
            if (decl[k].shape.dim[a] < 0 && set_symbolic(v, a))
                return VRAM_EHOSTMEM;
        if (decl[k].shape.rank < 0)
            for (int a = 0; a < v->shape.rank; a++)
                if (set_symbolic(v, a))
                    return VRAM_EHOSTMEM;
    }
    return 0;
}

int vram__infer_shapes(vram__graph *g, int64_t batch, unsigned char *folded)
{
    if (!g)
        return vram__fail(VRAM_EINVAL, "vram__infer_shapes: graph is NULL");
    if (batch < 1)
        return vram__fail(VRAM_EINVAL, "the batch must be at least 1, not %lld", (long long)batch);
    if (folded && g->n_nodes > 0)
        memset(folded, 0, (size_t)g->n_nodes);
    declared *decl = vram__calloc(g->n_outputs > 0 ? (size_t)g->n_outputs : 1, sizeof *decl);
    unsigned char *used = vram__calloc(g->n_values > 0 ? (size_t)g->n_values : 1, 1);
    int rc = decl && used ? 0 : VRAM_EHOSTMEM;
    if (!rc)
        rc = reset_outputs(g, decl, used);
    if (!rc)
        rc = bind_inputs(g, batch);
    for (int i = 0; !rc && i < g->n_nodes; i++)
        rc = infer_node(g, i, used, folded);
    if (!rc)
        rc = check_outputs(g, decl);
    free(decl);
    free(used);
    return rc;
}
