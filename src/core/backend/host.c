/* src/core/backend/host.c - ordinary memory standing in for a device, so the whole
 * pipeline runs on a machine without a GPU. Segments are anonymous mappings;
 * reserve-then-map is an inaccessible (PROT_NONE) reservation whose granules
 * are made readable and writable by map and given back to the kernel
 * (MADV_DONTNEED) by unmap. Its ledger bounds what it hands out by a capacity
 * and refuses calls a driver would refuse. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend_internal.h"
#include "ledger.h"

typedef struct host {
    vram__ledger books;
} host;

static int host_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    host *h = self;
    int rc = vram__ledger_take(&h->books, size, "segment");
    if (rc)
        return rc;
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        vram__ledger_give(&h->books, size);
        return vram__fail(VRAM_ENOMEM, "host backend: mmap of %llu bytes failed: %s",
                          (unsigned long long)size, strerror(errno));
    }
    rc = vram__ledger_segment_add(&h->books, (uint64_t)(uintptr_t)p, size);
    if (rc) {
        munmap(p, (size_t)size);
        vram__ledger_give(&h->books, size);
        return rc;
    }
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

static int host_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    host *h = self;
    int rc = vram__ledger_segment_remove(&h->books, addr, size);
    if (rc)
        return rc;
    if (munmap((void *)(uintptr_t)addr, (size_t)size)) { /* keep it in the books */
        int err = errno;
        vram__ledger_take(&h->books, size, "segment");
        vram__ledger_segment_add(&h->books, addr, size);
        return vram__fail(VRAM_EBACKEND, "host backend: munmap of 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(err));
    }
    return 0;
}

static int host_reserve(void *self, uint64_t size, uint64_t *addr)
{
    host *h = self;
    uint64_t g = h->books.granularity;
    size_t span = (size_t)(size + g);
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return vram__fail(VRAM_ENOMEM, "host backend: reserving %llu bytes failed: %s",
                          (unsigned long long)size, strerror(errno));
    uintptr_t start = (uintptr_t)vram__align_up((uint64_t)(uintptr_t)p, g);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - (size_t)size;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)start + size, tail);
    int rc = vram__ledger_range_add(&h->books, start, size);
    if (rc) {
        munmap((void *)start, (size_t)size);
        return rc;
    }
    *addr = start;
    return 0;
}

static int host_release(void *self, uint64_t addr, uint64_t size)
{
    host *h = self;
    int rc = vram__ledger_range_remove(&h->books, addr, size);
    if (rc)
        return rc;
    if (munmap((void *)(uintptr_t)addr, (size_t)size))
        return vram__fail(VRAM_EBACKEND, "host backend: releasing 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(errno));
    return 0;
}

static int host_map(void *self, uint64_t addr, uint64_t size)
{
    host *h = self;
    int rc = vram__ledger_map(&h->books, addr, size);
    if (rc)
        return rc;
    if (mprotect((void *)(uintptr_t)addr, (size_t)size, PROT_READ | PROT_WRITE)) {
        int err = errno;
        vram__ledger_unmap(&h->books, addr, size);
        return vram__fail(VRAM_ENOMEM, "host backend: mapping 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(err));
    }
    return 0;
}

static int host_unmap(void *self, uint64_t addr, uint64_t size)
{
    host *h = self;
    int rc = vram__ledger_unmap(&h->books, addr, size);
    if (rc)
        return rc;
    void *p = (void *)(uintptr_t)addr;
    if (madvise(p, (size_t)size, MADV_DONTNEED) || mprotect(p, (size_t)size, PROT_NONE)) {
        int err = errno;
        vram__ledger_map(&h->books, addr, size); /* still mapped: keep it in the books */
        return vram__fail(VRAM_EBACKEND, "host backend: unmapping 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(err));
    }
    return 0;
}

static int host_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    host *h = self;
    vram__ledger_mem_info(&h->books, free_bytes, total);
    return 0;
}

static void host_destroy(void *self)
{
    host *h = self;
    vram__ledger_destroy(&h->books);
    free(h);
}

static const vram_backend_ops host_ops = {
    .name = "host",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP,
    .segment_alloc = host_segment_alloc,
    .segment_free = host_segment_free,
    .reserve = host_reserve,
    .release = host_release,
    .map = host_map,
    .unmap = host_unmap,
    .mem_info = host_mem_info,
    .destroy = host_destroy,
};

int vram__backend_host_new(uint64_t capacity, uint64_t granularity, const vram_backend_ops **ops,
                           void **self)
{
    host *h = vram__calloc(1, sizeof *h);
    if (!h)
        return VRAM_EHOSTMEM;
    if (vram__ledger_init(&h->books, "host backend", capacity, granularity)) {
        free(h);
        return VRAM_EHOSTMEM;
    }
    *ops = &host_ops;
    *self = h;
    return 0;
}
