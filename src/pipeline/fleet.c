/* src/pipeline/fleet.c - one service per GPU and the streams placed among
 * them (vramkit/fleet.h): creation, placement by budget left and streams,
 * the fleet's budget through each service's admission hook, the watcher
 * that moves a failed GPU's streams to the others, and the fleet's view of
 * all streams.
 *
 * Locks, outermost first: fleet->mu (the stream table), then a service's
 * own, then fleet->adm_mu (the fleet's budget counters, taken inside a
 * service's admission). Each stream's record is allocated on its own, so
 * it stays where it is while the table changes; a record being admitted,
 * moved or removed is marked busy, and the work that opens or closes its
 * source (seconds, for a camera that does not answer) runs without
 * fleet->mu, so that the views and the API go on meanwhile. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "fleet_internal.h"

/* ---- the fleet's budget, from inside each service's admission ---- */

int vram__fleet_admit(void *ctx, const char *stream, uint64_t need, char *why, size_t cap)
{
    vram_fleet *f = ctx;
    (void)stream;
    pthread_mutex_lock(&f->adm_mu);
    uint64_t have = f->fixed + f->committed;
    uint64_t rest = have < f->opts.budget ? f->opts.budget - have : 0;
    int ok = !f->opts.budget || need <= rest;
    if (ok) {
        f->committed += need;
    } else {
        char lim[32], left[32], fixed[32], used[32];
        vram__fmt_bytes(lim, sizeof lim, f->opts.budget);
        vram__fmt_bytes(left, sizeof left, rest);
        vram__fmt_bytes(fixed, sizeof fixed, f->fixed);
        vram__fmt_bytes(used, sizeof used, f->committed);
        snprintf(why, cap, "the fleet's budget of %s has %s left (%zu GPUs' fixed %s, the "
                           "streams' %s)", lim, left, f->n, fixed, used);
    }
    pthread_mutex_unlock(&f->adm_mu);
    return ok ? 0 : 1;
}

void vram__fleet_release(void *ctx, uint64_t need)
{
    vram_fleet *f = ctx;
    pthread_mutex_lock(&f->adm_mu);
    f->committed -= need < f->committed ? need : f->committed;
    pthread_mutex_unlock(&f->adm_mu);
}

/* ---- placement ---- */

/* A service's budget left and its streams (svc->mu taken). */
static void load_of(vram_service *svc, uint64_t *left, size_t *streams)
{
    pthread_mutex_lock(&svc->mu);
    uint64_t have = svc->fixed_bytes + svc->committed;
    *left = !svc->opts.budget ? UINT64_MAX
            : have < svc->opts.budget ? svc->opts.budget - have : 0;
    size_t live = 0;
    for (size_t i = 0; i < svc->n_streams; i++)
        live += !svc->streams[i]->released || svc->streams[i]->admitting;
    *streams = live;
    pthread_mutex_unlock(&svc->mu);
}

/* The healthy GPUs but `skip`, best first, into order; returns how many. */
static size_t rank_gpus(vram_fleet *f, size_t skip, size_t *order)
{
    uint64_t left[VRAM_FLEET_GPUS_MAX];
    size_t streams[VRAM_FLEET_GPUS_MAX], k = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (i == skip || vram__service_failed(f->svc[i]))
            continue;
        load_of(f->svc[i], &left[i], &streams[i]);
        size_t j = k++;
        while (j > 0) { /* insertion: most left, fewest streams, lowest index */
            size_t p = order[j - 1];
            int before = left[i] > left[p] || (left[i] == left[p] && streams[i] < streams[p]);
            if (!before)
                break;
            order[j] = p;
            j--;
        }
        order[j] = i;
    }
    return k;
}

/* Admit e's stream on the best GPU that takes it, its position into *at
 * (e busy, fleet->mu not held: it reads only e's settings and what does
 * not change after creation; the caller sets e->at under the lock). */
static int place(vram_fleet *f, const fleet_stream *e, size_t skip, size_t *at)
{
    size_t order[VRAM_FLEET_GPUS_MAX];
    size_t k = rank_gpus(f, skip, order);
    if (!k)
        return vram__fail(VRAM_EBACKEND, "stream %s: no GPU is serving (all %zu failed)", e->id,
                          f->n);
    char why[1024] = "";
    size_t used = 0;
    for (size_t r = 0; r < k; r++) {
        size_t i = order[r];
        int rc = vram_service_add_stream(f->svc[i], &e->opts, NULL);
        if (!rc) {
            *at = i;
            return 0;
        }
        /* That GPU's own refusals (its budget, its memory, its stream limit,
         * its failure) leave the others to try; the stream's own faults (its
         * source, its settings) are the same on any GPU. */
        if (rc != VRAM_EBUDGET && rc != VRAM_ENOMEM && rc != VRAM_ELIMIT && rc != VRAM_EBACKEND)
            return rc;
        int w = snprintf(why + used, sizeof why - used, "%sGPU %d: %s", used ? "; " : "",
                         f->gpu[i], vram_last_error());
        if (w > 0)
            used = used + (size_t)w < sizeof why ? used + (size_t)w : sizeof why - 1;
    }
    return vram__fail(VRAM_EBUDGET, "stream %s (%s) fits on none of the %zu GPU%s serving: %s",
                      e->id, e->url, k, k == 1 ? "" : "s", why);
}

fleet_stream *vram__fleet_find_locked(vram_fleet *f, const char *id)
{
    for (size_t i = 0; i < f->n_streams; i++)
        if (!strcmp(f->streams[i]->id, id))
            return f->streams[i];
    return NULL;
}

/* Take e out of the table and free it (fleet->mu held). */
static void drop_locked(vram_fleet *f, fleet_stream *e)
{
    for (size_t i = 0; i < f->n_streams; i++)
        if (f->streams[i] == e) {
            memmove(&f->streams[i], &f->streams[i + 1],
                    (f->n_streams - i - 1) * sizeof f->streams[0]);
            f->n_streams--;
            break;
        }
    free(e);
}

int vram_fleet_add_stream(vram_fleet *f, const vram_stream_opts *opts, char *id, size_t cap,
                          size_t *at)
{
    if (!f || !opts || !opts->url)
        return vram__fail(VRAM_EINVAL, "vram_fleet_add_stream: NULL argument or URL");
    if (opts->id && strlen(opts->id) >= sizeof ((fleet_stream *)0)->id)
        return vram__fail(VRAM_EINVAL, "add stream: the id \"%.80s\" is longer than %zu bytes",
                          opts->id, sizeof ((fleet_stream *)0)->id - 1);
    if (strlen(opts->url) >= sizeof ((fleet_stream *)0)->url)
        return vram__fail(VRAM_EINVAL, "add stream: the URL \"%.60s...\" is %zu bytes long; at "
                          "most %zu", opts->url, strlen(opts->url),
                          sizeof ((fleet_stream *)0)->url - 1);
    fleet_stream *e = vram__calloc(1, sizeof *e);
    if (!e)
        return VRAM_EHOSTMEM;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    if (f->closing)
        rc = vram__fail(VRAM_EINVAL, "add stream: the fleet is stopping");
    else if (opts->id && vram__fleet_find_locked(f, opts->id))
        rc = vram__fail(VRAM_EINVAL, "add stream: a stream with id \"%s\" exists", opts->id);
    if (!rc && f->n_streams == f->cap) {
        size_t cap2 = f->cap ? 2 * f->cap : 64;
        fleet_stream **s2 = realloc(f->streams, cap2 * sizeof *s2);
        if (!s2)
            rc = vram__fail(VRAM_EHOSTMEM, "add stream: out of host memory");
        else {
            f->streams = s2;
            f->cap = cap2;
        }
    }
    if (rc) {
        pthread_mutex_unlock(&f->mu);
        free(e);
        return rc;
    }
    if (opts->id)
        snprintf(e->id, sizeof e->id, "%s", opts->id);
    else
        do
            snprintf(e->id, sizeof e->id, "s%u", f->next_auto_id++);
        while (vram__fleet_find_locked(f, e->id));
    snprintf(e->url, sizeof e->url, "%s", opts->url);
    e->opts = *opts;
    e->opts.id = e->id;
    e->opts.url = e->url;
    e->busy = 1; /* the id is taken; the record is no one else's until placed */
    f->streams[f->n_streams++] = e;
    pthread_mutex_unlock(&f->mu);

    size_t where = 0;
    rc = place(f, e, SIZE_MAX, &where);

    pthread_mutex_lock(&f->mu);
    if (!rc) {
        e->at = where;
        e->busy = 0;
        if (id && cap)
            snprintf(id, cap, "%s", e->id);
        if (at)
            *at = e->at;
    } else {
        drop_locked(f, e);
    }
    pthread_cond_broadcast(&f->idle_cv);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int vram_fleet_remove_stream(vram_fleet *f, const char *id)
{
    if (!f || !id)
        return vram__fail(VRAM_EINVAL, "vram_fleet_remove_stream: NULL argument");
    pthread_mutex_lock(&f->mu);
    fleet_stream *e = vram__fleet_find_locked(f, id);
    int rc = f->closing ? vram__fail(VRAM_EINVAL, "remove stream: the fleet is stopping")
             : !e ? vram__fail(VRAM_EINVAL, "no stream \"%s\"", id)
             : e->busy ? vram__fail(VRAM_EBUSY, "remove stream: \"%s\" is being admitted or "
                                                "moved; try again", id)
                       : 0;
    if (!rc)
        e->busy = 1;
    pthread_mutex_unlock(&f->mu);
    if (rc)
        return rc;
    /* Its reader is joined without the fleet's lock. */
    if (!e->lost)
        rc = vram_service_remove_stream(f->svc[e->at], id);
    pthread_mutex_lock(&f->mu);
    if (!rc)
        drop_locked(f, e);
    else
        e->busy = 0;
    pthread_cond_broadcast(&f->idle_cv);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* ---- failover ---- */

/* Move one stream off failed GPU i (e busy, fleet->mu not held). */
static void move_one(vram_fleet *f, size_t i, fleet_stream *e, const char *reason)
{
    vram_stream_stats st;
    if (vram_service_stream_stats(f->svc[i], e->id, &st) == 0 &&
        (st.state == VRAM_STREAM_ENDED ||
         (st.state == VRAM_STREAM_FAILED && strcmp(st.error, reason) != 0)))
        return; /* it had ended, or failed on its own (a dead camera), before */
    if (vram_service_remove_stream(f->svc[i], e->id))
        vram_log(VRAM_LOG_WARN, "fleet: stream %s: taking it off failed GPU %d: %s", e->id,
                 f->gpu[i], vram_last_error());
    size_t where = 0;
    if (place(f, e, i, &where) == 0) {
        pthread_mutex_lock(&f->mu);
        e->at = where;
        pthread_mutex_unlock(&f->mu);
        atomic_fetch_add(&f->moved, 1);
        vram_log(VRAM_LOG_WARN, "fleet: stream %s moved from GPU %d to GPU %d (%s)", e->id,
                 f->gpu[i], f->gpu[where], reason);
        return;
    }
    char error[sizeof e->error];
    snprintf(error, sizeof error, "%.180s; not re-admitted: %.300s", reason, vram_last_error());
    pthread_mutex_lock(&f->mu);
    snprintf(e->error, sizeof e->error, "%s", error);
    e->lost = 1;
    pthread_mutex_unlock(&f->mu);
    atomic_fetch_add(&f->lost, 1);
    vram_log(VRAM_LOG_ERROR, "fleet: stream %s lost: %s", e->id, error);
}

/* Move the streams of failed GPU i to the others (fleet->mu held on entry
 * and return; released while they move, 64 at a time, each marked busy so
 * that its record stays put). */
static void move_off_locked(vram_fleet *f, size_t i)
{
    char reason[256] = "";
    for (;;) {
        fleet_stream *batch[64];
        size_t n = 0;
        for (size_t s = 0; s < f->n_streams && n < 64; s++) {
            fleet_stream *e = f->streams[s];
            if (e->lost || e->busy || e->at != i || e->checked_off == i + 1)
                continue;
            e->busy = 1;
            e->checked_off = i + 1;
            batch[n++] = e;
        }
        if (!n)
            return;
        if (!reason[0])
            vram_service_health(f->svc[i], reason, sizeof reason);
        f->in_hand += n;
        pthread_mutex_unlock(&f->mu);
        for (size_t k = 0; k < n; k++) {
            /* Asked to leave: the rest stay where they are, marked as seen. */
            if (!atomic_load(&f->quit))
                move_one(f, i, batch[k], reason);
            pthread_mutex_lock(&f->mu);
            batch[k]->busy = 0;
            f->in_hand--;
            pthread_cond_broadcast(&f->idle_cv);
            pthread_mutex_unlock(&f->mu);
        }
        pthread_mutex_lock(&f->mu);
    }
}

/* Every failed GPU's streams not yet moved off: moved (fleet->mu held).
 * A GPU handled before is looked at again each time, for a stream placed
 * on it just as it failed (busy then, so its first pass left it). Returns
 * how many GPUs are failed. */
static size_t failover_locked(vram_fleet *f)
{
    size_t done = 0;
    for (size_t i = 0; i < f->n; i++)
        if (vram__service_failed(f->svc[i])) {
            move_off_locked(f, i);
            done++;
        }
    return done;
}

static struct timespec after_s(double s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double at = (double)t.tv_sec + (double)t.tv_nsec / 1e9 + s;
    t.tv_sec = (time_t)at;
    t.tv_nsec = (long)((at - (double)t.tv_sec) * 1e9);
    return t;
}

void *vram__fleet_watch(void *arg)
{
    vram_fleet *f = arg;
    pthread_mutex_lock(&f->mu);
    while (!atomic_load(&f->quit)) {
        failover_locked(f);
        struct timespec t = after_s(f->opts.watch_s);
        pthread_cond_timedwait(&f->watch_cv, &f->mu, &t);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}
