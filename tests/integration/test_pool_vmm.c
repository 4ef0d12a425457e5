/* tests/integration/test_pool_vmm.c - the vmm policy under its limit: below it
 * freed granules stay mapped, so a loop that frees and reallocates maps
 * nothing new and a hole stays held; at it, free memory goes back before new
 * memory is mapped and held never passes it; an allocation fails only when
 * live blocks leave no room, saying so with the numbers; the decay thread
 * gives back memory left unused; and threads allocating while others map,
 * unmap and decay keep the pool consistent (run under TSan too). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024)

static vram_pool *make_pool_with(vram_backend **b, uint64_t limit, uint64_t decay_ms,
                                 uint64_t huge_size)
{
    assert_int_equal(
        vram_backend_create("sim", &(vram_backend_opts){.capacity = 4096 * MiB, .granularity = 2 * MiB}, b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = *b;
    o.policy = VRAM_POLICY_VMM;
    o.retain_min = 0;
    o.limit = limit;
    o.decay_ms = decay_ms;
    o.huge_size = huge_size;
    o.configured_listeners = 0;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static vram_pool *make_pool(vram_backend **b, uint64_t limit)
{
    return make_pool_with(b, limit, 0, 0);
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
    vram_pool *p = make_pool(&b, 0);
    assert_int_equal(stats(p).limit_bytes, 4096 * MiB); /* the device's free memory (sim: no margin) */
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
    assert_true(s.reserved_bytes > 0); /* kept: below the limit */
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(p, &released), 0);
    assert_int_equal(released, s.reserved_bytes);
    assert_int_equal(stats(p).reserved_bytes, 0);
    assert_int_equal(stats(p).released_bytes_total, released);
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

/* Below the limit the hole stays mapped; at a limit of 128 MiB it goes back
 * before the request maps, and held never passes the limit: on huge blocks
 * and on blocks mapped in the large region alike. */
static void test_limit_gives_back_on_demand(void **state)
{
    (void)state;
    uint64_t huge_sizes[] = {16 * MiB, 0};
    for (int h = 0; h < 2; h++) {
        vram_backend *b;
        vram_pool *p = make_pool_with(&b, 0, 0, huge_sizes[h]);
        assert_true(hole_then_larger(p) >= 64 * MiB + 96 * MiB);
        assert_int_equal(stats(p).released_bytes_total, 0);
        drop(p, b);
        p = make_pool_with(&b, 128 * MiB, 0, huge_sizes[h]);
        uint64_t reserved = hole_then_larger(p);
        vram_pool_stats s = stats(p);
        assert_true(reserved <= 128 * MiB);
        assert_true(s.peak_reserved_bytes <= 128 * MiB);
        assert_true(s.released_bytes_total >= 32 * MiB); /* the hole, or most of it */
        assert_int_equal(s.failed_allocs_total, 0);
        drop(p, b);
    }
}

/* An allocation fails only when the live blocks leave no room, and the
 * message names the limit and what is held; the pool stays usable. */
static void test_limit_refusal_names_numbers(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool(&b, 100 * MiB);
    void *a, *c, *d;
    assert_int_equal(vram_pool_alloc(p, 60 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &a), 0);
    assert_int_equal(vram_pool_alloc(p, 50 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &c), VRAM_ENOMEM);
    const char *e = vram_last_error();
    assert_non_null(strstr(e, "limit of 100.0 MiB"));
    assert_non_null(strstr(e, "60.0 MiB live"));
    assert_non_null(strstr(e, "50.0 MiB more is needed"));
    assert_int_equal(stats(p).failed_allocs_total, 1);
    /* What fits still does: 60 + 40 MiB is the limit exactly. */
    assert_int_equal(vram_pool_alloc(p, 40 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &d), 0);
    assert_int_equal(stats(p).reserved_bytes, 100 * MiB);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_pool_free(p, d, NULL), 0);
    /* Free memory goes back for a block larger than any hole. */
    assert_int_equal(vram_pool_alloc(p, 90 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &a), 0);
    assert_true(stats(p).peak_reserved_bytes <= 100 * MiB);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    drop(p, b);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* After the load stops, held memory falls to what live blocks need within
 * the decay time plus a second, with no call by the program; memory freed
 * again resets the clock, so memory in use does not go back. */
static void test_decay_returns_memory(void **state)
{
    (void)state;
    vram_backend *b;
    enum { DECAY = 300 };
    vram_pool *p = make_pool_with(&b, 0, DECAY, 0);
    void *w, *ptr[8];
    assert_int_equal(vram_pool_alloc(p, 10 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &w), 0);
    for (int iter = 0; iter < 3; iter++) {
        for (int i = 0; i < 8; i++)
            assert_int_equal(vram_pool_alloc(p, (uint64_t)(i + 1) * 3 * MiB, 0,
                                             VRAM_KIND_ACTIVATIONS, NULL, &ptr[i]), 0);
        for (int i = 0; i < 8; i++)
            assert_int_equal(vram_pool_free(p, ptr[i], NULL), 0);
    }
    uint64_t stop = now_ms();
    assert_true(stats(p).reserved_bytes > 100 * MiB);
    /* Half the decay time later nothing went back. */
    sleep_ms(DECAY / 2);
    if (now_ms() - stop < DECAY - 20)
        assert_true(stats(p).reserved_bytes > 100 * MiB);
    uint64_t fell = 0;
    while (now_ms() - stop < DECAY + 3000) {
        if (stats(p).reserved_bytes <= 10 * MiB) {
            fell = now_ms() - stop;
            break;
        }
        sleep_ms(10);
    }
    vram_pool_stats s = stats(p);
    if (!fell)
        fail_msg("held %llu bytes %u ms after the load stopped (live 10 MiB)",
                 (unsigned long long)s.reserved_bytes, DECAY + 3000);
    assert_true(fell <= DECAY + 1000);
    assert_int_equal(s.reserved_bytes, 10 * MiB); /* the weights' granules */
    assert_true(s.decay_released_bytes_total > 100 * MiB);
    assert_int_equal(s.decay_released_bytes_total, s.released_bytes_total);
    assert_int_equal(vram_pool_free(p, w, NULL), 0);
    drop(p, b);
}

/* Threads allocating and freeing under a tight limit while the decay
 * thread gives memory back, each mapping and unmapping with the lock
 * released: no block is handed out twice, held never passes the limit, and
 * every byte is accounted for at the end. */
enum { THREADS = 4, OPS = 3000, SLOTS = 16 };

typedef struct worker {
    vram_pool *p;
    uint64_t seed;
    uint64_t refused;
    void *ptr[SLOTS];
    uint64_t size[SLOTS];
} worker;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < OPS; i++) {
        unsigned k = (unsigned)(rnd(&w->seed) % SLOTS);
        if (w->ptr[k]) {
            vram_block_info bi;
            if (vram_pool_block_info(w->p, w->ptr[k], &bi) || bi.requested != w->size[k])
                return "a live block lost its record";
            if (vram_pool_free(w->p, w->ptr[k], NULL))
                return "free failed";
            w->ptr[k] = NULL;
            continue;
        }
        uint64_t r = rnd(&w->seed);
        uint64_t size = r % 4 == 0 ? (r >> 8) % (6 * MiB) + 1 : (r >> 8) % (256 * 1024) + 1;
        int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, NULL, &w->ptr[k]);
        if (rc == VRAM_ENOMEM)
            w->refused++;
        else if (rc)
            return "allocation failed with something other than VRAM_ENOMEM";
        else
            w->size[k] = size;
    }
    for (int k = 0; k < SLOTS; k++)
        if (w->ptr[k] && vram_pool_free(w->p, w->ptr[k], NULL))
            return "final free failed";
    return NULL;
}

static void test_threads_under_limit(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = make_pool_with(&b, 96 * MiB, 5, 0);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].p = p;
        w[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *why;
        pthread_join(t[i], &why);
        if (why)
            fail_msg("thread %d: %s", i, (const char *)why);
    }
    vram_pool_stats s = stats(p);
    assert_int_equal(s.live_bytes, 0);
    assert_int_equal(s.live_blocks, 0);
    assert_true(s.peak_reserved_bytes <= 96 * MiB);
    assert_true(s.backend_calls_total > 10); /* memory went back and forth */
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(p, &released), 0);
    assert_int_equal(stats(p).reserved_bytes, 0);
    drop(p, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_maps_nothing_new),
        cmocka_unit_test(test_limit_gives_back_on_demand),
        cmocka_unit_test(test_limit_refusal_names_numbers),
        cmocka_unit_test(test_decay_returns_memory),
        cmocka_unit_test(test_threads_under_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
