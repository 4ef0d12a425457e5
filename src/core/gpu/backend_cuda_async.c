/* src/core/gpu/backend_cuda_async.c - the "cuda_async" backend: segments from
 * cuMemAllocFromPoolAsync on a driver memory pool vramkit creates for itself
 * (not the device's default pool, which other code shares), with the release
 * threshold VRAM_ASYNC_RELEASE. Segments are freed with cuMemFreeAsync on the
 * stream they were last used on. */
#include "backend_gpu.h"
#include "vramkit/config.h"

static int async_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUdeviceptr p;
    char b[32];
    VRAM__CU_TRY(vram__cu.cuMemAllocFromPoolAsync(&p, (size_t)size, g->mempool, (CUstream)stream),
                 "cuMemAllocFromPoolAsync of %s", vram__fmt_bytes(b, sizeof b, size));
    *addr = (uint64_t)p;
    return 0;
}

static int async_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    (void)size;
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    VRAM__CU_TRY(vram__cu.cuMemFreeAsync((CUdeviceptr)addr, (CUstream)stream),
                 "cuMemFreeAsync of 0x%llx", (unsigned long long)addr);
    return 0;
}

static void async_destroy(void *self)
{
    vram__gpu_backend *g = self;
    if (g->mempool && vram__device_enter(g->dev) == 0) {
        vram__cu.cuCtxSynchronize(); /* frees queued on streams complete first */
        vram__cu.cuMemPoolDestroy(g->mempool);
    }
    vram__gpu_backend_free(g);
}

static const vram_backend_ops async_ops = {
    .name = "cuda_async",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    .segment_alloc = async_segment_alloc,
    .segment_free = async_segment_free,
    VRAM__GPU_SHARED_OPS,
    .destroy = async_destroy,
};

int vram__gpu_async_init(vram__gpu_backend *g, const vram_backend_ops **ops)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                         .id = vram__device_index(g->dev)}};
    VRAM__CU_TRY(vram__cu.cuMemPoolCreate(&g->mempool, &props), "cuMemPoolCreate");
    cuuint64_t threshold = vram_config_get()->async_release;
    CUresult r = vram__cu.cuMemPoolSetAttribute(g->mempool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                                &threshold);
    if (r != CUDA_SUCCESS) {
        vram__cu.cuMemPoolDestroy(g->mempool);
        g->mempool = NULL;
        return vram_cuda_fail(r, "setting the release threshold of the driver pool");
    }
    *ops = &async_ops;
    return 0;
}
