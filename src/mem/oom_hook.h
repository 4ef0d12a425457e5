/* src/mem/oom_hook.h - what a pool offers the OOM report (src/observe/oom*.c):
 * a ring of its last events, and a hook called when it refuses an allocation
 * (a budget or the device). The hook runs in two steps:
 *  - admit, under the pool's lock, at the refusal: decides whether this
 *    refusal gets a report (rate limiting); cheap, never blocks;
 *  - report, after the pool's lock is released, on the refusing thread,
 *    with a capture of the pool taken under the lock at the refusal (the
 *    request, statistics, owners, kinds, the ring's events and a snapshot),
 *    so that the report describes the moment of the failure while file
 *    writes, NVML and the monitor run without the pool's lock.
 * The refused allocation's result and this thread's vram_last_error() are
 * saved around the report step: nothing it does changes them. A refusal
 * on a thread that is inside a report step (e.g. its callback allocating
 * from the pool) is never reported, so reporting cannot recurse. */
#ifndef VRAM_MEM_OOM_HOOK_H
#define VRAM_MEM_OOM_HOOK_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/stats.h"

/* Ring entries and capture events: what happened. */
enum { VRAM__EV_ALLOC = 0, VRAM__EV_FREE = 1, VRAM__EV_ALLOC_FAIL = 2 };

/* One ring entry (24 + 16 bytes; no allocation when one is recorded). */
typedef struct vram__ring_event {
    uint64_t time_ns; /* wall clock (CLOCK_REALTIME_COARSE), ns since the epoch */
    uint64_t addr;    /* 0 for a refusal */
    uint64_t size;    /* bytes as requested */
    vram_stream stream;
    uint32_t owner;
    uint8_t kind;
    uint8_t action;   /* VRAM__EV_* */
} vram__ring_event;

typedef struct vram__oom_usage {
    const char *name; /* owners: valid while the pool lives; kinds: static */
    uint64_t live_bytes, peak_live_bytes, live_blocks, budget_bytes;
} vram__oom_usage;

typedef struct vram__oom_event {
    double time_s;
    uint64_t addr, size;
    vram_stream stream;
    const char *owner; /* valid while the pool lives */
    vram_kind kind;
    int action;
} vram__oom_event;

typedef struct vram__oom_capture vram__oom_capture;

typedef struct vram__oom_hook {
    /* Under the pool's lock. may_report is 0 when this thread is inside a
     * report step already (the refusal is counted, never reported). Return
     * non-zero to have the refusal reported; *note is handed to the report
     * step in the capture. */
    int (*admit)(void *ctx, int error, int may_report, uint64_t *note);
    /* Outside the pool's lock. */
    void (*report)(void *ctx, vram_pool *pool, const vram__oom_capture *cap);
    /* The pool is destroyed, or the hook replaced: free ctx. */
    void (*release)(void *ctx);
    void *ctx;
} vram__oom_hook;

/* The pool at a refusal, taken under its lock. Freed by the pool after the
 * report step. */
struct vram__oom_capture {
    double time_s;            /* wall clock of the refusal */
    int error;                /* VRAM_EBUDGET or VRAM_ENOMEM */
    char message[1024];       /* vram_last_error() of the refusal */
    uint64_t size;            /* the request, as asked */
    vram_owner owner;
    const char *owner_name;
    vram_kind kind;
    vram_stream stream;
    const char *pool;         /* the pool's name (valid while it lives) */
    const char *backend;      /* the backend's name */
    vram_policy policy;
    uint64_t capacity;        /* the backend's capacity */
    int device_known;         /* the backend reported free and total memory */
    uint64_t device_free, device_total;
    vram_pool_stats stats;    /* with free, largest free and fragmentation */
    vram__oom_usage *owners;  /* every owner (NULL if host memory ran out) */
    size_t n_owners;
    vram__oom_usage kinds[VRAM_KIND_COUNT];
    vram__oom_event *events;  /* the ring, oldest first, the refusal last */
    size_t n_events;
    uint64_t events_total;    /* events the ring has seen since it was set up */
    cJSON *snapshot;          /* vram_pool_snapshot's tree (NULL if host memory ran out) */
    vram__oom_hook hook;      /* the hook that admitted it */
    uint64_t note;            /* what admit said */
};

/* Install a hook and a ring of `last_events` entries (0: no ring). The ring
 * lives as long as the hook. VRAM_EBUSY if a hook is installed already,
 * VRAM_EHOSTMEM. */
int vram__pool_oom_hook_set(vram_pool *p, const vram__oom_hook *hook, uint32_t last_events);

/* Remove the hook and the ring, after waiting for report steps in flight on
 * other threads; then calls hook.release. 0, or VRAM_EINVAL if none is
 * installed, VRAM_EBUSY when called from inside a report step. */
int vram__pool_oom_hook_clear(vram_pool *p);

/* Call fn(hook ctx, arg) under the pool's lock (the hook cannot go away
 * meanwhile). VRAM_EINVAL if no hook is installed. */
int vram__pool_oom_with_ctx(vram_pool *p, void (*fn)(void *ctx, void *arg), void *arg);

/* Used by pool.c (lock held). */
void vram__ring_note(vram_pool *p, int action, uint64_t addr, uint64_t size, vram_owner owner,
                     vram_kind kind, vram_stream s);
/* At a refusal with rc: admit and capture (lock held). NULL: no report. */
vram__oom_capture *vram__oom_capture_take(vram_pool *p, int rc, uint64_t size, vram_owner owner,
                                          vram_kind kind, vram_stream s);
/* After the lock is released: run the report step, then free the capture. */
void vram__oom_fire(vram_pool *p, vram__oom_capture *cap);
/* At destroy (no other thread may use the pool): release the hook and ring. */
void vram__pool_oom_destroy(vram_pool *p);

#endif
