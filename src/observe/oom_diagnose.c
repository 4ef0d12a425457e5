/* src/observe/oom_diagnose.c - the diagnosis line of an OOM report: the rules
 * written out in vramkit/oom.h, applied to the figures of the refusal, and
 * the sentence with the numbers that support the cause chosen. Pure: the
 * same facts always give the same line. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "oom_internal.h"

static const char *const cause_names[] = {
#define CAUSE_NAME(NAME, name) #name,
    VRAM_OOM_CAUSES(CAUSE_NAME)
#undef CAUSE_NAME
};

const char *vram_oom_cause_name(vram_oom_cause cause)
{
    return (unsigned)cause < VRAM_OOM_CAUSE_COUNT ? cause_names[cause] : "?";
}

typedef struct fmt {
    char b[8][40];
    int n;
} fmt;

/* A byte count in one of 8 rotating buffers (enough for one sentence). */
static const char *B(fmt *f, uint64_t v)
{
    char *s = f->b[f->n++ & 7];
    return vram__fmt_bytes(s, 40, v);
}

/* A signed rate in bytes, e.g. "+1.5 MiB" or "-256 B". */
static const char *R(fmt *f, double v)
{
    char *s = f->b[f->n++ & 7];
    char t[32];
    double a = fabs(v);
    vram__fmt_bytes(t, sizeof t, a >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(a));
    snprintf(s, 40, "%s%s", v < 0 ? "-" : "+", t);
    return s;
}

/* "grow by +1.0 MiB per iteration (+2.0 MiB/s) over 40 samples (r2 0.99,
 * confidence 0.999)" */
static void growth(fmt *f, const vram__oom_facts *x, char *out, size_t cap)
{
    char per_it[64] = "";
    if (isfinite(x->slope_per_iteration))
        snprintf(per_it, sizeof per_it, "%s per iteration (", R(f, x->slope_per_iteration));
    snprintf(out, cap, "%s%s/s%s over %u samples (r2 %.2f, confidence %.3f)", per_it,
             R(f, x->slope_per_s), *per_it ? ")" : "", x->samples, x->r2, x->confidence);
}

/* Why the trend does not point at a leak. */
static void level(fmt *f, const vram__oom_facts *x, char *out, size_t cap)
{
    if (!x->trend_known) {
        snprintf(out, cap, "no trend of live bytes to tell a leak (no monitor, or too few samples)");
        return;
    }
    char g[160];
    growth(f, x, g, sizeof g);
    snprintf(out, cap, "live bytes are not growing beyond the monitor's threshold: %s", g);
}

static void budget_rules(fmt *f, const vram__oom_facts *x, vram__oom_diagnosis *d)
{
    char g[320];
    if (x->owner_budget && x->request > x->owner_budget) {
        d->cause = VRAM_OOM_EXCEEDS_CONFIGURED;
        snprintf(d->line, sizeof d->line,
                 "the request of %s alone exceeds owner \"%s\"'s budget of %s (it holds %s): "
                 "raise the budget or split the request",
                 B(f, x->request), x->owner, B(f, x->owner_budget), B(f, x->owner_live));
    } else if (x->trend_known && x->growing) {
        d->cause = VRAM_OOM_LEAK;
        growth(f, x, g, sizeof g);
        snprintf(d->line, sizeof d->line,
                 "owner \"%s\" holds %s of its %s budget and asks %s more, and the pool's live "
                 "bytes grow by %s: likely a leak",
                 x->owner, B(f, x->owner_live), B(f, x->owner_budget), B(f, x->request), g);
    } else {
        d->cause = VRAM_OOM_EXCEEDS_CONFIGURED;
        level(f, x, g, sizeof g);
        uint64_t need = x->owner_live + x->request;
        snprintf(d->line, sizeof d->line,
                 "owner \"%s\" holds %s of its %s budget and asks %s more (%s over it); %s: the "
                 "budget is too small for this workload",
                 x->owner, B(f, x->owner_live), B(f, x->owner_budget), B(f, x->request),
                 B(f, need > x->owner_budget ? need - x->owner_budget : 0), g);
    }
}

static void device_rules(fmt *f, const vram__oom_facts *x, vram__oom_diagnosis *d)
{
    char g[320];
    uint64_t cap = x->capacity;
    if (x->gpu_known && x->gpu_total && x->gpu_total < cap)
        cap = x->gpu_total;
    uint64_t dev_free = x->device_known ? x->device_free : 0;
    if (x->gpu_known && (!x->device_known || x->gpu_free < dev_free))
        dev_free = x->gpu_free;
    uint64_t room = x->largest_free > dev_free ? x->largest_free : dev_free;
    uint64_t shortfall = x->request > room ? x->request - room : 0;

    if (cap && x->request > cap) {
        d->cause = VRAM_OOM_EXCEEDS_CONFIGURED;
        snprintf(d->line, sizeof d->line,
                 "the request of %s is larger than the whole device (%s): no pool can serve it",
                 B(f, x->request), B(f, cap));
    } else if (x->pool_free + dev_free >= x->request && x->largest_free < x->request &&
               dev_free < x->request) {
        d->cause = VRAM_OOM_FRAGMENTATION;
        snprintf(d->line, sizeof d->line,
                 "%s is free in the pool and %s on the device, enough for the request of %s, "
                 "but the largest free block is %s (fragmentation ratio %.2f)",
                 B(f, x->pool_free), B(f, dev_free), B(f, x->request), B(f, x->largest_free),
                 x->fragmentation);
    } else if (x->trend_known && x->growing) {
        d->cause = VRAM_OOM_LEAK;
        growth(f, x, g, sizeof g);
        snprintf(d->line, sizeof d->line,
                 "the pool's live bytes grow by %s: likely a leak; live %s, reserved %s of a "
                 "%s device when %s was asked",
                 g, B(f, x->live), B(f, x->reserved), B(f, cap), B(f, x->request));
    } else if (x->others_known && x->others_bytes && x->others_bytes >= shortfall) {
        d->cause = VRAM_OOM_OTHER_PROCESSES;
        char top[160] = "";
        if (x->top_bytes)
            snprintf(top, sizeof top, " (the most: pid %u%s%s%s with %s)", x->top_pid,
                     x->top_name && *x->top_name ? " \"" : "", x->top_name ? x->top_name : "",
                     x->top_name && *x->top_name ? "\"" : "", B(f, x->top_bytes));
        char who[48] = "other processes";
        if (x->others_count)
            snprintf(who, sizeof who, "%u other process(es)", x->others_count);
        snprintf(d->line, sizeof d->line,
                 "%s hold %s of GPU %d%s; the request of %s lacked %s (device free %s, largest "
                 "free block %s): without them it would fit%s%s",
                 who, B(f, x->others_bytes), x->gpu_index, top, B(f, x->request),
                 B(f, shortfall), B(f, dev_free), B(f, x->largest_free),
                 x->others_note ? "; " : "", x->others_note ? x->others_note : "");
    } else {
        d->cause = VRAM_OOM_EXCEEDS_CONFIGURED;
        level(f, x, g, sizeof g);
        snprintf(d->line, sizeof d->line,
                 "live %s (reserved %s) plus the request of %s do not fit a %s device (device "
                 "free %s, largest free block %s); %s: the workload needs more memory than "
                 "configured",
                 B(f, x->live), B(f, x->reserved), B(f, x->request), B(f, cap), B(f, dev_free),
                 B(f, x->largest_free), g);
    }
}

void vram__oom_diagnose(const vram__oom_facts *x, vram__oom_diagnosis *d)
{
    fmt f = {.n = 0};
    memset(d, 0, sizeof *d);
    if (x->error == VRAM_EBUDGET)
        budget_rules(&f, x, d);
    else
        device_rules(&f, x, d);
}
