/* src/pipeline/streams.c - a stream's life in the service: admission (its
 * source opened into its own owner of the host pool, or with NVDEC of the
 * device pool, its need computed and checked against the budgets), its reader thread moving decoded frames
 * into its ready queue, and its end: the source interrupted, the frames in
 * flight finished, and everything it held given back.
 *
 * Pacing into the queue: a live stream (a network source, or a file paced
 * with realtime) never waits for the workers: a full queue drops its oldest
 * frame (batcher.c). A file read as fast as the pipeline takes it waits for
 * room instead, so that every frame of it is processed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service_internal.h"
#include "vramkit/stats.h"

static int stream_live(const vram__stream *st)
{
    return st->info.network || st->opts.realtime;
}

static void set_state(vram_service *svc, vram__stream *st, vram_stream_state state,
                      const char *error)
{
    pthread_mutex_lock(&svc->mu);
    st->state = state;
    if (error)
        snprintf(st->error, sizeof st->error, "%s", error);
    pthread_cond_broadcast(&svc->done_cv);
    pthread_mutex_unlock(&svc->mu);
}

static void free_staging(vram_service *svc, vram__stream *st);

/* Close the source and free the staging (once); the source's counters are
 * kept for the statistics. */
static void give_back(vram_service *svc, vram__stream *st)
{
    pthread_mutex_lock(&svc->mu);
    if (st->released) {
        pthread_mutex_unlock(&svc->mu);
        return;
    }
    st->released = 1;
    if (st->src) {
        vram_source_stats ss;
        if (vram_source_stats_get(st->src, &ss) == 0) {
            st->last_damaged = ss.damaged;
            st->last_reconnects = ss.reconnects;
        }
    }
    while (st->ready_count) {
        vram_source_release(st->src, st->ready[st->ready_head]);
        st->ready_head = (st->ready_head + 1) % st->ready_cap;
        st->ready_count--;
    }
    svc->committed -= st->need;
    if (svc->opts.admission && svc->opts.admission->release)
        svc->opts.admission->release(svc->opts.admission->ctx, st->need);
    vram_source *src = st->src;
    st->src = NULL;
    pthread_mutex_unlock(&svc->mu);
    if (vram_source_close(src))
        vram_log(VRAM_LOG_ERROR, "stream %s: closing its source: %s", st->id, vram_last_error());
    free_staging(svc, st);
}

static void *reader_main(void *arg)
{
    vram__stream *st = arg;
    vram_service *svc = st->svc;
    uint64_t reconnects = 0;
    for (;;) {
        vram_frame *f = NULL;
        int rc = vram_source_next(st->src, &f);
        vram_source_stats ss;
        if (vram_source_stats_get(st->src, &ss) == 0 && ss.reconnects != reconnects) {
            reconnects = ss.reconnects;
            set_state(svc, st, VRAM_STREAM_RUNNING, NULL);
        }
        if (rc == 1)
            break;
        if (rc < 0) {
            set_state(svc, st, VRAM_STREAM_FAILED, vram_last_error());
            break;
        }
        atomic_fetch_add_explicit(&st->frames_in, 1, memory_order_relaxed);
        pthread_mutex_lock(&svc->mu);
        if (!stream_live(st))
            while (st->ready_count == st->ready_cap && !st->stopping && !svc->stopping)
                pthread_cond_wait(&svc->done_cv, &svc->mu);
        if (st->stopping || svc->stopping) {
            pthread_mutex_unlock(&svc->mu);
            vram_source_release(st->src, f);
            break;
        }
        vram__ready_push(svc, st, f);
        pthread_mutex_unlock(&svc->mu);
        if (st->max_frames && atomic_load(&st->frames_in) >= st->max_frames)
            break;
    }
    /* The end: once its frames are processed and their results written,
     * the stream gives back everything it held, by itself. */
    pthread_mutex_lock(&svc->mu);
    while (st->ready_count || st->in_flight || st->refs)
        pthread_cond_wait(&svc->done_cv, &svc->mu);
    pthread_mutex_unlock(&svc->mu);
    give_back(svc, st);
    pthread_mutex_lock(&svc->mu);
    st->reader_done = 1;
    if (st->state == VRAM_STREAM_RUNNING || st->state == VRAM_STREAM_RECONNECTING)
        st->state = VRAM_STREAM_ENDED;
    pthread_cond_broadcast(&svc->done_cv);
    pthread_cond_broadcast(&svc->work_cv);
    pthread_mutex_unlock(&svc->mu);
    return NULL;
}

/* What one stream needs beyond its source: the snapshot copy and its JPEG
 * (kind io), when snapshots are on. */
/* An NVDEC frame copied to the host for a snapshot: NV12, tightly packed. */
static uint64_t nv12_bytes(int width, int height)
{
    return (uint64_t)width * (uint64_t)vram__align_up((uint64_t)height, 2) * 3u / 2u;
}

static uint64_t staging_bytes(const vram_service *svc, const vram_source_info *info)
{
    if (!svc->snapshots_dir)
        return 0;
    return (uint64_t)info->width * (uint64_t)info->height * 3u +
           vram__jpeg_bound(info->width, info->height) +
           (info->device_frames ? nv12_bytes(info->width, info->height) : 0);
}

static int find_owner(vram_pool *pool, const char *id, uint64_t budget, vram_owner *out)
{
    char name[80];
    snprintf(name, sizeof name, "stream:%s", id);
    int rc = vram_owner_find(pool, name, out);
    if (rc == 0)
        return vram_owner_set_budget(pool, *out, budget);
    return vram_owner_create(pool, name, budget, out);
}

static int alloc_staging(vram_service *svc, vram__stream *st)
{
    if (!svc->snapshots_dir)
        return 0;
    size_t rgb = (size_t)st->info.width * (size_t)st->info.height * 3u;
    st->jpeg_cap = vram__jpeg_bound(st->info.width, st->info.height);
    void *a = NULL, *b = NULL, *c = NULL;
    int rc = vram_pool_alloc(svc->host_pool, rgb, st->owner, VRAM_KIND_IO, NULL, &a);
    if (!rc)
        rc = vram_pool_alloc(svc->host_pool, st->jpeg_cap, st->owner, VRAM_KIND_IO, NULL, &b);
    if (!rc && st->nvdec)
        rc = vram_pool_alloc(svc->host_pool, nv12_bytes(st->info.width, st->info.height),
                             st->owner, VRAM_KIND_IO, NULL, &c);
    if (rc) {
        vram_pool_free(svc->host_pool, a, NULL);
        vram_pool_free(svc->host_pool, b, NULL);
        return rc;
    }
    st->snap_rgb = a;
    st->jpeg_buf = b;
    st->snap_nv12 = c;
    return 0;
}

static void free_staging(vram_service *svc, vram__stream *st)
{
    vram_pool_free(svc->host_pool, st->snap_rgb, NULL);
    vram_pool_free(svc->host_pool, st->jpeg_buf, NULL);
    vram_pool_free(svc->host_pool, st->snap_nv12, NULL);
    st->snap_rgb = st->jpeg_buf = st->snap_nv12 = NULL;
}

/* Whether a stream decodes with NVDEC: the service's nvdec or auto with
 * the cuda executor, for any source but the synthetic one (whose frames
 * are made on the CPU). */
static int wants_nvdec(const vram_service *svc, const vram__stream *st)
{
    return svc->cuda && svc->opts.decode != VRAM_DECODE_CPU &&
           strncmp(st->url, "synthetic:", 10) != 0;
}

/* Open the stream's source: NVDEC into its owner of the device pool, or the
 * CPU into its owner of the host pool; with auto, a stream NVDEC cannot
 * take (VRAM_ENOSYS) is opened on the CPU instead, with the reason kept. */
static int open_source(vram_service *svc, vram__stream *st, uint64_t budget, char *fallback,
                       size_t cap)
{
    fallback[0] = 0;
    int nv = wants_nvdec(svc, st);
    int rc = nv ? find_owner(svc->dev_pool, st->id, budget, &st->dev_owner) : 0;
    if (rc)
        return rc;
    vram_source_opts so;
    vram_source_opts_init(&so);
    so.url = st->url;
    so.pool = svc->host_pool;
    so.owner = st->owner;
    so.ring_frames = svc->ring_frames;
    so.realtime = st->opts.realtime;
    so.loop = st->opts.loop;
    so.decoder_threads = svc->opts.decoder_threads;
    if (nv) {
        /* The picture being decoded is in the decoder's own surfaces: the
         * ring (its output surfaces) holds the waiting and in-flight ones. */
        so.ring_frames = svc->ring_frames > 2 ? svc->ring_frames - 1 : 2;
        so.decode = VRAM_DECODE_NVDEC;
        so.pool = svc->dev_pool;
        so.owner = st->dev_owner;
        so.device = svc->device;
        so.extra_surfaces = svc->opts.extra_surfaces;
    }
    rc = vram_source_open(&so, &st->src);
    if (rc == VRAM_ENOSYS && nv && svc->opts.decode == VRAM_DECODE_AUTO) {
        const char *why = vram_last_error();
        size_t named = strlen("video source : ") + strlen(st->url);
        snprintf(fallback, cap, "%s",
                 strncmp(why, "video source ", 13) == 0 && strlen(why) > named ? why + named
                                                                               : why);
        vram_log(VRAM_LOG_INFO, "stream %s: decoding on the CPU: %s", st->id, fallback);
        so.decode = VRAM_DECODE_CPU;
        so.ring_frames = svc->ring_frames;
        so.pool = svc->host_pool;
        so.owner = st->owner;
        so.device = NULL;
        nv = 0;
        rc = vram_source_open(&so, &st->src);
    }
    st->nvdec = nv && rc == 0;
    return rc;
}

/* The admission check: 0, or VRAM_EBUDGET with the numbers. svc->mu held. */
static int admit_locked(vram_service *svc, const vram__stream *st, uint64_t frames,
                        uint64_t decoder, uint64_t staging)
{
    char need[32], fb[32], db[32], sb[32], lim[32], left[32], fixed[32], used[32];
    vram__fmt_bytes(need, sizeof need, st->need);
    vram__fmt_bytes(fb, sizeof fb, frames);
    vram__fmt_bytes(db, sizeof db, decoder);
    vram__fmt_bytes(sb, sizeof sb, staging + svc->io_share_bytes);
    if (st->budget && st->need > st->budget) {
        vram__fmt_bytes(lim, sizeof lim, st->budget);
        return vram__fail(VRAM_EBUDGET,
                          "stream %s (%s) needs %s (frames %s, decoder %s, staging and batch "
                          "share %s), more than its limit of %s",
                          st->id, st->url, need, fb, db, sb, lim);
    }
    if (svc->opts.budget) {
        uint64_t have = svc->fixed_bytes + svc->committed;
        uint64_t rest = have < svc->opts.budget ? svc->opts.budget - have : 0;
        if (st->need > rest) {
            vram__fmt_bytes(lim, sizeof lim, svc->opts.budget);
            vram__fmt_bytes(left, sizeof left, rest);
            vram__fmt_bytes(fixed, sizeof fixed, svc->fixed_bytes);
            vram__fmt_bytes(used, sizeof used, svc->committed);
            size_t admitted = 0;
            for (size_t i = 0; i < svc->n_streams; i++)
                admitted += !svc->streams[i]->admitting && !svc->streams[i]->released;
            return vram__fail(VRAM_EBUDGET,
                              "stream %s (%s) needs %s (frames %s, decoder %s, staging and "
                              "batch share %s) but the budget of %s has %s left (the "
                              "service's fixed %s and %zu stream%s %s)",
                              st->id, st->url, need, fb, db, sb, lim, left, fixed, admitted,
                              admitted == 1 ? "'s" : "s'", used);
        }
    }
    const vram_service_admission *a = svc->opts.admission;
    if (a && a->admit) {
        char why[384] = "";
        if (a->admit(a->ctx, st->id, st->need, why, sizeof why))
            return vram__fail(VRAM_EBUDGET,
                              "stream %s (%s) needs %s (frames %s, decoder %s, staging and "
                              "batch share %s): %s",
                              st->id, st->url, need, fb, db, sb, why[0] ? why : "refused");
    }
    return 0;
}

static int id_taken_locked(const vram_service *svc, const char *id)
{
    for (size_t i = 0; i < svc->n_streams; i++)
        if (!strcmp(svc->streams[i]->id, id))
            return 1;
    return 0;
}

int vram_service_add_stream(vram_service *svc, const vram_stream_opts *opts, const char **id)
{
    if (id)
        *id = NULL;
    if (!svc || !opts || !opts->url || !*opts->url)
        return vram__fail(VRAM_EINVAL, "add stream: a service and a URL are needed");
    if (opts->size && opts->size != sizeof(vram_stream_opts))
        return vram__fail(VRAM_EINVAL, "add stream: unknown vram_stream_opts size %u",
                          (unsigned)opts->size);
    if (strlen(opts->url) >= sizeof(((vram__stream *)0)->url))
        return vram__fail(VRAM_EINVAL, "add stream: the URL is longer than %zu bytes",
                          sizeof(((vram__stream *)0)->url) - 1);
    if (opts->id && (!*opts->id || strlen(opts->id) >= sizeof(((vram__stream *)0)->id)))
        return vram__fail(VRAM_EINVAL, "add stream: an id is 1 to %zu bytes",
                          sizeof(((vram__stream *)0)->id) - 1);
    for (const char *c = opts->id; c && *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            return vram__fail(VRAM_EINVAL, "add stream: the id \"%s\" may hold only letters, "
                                           "digits, '-', '_' and '.'",
                              opts->id);
    vram__stream *st = vram__calloc(1, sizeof *st);
    if (!st)
        return VRAM_EHOSTMEM;
    st->svc = svc;
    st->opts = *opts;
    snprintf(st->url, sizeof st->url, "%s", opts->url);
    st->opts.url = st->url;
    st->budget = opts->budget ? opts->budget : svc->opts.stream_budget;
    st->max_frames = opts->max_frames ? opts->max_frames : svc->opts.max_frames;
    pthread_mutex_lock(&svc->mu);
    int rc = 0;
    if (svc->stopping)
        rc = vram__fail(VRAM_EINVAL, "add stream: the service is stopping");
    else if (svc->failed)
        rc = vram__fail(VRAM_EBACKEND, "add stream: %s; it takes no new streams",
                        svc->failed_why);
    else if (svc->n_streams >= VRAM__STREAMS_MAX)
        rc = vram__fail(VRAM_ELIMIT, "add stream: the service has its most streams (%u)",
                        VRAM__STREAMS_MAX);
    else if (opts->id && id_taken_locked(svc, opts->id))
        rc = vram__fail(VRAM_EINVAL, "add stream: a stream with id \"%s\" exists", opts->id);
    if (!rc && opts->id)
        snprintf(st->id, sizeof st->id, "%s", opts->id);
    while (!rc && !opts->id) {
        snprintf(st->id, sizeof st->id, "s%u", svc->next_auto_id++);
        if (!id_taken_locked(svc, st->id))
            break;
    }
    if (!rc) {
        /* Reserve the slot and the id while the source opens unlocked. */
        st->admitting = 1;
        st->reader_done = 1;
        st->released = 1;
        svc->streams[svc->n_streams++] = st;
    }
    pthread_mutex_unlock(&svc->mu);
    st->opts.id = st->id;
    if (rc) {
        free(st);
        return rc;
    }
    rc = vram__stream_start(svc, st);
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        pthread_mutex_lock(&svc->mu);
        for (size_t i = 0; i < svc->n_streams; i++)
            if (svc->streams[i] == st) {
                svc->streams[i] = svc->streams[--svc->n_streams];
                break;
            }
        pthread_mutex_unlock(&svc->mu);
        free(st);
        return vram__error_restore(&e, rc);
    }
    if (id)
        *id = st->id;
    return 0;
}

/* What the service's budget has left for a new stream (UINT64_MAX: no
 * budget), and the sentence's figures. svc->mu held. */
static uint64_t room_locked(const vram_service *svc)
{
    if (!svc->opts.budget)
        return UINT64_MAX;
    uint64_t have = svc->fixed_bytes + svc->committed;
    return have < svc->opts.budget ? svc->opts.budget - have : 0;
}

/* Opening took more than the service's budget had left: say so with the
 * budget's figures and the pool's sentence. */
static int refuse_open(vram_service *svc, const vram__stream *st, uint64_t room, int rc)
{
    char lim[32], left[32], fixed[32], used[32], why[512];
    snprintf(why, sizeof why, "%s", vram_last_error());
    pthread_mutex_lock(&svc->mu);
    vram__fmt_bytes(used, sizeof used, svc->committed);
    pthread_mutex_unlock(&svc->mu);
    vram__fmt_bytes(lim, sizeof lim, svc->opts.budget);
    vram__fmt_bytes(left, sizeof left, room);
    vram__fmt_bytes(fixed, sizeof fixed, svc->fixed_bytes);
    return vram__fail(rc, "stream %s (%s) does not fit in what the budget of %s has left (%s, "
                          "after the service's fixed %s and the streams' %s): %s",
                      st->id, st->url, lim, left, fixed, used, why);
}

int vram__stream_start(vram_service *svc, vram__stream *st)
{
    /* While its source opens, the stream may take no more than the budget
     * has left, so that it never passes it; its own limit is checked
     * against its need below, and set once it is admitted. */
    pthread_mutex_lock(&svc->mu);
    uint64_t room = room_locked(svc);
    pthread_mutex_unlock(&svc->mu);
    if (room == 0)
        return refuse_open(svc, st, 0, vram__fail(VRAM_EBUDGET, "nothing is left"));
    uint64_t opening = room == UINT64_MAX ? 0 : room;
    int rc = find_owner(svc->host_pool, st->id, opening, &st->owner);
    if (rc)
        return rc;
    char fallback[sizeof st->info.fallback];
    if ((rc = open_source(svc, st, opening, fallback, sizeof fallback))) {
        if (rc == VRAM_EBUDGET && room != UINT64_MAX)
            return refuse_open(svc, st, room, rc);
        return vram__fail_prefix(rc, "stream %s: ", st->id);
    }
    vram_source_info_get(st->src, &st->info);
    if (fallback[0])
        snprintf(st->info.fallback, sizeof st->info.fallback, "%s", fallback);
    uint64_t staging = staging_bytes(svc, &st->info);
    st->need = st->info.frames_bytes + st->info.decoder_bytes + staging + svc->io_share_bytes;
    st->ready_cap = svc->queue_frames;
    pthread_mutex_lock(&svc->mu);
    rc = admit_locked(svc, st, st->info.frames_bytes, st->info.decoder_bytes, staging);
    if (!rc)
        svc->committed += st->need;
    pthread_mutex_unlock(&svc->mu);
    int committed = rc == 0;
    if (!rc)
        rc = vram_owner_set_budget(svc->host_pool, st->owner, st->budget);
    if (!rc && st->nvdec)
        rc = vram_owner_set_budget(svc->dev_pool, st->dev_owner, st->budget);
    if (!rc && (rc = alloc_staging(svc, st)) != 0)
        vram__fail_prefix(rc, "stream %s: snapshot staging: ", st->id);
    if (!rc) {
        st->ready = vram__calloc(st->ready_cap, sizeof *st->ready);
        if (!st->ready)
            rc = VRAM_EHOSTMEM;
    }
    if (!rc) {
        pthread_mutex_lock(&svc->mu);
        /* The GPU may have failed while the source opened: the stream does
         * not start on it (vram_service_fail skipped it, being admitted). */
        if (svc->failed)
            rc = vram__fail(VRAM_EBACKEND, "add stream %s: the service failed while it was "
                            "admitted (%s)", st->id, svc->failed_why);
        else {
            st->state = VRAM_STREAM_RUNNING;
            st->reader_done = 0;
            st->released = 0;
            st->admitting = 0;
            st->next_snapshot_ns = vram__now_ns();
            st->fps_last_ns = vram__now_ns();
        }
        pthread_mutex_unlock(&svc->mu);
    }
    if (!rc) {
        if (pthread_create(&st->thread, NULL, reader_main, st) == 0) {
            st->thread_started = 1;
            return 0;
        }
        rc = vram__fail(VRAM_EHOSTMEM, "stream %s: cannot start its reader thread", st->id);
        pthread_mutex_lock(&svc->mu);
        st->reader_done = 1;
        st->released = 1;
        st->admitting = 1;
        pthread_mutex_unlock(&svc->mu);
    }
    /* Refused or failed: give everything back. */
    vram__saved_error e;
    vram__error_save(&e);
    free(st->ready);
    st->ready = NULL;
    free_staging(svc, st);
    vram_source_close(st->src);
    st->src = NULL;
    if (committed) {
        pthread_mutex_lock(&svc->mu);
        svc->committed -= st->need;
        if (svc->opts.admission && svc->opts.admission->release)
            svc->opts.admission->release(svc->opts.admission->ctx, st->need);
        pthread_mutex_unlock(&svc->mu);
    }
    return vram__error_restore(&e, rc);
}

void vram__stream_release(vram_service *svc, vram__stream *st)
{
    if (st->thread_started) {
        pthread_join(st->thread, NULL); /* the reader gives everything back as it ends */
        st->thread_started = 0;
    }
    give_back(svc, st);
}

void vram__stream_finish(vram_service *svc, vram__stream *st)
{
    pthread_mutex_lock(&svc->mu);
    st->stopping = 1;
    pthread_cond_broadcast(&svc->done_cv);
    if (st->src)
        vram_source_interrupt(st->src);
    pthread_mutex_unlock(&svc->mu);
    /* The reader leaves, once the frames taken by workers finished and the
     * results that point here were written, giving everything back. */
    vram__stream_release(svc, st);
}

void vram__stream_free(vram__stream *st)
{
    if (!st)
        return;
    free(st->ready);
    free(st);
}

int vram_service_remove_stream(vram_service *svc, const char *id)
{
    if (!svc || !id)
        return vram__fail(VRAM_EINVAL, "remove stream: a service and an id are needed");
    pthread_mutex_lock(&svc->mu);
    vram__stream *st = NULL;
    for (size_t i = 0; i < svc->n_streams; i++)
        if (!strcmp(svc->streams[i]->id, id) && !svc->streams[i]->removing)
            st = svc->streams[i];
    int admitting = st && st->admitting;
    if (st && !admitting)
        st->stopping = st->removing = 1;
    pthread_mutex_unlock(&svc->mu);
    if (!st)
        return vram__fail(VRAM_EINVAL, "remove stream: no stream \"%s\"", id);
    if (admitting)
        return vram__fail(VRAM_EBUSY, "remove stream: \"%s\" is still being admitted", id);
    vram__stream_finish(svc, st);
    pthread_mutex_lock(&svc->mu);
    for (size_t i = 0; i < svc->n_streams; i++)
        if (svc->streams[i] == st) {
            memmove(&svc->streams[i], &svc->streams[i + 1],
                    (svc->n_streams - i - 1) * sizeof svc->streams[0]);
            svc->n_streams--;
            break;
        }
    if (svc->rr >= svc->n_streams)
        svc->rr = 0;
    pthread_mutex_unlock(&svc->mu);
    vram__stream_free(st);
    return 0;
}
