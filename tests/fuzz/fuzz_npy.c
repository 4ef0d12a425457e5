/* tests/fuzz/fuzz_npy.c - libFuzzer target for the .npy parser that `vramkit
 * model run` reads inputs with: any bytes go to vram__npy_parse(); it must
 * not crash or overread, must leave the result zeroed on error, and on
 * success hold exactly elements x item size bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/graph.h"
#include "engine/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vram__npy a;
    if (vram__npy_parse(data, size, "fuzz", &a)) {
        if (a.data || a.nbytes)
            abort();
        return 0;
    }
    int64_t n = vram__shape_elems(&a.shape);
    if (!a.data || n < 0 || a.nbytes != (size_t)n * vram__dtype_size(a.dtype))
        abort();
    vram__npy_free(&a);
    return 0;
}
