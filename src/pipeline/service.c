/* src/pipeline/service.c - the service's life: its options, making it (the
 * pools, the engine loaded once for the largest batch, the model read as a
 * BlazeFace detector or as any image model, the fixed need checked against
 * the budget, the workers and the output thread), waiting for its streams,
 * draining and stopping it, and freeing everything in the reverse order of
 * its making. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "service_internal.h"
#include "vramkit/backend.h"
#include "vramkit/stats.h"

int vram_service_opts_init(vram_service_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_service_opts_init: opts is NULL");
    vram_engine_opts eo;
    int rc = vram_engine_opts_init(&eo);
    *o = (vram_service_opts){.size = sizeof *o, .executor = eo.executor, .workers = 1,
                             .batch = 8, .queue_frames = 2, .output_queue = 1024,
                             .decoder_threads = 1, .snapshot_every_s = 5.0,
                             .graphs = eo.graphs, .gpu = -1};
    return rc;
}

static char *dup_or_null(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = 1;
    return d;
}

static int make_pools(vram_service *svc)
{
    vram_backend_opts bo;
    vram_backend_opts_init(&bo);
    /* The budget is kept by admission (the fixed need, then each stream's),
     * not by the backend: a capacity would refuse the model's load before
     * the fixed need could be told. */
    bo.capacity = 64ull << 30;
    int rc = vram_backend_create("host", &bo, &svc->host_backend);
    char host_name[32], dev_name[32];
    int gpu = svc->opts.gpu;
    snprintf(host_name, sizeof host_name, gpu >= 0 ? "gpu%d-host" : "service-host", gpu);
    snprintf(dev_name, sizeof dev_name, gpu >= 0 ? "gpu%d-device" : "service-device", gpu);
    vram_pool_opts po;
    if (!rc) {
        vram_pool_opts_init(&po);
        po.name = host_name;
        po.gpu = gpu;
        po.backend = svc->host_backend;
        rc = vram_pool_create(&po, &svc->host_pool);
    }
    if (!rc)
        rc = vram_owner_create(svc->host_pool, "service", 0, &svc->host_owner);
    if (rc || !svc->cuda)
        return rc;
    vram_backend_opts_init(&bo);
    if (gpu >= 0 && (rc = vram_device_open(gpu, NULL, &svc->own_device)))
        return vram__fail_prefix(rc, "GPU %d: ", gpu);
    bo.device = svc->own_device;
    if ((rc = vram_backend_create("vmm", &bo, &svc->dev_backend)))
        return vram__fail_prefix(rc, "the device pool: ");
    vram_pool_opts_init(&po);
    po.name = dev_name;
    po.gpu = gpu;
    po.backend = svc->dev_backend;
    po.policy = VRAM_POLICY_VMM;
    if (!rc)
        rc = vram_pool_create(&po, &svc->dev_pool);
    if (!rc)
        rc = vram_owner_create(svc->dev_pool, "service", 0, &svc->dev_owner);
    svc->device = vram_backend_device(svc->dev_backend);
    return rc;
}

static int is_dims(const vram_tensor_desc *d, int64_t a, int64_t b)
{
    return d->rank == 3 && d->dims[1] == a && d->dims[2] == b;
}

/* BlazeFace: one [N, S, S, 3] input (S 128 or 256) and the four outputs
 * named by their shapes. */
static void detect_blazeface(vram_service *svc, const vram_tensor_desc *in)
{
    int s16 = -1, r16 = -1, s32 = -1, r32 = -1;
    for (size_t o = 0; o < svc->n_outputs; o++) {
        const vram_tensor_desc *d = &svc->out_desc[o];
        if (is_dims(d, 512, 1))
            s16 = (int)o;
        else if (is_dims(d, 512, 16))
            r16 = (int)o;
        else if (is_dims(d, 384, 1))
            s32 = (int)o;
        else if (is_dims(d, 384, 16))
            r32 = (int)o;
    }
    int size_ok = in->rank == 4 && in->dims[3] == 3 && in->dims[1] == in->dims[2] &&
                  (in->dims[1] == 128 || in->dims[1] == 256);
    if (svc->n_outputs != 4 || !size_ok || s16 < 0 || r16 < 0 || s32 < 0 || r32 < 0)
        return;
    svc->blazeface = 1;
    svc->bf_index[0] = s16;
    svc->bf_index[1] = r16;
    svc->bf_index[2] = s32;
    svc->bf_index[3] = r32;
}

/* The input's layout and size, and how frames are normalized for it:
 * BlazeFace takes R, G, B in [-1, 1] with black bars; any other model gets
 * [0, 1]. */
static int read_input(vram_service *svc)
{
    if (vram_engine_input_count(svc->engine) != 1)
        return vram__fail(VRAM_EINVAL, "model %s has %zu inputs; the service feeds models of "
                                       "one image input",
                          svc->model, vram_engine_input_count(svc->engine));
    vram_tensor_desc in;
    vram_engine_input(svc->engine, 0, &in);
    if (in.dtype != VRAM_DTYPE_FLOAT || in.rank != 4 || (in.dims[1] != 3 && in.dims[3] != 3))
        return vram__fail(VRAM_EINVAL, "model %s: input %s is not a float image of 3 channels "
                                       "([N, 3, H, W] or [N, H, W, 3])",
                          svc->model, in.name);
    svc->n_outputs = vram_engine_output_count(svc->engine);
    if (svc->n_outputs > VRAM__OUTPUTS_MAX)
        return vram__fail(VRAM_EINVAL, "model %s has %zu outputs; the service reads at most %u",
                          svc->model, svc->n_outputs, VRAM__OUTPUTS_MAX);
    for (size_t o = 0; o < svc->n_outputs; o++) {
        vram_engine_output(svc->engine, o, &svc->out_desc[o]);
        const vram_tensor_desc *d = &svc->out_desc[o];
        if (d->dtype != VRAM_DTYPE_FLOAT)
            return vram__fail(VRAM_EINVAL, "model %s: output %s is %s; the service reads float "
                                           "outputs",
                              svc->model, d->name, vram_dtype_name(d->dtype));
        size_t n = 1;
        for (int k = 1; k < d->rank; k++)
            n *= (size_t)d->dims[k];
        svc->out_floats[o] = n;
    }
    int nhwc = in.dims[3] == 3;
    svc->layout = nhwc ? VRAM_LAYOUT_NHWC : VRAM_LAYOUT_NCHW;
    svc->in_h = (int)(nhwc ? in.dims[1] : in.dims[2]);
    svc->in_w = (int)(nhwc ? in.dims[2] : in.dims[3]);
    detect_blazeface(svc, &in);
    vram_letterbox lb = {.width = svc->in_w, .height = svc->in_h, .layout = svc->layout};
    for (int c = 0; c < 3; c++) {
        lb.scale[c] = svc->blazeface ? 2.0f : 1.0f;
        lb.bias[c] = svc->blazeface ? -1.0f : 0.0f;
    }
    lb.pad = svc->blazeface ? -1.0f : 0.0f;
    svc->lb = lb;
    return 0;
}

static int load_model(vram_service *svc)
{
    vram_engine_opts eo;
    vram_engine_opts_init(&eo);
    eo.executor = svc->executor;
    eo.batch = svc->opts.batch;
    eo.pool = svc->cuda ? svc->dev_pool : svc->host_pool;
    eo.owner = svc->cuda ? svc->dev_owner : svc->host_owner;
    eo.graphs = svc->opts.graphs;
    int rc = vram_engine_load(svc->model, &eo, &svc->engine);
    if (rc)
        return vram__fail_prefix(rc, "model %s: ", svc->model);
    vram_engine_info info;
    vram_engine_info_get(svc->engine, &info);
    svc->batch_symbolic = info.batch_symbolic;
    svc->batch = (unsigned)info.batch;
    if (svc->batch > VRAM__BATCH_MAX)
        return vram__fail(VRAM_EINVAL, "model %s runs at batch %u; the service batches at "
                                       "most %u frames",
                          svc->model, svc->batch, VRAM__BATCH_MAX);
    vram_engine_memory_get(svc->engine, &svc->mem);
    if ((rc = read_input(svc)))
        return rc;
    if (svc->blazeface) {
        vram_blazeface_opts bo;
        vram_blazeface_opts_init(&bo);
        bo.input_size = svc->in_w;
        bo.score_threshold = svc->opts.score_threshold;
        if ((rc = vram_blazeface_create(&bo, &svc->bf)))
            return rc;
    }
    return 0;
}

/* The fixed need: weights once and, per worker, its execution context and
 * its batch buffers; refused when it alone passes the budget. */
static int fixed_need(vram_service *svc)
{
    size_t image = (size_t)svc->in_w * (size_t)svc->in_h * 3u * sizeof(float);
    size_t outs = 0;
    for (size_t o = 0; o < svc->n_outputs; o++)
        outs += svc->out_floats[o] * sizeof(float);
    svc->io_share_bytes = image + outs;
    svc->batch_io_bytes = (uint64_t)svc->batch * (image + outs + sizeof(vram__result)) +
                          (svc->bf ? vram_blazeface_scratch_bytes(svc->bf) : 0);
    svc->fixed_bytes = svc->mem.weights_bytes +
                       (uint64_t)svc->n_workers * (svc->mem.exec_bytes + svc->batch_io_bytes) +
                       (uint64_t)svc->opts.output_queue * sizeof(vram__result);
    if (svc->opts.budget && svc->fixed_bytes > svc->opts.budget) {
        char f[32], b[32], w[32], x[32];
        vram__fmt_bytes(f, sizeof f, svc->fixed_bytes);
        vram__fmt_bytes(b, sizeof b, svc->opts.budget);
        vram__fmt_bytes(w, sizeof w, svc->mem.weights_bytes);
        vram__fmt_bytes(x, sizeof x, svc->mem.exec_bytes + svc->batch_io_bytes);
        return vram__fail(VRAM_EBUDGET, "the service's fixed need of %s (weights %s, %u "
                                        "workers x %s) is more than the budget of %s",
                          f, w, svc->n_workers, x, b);
    }
    return 0;
}

static int check_opts(const vram_service_opts *o)
{
    if (!o->model || !*o->model)
        return vram__fail(VRAM_EINVAL, "service: a model is needed");
    if (o->workers > 64)
        return vram__fail(VRAM_EINVAL, "service: %u workers; at most 64", o->workers);
    if (o->gpu < -1 || o->gpu > 1023)
        return vram__fail(VRAM_EINVAL, "service: GPU %d; a device index 0..1023, or -1", o->gpu);
    if (o->batch > VRAM__BATCH_MAX)
        return vram__fail(VRAM_EINVAL, "service: batch %u; at most %u", o->batch,
                          VRAM__BATCH_MAX);
    if (o->stream_in_flight > 64)
        return vram__fail(VRAM_EINVAL, "service: %u frames of a stream in flight; at most 64",
                          o->stream_in_flight);
    if (o->queue_frames > 1024 || o->output_queue > (1u << 20) || o->ring_frames > 1024)
        return vram__fail(VRAM_EINVAL, "service: queues of %u ready frames, %u results, rings "
                                       "of %u frames: at most 1024, 1048576, 1024",
                          o->queue_frames, o->output_queue, o->ring_frames);
    if ((unsigned)o->decode > VRAM_DECODE_AUTO || o->extra_surfaces > 32)
        return vram__fail(VRAM_EINVAL, "service: decode %d (cpu, nvdec or auto) or %u extra "
                                       "surfaces (at most 32) out of range",
                          (int)o->decode, o->extra_surfaces);
    if (o->snapshot_every_s < 0 || o->score_threshold < 0 || o->score_threshold >= 1)
        return vram__fail(VRAM_EINVAL, "service: snapshot interval %g s or score threshold "
                                       "%g out of range",
                          o->snapshot_every_s, (double)o->score_threshold);
    return 0;
}

int vram_service_create(const vram_service_opts *opts, vram_service **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_service_create: out is NULL");
    *out = NULL;
    vram_service_opts o;
    vram_service_opts_init(&o);
    int rc = vram__opts_take(&o, opts, sizeof o, "vram_service_opts");
    if (!rc)
        rc = check_opts(&o);
    if (rc)
        return rc;
    o.workers = o.workers ? o.workers : 1;
    o.batch = o.batch ? o.batch : 8;
    o.queue_frames = o.queue_frames ? o.queue_frames : 2;
    o.output_queue = o.output_queue ? o.output_queue : 1024;
    o.snapshot_every_s = o.snapshot_every_s > 0 ? o.snapshot_every_s : 5.0;
    vram_service *svc = vram__calloc(1, sizeof *svc);
    if (!svc)
        return VRAM_EHOSTMEM;
    int failed = 0;
    svc->model = dup_or_null(o.model, &failed);
    svc->executor = dup_or_null(o.executor ? o.executor : "cpu", &failed);
    svc->jsonl_path = dup_or_null(o.jsonl_path, &failed);
    svc->snapshots_dir = dup_or_null(o.snapshots_dir, &failed);
    o.model = svc->model;
    o.executor = svc->executor;
    o.jsonl_path = svc->jsonl_path;
    o.snapshots_dir = svc->snapshots_dir;
    svc->opts = o;
    svc->n_workers = o.workers;
    svc->queue_frames = o.queue_frames;
    /* A stream's frames: those waiting, those in workers' batches being
     * letterboxed, one being decoded. */
    o.stream_in_flight = o.stream_in_flight ? o.stream_in_flight : 1;
    svc->opts.stream_in_flight = o.stream_in_flight;
    svc->ring_frames = o.queue_frames + o.stream_in_flight + 1;
    if (o.ring_frames > svc->ring_frames)
        svc->ring_frames = o.ring_frames;
    svc->started_ns = vram__now_ns();
    pthread_mutex_init(&svc->mu, NULL);
    pthread_cond_init(&svc->work_cv, NULL);
    pthread_cond_init(&svc->done_cv, NULL);
    pthread_mutex_init(&svc->out_mu, NULL);
    pthread_cond_init(&svc->out_cv, NULL);
    svc->cuda = !strcmp(svc->executor, "cuda");
    if (failed)
        rc = vram__fail(VRAM_EHOSTMEM, "service: out of host memory copying its options");
    else if (!svc->cuda && strcmp(svc->executor, "cpu"))
        rc = vram__fail(VRAM_EINVAL, "service: unknown executor \"%s\" (cpu or cuda)",
                        svc->executor);
    else if (!svc->cuda && o.decode == VRAM_DECODE_NVDEC)
        rc = vram__fail(VRAM_EINVAL, "service: decoding with NVDEC needs the cuda executor "
                                     "(frames stay in device memory for it); this one is %s",
                        svc->executor);
    if (!rc && svc->snapshots_dir && mkdir(svc->snapshots_dir, 0777) && errno != EEXIST)
        rc = vram__fail(VRAM_EIO, "cannot make the snapshot folder %s: %s", svc->snapshots_dir,
                        strerror(errno));
    if (!rc)
        rc = make_pools(svc);
    if (!rc)
        rc = load_model(svc);
    if (!rc)
        rc = fixed_need(svc);
    if (!rc)
        rc = vram__results_start(svc);
    if (!rc)
        rc = vram__workers_start(svc);
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram_service_destroy(svc);
        return vram__error_restore(&e, rc);
    }
    *out = svc;
    return 0;
}

int vram_service_info_get(const vram_service *svc, vram_service_info *out)
{
    if (!svc || !out)
        return vram__fail(VRAM_EINVAL, "vram_service_info_get: NULL argument");
    *out = (vram_service_info){
        .model = svc->model,
        .executor = svc->executor,
        .workers = svc->n_workers,
        .batch = svc->batch,
        .detector_blazeface = svc->blazeface,
        .input_width = svc->in_w,
        .input_height = svc->in_h,
        .weights_bytes = svc->mem.weights_bytes,
        .context_bytes = svc->mem.exec_bytes,
        .workspace_bytes = svc->mem.workspace_bytes,
        .batch_io_bytes = svc->batch_io_bytes,
        .fixed_bytes = svc->fixed_bytes,
        .budget = svc->opts.budget,
    };
    return 0;
}

vram_pool *vram_service_host_pool(const vram_service *svc)
{
    return svc ? svc->host_pool : NULL;
}

vram_pool *vram_service_device_pool(const vram_service *svc)
{
    return svc ? svc->dev_pool : NULL;
}

static int all_done_locked(const vram_service *svc)
{
    for (size_t i = 0; i < svc->n_streams; i++) {
        const vram__stream *st = svc->streams[i];
        if (st->admitting || !st->reader_done || st->ready_count || st->in_flight || st->refs)
            return 0;
    }
    return 1;
}

int vram_service_wait(vram_service *svc, double timeout_s)
{
    if (!svc)
        return vram__fail(VRAM_EINVAL, "vram_service_wait: NULL service");
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_s >= 0) {
        double s = (double)until.tv_sec + (double)until.tv_nsec / 1e9 + timeout_s;
        until.tv_sec = (time_t)s;
        until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    }
    pthread_mutex_lock(&svc->mu);
    int rc = 0;
    while (!all_done_locked(svc)) {
        if (timeout_s < 0) {
            pthread_cond_wait(&svc->done_cv, &svc->mu);
        } else if (pthread_cond_timedwait(&svc->done_cv, &svc->mu, &until) == ETIMEDOUT) {
            rc = all_done_locked(svc) ? 0 : 1;
            break;
        }
    }
    pthread_mutex_unlock(&svc->mu);
    return rc;
}

int vram_service_stop(vram_service *svc)
{
    if (!svc)
        return 0;
    pthread_mutex_lock(&svc->mu);
    if (svc->stopped) {
        pthread_mutex_unlock(&svc->mu);
        return svc->out_error ? vram__fail(svc->out_error, "%s", svc->out_error_msg) : 0;
    }
    svc->stopped = 1;
    pthread_mutex_unlock(&svc->mu);
    vram__service_unserve(svc);
    /* Sources first: no new frame is read; the frames already waiting are
     * still processed. */
    pthread_mutex_lock(&svc->mu);
    size_t n = svc->n_streams;
    for (size_t i = 0; i < n; i++)
        if (svc->streams[i]->src && !svc->streams[i]->admitting)
            vram_source_interrupt(svc->streams[i]->src);
    pthread_mutex_unlock(&svc->mu);
    vram_service_wait(svc, -1);
    pthread_mutex_lock(&svc->mu);
    svc->stopping = 1;
    pthread_cond_broadcast(&svc->work_cv);
    pthread_cond_broadcast(&svc->done_cv);
    pthread_mutex_unlock(&svc->mu);
    vram__workers_join(svc);
    int rc = vram__results_stop(svc);
    vram__saved_error e;
    vram__error_save(&e);
    for (size_t i = 0; i < svc->n_streams; i++)
        vram__stream_release(svc, svc->streams[i]);
    return rc ? vram__error_restore(&e, rc) : 0;
}

int vram_service_destroy(vram_service *svc)
{
    if (!svc)
        return 0;
    int rc = vram_service_stop(svc);
    vram__saved_error e;
    vram__error_save(&e);
    for (size_t i = 0; i < svc->n_streams; i++)
        vram__stream_free(svc->streams[i]);
    svc->n_streams = 0;
    vram__workers_free(svc);
    vram__results_free(svc);
    vram_blazeface_destroy(svc->bf);
    vram_engine_destroy(svc->engine);
    vram_pool_destroy(svc->dev_pool);
    vram_backend_destroy(svc->dev_backend);
    vram_pool_destroy(svc->host_pool);
    vram_backend_destroy(svc->host_backend);
    vram_device_close(svc->own_device);
    pthread_cond_destroy(&svc->out_cv);
    pthread_mutex_destroy(&svc->out_mu);
    pthread_cond_destroy(&svc->done_cv);
    pthread_cond_destroy(&svc->work_cv);
    pthread_mutex_destroy(&svc->mu);
    free(svc->model);
    free(svc->executor);
    free(svc->jsonl_path);
    free(svc->snapshots_dir);
    free(svc);
    return rc ? vram__error_restore(&e, rc) : 0;
}

int vram_service_fail(vram_service *svc, const char *why)
{
    if (!svc)
        return vram__fail(VRAM_EINVAL, "vram_service_fail: NULL service");
    pthread_mutex_lock(&svc->mu);
    if (!svc->failed) {
        svc->failed = 1;
        if (svc->opts.gpu >= 0)
            snprintf(svc->failed_why, sizeof svc->failed_why, "GPU %d failed: %s", svc->opts.gpu,
                     why && *why ? why : "no reason given");
        else
            snprintf(svc->failed_why, sizeof svc->failed_why, "the GPU failed: %s",
                     why && *why ? why : "no reason given");
        for (size_t i = 0; i < svc->n_streams; i++) {
            vram__stream *st = svc->streams[i];
            if (st->admitting || st->reader_done)
                continue;
            st->state = VRAM_STREAM_FAILED;
            snprintf(st->error, sizeof st->error, "%s", svc->failed_why);
            st->stopping = 1;
            if (st->src)
                vram_source_interrupt(st->src);
        }
        pthread_cond_broadcast(&svc->work_cv);
        pthread_cond_broadcast(&svc->done_cv);
        vram_log(VRAM_LOG_ERROR, "service: %s; its streams stop", svc->failed_why);
    }
    pthread_mutex_unlock(&svc->mu);
    return 0;
}

int vram_service_health(vram_service *svc, char *why, size_t cap)
{
    if (!svc)
        return vram__fail(VRAM_EINVAL, "vram_service_health: NULL service");
    pthread_mutex_lock(&svc->mu);
    int failed = svc->failed;
    if (why && cap)
        snprintf(why, cap, "%s", failed ? svc->failed_why : "");
    pthread_mutex_unlock(&svc->mu);
    return failed ? VRAM_EBACKEND : 0;
}

int vram__service_failed(const vram_service *svc)
{
    vram_service *m = (vram_service *)svc; /* the lock only */
    pthread_mutex_lock(&m->mu);
    int failed = m->failed;
    pthread_mutex_unlock(&m->mu);
    return failed;
}
