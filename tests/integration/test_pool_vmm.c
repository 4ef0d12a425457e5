/* tests/integration/test_pool_vmm.c - the vmm policy's hysteresis: freed
 * granules stay mapped up to the retention limit, so a loop that frees and
 * reallocates maps nothing new; retained granules never raise the peak
 * unless the headroom allows it; and granules beyond the limit go back to
 * the backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024)

static vram_pool *make_pool_with(vram_backend **b, uint64_t retain_min, double retain_ratio,
                                 double headroom, uint64_t huge_size)
{
    assert_int_equal(
        vram_backend_create("sim", &(vram_backend_opts){.capacity = 4096 * MiB, .granularity = 2 * MiB}, b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = *b;
    o.policy = VRAM_POLICY_VMM;
    o.retain_min = retain_min;
    o.retain_ratio = retain_ratio;
    o.headroom = headroom;
    o.huge_size = huge_size;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static vram_pool *make_pool(vram_backend **b, uint64_t retain_min, double retain_ratio)
{
    return make_pool_with(b, retain_min, retain_ratio, 0.0, 16 * MiB);
}

static vram_pool_stats stats(vram_pool *p)
{
    vram_pool_stats s;
    assert_int_equal(vram_pool_stats_get(p, &s), 0);
    return s;
}

static void drop(vram_pool *p, vram_backend *b)
{
    assert_int_equal(vram_pool_destroy(p), 0);
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* An inference-like loop: the same activations freed and allocated again. */
static void test_loop_maps_nothing_new(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(&b, 256 * MiB, 0.25);
    uint64_t sizes[] = {24 * MiB + 100, 8 * MiB, 3 * MiB + 7, 48 * MiB, 12 * MiB};
    void *ptr[5];
    uint64_t calls_after_first = 0;
    for (int iter = 0; iter < 20; iter++) {
        for (int i = 0; i < 5; i++)
            assert_int_equal(vram_pool_alloc(p, sizes[i], 0, VRAM_KIND_ACTIVATIONS, NULL, &ptr[i]), 0);
        for (int i = 0; i < 5; i++)
            assert_int_equal(vram_pool_free(p, ptr[i], NULL), 0);
        if (iter == 0)
            calls_after_first = stats(p).backend_calls_total;
    }
    vram_pool_stats s = stats(p);
    assert_int_equal(s.backend_calls_total, calls_after_first);
    assert_true(s.reserved_bytes > 0); /* retained */
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(p, &released), 0);
    assert_int_equal(released, s.reserved_bytes);
    assert_int_equal(stats(p).reserved_bytes, 0);
    drop(p, b);
}

/* Retention never raises the peak: with a limit larger than anything, a
 * request in fresh address space unmaps retained granules before mapping. */
static void test_retention_never_raises_peak(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(&b, 4096 * MiB, 1.0);
    void *a, *c, *d;
    assert_int_equal(vram_pool_alloc(p, 64 * MiB, 0, VRAM_KIND_IO, NULL, &a), 0);
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, NULL, &c), 0); /* a fence */
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_pool_alloc(p, 1 * MiB, 0, VRAM_KIND_IO, NULL, &d), 0); /* completes the free */
    uint64_t peak = stats(p).peak_reserved_bytes;
    /* Larger than the 64 MiB hole: it lands in fresh space and needs mapping. */
    void *e;
    assert_int_equal(vram_pool_alloc(p, 96 * MiB, 0, VRAM_KIND_IO, NULL, &e), 0);
    vram_pool_stats s = stats(p);
    uint64_t live_granules = 96 * MiB + 2 * MiB + 2 * MiB; /* e, c, and d's granule */
    assert_true(s.peak_reserved_bytes <= (peak > live_granules ? peak : live_granules) + 2 * MiB);
    assert_true(s.peak_reserved_bytes < 64 * MiB + 96 * MiB);
    assert_int_equal(vram_pool_free(p, e, NULL), 0);
    assert_int_equal(vram_pool_free(p, c, NULL), 0);
    assert_int_equal(vram_pool_free(p, d, NULL), 0);
    drop(p, b);
}

/* A 64 MiB block freed, then a 96 MiB request that cannot reuse its hole:
 * returns reserved bytes after the request. */
static uint64_t hole_then_larger(vram_pool *p)
{
    void *a, *c, *d, *e;
    assert_int_equal(vram_pool_alloc(p, 64 * MiB, 0, VRAM_KIND_IO, NULL, &a), 0);
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, 0, VRAM_KIND_IO, NULL, &c), 0); /* a fence */
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_pool_alloc(p, 1 * MiB, 0, VRAM_KIND_IO, NULL, &d), 0);
    assert_int_equal(vram_pool_alloc(p, 96 * MiB, 0, VRAM_KIND_IO, NULL, &e), 0);
    uint64_t reserved = stats(p).reserved_bytes;
    assert_int_equal(vram_pool_free(p, e, NULL), 0);
    assert_int_equal(vram_pool_free(p, c, NULL), 0);
    assert_int_equal(vram_pool_free(p, d, NULL), 0);
    return reserved;
}

/* Headroom: retained memory may raise reserved up to (1 + headroom) x the
 * live peak, and only memory beyond that goes back to make room; on huge
 * blocks and on blocks mapped granule by granule alike. */
static void test_headroom_bounds_retained(void **state)
{
    (void)state;
    uint64_t live = 96 * MiB + 2 * MiB + 1 * MiB;
    uint64_t huge_sizes[] = {16 * MiB, 0};
    for (int h = 0; h < 2; h++) {
        vram_backend *b;
        /* Room for the hole: it stays mapped, nothing is unmapped. */
        vram_pool *p = make_pool_with(&b, 4096 * MiB, 1.0, 1.0, huge_sizes[h]);
        uint64_t reserved = hole_then_larger(p);
        assert_true(reserved >= 64 * MiB + 96 * MiB);
        assert_true(reserved <= 2 * live + 4 * MiB);
        drop(p, b);
        /* Headroom 10%: the hole goes back before the request maps. */
        p = make_pool_with(&b, 4096 * MiB, 1.0, 0.1, huge_sizes[h]);
        reserved = hole_then_larger(p);
        assert_true(reserved < 64 * MiB + 96 * MiB);
        vram_pool_stats s = stats(p);
        assert_true(s.peak_reserved_bytes <= (uint64_t)(1.1 * (double)live) + 4 * MiB);
        drop(p, b);
    }
    /* Out of range: refused, with the number. */
    vram_backend *b;
    assert_int_equal(vram_backend_create("sim", &(vram_backend_opts){.capacity = 64 * MiB}, &b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = b;
    o.headroom = 11;
    vram_pool *p = NULL;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "headroom 11"));
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* Beyond the limit, freed granules are unmapped at once. */
static void test_beyond_limit_unmapped(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(&b, 0, 0.0);
    void *a, *fence;
    assert_int_equal(vram_pool_alloc(p, 256 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &a), 0);
    assert_int_equal(stats(p).reserved_bytes, 256 * MiB);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_pool_alloc(p, 512, 0, VRAM_KIND_OTHER, NULL, &fence), 0);
    vram_pool_stats s = stats(p);
    assert_int_equal(s.reserved_bytes, 2 * MiB); /* only the small block's granule */
    assert_int_equal(vram_pool_free(p, fence, NULL), 0);
    drop(p, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_maps_nothing_new),
        cmocka_unit_test(test_retention_never_raises_peak),
        cmocka_unit_test(test_headroom_bounds_retained),
        cmocka_unit_test(test_beyond_limit_unmapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
