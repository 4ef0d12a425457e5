/* tests/integration/test_service.c - the multi-stream video service through
 * its public API, on the cpu executor with the BlazeFace back model (made
 * by scripts/models.sh into $VRAM_TEST_MODELS): exact per-stream frame
 * counts across streams and workers, results in display order, admission
 * refused by the budgets with the numbers, a missing path refused naming
 * it, a stream removed mid-run while the others go on, every stream's owner
 * back to 0 bytes once it ended or was removed, and no allocation per frame
 * once streams run (the pool's counters, and a counting malloc where no
 * sanitizer owns malloc). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "vramkit.h"
#include "vramkit/service.h"
#include "vramkit/stats.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COUNT_MALLOC 0
#endif
#endif
#ifndef COUNT_MALLOC
#define COUNT_MALLOC 1
#endif

#if COUNT_MALLOC
/* Every allocation of the process goes through these while `counting`. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static _Atomic int counting;
static _Atomic unsigned long mallocs;
void *malloc(size_t n)
{
    if (counting)
        mallocs++;
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t s)
{
    if (counting)
        mallocs++;
    return __libc_calloc(n, s);
}
void *realloc(void *p, size_t n)
{
    if (counting)
        mallocs++;
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n)
{
    if (counting)
        mallocs++;
    return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n)
{
    if (counting)
        mallocs++;
    *out = __libc_memalign(a, n);
    return *out ? 0 : 12;
}
#endif

static char model[4096], front[4096];

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("VRAM_TEST_MODELS");
    snprintf(model, sizeof model, "%s/blazeface_back.onnx", dir ? dir : "build/models");
    /* The front model (128x128) costs a seventh of the back one: the tests
     * that wait for frames to flow use it, so that they stay quick in
     * sanitizer builds. */
    snprintf(front, sizeof front, "%s/blazeface_front.onnx", dir ? dir : "build/models");
    if (access(model, R_OK)) {
        fprintf(stderr, "test_service: no model at %s: run scripts/models.sh\n", model);
        return -1;
    }
    return 0;
}

typedef struct seen {
    _Atomic unsigned long results;
    int64_t last[8];
    int out_of_order;
} seen;

static void on_result(void *ctx, const vram_result *r)
{
    seen *s = ctx;
    s->results++;
    int k = r->stream[0] == 'a' ? 0 : r->stream[0] == 'b' ? 1 : 2;
    if (r->frame != s->last[k] + 1)
        s->out_of_order = 1;
    s->last[k] = r->frame;
}

static vram_service *make_with(const char *m, unsigned workers, unsigned batch, uint64_t budget,
                               seen *s)
{
    vram_service_opts o;
    assert_int_equal(vram_service_opts_init(&o), 0);
    o.model = m;
    o.executor = "cpu";
    o.workers = workers;
    o.batch = batch;
    o.budget = budget;
    if (s) {
        for (int i = 0; i < 8; i++)
            s->last[i] = -1;
        o.on_result = on_result;
        o.result_ctx = s;
    }
    vram_service *svc = NULL;
    int rc = vram_service_create(&o, &svc);
    if (rc)
        print_error("%s\n", vram_last_error());
    assert_int_equal(rc, 0);
    return svc;
}

static vram_service *make(unsigned workers, unsigned batch, uint64_t budget, seen *s)
{
    return make_with(model, workers, batch, budget, s);
}

/* Wait (at most 300 s, for slow sanitizer builds) until stream `id` has
 * processed at least `n` frames; its statistics into *st. */
static void wait_processed(vram_service *svc, const char *id, uint64_t n, vram_stream_stats *st)
{
    for (int i = 0; i < 30000; i++) {
        assert_int_equal(vram_service_stream_stats(svc, id, st), 0);
        if (st->processed >= n)
            return;
        usleep(10000);
    }
    fail_msg("stream %s processed %llu frames in 300 s, not %llu", id,
             (unsigned long long)st->processed, (unsigned long long)n);
}

static void add(vram_service *svc, const char *id, const char *url, uint64_t frames)
{
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = id;
    so.url = url;
    so.max_frames = frames;
    int rc = vram_service_add_stream(svc, &so, NULL);
    if (rc)
        print_error("%s\n", vram_last_error());
    assert_int_equal(rc, 0);
}

static void test_exact_counts(void **state)
{
    (void)state;
    static seen s; /* the output thread writes it until the service is gone */
    memset(&s, 0, sizeof s);
    vram_service *svc = make_with(front, 2, 4, 0, &s);
    add(svc, "a", "synthetic:320x240@30", 37);
    add(svc, "b", "synthetic:160x120@15", 23);
    add(svc, "c", "synthetic:64x64@30", 5);
    assert_int_equal(vram_service_wait(svc, 600), 0);
    const char *ids[] = {"a", "b", "c"};
    uint64_t want[] = {37, 23, 5};
    for (int i = 0; i < 3; i++) {
        vram_stream_stats st;
        assert_int_equal(vram_service_stream_stats(svc, ids[i], &st), 0);
        assert_int_equal(st.frames_in, want[i]);
        assert_int_equal(st.processed, want[i]);
        assert_int_equal(st.dropped, 0);
        assert_int_equal(st.state, VRAM_STREAM_ENDED);
        assert_int_equal(st.live_bytes, 0); /* it gave everything back */
    }
    assert_int_equal(s.results, 37 + 23 + 5);
    assert_false(s.out_of_order);
    assert_int_equal(vram_service_stop(svc), 0);
    assert_int_equal(vram_service_destroy(svc), 0);
}

static void test_budget_refusal(void **state)
{
    (void)state;
    /* Fixed need alone over the budget: refused at create. */
    vram_service_opts o;
    vram_service_opts_init(&o);
    o.model = model;
    o.executor = "cpu";
    o.budget = 1 << 20;
    vram_service *svc = NULL;
    assert_int_equal(vram_service_create(&o, &svc), VRAM_EBUDGET);
    assert_null(svc);
    assert_non_null(strstr(vram_last_error(), "fixed need"));

    svc = make(1, 2, 0, NULL);
    vram_service_info info;
    assert_int_equal(vram_service_info_get(svc, &info), 0);
    assert_true(info.fixed_bytes > info.weights_bytes);
    vram_service_destroy(svc);
    /* Room for the fixed need and one small stream, not a large one. */
    svc = make(1, 2, info.fixed_bytes + (4u << 20), NULL);
    add(svc, "small", "synthetic:320x240@30", 3);
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = "big";
    so.url = "synthetic:1920x1080@30";
    assert_int_equal(vram_service_add_stream(svc, &so, NULL), VRAM_EBUDGET);
    assert_non_null(strstr(vram_last_error(), "stream big"));
    assert_non_null(strstr(vram_last_error(), "left"));
    /* A per-stream limit refuses too. */
    so.id = "limited";
    so.url = "synthetic:320x240@30";
    so.budget = 4096;
    assert_int_equal(vram_service_add_stream(svc, &so, NULL), VRAM_EBUDGET);
    assert_non_null(strstr(vram_last_error(), "limit"));
    vram_stream_stats st;
    assert_int_not_equal(vram_service_stream_stats(svc, "big", &st), 0);
    assert_int_equal(vram_service_wait(svc, 60), 0);
    assert_int_equal(vram_service_stream_stats(svc, "small", &st), 0);
    assert_int_equal(st.processed, 3);
    /* A duplicate id, a bad id. */
    so.id = "small";
    so.budget = 0;
    assert_int_equal(vram_service_add_stream(svc, &so, NULL), VRAM_EINVAL);
    so.id = "a/b";
    assert_int_equal(vram_service_add_stream(svc, &so, NULL), VRAM_EINVAL);
    vram_service_destroy(svc);
}

static void test_missing_path(void **state)
{
    (void)state;
    vram_service *svc = make(1, 2, 0, NULL);
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = "gone";
    so.url = "/nonexistent/clip.mp4";
    int rc = vram_service_add_stream(svc, &so, NULL);
    assert_true(rc == VRAM_EIO || rc == VRAM_EPARSE);
    assert_non_null(strstr(vram_last_error(), "/nonexistent/clip.mp4"));
    size_t n = 99;
    assert_int_equal(vram_service_streams(svc, NULL, 0, &n), 0);
    assert_int_equal(n, 0);
    vram_pool_stats ps;
    assert_int_equal(vram_pool_stats_counters(vram_service_host_pool(svc), &ps), 0);
    vram_owner owner;
    assert_int_equal(vram_owner_find(vram_service_host_pool(svc), "stream:gone", &owner), 0);
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(vram_service_host_pool(svc), owner, &u), 0);
    assert_int_equal(u.live_bytes, 0);
    vram_service_destroy(svc);
}

static void test_remove_mid_run(void **state)
{
    (void)state;
    vram_service *svc = make_with(front, 2, 4, 0, NULL);
    add(svc, "keep", "synthetic:160x120@30", 30);
    add(svc, "drop", "synthetic:320x240@30", 0); /* never ends by itself */
    vram_stream_stats st;
    wait_processed(svc, "drop", 5, &st);
    assert_true(st.live_bytes > 0);
    vram_pool *pool = vram_service_host_pool(svc);
    vram_owner owner;
    assert_int_equal(vram_owner_find(pool, "stream:drop", &owner), 0);
    assert_int_equal(vram_service_remove_stream(svc, "drop"), 0);
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(pool, owner, &u), 0);
    assert_int_equal(u.live_bytes, 0);
    assert_int_not_equal(vram_service_stream_stats(svc, "drop", &st), 0);
    assert_int_equal(vram_service_remove_stream(svc, "drop"), VRAM_EINVAL);
    assert_int_equal(vram_service_wait(svc, 120), 0);
    assert_int_equal(vram_service_stream_stats(svc, "keep", &st), 0);
    assert_int_equal(st.processed, 30);
    vram_service_destroy(svc);
}

static void test_no_allocation_per_frame(void **state)
{
    (void)state;
    vram_service *svc = make_with(front, 2, 4, 0, NULL);
    add(svc, "a", "synthetic:320x240@30", 0);
    add(svc, "b", "synthetic:160x120@30", 0);
    vram_stream_stats st;
    wait_processed(svc, "b", 10, &st);
    vram_pool *pool = vram_service_host_pool(svc);
    vram_pool_stats before, after;
    assert_int_equal(vram_pool_stats_counters(pool, &before), 0);
    vram_stream_stats a0, b0, a1, b1;
    vram_service_stream_stats(svc, "a", &a0);
    vram_service_stream_stats(svc, "b", &b0);
#if COUNT_MALLOC
    mallocs = 0;
    counting = 1;
#endif
    /* At least 1.5 s and 4 more frames of each stream. */
    usleep(1500000);
    wait_processed(svc, "a", a0.processed + 4, &a1);
    wait_processed(svc, "b", b0.processed + 4, &b1);
#if COUNT_MALLOC
    counting = 0;
    unsigned long n = mallocs;
#endif
    assert_int_equal(vram_pool_stats_counters(pool, &after), 0);
    assert_int_equal(after.allocs_total, before.allocs_total);
    assert_int_equal(after.frees_total, before.frees_total);
#if COUNT_MALLOC
    print_message("mallocs while %llu frames went through: %lu\n",
                  (unsigned long long)(a1.processed - a0.processed + b1.processed - b0.processed),
                  n);
    assert_int_equal(n, 0);
#endif
    vram_service_destroy(svc);
}

static void test_config_parse(void **state)
{
    (void)state;
    const char *good = "{\"workers\": 2, \"batch\": 4, \"budget\": \"512M\", \"loop\": true, "
                       "\"streams\": [{\"id\": \"cam1\", \"url\": \"synthetic:64x64\"}, "
                       "{\"url\": \"clip.mp4\", \"loop\": false, \"budget\": 1048576}]}";
    vram_service_config *c = NULL;
    assert_int_equal(vram_service_config_parse(good, strlen(good), &c), 0);
    assert_int_equal(c->service.workers, 2);
    assert_int_equal(c->service.batch, 4);
    assert_int_equal(c->service.budget, 512ull << 20);
    assert_int_equal(c->n_streams, 2);
    assert_string_equal(c->streams[0].id, "cam1");
    assert_true(c->streams[0].loop);
    assert_false(c->streams[1].loop);
    assert_null(c->streams[1].id);
    assert_int_equal(c->streams[1].budget, 1048576);
    vram_service_config_free(c);
    const char *nv = "{\"backend\": \"cuda\", \"decode\": \"nvdec\", \"surfaces\": 2, "
                     "\"graphs\": true, \"in_flight\": 3}";
    assert_int_equal(vram_service_config_parse(nv, strlen(nv), &c), 0);
    assert_int_equal(c->service.decode, VRAM_DECODE_NVDEC);
    assert_int_equal(c->service.extra_surfaces, 2);
    assert_int_equal(c->service.graphs, 1);
    assert_int_equal(c->service.stream_in_flight, 3);
    vram_service_config_free(c);
    const char *bad[][2] = {
        {"{\"decode\": \"gpu\"}", "decode"},
        {"{\"surfaces\": 33}", "surfaces"},
        {"{\"graphs\": 1}", "graphs"},
        {"{\"workers\": 0}", "workers"},
        {"{\"streams\": [{\"id\": \"x\"}]}", "url"},
        {"{\"streams\": [{\"url\": \"a\", \"speed\": 2}]}", "speed"},
        {"{\"budget\": \"lots\"}", "lots"},
        {"{\"streams\": 3}", "streams"},
        {"[1,2", "not valid JSON"},
        {"{\"streams\": [{\"id\": \"a\", \"url\": \"x\"}, {\"id\": \"a\", \"url\": \"y\"}]}",
         "stream 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = (void *)1;
        assert_int_equal(vram_service_config_parse(bad[i][0], strlen(bad[i][0]), &c), VRAM_EPARSE);
        assert_null(c);
        if (!strstr(vram_last_error(), bad[i][1]))
            fail_msg("\"%s\": \"%s\" does not name %s", bad[i][0], vram_last_error(), bad[i][1]);
    }
}

/* NVDEC needs the cuda executor: refused with the sentence; auto with the
 * cpu executor decodes every stream on the CPU. */
static void test_decode_choice(void **state)
{
    (void)state;
    vram_service_opts o;
    assert_int_equal(vram_service_opts_init(&o), 0);
    o.model = model;
    o.executor = "cpu";
    o.decode = VRAM_DECODE_NVDEC;
    vram_service *svc = (vram_service *)&o;
    assert_int_equal(vram_service_create(&o, &svc), VRAM_EINVAL);
    assert_null(svc);
    assert_non_null(strstr(vram_last_error(), "needs the cuda executor"));
    o.decode = (vram_decode)5;
    assert_int_equal(vram_service_create(&o, &svc), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "decode 5"));
    o.decode = VRAM_DECODE_AUTO;
    assert_int_equal(vram_service_create(&o, &svc), 0);
    add(svc, "a", "synthetic:64x48@30,frames=3", 0);
    assert_int_equal(vram_service_wait(svc, 300), 0);
    vram_stream_stats st;
    assert_int_equal(vram_service_stream_stats(svc, "a", &st), 0);
    assert_int_equal(st.decode, VRAM_DECODE_CPU);
    assert_string_equal(st.fallback, "");
    assert_int_equal(st.processed, 3);
    assert_int_equal(vram_service_destroy(svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_choice),
        cmocka_unit_test(test_config_parse),
        cmocka_unit_test(test_exact_counts),
        cmocka_unit_test(test_budget_refusal),
        cmocka_unit_test(test_missing_path),
        cmocka_unit_test(test_remove_mid_run),
        cmocka_unit_test(test_no_allocation_per_frame),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
