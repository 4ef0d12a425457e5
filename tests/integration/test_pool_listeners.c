/* tests/integration/test_pool_listeners.c - listeners of a pool through the
 * public API: what they hear and in which order, the report step with the
 * state captured under the lock, nested events, removal (waiting for report
 * steps on other threads), the ring of the last events, and the hooks for
 * pools made from the configuration. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024)

static vram_pool *make_pool(uint64_t capacity, vram_backend **b)
{
    assert_int_equal(vram_backend_create("sim", &(vram_backend_opts){.capacity = capacity}, b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = *b;
    o.configured_listeners = 0;
    o.name = "heard";
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static void drop_pool(vram_pool *p, vram_backend *b)
{
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* ---- a recording listener ---- */

typedef struct heard {
    int n;
    vram_event ev[32];
    char message[32][256];
    int reports, detached;
    int report_on;            /* event type that asks for a report, -1: none */
    int alloc_in_report;      /* on_report allocates (and frees) from the pool */
    int nested_seen;
    vram_pool_stats state_stats;
    size_t state_owners;
    int state_snapshot_ok;
    int detach_rc;
    int order_tag, *order, *order_n;
} heard;

static int hear(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)pool;
    heard *h = ctx;
    if (h->n < 32) {
        h->ev[h->n] = *ev;
        snprintf(h->message[h->n], sizeof h->message[0], "%s", ev->message ? ev->message : "");
        h->n++;
    }
    if (ev->nested)
        h->nested_seen++;
    if (h->order)
        h->order[(*h->order_n)++] = h->order_tag;
    if ((int)ev->type == h->report_on && !ev->nested) {
        *note = h;
        return VRAM_LISTENER_REPORT;
    }
    return 0;
}

static void report(void *ctx, vram_pool *pool, const vram_event *ev, const vram_pool_state *st,
                   void *note)
{
    heard *h = ctx;
    assert_ptr_equal(note, h);
    assert_int_equal(ev->type, h->report_on);
    h->reports++;
    if (st) {
        h->state_stats = st->stats;
        h->state_owners = st->n_owners;
        h->state_snapshot_ok = st->snapshot && strstr(st->snapshot, "\"blocks\"") != NULL &&
                               st->snapshot_len == strlen(st->snapshot);
        assert_string_equal(st->pool, "heard");
        assert_string_equal(st->backend, "sim");
    }
    if (h->alloc_in_report) {
        void *x;
        assert_int_equal(vram_pool_alloc(pool, 4096, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL, &x),
                         0);
        assert_int_equal(vram_pool_free(pool, x, NULL), 0);
        /* The pool's refusals inside a report step are nested too. */
        assert_int_equal(vram_pool_alloc(pool, 1ull << 50, 0, VRAM_KIND_OTHER, NULL, &x),
                         VRAM_ENOMEM);
    }
}

static int detach(void *ctx, vram_pool *pool)
{
    (void)pool;
    heard *h = ctx;
    h->detached++;
    return h->detach_rc ? vram_set_error(h->detach_rc, "listener %p refused to go", ctx) : 0;
}

static vram_listener listener_of(heard *h, uint32_t events, unsigned flags)
{
    return (vram_listener){.size = sizeof(vram_listener), .events = events, .flags = flags,
                           .on_event = hear, .on_report = report, .on_detach = detach, .ctx = h};
}

static void test_bad_listeners(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    heard h = {.report_on = -1};
    vram_listener l = listener_of(&h, VRAM_EVENTS_ALL, 0);
    l.size = sizeof l + 8; /* from a library newer than this one */
    assert_int_equal(vram_pool_listen(p, &l, NULL), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "is that of no version of the struct"));
    l = listener_of(&h, VRAM_EVENTS_ALL, 0);
    l.on_event = NULL;
    assert_int_equal(vram_pool_listen(p, &l, NULL), VRAM_EINVAL);
    l = listener_of(&h, 0x100, 0);
    assert_int_equal(vram_pool_listen(p, &l, NULL), VRAM_EINVAL);
    assert_int_equal(vram_pool_listen(NULL, &l, NULL), VRAM_EINVAL);
    assert_int_equal(vram_pool_unlisten(p, 12345), VRAM_EINVAL);
    /* No more than VRAM_LISTENERS_MAX. */
    l = listener_of(&h, VRAM_EVENTS_ALL, 0);
    for (int i = 0; i < VRAM_LISTENERS_MAX; i++)
        assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    assert_int_equal(vram_pool_listen(p, &l, NULL), VRAM_ELIMIT);
    drop_pool(p, b);
    assert_int_equal(h.detached, VRAM_LISTENERS_MAX);
}

/* Every event, in order, with its fields; only the types asked for. */
static void test_events(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam", 2 * MiB, &cam), 0);
    heard all = {.report_on = -1}, frees = {.report_on = -1};
    vram_listener l = listener_of(&all, VRAM_EVENTS_ALL, 0);
    uint32_t id_all, id_frees;
    assert_int_equal(vram_pool_listen(p, &l, &id_all), 0);
    l = listener_of(&frees, VRAM_EVENT_BIT(VRAM_EVENT_FREE), 0);
    assert_int_equal(vram_pool_listen(p, &l, &id_frees), 0);
    assert_int_not_equal(id_all, id_frees);
    vram_stream s = (vram_stream)0x42;
    void *x, *y = NULL;
    assert_int_equal(vram_pool_alloc(p, 1000, cam, VRAM_KIND_FRAMES, s, &x), 0);
    assert_int_equal(vram_pool_alloc(p, 3 * MiB, cam, VRAM_KIND_FRAMES, s, &y), VRAM_EBUDGET);
    char refusal[256];
    snprintf(refusal, sizeof refusal, "%s", vram_last_error());
    assert_int_equal(vram_pool_free(p, x, s), 0);
    assert_int_equal(vram_pool_free(p, (void *)0x1234, s), VRAM_ENOTALLOC); /* not an event */
    assert_int_equal(all.n, 3);
    assert_int_equal(all.ev[0].type, VRAM_EVENT_ALLOC);
    assert_int_equal(all.ev[0].addr, (uint64_t)(uintptr_t)x);
    assert_int_equal(all.ev[0].size, 1000);
    assert_int_equal(all.ev[0].owner, cam);
    assert_int_equal(all.ev[0].kind, VRAM_KIND_FRAMES);
    assert_ptr_equal(all.ev[0].stream, s);
    assert_int_equal(all.ev[1].type, VRAM_EVENT_REFUSE);
    assert_int_equal(all.ev[1].error, VRAM_EBUDGET);
    assert_int_equal(all.ev[1].addr, 0);
    assert_int_equal(all.ev[1].size, 3 * MiB);
    assert_string_equal(all.message[1], refusal);
    assert_non_null(strstr(refusal, "budget of owner \"cam\""));
    assert_int_equal(all.ev[2].type, VRAM_EVENT_FREE);
    assert_int_equal(all.ev[2].size, 1000);
    assert_int_equal(frees.n, 1);
    assert_int_equal(frees.ev[0].type, VRAM_EVENT_FREE);
    assert_string_equal(vram_event_type_name(VRAM_EVENT_REFUSE), "refuse");
    assert_string_equal(vram_event_type_name((vram_event_type)99), "?");
    /* Removed: no more events; the detach's error is returned. */
    frees.detach_rc = VRAM_EIO;
    assert_int_equal(vram_pool_unlisten(p, id_frees), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "refused to go"));
    assert_int_equal(frees.detached, 1);
    assert_int_equal(vram_pool_unlisten(p, id_frees), VRAM_EINVAL);
    assert_int_equal(vram_pool_alloc(p, 10, 0, VRAM_KIND_IO, NULL, &x), 0);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    assert_int_equal(frees.n, 1);
    assert_int_equal(all.n, 5);
    drop_pool(p, b);
    assert_int_equal(all.detached, 1);
}

/* Report steps: after the lock, with the state at the event; the call's
 * result and sentence survive them; the pool's events they cause are
 * nested. */
static void test_report_state(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    heard h = {.report_on = VRAM_EVENT_REFUSE, .alloc_in_report = 1};
    vram_listener l = listener_of(&h, VRAM_EVENTS_ALL, VRAM_LISTENER_STATE);
    assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    void *x, *y;
    assert_int_equal(vram_pool_alloc(p, 5 * MiB, 0, VRAM_KIND_OTHER, NULL, &x), 0);
    assert_int_equal(h.reports, 0);
    assert_int_equal(vram_pool_alloc(p, 100 * MiB, 0, VRAM_KIND_OTHER, NULL, &y), VRAM_ENOMEM);
    assert_null(y);
    assert_non_null(strstr(vram_last_error(), "cannot allocate 100.0 MiB"));
    assert_int_equal(h.reports, 1);
    assert_int_equal(h.state_stats.live_bytes, 5 * MiB);
    assert_int_equal(h.state_stats.failed_allocs_total, 1);
    assert_int_equal(h.state_owners, 1);
    assert_true(h.state_snapshot_ok);
    /* alloc, free and refusal from the report step: heard, nested, no report. */
    assert_int_equal(h.nested_seen, 3);
    assert_int_equal(h.reports, 1);
    /* A report without VRAM_LISTENER_STATE gets no state. */
    heard plain = {.report_on = VRAM_EVENT_FREE};
    l = listener_of(&plain, VRAM_EVENT_BIT(VRAM_EVENT_FREE), 0);
    assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    assert_int_equal(plain.reports, 1);
    assert_int_equal(plain.state_owners, 0);
    drop_pool(p, b);
}

/* From inside a listener the pool's listeners cannot change. */
typedef struct meddler {
    vram_pool *pool;
    int rc_listen, rc_unlisten;
} meddler;

static int meddle_event(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)pool;
    (void)ev;
    (void)note;
    return VRAM_LISTENER_REPORT;
}

static void meddle_report(void *ctx, vram_pool *pool, const vram_event *ev,
                          const vram_pool_state *st, void *note)
{
    (void)ev;
    (void)st;
    (void)note;
    meddler *m = ctx;
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = meddle_event};
    m->rc_listen = vram_pool_listen(pool, &l, NULL);
    m->rc_unlisten = vram_pool_unlisten(pool, 1);
}

static void test_no_changes_from_inside(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    meddler m = {p, 0, 0};
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = meddle_event,
                       .on_report = meddle_report, .ctx = &m};
    assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    void *x;
    assert_int_equal(vram_pool_alloc(p, 100, 0, VRAM_KIND_OTHER, NULL, &x), 0);
    assert_int_equal(m.rc_listen, VRAM_EBUSY);
    assert_int_equal(m.rc_unlisten, VRAM_EBUSY);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    drop_pool(p, b);
}

/* Listeners are called in the order they were attached, and detached at
 * destroy in the reverse order. */
static int detach_order(void *ctx, vram_pool *pool)
{
    (void)pool;
    heard *h = ctx;
    h->order[(*h->order_n)++] = 100 + h->order_tag;
    return 0;
}

static void test_order(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    int order[16], n = 0;
    heard h[3];
    for (int i = 0; i < 3; i++) {
        h[i] = (heard){.report_on = -1, .order_tag = i, .order = order, .order_n = &n};
        vram_listener l = listener_of(&h[i], VRAM_EVENTS_ALL, 0);
        l.on_detach = detach_order;
        assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    }
    void *x;
    assert_int_equal(vram_pool_alloc(p, 100, 0, VRAM_KIND_OTHER, NULL, &x), 0);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    drop_pool(p, b);
    int want[] = {0, 1, 2, 0, 1, 2, 102, 101, 100};
    assert_int_equal(n, 9);
    for (int i = 0; i < 9; i++)
        assert_int_equal(order[i], want[i]);
}

/* ---- the ring ---- */

typedef struct ring_reader {
    vram_ring *ring;
    size_t n;
    uint64_t total;
    vram_ring_event last;
} ring_reader;

static int read_ring_inside(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)pool;
    (void)ev;
    (void)note;
    ring_reader *r = ctx;
    vram_ring_event e[4];
    assert_int_equal(vram_ring_read(r->ring, e, 4, &r->n, &r->total), 0);
    if (r->n)
        r->last = e[r->n - 1];
    return 0;
}

static void test_ring(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(64 * MiB, &b);
    vram_ring *ring;
    assert_int_equal(vram_pool_ring_attach(p, 0, &ring), VRAM_EINVAL);
    assert_int_equal(vram_pool_ring_attach(p, (1u << 24) + 1, &ring), VRAM_EINVAL);
    assert_int_equal(vram_pool_ring_attach(p, 3, &ring), 0);
    /* A listener attached after the ring reads it from inside the lock,
     * and finds the event it is told of already there. */
    ring_reader rr = {.ring = ring};
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = read_ring_inside,
                       .ctx = &rr};
    assert_int_equal(vram_pool_listen(p, &l, NULL), 0);
    vram_ring_event e[8];
    size_t n;
    uint64_t total;
    assert_int_equal(vram_ring_read(ring, e, 8, &n, &total), 0);
    assert_int_equal(n, 0);
    assert_int_equal(total, 0);
    void *x[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(vram_pool_alloc(p, 1000 + (uint64_t)i, 0, VRAM_KIND_IO, NULL, &x[i]), 0);
    assert_int_equal(rr.total, 4);
    assert_int_equal(rr.last.size, 1003);
    assert_int_equal(vram_pool_free(p, x[0], NULL), 0);
    assert_int_equal(vram_ring_read(ring, e, 8, &n, &total), 0);
    assert_int_equal(total, 5);
    assert_int_equal(n, 3); /* the last three, oldest first */
    assert_int_equal(e[0].type, VRAM_EVENT_ALLOC);
    assert_int_equal(e[0].size, 1002);
    assert_int_equal(e[1].size, 1003);
    assert_int_equal(e[2].type, VRAM_EVENT_FREE);
    assert_int_equal(e[2].addr, (uint64_t)(uintptr_t)x[0]);
    assert_true(e[2].time_s >= e[0].time_s && e[0].time_s > 1e9);
    /* A smaller buffer gets the newest. */
    assert_int_equal(vram_ring_read(ring, e, 1, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].type, VRAM_EVENT_FREE);
    assert_int_equal(vram_ring_read(ring, NULL, 1, &n, NULL), VRAM_EINVAL);
    for (int i = 1; i < 4; i++)
        assert_int_equal(vram_pool_free(p, x[i], NULL), 0);
    assert_int_equal(vram_pool_ring_detach(p, ring), 0);
    drop_pool(p, b);
}

/* ---- removal while report steps run on other threads ---- */

typedef struct slow {
    pthread_mutex_t mu;
    int in_report, reports, detached;
} slow;

static int slow_event(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)ctx;
    (void)pool;
    (void)ev;
    (void)note;
    return VRAM_LISTENER_REPORT;
}

static void slow_report(void *ctx, vram_pool *pool, const vram_event *ev,
                        const vram_pool_state *st, void *note)
{
    (void)pool;
    (void)ev;
    (void)st;
    (void)note;
    slow *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->in_report++;
    assert_int_equal(s->detached, 0); /* never after the detach */
    pthread_mutex_unlock(&s->mu);
    for (volatile int i = 0; i < 20000; i++)
        ;
    pthread_mutex_lock(&s->mu);
    s->in_report--;
    s->reports++;
    pthread_mutex_unlock(&s->mu);
}

static int slow_detach(void *ctx, vram_pool *pool)
{
    (void)pool;
    slow *s = ctx;
    pthread_mutex_lock(&s->mu);
    assert_int_equal(s->in_report, 0);
    s->detached = 1;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

typedef struct worker {
    vram_pool *pool;
    int iterations;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < w->iterations; i++) {
        void *x;
        if (vram_pool_alloc(w->pool, 256 + (uint64_t)(i % 7) * 4096, 0, VRAM_KIND_OTHER, NULL, &x))
            return (void *)1;
        if (vram_pool_free(w->pool, x, NULL))
            return (void *)1;
    }
    return NULL;
}

static void test_unlisten_waits(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(256 * MiB, &b);
    slow s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = slow_event,
                       .on_report = slow_report, .on_detach = slow_detach, .ctx = &s};
    uint32_t id;
    assert_int_equal(vram_pool_listen(p, &l, &id), 0);
    int iters = getenv("VRAM_TEST_QUICK") ? 200 : 2000;
    worker w = {p, iters};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, work, &w), 0);
    while (1) { /* remove it while reports are running */
        pthread_mutex_lock(&s.mu);
        int r = s.reports;
        pthread_mutex_unlock(&s.mu);
        if (r > 10)
            break;
    }
    assert_int_equal(vram_pool_unlisten(p, id), 0);
    assert_int_equal(s.detached, 1);
    for (int i = 0; i < 3; i++) {
        void *ret;
        assert_int_equal(pthread_join(t[i], &ret), 0);
        assert_null(ret);
    }
    drop_pool(p, b);
}

/* ---- hooks ---- */

static int hook_calls;
static int hook_rc;

static int count_create(void *ctx, vram_pool *pool)
{
    (void)pool;
    hook_calls += ctx == &hook_calls;
    return hook_rc ? vram_set_error(hook_rc, "the hook refused pool \"%s\"", vram_pool_name(pool))
                   : 0;
}

static void test_hooks(void **state)
{
    (void)state;
    vram_pool_hook h = {.on_create = count_create, .ctx = &hook_calls};
    assert_int_equal(vram_pool_hook_add(&h), 0);
    assert_int_equal(vram_pool_hook_add(&h), 0); /* once */
    assert_int_equal(vram_pool_hook_add(&(vram_pool_hook){0}), VRAM_EINVAL);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.name = "hooked";
    vram_pool *p;
    hook_calls = 0;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(hook_calls, 1);
    assert_int_equal(vram_pool_destroy(p), 0);
    o.configured_listeners = 0;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(hook_calls, 1);
    assert_int_equal(vram_pool_destroy(p), 0);
    /* A hook's error fails the creation, with its sentence. */
    o.configured_listeners = 1;
    hook_rc = VRAM_EIO;
    p = (vram_pool *)0x1;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EIO);
    assert_null(p);
    assert_non_null(strstr(vram_last_error(), "the hook refused pool \"hooked\""));
    hook_rc = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_listeners),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_report_state),
        cmocka_unit_test(test_no_changes_from_inside),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_unlisten_waits),
        cmocka_unit_test(test_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
