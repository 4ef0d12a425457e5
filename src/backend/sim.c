/* src/backend/sim.c - the simulated device: an address space and a capacity,
 * no bytes behind them. It checks its callers as a driver would (a segment
 * freed twice, a page mapped twice or unmapped while not mapped is refused),
 * which makes it the allocator's test bench and lets `vramkit replay` predict
 * a GPU's behaviour on any machine. Not thread-safe: pools call it under their
 * lock, and a backend shared by pools is serialised by its own mutex. */
#include <pthread.h>
#include <stdlib.h>

#include "backend_internal.h"
#include "base/u64map.h"

#define SIM_BASE 0x100000000000ull /* first address handed out (16 TiB) */

typedef struct sim_range {
    uint64_t addr, size;
    uint64_t *mapped; /* one bit per granule */
} sim_range;

typedef struct sim {
    pthread_mutex_t lock;
    uint64_t capacity, granularity;
    uint64_t used;      /* bytes of segments plus mapped granules */
    uint64_t next_addr; /* bump pointer: addresses are never reused */
    vram__u64map segments; /* base -> size */
    sim_range *ranges;
    size_t n_ranges;
} sim;

static int sim_take(sim *s, uint64_t size, const char *what)
{
    if (size > s->capacity - s->used) {
        char a[32], b[32], c[32];
        return vram__fail(VRAM_ENOMEM, "sim device out of memory: %s of %s, %s of %s in use", what,
                          vram__fmt_bytes(a, sizeof a, size), vram__fmt_bytes(b, sizeof b, s->used),
                          vram__fmt_bytes(c, sizeof c, s->capacity));
    }
    s->used += size;
    return 0;
}

static uint64_t sim_bump(sim *s, uint64_t size)
{
    uint64_t addr = s->next_addr;
    s->next_addr += vram__align_up(size ? size : 1, s->granularity);
    return addr;
}

static int sim_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    sim *s = self;
    if (!size)
        return vram__fail(VRAM_EINVAL, "sim: segment of 0 bytes");
    pthread_mutex_lock(&s->lock);
    int rc = sim_take(s, size, "segment");
    if (!rc) {
        uint64_t a = sim_bump(s, size);
        rc = vram__u64map_put(&s->segments, a, size);
        if (rc)
            s->used -= size;
        else
            *addr = a;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    sim *s = self;
    uint64_t have;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (!vram__u64map_get(&s->segments, addr, &have))
        rc = vram__fail(VRAM_EINVAL, "sim: free of 0x%llx, which is not a segment",
                        (unsigned long long)addr);
    else if (have != size)
        rc = vram__fail(VRAM_EINVAL, "sim: free of segment 0x%llx with size %llu, allocated as %llu",
                        (unsigned long long)addr, (unsigned long long)size,
                        (unsigned long long)have);
    else {
        vram__u64map_del(&s->segments, addr, NULL);
        s->used -= size;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_reserve(void *self, uint64_t size, uint64_t *addr)
{
    sim *s = self;
    if (!size || size % s->granularity)
        return vram__fail(VRAM_EINVAL, "sim: reserve of %llu bytes, not a multiple of %llu",
                          (unsigned long long)size, (unsigned long long)s->granularity);
    uint64_t granules = size / s->granularity;
    uint64_t *bits = vram__calloc((size_t)((granules + 63) / 64), sizeof *bits);
    if (!bits)
        return VRAM_EHOSTMEM;
    pthread_mutex_lock(&s->lock);
    sim_range *r = vram__realloc_array(s->ranges, s->n_ranges + 1, sizeof *r);
    if (!r) {
        pthread_mutex_unlock(&s->lock);
        free(bits);
        return VRAM_EHOSTMEM;
    }
    s->ranges = r;
    uint64_t a = sim_bump(s, size);
    s->ranges[s->n_ranges++] = (sim_range){a, size, bits};
    *addr = a;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static sim_range *sim_find(sim *s, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < s->n_ranges; i++) {
        sim_range *r = &s->ranges[i];
        if (addr >= r->addr && addr - r->addr < r->size && size <= r->size - (addr - r->addr))
            return r;
    }
    return NULL;
}

static int sim_release(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    pthread_mutex_lock(&s->lock);
    int rc = VRAM_EINVAL;
    for (size_t i = 0; i < s->n_ranges; i++) {
        sim_range *r = &s->ranges[i];
        if (r->addr != addr || r->size != size)
            continue;
        uint64_t words = (size / s->granularity + 63) / 64;
        uint64_t mapped = 0;
        for (uint64_t w = 0; w < words; w++)
            mapped += (uint64_t)__builtin_popcountll(r->mapped[w]);
        if (mapped) {
            rc = vram__fail(VRAM_EBUSY, "sim: release of a range with %llu granules still mapped",
                            (unsigned long long)mapped);
            break;
        }
        free(r->mapped);
        s->ranges[i] = s->ranges[--s->n_ranges];
        rc = 0;
        break;
    }
    if (rc == VRAM_EINVAL)
        vram__fail(rc, "sim: release of 0x%llx+%llu, which is not a reservation",
                   (unsigned long long)addr, (unsigned long long)size);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Check that every granule of [addr, addr+size) is (want=1) or is not (want=0)
 * mapped; then flip them. */
static int sim_flip(sim *s, uint64_t addr, uint64_t size, int want_mapped)
{
    const char *op = want_mapped ? "unmap" : "map";
    if (!size || addr % s->granularity || size % s->granularity)
        return vram__fail(VRAM_EINVAL, "sim: %s of 0x%llx+%llu, not granule-aligned", op,
                          (unsigned long long)addr, (unsigned long long)size);
    sim_range *r = sim_find(s, addr, size);
    if (!r)
        return vram__fail(VRAM_EINVAL, "sim: %s of 0x%llx+%llu outside any reservation", op,
                          (unsigned long long)addr, (unsigned long long)size);
    uint64_t first = (addr - r->addr) / s->granularity, n = size / s->granularity;
    for (uint64_t g = first; g < first + n; g++) {
        int is = (int)((r->mapped[g / 64] >> (g % 64)) & 1);
        if (is != want_mapped)
            return vram__fail(VRAM_EINVAL, "sim: %s of granule at 0x%llx, which is %s", op,
                              (unsigned long long)(r->addr + g * s->granularity),
                              is ? "already mapped" : "not mapped");
    }
    for (uint64_t g = first; g < first + n; g++)
        r->mapped[g / 64] ^= 1ull << (g % 64);
    return 0;
}

static int sim_map(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    pthread_mutex_lock(&s->lock);
    int rc = sim_take(s, size, "mapping");
    if (!rc) {
        rc = sim_flip(s, addr, size, 0);
        if (rc)
            s->used -= size;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_unmap(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    pthread_mutex_lock(&s->lock);
    int rc = sim_flip(s, addr, size, 1);
    if (!rc)
        s->used -= size;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sim_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    sim *s = self;
    pthread_mutex_lock(&s->lock);
    *free_bytes = s->capacity - s->used;
    *total = s->capacity;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void sim_destroy(void *self)
{
    sim *s = self;
    for (size_t i = 0; i < s->n_ranges; i++)
        free(s->ranges[i].mapped);
    free(s->ranges);
    vram__u64map_destroy(&s->segments);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static const vram_backend_ops sim_ops = {
    .name = "sim",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP,
    .segment_alloc = sim_segment_alloc,
    .segment_free = sim_segment_free,
    .reserve = sim_reserve,
    .release = sim_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .mem_info = sim_mem_info,
    .destroy = sim_destroy,
};

int vram__backend_sim_new(uint64_t capacity, uint64_t granularity, const vram_backend_ops **ops,
                          void **self)
{
    sim *s = vram__calloc(1, sizeof *s);
    if (!s)
        return VRAM_EHOSTMEM;
    if (vram__u64map_init(&s->segments, 64)) {
        free(s);
        return VRAM_EHOSTMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->capacity = capacity;
    s->granularity = granularity;
    s->next_addr = SIM_BASE;
    *ops = &sim_ops;
    *self = s;
    return 0;
}
