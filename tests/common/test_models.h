/* tests/common/test_models.h - where the engine's tests find the models
 * tools/onnx/gen_models.py generates (CTest's onnx/references fixture):
 * VRAM_ONNX_REF/models, else VRAM_SOURCE_DIR/build/onnxref/models, else
 * ./build/onnxref/models. models_init() once in main, then model(name);
 * fill_inputs() gives a context's float inputs a fixed pattern. cmocka
 * programs on the public API: include after cmocka.h and vramkit.h. */
#ifndef VRAM_TESTS_COMMON_TEST_MODELS_H
#define VRAM_TESTS_COMMON_TEST_MODELS_H

#include <stdio.h>
#include <stdlib.h>

static char models[4096];

static inline void models_init(void)
{
    const char *ref = getenv("VRAM_ONNX_REF");
    const char *src = getenv("VRAM_SOURCE_DIR");
    if (ref)
        snprintf(models, sizeof models, "%s/models", ref);
    else
        snprintf(models, sizeof models, "%s/build/onnxref/models", src ? src : ".");
}

/* The path of generated model `name` (a static buffer: use it at once). */
static inline const char *model(const char *name)
{
    static char path[4352];
    snprintf(path, sizeof path, "%s/%s.onnx", models, name);
    return path;
}

/* Every input of context c: v * ((k % 7) - 3) at element k. */
static inline void fill_inputs(vram_exec *c, const vram_engine *e, float v)
{
    for (size_t i = 0; i < vram_engine_input_count(e); i++) {
        vram_tensor_desc d;
        assert_int_equal(vram_exec_input_desc(c, i, &d), 0);
        size_t n = 1;
        for (int k = 0; k < d.rank; k++)
            n *= (size_t)d.dims[k];
        assert_int_equal(d.dtype, VRAM_DTYPE_FLOAT);
        float *x = malloc(n * sizeof *x);
        assert_non_null(x);
        for (size_t k = 0; k < n; k++)
            x[k] = v * (float)((int)(k % 7) - 3);
        assert_int_equal(vram_exec_set_input(c, i, x, n * sizeof *x), 0);
        free(x);
    }
}

#endif
