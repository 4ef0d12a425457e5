/* tests/gpu/test_gpu_nvdec.c - NVDEC sources on a GPU, through the public
 * API: every picture equals libavcodec's (the same frames, in the same
 * order, with the same pixels: decoding is exact), H.264 and HEVC, with and
 * without B-frames; the decoder's device memory is measured, charged to
 * the owner (frames and decoder) and given back with the device's free
 * memory; a budget too small refuses with the owner named and nothing
 * kept; streams NVDEC cannot take (MJPEG, 10-bit HEVC, an H.264 picture
 * wider than the decoders) are refused naming why, and auto decodes them
 * on the CPU saying why; a looping file goes on past its end; 32 decoders
 * at once each cost what one does; and the letterbox kernel on NVDEC
 * frames equals the CPU preprocessing of the CPU's frames within 1/255.
 * Clips come from $VRAM_NVDEC_CLIPS (tests/gpu/carry.sh makes them with
 * Debian's ffmpeg). Needs a GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "test_host.h"
#include "vramkit.h"

static char clips[4096];
static vram_device *dev;
static vram_backend *dev_backend, *host_backend;
static vram_pool *dev_pool, *host_pool;

static const char *clip(const char *name)
{
    static char path[2][4352];
    static int turn;
    turn ^= 1;
    snprintf(path[turn], sizeof path[turn], "%s/%s", clips, name);
    return path[turn];
}

static int have(const char *name) { return access(clip(name), R_OK) == 0; }

static vram_owner owner(vram_pool *p, const char *name, uint64_t budget)
{
    vram_owner o;
    if (vram_owner_find(p, name, &o) == 0) {
        assert_int_equal(vram_owner_set_budget(p, o, budget), 0);
        return o;
    }
    assert_int_equal(vram_owner_create(p, name, budget, &o), 0);
    return o;
}

static vram_usage_stats owner_stats(vram_pool *p, vram_owner o)
{
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(p, o, &u), 0);
    return u;
}

static vram_source_opts nvdec_opts(const char *url, vram_owner o)
{
    vram_source_opts so;
    vram_source_opts_init(&so);
    so.url = url;
    so.decode = VRAM_DECODE_NVDEC;
    so.device = dev;
    so.pool = dev_pool;
    so.owner = o;
    so.ring_frames = 3;
    return so;
}

static vram_source *open_ok(const vram_source_opts *so)
{
    vram_source *s = NULL;
    int rc = vram_source_open(so, &s);
    if (rc)
        fail_msg("opening %s: %s: %s", so->url, vram_err_name(rc), vram_last_error());
    return s;
}

/* ---- libavcodec's pictures of a clip, as the reference ---- */

typedef struct ref_pictures {
    int n, w, h;
    uint8_t **yuv; /* w x h luma, then w/2 x h/2 U, then V, per picture */
} ref_pictures;

static void ref_decode(const char *url, int max, ref_pictures *out)
{
    memset(out, 0, sizeof *out);
    AVFormatContext *fmt = NULL;
    assert_int_equal(avformat_open_input(&fmt, url, NULL, NULL), 0);
    assert_true(avformat_find_stream_info(fmt, NULL) >= 0);
    const AVCodec *codec = NULL;
    int idx = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    assert_true(idx >= 0 && codec);
    AVCodecContext *c = avcodec_alloc_context3(codec);
    avcodec_parameters_to_context(c, fmt->streams[idx]->codecpar);
    c->thread_count = 1;
    assert_int_equal(avcodec_open2(c, codec, NULL), 0);
    AVPacket *pkt = av_packet_alloc();
    AVFrame *fr = av_frame_alloc();
    out->yuv = calloc((size_t)max, sizeof *out->yuv);
    int draining = 0;
    while (out->n < max) {
        int err = avcodec_receive_frame(c, fr);
        if (err == 0) {
            assert_int_equal(fr->format, AV_PIX_FMT_YUV420P);
            out->w = fr->width;
            out->h = fr->height;
            size_t wl = (size_t)fr->width, hl = (size_t)fr->height;
            size_t wc = (wl + 1) / 2, hc = (hl + 1) / 2;
            uint8_t *p = malloc(wl * hl + 2 * wc * hc);
            for (size_t y = 0; y < hl; y++)
                memcpy(p + y * wl, fr->data[0] + y * (size_t)fr->linesize[0], wl);
            for (int k = 0; k < 2; k++)
                for (size_t y = 0; y < hc; y++)
                    memcpy(p + wl * hl + (size_t)k * wc * hc + y * wc,
                           fr->data[1 + k] + y * (size_t)fr->linesize[1 + k], wc);
            out->yuv[out->n++] = p;
            av_frame_unref(fr);
            continue;
        }
        if (err == AVERROR_EOF || (err != AVERROR(EAGAIN)))
            break;
        if (draining)
            break;
        if (av_read_frame(fmt, pkt) < 0) {
            avcodec_send_packet(c, NULL);
            draining = 1;
            continue;
        }
        if (pkt->stream_index == idx)
            avcodec_send_packet(c, pkt);
        av_packet_unref(pkt);
    }
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&c);
    avformat_close_input(&fmt);
}

static void ref_free(ref_pictures *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->yuv[i]);
    free(r->yuv);
}

/* Every NVDEC picture of `name` against libavcodec's: same count, order and
 * pixels. */
static void same_pictures(const char *name)
{
    if (!have(name)) {
        print_message("%s: not carried, skipped\n", name);
        return;
    }
    ref_pictures ref;
    ref_decode(clip(name), 600, &ref);
    assert_true(ref.n > 0);
    vram_owner o = owner(dev_pool, "exact", 0);
    vram_source_opts so = nvdec_opts(clip(name), o);
    vram_source *s = open_ok(&so);
    vram_source_info info;
    vram_source_info_get(s, &info);
    assert_int_equal(info.decode, VRAM_DECODE_NVDEC);
    assert_int_equal(info.device_frames, 1);
    assert_int_equal(info.width, ref.w);
    assert_int_equal(info.height, ref.h);
    size_t wl = (size_t)ref.w, hl = (size_t)ref.h, wc = (wl + 1) / 2, hc = (hl + 1) / 2;
    uint8_t *nv12 = malloc(wl * (hl + hc));
    int n = 0, luma_diff = 0, chroma_diff = 0;
    vram_frame *f;
    while (vram_source_next(s, &f) == 0) {
        assert_null(f->rgb);
        assert_true(f->luma != 0 && f->chroma != 0 && f->pitch >= wl);
        assert_int_equal(f->index, n);
        assert_int_equal(vram_frame_copy_nv12(f, nv12, wl), 0);
        if (n < ref.n) {
            const uint8_t *r = ref.yuv[n];
            luma_diff += memcmp(nv12, r, wl * hl) != 0;
            int bad = 0;
            for (size_t y = 0; y < hc && !bad; y++)
                for (size_t x = 0; x < wc && !bad; x++)
                    bad = nv12[wl * hl + y * wl + 2 * x] != r[wl * hl + y * wc + x] ||
                          nv12[wl * hl + y * wl + 2 * x + 1] != r[wl * hl + wc * hc + y * wc + x];
            chroma_diff += bad;
        }
        vram_source_release(s, f);
        n++;
    }
    print_message("%s: %d NVDEC pictures (%d from libavcodec), %d luma and %d chroma planes "
                  "differ; %u decode and %u output surfaces, decoder %.1f MiB, frames %.1f MiB\n",
                  name, n, ref.n, luma_diff, chroma_diff, info.decode_surfaces,
                  info.output_surfaces, info.decoder_bytes / 1048576.0,
                  info.frames_bytes / 1048576.0);
    assert_int_equal(n, ref.n);
    assert_int_equal(luma_diff, 0);
    assert_int_equal(chroma_diff, 0);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_stats(dev_pool, o).live_bytes, 0);
    free(nv12);
    ref_free(&ref);
}

static void test_h264_exact(void **state)
{
    (void)state;
    same_pictures("bframes_h264.mp4");
    same_pictures("cam1080.mp4");
}

static void test_hevc_exact(void **state)
{
    (void)state;
    same_pictures("bframes_hevc.mp4");
    same_pictures("cam1080_hevc.mp4");
}

/* The decoder's memory: measured, charged, and back with the device's. */
static void test_memory_charged_and_back(void **state)
{
    (void)state;
    uint64_t free0, total;
    assert_int_equal(vram_device_memory(dev, &free0, &total), 0);
    vram_owner o = owner(dev_pool, "charged", 0);
    vram_source_opts so = nvdec_opts(clip("cam1080.mp4"), o);
    vram_source *s = open_ok(&so);
    vram_source_info info;
    vram_source_info_get(s, &info);
    uint64_t free1;
    vram_device_memory(dev, &free1, &total);
    vram_usage_stats u = owner_stats(dev_pool, o);
    print_message("1080p H.264 decoder: %.1f MiB measured (%.1f MiB output surfaces, %u decode "
                  "surfaces); the device's free memory fell %.1f MiB\n",
                  (info.decoder_bytes + info.frames_bytes) / 1048576.0,
                  info.frames_bytes / 1048576.0, info.decode_surfaces,
                  (double)(free0 - free1) / 1048576.0);
    assert_true(info.decoder_bytes + info.frames_bytes > 8u << 20);
    assert_int_equal(u.live_bytes, info.decoder_bytes + info.frames_bytes);
    assert_int_equal(u.charged_bytes, u.live_bytes);
    vram_usage_stats k;
    assert_int_equal(vram_kind_stats_get(dev_pool, VRAM_KIND_DECODER, &k), 0);
    assert_int_equal(k.charged_bytes, info.decoder_bytes);
    vram_frame *f[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(vram_source_next(s, &f[i]), 0);
    /* Released out of order, then more. */
    vram_source_release(s, f[1]);
    vram_source_release(s, f[0]);
    vram_source_release(s, f[2]);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(vram_source_next(s, &f[0]), 0);
        vram_source_release(s, f[0]);
    }
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_stats(dev_pool, o).live_bytes, 0);
    uint64_t free2;
    vram_device_memory(dev, &free2, &total);
    print_message("after close the device has %.1f MiB less free than before\n",
                  ((double)free0 - (double)free2) / 1048576.0);
    assert_true(free2 + (4u << 20) >= free0);
}

static void test_budget_refused(void **state)
{
    (void)state;
    vram_owner o = owner(dev_pool, "small-nvdec", 4u << 20);
    vram_source_opts so = nvdec_opts(clip("cam1080.mp4"), o);
    vram_source *s = (vram_source *)&so;
    assert_int_equal(vram_source_open(&so, &s), VRAM_EBUDGET);
    assert_null(s);
    print_message("%s\n", vram_last_error());
    assert_non_null(strstr(vram_last_error(), "small-nvdec"));
    assert_non_null(strstr(vram_last_error(), "NVDEC decoder"));
    assert_int_equal(owner_stats(dev_pool, o).live_bytes, 0);
    assert_int_equal(owner_stats(dev_pool, o).charged_bytes, 0);
}

static void refused(const char *name, const char *says)
{
    if (!have(name)) {
        print_message("%s: not carried, skipped\n", name);
        return;
    }
    vram_owner o = owner(dev_pool, "refused", 0);
    vram_source_opts so = nvdec_opts(clip(name), o);
    vram_source *s = (vram_source *)&so;
    int rc = vram_source_open(&so, &s);
    assert_null(s);
    print_message("nvdec %s: %s: %s\n", name, vram_err_name(rc), vram_last_error());
    assert_int_equal(rc, VRAM_ENOSYS);
    if (!strstr(vram_last_error(), says) || !strstr(vram_last_error(), name))
        fail_msg("\"%s\" does not name %s and \"%s\"", vram_last_error(), name, says);
    assert_int_equal(owner_stats(dev_pool, o).live_bytes, 0);
    /* auto: on the CPU instead, saying why (into host memory). */
    vram_owner h = owner(host_pool, "refused-cpu", 0);
    so.decode = VRAM_DECODE_AUTO;
    so.pool = host_pool;
    so.owner = h;
    rc = vram_source_open(&so, &s);
    if (rc == VRAM_EPARSE && strstr(vram_last_error(), "no decoder")) {
        /* An FFmpeg built with few decoders (the GPU machine's) has none. */
        print_message("auto %s: no CPU decoder here either: %s\n", name, vram_last_error());
        return;
    }
    if (rc)
        fail_msg("auto %s: %s: %s", name, vram_err_name(rc), vram_last_error());
    vram_source_info info;
    vram_source_info_get(s, &info);
    print_message("auto %s: decode %s, because: %s\n", name, vram_decode_name(info.decode),
                  info.fallback);
    assert_int_equal(info.decode, VRAM_DECODE_CPU);
    assert_non_null(strstr(info.fallback, says));
    vram_frame *f;
    assert_int_equal(vram_source_next(s, &f), 0);
    assert_non_null(f->rgb);
    vram_source_release(s, f);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_stats(host_pool, h).live_bytes, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("mjpeg.mov", "does not decode mjpeg");
    refused("hevc10.mkv", "8-bit");
    refused("wide_h264.mp4", "outside what this GPU's decoders take");
}

static void test_loop(void **state)
{
    (void)state;
    if (!have("bframes_h264.mp4"))
        return;
    ref_pictures ref;
    ref_decode(clip("bframes_h264.mp4"), 600, &ref);
    vram_owner o = owner(dev_pool, "loop", 0);
    vram_source_opts so = nvdec_opts(clip("bframes_h264.mp4"), o);
    so.loop = 1;
    vram_source *s = open_ok(&so);
    double last = -1;
    vram_frame *f;
    for (int i = 0; i < 2 * ref.n + 5; i++) {
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(f->index, i);
        assert_true(f->pts_s > last);
        last = f->pts_s;
        vram_source_release(s, f);
    }
    vram_source_stats st;
    vram_source_stats_get(s, &st);
    print_message("looped %llu times over %d pictures, last pts %.3f s\n",
                  (unsigned long long)st.loops, ref.n, last);
    assert_int_equal(st.loops, 2);
    assert_int_equal(vram_source_close(s), 0);
    ref_free(&ref);
}

/* 32 1080p decoders at once: each is charged what one costs. */
static void test_many(void **state)
{
    (void)state;
    enum { N = 32 };
    vram_source *s[N];
    vram_owner o[N];
    uint64_t free0, free1, total;
    vram_device_memory(dev, &free0, &total);
    uint64_t charged = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "many-%d", i);
        o[i] = owner(dev_pool, name, 0);
        vram_source_opts so = nvdec_opts(clip("cam1080.mp4"), o[i]);
        s[i] = open_ok(&so);
        charged += owner_stats(dev_pool, o[i]).live_bytes;
    }
    vram_device_memory(dev, &free1, &total);
    for (int k = 0; k < 30; k++)
        for (int i = 0; i < N; i++) {
            vram_frame *f;
            assert_int_equal(vram_source_next(s[i], &f), 0);
            vram_source_release(s[i], f);
        }
    print_message("%d 1080p decoders: %.1f MiB charged (%.1f each), the device's free memory "
                  "fell %.1f MiB (%.1f each)\n",
                  N, charged / 1048576.0, charged / 1048576.0 / N,
                  (double)(free0 - free1) / 1048576.0, (double)(free0 - free1) / 1048576.0 / N);
    assert_true(charged <= (uint64_t)(free0 - free1) + (8u << 20));
    for (int i = 0; i < N; i++) {
        assert_int_equal(vram_source_close(s[i]), 0);
        assert_int_equal(owner_stats(dev_pool, o[i]).live_bytes, 0);
    }
}

/* The kernel on NVDEC frames against the CPU preprocessing of libavcodec's
 * frames of the same clip. */
static void test_letterbox_matches_cpu(void **state)
{
    (void)state;
    const char *name = "cam1080.mp4";
    vram_owner o = owner(dev_pool, "lb-nvdec", 0), h = owner(host_pool, "lb-cpu", 0);
    vram_source_opts so = nvdec_opts(clip(name), o);
    so.ring_frames = 5; /* B held at once, and one more */
    vram_source *gs = open_ok(&so);
    vram_source_opts co;
    vram_source_opts_init(&co);
    co.ring_frames = 5;
    co.url = clip(name);
    co.pool = host_pool;
    co.owner = h;
    vram_source *cs = open_ok(&co);
    vram_letterbox lb = {.width = 256, .height = 256, .layout = VRAM_LAYOUT_NHWC,
                         .scale = {2, 2, 2}, .bias = {-1, -1, -1}, .pad = -1};
    enum { B = 4 };
    size_t image = 256u * 256u * 3u;
    float *want = malloc(image * B * sizeof(float)), *got = malloc(image * B * sizeof(float));
    void *dst = NULL;
    vram_owner io = owner(dev_pool, "lb-io", 0);
    assert_int_equal(vram_pool_alloc(dev_pool, image * B * sizeof(float), io, VRAM_KIND_IO, NULL,
                                     &dst),
                     0);
    double worst = 0;
    for (int round = 0; round < 5; round++) {
        vram_frame *g[B], *c[B];
        for (int i = 0; i < B; i++) {
            assert_int_equal(vram_source_next(gs, &g[i]), 0);
            assert_int_equal(vram_source_next(cs, &c[i]), 0);
            assert_int_equal(vram_letterbox_frame(&lb, c[i]->rgb, c[i]->width, c[i]->height,
                                                  c[i]->stride, want + (size_t)i * image, NULL),
                             0);
        }
        vram_letterbox_map maps[B];
        int rc = vram_letterbox_frames_cuda(&lb, g, B, dst, NULL, maps);
        if (rc)
            fail_msg("vram_letterbox_frames_cuda: %s", vram_last_error());
        assert_int_equal(vram_device_synchronize(dev), 0);
        typedef int (*dtoh_fn)(void *, unsigned long long, size_t);
        dtoh_fn dtoh = NULL;
        assert_int_equal(vram_cuda_proc("cuMemcpyDtoH", 3020, (void **)&dtoh), 0);
        assert_int_equal(dtoh(got, (unsigned long long)(uintptr_t)dst, image * B * sizeof(float)),
                         0);
        for (size_t k = 0; k < image * B; k++) {
            double d = fabs((double)got[k] - (double)want[k]);
            worst = d > worst ? d : worst;
        }
        for (int i = 0; i < B; i++) {
            vram_source_release(gs, g[i]);
            vram_source_release(cs, c[i]);
        }
    }
    print_message("letterbox of 20 NVDEC 1080p frames against the CPU path: max abs diff %.6f "
                  "(%.3f of 1/255) in the model's input units\n",
                  worst, worst * 255.0);
    assert_true(worst <= 1.0 / 255.0 + 1e-6);
    vram_pool_free(dev_pool, dst, NULL);
    free(want);
    free(got);
    assert_int_equal(vram_source_close(gs), 0);
    assert_int_equal(vram_source_close(cs), 0);
}

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("VRAM_NVDEC_CLIPS");
    snprintf(clips, sizeof clips, "%s", dir && *dir ? dir : ".carry/service/clips");
    if (vram_device_open(0, NULL, &dev))
        return -1;
    vram_backend_opts bo = {.device = dev};
    if (vram_backend_create("vmm", &bo, &dev_backend))
        return -1;
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.backend = dev_backend;
    po.configured_listeners = 0;
    if (vram_pool_create(&po, &dev_pool))
        return -1;
    if (host_pool_make(4ull << 30, &host_backend, &host_pool))
        return -1;
    return vram_device_bind(dev);
}

static int teardown(void **state)
{
    (void)state;
    vram_pool_destroy(host_pool);
    vram_backend_destroy(host_backend);
    vram_pool_destroy(dev_pool);
    vram_backend_destroy(dev_backend);
    vram_device_close(dev);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h264_exact),
        cmocka_unit_test(test_hevc_exact),
        cmocka_unit_test(test_memory_charged_and_back),
        cmocka_unit_test(test_budget_refused),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_loop),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_letterbox_matches_cpu),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
