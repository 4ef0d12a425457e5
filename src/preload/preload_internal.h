/* src/preload/preload_internal.h - what the parts of libvram_preload.so
 * share: the hooked functions' table (hooks.c lists them, real.c finds the
 * driver's own), the per-thread guard every hook starts with, the ledger of
 * live allocations and contexts (ledger.c), the trace written as the
 * program runs (trace_out.c), the budget of limit mode (budget.c), the pool
 * of pool mode (pool_mode.c) and the report at exit (report.c). The
 * library's settings come from the environment (init.c), which `vramkit
 * trace` fills:
 *   VRAM_PRELOAD_MODE    observe (default), limit or pool
 *   VRAM_PRELOAD_BUDGET  limit: bytes ("24G")
 *   VRAM_PRELOAD_GROUP   limit: a group name shared by processes
 *   VRAM_PRELOAD_TRACE   an RMM-format trace written as it goes (a child of
 *                        fork writes PATH.PID)
 *   VRAM_PRELOAD_REPORT  the report at exit, JSON (text beside it, .txt)
 *   VRAM_PRELOAD_PID     the program's own pid: the files above are its,
 *                        and a process it starts writes FILE.PID
 *   VRAM_MARK            the name of the first stage (vram_mark names the next) */
#ifndef VRAM_PRELOAD_INTERNAL_H
#define VRAM_PRELOAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* What an allocation is, for the counts and the report. */
typedef enum vram__pl_kind {
    VRAM__PL_DEVICE = 0, /* cuMemAlloc */
    VRAM__PL_PITCH,      /* cuMemAllocPitch: pitch x height */
    VRAM__PL_MANAGED,    /* cuMemAllocManaged (its own category) */
    VRAM__PL_ASYNC,      /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    VRAM__PL_VMM,        /* cuMemCreate on the device */
    VRAM__PL_ARRAY,      /* arrays and mipmapped arrays */
    VRAM__PL_DECODER,    /* NVDEC decoders: the measured device memory */
    VRAM__PL_HOST,       /* page-locked host memory (not device memory) */
    VRAM__PL_GRAPH,      /* allocations captured into CUDA graphs (charged to the graph) */
    VRAM__PL_KINDS
} vram__pl_kind;

/* Whether a kind is device memory the budget counts. */
static inline int vram__pl_charged(vram__pl_kind k)
{
    return k != VRAM__PL_HOST && k != VRAM__PL_GRAPH && k != VRAM__PL_MANAGED;
}

const char *vram__pl_kind_name(vram__pl_kind k);

/* The libraries hooks reach. */
enum { VRAM__PL_LIB_CUDA = 0, VRAM__PL_LIB_NVCUVID, VRAM__PL_LIB_NVML, VRAM__PL_LIBS };

typedef struct vram__pl_hook {
    const char *name; /* the exact exported name (cuMemAlloc_v2) */
    int lib;
    void *fn;         /* ours */
} vram__pl_hook;

extern const vram__pl_hook vram__pl_hooks[];
extern const size_t vram__pl_n_hooks;

/* Code that may run before a sanitizer's runtime has started (dlsym):
 * left uninstrumented. */
#define VRAM__PL_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

/* ---- real.c ---- */
/* glibc's dlsym (taken with dlvsym at load). */
void *vram__pl_real_dlsym(void *handle, const char *name);
/* The library's own function for hook i (NULL when the library lacks it);
 * loads the library's table on first use. */
void *vram__pl_real(size_t i);
/* The hook that stands for `fn`, a function of one of the libraries (as
 * cuGetProcAddress or dlsym returned it), or fn itself. */
void *vram__pl_route(void *fn);
/* The hook index of an exact name, or -1. */
long vram__pl_hook_index(const char *name);
/* dlsym found `fn` for hook i: remember it as the library's (for a library
 * opened by the program, such as libnvcuvid). */
void vram__pl_learn(size_t i, void *fn);
/* Whether a return address is inside a driver library, vramkit's core or
 * this library (their dlsym lookups are not the program's: dladdr, so for
 * rare calls only). */
int vram__pl_internal_caller(const void *ra);

/* ---- the guard ---- */
extern _Thread_local int vram__pl_depth;
extern int vram__pl_active; /* set once init.c read the settings */

/* ---- ledger.c ---- */
typedef struct vram__pl_kind_stats {
    uint64_t calls, failures, frees, live_bytes, peak_bytes, live_count;
} vram__pl_kind_stats;

void vram__pl_ledger_init(void);
/* An allocation of `size` bytes at `key` (a pointer, or a handle for VMM,
 * arrays and decoders), made from `site`. */
void vram__pl_on_alloc(vram__pl_kind k, uint64_t key, uint64_t size, const void *site,
                       uint64_t stream);
/* A failed request. */
void vram__pl_on_fail(vram__pl_kind k, uint64_t size, uint64_t stream);
/* A free of `key` as kind k (or any device kind when k is VRAM__PL_DEVICE and
 * the key was not found as such): the bytes it had, or 0 when unknown. */
uint64_t vram__pl_on_free(vram__pl_kind k, uint64_t key, uint64_t stream);
/* A context was destroyed (or a primary one released for the last time):
 * the allocations made in it are gone; returns the charged bytes dropped. */
uint64_t vram__pl_drop_context(const void *ctx);
/* The primary context of a device as retained (NULL: none alive). */
void *vram__pl_primary_of(int device);
/* The most memory CUDA graphs' allocations held on device 0, as the
 * driver says (cuDeviceGetGraphMemAttribute; 0 when it cannot). */
uint64_t vram__pl_graph_memory(void);
/* The context current on this thread (hooks_ctx.c; NULL without one). */
const void *vram__pl_current_context(void);
/* Device bytes charged now (the charged kinds) and their peak. */
uint64_t vram__pl_charged_bytes(void);
uint64_t vram__pl_peak_bytes(void);
void vram__pl_kind_stats_get(vram__pl_kind k, vram__pl_kind_stats *out);
/* Contexts: created (cost measured), destroyed. */
void vram__pl_on_context(void *ctx, int device, uint64_t cost, int primary);
void vram__pl_on_context_gone(void *ctx, int primary, int device);
/* Visit the live allocations (under the ledger's lock: the visitor must
 * not call back). */
typedef void (*vram__pl_live_fn)(void *arg, vram__pl_kind k, uint64_t key, uint64_t size,
                                 const void *site);
void vram__pl_live_each(vram__pl_live_fn fn, void *arg);
typedef struct vram__pl_context {
    void *ctx;
    int device, primary, alive;
    uint64_t cost;
} vram__pl_context;
size_t vram__pl_contexts(vram__pl_context *out, size_t cap);
/* Stages: vram_mark. */
void vram__pl_mark(const char *name);
typedef struct vram__pl_stage {
    char name[64];
    uint64_t start_live, peak;
} vram__pl_stage;
size_t vram__pl_stages(vram__pl_stage *out, size_t cap);
void vram__pl_ledger_after_fork(void);
/* Whether the program made any call the ledger counts, or a context. */
int vram__pl_touched(void);
/* Allocations the ledger could not keep (its table full). */
uint64_t vram__pl_untracked(void);

/* ---- budget.c: limit mode ---- */
int vram__pl_limit(void);              /* limit mode is on */
uint64_t vram__pl_budget(void);
/* Take `size` bytes of the budget (and the group's): 0, or -1 when they
 * do not fit (the request fails as the driver's out of memory). */
int vram__pl_take(uint64_t size);
void vram__pl_give(uint64_t size);
int vram__pl_budget_init(const char *budget, const char *group, char *err, size_t cap);
void vram__pl_budget_after_fork(void);
void vram__pl_budget_fini(void);
/* What the group sees now (0 members when there is no group). */
void vram__pl_group_use(uint64_t *used, uint64_t *budget, unsigned *members);

/* ---- trace_out.c ---- */
int vram__pl_trace_open(const char *path);
void vram__pl_trace(int action, uint64_t ptr, uint64_t size, uint64_t stream);
void vram__pl_trace_after_fork(void);
void vram__pl_trace_close(void);

/* ---- pool_mode.c ---- */
void vram__pl_pool_enable(void);
int vram__pl_pool_mode(void);
/* Serve cuMemAlloc from the pool: 0 with *ptr, or a CUresult. */
int vram__pl_pool_alloc(uint64_t size, uint64_t *ptr);
/* 1 when ptr was the pool's (and is given back), 0 otherwise. */
int vram__pl_pool_free(uint64_t ptr);
void vram__pl_pool_report(char *buf, size_t cap);
void vram__pl_pool_fini(void);

/* ---- report.c ---- */
void vram__pl_report_write(const char *path);

/* ---- init.c ---- */
const char *vram__pl_mode_name(void);

#endif
