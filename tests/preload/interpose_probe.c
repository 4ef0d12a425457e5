/* tests/preload/interpose_probe.c - libinterpose_probe.so, the smallest
 * library that stands in front of the driver by symbol interposition
 * (LD_PRELOAD): it defines cuMemAlloc_v2, cuMemFree_v2, cuMemAllocAsync,
 * cuMemAllocAsync_ptsz, cuMemFreeAsync and cuMemFreeAsync_ptsz, counts the
 * calls that reach it and passes them on (dlsym RTLD_NEXT). At exit it
 * prints one line to stderr,
 *   interpose_probe: {"cuMemAlloc_v2":[probe,driver],...}
 * with, for each name, the calls it saw and the calls the stand-in driver
 * counted (fake_cuda_calls; -1 without the stand-in). interpose.sh reads it
 * to check that the stand-in behaves as libcuda does under interposition:
 * calls of a linked program pass through the interposer exactly once (the
 * driver never calls its own exported names), while the pointers of
 * cuGetProcAddress and of dlsym on its handle bypass it. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#define PROBED(X)                                                                                  \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync)                   \
        X(cuMemFreeAsync_ptsz)

enum {
#define PROBE_ID(name) ID_##name,
    PROBED(PROBE_ID)
#undef PROBE_ID
        N_PROBED
};

static const char *const names[N_PROBED] = {
#define PROBE_NAME(name) #name,
    PROBED(PROBE_NAME)
#undef PROBE_NAME
};

static _Atomic unsigned long long seen[N_PROBED];

static void *next(int id)
{
    void *fn = dlsym(RTLD_NEXT, names[id]);
    if (!fn) {
        fprintf(stderr, "interpose_probe: no %s after this library\n", names[id]);
        abort();
    }
    atomic_fetch_add(&seen[id], 1);
    return fn;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return ((CUresult(*)(CUdeviceptr *, size_t))next(ID_cuMemAlloc_v2))(dptr, bytesize);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    return ((CUresult(*)(CUdeviceptr))next(ID_cuMemFree_v2))(dptr);
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return ((CUresult(*)(CUdeviceptr *, size_t, CUstream))next(ID_cuMemAllocAsync))(dptr, bytesize,
                                                                                    hStream);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return ((CUresult(*)(CUdeviceptr *, size_t, CUstream))next(ID_cuMemAllocAsync_ptsz))(
        dptr, bytesize, hStream);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return ((CUresult(*)(CUdeviceptr, CUstream))next(ID_cuMemFreeAsync))(dptr, hStream);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return ((CUresult(*)(CUdeviceptr, CUstream))next(ID_cuMemFreeAsync_ptsz))(dptr, hStream);
}

__attribute__((destructor)) static void report(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    unsigned long long (*calls)(const char *) = NULL;
    if (lib)
        *(void **)&calls = dlsym(lib, "fake_cuda_calls");
    fprintf(stderr, "interpose_probe: {");
    for (int i = 0; i < N_PROBED; i++)
        fprintf(stderr, "%s\"%s\":[%llu,%lld]", i ? "," : "", names[i], atomic_load(&seen[i]),
                calls ? (long long)calls(names[i]) : -1ll);
    fprintf(stderr, "}\n");
    if (lib)
        dlclose(lib);
}
