/* src/engine/engine_internal.h - what an engine and a context hold, and the
 * steps the executor runs: one per node left after folding, with every
 * parameter the kernels need computed at load time, so that a run does
 * nothing but call kernels on planned memory. */
#ifndef VRAM_ENGINE_INTERNAL_H
#define VRAM_ENGINE_INTERNAL_H

#include <stdatomic.h>

#include "cpu/kernels_elem.h"
#include "cpu/kernels_nn.h"
#include "graph.h"
#include "vramkit/engine.h"

typedef enum vram__op {
    VRAM__OP_CONV,
    VRAM__OP_CONV_TRANSPOSE,
    VRAM__OP_BATCHNORM,
    VRAM__OP_UNARY,
    VRAM__OP_PRELU,
    VRAM__OP_BINARY,
    VRAM__OP_MAXPOOL,
    VRAM__OP_AVGPOOL,
    VRAM__OP_GLOBAL_AVGPOOL,
    VRAM__OP_GEMM,
    VRAM__OP_MATMUL,
    VRAM__OP_COPY, /* Flatten, Reshape, Squeeze, Unsqueeze, Identity */
    VRAM__OP_TRANSPOSE,
    VRAM__OP_CONCAT,
    VRAM__OP_SPLIT,
    VRAM__OP_SLICE,
    VRAM__OP_PAD,
    VRAM__OP_RESIZE,
    VRAM__OP_SOFTMAX,
    VRAM__OP_GATHER,
    VRAM__OP_CAST,
} vram__op;

typedef struct vram__step {
    int node;     /* in the graph */
    int op;       /* vram__op */
    int x, y;     /* first input and first output value (the common case) */
    union {
        vram__conv2d conv;
        vram__pool2d pool;
        struct {
            int trans_a, trans_b;
            float alpha, beta;
            int64_t m, n, k, c_rows, c_cols;
        } gemm;
        struct {
            int op;
            float p[2];
        } unary;
        struct {
            int op;
            int i64;
        } binary;
        struct {
            int64_t n, c, spatial;
            float eps;
        } bn;
        struct {
            int64_t n, c, spatial;
        } gap;
        int perm[VRAM__MAX_RANK];
        int axis;
        struct {
            int64_t starts[VRAM__MAX_RANK], steps[VRAM__MAX_RANK];
        } slice;
        struct {
            int mode;
            int64_t pads[2 * VRAM__MAX_RANK];
            double value; /* constant mode, in the element type */
        } pad;
        struct {
            int mode, ctm, nearest;
            float scales[VRAM__MAX_RANK];
        } resize;
        struct {
            vram__shape shape; /* the shape softmax sees (older opsets: 2-D) */
            int axis;
        } softmax;
        struct {
            int from, to;
        } cast;
    } p;
    int64_t *split_sizes; /* Split: one per output (owned) */
} vram__step;

/* Where a value lives while a context runs. */
enum {
    VRAM__LOC_NONE = 0, /* not used by any step */
    VRAM__LOC_WEIGHTS,  /* a constant, in the engine's weights block */
    VRAM__LOC_ARENA,    /* an intermediate, at its planned offset */
    VRAM__LOC_INPUT,    /* a graph input's binding */
    VRAM__LOC_OUTPUT,   /* a graph output's binding */
};

/* The engine at one batch: its steps, and every value's shape and bytes.
 * An engine whose inputs have a symbolic batch holds one per batch from 1
 * to its largest; their steps run on the largest batch's memory plan (every
 * tensor is at most as large at a smaller batch). */
typedef struct vram__variant {
    int64_t batch;
    vram__step *steps;
    int n_steps;
    int owns_steps;      /* the largest batch's are the engine's own */
    vram__shape *shape;  /* per value */
    uint64_t *bytes;     /* per value (0 where the value is not used) */
} vram__variant;

typedef struct vram__placement {
    int loc;
    uint64_t offset; /* in the weights block, the arena or the io block */
    uint64_t bytes;
} vram__placement;

/* An executor: how an engine's memory is filled and read, and how a
 * context runs. "cpu" (exec_cpu.c) works on host memory; "cuda"
 * (cuda/exec_cuda.c) on device memory with cuDNN, cuBLAS and vramkit's
 * kernels. Copies are synchronous: when they return, the bytes are there. */
typedef struct vram__exec_ops {
    const char *name;
    const char *own_backend;    /* of the pool an engine makes when given none */
    uint64_t workspace_default; /* the workspace limit unless one is given */
    /* Whether the engine's pool may be on this backend. */
    int (*backend_ok)(const vram_backend *backend);
    /* After lowering and planning, before the weights go up: set up what the
     * steps need (descriptors, algorithms) and set e->workspace_bytes. */
    int (*engine_init)(vram_engine *e);
    /* Optional, once the weights are in e->weights: lay out copies of them
     * the kernels read faster (pool kind weights; e->packed_weights_bytes). */
    int (*weights_ready)(vram_engine *e);
    void (*engine_fini)(vram_engine *e);
    /* Host bytes into engine memory (c NULL) or a context's (in order with
     * its runs), src NULL for zeros; and a context's bytes back to the host. */
    int (*copy_in)(vram_engine *e, vram_exec *c, void *dst, const void *src, size_t n);
    int (*copy_out)(vram_exec *c, void *dst, const void *src, size_t n);
    /* A context's own state (streams, library handles), after its memory
     * is taken and before its bindings are filled. */
    int (*context_init)(vram_exec *c);
    void (*context_fini)(vram_exec *c);
    /* Run every step at the context's batch, and wait for the result. */
    int (*run)(vram_exec *c);
} vram__exec_ops;

extern const vram__exec_ops vram__exec_cpu_ops;
/* cuda/exec_cuda.c, or src/nogpu (NULL, with the reason as the last error,
 * in a build without CUDA). */
const vram__exec_ops *vram__exec_cuda_ops(void);

struct vram_engine {
    const vram__exec_ops *ex;
    void *ex_state;     /* the executor's, per engine */
    int tf32, graphs;   /* options the cuda executor reads */
    int threads;        /* options the cpu executor reads */
    int cpu_reference;
    vram__graph g;
    int64_t batch;
    int batch_symbolic; /* the model's batch is symbolic (not its file's number) */
    uint64_t alignment;
    vram_pool *pool;
    vram_backend *own_backend; /* with an own pool */
    int owns_pool;
    vram_owner owner;

    vram__step *steps;
    int n_steps;
    unsigned folded_nodes, fused_bn;
    vram__placement *place; /* one per value */

    void *weights;          /* the weights block (pool kind weights) */
    uint64_t weights_bytes;
    uint64_t packed_weights_bytes; /* the executor's copies of weights in its layout */
    uint64_t arena_bytes, arena_lower_bound;
    uint64_t io_bytes;
    uint64_t workspace_bytes, workspace_limit;

    vram__variant *var;     /* var[b - 1]: the engine at batch b */
    int n_var;              /* 1 unless the batch is symbolic */

    vram_op_count *ops;     /* executed operators by type */
    size_t n_ops;
    atomic_uint contexts;   /* alive (created and destroyed from any thread) */
};

struct vram_exec {
    vram_engine *e;
    void *ex_state; /* the executor's, per context */
    vram_stream stream; /* what it runs on (cuda) */
    const vram__variant *var; /* the batch it runs at */
    void *arena, *io, *workspace;
    void **ptr; /* per value: where it is during a run (NULL: unused) */
};

/* engine.c: a value's bytes at shape s (VRAM_EINVAL naming it if the size
 * is unknown), and its public description at shape s. */
int vram__value_bytes(const vram__value *v, const vram__shape *s, uint64_t *out);
void vram__tensor_desc(const vram__value *v, const vram__shape *s, vram_tensor_desc *out);

/* Does step st read input k of its node when it runs? Inputs that only set
 * parameters (a Reshape's shape, a Slice's starts, a Resize's scales, a
 * Clip's bounds...) are read at load and need no memory at run time. */
static inline int vram__step_reads(const vram__step *st, int k)
{
    switch (st->op) {
    case VRAM__OP_CONV:
    case VRAM__OP_CONV_TRANSPOSE:
    case VRAM__OP_GEMM:
        return k <= 2;
    case VRAM__OP_BATCHNORM:
        return k <= 4;
    case VRAM__OP_PRELU:
    case VRAM__OP_BINARY:
    case VRAM__OP_MATMUL:
    case VRAM__OP_GATHER:
        return k <= 1;
    case VRAM__OP_CONCAT:
        return 1;
    default:
        return k == 0;
    }
}

/* lower.c: turn the graph (shapes inferred, constants folded) into steps,
 * fusing BatchNormalization into a preceding Conv. Fills e->steps,
 * e->fused_bn. VRAM_ENOSYS names an operator variant the executor lacks.
 * `like` (or NULL): the graph lowered at the largest batch, whose folded
 * weights are borrowed instead of folded again. */
int vram__lower(vram_engine *e, const unsigned char *folded, const vram__graph *like);
/* variants.c: the engine at every batch below its largest, when its inputs'
 * batch is symbolic (the largest batch's variant made from e itself). Each
 * is inferred and lowered on a clone of `model`, the graph as decoded,
 * which shares its constants: the model is decoded once. */
int vram__variants_build(vram_engine *e, const vram__graph *model);
void vram__variants_free(vram_engine *e);
/* 0 when the model's batch is symbolic (a graph input's first dimension the
 * file leaves open), else the batch the file fixes (the first input's first
 * dimension; 1 for a model whose inputs have none). */
int64_t vram__model_batch(const vram__graph *model);

#endif
