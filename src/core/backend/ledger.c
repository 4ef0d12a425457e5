/* src/core/backend/ledger.c - a built-in backend's books (see ledger.h). */
#include <stdlib.h>

#include "backend_internal.h"
#include "ledger.h"

int vram__ledger_init(vram__ledger *l, const char *name, uint64_t capacity, uint64_t granularity)
{
    *l = (vram__ledger){.name = name, .capacity = capacity, .granularity = granularity};
    if (vram__u64map_init(&l->segments, 64))
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&l->lock, NULL);
    return 0;
}

void vram__ledger_destroy(vram__ledger *l)
{
    for (size_t i = 0; i < l->n_ranges; i++)
        free(l->ranges[i].mapped);
    free(l->ranges);
    vram__u64map_destroy(&l->segments);
    pthread_mutex_destroy(&l->lock);
}

static int take_locked(vram__ledger *l, uint64_t size, const char *what)
{
    if (size > l->capacity - l->used) {
        char a[32], b[32], c[32];
        return vram__fail(VRAM_ENOMEM, "%s out of memory: %s of %s, %s of %s in use", l->name, what,
                          vram__fmt_bytes(a, sizeof a, size), vram__fmt_bytes(b, sizeof b, l->used),
                          vram__fmt_bytes(c, sizeof c, l->capacity));
    }
    l->used += size;
    return 0;
}

int vram__ledger_take(vram__ledger *l, uint64_t size, const char *what)
{
    if (!size)
        return vram__fail(VRAM_EINVAL, "%s: %s of 0 bytes", l->name, what);
    pthread_mutex_lock(&l->lock);
    int rc = take_locked(l, size, what);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

void vram__ledger_give(vram__ledger *l, uint64_t size)
{
    pthread_mutex_lock(&l->lock);
    l->used -= size;
    pthread_mutex_unlock(&l->lock);
}

int vram__ledger_segment_add(vram__ledger *l, uint64_t addr, uint64_t size)
{
    pthread_mutex_lock(&l->lock);
    int rc = vram__u64map_put(&l->segments, addr, size);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

int vram__ledger_segment_remove(vram__ledger *l, uint64_t addr, uint64_t size)
{
    uint64_t have;
    pthread_mutex_lock(&l->lock);
    int rc = 0;
    if (!vram__u64map_get(&l->segments, addr, &have))
        rc = vram__fail(VRAM_EINVAL, "%s: free of 0x%llx, which is not a segment", l->name,
                        (unsigned long long)addr);
    else if (have != size)
        rc = vram__fail(VRAM_EINVAL, "%s: free of segment 0x%llx with size %llu, allocated as %llu",
                        l->name, (unsigned long long)addr, (unsigned long long)size,
                        (unsigned long long)have);
    else {
        vram__u64map_del(&l->segments, addr, NULL);
        l->used -= size;
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

int vram__ledger_range_add(vram__ledger *l, uint64_t addr, uint64_t size)
{
    if (!size || size % l->granularity)
        return vram__fail(VRAM_EINVAL, "%s: reserve of %llu bytes, not a multiple of %llu", l->name,
                          (unsigned long long)size, (unsigned long long)l->granularity);
    uint64_t granules = size / l->granularity;
    uint64_t *bits = vram__calloc((size_t)((granules + 63) / 64) * 2, sizeof *bits);
    if (!bits)
        return VRAM_EHOSTMEM;
    pthread_mutex_lock(&l->lock);
    vram__ledger_range *r = vram__realloc_array(l->ranges, l->n_ranges + 1, sizeof *r);
    if (!r) {
        pthread_mutex_unlock(&l->lock);
        free(bits);
        return VRAM_EHOSTMEM;
    }
    l->ranges = r;
    l->ranges[l->n_ranges++] = (vram__ledger_range){addr, size, bits, bits + (granules + 63) / 64};
    pthread_mutex_unlock(&l->lock);
    return 0;
}

int vram__ledger_range_remove(vram__ledger *l, uint64_t addr, uint64_t size)
{
    pthread_mutex_lock(&l->lock);
    int rc = VRAM_EINVAL;
    for (size_t i = 0; i < l->n_ranges; i++) {
        vram__ledger_range *r = &l->ranges[i];
        if (r->addr != addr || r->size != size)
            continue;
        uint64_t words = (size / l->granularity + 63) / 64, mapped = 0;
        for (uint64_t w = 0; w < words; w++)
            mapped += (uint64_t)__builtin_popcountll(r->mapped[w]);
        if (mapped) {
            rc = vram__fail(VRAM_EBUSY, "%s: release of a range with %llu granules still mapped",
                            l->name, (unsigned long long)mapped);
            break;
        }
        free(r->mapped);
        l->ranges[i] = l->ranges[--l->n_ranges];
        rc = 0;
        break;
    }
    if (rc == VRAM_EINVAL)
        vram__fail(rc, "%s: release of 0x%llx+%llu, which is not a reservation", l->name,
                   (unsigned long long)addr, (unsigned long long)size);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* Check that every granule of [addr, addr+size) is (want=1) or is not
 * (want=0) mapped, then flip them. Lock held. */
static int flip(vram__ledger *l, uint64_t addr, uint64_t size, int want_mapped)
{
    const char *op = want_mapped ? "unmap" : "map";
    uint64_t g = l->granularity;
    if (!size || addr % g || size % g)
        return vram__fail(VRAM_EINVAL, "%s: %s of 0x%llx+%llu, not granule-aligned", l->name, op,
                          (unsigned long long)addr, (unsigned long long)size);
    vram__ledger_range *r = NULL;
    for (size_t i = 0; i < l->n_ranges && !r; i++) {
        vram__ledger_range *c = &l->ranges[i];
        if (addr >= c->addr && addr - c->addr < c->size && size <= c->size - (addr - c->addr))
            r = c;
    }
    if (!r)
        return vram__fail(VRAM_EINVAL, "%s: %s of 0x%llx+%llu outside any reservation", l->name, op,
                          (unsigned long long)addr, (unsigned long long)size);
    uint64_t first = (addr - r->addr) / g, n = size / g, end = first + n;
    for (uint64_t k = first; k < end; k++) {
        int is = (int)((r->mapped[k / 64] >> (k % 64)) & 1);
        if (is != want_mapped)
            return vram__fail(VRAM_EINVAL, "%s: %s of granule at 0x%llx, which is %s", l->name, op,
                              (unsigned long long)(r->addr + k * g),
                              is ? "already mapped" : "not mapped");
    }
#define BIT(a, k) (((a)[(k) / 64] >> ((k) % 64)) & 1)
    if (want_mapped) { /* unmapping: whole mappings only */
        uint64_t total = r->size / g;
        if (!BIT(r->starts, first) || (end < total && BIT(r->mapped, end) && !BIT(r->starts, end)))
            return vram__fail(VRAM_EINVAL,
                              "%s: unmap of 0x%llx+%llu covers part of a mapping (a mapping can "
                              "only be unmapped whole)",
                              l->name, (unsigned long long)addr, (unsigned long long)size);
        for (uint64_t k = first; k < end; k++)
            r->starts[k / 64] &= ~(1ull << (k % 64));
    } else {
        r->starts[first / 64] |= 1ull << (first % 64);
    }
#undef BIT
    for (uint64_t k = first; k < end; k++)
        r->mapped[k / 64] ^= 1ull << (k % 64);
    return 0;
}

int vram__ledger_map(vram__ledger *l, uint64_t addr, uint64_t size)
{
    pthread_mutex_lock(&l->lock);
    int rc = take_locked(l, size, "mapping");
    if (!rc) {
        rc = flip(l, addr, size, 0);
        if (rc)
            l->used -= size;
    }
    pthread_mutex_unlock(&l->lock);
    return rc;
}

int vram__ledger_unmap(vram__ledger *l, uint64_t addr, uint64_t size)
{
    pthread_mutex_lock(&l->lock);
    int rc = flip(l, addr, size, 1);
    if (!rc)
        l->used -= size;
    pthread_mutex_unlock(&l->lock);
    return rc;
}

void vram__ledger_mem_info(vram__ledger *l, uint64_t *free_bytes, uint64_t *total)
{
    pthread_mutex_lock(&l->lock);
    *free_bytes = l->capacity - l->used;
    *total = l->capacity;
    pthread_mutex_unlock(&l->lock);
}
