/* tools/replay/replay_print.c - how a replay's result is printed: the table row
 * the CLI and the benchmark share, and the JSON object of `--json`. */
#include <stdio.h>

#include "common/tool_util.h"
#include "replay.h"

const char *vram_replay_baseline_name(vram_replay_baseline which)
{
    return which == VRAM_BASELINE_CUDA_MALLOC ? "cudaMalloc" : "cudaMallocAsync";
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static int emit(vram_write_fn write, void *ctx, const char *line, int n)
{
    if (n < 0)
        return vram_set_error(VRAM_EINVAL, "formatting a replay row failed");
    return write(ctx, line, (size_t)n < 512 ? (size_t)n : 511);
}

int vram_replay_print_header(vram_write_fn write, void *ctx)
{
    char line[512];
    int n = snprintf(line, sizeof line,
                     "%-30s %-15s %7s %9s %9s %6s %6s %6s %8s %8s %7s %7s %8s %9s %6s\n",
                     "trace", "policy", "events", "live MiB", "held MiB", "ratio", "floor",
                     "frag", "backend", "w.calls", "ns/op", "warm", "malloc", "drv MiB", "failed");
    return emit(write, ctx, line, n);
}

int vram_replay_print_row(const char *name, const char *policy, const vram_replay_result *r,
                          vram_write_fn write, void *ctx)
{
    char line[512];
    int n = snprintf(line, sizeof line,
                     "%-30s %-15s %7llu %9.1f %9.1f %6.3f %6.3f %6.3f %8llu %8.0f %7.1f %7.1f %8.1f "
                     "%9.1f %6llu\n",
                     name, policy, (unsigned long long)r->events, mib(r->peak_live_bytes),
                     mib(r->peak_reserved_bytes), r->reserved_ratio, r->floor_ratio,
                     r->fragmentation_at_peak, (unsigned long long)r->backend_calls,
                     r->warm_backend_calls, r->ns_per_op,
                     r->warm_ns_per_op, r->malloc_ns_per_op, mib(r->peak_driver_bytes),
                     (unsigned long long)r->failed_allocs);
    return emit(write, ctx, line, n);
}

int vram_replay_print_json(const char *trace, const char *policy, uint64_t granularity,
                           const vram_replay_result *r, vram_write_fn write, void *ctx)
{
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "trace", trace);
        cJSON_AddStringToObject(o, "policy", policy);
        cJSON_AddNumberToObject(o, "granularity", (double)granularity);
        cJSON_AddNumberToObject(o, "events", (double)r->events);
        cJSON_AddNumberToObject(o, "allocs", (double)r->allocs);
        cJSON_AddNumberToObject(o, "frees", (double)r->frees);
        cJSON_AddNumberToObject(o, "peak_live_bytes", (double)r->peak_live_bytes);
        cJSON_AddNumberToObject(o, "peak_reserved_bytes", (double)r->peak_reserved_bytes);
        cJSON_AddNumberToObject(o, "reserved_ratio", r->reserved_ratio);
        cJSON_AddNumberToObject(o, "peak_live_pending_bytes", (double)r->peak_live_pending_bytes);
        cJSON_AddNumberToObject(o, "floor_ratio", r->floor_ratio);
        cJSON_AddNumberToObject(o, "fragmentation_at_peak", r->fragmentation_at_peak);
        cJSON_AddNumberToObject(o, "backend_calls", (double)r->backend_calls);
        cJSON_AddNumberToObject(o, "ns_per_op", r->ns_per_op);
        cJSON_AddNumberToObject(o, "warm_ns_per_op", r->warm_ns_per_op);
        cJSON_AddNumberToObject(o, "warm_backend_calls", r->warm_backend_calls);
        cJSON_AddNumberToObject(o, "warm_peak_reserved_bytes", (double)r->warm_peak_reserved_bytes);
        cJSON_AddNumberToObject(o, "warm_reserved_ratio", r->warm_reserved_ratio);
        cJSON_AddNumberToObject(o, "peak_driver_bytes", (double)r->peak_driver_bytes);
        cJSON_AddNumberToObject(o, "driver_ratio", r->driver_ratio);
        cJSON_AddNumberToObject(o, "malloc_ns_per_op", r->malloc_ns_per_op);
        cJSON_AddNumberToObject(o, "failed_allocs", (double)r->failed_allocs);
        if (r->failed_allocs) {
            cJSON *f = cJSON_AddObjectToObject(o, "first_failure");
            if (f) {
                cJSON_AddNumberToObject(f, "line", r->first_failure_line);
                cJSON_AddNumberToObject(f, "size_bytes", (double)r->first_failure_size);
                cJSON_AddStringToObject(f, "message", r->first_failure);
            }
        }
    }
    return tool_emit_json(o, write, ctx);
}
