/* tests/fuzz/fuzz_engine.c - libFuzzer target for loading a whole engine
 * from hostile bytes: the ONNX loader, shape inference and constant folding,
 * lowering to steps and planning the arena (vram_engine_load_bytes). It must
 * fail cleanly or give an engine whose context runs - within a bound on its
 * memory, so that a valid but huge model does not exhaust the fuzzer - and
 * whose arena the plan keeps at or above its lower bound. Seeds: small
 * models from tools/onnx/gen_models.py in corpus/engine. */
#include <stdint.h>
#include <stdlib.h>

#include "vramkit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vram_engine *e = NULL;
    if (vram_engine_load_bytes(data, size, NULL, &e)) {
        if (e)
            abort(); /* an error must leave nothing */
        return 0;
    }
    vram_engine_memory m;
    if (vram_engine_memory_get(e, &m) || m.activations_bytes < m.activations_lower_bound_bytes)
        abort();
    if (m.exec_bytes + m.weights_bytes <= (64u << 20)) {
        vram_exec *c;
        if (vram_exec_create(e, &c) == 0) {
            vram_exec_run(c); /* may refuse (e.g. a Gather index out of range), never crash */
            vram_exec_destroy(c);
        }
    }
    if (vram_engine_destroy(e))
        abort();
    return 0;
}
