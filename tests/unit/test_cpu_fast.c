/* tests/unit/test_cpu_fast.c - the CPU executor's fast kernels
 * (src/engine/cpu/fast.h) against the plain-C reference kernels they
 * replace, at every tile level this CPU runs (AVX-512, AVX2, portable):
 * the packed GEMM on shapes that cross its k, m and n blocks and leave edge
 * tiles, with B plain and transposed, and B so narrow it goes to the dot
 * products; Gemm on the dot products and off them; GlobalAveragePool;
 * Conv dense, grouped, pointwise and
 * depthwise (channel multipliers included) over strides 1-3, dilations 1-2,
 * pads 0-3 and kernels 1x1 to 7x7, each with no epilogue, a residual Add,
 * Add then ReLU, and HardSwish, against vram__cpu_conv2d followed by the
 * separate Add and activation. Every case also runs split into two and
 * three parts, each part on its own scratch, as the executor's threads run
 * it. Scratch and outputs start as garbage. Results must agree to a
 * relative L2 error of 1e-5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/fast.h"
#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/kernels_nn.h"
#include "test_conv.h"
#include "test_rand.h"

#define TOL 1e-5

static void check_close(const char *what, const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    double e = den > 0 ? sqrt(num / den) : sqrt(num);
    if (!(e <= TOL)) {
        print_message("mismatch: %s: relative L2 %.3g over %lld values\n", what, e, (long long)n);
        fail();
    }
}

/* Scratch for `parts` parts of `bytes` each, garbage-filled. */
static float *scratch_for(uint64_t bytes, int parts)
{
    return rand_buf((int64_t)(bytes / sizeof(float) + 16) * parts);
}

static int64_t part_floats(uint64_t bytes) { return (int64_t)(bytes / sizeof(float) + 16); }

/* ---- packed GEMM ------------------------------------------------------- */

static void gemm_case(int64_t m, int64_t n, int64_t k, int trans_b, int parts)
{
    float *a = rand_buf(m * k), *b = rand_buf(k * n), *y = rand_buf(m * n);
    float *want = calloc((size_t)(m * n), sizeof *want);
    assert_non_null(want);
    /* B(p, j): b[p*n + j], or transposed b[j*k + p]. */
    vram__sgemm_b src = {.b = b, .brs = trans_b ? 1 : n, .bcs = trans_b ? k : 1};
    vram__cpu_gemm_acc(m, n, k, 1.0f, a, k, 1, b, src.brs, src.bcs, want, n);
    uint64_t sb = vram__cpu_sgemm_scratch(m, n, k);
    float *s = scratch_for(sb, parts);
    for (int part = 0; part < parts; part++)
        vram__cpu_sgemm(m, n, k, &(vram__sgemm_a){.a = a, .lda = k}, &src, y, n, NULL,
                        s + part * part_floats(sb), part, parts);
    char what[160];
    snprintf(what, sizeof what, "sgemm %s m%lld n%lld k%lld trans_b%d parts%d",
             vram__cpu_isa_get()->name, (long long)m, (long long)n, (long long)k, trans_b, parts);
    check_close(what, y, want, m * n);
    /* A packed beforehand, for these tiles and for tiles of another height
     * (read as it is then). */
    for (int other = 0; other < 2; other++) {
        int mr = vram__cpu_isa_get()->mr + other;
        float *pa = rand_buf(vram__cpu_sgemm_packed_floats(m, k, mr));
        vram__cpu_sgemm_pack_a(m, k, a, k, mr, pa);
        vram__sgemm_a src_a = {.a = a, .lda = k, .packed = pa, .packed_mr = mr};
        float *y2 = rand_buf(m * n);
        for (int part = 0; part < parts; part++)
            vram__cpu_sgemm(m, n, k, &src_a, &src, y2, n, NULL, s + part * part_floats(sb), part,
                            parts);
        char w2[200];
        snprintf(w2, sizeof w2, "%s, A packed for tiles %d tall", what, mr);
        check_close(w2, y2, want, m * n);
        free(pa), free(y2);
    }
    free(a), free(b), free(y), free(want), free(s);
}

static void test_sgemm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {1, 1, 1},    {5, 7, 3},     {12, 32, 256}, {13, 33, 257}, {144, 512, 256},
        {145, 513, 260}, {300, 49, 600}, {64, 1100, 27}, {1, 1000, 300}, {40, 3, 9},
        {960, 1, 240}, {243, 2, 961}, {7, 1, 35},
    };
    for (int lv = 0; lv <= vram__cpu_isa_best(); lv++) {
        assert_int_equal(vram__cpu_isa_force(lv), lv);
        for (size_t i = 0; i < VRAM__ARRAY_LEN(shapes); i++)
            for (int t = 0; t < 2; t++)
                for (int parts = 1; parts <= 3; parts++)
                    gemm_case(shapes[i][0], shapes[i][1], shapes[i][2], t, parts);
        for (int r = 0; r < 20; r++)
            gemm_case(irand(1, 70), irand(1, 90), irand(1, 70), (int)irand(0, 1),
                      (int)irand(1, 3));
    }
    vram__cpu_isa_force(-1);
}

/* Gemm on the dot products (few rows, B transposed) and off them, against
 * the reference: every transpose, C absent or broadcast from each of its
 * shapes, alpha and beta not 1. */
static void test_gemm_fast(void **state)
{
    (void)state;
    for (int r = 0; r < 200; r++) {
        int64_t m = irand(1, 6), n = irand(1, 70), k = irand(1, 90);
        int ta = r % 4 == 3, tb = r % 4 != 2;
        int form = (int)irand(0, 4); /* none, 1x1, 1xn, mx1, mxn */
        int64_t cr = form == 3 || form == 4 ? m : 1, cc = form == 2 || form == 4 ? n : 1;
        float alpha = r % 3 ? 1.0f : 0.75f, beta = r % 5 ? 1.0f : -2.0f;
        float *a = rand_buf(m * k), *b = rand_buf(k * n), *c = rand_buf(cr * cc);
        float *y = rand_buf(m * n), *want = rand_buf(m * n);
        vram__cpu_gemm(ta, tb, m, n, k, alpha, a, b, beta, form ? c : NULL, cr, cc, want);
        vram__cpu_gemm_fast(ta, tb, m, n, k, alpha, a, b, beta, form ? c : NULL, cr, cc, y);
        char what[160];
        snprintf(what, sizeof what, "gemm m%lld n%lld k%lld trans %d,%d C form %d",
                 (long long)m, (long long)n, (long long)k, ta, tb, form);
        check_close(what, y, want, m * n);
        free(a), free(b), free(c), free(y), free(want);
    }
}

/* GlobalAveragePool on the vector unit against the reference, at plane
 * sizes around its 32-float step (and none). */
static void test_global_avgpool(void **state)
{
    (void)state;
    static const int64_t spatial[] = {0, 1, 7, 31, 32, 33, 49, 196, 3136};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(spatial); i++) {
        int64_t n = 2, c = 5, s = spatial[i];
        float *x = rand_buf(n * c * s + 1), *y = rand_buf(n * c), *want = rand_buf(n * c);
        vram__cpu_global_avgpool(n, c, s, x, want);
        vram__cpu_global_avgpool_fast(n, c, s, x, y);
        char what[64];
        snprintf(what, sizeof what, "global average pool over %lld", (long long)s);
        check_close(what, y, want, n * c);
        free(x), free(y), free(want);
    }
}

/* The epilogue on its own: bias, then add, then the activation. */
static void test_epilogue(void **state)
{
    (void)state;
    float y[6] = {1, -2, 3, -4, 5, -6}, bias[2] = {0.5f, -10}, add[6] = {1, 1, 1, 1, 1, 1};
    vram__epilogue ep = {.bias = bias, .add = add, .ld_add = 3, .act = VRAM__UN_RELU};
    vram__epilogue_rows(&ep, 0, 2, 0, 3, y, 3);
    const float want[6] = {2.5f, 0, 4.5f, 0, 0, 0};
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == want[i]);
    vram__epilogue none = {.act = -1};
    vram__epilogue_rows(&none, 0, 2, 0, 3, y, 3);
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == want[i]);
}

/* ---- Conv --------------------------------------------------------------- */


enum { EPI_NONE, EPI_ADD, EPI_ADD_RELU, EPI_HARD_SWISH, EPI_KINDS };

static void conv_case(const vram__conv2d *p, int with_bias, int epi, int parts)
{
    int64_t cig = p->c_in / p->group;
    int64_t nx = p->n * p->c_in * p->h * p->w, nw = p->c_out * cig * p->kh * p->kw;
    int64_t ny = p->n * p->c_out * p->oh * p->ow;
    float *x = rand_buf(nx), *w = rand_buf(nw), *b = with_bias ? rand_buf(p->c_out) : NULL;
    float *other = rand_buf(ny), *y = rand_buf(ny), *want = rand_buf(ny);
    uint64_t rb = vram__cpu_conv2d_scratch(p, 1u << 20);
    float *rs = rb ? rand_buf((int64_t)(rb / sizeof(float))) : NULL;
    assert_int_equal(vram__cpu_conv2d(p, x, w, b, want, rs, rb), 0);
    vram__shape ys = {.rank = 1, .dim = {ny}};
    if (epi == EPI_ADD || epi == EPI_ADD_RELU)
        assert_int_equal(vram__cpu_binary(VRAM__BIN_ADD, &ys, want, &ys, other, &ys, want), 0);
    if (epi == EPI_ADD_RELU)
        vram__cpu_unary(VRAM__UN_RELU, NULL, ny, want, want);
    if (epi == EPI_HARD_SWISH)
        vram__cpu_unary(VRAM__UN_HARD_SWISH, NULL, ny, want, want);

    vram__epilogue ep = {.add = epi == EPI_ADD || epi == EPI_ADD_RELU ? other : NULL,
                         .act = epi == EPI_ADD_RELU ? VRAM__UN_RELU
                                : epi == EPI_HARD_SWISH ? VRAM__UN_HARD_SWISH
                                                        : -1};
    uint64_t sb = vram__cpu_conv2d_fast_scratch(p);
    float *s = scratch_for(sb, parts);
    /* The weights as they are, then packed as the executor packs them at
     * load (every part reads the same packed block). */
    int mr = vram__cpu_isa_get()->mr;
    int64_t pf = vram__cpu_conv2d_packed_floats(p, mr);
    float *pw = pf ? rand_buf(pf) : NULL;
    if (pw)
        vram__cpu_conv2d_pack(p, w, mr, pw);
    for (int part = 0; part < parts; part++)
        assert_int_equal(vram__cpu_conv2d_fast(p, x, w, NULL, 0, b, epi == EPI_NONE ? NULL : &ep,
                                               y, s + part * part_floats(sb), part, parts),
                         0);
    char what[256];
    snprintf(what, sizeof what,
             "%s n%lld c_in%lld %lldx%lld c_out%lld k%lldx%lld s%lld,%lld d%lld,%lld "
             "pads %lld,%lld,%lld,%lld g%lld bias%d epilogue%d parts%d",
             vram__cpu_isa_get()->name, (long long)p->n, (long long)p->c_in, (long long)p->h,
             (long long)p->w, (long long)p->c_out, (long long)p->kh, (long long)p->kw,
             (long long)p->stride_h, (long long)p->stride_w, (long long)p->dil_h,
             (long long)p->dil_w, (long long)p->pad_top, (long long)p->pad_left,
             (long long)p->pad_bottom, (long long)p->pad_right, (long long)p->group, with_bias,
             epi, parts);
    check_close(what, y, want, ny);
    if (pw) {
        float *y2 = rand_buf(ny);
        for (int part = 0; part < parts; part++)
            assert_int_equal(vram__cpu_conv2d_fast(p, x, w, pw, mr, b,
                                                   epi == EPI_NONE ? NULL : &ep, y2,
                                                   s + part * part_floats(sb), part, parts),
                             0);
        check_close(what, y2, want, ny);
        free(y2);
    }
    free(x), free(w), free(b), free(other), free(y), free(want), free(rs), free(s), free(pw);
}

/* A random convolution of kind 0 dense, 1 grouped, 2 depthwise (with a
 * channel multiplier of 1 or 2), 3 pointwise. */
static vram__conv2d random_conv(int kind)
{
    vram__conv2d p = {0};
    p.n = irand(1, 2);
    p.kh = irand(1, 7);
    p.kw = irand(1, 7);
    p.stride_h = irand(1, 3);
    p.stride_w = irand(1, 3);
    p.dil_h = irand(1, 2);
    p.dil_w = irand(1, 2);
    p.pad_top = irand(0, 3);
    p.pad_left = irand(0, 3);
    p.pad_bottom = irand(0, 3);
    p.pad_right = irand(0, 3);
    if (kind == 0) {
        p.group = 1, p.c_in = irand(1, 9), p.c_out = irand(1, 20);
    } else if (kind == 1) {
        p.group = irand(2, 3), p.c_in = p.group * irand(1, 3), p.c_out = p.group * irand(1, 4);
    } else if (kind == 2) {
        p.group = p.c_in = irand(1, 8), p.c_out = p.c_in * irand(1, 2);
    } else {
        p.group = 1, p.c_in = irand(1, 40), p.c_out = irand(1, 40);
        p.kh = p.kw = p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
        p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
    }
    conv_random_size(&p, 1, 40);
    return p;
}

/* The depthwise shapes built with constant sizes (3x3 and 5x5, stride 1
 * or 2), at sizes that end mid-vector and mid-pass, and a few the general
 * loop takes: a kernel 40 rows tall, dilation, stride 3, kh != kw. */
static void test_dwconv(void **state)
{
    (void)state;
    for (int lv = 0; lv <= vram__cpu_isa_best(); lv++) {
        vram__cpu_isa_force(lv);
        for (int r = 0; r < 48; r++) {
            vram__conv2d p = random_conv(2);
            p.kh = p.kw = r % 2 ? 5 : 3;
            p.stride_h = p.stride_w = r / 2 % 2 + 1;
            p.dil_h = p.dil_w = 1;
            p.pad_top = p.pad_left = p.kh / 2;
            p.pad_bottom = p.pad_right = irand(0, p.kh / 2);
            if (p.h < p.kh)
                p.h = p.kh;
            if (p.w < p.kw)
                p.w = p.kw;
            conv_out_size(&p);
            conv_case(&p, (int)irand(0, 1), r / 4 % EPI_KINDS, (int)irand(1, 3));
        }
        vram__conv2d odd[3] = {
            {.n = 1, .c_in = 2, .h = 41, .w = 3, .c_out = 2, .kh = 40, .kw = 1, .stride_h = 1,
             .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 2},
            {.n = 2, .c_in = 3, .h = 37, .w = 35, .c_out = 6, .kh = 3, .kw = 3, .stride_h = 2,
             .stride_w = 2, .dil_h = 2, .dil_w = 2, .pad_top = 2, .pad_left = 2,
             .pad_bottom = 2, .pad_right = 2, .group = 3},
            {.n = 1, .c_in = 4, .h = 33, .w = 50, .c_out = 4, .kh = 5, .kw = 3, .stride_h = 3,
             .stride_w = 3, .dil_h = 1, .dil_w = 1, .pad_top = 1, .pad_left = 3,
             .pad_bottom = 0, .pad_right = 1, .group = 4},
        };
        for (int i = 0; i < 3; i++) {
            conv_out_size(&odd[i]);
            conv_case(&odd[i], 1, EPI_ADD_RELU, 1);
        }
    }
    vram__cpu_isa_force(-1);
}

static void test_conv_random(void **state)
{
    (void)state;
    for (int lv = 0; lv <= vram__cpu_isa_best(); lv++) {
        vram__cpu_isa_force(lv);
        for (int r = 0; r < 160; r++) {
            vram__conv2d p = random_conv(r % 4);
            conv_case(&p, (int)irand(0, 1), r / 4 % EPI_KINDS, (int)irand(1, 3));
        }
    }
    vram__cpu_isa_force(-1);
}

/* Shapes of the reference models' layers, big enough to cross the GEMM's
 * blocks: ResNet-50's 3x3 of 256 channels at 14x14, a stride-2 7x7 stem,
 * MobileNet's 5x5 depthwise at stride 2, BlazeFace's 1x1 with a residual. */
static void test_conv_layers(void **state)
{
    (void)state;
    vram__conv2d l[4] = {
        {.n = 1, .c_in = 256, .h = 14, .w = 14, .c_out = 256, .kh = 3, .kw = 3, .stride_h = 1,
         .stride_w = 1, .dil_h = 1, .dil_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 1,
         .pad_right = 1, .group = 1},
        {.n = 1, .c_in = 3, .h = 64, .w = 64, .c_out = 64, .kh = 7, .kw = 7, .stride_h = 2,
         .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 3, .pad_left = 3, .pad_bottom = 3,
         .pad_right = 3, .group = 1},
        {.n = 1, .c_in = 72, .h = 56, .w = 56, .c_out = 72, .kh = 5, .kw = 5, .stride_h = 2,
         .stride_w = 2, .dil_h = 1, .dil_w = 1, .pad_top = 2, .pad_left = 2, .pad_bottom = 2,
         .pad_right = 2, .group = 72},
        {.n = 1, .c_in = 48, .h = 32, .w = 32, .c_out = 96, .kh = 1, .kw = 1, .stride_h = 1,
         .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 1},
    };
    for (int lv = 0; lv <= vram__cpu_isa_best(); lv++) {
        vram__cpu_isa_force(lv);
        for (int i = 0; i < 4; i++) {
            conv_out_size(&l[i]);
            conv_case(&l[i], 1, i == 3 ? EPI_ADD_RELU : EPI_NONE, 1);
            conv_case(&l[i], 1, EPI_ADD_RELU, 2);
        }
    }
    vram__cpu_isa_force(-1);
}

/* A bad descriptor fails as the reference does, writing nothing. */
static void test_conv_bad(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, w[64] = {0}, y[4] = {7, 7, 7, 7};
    vram__conv2d p = {.n = 1, .c_in = 3, .h = 2, .w = 2, .c_out = 2, .kh = 1, .kw = 1,
                      .oh = 2, .ow = 2, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
                      .group = 2};
    assert_int_equal(vram__cpu_conv2d_fast(&p, x, w, NULL, 0, NULL, NULL, y, NULL, 0, 1),
                     VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "group 2"));
    for (int i = 0; i < 4; i++)
        assert_true(y[i] == 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm),        cmocka_unit_test(test_gemm_fast),
        cmocka_unit_test(test_epilogue),     cmocka_unit_test(test_global_avgpool),
        cmocka_unit_test(test_conv_random),  cmocka_unit_test(test_conv_layers),
        cmocka_unit_test(test_conv_bad),     cmocka_unit_test(test_dwconv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
