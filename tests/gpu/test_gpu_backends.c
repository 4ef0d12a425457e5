/* tests/gpu/test_gpu_backends.c - pools on the three GPU backends (cuda,
 * cuda_async, vmm) with real device memory: every block is written with its
 * own pattern and read back (real, disjoint memory), trims give memory back
 * to the driver, a vmm mapping refused under memory pressure leaves nothing
 * behind, and errors name the problem. Needs a GPU. */
#include <cuda.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024ull)
#define BLOCKS 64

static vram_device *dev;

static int setup(void **state)
{
    (void)state;
    return vram_device_open(0, NULL, &dev);
}

static int teardown(void **state)
{
    (void)state;
    return vram_device_close(dev);
}

static uint64_t used_now(void)
{
    uint64_t f, t;
    assert_int_equal(vram_device_memory(dev, &f, &t), 0);
    return t - f;
}

static vram_pool *pool_on(const char *backend, vram_policy policy, vram_backend **b)
{
    vram_backend_opts bo = {.device = dev};
    assert_int_equal(vram_backend_create(backend, &bo, b), 0);
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.backend = *b;
    po.policy = policy;
    po.name = backend;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&po, &p), 0);
    return p;
}

/* One cycle: allocate, write and check, free, trim, destroy. Returns the
 * device memory in use before and after. */
static void cycle(const char *name, vram_policy policy, uint64_t *before_out, uint64_t *after_out)
{
    uint64_t before = used_now();
    vram_backend *b;
    vram_pool *p = pool_on(name, policy, &b);
    vram_stream s;
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_NORMAL, &s), 0);
    void *ptr[BLOCKS];
    uint64_t size[BLOCKS];
    srand(7);
    for (int i = 0; i < BLOCKS; i++) {
        size[i] = (i % 4 == 0) ? (uint64_t)(rand() % 64 + 1) * MiB
                               : (uint64_t)(rand() % (512 * 1024) + 4) & ~3ull;
        assert_int_equal(vram_pool_alloc(p, size[i], 0, VRAM_KIND_ACTIVATIONS, s, &ptr[i]), 0);
        assert_int_equal(cuMemsetD32Async((CUdeviceptr)ptr[i], 0x5a000000u + (unsigned)i,
                                          size[i] / 4, (CUstream)s),
                         CUDA_SUCCESS);
    }
    assert_int_equal(cuStreamSynchronize((CUstream)s), CUDA_SUCCESS);
    for (int i = 0; i < BLOCKS; i++) { /* first and last words keep their own pattern */
        uint32_t w[2];
        assert_int_equal(cuMemcpyDtoH(&w[0], (CUdeviceptr)ptr[i], 4), CUDA_SUCCESS);
        assert_int_equal(cuMemcpyDtoH(&w[1], (CUdeviceptr)ptr[i] + size[i] - 4, 4), CUDA_SUCCESS);
        assert_int_equal(w[0], 0x5a000000u + (unsigned)i);
        assert_int_equal(w[1], 0x5a000000u + (unsigned)i);
    }
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_true(st.reserved_bytes >= st.allocated_bytes);
    for (int i = 0; i < BLOCKS; i++)
        assert_int_equal(vram_pool_free(p, ptr[i], s), 0);
    assert_int_equal(vram_pool_free(p, ptr[0], s), VRAM_ENOTALLOC); /* double free */
    assert_int_equal(vram_pool_trim(p, NULL), 0);
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.live_bytes, 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(vram_device_stream_release(dev, s), 0);
    assert_int_equal(vram_device_synchronize(dev), 0);
    *before_out = before;
    *after_out = used_now();
}

/* The first cycle may leave the driver's own lazily loaded state (module
 * code for memset, stream resources); the second must give back all it took. */
static void check_backend(const char *name, vram_policy policy)
{
    uint64_t b1, a1, b2, a2;
    cycle(name, policy, &b1, &a1);
    cycle(name, policy, &b2, &a2);
    print_message("%s: device memory in use %.1f -> %.1f MiB (first cycle), %.1f -> %.1f MiB "
                  "(second)\n",
                  name, (double)b1 / MiB, (double)a1 / MiB, (double)b2 / MiB, (double)a2 / MiB);
    assert_true(a2 <= b2 + 2 * MiB); /* given back to the driver */
}

static void test_cuda(void **state)
{
    (void)state;
    check_backend("cuda", VRAM_POLICY_SEGMENTS);
}

static void test_cuda_async(void **state)
{
    (void)state;
    check_backend("cuda_async", VRAM_POLICY_SEGMENTS);
}

static void test_vmm(void **state)
{
    (void)state;
    check_backend("vmm", VRAM_POLICY_VMM);
}

/* Fill the device with a plain cuMemAlloc so a mapping is refused, and check
 * the pool rolls back: same reserved bytes, nothing held, a clear error; and
 * it works again once memory is back. */
static void test_vmm_pressure_rolls_back(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = pool_on("vmm", VRAM_POLICY_VMM, &b);
    void *small;
    assert_int_equal(vram_pool_alloc(p, 4 * MiB, 0, VRAM_KIND_OTHER, NULL, &small), 0);
    uint64_t f, t;
    assert_int_equal(vram_device_memory(dev, &f, &t), 0);
    CUdeviceptr hog = 0;
    uint64_t leave = 256 * MiB;
    assert_int_equal(cuMemAlloc(&hog, f - leave), CUDA_SUCCESS);
    vram_pool_stats before, after;
    assert_int_equal(vram_pool_stats_get(p, &before), 0);
    void *big;
    int rc = vram_pool_alloc(p, 2048 * MiB, 0, VRAM_KIND_OTHER, NULL, &big);
    assert_int_equal(rc, VRAM_ENOMEM);
    print_message("refused as expected: %s\n", vram_last_error());
    assert_non_null(strstr(vram_last_error(), "2.00 GiB"));
    assert_int_equal(vram_pool_stats_get(p, &after), 0);
    assert_int_equal(after.reserved_bytes, before.reserved_bytes);
    assert_int_equal(after.live_bytes, before.live_bytes);
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    assert_int_equal(bs.held_bytes, before.reserved_bytes);
    assert_int_equal(cuMemFree(hog), CUDA_SUCCESS);
    assert_int_equal(vram_pool_alloc(p, 2048 * MiB, 0, VRAM_KIND_OTHER, NULL, &big), 0);
    assert_int_equal(cuMemsetD8((CUdeviceptr)big, 1, 2048 * MiB), CUDA_SUCCESS);
    assert_int_equal(vram_pool_free(p, big, NULL), 0);
    assert_int_equal(vram_pool_free(p, small, NULL), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static void test_bad_requests(void **state)
{
    (void)state;
    vram_backend *b;
    vram_backend_opts bo = {.device = dev, .granularity = 3 * MiB};
    assert_int_equal(vram_backend_create("vmm", &bo, &b), VRAM_EINVAL);
    vram_pool *p = pool_on("cuda", VRAM_POLICY_SEGMENTS, &b);
    void *x;
    /* Beyond the device's free memory, the pool's default limit refuses
     * before the driver is asked ... */
    assert_int_equal(vram_pool_alloc(p, 1ull << 50, 0, VRAM_KIND_OTHER, NULL, &x), VRAM_ENOMEM);
    assert_non_null(strstr(vram_last_error(), "out of memory: the device's free memory"));
    /* ... and with a limit above the device, the driver's refusal is said. */
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.backend = b;
    po.name = "cuda-over";
    po.policy = VRAM_POLICY_SEGMENTS;
    po.limit = 1ull << 52;
    vram_pool *over;
    assert_int_equal(vram_pool_create(&po, &over), 0);
    assert_int_equal(vram_pool_alloc(over, 1ull << 50, 0, VRAM_KIND_OTHER, NULL, &x), VRAM_ENOMEM);
    assert_non_null(strstr(vram_last_error(), "cuMemAlloc"));
    assert_int_equal(vram_pool_destroy(over), 0);
    vram_pool_opts_init(&po);
    po.backend = b;
    po.policy = VRAM_POLICY_VMM; /* cuMemAlloc segments cannot be mapped */
    vram_pool *q;
    assert_int_equal(vram_pool_create(&po, &q), VRAM_EINVAL);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda),
        cmocka_unit_test(test_cuda_async),
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_vmm_pressure_rolls_back),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
