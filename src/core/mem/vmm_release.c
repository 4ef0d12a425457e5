/* src/core/mem/vmm_release.c - the vmm policy giving memory back: wholly free
 * chunks are unmapped oldest first, the lock released during each call (the
 * chunk's granules are busy meanwhile), when room is needed under the
 * limit, when the decay thread finds them unused, on trim and at destroy.
 * Free huge segments go back before chunks. */
#include "base/internal.h"
#include "vramkit/log.h"
#include "pool_internal.h"
#include "vmm_internal.h"

/* Take wholly free chunk c out of the free lists, its granules busy. */
static void chunk_take_busy(vram_pool *p, int32_t c)
{
    vram__list_remove(vram__chunks(p), c);
    for (int32_t k = c; k < c + p->chunk_len[c]; k++) {
        vram__list_remove(vram__granules(p), k);
        p->free_mapped -= p->granularity;
        p->page_state[k] = VRAM__PAGE_BUSY;
    }
}

/* The unmap of chunk c failed: it is free again (the newest free chunk). */
static void chunk_back_free(vram_pool *p, int32_t c)
{
    for (int32_t k = c; k < c + p->chunk_len[c]; k++) {
        p->page_state[k] = VRAM__PAGE_FREE;
        vram__list_push(vram__granules(p), k);
        p->free_mapped += p->granularity;
    }
    vram__list_push(vram__chunks(p), c);
}

int vram__vmm_unmap_free(vram_pool *p, uint64_t want, uint64_t keep, uint64_t before_ms,
                         uint64_t *released)
{
    uint64_t done = 0;
    while (done < want && p->free_mapped > keep && p->clru_head != VRAM__NO_PAGE) {
        int32_t c = p->clru_head;
        if (p->chunk_ms[c] >= before_ms)
            break; /* the list is oldest first */
        int rc = vram__streams_settle_upto(p, p->chunk_stamp[c]);
        if (rc)
            return rc;
        if (p->clru_head != c)
            continue;
        uint64_t bytes = (uint64_t)p->chunk_len[c] * p->granularity;
        chunk_take_busy(p, c);
        p->unmapping_bytes += bytes;
        p->st.backend_calls_total++;
        vram__pool_unlock(p);
        rc = vram__backend_unmap(p->backend, vram__page_addr(p, c), bytes);
        vram__pool_lock(p);
        p->unmapping_bytes -= bytes;
        if (rc) {
            p->st.backend_failures_total++;
            chunk_back_free(p, c);
            pthread_cond_broadcast(&p->settled);
            return rc;
        }
        for (int32_t k = c; k < c + p->chunk_len[c]; k++)
            p->page_state[k] = VRAM__PAGE_UNMAPPED;
        p->chunk_len[c] = p->chunk_free[c] = 0;
        vram__pool_reserved_sub(p, bytes);
        p->st.released_bytes_total += bytes;
        pthread_cond_broadcast(&p->settled);
        done += bytes;
        if (released)
            *released += bytes;
    }
    return 0;
}

/* Unmap chunk c (destroy: no other thread uses the pool). */
static int unmap_chunk_now(vram_pool *p, int32_t c)
{
    int32_t n = p->chunk_len[c];
    p->st.backend_calls_total++;
    int rc = vram__backend_unmap(p->backend, vram__page_addr(p, c), (uint64_t)n * p->granularity);
    if (rc) {
        p->st.backend_failures_total++;
        return rc;
    }
    if (p->chunk_free[c] == n)
        vram__list_remove(vram__chunks(p), c);
    for (int32_t k = c; k < c + n; k++) {
        if (p->page_state[k] == VRAM__PAGE_FREE) {
            vram__list_remove(vram__granules(p), k);
            p->free_mapped -= p->granularity;
        }
        p->page_state[k] = VRAM__PAGE_UNMAPPED;
    }
    p->chunk_len[c] = p->chunk_free[c] = 0;
    vram__pool_reserved_sub(p, (uint64_t)n * p->granularity);
    return 0;
}

unsigned vram__vmm_release_all(vram_pool *p)
{
    unsigned failed = 0;
    if (!p->page_state)
        return 0;
    if (vram__streams_settle_solo(p)) /* the work may still run: keep the mappings */
        return 1;
    for (int r = 0; r < VRAM__REGIONS; r++) {
        vram__span *sp = p->vmm[r].span;
        if (!sp)
            continue;
        unsigned region_failed = 0;
        int32_t base = (int32_t)p->vmm[r].page0, end = base + (int32_t)p->vmm[r].npages;
        for (int32_t i = base; i < end;) {
            if (p->page_state[i] == VRAM__PAGE_UNMAPPED) {
                i++;
                continue;
            }
            int32_t n = p->chunk_len[i];
            if (unmap_chunk_now(p, i))
                region_failed++;
            i += n;
        }
        failed += region_failed;
        if (region_failed) /* a range with mappings left cannot be released */
            continue;
        p->st.backend_calls_total++;
        if (vram__backend_release(p->backend, sp->addr, sp->size)) {
            p->st.backend_failures_total++;
            failed++;
        }
    }
    return failed;
}

int vram__vmm_give_back(vram_pool *p, uint64_t want, uint64_t *released)
{
    uint64_t done = 0;
    int rc = vram__huge_release(p, want, 0, UINT64_MAX, &done);
    if (!rc && done < want)
        rc = vram__vmm_unmap_free(p, want - done, 0, UINT64_MAX, &done);
    /* All of it (a trim): memory another thread is giving back right now
     * is gone once it returns; wait for it, then for what became free. */
    while (!rc && want == UINT64_MAX && p->unmapping_bytes) {
        while (p->unmapping_bytes)
            pthread_cond_wait(&p->settled, &p->lock);
        rc = vram__vmm_unmap_free(p, UINT64_MAX, 0, UINT64_MAX, &done);
    }
    if (released)
        *released += done;
    return rc;
}

uint64_t vram__vmm_decay(vram_pool *p, uint64_t before_ms, uint64_t *released)
{
    uint64_t keep = p->retain_min;
    int rc = vram__huge_release(p, UINT64_MAX, keep > p->free_mapped ? keep - p->free_mapped : 0,
                                before_ms, released);
    if (!rc)
        rc = vram__vmm_unmap_free(p, UINT64_MAX, keep > p->huge_free ? keep - p->huge_free : 0,
                                  before_ms, released);
    if (rc) { /* tried again on the thread's next round */
        vram_log(VRAM_LOG_WARN, "pool \"%s\": could not give back free memory: %s", p->name,
                  vram_last_error());
        return UINT64_MAX;
    }
    if (p->free_mapped + p->huge_free <= keep)
        return UINT64_MAX;
    uint64_t oldest = UINT64_MAX;
    if (p->clru_head != VRAM__NO_PAGE)
        oldest = p->chunk_ms[p->clru_head];
    if (p->huge_head && p->huge_head->ms < oldest)
        oldest = p->huge_head->ms;
    return oldest;
}
