/* src/preload/hooks_mem.c - the driver's allocations and frees, hooked:
 * each is counted in the ledger by kind with its call site, written to the
 * trace, and in limit mode first taken from the budget (a request past it
 * fails as the driver's own out-of-memory, CUDA_ERROR_OUT_OF_MEMORY); in
 * pool mode cuMemAlloc and cuMemFree are served by a vramkit pool. Pitched
 * allocations count pitch x height; arrays their elements (rows as the
 * driver pads them are not known), those with deferred mapping nothing
 * (what is mapped into them is charged where it is made); asynchronous allocations made while their stream captures a
 * graph count as the graph's, not the device's; page-locked host memory and
 * managed memory in their own kinds. Pools, mappings and reservations are
 * followed (counted) but not charged: the memory behind them is charged
 * where it is made (cuMemAllocAsync, cuMemCreate). */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "hooks.h"

#define EXPORT __attribute__((visibility("default")))

/* The stream-ordered variants the headers declare only for per-thread
 * default streams. */
EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                     CUmemoryPool pool, CUstream s);
EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);

/* A request in limit mode: 1 when it may go to the driver. */
static int admit(vram__pl_kind k, uint64_t size, uint64_t stream)
{
    if (!vram__pl_charged(k) || !vram__pl_limit() || vram__pl_take(size) == 0)
        return 1;
    vram__pl_on_fail(k, size, stream);
    vram__pl_trace(2, 0, size, stream);
    return 0;
}

/* After the driver answered a request that was admitted. */
static CUresult done(CUresult r, vram__pl_kind k, uint64_t key, uint64_t size, uint64_t stream,
                     const void *site)
{
    if (r == CUDA_SUCCESS) {
        vram__pl_on_alloc(k, key, size, site, stream);
        vram__pl_trace(0, key, size, stream);
    } else {
        if (vram__pl_charged(k) && vram__pl_limit())
            vram__pl_give(size);
        vram__pl_on_fail(k, size, stream);
        vram__pl_trace(2, 0, size, stream);
    }
    return r;
}

static void freed(vram__pl_kind k, uint64_t key, uint64_t stream)
{
    uint64_t size = vram__pl_on_free(k, key, stream);
    if (size && vram__pl_charged(k) && vram__pl_limit())
        vram__pl_give(size);
    if (size)
        vram__pl_trace(1, key, size, stream);
}

EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    PFN_cuMemAlloc_v3020 real = HOOK_REAL(cuMemAlloc_v2, PFN_cuMemAlloc_v3020);
    if (HOOK_PASS())
        return real ? real(dptr, bytes) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    if (!admit(VRAM__PL_DEVICE, bytes, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r;
    uint64_t p = 0;
    if (vram__pl_pool_mode()) {
        r = (CUresult)vram__pl_pool_alloc(bytes, &p);
        if (r == CUDA_SUCCESS)
            *dptr = (CUdeviceptr)p;
    } else {
        r = real ? real(dptr, bytes) : CUDA_ERROR_NOT_INITIALIZED;
    }
    vram__pl_depth--;
    return done(r, VRAM__PL_DEVICE, r == CUDA_SUCCESS ? (uint64_t)*dptr : 0, bytes, 0, site);
}

EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    PFN_cuMemFree_v3020 real = HOOK_REAL(cuMemFree_v2, PFN_cuMemFree_v3020);
    if (HOOK_PASS())
        return real ? real(dptr) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r;
    if (vram__pl_pool_mode() && vram__pl_pool_free((uint64_t)dptr))
        r = CUDA_SUCCESS;
    else
        r = real ? real(dptr) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth--;
    if (r == CUDA_SUCCESS)
        freed(VRAM__PL_DEVICE, (uint64_t)dptr, 0);
    return r;
}

EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                           size_t height, unsigned elem)
{
    PFN_cuMemAllocPitch_v3020 real = HOOK_REAL(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, pitch, width, height, elem) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    /* The pitch is known only after: admit the width, then the rest. */
    if (!admit(VRAM__PL_PITCH, (uint64_t)width * height, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = real(dptr, pitch, width, height, elem);
    vram__pl_depth--;
    uint64_t size = (uint64_t)width * height;
    if (r == CUDA_SUCCESS && *pitch > width) {
        uint64_t more = (uint64_t)(*pitch - width) * height;
        if (vram__pl_limit() && vram__pl_take(more)) {
            /* The padding does not fit: give it all back, as the driver would refuse. */
            PFN_cuMemFree_v3020 rfree = HOOK_REAL(cuMemFree_v2, PFN_cuMemFree_v3020);
            vram__pl_depth++;
            if (rfree)
                rfree(*dptr);
            vram__pl_depth--;
            return done(CUDA_ERROR_OUT_OF_MEMORY, VRAM__PL_PITCH, 0, size, 0, site);
        }
        size += more;
    }
    return done(r, VRAM__PL_PITCH, r == CUDA_SUCCESS ? (uint64_t)*dptr : 0, size, 0, site);
}

EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned flags)
{
    PFN_cuMemAllocManaged_v6000 real = HOOK_REAL(cuMemAllocManaged, PFN_cuMemAllocManaged_v6000);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, bytes, flags) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    vram__pl_depth++;
    CUresult r = real(dptr, bytes, flags);
    vram__pl_depth--;
    return done(r, VRAM__PL_MANAGED, r == CUDA_SUCCESS ? (uint64_t)*dptr : 0, bytes, 0, site);
}

EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytes)
{
    PFN_cuMemAllocHost_v3020 real = HOOK_REAL(cuMemAllocHost_v2, PFN_cuMemAllocHost_v3020);
    if (HOOK_PASS() || !real)
        return real ? real(pp, bytes) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    vram__pl_depth++;
    CUresult r = real(pp, bytes);
    vram__pl_depth--;
    return done(r, VRAM__PL_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytes, 0,
                site);
}

EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytes, unsigned flags)
{
    PFN_cuMemHostAlloc_v2020 real = HOOK_REAL(cuMemHostAlloc, PFN_cuMemHostAlloc_v2020);
    if (HOOK_PASS() || !real)
        return real ? real(pp, bytes, flags) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    vram__pl_depth++;
    CUresult r = real(pp, bytes, flags);
    vram__pl_depth--;
    return done(r, VRAM__PL_HOST, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytes, 0,
                site);
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    PFN_cuMemFreeHost_v2000 real = HOOK_REAL(cuMemFreeHost, PFN_cuMemFreeHost_v2000);
    if (HOOK_PASS() || !real)
        return real ? real(p) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(p);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS)
        freed(VRAM__PL_HOST, (uint64_t)(uintptr_t)p, 0);
    return r;
}

/* Whether a stream is capturing a graph now (no call a capture forbids:
 * cuStreamIsCapturing is allowed during one). */
static int capturing(CUstream s, int ptsz)
{
    PFN_cuStreamIsCapturing_v10000 q =
        ptsz ? HOOK_REAL(cuStreamIsCapturing_ptsz, PFN_cuStreamIsCapturing_v10000)
             : HOOK_REAL(cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return q && q(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult alloc_async(PFN_cuMemAllocFromPoolAsync_v11020 from_pool,
                            PFN_cuMemAllocAsync_v11020 plain, CUdeviceptr *dptr, size_t bytes,
                            CUmemoryPool pool, CUstream s, int ptsz, const void *site)
{
    vram__pl_kind k = capturing(s, ptsz) ? VRAM__PL_GRAPH : VRAM__PL_ASYNC;
    uint64_t stream = (uint64_t)(uintptr_t)s;
    if (!admit(k, bytes, stream))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = from_pool ? from_pool(dptr, bytes, pool, s) : plain(dptr, bytes, s);
    vram__pl_depth--;
    return done(r, k, r == CUDA_SUCCESS ? (uint64_t)*dptr : 0, bytes, stream, site);
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    PFN_cuMemAllocAsync_v11020 real = HOOK_REAL(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, bytes, s) : CUDA_ERROR_NOT_INITIALIZED;
    return alloc_async(NULL, real, dptr, bytes, NULL, s, 0, __builtin_return_address(0));
}

EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    PFN_cuMemAllocAsync_v11020 real =
        HOOK_REAL(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, bytes, s) : CUDA_ERROR_NOT_INITIALIZED;
    return alloc_async(NULL, real, dptr, bytes, NULL, s, 1, __builtin_return_address(0));
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                                CUmemoryPool pool, CUstream s)
{
    PFN_cuMemAllocFromPoolAsync_v11020 real =
        HOOK_REAL(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, bytes, pool, s) : CUDA_ERROR_NOT_INITIALIZED;
    return alloc_async(real, NULL, dptr, bytes, pool, s, 0, __builtin_return_address(0));
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                     CUmemoryPool pool, CUstream s)
{
    PFN_cuMemAllocFromPoolAsync_v11020 real =
        HOOK_REAL(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, bytes, pool, s) : CUDA_ERROR_NOT_INITIALIZED;
    return alloc_async(real, NULL, dptr, bytes, pool, s, 1, __builtin_return_address(0));
}

static CUresult free_async(PFN_cuMemFreeAsync_v11020 real, CUdeviceptr dptr, CUstream s)
{
    vram__pl_depth++;
    CUresult r = real(dptr, s);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS) {
        /* Captured allocations are the graph's: the key says which. */
        uint64_t stream = (uint64_t)(uintptr_t)s;
        if (!vram__pl_on_free(VRAM__PL_GRAPH, (uint64_t)dptr, stream))
            freed(VRAM__PL_DEVICE, (uint64_t)dptr, stream); /* any pointer kind */
    }
    return r;
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    PFN_cuMemFreeAsync_v11020 real = HOOK_REAL(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, s) : CUDA_ERROR_NOT_INITIALIZED;
    return free_async(real, dptr, s);
}

EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    PFN_cuMemFreeAsync_v11020 real = HOOK_REAL(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020);
    if (HOOK_PASS() || !real)
        return real ? real(dptr, s) : CUDA_ERROR_NOT_INITIALIZED;
    return free_async(real, dptr, s);
}

/* ---- followed, not charged ---- */

/* Count a followed call: a kind-less record in the ledger's call counts. */
#define FOLLOW(name, T, ...)                                                                  \
    T real = HOOK_REAL(name, T);                                                              \
    if (!real)                                                                                \
        return CUDA_ERROR_NOT_INITIALIZED;                                                    \
    vram__pl_depth++;                                                                         \
    CUresult r = real(__VA_ARGS__);                                                           \
    vram__pl_depth--;                                                                         \
    return r

EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    FOLLOW(cuMemPoolCreate, PFN_cuMemPoolCreate_v11020, pool, props);
}

EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    FOLLOW(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020, pool);
}

EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    FOLLOW(cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020, pool, keep);
}

EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    FOLLOW(cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020, dev, pool);
}

EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle h, unsigned long long flags)
{
    FOLLOW(cuMemMap, PFN_cuMemMap_v10020, ptr, size, offset, h, flags);
}

EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FOLLOW(cuMemUnmap, PFN_cuMemUnmap_v10020, ptr, size);
}

EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags)
{
    FOLLOW(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020, ptr, size, alignment, addr, flags);
}

/* ---- physical memory and arrays: charged by handle ---- */

EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                    const CUmemAllocationProp *prop, unsigned long long flags)
{
    PFN_cuMemCreate_v10020 real = HOOK_REAL(cuMemCreate, PFN_cuMemCreate_v10020);
    if (HOOK_PASS() || !real)
        return real ? real(h, size, prop, flags) : CUDA_ERROR_NOT_INITIALIZED;
    int device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    vram__pl_kind k = device ? VRAM__PL_VMM : VRAM__PL_HOST;
    const void *site = __builtin_return_address(0);
    if (!admit(k, size, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = real(h, size, prop, flags);
    vram__pl_depth--;
    return done(r, k, r == CUDA_SUCCESS ? (uint64_t)*h : 0, size, 0, site);
}

EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h)
{
    PFN_cuMemRelease_v10020 real = HOOK_REAL(cuMemRelease, PFN_cuMemRelease_v10020);
    if (HOOK_PASS() || !real)
        return real ? real(h) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(h);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS && !vram__pl_on_free(VRAM__PL_HOST, (uint64_t)h, 0))
        freed(VRAM__PL_VMM, (uint64_t)h, 0);
    return r;
}

/* What an array takes, as the driver says (0 when it cannot say). */
static uint64_t array_bytes(CUarray a, CUmipmappedArray m)
{
    PFN_cuCtxGetDevice_v2000 dev_of = HOOK_REAL(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000);
    CUdevice d = 0;
    if (dev_of)
        dev_of(&d);
    CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (a) {
        PFN_cuArrayGetMemoryRequirements_v11060 q = HOOK_REAL(
            cuArrayGetMemoryRequirements, PFN_cuArrayGetMemoryRequirements_v11060);
        if (q)
            r = q(&req, a, d);
    } else {
        PFN_cuMipmappedArrayGetMemoryRequirements_v11060 q =
            HOOK_REAL(cuMipmappedArrayGetMemoryRequirements,
                      PFN_cuMipmappedArrayGetMemoryRequirements_v11060);
        if (q)
            r = q(&req, m, d);
    }
    return r == CUDA_SUCCESS ? (uint64_t)req.size : 0;
}

static CUresult array_made(CUresult r, CUarray a, CUmipmappedArray m, uint64_t guess,
                           const void *site)
{
    if (r != CUDA_SUCCESS)
        return done(r, VRAM__PL_ARRAY, 0, guess, 0, site);
    /* The driver tells what an array requires only for one with deferred
     * mapping, which holds nothing until memory (charged where it is made)
     * is mapped into it: such an array counts 0; any other its size. */
    vram__pl_depth++;
    uint64_t deferred = array_bytes(a, m);
    vram__pl_depth--;
    uint64_t size = deferred ? 0 : guess;
    if (vram__pl_limit() && size > guess) /* the guess was admitted: the rest now */
        vram__pl_take(size - guess);
    else if (vram__pl_limit() && size < guess)
        vram__pl_give(guess - size);
    vram__pl_on_alloc(VRAM__PL_ARRAY, a ? (uint64_t)(uintptr_t)a : (uint64_t)(uintptr_t)m,
                      size, site, 0);
    if (size) /* a trace has no allocations of 0 bytes */
        vram__pl_trace(0, a ? (uint64_t)(uintptr_t)a : (uint64_t)(uintptr_t)m, size, 0);
    return r;
}

static uint64_t elem_bytes(CUarray_format f, unsigned channels)
{
    unsigned b = f == CU_AD_FORMAT_UNSIGNED_INT8 || f == CU_AD_FORMAT_SIGNED_INT8 ? 1
                 : f == CU_AD_FORMAT_UNSIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT16 ||
                         f == CU_AD_FORMAT_HALF
                     ? 2
                     : 4;
    return (uint64_t)b * (channels ? channels : 1);
}

EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    PFN_cuArrayCreate_v3020 real = HOOK_REAL(cuArrayCreate_v2, PFN_cuArrayCreate_v3020);
    if (HOOK_PASS() || !real || !d)
        return real ? real(a, d) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    uint64_t guess = (uint64_t)d->Width * (d->Height ? d->Height : 1) *
                     elem_bytes(d->Format, d->NumChannels);
    if (!admit(VRAM__PL_ARRAY, guess, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = real(a, d);
    vram__pl_depth--;
    return array_made(r, r == CUDA_SUCCESS ? *a : NULL, NULL, guess, site);
}

EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    PFN_cuArray3DCreate_v3020 real = HOOK_REAL(cuArray3DCreate_v2, PFN_cuArray3DCreate_v3020);
    if (HOOK_PASS() || !real || !d)
        return real ? real(a, d) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    uint64_t guess = (uint64_t)d->Width * (d->Height ? d->Height : 1) *
                     (d->Depth ? d->Depth : 1) * elem_bytes(d->Format, d->NumChannels);
    if (!admit(VRAM__PL_ARRAY, guess, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = real(a, d);
    vram__pl_depth--;
    return array_made(r, r == CUDA_SUCCESS ? *a : NULL, NULL, guess, site);
}

EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray a)
{
    PFN_cuArrayDestroy_v2000 real = HOOK_REAL(cuArrayDestroy, PFN_cuArrayDestroy_v2000);
    if (HOOK_PASS() || !real)
        return real ? real(a) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(a);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS)
        freed(VRAM__PL_ARRAY, (uint64_t)(uintptr_t)a, 0);
    return r;
}

EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *m,
                                               const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    PFN_cuMipmappedArrayCreate_v5000 real =
        HOOK_REAL(cuMipmappedArrayCreate, PFN_cuMipmappedArrayCreate_v5000);
    if (HOOK_PASS() || !real || !d)
        return real ? real(m, d, levels) : CUDA_ERROR_NOT_INITIALIZED;
    const void *site = __builtin_return_address(0);
    /* All levels: at most 4/3 of the first. */
    uint64_t guess = (uint64_t)d->Width * (d->Height ? d->Height : 1) *
                     (d->Depth ? d->Depth : 1) * elem_bytes(d->Format, d->NumChannels) * 4 / 3;
    if (!admit(VRAM__PL_ARRAY, guess, 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vram__pl_depth++;
    CUresult r = real(m, d, levels);
    vram__pl_depth--;
    return array_made(r, NULL, r == CUDA_SUCCESS ? *m : NULL, guess, site);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    PFN_cuMipmappedArrayDestroy_v5000 real =
        HOOK_REAL(cuMipmappedArrayDestroy, PFN_cuMipmappedArrayDestroy_v5000);
    if (HOOK_PASS() || !real)
        return real ? real(m) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(m);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS)
        freed(VRAM__PL_ARRAY, (uint64_t)(uintptr_t)m, 0);
    return r;
}
