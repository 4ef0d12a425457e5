/* src/preload/hooks_ext.c - beyond the driver: NVDEC's decoders
 * (libnvcuvid, which programs open with dlopen: dlsym.c hands them these),
 * charged the device memory their creation took (measured, creations
 * serialised), and NVML's memory figures, which in limit mode say the
 * budget and the charged bytes as cuMemGetInfo does. The libraries' types
 * are not needed: handles pass through as pointers, and NVML's two memory
 * records are declared here as its header lays them out. */
#include <pthread.h>
#include <stdint.h>

#include "hooks.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(void **decoder, void *info);
typedef int (*destroy_fn)(void *decoder);
typedef int (*mem_info_fn)(size_t *free_b, size_t *total);

EXPORT int cuvidCreateDecoder(void **decoder, void *info);
EXPORT int cuvidDestroyDecoder(void *decoder);

static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t free_now(void)
{
    mem_info_fn info = HOOK_REAL(cuMemGetInfo_v2, mem_info_fn);
    size_t f = 0, t = 0;
    return info && info(&f, &t) == 0 ? (uint64_t)f : 0;
}

EXPORT int cuvidCreateDecoder(void **decoder, void *info)
{
    create_fn real = HOOK_REAL(cuvidCreateDecoder, create_fn);
    if (HOOK_PASS() || !real)
        return real ? real(decoder, info) : 3 /* CUDA_ERROR_NOT_INITIALIZED */;
    const void *site = __builtin_return_address(0);
    pthread_mutex_lock(&create_mu);
    vram__pl_depth++;
    uint64_t before = free_now();
    int r = real(decoder, info);
    uint64_t after = r == 0 ? free_now() : 0;
    vram__pl_depth--;
    pthread_mutex_unlock(&create_mu);
    if (r != 0) {
        vram__pl_on_fail(VRAM__PL_DECODER, 0, 0);
        return r;
    }
    uint64_t cost = before > after ? before - after : 0;
    if (vram__pl_limit() && cost && vram__pl_take(cost)) {
        /* Made, but past the budget: undone, and refused as out of memory. */
        destroy_fn undo = HOOK_REAL(cuvidDestroyDecoder, destroy_fn);
        vram__pl_depth++;
        if (undo)
            undo(*decoder);
        vram__pl_depth--;
        *decoder = NULL;
        vram__pl_on_fail(VRAM__PL_DECODER, cost, 0);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    vram__pl_on_alloc(VRAM__PL_DECODER, (uint64_t)(uintptr_t)*decoder, cost, site, 0);
    return 0;
}

EXPORT int cuvidDestroyDecoder(void *decoder)
{
    destroy_fn real = HOOK_REAL(cuvidDestroyDecoder, destroy_fn);
    if (HOOK_PASS() || !real)
        return real ? real(decoder) : 3;
    vram__pl_depth++;
    int r = real(decoder);
    vram__pl_depth--;
    if (r == 0) {
        uint64_t size = vram__pl_on_free(VRAM__PL_DECODER, (uint64_t)(uintptr_t)decoder, 0);
        if (size && vram__pl_limit())
            vram__pl_give(size);
    }
    return r;
}

/* NVML's records (nvml.h): v1, and v2 with its version word and reserved. */
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvml_memory_v2;

typedef int (*nvml_mem_fn)(void *device, void *memory);

EXPORT int nvmlDeviceGetMemoryInfo(void *device, nvml_memory *m);
EXPORT int nvmlDeviceGetMemoryInfo_v2(void *device, nvml_memory_v2 *m);

/* Limit mode: the budget as the total, the charged bytes (the group's
 * when there is one) as used. */
static void budgeted(unsigned long long *total, unsigned long long *free_b,
                     unsigned long long *used)
{
    uint64_t b = vram__pl_budget(), u = vram__pl_charged_bytes();
    uint64_t gu = 0, gb = 0;
    unsigned members = 0;
    vram__pl_group_use(&gu, &gb, &members);
    if (members)
        u = gu;
    *total = b;
    *used = u;
    *free_b = u < b ? b - u : 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *device, nvml_memory *m)
{
    nvml_mem_fn real = HOOK_REAL(nvmlDeviceGetMemoryInfo, nvml_mem_fn);
    if (!real)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    vram__pl_depth++;
    int r = real(device, m);
    vram__pl_depth--;
    if (r == 0 && m && vram__pl_active && vram__pl_limit())
        budgeted(&m->total, &m->free, &m->used);
    return r;
}

EXPORT int nvmlDeviceGetMemoryInfo_v2(void *device, nvml_memory_v2 *m)
{
    nvml_mem_fn real = HOOK_REAL(nvmlDeviceGetMemoryInfo_v2, nvml_mem_fn);
    if (!real)
        return 1;
    vram__pl_depth++;
    int r = real(device, m);
    vram__pl_depth--;
    if (r == 0 && m && vram__pl_active && vram__pl_limit()) {
        budgeted(&m->total, &m->free, &m->used);
        m->reserved = 0;
    }
    return r;
}
