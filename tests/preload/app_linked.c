/* tests/preload/app_linked.c - a CUDA program linked with -lcuda, calling
 * the driver directly by the names cuda.h gives (cuMemAlloc is
 * cuMemAlloc_v2; built as app_linked_ptds with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, the stream-taking calls are the
 * _ptsz/_ptds ones). It makes one of every kind of allocation a memory
 * tracker must follow, checks that the memory holds what is written to
 * it, frees it all but what it is told to leak, and prints one JSON line.
 *
 *   app_linked [N] [--leak BYTES]
 *
 * In order: cuInit, the primary context retained and made current, N x
 * cuMemAlloc of 1 MiB (default 4), cuMemAllocPitch (1000 x 100, 4-byte
 * elements), cuMemAllocManaged and cuMemAllocHost of 1 MiB, cuMemAllocAsync
 * of 2 MiB on a stream, 3 MiB from a pool of cuMemPoolCreate, a 2 MiB
 * cuMemCreate mapped into a 4 MiB reservation, a 256 x 256 RGBA8 array
 * (cuArrayCreate) and a deferred-mapping one (cuArray3DCreate), then the
 * frees. With --leak, `leaky_site` allocates BYTES more that are never
 * freed. The JSON: bytes per kind, cuMemGetInfo before, at the peak and
 * after, what the arrays took by free memory and by their requirements.
 * Exit status 0 when every call did what it should. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

static const char *err_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "CUDA_ERROR_UNRECOGNIZED";
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "error: %s failed: %s (%d)\n", #call, err_name(r_), (int)r_);          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    CHECK(cuMemGetInfo(&f, &t));
    return f;
}

/* The planted leak: its own call site, never freed. */
__attribute__((noinline)) static CUdeviceptr leaky_site(size_t bytes)
{
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, bytes));
    __asm__ volatile("" ::: "memory"); /* keep the call a call */
    return p;
}

/* Write a pattern through the device pointer and read it back. */
static void roundtrip(CUdeviceptr p, size_t n, unsigned char seed)
{
    unsigned char out[256], in[256];
    size_t k = n < sizeof out ? n : sizeof out;
    for (size_t i = 0; i < k; i++)
        out[i] = (unsigned char)(seed + i);
    CHECK(cuMemcpyHtoD(p + n - k, out, k));
    memset(in, 0, sizeof in);
    CHECK(cuMemcpyDtoH(in, p + n - k, k));
    if (memcmp(in, out, k) != 0) {
        fprintf(stderr, "error: device memory does not hold what was written\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    unsigned n = 4;
    unsigned long long leak = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--leak") && i + 1 < argc)
            leak = strtoull(argv[++i], NULL, 10);
        else
            n = (unsigned)strtoul(argv[i], NULL, 10);
    }

    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    size_t total = 0, free_before = 0;
    CHECK(cuMemGetInfo(&free_before, &total));

    /* cuMemAlloc x N */
    CUdeviceptr *blocks = calloc(n ? n : 1, sizeof *blocks);
    for (unsigned i = 0; i < n; i++) {
        CHECK(cuMemAlloc(&blocks[i], MIB));
        roundtrip(blocks[i], MIB, (unsigned char)i);
    }

    /* pitched */
    CUdeviceptr pitched;
    size_t pitch = 0;
    CHECK(cuMemAllocPitch(&pitched, &pitch, 1000, 100, 4));
    CHECK(cuMemsetD8(pitched, 0x5a, pitch * 100));
    roundtrip(pitched, pitch * 100, 7);

    /* managed and page-locked host memory */
    CUdeviceptr managed;
    CHECK(cuMemAllocManaged(&managed, MIB, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)managed, 1, MIB); /* managed memory is the host's too */
    void *host;
    CHECK(cuMemAllocHost(&host, MIB));
    memset(host, 2, MIB);

    /* stream-ordered, from the device's pool */
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr async_p;
    CHECK(cuMemAllocAsync(&async_p, 2 * MIB, s));
    CHECK(cuMemsetD8Async(async_p, 3, 2 * MIB, s));
    CHECK(cuStreamSynchronize(s));

    /* from a pool of our own */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    CUdeviceptr pool_p;
    CHECK(cuMemAllocFromPoolAsync(&pool_p, 3 * MIB, pool, s));
    roundtrip(pool_p, 3 * MIB, 11);

    /* virtual memory management */
    CUmemAllocationProp aprop;
    memset(&aprop, 0, sizeof aprop);
    aprop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    aprop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    aprop.location.id = dev;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &aprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle handle;
    CHECK(cuMemCreate(&handle, gran, &aprop, 0));
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CHECK(cuMemMap(va, gran, 0, handle, 0));
    CUmemAccessDesc access = {.location = aprop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, gran, &access, 1));
    roundtrip(va, gran, 13);

    /* arrays: what they take, seen as free memory */
    size_t free_pre_array = free_now();
    CUDA_ARRAY_DESCRIPTOR ad = {
        .Width = 256, .Height = 256, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
    CUarray array;
    CHECK(cuArrayCreate(&array, &ad));
    size_t array_bytes = free_pre_array - free_now();
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    CUresult req_r = cuArrayGetMemoryRequirements(&req, array, dev); /* not deferred: refused */
    CUDA_ARRAY3D_DESCRIPTOR dd = {.Width = 256,
                                  .Height = 256,
                                  .Depth = 0,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                  .NumChannels = 4,
                                  .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING};
    CUarray deferred;
    CHECK(cuArray3DCreate(&deferred, &dd));
    CUDA_ARRAY_MEMORY_REQUIREMENTS dreq = {0};
    CHECK(cuArrayGetMemoryRequirements(&dreq, deferred, dev));

    CUdeviceptr leaked = leak ? leaky_site((size_t)leak) : 0;
    size_t free_peak = free_now();

    /* free it all but the leak */
    CHECK(cuArrayDestroy(deferred));
    CHECK(cuArrayDestroy(array));
    CHECK(cuMemUnmap(va, gran));
    CHECK(cuMemRelease(handle));
    CHECK(cuMemAddressFree(va, 2 * gran));
    CHECK(cuMemFreeAsync(pool_p, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemPoolTrimTo(pool, 0));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuMemFreeAsync(async_p, s));
    CHECK(cuStreamSynchronize(s));
    CUmemoryPool dpool;
    CHECK(cuDeviceGetDefaultMemPool(&dpool, dev));
    CHECK(cuMemPoolTrimTo(dpool, 0));
    CHECK(cuStreamDestroy(s));
    CHECK(cuMemFreeHost(host));
    CHECK(cuMemFree(managed));
    CHECK(cuMemFree(pitched));
    for (unsigned i = 0; i < n; i++)
        CHECK(cuMemFree(blocks[i]));
    free(blocks);
    size_t free_after = free_now();

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    const char *api = "ptds";
#else
    const char *api = "legacy";
#endif
    printf("{\"app\":\"linked\",\"api\":\"%s\",\"pid\":%d,\"device_bytes\":%llu,"
           "\"pitch\":%zu,\"pitch_bytes\":%zu,\"managed_bytes\":%llu,\"host_bytes\":%llu,"
           "\"async_bytes\":%llu,\"pool_bytes\":%llu,\"vmm_bytes\":%zu,\"array_bytes\":%zu,"
           "\"array_requirements\":\"%s\",\"deferred_array_bytes\":%zu,\"leak_bytes\":%llu,"
           "\"leak_ptr\":\"0x%llx\",\"total\":%zu,\"free_before\":%zu,\"free_peak\":%zu,"
           "\"free_after\":%zu}\n",
           api, (int)getpid(), (unsigned long long)n * MIB, pitch, pitch * 100, MIB, MIB, 2 * MIB,
           3 * MIB, gran, array_bytes, err_name(req_r), dreq.size, leak, (unsigned long long)leaked,
           total, free_before, free_peak, free_after);
    /* The primary context stays retained, as most programs leave it. */
    return 0;
}
