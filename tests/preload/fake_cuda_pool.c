/* tests/preload/fake_cuda_pool.c - stream-ordered allocation in the
 * stand-in driver: memory pools (the device's default pool, pools of
 * cuMemPoolCreate, the pool a device allocates from), cuMemAllocAsync,
 * cuMemAllocFromPoolAsync and cuMemFreeAsync (plain and _ptsz), the pools'
 * attributes, and graph memory.
 *
 * A pool hands out blocks of host memory (the size asked rounded up to 512
 * bytes) and keeps a freed block for reuse (the best fit of at most twice
 * the size asked) instead of giving it back, so the device stays charged
 * (FAKE_CUDA_KIND_POOL) for what the pool reserves, in use or not, until
 * cuMemPoolTrimTo, a synchronisation with a release threshold below what
 * it reserves, or the pool's destruction gives it back. Pools start with a
 * release threshold of UINT64_MAX (the real driver's default is 0: set the
 * attribute to 0 to have every synchronisation trim). A request that does
 * not fit first gives back what the pool keeps. Blocks belong to the
 * device, not to a context; cuMemFree frees them too, and cuMemFreeAsync
 * frees any device allocation. A destroyed pool with blocks still in use
 * goes once the last is freed.
 *
 * While fake_cuda_set_capturing(1) is on, allocations come from graph
 * memory instead (FAKE_CUDA_KIND_GRAPH, cuDeviceGetGraphMemAttribute),
 * kept likewise until cuDeviceGraphMemTrim. */
#include <stdlib.h>

#include "fake_cuda_internal.h"

typedef struct CUmemPoolHandle_st fc_pool;

static fc_pool *pool_new(fake_cuda_kind kind, int is_default, int is_graph)
{
    fc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->hdr.tag = FC_T_POOL;
    p->hdr.kind = kind;
    p->is_default = is_default;
    p->is_graph = is_graph;
    p->threshold = UINT64_MAX;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    return p;
}

CUresult fc_pools_ensure_locked(void)
{
    if (!fc_g.default_pool) {
        fc_pool *p = pool_new(FAKE_CUDA_KIND_POOL, 1, 0);
        if (!p || fc_obj_add_locked(p) != CUDA_SUCCESS) {
            free(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        fc_g.default_pool = fc_g.current_pool = p;
    }
    if (!fc_g.graph_pool) {
        fc_g.graph_pool = pool_new(FAKE_CUDA_KIND_GRAPH, 0, 1); /* not a handle */
        if (!fc_g.graph_pool)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static void release_block_locked(fc_pool *p, fc_alloc *a)
{
    p->reserved -= a->bytes;
    fc_uncharge_locked(a->kind, a->bytes);
    fc_alloc_release_memory(a);
    free(a);
}

void fc_pool_trim_locked(fc_pool *p, uint64_t keep)
{
    while (p->reserved > keep && p->kept) {
        fc_alloc *a = p->kept;
        p->kept = a->next;
        release_block_locked(p, a);
    }
}

static void note_high(fc_pool *p)
{
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    if (p->used > p->used_high)
        p->used_high = p->used;
}

/* The best kept block for `cap` bytes, unlinked; NULL when none fits. */
static fc_alloc *take_kept(fc_pool *p, uint64_t cap)
{
    fc_alloc **best = NULL;
    for (fc_alloc **q = &p->kept; *q; q = &(*q)->next)
        if ((*q)->bytes >= cap && (*q)->bytes / 2 <= cap && (!best || (*q)->bytes < (*best)->bytes))
            best = q;
    if (!best)
        return NULL;
    fc_alloc *a = *best;
    *best = a->next;
    a->next = NULL;
    return a;
}

CUresult fc_pool_alloc_locked(fc_pool *p, size_t size, uint64_t *addr)
{
    if (size == 0 || !addr)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t cap = fc_round_up(size, FC_POOL_ALIGN);
    fc_alloc *a = take_kept(p, cap);
    if (a) {
        if (fc_map_put(&fc_g.dev, a->addr, a) != 0) {
            a->next = p->kept;
            p->kept = a;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        if (p->max_size && p->reserved + cap > p->max_size) {
            fc_pool_trim_locked(p, cap <= p->max_size ? p->max_size - cap : 0);
            if (p->reserved + cap > p->max_size)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        CUresult r = fc_alloc_new_locked(p->hdr.kind, (size_t)cap, cap, 0, NULL, &a);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && p->kept) {
            fc_pool_trim_locked(p, 0); /* give back what is kept, then try again */
            r = fc_alloc_new_locked(p->hdr.kind, (size_t)cap, cap, 0, NULL, &a);
        }
        if (r != CUDA_SUCCESS)
            return r;
        a->pool = p;
        p->reserved += cap;
    }
    a->size = size;
    p->used += a->bytes;
    p->live++;
    note_high(p);
    *addr = a->addr;
    return CUDA_SUCCESS;
}

void fc_pool_give_locked(fc_alloc *a)
{
    fc_pool *p = a->pool;
    fc_map_del(&fc_g.dev, a->addr);
    p->used -= a->bytes;
    p->live--;
    if (!p->dying) {
        a->next = p->kept;
        p->kept = a;
        return;
    }
    release_block_locked(p, a);
    if (p->live == 0)
        free(p);
}

/* A pool handle of a program's: a live pool, not the graph's. */
static fc_pool *find_pool_locked(CUmemoryPool pool)
{
    fc_pool *p = fc_obj_find_locked(pool, FC_T_POOL);
    return p && !p->dying ? p : NULL;
}

/* ---- stream-ordered allocation ---- */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, int from_pool,
                            CUstream s)
{
    fc_lock();
    CUresult r = fc_stream_ctx_locked(s, NULL);
    fc_pool *p = NULL;
    if (r == CUDA_SUCCESS) {
        p = from_pool ? find_pool_locked(pool) : fc_g.current_pool;
        if (!p)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (fc_capturing())
            p = fc_g.graph_pool;
    }
    uint64_t addr = 0;
    if (r == CUDA_SUCCESS)
        r = fc_pool_alloc_locked(p, size, dptr ? &addr : NULL);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)addr;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FC_ENTER(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, NULL, 0, hStream);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FC_ENTER(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, NULL, 0, hStream);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    FC_ENTER(cuMemAllocFromPoolAsync);
    return alloc_async(dptr, bytesize, pool, 1, hStream);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream)
{
    FC_ENTER(cuMemAllocFromPoolAsync_ptsz);
    return alloc_async(dptr, bytesize, pool, 1, hStream);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    fc_lock();
    CUresult r = fc_stream_ctx_locked(s, NULL);
    if (r == CUDA_SUCCESS)
        r = fc_dev_free_locked((uint64_t)dptr);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FC_ENTER(cuMemFreeAsync);
    return free_async(dptr, hStream);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FC_ENTER(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream);
}

/* ---- pools ---- */

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    FC_ENTER(cuMemPoolCreate);
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE || poolProps->location.id != 0 ||
        (poolProps->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_pool *p = NULL;
    if (r == CUDA_SUCCESS) {
        p = pool_new(FAKE_CUDA_KIND_POOL, 0, 0);
        r = p ? fc_obj_add_locked(p) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        p->max_size = poolProps->maxSize;
        *pool = p;
    } else {
        free(p);
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    FC_ENTER(cuMemPoolDestroy);
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_pool *p = r == CUDA_SUCCESS ? find_pool_locked(pool) : NULL;
    if (r == CUDA_SUCCESS && (!p || p->is_default))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        if (fc_g.current_pool == p)
            fc_g.current_pool = fc_g.default_pool;
        fc_map_del(&fc_g.objs, (uint64_t)(uintptr_t)p);
        fc_pool_trim_locked(p, 0);
        if (p->live == 0)
            free(p);
        else
            p->dying = 1; /* goes with its last block */
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    FC_ENTER(cuMemPoolTrimTo);
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_pool *p = r == CUDA_SUCCESS ? find_pool_locked(pool) : NULL;
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        fc_pool_trim_locked(p, minBytesToKeep);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FC_ENTER(cuMemPoolSetAttribute);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_pool *p = r == CUDA_SUCCESS ? find_pool_locked(pool) : NULL;
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE; /* only a reset to the current value */
            else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
                p->reserved_high = p->reserved;
            else
                p->used_high = p->used;
            break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FC_ENTER(cuMemPoolGetAttribute);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_pool *p = r == CUDA_SUCCESS ? find_pool_locked(pool) : NULL;
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fc_unlock();
    return r;
}

static CUresult device_ready(CUdevice dev)
{
    CUresult r = fc_ready_locked();
    return r == CUDA_SUCCESS ? fc_check_device(dev) : r;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    FC_ENTER(cuDeviceGetDefaultMemPool);
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = device_ready(dev);
    if (r == CUDA_SUCCESS)
        *pool_out = fc_g.default_pool;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    FC_ENTER(cuDeviceGetMemPool);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = device_ready(dev);
    if (r == CUDA_SUCCESS)
        *pool = fc_g.current_pool;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    FC_ENTER(cuDeviceSetMemPool);
    fc_lock();
    CUresult r = device_ready(dev);
    fc_pool *p = r == CUDA_SUCCESS ? find_pool_locked(pool) : NULL;
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        fc_g.current_pool = p;
    fc_unlock();
    return r;
}

/* ---- graph memory ---- */

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    FC_ENTER(cuDeviceGetGraphMemAttribute);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = device_ready(device);
    const fc_pool *g = fc_g.graph_pool;
    if (r == CUDA_SUCCESS) {
        switch (attr) {
        case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = g->used; break;
        case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = g->used_high; break;
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = g->reserved; break;
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = g->reserved_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    FC_ENTER(cuDeviceSetGraphMemAttribute);
    if (!value || *(cuuint64_t *)value != 0)
        return CUDA_ERROR_INVALID_VALUE; /* only the high marks, reset to the current value */
    fc_lock();
    CUresult r = device_ready(device);
    fc_pool *g = fc_g.graph_pool;
    if (r == CUDA_SUCCESS) {
        if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
            g->used_high = g->used;
        else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
            g->reserved_high = g->reserved;
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    FC_ENTER(cuDeviceGraphMemTrim);
    fc_lock();
    CUresult r = device_ready(device);
    if (r == CUDA_SUCCESS)
        fc_pool_trim_locked(fc_g.graph_pool, 0);
    fc_unlock();
    return r;
}
