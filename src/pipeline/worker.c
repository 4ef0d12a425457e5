/* src/pipeline/worker.c - the inference workers: each owns an execution
 * context of the one engine and its batch buffers, takes up to B ready
 * frames of different streams (batcher.c), letterboxes them into one batch
 * (NVDEC frames by one kernel straight into the input binding, frames in
 * host memory on the CPU), runs it, decodes each image's outputs (BlazeFace faces, or a summary of
 * each output tensor) and queues the results for the output thread
 * (results.c). Everything a worker uses is made when it starts; a batch
 * allocates nothing.
 *
 * With the cuda executor the batch input is host memory from the pool,
 * page-locked once (cuMemHostRegister) so that its upload is a DMA from
 * pinned staging; the workers run on the shared context the engine's pool
 * binds. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "service_internal.h"
#include "vramkit/device.h"

typedef int (*host_register_fn)(void *p, size_t bytes, unsigned flags);
typedef int (*host_unregister_fn)(void *p);
typedef int (*htod_async_fn)(unsigned long long dst, const void *src, size_t bytes,
                             void *stream);

static void pin(vram_service *svc, vram__worker *w, size_t bytes)
{
    host_register_fn reg = NULL;
    if (!svc->cuda || vram_cuda_proc("cuMemHostRegister", 4000, (void **)&reg) || !reg)
        return;
    if (reg(w->input, bytes, 0) == 0)
        w->pinned = 1;
    else
        vram_log(VRAM_LOG_WARN, "worker %u: the batch input could not be page-locked; its "
                                "uploads go through pageable memory",
                 w->index);
}

static void unpin(vram__worker *w)
{
    host_unregister_fn unreg = NULL;
    if (w->pinned && vram_cuda_proc("cuMemHostUnregister", 4000, (void **)&unreg) == 0 && unreg)
        unreg(w->input);
    w->pinned = 0;
}

static int worker_alloc(vram_service *svc, vram_pool *pool, vram_owner owner, size_t bytes,
                        void **out)
{
    return vram_pool_alloc(pool, bytes ? bytes : 1, owner, VRAM_KIND_IO, NULL, out);
}

static int worker_setup(vram_service *svc, vram__worker *w)
{
    int rc = vram_exec_create(svc->engine, &w->exec);
    if (rc)
        return vram__fail_prefix(rc, "worker %u: execution context: ", w->index);
    w->image_floats = (size_t)svc->in_w * (size_t)svc->in_h * 3u;
    rc = worker_alloc(svc, svc->host_pool, svc->host_owner,
                      w->image_floats * svc->batch * sizeof(float), (void **)&w->input);
    for (size_t o = 0; !rc && o < svc->n_outputs; o++)
        rc = worker_alloc(svc, svc->host_pool, svc->host_owner,
                          svc->out_floats[o] * svc->batch * sizeof(float),
                          (void **)&w->outputs[o]);
    if (!rc && svc->bf) {
        size_t b = vram_blazeface_scratch_bytes(svc->bf);
        rc = worker_alloc(svc, svc->host_pool, svc->host_owner, b, &w->bf_scratch);
    }
    if (!rc)
        rc = worker_alloc(svc, svc->host_pool, svc->host_owner,
                          sizeof(vram__result) * svc->batch, (void **)&w->results);
    if (rc)
        return vram__fail_prefix(rc, "worker %u: batch buffers: ", w->index);
    pin(svc, w, w->image_floats * svc->batch * sizeof(float));
    return 0;
}

static void summarize(const vram_service *svc, const vram__worker *w, unsigned i,
                      vram__result *r)
{
    r->n_outputs = svc->n_outputs;
    for (size_t o = 0; o < svc->n_outputs; o++) {
        vram_output_summary *s = &r->outputs[o];
        const float *v = w->outputs[o] + (size_t)i * svc->out_floats[o];
        s->name = svc->out_desc[o].name;
        s->rank = svc->out_desc[o].rank;
        for (int d = 0; d < s->rank && d < 8; d++)
            s->dims[d] = d == 0 ? 1 : svc->out_desc[o].dims[d];
        float mn = FLT_MAX, mx = -FLT_MAX;
        double sum = 0;
        for (size_t k = 0; k < svc->out_floats[o]; k++) {
            mn = v[k] < mn ? v[k] : mn;
            mx = v[k] > mx ? v[k] : mx;
            sum += v[k];
        }
        s->min = svc->out_floats[o] ? mn : 0;
        s->max = svc->out_floats[o] ? mx : 0;
        s->mean = svc->out_floats[o] ? (float)(sum / (double)svc->out_floats[o]) : 0;
    }
}

static void decode_faces(const vram_service *svc, const vram__worker *w, unsigned i,
                         vram__result *r)
{
    const float *t[4];
    for (int k = 0; k < 4; k++) {
        size_t o = (size_t)svc->bf_index[k];
        t[k] = w->outputs[o] + (size_t)i * svc->out_floats[o];
    }
    const vram_letterbox_map *m = &w->maps[i];
    float to_source[3] = {m->scale, m->offset_x, m->offset_y};
    size_t n = 0;
    vram_blazeface_decode(svc->bf, t[0], t[1], t[2], t[3], to_source, w->bf_scratch, r->faces,
                          VRAM__FACES_MAX, &n);
    r->n_faces = n;
}

/* An NVDEC frame for a snapshot: copied to the host, then to RGB. */
static void snapshot_device(vram__stream *st, const vram_frame *f)
{
    int rc = vram_frame_copy_nv12(f, st->snap_nv12, (size_t)f->width);
    if (!rc)
        rc = vram_nv12_to_rgb(st->snap_nv12,
                              st->snap_nv12 + (size_t)f->width * (size_t)f->height, (size_t)f->width,
                              f->width, f->height, f->matrix, f->full_range, st->snap_rgb,
                              (size_t)f->width * 3u);
    if (rc) /* the snapshot shows black rather than another frame */
        memset(st->snap_rgb, 0, (size_t)f->width * (size_t)f->height * 3u);
}

/* Copy the frame for a snapshot when one is due and the last was written. */
static int take_snapshot(vram_service *svc, vram__stream *st, const vram_frame *f)
{
    if (!st->snap_rgb)
        return 0;
    uint64_t now = vram__now_ns();
    pthread_mutex_lock(&svc->mu);
    int due = !st->snap_busy && now >= st->next_snapshot_ns;
    if (due) {
        st->snap_busy = 1;
        st->next_snapshot_ns = now + (uint64_t)(svc->opts.snapshot_every_s * 1e9);
    }
    pthread_mutex_unlock(&svc->mu);
    if (!due)
        return 0;
    if (f->luma) {
        snapshot_device(st, f);
        return 1;
    }
    size_t row = (size_t)f->width * 3u;
    for (int y = 0; y < f->height; y++)
        memcpy(st->snap_rgb + (size_t)y * row, f->rgb + (size_t)y * f->stride, row);
    return 1;
}

/* NVDEC frames (in device memory) first: swap the batch's records so that
 * frames 0..n-1 are on the device; returns n. */
static unsigned device_first(vram__worker *w, unsigned k)
{
    unsigned n = 0;
    for (unsigned i = 0; i < k; i++) {
        if (!w->frames[i]->luma)
            continue;
        if (i != n) {
            vram_frame *f = w->frames[i];
            vram__stream *st = w->streams[i];
            uint64_t q = w->seq[i];
            w->frames[i] = w->frames[n];
            w->streams[i] = w->streams[n];
            w->seq[i] = w->seq[n];
            w->frames[n] = f;
            w->streams[n] = st;
            w->seq[n] = q;
        }
        n++;
    }
    return n;
}

typedef int (*stream_sync_fn)(void *stream);

static void wait_stream(vram__worker *w)
{
    stream_sync_fn sync = NULL;
    if (vram_cuda_proc("cuStreamSynchronize", 2000, (void **)&sync) == 0 && sync)
        sync(vram_exec_stream(w->exec));
}

static void release_frames(vram__worker *w, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        vram_source_release(w->streams[i]->src, w->frames[i]);
        w->frames[i] = NULL;
    }
}

/* The batch's input: NVDEC frames letterboxed by the kernel straight into
 * the input binding, the others on the CPU into the batch buffer, then
 * uploaded (all of it, or after the device frames' images). */
static int fill_input(vram_service *svc, vram__worker *w, unsigned k, unsigned nd,
                      size_t run_images)
{
    int rc = 0;
    size_t image_bytes = w->image_floats * sizeof(float);
    for (unsigned i = nd; i < k && !rc; i++) {
        vram_frame *f = w->frames[i];
        rc = vram_letterbox_frame(&svc->lb, f->rgb, f->width, f->height, f->stride,
                                  w->input + (size_t)i * w->image_floats, &w->maps[i]);
    }
    if (rc)
        return rc;
    if (!nd)
        return vram_exec_set_input(w->exec, 0, w->input, image_bytes * run_images);
    void *binding = NULL;
    size_t bytes = 0;
    if ((rc = vram_exec_input_binding(w->exec, 0, &binding, &bytes)))
        return rc;
    vram_stream stream = vram_exec_stream(w->exec);
    for (unsigned at = 0; at < nd && !rc; at += VRAM_LETTERBOX_CUDA_MAX) {
        unsigned n = nd - at < VRAM_LETTERBOX_CUDA_MAX ? nd - at : VRAM_LETTERBOX_CUDA_MAX;
        rc = vram_letterbox_frames_cuda(&svc->lb, w->frames + at, n,
                                        (float *)binding + (size_t)at * w->image_floats, stream,
                                        w->maps + at);
    }
    if (!rc && nd < k) {
        htod_async_fn htod = NULL;
        rc = vram_cuda_proc("cuMemcpyHtoDAsync", 3020, (void **)&htod);
        int r = rc ? 0
                   : htod((unsigned long long)(uintptr_t)binding + nd * image_bytes,
                          w->input + (size_t)nd * w->image_floats, (size_t)(k - nd) * image_bytes,
                          stream);
        if (r)
            rc = vram_cuda_fail(r, "worker %u: uploading %u letterboxed frames", w->index, k - nd);
    }
    return rc;
}

static int run_batch(vram_service *svc, vram__worker *w, unsigned k)
{
    int rc = 0;
    if (svc->batch_symbolic && vram_exec_batch(w->exec) != (int64_t)k)
        rc = vram_exec_set_batch(w->exec, (int64_t)k);
    unsigned nd = device_first(w, k);
    for (unsigned i = 0; i < k; i++) {
        vram_frame *f = w->frames[i];
        w->decoded_ns[i] = f->decoded_ns;
        w->index_of[i] = f->index;
        w->pts_of[i] = f->pts_s;
        w->size_of[i][0] = f->width;
        w->size_of[i][1] = f->height;
        w->snap_of[i] = take_snapshot(svc, w->streams[i], f);
    }
    size_t run_images = svc->batch_symbolic ? k : svc->batch;
    if (!rc)
        rc = fill_input(svc, w, k, nd, run_images);
    /* Frames on the host are in the batch now: back to their rings. Those
     * on the device are read by the kernel until the run is done. */
    release_frames(w, nd, k);
    if (!rc)
        rc = vram_exec_run(w->exec); /* returns once the stream ran, kernel included */
    else if (nd)
        wait_stream(w); /* a kernel launched before the failure may still read them */
    release_frames(w, 0, nd);
    for (size_t o = 0; !rc && o < svc->n_outputs; o++)
        rc = vram_exec_read_output(w->exec, o, w->outputs[o],
                                   svc->out_floats[o] * run_images * sizeof(float));
    return rc;
}

/* One frame's result into r (after a good run). */
static void make_result(vram_service *svc, vram__worker *w, unsigned i, vram__result *r)
{
    vram__stream *st = w->streams[i];
    memset(r, 0, offsetof(vram__result, faces));
    r->stream = st;
    r->frame = w->index_of[i];
    r->pts_s = w->pts_of[i];
    r->width = w->size_of[i][0];
    r->height = w->size_of[i][1];
    r->snapshot = w->snap_of[i];
    r->n_outputs = 0;
    if (svc->bf)
        decode_faces(svc, w, i, r);
    else
        summarize(svc, w, i, r);
    r->latency_ms = (double)(vram__now_ns() - w->decoded_ns[i]) / 1e6;
    vram__latency_add(&st->latency, r->latency_ms);
    atomic_fetch_add_explicit(&st->faces, r->n_faces, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->processed, 1, memory_order_relaxed);
}

/* Hand frame i's result on (or, after a failed run, only its turn), when
 * its stream's earlier frames have been. svc->mu held. */
static void hand_on_locked(vram_service *svc, vram__worker *w, unsigned i, int rc)
{
    vram__stream *st = w->streams[i];
    int dropped = 1;
    if (!rc) {
        st->refs++; /* the queued result points here */
        dropped = vram__results_push(svc, &w->results[i]);
        if (dropped) {
            atomic_fetch_add_explicit(&st->output_dropped, 1, memory_order_relaxed);
            st->refs--;
        }
    }
    if (dropped && w->snap_of[i])
        st->snap_busy = 0;
    st->seq_pushed++;
    st->in_flight--;
}

static void finish_batch(vram_service *svc, vram__worker *w, unsigned k, int rc)
{
    for (unsigned i = 0; i < k && !rc; i++)
        make_result(svc, w, i, &w->results[i]);
    /* In each stream's order: a frame whose stream's earlier frames are in
     * another worker's batch waits for them. The oldest frame of every
     * stream is always free to go, so this never waits for ever. */
    unsigned char done[VRAM__BATCH_MAX] = {0};
    unsigned left = k;
    pthread_mutex_lock(&svc->mu);
    while (left) {
        unsigned went = 0;
        for (unsigned i = 0; i < k; i++) {
            if (done[i] || w->streams[i]->seq_pushed != w->seq[i])
                continue;
            hand_on_locked(svc, w, i, rc);
            done[i] = 1;
            went++;
        }
        left -= went;
        if (went)
            pthread_cond_broadcast(&svc->done_cv);
        else
            pthread_cond_wait(&svc->done_cv, &svc->mu);
    }
    pthread_mutex_unlock(&svc->mu);
    if (rc) {
        vram_log(VRAM_LOG_ERROR, "worker %u: a batch of %u frames failed: %s", w->index, k,
                 vram_last_error());
        for (unsigned i = 0; i < k; i++)
            atomic_fetch_add_explicit(&w->streams[i]->failed_frames, 1, memory_order_relaxed);
    }
    /* The driver failing batch after batch is a GPU gone bad (an Xid, a
     * lost device): the service stops its streams rather than spin. */
    if (rc == VRAM_EBACKEND && svc->cuda) {
        if (atomic_fetch_add(&svc->failed_batches, 1) + 1 >= VRAM_SERVICE_FAILED_BATCHES)
            vram_service_fail(svc, vram_last_error());
    } else if (!rc) {
        atomic_store(&svc->failed_batches, 0);
    }
}

static void *worker_main(void *arg)
{
    vram__worker *w = arg;
    vram_service *svc = w->svc;
    if (svc->device)
        vram_device_bind(svc->device);
    for (;;) {
        pthread_mutex_lock(&svc->mu);
        unsigned k;
        while (!(k = vram__ready_take(svc, w, svc->batch)) &&
               !(svc->stopping && vram__ready_idle(svc)))
            pthread_cond_wait(&svc->work_cv, &svc->mu);
        if (k) /* room in the queues it took from */
            pthread_cond_broadcast(&svc->done_cv);
        pthread_mutex_unlock(&svc->mu);
        if (!k)
            break;
        int rc = run_batch(svc, w, k);
        finish_batch(svc, w, k, rc);
        atomic_fetch_add_explicit(&w->batches, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->images, k, memory_order_relaxed);
    }
    pthread_mutex_lock(&svc->mu);
    pthread_cond_broadcast(&svc->work_cv); /* the next worker sees the end too */
    pthread_mutex_unlock(&svc->mu);
    return NULL;
}

int vram__workers_start(vram_service *svc)
{
    svc->workers = vram__calloc(svc->n_workers, sizeof *svc->workers);
    if (!svc->workers)
        return VRAM_EHOSTMEM;
    for (unsigned i = 0; i < svc->n_workers; i++) {
        vram__worker *w = &svc->workers[i];
        w->svc = svc;
        w->index = i;
        int rc = worker_setup(svc, w);
        if (rc)
            return rc;
    }
    for (unsigned i = 0; i < svc->n_workers; i++) {
        vram__worker *w = &svc->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w))
            return vram__fail(VRAM_EHOSTMEM, "cannot start inference worker %u", i);
        w->thread_started = 1;
    }
    return 0;
}

void vram__workers_join(vram_service *svc)
{
    for (unsigned i = 0; svc->workers && i < svc->n_workers; i++)
        if (svc->workers[i].thread_started) {
            pthread_join(svc->workers[i].thread, NULL);
            svc->workers[i].thread_started = 0;
        }
}

void vram__workers_free(vram_service *svc)
{
    for (unsigned i = 0; svc->workers && i < svc->n_workers; i++) {
        vram__worker *w = &svc->workers[i];
        unpin(w);
        vram_pool_free(svc->host_pool, w->input, NULL);
        for (size_t o = 0; o < svc->n_outputs; o++)
            vram_pool_free(svc->host_pool, w->outputs[o], NULL);
        vram_pool_free(svc->host_pool, w->bf_scratch, NULL);
        vram_pool_free(svc->host_pool, w->results, NULL);
        vram_exec_destroy(w->exec);
    }
    free(svc->workers);
    svc->workers = NULL;
}
