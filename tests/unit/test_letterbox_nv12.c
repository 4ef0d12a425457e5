/* tests/unit/test_letterbox_nv12.c - the NV12 letterbox's CPU twin and the
 * YUV to RGB conversion the kernel uses (src/video/yuv_rgb.h,
 * nv12_sample.h, letterbox_nv12.c, nv12_rgb.c) against the CPU path:
 *  - every (Y, U, V) of every matrix in both ranges against libswscale
 *    converting as the CPU path sets it up (av_convert.c): identical;
 *  - real decoded pictures (clips made by ffmpeg: BT.601 unflagged, BT.709,
 *    full range, full range BT.2020): vram_nv12_to_rgb against the CPU
 *    source's RGB24, pixel for pixel, and vram__letterbox_nv12_host
 *    against vram_letterbox_frame of that RGB24 (the whole CPU path), for
 *    BlazeFace's 128x128 and 256x256 NHWC inputs and an NCHW BGR one: the
 *    largest difference is printed and must be at most 1/255 in the
 *    model's units (0 where swscale takes its x86 SIMD converter);
 *  - the twin's sampling and blend against letterbox.c on the RGB of
 *    random NV12 pictures of odd, tiny, wide and tall sizes: bit for bit;
 *  - arguments refused with the problem named, and VRAM_ENOSYS from
 *    vram_letterbox_frames_cuda in a build without CUDA.
 * The clips' tests skip without ffmpeg. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libswscale/swscale.h>

#include "nv12_clips.h"
#include "video/nv12_internal.h"
#include "video/yuv_rgb.h"
#include "vramkit.h"

static vram_backend *backend;
static vram_pool *pool;
static nv12_pic pics[NV12_CLIPS][NV12_CLIP_FRAMES];

static int group_setup(void **state)
{
    (void)state;
    if (host_pool_make(1ull << 30, &backend, &pool))
        return -1;
    int rc = nv12_clips_make();
    if (rc < 0)
        return -1;
    have_clips = rc == 0;
    if (have_clips)
        nv12_load_all(pool, pics);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int c = 0; c < NV12_CLIPS; c++)
        for (int i = 0; i < NV12_CLIP_FRAMES; i++)
            nv12_pic_free(&pics[c][i]);
    nv12_clips_remove();
    assert_int_equal(vram_pool_destroy(pool), 0);
    vram_backend_destroy(backend);
    return 0;
}

/* On x86-64 libswscale converts with its SIMD code, which yuv_rgb.h
 * reproduces exactly; elsewhere (its C tables) it may differ by up to 3. */
#if defined(__x86_64__) || defined(__i386__)
#define SWS_EXACT 1
#else
#define SWS_EXACT 0
#endif

/* ---- the conversion, exhaustively --------------------------------------- */

/* libswscale set up as av_convert.c sets it up for one picture. */
static void sws_convert(const uint8_t *const planes[3], const int linesize[3], int w, int h,
                        int fmt, int matrix, int range, uint8_t *rgb, int stride)
{
    struct SwsContext *sc =
        sws_getContext(w, h, fmt, w, h, AV_PIX_FMT_RGB24, SWS_BICUBIC, NULL, NULL, NULL);
    assert_non_null(sc);
    int *inv, *table, src_full, dst_full, brightness, contrast, saturation;
    assert_true(sws_getColorspaceDetails(sc, &inv, &src_full, &table, &dst_full, &brightness,
                                         &contrast, &saturation) >= 0);
    if (matrix < 1 || matrix > 10 || matrix == 8)
        matrix = AVCOL_SPC_BT470BG;
    const int *coef = sws_getCoefficients(matrix);
    if (range != AVCOL_RANGE_UNSPECIFIED)
        src_full = range == AVCOL_RANGE_JPEG;
    sws_setColorspaceDetails(sc, coef, src_full, coef, dst_full, brightness, contrast,
                             saturation);
    uint8_t *dst[4] = {rgb, NULL, NULL, NULL};
    int dst_stride[4] = {stride, 0, 0, 0};
    const uint8_t *src[4] = {planes[0], planes[1], planes[2], NULL};
    int src_stride[4] = {linesize[0], linesize[1], linesize[2], 0};
    assert_int_equal(sws_scale(sc, src, src_stride, 0, h, dst, dst_stride), h);
    sws_freeContext(sc);
}

/* Every Y with every (U, V): a 1024 x 16384 picture whose 2x2 blocks each
 * hold four Y values under one (U, V) pair; 64 blocks per pair. */
static void test_every_yuv_value(void **state)
{
    (void)state;
    enum { W = 1024, H = 16384 };
    uint8_t *y = malloc((size_t)W * H), *u = malloc((size_t)W * H / 4),
            *v = malloc((size_t)W * H / 4);
    const size_t stride = (size_t)W * 3, pitch = W;
    uint8_t *ref = malloc(stride * H), *got = malloc(stride * H), *nv = malloc(pitch * H / 2);
    assert_true(y && u && v && ref && got && nv);
    for (int by = 0; by < H / 2; by++)
        for (int bx = 0; bx < W / 2; bx++) {
            int b = by * (W / 2) + bx, pair = b / 64, y0 = (b % 64) * 4;
            u[(size_t)by * (W / 2) + bx] = (uint8_t)(pair >> 8);
            v[(size_t)by * (W / 2) + bx] = (uint8_t)(pair & 255);
            nv[(size_t)by * pitch + 2 * (size_t)bx] = (uint8_t)(pair >> 8);
            nv[(size_t)by * pitch + 2 * (size_t)bx + 1] = (uint8_t)(pair & 255);
            y[(size_t)(2 * by) * W + 2 * bx] = (uint8_t)y0;
            y[(size_t)(2 * by) * W + 2 * bx + 1] = (uint8_t)(y0 + 1);
            y[(size_t)(2 * by + 1) * W + 2 * bx] = (uint8_t)(y0 + 2);
            y[(size_t)(2 * by + 1) * W + 2 * bx + 1] = (uint8_t)(y0 + 3);
        }
    const uint8_t *planes[3] = {y, u, v};
    const int linesize[3] = {W, W / 2, W / 2};
    /* 2 (unknown) and 0 (RGB) and 8 (YCgCo) convert as BT.601. */
    const int matrices[] = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11};
    for (size_t m = 0; m < sizeof matrices / sizeof *matrices; m++)
        for (int full = 0; full < 2; full++) {
            sws_convert(planes, linesize, W, H, AV_PIX_FMT_YUV420P, matrices[m],
                        full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG, ref, (int)stride);
            assert_int_equal(vram_nv12_to_rgb(y, nv, pitch, W, H, matrices[m], full, got, stride),
                             0);
            size_t differ = 0;
            int worst = 0;
            for (size_t i = 0; i < stride * H; i++) {
                int d = abs((int)got[i] - (int)ref[i]);
                differ += d != 0;
                worst = d > worst ? d : worst;
            }
            if (differ)
                print_message("matrix %d, %s range: %zu of %zu values differ from libswscale, "
                              "by up to %d\n",
                              matrices[m], full ? "full" : "limited", differ, stride * H, worst);
            if (SWS_EXACT)
                assert_int_equal(differ, 0);
            else
                assert_true(worst <= 3);
        }
    print_message("every (Y, U, V) of 11 matrices in both ranges: %s libswscale's RGB24\n",
                  SWS_EXACT ? "identical to" : "compared with");
    free(y);
    free(u);
    free(v);
    free(ref);
    free(got);
    free(nv);
}

/* The coefficient table yuv_rgb.h carries is libswscale's. */
static void test_coefficient_table(void **state)
{
    (void)state;
    for (int m = -1; m <= 12; m++) {
        int32_t t[4];
        vram__yuv_table(vram__yuv_matrix(m), t);
        int sm = m < 1 || m > 10 || m == 8 ? AVCOL_SPC_BT470BG : m;
        const int *s = sws_getCoefficients(sm);
        for (int k = 0; k < 4; k++)
            assert_int_equal(t[k], s[k]);
    }
}

/* ---- real pictures ------------------------------------------------------ */

/* vram_nv12_to_rgb against the CPU source's RGB24 of the same pictures. */
static void test_rgb_matches_cpu_path(void **state)
{
    (void)state;
    need_clips();
    for (int c = 0; c < NV12_CLIPS; c++) {
        size_t differ = 0, pixels = 0;
        int worst = 0;
        for (int i = 0; i < NV12_CLIP_FRAMES; i++) {
            const nv12_pic *p = &pics[c][i];
            size_t stride = (size_t)p->width * 3u + 5u;
            uint8_t *rgb = malloc(stride * (size_t)p->height);
            assert_non_null(rgb);
            assert_int_equal(vram_nv12_to_rgb(p->luma, p->chroma, p->pitch, p->width, p->height,
                                              p->matrix, p->full_range, rgb, stride),
                             0);
            for (int y = 0; y < p->height; y++)
                for (int x = 0; x < p->width; x++) {
                    const uint8_t *a = rgb + (size_t)y * stride + 3u * (size_t)x;
                    const uint8_t *b = p->rgb + (size_t)y * p->stride + 3u * (size_t)x;
                    int d = 0;
                    for (int k = 0; k < 3; k++) {
                        int e = abs((int)a[k] - (int)b[k]);
                        d = e > d ? e : d;
                    }
                    differ += d != 0;
                    worst = d > worst ? d : worst;
                }
            pixels += (size_t)p->width * (size_t)p->height;
            free(rgb);
        }
        const nv12_pic *p = &pics[c][0];
        print_message("%-13s %dx%d matrix %d %s range: %zu of %zu pixels differ from the CPU "
                      "path's RGB24, by up to %d\n",
                      nv12_clips[c].name, p->width, p->height, p->matrix,
                      p->full_range ? "full" : "limited", differ, pixels, worst);
        if (SWS_EXACT)
            assert_int_equal(differ, 0);
        else
            assert_true(worst <= 3);
    }
}

/* The kernel's computation on the CPU against the whole CPU path. */
static void test_letterbox_matches_cpu_path(void **state)
{
    (void)state;
    need_clips();
    for (int m = 0; m < NV12_MODELS; m++) {
        const vram_letterbox *lb = &nv12_models[m];
        const size_t n = nv12_model_floats(lb);
        float *cpu = malloc(n * sizeof *cpu), *twin = malloc(n * sizeof *twin);
        assert_true(cpu && twin);
        /* One level of the model's units for each channel: the worst
         * difference in levels too. */
        double worst = 0, worst_levels = 0;
        for (int c = 0; c < NV12_CLIPS; c++)
            for (int i = 0; i < NV12_CLIP_FRAMES; i++) {
                const nv12_pic *p = &pics[c][i];
                vram_letterbox_map ma, mb;
                nv12_cpu_letterbox(lb, p, cpu, &ma);
                memset(twin, 0x7F, n * sizeof *twin);
                assert_int_equal(vram__letterbox_nv12_host(lb, p->luma, p->chroma, p->pitch,
                                                           p->width, p->height, p->matrix,
                                                           p->full_range, twin, &mb),
                                 0);
                assert_memory_equal(&ma, &mb, sizeof ma);
                double d = nv12_max_diff(cpu, twin, n);
                worst = d > worst ? d : worst;
                float unit = fabsf(lb->scale[0]) / 255.0f;
                for (int k = 1; k < 3; k++)
                    unit = fminf(unit, fabsf(lb->scale[k]) / 255.0f);
                worst_levels = d / unit > worst_levels ? d / unit : worst_levels;
            }
        print_message("%-17s CPU path vs the kernel's computation on the CPU, %d pictures: "
                      "largest difference %.3g (%.3g of an 8-bit level)\n",
                      nv12_model_names[m], NV12_CLIPS * NV12_CLIP_FRAMES, worst, worst_levels);
        assert_true(worst <= 1.0 / 255.0);
        if (SWS_EXACT)
            assert_true(worst == 0);
        free(cpu);
        free(twin);
    }
}

/* ---- the sampling, on any size ------------------------------------------ */

static uint32_t rng_state = 12345;
static uint8_t rnd8(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (uint8_t)(rng_state >> 24);
}

/* For random NV12 pictures of awkward sizes, the twin equals
 * vram_letterbox_frame on vram_nv12_to_rgb's RGB24 to the bit: the same
 * taps, blend, scale and bias; NHWC and NCHW, RGB and BGR. */
static void test_sampling_matches_letterbox(void **state)
{
    (void)state;
    const int sizes[][2] = {{1, 1},     {2, 2},   {3, 5},   {17, 9},   {640, 2}, {2, 640},
                            {1921, 1081}, {97, 61}, {128, 128}, {255, 3}, {6, 200}};
    const vram_letterbox lbs[] = {
        nv12_models[0],
        nv12_models[2],
        {.width = 97, .height = 300, .layout = VRAM_LAYOUT_NHWC, .bgr = 1,
         .scale = {1, 2, 3}, .bias = {0.5f, -0.25f, 0}, .pad = 7},
        {.width = 1, .height = 1, .layout = VRAM_LAYOUT_NCHW, .scale = {1, 1, 1}},
    };
    const int matrices[] = {2, 1, 9, 7};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int w = sizes[s][0], h = sizes[s][1];
        const size_t pitch = (size_t)w + 13u, stride = (size_t)w * 3u;
        uint8_t *luma = malloc(pitch * (size_t)(h + (h + 1) / 2));
        uint8_t *rgb = malloc(stride * (size_t)h);
        assert_true(luma && rgb);
        for (size_t i = 0; i < pitch * (size_t)(h + (h + 1) / 2); i++)
            luma[i] = rnd8();
        const uint8_t *chroma = luma + pitch * (size_t)h;
        const int matrix = matrices[s % 4], full = (int)(s & 1);
        assert_int_equal(vram_nv12_to_rgb(luma, chroma, pitch, w, h, matrix, full, rgb, stride),
                         0);
        for (size_t l = 0; l < sizeof lbs / sizeof *lbs; l++) {
            const size_t n = nv12_model_floats(&lbs[l]);
            float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
            assert_true(a && b);
            vram_letterbox_map ma, mb;
            assert_int_equal(vram_letterbox_frame(&lbs[l], rgb, w, h, stride, a, &ma), 0);
            assert_int_equal(vram__letterbox_nv12_host(&lbs[l], luma, chroma, pitch, w, h,
                                                       matrix, full, b, &mb),
                             0);
            assert_memory_equal(&ma, &mb, sizeof ma);
            if (memcmp(a, b, n * sizeof *a))
                fail_msg("%dx%d into %dx%d: the twin differs from vram_letterbox_frame by %g", w,
                         h, lbs[l].width, lbs[l].height, nv12_max_diff(a, b, n));
            free(a);
            free(b);
        }
        free(luma);
        free(rgb);
    }
}

/* ---- arguments ---------------------------------------------------------- */

static void expect(int rc, int code, const char *part)
{
    assert_int_equal(rc, code);
    assert_contains(vram_last_error(), part);
}

static void test_nv12_to_rgb_arguments(void **state)
{
    (void)state;
    uint8_t yuv[64 * 6], rgb[64 * 4 * 3];
    memset(yuv, 128, sizeof yuv);
    expect(vram_nv12_to_rgb(NULL, yuv, 64, 64, 4, 1, 0, rgb, 192), VRAM_EINVAL, "luma is NULL");
    expect(vram_nv12_to_rgb(yuv, NULL, 64, 64, 4, 1, 0, rgb, 192), VRAM_EINVAL,
           "chroma is NULL");
    expect(vram_nv12_to_rgb(yuv, yuv, 64, 64, 4, 1, 0, NULL, 192), VRAM_EINVAL, "rgb is NULL");
    expect(vram_nv12_to_rgb(yuv, yuv, 64, 0, 4, 1, 0, rgb, 192), VRAM_EINVAL, "0x4");
    expect(vram_nv12_to_rgb(yuv, yuv, 64, 64, -2, 1, 0, rgb, 192), VRAM_EINVAL, "64x-2");
    expect(vram_nv12_to_rgb(yuv, yuv, 63, 64, 4, 1, 0, rgb, 192), VRAM_EINVAL, "pitch of 63");
    /* An odd width needs its last U, V pair: the pitch covers width + 1. */
    expect(vram_nv12_to_rgb(yuv, yuv, 63, 63, 4, 1, 0, rgb, 192), VRAM_EINVAL, "at least 64");
    expect(vram_nv12_to_rgb(yuv, yuv, 64, 64, 4, 1, 0, rgb, 191), VRAM_EINVAL, "stride of 191");
    assert_int_equal(vram_nv12_to_rgb(yuv, yuv + 64 * 4, 64, 64, 4, 1, 0, rgb, 192), 0);
    /* Neutral chroma, limited range: Y 128 is grey 130 in every channel. */
    assert_int_equal(rgb[0], 130);
    assert_int_equal(rgb[1], 130);
    assert_int_equal(rgb[2], 130);
}

static void test_letterbox_host_arguments(void **state)
{
    (void)state;
    uint8_t yuv[64 * 6];
    memset(yuv, 128, sizeof yuv);
    float out[16 * 16 * 3];
    vram_letterbox lb = nv12_models[0];
    lb.width = lb.height = 16;
    expect(vram__letterbox_nv12_host(NULL, yuv, yuv, 64, 64, 4, 1, 0, out, NULL), VRAM_EINVAL,
           "lb is NULL");
    expect(vram__letterbox_nv12_host(&lb, yuv, yuv, 64, 64, 4, 1, 0, NULL, NULL), VRAM_EINVAL,
           "dst is NULL");
    expect(vram__letterbox_nv12_host(&lb, yuv, yuv, 32, 64, 4, 1, 0, out, NULL), VRAM_EINVAL,
           "pitch of 32");
    lb.layout = (vram_layout)5;
    expect(vram__letterbox_nv12_host(&lb, yuv, yuv, 64, 64, 4, 1, 0, out, NULL), VRAM_EINVAL,
           "layout 5");
}

/* A frame that claims device planes (never dereferenced: every call here
 * fails before anything is launched). */
static vram_frame device_frame(int w, int h)
{
    vram_frame f = {.width = w, .height = h, .luma = 0x100000, .chroma = 0x200000,
                    .pitch = (size_t)w, .matrix = 1};
    return f;
}

static void test_letterbox_cuda_arguments(void **state)
{
    (void)state;
    vram_letterbox lb = nv12_models[0];
    vram_frame a = device_frame(64, 48), b = device_frame(64, 48);
    vram_frame *two[2] = {&a, &b};
    void *dst = (void *)(uintptr_t)0x300000;
    const char *fn = "vram_letterbox_frames_cuda";
    expect(vram_letterbox_frames_cuda(NULL, two, 2, dst, NULL, NULL), VRAM_EINVAL, "lb is NULL");
    assert_contains(vram_last_error(), fn);
    expect(vram_letterbox_frames_cuda(&lb, NULL, 2, dst, NULL, NULL), VRAM_EINVAL,
           "frames is NULL");
    expect(vram_letterbox_frames_cuda(&lb, two, 2, NULL, NULL, NULL), VRAM_EINVAL,
           "dst is NULL");
    expect(vram_letterbox_frames_cuda(&lb, two, 0, dst, NULL, NULL), VRAM_EINVAL, "n is 0");
    expect(vram_letterbox_frames_cuda(&lb, two, VRAM_LETTERBOX_CUDA_MAX + 1, dst, NULL, NULL),
           VRAM_EINVAL, "n is 65");
    vram_frame *holes[2] = {&a, NULL};
    expect(vram_letterbox_frames_cuda(&lb, holes, 2, dst, NULL, NULL), VRAM_EINVAL,
           "frames[1] is NULL");
    b.luma = 0;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "frames[1] is not in device memory (its luma plane is 0");
    b = device_frame(64, 48);
    b.chroma = 0;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "chroma plane is 0");
    b = device_frame(0, 48);
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "frames[1] is 0x48");
    b = device_frame(64, 48);
    b.pitch = 62;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "frames[1] has a pitch of 62 bytes");
    b.pitch = 64;
    lb.width = 0;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "model input 0x128");
    lb.width = 4097;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL,
           "model input 4097x128");
    lb = nv12_models[0];
    lb.layout = (vram_layout)2;
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, NULL), VRAM_EINVAL, "layout 2");
    lb = nv12_models[0];
    if (vram__letterbox_cuda_built()) {
        print_message("this build has the kernel: vram_letterbox_frames_cuda runs in "
                      "tests/gpu/test_gpu_letterbox.c\n");
        return;
    }
    /* No CUDA in this build: good arguments are VRAM_ENOSYS, and no map. */
    vram_letterbox_map maps[2] = {{-1, -1, -1}, {-1, -1, -1}};
    expect(vram_letterbox_frames_cuda(&lb, two, 2, dst, NULL, maps), VRAM_ENOSYS, "no CUDA");
    assert_true(maps[0].scale == -1 && maps[1].scale == -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coefficient_table),
        cmocka_unit_test(test_every_yuv_value),
        cmocka_unit_test(test_rgb_matches_cpu_path),
        cmocka_unit_test(test_letterbox_matches_cpu_path),
        cmocka_unit_test(test_sampling_matches_letterbox),
        cmocka_unit_test(test_nv12_to_rgb_arguments),
        cmocka_unit_test(test_letterbox_host_arguments),
        cmocka_unit_test(test_letterbox_cuda_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
