/* src/engine/onnx_load.c - vram__onnx_load(): decode an ONNX ModelProto
 * (protobuf-c, code generated from onnx.proto) and build the engine's graph
 * (graph.h): initializers with their data, graph inputs and outputs with
 * their types and shapes, and the nodes in file order with every name
 * resolved to a value index. Files are untrusted: every count, size and
 * reference is checked, and memory is only allocated in proportion to the
 * bytes of the file. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "graph.h"
#include "onnx.pb-c.h"

/* raw_data holds little-endian values, copied into the graph as they are. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX loader copies little-endian raw_data as is: little-endian hosts only"
#endif

#define OPSET_MIN 11
#define OPSET_MAX 21
/* Deepest nesting of protobuf messages accepted. A model without subgraphs
 * nests 7 deep (Model, Graph, ValueInfo, Type, Tensor, Shape, Dimension). */
#define MAX_DEPTH 64

/* ---- wire-format pre-check ------------------------------------------- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p == end)
            return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* protobuf-c decodes nested messages by recursion without a depth limit, so
 * a hostile file (graph attributes inside graph attributes, ...) could
 * exhaust the stack. This walks the wire format along the schema and says
 * whether messages nest at most MAX_DEPTH deep (its own recursion is bounded
 * by that). Other malformations end the walk of that message as "fine":
 * protobuf-c checks every tag and length of a message before it descends
 * into any of its submessages, so it refuses such a message without going
 * deeper. Returns 1 if the nesting is acceptable. */
static int nesting_ok(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *d,
                      int depth)
{
    if (depth > MAX_DEPTH)
        return 0;
    while (p < end) {
        uint64_t key, n;
        if (read_varint(&p, end, &key))
            return 1;
        switch (key & 7) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (read_varint(&p, end, &n))
                return 1;
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT:
            if (end - p < 8)
                return 1;
            p += 8;
            break;
        case PROTOBUF_C_WIRE_TYPE_32BIT:
            if (end - p < 4)
                return 1;
            p += 4;
            break;
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            if (read_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return 1;
            const ProtobufCFieldDescriptor *f = NULL;
            if ((key >> 3) <= UINT_MAX)
                f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !nesting_ok(p, p + n, f->descriptor, depth + 1))
                return 0;
            p += n;
            break;
        }
        default: return 1; /* groups: protobuf-c refuses them */
        }
    }
    return 1;
}

/* ---- protobuf-c allocator ------------------------------------------------ */

/* malloc and free, named here so that the loader may take ownership of a
 * decoded raw_data buffer instead of copying it (the big weights), and so
 * that running out of memory is told apart from a malformed file. */
typedef struct pb_mem {
    int failed;
} pb_mem;

static void *pb_alloc(void *data, size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        ((pb_mem *)data)->failed = 1;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    free(p);
}

/* ---- the loader ------------------------------------------------------------ */

typedef struct loader {
    vram__graph *g;
    int *slot;  /* hash of value names: value index + 1, 0 for an empty slot */
    size_t cap; /* slots, a power of two, at least twice the values */
} loader;

static const char *str(const char *s)
{
    return s ? s : "";
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Index of the value named `name`, or -1 (what vram__graph_find() answers,
 * in constant time while loading). */
static int find(const loader *ld, const char *name)
{
    if (!ld->cap)
        return -1;
    size_t mask = ld->cap - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        int s = ld->slot[i];
        if (!s)
            return -1;
        if (strcmp(ld->g->values[s - 1].name, name) == 0)
            return s - 1;
    }
}

static void slot_put(loader *ld, int index)
{
    size_t mask = ld->cap - 1;
    size_t i = (size_t)hash_name(ld->g->values[index].name) & mask;
    while (ld->slot[i])
        i = (i + 1) & mask;
    ld->slot[i] = index + 1;
}

/* A new value named `name` (the caller has checked that the name is free).
 * Returns its index, or -1 with VRAM_EHOSTMEM set. */
static int value_new(loader *ld, const char *name)
{
    vram__graph *g = ld->g;
    if ((size_t)g->n_values + 1 > ld->cap / 2) {
        if (ld->cap > SIZE_MAX / 4) {
            vram__fail(VRAM_EHOSTMEM, "too many tensors (%d)", g->n_values);
            return -1;
        }
        size_t cap = ld->cap ? ld->cap * 2 : 64;
        int *slot = vram__calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        free(ld->slot);
        ld->slot = slot;
        ld->cap = cap;
        for (int i = 0; i < g->n_values; i++)
            slot_put(ld, i);
    }
    int idx = vram__graph_add_value(g, name);
    if (idx >= 0)
        slot_put(ld, idx);
    return idx;
}

/* "'conv1' (Conv)", or "#3 (Conv)" for a node without a name. */
static const char *node_label(char *buf, size_t cap, const Onnx__NodeProto *n, size_t i)
{
    if (n->name && *n->name)
        snprintf(buf, cap, "'%s' (%s)", n->name, str(n->op_type));
    else
        snprintf(buf, cap, "#%zu (%s)", i, str(n->op_type));
    return buf;
}

static char *bytes_dup(const uint8_t *data, size_t len)
{
    if (len == SIZE_MAX) {
        vram__fail(VRAM_EHOSTMEM, "string of %zu bytes", len);
        return NULL;
    }
    char *s = vram__calloc(len + 1, 1);
    if (s && len)
        memcpy(s, data, len);
    return s;
}

/* Fill v's dtype, shape, data and nbytes from tensor t. The data is always
 * allocated (one byte for a tensor without elements), so that a value with
 * data != NULL is a constant. The decoded raw_data buffer is taken over, not
 * copied. Every size is checked before it is used: dims must be at least 0,
 * their product in bytes must fit int64, and the data present must be
 * exactly that many bytes or elements, so allocations are bounded by the
 * file's size. */
static int tensor_load(Onnx__TensorProto *t, vram__value *v)
{
    if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        t->n_external_data)
        return vram__fail(VRAM_EPARSE, "external data is not supported: tensor '%s'", v->name);
    if (t->segment)
        return vram__fail(VRAM_EPARSE, "segmented tensors are not supported: tensor '%s'", v->name);
    int dtype = t->has_data_type ? t->data_type : 0;
    size_t esize = vram_dtype_size(dtype);
    if (dtype == VRAM_DTYPE_UNDEFINED)
        return vram__fail(VRAM_EPARSE, "tensor '%s' has no data type", v->name);
    if (!esize)
        return vram__fail(VRAM_EPARSE, "tensor '%s' has type %s, which the engine does not handle",
                          v->name, vram_dtype_name(dtype));
    if (t->n_dims > VRAM__MAX_RANK)
        return vram__fail(VRAM_EPARSE, "tensor '%s' has rank %zu, more than the %d supported",
                          v->name, t->n_dims, VRAM__MAX_RANK);
    /* `nz` is the product of the nonzero dims, kept below INT64_MAX / esize
     * so that no reshape of such a tensor can overflow a byte count. */
    int64_t elems = 1, nz = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        int64_t d = t->dims[i];
        if (d < 0)
            return vram__fail(VRAM_EPARSE,
                              "tensor '%s' has a negative dimension (%lld at axis %zu)", v->name,
                              (long long)d, i);
        if (d && nz > INT64_MAX / (int64_t)esize / d)
            return vram__fail(VRAM_EPARSE,
                              "tensor '%s': its dims overflow (axis %zu of %lld makes more than "
                              "%lld bytes)",
                              v->name, i, (long long)d, (long long)INT64_MAX);
        if (d)
            nz *= d;
        elems *= d;
    }
    if ((uint64_t)elems * esize > SIZE_MAX)
        return vram__fail(VRAM_EPARSE, "tensor '%s' is too large for this host", v->name);
    size_t nbytes = (size_t)elems * esize;

    v->dtype = dtype;
    v->shape.rank = (int)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++)
        v->shape.dim[i] = t->dims[i];

    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return vram__fail(VRAM_EPARSE,
                              "tensor '%s' has %zu bytes of raw_data, expected %zu (%lld elements "
                              "of %s)",
                              v->name, t->raw_data.len, nbytes, (long long)elems,
                              vram_dtype_name(dtype));
        if (nbytes) {
            v->data = t->raw_data.data;
            v->nbytes = nbytes;
            t->raw_data.data = NULL; /* ours now: pb_alloc is malloc */
            t->raw_data.len = 0;
            t->has_raw_data = 0;
            return 0;
        }
    }

    size_t count;
    const char *field;
    switch (dtype) {
    case VRAM_DTYPE_FLOAT:
        count = t->n_float_data;
        field = "float_data";
        break;
    case VRAM_DTYPE_INT64:
        count = t->n_int64_data;
        field = "int64_data";
        break;
    case VRAM_DTYPE_DOUBLE:
        count = t->n_double_data;
        field = "double_data";
        break;
    default:
        count = t->n_int32_data;
        field = "int32_data";
        break; /* narrower types */
    }
    if (t->has_raw_data)
        count = 0; /* empty raw_data for an empty tensor: nothing to read */
    if (count != (uint64_t)elems)
        return vram__fail(VRAM_EPARSE,
                          "tensor '%s' has %zu values in %s, expected %lld (shape of %zu dims)",
                          v->name, count, field, (long long)elems, t->n_dims);
    uint8_t *data = vram__calloc(nbytes ? nbytes : 1, 1);
    if (!data)
        return VRAM_EHOSTMEM;
    v->data = data;
    v->nbytes = nbytes;
    if (!nbytes)
        return 0; /* the typed arrays may be NULL */
    switch (dtype) {
    case VRAM_DTYPE_FLOAT: memcpy(data, t->float_data, nbytes); break;
    case VRAM_DTYPE_INT64: memcpy(data, t->int64_data, nbytes); break;
    case VRAM_DTYPE_DOUBLE: memcpy(data, t->double_data, nbytes); break;
    case VRAM_DTYPE_INT32: memcpy(data, t->int32_data, nbytes); break;
    case VRAM_DTYPE_FLOAT16: /* int32_data holds the IEEE half bits */
        for (size_t i = 0; i < count; i++) {
            uint16_t h = (uint16_t)t->int32_data[i];
            memcpy(data + 2 * i, &h, 2);
        }
        break;
    case VRAM_DTYPE_BOOL:
        for (size_t i = 0; i < count; i++)
            data[i] = t->int32_data[i] != 0;
        break;
    default: /* INT8, UINT8: the low byte, two's complement */
        for (size_t i = 0; i < count; i++)
            data[i] = (uint8_t)t->int32_data[i];
        break;
    }
    return 0;
}

/* Type and shape of value idx from a ValueInfo; sets only what the value does
 * not know yet (dtype UNDEFINED, rank -1). `what` is "graph input" or "graph
 * output": then the ValueInfo must describe something the engine handles,
 * and symbolic dims ("batch") are kept in dim_param. With what == NULL (the
 * value_info hints of intermediate tensors) anything unusable is ignored. */
static int value_info_apply(loader *ld, int idx, const Onnx__ValueInfoProto *vi, const char *what)
{
    const Onnx__TypeProto *type = vi->type;
    if (!type)
        return 0;
    if (type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !type->tensor_type) {
        if (what)
            return vram__fail(VRAM_EPARSE, "%s '%s' is not a tensor (only tensors are supported)",
                              what, str(vi->name));
        return 0;
    }
    const Onnx__TypeProto__Tensor *tt = type->tensor_type;
    vram__value *v = &ld->g->values[idx];
    int dtype = tt->has_elem_type ? tt->elem_type : 0;
    if (dtype && !vram_dtype_size(dtype)) {
        if (what)
            return vram__fail(VRAM_EPARSE, "%s '%s' has type %s, which the engine does not handle",
                              what, v->name, vram_dtype_name(dtype));
    } else if (v->dtype == VRAM_DTYPE_UNDEFINED) {
        v->dtype = dtype;
    }
    const Onnx__TensorShapeProto *sp = tt->shape;
    if (!sp || v->shape.rank >= 0)
        return 0;
    if (sp->n_dim > VRAM__MAX_RANK) {
        if (what)
            return vram__fail(VRAM_EPARSE, "%s '%s' has rank %zu, more than the %d supported", what,
                              v->name, sp->n_dim, VRAM__MAX_RANK);
        return 0;
    }
    vram__shape s = {.rank = (int)sp->n_dim};
    for (size_t i = 0; i < sp->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
        s.dim[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0) {
                if (what)
                    return vram__fail(VRAM_EPARSE,
                                      "%s '%s' has a negative dimension (%lld at axis %zu)", what,
                                      v->name, (long long)d->dim_value, i);
                return 0;
            }
            s.dim[i] = d->dim_value;
        }
    }
    if (what)
        for (size_t i = 0; i < sp->n_dim; i++) {
            const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                d->dim_param && *d->dim_param && !v->dim_param[i]) {
                v->dim_param[i] = vram__strdup(d->dim_param);
                if (!v->dim_param[i])
                    return VRAM_EHOSTMEM;
            }
        }
    v->shape = s;
    return 0;
}

static int load_opset(vram__graph *g, const Onnx__ModelProto *m)
{
    int found = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        const char *d = str(o->domain);
        if (strcmp(d, "") != 0 && strcmp(d, "ai.onnx") != 0)
            continue;
        if (found && o->version != g->opset)
            return vram__fail(VRAM_EPARSE,
                              "the model imports two opsets of the default domain (%lld, %lld)",
                              (long long)g->opset, (long long)o->version);
        g->opset = o->version;
        found = 1;
    }
    if (!found)
        return vram__fail(VRAM_EPARSE,
                          "the model imports no opset of the default domain (supported: %d-%d)",
                          OPSET_MIN, OPSET_MAX);
    if (g->opset < OPSET_MIN || g->opset > OPSET_MAX)
        return vram__fail(VRAM_EPARSE, "opset %lld is outside the supported %d-%d",
                          (long long)g->opset, OPSET_MIN, OPSET_MAX);
    return 0;
}

static int load_producer(vram__graph *g, const Onnx__ModelProto *m)
{
    const char *name = str(m->producer_name), *version = str(m->producer_version);
    size_t n = strlen(name), k = strlen(version);
    g->producer = vram__calloc(n + k + 2, 1);
    if (!g->producer)
        return VRAM_EHOSTMEM;
    memcpy(g->producer, name, n);
    if (n && k)
        g->producer[n++] = ' ';
    memcpy(g->producer + n, version, k);
    return 0;
}

static int load_initializers(loader *ld, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *t = gp->initializer[i];
        const char *name = str(t->name);
        if (!*name)
            return vram__fail(VRAM_EPARSE, "initializer #%zu has no name", i);
        if (find(ld, name) >= 0)
            return vram__fail(VRAM_EPARSE, "initializer '%s' is defined twice", name);
        int idx = value_new(ld, name);
        if (idx < 0)
            return VRAM_EHOSTMEM;
        ld->g->values[idx].flags = VRAM__VALUE_INITIALIZER;
        int rc = tensor_load(t, &ld->g->values[idx]);
        if (rc)
            return rc;
    }
    return 0;
}

/* graph.input lists the inputs the caller feeds and, in files older than
 * IR version 4, the initializers too: those are skipped. */
static int load_inputs(loader *ld, const Onnx__GraphProto *gp)
{
    vram__graph *g = ld->g;
    if (gp->n_input > INT_MAX)
        return vram__fail(VRAM_EPARSE, "the graph has %zu inputs", gp->n_input);
    g->inputs = vram__calloc(gp->n_input, sizeof *g->inputs);
    if (!g->inputs)
        return VRAM_EHOSTMEM;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = str(vi->name);
        if (!*name)
            return vram__fail(VRAM_EPARSE, "graph input #%zu has no name", i);
        int idx = find(ld, name);
        if (idx >= 0) {
            if (g->values[idx].flags & VRAM__VALUE_INITIALIZER)
                continue;
            return vram__fail(VRAM_EPARSE, "graph input '%s' is defined twice", name);
        }
        idx = value_new(ld, name);
        if (idx < 0)
            return VRAM_EHOSTMEM;
        g->values[idx].flags = VRAM__VALUE_INPUT;
        g->inputs[g->n_inputs++] = idx;
        int rc = value_info_apply(ld, idx, vi, "graph input");
        if (rc)
            return rc;
    }
    return 0;
}

static int load_attr(vram__attr *a, const Onnx__AttributeProto *p, const Onnx__NodeProto *np,
                     const char *label)
{
    const char *name = str(p->name);
    if (!*name)
        return vram__fail(VRAM_EPARSE, "node %s has an attribute without a name", label);
    if (!(a->name = vram__strdup(name)))
        return VRAM_EHOSTMEM;
    int type = p->has_type ? (int)p->type : 0;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->f = p->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->i = p->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        if (!(a->s = bytes_dup(p->s.data, p->s.len)))
            return VRAM_EHOSTMEM;
        a->s_len = p->s.len;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!p->t)
            return vram__fail(VRAM_EPARSE, "attribute '%s' of node %s holds no tensor", name,
                              label);
        break; /* the value is made once every node is read (load_attr_tensors) */
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (p->n_floats) {
            if (!(a->floats = vram__calloc(p->n_floats, sizeof *a->floats)))
                return VRAM_EHOSTMEM;
            memcpy(a->floats, p->floats, p->n_floats * sizeof *a->floats);
        }
        a->n = p->n_floats;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (p->n_ints) {
            if (!(a->ints = vram__calloc(p->n_ints, sizeof *a->ints)))
                return VRAM_EHOSTMEM;
            memcpy(a->ints, p->ints, p->n_ints * sizeof *a->ints);
        }
        a->n = p->n_ints;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        if (p->n_strings) {
            if (!(a->strings = vram__calloc(p->n_strings, sizeof *a->strings)))
                return VRAM_EHOSTMEM;
            a->n = p->n_strings; /* entries still NULL are fine to free */
            for (size_t i = 0; i < p->n_strings; i++)
                if (!(a->strings[i] = bytes_dup(p->strings[i].data, p->strings[i].len)))
                    return VRAM_EHOSTMEM;
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return vram__fail(VRAM_EPARSE, "subgraphs are not supported (node %s, %s)",
                          np->name && *np->name ? np->name : "without a name", str(np->op_type));
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
        return vram__fail(VRAM_EPARSE, "attribute '%s' of node %s has no type", name, label);
    default: {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
            &onnx__attribute_proto__attribute_type__descriptor, type);
        return vram__fail(VRAM_EPARSE,
                          "attribute '%s' of node %s is of type %s%s%d, which is not supported",
                          name, label, ev ? ev->name : "", ev ? " " : "", type);
    }
    }
    a->type = type;
    return 0;
}

/* Nodes in file order, which ONNX requires to be topological: each input
 * must already be defined, each output must be a new name. */
static int load_nodes(loader *ld, const Onnx__GraphProto *gp)
{
    vram__graph *g = ld->g;
    if (gp->n_node > INT_MAX)
        return vram__fail(VRAM_EPARSE, "the graph has %zu nodes", gp->n_node);
    g->nodes = vram__calloc(gp->n_node, sizeof *g->nodes);
    if (!g->nodes)
        return VRAM_EHOSTMEM;
    g->cap_nodes = (int)(gp->n_node ? gp->n_node : 1);
    char label[160];
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        node_label(label, sizeof label, np, i);
        const char *op = str(np->op_type);
        if (!*op)
            return vram__fail(VRAM_EPARSE, "node %s has no op_type", label);
        const char *domain = str(np->domain);
        if (strcmp(domain, "") != 0 && strcmp(domain, "ai.onnx") != 0)
            return vram__fail(VRAM_EPARSE, "node %s is in domain '%s', which is not supported",
                              label, domain);
        if (np->n_input > INT_MAX || np->n_output > INT_MAX || np->n_attribute > INT_MAX)
            return vram__fail(VRAM_EPARSE, "node %s has too many inputs, outputs or attributes",
                              label);

        vram__node *n = &g->nodes[g->n_nodes++]; /* zeroed: freeing it part-built is safe */
        if (!(n->name = vram__strdup(str(np->name))) || !(n->op = vram__strdup(op)) ||
            !(n->in = vram__calloc(np->n_input, sizeof *n->in)) ||
            !(n->out = vram__calloc(np->n_output, sizeof *n->out)) ||
            !(n->attrs = vram__calloc(np->n_attribute, sizeof *n->attrs)))
            return VRAM_EHOSTMEM;

        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = str(np->input[k]);
            int idx = -1;
            if (*name && (idx = find(ld, name)) < 0)
                return vram__fail(
                    VRAM_EPARSE,
                    "node %s reads '%s' which no earlier node, input or initializer defines", label,
                    name);
            n->in[n->n_in++] = idx;
        }
        /* Attributes keep the file's order and count: load_attr_tensors()
         * relies on it. */
        for (size_t k = 0; k < np->n_attribute; k++) {
            vram__attr *a = &n->attrs[n->n_attrs++];
            a->tensor = -1;
            int rc = load_attr(a, np->attribute[k], np, label);
            if (rc)
                return rc;
        }
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = str(np->output[k]);
            int idx = -1;
            if (*name) {
                if (find(ld, name) >= 0)
                    return vram__fail(VRAM_EPARSE, "node %s writes '%s', which is already defined",
                                      label, name);
                if ((idx = value_new(ld, name)) < 0)
                    return VRAM_EHOSTMEM;
                g->values[idx].producer = (int)i;
            }
            n->out[n->n_out++] = idx;
        }
    }
    return 0;
}

static int load_outputs(loader *ld, const Onnx__GraphProto *gp)
{
    vram__graph *g = ld->g;
    if (gp->n_output > INT_MAX)
        return vram__fail(VRAM_EPARSE, "the graph has %zu outputs", gp->n_output);
    g->outputs = vram__calloc(gp->n_output, sizeof *g->outputs);
    if (!g->outputs)
        return VRAM_EHOSTMEM;
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const char *name = str(vi->name);
        int idx = *name ? find(ld, name) : -1;
        if (idx < 0)
            return vram__fail(VRAM_EPARSE, "graph output '%s' names no tensor of the graph", name);
        if (g->values[idx].flags & VRAM__VALUE_OUTPUT)
            return vram__fail(VRAM_EPARSE, "graph output '%s' is listed twice", name);
        g->values[idx].flags |= VRAM__VALUE_OUTPUT;
        g->outputs[g->n_outputs++] = idx;
        int rc = value_info_apply(ld, idx, vi, "graph output");
        if (rc)
            return rc;
    }
    return 0;
}

/* value_info: optional type and shape hints for intermediate tensors. */
static int load_value_info(loader *ld, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_value_info; i++) {
        int idx = find(ld, str(gp->value_info[i]->name));
        if (idx >= 0) {
            int rc = value_info_apply(ld, idx, gp->value_info[i], NULL);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* TENSOR attributes (Constant's "value", ConstantOfShape's "value", ...)
 * become constant values named "<node>/<attribute>" ("#<index>/<attribute>"
 * for a node without a name, "#2", "#3", ... appended while the name is
 * taken). They are made after every node so that no name of the file can
 * collide with them. */
static int load_attr_tensors(loader *ld, const Onnx__GraphProto *gp)
{
    vram__graph *g = ld->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (int k = 0; k < g->nodes[i].n_attrs; k++) {
            vram__attr *a = &g->nodes[i].attrs[k];
            if (a->type != VRAM__ATTR_TENSOR)
                continue;
            char idbuf[24];
            const char *node = g->nodes[i].name;
            if (!*node) {
                snprintf(idbuf, sizeof idbuf, "#%d", i);
                node = idbuf;
            }
            size_t cap = strlen(node) + strlen(a->name) + 32;
            char *name = vram__calloc(cap, 1);
            if (!name)
                return VRAM_EHOSTMEM;
            snprintf(name, cap, "%s/%s", node, a->name);
            for (unsigned long long dup = 2; find(ld, name) >= 0; dup++)
                snprintf(name, cap, "%s/%s#%llu", node, a->name, dup);
            int idx = value_new(ld, name);
            free(name);
            if (idx < 0)
                return VRAM_EHOSTMEM;
            g->values[idx].flags = VRAM__VALUE_INITIALIZER;
            a->tensor = idx;
            int rc = tensor_load(np->attribute[k]->t, &g->values[idx]);
            if (rc)
                return vram__fail_prefix(rc, "attribute '%s' of node %s: ", a->name,
                                         node_label((char[160]){0}, 160, np, (size_t)i));
        }
    }
    return 0;
}

static int load_model(loader *ld, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    if (!gp)
        return vram__fail(VRAM_EPARSE, "the model has no graph");
    int rc;
    if ((rc = load_opset(ld->g, m)) || (rc = load_producer(ld->g, m)) ||
        (rc = load_initializers(ld, gp)) || (rc = load_inputs(ld, gp)) ||
        (rc = load_nodes(ld, gp)) || (rc = load_outputs(ld, gp)) ||
        (rc = load_value_info(ld, gp)) || (rc = load_attr_tensors(ld, gp)))
        return rc;
    return 0;
}

int vram__onnx_load(const void *bytes, size_t len, vram__graph *g)
{
    static const uint8_t empty[1];
    memset(g, 0, sizeof *g);
    const uint8_t *p = bytes ? bytes : empty;
    if (!bytes && len)
        return vram__fail(VRAM_EINVAL, "no bytes to load (NULL with length %zu)", len);
    if (!nesting_ok(p, p + len, &onnx__model_proto__descriptor, 0))
        return vram__fail(VRAM_EPARSE,
                          "not a valid ONNX model: protobuf messages nest more than %d deep",
                          MAX_DEPTH);
    pb_mem mem = {0};
    ProtobufCAllocator alloc = {pb_alloc, pb_free, &mem};
    Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, len, p);
    if (!m) {
        if (mem.failed)
            return vram__fail(VRAM_EHOSTMEM, "out of host memory decoding a %zu-byte ONNX model",
                              len);
        return vram__fail(VRAM_EPARSE,
                          "not a valid ONNX model: %zu bytes that do not decode as a ModelProto "
                          "(truncated or malformed protobuf)",
                          len);
    }
    loader ld = {.g = g};
    int rc = load_model(&ld, m);
    free(ld.slot);
    onnx__model_proto__free_unpacked(m, &alloc);
    if (rc)
        vram__graph_free(g);
    return rc;
}
