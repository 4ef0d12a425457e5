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
 * A failure prints the policy, the seed and the operation number; run one
 * seed with VRAM_TEST_SEED=<n>; VRAM_TEST_QUICK=1 runs fewer operations.
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

static void run_model(vram_policy policy, uint64_t seed, uint64_t n_ops, int must_refuse)
{
    char where[128];
    snprintf(where, sizeof where, "policy %s, seed %" PRIu64 " (VRAM_TEST_SEED=%" PRIu64 ")",
             vram_policy_name(policy), seed, seed);
    pm_model h;
    const uint64_t budgets[PM_OWNERS] = {0, 48 * MiB, 160 * MiB, 0};
    pm_init(&h, policy, 384 * MiB, budgets, cmocka_fail, NULL, where);
    uint64_t rs = seed * 0x2545f4914f6cdd1dull + 1;
    uint64_t last_freed = 0;
    uint64_t n_trim = 0, n_budget = 0, n_bad = 0;
    for (uint64_t i = 0; i < n_ops; i++) {
        double r = rng_unit(&rs);
        double p_alloc = h.n_live < 40 ? 0.7 : h.n_live > 300 ? 0.35 : 0.52;
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
            pm_trim(&h);
            n_trim++;
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
    print_message("%s: %" PRIu64 " ops, %" PRIu64 " allocations, %" PRIu64 " ENOMEM, %" PRIu64
                  " EBUDGET, %" PRIu64 " trims, %" PRIu64 " budget changes, %" PRIu64
                  " bad frees, peak live %.1f MiB, %" PRIu64
                  " reuses of ranges freed just before a failed call\n",
                  where, n_ops, h.u_pool.allocs, h.n_enomem, h.n_ebudget, n_trim, n_budget, n_bad,
                  (double)h.u_pool.peak / MiB, h.ambiguous_reuse);
    /* The default seeds are known to exercise both refusals: keep it so. */
    if (must_refuse && n_ops >= 10000) {
        assert_true(h.n_enomem > 0);
        assert_true(h.n_ebudget > 0);
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
    static const uint64_t seeds[] = {1, 2, 3, 20240601};
    size_t n = env_flag("VRAM_TEST_QUICK") ? 1 : sizeof seeds / sizeof *seeds;
    for (size_t i = 0; i < n; i++)
        run_model(policy, seeds[i], n_ops, 1);
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
