/* src/core/backend/backend_internal.h - the backend object behind the public
 * handle, and the counted calls the pool makes through it. */
#ifndef VRAM_BACKEND_INTERNAL_H
#define VRAM_BACKEND_INTERNAL_H

#include <stdatomic.h>

#include "base/internal.h"
#include "vramkit/backend.h"

struct vram_backend {
    const vram_backend_ops *ops; /* &table */
    vram_backend_ops table;      /* the caller's, as far as its size said */
    void *self;
    vram_backend_type type;
    vram_device *device; /* GPU types: what it draws from */
    uint64_t capacity;
    uint64_t granularity;
    _Atomic uint64_t calls;
    _Atomic uint64_t failed_calls;
    _Atomic uint64_t held;
    _Atomic uint64_t peak_held;
    _Atomic int users; /* pools using it */
};

/* Built-in implementations: fill *ops and *self (sim: with events that are
 * done once recorded when `events`). */
int vram__backend_sim_new(uint64_t capacity, uint64_t granularity, int events,
                          const vram_backend_ops **ops, void **self);
int vram__backend_host_new(uint64_t capacity, uint64_t granularity,
                           const vram_backend_ops **ops, void **self);

/* The GPU backends (cuda, cuda_async, vmm; src/gpu, or src/nogpu where
 * the build has no CUDA): fill *ops, *self, the device drawn from, its
 * capacity and the granularity used (the device's minimum or a multiple of
 * it). */
int vram__backend_gpu_new(vram_backend_type type, const vram_backend_opts *opts,
                          const vram_backend_ops **ops, void **self, vram_device **device,
                          uint64_t *capacity, uint64_t *granularity);

/* Counted calls (each counts one backend call, success or not). */
int vram__backend_segment_alloc(vram_backend *b, uint64_t size, vram_stream s, uint64_t *addr);
int vram__backend_segment_free(vram_backend *b, uint64_t addr, uint64_t size, vram_stream s);
int vram__backend_reserve(vram_backend *b, uint64_t size, uint64_t *addr);
int vram__backend_release(vram_backend *b, uint64_t addr, uint64_t size);
int vram__backend_map(vram_backend *b, uint64_t addr, uint64_t size);
int vram__backend_unmap(vram_backend *b, uint64_t addr, uint64_t size);

/* Events (VRAM_BACKEND_EVENTS): not counted; a failure has its sentence.
 * Query returns 1 complete, 0 pending, <0 an error. */
int vram__backend_event_record(vram_backend *b, vram_stream s, void **event);
int vram__backend_event_query(vram_backend *b, void *event);
int vram__backend_event_wait(vram_backend *b, void *event);
/* Whether the backend can make a stream wait for an event on the device,
 * and that wait (not counted; a failure has its sentence). */
int vram__backend_has_stream_wait(const vram_backend *b);
int vram__backend_stream_wait(vram_backend *b, vram_stream s, void *event);

/* A test hook (faulty.c): a backend that forwards to `inner` but fails
 * calls number `fail_from` .. `fail_from + fail_count - 1` (counting from 1,
 * over every call but events) with VRAM_ENOMEM for acquiring calls
 * (segment_alloc, reserve, map) and VRAM_EBACKEND for releasing ones.
 * `inner` must outlive the wrapper. Calls reach `inner`'s functions
 * directly, so the counters of vram_backend_stats_get() are the wrapper's,
 * not `inner`'s. */
int vram_backend_create_faulty(vram_backend *inner, uint64_t fail_from, uint64_t fail_count,
                               vram_backend **out);

void vram__backend_acquire_user(vram_backend *b);
void vram__backend_release_user(vram_backend *b);

#endif
