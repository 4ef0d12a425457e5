/* src/preload/report.c - the report at the program's exit: JSON at the
 * path asked and the same as text beside it (PATH.txt, or stderr when no
 * path was given): the mode and budget, the peak and what was charged at
 * exit, each kind's calls, failures and bytes, every context with its
 * measured cost and, where a device had more than one, the cost and the
 * one-line fix, the memory still live at exit by call site (symbolized
 * with dladdr, and the module and offset for addr2line), the stages marked
 * the graphs' memory as the driver counts it, and the group's and pool's
 * figures. */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_internal.h"

#define SITES 4096
#define MIB (1024.0 * 1024.0)

typedef struct site {
    const void *at;
    vram__pl_kind kind;
    uint64_t bytes, count;
} site;

typedef struct sites {
    site *v;
    size_t n, cap;
} sites;

static void add_live(void *arg, vram__pl_kind k, uint64_t key, uint64_t size, const void *at)
{
    (void)key;
    sites *s = arg;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].at == at && s->v[i].kind == k) {
            s->v[i].bytes += size;
            s->v[i].count++;
            return;
        }
    if (s->n < s->cap)
        s->v[s->n++] = (site){at, k, size, 1};
}

static int by_bytes(const void *a, const void *b)
{
    const site *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* JSON string contents: quotes, backslashes and control characters escaped. */
static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

typedef struct where {
    char sym[256], module[512];
    uintptr_t offset; /* in the module, for addr2line */
} where;

static void locate(const void *at, where *w)
{
    Dl_info di;
    memset(w, 0, sizeof *w);
    if (dladdr(at, &di) && di.dli_fname) {
        snprintf(w->module, sizeof w->module, "%s", di.dli_fname);
        w->offset = (uintptr_t)at - (uintptr_t)di.dli_fbase;
        if (di.dli_sname)
            snprintf(w->sym, sizeof w->sym, "%s+0x%lx", di.dli_sname,
                     (unsigned long)((uintptr_t)at - (uintptr_t)di.dli_saddr));
    }
    if (!w->sym[0])
        snprintf(w->sym, sizeof w->sym, "%p", at);
}

/* The devices with more than one context: the advice, or "" (into buf). */
static int advice(const vram__pl_context *c, size_t n, int device, char *buf, size_t cap)
{
    size_t count = 0;
    uint64_t cost = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].device == device) {
            count++;
            cost += c[i].cost;
        }
    if (count < 2)
        return 0;
    uint64_t each = cost / count;
    snprintf(buf, cap,
             "device %d: %zu contexts cost %.0f MiB here (%.0f MiB each); share the primary "
             "context (cuDevicePrimaryCtxRetain + cuCtxSetCurrent) in each thread: one costs "
             "%.0f MiB",
             device, count, cost / MIB, each / MIB, each / MIB);
    return 1;
}

static void write_json(FILE *f, const sites *s, const vram__pl_context *ctx, size_t n_ctx,
                       const vram__pl_stage *st, size_t n_st)
{
    fprintf(f, "{\"mode\": \"%s\", \"pid\": %d, \"budget_bytes\": %llu, \"peak_bytes\": %llu, "
               "\"charged_bytes_at_exit\": %llu, \"untracked\": %llu,\n \"kinds\": {",
            vram__pl_mode_name(), (int)getpid(), (unsigned long long)vram__pl_budget(),
            (unsigned long long)vram__pl_peak_bytes(),
            (unsigned long long)vram__pl_charged_bytes(), (unsigned long long)vram__pl_untracked());
    for (int k = 0; k < VRAM__PL_KINDS; k++) {
        vram__pl_kind_stats ks;
        vram__pl_kind_stats_get((vram__pl_kind)k, &ks);
        fprintf(f, "%s\"%s\": {\"calls\": %llu, \"failures\": %llu, \"frees\": %llu, "
                   "\"live_bytes\": %llu, \"live_count\": %llu, \"peak_bytes\": %llu}",
                k ? ", " : "", vram__pl_kind_name((vram__pl_kind)k),
                (unsigned long long)ks.calls, (unsigned long long)ks.failures,
                (unsigned long long)ks.frees, (unsigned long long)ks.live_bytes,
                (unsigned long long)ks.live_count, (unsigned long long)ks.peak_bytes);
    }
    fprintf(f, "},\n \"contexts\": [");
    for (size_t i = 0; i < n_ctx; i++)
        fprintf(f, "%s{\"device\": %d, \"primary\": %s, \"alive_at_exit\": %s, \"cost_bytes\": %llu}",
                i ? ", " : "", ctx[i].device, ctx[i].primary ? "true" : "false",
                ctx[i].alive ? "true" : "false", (unsigned long long)ctx[i].cost);
    fprintf(f, "],\n \"advice\": [");
    int first = 1;
    for (int d = 0; d < 64; d++) {
        char a[512];
        if (advice(ctx, n_ctx, d, a, sizeof a)) {
            fputs(first ? "" : ", ", f);
            jstr(f, a);
            first = 0;
        }
    }
    fprintf(f, "],\n \"live_at_exit\": [");
    for (size_t i = 0; i < s->n; i++) {
        where w;
        locate(s->v[i].at, &w);
        fprintf(f, "%s\n  {\"kind\": \"%s\", \"bytes\": %llu, \"count\": %llu, \"site\": ",
                i ? "," : "", vram__pl_kind_name(s->v[i].kind), (unsigned long long)s->v[i].bytes,
                (unsigned long long)s->v[i].count);
        jstr(f, w.sym);
        fprintf(f, ", \"module\": ");
        jstr(f, w.module);
        fprintf(f, ", \"offset\": \"0x%lx\", \"address\": \"%p\"}", (unsigned long)w.offset,
                s->v[i].at);
    }
    fprintf(f, "],\n \"stages\": [");
    for (size_t i = 0; i < n_st; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        jstr(f, st[i].name);
        fprintf(f, ", \"live_at_start_bytes\": %llu, \"peak_bytes\": %llu}",
                (unsigned long long)st[i].start_live, (unsigned long long)st[i].peak);
    }
    uint64_t gu = 0, gb = 0;
    unsigned gm = 0;
    vram__pl_group_use(&gu, &gb, &gm);
    char pool[512];
    vram__pl_pool_report(pool, sizeof pool);
    fprintf(f, "],\n \"graph_memory_high_bytes\": %llu,\n \"group\": {\"members\": %u, "
               "\"used_bytes\": %llu, \"budget_bytes\": %llu}, \"pool\": ",
            (unsigned long long)vram__pl_graph_memory(), gm, (unsigned long long)gu,
            (unsigned long long)gb);
    jstr(f, pool);
    fprintf(f, "}\n");
}

static void write_text(FILE *f, const sites *s, const vram__pl_context *ctx, size_t n_ctx,
                       const vram__pl_stage *st, size_t n_st)
{
    fprintf(f, "vramkit trace: pid %d, mode %s", (int)getpid(), vram__pl_mode_name());
    if (vram__pl_limit())
        fprintf(f, ", budget %.1f MiB", vram__pl_budget() / MIB);
    fprintf(f, "\n  device memory: peak %.1f MiB, %.1f MiB still held at exit\n",
            vram__pl_peak_bytes() / MIB, vram__pl_charged_bytes() / MIB);
    for (int k = 0; k < VRAM__PL_KINDS; k++) {
        vram__pl_kind_stats ks;
        vram__pl_kind_stats_get((vram__pl_kind)k, &ks);
        if (!ks.calls)
            continue;
        fprintf(f, "  %-8s %8llu calls, %llu refused, peak %.1f MiB, %.1f MiB live at exit\n",
                vram__pl_kind_name((vram__pl_kind)k), (unsigned long long)ks.calls,
                (unsigned long long)ks.failures, ks.peak_bytes / MIB, ks.live_bytes / MIB);
    }
    fprintf(f, "  contexts: %zu\n", n_ctx);
    for (size_t i = 0; i < n_ctx; i++)
        fprintf(f, "    device %d, %s, %.1f MiB%s\n", ctx[i].device,
                ctx[i].primary ? "primary" : "its own (cuCtxCreate)", ctx[i].cost / MIB,
                ctx[i].alive ? "" : ", destroyed");
    for (int d = 0; d < 64; d++) {
        char a[512];
        if (advice(ctx, n_ctx, d, a, sizeof a))
            fprintf(f, "  %s\n", a);
    }
    if (s->n)
        fprintf(f, "  live at exit, by call site:\n");
    for (size_t i = 0; i < s->n && i < 20; i++) {
        where w;
        locate(s->v[i].at, &w);
        fprintf(f, "    %.1f MiB in %llu %s allocation%s at %s (%s+0x%lx)\n", s->v[i].bytes / MIB,
                (unsigned long long)s->v[i].count, vram__pl_kind_name(s->v[i].kind),
                s->v[i].count == 1 ? "" : "s", w.sym, w.module, (unsigned long)w.offset);
    }
    if (n_st > 1)
        for (size_t i = 0; i < n_st; i++)
            fprintf(f, "  stage %s: %.1f MiB at its start, peak %.1f MiB\n", st[i].name,
                    st[i].start_live / MIB, st[i].peak / MIB);
    vram__pl_kind_stats gk;
    vram__pl_kind_stats_get(VRAM__PL_GRAPH, &gk);
    if (gk.calls)
        fprintf(f, "  CUDA graphs: %llu allocations captured; the driver's graph memory peaked at "
                   "%.1f MiB\n",
                (unsigned long long)gk.calls, vram__pl_graph_memory() / MIB);
    if (vram__pl_untracked())
        fprintf(f, "  %llu allocations were counted but not kept by call site\n",
                (unsigned long long)vram__pl_untracked());
}

void vram__pl_report_write(const char *path)
{
    sites s = {.cap = SITES};
    s.v = calloc(SITES, sizeof *s.v);
    if (s.v)
        vram__pl_live_each(add_live, &s);
    qsort(s.v, s.n, sizeof *s.v, by_bytes);
    static vram__pl_context ctx[1024];
    size_t n_ctx = vram__pl_contexts(ctx, 1024);
    static vram__pl_stage st[256];
    size_t n_st = vram__pl_stages(st, 256);
    if (path && *path) {
        FILE *f = fopen(path, "w");
        if (f) {
            write_json(f, &s, ctx, n_ctx, st, n_st);
            fclose(f);
        }
        char txt[4200];
        snprintf(txt, sizeof txt, "%s.txt", path);
        if ((f = fopen(txt, "w"))) {
            write_text(f, &s, ctx, n_ctx, st, n_st);
            fclose(f);
        }
    } else {
        write_text(stderr, &s, ctx, n_ctx, st, n_st);
    }
    free(s.v);
}
