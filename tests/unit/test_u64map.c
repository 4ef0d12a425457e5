/* tests/unit/test_u64map.c - the open-addressing uint64 map of
 * src/core/base/u64map.h: put/get/del and replacement, growth past many keys with
 * the load kept at or under one half, backward-shift deletion that keeps every
 * probe chain intact (a 100k-operation random sequence against a reference
 * array, with keys chosen to share home slots and wrap around the table's
 * end), and vram__u64map_reserve's promise that the following puts do not
 * grow the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/u64map.h"

/* ---- helpers --------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t home_of(const vram__u64map *m, uint64_t key)
{
    return (size_t)vram__u64map_hash(key) & m->mask;
}

/* Structural invariants: count matches the occupied slots, load <= 1/2, and
 * every stored key is reachable from its home slot without crossing an empty
 * slot (the property backward-shift deletion must preserve). */
static void check_structure(const vram__u64map *m)
{
    size_t cap = m->mask + 1;
    assert_true(vram__is_pow2(cap));
    size_t used = 0;
    for (size_t i = 0; i < cap; i++) {
        if (!m->keys[i])
            continue;
        used++;
        for (size_t j = home_of(m, m->keys[i]); j != i; j = (j + 1) & m->mask)
            if (!m->keys[j])
                fail_msg("key 0x%llx at slot %zu is cut off from its home %zu by the hole at %zu",
                         (unsigned long long)m->keys[i], i, home_of(m, m->keys[i]), j);
    }
    assert_int_equal(used, m->count);
    assert_true(m->count * 2 <= cap);
}

static uint64_t get_or(const vram__u64map *m, uint64_t key, uint64_t dflt)
{
    uint64_t v = dflt;
    return vram__u64map_get(m, key, &v) ? v : dflt;
}

/* ---- tests ------------------------------------------------------------- */

static void test_basic(void **state)
{
    (void)state;
    vram__u64map m;
    assert_int_equal(vram__u64map_init(&m, 0), 0);
    assert_int_equal(m.count, 0);
    assert_true(m.mask + 1 >= 16);

    uint64_t v = 99;
    assert_int_equal(vram__u64map_get(&m, 1, &v), 0);
    assert_int_equal(v, 99);
    assert_int_equal(vram__u64map_del(&m, 1, &v), 0);
    assert_int_equal(v, 99);

    assert_int_equal(vram__u64map_put(&m, 1, 100), 0);
    assert_int_equal(vram__u64map_put(&m, 0x100000000000ull, 200), 0);
    assert_int_equal(vram__u64map_put(&m, UINT64_MAX, 300), 0);
    assert_int_equal(vram__u64map_put(&m, 5, 0), 0); /* a zero value is a value */
    assert_int_equal(m.count, 4);
    assert_int_equal(vram__u64map_get(&m, 1, &v), 1);
    assert_int_equal(v, 100);
    assert_int_equal(vram__u64map_get(&m, 0x100000000000ull, &v), 1);
    assert_int_equal(v, 200);
    assert_int_equal(vram__u64map_get(&m, UINT64_MAX, &v), 1);
    assert_int_equal(v, 300);
    assert_int_equal(vram__u64map_get(&m, 5, &v), 1);
    assert_int_equal(v, 0);
    assert_int_equal(vram__u64map_get(&m, 2, &v), 0);

    /* Replace keeps the count. */
    assert_int_equal(vram__u64map_put(&m, 1, 101), 0);
    assert_int_equal(m.count, 4);
    assert_int_equal(get_or(&m, 1, 0), 101);

    /* Delete hands the value back, once. */
    v = 0;
    assert_int_equal(vram__u64map_del(&m, 1, &v), 1);
    assert_int_equal(v, 101);
    assert_int_equal(m.count, 3);
    assert_int_equal(vram__u64map_get(&m, 1, &v), 0);
    assert_int_equal(vram__u64map_del(&m, 1, &v), 0);
    assert_int_equal(vram__u64map_del(&m, UINT64_MAX, NULL), 1); /* val may be NULL */
    assert_int_equal(m.count, 2);
    assert_int_equal(get_or(&m, 0x100000000000ull, 0), 200);
    check_structure(&m);

    /* Reinsertion after deletion. */
    assert_int_equal(vram__u64map_put(&m, 1, 7), 0);
    assert_int_equal(get_or(&m, 1, 0), 7);
    assert_int_equal(m.count, 3);

    vram__u64map_destroy(&m);
    assert_null(m.keys);
    assert_null(m.vals);
    assert_int_equal(m.count, 0);
}

static void test_init_sizes(void **state)
{
    (void)state;
    static const size_t expected[] = {0, 1, 7, 8, 9, 100, 1000, 4096};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        vram__u64map m;
        assert_int_equal(vram__u64map_init(&m, expected[i]), 0);
        assert_true(vram__is_pow2(m.mask + 1));
        assert_true(m.mask + 1 >= 2 * expected[i]);
        /* `expected` keys fit without growing. */
        uint64_t *keys = m.keys;
        size_t mask = m.mask;
        for (size_t k = 0; k < expected[i]; k++)
            assert_int_equal(vram__u64map_put(&m, (k + 1) << 20, k), 0);
        assert_ptr_equal(m.keys, keys);
        assert_int_equal(m.mask, mask);
        check_structure(&m);
        vram__u64map_destroy(&m);
    }
}

static void test_growth(void **state)
{
    (void)state;
    vram__u64map m;
    assert_int_equal(vram__u64map_init(&m, 4), 0);
    const size_t n = 200000;
    size_t grows = 0, last_cap = m.mask + 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = (uint64_t)(i + 1) << 20; /* multiples of 2^20, as addresses */
        assert_int_equal(vram__u64map_put(&m, key, i * 3), 0);
        assert_int_equal(m.count, i + 1);
        assert_true(m.count * 2 <= m.mask + 1);
        if (m.mask + 1 != last_cap) {
            assert_int_equal(m.mask + 1, last_cap * 2); /* doubles */
            last_cap = m.mask + 1;
            grows++;
        }
    }
    assert_true(grows >= 14);
    check_structure(&m);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        assert_int_equal(vram__u64map_get(&m, (uint64_t)(i + 1) << 20, &v), 1);
        assert_int_equal(v, i * 3);
    }
    /* Keys in between were never put. */
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(get_or(&m, ((uint64_t)(i + 1) << 20) + 256, 12345), 12345);
    /* Delete every other key; the rest stay reachable. */
    for (size_t i = 0; i < n; i += 2)
        assert_int_equal(vram__u64map_del(&m, (uint64_t)(i + 1) << 20, NULL), 1);
    assert_int_equal(m.count, n / 2);
    check_structure(&m);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(get_or(&m, (uint64_t)(i + 1) << 20, UINT64_MAX),
                         i % 2 ? i * 3 : UINT64_MAX);
    vram__u64map_destroy(&m);
}

/* Keys that all share one home slot in a table of `cap` slots, and keys whose
 * home is the last slot (so their probe runs wrap to slot 0). */
static size_t pick_keys(size_t cap, size_t want_home, uint64_t *out, size_t n)
{
    size_t got = 0;
    for (uint64_t k = 1; got < n && k < (1ull << 40); k++) {
        uint64_t key = k << 20;
        if ((vram__u64map_hash(key) & (cap - 1)) == want_home)
            out[got++] = key;
    }
    return got;
}

static void test_collisions_and_wraparound(void **state)
{
    (void)state;
    vram__u64map m;
    assert_int_equal(vram__u64map_init(&m, 32), 0); /* 64 slots */
    size_t cap = m.mask + 1;
    assert_int_equal(cap, 64);
    uint64_t same[12], last[8];
    assert_int_equal(pick_keys(cap, 7, same, 12), 12);
    assert_int_equal(pick_keys(cap, cap - 1, last, 8), 8);

    for (size_t i = 0; i < 12; i++)
        assert_int_equal(vram__u64map_put(&m, same[i], i), 0);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(vram__u64map_put(&m, last[i], 100 + i), 0);
    assert_int_equal(m.mask + 1, cap); /* 20 keys: no growth */
    /* The run from slot 63 wraps: slots 0..6 are used by it. */
    assert_int_equal(m.keys[cap - 1], last[0]);
    assert_int_not_equal(m.keys[0], 0);
    check_structure(&m);

    /* Delete from the head, the middle and the tail of each run, checking
     * every remaining key after each deletion. */
    static const size_t order_same[] = {0, 6, 11, 3, 1, 10, 2, 9, 4, 8, 5, 7};
    static const size_t order_last[] = {0, 7, 3, 1, 6, 2, 5, 4};
    int gone_same[12] = {0}, gone_last[8] = {0};
    for (size_t step = 0; step < 12; step++) {
        size_t i = order_same[step];
        uint64_t v = 0;
        assert_int_equal(vram__u64map_del(&m, same[i], &v), 1);
        assert_int_equal(v, i);
        gone_same[i] = 1;
        if (step < 8) {
            size_t j = order_last[step];
            assert_int_equal(vram__u64map_del(&m, last[j], &v), 1);
            assert_int_equal(v, 100 + j);
            gone_last[j] = 1;
        }
        check_structure(&m);
        for (size_t k = 0; k < 12; k++)
            assert_int_equal(get_or(&m, same[k], 999), gone_same[k] ? 999 : k);
        for (size_t k = 0; k < 8; k++)
            assert_int_equal(get_or(&m, last[k], 999), gone_last[k] ? 999 : 100 + k);
    }
    assert_int_equal(m.count, 0);
    for (size_t i = 0; i < cap; i++)
        assert_int_equal(m.keys[i], 0);
    vram__u64map_destroy(&m);
}

/* 100k random operations against a reference array. The key universe mixes
 * keys sharing home slots in small tables with ordinary multiples of 2^20, so
 * long probe runs form, wrap around, and are cut by deletions. */
static void test_random_against_reference(void **state)
{
    (void)state;
    enum { UNIVERSE = 3000, OPS = 100000 };
    uint64_t *keys = calloc(UNIVERSE, sizeof *keys);
    uint64_t *ref = calloc(UNIVERSE, sizeof *ref);
    unsigned char *present = calloc(UNIVERSE, 1);
    assert_non_null(keys);
    assert_non_null(ref);
    assert_non_null(present);
    /* A third collide in a 1024-slot table (same home 5), a third have home
     * 1023 there (wrapping runs), the rest are consecutive multiples of 2^20. */
    assert_int_equal(pick_keys(1024, 5, keys, UNIVERSE / 3), UNIVERSE / 3);
    assert_int_equal(pick_keys(1024, 1023, keys + UNIVERSE / 3, UNIVERSE / 3), UNIVERSE / 3);
    for (size_t i = 2 * (UNIVERSE / 3); i < UNIVERSE; i++)
        keys[i] = (uint64_t)(i + 1) << 20;
    for (size_t i = 0; i < UNIVERSE; i++)
        for (size_t j = 0; j < i; j++)
            if (keys[i] == keys[j])
                keys[i] = 0; /* duplicates are unlikely; mark them unusable */

    vram__u64map m;
    assert_int_equal(vram__u64map_init(&m, 0), 0);
    size_t count = 0;
    rng_state = 0x1234567887654321ull;
    for (size_t op = 0; op < OPS; op++) {
        /* Work mostly within a window of the universe that drifts, so the
         * map fills up and drains repeatedly. */
        size_t window = 200 + (op / 5000 % 4) * 900;
        size_t i = (size_t)(rng() % window);
        if (i >= UNIVERSE || !keys[i])
            continue;
        unsigned r = (unsigned)(rng() % 100);
        uint64_t v = 0;
        if (r < 45) {
            uint64_t val = rng();
            assert_int_equal(vram__u64map_put(&m, keys[i], val), 0);
            if (!present[i])
                count++;
            present[i] = 1;
            ref[i] = val;
        } else if (r < 80) {
            int had = vram__u64map_del(&m, keys[i], &v);
            assert_int_equal(had, present[i]);
            if (had) {
                assert_int_equal(v, ref[i]);
                present[i] = 0;
                count--;
            }
        } else {
            int found = vram__u64map_get(&m, keys[i], &v);
            assert_int_equal(found, present[i]);
            if (found)
                assert_int_equal(v, ref[i]);
        }
        assert_int_equal(m.count, count);
        if (op % 2500 == 0) {
            check_structure(&m);
            for (size_t k = 0; k < UNIVERSE; k++) {
                if (!keys[k])
                    continue;
                int found = vram__u64map_get(&m, keys[k], &v);
                assert_int_equal(found, present[k]);
                if (found)
                    assert_int_equal(v, ref[k]);
            }
        }
    }
    check_structure(&m);
    /* Drain: every key comes out once, with its value. */
    for (size_t k = 0; k < UNIVERSE; k++) {
        if (!keys[k])
            continue;
        uint64_t v = 0;
        assert_int_equal(vram__u64map_del(&m, keys[k], &v), present[k]);
        if (present[k])
            assert_int_equal(v, ref[k]);
    }
    assert_int_equal(m.count, 0);
    vram__u64map_destroy(&m);
    free(keys);
    free(ref);
    free(present);
}

static void test_reserve(void **state)
{
    (void)state;
    vram__u64map m;
    assert_int_equal(vram__u64map_init(&m, 0), 0);
    for (uint64_t k = 1; k <= 5; k++)
        assert_int_equal(vram__u64map_put(&m, k << 20, k), 0);

    /* Reserve for 5 + 1000 keys: the next 1000 puts do not move the table. */
    assert_int_equal(vram__u64map_reserve(&m, m.count + 1000), 0);
    assert_true(m.mask + 1 >= 2 * 1005);
    for (uint64_t k = 1; k <= 5; k++) /* growth kept the old keys */
        assert_int_equal(get_or(&m, k << 20, 0), k);
    uint64_t *keys = m.keys, *vals = m.vals;
    size_t mask = m.mask;
    for (uint64_t k = 6; k <= 1005; k++) {
        assert_int_equal(vram__u64map_put(&m, k << 20, k), 0);
        assert_ptr_equal(m.keys, keys);
        assert_ptr_equal(m.vals, vals);
        assert_int_equal(m.mask, mask);
    }
    check_structure(&m);

    /* Reserving no more than what fits changes nothing. */
    assert_int_equal(vram__u64map_reserve(&m, 0), 0);
    assert_int_equal(vram__u64map_reserve(&m, m.count), 0);
    assert_int_equal(vram__u64map_reserve(&m, (mask + 1) / 2), 0);
    assert_ptr_equal(m.keys, keys);
    assert_int_equal(m.mask, mask);

    /* Exactly at the limit: reserve(n) on a full-to-the-limit table makes n
     * keys fit, for every n in a range, without growth during the puts. */
    for (size_t n = 1; n < 300; n += 7) {
        vram__u64map t;
        assert_int_equal(vram__u64map_init(&t, 0), 0);
        assert_int_equal(vram__u64map_reserve(&t, n), 0);
        uint64_t *tk = t.keys;
        for (size_t k = 0; k < n; k++)
            assert_int_equal(vram__u64map_put(&t, (uint64_t)(k + 1) << 20, k), 0);
        assert_ptr_equal(t.keys, tk);
        assert_int_equal(t.count, n);
        check_structure(&t);
        vram__u64map_destroy(&t);
    }
    vram__u64map_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_init_sizes),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_collisions_and_wraparound),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
