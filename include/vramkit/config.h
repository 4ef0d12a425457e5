/* vramkit/config.h - the option table.
 *
 * Every option is described once, in VRAM_OPTIONS below; each is readable from
 * the environment as VRAM_<NAME> (VRAM_GRANULARITY=4MiB), can be overridden by
 * vram_config_set(), and `vramkit config` prints every value with where it came
 * from. Sizes accept plain bytes or a K/M/G/T suffix (powers of 1024, "MiB"
 * and "M" alike).
 *
 * Errors and ownership: calls return 0 or VRAM_EINVAL (with the option, the
 * value and the reason in vram_last_error()); a call that fails changes
 * nothing. The configuration is the library's, process-wide and never
 * freed; vram_config_set() copies its value. A STRING option's value (its
 * `const char *` field, and what an *_opts_init copies out of it, such as
 * vram_metrics_opts.address, vram_oom_opts.directory or a gpu_pci_bus_id)
 * points to the library's copy, which stays valid for the process's life,
 * also after vram_config_set() sets the option again (every value an
 * option held is kept: a few bytes per call). Setting, printing and
 * vram_config_source_of take one lock; reading a field of vram_config_get()
 * while another thread sets that option may see the old or the new
 * value, so set options at start-up (see vram_config_set). */
#ifndef VRAMKIT_CONFIG_H
#define VRAMKIT_CONFIG_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, field, TYPE, default, help); TYPE is one of SIZE, DOUBLE, STRING,
 * or a CHOICE list "a|b|c" given as the 4th argument of CHOICE options. */
#define VRAM_OPTIONS(X)                                                        \
    X(LOG_LEVEL, log_level, CHOICE, "warn", "error|warn|info|debug",           \
      "least severe level the library logs")                                   \
    X(BACKEND, backend, CHOICE, "sim", "sim|host|cuda|cuda_async|vmm",         \
      "where pools take their bytes by default")                               \
    X(POLICY, policy, CHOICE, "vmm", "vmm|segments",                           \
      "placement policy of new pools")                                         \
    X(ALIGNMENT, alignment, SIZE, "256", "",                                   \
      "alignment of every block (a power of two)")                             \
    X(GRANULARITY, granularity, SIZE, "2MiB", "",                              \
      "vmm: unit in which physical memory is mapped")                          \
    X(CAPACITY, capacity, SIZE, "140GiB", "",                                  \
      "sim and host: bytes of device memory the backend can hand out")         \
    X(SIM_EVENTS, sim_events, CHOICE, "none", "none|done",                     \
      "sim: no events (the pool models them) or events done once recorded")   \
    X(POOL_LIMIT, pool_limit, SIZE, "0", "",                                   \
      "most memory a pool holds (0: the device's free memory less a margin)") \
    X(DECAY_MS, decay_ms, SIZE, "10000", "",                                   \
      "free memory unused this many ms goes back to the driver (0: kept)")    \
    X(RETAIN_MIN, retain_min, SIZE, "0", "",                                   \
      "free memory the decay leaves held")                                     \
    X(PLACE_CANDIDATES, place_candidates, SIZE, "4", "",                       \
      "free blocks compared for the lowest address (0: size classes only)")   \
    X(STREAM_REUSE, stream_reuse, CHOICE, "wait", "wait|completed",            \
      "another stream's free: taken at once, waited for on the device, or once complete") \
    X(STREAM_RECLAIM, stream_reclaim, CHOICE, "large", "need|large",           \
      "completed frees of other streams rejoin when new memory is needed, or also before large requests") \
    X(SMALL_SIZE, small_size, SIZE, "1MiB", "",                                \
      "requests up to this size are packed apart from large ones")             \
    X(LARGE_ROUND, large_round, SIZE, "4KiB", "",                               \
      "vmm: larger requests are rounded up to a multiple of this")             \
    X(SEGMENT_SMALL, segment_small, SIZE, "2MiB", "",                          \
      "segments: segment size for small requests")                             \
    X(SEGMENT_MEDIUM, segment_medium, SIZE, "20MiB", "",                       \
      "segments: segment size for requests up to 10 MiB")                      \
    X(MAP_CHUNK, map_chunk, SIZE, "32MiB", "",                                 \
      "vmm: most bytes one mapping backs below a quarter of the limit") \
    X(HUGE_SIZE, huge_size, SIZE, "16MiB", "",                                \
      "vmm, under a pool limit: requests this large get a mapping of their own (0: never)") \
    X(DEVICE, device, SIZE, "0", "",                                           \
      "GPU backends: index of the CUDA device they open")                      \
    X(STACK_LIMIT, stack_limit, SIZE, "256", "",                               \
      "GPU: per-thread stack (CU_LIMIT_STACK_SIZE) of the shared context")     \
    X(ASYNC_RELEASE, async_release, SIZE, "0", "",                             \
      "cuda_async: release threshold of the driver pool vramkit creates")      \
    X(TRACE, trace, STRING, "", "",                                            \
      "write every pool event to this RMM-format trace (gzip if it ends .gz)") \
    X(MONITOR_PERIOD, monitor_period, DOUBLE, "1", "",                         \
      "monitor: seconds between the sampler thread's samples")                 \
    X(MONITOR_RING, monitor_ring, SIZE, "3600", "",                            \
      "monitor: samples kept in memory for reading back and the trend")        \
    X(MONITOR_GPU, monitor_gpu, STRING, "0", "",                               \
      "monitor: GPU read through NVML: NVML index, PCI bus id, or none")       \
    X(MONITOR_WARMUP, monitor_warmup, DOUBLE, "0.2", "",                       \
      "monitor: fraction of the samples taken skipped before the trend window") \
    X(MONITOR_MIN_SAMPLES, monitor_min_samples, SIZE, "10", "",                \
      "monitor: fewest samples in the window for a leak verdict")             \
    X(MONITOR_GROWTH_ITERATION, monitor_growth_iteration, SIZE, "0", "",       \
      "monitor: live bytes may grow this much per iteration before it is a leak") \
    X(MONITOR_GROWTH_MINUTE, monitor_growth_minute, SIZE, "1MiB", "",          \
      "monitor: the same per minute, when iterations are not known")          \
    X(MONITOR_CONFIDENCE, monitor_confidence, DOUBLE, "0.99", "",              \
      "monitor: confidence (t-test) that the slope is positive for a leak")   \
    X(MONITOR_FRAG_WARNING, monitor_frag_warning, DOUBLE, "0.3", "",           \
      "monitor: fragmentation ratio above which a warning is raised")          \
    X(MONITOR_FRAG_CRITICAL, monitor_frag_critical, DOUBLE, "0.5", "",         \
      "monitor: fragmentation ratio above which the alert is critical")        \
    X(MONITOR_FRAG_MIN_FREE, monitor_frag_min_free, SIZE, "0", "",             \
      "monitor: no fragmentation alert while fewer bytes than this are free")  \
    X(MONITOR_BUDGET, monitor_budget, DOUBLE, "0.9", "",                       \
      "monitor: alert when an owner's live bytes pass this fraction of its budget") \
    X(MONITOR_CLEAR, monitor_clear, DOUBLE, "0.9", "",                         \
      "monitor: an alert clears below its threshold times this (hysteresis)") \
    X(MONITOR_HOLD, monitor_hold, SIZE, "1", "",                               \
      "monitor: samples in a row below its level before an alert is lowered or cleared") \
    X(METRICS_ADDRESS, metrics_address, STRING, "127.0.0.1", "",               \
      "metrics server: address it binds (an IPv4 or IPv6 literal)")            \
    X(METRICS_PORT, metrics_port, SIZE, "0", "",                               \
      "metrics server: TCP port (0: a free one, reported when it starts)")     \
    X(OOM_DIR, oom_dir, STRING, "", "",                                        \
      "write a report here when a pool made from the configuration refuses an allocation") \
    X(OOM_EVENTS, oom_events, SIZE, "64", "",                                  \
      "OOM report: events each watched pool keeps (a ring) for its report")   \
    X(OOM_MAX_REPORTS, oom_max_reports, SIZE, "8", "",                         \
      "OOM report: most reports per pool per minute; further refusals are counted") \
    X(OOM_GPU, oom_gpu, STRING, "own", "",                                     \
      "OOM report: GPU read through NVML: own (the pool's), none, NVML index or PCI bus id") \
    X(METRICS_GPU, metrics_gpu, STRING, "all", "",                             \
      "metrics: GPUs read through NVML: all, none, an NVML index or a PCI bus id") \
    X(ENGINE_EXECUTOR, engine_executor, CHOICE, "cpu", "cpu|cuda",             \
      "engines: the executor they run on")                                     \
    X(ENGINE_WORKSPACE, engine_workspace, STRING, "", "",                      \
      "engines: scratch per context for the convolutions (a size; empty: the executor's)") \
    X(ENGINE_TF32, engine_tf32, CHOICE, "off", "off|on",                       \
      "cuda engines: let cuDNN and cuBLAS use TF32 tensor cores")              \
    X(ENGINE_GRAPHS, engine_graphs, CHOICE, "off", "off|on",                   \
      "cuda engines: capture each context's run into a CUDA graph and replay it") \
    X(REPORT_MAX_POINTS, report_max_points, SIZE, "2000", "",                  \
      "report page: most points per series (long series are downsampled)")    \
    X(REPORT_MAX_BLOCKS, report_max_blocks, SIZE, "20000", "",                 \
      "report page: blocks a snapshot's map draws before merging neighbours") \
    X(STREAM_RECLAIM_MIN, stream_reclaim_min, SIZE, "16MiB", "",               \
      "large: the least request before which other streams' completed frees rejoin") \
    X(ENGINE_THREADS, engine_threads, SIZE, "1", "",                           \
      "cpu engines: threads each context's convolutions run on (0 or 1: the caller's alone)") \
    X(ENGINE_CPU_KERNELS, engine_cpu_kernels, CHOICE, "fast", "fast|reference", \
      "cpu engines: the fast kernels, or the plain-C reference with every step as planned")

/* The resolved values. CHOICE options hold the index into their list. New
 * options are added at the end: `size` (sizeof(vram_config) of the library
 * that filled it) tells a program built against older headers how much of
 * the struct it may read. */
typedef struct vram_config {
    uint32_t size;
#define VRAM_CONFIG_FIELD_SIZE uint64_t
#define VRAM_CONFIG_FIELD_DOUBLE double
#define VRAM_CONFIG_FIELD_STRING const char *
#define VRAM_CONFIG_FIELD_CHOICE int
#define VRAM_CONFIG_FIELD(NAME, field, TYPE, def, choices, help)               \
    VRAM_CONFIG_FIELD_##TYPE field;
    VRAM_OPTIONS(VRAM_CONFIG_FIELD)
#undef VRAM_CONFIG_FIELD
} vram_config;

/* Where a value came from. */
typedef enum vram_config_source {
    VRAM_CONFIG_DEFAULT,
    VRAM_CONFIG_ENV,
    VRAM_CONFIG_SET,
} vram_config_source;

/* Read the environment (once; later calls return the first result). Returns 0
 * or VRAM_EINVAL naming the variable and the bad value; an option whose
 * variable is malformed keeps its default. */
VRAM_API int vram_config_load(void);

/* The current values (loads the environment on first use; a malformed
 * variable silently keeps its default: vram_config_load() reports it).
 * Never NULL; the pointer, and the text of its STRING fields, stay valid
 * for the life of the process. */
VRAM_API const vram_config *vram_config_get(void);

/* Override an option by name ("granularity" or "GRANULARITY") with a value in
 * the same syntax as the environment (copied); value NULL forgets the
 * override (the option goes back to its variable's value, or its default).
 * Returns 0, or VRAM_EINVAL for a NULL or unknown name or a malformed value
 * (nothing changes then; VRAM_EHOSTMEM when a STRING value cannot be
 * copied). Meant for start-up and tools: a thread reading the field at the
 * same time may see the old value or the new one (the old text of a STRING
 * option stays valid). Objects made before keep the values they took. */
VRAM_API int vram_config_set(const char *name, const char *value);

/* Where option `name` ("decay_ms" or "DECAY_MS") got its current value: a
 * malformed variable leaves it at VRAM_CONFIG_DEFAULT. Returns 0, or
 * VRAM_EINVAL for an unknown name or a NULL argument. */
VRAM_API int vram_config_source_of(const char *name, vram_config_source *out);

/* A size in the options' syntax: plain bytes or a K/M/G/T suffix (powers of
 * 1024; "2M", "2MiB", "1.5G", "64k"), read exactly. 0, or VRAM_EINVAL with
 * the reason ("size \"12X\" has an unknown unit (use K, M, G, T)"; also for
 * a NULL text or out); *out is written only on success. */
VRAM_API int vram_size_parse(const char *text, uint64_t *out);

/* A byte count for people: "512 B", "24.0 MiB", "1.50 GiB", written into
 * buf (at most cap bytes with the NUL, cut short to fit; 32 always
 * suffice); returns buf. Cannot fail. */
VRAM_API char *vram_size_format(char *buf, size_t cap, uint64_t bytes);

/* Print every option: name, value, source, help; as a table or, with
 * VRAM_PRINT_JSON, a JSON object (the configuration is process-wide, so no
 * object comes first). Returns 0, the writer's error, VRAM_EINVAL for a
 * NULL writer or unknown flags, or VRAM_EHOSTMEM. */
VRAM_API int vram_config_print(vram_write_fn write, void *ctx, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
