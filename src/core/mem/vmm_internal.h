/* src/core/mem/vmm_internal.h - what the files of the vmm policy share: granule
 * addresses, the lists threaded through the per-granule tables (free granules
 * and wholly free chunks, each oldest first) and the policy's entry points
 * that live outside vmm.c. Lock held in all of them. */
#ifndef VRAM_MEM_VMM_INTERNAL_H
#define VRAM_MEM_VMM_INTERNAL_H

#include "pool_internal.h"

/* The per-granule int32 tables, allocated and freed together. */
#define VRAM__VMM_ARRAYS(p)                                                                        \
    &(p)->lru_prev, &(p)->lru_next, &(p)->chunk_of, &(p)->chunk_len, &(p)->chunk_free,             \
        &(p)->clru_prev, &(p)->clru_next

static inline int vram__page_region(const vram_pool *p, int64_t gi)
{
    return (uint64_t)gi >= p->vmm[1].page0;
}

static inline uint64_t vram__page_addr(const vram_pool *p, int64_t gi)
{
    int r = vram__page_region(p, gi);
    return p->vmm[r].span->addr + ((uint64_t)gi - p->vmm[r].page0) * p->granularity;
}

/* Pages [first, last] of [addr, addr+size) in region r, as page table indices. */
static inline void vram__page_range(const vram_pool *p, int r, uint64_t addr, uint64_t size,
                                    uint64_t *first, uint64_t *last)
{
    uint64_t base = p->vmm[r].span->addr;
    *first = p->vmm[r].page0 + (addr - base) / p->granularity;
    *last = p->vmm[r].page0 + (addr + size - 1 - base) / p->granularity;
}

/* A doubly linked list threaded through per-granule arrays. */
typedef struct vram__list {
    int32_t *prev, *next, *head, *tail;
} vram__list;

static inline vram__list vram__granules(vram_pool *p)
{
    return (vram__list){p->lru_prev, p->lru_next, &p->lru_head, &p->lru_tail};
}

static inline vram__list vram__chunks(vram_pool *p)
{
    return (vram__list){p->clru_prev, p->clru_next, &p->clru_head, &p->clru_tail};
}

static inline void vram__list_push(vram__list l, int32_t gi)
{
    l.prev[gi] = *l.tail;
    l.next[gi] = VRAM__NO_PAGE;
    if (*l.tail != VRAM__NO_PAGE)
        l.next[*l.tail] = gi;
    else
        *l.head = gi;
    *l.tail = gi;
}

static inline void vram__list_remove(vram__list l, int32_t gi)
{
    int32_t pr = l.prev[gi], nx = l.next[gi];
    if (pr != VRAM__NO_PAGE)
        l.next[pr] = nx;
    else
        *l.head = nx;
    if (nx != VRAM__NO_PAGE)
        l.prev[nx] = pr;
    else
        *l.tail = pr;
}

/* vmm.c: a mapped granule becomes free (joining the lists). */
void vram__granule_freed(vram_pool *p, int32_t gi);

/* vmm_release.c: the policy's give_back and decay. */
int vram__vmm_give_back(vram_pool *p, uint64_t want, uint64_t *released);
uint64_t vram__vmm_decay(vram_pool *p, uint64_t before_ms, uint64_t *released);

#endif
