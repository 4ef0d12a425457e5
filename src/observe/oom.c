/* src/observe/oom.c - the OOM watch of a pool (vramkit/oom.h): a listener
 * of its refusals (vramkit/listener.h) with the ring of its last events.
 * Under the pool's lock, at a refusal, the rate limit decides and the ring
 * is copied; the pool captures its state for the report step, which runs
 * outside the lock: the GPU as NVML sees it, the monitor's trend, the
 * diagnosis, the files, the counters and the callback. Watches are found
 * by their pool through a registry. Loading this library also registers
 * the hook that watches pools made from the configuration when
 * VRAM_OOM_DIR names a directory. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/internal.h"
#include "oom_internal.h"
#include "vramkit/config.h"
#include "vramkit/device.h"
#include "vramkit/log.h"

typedef struct watch {
    vram_pool *pool;
    uint32_t listener;       /* its listener id */
    vram_ring *ring;         /* NULL: no events kept */
    uint32_t last_events;
    char *dir;
    vram_monitor *monitor;
    int gpu;                 /* NVML index, or VRAM_GPU_NONE */
    char *pci;               /* or this PCI bus id (NULL) */
    char gpu_why[256];       /* why no GPU is read, when neither is set */
    int pool_on_gpu;         /* the pool's backend is a GPU one */
    uint32_t max_reports;
    double window_s;
    vram_oom_fn on_report;
    void *ctx;
    /* Under mu: the rate limit (at refusals, under the pool's lock too)
     * and the counters (report steps run concurrently). */
    pthread_mutex_t mu;
    uint64_t refusals, suppressed, suppressed_since;
    double window_start;
    uint32_t in_window;
    uint64_t reports, write_failures;
    char *last_json;
    struct watch *next;      /* in the registry */
} watch;

/* What a refusal admitted under the lock hands to its report step. */
typedef struct watch_note {
    uint64_t suppressed;     /* refusals not reported since the previous report */
    uint64_t events_total;
    size_t n_events;
    vram_ring_event events[]; /* the ring, oldest first */
} watch_note;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static watch *registry;

static watch *registry_find(const vram_pool *pool)
{
    watch *w = registry;
    while (w && w->pool != pool)
        w = w->next;
    return w;
}

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
        .size = sizeof *o,
        .directory = c->oom_dir,
        .last_events = c->oom_events > UINT32_MAX ? UINT32_MAX : (uint32_t)c->oom_events,
        .gpu = VRAM_GPU_OWN,
        .max_reports = c->oom_max_reports > UINT32_MAX ? UINT32_MAX : (uint32_t)c->oom_max_reports,
        .window_s = 60.0,
    };
    const char *g = c->oom_gpu && *c->oom_gpu ? c->oom_gpu : "own";
    int prc = vram_gpu_parse(g, &o->gpu, &o->gpu_pci_bus_id);
    if (!prc && o->gpu == VRAM_GPU_ALL)
        prc = vram__fail(VRAM_EINVAL, "an OOM report reads one GPU, not \"%s\"", g);
    if (prc) {
        o->gpu = VRAM_GPU_OWN;
        o->gpu_pci_bus_id = NULL;
        if (!rc)
            rc = vram__fail_prefix(prc, "VRAM_OOM_GPU: ");
    }
    return rc;
}

/* Under the pool's lock, at a refusal: count it, apply the rate limit, and
 * for one that gets a report copy the ring. */
static int on_refusal(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)pool;
    watch *w = ctx;
    if (ev->error != VRAM_EBUDGET && ev->error != VRAM_ENOMEM)
        return 0;
    pthread_mutex_lock(&w->mu);
    w->refusals++;
    double now = mono_s();
    if (now - w->window_start >= w->window_s) {
        w->window_start = now;
        w->in_window = 0;
    }
    /* A refusal made by a report step (the callback allocating) is counted,
     * never reported, so reporting cannot recurse. */
    if (ev->nested || w->in_window >= w->max_reports) {
        w->suppressed++;
        w->suppressed_since++;
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    w->in_window++;
    uint64_t suppressed = w->suppressed_since;
    w->suppressed_since = 0;
    pthread_mutex_unlock(&w->mu);
    /* Plain calloc: never the failing pool, and no error sentence touched.
     * Without memory the report step says so. */
    watch_note *n = calloc(1, sizeof *n + (size_t)w->last_events * sizeof n->events[0]);
    if (n) {
        n->suppressed = suppressed;
        if (w->ring)
            vram_ring_read(w->ring, n->events, w->last_events, &n->n_events, &n->events_total);
    }
    *note = n;
    return VRAM_LISTENER_REPORT;
}

static void watch_free(watch *w)
{
    pthread_mutex_destroy(&w->mu);
    free(w->dir);
    free(w->pci);
    free(w->last_json);
    free(w);
}

/* The watch's listener goes (unwatched, or the pool destroyed). */
static int on_detach(void *ctx, vram_pool *pool)
{
    (void)pool;
    watch *w = ctx;
    pthread_mutex_lock(&registry_lock);
    watch **pp = &registry;
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp)
        *pp = w->next;
    pthread_mutex_unlock(&registry_lock);
    watch_free(w);
    return 0;
}

/* The GPU: read it, and work out what the other processes hold. */
static void read_gpu(const watch *w, const vram__oom_capture *cap, vram__oom_extra *x)
{
    vram__oom_facts *f = &x->facts;
    if (!w->pci && w->gpu < 0) {
        snprintf(x->gpu_why, sizeof x->gpu_why, "%s", w->gpu_why);
        return;
    }
    vram__oom_gpu_reader rd = gpu_reader ? gpu_reader : nvml_reader;
    int rc = rd(w->pci, w->gpu, &x->gpu);
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
    uint64_t ours = w->pool_on_gpu ? cap->stats.reserved_bytes : 0;
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
    vram_log(VRAM_LOG_WARN, "pool \"%s\": an allocation was refused and its OOM report could not "
                             "be written: %s",
              vram_pool_name(pool), why);
}

static void usage_of(vram__oom_usage *u, const char *name, const vram_usage_stats *s)
{
    *u = (vram__oom_usage){name, s->live_bytes, s->peak_live_bytes, s->live_blocks,
                           s->budget_bytes};
}

/* The report's view of the refusal, from the event, the state and the
 * ring's copy. owners and events are the caller's to free. */
static int build_capture(const vram_event *ev, const vram_pool_state *st, const watch_note *n,
                         vram__oom_capture *c)
{
    *c = (vram__oom_capture){
        .time_s = st->time_s, .error = ev->error, .message = ev->message ? ev->message : "",
        .size = ev->size, .owner = ev->owner, .owner_name = "?", .kind = ev->kind,
        .stream = ev->stream, .pool = st->pool, .backend = st->backend, .policy = st->policy,
        .capacity = st->capacity, .device_known = st->device_known,
        .device_free = st->device_free_bytes, .device_total = st->device_total_bytes,
        .stats = st->stats, .events_total = n->events_total, .snapshot = st->snapshot,
        .snapshot_len = st->snapshot_len,
    };
    if (st->owners && ev->owner < st->n_owners)
        c->owner_name = st->owners[ev->owner].name;
    if (st->owners && (c->owners = calloc(st->n_owners ? st->n_owners : 1, sizeof *c->owners))) {
        c->n_owners = st->n_owners;
        for (size_t i = 0; i < st->n_owners; i++)
            usage_of(&c->owners[i], st->owners[i].name, &st->owners[i].usage);
    }
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        usage_of(&c->kinds[k], vram_kind_name((vram_kind)k), &st->kinds[k]);
    if (n->n_events && !(c->events = calloc(n->n_events, sizeof *c->events)))
        return VRAM_EHOSTMEM;
    for (size_t i = 0; i < n->n_events; i++) {
        const vram_ring_event *e = &n->events[i];
        c->events[i] = (vram__oom_event){
            .time_s = e->time_s, .addr = e->addr, .size = e->size, .stream = e->stream,
            .owner = st->owners && e->owner < st->n_owners ? st->owners[e->owner].name : "?",
            .kind = e->kind, .action = (int)e->type,
        };
    }
    c->n_events = n->n_events;
    return 0;
}

/* Outside the pool's lock, on the refusing thread. */
static void on_report(void *ctx, vram_pool *pool, const vram_event *ev,
                      const vram_pool_state *st, void *note)
{
    watch *w = ctx;
    watch_note *n = note;
    vram__oom_capture cap_store, *cap = &cap_store;
    vram__oom_extra *x = n && st ? calloc(1, sizeof *x) : NULL;
    vram__oom_paths *paths = x ? calloc(1, sizeof *paths) : NULL;
    if (!paths || build_capture(ev, st, n, cap)) {
        if (paths) {
            free(cap->owners);
            free(cap->events);
        }
        free(x);
        free(paths);
        free(n);
        count_failure(w, pool, "out of host memory");
        return;
    }
    x->suppressed = n->suppressed;
    cap->gpu = vram_pool_gpu(pool);
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
        char *json = strdup(paths->json);
        pthread_mutex_lock(&w->mu);
        w->reports++;
        if (json) {
            free(w->last_json);
            w->last_json = json;
        }
        pthread_mutex_unlock(&w->mu);
        char sz[32];
        vram_log(VRAM_LOG_WARN, "pool \"%s\": %s refused (%s, likely %s); report in %s",
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
    free(cap->owners);
    free(cap->events);
    free(x);
    free(paths);
    free(n);
}

/* Which GPU to read when the options name none: the pool's own. */
static void pick_gpu(watch *w, vram_pool *pool)
{
    vram_backend *b = vram_pool_backend(pool);
    vram_device *dev = vram_backend_device(b);
    vram_device_info info;
    if (dev && vram_device_info_get(dev, &info) == 0 && info.pci_bus_id[0]) {
        w->pci = vram__strdup(info.pci_bus_id);
        if (w->pci)
            return;
    }
    snprintf(w->gpu_why, sizeof w->gpu_why,
             "no GPU to read: the pool's backend (%s) is %s, and the OOM options name no other "
             "(gpu, gpu_pci_bus_id)",
             vram_backend_name(b),
             vram_backend_is_gpu(b) ? "a GPU one whose device is unknown" : "not a GPU");
}

static int check_opts(vram_pool *pool, const vram_oom_opts *o)
{
    if (!o->directory || !*o->directory)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": an OOM watch needs a directory",
                          vram_pool_name(pool));
    if (!o->max_reports)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": max_reports must be at least 1",
                          vram_pool_name(pool));
    if (!(o->window_s > 0) || !isfinite(o->window_s))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": window_s %g must be a positive number",
                          vram_pool_name(pool), o->window_s);
    if (o->gpu < VRAM_GPU_OWN || o->gpu == VRAM_GPU_ALL)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": an OOM report reads one GPU: an NVML index, "
                                       "a PCI bus id, VRAM_GPU_OWN or VRAM_GPU_NONE, not %d",
                          vram_pool_name(pool), o->gpu);
    if (o->last_events > (1u << 24))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": last_events %u is more than %u",
                          vram_pool_name(pool), o->last_events, 1u << 24);
    return 0;
}

int vram_pool_oom_watch(vram_pool *pool, const vram_oom_opts *opts)
{
    if (!pool || !opts)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_watch: pool and opts are required");
    vram_oom_opts taken;
    vram_oom_opts_init(&taken); /* the caller's options decide, not the environment */
    int rc = vram__opts_take(&taken, opts, sizeof taken, "vram_oom_opts");
    const vram_oom_opts *o = &taken;
    if (!rc)
        rc = check_opts(pool, o);
    if (rc)
        return rc;
    watch *w = vram__calloc(1, sizeof *w);
    if (!w)
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&w->mu, NULL);
    w->pool = pool;
    w->pool_on_gpu = vram_backend_is_gpu(vram_pool_backend(pool));
    w->dir = vram__strdup(o->directory);
    w->monitor = o->monitor;
    w->gpu = o->gpu_pci_bus_id || o->gpu < 0 ? VRAM_GPU_NONE : o->gpu;
    w->max_reports = o->max_reports;
    w->window_s = o->window_s;
    w->on_report = o->on_report;
    w->ctx = o->ctx;
    w->window_start = -INFINITY;
    rc = w->dir ? 0 : VRAM_EHOSTMEM;
    if (!rc && o->gpu_pci_bus_id && !(w->pci = vram__strdup(o->gpu_pci_bus_id)))
        rc = VRAM_EHOSTMEM;
    if (!rc && !w->pci && o->gpu == VRAM_GPU_OWN)
        pick_gpu(w, pool);
    else if (!rc && !w->pci && o->gpu == VRAM_GPU_NONE)
        snprintf(w->gpu_why, sizeof w->gpu_why, "no GPU is read (the OOM options say none)");
    pthread_mutex_lock(&registry_lock);
    if (!rc && registry_find(pool))
        rc = vram__fail(VRAM_EBUSY, "pool \"%s\" already has an OOM watch (unwatch it first)",
                        vram_pool_name(pool));
    /* The directory once the watch is known to go ahead: a refused one
     * leaves nothing behind. */
    if (!rc)
        rc = vram__oom_mkdir(o->directory);
    /* The ring first, so that at a refusal it holds the refusal too. */
    if (!rc && o->last_events) {
        rc = vram_pool_ring_attach(pool, o->last_events, &w->ring);
        w->last_events = o->last_events;
    }
    vram_listener l = {.size = sizeof l, .events = VRAM_EVENT_BIT(VRAM_EVENT_REFUSE),
                       .flags = VRAM_LISTENER_STATE, .on_event = on_refusal,
                       .on_report = on_report, .on_detach = on_detach, .ctx = w};
    if (!rc)
        rc = vram_pool_listen(pool, &l, &w->listener);
    if (!rc) {
        w->next = registry;
        registry = w;
    }
    pthread_mutex_unlock(&registry_lock);
    if (rc) {
        vram__saved_error err;
        vram__error_save(&err);
        if (w->ring)
            vram_pool_ring_detach(pool, w->ring);
        watch_free(w);
        return vram__error_restore(&err, rc);
    }
    return 0;
}

int vram_pool_oom_unwatch(vram_pool *pool)
{
    if (!pool)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_unwatch: pool is NULL");
    pthread_mutex_lock(&registry_lock);
    watch *w = registry_find(pool);
    uint32_t id = w ? w->listener : 0;
    vram_ring *ring = w ? w->ring : NULL;
    pthread_mutex_unlock(&registry_lock);
    if (!w)
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no OOM watch", vram_pool_name(pool));
    /* Waits for report steps in flight, then on_detach frees the watch. */
    int rc = vram_pool_unlisten(pool, id);
    if (!rc && ring)
        rc = vram_pool_ring_detach(pool, ring);
    return rc;
}

int vram_pool_oom_stats(vram_pool *pool, vram_oom_stats *out)
{
    if (!pool || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_stats: pool and out are required");
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&registry_lock);
    watch *w = registry_find(pool);
    if (w) {
        pthread_mutex_lock(&w->mu);
        out->refusals = w->refusals;
        out->suppressed = w->suppressed;
        out->reports = w->reports;
        out->write_failures = w->write_failures;
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!w)
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no OOM watch", vram_pool_name(pool));
    return 0;
}

int vram_pool_oom_last_report(vram_pool *pool, char *buf, size_t cap)
{
    if (!pool || (!buf && cap))
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_last_report: pool (and buf) are required");
    if (cap)
        buf[0] = '\0';
    pthread_mutex_lock(&registry_lock);
    watch *w = registry_find(pool);
    size_t need = 0;
    int fits = 1;
    if (w) {
        pthread_mutex_lock(&w->mu);
        need = (w->last_json ? strlen(w->last_json) : 0) + 1;
        fits = need <= cap;
        if (fits && cap)
            snprintf(buf, cap, "%s", w->last_json ? w->last_json : "");
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&registry_lock);
    if (!w)
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no OOM watch", vram_pool_name(pool));
    if (!fits)
        return vram__fail(VRAM_ELIMIT, "the last OOM report's path needs %zu bytes; the buffer "
                                       "has %zu", need, cap);
    return 0;
}

int vram_pool_oom_watch_configured(vram_pool *pool)
{
    if (!pool)
        return vram__fail(VRAM_EINVAL, "vram_pool_oom_watch_configured: pool is NULL");
    const char *dir = vram_config_get()->oom_dir;
    if (!dir || !*dir)
        return 0;
    vram_oom_opts oo;
    vram_oom_opts_init(&oo); /* a malformed variable keeps its default */
    oo.directory = dir;
    return vram_pool_oom_watch(pool, &oo);
}

/* Pools made from the configuration are watched when VRAM_OOM_DIR names a
 * directory; registered once, when this library is loaded. */
static int watch_configured(void *ctx, vram_pool *pool)
{
    (void)ctx;
    return vram_pool_oom_watch_configured(pool);
}

__attribute__((constructor)) static void register_configured_watch(void)
{
    vram_pool_hook h = {.on_create = watch_configured};
    vram_pool_hook_add(&h);
}
