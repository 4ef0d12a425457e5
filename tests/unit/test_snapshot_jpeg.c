/* tests/unit/test_snapshot_jpeg.c - annotated JPEG snapshots
 * (src/pipeline/snapshot_jpeg.c): a picture encoded into the caller's
 * buffer and decoded back with TurboJPEG (size and pixels close), at the
 * bound and for a stride with padding; buffers too small and other
 * arguments refused; faces drawn where they are, clipped at every edge,
 * nothing outside the picture's rows touched, boxes that are not finite
 * skipped; the atomic file write into a folder, over an old file, and into
 * a missing folder (VRAM_EIO naming the path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "base/internal.h"
#include "pipeline/snapshot_jpeg.h"
#include "vramkit/error.h"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram_snapshot_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A smooth picture (JPEG keeps it well); padding bytes 0xEE. */
static uint8_t *gradient(int w, int h, size_t stride)
{
    uint8_t *p = malloc(stride * (size_t)h);
    assert_non_null(p);
    memset(p, 0xEE, stride * (size_t)h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + (size_t)y * stride + (size_t)x * 3u;
            q[0] = (uint8_t)(x * 255 / (w - 1));
            q[1] = (uint8_t)(y * 255 / (h - 1));
            q[2] = (uint8_t)((x + y) * 127 / (w + h - 2));
        }
    return p;
}

/* ---- encoding -------------------------------------------------------- */

static void roundtrip(int w, int h, size_t stride)
{
    uint8_t *rgb = gradient(w, h, stride);
    vram__jpeg_encoder *e = NULL;
    assert_int_equal(vram__jpeg_encoder_create(&e), 0);
    size_t cap = vram__jpeg_bound(w, h), len = 0;
    assert_true(cap > 0);
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    assert_int_equal(vram__jpeg_encode(e, rgb, w, h, stride, 90, buf, cap, &len), 0);
    assert_true(len > 100 && len <= cap);
    assert_int_equal(buf[0], 0xFF);
    assert_int_equal(buf[1], 0xD8);

    tjhandle d = tjInitDecompress();
    assert_non_null(d);
    int dw = 0, dh = 0, sub = -1, cs = -1;
    assert_int_equal(tjDecompressHeader3(d, buf, (unsigned long)len, &dw, &dh, &sub, &cs), 0);
    assert_int_equal(dw, w);
    assert_int_equal(dh, h);
    assert_int_equal(sub, TJSAMP_420);
    uint8_t *back = malloc((size_t)w * (size_t)h * 3u);
    assert_non_null(back);
    assert_int_equal(tjDecompress2(d, buf, (unsigned long)len, back, w, w * 3, h, TJPF_RGB, 0), 0);
    double sum = 0;
    int worst = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++) {
            int diff = abs((int)back[(size_t)y * (size_t)w * 3u + (size_t)x] -
                           (int)rgb[(size_t)y * stride + (size_t)x]);
            sum += diff;
            worst = diff > worst ? diff : worst;
        }
    double mean = sum / ((double)w * h * 3);
    assert_true(mean < 2.0);
    assert_true(worst < 40);
    tjDestroy(d);
    free(back);
    free(buf);
    free(rgb);
    vram__jpeg_encoder_destroy(e);
}

static void test_encode_roundtrip(void **state)
{
    (void)state;
    roundtrip(64, 48, 64 * 3);
    roundtrip(33, 17, 33 * 3 + 7); /* odd sizes, padded rows */
    roundtrip(640, 360, 640 * 3);
}

static void test_encode_arguments(void **state)
{
    (void)state;
    vram__jpeg_encoder *e = NULL;
    assert_int_equal(vram__jpeg_encoder_create(NULL), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encoder_create(&e), 0);
    uint8_t *rgb = gradient(16, 16, 48);
    size_t cap = vram__jpeg_bound(16, 16), len = 5;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 85, buf, cap - 1, &len), VRAM_EINVAL);
    assert_int_equal(len, 0);
    assert_non_null(strstr(vram_last_error(), "needed"));
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 47, 85, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 0, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 101, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 0, 16, 48, 85, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(NULL, rgb, 16, 16, 48, 85, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, NULL, 16, 16, 48, 85, buf, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 85, NULL, cap, &len), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 85, buf, cap, NULL), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_encode(e, rgb, 16, 16, 48, 85, buf, cap, &len), 0);
    assert_int_equal(vram__jpeg_bound(0, 10), 0);
    assert_int_equal(vram__jpeg_bound(10, -1), 0);
    assert_true(vram__jpeg_bound(1920, 1080) >= 1920u * 1080u * 3u / 2u);
    free(buf);
    free(rgb);
    vram__jpeg_encoder_destroy(e);
    vram__jpeg_encoder_destroy(NULL);
}

/* ---- drawing --------------------------------------------------------- */

enum { W = 40, H = 30, PAD = 6, STRIDE = W * 3 + PAD };

/* A grey picture with a guard row above and below. */
static uint8_t *canvas(uint8_t **mem)
{
    *mem = malloc((size_t)STRIDE * (H + 2));
    assert_non_null(*mem);
    memset(*mem, 0x80, (size_t)STRIDE * (H + 2));
    return *mem + STRIDE;
}

static const uint8_t *px(const uint8_t *rgb, int x, int y)
{
    return rgb + (size_t)y * STRIDE + (size_t)x * 3u;
}

static int is(const uint8_t *p, int r, int g, int b)
{
    return p[0] == r && p[1] == g && p[2] == b;
}

/* The guard rows and every row's padding bytes are still 0x80. */
static void assert_outside_untouched(const uint8_t *mem)
{
    for (int x = 0; x < STRIDE; x++) {
        assert_int_equal(mem[x], 0x80);
        assert_int_equal(mem[(size_t)STRIDE * (H + 1) + (size_t)x], 0x80);
    }
    for (int y = 1; y <= H; y++)
        for (int x = W * 3; x < STRIDE; x++)
            assert_int_equal(mem[(size_t)y * STRIDE + (size_t)x], 0x80);
}

static vram_face face(float x0, float y0, float x1, float y1)
{
    vram_face f = {{x0, y0, x1, y1}, 0.9f, {{0}}};
    for (int k = 0; k < 6; k++) {
        f.keypoints[k][0] = (x0 + x1) / 2;
        f.keypoints[k][1] = (y0 + y1) / 2;
    }
    return f;
}

static void test_draw_inside(void **state)
{
    (void)state;
    uint8_t *mem, *rgb = canvas(&mem);
    vram_face f = face(5, 6, 25, 20);
    vram__draw_faces(rgb, W, H, STRIDE, &f, 1);
    /* The outline: 2 pixels on each side, inside the box. */
    assert_true(is(px(rgb, 5, 6), 0, 255, 0));
    assert_true(is(px(rgb, 6, 7), 0, 255, 0));
    assert_true(is(px(rgb, 25, 20), 0, 255, 0));
    assert_true(is(px(rgb, 24, 19), 0, 255, 0));
    assert_true(is(px(rgb, 15, 6), 0, 255, 0));
    assert_true(is(px(rgb, 5, 13), 0, 255, 0));
    assert_true(is(px(rgb, 7, 8), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 4, 6), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 26, 20), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 15, 21), 0x80, 0x80, 0x80));
    /* The keypoints: a 5 x 5 square at (15, 13). */
    for (int dy = -2; dy <= 2; dy++)
        for (int dx = -2; dx <= 2; dx++)
            assert_true(is(px(rgb, 15 + dx, 13 + dy), 255, 0, 0));
    assert_true(is(px(rgb, 18, 13), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 15, 16), 0x80, 0x80, 0x80));
    assert_outside_untouched(mem);
    free(mem);
}

static void test_draw_clipped(void **state)
{
    (void)state;
    uint8_t *mem, *rgb = canvas(&mem);
    vram_face f[] = {
        face(-10, -8, 12, 9),       /* over the top-left corner */
        face(30, 22, 60, 45),       /* over the bottom-right corner */
        face(-1e9f, -1e9f, 1e9f, 1e9f), /* around the whole picture: nothing inside */
        face(100, 100, 200, 200),   /* outside */
        face(NAN, 1, 2, 3),         /* not finite: skipped */
    };
    f[0].keypoints[0][0] = -1; /* a keypoint half outside */
    f[0].keypoints[0][1] = 0;
    f[1].keypoints[2][0] = INFINITY;
    for (int k = 0; k < 6; k++)
        f[2].keypoints[k][0] = f[2].keypoints[k][1] = -1e9f;
    vram__draw_faces(rgb, W, H, STRIDE, f, 2);
    /* The first face's right and bottom sides are drawn, the others clipped. */
    assert_true(is(px(rgb, 12, 0), 0, 255, 0));
    assert_true(is(px(rgb, 0, 9), 0, 255, 0));
    assert_true(is(px(rgb, 0, 0), 255, 0, 0)); /* the keypoint's visible part */
    assert_true(is(px(rgb, 1, 2), 255, 0, 0));
    assert_true(is(px(rgb, 4, 2), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 1, 3), 0x80, 0x80, 0x80));
    /* The second face (a keypoint not finite: skipped altogether). */
    assert_true(is(px(rgb, 30, 22), 0x80, 0x80, 0x80));
    assert_true(is(px(rgb, 39, 29), 0x80, 0x80, 0x80));
    f[1].keypoints[2][0] = 45;
    vram__draw_faces(rgb, W, H, STRIDE, &f[1], 1);
    assert_true(is(px(rgb, 30, 22), 0, 255, 0));
    assert_true(is(px(rgb, 39, 22), 0, 255, 0));
    assert_true(is(px(rgb, 30, 29), 0, 255, 0));
    assert_true(is(px(rgb, 39, 29), 0x80, 0x80, 0x80)); /* inside the box, away from its sides */
    assert_outside_untouched(mem);
    /* The others change nothing. */
    uint8_t *copy = malloc((size_t)STRIDE * (H + 2));
    assert_non_null(copy);
    memcpy(copy, mem, (size_t)STRIDE * (H + 2));
    vram__draw_faces(rgb, W, H, STRIDE, &f[2], 3);
    assert_memory_equal(copy, mem, (size_t)STRIDE * (H + 2));
    vram__draw_faces(NULL, W, H, STRIDE, f, 1);
    vram__draw_faces(rgb, W, H, W * 3 - 1, f, 1);
    vram__draw_faces(rgb, W, H, STRIDE, NULL, 1);
    assert_memory_equal(copy, mem, (size_t)STRIDE * (H + 2));
    free(copy);
    free(mem);
}

/* ---- writing --------------------------------------------------------- */

static void read_back(const char *path, const char *want)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char got[64] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    assert_int_equal(n, strlen(want));
    assert_string_equal(got, want);
}

static int files_in(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_write_file(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/cam1.jpg", tmpdir);
    assert_int_equal(vram__jpeg_write_file(tmpdir, "cam1.jpg", (const uint8_t *)"first", 5), 0);
    read_back(path, "first");
    assert_int_equal(vram__jpeg_write_file(tmpdir, "cam1.jpg", (const uint8_t *)"second!", 7), 0);
    read_back(path, "second!");
    assert_int_equal(files_in(tmpdir), 1); /* no .tmp left */

    char missing[512];
    snprintf(missing, sizeof missing, "%s/gone", tmpdir);
    assert_int_equal(vram__jpeg_write_file(missing, "cam1.jpg", (const uint8_t *)"x", 1),
                     VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), missing));
    assert_non_null(strstr(vram_last_error(), "cam1.jpg"));
    /* A directory where the file should go: the rename fails, the .tmp goes. */
    char sub[512];
    snprintf(sub, sizeof sub, "%s/taken", tmpdir);
    assert_int_equal(mkdir(sub, 0755), 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/x", sub);
    FILE *f = fopen(inner, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(vram__jpeg_write_file(tmpdir, "taken", (const uint8_t *)"x", 1), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "taken"));
    assert_int_equal(files_in(tmpdir), 2);

    assert_int_equal(vram__jpeg_write_file(tmpdir, "a/b.jpg", (const uint8_t *)"x", 1),
                     VRAM_EINVAL);
    assert_int_equal(vram__jpeg_write_file(NULL, "b.jpg", (const uint8_t *)"x", 1), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_write_file(tmpdir, NULL, (const uint8_t *)"x", 1), VRAM_EINVAL);
    assert_int_equal(vram__jpeg_write_file(tmpdir, "b.jpg", NULL, 1), VRAM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_roundtrip),
        cmocka_unit_test(test_encode_arguments),
        cmocka_unit_test(test_draw_inside),
        cmocka_unit_test(test_draw_clipped),
        cmocka_unit_test(test_write_file),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
