/* src/core/gpu/cu.h - the CUDA driver API, loaded at run time.
 *
 * libvramkit-core does not link libcuda: it opens libcuda.so.1 with dlopen the
 * first time a GPU is asked for, and takes every entry point through
 * cuGetProcAddress at the version of the ABI cuda.h declares for it. So the
 * same library runs on machines without a GPU (where vram_device_open says
 * so) and never picks an entry point of the wrong ABI. Calls read
 * `vram__cu.cuMemCreate(...)`. */
#ifndef VRAM_GPU_CU_H
#define VRAM_GPU_CU_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "base/internal.h"
#include "vramkit/cuda_table.h"

/* Every driver function vramkit uses, with the CUDA version of the ABI the
 * prototype in cuda.h has: cuGetProcAddress is asked for that version, since
 * the newest may differ (cuCtxSynchronize at 13.0 takes a context). Each
 * pairing is checked at compile time against cuda.h's prototype. */
#define VRAM_CU_FUNCS(X)                                                                      \
    X(cuInit, 2000) X(cuDriverGetVersion, 2020) X(cuDeviceGet, 2000)                          \
    X(cuDeviceGetCount, 2000) X(cuDeviceGetName, 2000) X(cuDeviceGetAttribute, 2000)          \
    X(cuDeviceGetPCIBusId, 4010) X(cuDevicePrimaryCtxRetain, 7000)                            \
    X(cuDevicePrimaryCtxRelease, 11000) X(cuCtxSetCurrent, 4000) X(cuCtxGetCurrent, 4000)     \
    X(cuCtxSetLimit, 3010) X(cuCtxGetLimit, 3010) X(cuCtxSynchronize, 2000)                   \
    X(cuCtxGetStreamPriorityRange, 5050) X(cuMemGetInfo, 3020) X(cuMemAlloc, 3020)            \
    X(cuMemFree, 3020) X(cuMemPoolCreate, 11020) X(cuMemPoolDestroy, 11020)                   \
    X(cuMemPoolSetAttribute, 11020) X(cuMemAllocFromPoolAsync, 11020) X(cuMemFreeAsync, 11020) \
    X(cuMemAddressReserve, 10020) X(cuMemAddressFree, 10020) X(cuMemCreate, 10020)            \
    X(cuMemRelease, 10020) X(cuMemMap, 10020) X(cuMemUnmap, 10020) X(cuMemSetAccess, 10020)   \
    X(cuMemGetAllocationGranularity, 10020) X(cuStreamCreateWithPriority, 5050)               \
    X(cuStreamDestroy, 4000) X(cuEventCreate, 2000) X(cuEventDestroy, 4000)                   \
    X(cuEventRecord, 2000) X(cuEventQuery, 2000) X(cuEventSynchronize, 2000)                  \
    X(cuStreamWaitEvent, 3020)                                                                \
    X(cuGetErrorName, 6000) X(cuGetErrorString, 6000)

/* cuda.h maps names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2), so a
 * member named after the function has the prototype callers compile against. */
typedef struct vram__cu_api {
#define VRAM__CU_MEMBER(fn, ver) __typeof__(&fn) fn;
    VRAM_CU_FUNCS(VRAM__CU_MEMBER)
#undef VRAM__CU_MEMBER
} vram__cu_api;

extern vram__cu_api vram__cu;

/* Load the driver and call cuInit once per process (thread-safe). 0, or
 * VRAM_ENOSYS with the reason (no libcuda.so.1, no device, cuInit failed). */
int vram__cu_load(void);

/* A failed driver call is recorded with vram_cuda_fail (vramkit/device.h);
 * VRAM__CU_TRY is vramkit/cuda_table.h's VRAM_CUDA_TRY. */
#define VRAM__CU_TRY VRAM_CUDA_TRY

#endif
