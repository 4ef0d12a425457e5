/* tests/preload/app_dlopen.c - a CUDA program that never links libcuda:
 * dlopen("libcuda.so.1") and dlsym of the exact names cuMemAlloc_v2,
 * cuMemFree_v2, cuGetProcAddress_v2 and cuMemGetInfo_v2 (the rest it
 * needs through cuGetProcAddress_v2), as loaders of the driver do. It
 * allocates COUNT blocks of SIZE bytes through those pointers and frees
 * them; with --budget-probe it then asks for BYTES at once and reports
 * the driver's answer (a budget enforced in front of the driver shows as
 * CUDA_ERROR_OUT_OF_MEMORY there).
 *
 *   app_dlopen [--count N] [--size BYTES] [--budget-probe BYTES] [--hold SECONDS]
 *
 * With --hold it prints "holding" (flushed) once its blocks are allocated
 * and keeps them that long before freeing them: a member of a shared
 * budget that holds bytes while others ask, or is killed holding them.
 *
 * Defaults: 8 blocks of 1 MiB. One JSON line: what it allocated,
 * cuMemGetInfo before, at the peak and after, and the probe's CUresult
 * (code and name). Exit status 0 unless a call other than the probe
 * failed. */
#include <unistd.h>

#include "app_common.h"

int main(int argc, char **argv)
{
    unsigned long long count = 8, size = APP_MIB, probe = 0, hold = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = app_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = app_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--budget-probe") && i + 1 < argc)
            probe = app_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
            hold = app_bytes(argv[++i]);
        else
            app_die("usage: app_dlopen [--count N] [--size BYTES] [--budget-probe BYTES] "
                    "[--hold SECONDS]");
    }

    app_cuda c;
    app_open_cuda(&c);
    PFN_cuMemAlloc_v3020 mem_alloc = (PFN_cuMemAlloc_v3020)app_sym(c.lib, "cuMemAlloc_v2");
    PFN_cuMemFree_v3020 mem_free = (PFN_cuMemFree_v3020)app_sym(c.lib, "cuMemFree_v2");
    PFN_cuMemGetInfo_v3020 mem_info = (PFN_cuMemGetInfo_v3020)app_sym(c.lib, "cuMemGetInfo_v2");

    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUdevice dev;
    APP_CHECK(&c, APP_PROC(&c, cuDeviceGet, 2000)(&dev, 0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, dev));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));

    size_t total = 0, free_before = 0, free_peak = 0, free_after = 0;
    APP_CHECK(&c, mem_info(&free_before, &total));
    CUdeviceptr *blocks = calloc(count ? count : 1, sizeof *blocks);
    if (!blocks)
        app_die("out of host memory");
    for (unsigned long long i = 0; i < count; i++)
        APP_CHECK(&c, mem_alloc(&blocks[i], size));
    APP_CHECK(&c, mem_info(&free_peak, &total));
    if (hold) {
        printf("holding %llu bytes, pid %d\n", count * size, (int)getpid());
        fflush(stdout);
        sleep((unsigned)hold);
    }
    for (unsigned long long i = 0; i < count; i++)
        APP_CHECK(&c, mem_free(blocks[i]));
    free(blocks);
    APP_CHECK(&c, mem_info(&free_after, &total));

    CUresult probe_r = CUDA_SUCCESS;
    if (probe) {
        CUdeviceptr p = 0;
        probe_r = mem_alloc(&p, probe);
        if (probe_r == CUDA_SUCCESS)
            APP_CHECK(&c, mem_free(p));
    }

    printf("{\"app\":\"dlopen\",\"count\":%llu,\"size\":%llu,\"allocated\":%llu,\"total\":%zu,"
           "\"free_before\":%zu,\"free_peak\":%zu,\"free_after\":%zu,\"probe_bytes\":%llu,"
           "\"probe_code\":%d,\"probe_result\":\"%s\"}\n",
           count, size, count * size, total, free_before, free_peak, free_after, probe,
           (int)probe_r, app_err(&c, probe_r));
    return 0;
}
