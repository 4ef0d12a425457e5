/* tests/gpu/test_gpu_streams.c - stream-ordered reuse with real events: a
 * block freed on a stream whose work has not run yet is reused at once by
 * that stream. With stream_waits 0 it is not handed to another stream until
 * the work completed, and is handed to it once it has, without waiting;
 * with stream_waits 1 (the default) another stream that would otherwise
 * take new memory gets it at once, made to wait on the device: its work
 * queued after the allocation does not run before the freeing stream's
 * work, and the host never waits. Stream A is held busy by
 * cuStreamWaitValue32 on a host flag, so no kernel is needed; both streams
 * join the pool before that (a joining stream waits for the first's work,
 * which here would wait for the host). Needs a GPU. */
#include <cuda.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024ull)

static void run(const char *backend, vram_policy policy, int waits)
{
    vram_device *dev;
    assert_int_equal(vram_device_open(0, NULL, &dev), 0);
    vram_backend *b;
    vram_backend_opts bo = {.device = dev};
    assert_int_equal(vram_backend_create(backend, &bo, &b), 0);
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.backend = b;
    po.policy = policy;
    po.stream_waits = waits;
    /* No spare memory: c can only get x or new memory (vmm: no chunk mapped
     * beyond a block; segments: a segment of exactly 8 MiB, no rest). */
    po.map_chunk = 0;
    po.segment_medium = 8 * MiB;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&po, &p), 0);
    vram_stream a, c;
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_NORMAL, &a), 0);
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_NORMAL, &c), 0);

    /* Both streams use the pool before a is blocked: the second stream's
     * first use waits once for the first's work (see vramkit/pool.h). */
    void *t;
    assert_int_equal(vram_pool_alloc(p, 4096, 0, VRAM_KIND_OTHER, a, &t), 0);
    assert_int_equal(vram_pool_free(p, t, a), 0);
    assert_int_equal(vram_pool_alloc(p, 4096, 0, VRAM_KIND_OTHER, c, &t), 0);
    assert_int_equal(vram_pool_free(p, t, c), 0);
    vram_pool_stats st0;
    assert_int_equal(vram_pool_stats_get(p, &st0), 0);

    volatile uint32_t *flag;
    assert_int_equal(cuMemHostAlloc((void **)&flag, 4, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    *flag = 0;
    CUdeviceptr dflag;
    assert_int_equal(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0), CUDA_SUCCESS);
    /* Stream a waits for the host; work queued behind it cannot run. */
    assert_int_equal(cuStreamWaitValue32((CUstream)a, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ),
                     CUDA_SUCCESS);

    void *x, *y, *z;
    assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, a, &x), 0);
    assert_int_equal(cuMemsetD32Async((CUdeviceptr)x, 1, 2 * MiB, (CUstream)a), CUDA_SUCCESS);
    assert_int_equal(vram_pool_free(p, x, a), 0);
    /* The same stream reuses it at once: its work runs in order. */
    assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, a, &y), 0);
    assert_ptr_equal(x, y);
    assert_int_equal(vram_pool_free(p, y, a), 0);
    if (waits) {
        /* Another stream gets it at once, waiting on the device for a. */
        assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, c, &z), 0);
        assert_ptr_equal(z, x);
        assert_int_equal(cuMemsetD32Async((CUdeviceptr)z, 2, 2 * MiB, (CUstream)c),
                         CUDA_SUCCESS);
        vram_pool_stats st;
        assert_int_equal(vram_pool_stats_get(p, &st), 0);
        assert_int_equal(st.stream_waits_total - st0.stream_waits_total, 1);
        assert_int_equal(st.event_waits_total, st0.event_waits_total); /* the host did not */
        assert_int_equal(cuStreamQuery((CUstream)c), CUDA_ERROR_NOT_READY); /* behind a */
        *flag = 1;
        assert_int_equal(cuStreamSynchronize((CUstream)c), CUDA_SUCCESS);
        assert_int_equal(cuStreamQuery((CUstream)a), CUDA_SUCCESS); /* a ran first */
        uint32_t v;
        assert_int_equal(cuMemcpyDtoH(&v, (CUdeviceptr)z, 4), CUDA_SUCCESS);
        assert_int_equal(v, 2); /* c's memset ran after a's */
        void *w;
        assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, c, &w), 0);
        assert_ptr_not_equal(w, z);
        assert_int_equal(vram_pool_free(p, z, c), 0);
        assert_int_equal(vram_pool_free(p, w, c), 0);
    } else {
        /* Another stream does not get it while a's work is pending. */
        assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, c, &z), 0);
        assert_ptr_not_equal(z, x);
        assert_int_equal(cuStreamQuery((CUstream)a), CUDA_ERROR_NOT_READY);
        vram_pool_stats st;
        assert_int_equal(vram_pool_stats_get(p, &st), 0);
        assert_true(st.pending_bytes >= 8 * MiB);
        assert_int_equal(st.stream_waits_total, st0.stream_waits_total);
        /* Let a run; then c gets the block without anyone waiting. */
        *flag = 1;
        assert_int_equal(cuStreamSynchronize((CUstream)a), CUDA_SUCCESS);
        void *w;
        assert_int_equal(vram_pool_alloc(p, 8 * MiB, 0, VRAM_KIND_ACTIVATIONS, c, &w), 0);
        assert_ptr_equal(w, x);
        assert_int_equal(vram_pool_stats_get(p, &st), 0);
        assert_int_equal(st.event_waits_total, st0.event_waits_total); /* no wait, only a query */
        uint32_t v;
        assert_int_equal(cuMemcpyDtoH(&v, (CUdeviceptr)w, 4), CUDA_SUCCESS);
        assert_int_equal(v, 1); /* a's memset ran before c got the block */
        assert_int_equal(vram_pool_free(p, z, c), 0);
        assert_int_equal(vram_pool_free(p, w, c), 0);
    }
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(cuMemFreeHost((void *)flag), CUDA_SUCCESS);
    assert_int_equal(vram_device_stream_release(dev, a), 0);
    assert_int_equal(vram_device_stream_release(dev, c), 0);
    assert_int_equal(vram_device_close(dev), 0);
}

static void test_vmm(void **state)
{
    (void)state;
    run("vmm", VRAM_POLICY_VMM, 0);
}

static void test_cuda_async(void **state)
{
    (void)state;
    run("cuda_async", VRAM_POLICY_SEGMENTS, 0);
}

static void test_vmm_stream_wait(void **state)
{
    (void)state;
    run("vmm", VRAM_POLICY_VMM, 1);
}

static void test_cuda_async_stream_wait(void **state)
{
    (void)state;
    run("cuda_async", VRAM_POLICY_SEGMENTS, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_cuda_async),
        cmocka_unit_test(test_vmm_stream_wait),
        cmocka_unit_test(test_cuda_async_stream_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
