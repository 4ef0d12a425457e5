/* src/core/gpu/backend_vmm.c - the "vmm" backend: virtual ranges from
 * cuMemAddressReserve, backed chunk by chunk with cuMemCreate + cuMemMap +
 * cuMemSetAccess (one physical allocation per map call, remembered by its
 * address) and given back with cuMemUnmap + cuMemRelease; segments (for the
 * pool's huge blocks) are a range of their own, mapped whole. An unmap must
 * cover whole mappings, as the driver demands. A failed step of a map undoes
 * the steps before it, so a cuMemCreate refused under memory pressure leaves
 * nothing behind. */
#include <stdio.h>

#include "backend_gpu.h"

static int vmm_reserve(void *self, uint64_t size, uint64_t *addr)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUdeviceptr p;
    char b[32];
    VRAM__CU_TRY(vram__cu.cuMemAddressReserve(&p, (size_t)size, (size_t)g->granularity, 0, 0),
                 "cuMemAddressReserve of %s", vram__fmt_bytes(b, sizeof b, size));
    *addr = (uint64_t)p;
    return 0;
}

static int vmm_release(void *self, uint64_t addr, uint64_t size)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    VRAM__CU_TRY(vram__cu.cuMemAddressFree((CUdeviceptr)addr, (size_t)size),
                 "cuMemAddressFree of 0x%llx", (unsigned long long)addr);
    return 0;
}

static int vmm_map(void *self, uint64_t addr, uint64_t size)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    char b[32];
    vram__fmt_bytes(b, sizeof b, size);
    CUmemGenericAllocationHandle h;
    VRAM__CU_TRY(vram__cu.cuMemCreate(&h, (size_t)size, &g->prop, 0), "cuMemCreate of %s", b);
    CUresult r = vram__cu.cuMemMap((CUdeviceptr)addr, (size_t)size, 0, h, 0);
    if (r != CUDA_SUCCESS) {
        vram__cu.cuMemRelease(h);
        return vram_cuda_fail(r, "cuMemMap of %s at 0x%llx", b, (unsigned long long)addr);
    }
    r = vram__cu.cuMemSetAccess((CUdeviceptr)addr, (size_t)size, &g->access, 1);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&g->maps_lock);
        if (vram__u64map_put(&g->handles, addr, (uint64_t)h) == 0) {
            if (vram__u64map_put(&g->sizes, addr, size) == 0) {
                pthread_mutex_unlock(&g->maps_lock);
                return 0;
            }
            vram__u64map_del(&g->handles, addr, NULL);
        }
        pthread_mutex_unlock(&g->maps_lock);
        rc = VRAM_EHOSTMEM;
    } else {
        rc = vram_cuda_fail(r, "cuMemSetAccess of %s at 0x%llx", b, (unsigned long long)addr);
    }
    vram__cu.cuMemUnmap((CUdeviceptr)addr, (size_t)size);
    vram__cu.cuMemRelease(h);
    return rc;
}

/* Unmap and release the mapping at `addr` (maps_lock held). */
static int unmap_one(vram__gpu_backend *g, uint64_t addr, uint64_t size, uint64_t h)
{
    VRAM__CU_TRY(vram__cu.cuMemUnmap((CUdeviceptr)addr, (size_t)size), "cuMemUnmap at 0x%llx",
                 (unsigned long long)addr);
    vram__u64map_del(&g->handles, addr, NULL);
    vram__u64map_del(&g->sizes, addr, NULL);
    VRAM__CU_TRY(vram__cu.cuMemRelease((CUmemGenericAllocationHandle)h), "cuMemRelease");
    return 0;
}

static int vmm_unmap(void *self, uint64_t addr, uint64_t size)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    pthread_mutex_lock(&g->maps_lock);
    /* Check first that [addr, addr+size) is made of whole mappings. */
    for (uint64_t a = addr; a < addr + size;) {
        uint64_t n;
        if (!vram__u64map_get(&g->sizes, a, &n) || n > addr + size - a) {
            pthread_mutex_unlock(&g->maps_lock);
            return vram__fail(VRAM_EINVAL,
                              "vmm: unmap of 0x%llx+%llu does not cover whole mappings (at "
                              "0x%llx); a mapping can only be unmapped whole",
                              (unsigned long long)addr, (unsigned long long)size,
                              (unsigned long long)a);
        }
        a += n;
    }
    for (uint64_t a = addr; a < addr + size && !rc;) {
        uint64_t n = 0, h = 0;
        vram__u64map_get(&g->sizes, a, &n);
        vram__u64map_get(&g->handles, a, &h);
        rc = unmap_one(g, a, n, h);
        a += n;
    }
    pthread_mutex_unlock(&g->maps_lock);
    return rc;
}

/* Segments (the pool's huge blocks): a virtual range of their own, mapped
 * whole in one chunk; given back whole. */
static int vmm_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    (void)stream;
    uint64_t a = 0;
    int rc = vmm_reserve(self, size, &a);
    if (rc)
        return rc;
    rc = vmm_map(self, a, size);
    if (rc) {
        vram__saved_error err;
        vram__error_save(&err);
        vmm_release(self, a, size);
        return vram__error_restore(&err, rc);
    }
    *addr = a;
    return 0;
}

static int vmm_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    (void)stream;
    int rc = vmm_unmap(self, addr, size);
    return rc ? rc : vmm_release(self, addr, size);
}

static void vmm_destroy(void *self) { vram__gpu_backend_free(self); }

static const vram_backend_ops vmm_ops = {
    .name = "vmm",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP | VRAM_BACKEND_EVENTS,
    .segment_alloc = vmm_segment_alloc,
    .segment_free = vmm_segment_free,
    .reserve = vmm_reserve,
    .release = vmm_release,
    .map = vmm_map,
    .unmap = vmm_unmap,
    VRAM__GPU_SHARED_OPS,
    .destroy = vmm_destroy,
};

int vram__gpu_vmm_init(vram__gpu_backend *g, const vram_backend_ops **ops)
{
    CUdevice d = vram__device_handle(g->dev);
    int supported = 0;
    VRAM__CU_TRY(vram__cu.cuDeviceGetAttribute(
                     &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d),
                 "cuDeviceGetAttribute");
    if (!supported)
        return vram__fail(VRAM_ENOSYS, "device %d does not support virtual memory management",
                          vram__device_index(g->dev));
    g->prop = (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                                 .id = vram__device_index(g->dev)}};
    g->access = (CUmemAccessDesc){.location = g->prop.location,
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    *ops = &vmm_ops;
    return 0;
}
