/* tests/preload/app_nvml.c - device memory as NVML and as the driver see
 * it: dlopen of libcuda.so.1 and libnvidia-ml.so.1, a current primary
 * context and 64 MiB allocated, then nvmlDeviceGetMemoryInfo (v1 and v2)
 * of device 0, the compute processes on it, and cuMemGetInfo. One JSON
 * line with all of them. Exit status 0 when every call succeeded.
 *
 *   app_nvml [--alloc BYTES] */
#include <unistd.h>

#include "app_common.h"
#include "nvml_abi.h"

#define NVML_CHECK(call)                                                                           \
    do {                                                                                           \
        nvmlReturn_t r_ = (call);                                                                  \
        if (r_ != NVML_SUCCESS)                                                                    \
            app_die("%s failed: NVML error %d", #call, (int)r_);                                   \
    } while (0)

int main(int argc, char **argv)
{
    unsigned long long alloc_bytes = 64 * APP_MIB;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--alloc") && i + 1 < argc)
            alloc_bytes = app_bytes(argv[++i]);
        else
            app_die("usage: app_nvml [--alloc BYTES]");
    }
    app_cuda c;
    app_open_cuda(&c);
    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, 0));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));
    CUdeviceptr p = 0;
    if (alloc_bytes)
        APP_CHECK(&c, APP_PROC(&c, cuMemAlloc, 3020)(&p, alloc_bytes));

    void *ml = app_open("libnvidia-ml.so.1");
    __typeof__(&nvmlInit_v2) init = app_sym(ml, "nvmlInit_v2");
    __typeof__(&nvmlShutdown) shutdown = app_sym(ml, "nvmlShutdown");
    __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index =
        app_sym(ml, "nvmlDeviceGetHandleByIndex_v2");
    __typeof__(&nvmlDeviceGetMemoryInfo) info_v1 = app_sym(ml, "nvmlDeviceGetMemoryInfo");
    __typeof__(&nvmlDeviceGetMemoryInfo_v2) info_v2 = app_sym(ml, "nvmlDeviceGetMemoryInfo_v2");
    __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) processes =
        app_sym(ml, "nvmlDeviceGetComputeRunningProcesses_v3");
    NVML_CHECK(init());
    nvmlDevice_t dev;
    NVML_CHECK(by_index(0, &dev));
    nvmlMemory_t m1;
    NVML_CHECK(info_v1(dev, &m1));
    nvmlMemory_v2_t m2;
    memset(&m2, 0, sizeof m2);
    m2.version = nvmlMemory_v2;
    NVML_CHECK(info_v2(dev, &m2));
    nvmlProcessInfo_t procs[8];
    unsigned n = 8;
    NVML_CHECK(processes(dev, &n, procs));
    unsigned long long mine = 0;
    for (unsigned i = 0; i < n; i++)
        if (procs[i].pid == (unsigned)getpid())
            mine = procs[i].usedGpuMemory;

    size_t cfree = 0, ctotal = 0;
    APP_CHECK(&c, APP_PROC(&c, cuMemGetInfo, 3020)(&cfree, &ctotal));
    printf("{\"app\":\"nvml\",\"allocated\":%llu,"
           "\"nvml\":{\"total\":%llu,\"free\":%llu,\"used\":%llu},"
           "\"nvml_v2\":{\"total\":%llu,\"reserved\":%llu,\"free\":%llu,\"used\":%llu},"
           "\"processes\":%u,\"process_used\":%llu,\"cuda\":{\"total\":%zu,\"free\":%zu}}\n",
           alloc_bytes, m1.total, m1.free, m1.used, m2.total, m2.reserved, m2.free, m2.used, n,
           mine, ctotal, cfree);
    NVML_CHECK(shutdown());
    if (p)
        APP_CHECK(&c, APP_PROC(&c, cuMemFree, 3020)(p));
    return 0;
}
