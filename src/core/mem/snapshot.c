/* src/core/mem/snapshot.c - a consistent JSON picture of a pool, taken under its
 * lock: settings, segments (for vmm: runs of mapped memory), every live and
 * pending block and the free space held from the backend, with per-owner and
 * per-kind totals. */
#include <stdio.h>
#include <stdlib.h>

#include "json_internal.h"

static const char *state_name(int state)
{
    return state == VRAM__LIVE ? "live" : state == VRAM__PENDING ? "pending" : "free";
}

static void add_block(vram_pool *p, vram__json *j, const vram__block *b, uint64_t addr,
                      uint64_t size)
{
    vram__json_object(j, NULL);
    vram__json_hex(j, "address", addr);
    vram__json_u64(j, "size", size);
    vram__json_str(j, "state", state_name(b->state));
    if (b->state != VRAM__FREE) {
        vram__json_u64(j, "requested", b->state == VRAM__LIVE ? b->requested : 0);
        vram__json_str(j, "owner", p->owners[b->owner].name);
        vram__json_str(j, "kind", vram_kind_name((vram_kind)b->kind));
        vram__json_hex(j, "stream", (uint64_t)(uintptr_t)b->stream);
    } else {
        vram__json_u64(j, "requested", 0);
        vram__json_null(j, "owner");
        vram__json_null(j, "kind");
        vram__json_null(j, "stream");
    }
    vram__json_end(j);
}

static int page_mapped(const vram_pool *p, int r, uint64_t addr)
{
    if (r == VRAM__HUGE) /* a huge block's segment is mapped whole */
        return 1;
    uint64_t i = p->vmm[r].page0 + (addr - p->vmm[r].span->addr) / p->granularity;
    return p->page_state[i] != VRAM__PAGE_UNMAPPED;
}

/* vmm: the parts of a free block that lie in mapped granules. */
static void add_free_mapped(vram_pool *p, vram__json *arr, const vram__block *b)
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
            add_block(p, arr, b, run_start, run);
            run = 0;
        }
        a = next;
    }
    if (run)
        add_block(p, arr, b, run_start, run);
}

static int cmp_span(const void *x, const void *y)
{
    const vram__span *a = *(vram__span *const *)x, *b = *(vram__span *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void add_segment(vram__json *j, uint64_t addr, uint64_t size, const char *what)
{
    vram__json_object(j, NULL);
    vram__json_hex(j, "address", addr);
    vram__json_u64(j, "size", size);
    vram__json_str(j, "type", what);
    vram__json_end(j);
}

static void add_segments(vram_pool *p, vram__json *arr, vram__span *const *spans, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p->policy == VRAM_POLICY_SEGMENTS || spans[i]->region == VRAM__HUGE)
            add_segment(arr, spans[i]->addr, spans[i]->size, "segment");
    if (p->policy == VRAM_POLICY_SEGMENTS)
        return;
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
            add_segment(arr, v->span->addr + i * p->granularity, (j - i) * p->granularity,
                        "mapped");
            i = j;
        }
    }
}

static void settings_json(vram_pool *p, vram__json *j)
{
    vram__json_object(j, "settings");
    vram__json_u64(j, "alignment", p->granule);
    vram__json_u64(j, "granularity", p->granularity);
    vram__json_u64(j, "retain_min", p->retain_min);
    vram__json_f64(j, "retain_ratio", p->retain_ratio);
    vram__json_f64(j, "headroom", p->headroom);
    vram__json_u64(j, "small_size", p->small_size);
    vram__json_u64(j, "large_round", p->large_round);
    vram__json_u64(j, "map_chunk", p->map_chunk * p->granularity);
    vram__json_u64(j, "huge_size", p->huge_size);
    vram__json_u64(j, "segment_small", p->segment_small);
    vram__json_u64(j, "segment_medium", p->segment_medium);
    vram__json_u64(j, "capacity", p->capacity);
    vram__json_bool(j, "backend_events", p->has_events);
    vram__json_end(j);
}

int vram__pool_snapshot_text(vram_pool *p, vram_buffer *out)
{
    vram__span **spans = vram__calloc(p->n_spans ? p->n_spans : 1, sizeof *spans);
    if (!spans)
        return VRAM_EHOSTMEM;
    size_t n = 0;
    for (vram__span *sp = p->spans; sp; sp = sp->next)
        spans[n++] = sp;
    qsort(spans, n, sizeof *spans, cmp_span);
    vram__json j;
    vram__json_begin(&j, out);
    vram__json_object(&j, NULL);
    vram__pool_summary_json(p, &j);
    settings_json(p, &j);
    vram__json_array(&j, "segments");
    add_segments(p, &j, spans, n);
    vram__json_end(&j);
    vram__json_array(&j, "blocks");
    for (size_t i = 0; i < n; i++) {
        for (const vram__block *b = spans[i]->head; b; b = b->next) {
            if (b->state != VRAM__FREE || p->policy == VRAM_POLICY_SEGMENTS)
                add_block(p, &j, b, b->addr, b->size);
            else
                add_free_mapped(p, &j, b);
        }
    }
    vram__json_end(&j);
    vram__json_end(&j);
    free(spans);
    return vram__json_done(&j);
}

int vram_pool_snapshot(vram_pool *p, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!p || !write || (flags & ~VRAM_PRINT_JSON))
        return vram__fail(VRAM_EINVAL, "vram_pool_snapshot: pool, write and known flags are "
                                       "required");
    vram_buffer b = {0};
    vram__pool_lock(p);
    int rc = vram__pool_snapshot_text(p, &b);
    vram__pool_unlock(p);
    return vram__json_flush(&b, rc, write, ctx);
}
