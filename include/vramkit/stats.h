/* vramkit/stats.h - statistics of a pool, its owners and its kinds, and the
 * JSON snapshot of its blocks.
 *
 * One X-macro list per record generates the struct, the text table, the JSON
 * and the Prometheus names (vram_pool_<field>), so they never disagree. The
 * printing functions write through a caller-supplied vram_write_fn.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code (VRAM_EINVAL for a
 * NULL pool or out, or an unknown owner or kind; a printer's also the
 * writer's error, VRAM_EINVAL for a NULL writer or unknown flags, and
 * VRAM_EHOSTMEM); the records are the caller's, filled whole under the
 * pool's lock (so consistent with each other) and not written on error.
 * Every call is thread-safe with the pool's other calls. */
#ifndef VRAMKIT_STATS_H
#define VRAMKIT_STATS_H

#include "vramkit/api.h"

#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(field, type, help); type is U64 or F64. Field names carry their unit. */
#define VRAM_POOL_STATS(X)                                                             \
    X(live_bytes, U64, "bytes in live blocks, as requested")                           \
    X(peak_live_bytes, U64, "most live bytes so far")                                  \
    X(allocated_bytes, U64, "bytes of live blocks after alignment")                    \
    X(reserved_bytes, U64, "bytes held from the backend")                              \
    X(peak_reserved_bytes, U64, "most reserved bytes so far")                          \
    X(free_bytes, U64, "reserved bytes in no live or pending block")                              \
    X(largest_free_bytes, U64, "largest free run of reserved memory")                  \
    X(fragmentation_ratio, F64, "1 - largest free / free (0 when nothing is free)")    \
    X(pending_bytes, U64, "freed bytes waiting for their stream's event")              \
    X(live_blocks, U64, "blocks allocated and not freed")                              \
    X(allocs_total, U64, "successful allocations")                                     \
    X(frees_total, U64, "frees")                                                       \
    X(failed_allocs_total, U64, "allocations refused (budget or memory)")              \
    X(budget_failures_total, U64, "allocations refused by an owner's budget")          \
    X(backend_calls_total, U64, "calls into the backend")                              \
    X(backend_failures_total, U64, "backend calls that failed")                        \
    X(event_waits_total, U64, "waits for stream events (memory short, trim, destroy)") \
    X(trims_total, U64, "trims, asked for or forced by memory pressure")                \
    X(charged_bytes, U64, "bytes charged for memory the pool did not allocate (not in live_bytes)") \
    X(limit_bytes, U64, "most bytes the pool may hold from the backend (VRAM_POOL_LIMIT)")          \
    X(released_bytes_total, U64, "bytes given back to the backend")                                \
    X(decay_released_bytes_total, U64, "of those, given back by the decay thread")                 \
    X(stream_waits_total, U64, "blocks taken from another stream's frees, waited for on the device")

/* Budgets and owner/kind live bytes count bytes as requested, not aligned. */

/* Per owner and per kind. */
#define VRAM_USAGE_STATS(X)                                                            \
    X(live_bytes, U64, "bytes in live blocks, as requested")                           \
    X(peak_live_bytes, U64, "most live bytes so far")                                  \
    X(live_blocks, U64, "blocks allocated and not freed")                              \
    X(allocs_total, U64, "successful allocations")                                     \
    X(frees_total, U64, "frees")                                                       \
    X(failed_allocs_total, U64, "allocations refused")                                 \
    X(budget_bytes, U64, "budget (0: none; owners only)")                                 \
    X(charged_bytes, U64, "of live_bytes, bytes charged for memory the pool did not allocate")

#define VRAM_STATS_TYPE_U64 uint64_t
#define VRAM_STATS_TYPE_F64 double

/* Block-size histogram: bucket i counts requests of up to 256 << i bytes
 * (the last bucket: everything larger). */
#define VRAM_HIST_BUCKETS 24

/* Room for the fields of each record: every field is 8 bytes, and a field
 * added to a list takes one of the reserved slots after them, so the
 * records keep their size and their fields' places from one version to the
 * next, and a program built against older headers reads what it knows. */
#define VRAM_POOL_STATS_SLOTS 40
#define VRAM_USAGE_STATS_SLOTS 16
#define VRAM_STATS_COUNT(field, type, help) +1

typedef struct vram_pool_stats {
    uint64_t hist_allocs[VRAM_HIST_BUCKETS]; /* requests per size bucket */
    uint64_t hist_live[VRAM_HIST_BUCKETS];   /* live blocks per size bucket */
#define VRAM_STATS_FIELD(field, type, help) VRAM_STATS_TYPE_##type field;
    VRAM_POOL_STATS(VRAM_STATS_FIELD)
    uint64_t reserved[VRAM_POOL_STATS_SLOTS - (0 VRAM_POOL_STATS(VRAM_STATS_COUNT))];
} vram_pool_stats;

typedef struct vram_usage_stats {
    VRAM_USAGE_STATS(VRAM_STATS_FIELD)
#undef VRAM_STATS_FIELD
    uint64_t reserved[VRAM_USAGE_STATS_SLOTS - (0 VRAM_USAGE_STATS(VRAM_STATS_COUNT))];
} vram_usage_stats;

/* Upper bound in bytes of histogram bucket i (UINT64_MAX for the last). */
VRAM_API uint64_t vram_hist_bucket_limit(unsigned i);

/* Counters are exact; largest_free_bytes and fragmentation are computed by a
 * walk of the free space, so this costs O(free blocks). */
VRAM_API int vram_pool_stats_get(vram_pool *pool, vram_pool_stats *out);

/* The counters alone, in O(1): the same as vram_pool_stats_get but with
 * largest_free_bytes and fragmentation_ratio 0 (free_bytes is exact). For
 * reading on every operation, as trace replay does. */
VRAM_API int vram_pool_stats_counters(vram_pool *pool, vram_pool_stats *out);

/* Usage of one owner / one kind. VRAM_EINVAL for an unknown one. */
VRAM_API int vram_owner_stats_get(vram_pool *pool, vram_owner owner, vram_usage_stats *out);
VRAM_API int vram_kind_stats_get(vram_pool *pool, vram_kind kind, vram_usage_stats *out);

/* Reset peaks to the current values (live, reserved), e.g. between runs.
 * A NULL pool is ignored. */
VRAM_API void vram_pool_reset_peaks(vram_pool *pool);

/* Print the pool's statistics, every owner, every kind and the histogram: a
 * text table or, with VRAM_PRINT_JSON, one JSON object. Either is built
 * under the pool's lock and written after it (the table in one call of
 * `write`), so the writer may be slow or call the pool. */
VRAM_API int vram_pool_stats_print(vram_pool *pool, vram_write_fn write, void *ctx,
                                   unsigned flags);

/* Write a JSON snapshot: settings, segments (for vmm: mapped runs), every
 * block (address, size, requested size, owner, kind, state, stream), and
 * per-owner and per-kind totals. Consistent: taken under the pool's lock. */
/* flags: 0 (a snapshot is JSON whatever they say; VRAM_PRINT_JSON is
 * accepted). Built under the pool's lock, written after it (in one call
 * of the writer, then a newline), so the writer may call the pool. */
VRAM_API int vram_pool_snapshot(vram_pool *pool, vram_write_fn write, void *ctx, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
