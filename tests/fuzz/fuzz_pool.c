/* tests/fuzz/fuzz_pool.c - libFuzzer target: the input is a sequence of pool
 * operations run against the reference model of tests/common/pool_model.c
 * (shared with tests/integration/test_pool_model.c); any violated
 * invariant aborts. Nothing leaks: every input ends by freeing everything,
 * trimming and destroying the pool and its backend.
 *
 * Input: byte 0 chooses the policy (bit 0), the sim capacity (bits 1-2:
 * 32, 64, 128 or 256 MiB), the pool's limit (bits 3-4: none, i.e. the
 * capacity, or 5, 7 or 9 times a tenth of it rounded down, so no multiple of
 * the 2 MiB granule), a decay thread (bit 5) and place_candidates (bits 6-7: 4,
 * 0, 1 or 32; 0 reads as the default the corpus was made with). With bit 5,
 * byte 1 gives decay_ms (1 + bits 0-2 mod 5) and retain_min (bit 3: 4 MiB,
 * else 0). Then operations, each an opcode byte (mod 8):
 *   0-2 alloc:  3 bytes: exponent (mod 27), 16-bit mantissa -> size in
 *               [2^e, 2^(e+1)) clamped to 64 MiB; 1 byte: owner (bits 0-1),
 *               kind (bits 2-4, mod 7), stream (bits 5-7, mod 3)
 *   3-4 free:   2 bytes: index into the live blocks; 1 byte: stream (mod 3)
 *   5   trim
 *   6   budget: 1 byte: owner 1 or 2 (bit 0), budget from a table (bits 1-3)
 *   7   bad free: 1 byte: the last freed address or 256 past it (bit 0),
 *               stream (bits 1-2, mod 3)
 * Missing bytes read as 0. At most 4096 operations. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vramkit.h>

#include "pool_model.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

static void fuzz_fail(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "fuzz_pool: invariant violated: %s\n", msg);
    abort();
}

static void quiet_log(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    (void)line;
}

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static uint8_t rd(reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        vram_log_set_handler(quiet_log, NULL);
        once = 1;
    }
    if (size < 1)
        return 0;
    reader r = {data, size, 0};
    uint8_t head = rd(&r);
    vram_policy policy = head & 1 ? VRAM_POLICY_SEGMENTS : VRAM_POLICY_VMM;
    uint64_t capacity = (32 * MiB) << ((head >> 1) & 3);
    static const uint64_t budgets[PM_OWNERS] = {0, 8 * MiB, 24 * MiB, 0};
    static const uint32_t places[4] = {4, 0, 1, 32};
    pm_opts opts = {.place_candidates = places[(head >> 6) & 3]};
    static const unsigned tenths[4] = {0, 5, 7, 9};
    opts.limit = capacity / 10 * tenths[(head >> 3) & 3];
    if (head & 0x20) {
        uint8_t x = rd(&r);
        opts.decay_ms = 1 + (x & 7) % 5;
        opts.retain_min = x & 8 ? 4 * MiB : 0;
    }
    char where[128];
    snprintf(where, sizeof where, "%s, limit %llu, decay_ms %llu, retain_min %llu, place %u",
             vram_policy_name(policy), (unsigned long long)opts.limit,
             (unsigned long long)opts.decay_ms, (unsigned long long)opts.retain_min,
             (unsigned)opts.place_candidates);
    pm_model h;
    pm_init(&h, policy, capacity, budgets, &opts, fuzz_fail, NULL, where);
    uint64_t last_freed = 0;
    for (int n_ops = 0; r.at < r.n && n_ops < 4096; n_ops++) {
        uint8_t op = rd(&r) % 8;
        if (op <= 2) {
            unsigned e = rd(&r) % 27;
            uint64_t mant = (uint64_t)rd(&r) << 8;
            mant |= rd(&r);
            uint64_t sz = (1ull << e) + (mant % (1ull << e));
            if (sz > 64 * MiB)
                sz = 64 * MiB;
            uint8_t x = rd(&r);
            pm_alloc(&h, sz, x & 3, ((x >> 2) & 7) % VRAM_KIND_COUNT,
                     ((x >> 5) & 7) % PM_STREAMS);
        } else if (op <= 4) {
            unsigned idx = (unsigned)rd(&r) << 8;
            idx |= rd(&r);
            int s = rd(&r) % PM_STREAMS;
            if (h.n_live) {
                size_t i = idx % h.n_live;
                last_freed = h.live[i].addr;
                pm_free(&h, i, s);
            }
        } else if (op == 5) {
            pm_trim(&h);
        } else if (op == 6) {
            static const uint64_t table[8] = {0, 1, 4096, 1 * MiB, 8 * MiB, 24 * MiB, 64 * MiB, GiB};
            uint8_t x = rd(&r);
            pm_set_budget(&h, 1 + (x & 1), table[(x >> 1) & 7]);
        } else {
            uint8_t x = rd(&r);
            pm_bad_free(&h, x & 1 ? last_freed + 256 : last_freed, ((x >> 1) & 3) % PM_STREAMS);
        }
        pm_check_stats(&h);
        if (n_ops % 64 == 0)
            pm_check_full(&h);
    }
    pm_check_full(&h);
    /* Free everything, trim (which completes pending frees), destroy:
     * nothing may stay reserved or held. */
    pm_finish(&h);
    return 0;
}
