/* tests/gpu/test_gpu_device.c - one context shared by many threads, on a
 * real GPU: vram_device_open/bind/close, the stream pool, device info, and
 * NVML's view of this process (one context's worth of memory, however many
 * worker threads bind). Needs a GPU; registered with -DVRAM_GPU_TESTS=ON. */
#include <cuda.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024ull)
#define WORKERS 8

static void test_open_is_shared(void **state)
{
    (void)state;
    vram_device *a, *b;
    assert_int_equal(vram_device_open(0, NULL, &a), 0);
    assert_int_equal(vram_device_open(0, NULL, &b), 0);
    assert_ptr_equal(a, b);
    CUcontext primary;
    CUdevice d;
    assert_int_equal(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&primary, d), CUDA_SUCCESS);
    assert_ptr_equal(vram_device_context(a), primary); /* the primary context, not a new one */
    assert_int_equal(cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
    vram_device_info info;
    assert_int_equal(vram_device_info_get(a, &info), 0);
    assert_true(info.name[0]);
    assert_true(info.total_bytes > 0 && info.free_bytes <= info.total_bytes);
    assert_true(info.granularity >= 4096 && !(info.granularity & (info.granularity - 1)));
    assert_int_equal(info.stack_limit, vram_config_get()->stack_limit);
    assert_true(info.priority_greatest <= info.priority_least);
    int n;
    assert_int_equal(vram_device_count(&n), 0);
    assert_int_equal(vram_device_open(n, NULL, &b), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "no CUDA device"));
    assert_int_equal(vram_device_close(a), 0);
    assert_int_equal(vram_device_close(a), 0);
}

typedef struct worker {
    vram_device *dev;
    CUcontext seen;
    vram_stream stream;
    int rc;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    w->rc = vram_device_bind(w->dev);
    if (!w->rc)
        w->rc = vram_device_stream_acquire(w->dev, VRAM_PRIORITY_NORMAL, &w->stream);
    cuCtxGetCurrent(&w->seen);
    CUdeviceptr p;
    if (!w->rc && cuMemAllocAsync(&p, 1 << 20, (CUstream)w->stream) == CUDA_SUCCESS) {
        cuMemsetD8Async(p, 7, 1 << 20, (CUstream)w->stream);
        cuMemFreeAsync(p, (CUstream)w->stream);
        cuStreamSynchronize((CUstream)w->stream);
    }
    return NULL;
}

/* This process's device memory according to NVML, or 0 if unknown. */
static uint64_t own_usage(vram_device *dev)
{
    vram_device_info info;
    vram_gpu_memory m;
    if (vram_device_info_get(dev, &info) || vram_gpu_memory_read_pci(info.pci_bus_id, &m) ||
        !m.processes_known)
        return 0;
    for (unsigned i = 0; i < m.n_processes; i++)
        if (m.processes[i].pid == (unsigned)getpid() &&
            m.processes[i].used_bytes != VRAM_GPU_BYTES_UNKNOWN)
            return m.processes[i].used_bytes;
    return 0; /* another PID namespace: NVML's pids are not ours */
}

static void test_workers_share_one_context(void **state)
{
    (void)state;
    vram_device *dev;
    assert_int_equal(vram_device_open(0, NULL, &dev), 0);
    worker w[WORKERS];
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.dev = dev};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].rc, 0);
        assert_ptr_equal(w[i].seen, vram_device_context(dev));
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(w[i].stream, w[j].stream); /* a stream each */
    }
    uint64_t used = own_usage(dev);
    if (used) /* one context: far below the 524 MiB a second one would add */
        assert_true(used < 800 * MiB);
    print_message("process uses %.1f MiB with %d workers bound (0: NVML cannot tell)\n",
                  (double)used / MiB, WORKERS);
    assert_int_equal(vram_device_close(dev), VRAM_EBUSY); /* streams still out */
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(vram_device_stream_release(dev, w[i].stream), 0);
    assert_int_equal(vram_device_close(dev), 0);
}

static void test_stream_pool(void **state)
{
    (void)state;
    vram_device *dev;
    assert_int_equal(vram_device_open(0, NULL, &dev), 0);
    vram_stream hi, lo, again;
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_HIGH, &hi), 0);
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_LOW, &lo), 0);
    int p_hi, p_lo;
    assert_int_equal(cuStreamGetPriority((CUstream)hi, &p_hi), CUDA_SUCCESS);
    assert_int_equal(cuStreamGetPriority((CUstream)lo, &p_lo), CUDA_SUCCESS);
    assert_true(p_hi < p_lo); /* lower number, higher priority */
    assert_int_equal(vram_device_stream_release(dev, hi), 0);
    assert_int_equal(vram_device_stream_release(dev, hi), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "twice"));
    assert_int_equal(vram_device_stream_release(dev, (vram_stream)0x1234), VRAM_EINVAL);
    assert_int_equal(vram_device_stream_acquire(dev, VRAM_PRIORITY_HIGH, &again), 0);
    assert_ptr_equal(again, hi); /* reused, not created */
    vram_backend *b;
    vram_backend_opts bo = {.device = dev};
    assert_int_equal(vram_backend_create("cuda", &bo, &b), 0);
    assert_int_equal(vram_device_stream_release(dev, again), 0);
    assert_int_equal(vram_device_stream_release(dev, lo), 0);
    assert_int_equal(vram_device_close(dev), VRAM_EBUSY); /* the backend uses it */
    assert_non_null(strstr(vram_last_error(), "in use"));
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(vram_device_close(dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_is_shared),
        cmocka_unit_test(test_workers_share_one_context),
        cmocka_unit_test(test_stream_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
