/* vramkit/oom.h - the OOM report: when a watched pool refuses an allocation
 * (VRAM_EBUDGET: an owner's budget; VRAM_ENOMEM: the device), vramkit writes
 * what it takes to diagnose it, in three files:
 *
 *   <dir>/oom-<pool>-<UTC time>-<seq>.txt            for people
 *   <dir>/oom-<pool>-<UTC time>-<seq>.json           for programs
 *   <dir>/oom-<pool>-<UTC time>-<seq>.snapshot.json  vram_pool_snapshot()
 *
 * (UTC time as 20251130T120000Z, seq a number unique in the process; the
 * pool's name with characters other than letters, digits, '.', '_' and '-'
 * replaced by '_'). A report holds the request (size, owner, kind, stream,
 * error and its sentence); live bytes per owner (with peak and budget) and
 * per kind; reserved against live; free bytes, the largest free block and
 * the fragmentation ratio; the device's free memory as the backend sees it;
 * the GPU as NVML sees it, with every process on it and what the other
 * processes hold (or why there is no reading); the monitor's trend of live
 * bytes (or why there is none); the pool's last events (a ring); the path of
 * a snapshot taken at the refusal; and one line of diagnosis naming the
 * likeliest of four causes with the numbers behind it.
 *
 * Diagnosis. S is the request, and "growing" is the attached monitor's leak
 * verdict for this pool (vram_monitor_trend: a slope above its threshold with
 * its confidence; no monitor, or too few samples: not growing).
 *  Budget refusals:
 *   1. S alone exceeds the owner's budget            -> exceeds_configured
 *   2. growing                                       -> leak
 *   3. otherwise (live + S exceed the budget)        -> exceeds_configured
 *  Device refusals. C is the device: the backend's capacity, or the GPU's
 *  total when NVML reads a smaller one. Device free is the backend's free
 *  memory (the smaller of it and NVML's when both are known).
 *   1. S > C                                         -> exceeds_configured
 *   2. free in the pool + device free >= S, while the largest free block
 *      and the device free are both < S              -> fragmentation
 *   3. growing                                       -> leak
 *   4. NVML lists other processes holding at least the shortfall
 *      (S - the larger of the largest free block and the device free):
 *      without them the request would fit           -> other_processes
 *   5. otherwise (what is live plus S does not fit)  -> exceeds_configured
 *  The order puts what the numbers at the refusal prove (a request too
 *  large, free memory in pieces) before the trend, and the trend before
 *  other processes: a pool that keeps growing fails sooner or later whoever
 *  else shares the GPU, while a level pool pushed out by another process
 *  fails only because of it.
 *
 * Reports are written outside the pool's lock, from a capture taken under it
 * at the refusal (so the figures are those of that moment), on the refusing
 * thread, before vram_pool_alloc returns: a refusal with a report costs
 * the snapshot and the files (milliseconds); one without, nothing more.
 * Writing never allocates from the pool, and a refusal made while a report
 * is written on the same thread (say, by the callback) is counted, never
 * reported. A failure to write is logged and counted, and never changes the
 * allocation's result: the caller gets VRAM_EBUDGET or VRAM_ENOMEM with
 * vram_last_error() holding the refusal's sentence, report or not. Reports
 * are rate-limited per pool: at most max_reports per window_s seconds; the
 * refusals beyond are counted, and the next report says how many there were.
 *
 * The watch is a listener of the pool's refusals, with a ring of its last
 * events (vramkit/listener.h). Where this library is loaded, pools made
 * with vram_pool_opts.configured_listeners (what vram_pool_opts_init sets)
 * are watched from their creation with the VRAM_OOM_* options whenever
 * VRAM_OOM_DIR names a directory.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(); a call that fails changes nothing. The watch is the
 * library's: it ends with vram_pool_oom_unwatch or when its pool is
 * destroyed, which frees it. Its options are copied (directory, PCI bus
 * id); the monitor and the callback's ctx are borrowed and must outlive the
 * watch. The report files are the caller's to keep or delete. Every call is
 * thread-safe. */
#ifndef VRAMKIT_OOM_H
#define VRAMKIT_OOM_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/monitor.h"
#include "vramkit/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The diagnosis. X(NAME, name) */
#define VRAM_OOM_CAUSES(X)                                                     \
    X(EXCEEDS_CONFIGURED, exceeds_configured)                                  \
    X(LEAK, leak)                                                              \
    X(FRAGMENTATION, fragmentation)                                            \
    X(OTHER_PROCESSES, other_processes)

typedef enum vram_oom_cause {
#define VRAM_OOM_CAUSE_ENUM(NAME, name) VRAM_OOM_##NAME,
    VRAM_OOM_CAUSES(VRAM_OOM_CAUSE_ENUM)
#undef VRAM_OOM_CAUSE_ENUM
    VRAM_OOM_CAUSE_COUNT
} vram_oom_cause;

/* "exceeds_configured", "leak", "fragmentation", "other_processes"; "?". */
VRAM_API const char *vram_oom_cause_name(vram_oom_cause cause);

/* What a written report was, for the callback. It and its strings live
 * for the call. */
typedef struct vram_oom_report_info {
    const char *pool;
    const char *text_path;
    const char *json_path;
    const char *snapshot_path; /* NULL if the snapshot could not be written */
    int error;                 /* VRAM_EBUDGET or VRAM_ENOMEM */
    uint64_t size_bytes;       /* the request */
    vram_oom_cause cause;
    const char *diagnosis;     /* the line */
    uint64_t suppressed;       /* refusals not reported since the previous report */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_oom_report_info;

/* Called on the refusing thread after a report is written, outside the
 * pool's lock, before vram_pool_alloc returns. It may use the pool (a
 * refusal there is not reported), but must not unwatch it (VRAM_EBUSY),
 * attach or remove listeners, or destroy the pool. */
typedef void (*vram_oom_fn)(void *ctx, const vram_oom_report_info *info);

typedef struct vram_oom_opts {
    uint32_t size; /* sizeof(vram_oom_opts), which vram_oom_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    const char *directory;    /* where reports go; created if missing (required) */
    uint32_t last_events;     /* events the pool keeps for reports (a ring; 0: none;
                                 at most 2^24) */
    vram_monitor *monitor;    /* trend of this pool's live bytes; NULL: none. It must
                                 outlive the watch */
    int gpu;                  /* the GPU to read (vramkit/nvml.h): VRAM_GPU_OWN, the
                                 pool's own when its backend is a GPU one (else
                                 none); an NVML index; or VRAM_GPU_NONE */
    const char *gpu_pci_bus_id; /* if set, the GPU at this PCI bus id instead */
    uint32_t max_reports;     /* most reports per window (>= 1) */
    double window_s;          /* the rate limit's window (> 0) */
    vram_oom_fn on_report;    /* may be NULL */
    void *ctx;
} vram_oom_opts;

/* Fill opts from the configuration: directory VRAM_OOM_DIR (may be empty),
 * last_events VRAM_OOM_EVENTS, max_reports VRAM_OOM_MAX_REPORTS per
 * window_s 60, gpu VRAM_OOM_GPU ("own"), no monitor, no callback. Returns 0 or
 * VRAM_EINVAL when an environment variable is malformed (its default is
 * kept) or opts is NULL. The directory and a PCI bus id point into the
 * configuration (vramkit/config.h). */
VRAM_API int vram_oom_opts_init(vram_oom_opts *opts);

/* Watch a pool: from now on its refused allocations are reported. The
 * options are copied; the directory is created now, once the pool is known
 * not to be watched already (VRAM_EIO naming it and why when it cannot
 * be). VRAM_EINVAL for
 * NULL arguments, a missing directory or bad options, VRAM_EBUSY if the
 * pool is watched already (or when called from inside a listener),
 * VRAM_ELIMIT when the pool has no room for the watch's two listeners,
 * VRAM_EHOSTMEM. A watched pool's allocations and frees also go into its
 * ring of last_events (a clock read and an 80-byte store each). The watch
 * ends with vram_pool_oom_unwatch or with the pool. */
VRAM_API int vram_pool_oom_watch(vram_pool *pool, const vram_oom_opts *opts);

/* Watch the pool as the configuration says: nothing (0) when VRAM_OOM_DIR
 * is empty, else vram_pool_oom_watch with vram_oom_opts_init's options and
 * its errors. Pools made with opts.configured_listeners are watched so
 * already, by a hook this library registers when it is loaded; this is for
 * a pool made without them (no trace, say) that should still report. */
VRAM_API int vram_pool_oom_watch_configured(vram_pool *pool);

/* Stop watching, after reports being written on other threads finish, and
 * free the watch. VRAM_EINVAL if the pool is not watched (or is NULL),
 * VRAM_EBUSY from the callback or any listener (the watch stays then). */
VRAM_API int vram_pool_oom_unwatch(vram_pool *pool);

typedef struct vram_oom_stats {
    uint64_t refusals;       /* budget and device refusals seen by the watch */
    uint64_t reports;        /* reports written */
    uint64_t suppressed;     /* refusals not reported (rate limit, or inside a report) */
    uint64_t write_failures; /* reports that could not be written */
    uint64_t reserved[4];
} vram_oom_stats;

/* The watch's counters, into *out (zeroed on error too). VRAM_EINVAL if
 * the pool is not watched, or for NULL arguments. */
VRAM_API int vram_pool_oom_stats(vram_pool *pool, vram_oom_stats *out);

/* The path of the last report's JSON ("" if none yet) into buf[0 .. cap-1],
 * NUL-terminated: a copy, the caller's. VRAM_EINVAL if the pool is not
 * watched, for a NULL pool, or a NULL buf with cap > 0; VRAM_ELIMIT when
 * cap is too small (the sentence gives the bytes needed; buf is then "",
 * and with cap 0 just the size is asked). */
VRAM_API int vram_pool_oom_last_report(vram_pool *pool, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
