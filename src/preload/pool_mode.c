/* src/preload/pool_mode.c - pool mode: the program's cuMemAlloc and
 * cuMemFree (and so the runtime's cudaMalloc and cudaFree) served from one
 * vramkit pool on the vmm backend of device 0, made at the first request;
 * its statistics are in the report. vramkit's own calls into the driver
 * go past the hooks (they come from libvramkit-core). */
#include <pthread.h>
#include <stdio.h>

#include "preload_internal.h"
#include "vramkit.h"

static int pool_on;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static vram_device *dev;
static vram_backend *backend;
static vram_pool *pool;
static int made_rc;

void vram__pl_pool_enable(void) { pool_on = 1; }
int vram__pl_pool_mode(void) { return pool_on; }

static void make(void)
{
    vram_backend_opts bo;
    vram_backend_opts_init(&bo);
    made_rc = vram_device_open(0, NULL, &dev);
    if (!made_rc) {
        bo.device = dev;
        made_rc = vram_backend_create("vmm", &bo, &backend);
    }
    if (!made_rc) {
        vram_pool_opts po;
        vram_pool_opts_init(&po);
        po.backend = backend;
        po.name = "preload";
        made_rc = vram_pool_create(&po, &pool);
    }
    if (made_rc)
        fprintf(stderr, "vramkit preload: the pool could not be made (%s); cuMemAlloc fails\n",
                vram_last_error());
}

int vram__pl_pool_alloc(uint64_t size, uint64_t *ptr)
{
    pthread_once(&once, make);
    if (made_rc)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    void *p = NULL;
    int rc = vram_pool_alloc(pool, size ? size : 1, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL, &p);
    if (rc)
        return 2;
    *ptr = (uint64_t)(uintptr_t)p;
    return 0;
}

int vram__pl_pool_free(uint64_t ptr)
{
    if (!pool)
        return 0;
    vram_block_info bi;
    if (vram_pool_block_info(pool, (void *)(uintptr_t)ptr, &bi))
        return 0;
    vram_pool_free(pool, (void *)(uintptr_t)ptr, NULL);
    return 1;
}

void vram__pl_pool_report(char *buf, size_t cap)
{
    buf[0] = 0;
    vram_pool_stats st;
    if (pool && vram_pool_stats_get(pool, &st) == 0)
        snprintf(buf, cap,
                 "pool: live %llu bytes (peak %llu), reserved %llu (peak %llu), %llu allocations, "
                 "%llu refused",
                 (unsigned long long)st.live_bytes, (unsigned long long)st.peak_live_bytes,
                 (unsigned long long)st.reserved_bytes, (unsigned long long)st.peak_reserved_bytes,
                 (unsigned long long)st.allocs_total, (unsigned long long)st.failed_allocs_total);
}

void vram__pl_pool_fini(void)
{
    /* The program may still hold blocks at exit: the pool is left to the
     * process's end rather than destroyed under them. */
}
