/* tests/preload/fake_cuda_stream.c - streams and events of the stand-in
 * driver. Work is done when it is issued, so a stream is always idle and
 * an event always complete; what remains of them is their validity (a
 * stream belongs to the context it was made in and dies with it; NULL,
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD stand for the current
 * context's), synchronisation as the moment memory pools give back what
 * exceeds their release threshold (cuStreamSynchronize, cuEventSynchronize,
 * cuCtxSynchronize), and capture: fake_cuda_set_capturing(1) makes every
 * stream report CU_STREAM_CAPTURE_STATUS_ACTIVE. */
#include <stdatomic.h>
#include <stdlib.h>

#include "fake_cuda_internal.h"

struct CUstream_st {
    fc_obj hdr;
    unsigned flags;
    int priority;
};

struct CUevent_st {
    fc_obj hdr;
    unsigned flags;
};

static atomic_int capturing;

void fake_cuda_set_capturing(int on) { atomic_store(&capturing, on != 0); }
int fc_capturing(void) { return atomic_load(&capturing); }

CUresult fc_stream_ctx_locked(CUstream s, struct CUctx_st **ctx)
{
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return fc_need_ctx_locked(ctx);
    CUresult r = fc_ready_locked();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUstream_st *st = fc_obj_find_locked(s, FC_T_STREAM);
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (ctx)
        *ctx = st->hdr.ctx;
    return CUDA_SUCCESS;
}

static int is_pool(void *val, void *arg)
{
    (void)arg;
    return ((const fc_obj *)val)->tag == FC_T_POOL;
}

void fc_sync_locked(void)
{
    uint64_t local[64], *keys = local;
    size_t n = fc_map_select(&fc_g.objs, is_pool, NULL, local, 64);
    if (n > 64 && (keys = malloc(n * sizeof *keys)) != NULL)
        n = fc_map_select(&fc_g.objs, is_pool, NULL, keys, n);
    if (!keys) { /* out of host memory: the first pools only */
        keys = local;
        n = 64;
    }
    for (size_t i = 0; i < n; i++) {
        struct CUmemPoolHandle_st *p = fc_map_get(&fc_g.objs, keys[i]);
        fc_pool_trim_locked(p, p->threshold);
    }
    if (keys != local)
        free(keys);
}

/* ---- streams ---- */

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority)
{
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    struct CUctx_st *ctx = NULL;
    CUresult r = fc_need_ctx_locked(&ctx);
    struct CUstream_st *s = NULL;
    if (r == CUDA_SUCCESS) {
        s = calloc(1, sizeof *s);
        r = s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        s->hdr.tag = FC_T_STREAM;
        s->hdr.ctx = ctx;
        s->flags = flags;
        s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
        r = fc_obj_add_locked(s);
    }
    if (r == CUDA_SUCCESS)
        *ph = s;
    else
        free(s);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FC_ENTER(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    FC_ENTER(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream s)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    struct CUstream_st *st = r == CUDA_SUCCESS ? fc_obj_find_locked(s, FC_T_STREAM) : NULL;
    if (r == CUDA_SUCCESS && !st)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (st)
        fc_obj_free_locked(st);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    FC_ENTER(cuStreamDestroy);
    return stream_destroy(hStream);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    FC_ENTER(cuStreamDestroy_v2);
    return stream_destroy(hStream);
}

static CUresult stream_sync(CUstream s)
{
    fc_lock();
    CUresult r = fc_stream_ctx_locked(s, NULL);
    if (r == CUDA_SUCCESS)
        fc_sync_locked();
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    FC_ENTER(cuStreamSynchronize);
    return stream_sync(hStream);
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    FC_ENTER(cuStreamSynchronize_ptsz);
    return stream_sync(hStream);
}

static CUresult stream_valid(CUstream s)
{
    fc_lock();
    CUresult r = fc_stream_ctx_locked(s, NULL);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    FC_ENTER(cuStreamQuery);
    return stream_valid(hStream);
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    FC_ENTER(cuStreamQuery_ptsz);
    return stream_valid(hStream);
}

static CUresult is_capturing(CUstream s, CUstreamCaptureStatus *status)
{
    CUresult r = stream_valid(s);
    if (r == CUDA_SUCCESS && !status)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *status = fc_capturing() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FC_ENTER(cuStreamIsCapturing);
    return is_capturing(hStream, captureStatus);
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FC_ENTER(cuStreamIsCapturing_ptsz);
    return is_capturing(hStream, captureStatus);
}

/* ---- events ---- */

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FC_ENTER(cuEventCreate);
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    struct CUctx_st *ctx = NULL;
    CUresult r = fc_need_ctx_locked(&ctx);
    struct CUevent_st *e = NULL;
    if (r == CUDA_SUCCESS) {
        e = calloc(1, sizeof *e);
        r = e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        e->hdr.tag = FC_T_EVENT;
        e->hdr.ctx = ctx;
        e->flags = Flags;
        r = fc_obj_add_locked(e);
    }
    if (r == CUDA_SUCCESS)
        *phEvent = e;
    else
        free(e);
    fc_unlock();
    return r;
}

static CUresult event_destroy(CUevent ev)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    struct CUevent_st *e = r == CUDA_SUCCESS ? fc_obj_find_locked(ev, FC_T_EVENT) : NULL;
    if (r == CUDA_SUCCESS && !e)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (e)
        fc_obj_free_locked(e);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    FC_ENTER(cuEventDestroy);
    return event_destroy(hEvent);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    FC_ENTER(cuEventDestroy_v2);
    return event_destroy(hEvent);
}

static CUresult event_record(CUevent ev, CUstream s)
{
    fc_lock();
    CUresult r = fc_stream_ctx_locked(s, NULL);
    if (r == CUDA_SUCCESS && !fc_obj_find_locked(ev, FC_T_EVENT))
        r = CUDA_ERROR_INVALID_HANDLE;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    FC_ENTER(cuEventRecord);
    return event_record(hEvent, hStream);
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    FC_ENTER(cuEventRecord_ptsz);
    return event_record(hEvent, hStream);
}

/* Work is done when issued, so a stream waiting for an event has nothing to
 * wait for: what is checked is the same as for a record. */
static CUresult stream_wait(CUstream s, CUevent ev, unsigned flags)
{
    return flags & ~1u ? CUDA_ERROR_INVALID_VALUE : event_record(ev, s);
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FC_ENTER(cuStreamWaitEvent);
    return stream_wait(hStream, hEvent, Flags);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FC_ENTER(cuStreamWaitEvent_ptsz);
    return stream_wait(hStream, hEvent, Flags);
}

static CUresult event_wait(CUevent ev, int sync)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS && !fc_obj_find_locked(ev, FC_T_EVENT))
        r = CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && sync)
        fc_sync_locked();
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    FC_ENTER(cuEventQuery);
    return event_wait(hEvent, 0);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    FC_ENTER(cuEventSynchronize);
    return event_wait(hEvent, 1);
}
