/* tests/common/pool_model.h - the reference model of a pool, shared by the
 * randomized test tests/integration/test_pool_model.c and the fuzzer
 * tests/fuzz/fuzz_pool.c. A pm_model owns a sim backend and a pool with
 * PM_OWNERS owners on PM_STREAMS streams; each operation (pm_alloc, pm_free,
 * pm_bad_free, pm_trim, pm_set_budget) is applied to the pool and to the
 * model (the set of live blocks, usage per pool, owner and kind, what each
 * stream freed), and the pool's answers are checked against the model;
 * pm_check_stats and pm_check_full compare the pool's statistics and blocks
 * with the model. The stream rule is checked on every allocation: a block
 * freed on stream A must not be handed to another stream before A issued
 * another operation on the pool or the pool was trimmed (a trim synchronises).
 *
 * pm_opts choose a limit below the capacity (an allocation may then fail
 * with VRAM_ENOMEM only with a message naming the limit, and reserved and
 * peak reserved bytes must never pass it), a decay thread (then the
 * statistics the thread changes, reserved, released and backend calls, are
 * only checked against bounds, see pm_check_stats, and a sim pool left idle
 * for decay_ms may complete pending frees, which the stream rule allows
 * for), and place_candidates.
 *
 * No test framework here: a violation is formatted as "[where, op N] what"
 * and handed to the driver's `fail` callback, which must not return (cmocka's
 * fail_msg, or print and abort()); should it return, the model aborts.
 * Uses only the public API. */
#ifndef VRAM_TESTS_POOL_MODEL_H
#define VRAM_TESTS_POOL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <vramkit.h>

#define PM_OWNERS 4
#define PM_STREAMS 3
#define PM_ALIGN 256u

typedef struct pm_block {
    uint64_t addr, size, req;
    int owner; /* index into m->owners */
    int kind;
    int stream;
} pm_block;

typedef struct pm_range {
    uint64_t addr, size;
} pm_range;

typedef struct pm_rvec {
    pm_range *v;
    size_t n, cap;
} pm_rvec;

typedef struct pm_usage {
    uint64_t live, peak, blocks, allocs, frees, failed;
} pm_usage;

/* The pool's options a model run varies; pm_init with NULL opts: no limit
 * (the sim device's free memory, i.e. its capacity), no decay thread,
 * place_candidates 4 (the configuration's default). */
typedef struct pm_opts {
    uint64_t limit;            /* vram_pool_opts.limit; 0: the default */
    uint64_t decay_ms;         /* 0: no decay thread */
    uint64_t retain_min;       /* free bytes the decay leaves held */
    uint32_t place_candidates; /* 0..1024 */
    int drain;                 /* decay only: pm_finish waits for the thread to give
                                  everything back before it trims */
} pm_opts;

/* Called with the message of a violated invariant; must not return. */
typedef void (*pm_fail_fn)(void *ctx, const char *msg);

typedef struct pm_model {
    vram_backend *b;
    vram_pool *p;
    vram_policy policy;
    uint64_t capacity, gran;
    vram_owner owners[PM_OWNERS];
    uint64_t budget[PM_OWNERS];
    pm_usage u_pool, u_owner[PM_OWNERS], u_kind[VRAM_KIND_COUNT];
    uint64_t allocated; /* sum of live blocks' sizes */
    uint64_t n_ebudget, n_enomem;
    pm_block *live;
    size_t n_live, cap_live;
    /* Ranges freed on each stream since that stream's last operation:
     * `lenient` forgets them at any call on the stream (even a failed
     * allocation), `strict` only at a successful allocation or free. Reuse
     * by another stream of a range still in `lenient` is a violation; of one
     * only in `strict` an ambiguity of the contract (counted). */
    pm_rvec lenient[PM_STREAMS], strict[PM_STREAMS];
    uint64_t ambiguous_reuse;
    uint64_t hist_ok[VRAM_HIST_BUCKETS], hist_failed[VRAM_HIST_BUCKETS];
    pm_opts opts;
    uint64_t limit;       /* the pool's limit_bytes (opts.limit, or its default) */
    uint64_t n_enomem_limit; /* refusals whose message names the limit */
    /* Decay on a backend without events: a pool that saw no operation (an
     * allocation, failed or not, or a free) for decay_ms completes its
     * pending frees from the thread. last_op_ns is when the model's last
     * such call began (monotonic); a gap that long (allowing for the
     * thread's millisecond clock) may have let that happen, and
     * `lenient` is then forgotten (`strict` stays: pending is at most it). */
    uint64_t last_op_ns;
    uint64_t idle_gaps;   /* operations after such a gap */
    /* What the decay thread may change, as of the last check: only grows. */
    uint64_t last_released, last_decay_released, last_peak_reserved;
    uint64_t op;
    char where[128];
    pm_fail_fn fail;
    void *fail_ctx;
} pm_model;


/* The stream handle of model stream i. */
vram_stream pm_stream(int i);

/* Report a violation: formats "[where, op N] " and the message, calls the
 * fail callback, and aborts should it return. */
void pm_failf(pm_model *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define PM_CHECK(m, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            pm_failf((m), __VA_ARGS__);                                                            \
    } while (0)

/* Create the sim backend (capacity, 2 MiB granules) and a pool of `policy`
 * with PM_OWNERS owners; budgets[i] of owner i (0: none; budgets may be NULL);
 * opts may be NULL (see pm_opts). `where` prefixes every failure message. */
void pm_init(pm_model *m, vram_policy policy, uint64_t capacity, const uint64_t *budgets,
             const pm_opts *opts, pm_fail_fn fail, void *fail_ctx, const char *where);

/* Allocate `size` bytes for owner, of kind, on stream s; returns the pool's
 * code (0, VRAM_EBUDGET or VRAM_ENOMEM: anything else is a violation). */
int pm_alloc(pm_model *m, uint64_t size, int owner, int kind, int s);

/* Free live block i (an index into m->live) on stream s. */
void pm_free(pm_model *m, size_t i, int s);

/* Free an address that is not live (a double free or a stray pointer):
 * VRAM_ENOTALLOC and no change. Does nothing for 0 or a live address. */
void pm_bad_free(pm_model *m, uint64_t addr, int s);

void pm_trim(pm_model *m);

void pm_set_budget(pm_model *m, int owner, uint64_t budget);

/* The counters, after every operation. */
void pm_check_stats(pm_model *m);

/* Every live block, the histogram, and overlap over the whole set (sorts
 * m->live by address). */
void pm_check_full(pm_model *m);

/* Free everything, check, (with opts.drain: wait for the decay thread to
 * give everything back), trim, check that nothing stays reserved or held,
 * destroy the pool and the backend, and release the model's memory. */
void pm_finish(pm_model *m);

#endif
