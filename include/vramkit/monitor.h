/* vramkit/monitor.h - watching memory over time: a sampler that reads every
 * monitored pool (per owner and per kind), the GPU as NVML sees it (every
 * process on it) and the number of CUDA contexts vramkit holds, into a
 * bounded ring of samples and, if asked, a CSV or JSON Lines file; a leak
 * verdict (least-squares slope of live bytes with its t-statistic); and
 * alerts (fragmentation, owner budget, growth) raised once per crossing.
 *
 * A monitor samples on its own thread every period_s seconds, or, with
 * opts.manual, only when vram_monitor_sample() is called (per iteration of a
 * soak, say). Pools are added and removed while it runs; a removed pool may
 * be destroyed as soon as vram_monitor_remove_pool() returns. Every function
 * is thread-safe. Sampling takes each watched pool's lock in turn; reading
 * back (vram_monitor_trend, _sample_get, _sample_count, _alert_count,
 * _print_metrics) takes no pool lock, so it may be called from code that
 * runs under a pool's lock (an allocation-failure hook); sampling may not.
 *
 * Where NVML is absent a sample says so (no GPU figures, and the reason):
 * the monitor never invents a number.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). The caller stops the monitor with vram_monitor_stop()
 * (which must not race any other call on it). Watched pools are borrowed:
 * a pool must be removed (or the monitor stopped) before it is destroyed.
 * The options' strings (the two paths, the PCI bus id) are copied at
 * start. A sample read back is the caller's, freed with vram_sample_free().
 * A monitor that a metrics server or an OOM watch uses must outlive them. A
 * failure to write the files does not fail the sample that met it: it is
 * logged once and vram_monitor_stop returns it. */
#ifndef VRAMKIT_MONITOR_H
#define VRAMKIT_MONITOR_H

#include "vramkit/api.h"

#include <stdint.h>

#include "vramkit/nvml.h"
#include "vramkit/pool.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_monitor vram_monitor;

/* What an alert is about. X(NAME, name) */
#define VRAM_ALERT_TYPES(X)                                                    \
    X(FRAGMENTATION, fragmentation)                                            \
    X(BUDGET, budget)                                                          \
    X(GROWTH, growth)

typedef enum vram_alert_type {
#define VRAM_ALERT_TYPE_ENUM(NAME, name) VRAM_ALERT_##NAME,
    VRAM_ALERT_TYPES(VRAM_ALERT_TYPE_ENUM)
#undef VRAM_ALERT_TYPE_ENUM
    VRAM_ALERT_TYPE_COUNT
} vram_alert_type;

/* An alert's level: raised as warning or critical, then clear once the value
 * falls back below its threshold (times opts.clear_ratio). */
typedef enum vram_alert_level {
    VRAM_ALERT_LEVEL_WARNING = 0,
    VRAM_ALERT_LEVEL_CRITICAL = 1,
    VRAM_ALERT_LEVEL_CLEAR = 2,
    VRAM_ALERT_LEVEL_COUNT
} vram_alert_level;

typedef struct vram_alert {
    vram_alert_type type;
    vram_alert_level level;
    double time_s;       /* wall clock, seconds since the epoch */
    double elapsed_s;    /* since the monitor started */
    int64_t iteration;   /* -1 when not known */
    const char *pool;    /* the pool's name */
    const char *owner;   /* budget alerts: the owner; else NULL */
    double value;        /* fragmentation ratio, fraction of the budget, or slope */
    double threshold;    /* the threshold crossed (for clear: the one left) */
    const char *message; /* one sentence with the numbers */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_alert;

/* Called on the sampling thread (the monitor's own, or the caller of
 * vram_monitor_sample) for each alert, with the monitor's locks held; the
 * alert and its strings live for the call only. It must call neither the
 * monitor (it would deadlock) nor a watched pool. */
typedef void (*vram_alert_fn)(void *ctx, const vram_alert *alert);

typedef struct vram_monitor_opts {
    uint32_t size; /* sizeof(vram_monitor_opts), which vram_monitor_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    double period_s;           /* sampler thread period (> 0) */
    int manual;                /* non-zero: no thread; vram_monitor_sample() only */
    uint32_t ring_samples;     /* samples kept for reading back and the trend (>= 3) */
    const char *csv_path;      /* write samples here as CSV: a header naming the
                                  columns (time_s, elapsed_s, iteration, pool, owner,
                                  kind, vram_sample_pool's figures, gpu_used_bytes,
                                  gpu_total_bytes), then per sample a row per pool,
                                  per owner and per kind; NULL/"": no */
    const char *jsonl_path;    /* write samples and alerts as JSON Lines; NULL/"": no */
    int gpu;                   /* the GPU to read: an NVML index or VRAM_GPU_NONE
                                  (vramkit/nvml.h; the monitor reads one GPU) */
    const char *gpu_pci_bus_id; /* if set, the GPU at this PCI bus id instead */
    /* Leak verdict: the slope of live bytes over the samples kept, after
     * skipping the first warmup_fraction of all the samples taken. */
    double warmup_fraction;    /* 0..<1 */
    uint32_t min_samples;      /* fewer in the window: no verdict (>= 3) */
    double growth_bytes_per_iteration; /* threshold when iterations are known */
    double growth_bytes_per_minute;    /* threshold otherwise */
    double growth_confidence;  /* and the slope must be > 0 with this confidence */
    /* Alerts. */
    double frag_warning;       /* fragmentation ratio: warning above this */
    double frag_critical;      /* critical above this */
    uint64_t frag_min_free_bytes; /* no fragmentation alert with less free */
    double budget_warning;     /* an owner's live bytes above this fraction of its budget */
    double clear_ratio;        /* an alert clears below threshold x this (0 < r <= 1) */
    uint32_t hold_samples;     /* an alert is lowered or cleared only once this many
                                  samples in a row call for it (0 or 1: at once;
                                  raising is always at once), so a value that swings
                                  across a threshold between samples does not raise
                                  it again every time */
    vram_alert_fn on_alert;    /* may be NULL */
    void *alert_ctx;           /* the caller's: must outlive the monitor */
} vram_monitor_opts;

/* Fill opts from the configuration (VRAM_MONITOR_* and the alert options).
 * Returns 0 or VRAM_EINVAL when an environment variable is malformed (its
 * default is kept; a bad VRAM_MONITOR_GPU reads as none) or opts is NULL.
 * A PCI bus id it sets points into the configuration (vramkit/config.h). */
VRAM_API int vram_monitor_opts_init(vram_monitor_opts *opts);

/* Create a monitor (opts NULL: the configuration) and, unless opts->manual,
 * start its sampling thread, which takes the first sample at once (a manual
 * monitor takes none until asked). Files named in opts are created
 * (truncated) now: VRAM_EIO naming the path if they cannot be. VRAM_EINVAL
 * for a NULL out, a bad opts.size or an option out of range (the sentence
 * names it), VRAM_EHOSTMEM (also when the thread cannot start). On error
 * *out is NULL, and a file created already is closed (it is left on
 * disk). */
VRAM_API int vram_monitor_start(const vram_monitor_opts *opts, vram_monitor **out);

/* Stop the thread (waiting for a sample in progress), finish the files and
 * free the monitor and its kept samples (copies from vram_monitor_sample_get
 * stay the caller's). Returns 0, or VRAM_EIO if a file could not be written
 * completely, at any time since the start (the monitor is freed anyway).
 * NULL is accepted. */
VRAM_API int vram_monitor_stop(vram_monitor *m);

/* Watch a pool / stop watching it. Adding a pool twice, or a second pool of
 * the same name (samples, trends and alerts name pools), is VRAM_EINVAL;
 * removing one not watched is VRAM_EINVAL (so are NULL arguments), and
 * VRAM_EHOSTMEM when the list cannot grow. Once remove returns, the monitor
 * no longer touches the pool and forgets its alerts; its samples stay in the
 * ring (they hold copies of the names). */
VRAM_API int vram_monitor_add_pool(vram_monitor *m, vram_pool *pool);
VRAM_API int vram_monitor_remove_pool(vram_monitor *m, vram_pool *pool);

/* Take a sample now; iteration >= 0 records the caller's iteration number
 * (the trend is then also computed per iteration), -1 means unknown. Alerts
 * are evaluated and the files written as for the thread's samples. May be
 * called while the thread runs (samples are serialised), but not under a
 * watched pool's lock. VRAM_EINVAL for NULL, VRAM_EHOSTMEM (no sample is
 * kept then); a file that cannot be written does not fail it (see above). */
VRAM_API int vram_monitor_sample(vram_monitor *m, int64_t iteration);

/* One sample as read back: a deep copy in one allocation (its strings and
 * arrays included) the caller frees with vram_sample_free(), which accepts
 * NULL. Owners with no live and no peak bytes are left out. */
typedef struct vram_sample_owner {
    const char *owner;
    uint64_t live_bytes;
    uint64_t peak_live_bytes;
    uint64_t budget_bytes; /* 0: none */
} vram_sample_owner;

/* A pool in a sample. The sample files (csv_path, jsonl_path) carry its
 * figures but free_bytes under the members' names, as CSV columns and JSON
 * Lines keys, and its owners and kinds as rows (CSV) or lists (JSON Lines).
 * CSVs of versions before pending_bytes lack that column. */
typedef struct vram_sample_pool {
    const char *pool;
    uint64_t live_bytes;
    uint64_t peak_live_bytes;
    uint64_t reserved_bytes;
    uint64_t pending_bytes;
    uint64_t free_bytes;
    uint64_t largest_free_bytes;
    double fragmentation_ratio;
    uint64_t kind_live_bytes[VRAM_KIND_COUNT];
    uint64_t kind_peak_live_bytes[VRAM_KIND_COUNT];
    uint32_t n_owners;
    vram_sample_owner *owners;
} vram_sample_pool;

typedef struct vram_sample_gpu {
    int index;             /* NVML index */
    char name[96];
    uint64_t total_bytes;
    uint64_t used_bytes;
    int processes_known;   /* 0: NVML would not list them */
    unsigned n_processes;
    vram_gpu_process *processes;
} vram_sample_gpu;

typedef struct vram_sample {
    uint64_t seq;          /* 0 for the monitor's first sample */
    double time_s;         /* wall clock, seconds since the epoch */
    double elapsed_s;      /* since the monitor started */
    int64_t iteration;     /* -1 when not known */
    unsigned contexts;     /* CUDA contexts vramkit holds (vram_device_contexts) */
    const vram_sample_gpu *gpu; /* NULL: no GPU reading; gpu_unavailable says why */
    const char *gpu_unavailable; /* NULL when gpu is set */
    uint32_t n_pools;
    vram_sample_pool *pools;
} vram_sample;

/* How many samples were taken in all (*total) and are kept in the ring
 * (*kept, at most opts.ring_samples); either may be NULL. VRAM_EINVAL for a
 * NULL monitor. */
VRAM_API int vram_monitor_sample_count(vram_monitor *m, uint64_t *total, uint32_t *kept);

/* Copy kept sample i (0: the oldest kept, kept - 1: the newest).
 * VRAM_EINVAL for i >= kept or a NULL argument, VRAM_EHOSTMEM; *out is
 * NULL on error. */
VRAM_API int vram_monitor_sample_get(vram_monitor *m, uint32_t i, vram_sample **out);
VRAM_API void vram_sample_free(vram_sample *s);

/* The leak verdict. */
typedef struct vram_trend {
    uint32_t samples;                 /* samples in the window used */
    double slope_bytes_per_s;         /* least-squares slope of live bytes over time */
    double slope_bytes_per_iteration; /* over iterations (NAN when iterations unknown) */
    double slope_stderr_bytes_per_s;  /* standard error of the slope */
    double r2;                        /* coefficient of determination */
    double confidence;                /* 0..1: probability the slope is > 0 (t-test) */
    int growing;                      /* verdict against the threshold */
    double t_statistic;               /* slope / its standard error, of the slope the
                                         verdict uses (per iteration when known) */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_trend;

/* Trend of a monitored pool's live bytes (pool NULL: all pools summed), over
 * the kept samples after the warm-up. The slope per iteration and its
 * confidence are used when every sample in the window has an iteration;
 * otherwise the slope over time. With fewer than opts.min_samples samples in
 * the window, samples says how many there were, the slopes are NAN and
 * growing is 0. VRAM_EINVAL for a NULL monitor or out, or a pool name not
 * in the kept samples; VRAM_EHOSTMEM. *out is the caller's (on an error
 * other than NULL arguments it holds NAN slopes and no verdict). */
VRAM_API int vram_monitor_trend(vram_monitor *m, const char *pool, vram_trend *out);

/* Alerts raised so far of a type and level (clear counts the clears).
 * VRAM_EINVAL for NULL arguments or an unknown type or level. */
VRAM_API int vram_monitor_alert_count(vram_monitor *m, vram_alert_type type, vram_alert_level level,
                             uint64_t *out);

/* The monitor's own Prometheus families (text exposition 0.0.4): samples
 * taken, sampling time, alerts raised and active, and per pool the slope of
 * live bytes, its confidence and the verdict. Built in memory under the
 * monitor's data lock, then written in one call of `write` with no lock
 * held. flags must be 0 (VRAM_EINVAL otherwise, and for NULL arguments);
 * else 0, VRAM_EHOSTMEM or the writer's error. */
VRAM_API int vram_monitor_print_metrics(vram_monitor *m, vram_write_fn write, void *ctx,
                                       unsigned flags);

/* Static names ("fragmentation", "warning"; "?" for another value). */
VRAM_API const char *vram_alert_type_name(vram_alert_type type);
VRAM_API const char *vram_alert_level_name(vram_alert_level level);

#ifdef __cplusplus
}
#endif
#endif
