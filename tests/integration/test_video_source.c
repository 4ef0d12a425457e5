/* tests/integration/test_video_source.c - file sources through the public
 * API (vramkit/video.h): clips made with ffmpeg at test time (mp4, mkv, ts,
 * raw H.264, HEVC) give their exact frame counts, pixels equal to
 * `ffmpeg -pix_fmt rgb24 -f rawvideo` output and timestamps; loop,
 * realtime pacing, truncated and corrupt files, a frame size that changes
 * (smaller goes on, larger fails the stream), refusals at open (a
 * missing path, a text file, audio only, decoder pictures over the
 * owner's budget) with nothing kept, every byte back after close, and the
 * decoder's buffers against their estimate. Skips without ffmpeg.
 * test_video_source_streams.c has the synthetic source, interrupts and a
 * network stream. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "video_fixture.h"
#include <time.h>

#include <vramkit.h>
#include <vramkit/video.h>

static char dir[64];
static int have_x265;

#define CLIP_FRAMES 50


static const char *path_of(const char *name)
{
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}


/* testsrc2 at 320x240, 25 fps, `frames` frames, encoded with `codec`
 * (and `extra` options) into dir/name. */
static void clip(const char *name, int frames, const char *size, const char *codec,
                 const char *extra)
{
    int rc = sh("ffmpeg -nostdin -y -loglevel error -f lavfi -i testsrc2=size=%s:rate=25 "
                "-frames:v %d -pix_fmt yuv420p -c:v %s %s '%s'",
                size, frames, codec, extra, path_of(name));
    if (rc)
        fail_msg("ffmpeg could not make %s", name);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/vramkit-video-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    if (fixture_setup(2ull << 30))
        return -1;
    if (!have_ffmpeg)
        return 0;
    have_x265 = sh("ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx265") == 0;
    clip("a.mp4", CLIP_FRAMES, "320x240", "libx264", "-movflags +faststart");
    clip("a.mkv", CLIP_FRAMES, "320x240", "libx264", "");
    clip("a.ts", CLIP_FRAMES, "320x240", "libx264", "");
    clip("a.h264", CLIP_FRAMES, "320x240", "libx264", "-f h264");
    clip("short.mkv", 10, "320x240", "libx264", "");
    clip("short.ts", 10, "320x240", "libx264", "");
    clip("big.mp4", 30, "1920x1080", "libx264", "-preset veryfast");
    if (have_x265)
        clip("a.hevc.mkv", CLIP_FRAMES, "320x240", "libx265", "-x265-params log-level=error");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fixture_teardown();
    sh("rm -rf '%s'", dir);
    return 0;
}





/* Read to the end: the count of frames; each released at once. */
static int64_t drain(vram_source *s)
{
    int64_t n = 0;
    vram_frame *f;
    int rc;
    while ((rc = vram_source_next(s, &f)) == 0) {
        assert_int_equal(f->index, n);
        n++;
        vram_source_release(s, f);
    }
    if (rc != 1)
        fail_msg("vram_source_next: %s: %s", vram_err_name(rc), vram_last_error());
    return n;
}

static void need_ffmpeg(void)
{
    if (!have_ffmpeg)
        skip();
}

/* ---- files ------------------------------------------------------------- */

static void test_frame_counts(void **state)
{
    (void)state;
    need_ffmpeg();
    const char *names[] = {"a.mp4", "a.mkv", "a.ts", "a.h264", "a.hevc.mkv"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (i == 4 && !have_x265)
            continue;
        char oname[32];
        snprintf(oname, sizeof oname, "count-%zu", i);
        vram_source_opts o = opts_for(path_of(names[i]));
        o.owner = new_owner(oname, 0);
        vram_source *s = open_ok(&o);
        vram_source_info info;
        assert_int_equal(vram_source_info_get(s, &info), 0);
        assert_int_equal(info.width, 320);
        assert_int_equal(info.height, 240);
        assert_string_equal(info.codec, i == 4 ? "hevc" : "h264");
        assert_int_equal(info.network, 0);
        assert_true(info.fps > 24.9 && info.fps < 25.1);
        assert_true(info.frame_bytes >= 320 * 240 * 3);
        assert_int_equal(info.frames_bytes, 4 * info.frame_bytes);
        assert_int_equal(drain(s), CLIP_FRAMES);
        vram_source_stats st;
        assert_int_equal(vram_source_stats_get(s, &st), 0);
        assert_int_equal(st.frames, CLIP_FRAMES);
        assert_int_equal(st.damaged, 0);
        assert_true(st.decoder_bytes > 0);
        assert_int_equal(vram_source_close(s), 0);
        assert_int_equal(owner_live(o.owner), 0);
    }
}

/* Every frame against ffmpeg's own RGB24 output: the largest difference. */
static int compare_with_ffmpeg(const char *name)
{
    const char *raw = path_of("ref.rgb");
    if (sh("ffmpeg -nostdin -y -loglevel error -i '%s' -pix_fmt rgb24 -f rawvideo '%s'",
           path_of(name), raw))
        fail_msg("ffmpeg could not decode %s", name);
    FILE *fp = fopen(raw, "rb");
    assert_non_null(fp);
    size_t row = 320 * 3, size = row * 240;
    uint8_t *ref = malloc(size);
    vram_source_opts o = opts_for(path_of(name));
    vram_source *s = open_ok(&o);
    vram_frame *f;
    int maxdiff = 0, n = 0;
    while (vram_source_next(s, &f) == 0) {
        assert_int_equal(fread(ref, 1, size, fp), size);
        for (int y = 0; y < 240; y++)
            for (size_t x = 0; x < row; x++) {
                int d = abs((int)f->rgb[(size_t)y * f->stride + x] - (int)ref[y * row + x]);
                maxdiff = d > maxdiff ? d : maxdiff;
            }
        n++;
        vram_source_release(s, f);
    }
    assert_int_equal(n, CLIP_FRAMES);
    assert_int_equal(fread(ref, 1, 1, fp), 0);
    fclose(fp);
    free(ref);
    assert_int_equal(vram_source_close(s), 0);
    print_message("%s: largest difference from ffmpeg's RGB24 over %d frames: %d\n", name, n,
                  maxdiff);
    return maxdiff;
}

static void test_pixels_match_ffmpeg(void **state)
{
    (void)state;
    need_ffmpeg();
    assert_true(compare_with_ffmpeg("a.mp4") <= 1);
    assert_true(compare_with_ffmpeg("a.ts") <= 1);
    if (have_x265)
        assert_true(compare_with_ffmpeg("a.hevc.mkv") <= 1);
}

static void test_timestamps(void **state)
{
    (void)state;
    need_ffmpeg();
    vram_source_opts o = opts_for(path_of("a.mp4"));
    vram_source *s = open_ok(&o);
    vram_frame *f;
    uint64_t last_ns = 0;
    for (int i = 0; i < CLIP_FRAMES; i++) {
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(f->index, i);
        if (f->pts_s < i / 25.0 - 1e-3 || f->pts_s > i / 25.0 + 1e-3)
            fail_msg("frame %d: pts %.4f, not %.4f", i, f->pts_s, i / 25.0);
        assert_true(f->decoded_ns >= last_ns);
        last_ns = f->decoded_ns;
        assert_int_equal(f->width, 320);
        assert_true(f->stride >= 960);
        vram_source_release(s, f);
    }
    assert_int_equal(vram_source_next(s, &f), 1);
    assert_null(f);
    assert_int_equal(vram_source_next(s, &f), 1); /* it stays at its end */
    assert_int_equal(vram_source_close(s), 0);
}

static void loop_once(const char *name)
{
    vram_source_opts o = opts_for(path_of(name));
    o.loop = 1;
    vram_source *s = open_ok(&o);
    vram_source_info info;
    vram_source_info_get(s, &info);
    assert_int_equal(info.seekable, 1);
    vram_frame *f, *first = NULL;
    double last = -1;
    for (int i = 0; i < 25; i++) {
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(f->index, i);
        assert_true(f->pts_s > last);
        if (f->pts_s < i / 25.0 - 1e-3 || f->pts_s > i / 25.0 + 1e-3)
            fail_msg("%s frame %d: pts %.4f, not %.4f", name, i, f->pts_s, i / 25.0);
        last = f->pts_s;
        if (i == 0) {
            first = f; /* held: frame 10 shows the same picture */
            continue;
        }
        if (i == 10)
            assert_memory_equal(f->rgb, first->rgb, f->stride * 240);
        vram_source_release(s, f);
    }
    vram_source_release(s, first);
    vram_source_stats st;
    vram_source_stats_get(s, &st);
    assert_int_equal(st.loops, 2);
    assert_int_equal(st.frames, 25);
    assert_int_equal(vram_source_close(s), 0);
}

static void test_loop(void **state)
{
    (void)state;
    need_ffmpeg();
    loop_once("short.mkv");
    clip("short.h264", 10, "320x240", "libx264", "-f h264");
    loop_once("short.h264");
}

static void test_realtime(void **state)
{
    (void)state;
    need_ffmpeg();
    vram_source_opts o = opts_for(path_of("short.mkv"));
    o.realtime = 1;
    vram_source *s = open_ok(&o);
    double t0 = now_s();
    assert_int_equal(drain(s), 10);
    double took = now_s() - t0;
    print_message("10 frames at 25 fps in realtime: %.3f s\n", took);
    assert_true(took >= 0.34);
    assert_int_equal(vram_source_close(s), 0);
}

static void test_truncated(void **state)
{
    (void)state;
    need_ffmpeg();
    const char *names[] = {"a.mkv", "a.ts", "a.mp4"};
    for (int i = 0; i < 3; i++) {
        char cut[32];
        snprintf(cut, sizeof cut, "cut-%s", names[i]);
        sh("cp '%s' '%s'", path_of(names[i]), path_of(cut));
        sh("f='%s'; truncate -s $(( $(stat -c %%s \"$f\") / 2 )) \"$f\"", path_of(cut));
        vram_source_opts o = opts_for(path_of(cut));
        vram_source *s = open_ok(&o);
        int64_t n = drain(s);
        print_message("%s cut in half: %lld frames\n", names[i], (long long)n);
        assert_true(n > 0 && n < CLIP_FRAMES);
        assert_int_equal(vram_source_close(s), 0);
    }
}

static void test_corrupt(void **state)
{
    (void)state;
    need_ffmpeg();
    const char *names[] = {"a.mkv", "a.ts", "a.mp4", "a.h264"};
    for (int i = 0; i < 4; i++) {
        char bad[32];
        snprintf(bad, sizeof bad, "bad-%s", names[i]);
        sh("cp '%s' '%s'", path_of(names[i]), path_of(bad));
        sh("f='%s'; s=$(stat -c %%s \"$f\"); head -c 4000 /dev/urandom | "
           "dd of=\"$f\" bs=1 seek=$((s / 2)) conv=notrunc status=none",
           path_of(bad));
        vram_source_opts o = opts_for(path_of(bad));
        vram_source *s = open_ok(&o);
        int64_t n = drain(s);
        vram_source_stats st;
        vram_source_stats_get(s, &st);
        print_message("%s damaged in the middle: %lld frames, %llu damaged\n", names[i],
                      (long long)n, (unsigned long long)st.damaged);
        assert_true(n > 0 && n <= CLIP_FRAMES);
        assert_int_equal(vram_source_close(s), 0);
    }
}

/* A stream whose frame size changes: smaller frames fit the ring's
 * buffers and keep coming, larger ones fail the stream with VRAM_EIO. */
static void test_size_change(void **state)
{
    (void)state;
    need_ffmpeg();
    clip("small.ts", 10, "160x120", "libx264", "");
    sh("cat '%s' '%s' > '%s'", path_of("short.ts"), path_of("small.ts"), path_of("shrinks.ts"));
    sh("cat '%s' '%s' > '%s'", path_of("small.ts"), path_of("short.ts"), path_of("grows.ts"));
    vram_source_opts o = opts_for(path_of("shrinks.ts"));
    vram_source *s = open_ok(&o);
    vram_frame *f;
    int n = 0, small = 0;
    while (vram_source_next(s, &f) == 0) {
        small += f->width == 160 && f->height == 120 && f->stride == 512;
        n++;
        vram_source_release(s, f);
    }
    assert_int_equal(n, 20);
    assert_int_equal(small, 10);
    assert_int_equal(vram_source_close(s), 0);

    o = opts_for(path_of("grows.ts"));
    s = open_ok(&o);
    n = 0;
    int rc;
    while ((rc = vram_source_next(s, &f)) == 0) {
        assert_int_equal(f->width, 160);
        n++;
        vram_source_release(s, f);
    }
    print_message("%s\n", vram_last_error());
    assert_int_equal(rc, VRAM_EIO);
    assert_int_equal(n, 10);
    assert_non_null(strstr(vram_last_error(), "320x240"));
    assert_int_equal(vram_source_close(s), 0);
}

static void expect_refused(const char *url, const char *oname)
{
    vram_source_opts o = opts_for(url);
    o.owner = new_owner(oname, 0);
    vram_source *s = (vram_source *)&o;
    int rc = vram_source_open(&o, &s);
    assert_null(s);
    if (rc != VRAM_EIO && rc != VRAM_EPARSE)
        fail_msg("%s: %s: %s", url, vram_err_name(rc), vram_last_error());
    if (!strstr(vram_last_error(), url))
        fail_msg("\"%s\" does not name %s", vram_last_error(), url);
    print_message("%s: %s\n", vram_err_name(rc), vram_last_error());
    assert_int_equal(owner_live(o.owner), 0);
}

static void test_refused_at_open(void **state)
{
    (void)state;
    expect_refused(path_of("missing.mp4"), "missing");
    sh("printf 'just some words\\nand more\\n' > '%s'", path_of("notes.txt"));
    expect_refused(path_of("notes.txt"), "text");
    sh("cp '%s' '%s'", path_of("notes.txt"), path_of("notes.mp4"));
    expect_refused(path_of("notes.mp4"), "text-mp4");
    if (have_ffmpeg) {
        sh("ffmpeg -nostdin -y -loglevel error -f lavfi -i sine=d=1 '%s'", path_of("tone.wav"));
        expect_refused(path_of("tone.wav"), "audio");
    }
}

static void test_decoder_budget_too_small(void **state)
{
    (void)state;
    need_ffmpeg();
    /* The decoder's pictures of a 1080p clip do not fit 1 MiB. */
    vram_source_opts o = opts_for(path_of("big.mp4"));
    o.owner = new_owner("small-decoder", 1ull << 20);
    vram_source *s = NULL;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EBUDGET);
    assert_null(s);
    print_message("%s\n", vram_last_error());
    assert_non_null(strstr(vram_last_error(), "small-decoder"));
    assert_int_equal(owner_live(o.owner), 0);
}

/* The ways of decoding, on a machine where they can be told apart without
 * a GPU: names both ways; options out of range refused naming them; NVDEC
 * without a device or context refused; auto without a GPU decodes on the
 * CPU and says why; NVDEC where no driver is refused (VRAM_ENOSYS) with the
 * reason and the URL, and auto with a context there falls back. */
static void test_decode_options(void **state)
{
    (void)state;
    vram_decode d = VRAM_DECODE_CPU;
    assert_int_equal(vram_decode_parse("nvdec", &d), 0);
    assert_int_equal(d, VRAM_DECODE_NVDEC);
    assert_string_equal(vram_decode_name(VRAM_DECODE_AUTO), "auto");
    assert_null(vram_decode_name((vram_decode)7));
    assert_int_equal(vram_decode_parse("gpu", &d), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "\"gpu\""));

    sh("ffmpeg -nostdin -y -loglevel error -f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 5 "
       "-pix_fmt yuv420p -c:v libx264 '%s'", path_of("dec.mp4"));
    vram_source_opts o = opts_for(path_of("dec.mp4"));
    vram_source *s = NULL;
    o.decode = (vram_decode)9;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "decode 9"));
    o.decode = VRAM_DECODE_NVDEC;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "needs a device or a CUDA context"));
    o.decode = VRAM_DECODE_AUTO;
    o.extra_surfaces = 33;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "extra_surfaces 33"));
    o.extra_surfaces = 0;
    o.owner = new_owner("auto-cpu", 0);
    s = open_ok(&o);
    vram_source_info info;
    vram_source_info_get(s, &info);
    assert_int_equal(info.decode, VRAM_DECODE_CPU);
    assert_int_equal(info.device_frames, 0);
    assert_non_null(strstr(info.fallback, "no GPU was given"));
    vram_frame *f;
    assert_int_equal(vram_source_next(s, &f), 0);
    assert_non_null(f->rgb);
    assert_int_equal(f->luma, 0);
    vram_source_release(s, f);
    assert_int_equal(vram_source_close(s), 0);

    int gpus = 0;
    if (vram_device_count(&gpus) == 0 && gpus > 0)
        return; /* a driver: tests/gpu/test_gpu_nvdec.c decodes for real */
    o.decode = VRAM_DECODE_NVDEC;
    o.cuda_context = (void *)&o; /* never used: there is no driver to use it with */
    s = (vram_source *)&o;
    assert_int_equal(vram_source_open(&o, &s), VRAM_ENOSYS);
    assert_null(s);
    print_message("nvdec without a driver: %s\n", vram_last_error());
    assert_non_null(strstr(vram_last_error(), path_of("dec.mp4")));
    o.decode = VRAM_DECODE_AUTO;
    s = open_ok(&o);
    vram_source_info_get(s, &info);
    print_message("auto without a driver: %s, because %s\n", vram_decode_name(info.decode),
                  info.fallback);
    assert_int_equal(info.decode, VRAM_DECODE_CPU);
    assert_true(info.fallback[0] != 0);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_live(o.owner), 0);
}

/* The source's decoder bytes once the owner's live bytes equal the ring's
 * plus them. With frame threads a decoder thread may take or give back a
 * picture between the two reads (the pool first, the count after), so they
 * are read again, up to 10000 times, until the decoder's bytes are the same
 * before and after the owner's; a count that never agrees fails the test. */
static uint64_t decoder_bytes_agreeing(vram_source *s, vram_owner owner, uint64_t ring)
{
    vram_source_stats before, after;
    vram_usage_stats u;
    for (int i = 0; i < 10000; i++) {
        vram_source_stats_get(s, &before);
        vram_owner_stats_get(pool, owner, &u);
        vram_source_stats_get(s, &after);
        if (before.decoder_bytes == after.decoder_bytes &&
            u.live_bytes == ring + before.decoder_bytes)
            return before.decoder_bytes;
        sched_yield();
    }
    fail_msg("the owner's live bytes %llu never equal the ring's %llu plus the decoder's %llu",
             (unsigned long long)u.live_bytes, (unsigned long long)ring,
             (unsigned long long)after.decoder_bytes);
    return 0;
}

/* A 1080p clip: the decoder's live bytes against the estimate at open. */
static void decoder_buffers(int threads)
{
    vram_source_opts o = opts_for(path_of("big.mp4"));
    char oname[32];
    snprintf(oname, sizeof oname, "big-%d", threads);
    o.owner = new_owner(oname, 0);
    o.decoder_threads = threads;
    vram_source *s = open_ok(&o);
    vram_source_info info;
    vram_source_info_get(s, &info);
    uint64_t peak = 0;
    vram_frame *f;
    int n = 0;
    while (vram_source_next(s, &f) == 0) {
        uint64_t decoder = decoder_bytes_agreeing(s, o.owner, info.frames_bytes);
        peak = decoder > peak ? decoder : peak;
        vram_source_release(s, f);
        n++;
    }
    assert_int_equal(n, 30);
    print_message("1080p H.264, %d decoder thread(s): decoder buffers %.1f MiB at most, "
                  "estimated %.1f MiB at open; ring %.1f MiB\n",
                  threads, peak / 1048576.0, info.decoder_bytes / 1048576.0,
                  info.frames_bytes / 1048576.0);
    assert_true(peak > 0);
    assert_true(info.decoder_bytes >= peak);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_live(o.owner), 0);
}

/* libavcodec's frame threads synchronise through atomics that TSan does not
 * see in the uninstrumented library, so it would report their frees as
 * races: under TSan only the single-threaded decoder runs. */
#if defined(__SANITIZE_THREAD__)
#define FRAME_THREADS_TESTED 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FRAME_THREADS_TESTED 0
#endif
#endif
#ifndef FRAME_THREADS_TESTED
#define FRAME_THREADS_TESTED 1
#endif

static void test_decoder_buffers(void **state)
{
    (void)state;
    need_ffmpeg();
    decoder_buffers(1);
    if (FRAME_THREADS_TESTED)
        decoder_buffers(4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_counts),
        cmocka_unit_test(test_pixels_match_ffmpeg),
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_loop),
        cmocka_unit_test(test_realtime),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_size_change),
        cmocka_unit_test(test_refused_at_open),
        cmocka_unit_test(test_decoder_budget_too_small),
        cmocka_unit_test(test_decoder_buffers),
        cmocka_unit_test(test_decode_options),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
