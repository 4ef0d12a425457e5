/* src/mem/snapshot.c - a consistent JSON picture of a pool, taken under its
 * lock: settings, segments (for vmm: runs of mapped memory), every live and
 * pending block and the free space held from the backend, with per-owner and
 * per-kind totals. */
#include <stdio.h>
#include <stdlib.h>

#include "json_internal.h"

static cJSON *hex(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
    return cJSON_CreateString(buf);
}

static const char *state_name(int state)
{
    return state == VRAM__LIVE ? "live" : state == VRAM__PENDING ? "pending" : "free";
}

static void add_block(vram_pool *p, cJSON *arr, const vram__block *b, uint64_t addr, uint64_t size)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddItemToObject(o, "address", hex(addr));
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddStringToObject(o, "state", state_name(b->state));
    if (b->state != VRAM__FREE) {
        cJSON_AddNumberToObject(o, "requested", (double)(b->state == VRAM__LIVE ? b->requested : 0));
        cJSON_AddStringToObject(o, "owner", p->owners[b->owner].name);
        cJSON_AddStringToObject(o, "kind", vram_kind_name((vram_kind)b->kind));
        cJSON_AddItemToObject(o, "stream", hex((uint64_t)(uintptr_t)b->stream));
    } else {
        cJSON_AddNumberToObject(o, "requested", 0);
        cJSON_AddNullToObject(o, "owner");
        cJSON_AddNullToObject(o, "kind");
        cJSON_AddNullToObject(o, "stream");
    }
    cJSON_AddItemToArray(arr, o);
}

static int page_mapped(const vram_pool *p, int r, uint64_t addr)
{
    if (r == VRAM__HUGE) /* a huge block's segment is mapped whole */
        return 1;
    uint64_t i = p->vmm[r].page0 + (addr - p->vmm[r].span->addr) / p->granularity;
    return p->page_state[i] != VRAM__PAGE_UNMAPPED;
}

/* vmm: the parts of a free block that lie in mapped granules. */
static void add_free_mapped(vram_pool *p, cJSON *arr, const vram__block *b)
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

static void add_segment(cJSON *arr, uint64_t addr, uint64_t size, const char *what)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddItemToObject(o, "address", hex(addr));
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddStringToObject(o, "type", what);
    cJSON_AddItemToArray(arr, o);
}

static void add_segments(vram_pool *p, cJSON *arr, vram__span *const *spans, size_t n)
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

static cJSON *settings_json(vram_pool *p)
{
    cJSON *s = cJSON_CreateObject();
    if (!s)
        return NULL;
    cJSON_AddNumberToObject(s, "alignment", (double)p->granule);
    cJSON_AddNumberToObject(s, "granularity", (double)p->granularity);
    cJSON_AddNumberToObject(s, "retain_min", (double)p->retain_min);
    cJSON_AddNumberToObject(s, "retain_ratio", p->retain_ratio);
    cJSON_AddNumberToObject(s, "small_size", (double)p->small_size);
    cJSON_AddNumberToObject(s, "large_round", (double)p->large_round);
    cJSON_AddNumberToObject(s, "map_chunk", (double)(p->map_chunk * p->granularity));
    cJSON_AddNumberToObject(s, "huge_size", (double)p->huge_size);
    cJSON_AddNumberToObject(s, "segment_small", (double)p->segment_small);
    cJSON_AddNumberToObject(s, "segment_medium", (double)p->segment_medium);
    cJSON_AddNumberToObject(s, "capacity", (double)p->capacity);
    cJSON_AddBoolToObject(s, "backend_events", p->has_events);
    return s;
}

cJSON *vram__pool_snapshot_json(vram_pool *p)
{
    vram__span **spans = vram__calloc(p->n_spans ? p->n_spans : 1, sizeof *spans);
    cJSON *root = spans ? vram__pool_summary_json(p) : NULL;
    if (root) {
        size_t n = 0;
        for (vram__span *sp = p->spans; sp; sp = sp->next)
            spans[n++] = sp;
        qsort(spans, n, sizeof *spans, cmp_span);
        cJSON_AddItemToObject(root, "settings", settings_json(p));
        cJSON *segs = cJSON_AddArrayToObject(root, "segments");
        if (segs)
            add_segments(p, segs, spans, n);
        cJSON *blocks = cJSON_AddArrayToObject(root, "blocks");
        for (size_t i = 0; blocks && i < n; i++) {
            for (const vram__block *b = spans[i]->head; b; b = b->next) {
                if (b->state != VRAM__FREE)
                    add_block(p, blocks, b, b->addr, b->size);
                else if (p->policy == VRAM_POLICY_SEGMENTS)
                    add_block(p, blocks, b, b->addr, b->size);
                else
                    add_free_mapped(p, blocks, b);
            }
        }
    }
    free(spans);
    return root;
}

int vram_pool_snapshot(vram_pool *p, vram_write_fn write, void *ctx)
{
    if (!p || !write)
        return vram__fail(VRAM_EINVAL, "vram_pool_snapshot: pool and write are required");
    vram__pool_lock(p);
    cJSON *root = vram__pool_snapshot_json(p);
    vram__pool_unlock(p);
    return vram__emit_json(root, write, ctx);
}
