/* bench/density_baseline.c - bench_density's baseline: the design of a
 * common multi-camera program, measured the same way as vramkit's service.
 * It is a baseline, not part of the library.
 *
 * One thread per stream, and each thread has everything of its own:
 *   - a CUDA context made with cuCtxCreate (the driver's default limits),
 *     which holds its decoder, its frame buffers and its preprocessing;
 *   - an NVDEC decoder in that context (vram_source with decode nvdec and
 *     cuda_context = the thread's context), paced and looping;
 *   - for every frame: cuMemAlloc of a copy of the NV12 picture, cuMemcpy2D
 *     of both planes from the mapped frame (then the frame goes back to the
 *     decoder), cuMemAlloc of the model input, the letterbox kernel
 *     (vram_letterbox_frames_cuda) from the copy into it, cuMemcpyDtoH of
 *     the input to the host, cuMemFree of both;
 *   - its own engine (vram_engine, executor cuda, batch 1) on its own pool
 *     (the "cuda" backend: cuMemAlloc segments) and its own execution
 *     context: vram_exec_set_input, vram_exec_run, vram_exec_read_output of
 *     every output, and BlazeFace's outputs decoded into faces as the
 *     service decodes them.
 * The inference runs on the device's primary context (the thread switches
 * to it with vram_device_bind, and back to its own with cuCtxSetCurrent),
 * because the engine's memory comes from pools there (vram_device_open's
 * context); the thread's own context holds its decoder, frame buffers and
 * preprocessing. The source's decoder memory is charged to an owner of the
 * thread's device pool; nothing else of the pool is used for it.
 *
 * A thread reads its frames one at a time: it has no queue, so it drops
 * nothing, and a thread that falls behind shows as fewer frames a second.
 * Latency is from the frame's decoding (vram_frame.decoded_ns) to its
 * outputs read and decoded. A thread that fails keeps its sentence and
 * stops; the harness sees it as a failed stream. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "density.h"
#include "vramkit/cuda_table.h"

#define BL_CUDA(X)                                                                            \
    X(cuDeviceGet, 2000) X(cuCtxCreate, 12050) X(cuCtxDestroy, 4000)                          \
    X(cuCtxSetCurrent, 4000) X(cuMemAlloc, 3020) X(cuMemFree, 3020)                           \
    X(cuMemcpy2DAsync, 3020) X(cuMemcpyDtoH, 3020) X(cuStreamSynchronize, 2000)

typedef struct bl_cuda {
    BL_CUDA(VRAM_CUDA_TABLE_MEMBER)
} bl_cuda;
static bl_cuda cu;
int bl_cuda_load(void);
VRAM_CUDA_TABLE_LOADER(bl_cuda_load, &cu, BL_CUDA)

#define BL_MAX_OUTPUTS 8
#define BL_MAX_FACES 32
#define BL_START_TIMEOUT_S 120.0 /* for a new thread's first frame */

enum { BL_STARTING = 0, BL_RUNNING = 1, BL_DEAD = 2, BL_DONE = 3 };

typedef struct bl_design bl_design;

typedef struct bl_thread {
    bl_design *b;
    unsigned index;
    pthread_t thread;
    int joinable;
    atomic_int stop;
    atomic_int state;
    atomic_uint_fast64_t frames_in, processed;
    _Atomic uint64_t latency[DENSITY_HIST_BUCKETS];
    pthread_mutex_t lock;
    vram_source *src;         /* under lock: for vram_source_interrupt */
    char error[320];          /* written before state turns BL_DEAD */
} bl_thread;

struct bl_design {
    const density_opts *o;
    vram_device *dev;
    CUdevice cudev;
    unsigned n;
    bl_thread **t;            /* DENSITY_MAX_STREAMS slots */
};

/* What one thread holds. */
typedef struct bl_work {
    bl_thread *t;
    vram_backend *be;
    vram_pool *pool;
    vram_owner owner;
    vram_engine *e;
    vram_exec *x;
    vram_blazeface *bf;
    void *scratch;
    int bf_index[4];          /* scores16, regs16, scores32, regs32 */
    vram_letterbox lb;
    size_t in_bytes;
    float *host_in;
    size_t n_out, out_bytes[BL_MAX_OUTPUTS];
    float *host_out[BL_MAX_OUTPUTS];
    CUcontext ctx;
    vram_source *src;
    vram_frame *f;
    CUdeviceptr copy, in;
    uint64_t faces;
} bl_work;

static size_t desc_elems(const vram_tensor_desc *d)
{
    size_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= d->dims[i] > 0 ? (size_t)d->dims[i] : 1;
    return n;
}

static int is_dims(const vram_tensor_desc *d, int64_t a, int64_t b)
{
    return d->rank == 3 && d->dims[1] == a && d->dims[2] == b;
}

/* The engine, its execution context at batch 1, the host buffers and, for
 * BlazeFace, the face decoder: all on the primary context. */
static int setup_engine(bl_work *w)
{
    const density_opts *o = w->t->b->o;
    vram_backend_opts bo;
    vram_backend_opts_init(&bo);
    bo.device = w->t->b->dev;
    int rc = vram_backend_create("cuda", &bo, &w->be);
    if (rc)
        return rc;
    char name[48];
    snprintf(name, sizeof name, "baseline-%u", w->t->index);
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.name = name;
    po.backend = w->be;
    po.policy = VRAM_POLICY_SEGMENTS;
    po.configured_listeners = 0;
    if ((rc = vram_pool_create(&po, &w->pool)))
        return rc;
    if ((rc = vram_owner_create(w->pool, "stream", 0, &w->owner)))
        return rc;
    vram_engine_opts eo;
    vram_engine_opts_init(&eo);
    eo.executor = "cuda";
    eo.pool = w->pool;
    eo.batch = 1;
    eo.graphs = 0;
    if ((rc = vram_engine_load(o->model, &eo, &w->e)))
        return rc;
    if ((rc = vram_exec_create(w->e, &w->x)))
        return rc;
    if (vram_engine_input_count(w->e) != 1)
        return vram_set_error(VRAM_EINVAL, "the baseline runs models of one input; %s has %zu",
                              o->model, vram_engine_input_count(w->e));
    vram_tensor_desc in;
    if ((rc = vram_exec_input_desc(w->x, 0, &in)))
        return rc;
    if (in.dtype != VRAM_DTYPE_FLOAT || in.rank != 4)
        return vram_set_error(VRAM_EINVAL, "the model's input is not a float image [N, ...]");
    int nchw = in.dims[1] == 3 && in.dims[3] != 3;
    w->lb.width = (int)(nchw ? in.dims[3] : in.dims[2]);
    w->lb.height = (int)(nchw ? in.dims[2] : in.dims[1]);
    w->lb.layout = nchw ? VRAM_LAYOUT_NCHW : VRAM_LAYOUT_NHWC;
    w->in_bytes = desc_elems(&in) * sizeof(float);
    if (!(w->host_in = malloc(w->in_bytes)))
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    w->n_out = vram_engine_output_count(w->e);
    if (w->n_out > BL_MAX_OUTPUTS)
        return vram_set_error(VRAM_EINVAL, "the baseline reads at most %d outputs; %s has %zu",
                              BL_MAX_OUTPUTS, o->model, w->n_out);
    vram_tensor_desc out[BL_MAX_OUTPUTS];
    int s16 = -1, r16 = -1, s32 = -1, r32 = -1;
    for (size_t i = 0; i < w->n_out; i++) {
        if ((rc = vram_exec_output_desc(w->x, i, &out[i])))
            return rc;
        size_t es = vram_dtype_size(out[i].dtype);
        w->out_bytes[i] = desc_elems(&out[i]) * (es ? es : 1);
        if (!(w->host_out[i] = malloc(w->out_bytes[i])))
            return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
        if (out[i].dtype != VRAM_DTYPE_FLOAT)
            continue;
        if (is_dims(&out[i], 512, 1))
            s16 = (int)i;
        else if (is_dims(&out[i], 512, 16))
            r16 = (int)i;
        else if (is_dims(&out[i], 384, 1))
            s32 = (int)i;
        else if (is_dims(&out[i], 384, 16))
            r32 = (int)i;
    }
    /* BlazeFace: as the service recognizes it, letterboxed and decoded the same way. */
    int blazeface = w->n_out == 4 && s16 >= 0 && r16 >= 0 && s32 >= 0 && r32 >= 0 && !nchw &&
                    w->lb.width == w->lb.height && (w->lb.width == 128 || w->lb.width == 256);
    for (int c = 0; c < 3; c++) {
        w->lb.scale[c] = blazeface ? 2.0f : 1.0f;
        w->lb.bias[c] = blazeface ? -1.0f : 0.0f;
    }
    w->lb.pad = blazeface ? -1.0f : 0.0f;
    if (blazeface) {
        vram_blazeface_opts bfo;
        vram_blazeface_opts_init(&bfo);
        bfo.input_size = w->lb.width;
        if ((rc = vram_blazeface_create(&bfo, &w->bf)))
            return rc;
        if (!(w->scratch = malloc(vram_blazeface_scratch_bytes(w->bf) + 1)))
            return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
        w->bf_index[0] = s16;
        w->bf_index[1] = r16;
        w->bf_index[2] = s32;
        w->bf_index[3] = r32;
    }
    return 0;
}

/* The thread's own context, and its decoder in it. */
static int setup_source(bl_work *w)
{
    bl_thread *t = w->t;
    const density_opts *o = t->b->o;
    CUresult r = cu.cuCtxCreate(&w->ctx, NULL, 0, t->b->cudev);
    if (r != CUDA_SUCCESS) {
        w->ctx = NULL;
        return vram_cuda_fail((int)r, "cuCtxCreate for stream %u", t->index);
    }
    vram_source_opts so;
    vram_source_opts_init(&so);
    so.url = o->clip;
    so.pool = w->pool;
    so.owner = w->owner;
    so.realtime = 1;
    so.loop = 1;
    so.decode = VRAM_DECODE_NVDEC;
    so.device = t->b->dev;
    so.cuda_context = w->ctx;
    so.extra_surfaces = o->extra_surfaces;
    int rc = vram_source_open(&so, &w->src);
    if (rc)
        return rc;
    pthread_mutex_lock(&t->lock);
    t->src = w->src;
    int stopping = atomic_load(&t->stop);
    pthread_mutex_unlock(&t->lock);
    if (stopping)
        vram_source_interrupt(w->src);
    vram_source_info info;
    if ((rc = vram_source_info_get(w->src, &info)))
        return rc;
    if (!info.device_frames)
        return vram_set_error(VRAM_ENOSYS, "%s was not decoded on NVDEC (%s)", o->clip,
                              info.fallback[0] ? info.fallback : "frames in host memory");
    return 0;
}

static int cu_free(CUdeviceptr *p)
{
    CUresult r = *p ? cu.cuMemFree(*p) : CUDA_SUCCESS;
    *p = 0;
    return r == CUDA_SUCCESS ? 0 : vram_cuda_fail((int)r, "cuMemFree");
}

/* One frame, from the decoder to its faces. The frame is released here. */
static int one_frame(bl_work *w)
{
    vram_frame *f = w->f;
    uint64_t decoded_ns = f->decoded_ns;
    size_t pitch = f->pitch, rows = (size_t)f->height, crows = (size_t)(f->height + 1) / 2;
    size_t copy_bytes = pitch * (rows + crows);
    CUresult r = cu.cuMemAlloc(&w->copy, copy_bytes);
    if (r != CUDA_SUCCESS) {
        w->copy = 0;
        return vram_cuda_fail((int)r, "cuMemAlloc of %zu bytes (frame copy)", copy_bytes);
    }
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcPitch = c.dstPitch = pitch;
    c.WidthInBytes = (size_t)f->width;
    c.srcDevice = (CUdeviceptr)f->luma;
    c.dstDevice = w->copy;
    c.Height = rows;
    if ((r = cu.cuMemcpy2DAsync(&c, NULL)) != CUDA_SUCCESS)
        return vram_cuda_fail((int)r, "cuMemcpy2DAsync (luma)");
    c.srcDevice = (CUdeviceptr)f->chroma;
    c.dstDevice = w->copy + pitch * rows;
    c.WidthInBytes = (size_t)((f->width + 1) / 2) * 2;
    c.Height = crows;
    if ((r = cu.cuMemcpy2DAsync(&c, NULL)) != CUDA_SUCCESS)
        return vram_cuda_fail((int)r, "cuMemcpy2DAsync (chroma)");
    if ((r = cu.cuStreamSynchronize(NULL)) != CUDA_SUCCESS)
        return vram_cuda_fail((int)r, "cuStreamSynchronize after the frame copy");
    vram_frame copy = *f;
    copy.luma = (uint64_t)w->copy;
    copy.chroma = (uint64_t)(w->copy + pitch * rows);
    vram_source_release(w->src, f);
    w->f = NULL;

    if ((r = cu.cuMemAlloc(&w->in, w->in_bytes)) != CUDA_SUCCESS) {
        w->in = 0;
        return vram_cuda_fail((int)r, "cuMemAlloc of %zu bytes (model input)", w->in_bytes);
    }
    vram_frame *const frames[1] = {&copy};
    vram_letterbox_map map;
    int rc = vram_letterbox_frames_cuda(&w->lb, frames, 1, (void *)(uintptr_t)w->in, NULL, &map);
    if (rc)
        return rc;
    if ((r = cu.cuMemcpyDtoH(w->host_in, w->in, w->in_bytes)) != CUDA_SUCCESS)
        return vram_cuda_fail((int)r, "cuMemcpyDtoH of the model input");
    if ((rc = cu_free(&w->copy)) || (rc = cu_free(&w->in)))
        return rc;

    /* Inference on the primary context, where the engine's memory is. */
    if ((rc = vram_device_bind(w->t->b->dev)) ||
        (rc = vram_exec_set_input(w->x, 0, w->host_in, w->in_bytes)) ||
        (rc = vram_exec_run(w->x)))
        return rc;
    for (size_t i = 0; i < w->n_out; i++)
        if ((rc = vram_exec_read_output(w->x, i, w->host_out[i], w->out_bytes[i])))
            return rc;
    if (w->bf) {
        float to_source[3] = {map.scale, map.offset_x, map.offset_y};
        vram_face faces[BL_MAX_FACES];
        size_t n = 0;
        if ((rc = vram_blazeface_decode(w->bf, w->host_out[w->bf_index[0]],
                                        w->host_out[w->bf_index[1]], w->host_out[w->bf_index[2]],
                                        w->host_out[w->bf_index[3]], to_source, w->scratch, faces,
                                        BL_MAX_FACES, &n)))
            return rc;
        w->faces += n;
    }
    if ((r = cu.cuCtxSetCurrent(w->ctx)) != CUDA_SUCCESS)
        return vram_cuda_fail((int)r, "cuCtxSetCurrent (the thread's own context)");
    uint64_t now = density_now_ns();
    double ms = now > decoded_ns ? (double)(now - decoded_ns) / 1e6 : 0;
    atomic_fetch_add_explicit(&w->t->latency[density_hist_bucket(ms)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->t->processed, 1, memory_order_relaxed);
    return 0;
}

/* Give back everything, the thread's context last of what is in it. */
static void teardown(bl_work *w)
{
    bl_thread *t = w->t;
    if (w->ctx)
        cu.cuCtxSetCurrent(w->ctx);
    if (w->f)
        vram_source_release(w->src, w->f);
    w->f = NULL;
    pthread_mutex_lock(&t->lock);
    t->src = NULL;
    pthread_mutex_unlock(&t->lock);
    int rc = vram_source_close(w->src);
    if (rc)
        fprintf(stderr, "bench_density: baseline stream %u: closing its source: %s\n", t->index,
                vram_last_error());
    if (w->ctx) {
        cu_free(&w->copy);
        cu_free(&w->in);
        cu.cuCtxDestroy(w->ctx);
    }
    vram_exec_destroy(w->x);
    if ((rc = vram_engine_destroy(w->e)))
        fprintf(stderr, "bench_density: baseline stream %u: its engine: %s\n", t->index,
                vram_last_error());
    if ((rc = vram_pool_destroy(w->pool)))
        fprintf(stderr, "bench_density: baseline stream %u: its pool: %s\n", t->index,
                vram_last_error());
    vram_backend_destroy(w->be);
    vram_blazeface_destroy(w->bf);
    free(w->scratch);
    free(w->host_in);
    for (size_t i = 0; i < BL_MAX_OUTPUTS; i++)
        free(w->host_out[i]);
}

static void *bl_main(void *p)
{
    bl_work w;
    memset(&w, 0, sizeof w);
    w.t = p;
    bl_thread *t = w.t;
    int rc = setup_engine(&w);
    if (!rc)
        rc = setup_source(&w);
    if (!rc)
        atomic_store(&t->state, BL_RUNNING);
    while (!rc && !atomic_load_explicit(&t->stop, memory_order_relaxed)) {
        CUresult r = cu.cuCtxSetCurrent(w.ctx);
        if (r != CUDA_SUCCESS) {
            rc = vram_cuda_fail((int)r, "cuCtxSetCurrent (the thread's own context)");
            break;
        }
        rc = vram_source_next(w.src, &w.f);
        if (rc == 1) { /* the end: only asked for by stopping */
            rc = atomic_load(&t->stop) ? 0 : vram_set_error(VRAM_EIO, "the looping clip ended");
            w.f = NULL;
            break;
        }
        if (rc)
            break;
        atomic_fetch_add_explicit(&t->frames_in, 1, memory_order_relaxed);
        rc = one_frame(&w);
    }
    if (rc)
        snprintf(t->error, sizeof t->error, "%s (%s)", vram_last_error(), vram_err_name(rc));
    teardown(&w);
    atomic_store(&t->state, rc ? BL_DEAD : BL_DONE);
    return NULL;
}

static void thread_stop(bl_thread *t)
{
    atomic_store(&t->stop, 1);
    pthread_mutex_lock(&t->lock);
    if (t->src)
        vram_source_interrupt(t->src);
    pthread_mutex_unlock(&t->lock);
}

static void thread_free(bl_thread *t)
{
    if (!t)
        return;
    if (t->joinable)
        pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static int bl_resize(void *self, unsigned n, unsigned *have)
{
    bl_design *b = self;
    int rc = 0;
    /* Threads that died in an earlier step go; new ones take their place. */
    unsigned alive = 0;
    for (unsigned i = 0; i < b->n; i++) {
        int state = atomic_load(&b->t[i]->state);
        if (state == BL_DEAD || state == BL_DONE)
            thread_free(b->t[i]);
        else
            b->t[alive++] = b->t[i];
    }
    for (unsigned i = alive; i < b->n; i++)
        b->t[i] = NULL;
    b->n = alive;
    /* Fewer: stop the last ones, all at once, then wait for them. */
    if (n < b->n) {
        for (unsigned i = n; i < b->n; i++)
            thread_stop(b->t[i]);
        for (unsigned i = n; i < b->n; i++) {
            thread_free(b->t[i]);
            b->t[i] = NULL;
        }
        b->n = n;
    }
    unsigned first = b->n;
    for (unsigned i = first; i < n; i++) {
        bl_thread *t = calloc(1, sizeof *t);
        if (!t) {
            rc = vram_set_error(VRAM_EHOSTMEM, "out of host memory");
            break;
        }
        t->b = b;
        t->index = i;
        pthread_mutex_init(&t->lock, NULL);
        if (pthread_create(&t->thread, NULL, bl_main, t)) {
            pthread_mutex_destroy(&t->lock);
            free(t);
            rc = vram_set_error(VRAM_EHOSTMEM, "cannot start the thread of stream %u", i);
            break;
        }
        t->joinable = 1;
        b->t[b->n++] = t;
    }
    /* Wait until each new thread has processed a frame, or died. */
    uint64_t deadline = density_now_ns() + (uint64_t)(BL_START_TIMEOUT_S * 1e9);
    for (unsigned i = first; i < b->n; i++) {
        bl_thread *t = b->t[i];
        while (atomic_load(&t->state) != BL_DEAD && atomic_load(&t->state) != BL_DONE &&
               atomic_load(&t->processed) == 0 && density_now_ns() < deadline &&
               !density_interrupted)
            density_sleep(0.02);
    }
    /* Keep the ones that run, in order; say why the first other did not. */
    unsigned kept = first;
    char why[400] = "";
    for (unsigned i = first; i < b->n; i++) {
        bl_thread *t = b->t[i];
        int state = atomic_load(&t->state);
        if (state == BL_RUNNING && atomic_load(&t->processed) > 0) {
            b->t[kept++] = t;
            continue;
        }
        if (!why[0]) {
            if (state == BL_DEAD || state == BL_DONE)
                snprintf(why, sizeof why, "stream %u: %s", i, t->error);
            else if (density_interrupted)
                snprintf(why, sizeof why, "interrupted while stream %u started", i);
            else
                snprintf(why, sizeof why, "stream %u had no frame after %.0f s", i,
                         BL_START_TIMEOUT_S);
        }
        thread_stop(t);
        thread_free(t);
    }
    for (unsigned i = kept; i < b->n; i++)
        b->t[i] = NULL;
    b->n = kept;
    if (!rc && why[0])
        rc = vram_set_error(VRAM_EBACKEND, "%s", why);
    *have = b->n;
    return rc;
}

static int bl_sample(void *self, density_stream *out, unsigned n)
{
    bl_design *b = self;
    for (unsigned i = 0; i < n; i++) {
        density_stream *d = &out[i];
        memset(d, 0, sizeof *d);
        if (i >= b->n) {
            d->failed = 1;
            snprintf(d->error, sizeof d->error, "not running");
            continue;
        }
        bl_thread *t = b->t[i];
        int state = atomic_load(&t->state);
        d->frames_in = atomic_load_explicit(&t->frames_in, memory_order_relaxed);
        d->processed = atomic_load_explicit(&t->processed, memory_order_relaxed);
        for (unsigned k = 0; k < DENSITY_HIST_BUCKETS; k++)
            d->latency[k] = atomic_load_explicit(&t->latency[k], memory_order_relaxed);
        d->nvdec = 1;
        d->svc_p50_ms = d->svc_p99_ms = -1;
        if (state == BL_DEAD || state == BL_DONE) {
            d->failed = 1;
            snprintf(d->error, sizeof d->error, "%s", state == BL_DEAD ? t->error : "stopped");
        }
    }
    return 0;
}

static void bl_describe(void *self, char *buf, size_t cap)
{
    bl_design *b = self;
    snprintf(buf, cap,
             "a thread per stream, each with its own CUDA context (cuCtxCreate, the driver's "
             "default limits) holding its NVDEC decoder (extra surfaces %u), cuMemAlloc and "
             "cuMemFree of a copy of each frame and of its model input, the letterbox kernel "
             "and a copy of the input to the host; and its own engine (cuda executor, batch "
             "1, a pool of cuMemAlloc segments) and execution context, run on the primary "
             "context",
             b->o->extra_surfaces);
}

static void bl_close(void *self)
{
    bl_design *b = self;
    if (!b)
        return;
    unsigned have;
    bl_resize(b, 0, &have);
    free(b->t);
    free(b);
}

int density_baseline_open(const density_opts *o, vram_device *dev, density_design *out)
{
    memset(out, 0, sizeof *out);
    int rc = bl_cuda_load();
    if (rc)
        return rc;
    bl_design *b = calloc(1, sizeof *b);
    if (!b || !(b->t = calloc(DENSITY_MAX_STREAMS, sizeof *b->t))) {
        free(b);
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    }
    b->o = o;
    b->dev = dev;
    CUresult r = cu.cuDeviceGet(&b->cudev, o->device);
    if (r != CUDA_SUCCESS) {
        bl_close(b);
        return vram_cuda_fail((int)r, "cuDeviceGet(%d)", o->device);
    }
    *out = (density_design){.name = "baseline",
                            .resize = bl_resize,
                            .sample = bl_sample,
                            .describe = bl_describe,
                            .close = bl_close,
                            .self = b,
                            .is_baseline = 1};
    return 0;
}
