/* tests/preload/fake_cuda_vmm.c - virtual memory management in the
 * stand-in driver, on the host's own: cuMemCreate makes a memfd of the
 * size asked (its pages are real only once touched), charged to the device
 * (FAKE_CUDA_KIND_VMM) until it is released and no longer mapped;
 * cuMemAddressReserve reserves an inaccessible range of address space
 * (charged nothing); cuMemMap maps a handle's pages there (shared: two
 * mappings of one handle see the same bytes), still inaccessible until
 * cuMemSetAccess opens them, as on the GPU; cuMemUnmap takes whole
 * mappings only. Sizes, offsets and addresses go in steps of the
 * granularity, 2 MiB (CUDA_ERROR_INVALID_VALUE otherwise). Handles and
 * reservations belong to the device, not to a context. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda_internal.h"

typedef struct fc_vmm {
    fc_obj hdr; /* charged while it lives */
    size_t size;
    int fd;
    int released;
    unsigned maps;
} fc_vmm;

typedef struct fc_mapping {
    uintptr_t va;
    size_t size;
    fc_vmm *h;
    struct fc_mapping *next;
} fc_mapping;

typedef struct fc_resv {
    uintptr_t base;
    size_t size;
    fc_mapping *maps;
    struct fc_resv *next;
} fc_resv;

static fc_resv *reservations; /* under the driver's lock */
static fc_resv *inherited;    /* a fork parent's, still mapped, no longer the device's */

void fc_vmm_after_fork(void)
{
    if (!reservations)
        return;
    fc_resv *last = reservations;
    while (last->next)
        last = last->next;
    last->next = inherited;
    inherited = reservations;
    reservations = NULL;
}

static int granular(uint64_t v) { return v % FC_GRANULARITY == 0; }

static int prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id == 0;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    FC_ENTER(cuMemGetAllocationGranularity);
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_unlock();
    if (r == CUDA_SUCCESS)
        *granularity = FC_GRANULARITY;
    return r;
}

/* ---- physical memory ---- */

static fc_vmm *find_handle_locked(CUmemGenericAllocationHandle handle)
{
    return fc_obj_find_locked((const void *)(uintptr_t)handle, FC_T_VMM);
}

static void vmm_free_locked(fc_vmm *h)
{
    close(h->fd);
    fc_obj_free_locked(h); /* gives back its bytes */
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    FC_ENTER(cuMemCreate);
    if (!handle || !prop_ok(prop) || flags != 0 || size == 0 || !granular(size))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_need_ctx_locked(NULL);
    if (r == CUDA_SUCCESS)
        r = fc_charge_locked(FAKE_CUDA_KIND_VMM, size);
    fc_vmm *h = NULL;
    if (r == CUDA_SUCCESS) {
        h = calloc(1, sizeof *h);
        int fd = h ? memfd_create("fake_cuda_vmm", MFD_CLOEXEC) : -1;
        if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
            close(fd);
            fd = -1;
        }
        if (fd < 0) {
            free(h);
            h = NULL;
            fc_uncharge_locked(FAKE_CUDA_KIND_VMM, size);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            h->hdr.tag = FC_T_VMM;
            h->hdr.kind = FAKE_CUDA_KIND_VMM;
            h->hdr.bytes = size;
            h->size = size;
            h->fd = fd;
            r = fc_obj_add_locked(h);
            if (r != CUDA_SUCCESS) {
                close(fd);
                free(h);
                fc_uncharge_locked(FAKE_CUDA_KIND_VMM, size);
            }
        }
    }
    if (r == CUDA_SUCCESS)
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    fc_unlock();
    return r;
}

/* The memory goes when the handle is released and no longer mapped. */
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FC_ENTER(cuMemRelease);
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_vmm *h = r == CUDA_SUCCESS ? find_handle_locked(handle) : NULL;
    if (r == CUDA_SUCCESS && (!h || h->released))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        h->released = 1;
        if (h->maps == 0)
            vmm_free_locked(h);
    }
    fc_unlock();
    return r;
}

/* ---- address space ---- */

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
    FC_ENTER(cuMemAddressReserve);
    (void)addr; /* a hint, not followed */
    if (!ptr || size == 0 || !granular(size) || flags != 0 || (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > FC_GRANULARITY ? alignment : FC_GRANULARITY;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_resv *v = NULL;
    if (r == CUDA_SUCCESS) {
        v = calloc(1, sizeof *v);
        void *m = v ? mmap(NULL, size + align, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                    : MAP_FAILED;
        if (m == MAP_FAILED) {
            free(v);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            /* Keep the aligned part only. */
            uintptr_t start = (uintptr_t)m, base = (start + align - 1) / align * align;
            if (base > start)
                munmap(m, base - start);
            if (base + size < start + size + align)
                munmap((void *)(base + size), start + size + align - (base + size));
            v->base = base;
            v->size = size;
            v->next = reservations;
            reservations = v;
            *ptr = (CUdeviceptr)base;
        }
    }
    fc_unlock();
    return r;
}

static fc_resv **find_resv_locked(uintptr_t va, size_t size)
{
    for (fc_resv **q = &reservations; *q; q = &(*q)->next)
        if (va >= (*q)->base && size <= (*q)->size && va - (*q)->base <= (*q)->size - size)
            return q;
    return NULL;
}

/* Back to reserved-and-inaccessible. */
static void unmap_one_locked(fc_mapping *m)
{
    mmap((void *)m->va, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
         -1, 0);
    fc_vmm *h = m->h;
    h->maps--;
    if (h->released && h->maps == 0)
        vmm_free_locked(h);
    free(m);
}

/* Mappings still there are unmapped first. */
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FC_ENTER(cuMemAddressFree);
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_resv **q = NULL;
    if (r == CUDA_SUCCESS) {
        q = find_resv_locked((uintptr_t)ptr, size);
        if (!q || (*q)->base != (uintptr_t)ptr || (*q)->size != size)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        fc_resv *v = *q;
        *q = v->next;
        while (v->maps) {
            fc_mapping *m = v->maps;
            v->maps = m->next;
            unmap_one_locked(m);
        }
        munmap((void *)v->base, v->size);
        free(v);
    }
    fc_unlock();
    return r;
}

/* ---- mappings ---- */

static int overlaps(const fc_mapping *m, uintptr_t va, size_t size)
{
    return va < m->va + m->size && m->va < va + size;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    FC_ENTER(cuMemMap);
    if (flags != 0 || size == 0 || !granular(size) || !granular(offset) || !granular(ptr))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_vmm *h = r == CUDA_SUCCESS ? find_handle_locked(handle) : NULL;
    fc_resv **q = r == CUDA_SUCCESS ? find_resv_locked((uintptr_t)ptr, size) : NULL;
    if (r == CUDA_SUCCESS &&
        (!h || h->released || !q || offset > h->size || size > h->size - offset))
        r = CUDA_ERROR_INVALID_VALUE;
    for (const fc_mapping *m = r == CUDA_SUCCESS ? (*q)->maps : NULL; m; m = m->next)
        if (overlaps(m, (uintptr_t)ptr, size))
            r = CUDA_ERROR_INVALID_VALUE;
    fc_mapping *m = NULL;
    if (r == CUDA_SUCCESS) {
        m = calloc(1, sizeof *m);
        void *at = m ? mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd,
                            (off_t)offset)
                     : MAP_FAILED;
        if (at == MAP_FAILED) {
            free(m);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            m->va = (uintptr_t)ptr;
            m->size = size;
            m->h = h;
            m->next = (*q)->maps;
            (*q)->maps = m;
            h->maps++;
        }
    }
    fc_unlock();
    return r;
}

/* The range must be made of whole mappings. */
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FC_ENTER(cuMemUnmap);
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_resv **q = r == CUDA_SUCCESS ? find_resv_locked((uintptr_t)ptr, size) : NULL;
    if (r == CUDA_SUCCESS && (!q || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    size_t covered = 0;
    for (const fc_mapping *m = r == CUDA_SUCCESS ? (*q)->maps : NULL; m; m = m->next) {
        if (!overlaps(m, (uintptr_t)ptr, size))
            continue;
        if (m->va < (uintptr_t)ptr || m->va + m->size > (uintptr_t)ptr + size)
            r = CUDA_ERROR_INVALID_VALUE; /* part of a mapping */
        covered += m->size;
    }
    if (r == CUDA_SUCCESS && covered != size)
        r = CUDA_ERROR_INVALID_VALUE; /* holes */
    if (r == CUDA_SUCCESS) {
        for (fc_mapping **p = &(*q)->maps; *p;) {
            fc_mapping *m = *p;
            if (overlaps(m, (uintptr_t)ptr, size)) {
                *p = m->next;
                unmap_one_locked(m);
            } else {
                p = &m->next;
            }
        }
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    FC_ENTER(cuMemSetAccess);
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = -1;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id != 0)
            return CUDA_ERROR_INVALID_VALUE;
        switch (desc[i].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
        case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_resv **q = r == CUDA_SUCCESS ? find_resv_locked((uintptr_t)ptr, size) : NULL;
    if (r == CUDA_SUCCESS && !q)
        r = CUDA_ERROR_INVALID_VALUE;
    size_t covered = 0;
    for (const fc_mapping *m = r == CUDA_SUCCESS ? (*q)->maps : NULL; m; m = m->next) {
        if (!overlaps(m, (uintptr_t)ptr, size))
            continue;
        uintptr_t lo = m->va > (uintptr_t)ptr ? m->va : (uintptr_t)ptr;
        uintptr_t hi =
            m->va + m->size < (uintptr_t)ptr + size ? m->va + m->size : (uintptr_t)ptr + size;
        covered += hi - lo;
    }
    if (r == CUDA_SUCCESS && covered != size)
        r = CUDA_ERROR_INVALID_VALUE; /* not all mapped */
    if (r == CUDA_SUCCESS && mprotect((void *)(uintptr_t)ptr, size, prot) != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    fc_unlock();
    return r;
}
