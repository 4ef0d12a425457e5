/* tests/common/pool_model.c - the reference model of a pool shared by
 * tests/integration/test_pool_model.c and tests/fuzz/fuzz_pool.c: applies each
 * operation to the pool and to the model and checks every invariant (see
 * pool_model.h). Reports violations through the model's fail callback; no
 * test framework, so it links into the fuzzers too. */
#include "pool_model.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1024ull * 1024)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

vram_stream pm_stream(int i) { return (vram_stream)(uintptr_t)(0x10 + i); }

void pm_failf(pm_model *m, const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "[%s, op %" PRIu64 "] ", m->where, m->op);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    m->fail(m->fail_ctx, msg);
    abort(); /* the callback must not return */
}

/* Room for one more element in a growable array; the model aborts when the
 * host is out of memory (it only runs in tests and fuzzers). */
static void *grow_or_abort(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t want = *cap ? *cap * 2 : first;
    void *v = realloc(arr, want * elem);
    if (!v)
        abort();
    *cap = want;
    return v;
}

static void rvec_push(pm_rvec *r, uint64_t addr, uint64_t size)
{
    r->v = grow_or_abort(r->v, &r->cap, r->n, sizeof *r->v, 16);
    r->v[r->n++] = (pm_range){addr, size};
}

static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

static unsigned bucket(uint64_t size)
{
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++)
        if (size <= vram_hist_bucket_limit(i))
            return i;
    return VRAM_HIST_BUCKETS - 1;
}

static void usage_alloc(pm_usage *u, uint64_t size)
{
    u->live += size;
    u->blocks++;
    u->allocs++;
    if (u->live > u->peak)
        u->peak = u->live;
}

static void usage_free(pm_usage *u, uint64_t size)
{
    u->live -= size;
    u->blocks--;
    u->frees++;
}

void pm_init(pm_model *m, vram_policy policy, uint64_t capacity, const uint64_t *budgets,
             const pm_opts *opts, pm_fail_fn fail, void *fail_ctx, const char *where)
{
    memset(m, 0, sizeof *m);
    if (opts)
        m->opts = *opts;
    else
        m->opts.place_candidates = 4;
    m->policy = policy;
    m->capacity = capacity;
    m->gran = 2 * MiB;
    m->fail = fail;
    m->fail_ctx = fail_ctx;
    snprintf(m->where, sizeof m->where, "%s", where);
    vram_backend_opts bo = {.capacity = capacity, .granularity = m->gran};
    int rc = vram_backend_create("sim", &bo, &m->b);
    if (rc)
        pm_failf(m, "sim backend: %s: %s", vram_err_name(rc), vram_last_error());
    vram_pool_opts o;
    rc = vram_pool_opts_init(&o);
    PM_CHECK(m, rc == 0, "vram_pool_opts_init: %s", vram_err_name(rc));
    o.backend = m->b;
    o.policy = policy;
    o.alignment = PM_ALIGN;
    o.name = "model";
    /* Every option the model depends on is set here, whatever the
     * environment says (VRAM_DECAY_MS would otherwise start a thread). */
    o.limit = m->opts.limit;
    o.decay_ms = m->opts.decay_ms;
    o.retain_min = m->opts.retain_min;
    o.place_candidates = m->opts.place_candidates;
    rc = vram_pool_create(&o, &m->p);
    if (rc)
        pm_failf(m, "vram_pool_create: %s: %s", vram_err_name(rc), vram_last_error());
    vram_pool_stats st;
    PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
    m->limit = st.limit_bytes;
    /* Without a limit: the device's free memory, all of a new sim device. */
    PM_CHECK(m, m->limit == (m->opts.limit ? m->opts.limit : capacity),
             "limit_bytes %" PRIu64 " of a pool created with limit %" PRIu64 " on a %" PRIu64
             "-byte sim device",
             m->limit, m->opts.limit, capacity);
    PM_CHECK(m, st.reserved_bytes == 0 && st.peak_reserved_bytes == 0 &&
                    st.released_bytes_total == 0 && st.decay_released_bytes_total == 0,
             "a new pool: reserved %" PRIu64 ", peak %" PRIu64 ", released %" PRIu64
             ", by decay %" PRIu64,
             st.reserved_bytes, st.peak_reserved_bytes, st.released_bytes_total,
             st.decay_released_bytes_total);
    m->last_op_ns = now_ns();
    for (int i = 0; i < PM_OWNERS; i++) {
        char name[16];
        snprintf(name, sizeof name, "owner%d", i);
        m->budget[i] = budgets ? budgets[i] : 0;
        rc = vram_owner_create(m->p, name, m->budget[i], &m->owners[i]);
        PM_CHECK(m, rc == 0, "vram_owner_create: %s", vram_err_name(rc));
    }
}

/* An operation the decay thread counts (an allocation or a free) began at
 * t0 and returned at t1. On a backend without events the thread completes
 * every pending free once the pool has seen no such operation for decay_ms,
 * by its millisecond clock (whole milliseconds, so more than decay_ms - 1 ms
 * of real time). That can only have happened, before this operation's
 * effect, if the time from the start of the previous counted operation to
 * the end of this one is that long: then what was freed before may have
 * become anyone's (lenient forgotten); it may as well still be pending
 * (strict kept). With decay_ms 1 that is every operation: such a run checks
 * no stream order, which the runs with a longer decay_ms do. */
static void counted_op(pm_model *m, uint64_t t0, uint64_t t1)
{
    uint64_t d = m->opts.decay_ms;
    if (d && t1 - m->last_op_ns >= (d - 1) * 1000000u) {
        for (int s = 0; s < PM_STREAMS; s++)
            m->lenient[s].n = 0;
        m->idle_gaps++;
    }
    m->last_op_ns = t0;
}

static void stream_op(pm_model *m, int s, int succeeded)
{
    m->lenient[s].n = 0;
    if (succeeded)
        m->strict[s].n = 0;
}

static uint64_t span_of(uint64_t addr, uint64_t size, uint64_t gran)
{
    uint64_t lo = addr / gran * gran;
    uint64_t hi = (addr + size + gran - 1) / gran * gran;
    return hi - lo;
}

/* Could the pool have served `size` bytes? Only judged where the answer is
 * certain: under vmm free space never strands, so when the granules touched
 * by live and possibly pending blocks plus what the request needs fit in the
 * limit (at most the capacity), VRAM_ENOMEM is wrong. Under segments only an
 * empty pool is judged. The decay thread only gives free memory back, which
 * makes room. */
static void judge_enomem(pm_model *m, uint64_t size)
{
    uint64_t bound = m->limit < m->capacity ? m->limit : m->capacity;
    uint64_t pinned = 0;
    int empty = m->n_live == 0;
    for (size_t i = 0; i < m->n_live; i++)
        pinned += span_of(m->live[i].addr, m->live[i].size, m->gran);
    for (int s = 0; s < PM_STREAMS; s++) {
        for (size_t i = 0; i < m->strict[s].n; i++) {
            pinned += span_of(m->strict[s].v[i].addr, m->strict[s].v[i].size, m->gran);
            empty = 0;
        }
    }
    uint64_t asize = (size + PM_ALIGN - 1) / PM_ALIGN * PM_ALIGN;
    if (m->policy == VRAM_POLICY_VMM) {
        uint64_t need = ((asize + m->gran - 1) / m->gran + 1) * m->gran;
        PM_CHECK(m, pinned + need > bound,
                 "VRAM_ENOMEM for %" PRIu64 " bytes although live and pending blocks touch at most "
                 "%" PRIu64 " of %" PRIu64 " bytes (%zu live): %s",
                 size, pinned, bound, m->n_live, vram_last_error());
    } else {
        uint64_t need = size <= 1 * MiB   ? 2 * MiB
                        : size < 10 * MiB ? 20 * MiB
                                          : (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
        PM_CHECK(m, !(empty && need <= bound),
                 "VRAM_ENOMEM for %" PRIu64 " bytes from an empty pool: %s", size,
                 vram_last_error());
    }
}

int pm_alloc(pm_model *m, uint64_t size, int owner, int kind, int s)
{
    m->op++;
    void *ptr = (void *)(uintptr_t)0xdead;
    int over = m->budget[owner] && m->u_owner[owner].live + size > m->budget[owner];
    uint64_t t0 = now_ns();
    int rc = vram_pool_alloc(m->p, size, m->owners[owner], (vram_kind)kind, pm_stream(s), &ptr);
    counted_op(m, t0, now_ns());
    unsigned bk = bucket(size);
    if (rc) {
        PM_CHECK(m, ptr == NULL, "failed allocation left *ptr = %p", ptr);
        PM_CHECK(m, rc == VRAM_EBUDGET || rc == VRAM_ENOMEM, "allocation of %" PRIu64 ": %s: %s",
                 size, vram_err_name(rc), vram_last_error());
        if (over)
            PM_CHECK(m, rc == VRAM_EBUDGET,
                     "owner%d at %" PRIu64 " of budget %" PRIu64 " asked %" PRIu64 ": got %s",
                     owner, m->u_owner[owner].live, m->budget[owner], size, vram_err_name(rc));
        else
            PM_CHECK(m, rc != VRAM_EBUDGET,
                     "VRAM_EBUDGET for owner%d at %" PRIu64 " of budget %" PRIu64 " asking %" PRIu64
                     ": %s",
                     owner, m->u_owner[owner].live, m->budget[owner], size, vram_last_error());
        if (rc == VRAM_EBUDGET)
            m->n_ebudget++;
        else {
            m->n_enomem++;
            int names_limit = strstr(vram_last_error(), "the pool's limit of") != NULL;
            m->n_enomem_limit += names_limit;
            /* A limit given below the capacity is what refuses a request
             * that fits in it: the backend has room for everything the pool
             * may hold. One larger than the limit may be refused for want
             * of a virtual range that large first (the vmm policy reserves
             * twice the capacity, in which live blocks may leave none). */
            if (m->opts.limit && m->limit < m->capacity && size <= m->limit)
                PM_CHECK(m, names_limit,
                         "VRAM_ENOMEM for %" PRIu64 " bytes under a limit of %" PRIu64
                         " (capacity %" PRIu64 ") without naming the limit: %s",
                         size, m->limit, m->capacity, vram_last_error());
            judge_enomem(m, size);
        }
        m->u_pool.failed++;
        m->u_owner[owner].failed++;
        m->u_kind[kind].failed++;
        m->hist_failed[bk]++;
        stream_op(m, s, 0);
        return rc;
    }
    PM_CHECK(m, !over, "owner%d at %" PRIu64 " of budget %" PRIu64 " got %" PRIu64 " more bytes",
             owner, m->u_owner[owner].live, m->budget[owner], size);
    PM_CHECK(m, ptr != NULL, "allocation returned 0 and NULL");
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    PM_CHECK(m, a % PM_ALIGN == 0, "block 0x%" PRIx64 " not aligned to %u", a, PM_ALIGN);
    vram_block_info bi;
    rc = vram_pool_block_info(m->p, ptr, &bi);
    PM_CHECK(m, rc == 0, "block_info of a new block: %s", vram_err_name(rc));
    PM_CHECK(m,
             bi.requested == size && bi.size >= size && bi.size % PM_ALIGN == 0 &&
                 bi.owner == m->owners[owner] && bi.kind == (vram_kind)kind &&
                 bi.stream == pm_stream(s),
             "block_info of 0x%" PRIx64 ": size %" PRIu64 " requested %" PRIu64
             " owner %u kind %d stream %p; asked %" PRIu64 " for owner %u kind %d stream %p",
             a, bi.size, bi.requested, bi.owner, (int)bi.kind, bi.stream, size, m->owners[owner],
             kind, pm_stream(s));
    for (size_t i = 0; i < m->n_live; i++)
        PM_CHECK(m, !overlaps(a, bi.size, m->live[i].addr, m->live[i].size),
                 "new block 0x%" PRIx64 "+%" PRIu64 " overlaps live 0x%" PRIx64 "+%" PRIu64, a,
                 bi.size, m->live[i].addr, m->live[i].size);
    for (int t = 0; t < PM_STREAMS; t++) {
        if (t == s)
            continue;
        for (size_t i = 0; i < m->lenient[t].n; i++)
            PM_CHECK(m, !overlaps(a, bi.size, m->lenient[t].v[i].addr, m->lenient[t].v[i].size),
                     "stream %d got 0x%" PRIx64 "+%" PRIu64 ", overlapping 0x%" PRIx64 "+%" PRIu64
                     " freed on stream %d, which issued nothing since",
                     s, a, bi.size, m->lenient[t].v[i].addr, m->lenient[t].v[i].size, t);
        for (size_t i = 0; i < m->strict[t].n; i++)
            if (overlaps(a, bi.size, m->strict[t].v[i].addr, m->strict[t].v[i].size))
                m->ambiguous_reuse++;
    }
    m->live = grow_or_abort(m->live, &m->cap_live, m->n_live, sizeof *m->live, 256);
    m->live[m->n_live++] = (pm_block){a, bi.size, size, owner, kind, s};
    m->allocated += bi.size;
    usage_alloc(&m->u_pool, size);
    usage_alloc(&m->u_owner[owner], size);
    usage_alloc(&m->u_kind[kind], size);
    m->hist_ok[bk]++;
    stream_op(m, s, 1);
    return 0;
}

void pm_free(pm_model *m, size_t i, int s)
{
    m->op++;
    pm_block blk = m->live[i];
    uint64_t t0 = now_ns();
    int rc = vram_pool_free(m->p, (void *)(uintptr_t)blk.addr, pm_stream(s));
    counted_op(m, t0, now_ns());
    PM_CHECK(m, rc == 0, "free of live 0x%" PRIx64 ": %s: %s", blk.addr, vram_err_name(rc),
             vram_last_error());
    vram_block_info bi;
    rc = vram_pool_block_info(m->p, (void *)(uintptr_t)blk.addr, &bi);
    PM_CHECK(m, rc == VRAM_ENOTALLOC, "block_info of a freed block: %s", vram_err_name(rc));
    m->live[i] = m->live[--m->n_live];
    m->allocated -= blk.size;
    usage_free(&m->u_pool, blk.req);
    usage_free(&m->u_owner[blk.owner], blk.req);
    usage_free(&m->u_kind[blk.kind], blk.req);
    stream_op(m, s, 1);
    rvec_push(&m->lenient[s], blk.addr, blk.size);
    rvec_push(&m->strict[s], blk.addr, blk.size);
}

static int is_live(const pm_model *m, uint64_t addr)
{
    for (size_t i = 0; i < m->n_live; i++)
        if (m->live[i].addr == addr)
            return 1;
    return 0;
}

/* The statistics the decay thread cannot change are equal. */
static int stable_equal(const vram_pool_stats *a, const vram_pool_stats *b)
{
    return memcmp(a->hist_allocs, b->hist_allocs, sizeof a->hist_allocs) == 0 &&
           memcmp(a->hist_live, b->hist_live, sizeof a->hist_live) == 0 &&
           a->live_bytes == b->live_bytes && a->peak_live_bytes == b->peak_live_bytes &&
           a->allocated_bytes == b->allocated_bytes && a->live_blocks == b->live_blocks &&
           a->allocs_total == b->allocs_total && a->frees_total == b->frees_total &&
           a->failed_allocs_total == b->failed_allocs_total &&
           a->budget_failures_total == b->budget_failures_total &&
           a->event_waits_total == b->event_waits_total && a->trims_total == b->trims_total &&
           a->charged_bytes == b->charged_bytes && a->limit_bytes == b->limit_bytes;
}

void pm_bad_free(pm_model *m, uint64_t addr, int s)
{
    if (!addr || is_live(m, addr))
        return;
    m->op++;
    vram_pool_stats before, after;
    PM_CHECK(m, vram_pool_stats_get(m->p, &before) == 0, "stats_get");
    int rc = vram_pool_free(m->p, (void *)(uintptr_t)addr, pm_stream(s));
    PM_CHECK(m, rc == VRAM_ENOTALLOC, "free of non-live 0x%" PRIx64 ": %s", addr,
             vram_err_name(rc));
    PM_CHECK(m, vram_pool_stats_get(m->p, &after) == 0, "stats_get");
    /* With a decay thread, what it gives back may change in between. */
    PM_CHECK(m,
             m->opts.decay_ms ? stable_equal(&before, &after)
                              : memcmp(&before, &after, sizeof before) == 0,
             "a refused free of 0x%" PRIx64 " changed the statistics", addr);
    /* A refused call on s: lenient view only. */
    stream_op(m, s, 0);
}

void pm_trim(pm_model *m)
{
    m->op++;
    uint64_t released = 0;
    vram_pool_stats before, after;
    PM_CHECK(m, vram_pool_stats_get(m->p, &before) == 0, "stats_get");
    int rc = vram_pool_trim(m->p, &released);
    PM_CHECK(m, rc == 0, "trim: %s: %s", vram_err_name(rc), vram_last_error());
    PM_CHECK(m, vram_pool_stats_get(m->p, &after) == 0, "stats_get");
    /* What the trim returned is counted as released; without a thread it is
     * all that changed. It completed every pending free. */
    uint64_t counted = after.released_bytes_total - before.released_bytes_total;
    uint64_t dropped = before.reserved_bytes - after.reserved_bytes;
    PM_CHECK(m,
             after.reserved_bytes <= before.reserved_bytes && counted >= released &&
                 dropped >= released &&
                 (m->opts.decay_ms || (counted == released && dropped == released)),
             "trim released %" PRIu64 " bytes; released_bytes_total grew by %" PRIu64
             ", reserved went from %" PRIu64 " to %" PRIu64,
             released, counted, before.reserved_bytes, after.reserved_bytes);
    PM_CHECK(m, after.pending_bytes == 0, "%" PRIu64 " bytes pending after a trim",
             after.pending_bytes);
    /* A trim synchronises (pool.m): it takes every pending free as complete,
     * so what was freed before it is anyone's. */
    for (int s = 0; s < PM_STREAMS; s++) {
        m->lenient[s].n = 0;
        m->strict[s].n = 0;
    }
}

void pm_set_budget(pm_model *m, int owner, uint64_t budget)
{
    m->op++;
    int rc = vram_owner_set_budget(m->p, m->owners[owner], budget);
    PM_CHECK(m, rc == 0, "set_budget: %s", vram_err_name(rc));
    m->budget[owner] = budget;
}

static void check_usage(pm_model *m, const char *what, const vram_usage_stats *u,
                        const pm_usage *mu, uint64_t budget)
{
    PM_CHECK(m,
             u->live_bytes == mu->live && u->peak_live_bytes == mu->peak &&
                 u->live_blocks == mu->blocks && u->allocs_total == mu->allocs &&
                 u->frees_total == mu->frees && u->failed_allocs_total == mu->failed &&
                 u->budget_bytes == budget,
             "%s: live %" PRIu64 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64 " blocks %" PRIu64
             "/%" PRIu64 " allocs %" PRIu64 "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64
             " failed %" PRIu64 "/%" PRIu64 " budget %" PRIu64 "/%" PRIu64 " (pool/model)",
             what, u->live_bytes, mu->live, u->peak_live_bytes, mu->peak, u->live_blocks,
             mu->blocks, u->allocs_total, mu->allocs, u->frees_total, mu->frees,
             u->failed_allocs_total, mu->failed, u->budget_bytes, budget);
}

/* Without a decay thread every statistic is compared exactly. With one,
 * the thread changes reserved bytes (and so free bytes), released bytes,
 * backend calls and, on a backend without events, pending bytes (it
 * completes the frees of an idle pool) between the operation and this
 * check: those are held to bounds; everything else the thread cannot
 * change (live and allocated bytes, blocks, counts, usage per owner and per
 * kind, the histograms) is still compared exactly. The limit holds either
 * way, as does the consistency of one record (filled under the lock). */
void pm_check_stats(pm_model *m)
{
    const int decay = m->opts.decay_ms != 0;
    vram_pool_stats st;
    vram_backend_stats bs0, bs;
    vram_backend_stats_get(m->b, &bs0);
    PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
    vram_backend_stats_get(m->b, &bs);
    const pm_usage *mu = &m->u_pool;
    PM_CHECK(m,
             st.live_bytes == mu->live && st.peak_live_bytes == mu->peak &&
                 st.live_blocks == mu->blocks && st.allocs_total == mu->allocs &&
                 st.frees_total == mu->frees && st.failed_allocs_total == mu->failed &&
                 st.budget_failures_total == m->n_ebudget && st.allocated_bytes == m->allocated,
             "pool: live %" PRIu64 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64 " blocks %" PRIu64
             "/%" PRIu64 " allocs %" PRIu64 "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64
             " failed %" PRIu64 "/%" PRIu64 " budget failures %" PRIu64 "/%" PRIu64
             " allocated %" PRIu64 "/%" PRIu64 " (pool/model)",
             st.live_bytes, mu->live, st.peak_live_bytes, mu->peak, st.live_blocks, mu->blocks,
             st.allocs_total, mu->allocs, st.frees_total, mu->frees, st.failed_allocs_total,
             mu->failed, st.budget_failures_total, m->n_ebudget, st.allocated_bytes, m->allocated);
    PM_CHECK(m, st.reserved_bytes >= st.allocated_bytes && st.allocated_bytes >= st.live_bytes,
             "reserved %" PRIu64 " >= allocated %" PRIu64 " >= live %" PRIu64 " does not hold",
             st.reserved_bytes, st.allocated_bytes, st.live_bytes);
    PM_CHECK(m, st.reserved_bytes - st.allocated_bytes >= st.pending_bytes,
             "pending %" PRIu64 " exceeds reserved %" PRIu64 " - allocated %" PRIu64,
             st.pending_bytes, st.reserved_bytes, st.allocated_bytes);
    /* Reserved counts memory from before a mapping to after its unmap, so
     * the backend never holds more; the thread only unmaps, after st. */
    PM_CHECK(m, decay ? bs.held_bytes <= st.reserved_bytes : bs.held_bytes == st.reserved_bytes,
             "backend holds %" PRIu64 " bytes for the pool, which reports %" PRIu64 " reserved",
             bs.held_bytes, st.reserved_bytes);
    PM_CHECK(m, st.reserved_bytes <= m->capacity && st.peak_reserved_bytes >= st.reserved_bytes,
             "reserved %" PRIu64 " (peak %" PRIu64 ") vs capacity %" PRIu64, st.reserved_bytes,
             st.peak_reserved_bytes, m->capacity);
    /* The limit: never more held, not even at the peak. */
    PM_CHECK(m,
             st.limit_bytes == m->limit && st.reserved_bytes <= st.limit_bytes &&
                 st.peak_reserved_bytes <= st.limit_bytes,
             "reserved %" PRIu64 " (peak %" PRIu64 ") passes the limit of %" PRIu64
             " (limit_bytes %" PRIu64 ")",
             st.reserved_bytes, st.peak_reserved_bytes, m->limit, st.limit_bytes);
    /* Released bytes and the peak only grow; the decay's are part of all
     * released, and there are none without the thread. */
    PM_CHECK(m,
             st.released_bytes_total >= m->last_released &&
                 st.decay_released_bytes_total >= m->last_decay_released &&
                 st.decay_released_bytes_total <= st.released_bytes_total &&
                 st.peak_reserved_bytes >= m->last_peak_reserved &&
                 (decay || st.decay_released_bytes_total == 0),
             "released %" PRIu64 " (was %" PRIu64 "), by decay %" PRIu64 " (was %" PRIu64
             "), peak reserved %" PRIu64 " (was %" PRIu64 ")",
             st.released_bytes_total, m->last_released, st.decay_released_bytes_total,
             m->last_decay_released, st.peak_reserved_bytes, m->last_peak_reserved);
    m->last_released = st.released_bytes_total;
    m->last_decay_released = st.decay_released_bytes_total;
    m->last_peak_reserved = st.peak_reserved_bytes;
    /* stats.m defines free_bytes as "reserved bytes in no live block"; the
     * pool may also leave out the pending bytes (in no block anyone can use
     * yet). Either reading, exactly. */
    PM_CHECK(m,
             st.free_bytes == st.reserved_bytes - st.allocated_bytes ||
                 st.free_bytes == st.reserved_bytes - st.allocated_bytes - st.pending_bytes,
             "free %" PRIu64 " is neither reserved %" PRIu64 " - allocated %" PRIu64
             " nor that less pending %" PRIu64,
             st.free_bytes, st.reserved_bytes, st.allocated_bytes, st.pending_bytes);
    PM_CHECK(m, st.largest_free_bytes <= st.free_bytes, "largest free %" PRIu64 " > free %" PRIu64,
             st.largest_free_bytes, st.free_bytes);
    if (st.free_bytes == 0)
        PM_CHECK(m, st.fragmentation_ratio == 0.0, "fragmentation %g with nothing free",
                 st.fragmentation_ratio);
    else {
        double want = 1.0 - (double)st.largest_free_bytes / (double)st.free_bytes;
        PM_CHECK(m,
                 fabs(st.fragmentation_ratio - want) < 1e-9 && st.fragmentation_ratio >= 0 &&
                     st.fragmentation_ratio <= 1,
                 "fragmentation %g, want %g", st.fragmentation_ratio, want);
    }
    /* The pool counts a call before making it: with the thread, the
     * backend's count read before the pool's is at most it, the one read
     * after at least it less the thread's one call in flight. */
    if (decay)
        PM_CHECK(m,
                 bs0.calls <= st.backend_calls_total && st.backend_calls_total <= bs.calls + 1 &&
                     bs0.failed_calls <= st.backend_failures_total &&
                     st.backend_failures_total <= bs.failed_calls + 1,
                 "pool counts %" PRIu64 " backend calls (%" PRIu64 " failed), the backend %" PRIu64
                 " (%" PRIu64 ") before and %" PRIu64 " (%" PRIu64 ") after",
                 st.backend_calls_total, st.backend_failures_total, bs0.calls, bs0.failed_calls,
                 bs.calls, bs.failed_calls);
    else
        PM_CHECK(m,
                 st.backend_calls_total == bs.calls && st.backend_failures_total == bs.failed_calls,
                 "pool counts %" PRIu64 " backend calls (%" PRIu64 " failed), the backend %" PRIu64
                 " (%" PRIu64 ")",
                 st.backend_calls_total, st.backend_failures_total, bs.calls, bs.failed_calls);
    PM_CHECK(m, st.event_waits_total == 0, "%" PRIu64 " waits on modelled events",
             st.event_waits_total);
    /* Pending: at least what was freed since each stream's last call, at
     * most what was freed since its last successful operation. The decay
     * thread may complete the frees of an idle pool after the operation:
     * then only the upper bound holds. */
    uint64_t pend_lo = 0, pend_hi = 0;
    for (int s = 0; s < PM_STREAMS; s++) {
        for (size_t i = 0; i < m->lenient[s].n; i++)
            pend_lo += m->lenient[s].v[i].size;
        for (size_t i = 0; i < m->strict[s].n; i++)
            pend_hi += m->strict[s].v[i].size;
    }
    PM_CHECK(m, (decay || st.pending_bytes >= pend_lo) && st.pending_bytes <= pend_hi,
             "pending %" PRIu64 " bytes; the model says between %" PRIu64 " and %" PRIu64,
             st.pending_bytes, pend_lo, pend_hi);
    for (int i = 0; i < PM_OWNERS; i++) {
        vram_usage_stats u;
        PM_CHECK(m, vram_owner_stats_get(m->p, m->owners[i], &u) == 0, "owner_stats_get");
        char what[32];
        snprintf(what, sizeof what, "owner%d", i);
        check_usage(m, what, &u, &m->u_owner[i], m->budget[i]);
    }
    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        vram_usage_stats u;
        PM_CHECK(m, vram_kind_stats_get(m->p, (vram_kind)k, &u) == 0, "kind_stats_get");
        check_usage(m, vram_kind_name((vram_kind)k), &u, &m->u_kind[k], 0);
    }
}

static int cmp_block(const void *a, const void *b)
{
    const pm_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void pm_check_full(pm_model *m)
{
    vram_pool_stats st;
    PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
    uint64_t hist_live[VRAM_HIST_BUCKETS] = {0};
    if (m->n_live)
        qsort(m->live, m->n_live, sizeof *m->live, cmp_block);
    for (size_t i = 0; i < m->n_live; i++) {
        const pm_block *b = &m->live[i];
        vram_block_info bi;
        int rc = vram_pool_block_info(m->p, (void *)(uintptr_t)b->addr, &bi);
        PM_CHECK(m, rc == 0, "live block 0x%" PRIx64 " unknown to the pool: %s", b->addr,
                 vram_err_name(rc));
        PM_CHECK(m,
                 bi.size == b->size && bi.requested == b->req && bi.owner == m->owners[b->owner] &&
                     bi.kind == (vram_kind)b->kind && bi.stream == pm_stream(b->stream),
                 "block 0x%" PRIx64 " changed: size %" PRIu64 "/%" PRIu64 " requested %" PRIu64
                 "/%" PRIu64,
                 b->addr, bi.size, b->size, bi.requested, b->req);
        if (i)
            PM_CHECK(m, m->live[i - 1].addr + m->live[i - 1].size <= b->addr,
                     "blocks 0x%" PRIx64 "+%" PRIu64 " and 0x%" PRIx64 " overlap",
                     m->live[i - 1].addr, m->live[i - 1].size, b->addr);
        hist_live[bucket(b->req)]++;
    }
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
        PM_CHECK(m, st.hist_live[i] == hist_live[i], "hist_live[%u] = %" PRIu64 ", model %" PRIu64,
                 i, st.hist_live[i], hist_live[i]);
        PM_CHECK(m,
                 st.hist_allocs[i] >= m->hist_ok[i] &&
                     st.hist_allocs[i] <= m->hist_ok[i] + m->hist_failed[i],
                 "hist_allocs[%u] = %" PRIu64 ", model %" PRIu64 " successful, %" PRIu64 " failed",
                 i, st.hist_allocs[i], m->hist_ok[i], m->hist_failed[i]);
    }
}

void pm_finish(pm_model *m)
{
    while (m->n_live)
        pm_free(m, m->n_live - 1, m->live[m->n_live - 1].stream);
    pm_check_stats(m);
    pm_check_full(m);
    vram_pool_stats st;
    if (m->opts.decay_ms && m->opts.drain) {
        /* Left alone, the pool gives back all but retain_min by itself: its
         * pending frees complete once it has been idle for decay_ms (no
         * events), and memory free that long goes back, within decay_ms and
         * one of the thread's rounds (at most a second). Allow five. */
        PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
        uint64_t decayed0 = st.decay_released_bytes_total, held0 = st.reserved_bytes;
        uint64_t t0 = now_ns(), deadline = t0 + (m->opts.decay_ms + 5000) * 1000000u;
        for (;;) {
            PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
            if ((st.reserved_bytes <= m->opts.retain_min && st.pending_bytes == 0) ||
                now_ns() > deadline)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        PM_CHECK(m, st.reserved_bytes <= m->opts.retain_min && st.pending_bytes == 0,
                 "%.0f ms after everything was freed with decay_ms %" PRIu64 ": reserved %" PRIu64
                 " (retain_min %" PRIu64 "), pending %" PRIu64,
                 (double)(now_ns() - t0) / 1e6, m->opts.decay_ms, st.reserved_bytes,
                 m->opts.retain_min, st.pending_bytes);
        PM_CHECK(m,
                 st.decay_released_bytes_total - decayed0 >= held0 - st.reserved_bytes,
                 "the decay gave back %" PRIu64 " bytes, but reserved fell from %" PRIu64
                 " to %" PRIu64 " on its own",
                 st.decay_released_bytes_total - decayed0, held0, st.reserved_bytes);
        for (int s = 0; s < PM_STREAMS; s++)
            m->lenient[s].n = 0; /* completed by the thread */
        pm_check_stats(m);
    }
    pm_trim(m);
    PM_CHECK(m, vram_pool_stats_get(m->p, &st) == 0, "stats_get");
    /* A trim completes every pending free (pool.h), so nothing may stay;
     * with a decay thread too: the trim must not leave memory the thread
     * is giving back counted as reserved. */
    vram_backend_stats bs;
    vram_backend_stats_get(m->b, &bs);
    PM_CHECK(m, st.reserved_bytes == 0 && bs.held_bytes == 0 && st.free_bytes == 0,
             "after freeing everything and a trim: reserved %" PRIu64 ", held %" PRIu64
             ", free %" PRIu64 ", pending %" PRIu64,
             st.reserved_bytes, bs.held_bytes, st.free_bytes, st.pending_bytes);
    int rc = vram_pool_destroy(m->p);
    PM_CHECK(m, rc == 0, "destroy: %s: %s", vram_err_name(rc), vram_last_error());
    vram_backend_stats_get(m->b, &bs);
    PM_CHECK(m, bs.held_bytes == 0, "backend still holds %" PRIu64 " after destroy", bs.held_bytes);
    rc = vram_backend_destroy(m->b);
    PM_CHECK(m, rc == 0, "backend destroy: %s", vram_err_name(rc));
    for (int s = 0; s < PM_STREAMS; s++) {
        free(m->lenient[s].v);
        free(m->strict[s].v);
    }
    free(m->live);
    m->live = NULL;
}
