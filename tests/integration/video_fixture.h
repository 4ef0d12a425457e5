/* tests/integration/video_fixture.h - what the video source tests share
 * (test_video_source.c, test_video_source_streams.c): a host pool for the
 * sources, a shell command, the monotonic clock in seconds, and opening a
 * source or an owner with the failure named. Each test program includes it
 * once, after cmocka.h: the functions are its own (static). */
#ifndef VRAM_TEST_VIDEO_FIXTURE_H
#define VRAM_TEST_VIDEO_FIXTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_host.h"
#include "vramkit.h"

static vram_backend *backend;
static vram_pool *pool;
static int have_ffmpeg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The host pool (capacity bytes) and whether ffmpeg is there. */
static int fixture_setup(uint64_t capacity)
{
    if (host_pool_make(capacity, &backend, &pool))
        return -1;
    have_ffmpeg = system("command -v ffmpeg >/dev/null 2>&1") == 0;
    return 0;
}

static void fixture_teardown(void)
{
    assert_int_equal(vram_pool_destroy(pool), 0);
    vram_backend_destroy(backend);
}

static vram_source_opts opts_for(const char *url)
{
    vram_source_opts o;
    assert_int_equal(vram_source_opts_init(&o), 0);
    o.url = url;
    o.pool = pool;
    return o;
}

static vram_source *open_ok(const vram_source_opts *o)
{
    vram_source *s = NULL;
    int rc = vram_source_open(o, &s);
    if (rc)
        fail_msg("vram_source_open(%s): %s: %s", o->url, vram_err_name(rc), vram_last_error());
    return s;
}

static uint64_t owner_live(vram_owner owner)
{
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(pool, owner, &u), 0);
    return u.live_bytes;
}

static vram_owner new_owner(const char *name, uint64_t budget)
{
    vram_owner o;
    assert_int_equal(vram_owner_create(pool, name, budget, &o), 0);
    return o;
}

#endif
