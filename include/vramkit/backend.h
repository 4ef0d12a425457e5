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
 * Built in: "sim" (a simulated device: addresses and a capacity, no bytes;
 * events only on request, see VRAM_SIM_EVENTS_DONE),
 * "host" (ordinary memory: mmap'd segments, or an mmap'd range mapped with
 * mprotect), and on a GPU "cuda" (segments from cuMemAlloc), "cuda_async"
 * (segments from cuMemAllocFromPoolAsync on a driver pool of vramkit's own,
 * release threshold VRAM_ASYNC_RELEASE) and "vmm" (cuMemAddressReserve, then
 * cuMemCreate + cuMemMap + cuMemSetAccess per chunk). The GPU backends have
 * real events. As with the driver, a mapping can only be unmapped whole: an
 * unmap must cover whole mappings (sim and host check this too).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(); *out is NULL on error. The caller destroys a backend
 * with vram_backend_destroy(), after every pool using it (it refuses with
 * VRAM_EBUSY before). A pool calls its backend's table from the threads
 * calling the pool and from its decay thread, and the vmm policy maps and
 * unmaps with the pool's lock released: a table is called concurrently
 * (never twice on the same range), so it must be thread-safe and must not
 * call the pool. Every built-in one is (vmm keeps its table of mappings
 * under a lock of its own). */
#ifndef VRAMKIT_BACKEND_H
#define VRAMKIT_BACKEND_H

#include "vramkit/api.h"

#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_backend vram_backend;

/* What a backend is, set when it is made (a custom table is CUSTOM whatever
 * its name). X(NAME, name, gpu) */
#define VRAM_BACKEND_TYPES(X)                                                  \
    X(SIM, sim, 0)                                                             \
    X(HOST, host, 0)                                                           \
    X(CUDA, cuda, 1)                                                           \
    X(CUDA_ASYNC, cuda_async, 1)                                               \
    X(VMM, vmm, 1)                                                             \
    X(CUSTOM, custom, 0)

typedef enum vram_backend_type {
#define VRAM_BACKEND_TYPE_ENUM(NAME, name, gpu) VRAM_BACKEND_TYPE_##NAME,
    VRAM_BACKEND_TYPES(VRAM_BACKEND_TYPE_ENUM)
#undef VRAM_BACKEND_TYPE_ENUM
    VRAM_BACKEND_TYPE_COUNT
} vram_backend_type;

/* Capabilities (vram_backend_ops.caps). */
#define VRAM_BACKEND_SEGMENTS 0x1u /* segment_alloc / segment_free */
#define VRAM_BACKEND_MAP 0x2u      /* reserve / release / map / unmap */
#define VRAM_BACKEND_EVENTS 0x4u   /* event_* are real */

typedef struct vram_backend_ops {
    uint32_t size; /* sizeof(vram_backend_ops), set by the caller; 0 reads as this
                      version. The library reads no further than it says. */
    const char *name; /* not copied: must outlive the backend */
    unsigned caps;
    /* Every function returns 0 or a negative VRAM_E* code and may set the
     * sentence with vram_set_error() (the library writes one naming the call
     * when it does not). Segments. segment_alloc returns VRAM_ENOMEM when
     * the device is full. */
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
    /* Called once by vram_backend_destroy() (may be NULL): release self. */
    void (*destroy)(void *self);
    /* Events, optional: make `stream` wait on the device for `event` (one
     * event_record returned, not yet released) without the host waiting, as
     * cuStreamWaitEvent does. With it a pool hands a block freed on one
     * stream to another at once, the taker's later work ordered after the
     * freer's (vram_pool_opts.stream_waits); NULL: only once the event has
     * completed. */
    int (*stream_wait_event)(void *self, vram_stream stream, void *event);
} vram_backend_ops;

typedef struct vram_device vram_device;

typedef struct vram_backend_opts {
    uint32_t size; /* sizeof(vram_backend_opts), which vram_backend_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    uint64_t capacity;    /* sim, host: bytes the device can hand out; 0: VRAM_CAPACITY */
    uint64_t granularity; /* mapping unit; 0: VRAM_GRANULARITY (GPU: a multiple of the
                             device's granularity, which is also the least) */
    vram_device *device;  /* cuda, cuda_async, vmm: the GPU (borrowed: it must
                             outlive the backend, and its last close refuses
                             while the backend lives); NULL opens device
                             VRAM_DEVICE for the backend's lifetime */
    int sim_events;       /* sim: VRAM_SIM_EVENTS_* (0: VRAM_SIM_EVENTS) */
} vram_backend_opts;

/* Events of the sim backend (vram_backend_opts.sim_events). NONE: it has
 * none, and a pool models their completion (a free is complete once its
 * stream's next operation reaches the pool). DONE: real events that are
 * complete as soon as they are recorded, and device waits that succeed: a
 * GPU with no work queued, as in a trace replay on one, so that a replay on
 * the sim predicts what the pool's event paths do there. */
#define VRAM_SIM_EVENTS_CONFIG 0
#define VRAM_SIM_EVENTS_NONE 1
#define VRAM_SIM_EVENTS_DONE 2

/* Counters every backend keeps (the wrapper counts, not the implementation). */
typedef struct vram_backend_stats {
    uint64_t calls;        /* every call of the table above but events */
    uint64_t failed_calls;
    uint64_t held_bytes;   /* segments plus mapped bytes held now */
    uint64_t peak_held_bytes;
    uint64_t capacity;
    uint64_t granularity;
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_backend_stats;

/* Defaults: capacity VRAM_CAPACITY, granularity VRAM_GRANULARITY, device
 * NULL, sim_events VRAM_SIM_EVENTS. Returns 0 or VRAM_EINVAL when a variable is malformed (its default
 * is kept) or opts is NULL. */
VRAM_API int vram_backend_opts_init(vram_backend_opts *opts);

/* Create a built-in backend by its type's name ("sim", "host", "cuda",
 * "cuda_async", "vmm"; NULL: the one VRAM_BACKEND names, "sim" by default);
 * opts may be NULL. VRAM_EINVAL for an unknown name or bad options (a
 * granularity that is no power of two of at least 4 KiB, or a capacity
 * below it), VRAM_ENOSYS for a GPU backend where there is no GPU or the
 * library was built without CUDA, VRAM_EBACKEND or VRAM_ENOMEM when the
 * driver refuses, VRAM_EHOSTMEM. Nothing is kept on error (a device opened
 * for it is closed again). */
VRAM_API int vram_backend_create(const char *name, const vram_backend_opts *opts, vram_backend **out);

/* Wrap a caller's table. `self` is passed to every function; `capacity` and
 * `granularity` are reported by vram_backend_stats_get() and used by pools.
 * The table is copied (as far as its size says; `name` is not); `self` is
 * the caller's until vram_backend_destroy() hands it to ops->destroy.
 * VRAM_EINVAL for a NULL ops or out, a bad size, or a capability without
 * its functions (nothing is called then). VRAM_EHOSTMEM: ops->destroy(self)
 * has been called already. *out is NULL on error. */
VRAM_API int vram_backend_create_custom(const vram_backend_ops *ops, void *self, uint64_t capacity,
                               uint64_t granularity, vram_backend **out);

/* The name of a type ("vmm"; "?" for none), and the type of a name
 * (VRAM_EINVAL, naming the built-in ones, for another). */
VRAM_API const char *vram_backend_type_name(vram_backend_type type);
VRAM_API int vram_backend_type_parse(const char *name, vram_backend_type *out);
/* Whether a type hands out GPU memory (cuda, cuda_async, vmm). */
VRAM_API int vram_backend_type_is_gpu(vram_backend_type type);

/* A backend's type, and whether it is a GPU one (NULL: CUSTOM, 0). */
VRAM_API vram_backend_type vram_backend_type_of(const vram_backend *backend);
VRAM_API int vram_backend_is_gpu(const vram_backend *backend);

/* The GPU a backend draws from (borrowed: it lives as long as the backend;
 * do not close it), or NULL for a backend that is not a GPU one or NULL. */
VRAM_API vram_device *vram_backend_device(const vram_backend *backend);

/* Destroy: calls ops->destroy, closes a device the backend opened itself,
 * and frees the backend. VRAM_EBUSY (nothing changes) while a pool still
 * uses the backend; NULL is accepted. */
VRAM_API int vram_backend_destroy(vram_backend *backend);

/* The table's name (a built-in backend's is its type's name; a custom
 * one's is the caller's string), its capabilities and its counters (NULL,
 * 0 and zeros for a NULL backend). They read atomics and may run
 * concurrently with the pools' calls. */
VRAM_API const char *vram_backend_name(const vram_backend *backend);
VRAM_API unsigned vram_backend_caps(const vram_backend *backend);
VRAM_API void vram_backend_stats_get(const vram_backend *backend, vram_backend_stats *out);

#ifdef __cplusplus
}
#endif
#endif
