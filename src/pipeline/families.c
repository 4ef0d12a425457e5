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

static uint64_t batches_of(const vram_service *svc)
{
    uint64_t batches = 0;
    for (unsigned w = 0; svc->workers && w < svc->n_workers; w++)
        batches += atomic_load(&svc->workers[w].batches);
    return batches;
}

/* A sample of `family` for one stream: its stream label, then the
 * service's gpu label (when it has one) and `extra`. */
static void sample(out *o, const char *family, const vram_stream_stats *s, const char *extra,
                   double v)
{
    put(o, "%s{stream=\"", family);
    if (!o->rc)
        o->rc = vram_metrics_write_label_value(o->write, o->ctx, s->id);
    put(o, "\"");
    if (s->gpu >= 0)
        put(o, ",gpu=\"%d\"", (int)s->gpu);
    put(o, "%s} %.17g\n", extra ? extra : "", v);
}

/* A service-wide sample: with the gpu label when the service has one. */
static void service_sample(out *o, const char *family, const vram_service *svc, double v)
{
    if (svc->opts.gpu >= 0)
        put(o, "%s{gpu=\"%d\"} %.17g\n", family, svc->opts.gpu, v);
    else
        put(o, "%s %.17g\n", family, v);
}

typedef struct streams_of {
    vram_stream_stats *all;
    size_t n;
} streams_of;

int vram__families_write(vram_service *const *svcs, size_t n_svcs, vram_write_fn write,
                         void *wctx)
{
    streams_of *per = vram__calloc(n_svcs ? n_svcs : 1, sizeof *per);
    if (!per)
        return VRAM_EHOSTMEM;
    int rc = 0;
    for (size_t k = 0; k < n_svcs && !rc; k++)
        rc = vram__streams_copy(svcs[k], &per[k].all, &per[k].n);
    out o = {write, wctx, rc};
#define EACH_STREAM(body)                                                                    \
    for (size_t k = 0; k < n_svcs; k++)                                                      \
        for (size_t i = 0; i < per[k].n; i++) {                                              \
            const vram_stream_stats *s = &per[k].all[i];                                     \
            body;                                                                            \
        }
#define FAMILY(name, type, help, expr)                                                       \
    put(&o, "# HELP vram_stream_" #name " " help "\n# TYPE vram_stream_" #name " " type "\n"); \
    EACH_STREAM(sample(&o, "vram_stream_" #name, s, NULL, expr))
    STREAM_FAMILIES(FAMILY)
#undef FAMILY
    put(&o, "# HELP vram_stream_state the stream's state (1 for the one it is in)\n"
            "# TYPE vram_stream_state gauge\n");
    EACH_STREAM({
        char extra[64];
        snprintf(extra, sizeof extra, ",state=\"%s\"", vram__stream_state_name(s->state));
        sample(&o, "vram_stream_state", s, extra, 1);
    })
#undef EACH_STREAM
#define SERVICE_FAMILY(name, type, help, expr)                                               \
    put(&o, "# HELP vram_service_" #name " " help "\n# TYPE vram_service_" #name " " type "\n"); \
    for (size_t k = 0; k < n_svcs; k++) {                                                    \
        const vram_service *svc = svcs[k];                                                   \
        service_sample(&o, "vram_service_" #name, svc, (double)(expr));                      \
    }
    SERVICE_FAMILY(streams, "gauge", "streams the service has", per[k].n)
    SERVICE_FAMILY(fixed_bytes, "gauge", "weights once and the workers' contexts and batch buffers",
                   svc->fixed_bytes)
    SERVICE_FAMILY(budget_bytes, "gauge", "the service's budget (0: none)", svc->opts.budget)
    SERVICE_FAMILY(batches_total, "counter", "batches run by the workers", batches_of(svc))
    SERVICE_FAMILY(snapshots_total, "counter", "snapshots written", atomic_load(&svc->snapshots))
    SERVICE_FAMILY(up, "gauge", "1 while the service's GPU serves, 0 once it failed",
                   !vram__service_failed(svc))
#undef SERVICE_FAMILY
    for (size_t k = 0; k < n_svcs; k++)
        free(per[k].all);
    free(per);
    return o.rc;
}

static int write_families(void *ctx, vram_write_fn write, void *wctx)
{
    vram_service *svc = ctx;
    return vram__families_write(&svc, 1, write, wctx);
}

int vram__families_add(vram_service *svc)
{
    return vram_metrics_add_families(svc->server, write_families, svc, &svc->families_id);
}
