/* tests/integration/events/world.h - a test's world for the pool-event
 * programs (test_pool_events*.c, test_pool_stream_waits.c): the fake backend
 * of fake_events.h, a backend made of it and a pool on that backend, with
 * the operations a scenario makes checked against the single-stream rule
 * (op_alloc, op_free; xalloc and xfree fail the test on an error), the
 * pool's counters, go_shared (shared mode before a scenario about several
 * streams) and the log lines the library writes.
 *
 * These helpers fail the test through cmocka (assert_*, fail_msg), so they
 * live here and are compiled into those programs only (tests/CMakeLists.txt
 * adds them), not in tests/common, whose sources every test and fuzzer
 * (clang, without cmocka) compiles. */
#ifndef VRAM_TESTS_EVENTS_WORLD_H
#define VRAM_TESTS_EVENTS_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "fake_events.h"
#include "vramkit.h"

/* Pool and backend options, read by the next world_open (0: its
 * defaults); a test sets one, opens its world and sets it back to 0. */
extern uint64_t opt_map_chunk, opt_large_round;
extern uint64_t opt_huge_size; /* vmm: a backend with segments, for huge blocks */
extern uint64_t opt_limit;     /* the pool's limit (0: the capacity) */
extern int opt_stream_wait_event; /* the fake's table has stream_wait_event */
extern int opt_reuse_completed;   /* the pool's stream_waits 0 (VRAM_STREAM_REUSE=completed) */
extern uint64_t opt_reclaim_min; /* its reclaim_min (0: every large request) */
extern int opt_reclaim_large;     /* the pool's reclaim_large 1 (VRAM_STREAM_RECLAIM=large) */
extern uint32_t opt_ops_size;     /* the table's size field (0: this version's) */

typedef struct world {
    vram_policy policy;
    fake f;
    vram_backend *b;
    vram_pool *p;
    size_t ev_base;      /* events before the scenario (see go_shared) */
    vram_pool_stats st0; /* the pool's counters then */
} world;

/* The scenario's k-th event (after those of go_shared). */
#define EV(w, k) (&(w)->f.ev[(w)->ev_base + (k)])

/* A fake, its backend and a pool of `policy` on it (see world.c for the
 * options); capacity: the fake's; retain: the pool's retain_min. */
void world_open(world *w, vram_policy policy, uint64_t capacity, uint64_t retain);
/* The fake and its backend as world_open makes them, but no pool: for a
 * test that makes its own (w->p; world_close destroys it). */
void world_open_backend(world *w, vram_policy policy, uint64_t capacity);
/* Fail the test if the fake saw a ledger violation or a bad event use. */
void check_ledger(const fake *f);
/* Destroy the pool (it must succeed) and the backend, then check that the
 * backend holds nothing and every event was released exactly once. */
void world_close(world *w);

static inline vram_stream S(unsigned i) { return (vram_stream)(uintptr_t)i; }

/* An allocation (of a valid request: it reaches the pool's bookkeeping),
 * checked against the single-stream rule; returns its code. */
int op_alloc(world *w, uint64_t size, unsigned s, void **x);
/* A free of a live block, likewise; *t_free (if not NULL): its time. */
int op_free(world *w, void *x, unsigned s, uint64_t *t_free);
/* The same, failing the test on an error; xalloc also checks that the
 * block lies in backend memory. */
void *xalloc(world *w, uint64_t size, unsigned s);
void xfree(world *w, void *x, unsigned s);
/* The pool's counters, checked against the fake's ledger. */
vram_pool_stats stats(world *w);
/* Calls that take memory from the backend (map or segment_alloc). */
unsigned acquiring(const world *w);
/* The backend's calls (vram_backend_stats.calls). */
uint64_t backend_calls(const world *w);
int overlaps(const void *x, uint64_t xs, const void *y, uint64_t ys);

/* vram_pool_opts_init's record with variable `var` (VRAM_...) set to
 * `value` (NULL: unset), read again from the environment. */
vram_pool_opts opts_with_env(const char *var, const char *value);
/* The same with option `name` set to `value` (vram_config_set, which must
 * accept it; NULL: back to the variable or the default). */
vram_pool_opts opts_with_setting(const char *name, const char *value);

/* Bring the pool into shared mode: each stream of `streams`, in order,
 * touches the pool (see world.c); a trim settles it and the counters the
 * scenarios check restart. */
void go_shared(world *w, const unsigned *streams, size_t n);
#define GO_SHARED(w, ...)                                                                          \
    do {                                                                                           \
        const unsigned streams_[] = {__VA_ARGS__};                                                 \
        go_shared((w), streams_, sizeof streams_ / sizeof *streams_);                              \
    } while (0)

/* Prestates of the tests that run for both policies. */
extern vram_policy POL_VMM, POL_SEG;
#define POLICY(state) (*(vram_policy *)*(state))

/* The library's log lines (vram_log_set_handler(log_capture, NULL) in each
 * program's main): the latest warnings are kept (standard error stays quiet
 * unless VRAM_TEST_VERBOSE is set); log_n counts them. */
extern unsigned log_n;
void log_capture(void *ctx, vram_log_level level, const char *line);
/* The latest captured warning containing `what`, or NULL. */
const char *log_find(const char *what);

/* The start of the sentence of a give-back refused alone because the
 * settle before it failed. */
extern const char *const settle_sentence;

#endif
