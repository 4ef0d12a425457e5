/* tools/replay/replay_baseline.c - the driver's allocators replaying a
 * trace, as the yardstick for vramkit's pool in the same run (replay.h):
 * the device's default memory pool through cuMemAllocAsync/cuMemFreeAsync
 * with the release threshold at its maximum, and cuMemAlloc/cuMemFree. */
#include <stdlib.h>
#include <string.h>

#include "common/tool_util.h"
#include "common/tool_cu.h"
#include "replay.h"
#include "vramkit/config.h"

typedef struct baseline {
    const vram_trace *t;
    vram_replay_baseline which;
    vram_device *dev;
    CUmemoryPool pool;
    CUstream *streams;
    CUdeviceptr *ptrs;
    uint32_t *slot_stream; /* the stream index each live slot was allocated on */
    uint64_t free0;  /* free device memory before the measured pass */
    uint64_t peak_used;
    uint64_t allocs, frees, failed;
    int sample;      /* measured pass: read cuMemGetInfo after each allocation */
} baseline;

static int bl_alloc(baseline *b, uint64_t size, CUstream s, CUdeviceptr *p)
{
    if (b->which == VRAM_BASELINE_CUDA_MALLOC)
        return vram_tool_cu.cuMemAlloc(p, (size_t)size) == CUDA_SUCCESS ? 0 : -1;
    return vram_tool_cu.cuMemAllocAsync(p, (size_t)size, s) == CUDA_SUCCESS ? 0 : -1;
}

static void bl_free(baseline *b, CUdeviceptr p, CUstream s)
{
    if (b->which == VRAM_BASELINE_CUDA_MALLOC)
        vram_tool_cu.cuMemFree(p);
    else
        vram_tool_cu.cuMemFreeAsync(p, s);
}

/* One pass over the events; returns the host ns of the loop. Blocks still
 * live at the end are freed after the clock stops, each on the stream it
 * was allocated on (a free on another stream would tie the streams). */
static uint64_t pass(baseline *b)
{
    const vram_trace *t = b->t;
    uint64_t t0 = tool_now_ns();
    for (size_t i = 0; i < t->n_events; i++) {
        const vram_trace_event *e = &t->events[i];
        CUstream s = b->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            if (bl_alloc(b, e->size, s, &b->ptrs[e->slot])) {
                b->ptrs[e->slot] = 0;
                b->failed += b->sample;
                continue;
            }
            b->slot_stream[e->slot] = e->stream_index;
            if (b->sample) {
                b->allocs++;
                size_t f, tot;
                if (vram_tool_cu.cuMemGetInfo(&f, &tot) == CUDA_SUCCESS && f < b->free0 &&
                    b->free0 - f > b->peak_used)
                    b->peak_used = b->free0 - f;
            }
        } else if (e->action == VRAM_TRACE_FREE && b->ptrs[e->slot]) {
            bl_free(b, b->ptrs[e->slot], s);
            b->ptrs[e->slot] = 0;
            b->frees += b->sample;
        }
    }
    uint64_t ns = tool_now_ns() - t0;
    for (size_t i = 0; i < t->n_slots; i++) {
        if (b->ptrs[i])
            bl_free(b, b->ptrs[i], b->streams[b->slot_stream[i]]);
        b->ptrs[i] = 0;
    }
    return ns;
}

/* Make the pool cold: wait for queued frees, give everything back. */
static int make_cold(baseline *b)
{
    VRAM_CUDA_TRY(vram_tool_cu.cuCtxSynchronize(), "cuCtxSynchronize");
    if (b->pool)
        VRAM_CUDA_TRY(vram_tool_cu.cuMemPoolTrimTo(b->pool, 0), "cuMemPoolTrimTo");
    return 0;
}

static int run_all(baseline *b, unsigned runs, vram_replay_result *r)
{
    int rc = make_cold(b);
    if (rc)
        return rc;
    if (b->pool) {
        cuuint64_t zero = 0;
        VRAM_CUDA_TRY(vram_tool_cu.cuMemPoolSetAttribute(b->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                                                    &zero),
                     "resetting the pool's reserved high-water mark");
    }
    size_t f, tot;
    VRAM_CUDA_TRY(vram_tool_cu.cuMemGetInfo(&f, &tot), "cuMemGetInfo");
    b->free0 = f;
    b->sample = 1;
    pass(b);
    b->sample = 0;
    r->allocs = b->allocs;
    r->frees = b->frees;
    r->failed_allocs = b->failed;
    r->peak_driver_bytes = b->peak_used;
    if (b->pool) {
        cuuint64_t high = 0;
        VRAM_CUDA_TRY(vram_tool_cu.cuMemPoolGetAttribute(b->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                                                    &high),
                     "reading the pool's reserved high-water mark");
        r->peak_reserved_bytes = high;
    } else {
        r->peak_reserved_bytes = b->peak_used;
    }
    uint64_t *cold = tool_calloc(runs, sizeof *cold), *warm = tool_calloc(runs, sizeof *warm);
    if (!cold || !warm) {
        free(cold);
        free(warm);
        return VRAM_EHOSTMEM;
    }
    for (unsigned i = 0; i < runs && !rc; i++) {
        rc = make_cold(b);
        if (!rc)
            cold[i] = pass(b);
    }
    if (!rc) { /* warm: the pool keeps what the previous pass took */
        rc = make_cold(b);
        if (!rc)
            pass(b);
        for (unsigned i = 0; i < runs && !rc; i++) {
            VRAM_CUDA_TRY(vram_tool_cu.cuCtxSynchronize(), "cuCtxSynchronize");
            warm[i] = pass(b);
        }
    }
    double ops = (double)(r->allocs + r->frees);
    if (!rc && ops > 0) {
        r->ns_per_op = tool_median_u64(cold, runs) / ops;
        r->warm_ns_per_op = tool_median_u64(warm, runs) / ops;
    }
    free(cold);
    free(warm);
    return rc ? rc : make_cold(b);
}

int vram_replay_baseline_run(const vram_trace *t, vram_replay_baseline which, unsigned runs,
                             vram_replay_result *r)
{
    if (!t || !r || (which != VRAM_BASELINE_CUDA_MALLOC && which != VRAM_BASELINE_CUDA_MALLOC_ASYNC))
        return vram_set_error(VRAM_EINVAL, "vram_replay_baseline_run: bad arguments");
    memset(r, 0, sizeof *r);
    r->events = t->n_events;
    r->peak_live_bytes = t->peak_live_bytes;
    if (!runs)
        runs = 5;
    baseline b = {.t = t, .which = which};
    int device = (int)vram_config_get()->device;
    int rc = vram_tool_cu_load();
    if (!rc)
        rc = vram_device_open(device, NULL, &b.dev);
    if (!rc)
        rc = vram_device_bind(b.dev);
    if (rc) {
        vram_device_close(b.dev);
        return rc;
    }
    b.streams = tool_calloc(t->n_streams ? t->n_streams : 1, sizeof *b.streams);
    b.ptrs = tool_calloc(t->n_slots ? t->n_slots : 1, sizeof *b.ptrs);
    b.slot_stream = tool_calloc(t->n_slots ? t->n_slots : 1, sizeof *b.slot_stream);
    size_t acquired = 0;
    rc = b.streams && b.ptrs && b.slot_stream ? 0 : VRAM_EHOSTMEM;
    for (size_t i = 0; !rc && i < t->n_streams; i++) {
        rc = vram_device_stream_acquire(b.dev, VRAM_PRIORITY_NORMAL, (vram_stream *)&b.streams[i]);
        acquired += !rc;
    }
    cuuint64_t old_threshold = 0, max = UINT64_MAX;
    if (!rc && which == VRAM_BASELINE_CUDA_MALLOC_ASYNC) {
        CUdevice handle;
        CUresult cr = vram_tool_cu.cuDeviceGet(&handle, device);
        if (cr == CUDA_SUCCESS)
            cr = vram_tool_cu.cuDeviceGetDefaultMemPool(&b.pool, handle);
        if (cr == CUDA_SUCCESS)
            cr = vram_tool_cu.cuMemPoolGetAttribute(b.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                                &old_threshold);
        if (cr == CUDA_SUCCESS)
            cr = vram_tool_cu.cuMemPoolSetAttribute(b.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max);
        if (cr != CUDA_SUCCESS)
            rc = vram_cuda_fail(cr, "setting up the device's default memory pool");
    }
    if (!rc)
        rc = run_all(&b, runs, r);
    if (b.pool) /* leave the default pool as it was */
        vram_tool_cu.cuMemPoolSetAttribute(b.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &old_threshold);
    if (r->peak_live_bytes) {
        r->reserved_ratio = (double)r->peak_reserved_bytes / (double)r->peak_live_bytes;
        r->driver_ratio = (double)r->peak_driver_bytes / (double)r->peak_live_bytes;
    }
    for (size_t i = 0; i < acquired; i++)
        vram_device_stream_release(b.dev, b.streams[i]);
    free(b.streams);
    free(b.ptrs);
    free(b.slot_stream);
    vram_device_close(b.dev);
    return rc;
}
