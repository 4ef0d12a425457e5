/* src/core/mem/tlsf.h - the free index: two-level segregated fit (TLSF). Free
 * blocks are kept in lists by size class (a power-of-two first level split
 * into 32 linear second-level classes, in units of 256 bytes), with bitmaps
 * so that finding a class with a block that fits is O(1). Within the exact
 * class of a request a few blocks are examined for the best fit before
 * falling back to the next class up, where every block fits; only when no
 * class above has a block is the request's own class searched to its end. */
#ifndef VRAM_MEM_TLSF_H
#define VRAM_MEM_TLSF_H

#include <stdint.h>

#include "block.h"

#define VRAM__TLSF_SL_BITS 5
#define VRAM__TLSF_SL (1u << VRAM__TLSF_SL_BITS)
#define VRAM__TLSF_FL 48
#define VRAM__TLSF_UNIT_SHIFT 8 /* class units of 256 bytes */

typedef struct vram__tlsf {
    uint64_t fl_bitmap;
    uint32_t sl_bitmap[VRAM__TLSF_FL];
    vram__block *heads[VRAM__TLSF_FL][VRAM__TLSF_SL];
    uint64_t n_free;
} vram__tlsf;

void vram__tlsf_insert(vram__tlsf *t, vram__block *b);
void vram__tlsf_remove(vram__tlsf *t, vram__block *b);

/* A free block of at least `size` bytes (any size; classes count in units
 * of 256 bytes), removed from the index; NULL only if no free block is that
 * large. */
vram__block *vram__tlsf_take(vram__tlsf *t, uint64_t size);

/* The first of at most `max_seen` free blocks of at least `size` bytes,
 * smallest classes first, that `accept` takes, removed from the index; NULL
 * when none of them is accepted. */
vram__block *vram__tlsf_take_if(vram__tlsf *t, uint64_t size,
                                int (*accept)(void *ctx, const vram__block *b), void *ctx,
                                unsigned max_seen);

/* Of the first `candidates` free blocks of at least `size` bytes, smallest
 * classes first, the one at the lowest address, removed from the index
 * (address order packs live blocks toward the start of a range, as first
 * fit does, at the cost of a few more blocks looked at); with 0 or 1, or
 * none of them fitting, as vram__tlsf_take. */
vram__block *vram__tlsf_take_lowest(vram__tlsf *t, uint64_t size, unsigned candidates);

/* The largest free block's size (scans the highest non-empty class). */
uint64_t vram__tlsf_largest(const vram__tlsf *t);

/* Call fn on every free block. */
void vram__tlsf_each(const vram__tlsf *t, void (*fn)(void *ctx, vram__block *b), void *ctx);

#endif
