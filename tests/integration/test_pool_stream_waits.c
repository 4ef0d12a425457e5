/* tests/integration/test_pool_stream_waits.c - reuse across streams with a
 * wait on the device, through the public API only: with a backend whose
 * events a stream can wait for without the host (stream_wait_event, as
 * cuStreamWaitEvent) and a pool whose stream_waits is 1 (the default,
 * VRAM_STREAM_REUSE=wait), an allocation of one stream that nothing the pool
 * holds serves without new memory (its own frees, the shared free index,
 * one reclaim that records and queries the events) takes another stream's
 * pending free, has the taking stream wait on the device for the event
 * covering it and counts that in stream_waits_total, before it takes new
 * memory or, at the limit, waits on the host.
 *
 * The backend is the fake of events/fake_events.h with its stream_wait_event
 * switched on (it keeps which stream waited for which event and can fail on
 * demand); events/world.h makes the pool on it and brings it into shared
 * mode (go_shared) first. Every scenario runs for both policies: the wait
 * instead of new memory (no map or segment, no event_wait, one
 * stream_wait_event of the taker for the event recorded on the freer), the
 * rest of a larger pending block left pending on its stream, streams asked
 * in the order they first used the pool, the event recorded for the wait
 * when the reclaim's record failed, a completed event preferred (no stream
 * wait), a stream wait that fails (the block stays pending, new memory, a
 * warning), at the pool's limit a stream wait where the host used to wait
 * (and the host's wait when the stream wait fails), and the old behaviour
 * with stream_waits 0, a table that predates the member or a NULL member;
 * vmm only, a huge block's segment. Also: the counter in the printed
 * statistics, vram_pool_opts_init's default and VRAM_STREAM_REUSE, and an
 * opts record older than stream_waits taking the default. VRAM_TEST_VERBOSE=1 prints the
 * library's log lines. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "vramkit.h"
#include "world.h"

/* A world whose fake has stream_wait_event (the pool's stream_waits is 1). */
static void open_waiting(world *w, vram_policy policy, uint64_t capacity)
{
    opt_stream_wait_event = 1;
    world_open(w, policy, capacity, 1024 * MiB);
    opt_stream_wait_event = 0;
}

/* The pool's stream_waits setting, from its snapshot. */
static int setting_stream_waits(vram_pool *p)
{
    vram_buffer b = {0};
    assert_int_equal(vram_pool_snapshot(p, vram_write_buffer, &b, 0), 0);
    cJSON *root = cJSON_Parse(b.data);
    vram_buffer_free(&b);
    assert_non_null(root);
    const cJSON *settings = cJSON_GetObjectItemCaseSensitive(root, "settings");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(settings, "stream_waits");
    if (!cJSON_IsNumber(v))
        fail_msg("the snapshot's settings have no stream_waits");
    int r = (int)v->valuedouble;
    cJSON_Delete(root);
    return r;
}

/* The number under `key` anywhere in JSON `o`, or -1. */
static double json_find(const cJSON *o, const char *key)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, o)
    {
        if (c->string && !strcmp(c->string, key) && cJSON_IsNumber(c))
            return c->valuedouble;
        double r = json_find(c, key);
        if (r >= 0)
            return r;
    }
    return -1;
}

/* The log since fk_log_clear was `before`, then only Q (the reclaim asks
 * again while frees it waits for could serve the request), then `after`.
 * How many queries fit in the reclaim's time depends on the machine's load:
 * a log that filled up with them is checked up to where it stops (the
 * callers check the calls after it by their counters). */
static void check_log_requeried(const world *w, const char *before, const char *after)
{
    const char *l = w->f.log;
    size_t nb = strlen(before), na = strlen(after), n = strlen(l);
    if (n + 1 == sizeof w->f.log && !strncmp(l, before, nb) && strspn(l + nb, "Q") == n - nb)
        return;
    if (n < nb + na || strncmp(l, before, nb) || strcmp(l + n - na, after) ||
        strspn(l + nb, "Q") != n - nb - na)
        fail_msg("backend calls \"%s\", expected %s, then queries, then %s", l, before, after);
}

/* The wait instead of new memory: stream 2 needs 2 MiB, stream 1's free of
 * 2 MiB is pending (its event, recorded by the reclaim, still pending):
 * stream 2 waits on the device for that event and gets the block, with no
 * map or segment, no wait on the host and no new event. The event stays
 * until it completes (a query or destroy releases it). */
static void test_wait_instead_of_memory(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 2);
    assert_int_equal(setting_stream_waits(w.p), 1);
    assert_int_equal(w.st0.stream_waits_total, 0);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    vram_pool_stats st0 = stats(&w);
    unsigned acq = acquiring(&w);
    uint64_t calls = backend_calls(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(y, x);
    assert_string_equal(w.f.log, "RQG"); /* the reclaim's record and query, the wait */
    assert_int_equal(acquiring(&w), acq);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_wait, 0);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.n_stream_wait, 1);
    assert_int_equal(w.f.stream_waits_on[2], 1);
    assert_int_equal(EV(&w, 0)->stream, 1);
    assert_int_equal(EV(&w, 0)->stream_waited, 1);
    assert_int_equal(w.f.waited_upto[2][1], EV(&w, 0)->t_record);
    assert_int_equal(EV(&w, 0)->released, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 1);
    assert_int_equal(st.event_waits_total, st0.event_waits_total);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.live_blocks, 1);
    /* The pool's calls: the record and the stream wait. */
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 2);
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total);
    /* The printed statistics carry the counter. */
    vram_buffer sb = {0};
    assert_int_equal(vram_pool_stats_print(w.p, vram_write_buffer, &sb, VRAM_PRINT_JSON), 0);
    cJSON *j = cJSON_Parse(sb.data);
    vram_buffer_free(&sb);
    assert_non_null(j);
    if (json_find(j, "stream_waits_total") != (double)st.stream_waits_total)
        fail_msg("the statistics' JSON has stream_waits_total %g, the record %" PRIu64,
                 json_find(j, "stream_waits_total"), st.stream_waits_total);
    cJSON_Delete(j);
    /* Stream 2's own free comes back to it at once, with nothing new. */
    xfree(&w, y, 2);
    fk_log_clear(&w.f);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_string_equal(w.f.log, "");
    assert_int_equal(w.f.n_stream_wait, 1);
    xfree(&w, z, 2);
    world_close(&w); /* EV 0 released once */
}

/* A larger pending block: stream 2 takes the front of stream 1's 6 MiB free
 * with a wait; the rest (at least a granule, the pool's 256-byte unit)
 * stays pending on stream 1, which takes from it at once with no backend
 * call; stream 2 takes more of it with a second wait for the same event (no
 * new record), and stream 1 the last of it, at once. */
static void test_wait_rest_stays_pending(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 6 * MiB, 1);
    uintptr_t xa = (uintptr_t)x;
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    unsigned acq = acquiring(&w);
    vram_pool_stats st0 = stats(&w);
    void *y = xalloc(&w, 1536 * KiB, 2);
    assert_ptr_equal(y, x);
    assert_int_equal(w.f.n_stream_wait, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 6 * MiB - 1536 * KiB);
    assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 1);
    /* Stream 1: the rest is its own, at once. */
    fk_log_clear(&w.f);
    void *r = xalloc(&w, 2 * MiB, 1);
    assert_int_equal((uintptr_t)r, xa + 1536 * KiB);
    assert_string_equal(w.f.log, "");
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 6 * MiB - 1536 * KiB - 2 * MiB);
    /* Stream 2 again: the event covers the rest already; one more wait. */
    fk_log_clear(&w.f);
    void *y2 = xalloc(&w, 1280 * KiB, 2);
    assert_int_equal((uintptr_t)y2, xa + 1536 * KiB + 2 * MiB);
    assert_string_equal(w.f.log, "QG");
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.n_stream_wait, 2);
    assert_int_equal(EV(&w, 0)->stream_waited, 2);
    assert_int_equal(acquiring(&w), acq);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 1280 * KiB);
    assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 2);
    assert_int_equal(st.event_waits_total, st0.event_waits_total);
    fk_log_clear(&w.f);
    void *r2 = xalloc(&w, 1280 * KiB, 1);
    assert_int_equal((uintptr_t)r2, xa + 1536 * KiB + 2 * MiB + 1280 * KiB);
    assert_string_equal(w.f.log, "");
    assert_int_equal(stats(&w).pending_bytes, 0);
    xfree(&w, y, 2);
    xfree(&w, r, 1);
    xfree(&w, y2, 2);
    xfree(&w, r2, 1);
    world_close(&w);
}

/* Two streams with pending frees (1 and 3; the pool met them in the order
 * 1, 3, 2): stream 2 takes from stream 1's first, then from stream 3's,
 * each with a wait for that stream's event. */
static void test_wait_stream_order(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 3, 2);
    void *a = xalloc(&w, 2 * MiB, 3);
    void *b = xalloc(&w, 2 * MiB, 1);
    xfree(&w, a, 3); /* freed first, but stream 3 came after stream 1 */
    xfree(&w, b, 1);
    w.f.query_mode = Q_PENDING;
    unsigned acq = acquiring(&w);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(y, b);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.records_on[3], 1);
    assert_int_equal(w.f.n_stream_wait, 1);
    assert_int_not_equal(w.f.waited_upto[2][1], 0);
    assert_int_equal(w.f.waited_upto[2][3], 0);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, a);
    assert_int_equal(w.f.n_record, 2); /* no new frees: no new event */
    assert_int_equal(w.f.n_stream_wait, 2);
    assert_int_not_equal(w.f.waited_upto[2][3], 0);
    for (size_t k = 0; k < 2; k++)
        assert_int_equal(w.f.waited_upto[2][EV(&w, k)->stream], EV(&w, k)->t_record);
    assert_int_equal(acquiring(&w), acq);
    assert_int_equal(w.f.n_wait, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.stream_waits_total - w.st0.stream_waits_total, 2);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* The reclaim's record fails: the block's epoch has no event, so one is
 * recorded for the wait. When that record fails too, no wait: new memory,
 * the block stays pending. */
static void test_wait_records_epoch(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 2);
    const char *grow = w.policy == VRAM_POLICY_VMM ? "M" : "A";
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    /* Two records fail: the reclaim's and the wait's. */
    w.f.record_fail = 2;
    unsigned acq = acquiring(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    char want[8];
    snprintf(want, sizeof want, "rr%s", grow);
    assert_string_equal(w.f.log, want);
    assert_int_equal(acquiring(&w), acq + 1);
    assert_int_equal(w.f.n_stream_wait, 0);
    assert_int_equal(stats(&w).pending_bytes, 2 * MiB);
    /* One fails: the wait's record succeeds. */
    w.f.record_fail = 1;
    fk_log_clear(&w.f);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_string_equal(w.f.log, "rRG");
    assert_int_equal(w.f.n_record_failed, 3);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.n_stream_wait, 1);
    assert_int_equal(w.f.waited_upto[2][1], EV(&w, 0)->t_record);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.stream_waits_total - w.st0.stream_waits_total, 1);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(acquiring(&w), acq + 1);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* A completed event is preferred: the reclaim finds stream 1's event
 * complete and releases the block to the shared index; stream 2 takes it
 * with no stream wait. */
static void test_completed_preferred(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_COMPLETE;
    unsigned acq = acquiring(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(y, x);
    assert_string_equal(w.f.log, "RQX");
    assert_int_equal(acquiring(&w), acq);
    assert_int_equal(w.f.n_stream_wait, 0);
    assert_int_equal(EV(&w, 0)->released, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.stream_waits_total, w.st0.stream_waits_total);
    assert_int_equal(st.event_waits_total, w.st0.event_waits_total);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    world_close(&w);
}

/* A stream wait that fails: the block stays pending on stream 1, the pool
 * takes new memory, the failure is counted and logged (a warning naming
 * both streams and the call) and the allocation succeeds. The next
 * allocation with the wait working takes the block. */
static void test_stream_wait_fails(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 64 * MiB);
    GO_SHARED(&w, 1, 2);
    const char *grow = w.policy == VRAM_POLICY_VMM ? "M" : "A";
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    w.f.stream_wait_fail = 1;
    vram_pool_stats st0 = stats(&w);
    unsigned acq = acquiring(&w), logged = log_n;
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    char want[8];
    snprintf(want, sizeof want, "RQg%s", grow);
    assert_string_equal(w.f.log, want);
    assert_int_equal(acquiring(&w), acq + 1);
    assert_int_equal(w.f.n_stream_wait, 1);
    assert_int_equal(w.f.n_stream_wait_failed, 1);
    assert_int_equal(w.f.waited_upto[2][1], 0);
    assert_int_equal(w.f.n_wait, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.stream_waits_total, st0.stream_waits_total);
    assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 1);
    /* record, stream wait, then the map or the segment */
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 3);
    /* The allocation succeeded: the failure is in the log, not in
     * vram_last_error(). */
    assert_string_equal(vram_last_error(), "");
    const char *l = log_find("cannot wait on the device");
    if (log_n == logged || !l || !strstr(l, "stream_wait_event"))
        fail_msg("a failed stream wait logged no warning naming stream_wait_event (latest: "
                 "\"%s\")",
                 l ? l : "");
    /* The wait works again: stream 2 gets the block, waiting for the same
     * event. */
    fk_log_clear(&w.f);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_string_equal(w.f.log, "QG");
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.waited_upto[2][1], EV(&w, 0)->t_record);
    st = stats(&w);
    assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 1);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* At the pool's limit (the backend's capacity, 4 MiB): where the pool used
 * to wait on the host for stream 1's event (test_out_of_memory_waits in
 * test_pool_events.c), stream 2 now waits on the device. */
static void test_wait_at_limit(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 4 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 4 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    vram_pool_stats st0 = stats(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(y, x);
    assert_string_equal(w.f.log, "RQG");
    assert_int_equal(w.f.n_wait, 0);
    assert_int_equal(w.f.n_enomem, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total, st0.event_waits_total);
    assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 1);
    assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(w.f.held, 4 * MiB);
    xfree(&w, y, 2);
    world_close(&w);
}

/* At the limit with the stream wait failing: as before the feature, the
 * host waits for the event and the block is then free for stream 2. */
static void test_wait_fails_at_limit(void **state)
{
    world w;
    open_waiting(&w, POLICY(state), 4 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 4 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    w.f.stream_wait_fail = 1;
    vram_pool_stats st0 = stats(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(y, x);
    assert_string_equal(w.f.log, "RQgWX");
    assert_int_equal(w.f.n_wait, 1);
    assert_true(EV(&w, 0)->reported);
    assert_int_equal(EV(&w, 0)->released, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.stream_waits_total, st0.stream_waits_total);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    world_close(&w);
}

/* vmm huge blocks (a segment each): a pending huge segment of stream 1 goes
 * to stream 2 with a wait, no new segment. */
static void test_wait_huge(void **state)
{
    (void)state;
    world w;
    opt_huge_size = 8 * MiB;
    open_waiting(&w, VRAM_POLICY_VMM, 64 * MiB);
    opt_huge_size = 0;
    GO_SHARED(&w, 1, 2);
    void *h = xalloc(&w, 8 * MiB, 1);
    xfree(&w, h, 1);
    w.f.query_mode = Q_PENDING;
    unsigned segs = w.f.n_seg_alloc, maps = w.f.n_map;
    void *y = xalloc(&w, 8 * MiB, 2);
    assert_ptr_equal(y, h);
    assert_int_equal(w.f.n_seg_alloc, segs);
    assert_int_equal(w.f.n_map, maps);
    assert_int_equal(w.f.n_stream_wait, 1);
    assert_int_equal(w.f.waited_upto[2][1], EV(&w, 0)->t_record);
    assert_int_equal(stats(&w).stream_waits_total - w.st0.stream_waits_total, 1);
    xfree(&w, y, 2);
    world_close(&w);
}

/* The behaviour before the feature: stream 2 gets new memory while stream
 * 1's event is pending, and stream 1's block once the event completed; no
 * stream wait. */
typedef enum { NO_WAIT_COMPLETED, NO_WAIT_OLD_TABLE, NO_WAIT_NULL } no_wait_how;
typedef struct no_wait_case {
    vram_policy policy;
    no_wait_how how;
} no_wait_case;
static no_wait_case NW_COMPLETED_VMM = {VRAM_POLICY_VMM, NO_WAIT_COMPLETED};
static no_wait_case NW_COMPLETED_SEG = {VRAM_POLICY_SEGMENTS, NO_WAIT_COMPLETED};
static no_wait_case NW_OLD_TABLE_VMM = {VRAM_POLICY_VMM, NO_WAIT_OLD_TABLE};
static no_wait_case NW_OLD_TABLE_SEG = {VRAM_POLICY_SEGMENTS, NO_WAIT_OLD_TABLE};
static no_wait_case NW_NULL_VMM = {VRAM_POLICY_VMM, NO_WAIT_NULL};
static no_wait_case NW_NULL_SEG = {VRAM_POLICY_SEGMENTS, NO_WAIT_NULL};

static void test_no_stream_waits(void **state)
{
    const no_wait_case *c = *state;
    world w;
    /* stream_waits 0 (VRAM_STREAM_REUSE=completed) with the member there; a
     * table whose size stops before the member (set all the same, beyond
     * what the library may read); or the member NULL. */
    opt_stream_wait_event = c->how != NO_WAIT_NULL;
    opt_reuse_completed = c->how == NO_WAIT_COMPLETED;
    opt_ops_size = c->how == NO_WAIT_OLD_TABLE ? offsetof(vram_backend_ops, stream_wait_event) : 0;
    world_open(&w, c->policy, 64 * MiB, 1024 * MiB);
    opt_stream_wait_event = opt_reuse_completed = 0;
    opt_ops_size = 0;
    assert_int_equal(setting_stream_waits(w.p), 0);
    GO_SHARED(&w, 1, 2);
    const char *grow = w.policy == VRAM_POLICY_VMM ? "M" : "A";
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    unsigned acq = acquiring(&w);
    fk_log_clear(&w.f);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    check_log_requeried(&w, "RQ", grow);
    assert_int_equal(acquiring(&w), acq + 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.event_waits_total, w.st0.event_waits_total);
    /* Complete: stream 2 takes x with no backend call. */
    w.f.query_mode = Q_COMPLETE;
    uint64_t calls = backend_calls(&w);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_stream_wait, 0);
    st = stats(&w);
    assert_int_equal(st.stream_waits_total, 0);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* An opts record of the version before stream_waits (its size stops
 * there): the pool takes the default, stream waits on, even with the field
 * past that size saying 0. */
static void test_opts_before_stream_waits(void **state)
{
    (void)state;
    opt_stream_wait_event = 1;
    world w;
    world_open_backend(&w, VRAM_POLICY_VMM, 64 * MiB);
    opt_stream_wait_event = 0;
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.size = offsetof(vram_pool_opts, stream_waits);
    o.name = "events";
    o.backend = w.b;
    o.policy = VRAM_POLICY_VMM;
    o.limit = w.f.capacity;
    o.decay_ms = 0;
    o.stream_waits = 0; /* past the size: not read */
    if (vram_pool_create(&o, &w.p))
        fail_msg("pool: %s", vram_last_error());
    assert_int_equal(setting_stream_waits(w.p), 1);
    world_close(&w);
}

/* vram_pool_opts_init: stream_waits 1 by default and with
 * VRAM_STREAM_REUSE=wait, 0 with =completed (from the environment or set). */
static void test_opts_stream_reuse(void **state)
{
    (void)state;
    assert_int_equal(opts_with_env("VRAM_STREAM_REUSE", NULL).stream_waits, 1);
    assert_int_equal(opts_with_env("VRAM_STREAM_REUSE", "completed").stream_waits, 0);
    assert_int_equal(opts_with_env("VRAM_STREAM_REUSE", "wait").stream_waits, 1);
    unsetenv("VRAM_STREAM_REUSE");
    assert_int_equal(opts_with_setting("stream_reuse", "completed").stream_waits, 0);
    assert_int_not_equal(vram_config_set("stream_reuse", "sometimes"), 0);
    assert_int_equal(opts_with_setting("stream_reuse", NULL).stream_waits, 1);
}

int main(void)
{
#define BOTH(fn)                                                                                   \
    cmocka_unit_test_prestate(fn, &POL_VMM), cmocka_unit_test_prestate(fn, &POL_SEG)
    const struct CMUnitTest tests[] = {
        BOTH(test_wait_instead_of_memory),
        BOTH(test_wait_rest_stays_pending),
        BOTH(test_wait_stream_order),
        BOTH(test_wait_records_epoch),
        BOTH(test_completed_preferred),
        BOTH(test_stream_wait_fails),
        BOTH(test_wait_at_limit),
        BOTH(test_wait_fails_at_limit),
        cmocka_unit_test(test_wait_huge),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_COMPLETED_VMM),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_COMPLETED_SEG),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_OLD_TABLE_VMM),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_OLD_TABLE_SEG),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_NULL_VMM),
        cmocka_unit_test_prestate(test_no_stream_waits, &NW_NULL_SEG),
        cmocka_unit_test(test_opts_before_stream_waits),
        cmocka_unit_test(test_opts_stream_reuse),
    };
#undef BOTH
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
