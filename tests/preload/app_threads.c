/* tests/preload/app_threads.c - many threads starting on the driver at
 * once, as a multi-stream service does: THREADS threads (default 16) wait
 * at a barrier, then each, the CUDA runtime's way, looks cuGetProcAddress_v2
 * up in libcuda's handle, gets its entry points through it, calls cuInit,
 * retains the primary context and makes it current, and runs ITERATIONS
 * (default 1000) rounds of cuMemAlloc (64 KiB to 4 MiB, its own
 * pseudo-random sizes), a write and read back of both ends, and cuMemFree;
 * last it releases the primary context.
 *
 *   app_threads [--threads N] [--iterations N]
 *
 * One JSON line (threads, iterations, driver calls made, bytes allocated,
 * failures); exit status 0 when every call succeeded and every read gave
 * back what was written. */
#include <pthread.h>

#include "app_common.h"

#define MIN_BYTES (64ull * 1024ull)
#define MAX_BYTES (4ull * 1024ull * 1024ull)

static app_cuda c;
static pthread_barrier_t start;
static unsigned iterations = 1000;

typedef struct worker {
    unsigned id;
    unsigned long long calls, bytes, failures;
} worker;

#define COUNT(w, call) ((w)->calls++, (call) == CUDA_SUCCESS ? 1 : ((w)->failures++, 0))

static void *run(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&start);
    PFN_cuGetProcAddress_v12000 get =
        (PFN_cuGetProcAddress_v12000)dlsym(c.lib, "cuGetProcAddress_v2");
    if (!get) {
        w->failures++;
        return NULL;
    }
    app_cuda mine = {.lib = c.lib, .get = get};
    PFN_cuInit_v2000 init = APP_PROC(&mine, cuInit, 2000);
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = APP_PROC(&mine, cuDevicePrimaryCtxRetain, 7000);
    PFN_cuDevicePrimaryCtxRelease_v11000 release =
        APP_PROC(&mine, cuDevicePrimaryCtxRelease, 11000);
    PFN_cuCtxSetCurrent_v4000 set_current = APP_PROC(&mine, cuCtxSetCurrent, 4000);
    PFN_cuMemAlloc_v3020 mem_alloc = APP_PROC(&mine, cuMemAlloc, 3020);
    PFN_cuMemFree_v3020 mem_free = APP_PROC(&mine, cuMemFree, 3020);
    PFN_cuMemcpyHtoD_v3020 htod = APP_PROC(&mine, cuMemcpyHtoD, 3020);
    PFN_cuMemcpyDtoH_v3020 dtoh = APP_PROC(&mine, cuMemcpyDtoH, 3020);
    w->calls += 9;

    CUcontext ctx = NULL;
    if (!COUNT(w, init(0)) || !COUNT(w, retain(&ctx, 0)) || !COUNT(w, set_current(ctx)))
        return NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
    for (unsigned i = 0; i < iterations; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t size = (size_t)(MIN_BYTES + x % (MAX_BYTES - MIN_BYTES + 1));
        CUdeviceptr p = 0;
        if (!COUNT(w, mem_alloc(&p, size)))
            continue;
        w->bytes += size;
        uint64_t head = x, tail = ~x, back_head = 0, back_tail = 0;
        COUNT(w, htod(p, &head, sizeof head));
        COUNT(w, htod(p + size - sizeof tail, &tail, sizeof tail));
        COUNT(w, dtoh(&back_head, p, sizeof back_head));
        COUNT(w, dtoh(&back_tail, p + size - sizeof back_tail, sizeof back_tail));
        if (back_head != head || back_tail != tail)
            w->failures++;
        COUNT(w, mem_free(p));
    }
    COUNT(w, release(0));
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned threads = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            iterations = (unsigned)strtoul(argv[++i], NULL, 10);
        else
            app_die("usage: app_threads [--threads N] [--iterations N]");
    }
    if (threads == 0 || threads > 1024)
        app_die("--threads must be 1 to 1024");
    c.lib = app_open("libcuda.so.1");
    pthread_t *tid = calloc(threads, sizeof *tid);
    worker *w = calloc(threads, sizeof *w);
    if (!tid || !w)
        app_die("out of host memory");
    pthread_barrier_init(&start, NULL, threads);
    for (unsigned i = 0; i < threads; i++) {
        w[i].id = i;
        if (pthread_create(&tid[i], NULL, run, &w[i]) != 0)
            app_die("cannot start thread %u", i);
    }
    unsigned long long calls = 0, bytes = 0, failures = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        calls += w[i].calls;
        bytes += w[i].bytes;
        failures += w[i].failures;
    }
    pthread_barrier_destroy(&start);
    printf("{\"app\":\"threads\",\"threads\":%u,\"iterations\":%u,\"calls\":%llu,"
           "\"bytes\":%llu,\"failures\":%llu}\n",
           threads, iterations, calls, bytes, failures);
    free(tid);
    free(w);
    return failures ? 1 : 0;
}
