/* tools/replay/replay.h - replay an allocation trace through a pool and measure
 * what it holds and what its bookkeeping costs, side by side with glibc
 * malloc/free replaying the same events in the same run; on a GPU backend
 * (cuda, cuda_async, vmm) with real device memory, one CUDA stream per
 * stream of the trace, and against the driver's own allocators. */
#ifndef VRAM_TOOLS_REPLAY_H
#define VRAM_TOOLS_REPLAY_H

#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/trace.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_replay_opts {
    vram_pool_opts pool;   /* policy, granularity, retention... (backend: see below) */
    const char *oom_dir;   /* OOM reports of the measured run go here; NULL/"": none
                              (vram_replay_opts_init: VRAM_OOM_DIR) */
    const char *backend;   /* built-in backend name; NULL: "sim" */
    uint64_t capacity;     /* backend capacity; 0: VRAM_CAPACITY */
    unsigned timing_runs;  /* timed repetitions of each side (median kept); 0: 5 */
    int skip_malloc;       /* do not time glibc malloc */
    double limit_ratio;    /* > 0: the pool's limit is this times the trace's
                              peak live bytes (as requested); else pool.limit */
    int sim_events;        /* sim: VRAM_SIM_EVENTS_* (vram_replay_opts_init:
                              VRAM_SIM_EVENTS) */
} vram_replay_opts;

typedef struct vram_replay_result {
    uint64_t events;          /* rows of the trace */
    uint64_t allocs, frees;
    uint64_t peak_live_bytes; /* pool's peak live (as requested) */
    uint64_t peak_reserved_bytes;
    double reserved_ratio;    /* peak reserved / peak live */
    uint64_t limit_bytes;     /* the pool's limit (the driver's allocators: 0) */
    double fragmentation_at_peak; /* at the moment reserved peaked */
    /* The most bytes live or freed but not yet reusable under the stream
     * model (pending) at once: no policy can hold less than this. */
    uint64_t peak_live_pending_bytes;
    double floor_ratio;       /* peak_live_pending_bytes / peak_live_bytes */
    uint64_t backend_calls;   /* in the first (measured) run */
    /* Of the measured run, with events: blocks taken from another stream's
     * frees with a device wait, and host waits for events. */
    uint64_t stream_waits, event_waits;
    uint64_t failed_allocs;   /* requests the pool refused */
    double ns_per_op;         /* host ns per event, median of timing_runs, each on a
                                 fresh pool (cold: growth included) */
    double warm_ns_per_op;    /* the same on a pool that replayed the trace once
                                 before (steady state) */
    double warm_backend_calls; /* backend calls per warm pass (mean) */
    /* Peak reserved of the warm pool over its whole life (the untimed pass
     * and every timed one), and its ratio to peak live: what a service that
     * runs the workload again and again holds. */
    uint64_t warm_peak_reserved_bytes;
    double warm_reserved_ratio;
    /* GPU backends: the most device memory in use (cuMemGetInfo, sampled after
     * every allocation of the measured run) above what was in use before, and
     * its ratio to peak live; 0 elsewhere. */
    uint64_t peak_driver_bytes;
    double driver_ratio;
    double malloc_ns_per_op;  /* the same for glibc malloc/free; 0 if skipped */
    /* The first refused request, if any. */
    uint32_t first_failure_line;
    uint64_t first_failure_size;
    char first_failure[512];
} vram_replay_result;

/* Fill opts with the configuration's values. */
int vram_replay_opts_init(vram_replay_opts *opts);

/* Replay `trace`. Refused allocations are counted (and their frees skipped);
 * the replay continues. Errors (VRAM_EINVAL, VRAM_EHOSTMEM, backend creation)
 * stop it; a full device does not. */
int vram_replay_run(const vram_trace *trace, const vram_replay_opts *opts, vram_replay_result *out);

/* The driver's allocators, replaying the same trace on the GPU for
 * comparison: the device's default memory pool through cuMemAllocAsync /
 * cuMemFreeAsync with the release threshold at its maximum (what
 * cudaMallocAsync uses), and cuMemAlloc / cuMemFree (what cudaMalloc and
 * cudaFree call). Driver calls are made directly, without the runtime's
 * layer, so the baselines' host times are if anything lower than the
 * runtime's. For the pool, peak_reserved_bytes is its reserved high-water
 * mark; for cuMemAlloc, the bytes handed out. Cold runs trim the pool to
 * zero first. VRAM_ENOSYS without a GPU. */
typedef enum vram_replay_baseline {
    VRAM_BASELINE_CUDA_MALLOC_ASYNC = 0,
    VRAM_BASELINE_CUDA_MALLOC = 1,
} vram_replay_baseline;

const char *vram_replay_baseline_name(vram_replay_baseline which);
int vram_replay_baseline_run(const vram_trace *trace, vram_replay_baseline which, unsigned runs,
                             vram_replay_result *out);

/* The pool (opts) and both baselines on the same trace in `rounds`
 * alternating rounds (0: 5), one timed run of each side a round; out[0] the
 * pool's, out[1] cudaMallocAsync's, out[2] cudaMalloc's result, each with
 * its host times the median over the rounds (replay_compare.c). Errors as
 * vram_replay_run's and vram_replay_baseline_run's (VRAM_ENOSYS without a
 * GPU). */
int vram_replay_compare(const vram_trace *trace, const vram_replay_opts *opts, unsigned rounds,
                        vram_replay_result out[3]);

/* One replay as printed: the trace, the allocator ("sim/vmm",
 * "cudaMallocAsync"), the settings vramkit's pool ran with (NULL for the
 * driver's allocators) and the result. */
typedef struct vram_replay_row {
    const char *trace;
    const char *allocator;
    const vram_replay_opts *opts;
    const vram_replay_result *result;
} vram_replay_row;

/* The table the CLI and the benchmark print: before the rows, a line of the
 * settings (backend, policy, granularity, capacity, headroom, retention,
 * map chunk, huge size) and the column header (flags 0); then one row per
 * replay, the trace shown by its file name, or with VRAM_PRINT_JSON one
 * JSON object on one line: trace, allocator, "settings" (null for the
 * driver's allocators; named as in a pool snapshot's settings, after the
 * options, sizes in bytes) and every field of the result (first_failure as an
 * object when there was one). Return 0 or the writer's error. */
int vram_replay_print_header(const vram_replay_opts *opts, vram_write_fn write, void *ctx,
                             unsigned flags);
int vram_replay_print_row(const vram_replay_row *row, vram_write_fn write, void *ctx,
                          unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
