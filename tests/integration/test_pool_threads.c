/* tests/integration/test_pool_threads.c - one pool shared by 8 threads. Each
 * thread has its own stream and owner (half of them with a budget) and makes
 * 20,000 random allocations and frees (2,000 with VRAM_TEST_QUICK set, for
 * TSan). Checked:
 *  - every allocation of a thread answers as its owner's budget says
 *    (VRAM_EBUDGET iff the owner's live bytes + the request exceed it: the
 *    owner's state is the thread's own, so this is exact under concurrency);
 *  - vram_pool_block_info describes each block as its thread allocated it,
 *    right after the allocation and again before its free;
 *  - on the host backend, each thread writes a tag at both ends of its
 *    blocks and finds it intact before the free: two live blocks sharing
 *    bytes would be caught while the threads run;
 *  - at 4 checkpoints (all threads stopped at a barrier) the union of every
 *    thread's live blocks has no overlap, and the pool's and every owner's
 *    statistics equal the threads' own counts;
 *  - at the end, after every thread freed everything: per-owner counts equal
 *    each thread's, the pool's live bytes are 0, and the pool trims and is
 *    destroyed with nothing held by the backend.
 * Both policies, on the sim and the host backends. Deterministic per thread
 * given VRAM_TEST_SEED (the interleaving is not, the checks do not depend on
 * it). */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <vramkit.h>

#define KiB (1024ull)
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

#define N_THREADS 8
#define MAX_LIVE 64
#define CHECKPOINTS 4
#define ALIGN 256u

typedef struct tblock {
    uint64_t addr, size, req, tag;
} tblock;

typedef struct tstate {
    int id;
    vram_owner owner;
    uint64_t budget;
    vram_stream stream;
    uint64_t rng;
    tblock live[MAX_LIVE];
    size_t n_live;
    uint64_t live_bytes, peak, allocs, frees, failed, serial;
} tstate;

typedef struct shared {
    vram_pool *pool;
    vram_backend *backend;
    int host; /* blocks are real memory */
    uint64_t ops_per_chunk;
    pthread_barrier_t barrier;
    tstate t[N_THREADS];
    atomic_int stop;
    pthread_mutex_t msg_lock;
    char msg[1024];
} shared;

typedef struct targ {
    shared *sh;
    int id;
} targ;

static void t_failf(shared *sh, const char *fmt, ...)
{
    pthread_mutex_lock(&sh->msg_lock);
    if (!sh->msg[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->msg, sizeof sh->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&sh->msg_lock);
    atomic_store(&sh->stop, 1);
}

#define T_CHECK(sh, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            t_failf((sh), __VA_ARGS__);                                                            \
    } while (0)

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 1 B .. 4 MiB, biased to small sizes. */
static uint64_t rng_size(uint64_t *s)
{
    double u = (double)(rng_next(s) >> 11) * 0x1.0p-53;
    uint64_t size = (uint64_t)exp2(22.0 * u * u);
    return size ? size : 1;
}

/* Tags at both ends of a block's requested bytes (host memory only). */
static void tag_write(const tblock *b)
{
    unsigned char *p = (unsigned char *)(uintptr_t)b->addr;
    if (b->req >= 16) {
        memcpy(p, &b->tag, 8);
        memcpy(p + b->req - 8, &b->tag, 8);
    } else {
        memset(p, (int)(b->tag & 0xff), (size_t)b->req);
    }
}

static int tag_ok(const tblock *b)
{
    const unsigned char *p = (const unsigned char *)(uintptr_t)b->addr;
    if (b->req >= 16) {
        uint64_t x, y;
        memcpy(&x, p, 8);
        memcpy(&y, p + b->req - 8, 8);
        return x == b->tag && y == b->tag;
    }
    for (uint64_t i = 0; i < b->req; i++)
        if (p[i] != (unsigned char)(b->tag & 0xff))
            return 0;
    return 1;
}

static void t_alloc(shared *sh, tstate *t)
{
    uint64_t size = rng_size(&t->rng);
    vram_kind kind = (vram_kind)(rng_next(&t->rng) % VRAM_KIND_COUNT);
    int over = t->budget && t->live_bytes + size > t->budget;
    void *ptr = NULL;
    int rc = vram_pool_alloc(sh->pool, size, t->owner, kind, t->stream, &ptr);
    if (rc) {
        T_CHECK(sh, rc == VRAM_EBUDGET && over,
                "thread %d: allocation of %" PRIu64 " (live %" PRIu64 ", budget %" PRIu64
                "): %s: %s",
                t->id, size, t->live_bytes, t->budget, vram_err_name(rc), vram_last_error());
        T_CHECK(sh, ptr == NULL, "thread %d: failed allocation left a pointer", t->id);
        t->failed++;
        return;
    }
    T_CHECK(sh, !over, "thread %d: got %" PRIu64 " bytes past its budget %" PRIu64 " (live %" PRIu64
                       ")", t->id, size, t->budget, t->live_bytes);
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    T_CHECK(sh, a && a % ALIGN == 0, "thread %d: block %p not aligned", t->id, ptr);
    vram_block_info bi;
    rc = vram_pool_block_info(sh->pool, ptr, &bi);
    T_CHECK(sh,
            rc == 0 && bi.requested == size && bi.size >= size && bi.owner == t->owner &&
                bi.kind == kind && bi.stream == t->stream,
            "thread %d: block_info of its new block %p: %s, requested %" PRIu64 "/%" PRIu64
            " owner %u/%u",
            t->id, ptr, vram_err_name(rc), bi.requested, size, bi.owner, t->owner);
    if (rc)
        return;
    tblock b = {a, bi.size, size, ((uint64_t)t->id << 56) | ++t->serial};
    if (sh->host)
        tag_write(&b);
    t->live[t->n_live++] = b;
    t->live_bytes += size;
    if (t->live_bytes > t->peak)
        t->peak = t->live_bytes;
    t->allocs++;
}

static void t_free(shared *sh, tstate *t, size_t i)
{
    tblock b = t->live[i];
    vram_block_info bi;
    int rc = vram_pool_block_info(sh->pool, (void *)(uintptr_t)b.addr, &bi);
    T_CHECK(sh, rc == 0 && bi.requested == b.req && bi.size == b.size && bi.owner == t->owner,
            "thread %d: its block 0x%" PRIx64 " changed: %s, requested %" PRIu64 "/%" PRIu64
            ", owner %u/%u",
            t->id, b.addr, vram_err_name(rc), bi.requested, b.req, bi.owner, t->owner);
    if (sh->host)
        T_CHECK(sh, tag_ok(&b),
                "thread %d: the tag of its block 0x%" PRIx64 "+%" PRIu64
                " was overwritten: another live block shares its bytes",
                t->id, b.addr, b.req);
    rc = vram_pool_free(sh->pool, (void *)(uintptr_t)b.addr, t->stream);
    T_CHECK(sh, rc == 0, "thread %d: free of 0x%" PRIx64 ": %s: %s", t->id, b.addr,
            vram_err_name(rc), vram_last_error());
    t->live[i] = t->live[--t->n_live];
    t->live_bytes -= b.req;
    t->frees++;
}

static int cmp_block(const void *a, const void *b)
{
    const tblock *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Run by one thread while all others wait at the barrier. */
static void checkpoint(shared *sh, int final)
{
    tblock *all = malloc(sizeof(tblock) * N_THREADS * MAX_LIVE);
    if (!all)
        abort();
    size_t n = 0;
    uint64_t live = 0, allocs = 0, frees = 0;
    for (int i = 0; i < N_THREADS; i++) {
        const tstate *t = &sh->t[i];
        memcpy(all + n, t->live, t->n_live * sizeof *all);
        n += t->n_live;
        live += t->live_bytes;
        allocs += t->allocs;
        frees += t->frees;
        vram_usage_stats u;
        int rc = vram_owner_stats_get(sh->pool, t->owner, &u);
        T_CHECK(sh,
                rc == 0 && u.live_bytes == t->live_bytes && u.live_blocks == t->n_live &&
                    u.allocs_total == t->allocs && u.frees_total == t->frees &&
                    u.failed_allocs_total == t->failed && u.peak_live_bytes == t->peak &&
                    u.budget_bytes == t->budget,
                "owner of thread %d: live %" PRIu64 "/%" PRIu64 " blocks %" PRIu64 "/%zu allocs %" PRIu64
                "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64 " failed %" PRIu64 "/%" PRIu64
                " peak %" PRIu64 "/%" PRIu64 " (pool/thread)",
                i, u.live_bytes, t->live_bytes, u.live_blocks, t->n_live, u.allocs_total,
                t->allocs, u.frees_total, t->frees, u.failed_allocs_total, t->failed,
                u.peak_live_bytes, t->peak);
    }
    qsort(all, n, sizeof *all, cmp_block);
    for (size_t i = 1; i < n; i++)
        T_CHECK(sh, all[i - 1].addr + all[i - 1].size <= all[i].addr,
                "live blocks 0x%" PRIx64 "+%" PRIu64 " (thread %d) and 0x%" PRIx64
                " (thread %d) overlap",
                all[i - 1].addr, all[i - 1].size, (int)(all[i - 1].tag >> 56), all[i].addr,
                (int)(all[i].tag >> 56));
    vram_pool_stats st;
    T_CHECK(sh, vram_pool_stats_get(sh->pool, &st) == 0, "stats_get");
    T_CHECK(sh,
            st.live_bytes == live && st.live_blocks == n && st.allocs_total == allocs &&
                st.frees_total == frees,
            "pool: live %" PRIu64 "/%" PRIu64 " blocks %" PRIu64 "/%zu allocs %" PRIu64
            "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64 " (pool/threads)",
            st.live_bytes, live, st.live_blocks, n, st.allocs_total, allocs, st.frees_total,
            frees);
    vram_backend_stats bs;
    vram_backend_stats_get(sh->backend, &bs);
    T_CHECK(sh, bs.held_bytes == st.reserved_bytes,
            "backend holds %" PRIu64 ", pool reserved %" PRIu64, bs.held_bytes, st.reserved_bytes);
    if (final)
        T_CHECK(sh, st.live_bytes == 0 && st.live_blocks == 0, "pool still live after all frees");
    free(all);
}

static void *thread_main(void *arg)
{
    targ *ta = arg;
    shared *sh = ta->sh;
    tstate *t = &sh->t[ta->id];
    for (int c = 0; c < CHECKPOINTS; c++) {
        for (uint64_t i = 0; i < sh->ops_per_chunk && !atomic_load(&sh->stop); i++) {
            uint64_t x = rng_next(&t->rng);
            if (t->n_live == 0 || (t->n_live < MAX_LIVE && x % 100 < 55))
                t_alloc(sh, t);
            else
                t_free(sh, t, (size_t)((x >> 8) % t->n_live));
        }
        pthread_barrier_wait(&sh->barrier);
        if (ta->id == 0)
            checkpoint(sh, 0);
        pthread_barrier_wait(&sh->barrier);
    }
    while (t->n_live)
        t_free(sh, t, t->n_live - 1);
    pthread_barrier_wait(&sh->barrier);
    if (ta->id == 0)
        checkpoint(sh, 1);
    return NULL;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static void run_threads(const char *backend, vram_policy policy)
{
    shared *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    uint64_t ops = env_flag("VRAM_TEST_QUICK") ? 2000 : 20000;
    sh->ops_per_chunk = ops / CHECKPOINTS;
    sh->host = strcmp(backend, "host") == 0;
    uint64_t seed = 7;
    const char *forced = getenv("VRAM_TEST_SEED");
    if (forced && *forced)
        seed = strtoull(forced, NULL, 0);
    vram_backend_opts bo = {.capacity = 16 * GiB, .granularity = 2 * MiB};
    assert_int_equal(vram_backend_create(backend, &bo, &sh->backend), 0);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.backend = sh->backend;
    o.policy = policy;
    o.alignment = ALIGN;
    assert_int_equal(vram_pool_create(&o, &sh->pool), 0);
    for (int i = 0; i < N_THREADS; i++) {
        tstate *t = &sh->t[i];
        char name[16];
        snprintf(name, sizeof name, "thread%d", i);
        t->id = i;
        t->budget = i < N_THREADS / 2 ? 6 * MiB : 0;
        t->stream = (vram_stream)(uintptr_t)(0x100 + i);
        t->rng = seed * 1000003 + (uint64_t)i;
        assert_int_equal(vram_owner_create(sh->pool, name, t->budget, &t->owner), 0);
    }
    pthread_barrier_init(&sh->barrier, NULL, N_THREADS);
    pthread_mutex_init(&sh->msg_lock, NULL);
    pthread_t th[N_THREADS];
    targ args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i] = (targ){sh, i};
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh->barrier);
    pthread_mutex_destroy(&sh->msg_lock);
    uint64_t failed = 0, allocs = 0;
    for (int i = 0; i < N_THREADS; i++) {
        failed += sh->t[i].failed;
        allocs += sh->t[i].allocs;
    }
    print_message("%s/%s: %d threads, %" PRIu64 " allocations, %" PRIu64 " refused by budgets\n",
                  backend, vram_policy_name(policy), N_THREADS, allocs, failed);
    if (sh->msg[0])
        fail_msg("%s/%s (seed %" PRIu64 "): %s", backend, vram_policy_name(policy), seed, sh->msg);
    assert_true(failed > 0); /* the budgets were exercised */
    vram_pool_stats st;
    int rc = vram_pool_trim(sh->pool, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(vram_pool_stats_get(sh->pool, &st), 0);
    assert_int_equal(st.live_bytes, 0);
    assert_int_equal(st.live_blocks, 0);
    rc = vram_pool_destroy(sh->pool);
    if (rc)
        fail_msg("destroy: %s: %s", vram_err_name(rc), vram_last_error());
    vram_backend_stats bs;
    vram_backend_stats_get(sh->backend, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(vram_backend_destroy(sh->backend), 0);
    free(sh);
}

static void test_threads_sim_vmm(void **state)
{
    (void)state;
    run_threads("sim", VRAM_POLICY_VMM);
}

static void test_threads_sim_segments(void **state)
{
    (void)state;
    run_threads("sim", VRAM_POLICY_SEGMENTS);
}

static void test_threads_host_vmm(void **state)
{
    (void)state;
    run_threads("host", VRAM_POLICY_VMM);
}

static void test_threads_host_segments(void **state)
{
    (void)state;
    run_threads("host", VRAM_POLICY_SEGMENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_sim_vmm),
        cmocka_unit_test(test_threads_sim_segments),
        cmocka_unit_test(test_threads_host_vmm),
        cmocka_unit_test(test_threads_host_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
