/* src/core/mem/block.h - block descriptors: the host-side record of one range of a
 * pool's address space (live, waiting for a stream event, or free), linked to
 * its address neighbours and, when free, into the free index. Device memory is
 * never touched: there are no in-band headers. Descriptors come from a slab so
 * allocation on the hot path does not call malloc. */
#ifndef VRAM_MEM_BLOCK_H
#define VRAM_MEM_BLOCK_H

#include <stdint.h>

#include "vramkit/types.h"

enum { VRAM__FREE = 0, VRAM__LIVE = 1, VRAM__PENDING = 2 };

typedef struct vram__block vram__block;
struct vram__block {
    uint64_t addr;
    uint64_t size;      /* bytes of the range */
    uint64_t requested; /* live: bytes asked for */
    vram__block *prev, *next;   /* address neighbours within one span (NULL at its ends) */
    vram__block *fprev, *fnext; /* free: free-list links; pending: pending-list link
                                   (with events: links of the stream's own index) */
    vram__block *pprev, *pnext; /* pending with events: the stream's list, oldest first */
    vram_stream stream;         /* live: allocated on; pending: freed on */
    uint64_t seq;               /* pending: the stream's sequence number at the free */
    struct vram__span *span;    /* the segment or reservation holding it */
    uint32_t owner;
    uint8_t kind;
    uint8_t state;
    uint8_t region; /* 0 small, 1 large */
};

/* A contiguous range obtained from the backend: a segment, or a reservation. */
typedef struct vram__span {
    uint64_t addr, size;
    vram__block *head; /* lowest block; its descriptor never changes */
    struct vram__span *prev, *next;
    struct vram__span *lprev, *lnext; /* vmm: free segments of huge blocks, oldest first */
    uint64_t stamp;                   /* vmm: when it became free (solo epoch) */
    uint64_t ms;                      /* when it became wholly free (monotonic ms) */
    uint8_t cached;                   /* vmm: in that list */
    uint8_t region;
} vram__span;

/* Descriptor slab: chunks of descriptors and a free list. */
typedef struct vram__block_slab {
    vram__block *free_list;
    void **chunks;
    size_t n_chunks;
    uint64_t in_use;
} vram__block_slab;

/* Make sure at least one descriptor is available, so that the next
 * vram__block_new() cannot fail. Returns 0 or VRAM_EHOSTMEM. */
int vram__block_reserve(vram__block_slab *slab);

static inline vram__block *vram__block_new(vram__block_slab *slab)
{
    vram__block *b = slab->free_list;
    slab->free_list = b->fnext;
    slab->in_use++;
    return b;
}

static inline void vram__block_put(vram__block_slab *slab, vram__block *b)
{
    b->fnext = slab->free_list;
    slab->free_list = b;
    slab->in_use--;
}

void vram__block_slab_destroy(vram__block_slab *slab);

#endif
