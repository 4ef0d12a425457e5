/* src/video/decode_cpu.c - the libav source's CPU decoder: libavcodec with
 * the source's threads, its pictures in buffers from the pool
 * (av_buffers.c), damaged pictures counted and skipped, each delivered
 * picture converted into its ring slot as RGB24 (av_convert.c), and the
 * estimate of the decoder's buffers from the first picture. */
#include "av_input.h"

#include <stdio.h>

#include <libavutil/pixdesc.h>

static int cpu_init(vram__av_source *a)
{
    vram_source *s = a->src;
    int rc = vram__av_buffers_init(&a->bufs, s->opts.pool, s->opts.owner, &s->decoder_bytes);
    if (rc)
        return rc;
    a->bufs_made = 1;
    if (!(a->frame = av_frame_alloc()))
        return vram__fail(VRAM_EHOSTMEM, "video source %s: out of host memory", s->url);
    return 0;
}

static int cpu_open(vram__av_source *a)
{
    vram_source *s = a->src;
    AVStream *st = a->fmt->streams[a->stream];
    const AVCodec *codec = avcodec_find_decoder(st->codecpar->codec_id);
    if (!codec)
        return vram__fail(VRAM_EPARSE, "video source %s: no decoder for its video codec %s",
                          s->url, avcodec_get_name(st->codecpar->codec_id));
    if (!(a->dec = avcodec_alloc_context3(codec)))
        return vram__fail(VRAM_EHOSTMEM, "video source %s: out of host memory", s->url);
    char why[128];
    int err = avcodec_parameters_to_context(a->dec, st->codecpar);
    if (err >= 0) {
        a->dec->pkt_timebase = st->time_base;
        a->dec->thread_count = s->opts.decoder_threads;
        if (s->opts.decoder_threads <= 1) /* one thread: no frame threads to ask for */
            a->dec->thread_type = FF_THREAD_SLICE;
        a->dec->opaque = &a->bufs;
        a->dec->get_buffer2 = vram__av_get_buffer2;
#if FF_API_THREAD_SAFE_CALLBACKS /* libavcodec 58 and 59 ask to be told */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        a->dec->thread_safe_callbacks = 1;
#pragma GCC diagnostic pop
#endif
        err = avcodec_open2(a->dec, codec, NULL);
    }
    if (err < 0)
        return vram__fail(VRAM_EPARSE, "video source %s: cannot open its %s decoder: %s", s->url,
                          codec->name, vram__av_err(err, why, sizeof why));
    return 0;
}

static void cpu_drop(vram__av_source *a)
{
    if (a->frame)
        av_frame_unref(a->frame);
}

static void cpu_close(vram__av_source *a)
{
    cpu_drop(a);
    avcodec_free_context(&a->dec);
}

static int cpu_send(vram__av_source *a, const AVPacket *pkt)
{
    return avcodec_send_packet(a->dec, pkt);
}

static int cpu_receive(vram__av_source *a)
{
    for (;;) {
        int err = avcodec_receive_frame(a->dec, a->frame);
        if (err)
            return err;
        if (a->frame->decode_error_flags || (a->frame->flags & AV_FRAME_FLAG_CORRUPT)) {
            atomic_fetch_add(&a->src->damaged, 1);
            av_frame_unref(a->frame);
            continue;
        }
        a->pic_ts = a->frame->best_effort_timestamp;
        a->pic_w = a->frame->width;
        a->pic_h = a->frame->height;
        return 0;
    }
}

static int cpu_fatal(vram__av_source *a)
{
    int rc = vram__av_buffers_refused(&a->bufs);
    return rc ? vram__fail_prefix(rc, "video source %s: its decoder's pictures: ", a->src->url)
              : 0;
}

static int cpu_deliver(vram__av_source *a, vram_frame *f)
{
    vram_source *s = a->src;
    int rc = vram__av_convert(&a->scaler, a->frame, f, s->ring.frame_bytes, s->url);
    f->luma = f->chroma = 0;
    f->pitch = 0;
    f->matrix = 0;
    f->full_range = 0;
    av_frame_unref(a->frame);
    return rc;
}

static void cpu_flush(vram__av_source *a) { avcodec_flush_buffers(a->dec); }

/* What the decoder's pictures take in steady state, estimated from the
 * first picture: the larger of (a) what producing it took plus one more
 * picture per frame of reordering delay and one being converted, and (b)
 * its references (as libavcodec reports them: with frame threads it
 * reports none), its reordering delay, one being decoded per frame thread
 * and one being converted. */
static uint64_t decoder_estimate(vram__av_source *a)
{
    AVCodecContext *c = a->dec;
    uint64_t pic = vram__av_picture_bytes(c, a->frame->width, a->frame->height, a->frame->format);
    uint64_t delay = c->has_b_frames > 0 ? (uint64_t)c->has_b_frames : 0;
    uint64_t refs = c->refs > 0 ? (uint64_t)c->refs : 1;
    uint64_t threads = (c->active_thread_type & FF_THREAD_FRAME) ? (uint64_t)c->thread_count : 1;
    uint64_t grown = atomic_load(&a->src->decoder_bytes) + pic * (delay + 1);
    uint64_t counted = pic * (refs + delay + threads + 1);
    return grown > counted ? grown : counted;
}

static int cpu_opened(vram__av_source *a)
{
    vram_source *s = a->src;
    if (!vram__av_convertible(a->frame->format)) {
        const char *name = av_get_pix_fmt_name(a->frame->format);
        return vram__fail(VRAM_EPARSE, "video source %s: its pixel format %s cannot be converted",
                          s->url, name ? name : "(unknown)");
    }
    s->info.decode = VRAM_DECODE_CPU;
    s->info.device_frames = 0;
    s->info.decoder_bytes = decoder_estimate(a);
    return 0;
}

static void cpu_fini(vram__av_source *a)
{
    av_frame_free(&a->frame);
    vram__av_scaler_free(&a->scaler);
    if (a->bufs_made)
        vram__av_buffers_fini(&a->bufs);
    a->bufs_made = 0;
}

const vram__av_decoder_ops vram__decode_cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .open = cpu_open,
    .close = cpu_close,
    .send = cpu_send,
    .receive = cpu_receive,
    .fatal = cpu_fatal,
    .deliver = cpu_deliver,
    .drop = cpu_drop,
    .flush = cpu_flush,
    .opened = cpu_opened,
    .release = NULL,
    .fini = cpu_fini,
};
