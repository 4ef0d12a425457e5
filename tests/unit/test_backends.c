/* tests/unit/test_backends.c - the backends of include/vramkit/backend.h,
 * driven through the counted calls of src/core/backend/backend_internal.h:
 *  - "sim": capacity shared by segments and mappings (VRAM_ENOMEM with the
 *    sizes in the message), every misuse a driver would refuse (double or
 *    mis-sized segment free, map of a mapped granule, unmap of an unmapped
 *    one, maps outside a reservation or not granule-aligned, release with
 *    granules still mapped), exact calls/failed_calls/held/peak counters and
 *    mem_info;
 *  - "host": real memory behind mapped granules and segments (written and
 *    read back; a granule unmapped and mapped again reads as zeros), capacity;
 *  - vram_backend_create and vram_backend_create_custom validation;
 *  - the fault-injecting wrapper: exactly the chosen window of calls fails,
 *    with VRAM_ENOMEM for acquiring calls and VRAM_EBACKEND for releasing
 *    ones, and nothing of a failed call reaches the inner backend;
 *  - vram_backend_destroy refusing with VRAM_EBUSY while pools use it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_internal.h"
#include "vramkit/backend.h"
#include "vramkit/config.h"
#include "vramkit/error.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

/* ---- helpers --------------------------------------------------------- */

#define OPT_ENV_NAME(NAME, field, TYPE, def, choices, help) "VRAM_" #NAME,
static const char *const option_env_names[] = {VRAM_OPTIONS(OPT_ENV_NAME)};
#undef OPT_ENV_NAME

/* Start (and end) each test from the default configuration. */
static int clean_config(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof option_env_names / sizeof option_env_names[0]; i++)
        unsetenv(option_env_names[i]);
    vram_config_reset();
    vram_clear_error();
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

static vram_backend *make(const char *name, uint64_t capacity, uint64_t granularity)
{
    vram_backend_opts o = {.capacity = capacity, .granularity = granularity};
    vram_backend *b = NULL;
    int rc = vram_backend_create(name, &o, &b);
    if (rc)
        fail_msg("vram_backend_create(%s): %s", name, vram_last_error());
    assert_non_null(b);
    return b;
}

static vram_backend_stats stats_of(const vram_backend *b)
{
    vram_backend_stats s;
    memset(&s, 0xff, sizeof s);
    vram_backend_stats_get(b, &s);
    return s;
}

static void expect_counters(const vram_backend *b, uint64_t calls, uint64_t failed, uint64_t held,
                            uint64_t peak)
{
    vram_backend_stats s = stats_of(b);
    if (s.calls != calls || s.failed_calls != failed || s.held_bytes != held ||
        s.peak_held_bytes != peak)
        fail_msg("counters calls=%llu failed=%llu held=%llu peak=%llu, expected %llu %llu %llu "
                 "%llu",
                 (unsigned long long)s.calls, (unsigned long long)s.failed_calls,
                 (unsigned long long)s.held_bytes, (unsigned long long)s.peak_held_bytes,
                 (unsigned long long)calls, (unsigned long long)failed, (unsigned long long)held,
                 (unsigned long long)peak);
}

/* Free bytes as the backend itself (not the counting wrapper) sees them. */
static uint64_t free_bytes(const vram_backend *b)
{
    uint64_t fr = 0, total = 0;
    assert_non_null(b->ops->mem_info);
    assert_int_equal(b->ops->mem_info(b->self, &fr, &total), 0);
    assert_int_equal(total, b->capacity);
    return fr;
}

/* Expect `rc` to be `code` with `needle` in the last error. */
static void expect_fail(int rc, int code, const char *needle)
{
    if (rc != code)
        fail_msg("got %s (%s), expected %s", vram_err_name(rc), vram_last_error(),
                 vram_err_name(code));
    if (needle)
        assert_contains(vram_last_error(), needle);
}

/* ---- sim --------------------------------------------------------------- */

static void test_sim_segments(void **state)
{
    (void)state;
    vram_backend *b = make("sim", 64 * MiB, 2 * MiB);
    assert_string_equal(vram_backend_name(b), "sim");
    assert_int_equal(vram_backend_caps(b), VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP);
    vram_backend_stats s = stats_of(b);
    assert_int_equal(s.capacity, 64 * MiB);
    assert_int_equal(s.granularity, 2 * MiB);
    expect_counters(b, 0, 0, 0, 0);
    assert_int_equal(free_bytes(b), 64 * MiB);

    uint64_t a1 = 0, a2 = 0, a3 = 0, x = 0;
    assert_int_equal(vram__backend_segment_alloc(b, 48 * MiB, NULL, &a1), 0);
    assert_int_not_equal(a1, 0);
    expect_counters(b, 1, 0, 48 * MiB, 48 * MiB);
    assert_int_equal(free_bytes(b), 16 * MiB);

    /* Over capacity: refused, with the request, the use and the capacity. */
    expect_fail(vram__backend_segment_alloc(b, 32 * MiB, NULL, &x), VRAM_ENOMEM, "32.0 MiB");
    assert_contains(vram_last_error(), "48.0 MiB");
    assert_contains(vram_last_error(), "64.0 MiB");
    expect_counters(b, 2, 1, 48 * MiB, 48 * MiB);

    /* Exactly the rest fits. */
    assert_int_equal(vram__backend_segment_alloc(b, 16 * MiB, (vram_stream)0x7, &a2), 0);
    assert_true(a2 >= a1 + 48 * MiB || a2 + 16 * MiB <= a1); /* no overlap */
    expect_counters(b, 3, 1, 64 * MiB, 64 * MiB);
    assert_int_equal(free_bytes(b), 0);
    expect_fail(vram__backend_segment_alloc(b, 1, NULL, &x), VRAM_ENOMEM, "sim");
    expect_counters(b, 4, 2, 64 * MiB, 64 * MiB);

    /* Frees must name a segment with its size, once. */
    expect_fail(vram__backend_segment_free(b, a1, 47 * MiB, NULL), VRAM_EINVAL, "size");
    expect_counters(b, 5, 3, 64 * MiB, 64 * MiB);
    assert_int_equal(vram__backend_segment_free(b, a1, 48 * MiB, NULL), 0);
    expect_counters(b, 6, 3, 16 * MiB, 64 * MiB);
    assert_int_equal(free_bytes(b), 48 * MiB);
    expect_fail(vram__backend_segment_free(b, a1, 48 * MiB, NULL), VRAM_EINVAL, "not a segment");
    expect_counters(b, 7, 4, 16 * MiB, 64 * MiB);
    expect_fail(vram__backend_segment_free(b, a2 + 4096, 16 * MiB, NULL), VRAM_EINVAL,
                "not a segment");
    expect_fail(vram__backend_segment_alloc(b, 0, NULL, &x), VRAM_EINVAL, "0 bytes");
    expect_counters(b, 9, 6, 16 * MiB, 64 * MiB);
    assert_int_equal(free_bytes(b), 48 * MiB);

    /* Addresses are not reused. */
    assert_int_equal(vram__backend_segment_alloc(b, 48 * MiB, NULL, &a3), 0);
    assert_int_not_equal(a3, a1);
    assert_int_not_equal(a3, a2);
    /* Odd sizes are held as asked. */
    assert_int_equal(vram__backend_segment_free(b, a2, 16 * MiB, NULL), 0);
    assert_int_equal(vram__backend_segment_alloc(b, 12345, NULL, &a2), 0);
    expect_counters(b, 12, 6, 48 * MiB + 12345, 64 * MiB);
    assert_int_equal(free_bytes(b), 16 * MiB - 12345);
    assert_int_equal(vram__backend_segment_free(b, a2, 12345, NULL), 0);
    assert_int_equal(vram__backend_segment_free(b, a3, 48 * MiB, NULL), 0);
    expect_counters(b, 14, 6, 0, 64 * MiB);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static void test_sim_map(void **state)
{
    (void)state;
    const uint64_t G = 2 * MiB;
    vram_backend *b = make("sim", 64 * MiB, G);
    uint64_t r = 0, x = 0;

    assert_int_equal(vram__backend_reserve(b, 8 * G, &r), 0);
    assert_int_equal(r % G, 0);
    expect_counters(b, 1, 0, 0, 0); /* reserving holds no memory */
    assert_int_equal(free_bytes(b), 64 * MiB);
    expect_fail(vram__backend_reserve(b, 3 * MiB, &x), VRAM_EINVAL, "multiple");
    expect_fail(vram__backend_reserve(b, 0, &x), VRAM_EINVAL, NULL);
    expect_counters(b, 3, 2, 0, 0);

    assert_int_equal(vram__backend_map(b, r, G), 0);
    expect_counters(b, 4, 2, G, G);
    assert_int_equal(free_bytes(b), 64 * MiB - G);

    /* Mapping a mapped granule, alone or within a larger range. */
    expect_fail(vram__backend_map(b, r, G), VRAM_EINVAL, "already mapped");
    expect_fail(vram__backend_map(b, r, 2 * G), VRAM_EINVAL, "already mapped");
    expect_counters(b, 6, 4, G, G);
    assert_int_equal(free_bytes(b), 64 * MiB - G); /* the failed maps took nothing */
    /* ... and the failed range map left granule 1 unmapped. */
    assert_int_equal(vram__backend_map(b, r + G, G), 0);
    expect_counters(b, 7, 4, 2 * G, 2 * G);

    /* Unmapping what is not mapped, alone or as part of a range. */
    expect_fail(vram__backend_unmap(b, r + 2 * G, G), VRAM_EINVAL, "not mapped");
    expect_fail(vram__backend_unmap(b, r, 3 * G), VRAM_EINVAL, "not mapped");
    expect_counters(b, 9, 6, 2 * G, 2 * G);
    assert_int_equal(free_bytes(b), 64 * MiB - 2 * G);

    /* Outside the reservation: just past its end, just before it, across
     * its end. */
    expect_fail(vram__backend_map(b, r + 8 * G, G), VRAM_EINVAL, "outside");
    expect_fail(vram__backend_map(b, r - G, G), VRAM_EINVAL, "outside");
    expect_fail(vram__backend_map(b, r + 7 * G, 2 * G), VRAM_EINVAL, "outside");
    expect_fail(vram__backend_unmap(b, r + 8 * G, G), VRAM_EINVAL, "outside");
    expect_counters(b, 13, 10, 2 * G, 2 * G);

    /* Not granule-aligned: address, size, empty. */
    expect_fail(vram__backend_map(b, r + 2 * G + 4096, G), VRAM_EINVAL, "aligned");
    expect_fail(vram__backend_map(b, r + 2 * G, 4096), VRAM_EINVAL, "aligned");
    expect_fail(vram__backend_map(b, r + 2 * G, G + G / 2), VRAM_EINVAL, "aligned");
    expect_fail(vram__backend_map(b, r + 2 * G, 0), VRAM_EINVAL, NULL);
    expect_fail(vram__backend_unmap(b, r + 4096, G), VRAM_EINVAL, "aligned");
    expect_counters(b, 18, 15, 2 * G, 2 * G);
    assert_int_equal(free_bytes(b), 64 * MiB - 2 * G);

    /* Release: refused while granules are mapped, or for a wrong range. */
    expect_fail(vram__backend_release(b, r, 8 * G), VRAM_EBUSY, "2 granules");
    expect_fail(vram__backend_release(b, r, 4 * G), VRAM_EINVAL, "not a reservation");
    expect_fail(vram__backend_release(b, r + G, 7 * G), VRAM_EINVAL, "not a reservation");
    expect_counters(b, 21, 18, 2 * G, 2 * G);

    /* A range unmap of both granules, then the release succeeds once. */
    assert_int_equal(vram__backend_unmap(b, r, 2 * G), 0);
    expect_counters(b, 22, 18, 0, 2 * G);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram__backend_release(b, r, 8 * G), 0);
    expect_fail(vram__backend_release(b, r, 8 * G), VRAM_EINVAL, "not a reservation");
    expect_fail(vram__backend_map(b, r, G), VRAM_EINVAL, "outside");
    expect_counters(b, 25, 20, 0, 2 * G);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static void test_sim_map_capacity(void **state)
{
    (void)state;
    const uint64_t G = 2 * MiB;
    vram_backend *b = make("sim", 64 * MiB, G);
    uint64_t r1 = 0, r2 = 0, seg = 0, x = 0;
    /* Reservations are address space, not capacity: 4x the capacity. */
    assert_int_equal(vram__backend_reserve(b, 128 * MiB, &r1), 0);
    assert_int_equal(vram__backend_reserve(b, 128 * MiB, &r2), 0);
    assert_true(r2 >= r1 + 128 * MiB || r2 + 128 * MiB <= r1);
    /* A map straddling two adjacent reservations is outside both. */
    if (r2 == r1 + 128 * MiB)
        expect_fail(vram__backend_map(b, r2 - G, 2 * G), VRAM_EINVAL, "outside");

    assert_int_equal(vram__backend_segment_alloc(b, 16 * MiB, NULL, &seg), 0);
    assert_int_equal(vram__backend_map(b, r1, 48 * MiB), 0);
    assert_int_equal(free_bytes(b), 0);
    /* Segments and mappings share the capacity. */
    expect_fail(vram__backend_map(b, r2, G), VRAM_ENOMEM, "mapping");
    assert_contains(vram_last_error(), "64.0 MiB");
    expect_fail(vram__backend_segment_alloc(b, G, NULL, &x), VRAM_ENOMEM, "segment");
    vram_backend_stats s = stats_of(b);
    assert_int_equal(s.held_bytes, 64 * MiB);
    assert_int_equal(s.peak_held_bytes, 64 * MiB);

    /* Giving back a segment makes room for mappings. */
    assert_int_equal(vram__backend_segment_free(b, seg, 16 * MiB, NULL), 0);
    assert_int_equal(vram__backend_map(b, r2 + 120 * MiB, 8 * MiB), 0);
    assert_int_equal(vram__backend_map(b, r2, 8 * MiB), 0);
    expect_fail(vram__backend_map(b, r2 + 8 * MiB, G), VRAM_ENOMEM, NULL);
    assert_int_equal(free_bytes(b), 0);
    assert_int_equal(vram__backend_unmap(b, r2 + 120 * MiB, 8 * MiB), 0);
    assert_int_equal(vram__backend_unmap(b, r2, 8 * MiB), 0);
    assert_int_equal(vram__backend_unmap(b, r1, 48 * MiB), 0);
    s = stats_of(b);
    assert_int_equal(s.held_bytes, 0);
    assert_int_equal(s.peak_held_bytes, 64 * MiB);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram__backend_release(b, r1, 128 * MiB), 0);
    assert_int_equal(vram__backend_release(b, r2, 128 * MiB), 0);
    /* Destroying with reservations or segments left is allowed (and must not
     * leak, which the sanitizer build checks). */
    assert_int_equal(vram__backend_reserve(b, 4 * G, &r1), 0);
    assert_int_equal(vram__backend_map(b, r1, G), 0);
    assert_int_equal(vram__backend_segment_alloc(b, G, NULL, &seg), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* ---- host -------------------------------------------------------------- */

static int all_bytes(const void *p, int value, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)value)
            return 0;
    return 1;
}

static void test_host_map(void **state)
{
    (void)state;
    const uint64_t G = 64 * KiB;
    vram_backend *b = make("host", 64 * MiB, G);
    assert_string_equal(vram_backend_name(b), "host");
    assert_int_equal(vram_backend_caps(b) & (VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP),
                     VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP);
    uint64_t r = 0;
    assert_int_equal(vram__backend_reserve(b, 16 * G, &r), 0);
    assert_int_not_equal(r, 0);
    assert_int_equal(r % G, 0);
    unsigned char *p = (unsigned char *)(uintptr_t)r;

    assert_int_equal(vram__backend_map(b, r, G), 0);
    memset(p, 0xab, G);
    assert_true(all_bytes(p, 0xab, G));
    assert_int_equal(vram__backend_map(b, r + 2 * G, 3 * G), 0);
    for (size_t i = 0; i < 3 * G; i++)
        p[2 * G + i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < 3 * G; i++)
        assert_int_equal(p[2 * G + i], (unsigned char)(i * 7));
    assert_true(all_bytes(p, 0xab, G)); /* the first granule is untouched */
    expect_counters(b, 3, 0, 4 * G, 4 * G);
    assert_int_equal(free_bytes(b), 64 * MiB - 4 * G);

    /* Unmapped and mapped again, a granule reads as zeros. */
    assert_int_equal(vram__backend_unmap(b, r, G), 0);
    assert_int_equal(free_bytes(b), 64 * MiB - 3 * G);
    assert_int_equal(vram__backend_map(b, r, G), 0);
    assert_true(all_bytes(p, 0, G));
    /* As with cuMemUnmap, part of a mapping cannot be unmapped, nor a range
     * that ends inside one; the bytes stay. */
    assert_int_equal(vram__backend_unmap(b, r + 3 * G, G), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "unmapped whole"));
    assert_int_equal(vram__backend_unmap(b, r + 2 * G, 2 * G), VRAM_EINVAL);
    assert_int_equal(p[2 * G + 5], (unsigned char)(5 * 7));
    expect_counters(b, 7, 2, 4 * G, 4 * G);

    assert_int_equal(vram__backend_unmap(b, r, G), 0);
    assert_int_equal(vram__backend_unmap(b, r + 2 * G, 3 * G), 0);
    expect_counters(b, 9, 2, 0, 4 * G);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram__backend_release(b, r, 16 * G), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static void test_host_segments_and_capacity(void **state)
{
    (void)state;
    const uint64_t G = 64 * KiB;
    vram_backend *b = make("host", 64 * MiB, G);
    uint64_t s1 = 0, s2 = 0, x = 0, r = 0;
    assert_int_equal(vram__backend_segment_alloc(b, 1 * MiB, NULL, &s1), 0);
    assert_int_equal(vram__backend_segment_alloc(b, 3 * MiB + 4096, NULL, &s2), 0);
    unsigned char *p1 = (unsigned char *)(uintptr_t)s1, *p2 = (unsigned char *)(uintptr_t)s2;
    assert_true(all_bytes(p1, 0, MiB)); /* fresh segments are zeroed */
    memset(p1, 0x11, MiB);
    memset(p2, 0x22, 3 * MiB + 4096);
    assert_true(all_bytes(p1, 0x11, MiB));
    assert_true(all_bytes(p2, 0x22, 3 * MiB + 4096));
    expect_counters(b, 2, 0, 4 * MiB + 4096, 4 * MiB + 4096);

    /* Capacity: a segment beyond what is left is refused with the sizes. */
    expect_fail(vram__backend_segment_alloc(b, 61 * MiB, NULL, &x), VRAM_ENOMEM, "61.0 MiB");
    assert_contains(vram_last_error(), "64.0 MiB");
    assert_contains(vram_last_error(), "4.00 MiB");
    expect_fail(vram__backend_segment_alloc(b, 65 * MiB, NULL, &x), VRAM_ENOMEM, NULL);
    expect_counters(b, 4, 2, 4 * MiB + 4096, 4 * MiB + 4096);

    /* Mappings count against the same capacity (mprotect alone touches no
     * pages, so mapping the whole capacity is cheap). */
    const uint64_t X = 60 * MiB - G; /* leaves 60 KiB: less than a granule */
    assert_int_equal(vram__backend_reserve(b, 128 * MiB, &r), 0);
    assert_int_equal(vram__backend_map(b, r, X), 0);
    assert_int_equal(free_bytes(b), 60 * KiB);
    expect_fail(vram__backend_map(b, r + X, G), VRAM_ENOMEM, "64.0 KiB");
    assert_int_equal(free_bytes(b), 60 * KiB);
    assert_int_equal(vram__backend_segment_free(b, s2, 3 * MiB + 4096, NULL), 0);
    assert_int_equal(vram__backend_map(b, r + X, G), 0);
    p2 = (unsigned char *)(uintptr_t)(r + X);
    memset(p2, 0x33, G);
    assert_true(all_bytes(p2, 0x33, G));
    assert_true(all_bytes(p1, 0x11, MiB));
    assert_int_equal(vram__backend_unmap(b, r, X + G), 0);
    assert_int_equal(vram__backend_release(b, r, 128 * MiB), 0);
    assert_int_equal(vram__backend_segment_free(b, s1, MiB, NULL), 0);
    vram_backend_stats s = stats_of(b);
    assert_int_equal(s.held_bytes, 0);
    assert_int_equal(s.peak_held_bytes, 64 * MiB - 60 * KiB);
    assert_int_equal(s.failed_calls, 3);
    assert_int_equal(s.calls, 12);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* ---- creation ---------------------------------------------------------- */

static void test_create_validation(void **state)
{
    (void)state;
    vram_backend *b = (vram_backend *)0x1;
    vram_backend_opts o = {.capacity = 64 * MiB, .granularity = 2 * MiB};

    expect_fail(vram_backend_create("cuda9", &o, &b), VRAM_EINVAL, "cuda9");
    assert_null(b);
    expect_fail(vram_backend_create("", &o, &b), VRAM_EINVAL, "unknown backend");
    expect_fail(vram_backend_create("SIM", &o, &b), VRAM_EINVAL, "SIM");
    expect_fail(vram_backend_create("sim", &o, NULL), VRAM_EINVAL, NULL);

    static const uint64_t bad_gran[] = {3000, 6144, 2048, 1, 3 * MiB, 4097};
    for (size_t i = 0; i < sizeof bad_gran / sizeof bad_gran[0]; i++) {
        char num[32];
        snprintf(num, sizeof num, "%llu", (unsigned long long)bad_gran[i]);
        o.granularity = bad_gran[i];
        b = (vram_backend *)0x1;
        expect_fail(vram_backend_create("sim", &o, &b), VRAM_EINVAL, "granularity");
        assert_contains(vram_last_error(), num);
        assert_null(b);
        expect_fail(vram_backend_create("host", &o, &b), VRAM_EINVAL, "granularity");
    }
    o.granularity = 2 * MiB;
    o.capacity = 1 * MiB;
    expect_fail(vram_backend_create("sim", &o, &b), VRAM_EINVAL, "capacity");
    o.capacity = 2 * MiB - 1;
    expect_fail(vram_backend_create("host", &o, &b), VRAM_EINVAL, "capacity");

    /* The limits themselves are accepted. */
    o.granularity = 4096;
    o.capacity = 4096;
    assert_int_equal(vram_backend_create("sim", &o, &b), 0);
    assert_int_equal(stats_of(b).capacity, 4096);
    assert_int_equal(stats_of(b).granularity, 4096);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(vram_backend_destroy(NULL), 0);
    /* The getters take NULL like their siblings. */
    assert_null(vram_backend_name(NULL));
    assert_int_equal(vram_backend_caps(NULL), 0);
    vram_backend_stats none = {.calls = 7};
    vram_backend_stats_get(NULL, &none);
    assert_int_equal(none.calls, 0);
    assert_null(vram_pool_name(NULL));
    assert_null(vram_pool_backend(NULL));
    vram_pool_reset_peaks(NULL);
    assert_int_equal(vram_pool_opts_init(NULL), VRAM_EINVAL);
    assert_int_equal(vram_kind_parse("frames", NULL), VRAM_EINVAL);
    assert_int_equal(vram_policy_parse("vmm", NULL), VRAM_EINVAL);

    /* Zeros and NULL take the configuration; a NULL name is the simulator. */
    assert_int_equal(vram_backend_create(NULL, NULL, &b), 0);
    assert_string_equal(vram_backend_name(b), "sim");
    assert_int_equal(stats_of(b).capacity, 140 * GiB);
    assert_int_equal(stats_of(b).granularity, 2 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(vram_config_set("granularity", "4MiB"), 0);
    assert_int_equal(vram_config_set("capacity", "1GiB"), 0);
    vram_backend_opts zero = {0};
    assert_int_equal(vram_backend_create("host", &zero, &b), 0);
    assert_int_equal(stats_of(b).capacity, GiB);
    assert_int_equal(stats_of(b).granularity, 4 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);
    /* A configured granularity that is not valid is refused at creation. */
    assert_int_equal(vram_config_set("granularity", "3MiB"), 0);
    expect_fail(vram_backend_create("sim", NULL, &b), VRAM_EINVAL, "granularity");
    vram_config_reset();
}

/* A NULL name and a pool made without a backend take VRAM_BACKEND, GPU
 * backends too: under vmm a pool is a vmm pool or an error, never the
 * simulator. */
/* The sim's events (VRAM_SIM_EVENTS_DONE): off by default and by the
 * configuration's "none"; on request, real events done once recorded and
 * device waits that succeed, driving a pool's event paths: a free on one of
 * two streams is pending until an event covering it is found complete. */
static void test_sim_events(void **state)
{
    (void)state;
    vram_backend *b = make("sim", 1 * GiB, 2 * MiB);
    assert_int_equal(vram_backend_caps(b) & VRAM_BACKEND_EVENTS, 0);
    assert_int_equal(vram__backend_has_stream_wait(b), 0);
    assert_int_equal(vram_backend_destroy(b), 0);

    vram_backend_opts o;
    assert_int_equal(vram_backend_opts_init(&o), 0);
    assert_int_equal(o.sim_events, VRAM_SIM_EVENTS_NONE);
    o.sim_events = 7;
    expect_fail(vram_backend_create("sim", &o, &b), VRAM_EINVAL, "sim_events 7");
    assert_null(b);

    assert_int_equal(vram_config_set("sim_events", "done"), 0);
    assert_int_equal(vram_backend_opts_init(&o), 0);
    assert_int_equal(o.sim_events, VRAM_SIM_EVENTS_DONE);
    o.capacity = 1 * GiB;
    assert_int_equal(vram_backend_create("sim", &o, &b), 0);
    assert_int_not_equal(vram_backend_caps(b) & VRAM_BACKEND_EVENTS, 0);
    assert_int_equal(vram__backend_has_stream_wait(b), 1);
    void *ev = NULL;
    assert_int_equal(vram__backend_event_record(b, (vram_stream)(uintptr_t)3, &ev), 0);
    assert_non_null(ev);
    assert_int_equal(vram__backend_event_query(b, ev), 1);
    assert_int_equal(vram__backend_event_wait(b, ev), 0);
    assert_int_equal(vram__backend_stream_wait(b, (vram_stream)(uintptr_t)4, ev), 0);
    b->ops->event_release(b->self, ev);
    int bogus = 0;
    expect_fail(vram__backend_event_query(b, &bogus), VRAM_EINVAL, "no live event");

    vram_pool_opts po;
    assert_int_equal(vram_pool_opts_init(&po), 0);
    po.backend = b;
    po.decay_ms = 0;
    vram_pool *pool;
    assert_int_equal(vram_pool_create(&po, &pool), 0);
    vram_stream s1 = (vram_stream)(uintptr_t)1, s2 = (vram_stream)(uintptr_t)2;
    void *x, *y, *z;
    assert_int_equal(vram_pool_alloc(pool, 8 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s1, &x), 0);
    assert_int_equal(vram_pool_alloc(pool, 8 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s2, &y), 0);
    assert_int_equal(vram_pool_free(pool, x, s1), 0);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_counters(pool, &st), 0);
    assert_int_equal(st.pending_bytes, 8 * MiB); /* waits for an event, even on s1's next op */
    assert_int_equal(vram_pool_alloc(pool, 4 * KiB, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s1, &z), 0);
    assert_int_equal(vram_pool_free(pool, z, s1), 0);
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(pool, &released), 0); /* records, finds it done */
    assert_int_equal(vram_pool_stats_counters(pool, &st), 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(vram_pool_free(pool, y, s2), 0);
    assert_int_equal(vram_pool_destroy(pool), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
    vram_config_reset();
}

static void test_configured_backend(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *pool;
    assert_int_equal(vram_config_set("backend", "host"), 0);
    assert_int_equal(vram_backend_create(NULL, NULL, &b), 0);
    assert_string_equal(vram_backend_name(b), "host");
    assert_int_equal(vram_backend_destroy(b), 0);
    vram_pool_opts po;
    assert_int_equal(vram_pool_opts_init(&po), 0);
    assert_int_equal(vram_pool_create(&po, &pool), 0);
    assert_int_equal(vram_backend_type_of(vram_pool_backend(pool)), VRAM_BACKEND_TYPE_HOST);
    assert_int_equal(vram_pool_destroy(pool), 0);

    assert_int_equal(vram_config_set("backend", "vmm"), 0);
    int rc = vram_pool_create(&po, &pool);
    if (rc == 0) {
        assert_int_equal(vram_backend_type_of(vram_pool_backend(pool)), VRAM_BACKEND_TYPE_VMM);
        assert_int_equal(vram_pool_destroy(pool), 0);
    } else {
        assert_int_equal(rc, VRAM_ENOSYS);
        assert_non_null(strstr(vram_last_error(), "vmm"));
    }
    vram_config_reset();
}

/* A custom table that counts what reaches it. */
typedef struct fake {
    int destroyed;
    int seg_allocs, seg_frees, maps, unmaps;
    uint64_t next;
} fake;

static int fake_segment_alloc(void *self, uint64_t size, vram_stream s, uint64_t *addr)
{
    fake *f = self;
    f->seg_allocs++;
    if (size > 100 * MiB)
        return VRAM_ENOMEM;
    *addr = f->next;
    f->next += size;
    return 0;
}

static int fake_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream s)
{
    fake *f = self;
    f->seg_frees++;
    return addr ? 0 : VRAM_EBACKEND;
}

static int fake_reserve(void *self, uint64_t size, uint64_t *addr)
{
    *addr = 0x1000000;
    return 0;
}

static int fake_release(void *self, uint64_t addr, uint64_t size) { return 0; }

static int fake_map(void *self, uint64_t addr, uint64_t size)
{
    ((fake *)self)->maps++;
    return size == 3 ? VRAM_ENOMEM : 0;
}

static int fake_unmap(void *self, uint64_t addr, uint64_t size)
{
    ((fake *)self)->unmaps++;
    return 0;
}

static void fake_destroy(void *self) { ((fake *)self)->destroyed++; }

static void test_create_custom(void **state)
{
    (void)state;
    fake f = {.next = 0x5000};
    vram_backend *b = (vram_backend *)0x1;

    expect_fail(vram_backend_create_custom(NULL, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, NULL);

    vram_backend_ops ops = {.name = "nofuncs", .caps = VRAM_BACKEND_SEGMENTS,
                            .destroy = fake_destroy};
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "nofuncs");
    assert_contains(vram_last_error(), "segment_alloc");
    assert_null(b);
    ops.segment_alloc = fake_segment_alloc; /* free still missing */
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "segment");
    ops.segment_free = fake_segment_free;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, NULL), VRAM_EINVAL, NULL);

    /* Mapping needs all four functions and a granularity. */
    ops.caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "reserve");
    ops.reserve = fake_reserve;
    ops.release = fake_release;
    ops.map = fake_map;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "unmap");
    ops.unmap = fake_unmap;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 0, &b), VRAM_EINVAL, "granularity");
    /* Events need all four event functions. */
    ops.caps |= VRAM_BACKEND_EVENTS;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "events");
    ops.caps &= ~VRAM_BACKEND_EVENTS;
    /* A name-less table is named "?" in the message. */
    ops.name = NULL;
    ops.caps |= VRAM_BACKEND_EVENTS;
    expect_fail(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), VRAM_EINVAL, "?");
    ops.caps &= ~VRAM_BACKEND_EVENTS;
    ops.name = "fake";
    assert_int_equal(f.destroyed, 0); /* refused tables are not destroyed */

    assert_int_equal(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), 0);
    assert_non_null(b);
    assert_string_equal(vram_backend_name(b), "fake");
    assert_int_equal(vram_backend_caps(b), VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP);
    assert_int_equal(stats_of(b).capacity, GiB);
    assert_int_equal(stats_of(b).granularity, 2 * MiB);

    /* The counted calls reach the table and count every call. */
    uint64_t a = 0, c = 0;
    assert_int_equal(vram__backend_segment_alloc(b, 10 * MiB, NULL, &a), 0);
    assert_int_equal(a, 0x5000);
    assert_int_equal(vram__backend_segment_alloc(b, 200 * MiB, NULL, &c), VRAM_ENOMEM);
    assert_int_equal(vram__backend_segment_alloc(b, 30 * MiB, NULL, &c), 0);
    expect_counters(b, 3, 1, 40 * MiB, 40 * MiB);
    assert_int_equal(vram__backend_segment_free(b, 0, 10 * MiB, NULL), VRAM_EBACKEND);
    expect_counters(b, 4, 2, 40 * MiB, 40 * MiB); /* a failed free holds on */
    assert_int_equal(vram__backend_segment_free(b, a, 10 * MiB, NULL), 0);
    expect_counters(b, 5, 2, 30 * MiB, 40 * MiB);
    assert_int_equal(vram__backend_map(b, 0x1000000, 3), VRAM_ENOMEM);
    assert_int_equal(vram__backend_map(b, 0x1000000, 16 * MiB), 0);
    expect_counters(b, 7, 3, 46 * MiB, 46 * MiB);
    assert_int_equal(vram__backend_unmap(b, 0x1000000, 16 * MiB), 0);
    assert_int_equal(vram__backend_segment_free(b, c, 30 * MiB, NULL), 0);
    expect_counters(b, 9, 3, 0, 46 * MiB);
    assert_int_equal(f.seg_allocs, 3);
    assert_int_equal(f.seg_frees, 3);
    assert_int_equal(f.maps, 2);
    assert_int_equal(f.unmaps, 1);

    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(f.destroyed, 1);

    /* A table without destroy is fine too. */
    ops.destroy = NULL;
    assert_int_equal(vram_backend_create_custom(&ops, &f, GiB, 2 * MiB, &b), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(f.destroyed, 1);
}

/* ---- fault injection --------------------------------------------------- */

static void test_faulty_window(void **state)
{
    (void)state;
    const uint64_t G = 2 * MiB;
    vram_backend *inner = make("sim", 64 * MiB, G);
    vram_backend *fb = NULL;
    assert_int_equal(vram_backend_create_faulty(inner, 3, 3, &fb), 0); /* calls 3, 4, 5 */
    assert_string_equal(vram_backend_name(fb), "faulty");
    assert_int_equal(vram_backend_caps(fb), vram_backend_caps(inner));
    assert_int_equal(stats_of(fb).capacity, 64 * MiB);
    assert_int_equal(stats_of(fb).granularity, G);

    uint64_t r = 0, seg = 0, x = 0;
    /* 1, 2: forwarded. */
    assert_int_equal(vram__backend_reserve(fb, 8 * G, &r), 0);
    assert_int_equal(vram__backend_map(fb, r, G), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB - G);
    /* 3: an acquiring call fails with VRAM_ENOMEM and does not reach the sim. */
    expect_fail(vram__backend_map(fb, r + G, G), VRAM_ENOMEM, "map");
    assert_contains(vram_last_error(), "3");
    assert_int_equal(free_bytes(inner), 64 * MiB - G);
    /* 4: a releasing call fails with VRAM_EBACKEND; the granule stays mapped. */
    expect_fail(vram__backend_unmap(fb, r, G), VRAM_EBACKEND, "unmap");
    assert_int_equal(free_bytes(inner), 64 * MiB - G);
    /* 5: segment_alloc, acquiring. */
    expect_fail(vram__backend_segment_alloc(fb, G, NULL, &x), VRAM_ENOMEM, "segment_alloc");
    assert_int_equal(free_bytes(inner), 64 * MiB - G);
    expect_counters(fb, 5, 3, G, G);
    /* 6 on: forwarded again. Granule 1 was never mapped by call 3, and
     * granule 0 is still mapped after call 4 (the sim would refuse both
     * otherwise). */
    assert_int_equal(vram__backend_map(fb, r + G, G), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB - 2 * G);
    expect_fail(vram__backend_map(fb, r, G), VRAM_EINVAL, "already mapped"); /* the sim's */
    assert_int_equal(vram__backend_unmap(fb, r, 2 * G), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB);
    assert_int_equal(vram__backend_segment_alloc(fb, 2 * G, NULL, &seg), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB - 2 * G);
    assert_int_equal(vram__backend_segment_free(fb, seg, 2 * G, NULL), 0);
    assert_int_equal(vram__backend_release(fb, r, 8 * G), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB);
    expect_counters(fb, 11, 4, 0, 2 * G);
    /* The inner reservation is gone: the sim refuses a second release. */
    expect_fail(vram__backend_release(inner, r, 8 * G), VRAM_EINVAL, "not a reservation");
    assert_int_equal(vram_backend_destroy(fb), 0);
    assert_int_equal(vram_backend_destroy(inner), 0);
}

static void test_faulty_releasing_calls(void **state)
{
    (void)state;
    const uint64_t G = 2 * MiB;
    vram_backend *inner = make("sim", 64 * MiB, G);
    vram_backend *fb = NULL;
    uint64_t seg = 0, r = 0;

    /* segment_free (call 2) fails: the segment is still the inner's. */
    assert_int_equal(vram_backend_create_faulty(inner, 2, 1, &fb), 0);
    assert_int_equal(vram__backend_segment_alloc(fb, 4 * MiB, NULL, &seg), 0);
    expect_fail(vram__backend_segment_free(fb, seg, 4 * MiB, NULL), VRAM_EBACKEND,
                "segment_free");
    assert_int_equal(free_bytes(inner), 60 * MiB);
    expect_counters(fb, 2, 1, 4 * MiB, 4 * MiB);
    assert_int_equal(vram__backend_segment_free(fb, seg, 4 * MiB, NULL), 0);
    assert_int_equal(free_bytes(inner), 64 * MiB);
    expect_counters(fb, 3, 1, 0, 4 * MiB);
    assert_int_equal(vram_backend_destroy(fb), 0);

    /* release (call 2) fails: the reservation is kept, mappable, releasable. */
    assert_int_equal(vram_backend_create_faulty(inner, 2, 1, &fb), 0);
    assert_int_equal(vram__backend_reserve(fb, 4 * G, &r), 0);
    expect_fail(vram__backend_release(fb, r, 4 * G), VRAM_EBACKEND, "release");
    assert_int_equal(vram__backend_map(fb, r + 3 * G, G), 0);
    assert_int_equal(vram__backend_unmap(fb, r + 3 * G, G), 0);
    assert_int_equal(vram__backend_release(fb, r, 4 * G), 0);
    expect_counters(fb, 5, 1, 0, G);
    assert_int_equal(vram_backend_destroy(fb), 0);

    /* reserve (call 1) fails with VRAM_ENOMEM; a count of 0 never fails; a
     * window far ahead never fails within the calls made. */
    assert_int_equal(vram_backend_create_faulty(inner, 1, 1, &fb), 0);
    expect_fail(vram__backend_reserve(fb, 4 * G, &r), VRAM_ENOMEM, "reserve");
    assert_int_equal(vram__backend_reserve(fb, 4 * G, &r), 0);
    assert_int_equal(vram__backend_release(fb, r, 4 * G), 0);
    assert_int_equal(vram_backend_destroy(fb), 0);
    assert_int_equal(vram_backend_create_faulty(inner, 1, 0, &fb), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(vram__backend_segment_alloc(fb, G, NULL, &seg), 0);
        assert_int_equal(vram__backend_segment_free(fb, seg, G, NULL), 0);
    }
    expect_counters(fb, 10, 0, 0, G);
    assert_int_equal(vram_backend_destroy(fb), 0);
    assert_int_equal(vram_backend_create_faulty(inner, 1000, 5, &fb), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(vram__backend_segment_alloc(fb, G, NULL, &seg), 0);
        assert_int_equal(vram__backend_segment_free(fb, seg, G, NULL), 0);
    }
    assert_int_equal(vram_backend_destroy(fb), 0);

    /* Every call in a long window fails, then everything works again. */
    assert_int_equal(vram_backend_create_faulty(inner, 1, 6, &fb), 0);
    for (int i = 0; i < 3; i++) {
        expect_fail(vram__backend_segment_alloc(fb, G, NULL, &seg), VRAM_ENOMEM, NULL);
        expect_fail(vram__backend_segment_free(fb, 0x1234, G, NULL), VRAM_EBACKEND, NULL);
    }
    assert_int_equal(vram__backend_segment_alloc(fb, G, NULL, &seg), 0);
    assert_int_equal(vram__backend_segment_free(fb, seg, G, NULL), 0);
    expect_counters(fb, 8, 6, 0, G);
    assert_int_equal(free_bytes(inner), 64 * MiB);
    assert_int_equal(vram_backend_destroy(fb), 0);

    expect_fail(vram_backend_create_faulty(NULL, 1, 1, &fb), VRAM_EINVAL, NULL);
    expect_fail(vram_backend_create_faulty(inner, 1, 1, NULL), VRAM_EINVAL, NULL);
    assert_int_equal(vram_backend_destroy(inner), 0);
}

/* ---- destroy while in use ---------------------------------------------- */

static void test_destroy_busy(void **state)
{
    (void)state;
    vram_backend *b = make("sim", 64 * MiB, 2 * MiB);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.backend = b;
    o.name = "busy-test";

    vram_pool *p1 = NULL, *p2 = NULL;
    if (vram_pool_create(&o, &p1))
        fail_msg("vram_pool_create: %s", vram_last_error());
    assert_ptr_equal(vram_pool_backend(p1), b);
    expect_fail(vram_backend_destroy(b), VRAM_EBUSY, "1 pool");
    assert_contains(vram_last_error(), "sim");

    o.policy = VRAM_POLICY_SEGMENTS;
    if (vram_pool_create(&o, &p2))
        fail_msg("vram_pool_create (segments): %s", vram_last_error());
    expect_fail(vram_backend_destroy(b), VRAM_EBUSY, "2 pool");

    /* The pools really use it. */
    void *ptr1 = NULL, *ptr2 = NULL;
    assert_int_equal(vram_pool_alloc(p1, 3 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL, &ptr1),
                     0);
    assert_int_equal(vram_pool_alloc(p2, 1000, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL, &ptr2), 0);
    assert_true(stats_of(b).held_bytes >= 3 * MiB + 1000);
    assert_true(stats_of(b).calls > 0);

    assert_int_equal(vram_pool_free(p1, ptr1, NULL), 0);
    assert_int_equal(vram_pool_destroy(p1), 0);
    expect_fail(vram_backend_destroy(b), VRAM_EBUSY, "1 pool");
    assert_int_equal(vram_pool_free(p2, ptr2, NULL), 0);
    assert_int_equal(vram_pool_destroy(p2), 0);

    /* A pool that fails to be created does not keep the backend busy. */
    o.policy = VRAM_POLICY_VMM;
    o.alignment = 3;
    vram_pool *p3 = (vram_pool *)0x1;
    expect_fail(vram_pool_create(&o, &p3), VRAM_EINVAL, "alignment");
    assert_null(p3);

    /* Everything was given back. */
    assert_int_equal(stats_of(b).held_bytes, 0);
    assert_int_equal(free_bytes(b), 64 * MiB);
    assert_int_equal(vram_backend_destroy(b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sim_segments, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_sim_map, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_sim_map_capacity, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_host_map, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_host_segments_and_capacity, clean_config,
                                        clean_config),
        cmocka_unit_test_setup_teardown(test_create_validation, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_sim_events, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_configured_backend, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_create_custom, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_faulty_window, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_faulty_releasing_calls, clean_config, clean_config),
        cmocka_unit_test_setup_teardown(test_destroy_busy, clean_config, clean_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
