/* tools/ctxcost/ctxcost_print.c - how a context-cost measurement is printed: the
 * table and recommendation of `vramkit ctxcost`, or the same as one JSON
 * object for --json. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/tool_util.h"
#include "ctxcost.h"
#include "vramkit.h"

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

static int out(vram_write_fn write, void *ctx, const char *fmt, ...) TOOL_PRINTF(3, 4);
static int out(vram_write_fn write, void *ctx, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return vram_set_error(VRAM_EINVAL, "formatting a ctxcost line failed");
    return write(ctx, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* The row the recommendation compares with the default stack: vramkit's own
 * VRAM_STACK_LIMIT where it was measured, else the smallest non-zero limit
 * below the default, else the smallest below it. NULL if none is below. */
static const vram_ctxcost_stack *stack_choice(const vram_ctxcost_result *r, int *is_config)
{
    uint64_t cfg = vram_config_get()->stack_limit;
    const vram_ctxcost_stack *best = NULL;
    *is_config = 0;
    for (unsigned i = 0; i < r->n_stacks; i++) {
        const vram_ctxcost_stack *s = &r->stacks[i];
        if (s->requested == cfg && s->effective < r->default_stack) {
            *is_config = 1;
            return s;
        }
    }
    for (unsigned i = 0; i < r->n_stacks; i++) {
        const vram_ctxcost_stack *s = &r->stacks[i];
        if (s->effective >= r->default_stack)
            continue;
        if (!best || (best->requested == 0 && s->requested) ||
            ((best->requested != 0) == (s->requested != 0) && s->requested < best->requested))
            best = s;
    }
    return best;
}

static void recommendation(const vram_ctxcost_result *r, char *buf, size_t cap)
{
    int n;
    if (r->shared_measured && r->shared_total_bytes > 0)
        n = snprintf(buf, cap,
                     "share one context: %u threads with their own contexts take %.1f MiB, "
                     "sharing one takes %.1f MiB (%.1fx less)",
                     r->threads, mib(r->own_total_bytes), mib(r->shared_total_bytes),
                     (double)r->own_total_bytes / (double)r->shared_total_bytes);
    else
        n = snprintf(buf, cap,
                     "share one context: %u threads with their own contexts take %.1f MiB, "
                     "%.1f MiB a context, where one shared context gives each thread a stream",
                     r->threads, mib(r->own_total_bytes), mib(r->own_per_context_bytes));
    if (n < 0 || (size_t)n >= cap)
        return;
    int is_config;
    const vram_ctxcost_stack *s = stack_choice(r, &is_config);
    if (s)
        snprintf(buf + n, cap - (size_t)n,
                 "; stack limit %llu B saves %.1f MiB per context (%.1f instead of %.1f MiB at "
                 "the default %llu B)%s",
                 (unsigned long long)s->requested, mib(r->one_context_bytes - s->bytes),
                 mib(s->bytes), mib(r->one_context_bytes), (unsigned long long)r->default_stack,
                 is_config ? ", vramkit's VRAM_STACK_LIMIT" : "");
    else
        snprintf(buf + n, cap - (size_t)n,
                 "; no stack limit measured is below the default %llu B",
                 (unsigned long long)r->default_stack);
}

static int print_json(const vram_ctxcost_result *r, const char *rec, vram_write_fn write,
                      void *ctx)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "device", r->device);
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "pci_bus_id", r->pci_bus_id);
    cJSON_AddNumberToObject(o, "driver_version", r->driver_version);
    cJSON_AddNumberToObject(o, "total_bytes", (double)r->total_bytes);
    cJSON_AddStringToObject(o, "source", r->source == VRAM_CTXCOST_NVML ? "nvml" : "cuMemGetInfo");
    cJSON_AddNumberToObject(o, "baseline_used_bytes", (double)r->baseline_used_bytes);
    if (r->other_processes >= 0)
        cJSON_AddNumberToObject(o, "other_processes", r->other_processes);
    else
        cJSON_AddNullToObject(o, "other_processes");
    cJSON_AddNumberToObject(o, "threads", r->threads);
    cJSON_AddNumberToObject(o, "default_stack_limit_bytes", (double)r->default_stack);
    cJSON_AddNumberToObject(o, "one_context_bytes", (double)r->one_context_bytes);
    cJSON *own = cJSON_AddObjectToObject(o, "own");
    if (own) {
        cJSON_AddNumberToObject(own, "threads", r->threads);
        cJSON_AddNumberToObject(own, "total_bytes", (double)r->own_total_bytes);
        cJSON_AddNumberToObject(own, "per_context_bytes", (double)r->own_per_context_bytes);
    }
    if (r->shared_measured) {
        cJSON *sh = cJSON_AddObjectToObject(o, "shared");
        if (sh) {
            cJSON_AddNumberToObject(sh, "threads", r->threads);
            cJSON_AddNumberToObject(sh, "stack_limit_bytes", (double)r->default_stack);
            cJSON_AddNumberToObject(sh, "context_bytes", (double)r->shared_context_bytes);
            cJSON_AddNumberToObject(sh, "total_bytes", (double)r->shared_total_bytes);
            cJSON_AddNumberToObject(sh, "per_stream_bytes", (double)r->per_stream_bytes);
        }
    } else {
        cJSON_AddNullToObject(o, "shared");
    }
    cJSON *stacks = cJSON_AddArrayToObject(o, "stack_limits");
    for (unsigned i = 0; stacks && i < r->n_stacks; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "requested_bytes", (double)r->stacks[i].requested);
        cJSON_AddNumberToObject(s, "effective_bytes", (double)r->stacks[i].effective);
        cJSON_AddNumberToObject(s, "context_bytes", (double)r->stacks[i].bytes);
        cJSON_AddItemToArray(stacks, s);
    }
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    for (const char *p = r->notes; notes && *p;) {
        size_t len = strcspn(p, "\n");
        char line[sizeof r->notes];
        memcpy(line, p, len);
        line[len] = '\0';
        cJSON_AddItemToArray(notes, cJSON_CreateString(line));
        p += len + (p[len] == '\n');
    }
    cJSON_AddStringToObject(o, "recommendation", rec);
    return tool_emit_json(o, write, ctx);
}

#define ROW "%-56s %10.1f\n"

static int print_table(const vram_ctxcost_result *r, const char *rec, vram_write_fn write,
                       void *ctx)
{
    char label[128];
    int rc = out(write, ctx, "device %d: %s (%s), CUDA driver %d.%d, %.1f MiB\n", r->device,
                 r->name, r->pci_bus_id, r->driver_version / 1000,
                 r->driver_version % 1000 / 10, mib((int64_t)r->total_bytes));
    if (!rc)
        rc = out(write, ctx, "used memory read with %s; %.1f MiB used at the start\n\n",
                 r->source == VRAM_CTXCOST_NVML ? "NVML (device-wide, no context of its own)"
                                                : "cuMemGetInfo in a probe context (no NVML)",
                 mib((int64_t)r->baseline_used_bytes));
    if (!rc)
        rc = out(write, ctx, "%-56s %10s\n", "measurement", "MiB");
    snprintf(label, sizeof label, "one context (cuCtxCreate, default stack %llu B)",
             (unsigned long long)r->default_stack);
    if (!rc)
        rc = out(write, ctx, ROW, label, mib(r->one_context_bytes));
    snprintf(label, sizeof label, "own contexts, %u threads: total", r->threads);
    if (!rc)
        rc = out(write, ctx, ROW, label, mib(r->own_total_bytes));
    snprintf(label, sizeof label, "own contexts, %u threads: per context", r->threads);
    if (!rc)
        rc = out(write, ctx, ROW, label, mib(r->own_per_context_bytes));
    if (r->shared_measured) {
        snprintf(label, sizeof label, "shared context (stack %llu B): the context alone",
                 (unsigned long long)r->default_stack);
        if (!rc)
            rc = out(write, ctx, ROW, label, mib(r->shared_context_bytes));
        snprintf(label, sizeof label, "shared context, %u threads with a stream each: total",
                 r->threads);
        if (!rc)
            rc = out(write, ctx, ROW, label, mib(r->shared_total_bytes));
        snprintf(label, sizeof label, "shared context, %u threads: per stream", r->threads);
        if (!rc)
            rc = out(write, ctx, ROW, label, mib(r->per_stream_bytes));
    } else if (!rc) {
        rc = out(write, ctx, "%-56s %10s\n", "shared context: not measured (see the notes)", "-");
    }
    for (unsigned i = 0; i < r->n_stacks && !rc; i++) {
        const vram_ctxcost_stack *s = &r->stacks[i];
        snprintf(label, sizeof label, "one context at stack limit %llu B (effective %llu B)",
                 (unsigned long long)s->requested, (unsigned long long)s->effective);
        rc = out(write, ctx, ROW, label, mib(s->bytes));
    }
    for (const char *p = r->notes; !rc && *p;) {
        int len = (int)strcspn(p, "\n");
        rc = out(write, ctx, "note: %.*s\n", len, p);
        p += len + (p[len] == '\n');
    }
    if (!rc)
        rc = out(write, ctx, "\nrecommendation: %s\n", rec);
    return rc;
}

int vram_ctxcost_print(const vram_ctxcost_result *r, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!r || !write || (flags & ~VRAM_PRINT_JSON))
        return vram_set_error(VRAM_EINVAL, "vram_ctxcost_print: result, writer and known flags are "
                                           "required");
    char rec[512];
    rec[0] = '\0';
    recommendation(r, rec, sizeof rec);
    return flags & VRAM_PRINT_JSON ? print_json(r, rec, write, ctx)
                                   : print_table(r, rec, write, ctx);
}
