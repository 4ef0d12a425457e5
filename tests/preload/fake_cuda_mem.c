/* tests/preload/fake_cuda_mem.c - the stand-in driver's plain allocations:
 * cuMemGetInfo, cuMemAlloc and cuMemFree, pitched and managed memory, and
 * page-locked host memory, each in the ABIs libcuda exports. The _v2
 * entries take 64-bit pointers and size_t sizes; the unversioned legacy
 * ones keep the 32-bit ABI of CUDA before 3.2 (CUdeviceptr_v1 and unsigned
 * int sizes), so what they hand out is mapped below 2 GiB and any
 * allocation can be freed through either ABI when its address fits.
 *
 * A device allocation is malloc'd host memory of exactly the size asked
 * (pitched: pitch x height, the pitch rounded up to 512 bytes) and is
 * charged to the device as its kind; managed memory counts as resident on
 * the device. Page-locked host memory is host memory only: it is counted
 * (FAKE_CUDA_KIND_HOST), never charged. Every allocation belongs to the
 * current context and dies with it, but for CU_MEMHOSTALLOC_PORTABLE host
 * memory. A request needs cuInit and a current context, a size above 0 and
 * a place to write the pointer (CUDA_ERROR_NOT_INITIALIZED,
 * CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE); freeing what is
 * not an allocation of the kind is CUDA_ERROR_INVALID_VALUE. */
#include <limits.h>
#include <stdlib.h>

#include "fake_cuda_internal.h"

/* ---- what is free ---- */

static CUresult mem_info(size_t *free_b, size_t *total)
{
    fc_lock();
    CUresult r = fc_need_ctx_locked(NULL);
    if (r == CUDA_SUCCESS) {
        uint64_t used = fc_used_locked();
        if (free_b)
            *free_b = (size_t)(used < fc_g.total ? fc_g.total - used : 0);
        if (total)
            *total = (size_t)fc_g.total;
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    FC_ENTER(cuMemGetInfo_v2);
    return mem_info(free, total);
}

/* The 32-bit ABI: both saturate at 4 GiB - 1. */
CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    FC_ENTER(cuMemGetInfo);
    size_t f = 0, t = 0;
    CUresult r = mem_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        if (free)
            *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        if (total)
            *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return r;
}

/* ---- device memory ---- */

static CUresult alloc(fake_cuda_kind kind, size_t size, uint64_t bytes, int low32, uint64_t *addr)
{
    fc_lock();
    struct CUctx_st *ctx = NULL;
    CUresult r = fc_need_ctx_locked(&ctx);
    if (r == CUDA_SUCCESS && (!addr || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    fc_alloc *a = NULL;
    if (r == CUDA_SUCCESS)
        r = fc_alloc_new_locked(kind, size, bytes, low32, ctx, &a);
    if (r == CUDA_SUCCESS)
        *addr = a->addr;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FC_ENTER(cuMemAlloc_v2);
    uint64_t p = 0;
    CUresult r = alloc(FAKE_CUDA_KIND_DEVICE, bytesize, bytesize, 0, dptr ? &p : NULL);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return r;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    FC_ENTER(cuMemAlloc);
    uint64_t p = 0;
    CUresult r = alloc(FAKE_CUDA_KIND_DEVICE, bytesize, bytesize, 1, dptr ? &p : NULL);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return r;
}

static CUresult dev_free(uint64_t addr)
{
    fc_lock();
    CUresult r = fc_need_ctx_locked(NULL);
    if (r == CUDA_SUCCESS)
        r = fc_dev_free_locked(addr);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    FC_ENTER(cuMemFree_v2);
    return dev_free((uint64_t)dptr);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
    FC_ENTER(cuMemFree);
    return dev_free((uint64_t)dptr);
}

/* Pitch x height bytes, the pitch the width rounded up to 512. */
static CUresult alloc_pitch(uint64_t *addr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem, int low32)
{
    if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = fc_round_up(width, FC_PITCH_ALIGN);
    if (p > SIZE_MAX / height)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = alloc(FAKE_CUDA_KIND_PITCH, (size_t)(p * height), p * height, low32, addr);
    if (r == CUDA_SUCCESS)
        *pitch = (size_t)p;
    return r;
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes)
{
    FC_ENTER(cuMemAllocPitch_v2);
    uint64_t p = 0;
    CUresult r = alloc_pitch(dptr ? &p : NULL, pPitch, WidthInBytes, Height, ElementSizeBytes, 0);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return r;
}

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                 unsigned int WidthInBytes, unsigned int Height,
                                 unsigned int ElementSizeBytes)
{
    FC_ENTER(cuMemAllocPitch);
    uint64_t p = 0;
    size_t pitch = 0;
    CUresult r = alloc_pitch(dptr ? &p : NULL, pPitch ? &pitch : NULL, WidthInBytes, Height,
                             ElementSizeBytes, 1);
    if (r == CUDA_SUCCESS && pitch > UINT_MAX) {
        dev_free(p);
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return r;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FC_ENTER(cuMemAllocManaged);
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = 0;
    CUresult r = alloc(FAKE_CUDA_KIND_MANAGED, bytesize, bytesize, 0, dptr ? &p : NULL);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    return r;
}

/* ---- page-locked host memory ---- */

static CUresult host_alloc(void **pp, size_t size, int portable)
{
    fc_lock();
    struct CUctx_st *ctx = NULL;
    CUresult r = fc_need_ctx_locked(&ctx);
    if (r == CUDA_SUCCESS && (!pp || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    fc_alloc *a = NULL;
    if (r == CUDA_SUCCESS)
        r = fc_alloc_new_locked(FAKE_CUDA_KIND_HOST, size, size, 0, portable ? NULL : ctx, &a);
    if (r == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)a->addr;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FC_ENTER(cuMemAllocHost_v2);
    return host_alloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemAllocHost(void **pp, unsigned int bytesize)
{
    FC_ENTER(cuMemAllocHost);
    return host_alloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FC_ENTER(cuMemHostAlloc);
    if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytesize, (Flags & CU_MEMHOSTALLOC_PORTABLE) != 0);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    FC_ENTER(cuMemFreeHost);
    fc_lock();
    CUresult r = fc_need_ctx_locked(NULL);
    fc_alloc *a = NULL;
    if (r == CUDA_SUCCESS) {
        a = fc_map_del(&fc_g.host, (uint64_t)(uintptr_t)p);
        r = a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    if (a) {
        fc_uncharge_locked(a->kind, a->bytes);
        fc_alloc_release_memory(a);
        free(a);
    }
    fc_unlock();
    return r;
}
