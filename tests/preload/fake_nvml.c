/* tests/preload/fake_nvml.c - the stand-in libnvidia-ml.so.1: the NVML
 * functions vramkit's core (src/core/gpu/nvml.c) and the preload library
 * use, reporting the stand-in driver's device (libcuda.so.1 of
 * fake_cuda*.c, a dependency of this library, where real NVML needs none).
 *
 * One device, index 0, PCI bus id 00000000:01:00.0 (either spelling of the
 * domain is found), the name cuDeviceGetName gives. Memory: v1 reports
 * total, free and used = total - free, as cuMemGetInfo sees them; v2 the
 * same with reserved = 0. The compute processes are this process alone,
 * while it holds a context, using what its device holds. Calls before
 * nvmlInit (or after the matching nvmlShutdown) are
 * NVML_ERROR_UNINITIALIZED, as NVML's. The device is the process's own:
 * another process using the stand-in has a device of its own. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "nvml_abi.h"

struct nvmlDevice_st {
    unsigned int index;
};

static struct nvmlDevice_st device0 = {0};
static atomic_int inits;

static nvmlReturn_t ready(void)
{
    return atomic_load(&inits) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t valid(nvmlDevice_t d)
{
    nvmlReturn_t r = ready();
    return r == NVML_SUCCESS && d != &device0 ? NVML_ERROR_INVALID_ARGUMENT : r;
}

nvmlReturn_t DECLDIR nvmlInit_v2(void)
{
    atomic_fetch_add(&inits, 1);
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlInit(void)
{
    atomic_fetch_add(&inits, 1);
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    atomic_fetch_add(&inits, 1);
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlShutdown(void)
{
    int n = atomic_load(&inits);
    while (n > 0 && !atomic_compare_exchange_weak(&inits, &n, n - 1))
        ;
    return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const DECLDIR char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t count(unsigned int *deviceCount)
{
    nvmlReturn_t r = ready();
    if (r == NVML_SUCCESS && !deviceCount)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *deviceCount = 1;
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *deviceCount) { return count(deviceCount); }
nvmlReturn_t DECLDIR nvmlDeviceGetCount(unsigned int *deviceCount) { return count(deviceCount); }

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t r = ready();
    if (r == NVML_SUCCESS && (!device || index != 0))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *device = &device0;
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return by_index(index, device);
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return by_index(index, device);
}

/* "domain:bus:device.function" in hex, the domain of 4 or 8 digits. */
static nvmlReturn_t by_pci(const char *id, nvmlDevice_t *device)
{
    nvmlReturn_t r = ready();
    if (r == NVML_SUCCESS && (!id || !device))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return r;
    unsigned dom, bus, dev, fn;
    char end;
    if (sscanf(id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &end) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (dom != 0 || bus != 1 || dev != 0 || fn != 0)
        return NVML_ERROR_NOT_FOUND;
    *device = &device0;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    return by_pci(pciBusId, device);
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return by_pci(pciBusId, device);
}

nvmlReturn_t DECLDIR nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t r = valid(device);
    if (r == NVML_SUCCESS && !index)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *index = device->index;
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    static const char device_name[] = "NVIDIA H200 (vramkit stand-in)";
    nvmlReturn_t r = valid(device);
    if (r == NVML_SUCCESS && !name)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && length < sizeof device_name)
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    if (r == NVML_SUCCESS)
        memcpy(name, device_name, sizeof device_name);
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t r = valid(device);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS) {
        unsigned long long free_b = 0, total = 0;
        fake_cuda_mem_info(&free_b, &total);
        memory->total = total;
        memory->free = free_b;
        memory->used = total - free_b;
    }
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t r = valid(device);
    if (r == NVML_SUCCESS && !memory)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && memory->version != nvmlMemory_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (r == NVML_SUCCESS) {
        unsigned long long free_b = 0, total = 0;
        fake_cuda_mem_info(&free_b, &total);
        memory->total = total;
        memory->reserved = 0;
        memory->free = free_b;
        memory->used = total - free_b;
    }
    return r;
}

nvmlReturn_t DECLDIR nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                             unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    nvmlReturn_t r = valid(device);
    if (r == NVML_SUCCESS && !infoCount)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return r;
    unsigned int n = fake_cuda_context_count() > 0 ? 1 : 0;
    if (*infoCount < n) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *infoCount = n;
    if (n) {
        if (!infos)
            return NVML_ERROR_INVALID_ARGUMENT;
        infos[0] = (nvmlProcessInfo_t){.pid = (unsigned int)getpid(),
                                       .usedGpuMemory = fake_cuda_used_bytes(),
                                       .gpuInstanceId = 0xFFFFFFFFu,
                                       .computeInstanceId = 0xFFFFFFFFu};
    }
    return NVML_SUCCESS;
}
