/* tests/integration/test_pool_edges.c - edges of the pool's contract: many
 * segments at once, options a pool must refuse, backends that fail without a
 * sentence or whose events fail, requests larger than any device, the floor
 * of a replay that refuses requests, free space split across the two vmm
 * reservations, a trace that cannot be finished, and owners added while an
 * allocation maps memory with the lock released. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "replay/replay.h"
#include "vramkit.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* A pool on b; without_decay: no decay thread, whose rounds record events
 * on pending frees at moments of its own (a test counting events needs the
 * pool to act only when called). */
static vram_pool *pool_make(vram_backend *b, vram_policy policy, int without_decay)
{
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = b;
    o.policy = policy;
    if (without_decay)
        o.decay_ms = 0;
    vram_pool *p = NULL;
    int rc = vram_pool_create(&o, &p);
    if (rc)
        fail_msg("pool: %s", vram_last_error());
    return p;
}

static vram_pool *pool_on(vram_backend *b, vram_policy policy)
{
    return pool_make(b, policy, 0);
}

static vram_backend *sim(uint64_t capacity, uint64_t granularity)
{
    vram_backend *b = NULL;
    vram_backend_opts bo = {.capacity = capacity, .granularity = granularity};
    assert_int_equal(vram_backend_create("sim", &bo, &b), 0);
    return b;
}

/* Thousands of blocks live in segments: descriptors must never run out in
 * the middle of taking a block from a segment just grown. */
static void test_segments_many_blocks(void **state)
{
    (void)state;
    vram_backend *b = sim(64ull * 1024 * MiB, 2 * MiB);
    vram_pool *p = pool_on(b, VRAM_POLICY_SEGMENTS);
    enum { N = 5000 };
    void **ptrs = calloc(N, sizeof *ptrs);
    assert_non_null(ptrs);
    for (int i = 0; i < N; i++) {
        uint64_t size = i % 3 == 0 ? 512 * KiB : 1 * MiB;
        int rc = vram_pool_alloc(p, size, 0, VRAM_KIND_ACTIVATIONS, NULL, &ptrs[i]);
        if (rc)
            fail_msg("allocation %d: %s", i, vram_last_error());
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(vram_pool_free(p, ptrs[i], NULL), 0);
    free(ptrs);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static void test_refused_options(void **state)
{
    (void)state;
    vram_backend *b = sim(1024 * MiB, 4 * KiB);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = b;
    o.alignment = 1 * MiB; /* larger than the 4 KiB mapping unit */
    o.granularity = 0;
    vram_pool *p = NULL;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "granularity"));
    o.alignment = 256;
    o.place_candidates = 5000; /* more than the placement looks at */
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "place_candidates 5000"));
    assert_int_equal(vram_backend_destroy(b), 0);

    b = sim(1ull << 59, 1ull << 40); /* beyond what a pool can index */
    vram_pool_opts_init(&o);
    o.backend = b;
    o.granularity = 0;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "capacity"));
    assert_null(p);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* A custom backend that fails without saying why. */
static int mute_alloc(void *self, uint64_t size, vram_stream s, uint64_t *addr)
{
    (void)self, (void)size, (void)s, (void)addr;
    return VRAM_ENOMEM;
}
static int mute_free(void *self, uint64_t addr, uint64_t size, vram_stream s)
{
    (void)self, (void)addr, (void)size, (void)s;
    return 0;
}

static void test_mute_backend_message(void **state)
{
    (void)state;
    static const vram_backend_ops ops = {.name = "mute",
                                         .caps = VRAM_BACKEND_SEGMENTS,
                                         .segment_alloc = mute_alloc,
                                         .segment_free = mute_free};
    vram_backend *b;
    assert_int_equal(vram_backend_create_custom(&ops, NULL, 1024 * MiB, 2 * MiB, &b), 0);
    vram_pool *p = pool_on(b, VRAM_POLICY_SEGMENTS);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam07", 1 * MiB, &cam), 0);
    void *x;
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, cam, VRAM_KIND_FRAMES, NULL, &x), VRAM_EBUDGET);
    assert_int_equal(vram_pool_alloc(p, 4 * KiB, 0, VRAM_KIND_IO, NULL, &x), VRAM_ENOMEM);
    const char *msg = vram_last_error();
    assert_null(strstr(msg, "budget"));
    assert_non_null(strstr(msg, "backend mute: segment_alloc"));
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* A backend with events whose queries fail: freed blocks stay pending. */
typedef struct ev_backend {
    int records, waits;
    vram_stream last_record; /* the stream of the latest record */
} ev_backend;
static int ev_reserve(void *self, uint64_t size, uint64_t *addr)
{
    (void)self;
    static uint64_t next = 0x200000000000ull;
    *addr = next;
    next += size + (2 * MiB);
    return 0;
}
static int ev_ok2(void *self, uint64_t a, uint64_t b)
{
    (void)self, (void)a, (void)b;
    return 0;
}
static int ev_record(void *self, vram_stream s, void **ev)
{
    ev_backend *e = self;
    e->records++;
    e->last_record = s;
    *ev = (void *)(uintptr_t)e->records;
    return 0;
}
static int ev_query(void *self, void *ev)
{
    (void)self, (void)ev;
    return VRAM_EBACKEND;
}
static int ev_wait(void *self, void *ev)
{
    (void)ev;
    ((ev_backend *)self)->waits++;
    return 0;
}
static void ev_release(void *self, void *ev) { (void)self, (void)ev; }

/* While one stream uses the pool its frees are free at once; the second
 * stream's first operation makes the pool wait once for the first's work.
 * From then on a freed block is reusable by its stream at once and by the
 * others after an event; here every query fails, so the block stays pending
 * until a trim waits for it. */
static void test_failed_event_query_keeps_block(void **state)
{
    (void)state;
    static ev_backend eb;
    static const vram_backend_ops ops = {.name = "events",
                                         .caps = VRAM_BACKEND_MAP | VRAM_BACKEND_EVENTS,
                                         .reserve = ev_reserve,
                                         .release = ev_ok2,
                                         .map = ev_ok2,
                                         .unmap = ev_ok2,
                                         .event_record = ev_record,
                                         .event_query = ev_query,
                                         .event_wait = ev_wait,
                                         .event_release = ev_release};
    vram_backend *b;
    assert_int_equal(vram_backend_create_custom(&ops, &eb, 1024 * MiB, 2 * MiB, &b), 0);
    vram_pool *p = pool_make(b, VRAM_POLICY_VMM, 1);
    vram_stream s1 = (vram_stream)0x1, s2 = (vram_stream)0x2;
    void *x, *y, *z, *t;
    vram_pool_stats st;
    /* One stream alone: a free is free at once, with no event. */
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, s1, &x), 0);
    assert_int_equal(vram_pool_free(p, x, s1), 0);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, s1, &z), 0);
    assert_ptr_equal(x, z);
    assert_int_equal(vram_pool_free(p, z, s1), 0);
    assert_int_equal(eb.records, 0);
    assert_int_equal(eb.waits, 0);
    /* s2's first operation joins: one event on s1, waited for at once. */
    assert_int_equal(vram_pool_alloc(p, 4 * KiB, 0, VRAM_KIND_IO, s2, &t), 0);
    assert_int_equal(eb.records, 1);
    assert_ptr_equal(eb.last_record, s1);
    assert_int_equal(eb.waits, 1);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.event_waits_total, 1);
    assert_int_equal(st.pending_bytes, 0);
    /* Shared from now on: t's free is pending; a trim records its event and
     * waits for it (the query is never asked). */
    assert_int_equal(vram_pool_free(p, t, s2), 0);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 4 * KiB);
    assert_int_equal(vram_pool_trim(p, NULL), 0);
    assert_int_equal(eb.records, 2);
    assert_ptr_equal(eb.last_record, s2);
    assert_int_equal(eb.waits, 2);
    int records0 = eb.records, waits0 = eb.waits;
    /* The freeing stream reuses its block at once, with no event. */
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, s1, &x), 0);
    assert_int_equal(vram_pool_free(p, x, s1), 0);
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, s1, &z), 0);
    assert_ptr_equal(x, z);
    assert_int_equal(eb.records, records0);
    assert_int_equal(vram_pool_free(p, z, s1), 0);
    /* Another stream needing new memory first records an event on s1 and
     * queries it; the query fails, so x stays pending. */
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, s2, &y), 0);
    assert_int_equal(eb.records, records0 + 1);
    assert_ptr_equal(eb.last_record, s1);
    assert_ptr_not_equal(x, y); /* the query failed: x may still be in use */
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(vram_pool_free(p, y, s2), 0);
    assert_int_equal(vram_pool_trim(p, NULL), 0); /* waits for both */
    assert_int_equal(eb.records, records0 + 2);
    assert_int_equal(eb.waits, waits0 + 2);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* A request larger than any device is refused as an operation on its
 * stream (completing the stream's earlier frees); size 0 is invalid and is
 * not counted at all. */
static void test_oversize_and_zero(void **state)
{
    (void)state;
    vram_backend *b = sim(64 * MiB, 2 * MiB);
    vram_pool *p = pool_on(b, VRAM_POLICY_VMM);
    vram_stream s1 = (vram_stream)0x1;
    void *x;
    assert_int_equal(vram_pool_alloc(p, 4 * KiB, 0, VRAM_KIND_IO, s1, &x), 0);
    assert_int_equal(vram_pool_free(p, x, s1), 0);
    assert_int_equal(vram_pool_alloc(p, (1ull << 56) + 1, 0, VRAM_KIND_IO, s1, &x), VRAM_ENOMEM);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.failed_allocs_total, 1);
    assert_int_equal(vram_pool_alloc(p, 0, 0, VRAM_KIND_IO, s1, &x), VRAM_EINVAL);
    assert_int_equal(vram_pool_alloc(p, 16, 77, VRAM_KIND_IO, s1, &x), VRAM_EINVAL);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.failed_allocs_total, 1);
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(p, 0, &u), 0);
    assert_int_equal(u.failed_allocs_total, 1);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* The floor of a replay is the trace's: refused requests do not inflate it. */
static void test_floor_with_refusals(void **state)
{
    (void)state;
    static const char csv[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                              "0,10:00:00.000001,allocate,0x1000,33554432,0\n"
                              "0,10:00:00.000002,allocate,0x9000000,33554432,0\n"
                              "0,10:00:00.000003,free,0x1000,33554432,0\n"
                              "0,10:00:00.000004,free,0x9000000,33554432,0\n";
    vram_trace *t;
    assert_int_equal(vram_trace_parse(csv, sizeof csv - 1, "floor.csv", &t), 0);
    vram_replay_opts o;
    vram_replay_opts_init(&o);
    o.capacity = 40 * MiB; /* the second block does not fit */
    o.timing_runs = 1;
    o.skip_malloc = 1;
    vram_replay_result r;
    assert_int_equal(vram_replay_run(t, &o, &r), 0);
    assert_int_equal(r.failed_allocs, 1);
    assert_int_equal(r.first_failure_line, 3);
    assert_true(r.floor_ratio > 0.999 && r.floor_ratio < 1.001);
    vram_trace_free(t);
}

/* Free granules of the two vmm reservations are never one free run. */
static void test_largest_free_per_region(void **state)
{
    (void)state;
    vram_backend *b = sim(64 * MiB, 2 * MiB);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = b;
    o.policy = VRAM_POLICY_VMM;
    o.retain_min = 1024 * MiB;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    void *small[64];
    int n = 0;
    while (n < 64 && vram_pool_alloc(p, 1 * MiB, 0, VRAM_KIND_IO, NULL, &small[n]) == 0)
        n++;
    assert_true(n >= 60);
    for (int i = 0; i < n; i++)
        assert_int_equal(vram_pool_free(p, small[i], NULL), 0);
    void *big;
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, NULL, &big), 0);
    assert_int_equal(vram_pool_free(p, big, NULL), 0);
    void *tiny;
    assert_int_equal(vram_pool_alloc(p, 256, 0, VRAM_KIND_IO, NULL, &tiny), 0);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_true(st.free_bytes > 0);
    assert_true(st.largest_free_bytes < st.free_bytes);
    assert_true(st.fragmentation_ratio > 0.0);
    assert_int_equal(vram_pool_free(p, tiny, NULL), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* Owners added while an allocation maps memory (the pool's lock is released
 * then, so another thread may add them) move the owner table: the
 * allocation must count against its owner in the table as it is after. */
typedef struct adding_backend {
    vram_pool *pool;
    int added;
} adding_backend;
static int adding_map(void *self, uint64_t addr, uint64_t size)
{
    (void)addr, (void)size;
    adding_backend *a = self;
    for (int i = 0; a->pool && i < 64; i++) {
        char name[32];
        snprintf(name, sizeof name, "late%d", a->added++);
        if (vram_owner_create(a->pool, name, 0, NULL))
            return VRAM_EHOSTMEM;
    }
    return 0;
}

static void test_owners_added_while_mapping(void **state)
{
    (void)state;
    adding_backend ab = {0};
    static const vram_backend_ops ops = {.name = "adding",
                                         .caps = VRAM_BACKEND_MAP,
                                         .reserve = ev_reserve,
                                         .release = ev_ok2,
                                         .map = adding_map,
                                         .unmap = ev_ok2};
    vram_backend *b;
    assert_int_equal(vram_backend_create_custom(&ops, &ab, 1024 * MiB, 2 * MiB, &b), 0);
    vram_pool *p = pool_on(b, VRAM_POLICY_VMM);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam", 0, &cam), 0);
    ab.pool = p;
    void *x;
    assert_int_equal(vram_pool_alloc(p, 3 * MiB, cam, VRAM_KIND_FRAMES, NULL, &x), 0);
    assert_true(ab.added >= 64);
    vram_usage_stats u;
    assert_int_equal(vram_owner_stats_get(p, cam, &u), 0);
    assert_int_equal(u.live_bytes, 3 * MiB);
    assert_int_equal(u.live_blocks, 1);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    assert_int_equal(vram_owner_stats_get(p, cam, &u), 0);
    assert_int_equal(u.live_bytes, 0);
    assert_int_equal(u.live_blocks, 0);
    ab.pool = NULL;
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* A trace that cannot be finished makes destroy say so. */
static void test_destroy_reports_trace(void **state)
{
    (void)state;
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(vram_pool_trace_start(p, "/dev/full"), 0);
    void *x;
    assert_int_equal(vram_pool_alloc(p, 4096, 0, VRAM_KIND_IO, NULL, &x), 0);
    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    assert_int_equal(vram_pool_destroy(p), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "trace"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments_many_blocks),
        cmocka_unit_test(test_refused_options),
        cmocka_unit_test(test_mute_backend_message),
        cmocka_unit_test(test_failed_event_query_keeps_block),
        cmocka_unit_test(test_oversize_and_zero),
        cmocka_unit_test(test_floor_with_refusals),
        cmocka_unit_test(test_largest_free_per_region),
        cmocka_unit_test(test_destroy_reports_trace),
        cmocka_unit_test(test_owners_added_while_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
