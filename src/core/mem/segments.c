/* src/core/mem/segments.c - the segments policy, after PyTorch's caching
 * allocator: small requests share small segments, medium requests share
 * medium segments, large requests get a segment of their own rounded to the
 * granularity; wholly free segments go back to the backend when room is
 * needed under the limit, when the backend runs out of memory, when the
 * decay thread finds them unused, and on trim. As in PyTorch's allocator,
 * the backend is called with the pool's lock held. Also the growth of the
 * vmm policy's huge blocks. */
#include "base/internal.h"
#include "json_internal.h"
#include "vramkit/log.h"
#include "pool_internal.h"

static uint64_t segment_size(const vram_pool *p, uint64_t size, int region)
{
    if (region == VRAM__HUGE) /* vmm huge blocks: rounded by the caller */
        return size;
    if (region == 0)
        return size <= p->segment_small ? p->segment_small : vram__align_up(size, p->granularity);
    if (size <= p->segment_medium / 2)
        return p->segment_medium;
    return vram__align_up(size, p->granularity);
}

static int segments_split(const vram_pool *p, const vram__block *b, uint64_t size)
{
    uint64_t rest = b->size - size;
    return b->region == 0 ? rest >= p->granule : rest > p->small_size;
}

int vram__segments_grow(vram_pool *p, uint64_t size, int region, vram_stream s)
{
    uint64_t seg = segment_size(p, size, region);
    uint64_t addr;
    p->st.backend_calls_total++;
    int rc = vram__backend_segment_alloc(p->backend, seg, s, &addr);
    if (rc == VRAM_ENOMEM) {
        p->st.backend_failures_total++;
        uint64_t released = 0;
        p->st.trims_total++;
        p->ops->give_back(p, UINT64_MAX, &released);
        if (released) {
            p->st.backend_calls_total++;
            rc = vram__backend_segment_alloc(p->backend, seg, s, &addr);
        }
        if (rc) {
            if (released)
                p->st.backend_failures_total++;
            return rc;
        }
    } else if (rc) {
        p->st.backend_failures_total++;
        return rc;
    }
    if (addr % p->granule) {
        p->st.backend_calls_total++;
        vram__backend_segment_free(p->backend, addr, seg, s);
        return vram__fail(VRAM_EBACKEND, "backend segment 0x%llx is not aligned to %llu",
                          (unsigned long long)addr, (unsigned long long)p->granule);
    }
    rc = vram__pool_add_span(p, addr, seg, region, NULL);
    if (rc) {
        p->st.backend_calls_total++;
        vram__backend_segment_free(p->backend, addr, seg, s);
        return rc;
    }
    vram__pool_reserved_add(p, seg);
    return 0;
}

int vram__segments_take_grown(vram_pool *p, uint64_t size, int region, vram__block **out)
{
    *out = vram__tlsf_take(&p->free[region], size);
    if (!*out) /* a new segment always fits its request */
        return vram__fail(VRAM_EBACKEND, "segment grown for %llu bytes does not fit them",
                          (unsigned long long)size);
    return 0;
}

static int segments_grow_take(vram_pool *p, uint64_t size, int region, vram_stream s,
                              vram__block **out)
{
    int rc = vram__pool_make_room(p, segment_size(p, size, region));
    if (!rc)
        rc = vram__segments_grow(p, size, region, s);
    if (!rc)
        rc = vram__segments_take_grown(p, size, region, out);
    return rc;
}

static int wholly_free(const vram__span *sp)
{
    return sp->head->state == VRAM__FREE && !sp->head->next;
}

/* Free wholly free segments that became free before `before_ms`, keeping
 * `keep` bytes of them, until `want` bytes went back. */
static int free_segments(vram_pool *p, uint64_t want, uint64_t keep, uint64_t before_ms,
                         uint64_t *released)
{
    uint64_t free_held = 0;
    vram__span *any = NULL;
    for (vram__span *sp = p->spans; sp; sp = sp->next)
        if (wholly_free(sp)) {
            free_held += sp->size;
            if (sp->ms < before_ms)
                any = sp;
        }
    if (!any || free_held <= keep)
        return 0; /* no segment may go */
    int settled = vram__streams_settle_solo(p);
    if (settled)
        return settled;
    int first_rc = 0;
    uint64_t done = 0;
    vram__span *sp = p->spans;
    while (sp && done < want && free_held > keep) {
        vram__span *next = sp->next;
        if (wholly_free(sp) && sp->ms < before_ms) {
            uint64_t size = sp->size;
            p->st.backend_calls_total++;
            int rc = vram__backend_segment_free(p->backend, sp->addr, size, NULL);
            if (rc) {
                p->st.backend_failures_total++;
                if (!first_rc)
                    first_rc = rc;
            } else {
                vram__pool_remove_span(p, sp);
                vram__pool_reserved_sub(p, size);
                p->st.released_bytes_total += size;
                free_held -= size;
                done += size;
                if (released)
                    *released += size;
            }
        }
        sp = next;
    }
    return first_rc;
}

static int segments_give_back(vram_pool *p, uint64_t want, uint64_t *released)
{
    return free_segments(p, want, 0, UINT64_MAX, released);
}

static uint64_t segments_decay(vram_pool *p, uint64_t before_ms, uint64_t *released)
{
    if (free_segments(p, UINT64_MAX, p->retain_min, before_ms, released)) {
        vram_log(VRAM_LOG_WARN, "pool \"%s\": could not give back a free segment: %s", p->name,
                  vram_last_error());
        return UINT64_MAX;
    }
    uint64_t oldest = UINT64_MAX, free_held = 0;
    for (vram__span *sp = p->spans; sp; sp = sp->next)
        if (wholly_free(sp)) {
            free_held += sp->size;
            if (sp->ms < oldest)
                oldest = sp->ms;
        }
    return free_held > p->retain_min ? oldest : UINT64_MAX;
}

static vram__block *segments_pick(vram_pool *p, vram__tlsf *index, uint64_t size)
{
    return vram__tlsf_take(index, size);
}

static vram__block *segments_take(vram_pool *p, uint64_t size, int region, int pressed)
{
    (void)pressed;
    return segments_pick(p, &p->free[region], size);
}

static int segments_needs_memory(const vram_pool *p, const vram__block *b, uint64_t size)
{
    (void)p, (void)b, (void)size;
    return 0; /* a free block lies in a segment held already */
}

static int segments_back(vram_pool *p, vram__block *b)
{
    (void)p, (void)b;
    return 0;
}

/* A segment wholly free from now: when, for the decay. */
static void segments_freed(vram_pool *p, uint64_t addr, uint64_t size, const vram__block *merged)
{
    (void)p, (void)addr, (void)size;
    if (!merged->prev && !merged->next)
        merged->span->ms = vram__now_ms();
}

static uint64_t segments_largest_free(vram_pool *p)
{
    uint64_t best = 0;
    for (int r = 0; r < VRAM__REGIONS; r++) {
        uint64_t l = vram__tlsf_largest(&p->free[r]);
        if (l > best)
            best = l;
    }
    return best;
}

static void segments_held_json(vram_pool *p, vram__json *j, vram__span *const *spans, size_t n)
{
    (void)p;
    for (size_t i = 0; i < n; i++)
        vram__snapshot_segment(j, spans[i]->addr, spans[i]->size, "segment");
}

static void segments_free_json(vram_pool *p, vram__json *j, const vram__block *b)
{
    vram__snapshot_block(p, j, b, b->addr, b->size);
}

static int segments_init(vram_pool *p)
{
    (void)p;
    return 0;
}

static int segments_destroy(vram_pool *p)
{
    int rc = segments_give_back(p, UINT64_MAX, NULL);
    if (rc)
        vram_log(VRAM_LOG_WARN, "pool \"%s\": the backend refused to free a segment: %s",
                  p->name, vram_last_error());
    return rc ? VRAM_EBACKEND : 0;
}

const vram__policy_ops vram__segments_ops = {
    .name = "segments",
    .init = segments_init,
    .destroy = segments_destroy,
    .take = segments_take,
    .pick = segments_pick,
    .grow = segments_grow_take,
    .split = segments_split,
    .needs_memory = segments_needs_memory,
    .back = segments_back,
    .freed = segments_freed,
    .give_back = segments_give_back,
    .decay = segments_decay,
    .largest_free = segments_largest_free,
    .held_json = segments_held_json,
    .free_json = segments_free_json,
};
