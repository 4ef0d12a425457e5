/* tests/preload/fake_cuda_ctx.c - contexts of the stand-in driver: the
 * primary context (retained and released, a reference count, its flags),
 * contexts of their own (cuCtxCreate in its four ABIs, cuCtxDestroy), each
 * thread's stack of current contexts, and limits.
 *
 * A context costs device memory while it lives: FAKE_CUDA_CTX_BYTES
 * (default 326 MiB) at a stack limit of 256 B, plus 264 KiB for each byte
 * of CU_LIMIT_STACK_SIZE above that (the slope measured on an H200: 524 MiB
 * at 1 KiB, 1,316 MiB at 4 KiB). The stand-in starts contexts at 256 B;
 * the real driver's default is 1 KiB. The primary context costs it from
 * its first retain to its last release (or a reset). When a context dies,
 * what was made in it dies too: its allocations (not pools' blocks, which
 * are the device's), page-locked host memory, streams, events and arrays. */
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_internal.h"

#define FC_STACK_DEPTH 64
#define FC_STACK_BASE 256u /* the stack limit a context starts at */
#define FC_BYTES_PER_STACK_BYTE (264ull * 1024)

static _Thread_local struct {
    struct CUctx_st *s[FC_STACK_DEPTH];
    int n;
} tls;

void fc_ctx_forget_thread(void) { tls.n = 0; }

int fc_ctx_alive_locked(const struct CUctx_st *ctx)
{
    if (!ctx)
        return 0;
    if (ctx == &fc_g.primary)
        return fc_g.primary_refs > 0;
    return fc_obj_find_locked(ctx, FC_T_CTX) != NULL;
}

struct CUctx_st *fc_current_locked(void)
{
    struct CUctx_st *c = tls.n ? tls.s[tls.n - 1] : NULL;
    return fc_ctx_alive_locked(c) ? c : NULL;
}

CUresult fc_need_ctx_locked(struct CUctx_st **ctx)
{
    CUresult r = fc_ready_locked();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = fc_current_locked();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx)
        *ctx = c;
    return CUDA_SUCCESS;
}

static uint64_t cost_of(const struct CUctx_st *c)
{
    uint64_t stack = c->limits[CU_LIMIT_STACK_SIZE];
    uint64_t extra = stack > FC_STACK_BASE ? (stack - FC_STACK_BASE) * FC_BYTES_PER_STACK_BYTE : 0;
    uint64_t less = stack < FC_STACK_BASE ? (FC_STACK_BASE - stack) * FC_BYTES_PER_STACK_BYTE : 0;
    uint64_t base = fc_g.ctx_base > less ? fc_g.ctx_base - less : 0;
    return base + extra;
}

static void default_limits(struct CUctx_st *c)
{
    memset(c->limits, 0, sizeof c->limits);
    c->limits[CU_LIMIT_STACK_SIZE] = FC_STACK_BASE;
    c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1u << 20;
    c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8u << 20;
    c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
    c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
    c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
}

/* ---- contexts of their own ---- */

static CUresult create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && tls.n == FC_STACK_DEPTH)
        r = CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = NULL;
    if (r == CUDA_SUCCESS) {
        c = calloc(1, sizeof *c);
        r = c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        c->hdr.tag = FC_T_CTX;
        c->hdr.kind = FAKE_CUDA_KIND_CONTEXT;
        c->flags = flags;
        default_limits(c);
        uint64_t cost = cost_of(c);
        r = fc_charge_locked(FAKE_CUDA_KIND_CONTEXT, cost);
        if (r == CUDA_SUCCESS) {
            c->hdr.bytes = cost;
            r = fc_obj_add_locked(c);
            if (r != CUDA_SUCCESS)
                fc_uncharge_locked(FAKE_CUDA_KIND_CONTEXT, cost);
        }
    }
    if (r == CUDA_SUCCESS) {
        fc_g.contexts++;
        tls.s[tls.n++] = c; /* made current, pushed */
        *pctx = c;
    } else {
        free(c);
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FC_ENTER(cuCtxCreate);
    return create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FC_ENTER(cuCtxCreate_v2);
    return create(pctx, flags, dev);
}

/* Execution affinity is accepted and has no effect. */
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev)
{
    FC_ENTER(cuCtxCreate_v3);
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return create(pctx, flags, dev);
}

/* Affinity and CIG parameters are accepted and have no effect. */
CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
    FC_ENTER(cuCtxCreate_v4);
    (void)ctxCreateParams;
    return create(pctx, flags, dev);
}

static void forget_in_thread(const struct CUctx_st *c)
{
    int k = 0;
    for (int i = 0; i < tls.n; i++)
        if (tls.s[i] != c)
            tls.s[k++] = tls.s[i];
    tls.n = k;
}

static CUresult destroy(CUcontext ctx)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    struct CUctx_st *c = ctx;
    if (r == CUDA_SUCCESS && (!c || c == &fc_g.primary || !fc_obj_find_locked(c, FC_T_CTX)))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        fc_ctx_teardown_locked(c);
        forget_in_thread(c);
        fc_g.contexts--;
        fc_obj_free_locked(c); /* gives back its footprint */
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    FC_ENTER(cuCtxDestroy);
    return destroy(ctx);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    FC_ENTER(cuCtxDestroy_v2);
    return destroy(ctx);
}

/* ---- the current context ---- */

static CUresult push(CUcontext ctx)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS && !fc_ctx_alive_locked(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && tls.n == FC_STACK_DEPTH)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        tls.s[tls.n++] = ctx;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    FC_ENTER(cuCtxPushCurrent);
    return push(ctx);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    FC_ENTER(cuCtxPushCurrent_v2);
    return push(ctx);
}

static CUresult pop(CUcontext *pctx)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS && tls.n == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        struct CUctx_st *c = tls.s[--tls.n];
        if (pctx)
            *pctx = c;
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    FC_ENTER(cuCtxPopCurrent);
    return pop(pctx);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FC_ENTER(cuCtxPopCurrent_v2);
    return pop(pctx);
}

/* As the driver: replaces the top of the stack; NULL pops it. */
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    FC_ENTER(cuCtxSetCurrent);
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS) {
        if (!ctx) {
            if (tls.n)
                tls.n--;
        } else if (!fc_ctx_alive_locked(ctx)) {
            r = CUDA_ERROR_INVALID_CONTEXT;
        } else if (tls.n) {
            tls.s[tls.n - 1] = ctx;
        } else {
            tls.s[tls.n++] = ctx;
        }
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    FC_ENTER(cuCtxGetCurrent);
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *pctx = tls.n ? tls.s[tls.n - 1] : NULL;
    fc_unlock();
    return r;
}

/* The context named, or the current one for NULL. */
static CUresult ctx_or_current_locked(CUcontext ctx, struct CUctx_st **out)
{
    if (!ctx)
        return fc_need_ctx_locked(out);
    CUresult r = fc_ready_locked();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_ctx_alive_locked(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

static CUresult get_device(CUdevice *device, CUcontext ctx)
{
    fc_lock();
    struct CUctx_st *c = NULL;
    CUresult r = ctx_or_current_locked(ctx, &c);
    if (r == CUDA_SUCCESS && !device)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *device = 0;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    FC_ENTER(cuCtxGetDevice);
    return get_device(device, NULL);
}

static CUresult synchronize(CUcontext ctx)
{
    fc_lock();
    struct CUctx_st *c = NULL;
    CUresult r = ctx_or_current_locked(ctx, &c);
    if (r == CUDA_SUCCESS)
        fc_sync_locked();
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    FC_ENTER(cuCtxSynchronize);
    return synchronize(NULL);
}

#if CUDA_VERSION >= 13000
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    FC_ENTER(cuCtxGetDevice_v2);
    return get_device(device, ctx);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    FC_ENTER(cuCtxSynchronize_v2);
    return synchronize(ctx);
}
#endif

/* ---- limits ---- */

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    FC_ENTER(cuCtxSetLimit);
    if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit == CU_LIMIT_SHMEM_SIZE || limit == CU_LIMIT_CIG_ENABLED)
        return CUDA_ERROR_UNSUPPORTED_LIMIT; /* queried only */
    fc_lock();
    struct CUctx_st *c = NULL;
    CUresult r = fc_need_ctx_locked(&c);
    if (r == CUDA_SUCCESS && limit == CU_LIMIT_STACK_SIZE) {
        /* The footprint follows the stack size. */
        size_t old = c->limits[limit];
        c->limits[limit] = value;
        uint64_t cost = cost_of(c);
        if (cost > c->hdr.bytes)
            r = fc_charge_locked(FAKE_CUDA_KIND_CONTEXT, cost - c->hdr.bytes);
        else
            fc_uncharge_locked(FAKE_CUDA_KIND_CONTEXT, c->hdr.bytes - cost);
        if (r == CUDA_SUCCESS)
            c->hdr.bytes = cost;
        else
            c->limits[limit] = old;
    } else if (r == CUDA_SUCCESS) {
        c->limits[limit] = value;
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    FC_ENTER(cuCtxGetLimit);
    if (!pvalue || (int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    struct CUctx_st *c = NULL;
    CUresult r = fc_need_ctx_locked(&c);
    if (r == CUDA_SUCCESS)
        *pvalue = c->limits[limit];
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    FC_ENTER(cuCtxGetStreamPriorityRange);
    fc_lock();
    CUresult r = fc_need_ctx_locked(NULL);
    fc_unlock();
    if (r != CUDA_SUCCESS)
        return r;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* ---- the primary context ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FC_ENTER(cuDevicePrimaryCtxRetain);
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && fc_g.primary_refs == 0) {
        default_limits(&fc_g.primary);
        uint64_t cost = cost_of(&fc_g.primary);
        r = fc_charge_locked(FAKE_CUDA_KIND_CONTEXT, cost);
        if (r == CUDA_SUCCESS) {
            fc_g.primary.hdr.bytes = cost;
            fc_g.contexts++;
        }
    }
    if (r == CUDA_SUCCESS) {
        fc_g.primary_refs++;
        *pctx = &fc_g.primary;
    }
    fc_unlock();
    return r;
}

static void primary_down_locked(void)
{
    fc_ctx_teardown_locked(&fc_g.primary);
    fc_uncharge_locked(FAKE_CUDA_KIND_CONTEXT, fc_g.primary.hdr.bytes);
    fc_g.primary.hdr.bytes = 0;
    fc_g.primary_refs = 0;
    fc_g.contexts--;
}

static CUresult release(CUdevice dev)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && fc_g.primary_refs == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        if (fc_g.primary_refs == 1)
            primary_down_locked();
        else
            fc_g.primary_refs--;
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    FC_ENTER(cuDevicePrimaryCtxRelease);
    return release(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    FC_ENTER(cuDevicePrimaryCtxRelease_v2);
    return release(dev);
}

/* Everything of the primary context goes, whatever its count; the next
 * retain makes it anew. */
static CUresult reset(CUdevice dev)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && fc_g.primary_refs > 0)
        primary_down_locked();
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    FC_ENTER(cuDevicePrimaryCtxReset);
    return reset(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    FC_ENTER(cuDevicePrimaryCtxReset_v2);
    return reset(dev);
}

/* The legacy entry refuses an active context, as before CUDA 11.0. */
static CUresult set_flags(CUdevice dev, unsigned int flags, int refuse_active)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && refuse_active && fc_g.primary_refs > 0)
        r = CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
    if (r == CUDA_SUCCESS)
        fc_g.primary.flags = flags;
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    FC_ENTER(cuDevicePrimaryCtxSetFlags);
    return set_flags(dev, flags, 1);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    FC_ENTER(cuDevicePrimaryCtxSetFlags_v2);
    return set_flags(dev, flags, 0);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FC_ENTER(cuDevicePrimaryCtxGetState);
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(dev);
    if (r == CUDA_SUCCESS && (!flags || !active))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *flags = fc_g.primary.flags;
        *active = fc_g.primary_refs > 0;
    }
    fc_unlock();
    return r;
}
