/* tests/integration/test_pool_stream_place.c - where a stream's allocation
 * lands when several streams use a pool with events, through the public API
 * only: the stream's own frees (reusable by it at once) and the shared free
 * space compete by address, the lower candidate winning as in the policy's
 * placement, the own one also where the shared one would need new memory;
 * and with reclaim_large (VRAM_STREAM_RECLAIM=large) a large request that
 * would carve a much larger block first lets the other streams' completed
 * frees rejoin the shared space (one event record and query per stream with
 * frees), so that it lands on the block that fits, where without it
 * (=need), or below reclaim_min, it carves the larger one with no backend
 * call. Also
 * vram_pool_opts_init's default, VRAM_STREAM_RECLAIM, and the snapshot's
 * setting.
 *
 * The backend is the fake of events/fake_events.h; events/world.h makes the
 * pool on it and brings it into shared mode (go_shared) first. Every
 * scenario runs for both policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "vramkit.h"
#include "world.h"

/* Let the frees made so far join the shared free space: a request of
 * stream `s` that nothing held serves (`size`, new memory) makes the pool
 * record events and query them, and they are complete. Returns the block. */
static void *rejoin_by_new_memory(world *w, uint64_t size, unsigned s)
{
    w->f.query_mode = Q_COMPLETE;
    unsigned acq = acquiring(w);
    void *x = xalloc(w, size, s);
    assert_true(acquiring(w) > acq);
    assert_int_equal(stats(w).pending_bytes, 0);
    w->f.query_mode = Q_PENDING;
    return x;
}

/* The lower of the two candidates wins: x (shared, since its event
 * completed) below z (stream 1's own, pending): stream 1's next request of
 * that size takes x, not its own z, with no backend call; then with x its
 * own again and z shared (above it), x once more. */
static void test_own_and_shared_by_address(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 2 * MiB, 1), *y = xalloc(&w, 2 * MiB, 1), *z = xalloc(&w, 2 * MiB, 1);
    assert_true((uintptr_t)x < (uintptr_t)y && (uintptr_t)y < (uintptr_t)z);
    xfree(&w, x, 1);
    void *big = rejoin_by_new_memory(&w, 6 * MiB, 2);
    xfree(&w, z, 1);
    assert_int_equal(stats(&w).pending_bytes, 2 * MiB);
    fk_log_clear(&w.f);
    void *a = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(a, x);
    assert_string_equal(w.f.log, "");
    assert_int_equal(stats(&w).pending_bytes, 2 * MiB); /* z waits still */

    void *big2 = rejoin_by_new_memory(&w, 10 * MiB, 2); /* z joins the shared space */
    xfree(&w, a, 1);
    fk_log_clear(&w.f);
    void *b = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(b, x); /* its own x, below the shared z */
    assert_string_equal(w.f.log, "");
    assert_int_equal(stats(&w).pending_bytes, 0);
    void *c = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(c, z);
    xfree(&w, b, 1);
    xfree(&w, c, 1);
    xfree(&w, y, 1);
    xfree(&w, big, 2);
    xfree(&w, big2, 2);
    world_close(&w);
}

typedef struct rejoin_case {
    vram_policy policy;
    int reclaim_large;
    uint64_t reclaim_min;
} rejoin_case;

/* RJ_*_ABOVE: reclaim_large with reclaim_min above the request, which then
 * places as without. */
static rejoin_case RJ_VMM = {VRAM_POLICY_VMM, 0, 0}, RJ_VMM_LARGE = {VRAM_POLICY_VMM, 1, 0},
                   RJ_VMM_ABOVE = {VRAM_POLICY_VMM, 1, 8 * MiB + 4096},
                   RJ_VMM_AT = {VRAM_POLICY_VMM, 1, 8 * MiB},
                   RJ_SEG = {VRAM_POLICY_SEGMENTS, 0, 0},
                   RJ_SEG_LARGE = {VRAM_POLICY_SEGMENTS, 1, 0},
                   RJ_SEG_ABOVE = {VRAM_POLICY_SEGMENTS, 1, 16 * MiB};

/* q (8 MiB) is stream 2's pending free, p (16 MiB, above it, a live block
 * after it) a shared free block. Stream 1 asks for 8 MiB: p would serve it with 8 MiB over. With
 * reclaim_large the pool first records an event on stream 2 (the only one
 * with frees) and queries it: complete, q rejoins and the request lands on
 * q; without, or with reclaim_min above 8 MiB, it carves p and calls
 * nothing. */
static void test_rejoin_before_large(void **state)
{
    const rejoin_case *rc = *state;
    opt_reclaim_large = rc->reclaim_large;
    opt_reclaim_min = rc->reclaim_min;
    world w;
    world_open(&w, rc->policy, 128 * MiB, 1024 * MiB);
    opt_reclaim_large = 0;
    opt_reclaim_min = 0;
    int rejoins = rc->reclaim_large && rc->reclaim_min <= 8 * MiB;
    GO_SHARED(&w, 1, 2);
    void *q = xalloc(&w, 8 * MiB, 1), *p = xalloc(&w, 16 * MiB, 1);
    void *fence = xalloc(&w, 2 * MiB, 1); /* keeps p apart from the space after it */
    assert_true((uintptr_t)q < (uintptr_t)p && (uintptr_t)p < (uintptr_t)fence);
    xfree(&w, p, 1);
    void *trigger = rejoin_by_new_memory(&w, 32 * MiB, 2);
    xfree(&w, q, 2);
    w.f.query_mode = Q_COMPLETE;
    vram_pool_stats st0 = stats(&w);
    unsigned acq = acquiring(&w);
    fk_log_clear(&w.f);
    void *a = xalloc(&w, 8 * MiB, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(acquiring(&w), acq);
    if (rejoins) {
        assert_ptr_equal(a, q);
        assert_string_equal(w.f.log, "RQX"); /* the event released once complete */
        assert_int_equal(w.f.records_on[2], 1);
        assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1); /* the record */
    } else {
        assert_ptr_equal(a, p);
        assert_string_equal(w.f.log, "");
        assert_int_equal(st.pending_bytes, 8 * MiB); /* q waits still */
    }
    xfree(&w, a, 1);
    xfree(&w, fence, 1);
    xfree(&w, trigger, 2);
    world_close(&w);
}

/* A number in the pool's snapshot settings. */
static double snapshot_setting(vram_pool *p, const char *name)
{
    vram_buffer b = {0};
    assert_int_equal(vram_pool_snapshot(p, vram_write_buffer, &b, 0), 0);
    cJSON *root = cJSON_Parse(b.data);
    vram_buffer_free(&b);
    assert_non_null(root);
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "settings"), name);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(root);
    return d;
}

/* The setting: 1 by default and with VRAM_STREAM_RECLAIM=large, 0 with
 * =need (from the environment or set), in the snapshot as reclaim_large;
 * its least request 16 MiB by default, VRAM_STREAM_RECLAIM_MIN otherwise,
 * in the snapshot as reclaim_min. */
static void test_opts_stream_reclaim(void **state)
{
    (void)state;
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM", NULL).reclaim_large, 1);
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM_MIN", NULL).reclaim_min, 16 * MiB);
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM_MIN", "4M").reclaim_min, 4 * MiB);
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM_MIN", "0").reclaim_min, 0);
    unsetenv("VRAM_STREAM_RECLAIM_MIN");
    assert_int_equal(opts_with_setting("stream_reclaim_min", "1G").reclaim_min, 1024 * MiB);
    assert_int_not_equal(vram_config_set("stream_reclaim_min", "lots"), 0);
    assert_int_equal(vram_config_set("stream_reclaim_min", NULL), 0);
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM", "large").reclaim_large, 1);
    assert_int_equal(opts_with_env("VRAM_STREAM_RECLAIM", "need").reclaim_large, 0);
    unsetenv("VRAM_STREAM_RECLAIM");
    assert_int_equal(opts_with_setting("stream_reclaim", "need").reclaim_large, 0);
    assert_int_not_equal(vram_config_set("stream_reclaim", "always"), 0);
    assert_int_equal(opts_with_setting("stream_reclaim", "large").reclaim_large, 1);
    assert_int_equal(vram_config_set("stream_reclaim", NULL), 0);

    opt_reclaim_large = 1;
    opt_reclaim_min = 3 * MiB;
    world w;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 0);
    opt_reclaim_large = 0;
    opt_reclaim_min = 0;
    assert_int_equal((int)snapshot_setting(w.p, "reclaim_large"), 1);
    assert_true(snapshot_setting(w.p, "reclaim_min") == 3.0 * MiB);
    world_close(&w);
}

/* An opts record from before reclaim_min (its size ends there) gets the
 * configured value, not what lies past its end. */
static void test_opts_before_reclaim_min(void **state)
{
    (void)state;
    world w;
    world_open_backend(&w, VRAM_POLICY_VMM, 64 * MiB);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.size = offsetof(vram_pool_opts, reclaim_min);
    o.name = "events";
    o.backend = w.b;
    o.limit = w.f.capacity;
    o.decay_ms = 0;
    o.reclaim_min = 1 * MiB; /* past the size: not read */
    if (vram_pool_create(&o, &w.p))
        fail_msg("pool: %s", vram_last_error());
    assert_true(snapshot_setting(w.p, "reclaim_min") == 16.0 * MiB);
    world_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_own_and_shared_by_address, &POL_VMM),
        cmocka_unit_test_prestate(test_own_and_shared_by_address, &POL_SEG),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_VMM),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_VMM_LARGE),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_VMM_ABOVE),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_VMM_AT),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_SEG),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_SEG_LARGE),
        cmocka_unit_test_prestate(test_rejoin_before_large, &RJ_SEG_ABOVE),
        cmocka_unit_test(test_opts_stream_reclaim),
        cmocka_unit_test(test_opts_before_reclaim_min),
    };
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
