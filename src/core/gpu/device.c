/* src/core/gpu/device.c - the shared context: one vram_device per GPU index and
 * process, holding the retained primary context, its stack limit, the stream
 * pool and the event pool (see vramkit/device.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "device_internal.h"
#include "vramkit/config.h"

#define MAX_DEVICES 64

typedef struct stream_slot {
    CUstream stream;
    int priority; /* vram_priority */
    int in_use;
} stream_slot;

struct vram_device {
    int index;
    int opens;
    int users; /* backends and pools */
    CUdevice handle;
    CUcontext ctx;
    pthread_mutex_t lock; /* streams and events */
    stream_slot *streams;
    size_t n_streams, cap_streams;
    CUevent *events; /* free events */
    size_t n_events, cap_events;
    unsigned events_out;
    int prio_least, prio_greatest;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static vram_device *registry[MAX_DEVICES];

int vram_device_count(int *count)
{
    if (!count)
        return vram__fail(VRAM_EINVAL, "vram_device_count: count is NULL");
    *count = 0;
    int rc = vram__cu_load();
    if (rc)
        return rc;
    int n = 0;
    VRAM__CU_TRY(vram__cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
    *count = n;
    return 0;
}

unsigned vram_device_contexts(void)
{
    unsigned n = 0;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < MAX_DEVICES; i++)
        n += registry[i] != NULL;
    pthread_mutex_unlock(&registry_lock);
    return n;
}

int vram__device_enter(vram_device *dev)
{
    CUcontext cur = NULL;
    if (vram__cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx)
        return 0;
    VRAM__CU_TRY(vram__cu.cuCtxSetCurrent(dev->ctx), "cuCtxSetCurrent (device %d)", dev->index);
    return 0;
}

static int device_setup(vram_device *dev, const vram_device_opts *opts)
{
    VRAM__CU_TRY(vram__cu.cuDeviceGet(&dev->handle, dev->index), "cuDeviceGet(%d)", dev->index);
    VRAM__CU_TRY(vram__cu.cuDevicePrimaryCtxRetain(&dev->ctx, dev->handle),
                 "retaining the primary context of device %d", dev->index);
    /* Set it even if this thread names it current already: a primary context
     * released to nothing and retained again keeps its handle, but a thread
     * still bound to the old one sees it destroyed. */
    VRAM__CU_TRY(vram__cu.cuCtxSetCurrent(dev->ctx), "cuCtxSetCurrent (device %d)", dev->index);
    uint64_t stack = opts && opts->stack_limit >= 0 ? (uint64_t)opts->stack_limit
                                                    : vram_config_get()->stack_limit;
    VRAM__CU_TRY(vram__cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, (size_t)stack),
                 "setting the stack limit of device %d to %llu bytes", dev->index,
                 (unsigned long long)stack);
    VRAM__CU_TRY(vram__cu.cuCtxGetStreamPriorityRange(&dev->prio_least, &dev->prio_greatest),
                 "cuCtxGetStreamPriorityRange");
    return 0;
}

int vram_device_open(int index, const vram_device_opts *opts, vram_device **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_device_open: out is NULL");
    *out = NULL;
    int n = 0, rc = vram_device_count(&n);
    if (rc)
        return rc;
    if (index < 0 || index >= n || index >= MAX_DEVICES)
        return vram__fail(VRAM_EINVAL, "no CUDA device %d: this machine has %d", index, n);
    pthread_mutex_lock(&registry_lock);
    vram_device *dev = registry[index];
    if (dev) {
        dev->opens++;
        pthread_mutex_unlock(&registry_lock);
        *out = dev;
        return 0;
    }
    dev = vram__calloc(1, sizeof *dev);
    if (!dev) {
        pthread_mutex_unlock(&registry_lock);
        return VRAM_EHOSTMEM;
    }
    dev->index = index;
    dev->opens = 1;
    pthread_mutex_init(&dev->lock, NULL);
    vram_device_opts taken = {.size = sizeof taken, .stack_limit = -1};
    rc = opts ? vram__opts_take(&taken, opts, sizeof taken, "vram_device_opts") : 0;
    if (!rc)
        rc = device_setup(dev, &taken);
    if (rc) {
        if (dev->ctx) {
            vram__cu.cuDevicePrimaryCtxRelease(dev->handle);
            CUcontext cur = NULL; /* do not leave this thread on a released context */
            if (vram__cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx)
                vram__cu.cuCtxSetCurrent(NULL);
        }
        pthread_mutex_destroy(&dev->lock);
        free(dev);
        pthread_mutex_unlock(&registry_lock);
        return rc;
    }
    registry[index] = dev;
    pthread_mutex_unlock(&registry_lock);
    vram_log(VRAM_LOG_INFO, "device %d: primary context retained", index);
    *out = dev;
    return 0;
}

int vram_device_close(vram_device *dev)
{
    if (!dev)
        return 0;
    pthread_mutex_lock(&registry_lock);
    if (dev->opens > 1) {
        dev->opens--;
        pthread_mutex_unlock(&registry_lock);
        return 0;
    }
    /* The streams and events change under the device's own lock. */
    unsigned in_use = 0;
    pthread_mutex_lock(&dev->lock);
    for (size_t i = 0; i < dev->n_streams; i++)
        in_use += (unsigned)dev->streams[i].in_use;
    unsigned events_out = dev->events_out;
    pthread_mutex_unlock(&dev->lock);
    if (dev->users || in_use || events_out) {
        pthread_mutex_unlock(&registry_lock);
        return vram__fail(VRAM_EBUSY,
                          "device %d is still in use: %d backend(s) or pool(s), %u stream(s) "
                          "acquired, %u event(s) out",
                          dev->index, dev->users, in_use, events_out);
    }
    registry[dev->index] = NULL;
    pthread_mutex_unlock(&registry_lock);
    vram__device_enter(dev);
    for (size_t i = 0; i < dev->n_streams; i++)
        vram__cu.cuStreamDestroy(dev->streams[i].stream);
    for (size_t i = 0; i < dev->n_events; i++)
        vram__cu.cuEventDestroy(dev->events[i]);
    CUresult r = vram__cu.cuDevicePrimaryCtxRelease(dev->handle);
    CUcontext cur = NULL;
    if (vram__cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx)
        vram__cu.cuCtxSetCurrent(NULL); /* do not leave this thread on a released context */
    int idx = dev->index;
    pthread_mutex_destroy(&dev->lock);
    free(dev->streams);
    free(dev->events);
    free(dev);
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "releasing the primary context of device %d", idx);
    return 0;
}

int vram_device_bind(vram_device *dev)
{
    if (!dev)
        return vram__fail(VRAM_EINVAL, "vram_device_bind: dev is NULL");
    return vram__device_enter(dev);
}

int vram_device_info_get(vram_device *dev, vram_device_info *out)
{
    if (!dev || !out)
        return vram__fail(VRAM_EINVAL, "vram_device_info_get: dev and out are required");
    memset(out, 0, sizeof *out);
    int rc = vram__device_enter(dev);
    if (rc)
        return rc;
    out->index = dev->index;
    VRAM__CU_TRY(vram__cu.cuDeviceGetName(out->name, (int)sizeof out->name, dev->handle),
                 "cuDeviceGetName");
    VRAM__CU_TRY(vram__cu.cuDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id,
                                              dev->handle),
                 "cuDeviceGetPCIBusId");
    VRAM__CU_TRY(vram__cu.cuDeviceGetAttribute(
                     &out->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->handle),
                 "cuDeviceGetAttribute");
    VRAM__CU_TRY(vram__cu.cuDeviceGetAttribute(
                     &out->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev->handle),
                 "cuDeviceGetAttribute");
    VRAM__CU_TRY(vram__cu.cuDeviceGetAttribute(&out->multiprocessors,
                                               CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                               dev->handle),
                 "cuDeviceGetAttribute");
    VRAM__CU_TRY(vram__cu.cuDriverGetVersion(&out->driver_version), "cuDriverGetVersion");
    size_t fr = 0, tot = 0, stack = 0, gran = 0;
    VRAM__CU_TRY(vram__cu.cuMemGetInfo(&fr, &tot), "cuMemGetInfo");
    VRAM__CU_TRY(vram__cu.cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE), "cuCtxGetLimit");
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                             .id = dev->index}};
    VRAM__CU_TRY(vram__cu.cuMemGetAllocationGranularity(&gran, &prop,
                                                        CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 "cuMemGetAllocationGranularity");
    out->free_bytes = fr;
    out->total_bytes = tot;
    out->stack_limit = stack;
    out->granularity = gran;
    out->priority_greatest = dev->prio_greatest;
    out->priority_least = dev->prio_least;
    pthread_mutex_lock(&dev->lock);
    out->streams_created = (unsigned)dev->n_streams;
    for (size_t i = 0; i < dev->n_streams; i++)
        out->streams_in_use += (unsigned)dev->streams[i].in_use;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

/* CUDA priorities: lower numbers are higher; least is the default. */
static int cuda_priority(const vram_device *dev, vram_priority p)
{
    if (p == VRAM_PRIORITY_HIGH)
        return dev->prio_greatest;
    if (p == VRAM_PRIORITY_LOW)
        return dev->prio_least;
    return (dev->prio_least + dev->prio_greatest) / 2;
}

int vram_device_stream_acquire(vram_device *dev, vram_priority priority, vram_stream *out)
{
    if (!dev || !out || priority < VRAM_PRIORITY_LOW || priority > VRAM_PRIORITY_HIGH)
        return vram__fail(VRAM_EINVAL, "vram_device_stream_acquire: bad arguments");
    int rc = vram__device_enter(dev);
    if (rc)
        return rc;
    pthread_mutex_lock(&dev->lock);
    for (size_t i = 0; i < dev->n_streams; i++) {
        stream_slot *s = &dev->streams[i];
        if (!s->in_use && s->priority == (int)priority) {
            s->in_use = 1;
            *out = s->stream;
            pthread_mutex_unlock(&dev->lock);
            return 0;
        }
    }
    stream_slot *grown =
        vram__grow(dev->streams, &dev->cap_streams, dev->n_streams, sizeof *grown, 16);
    if (!grown) {
        pthread_mutex_unlock(&dev->lock);
        return VRAM_EHOSTMEM;
    }
    dev->streams = grown;
    CUstream st;
    CUresult r = vram__cu.cuStreamCreateWithPriority(&st, CU_STREAM_NON_BLOCKING,
                                                     cuda_priority(dev, priority));
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&dev->lock);
        return vram_cuda_fail(r, "creating stream %zu of device %d", dev->n_streams, dev->index);
    }
    dev->streams[dev->n_streams++] = (stream_slot){st, (int)priority, 1};
    pthread_mutex_unlock(&dev->lock);
    *out = st;
    return 0;
}

int vram_device_stream_release(vram_device *dev, vram_stream stream)
{
    if (!dev)
        return vram__fail(VRAM_EINVAL, "vram_device_stream_release: dev is NULL");
    pthread_mutex_lock(&dev->lock);
    for (size_t i = 0; i < dev->n_streams; i++) {
        stream_slot *s = &dev->streams[i];
        if (s->stream != (CUstream)stream)
            continue;
        int was = s->in_use;
        s->in_use = 0;
        pthread_mutex_unlock(&dev->lock);
        if (!was)
            return vram__fail(VRAM_EINVAL, "stream %p of device %d was released twice", stream,
                              dev->index);
        return 0;
    }
    pthread_mutex_unlock(&dev->lock);
    return vram__fail(VRAM_EINVAL, "stream %p was not acquired from device %d", stream,
                      dev->index);
}

int vram_device_memory(vram_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    if (!dev || !free_bytes || !total_bytes)
        return vram__fail(VRAM_EINVAL, "vram_device_memory: dev, free_bytes and total_bytes are "
                                       "required");
    int rc = vram__device_enter(dev);
    if (rc)
        return rc;
    size_t f = 0, t = 0;
    VRAM__CU_TRY(vram__cu.cuMemGetInfo(&f, &t), "cuMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

int vram_device_synchronize(vram_device *dev)
{
    if (!dev)
        return vram__fail(VRAM_EINVAL, "vram_device_synchronize: dev is NULL");
    int rc = vram__device_enter(dev);
    if (rc)
        return rc;
    VRAM__CU_TRY(vram__cu.cuCtxSynchronize(), "synchronizing device %d", dev->index);
    return 0;
}

void *vram_device_context(vram_device *dev) { return dev ? (void *)dev->ctx : NULL; }

CUdevice vram__device_handle(const vram_device *dev) { return dev->handle; }
int vram__device_index(const vram_device *dev) { return dev->index; }

void vram__device_user_add(vram_device *dev)
{
    pthread_mutex_lock(&registry_lock);
    dev->users++;
    pthread_mutex_unlock(&registry_lock);
}

void vram__device_user_remove(vram_device *dev)
{
    pthread_mutex_lock(&registry_lock);
    dev->users--;
    pthread_mutex_unlock(&registry_lock);
}

int vram__device_event_get(vram_device *dev, CUevent *out)
{
    pthread_mutex_lock(&dev->lock);
    if (dev->n_events) {
        *out = dev->events[--dev->n_events];
        dev->events_out++;
        pthread_mutex_unlock(&dev->lock);
        return 0;
    }
    dev->events_out++;
    pthread_mutex_unlock(&dev->lock);
    CUresult r = vram__cu.cuEventCreate(out, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&dev->lock);
        dev->events_out--;
        pthread_mutex_unlock(&dev->lock);
        return vram_cuda_fail(r, "cuEventCreate");
    }
    return 0;
}

void vram__device_event_put(vram_device *dev, CUevent ev)
{
    pthread_mutex_lock(&dev->lock);
    dev->events_out--;
    CUevent *grown = vram__grow(dev->events, &dev->cap_events, dev->n_events, sizeof *grown, 64);
    if (grown) {
        dev->events = grown;
        dev->events[dev->n_events++] = ev;
        pthread_mutex_unlock(&dev->lock);
        return;
    }
    pthread_mutex_unlock(&dev->lock);
    vram__cu.cuEventDestroy(ev);
}
