/* src/core/mem/vmm_view.c - what the vmm policy shows of its memory: the
 * largest free run of mapped memory (statistics) and, in snapshots, the
 * mapped runs and the mapped parts of free blocks. */
#include <stdlib.h>

#include "base/internal.h"
#include "json_internal.h"
#include "vmm_internal.h"

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
    vram__page_range(p, b->region, b->addr, b->size, &first, &last);
    uint64_t fa = b->addr, fb = b->addr + b->size;
    uint64_t ends[2] = {first, last};
    for (int e = 0; e < (first == last ? 1 : 2); e++) {
        if (p->page_state[ends[e]] != VRAM__PAGE_USED)
            continue;
        uint64_t pa = vram__page_addr(p, (int64_t)ends[e]);
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
        uint64_t pa = vram__page_addr(p, gi);
        add_interval(&c, vram__page_region(p, gi), pa, pa + p->granularity);
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

static int page_mapped(const vram_pool *p, int r, uint64_t addr)
{
    if (r == VRAM__HUGE) /* a huge block's segment is mapped whole */
        return 1;
    uint64_t i = p->vmm[r].page0 + (addr - p->vmm[r].span->addr) / p->granularity;
    return p->page_state[i] != VRAM__PAGE_UNMAPPED;
}

void vram__vmm_free_json(vram_pool *p, vram__json *arr, const vram__block *b)
{
    uint64_t g = p->granularity, end = b->addr + b->size;
    uint64_t run = 0, run_start = 0;
    for (uint64_t a = b->addr; a < end;) {
        uint64_t next = (a / g + 1) * g;
        if (next > end)
            next = end;
        if (page_mapped(p, b->region, a)) {
            if (!run)
                run_start = a;
            run += next - a;
        } else if (run) {
            vram__snapshot_block(p, arr, b, run_start, run);
            run = 0;
        }
        a = next;
    }
    if (run)
        vram__snapshot_block(p, arr, b, run_start, run);
}

void vram__vmm_held_json(vram_pool *p, vram__json *arr, vram__span *const *spans, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (spans[i]->region == VRAM__HUGE)
            vram__snapshot_segment(arr, spans[i]->addr, spans[i]->size, "segment");
    for (int r = 0; r < VRAM__REGIONS; r++) {
        const vram__vmm_region *v = &p->vmm[r];
        for (uint64_t i = 0; i < v->npages;) {
            if (p->page_state[v->page0 + i] == VRAM__PAGE_UNMAPPED) {
                i++;
                continue;
            }
            uint64_t j = i + 1;
            while (j < v->npages && p->page_state[v->page0 + j] != VRAM__PAGE_UNMAPPED)
                j++;
            vram__snapshot_segment(arr, v->span->addr + i * p->granularity,
                                   (j - i) * p->granularity, "mapped");
            i = j;
        }
    }
}
