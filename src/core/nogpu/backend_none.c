/* src/core/nogpu/backend_none.c - the GPU backends in a build without the CUDA
 * toolkit: asking for one says why there is none. */
#include "backend/backend_internal.h"

int vram__backend_gpu_new(vram_backend_type type, const vram_backend_opts *opts,
                          const vram_backend_ops **ops, void **self, vram_device **device,
                          uint64_t *capacity, uint64_t *granularity)
{
    (void)opts;
    (void)ops;
    (void)self;
    (void)device;
    (void)capacity;
    (void)granularity;
    return vram__fail(VRAM_ENOSYS, "backend %s needs a GPU: vramkit was built without the CUDA "
                                   "toolkit", vram_backend_type_name(type));
}
