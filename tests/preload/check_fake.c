/* tests/preload/check_fake.c - the stand-in driver's own model, checked
 * (CTest preload/fake_model): what a library in front of the driver may
 * rely on when it is tested against the stand-in. Contexts and their
 * cost (and the stack limit's), what a context's death frees, errors for
 * what is not the driver's, the 32-bit legacy ABI, pools that keep what
 * is freed until trimmed or synchronised past their release threshold,
 * graph memory while capturing, virtual memory mappings that alias,
 * arrays, the test knobs, and NVML. Linked with the stand-in; prints one
 * line per check group and exits 0 when all hold. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define MIB (1024ull * 1024ull)
#define CTX (326 * MIB)

/* The legacy 32-bit ABI, which cuda.h declares only for the driver itself
 * (for programs, the names are #defines of the _v2 ones). */
#undef cuMemAlloc
#undef cuMemGetInfo
typedef unsigned int CUdeviceptr_v1;
CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total);
/* Per-thread variants, declared by cuda.h only with CUDA_API_PER_THREAD_DEFAULT_STREAM. */
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);

static int failures;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                        \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define OK(call) EXPECT((call) == CUDA_SUCCESS)

static unsigned long long used(void) { return fake_cuda_used_bytes(); }

static void group(const char *name)
{
    static int last;
    printf("%s: %s\n", name, failures == last ? "ok" : "FAILED");
    last = failures;
}

int main(void)
{
    CUdeviceptr p, q;
    CUcontext ctx, own;
    EXPECT(cuMemAlloc_v2(&p, MIB) == CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    EXPECT(cuMemAlloc_v2(&p, MIB) == CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(fake_cuda_total_bytes() == 80ull << 30);
    group("start");

    /* contexts */
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EXPECT(used() == CTX && fake_cuda_context_count() == 1);
    OK(cuDevicePrimaryCtxRetain(&ctx, 0)); /* a second reference costs nothing */
    EXPECT(used() == CTX);
    OK(cuCtxSetCurrent(ctx));
    OK(cuCtxCreate_v4(&own, NULL, 0, 0)); /* pushed: current now */
    EXPECT(used() == 2 * CTX && fake_cuda_context_count() == 2);
    size_t stack = 0;
    OK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
    EXPECT(stack == 256);
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024)); /* 524 MiB at 1 KiB */
    EXPECT(used() == CTX + 524 * MIB);
    OK(cuMemAlloc_v2(&p, MIB));
    OK(cuMemAllocHost_v2((void **)&q, MIB));
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuCtxDestroy_v2(own)); /* takes its allocation, host memory and stream with it */
    EXPECT(used() == CTX && fake_cuda_bytes(FAKE_CUDA_KIND_HOST) == 0);
    EXPECT(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuStreamDestroy_v2(s) == CUDA_ERROR_INVALID_HANDLE);
    CUcontext cur = NULL;
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == ctx); /* the destroyed one was popped */
    OK(cuDevicePrimaryCtxRelease_v2(0));
    EXPECT(used() == CTX); /* one reference left */
    OK(cuMemAlloc_v2(&p, MIB));
    OK(cuDevicePrimaryCtxRelease_v2(0)); /* the last: the context and its memory go */
    EXPECT(used() == 0 && fake_cuda_context_count() == 0);
    EXPECT(cuMemAlloc_v2(&p, MIB) == CUDA_ERROR_INVALID_CONTEXT); /* current but dead */
    EXPECT(cuDevicePrimaryCtxRelease_v2(0) == CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    group("contexts");

    /* frees, the legacy ABI, the knobs */
    EXPECT(cuMemFree_v2(0x1234) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&p, 0) == CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr_v1 small;
    OK(cuMemAlloc(&small, 4096));
    EXPECT(small != 0 && fake_cuda_bytes(FAKE_CUDA_KIND_DEVICE) == 4096);
    memset((void *)(uintptr_t)small, 7, 4096);
    OK(cuMemFree_v2(small)); /* freed through the other ABI */
    unsigned int f32 = 0, t32 = 0;
    OK(cuMemGetInfo(&f32, &t32));
    EXPECT(t32 == 0xFFFFFFFFu); /* 80 GiB saturates the 32-bit total */
    EXPECT(cuMemAlloc_v2(&p, 81ull << 30) == CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(!strcmp(fake_cuda_last_call(), "cuMemAlloc_v2"));
    EXPECT(fake_cuda_calls("cuMemAlloc") == 1 && fake_cuda_calls("nothing") == 0);
    OK(cuStreamSynchronize_ptsz(NULL));
    EXPECT(!strcmp(fake_cuda_thread_last_variant(), "ptsz"));
    OK(cuStreamSynchronize(NULL));
    EXPECT(!strcmp(fake_cuda_last_variant(), "legacy"));
    group("frees and knobs");

    /* pools */
    unsigned long long base = used();
    CUmemoryPool pool;
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocAsync(&p, 3 * MIB, NULL));
    OK(cuMemFreeAsync(p, NULL));
    OK(cuStreamSynchronize(NULL));
    EXPECT(used() == base + 3 * MIB); /* kept */
    cuuint64_t v = 0;
    OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    EXPECT(v == 3 * MIB);
    OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    EXPECT(v == 0);
    OK(cuMemAllocAsync(&q, 2 * MIB, NULL)); /* reuses the kept block */
    EXPECT(q == p && used() == base + 3 * MIB);
    OK(cuMemFree_v2(q)); /* cuMemFree frees pool blocks too */
    OK(cuMemPoolTrimTo(pool, 0));
    EXPECT(used() == base);
    cuuint64_t zero = 0;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    OK(cuMemAllocAsync(&p, MIB, NULL));
    OK(cuMemFreeAsync(p, NULL));
    EXPECT(used() == base + MIB);
    OK(cuCtxSynchronize()); /* threshold 0: a synchronisation gives it back */
    EXPECT(used() == base);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemoryPool mine;
    OK(cuMemPoolCreate(&mine, &props));
    OK(cuMemAllocFromPoolAsync(&p, MIB, mine, NULL));
    OK(cuMemPoolDestroy(mine)); /* a block still out: goes with it */
    EXPECT(used() == base + MIB);
    OK(cuMemFreeAsync(p, NULL));
    EXPECT(used() == base);
    EXPECT(cuMemPoolDestroy(pool) == CUDA_ERROR_INVALID_VALUE); /* the default pool */
    group("pools");

    /* graph memory while capturing */
    fake_cuda_set_capturing(1);
    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(NULL, &st));
    EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuMemAllocAsync_ptsz(&p, 2 * MIB, NULL));
    OK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
    EXPECT(v == 2 * MIB && fake_cuda_bytes(FAKE_CUDA_KIND_GRAPH) == 2 * MIB);
    fake_cuda_set_capturing(0);
    OK(cuMemFreeAsync(p, NULL));
    OK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v));
    EXPECT(v == 2 * MIB); /* kept until trimmed */
    OK(cuDeviceGraphMemTrim(0));
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_GRAPH) == 0 && used() == base);
    group("graph memory");

    /* virtual memory: two mappings of one handle see the same bytes */
    CUmemAllocationProp ap;
    memset(&ap, 0, sizeof ap);
    ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    EXPECT(cuMemCreate(&h, MIB, &ap, 0) == CUDA_ERROR_INVALID_VALUE); /* not granular */
    OK(cuMemCreate(&h, 2 * MIB, &ap, 0));
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_VMM) == 2 * MIB);
    CUdeviceptr va;
    OK(cuMemAddressReserve(&va, 8 * MIB, 0, 0, 0));
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_VMM) == 2 * MIB); /* address space costs nothing */
    OK(cuMemMap(va, 2 * MIB, 0, h, 0));
    OK(cuMemMap(va + 4 * MIB, 2 * MIB, 0, h, 0));
    EXPECT(cuMemMap(va, 2 * MIB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE); /* already mapped */
    CUmemAccessDesc acc = {.location = ap.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(cuMemSetAccess(va, 2 * MIB, &acc, 1));
    OK(cuMemSetAccess(va + 4 * MIB, 2 * MIB, &acc, 1));
    EXPECT(cuMemSetAccess(va, 4 * MIB, &acc, 1) == CUDA_ERROR_INVALID_VALUE); /* a hole */
    OK(cuMemsetD8_v2(va + 100, 0x42, 1));
    unsigned char b = 0;
    OK(cuMemcpyDtoH_v2(&b, va + 4 * MIB + 100, 1));
    EXPECT(b == 0x42);
    OK(cuMemRelease(h)); /* still mapped: still charged */
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_VMM) == 2 * MIB);
    EXPECT(cuMemUnmap(va, MIB) == CUDA_ERROR_INVALID_VALUE); /* part of a mapping */
    OK(cuMemUnmap(va, 2 * MIB));
    OK(cuMemAddressFree(va, 8 * MIB)); /* unmaps the other one: the memory goes */
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_VMM) == 0);
    group("virtual memory");

    /* arrays */
    CUDA_ARRAY3D_DESCRIPTOR d = {
        .Width = 1920, .Height = 1080, .Format = CU_AD_FORMAT_NV12, .NumChannels = 1};
    CUarray arr;
    OK(cuArray3DCreate_v2(&arr, &d));
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_ARRAY) == 51 * 65536); /* 2048 x 1620, in 64 KiB steps */
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    EXPECT(cuArrayGetMemoryRequirements(&req, arr, 0) == CUDA_ERROR_INVALID_VALUE);
    OK(cuArrayDestroy(arr));
    CUmipmappedArray mm;
    CUDA_ARRAY3D_DESCRIPTOR md = {.Width = 256,
                                  .Height = 256,
                                  .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 4,
                                  .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING};
    OK(cuMipmappedArrayCreate(&mm, &md, 3));
    EXPECT(fake_cuda_bytes(FAKE_CUDA_KIND_ARRAY) == 0); /* deferred: nothing yet */
    OK(cuMipmappedArrayGetMemoryRequirements(&req, mm, 0));
    EXPECT(req.size == (1024 + 256 + 64) * 1024); /* the three levels */
    OK(cuMipmappedArrayDestroy(mm));
    EXPECT(used() == base);
    group("arrays");

    /* page-locked host memory is not the device's */
    void *host;
    OK(cuMemHostAlloc(&host, MIB, CU_MEMHOSTALLOC_PORTABLE));
    EXPECT(used() == base && fake_cuda_bytes(FAKE_CUDA_KIND_HOST) == MIB);
    OK(cuMemFreeHost(host));
    EXPECT(cuMemFreeHost(host) == CUDA_ERROR_INVALID_VALUE);
    group("host memory");

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
