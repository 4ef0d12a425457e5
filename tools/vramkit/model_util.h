/* tools/vramkit/model_util.h - what the `vramkit model` commands share:
 * loading an engine with the CLI's options, the seeded random-input rule of
 * tests/onnx/README.md, and a clock for latencies. */
#ifndef VRAMKIT_MODEL_UTIL_H
#define VRAMKIT_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "vramkit/engine.h"

/* The library's default workspace limit (the executor's). */
#define MODEL_DEFAULT_WORKSPACE VRAM_ENGINE_WORKSPACE_DEFAULT

/* The engine options the commands share. */
typedef struct model_opts {
    const char *backend; /* executor: "cpu" or "cuda" */
    uint64_t batch;
    int batch_given;
    uint64_t workspace;  /* MODEL_DEFAULT_WORKSPACE: the executor's */
    int tf32, graph;
    uint64_t threads;    /* cpu: threads per context */
    int threads_given;
    const char *kernels; /* cpu: "fast" or "reference" */
} model_opts;

/* The defaults of vram_engine_opts_init (VRAM_ENGINE_* and the library's). */
void model_opts_init(model_opts *o);

/* The option table entries of the shared options, for a command's table. */
#define MODEL_CLI_OPTS(mo)                                                                        \
    {"--backend", NULL, CLI_CHOICE, &(mo)->backend, NULL,                                        \
     "the executor: cpu or cuda (default VRAM_ENGINE_EXECUTOR)", 0, 0,                          \
     "cpu|cuda"},                                                                                \
        {"--batch", NULL, CLI_UINT, &(mo)->batch, "N",                                           \
         "the largest batch, for inputs whose batch is symbolic (default 1)", 1, 1 << 20, NULL, \
         &(mo)->batch_given},                                                                    \
        {"--workspace", NULL, CLI_SIZE, &(mo)->workspace, "SIZE",                                \
         "scratch per execution context for the convolutions (default: cpu 4M, cuda 64M)", 0, \
         (double)(1ull << 50)},                                                                  \
        {"--tf32", NULL, CLI_FLAG, &(mo)->tf32, NULL,                                            \
         "cuda: let cuDNN and cuBLAS use TF32 tensor cores"},                                    \
        {"--threads", NULL, CLI_UINT, &(mo)->threads, "N",                                       \
         "cpu: threads each context runs its convolutions on (default VRAM_ENGINE_THREADS, 1)",  \
         1, VRAM_ENGINE_MAX_THREADS, NULL, &(mo)->threads_given},                                \
        {"--kernels", NULL, CLI_CHOICE, &(mo)->kernels, NULL,                                    \
         "cpu: the fast kernels or the plain-C reference (default VRAM_ENGINE_CPU_KERNELS, fast)", \
         0, 0, "fast|reference"}

/* Options that only make sense together: a usage error printed and 2
 * returned, else 0. */
int model_check_opts(const char *cmd, const model_opts *o);

/* Warn on stderr when --batch asked for a batch a fixed-batch model does
 * not have. */
void model_note_batch(const char *cmd, const char *model, const model_opts *o,
                      const vram_engine *e);

/* Load `path` with the options. Errors as vram_engine_load. */
int model_load(const char *path, const model_opts *o, vram_engine **e);

/* Output i of a context after a run, copied into host memory the caller
 * frees (whatever the executor: device memory is read back). */
int model_read_output(vram_exec *c, size_t i, void **data, size_t *bytes);

/* Elements of a tensor. */
int64_t model_elems(const vram_tensor_desc *d);

/* Fill n elements of input number `input` (0-based, graph order) of type
 * dtype from seed S: xorshift64* as tests/onnx/README.md specifies, shared
 * with tools/onnx/ort_run.js, so that both sides draw the same inputs. */
void model_fill_random(uint64_t seed, size_t input, int dtype, int64_t n, void *out);

/* Fill every input of a context from the rule. 0 or a library error. */
int model_fill_inputs(vram_exec *ctx, const vram_engine *e, uint64_t seed);

/* The engine's memory as the "memory" member every `model` command's JSON
 * has: weights_bytes, activations_bytes, activations_lower_bound_bytes,
 * activations_over_lower_bound, io_bytes, workspace_bytes, exec_bytes. */
void model_memory_json(cJSON *parent, const vram_engine_memory *m);

double model_now_ms(void);
int model_cmp_double(const void *a, const void *b);

#endif
