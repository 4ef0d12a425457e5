/* vramkit/pool.h - the governed pool: stream-ordered allocation with owners,
 * kinds, budgets, statistics, trim and snapshots. Thread-safe: every call may
 * come from any thread, concurrently, but vram_pool_destroy, which must be
 * the pool's last call (no other thread in or entering a call of it).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error() (a refusal names the pool, the owner and the numbers);
 * a call that fails changes nothing (vram_pool_destroy and vram_pool_trim
 * say where they differ). The caller destroys a pool with
 * vram_pool_destroy(), once every block is freed. A backend passed in
 * opts.backend is borrowed: it must outlive the pool (vram_backend_destroy
 * refuses while the pool lives); one the pool made itself is destroyed
 * with it. Names (the pool's, owners') are copied. Every call takes the
 * pool's lock; listeners' on_event runs under it too (vramkit/listener.h).
 * The vmm policy releases the lock while the backend maps or unmaps memory,
 * so other threads' allocations from memory held already go on; the
 * segments policy calls its backend under it, as PyTorch's allocator does.
 *
 * Limit and decay: a pool holds at most opts.limit bytes from its backend
 * (VRAM_POOL_LIMIT; 0: the device's free memory at creation less a margin).
 * Below it, freed memory stays held and is reused without a backend call;
 * when new memory would pass it, free memory goes back first, oldest first,
 * and an allocation fails only when live blocks with their rounding (and
 * frees still waiting for their streams) leave no room, the message saying
 * so with the numbers. A thread per pool gives back memory left unused for
 * opts.decay_ms (VRAM_DECAY_MS), keeping opts.retain_min, so a service's
 * memory returns to the device after its load stops, without a backend call
 * on the allocating threads.
 *
 * Policies:
 *  - VRAM_POLICY_VMM (default): one reserved virtual range per size class
 *    (small requests apart from large ones), backed by physical memory mapped
 *    at the granularity where blocks live; a block is placed at the lowest
 *    address among the first few free blocks that fit, so freed granules are
 *    reused before new ones are mapped. Physical pages can back any address,
 *    so free space never strands inside a segment.
 *  - VRAM_POLICY_SEGMENTS: segments from the backend (2 MiB for small
 *    requests, 20 MiB for medium ones, the request rounded up to 2 MiB for
 *    large ones), split and coalesced within a segment, as PyTorch's caching
 *    allocator does. Free segments return to the backend on trim and when the
 *    backend runs out of memory.
 *
 * Stream order: a block freed with vram_pool_free(pool, ptr, s) is reusable
 * by other streams only once an event recorded after the free has completed.
 * Backends with real events (CUDA): while s is the only stream that has used
 * the pool, a free is reusable at once; when a second stream first uses the
 * pool, the pool waits once for the work queued on the first. From then on a
 * block is reusable by s itself at once (work on one stream runs in order)
 * and by the others after an event: events are recorded lazily, one
 * per stream for all its frees since the previous one, only when an
 * allocation would otherwise take new memory from the backend, and queried
 * then; the pool waits for them only when memory is short, on trim and on
 * destroy (a failed query or wait keeps the blocks pending); where those
 * do not serve an allocation, a block another stream freed does, the
 * allocating stream made to wait on the device for the freer's event
 * (opts.stream_waits, backends with stream_wait_event). A stream must
 * therefore outlive the frees made on it: trim the pool (or free nothing
 * more on it) before destroying a stream. On backends without events (sim,
 * host) completion is modelled
 * conservatively: the event of a free on stream s completes when s issues its
 * next operation on this pool (an allocation or a free); until then the block
 * is reusable by s alone. An operation is an allocation or free call that
 * reaches the pool's bookkeeping: refused allocations (budget, memory) count,
 * calls refused as invalid (size 0, unknown owner, unknown pointer) do not.
 * An allocation never waits on a modelled event;
 * vram_pool_trim() and vram_pool_destroy() treat all of them as complete. */
#ifndef VRAMKIT_POOL_H
#define VRAMKIT_POOL_H

#include "vramkit/api.h"

#include <stdint.h>

#include "vramkit/backend.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_pool vram_pool;

typedef enum vram_policy {
    VRAM_POLICY_VMM = 0,
    VRAM_POLICY_SEGMENTS = 1,
} vram_policy;

/* What an allocation is for. X(NAME, name) */
#define VRAM_KINDS(X)                                                          \
    X(WEIGHTS, weights)                                                        \
    X(ACTIVATIONS, activations)                                                \
    X(IO, io)                                                                  \
    X(FRAMES, frames)                                                          \
    X(WORKSPACE, workspace)                                                    \
    X(DECODER, decoder)                                                        \
    X(OTHER, other)

typedef enum vram_kind {
#define VRAM_KIND_ENUM(NAME, name) VRAM_KIND_##NAME,
    VRAM_KINDS(VRAM_KIND_ENUM)
#undef VRAM_KIND_ENUM
    VRAM_KIND_COUNT
} vram_kind;

/* Who an allocation belongs to: a video stream, a model, the service. Owner 0
 * is every pool's "default" owner, without a budget. */
typedef uint32_t vram_owner;
#define VRAM_OWNER_DEFAULT 0u
#define VRAM_OWNERS_MAX 4096u

typedef struct vram_pool_opts {
    uint32_t size; /* sizeof(vram_pool_opts), which vram_pool_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    const char *name;       /* in messages, snapshots and metrics; "pool" if NULL
                               (copied) */
    vram_backend *backend;  /* borrowed, must outlive the pool; NULL: the pool
                               creates one from VRAM_BACKEND and owns it */
    vram_policy policy;
    uint64_t alignment;     /* power of two, >= 256 recommended */
    uint64_t granularity;   /* vmm mapping unit; 0: the backend's */
    uint64_t map_chunk;     /* vmm: most bytes one mapping backs while the pool
                               holds under a quarter of its limit (a mapping is
                               unmapped only whole); 0: one granule */
    uint64_t huge_size;     /* vmm, on backends with segments too, and with a
                               limit given (opts.limit): requests of at least
                               this size get a mapping of their own, rounded to
                               the granularity, reused whole and given back
                               when the limit needs room (16 MiB); 0: never.
                               With no limit nothing would give them back,
                               so they share the large region */
    uint64_t retain_min;    /* free bytes the decay leaves held */
    uint64_t limit;         /* most bytes held from the backend; 0: the device's
                               free memory at creation, less (GPU backends)
                               the larger of 256 MiB and 1/64 of its total */
    uint64_t decay_ms;      /* free memory unused this long goes back, from a
                               thread of the pool; 0: no thread, memory goes
                               back only under the limit or on trim */
    uint64_t small_size;    /* requests up to this are packed apart */
    uint64_t large_round;   /* vmm: larger requests are rounded up to a multiple of
                               this, so that the hole a slowly growing tensor leaves
                               fits its successor (power of two; 0: alignment) */
    uint64_t segment_small; /* segments policy: segment for small requests */
    uint64_t segment_medium; /* segments policy: segment for requests < 10 MiB */
    int configured_listeners; /* attach what the configuration names
                               (vramkit/listener.h): a trace of every event
                               when VRAM_TRACE is set and, where
                               libvramkit-observe is loaded, OOM reports when
                               VRAM_OOM_DIR is (a directory that cannot be
                               created fails vram_pool_create with VRAM_EIO);
                               vram_pool_opts_init sets 1 */
    uint32_t place_candidates; /* vmm: free blocks compared for the lowest
                               address (0: the size classes' good fit) */
    int stream_waits;       /* backends whose events can be waited for on the
                               device: a block another stream freed may be
                               taken before its event completes, the taking
                               stream waiting for it on the device, rather
                               than new memory (1, VRAM_STREAM_REUSE=wait); 0:
                               only once complete (=completed) */
    int reclaim_large;      /* backends with events, several streams: before a
                               request of reclaim_min bytes or more (and above
                               small_size) is placed on new memory or carves
                               a block much larger than itself, the frees of
                               every stream whose work completed rejoin the
                               shared free space (an event record and query
                               per stream each time; 1, the default,
                               VRAM_STREAM_RECLAIM=large); 0 (=need): only
                               when new memory would be taken */
    uint64_t reclaim_min;   /* with reclaim_large: the least request (after
                               rounding) that rejoins first
                               (VRAM_STREAM_RECLAIM_MIN, 16 MiB; 0: every
                               request above small_size); an opts record
                               from before this field gets the configured
                               value */
    int gpu;                /* the GPU (device index) the pool serves, for
                               its labels only: its metrics carry gpu="N",
                               its snapshots and OOM reports "gpu": N
                               (0..1023; -1, the default, for none) */
} vram_pool_opts;

/* Fill `opts` from the configuration (VRAM_* environment and overrides).
 * Returns 0 or VRAM_EINVAL when an environment variable is malformed (opts
 * then hold the defaults for it) or opts is NULL. */
VRAM_API int vram_pool_opts_init(vram_pool_opts *opts);

/* Create a pool. opts may be NULL (configuration values). VRAM_EINVAL for
 * a NULL out, a bad opts.size or option, or a backend that cannot serve the
 * policy; the errors of making the default backend (VRAM_ENOSYS without a
 * GPU, ...); VRAM_EBACKEND or VRAM_ENOMEM when the vmm policy cannot
 * reserve its ranges; VRAM_EIO when a configured listener cannot start (a
 * trace or an OOM directory that cannot be created); VRAM_EHOSTMEM. On
 * error *out is NULL and nothing is leaked: listeners attached so far are
 * detached, a default backend destroyed, a borrowed one left as it was. The
 * pool keeps its own copies of strings. */
VRAM_API int vram_pool_create(const vram_pool_opts *opts, vram_pool **out);

/* Destroy a pool and give everything back to the backend. Refuses with
 * VRAM_EBUSY (and changes nothing) while blocks are live; the message names
 * how many and their bytes. It waits for the events of pending frees
 * first. Then every listener is detached (each on_detach runs, last
 * attached first; rings, traces and OOM watches end, and a vram_ring of
 * the pool is freed), and a backend the pool made is destroyed.
 * VRAM_EBACKEND means the pool is gone but the backend refused to take
 * some memory back (it is lost to the backend); another error, that the
 * pool is gone but a listener's detach failed (VRAM_EIO: its trace could
 * not be finished). In every case but VRAM_EBUSY the handle is invalid
 * afterwards, as are the owner names it handed out. NULL is accepted. */
VRAM_API int vram_pool_destroy(vram_pool *pool);

/* Register an owner; budget 0 means none. The name is copied. Names are
 * unique per pool: creating an existing name, a NULL or empty one, returns
 * VRAM_EINVAL. VRAM_ELIMIT past VRAM_OWNERS_MAX, VRAM_EHOSTMEM. *out (may be
 * NULL) is set on success only. Owners are never removed. */
VRAM_API int vram_owner_create(vram_pool *pool, const char *name, uint64_t budget, vram_owner *out);

/* Look an owner up by name; VRAM_EINVAL if there is none (or pool or name
 * is NULL; out must not be). */
VRAM_API int vram_owner_find(vram_pool *pool, const char *name, vram_owner *out);

/* Change an owner's budget (0: none). Lowering it below the owner's live
 * bytes is allowed: its next requests fail until it frees enough.
 * VRAM_EINVAL for an unknown owner. */
VRAM_API int vram_owner_set_budget(vram_pool *pool, vram_owner owner, uint64_t budget);

/* Name of an owner, or NULL for an unknown id or a NULL pool. The pool's
 * string: valid while the pool lives. */
VRAM_API const char *vram_owner_name(vram_pool *pool, vram_owner owner);

/* Allocate `size` bytes (> 0) for `owner`, of `kind`, to be used on `stream`.
 * Errors: VRAM_EINVAL (NULL pool or ptr, size 0, unknown owner or kind),
 * VRAM_EBUDGET (this owner's budget would be exceeded: only this owner's
 * request fails), VRAM_ENOMEM (the backend has no more memory even after
 * returning free memory), VRAM_EBACKEND (a backend call failed otherwise),
 * VRAM_EHOSTMEM (block descriptors). *ptr is NULL on error, and
 * vram_last_error() holds the sentence with the numbers. The block is the
 * caller's until vram_pool_free; the pool never frees it by itself. */
VRAM_API int vram_pool_alloc(vram_pool *pool, uint64_t size, vram_owner owner, vram_kind kind,
                    vram_stream stream, void **ptr);

/* Free a block after the work queued on `stream` that uses it. NULL is a
 * no-op. VRAM_ENOTALLOC for a pointer this pool did not hand out or freed
 * already (a double free), VRAM_EHOSTMEM when the pool cannot track a new
 * stream (the block stays live), VRAM_EINVAL for a NULL pool: nothing
 * changes then. */
VRAM_API int vram_pool_free(vram_pool *pool, void *ptr, vram_stream stream);

/* Memory the pool did not allocate but that an owner holds: device memory
 * a driver takes for itself (an NVDEC decoder's surfaces, say), measured
 * by the caller. A charge counts in the owner's and the kind's live bytes
 * and against the owner's budget as an allocation of that size would
 * (VRAM_EBUDGET with the sentence when it does not fit: nothing is
 * charged then), and in charged_bytes of the owner, the kind and the pool;
 * it takes nothing from the backend, so the pool's live, allocated and
 * reserved bytes do not include it, and no listener hears of it.
 * vram_pool_uncharge gives bytes back: VRAM_EINVAL (nothing changes) when
 * the owner or the kind has fewer charged bytes than that. Both:
 * VRAM_EINVAL for a NULL pool, an unknown owner or kind, or 0 bytes. */
VRAM_API int vram_pool_charge(vram_pool *pool, uint64_t size, vram_owner owner, vram_kind kind);
VRAM_API int vram_pool_uncharge(vram_pool *pool, uint64_t size, vram_owner owner,
                                vram_kind kind);

/* Size and owner of a live block, into *out (the caller's). VRAM_ENOTALLOC
 * when ptr is not live (NULL included), VRAM_EINVAL for a NULL pool or out;
 * *out is not written on error. */
typedef struct vram_block_info {
    uint64_t size;      /* bytes reserved for it (aligned) */
    uint64_t requested; /* bytes asked for */
    vram_owner owner;
    vram_kind kind;
    vram_stream stream;
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_block_info;
VRAM_API int vram_pool_block_info(vram_pool *pool, const void *ptr, vram_block_info *out);

/* Return every free byte the backend can take back (free segments, free
 * mapped granules). A trim synchronises first, as emptying PyTorch's cache
 * does: it waits for the events of pending frees (on backends without events
 * it takes every stream's earlier work as complete), so after the work on
 * all streams is finished, freeing everything and trimming leaves nothing
 * reserved. *released (may be NULL) gets the bytes returned, on error too.
 * Errors of the backend (VRAM_EBACKEND), or of an event wait, are reported;
 * what could not be returned stays in the pool, usable. VRAM_EINVAL for a
 * NULL pool. */
VRAM_API int vram_pool_trim(vram_pool *pool, uint64_t *released);

/* The pool's name (its copy, valid while it lives), policy and backend
 * (the one opts named, or the pool's own, which the caller must not
 * destroy); NULL, VRAM_POLICY_VMM and NULL for a NULL pool. */
VRAM_API const char *vram_pool_name(const vram_pool *pool);
VRAM_API vram_policy vram_pool_policy(const vram_pool *pool);
VRAM_API vram_backend *vram_pool_backend(const vram_pool *pool);
/* The GPU opts.gpu named (-1: none, or a NULL pool). */
VRAM_API int vram_pool_gpu(const vram_pool *pool);

/* Static names ("?" for an unknown value), and their parsers: VRAM_EINVAL
 * for an unknown or NULL name or a NULL out (set on success only). */
VRAM_API const char *vram_kind_name(vram_kind kind);
/* Parse a kind name; VRAM_EINVAL if unknown. */
VRAM_API int vram_kind_parse(const char *name, vram_kind *out);
VRAM_API const char *vram_policy_name(vram_policy policy);
VRAM_API int vram_policy_parse(const char *name, vram_policy *out);

#ifdef __cplusplus
}
#endif
#endif
