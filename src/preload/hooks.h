/* src/preload/hooks.h - the hooked functions, one X-macro list: each
 * entry is an exact exported name and the library it stands in front of.
 * hooks.c builds the table from it; each hook calls the library's own
 * function through HOOK_REAL. The hooks themselves are in hooks_mem.c
 * (allocations and frees), hooks_ctx.c (contexts, cuGetProcAddress,
 * cuMemGetInfo) and hooks_ext.c (NVDEC decoders, NVML's memory). */
#ifndef VRAM_PRELOAD_HOOKS_H
#define VRAM_PRELOAD_HOOKS_H

#include "preload_internal.h"

#define VRAM__PL_HOOKS(X)                                                                     \
    X(cuGetProcAddress, CUDA) X(cuGetProcAddress_v2, CUDA)                                    \
    X(cuMemAlloc_v2, CUDA) X(cuMemFree_v2, CUDA) X(cuMemAllocPitch_v2, CUDA)                  \
    X(cuMemAllocManaged, CUDA) X(cuMemAllocHost_v2, CUDA) X(cuMemHostAlloc, CUDA)             \
    X(cuMemFreeHost, CUDA)                                                                    \
    X(cuMemAllocAsync, CUDA) X(cuMemAllocAsync_ptsz, CUDA)                                    \
    X(cuMemAllocFromPoolAsync, CUDA) X(cuMemAllocFromPoolAsync_ptsz, CUDA)                    \
    X(cuMemFreeAsync, CUDA) X(cuMemFreeAsync_ptsz, CUDA)                                      \
    X(cuMemPoolCreate, CUDA) X(cuMemPoolDestroy, CUDA) X(cuMemPoolTrimTo, CUDA)               \
    X(cuDeviceSetMemPool, CUDA)                                                               \
    X(cuMemCreate, CUDA) X(cuMemRelease, CUDA) X(cuMemMap, CUDA) X(cuMemUnmap, CUDA)          \
    X(cuMemAddressReserve, CUDA)                                                              \
    X(cuArrayCreate_v2, CUDA) X(cuArray3DCreate_v2, CUDA) X(cuArrayDestroy, CUDA)             \
    X(cuMipmappedArrayCreate, CUDA) X(cuMipmappedArrayDestroy, CUDA)                          \
    X(cuCtxCreate_v2, CUDA) X(cuCtxCreate_v3, CUDA) X(cuCtxCreate_v4, CUDA)                   \
    X(cuCtxDestroy_v2, CUDA) X(cuDevicePrimaryCtxRetain, CUDA)                                \
    X(cuDevicePrimaryCtxRelease_v2, CUDA) X(cuMemGetInfo_v2, CUDA)                            \
    X(cuvidCreateDecoder, NVCUVID) X(cuvidDestroyDecoder, NVCUVID)                            \
    X(nvmlDeviceGetMemoryInfo, NVML) X(nvmlDeviceGetMemoryInfo_v2, NVML)

/* Driver functions the hooks call that are not hooked themselves. */
#define VRAM__PL_HELPERS(X)                                                                   \
    X(cuStreamIsCapturing, CUDA) X(cuStreamIsCapturing_ptsz, CUDA) X(cuCtxGetDevice, CUDA)    \
    X(cuArrayGetMemoryRequirements, CUDA) X(cuMipmappedArrayGetMemoryRequirements, CUDA)      \
    X(cuCtxGetCurrent, CUDA) X(cuMemPoolGetAttribute, CUDA) X(cuDeviceGetDefaultMemPool, CUDA) \
    X(cuDeviceGetGraphMemAttribute, CUDA) X(cuDeviceGetPCIBusId, CUDA) X(nvmlInit_v2, NVML)     \
    X(nvmlDeviceGetHandleByPciBusId_v2, NVML) X(cuDevicePrimaryCtxGetState, CUDA)

enum {
#define VRAM__PL_ID(name, lib) VRAM__PL_H_##name,
    VRAM__PL_HOOKS(VRAM__PL_ID) VRAM__PL_HELPERS(VRAM__PL_ID)
#undef VRAM__PL_ID
    VRAM__PL_H_COUNT
};

/* The library's own function for hook `name`, as type T. */
#define HOOK_REAL(name, T) ((T)vram__pl_real(VRAM__PL_H_##name))

/* Every hook starts so: a nested call (from inside another hook, the
 * library's setup, or the driver's own start), or one before the settings
 * are read, goes straight to the library. */
#define HOOK_PASS() (vram__pl_depth || !vram__pl_active)

#endif
