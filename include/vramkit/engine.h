/* vramkit/engine.h - ONNX models whose memory is planned at load time.
 *
 * An engine is a loaded model: its graph, its weights (uploaded once, pool
 * kind `weights`) and a plan of every intermediate tensor's offset in one
 * activation arena, shared read-only by every stream. An execution context
 * (vram_exec, not to be confused with a CUDA context) is what one execution
 * needs: the arena (kind `activations`), workspace, and input and output
 * bindings sized for the largest batch (kind `io`). Once it exists, running
 * it allocates nothing. Workers keep one each; streams share them.
 *
 * Executors: "cpu", the plain-C reference (memory from a pool on the `host`
 * backend), and "cuda" (memory from a pool on a GPU backend: cuda,
 * cuda_async or vmm): convolutions through cuDNN, matrix products through
 * cuBLAS (both opened at run time), everything else on vramkit's own
 * kernels, each execution context on its own stream of the device the pool
 * uses. Errors follow the library's model: 0 or a negative VRAM_E* code,
 * with the sentence in vram_last_error(); an object handed back through an
 * out-pointer is the caller's to destroy, every string and descriptor the
 * engine returns is the engine's and lives as long as it. Part of
 * libvramkit-engine.
 *
 * Ownership and threads: destroy every execution context, then the engine,
 * then a pool given in the options (vram_engine_destroy refuses with
 * VRAM_EBUSY while a context lives; vram_pool_destroy while the engine's
 * weights do). The options and the model's bytes are not kept: the file or
 * buffer may go once the load returns. A loaded engine is read-only, so
 * its queries and the calls of different execution contexts may run on
 * different threads at once; one execution context must be used by one
 * thread at a time. Execution contexts may be created and destroyed from
 * any thread at once. */
#ifndef VRAMKIT_ENGINE_H
#define VRAMKIT_ENGINE_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_engine vram_engine;
typedef struct vram_exec vram_exec;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum vram_dtype {
    VRAM_DTYPE_UNDEFINED = 0,
    VRAM_DTYPE_FLOAT = 1,
    VRAM_DTYPE_UINT8 = 2,
    VRAM_DTYPE_INT8 = 3,
    VRAM_DTYPE_INT32 = 6,
    VRAM_DTYPE_INT64 = 7,
    VRAM_DTYPE_BOOL = 9,
    VRAM_DTYPE_FLOAT16 = 10,
    VRAM_DTYPE_DOUBLE = 11,
} vram_dtype;

/* The most dimensions a tensor has. */
#define VRAM_TENSOR_MAX_RANK 8

/* vram_engine_opts.workspace_limit: the executor's default (cpu 4 MiB,
 * cuda 64 MiB). */
#define VRAM_ENGINE_WORKSPACE_DEFAULT UINT64_MAX

typedef struct vram_engine_opts {
    uint32_t size; /* sizeof(vram_engine_opts), which vram_engine_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    const char *executor; /* "cpu" (the default) or "cuda" */
    int64_t batch;        /* the largest batch the engine serves, for inputs whose
                             first dimension is symbolic or unknown (execution
                             contexts run at it, or at any smaller one:
                             vram_exec_set_batch); memory is planned for it; 0: 1.
                             A model whose batch the file fixes keeps its own
                             (vram_engine_info.batch says which) */
    vram_pool *pool;      /* where weights, arenas and bindings come from; NULL:
                             the engine makes its own (cpu: host backend; cuda:
                             vmm backend on device VRAM_DEVICE), destroyed with
                             it. A given pool is borrowed and must outlive the
                             engine. */
    uint64_t alignment;   /* of every tensor in the arena; 0: 256 */
    vram_owner owner;     /* whose budget the engine's and its contexts' memory
                             counts against (VRAM_OWNER_DEFAULT: none) */
    uint64_t workspace_limit; /* scratch the convolutions may use per context.
                             cpu: im2col tiles as long as it allows (below one
                             column they run as direct loops, slower); cuda:
                             each convolution runs cuDNN's fastest algorithm
                             (by its heuristics) that fits, and cuBLAS gets
                             what is left of it, up to 4 MiB. 0: none;
                             VRAM_ENGINE_WORKSPACE_DEFAULT: the executor's */
    int tf32;             /* cuda: let cuDNN and cuBLAS use TF32 tensor cores
                             (10-bit mantissa products); 0: exact FP32 */
    int graphs;           /* cuda: capture a context's run into a CUDA graph the
                             first time it runs at a batch, and replay the graph
                             afterwards (destroyed with the context) */
    int threads;          /* cpu: threads each context runs its convolutions on,
                             the caller's included (the context starts the others
                             and keeps them until it is destroyed; each has a
                             workspace of its own). 0 or 1: the caller's alone,
                             right for a service whose workers each run their
                             own context. At most VRAM_ENGINE_MAX_THREADS */
    int cpu_reference;    /* cpu: run the plain-C reference kernels, every step
                             as planned (no fast kernels, no epilogues folded
                             into convolutions): what the fast ones are tested
                             against */
} vram_engine_opts;

/* The most threads vram_engine_opts.threads may ask for. */
#define VRAM_ENGINE_MAX_THREADS 256

/* Defaults: executor VRAM_ENGINE_EXECUTOR ("cpu"), batch 1, own pool,
 * alignment 256, workspace limit VRAM_ENGINE_WORKSPACE (the executor's),
 * TF32 VRAM_ENGINE_TF32 and CUDA graphs VRAM_ENGINE_GRAPHS (both off),
 * threads VRAM_ENGINE_THREADS (1), the reference kernels when
 * VRAM_ENGINE_CPU_KERNELS is "reference" (default "fast").
 * Returns 0 or VRAM_EINVAL when one of those variables is malformed (its
 * default is kept) or opts is NULL. executor is a static string. */
VRAM_API int vram_engine_opts_init(vram_engine_opts *opts);

/* Load an ONNX model from a file or from memory. VRAM_EPARSE for a
 * malformed, hostile or empty file, VRAM_ENOSYS for an unsupported operator
 * (named, with its node) or the cuda executor where it is not available,
 * VRAM_EIO when the file cannot be read, VRAM_EINVAL for NULL arguments, bad
 * options (an unknown executor, a pool on a backend the executor cannot
 * use, an owner without a pool) or inconsistent shapes; the pool's errors
 * uploading the weights (VRAM_ENOMEM, VRAM_EBUDGET, ...), VRAM_EBACKEND from
 * the driver, cuDNN or cuBLAS, VRAM_EHOSTMEM. *out is NULL then, and
 * nothing is kept (an own pool is destroyed; a given one has every block
 * back). */
VRAM_API int vram_engine_load(const char *path, const vram_engine_opts *opts, vram_engine **out);
VRAM_API int vram_engine_load_bytes(const void *bytes, size_t len, const vram_engine_opts *opts,
                           vram_engine **out);
/* Free the engine, its weights and its own pool. VRAM_EBUSY (nothing
 * changes) while an execution context of it lives. NULL is accepted. */
VRAM_API int vram_engine_destroy(vram_engine *engine);

/* A tensor's name, element type (vram_dtype) and shape at the engine's
 * batch. */
typedef struct vram_tensor_desc {
    const char *name; /* owned by the engine, valid while it lives */
    int dtype;
    int rank;
    int64_t dims[VRAM_TENSOR_MAX_RANK];
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_tensor_desc;

/* 0 for a NULL engine. */
VRAM_API size_t vram_engine_input_count(const vram_engine *engine);
VRAM_API size_t vram_engine_output_count(const vram_engine *engine);
/* *out is the caller's. VRAM_EINVAL when i is out of range or an argument is
 * NULL (*out not written then). */
VRAM_API int vram_engine_input(const vram_engine *engine, size_t i, vram_tensor_desc *out);
VRAM_API int vram_engine_output(const vram_engine *engine, size_t i, vram_tensor_desc *out);
/* ONNX's name of a dtype ("float", "int64", ...: static strings; "type 13"
 * for another, in a buffer per thread, valid until its next such call). */
VRAM_API const char *vram_dtype_name(int dtype);
/* Bytes per element; 0 for a type the engine does not handle. */
VRAM_API size_t vram_dtype_size(int dtype);

/* The engine's memory, in four categories, and what one more execution
 * context costs (its arena, workspace and bindings). This and
 * vram_engine_info_get fill the caller's struct; VRAM_EINVAL for a NULL
 * argument. */
typedef struct vram_engine_memory {
    uint64_t weights_bytes;         /* initializers and folded constants, once, with
                                       packed_weights_bytes */
    uint64_t activations_bytes;     /* one execution context's arena, as planned */
    uint64_t activations_lower_bound_bytes; /* the most bytes live at one step */
    uint64_t io_bytes;              /* one execution context's input and output bindings */
    uint64_t workspace_bytes;       /* one execution context's scratch for the kernels */
    uint64_t exec_bytes;            /* activations + io + workspace: one more context */
    uint64_t packed_weights_bytes;  /* cpu: of weights_bytes, the copies of convolution
                                       weights in the GEMM's panels, packed at load */
    uint64_t reserved[3]; /* room for later fields (zero) */
} vram_engine_memory;
VRAM_API int vram_engine_memory_get(const vram_engine *engine, vram_engine_memory *out);

/* Operators of the model as executed (after folding), counted by type. */
typedef struct vram_op_count {
    const char *op; /* owned by the engine */
    unsigned count;
} vram_op_count;
/* Fills up to `cap` entries (sorted by name), returns how many types there
 * are in *n. The op strings are the engine's. VRAM_EINVAL for a NULL engine
 * or n, or a NULL out with cap > 0. */
VRAM_API int vram_engine_op_counts(const vram_engine *engine, vram_op_count *out, size_t cap, size_t *n);
/* Nodes of the file, nodes folded into constants at load, BatchNormalizations
 * folded into their convolution. */
typedef struct vram_engine_info {
    int64_t opset;
    const char *producer; /* owned by the engine ("" if the file names none) */
    unsigned nodes, folded_nodes, fused_batchnorms, steps;
    int64_t batch;      /* the largest batch */
    int batch_symbolic; /* the model's batch is symbolic: an engine may be
                           loaded for any batch, and its execution contexts
                           run at batches 1..batch */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_engine_info;
VRAM_API int vram_engine_info_get(const vram_engine *engine, vram_engine_info *out);

/* An execution context: allocates its arena, workspace and bindings from
 * the engine's pool (VRAM_ENOMEM / VRAM_EBUDGET from the pool; cuda: also
 * the errors of taking a stream from the device and setting up cuDNN and
 * cuBLAS; nothing is kept then, *out is NULL). The caller destroys it
 * (before the engine); destroy waits for the context's stream, gives its
 * memory and stream back, always returns 0, and accepts NULL. See above
 * for threads. */
VRAM_API int vram_exec_create(vram_engine *engine, vram_exec **out);
VRAM_API int vram_exec_destroy(vram_exec *exec);

/* Copy `bytes` bytes of input `i` into its binding: the element type must be
 * the input's and the byte count its size at the context's batch (the
 * message gives both; VRAM_EINVAL, nothing copied). cpu: copied before this
 * returns. cuda: queued on the context's stream; from pageable memory the
 * driver has taken the bytes when this returns, but from page-locked memory
 * `data` must stay unchanged until the next vram_exec_run returns. */
VRAM_API int vram_exec_set_input(vram_exec *exec, size_t i, const void *data, size_t bytes);
/* Input i's binding, to write in place instead of copying in: a pointer
 * into the execution context's memory (device memory for the cuda
 * executor: write it with work queued on vram_exec_stream before the run,
 * such as vram_letterbox_frames_cuda), owned by the context and valid
 * until destroy, and its byte count at the context's batch. What is there
 * is what the next run reads. VRAM_EINVAL for NULL arguments or i out of
 * range. */
VRAM_API int vram_exec_input_binding(vram_exec *exec, size_t i, void **data, size_t *bytes);
/* Run the next runs at `batch` (1 .. the engine's batch, when the model's
 * batch is symbolic): inputs and outputs then have that batch's sizes.
 * VRAM_EINVAL outside that range, or for another batch of a model whose
 * batch is fixed (the batch is unchanged then). A new execution context
 * runs at the engine's batch. */
VRAM_API int vram_exec_set_batch(vram_exec *exec, int64_t batch);
VRAM_API int64_t vram_exec_batch(const vram_exec *exec);
/* Input or output i's name, type and shape at the execution context's batch.
 * VRAM_EINVAL when i is out of range or an argument is NULL. */
VRAM_API int vram_exec_input_desc(const vram_exec *exec, size_t i, vram_tensor_desc *out);
VRAM_API int vram_exec_output_desc(const vram_exec *exec, size_t i, vram_tensor_desc *out);
/* Run the model and wait for it. Allocates nothing. cuda: a value in the
 * data that makes a step invalid (a Gather index out of range, an integer
 * division by zero) is VRAM_EINVAL naming the step, found after the run;
 * VRAM_EBACKEND for a failed driver, cuDNN or cuBLAS call. After an error
 * the outputs hold nothing to trust. */
VRAM_API int vram_exec_run(vram_exec *exec);
/* Output i after a run: a pointer into the execution context's binding (device memory
 * for the cuda executor), owned by the context: its bytes hold until the
 * next run, the pointer until destroy; and its byte count at the context's
 * batch. VRAM_EINVAL for NULL arguments or i out of range. */
VRAM_API int vram_exec_output(vram_exec *exec, size_t i, const void **data, size_t *bytes);
/* Copy output i after a run into host memory: `bytes` must be its size at
 * the execution context's batch (the message gives it; VRAM_EINVAL). cuda:
 * waits for the copy on the context's stream; VRAM_EBACKEND if it fails. */
VRAM_API int vram_exec_read_output(vram_exec *exec, size_t i, void *dst, size_t bytes);
/* The stream a cuda execution context runs on (NULL for the cpu executor or
 * a NULL context): the device's, lent for the context's life; do not
 * release or destroy it. */
VRAM_API vram_stream vram_exec_stream(const vram_exec *exec);

#ifdef __cplusplus
}
#endif
#endif
