/* src/observe/oom_write.c - the files of an OOM report: their names, the
 * snapshot, the JSON (the format in vramkit/oom.h and the observe contract)
 * and the text for people. Each file is written under a temporary name and
 * renamed into place, so a reader never sees half a report; the text file's
 * name is reserved first (O_EXCL), which makes names unique across threads
 * and processes sharing a directory. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/internal.h"
#include "oom_internal.h"
#include "vramkit/trace.h"

int vram__oom_mkdir(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n >= sizeof path)
        return vram__fail(VRAM_EIO, "OOM report directory \"%.64s...\" is too long", dir);
    memcpy(path, dir, n + 1);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return vram__fail(VRAM_EIO, "cannot create the OOM report directory %s: %s", path,
                              strerror(errno));
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return vram__fail(VRAM_EIO, "OOM report directory %s is not a directory", dir);
    return 0;
}

/* ---- JSON ---- */

static cJSON *hex(uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return cJSON_CreateString(b);
}

static void num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static const char *action_name(int a)
{
    return vram_trace_action_name(a == VRAM_EVENT_ALLOC  ? VRAM_TRACE_ALLOC
                                  : a == VRAM_EVENT_FREE ? VRAM_TRACE_FREE
                                                         : VRAM_TRACE_ALLOC_FAIL);
}

static cJSON *gpu_json(const vram__oom_extra *x)
{
    const vram_gpu_memory *g = &x->gpu;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "index", g->index);
    cJSON_AddStringToObject(o, "name", g->name);
    num(o, "total_bytes", (double)g->total_bytes);
    num(o, "used_bytes", (double)g->used_bytes);
    num(o, "free_bytes", (double)g->free_bytes);
    cJSON_AddBoolToObject(o, "processes_known", g->processes_known);
    cJSON *ps = cJSON_AddArrayToObject(o, "processes");
    for (unsigned i = 0; ps && g->processes_known && i < g->n_processes; i++) {
        cJSON *p = cJSON_CreateObject();
        if (!p)
            break;
        cJSON_AddNumberToObject(p, "pid", g->processes[i].pid);
        cJSON_AddStringToObject(p, "name", g->processes[i].name);
        if (g->processes[i].used_bytes == VRAM_GPU_BYTES_UNKNOWN)
            cJSON_AddNullToObject(p, "used_bytes");
        else
            num(p, "used_bytes", (double)g->processes[i].used_bytes);
        cJSON_AddItemToArray(ps, p);
    }
    const vram__oom_facts *f = &x->facts;
    if (f->others_known)
        num(o, "other_processes_bytes", (double)f->others_bytes);
    else
        cJSON_AddNullToObject(o, "other_processes_bytes");
    if (f->others_note)
        cJSON_AddStringToObject(o, "other_processes_note", f->others_note);
    return o;
}

cJSON *vram__oom_json(const vram__oom_capture *c, const vram__oom_extra *x,
                      const vram__oom_paths *paths)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddStringToObject(r, "type", "oom");
    num(r, "time_s", c->time_s);
    cJSON_AddStringToObject(r, "pool", c->pool);
    if (c->gpu >= 0) /* the pool's label; "gpu" below is what NVML read */
        num(r, "pool_gpu", c->gpu);
    cJSON_AddStringToObject(r, "backend", c->backend);
    cJSON_AddStringToObject(r, "policy", vram_policy_name(c->policy));
    cJSON *q = cJSON_AddObjectToObject(r, "request");
    if (q) {
        num(q, "size_bytes", (double)c->size);
        cJSON_AddStringToObject(q, "owner", c->owner_name);
        cJSON_AddStringToObject(q, "kind", vram_kind_name(c->kind));
        cJSON_AddItemToObject(q, "stream", hex((uint64_t)(uintptr_t)c->stream));
        cJSON_AddStringToObject(q, "error", vram_err_name(c->error));
        cJSON_AddStringToObject(q, "message", c->message);
    }
    cJSON *owners = cJSON_AddArrayToObject(r, "owners");
    for (size_t i = 0; owners && i < c->n_owners; i++) {
        const vram__oom_usage *u = &c->owners[i];
        /* Owners that never held anything say nothing; the requester always counts. */
        if (!u->live_bytes && !u->peak_live_bytes && !u->budget_bytes && i != c->owner)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "owner", u->name);
        num(o, "live_bytes", (double)u->live_bytes);
        num(o, "peak_live_bytes", (double)u->peak_live_bytes);
        num(o, "live_blocks", (double)u->live_blocks);
        num(o, "budget_bytes", (double)u->budget_bytes);
        cJSON_AddItemToArray(owners, o);
    }
    cJSON *kinds = cJSON_AddArrayToObject(r, "kinds");
    for (int k = 0; kinds && k < VRAM_KIND_COUNT; k++) {
        const vram__oom_usage *u = &c->kinds[k];
        if (!u->live_bytes && !u->peak_live_bytes && k != (int)c->kind)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "kind", u->name);
        num(o, "live_bytes", (double)u->live_bytes);
        num(o, "peak_live_bytes", (double)u->peak_live_bytes);
        cJSON_AddItemToArray(kinds, o);
    }
    const vram_pool_stats *s = &c->stats;
    num(r, "reserved_bytes", (double)s->reserved_bytes);
    num(r, "live_bytes", (double)s->live_bytes);
    num(r, "peak_live_bytes", (double)s->peak_live_bytes);
    num(r, "peak_reserved_bytes", (double)s->peak_reserved_bytes);
    num(r, "free_bytes", (double)s->free_bytes);
    num(r, "pending_bytes", (double)s->pending_bytes);
    num(r, "fragmentation_ratio", s->fragmentation_ratio);
    num(r, "largest_free_bytes", (double)s->largest_free_bytes);
    num(r, "capacity_bytes", (double)c->capacity);
    if (c->device_known)
        num(r, "device_free_bytes", (double)c->device_free);
    else
        cJSON_AddNullToObject(r, "device_free_bytes");
    if (x->gpu_known) {
        cJSON_AddItemToObject(r, "gpu", gpu_json(x));
    } else {
        cJSON_AddNullToObject(r, "gpu");
        cJSON_AddStringToObject(r, "gpu_unavailable", x->gpu_why);
    }
    if (x->trend_known) {
        cJSON *t = cJSON_AddObjectToObject(r, "trend");
        if (t) {
            num(t, "samples", x->trend.samples);
            num(t, "slope_bytes_per_s", x->trend.slope_bytes_per_s);
            num(t, "slope_bytes_per_iteration", x->trend.slope_bytes_per_iteration);
            num(t, "r2", x->trend.r2);
            num(t, "confidence", x->trend.confidence);
            cJSON_AddBoolToObject(t, "growing", x->trend.growing);
        }
    } else {
        cJSON_AddNullToObject(r, "trend");
        cJSON_AddStringToObject(r, "trend_unavailable", x->trend_why);
    }
    cJSON *ev = cJSON_AddArrayToObject(r, "last_events");
    for (size_t i = 0; ev && i < c->n_events; i++) {
        const vram__oom_event *e = &c->events[i];
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "action", action_name(e->action));
        num(o, "size_bytes", (double)e->size);
        cJSON_AddStringToObject(o, "owner", e->owner);
        cJSON_AddStringToObject(o, "kind", vram_kind_name(e->kind));
        cJSON_AddItemToObject(o, "stream", hex((uint64_t)(uintptr_t)e->stream));
        cJSON_AddItemToObject(o, "address", hex(e->addr));
        num(o, "time_s", e->time_s);
        cJSON_AddItemToArray(ev, o);
    }
    num(r, "events_total", (double)c->events_total);
    if (paths->have_snapshot) {
        cJSON_AddStringToObject(r, "snapshot_path", paths->snapshot);
    } else {
        cJSON_AddNullToObject(r, "snapshot_path");
        cJSON_AddStringToObject(r, "snapshot_unavailable", paths->snapshot_why);
    }
    num(r, "suppressed_before", (double)x->suppressed);
    cJSON *d = cJSON_AddObjectToObject(r, "diagnosis");
    if (d) {
        cJSON_AddStringToObject(d, "cause", vram_oom_cause_name(x->diagnosis.cause));
        cJSON_AddStringToObject(d, "line", x->diagnosis.line);
    }
    return r;
}

/* ---- text ---- */

static const char *fb(char *b, uint64_t v) { return vram__fmt_bytes(b, 32, v); }

static void utc(char *out, size_t cap, double t, int compact)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    if (compact) {
        strftime(out, cap, "%Y%m%dT%H%M%SZ", &tm);
    } else {
        char b[32];
        strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(out, cap, "%s.%03d UTC", b, (int)((t - floor(t)) * 1000.0));
    }
}

static void write_text(FILE *f, const vram__oom_capture *c, const vram__oom_extra *x,
                       const vram__oom_paths *paths)
{
    char a[32], b[32], d[32], e[32], t[64];
    const vram_pool_stats *s = &c->stats;
    utc(t, sizeof t, c->time_s, 0);
    char gpu[24] = "";
    if (c->gpu >= 0)
        snprintf(gpu, sizeof gpu, " on GPU %d", c->gpu);
    fprintf(f, "vramkit OOM report: pool \"%s\"%s (policy %s, backend %s), %s\n\n", c->pool, gpu,
            vram_policy_name(c->policy), c->backend, t);
    fprintf(f, "diagnosis: %s\n  %s\n\n", vram_oom_cause_name(x->diagnosis.cause),
            x->diagnosis.line);
    fprintf(f, "request: %s for owner \"%s\", kind %s, stream 0x%llx: %s\n  %s\n\n",
            fb(a, c->size), c->owner_name, vram_kind_name(c->kind),
            (unsigned long long)(uintptr_t)c->stream, vram_err_name(c->error), c->message);
    fprintf(f, "pool:\n");
    fprintf(f, "  live %s (peak %s), reserved %s (peak %s)\n", fb(a, s->live_bytes),
            fb(b, s->peak_live_bytes), fb(d, s->reserved_bytes), fb(e, s->peak_reserved_bytes));
    fprintf(f, "  free in the pool %s, largest free block %s, fragmentation %.3f, pending %s\n",
            fb(a, s->free_bytes), fb(b, s->largest_free_bytes), s->fragmentation_ratio,
            fb(d, s->pending_bytes));
    if (c->device_known)
        fprintf(f, "  device: capacity %s, free %s (as the backend sees it once the pool gave "
                   "back what it could)\n",
                fb(a, c->capacity), fb(b, c->device_free));
    else
        fprintf(f, "  device: capacity %s, free unknown\n", fb(a, c->capacity));
    fprintf(f, "\n  %-24s %12s %12s %8s %12s\n", "owner", "live", "peak", "blocks", "budget");
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < c->n_owners; i++) {
        const vram__oom_usage *u = &c->owners[i];
        if (!u->live_bytes && !u->peak_live_bytes && !u->budget_bytes && i != c->owner)
            continue;
        if (shown >= 32 && i != c->owner) {
            hidden++;
            continue;
        }
        shown++;
        fprintf(f, "  %-24s %12s %12s %8llu %12s%s\n", u->name, fb(a, u->live_bytes),
                fb(b, u->peak_live_bytes), (unsigned long long)u->live_blocks,
                u->budget_bytes ? fb(d, u->budget_bytes) : "-", i == c->owner ? "  <- request" : "");
    }
    if (hidden)
        fprintf(f, "  ... %zu more owner(s) in the JSON\n", hidden);
    fprintf(f, "\n  %-24s %12s %12s\n", "kind", "live", "peak");
    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        const vram__oom_usage *u = &c->kinds[k];
        if (u->live_bytes || u->peak_live_bytes || k == (int)c->kind)
            fprintf(f, "  %-24s %12s %12s\n", u->name, fb(a, u->live_bytes),
                    fb(b, u->peak_live_bytes));
    }
    fprintf(f, "\n");
    if (x->gpu_known) {
        const vram_gpu_memory *g = &x->gpu;
        fprintf(f, "GPU %d (%s): used %s of %s, free %s\n", g->index, g->name,
                fb(a, g->used_bytes), fb(b, g->total_bytes), fb(d, g->free_bytes));
        if (x->facts.others_known)
            fprintf(f, "  other processes hold %s%s%s\n", fb(a, x->facts.others_bytes),
                    x->facts.others_note ? ": " : "",
                    x->facts.others_note ? x->facts.others_note : "");
        if (!g->processes_known)
            fprintf(f, "  (NVML would not list the processes)\n");
        for (unsigned i = 0; g->processes_known && i < g->n_processes; i++) {
            const vram_gpu_process *p = &g->processes[i];
            fprintf(f, "  pid %-8u %-20s %12s%s\n", p->pid, p->name[0] ? p->name : "?",
                    p->used_bytes == VRAM_GPU_BYTES_UNKNOWN ? "unknown" : fb(a, p->used_bytes),
                    p->pid == (unsigned)getpid() ? "  (this process)" : "");
        }
        if (g->processes_known && g->n_processes_total > g->n_processes)
            fprintf(f, "  ... %u more process(es)\n", g->n_processes_total - g->n_processes);
    } else {
        fprintf(f, "GPU: no reading (%s)\n", x->gpu_why);
    }
    if (x->trend_known) {
        const vram_trend *tr = &x->trend;
        fprintf(f, "trend of live bytes: %+.0f B/s", tr->slope_bytes_per_s);
        if (isfinite(tr->slope_bytes_per_iteration))
            fprintf(f, ", %+.0f B/iteration", tr->slope_bytes_per_iteration);
        fprintf(f, " over %u samples (r2 %.3f, confidence %.3f): %s\n", tr->samples, tr->r2,
                tr->confidence, tr->growing ? "growing" : "not growing");
    } else {
        fprintf(f, "trend of live bytes: none (%s)\n", x->trend_why);
    }
    fprintf(f, "\nlast %zu event(s) of %llu, oldest first:\n", c->n_events,
            (unsigned long long)c->events_total);
    for (size_t i = 0; i < c->n_events; i++) {
        const vram__oom_event *ev = &c->events[i];
        time_t sec = (time_t)ev->time_s;
        struct tm tm;
        gmtime_r(&sec, &tm);
        char hms[16];
        strftime(hms, sizeof hms, "%H:%M:%S", &tm);
        char at[40] = "";
        if (ev->action != VRAM_EVENT_REFUSE)
            snprintf(at, sizeof at, " at 0x%llx", (unsigned long long)ev->addr);
        fprintf(f, "  %s.%03d  %-16s %12s  %-16s %-11s stream 0x%-12llx%s\n", hms,
                (int)((ev->time_s - floor(ev->time_s)) * 1000.0), action_name(ev->action),
                fb(a, ev->size), ev->owner, vram_kind_name(ev->kind),
                (unsigned long long)(uintptr_t)ev->stream, at);
    }
    if (!c->n_events)
        fprintf(f, "  (none kept: the watch keeps no ring of events)\n");
    fprintf(f, "\nsnapshot: %s\n", paths->have_snapshot ? paths->snapshot : paths->snapshot_why);
    fprintf(f, "json: %s\n", paths->json);
    if (x->suppressed)
        fprintf(f, "%llu earlier refusal(s) of this pool were not reported (rate limit)\n",
                (unsigned long long)x->suppressed);
}

/* ---- files ---- */

typedef int (*write_body)(FILE *f, const void *arg);

/* Write `final` through a temporary name and a rename. */
static int write_file(const char *final, write_body body, const void *arg)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return vram__fail(VRAM_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int rc = body(f, arg);
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (!rc && err)
        rc = vram__fail(VRAM_EIO, "cannot write %s: %s", tmp, strerror(err));
    if (!rc && rename(tmp, final) != 0)
        rc = vram__fail(VRAM_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

static int body_json(FILE *f, const void *arg)
{
    char *text = cJSON_PrintUnformatted((const cJSON *)arg);
    if (!text)
        return vram__fail(VRAM_EHOSTMEM, "out of host memory printing the OOM report's JSON");
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    return 0;
}

typedef struct text_arg {
    const vram__oom_capture *c;
    const vram__oom_extra *x;
    const vram__oom_paths *p;
} text_arg;

typedef struct text_span {
    const char *data;
    size_t len;
} text_span;

static int body_snapshot(FILE *f, const void *arg)
{
    const text_span *t = arg;
    fwrite(t->data, 1, t->len, f);
    fputc('\n', f);
    return 0;
}

static int body_text(FILE *f, const void *arg)
{
    const text_arg *t = arg;
    write_text(f, t->c, t->x, t->p);
    return 0;
}

static _Atomic unsigned report_seq;

/* Reserve <dir>/oom-<pool>-<time>-<seq>.txt and derive the other names. */
static int reserve(const char *dir, const vram__oom_capture *c, vram__oom_paths *p)
{
    char pool[64], ts[32];
    size_t n = 0;
    for (const char *s = c->pool; *s && n + 1 < sizeof pool; s++) {
        char ch = *s;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        pool[n++] = ok ? ch : '_';
    }
    pool[n] = '\0';
    utc(ts, sizeof ts, c->time_s, 1);
    for (int tries = 0; tries < 1000; tries++) {
        unsigned seq = atomic_fetch_add(&report_seq, 1) + 1;
        char base[4096 - 16];
        int len = snprintf(base, sizeof base, "%s/oom-%s-%s-%u", dir, pool, ts, seq);
        if (len < 0 || (size_t)len + 1 >= sizeof base)
            return vram__fail(VRAM_EIO, "OOM report path in %s is too long", dir);
        snprintf(p->text, sizeof p->text, "%s.txt", base);
        snprintf(p->json, sizeof p->json, "%s.json", base);
        snprintf(p->snapshot, sizeof p->snapshot, "%s.snapshot.json", base);
        int fd = open(p->text, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (errno != EEXIST)
            return vram__fail(VRAM_EIO, "cannot create %s: %s", p->text, strerror(errno));
    }
    return vram__fail(VRAM_EIO, "no free OOM report name in %s", dir);
}

int vram__oom_write(const char *dir, const vram__oom_capture *c, const vram__oom_extra *x,
                    vram__oom_paths *p)
{
    int rc = reserve(dir, c, p);
    if (rc)
        return rc;
    if (c->snapshot) {
        text_span snap = {c->snapshot, c->snapshot_len};
        p->have_snapshot = write_file(p->snapshot, body_snapshot, &snap) == 0;
        if (!p->have_snapshot)
            snprintf(p->snapshot_why, sizeof p->snapshot_why, "%s", vram_last_error());
    } else {
        snprintf(p->snapshot_why, sizeof p->snapshot_why,
                 "no snapshot: host memory ran out while taking it");
    }
    cJSON *root = vram__oom_json(c, x, p);
    rc = root ? write_file(p->json, body_json, root)
              : vram__fail(VRAM_EHOSTMEM, "out of host memory building the OOM report's JSON");
    cJSON_Delete(root);
    text_arg ta = {c, x, p};
    if (!rc)
        rc = write_file(p->text, body_text, &ta);
    if (rc) {
        unlink(p->text);
        unlink(p->json);
        if (p->have_snapshot)
            unlink(p->snapshot);
    }
    return rc;
}
