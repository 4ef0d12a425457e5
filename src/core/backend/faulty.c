/* src/core/backend/faulty.c - fault injection: a backend forwarding to another but
 * failing a chosen window of calls, so tests can make every backend call fail
 * in turn and check that the pool fails cleanly and stays usable. */
#include <stdlib.h>

#include "backend_internal.h"

typedef struct faulty {
    vram_backend *inner;
    uint64_t from, count;
    _Atomic uint64_t seen;
    vram_backend_ops ops; /* the inner table's shape, with our functions */
} faulty;

static int should_fail(faulty *f) /* counts the call */
{
    uint64_t n = atomic_fetch_add(&f->seen, 1) + 1;
    return n >= f->from && n - f->from < f->count;
}

#define FAIL_ACQUIRE(what)                                                                         \
    vram__fail(VRAM_ENOMEM, "injected failure of %s (backend call %llu)", what,                   \
               (unsigned long long)f->seen)
#define FAIL_RELEASE(what)                                                                         \
    vram__fail(VRAM_EBACKEND, "injected failure of %s (backend call %llu)", what,                 \
               (unsigned long long)f->seen)

static int f_segment_alloc(void *self, uint64_t size, vram_stream s, uint64_t *addr)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_ACQUIRE("segment_alloc");
    return f->inner->ops->segment_alloc(f->inner->self, size, s, addr);
}

static int f_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream s)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_RELEASE("segment_free");
    return f->inner->ops->segment_free(f->inner->self, addr, size, s);
}

static int f_reserve(void *self, uint64_t size, uint64_t *addr)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_ACQUIRE("reserve");
    return f->inner->ops->reserve(f->inner->self, size, addr);
}

static int f_release(void *self, uint64_t addr, uint64_t size)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_RELEASE("release");
    return f->inner->ops->release(f->inner->self, addr, size);
}

static int f_map(void *self, uint64_t addr, uint64_t size)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_ACQUIRE("map");
    return f->inner->ops->map(f->inner->self, addr, size);
}

static int f_unmap(void *self, uint64_t addr, uint64_t size)
{
    faulty *f = self;
    if (should_fail(f))
        return FAIL_RELEASE("unmap");
    return f->inner->ops->unmap(f->inner->self, addr, size);
}

static int f_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    faulty *f = self;
    return f->inner->ops->mem_info(f->inner->self, free_bytes, total);
}

static int f_event_record(void *self, vram_stream s, void **ev)
{
    faulty *f = self;
    return f->inner->ops->event_record(f->inner->self, s, ev);
}

static int f_event_query(void *self, void *ev)
{
    faulty *f = self;
    return f->inner->ops->event_query(f->inner->self, ev);
}

static int f_event_wait(void *self, void *ev)
{
    faulty *f = self;
    return f->inner->ops->event_wait(f->inner->self, ev);
}

static void f_event_release(void *self, void *ev)
{
    faulty *f = self;
    f->inner->ops->event_release(f->inner->self, ev);
}

static int f_stream_wait_event(void *self, vram_stream s, void *ev)
{
    faulty *f = self;
    return f->inner->ops->stream_wait_event(f->inner->self, s, ev);
}

static void f_destroy(void *self) { free(self); }

int vram_backend_create_faulty(vram_backend *inner, uint64_t fail_from, uint64_t fail_count,
                               vram_backend **out)
{
    if (!inner || !out)
        return vram__fail(VRAM_EINVAL, "vram_backend_create_faulty: inner and out are required");
    faulty *f = vram__calloc(1, sizeof *f);
    if (!f)
        return VRAM_EHOSTMEM;
    f->inner = inner;
    f->from = fail_from;
    f->count = fail_count;
    const vram_backend_ops *in = inner->ops;
    f->ops = (vram_backend_ops){
        .name = "faulty",
        .caps = in->caps,
        .segment_alloc = in->segment_alloc ? f_segment_alloc : NULL,
        .segment_free = in->segment_free ? f_segment_free : NULL,
        .reserve = in->reserve ? f_reserve : NULL,
        .release = in->release ? f_release : NULL,
        .map = in->map ? f_map : NULL,
        .unmap = in->unmap ? f_unmap : NULL,
        .mem_info = in->mem_info ? f_mem_info : NULL,
        .event_record = in->event_record ? f_event_record : NULL,
        .event_query = in->event_query ? f_event_query : NULL,
        .event_wait = in->event_wait ? f_event_wait : NULL,
        .event_release = in->event_release ? f_event_release : NULL,
        .destroy = f_destroy,
        .stream_wait_event = in->stream_wait_event ? f_stream_wait_event : NULL,
    };
    return vram_backend_create_custom(&f->ops, f, inner->capacity, inner->granularity, out);
}
