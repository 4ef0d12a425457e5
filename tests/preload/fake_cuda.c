/* tests/preload/fake_cuda.c - the heart of the stand-in CUDA driver
 * (libcuda.so.1 for machines without a GPU, built into BUILD/fakecuda/):
 * the simulated device's state and its ledger, allocation records,
 * handles, what a context takes with it when it dies, the bookkeeping each
 * exported function starts with, fork, and the fake_cuda_ functions of
 * fake_cuda.h.
 *
 * The device: FAKE_CUDA_TOTAL bytes (default 80 GiB). Every kind of
 * fake_cuda.h's fake_cuda_kind but HOST is charged against it; a charge
 * that does not fit fails with CUDA_ERROR_OUT_OF_MEMORY. One mutex guards
 * it all. A fork child starts as a new process would: nothing initialised,
 * no context, nothing allocated (what the parent had stays mapped in the
 * child's memory but is no longer the device's); the real driver refuses
 * CUDA in the child of a process that used it, the stand-in lets a child
 * start again with cuInit so that programs that fork can be tested. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda_internal.h"

fc_state fc_g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- setup and fork ---- */

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

uint64_t fc_env_bytes(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return fallback;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    case 't':
    case 'T': shift = 40; break;
    case '\0': break;
    default: return fallback;
    }
    if (shift && (end[1] != '\0' && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0))
        return fallback;
    return (uint64_t)v << shift;
}

static void init_primary(void)
{
    memset(&fc_g.primary, 0, sizeof fc_g.primary);
    fc_g.primary.hdr.tag = FC_T_CTX;
    fc_g.primary.hdr.kind = FAKE_CUDA_KIND_CONTEXT;
    fc_g.primary.primary = 1;
    fc_g.primary_refs = 0;
}

/* What the parent held, kept reachable in the child (its memory is still
 * mapped there; the child's device no longer counts it). */
typedef struct fc_inherited {
    fc_map dev, host, objs;
    struct CUmemPoolHandle_st *graph_pool;
    struct fc_inherited *next;
} fc_inherited;
static fc_inherited *inherited;
static fc_inherited inherited_slot; /* the first fork's, without allocating */

static void fork_prepare(void) { pthread_mutex_lock(&fc_g.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&fc_g.mu); }

static void fork_child(void)
{
    fc_inherited *keep = inherited ? calloc(1, sizeof *keep) : &inherited_slot;
    if (keep) {
        keep->dev = fc_g.dev;
        keep->host = fc_g.host;
        keep->objs = fc_g.objs;
        keep->graph_pool = fc_g.graph_pool;
        keep->next = inherited;
        inherited = keep;
    }
    memset(&fc_g.dev, 0, sizeof fc_g.dev);
    memset(&fc_g.host, 0, sizeof fc_g.host);
    memset(&fc_g.objs, 0, sizeof fc_g.objs);
    memset(fc_g.bytes, 0, sizeof fc_g.bytes);
    fc_g.contexts = 0;
    fc_g.initialized = 0;
    init_primary();
    fc_g.default_pool = fc_g.current_pool = fc_g.graph_pool = NULL; /* made again by cuInit */
    fc_ctx_forget_thread();
    fc_vmm_after_fork();
    pthread_mutex_unlock(&fc_g.mu);
}

static void setup(void)
{
    fc_g.total = fc_env_bytes("FAKE_CUDA_TOTAL", 80ull << 30);
    fc_g.ctx_base = fc_env_bytes("FAKE_CUDA_CTX_BYTES", 326 * FC_MIB);
    const char *t = getenv("FAKE_CUDA_PROC_TRAMPOLINES");
    fc_g.trampolines = t && *t && strcmp(t, "0") != 0;
    init_primary();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void fc_setup(void) { pthread_once(&setup_once, setup); }
void fc_lock(void) { pthread_mutex_lock(&fc_g.mu); }
void fc_unlock(void) { pthread_mutex_unlock(&fc_g.mu); }

CUresult fc_ready_locked(void)
{
    return fc_g.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fc_check_device(CUdevice dev)
{
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- entries ---- */

static const char *const symbol_names[FC_N_SYMBOLS] = {
#define FC__NAME(base, ver, sym, pt) #sym,
    FC_SYMBOLS(FC__NAME)
#undef FC__NAME
};

static _Atomic unsigned long long calls[FC_N_SYMBOLS];
static _Atomic(const char *) last_call;
static _Atomic(const char *) last_variant;
static _Thread_local const char *thread_last_call;
static _Thread_local const char *thread_last_variant;

const char *fc_symbol_name(enum fc_symbol_id id) { return symbol_names[id]; }

void fc_enter(enum fc_symbol_id id)
{
    fc_setup();
    atomic_fetch_add_explicit(&calls[id], 1, memory_order_relaxed);
    atomic_store_explicit(&last_call, symbol_names[id], memory_order_relaxed);
    thread_last_call = symbol_names[id];
    const char *v = fc_symbol_variant(id);
    if (v) {
        atomic_store_explicit(&last_variant, v, memory_order_relaxed);
        thread_last_variant = v;
    }
}

/* ---- the ledger ---- */

uint64_t fc_used_locked(void)
{
    uint64_t used = 0;
    for (int k = 0; k < FAKE_CUDA_KINDS; k++)
        if (k != FAKE_CUDA_KIND_HOST)
            used += fc_g.bytes[k];
    return used;
}

CUresult fc_charge_locked(fake_cuda_kind kind, uint64_t bytes)
{
    if (kind != FAKE_CUDA_KIND_HOST) {
        uint64_t used = fc_used_locked();
        if (used > fc_g.total || bytes > fc_g.total - used)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fc_g.bytes[kind] += bytes;
    return CUDA_SUCCESS;
}

void fc_uncharge_locked(fake_cuda_kind kind, uint64_t bytes)
{
    fc_g.bytes[kind] = fc_g.bytes[kind] >= bytes ? fc_g.bytes[kind] - bytes : 0;
}

/* ---- allocations ---- */

static size_t page_round(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

CUresult fc_alloc_new_locked(fake_cuda_kind kind, size_t size, uint64_t bytes, int low32,
                             struct CUctx_st *ctx, fc_alloc **out)
{
    CUresult r = fc_charge_locked(kind, bytes);
    if (r != CUDA_SUCCESS)
        return r;
    void *mem;
    if (low32) {
        /* The 32-bit ABI (CUdeviceptr_v1): an address below 2 GiB. */
        mem = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (mem == MAP_FAILED)
            mem = NULL;
        else if ((uintptr_t)mem + size > UINT32_MAX) {
            munmap(mem, page_round(size));
            mem = NULL;
        }
    } else {
        mem = malloc(size);
    }
    fc_alloc *a = mem ? calloc(1, sizeof *a) : NULL;
    fc_map *map = kind == FAKE_CUDA_KIND_HOST ? &fc_g.host : &fc_g.dev;
    if (a) {
        a->addr = (uint64_t)(uintptr_t)mem;
        a->size = size;
        a->bytes = bytes;
        a->kind = kind;
        a->ctx = ctx;
        a->low32 = low32;
    }
    if (!a || fc_map_put(map, a->addr, a) != 0) {
        if (a)
            fc_alloc_release_memory(a);
        else if (mem && low32)
            munmap(mem, page_round(size));
        else
            free(mem);
        free(a);
        fc_uncharge_locked(kind, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = a;
    return CUDA_SUCCESS;
}

void fc_alloc_release_memory(fc_alloc *a)
{
    if (a->low32)
        munmap((void *)(uintptr_t)a->addr, page_round(a->size));
    else
        free((void *)(uintptr_t)a->addr);
}

CUresult fc_dev_free_locked(uint64_t addr)
{
    fc_alloc *a = fc_map_get(&fc_g.dev, addr);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    if (a->pool) {
        fc_pool_give_locked(a);
        return CUDA_SUCCESS;
    }
    fc_map_del(&fc_g.dev, addr);
    fc_uncharge_locked(a->kind, a->bytes);
    fc_alloc_release_memory(a);
    free(a);
    return CUDA_SUCCESS;
}

/* ---- objects ---- */

CUresult fc_obj_add_locked(void *obj)
{
    return fc_map_put(&fc_g.objs, (uint64_t)(uintptr_t)obj, obj) == 0 ? CUDA_SUCCESS
                                                                      : CUDA_ERROR_OUT_OF_MEMORY;
}

void *fc_obj_find_locked(const void *handle, fc_tag tag)
{
    fc_obj *o = fc_map_get(&fc_g.objs, (uint64_t)(uintptr_t)handle);
    return o && o->tag == tag ? o : NULL;
}

void fc_obj_free_locked(void *obj)
{
    fc_obj *o = obj;
    fc_map_del(&fc_g.objs, (uint64_t)(uintptr_t)obj);
    if (o->bytes)
        fc_uncharge_locked(o->kind, o->bytes);
    free(obj);
}

/* ---- a context's death ---- */

static int alloc_of_ctx(void *val, void *arg)
{
    const fc_alloc *a = val;
    return a->ctx == arg && !a->pool;
}

static int obj_of_ctx(void *val, void *arg)
{
    const fc_obj *o = val;
    return o->ctx == arg && o->tag != FC_T_CTX;
}

/* The keys of a map that `keep` selects, in a buffer of the caller's
 * (local when small); NULL with *n = 0 when none or out of memory. */
static uint64_t *select_keys(const fc_map *m, int (*keep)(void *, void *), void *arg,
                             uint64_t *local, size_t cap, size_t *n)
{
    *n = fc_map_select(m, keep, arg, local, cap);
    if (*n <= cap)
        return local;
    uint64_t *all = malloc(*n * sizeof *all);
    if (!all) {
        *n = 0;
        return NULL;
    }
    *n = fc_map_select(m, keep, arg, all, *n);
    return all;
}

void fc_ctx_teardown_locked(struct CUctx_st *ctx)
{
    uint64_t local[64];
    size_t n;
    uint64_t *keys = select_keys(&fc_g.dev, alloc_of_ctx, ctx, local, 64, &n);
    for (size_t i = 0; i < n; i++)
        fc_dev_free_locked(keys[i]);
    if (keys != local)
        free(keys);
    keys = select_keys(&fc_g.host, alloc_of_ctx, ctx, local, 64, &n);
    for (size_t i = 0; i < n; i++) {
        fc_alloc *a = fc_map_del(&fc_g.host, keys[i]);
        fc_uncharge_locked(a->kind, a->bytes);
        fc_alloc_release_memory(a);
        free(a);
    }
    if (keys != local)
        free(keys);
    keys = select_keys(&fc_g.objs, obj_of_ctx, ctx, local, 64, &n);
    for (size_t i = 0; i < n; i++)
        fc_obj_free_locked(fc_map_get(&fc_g.objs, keys[i]));
    if (keys != local)
        free(keys);
}

/* ---- fake_cuda.h ---- */

unsigned long long fake_cuda_bytes(fake_cuda_kind kind)
{
    if ((int)kind < 0 || kind >= FAKE_CUDA_KINDS)
        return 0;
    fc_setup();
    fc_lock();
    uint64_t b = fc_g.bytes[kind];
    fc_unlock();
    return b;
}

unsigned long long fake_cuda_live_bytes(void)
{
    fc_setup();
    fc_lock();
    uint64_t b = fc_used_locked() - fc_g.bytes[FAKE_CUDA_KIND_CONTEXT];
    fc_unlock();
    return b;
}

unsigned long long fake_cuda_used_bytes(void)
{
    fc_setup();
    fc_lock();
    uint64_t b = fc_used_locked();
    fc_unlock();
    return b;
}

unsigned long long fake_cuda_total_bytes(void)
{
    fc_setup();
    return fc_g.total;
}

int fake_cuda_context_count(void)
{
    fc_setup();
    fc_lock();
    int n = fc_g.contexts;
    fc_unlock();
    return n;
}

static const char *or_empty(const char *s) { return s ? s : ""; }

const char *fake_cuda_last_variant(void)
{
    return or_empty(atomic_load_explicit(&last_variant, memory_order_relaxed));
}

const char *fake_cuda_thread_last_variant(void) { return or_empty(thread_last_variant); }

const char *fake_cuda_last_call(void)
{
    return or_empty(atomic_load_explicit(&last_call, memory_order_relaxed));
}

const char *fake_cuda_thread_last_call(void) { return or_empty(thread_last_call); }

unsigned long long fake_cuda_calls(const char *exact_name)
{
    for (int i = 0; exact_name && i < FC_N_SYMBOLS; i++)
        if (!strcmp(symbol_names[i], exact_name))
            return atomic_load_explicit(&calls[i], memory_order_relaxed);
    return 0;
}

int fake_cuda_charge(fake_cuda_kind kind, unsigned long long bytes, int need_context)
{
    if ((int)kind < 0 || kind >= FAKE_CUDA_KINDS)
        return CUDA_ERROR_INVALID_VALUE;
    fc_setup();
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS && need_context && !fc_current_locked())
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS)
        r = fc_charge_locked(kind, bytes);
    fc_unlock();
    return (int)r;
}

void fake_cuda_uncharge(fake_cuda_kind kind, unsigned long long bytes)
{
    if ((int)kind < 0 || kind >= FAKE_CUDA_KINDS)
        return;
    fc_setup();
    fc_lock();
    fc_uncharge_locked(kind, bytes);
    fc_unlock();
}

void fake_cuda_mem_info(unsigned long long *free_bytes, unsigned long long *total_bytes)
{
    fc_setup();
    fc_lock();
    uint64_t used = fc_used_locked();
    if (free_bytes)
        *free_bytes = used < fc_g.total ? fc_g.total - used : 0;
    if (total_bytes)
        *total_bytes = fc_g.total;
    fc_unlock();
}
