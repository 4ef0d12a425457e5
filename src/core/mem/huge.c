/* src/core/mem/huge.c - the vmm policy's huge blocks. A request of at least
 * huge_size bytes is rounded up to the granularity and gets a segment of its
 * own from the backend: mapped whole, in one call, and given back whole, in
 * one call. Mapping costs about the same for 2 MiB or 128 MiB on an H200, so
 * one mapping per huge block instead of one per granule saves calls;
 * rounding costs at most one granule per block (under 2% of the peak on the
 * shared traces at 16 MiB). Off by default: a segment serves only requests of
 * about its size, so the placement of the large region, which reuses freed
 * granules for any size, holds less. A free huge segment stays mapped for a
 * later request it fits with little waste (at most 1/8 more than asked),
 * until room is needed under the limit, the decay thread finds it unused, or
 * a trim, oldest first. Segments are taken and given back with the lock
 * held (one call each). */

#include "pool_internal.h"

#define HUGE_CANDIDATES 32

static void lru_push(vram_pool *p, vram__span *sp)
{
    sp->lnext = NULL;
    sp->lprev = p->huge_tail;
    if (p->huge_tail)
        p->huge_tail->lnext = sp;
    else
        p->huge_head = sp;
    p->huge_tail = sp;
    sp->cached = 1;
    sp->stamp = p->solo_freed;
    sp->ms = vram__now_ms();
    p->huge_free += sp->size;
}

static void lru_remove(vram_pool *p, vram__span *sp)
{
    if (sp->lprev)
        sp->lprev->lnext = sp->lnext;
    else
        p->huge_head = sp->lnext;
    if (sp->lnext)
        sp->lnext->lprev = sp->lprev;
    else
        p->huge_tail = sp->lprev;
    sp->lprev = sp->lnext = NULL;
    sp->cached = 0;
    p->huge_free -= sp->size;
}

int vram__huge_fits(void *size, const vram__block *b)
{
    uint64_t want = *(const uint64_t *)size;
    return b->size >= want && b->size - want <= want / 8;
}

vram__block *vram__huge_take_free(vram_pool *p, uint64_t size)
{
    vram__block *b = vram__tlsf_take_if(&p->free[VRAM__HUGE], size, vram__huge_fits, &size,
                                       HUGE_CANDIDATES);
    if (b && b->span->cached)
        lru_remove(p, b->span);
    return b;
}

int vram__huge_grow(vram_pool *p, uint64_t size, vram_stream s, vram__block **out)
{
    int rc = vram__pool_make_room(p, size);
    if (rc)
        return rc;
    vram__streams_mark(p); /* a mapping costs a hundred times more */
    rc = vram__segments_grow(p, size, VRAM__HUGE, s);
    if (rc)
        return rc;
    return vram__segments_take_grown(p, size, VRAM__HUGE, out);
}

void vram__huge_freed(vram_pool *p, vram__block *b)
{
    lru_push(p, b->span);
}

int vram__huge_release(vram_pool *p, uint64_t want, uint64_t keep, uint64_t before_ms,
                       uint64_t *released)
{
    uint64_t done = 0;
    while (done < want && p->huge_free > keep && p->huge_head && p->huge_head->ms < before_ms) {
        vram__span *sp = p->huge_head;
        uint64_t size = sp->size;
        int rc = vram__streams_settle_upto(p, sp->stamp);
        if (rc)
            return rc;
        p->st.backend_calls_total++;
        rc = vram__backend_segment_free(p->backend, sp->addr, size, NULL);
        if (rc) {
            p->st.backend_failures_total++;
            return rc;
        }
        lru_remove(p, sp);
        vram__pool_remove_span(p, sp);
        vram__pool_reserved_sub(p, size);
        p->st.released_bytes_total += size;
        done += size;
        if (released)
            *released += size;
    }
    return 0;
}
