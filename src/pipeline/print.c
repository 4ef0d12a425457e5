/* src/pipeline/print.c - the service's statistics for people and programs:
 * a table of every stream (state, frames in, processed, dropped, damaged,
 * fps, latency, reconnects, memory) with the totals and the service's
 * fixed memory, or one JSON object with the same and the pools' totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_out.h"
#include "service_internal.h"
#include "vramkit/stats.h"

typedef struct totals {
    uint64_t in, processed, dropped, damaged, output_dropped, reconnects, faces, live;
    double fps;
} totals;

static void add(totals *t, const vram_stream_stats *s)
{
    t->in += s->frames_in;
    t->processed += s->processed;
    t->dropped += s->dropped;
    t->damaged += s->damaged;
    t->output_dropped += s->output_dropped;
    t->reconnects += s->reconnects;
    t->faces += s->faces;
    t->live += s->live_bytes;
    t->fps += s->fps;
}

static int print_json(vram_service *svc, const vram_stream_stats *s, size_t n,
                      vram_write_fn write, void *ctx)
{
    vram_buffer b = {0};
    vram__json j;
    vram__json_begin(&j, &b);
    vram__json_object(&j, NULL);
    vram_service_info info;
    vram_service_info_get(svc, &info);
    vram__json_object(&j, "service");
    vram__json_str(&j, "model", info.model);
    vram__json_str(&j, "executor", info.executor);
    vram__json_str(&j, "detector", info.detector_blazeface ? "blazeface" : "raw");
    vram__json_u64(&j, "workers", info.workers);
    vram__json_u64(&j, "batch", info.batch);
    vram__json_u64(&j, "weights_bytes", info.weights_bytes);
    vram__json_u64(&j, "context_bytes", info.context_bytes);
    vram__json_u64(&j, "workspace_bytes", info.workspace_bytes);
    vram__json_u64(&j, "batch_io_bytes", info.batch_io_bytes);
    vram__json_u64(&j, "fixed_bytes", info.fixed_bytes);
    vram__json_u64(&j, "budget_bytes", info.budget);
    vram__json_f64(&j, "seconds", (double)(vram__now_ns() - svc->started_ns) / 1e9);
    vram__json_u64(&j, "snapshots", atomic_load(&svc->snapshots));
    vram__json_u64(&j, "snapshot_errors", atomic_load(&svc->snapshot_errors));
    uint64_t batches = 0, images = 0;
    for (unsigned w = 0; svc->workers && w < svc->n_workers; w++) {
        batches += atomic_load(&svc->workers[w].batches);
        images += atomic_load(&svc->workers[w].images);
    }
    vram__json_u64(&j, "batches", batches);
    vram__json_f64(&j, "mean_batch", batches ? (double)images / (double)batches : 0.0);
    vram__json_end(&j);
    vram_pool *pools[2] = {svc->host_pool, svc->dev_pool};
    vram__json_array(&j, "pools");
    for (int p = 0; p < 2; p++) {
        vram_pool_stats ps;
        if (!pools[p] || vram_pool_stats_counters(pools[p], &ps))
            continue;
        vram__json_object(&j, NULL);
        vram__json_str(&j, "pool", vram_pool_name(pools[p]));
        vram__json_u64(&j, "live_bytes", ps.live_bytes);
        vram__json_u64(&j, "peak_live_bytes", ps.peak_live_bytes);
        vram__json_u64(&j, "reserved_bytes", ps.reserved_bytes);
        vram__json_u64(&j, "allocs_total", ps.allocs_total);
        vram__json_end(&j);
    }
    vram__json_end(&j);
    totals t = {0};
    vram__json_array(&j, "streams");
    for (size_t i = 0; i < n; i++) {
        vram__stream_stats_json(&j, NULL, &s[i]);
        add(&t, &s[i]);
    }
    vram__json_end(&j);
    vram__json_object(&j, "totals");
    vram__json_u64(&j, "streams", n);
    vram__json_u64(&j, "frames_in", t.in);
    vram__json_u64(&j, "processed", t.processed);
    vram__json_u64(&j, "dropped", t.dropped);
    vram__json_u64(&j, "damaged", t.damaged);
    vram__json_u64(&j, "output_dropped", t.output_dropped);
    vram__json_u64(&j, "reconnects", t.reconnects);
    vram__json_u64(&j, "faces", t.faces);
    vram__json_f64(&j, "fps", t.fps);
    vram__json_u64(&j, "live_bytes", t.live);
    vram__json_end(&j);
    vram__json_end(&j);
    return vram__json_flush(&b, vram__json_done(&j), write, ctx);
}

static int print_text(vram_service *svc, const vram_stream_stats *s, size_t n,
                      vram_write_fn write, void *ctx)
{
    vram_buffer b = {0};
    char line[512], m1[32], m2[32];
    int rc = 0;
#define OUT(...)                                                                     \
    do {                                                                             \
        snprintf(line, sizeof line, __VA_ARGS__);                                    \
        if (!rc)                                                                     \
            rc = vram_write_buffer(&b, line, strlen(line));                          \
    } while (0)
    OUT("%-12s %-12s %8s %9s %7s %7s %7s %6s %8s %8s %5s %10s\n", "stream", "state", "in",
        "processed", "dropped", "damaged", "faces", "fps", "p50 ms", "p99 ms", "recon",
        "memory");
    totals t = {0};
    for (size_t i = 0; i < n; i++) {
        const vram_stream_stats *x = &s[i];
        vram__fmt_bytes(m1, sizeof m1, x->live_bytes);
        OUT("%-12.12s %-12s %8llu %9llu %7llu %7llu %7llu %6.1f %8.2f %8.2f %5llu %10s\n", x->id,
            vram__stream_state_name(x->state), (unsigned long long)x->frames_in,
            (unsigned long long)x->processed, (unsigned long long)(x->dropped + x->output_dropped),
            (unsigned long long)x->damaged, (unsigned long long)x->faces, x->fps,
            x->latency_p50_ms, x->latency_p99_ms, (unsigned long long)x->reconnects, m1);
        if (x->state == VRAM_STREAM_FAILED && x->error[0])
            OUT("  %s: %s\n", x->id, x->error);
        add(&t, x);
    }
    vram__fmt_bytes(m1, sizeof m1, t.live);
    OUT("%-12s %-12zu %8llu %9llu %7llu %7llu %7llu %6.1f %8s %8s %5llu %10s\n", "total", n,
        (unsigned long long)t.in, (unsigned long long)t.processed,
        (unsigned long long)(t.dropped + t.output_dropped), (unsigned long long)t.damaged,
        (unsigned long long)t.faces, t.fps, "", "", (unsigned long long)t.reconnects, m1);
    vram__fmt_bytes(m1, sizeof m1, svc->fixed_bytes);
    vram__fmt_bytes(m2, sizeof m2, svc->mem.weights_bytes);
    OUT("service: %s fixed (weights %s once, %u worker%s), %s executor, batch up to %u\n", m1,
        m2, svc->n_workers, svc->n_workers == 1 ? "" : "s", svc->executor, svc->batch);
#undef OUT
    if (rc) {
        vram_buffer_free(&b);
        return rc;
    }
    rc = write(ctx, b.data, b.len);
    vram_buffer_free(&b);
    return rc;
}

int vram_service_print(vram_service *svc, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!svc || !write)
        return vram__fail(VRAM_EINVAL, "vram_service_print: NULL argument");
    if (flags & ~VRAM_PRINT_JSON)
        return vram__fail(VRAM_EINVAL, "vram_service_print: unknown flags 0x%x", flags);
    size_t got = 0;
    vram_stream_stats *s = NULL;
    int rc = vram__streams_copy(svc, &s, &got);
    if (rc)
        return rc;
    rc = (flags & VRAM_PRINT_JSON) ? print_json(svc, s, got, write, ctx)
                                       : print_text(svc, s, got, write, ctx);
    free(s);
    return rc;
}
