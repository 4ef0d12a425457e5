/* tests/integration/test_metrics_http.c - the metrics server, driven by a
 * plain socket client. Checked:
 *  - port 0 picks a free port; /metrics answers the exposition (format
 *    0.0.4, promtool accepts it, values as the pools say), HEAD has no body,
 *    /snapshot every pool's snapshot as a JSON array, ?pool=NAME one object,
 *    an unknown name 404 with a JSON error, /healthz "ok", / the list;
 *  - health checks: /healthz 503 with the failing checks' sentences, in
 *    order, 200 once they pass or are removed; their limit and bad ids;
 *  - pools added and removed while it runs (same pool or same name twice,
 *    removing one not exposed: VRAM_EINVAL);
 *  - malformed requests: another method 405 with Allow, another path 404,
 *    a request line that is not HTTP 400, a header larger than the
 *    connection's memory 431, a URL as large 414; the server answers after;
 *  - slow clients: connections that send half a request and stall hold no
 *    thread (others are answered at once, more stalled clients than
 *    threads) and are closed after the timeout;
 *  - keep-alive: several requests on one connection are all answered, and
 *    a body sent with a GET is ignored;
 *  - the connection limit: past it a connection waits unanswered, and is
 *    answered once the others close;
 *  - concurrent scrapes from 8 threads while 2 threads allocate and free in
 *    the pool, another adds and removes a pool and a monitor samples the
 *    pool on its own thread: every answer is 200 and a whole exposition
 *    with the monitor's families, counters never go back;
 *  - routes of a library above: GET, POST (Content-Length and chunked),
 *    DELETE and HEAD reach the handler with their path, query argument,
 *    header and body, its status, content type and Allow come back; a body
 *    at the limit is taken, one past it 413 with a sentence (the handler not
 *    called), chunks going on past 16 times the limit cut off; a failing handler 500 with its sentence (or its code), a bad
 *    status 500; prefixes malformed, reserved, routed or nested refused,
 *    the limit of routes; a handler unrouting itself refused; unrouted, the
 *    path is 404; unroute waits for a handler in flight; stop with routes;
 *  - families of a library above: after the server's own, label values
 *    escaped, promtool accepts them, in vram_metrics_write too; a failing
 *    writer 500s the scrape; removed, gone; removed and freed again and
 *    again while 4 threads scrape: every answer whole;
 *  - start errors: bad address, port, limits, duplicate pools, a port in
 *    use (VRAM_EIO naming it), and the VRAM_METRICS_* options.
 * VRAM_TEST_QUICK (sanitizer builds) makes the concurrent part smaller. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include <vramkit.h>

#include "metrics_check.h"
#include "test_http.h"

#define MiB (1024ull * 1024)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- pools ---- */

typedef struct pool_fix {
    vram_backend *backend;
    vram_pool *pool;
    vram_owner cam;
    void *p[3];
} pool_fix;

static void make_pool(pool_fix *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->pool = sim_pool(name, 4096 * MiB, &f->backend);
    assert_int_equal(vram_owner_create(f->pool, "cam07", 512 * MiB, &f->cam), 0);
    vram_stream s = (vram_stream)(uintptr_t)1;
    assert_int_equal(vram_pool_alloc(f->pool, 8 * MiB, f->cam, VRAM_KIND_FRAMES, s, &f->p[0]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 3 * MiB, f->cam, VRAM_KIND_ACTIVATIONS, s, &f->p[1]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, s, &f->p[2]), 0);
}

static void drop_pool(pool_fix *f)
{
    for (int i = 0; i < 3; i++)
        if (f->p[i])
            assert_int_equal(vram_pool_free(f->pool, f->p[i], NULL), 0);
    if (vram_pool_destroy(f->pool))
        fail_msg("vram_pool_destroy: %s", vram_last_error());
    assert_int_equal(vram_backend_destroy(f->backend), 0);
}

static vram_metrics *start(vram_pool **pools, size_t n, void (*tune)(vram_metrics_opts *))
{
    vram_metrics_opts o;
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    o.pools = pools;
    o.n_pools = n;
    o.address = "127.0.0.1";
    o.port = 0;
    if (tune)
        tune(&o);
    vram_metrics *m;
    if (vram_metrics_start(&o, &m))
        fail_msg("vram_metrics_start: %s", vram_last_error());
    assert_true(vram_metrics_port(m) > 0);
    return m;
}

/* ---- tests ---- */

static void test_endpoints(void **state)
{
    pool_fix a, b;
    make_pool(&a, "svc");
    make_pool(&b, "cams");
    vram_pool *pools[] = {a.pool, b.pool};
    vram_metrics *m = start(pools, 2, NULL);
    unsigned port = vram_metrics_port(m);

    resp r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_non_null(header(&r, "Content-Type"));
    assert_non_null(strstr(header(&r, "Content-Type"), "text/plain; version=0.0.4"));
    exposition x;
    check_exposition(r.body, &x);
    assert_int_equal(find_family(&x, "vram_pool_live_bytes")->samples, 2);
    assert_true(series_value(r.body, "vram_pool_live_bytes{pool=\"svc\"}") == 13.0 * MiB);
    assert_true(series_value(r.body, "vram_pool_owner_live_bytes{pool=\"cams\",owner=\"cam07\"}") ==
                11.0 * MiB);
    assert_true(series_value(r.body, "vram_pool_kind_live_bytes{pool=\"cams\",kind=\"weights\"}") ==
                2.0 * MiB);
    assert_non_null(find_family(&x, "vram_nvml_available")); /* every GPU, by default */
    promtool_check(r.body);
    /* The same exposition without HTTP. */
    vram_buffer direct = {0};
    assert_int_equal(vram_metrics_write(m, vram_write_buffer, &direct, 0), 0);
    exposition y;
    check_exposition(direct.data, &y);
    assert_int_equal(y.n, x.n);
    assert_int_equal(y.samples, x.samples);
    free(direct.data);
    resp_free(&r);

    r = request(port, "HEAD", "/metrics");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);

    r = request(port, "GET", "/snapshot");
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Type"), "application/json");
    cJSON *j = cJSON_Parse(r.body);
    assert_non_null(j);
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "pool")->valuestring, "svc");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 1), "pool")->valuestring, "cams");
    cJSON_Delete(j);
    resp_free(&r);

    r = request(port, "GET", "/snapshot?pool=cams");
    assert_int_equal(r.status, 200);
    j = cJSON_Parse(r.body);
    assert_non_null(j);
    assert_true(cJSON_IsObject(j));
    assert_string_equal(cJSON_GetObjectItem(j, "pool")->valuestring, "cams");
    cJSON *blocks = cJSON_GetObjectItem(j, "blocks");
    assert_true(cJSON_IsArray(blocks));
    int live = 0;
    cJSON *blk;
    cJSON_ArrayForEach(blk, blocks) live += strcmp(cJSON_GetObjectItem(blk, "state")->valuestring, "live") == 0;
    assert_int_equal(live, 3);
    cJSON_Delete(j);
    resp_free(&r);

    r = request(port, "GET", "/snapshot?pool=nope");
    assert_int_equal(r.status, 404);
    j = cJSON_Parse(r.body);
    assert_non_null(j);
    assert_non_null(strstr(cJSON_GetObjectItem(j, "error")->valuestring, "no pool named \"nope\""));
    cJSON_Delete(j);
    resp_free(&r);

    r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    resp_free(&r);
    /* Keep-alive: three requests on one connection, all answered. */
    const char *three = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    r = raw_request(port, three, strlen(three));
    int answers = 0;
    for (const char *p = r.raw; (p = strstr(p, "HTTP/1.1 200 OK\r\n")); p++)
        answers++;
    assert_int_equal(answers, 3);
    assert_false(r.timed_out);
    resp_free(&r);
    r = request(port, "GET", "/");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "/metrics"));
    resp_free(&r);

    /* Pools come and go. */
    assert_int_equal(vram_metrics_remove_pool(m, b.pool), 0);
    assert_int_equal(vram_metrics_remove_pool(m, b.pool), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "\"cams\" is not exposed"));
    r = request(port, "GET", "/snapshot?pool=cams");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_true(isnan(series_value(r.body, "vram_pool_live_bytes{pool=\"cams\"}")));
    resp_free(&r);
    assert_int_equal(vram_metrics_add_pool(m, b.pool), 0);
    assert_int_equal(vram_metrics_add_pool(m, b.pool), VRAM_EINVAL);
    pool_fix c;
    make_pool(&c, "svc");
    assert_int_equal(vram_metrics_add_pool(m, c.pool), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "named \"svc\""));
    r = request(port, "GET", "/snapshot");
    j = cJSON_Parse(r.body);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    cJSON_Delete(j);
    resp_free(&r);

    assert_int_equal(vram_metrics_stop(m), 0);
    assert_int_equal(vram_metrics_stop(NULL), 0);
    /* Stopped: nothing listens there any more. */
    assert_true(connect_to(port, 1) < 0);
    drop_pool(&a);
    drop_pool(&b);
    drop_pool(&c);
}

static void small_requests(vram_metrics_opts *o) { o->max_header_bytes = 8192; }

static void test_malformed(void **state)
{
    pool_fix a;
    make_pool(&a, "svc");
    vram_pool *pools[] = {a.pool};
    vram_metrics *m = start(pools, 1, small_requests);
    unsigned port = vram_metrics_port(m);

    const char *post = "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       "Content-Length: 5\r\n\r\nhello";
    resp r = raw_request(port, post, strlen(post));
    assert_int_equal(r.status, 405);
    assert_string_equal(header(&r, "Allow"), "GET, HEAD");
    resp_free(&r);
    r = request(port, "DELETE", "/snapshot");
    assert_int_equal(r.status, 405);
    resp_free(&r);
    r = request(port, "PUT", "/nope");
    assert_int_equal(r.status, 405);
    resp_free(&r);
    r = request(port, "GET", "/nope");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = request(port, "GET", "/metrics/");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    const char *get_body = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           "Content-Length: 5\r\n\r\nhello";
    r = raw_request(port, get_body, strlen(get_body));
    assert_int_equal(r.status, 200); /* a body nobody asked for is ignored */
    assert_string_equal(r.body, "ok\n");
    resp_free(&r);

    const char *junk = "HELLO THERE\r\n\r\n";
    r = raw_request(port, junk, strlen(junk));
    assert_int_equal(r.status, 400);
    resp_free(&r);
    /* The start of a TLS hello, then an empty line. */
    static const char binary[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
    double t = now_s();
    r = raw_request(port, binary, sizeof binary - 1);
    assert_true(r.status == 400 || r.status == 0);
    assert_false(r.timed_out);
    if (now_s() - t > 2)
        fail_msg("a binary request took %.2f s to be refused", now_s() - t);
    resp_free(&r);

    /* A header larger than a connection's memory (8 KiB here). */
    size_t big = 64 * 1024;
    char *req = malloc(big + 256);
    int n = snprintf(req, 256, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    r = raw_request(port, req, strlen(req));
    assert_int_equal(r.status, 431);
    resp_free(&r);
    /* A URL as large. */
    n = snprintf(req, 256, "GET /");
    memset(req + n, 'u', big);
    snprintf(req + n + big, 200, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    r = raw_request(port, req, strlen(req));
    assert_int_equal(r.status, 414);
    resp_free(&r);
    free(req);

    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    assert_int_equal(vram_metrics_stop(m), 0);
    drop_pool(&a);
}

static void short_timeout(vram_metrics_opts *o)
{
    o->timeout_s = 3;
    o->threads = 2;
}

static void test_slow_clients(void **state)
{
    pool_fix a;
    make_pool(&a, "svc");
    vram_pool *pools[] = {a.pool};
    vram_metrics *m = start(pools, 1, short_timeout);
    unsigned port = vram_metrics_port(m);

    /* More stalled clients than threads, each half-way through a request. */
    enum { STALLED = 6 };
    int fds[STALLED];
    for (int i = 0; i < STALLED; i++) {
        fds[i] = connect_to(port, 10);
        assert_true(fds[i] >= 0);
        assert_int_equal(send_all(fds[i], "GET /metr", 9), 0);
    }
    double t0 = now_s();
    for (int i = 0; i < 10; i++) {
        double t = now_s();
        resp r = request(port, "GET", i % 2 ? "/healthz" : "/metrics");
        assert_int_equal(r.status, 200);
        resp_free(&r);
        /* Were the stalled ones holding threads, this would wait for their
         * timeout (3 s). */
        if (now_s() - t > 2)
            fail_msg("a request took %.2f s while %d clients stalled", now_s() - t, STALLED);
    }
    /* The stalled ones are closed once silent for the timeout. */
    for (int i = 0; i < STALLED; i++) {
        resp r;
        read_resp(fds[i], &r);
        assert_false(r.timed_out); /* closed by the server, not by our 10 s */
        assert_true(r.status == 0 || r.status == 408);
        resp_free(&r);
        close(fds[i]);
    }
    double waited = now_s() - t0;
    if (waited < 2 || waited > 9)
        fail_msg("the stalled clients were closed after %.2f s; the timeout is 3 s", waited);
    assert_int_equal(vram_metrics_stop(m), 0);
    drop_pool(&a);
}

static void four_connections(vram_metrics_opts *o)
{
    o->max_connections = 4;
    o->threads = 1;
}

static void test_connection_limit(void **state)
{
    vram_metrics *m = start(NULL, 0, four_connections);
    unsigned port = vram_metrics_port(m);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_to(port, 10);
        assert_true(fds[i] >= 0);
    }
    /* Let the server accept them all before the fifth comes. */
    struct timespec ms100 = {0, 100 * 1000 * 1000};
    nanosleep(&ms100, NULL);
    int fifth = connect_to(port, 1); /* the kernel's queue completes the handshake */
    assert_true(fifth >= 0);
    const char *get = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send_all(fifth, get, strlen(get)), 0);
    resp r;
    read_resp(fifth, &r);
    assert_true(r.timed_out); /* no answer while four are open */
    assert_int_equal(r.len, 0);
    resp_free(&r);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    /* Once they close, the one waiting is served. */
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fifth, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    read_resp(fifth, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    resp_free(&r);
    close(fifth);
    assert_int_equal(vram_metrics_stop(m), 0);
}

/* ---- concurrency ---- */

typedef struct shared {
    unsigned port;
    vram_pool *pool;
    vram_owner owners[2];
    vram_metrics *server;
    vram_pool *extra;
    atomic_int stop;
    atomic_int failures;
    atomic_long scrapes;
    char first_failure[512];
    pthread_mutex_t lock;
} shared;

typedef struct scraper {
    shared *s;
    int id, rounds;
    char *last; /* the last /metrics body, checked in the main thread */
} scraper;

static void record(shared *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->lock);
    if (!atomic_fetch_add(&s->failures, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->first_failure, sizeof s->first_failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->lock);
}

static void *scrape(void *arg)
{
    scraper *c = arg;
    double last_allocs = 0;
    for (int i = 0; i < c->rounds; i++) {
        const char *path = i % 5 == 4 ? "/snapshot?pool=svc" : "/metrics";
        resp r = request(c->s->port, "GET", path);
        atomic_fetch_add(&c->s->scrapes, 1);
        if (r.status != 200) {
            record(c->s, "scraper %d: %s answered %d (%zu bytes)", c->id, path, r.status, r.len);
        } else if (i % 5 == 4) {
            cJSON *j = cJSON_Parse(r.body);
            if (!j || !cJSON_GetObjectItem(j, "blocks"))
                record(c->s, "scraper %d: a snapshot that is not JSON", c->id);
            cJSON_Delete(j);
        } else {
            double allocs = series_value(r.body, "vram_pool_allocs_total{pool=\"svc\"}");
            if (isnan(allocs) || r.body[r.body_len - 1] != '\n' ||
                isnan(series_value(r.body, "vram_monitor_samples_total")))
                record(c->s, "scraper %d: an incomplete exposition", c->id);
            else if (allocs < last_allocs)
                record(c->s, "scraper %d: allocs_total went back from %.0f to %.0f", c->id,
                       last_allocs, allocs);
            last_allocs = allocs;
            free(c->last);
            c->last = strdup(r.body);
        }
        resp_free(&r);
    }
    return NULL;
}

static void *churn(void *arg)
{
    shared *s = arg;
    static _Atomic unsigned seed_next = 1;
    unsigned seed = atomic_fetch_add(&seed_next, 1);
    int id = (int)seed % 2;
    void *live[32] = {0};
    vram_stream st = (vram_stream)(uintptr_t)(10 + id);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull;
    while (!atomic_load(&s->stop)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned slot = (unsigned)(x % 32);
        if (live[slot]) {
            if (vram_pool_free(s->pool, live[slot], st))
                record(s, "free: %s", vram_last_error());
            live[slot] = NULL;
        } else {
            uint64_t size = 256 + (x >> 40) % (4 * MiB);
            int rc = vram_pool_alloc(s->pool, size, s->owners[id], (vram_kind)(x % VRAM_KIND_COUNT),
                                     st, &live[slot]);
            if (rc && rc != VRAM_EBUDGET)
                record(s, "alloc: %s", vram_last_error());
        }
    }
    for (int i = 0; i < 32; i++)
        if (live[i])
            vram_pool_free(s->pool, live[i], st);
    return NULL;
}

static void *toggle(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->stop)) {
        if (vram_metrics_add_pool(s->server, s->extra))
            record(s, "add_pool: %s", vram_last_error());
        if (vram_metrics_remove_pool(s->server, s->extra))
            record(s, "remove_pool: %s", vram_last_error());
    }
    return NULL;
}

static vram_monitor *monitor;

static void many_threads(vram_metrics_opts *o)
{
    o->threads = 4;
    o->monitor = monitor;
}

static void test_concurrent(void **state)
{
    int quick = getenv("VRAM_TEST_QUICK") != NULL;
    enum { SCRAPERS = 8, CHURNERS = 2 };
    int rounds = quick ? 10 : 40;
    pool_fix a, extra;
    make_pool(&a, "svc");
    make_pool(&extra, "extra");
    shared s = {.pool = a.pool, .extra = extra.pool};
    pthread_mutex_init(&s.lock, NULL);
    assert_int_equal(vram_owner_create(a.pool, "worker0", 64 * MiB, &s.owners[0]), 0);
    assert_int_equal(vram_owner_create(a.pool, "worker1", 0, &s.owners[1]), 0);
    /* A monitor sampling the pool on its own thread, exposed by the server. */
    vram_monitor_opts mo;
    assert_int_equal(vram_monitor_opts_init(&mo), 0);
    mo.period_s = 0.005;
    mo.gpu = -1;
    mo.gpu_pci_bus_id = NULL;
    mo.csv_path = mo.jsonl_path = NULL;
    if (vram_monitor_start(&mo, &monitor))
        fail_msg("vram_monitor_start: %s", vram_last_error());
    assert_int_equal(vram_monitor_add_pool(monitor, a.pool), 0);
    vram_pool *pools[] = {a.pool};
    s.server = start(pools, 1, many_threads);
    s.port = vram_metrics_port(s.server);

    pthread_t ch[CHURNERS], sc[SCRAPERS], tg;
    scraper c[SCRAPERS];
    for (int i = 0; i < CHURNERS; i++)
        assert_int_equal(pthread_create(&ch[i], NULL, churn, &s), 0);
    assert_int_equal(pthread_create(&tg, NULL, toggle, &s), 0);
    for (int i = 0; i < SCRAPERS; i++) {
        c[i] = (scraper){.s = &s, .id = i, .rounds = rounds};
        assert_int_equal(pthread_create(&sc[i], NULL, scrape, &c[i]), 0);
    }
    for (int i = 0; i < SCRAPERS; i++)
        pthread_join(sc[i], NULL);
    atomic_store(&s.stop, 1);
    for (int i = 0; i < CHURNERS; i++)
        pthread_join(ch[i], NULL);
    pthread_join(tg, NULL);
    if (atomic_load(&s.failures))
        fail_msg("%d failures; the first: %s", atomic_load(&s.failures), s.first_failure);
    assert_int_equal(atomic_load(&s.scrapes), SCRAPERS * rounds);
    for (int i = 0; i < SCRAPERS; i++) {
        assert_non_null(c[i].last);
        exposition x;
        check_exposition(c[i].last, &x);
        free(c[i].last);
    }
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(a.pool, &st), 0);
    assert_int_equal(st.live_bytes, 13 * MiB); /* the churners freed all theirs */
    assert_int_equal(vram_metrics_stop(s.server), 0);
    assert_int_equal(vram_monitor_remove_pool(monitor, a.pool), 0);
    assert_int_equal(vram_monitor_stop(monitor), 0);
    monitor = NULL;
    pthread_mutex_destroy(&s.lock);
    drop_pool(&a);
    drop_pool(&extra);
}

/* ---- routes and families of a library above ---- */

/* A request with a body (Content-Length, or chunked in pieces of 700
 * bytes), on a connection of its own. */
static resp request_body(unsigned port, const char *method, const char *path, const char *body,
                         size_t len, int chunked)
{
    size_t cap = len * 2 + 1024;
    char *req = malloc(cap);
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\n", method, path);
    size_t at = (size_t)n;
    if (!chunked) {
        at += (size_t)snprintf(req + at, cap - at, "Content-Length: %zu\r\n\r\n", len);
        memcpy(req + at, body, len);
        at += len;
    } else {
        at += (size_t)snprintf(req + at, cap - at, "Transfer-Encoding: chunked\r\n\r\n");
        for (size_t off = 0; off < len; off += 700) {
            size_t k = len - off < 700 ? len - off : 700;
            at += (size_t)snprintf(req + at, cap - at, "%zx\r\n", k);
            memcpy(req + at, body + off, k);
            at += k;
            memcpy(req + at, "\r\n", 2);
            at += 2;
        }
        memcpy(req + at, "0\r\n\r\n", 5);
        at += 5;
    }
    resp r = raw_request(port, req, at);
    free(req);
    return r;
}

/* The "error" sentence of a JSON answer (a static copy; "" when none). */
static const char *json_error(const resp *r)
{
    static char msg[1200];
    msg[0] = '\0';
    cJSON *j = cJSON_Parse(r->body);
    cJSON *e = cJSON_GetObjectItem(j, "error");
    if (cJSON_IsString(e))
        snprintf(msg, sizeof msg, "%s", e->valuestring);
    cJSON_Delete(j);
    return msg;
}

typedef struct route_ctx {
    vram_metrics *server;
    uint32_t id;
    atomic_int self_unroute; /* what unrouting its own route from the handler gave */
    atomic_int calls, running;
    int sleep_ms;     /* on /slow/... */
} route_ctx;

/* The control API of a stream service, in small: echoes what it got. */
static int streams_api(void *ctx, const vram_http_request *req, vram_http_response *out)
{
    route_ctx *x = ctx;
    atomic_fetch_add(&x->calls, 1);
    atomic_fetch_add(&x->running, 1);
    int rc = 0;
    if (x->sleep_ms) {
        struct timespec ts = {0, (long)x->sleep_ms * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (strcmp(req->path, "/streams/fail") == 0) {
        rc = vram_set_error(VRAM_EIO, "stream \"fail\" cannot start: no decoder for its codec");
    } else if (strcmp(req->path, "/streams/quiet") == 0) {
        vram_clear_error();
        rc = VRAM_EBUSY;
    } else if (strcmp(req->path, "/streams/bad-status") == 0) {
        out->status = 42;
    } else if (strcmp(req->path, "/streams/self") == 0) {
        atomic_store(&x->self_unroute, vram_metrics_unroute(x->server, x->id));
        out->status = 204;
    } else if (strcmp(req->method, "PUT") == 0) {
        out->status = 405;
        out->allow = "GET, POST, DELETE";
        out->content_type = "text/plain; charset=utf-8";
        out->body = strdup("PUT is not how streams change\n");
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "method", req->method);
        cJSON_AddStringToObject(o, "path", req->path);
        cJSON_AddStringToObject(o, "body", req->body);
        cJSON_AddNumberToObject(o, "body_len", (double)req->body_len);
        const char *v = req->arg(req, "verbose");
        if (v)
            cJSON_AddStringToObject(o, "verbose", v);
        const char *t = req->header(req, "content-type");
        if (t)
            cJSON_AddStringToObject(o, "content_type", t);
        out->body = cJSON_PrintUnformatted(o); /* malloc'd: the server frees it */
        cJSON_Delete(o);
        if (strcmp(req->method, "POST") == 0)
            out->status = 201;
    }
    atomic_fetch_sub(&x->running, 1);
    return rc;
}

static int other_api(void *ctx, const vram_http_request *req, vram_http_response *out)
{
    out->content_type = "text/plain";
    out->body = strdup("other\n");
    return 0;
}

static void small_bodies(vram_metrics_opts *o)
{
    o->max_body_bytes = 1024;
    o->threads = 4;
}

/* Field `key` of the JSON body of r, as a string ("" when absent). */
static const char *field(const resp *r, const char *key)
{
    static char v[4096];
    v[0] = '\0';
    cJSON *j = cJSON_Parse(r->body);
    cJSON *f = cJSON_GetObjectItem(j, key);
    if (cJSON_IsString(f))
        snprintf(v, sizeof v, "%s", f->valuestring);
    else if (cJSON_IsNumber(f))
        snprintf(v, sizeof v, "%.0f", f->valuedouble);
    cJSON_Delete(j);
    return v;
}

static void test_routes(void **state)
{
    vram_metrics *m = start(NULL, 0, small_bodies);
    unsigned port = vram_metrics_port(m);
    route_ctx x = {.server = m};
    assert_int_equal(vram_metrics_route(m, "/streams", streams_api, &x, &x.id), 0);
    assert_true(x.id > 0);

    /* GET, with a query argument. */
    resp r = request(port, "GET", "/streams?verbose=yes&x=1");
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Type"), "application/json");
    assert_string_equal(field(&r, "method"), "GET");
    assert_string_equal(field(&r, "path"), "/streams");
    assert_string_equal(field(&r, "verbose"), "yes");
    assert_string_equal(field(&r, "body"), "");
    resp_free(&r);
    r = request(port, "GET", "/streams?verbose");
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "verbose")); /* no value: NULL */
    resp_free(&r);
    /* POST with a JSON body, as Content-Length and chunked. */
    const char *add = "{\"id\":\"cam1\",\"url\":\"rtsp://10.0.0.7/main\"}";
    for (int chunked = 0; chunked < 2; chunked++) {
        r = request_body(port, "POST", "/streams", add, strlen(add), chunked);
        assert_int_equal(r.status, 201);
        assert_string_equal(field(&r, "body"), add);
        assert_string_equal(field(&r, "content_type"), "application/json");
        assert_null(strstr(r.body, "verbose"));
        resp_free(&r);
    }
    /* DELETE of one stream: the path under the prefix, percent-decoded. */
    r = request(port, "DELETE", "/streams/cam%201");
    assert_int_equal(r.status, 200);
    assert_string_equal(field(&r, "method"), "DELETE");
    assert_string_equal(field(&r, "path"), "/streams/cam 1");
    resp_free(&r);
    /* HEAD: the handler's status, no body. */
    r = request(port, "HEAD", "/streams");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);
    /* The handler's own 405, Allow and content type. */
    r = request(port, "PUT", "/streams/cam1");
    assert_int_equal(r.status, 405);
    assert_string_equal(header(&r, "Allow"), "GET, POST, DELETE");
    assert_string_equal(header(&r, "Content-Type"), "text/plain; charset=utf-8");
    assert_string_equal(r.body, "PUT is not how streams change\n");
    resp_free(&r);
    /* Not under the prefix: the server's answers. */
    r = request(port, "GET", "/streamsx");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = request(port, "POST", "/metrics");
    assert_int_equal(r.status, 405);
    assert_string_equal(header(&r, "Allow"), "GET, HEAD");
    resp_free(&r);
    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    /* Keep-alive across a POST with a body and a GET. */
    char two[512];
    int n2 = snprintf(two, sizeof two,
                      "POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s"
                      "GET /streams/cam2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                      strlen(add), add);
    r = raw_request(port, two, (size_t)n2);
    assert_non_null(strstr(r.raw, "HTTP/1.1 201"));
    assert_non_null(strstr(r.raw, "\"path\":\"/streams/cam2\""));
    assert_false(r.timed_out);
    resp_free(&r);

    /* Bodies: up to the limit (1 KiB here) taken whole, past it 413. */
    char *big = malloc(4096);
    memset(big, 'b', 4096);
    for (int chunked = 0; chunked < 2; chunked++) {
        r = request_body(port, "POST", "/streams", big, 1024, chunked);
        assert_int_equal(r.status, 201);
        assert_string_equal(field(&r, "body_len"), "1024");
        resp_free(&r);
        int before = atomic_load(&x.calls);
        r = request_body(port, "POST", "/streams", big, chunked ? 4096 : 1025, chunked);
        assert_int_equal(r.status, 413);
        assert_string_equal(header(&r, "Content-Type"), "application/json");
        if (!strstr(json_error(&r), "over the server's limit of 1024"))
            fail_msg("413 without its sentence: %s", r.body);
        assert_int_equal(atomic_load(&x.calls), before); /* the handler never saw it */
        resp_free(&r);
    }
    /* Chunks going on past 16 times the limit: cut off, unanswered. */
    big = realloc(big, 40 * 1024);
    memset(big, 'b', 40 * 1024);
    r = request_body(port, "POST", "/streams", big, 40 * 1024, 1);
    assert_int_equal(r.status, 0);
    assert_false(r.timed_out);
    resp_free(&r);
    free(big);
    r = request(port, "GET", "/streams");
    assert_int_equal(r.status, 200);
    resp_free(&r);

    /* A failing handler: 500 with its sentence; without one, the code. */
    r = request(port, "POST", "/streams/fail");
    assert_int_equal(r.status, 500);
    assert_string_equal(json_error(&r), "stream \"fail\" cannot start: no decoder for its codec");
    resp_free(&r);
    r = request(port, "GET", "/streams/quiet");
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(json_error(&r), "VRAM_EBUSY"));
    resp_free(&r);
    r = request(port, "GET", "/streams/bad-status");
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(json_error(&r), "status 42"));
    resp_free(&r);

    /* Prefixes refused. */
    uint32_t id = 7;
    static const char *const refused[] = {
        "/streams", "/streams/cam1", "/", "/metrics", "/metrics/streams", "/snapshot",
        "/healthz", "streams", "/a/", "/a//b", "/a?b", "/a b", "/a%20b", "/a\nb", "",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        if (vram_metrics_route(m, refused[i], other_api, NULL, &id) != VRAM_EINVAL)
            fail_msg("prefix \"%s\" was taken", refused[i]);
        assert_int_equal(id, 0);
    }
    assert_int_equal(vram_metrics_route(m, "/streams", other_api, NULL, &id), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "routed already"));
    assert_int_equal(vram_metrics_route(m, "/metrics", other_api, NULL, &id), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "own path /metrics"));
    assert_int_equal(vram_metrics_route(NULL, "/x", other_api, NULL, &id), VRAM_EINVAL);
    assert_int_equal(vram_metrics_route(m, NULL, other_api, NULL, &id), VRAM_EINVAL);
    assert_int_equal(vram_metrics_route(m, "/x", NULL, NULL, &id), VRAM_EINVAL);
    assert_int_equal(vram_metrics_route(m, "/x", other_api, NULL, NULL), VRAM_EINVAL);
    /* A second route beside it, up to the limit. */
    uint32_t ids[VRAM_METRICS_ROUTES_MAX];
    for (int i = 0; i < VRAM_METRICS_ROUTES_MAX - 1; i++) {
        char p[32];
        snprintf(p, sizeof p, "/other%d", i);
        assert_int_equal(vram_metrics_route(m, p, other_api, NULL, &ids[i]), 0);
    }
    assert_int_equal(vram_metrics_route(m, "/one-too-many", other_api, NULL, &id), VRAM_ELIMIT);
    r = request(port, "GET", "/other3/x");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "other\n");
    resp_free(&r);
    for (int i = 0; i < VRAM_METRICS_ROUTES_MAX - 1; i++)
        assert_int_equal(vram_metrics_unroute(m, ids[i]), 0);

    /* A handler unrouting its own route is refused, not stuck. */
    r = request(port, "GET", "/streams/self");
    assert_int_equal(r.status, 204);
    assert_int_equal(atomic_load(&x.self_unroute), VRAM_EBUSY);
    resp_free(&r);

    /* Unrouted: the server's 404 (and 405 for another method). */
    assert_int_equal(vram_metrics_unroute(m, x.id), 0);
    assert_int_equal(vram_metrics_unroute(m, x.id), VRAM_EINVAL);
    assert_int_equal(vram_metrics_unroute(NULL, 1), VRAM_EINVAL);
    r = request(port, "GET", "/streams");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = request(port, "DELETE", "/streams/cam1");
    assert_int_equal(r.status, 405);
    resp_free(&r);
    /* The prefix is free again; the new route has a new id. */
    uint32_t again;
    assert_int_equal(vram_metrics_route(m, "/streams", other_api, NULL, &again), 0);
    assert_true(again != x.id);
    r = request(port, "GET", "/streams");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "other\n");
    resp_free(&r);
    /* Stopped with a route still there. */
    assert_int_equal(vram_metrics_stop(m), 0);
}

/* Unrouting waits for the handler's calls in flight. */
typedef struct slow_call {
    unsigned port;
    resp r;
} slow_call;

static void *slow_get(void *arg)
{
    slow_call *s = arg;
    s->r = request(s->port, "GET", "/streams/slow");
    return NULL;
}

static void test_unroute_waits(void **state)
{
    vram_metrics *m = start(NULL, 0, small_bodies);
    route_ctx x = {.server = m, .sleep_ms = 300};
    assert_int_equal(vram_metrics_route(m, "/streams", streams_api, &x, &x.id), 0);
    slow_call s = {.port = vram_metrics_port(m)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_get, &s), 0);
    double t0 = now_s();
    while (!atomic_load(&x.running) && now_s() - t0 < 10) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(atomic_load(&x.running), 1);
    assert_int_equal(vram_metrics_unroute(m, x.id), 0);
    assert_int_equal(atomic_load(&x.running), 0); /* x may be freed now */
    pthread_join(t, NULL);
    assert_int_equal(s.r.status, 200);
    assert_string_equal(field(&s.r, "path"), "/streams/slow");
    resp_free(&s.r);
    assert_int_equal(vram_metrics_stop(m), 0);
}

/* Per-stream families, as a stream service writes them. */
#define FAM_MAGIC 0x5eaf00du
typedef struct fam_ctx {
    unsigned magic; /* cleared before it is freed: a call after that is seen */
    atomic_int fail;
    atomic_long calls;
} fam_ctx;

static int put(vram_write_fn write, void *wctx, const char *s) { return write(wctx, s, strlen(s)); }

static int stream_families(void *ctx, vram_write_fn write, void *wctx)
{
    fam_ctx *f = ctx;
    if (f->magic != FAM_MAGIC)
        return vram_set_error(VRAM_EINVAL, "stream families: a ctx that was freed");
    atomic_fetch_add(&f->calls, 1);
    if (atomic_load(&f->fail))
        return vram_set_error(VRAM_EIO, "stream families: the decoder's counters are gone");
    static const char *const streams[] = {"cam1", "a\"b\\c\nd"};
    int rc = put(write, wctx, "# HELP vramtest_stream_frames_total frames decoded, per stream\n"
                              "# TYPE vramtest_stream_frames_total counter\n");
    for (int i = 0; i < 2 && !rc; i++) {
        rc = put(write, wctx, "vramtest_stream_frames_total{stream=\"");
        if (!rc)
            rc = vram_metrics_write_label_value(write, wctx, streams[i]);
        if (!rc)
            rc = put(write, wctx, i ? "\"} 7\n" : "\"} 1200\n");
    }
    if (!rc)
        rc = put(write, wctx, "# HELP vramtest_stream_queue_depth frames waiting, per stream\n"
                              "# TYPE vramtest_stream_queue_depth gauge\n"
                              "vramtest_stream_queue_depth{stream=\"cam1\"} 3\n");
    return rc;
}

static void test_families(void **state)
{
    /* The escaping on its own. */
    vram_buffer b = {0};
    assert_int_equal(vram_metrics_write_label_value(vram_write_buffer, &b, "a\"b\\c\nd"), 0);
    assert_string_equal(b.data, "a\\\"b\\\\c\\nd");
    vram_buffer_free(&b);
    assert_int_equal(vram_metrics_write_label_value(vram_write_buffer, &b, ""), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(vram_metrics_write_label_value(NULL, &b, "x"), VRAM_EINVAL);
    assert_int_equal(vram_metrics_write_label_value(vram_write_buffer, &b, NULL), VRAM_EINVAL);

    pool_fix a;
    make_pool(&a, "svc");
    vram_pool *pools[] = {a.pool};
    vram_metrics *m = start(pools, 1, NULL);
    unsigned port = vram_metrics_port(m);
    fam_ctx f = {.magic = FAM_MAGIC};
    uint32_t id = 0;
    assert_int_equal(vram_metrics_add_families(m, stream_families, &f, &id), 0);
    assert_true(id > 0);

    resp r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    exposition x;
    check_exposition(r.body, &x);
    promtool_check(r.body);
    assert_true(series_value(r.body, "vramtest_stream_frames_total{stream=\"cam1\"}") == 1200);
    assert_true(series_value(r.body, "vramtest_stream_frames_total{stream=\"a\\\"b\\\\c\\nd\"}") == 7);
    assert_true(series_value(r.body, "vramtest_stream_queue_depth{stream=\"cam1\"}") == 3);
    assert_true(series_value(r.body, "vram_pool_live_bytes{pool=\"svc\"}") == 13.0 * MiB);
    /* After the server's own families. */
    assert_string_equal(x.fam[x.n - 2].name, "vramtest_stream_frames_total");
    assert_string_equal(x.fam[x.n - 1].name, "vramtest_stream_queue_depth");
    assert_true(strstr(r.body, "vram_pool_live_bytes") < strstr(r.body, "vramtest_stream"));
    resp_free(&r);
    /* vram_metrics_write has them too. */
    assert_int_equal(vram_metrics_write(m, vram_write_buffer, &b, 0), 0);
    assert_non_null(strstr(b.data, "vramtest_stream_queue_depth{stream=\"cam1\"} 3\n"));
    vram_buffer_free(&b);
    /* A failing writer fails the scrape, with its sentence. */
    atomic_store(&f.fail, 1);
    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "the decoder's counters are gone"));
    resp_free(&r);
    assert_int_equal(vram_metrics_write(m, vram_write_buffer, &b, 0), VRAM_EIO);
    vram_buffer_free(&b);
    atomic_store(&f.fail, 0);

    /* Limits and bad arguments. */
    uint32_t more[VRAM_METRICS_FAMILIES_MAX];
    fam_ctx g = {.magic = FAM_MAGIC, .fail = 1};
    for (int i = 0; i < VRAM_METRICS_FAMILIES_MAX - 1; i++)
        assert_int_equal(vram_metrics_add_families(m, stream_families, &g, &more[i]), 0);
    uint32_t extra = 1;
    assert_int_equal(vram_metrics_add_families(m, stream_families, &g, &extra), VRAM_ELIMIT);
    assert_int_equal(extra, 0);
    for (int i = 0; i < VRAM_METRICS_FAMILIES_MAX - 1; i++)
        assert_int_equal(vram_metrics_remove_families(m, more[i]), 0);
    assert_int_equal(vram_metrics_add_families(NULL, stream_families, &g, &extra), VRAM_EINVAL);
    assert_int_equal(vram_metrics_add_families(m, NULL, &g, &extra), VRAM_EINVAL);
    assert_int_equal(vram_metrics_add_families(m, stream_families, &g, NULL), VRAM_EINVAL);
    assert_int_equal(vram_metrics_remove_families(m, 999999), VRAM_EINVAL);
    /* A route's id is no families writer's. */
    uint32_t rid;
    assert_int_equal(vram_metrics_route(m, "/streams", other_api, NULL, &rid), 0);
    assert_int_equal(vram_metrics_remove_families(m, rid), VRAM_EINVAL);
    assert_int_equal(vram_metrics_unroute(m, id), VRAM_EINVAL);

    /* Removed: gone from the exposition. */
    assert_int_equal(vram_metrics_remove_families(m, id), 0);
    assert_int_equal(vram_metrics_remove_families(m, id), VRAM_EINVAL);
    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "vramtest_"));
    resp_free(&r);
    /* Stopped with families and a route still there. */
    assert_int_equal(vram_metrics_add_families(m, stream_families, &f, &id), 0);
    assert_int_equal(vram_metrics_stop(m), 0);
    drop_pool(&a);
}

/* A health check whose answer the test sets. */
typedef struct health_ctx {
    atomic_int bad;
    const char *why;
    atomic_int calls;
} health_ctx;

static int health_check(void *ctx, char *why, size_t cap)
{
    health_ctx *h = ctx;
    atomic_fetch_add(&h->calls, 1);
    if (!atomic_load(&h->bad))
        return 0;
    snprintf(why, cap, "%s", h->why);
    return 1;
}

static void test_health(void **state)
{
    (void)state;
    pool_fix a;
    make_pool(&a, "svc");
    vram_pool *pools[] = {a.pool};
    vram_metrics *m = start(pools, 1, NULL);
    unsigned port = vram_metrics_port(m);
    health_ctx g0 = {.why = "service: GPU 0 failed: Xid 79: fell off the bus"};
    health_ctx g1 = {.why = "service: GPU 1 failed: device lost"};
    uint32_t id0 = 0, id1 = 0;
    assert_int_equal(vram_metrics_add_health(m, health_check, &g0, &id0), 0);
    assert_int_equal(vram_metrics_add_health(m, health_check, &g1, &id1), 0);
    assert_true(id0 > 0 && id1 > id0);

    /* Every check passes: 200 ok, each asked. */
    resp r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    resp_free(&r);
    assert_true(atomic_load(&g0.calls) >= 1 && atomic_load(&g1.calls) >= 1);
    /* One fails: 503 with its sentence only. */
    atomic_store(&g1.bad, 1);
    r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "unhealthy: service: GPU 1 failed: device lost\n");
    resp_free(&r);
    /* Both: both sentences, in the order added. */
    atomic_store(&g0.bad, 1);
    r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "unhealthy: service: GPU 0 failed: Xid 79: fell off the bus; "
                                "service: GPU 1 failed: device lost\n");
    resp_free(&r);
    /* HEAD says the same without a body; /metrics is unaffected. */
    r = request(port, "HEAD", "/healthz");
    assert_int_equal(r.status, 503);
    resp_free(&r);
    r = request(port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    /* Removed checks are no longer asked; removing twice is refused. */
    assert_int_equal(vram_metrics_remove_health(m, id0), 0);
    assert_int_equal(vram_metrics_remove_health(m, id0), VRAM_EINVAL);
    int before = atomic_load(&g0.calls);
    r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "unhealthy: service: GPU 1 failed: device lost\n");
    resp_free(&r);
    assert_int_equal(atomic_load(&g0.calls), before);
    assert_int_equal(vram_metrics_remove_health(m, id1), 0);
    r = request(port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    /* Limits and bad arguments; a families writer's id is no check's. */
    uint32_t more[VRAM_METRICS_HEALTH_MAX], extra = 1;
    for (int i = 0; i < VRAM_METRICS_HEALTH_MAX; i++)
        assert_int_equal(vram_metrics_add_health(m, health_check, &g1, &more[i]), 0);
    assert_int_equal(vram_metrics_add_health(m, health_check, &g1, &extra), VRAM_ELIMIT);
    assert_int_equal(extra, 0);
    assert_non_null(strstr(vram_last_error(), "16 health checks already"));
    for (int i = 0; i < VRAM_METRICS_HEALTH_MAX; i++)
        assert_int_equal(vram_metrics_remove_health(m, more[i]), 0);
    assert_int_equal(vram_metrics_add_health(NULL, health_check, &g1, &extra), VRAM_EINVAL);
    assert_int_equal(vram_metrics_add_health(m, NULL, &g1, &extra), VRAM_EINVAL);
    assert_int_equal(vram_metrics_add_health(m, health_check, &g1, NULL), VRAM_EINVAL);
    fam_ctx f = {.magic = FAM_MAGIC};
    uint32_t fid;
    assert_int_equal(vram_metrics_add_families(m, stream_families, &f, &fid), 0);
    assert_int_equal(vram_metrics_remove_health(m, fid), VRAM_EINVAL);
    assert_int_equal(vram_metrics_remove_health(NULL, fid), VRAM_EINVAL);
    /* Stopped with a check still there. */
    assert_int_equal(vram_metrics_add_health(m, health_check, &g1, &id1), 0);
    assert_int_equal(vram_metrics_stop(m), 0);
    drop_pool(&a);
}

typedef struct hammer {
    unsigned port;
    atomic_int *stop;
    atomic_int bad;
    long scrapes;
    char first_bad[600];
} hammer;

static void *hammer_metrics(void *arg)
{
    hammer *h = arg;
    while (!atomic_load(h->stop)) {
        resp r = request(h->port, "GET", "/metrics");
        h->scrapes++;
        /* Each answer is whole: 200, the writer's two families with all
         * their samples, or neither of them. */
        int frames = strstr(r.body, "vramtest_stream_frames_total{stream=\"cam1\"} 1200\n") != NULL;
        int depth = strstr(r.body, "vramtest_stream_queue_depth{stream=\"cam1\"} 3\n") != NULL;
        if ((r.status != 200 || frames != depth) && !atomic_fetch_add(&h->bad, 1))
            snprintf(h->first_bad, sizeof h->first_bad, "status %d, frames %d, depth %d: %.400s",
                     r.status, frames, depth, r.body);
        resp_free(&r);
    }
    return NULL;
}

static void test_families_concurrent(void **state)
{
    int quick = getenv("VRAM_TEST_QUICK") != NULL;
    vram_metrics *m = start(NULL, 0, small_bodies);
    enum { HAMMERS = 4 };
    atomic_int stop = 0;
    hammer h[HAMMERS];
    pthread_t t[HAMMERS];
    for (int i = 0; i < HAMMERS; i++) {
        memset(&h[i], 0, sizeof h[i]);
        h[i].port = vram_metrics_port(m);
        h[i].stop = &stop;
        assert_int_equal(pthread_create(&t[i], NULL, hammer_metrics, &h[i]), 0);
    }
    /* Add and remove, freeing the ctx each time: once remove returns no
     * scrape may call the writer on it. */
    int rounds = quick ? 100 : 400;
    long served = 0;
    for (int i = 0; i < rounds; i++) {
        fam_ctx *f = calloc(1, sizeof *f);
        f->magic = FAM_MAGIC;
        uint32_t id;
        assert_int_equal(vram_metrics_add_families(m, stream_families, f, &id), 0);
        struct timespec us = {0, (i % 4) * 250 * 1000};
        nanosleep(&us, NULL);
        assert_int_equal(vram_metrics_remove_families(m, id), 0);
        served += atomic_load(&f->calls);
        f->magic = 0;
        free(f);
    }
    atomic_store(&stop, 1);
    long scrapes = 0;
    for (int i = 0; i < HAMMERS; i++) {
        pthread_join(t[i], NULL);
        scrapes += h[i].scrapes;
        if (atomic_load(&h[i].bad))
            fail_msg("%d bad scrapes on thread %d; the first: %s", atomic_load(&h[i].bad), i,
                     h[i].first_bad);
    }
    assert_true(scrapes > 0);
    assert_true(served > 0); /* the writer did run while the scrapes came */
    assert_int_equal(vram_metrics_stop(m), 0);
}

/* ---- start errors and options ---- */

static int try_start(const char *address, unsigned port, vram_pool **pools, size_t n,
                     void (*tune)(vram_metrics_opts *), vram_metrics **m)
{
    vram_metrics_opts o;
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    o.address = address;
    o.port = port;
    o.pools = pools;
    o.n_pools = n;
    if (tune)
        tune(&o);
    return vram_metrics_start(&o, m);
}

static void many(vram_metrics_opts *o) { o->threads = 65; }
static void too_many_conn(vram_metrics_opts *o) { o->max_connections = 5000; }
static void tiny_mem(vram_metrics_opts *o) { o->max_header_bytes = 100; }
static void bad_gpu(vram_metrics_opts *o) { o->gpu = -3; }
static void tiny_body(vram_metrics_opts *o) { o->max_body_bytes = 512; }
static void huge_body(vram_metrics_opts *o) { o->max_body_bytes = 32u << 20; }

static void test_start_errors(void **state)
{
    vram_metrics *m = (vram_metrics *)1;
    assert_int_equal(try_start("localhost", 0, NULL, 0, NULL, &m), VRAM_EINVAL);
    assert_null(m);
    assert_non_null(strstr(vram_last_error(), "\"localhost\" is not an IPv4 or IPv6 literal"));
    assert_int_equal(try_start("300.1.1.1", 0, NULL, 0, NULL, &m), VRAM_EINVAL);
    assert_int_equal(try_start("127.0.0.1", 70000, NULL, 0, NULL, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "70000"));
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, many, &m), VRAM_EINVAL);
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, too_many_conn, &m), VRAM_EINVAL);
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, tiny_mem, &m), VRAM_EINVAL);
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, bad_gpu, &m), VRAM_EINVAL);
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, tiny_body, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "512 bytes for a request body"));
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, huge_body, &m), VRAM_EINVAL);
    assert_int_equal(vram_metrics_start(NULL, NULL), VRAM_EINVAL);
    pool_fix a, b;
    make_pool(&a, "same");
    make_pool(&b, "same");
    vram_pool *dup[] = {a.pool, b.pool};
    assert_int_equal(try_start("127.0.0.1", 0, dup, 2, NULL, &m), VRAM_EINVAL);
    assert_null(m);

    /* A port in use. */
    vram_metrics *first;
    assert_int_equal(try_start("127.0.0.1", 0, NULL, 0, NULL, &first), 0);
    unsigned port = vram_metrics_port(first);
    assert_int_equal(try_start("127.0.0.1", port, NULL, 0, NULL, &m), VRAM_EIO);
    assert_null(m);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1 port %u", port);
    if (!strstr(vram_last_error(), want))
        fail_msg("the error does not name the port: %s", vram_last_error());
    assert_int_equal(vram_metrics_stop(first), 0);

    /* IPv6 loopback, where the machine has it. */
    if (try_start("::1", 0, NULL, 0, NULL, &m) == 0) {
        assert_true(vram_metrics_port(m) > 0);
        assert_int_equal(vram_metrics_stop(m), 0);
    }

    /* The options. */
    vram_metrics_opts o;
    assert_int_equal(vram_config_set("metrics_port", "9123"), 0);
    assert_int_equal(vram_config_set("metrics_address", "0.0.0.0"), 0);
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    assert_int_equal(o.port, 9123);
    assert_string_equal(o.address, "0.0.0.0");
    assert_int_equal(o.gpu, VRAM_GPU_ALL);
    assert_int_equal(vram_config_set("metrics_port", "70000"), 0);
    assert_int_equal(vram_metrics_opts_init(&o), VRAM_EINVAL);
    assert_int_equal(o.port, 0);
    assert_int_equal(vram_config_set("metrics_address", NULL), 0);
    assert_int_equal(vram_config_set("metrics_port", NULL), 0);
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    assert_string_equal(o.address, "127.0.0.1");
    drop_pool(&a);
    drop_pool(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),   cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_slow_clients), cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_concurrent),  cmocka_unit_test(test_routes),
        cmocka_unit_test(test_unroute_waits), cmocka_unit_test(test_families),
        cmocka_unit_test(test_families_concurrent), cmocka_unit_test(test_start_errors),
        cmocka_unit_test(test_health),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
