/* src/pipeline/families.c - the service in the Prometheus exposition: per
 * stream families with a `stream` label (frames in, processed, dropped,
 * damaged, reconnects, faces, fps, latency, memory by kind, state) and the
 * service's own (streams, fixed need, budget, batches, snapshots), written
 * by the families writer the metrics server calls on every scrape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/writef.h"
#include "service_internal.h"

/* X(name, type, help, expression of vram_stream_stats *s) */
#define STREAM_FAMILIES(X)                                                                   \
    X(frames_in_total, "counter", "frames decoded", (double)s->frames_in)                    \
    X(processed_total, "counter", "frames through the model and into results",               \
      (double)s->processed)                                                                  \
    X(dropped_total, "counter", "oldest waiting frames dropped when the stream's queue was full", \
      (double)s->dropped)                                                                    \
    X(output_dropped_total, "counter", "results the full output queue refused",              \
      (double)s->output_dropped)                                                             \
    X(damaged_total, "counter", "packets or frames the decoder refused, skipped",            \
      (double)s->damaged)                                                                    \
    X(reconnects_total, "counter", "reconnects of a network source", (double)s->reconnects)  \
    X(faces_total, "counter", "faces found, summed over frames", (double)s->faces)           \
    X(fps, "gauge", "frames processed per second over the last second", s->fps)              \
    X(latency_p50_seconds, "gauge", "decode-to-result latency, median",                      \
      s->latency_p50_ms / 1000.0)                                                            \
    X(latency_p99_seconds, "gauge", "decode-to-result latency, 99th percentile",             \
      s->latency_p99_ms / 1000.0)                                                            \
    X(live_bytes, "gauge", "the stream owner's live bytes in the host pool",                 \
      (double)s->live_bytes)                                                                 \
    X(frames_bytes, "gauge", "its frame ring (kind frames)", (double)s->frames_bytes)        \
    X(decoder_bytes, "gauge", "its decoder's pictures (kind decoder)", (double)s->decoder_bytes) \
    X(io_bytes, "gauge", "its snapshot staging (kind io)", (double)s->io_bytes)              \
    X(need_bytes, "gauge", "its need computed at admission", (double)s->need_bytes)

typedef vram__writer out;
#define put vram__writef

static void sample(out *o, const char *family, const char *stream, const char *extra, double v)
{
    put(o, "%s{stream=\"", family);
    if (!o->rc)
        o->rc = vram_metrics_write_label_value(o->write, o->ctx, stream);
    put(o, "\"%s} %.17g\n", extra ? extra : "", v);
}

static int write_families(void *ctx, vram_write_fn write, void *wctx)
{
    vram_service *svc = ctx;
    size_t n = 0;
    vram_stream_stats *all = NULL;
    int rc = vram__streams_copy(svc, &all, &n);
    if (rc)
        return rc;
    out o = {write, wctx, 0};
#define FAMILY(name, type, help, expr)                                                       \
    put(&o, "# HELP vram_stream_" #name " " help "\n# TYPE vram_stream_" #name " " type "\n"); \
    for (size_t i = 0; i < n; i++) {                                                         \
        const vram_stream_stats *s = &all[i];                                                \
        sample(&o, "vram_stream_" #name, s->id, NULL, expr);                                 \
    }
    STREAM_FAMILIES(FAMILY)
#undef FAMILY
    put(&o, "# HELP vram_stream_state the stream's state (1 for the one it is in)\n"
            "# TYPE vram_stream_state gauge\n");
    for (size_t i = 0; i < n; i++) {
        char extra[64];
        snprintf(extra, sizeof extra, ",state=\"%s\"", vram__stream_state_name(all[i].state));
        sample(&o, "vram_stream_state", all[i].id, extra, 1);
    }
    uint64_t batches = 0;
    for (unsigned w = 0; svc->workers && w < svc->n_workers; w++)
        batches += atomic_load(&svc->workers[w].batches);
    put(&o, "# HELP vram_service_streams streams the service has\n"
            "# TYPE vram_service_streams gauge\nvram_service_streams %zu\n", n);
    put(&o, "# HELP vram_service_fixed_bytes weights once and the workers' contexts and batch "
            "buffers\n# TYPE vram_service_fixed_bytes gauge\nvram_service_fixed_bytes %llu\n",
        (unsigned long long)svc->fixed_bytes);
    put(&o, "# HELP vram_service_budget_bytes the service's budget (0: none)\n"
            "# TYPE vram_service_budget_bytes gauge\nvram_service_budget_bytes %llu\n",
        (unsigned long long)svc->opts.budget);
    put(&o, "# HELP vram_service_batches_total batches run by the workers\n"
            "# TYPE vram_service_batches_total counter\nvram_service_batches_total %llu\n",
        (unsigned long long)batches);
    put(&o, "# HELP vram_service_snapshots_total snapshots written\n"
            "# TYPE vram_service_snapshots_total counter\nvram_service_snapshots_total %llu\n",
        (unsigned long long)atomic_load(&svc->snapshots));
    free(all);
    return o.rc;
}

int vram__families_add(vram_service *svc)
{
    return vram_metrics_add_families(svc->server, write_families, svc, &svc->families_id);
}
