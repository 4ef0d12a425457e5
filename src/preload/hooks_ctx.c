/* src/preload/hooks_ctx.c - contexts, cuGetProcAddress and cuMemGetInfo,
 * hooked. A context's device cost is measured when it is made (the device's
 * free memory before and after, creations serialised); a primary context
 * when it is first retained. cuGetProcAddress (both ABIs) asks the driver
 * with the caller's version, flags and status unchanged, then routes the
 * pointer it returns to the hook of the same exact name (so a per-thread
 * caller gets the _ptsz hook), leaving unknown pointers alone. In limit
 * mode cuMemGetInfo reports the budget as the total and the charged bytes
 * as used (free never below 0). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>

#include "hooks.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuGetProcAddress
EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags);
EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice dev);
EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext *ctx, CUexecAffinityParam *params, int n,
                                       unsigned flags, CUdevice dev);

static void route(CUresult r, void **pfn)
{
    if (r == CUDA_SUCCESS && pfn && *pfn && vram__pl_active)
        *pfn = vram__pl_route(*pfn);
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags)
{
    PFN_cuGetProcAddress_v11030 real = HOOK_REAL(cuGetProcAddress, PFN_cuGetProcAddress_v11030);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(symbol, pfn, version, flags);
    vram__pl_depth--;
    route(r, pfn);
    return r;
}

EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *status)
{
    PFN_cuGetProcAddress_v12000 real =
        HOOK_REAL(cuGetProcAddress_v2, PFN_cuGetProcAddress_v12000);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(symbol, pfn, version, flags, status);
    vram__pl_depth--;
    route(r, pfn);
    return r;
}

/* ---- contexts ---- */

static pthread_mutex_t measure_mu = PTHREAD_MUTEX_INITIALIZER;

/* The device's free memory, as NVML reads it (no context needed: a
 * thread making its first context has none current), else as
 * cuMemGetInfo does in the current context; 0 when neither can say. */
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(const char *pci, void **device);
typedef int (*nvml_mem_fn)(void *device, nvml_memory *m);

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static int nvml_ok;

static void nvml_start(void)
{
    nvml_init_fn init = HOOK_REAL(nvmlInit_v2, nvml_init_fn);
    nvml_ok = init && init() == 0;
}

static uint64_t free_now(CUdevice dev)
{
    pthread_once(&nvml_once, nvml_start);
    PFN_cuDeviceGetPCIBusId_v4010 pci_of =
        HOOK_REAL(cuDeviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010);
    nvml_handle_fn handle = HOOK_REAL(nvmlDeviceGetHandleByPciBusId_v2, nvml_handle_fn);
    nvml_mem_fn mem = HOOK_REAL(nvmlDeviceGetMemoryInfo, nvml_mem_fn);
    char pci[64];
    void *h = NULL;
    nvml_memory m;
    if (nvml_ok && pci_of && handle && mem && pci_of(pci, sizeof pci, dev) == CUDA_SUCCESS &&
        handle(pci, &h) == 0 && mem(h, &m) == 0)
        return m.free;
    PFN_cuCtxGetCurrent_v4000 cur = HOOK_REAL(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000);
    PFN_cuMemGetInfo_v3020 info = HOOK_REAL(cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020);
    CUcontext c = NULL;
    size_t free_b = 0, total = 0;
    if (!cur || cur(&c) != CUDA_SUCCESS || !c || !info || info(&free_b, &total) != CUDA_SUCCESS)
        return 0;
    return (uint64_t)free_b;
}

static uint64_t cost_of(uint64_t before, uint64_t after)
{
    return before && after && before > after ? before - after : 0;
}

#define MADE(call)                                                                            \
    pthread_mutex_lock(&measure_mu);                                                          \
    vram__pl_depth++;                                                                         \
    uint64_t before = free_now(dev);                                                          \
    CUresult r = (call);                                                                      \
    uint64_t after = r == CUDA_SUCCESS && before ? free_now(dev) : 0;                        \
    vram__pl_depth--;                                                                         \
    pthread_mutex_unlock(&measure_mu);                                                        \
    if (r == CUDA_SUCCESS)                                                                    \
        vram__pl_on_context(*ctx, (int)dev, cost_of(before, after), 0);                       \
    return r

EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v3020 real = HOOK_REAL(cuCtxCreate_v2, PFN_cuCtxCreate_v3020);
    if (HOOK_PASS() || !real)
        return real ? real(ctx, flags, dev) : CUDA_ERROR_NOT_INITIALIZED;
    MADE(real(ctx, flags, dev));
}

EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext *ctx, CUexecAffinityParam *params, int n,
                                       unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v11040 real = HOOK_REAL(cuCtxCreate_v3, PFN_cuCtxCreate_v11040);
    if (HOOK_PASS() || !real)
        return real ? real(ctx, params, n, flags, dev) : CUDA_ERROR_NOT_INITIALIZED;
    MADE(real(ctx, params, n, flags, dev));
}

EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext *ctx, CUctxCreateParams *params,
                                       unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v12050 real = HOOK_REAL(cuCtxCreate_v4, PFN_cuCtxCreate_v12050);
    if (HOOK_PASS() || !real)
        return real ? real(ctx, params, flags, dev) : CUDA_ERROR_NOT_INITIALIZED;
    MADE(real(ctx, params, flags, dev));
}

const void *vram__pl_current_context(void)
{
    PFN_cuCtxGetCurrent_v4000 cur = HOOK_REAL(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000);
    CUcontext c = NULL;
    return cur && cur(&c) == CUDA_SUCCESS ? (const void *)c : NULL;
}

uint64_t vram__pl_graph_memory(void)
{
    PFN_cuDeviceGetGraphMemAttribute_v11040 get =
        HOOK_REAL(cuDeviceGetGraphMemAttribute, PFN_cuDeviceGetGraphMemAttribute_v11040);
    cuuint64_t v = 0;
    vram__pl_depth++;
    int ok = get && get(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v) == CUDA_SUCCESS;
    vram__pl_depth--;
    return ok ? (uint64_t)v : 0;
}

/* A context gone with what was allocated in it (the driver freed that). */
static void gone(const void *ctx)
{
    uint64_t bytes = vram__pl_drop_context(ctx);
    if (bytes && vram__pl_limit())
        vram__pl_give(bytes);
}

EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    PFN_cuCtxDestroy_v4000 real = HOOK_REAL(cuCtxDestroy_v2, PFN_cuCtxDestroy_v4000);
    if (HOOK_PASS() || !real)
        return real ? real(ctx) : CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(ctx);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS) {
        vram__pl_on_context_gone(ctx, 0, -1);
        gone(ctx);
    }
    return r;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    PFN_cuDevicePrimaryCtxRetain_v7000 real =
        HOOK_REAL(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000);
    if (HOOK_PASS() || !real)
        return real ? real(ctx, dev) : CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&measure_mu);
    vram__pl_depth++;
    uint64_t before = free_now(dev);
    CUresult r = real(ctx, dev);
    uint64_t after = r == CUDA_SUCCESS && before ? free_now(dev) : 0;
    vram__pl_depth--;
    pthread_mutex_unlock(&measure_mu);
    if (r == CUDA_SUCCESS)
        vram__pl_on_context(*ctx, (int)dev, cost_of(before, after), 1);
    return r;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    PFN_cuDevicePrimaryCtxRelease_v11000 real =
        HOOK_REAL(cuDevicePrimaryCtxRelease_v2, PFN_cuDevicePrimaryCtxRelease_v11000);
    if (HOOK_PASS() || !real)
        return real ? real(dev) : CUDA_ERROR_NOT_INITIALIZED;
    void *primary = vram__pl_primary_of((int)dev);
    vram__pl_depth++;
    CUresult r = real(dev);
    /* The last release destroys it. */
    PFN_cuDevicePrimaryCtxGetState_v7000 state =
        HOOK_REAL(cuDevicePrimaryCtxGetState, PFN_cuDevicePrimaryCtxGetState_v7000);
    unsigned flags = 0;
    int active = 1;
    if (r == CUDA_SUCCESS && state && state(dev, &flags, &active) != CUDA_SUCCESS)
        active = 1;
    vram__pl_depth--;
    if (r == CUDA_SUCCESS && !active) {
        vram__pl_on_context_gone(NULL, 1, (int)dev);
        gone(primary);
    }
    return r;
}

EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    PFN_cuMemGetInfo_v3020 real = HOOK_REAL(cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vram__pl_depth++;
    CUresult r = real(free_b, total);
    vram__pl_depth--;
    if (r == CUDA_SUCCESS && vram__pl_active && vram__pl_limit()) {
        uint64_t b = vram__pl_budget(), used = vram__pl_charged_bytes();
        uint64_t gused = 0, gbudget = 0;
        unsigned members = 0;
        vram__pl_group_use(&gused, &gbudget, &members);
        if (members)
            used = gused;
        if (total)
            *total = (size_t)b;
        if (free_b) {
            uint64_t f = used < b ? b - used : 0;
            *free_b = (size_t)(f < (uint64_t)*free_b ? f : (uint64_t)*free_b);
        }
    }
    return r;
}
