/* tests/unit/test_tlsf.c - the TLSF free index of src/core/mem/tlsf.h with block
 * descriptors from the slab of src/core/mem/block.h: insert and take of blocks of
 * many sizes (multiples of 256 bytes), take never returning a block smaller
 * than asked and returning NULL when nothing fits, exact and best fit among the
 * few blocks of the request's own class, vram__tlsf_remove from any position
 * of a class list, vram__tlsf_largest, vram__tlsf_each visiting every free
 * block once, and a long random sequence checked against a reference multiset
 * with the guarantees the header describes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "mem/block.h"
#include "mem/tlsf.h"

#define UNIT 256ull

/* ---- helpers --------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

typedef struct fixture {
    vram__tlsf t;
    vram__block_slab slab;
    uint64_t next_addr;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->next_addr = 0x100000000000ull;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vram__block_slab_destroy(&f->slab);
    free(f);
    return 0;
}

static vram__block *new_block(fixture *f, uint64_t size)
{
    assert_int_equal(vram__block_reserve(&f->slab), 0);
    assert_non_null(f->slab.free_list);
    vram__block *b = vram__block_new(&f->slab);
    assert_non_null(b);
    memset(b, 0, sizeof *b);
    b->addr = f->next_addr;
    b->size = size;
    f->next_addr += size + UNIT;
    return b;
}

static vram__block *add(fixture *f, uint64_t size)
{
    vram__block *b = new_block(f, size);
    vram__tlsf_insert(&f->t, b);
    return b;
}

/* The size class (first level * 32 + second level) of a size, computed
 * independently of the library from the description in tlsf.h: units of 256
 * bytes; below 32 units one class per unit; above, each power of two is split
 * into 32 equal classes. Class order follows size order. */
static unsigned class_of(uint64_t size)
{
    uint64_t units = size / UNIT;
    if (units < VRAM__TLSF_SL)
        return (unsigned)units;
    unsigned m = 63u - (unsigned)__builtin_clzll(units);
    unsigned fl = m - (VRAM__TLSF_SL_BITS - 1);
    unsigned sl = (unsigned)(units >> (m - VRAM__TLSF_SL_BITS)) & (VRAM__TLSF_SL - 1);
    return fl * VRAM__TLSF_SL + sl;
}

typedef struct visit {
    vram__block **seen;
    size_t n, cap;
} visit;

static void collect(void *ctx, vram__block *b)
{
    visit *v = ctx;
    assert_true(v->n < v->cap);
    v->seen[v->n++] = b;
    b->seq++; /* visit count */
}

/* vram__tlsf_each visits exactly the blocks of `ref`, each once. */
static void check_each(const vram__tlsf *t, vram__block **ref, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ref[i]->seq = 0;
    visit v = {calloc(n + 1, sizeof(vram__block *)), 0, n + 1};
    assert_non_null(v.seen);
    vram__tlsf_each(t, collect, &v);
    assert_int_equal(v.n, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ref[i]->seq, 1);
    free(v.seen);
}

static uint64_t ref_largest(vram__block **ref, size_t n)
{
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++)
        if (ref[i]->size > best)
            best = ref[i]->size;
    return best;
}

/* ---- tests ------------------------------------------------------------- */

static void test_empty(void **state)
{
    fixture *f = *state;
    assert_null(vram__tlsf_take(&f->t, 0));
    assert_null(vram__tlsf_take(&f->t, UNIT));
    assert_null(vram__tlsf_take(&f->t, 1ull << 40));
    assert_int_equal(vram__tlsf_largest(&f->t), 0);
    assert_int_equal(f->t.n_free, 0);
    check_each(&f->t, NULL, 0);
}

static void test_take_many_sizes(void **state)
{
    fixture *f = *state;
    /* Every size from 256 B to 16 KiB, then sizes spread over 16 KiB .. 1 TiB. */
    enum { N = 64 + 400 };
    vram__block *blocks[N];
    uint64_t sizes[N];
    size_t n = 0;
    for (uint64_t u = 1; u <= 64; u++)
        sizes[n++] = u * UNIT;
    for (size_t i = 0; i < 400; i++) {
        unsigned shift = 6 + (unsigned)(i % 26);          /* 2^6 .. 2^31 units */
        uint64_t units = (1ull << shift) + rng() % (1ull << shift);
        sizes[n++] = units * UNIT;
    }
    for (size_t i = 0; i < n; i++)
        blocks[i] = add(f, sizes[i]);
    assert_int_equal(f->t.n_free, n);
    check_each(&f->t, blocks, n);
    assert_int_equal(vram__tlsf_largest(&f->t), ref_largest(blocks, n));

    /* Take each size back in a shuffled order: always large enough, removed,
     * and never the same block twice. */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng() % i);
        uint64_t s = sizes[i - 1];
        sizes[i - 1] = sizes[j];
        sizes[j] = s;
    }
    size_t remaining = n;
    for (size_t i = 0; i < n; i++) {
        vram__block *b = vram__tlsf_take(&f->t, sizes[i]);
        if (!b)
            fail_msg("take(%llu) found nothing with %zu blocks free",
                     (unsigned long long)sizes[i], remaining);
        assert_true(b->size >= sizes[i]);
        assert_null(b->fnext);
        assert_null(b->fprev);
        assert_int_not_equal(b->seq, 1000); /* not taken before */
        b->seq = 1000;
        remaining--;
        assert_int_equal(f->t.n_free, remaining);
    }
    assert_null(vram__tlsf_take(&f->t, UNIT));
    assert_int_equal(f->t.fl_bitmap, 0);
    for (unsigned fl = 0; fl < VRAM__TLSF_FL; fl++)
        assert_int_equal(f->t.sl_bitmap[fl], 0);
    for (size_t i = 0; i < n; i++)
        vram__block_put(&f->slab, blocks[i]);
    assert_int_equal(f->slab.in_use, 0);
}

static void test_null_when_nothing_fits(void **state)
{
    fixture *f = *state;
    static const uint64_t units[] = {1, 3, 31, 32, 33, 63, 64, 65, 100, 1000, 4097};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        add(f, units[i] * UNIT);
    /* Just above the largest, in its own class and in the next ones. */
    assert_int_equal(vram__tlsf_largest(&f->t), 4097 * UNIT);
    assert_null(vram__tlsf_take(&f->t, 4098 * UNIT));
    assert_null(vram__tlsf_take(&f->t, 4100 * UNIT));
    assert_null(vram__tlsf_take(&f->t, 8192 * UNIT));
    assert_null(vram__tlsf_take(&f->t, 1ull << 50));
    assert_int_equal(f->t.n_free, 11);
    /* The largest still fits exactly. */
    vram__block *b = vram__tlsf_take(&f->t, 4097 * UNIT);
    assert_non_null(b);
    assert_int_equal(b->size, 4097 * UNIT);
    assert_null(vram__tlsf_take(&f->t, 1001 * UNIT));
    assert_int_equal(vram__tlsf_largest(&f->t), 1000 * UNIT);
    /* Small requests, including ones below a unit, get the smallest block. */
    b = vram__tlsf_take(&f->t, 1);
    assert_non_null(b);
    assert_int_equal(b->size, UNIT);
    b = vram__tlsf_take(&f->t, 0);
    assert_non_null(b);
    assert_int_equal(b->size, 3 * UNIT);
}

static void test_exact_fit_preferred(void **state)
{
    fixture *f = *state;
    /* 128..131 units share one class (first level 3, four units per class);
     * 4096..4223 units share another (128 units per class). */
    assert_int_equal(class_of(128 * UNIT), class_of(131 * UNIT));
    assert_int_not_equal(class_of(131 * UNIT), class_of(132 * UNIT));
    assert_int_equal(class_of(4096 * UNIT), class_of(4223 * UNIT));

    /* Blocks of 131, 129, 130, 128 units (inserted in that order, so the list
     * runs 128, 130, 129, 131). Asking for an exact size gets that block. */
    static const uint64_t order[] = {131, 129, 130, 128};
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < 4; i++)
            add(f, order[i] * UNIT);
        uint64_t want = order[round];
        vram__block *b = vram__tlsf_take(&f->t, want * UNIT);
        assert_non_null(b);
        assert_int_equal(b->size, want * UNIT);
        /* Drain the rest. */
        while ((b = vram__tlsf_take(&f->t, UNIT)) != NULL)
            ;
        assert_int_equal(f->t.n_free, 0);
    }

    /* Among eight blocks of a wide class, the exact one is found wherever it
     * sits in the list, and without an exact one the best fit is taken. */
    for (size_t pos = 0; pos < 8; pos++) {
        for (size_t i = 0; i < 8; i++)
            add(f, (i == pos ? 4150 : 4200 - i) * UNIT); /* 4200..4193 and one 4150 */
        vram__block *b = vram__tlsf_take(&f->t, 4150 * UNIT);
        assert_non_null(b);
        assert_int_equal(b->size, 4150 * UNIT);
        b = vram__tlsf_take(&f->t, 4100 * UNIT); /* best fit: the smallest of the rest */
        assert_non_null(b);
        assert_int_equal(b->size, (pos == 7 ? 4194 : 4193) * UNIT);
        while ((b = vram__tlsf_take(&f->t, UNIT)) != NULL)
            ;
    }
}

static void test_best_fit_in_own_class(void **state)
{
    fixture *f = *state;
    /* 129 units requested; the class holds 128 (too small), 131 and 130. */
    add(f, 131 * UNIT);
    add(f, 128 * UNIT);
    add(f, 130 * UNIT);
    add(f, 128 * UNIT);
    vram__block *b = vram__tlsf_take(&f->t, 129 * UNIT);
    assert_non_null(b);
    assert_int_equal(b->size, 130 * UNIT);
    b = vram__tlsf_take(&f->t, 129 * UNIT);
    assert_non_null(b);
    assert_int_equal(b->size, 131 * UNIT);
    /* Only blocks smaller than the request remain in its class and nothing
     * above: NULL, and the small blocks stay. */
    assert_null(vram__tlsf_take(&f->t, 129 * UNIT));
    assert_int_equal(f->t.n_free, 2);

    /* A fitting block behind seven too-small ones in its class, with no
     * larger class to fall back to, is still found. */
    add(f, 4223 * UNIT);
    for (int i = 0; i < 7; i++)
        add(f, (4096 + (uint64_t)i) * UNIT);
    b = vram__tlsf_take(&f->t, 4200 * UNIT);
    assert_non_null(b);
    assert_int_equal(b->size, 4223 * UNIT);

    /* With a block in a higher class too, a request that fits only there
     * gets it, never a smaller block of its own class. */
    add(f, 8192 * UNIT);
    add(f, 4100 * UNIT);
    /* 4096..4102 and 4100 are in the request's class, all too small. */
    b = vram__tlsf_take(&f->t, 4103 * UNIT);
    assert_non_null(b);
    assert_int_equal(b->size, 8192 * UNIT);
}

static void test_remove_positions(void **state)
{
    fixture *f = *state;
    /* Five blocks in one class and one alone in another. */
    vram__block *b[5];
    for (int i = 0; i < 5; i++)
        b[i] = add(f, (4096 + (uint64_t)i * 10) * UNIT);
    vram__block *lone = add(f, 40 * UNIT);
    assert_int_equal(f->t.n_free, 6);
    /* List order is b4 b3 b2 b1 b0: remove the middle, the tail, the head. */
    vram__tlsf_remove(&f->t, b[2]);
    vram__tlsf_remove(&f->t, b[0]);
    vram__tlsf_remove(&f->t, b[4]);
    assert_int_equal(f->t.n_free, 3);
    vram__block *left[3] = {b[1], b[3], lone};
    check_each(&f->t, left, 3);
    assert_int_equal(vram__tlsf_largest(&f->t), (4096 + 30) * UNIT);
    vram__tlsf_remove(&f->t, b[3]);
    vram__tlsf_remove(&f->t, b[1]);
    assert_int_equal(vram__tlsf_largest(&f->t), 40 * UNIT);
    /* The emptied class no longer answers. */
    assert_null(vram__tlsf_take(&f->t, 41 * UNIT));
    vram__tlsf_remove(&f->t, lone);
    assert_int_equal(f->t.n_free, 0);
    assert_int_equal(f->t.fl_bitmap, 0);
    assert_int_equal(vram__tlsf_largest(&f->t), 0);
    assert_null(vram__tlsf_take(&f->t, UNIT));
    /* Removed blocks can be inserted again. */
    vram__tlsf_insert(&f->t, b[2]);
    assert_ptr_equal(vram__tlsf_take(&f->t, UNIT), b[2]);
}

static void test_largest(void **state)
{
    fixture *f = *state;
    assert_int_equal(vram__tlsf_largest(&f->t), 0);
    add(f, UNIT);
    assert_int_equal(vram__tlsf_largest(&f->t), UNIT);
    /* Several blocks in the highest class: the largest of them, wherever it
     * sits in the list. */
    add(f, 4100 * UNIT);
    vram__block *big = add(f, 4222 * UNIT);
    add(f, 4096 * UNIT);
    add(f, 4200 * UNIT);
    assert_int_equal(vram__tlsf_largest(&f->t), 4222 * UNIT);
    vram__tlsf_remove(&f->t, big);
    assert_int_equal(vram__tlsf_largest(&f->t), 4200 * UNIT);
    add(f, (1ull << 36)); /* 64 GiB */
    assert_int_equal(vram__tlsf_largest(&f->t), 1ull << 36);
}

/* Random inserts and takes against a reference multiset. Checked on every
 * take, from what tlsf.h promises:
 *  - the block is at least the size asked for, and was free;
 *  - it lies in the request's own class or in the lowest non-empty class
 *    above it (a good fit never jumps over a class that has blocks);
 *  - when the own class has at most 8 blocks (a "few", all examined) and one
 *    of them fits, the block is the smallest fitting one of that class;
 *  - NULL only when no free block fits, or when every fitting block sits in
 *    the request's own class and that class holds more than 8 blocks.
 * And after each operation: n_free, largest; periodically: each. */
static void test_random_against_reference(void **state)
{
    fixture *f = *state;
    enum { OPS = 40000, MAX_FREE = 1500 };
    vram__block **ref = calloc(MAX_FREE, sizeof *ref);
    assert_non_null(ref);
    size_t n = 0;
    rng_state = 0xfeedfacecafebeefull;
    size_t nulls = 0, takes = 0, exact_class = 0;

    for (size_t op = 0; op < OPS; op++) {
        /* Sizes crowd a few classes so that lists grow long. */
        uint64_t units;
        switch (rng() % 6) {
        case 0: units = 1 + rng() % 40; break;
        case 1: units = 60 + rng() % 12; break;
        case 2: units = 128 + rng() % 8; break;
        case 3: units = 4096 + rng() % 300; break;
        case 4: units = 1 + rng() % (1u << 16); break;
        default: units = (1ull << (rng() % 30)) + rng() % 64; break;
        }
        uint64_t size = units * UNIT;
        int insert = n == 0 || (n < MAX_FREE && rng() % 100 < 52);
        if (insert) {
            ref[n++] = add(f, size);
        } else {
            unsigned own = class_of(size);
            size_t own_count = 0;
            uint64_t own_best = 0;          /* smallest fitting size in own class */
            unsigned lowest_above = ~0u;    /* lowest non-empty class above own */
            int fits_outside = 0;
            for (size_t i = 0; i < n; i++) {
                unsigned c = class_of(ref[i]->size);
                if (c == own) {
                    own_count++;
                    if (ref[i]->size >= size && (!own_best || ref[i]->size < own_best))
                        own_best = ref[i]->size;
                } else if (c > own) {
                    if (c < lowest_above)
                        lowest_above = c;
                    fits_outside = 1;
                }
            }
            vram__block *b = vram__tlsf_take(&f->t, size);
            takes++;
            if (!b) {
                nulls++;
                if (fits_outside)
                    fail_msg("take(%llu) gave NULL although class %u above holds blocks",
                             (unsigned long long)size, lowest_above);
                if (own_best && own_count <= 8)
                    fail_msg("take(%llu) gave NULL although a %llu-byte block is among the %zu "
                             "of its class",
                             (unsigned long long)size, (unsigned long long)own_best, own_count);
            } else {
                if (b->size < size)
                    fail_msg("take(%llu) gave a block of %llu bytes", (unsigned long long)size,
                             (unsigned long long)b->size);
                size_t at = n;
                for (size_t i = 0; i < n; i++)
                    if (ref[i] == b)
                        at = i;
                if (at == n)
                    fail_msg("take(%llu) gave a block that was not free", (unsigned long long)size);
                ref[at] = ref[--n];
                unsigned c = class_of(b->size);
                if (c == own) {
                    exact_class++;
                    if (own_count <= 8)
                        assert_int_equal(b->size, own_best);
                } else {
                    assert_int_equal(c, lowest_above);
                    if (own_best && own_count <= 8)
                        fail_msg("take(%llu) went to class %u although a %llu-byte block is "
                                 "among the %zu of its own class",
                                 (unsigned long long)size, c, (unsigned long long)own_best,
                                 own_count);
                }
                vram__block_put(&f->slab, b);
            }
        }
        assert_int_equal(f->t.n_free, n);
        assert_int_equal(f->slab.in_use, n);
        assert_int_equal(vram__tlsf_largest(&f->t), ref_largest(ref, n));
        if (op % 1000 == 0)
            check_each(&f->t, ref, n);
    }
    /* The sequence exercised both outcomes and both placements. */
    assert_true(takes > OPS / 3);
    assert_true(nulls > 0);
    assert_true(exact_class > 0 && exact_class < takes - nulls);
    check_each(&f->t, ref, n);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_take_many_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_when_nothing_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_fit_preferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_best_fit_in_own_class, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_positions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_largest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_against_reference, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
