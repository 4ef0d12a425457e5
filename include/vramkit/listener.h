/* vramkit/listener.h - following what a pool does: listeners, the ring of a
 * pool's last events, traces, and hooks for pools made from the
 * configuration.
 *
 * A listener attached to a pool hears of every allocation, free and refused
 * allocation, in two steps:
 *  - on_event, under the pool's lock, on the thread of the call, as the
 *    event happens: record it (a trace line, a ring entry) or decide whether
 *    it deserves more. It must be quick, must not block, and must call no
 *    function of this pool (the lock is held: it would deadlock), except
 *    vram_pool_name and vram_ring_read on a ring of the same pool; attaching
 *    or removing a listener from it is VRAM_EBUSY. Returning
 *    VRAM_LISTENER_REPORT asks for the second step;
 *  - on_report, after the pool's lock is released, still on that thread and
 *    before the pool call returns, with the `note` on_event left and, for a
 *    listener with VRAM_LISTENER_STATE, the pool's state taken under the
 *    lock at the event (statistics, owners, kinds, a snapshot), so that what
 *    it writes describes that moment while its slow work (files, NVML)
 *    holds no lock. It may call the pool; the events that raises reach
 *    on_event with `nested` set. The result of the pool call and the
 *    thread's vram_last_error() are kept around it: nothing it does changes
 *    them.
 * Listeners are called in the order they were attached. The OOM reports of
 * vramkit/oom.h, the trace writer and the event ring are listeners.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). A vram_listener is copied when attached; its ctx stays
 * the caller's, handed back once to on_detach (when the listener is removed,
 * when the pool is destroyed, or when vram_pool_create fails after a hook
 * attached it), which is where to release it. A vram_ring is the pool's:
 * freed by vram_pool_ring_detach or with its pool, after which the handle
 * must not be used. A trace ends with vram_pool_trace_stop or its pool. */
#ifndef VRAMKIT_LISTENER_H
#define VRAMKIT_LISTENER_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What happened. X(NAME, name) */
#define VRAM_EVENT_TYPES(X)                                                    \
    X(ALLOC, alloc)                                                            \
    X(FREE, free)                                                              \
    X(REFUSE, refuse)

typedef enum vram_event_type {
#define VRAM_EVENT_TYPE_ENUM(NAME, name) VRAM_EVENT_##NAME,
    VRAM_EVENT_TYPES(VRAM_EVENT_TYPE_ENUM)
#undef VRAM_EVENT_TYPE_ENUM
    VRAM_EVENT_TYPE_COUNT
} vram_event_type;

/* A set of event types, for vram_listener.events. */
#define VRAM_EVENT_BIT(type) (1u << (type))
#define VRAM_EVENTS_ALL                                                        \
    (VRAM_EVENT_BIT(VRAM_EVENT_ALLOC) | VRAM_EVENT_BIT(VRAM_EVENT_FREE) |      \
     VRAM_EVENT_BIT(VRAM_EVENT_REFUSE))

/* "alloc", "free", "refuse"; "?" for anything else. */
VRAM_API const char *vram_event_type_name(vram_event_type type);

/* One event; valid for the call it is passed to. */
typedef struct vram_event {
    vram_event_type type;
    int error;           /* REFUSE: what vram_pool_alloc returns (VRAM_EBUDGET,
                            VRAM_ENOMEM, VRAM_EBACKEND); else 0 */
    uint64_t addr;       /* ALLOC and FREE: the block; REFUSE: 0 */
    uint64_t size;       /* bytes as requested */
    vram_owner owner;
    vram_kind kind;
    vram_stream stream;  /* of the allocation, or of the free */
    const char *message; /* REFUSE: the sentence of the refusal; else NULL */
    int nested;          /* raised from inside an on_report on this thread (a
                            listener's own work on the pool) */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_event;

/* One owner in a captured state. */
typedef struct vram_owner_state {
    const char *name; /* valid while the pool lives */
    vram_usage_stats usage;
} vram_owner_state;

/* A pool as it was under its lock at an event (VRAM_LISTENER_STATE). Owned
 * by the pool and valid during on_report only. */
typedef struct vram_pool_state {
    double time_s;        /* wall clock of the capture, seconds since the epoch */
    const char *pool;     /* the pool's name */
    const char *backend;  /* the backend's name */
    vram_policy policy;
    uint64_t capacity;    /* the backend's */
    int device_known;     /* the backend told its free and total memory */
    uint64_t device_free_bytes, device_total_bytes;
    vram_pool_stats stats; /* free, largest free and fragmentation included */
    size_t n_owners;
    const vram_owner_state *owners; /* indexed by vram_owner; NULL if host memory ran out */
    vram_usage_stats kinds[VRAM_KIND_COUNT];
    const char *snapshot; /* what vram_pool_snapshot writes (no newline), or NULL
                             if host memory ran out taking it */
    size_t snapshot_len;
    uint64_t reserved[8];
} vram_pool_state;

/* on_event's answer: ask for on_report. */
#define VRAM_LISTENER_REPORT 1

/* vram_listener.flags: capture the pool's state for on_report. */
#define VRAM_LISTENER_STATE 0x1u

typedef struct vram_listener {
    uint32_t size;   /* sizeof(vram_listener) */
    uint32_t events; /* VRAM_EVENT_BIT()s of the events it hears */
    unsigned flags;  /* VRAM_LISTENER_* */
    /* Under the pool's lock (see above). *note (NULL on entry) goes to
     * on_report; returns 0 or VRAM_LISTENER_REPORT. Required. */
    int (*on_event)(void *ctx, vram_pool *pool, const vram_event *ev, void **note);
    /* After the lock, when on_event asked for it (then required). `state`
     * is NULL without VRAM_LISTENER_STATE. */
    void (*on_report)(void *ctx, vram_pool *pool, const vram_event *ev,
                      const vram_pool_state *state, void *note);
    /* Once, when the listener is removed or its pool destroyed (no lock
     * held, no other callback running): release ctx. Its error is what
     * vram_pool_unlisten or vram_pool_destroy returns. May be NULL. */
    int (*on_detach)(void *ctx, vram_pool *pool);
    void *ctx;
} vram_listener;

/* At most this many listeners per pool. */
#define VRAM_LISTENERS_MAX 16

/* Attach a listener (copied); *id (may be NULL) names it for
 * vram_pool_unlisten. VRAM_EINVAL for a NULL argument or a bad table (no
 * on_event, unknown event bits, a size no version of vram_listener had),
 * VRAM_ELIMIT past VRAM_LISTENERS_MAX, VRAM_EBUSY from inside an on_event
 * of this pool or any on_report on this thread. Nothing is attached, and
 * on_detach is not called, on error. */
VRAM_API int vram_pool_listen(vram_pool *pool, const vram_listener *listener, uint32_t *id);

/* Remove a listener, after its on_report steps running on other threads
 * finish (it polls for them with the lock released); then its on_detach
 * runs on this thread, whose error is returned (the listener is gone all
 * the same). VRAM_EINVAL for a NULL pool or an unknown id, VRAM_EBUSY from
 * inside an on_event of this pool or any on_report on this thread (nothing
 * changes then). */
VRAM_API int vram_pool_unlisten(vram_pool *pool, uint32_t id);

/* ---- the ring of the last events ---- */

typedef struct vram_ring vram_ring;

/* One ring entry. */
typedef struct vram_ring_event {
    double time_s;    /* wall clock (a coarse clock: milliseconds) */
    vram_event_type type;
    uint64_t addr;    /* 0 for a refusal */
    uint64_t size;    /* as requested */
    vram_owner owner;
    vram_kind kind;
    vram_stream stream;
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_ring_event;

/* Keep the pool's last `capacity` events (1 .. 2^24), a listener of its
 * own: each event costs a clock read and an 80-byte store under the lock.
 * The ring lives until vram_pool_ring_detach or the pool's end, which free
 * it. Attach: VRAM_EINVAL for NULL arguments or a capacity out of range,
 * VRAM_EHOSTMEM, and vram_pool_listen's errors; *out is NULL on error.
 * Detach: VRAM_EINVAL for a NULL pool or ring, or a ring of another pool,
 * and vram_pool_unlisten's errors. */
VRAM_API int vram_pool_ring_attach(vram_pool *pool, uint32_t capacity, vram_ring **out);
VRAM_API int vram_pool_ring_detach(vram_pool *pool, vram_ring *ring);

/* Copy the ring's events, oldest first, into out[0 .. cap-1] (the newest
 * cap when it holds more); *n gets how many were copied and *total (may be
 * NULL) how many events the ring has seen. Safe from any thread, and from
 * a listener's on_event of the same pool (where the lock is held already),
 * while the ring lives. VRAM_EINVAL for a NULL ring or n, or a NULL out
 * with cap > 0. */
VRAM_API int vram_ring_read(vram_ring *ring, vram_ring_event *out, size_t cap, size_t *n,
                   uint64_t *total);

/* ---- traces ---- */

/* Write every event of the pool from now on to `path` in RMM's CSV format
 * (vramkit/trace.h; gzip when it ends in .gz), truncating it. Pools of one
 * process tracing to the same path share one writer, so none truncates
 * another's lines. VRAM_EIO naming the path when it cannot be created,
 * VRAM_EBUSY when the pool traces already, VRAM_EINVAL for a NULL pool or
 * a NULL or empty path (copied), and vram_pool_listen's errors (nothing
 * is left open then). Each event is written under the pool's lock. A
 * failed write stops the trace (logged); vram_pool_trace_stop and
 * vram_pool_destroy then report it. */
VRAM_API int vram_pool_trace_start(vram_pool *pool, const char *path);
/* 0, VRAM_EINVAL when the pool has no trace (or is NULL), or VRAM_EIO when
 * the trace is incomplete (a write or closing it failed; the trace is
 * stopped all the same). From inside a listener it is VRAM_EBUSY, and the
 * trace then runs on until the pool is destroyed. */
VRAM_API int vram_pool_trace_stop(vram_pool *pool);

/* ---- pools made from the configuration ---- */

/* What a layer attaches to every pool whose options ask for the configured
 * listeners (vram_pool_opts.configured_listeners, which vram_pool_opts_init
 * sets): core attaches a trace when VRAM_TRACE names one; libvramkit-observe
 * registers a hook (when it is loaded) that watches pools for OOM reports
 * when VRAM_OOM_DIR names a directory. on_create runs at the end of
 * vram_pool_create, on the creating thread, with no lock held (it may call
 * the pool: attach listeners); an error fails the creation (the pool is
 * destroyed, listeners attached so far detached, and the error returned). */
typedef struct vram_pool_hook {
    uint32_t size; /* sizeof(vram_pool_hook), set by the caller; 0 reads as this
                      version. The library reads no further than it says. */
    int (*on_create)(void *ctx, vram_pool *pool);
    void *ctx;
} vram_pool_hook;

/* Register a hook for the rest of the process (thread-safe; the same hook,
 * on_create and ctx, twice is registered once). The struct is copied; ctx
 * must stay valid for the process: hooks are never removed. VRAM_EINVAL
 * for a NULL hook, a bad size or no on_create, VRAM_ELIMIT past 8 hooks. */
VRAM_API int vram_pool_hook_add(const vram_pool_hook *hook);

#ifdef __cplusplus
}
#endif
#endif
