/* tests/integration/test_pool_events_solo.c - the single-stream rule on a
 * backend with real events (VRAM_BACKEND_EVENTS), through the public API
 * only: the pool alone with one stream, the join of a second, and giving
 * memory back while alone.
 *
 * The backend is the fake of events/fake_events.h; events/world.h makes the
 * pool on it. While one stream alone has used the pool its frees are free at
 * once (no event, nothing pending); the first operation of a second stream
 * records one event on the first and waits for it (a join), or, if that
 * record or wait fails, is refused with VRAM_EBACKEND and leaves the pool
 * alone with its stream. What the lone stream freed may still be used by
 * work queued on it, so it must not go back to the backend before that work
 * is done: in single-stream mode an event may be recorded only on the lone
 * stream, only with a free since the previous record (or after a wait that
 * failed): marks, recorded as the pool maps, and settles, waited for at
 * once; and every unmap / segment_free made alone must give back memory
 * whose latest free preceded an event reported complete. The fake checks
 * all of it on every operation the test makes.
 *
 * The scenarios: a single stream on a pool at its limit, the join at an
 * allocation and at a free, a join refused (its record or its wait
 * failing), giving memory back alone (a free never gives anything back; vmm
 * only: a settle before a mapping past the pool's limit unmaps the oldest
 * free memory, just enough of it, and none for a later give-back with no
 * free in between; a completed mark sparing the wait; before a trim, the
 * memory-short retry, destroy and, vmm only, huge segments; a settle whose
 * record or wait fails: the trim fails with the sentence and gives back only
 * what a completed mark covers, an allocation that needs room under the
 * limit is refused with it, destroy keeps the memory), a mapping refused
 * half way rolled back without unmapping a neighbour's granule; most for
 * both policies. VRAM_TEST_VERBOSE=1 prints the library's log lines. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vramkit.h"
#include "world.h"

/* ==== the single-stream rule ================================================= */

/* One stream alone: a free is free at once, released to the shared free
 * index with no event, no query and no wait, and gives nothing back. With
 * the pool at its limit (the backend's capacity here) the stream gets what
 * it freed back with no backend call, adjacent frees coalesce (vmm) or go
 * back to the backend to make room under the limit for a larger segment
 * (segments: after one settle, an event on the stream waited for at once, as
 * work queued on it may still use them; the backend is not asked before),
 * and a trim settles once and gives everything back. */
static void test_single_stream_free_at_once(void **state)
{
    world w;
    world_open(&w, POLICY(state), 8 * MiB, 1024 * MiB);
    void *a[4];
    for (int i = 0; i < 4; i++)
        a[i] = xalloc(&w, 2 * MiB, 1);
    assert_int_equal(w.f.held, 8 * MiB); /* full */
    uint64_t calls = backend_calls(&w);
    for (int r = 0; r < 20; r++) {
        int i = (r * 3) % 4;
        xfree(&w, a[i], 1);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.pending_bytes, 0);
        assert_int_equal(st.free_bytes, 2 * MiB);
        assert_int_equal(st.live_blocks, 3);
        void *y = xalloc(&w, 2 * MiB, 1);
        assert_ptr_equal(y, a[i]);
    }
    assert_int_equal(backend_calls(&w), calls);
    /* Two adjacent frees make room for a request of their sum. */
    xfree(&w, a[1], 1);
    xfree(&w, a[2], 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.free_bytes, 4 * MiB);
    assert_int_equal(w.f.n_ev, 0);
    fk_log_clear(&w.f);
    void *big = xalloc(&w, 4 * MiB, 1);
    unsigned settles = 0;
    if (w.policy == VRAM_POLICY_VMM) {
        assert_ptr_equal(big, a[1]);
        assert_int_equal(backend_calls(&w), calls);
        assert_string_equal(w.f.log, "");
    } else {
        /* Past the limit: a settle, the two free segments back, granted. */
        assert_string_equal(w.f.log, "RWXFFA");
        settles = 1;
    }
    assert_int_equal(w.f.held, 8 * MiB);
    assert_int_equal(w.f.n_enomem, 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.failed_allocs_total, 0);
    assert_int_equal(w.f.n_settles, settles);
    xfree(&w, big, 1);
    xfree(&w, a[0], 1);
    xfree(&w, a[3], 1);
    uint64_t released = 0;
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, w.policy == VRAM_POLICY_VMM ? "RWXUUUU" : "RWXFFF");
    settles++;
    assert_int_equal(released, 8 * MiB);
    assert_int_equal(w.f.held, 0);
    assert_int_equal(w.f.n_ev, settles);
    assert_int_equal(w.f.n_settles, settles);
    assert_int_equal(w.f.n_query, 0);
    assert_int_equal(w.f.n_wait, settles);
    assert_int_equal(stats(&w).event_waits_total, settles);
    assert_false(w.f.shared);
    world_close(&w);
}

/* A second stream's first operation (here an allocation) joins: the pool
 * records one event on the first stream and waits for it at once (counted
 * in event_waits_total, the record in backend_calls_total). What the first
 * stream freed before goes to the newcomer at once: its work was waited
 * for. What it frees after stays pending and goes to the newcomer only once
 * an event recorded after the free completes. A third stream joins without
 * an event. */
static void test_join_waits_for_first(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    void *late = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    assert_int_equal(w.f.n_ev, 0);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.pending_bytes, 0);
    uint64_t calls = backend_calls(&w);
    w.f.query_mode = Q_PENDING;
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(y, x); /* freed before the join, which waited for it */
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_joins, 1);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_true(w.f.ev[0].join);
    assert_int_equal(w.f.n_wait, 1);
    assert_int_equal(w.f.ev[0].waited, 1);
    assert_true(w.f.ev[0].reported);
    assert_int_equal(w.f.ev[0].released, 1);
    assert_int_equal(w.f.n_query, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1); /* the record */
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total);
    assert_int_equal(st.pending_bytes, 0);
    /* Shared from now on: stream 1's free stays pending, ... */
    xfree(&w, late, 1);
    assert_int_equal(stats(&w).pending_bytes, 2 * MiB);
    /* ... stream 2 does not get it while the event after it is pending, ... */
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(z, 2 * MiB, late, 2 * MiB));
    assert_int_equal(w.f.records_on[1], 2);
    assert_false(w.f.ev[1].join);
    assert_int_equal(w.f.n_wait, 1); /* memory is not short: no wait */
    /* ... a third stream joins with no event and no wait, ... */
    void *t = xalloc(&w, 256 * KiB, 3);
    assert_int_equal(w.f.n_record, 2);
    assert_int_equal(w.f.n_wait, 1);
    /* ... and once the event completes stream 2 gets it. */
    fk_complete(&w.f, &w.f.ev[1]);
    void *u = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(u, late);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(w.f.n_joins, 1);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    xfree(&w, t, 3);
    xfree(&w, u, 2);
    world_close(&w);
}

/* The join also comes with a free: a block of stream 1 freed on stream 2
 * (its first operation) makes the pool wait for stream 1 first; the block
 * is then a pending free of stream 2, which stream 1 does not get before an
 * event but stream 2 gets back at once. */
static void test_join_at_free(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1);
    void *b = xalloc(&w, 2 * MiB, 1);
    xfree(&w, a, 1); /* alone: free at once */
    xfree(&w, b, 2); /* joins */
    assert_int_equal(w.f.n_joins, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.n_wait, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.event_waits_total, 1);
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w.p, b, &bi), VRAM_ENOTALLOC);
    w.f.query_mode = Q_PENDING;
    void *c = xalloc(&w, 2 * MiB, 1); /* a: free since before the join */
    assert_ptr_equal(c, a);
    void *d = xalloc(&w, 2 * MiB, 1); /* new memory, not b */
    assert_false(overlaps(d, 2 * MiB, b, 2 * MiB));
    assert_int_equal(w.f.records_on[2], 1);
    void *e = xalloc(&w, 2 * MiB, 2); /* its own free, at once */
    assert_ptr_equal(e, b);
    assert_int_equal(stats(&w).pending_bytes, 0);
    assert_int_equal(w.f.n_wait, 1);
    xfree(&w, c, 1);
    xfree(&w, d, 1);
    xfree(&w, e, 2);
    world_close(&w);
}

/* A join refused: the record of the join's event fails, or its wait does.
 * The newcomer's allocation then fails with VRAM_EBACKEND and a sentence
 * that says why, its free of a live block likewise (the block stays live),
 * and the pool stays as it was, with a single stream: nothing taken,
 * nothing pending, no event left unreleased. Once the backend works again
 * the newcomer's next operation joins. */
typedef struct join_case {
    vram_policy policy;
    int wait_fails;
} join_case;
static join_case JOIN_RECORD_VMM = {VRAM_POLICY_VMM, 0};
static join_case JOIN_RECORD_SEG = {VRAM_POLICY_SEGMENTS, 0};
static join_case JOIN_WAIT_VMM = {VRAM_POLICY_VMM, 1};
static join_case JOIN_WAIT_SEG = {VRAM_POLICY_SEGMENTS, 1};

static void check_refused_join(world *w, const vram_pool_stats *st0, const char *what)
{
    const char *msg = vram_last_error();
    if (!strstr(msg, "pool \"events\": a second stream cannot join until the first's work is "
                     "waited for: ") ||
        !strstr(msg, what))
        fail_msg("refused join, expected a sentence naming %s: \"%s\"", what, msg);
    assert_false(w->f.shared);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.live_bytes, st0->live_bytes);
    assert_int_equal(st.allocated_bytes, st0->allocated_bytes);
    assert_int_equal(st.live_blocks, st0->live_blocks);
    assert_int_equal(st.allocs_total, st0->allocs_total);
    assert_int_equal(st.frees_total, st0->frees_total);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, st0->reserved_bytes);
    assert_int_equal(w->f.n_ev_release, w->f.n_ev); /* a failed wait's event released too */
}

static void test_join_refused(void **state)
{
    const join_case *jc = *state;
    world w;
    world_open(&w, jc->policy, 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1);
    void *b = xalloc(&w, 256 * KiB, 1);
    xfree(&w, a, 1);
    vram_pool_stats st0 = stats(&w);
    if (jc->wait_fails)
        w.f.join_wait_fail = 2;
    else
        w.f.record_fail = 2;
    const char *what = jc->wait_fails ? "event_wait" : "event_record";
    /* The allocation is refused (op_alloc checks the code and sentence). */
    void *y = (void *)&y;
    assert_int_equal(op_alloc(&w, 2 * MiB, 2, &y), VRAM_EBACKEND);
    assert_null(y);
    check_refused_join(&w, &st0, what);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 1);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, jc->wait_fails);
    if (jc->wait_fails) {
        assert_int_equal(w.f.n_ev, 1);
        assert_true(w.f.ev[0].join && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
        assert_int_equal(w.f.ev[0].released, 1);
    } else {
        assert_int_equal(w.f.n_record_failed, 1);
        assert_int_equal(w.f.n_ev, 0);
    }
    /* The newcomer's free of a live block: refused, the block stays live. */
    assert_int_equal(op_free(&w, b, 2, NULL), VRAM_EBACKEND);
    check_refused_join(&w, &st0, what);
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w.p, b, &bi), 0);
    assert_int_equal(bi.size, 256 * KiB);
    /* Still alone: stream 1's frees are free at once. */
    void *c = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(c, a);
    xfree(&w, c, 1);
    assert_int_equal(stats(&w).pending_bytes, 0);
    /* The backend works again: the newcomer's next operation joins and gets
     * what stream 1 freed before (the join waited for it). */
    y = xalloc(&w, 2 * MiB, 2);
    assert_true(w.f.shared);
    assert_int_equal(w.f.n_join_failed, 2);
    assert_int_equal(w.f.n_joins, 1);
    assert_ptr_equal(y, a);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2 * jc->wait_fails + 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    /* Shared rules now: a free on stream 2 is pending. */
    xfree(&w, b, 2);
    assert_int_equal(stats(&w).pending_bytes, 256 * KiB);
    xfree(&w, y, 2);
    world_close(&w); /* every event released once, nothing held */
}

/* ==== giving memory back while alone ======================================== */

/* What a single stream freed is free at once, but work queued on the stream
 * before the free may still use it: before any of it goes back to the
 * backend the pool records one event on the stream and waits for it (a
 * settle, counted in event_waits_total, its record in backend_calls_total),
 * once per batch of frees; the fake refuses an unmap or a segment_free made
 * alone with a free since the last settle, and a settle with none. */

/* The k-th event of the world is a settle on stream s, waited for once,
 * reported complete and released. */
static void check_settle_event(const world *w, size_t k, unsigned s)
{
    const fk_event *e = &w->f.ev[k];
    if (!e->settle || e->join || e->stream != s || e->waited != 1 || !e->reported ||
        e->released != 1)
        fail_msg("event %zu: settle %d, join %d, stream %u (expected %u), waited %d, reported "
                 "%d, released %d",
                 k + 1, e->settle, e->join, e->stream, s, e->waited, e->reported, e->released);
}

/* vmm alone: a mapping records a mark (an event covering the frees so far)
 * on the lone stream; once its work is done, memory freed before it goes
 * back with a query and no wait; memory freed after it needs a settle. */
static void test_solo_mark_spares_wait(void **state)
{
    (void)state;
    world w;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1), *b = xalloc(&w, 2 * MiB, 1);
    fk_log_clear(&w.f);
    xfree(&w, a, 1); /* stays mapped: a free gives nothing back */
    assert_string_equal(w.f.log, "");
    void *c = xalloc(&w, 4 * MiB, 1); /* fresh granules: a mark, then the mappings */
    assert_string_equal(w.f.log, "RMM");
    size_t mark = w.f.n_ev - 1;
    assert_true(w.f.ev[mark].settle && !w.f.ev[mark].waited);
    fk_complete(&w.f, &w.f.ev[mark]); /* the GPU got there */
    vram_pool_stats st0 = stats(&w);
    fk_log_clear(&w.f);
    xfree(&w, b, 1); /* freed after the mark */
    assert_int_equal(vram_pool_trim(w.p, NULL), 0);
    /* a's granule after the query, b's after a settle (record, wait). */
    assert_string_equal(w.f.log, "QXURWXU");
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_true(w.f.ev[mark].reported && !w.f.ev[mark].waited && w.f.ev[mark].released == 1);
    xfree(&w, c, 1);
    world_close(&w);
}

/* vmm: a free never unmaps; a mapping that would pass the pool's limit
 * (12 MiB) first unmaps free memory, oldest first and just enough of it,
 * after exactly one settle (record, wait, release, then the unmap). A
 * give-back with no free in between waits no more: a later allocation's,
 * and a trim's. A new batch of frees gets one new settle. */
static void test_solo_limit_settles(void **state)
{
    (void)state;
    world w;
    opt_limit = 12 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 2 * MiB);
    opt_limit = 0;
    void *a = xalloc(&w, 2 * MiB, 3), *b = xalloc(&w, 2 * MiB, 3);
    void *c = xalloc(&w, 2 * MiB, 3), *d = xalloc(&w, 2 * MiB, 3);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.limit_bytes, 12 * MiB);
    fk_log_clear(&w.f);
    xfree(&w, a, 3);
    xfree(&w, c, 3); /* 4 MiB free, all of it still mapped */
    assert_string_equal(w.f.log, "");
    assert_true(w.f.solo_dirty);
    assert_int_equal(stats(&w).reserved_bytes, 8 * MiB);
    /* 6 MiB fits neither a nor c: 3 new granules would make 14 MiB. One
     * settle, then a's granule (the oldest free) goes back, c's stays. */
    void *e = xalloc(&w, 6 * MiB, 3);
    assert_string_equal(w.f.log, "RWXUMMM");
    assert_int_equal(w.f.n_ev, 1);
    check_settle_event(&w, 0, 3);
    assert_false(w.f.solo_dirty);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)a, 2 * MiB, 0));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)c, 2 * MiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    /* record, unmap, three maps */
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 5);
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total);
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 2 * MiB);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 12 * MiB);
    assert_int_equal(st.failed_allocs_total, 0);
    /* A small request (the large region's free c cannot serve it) needs a
     * granule at the limit: c's goes back first, with no wait (nothing was
     * freed since the settle). */
    fk_log_clear(&w.f);
    void *s1 = xalloc(&w, 1 * MiB, 3);
    assert_string_equal(w.f.log, "UM");
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)c, 2 * MiB, 0));
    assert_int_equal(stats(&w).reserved_bytes, 12 * MiB);
    /* A new batch of frees (e: three granules, mapped one each); the next
     * granule needed gets one settle for it and e's first granule back. */
    fk_log_clear(&w.f);
    xfree(&w, e, 3);
    assert_string_equal(w.f.log, "");
    void *s2 = xalloc(&w, 1 * MiB, 3); /* the rest of s1's granule */
    assert_string_equal(w.f.log, "");
    void *s3 = xalloc(&w, 1 * MiB, 3); /* a new granule */
    assert_string_equal(w.f.log, "RWXUM");
    check_settle_event(&w, 1, 3);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)e, 2 * MiB, 0));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)e + 2 * MiB, 4 * MiB, 0));
    /* A trim right after: no free since the settle, no wait. */
    fk_log_clear(&w.f);
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "UU");
    assert_int_equal(released, 4 * MiB);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.reserved_bytes, 8 * MiB); /* b, d and two small granules */
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 10 * MiB);
    assert_int_equal(w.f.n_settles, 2);
    assert_int_equal(w.f.n_query, 0);
    assert_false(w.f.shared);
    fk_log_clear(&w.f);
    xfree(&w, b, 3);
    xfree(&w, d, 3);
    xfree(&w, s1, 3);
    xfree(&w, s2, 3);
    xfree(&w, s3, 3);
    assert_string_equal(w.f.log, ""); /* frees give nothing back */
    assert_int_equal(w.f.n_settles, 2);
    world_close(&w); /* destroy: one settle for the frees, then each region */
    assert_int_equal(w.f.n_settles, 3);
    assert_string_equal(w.f.log, "RWXUULUUL"); /* small: s1..s3's granules; large: b, d */
}

/* A trim alone settles once (on the stream, the default stream here), then
 * gives everything free back; a trim with nothing freed since waits for
 * nothing; a new batch of frees gets a new settle. */
static void test_solo_trim_settles(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    const char *give = w.policy == VRAM_POLICY_VMM ? "U" : "F";
    void *x1 = xalloc(&w, 2 * MiB, 0), *x2 = xalloc(&w, 4 * MiB, 0);
    void *x3 = xalloc(&w, 256 * KiB, 0);
    fk_log_clear(&w.f);
    xfree(&w, x1, 0);
    xfree(&w, x2, 0);
    xfree(&w, x3, 0);
    assert_string_equal(w.f.log, ""); /* frees: nothing goes back, no event */
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.free_bytes, st0.reserved_bytes);
    uint64_t released = 0;
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    if (strncmp(w.f.log, "RWX", 3) || strlen(w.f.log) < 4 ||
        strspn(w.f.log + 3, give) != strlen(w.f.log) - 3)
        fail_msg("trim alone: backend calls \"%s\", expected a settle (RWX) then only %s",
                 w.f.log, give);
    assert_int_equal(w.f.n_ev, 1);
    check_settle_event(&w, 0, 0);
    assert_int_equal(released, st0.reserved_bytes);
    assert_int_equal(w.f.held, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, strlen(w.f.log) - 2);
    /* Nothing freed since: no wait. */
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "");
    assert_int_equal(released, 0);
    /* A new batch: a new settle. */
    void *y = xalloc(&w, 4 * MiB, 0);
    xfree(&w, y, 0);
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    if (strncmp(w.f.log, "RWX", 3) || strspn(w.f.log + 3, give) != strlen(w.f.log) - 3 ||
        !w.f.log[3])
        fail_msg("second trim alone: backend calls \"%s\"", w.f.log);
    check_settle_event(&w, 1, 0);
    assert_int_equal(released, 4 * MiB);
    assert_int_equal(stats(&w).event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(w.f.n_query, 0);
    assert_false(w.f.shared);
    world_close(&w);
}

/* A trim whose settle fails returns the error with the sentence, and gives
 * nothing back. */
static void check_settle_refused(world *w, int rc, const vram_pool_stats *st0, uint64_t held,
                                 uint64_t released, const char *what)
{
    const char *msg = vram_last_error();
    const char *at = strstr(msg, settle_sentence);
    if (rc != VRAM_EBACKEND || !at || !strstr(at + strlen(settle_sentence), what))
        fail_msg("a trim whose settle failed (%s): %s, \"%s\"", what, vram_err_name(rc), msg);
    assert_int_equal(released, 0);
    assert_int_equal(w->f.held, held);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.reserved_bytes, st0->reserved_bytes);
    assert_int_equal(st.free_bytes, st0->free_bytes);
    assert_int_equal(st.pending_bytes, 0);
    assert_true(w->f.solo_dirty);
    assert_int_equal(w->f.n_ev_release, w->f.n_ev); /* a failed wait's event released too */
}

/* A settle that fails (its record, then its wait) makes the trim return
 * VRAM_EBACKEND with the sentence and the backend's cause; nothing goes
 * back (the work may still use the memory). With the backend working again
 * the next trim settles and gives it back. */
static void test_solo_settle_fails(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 2), *y = xalloc(&w, 256 * KiB, 2);
    xfree(&w, x, 2);
    vram_pool_stats st0 = stats(&w);
    uint64_t held = w.f.held, released = 1;
    /* The record fails. */
    w.f.record_fail = 1;
    fk_log_clear(&w.f);
    int rc = vram_pool_trim(w.p, &released);
    assert_string_equal(w.f.log, "r");
    check_settle_refused(&w, rc, &st0, held, released, "event_record");
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 1);
    assert_int_equal(st.event_waits_total, st0.event_waits_total);
    assert_int_equal(w.f.n_ev, 0);
    /* The wait fails. */
    w.f.settle_wait_fail = 1;
    fk_log_clear(&w.f);
    released = 1;
    rc = vram_pool_trim(w.p, &released);
    assert_string_equal(w.f.log, "RwX");
    check_settle_refused(&w, rc, &st0, held, released, "event_wait");
    st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 2);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(w.f.n_ev, 1);
    assert_int_equal(w.f.n_settle_wait_failed, 1);
    assert_true(w.f.ev[0].settle && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
    /* x's memory is still free in the pool: the stream gets it back. */
    void *x1 = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(x1, x);
    xfree(&w, x1, 2);
    /* The backend works again. */
    fk_log_clear(&w.f);
    rc = vram_pool_trim(w.p, &released);
    if (rc)
        fail_msg("trim with the backend working: %s: %s", vram_err_name(rc), vram_last_error());
    assert_string_equal(w.f.log, w.policy == VRAM_POLICY_VMM ? "RWXUU" : "RWXF");
    check_settle_event(&w, 1, 2);
    assert_int_equal(released, 4 * MiB);
    assert_int_equal(w.f.held, held - 4 * MiB);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    xfree(&w, y, 2);
    world_close(&w);
}

/* vmm: a mapping that needs room under the limit (4 MiB) while a settle
 * fails (its record, then its wait) is refused with VRAM_EBACKEND and the
 * sentence: nothing goes back (the work may still use the memory), the
 * pool is as it was, the freed memory stays mapped and free (the stream
 * gets it back with no backend call), and with the backend working again
 * the next such mapping settles and unmaps. A free alone calls nothing. */
static void test_solo_settle_fails_at_limit(void **state)
{
    (void)state;
    world w;
    opt_limit = 4 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 0);
    opt_limit = 0;
    void *a = xalloc(&w, 2 * MiB, 1), *b = xalloc(&w, 2 * MiB, 1);
    fk_log_clear(&w.f);
    xfree(&w, a, 1);
    assert_string_equal(w.f.log, "");
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.reserved_bytes, 4 * MiB);
    assert_int_equal(st0.free_bytes, 2 * MiB);
    static const struct {
        const char *what, *log;
    } fails[] = {{"event_record", "r"}, {"event_wait", "RwX"}};
    for (unsigned k = 0; k < 2; k++) {
        if (k == 0)
            w.f.record_fail = 1;
        else
            w.f.settle_wait_fail = 1;
        fk_log_clear(&w.f);
        void *c = (void *)&c;
        /* A small request: a's free block (large region) cannot serve it. */
        int rc = op_alloc(&w, 1 * MiB, 1, &c);
        assert_string_equal(w.f.log, fails[k].log);
        const char *msg = vram_last_error();
        const char *at = strstr(msg, settle_sentence);
        if (rc != VRAM_EBACKEND || !strstr(msg, "cannot allocate") || !at ||
            !strstr(at + strlen(settle_sentence), fails[k].what))
            fail_msg("a mapping at the limit whose settle failed (%s): %s, \"%s\"",
                     fails[k].what, vram_err_name(rc), msg);
        assert_null(c);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.reserved_bytes, 4 * MiB);
        assert_int_equal(st.free_bytes, 2 * MiB);
        assert_int_equal(st.live_blocks, 1);
        assert_int_equal(st.pending_bytes, 0);
        assert_int_equal(st.failed_allocs_total - st0.failed_allocs_total, k + 1);
        assert_int_equal(st.backend_failures_total - st0.backend_failures_total, k + 1);
        assert_int_equal(st.released_bytes_total, st0.released_bytes_total);
        assert_int_equal(w.f.held, 4 * MiB);
        assert_true(w.f.solo_dirty);
        assert_int_equal(w.f.n_ev, k);
        assert_int_equal(w.f.n_ev_release, w.f.n_ev); /* a failed wait's event released too */
    }
    assert_true(w.f.ev[0].settle && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
    /* Still free at once: the stream gets a back with no backend call. */
    fk_log_clear(&w.f);
    void *a1 = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(a1, a);
    xfree(&w, a1, 1);
    assert_string_equal(w.f.log, "");
    /* The backend works again: a settle, a's granule back, the new one. */
    void *c = xalloc(&w, 1 * MiB, 1);
    assert_string_equal(w.f.log, "RWXUM");
    check_settle_event(&w, 1, 1);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)a, 2 * MiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.failed_allocs_total - st0.failed_allocs_total, 2);
    assert_int_equal(w.f.n_settles, 1);
    xfree(&w, b, 1);
    xfree(&w, c, 1);
    world_close(&w);
}

/* Destroy alone with the settle failing: the memory stays with the backend
 * (the work may still use it) and destroy says so. */
static void test_solo_destroy_settle_fails(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    uint64_t held = w.f.held;
    w.f.record_fail = 2;
    unsigned logged = log_n;
    fk_log_clear(&w.f);
    int rc = vram_pool_destroy(w.p);
    w.p = NULL;
    assert_int_equal(rc, VRAM_EBACKEND);
    assert_string_equal(w.f.log, "r"); /* nothing unmapped, freed or released */
    assert_int_equal(w.f.held, held);
    const char *l = log_find(settle_sentence);
    if (log_n == logged || !l)
        fail_msg("destroy with the settle failing logged no sentence (backend calls \"%s\")",
                 w.f.log);
    check_ledger(&w.f);
    /* What was kept is the fake's to drop. */
    assert_int_equal(vram_backend_destroy(w.b), 0);
    free(w.f.ev);
    free(w.f.mem.v);
    free(w.f.res.v);
}

/* Memory short alone (the backend refuses below the pool's limit: the
 * device shrank, others took memory): the retry gives memory back only
 * after a settle. vmm: a 4 MiB request first marks the stream (an event
 * covering the frees so far, recorded as it is about to map), maps one
 * granule and is refused the second; the granule it just mapped goes back
 * at once (no work ever saw it: no wait), then the free granule that stayed
 * mapped once the mark is found pending and waited for, and the retry maps
 * two. segments: a segment refused, a settle, the two free segments back,
 * the segment granted. */
static void test_solo_memory_short_settles(void **state)
{
    world w;
    if (POLICY(state) == VRAM_POLICY_VMM) {
        world_open(&w, VRAM_POLICY_VMM, 16 * MiB, 1024 * MiB);
        void *b[6];
        for (int i = 0; i < 6; i++)
            b[i] = xalloc(&w, 2 * MiB, 4); /* granules 0..5 */
        for (int i = 1; i < 6; i += i == 1 ? 2 : 1)
            xfree(&w, b[i], 4); /* 1, 3, 4, 5 */
        assert_int_equal(vram_pool_trim(w.p, NULL), 0);
        assert_int_equal(w.f.held, 4 * MiB);
        void *c = xalloc(&w, 2 * MiB, 4); /* granule 1 again */
        assert_ptr_equal(c, b[1]);
        xfree(&w, c, 4); /* stays mapped: the batch to settle */
        w.f.capacity = 8 * MiB;
        vram_pool_stats st0 = stats(&w);
        unsigned settles = w.f.n_settles;
        fk_log_clear(&w.f);
        void *y = xalloc(&w, 4 * MiB, 4);
        assert_string_equal(w.f.log, "RMmUQWXUMM");
        assert_ptr_equal(y, b[3]);
        assert_int_equal(w.f.n_settles, settles + 1);
        check_settle_event(&w, w.f.n_ev - 1, 4);
        assert_int_equal(w.f.n_fresh_give_backs, 1); /* the rollback's unmap */
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
        assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
        assert_int_equal(st.reserved_bytes, 8 * MiB);
        xfree(&w, y, 4);
        xfree(&w, b[0], 4);
        xfree(&w, b[2], 4);
    } else {
        world_open(&w, VRAM_POLICY_SEGMENTS, 16 * MiB, 1024 * MiB);
        void *a[4];
        for (int i = 0; i < 4; i++)
            a[i] = xalloc(&w, 2 * MiB, 4); /* a segment each */
        xfree(&w, a[1], 4);
        xfree(&w, a[2], 4);
        w.f.capacity = 8 * MiB; /* full: the limit (16 MiB) is not reached */
        vram_pool_stats st0 = stats(&w);
        fk_log_clear(&w.f);
        void *y = xalloc(&w, 4 * MiB, 4);
        assert_string_equal(w.f.log, "aRWXFFA");
        assert_int_equal(w.f.n_ev, 1);
        check_settle_event(&w, 0, 4);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
        assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
        assert_int_equal(st.reserved_bytes, 8 * MiB);
        xfree(&w, y, 4);
        xfree(&w, a[0], 4);
        xfree(&w, a[3], 4);
    }
    assert_false(w.f.shared);
    world_close(&w);
}

/* vmm: a mapping refused half way is rolled back, and only what this
 * allocation mapped goes back: x (3 MiB) ends inside granule 1, so y, put
 * right after it, shares that granule (mapped, x's) and needs granule 2,
 * which the backend refuses (the device is full, the limit is not
 * reached). The rollback must leave x's granule mapped; the retry placed
 * where the fewest granules are missing is refused the same way. */
static void test_map_refused_keeps_neighbour(void **state)
{
    (void)state;
    world w;
    world_open(&w, VRAM_POLICY_VMM, 16 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 3 * MiB, 1);
    assert_int_equal(w.f.held, 4 * MiB); /* granule 0, and granule 1 on its own */
    w.f.capacity = w.f.held;             /* others took the rest */
    fk_log_clear(&w.f);
    void *y = (void *)&y;
    assert_int_equal(op_alloc(&w, 3 * MiB, 1, &y), VRAM_ENOMEM);
    assert_null(y);
    assert_string_equal(w.f.log, "mm"); /* refused, retried, refused: nothing unmapped */
    if (!fk_covered(&w.f, (uint64_t)(uintptr_t)x, 3 * MiB, 0))
        fail_msg("the rollback of a refused mapping unmapped the live block x's granule");
    vram_pool_stats st = stats(&w); /* reserved == what the backend holds */
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.live_blocks, 1);
    /* The device has room again: y gets granule 2 only. */
    w.f.capacity = 16 * MiB;
    fk_log_clear(&w.f);
    y = xalloc(&w, 3 * MiB, 1);
    assert_int_equal((uintptr_t)y, (uintptr_t)x + 3 * MiB);
    assert_string_equal(w.f.log, "M");
    assert_int_equal(stats(&w).reserved_bytes, 6 * MiB);
    xfree(&w, x, 1);
    xfree(&w, y, 1);
    world_close(&w);
}

/* vmm huge blocks (a segment each): a free gives nothing back; a new
 * segment that would pass the pool's limit (24 MiB) first gives back free
 * huge segments before free mapped granules, oldest first and just enough,
 * after one settle; a trim with no free since gives the rest back with no
 * wait; destroy after a free settles first. */
static void test_solo_huge_settles(void **state)
{
    (void)state;
    world w;
    opt_huge_size = 8 * MiB;
    opt_limit = 24 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 8 * MiB);
    opt_huge_size = opt_limit = 0;
    void *s = xalloc(&w, 64 * KiB, 1);
    void *h1 = xalloc(&w, 8 * MiB, 1), *h2 = xalloc(&w, 8 * MiB, 1);
    assert_int_equal(w.f.n_seg_alloc, 2);
    fk_log_clear(&w.f);
    xfree(&w, s, 1); /* its granule, the oldest free memory, stays mapped */
    xfree(&w, h1, 1);
    xfree(&w, h2, 1);
    assert_string_equal(w.f.log, "");
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.reserved_bytes, 18 * MiB);
    /* 12 MiB fits neither free segment and would make 30 MiB: a settle,
     * then h1's segment back (6 MiB over: one segment is enough; s's
     * granule, freed earlier, stays: huge segments go first), then the new
     * one. */
    void *h3 = xalloc(&w, 12 * MiB, 1);
    assert_string_equal(w.f.log, "RWXFA");
    check_settle_event(&w, 0, 1);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)h1, 8 * MiB, 1));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)h2, 8 * MiB, 1));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)s, 64 * KiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.reserved_bytes, 22 * MiB);
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 8 * MiB);
    fk_log_clear(&w.f);
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "FU"); /* h2's segment, then s's granule */
    assert_int_equal(released, 10 * MiB);
    assert_int_equal(stats(&w).event_waits_total, 1);
    /* h3 freed: its segment stays mapped; destroy settles, then releases
     * the two reservations and gives the segment back. */
    xfree(&w, h3, 1);
    fk_log_clear(&w.f);
    world_close(&w);
    assert_string_equal(w.f.log, "RWXLLF");
    assert_int_equal(w.f.n_settles, 2);
}

/* vmm huge blocks, memory short: a new segment the backend refuses (below
 * the pool's limit: others took memory) makes the pool give back the free
 * segments (vram__huge_release) and retry; they too go back only after a
 * settle. */
static void test_solo_huge_memory_short_settles(void **state)
{
    (void)state;
    world w;
    opt_huge_size = 4 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 64 * MiB);
    opt_huge_size = 0;
    void *h1 = xalloc(&w, 8 * MiB, 2), *h2 = xalloc(&w, 8 * MiB, 2);
    xfree(&w, h1, 2); /* kept: a free 8 MiB segment */
    w.f.capacity = 16 * MiB; /* others took the rest */
    unsigned settles = w.f.n_settles;
    fk_log_clear(&w.f);
    /* 6 MiB does not fit h1's segment (too much waste) and is far below the
     * limit (64 MiB): a mark, a segment refused, the mark pending and
     * waited for, h1's segment back, granted. */
    void *h3 = xalloc(&w, 6 * MiB, 2);
    assert_string_equal(w.f.log, "RaQWXFA");
    assert_int_equal(w.f.n_settles, settles + 1);
    check_settle_event(&w, w.f.n_ev - 1, 2);
    assert_int_equal(stats(&w).reserved_bytes, 14 * MiB);
    xfree(&w, h2, 2);
    xfree(&w, h3, 2);
    world_close(&w);
}

int main(void)
{
#define BOTH(fn)                                                                                   \
    cmocka_unit_test_prestate(fn, &POL_VMM), cmocka_unit_test_prestate(fn, &POL_SEG)
    const struct CMUnitTest tests[] = {
        BOTH(test_single_stream_free_at_once),
        BOTH(test_join_waits_for_first),
        BOTH(test_join_at_free),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_RECORD_VMM),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_RECORD_SEG),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_WAIT_VMM),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_WAIT_SEG),
        cmocka_unit_test(test_solo_mark_spares_wait),
        cmocka_unit_test(test_solo_limit_settles),
        BOTH(test_solo_trim_settles),
        BOTH(test_solo_settle_fails),
        cmocka_unit_test(test_solo_settle_fails_at_limit),
        BOTH(test_solo_destroy_settle_fails),
        BOTH(test_solo_memory_short_settles),
        cmocka_unit_test(test_map_refused_keeps_neighbour),
        cmocka_unit_test(test_solo_huge_settles),
        cmocka_unit_test(test_solo_huge_memory_short_settles),
    };
#undef BOTH
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
