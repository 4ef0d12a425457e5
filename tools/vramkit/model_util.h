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
    int64_t batch;
    uint64_t workspace;  /* MODEL_DEFAULT_WORKSPACE: the executor's */
    int tf32, graph;
} model_opts;

void model_opts_init(model_opts *o);

/* opt's value v as an integer >= lo into *out: 0, or 2 with the usage
 * message printed. */
int model_parse_i64(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t *out);

/* If argv[*i] is a shared option (--backend cpu|cuda, --batch N, --workspace
 * SIZE, --tf32, --graph), take it and its value into o and return 1 (with
 * *status 2 and the usage message printed if the value is bad); 0 if it is
 * not one of them. */
int model_parse_opt(const char *cmd, int argc, char **argv, int *i, model_opts *o, int *status);

/* Options that only make sense together: VRAM_EINVAL-like usage error
 * printed and 2 returned, else 0. */
int model_check_opts(const char *cmd, const model_opts *o);

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
