/* src/video/cuda/letterbox_cuda.c - vram_letterbox_frames_cuda: the NV12
 * letterbox kernel (letterbox_nv12.cu, embedded as a fatbin) loaded once
 * into each CUDA context that asks, and launched through the driver API
 * (a table filled through vram_cuda_proc; the library links neither libcuda
 * nor the CUDA runtime).
 *
 * Modules are cached per context for the process: a list that only grows,
 * read without a lock (its nodes are published with release stores and
 * never freed), extended under a mutex by the first call in a context.
 * A context is known by its id (cuCtxGetId, unique for the process, so a
 * context created where a destroyed one was is not mistaken for it), or by
 * its handle on drivers older than CUDA 12.0. After the first call a
 * launch allocates nothing: the frames' parameters travel by value in the
 * kernel's parameter block. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/internal.h"
#include "video/nv12_internal.h"
#include "vramkit/cuda_table.h"

/* The fatbin of letterbox_nv12.cu, generated into the build tree. */
extern const unsigned char vram__lbk_image[];
extern const size_t vram__lbk_image_size;

#define LBK_KERNEL "vram_letterbox_nv12"

#define LBK_CU(X)                                                                             \
    X(cuCtxGetCurrent, 4000) X(cuModuleLoadData, 2000) X(cuModuleGetFunction, 2000)           \
    X(cuLaunchKernel, 4000)
#define LBK_CU_ID(X) X(cuCtxGetId, 12000)

typedef struct lbk_cu {
    LBK_CU(VRAM_CUDA_TABLE_MEMBER)
} lbk_cu;
typedef struct lbk_cu_id {
    LBK_CU_ID(VRAM_CUDA_TABLE_MEMBER)
} lbk_cu_id;

static lbk_cu cu;
static lbk_cu_id cu_id;
static int lbk_cu_load(void);
static int lbk_cu_id_load(void);
VRAM_CUDA_TABLE_LOADER(lbk_cu_load, &cu, LBK_CU)
VRAM_CUDA_TABLE_LOADER(lbk_cu_id_load, &cu_id, LBK_CU_ID)

/* The kernel loaded into one context. */
typedef struct lbk_module {
    struct lbk_module *next;
    CUcontext ctx;
    unsigned long long id;
    int has_id;
    CUmodule mod;
    CUfunction fn;
} lbk_module;

static _Atomic(lbk_module *) modules;
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;

int vram__letterbox_cuda_built(void)
{
    return 1;
}

/* Whether the driver has cuCtxGetId (CUDA 12.0 and later); asked once. */
static int have_ctx_ids(void)
{
    static atomic_int known; /* 0: not asked yet, 1: yes, -1: no */
    int k = atomic_load_explicit(&known, memory_order_acquire);
    if (!k) {
        vram__saved_error saved; /* a driver without it is no error */
        vram__error_save(&saved);
        k = lbk_cu_id_load() == 0 ? 1 : -1;
        vram__error_restore(&saved, 0);
        atomic_store_explicit(&known, k, memory_order_release);
    }
    return k > 0;
}

static lbk_module *find(CUcontext ctx, int has_id, unsigned long long id)
{
    for (lbk_module *m = atomic_load_explicit(&modules, memory_order_acquire); m; m = m->next)
        if (has_id ? m->has_id && m->id == id : !m->has_id && m->ctx == ctx)
            return m;
    return NULL;
}

/* The kernel of the current context, loaded into it on first use. */
static int kernel_of_current(const char *what, CUfunction *fn)
{
    int rc = lbk_cu_load();
    if (rc)
        return rc;
    CUcontext ctx = NULL;
    VRAM_CUDA_TRY(cu.cuCtxGetCurrent(&ctx), "%s: cuCtxGetCurrent", what);
    if (!ctx)
        return vram__fail(VRAM_EINVAL,
                          "%s: no CUDA context is current on this thread (bind the frames' "
                          "context first: vram_device_bind)",
                          what);
    unsigned long long id = 0;
    int has_id = have_ctx_ids() && cu_id.cuCtxGetId(ctx, &id) == CUDA_SUCCESS;

    lbk_module *m = find(ctx, has_id, id);
    if (m) {
        *fn = m->fn;
        return 0;
    }
    pthread_mutex_lock(&modules_lock);
    m = find(ctx, has_id, id);
    if (!m) {
        m = vram__calloc(1, sizeof *m);
        CUresult r = CUDA_SUCCESS;
        if (!m) {
            rc = VRAM_EHOSTMEM;
        } else if ((r = cu.cuModuleLoadData(&m->mod, vram__lbk_image)) != CUDA_SUCCESS) {
            rc = vram_cuda_fail(r, "%s: cuModuleLoadData of the letterbox kernel (%zu bytes)",
                                what, vram__lbk_image_size);
        } else if ((r = cu.cuModuleGetFunction(&m->fn, m->mod, LBK_KERNEL)) != CUDA_SUCCESS) {
            rc = vram_cuda_fail(r, "%s: cuModuleGetFunction(%s)", what, LBK_KERNEL);
            /* The module stays loaded (unloading could fail too); a later
             * call tries again with a new one. */
        }
        if (rc) {
            free(m);
            m = NULL;
        } else {
            m->ctx = ctx;
            m->id = id;
            m->has_id = has_id;
            m->next = atomic_load_explicit(&modules, memory_order_relaxed);
            atomic_store_explicit(&modules, m, memory_order_release);
        }
    }
    pthread_mutex_unlock(&modules_lock);
    if (rc)
        return rc;
    *fn = m->fn;
    return 0;
}

int vram_letterbox_frames_cuda(const vram_letterbox *lb, vram_frame *const *frames, unsigned n,
                               void *dst, vram_stream stream, vram_letterbox_map *maps)
{
    static const char what[] = "vram_letterbox_frames_cuda";
    vram__nv12_lb_p p;
    int rc = vram__nv12_lb_prepare(what, lb, frames, n, dst, &p, maps);
    if (rc)
        return rc;
    CUfunction fn = NULL;
    rc = kernel_of_current(what, &fn);
    if (rc)
        return rc;
    const unsigned gx = ((unsigned)p.width + VRAM__NV12_BLOCK_X - 1) / VRAM__NV12_BLOCK_X;
    const unsigned gy = ((unsigned)p.height + VRAM__NV12_BLOCK_Y - 1) / VRAM__NV12_BLOCK_Y;
    void *args[] = {&p};
    VRAM_CUDA_TRY(cu.cuLaunchKernel(fn, gx, gy, n, VRAM__NV12_BLOCK_X, VRAM__NV12_BLOCK_Y, 1, 0,
                                    (CUstream)stream, args, NULL),
                  "%s: cuLaunchKernel(%s, %ux%ux%u blocks) for a %dx%d input", what,
                  LBK_KERNEL, gx, gy, n, p.width, p.height);
    return 0;
}
