/* src/core/mem/segments.c - the segments policy's backend side, after PyTorch's
 * caching allocator: small requests share small segments, medium requests
 * share medium segments, large requests get a segment of their own rounded
 * to the granularity; free segments go back to the backend on trim or when
 * the backend runs out of memory. */
#include "base/internal.h"
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

int vram__segments_should_split(const vram_pool *p, const vram__block *b, uint64_t size)
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
        vram__segments_trim(p, &released);
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

int vram__segments_grow_take(vram_pool *p, uint64_t size, int region, vram_stream s,
                             vram__block **out)
{
    int rc = vram__segments_grow(p, size, region, s);
    if (rc)
        return rc;
    *out = vram__tlsf_take(&p->free[region], size);
    if (!*out) /* a new segment always fits its request */
        return vram__fail(VRAM_EBACKEND, "segment grown for %llu bytes does not fit them",
                          (unsigned long long)size);
    return 0;
}

int vram__segments_trim(vram_pool *p, uint64_t *released)
{
    if (p->policy == VRAM_POLICY_VMM) /* its segments are the huge blocks' */
        return vram__huge_release(p, 0, released);
    vram__span *any = p->spans;
    while (any && !(any->head->state == VRAM__FREE && !any->head->next))
        any = any->next;
    if (!any)
        return 0; /* no segment is wholly free */
    int settled = vram__streams_settle_solo(p);
    if (settled)
        return settled;
    int first_rc = 0;
    vram__span *sp = p->spans;
    while (sp) {
        vram__span *next = sp->next;
        vram__block *h = sp->head;
        if (h->state == VRAM__FREE && !h->next) {
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
                if (released)
                    *released += size;
            }
        }
        sp = next;
    }
    return first_rc;
}
