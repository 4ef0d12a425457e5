/* src/core/gpu/backend_gpu.h - what the three GPU backends (cuda, cuda_async,
 * vmm) share: the device they draw from, events from its pool, the driver's
 * view of free memory, and one constructor that picks the variant. */
#ifndef VRAM_GPU_BACKEND_GPU_H
#define VRAM_GPU_BACKEND_GPU_H

#include "backend/backend_internal.h"
#include <pthread.h>

#include "base/u64map.h"
#include "device_internal.h"

typedef struct vram__gpu_backend {
    vram_device *dev;
    int owns_dev;     /* opened for this backend (opts->device was NULL) */
    uint64_t granularity;
    /* cuda_async */
    CUmemoryPool mempool;
    /* vmm: mapping base -> physical handle; sizes in `sizes`. Pools sharing
     * the backend call it each under its own lock, so the maps have theirs. */
    pthread_mutex_t maps_lock;
    vram__u64map handles;
    vram__u64map sizes;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
} vram__gpu_backend;

/* The table entries every GPU backend shares. */
#define VRAM__GPU_SHARED_OPS                                                                  \
    .mem_info = vram__gpu_mem_info, .event_record = vram__gpu_event_record,                   \
    .event_query = vram__gpu_event_query, .event_wait = vram__gpu_event_wait,                 \
    .event_release = vram__gpu_event_release, .stream_wait_event = vram__gpu_stream_wait_event

/* Shared table entries. */
int vram__gpu_mem_info(void *self, uint64_t *free_bytes, uint64_t *total);
int vram__gpu_event_record(void *self, vram_stream stream, void **event);
int vram__gpu_event_query(void *self, void *event);
int vram__gpu_event_wait(void *self, void *event);
void vram__gpu_event_release(void *self, void *event);
int vram__gpu_stream_wait_event(void *self, vram_stream stream, void *event);
void vram__gpu_backend_free(vram__gpu_backend *g);

/* The variants: finish setting up `g` (device bound) and name their table. */
int vram__gpu_cuda_init(vram__gpu_backend *g, const vram_backend_ops **ops);
int vram__gpu_async_init(vram__gpu_backend *g, const vram_backend_ops **ops);
int vram__gpu_vmm_init(vram__gpu_backend *g, const vram_backend_ops **ops);

#endif
