/* tests/integration/events/world.c - a test's world for the pool-event
 * programs (world.h): the fake, its backend and a pool, the operations
 * checked against the single-stream rule, and the captured log lines. */
#include "world.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

uint64_t opt_map_chunk, opt_large_round, opt_huge_size, opt_limit;
int opt_stream_wait_event, opt_reuse_completed, opt_reclaim_large;
uint64_t opt_reclaim_min;
uint32_t opt_ops_size;

vram_policy POL_VMM = VRAM_POLICY_VMM, POL_SEG = VRAM_POLICY_SEGMENTS;

const char *const settle_sentence =
    "pool \"events\": memory freed on the stream cannot be given back before its work is "
    "waited for: ";

/* Pool options spelled out, so that no VRAM_* variable changes a scenario:
 * 256-byte blocks, 2 MiB granules mapped one per call, requests above 1 MiB
 * in the large region, and (segments) a segment of its own, rounded to 2 MiB,
 * for every large request; the limit is the backend's capacity unless
 * opt_limit says otherwise (not the default, the device's free memory less a
 * margin, which would be half of these small fakes), and no decay thread
 * runs; another stream's pending frees may be taken with a wait on the
 * device (stream_waits 1, the default) unless opt_reuse_completed says
 * otherwise, which matters only with a table that has stream_wait_event;
 * completed frees of other streams rejoin the shared free space only when
 * new memory would be taken (reclaim_large 0) unless opt_reclaim_large says
 * otherwise, then before every large request unless opt_reclaim_min is set.
 * Freed memory thus stays held until a mapping (or a segment) would pass
 * the limit, the backend refuses memory, or a trim. retain: retain_min, what
 * the decay would leave held (with no decay it changes nothing). */
void world_open_backend(world *w, vram_policy policy, uint64_t capacity)
{
    memset(w, 0, sizeof *w);
    w->policy = policy;
    w->f.capacity = capacity;
    w->f.next_res = 0x200000000000ull;
    w->f.query_mode = Q_PENDING;
    vram_backend_ops ops;
    fk_ops_init(&ops, policy, opt_huge_size != 0, opt_stream_wait_event);
    ops.size = opt_ops_size;
    assert_int_equal(vram_backend_create_custom(&ops, &w->f, capacity, GRAN, &w->b), 0);
}

void world_open(world *w, vram_policy policy, uint64_t capacity, uint64_t retain)
{
    world_open_backend(w, policy, capacity);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.name = "events";
    o.backend = w->b;
    o.policy = policy;
    o.alignment = 256;
    o.granularity = 0;
    o.map_chunk = opt_map_chunk;
    o.retain_min = retain;
    o.small_size = 1 * MiB;
    o.large_round = opt_large_round;
    o.huge_size = opt_huge_size;
    o.limit = opt_limit ? opt_limit : capacity; /* not the default: device free less a margin */
    o.decay_ms = 0; /* no thread: scenarios see every backend call in order */
    o.segment_small = 2 * MiB;
    o.segment_medium = 2 * MiB;
    o.configured_listeners = 0;
    o.stream_waits = !opt_reuse_completed;
    o.reclaim_large = opt_reclaim_large;
    o.reclaim_min = opt_reclaim_min;
    if (vram_pool_create(&o, &w->p))
        fail_msg("pool: %s", vram_last_error());
}

void check_ledger(const fake *f)
{
    if (f->ledger_errors)
        fail_msg("backend ledger: %u violation(s), the first: %s", f->ledger_errors, f->ledger_msg);
    if (f->bad_event_use)
        fail_msg("%u use(s) of a released or unknown event, the first: %s", f->bad_event_use,
                 f->bad_msg);
}

/* Destroy the pool (it must succeed) and the backend, then check that the
 * backend holds nothing and every event was released exactly once. */
void world_close(world *w)
{
    if (w->p) {
        int rc = vram_pool_destroy(w->p);
        if (rc)
            fail_msg("destroy: %s: %s", vram_err_name(rc), vram_last_error());
        w->p = NULL;
    }
    vram_backend_stats bs;
    vram_backend_stats_get(w->b, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(vram_backend_destroy(w->b), 0);
    fake *f = &w->f;
    check_ledger(f);
    assert_int_equal(f->held, 0);
    assert_int_equal(f->mem.n, 0);
    assert_int_equal(f->res.n, 0);
    assert_int_equal(f->n_reserve, f->n_release);
    for (size_t k = 0; k < f->n_ev; k++)
        if (f->ev[k].released != 1)
            fail_msg("event %zu (stream %u) released %d times", k + 1, f->ev[k].stream,
                     f->ev[k].released);
    assert_int_equal(f->n_ev_release, f->n_ev);
    assert_int_equal(f->empty_records, 0);
    free(f->ev);
    free(f->mem.v);
    free(f->res.v);
}

/* An allocation (of a valid request: it reaches the pool's bookkeeping),
 * checked against the single-stream rule; returns its code. */
int op_alloc(world *w, uint64_t size, unsigned s, void **x)
{
    fk_op_begin(&w->f, S(s));
    int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, S(s), x);
    const char *bad = fk_op_end(&w->f, S(s), rc);
    if (bad)
        fail_msg("alloc %" PRIu64 " on stream %u: %s", size, s, bad);
    return rc;
}

/* A free of a live block, likewise. The fake's clock ticks before it (the
 * free's time); a free that succeeds opens or extends its stream's epoch. */
int op_free(world *w, void *x, unsigned s, uint64_t *t_free)
{
    uint64_t t = ++w->f.clock;
    if (t_free)
        *t_free = t;
    vram_block_info bi = {0};
    vram_pool_block_info(w->p, x, &bi); /* size 0 if x is not live */
    fk_op_begin(&w->f, S(s));
    fk_dirt d = fk_free_begin(&w->f, t, (uintptr_t)x, bi.size);
    int rc = vram_pool_free(w->p, x, S(s));
    const char *bad = fk_op_end(&w->f, S(s), rc);
    if (bad)
        fail_msg("free %p on stream %u: %s", x, s, bad);
    fk_free_end(&w->f, S(s), rc, d);
    return rc;
}

void *xalloc(world *w, uint64_t size, unsigned s)
{
    void *x = NULL;
    int rc = op_alloc(w, size, s, &x);
    if (rc)
        fail_msg("alloc %" PRIu64 " on stream %u: %s: %s", size, s, vram_err_name(rc),
                 vram_last_error());
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w->p, x, &bi), 0);
    if (!fk_covered(&w->f, (uint64_t)(uintptr_t)x, bi.size, w->policy == VRAM_POLICY_SEGMENTS))
        fail_msg("block %p+%" PRIu64 " is not in backend memory", x, bi.size);
    return x;
}

void xfree(world *w, void *x, unsigned s)
{
    int rc = op_free(w, x, s, NULL);
    if (rc)
        fail_msg("free %p on stream %u: %s", x, s, vram_last_error());
}

vram_pool_stats stats(world *w)
{
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(w->p, &st), 0);
    assert_int_equal(st.reserved_bytes, w->f.held);
    assert_true(st.allocated_bytes + st.pending_bytes <= st.reserved_bytes);
    return st;
}

/* Calls that take memory from the backend. */
unsigned acquiring(const world *w)
{
    return w->policy == VRAM_POLICY_VMM ? w->f.n_map : w->f.n_seg_alloc;
}

uint64_t backend_calls(const world *w)
{
    vram_backend_stats bs;
    vram_backend_stats_get(w->b, &bs);
    return bs.calls;
}

int overlaps(const void *x, uint64_t xs, const void *y, uint64_t ys)
{
    uint64_t a = (uint64_t)(uintptr_t)x, b = (uint64_t)(uintptr_t)y;
    return a < b + ys && b < a + xs;
}

/* Bring the pool into shared mode before a scenario that is about the
 * rules of several streams: each stream of `streams`, in order, touches the
 * pool with a tiny allocation and its free (the first is the pool's first
 * stream, alone: its free is free at once; the second's allocation joins,
 * with one event on the first, waited for; the later ones join without an
 * event). A trim then completes the touches' frees (one event for each
 * stream after the first) and gives their memory back, so that the scenario
 * starts with nothing pending, nothing reserved and no event outstanding.
 * The fake's counters of records, queries, waits and stream waits restart
 * from zero,
 * EV(w, k) is the scenario's k-th event and w->st0 holds the pool's
 * counters, so that the scenario's assertions keep their meaning. */
vram_pool_opts opts_with_env(const char *var, const char *value)
{
    if (value)
        setenv(var, value, 1);
    else
        unsetenv(var);
    assert_int_equal(vram_config_set(var + strlen("VRAM_"), NULL), 0); /* the variable again */
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    return o;
}

vram_pool_opts opts_with_setting(const char *name, const char *value)
{
    assert_int_equal(vram_config_set(name, value), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    return o;
}

void go_shared(world *w, const unsigned *streams, size_t n)
{
    fake *f = &w->f;
    assert_true(n >= 2);
    assert_int_equal(f->n_ev, 0);
    for (size_t i = 0; i < n; i++) {
        void *x = xalloc(w, 256, streams[i]);
        xfree(w, x, streams[i]);
        if (i == 0)
            assert_int_equal(stats(w).pending_bytes, 0); /* alone: free at once */
    }
    assert_true(f->shared);
    assert_int_equal(f->n_joins, 1);
    assert_true(f->ev[0].join && f->ev[0].stream == stream_index(S(streams[0])));
    assert_int_equal(vram_pool_trim(w->p, NULL), 0);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.live_blocks, 0);
    /* The join's event and one for each later stream's free; all waited. */
    assert_int_equal(f->n_record, n);
    assert_int_equal(f->records_on[stream_index(S(streams[0]))], 1);
    assert_int_equal(f->n_wait, n);
    assert_int_equal(st.event_waits_total, n);
    assert_int_equal(f->n_ev_release, n);
    w->ev_base = f->n_ev;
    w->st0 = st;
    f->n_record = f->n_record_failed = f->n_query = f->n_wait = 0;
    memset(f->records_on, 0, sizeof f->records_on);
    f->n_stream_wait = f->n_stream_wait_failed = 0;
    memset(f->stream_waits_on, 0, sizeof f->stream_waits_on);
}

/* Log lines: captured (standard error stays quiet unless
 * VRAM_TEST_VERBOSE is set); tests look at the latest warnings. */
static char log_last[8][512];
unsigned log_n;

void log_capture(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    if (level <= VRAM_LOG_WARN)
        snprintf(log_last[log_n++ % 8], sizeof log_last[0], "%s", line);
    if (getenv("VRAM_TEST_VERBOSE"))
        fprintf(stderr, "vramkit: %s: %s\n", vram_log_level_name(level), line);
}

/* The latest captured warning containing `what`, or NULL. */
const char *log_find(const char *what)
{
    for (unsigned k = 0; k < 8 && k < log_n; k++) {
        const char *l = log_last[(log_n - 1 - k) % 8];
        if (strstr(l, what))
            return l;
    }
    return NULL;
}
