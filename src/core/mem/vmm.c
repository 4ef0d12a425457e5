/* src/core/mem/vmm.c - the vmm policy's physical side: one reserved virtual range
 * per region, a state per granule (unmapped, used, mapped but free), mapping
 * the granules a new block touches, and unmapping free memory oldest first
 * once it exceeds the retention limit (hysteresis: mapping costs tens of
 * microseconds on a GPU, so memory freed and reused soon stays mapped).
 *
 * A run of granules is mapped in chunks of at most map_chunk granules, one
 * backend call each; as with cuMemUnmap, a chunk is unmapped only whole, so
 * only chunks whose granules are all free are given back. Larger chunks mean
 * fewer calls (a call costs about the same for 2 or 32 MiB on an H200) but
 * coarser release. */
#include <stdio.h>
#include <stdlib.h>

#include "base/internal.h"
#include "vramkit/log.h"
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

/* A doubly linked list threaded through per-granule arrays. */
typedef struct list {
    int32_t *prev, *next, *head, *tail;
} list;

static inline list granules(vram_pool *p)
{
    return (list){p->lru_prev, p->lru_next, &p->lru_head, &p->lru_tail};
}

static inline list chunks(vram_pool *p)
{
    return (list){p->clru_prev, p->clru_next, &p->clru_head, &p->clru_tail};
}

static void list_push(list l, int32_t gi)
{
    l.prev[gi] = *l.tail;
    l.next[gi] = VRAM__NO_PAGE;
    if (*l.tail != VRAM__NO_PAGE)
        l.next[*l.tail] = gi;
    else
        *l.head = gi;
    *l.tail = gi;
}

static void list_remove(list l, int32_t gi)
{
    int32_t pr = l.prev[gi], nx = l.next[gi];
    if (pr != VRAM__NO_PAGE)
        l.next[pr] = nx;
    else
        *l.head = nx;
    if (nx != VRAM__NO_PAGE)
        l.prev[nx] = pr;
    else
        *l.tail = pr;
}

/* A mapped granule becomes free / is taken again. */
static void granule_freed(vram_pool *p, int32_t gi)
{
    p->page_state[gi] = VRAM__PAGE_FREE;
    list_push(granules(p), gi);
    p->free_mapped += p->granularity;
    int32_t c = p->chunk_of[gi];
    if (++p->chunk_free[c] == p->chunk_len[c]) {
        list_push(chunks(p), c);
        p->chunk_stamp[c] = p->solo_freed; /* its memory's last use */
    }
}

static void granule_taken(vram_pool *p, int32_t gi)
{
    list_remove(granules(p), gi);
    p->free_mapped -= p->granularity;
    p->page_state[gi] = VRAM__PAGE_USED;
    int32_t c = p->chunk_of[gi];
    if (p->chunk_free[c]-- == p->chunk_len[c])
        list_remove(chunks(p), c);
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
    int32_t **arrays[] = {&p->lru_prev,  &p->lru_next,  &p->chunk_of, &p->chunk_len,
                          &p->chunk_free, &p->clru_prev, &p->clru_next};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(arrays); i++) {
        *arrays[i] = vram__calloc((size_t)total, sizeof(int32_t));
        if (!*arrays[i])
            return VRAM_EHOSTMEM;
    }
    p->chunk_stamp = vram__calloc((size_t)total, sizeof *p->chunk_stamp);
    if (!p->page_state || !p->chunk_stamp)
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

/* Map granules [gi, gi+n) of one region as one chunk. */
static int map_chunk(vram_pool *p, int32_t gi, int32_t n)
{
    vram__streams_mark(p); /* a mapping costs a hundred times more */
    p->st.backend_calls_total++;
    int rc = vram__backend_map(p->backend, page_addr(p, gi), (uint64_t)n * p->granularity);
    if (rc) {
        p->st.backend_failures_total++;
        return rc;
    }
    vram__pool_reserved_add(p, (uint64_t)n * p->granularity);
    for (int32_t k = gi; k < gi + n; k++)
        p->chunk_of[k] = gi;
    p->chunk_len[gi] = n;
    p->chunk_free[gi] = 0;
    return 0;
}

/* Unmap the chunk starting at granule c; its granules must be free or just
 * mapped. On failure nothing changes. */
static int unmap_chunk(vram_pool *p, int32_t c)
{
    int32_t n = p->chunk_len[c];
    p->st.backend_calls_total++;
    int rc = vram__backend_unmap(p->backend, page_addr(p, c), (uint64_t)n * p->granularity);
    if (rc) {
        p->st.backend_failures_total++;
        return rc;
    }
    if (p->chunk_free[c] == n)
        list_remove(chunks(p), c);
    for (int32_t k = c; k < c + n; k++) {
        if (p->page_state[k] == VRAM__PAGE_FREE) {
            list_remove(granules(p), k);
            p->free_mapped -= p->granularity;
        }
        p->page_state[k] = VRAM__PAGE_UNMAPPED;
    }
    p->chunk_len[c] = p->chunk_free[c] = 0;
    vram__pool_reserved_sub(p, (uint64_t)n * p->granularity);
    return 0;
}

/* Unmap every chunk and release the reservations (destroy). Returns the
 * number of backend calls that failed. */
static unsigned vmm_release_all(vram_pool *p)
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
            if (unmap_chunk(p, i))
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

int vram__vmm_destroy(vram_pool *p)
{
    unsigned failed = vmm_release_all(p);
    if (vram__huge_release(p, 0, NULL))
        failed++;
    if (failed)
        vram_log(VRAM_LOG_WARN, "pool \"%s\": the backend refused to give back some memory: %s",
                  p->name, vram_last_error());
    int32_t **arrays[] = {&p->lru_prev,  &p->lru_next,  &p->chunk_of, &p->chunk_len,
                          &p->chunk_free, &p->clru_prev, &p->clru_next};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(arrays); i++) {
        free(*arrays[i]);
        *arrays[i] = NULL;
    }
    free(p->page_state);
    p->page_state = NULL;
    free(p->chunk_stamp);
    p->chunk_stamp = NULL;
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

#define MAPPED_CANDIDATES 32

typedef struct mapped_probe {
    vram_pool *p;
    uint64_t size;
} mapped_probe;

int vram__vmm_unmapped_in(const vram_pool *p, const vram__block *b, uint64_t size)
{
    uint64_t first, last;
    page_range(p, b->region, b->addr, size, &first, &last);
    for (uint64_t i = first; i <= last; i++)
        if (p->page_state[i] == VRAM__PAGE_UNMAPPED)
            return 1;
    return 0;
}

static int fully_mapped(void *ctx, const vram__block *b)
{
    mapped_probe *m = ctx;
    return !vram__vmm_unmapped_in(m->p, b, m->size);
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
    page_range(m->p, b->region, b->addr, m->size, &first, &last);
    for (uint64_t i = first; i <= last; i++)
        need += m->p->page_state[i] == VRAM__PAGE_UNMAPPED;
    if (!m->best || need < m->best_need) {
        m->best = (vram__block *)b;
        m->best_need = need;
    }
    return 0; /* look at them all, take the best after */
}

vram__block *vram__vmm_take_least_unmapped(vram_pool *p, uint64_t size, int region)
{
    least_probe m = {p, size, NULL, 0};
    vram__tlsf_take_if(&p->free[region], size, note_least, &m, MAPPED_CANDIDATES);
    if (m.best)
        vram__tlsf_remove(&p->free[region], m.best);
    return m.best;
}

/* Placement that maps nothing when free mapped memory can take the block:
 * mapping costs tens of microseconds, searching a few candidates does not. */
vram__block *vram__vmm_take_mapped(vram_pool *p, uint64_t size, int region)
{
    mapped_probe m = {p, size};
    return vram__tlsf_take_if(&p->free[region], size, fully_mapped, &m, MAPPED_CANDIDATES);
}

int vram__vmm_back(vram_pool *p, vram__block *b)
{
    uint64_t first, last, g = p->granularity;
    page_range(p, b->region, b->addr, b->size, &first, &last);
    uint8_t *st = p->page_state;
    /* Free granules in the block's range are reused: they are in use from now
     * (if mapping the rest fails, releasing the block frees them again). */
    uint64_t need = 0;
    for (uint64_t i = first; i <= last; i++) {
        if (st[i] == VRAM__PAGE_FREE)
            granule_taken(p, (int32_t)i);
        else if (st[i] == VRAM__PAGE_UNMAPPED)
            need += g;
    }
    vram__vmm_make_room(p, need, b->size);
    int rc = 0;
    uint64_t gfirst = page_addr(p, (int64_t)first), glast = page_addr(p, (int64_t)last);
    int edge_first = b->addr != gfirst;
    int edge_last = b->addr + b->size != glast + g;
    for (uint64_t i = first; i <= last && need;) {
        if (st[i] != VRAM__PAGE_UNMAPPED) {
            i++;
            continue;
        }
        /* Granules the block shares with its neighbours get a mapping of
         * their own; those wholly inside it are mapped together, so the
         * block's memory can be given back whole once it is free. */
        uint64_t j = i + 1;
        if (i != first || !edge_first)
            while (j <= last && j - i < p->map_chunk && st[j] == VRAM__PAGE_UNMAPPED &&
                   !(j == last && edge_last))
                j++;
        rc = map_chunk(p, (int32_t)i, (int32_t)(j - i));
        if (rc)
            break;
        for (uint64_t k = i; k < j; k++)
            st[k] = PAGE_NEW;
        i = j;
    }
    if (rc) {
        /* Roll back the chunks this allocation mapped; keep the backend's
         * message. A chunk that cannot be unmapped stays, in use by the
         * block, and becomes free memory when the caller releases it. */
        vram__saved_error err;
        vram__error_save(&err);
        for (uint64_t i = first; i <= last;) {
            if (st[i] != PAGE_NEW) {
                i++;
                continue;
            }
            int32_t n = p->chunk_len[i];
            if (unmap_chunk(p, (int32_t)i))
                for (int32_t k = 0; k < n; k++)
                    st[i + (uint64_t)k] = VRAM__PAGE_USED;
            i += (uint64_t)n;
        }
        return vram__error_restore(&err, rc);
    }
    for (uint64_t i = first; i <= last; i++)
        if (st[i] == PAGE_NEW)
            st[i] = VRAM__PAGE_USED;
    return 0;
}

/* Unmap entirely free chunks, oldest first, until at most `limit` bytes of
 * free memory stay mapped or no such chunk is left (free granules of chunks
 * partly in use stay). Returns 0 or the first error (that chunk stays). */
static int unmap_down_to(vram_pool *p, uint64_t limit, uint64_t *released)
{
    while (p->free_mapped > limit && p->clru_head != VRAM__NO_PAGE) {
        int32_t c = p->clru_head;
        uint64_t bytes = (uint64_t)p->chunk_len[c] * p->granularity;
        int rc = vram__streams_settle_upto(p, p->chunk_stamp[c]);
        if (!rc)
            rc = unmap_chunk(p, c);
        if (rc)
            return rc;
        if (released)
            *released += bytes;
    }
    return 0;
}

int vram__vmm_release_retained(vram_pool *p, uint64_t keep, uint64_t *released)
{
    uint64_t kept = p->free_mapped + p->huge_free;
    if (kept <= keep)
        return 0;
    if (!p->huge_head && p->clru_head == VRAM__NO_PAGE)
        return 0; /* only parts of chunks are free: nothing can go back */
    uint64_t excess = kept - keep;
    int rc = vram__huge_release(p, p->huge_free > excess ? p->huge_free - excess : 0, released);
    if (rc)
        return rc;
    kept = p->free_mapped + p->huge_free;
    if (kept <= keep)
        return 0;
    excess = kept - keep;
    return unmap_down_to(p, p->free_mapped > excess ? p->free_mapped - excess : 0, released);
}

void vram__vmm_make_room(vram_pool *p, uint64_t need, uint64_t size)
{
    uint64_t kept = p->free_mapped + p->huge_free;
    if (!need || !kept)
        return;
    uint64_t live = p->st.live_bytes + size;
    if (live < p->st.peak_live_bytes)
        live = p->st.peak_live_bytes;
    uint64_t ceiling = (uint64_t)((1.0 + p->headroom) * (double)live);
    if (ceiling < p->st.peak_reserved_bytes)
        ceiling = p->st.peak_reserved_bytes;
    uint64_t after = p->st.reserved_bytes + need;
    if (after <= ceiling)
        return;
    uint64_t over = after - ceiling;
    vram__vmm_release_retained(p, kept > over ? kept - over : 0, NULL);
}

void vram__vmm_enforce_retention(vram_pool *p)
{
    uint64_t limit = (uint64_t)(p->retain_ratio * (double)p->st.peak_live_bytes);
    if (limit < p->retain_min)
        limit = p->retain_min;
    if (p->free_mapped + p->huge_free <= limit)
        return;
    if (vram__vmm_release_retained(p, limit, NULL))
        vram_log(VRAM_LOG_WARN, "pool \"%s\": could not unmap free memory: %s", p->name,
                  vram_last_error());
}

void vram__vmm_block_freed(vram_pool *p, uint64_t addr, uint64_t size, const vram__block *merged)
{
    uint64_t first, last, g = p->granularity;
    int r = merged->region;
    page_range(p, r, addr, size, &first, &last);
    uint64_t fa = merged->addr, fb = merged->addr + merged->size;
    uint64_t pa = page_addr(p, (int64_t)first);
    for (uint64_t i = first; i <= last; i++, pa += g)
        if (pa >= fa && pa + g <= fb && p->page_state[i] == VRAM__PAGE_USED)
            granule_freed(p, (int32_t)i);
    vram__vmm_enforce_retention(p);
}

int vram__vmm_trim(vram_pool *p, uint64_t *released)
{
    return vram__vmm_release_retained(p, 0, released);
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
    uint64_t huge = vram__tlsf_largest(&p->free[VRAM__HUGE]);
    return huge > best ? huge : best;
}
