/* src/mem/oom_hook.c - the pool's side of the OOM report (see oom_hook.h):
 * the ring of the last events, installing and removing the hook, and at a
 * refusal the capture taken under the lock and the report step run after
 * it. Host memory for a capture comes from plain calloc (never from the
 * failing pool, and without touching this thread's last error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_internal.h"
#include "pool_internal.h"

static _Thread_local int in_report;

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Hot path when a ring is kept: a coarse clock read (a few ns through the
 * vDSO, millisecond resolution) and one store of 40 bytes. */
void vram__ring_note(vram_pool *p, int action, uint64_t addr, uint64_t size, vram_owner owner,
                     vram_kind kind, vram_stream s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    vram__ring_event *e = &p->ring[p->ring_next];
    e->time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    e->addr = addr;
    e->size = size;
    e->stream = s;
    e->owner = owner;
    e->kind = (uint8_t)kind;
    e->action = (uint8_t)action;
    if (++p->ring_next == p->ring_cap)
        p->ring_next = 0;
    p->ring_total++;
}

int vram__pool_oom_hook_set(vram_pool *p, const vram__oom_hook *hook, uint32_t last_events)
{
    vram__ring_event *ring = NULL;
    if (last_events && !(ring = vram__calloc(last_events, sizeof *ring)))
        return VRAM_EHOSTMEM;
    vram__pool_lock(p);
    if (p->oom.admit) {
        vram__pool_unlock(p);
        free(ring);
        return vram__fail(VRAM_EBUSY, "pool \"%s\" already has an OOM watch (unwatch it first)",
                          p->name);
    }
    p->oom = *hook;
    p->ring = ring;
    p->ring_cap = last_events;
    p->ring_next = 0;
    p->ring_total = 0;
    vram__pool_unlock(p);
    return 0;
}

int vram__pool_oom_hook_clear(vram_pool *p)
{
    if (in_report)
        return vram__fail(VRAM_EBUSY,
                          "pool \"%s\": an OOM watch cannot be removed from inside its own report",
                          p->name);
    vram__pool_lock(p);
    if (!p->oom.admit) {
        vram__pool_unlock(p);
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no OOM watch", p->name);
    }
    vram__oom_hook hook = p->oom;
    vram__ring_event *ring = p->ring;
    p->oom = (vram__oom_hook){0};
    p->ring = NULL;
    p->ring_cap = p->ring_next = 0;
    p->ring_total = 0;
    /* Report steps admitted before still use hook.ctx: wait for them. They
     * hold no lock, so polling with the lock released cannot deadlock. */
    while (p->oom_inflight) {
        vram__pool_unlock(p);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        vram__pool_lock(p);
    }
    vram__pool_unlock(p);
    free(ring);
    if (hook.release)
        hook.release(hook.ctx);
    return 0;
}

int vram__pool_oom_with_ctx(vram_pool *p, void (*fn)(void *ctx, void *arg), void *arg)
{
    vram__pool_lock(p);
    int rc = 0;
    if (p->oom.admit)
        fn(p->oom.ctx, arg);
    else
        rc = vram__fail(VRAM_EINVAL, "pool \"%s\" has no OOM watch", p->name);
    vram__pool_unlock(p);
    return rc;
}

static void usage_copy(vram__oom_usage *u, const char *name, const vram__usage *src,
                       uint64_t budget)
{
    *u = (vram__oom_usage){name, src->live_bytes, src->peak_live_bytes, src->live_blocks, budget};
}

static void capture_free(vram__oom_capture *c)
{
    free(c->owners);
    free(c->events);
    cJSON_Delete(c->snapshot);
    free(c);
}

vram__oom_capture *vram__oom_capture_take(vram_pool *p, int rc, uint64_t size, vram_owner owner,
                                          vram_kind kind, vram_stream s)
{
    if (rc != VRAM_EBUDGET && rc != VRAM_ENOMEM)
        return NULL;
    uint64_t note = 0;
    if (!p->oom.admit(p->oom.ctx, rc, !in_report, &note))
        return NULL;
    vram__oom_capture *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* First what the refusal said, before anything below can change it. */
    snprintf(c->message, sizeof c->message, "%s", vram_last_error());
    c->time_s = now_s(CLOCK_REALTIME);
    c->error = rc;
    c->size = size;
    c->owner = owner;
    c->owner_name = p->owners[owner].name;
    c->kind = kind;
    c->stream = s;
    c->pool = p->name;
    c->backend = p->backend->ops->name;
    c->policy = p->policy;
    c->capacity = p->capacity;
    if (p->backend->ops->mem_info &&
        p->backend->ops->mem_info(p->backend->self, &c->device_free, &c->device_total) == 0)
        c->device_known = 1;
    c->stats = p->st;
    c->stats.free_bytes = vram__pool_free_bytes(p);
    c->stats.largest_free_bytes = c->stats.free_bytes ? vram__pool_largest_free(p) : 0;
    if (c->stats.largest_free_bytes > c->stats.free_bytes)
        c->stats.largest_free_bytes = c->stats.free_bytes;
    c->stats.fragmentation_ratio =
        c->stats.free_bytes
            ? 1.0 - (double)c->stats.largest_free_bytes / (double)c->stats.free_bytes
            : 0.0;
    if ((c->owners = calloc(p->n_owners, sizeof *c->owners))) {
        c->n_owners = p->n_owners;
        for (size_t i = 0; i < p->n_owners; i++)
            usage_copy(&c->owners[i], p->owners[i].name, &p->owners[i].u, p->owners[i].budget);
    }
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        usage_copy(&c->kinds[k], vram_kind_name((vram_kind)k), &p->kinds[k], 0);
    size_t n = p->ring_total < p->ring_cap ? (size_t)p->ring_total : p->ring_cap;
    if (n && (c->events = calloc(n, sizeof *c->events))) {
        size_t start = p->ring_total < p->ring_cap ? 0 : p->ring_next;
        for (size_t i = 0; i < n; i++) {
            const vram__ring_event *e = &p->ring[(start + i) % p->ring_cap];
            c->events[i] = (vram__oom_event){
                .time_s = (double)e->time_ns * 1e-9,
                .addr = e->addr,
                .size = e->size,
                .stream = e->stream,
                .owner = e->owner < p->n_owners ? p->owners[e->owner].name : "?",
                .kind = (vram_kind)e->kind,
                .action = e->action,
            };
        }
        c->n_events = n;
    }
    c->events_total = p->ring_total;
    c->snapshot = vram__pool_snapshot_json(p);
    c->hook = p->oom;
    c->note = note;
    p->oom_inflight++;
    return c;
}

void vram__oom_fire(vram_pool *p, vram__oom_capture *c)
{
    in_report++;
    c->hook.report(c->hook.ctx, p, c);
    in_report--;
    /* Whatever the report step did, the caller sees the refusal's sentence. */
    vram__fail(c->error, "%s", c->message);
    vram__pool_lock(p);
    p->oom_inflight--;
    vram__pool_unlock(p);
    capture_free(c);
}

void vram__pool_oom_destroy(vram_pool *p)
{
    if (p->oom.release)
        p->oom.release(p->oom.ctx);
    p->oom = (vram__oom_hook){0};
    free(p->ring);
    p->ring = NULL;
}
