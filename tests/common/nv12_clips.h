/* tests/common/nv12_clips.h - what the NV12 letterbox tests share
 * (tests/unit/test_letterbox_nv12.c, tests/gpu/test_gpu_letterbox.c):
 * H.264 clips made with ffmpeg at test time (BT.601 unflagged, BT.709
 * flagged, full range, full range BT.2020; noise on testsrc2 so that many
 * YUV values occur; a machine without ffmpeg reads them from a directory
 * it carries, see nv12_clips_make), their pictures decoded with libavcodec and laid out
 * as NV12 in host memory (what NVDEC hands out, as copied to the host),
 * and the CPU path's RGB24 frames of the same pictures (a CPU source:
 * libavcodec, then libswscale as the library sets it up), and the CPU
 * path's letterbox of them. Each program includes it once, after cmocka.h;
 * the functions are its own (static). */
#ifndef VRAM_TEST_NV12_CLIPS_H
#define VRAM_TEST_NV12_CLIPS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "test_host.h"
#include "vramkit.h"

#define NV12_CLIP_FRAMES 3

typedef struct nv12_clip {
    const char *name, *size, *options; /* ffmpeg output options */
} nv12_clip;

static const nv12_clip nv12_clips[] = {
    {"bt601.mp4", "1920x1080", "-pix_fmt yuv420p"},
    {"bt709.mp4", "1280x720",
     "-pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 -color_trc bt709 "
     "-color_range tv"},
    {"full.mp4", "854x480", "-pix_fmt yuvj420p"},
    {"full2020.mp4", "640x360", "-pix_fmt yuv420p -color_range pc -colorspace bt2020nc"},
};
#define NV12_CLIPS ((int)(sizeof nv12_clips / sizeof nv12_clips[0]))

/* One decoded picture: NV12 (luma rows, then (height + 1) / 2 chroma rows,
 * `pitch` apart; the bytes past the width are 0xEE), its matrix and range
 * as a vram_frame has them, and the CPU path's RGB24 of it. */
typedef struct nv12_pic {
    int width, height, matrix, full_range;
    size_t pitch;
    uint8_t *luma, *chroma;
    uint8_t *rgb;
    size_t stride;
} nv12_pic;

static char nv12_dir[512];
static int have_clips; /* nv12_clips_make found or made them */

static void need_clips(void) __attribute__((unused));
static void need_clips(void)
{
    if (!have_clips) {
        print_message("ffmpeg with libx264 not found: skipped\n");
        skip();
    }
}

static void assert_contains(const char *s, const char *part) __attribute__((unused));
static void assert_contains(const char *s, const char *part)
{
    if (!strstr(s, part))
        fail_msg("\"%s\" does not contain \"%s\"", s, part);
}

static const char *nv12_path(const char *name)
{
    static char buf[4][640];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", nv12_dir, name);
    return p;
}

static int nv12_made; /* the clips are ours to remove */

/* Whether dir holds every clip. */
static int nv12_clips_in(const char *dir)
{
    for (int i = 0; i < NV12_CLIPS; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, nv12_clips[i].name);
        FILE *f = fopen(path, "rb");
        if (!f)
            return 0;
        fclose(f);
    }
    return 1;
}

/* The clips: made in a new directory when ffmpeg (with libx264) is there,
 * else found where a machine without it carries them ($VRAM_NV12_CLIPS,
 * or .carry/nv12 from the source tree's root or its build directory,
 * made there by the same commands). 0, or 1 when there are none (the
 * tests skip), or -1. */
static int nv12_clips_make(void)
{
    if (sh("command -v ffmpeg >/dev/null 2>&1 && "
                "ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx264")) {
        const char *env = getenv("VRAM_NV12_CLIPS");
        const char *dirs[] = {env ? env : "", ".carry/nv12", "../.carry/nv12"};
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
            if (dirs[i][0] && nv12_clips_in(dirs[i])) {
                snprintf(nv12_dir, sizeof nv12_dir, "%s", dirs[i]);
                return 0;
            }
        return 1;
    }
    snprintf(nv12_dir, sizeof nv12_dir, "/tmp/vramkit-nv12-XXXXXX");
    if (!mkdtemp(nv12_dir))
        return -1;
    nv12_made = 1;
    for (int i = 0; i < NV12_CLIPS; i++)
        if (sh("ffmpeg -nostdin -y -loglevel error -f lavfi -i "
                    "testsrc2=size=%s:rate=30,noise=alls=40:allf=t+u -frames:v %d -c:v libx264 "
                    "-preset veryfast %s '%s'",
                    nv12_clips[i].size, NV12_CLIP_FRAMES, nv12_clips[i].options,
                    nv12_path(nv12_clips[i].name)))
            return -1;
    return 0;
}

static void nv12_clips_remove(void)
{
    if (nv12_made)
        sh("rm -rf '%s'", nv12_dir);
}

static void nv12_pic_free(nv12_pic *p)
{
    free(p->luma);
    free(p->rgb);
    memset(p, 0, sizeof *p);
}

/* A yuv420p or yuvj420p picture as NV12 with its matrix and range (the
 * range as the CPU path reads it: the picture's when it says one, else
 * full for the J formats). */
static void nv12_from_frame(const AVFrame *in, nv12_pic *p)
{
    assert_true(in->format == AV_PIX_FMT_YUV420P || in->format == AV_PIX_FMT_YUVJ420P);
    p->width = in->width;
    p->height = in->height;
    p->matrix = (int)in->colorspace;
    p->full_range = in->color_range == AVCOL_RANGE_UNSPECIFIED
                        ? in->format == AV_PIX_FMT_YUVJ420P
                        : in->color_range == AVCOL_RANGE_JPEG;
    p->pitch = (((size_t)in->width + 1) & ~(size_t)1) + 96; /* padding that is never read */
    const int ch = (in->height + 1) / 2, cw = (in->width + 1) / 2;
    p->luma = malloc(p->pitch * (size_t)(in->height + ch));
    assert_non_null(p->luma);
    memset(p->luma, 0xEE, p->pitch * (size_t)(in->height + ch));
    p->chroma = p->luma + p->pitch * (size_t)in->height;
    for (int y = 0; y < in->height; y++)
        memcpy(p->luma + (size_t)y * p->pitch, in->data[0] + (size_t)y * in->linesize[0],
               (size_t)in->width);
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            p->chroma[(size_t)y * p->pitch + 2 * (size_t)x] =
                in->data[1][(size_t)y * in->linesize[1] + (size_t)x];
            p->chroma[(size_t)y * p->pitch + 2 * (size_t)x + 1] =
                in->data[2][(size_t)y * in->linesize[2] + (size_t)x];
        }
}

/* The first `n` pictures of a clip, in display order, as NV12. */
static void nv12_decode(const char *path, nv12_pic *pics, int n)
{
    AVFormatContext *fc = NULL;
    assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fc, NULL) >= 0);
    const AVCodec *dec = NULL;
    int si = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, &dec, 0);
    assert_true(si >= 0 && dec);
    AVCodecContext *cc = avcodec_alloc_context3(dec);
    assert_non_null(cc);
    assert_true(avcodec_parameters_to_context(cc, fc->streams[si]->codecpar) >= 0);
    assert_int_equal(avcodec_open2(cc, dec, NULL), 0);
    AVPacket *pkt = av_packet_alloc();
    AVFrame *fr = av_frame_alloc();
    int got = 0, eof = 0;
    while (got < n) {
        int rc = avcodec_receive_frame(cc, fr);
        if (rc == 0) {
            nv12_from_frame(fr, &pics[got++]);
            av_frame_unref(fr);
            continue;
        }
        assert_true(rc == AVERROR(EAGAIN) && !eof);
        if (av_read_frame(fc, pkt) < 0) {
            eof = 1;
            assert_int_equal(avcodec_send_packet(cc, NULL), 0);
            continue;
        }
        if (pkt->stream_index == si)
            assert_int_equal(avcodec_send_packet(cc, pkt), 0);
        av_packet_unref(pkt);
    }
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&cc);
    avformat_close_input(&fc);
}

/* The CPU path's RGB24 of the same `n` pictures: a CPU source on the clip
 * (pool: host memory), each frame copied into pics[i].rgb. */
static void nv12_cpu_rgb(vram_pool *pool, const char *path, nv12_pic *pics, int n)
{
    vram_source_opts o;
    assert_int_equal(vram_source_opts_init(&o), 0);
    o.url = path;
    o.pool = pool;
    o.decode = VRAM_DECODE_CPU;
    vram_source *s = NULL;
    int rc = vram_source_open(&o, &s);
    if (rc)
        fail_msg("vram_source_open(%s): %s: %s", path, vram_err_name(rc), vram_last_error());
    for (int i = 0; i < n; i++) {
        vram_frame *f;
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(f->width, pics[i].width);
        assert_int_equal(f->height, pics[i].height);
        pics[i].stride = f->stride;
        pics[i].rgb = malloc(f->stride * (size_t)f->height);
        assert_non_null(pics[i].rgb);
        memcpy(pics[i].rgb, f->rgb, f->stride * (size_t)f->height);
        vram_source_release(s, f);
    }
    assert_int_equal(vram_source_close(s), 0);
}

/* Every clip's pictures with their CPU-path RGB: pics[clip][frame]. */
static void nv12_load_all(vram_pool *pool, nv12_pic (*pics)[NV12_CLIP_FRAMES])
{
    for (int c = 0; c < NV12_CLIPS; c++) {
        nv12_decode(nv12_path(nv12_clips[c].name), pics[c], NV12_CLIP_FRAMES);
        nv12_cpu_rgb(pool, nv12_path(nv12_clips[c].name), pics[c], NV12_CLIP_FRAMES);
    }
}

/* The model inputs the tests letterbox into: BlazeFace's two (NHWC, scale
 * 2, bias -1, bars -1) and an NCHW BGR one with per-channel normalization
 * (ImageNet's mean and deviation, bars 0). */
static const vram_letterbox nv12_models[] = {
    {.width = 128, .height = 128, .layout = VRAM_LAYOUT_NHWC, .scale = {2, 2, 2},
     .bias = {-1, -1, -1}, .pad = -1},
    {.width = 256, .height = 256, .layout = VRAM_LAYOUT_NHWC, .scale = {2, 2, 2},
     .bias = {-1, -1, -1}, .pad = -1},
    {.width = 320, .height = 192, .layout = VRAM_LAYOUT_NCHW, .bgr = 1,
     .scale = {1 / 0.225f, 1 / 0.224f, 1 / 0.229f},
     .bias = {-0.406f / 0.225f, -0.456f / 0.224f, -0.485f / 0.229f}, .pad = 0},
};
static const char *const nv12_model_names[] = {"128x128 NHWC", "256x256 NHWC",
                                               "320x192 NCHW BGR"};
#define NV12_MODELS ((int)(sizeof nv12_models / sizeof nv12_models[0]))

static size_t nv12_model_floats(const vram_letterbox *lb)
{
    return (size_t)lb->width * (size_t)lb->height * 3u;
}

/* The largest |a - b| over n floats. */
static double nv12_max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? (double)a[i] - b[i] : (double)b[i] - a[i];
        m = d > m ? d : m;
    }
    return m;
}

/* The CPU path's model input for a picture: its RGB24 through
 * vram_letterbox_frame. */
static void nv12_cpu_letterbox(const vram_letterbox *lb, const nv12_pic *p, float *dst,
                               vram_letterbox_map *map)
{
    assert_int_equal(vram_letterbox_frame(lb, p->rgb, p->width, p->height, p->stride, dst, map),
                     0);
}

#endif
