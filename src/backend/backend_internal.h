/* src/backend/backend_internal.h - the backend object behind the public
 * handle, and the counted calls the pool makes through it. */
#ifndef VRAM_BACKEND_INTERNAL_H
#define VRAM_BACKEND_INTERNAL_H

#include <stdatomic.h>

#include "base/internal.h"
#include "vramkit/backend.h"

struct vram_backend {
    const vram_backend_ops *ops;
    void *self;
    uint64_t capacity;
    uint64_t granularity;
    _Atomic uint64_t calls;
    _Atomic uint64_t failed_calls;
    _Atomic uint64_t held;
    _Atomic uint64_t peak_held;
    _Atomic int users; /* pools using it */
};

/* Built-in implementations: fill *ops and *self. */
int vram__backend_sim_new(uint64_t capacity, uint64_t granularity,
                          const vram_backend_ops **ops, void **self);
int vram__backend_host_new(uint64_t capacity, uint64_t granularity,
                           const vram_backend_ops **ops, void **self);

/* Counted calls (each counts one backend call, success or not). */
int vram__backend_segment_alloc(vram_backend *b, uint64_t size, vram_stream s, uint64_t *addr);
int vram__backend_segment_free(vram_backend *b, uint64_t addr, uint64_t size, vram_stream s);
int vram__backend_reserve(vram_backend *b, uint64_t size, uint64_t *addr);
int vram__backend_release(vram_backend *b, uint64_t addr, uint64_t size);
int vram__backend_map(vram_backend *b, uint64_t addr, uint64_t size);
int vram__backend_unmap(vram_backend *b, uint64_t addr, uint64_t size);

void vram__backend_acquire_user(vram_backend *b);
void vram__backend_release_user(vram_backend *b);

#endif
