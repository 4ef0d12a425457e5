/* src/core/backend/backend.c - the backend handle: creation by name, custom
 * tables, counted calls with held-bytes accounting, and destruction. */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "backend_internal.h"
#include "vramkit/config.h"
#include "vramkit/device.h"

static const struct {
    const char *name;
    int gpu;
} types[] = {
#define TYPE_ROW(NAME, name, gpu) {#name, gpu},
    VRAM_BACKEND_TYPES(TYPE_ROW)
#undef TYPE_ROW
};

const char *vram_backend_type_name(vram_backend_type t)
{
    return (unsigned)t < VRAM_BACKEND_TYPE_COUNT ? types[t].name : "?";
}

int vram_backend_type_parse(const char *name, vram_backend_type *out)
{
    for (unsigned t = 0; name && out && t < VRAM_BACKEND_TYPE_CUSTOM; t++) {
        if (strcmp(types[t].name, name) == 0) {
            *out = (vram_backend_type)t;
            return 0;
        }
    }
    return vram__fail(VRAM_EINVAL, "unknown backend \"%s\" (built in: sim, host, cuda, "
                                   "cuda_async, vmm)", name ? name : "(null)");
}

int vram_backend_type_is_gpu(vram_backend_type t)
{
    return (unsigned)t < VRAM_BACKEND_TYPE_COUNT && types[t].gpu;
}

vram_backend_type vram_backend_type_of(const vram_backend *b)
{
    return b ? b->type : VRAM_BACKEND_TYPE_CUSTOM;
}

int vram_backend_is_gpu(const vram_backend *b) { return b && vram_backend_type_is_gpu(b->type); }

vram_device *vram_backend_device(const vram_backend *b) { return b ? b->device : NULL; }

static int wrap(const vram_backend_ops *ops, void *self, vram_backend_type type,
                vram_device *device, uint64_t capacity, uint64_t granularity, vram_backend **out)
{
    vram_backend *b = vram__calloc(1, sizeof *b);
    if (!b) {
        if (ops->destroy)
            ops->destroy(self);
        return VRAM_EHOSTMEM;
    }
    b->table = *ops;
    b->ops = &b->table;
    b->self = self;
    b->type = type;
    b->device = device;
    b->capacity = capacity;
    b->granularity = granularity;
    *out = b;
    return 0;
}

/* The sim's events as VRAM_SIM_EVENTS says (its choices: none, done). */
static int configured_sim_events(const vram_config *c)
{
    return c->sim_events ? VRAM_SIM_EVENTS_DONE : VRAM_SIM_EVENTS_NONE;
}

int vram_backend_opts_init(vram_backend_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_backend_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_backend_opts){.size = sizeof *o, .capacity = c->capacity,
                             .granularity = c->granularity,
                             .sim_events = configured_sim_events(c)};
    return rc;
}

/* Devices' options live here with their backends', in every build. */
int vram_device_opts_init(vram_device_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_device_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_device_opts){.size = sizeof *o,
                            .stack_limit = c->stack_limit > INT64_MAX ? INT64_MAX
                                                                      : (int64_t)c->stack_limit};
    return rc;
}

int vram_backend_create(const char *name, const vram_backend_opts *opts, vram_backend **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_backend_create: out is NULL");
    *out = NULL;
    int rc = vram_config_load();
    if (rc)
        return rc;
    const vram_config *cfg = vram_config_get();
    vram_backend_opts taken = {.size = sizeof taken};
    if (opts && (rc = vram__opts_take(&taken, opts, sizeof taken, "vram_backend_opts")))
        return rc;
    opts = &taken;
    uint64_t capacity = opts->capacity ? opts->capacity : cfg->capacity;
    uint64_t gran = opts->granularity ? opts->granularity : cfg->granularity;
    if (!vram__is_pow2(gran) || gran < 4096)
        return vram__fail(VRAM_EINVAL,
                          "granularity %llu must be a power of two of at least 4096 bytes",
                          (unsigned long long)gran);
    if (capacity < gran)
        return vram__fail(VRAM_EINVAL, "capacity %llu is smaller than the granularity %llu",
                          (unsigned long long)capacity, (unsigned long long)gran);
    char configured[32];
    if (!name) {
        if ((rc = vram__config_choice_name("BACKEND", cfg->backend, configured,
                                           sizeof configured)))
            return rc;
        name = configured;
    }
    vram_backend_type type = VRAM_BACKEND_TYPE_SIM;
    if ((rc = vram_backend_type_parse(name, &type)))
        return rc;
    const vram_backend_ops *ops;
    void *self;
    vram_device *device = NULL;
    int sim_events = opts->sim_events;
    if (sim_events == VRAM_SIM_EVENTS_CONFIG)
        sim_events = configured_sim_events(cfg);
    if (sim_events != VRAM_SIM_EVENTS_NONE && sim_events != VRAM_SIM_EVENTS_DONE)
        return vram__fail(VRAM_EINVAL,
                          "sim_events %d is none of VRAM_SIM_EVENTS_CONFIG (0), _NONE (1), _DONE (2)",
                          sim_events);
    if (type == VRAM_BACKEND_TYPE_SIM)
        rc = vram__backend_sim_new(capacity, gran, sim_events == VRAM_SIM_EVENTS_DONE, &ops,
                                   &self);
    else if (type == VRAM_BACKEND_TYPE_HOST)
        rc = vram__backend_host_new(capacity, gran, &ops, &self);
    else
        rc = vram__backend_gpu_new(type, opts, &ops, &self, &device, &capacity, &gran);
    if (rc)
        return rc;
    return wrap(ops, self, type, device, capacity, gran, out);
}

int vram_backend_create_custom(const vram_backend_ops *ops, void *self, uint64_t capacity,
                               uint64_t granularity, vram_backend **out)
{
    if (!ops || !out)
        return vram__fail(VRAM_EINVAL, "vram_backend_create_custom: ops and out are required");
    *out = NULL;
    vram_backend_ops taken = {.size = sizeof taken};
    int rc = vram__opts_take(&taken, ops, sizeof taken, "vram_backend_ops");
    if (rc)
        return rc;
    ops = &taken;
    if ((ops->caps & VRAM_BACKEND_SEGMENTS) && (!ops->segment_alloc || !ops->segment_free))
        return vram__fail(VRAM_EINVAL, "backend %s: segments need segment_alloc and segment_free",
                          ops->name ? ops->name : "?");
    if ((ops->caps & VRAM_BACKEND_MAP) &&
        (!ops->reserve || !ops->release || !ops->map || !ops->unmap || !granularity))
        return vram__fail(VRAM_EINVAL,
                          "backend %s: mapping needs reserve, release, map, unmap and a granularity",
                          ops->name ? ops->name : "?");
    if ((ops->caps & VRAM_BACKEND_EVENTS) &&
        (!ops->event_record || !ops->event_query || !ops->event_wait || !ops->event_release))
        return vram__fail(VRAM_EINVAL, "backend %s: events need record, query, wait and release",
                          ops->name ? ops->name : "?");
    return wrap(ops, self, VRAM_BACKEND_TYPE_CUSTOM, NULL, capacity, granularity, out);
}

int vram_backend_destroy(vram_backend *b)
{
    if (!b)
        return 0;
    int users = atomic_load(&b->users);
    if (users)
        return vram__fail(VRAM_EBUSY, "backend %s is still used by %d pool(s)", b->ops->name, users);
    if (b->ops->destroy)
        b->ops->destroy(b->self);
    free(b);
    return 0;
}

const char *vram_backend_name(const vram_backend *b) { return b ? b->ops->name : NULL; }
unsigned vram_backend_caps(const vram_backend *b) { return b ? b->ops->caps : 0; }

void vram_backend_stats_get(const vram_backend *b, vram_backend_stats *out)
{
    if (!out)
        return;
    if (!b) {
        *out = (vram_backend_stats){0};
        return;
    }
    out->calls = atomic_load(&((vram_backend *)b)->calls);
    out->failed_calls = atomic_load(&((vram_backend *)b)->failed_calls);
    out->held_bytes = atomic_load(&((vram_backend *)b)->held);
    out->peak_held_bytes = atomic_load(&((vram_backend *)b)->peak_held);
    out->capacity = b->capacity;
    out->granularity = b->granularity;
}

void vram__backend_acquire_user(vram_backend *b) { atomic_fetch_add(&b->users, 1); }
void vram__backend_release_user(vram_backend *b) { atomic_fetch_sub(&b->users, 1); }

/* Count a call; a failing backend that left no sentence gets one, so the
 * pool's message never quotes an older, unrelated failure (the caller clears
 * the last error before the call). */
static int counted(vram_backend *b, int rc, const char *what, uint64_t size)
{
    atomic_fetch_add_explicit(&b->calls, 1, memory_order_relaxed);
    if (rc) {
        atomic_fetch_add_explicit(&b->failed_calls, 1, memory_order_relaxed);
        if (!*vram_last_error())
            vram__fail(rc, "backend %s: %s of %llu bytes failed (%s)", b->ops->name, what,
                       (unsigned long long)size, vram_err_name(rc));
    }
    return rc;
}

static void held_add(vram_backend *b, uint64_t bytes)
{
    uint64_t now = atomic_fetch_add_explicit(&b->held, bytes, memory_order_relaxed) + bytes;
    uint64_t peak = atomic_load_explicit(&b->peak_held, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&b->peak_held, &peak, now, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static void held_sub(vram_backend *b, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&b->held, bytes, memory_order_relaxed);
}

int vram__backend_segment_alloc(vram_backend *b, uint64_t size, vram_stream s, uint64_t *addr)
{
    vram_clear_error();
    int rc = counted(b, b->ops->segment_alloc(b->self, size, s, addr), "segment_alloc", size);
    if (!rc)
        held_add(b, size);
    return rc;
}

int vram__backend_segment_free(vram_backend *b, uint64_t addr, uint64_t size, vram_stream s)
{
    vram_clear_error();
    int rc = counted(b, b->ops->segment_free(b->self, addr, size, s), "segment_free", size);
    if (!rc)
        held_sub(b, size);
    return rc;
}

int vram__backend_reserve(vram_backend *b, uint64_t size, uint64_t *addr)
{
    vram_clear_error();
    return counted(b, b->ops->reserve(b->self, size, addr), "reserve", size);
}

int vram__backend_release(vram_backend *b, uint64_t addr, uint64_t size)
{
    vram_clear_error();
    return counted(b, b->ops->release(b->self, addr, size), "release", size);
}

int vram__backend_map(vram_backend *b, uint64_t addr, uint64_t size)
{
    vram_clear_error();
    int rc = counted(b, b->ops->map(b->self, addr, size), "map", size);
    if (!rc)
        held_add(b, size);
    return rc;
}

int vram__backend_unmap(vram_backend *b, uint64_t addr, uint64_t size)
{
    vram_clear_error();
    int rc = counted(b, b->ops->unmap(b->self, addr, size), "unmap", size);
    if (!rc)
        held_sub(b, size);
    return rc;
}

/* Events: not counted as calls, but like them a failure always carries its
 * own sentence; a success leaves the caller's last error as it was. */
typedef struct saved_error {
    char text[512];
} saved_error;

static void save_error(saved_error *e)
{
    snprintf(e->text, sizeof e->text, "%s", vram_last_error());
    vram_clear_error();
}

static int event_rc(vram_backend *b, int rc, const char *what, const saved_error *e)
{
    if (rc >= 0) {
        if (e->text[0])
            vram__fail(rc, "%s", e->text);
        return rc;
    }
    if (!*vram_last_error())
        vram__fail(rc, "backend %s: %s failed (%s)", b->ops->name, what, vram_err_name(rc));
    return rc;
}

int vram__backend_event_record(vram_backend *b, vram_stream s, void **event)
{
    saved_error e;
    save_error(&e);
    return event_rc(b, b->ops->event_record(b->self, s, event), "event_record", &e);
}

int vram__backend_event_query(vram_backend *b, void *event)
{
    saved_error e;
    save_error(&e);
    return event_rc(b, b->ops->event_query(b->self, event), "event_query", &e);
}

int vram__backend_event_wait(vram_backend *b, void *event)
{
    saved_error e;
    save_error(&e);
    return event_rc(b, b->ops->event_wait(b->self, event), "event_wait", &e);
}

int vram__backend_has_stream_wait(const vram_backend *b)
{
    return (b->ops->caps & VRAM_BACKEND_EVENTS) && b->ops->stream_wait_event;
}

int vram__backend_stream_wait(vram_backend *b, vram_stream s, void *event)
{
    saved_error e;
    save_error(&e);
    return event_rc(b, b->ops->stream_wait_event(b->self, s, event), "stream_wait_event", &e);
}
