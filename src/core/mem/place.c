/* src/core/mem/place.c - placement: taking a block from the free index (splitting
 * it, backing it with memory under vmm, growing by a segment under segments)
 * and returning one (coalescing with free neighbours in the same span). */
#include <stdlib.h>

#include "pool_internal.h"

int vram__pool_add_span(vram_pool *p, uint64_t addr, uint64_t size, int region,
                        vram__span **out)
{
    if (vram__block_reserve(&p->slab))
        return VRAM_EHOSTMEM;
    vram__span *sp = vram__calloc(1, sizeof *sp);
    if (!sp)
        return VRAM_EHOSTMEM;
    vram__block *b = vram__block_new(&p->slab);
    *b = (vram__block){.addr = addr, .size = size, .span = sp, .region = (uint8_t)region,
                       .state = VRAM__FREE};
    sp->addr = addr;
    sp->size = size;
    sp->head = b;
    sp->region = (uint8_t)region;
    sp->next = p->spans;
    if (p->spans)
        p->spans->prev = sp;
    p->spans = sp;
    p->n_spans++;
    vram__tlsf_insert(&p->free[region], b);
    if (out)
        *out = sp;
    return 0;
}

/* The span must hold one free block only. */
void vram__pool_remove_span(vram_pool *p, vram__span *sp)
{
    vram__tlsf_remove(&p->free[sp->region], sp->head);
    vram__block_put(&p->slab, sp->head);
    if (sp->prev)
        sp->prev->next = sp->next;
    else
        p->spans = sp->next;
    if (sp->next)
        sp->next->prev = sp->prev;
    p->n_spans--;
    free(sp);
}

vram__block *vram__block_merge(vram_pool *p, vram__block *left, vram__block *right)
{
    left->size += right->size;
    left->next = right->next;
    if (right->next)
        right->next->prev = left;
    vram__block_put(&p->slab, right);
    return left;
}

vram__block *vram__block_cut(vram_pool *p, vram__block *b, uint64_t size)
{
    vram__block *rest = vram__block_new(&p->slab);
    *rest = (vram__block){.addr = b->addr + size, .size = b->size - size, .prev = b,
                          .next = b->next, .span = b->span, .region = b->region};
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = size;
    return rest;
}

/* Cut `b` to `size` bytes; the rest becomes a free block after it. The slab
 * has a descriptor reserved. */
static void split(vram_pool *p, vram__block *b, uint64_t size)
{
    vram__block *rest = vram__block_cut(p, b, size);
    rest->state = VRAM__FREE;
    vram__tlsf_insert(&p->free[b->region], rest);
}

static int should_split(const vram_pool *p, const vram__block *b, uint64_t size)
{
    if (p->policy == VRAM_POLICY_SEGMENTS)
        return vram__segments_should_split(p, b, size);
    return b->size - size >= p->granule;
}

/* A free block for `size` from the shared index, or NULL. Under vmm with
 * mappings of several granules, large blocks go where memory is mapped
 * already if a few candidates allow (a mapping is given back only whole, so
 * placing beside the old ones strands less than new mappings); with one
 * granule per mapping the good fit of the index packs tighter. `pressed`
 * (retrying after the backend refused): where the fewest granules are missing. */
static vram__block *find_free(vram_pool *p, uint64_t size, int region, int pressed)
{
    vram__block *b = NULL;
    if (p->policy == VRAM_POLICY_VMM && pressed)
        b = vram__vmm_take_least_unmapped(p, size, region);
    else if (p->policy == VRAM_POLICY_VMM && p->map_chunk > 1 && region == 1 &&
             p->free_mapped >= size)
        b = vram__vmm_take_mapped(p, size, region);
    if (!b)
        b = vram__tlsf_take(&p->free[region], size);
    return b;
}

/* Would placing `size` bytes at `b` take new memory from the backend? */
static int needs_memory(const vram_pool *p, const vram__block *b, uint64_t size)
{
    if (!b)
        return 1; /* segments: a new segment */
    return p->policy == VRAM_POLICY_VMM && vram__vmm_unmapped_in(p, b, size);
}

int vram__pool_take(vram_pool *p, uint64_t size, int region, vram_stream s, int pressed,
                    vram__block **out)
{
    if (vram__block_reserve(&p->slab))
        return VRAM_EHOSTMEM;
    if (region == VRAM__HUGE)
        return vram__huge_take(p, size, s, out);
    vram__block *b = find_free(p, size, region, pressed);
    if (p->has_events && p->st.pending_bytes && needs_memory(p, b, size)) {
        /* Before taking new memory, let frees whose work completed join. */
        if (b)
            vram__tlsf_insert(&p->free[region], b);
        if (vram__streams_reclaim(p, 0))
            b = find_free(p, size, region, pressed);
        else if (b)
            vram__tlsf_remove(&p->free[region], b);
    }
    if (!b) {
        if (p->policy == VRAM_POLICY_VMM) {
            char a[32], c[32];
            return vram__fail(VRAM_ENOMEM,
                              "no free range of %s in the %s virtual reservation of %s",
                              vram__fmt_bytes(a, sizeof a, size), region ? "large" : "small",
                              vram__fmt_bytes(c, sizeof c, p->vmm[region].span->size));
        }
        int rc = vram__segments_grow_take(p, size, region, s, &b);
        if (rc)
            return rc;
    }
    if (should_split(p, b, size)) {
        if (vram__block_reserve(&p->slab)) { /* the new segment took the spare */
            vram__pool_release(p, b);
            return VRAM_EHOSTMEM;
        }
        split(p, b, size);
    }
    b->state = VRAM__LIVE;
    if (p->policy == VRAM_POLICY_VMM) {
        int rc = vram__vmm_back(p, b);
        if (rc) {
            vram__pool_release(p, b);
            return rc;
        }
    }
    *out = b;
    return 0;
}

void vram__pool_release(vram_pool *p, vram__block *b)
{
    uint64_t addr = b->addr, size = b->size;
    vram__tlsf *t = &p->free[b->region];
    b->state = VRAM__FREE;
    vram__block *prev = b->prev, *next = b->next;
    if (prev && prev->state == VRAM__FREE) {
        vram__tlsf_remove(t, prev);
        b = vram__block_merge(p, prev, b);
    }
    if (next && next->state == VRAM__FREE) {
        vram__tlsf_remove(t, next);
        vram__block_merge(p, b, next);
    }
    vram__tlsf_insert(t, b);
    if (p->policy != VRAM_POLICY_VMM)
        return;
    if (b->region == VRAM__HUGE)
        vram__huge_freed(p, b);
    else
        vram__vmm_block_freed(p, addr, size, b);
}
