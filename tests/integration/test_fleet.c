/* tests/integration/test_fleet.c - a fleet of services standing in for
 * several GPUs (the cpu executor, each service labelled with its gpu),
 * through the public API: placement by budget left and then streams, a
 * stream never split and refused with every GPU's reason, the fleet's
 * budget over all GPUs, and a GPU that fails taking only its own streams
 * down, which move to the others where memory allows and are reported
 * lost where it does not (also after the table grew and streams were
 * removed), the lost ones named in the summary; served, the control API placing through the
 * fleet and /healthz failing only once no GPU serves (one service's as
 * soon as its GPU fails). Models from $VRAM_TEST_MODELS (scripts/models.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <pthread.h>

#include <cjson/cJSON.h>

#include "test_http.h"
#include "vramkit/error.h"
#include "vramkit/fleet.h"
#include "vramkit/metrics.h"

static char model[4096];

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("VRAM_TEST_MODELS");
    snprintf(model, sizeof model, "%s/blazeface_front.onnx", dir ? dir : "build/models");
    if (access(model, R_OK)) {
        fprintf(stderr, "test_fleet: no model at %s: run scripts/models.sh\n", model);
        return -1;
    }
    return 0;
}

static const int gpus[] = {0, 1, 2};

static vram_fleet *make(size_t n, uint64_t gpu_budget, uint64_t fleet_budget)
{
    vram_fleet_opts o;
    assert_int_equal(vram_fleet_opts_init(&o), 0);
    o.service.model = model;
    o.service.executor = "cpu";
    o.service.batch = 4;
    o.service.budget = gpu_budget;
    o.gpus = gpus;
    o.n_gpus = n;
    o.budget = fleet_budget;
    vram_fleet *f = NULL;
    int rc = vram_fleet_create(&o, &f);
    if (rc)
        fail_msg("fleet: %s", vram_last_error());
    return f;
}

static int add(vram_fleet *f, const char *id, int loop, size_t *at)
{
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = id;
    so.url = "synthetic:64x64@30";
    so.loop = loop;
    so.realtime = loop;
    so.max_frames = loop ? 0 : 3;
    return vram_fleet_add_stream(f, &so, NULL, 0, at);
}

/* n looping streams PREFIX0, PREFIX1, ..., each admitted; their GPUs'
 * positions into at[] (may be NULL). */
static void add_looping(vram_fleet *f, const char *prefix, int n, size_t *at)
{
    for (int i = 0; i < n; i++) {
        char id[16];
        snprintf(id, sizeof id, "%s%d", prefix, i);
        assert_int_equal(add(f, id, 1, at ? &at[i] : NULL), 0);
    }
}

/* What one GPU's service holds fixed, and one stream's need. */
static void sizes(uint64_t *fixed, uint64_t *need)
{
    vram_fleet *f = make(1, 0, 0);
    vram_service_info info;
    assert_int_equal(vram_service_info_get(vram_fleet_service(f, 0), &info), 0);
    *fixed = info.fixed_bytes;
    assert_int_equal(add(f, "probe", 1, NULL), 0);
    vram_stream_stats st;
    assert_int_equal(vram_service_stream_stats(vram_fleet_service(f, 0), "probe", &st), 0);
    *need = st.need_bytes;
    assert_true(*need > 0);
    assert_int_equal(st.gpu, 0);
    vram_fleet_destroy(f);
}

static void test_placement_spreads(void **state)
{
    (void)state;
    vram_fleet *f = make(3, 0, 0);
    size_t count[3] = {0}, at[6];
    add_looping(f, "c", 6, at);
    for (int i = 0; i < 6; i++) {
        assert_true(at[i] < 3);
        count[at[i]]++;
    }
    /* No budgets: every GPU has all of it left, so the fewest streams win. */
    assert_int_equal(count[0], 2);
    assert_int_equal(count[1], 2);
    assert_int_equal(count[2], 2);
    /* Ids are the fleet's: the same id is refused on any GPU. */
    assert_int_equal(add(f, "c3", 1, NULL), VRAM_EINVAL);
    vram_stream_stats all[16];
    size_t n = 0;
    assert_int_equal(vram_fleet_streams(f, all, 16, &n), 0);
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++)
        assert_true(all[i].gpu >= 0 && all[i].gpu <= 2);
    assert_int_equal(vram_fleet_remove_stream(f, "c0"), 0);
    assert_int_equal(vram_fleet_remove_stream(f, "c0"), VRAM_EINVAL);
    assert_int_equal(vram_fleet_destroy(f), 0);
}

static void test_budgets(void **state)
{
    (void)state;
    uint64_t fixed, need;
    sizes(&fixed, &need);
    /* Each GPU holds one stream: three go on three GPUs, the fourth fits none. */
    vram_fleet *f = make(3, fixed + need + need / 2, 0);
    size_t at[3];
    add_looping(f, "g", 3, at);
    assert_true(at[0] != at[1] && at[1] != at[2] && at[0] != at[2]);
    assert_int_equal(add(f, "over", 1, NULL), VRAM_EBUDGET);
    const char *e = vram_last_error();
    assert_non_null(strstr(e, "fits on none of the 3 GPUs"));
    assert_non_null(strstr(e, "GPU 0:"));
    assert_non_null(strstr(e, "GPU 2:"));
    vram_fleet_destroy(f);
    /* The fleet's budget: every GPU's fixed need and one and a half streams. */
    f = make(2, 0, 2 * fixed + need + need / 2);
    assert_int_equal(add(f, "one", 1, NULL), 0);
    assert_int_equal(add(f, "two", 1, NULL), VRAM_EBUDGET);
    assert_non_null(strstr(vram_last_error(), "the fleet's budget"));
    /* Removing gives the fleet's share back. */
    assert_int_equal(vram_fleet_remove_stream(f, "one"), 0);
    assert_int_equal(add(f, "two", 1, NULL), 0);
    vram_fleet_destroy(f);
    /* The fixed needs alone over the fleet's budget: refused at create. */
    vram_fleet_opts o;
    vram_fleet_opts_init(&o);
    o.service.model = model;
    o.service.executor = "cpu";
    o.gpus = gpus;
    o.n_gpus = 2;
    o.budget = fixed;
    vram_fleet *g = NULL;
    assert_int_equal(vram_fleet_create(&o, &g), VRAM_EBUDGET);
    assert_null(g);
}

/* Wait (up to 10 s) until the fleet has moved `moved` and lost `lost`. */
static void wait_failover(vram_fleet *f, uint64_t moved, uint64_t lost)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t m = 0, l = 0;
        vram_fleet_failover_counts(f, &m, &l);
        if (m == moved && l == lost)
            return;
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    uint64_t m = 0, l = 0;
    vram_fleet_failover_counts(f, &m, &l);
    fail_msg("failover: moved %llu lost %llu, not %llu and %llu", (unsigned long long)m,
             (unsigned long long)l, (unsigned long long)moved, (unsigned long long)lost);
}

static void test_failure_moves_streams(void **state)
{
    (void)state;
    vram_fleet *f = make(3, 0, 0);
    add_looping(f, "m", 6, NULL);
    assert_int_equal(vram_service_fail(vram_fleet_service(f, 1), "Xid 79: fell off the bus"), 0);
    wait_failover(f, 2, 0);
    char why[256];
    assert_int_equal(vram_service_health(vram_fleet_service(f, 1), why, sizeof why),
                     VRAM_EBACKEND);
    assert_non_null(strstr(why, "GPU 1 failed: Xid 79"));
    assert_int_equal(vram_service_health(vram_fleet_service(f, 0), NULL, 0), 0);
    vram_stream_stats all[16];
    size_t n = 0;
    assert_int_equal(vram_fleet_streams(f, all, 16, &n), 0);
    assert_int_equal(n, 6); /* each once: none left behind on the failed GPU */
    size_t left = 9;
    assert_int_equal(vram_service_streams(vram_fleet_service(f, 1), NULL, 0, &left), 0);
    assert_int_equal(left, 0);
    size_t on[3] = {0};
    for (size_t i = 0; i < n; i++)
        if (all[i].state == VRAM_STREAM_RUNNING)
            on[all[i].gpu]++;
    assert_int_equal(on[1], 0);
    assert_int_equal(on[0] + on[2], 6);
    /* The failed GPU takes nothing new; the others do. */
    size_t at = 9;
    assert_int_equal(add(f, "late", 1, &at), 0);
    assert_true(at != 1);
    assert_int_equal(vram_fleet_destroy(f), 0);
}

static void test_failure_without_room(void **state)
{
    (void)state;
    uint64_t fixed, need;
    sizes(&fixed, &need);
    /* Two GPUs, each full with two streams: the failed one's are lost. */
    vram_fleet *f = make(2, fixed + 2 * need + need / 2, 0);
    add_looping(f, "r", 4, NULL);
    assert_int_equal(vram_service_fail(vram_fleet_service(f, 0), "device lost"), 0);
    wait_failover(f, 0, 2);
    vram_stream_stats all[16];
    size_t n = 0, lost = 0;
    assert_int_equal(vram_fleet_streams(f, all, 16, &n), 0);
    assert_int_equal(n, 4); /* two running on GPU 1, two lost: each once */
    for (size_t i = 0; i < n; i++)
        if (all[i].state == VRAM_STREAM_FAILED && strstr(all[i].error, "not re-admitted")) {
            lost++;
            assert_non_null(strstr(all[i].error, "GPU 0 failed: device lost"));
        }
    assert_int_equal(lost, 2);
    assert_int_equal(vram_fleet_wait(f, 0) >= 0, 1);
    /* The summary names the lost streams, with why, as valid JSON. */
    vram_buffer b = {0};
    assert_int_equal(vram_fleet_print(f, vram_write_buffer, &b, VRAM_PRINT_JSON), 0);
    cJSON *doc = cJSON_ParseWithLength(b.data, b.len);
    assert_non_null(doc);
    cJSON *ls = cJSON_GetObjectItem(doc, "lost_streams");
    assert_int_equal(cJSON_GetArraySize(ls), 2);
    cJSON *one = cJSON_GetArrayItem(ls, 0);
    assert_int_equal(cJSON_GetObjectItem(one, "gpu")->valueint, 0);
    assert_non_null(strstr(cJSON_GetObjectItem(one, "error")->valuestring, "not re-admitted"));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(
        cJSON_GetObjectItem(doc, "gpus"), 0), "up")));
    cJSON_Delete(doc);
    vram_buffer_free(&b);
    assert_int_equal(vram_fleet_print(f, vram_write_buffer, &b, 0), 0);
    assert_non_null(strstr(b.data, ", was on GPU 0: GPU 0 failed: device lost; not re-admitted"));
    vram_buffer_free(&b);
    vram_fleet_destroy(f);
}

/* Many streams (the table grows past its first 64) and removals before a
 * failure: every moved stream keeps its own id and source. */
static void test_failure_after_churn(void **state)
{
    (void)state;
    vram_fleet *f = make(3, 0, 0);
    enum { N = 70 };
    for (int i = 0; i < N; i++) {
        char id[16], url[64];
        snprintf(id, sizeof id, "n%d", i);
        snprintf(url, sizeof url, "synthetic:%dx16@1", 16 + 2 * i);
        vram_stream_opts so;
        vram_stream_opts_init(&so);
        so.id = id;
        so.url = url;
        so.loop = so.realtime = 1;
        assert_int_equal(vram_fleet_add_stream(f, &so, NULL, 0, NULL), 0);
    }
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        assert_int_equal(vram_fleet_remove_stream(f, id), 0);
    }
    size_t on2 = 0;
    static vram_stream_stats all[N + 8];
    size_t n = 0;
    assert_int_equal(vram_fleet_streams(f, all, N + 8, &n), 0);
    assert_int_equal(n, N - 5);
    for (size_t i = 0; i < n; i++)
        on2 += all[i].gpu == 2;
    assert_true(on2 > 0);
    assert_int_equal(vram_service_fail(vram_fleet_service(f, 2), "Xid 79"), 0);
    wait_failover(f, on2, 0);
    assert_int_equal(vram_fleet_streams(f, all, N + 8, &n), 0);
    assert_int_equal(n, N - 5);
    int seen[N] = {0};
    for (size_t i = 0; i < n; i++) {
        int k = atoi(all[i].id + 1);
        assert_true(k >= 5 && k < N);
        seen[k]++;
        char url[64];
        snprintf(url, sizeof url, "synthetic:%dx16@1", 16 + 2 * k);
        assert_string_equal(all[i].url, url);
        assert_int_not_equal(all[i].gpu, 2);
        assert_int_equal(all[i].state, VRAM_STREAM_RUNNING);
    }
    for (int k = 5; k < N; k++)
        assert_int_equal(seen[k], 1);
    /* A URL longer than a stream keeps is refused, not cut. */
    char longurl[300];
    memset(longurl, 'a', sizeof longurl - 1);
    longurl[sizeof longurl - 1] = '\0';
    memcpy(longurl, "rtsp://", 7);
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.url = longurl;
    assert_int_equal(vram_fleet_add_stream(f, &so, NULL, 0, NULL), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "is 299 bytes long; at most 255"));
    assert_int_equal(vram_fleet_destroy(f), 0);
}

typedef struct slow_add {
    vram_fleet *f;
    char url[64];
    int rc;
} slow_add;

static void *add_slow(void *arg)
{
    slow_add *a = arg;
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = "slow";
    so.url = a->url;
    a->rc = vram_fleet_add_stream(a->f, &so, NULL, 0, NULL);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A camera that takes its connection and never answers: while its source
 * opens (up to the open timeout, 5 s), the fleet's views answer at once,
 * its id is taken and it cannot be removed yet; then it is refused and gone. */
static void test_slow_source_blocks_nothing(void **state)
{
    (void)state;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(ls >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &len), 0);
    vram_fleet *f = make(2, 0, 0);
    add_looping(f, "q", 2, NULL);
    slow_add a = {.f = f};
    snprintf(a.url, sizeof a.url, "rtsp://127.0.0.1:%u/never", (unsigned)ntohs(sa.sin_port));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, add_slow, &a), 0);
    struct timespec nap = {0, 300 * 1000000L};
    nanosleep(&nap, NULL);
    double t0 = now_s();
    vram_stream_stats all[8];
    size_t n = 0;
    assert_int_equal(vram_fleet_streams(f, all, 8, &n), 0);
    assert_int_equal(n, 2); /* the one opening is not listed yet */
    uint64_t moved, lost;
    assert_int_equal(vram_fleet_failover_counts(f, &moved, &lost), 0);
    assert_int_equal(vram_fleet_remove_stream(f, "slow"), VRAM_EBUSY);
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = "slow";
    so.url = "synthetic:16x16@1";
    assert_int_equal(vram_fleet_add_stream(f, &so, NULL, 0, NULL), VRAM_EINVAL);
    assert_int_equal(vram_fleet_remove_stream(f, "q0"), 0); /* others come and go */
    double spent = now_s() - t0;
    if (spent > 1.0)
        fail_msg("the views waited %.2f s for a source opening", spent);
    pthread_join(t, NULL);
    assert_int_not_equal(a.rc, 0);
    assert_int_equal(vram_fleet_stream_stats(f, "slow", &all[0]), VRAM_EINVAL);
    assert_int_equal(vram_fleet_streams(f, all, 8, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(vram_fleet_destroy(f), 0);
    close(ls);
}

static vram_metrics *serve_on(unsigned *port)
{
    vram_metrics_opts mo;
    vram_metrics_opts_init(&mo);
    mo.port = 0;
    vram_metrics *m = NULL;
    if (vram_metrics_start(&mo, &m))
        fail_msg("metrics: %s", vram_last_error());
    *port = vram_metrics_port(m);
    return m;
}

static resp post(unsigned port, const char *json)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                      "Connection: close\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\n\r\n%s", strlen(json), json);
    return raw_request(port, req, (size_t)n);
}

/* GET path answers `status` with `text` in its body. */
static void expect(unsigned port, const char *path, int status, const char *text)
{
    resp r = request(port, "GET", path);
    if (r.status != status || !strstr(r.body, text))
        fail_msg("GET %s: %d %s, expected %d with \"%s\"", path, r.status, r.body, status, text);
    resp_free(&r);
}

static void test_served(void **state)
{
    (void)state;
    unsigned port;
    vram_metrics *m = serve_on(&port);
    vram_fleet *f = make(2, 0, 0);
    assert_int_equal(vram_fleet_serve(f, m), 0);
    assert_int_equal(vram_fleet_serve(f, m), VRAM_EINVAL); /* served already */
    expect(port, "/healthz", 200, "ok");
    const char *ids[] = {"h0", "h1", "h2"};
    for (int i = 0; i < 3; i++) {
        char body[200];
        snprintf(body, sizeof body, "{\"id\": \"%s\", \"url\": \"synthetic:64x64@30\", "
                                    "\"loop\": true, \"realtime\": true}", ids[i]);
        resp r = post(port, body);
        assert_int_equal(r.status, 201);
        char want[16];
        snprintf(want, sizeof want, "\"gpu\":%d", i % 2); /* 0, 1, then 0 again */
        assert_non_null(strstr(r.body, want));
        resp_free(&r);
    }
    resp r = post(port, "{\"id\": \"h0\", \"url\": \"synthetic:64x64@30\"}");
    assert_int_equal(r.status, 409);
    resp_free(&r);
    expect(port, "/streams", 200, "\"id\":\"h1\"");
    expect(port, "/metrics", 200, "vram_service_up{gpu=\"1\"} 1\n");

    /* GPU 1 fails: its stream moves to GPU 0; the process still serves. */
    assert_int_equal(vram_service_fail(vram_fleet_service(f, 1), "Xid 48: double-bit ECC error"),
                     0);
    wait_failover(f, 1, 0);
    expect(port, "/streams/h1", 200, "\"gpu\":0");
    expect(port, "/healthz", 200, "ok");
    expect(port, "/metrics", 200, "vram_service_up{gpu=\"1\"} 0\n");
    expect(port, "/metrics", 200, "vram_fleet_streams_moved_total 1\n");
    vram_stream_stats st;
    assert_int_equal(vram_fleet_stream_stats(f, "h1", &st), 0);
    assert_int_equal(st.gpu, 0);
    assert_int_equal(vram_fleet_stream_stats(f, "nope", &st), VRAM_EINVAL);

    /* GPU 0 too: every stream is lost, /healthz fails, nothing is admitted. */
    assert_int_equal(vram_service_fail(vram_fleet_service(f, 0), "device lost"), 0);
    wait_failover(f, 1, 3);
    expect(port, "/healthz", 503, "unhealthy: all 2 GPUs failed (the first: GPU 0 failed: "
                                  "device lost)");
    expect(port, "/streams/h2", 200, "\"state\":\"failed\"");
    r = post(port, "{\"id\": \"late\", \"url\": \"synthetic:64x64@30\"}");
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "no GPU is serving (all 2 failed)"));
    resp_free(&r);
    /* A lost stream can be removed; once stopped, the routes and the check are gone. */
    r = request(port, "DELETE", "/streams/h2");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    expect(port, "/streams/h2", 404, "no stream");
    assert_int_equal(vram_fleet_stop(f), 0);
    expect(port, "/healthz", 200, "ok");
    expect(port, "/streams", 404, "");
    assert_int_equal(vram_fleet_destroy(f), 0);

    /* One service on its own: /healthz fails as soon as its GPU does. */
    vram_service_opts o;
    assert_int_equal(vram_service_opts_init(&o), 0);
    o.model = model;
    o.executor = "cpu";
    o.gpu = 3;
    vram_service *svc = NULL;
    assert_int_equal(vram_service_create(&o, &svc), 0);
    assert_int_equal(vram_service_serve(svc, m), 0);
    expect(port, "/healthz", 200, "ok");
    assert_int_equal(vram_service_fail(svc, "Xid 79: fell off the bus"), 0);
    expect(port, "/healthz", 503, "unhealthy: GPU 3 failed: Xid 79: fell off the bus");
    assert_int_equal(vram_service_destroy(svc), 0);
    expect(port, "/healthz", 200, "ok");
    assert_int_equal(vram_metrics_stop(m), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement_spreads),
        cmocka_unit_test(test_budgets),
        cmocka_unit_test(test_failure_moves_streams),
        cmocka_unit_test(test_failure_without_room),
        cmocka_unit_test(test_failure_after_churn),
        cmocka_unit_test(test_slow_source_blocks_nothing),
        cmocka_unit_test(test_served),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
