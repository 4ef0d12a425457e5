/* src/core/mem/vmm.c - the vmm policy: one reserved virtual range per region, a
 * state per granule (unmapped, used, mapped but free, busy), and backing a
 * new block by mapping the granules it touches that are not mapped yet.
 * Freed memory stays mapped and is reused without a driver call; it goes
 * back (vmm_release.c) only when a mapping would pass the pool's limit, when
 * the decay thread finds it unused for decay_ms, or on trim.
 *
 * A run of granules wholly inside one block is mapped in chunks of up to
 * map_chunk granules while the pool holds under a quarter of its limit (one
 * backend call each: a call costs about the same for 2 or 32 MiB on an
 * H200), one granule a chunk above that; a chunk is unmapped only whole, as
 * cuMemUnmap requires, so small chunks near the limit let memory go back a
 * granule at a time. The backend is called with the pool's lock released:
 * the granules concerned are BUSY meanwhile, and a thread needing one waits
 * for the `settled` condition. */
#include <stdio.h>
#include <stdlib.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "pool_internal.h"
#include "vmm_internal.h"

#define LOWEST_CANDIDATES_PRESSED 32

/* A mapped granule becomes free / is taken again. */
void vram__granule_freed(vram_pool *p, int32_t gi)
{
    p->page_state[gi] = VRAM__PAGE_FREE;
    vram__list_push(vram__granules(p), gi);
    p->free_mapped += p->granularity;
    int32_t c = p->chunk_of[gi];
    if (++p->chunk_free[c] == p->chunk_len[c]) {
        vram__list_push(vram__chunks(p), c);
        p->chunk_stamp[c] = p->solo_freed; /* its memory's last use */
        p->chunk_ms[c] = vram__now_ms();
    }
}

static void granule_taken(vram_pool *p, int32_t gi)
{
    vram__list_remove(vram__granules(p), gi);
    p->free_mapped -= p->granularity;
    p->page_state[gi] = VRAM__PAGE_USED;
    int32_t c = p->chunk_of[gi];
    if (p->chunk_free[c]-- == p->chunk_len[c])
        vram__list_remove(vram__chunks(p), c);
}

static int vmm_init(vram_pool *p)
{
    uint64_t g = p->granularity;
    uint64_t sizes[VRAM__REGIONS] = {vram__align_up(p->capacity, g),
                                     vram__align_up(2 * p->capacity, g)};
    uint64_t total = (sizes[0] + sizes[1]) / g;
    if (total > INT32_MAX) {
        char a[32], b[32];
        return vram__fail(VRAM_EINVAL,
                          "granularity %s is too fine for a capacity of %s: %llu granules "
                          "(at most %d)",
                          vram__fmt_bytes(a, sizeof a, g), vram__fmt_bytes(b, sizeof b, p->capacity),
                          (unsigned long long)total, INT32_MAX);
    }
    p->npages = total;
    p->page_state = vram__calloc((size_t)total, 1);
    int32_t **arrays[] = {VRAM__VMM_ARRAYS(p)};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(arrays); i++) {
        *arrays[i] = vram__calloc((size_t)total, sizeof(int32_t));
        if (!*arrays[i])
            return VRAM_EHOSTMEM;
    }
    p->chunk_stamp = vram__calloc((size_t)total, sizeof *p->chunk_stamp);
    p->chunk_ms = vram__calloc((size_t)total, sizeof *p->chunk_ms);
    if (!p->page_state || !p->chunk_stamp || !p->chunk_ms)
        return VRAM_EHOSTMEM;
    p->lru_head = p->lru_tail = p->clru_head = p->clru_tail = VRAM__NO_PAGE;
    uint64_t page0 = 0;
    for (int r = 0; r < VRAM__REGIONS; r++) {
        uint64_t addr;
        p->st.backend_calls_total++;
        int rc = vram__backend_reserve(p->backend, sizes[r], &addr);
        if (rc) {
            p->st.backend_failures_total++;
            return vram__fail_prefix(rc, "reserving the %s virtual range: ", r ? "large" : "small");
        }
        if (addr % g) {
            vram__backend_release(p->backend, addr, sizes[r]);
            return vram__fail(VRAM_EBACKEND, "backend reserved 0x%llx, not aligned to %llu",
                              (unsigned long long)addr, (unsigned long long)g);
        }
        rc = vram__pool_add_span(p, addr, sizes[r], r, &p->vmm[r].span);
        if (rc) {
            vram__backend_release(p->backend, addr, sizes[r]);
            return rc;
        }
        p->vmm[r].page0 = page0;
        p->vmm[r].npages = sizes[r] / g;
        page0 += p->vmm[r].npages;
    }
    return 0;
}

static int vmm_destroy(vram_pool *p)
{
    unsigned failed = vram__vmm_release_all(p);
    if (vram__huge_release(p, UINT64_MAX, 0, UINT64_MAX, NULL))
        failed++;
    if (failed)
        vram_log(VRAM_LOG_WARN, "pool \"%s\": the backend refused to give back some memory: %s",
                  p->name, vram_last_error());
    vram__vmm_free_tables(p);
    return failed ? VRAM_EBACKEND : 0;
}

void vram__vmm_free_tables(vram_pool *p)
{
    int32_t **arrays[] = {VRAM__VMM_ARRAYS(p)};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(arrays); i++) {
        free(*arrays[i]);
        *arrays[i] = NULL;
    }
    free(p->page_state);
    p->page_state = NULL;
    free(p->chunk_stamp);
    p->chunk_stamp = NULL;
    free(p->chunk_ms);
    p->chunk_ms = NULL;
}

/* A granule a block there would still have to map (unmapped, or being
 * mapped or given back by another thread). */
static inline int granule_missing(const vram_pool *p, uint64_t i)
{
    return p->page_state[i] != VRAM__PAGE_USED && p->page_state[i] != VRAM__PAGE_FREE;
}

int vram__vmm_unmapped_in(const vram_pool *p, const vram__block *b, uint64_t size)
{
    uint64_t first, last;
    vram__page_range(p, b->region, b->addr, size, &first, &last);
    for (uint64_t i = first; i <= last; i++)
        if (granule_missing(p, i))
            return 1;
    return 0;
}

typedef struct least_probe {
    vram_pool *p;
    uint64_t size;
    vram__block *best;
    uint64_t best_need;
} least_probe;

static int note_least(void *ctx, const vram__block *b)
{
    least_probe *m = ctx;
    uint64_t first, last, need = 0;
    vram__page_range(m->p, b->region, b->addr, m->size, &first, &last);
    for (uint64_t i = first; i <= last; i++)
        need += (uint64_t)granule_missing(m->p, i);
    if (!m->best || need < m->best_need || (need == m->best_need && b->addr < m->best->addr)) {
        m->best = (vram__block *)b;
        m->best_need = need;
    }
    return 0; /* look at them all, take the best after */
}

/* The lowest address among the first few free blocks of `index` that fit. */
static vram__block *vmm_pick(vram_pool *p, vram__tlsf *index, uint64_t size)
{
    return vram__tlsf_take_lowest(index, size, p->place_candidates);
}

/* A free block: huge ones from the free huge segments; otherwise the lowest
 * address among the first few that fit, or, when the limit is near or memory
 * short, the one whose first `size` bytes need the fewest new granules. */
static vram__block *vmm_take(vram_pool *p, uint64_t size, int region, int pressed)
{
    if (region == VRAM__HUGE)
        return vram__huge_take_free(p, size);
    if (pressed || p->st.reserved_bytes + size > p->limit) {
        least_probe m = {p, size, NULL, 0};
        vram__tlsf_take_if(&p->free[region], size, note_least, &m, LOWEST_CANDIDATES_PRESSED);
        if (m.best)
            vram__tlsf_remove(&p->free[region], m.best);
        return m.best;
    }
    return vmm_pick(p, &p->free[region], size);
}

static int vmm_grow(vram_pool *p, uint64_t size, int region, vram_stream s, vram__block **out)
{
    if (region == VRAM__HUGE)
        return vram__huge_grow(p, size, s, out);
    char a[32], c[32];
    return vram__fail(VRAM_ENOMEM, "no free range of %s in the %s virtual reservation of %s",
                      vram__fmt_bytes(a, sizeof a, size), region ? "large" : "small",
                      vram__fmt_bytes(c, sizeof c, p->vmm[region].span->size));
}

static int vmm_split(const vram_pool *p, const vram__block *b, uint64_t size)
{
    return b->region != VRAM__HUGE && b->size - size >= p->granule;
}

static int vmm_needs_memory(const vram_pool *p, const vram__block *b, uint64_t size)
{
    return b->region != VRAM__HUGE && vram__vmm_unmapped_in(p, b, size);
}

/* Wait until no granule of [first, last] is busy; whether it waited (the
 * lock was released, so whatever was learnt about the range is stale). */
static int wait_settled(vram_pool *p, uint64_t first, uint64_t last)
{
    int waited = 0;
    for (uint64_t i = first; i <= last; i++) {
        while (p->page_state[i] == VRAM__PAGE_BUSY) {
            pthread_cond_wait(&p->settled, &p->lock);
            waited = 1;
        }
    }
    return waited;
}

/* Map granules [gi, gi+n), marked busy, as one chunk; the lock is released
 * during the call. */
static int map_chunk(vram_pool *p, int32_t gi, int32_t n)
{
    uint64_t bytes = (uint64_t)n * p->granularity, addr = vram__page_addr(p, gi);
    vram__streams_mark(p); /* a mapping costs a hundred times more */
    p->st.backend_calls_total++;
    vram__pool_unlock(p);
    int rc = vram__backend_map(p->backend, addr, bytes);
    vram__pool_lock(p);
    if (rc) {
        p->st.backend_failures_total++;
        return rc;
    }
    for (int32_t k = gi; k < gi + n; k++)
        p->chunk_of[k] = gi;
    p->chunk_len[gi] = n;
    p->chunk_free[gi] = 0;
    return 0;
}

/* Undo the chunks an allocation mapped in [first, last] (marked busy, with
 * chunk_len set at their first granule) after a later one failed, keeping
 * the failure's message; a chunk that cannot be unmapped stays, in use by
 * the block, and becomes free memory when the caller releases it. */
static void unmap_new(vram_pool *p, uint64_t first, uint64_t last, const uint8_t *mapped)
{
    uint8_t *st = p->page_state;
    for (uint64_t i = first; i <= last;) {
        if (mapped[i - first] != 1) { /* not mapped by this allocation */
            i++;
            continue;
        }
        int32_t n = p->chunk_len[i];
        uint64_t bytes = (uint64_t)n * p->granularity;
        p->st.backend_calls_total++;
        vram__pool_unlock(p);
        int rc = vram__backend_unmap(p->backend, vram__page_addr(p, (int64_t)i), bytes);
        vram__pool_lock(p);
        for (int32_t k = 0; k < n; k++)
            st[i + (uint64_t)k] = rc ? VRAM__PAGE_USED : VRAM__PAGE_UNMAPPED;
        if (rc) {
            p->st.backend_failures_total++;
        } else {
            p->chunk_len[i] = p->chunk_free[i] = 0;
            vram__pool_reserved_sub(p, bytes);
        }
        i += (uint64_t)n;
    }
}

/* The granules of [first, last] still unmapped, mapped in chunks: the
 * allocation's block covers [b_addr, b_end). */
static int map_range(vram_pool *p, uint64_t first, uint64_t last, uint64_t b_addr, uint64_t b_end,
                     uint64_t need)
{
    uint8_t *st = p->page_state;
    uint64_t g = p->granularity;
    uint64_t chunk = p->st.reserved_bytes + need <= p->limit / 4 ? p->map_chunk : 1;
    int edge_first = b_addr != vram__page_addr(p, (int64_t)first);
    int edge_last = b_end != vram__page_addr(p, (int64_t)last) + g;
    uint8_t small[64], *mapped = last - first < sizeof small ? small : NULL;
    if (!mapped && !(mapped = calloc(last - first + 1, 1)))
        return VRAM_EHOSTMEM;
    for (uint64_t i = first; i <= last; i++) {
        mapped[i - first] = 0;
        if (st[i] == VRAM__PAGE_UNMAPPED)
            st[i] = VRAM__PAGE_BUSY;
        else
            mapped[i - first] = 2; /* not ours */
    }
    /* Counted as held from now on, so no other thread passes the limit. */
    p->busy_bytes += need;
    vram__pool_reserved_add(p, need);
    int rc = 0;
    for (uint64_t i = first; i <= last;) {
        if (mapped[i - first]) {
            i++;
            continue;
        }
        /* Granules the block shares with its neighbours get a mapping of
         * their own; those wholly inside it are mapped together, so the
         * block's memory can be given back whole once it is free. */
        uint64_t j = i + 1;
        if (i != first || !edge_first)
            while (j <= last && j - i < chunk && !mapped[j - first] && !(j == last && edge_last))
                j++;
        rc = map_chunk(p, (int32_t)i, (int32_t)(j - i));
        if (rc)
            break;
        for (uint64_t k = i; k < j; k++)
            mapped[k - first] = 1;
        i = j;
    }
    p->busy_bytes -= need;
    if (rc) {
        vram__saved_error err;
        vram__error_save(&err);
        for (uint64_t i = first; i <= last; i++)
            if (!mapped[i - first] && st[i] == VRAM__PAGE_BUSY) {
                st[i] = VRAM__PAGE_UNMAPPED;
                vram__pool_reserved_sub(p, g);
            }
        unmap_new(p, first, last, mapped);
        rc = vram__error_restore(&err, rc);
    } else {
        for (uint64_t i = first; i <= last; i++)
            if (mapped[i - first] == 1)
                st[i] = VRAM__PAGE_USED;
    }
    if (mapped != small)
        free(mapped);
    pthread_cond_broadcast(&p->settled);
    return rc;
}

static int vmm_back(vram_pool *p, vram__block *b)
{
    if (b->region == VRAM__HUGE) /* its segment came mapped */
        return 0;
    uint64_t first, last, g = p->granularity;
    vram__page_range(p, b->region, b->addr, b->size, &first, &last);
    uint8_t *st = p->page_state;
    for (;;) {
        /* A wait releases the lock: granules already passed may have become
         * busy meanwhile, so look again until a pass waits for none. */
        while (wait_settled(p, first, last)) {
        }
        /* Free granules in the block's range are reused: they are in use from
         * now (if mapping the rest fails, releasing the block frees them
         * again). */
        uint64_t need = 0;
        for (uint64_t i = first; i <= last; i++) {
            if (st[i] == VRAM__PAGE_FREE)
                granule_taken(p, (int32_t)i);
            else if (st[i] == VRAM__PAGE_UNMAPPED)
                need += g;
        }
        if (!need)
            return 0;
        if (p->st.reserved_bytes + need <= p->limit)
            return map_range(p, first, last, b->addr, b->addr + b->size, need);
        /* Giving memory back releases the lock: look at the range again. */
        int rc = vram__pool_make_room(p, need);
        if (rc)
            return rc;
    }
}

static void vmm_freed(vram_pool *p, uint64_t addr, uint64_t size, const vram__block *merged)
{
    if (merged->region == VRAM__HUGE) {
        vram__huge_freed(p, (vram__block *)merged);
        return;
    }
    uint64_t first, last, g = p->granularity;
    vram__page_range(p, merged->region, addr, size, &first, &last);
    uint64_t fa = merged->addr, fb = merged->addr + merged->size;
    uint64_t pa = vram__page_addr(p, (int64_t)first);
    for (uint64_t i = first; i <= last; i++, pa += g)
        if (pa >= fa && pa + g <= fb && p->page_state[i] == VRAM__PAGE_USED)
            vram__granule_freed(p, (int32_t)i);
}

const vram__policy_ops vram__vmm_ops = {
    .name = "vmm",
    .places_pressed = 1,
    .init = vmm_init,
    .destroy = vmm_destroy,
    .take = vmm_take,
    .pick = vmm_pick,
    .grow = vmm_grow,
    .split = vmm_split,
    .needs_memory = vmm_needs_memory,
    .back = vmm_back,
    .freed = vmm_freed,
    .give_back = vram__vmm_give_back,
    .decay = vram__vmm_decay,
    .largest_free = vram__vmm_largest_free,
    .held_json = vram__vmm_held_json,
    .free_json = vram__vmm_free_json,
};
