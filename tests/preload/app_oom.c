/* tests/preload/app_oom.c - a CUDA program that runs the device out of
 * memory: cuMemAlloc of BLOCK bytes (default 1 MiB) until the driver says
 * CUDA_ERROR_OUT_OF_MEMORY (or LIMIT blocks, default what the device's
 * total memory holds plus 16), then frees them all. One JSON line: how
 * many succeeded, the error that stopped it, free memory at that moment.
 * Exit status 0 when it stopped on CUDA_ERROR_OUT_OF_MEMORY. (Against the
 * stand-in, keep FAKE_CUDA_TOTAL small: every block is host memory.)
 *
 *   app_oom [--block BYTES] [--limit N] */
#include "app_common.h"

int main(int argc, char **argv)
{
    unsigned long long block = APP_MIB, limit = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--block") && i + 1 < argc)
            block = app_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc)
            limit = app_bytes(argv[++i]);
        else
            app_die("usage: app_oom [--block BYTES] [--limit N]");
    }
    if (block == 0)
        app_die("--block must be above 0");
    app_cuda c;
    app_open_cuda(&c);
    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, 0));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));
    PFN_cuMemAlloc_v3020 mem_alloc = APP_PROC(&c, cuMemAlloc, 3020);
    PFN_cuMemFree_v3020 mem_free = APP_PROC(&c, cuMemFree, 3020);
    PFN_cuMemGetInfo_v3020 mem_info = APP_PROC(&c, cuMemGetInfo, 3020);
    size_t total = 0, free_before = 0;
    APP_CHECK(&c, mem_info(&free_before, &total));
    if (!limit)
        limit = total / block + 16;

    CUdeviceptr *p = calloc(limit, sizeof *p);
    if (!p)
        app_die("out of host memory");
    unsigned long long n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < limit && (r = mem_alloc(&p[n], block)) == CUDA_SUCCESS)
        n++;
    size_t free_at_oom = 0;
    APP_CHECK(&c, mem_info(&free_at_oom, &total));
    for (unsigned long long i = 0; i < n; i++)
        APP_CHECK(&c, mem_free(p[i]));
    free(p);
    size_t free_after = 0;
    APP_CHECK(&c, mem_info(&free_after, &total));
    printf("{\"app\":\"oom\",\"block\":%llu,\"allocated_blocks\":%llu,\"allocated\":%llu,"
           "\"code\":%d,\"error\":\"%s\",\"total\":%zu,\"free_before\":%zu,\"free_at_oom\":%zu,"
           "\"free_after\":%zu}\n",
           block, n, n * block, (int)r, app_err(&c, r), total, free_before, free_at_oom,
           free_after);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}
