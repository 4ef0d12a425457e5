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

void vram__snapshot_block(vram_pool *p, vram__json *j, const vram__block *b, uint64_t addr,
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

static int cmp_span(const void *x, const void *y)
{
    const vram__span *a = *(vram__span *const *)x, *b = *(vram__span *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

void vram__snapshot_segment(vram__json *j, uint64_t addr, uint64_t size, const char *what)
{
    vram__json_object(j, NULL);
    vram__json_hex(j, "address", addr);
    vram__json_u64(j, "size", size);
    vram__json_str(j, "type", what);
    vram__json_end(j);
}

static void settings_json(vram_pool *p, vram__json *j)
{
    vram__json_object(j, "settings");
    vram__json_u64(j, "alignment", p->granule);
    vram__json_u64(j, "granularity", p->granularity);
    vram__json_u64(j, "pool_limit", p->limit);
    vram__json_u64(j, "decay_ms", p->decay_ms);
    vram__json_u64(j, "retain_min", p->retain_min);
    vram__json_u64(j, "place_candidates", p->place_candidates);
    vram__json_u64(j, "stream_waits", (uint64_t)p->stream_waits);
    vram__json_u64(j, "reclaim_large", (uint64_t)p->reclaim_large);
    vram__json_u64(j, "reclaim_min", p->reclaim_min);
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
    p->ops->held_json(p, &j, spans, n);
    vram__json_end(&j);
    vram__json_array(&j, "blocks");
    for (size_t i = 0; i < n; i++) {
        for (const vram__block *b = spans[i]->head; b; b = b->next) {
            if (b->state != VRAM__FREE)
                vram__snapshot_block(p, &j, b, b->addr, b->size);
            else
                p->ops->free_json(p, &j, b);
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
