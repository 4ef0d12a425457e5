/* tests/preload/fake_cuda_symbols.h - every driver function the stand-in
 * libcuda.so.1 exports, as one X-macro list: X(base, version, symbol, pt)
 * says that cuGetProcAddress("base", version >= `version`) finds the
 * exported `symbol`, a per-thread default stream variant where pt is PTSZ
 * or PTDS (N otherwise). The version is the one in the name of the
 * matching PFN_ typedef of the toolkit's cudaTypedefs.h
 * (PFN_cuMemAlloc_v3020 is cuMemAlloc_v2), and fake_cuda_procaddr.c checks
 * at compile time that each symbol has that typedef's prototype.
 *
 * The list drives the lookup table of cuGetProcAddress, the per-function
 * call counters and the variant each entry records. A function missing
 * here is one the stand-in does not export: cuGetProcAddress answers
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND for it. */
#ifndef FAKE_CUDA_SYMBOLS_H
#define FAKE_CUDA_SYMBOLS_H

/* CUDA 13.0's context-explicit cuCtxGetDevice_v2 and cuCtxSynchronize_v2. */
#if CUDA_VERSION >= 13000
#define FC_SYMBOLS_13(X)                                                                           \
    X(cuCtxGetDevice, 13000, cuCtxGetDevice_v2, N)                                                 \
    X(cuCtxSynchronize, 13000, cuCtxSynchronize_v2, N)
#else
#define FC_SYMBOLS_13(X)
#endif

#define FC_SYMBOLS(X)                                                                              \
    /* start, versions, errors */                                                                  \
    X(cuInit, 2000, cuInit, N)                                                                     \
    X(cuDriverGetVersion, 2020, cuDriverGetVersion, N)                                             \
    X(cuGetErrorName, 6000, cuGetErrorName, N)                                                     \
    X(cuGetErrorString, 6000, cuGetErrorString, N)                                                 \
    X(cuGetProcAddress, 11030, cuGetProcAddress, N)                                                \
    X(cuGetProcAddress, 12000, cuGetProcAddress_v2, N)                                             \
    /* the device */                                                                               \
    X(cuDeviceGet, 2000, cuDeviceGet, N)                                                           \
    X(cuDeviceGetCount, 2000, cuDeviceGetCount, N)                                                 \
    X(cuDeviceGetName, 2000, cuDeviceGetName, N)                                                   \
    X(cuDeviceTotalMem, 2000, cuDeviceTotalMem, N)                                                 \
    X(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2, N)                                              \
    X(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute, N)                                         \
    X(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId, N)                                           \
    /* contexts */                                                                                 \
    X(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, N)                                 \
    X(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease, N)                               \
    X(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, N)                           \
    X(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset, N)                                   \
    X(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2, N)                               \
    X(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags, N)                             \
    X(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2, N)                         \
    X(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState, N)                             \
    X(cuCtxCreate, 2000, cuCtxCreate, N)                                                           \
    X(cuCtxCreate, 3020, cuCtxCreate_v2, N)                                                        \
    X(cuCtxCreate, 11040, cuCtxCreate_v3, N)                                                       \
    X(cuCtxCreate, 12050, cuCtxCreate_v4, N)                                                       \
    X(cuCtxDestroy, 2000, cuCtxDestroy, N)                                                         \
    X(cuCtxDestroy, 4000, cuCtxDestroy_v2, N)                                                      \
    X(cuCtxPushCurrent, 2000, cuCtxPushCurrent, N)                                                 \
    X(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2, N)                                              \
    X(cuCtxPopCurrent, 2000, cuCtxPopCurrent, N)                                                   \
    X(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2, N)                                                \
    X(cuCtxSetCurrent, 4000, cuCtxSetCurrent, N)                                                   \
    X(cuCtxGetCurrent, 4000, cuCtxGetCurrent, N)                                                   \
    X(cuCtxGetDevice, 2000, cuCtxGetDevice, N)                                                     \
    X(cuCtxSynchronize, 2000, cuCtxSynchronize, N)                                                 \
    FC_SYMBOLS_13(X)                                                                               \
    X(cuCtxSetLimit, 3010, cuCtxSetLimit, N)                                                       \
    X(cuCtxGetLimit, 3010, cuCtxGetLimit, N)                                                       \
    X(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange, N)                           \
    /* memory */                                                                                   \
    X(cuMemGetInfo, 2000, cuMemGetInfo, N)                                                         \
    X(cuMemGetInfo, 3020, cuMemGetInfo_v2, N)                                                      \
    X(cuMemAlloc, 2000, cuMemAlloc, N)                                                             \
    X(cuMemAlloc, 3020, cuMemAlloc_v2, N)                                                          \
    X(cuMemFree, 2000, cuMemFree, N)                                                               \
    X(cuMemFree, 3020, cuMemFree_v2, N)                                                            \
    X(cuMemAllocPitch, 2000, cuMemAllocPitch, N)                                                   \
    X(cuMemAllocPitch, 3020, cuMemAllocPitch_v2, N)                                                \
    X(cuMemAllocManaged, 6000, cuMemAllocManaged, N)                                               \
    X(cuMemAllocHost, 2000, cuMemAllocHost, N)                                                     \
    X(cuMemAllocHost, 3020, cuMemAllocHost_v2, N)                                                  \
    X(cuMemHostAlloc, 2020, cuMemHostAlloc, N)                                                     \
    X(cuMemFreeHost, 2000, cuMemFreeHost, N)                                                       \
    /* copies and sets */                                                                          \
    X(cuMemcpy, 4000, cuMemcpy, N)                                                                 \
    X(cuMemcpy, 7000, cuMemcpy_ptds, PTDS)                                                         \
    X(cuMemcpyAsync, 4000, cuMemcpyAsync, N)                                                       \
    X(cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz, PTSZ)                                               \
    X(cuMemcpyHtoD, 2000, cuMemcpyHtoD, N)                                                         \
    X(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, N)                                                      \
    X(cuMemcpyHtoD, 7000, cuMemcpyHtoD_v2_ptds, PTDS)                                              \
    X(cuMemcpyDtoH, 2000, cuMemcpyDtoH, N)                                                         \
    X(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, N)                                                      \
    X(cuMemcpyDtoH, 7000, cuMemcpyDtoH_v2_ptds, PTDS)                                              \
    X(cuMemcpyDtoD, 2000, cuMemcpyDtoD, N)                                                         \
    X(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, N)                                                      \
    X(cuMemcpyDtoD, 7000, cuMemcpyDtoD_v2_ptds, PTDS)                                              \
    X(cuMemcpyHtoDAsync, 2000, cuMemcpyHtoDAsync, N)                                               \
    X(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, N)                                            \
    X(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz, PTSZ)                                    \
    X(cuMemcpyDtoHAsync, 2000, cuMemcpyDtoHAsync, N)                                               \
    X(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, N)                                            \
    X(cuMemcpyDtoHAsync, 7000, cuMemcpyDtoHAsync_v2_ptsz, PTSZ)                                    \
    X(cuMemcpyDtoDAsync, 3000, cuMemcpyDtoDAsync, N)                                               \
    X(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, N)                                            \
    X(cuMemcpyDtoDAsync, 7000, cuMemcpyDtoDAsync_v2_ptsz, PTSZ)                                    \
    X(cuMemsetD8, 2000, cuMemsetD8, N)                                                             \
    X(cuMemsetD8, 3020, cuMemsetD8_v2, N)                                                          \
    X(cuMemsetD8, 7000, cuMemsetD8_v2_ptds, PTDS)                                                  \
    X(cuMemsetD8Async, 3020, cuMemsetD8Async, N)                                                   \
    X(cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz, PTSZ)                                           \
    /* streams and events */                                                                       \
    X(cuStreamCreate, 2000, cuStreamCreate, N)                                                     \
    X(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority, N)                             \
    X(cuStreamDestroy, 2000, cuStreamDestroy, N)                                                   \
    X(cuStreamDestroy, 4000, cuStreamDestroy_v2, N)                                                \
    X(cuStreamSynchronize, 2000, cuStreamSynchronize, N)                                           \
    X(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz, PTSZ)                                   \
    X(cuStreamQuery, 2000, cuStreamQuery, N)                                                       \
    X(cuStreamQuery, 7000, cuStreamQuery_ptsz, PTSZ)                                               \
    X(cuStreamIsCapturing, 10000, cuStreamIsCapturing, N)                                          \
    X(cuStreamIsCapturing, 10000, cuStreamIsCapturing_ptsz, PTSZ)                                  \
    X(cuEventCreate, 2000, cuEventCreate, N)                                                       \
    X(cuEventDestroy, 2000, cuEventDestroy, N)                                                     \
    X(cuEventDestroy, 4000, cuEventDestroy_v2, N)                                                  \
    X(cuEventRecord, 2000, cuEventRecord, N)                                                       \
    X(cuEventRecord, 7000, cuEventRecord_ptsz, PTSZ)                                               \
    X(cuEventQuery, 2000, cuEventQuery, N)                                                         \
    X(cuEventSynchronize, 2000, cuEventSynchronize, N)                                             \
    X(cuStreamWaitEvent, 3020, cuStreamWaitEvent, N)                                               \
    X(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz, PTSZ)                                       \
    /* stream-ordered allocation and pools */                                                      \
    X(cuMemAllocAsync, 11020, cuMemAllocAsync, N)                                                  \
    X(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz, PTSZ)                                          \
    X(cuMemFreeAsync, 11020, cuMemFreeAsync, N)                                                    \
    X(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz, PTSZ)                                            \
    X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, N)                                  \
    X(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz, PTSZ)                          \
    X(cuMemPoolCreate, 11020, cuMemPoolCreate, N)                                                  \
    X(cuMemPoolDestroy, 11020, cuMemPoolDestroy, N)                                                \
    X(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo, N)                                                  \
    X(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute, N)                                      \
    X(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute, N)                                      \
    X(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool, N)                              \
    X(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool, N)                                            \
    X(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool, N)                                            \
    X(cuDeviceGetGraphMemAttribute, 11040, cuDeviceGetGraphMemAttribute, N)                        \
    X(cuDeviceSetGraphMemAttribute, 11040, cuDeviceSetGraphMemAttribute, N)                        \
    X(cuDeviceGraphMemTrim, 11040, cuDeviceGraphMemTrim, N)                                        \
    /* virtual memory management */                                                                \
    X(cuMemCreate, 10020, cuMemCreate, N)                                                          \
    X(cuMemRelease, 10020, cuMemRelease, N)                                                        \
    X(cuMemAddressReserve, 10020, cuMemAddressReserve, N)                                          \
    X(cuMemAddressFree, 10020, cuMemAddressFree, N)                                                \
    X(cuMemMap, 10020, cuMemMap, N)                                                                \
    X(cuMemUnmap, 10020, cuMemUnmap, N)                                                            \
    X(cuMemSetAccess, 10020, cuMemSetAccess, N)                                                    \
    X(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity, N)                      \
    /* arrays */                                                                                   \
    X(cuArrayCreate, 2000, cuArrayCreate, N)                                                       \
    X(cuArrayCreate, 3020, cuArrayCreate_v2, N)                                                    \
    X(cuArray3DCreate, 2000, cuArray3DCreate, N)                                                   \
    X(cuArray3DCreate, 3020, cuArray3DCreate_v2, N)                                                \
    X(cuArrayDestroy, 2000, cuArrayDestroy, N)                                                     \
    X(cuArrayGetMemoryRequirements, 11060, cuArrayGetMemoryRequirements, N)                        \
    X(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate, N)                                     \
    X(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy, N)                                   \
    X(cuMipmappedArrayGetMemoryRequirements, 11060, cuMipmappedArrayGetMemoryRequirements, N)

/* An id per exported function. */
enum fc_symbol_id {
#define FC__SYM_ID(base, ver, sym, pt) FC_ID_##sym,
    FC_SYMBOLS(FC__SYM_ID)
#undef FC__SYM_ID
        FC_N_SYMBOLS
};

#endif
