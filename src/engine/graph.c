/* src/engine/graph.c - the engine's in-memory graph (graph.h): element type
 * sizes and names, shape arithmetic, value lookup and creation, attribute
 * reads, and releasing a graph. The ONNX loader that fills it is
 * onnx_load.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "graph.h"

size_t vram_dtype_size(int dtype)
{
    switch (dtype) {
    case VRAM_DTYPE_FLOAT: return 4;
    case VRAM_DTYPE_UINT8: return 1;
    case VRAM_DTYPE_INT8: return 1;
    case VRAM_DTYPE_INT32: return 4;
    case VRAM_DTYPE_INT64: return 8;
    case VRAM_DTYPE_BOOL: return 1;
    case VRAM_DTYPE_FLOAT16: return 2;
    case VRAM_DTYPE_DOUBLE: return 8;
    default: return 0;
    }
}

const char *vram_dtype_name(int dtype)
{
    /* Every ONNX TensorProto.DataType up to 16 has its name, including those
     * the engine does not handle, so messages can say "string" or "int16". */
    static const char *const names[] = {
        "undefined", "float",  "uint8",     "int8",       "uint16",   "int16",
        "int32",     "int64",  "string",    "bool",       "float16",  "double",
        "uint32",    "uint64", "complex64", "complex128", "bfloat16",
    };
    static _Thread_local char other[24];
    if (dtype >= 0 && (size_t)dtype < VRAM__ARRAY_LEN(names))
        return names[dtype];
    snprintf(other, sizeof other, "type %d", dtype);
    return other;
}

int64_t vram__shape_elems(const vram__shape *s)
{
    if (s->rank < 0 || s->rank > VRAM__MAX_RANK)
        return -1;
    /* An unknown dimension first, then any 0 (whatever the others are, in
     * any order), then the product, which must not overflow. */
    int zero = 0;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] < 0)
            return -1;
        zero |= s->dim[i] == 0;
    }
    if (zero)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (n > INT64_MAX / s->dim[i])
            return -1;
        n *= s->dim[i];
    }
    return n;
}

int vram__graph_find(const vram__graph *g, const char *name)
{
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i].name, name) == 0)
            return i;
    return -1;
}

int vram__graph_add_value(vram__graph *g, const char *name)
{
    if (g->n_values == INT_MAX) {
        vram__fail(VRAM_EHOSTMEM, "graph holds %d values, the most it can", g->n_values);
        return -1;
    }
    size_t cap = (size_t)g->cap_values;
    vram__value *values = vram__grow(g->values, &cap, (size_t)g->n_values, sizeof *values, 16);
    if (!values)
        return -1;
    g->values = values;
    g->cap_values = cap > INT_MAX ? INT_MAX : (int)cap;
    char *copy = vram__strdup(name);
    if (!copy)
        return -1;
    vram__value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = copy;
    v->shape.rank = -1;
    v->producer = -1;
    return g->n_values++;
}

const vram__attr *vram__node_attr(const vram__node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

/* The typed reads below treat an attribute of another type like a missing
 * one: they return the default. */
int64_t vram__attr_int(const vram__node *n, const char *name, int64_t def)
{
    const vram__attr *a = vram__node_attr(n, name);
    return a && a->type == VRAM__ATTR_INT ? a->i : def;
}

float vram__attr_float(const vram__node *n, const char *name, float def)
{
    const vram__attr *a = vram__node_attr(n, name);
    return a && a->type == VRAM__ATTR_FLOAT ? a->f : def;
}

const char *vram__attr_string(const vram__node *n, const char *name, const char *def)
{
    const vram__attr *a = vram__node_attr(n, name);
    return a && a->type == VRAM__ATTR_STRING ? a->s : def;
}

size_t vram__attr_ints(const vram__node *n, const char *name, const int64_t **out)
{
    const vram__attr *a = vram__node_attr(n, name);
    if (!a || a->type != VRAM__ATTR_INTS) {
        *out = NULL;
        return 0;
    }
    *out = a->ints;
    return a->n;
}

static void attr_free(vram__attr *a)
{
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    if (a->strings)
        for (size_t i = 0; i < a->n; i++)
            free(a->strings[i]);
    free(a->strings);
}

void vram__graph_free(vram__graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_values; i++) {
        vram__value *v = &g->values[i];
        free(v->name);
        for (int d = 0; d < VRAM__MAX_RANK; d++)
            free(v->dim_param[d]);
        if (!(v->flags & VRAM__VALUE_BORROWED))
            free(v->data);
    }
    free(g->values);
    for (int i = 0; i < g->n_nodes; i++) {
        vram__node *n = &g->nodes[i];
        free(n->name);
        free(n->op);
        free(n->in);
        free(n->out);
        if (n->attrs)
            for (int a = 0; a < n->n_attrs; a++)
                attr_free(&n->attrs[a]);
        free(n->attrs);
    }
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->producer);
    memset(g, 0, sizeof *g);
}

void vram__value_set_data(vram__value *v, void *data, size_t nbytes)
{
    if (!(v->flags & VRAM__VALUE_BORROWED))
        free(v->data);
    v->flags &= ~VRAM__VALUE_BORROWED;
    v->data = data;
    v->nbytes = data ? nbytes : 0;
}

static void *dup_array(const void *src, size_t n, size_t elem, int *ok)
{
    if (!src || !n)
        return NULL;
    void *p = vram__realloc_array(NULL, n, elem);
    if (p)
        memcpy(p, src, n * elem);
    else
        *ok = 0;
    return p;
}

static char *dup_str(const char *s, int *ok)
{
    if (!s)
        return NULL;
    char *p = vram__strdup(s);
    if (!p)
        *ok = 0;
    return p;
}

static void attr_copy(const vram__attr *a, vram__attr *b, int *ok)
{
    *b = *a;
    b->name = dup_str(a->name, ok);
    b->s = NULL;
    if (a->s && (b->s = malloc(a->s_len + 1)))
        memcpy(b->s, a->s, a->s_len + 1);
    else if (a->s)
        *ok = 0;
    b->floats = a->type == VRAM__ATTR_FLOATS ? dup_array(a->floats, a->n, sizeof *a->floats, ok)
                                             : NULL;
    b->ints = a->type == VRAM__ATTR_INTS ? dup_array(a->ints, a->n, sizeof *a->ints, ok) : NULL;
    b->strings = NULL;
    if (a->strings && (b->strings = vram__calloc(a->n ? a->n : 1, sizeof *b->strings)))
        for (size_t i = 0; i < a->n; i++)
            b->strings[i] = dup_str(a->strings[i], ok);
    else if (a->strings)
        *ok = 0;
}

int vram__graph_clone(const vram__graph *src, vram__graph *dst)
{
    memset(dst, 0, sizeof *dst);
    int ok = 1;
    dst->values = vram__calloc((size_t)src->n_values + 1, sizeof *dst->values);
    dst->nodes = vram__calloc((size_t)src->n_nodes + 1, sizeof *dst->nodes);
    if (!dst->values || !dst->nodes) {
        free(dst->values);
        free(dst->nodes);
        memset(dst, 0, sizeof *dst);
        return VRAM_EHOSTMEM;
    }
    dst->cap_values = src->n_values + 1;
    dst->cap_nodes = src->n_nodes + 1;
    for (int i = 0; i < src->n_values; i++, dst->n_values++) {
        const vram__value *a = &src->values[i];
        vram__value *b = &dst->values[i];
        *b = *a;
        b->name = dup_str(a->name, &ok);
        for (int d = 0; d < VRAM__MAX_RANK; d++)
            b->dim_param[d] = dup_str(a->dim_param[d], &ok);
        if (b->data)
            b->flags |= VRAM__VALUE_BORROWED;
    }
    for (int i = 0; i < src->n_nodes; i++, dst->n_nodes++) {
        const vram__node *a = &src->nodes[i];
        vram__node *b = &dst->nodes[i];
        *b = *a;
        b->name = dup_str(a->name, &ok);
        b->op = dup_str(a->op, &ok);
        b->in = dup_array(a->in, (size_t)a->n_in, sizeof *a->in, &ok);
        b->out = dup_array(a->out, (size_t)a->n_out, sizeof *a->out, &ok);
        b->attrs = a->n_attrs ? vram__calloc((size_t)a->n_attrs, sizeof *b->attrs) : NULL;
        if (a->n_attrs && !b->attrs) {
            ok = 0;
            b->n_attrs = 0;
        }
        for (int k = 0; b->attrs && k < a->n_attrs; k++)
            attr_copy(&a->attrs[k], &b->attrs[k], &ok);
    }
    dst->inputs = dup_array(src->inputs, (size_t)src->n_inputs, sizeof *src->inputs, &ok);
    dst->n_inputs = src->n_inputs;
    dst->outputs = dup_array(src->outputs, (size_t)src->n_outputs, sizeof *src->outputs, &ok);
    dst->n_outputs = src->n_outputs;
    dst->opset = src->opset;
    dst->producer = dup_str(src->producer, &ok);
    if (!ok) {
        vram__graph_free(dst);
        return vram__fail(VRAM_EHOSTMEM, "out of host memory copying a model's graph");
    }
    return 0;
}
