/* src/gpu/cu.h - the CUDA driver API, loaded at run time.
 *
 * libvramkit.so does not link libcuda: it opens libcuda.so.1 with dlopen the
 * first time a GPU is asked for, and takes every entry point through
 * cuGetProcAddress at the version of the cuda.h it was compiled with. So the
 * same library runs on machines without a GPU (where vram_device_open says
 * so) and never picks an entry point of the wrong ABI. Calls read
 * `vram__cu.cuMemCreate(...)`. */
#ifndef VRAM_GPU_CU_H
#define VRAM_GPU_CU_H

#include <cuda.h>

#include "base/internal.h"

/* Every driver function vramkit uses. */
#define VRAM_CU_FUNCS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)     \
    X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)                        \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)               \
    X(cuDevicePrimaryCtxGetState) X(cuCtxPushCurrent) X(cuCtxPopCurrent)                      \
    X(cuCtxGetCurrent) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetLimit) X(cuCtxGetLimit)       \
    X(cuCtxSynchronize) X(cuCtxGetStreamPriorityRange) X(cuMemGetInfo) X(cuMemAlloc)          \
    X(cuMemFree) X(cuMemsetD8) X(cuMemsetD32Async) X(cuMemcpyHtoD) X(cuMemcpyDtoH)           \
    X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolSetAttribute) X(cuMemPoolGetAttribute)  \
    X(cuMemPoolTrimTo) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync)                           \
    X(cuDeviceGetDefaultMemPool) X(cuMemAllocAsync) X(cuMemAddressReserve)                    \
    X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)              \
    X(cuMemSetAccess) X(cuMemGetAllocationGranularity) X(cuStreamCreateWithPriority)          \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuEventCreate)               \
    X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)                  \
    X(cuGetErrorName) X(cuGetErrorString)

/* cuda.h maps names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2), so a
 * member named after the function has that version's prototype. */
typedef struct vram__cu_api {
#define VRAM__CU_MEMBER(fn) __typeof__(&fn) fn;
    VRAM_CU_FUNCS(VRAM__CU_MEMBER)
#undef VRAM__CU_MEMBER
} vram__cu_api;

extern vram__cu_api vram__cu;

/* Load the driver and call cuInit once per process (thread-safe). 0, or
 * VRAM_ENOSYS with the reason (no libcuda.so.1, no device, cuInit failed). */
int vram__cu_load(void);

/* Record a failed driver call as this thread's last error and return its
 * vramkit code (VRAM_ENOMEM for CUDA_ERROR_OUT_OF_MEMORY, VRAM_EBACKEND
 * otherwise): "<what> failed: CUDA_ERROR_X (text)". `what` is formatted. */
int vram__cu_fail(CUresult r, const char *what, ...) VRAM__PRINTF(2, 3);

/* Shorthand: evaluate a driver call; on failure record it and return. */
#define VRAM__CU_TRY(call, ...)                                                               \
    do {                                                                                      \
        CUresult vram__r_ = (call);                                                           \
        if (vram__r_ != CUDA_SUCCESS)                                                         \
            return vram__cu_fail(vram__r_, __VA_ARGS__);                                      \
    } while (0)

#endif
