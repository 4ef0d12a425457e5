/* tools/replay/replay_print.c - how a replay's result is printed: the table row
 * the CLI and the benchmark share, and the JSON object of `--json`. */
#include <stdio.h>
#include <string.h>

#include "common/tool_util.h"
#include "replay.h"
#include "vramkit.h"

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

/* The capacity a replay's backend had: the option, the configuration's for
 * sim and host, or (0) the device's for a GPU backend. */
static uint64_t capacity_of(const vram_replay_opts *o)
{
    vram_backend_type t = VRAM_BACKEND_TYPE_SIM;
    if (o->backend && vram_backend_type_parse(o->backend, &t) == 0 && vram_backend_type_is_gpu(t))
        return 0;
    return o->capacity ? o->capacity : vram_config_get()->capacity;
}

static const char *backend_of(const vram_replay_opts *o) { return o->backend ? o->backend : "sim"; }

/* Huge blocks apart apply only under a limit of the pool's own. */
static int huge_in_effect(const vram_replay_opts *o)
{
    return o->pool.policy == VRAM_POLICY_VMM && o->pool.huge_size &&
           (o->limit_ratio > 0 || o->pool.limit);
}

/* Whether the replay's backend is the sim with events done once recorded. */
static int sim_with_events(const vram_replay_opts *o)
{
    return strcmp(backend_of(o), "sim") == 0 && o->sim_events == VRAM_SIM_EVENTS_DONE;
}

int vram_replay_print_header(const vram_replay_opts *o, vram_write_fn write, void *ctx,
                             unsigned flags)
{
    if (!o || !write || flags)
        return vram_set_error(VRAM_EINVAL, "vram_replay_print_header: opts, write and flags 0 "
                                           "are required");
    char g[32], c[32], rm[32], mc[32], hs[32], rmin[32], lim[48], line[512];
    uint64_t cap = capacity_of(o);
    const vram_pool_opts *p = &o->pool;
    if (o->limit_ratio > 0)
        snprintf(lim, sizeof lim, "%g x the trace's peak live", o->limit_ratio);
    else if (p->limit)
        vram_size_format(lim, sizeof lim, p->limit);
    else
        snprintf(lim, sizeof lim, "the device's free memory");
    int n = snprintf(line, sizeof line,
                     "settings: backend %s%s, policy %s, granularity %s, capacity %s, limit %s, "
                     "decay %llu ms (keeping %s), map chunk %s, huge size %s, stream reuse %s, "
                     "stream reclaim %s%s%s, %u timed runs\n",
                     backend_of(o), sim_with_events(o) ? " (events done once recorded)" : "",
                     vram_policy_name(p->policy), vram_size_format(g, sizeof g, p->granularity),
                     cap ? vram_size_format(c, sizeof c, cap) : "the device's", lim,
                     (unsigned long long)p->decay_ms, vram_size_format(rm, sizeof rm, p->retain_min),
                     vram_size_format(mc, sizeof mc, p->map_chunk),
                     huge_in_effect(o) ? vram_size_format(hs, sizeof hs, p->huge_size) : "none",
                     p->stream_waits ? "wait" : "completed", p->reclaim_large ? "large" : "need",
                     !p->reclaim_large ? "" : p->reclaim_min ? " from " : " before every large request",
                     p->reclaim_large && p->reclaim_min
                         ? vram_size_format(rmin, sizeof rmin, p->reclaim_min)
                         : "",
                     o->timing_runs ? o->timing_runs : 5);
    int rc = emit(write, ctx, line, n);
    if (rc)
        return rc;
    n = snprintf(line, sizeof line,
                 "%-30s %-15s %7s %9s %9s %6s %6s %6s %8s %8s %7s %7s %8s %9s %6s\n", "trace",
                 "allocator", "events", "live MiB", "held MiB", "ratio", "floor", "frag",
                 "backend", "w.calls", "ns/op", "warm", "malloc", "drv MiB", "failed");
    return emit(write, ctx, line, n);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int print_text(const vram_replay_row *row, vram_write_fn write, void *ctx)
{
    const vram_replay_result *r = row->result;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "%-30s %-15s %7llu %9.1f %9.1f %6.3f %6.3f %6.3f %8llu %8.0f %7.1f %7.1f %8.1f "
                     "%9.1f %6llu\n",
                     base_name(row->trace), row->allocator, (unsigned long long)r->events,
                     mib(r->peak_live_bytes), mib(r->peak_reserved_bytes), r->reserved_ratio,
                     r->floor_ratio, r->fragmentation_at_peak, (unsigned long long)r->backend_calls,
                     r->warm_backend_calls, r->ns_per_op, r->warm_ns_per_op, r->malloc_ns_per_op,
                     mib(r->peak_driver_bytes), (unsigned long long)r->failed_allocs);
    return emit(write, ctx, line, n);
}

static cJSON *settings_json(const vram_replay_opts *o)
{
    cJSON *s = cJSON_CreateObject();
    if (!s)
        return NULL;
    const vram_pool_opts *p = &o->pool;
    uint64_t cap = capacity_of(o);
    cJSON_AddStringToObject(s, "backend", backend_of(o));
    if (strcmp(backend_of(o), "sim") == 0)
        cJSON_AddStringToObject(s, "sim_events", sim_with_events(o) ? "done" : "none");
    cJSON_AddStringToObject(s, "policy", vram_policy_name(p->policy));
    cJSON_AddNumberToObject(s, "granularity", (double)p->granularity);
    if (cap)
        cJSON_AddNumberToObject(s, "capacity", (double)cap);
    else
        cJSON_AddNullToObject(s, "capacity");
    cJSON_AddNumberToObject(s, "pool_limit", (double)p->limit);
    cJSON_AddNumberToObject(s, "limit_ratio", o->limit_ratio);
    cJSON_AddNumberToObject(s, "decay_ms", (double)p->decay_ms);
    cJSON_AddNumberToObject(s, "retain_min", (double)p->retain_min);
    cJSON_AddNumberToObject(s, "map_chunk", (double)p->map_chunk);
    cJSON_AddNumberToObject(s, "huge_size", huge_in_effect(o) ? (double)p->huge_size : 0.0);
    cJSON_AddStringToObject(s, "stream_reuse", p->stream_waits ? "wait" : "completed");
    cJSON_AddStringToObject(s, "stream_reclaim", p->reclaim_large ? "large" : "need");
    cJSON_AddNumberToObject(s, "reclaim_min", (double)p->reclaim_min);
    cJSON_AddNumberToObject(s, "timing_runs", o->timing_runs ? o->timing_runs : 5);
    return s;
}

static int print_json(const vram_replay_row *row, vram_write_fn write, void *ctx)
{
    const vram_replay_result *r = row->result;
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "trace", row->trace);
        cJSON_AddStringToObject(o, "allocator", row->allocator);
        if (row->opts)
            cJSON_AddItemToObject(o, "settings", settings_json(row->opts));
        else
            cJSON_AddNullToObject(o, "settings");
        cJSON_AddNumberToObject(o, "events", (double)r->events);
        cJSON_AddNumberToObject(o, "allocs", (double)r->allocs);
        cJSON_AddNumberToObject(o, "frees", (double)r->frees);
        cJSON_AddNumberToObject(o, "peak_live_bytes", (double)r->peak_live_bytes);
        cJSON_AddNumberToObject(o, "peak_reserved_bytes", (double)r->peak_reserved_bytes);
        cJSON_AddNumberToObject(o, "limit_bytes", (double)r->limit_bytes);
        cJSON_AddNumberToObject(o, "reserved_ratio", r->reserved_ratio);
        cJSON_AddNumberToObject(o, "peak_live_pending_bytes", (double)r->peak_live_pending_bytes);
        cJSON_AddNumberToObject(o, "floor_ratio", r->floor_ratio);
        cJSON_AddNumberToObject(o, "fragmentation_at_peak", r->fragmentation_at_peak);
        cJSON_AddNumberToObject(o, "backend_calls", (double)r->backend_calls);
        cJSON_AddNumberToObject(o, "stream_waits", (double)r->stream_waits);
        cJSON_AddNumberToObject(o, "event_waits", (double)r->event_waits);
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

int vram_replay_print_row(const vram_replay_row *row, vram_write_fn write, void *ctx,
                          unsigned flags)
{
    if (!row || !row->trace || !row->allocator || !row->result || !write ||
        (flags & ~VRAM_PRINT_JSON))
        return vram_set_error(VRAM_EINVAL, "vram_replay_print_row: a row (trace, allocator, "
                                           "result), write and known flags are required");
    return flags & VRAM_PRINT_JSON ? print_json(row, write, ctx) : print_text(row, write, ctx);
}
