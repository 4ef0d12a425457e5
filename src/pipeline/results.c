/* src/pipeline/results.c - the output thread and its bounded queue: the
 * workers queue each processed frame's result (a fixed record, copied into
 * a ring made at start), and this thread writes it as a JSON Lines line,
 * encodes the stream's snapshot when the result carries one, calls the
 * caller's callback, and once a second updates every stream's frame rate.
 * A full queue refuses the result (the worker counts the drop), so a slow
 * disk or reader slows only this thread, never inference. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service_internal.h"

int vram__results_push(vram_service *svc, const vram__result *r)
{
    pthread_mutex_lock(&svc->out_mu);
    if (svc->res_count == svc->res_cap || svc->out_quit) {
        pthread_mutex_unlock(&svc->out_mu);
        return 1;
    }
    /* Copy only what is used: the header, the faces and summaries found. */
    vram__result *slot = &svc->results[(svc->res_head + svc->res_count) % svc->res_cap];
    size_t nf = r->n_faces < VRAM__FACES_MAX ? r->n_faces : VRAM__FACES_MAX;
    memcpy(slot, r, offsetof(vram__result, faces));
    memcpy(slot->faces, r->faces, nf * sizeof r->faces[0]);
    slot->n_outputs = r->n_outputs;
    memcpy(slot->outputs, r->outputs, r->n_outputs * sizeof r->outputs[0]);
    svc->res_count++;
    pthread_cond_signal(&svc->out_cv);
    pthread_mutex_unlock(&svc->out_mu);
    return 0;
}

static void out_fail(vram_service *svc, const char *what)
{
    if (svc->out_error)
        return;
    svc->out_error = VRAM_EIO;
    snprintf(svc->out_error_msg, sizeof svc->out_error_msg, "%s", what);
    vram_log(VRAM_LOG_ERROR, "%s", what);
}

static void write_jsonl(vram_service *svc, const vram__result *r)
{
    FILE *f = svc->jsonl;
    if (!f || svc->jsonl_failed)
        return;
    const vram__stream *st = r->stream;
    /* One line at a time on the FILE: several services (a fleet's, on
     * stdout) may write to the same one. */
    flockfile(f);
    int bad = fprintf(f, "{\"stream\":\"%s\",\"frame\":%lld,\"pts\":%.6f,\"width\":%d,"
                         "\"height\":%d,\"latency_ms\":%.3f,\"detections\":[",
                      st->id, (long long)r->frame, r->pts_s, r->width, r->height,
                      r->latency_ms) < 0;
    size_t nf = r->n_faces < VRAM__FACES_MAX ? r->n_faces : VRAM__FACES_MAX;
    for (size_t i = 0; i < nf && !bad; i++) {
        const vram_face *fc = &r->faces[i];
        bad |= fprintf(f, "%s{\"box\":[%.2f,%.2f,%.2f,%.2f],\"score\":%.5f,\"keypoints\":[",
                       i ? "," : "", fc->box[0], fc->box[1], fc->box[2], fc->box[3],
                       fc->score) < 0;
        for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++)
            bad |= fprintf(f, "%s[%.2f,%.2f]", k ? "," : "", fc->keypoints[k][0],
                           fc->keypoints[k][1]) < 0;
        bad |= fputs("]}", f) < 0;
    }
    bad |= fputs("]", f) < 0;
    if (r->n_faces > nf)
        bad |= fprintf(f, ",\"detections_total\":%zu", r->n_faces) < 0;
    if (r->n_outputs) {
        bad |= fputs(",\"outputs\":[", f) < 0;
        for (size_t o = 0; o < r->n_outputs; o++) {
            const vram_output_summary *s = &r->outputs[o];
            bad |= fprintf(f, "%s{\"name\":\"%s\",\"shape\":[", o ? "," : "", s->name) < 0;
            for (int d = 0; d < s->rank && d < 8; d++)
                bad |= fprintf(f, "%s%lld", d ? "," : "", (long long)s->dims[d]) < 0;
            bad |= fprintf(f, "],\"min\":%.6g,\"max\":%.6g,\"mean\":%.6g}", s->min, s->max,
                           s->mean) < 0;
        }
        bad |= fputs("]", f) < 0;
    }
    bad |= fputs("}\n", f) < 0;
    funlockfile(f);
    if (bad) {
        char msg[256];
        snprintf(msg, sizeof msg, "writing the JSON Lines to %s failed: %s", svc->jsonl_path,
                 strerror(errno));
        out_fail(svc, msg);
        svc->jsonl_failed = 1;
    }
}

static void write_snapshot(vram_service *svc, const vram__result *r)
{
    vram__stream *st = r->stream;
    size_t nf = r->n_faces < VRAM__FACES_MAX ? r->n_faces : VRAM__FACES_MAX;
    size_t stride = (size_t)r->width * 3u;
    vram__draw_faces(st->snap_rgb, r->width, r->height, stride, r->faces, nf);
    size_t len = 0;
    int rc = vram__jpeg_encode(svc->jpeg, st->snap_rgb, r->width, r->height, stride, 85,
                               st->jpeg_buf, st->jpeg_cap, &len);
    char name[128];
    snprintf(name, sizeof name, "%s-%06lld.jpg", st->id, (long long)r->frame);
    if (!rc)
        rc = vram__jpeg_write_file(svc->snapshots_dir, name, st->jpeg_buf, len);
    if (rc) {
        atomic_fetch_add_explicit(&svc->snapshot_errors, 1, memory_order_relaxed);
        if (!svc->snapshot_warned) {
            svc->snapshot_warned = 1;
            vram_log(VRAM_LOG_WARN, "snapshot of stream %s: %s (later failures are counted)",
                     st->id, vram_last_error());
        }
    } else {
        atomic_fetch_add_explicit(&svc->snapshots, 1, memory_order_relaxed);
    }
}

static void call_back(vram_service *svc, const vram__result *r)
{
    if (!svc->opts.on_result)
        return;
    vram_result out = {
        .stream = r->stream->id,
        .frame = r->frame,
        .pts_s = r->pts_s,
        .width = r->width,
        .height = r->height,
        .latency_ms = r->latency_ms,
        .n_faces = r->n_faces < VRAM__FACES_MAX ? r->n_faces : VRAM__FACES_MAX,
        .faces = r->faces,
        .n_outputs = r->n_outputs,
        .outputs = r->outputs,
    };
    svc->opts.on_result(svc->opts.result_ctx, &out);
}

static void update_fps(vram_service *svc, uint64_t now)
{
    pthread_mutex_lock(&svc->mu);
    for (size_t i = 0; i < svc->n_streams; i++) {
        vram__stream *st = svc->streams[i];
        uint64_t p = atomic_load_explicit(&st->processed, memory_order_relaxed);
        uint64_t dt = now - st->fps_last_ns;
        if (dt < 500000000ull)
            continue;
        double fps = (double)(p - st->fps_last_processed) * 1e9 / (double)dt;
        atomic_store_explicit(&st->fps_milli, (uint64_t)(fps * 1000.0), memory_order_relaxed);
        st->fps_last_processed = p;
        st->fps_last_ns = now;
    }
    pthread_mutex_unlock(&svc->mu);
}

static void *output_main(void *arg)
{
    vram_service *svc = arg;
    uint64_t last_tick = vram__now_ns();
    for (;;) {
        pthread_mutex_lock(&svc->out_mu);
        while (!svc->res_count && !svc->out_quit) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 250000000l;
            if (ts.tv_nsec >= 1000000000l) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000l;
            }
            pthread_cond_timedwait(&svc->out_cv, &svc->out_mu, &ts);
            if (vram__now_ns() - last_tick >= 1000000000ull)
                break;
        }
        int have = svc->res_count > 0;
        int quit = svc->out_quit && !have;
        /* The record stays in its slot while it is written: the slot is
         * given back afterwards, so the workers never write over it. */
        vram__result *r = have ? &svc->results[svc->res_head] : NULL;
        pthread_mutex_unlock(&svc->out_mu);
        uint64_t now = vram__now_ns();
        if (now - last_tick >= 1000000000ull) {
            last_tick = now;
            update_fps(svc, now);
            if (svc->jsonl)
                fflush(svc->jsonl);
        }
        if (quit)
            break;
        if (!r)
            continue;
        write_jsonl(svc, r);
        if (r->snapshot)
            write_snapshot(svc, r);
        call_back(svc, r);
        vram__stream *st = r->stream;
        int snap = r->snapshot;
        uint64_t t = vram__now_ns();
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&st->first_result_ns, &zero, t);
        atomic_store(&st->last_result_ns, t);
        pthread_mutex_lock(&svc->out_mu);
        svc->res_head = (svc->res_head + 1) % svc->res_cap;
        svc->res_count--;
        pthread_mutex_unlock(&svc->out_mu);
        pthread_mutex_lock(&svc->mu);
        st->refs--;
        if (snap)
            st->snap_busy = 0;
        pthread_cond_broadcast(&svc->done_cv);
        pthread_mutex_unlock(&svc->mu);
    }
    update_fps(svc, vram__now_ns());
    return NULL;
}

int vram__results_start(vram_service *svc)
{
    svc->res_cap = svc->opts.output_queue;
    int rc = vram_pool_alloc(svc->host_pool, (uint64_t)svc->res_cap * sizeof(vram__result),
                             svc->host_owner, VRAM_KIND_IO, NULL, (void **)&svc->results);
    if (rc)
        return vram__fail_prefix(rc, "the output queue: ");
    if (svc->jsonl_path) {
        if (!strcmp(svc->jsonl_path, "-")) {
            svc->jsonl = stdout;
        } else {
            svc->jsonl = fopen(svc->jsonl_path, "w");
            if (!svc->jsonl)
                return vram__fail(VRAM_EIO, "cannot create the JSON Lines file %s: %s",
                                  svc->jsonl_path, strerror(errno));
            svc->jsonl_owned = 1;
        }
    }
    if (svc->snapshots_dir && (rc = vram__jpeg_encoder_create(&svc->jpeg)))
        return rc;
    if (pthread_create(&svc->out_thread, NULL, output_main, svc))
        return vram__fail(VRAM_EHOSTMEM, "cannot start the output thread");
    svc->out_started = 1;
    return 0;
}

int vram__results_stop(vram_service *svc)
{
    if (svc->out_started) {
        pthread_mutex_lock(&svc->out_mu);
        svc->out_quit = 1;
        pthread_cond_signal(&svc->out_cv);
        pthread_mutex_unlock(&svc->out_mu);
        pthread_join(svc->out_thread, NULL);
        svc->out_started = 0;
    }
    if (svc->jsonl) {
        if (fflush(svc->jsonl) && !svc->jsonl_failed) {
            char msg[256];
            snprintf(msg, sizeof msg, "writing the JSON Lines to %s failed: %s",
                     svc->jsonl_path, strerror(errno));
            out_fail(svc, msg);
        }
        if (svc->jsonl_owned && fclose(svc->jsonl) && !svc->out_error) {
            char msg[256];
            snprintf(msg, sizeof msg, "closing the JSON Lines file %s failed: %s",
                     svc->jsonl_path, strerror(errno));
            out_fail(svc, msg);
        }
        svc->jsonl = NULL;
    }
    if (svc->out_error)
        return vram__fail(svc->out_error, "%s", svc->out_error_msg);
    return 0;
}

void vram__results_free(vram_service *svc)
{
    vram__jpeg_encoder_destroy(svc->jpeg);
    svc->jpeg = NULL;
    vram_pool_free(svc->host_pool, svc->results, NULL);
    svc->results = NULL;
}
