/* tests/unit/test_cpu_nn.c - the CPU executor's float32 NN kernels
 * (src/engine/cpu/kernels_nn.h) against naive double-precision references
 * written here: a direct 7-loop convolution over strides 1-3, dilations 1-2,
 * asymmetric pads, groups 1/2/depthwise, 1x1 to 5x5 and non-square kernels,
 * batches and bias or none, plus shapes large enough to cross the GEMM
 * blocks and the im2col tiles; ConvTranspose against a scatter reference
 * with strides, pads, output padding, dilations and groups; Max/AveragePool
 * with floor and ceil output sizes and count_include_pad both ways;
 * GlobalAveragePool; Gemm in all four transpose combinations and every C
 * broadcast; MatMul with 1-D operands, batches and broadcast batches;
 * BatchNormalization and its folding into a Conv. Random cases must agree to
 * a relative L2 error of 1e-5; a few small cases are checked exactly by
 * hand. Bad shapes and descriptors must fail with VRAM_EINVAL, a sentence
 * naming the numbers, and the output untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/kernels_nn.h"
#include "test_conv.h"
#include "test_rand.h"

#define TOL 1e-5

/* ---- helpers --------------------------------------------------------- */

/* A workspace for the hand-checked cases, so that they take the im2col
 * and col2im paths (the random cases try none, small and large). */
static float big_scratch[1 << 16];

static double *dbuf(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

static double rel_l2(const float *got, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0)
        return sqrt(num);
    return sqrt(num / den);
}

/* Fail with the case description when got and ref differ. */
static void check_close(const char *what, const float *got, const double *ref, int64_t n)
{
    double e = rel_l2(got, ref, n);
    if (!(e <= TOL)) {
        print_message("mismatch: %s: relative L2 %.3g over %lld values\n", what, e, (long long)n);
        fail();
    }
}

static void check_exact(const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            print_message("element %lld: got %.9g, want %.9g\n", (long long)i, got[i], want[i]);
            fail();
        }
    }
}

/* ---- Conv ------------------------------------------------------------ */

static void ref_conv(const vram__conv2d *p, const float *x, const float *w, const float *b,
                     double *y)
{
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t co = 0; co < p->c_out; co++)
            for (int64_t oy = 0; oy < p->oh; oy++)
                for (int64_t ox = 0; ox < p->ow; ox++) {
                    double acc = b ? b[co] : 0.0;
                    int64_t g = co / cog;
                    for (int64_t ci = 0; ci < cig; ci++)
                        for (int64_t ky = 0; ky < p->kh; ky++)
                            for (int64_t kx = 0; kx < p->kw; kx++) {
                                int64_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
                                int64_t ix = ox * p->stride_w - p->pad_left + kx * p->dil_w;
                                if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                                    continue;
                                acc += (double)x[((n * p->c_in + g * cig + ci) * p->h + iy) * p->w +
                                                 ix] *
                                       w[((co * cig + ci) * p->kh + ky) * p->kw + kx];
                            }
                    y[((n * p->c_out + co) * p->oh + oy) * p->ow + ox] = acc;
                }
}


static void describe_conv(char *buf, size_t cap, const char *op, const vram__conv2d *p, int bias)
{
    snprintf(buf, cap,
             "%s n%lld c_in%lld %lldx%lld c_out%lld k%lldx%lld out%lldx%lld s%lld,%lld d%lld,%lld "
             "pads %lld,%lld,%lld,%lld g%lld bias%d",
             op, (long long)p->n, (long long)p->c_in, (long long)p->h, (long long)p->w,
             (long long)p->c_out, (long long)p->kh, (long long)p->kw, (long long)p->oh,
             (long long)p->ow, (long long)p->stride_h, (long long)p->stride_w,
             (long long)p->dil_h, (long long)p->dil_w, (long long)p->pad_top,
             (long long)p->pad_left, (long long)p->pad_bottom, (long long)p->pad_right,
             (long long)p->group, bias);
}

static void ref_convt(const vram__conv2d *p, const float *x, const float *w, const float *b,
                      double *y);

/* Run Conv (transpose 0) or ConvTranspose (1) on random data under three
 * workspaces, as an executor passes them: none (the direct loop), three
 * columns (tiles of three positions) and 256 KiB; the scratch is poisoned,
 * and the output before each run. Each result must match the reference. */
static void run_case(const vram__conv2d *p, int with_bias, int transpose)
{
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    int64_t nx = p->n * p->c_in * p->h * p->w;
    int64_t nw = transpose ? p->c_in * cog * p->kh * p->kw : p->c_out * cig * p->kh * p->kw;
    int64_t ny = p->n * p->c_out * p->oh * p->ow;
    float *x = rand_buf(nx), *w = rand_buf(nw), *b = with_bias ? rand_buf(p->c_out) : NULL;
    double *ref = dbuf(ny);
    char what[256];
    describe_conv(what, sizeof what, transpose ? "ConvTranspose" : "Conv", p, with_bias);
    (transpose ? ref_convt : ref_conv)(p, x, w, b, ref);
    int64_t K = (transpose ? cog : cig) * p->kh * p->kw;
    const uint64_t limits[3] = {0, (uint64_t)K * 3 * sizeof(float), 256u << 10};
    for (int l = 0; l < 3; l++) {
        uint64_t sb = transpose ? vram__cpu_conv_transpose2d_scratch(p, limits[l])
                                : vram__cpu_conv2d_scratch(p, limits[l]);
        assert_true(sb <= limits[l]);
        float *scratch = sb ? rand_buf((int64_t)(sb / sizeof(float))) : NULL;
        float *y = rand_buf(ny); /* garbage the kernel must overwrite */
        assert_int_equal(transpose ? vram__cpu_conv_transpose2d(p, x, w, b, y, scratch, sb)
                                   : vram__cpu_conv2d(p, x, w, b, y, scratch, sb),
                         0);
        check_close(what, y, ref, ny);
        free(scratch);
        free(y);
    }
    free(x), free(w), free(b), free(ref);
}

static void run_conv_case(const vram__conv2d *p, int with_bias) { run_case(p, with_bias, 0); }

static void test_conv_sweep(void **state)
{
    (void)state;
    static const int64_t kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {3, 1}, {2, 5}};
    int cases = 0;
    for (size_t k = 0; k < VRAM__ARRAY_LEN(kernels); k++)
        for (int64_t s = 1; s <= 3; s++)
            for (int64_t d = 1; d <= 2; d++)
                for (int gk = 0; gk < 3; gk++)
                    for (int bias = 0; bias < 2; bias++) {
                        vram__conv2d p = {0};
                        p.n = irand(1, 2);
                        p.kh = kernels[k][0];
                        p.kw = kernels[k][1];
                        p.stride_h = s;
                        p.stride_w = irand(1, 3);
                        p.dil_h = d;
                        p.dil_w = irand(1, 2);
                        p.pad_top = irand(0, 2);
                        p.pad_left = irand(0, 2);
                        p.pad_bottom = irand(0, 2);
                        p.pad_right = irand(0, 2);
                        if (gk == 0) { /* dense */
                            p.group = 1, p.c_in = irand(1, 5), p.c_out = irand(1, 6);
                        } else if (gk == 1) { /* two groups */
                            p.group = 2, p.c_in = 2 * irand(1, 3), p.c_out = 2 * irand(1, 3);
                        } else { /* depthwise */
                            p.c_in = p.c_out = p.group = irand(1, 5);
                        }
                        conv_random_size(&p, 4, 11);
                        run_conv_case(&p, bias);
                        cases++;
                    }
    assert_int_equal(cases, 6 * 3 * 2 * 3 * 2);
}

/* Shapes that cross the GEMM's k and n blocks, leave remainder rows, tile
 * the im2col buffer unevenly, take the 1x1 shortcut, and use a depthwise
 * channel multiplier. */
static void test_conv_large(void **state)
{
    (void)state;
    vram__conv2d p = {.n = 2, .c_in = 40, .h = 30, .w = 30, .c_out = 37, .kh = 3, .kw = 3,
                      .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                      .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .group = 1};
    conv_out_size(&p);
    run_conv_case(&p, 1);

    vram__conv2d q = {.n = 1, .c_in = 130, .h = 17, .w = 19, .c_out = 9, .kh = 1, .kw = 1,
                      .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 1};
    conv_out_size(&q);
    run_conv_case(&q, 1);
    q.group = 1, q.c_in = 12, q.c_out = 300; /* 1x1 with n > NC */
    run_conv_case(&q, 0);

    vram__conv2d r = {.n = 1, .c_in = 24, .h = 23, .w = 21, .c_out = 18, .kh = 5, .kw = 5,
                      .stride_h = 2, .stride_w = 1, .dil_h = 1, .dil_w = 2, .pad_top = 2,
                      .pad_left = 0, .pad_bottom = 1, .pad_right = 3, .group = 3};
    conv_out_size(&r);
    run_conv_case(&r, 1);

    vram__conv2d m = {.n = 2, .c_in = 3, .h = 9, .w = 8, .c_out = 6, .kh = 3, .kw = 3,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                      .pad_left = 1, .pad_bottom = 0, .pad_right = 2, .group = 3};
    conv_out_size(&m);
    run_conv_case(&m, 1);
}

/* 3x3 ones over 1..9 with pad 1: each output is the sum of a neighbourhood. */
static void test_conv_exact(void **state)
{
    (void)state;
    float x[9], w[9], y[9], b = 0.5f;
    for (int i = 0; i < 9; i++)
        x[i] = (float)(i + 1), w[i] = 1.0f;
    vram__conv2d p = {.n = 1, .c_in = 1, .h = 3, .w = 3, .c_out = 1, .kh = 3, .kw = 3,
                      .oh = 3, .ow = 3, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
                      .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .group = 1};
    const float want[9] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, big_scratch, sizeof big_scratch), 0);
    check_exact(y, want, 9);
    /* Two input channels, the second all ones: the dense (im2col) path. */
    float x2[18], w2[18], y2[9], want2[9];
    for (int i = 0; i < 9; i++) {
        x2[i] = x[i], x2[9 + i] = 1.0f, w2[i] = 1.0f, w2[9 + i] = 2.0f;
        int r = i / 3, c = i % 3;
        int cells = (r == 1 ? 3 : 2) * (c == 1 ? 3 : 2);
        want2[i] = want[i] + 2.0f * (float)cells + b;
    }
    p.c_in = 2;
    assert_int_equal(vram__cpu_conv2d(&p, x2, w2, &b, y2, big_scratch, sizeof big_scratch), 0);
    check_exact(y2, want2, 9);
}

static void test_conv_bad(void **state)
{
    (void)state;
    float x[16] = {0}, w[16] = {0}, y[16];
    for (int i = 0; i < 16; i++)
        y[i] = 7.0f;
    vram__conv2d p = {.n = 1, .c_in = 4, .h = 2, .w = 2, .c_out = 4, .kh = 1, .kw = 1,
                      .oh = 2, .ow = 2, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
                      .group = 3};
    vram_clear_error();
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, NULL, 0), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "group 3"));
    assert_non_null(strstr(vram_last_error(), "c_in 4"));
    assert_int_equal(vram__cpu_conv_transpose2d(&p, x, w, NULL, y, NULL, 0), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "ConvTranspose"));
    p.group = 1, p.stride_w = 0;
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, NULL, 0), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "strides 1,0"));
    p.stride_w = 1, p.pad_left = -1;
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, NULL, 0), VRAM_EINVAL);
    p.pad_left = 0, p.kh = 0;
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, NULL, 0), VRAM_EINVAL);
    for (int i = 0; i < 16; i++)
        assert_true(y[i] == 7.0f);
    /* The same descriptor, repaired, works. */
    p.kh = 1;
    assert_int_equal(vram__cpu_conv2d(&p, x, w, NULL, y, big_scratch, sizeof big_scratch), 0);
    for (int i = 0; i < 16; i++)
        assert_true(y[i] == 0.0f);
}

/* ---- ConvTranspose --------------------------------------------------- */

static void ref_convt(const vram__conv2d *p, const float *x, const float *w, const float *b,
                      double *y)
{
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t co = 0; co < p->c_out; co++)
            for (int64_t i = 0; i < p->oh * p->ow; i++)
                y[(n * p->c_out + co) * p->oh * p->ow + i] = b ? b[co] : 0.0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t ci = 0; ci < p->c_in; ci++) {
            int64_t g = ci / cig;
            for (int64_t iy = 0; iy < p->h; iy++)
                for (int64_t ix = 0; ix < p->w; ix++) {
                    double xv = x[((n * p->c_in + ci) * p->h + iy) * p->w + ix];
                    for (int64_t c = 0; c < cog; c++)
                        for (int64_t ky = 0; ky < p->kh; ky++)
                            for (int64_t kx = 0; kx < p->kw; kx++) {
                                int64_t oy = iy * p->stride_h - p->pad_top + ky * p->dil_h;
                                int64_t ox = ix * p->stride_w - p->pad_left + kx * p->dil_w;
                                if (oy < 0 || oy >= p->oh || ox < 0 || ox >= p->ow)
                                    continue;
                                int64_t co = g * cog + c;
                                y[((n * p->c_out + co) * p->oh + oy) * p->ow + ox] +=
                                    xv * w[((ci * cog + c) * p->kh + ky) * p->kw + kx];
                            }
                }
        }
}

static void run_convt_case(const vram__conv2d *p, int with_bias) { run_case(p, with_bias, 1); }

static void convt_out_size(vram__conv2d *p, int64_t op_h, int64_t op_w)
{
    p->oh = p->stride_h * (p->h - 1) + op_h + (p->kh - 1) * p->dil_h + 1 - p->pad_top -
            p->pad_bottom;
    p->ow = p->stride_w * (p->w - 1) + op_w + (p->kw - 1) * p->dil_w + 1 - p->pad_left -
            p->pad_right;
}

static void test_convt_sweep(void **state)
{
    (void)state;
    static const int64_t kernels[][2] = {{1, 1}, {2, 2}, {3, 3}, {3, 2}, {4, 4}, {5, 3}};
    for (size_t k = 0; k < VRAM__ARRAY_LEN(kernels); k++)
        for (int64_t s = 1; s <= 3; s++)
            for (int64_t d = 1; d <= 2; d++)
                for (int gk = 0; gk < 3; gk++)
                    for (int bias = 0; bias < 2; bias++) {
                        vram__conv2d p = {0};
                        p.n = irand(1, 2);
                        p.kh = kernels[k][0], p.kw = kernels[k][1];
                        p.stride_h = s, p.stride_w = irand(1, 3);
                        p.dil_h = d, p.dil_w = irand(1, 2);
                        p.h = irand(1, 7), p.w = irand(1, 7);
                        if (gk == 0)
                            p.group = 1, p.c_in = irand(1, 5), p.c_out = irand(1, 5);
                        else if (gk == 1)
                            p.group = 2, p.c_in = 2 * irand(1, 3), p.c_out = 2 * irand(1, 3);
                        else
                            p.c_in = p.c_out = p.group = irand(1, 4);
                        /* output_padding below the stride, pads that leave >= 1 cell */
                        int64_t op_h = irand(0, p.stride_h - 1), op_w = irand(0, p.stride_w - 1);
                        convt_out_size(&p, op_h, op_w);
                        int64_t full_h = p.oh, full_w = p.ow;
                        p.pad_top = irand(0, 2 < full_h - 1 ? 2 : full_h - 1);
                        p.pad_bottom = irand(0, 2 < full_h - 1 - p.pad_top ? 2
                                                                           : full_h - 1 - p.pad_top);
                        p.pad_left = irand(0, 2 < full_w - 1 ? 2 : full_w - 1);
                        p.pad_right = irand(0, 2 < full_w - 1 - p.pad_left ? 2
                                                                           : full_w - 1 - p.pad_left);
                        convt_out_size(&p, op_h, op_w);
                        assert_true(p.oh >= 1 && p.ow >= 1);
                        run_convt_case(&p, bias);
                    }
}

static void test_convt_large(void **state)
{
    (void)state;
    /* K = 24*9 = 216 GEMM rows over 400 input positions: two uneven tiles. */
    vram__conv2d p = {.n = 2, .c_in = 40, .h = 20, .w = 20, .c_out = 24, .kh = 3, .kw = 3,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                      .pad_left = 1, .pad_bottom = 0, .pad_right = 1, .group = 1};
    convt_out_size(&p, 1, 0);
    run_convt_case(&p, 1);
    vram__conv2d q = {.n = 1, .c_in = 150, .h = 9, .w = 11, .c_out = 10, .kh = 4, .kw = 2,
                      .stride_h = 3, .stride_w = 1, .dil_h = 2, .dil_w = 1, .pad_top = 2,
                      .pad_left = 0, .pad_bottom = 1, .pad_right = 1, .group = 5};
    convt_out_size(&q, 2, 0);
    run_convt_case(&q, 0);
}

/* [[1,2],[3,4]] with a 2x2 kernel of ones at stride 2 tiles each input
 * value into a 2x2 block; pads cut the border off. */
static void test_convt_exact(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, b = 0.5f, y[16];
    vram__conv2d p = {.n = 1, .c_in = 1, .h = 2, .w = 2, .c_out = 1, .kh = 2, .kw = 2,
                      .oh = 4, .ow = 4, .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1,
                      .group = 1};
    const float want[16] = {1.5f, 1.5f, 2.5f, 2.5f, 1.5f, 1.5f, 2.5f, 2.5f,
                            3.5f, 3.5f, 4.5f, 4.5f, 3.5f, 3.5f, 4.5f, 4.5f};
    assert_int_equal(vram__cpu_conv_transpose2d(&p, x, w, &b, y, big_scratch, sizeof big_scratch), 0);
    check_exact(y, want, 16);
    /* stride 1 with pads 1 on every side: the 3x3 full output's centre. */
    p.stride_h = p.stride_w = 1, p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.oh = p.ow = 1;
    assert_int_equal(vram__cpu_conv_transpose2d(&p, x, w, NULL, y, big_scratch, sizeof big_scratch), 0);
    assert_true(y[0] == 10.0f);
}

/* ---- pooling --------------------------------------------------------- */

static void ref_pool(const vram__pool2d *p, const float *x, double *ymax, double *yavg)
{
    for (int64_t pl = 0; pl < p->n * p->c; pl++)
        for (int64_t oy = 0; oy < p->oh; oy++)
            for (int64_t ox = 0; ox < p->ow; ox++) {
                double m = -FLT_MAX, sum = 0;
                int64_t inside = 0, padded = 0;
                for (int64_t ky = 0; ky < p->kh; ky++)
                    for (int64_t kx = 0; kx < p->kw; kx++) {
                        int64_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
                        int64_t ix = ox * p->stride_w - p->pad_left + kx * p->dil_w;
                        if (iy >= -p->pad_top && iy < p->h + p->pad_bottom &&
                            ix >= -p->pad_left && ix < p->w + p->pad_right)
                            padded++;
                        if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                            continue;
                        double v = x[(pl * p->h + iy) * p->w + ix];
                        inside++;
                        sum += v;
                        if (v > m)
                            m = v;
                    }
                int64_t cnt = p->count_include_pad ? (padded ? p->kh * p->kw : 0) : inside;
                ymax[(pl * p->oh + oy) * p->ow + ox] = m;
                yavg[(pl * p->oh + oy) * p->ow + ox] = cnt ? sum / (double)cnt : 0.0;
            }
}

/* ONNX's output size; ceil mode drops a last window starting in the end pad. */
static int64_t pool_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d,
                        int ceil_mode)
{
    int64_t span = in + pb + pe - d * (k - 1) - 1;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + pb)
        out--;
    return out;
}

static void test_pool_sweep(void **state)
{
    (void)state;
    static const int64_t kernels[][2] = {{1, 1}, {2, 2}, {3, 3}, {3, 2}, {5, 5}};
    int ceil_grew = 0;
    for (size_t k = 0; k < VRAM__ARRAY_LEN(kernels); k++)
        for (int64_t s = 1; s <= 3; s++)
            for (int64_t d = 1; d <= 2; d++)
                for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++)
                    for (int incl = 0; incl < 2; incl++) {
                        vram__pool2d p = {0};
                        p.n = irand(1, 2), p.c = irand(1, 3);
                        p.kh = kernels[k][0], p.kw = kernels[k][1];
                        p.stride_h = s, p.stride_w = irand(1, 3);
                        p.dil_h = d, p.dil_w = irand(1, 2);
                        p.pad_top = irand(0, p.kh - 1 < 2 ? p.kh - 1 : 2);
                        p.pad_bottom = irand(0, p.kh - 1 < 2 ? p.kh - 1 : 2);
                        p.pad_left = irand(0, p.kw - 1 < 2 ? p.kw - 1 : 2);
                        p.pad_right = irand(0, p.kw - 1 < 2 ? p.kw - 1 : 2);
                        p.count_include_pad = incl;
                        p.h = irand(d * (p.kh - 1) + 1, 12);
                        p.w = irand(p.dil_w * (p.kw - 1) + 1, 12);
                        p.oh = pool_out(p.h, p.pad_top, p.pad_bottom, p.kh, p.stride_h, p.dil_h,
                                        ceil_mode);
                        p.ow = pool_out(p.w, p.pad_left, p.pad_right, p.kw, p.stride_w, p.dil_w,
                                        ceil_mode);
                        if (ceil_mode && (p.oh != pool_out(p.h, p.pad_top, p.pad_bottom, p.kh,
                                                           p.stride_h, p.dil_h, 0) ||
                                          p.ow != pool_out(p.w, p.pad_left, p.pad_right, p.kw,
                                                           p.stride_w, p.dil_w, 0)))
                            ceil_grew++;
                        int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.oh * p.ow;
                        float *x = rand_buf(nx), *y = rand_buf(ny);
                        double *rmax = dbuf(ny), *ravg = dbuf(ny);
                        char what[200];
                        snprintf(what, sizeof what,
                                 "pool %lldx%lld k%lldx%lld s%lld,%lld d%lld,%lld pads "
                                 "%lld,%lld,%lld,%lld out %lldx%lld incl%d",
                                 (long long)p.h, (long long)p.w, (long long)p.kh,
                                 (long long)p.kw, (long long)p.stride_h, (long long)p.stride_w,
                                 (long long)p.dil_h, (long long)p.dil_w, (long long)p.pad_top,
                                 (long long)p.pad_left, (long long)p.pad_bottom,
                                 (long long)p.pad_right, (long long)p.oh, (long long)p.ow, incl);
                        ref_pool(&p, x, rmax, ravg);
                        vram__cpu_maxpool2d(&p, x, y);
                        check_close(what, y, rmax, ny);
                        vram__cpu_avgpool2d(&p, x, y);
                        check_close(what, y, ravg, ny);
                        free(x), free(y), free(rmax), free(ravg);
                    }
    assert_true(ceil_grew > 10); /* the sweep really reached past the padded input */
}

static void test_pool_exact(void **state)
{
    (void)state;
    /* All negative with pad 1: padding (as 0) must never win. */
    float x[16], y[9];
    for (int i = 0; i < 16; i++)
        x[i] = -(float)(i + 1);
    vram__pool2d p = {.n = 1, .c = 1, .h = 4, .w = 4, .kh = 2, .kw = 2, .oh = 3, .ow = 3,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                      .pad_left = 1, .pad_bottom = 1, .pad_right = 1};
    const float want_max[9] = {-1, -2, -4, -5, -6, -8, -13, -14, -16};
    vram__cpu_maxpool2d(&p, x, y);
    check_exact(y, want_max, 9);

    /* 2x2 ones, pad 1, 2x2 windows at stride 2: one real cell per window. */
    float ones[4] = {1, 1, 1, 1}, y4[4];
    vram__pool2d q = {.n = 1, .c = 1, .h = 2, .w = 2, .kh = 2, .kw = 2, .oh = 2, .ow = 2,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                      .pad_left = 1, .pad_bottom = 1, .pad_right = 1};
    const float want_ex[4] = {1, 1, 1, 1}, want_in[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    vram__cpu_avgpool2d(&q, ones, y4);
    check_exact(y4, want_ex, 4);
    q.count_include_pad = 1;
    vram__cpu_avgpool2d(&q, ones, y4);
    check_exact(y4, want_in, 4);

    /* Ceil mode on 3x3 = 1..9, 2x2 at stride 2, no pads: the windows past
     * the input count only their cells inside it, or, with
     * count_include_pad, the whole window (as ONNX Runtime divides). */
    float x9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    vram__pool2d r = {.n = 1, .c = 1, .h = 3, .w = 3, .kh = 2, .kw = 2, .oh = 2, .ow = 2,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1};
    const float want_ceil[2][4] = {{3.0f, 4.5f, 7.5f, 9.0f}, {3.0f, 2.25f, 3.75f, 2.25f}};
    for (int incl = 0; incl < 2; incl++) {
        r.count_include_pad = incl;
        vram__cpu_avgpool2d(&r, x9, y4);
        check_exact(y4, want_ceil[incl], 4);
    }
    /* ... and with an end pad of 1 the pad cell counts only when asked. */
    r.pad_bottom = r.pad_right = 1;
    r.count_include_pad = 1;
    vram__cpu_avgpool2d(&r, x9, y4);
    const float want_pad[4] = {3.0f, 9.0f / 4, 15.0f / 4, 9.0f / 4};
    check_exact(y4, want_pad, 4);

    /* An output grid past the padded input (larger than ONNX's): windows
     * with no cell give -FLT_MAX (max) and 0 (average). */
    float two[2] = {-3, -4}, y3[3];
    vram__pool2d o = {.n = 1, .c = 1, .h = 2, .w = 1, .kh = 1, .kw = 1, .oh = 3, .ow = 1,
                      .stride_h = 2, .stride_w = 1, .dil_h = 1, .dil_w = 1};
    const float want_omax[3] = {-3, -FLT_MAX, -FLT_MAX}, want_oavg[3] = {-3, 0, 0};
    vram__cpu_maxpool2d(&o, two, y3);
    check_exact(y3, want_omax, 3);
    for (int incl = 0; incl < 2; incl++) {
        o.count_include_pad = incl;
        vram__cpu_avgpool2d(&o, two, y3);
        check_exact(y3, want_oavg, 3);
    }
    /* A real 0 among negatives does win. */
    x[5] = 0.0f;
    vram__cpu_maxpool2d(&p, x, y);
    assert_true(y[4] == 0.0f && y[0] == -1.0f);

    float g[8] = {1, 2, 3, 4, -1, -1, -1, 5}, gy[2];
    vram__cpu_global_avgpool(1, 2, 4, g, gy);
    assert_true(gy[0] == 2.5f && gy[1] == 0.5f);
}

static void test_global_avgpool(void **state)
{
    (void)state;
    int64_t n = 3, c = 5, sp = 49;
    float *x = rand_buf(n * c * sp), *y = rand_buf(n * c);
    double *ref = dbuf(n * c);
    for (int64_t i = 0; i < n * c; i++) {
        for (int64_t s = 0; s < sp; s++)
            ref[i] += x[i * sp + s];
        ref[i] /= (double)sp;
    }
    vram__cpu_global_avgpool(n, c, sp, x, y);
    check_close("GlobalAveragePool", y, ref, n * c);
    free(x), free(y), free(ref);
}

/* ---- Gemm ------------------------------------------------------------ */

static void run_gemm_case(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                          int64_t c_rows, int64_t c_cols)
{
    float *a = rand_buf(m * k), *b = rand_buf(k * n);
    float *c = c_rows ? rand_buf(c_rows * c_cols) : NULL;
    float *y = rand_buf(m * n);
    double *ref = dbuf(m * n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)(ta ? a[p * m + i] : a[i * k + p]) *
                       (tb ? b[j * k + p] : b[p * n + j]);
            double cv = c ? c[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)] : 0.0;
            ref[i * n + j] = alpha * acc + beta * cv;
        }
    char what[160];
    snprintf(what, sizeof what, "Gemm ta%d tb%d m%lld n%lld k%lld alpha %g beta %g C %lldx%lld",
             ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, (long long)c_rows,
             (long long)c_cols);
    vram__cpu_gemm(ta, tb, m, n, k, alpha, a, b, beta, c, c_rows, c_cols, y);
    check_close(what, y, ref, m * n);
    free(a), free(b), free(c), free(y), free(ref);
}

static void test_gemm_sweep(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int cs = 0; cs < 5; cs++)
                for (int rep = 0; rep < 4; rep++) {
                    int64_t m = irand(1, 11), n = irand(1, 13), k = irand(1, 9);
                    static const int64_t cr[5] = {0, 1, 1, -1, -1}, cc[5] = {0, 1, -1, 1, -1};
                    int64_t c_rows = cr[cs] < 0 ? m : cr[cs], c_cols = cc[cs] < 0 ? n : cc[cs];
                    float alpha = rep == 0 ? 1.0f : frand() * 2, beta = rep == 1 ? 1.0f : frand();
                    run_gemm_case(ta, tb, m, n, k, alpha, beta, c_rows, c_cols);
                }
    /* Across the k (128/64) and n (256/128) blocks with remainder rows. */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            run_gemm_case(ta, tb, 37, 300, 150, 0.7f, 0.3f, 37, 300);
            run_gemm_case(ta, tb, 6, 129, 257, 1.0f, 1.0f, 1, 129);
        }
}

static void test_gemm_exact(void **state)
{
    (void)state;
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c = 10;
    float y[4];
    const float want[4] = {29, 32, 53, 60};
    vram__cpu_gemm(0, 0, 2, 2, 2, 1.0f, a, b, 1.0f, &c, 1, 1, y);
    check_exact(y, want, 4);
    /* A^T B^T = (B A)^T: [[23,31],[34,46]]; alpha 2, no C. */
    const float want_t[4] = {46, 62, 68, 92};
    vram__cpu_gemm(1, 1, 2, 2, 2, 2.0f, a, b, 0.0f, NULL, 0, 0, y);
    check_exact(y, want_t, 4);
    /* k = 0: only beta * C (a row broadcast down). */
    const float crow[3] = {1, 2, 3}, want_k0[6] = {2, 4, 6, 2, 4, 6};
    float y6[6];
    vram__cpu_gemm(0, 0, 2, 3, 0, 1.0f, a, b, 2.0f, crow, 1, 3, y6);
    check_exact(y6, want_k0, 6);
}

/* ---- MatMul ---------------------------------------------------------- */

static vram__shape shp(int rank, const int64_t *d)
{
    vram__shape s = {.rank = rank};
    for (int i = 0; i < rank; i++)
        s.dim[i] = d[i];
    return s;
}

static int64_t elems(const vram__shape *s)
{
    int64_t e = 1;
    for (int i = 0; i < s->rank; i++)
        e *= s->dim[i];
    return e;
}

/* Naive NumPy matmul: promote, broadcast every batch index explicitly. */
static void ref_matmul(const vram__shape *as, const float *a, const vram__shape *bs, const float *b,
                       const vram__shape *ys, double *y)
{
    int64_t m = as->rank == 1 ? 1 : as->dim[as->rank - 2], k = as->dim[as->rank - 1];
    int64_t n = bs->rank == 1 ? 1 : bs->dim[bs->rank - 1];
    int ra = as->rank > 2 ? as->rank - 2 : 0, rb = bs->rank > 2 ? bs->rank - 2 : 0;
    int rbt = ra > rb ? ra : rb;
    int64_t batches = 1;
    for (int i = 0; i < ys->rank - (as->rank > 1) - (bs->rank > 1); i++)
        batches *= ys->dim[i];
    for (int64_t t = 0; t < batches; t++) {
        int64_t rem = t, ai = 0, bi = 0, amul = 1, bmul = 1;
        for (int i = rbt - 1; i >= 0; i--) {
            int ia = i - (rbt - ra), ib = i - (rbt - rb);
            int64_t da = ia >= 0 ? as->dim[ia] : 1, db = ib >= 0 ? bs->dim[ib] : 1;
            int64_t dim = da > db ? da : db, idx = rem % dim;
            rem /= dim;
            ai += (da == 1 ? 0 : idx) * amul;
            bi += (db == 1 ? 0 : idx) * bmul;
            amul *= da;
            bmul *= db;
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += (double)a[(ai * m + i) * k + p] * b[(bi * k + p) * n + j];
                y[(t * m + i) * n + j] = acc;
            }
    }
}

static void run_matmul_case(int ra, const int64_t *ad, int rb, const int64_t *bd, int ry,
                            const int64_t *yd)
{
    vram__shape as = shp(ra, ad), bs = shp(rb, bd), ys = shp(ry, yd);
    int64_t ny = elems(&ys);
    float *a = rand_buf(elems(&as)), *b = rand_buf(elems(&bs)), *y = rand_buf(ny);
    double *ref = dbuf(ny);
    char what[64];
    snprintf(what, sizeof what, "MatMul ranks %d x %d -> %d (%lld out)", ra, rb, ry,
             (long long)ny);
    ref_matmul(&as, a, &bs, b, &ys, ref);
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), 0);
    check_close(what, y, ref, ny);
    free(a), free(b), free(y), free(ref);
}

#define D(...) ((const int64_t[]){__VA_ARGS__})

static void test_matmul(void **state)
{
    (void)state;
    run_matmul_case(1, D(7), 1, D(7), 0, D(0));
    run_matmul_case(1, D(5), 2, D(5, 3), 1, D(3));
    run_matmul_case(2, D(4, 5), 1, D(5), 1, D(4));
    run_matmul_case(2, D(6, 9), 2, D(9, 11), 2, D(6, 11));
    run_matmul_case(3, D(3, 6, 9), 2, D(9, 11), 3, D(3, 6, 11));  /* stacked */
    run_matmul_case(3, D(3, 6, 9), 3, D(3, 9, 11), 3, D(3, 6, 11));
    run_matmul_case(2, D(6, 9), 3, D(3, 9, 11), 3, D(3, 6, 11));  /* a broadcast */
    run_matmul_case(4, D(2, 1, 5, 4), 3, D(3, 4, 6), 4, D(2, 3, 5, 6));
    run_matmul_case(3, D(1, 5, 4), 4, D(4, 2, 4, 6), 4, D(4, 2, 5, 6));
    run_matmul_case(4, D(2, 3, 5, 4), 4, D(2, 1, 4, 6), 4, D(2, 3, 5, 6));
    run_matmul_case(1, D(4), 4, D(2, 3, 4, 6), 3, D(2, 3, 6));
    run_matmul_case(4, D(2, 3, 5, 4), 1, D(4), 3, D(2, 3, 5));
    run_matmul_case(3, D(2, 70, 300), 3, D(2, 300, 260), 3, D(2, 70, 260)); /* blocks */
    run_matmul_case(3, D(2, 0, 3), 2, D(3, 4), 3, D(2, 0, 4));           /* empty */

    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, y = 0;
    vram__shape s3 = shp(1, D(3)), s0 = shp(0, D(0));
    assert_int_equal(vram__cpu_matmul(&s3, a, &s3, b, &s0, &y), 0);
    assert_true(y == 32.0f);
}

static void test_matmul_bad(void **state)
{
    (void)state;
    float a[64] = {0}, b[64] = {0}, y[64];
    for (int i = 0; i < 64; i++)
        y[i] = 3.0f;
    vram__shape as = shp(2, D(2, 3)), bs = shp(2, D(4, 5)), ys = shp(2, D(2, 5));
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "inner dimensions 3 and 4"));
    assert_non_null(strstr(vram_last_error(), "[2,3]"));

    as = shp(3, D(2, 2, 3)), bs = shp(3, D(3, 3, 2)), ys = shp(3, D(3, 2, 2));
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "batch dimensions 2 and 3"));

    as = shp(2, D(2, 3)), bs = shp(2, D(3, 4)), ys = shp(2, D(4, 2));
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "gives [2,4], not [4,2]"));
    ys = shp(3, D(1, 2, 4));
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), VRAM_EINVAL);

    vram__shape s0 = shp(0, D(0));
    ys = shp(1, D(3));
    assert_int_equal(vram__cpu_matmul(&s0, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "rank 1 to"));
    as = shp(2, D(2, -1));
    ys = shp(2, D(2, 4));
    assert_int_equal(vram__cpu_matmul(&as, a, &bs, b, &ys, y), VRAM_EINVAL);

    for (int i = 0; i < 64; i++)
        assert_true(y[i] == 3.0f);
}

/* ---- BatchNormalization ---------------------------------------------- */

static void rand_bn(int64_t c, float **scale, float **bias, float **mean, float **var)
{
    *scale = rand_buf(c), *bias = rand_buf(c), *mean = rand_buf(c), *var = rand_buf(c);
    for (int64_t i = 0; i < c; i++)
        (*var)[i] = (*var)[i] * (*var)[i] + 0.1f;
}

static void test_batchnorm(void **state)
{
    (void)state;
    int64_t n = 2, c = 7, sp = 33;
    float *x = rand_buf(n * c * sp), *y = rand_buf(n * c * sp), *sc, *bi, *me, *va;
    rand_bn(c, &sc, &bi, &me, &va);
    double *ref = dbuf(n * c * sp);
    float eps = 1e-3f;
    for (int64_t i = 0; i < n * c * sp; i++) {
        int64_t ch = (i / sp) % c;
        ref[i] = ((double)x[i] - me[ch]) / sqrt((double)va[ch] + eps) * sc[ch] + bi[ch];
    }
    vram__cpu_batchnorm(n, c, sp, x, sc, bi, me, va, eps, y);
    check_close("BatchNormalization", y, ref, n * c * sp);

    /* By hand: (x - 1) / sqrt(3 + 1) * 2 + 1. */
    float hx[3] = {1, 3, -1}, hy[3], s1 = 2, b1 = 1, m1 = 1, v1 = 3;
    const float want[3] = {1, 3, -1};
    vram__cpu_batchnorm(1, 1, 3, hx, &s1, &b1, &m1, &v1, 1.0f, hy);
    check_exact(hy, want, 3);
    free(x), free(y), free(sc), free(bi), free(me), free(va), free(ref);
}

/* Conv then BN must equal the folded Conv, with and without a Conv bias. */
static void test_bn_fold(void **state)
{
    (void)state;
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        vram__conv2d p = {.n = 2, .c_in = 6, .h = 10, .w = 9, .c_out = 8, .kh = 3, .kw = 3,
                          .stride_h = 1, .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                          .pad_left = 1, .pad_bottom = 1, .pad_right = 0, .group = 2};
        conv_out_size(&p);
        int64_t wpo = (p.c_in / p.group) * p.kh * p.kw, sp = p.oh * p.ow;
        int64_t ny = p.n * p.c_out * sp;
        float *x = rand_buf(p.n * p.c_in * p.h * p.w), *w = rand_buf(p.c_out * wpo);
        float *b = with_bias ? rand_buf(p.c_out) : calloc((size_t)p.c_out, sizeof(float));
        float *sc, *bi, *me, *va, eps = 1e-5f;
        rand_bn(p.c_out, &sc, &bi, &me, &va);
        float *y1 = rand_buf(ny), *y2 = rand_buf(ny), *wf = malloc((size_t)(p.c_out * wpo) * 4);
        float *bf = malloc((size_t)p.c_out * 4);
        double *ref = dbuf(ny);
        assert_non_null(b);
        assert_non_null(wf);
        assert_non_null(bf);
        memcpy(wf, w, (size_t)(p.c_out * wpo) * 4);
        memcpy(bf, b, (size_t)p.c_out * 4);
        assert_int_equal(vram__cpu_conv2d(&p, x, w, with_bias ? b : NULL, y1, NULL, 0), 0);
        vram__cpu_batchnorm(p.n, p.c_out, sp, y1, sc, bi, me, va, eps, y2);
        for (int64_t i = 0; i < ny; i++)
            ref[i] = y2[i];
        vram__cpu_bn_fold(p.c_out, wpo, wf, bf, sc, bi, me, va, eps);
        assert_int_equal(vram__cpu_conv2d(&p, x, wf, bf, y1, NULL, 0), 0);
        check_close("Conv+BN folded", y1, ref, ny);
        /* The fold really changed the weights (not a no-op that passes by luck). */
        assert_true(memcmp(wf, w, (size_t)(p.c_out * wpo) * 4) != 0);
        free(x), free(w), free(b), free(sc), free(bi), free(me), free(va);
        free(y1), free(y2), free(wf), free(bf), free(ref);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_exact),   cmocka_unit_test(test_conv_sweep),
        cmocka_unit_test(test_conv_large),   cmocka_unit_test(test_conv_bad),
        cmocka_unit_test(test_convt_exact),  cmocka_unit_test(test_convt_sweep),
        cmocka_unit_test(test_convt_large),  cmocka_unit_test(test_pool_exact),
        cmocka_unit_test(test_pool_sweep),   cmocka_unit_test(test_global_avgpool),
        cmocka_unit_test(test_gemm_exact),   cmocka_unit_test(test_gemm_sweep),
        cmocka_unit_test(test_matmul),       cmocka_unit_test(test_matmul_bad),
        cmocka_unit_test(test_batchnorm),    cmocka_unit_test(test_bn_fold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
