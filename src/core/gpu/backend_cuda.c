/* src/core/gpu/backend_cuda.c - the "cuda" backend: segments from cuMemAlloc and
 * cuMemFree, what most programs do today (cuMemFree synchronizes the device,
 * so the pool frees segments only on trim or when memory is short). */
#include "backend_gpu.h"

static int cuda_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    (void)stream;
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUdeviceptr p;
    char b[32];
    VRAM__CU_TRY(vram__cu.cuMemAlloc(&p, (size_t)size), "cuMemAlloc of %s",
                 vram__fmt_bytes(b, sizeof b, size));
    *addr = (uint64_t)p;
    return 0;
}

static int cuda_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    (void)stream;
    (void)size;
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    VRAM__CU_TRY(vram__cu.cuMemFree((CUdeviceptr)addr), "cuMemFree of 0x%llx",
                 (unsigned long long)addr);
    return 0;
}

static void cuda_destroy(void *self) { vram__gpu_backend_free(self); }

static const vram_backend_ops cuda_ops = {
    .name = "cuda",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    .segment_alloc = cuda_segment_alloc,
    .segment_free = cuda_segment_free,
    VRAM__GPU_SHARED_OPS,
    .destroy = cuda_destroy,
};

int vram__gpu_cuda_init(vram__gpu_backend *g, const vram_backend_ops **ops)
{
    (void)g;
    *ops = &cuda_ops;
    return 0;
}
