/* tests/integration/test_video_source_streams.c - video sources through
 * the public API (vramkit/video.h) that are not files: the synthetic
 * source (exact counts, the same pixels for the same index, loops,
 * malformed URLs), a ring over the owner's budget, close while a frame is
 * held, interrupt from another thread (waiting on a full ring and on
 * realtime pacing), and a UDP stream from ffmpeg whose peer goes away,
 * comes back (a reconnect) and goes for good (VRAM_EIO naming it). The UDP
 * test skips without ffmpeg. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "video_fixture.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <vramkit.h>
#include <vramkit/video.h>




static int group_setup(void **state)
{
    (void)state;
    if (fixture_setup(1ull << 30))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fixture_teardown();
    return 0;
}





static void test_synthetic(void **state)
{
    (void)state;
    vram_owner owner = new_owner("synthetic", 0);
    vram_source_opts o = opts_for("synthetic:160x120@20,frames=7");
    o.owner = owner;
    vram_source *s = open_ok(&o), *t = open_ok(&o);
    vram_source_info info;
    vram_source_info_get(s, &info);
    assert_int_equal(info.width, 160);
    assert_string_equal(info.codec, "synthetic");
    assert_true(info.fps == 20);
    assert_int_equal(info.decoder_bytes, 0);
    vram_frame *f, *g, *prev = NULL;
    for (int i = 0; i < 7; i++) {
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(vram_source_next(t, &g), 0);
        assert_true(f->pts_s == i / 20.0);
        for (int y = 0; y < 120; y++) /* the same for the same index */
            assert_memory_equal(f->rgb + y * f->stride, g->rgb + y * g->stride, 160 * 3);
        if (prev) /* it moves */
            assert_memory_not_equal(f->rgb, prev->rgb, 160 * 3);
        vram_source_release(s, prev);
        vram_source_release(t, g);
        prev = f;
    }
    vram_source_release(s, prev);
    assert_int_equal(vram_source_next(s, &f), 1);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(vram_source_close(t), 0);
    assert_int_equal(owner_live(owner), 0);

    o = opts_for("synthetic:32x32,frames=3");
    o.loop = 1;
    s = open_ok(&o);
    vram_source_info_get(s, &info);
    assert_true(info.fps == 30);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(vram_source_next(s, &f), 0);
        assert_int_equal(f->index, i);
        vram_source_release(s, f);
    }
    vram_source_stats st;
    vram_source_stats_get(s, &st);
    assert_int_equal(st.loops, 3);
    assert_int_equal(vram_source_close(s), 0);

    const char *bad[] = {"synthetic:", "synthetic:640", "synthetic:640x", "synthetic:8x8",
                         "synthetic:9000x100", "synthetic:64x64@0", "synthetic:64x64@", "synthetic:64x64@x",
                         "synthetic:64x64,frames=0", "synthetic:64x64 ", "synthetic:-64x64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o = opts_for(bad[i]);
        assert_int_equal(vram_source_open(&o, &s), VRAM_EINVAL);
        assert_null(s);
        assert_non_null(strstr(vram_last_error(), bad[i]));
    }
    o = opts_for("synthetic:64x64");
    o.ring_frames = 1;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EINVAL);
    assert_int_equal(vram_source_open(NULL, &s), VRAM_EINVAL);
}

static void test_ring_budget_too_small(void **state)
{
    (void)state;
    /* 4 frames of 640x480 do not fit 2 MiB. */
    vram_source_opts o = opts_for("synthetic:640x480@30");
    o.owner = new_owner("small-ring", 2ull << 20);
    vram_source *s = NULL;
    assert_int_equal(vram_source_open(&o, &s), VRAM_EBUDGET);
    assert_null(s);
    print_message("%s\n", vram_last_error());
    assert_non_null(strstr(vram_last_error(), "small-ring"));
    assert_int_equal(owner_live(o.owner), 0);
}

static void test_close_while_held(void **state)
{
    (void)state;
    vram_source_opts o = opts_for("synthetic:64x48@30");
    vram_source *s = open_ok(&o);
    vram_frame *f;
    assert_int_equal(vram_source_next(s, &f), 0);
    assert_int_equal(vram_source_close(s), VRAM_EBUSY);
    vram_source_release(s, f);
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(vram_source_close(NULL), 0);
}

static void *interrupt_later(void *arg)
{
    usleep(150 * 1000);
    vram_source_interrupt(arg);
    return NULL;
}

/* next() waiting on a full ring, then on realtime pacing: interrupted. */
static void test_interrupt(void **state)
{
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        vram_source_opts o = opts_for(pass ? "synthetic:64x48@0.5" : "synthetic:64x48@30");
        o.ring_frames = 2;
        o.realtime = pass;
        vram_source *s = open_ok(&o);
        vram_frame *a, *b = NULL, *c;
        assert_int_equal(vram_source_next(s, &a), 0);
        if (!pass)
            assert_int_equal(vram_source_next(s, &b), 0);
        pthread_t t;
        pthread_create(&t, NULL, interrupt_later, s);
        double t0 = now_s();
        assert_int_equal(vram_source_next(s, &c), 1);
        double took = now_s() - t0;
        pthread_join(t, NULL);
        assert_true(took >= 0.1 && took < 1.5);
        assert_int_equal(vram_source_next(s, &c), 1);
        vram_source_release(s, a);
        vram_source_release(s, b);
        assert_int_equal(vram_source_close(s), 0);
    }
}

/* MPEG-TS over UDP from ffmpeg, for `seconds`, in the background. */
static void udp_send(int port, double seconds)
{
    sh("ffmpeg -nostdin -loglevel error -re -f lavfi -i testsrc2=size=160x120:rate=25 -t %.1f "
       "-c:v libx264 -tune zerolatency -g 10 -f mpegts 'udp://127.0.0.1:%d?pkt_size=1316' "
       ">/dev/null 2>&1 &",
       seconds, port);
}

static int udp_port;

/* The peer comes back 4.5 s after the first one started (it sent for 2,
 * and the source notices it gone after 1 s without data). */
static void *udp_again(void *arg)
{
    double t0 = *(double *)arg;
    while (now_s() < t0 + 4.5)
        usleep(20 * 1000);
    udp_send(udp_port, 3.0);
    return NULL;
}

/* A stream whose peer stops, comes back (a reconnect), and stops for good:
 * the source gives up with VRAM_EIO naming it. */
static void test_udp_reconnect(void **state)
{
    (void)state;
    if (!have_ffmpeg)
        skip();
    udp_port = 20000 + (int)(getpid() % 20000);
    char url[64];
    snprintf(url, sizeof url, "udp://127.0.0.1:%d", udp_port);
    double t0 = now_s();
    udp_send(udp_port, 2.0);
    vram_source_opts o = opts_for(url);
    o.owner = new_owner("udp", 0);
    o.open_timeout_s = 1.0;
    o.reconnect_initial_s = 0.1;
    o.reconnect_max_s = 0.4;
    vram_source *s = open_ok(&o);
    pthread_t again;
    pthread_create(&again, NULL, udp_again, &t0);
    vram_source_info info;
    vram_source_info_get(s, &info);
    assert_int_equal(info.network, 1);
    assert_int_equal(info.seekable, 0);
    assert_int_equal(info.width, 160);
    vram_frame *f;
    int rc, n = 0;
    double last = -1;
    while ((rc = vram_source_next(s, &f)) == 0) {
        assert_int_equal(f->index, n);
        assert_true(f->pts_s > last);
        last = f->pts_s;
        vram_source_release(s, f);
        n++;
    }
    pthread_join(again, NULL);
    vram_source_stats st;
    vram_source_stats_get(s, &st);
    print_message("udp: %d frames, %llu reconnect(s), then after %.1f s %s: %s\n", n,
                  (unsigned long long)st.reconnects, now_s() - t0, vram_err_name(rc),
                  vram_last_error());
    assert_int_equal(rc, VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), url));
    assert_true(st.reconnects >= 1);
    assert_true(n > 60);
    assert_int_equal(vram_source_next(s, &f), VRAM_EIO); /* it stays failed */
    assert_int_equal(vram_source_close(s), 0);
    assert_int_equal(owner_live(o.owner), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_ring_budget_too_small),
        cmocka_unit_test(test_close_while_held),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_udp_reconnect),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
