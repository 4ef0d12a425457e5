/* src/core/gpu/backend_gpu.c - construction of the GPU backends and the parts
 * they share: the device (opened here when the caller gave none), events
 * from the device's pool, and cuMemGetInfo as the view of free memory. */
#include <stdlib.h>
#include <string.h>

#include "backend_gpu.h"
#include "vramkit/config.h"

int vram__gpu_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    size_t f = 0, t = 0;
    VRAM__CU_TRY(vram__cu.cuMemGetInfo(&f, &t), "cuMemGetInfo");
    *free_bytes = f;
    *total = t;
    return 0;
}

int vram__gpu_event_record(void *self, vram_stream stream, void **event)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUevent ev;
    rc = vram__device_event_get(g->dev, &ev);
    if (rc)
        return rc;
    CUresult r = vram__cu.cuEventRecord(ev, (CUstream)stream);
    if (r != CUDA_SUCCESS) {
        vram__device_event_put(g->dev, ev);
        return vram_cuda_fail(r, "recording an event on stream %p", stream);
    }
    *event = ev;
    return 0;
}

int vram__gpu_event_query(void *self, void *event)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUresult r = vram__cu.cuEventQuery((CUevent)event);
    if (r == CUDA_SUCCESS)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    return vram_cuda_fail(r, "cuEventQuery");
}

int vram__gpu_event_wait(void *self, void *event)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    VRAM__CU_TRY(vram__cu.cuEventSynchronize((CUevent)event), "cuEventSynchronize");
    return 0;
}

/* The wait is the device's: the host goes on. The event may be recorded
 * again (or go back to the device's pool) at once; the stream waits for the
 * record it had when the wait was queued. */
int vram__gpu_stream_wait_event(void *self, vram_stream stream, void *event)
{
    vram__gpu_backend *g = self;
    int rc = vram__device_enter(g->dev);
    if (rc)
        return rc;
    CUresult r = vram__cu.cuStreamWaitEvent((CUstream)stream, (CUevent)event, 0);
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "making stream %p wait for an event", stream);
    return 0;
}

void vram__gpu_event_release(void *self, void *event)
{
    vram__gpu_backend *g = self;
    vram__device_event_put(g->dev, (CUevent)event);
}

void vram__gpu_backend_free(vram__gpu_backend *g)
{
    vram__u64map_destroy(&g->handles);
    vram__u64map_destroy(&g->sizes);
    pthread_mutex_destroy(&g->maps_lock);
    vram__device_user_remove(g->dev);
    if (g->owns_dev)
        vram_device_close(g->dev);
    free(g);
}

int vram__backend_gpu_new(vram_backend_type type, const vram_backend_opts *opts,
                          const vram_backend_ops **ops, void **self, vram_device **device,
                          uint64_t *capacity, uint64_t *granularity)
{
    const char *name = vram_backend_type_name(type);
    vram__gpu_backend *g = vram__calloc(1, sizeof *g);
    if (!g)
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&g->maps_lock, NULL);
    int rc = 0;
    if (opts && opts->device) {
        g->dev = opts->device;
    } else {
        rc = vram_device_open((int)vram_config_get()->device, NULL, &g->dev);
        if (rc) {
            pthread_mutex_destroy(&g->maps_lock);
            free(g);
            return vram__fail_prefix(rc, "backend %s: ", name);
        }
        g->owns_dev = 1;
    }
    vram__device_user_add(g->dev);
    if (vram__u64map_init(&g->handles, 64) || vram__u64map_init(&g->sizes, 64)) {
        vram__gpu_backend_free(g);
        return VRAM_EHOSTMEM;
    }
    vram_device_info info;
    rc = vram_device_info_get(g->dev, &info);
    if (rc) {
        vram__gpu_backend_free(g);
        return rc;
    }
    uint64_t want = opts && opts->granularity ? opts->granularity : vram_config_get()->granularity;
    g->granularity = want < info.granularity ? info.granularity : want;
    if (g->granularity % info.granularity) {
        vram__gpu_backend_free(g);
        return vram__fail(VRAM_EINVAL,
                          "backend %s: granularity %llu is not a multiple of the device's %llu",
                          name, (unsigned long long)want, (unsigned long long)info.granularity);
    }
    if (type == VRAM_BACKEND_TYPE_CUDA)
        rc = vram__gpu_cuda_init(g, ops);
    else if (type == VRAM_BACKEND_TYPE_CUDA_ASYNC)
        rc = vram__gpu_async_init(g, ops);
    else
        rc = vram__gpu_vmm_init(g, ops);
    if (rc) {
        vram__gpu_backend_free(g);
        return rc;
    }
    *self = g;
    *device = g->dev;
    *capacity = info.total_bytes;
    *granularity = g->granularity;
    return 0;
}
