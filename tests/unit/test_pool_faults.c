/* tests/unit/test_pool_faults.c - backend failures, one call at a
 * time. A fixed deterministic workload (300 operations: allocations of mixed
 * sizes, some larger than the granularity, frees on two streams, in phases
 * of growth and shrinkage, a trim every 75 operations) followed by a closing
 * sequence (allocations after the workload, freeing everything, a trim - or,
 * in a second sweep, none, so that destroy finds memory still mapped - and
 * destroying the pool) first runs on a fault-free wrapper to count its N
 * backend calls. Then, for both policies, for k = 1 .. N+1, and for a single
 * failure (fail_count 1) and for every call from k on, the same sequence
 * runs on a sim backend wrapped by vram_backend_create_faulty(inner, k, n).
 * (The wrapper forwards to the inner sim's table directly, so the inner
 * backend's own counters stay 0; what the inner sim holds is measured from
 * outside, see the end.)
 *
 * What is asserted, after every operation:
 *  - allocations return 0, VRAM_ENOMEM or VRAM_EBACKEND (with *ptr NULL and a
 *    message); frees return 0;
 *  - live bytes and blocks, allocation, free and failure counts equal the
 *    model; new blocks are aligned, described by vram_pool_block_info, and
 *    overlap no live block;
 *  - reserved_bytes equals the bytes the wrapper saw the pool acquire and not
 *    give back (a failed unmap or segment free must leave the memory counted
 *    as reserved, not lost), and the pool's backend call and failure counts
 *    equal the wrapper's;
 *  - the wrapper's failed calls are exactly the injected ones: the inner sim
 *    refused nothing, i.e. the pool never unmapped or freed something twice
 *    or mapped something twice after a failure.
 * After a single failure the same pool must serve a new allocation (retried
 * once if the failure falls on that very allocation). When nothing is live,
 * destroy must succeed: it returns 0, or VRAM_EBACKEND only when an injected
 * failure hit one of its own calls; either way the wrapper is then free of
 * users (vram_backend_destroy gives 0, not VRAM_EBUSY).
 * Memory left behind: if no injected failure hit the destroy itself, the
 * pool must have given everything back (wrapper held bytes 0) - memory whose
 * unmap or free failed earlier is legitimately kept until then, and must be
 * returned at the latest by destroy. If failures continue through destroy,
 * the memory it could not return is lost (nothing else could be done); then
 * only held <= what was held before destroy is asserted. A trim before
 * destroy with no failure of its own must leave nothing reserved. Finally
 * the INNER sim is checked to hold exactly the bytes the wrapper still
 * counts: a fresh pool on it gets capacity - held bytes, and not 2 MiB more. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend_internal.h"
#include "vramkit.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024)

#define CAPACITY (256 * MiB)
#define GRAN (2 * MiB)
#define ALIGN 256u
#define N_OPS 300
#define MAX_LIVE 512

typedef struct fblock {
    uint64_t addr, size, req;
} fblock;

typedef struct frun {
    vram_policy policy;
    uint64_t k, count; /* the fault window */
    vram_backend *inner, *faulty;
    vram_pool *pool;
    fblock live[MAX_LIVE];
    size_t n_live;
    uint64_t live_bytes, allocs, frees, failed;
    uint64_t op;
    int quiet_ok;   /* counting run: every operation must succeed */
    int close_trim; /* trim before destroying (else destroy with memory mapped) */
} frun;

static void run_failf(const frun *r, const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg,
                     "[policy %s, %s, fail_from %" PRIu64 ", fail_count %s, op %" PRIu64 "] ",
                     vram_policy_name(r->policy), r->close_trim ? "trim" : "no trim", r->k,
                     r->count == 1 ? "1" : r->count == 0 ? "0" : "all", r->op);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    fail_msg("%s", msg);
}

#define R_CHECK(r, cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond))                                                                               \
            run_failf((r), __VA_ARGS__);                                                           \
    } while (0)

static vram_backend_stats bstats(const vram_backend *b)
{
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    return bs;
}

/* Injected failures so far: calls numbered k .. k+count-1 that happened. */
static uint64_t injected(const frun *r)
{
    uint64_t calls = bstats(r->faulty).calls;
    if (calls < r->k || r->count == 0)
        return 0;
    uint64_t last = r->k + r->count - 1 < r->k ? UINT64_MAX : r->k + r->count - 1;
    return (calls < last ? calls : last) - r->k + 1;
}

static int window_passed(const frun *r)
{
    return r->count == 1 && bstats(r->faulty).calls >= r->k;
}

static void check_state(frun *r)
{
    vram_pool_stats st;
    R_CHECK(r, vram_pool_stats_get(r->pool, &st) == 0, "stats_get");
    vram_backend_stats bs = bstats(r->faulty);
    R_CHECK(r,
            st.live_bytes == r->live_bytes && st.live_blocks == r->n_live &&
                st.allocs_total == r->allocs && st.frees_total == r->frees &&
                st.failed_allocs_total == r->failed,
            "pool live %" PRIu64 " bytes in %" PRIu64 " blocks, %" PRIu64 " allocs, %" PRIu64
            " frees, %" PRIu64 " failed; model %" PRIu64 " in %zu, %" PRIu64 ", %" PRIu64
            ", %" PRIu64,
            st.live_bytes, st.live_blocks, st.allocs_total, st.frees_total,
            st.failed_allocs_total, r->live_bytes, r->n_live, r->allocs, r->frees, r->failed);
    R_CHECK(r, st.reserved_bytes == bs.held_bytes,
            "pool reports %" PRIu64 " reserved, the wrapper saw it keep %" PRIu64,
            st.reserved_bytes, bs.held_bytes);
    R_CHECK(r, st.backend_calls_total == bs.calls && st.backend_failures_total == bs.failed_calls,
            "pool counts %" PRIu64 " backend calls (%" PRIu64 " failed), the wrapper %" PRIu64
            " (%" PRIu64 ")",
            st.backend_calls_total, st.backend_failures_total, bs.calls, bs.failed_calls);
    R_CHECK(r, bs.failed_calls == injected(r),
            "%" PRIu64 " backend calls failed but %" PRIu64
            " failures were injected: the inner sim refused a call (%s)",
            bs.failed_calls, injected(r), vram_last_error());
    R_CHECK(r, st.reserved_bytes <= CAPACITY, "reserved %" PRIu64 " > capacity",
            st.reserved_bytes);
}

/* Returns the allocation's code. */
static int run_alloc(frun *r, uint64_t size, vram_kind kind, vram_stream s)
{
    r->op++;
    void *ptr = (void *)(uintptr_t)0xdead;
    vram_clear_error();
    int rc = vram_pool_alloc(r->pool, size, VRAM_OWNER_DEFAULT, kind, s, &ptr);
    if (rc) {
        R_CHECK(r, !r->quiet_ok, "fault-free run: allocation of %" PRIu64 ": %s: %s", size,
                vram_err_name(rc), vram_last_error());
        R_CHECK(r, rc == VRAM_ENOMEM || rc == VRAM_EBACKEND,
                "allocation of %" PRIu64 " failed with %s: %s", size, vram_err_name(rc),
                vram_last_error());
        R_CHECK(r, ptr == NULL, "failed allocation left *ptr = %p", ptr);
        R_CHECK(r, vram_last_error()[0] != '\0', "failed allocation without a message");
        r->failed++;
        check_state(r);
        return rc;
    }
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    R_CHECK(r, ptr && a % ALIGN == 0, "block %p not aligned", ptr);
    vram_block_info bi;
    R_CHECK(r, vram_pool_block_info(r->pool, ptr, &bi) == 0, "block_info of a new block");
    R_CHECK(r, bi.requested == size && bi.size >= size, "block_info: %" PRIu64 "/%" PRIu64,
            bi.requested, bi.size);
    for (size_t i = 0; i < r->n_live; i++)
        R_CHECK(r, a + bi.size <= r->live[i].addr || r->live[i].addr + r->live[i].size <= a,
                "new block 0x%" PRIx64 "+%" PRIu64 " overlaps live 0x%" PRIx64 "+%" PRIu64, a,
                bi.size, r->live[i].addr, r->live[i].size);
    R_CHECK(r, r->n_live < MAX_LIVE, "too many live blocks for the test");
    r->live[r->n_live++] = (fblock){a, bi.size, size};
    r->live_bytes += size;
    r->allocs++;
    check_state(r);
    return 0;
}

static void run_free(frun *r, size_t i, vram_stream s)
{
    r->op++;
    fblock b = r->live[i];
    int rc = vram_pool_free(r->pool, (void *)(uintptr_t)b.addr, s);
    R_CHECK(r, rc == 0, "free of 0x%" PRIx64 ": %s: %s", b.addr, vram_err_name(rc),
            vram_last_error());
    r->live[i] = r->live[--r->n_live];
    r->live_bytes -= b.req;
    r->frees++;
    check_state(r);
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static vram_stream stream_of(uint64_t i) { return (vram_stream)(uintptr_t)(0x1 + (i & 1)); }

/* The fixed workload: deterministic given the pool's answers. */
static void workload(frun *r)
{
    static const uint64_t sizes[] = {
        100,         256,         1000,    4 * KiB,  16 * KiB + 3, 64 * KiB, 200 * KiB,
        1 * MiB,     1 * MiB + 1, 3 * MiB, 5 * MiB,  11 * MiB + 5, 24 * MiB, 2 * MiB,
        700 * KiB,   33,
    };
    uint64_t rs = 42;
    for (int i = 0; i < N_OPS; i++) {
        uint64_t x = rng_next(&rs);
        if (i % 75 == 74) {
            r->op++;
            uint64_t released = 0;
            int rc = vram_pool_trim(r->pool, &released);
            R_CHECK(r, rc == 0 || (rc == VRAM_EBACKEND && injected(r) > 0),
                    "trim: %s: %s", vram_err_name(rc), vram_last_error());
            check_state(r);
            continue;
        }
        /* Phases of growth and shrinkage, so that segments and granules
         * fall free and trims have something to return. */
        int growing = (i / 60) % 2 == 0;
        int want_alloc = r->n_live == 0 || (r->n_live < 40 && x % 100 < (growing ? 75u : 20u));
        if (want_alloc) {
            uint64_t size = sizes[(x >> 8) % (sizeof sizes / sizeof *sizes)];
            run_alloc(r, size, (vram_kind)((x >> 20) % VRAM_KIND_COUNT), stream_of(x >> 30));
        } else {
            run_free(r, (size_t)((x >> 8) % r->n_live), stream_of(x >> 30));
        }
    }
}

/* Bytes the inner sim has handed out, measured from outside: a fresh pool on
 * it must get capacity - held bytes in one block, and then not 2 MiB more. */
static void check_inner_holds(frun *r, uint64_t held)
{
    vram_pool_opts o;
    R_CHECK(r, vram_pool_opts_init(&o) == 0, "opts_init");
    o.backend = r->inner;
    o.policy = VRAM_POLICY_SEGMENTS;
    vram_pool *fresh = NULL;
    R_CHECK(r, vram_pool_create(&o, &fresh) == 0, "fresh pool on the inner sim: %s",
            vram_last_error());
    uint64_t room = CAPACITY - held;
    void *a = NULL, *b = NULL;
    if (room >= 12 * MiB) { /* a large request: a segment of exactly that size */
        int rc = vram_pool_alloc(fresh, room, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL, &a);
        R_CHECK(r, rc == 0,
                "the inner sim should have %" PRIu64 " bytes free (the wrapper says %" PRIu64
                " held) but refuses them: %s",
                room, held, vram_last_error());
    }
    int rc = vram_pool_alloc(fresh, 2 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL, &b);
    if (room >= 12 * MiB)
        R_CHECK(r, rc == VRAM_ENOMEM,
                "the inner sim has more than the %" PRIu64 " bytes free that the wrapper "
                "accounts for (%s)",
                room, vram_err_name(rc));
    if (b)
        vram_pool_free(fresh, b, NULL);
    if (a)
        vram_pool_free(fresh, a, NULL);
    R_CHECK(r, vram_pool_destroy(fresh) == 0, "destroying the fresh pool: %s", vram_last_error());
}

/* One whole run; returns the wrapper's call count at the end. */
static uint64_t run_once(vram_policy policy, int close_trim, uint64_t k, uint64_t count,
                         int quiet_ok)
{
    frun *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->policy = policy;
    r->k = k;
    r->count = count;
    r->quiet_ok = quiet_ok;
    r->close_trim = close_trim;
    vram_backend_opts bo = {.capacity = CAPACITY, .granularity = GRAN};
    assert_int_equal(vram_backend_create("sim", &bo, &r->inner), 0);
    assert_int_equal(vram_backend_create_faulty(r->inner, k, count, &r->faulty), 0);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.backend = r->faulty;
    o.policy = policy;
    o.alignment = ALIGN;
    o.limit = 0;        /* the capacity: memory goes back when it runs out and on trim */
    o.decay_ms = 0;     /* every backend call made by the test's thread, in order */
    int rc = vram_pool_create(&o, &r->pool);
    if (rc) {
        R_CHECK(r, !quiet_ok && (rc == VRAM_ENOMEM || rc == VRAM_EBACKEND),
                "pool creation: %s: %s", vram_err_name(rc), vram_last_error());
        R_CHECK(r, r->pool == NULL, "failed creation left a pool");
        R_CHECK(r, bstats(r->faulty).failed_calls == injected(r), "creation: inner refused a call");
        uint64_t held = bstats(r->faulty).held_bytes;
        R_CHECK(r, held == 0, "failed creation kept %" PRIu64 " bytes", held);
        uint64_t calls = bstats(r->faulty).calls;
        rc = vram_backend_destroy(r->faulty);
        R_CHECK(r, rc == 0, "wrapper still used after a failed pool creation: %s",
                vram_err_name(rc));
        check_inner_holds(r, 0);
        assert_int_equal(vram_backend_destroy(r->inner), 0);
        free(r);
        return calls;
    }
    check_state(r);
    workload(r);

    /* An allocation after the workload: after a single failure the pool must
     * serve it (a retry is allowed when the failure falls on it). */
    for (int big = 0; big < 2; big++) {
        uint64_t size = big ? 9 * MiB : 3000;
        int was_passed = window_passed(r);
        rc = run_alloc(r, size, VRAM_KIND_IO, stream_of(0));
        if (rc && count == 1) {
            R_CHECK(r, !was_passed, "after the single failure the pool cannot allocate %" PRIu64
                                    ": %s", size, vram_last_error());
            rc = run_alloc(r, size, VRAM_KIND_IO, stream_of(0));
            R_CHECK(r, rc == 0, "after the single failure the pool cannot allocate %" PRIu64
                                ": %s", size, vram_last_error());
        }
        if (rc == 0)
            run_free(r, r->n_live - 1, stream_of(0));
    }

    /* Close: free everything, trim, destroy. */
    while (r->n_live)
        run_free(r, r->n_live - 1, stream_of(r->n_live));
    if (close_trim) {
        r->op++;
        uint64_t before_trim = injected(r);
        uint64_t released = 0;
        rc = vram_pool_trim(r->pool, &released);
        R_CHECK(r, rc == 0 || (rc == VRAM_EBACKEND && injected(r) > before_trim),
                "trim with nothing live: %s: %s", vram_err_name(rc), vram_last_error());
        check_state(r);
        if (injected(r) == before_trim) { /* no failure in the trim: nothing stays */
            vram_pool_stats st;
            R_CHECK(r, vram_pool_stats_get(r->pool, &st) == 0, "stats_get");
            R_CHECK(r, st.reserved_bytes == 0 && rc == 0,
                    "a trim without failures left %" PRIu64 " bytes reserved (%s)",
                    st.reserved_bytes, vram_err_name(rc));
        }
    }

    r->op++;
    vram_backend_stats before = bstats(r->faulty);
    rc = vram_pool_destroy(r->pool);
    r->pool = NULL;
    vram_backend_stats after = bstats(r->faulty);
    uint64_t failed_in_destroy = after.failed_calls - before.failed_calls;
    R_CHECK(r, after.failed_calls == injected(r), "destroy: the inner sim refused a call");
    R_CHECK(r, rc == 0 || (rc == VRAM_EBACKEND && failed_in_destroy > 0),
            "destroy with nothing live: %s: %s (%" PRIu64 " injected failures in it)",
            vram_err_name(rc), vram_last_error(), failed_in_destroy);
    if (failed_in_destroy == 0)
        R_CHECK(r, after.held_bytes == 0,
                "the pool was destroyed without a backend failure but %" PRIu64
                " bytes stay with the backend (held before destroy: %" PRIu64 ")",
                after.held_bytes, before.held_bytes);
    else
        R_CHECK(r, after.held_bytes <= before.held_bytes, "destroy acquired memory");
    uint64_t calls = after.calls;
    rc = vram_backend_destroy(r->faulty);
    R_CHECK(r, rc == 0, "wrapper still in use after the pool's destruction: %s",
            vram_err_name(rc));
    check_inner_holds(r, after.held_bytes);
    assert_int_equal(vram_backend_destroy(r->inner), 0);
    free(r);
    return calls;
}

static void fault_sweep(vram_policy policy)
{
    for (int close_trim = 1; close_trim >= 0; close_trim--) {
        /* Fault-free: count the calls (and check that everything succeeds). */
        uint64_t n = run_once(policy, close_trim, UINT64_MAX, 0, 1);
        assert_true(n >= 4);
        uint64_t n2 = run_once(policy, close_trim, UINT64_MAX, 0, 1);
        assert_int_equal(n, n2); /* deterministic */
        print_message("%s, %s before destroy: the sequence makes %" PRIu64 " backend calls\n",
                      vram_policy_name(policy), close_trim ? "trim" : "no trim", n);
        for (uint64_t k = 1; k <= n + 1; k++) {
            run_once(policy, close_trim, k, 1, 0);
            run_once(policy, close_trim, k, UINT64_MAX - k, 0); /* every call from k on */
        }
    }
}

static void test_faults_vmm(void **state)
{
    (void)state;
    fault_sweep(VRAM_POLICY_VMM);
}

static void test_faults_segments(void **state)
{
    (void)state;
    fault_sweep(VRAM_POLICY_SEGMENTS);
}

static uint64_t log_lines;

static void count_log(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    (void)line;
    log_lines++; /* the pool warns of each refused release: expected here */
}

int main(void)
{
    vram_log_set_handler(count_log, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_faults_vmm),
        cmocka_unit_test(test_faults_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
