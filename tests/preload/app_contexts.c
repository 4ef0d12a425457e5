/* tests/preload/app_contexts.c - what contexts cost, the two ways a
 * multi-stream program can use them.
 *
 *   app_contexts --own N [--create v2|v3|v4] [--keep]
 *   app_contexts --shared N
 *
 * --own: the main thread makes a context of its own, then N threads each
 * make one (cuCtxCreate_v2, _v3 or _v4 looked up by exact name with dlsym,
 * default _v4) and allocate 1 MiB in it; once all are made the main thread
 * reads free memory, then the threads free and destroy theirs (with
 * --keep they destroy them without freeing: the driver frees what was in
 * them).
 * --shared: the main thread retains the primary context; N threads retain
 * it too, make it current and allocate 1 MiB each; the same reading.
 * One JSON line: free memory before the threads, while all their contexts
 * and allocations live, and after; and what each thread cost (own: a
 * context and 1 MiB; shared: 1 MiB). Exit status 0 when every call
 * succeeded. */
#include <pthread.h>

#include "app_common.h"

static app_cuda c;
static int own = 1;
static int keep; /* --keep: leave the allocations to the context's destruction */
static const char *create_name = "cuCtxCreate_v4";
static void *create_fn;
static PFN_cuMemAlloc_v3020 mem_alloc;
static PFN_cuMemFree_v3020 mem_free;
static PFN_cuMemGetInfo_v3020 mem_info;
static PFN_cuCtxDestroy_v4000 ctx_destroy;
static PFN_cuDevicePrimaryCtxRetain_v7000 retain;
static PFN_cuDevicePrimaryCtxRelease_v11000 release;
static PFN_cuCtxSetCurrent_v4000 set_current;
static pthread_barrier_t made, done;

static CUresult create(CUcontext *ctx)
{
    if (!strcmp(create_name, "cuCtxCreate_v2"))
        return ((PFN_cuCtxCreate_v3020)create_fn)(ctx, 0, 0);
    if (!strcmp(create_name, "cuCtxCreate_v3"))
        return ((PFN_cuCtxCreate_v11040)create_fn)(ctx, NULL, 0, 0, 0);
    return ((PFN_cuCtxCreate_v12050)create_fn)(ctx, NULL, 0, 0);
}

static void *run(void *arg)
{
    int *failed = arg;
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;
    CUresult r = own ? create(&ctx) : retain(&ctx, 0);
    if (r == CUDA_SUCCESS && !own)
        r = set_current(ctx);
    if (r == CUDA_SUCCESS)
        r = mem_alloc(&p, APP_MIB);
    *failed = r != CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "error: a thread's context or allocation failed: %s\n", app_err(&c, r));
    pthread_barrier_wait(&made);
    pthread_barrier_wait(&done);
    if (p && !keep && mem_free(p) != CUDA_SUCCESS)
        *failed = 1;
    if (ctx && (own ? ctx_destroy(ctx) : release(0)) != CUDA_SUCCESS)
        *failed = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned n = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--own") || !strcmp(argv[i], "--shared")) && i + 1 < argc) {
            own = !strcmp(argv[i], "--own");
            n = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--keep")) {
            keep = 1;
        } else if (!strcmp(argv[i], "--create") && i + 1 < argc) {
            const char *v = argv[++i];
            create_name = !strcmp(v, "v2")   ? "cuCtxCreate_v2"
                          : !strcmp(v, "v3") ? "cuCtxCreate_v3"
                          : !strcmp(v, "v4") ? "cuCtxCreate_v4"
                                             : NULL;
            if (!create_name)
                app_die("--create takes v2, v3 or v4");
        } else {
            app_die("usage: app_contexts --own N [--create v2|v3|v4] [--keep] | --shared N");
        }
    }
    if (n == 0 || n > 256)
        app_die("give --own N or --shared N, N from 1 to 256");

    app_open_cuda(&c);
    create_fn = app_sym(c.lib, create_name);
    mem_alloc = (PFN_cuMemAlloc_v3020)app_sym(c.lib, "cuMemAlloc_v2");
    mem_free = (PFN_cuMemFree_v3020)app_sym(c.lib, "cuMemFree_v2");
    mem_info = (PFN_cuMemGetInfo_v3020)app_sym(c.lib, "cuMemGetInfo_v2");
    ctx_destroy = (PFN_cuCtxDestroy_v4000)app_sym(c.lib, "cuCtxDestroy_v2");
    retain = (PFN_cuDevicePrimaryCtxRetain_v7000)app_sym(c.lib, "cuDevicePrimaryCtxRetain");
    release = (PFN_cuDevicePrimaryCtxRelease_v11000)app_sym(c.lib, "cuDevicePrimaryCtxRelease_v2");
    set_current = (PFN_cuCtxSetCurrent_v4000)app_sym(c.lib, "cuCtxSetCurrent");
    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));

    /* The main thread's own context, to read free memory in. */
    CUcontext mine = NULL;
    if (own) {
        APP_CHECK(&c, create(&mine));
    } else {
        APP_CHECK(&c, retain(&mine, 0));
        APP_CHECK(&c, set_current(mine));
    }
    size_t total = 0, before = 0, live = 0, after = 0;
    APP_CHECK(&c, mem_info(&before, &total));

    pthread_t *tid = calloc(n, sizeof *tid);
    int *failed = calloc(n, sizeof *failed);
    if (!tid || !failed)
        app_die("out of host memory");
    pthread_barrier_init(&made, NULL, n + 1);
    pthread_barrier_init(&done, NULL, n + 1);
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&tid[i], NULL, run, &failed[i]) != 0)
            app_die("cannot start thread %u", i);
    pthread_barrier_wait(&made);
    APP_CHECK(&c, mem_info(&live, &total));
    pthread_barrier_wait(&done);
    int failures = 0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        failures += failed[i];
    }
    APP_CHECK(&c, mem_info(&after, &total));
    pthread_barrier_destroy(&made);
    pthread_barrier_destroy(&done);

    printf("{\"app\":\"contexts\",\"mode\":\"%s\",\"create\":\"%s\",\"threads\":%u,\"total\":%zu,"
           "\"free_before\":%zu,\"free_all_live\":%zu,\"free_after\":%zu,"
           "\"per_thread_bytes\":%zu,\"failures\":%d}\n",
           own ? "own" : "shared", own ? create_name : "cuDevicePrimaryCtxRetain", n, total, before,
           live, after, before > live ? (before - live) / n : 0, failures);
    if (own)
        APP_CHECK(&c, ctx_destroy(mine));
    else
        APP_CHECK(&c, release(0));
    free(tid);
    free(failed);
    return failures ? 1 : 0;
}
