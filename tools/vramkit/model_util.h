/* tools/vramkit/model_util.h - what the `vramkit model` commands share:
 * loading an engine with the CLI's options, the seeded random-input rule of
 * tests/onnx/README.md, and a clock for latencies. */
#ifndef VRAMKIT_MODEL_UTIL_H
#define VRAMKIT_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit/engine.h"

/* The library's default workspace limit. */
#define MODEL_DEFAULT_WORKSPACE UINT64_MAX

/* Load `path` at `batch` with a workspace limit (MODEL_DEFAULT_WORKSPACE:
 * the library's). Errors as vram_engine_load. */
int model_load(const char *path, int64_t batch, uint64_t workspace_limit, vram_engine **e);

/* Elements of a tensor. */
int64_t model_elems(const vram_tensor_desc *d);

/* Fill n elements of input number `input` (0-based, graph order) of type
 * dtype from seed S: xorshift64* as tests/onnx/README.md specifies, shared
 * with tools/onnx/ort_run.js, so that both sides draw the same inputs. */
void model_fill_random(uint64_t seed, size_t input, int dtype, int64_t n, void *out);

/* Fill every input of a context from the rule. 0 or a library error. */
int model_fill_inputs(vram_context *ctx, const vram_engine *e, uint64_t seed);

double model_now_ms(void);
int model_cmp_double(const void *a, const void *b);

#endif
