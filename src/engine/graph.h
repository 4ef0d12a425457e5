/* src/engine/graph.h - the engine's in-memory model: the tensors ("values")
 * and operator nodes of one ONNX graph, after loading and before planning.
 * The loader (onnx_load.c) builds it from a ModelProto; shape inference and
 * constant folding fill in shapes and constant contents; the planner and the
 * executors read it. Everything here is host memory owned by the graph and
 * released by vram__graph_free(). Indices, not pointers, link nodes and
 * values, so the arrays may grow while the graph is built. */
#ifndef VRAM_ENGINE_GRAPH_H
#define VRAM_ENGINE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit/engine.h"

/* Element types are the public vram_dtype; a tensor has at most
 * VRAM_TENSOR_MAX_RANK dimensions. */
#define VRAM__MAX_RANK VRAM_TENSOR_MAX_RANK

/* A shape; a dimension of -1 is not known yet. Rank 0 is a scalar. */
typedef struct vram__shape {
    int rank;
    int64_t dim[VRAM__MAX_RANK];
} vram__shape;

/* Elements in a shape (1 for a scalar); -1 if a dimension is unknown or the
 * product overflows int64. */
int64_t vram__shape_elems(const vram__shape *s);

enum {
    VRAM__VALUE_INPUT = 1u << 0,       /* a graph input the caller feeds */
    VRAM__VALUE_OUTPUT = 1u << 1,      /* a graph output */
    VRAM__VALUE_INITIALIZER = 1u << 2, /* weights or constants stored in the file */
    VRAM__VALUE_BORROWED = 1u << 3,    /* data belongs to another graph (a clone's
                                          constants): never freed through this one */
};

/* A tensor of the graph: a graph input, an initializer, or a node's output. */
typedef struct vram__value {
    char *name;
    int dtype;                            /* vram_dtype; UNDEFINED until inferred */
    vram__shape shape;                    /* rank -1: not known yet */
    char *dim_param[VRAM__MAX_RANK];      /* symbolic dimensions (graph inputs and
                                             outputs), e.g. "batch"; NULL otherwise */
    void *data;                           /* constant contents, row-major, host; NULL
                                             for values computed at run time */
    size_t nbytes;                        /* bytes of data */
    int producer;                         /* index of the node making it; -1 for graph
                                             inputs and initializers */
    unsigned flags;                       /* VRAM__VALUE_* */
} vram__value;

/* Attribute types, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum vram__attr_type {
    VRAM__ATTR_UNDEFINED = 0,
    VRAM__ATTR_FLOAT = 1,
    VRAM__ATTR_INT = 2,
    VRAM__ATTR_STRING = 3,
    VRAM__ATTR_TENSOR = 4,
    VRAM__ATTR_FLOATS = 6,
    VRAM__ATTR_INTS = 7,
    VRAM__ATTR_STRINGS = 8,
} vram__attr_type;

typedef struct vram__attr {
    char *name;
    int type;        /* vram__attr_type */
    float f;         /* FLOAT */
    int64_t i;       /* INT */
    char *s;         /* STRING (NUL-terminated copy; s_len bytes before the NUL) */
    size_t s_len;
    float *floats;   /* FLOATS: n of them */
    int64_t *ints;   /* INTS: n of them */
    char **strings;  /* STRINGS: n of them */
    size_t n;
    int tensor;      /* TENSOR: index of a constant value holding it, else -1 */
} vram__attr;

typedef struct vram__node {
    char *name;      /* as in the file; "" if it had none */
    char *op;        /* op_type, e.g. "Conv" */
    int *in;         /* value indices; -1 for an optional input left empty */
    int n_in;
    int *out;        /* value indices; -1 for an optional output left empty */
    int n_out;
    vram__attr *attrs;
    int n_attrs;
} vram__node;

typedef struct vram__graph {
    vram__value *values;
    int n_values, cap_values;
    vram__node *nodes;   /* in execution order (the file's order is topological) */
    int n_nodes, cap_nodes;
    int *inputs;         /* graph inputs the caller feeds (initializers excluded) */
    int n_inputs;
    int *outputs;
    int n_outputs;
    int64_t opset;       /* version of the default ("" or "ai.onnx") operator set */
    char *producer;      /* producer_name and version, for `model info` */
} vram__graph;

/* Index of the value named `name`, or -1. */
int vram__graph_find(const vram__graph *g, const char *name);

/* Append a value (name copied; everything else zero, producer -1, rank -1).
 * Returns its index, or -1 on VRAM_EHOSTMEM (the error is set). */
int vram__graph_add_value(vram__graph *g, const char *name);

/* The attribute `name` of node n, or NULL. */
const vram__attr *vram__node_attr(const vram__node *n, const char *name);
/* Typed reads with a default for a missing attribute. */
int64_t vram__attr_int(const vram__node *n, const char *name, int64_t def);
float vram__attr_float(const vram__node *n, const char *name, float def);
const char *vram__attr_string(const vram__node *n, const char *name, const char *def);
/* INTS: the count, and *out pointing into the attribute (NULL, 0 if missing). */
size_t vram__attr_ints(const vram__node *n, const char *name, const int64_t **out);

/* Release everything the graph owns and zero it. */
void vram__graph_free(vram__graph *g);

/* A copy of `src` into `dst` that shares its constants: every value's data
 * is borrowed (VRAM__VALUE_BORROWED) while names, shapes, nodes and their
 * attributes are the copy's own, so inference and lowering may change the
 * copy freely and `src` must outlive it. 0 or VRAM_EHOSTMEM (dst then holds
 * nothing). One decoded model serves every batch this way. */
int vram__graph_clone(const vram__graph *src, vram__graph *dst);

/* Set a value's data to `data` (owned from now on; NULL clears it), freeing
 * what it held unless that was borrowed. */
void vram__value_set_data(vram__value *v, void *data, size_t nbytes);

/* Decode an ONNX ModelProto from `len` bytes into `g` (which it zeroes
 * first). Returns 0, or VRAM_EPARSE with vram_last_error() naming the
 * problem (truncated or malformed protobuf, a reference to an undefined
 * tensor, an initializer whose data does not match its shape, an opset
 * outside 11-21, ...); on error g holds nothing. VRAM_EHOSTMEM when memory
 * runs out. Never reads outside [bytes, bytes + len). */
int vram__onnx_load(const void *bytes, size_t len, vram__graph *g);

#endif
