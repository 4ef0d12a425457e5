/* src/engine/cuda/dnn.h - cuDNN and cuBLAS, loaded at run time.
 *
 * Like the driver (cu_engine.h), the libraries are opened with dlopen the first
 * time a cuda engine is loaded, so libvramkit-engine runs where they are absent
 * and says which one is missing. Members are typed from the headers'
 * prototypes (cudnn.h, cublas_v2.h), so a call compiles only if it matches
 * them. Calls read `vram__dnn.cudnnConvolutionForward(...)`. */
#ifndef VRAM_ENGINE_CUDA_DNN_H
#define VRAM_ENGINE_CUDA_DNN_H

#include <cublas_v2.h>
#include <cudnn.h>

#include "base/internal.h"

#define VRAM_CUDNN_FUNCS(X)                                                                   \
    X(cudnnGetVersion) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                       \
    X(cudnnGetErrorString) X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor)       \
    X(cudnnDestroyTensorDescriptor) X(cudnnCreateFilterDescriptor)                            \
    X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                             \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                    \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                           \
    X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolution2dForwardOutputDim)             \
    X(cudnnGetConvolutionForwardAlgorithmMaxCount) X(cudnnGetConvolutionForwardAlgorithm_v7)  \
    X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)                     \
    X(cudnnConvolutionBiasActivationForward) X(cudnnCreateActivationDescriptor)               \
    X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor)                       \
    X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor)                          \
    X(cudnnBackendSetAttribute) X(cudnnBackendGetAttribute) X(cudnnBackendFinalize)           \
    X(cudnnBackendExecute)

#define VRAM_CUBLAS_FUNCS(X)                                                                  \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetMathMode)         \
    X(cublasSetWorkspace_v2) X(cublasSgemm_v2) X(cublasSgemmStridedBatched)                   \
    X(cublasGetStatusString)

typedef struct vram__dnn_api {
#define VRAM__DNN_MEMBER(fn) __typeof__(&fn) fn;
    VRAM_CUDNN_FUNCS(VRAM__DNN_MEMBER)
    VRAM_CUBLAS_FUNCS(VRAM__DNN_MEMBER)
#undef VRAM__DNN_MEMBER
} vram__dnn_api;

extern vram__dnn_api vram__dnn;

/* Open libcudnn.so.9 and libcublas.so.13 once per process (thread-safe): 0,
 * or VRAM_ENOSYS naming the library or symbol that is missing. */
int vram__dnn_load(void);

/* Record a failed cuDNN or cuBLAS call as the last error ("<what>:
 * CUDNN_STATUS_X"): VRAM_ENOMEM for an allocation failure, else
 * VRAM_EBACKEND. */
int vram__cudnn_fail(cudnnStatus_t s, const char *what);
int vram__cublas_fail(cublasStatus_t s, const char *what);

#endif
