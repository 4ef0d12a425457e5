/* tests/gpu/driver_costs.c - what the driver calls behind each backend cost
 * on this GPU, measured one by one (host µs, median of 21): cuMemCreate,
 * cuMemMap, cuMemSetAccess, cuMemUnmap and cuMemRelease by chunk size; one
 * cuMemSetAccess over several separate mappings; cuMemAlloc+cuMemFree pairs;
 * cuMemAllocAsync+cuMemFreeAsync on the default pool, cold and warm; event
 * record and query; whether a handle already mapped can be mapped at a second
 * range (and at what cost), and whether part of a handle can be mapped; and
 * whether threads mapping at once get through more mappings a second than
 * one thread does (the driver may serialize them). Prints
 * a Markdown table; the vmm policy's chunk size and retention are chosen from
 * these numbers. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 21
#define CK(x)                                                                                 \
    do {                                                                                      \
        CUresult r_ = (x);                                                                    \
        if (r_ != CUDA_SUCCESS) {                                                             \
            const char *s_ = "?";                                                             \
            cuGetErrorName(r_, &s_);                                                          \
            fprintf(stderr, "driver_costs: %s failed: %s\n", #x, s_);                         \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* One thread's share of the concurrency probe: `n` cycles of create, map,
 * access, unmap and release of one granule at its own address. */
typedef struct cycler {
    CUcontext ctx;
    CUdeviceptr va;
    size_t gran;
    const CUmemAllocationProp *prop;
    const CUmemAccessDesc *acc;
    int n;
} cycler;

static void *map_cycles(void *arg)
{
    cycler *c = arg;
    CK(cuCtxSetCurrent(c->ctx));
    for (int i = 0; i < c->n; i++) {
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, c->gran, c->prop, 0));
        CK(cuMemMap(c->va, c->gran, 0, h, 0));
        CK(cuMemSetAccess(c->va, c->gran, c->acc, 1));
        CK(cuMemUnmap(c->va, c->gran));
        CK(cuMemRelease(h));
    }
    return NULL;
}

/* Mapping cycles a second with 1, 2 and 4 threads at once. */
static void concurrency(CUcontext ctx, CUdeviceptr va, size_t gran,
                        const CUmemAllocationProp *prop, const CUmemAccessDesc *acc)
{
    enum { CYCLES = 200, MOST = 4 };
    printf("\n| threads mapping at once | cycles a second in all | µs a cycle per thread |\n"
           "|---:|---:|---:|\n");
    for (int t = 1; t <= MOST; t *= 2) {
        pthread_t th[MOST];
        cycler c[MOST];
        double t0 = now_us();
        for (int i = 0; i < t; i++) {
            c[i] = (cycler){ctx, va + (size_t)i * gran, gran, prop, acc, CYCLES};
            if (pthread_create(&th[i], NULL, map_cycles, &c[i])) {
                fprintf(stderr, "driver_costs: pthread_create failed\n");
                exit(1);
            }
        }
        for (int i = 0; i < t; i++)
            pthread_join(th[i], NULL);
        double wall = now_us() - t0;
        printf("| %d | %.0f | %.1f |\n", t, t * CYCLES / (wall / 1e6), wall / CYCLES);
    }
}

int main(void)
{
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    char name[128];
    CK(cuDeviceGetName(name, sizeof name, dev));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr va;
    size_t vsz = (size_t)8 << 30;
    CK(cuMemAddressReserve(&va, vsz, 0, 0, 0));
    printf("# Driver call costs on %s (granularity %zu KiB), host µs, median of %d\n\n", name,
           gran >> 10, REPS);
    printf("| chunk MiB | cuMemCreate | cuMemMap | cuMemSetAccess | back (sum) | cuMemUnmap | "
           "cuMemRelease | give back (sum) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    size_t sizes[] = {2u << 20, 4u << 20, 8u << 20, 32u << 20, 128u << 20, 512u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        double c[REPS], m[REPS], a[REPS], u[REPS], r[REPS];
        for (int i = 0; i < REPS; i++) {
            CUmemGenericAllocationHandle h;
            double t0 = now_us();
            CK(cuMemCreate(&h, sizes[s], &prop, 0));
            double t1 = now_us();
            CK(cuMemMap(va, sizes[s], 0, h, 0));
            double t2 = now_us();
            CK(cuMemSetAccess(va, sizes[s], &acc, 1));
            double t3 = now_us();
            CK(cuMemUnmap(va, sizes[s]));
            double t4 = now_us();
            CK(cuMemRelease(h));
            double t5 = now_us();
            c[i] = t1 - t0, m[i] = t2 - t1, a[i] = t3 - t2, u[i] = t4 - t3, r[i] = t5 - t4;
        }
        double C = med(c, REPS), M = med(m, REPS), A = med(a, REPS), U = med(u, REPS),
               R = med(r, REPS);
        printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", sizes[s] >> 20, C, M,
               A, C + M + A, U, R, U + R);
    }
    /* One cuMemSetAccess over 16 separate 2 MiB mappings. */
    {
        enum { N = 16 };
        CUmemGenericAllocationHandle h[N];
        double t0 = now_us();
        for (int i = 0; i < N; i++) {
            CK(cuMemCreate(&h[i], gran, &prop, 0));
            CK(cuMemMap(va + (size_t)i * gran, gran, 0, h[i], 0));
        }
        double t1 = now_us();
        CK(cuMemSetAccess(va, N * gran, &acc, 1));
        double t2 = now_us();
        printf("\n%d separate granule mappings: create+map %.1f µs in all, one cuMemSetAccess over "
               "them %.1f µs (%.1f per mapping)\n",
               N, t1 - t0, t2 - t1, (t2 - t1) / N);
        for (int i = 0; i < N; i++) {
            CK(cuMemUnmap(va + (size_t)i * gran, gran));
            CK(cuMemRelease(h[i]));
        }
    }
    /* Physical memory at a second virtual range: the same handle mapped
     * twice (the data must be the same through both), and part of a handle
     * mapped on its own (an offset into it). */
    {
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, gran, &prop, 0));
        CK(cuMemMap(va, gran, 0, h, 0));
        CK(cuMemSetAccess(va, gran, &acc, 1));
        CK(cuMemsetD32(va, 0x5eed, gran / 4));
        CK(cuCtxSynchronize());
        double m[REPS], u[REPS];
        unsigned seen = 0;
        for (int i = 0; i < REPS; i++) {
            double a = now_us();
            CK(cuMemMap(va + gran, gran, 0, h, 0));
            CK(cuMemSetAccess(va + gran, gran, &acc, 1));
            double b = now_us();
            if (i == 0)
                CK(cuMemcpyDtoH(&seen, va + gran + gran - sizeof seen, sizeof seen));
            double c = now_us();
            CK(cuMemUnmap(va + gran, gran));
            m[i] = b - a;
            u[i] = now_us() - c;
        }
        printf("\nthe same %zu KiB handle at a second range: %s; map+access %.1f µs, unmap %.1f µs\n",
               gran >> 10, seen == 0x5eed ? "same data through both" : "DIFFERENT DATA", med(m, REPS),
               med(u, REPS));
        CK(cuMemUnmap(va, gran));
        CK(cuMemRelease(h));
        CK(cuMemCreate(&h, 4 * gran, &prop, 0));
        for (size_t offset = 0; offset <= gran; offset += gran) {
            CUresult r = cuMemMap(va, gran, offset, h, 0);
            const char *rs = "?";
            cuGetErrorName(r, &rs);
            printf("one granule of a 4-granule handle, at offset %zu KiB: %s\n", offset >> 10,
                   r == CUDA_SUCCESS ? "mapped" : rs);
            if (r == CUDA_SUCCESS)
                CK(cuMemUnmap(va, gran));
        }
        CK(cuMemRelease(h));
    }
    concurrency(ctx, va, gran, &prop, &acc);
    printf("\n| size MiB | cuMemAlloc+cuMemFree µs |\n|---:|---:|\n");
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        double v[REPS];
        for (int i = 0; i < REPS; i++) {
            CUdeviceptr p;
            double t0 = now_us();
            CK(cuMemAlloc(&p, sizes[s]));
            CK(cuMemFree(p));
            v[i] = now_us() - t0;
        }
        printf("| %zu | %.1f |\n", sizes[s] >> 20, med(v, REPS));
    }
    {
        CUmemoryPool mp;
        CK(cuDeviceGetDefaultMemPool(&mp, dev));
        cuuint64_t thr = UINT64_MAX, zero = 0;
        CK(cuMemPoolSetAttribute(mp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
        CUstream st;
        CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        enum { N = 2000 };
        static CUdeviceptr p[N];
        double t0 = now_us();
        for (int i = 0; i < N; i++)
            CK(cuMemAllocAsync(&p[i], (size_t)(1 + i % 64) << 14, st));
        for (int i = 0; i < N; i++)
            CK(cuMemFreeAsync(p[i], st));
        double t1 = now_us();
        for (int i = 0; i < N; i++)
            CK(cuMemAllocAsync(&p[i], (size_t)(1 + i % 64) << 14, st));
        for (int i = 0; i < N; i++)
            CK(cuMemFreeAsync(p[i], st));
        double t2 = now_us();
        CUevent ev;
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        double rec[REPS], qry[REPS];
        for (int i = 0; i < REPS; i++) {
            double a = now_us();
            CK(cuEventRecord(ev, st));
            double b = now_us();
            cuEventQuery(ev);
            qry[i] = now_us() - b;
            rec[i] = b - a;
        }
        CK(cuStreamSynchronize(st));
        printf("\ncuMemAllocAsync/cuMemFreeAsync (16 KiB-1 MiB, %d of each, threshold max): cold "
               "%.3f µs/op, warm %.3f µs/op\n",
               N, (t1 - t0) / (2 * N), (t2 - t1) / (2 * N));
        printf("cuEventRecord %.2f µs, cuEventQuery %.2f µs\n", med(rec, REPS), med(qry, REPS));
        CK(cuMemPoolTrimTo(mp, 0));
        CK(cuMemPoolSetAttribute(mp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
        CK(cuEventDestroy(ev));
        CK(cuStreamDestroy(st));
    }
    CK(cuMemAddressFree(va, vsz));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
