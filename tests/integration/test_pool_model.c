/* tests/integration/test_pool_model.c - randomized model-based test of the
 * pool. For both policies and several seeds, about 20,000 random operations
 * (allocations of log-uniform sizes from 1 B to 64 MiB, mostly small, for 4
 * owners of which two have budgets, of random kinds, on 3 streams; frees of
 * random live blocks on random streams; double frees; trims; budget changes)
 * run against a reference model: the set of live blocks. After every
 * operation the pool's statistics must equal the model's; periodically every
 * live block is looked up and the set is checked for overlap. The stream
 * rule is checked on every allocation: a block freed on stream A must not be
 * handed to another stream before A issued another operation on the pool or
 * the pool was trimmed (a trim synchronises). At the end, with everything
 * freed, a trim must leave nothing reserved and nothing held by the backend.
 *
 * The pool's options come from the seed (seed_opts): the first four seeds
 * run as they always did (no limit but the device's, no decay thread,
 * place_candidates 4); the others, chosen to cover every combination, run
 * with a limit of 0.5-0.9 of the capacity (a refusal must name it; reserved
 * and peak reserved never pass it, checked after every operation), with a
 * decay thread of 1-5 ms giving memory back concurrently with the
 * operations (the vmm policy unmaps with the pool's lock released, which is
 * what this exercises; pool_model.h says what is checked then), and with
 * place_candidates 0, 1, 4 or 32. A decay run lasts DECAY_RUN_MS at least,
 * alternating phases of many and of few live blocks.
 *
 * The stream rule with a decay thread: on the sim backend (no events) the
 * thread completes the pending frees of a pool that has seen no allocation
 * or free for decay_ms. Rather than a long decay for the runs that check
 * the rule, the model allows for it exactly where it can happen: after a
 * gap of decay_ms (less the millisecond of the thread's clock) between two
 * such operations, it forgets what must still be pending (pool_model.c,
 * counted_op). So the 2-5 ms runs check the rule as strictly as the others
 * on all but the few operations after such a gap, and the 1 ms runs (every
 * operation may follow a "gap" of 0 ms) check only that pending bytes do
 * not exceed what was freed.
 *
 * A failure prints the policy, the seed, its options and the operation
 * number; run one seed with VRAM_TEST_SEED=<n> (its options are the seed's);
 * VRAM_TEST_QUICK=1 runs fewer seeds and operations.
 * The model and its checks are tests/common/pool_model.c, shared with the
 * fuzzer tests/fuzz/fuzz_pool.c. Uses only the public API. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <vramkit.h>

#include "pool_model.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

/* ==== the randomized driver ================================================= */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static uint64_t rng_below(uint64_t *s, uint64_t n) { return rng_next(s) % n; }

/* 1 B .. 64 MiB, log-uniform in exponent with a bias to small sizes. */
static uint64_t rng_size(uint64_t *s)
{
    double u = rng_unit(s);
    double e = 26.0 * u * u;
    uint64_t size = (uint64_t)exp2(e);
    if (size < 1)
        size = 1;
    if (size > 64 * MiB)
        size = 64 * MiB;
    return size;
}

static void cmocka_fail(void *ctx, const char *msg)
{
    (void)ctx;
    fail_msg("%s", msg);
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

#define CAPACITY (384 * MiB)
#define DECAY_RUN_MS 1500
#define DECAY_PHASE_MS 100

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The seeds the test always ran, with the options they always had. */
static const uint64_t legacy_seeds[] = {1, 2, 3, 20240601};

/* The pool's options of a seed: the legacy seeds' as before; any other
 * seed's from a hash of it: place_candidates 0, 1, 4 or 32; in 3 of 4 a
 * limit of 0.5-0.9 of the capacity (half of them a multiple of the 2 MiB
 * granule, half not); in 2 of 3 a decay of 1-5 ms, keeping 0 or 16 MiB, and
 * in half of those pm_finish waits for the thread to give all back. */
static void seed_opts(uint64_t seed, pm_opts *o)
{
    *o = (pm_opts){.place_candidates = 4};
    for (size_t i = 0; i < sizeof legacy_seeds / sizeof *legacy_seeds; i++)
        if (seed == legacy_seeds[i])
            return;
    uint64_t hs = seed ^ 0x6f7074696f6e73ull, h = rng_next(&hs);
    static const uint32_t places[] = {0, 1, 4, 32};
    o->place_candidates = places[h & 3];
    if ((h >> 2) & 3) {
        double f = 0.5 + 0.4 * (double)((h >> 8) & 0xffff) / 65535.0;
        o->limit = (uint64_t)(f * (double)CAPACITY);
        o->limit = (h >> 24) & 1 ? o->limit / (2 * MiB) * (2 * MiB) : o->limit / 256 * 256 + 4352;
    }
    if ((h >> 32) % 3) {
        o->decay_ms = 1 + (h >> 36) % 5;
        o->retain_min = (h >> 44) & 1 ? 16 * MiB : 0;
        o->drain = (h >> 45) & 1;
    }
}

static void run_model(vram_policy policy, uint64_t seed, uint64_t n_ops, int must_refuse)
{
    pm_opts opts;
    seed_opts(seed, &opts);
    char where[256];
    snprintf(where, sizeof where,
             "policy %s, seed %" PRIu64 " (VRAM_TEST_SEED=%" PRIu64 "): limit %" PRIu64
             ", decay_ms %" PRIu64 ", retain_min %" PRIu64 ", place_candidates %u%s",
             vram_policy_name(policy), seed, seed, opts.limit, opts.decay_ms, opts.retain_min,
             (unsigned)opts.place_candidates, opts.drain ? ", drained" : "");
    pm_model h;
    const uint64_t budgets[PM_OWNERS] = {0, 48 * MiB, 160 * MiB, 0};
    pm_init(&h, policy, CAPACITY, budgets, &opts, cmocka_fail, NULL, where);
    uint64_t rs = seed * 0x2545f4914f6cdd1dull + 1;
    uint64_t last_freed = 0;
    uint64_t n_trim = 0, n_budget = 0, n_bad = 0;
    /* The decay thread's first round finds nothing free and sleeps its
     * longest, a second; from then on it comes back within ~10 ms as long
     * as memory is free (which the operations keep so). A decay run goes on
     * past n_ops until DECAY_RUN_MS have passed, so that the thread gives
     * memory back for a good part of it. */
    uint64_t t_start = now_ms(), i;
    for (i = 0; i < n_ops || (opts.decay_ms && now_ms() - t_start < DECAY_RUN_MS); i++) {
        double r = rng_unit(&rs);
        double p_alloc = h.n_live < 40 ? 0.7 : h.n_live > 300 ? 0.35 : 0.52;
        /* With a decay thread, every other DECAY_PHASE_MS run with few live
         * blocks, leaving memory (whole segments too) free long enough for
         * the thread to give it back while the operations go on, and to be
         * mapped again after. By time, not by count: sanitizers run far
         * fewer operations in a DECAY_RUN_MS. */
        if (opts.decay_ms && ((now_ms() - t_start) / DECAY_PHASE_MS) & 1)
            p_alloc = h.n_live < 4 ? 0.6 : 0.3;
        if (r < p_alloc || h.n_live == 0) {
            uint64_t size = rng_size(&rs);
            int owner = (int)rng_below(&rs, PM_OWNERS);
            int kind = (int)rng_below(&rs, VRAM_KIND_COUNT);
            int s = (int)rng_below(&rs, PM_STREAMS);
            pm_alloc(&h, size, owner, kind, s);
        } else if (r < 0.975) {
            size_t idx = (size_t)rng_below(&rs, h.n_live);
            int s = (int)rng_below(&rs, PM_STREAMS);
            last_freed = h.live[idx].addr;
            pm_free(&h, idx, s);
        } else if (r < 0.982) {
            /* A trim gives back all free memory, leaving the decay thread
             * nothing old enough: with one, trim 32 times less often
             * (every ~4500 operations). */
            if (!opts.decay_ms || rng_below(&rs, 32) == 0) {
                pm_trim(&h);
                n_trim++;
            }
        } else if (r < 0.990) {
            int owner = 1 + (int)rng_below(&rs, 2);
            static const uint64_t choices[] = {0, 8 * MiB, 48 * MiB, 160 * MiB, 1 * GiB};
            uint64_t b = choices[rng_below(&rs, 5)];
            if (rng_below(&rs, 4) == 0) /* below the live bytes, sometimes */
                b = h.u_owner[owner].live / 2 + 1;
            pm_set_budget(&h, owner, b);
            n_budget++;
        } else {
            uint64_t addr = rng_below(&rs, 2) ? last_freed : last_freed + 256;
            pm_bad_free(&h, addr, (int)rng_below(&rs, PM_STREAMS));
            n_bad++;
        }
        pm_check_stats(&h);
        if (i % 128 == 0)
            pm_check_full(&h);
    }
    pm_check_full(&h);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(h.p, &st), 0);
    print_message("%s: %" PRIu64 " ops, %" PRIu64 " allocations, %" PRIu64 " ENOMEM (%" PRIu64
                  " naming the limit), %" PRIu64 " EBUDGET, %" PRIu64 " trims, %" PRIu64
                  " budget changes, %" PRIu64 " bad frees, peak live %.1f MiB, peak reserved "
                  "%.1f MiB, %.1f MiB released (%.1f MiB by the decay), %" PRIu64
                  " reuses of ranges freed just before a failed call, %" PRIu64
                  " operations after a gap of decay_ms\n",
                  where, i, h.u_pool.allocs, h.n_enomem, h.n_enomem_limit, h.n_ebudget, n_trim,
                  n_budget, n_bad, (double)h.u_pool.peak / MiB,
                  (double)st.peak_reserved_bytes / MiB, (double)st.released_bytes_total / MiB,
                  (double)st.decay_released_bytes_total / MiB, h.ambiguous_reuse, h.idle_gaps);
    /* The default seeds are known to exercise both refusals, those with a
     * limit refusals by it, those with a decay thread its giving back: keep
     * it so. (What a decay run does depends on the speed of the build, its
     * phases and the thread's rounds being timed: only the giving back is
     * required of it.) */
    if (must_refuse && i >= 10000 && !opts.decay_ms) {
        assert_true(h.n_enomem > 0);
        assert_true(h.n_ebudget > 0);
        if (opts.limit)
            assert_true(h.n_enomem_limit > 0);
    }
    if (must_refuse && opts.decay_ms && !st.decay_released_bytes_total &&
        st.reserved_bytes > st.allocated_bytes) {
        /* Nothing stayed free for decay_ms while the run went on (a busy
         * machine): once the pool is left alone, the thread must give back. */
        struct timespec ts = {0, (long)(opts.decay_ms + 600) * 1000000L};
        nanosleep(&ts, NULL);
        assert_int_equal(vram_pool_stats_counters(h.p, &st), 0);
    }
    if (must_refuse && opts.decay_ms && !st.decay_released_bytes_total) {
        /* Then it must be because nothing could go back: a trim (pending
         * frees completed first) finds no more than retain_min to give. */
        uint64_t released = 0;
        assert_int_equal(vram_pool_trim(h.p, &released), 0);
        if (released > opts.retain_min + st.pending_bytes)
            fail_msg("%s: the decay thread gave back nothing, a trim then %" PRIu64 " bytes",
                     where, released);
    }
    pm_finish(&h);
}

static void run_policy(vram_policy policy)
{
    uint64_t n_ops = env_flag("VRAM_TEST_QUICK") ? 3000 : 20000;
    const char *forced = getenv("VRAM_TEST_SEED");
    if (forced && *forced) {
        run_model(policy, strtoull(forced, NULL, 0), n_ops, 0);
        return;
    }
    /* The legacy seeds, then one seed (seed_opts) for each combination of
     * place_candidates (0, 1, 4, 32), a limit or none, a decay thread or
     * none, and two more with a limit and a decay of 2 or 3 ms. The ten
     * with a decay thread take DECAY_RUN_MS each. */
    static const uint64_t seeds[] = {
        1,   2,   3,   20240601, /* legacy */
        142, 124, 126, 108,      /* place 0: -, decay 1, limit, limit + decay 5 */
        138, 152, 129, 104,      /* place 1: -, decay 4, limit, limit + decay 5 */
        309, 101, 122, 102,      /* place 4: -, decay 4, limit, limit + decay 1 */
        123, 100, 103, 106,      /* place 32: -, decay 1, limit, limit + decay 5 */
        277, 287,                /* limit + decay 2, limit + decay 3 (place 0, 1) */
    };
    /* Quick: a legacy seed, and limits with decays of 1, 3 and 5 ms. */
    static const uint64_t quick[] = {1, 102, 287, 106};
    int q = env_flag("VRAM_TEST_QUICK");
    size_t n = q ? sizeof quick / sizeof *quick : sizeof seeds / sizeof *seeds;
    for (size_t i = 0; i < n; i++)
        run_model(policy, q ? quick[i] : seeds[i], n_ops, 1);
}

static void test_model_vmm(void **state)
{
    (void)state;
    run_policy(VRAM_POLICY_VMM);
}

static void test_model_segments(void **state)
{
    (void)state;
    run_policy(VRAM_POLICY_SEGMENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_vmm),
        cmocka_unit_test(test_model_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
