/* vramkit/device.h - one GPU, one context, many threads.
 *
 * vram_device_open() retains the device's primary context once per process
 * (opening the same index again hands back the same device, counted), sets
 * its stack limit, and from then on every worker thread calls
 * vram_device_bind() to make that context current instead of creating its
 * own: one context costs hundreds of MiB (see `vramkit ctxcost`). Workers
 * take their CUDA streams from the device's stream pool, by priority.
 *
 * The CUDA driver is loaded at run time: on a machine without one (or in a
 * build without the CUDA toolkit), every function here that returns a
 * code, but vram_device_opts_init and vram_cuda_fail, returns VRAM_ENOSYS
 * with the reason (vram_device_close(NULL) still returns 0).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code; a failed driver call
 * is VRAM_EBACKEND (VRAM_ENOMEM for CUDA_ERROR_OUT_OF_MEMORY) naming the
 * call and the driver's error. A vram_device is the library's, shared by
 * every opener of its index: each successful vram_device_open is undone by
 * one vram_device_close, and the last close frees it, so the handle must
 * not be used after one's own close. A backend on the device (and so a pool
 * on that backend) and every acquired stream must go before the last
 * close, which refuses while they live. Every function is thread-safe but
 * the last close, which must not race other calls on the device. */
#ifndef VRAMKIT_DEVICE_H
#define VRAMKIT_DEVICE_H

#include "vramkit/api.h"

#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_device vram_device;

typedef enum vram_priority {
    VRAM_PRIORITY_LOW = 0,
    VRAM_PRIORITY_NORMAL = 1,
    VRAM_PRIORITY_HIGH = 2,
} vram_priority;

typedef struct vram_device_opts {
    uint32_t size; /* sizeof(vram_device_opts), which vram_device_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    /* Per-thread stack of the context (CU_LIMIT_STACK_SIZE) in bytes; -1 takes
     * the option VRAM_STACK_LIMIT. Applied by the first open only. */
    int64_t stack_limit;
} vram_device_opts;

typedef struct vram_device_info {
    int index;
    char name[96];
    char pci_bus_id[32];
    int cc_major, cc_minor;
    int multiprocessors;
    int driver_version;          /* e.g. 13000 */
    uint64_t total_bytes;        /* device memory */
    uint64_t free_bytes;         /* free now, as the driver sees it */
    uint64_t granularity;        /* minimum granularity of cuMemCreate */
    uint64_t stack_limit;        /* CU_LIMIT_STACK_SIZE now (the driver may raise it) */
    int priority_greatest, priority_least; /* the device's stream priority range */
    unsigned streams_created;    /* by the stream pool, ever */
    unsigned streams_in_use;
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_device_info;

/* Defaults: stack_limit VRAM_STACK_LIMIT. Returns 0 or VRAM_EINVAL when the
 * variable is malformed (its default is kept) or opts is NULL. Works in
 * every build. */
VRAM_API int vram_device_opts_init(vram_device_opts *opts);

/* How many CUDA devices there are. VRAM_EINVAL for a NULL count; else
 * *count is 0 on error: VRAM_ENOSYS without a driver, VRAM_EBACKEND. */
VRAM_API int vram_device_count(int *count);

/* Open device `index` (opts may be NULL). The first open retains the primary
 * context and applies the options; later opens return the same device and
 * count (their options are ignored). VRAM_EINVAL for a NULL out, an index
 * out of range or a bad opts.size, VRAM_ENOSYS without a driver,
 * VRAM_EBACKEND when retaining or setting up the context fails (nothing is
 * kept then), VRAM_EHOSTMEM; *out is NULL on error. */
VRAM_API int vram_device_open(int index, const vram_device_opts *opts, vram_device **out);

/* Undo one open. The last close returns VRAM_EBUSY, and closes nothing, while
 * a backend (and so a pool) still uses the device or a stream is still
 * acquired; otherwise it destroys the device's streams, releases the
 * primary context and frees the device (an error releasing the context is
 * VRAM_EBACKEND, and the device is freed all the same). NULL is accepted. */
VRAM_API int vram_device_close(vram_device *dev);

/* Make the shared context current in the calling thread (cheap when it
 * already is). Worker threads call this once before any CUDA work.
 * VRAM_EINVAL for NULL, VRAM_EBACKEND if the driver refuses. */
VRAM_API int vram_device_bind(vram_device *dev);

/* Describe the device (the free bytes and stack limit are read now) into
 * *out, the caller's. VRAM_EINVAL for NULL arguments, VRAM_EBACKEND naming
 * the driver call that failed; *out is then zeroed or partly filled and
 * says nothing. */
VRAM_API int vram_device_info_get(vram_device *dev, vram_device_info *out);

/* Take a stream of the given priority from the device's pool (created on
 * first need, non-blocking with respect to the legacy default stream), and
 * give it back. The stream stays the device's: release it, never destroy
 * it; it is destroyed by the last vram_device_close, which refuses while a
 * stream is acquired. Acquire: VRAM_EINVAL for NULL arguments or an
 * unknown priority, VRAM_EBACKEND or VRAM_EHOSTMEM (*out not set then).
 * Releasing a stream the pool did not hand out, or twice, is VRAM_EINVAL. */
VRAM_API int vram_device_stream_acquire(vram_device *dev, vram_priority priority, vram_stream *out);
VRAM_API int vram_device_stream_release(vram_device *dev, vram_stream stream);

/* Device memory as the driver sees it now (cuMemGetInfo): free and total
 * bytes. Cheap enough to sample, unlike vram_device_info_get(). VRAM_EINVAL
 * for a NULL argument, VRAM_EBACKEND; neither output is set on error. */
VRAM_API int vram_device_memory(vram_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);

/* Wait for all work on the device (cuCtxSynchronize). VRAM_EINVAL for NULL;
 * VRAM_EBACKEND carries an error of earlier asynchronous work too. */
VRAM_API int vram_device_synchronize(vram_device *dev);

/* The shared context (a CUcontext), for code that calls CUDA itself;
 * borrowed: valid until the device's last close, never to be destroyed or
 * released by the caller. NULL for a NULL device or without a GPU. */
VRAM_API void *vram_device_context(vram_device *dev);

/* How many CUDA contexts vramkit holds now (primary contexts retained by
 * vram_device_open and not yet released); 0 without a GPU. */
VRAM_API unsigned vram_device_contexts(void);

/* The CUDA driver's entry point `symbol` ("cuMemcpyHtoDAsync", the name
 * cuGetProcAddress takes) at the ABI of CUDA version `cuda_version`, from
 * the driver vramkit opens (once per process, on first use, and never
 * closes: the pointer stays valid for the process): for code that calls the
 * driver without linking libcuda (vramkit/cuda_table.h fills a typed
 * table). VRAM_EINVAL for a NULL symbol or fn; VRAM_ENOSYS with the reason
 * when there is no usable driver or it lacks the entry point; *fn is NULL
 * then. Thread-safe. */
VRAM_API int vram_cuda_proc(const char *symbol, int cuda_version, void **fn);

/* Record a failed driver call (a CUresult) as this thread's last error,
 * "<what> failed: CUDA_ERROR_X (text)" with `what` formatted (at most 191
 * bytes of it), and return its vramkit code: VRAM_ENOMEM for
 * CUDA_ERROR_OUT_OF_MEMORY, else VRAM_EBACKEND. Works in every build. */
VRAM_API int vram_cuda_fail(int cuda_result, const char *what, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
