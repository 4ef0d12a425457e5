/* src/observe/monitor.c - the monitor (see vramkit/monitor.h): a sampler
 * thread or manual samples; each sample reads every watched pool (totals,
 * owners, kinds), the GPU through NVML and the count of CUDA contexts, is
 * packed into one allocation and kept in a ring, written to the CSV and JSON
 * Lines files, and checked against the alert thresholds.
 *
 * Two locks: `lock` serialises sampling and guards the pool list, the
 * scratch space and the files (taken before any pool's lock); `data_lock`
 * guards the ring, the alerts and the counters and is never held while a
 * pool's lock is taken, so the trend may be read from inside a pool's
 * callback. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "monitor_internal.h"
#include "prom.h"
#include "vramkit/config.h"
#include "vramkit/device.h"
#include "vramkit/stats.h"

#define RING_MAX (1u << 24)

struct vram_monitor {
    vram_monitor_opts o;
    char *csv_path, *jsonl_path, *gpu_pci;

    pthread_mutex_t lock; /* sampling, pools, scratch, files */
    vram_pool **pools;
    size_t n_pools, cap_pools;
    FILE *csv, *jsonl;
    int io_rc;          /* the first write error, kept for vram_monitor_stop */
    char io_msg[512];
    /* scratch of one sample before it is packed */
    vram_sample_pool *sp;
    size_t cap_sp;
    vram_sample_owner *so;
    size_t cap_so;
    vram_gpu_memory gm;
    vram_sample_gpu sg;
    char gpu_reason[512];

    pthread_mutex_t data_lock; /* ring, alerts, counters, trend scratch */
    vram_sample **ring;
    uint32_t cap, head, kept; /* head: the oldest kept */
    uint64_t total;
    vram__alerts alerts;
    uint64_t sample_ns_total, sample_cpu_ns_total;
    unsigned last_contexts;
    double *tx, *ti, *ty;
    size_t cap_t;

    uint64_t t0_ns;
    pthread_mutex_t wake_lock;
    pthread_cond_t wake;
    int stopping;
    int has_thread;
    pthread_t thread;
};

/* ---- options ---- */

int vram_monitor_opts_init(vram_monitor_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_monitor_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_monitor_opts){
        .size = sizeof *o,
        .period_s = c->monitor_period,
        .ring_samples = c->monitor_ring > RING_MAX ? RING_MAX : (uint32_t)c->monitor_ring,
        .gpu = 0,
        .warmup_fraction = c->monitor_warmup,
        .min_samples = c->monitor_min_samples > 1000000 ? 1000000u
                                                         : (uint32_t)c->monitor_min_samples,
        .growth_bytes_per_iteration = (double)c->monitor_growth_iteration,
        .growth_bytes_per_minute = (double)c->monitor_growth_minute,
        .growth_confidence = c->monitor_confidence,
        .frag_warning = c->monitor_frag_warning,
        .frag_critical = c->monitor_frag_critical,
        .frag_min_free_bytes = c->monitor_frag_min_free,
        .budget_warning = c->monitor_budget,
        .clear_ratio = c->monitor_clear,
        .hold_samples = c->monitor_hold > 1000000 ? 1000000u : (uint32_t)c->monitor_hold,
    };
    const char *g = c->monitor_gpu && *c->monitor_gpu ? c->monitor_gpu : "none";
    int prc = vram_gpu_parse(g, &o->gpu, &o->gpu_pci_bus_id);
    if (!prc && o->gpu < VRAM_GPU_NONE)
        prc = vram__fail(VRAM_EINVAL, "the monitor reads one GPU, not \"%s\"", g);
    if (prc) {
        o->gpu = VRAM_GPU_NONE;
        o->gpu_pci_bus_id = NULL;
        if (!rc)
            rc = vram__fail_prefix(prc, "VRAM_MONITOR_GPU: ");
    }
    return rc;
}

static int check_opts(const vram_monitor_opts *o)
{
    if (o->gpu < VRAM_GPU_NONE && !(o->gpu_pci_bus_id && *o->gpu_pci_bus_id))
        return vram__fail(VRAM_EINVAL, "the monitor reads one GPU: an NVML index, a PCI bus id or "
                                       "VRAM_GPU_NONE, not %d", o->gpu);
    if (!o->manual && !(o->period_s > 0 && o->period_s <= 86400))
        return vram__fail(VRAM_EINVAL, "monitor period %g s must be above 0 and at most a day",
                          o->period_s);
    if (o->ring_samples < 3 || o->ring_samples > RING_MAX)
        return vram__fail(VRAM_EINVAL, "the monitor keeps 3 to %u samples, not %u", RING_MAX,
                          o->ring_samples);
    if (!(o->warmup_fraction >= 0 && o->warmup_fraction < 1))
        return vram__fail(VRAM_EINVAL, "warm-up fraction %g must be at least 0 and below 1",
                          o->warmup_fraction);
    if (o->min_samples < 3)
        return vram__fail(VRAM_EINVAL, "a leak verdict needs at least 3 samples, not %u",
                          o->min_samples);
    if (!(o->growth_confidence >= 0 && o->growth_confidence <= 1))
        return vram__fail(VRAM_EINVAL, "growth confidence %g must be between 0 and 1",
                          o->growth_confidence);
    if (!(o->growth_bytes_per_iteration >= 0) || !(o->growth_bytes_per_minute >= 0))
        return vram__fail(VRAM_EINVAL, "growth thresholds (%g B per iteration, %g B per minute) "
                          "must be at least 0", o->growth_bytes_per_iteration,
                          o->growth_bytes_per_minute);
    if (!(o->frag_warning >= 0 && o->frag_warning <= o->frag_critical))
        return vram__fail(VRAM_EINVAL, "fragmentation thresholds: warning %g must be at least 0 "
                          "and at most critical %g", o->frag_warning, o->frag_critical);
    if (!(o->budget_warning > 0))
        return vram__fail(VRAM_EINVAL, "budget alert fraction %g must be above 0",
                          o->budget_warning);
    if (!(o->clear_ratio > 0 && o->clear_ratio <= 1))
        return vram__fail(VRAM_EINVAL, "alert clear ratio %g must be above 0 and at most 1",
                          o->clear_ratio);
    return 0;
}

/* ---- samples ---- */

static size_t str_size(const char *s) { return s ? strlen(s) + 1 : 0; }

static char *put_str(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = memcpy(*at, s, n);
    *at += n;
    return d;
}

/* One allocation holding the sample and everything it points to. */
static vram_sample *pack(const vram_sample *s)
{
    size_t size = sizeof *s + s->n_pools * sizeof(vram_sample_pool);
    size_t strings = str_size(s->gpu_unavailable);
    for (uint32_t i = 0; i < s->n_pools; i++) {
        size += s->pools[i].n_owners * sizeof(vram_sample_owner);
        strings += str_size(s->pools[i].pool);
        for (uint32_t j = 0; j < s->pools[i].n_owners; j++)
            strings += str_size(s->pools[i].owners[j].owner);
    }
    if (s->gpu)
        size += sizeof(vram_sample_gpu) + s->gpu->n_processes * sizeof(vram_gpu_process);
    char *mem = malloc(size + strings);
    if (!mem) {
        vram__fail(VRAM_EHOSTMEM, "out of host memory keeping a %zu-byte monitor sample",
                   size + strings);
        return NULL;
    }
    char *at = mem, *str = mem + size;
    vram_sample *d = (vram_sample *)at;
    *d = *s;
    at += sizeof *d;
    d->pools = s->n_pools ? (vram_sample_pool *)at : NULL;
    at += s->n_pools * sizeof(vram_sample_pool);
    for (uint32_t i = 0; i < s->n_pools; i++) {
        const vram_sample_pool *sp = &s->pools[i];
        vram_sample_pool *dp = &d->pools[i];
        *dp = *sp;
        dp->pool = put_str(&str, sp->pool);
        dp->owners = sp->n_owners ? (vram_sample_owner *)at : NULL;
        at += sp->n_owners * sizeof(vram_sample_owner);
        for (uint32_t j = 0; j < sp->n_owners; j++) {
            dp->owners[j] = sp->owners[j];
            dp->owners[j].owner = put_str(&str, sp->owners[j].owner);
        }
    }
    if (s->gpu) {
        vram_sample_gpu *g = (vram_sample_gpu *)at;
        *g = *s->gpu;
        at += sizeof *g;
        g->processes = g->n_processes ? (vram_gpu_process *)at : NULL;
        if (g->n_processes)
            memcpy(g->processes, s->gpu->processes, g->n_processes * sizeof(vram_gpu_process));
        d->gpu = g;
    }
    d->gpu_unavailable = put_str(&str, s->gpu_unavailable);
    return d;
}

void vram_sample_free(vram_sample *s) { free(s); }

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The GPU, through NVML, into m->sg (or the reason there is none). */
static void read_gpu(vram_monitor *m, vram_sample *s)
{
    if (m->o.gpu < 0 && !m->gpu_pci) {
        s->gpu_unavailable = "no GPU is read (the monitor's GPU option is none)";
        return;
    }
    int rc = m->gpu_pci ? vram_gpu_memory_read_pci(m->gpu_pci, &m->gm)
                        : vram_gpu_memory_read(m->o.gpu, &m->gm);
    if (rc) {
        snprintf(m->gpu_reason, sizeof m->gpu_reason, "%s", vram_last_error());
        s->gpu_unavailable = m->gpu_reason;
        return;
    }
    m->sg = (vram_sample_gpu){
        .index = m->gm.index,
        .total_bytes = m->gm.total_bytes,
        .used_bytes = m->gm.used_bytes,
        .processes_known = m->gm.processes_known,
        .n_processes = m->gm.processes_known ? m->gm.n_processes : 0,
        .processes = m->gm.processes,
    };
    snprintf(m->sg.name, sizeof m->sg.name, "%s", m->gm.name);
    s->gpu = &m->sg;
}

/* One pool into m->sp[i]; owners go to m->so from *n_so on. */
static int read_pool(vram_monitor *m, vram_pool *pool, vram_sample_pool *sp, size_t *n_so)
{
    vram_pool_stats st;
    int rc = vram_pool_stats_get(pool, &st);
    if (rc)
        return rc;
    *sp = (vram_sample_pool){
        .pool = vram_pool_name(pool),
        .live_bytes = st.live_bytes,
        .peak_live_bytes = st.peak_live_bytes,
        .reserved_bytes = st.reserved_bytes,
        .pending_bytes = st.pending_bytes,
        .free_bytes = st.free_bytes,
        .largest_free_bytes = st.largest_free_bytes,
        .fragmentation_ratio = st.fragmentation_ratio,
    };
    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        vram_usage_stats u;
        if ((rc = vram_kind_stats_get(pool, (vram_kind)k, &u)) != 0)
            return rc;
        sp->kind_live_bytes[k] = u.live_bytes;
        sp->kind_peak_live_bytes[k] = u.peak_live_bytes;
    }
    size_t first = *n_so;
    const char *name;
    for (vram_owner id = 0; (name = vram_owner_name(pool, id)) != NULL; id++) {
        vram_usage_stats u;
        if ((rc = vram_owner_stats_get(pool, id, &u)) != 0)
            return rc;
        if (!u.live_bytes && !u.peak_live_bytes)
            continue;
        void *grown = vram__grow(m->so, &m->cap_so, *n_so, sizeof *m->so, 16);
        if (!grown)
            return VRAM_EHOSTMEM;
        m->so = grown;
        m->so[(*n_so)++] = (vram_sample_owner){.owner = name,
                                              .live_bytes = u.live_bytes,
                                              .peak_live_bytes = u.peak_live_bytes,
                                              .budget_bytes = u.budget_bytes};
    }
    sp->n_owners = (uint32_t)(*n_so - first);
    sp->owners = (vram_sample_owner *)(uintptr_t)first; /* an index until m->so stops moving */
    return 0;
}

/* ---- the trend ---- */

static const vram_sample_pool *find_pool(const vram_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_pools; i++)
        if (strcmp(s->pools[i].pool, name) == 0)
            return &s->pools[i];
    return NULL;
}

static const vram_sample *ring_at(const vram_monitor *m, uint32_t i)
{
    return m->ring[(m->head + i) % m->cap];
}

/* data_lock held. */
static int trend_locked(vram_monitor *m, const char *pool, vram_trend *out)
{
    *out = (vram_trend){.slope_bytes_per_s = NAN, .slope_bytes_per_iteration = NAN,
                        .slope_stderr_bytes_per_s = NAN, .r2 = NAN, .confidence = NAN,
                        .t_statistic = NAN};
    if (m->cap_t < m->kept) {
        double *tx = vram__realloc_array(m->tx, m->kept, sizeof *tx);
        if (tx)
            m->tx = tx;
        double *ti = vram__realloc_array(m->ti, m->kept, sizeof *ti);
        if (ti)
            m->ti = ti;
        double *ty = vram__realloc_array(m->ty, m->kept, sizeof *ty);
        if (ty)
            m->ty = ty;
        if (!tx || !ti || !ty)
            return VRAM_EHOSTMEM;
        m->cap_t = m->kept;
    }
    uint64_t skip = (uint64_t)(m->o.warmup_fraction * (double)m->total);
    size_t n = 0;
    int seen = pool == NULL, all_iter = 1;
    for (uint32_t i = 0; i < m->kept; i++) {
        const vram_sample *s = ring_at(m, i);
        double y = 0;
        if (pool) {
            const vram_sample_pool *p = find_pool(s, pool);
            if (!p)
                continue;
            seen = 1;
            y = (double)p->live_bytes;
        } else {
            for (uint32_t j = 0; j < s->n_pools; j++)
                y += (double)s->pools[j].live_bytes;
        }
        if (s->seq < skip)
            continue;
        m->tx[n] = s->elapsed_s;
        m->ti[n] = (double)s->iteration;
        m->ty[n] = y;
        all_iter &= s->iteration >= 0;
        n++;
    }
    if (!seen)
        return vram__fail(VRAM_EINVAL, "the monitor has no sample of a pool named \"%s\" (%u kept)",
                          pool, m->kept);
    out->samples = (uint32_t)n;
    if (n < m->o.min_samples || n < 3)
        return 0;
    vram__saved_error err;
    vram__error_save(&err);
    vram__fit ft, fi;
    int have_t = vram__fit_line(m->tx, m->ty, n, &ft) == 0;
    int have_i = all_iter && vram__fit_line(m->ti, m->ty, n, &fi) == 0;
    vram__error_restore(&err, 0);
    if (have_t) {
        out->slope_bytes_per_s = ft.slope;
        out->slope_stderr_bytes_per_s = ft.stderr_slope;
    }
    const vram__fit *v = have_i ? &fi : have_t ? &ft : NULL;
    if (!v)
        return 0;
    if (have_i)
        out->slope_bytes_per_iteration = fi.slope;
    out->r2 = v->r2;
    out->confidence = v->confidence;
    out->t_statistic = v->t;
    double slope = have_i ? fi.slope : ft.slope * 60.0;
    double limit = have_i ? m->o.growth_bytes_per_iteration : m->o.growth_bytes_per_minute;
    out->growing = v->confidence >= m->o.growth_confidence && slope > limit;
    return 0;
}

int vram_monitor_trend(vram_monitor *m, const char *pool, vram_trend *out)
{
    if (!m || !out)
        return vram__fail(VRAM_EINVAL, "vram_monitor_trend: monitor and out are required");
    pthread_mutex_lock(&m->data_lock);
    int rc = trend_locked(m, pool, out);
    pthread_mutex_unlock(&m->data_lock);
    return rc;
}

/* ---- alerts ---- */

/* Where alerts go: the log, the JSON Lines file, the callback. m->lock and
 * data_lock held. */
static void alert_sink(void *ctx, const vram_alert *a)
{
    vram_monitor *m = ctx;
    vram_log(a->level == VRAM_ALERT_LEVEL_CLEAR ? VRAM_LOG_INFO : VRAM_LOG_WARN,
              "monitor alert (%s, %s): %s", vram_alert_type_name(a->type),
              vram_alert_level_name(a->level), a->message);
    if (m->jsonl) {
        int rc = vram__series_alert_jsonl(m->jsonl, m->jsonl_path, a);
        if (rc && !m->io_rc) {
            m->io_rc = rc;
            snprintf(m->io_msg, sizeof m->io_msg, "%s", vram_last_error());
        }
    }
    if (m->o.on_alert)
        m->o.on_alert(m->o.alert_ctx, a);
}

/* Both locks held. */
static int check_alerts(vram_monitor *m, const vram_sample *s)
{
    const vram_monitor_opts *o = &m->o;
    int rc = 0;
    for (uint32_t i = 0; i < s->n_pools && !rc; i++) {
        const vram_sample_pool *p = &s->pools[i];
        vram_alert a = {.type = VRAM_ALERT_FRAGMENTATION, .time_s = s->time_s,
                        .elapsed_s = s->elapsed_s, .iteration = s->iteration, .pool = p->pool};
        double frag = p->free_bytes >= o->frag_min_free_bytes ? p->fragmentation_ratio : 0.0;
        rc = vram__alert_update(&m->alerts, &a, frag, o->frag_warning, o->frag_critical,
                                o->clear_ratio, -2, 'r', alert_sink, m);
        for (uint32_t j = 0; j < p->n_owners && !rc; j++) {
            const vram_sample_owner *w = &p->owners[j];
            if (!w->budget_bytes)
                continue;
            a = (vram_alert){.type = VRAM_ALERT_BUDGET, .time_s = s->time_s,
                             .elapsed_s = s->elapsed_s, .iteration = s->iteration,
                             .pool = p->pool, .owner = w->owner};
            rc = vram__alert_update(&m->alerts, &a, (double)w->live_bytes / (double)w->budget_bytes,
                                    o->budget_warning, INFINITY, o->clear_ratio, -2, 'p',
                                    alert_sink, m);
        }
        /* Growth: the trend costs a pass over the ring, so it is looked at
         * about 64 times per ring's worth of samples. */
        uint64_t stride = m->kept / 64 ? m->kept / 64 : 1;
        if (rc || s->seq % stride)
            continue;
        vram_trend t;
        if (trend_locked(m, p->pool, &t) != 0 || t.samples < o->min_samples)
            continue;
        int per_it = !isnan(t.slope_bytes_per_iteration);
        double slope = per_it ? t.slope_bytes_per_iteration : t.slope_bytes_per_s * 60.0;
        if (isnan(slope))
            continue;
        a = (vram_alert){.type = VRAM_ALERT_GROWTH, .time_s = s->time_s,
                         .elapsed_s = s->elapsed_s, .iteration = s->iteration, .pool = p->pool};
        rc = vram__alert_update(&m->alerts, &a, slope,
                                per_it ? o->growth_bytes_per_iteration : o->growth_bytes_per_minute,
                                INFINITY, 1.0, t.growing ? VRAM_ALERT_LEVEL_WARNING : -1,
                                per_it ? 'b' : 'm', alert_sink, m);
    }
    return rc;
}

/* ---- sampling ---- */

static void io_error(vram_monitor *m, int rc)
{
    if (!m->io_rc) {
        m->io_rc = rc;
        snprintf(m->io_msg, sizeof m->io_msg, "%s", vram_last_error());
        vram_log(VRAM_LOG_ERROR, "monitor: %s", m->io_msg);
    }
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* m->lock held. */
static int sample_locked(vram_monitor *m, int64_t iteration)
{
    uint64_t t0 = vram__now_ns(), c0 = thread_cpu_ns();
    vram_sample s = {.time_s = wall_now(), .elapsed_s = (double)(t0 - m->t0_ns) * 1e-9,
                     .iteration = iteration < 0 ? -1 : iteration,
                     .contexts = vram_device_contexts()};
    read_gpu(m, &s);
    if (m->cap_sp < m->n_pools) {
        void *sp = vram__realloc_array(m->sp, m->n_pools, sizeof *m->sp);
        if (!sp)
            return VRAM_EHOSTMEM;
        m->sp = sp;
        m->cap_sp = m->n_pools;
    }
    size_t n_so = 0;
    for (size_t i = 0; i < m->n_pools; i++) {
        int rc = read_pool(m, m->pools[i], &m->sp[i], &n_so);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < m->n_pools; i++)
        m->sp[i].owners = m->sp[i].n_owners ? m->so + (uintptr_t)m->sp[i].owners : NULL;
    s.n_pools = (uint32_t)m->n_pools;
    s.pools = m->sp;
    vram_sample *packed = pack(&s);
    if (!packed)
        return VRAM_EHOSTMEM;
    if (m->csv) {
        int rc = vram__series_csv(m->csv, m->csv_path, packed);
        if (!rc && fflush(m->csv))
            rc = vram__fail(VRAM_EIO, "cannot write the monitor's samples to %s: %s", m->csv_path,
                            strerror(errno));
        if (rc)
            io_error(m, rc);
    }
    if (m->jsonl) {
        int rc = vram__series_jsonl(m->jsonl, m->jsonl_path, packed);
        if (rc)
            io_error(m, rc);
    }
    pthread_mutex_lock(&m->data_lock);
    packed->seq = m->total++;
    if (m->kept == m->cap) {
        free(m->ring[m->head]);
        m->ring[m->head] = packed;
        m->head = (m->head + 1) % m->cap;
    } else {
        m->ring[(m->head + m->kept++) % m->cap] = packed;
    }
    m->last_contexts = s.contexts;
    int rc = check_alerts(m, packed);
    m->sample_ns_total += vram__now_ns() - t0;
    m->sample_cpu_ns_total += thread_cpu_ns() - c0;
    pthread_mutex_unlock(&m->data_lock);
    if (m->jsonl && fflush(m->jsonl))
        io_error(m, vram__fail(VRAM_EIO, "cannot write the monitor's samples to %s: %s",
                               m->jsonl_path, strerror(errno)));
    return rc;
}

int vram_monitor_sample(vram_monitor *m, int64_t iteration)
{
    if (!m)
        return vram__fail(VRAM_EINVAL, "vram_monitor_sample: monitor is NULL");
    vram__saved_error err;
    vram__error_save(&err);
    pthread_mutex_lock(&m->lock);
    int rc = sample_locked(m, iteration);
    pthread_mutex_unlock(&m->lock);
    return rc ? rc : vram__error_restore(&err, 0);
}

static void *sampler(void *arg)
{
    vram_monitor *m = arg;
    uint64_t period = (uint64_t)(m->o.period_s * 1e9);
    if (!period)
        period = 1;
    uint64_t next = vram__now_ns();
    int logged = 0;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        int rc = sample_locked(m, -1);
        pthread_mutex_unlock(&m->lock);
        if (rc && !logged) {
            vram_log(VRAM_LOG_ERROR, "monitor: a sample failed: %s", vram_last_error());
            logged = 1;
        }
        uint64_t now = vram__now_ns();
        next += period;
        if (next <= now) /* a sample ran over: keep to the grid, skip what passed */
            next += (now - next) / period * period + period;
        pthread_mutex_lock(&m->wake_lock);
        while (!m->stopping) {
            now = vram__now_ns();
            if (now >= next)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + (next - now);
            ts.tv_sec = (time_t)(at / 1000000000ull);
            ts.tv_nsec = (long)(at % 1000000000ull);
            pthread_cond_timedwait(&m->wake, &m->wake_lock, &ts);
        }
        int stop = m->stopping;
        pthread_mutex_unlock(&m->wake_lock);
        if (stop)
            break;
    }
    return NULL;
}

/* ---- life ---- */

static void destroy(vram_monitor *m)
{
    for (uint32_t i = 0; i < m->kept; i++)
        free(m->ring[(m->head + i) % m->cap]);
    free(m->ring);
    vram__alerts_free(&m->alerts);
    free(m->pools);
    free(m->sp);
    free(m->so);
    free(m->tx);
    free(m->ti);
    free(m->ty);
    free(m->csv_path);
    free(m->jsonl_path);
    free(m->gpu_pci);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->data_lock);
    pthread_mutex_destroy(&m->wake_lock);
    pthread_cond_destroy(&m->wake);
    free(m);
}

static int close_file(FILE **f, const char *path, int rc)
{
    if (!*f)
        return rc;
    int bad = fclose(*f) != 0;
    *f = NULL;
    if (bad && !rc)
        return vram__fail(VRAM_EIO, "cannot finish the monitor's file %s: %s", path,
                          strerror(errno));
    return rc;
}

static int open_file(const char *path, FILE **out)
{
    *out = fopen(path, "w");
    if (!*out)
        return vram__fail(VRAM_EIO, "cannot create the monitor's file %s: %s", path,
                          strerror(errno));
    return 0;
}

int vram_monitor_start(const vram_monitor_opts *opts, vram_monitor **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_monitor_start: out is NULL");
    *out = NULL;
    vram_monitor_opts taken;
    int rc = vram_monitor_opts_init(&taken);
    if (!opts && rc)
        return rc;
    if (opts && (rc = vram__opts_take(&taken, opts, sizeof taken, "vram_monitor_opts")))
        return rc;
    opts = &taken;
    rc = check_opts(opts);
    if (rc)
        return rc;
    vram_monitor *m = vram__calloc(1, sizeof *m);
    if (!m)
        return VRAM_EHOSTMEM;
    m->o = *opts;
    m->alerts.hold_samples = opts->hold_samples;
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->data_lock, NULL);
    pthread_mutex_init(&m->wake_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->wake, &ca);
    pthread_condattr_destroy(&ca);
    m->cap = opts->ring_samples;
    m->ring = vram__calloc(m->cap, sizeof *m->ring);
    if (!m->ring)
        rc = VRAM_EHOSTMEM;
    if (!rc && opts->csv_path && *opts->csv_path && !(m->csv_path = vram__strdup(opts->csv_path)))
        rc = VRAM_EHOSTMEM;
    if (!rc && opts->jsonl_path && *opts->jsonl_path &&
        !(m->jsonl_path = vram__strdup(opts->jsonl_path)))
        rc = VRAM_EHOSTMEM;
    if (!rc && opts->gpu_pci_bus_id && *opts->gpu_pci_bus_id &&
        !(m->gpu_pci = vram__strdup(opts->gpu_pci_bus_id)))
        rc = VRAM_EHOSTMEM;
    m->o.csv_path = m->csv_path;
    m->o.jsonl_path = m->jsonl_path;
    m->o.gpu_pci_bus_id = m->gpu_pci;
    if (!rc && m->csv_path && !(rc = open_file(m->csv_path, &m->csv)) &&
        (fputs(vram__monitor_csv_header, m->csv) < 0 || fflush(m->csv)))
        rc = vram__fail(VRAM_EIO, "cannot write to the monitor's file %s: %s", m->csv_path,
                        strerror(errno));
    if (!rc && m->jsonl_path)
        rc = open_file(m->jsonl_path, &m->jsonl);
    m->t0_ns = vram__now_ns();
    if (!rc && !opts->manual) {
        int e = pthread_create(&m->thread, NULL, sampler, m);
        if (e)
            rc = vram__fail(VRAM_EHOSTMEM, "cannot start the monitor's thread: %s", strerror(e));
        else
            m->has_thread = 1;
    }
    if (rc) {
        vram__saved_error err;
        vram__error_save(&err);
        close_file(&m->csv, m->csv_path, 0);
        close_file(&m->jsonl, m->jsonl_path, 0);
        destroy(m);
        return vram__error_restore(&err, rc);
    }
    *out = m;
    return 0;
}

int vram_monitor_stop(vram_monitor *m)
{
    if (!m)
        return 0;
    if (m->has_thread) {
        pthread_mutex_lock(&m->wake_lock);
        m->stopping = 1;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->wake_lock);
        pthread_join(m->thread, NULL);
    }
    int rc = m->io_rc ? vram__fail(m->io_rc, "%s", m->io_msg) : 0;
    rc = close_file(&m->csv, m->csv_path, rc);
    rc = close_file(&m->jsonl, m->jsonl_path, rc);
    destroy(m);
    return rc;
}

int vram_monitor_add_pool(vram_monitor *m, vram_pool *pool)
{
    if (!m || !pool)
        return vram__fail(VRAM_EINVAL, "vram_monitor_add_pool: monitor and pool are required");
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    for (size_t i = 0; i < m->n_pools && !rc; i++)
        if (m->pools[i] == pool)
            rc = vram__fail(VRAM_EINVAL, "the monitor already watches pool \"%s\"",
                            vram_pool_name(pool));
        else if (strcmp(vram_pool_name(m->pools[i]), vram_pool_name(pool)) == 0)
            rc = vram__fail(VRAM_EINVAL, "the monitor already watches another pool named \"%s\" "
                            "(samples, trends and alerts name pools: names must differ)",
                            vram_pool_name(pool));
    if (!rc) {
        void *grown = vram__grow(m->pools, &m->cap_pools, m->n_pools, sizeof *m->pools, 4);
        if (!grown)
            rc = VRAM_EHOSTMEM;
        else {
            m->pools = grown;
            m->pools[m->n_pools++] = pool;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int vram_monitor_remove_pool(vram_monitor *m, vram_pool *pool)
{
    if (!m || !pool)
        return vram__fail(VRAM_EINVAL, "vram_monitor_remove_pool: monitor and pool are required");
    pthread_mutex_lock(&m->lock);
    size_t i = 0;
    while (i < m->n_pools && m->pools[i] != pool)
        i++;
    int rc = 0;
    if (i == m->n_pools) {
        rc = vram__fail(VRAM_EINVAL, "the monitor does not watch pool \"%s\"", vram_pool_name(pool));
    } else {
        pthread_mutex_lock(&m->data_lock);
        vram__alerts_forget_pool(&m->alerts, vram_pool_name(pool));
        pthread_mutex_unlock(&m->data_lock);
        memmove(&m->pools[i], &m->pools[i + 1], (m->n_pools - i - 1) * sizeof *m->pools);
        m->n_pools--;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* ---- reading back ---- */

int vram_monitor_sample_count(vram_monitor *m, uint64_t *total, uint32_t *kept)
{
    if (!m)
        return vram__fail(VRAM_EINVAL, "vram_monitor_sample_count: monitor is NULL");
    pthread_mutex_lock(&m->data_lock);
    if (total)
        *total = m->total;
    if (kept)
        *kept = m->kept;
    pthread_mutex_unlock(&m->data_lock);
    return 0;
}

int vram_monitor_sample_get(vram_monitor *m, uint32_t i, vram_sample **out)
{
    if (!m || !out)
        return vram__fail(VRAM_EINVAL, "vram_monitor_sample_get: monitor and out are required");
    *out = NULL;
    pthread_mutex_lock(&m->data_lock);
    int rc = 0;
    if (i >= m->kept)
        rc = vram__fail(VRAM_EINVAL, "the monitor keeps %u samples: there is no sample %u", m->kept,
                        i);
    else if (!(*out = pack(ring_at(m, i))))
        rc = VRAM_EHOSTMEM;
    pthread_mutex_unlock(&m->data_lock);
    return rc;
}

int vram_monitor_alert_count(vram_monitor *m, vram_alert_type type, vram_alert_level level,
                             uint64_t *out)
{
    if (!m || !out || (unsigned)type >= VRAM_ALERT_TYPE_COUNT ||
        (unsigned)level >= VRAM_ALERT_LEVEL_COUNT)
        return vram__fail(VRAM_EINVAL, "vram_monitor_alert_count: monitor, a known type and "
                          "level, and out are required");
    pthread_mutex_lock(&m->data_lock);
    *out = m->alerts.counts[type][level];
    pthread_mutex_unlock(&m->data_lock);
    return 0;
}

/* ---- metrics ---- */

int vram_monitor_print_metrics(vram_monitor *m, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!m || !write || flags)
        return vram__fail(VRAM_EINVAL, "vram_monitor_print_metrics: monitor and writer are "
                                       "required, and flags 0 (the exposition is text)");
    /* Written into memory under data_lock, and through `write` after it. */
    vram_buffer b = {0};
    vram__prom p = {.write = vram_write_buffer, .ctx = &b};
    pthread_mutex_lock(&m->data_lock);
    vram__prom_family(&p, "vram_monitor_samples_total", "counter", "Samples the monitor has taken.");
    vram__prom_sample_u64(&p, "vram_monitor_samples_total", NULL, 0, m->total);
    vram__prom_family(&p, "vram_monitor_sample_seconds_total", "counter",
                      "Wall time spent taking samples (waits for pool locks included), checking "
                      "alerts and writing the sample files.");
    vram__prom_sample_start(&p, "vram_monitor_sample_seconds_total", NULL, 0);
    vram__prom_value_f64(&p, (double)m->sample_ns_total * 1e-9, VRAM__PROM_F9);
    vram__prom_family(&p, "vram_monitor_sample_cpu_seconds_total", "counter",
                      "CPU time of the sampling thread spent on samples.");
    vram__prom_sample_start(&p, "vram_monitor_sample_cpu_seconds_total", NULL, 0);
    vram__prom_value_f64(&p, (double)m->sample_cpu_ns_total * 1e-9, VRAM__PROM_F9);
    vram__prom_family(&p, "vram_monitor_cuda_contexts", "gauge",
                      "CUDA contexts vramkit held at the last sample.");
    vram__prom_sample_u64(&p, "vram_monitor_cuda_contexts", NULL, 0, m->last_contexts);
    vram__prom_family(&p, "vram_monitor_alerts_total", "counter",
                      "Alerts raised, by type and level (level clear: alerts that cleared).");
    for (int t = 0; t < VRAM_ALERT_TYPE_COUNT; t++)
        for (int l = 0; l < VRAM_ALERT_LEVEL_COUNT; l++) {
            vram__prom_label lb[] = {{"alert", vram_alert_type_name((vram_alert_type)t)},
                                     {"level", vram_alert_level_name((vram_alert_level)l)}};
            vram__prom_sample_u64(&p, "vram_monitor_alerts_total", lb, 2, m->alerts.counts[t][l]);
        }
    vram__prom_family(&p, "vram_monitor_alerts_active", "gauge",
                      "Alerts raised and not yet cleared.");
    for (int t = 0; t < VRAM_ALERT_TYPE_COUNT; t++)
        for (int l = 0; l < VRAM_ALERT_LEVEL_CLEAR; l++) {
            vram__prom_label lb[] = {{"alert", vram_alert_type_name((vram_alert_type)t)},
                                     {"level", vram_alert_level_name((vram_alert_level)l)}};
            vram__prom_sample_u64(&p, "vram_monitor_alerts_active", lb, 2,
                                  vram__alerts_active(&m->alerts, (vram_alert_type)t, l));
        }
    /* Per pool: those in the newest sample. */
    const vram_sample *last = m->kept ? ring_at(m, m->kept - 1) : NULL;
    uint32_t np = last ? last->n_pools : 0;
    vram_trend *tr = np ? calloc(np, sizeof *tr) : NULL;
    int rc = np && !tr ? VRAM_EHOSTMEM : 0;
    for (uint32_t i = 0; i < np && !rc; i++)
        rc = trend_locked(m, last->pools[i].pool, &tr[i]);
    static const struct {
        const char *name, *help;
    } fams[] = {
        {"vram_monitor_trend_samples", "Samples in the window of the leak verdict."},
        {"vram_monitor_live_slope_bytes_per_second",
         "Least-squares slope of live bytes over time, in the verdict's window."},
        {"vram_monitor_live_slope_bytes_per_iteration",
         "Slope of live bytes per iteration (NaN when iterations are not known)."},
        {"vram_monitor_live_slope_confidence",
         "Probability that the slope of live bytes is above zero (t-test)."},
        {"vram_monitor_leak_suspected", "1 when live bytes grow beyond the threshold, else 0."},
    };
    for (size_t f = 0; np && f < VRAM__ARRAY_LEN(fams) && !rc; f++) {
        vram__prom_family(&p, fams[f].name, "gauge", fams[f].help);
        for (uint32_t i = 0; i < np; i++) {
            vram__prom_label lb[] = {{"pool", last->pools[i].pool}};
            vram__prom_sample_start(&p, fams[f].name, lb, 1);
            const vram_trend *t = &tr[i];
            double v = f == 0   ? (double)t->samples
                       : f == 1 ? t->slope_bytes_per_s
                       : f == 2 ? t->slope_bytes_per_iteration
                       : f == 3 ? t->confidence
                                : (double)t->growing;
            vram__prom_value_f64(&p, v, VRAM__PROM_G17);
        }
    }
    pthread_mutex_unlock(&m->data_lock);
    free(tr);
    if (!rc && p.rc)
        rc = vram__fail(p.rc, "out of host memory printing the monitor's metrics");
    if (!rc)
        rc = write(ctx, b.data, b.len);
    free(b.data);
    return rc;
}
