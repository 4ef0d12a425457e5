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
    int64_t n = 1;
    for (int i = 0; i < a.rank && n >= 0; i++)
        n = a.dims[i] && n > INT64_MAX / a.dims[i] ? -1 : n * a.dims[i];
    if (!a.data || n < 0 || a.nbytes != (size_t)n * vram_dtype_size(a.dtype))
        abort();
    vram_npy_free(&a);
    return 0;
}
