/* tests/gpu/test_gpu_fleet.c - a fleet on the real GPU (the cuda executor):
 * a fleet of one on device 0 serves streams with the same fixed need and
 * the same need per stream as the plain service, its pools carry gpu 0;
 * when that GPU fails its streams are reported lost (there is no other)
 * and give their memory back, and nothing more is admitted; a fleet naming
 * a GPU past the last is refused with that GPU's sentence. The model comes
 * from $VRAM_TEST_MODELS (default build/models: scripts/models.sh). Needs a
 * GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vramkit.h"

#define STREAMS 4

static char model[4096];

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("VRAM_TEST_MODELS");
    snprintf(model, sizeof model, "%s/blazeface_back.onnx", dir ? dir : "build/models");
    if (access(model, R_OK)) {
        fprintf(stderr, "test_gpu_fleet: no model at %s: run scripts/models.sh\n", model);
        return -1;
    }
    return 0;
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void service_opts(vram_service_opts *o)
{
    assert_int_equal(vram_service_opts_init(o), 0);
    o->model = model;
    o->executor = "cuda";
    o->workers = 2;
    o->batch = 4;
}

static void stream_opts(vram_stream_opts *so, const char *id)
{
    vram_stream_opts_init(so);
    so->id = id;
    so->url = "synthetic:320x240@30";
    so->realtime = 1;
    so->loop = 1;
}

/* The plain service's fixed need and one stream's need on device 0. */
static void plain_sizes(uint64_t *fixed, uint64_t *need)
{
    vram_service_opts o;
    service_opts(&o);
    vram_service *svc = NULL;
    assert_int_equal(vram_service_create(&o, &svc), 0);
    vram_service_info info;
    assert_int_equal(vram_service_info_get(svc, &info), 0);
    *fixed = info.fixed_bytes;
    vram_stream_opts so;
    stream_opts(&so, "probe");
    assert_int_equal(vram_service_add_stream(svc, &so, NULL), 0);
    vram_stream_stats st;
    assert_int_equal(vram_service_stream_stats(svc, "probe", &st), 0);
    *need = st.need_bytes;
    assert_int_equal(st.gpu, -1);
    assert_int_equal(vram_service_destroy(svc), 0);
}

static void test_fleet_of_one(void **state)
{
    (void)state;
    uint64_t fixed, need;
    plain_sizes(&fixed, &need);

    vram_fleet_opts fo;
    assert_int_equal(vram_fleet_opts_init(&fo), 0);
    service_opts(&fo.service);
    const int gpus[] = {0};
    fo.gpus = gpus;
    fo.n_gpus = 1;
    fo.watch_s = 0.02;
    vram_fleet *f = NULL;
    if (vram_fleet_create(&fo, &f))
        fail_msg("fleet on GPU 0: %s", vram_last_error());
    vram_service *svc = vram_fleet_service(f, 0);
    vram_service_info info;
    assert_int_equal(vram_service_info_get(svc, &info), 0);
    assert_int_equal(info.fixed_bytes, fixed); /* the same engine copy and workers */
    vram_pool *dev = vram_service_device_pool(svc);
    assert_non_null(dev);
    assert_string_equal(vram_pool_name(dev), "gpu0-device");
    assert_int_equal(vram_pool_gpu(dev), 0);
    assert_int_equal(vram_pool_gpu(vram_service_host_pool(svc)), 0);

    char ids[STREAMS][8];
    for (int i = 0; i < STREAMS; i++) {
        snprintf(ids[i], sizeof ids[i], "g%d", i);
        vram_stream_opts so;
        stream_opts(&so, ids[i]);
        size_t at = 9;
        assert_int_equal(vram_fleet_add_stream(f, &so, NULL, 0, &at), 0);
        assert_int_equal(at, 0);
    }
    /* Frames go through the model on the GPU for every stream. */
    vram_stream_stats st[STREAMS + 4];
    size_t n = 0;
    int ready = 0;
    for (int t = 0; t < 3000 && !ready; t++) {
        assert_int_equal(vram_fleet_streams(f, st, STREAMS + 4, &n), 0);
        ready = n == STREAMS;
        for (size_t i = 0; i < n && ready; i++)
            ready = st[i].processed >= 10;
        if (!ready)
            nap_ms(10);
    }
    assert_true(ready);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(st[i].gpu, 0);
        assert_int_equal(st[i].need_bytes, need); /* memory per stream unchanged */
        assert_int_equal(st[i].state, VRAM_STREAM_RUNNING);
    }
    vram_pool_stats ps;
    assert_int_equal(vram_pool_stats_get(dev, &ps), 0);
    assert_true(ps.live_bytes > 0);

    /* The GPU fails: with no other, its streams are lost, their memory back. */
    assert_int_equal(vram_service_fail(svc, "Xid 79: fell off the bus (injected)"), 0);
    uint64_t moved = 0, lost = 0;
    for (int t = 0; t < 1000 && lost < STREAMS; t++) {
        vram_fleet_failover_counts(f, &moved, &lost);
        nap_ms(10);
    }
    assert_int_equal(moved, 0);
    assert_int_equal(lost, STREAMS);
    assert_int_equal(vram_fleet_streams(f, st, STREAMS + 4, &n), 0);
    assert_int_equal(n, STREAMS);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(st[i].state, VRAM_STREAM_FAILED);
        assert_non_null(strstr(st[i].error, "GPU 0 failed: Xid 79"));
        assert_non_null(strstr(st[i].error, "no GPU is serving"));
    }
    size_t left = 9;
    assert_int_equal(vram_service_streams(svc, NULL, 0, &left), 0);
    assert_int_equal(left, 0);
    for (vram_owner o = 0; o < VRAM_OWNERS_MAX; o++) {
        const char *name = vram_owner_name(vram_service_host_pool(svc), o);
        if (!name)
            break;
        vram_usage_stats us;
        assert_int_equal(vram_owner_stats_get(vram_service_host_pool(svc), o, &us), 0);
        if (!strncmp(name, "stream:", 7) && us.live_bytes)
            fail_msg("owner %s still holds %llu bytes", name, (unsigned long long)us.live_bytes);
    }
    vram_stream_opts so;
    stream_opts(&so, "late");
    assert_int_equal(vram_fleet_add_stream(f, &so, NULL, 0, NULL), VRAM_EBACKEND);
    assert_non_null(strstr(vram_last_error(), "no GPU is serving (all 1 failed)"));
    assert_int_equal(vram_fleet_wait(f, 5), 0);
    assert_int_equal(vram_fleet_destroy(f), 0);
}

static void test_missing_gpu(void **state)
{
    (void)state;
    int count = 0;
    assert_int_equal(vram_device_count(&count), 0);
    assert_true(count >= 1);
    vram_fleet_opts fo;
    assert_int_equal(vram_fleet_opts_init(&fo), 0);
    service_opts(&fo.service);
    const int gpus[] = {0, count};
    fo.gpus = gpus;
    fo.n_gpus = 2;
    vram_fleet *f = (vram_fleet *)1;
    assert_int_not_equal(vram_fleet_create(&fo, &f), 0);
    assert_null(f);
    char want[32];
    snprintf(want, sizeof want, "GPU %d: ", count);
    if (!strstr(vram_last_error(), want))
        fail_msg("\"%s\" does not name GPU %d", vram_last_error(), count);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fleet_of_one),
        cmocka_unit_test(test_missing_gpu),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
