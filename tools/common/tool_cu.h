/* tools/common/tool_cu.h - the CUDA driver entry points the command line's
 * measurements call (the context-cost probe, the driver allocators' trace
 * replay), in a table filled once from vramkit's driver
 * (vramkit/cuda_table.h). Calls read `vram_tool_cu.cuCtxCreate(...)`. */
#ifndef VRAM_TOOLS_TOOL_CU_H
#define VRAM_TOOLS_TOOL_CU_H

#include "vramkit/cuda_table.h"

#define VRAM_TOOL_CU_FUNCS(X)                                                                 \
    X(cuDriverGetVersion, 2020) X(cuDeviceGet, 2000) X(cuDeviceGetCount, 2000)                \
    X(cuDeviceGetName, 2000) X(cuDeviceTotalMem, 3020) X(cuDeviceGetPCIBusId, 4010)           \
    X(cuDevicePrimaryCtxGetState, 7000) X(cuCtxCreate, 12050) X(cuCtxDestroy, 4000)           \
    X(cuCtxGetCurrent, 4000) X(cuCtxSetCurrent, 4000) X(cuCtxPushCurrent, 4000)               \
    X(cuCtxPopCurrent, 4000) X(cuCtxSetLimit, 3010) X(cuCtxGetLimit, 3010)                    \
    X(cuCtxSynchronize, 2000) X(cuMemGetInfo, 3020) X(cuMemAlloc, 3020) X(cuMemFree, 3020)    \
    X(cuMemsetD32Async, 3020) X(cuStreamSynchronize, 2000) X(cuMemAllocAsync, 11020)          \
    X(cuMemFreeAsync, 11020) X(cuDeviceGetDefaultMemPool, 11020)                              \
    X(cuMemPoolSetAttribute, 11020) X(cuMemPoolGetAttribute, 11020) X(cuMemPoolTrimTo, 11020)

typedef struct vram_tool_cu_api {
    VRAM_TOOL_CU_FUNCS(VRAM_CUDA_TABLE_MEMBER)
} vram_tool_cu_api;

extern vram_tool_cu_api vram_tool_cu;

/* Fill the table once (thread-safe): 0, or VRAM_ENOSYS with the reason. */
int vram_tool_cu_load(void);

#endif
