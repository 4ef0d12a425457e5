/* src/core/mem/place.c - placement, the same for every policy: take a free block
 * (the policy chooses it, among the shared free space and, with events, the
 * allocating stream's own frees), let frees whose work completed join first
 * when it would need new memory, grow when none fits, split off the rest,
 * back it with memory; return one (coalescing with free neighbours in its
 * span, telling the policy). Also the limit: room made before new memory. */
#include <stdlib.h>
#include <time.h>

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

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Before taking new memory for `size` (b: the block found, which needs
 * some, or NULL), let frees whose stream work completed join the free
 * space, and take again. Events are recorded for the frees not yet covered
 * by one; an event recorded behind little work completes within
 * microseconds, while a mapping costs tens of them and, below the limit,
 * holds its memory for good; so while the frees waiting could serve the
 * request, the events are asked again for up to RECLAIM_WAIT_US, about what
 * the mapping would cost, before new memory is taken. Where the device can
 * wait for them instead (p->stream_waits), they are asked once: the caller
 * takes a waiting free then, at the cost of a queued wait. */
#define RECLAIM_WAIT_US 40
static vram__block *take_reclaiming(vram_pool *p, uint64_t size, int region, int pressed,
                                    vram__block *b)
{
    const vram__policy_ops *ops = p->ops;
    if (b)
        vram__tlsf_insert(&p->free[region], b);
    vram__streams_reclaim(p, 0); /* records, then queries */
    uint64_t t0 = now_us();
    int failed = 0;
    for (;;) {
        b = ops->take(p, size, region, pressed);
        if (b && !ops->needs_memory(p, b, size))
            return b;
        if (failed || p->stream_waits || p->st.pending_bytes < size ||
            now_us() - t0 >= RECLAIM_WAIT_US)
            return b;
        if (b)
            vram__tlsf_insert(&p->free[region], b);
        vram__streams_poll(p, &failed);
    }
}

/* Whether placing `size` bytes at free block `b` carves it loosely: more
 * than an eighth of them (or 4 KiB) would be left over. */
static int fits_loosely(const vram__block *b, uint64_t size)
{
    return b->size - size > (size / 8 > 4096 ? size / 8 : 4096);
}

/* With events and several streams (reclaim_large, VRAM_STREAM_RECLAIM=
 * large, the default): before a request of reclaim_min bytes or more lands
 * on new memory or carves a block much larger than itself, frees whose work
 * completed rejoin the shared free space (an event recorded on each stream
 * with frees since its last, then the events queried), so that it is placed
 * among all that is free, as if they had rejoined at once: each stream's
 * frees, apart, cannot coalesce with the others', and large blocks then
 * scatter. It costs an event record and query per stream each time, so it
 * is kept to the requests whose loose placement costs the most memory:
 * 16 MiB or more by default (bench/results/stream-reclaim.md). */
static vram__block *take_rejoined(vram_pool *p, uint64_t size, int region, int pressed,
                                  vram__block *b)
{
    if (!p->reclaim_large || !p->shared_streams || region == 0 || size < p->reclaim_min ||
        !p->st.pending_bytes ||
        (b && !p->ops->needs_memory(p, b, size) && !fits_loosely(b, size)))
        return b;
    if (b)
        vram__tlsf_insert(&p->free[region], b);
    vram__streams_reclaim(p, 0);
    return p->ops->take(p, size, region, pressed);
}

int vram__pool_take(vram_pool *p, uint64_t size, int region, vram_stream s, int pressed,
                    vram__stream_state *ss, vram__block **out)
{
    if (vram__block_reserve(&p->slab))
        return VRAM_EHOSTMEM;
    const vram__policy_ops *ops = p->ops;
    vram__block *b = ops->take(p, size, region, pressed);
    if (ss) {
        b = take_rejoined(p, size, region, pressed, b);
        /* The stream's own frees compete with the shared free space by
         * address, as free blocks do in the policy's placement; they win
         * where the shared one would need new memory. */
        vram__block *own = vram__stream_pick_own(p, ss, size, region);
        if (own && (!b || ops->needs_memory(p, b, size) || own->addr < b->addr)) {
            if (b)
                vram__tlsf_insert(&p->free[region], b);
            *out = vram__stream_claim_own(p, ss, own, size);
            return 0;
        }
        if (own)
            vram__stream_unpick(ss, own);
    }
    if (p->has_events && p->st.pending_bytes && (!b || ops->needs_memory(p, b, size))) {
        b = take_reclaiming(p, size, region, pressed, b);
        /* Another stream's frees, waited for on the device, before new
         * memory. */
        vram__block *theirs;
        if (ss && (!b || ops->needs_memory(p, b, size)) &&
            vram__stream_take_waiting(p, ss, size, region, &theirs) == 0) {
            if (b)
                vram__tlsf_insert(&p->free[region], b);
            *out = theirs;
            return 0;
        }
    }
    if (!b) {
        int rc = ops->grow(p, size, region, s, &b);
        if (rc)
            return rc;
    }
    if (ops->split(p, b, size)) {
        if (vram__block_reserve(&p->slab)) { /* the new segment took the spare */
            vram__pool_release(p, b);
            return VRAM_EHOSTMEM;
        }
        split(p, b, size);
    }
    b->state = VRAM__LIVE;
    int rc = ops->back(p, b);
    if (rc) {
        vram__pool_release(p, b);
        return rc;
    }
    *out = b;
    return 0;
}

int vram__pool_make_room(vram_pool *p, uint64_t need)
{
    vram_pool_stats *st = &p->st;
    int rc = 0;
    while (st->reserved_bytes + need > p->limit) {
        uint64_t released = 0;
        rc = p->ops->give_back(p, st->reserved_bytes + need - p->limit, &released);
        if (rc || st->reserved_bytes + need <= p->limit || !p->unmapping_bytes)
            break;
        /* Another thread is giving memory back: it counts as held until
         * its call returns. */
        while (p->unmapping_bytes && st->reserved_bytes + need > p->limit)
            pthread_cond_wait(&p->settled, &p->lock);
    }
    if (st->reserved_bytes + need <= p->limit)
        return 0;
    if (rc)
        return rc;
    /* What is held and cannot go back: live blocks with their rounding to
     * granules or segments, frees waiting for their stream, memory being
     * mapped by other threads, and free memory sharing a mapping with live
     * blocks. */
    uint64_t used = st->allocated_bytes + st->pending_bytes;
    uint64_t moving = p->busy_bytes + p->unmapping_bytes;
    uint64_t rounding = st->reserved_bytes > used + moving ? st->reserved_bytes - used - moving : 0;
    char n[32], l[32], h[32], a[32], r[32], pe[32], b[32], bz[32];
    return vram__fail(VRAM_ENOMEM,
                      "%s of %s%s is reached: %s more is needed, "
                      "%s is held (%s live, %s in blocks, %s free that cannot go back, %s "
                      "waiting for streams, %s being mapped or given back)",
                      p->limit_given ? "the pool's limit" : "out of memory: the device's free memory",
                      vram__fmt_bytes(l, sizeof l, p->limit),
                      p->limit_given ? " (VRAM_POOL_LIMIT)" : " when the pool was made, its limit",
                      vram__fmt_bytes(n, sizeof n, need),
                      vram__fmt_bytes(h, sizeof h, st->reserved_bytes),
                      vram__fmt_bytes(a, sizeof a, st->live_bytes),
                      vram__fmt_bytes(b, sizeof b, st->allocated_bytes),
                      vram__fmt_bytes(r, sizeof r, rounding),
                      vram__fmt_bytes(pe, sizeof pe, st->pending_bytes),
                      vram__fmt_bytes(bz, sizeof bz, moving));
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
    p->ops->freed(p, addr, size, b);
}
