/* vramkit/backend.h - where a pool's bytes come from.
 *
 * A backend is a small table of functions returning error codes (in the manner
 * of jemalloc's extent hooks). It offers one or both of two styles:
 *  - segments: alloc/free whole address ranges (cuMemAlloc-like);
 *  - reserve-then-map: reserve a virtual range once, then back parts of it
 *    with physical memory at a granularity (cuMemCreate/cuMemMap-like).
 * Events are optional: a backend without them (sim, host) lets the pool model
 * event completion itself (see vramkit/pool.h).
 *
 * Built in: "sim" (a simulated device: addresses and a capacity, no bytes),
 * "host" (ordinary memory: mmap'd segments, or an mmap'd range mapped with
 * mprotect), and on a GPU "cuda" (segments from cuMemAlloc), "cuda_async"
 * (segments from cuMemAllocFromPoolAsync on a driver pool of vramkit's own,
 * release threshold VRAM_ASYNC_RELEASE) and "vmm" (cuMemAddressReserve, then
 * cuMemCreate + cuMemMap + cuMemSetAccess per chunk). The GPU backends have
 * real events. As with the driver, a mapping can only be unmapped whole: an
 * unmap must cover whole mappings (sim and host check this too). A
 * fault-injecting wrapper makes chosen calls fail, for tests. */
#ifndef VRAMKIT_BACKEND_H
#define VRAMKIT_BACKEND_H

#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_backend vram_backend;

/* Capabilities (vram_backend_ops.caps). */
#define VRAM_BACKEND_SEGMENTS 0x1u /* segment_alloc / segment_free */
#define VRAM_BACKEND_MAP 0x2u      /* reserve / release / map / unmap */
#define VRAM_BACKEND_EVENTS 0x4u   /* event_* are real */

typedef struct vram_backend_ops {
    const char *name;
    unsigned caps;
    /* Segments. segment_alloc returns VRAM_ENOMEM when the device is full. */
    int (*segment_alloc)(void *self, uint64_t size, vram_stream stream, uint64_t *addr);
    int (*segment_free)(void *self, uint64_t addr, uint64_t size, vram_stream stream);
    /* Reserve-then-map. Sizes and addresses are multiples of granularity. */
    int (*reserve)(void *self, uint64_t size, uint64_t *addr);
    int (*release)(void *self, uint64_t addr, uint64_t size);
    int (*map)(void *self, uint64_t addr, uint64_t size);
    int (*unmap)(void *self, uint64_t addr, uint64_t size);
    /* Device memory: what is free and the total, as the backend sees them. */
    int (*mem_info)(void *self, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Events (VRAM_BACKEND_EVENTS): record on a stream, query (1 complete,
     * 0 pending, <0 error), wait, and give back. */
    int (*event_record)(void *self, vram_stream stream, void **event);
    int (*event_query)(void *self, void *event);
    int (*event_wait)(void *self, void *event);
    void (*event_release)(void *self, void *event);
    /* Called once by vram_backend_destroy(). */
    void (*destroy)(void *self);
} vram_backend_ops;

typedef struct vram_device vram_device;

typedef struct vram_backend_opts {
    uint64_t capacity;    /* sim, host: bytes the device can hand out; 0: VRAM_CAPACITY */
    uint64_t granularity; /* mapping unit; 0: VRAM_GRANULARITY (GPU: a multiple of the
                             device's granularity, which is also the least) */
    vram_device *device;  /* cuda, cuda_async, vmm: the GPU; NULL opens device
                             VRAM_DEVICE for the backend's lifetime */
} vram_backend_opts;

/* Counters every backend keeps (the wrapper counts, not the implementation). */
typedef struct vram_backend_stats {
    uint64_t calls;        /* every call of the table above but events */
    uint64_t failed_calls;
    uint64_t held_bytes;   /* segments plus mapped bytes held now */
    uint64_t peak_held_bytes;
    uint64_t capacity;
    uint64_t granularity;
} vram_backend_stats;

/* Create a built-in backend by name; opts may be NULL. VRAM_EINVAL for an
 * unknown name or bad options, VRAM_ENOSYS for a GPU backend where there is
 * no GPU or the library was built without CUDA. */
int vram_backend_create(const char *name, const vram_backend_opts *opts, vram_backend **out);

/* Wrap a caller's table. `self` is passed to every function; `capacity` and
 * `granularity` are reported by vram_backend_stats_get() and used by pools. */
int vram_backend_create_custom(const vram_backend_ops *ops, void *self, uint64_t capacity,
                               uint64_t granularity, vram_backend **out);

/* Fault injection for tests: a backend that forwards to `inner` but fails
 * calls number `fail_from` .. `fail_from + fail_count - 1` (counting from 1,
 * over every call but events) with VRAM_ENOMEM for acquiring calls
 * (segment_alloc, reserve, map) and VRAM_EBACKEND for releasing ones. `inner`
 * must outlive the wrapper. Calls reach `inner`'s functions directly, so the
 * counters of vram_backend_stats_get() are the wrapper's, not `inner`'s. */
int vram_backend_create_faulty(vram_backend *inner, uint64_t fail_from, uint64_t fail_count,
                               vram_backend **out);

/* Whether `name` is one of the GPU backends (cuda, cuda_async, vmm). */
int vram_backend_is_gpu(const char *name);

/* Destroy; VRAM_EBUSY while a pool still uses the backend. */
int vram_backend_destroy(vram_backend *backend);

const char *vram_backend_name(const vram_backend *backend);
unsigned vram_backend_caps(const vram_backend *backend);
void vram_backend_stats_get(const vram_backend *backend, vram_backend_stats *out);

#ifdef __cplusplus
}
#endif
#endif
