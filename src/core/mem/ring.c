/* src/core/mem/ring.c - the ring of a pool's last events (vramkit/listener.h): a
 * listener that stores each allocation, free and refusal with a coarse
 * wall-clock time, under the pool's lock, in a fixed array allocated when
 * it is attached (nothing is allocated per event). The OOM report reads it
 * at a refusal. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool_internal.h"

struct vram_ring {
    vram_pool *pool;
    uint32_t id;      /* its listener */
    uint32_t cap;
    uint32_t next;    /* where the next event goes */
    uint64_t total;   /* events seen since it was attached */
    vram_ring_event *ev;
};

/* Under the pool's lock: a clock read (a few ns through the vDSO,
 * millisecond resolution) and one store. */
static int ring_event(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)pool;
    (void)note;
    vram_ring *r = ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    r->ev[r->next] = (vram_ring_event){
        .time_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9,
        .type = ev->type,
        .addr = ev->addr,
        .size = ev->size,
        .owner = ev->owner,
        .kind = ev->kind,
        .stream = ev->stream,
    };
    if (++r->next == r->cap)
        r->next = 0;
    r->total++;
    return 0;
}

static int ring_detach(void *ctx, vram_pool *pool)
{
    (void)pool;
    vram_ring *r = ctx;
    free(r->ev);
    free(r);
    return 0;
}

int vram_pool_ring_attach(vram_pool *p, uint32_t capacity, vram_ring **out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_ring_attach: pool and out are required");
    *out = NULL;
    if (capacity < 1 || capacity > (1u << 24))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": a ring holds 1 to %u events, not %u",
                          p->name, 1u << 24, capacity);
    vram_ring *r = vram__calloc(1, sizeof *r);
    if (r && !(r->ev = vram__calloc(capacity, sizeof *r->ev))) {
        free(r);
        r = NULL;
    }
    if (!r)
        return VRAM_EHOSTMEM;
    r->pool = p;
    r->cap = capacity;
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = ring_event,
                       .on_detach = ring_detach, .ctx = r};
    int rc = vram_pool_listen(p, &l, &r->id);
    if (rc) {
        ring_detach(r, p);
        return rc;
    }
    *out = r;
    return 0;
}

int vram_pool_ring_detach(vram_pool *p, vram_ring *r)
{
    if (!p || !r || r->pool != p)
        return vram__fail(VRAM_EINVAL, "vram_pool_ring_detach: the ring is not one of this pool's");
    return vram_pool_unlisten(p, r->id);
}

static void ring_copy(const vram_ring *r, vram_ring_event *out, size_t cap, size_t *n)
{
    size_t have = r->total < r->cap ? (size_t)r->total : r->cap;
    size_t take = have < cap ? have : cap;
    /* The oldest kept is at `next` once the ring is full, else at 0; skip
     * to the newest `take`. */
    size_t start = (r->total < r->cap ? 0 : r->next) + (have - take);
    for (size_t i = 0; i < take; i++)
        out[i] = r->ev[(start + i) % r->cap];
    *n = take;
}

int vram_ring_read(vram_ring *r, vram_ring_event *out, size_t cap, size_t *n, uint64_t *total)
{
    if (!r || !n || (cap && !out))
        return vram__fail(VRAM_EINVAL, "vram_ring_read: ring, n (and out) are required");
    /* From a listener of the same pool the lock is held already. */
    int locked_here = vram__listener_current() != r->pool;
    if (locked_here)
        vram__pool_lock(r->pool);
    ring_copy(r, out, cap, n);
    if (total)
        *total = r->total;
    if (locked_here)
        vram__pool_unlock(r->pool);
    return 0;
}
