/* src/engine/cuda/cu_engine.h - the CUDA driver entry points the cuda
 * executor calls, in a table filled once from the driver vramkit's core
 * opened (vram_cuda_proc through vramkit/cuda_table.h), so the engine links
 * neither libcuda nor core's internals. Calls read
 * `vram__ecu.cuLaunchKernel(...)`. */
#ifndef VRAM_ENGINE_CUDA_CU_ENGINE_H
#define VRAM_ENGINE_CUDA_CU_ENGINE_H

#include "vramkit/cuda_table.h"

#define VRAM_ENGINE_CU_FUNCS(X)                                                               \
    X(cuModuleLoadData, 2000) X(cuModuleUnload, 2000) X(cuModuleGetFunction, 2000)            \
    X(cuLaunchKernel, 4000) X(cuMemcpyHtoD, 3020) X(cuMemcpyHtoDAsync, 3020)                  \
    X(cuMemcpyDtoHAsync, 3020) X(cuMemcpyDtoDAsync, 3020) X(cuMemsetD8, 3020)                 \
    X(cuMemsetD8Async, 3020) X(cuStreamSynchronize, 2000) X(cuStreamBeginCapture, 10010)      \
    X(cuStreamEndCapture, 10000) X(cuGraphInstantiateWithFlags, 11040)                        \
    X(cuGraphLaunch, 10000) X(cuGraphExecDestroy, 10000) X(cuGraphDestroy, 10000)

typedef struct vram__ecu_api {
    VRAM_ENGINE_CU_FUNCS(VRAM_CUDA_TABLE_MEMBER)
} vram__ecu_api;

extern vram__ecu_api vram__ecu;

/* Fill the table once per process (thread-safe): 0, or VRAM_ENOSYS with
 * the reason (no driver, or one that lacks an entry point). */
int vram__ecu_load(void);

#endif
