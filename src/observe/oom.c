/* src/observe/oom.c - the OOM watch of a pool (vramkit/oom.h): options, the
 * rate limit (decided under the pool's lock at the refusal, see
 * mem/oom_hook.h), and the report step run outside the lock: the GPU as
 * NVML sees it, the monitor's trend, the diagnosis, the files, the counters
 * and the callback. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/internal.h"
#include "base/log_internal.h"
#include "oom_internal.h"
#include "vramkit/config.h"
#include "vramkit/device.h"

/* The device a GPU backend draws from: defined in src/gpu when the build has
 * CUDA; a weak reference, so that a build without it has none (NULL). */
vram_device *vram__backend_gpu_device(const vram_backend *b) __attribute__((weak));

typedef struct watch {
    char *dir;
    vram_monitor *monitor;
    int gpu_index;           /* NVML index, or -1 */
    char *pci;               /* or this PCI bus id (NULL) */
    char gpu_why[256];       /* why no GPU is read, when neither is set */
    uint32_t max_reports;
    double window_s;
    vram_oom_fn on_report;
    void *ctx;
    /* Under the pool's lock (admit, stats). */
    uint64_t refusals, suppressed, suppressed_since;
    double window_start;
    uint32_t in_window;
    /* Under mu (report steps run concurrently). */
    pthread_mutex_t mu;
    uint64_t reports, write_failures;
    char last_json[4096];
} watch;

static _Atomic(vram__oom_gpu_reader) gpu_reader;

void vram__oom_set_gpu_reader(vram__oom_gpu_reader fn) { gpu_reader = fn; }

static int nvml_reader(const char *pci, int index, vram_gpu_memory *out)
{
    return pci ? vram_gpu_memory_read_pci(pci, out) : vram_gpu_memory_read(index, out);
}

static double mono_s(void) { return (double)vram__now_ns() * 1e-9; }

int vram_oom_opts_init(vram_oom_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_oom_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_oom_opts){
        .directory = c->oom_dir,
        .last_events = c->oom_events > UINT32_MAX ? UINT32_MAX : (uint32_t)c->oom_events,
        .gpu_index = -1,
        .max_reports = c->oom_max_reports > UINT32_MAX ? UINT32_MAX : (uint32_t)c->oom_max_reports,
        .window_s = 60.0,
    };
    return rc;
}

/* Under the pool's lock: count the refusal and apply the rate limit. */
static int admit(void *ctx, int error, int may_report, uint64_t *note)
{
    (void)error;
    watch *w = ctx;
    w->refusals++;
    double now = mono_s();
    if (now - w->window_start >= w->window_s) {
        w->window_start = now;
        w->in_window = 0;
    }
    if (!may_report || w->in_window >= w->max_reports) {
        w->suppressed++;
        w->suppressed_since++;
        return 0;
    }
    w->in_window++;
    *note = w->suppressed_since;
    w->suppressed_since = 0;
    return 1;
}

static void release(void *ctx)
{
    watch *w = ctx;
    pthread_mutex_destroy(&w->mu);
    free(w->dir);
    free(w->pci);
    free(w);
}

/* The GPU: read it, and work out what the other processes hold. */
static void read_gpu(const watch *w, const vram__oom_capture *cap, vram__oom_extra *x)
{
    vram__oom_facts *f = &x->facts;
    if (!w->pci && w->gpu_index < 0) {
        snprintf(x->gpu_why, sizeof x->gpu_why, "%s", w->gpu_why);
        return;
    }
    vram__oom_gpu_reader rd = gpu_reader ? gpu_reader : nvml_reader;
    int rc = rd(w->pci, w->gpu_index, &x->gpu);
    if (rc) {
        snprintf(x->gpu_why, sizeof x->gpu_why, "%s", vram_last_error());
        if (!x->gpu_why[0])
            snprintf(x->gpu_why, sizeof x->gpu_why, "reading the GPU failed: %s",
                     vram_err_name(rc));
        return;
    }
    x->gpu_known = f->gpu_known = 1;
    f->gpu_index = x->gpu.index;
    f->gpu_total = x->gpu.total_bytes;
    f->gpu_used = x->gpu.used_bytes;
    f->gpu_free = x->gpu.free_bytes;
    /* The pool's reserved bytes are on this GPU only with a GPU backend. */
    uint64_t ours = vram_backend_is_gpu(cap->backend) ? cap->stats.reserved_bytes : 0;
    if (!x->gpu.processes_known) {
        f->others_known = 1;
        f->others_bytes = f->gpu_used > ours ? f->gpu_used - ours : 0;
        f->others_note = "NVML would not list the processes: the GPU's used bytes minus this "
                         "pool's reserved bytes";
        return;
    }
    unsigned self = (unsigned)getpid();
    int found_self = 0;
    uint64_t all = 0;
    for (unsigned i = 0; i < x->gpu.n_processes; i++) {
        const vram_gpu_process *p = &x->gpu.processes[i];
        if (p->used_bytes == VRAM_GPU_BYTES_UNKNOWN)
            continue;
        all += p->used_bytes;
        if (p->pid == self) {
            found_self = 1;
            continue;
        }
        f->others_bytes += p->used_bytes;
        f->others_count++;
        if (p->used_bytes > f->top_bytes) {
            f->top_bytes = p->used_bytes;
            f->top_pid = p->pid;
            f->top_name = p->name;
        }
    }
    f->others_known = 1;
    if (!found_self && ours) {
        /* In another PID namespace this process is not recognisable in
         * NVML's list: take this pool's reserved bytes off the total. */
        f->others_bytes = all > ours ? all - ours : 0;
        f->others_note = "this process is not in NVML's list (another PID namespace): the "
                         "processes' bytes minus this pool's reserved bytes";
    }
}

static void read_trend(const watch *w, const vram__oom_capture *cap, vram__oom_extra *x)
{
    vram__oom_facts *f = &x->facts;
    if (!w->monitor) {
        snprintf(x->trend_why, sizeof x->trend_why, "no monitor is attached to the OOM watch");
        return;
    }
    int rc = vram_monitor_trend(w->monitor, cap->pool, &x->trend);
    if (rc) {
        snprintf(x->trend_why, sizeof x->trend_why, "the monitor has no trend for pool \"%s\": %s",
                 cap->pool, vram_last_error());
        return;
    }
    if (x->trend.samples < 3 || !isfinite(x->trend.slope_bytes_per_s)) {
        snprintf(x->trend_why, sizeof x->trend_why,
                 "too few samples in the monitor's window for a trend (%u)", x->trend.samples);
        return;
    }
    x->trend_known = f->trend_known = 1;
    f->samples = x->trend.samples;
    f->slope_per_s = x->trend.slope_bytes_per_s;
    f->slope_per_iteration = x->trend.slope_bytes_per_iteration;
    f->r2 = x->trend.r2;
    f->confidence = x->trend.confidence;
    f->growing = x->trend.growing;
}

static void fill_facts(const vram__oom_capture *cap, vram__oom_facts *f)
{
    f->error = cap->error;
    f->request = cap->size;
    f->owner = cap->owner_name;
    if (cap->owners && cap->owner < cap->n_owners) {
        f->owner_live = cap->owners[cap->owner].live_bytes;
        f->owner_budget = cap->owners[cap->owner].budget_bytes;
    }
    f->live = cap->stats.live_bytes;
    f->reserved = cap->stats.reserved_bytes;
    f->pool_free = cap->stats.free_bytes;
    f->largest_free = cap->stats.largest_free_bytes;
    f->pending = cap->stats.pending_bytes;
    f->fragmentation = cap->stats.fragmentation_ratio;
    f->capacity = cap->capacity;
    f->device_known = cap->device_known;
    f->device_free = cap->device_free;
}

static void count_failure(watch *w, vram_pool *pool, const char *why)
{
    pthread_mutex_lock(&w->mu);
    w->write_failures++;
    pthread_mutex_unlock(&w->mu);
    vram__log(VRAM_LOG_WARN, "pool \"%s\": an allocation was refused and its OOM report could not "
                             "be written: %s",
              vram_pool_name(pool), why);
}

/* Outside the pool's lock, on the refusing thread. */
static void report(void *ctx, vram_pool *pool, const vram__oom_capture *cap)
{
    watch *w = ctx;
    vram__oom_extra *x = calloc(1, sizeof *x);
    vram__oom_paths *paths = calloc(1, sizeof *paths);
    if (!x || !paths) {
        free(x);
        free(paths);
        count_failure(w, pool, "out of host memory");
        return;
    }
    x->suppressed = cap->note;
    fill_facts(cap, &x->facts);
    read_gpu(w, cap, x);
    read_trend(w, cap, x);
    vram__oom_diagnose(&x->facts, &x->diagnosis);
    int rc = vram__oom_mkdir(w->dir);
    if (!rc)
        rc = vram__oom_write(w->dir, cap, x, paths);
    if (rc) {
        count_failure(w, pool, vram_last_error());
    } else {
        pthread_mutex_lock(&w->mu);
        w->reports++;
        snprintf(w->last_json, sizeof w->last_json, "%s", paths->json);
        pthread_mutex_unlock(&w->mu);
        char sz[32];
        vram__log(VRAM_LOG_WARN, "pool \"%s\": %s refused (%s, likely %s); report in %s",
                  cap->pool, vram__fmt_bytes(sz, sizeof sz, cap->size), vram_err_name(cap->error),
                  vram_oom_cause_name(x->diagnosis.cause), paths->text);
        if (w->on_report) {
            vram_oom_report_info info = {
                .pool = cap->pool,
                .text_path = paths->text,
                .json_path = paths->json,
                .snapshot_path = paths->have_snapshot ? paths->snapshot : NULL,
                .error = cap->error,
                .size_bytes = cap->size,
                .cause = x->diagnosis.cause,
                .diagnosis = x->diagnosis.line,
                .suppressed = x->suppressed,
            };
            w->on_report(w->ctx, &info);
        }
    }
    free(x);
    free(paths);
}

/* Which GPU to read when the options name none: the pool's own. */
static void pick_gpu(watch *w, vram_pool *pool)
{
    vram_backend *b = vram_pool_backend(pool);
    const char *name = vram_backend_name(b);
    vram_device *dev = vram__backend_gpu_device ? vram__backend_gpu_device(b) : NULL;
    vram_device_info info;
    if (dev && vram_device_info_get(dev, &info) == 0 && info.pci_bus_id[0]) {
        w->pci = vram__strdup(info.pci_bus_id);
        if (w->pci)
            return;
    }
    snprintf(w->gpu_why, sizeof w->gpu_why,
             "no GPU to read: the pool's backend (%s) is %s, and the OOM options name no GPU "
             "(gpu_index, gpu_pci_bus_id)",
             name, vram_backend_is_gpu(name) ? "a GPU one whose device is unknown" : "not a GPU");
}

int vram_pool_oom_watch(vram_pool *pool, const vram_oom_opts *o)
{
    if (!pool || !o)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_watch: pool and opts are required");
    if (!o->directory || !*o->directory)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": an OOM watch needs a directory",
                          vram_pool_name(pool));
    if (!o->max_reports)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": max_reports must be at least 1",
                          vram_pool_name(pool));
    if (!(o->window_s > 0) || !isfinite(o->window_s))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": window_s %g must be a positive number",
                          vram_pool_name(pool), o->window_s);
    if (o->last_events > (1u << 24))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": last_events %u is more than %u",
                          vram_pool_name(pool), o->last_events, 1u << 24);
    int rc = vram__oom_mkdir(o->directory);
    if (rc)
        return rc;
    watch *w = vram__calloc(1, sizeof *w);
    if (!w)
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&w->mu, NULL);
    w->dir = vram__strdup(o->directory);
    w->monitor = o->monitor;
    w->gpu_index = o->gpu_pci_bus_id ? -1 : o->gpu_index;
    w->max_reports = o->max_reports;
    w->window_s = o->window_s;
    w->on_report = o->on_report;
    w->ctx = o->ctx;
    w->window_start = -INFINITY;
    rc = w->dir ? 0 : VRAM_EHOSTMEM;
    if (!rc && o->gpu_pci_bus_id && !(w->pci = vram__strdup(o->gpu_pci_bus_id)))
        rc = VRAM_EHOSTMEM;
    if (!rc && !w->pci && w->gpu_index < 0)
        pick_gpu(w, pool);
    vram__oom_hook hook = {admit, report, release, w};
    if (!rc)
        rc = vram__pool_oom_hook_set(pool, &hook, o->last_events);
    if (rc)
        release(w);
    return rc;
}

int vram_pool_oom_unwatch(vram_pool *pool)
{
    if (!pool)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_unwatch: pool is NULL");
    return vram__pool_oom_hook_clear(pool);
}

static void read_stats(void *ctx, void *arg)
{
    watch *w = ctx;
    vram_oom_stats *out = arg;
    out->refusals = w->refusals;
    out->suppressed = w->suppressed;
    pthread_mutex_lock(&w->mu);
    out->reports = w->reports;
    out->write_failures = w->write_failures;
    snprintf(out->last_json_path, sizeof out->last_json_path, "%s", w->last_json);
    pthread_mutex_unlock(&w->mu);
}

int vram_pool_oom_stats(vram_pool *pool, vram_oom_stats *out)
{
    if (!pool || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_stats: pool and out are required");
    memset(out, 0, sizeof *out);
    return vram__pool_oom_with_ctx(pool, read_stats, out);
}
