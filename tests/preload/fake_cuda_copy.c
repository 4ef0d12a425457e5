/* tests/preload/fake_cuda_copy.c - copies and sets of the stand-in
 * driver: cuMemcpy, cuMemcpyHtoD/DtoH/DtoD (and their Async forms) and
 * cuMemsetD8 (and Async), in the 32-bit legacy ABI, the _v2 one and the
 * per-thread default stream variants (_ptds for the synchronous ones,
 * _ptsz for the stream-ordered ones). Device memory is host memory, so
 * each is a memmove or memset, done at once (a stream's work is always
 * complete). They need a current context (or a valid stream) and do not
 * check that the pointers are the stand-in's: a bad one faults, as the
 * GPU would. */
#include <string.h>

#include "fake_cuda_internal.h"

static CUresult check(CUstream s, int stream_ordered)
{
    fc_lock();
    CUresult r = stream_ordered ? fc_stream_ctx_locked(s, NULL) : fc_need_ctx_locked(NULL);
    fc_unlock();
    return r;
}

static CUresult copy(uint64_t dst, uint64_t src, size_t n, CUstream s, int stream_ordered)
{
    CUresult r = check(s, stream_ordered);
    if (r != CUDA_SUCCESS)
        return r;
    if (n && (!dst || !src))
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

static CUresult set8(uint64_t dst, unsigned char v, size_t n, CUstream s, int stream_ordered)
{
    CUresult r = check(s, stream_ordered);
    if (r != CUDA_SUCCESS)
        return r;
    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memset((void *)(uintptr_t)dst, v, n);
    return CUDA_SUCCESS;
}

#define HOST(p) ((uint64_t)(uintptr_t)(p))

/* ---- unified copies ---- */

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FC_ENTER(cuMemcpy);
    return copy(dst, src, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FC_ENTER(cuMemcpy_ptds);
    return copy(dst, src, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyAsync);
    return copy(dst, src, ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                    CUstream hStream)
{
    FC_ENTER(cuMemcpyAsync_ptsz);
    return copy(dst, src, ByteCount, hStream, 1);
}

/* ---- host to device ---- */

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    FC_ENTER(cuMemcpyHtoD);
    return copy(dstDevice, HOST(srcHost), ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FC_ENTER(cuMemcpyHtoD_v2);
    return copy(dstDevice, HOST(srcHost), ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FC_ENTER(cuMemcpyHtoD_v2_ptds);
    return copy(dstDevice, HOST(srcHost), ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                   unsigned int ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyHtoDAsync);
    return copy(dstDevice, HOST(srcHost), ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                      CUstream hStream)
{
    FC_ENTER(cuMemcpyHtoDAsync_v2);
    return copy(dstDevice, HOST(srcHost), ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                           size_t ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
    return copy(dstDevice, HOST(srcHost), ByteCount, hStream, 1);
}

/* ---- device to host ---- */

CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    FC_ENTER(cuMemcpyDtoH);
    return copy(HOST(dstHost), srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FC_ENTER(cuMemcpyDtoH_v2);
    return copy(HOST(dstHost), srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FC_ENTER(cuMemcpyDtoH_v2_ptds);
    return copy(HOST(dstHost), srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount,
                                   CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoHAsync);
    return copy(HOST(dstHost), srcDevice, ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoHAsync_v2);
    return copy(HOST(dstHost), srcDevice, ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
    return copy(HOST(dstHost), srcDevice, ByteCount, hStream, 1);
}

/* ---- device to device ---- */

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                              unsigned int ByteCount)
{
    FC_ENTER(cuMemcpyDtoD);
    return copy(dstDevice, srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    FC_ENTER(cuMemcpyDtoD_v2);
    return copy(dstDevice, srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount)
{
    FC_ENTER(cuMemcpyDtoD_v2_ptds);
    return copy(dstDevice, srcDevice, ByteCount, NULL, 0);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                   unsigned int ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoDAsync);
    return copy(dstDevice, srcDevice, ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoDAsync_v2);
    return copy(dstDevice, srcDevice, ByteCount, hStream, 1);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream)
{
    FC_ENTER(cuMemcpyDtoDAsync_v2_ptsz);
    return copy(dstDevice, srcDevice, ByteCount, hStream, 1);
}

/* ---- sets ---- */

CUresult CUDAAPI cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    FC_ENTER(cuMemsetD8);
    return set8(dstDevice, uc, N, NULL, 0);
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    FC_ENTER(cuMemsetD8_v2);
    return set8(dstDevice, uc, N, NULL, 0);
}

CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    FC_ENTER(cuMemsetD8_v2_ptds);
    return set8(dstDevice, uc, N, NULL, 0);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream)
{
    FC_ENTER(cuMemsetD8Async);
    return set8(dstDevice, uc, N, hStream, 1);
}

CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                      CUstream hStream)
{
    FC_ENTER(cuMemsetD8Async_ptsz);
    return set8(dstDevice, uc, N, hStream, 1);
}
