/* tests/fuzz/fuzz_npy.c - libFuzzer target for the .npy parser that `vramkit
 * model run` reads inputs with: any bytes go to vram_npy_parse(); it must
 * not crash or overread, must leave the result zeroed on error, and on
 * success hold exactly elements x item size bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "vramkit/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vram_npy a;
    if (vram_npy_parse(data, size, "fuzz", &a)) {
        if (a.data || a.nbytes)
            abort();
        return 0;
    }
    /* The element count: 0 when a dimension is 0, whatever the others are
     * (the corpus has a shape whose product overflows before its 0);
     * else the product, -1 if it overflows. */
    int64_t n = 1;
    for (int i = 0; i < a.rank; i++)
        if (!a.dims[i])
            n = 0;
    for (int i = 0; i < a.rank && n > 0; i++)
        n = n > INT64_MAX / a.dims[i] ? -1 : n * a.dims[i];
    if (!a.data || n < 0 || a.nbytes != (size_t)n * vram_dtype_size(a.dtype))
        abort();
    vram_npy_free(&a);
    return 0;
}
