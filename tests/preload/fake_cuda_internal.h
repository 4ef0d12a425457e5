/* tests/preload/fake_cuda_internal.h - what the files of the stand-in
 * libcuda.so.1 share: the simulated device's state under one mutex, the
 * hash map that finds allocations and handles, the ledger that charges
 * the device, and the entry bookkeeping every exported function starts
 * with.
 *
 * cuda.h is included as NVIDIA's own driver includes it
 * (__CUDA_API_VERSION_INTERNAL): the #defines that turn cuMemAlloc into
 * cuMemAlloc_v2 are gone, and the header declares every exported name with
 * its own ABI (the unversioned legacy ones with their 32-bit types, the
 * _ptsz/_ptds ones), so each definition is checked against its real
 * prototype. Everything declared here is hidden: the library exports the
 * driver's names and the fake_cuda_ ones of fake_cuda.h only. Exported
 * functions never call each other: each calls the hidden fc_ functions, so
 * a library interposing one driver name never sees the stand-in call it. */
#ifndef FAKE_CUDA_INTERNAL_H
#define FAKE_CUDA_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fake_cuda.h"
#include "fake_cuda_symbols.h"

#pragma GCC visibility push(hidden)

#define FC_MIB (1024ull * 1024ull)
#define FC_GRANULARITY (2 * FC_MIB) /* cuMemGetAllocationGranularity */
#define FC_PITCH_ALIGN 512u         /* cuMemAllocPitch */
#define FC_POOL_ALIGN 512u          /* blocks of memory pools */

/* ---- fake_cuda_map.c: uint64 key (never 0) -> pointer ---- */
typedef struct fc_map {
    uint64_t *keys;
    void **vals;
    size_t cap, n;
} fc_map;
/* 0, or -1 when the table cannot grow. */
int fc_map_put(fc_map *m, uint64_t key, void *val);
void *fc_map_get(const fc_map *m, uint64_t key);
/* Removes and returns the value (NULL when absent). */
void *fc_map_del(fc_map *m, uint64_t key);
/* Up to cap keys whose value satisfies keep(val, arg) (all when keep is
 * NULL); the number found, which may exceed cap. */
size_t fc_map_select(const fc_map *m, int (*keep)(void *val, void *arg), void *arg, uint64_t *out,
                     size_t cap);
void fc_map_clear(fc_map *m);

/* ---- objects behind handles (streams, events, pools, ...) ---- */
typedef enum fc_tag {
    FC_T_CTX = 1,
    FC_T_STREAM,
    FC_T_EVENT,
    FC_T_POOL,
    FC_T_VMM,
    FC_T_RESV,
    FC_T_ARRAY,
    FC_T_MIPMAP,
} fc_tag;

/* The head of each object. Objects with a context die with it; `bytes`
 * of `kind` are what the object holds of the device (given back when it
 * goes). */
typedef struct fc_obj {
    fc_tag tag;
    struct CUctx_st *ctx;
    fake_cuda_kind kind;
    uint64_t bytes;
} fc_obj;

struct CUctx_st {
    fc_obj hdr;
    int primary;
    unsigned flags;
    size_t limits[CU_LIMIT_MAX];
};

/* An allocation a program addresses (device or page-locked host memory). */
typedef struct fc_alloc {
    uint64_t addr;
    size_t size;    /* what was asked */
    uint64_t bytes; /* what it holds of its kind */
    fake_cuda_kind kind;
    struct CUctx_st *ctx;            /* NULL: the device's (pools) */
    struct CUmemPoolHandle_st *pool; /* a pool's block */
    int low32;                       /* mapped below 4 GiB for the 32-bit ABI */
    struct fc_alloc *next;           /* a pool's kept blocks */
} fc_alloc;

struct CUmemPoolHandle_st {
    fc_obj hdr; /* hdr.kind: what its reserve is charged as */
    int is_default, is_graph, dying;
    uint64_t threshold, max_size;
    uint64_t reserved, reserved_high, used, used_high;
    size_t live;    /* blocks in use */
    fc_alloc *kept; /* freed blocks kept for reuse */
    int reuse[3];   /* the three REUSE_ attributes */
};

/* ---- fake_cuda.c: the device ---- */
typedef struct fc_state {
    pthread_mutex_t mu;
    int initialized; /* cuInit done */
    uint64_t total, ctx_base;
    uint64_t bytes[FAKE_CUDA_KINDS];
    int contexts;
    fc_map dev;  /* device pointer -> fc_alloc */
    fc_map host; /* page-locked host pointer -> fc_alloc */
    fc_map objs; /* handle -> fc_obj */
    struct CUctx_st primary;
    unsigned primary_refs;
    struct CUmemPoolHandle_st *default_pool, *current_pool, *graph_pool;
    int trampolines; /* FAKE_CUDA_PROC_TRAMPOLINES */
} fc_state;

extern fc_state fc_g;

/* The state, set up once (from the environment) before any use. */
void fc_setup(void);
void fc_lock(void);
void fc_unlock(void);

/* Every exported driver function starts with FC_ENTER(its symbol). */
void fc_enter(enum fc_symbol_id id);
#define FC_ENTER(sym) fc_enter(FC_ID_##sym)
const char *fc_symbol_name(enum fc_symbol_id id);

/* Ledger (lock held): take bytes of the device or fail with
 * CUDA_ERROR_OUT_OF_MEMORY; give them back. */
CUresult fc_charge_locked(fake_cuda_kind kind, uint64_t bytes);
void fc_uncharge_locked(fake_cuda_kind kind, uint64_t bytes);
uint64_t fc_used_locked(void);

/* CUDA_ERROR_NOT_INITIALIZED before cuInit, else CUDA_SUCCESS. */
CUresult fc_ready_locked(void);
CUresult fc_check_device(CUdevice dev);

/* A new allocation (lock held): size bytes of host memory (below 4 GiB
 * when low32), charged as `kind` for `bytes` (unless HOST), registered in
 * the device or host map. */
CUresult fc_alloc_new_locked(fake_cuda_kind kind, size_t size, uint64_t bytes, int low32,
                             struct CUctx_st *ctx, fc_alloc **out);
/* Free any registered device allocation (pool blocks go back to their
 * pool): CUDA_ERROR_INVALID_VALUE for an unknown pointer. */
CUresult fc_dev_free_locked(uint64_t addr);
/* Host memory of a record, without the bookkeeping. */
void fc_alloc_release_memory(fc_alloc *a);

/* Objects (lock held): register, find by handle and tag, drop. */
CUresult fc_obj_add_locked(void *obj);
void *fc_obj_find_locked(const void *handle, fc_tag tag);
/* Unregister, give back its bytes, free it. */
void fc_obj_free_locked(void *obj);

/* Everything of a context that dies with it (allocations, host memory,
 * streams, events, arrays). */
void fc_ctx_teardown_locked(struct CUctx_st *ctx);

/* ---- fake_cuda_ctx.c ---- */
/* The calling thread's current context if it is alive, else NULL. */
struct CUctx_st *fc_current_locked(void);
/* The current context, or CUDA_ERROR_NOT_INITIALIZED / INVALID_CONTEXT. */
CUresult fc_need_ctx_locked(struct CUctx_st **ctx);
int fc_ctx_alive_locked(const struct CUctx_st *ctx);
/* The fork child's thread starts with no current context. */
void fc_ctx_forget_thread(void);

/* ---- fake_cuda_stream.c ---- */
/* The context a stream belongs to (NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD: the current one). */
CUresult fc_stream_ctx_locked(CUstream s, struct CUctx_st **ctx);
/* A synchronisation: pools give back what exceeds their release threshold. */
void fc_sync_locked(void);
int fc_capturing(void);

/* ---- fake_cuda_pool.c ---- */
/* The device's default pool and graph memory, made by cuInit. */
CUresult fc_pools_ensure_locked(void);
CUresult fc_pool_alloc_locked(struct CUmemPoolHandle_st *p, size_t size, uint64_t *addr);
/* A block of the pool freed. */
void fc_pool_give_locked(fc_alloc *a);
void fc_pool_trim_locked(struct CUmemPoolHandle_st *p, uint64_t keep);

/* ---- fake_cuda_vmm.c ---- */
/* In a fork child: the parent's reservations are no longer the device's. */
void fc_vmm_after_fork(void);

/* ---- fake_cuda_procaddr.c ---- */
/* The variant symbol `id` records: "ptsz" or "ptds" for a per-thread
 * variant, "legacy" for the plain twin of one, NULL for the others. */
const char *fc_symbol_variant(enum fc_symbol_id id);

/* Environment: bytes with an optional K/M/G/T suffix, or `fallback`. */
uint64_t fc_env_bytes(const char *name, uint64_t fallback);

static inline uint64_t fc_round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

#pragma GCC visibility pop

#endif
