/* src/video/source_av.c - files and network streams through libav: at open
 * the input (av_input.c) and the first decoded picture, which fixes the
 * frame size and the estimate of the decoder's buffers; then the reading
 * loop: packets to the decoder, damaged packets and pictures counted and
 * skipped, pictures converted into ring slots (av_convert.c) with their
 * timestamps, a file started again at its end with `loop`, and a network
 * stream reopened when its peer goes away.
 *
 * Reconnecting: after the stream ends or fails, wait reconnect_initial_s,
 * then twice as long after each failed attempt, up to reconnect_max_s
 * (interruptible); give up with VRAM_EIO naming the URL after
 * VRAM__RECONNECT_ATTEMPTS (10) failed attempts in a row, or once attempts
 * have gone on for VRAM__RECONNECT_TOTAL_S (60 s), without a frame in
 * between (a reconnect that yields no frame counts as failed). */
#include "av_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/pixdesc.h>

#include "vramkit/log.h"

#define VRAM__RECONNECT_ATTEMPTS 10
#define VRAM__RECONNECT_TOTAL_S 60.0
#define READ_RETRIES 16       /* a file's read errors in a row before it ends */
#define DECODE_ERRORS_MAX 1000 /* decoder errors in a row before the input ends */

typedef struct reconnect_state {
    int failures;             /* attempts since the last frame */
    uint64_t since_ns;        /* when the first of them started */
} reconnect_state;

/* The next packet of our stream: 0, or libav's error (AVERROR_EOF at the
 * end). Network reads give up after open_timeout_s. */
static int read_packet(vram__av_source *a)
{
    vram_source *s = a->src;
    for (;;) {
        if (s->info.network)
            a->deadline_ns = vram__now_ns() + (uint64_t)(s->opts.open_timeout_s * 1e9);
        int err = av_read_frame(a->fmt, a->pkt);
        a->deadline_ns = 0;
        if (err < 0)
            return err;
        if (a->pkt->stream_index == a->stream)
            return 0;
        av_packet_unref(a->pkt);
    }
}

static void damaged(vram__av_source *a) { atomic_fetch_add(&a->src->damaged, 1); }

/* A picture held by the decoder: 0; 1 when the input ended (its end, a
 * network read that failed, an interrupt); negative when the decoder
 * cannot go on (the pool refused its pictures, say). */
static int decode(vram__av_source *a)
{
    vram_source *s = a->src;
    const vram__av_decoder_ops *d = a->decoder;
    int errors = 0;
    for (;;) {
        int err = d->receive(a);
        if (err == 0)
            return 0;
        if (err == AVERROR_EOF)
            return 1;
        if (err != AVERROR(EAGAIN)) {
            int rc = d->fatal(a);
            if (rc)
                return rc;
            damaged(a);
            if (++errors >= DECODE_ERRORS_MAX)
                return 1;
            continue;
        }
        if (vram__source_interrupted(s) || a->draining)
            return 1;
        err = read_packet(a);
        if (err == 0) {
            a->read_errors = 0;
            /* A packet the demuxer marks corrupt (a gap in an MPEG-TS, say)
             * still goes to the decoder, as with ffmpeg: what it cannot
             * decode it refuses or marks, and that is counted. */
            err = d->send(a, a->pkt);
            av_packet_unref(a->pkt);
            if (err < 0 && err != AVERROR(EAGAIN)) {
                int rc = d->fatal(a);
                if (rc)
                    return rc;
                damaged(a);
                if (++errors >= DECODE_ERRORS_MAX)
                    return 1;
            }
            continue;
        }
        if (vram__source_interrupted(s))
            return 1;
        if (err != AVERROR_EOF) {
            vram__av_err(err, a->read_error, sizeof a->read_error);
            if (err == AVERROR_EXIT)
                snprintf(a->read_error, sizeof a->read_error, "nothing read for %.1f s",
                         s->opts.open_timeout_s);
            if (!s->info.network && ++a->read_errors < READ_RETRIES)
                continue;
        } else {
            snprintf(a->read_error, sizeof a->read_error, "end of stream");
        }
        d->send(a, NULL); /* drain what the decoder still holds */
        a->draining = 1;
    }
}

/* The input starts again (a loop or a reconnect): pts keep rising. */
static void new_pass(vram__av_source *a)
{
    a->pass_base_s = a->delivered ? a->last_pts_s + a->frame_dur_s : 0;
    a->pass_first_ts = AV_NOPTS_VALUE;
    a->pass_frames = 0;
}

/* Seconds since the stream's first frame, rising across passes. */
static double stamp(vram__av_source *a)
{
    int64_t ts = a->pic_ts;
    if (ts != AV_NOPTS_VALUE && a->pass_first_ts == AV_NOPTS_VALUE) {
        a->pass_first_ts = ts;
        a->pass_base_s += (double)a->pass_frames * a->frame_dur_s; /* frames without one */
    }
    double pts;
    if (ts == AV_NOPTS_VALUE || a->pass_first_ts == AV_NOPTS_VALUE)
        pts = a->pass_frames ? a->last_pts_s + a->frame_dur_s : a->pass_base_s;
    else
        pts = a->pass_base_s + (double)(ts - a->pass_first_ts) * av_q2d(a->tb);
    if (a->delivered && !(pts > a->last_pts_s))
        pts = a->last_pts_s + a->frame_dur_s;
    a->last_pts_s = pts;
    a->pass_frames++;
    a->delivered++;
    return pts;
}

/* loop: back to the file's start (seeking, else reopening it). */
static int restart(vram__av_source *a)
{
    int err = -1;
    if (a->fmt) {
        int64_t start = a->fmt->start_time != AV_NOPTS_VALUE ? a->fmt->start_time : 0;
        err = avformat_seek_file(a->fmt, -1, INT64_MIN, start, start, 0);
        if (err < 0)
            err = av_seek_frame(a->fmt, -1, 0, AVSEEK_FLAG_BYTE);
    }
    if (err >= 0) {
        a->decoder->flush(a);
        a->draining = 0;
        a->read_errors = 0;
    } else {
        vram__av_input_close(a);
        int rc = vram__av_input_open(a);
        if (rc)
            return rc < 0 ? rc : 1;
    }
    new_pass(a);
    atomic_fetch_add(&a->src->loops, 1);
    return 0;
}

/* The network peer went away: reopen with backoff. 0, 1 (interrupted), or
 * VRAM_EIO once it gives up. */
static int reconnect(vram__av_source *a, reconnect_state *r)
{
    vram_source *s = a->src;
    char last[384];
    snprintf(last, sizeof last, "%s", a->read_error[0] ? a->read_error : "the stream ended");
    size_t named = strlen("video source : ") + strlen(s->url); /* what a sentence starts with */
    vram__av_input_close(a);
    double wait = s->opts.reconnect_initial_s;
    for (int i = 0; i < r->failures; i++)
        wait = wait * 2 < s->opts.reconnect_max_s ? wait * 2 : s->opts.reconnect_max_s;
    if (!r->failures)
        r->since_ns = vram__now_ns();
    for (;;) {
        vram_log(VRAM_LOG_WARN, "video source %s: %s; reconnecting in %.2f s", s->url, last, wait);
        if (vram__source_sleep_until(s, vram__now_ns() + (uint64_t)(wait * 1e9)))
            return 1;
        int rc = vram__av_input_open(a);
        if (rc == 1 || vram__source_interrupted(s))
            return 1;
        if (rc == 0) {
            atomic_fetch_add(&s->reconnects, 1);
            new_pass(a);
            vram__source_repace(s);
            a->read_error[0] = 0;
            r->failures++; /* until a frame comes */
            return 0;
        }
        const char *why = vram_last_error();
        snprintf(last, sizeof last, "%s", strlen(why) > named ? why + named : why);
        r->failures++;
        double spent = (double)(vram__now_ns() - r->since_ns) / 1e9;
        if (r->failures >= VRAM__RECONNECT_ATTEMPTS || spent >= VRAM__RECONNECT_TOTAL_S)
            return vram__fail(VRAM_EIO,
                              "video source %s: gave up reconnecting after %d attempts over %.1f s "
                              "(the last one: %s)",
                              s->url, r->failures, spent, last);
        wait = wait * 2 < s->opts.reconnect_max_s ? wait * 2 : s->opts.reconnect_max_s;
    }
}

typedef struct av_impl {
    vram__av_source a;
    reconnect_state r;
} av_impl;

static int av_next(vram_source *s, vram_frame *f)
{
    av_impl *impl = s->impl;
    vram__av_source *a = &impl->a;
    for (;;) {
        if (vram__source_interrupted(s))
            return 1;
        if (!a->have_frame) {
            int rc = a->fmt ? decode(a) : 1;
            if (rc < 0)
                return rc;
            if (rc == 1) {
                if (vram__source_interrupted(s))
                    return 1;
                if (s->info.network)
                    rc = reconnect(a, &impl->r);
                else if (s->opts.loop && a->pass_frames > 0)
                    rc = restart(a);
                if (rc)
                    return rc;
                continue;
            }
        }
        a->have_frame = 0;
        int rc = a->decoder->deliver(a, f);
        if (rc == VRAM__DECODE_SKIPPED)
            continue;
        if (rc == 0) {
            f->pts_s = stamp(a);
            impl->r.failures = 0;
        }
        return rc;
    }
}

static void av_close(vram_source *s)
{
    av_impl *impl = s->impl;
    if (!impl)
        return;
    vram__av_source *a = &impl->a;
    vram__av_input_close(a);
    av_packet_free(&a->pkt);
    a->decoder->fini(a);
    free(impl);
    s->impl = NULL;
}

/* Open the input and decode its first picture (delivered first). */
static int prime(vram__av_source *a)
{
    vram_source *s = a->src;
    int rc = vram__av_input_open(a);
    if (rc)
        return rc < 0 ? rc : vram__fail(VRAM_EIO, "video source %s: cannot open it", s->url);
    rc = decode(a);
    if (rc < 0)
        return rc;
    if (rc == 1)
        return vram__fail(VRAM_EPARSE, "video source %s: no picture could be decoded from it (%s)",
                          s->url, a->read_error[0] ? a->read_error : "no data");
    a->have_frame = 1;
    if ((rc = a->decoder->opened(a)))
        return rc;
    AVStream *st = a->fmt->streams[a->stream];
    AVRational rate = av_guess_frame_rate(a->fmt, st, NULL);
    s->info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    a->frame_dur_s = s->info.fps > 0 ? 1.0 / s->info.fps : 0.04;
    s->info.width = a->pic_w;
    s->info.height = a->pic_h;
    snprintf(s->info.codec, sizeof s->info.codec, "%s", avcodec_get_name(st->codecpar->codec_id));
    s->info.seekable = !s->info.network && a->fmt->pb &&
                       (a->fmt->pb->seekable & AVIO_SEEKABLE_NORMAL);
    new_pass(a);
    return 0;
}

/* Open with one decoder: on error everything of it is given back. */
static int open_with(vram_source *s, const vram__av_decoder_ops *decoder)
{
    av_impl *impl = vram__calloc(1, sizeof *impl);
    if (!impl)
        return VRAM_EHOSTMEM;
    vram__av_source *a = &impl->a;
    a->src = s;
    a->decoder = decoder;
    a->pic_ts = AV_NOPTS_VALUE;
    s->impl = impl;
    int rc = 0;
    if (!(a->pkt = av_packet_alloc()))
        rc = vram__fail(VRAM_EHOSTMEM, "video source %s: out of host memory", s->url);
    if (rc == 0)
        rc = decoder->init(a);
    if (rc == 0)
        rc = prime(a);
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        av_close(s);
        return vram__error_restore(&e, rc);
    }
    return 0;
}

/* NVDEC, the CPU, or auto: NVDEC where a device is given and NVDEC takes
 * the stream, else the CPU with the reason kept. */
static int av_open(vram_source *s)
{
    s->info.network = vram__av_is_network(s->url);
    vram_decode want = s->opts.decode;
    if (want == VRAM_DECODE_CPU)
        return open_with(s, &vram__decode_cpu_ops);
    if (want == VRAM_DECODE_NVDEC)
        return open_with(s, &vram__decode_nvdec_ops);
    int rc = !s->opts.device && !s->opts.cuda_context
                 ? vram__fail(VRAM_ENOSYS, "no GPU was given to decode on")
                 : open_with(s, &vram__decode_nvdec_ops);
    if (rc != VRAM_ENOSYS)
        return rc;
    const char *why = vram_last_error();
    size_t named = strlen("video source : ") + strlen(s->url);
    snprintf(s->info.fallback, sizeof s->info.fallback, "%s",
             strncmp(why, "video source ", 13) == 0 && strlen(why) > named ? why + named : why);
    vram_log(VRAM_LOG_INFO, "video source %s: decoding on the CPU: %s", s->url,
             s->info.fallback);
    return open_with(s, &vram__decode_cpu_ops);
}

static void av_release(vram_source *s, vram_frame *f)
{
    av_impl *impl = s->impl;
    if (impl && impl->a.decoder->release)
        impl->a.decoder->release(&impl->a, f);
}

const vram__source_ops vram__source_av_ops = {
    .kind = "libav",
    .open = av_open,
    .next = av_next,
    .release = av_release,
    .close = av_close,
};
