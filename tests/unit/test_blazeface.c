/* tests/unit/test_blazeface.c - BlazeFace's decoding (src/pipeline/
 * blazeface.c, blazeface_anchors.c): the anchors of both models against
 * MediaPipe's SSD anchor rule written out here again (cells of 16 and 8
 * pixels, 2 and 6 anchors a cell); every anchor found where it should be
 * through a decode of synthetic tensors; one strong anchor giving one face
 * at the expected box and keypoints; two overlapping anchors merged into
 * one score-weighted face; suppression that is not transitive; scores
 * below the threshold, the thresholds of the two models and options;
 * fewer places than faces; the map to source pixels; malformed values;
 * scratch at any alignment; arguments refused. */
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
#include "pipeline/blazeface_internal.h"
#include "vramkit/blazeface.h"
#include "vramkit/error.h"

/* ---- synthetic outputs ----------------------------------------------- */

typedef struct tensors {
    float s16[512], s32[384];
    float r16[512 * 16], r32[384 * 16];
} tensors;

static void clear(tensors *t)
{
    for (int i = 0; i < 512; i++)
        t->s16[i] = -100.0f;
    for (int i = 0; i < 384; i++)
        t->s32[i] = -100.0f;
    memset(t->r16, 0, sizeof t->r16);
    memset(t->r32, 0, sizeof t->r32);
}

static float *score_of(tensors *t, int i)
{
    float *base = i < 512 ? t->s16 : t->s32;
    return base + (i < 512 ? i : i - 512);
}

static float *regs_of(tensors *t, int i)
{
    float *base = i < 512 ? t->r16 : t->r32;
    return base + (size_t)(i < 512 ? i : i - 512) * 16u;
}

/* Anchor i's centre by MediaPipe's rule for these models, in [0, 1]: the
 * first 512 on a 16 x 16 grid, 2 a cell; the other 384 on 8 x 8, 6 a cell. */
static void expected_anchor(int i, double *x, double *y)
{
    int cell = i < 512 ? i / 2 : (i - 512) / 6, side = i < 512 ? 16 : 8;
    *x = (cell % side + 0.5) / side;
    *y = (cell / side + 0.5) / side;
}

/* Put a face at anchor i: raw score, offset of the centre (model pixels),
 * size, keypoints at fixed offsets from the centre. */
static void put(tensors *t, int i, float raw, float dx, float dy, float w, float h)
{
    *score_of(t, i) = raw;
    float *r = regs_of(t, i);
    r[0] = dx;
    r[1] = dy;
    r[2] = w;
    r[3] = h;
    for (int k = 0; k < 6; k++) {
        r[4 + 2 * k] = dx + (float)(k - 3);
        r[5 + 2 * k] = dy + (float)(2 * k);
    }
}

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static vram_blazeface *make(int size, float threshold)
{
    vram_blazeface_opts o;
    assert_int_equal(vram_blazeface_opts_init(&o), 0);
    o.input_size = size;
    o.score_threshold = threshold;
    vram_blazeface *bf = NULL;
    assert_int_equal(vram_blazeface_create(&o, &bf), 0);
    assert_non_null(bf);
    return bf;
}

static size_t decode(const vram_blazeface *bf, tensors *t, const float *map, vram_face *out,
                     size_t cap)
{
    void *scratch = malloc(vram_blazeface_scratch_bytes(bf));
    assert_non_null(scratch);
    size_t n = 99;
    assert_int_equal(vram_blazeface_decode(bf, t->s16, t->r16, t->s32, t->r32, map, scratch,
                                           out, cap, &n),
                     0);
    free(scratch);
    return n;
}

/* ---- anchors --------------------------------------------------------- */

static void test_anchors(void **state)
{
    (void)state;
    static float xy[1000][2];
    for (int size = 128; size <= 256; size *= 2) {
        assert_int_equal(vram__blazeface_anchors(size, xy, 1000), 896);
        for (int i = 0; i < 896; i++) {
            double x, y;
            expected_anchor(i, &x, &y);
            assert_float_equal(xy[i][0], (float)x, 1e-6);
            assert_float_equal(xy[i][1], (float)y, 1e-6);
        }
    }
    /* Counting only, and sizes of no model. */
    assert_int_equal(vram__blazeface_anchors(256, xy, 0), 896);
    assert_int_equal(vram__blazeface_anchors(192, xy, 1000), 0);
}

/* Every anchor alone: one face centred on it, in both tensors' order. */
static void test_every_anchor_decodes_in_place(void **state)
{
    (void)state;
    static tensors t;
    for (int size = 128; size <= 256; size *= 2) {
        vram_blazeface *bf = make(size, 0);
        for (int i = 0; i < 896; i++) {
            clear(&t);
            put(&t, i, 5.0f, 0, 0, 10, 10);
            vram_face f;
            assert_int_equal(decode(bf, &t, NULL, &f, 1), 1);
            double x, y;
            expected_anchor(i, &x, &y);
            assert_float_equal((f.box[0] + f.box[2]) / 2, (float)(x * size), 1e-3);
            assert_float_equal((f.box[1] + f.box[3]) / 2, (float)(y * size), 1e-3);
        }
        vram_blazeface_destroy(bf);
    }
}

/* ---- one face -------------------------------------------------------- */

static void test_one_strong_anchor(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    /* Anchor 600: the 384-tensor's 88th, cell 14 (x 6, y 1) of the 8 x 8
     * grid, centre (208, 48) in the back model's pixels. */
    put(&t, 600, 3.0f, 4.0f, -6.0f, 40.0f, 50.0f);
    vram_blazeface *bf = make(256, 0);
    vram_face f[4];
    assert_int_equal(decode(bf, &t, NULL, f, 4), 1);
    double cx = 208 + 4, cy = 48 - 6;
    assert_float_equal(f[0].box[0], (float)(cx - 20), 1e-3);
    assert_float_equal(f[0].box[1], (float)(cy - 25), 1e-3);
    assert_float_equal(f[0].box[2], (float)(cx + 20), 1e-3);
    assert_float_equal(f[0].box[3], (float)(cy + 25), 1e-3);
    assert_float_equal(f[0].score, (float)sigmoid(3.0), 1e-6);
    for (int k = 0; k < 6; k++) {
        assert_float_equal(f[0].keypoints[k][0], (float)(cx + k - 3), 1e-3);
        assert_float_equal(f[0].keypoints[k][1], (float)(cy + 2 * k), 1e-3);
    }
    vram_blazeface_destroy(bf);
}

/* ---- suppression ----------------------------------------------------- */

static void test_two_overlapping_merge(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    /* The two anchors of cell 40 (x 8, y 2 of 16 x 16): centre (136, 40);
     * boxes 40 and 50 wide, IoU 0.64; scores s1 > s2. */
    put(&t, 80, 2.0f, 0, 0, 40, 40);
    put(&t, 81, 1.0f, 2, 0, 50, 50);
    vram_blazeface *bf = make(256, 0);
    vram_face f[4];
    assert_int_equal(decode(bf, &t, NULL, f, 4), 1);
    double s1 = sigmoid(2.0), s2 = sigmoid(1.0), w = s1 + s2;
    double want[4] = {(s1 * (136 - 20) + s2 * (138 - 25)) / w, (s1 * (40 - 20) + s2 * (40 - 25)) / w,
                      (s1 * (136 + 20) + s2 * (138 + 25)) / w, (s1 * (40 + 20) + s2 * (40 + 25)) / w};
    for (int i = 0; i < 4; i++)
        assert_float_equal(f[0].box[i], (float)want[i], 1e-3);
    assert_float_equal(f[0].score, (float)s1, 1e-6);
    for (int k = 0; k < 6; k++)
        assert_float_equal(f[0].keypoints[k][0], (float)((s1 * (136 + k - 3) + s2 * (138 + k - 3)) / w),
                           1e-3);
    vram_blazeface_destroy(bf);
}

/* A overlaps B, B overlaps C, A does not overlap C: A takes B, C stays. */
static void test_suppression_not_transitive(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    /* Anchors 80 and 81 share centre (136, 40); 82 is at (152, 40). */
    put(&t, 80, 4.0f, -10, 0, 30, 30); /* A: x 111..141 */
    put(&t, 81, 3.0f, 2, 0, 30, 30);   /* B: x 123..153, IoU(A, B) = 18/42 */
    put(&t, 82, 2.0f, -2, 0, 30, 30);  /* C: x 135..165, IoU(B, C) = 18/42, (A, C) 6/54 */
    vram_blazeface *bf = make(256, 0);
    vram_face f[4];
    assert_int_equal(decode(bf, &t, NULL, f, 4), 2);
    assert_float_equal(f[0].score, (float)sigmoid(4.0), 1e-6);
    assert_float_equal(f[1].score, (float)sigmoid(2.0), 1e-6);
    assert_float_equal(f[1].box[0], 135, 1e-3);
    assert_float_equal(f[1].box[2], 165, 1e-3);
    /* A IoU above 1 merges nothing. */
    vram_blazeface_opts o;
    vram_blazeface_opts_init(&o);
    o.suppression_iou = 1.0f;
    vram_blazeface *none = NULL;
    assert_int_equal(vram_blazeface_create(&o, &none), 0);
    assert_int_equal(decode(none, &t, NULL, f, 4), 3);
    vram_blazeface_destroy(none);
    vram_blazeface_destroy(bf);
}

/* ---- thresholds ------------------------------------------------------ */

static void test_thresholds(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    put(&t, 10, 0.5f, 0, 0, 20, 20); /* 0.622: below the back model's 0.65 */
    vram_blazeface *back = make(256, 0), *front = make(128, 0), *low = make(256, 0.6f);
    vram_face f;
    assert_int_equal(decode(back, &t, NULL, &f, 1), 0);
    assert_int_equal(decode(front, &t, NULL, &f, 1), 1);
    assert_int_equal(decode(low, &t, NULL, &f, 1), 1);
    *score_of(&t, 10) = 0.0f; /* 0.5: the front model's threshold, kept */
    assert_int_equal(decode(front, &t, NULL, &f, 1), 1);
    *score_of(&t, 10) = -0.01f;
    assert_int_equal(decode(front, &t, NULL, &f, 1), 0);
    /* Scores clipped at 100 before the sigmoid. */
    *score_of(&t, 10) = 1e30f;
    assert_int_equal(decode(back, &t, NULL, &f, 1), 1);
    assert_float_equal(f.score, 1.0f, 1e-6);
    clear(&t);
    assert_int_equal(decode(front, &t, NULL, &f, 1), 0);
    vram_blazeface_destroy(back);
    vram_blazeface_destroy(front);
    vram_blazeface_destroy(low);
}

/* ---- output ---------------------------------------------------------- */

static void test_cap_smaller_than_found(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    put(&t, 0, 1.0f, 0, 0, 12, 12);
    put(&t, 300, 3.0f, 0, 0, 12, 12);
    put(&t, 700, 2.0f, 0, 0, 12, 12);
    vram_blazeface *bf = make(256, 0);
    vram_face f[3];
    memset(f, 0x5A, sizeof f);
    assert_int_equal(decode(bf, &t, NULL, f, 2), 3);
    assert_float_equal(f[0].score, (float)sigmoid(3.0), 1e-6);
    assert_float_equal(f[1].score, (float)sigmoid(2.0), 1e-6);
    vram_face untouched;
    memset(&untouched, 0x5A, sizeof untouched);
    assert_memory_equal(&f[2], &untouched, sizeof untouched);
    /* Counting only. */
    assert_int_equal(decode(bf, &t, NULL, NULL, 0), 3);
    vram_blazeface_destroy(bf);
}

static void test_to_source_map(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    put(&t, 600, 3.0f, 4.0f, -6.0f, 40.0f, 50.0f); /* centre (212, 42) */
    vram_blazeface *bf = make(256, 0);
    vram_face m, s;
    assert_int_equal(decode(bf, &t, NULL, &m, 1), 1);
    /* A 640x360 frame: scale 0.4, rows from 56. */
    const float map[3] = {0.4f, 0.0f, 56.0f};
    assert_int_equal(decode(bf, &t, map, &s, 1), 1);
    for (int i = 0; i < 4; i++)
        assert_float_equal(s.box[i], (m.box[i] - (i & 1 ? 56.0f : 0.0f)) / 0.4f, 1e-3);
    for (int k = 0; k < 6; k++) {
        assert_float_equal(s.keypoints[k][0], m.keypoints[k][0] / 0.4f, 1e-3);
        assert_float_equal(s.keypoints[k][1], (m.keypoints[k][1] - 56.0f) / 0.4f, 1e-3);
    }
    assert_float_equal(s.box[0], (212 - 20) / 0.4f, 1e-2);
    assert_float_equal(s.box[1], (42 - 25 - 56) / 0.4f, 1e-2);
    assert_true(s.score == m.score);
    const float bad[3] = {0.0f, 0.0f, 0.0f};
    size_t n;
    char scratch[1];
    assert_int_equal(vram_blazeface_decode(bf, t.s16, t.r16, t.s32, t.r32, bad, scratch, &s, 1,
                                           &n),
                     VRAM_EINVAL);
    vram_blazeface_destroy(bf);
}

/* NaN scores, negative sizes and values that are not finite are dropped. */
static void test_malformed_values(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    put(&t, 1, NAN, 0, 0, 10, 10);
    put(&t, 100, 5.0f, 0, 0, -1, 10);
    put(&t, 200, 5.0f, 0, 0, 10, NAN);
    put(&t, 300, 5.0f, INFINITY, 0, 10, 10);
    put(&t, 400, 5.0f, 0, 0, 10, 10);
    regs_of(&t, 400)[9] = NAN; /* a keypoint */
    put(&t, 700, 5.0f, 0, 0, 0, 0); /* a box of no area: kept, alone */
    put(&t, 701, 4.0f, 0, 0, 10, 10);
    vram_blazeface *bf = make(256, 0);
    vram_face f[8];
    assert_int_equal(decode(bf, &t, NULL, f, 8), 2);
    assert_float_equal(f[0].box[2] - f[0].box[0], 0, 1e-6);
    assert_float_equal(f[1].box[2] - f[1].box[0], 10, 1e-3);
    vram_blazeface_destroy(bf);
}

/* The scratch may start anywhere; every anchor above the threshold fits. */
static void test_scratch_alignment_and_all_anchors(void **state)
{
    (void)state;
    static tensors t;
    clear(&t);
    for (int i = 0; i < 896; i++)
        put(&t, i, (float)(i % 7), 0, 0, 4, 4);
    vram_blazeface *bf = make(256, 0);
    size_t bytes = vram_blazeface_scratch_bytes(bf);
    assert_true(bytes > 0);
    char *raw = malloc(bytes + 16);
    assert_non_null(raw);
    static vram_face f[896];
    size_t n0 = 0, n;
    for (int shift = 0; shift < 16; shift += 3) {
        assert_int_equal(vram_blazeface_decode(bf, t.s16, t.r16, t.s32, t.r32, NULL,
                                               raw + shift, f, 896, &n),
                         0);
        if (shift == 0)
            n0 = n;
        assert_int_equal(n, n0);
    }
    /* Raw scores 1..6 pass, 0 does not; boxes 4 pixels wide never overlap
     * across cells, and the anchors of one cell (2 on the first grid, 6 on
     * the second, at least one of them passing) merge into one face. */
    assert_int_equal(n0, 16 * 16 + 8 * 8);
    for (size_t i = 1; i < n0; i++)
        assert_true(f[i - 1].score >= f[i].score);
    free(raw);
    vram_blazeface_destroy(bf);
}

/* ---- arguments ------------------------------------------------------- */

static void test_bad_arguments(void **state)
{
    (void)state;
    vram_blazeface_opts o;
    vram_blazeface *bf = (vram_blazeface *)&o;
    assert_int_equal(vram_blazeface_opts_init(NULL), VRAM_EINVAL);
    assert_int_equal(vram_blazeface_create(NULL, NULL), VRAM_EINVAL);
    vram_blazeface_opts_init(&o);
    o.input_size = 192;
    assert_int_equal(vram_blazeface_create(&o, &bf), VRAM_EINVAL);
    assert_null(bf);
    assert_non_null(strstr(vram_last_error(), "192"));
    vram_blazeface_opts_init(&o);
    o.score_threshold = 1.5f;
    assert_int_equal(vram_blazeface_create(&o, &bf), VRAM_EINVAL);
    o.score_threshold = NAN;
    assert_int_equal(vram_blazeface_create(&o, &bf), VRAM_EINVAL);
    vram_blazeface_opts_init(&o);
    o.suppression_iou = -0.1f;
    assert_int_equal(vram_blazeface_create(&o, &bf), VRAM_EINVAL);
    vram_blazeface_opts_init(&o);
    o.size = 3;
    assert_int_equal(vram_blazeface_create(&o, &bf), VRAM_EINVAL);
    /* NULL options: the back model's defaults. */
    assert_int_equal(vram_blazeface_create(NULL, &bf), 0);
    assert_int_equal(vram_blazeface_scratch_bytes(NULL), 0);
    static tensors t;
    clear(&t);
    void *scratch = malloc(vram_blazeface_scratch_bytes(bf));
    vram_face f;
    size_t n = 7;
    assert_int_equal(vram_blazeface_decode(NULL, t.s16, t.r16, t.s32, t.r32, NULL, scratch, &f,
                                           1, &n),
                     VRAM_EINVAL);
    assert_int_equal(n, 0);
    assert_int_equal(vram_blazeface_decode(bf, t.s16, NULL, t.s32, t.r32, NULL, scratch, &f, 1,
                                           &n),
                     VRAM_EINVAL);
    assert_int_equal(vram_blazeface_decode(bf, t.s16, t.r16, t.s32, t.r32, NULL, NULL, &f, 1,
                                           &n),
                     VRAM_EINVAL);
    assert_int_equal(vram_blazeface_decode(bf, t.s16, t.r16, t.s32, t.r32, NULL, scratch, NULL,
                                           1, &n),
                     VRAM_EINVAL);
    assert_int_equal(vram_blazeface_decode(bf, t.s16, t.r16, t.s32, t.r32, NULL, scratch, &f, 1,
                                           NULL),
                     VRAM_EINVAL);
    free(scratch);
    vram_blazeface_destroy(bf);
    vram_blazeface_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_every_anchor_decodes_in_place),
        cmocka_unit_test(test_one_strong_anchor),
        cmocka_unit_test(test_two_overlapping_merge),
        cmocka_unit_test(test_suppression_not_transitive),
        cmocka_unit_test(test_thresholds),
        cmocka_unit_test(test_cap_smaller_than_found),
        cmocka_unit_test(test_to_source_map),
        cmocka_unit_test(test_malformed_values),
        cmocka_unit_test(test_scratch_alignment_and_all_anchors),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
