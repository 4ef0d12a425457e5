/* tests/unit/test_letterbox.c - the letterbox preprocessing of
 * src/video/letterbox.c: geometry and map for wide, tall, square and odd
 * frames and a model input that is not square; every value against a
 * direct, slow evaluation of the documented rule (in double); the bars;
 * NCHW against NHWC, BGR with per-channel scale and bias; a stride with
 * padding bytes that are never read; arguments refused; and the time a
 * 1920x1080 frame takes into 256x256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "vramkit/error.h"
#include "vramkit/video.h"

/* ---- helpers --------------------------------------------------------- */

typedef struct frame {
    uint8_t *rgb;
    int w, h;
    size_t stride;
} frame;

/* A frame of pseudo-random pixels; padding bytes past 3 w are 0xEE. */
static frame make_frame(int w, int h, size_t pad, uint32_t seed)
{
    frame f = {NULL, w, h, (size_t)w * 3u + pad};
    f.rgb = malloc(f.stride * (size_t)h);
    assert_non_null(f.rgb);
    memset(f.rgb, 0xEE, f.stride * (size_t)h);
    uint32_t s = seed * 2654435761u + 1u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++) {
            s = s * 1664525u + 1013904223u;
            f.rgb[(size_t)y * f.stride + (size_t)x] = (uint8_t)(s >> 24);
        }
    return f;
}

static vram_letterbox blazeface_lb(int w, int h)
{
    vram_letterbox lb = {.width = w, .height = h, .layout = VRAM_LAYOUT_NHWC,
                         .scale = {2, 2, 2}, .bias = {-1, -1, -1}, .pad = -1};
    return lb;
}

/* The rule of vramkit/video.h, evaluated directly. */
typedef struct geom {
    double s;
    int rw, rh, ox, oy;
} geom;

static geom rule(int W, int H, int w, int h)
{
    geom g;
    g.s = (double)W / w < (double)H / h ? (double)W / w : (double)H / h;
    g.rw = (int)floor(w * g.s + 0.5);
    g.rh = (int)floor(h * g.s + 0.5);
    g.ox = (int)floor((W - g.rw) / 2.0);
    g.oy = (int)floor((H - g.rh) / 2.0);
    return g;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The value of model channel c at model pixel (x, y). */
static double ref_value(const vram_letterbox *lb, const frame *f, const geom *g, int x, int y,
                        int c)
{
    if (x < g->ox || x >= g->ox + g->rw || y < g->oy || y >= g->oy + g->rh)
        return lb->pad;
    double sx = clampd((x - g->ox + 0.5) / g->s - 0.5, 0, f->w - 1);
    double sy = clampd((y - g->oy + 0.5) / g->s - 0.5, 0, f->h - 1);
    int x0 = (int)floor(sx), y0 = (int)floor(sy);
    int x1 = x0 + 1 < f->w ? x0 + 1 : f->w - 1, y1 = y0 + 1 < f->h ? y0 + 1 : f->h - 1;
    double fx = sx - x0, fy = sy - y0;
    int ch = lb->bgr ? 2 - c : c;
#define P(xx, yy) ((double)f->rgb[(size_t)(yy) * f->stride + (size_t)(xx) * 3u + (size_t)ch])
    double v = (1 - fy) * ((1 - fx) * P(x0, y0) + fx * P(x1, y0)) +
               fy * ((1 - fx) * P(x0, y1) + fx * P(x1, y1));
#undef P
    return v / 255.0 * lb->scale[c] + lb->bias[c];
}

static float at(const vram_letterbox *lb, const float *dst, int x, int y, int c)
{
    size_t W = (size_t)lb->width, H = (size_t)lb->height;
    return lb->layout == VRAM_LAYOUT_NCHW ? dst[(size_t)c * W * H + (size_t)y * W + (size_t)x]
                                          : dst[((size_t)y * W + (size_t)x) * 3u + (size_t)c];
}

/* Letterbox f and compare every value with the rule; returns the map. */
static vram_letterbox_map check_against_rule(const vram_letterbox *lb, const frame *f)
{
    size_t n = (size_t)lb->width * (size_t)lb->height * 3u;
    float *dst = malloc(n * sizeof *dst);
    assert_non_null(dst);
    for (size_t i = 0; i < n; i++)
        dst[i] = NAN;
    vram_letterbox_map map;
    assert_int_equal(vram_letterbox_frame(lb, f->rgb, f->w, f->h, f->stride, dst, &map), 0);
    geom g = rule(lb->width, lb->height, f->w, f->h);
    assert_float_equal(map.scale, (float)g.s, 1e-6);
    assert_float_equal(map.offset_x, (float)g.ox, 0);
    assert_float_equal(map.offset_y, (float)g.oy, 0);
    for (int y = 0; y < lb->height; y++)
        for (int x = 0; x < lb->width; x++)
            for (int c = 0; c < 3; c++) {
                double want = ref_value(lb, f, &g, x, y, c);
                double got = at(lb, dst, x, y, c);
                double d = fabs(got - want);
                if (!(d <= 1e-4)) {
                    fprintf(stderr, "(%d, %d, %d): %.6f, want %.6f\n", x, y, c, got, want);
                    fail();
                }
            }
    free(dst);
    return map;
}

/* ---- geometry -------------------------------------------------------- */

static void test_wide_frame(void **state)
{
    (void)state;
    frame f = make_frame(640, 360, 0, 1);
    vram_letterbox lb = blazeface_lb(256, 256);
    vram_letterbox_map m = check_against_rule(&lb, &f);
    /* s = 0.4: 256 x 144 from row 56. */
    assert_float_equal(m.scale, 0.4f, 1e-6);
    assert_float_equal(m.offset_x, 0, 0);
    assert_float_equal(m.offset_y, 56, 0);
    free(f.rgb);
}

static void test_tall_frame(void **state)
{
    (void)state;
    frame f = make_frame(360, 640, 0, 2);
    vram_letterbox lb = blazeface_lb(256, 256);
    vram_letterbox_map m = check_against_rule(&lb, &f);
    assert_float_equal(m.scale, 0.4f, 1e-6);
    assert_float_equal(m.offset_x, 56, 0);
    assert_float_equal(m.offset_y, 0, 0);
    free(f.rgb);
}

static void test_square_and_upscaled(void **state)
{
    (void)state;
    frame f = make_frame(100, 100, 0, 3);
    vram_letterbox lb = blazeface_lb(256, 256);
    vram_letterbox_map m = check_against_rule(&lb, &f);
    assert_float_equal(m.scale, 2.56f, 1e-6);
    assert_float_equal(m.offset_x, 0, 0);
    assert_float_equal(m.offset_y, 0, 0);
    free(f.rgb);
    /* One pixel fills the whole input with its value. */
    f = make_frame(1, 1, 0, 4);
    check_against_rule(&lb, &f);
    free(f.rgb);
}

static void test_odd_sizes(void **state)
{
    (void)state;
    /* s = 0.256: 256 x round(85.248) = 85 rows from floor(85.5) = 85. */
    frame f = make_frame(1000, 333, 0, 5);
    vram_letterbox lb = blazeface_lb(256, 256);
    vram_letterbox_map m = check_against_rule(&lb, &f);
    assert_float_equal(m.offset_y, 85, 0);
    free(f.rgb);
    /* A model input that is not square: 640x480 into 320x192, s = 0.4,
     * 256 x 192 from column 32. */
    f = make_frame(640, 480, 0, 6);
    lb = blazeface_lb(320, 192);
    m = check_against_rule(&lb, &f);
    assert_float_equal(m.scale, 0.4f, 1e-6);
    assert_float_equal(m.offset_x, 32, 0);
    assert_float_equal(m.offset_y, 0, 0);
    free(f.rgb);
    /* Odd everything. */
    f = make_frame(37, 91, 5, 7);
    lb = blazeface_lb(129, 67);
    check_against_rule(&lb, &f);
    free(f.rgb);
}

/* The bars hold exactly pad, in every layout. */
static void test_bars(void **state)
{
    (void)state;
    frame f = make_frame(64, 32, 0, 8);
    for (int layout = 0; layout < 2; layout++) {
        vram_letterbox lb = blazeface_lb(32, 32);
        lb.layout = (vram_layout)layout;
        lb.pad = 0.25f;
        float dst[32 * 32 * 3];
        vram_letterbox_map m;
        assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 64, 32, f.stride, dst, &m), 0);
        assert_float_equal(m.offset_y, 8, 0);
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                for (int c = 0; c < 3; c++) {
                    float v = at(&lb, dst, x, y, c);
                    if (y < 8 || y >= 24)
                        assert_true(v == 0.25f);
                    else
                        assert_true(v >= -1.0f && v <= 1.0f);
                }
    }
    free(f.rgb);
}

/* ---- conversion ------------------------------------------------------ */

static void test_nchw_matches_nhwc(void **state)
{
    (void)state;
    frame f = make_frame(200, 120, 3, 9);
    vram_letterbox a = blazeface_lb(96, 96), b = a;
    b.layout = VRAM_LAYOUT_NCHW;
    enum { N = 96 * 96 * 3 };
    float *da = malloc(N * sizeof(float)), *db = malloc(N * sizeof(float));
    assert_non_null(da);
    assert_non_null(db);
    assert_int_equal(vram_letterbox_frame(&a, f.rgb, f.w, f.h, f.stride, da, NULL), 0);
    assert_int_equal(vram_letterbox_frame(&b, f.rgb, f.w, f.h, f.stride, db, NULL), 0);
    for (int y = 0; y < 96; y++)
        for (int x = 0; x < 96; x++)
            for (int c = 0; c < 3; c++)
                assert_true(at(&a, da, x, y, c) == at(&b, db, x, y, c));
    check_against_rule(&b, &f);
    free(da);
    free(db);
    free(f.rgb);
}

static void test_bgr_and_channel_params(void **state)
{
    (void)state;
    frame f = make_frame(50, 70, 0, 10);
    vram_letterbox rgb = {.width = 40, .height = 40, .layout = VRAM_LAYOUT_NHWC,
                          .scale = {1, 1, 1}, .bias = {0, 0, 0}, .pad = 0};
    vram_letterbox bgr = rgb;
    bgr.bgr = 1;
    float a[40 * 40 * 3], b[40 * 40 * 3];
    assert_int_equal(vram_letterbox_frame(&rgb, f.rgb, f.w, f.h, f.stride, a, NULL), 0);
    assert_int_equal(vram_letterbox_frame(&bgr, f.rgb, f.w, f.h, f.stride, b, NULL), 0);
    for (int i = 0; i < 40 * 40; i++)
        for (int c = 0; c < 3; c++)
            assert_true(a[i * 3 + c] == b[i * 3 + 2 - c]);
    /* Scale and bias per model channel (ImageNet's, in BGR order). */
    vram_letterbox norm = {.width = 33, .height = 47, .layout = VRAM_LAYOUT_NCHW, .bgr = 1,
                           .scale = {1 / 0.225f, 1 / 0.224f, 1 / 0.229f},
                           .bias = {-0.406f / 0.225f, -0.456f / 0.224f, -0.485f / 0.229f},
                           .pad = 0};
    check_against_rule(&norm, &f);
    free(f.rgb);
}

/* Bytes past 3 x width in each row are never read (0xEE there would show). */
static void test_stride_padding(void **state)
{
    (void)state;
    frame a = make_frame(31, 17, 0, 11), b = make_frame(31, 17, 29, 11);
    for (int y = 0; y < 17; y++)
        memcpy(b.rgb + (size_t)y * b.stride, a.rgb + (size_t)y * a.stride, 31 * 3);
    vram_letterbox lb = blazeface_lb(64, 64);
    float da[64 * 64 * 3], db[64 * 64 * 3];
    assert_int_equal(vram_letterbox_frame(&lb, a.rgb, 31, 17, a.stride, da, NULL), 0);
    assert_int_equal(vram_letterbox_frame(&lb, b.rgb, 31, 17, b.stride, db, NULL), 0);
    assert_memory_equal(da, db, sizeof da);
    free(a.rgb);
    free(b.rgb);
}

/* ---- arguments ------------------------------------------------------- */

static void test_bad_arguments(void **state)
{
    (void)state;
    frame f = make_frame(8, 8, 0, 12);
    vram_letterbox lb = blazeface_lb(16, 16);
    float dst[16 * 16 * 3];
    vram_letterbox_map m;
    assert_int_equal(vram_letterbox_frame(NULL, f.rgb, 8, 8, 24, dst, &m), VRAM_EINVAL);
    assert_int_equal(vram_letterbox_frame(&lb, NULL, 8, 8, 24, dst, &m), VRAM_EINVAL);
    assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 8, 8, 24, NULL, &m), VRAM_EINVAL);
    assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 0, 8, 24, dst, &m), VRAM_EINVAL);
    assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 8, -1, 24, dst, &m), VRAM_EINVAL);
    assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 8, 8, 23, dst, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "stride"));
    vram_letterbox bad = lb;
    bad.layout = (vram_layout)7;
    assert_int_equal(vram_letterbox_frame(&bad, f.rgb, 8, 8, 24, dst, &m), VRAM_EINVAL);
    bad = lb;
    bad.width = 0;
    assert_int_equal(vram_letterbox_frame(&bad, f.rgb, 8, 8, 24, dst, &m), VRAM_EINVAL);
    bad = lb;
    bad.height = 5000;
    assert_int_equal(vram_letterbox_frame(&bad, f.rgb, 8, 8, 24, dst, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "model input"));
    free(f.rgb);
}

/* ---- speed ----------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A 1080p frame into BlazeFace's back model: the best of 20 runs. Printed;
 * checked against a bound loose enough for sanitizer and debug builds
 * (an optimized build takes a fraction of a millisecond). */
static void test_speed_1080p(void **state)
{
    (void)state;
    frame f = make_frame(1920, 1080, 0, 13);
    vram_letterbox lb = blazeface_lb(256, 256);
    float *dst = malloc(256 * 256 * 3 * sizeof(float));
    assert_non_null(dst);
    double best = 1e9;
    for (int i = 0; i < 20; i++) {
        double t0 = now_s();
        assert_int_equal(vram_letterbox_frame(&lb, f.rgb, 1920, 1080, f.stride, dst, NULL), 0);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    printf("letterbox 1920x1080 -> 256x256: %.3f ms\n", best * 1e3);
    assert_true(best < 0.050);
    free(dst);
    free(f.rgb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wide_frame),
        cmocka_unit_test(test_tall_frame),
        cmocka_unit_test(test_square_and_upscaled),
        cmocka_unit_test(test_odd_sizes),
        cmocka_unit_test(test_bars),
        cmocka_unit_test(test_nchw_matches_nhwc),
        cmocka_unit_test(test_bgr_and_channel_params),
        cmocka_unit_test(test_stride_padding),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_speed_1080p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
