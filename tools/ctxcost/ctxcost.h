/* tools/ctxcost/ctxcost.h - what CUDA contexts cost in device memory, measured on
 * the GPU the process runs on (`vramkit ctxcost`).
 *
 * Three measurements, each a difference of device-wide used memory read just
 * before and while the contexts exist:
 *   - N threads each creating their own context (cuCtxCreate), all alive at
 *     once: the cost of "one context per worker thread";
 *   - N threads sharing the device's primary context (vram_device_open and
 *     vram_device_bind), each with one stream of the device's stream pool
 *     doing a little work: the cost of "one context, a stream per worker";
 *   - one context at each of several stack limits (CU_LIMIT_STACK_SIZE), the
 *     knob that sets most of a context's footprint.
 * Used memory comes from NVML, which needs no context of its own. Without
 * NVML it comes from cuMemGetInfo in a probe context created first (its own
 * cost is then part of every baseline, so differences stay right), and the
 * result says so.
 *
 * The measurement creates and destroys contexts and sets the stack limit of
 * the contexts it creates; it never changes a context that existed before it
 * started, and restores the calling thread's current context. The shared
 * measurement needs a primary context it creates itself: if the process
 * already holds the primary context of the device (vram_device_open, the CUDA
 * runtime), that part is skipped and the result says why. Other processes
 * using the GPU at the same time change device-wide used memory; the result
 * counts them and says so. */
#ifndef VRAM_TOOLS_CTXCOST_H
#define VRAM_TOOLS_CTXCOST_H

#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VRAM_CTXCOST_DEFAULT_THREADS 18u
#define VRAM_CTXCOST_MAX_THREADS 1024u
#define VRAM_CTXCOST_MAX_STACKS 16u
/* The stack limits measured when the options name none, in bytes. */
#define VRAM_CTXCOST_DEFAULT_STACKS {0, 256, 1024, 2048, 4096}

/* Options; all-zero means the defaults: device 0, 18 threads, the stack
 * limits of VRAM_CTXCOST_DEFAULT_STACKS. */
typedef struct vram_ctxcost_opts {
    int device;       /* CUDA device ordinal */
    unsigned threads; /* 0: VRAM_CTXCOST_DEFAULT_THREADS */
    unsigned n_stacks; /* 0: the default list */
    uint64_t stacks[VRAM_CTXCOST_MAX_STACKS]; /* CU_LIMIT_STACK_SIZE values, bytes */
} vram_ctxcost_opts;

/* Where used memory was read. */
typedef enum vram_ctxcost_source {
    VRAM_CTXCOST_NVML = 0, /* nvmlDeviceGetMemoryInfo: device-wide, no context needed */
    VRAM_CTXCOST_CUDA = 1, /* cuMemGetInfo in a probe context (NVML missing) */
} vram_ctxcost_source;

/* One context at one stack limit. */
typedef struct vram_ctxcost_stack {
    uint64_t requested; /* the value given to cuCtxSetLimit */
    uint64_t effective; /* what cuCtxGetLimit read back */
    int64_t bytes;      /* device memory the context took */
} vram_ctxcost_stack;

/* Every figure is a difference of used memory in bytes (signed: noise or
 * another process can make a small one negative). */
typedef struct vram_ctxcost_result {
    int device;
    char name[96];
    char pci_bus_id[32];
    int driver_version;   /* e.g. 13000 */
    uint64_t total_bytes; /* device memory */
    vram_ctxcost_source source;
    uint64_t baseline_used_bytes; /* device-wide used before the first context */
    int other_processes; /* with a context on the GPU at the start; -1: unknown (no NVML list) */
    unsigned threads;

    /* One cuCtxCreate context, no cuCtxSetLimit: the driver's default. */
    uint64_t default_stack; /* its CU_LIMIT_STACK_SIZE (1024 on an H200) */
    int64_t one_context_bytes;

    /* N threads, a context each, all alive. */
    int64_t own_total_bytes;
    int64_t own_per_context_bytes; /* own_total_bytes / threads */

    /* N threads sharing the primary context, set to default_stack so the
     * comparison is like for like. Valid only where shared_measured. */
    int shared_measured;
    int64_t shared_context_bytes; /* the primary context alone */
    int64_t shared_total_bytes;   /* with N streams that ran work (a memset each; the
                                   * buffer they write is measured apart, left out) */
    int64_t per_stream_bytes;     /* (shared_total - shared_context) / threads */

    unsigned n_stacks;
    vram_ctxcost_stack stacks[VRAM_CTXCOST_MAX_STACKS];

    /* Sentences about the figures, one a line: the fallback to cuMemGetInfo,
     * a skipped part, other processes, unsettled readings. */
    char notes[768];
} vram_ctxcost_result;

/* Measure on the GPU (opts may be NULL for the defaults). *out is the
 * caller's; it is complete only when 0 is returned. Every context created
 * is destroyed on every path, and the calling thread's current context is
 * restored. VRAM_ENOSYS without a CUDA driver or device (the sentence says
 * which), VRAM_EINVAL for bad options or a device index out of range,
 * VRAM_ENOMEM if the contexts do not fit, VRAM_EBACKEND for another failed
 * driver or NVML call, VRAM_EHOSTMEM when threads cannot be started. Takes a
 * few seconds; run it where nothing else is starting on the GPU. */
int vram_ctxcost_measure(const vram_ctxcost_opts *opts, vram_ctxcost_result *out);

/* Print a result: a table and one recommendation line, or with
 * VRAM_PRINT_JSON one JSON object (bytes as integers) and a newline.
 * Returns 0 or the writer's error (VRAM_ENOSYS in builds without CUDA,
 * which have no result). */
int vram_ctxcost_print(const vram_ctxcost_result *r, vram_write_fn write, void *ctx,
                       unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
