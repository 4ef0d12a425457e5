/* tools/ctxcost/ctxcost.c - measuring what CUDA contexts cost (see
 * ctxcost.h): a meter of device-wide used memory (NVML, or
 * cuMemGetInfo in a probe context), a crew of worker threads that set
 * something up, hold it while the meter reads, and tear it down, and the
 * three measurements built from them.
 *
 * Every figure is "used while it exists" minus "used just before it was
 * created", both read once the reading has settled, so slow drift elsewhere on
 * the device does not accumulate into later figures. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/tool_util.h"
#include "common/tool_cu.h"
#include "ctxcost.h"
#include "vramkit/device.h"
#include "vramkit/nvml.h"

/* ---- notes ------------------------------------------------------------ */

static void note(vram_ctxcost_result *r, const char *fmt, ...) TOOL_PRINTF(2, 3);
static void note(vram_ctxcost_result *r, const char *fmt, ...)
{
    size_t len = strlen(r->notes);
    if (len + 2 >= sizeof r->notes)
        return;
    if (len)
        r->notes[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes + len, sizeof r->notes - len, fmt, ap);
    va_end(ap);
}

/* ---- the meter -------------------------------------------------------- */

typedef struct meter {
    int nvml;                /* 0: read cuMemGetInfo in `probe` */
    CUcontext probe;
    vram_ctxcost_result *r;
} meter;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int meter_read(meter *m, uint64_t *used)
{
    if (m->nvml)
        return vram_gpu_memory_used(m->r->pci_bus_id, used, NULL);
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxPushCurrent(m->probe), "making the probe context current");
    size_t fr = 0, tot = 0;
    CUresult r = vram_tool_cu.cuMemGetInfo(&fr, &tot);
    CUcontext popped;
    vram_tool_cu.cuCtxPopCurrent(&popped);
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "cuMemGetInfo");
    *used = (uint64_t)(tot - fr);
    return 0;
}

/* Read until three readings 10 ms apart agree, for at most a second (the
 * driver's accounting is immediate in practice; this guards the exception).
 * If it never settles, the last reading is taken and the result says so. */
static int meter_settle(meter *m, const char *when, uint64_t *used)
{
    uint64_t prev = 0, cur = 0;
    int rc = meter_read(m, &prev);
    if (rc)
        return rc;
    for (int i = 0, same = 0; i < 100; i++) {
        sleep_ms(10);
        if ((rc = meter_read(m, &cur)))
            return rc;
        if (cur != prev) {
            same = 0;
            prev = cur;
        } else if (++same == 2) {
            *used = cur;
            return 0;
        }
    }
    *used = cur;
    note(m->r, "used memory had not settled after 1 s %s; the last reading was taken", when);
    return 0;
}

static int64_t delta(uint64_t after, uint64_t before) { return (int64_t)(after - before); }

/* ---- a crew of worker threads ------------------------------------------ */

typedef struct crew crew;

typedef struct worker {
    crew *c;
    unsigned id;
    pthread_t thread;
    int rc, down_rc;              /* set up / tear down */
    char err[256], down_err[256]; /* their vram_last_error(), which is per thread */
    CUcontext ctx;                /* own-context crew */
    vram_stream stream;           /* shared crew */
} worker;

struct crew {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int phase; /* 0: wait, 1: set up and hold, 2: tear down, -1: abort */
    unsigned ready, n;
    worker *w;
    int (*setup)(worker *w);
    int (*teardown)(worker *w);
    CUdevice dev;      /* own-context crew */
    vram_device *vdev; /* shared crew: the device and the buffer its streams write */
    CUdeviceptr buf;
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    crew *c = w->c;
    pthread_mutex_lock(&c->lock);
    while (c->phase == 0)
        pthread_cond_wait(&c->cond, &c->lock);
    int go = c->phase == 1;
    pthread_mutex_unlock(&c->lock);
    if (!go)
        return NULL;
    w->rc = c->setup(w);
    if (w->rc)
        snprintf(w->err, sizeof w->err, "%s", vram_last_error());
    pthread_mutex_lock(&c->lock);
    c->ready++;
    pthread_cond_broadcast(&c->cond);
    while (c->phase == 1)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
    w->down_rc = c->teardown(w);
    if (w->down_rc)
        snprintf(w->down_err, sizeof w->down_err, "%s", vram_last_error());
    return NULL;
}

static void crew_phase(crew *c, int phase)
{
    pthread_mutex_lock(&c->lock);
    c->phase = phase;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Start c->n workers; once every one has set up (or failed to), read used
 * memory into *used (unless one failed), then let them tear down and join
 * them. Returns the first failure: of starting a thread, of a worker, of the
 * meter, of a tear-down. Every worker tears down whatever it set up. */
static int crew_run(crew *c, meter *m, const char *when, uint64_t *used)
{
    c->w = tool_calloc(c->n, sizeof *c->w);
    if (!c->w)
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->phase = 0;
    c->ready = 0;
    unsigned started = 0;
    int rc = 0;
    for (; started < c->n; started++) {
        c->w[started].c = c;
        c->w[started].id = started;
        int e = pthread_create(&c->w[started].thread, NULL, worker_main, &c->w[started]);
        if (e) {
            rc = vram_set_error(VRAM_EHOSTMEM, "cannot start thread %u of %u: %s", started + 1, c->n,
                            strerror(e));
            break;
        }
    }
    if (rc) {
        crew_phase(c, -1); /* the started ones leave without setting anything up */
    } else {
        crew_phase(c, 1);
        pthread_mutex_lock(&c->lock);
        while (c->ready < c->n)
            pthread_cond_wait(&c->cond, &c->lock);
        pthread_mutex_unlock(&c->lock);
        for (unsigned i = 0; i < c->n && !rc; i++)
            if (c->w[i].rc)
                rc = vram_set_error(c->w[i].rc, "thread %u: %s", i + 1, c->w[i].err);
        if (!rc)
            rc = meter_settle(m, when, used);
        crew_phase(c, 2);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(c->w[i].thread, NULL);
    for (unsigned i = 0; i < started && !rc; i++)
        if (c->w[i].down_rc)
            rc = vram_set_error(c->w[i].down_rc, "thread %u: %s", i + 1, c->w[i].down_err);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c->w);
    c->w = NULL;
    return rc;
}

/* ---- contexts of their own ---------------------------------------------- */

/* Create a context (current in this thread from then on) as the driver
 * makes it, and wait for it to be idle. */
static int own_setup(worker *w)
{
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxCreate(&w->ctx, NULL, 0, w->c->dev), "cuCtxCreate");
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    return 0;
}

static int own_teardown(worker *w)
{
    if (!w->ctx)
        return 0;
    CUresult r = vram_tool_cu.cuCtxDestroy(w->ctx);
    w->ctx = NULL;
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "cuCtxDestroy");
    return 0;
}

/* One context on this thread: with `set`, at stack limit `stack`; its
 * effective stack limit and what it took. The thread's current context is
 * what it was before (cuCtxDestroy pops the context it created). */
static int one_context(meter *m, CUdevice dev, int set, uint64_t stack, uint64_t *effective,
                       int64_t *bytes)
{
    uint64_t before = 0, during = 0;
    char when[96];
    if (set)
        snprintf(when, sizeof when, "before creating a context at stack limit %llu B",
                 (unsigned long long)stack);
    else
        snprintf(when, sizeof when, "before creating a context at the default stack limit");
    int rc = meter_settle(m, when, &before);
    if (rc)
        return rc;
    CUcontext ctx;
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxCreate(&ctx, NULL, 0, dev), "cuCtxCreate");
    size_t eff = 0;
    CUresult r = set ? vram_tool_cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, (size_t)stack) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        rc = vram_cuda_fail(r, "setting a context's stack limit to %llu bytes",
                           (unsigned long long)stack);
    if (!rc && (r = vram_tool_cu.cuCtxGetLimit(&eff, CU_LIMIT_STACK_SIZE)) != CUDA_SUCCESS)
        rc = vram_cuda_fail(r, "cuCtxGetLimit");
    if (!rc && (r = vram_tool_cu.cuCtxSynchronize()) != CUDA_SUCCESS)
        rc = vram_cuda_fail(r, "cuCtxSynchronize");
    if (!rc) {
        snprintf(when, sizeof when, "with one context (stack %llu B)", (unsigned long long)eff);
        rc = meter_settle(m, when, &during);
    }
    r = vram_tool_cu.cuCtxDestroy(ctx);
    if (!rc && r != CUDA_SUCCESS)
        rc = vram_cuda_fail(r, "cuCtxDestroy");
    if (rc)
        return rc;
    *effective = eff;
    *bytes = delta(during, before);
    return 0;
}

static int measure_own(meter *m, CUdevice dev, vram_ctxcost_result *r)
{
    uint64_t before = 0, during = 0;
    int rc = meter_settle(m, "before the threads' own contexts", &before);
    if (rc)
        return rc;
    crew c = {.n = r->threads, .setup = own_setup, .teardown = own_teardown, .dev = dev};
    rc = crew_run(&c, m, "with every thread's own context", &during);
    if (rc)
        return rc;
    r->own_total_bytes = delta(during, before);
    r->own_per_context_bytes = r->own_total_bytes / (int64_t)r->threads;
    return 0;
}

/* ---- one shared context --------------------------------------------------- */

/* Bind the shared context, take a stream and make it do work: a 4-byte
 * memset of this worker's word of the crew's buffer. */
static int shared_setup(worker *w)
{
    crew *c = w->c;
    int rc = vram_device_bind(c->vdev);
    if (!rc)
        rc = vram_device_stream_acquire(c->vdev, VRAM_PRIORITY_NORMAL, &w->stream);
    if (rc)
        return rc;
    CUstream s = (CUstream)w->stream;
    VRAM_CUDA_TRY(vram_tool_cu.cuMemsetD32Async(c->buf + 4u * w->id, w->id, 1, s),
                 "cuMemsetD32Async on stream %p", w->stream);
    VRAM_CUDA_TRY(vram_tool_cu.cuStreamSynchronize(s), "cuStreamSynchronize");
    return 0;
}

static int shared_teardown(worker *w)
{
    if (!w->stream)
        return 0;
    int rc = vram_device_stream_release(w->c->vdev, w->stream);
    w->stream = NULL;
    return rc;
}

/* The primary context (at the stack limit of a fresh context) with N
 * streams. The buffer the streams write is workload memory, not context
 * cost: what allocating it took is read apart and left out. */
static int measure_shared(meter *m, CUdevice dev, int index, vram_ctxcost_result *r)
{
    unsigned flags = 0;
    int active = 0;
    VRAM_CUDA_TRY(vram_tool_cu.cuDevicePrimaryCtxGetState(dev, &flags, &active),
                 "cuDevicePrimaryCtxGetState(%d)", index);
    if (active) {
        note(r,
             "the shared context was not measured: this process already holds the primary "
             "context of device %d, so its cost is inside the baseline (run in a fresh process)",
             index);
        return 0;
    }
    uint64_t before = 0, alone = 0, with_buf = 0, during = 0;
    int rc = meter_settle(m, "before the primary context", &before);
    if (rc)
        return rc;
    vram_device *vdev;
    vram_device_opts o = {.stack_limit = (int64_t)r->default_stack};
    if ((rc = vram_device_open(index, &o, &vdev)))
        return rc;
    crew c = {.n = r->threads, .setup = shared_setup, .teardown = shared_teardown, .vdev = vdev};
    rc = vram_device_synchronize(vdev);
    if (!rc)
        rc = meter_settle(m, "with the primary context alone", &alone);
    CUresult cr = CUDA_SUCCESS;
    if (!rc && (cr = vram_tool_cu.cuMemAlloc(&c.buf, 4u * (size_t)r->threads)) != CUDA_SUCCESS)
        rc = vram_cuda_fail(cr, "allocating %u bytes for the streams' work", 4u * r->threads);
    if (!rc)
        rc = meter_settle(m, "after allocating the streams' buffer", &with_buf);
    if (!rc)
        rc = crew_run(&c, m, "with the threads sharing the primary context", &during);
    if (c.buf) {
        int brc = vram_device_bind(vdev);
        cr = brc ? CUDA_SUCCESS : vram_tool_cu.cuMemFree(c.buf);
        if (!rc && (brc || cr != CUDA_SUCCESS))
            rc = brc ? brc : vram_cuda_fail(cr, "cuMemFree");
    }
    int crc = vram_device_close(vdev);
    if (!rc)
        rc = crc;
    if (rc)
        return rc;
    r->shared_measured = 1;
    r->shared_context_bytes = delta(alone, before);
    r->shared_total_bytes = delta(during, before) - delta(with_buf, alone);
    r->per_stream_bytes = (r->shared_total_bytes - r->shared_context_bytes) / (int64_t)r->threads;
    return 0;
}

/* ---- the whole measurement ------------------------------------------------ */

static int check_opts(const vram_ctxcost_opts *o)
{
    if (o->device < 0)
        return vram_set_error(VRAM_EINVAL, "ctxcost: device %d is negative", o->device);
    if (o->threads > VRAM_CTXCOST_MAX_THREADS)
        return vram_set_error(VRAM_EINVAL, "ctxcost: %u threads; at most %u", o->threads,
                          VRAM_CTXCOST_MAX_THREADS);
    if (o->n_stacks > VRAM_CTXCOST_MAX_STACKS)
        return vram_set_error(VRAM_EINVAL, "ctxcost: %u stack limits; at most %u", o->n_stacks,
                          VRAM_CTXCOST_MAX_STACKS);
    return 0;
}

/* Choose where used memory is read: NVML if it knows this GPU, else a probe
 * context for cuMemGetInfo (created before the baseline, so it is in it). */
static int meter_open(meter *m, CUdevice dev, vram_ctxcost_result *r)
{
    uint64_t used;
    if (vram_gpu_memory_used(r->pci_bus_id, &used, NULL) == 0) {
        m->nvml = 1;
        r->source = VRAM_CTXCOST_NVML;
        return 0;
    }
    m->nvml = 0;
    r->source = VRAM_CTXCOST_CUDA;
    note(r, "%s; used memory was read with cuMemGetInfo in a probe context created first, so "
            "each figure is a difference from a baseline that includes that context",
         vram_last_error());
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxCreate(&m->probe, NULL, 0, dev), "creating the probe context");
    CUcontext popped;
    vram_tool_cu.cuCtxPopCurrent(&popped);
    return 0;
}

/* Other processes with a context on the GPU now (before any of ours). */
static void count_others(vram_ctxcost_result *r)
{
    vram_gpu_memory g;
    r->other_processes = -1;
    if (r->source != VRAM_CTXCOST_NVML) {
        note(r, "other processes using the GPU cannot be seen without NVML");
        return;
    }
    if (vram_gpu_memory_read_pci(r->pci_bus_id, &g) || !g.processes_known) {
        note(r, "NVML did not list the processes using the GPU");
        return;
    }
    unsigned self = (unsigned)getpid(), others = g.n_processes_total - g.n_processes;
    for (unsigned i = 0; i < g.n_processes; i++)
        others += g.processes[i].pid != self;
    r->other_processes = (int)others;
    if (others)
        note(r,
             "%u other process(es) had a context on the GPU: whatever they allocated or freed "
             "during the run is in these figures",
             others);
}

static int measure(const vram_ctxcost_opts *o, meter *m, vram_ctxcost_result *r)
{
    CUdevice dev;
    VRAM_CUDA_TRY(vram_tool_cu.cuDeviceGet(&dev, o->device), "cuDeviceGet(%d)", o->device);
    VRAM_CUDA_TRY(vram_tool_cu.cuDeviceGetName(r->name, (int)sizeof r->name, dev), "cuDeviceGetName");
    VRAM_CUDA_TRY(vram_tool_cu.cuDeviceGetPCIBusId(r->pci_bus_id, (int)sizeof r->pci_bus_id, dev),
                 "cuDeviceGetPCIBusId");
    VRAM_CUDA_TRY(vram_tool_cu.cuDriverGetVersion(&r->driver_version), "cuDriverGetVersion");
    size_t total = 0;
    VRAM_CUDA_TRY(vram_tool_cu.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    r->total_bytes = total;

    int rc = meter_open(m, dev, r);
    if (rc)
        return rc;
    count_others(r);
    if ((rc = meter_settle(m, "at the start", &r->baseline_used_bytes)))
        return rc;

    /* One context as the driver makes it; then at each stack limit. */
    if ((rc = one_context(m, dev, 0, 0, &r->default_stack, &r->one_context_bytes)))
        return rc;
    for (unsigned i = 0; i < r->n_stacks; i++) {
        vram_ctxcost_stack *s = &r->stacks[i];
        if ((rc = one_context(m, dev, 1, s->requested, &s->effective, &s->bytes)))
            return rc;
    }
    if ((rc = measure_own(m, dev, r)))
        return rc;
    if ((rc = measure_shared(m, dev, o->device, r)))
        return rc;

    uint64_t end = 0;
    if ((rc = meter_settle(m, "at the end", &end)))
        return rc;
    int64_t drift = delta(end, r->baseline_used_bytes);
    if (drift > (16 << 20) || drift < -(16 << 20))
        note(r, "device used memory ended %+.1f MiB from where it started",
             (double)drift / (1024.0 * 1024.0));
    return 0;
}

int vram_ctxcost_measure(const vram_ctxcost_opts *opts, vram_ctxcost_result *out)
{
    if (!out)
        return vram_set_error(VRAM_EINVAL, "vram_ctxcost_measure: out is NULL");
    memset(out, 0, sizeof *out);
    vram_ctxcost_opts o = {0};
    if (opts)
        o = *opts;
    int rc = check_opts(&o);
    if (rc)
        return rc;
    out->device = o.device;
    out->threads = o.threads ? o.threads : VRAM_CTXCOST_DEFAULT_THREADS;
    if (o.n_stacks) {
        out->n_stacks = o.n_stacks;
        for (unsigned i = 0; i < o.n_stacks; i++)
            out->stacks[i].requested = o.stacks[i];
    } else {
        static const uint64_t defaults[] = VRAM_CTXCOST_DEFAULT_STACKS;
        out->n_stacks = (unsigned)TOOL_ARRAY_LEN(defaults);
        for (unsigned i = 0; i < out->n_stacks; i++)
            out->stacks[i].requested = defaults[i];
    }

    if ((rc = vram_tool_cu_load()))
        return rc;
    int n = 0;
    VRAM_CUDA_TRY(vram_tool_cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
    if (n == 0)
        return vram_set_error(VRAM_ENOSYS, "no CUDA device: the driver sees none");
    if (o.device >= n)
        return vram_set_error(VRAM_EINVAL, "no CUDA device %d: this machine has %d", o.device, n);

    CUcontext saved = NULL;
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxGetCurrent(&saved), "cuCtxGetCurrent");
    meter m = {.r = out};
    rc = measure(&o, &m, out);
    if (m.probe) {
        CUresult r = vram_tool_cu.cuCtxDestroy(m.probe);
        if (!rc && r != CUDA_SUCCESS)
            rc = vram_cuda_fail(r, "destroying the probe context");
    }
    CUresult r = vram_tool_cu.cuCtxSetCurrent(saved);
    if (!rc && r != CUDA_SUCCESS)
        rc = vram_cuda_fail(r, "restoring the thread's current context");
    return rc;
}
