/* src/video/av_input.c - opening and closing the libav source's input: the
 * demuxer with an interrupt callback (vram_source_interrupt, and for
 * network streams open_timeout_s on every open and read), the best video
 * stream, and its decoder (the source's decoder ops: CPU or NVDEC).
 * rtsp:// goes over UDP first, then over TCP when that fails. */
#include "av_input.h"

#include <stdio.h>
#include <string.h>

#include <libavutil/error.h>

const char *vram__av_err(int err, char *buf, size_t cap)
{
    if (av_strerror(err, buf, cap) < 0)
        snprintf(buf, cap, "libav error %d", err);
    return buf;
}

int vram__av_is_network(const char *url)
{
    const char *sep = strstr(url, "://");
    if (!sep || sep == url)
        return 0;
    for (const char *p = url; p < sep; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '-' || c == '.'))
            return 0;
    }
    return !(sep - url == 4 && strncmp(url, "file", 4) == 0);
}

/* libav asks this while it waits: non-zero ends the wait (AVERROR_EXIT). */
static int interrupt_cb(void *opaque)
{
    vram__av_source *a = opaque;
    if (vram__source_interrupted(a->src))
        return 1;
    return a->deadline_ns && vram__now_ns() > a->deadline_ns;
}

static int open_demuxer(vram__av_source *a, const char *transport, AVFormatContext **out)
{
    vram_source *s = a->src;
    AVFormatContext *fmt = avformat_alloc_context();
    if (!fmt)
        return AVERROR(ENOMEM);
    fmt->interrupt_callback = (AVIOInterruptCB){.callback = interrupt_cb, .opaque = a};
    AVDictionary *o = NULL;
    if (transport)
        av_dict_set(&o, "rtsp_transport", transport, 0);
    if (s->info.network)
        a->deadline_ns = vram__now_ns() + (uint64_t)(s->opts.open_timeout_s * 1e9);
    int err = avformat_open_input(&fmt, s->url, NULL, &o); /* frees fmt on error */
    av_dict_free(&o);
    if (err < 0) {
        a->deadline_ns = 0;
        return err;
    }
    if (s->info.network)
        a->deadline_ns = vram__now_ns() + (uint64_t)(s->opts.open_timeout_s * 1e9);
    err = avformat_find_stream_info(fmt, NULL);
    a->deadline_ns = 0;
    if (err < 0) {
        avformat_close_input(&fmt);
        return err;
    }
    *out = fmt;
    return 0;
}

/* The demuxer, its failure as a sentence naming the URL. */
static int open_format(vram__av_source *a)
{
    vram_source *s = a->src;
    int rtsp = strncmp(s->url, "rtsp://", 7) == 0 || strncmp(s->url, "rtsps://", 8) == 0;
    int err = open_demuxer(a, rtsp ? "udp" : NULL, &a->fmt);
    if (err < 0 && rtsp && !vram__source_interrupted(s))
        err = open_demuxer(a, "tcp", &a->fmt);
    if (err >= 0)
        return 0;
    if (vram__source_interrupted(s))
        return 1;
    char why[128];
    vram__av_err(err, why, sizeof why);
    if (err == AVERROR_EXIT)
        snprintf(why, sizeof why, "no answer within %.1f s", s->opts.open_timeout_s);
    if (err == AVERROR_INVALIDDATA)
        return vram__fail(VRAM_EPARSE, "video source %s: not a stream libav reads: %s", s->url,
                          why);
    return vram__fail(VRAM_EIO, "video source %s: cannot open it: %s", s->url, why);
}

/* The best video stream; the others are discarded. */
static int select_stream(vram__av_source *a)
{
    vram_source *s = a->src;
    int idx = av_find_best_stream(a->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (idx < 0)
        return vram__fail(VRAM_EPARSE, "video source %s: it has no video stream (format %s)",
                          s->url, a->fmt->iformat->name);
    AVStream *st = a->fmt->streams[idx];
    if (st->codecpar->width <= 0 || st->codecpar->height <= 0)
        return vram__fail(VRAM_EPARSE, "video source %s: its %s stream has no frame size", s->url,
                          avcodec_get_name(st->codecpar->codec_id));
    for (unsigned i = 0; i < a->fmt->nb_streams; i++)
        if ((int)i != idx)
            a->fmt->streams[i]->discard = AVDISCARD_ALL;
    a->stream = idx;
    a->tb = st->time_base;
    return 0;
}

int vram__av_input_open(vram__av_source *a)
{
    int rc = open_format(a);
    if (rc == 0)
        rc = select_stream(a);
    if (rc == 0)
        rc = a->decoder->open(a);
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram__av_input_close(a);
        return vram__error_restore(&e, rc);
    }
    a->have_frame = 0;
    a->draining = 0;
    a->read_errors = 0;
    return 0;
}

void vram__av_input_close(vram__av_source *a)
{
    if (a->pkt)
        av_packet_unref(a->pkt);
    a->decoder->close(a);
    avformat_close_input(&a->fmt);
    a->have_frame = 0;
    a->draining = 0;
}
