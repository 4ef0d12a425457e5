/* src/pipeline/fleet_life.c - a fleet's making and ending (one service per
 * GPU, the watcher), and its views: every GPU's streams, the failover
 * counts and waiting (vramkit/fleet.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "base/writef.h"
#include "fleet_internal.h"

int vram_fleet_opts_init(vram_fleet_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_fleet_opts_init: opts is NULL");
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->watch_s = 0.05;
    return vram_service_opts_init(&o->service);
}

static int check_gpus(const vram_fleet_opts *o)
{
    if (!o->gpus || !o->n_gpus || o->n_gpus > VRAM_FLEET_GPUS_MAX)
        return vram__fail(VRAM_EINVAL, "fleet: %zu GPUs; 1..%d are needed", o->n_gpus,
                          VRAM_FLEET_GPUS_MAX);
    for (size_t i = 0; i < o->n_gpus; i++) {
        if (o->gpus[i] < 0 || o->gpus[i] > 1023)
            return vram__fail(VRAM_EINVAL, "fleet: GPU %d is no device index (0..1023)",
                              o->gpus[i]);
        for (size_t j = 0; j < i; j++)
            if (o->gpus[j] == o->gpus[i])
                return vram__fail(VRAM_EINVAL, "fleet: GPU %d is named twice", o->gpus[i]);
    }
    return 0;
}

/* GPU `gpu`'s own JSON Lines file from the one asked for: "out.jsonl" gives
 * "out.gpu1.jsonl", "out" "out.gpu1" (several services writing one file
 * would overwrite each other's lines; "-", stdout, is shared line by line). */
static int per_gpu_path(char *buf, size_t cap, const char *path, int gpu)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    int n = snprintf(buf, cap, "%.*s.gpu%d%s", (int)(dot - path), path, gpu, dot);
    if (n < 0 || (size_t)n >= cap)
        return vram__fail(VRAM_EINVAL, "fleet: the JSON Lines path %.80s... is too long", path);
    return 0;
}

int vram_fleet_create(const vram_fleet_opts *opts, vram_fleet **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_fleet_create: out is NULL");
    *out = NULL;
    vram_fleet_opts o;
    vram_fleet_opts_init(&o);
    int rc = vram__opts_take(&o, opts, sizeof o, "vram_fleet_opts");
    if (!rc)
        rc = check_gpus(&o);
    if (rc)
        return rc;
    o.watch_s = o.watch_s > 0 ? o.watch_s : 0.05;
    vram_fleet *f = vram__calloc(1, sizeof *f);
    if (!f)
        return VRAM_EHOSTMEM;
    f->opts = o;
    f->opts.gpus = f->gpu;
    f->n = o.n_gpus;
    pthread_mutex_init(&f->mu, NULL);
    pthread_mutex_init(&f->adm_mu, NULL);
    pthread_cond_init(&f->watch_cv, NULL);
    pthread_cond_init(&f->idle_cv, NULL);
    f->adm = (vram_service_admission){vram__fleet_admit, vram__fleet_release, f};
    for (size_t i = 0; i < f->n; i++)
        f->gpu[i] = o.gpus[i];
    for (size_t i = 0; i < f->n && !rc; i++) {
        vram_service_opts so = o.service;
        so.gpu = f->gpu[i];
        so.admission = &f->adm;
        char jsonl[4096];
        if (so.jsonl_path && strcmp(so.jsonl_path, "-") && f->n > 1) {
            if ((rc = per_gpu_path(jsonl, sizeof jsonl, so.jsonl_path, f->gpu[i])))
                break;
            so.jsonl_path = jsonl;
        }
        if ((rc = vram_service_create(&so, &f->svc[i])))
            vram__fail_prefix(rc, "GPU %d: ", f->gpu[i]);
        else
            f->fixed += f->svc[i]->fixed_bytes;
    }
    if (!rc && o.budget && f->fixed > o.budget) {
        char fixed[32], lim[32];
        vram__fmt_bytes(fixed, sizeof fixed, f->fixed);
        vram__fmt_bytes(lim, sizeof lim, o.budget);
        rc = vram__fail(VRAM_EBUDGET, "fleet: the fixed needs of %zu GPUs (%s) pass the budget "
                                      "of %s", f->n, fixed, lim);
    }
    if (!rc && pthread_create(&f->watcher, NULL, vram__fleet_watch, f))
        rc = vram__fail(VRAM_EHOSTMEM, "fleet: cannot start its watcher");
    else if (!rc)
        f->watching = 1;
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram_fleet_destroy(f);
        return vram__error_restore(&e, rc);
    }
    *out = f;
    return 0;
}

size_t vram_fleet_gpus(const vram_fleet *f)
{
    return f ? f->n : 0;
}

int vram_fleet_gpu(const vram_fleet *f, size_t i)
{
    return f && i < f->n ? f->gpu[i] : -1;
}

vram_service *vram_fleet_service(const vram_fleet *f, size_t i)
{
    return f && i < f->n ? f->svc[i] : NULL;
}

/* A lost stream's statistics, from its record. */
static void lost_stats(const vram_fleet *f, const fleet_stream *e, vram_stream_stats *st)
{
    memset(st, 0, sizeof *st);
    snprintf(st->id, sizeof st->id, "%s", e->id);
    snprintf(st->url, sizeof st->url, "%s", e->url);
    snprintf(st->error, sizeof st->error, "%.255s", e->error);
    st->state = VRAM_STREAM_FAILED;
    st->gpu = f->gpu[e->at];
}

int vram_fleet_stream_stats(vram_fleet *f, const char *id, vram_stream_stats *out)
{
    if (!f || !id || !out)
        return vram__fail(VRAM_EINVAL, "vram_fleet_stream_stats: NULL argument");
    pthread_mutex_lock(&f->mu);
    const fleet_stream *e = vram__fleet_find_locked(f, id);
    int rc = 0;
    if (!e)
        rc = vram__fail(VRAM_EINVAL, "no stream \"%.80s\"", id);
    else if (e->lost)
        lost_stats(f, e, out);
    else if ((rc = vram_service_stream_stats(f->svc[e->at], id, out)) && e->busy)
        rc = vram__fail(VRAM_EBUSY, "stream \"%.80s\" is being admitted or moved to another "
                        "GPU; ask again", id);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int vram_fleet_streams(vram_fleet *f, vram_stream_stats *out, size_t cap, size_t *n)
{
    if (!f || !n || (cap && !out))
        return vram__fail(VRAM_EINVAL, "vram_fleet_streams: NULL argument");
    pthread_mutex_lock(&f->mu);
    size_t total = 0;
    int rc = 0;
    for (size_t i = 0; i < f->n && !rc; i++) {
        size_t got = 0;
        rc = vram_service_streams(f->svc[i], total < cap ? out + total : NULL,
                                  total < cap ? cap - total : 0, &got);
        total += got;
    }
    for (size_t s = 0; s < f->n_streams && !rc; s++) {
        const fleet_stream *e = f->streams[s];
        if (!e->lost)
            continue;
        if (total < cap)
            lost_stats(f, e, &out[total]);
        total++;
    }
    pthread_mutex_unlock(&f->mu);
    *n = total;
    return rc;
}

int vram_fleet_failover_counts(vram_fleet *f, uint64_t *moved, uint64_t *lost)
{
    if (!f)
        return vram__fail(VRAM_EINVAL, "vram_fleet_failover_counts: NULL fleet");
    if (moved)
        *moved = atomic_load(&f->moved);
    if (lost)
        *lost = atomic_load(&f->lost);
    return 0;
}

/* Whether a failover is yet to happen or under way: a stream on a failed
 * GPU that the watcher has not looked at yet, or one it has in hand. None once the watcher was
 * asked to leave: nothing will move them. */
static int failover_pending(vram_fleet *f)
{
    if (atomic_load(&f->quit))
        return 0;
    pthread_mutex_lock(&f->mu);
    int pending = f->in_hand > 0;
    for (size_t i = 0; i < f->n && !pending; i++) {
        if (!vram__service_failed(f->svc[i]))
            continue;
        for (size_t s = 0; s < f->n_streams && !pending; s++) {
            const fleet_stream *e = f->streams[s];
            pending = !e->lost && e->at == i && e->checked_off != i + 1;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return pending;
}

int vram_fleet_wait(vram_fleet *f, double timeout_s)
{
    if (!f)
        return vram__fail(VRAM_EINVAL, "vram_fleet_wait: NULL fleet");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int done = !failover_pending(f);
        for (size_t i = 0; i < f->n && done; i++)
            done = vram_service_wait(f->svc[i], 0) == 0;
        if (done && !failover_pending(f))
            return 0;
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double spent = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
        if (timeout_s >= 0 && spent >= timeout_s)
            return 1;
        struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int vram_fleet_stop(vram_fleet *f)
{
    if (!f)
        return 0;
    pthread_mutex_lock(&f->mu);
    atomic_store(&f->quit, 1);
    pthread_cond_broadcast(&f->watch_cv);
    pthread_mutex_unlock(&f->mu);
    if (f->watching) {
        pthread_join(f->watcher, NULL);
        f->watching = 0;
    }
    /* No more adds or removals; those another thread has in hand (opening
     * a source, joining a reader) finish before the services stop. */
    pthread_mutex_lock(&f->mu);
    f->closing = 1;
    for (;;) {
        int busy = 0;
        for (size_t s = 0; s < f->n_streams; s++)
            busy |= f->streams[s]->busy;
        if (!busy)
            break;
        pthread_cond_wait(&f->idle_cv, &f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    vram__fleet_unserve(f);
    int rc = 0;
    vram__saved_error e = {0};
    for (size_t i = 0; i < f->n; i++) {
        int r = vram_service_stop(f->svc[i]);
        if (r && !rc) {
            rc = r;
            vram__error_save(&e);
        }
    }
    return rc ? vram__error_restore(&e, rc) : 0;
}

int vram_fleet_destroy(vram_fleet *f)
{
    if (!f)
        return 0;
    int rc = vram_fleet_stop(f);
    vram__saved_error e;
    vram__error_save(&e);
    for (size_t s = 0; s < f->n_streams; s++)
        free(f->streams[s]);
    for (size_t i = f->n; i-- > 0;)
        vram_service_destroy(f->svc[i]);
    pthread_cond_destroy(&f->idle_cv);
    pthread_cond_destroy(&f->watch_cv);
    pthread_mutex_destroy(&f->adm_mu);
    pthread_mutex_destroy(&f->mu);
    free(f->streams);
    free(f);
    return rc ? vram__error_restore(&e, rc) : 0;
}
