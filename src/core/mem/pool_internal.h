/* src/core/mem/pool_internal.h - the pool object shared by the files of src/mem:
 * pool.c (public calls, locking), place.c (taking and returning blocks),
 * the policies behind vram__policy_ops (vmm*.c and huge.c: mapping granules;
 * segments.c: backend segments), decay.c (the thread giving memory back),
 * streams.c (stream order), owners.c, stats.c and snapshot.c. Every vram__
 * function here expects the pool's lock to be held; those that call the
 * backend for memory may release it during the call, and say so. */
#ifndef VRAM_MEM_POOL_INTERNAL_H
#define VRAM_MEM_POOL_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include "backend/backend_internal.h"
#include "base/u64map.h"
#include "block.h"
#include "tlsf.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/listener.h"
#include "vramkit/trace.h"

struct vram__json; /* base/json_out.h */

#define VRAM__REGIONS 2 /* 0: small requests, 1: large ones (vmm: reserved ranges) */
#define VRAM__HUGE 2    /* vmm: huge requests, each in a segment of its own */
#define VRAM__INDEXES 3 /* free indexes: the regions and the huge segments */
/* The free index covers blocks below 2^60 bytes; the large region spans
 * twice the capacity. */
#define VRAM__CAPACITY_MAX (1ull << 56)
#define VRAM__NO_PAGE (-1)

/* With real events: an event recorded on the stream, covering the blocks
 * freed on it up to epoch `epoch`. */
typedef struct vram__stream_event {
    void *event;
    uint64_t epoch;
} vram__stream_event;

typedef struct vram__stream_state {
    vram_stream handle;
    uint64_t seq;                 /* operations this stream issued on the pool */
    vram__block *pending_head;    /* blocks freed on it, waiting for their event */
    vram__block *pending_tail;
    uint32_t ordinal;
    /* With real events (see streams.c): blocks freed on this stream are
     * reusable by it at once, from its own index, and by the others once an
     * event recorded after their free has completed. Events are recorded
     * lazily, one per stream for all its frees since the last one. */
    vram__tlsf own[VRAM__INDEXES];
    uint64_t epoch;               /* frees of this epoch have no event yet */
    uint64_t open_bytes;          /* bytes freed in this epoch */
    vram__stream_event *events;   /* recorded, oldest first */
    size_t n_events, cap_events;
} vram__stream_state;

typedef struct vram__usage {
    uint64_t live_bytes, peak_live_bytes, live_blocks;
    uint64_t allocs_total, frees_total, failed_allocs_total;
    uint64_t charged_bytes;  /* of live_bytes: vram_pool_charge's */
} vram__usage;

typedef struct vram__owner {
    char *name;
    uint64_t budget;
    vram__usage u;
} vram__owner;

/* vmm: one reserved range per region, and a state per granule. BUSY: a
 * thread is mapping or unmapping it with the pool's lock released; whoever
 * needs it waits on the pool's `settled` condition. */
enum { VRAM__PAGE_UNMAPPED = 0, VRAM__PAGE_USED = 1, VRAM__PAGE_FREE = 2, VRAM__PAGE_BUSY = 3 };

/* A policy: how a pool gets memory from its backend and gives it back. The
 * shared path (place.c, pool.c) calls these and never asks which policy it
 * runs; lock held in every one (`back`, `grow` and `give_back` may release
 * it while the backend works). */
typedef struct vram__policy_ops {
    const char *name;
    int places_pressed; /* take places differently when memory is short */
    int (*init)(vram_pool *p);
    /* Give everything back at destroy; VRAM_EBACKEND if the backend refused some. */
    int (*destroy)(vram_pool *p);
    /* take: a free block for `size` in `region`, removed from the index, or
     * NULL (`pressed`: memory is short, place where the least is missing). */
    vram__block *(*take)(vram_pool *p, uint64_t size, int region, int pressed);
    /* pick: the block `take` would choose, unpressed, among the free blocks
     * of `index` (a stream's own frees; not the huge region), removed from
     * it, or NULL. */
    vram__block *(*pick)(vram_pool *p, vram__tlsf *index, uint64_t size);
    /* grow: new memory when no free block fits (0 with *out taken from it,
     * or the failure). */
    int (*grow)(vram_pool *p, uint64_t size, int region, vram_stream s, vram__block **out);
    /* Whether the rest of `b` after `size` bytes becomes a free block of its own. */
    int (*split)(const vram_pool *p, const vram__block *b, uint64_t size);
    /* Whether placing `size` bytes at free block `b` needs new memory. */
    int (*needs_memory)(const vram_pool *p, const vram__block *b, uint64_t size);
    /* Back a block just taken with memory (0 or the failure; the caller
     * releases the block then). */
    int (*back)(vram_pool *p, vram__block *b);
    /* freed: [addr, addr+size) became free, now inside free block `merged`. */
    void (*freed)(vram_pool *p, uint64_t addr, uint64_t size, const vram__block *merged);
    /* give_back: return free memory to the backend, oldest first, until at
     * least `want` bytes went back (UINT64_MAX: all it can) or nothing free
     * can go back; adds the bytes to *released. 0 or the first failure. */
    int (*give_back)(vram_pool *p, uint64_t want, uint64_t *released);
    /* decay: give back memory free since before `before_ms` (monotonic
     * milliseconds), keeping retain_min; the monotonic ms at which the
     * oldest memory still free became free (UINT64_MAX: none). */
    uint64_t (*decay)(vram_pool *p, uint64_t before_ms, uint64_t *released);
    uint64_t (*largest_free)(vram_pool *p);
    /* Snapshots: the memory held (segments, mapped runs), and the parts of a
     * free block that hold memory. */
    void (*held_json)(vram_pool *p, struct vram__json *j, vram__span *const *spans, size_t n);
    void (*free_json)(vram_pool *p, struct vram__json *j, const vram__block *b);
} vram__policy_ops;

extern const vram__policy_ops vram__vmm_ops, vram__segments_ops;

typedef struct vram__vmm_region {
    vram__span *span; /* the reservation */
    uint64_t page0;   /* index of its first granule in the pool's page table */
    uint64_t npages;
} vram__vmm_region;

enum { VRAM__SOLO_MARKS = 16 };

/* listener.c: an attached listener. */
typedef struct vram__listener_slot {
    vram_listener l;
    uint32_t id;
    unsigned inflight; /* its on_report steps running outside the lock */
    int removing;      /* being removed: hears no more events */
} vram__listener_slot;

/* The report steps one pool call owes, kept on the caller's stack. */
typedef struct vram__pending_report {
    vram_listener l;
    uint32_t id;
    void *note;
} vram__pending_report;

typedef struct vram__pending {
    size_t n;
    vram__pending_report item[VRAM_LISTENERS_MAX];
    vram_event ev;          /* a copy of the event */
    char message[1024];     /* its sentence */
    vram_pool_state *state; /* captured for VRAM_LISTENER_STATE, or NULL */
} vram__pending;

/* A captured state and what it points to (state first). */
typedef struct vram__state_capture {
    vram_pool_state state;
    vram_owner_state *owners;
    vram_buffer snapshot;
} vram__state_capture;

struct vram_pool {
    pthread_mutex_t lock;
    char *name;
    int gpu;            /* opts.gpu: for labels only */
    vram_backend *backend;
    int owns_backend;
    int has_events;
    int shared_streams; /* with events: a second stream has used the pool */
    /* With events and one stream, frees are stamped with solo_epoch; a mark
     * (an event recorded on the stream) covers every free stamped up to its
     * epoch, and frees stamped up to solo_done are known complete, so their
     * memory may go back to the driver without waiting. */
    uint64_t solo_epoch, solo_done, solo_freed; /* solo_freed: stamp of the last free */
    struct {
        void *event;
        uint64_t epoch;
    } solo_marks[VRAM__SOLO_MARKS]; /* outstanding, oldest first (a ring) */
    size_t solo_mark0, solo_nmarks;
    vram_policy policy;
    const vram__policy_ops *ops;
    uint64_t granule;     /* block size unit: max(alignment, 256) */
    uint64_t granularity; /* vmm mapping unit */
    uint64_t map_chunk;   /* vmm: most granules one mapping covers */
    uint64_t huge_size;   /* vmm: requests this large get a segment each; 0: never */
    uint64_t huge_free;   /* vmm: bytes of free huge segments (kept mapped) */
    vram__span *huge_head, *huge_tail; /* free huge segments, oldest first */
    uint64_t retain_min;  /* free bytes the decay leaves held */
    uint64_t limit;       /* most bytes held from the backend (the device's share) */
    int limit_given;      /* set by the caller (else the device's free memory) */
    uint64_t decay_ms;    /* free memory unused this long goes back; 0: kept */
    unsigned place_candidates; /* free blocks compared for the lowest address */
    int stream_waits; /* another stream's pending frees may be taken, waited
                         for on the device (the option, and the backend can) */
    int reclaim_large; /* with events and several streams: frees whose work
                          completed rejoin the shared space before a large
                          request is placed loosely or on new memory */
    uint64_t reclaim_min; /* the least request that does (0: above small_size) */
    uint64_t small_size, large_round, segment_small, segment_medium;
    uint64_t capacity;

    vram__block_slab slab;
    vram__u64map live; /* address -> live block */
    vram__tlsf free[VRAM__INDEXES];
    vram__span *spans; /* segments or reservations */
    size_t n_spans;

    /* vmm */
    vram__vmm_region vmm[VRAM__REGIONS];
    uint8_t *page_state;
    int32_t *lru_prev, *lru_next; /* free mapped granules, oldest first */
    int32_t lru_head, lru_tail;
    /* Mappings ("chunks", unmapped only whole): for each mapped granule the
     * index of its chunk's first granule; at that first granule the chunk's
     * length and how many of its granules are free; chunks entirely free in
     * a list, oldest first (what retention unmaps). */
    int32_t *chunk_of, *chunk_len, *chunk_free;
    int32_t *clru_prev, *clru_next;
    int32_t clru_head, clru_tail;
    uint64_t *chunk_stamp; /* at a chunk's first granule: when it became wholly free */
    uint64_t *chunk_ms;    /* ... and the monotonic milliseconds then */
    uint64_t busy_bytes;   /* granules being mapped, lock released */
    uint64_t unmapping_bytes; /* granules being given back, lock released */
    pthread_cond_t settled; /* broadcast when busy granules settle */
    /* decay.c: the thread giving back memory left free decay_ms */
    pthread_t decay_thread;
    pthread_cond_t decay_wake;
    int decay_running, decay_stop;
    uint64_t npages;
    uint64_t free_mapped; /* bytes of mapped granules with no block in them */

    /* streams */
    vram__stream_state *streams;
    size_t n_streams, cap_streams, last_stream;

    vram__owner *owners;
    size_t n_owners;
    vram__usage kinds[VRAM_KIND_COUNT];

    vram_pool_stats st; /* counters; largest free and fragmentation are computed */

    /* Listeners (listener.c), in the order they were attached; listen_mask
     * is the union of the event types they hear (0: none, the hot path's
     * only test). */
    vram__listener_slot listeners[VRAM_LISTENERS_MAX];
    size_t n_listeners;
    uint32_t next_listener_id;
    uint32_t listen_mask;
    uint32_t trace_id; /* the listener of vram_pool_trace_start, 0: none */
};

static inline int vram__pool_lock(vram_pool *p) { return pthread_mutex_lock(&p->lock); }
static inline void vram__pool_unlock(vram_pool *p) { pthread_mutex_unlock(&p->lock); }

static inline uint64_t vram__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Before new memory of `need` bytes is taken: give back free memory, oldest
 * first, so that held plus `need` stays within the limit. 0, or VRAM_ENOMEM
 * naming the limit and the live bytes when it cannot (lock may be released
 * while memory goes back). */
int vram__pool_make_room(vram_pool *p, uint64_t need);

/* place.c: take a block of `size` (a multiple of the granule) in `region`
 * (`pressed`: the backend refused memory, place where the least is missing;
 * `ss`, with events: the stream's own frees, taken when the shared free
 * space would need new memory, or NULL);
 * return a block to the free space (coalescing, vmm bookkeeping). */
int vram__pool_take(vram_pool *p, uint64_t size, int region, vram_stream s, int pressed,
                    vram__stream_state *ss, vram__block **out);
void vram__pool_release(vram_pool *p, vram__block *b);
/* Address neighbours within a span: `left` absorbs `right` (whose descriptor
 * goes back to the slab) and is returned; or `b` is cut to `size` bytes and
 * the rest, a new descriptor with no state yet, is returned (the slab must
 * have one reserved). Neither touches a free index. */
vram__block *vram__block_merge(vram_pool *p, vram__block *left, vram__block *right);
vram__block *vram__block_cut(vram_pool *p, vram__block *b, uint64_t size);
/* Insert a fresh free span covering [addr, addr+size) into `region`. */
int vram__pool_add_span(vram_pool *p, uint64_t addr, uint64_t size, int region,
                        vram__span **out);
void vram__pool_remove_span(vram_pool *p, vram__span *sp);

/* vmm.c, vmm_release.c, vmm_view.c and huge.c: the vmm policy. */
/* Give back free chunks (whole mappings), oldest first, while fewer than
 * `want` bytes went back, more than `keep` bytes of free memory stay mapped
 * and the chunk became free before `before_ms` (UINT64_MAX: any); the lock
 * is released during each unmap. Adds to *released; 0 or the first failure
 * (that chunk stays). */
int vram__vmm_unmap_free(vram_pool *p, uint64_t want, uint64_t keep, uint64_t before_ms,
                         uint64_t *released);
/* Unmap everything mapped and release the reservations (destroy); the
 * number of backend calls that failed. */
unsigned vram__vmm_release_all(vram_pool *p);
void vram__vmm_free_tables(vram_pool *p);
/* Whether the first `size` bytes of free block `b` touch an unmapped granule. */
int vram__vmm_unmapped_in(const vram_pool *p, const vram__block *b, uint64_t size);
uint64_t vram__vmm_largest_free(vram_pool *p);
void vram__vmm_held_json(vram_pool *p, struct vram__json *j, vram__span *const *spans, size_t n);
void vram__vmm_free_json(vram_pool *p, struct vram__json *j, const vram__block *b);

/* vmm huge blocks (huge.c): a segment of their own, mapped whole, kept
 * when free and given back oldest first. */
vram__block *vram__huge_take_free(vram_pool *p, uint64_t size);
int vram__huge_grow(vram_pool *p, uint64_t size, vram_stream s, vram__block **out);
void vram__huge_freed(vram_pool *p, vram__block *b);
/* Give back free huge segments, oldest first, with the same three bounds
 * as vram__vmm_unmap_free (the lock is held: a segment is one call). */
int vram__huge_release(vram_pool *p, uint64_t want, uint64_t keep, uint64_t before_ms,
                       uint64_t *released);
/* Whether a free huge block may serve *(uint64_t *)size bytes without too
 * much waste (a vram__tlsf_take_if predicate). */
int vram__huge_fits(void *size, const vram__block *b);

/* segments.c: a new segment for `size` in `region` (also the vmm policy's
 * huge blocks), its free block left in the index. */
int vram__segments_grow(vram_pool *p, uint64_t size, int region, vram_stream s);
/* Take `size` bytes from the segment just grown. */
int vram__segments_take_grown(vram_pool *p, uint64_t size, int region, vram__block **out);

/* decay.c: start and stop the pool's decay thread (lock not held). */
int vram__decay_start(vram_pool *p);
void vram__decay_stop(vram_pool *p);

/* streams.c */
int vram__stream_begin(vram_pool *p, vram_stream s, vram__stream_state **out);
int vram__stream_defer(vram_pool *p, vram__stream_state *ss, vram__block *b);
/* With events: the block of the stream's own frees the policy would pick
 * for `size`, taken out of its own index only (NULL: none that large); put
 * back with vram__stream_unpick, or handed out as a live block of `size`
 * with vram__stream_claim_own (a rest of a granule or more stays pending on
 * the stream; the slab must have a descriptor reserved). */
vram__block *vram__stream_pick_own(vram_pool *p, vram__stream_state *ss, uint64_t size,
                                   int region);
void vram__stream_unpick(vram__stream_state *ss, vram__block *b);
vram__block *vram__stream_claim_own(vram_pool *p, vram__stream_state *ss, vram__block *b,
                                    uint64_t size);
/* With events the device can wait for (p->stream_waits) and several
 * streams: a block of `size` from another stream's frees whose event may not
 * have completed, stream `ss` made to wait for that event on the device
 * (recorded now if the block's epoch had none) (0), or VRAM_ENOMEM when no
 * other stream has one that large or the wait cannot be queued (the block
 * stays pending; logged). */
int vram__stream_take_waiting(vram_pool *p, vram__stream_state *ss, uint64_t size, int region,
                              vram__block **out);
/* With events: record an event on every stream with frees not yet covered by
 * one, then release the blocks whose events completed (waiting for them when
 * `wait`). Returns the bytes released. */
uint64_t vram__streams_reclaim(vram_pool *p, int wait);
/* With events: query the events recorded already (none is recorded) and
 * release the blocks of those complete; the bytes. *failed is set when a
 * query fails (the blocks stay pending; nothing is logged). */
uint64_t vram__streams_poll(vram_pool *p, int *failed);
/* With events and a single stream: before memory it freed goes back to the
 * backend, wait for the work queued on it (once per batch of frees). 0 or
 * the backend's error (then nothing may be given back). */
int vram__streams_settle_solo(vram_pool *p);
/* Make sure the lone stream's frees stamped up to `stamp` are complete:
 * known already, found complete by querying outstanding marks, or else
 * waited for. 0 or the failure (memory must then stay mapped). */
int vram__streams_settle_upto(vram_pool *p, uint64_t stamp);
/* Record a mark covering the lone stream's frees so far, if there are new
 * ones and a slot (call it where a backend call is made anyway: it costs
 * well under a microsecond, and a later give-back need not wait). */
void vram__streams_mark(vram_pool *p);
uint64_t vram__streams_wait_all(vram_pool *p);
/* Complete every pending free, waiting for real events; without `force` a
 * block whose wait fails stays pending (and its error is returned). */
int vram__streams_flush_all(vram_pool *p, int force);
void vram__streams_destroy(vram_pool *p);

/* listener.c. notify: tell the listeners of `ev` (lock held), collecting
 * the report steps they ask for in `pend` (n = 0 and state = NULL on the
 * first call); report: run them after the lock is released, then return
 * `rc` with the thread's last error as it was. */
void vram__listeners_notify(vram_pool *p, vram_event *ev, vram__pending *pend);
void vram__listeners_report(vram_pool *p, vram__pending *pend, int rc);
static inline int vram__pool_listens(const vram_pool *p, vram_event_type t)
{
    return VRAM__UNLIKELY((p->listen_mask & VRAM_EVENT_BIT(t)) != 0);
}
/* At destroy (no other thread may use the pool): every on_detach, in
 * reverse order; the first error. */
int vram__listeners_detach_all(vram_pool *p);
/* The pool whose on_event this thread is in, or NULL. */
vram_pool *vram__listener_current(void);
/* Run the process's pool hooks on a new pool; the first error. */
int vram__pool_hooks_run(vram_pool *p);
/* trace_listener.c: the trace VRAM_TRACE names, for a new pool. */
int vram__pool_trace_configured(vram_pool *p);

/* owners.c */
int vram__owner_add(vram_pool *p, const char *name, uint64_t budget, vram_owner *out);
void vram__owners_destroy(vram_pool *p);

/* stats.c */
unsigned vram__hist_bucket(uint64_t size);
void vram__usage_to_stats(const vram__usage *u, uint64_t budget, vram_usage_stats *out);
uint64_t vram__pool_largest_free(vram_pool *p);
/* The statistics with free, largest free and fragmentation computed. */
void vram__pool_fill_stats(vram_pool *p, vram_pool_stats *out);
/* Free reserved bytes in no block (live or pending). */
uint64_t vram__pool_free_bytes(const vram_pool *p);

/* Reserved bytes changed by `delta` (backend acquisitions and releases). */
static inline void vram__pool_reserved_add(vram_pool *p, uint64_t bytes)
{
    p->st.reserved_bytes += bytes;
    if (p->st.reserved_bytes > p->st.peak_reserved_bytes)
        p->st.peak_reserved_bytes = p->st.reserved_bytes;
}
static inline void vram__pool_reserved_sub(vram_pool *p, uint64_t bytes)
{
    p->st.reserved_bytes -= bytes;
}

#endif
