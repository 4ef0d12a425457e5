/* src/mem/vmm.c - the vmm policy's physical side: one reserved virtual range
 * per region, a state per granule (unmapped, used, mapped but free), mapping
 * the granules a new block touches, and unmapping free granules oldest first
 * once they exceed the retention limit (hysteresis: mapping costs tens of
 * microseconds on a GPU, so granules freed and reused soon stay mapped). */
#include <stdlib.h>

#include "base/log_internal.h"
#include "pool_internal.h"

enum { PAGE_NEW = 3 }; /* mapped by the allocation in progress */

static inline uint64_t page_addr(const vram_pool *p, int64_t gi)
{
    int r = (uint64_t)gi >= p->vmm[1].page0;
    return p->vmm[r].span->addr + ((uint64_t)gi - p->vmm[r].page0) * p->granularity;
}

static inline int page_region(const vram_pool *p, int64_t gi)
{
    return (uint64_t)gi >= p->vmm[1].page0;
}

static void lru_push(vram_pool *p, int32_t gi)
{
    p->lru_prev[gi] = p->lru_tail;
    p->lru_next[gi] = VRAM__NO_PAGE;
    if (p->lru_tail != VRAM__NO_PAGE)
        p->lru_next[p->lru_tail] = gi;
    else
        p->lru_head = gi;
    p->lru_tail = gi;
}

static void lru_remove(vram_pool *p, int32_t gi)
{
    int32_t pr = p->lru_prev[gi], nx = p->lru_next[gi];
    if (pr != VRAM__NO_PAGE)
        p->lru_next[pr] = nx;
    else
        p->lru_head = nx;
    if (nx != VRAM__NO_PAGE)
        p->lru_prev[nx] = pr;
    else
        p->lru_tail = pr;
}

int vram__vmm_init(vram_pool *p)
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
    p->lru_prev = vram__calloc((size_t)total, sizeof *p->lru_prev);
    p->lru_next = vram__calloc((size_t)total, sizeof *p->lru_next);
    if (!p->page_state || !p->lru_prev || !p->lru_next)
        return VRAM_EHOSTMEM;
    p->lru_head = p->lru_tail = VRAM__NO_PAGE;
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

/* Unmap every mapped granule and release the reservations (destroy). Returns
 * the number of backend calls that failed. */
static unsigned vmm_release_all(vram_pool *p)
{
    unsigned failed = 0;
    if (!p->page_state)
        return 0;
    for (int r = 0; r < VRAM__REGIONS; r++) {
        vram__span *sp = p->vmm[r].span;
        if (!sp)
            continue;
        unsigned region_failed = 0;
        uint64_t base = p->vmm[r].page0;
        for (uint64_t i = 0; i < p->vmm[r].npages;) {
            if (p->page_state[base + i] == VRAM__PAGE_UNMAPPED) {
                i++;
                continue;
            }
            uint64_t j = i + 1;
            while (j < p->vmm[r].npages && p->page_state[base + j] != VRAM__PAGE_UNMAPPED)
                j++;
            p->st.backend_calls_total++;
            if (vram__backend_unmap(p->backend, sp->addr + i * p->granularity,
                                    (j - i) * p->granularity)) {
                p->st.backend_failures_total++;
                region_failed++;
            } else {
                vram__pool_reserved_sub(p, (j - i) * p->granularity);
                for (uint64_t k = i; k < j; k++)
                    p->page_state[base + k] = VRAM__PAGE_UNMAPPED;
            }
            i = j;
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

int vram__vmm_destroy(vram_pool *p)
{
    unsigned failed = vmm_release_all(p);
    if (failed)
        vram__log(VRAM_LOG_WARN, "pool \"%s\": the backend refused to give back some memory: %s",
                  p->name, vram_last_error());
    free(p->page_state);
    free(p->lru_prev);
    free(p->lru_next);
    p->page_state = NULL;
    p->lru_prev = p->lru_next = NULL;
    return failed ? VRAM_EBACKEND : 0;
}

/* Pages [first, last] of region r, as indices in the page table. */
static void page_range(const vram_pool *p, int r, uint64_t addr, uint64_t size, uint64_t *first,
                       uint64_t *last)
{
    uint64_t base = p->vmm[r].span->addr;
    *first = p->vmm[r].page0 + (addr - base) / p->granularity;
    *last = p->vmm[r].page0 + (addr + size - 1 - base) / p->granularity;
}

static int unmap_down_to(vram_pool *p, uint64_t limit, uint64_t *released);

int vram__vmm_back(vram_pool *p, vram__block *b)
{
    uint64_t first, last, g = p->granularity;
    page_range(p, b->region, b->addr, b->size, &first, &last);
    uint8_t *st = p->page_state;
    /* Free granules in the block's range are reused: they are in use from now
     * (if mapping the rest fails, releasing the block frees them again). */
    uint64_t need = 0;
    for (uint64_t i = first; i <= last; i++) {
        if (st[i] == VRAM__PAGE_FREE) {
            lru_remove(p, (int32_t)i);
            p->free_mapped -= g;
            st[i] = VRAM__PAGE_USED;
        } else if (st[i] == VRAM__PAGE_UNMAPPED) {
            need += g;
        }
    }
    /* Retained granules never raise the peak: if mapping the new ones would,
     * give back retained ones first. */
    uint64_t after = p->st.reserved_bytes + need;
    if (need && p->free_mapped && after > p->st.peak_reserved_bytes) {
        uint64_t over = after - p->st.peak_reserved_bytes;
        unmap_down_to(p, p->free_mapped > over ? p->free_mapped - over : 0, NULL);
    }
    int rc = 0;
    for (uint64_t i = first; i <= last && need;) {
        if (st[i] != VRAM__PAGE_UNMAPPED) {
            i++;
            continue;
        }
        uint64_t j = i + 1;
        while (j <= last && st[j] == VRAM__PAGE_UNMAPPED)
            j++;
        p->st.backend_calls_total++;
        rc = vram__backend_map(p->backend, page_addr(p, (int64_t)i), (j - i) * g);
        if (rc) {
            p->st.backend_failures_total++;
            break;
        }
        vram__pool_reserved_add(p, (j - i) * g);
        for (uint64_t k = i; k < j; k++)
            st[k] = PAGE_NEW;
        i = j;
    }
    if (rc) {
        /* Roll back what this allocation mapped; keep the backend's message. */
        for (uint64_t i = first; i <= last;) {
            if (st[i] != PAGE_NEW) {
                i++;
                continue;
            }
            uint64_t j = i + 1;
            while (j <= last && st[j] == PAGE_NEW)
                j++;
            p->st.backend_calls_total++;
            int urc = vram__backend_unmap(p->backend, page_addr(p, (int64_t)i), (j - i) * g);
            if (urc) { /* still mapped: the release of the block lists it as free */
                p->st.backend_failures_total++;
                for (uint64_t k = i; k < j; k++)
                    st[k] = VRAM__PAGE_USED;
            } else {
                vram__pool_reserved_sub(p, (j - i) * g);
                for (uint64_t k = i; k < j; k++)
                    st[k] = VRAM__PAGE_UNMAPPED;
            }
            i = j;
        }
        return rc;
    }
    for (uint64_t i = first; i <= last; i++)
        if (st[i] == PAGE_NEW)
            st[i] = VRAM__PAGE_USED;
    return 0;
}

/* Unmap free granules, oldest first, until at most `limit` bytes of them stay
 * mapped; consecutive granules go in one call. Returns 0 or the first error
 * (what failed stays mapped and listed). */
static int unmap_down_to(vram_pool *p, uint64_t limit, uint64_t *released)
{
    uint64_t g = p->granularity;
    while (p->free_mapped > limit && p->lru_head != VRAM__NO_PAGE) {
        int32_t first = p->lru_head, last = first;
        uint64_t want = (p->free_mapped - limit + g - 1) / g;
        uint64_t n = 1;
        while (n < want && p->lru_next[last] == last + 1 &&
               page_region(p, last + 1) == page_region(p, first)) {
            last++;
            n++;
        }
        p->st.backend_calls_total++;
        int rc = vram__backend_unmap(p->backend, page_addr(p, first), n * g);
        if (rc) {
            p->st.backend_failures_total++;
            return rc;
        }
        for (int32_t k = first; k <= last; k++) {
            lru_remove(p, k);
            p->page_state[k] = VRAM__PAGE_UNMAPPED;
        }
        p->free_mapped -= n * g;
        vram__pool_reserved_sub(p, n * g);
        if (released)
            *released += n * g;
    }
    return 0;
}

void vram__vmm_enforce_retention(vram_pool *p)
{
    uint64_t limit = (uint64_t)(p->retain_ratio * (double)p->st.peak_live_bytes);
    if (limit < p->retain_min)
        limit = p->retain_min;
    if (p->free_mapped <= limit)
        return;
    if (unmap_down_to(p, limit, NULL))
        vram__log(VRAM_LOG_WARN, "pool \"%s\": could not unmap free memory: %s", p->name,
                  vram_last_error());
}

void vram__vmm_block_freed(vram_pool *p, uint64_t addr, uint64_t size, const vram__block *merged)
{
    uint64_t first, last, g = p->granularity;
    int r = merged->region;
    page_range(p, r, addr, size, &first, &last);
    uint64_t fa = merged->addr, fb = merged->addr + merged->size;
    uint64_t pa = page_addr(p, (int64_t)first);
    for (uint64_t i = first; i <= last; i++, pa += g) {
        if (pa >= fa && pa + g <= fb && p->page_state[i] == VRAM__PAGE_USED) {
            p->page_state[i] = VRAM__PAGE_FREE;
            lru_push(p, (int32_t)i);
            p->free_mapped += g;
        }
    }
    vram__vmm_enforce_retention(p);
}

int vram__vmm_trim(vram_pool *p, uint64_t *released)
{
    return unmap_down_to(p, 0, released);
}

typedef struct interval {
    uint64_t a, b;
    int region; /* runs in different reservations never join */
} interval;

typedef struct collect {
    vram_pool *p;
    interval *iv;
    size_t n, cap;
    int failed;
} collect;

static void add_interval(collect *c, int region, uint64_t a, uint64_t b)
{
    if (a >= b || c->failed)
        return;
    interval *iv = vram__grow(c->iv, &c->cap, c->n, sizeof *iv, 256);
    if (!iv) {
        c->failed = 1;
        return;
    }
    c->iv = iv;
    c->iv[c->n++] = (interval){a, b, region};
}

/* The mapped parts of a free block's first and last granules (those shared
 * with a neighbour in use); fully free granules come from the LRU list. */
static void collect_edges(void *ctx, vram__block *b)
{
    collect *c = ctx;
    vram_pool *p = c->p;
    uint64_t first, last, g = p->granularity;
    page_range(p, b->region, b->addr, b->size, &first, &last);
    uint64_t fa = b->addr, fb = b->addr + b->size;
    uint64_t ends[2] = {first, last};
    for (int e = 0; e < (first == last ? 1 : 2); e++) {
        if (p->page_state[ends[e]] != VRAM__PAGE_USED)
            continue;
        uint64_t pa = page_addr(p, (int64_t)ends[e]);
        add_interval(c, b->region, fa > pa ? fa : pa, fb < pa + g ? fb : pa + g);
    }
}

static int cmp_interval(const void *x, const void *y)
{
    const interval *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

uint64_t vram__vmm_largest_free(vram_pool *p)
{
    collect c = {.p = p};
    for (int r = 0; r < VRAM__REGIONS; r++)
        vram__tlsf_each(&p->free[r], collect_edges, &c);
    for (int32_t gi = p->lru_head; gi != VRAM__NO_PAGE; gi = p->lru_next[gi]) {
        uint64_t pa = page_addr(p, gi);
        add_interval(&c, page_region(p, gi), pa, pa + p->granularity);
    }
    uint64_t best = 0;
    if (c.n) {
        qsort(c.iv, c.n, sizeof *c.iv, cmp_interval);
        uint64_t a = c.iv[0].a, b = c.iv[0].b;
        int region = c.iv[0].region;
        for (size_t i = 1; i <= c.n; i++) {
            if (i < c.n && c.iv[i].a <= b && c.iv[i].region == region) {
                if (c.iv[i].b > b)
                    b = c.iv[i].b;
                continue;
            }
            if (b - a > best)
                best = b - a;
            if (i < c.n) {
                a = c.iv[i].a;
                b = c.iv[i].b;
                region = c.iv[i].region;
            }
        }
    }
    free(c.iv);
    return best;
}
