/* src/backend/host.c - ordinary memory standing in for a device, so the whole
 * pipeline runs on a machine without a GPU. Segments are anonymous mappings;
 * reserve-then-map is an inaccessible (PROT_NONE) reservation whose granules
 * are made readable and writable by map and given back to the kernel
 * (MADV_DONTNEED) by unmap. A capacity bounds what it hands out. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend_internal.h"

typedef struct host {
    pthread_mutex_t lock;
    uint64_t capacity, granularity, used;
} host;

static int host_take(host *h, uint64_t size)
{
    pthread_mutex_lock(&h->lock);
    int rc = 0;
    if (size > h->capacity - h->used) {
        char a[32], b[32], c[32];
        rc = vram__fail(VRAM_ENOMEM, "host backend out of memory: requested %s, %s of %s in use",
                        vram__fmt_bytes(a, sizeof a, size), vram__fmt_bytes(b, sizeof b, h->used),
                        vram__fmt_bytes(c, sizeof c, h->capacity));
    } else {
        h->used += size;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static void host_give(host *h, uint64_t size)
{
    pthread_mutex_lock(&h->lock);
    h->used -= size;
    pthread_mutex_unlock(&h->lock);
}

static int host_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    host *h = self;
    int rc = host_take(h, size);
    if (rc)
        return rc;
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        host_give(h, size);
        return vram__fail(VRAM_ENOMEM, "host backend: mmap of %llu bytes failed: %s",
                          (unsigned long long)size, strerror(errno));
    }
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

static int host_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    host *h = self;
    if (munmap((void *)(uintptr_t)addr, (size_t)size))
        return vram__fail(VRAM_EBACKEND, "host backend: munmap of 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(errno));
    host_give(h, size);
    return 0;
}

static int host_reserve(void *self, uint64_t size, uint64_t *addr)
{
    host *h = self;
    size_t span = (size_t)(size + h->granularity);
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return vram__fail(VRAM_ENOMEM, "host backend: reserving %llu bytes failed: %s",
                          (unsigned long long)size, strerror(errno));
    uintptr_t start = (uintptr_t)vram__align_up((uint64_t)(uintptr_t)p, h->granularity);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - (size_t)size;
    if (head)
        munmap(p, head);
    if (tail)
        munmap((char *)start + size, tail);
    *addr = start;
    return 0;
}

static int host_release(void *self, uint64_t addr, uint64_t size)
{
    if (munmap((void *)(uintptr_t)addr, (size_t)size))
        return vram__fail(VRAM_EBACKEND, "host backend: releasing 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(errno));
    return 0;
}

static int host_map(void *self, uint64_t addr, uint64_t size)
{
    host *h = self;
    int rc = host_take(h, size);
    if (rc)
        return rc;
    if (mprotect((void *)(uintptr_t)addr, (size_t)size, PROT_READ | PROT_WRITE)) {
        host_give(h, size);
        return vram__fail(VRAM_ENOMEM, "host backend: mapping 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(errno));
    }
    return 0;
}

static int host_unmap(void *self, uint64_t addr, uint64_t size)
{
    host *h = self;
    void *p = (void *)(uintptr_t)addr;
    if (madvise(p, (size_t)size, MADV_DONTNEED) || mprotect(p, (size_t)size, PROT_NONE))
        return vram__fail(VRAM_EBACKEND, "host backend: unmapping 0x%llx+%llu failed: %s",
                          (unsigned long long)addr, (unsigned long long)size, strerror(errno));
    host_give(h, size);
    return 0;
}

static int host_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    host *h = self;
    pthread_mutex_lock(&h->lock);
    *free_bytes = h->capacity - h->used;
    *total = h->capacity;
    pthread_mutex_unlock(&h->lock);
    return 0;
}

static void host_destroy(void *self)
{
    host *h = self;
    pthread_mutex_destroy(&h->lock);
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
    pthread_mutex_init(&h->lock, NULL);
    h->capacity = capacity;
    h->granularity = granularity;
    *ops = &host_ops;
    *self = h;
    return 0;
}
