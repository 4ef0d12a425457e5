/* src/pipeline/stats.c - the streams' statistics: one stream's counters,
 * state and memory by kind read into a vram_stream_stats, the list of every
 * stream, and a stream's statistics as a JSON object (for the control API
 * and the printed JSON). */
#include <stdlib.h>
#include <string.h>

#include "base/json_out.h"
#include "service_internal.h"
#include "vramkit/stats.h"

void vram__stream_stats_locked(vram_service *svc, vram__stream *st, vram_stream_stats *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", st->id);
    snprintf(out->url, sizeof out->url, "%s", st->url);
    snprintf(out->error, sizeof out->error, "%s", st->error);
    out->state = st->state;
    out->width = st->info.width;
    out->height = st->info.height;
    out->frames_in = atomic_load(&st->frames_in);
    out->processed = atomic_load(&st->processed);
    out->dropped = atomic_load(&st->dropped);
    out->output_dropped = atomic_load(&st->output_dropped);
    out->faces = atomic_load(&st->faces);
    out->fps = (double)atomic_load(&st->fps_milli) / 1000.0;
    if (st->state == VRAM_STREAM_ENDED || st->state == VRAM_STREAM_FAILED) {
        /* Done: its mean rate from its first result to its last. */
        uint64_t a = atomic_load(&st->first_result_ns), b = atomic_load(&st->last_result_ns);
        out->fps = b > a && out->processed > 1 ? (double)(out->processed - 1) * 1e9 / (double)(b - a)
                                               : 0.0;
    }
    out->latency_p50_ms = vram__latency_quantile(&st->latency, 0.50);
    out->latency_p99_ms = vram__latency_quantile(&st->latency, 0.99);
    out->need_bytes = st->need;
    if (st->src && !st->released) {
        vram_source_stats ss;
        if (vram_source_stats_get(st->src, &ss) == 0) {
            out->damaged = ss.damaged;
            out->reconnects = ss.reconnects;
        }
    }
    /* By kind: the owner's blocks are its frames, decoder pictures and
     * staging; the pool counts per owner, so the kinds are what the stream
     * holds of each as it allocated them. */
    if (!st->released) {
        out->frames_bytes = st->info.frames_bytes;
        out->decoder_bytes = 0;
        if (st->src) {
            vram_source_stats ss;
            if (vram_source_stats_get(st->src, &ss) == 0)
                out->decoder_bytes = ss.decoder_bytes;
        }
        out->io_bytes = st->snap_rgb ? (uint64_t)st->info.width * st->info.height * 3u +
                                           st->jpeg_cap
                                     : 0;
        if (st->snap_nv12)
            out->io_bytes += (uint64_t)st->info.width *
                             vram__align_up((uint64_t)st->info.height, 2) * 3u / 2u;
    }
    vram_usage_stats u;
    if (vram_owner_stats_get(svc->host_pool, st->owner, &u) == 0)
        out->live_bytes = u.live_bytes;
    if (st->nvdec && vram_owner_stats_get(svc->dev_pool, st->dev_owner, &u) == 0)
        out->live_bytes += u.live_bytes;
    out->decode = st->info.decode;
    snprintf(out->fallback, sizeof out->fallback, "%s", st->info.fallback);
    out->gpu = svc->opts.gpu;
    st->last_damaged = out->damaged > st->last_damaged ? out->damaged : st->last_damaged;
    st->last_reconnects =
        out->reconnects > st->last_reconnects ? out->reconnects : st->last_reconnects;
    out->damaged = st->last_damaged;
    out->reconnects = st->last_reconnects;
}

const char *vram__stream_state_name(vram_stream_state s)
{
    switch (s) {
    case VRAM_STREAM_RUNNING:
        return "running";
    case VRAM_STREAM_RECONNECTING:
        return "reconnecting";
    case VRAM_STREAM_ENDED:
        return "ended";
    case VRAM_STREAM_FAILED:
        return "failed";
    }
    return "unknown";
}

int vram_service_streams(vram_service *svc, vram_stream_stats *out, size_t cap, size_t *n)
{
    if (!svc || !n || (!out && cap))
        return vram__fail(VRAM_EINVAL, "vram_service_streams: NULL argument");
    pthread_mutex_lock(&svc->mu);
    size_t k = 0;
    for (size_t i = 0; i < svc->n_streams; i++) {
        if (svc->streams[i]->admitting)
            continue;
        if (k < cap)
            vram__stream_stats_locked(svc, svc->streams[i], &out[k]);
        k++;
    }
    pthread_mutex_unlock(&svc->mu);
    *n = k;
    return 0;
}

int vram_service_stream_stats(vram_service *svc, const char *id, vram_stream_stats *out)
{
    if (!svc || !id || !out)
        return vram__fail(VRAM_EINVAL, "vram_service_stream_stats: NULL argument");
    pthread_mutex_lock(&svc->mu);
    for (size_t i = 0; i < svc->n_streams; i++) {
        vram__stream *st = svc->streams[i];
        if (!st->admitting && !strcmp(st->id, id)) {
            vram__stream_stats_locked(svc, st, out);
            pthread_mutex_unlock(&svc->mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&svc->mu);
    return vram__fail(VRAM_EINVAL, "no stream \"%s\"", id);
}

int vram__stats_copy(vram__streams_fn list, void *ctx, vram_stream_stats **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    /* Streams come and go between the count and the copy: take what fits,
     * a few more than counted. */
    size_t want = 0;
    int rc = list(ctx, NULL, 0, &want);
    size_t cap = want + 8;
    vram_stream_stats *s = rc ? NULL : calloc(cap, sizeof *s);
    if (!rc && !s)
        rc = vram__fail(VRAM_EHOSTMEM, "out of host memory for %zu streams' statistics", cap);
    size_t got = 0;
    if (!rc)
        rc = list(ctx, s, cap, &got);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    *n = got < cap ? got : cap;
    return 0;
}

static int service_streams(void *svc, vram_stream_stats *out, size_t cap, size_t *n)
{
    return vram_service_streams(svc, out, cap, n);
}

int vram__streams_copy(vram_service *svc, vram_stream_stats **out, size_t *n)
{
    return vram__stats_copy(service_streams, svc, out, n);
}

void vram__stream_stats_json(vram__json *j, const char *key, const vram_stream_stats *s)
{
    vram__json_object(j, key);
    vram__json_str(j, "id", s->id);
    vram__json_str(j, "url", s->url);
    vram__json_str(j, "state", vram__stream_state_name(s->state));
    if (s->error[0])
        vram__json_str(j, "error", s->error);
    vram__json_i64(j, "width", s->width);
    vram__json_i64(j, "height", s->height);
    vram__json_str(j, "decode", vram_decode_name(s->decode) ? vram_decode_name(s->decode) : "cpu");
    if (s->fallback[0])
        vram__json_str(j, "fallback", s->fallback);
    if (s->gpu >= 0)
        vram__json_i64(j, "gpu", s->gpu);
    vram__json_u64(j, "frames_in", s->frames_in);
    vram__json_u64(j, "processed", s->processed);
    vram__json_u64(j, "dropped", s->dropped);
    vram__json_u64(j, "damaged", s->damaged);
    vram__json_u64(j, "output_dropped", s->output_dropped);
    vram__json_u64(j, "reconnects", s->reconnects);
    vram__json_u64(j, "faces", s->faces);
    vram__json_f64(j, "fps", s->fps);
    vram__json_f64(j, "latency_p50_ms", s->latency_p50_ms);
    vram__json_f64(j, "latency_p99_ms", s->latency_p99_ms);
    vram__json_object(j, "memory");
    vram__json_u64(j, "frames_bytes", s->frames_bytes);
    vram__json_u64(j, "decoder_bytes", s->decoder_bytes);
    vram__json_u64(j, "io_bytes", s->io_bytes);
    vram__json_u64(j, "need_bytes", s->need_bytes);
    vram__json_u64(j, "live_bytes", s->live_bytes);
    vram__json_end(j);
    vram__json_end(j);
}
