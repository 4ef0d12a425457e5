/* tests/common/test_rand.h - seeded random numbers and float buffers for
 * the kernel tests (cmocka programs: include after cmocka.h). xorshift64*,
 * so a failing case is the same on every run and machine. */
#ifndef VRAM_TESTS_COMMON_TEST_RAND_H
#define VRAM_TESTS_COMMON_TEST_RAND_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static inline uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static inline int64_t irand(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1));
}

static inline float frand(void) /* uniform in [-1, 1) */
{
    return (float)((double)(rng() >> 40) / (double)(1u << 23) - 1.0);
}

/* n random floats (at least one), freed by the caller. */
static inline float *rand_buf(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

#endif
