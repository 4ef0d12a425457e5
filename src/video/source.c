/* src/video/source.c - the public functions of a video source
 * (vramkit/video.h): open dispatches on the URL to a kind (synthetic
 * patterns or libav), takes the frame ring from the pool, and from then
 * on next, release, pacing, interrupt, the counters and close are the
 * same for every kind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source_internal.h"

#define SYNTHETIC_PREFIX "synthetic:"

int vram__source_sleep_until(vram_source *s, uint64_t deadline_ns)
{
    pthread_mutex_lock(&s->sleep_mu);
    for (;;) {
        if (vram__source_interrupted(s)) {
            pthread_mutex_unlock(&s->sleep_mu);
            return 1;
        }
        uint64_t now = vram__now_ns();
        if (now >= deadline_ns)
            break;
        struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                              .tv_nsec = (long)(deadline_ns % 1000000000u)};
        pthread_cond_timedwait(&s->sleep_cv, &s->sleep_mu, &ts);
    }
    pthread_mutex_unlock(&s->sleep_mu);
    return 0;
}

static int sleep_init(vram_source *s)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        return vram__fail(VRAM_EHOSTMEM, "video source: cannot create a condition variable");
    int bad = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) || pthread_cond_init(&s->sleep_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (bad)
        return vram__fail(VRAM_EHOSTMEM, "video source: cannot create a condition variable");
    if (pthread_mutex_init(&s->sleep_mu, NULL)) {
        pthread_cond_destroy(&s->sleep_cv);
        return vram__fail(VRAM_EHOSTMEM, "video source: cannot create a lock");
    }
    s->sleep_locks = 1;
    return 0;
}

static void source_free(vram_source *s)
{
    if (s->impl)
        s->ops->close(s);
    vram__ring_close(&s->ring);
    if (s->sleep_locks) {
        pthread_cond_destroy(&s->sleep_cv);
        pthread_mutex_destroy(&s->sleep_mu);
    }
    free(s->url);
    free(s);
}

static int opts_check(const vram_source_opts *o)
{
    if (!o->url || !o->url[0])
        return vram__fail(VRAM_EINVAL, "vram_source_open: no url");
    if ((unsigned)o->decode > VRAM_DECODE_AUTO)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: decode %d is not cpu, nvdec or auto",
                          o->url, (int)o->decode);
    if (!o->pool && o->decode != VRAM_DECODE_NVDEC)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: no pool", o->url);
    if (o->decode == VRAM_DECODE_NVDEC && !o->device && !o->cuda_context)
        return vram__fail(VRAM_EINVAL,
                          "vram_source_open %s: decoding with NVDEC needs a device or a CUDA "
                          "context", o->url);
    if (o->extra_surfaces > 32)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: extra_surfaces %u is not in 0..32",
                          o->url, o->extra_surfaces);
    if (o->ring_frames == 1 || o->ring_frames > 1024)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: ring_frames %u is not in 2..1024",
                          o->url, o->ring_frames);
    if (o->decoder_threads < 0 || o->decoder_threads > 64)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: decoder_threads %d is not in 0..64",
                          o->url, o->decoder_threads);
    if (o->reconnect_initial_s < 0 || o->reconnect_max_s < 0 || o->open_timeout_s < 0)
        return vram__fail(VRAM_EINVAL, "vram_source_open %s: negative times", o->url);
    return 0;
}

int vram_source_open(const vram_source_opts *opts, vram_source **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_source_open: out is NULL");
    *out = NULL;
    if (!opts)
        return vram__fail(VRAM_EINVAL, "vram_source_open: opts is NULL");
    vram_source_opts o;
    vram_source_opts_init(&o);
    int rc = vram__opts_take(&o, opts, sizeof o, "vram_source_opts");
    if (rc || (rc = opts_check(&o)))
        return rc;
    if (!o.ring_frames)
        o.ring_frames = 4;
    if (!o.decoder_threads)
        o.decoder_threads = 1;
    if (o.reconnect_initial_s == 0)
        o.reconnect_initial_s = 0.5;
    if (o.reconnect_max_s == 0)
        o.reconnect_max_s = 8.0;
    if (o.reconnect_max_s < o.reconnect_initial_s)
        o.reconnect_max_s = o.reconnect_initial_s;
    if (o.open_timeout_s == 0)
        o.open_timeout_s = 5.0;

    vram_source *s = vram__calloc(1, sizeof *s);
    if (!s)
        return VRAM_EHOSTMEM;
    if (!(s->url = vram__strdup(o.url))) {
        free(s);
        return VRAM_EHOSTMEM;
    }
    o.url = s->url;
    s->opts = o;
    if ((rc = sleep_init(s))) {
        source_free(s);
        return rc;
    }
    s->ops = strncmp(s->url, SYNTHETIC_PREFIX, strlen(SYNTHETIC_PREFIX)) == 0
                 ? &vram__source_synthetic_ops
                 : &vram__source_av_ops;
    if ((rc = s->ops->open(s))) {
        vram__saved_error e;
        vram__error_save(&e);
        source_free(s);
        return vram__error_restore(&e, rc);
    }
    rc = vram__ring_open(&s->ring, s->info.device_frames ? NULL : o.pool, o.owner, o.ring_frames,
                         s->info.width, s->info.height);
    if (rc) {
        vram__fail_prefix(rc, "video source %s: its ring of %u frames: ", s->url, o.ring_frames);
        vram__saved_error e;
        vram__error_save(&e);
        source_free(s);
        return vram__error_restore(&e, rc);
    }
    if (!s->info.device_frames) { /* nvdec: the output surfaces, as the decoder said */
        s->info.frame_bytes = s->ring.frame_bytes;
        s->info.frames_bytes = s->ring.frame_bytes * o.ring_frames;
    }
    *out = s;
    return 0;
}

int vram_source_info_get(const vram_source *s, vram_source_info *out)
{
    if (!s || !out)
        return vram__fail(VRAM_EINVAL, "vram_source_info_get: NULL argument");
    *out = s->info;
    return 0;
}

int vram_source_stats_get(vram_source *s, vram_source_stats *out)
{
    if (!s || !out)
        return vram__fail(VRAM_EINVAL, "vram_source_stats_get: NULL argument");
    *out = (vram_source_stats){
        .frames = atomic_load(&s->frames),
        .damaged = atomic_load(&s->damaged),
        .reconnects = atomic_load(&s->reconnects),
        .loops = atomic_load(&s->loops),
        .decoder_bytes = atomic_load(&s->decoder_bytes),
    };
    return 0;
}

/* realtime: wait until the frame's pts is due, counted from the wall time
 * of the first frame (or of the first after a reconnect). 1: interrupted. */
static int pace(vram_source *s, const vram_frame *f)
{
    uint64_t now = vram__now_ns();
    if (!s->paced || s->repace) {
        s->paced = 1;
        s->repace = 0;
        s->pace_t0_ns = now;
        s->pace_pts0_s = f->pts_s;
        return 0;
    }
    double ahead = f->pts_s - s->pace_pts0_s;
    if (ahead <= 0)
        return 0;
    return vram__source_sleep_until(s, s->pace_t0_ns + (uint64_t)(ahead * 1e9));
}

int vram_source_next(vram_source *s, vram_frame **frame)
{
    if (frame)
        *frame = NULL;
    if (!s || !frame)
        return vram__fail(VRAM_EINVAL, "vram_source_next: NULL argument");
    if (s->failed)
        return vram__fail(s->failed, "%s", s->failure);
    if (s->ended || vram__source_interrupted(s))
        return 1;
    vram_frame *f;
    if (vram__ring_acquire(&s->ring, &f))
        return 1;
    int rc = s->ops->next(s, f);
    if (rc == 0 && s->opts.realtime && pace(s, f))
        rc = 1;
    if (rc) {
        if (s->ops->release)
            s->ops->release(s, f);
        vram__ring_release(&s->ring, f);
        if (rc < 0) {
            s->failed = rc;
            snprintf(s->failure, sizeof s->failure, "%s", vram_last_error());
        } else if (!vram__source_interrupted(s)) {
            s->ended = 1;
        }
        return rc;
    }
    f->index = s->next_index++;
    f->decoded_ns = vram__now_ns();
    f->reserved = 0;
    atomic_fetch_add(&s->frames, 1);
    *frame = f;
    return 0;
}

void vram_source_release(vram_source *s, vram_frame *frame)
{
    if (!s || !frame)
        return;
    if (s->ops->release)
        s->ops->release(s, frame);
    vram__ring_release(&s->ring, frame);
}

void vram_source_interrupt(vram_source *s)
{
    if (!s)
        return;
    atomic_store_explicit(&s->interrupted, 1, memory_order_release);
    pthread_mutex_lock(&s->sleep_mu);
    pthread_cond_broadcast(&s->sleep_cv);
    pthread_mutex_unlock(&s->sleep_mu);
    vram__ring_interrupt(&s->ring);
}

int vram_source_close(vram_source *s)
{
    if (!s)
        return 0;
    uint32_t held = vram__ring_held(&s->ring);
    if (held)
        return vram__fail(VRAM_EBUSY, "video source %s: %u frame%s still held (release them first)",
                          s->url, held, held == 1 ? "" : "s");
    source_free(s);
    return 0;
}
