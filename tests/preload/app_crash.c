/* tests/preload/app_crash.c - a CUDA program that dies in the middle:
 * three 1 MiB cuMemAlloc, one freed, a JSON line of what it holds
 * (flushed), then abort(). Whatever a library in front of the driver
 * wrote as it went (a trace) must still be there after the SIGABRT.
 *
 *   app_crash [--blocks N]
 *
 * Never exits normally: its status is the signal's (134 in a shell). */
#include <signal.h>

#include "app_common.h"

int main(int argc, char **argv)
{
    unsigned blocks = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            blocks = (unsigned)strtoul(argv[++i], NULL, 10);
        else
            app_die("usage: app_crash [--blocks N]");
    }
    if (blocks < 2 || blocks > 1024)
        app_die("--blocks must be 2 to 1024");
    app_cuda c;
    app_open_cuda(&c);
    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, 0));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));
    PFN_cuMemAlloc_v3020 mem_alloc = APP_PROC(&c, cuMemAlloc, 3020);
    CUdeviceptr p[1024];
    for (unsigned i = 0; i < blocks; i++)
        APP_CHECK(&c, mem_alloc(&p[i], APP_MIB));
    APP_CHECK(&c, APP_PROC(&c, cuMemFree, 3020)(p[0]));
    printf("{\"app\":\"crash\",\"allocated\":%llu,\"freed\":%llu,\"live\":%llu,\"signal\":%d}\n",
           blocks * APP_MIB, APP_MIB, (blocks - 1) * APP_MIB, SIGABRT);
    fflush(stdout);
    abort();
}
