/* tests/fuzz/fuzz_pool.c - libFuzzer target: the input is a sequence of pool
 * operations run against the reference model of tests/integration/
 * test_pool_model.c (the harness below is the same code); any violated
 * invariant aborts. Nothing leaks: every input ends by freeing everything,
 * trimming and destroying the pool and its backend.
 *
 * Input: byte 0 chooses the policy (bit 0) and the sim capacity (bits 1-2:
 * 32, 64, 128 or 256 MiB). Then operations, each an opcode byte (mod 8):
 *   0-2 alloc:  3 bytes: exponent (mod 27), 16-bit mantissa -> size in
 *               [2^e, 2^(e+1)) clamped to 64 MiB; 1 byte: owner (bits 0-1),
 *               kind (bits 2-4, mod 7), stream (bits 5-7, mod 3)
 *   3-4 free:   2 bytes: index into the live blocks; 1 byte: stream (mod 3)
 *   5   trim
 *   6   budget: 1 byte: owner 1 or 2 (bit 0), budget from a table (bits 1-3)
 *   7   bad free: 1 byte: the last freed address or 256 past it (bit 0),
 *               stream (bits 1-2, mod 3)
 * Missing bytes read as 0. At most 4096 operations. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vramkit.h>

#define KiB (1024ull)
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

/* ==== the harness: a pool, a reference model and the checks =================
 * (the same harness drives tests/fuzz/fuzz_pool.c) */

#define H_OWNERS 4
#define H_STREAMS 3
#define H_ALIGN 256u

typedef struct hblock {
    uint64_t addr, size, req;
    int owner; /* index into h->owners */
    int kind;
    int stream;
} hblock;

typedef struct hrange {
    uint64_t addr, size;
} hrange;

typedef struct hrvec {
    hrange *v;
    size_t n, cap;
} hrvec;

typedef struct husage {
    uint64_t live, peak, blocks, allocs, frees, failed;
} husage;

typedef struct harness {
    vram_backend *b;
    vram_pool *p;
    vram_policy policy;
    uint64_t capacity, gran;
    vram_owner owners[H_OWNERS];
    uint64_t budget[H_OWNERS];
    husage u_pool, u_owner[H_OWNERS], u_kind[VRAM_KIND_COUNT];
    uint64_t allocated; /* sum of live blocks' sizes */
    uint64_t n_ebudget, n_enomem;
    hblock *live;
    size_t n_live, cap_live;
    /* Ranges freed on each stream since that stream's last operation:
     * `lenient` forgets them at any call on the stream (even a failed
     * allocation), `strict` only at a successful allocation or free. Reuse
     * by another stream of a range still in `lenient` is a violation; of one
     * only in `strict` an ambiguity of the contract (counted). */
    hrvec lenient[H_STREAMS], strict[H_STREAMS];
    uint64_t ambiguous_reuse;
    uint64_t hist_ok[VRAM_HIST_BUCKETS], hist_failed[VRAM_HIST_BUCKETS];
    uint64_t op;
    char where[128];
    void (*on_fail)(const char *msg);
} harness;

static vram_stream h_stream(int i) { return (vram_stream)(uintptr_t)(0x10 + i); }

static void h_failf(harness *h, const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "[%s, op %" PRIu64 "] ", h->where, h->op);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    h->on_fail(msg);
}

#define H_CHECK(h, cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond))                                                                               \
            h_failf((h), __VA_ARGS__);                                                             \
    } while (0)

static void hrvec_push(hrvec *r, uint64_t addr, uint64_t size)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        hrange *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            abort();
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (hrange){addr, size};
}

static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
    return a < b + bs && b < a + as;
}

static unsigned h_bucket(uint64_t size)
{
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++)
        if (size <= vram_hist_bucket_limit(i))
            return i;
    return VRAM_HIST_BUCKETS - 1;
}

static void usage_alloc(husage *u, uint64_t size)
{
    u->live += size;
    u->blocks++;
    u->allocs++;
    if (u->live > u->peak)
        u->peak = u->live;
}

static void usage_free(husage *u, uint64_t size)
{
    u->live -= size;
    u->blocks--;
    u->frees++;
}

/* Create the backend and pool; budgets[i] of owner i (0: none). Returns 0 or
 * the error of creation (the harness is then empty). */
static int h_init(harness *h, vram_policy policy, uint64_t capacity, const uint64_t *budgets,
                  void (*on_fail)(const char *), const char *where)
{
    memset(h, 0, sizeof *h);
    h->policy = policy;
    h->capacity = capacity;
    h->gran = 2 * MiB;
    h->on_fail = on_fail;
    snprintf(h->where, sizeof h->where, "%s", where);
    vram_backend_opts bo = {.capacity = capacity, .granularity = h->gran};
    int rc = vram_backend_create("sim", &bo, &h->b);
    if (rc)
        h_failf(h, "sim backend: %s: %s", vram_err_name(rc), vram_last_error());
    vram_pool_opts o;
    rc = vram_pool_opts_init(&o);
    H_CHECK(h, rc == 0, "vram_pool_opts_init: %s", vram_err_name(rc));
    o.backend = h->b;
    o.policy = policy;
    o.alignment = H_ALIGN;
    o.name = "model";
    rc = vram_pool_create(&o, &h->p);
    if (rc)
        h_failf(h, "vram_pool_create: %s: %s", vram_err_name(rc), vram_last_error());
    for (int i = 0; i < H_OWNERS; i++) {
        char name[16];
        snprintf(name, sizeof name, "owner%d", i);
        h->budget[i] = budgets ? budgets[i] : 0;
        rc = vram_owner_create(h->p, name, h->budget[i], &h->owners[i]);
        H_CHECK(h, rc == 0, "vram_owner_create: %s", vram_err_name(rc));
    }
    return 0;
}

static void h_stream_op(harness *h, int s, int succeeded)
{
    h->lenient[s].n = 0;
    if (succeeded)
        h->strict[s].n = 0;
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
 * capacity, VRAM_ENOMEM is wrong. Under segments only an empty pool is judged. */
static void h_judge_enomem(harness *h, uint64_t size)
{
    uint64_t pinned = 0;
    int empty = h->n_live == 0;
    for (size_t i = 0; i < h->n_live; i++)
        pinned += span_of(h->live[i].addr, h->live[i].size, h->gran);
    for (int s = 0; s < H_STREAMS; s++) {
        for (size_t i = 0; i < h->strict[s].n; i++) {
            pinned += span_of(h->strict[s].v[i].addr, h->strict[s].v[i].size, h->gran);
            empty = 0;
        }
    }
    uint64_t asize = (size + H_ALIGN - 1) / H_ALIGN * H_ALIGN;
    if (h->policy == VRAM_POLICY_VMM) {
        uint64_t need = ((asize + h->gran - 1) / h->gran + 1) * h->gran;
        H_CHECK(h, pinned + need > h->capacity,
                "VRAM_ENOMEM for %" PRIu64 " bytes although live and pending blocks touch at most "
                "%" PRIu64 " of %" PRIu64 " bytes (%zu live): %s",
                size, pinned, h->capacity, h->n_live, vram_last_error());
    } else {
        uint64_t need = size <= 1 * MiB ? 2 * MiB : size < 10 * MiB ? 20 * MiB
                                                                   : (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
        H_CHECK(h, !(empty && need <= h->capacity),
                "VRAM_ENOMEM for %" PRIu64 " bytes from an empty pool: %s", size,
                vram_last_error());
    }
}

/* Allocate; returns the pool's code. */
static int h_alloc(harness *h, uint64_t size, int owner, int kind, int s)
{
    h->op++;
    void *ptr = (void *)(uintptr_t)0xdead;
    int over = h->budget[owner] && h->u_owner[owner].live + size > h->budget[owner];
    int rc = vram_pool_alloc(h->p, size, h->owners[owner], (vram_kind)kind, h_stream(s), &ptr);
    unsigned bk = h_bucket(size);
    if (rc) {
        H_CHECK(h, ptr == NULL, "failed allocation left *ptr = %p", ptr);
        H_CHECK(h, rc == VRAM_EBUDGET || rc == VRAM_ENOMEM, "allocation of %" PRIu64 ": %s: %s",
                size, vram_err_name(rc), vram_last_error());
        if (over)
            H_CHECK(h, rc == VRAM_EBUDGET,
                    "owner%d at %" PRIu64 " of budget %" PRIu64 " asked %" PRIu64 ": got %s", owner,
                    h->u_owner[owner].live, h->budget[owner], size, vram_err_name(rc));
        else
            H_CHECK(h, rc != VRAM_EBUDGET,
                    "VRAM_EBUDGET for owner%d at %" PRIu64 " of budget %" PRIu64
                    " asking %" PRIu64 ": %s",
                    owner, h->u_owner[owner].live, h->budget[owner], size, vram_last_error());
        if (rc == VRAM_EBUDGET)
            h->n_ebudget++;
        else {
            h->n_enomem++;
            h_judge_enomem(h, size);
        }
        h->u_pool.failed++;
        h->u_owner[owner].failed++;
        h->u_kind[kind].failed++;
        h->hist_failed[bk]++;
        h_stream_op(h, s, 0);
        return rc;
    }
    H_CHECK(h, !over,
            "owner%d at %" PRIu64 " of budget %" PRIu64 " got %" PRIu64 " more bytes", owner,
            h->u_owner[owner].live, h->budget[owner], size);
    H_CHECK(h, ptr != NULL, "allocation returned 0 and NULL");
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    H_CHECK(h, a % H_ALIGN == 0, "block 0x%" PRIx64 " not aligned to %u", a, H_ALIGN);
    vram_block_info bi;
    rc = vram_pool_block_info(h->p, ptr, &bi);
    H_CHECK(h, rc == 0, "block_info of a new block: %s", vram_err_name(rc));
    H_CHECK(h, bi.requested == size && bi.size >= size && bi.size % H_ALIGN == 0 &&
                   bi.owner == h->owners[owner] && bi.kind == (vram_kind)kind &&
                   bi.stream == h_stream(s),
            "block_info of 0x%" PRIx64 ": size %" PRIu64 " requested %" PRIu64
            " owner %u kind %d stream %p; asked %" PRIu64 " for owner %u kind %d stream %p",
            a, bi.size, bi.requested, bi.owner, (int)bi.kind, bi.stream, size, h->owners[owner],
            kind, h_stream(s));
    for (size_t i = 0; i < h->n_live; i++)
        H_CHECK(h, !overlaps(a, bi.size, h->live[i].addr, h->live[i].size),
                "new block 0x%" PRIx64 "+%" PRIu64 " overlaps live 0x%" PRIx64 "+%" PRIu64, a,
                bi.size, h->live[i].addr, h->live[i].size);
    for (int t = 0; t < H_STREAMS; t++) {
        if (t == s)
            continue;
        for (size_t i = 0; i < h->lenient[t].n; i++)
            H_CHECK(h, !overlaps(a, bi.size, h->lenient[t].v[i].addr, h->lenient[t].v[i].size),
                    "stream %d got 0x%" PRIx64 "+%" PRIu64 ", overlapping 0x%" PRIx64 "+%" PRIu64
                    " freed on stream %d, which issued nothing since",
                    s, a, bi.size, h->lenient[t].v[i].addr, h->lenient[t].v[i].size, t);
        for (size_t i = 0; i < h->strict[t].n; i++)
            if (overlaps(a, bi.size, h->strict[t].v[i].addr, h->strict[t].v[i].size))
                h->ambiguous_reuse++;
    }
    if (h->n_live == h->cap_live) {
        size_t cap = h->cap_live ? h->cap_live * 2 : 256;
        hblock *v = realloc(h->live, cap * sizeof *v);
        if (!v)
            abort();
        h->live = v;
        h->cap_live = cap;
    }
    h->live[h->n_live++] = (hblock){a, bi.size, size, owner, kind, s};
    h->allocated += bi.size;
    usage_alloc(&h->u_pool, size);
    usage_alloc(&h->u_owner[owner], size);
    usage_alloc(&h->u_kind[kind], size);
    h->hist_ok[bk]++;
    h_stream_op(h, s, 1);
    return 0;
}

/* Free live block i on stream s. */
static void h_free(harness *h, size_t i, int s)
{
    h->op++;
    hblock blk = h->live[i];
    int rc = vram_pool_free(h->p, (void *)(uintptr_t)blk.addr, h_stream(s));
    H_CHECK(h, rc == 0, "free of live 0x%" PRIx64 ": %s: %s", blk.addr, vram_err_name(rc),
            vram_last_error());
    vram_block_info bi;
    rc = vram_pool_block_info(h->p, (void *)(uintptr_t)blk.addr, &bi);
    H_CHECK(h, rc == VRAM_ENOTALLOC, "block_info of a freed block: %s", vram_err_name(rc));
    h->live[i] = h->live[--h->n_live];
    h->allocated -= blk.size;
    usage_free(&h->u_pool, blk.req);
    usage_free(&h->u_owner[blk.owner], blk.req);
    usage_free(&h->u_kind[blk.kind], blk.req);
    h_stream_op(h, s, 1);
    hrvec_push(&h->lenient[s], blk.addr, blk.size);
    hrvec_push(&h->strict[s], blk.addr, blk.size);
}

static int h_is_live(const harness *h, uint64_t addr)
{
    for (size_t i = 0; i < h->n_live; i++)
        if (h->live[i].addr == addr)
            return 1;
    return 0;
}

/* Free an address that is not live (a double free or a stray pointer):
 * VRAM_ENOTALLOC and no change. */
static void h_bad_free(harness *h, uint64_t addr, int s)
{
    if (!addr || h_is_live(h, addr))
        return;
    h->op++;
    vram_pool_stats before, after;
    H_CHECK(h, vram_pool_stats_get(h->p, &before) == 0, "stats_get");
    int rc = vram_pool_free(h->p, (void *)(uintptr_t)addr, h_stream(s));
    H_CHECK(h, rc == VRAM_ENOTALLOC, "free of non-live 0x%" PRIx64 ": %s", addr,
            vram_err_name(rc));
    H_CHECK(h, vram_pool_stats_get(h->p, &after) == 0, "stats_get");
    H_CHECK(h, memcmp(&before, &after, sizeof before) == 0,
            "a refused free of 0x%" PRIx64 " changed the statistics", addr);
    /* A refused call on s: lenient view only. */
    h_stream_op(h, s, 0);
}

static void h_trim(harness *h)
{
    h->op++;
    uint64_t released = 0;
    int rc = vram_pool_trim(h->p, &released);
    H_CHECK(h, rc == 0, "trim: %s: %s", vram_err_name(rc), vram_last_error());
    /* A trim synchronises (pool.h): it takes every pending free as complete,
     * so what was freed before it is anyone's. */
    for (int s = 0; s < H_STREAMS; s++) {
        h->lenient[s].n = 0;
        h->strict[s].n = 0;
    }
}

static void h_set_budget(harness *h, int owner, uint64_t budget)
{
    h->op++;
    int rc = vram_owner_set_budget(h->p, h->owners[owner], budget);
    H_CHECK(h, rc == 0, "set_budget: %s", vram_err_name(rc));
    h->budget[owner] = budget;
}

static void h_check_usage(harness *h, const char *what, const vram_usage_stats *u,
                          const husage *m, uint64_t budget)
{
    H_CHECK(h,
            u->live_bytes == m->live && u->peak_live_bytes == m->peak &&
                u->live_blocks == m->blocks && u->allocs_total == m->allocs &&
                u->frees_total == m->frees && u->failed_allocs_total == m->failed &&
                u->budget_bytes == budget,
            "%s: live %" PRIu64 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64 " blocks %" PRIu64
            "/%" PRIu64 " allocs %" PRIu64 "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64
            " failed %" PRIu64 "/%" PRIu64 " budget %" PRIu64 "/%" PRIu64 " (pool/model)",
            what, u->live_bytes, m->live, u->peak_live_bytes, m->peak, u->live_blocks, m->blocks,
            u->allocs_total, m->allocs, u->frees_total, m->frees, u->failed_allocs_total,
            m->failed, u->budget_bytes, budget);
}

/* The counters after every operation. */
static void h_check_stats(harness *h)
{
    vram_pool_stats st;
    H_CHECK(h, vram_pool_stats_get(h->p, &st) == 0, "stats_get");
    const husage *m = &h->u_pool;
    H_CHECK(h,
            st.live_bytes == m->live && st.peak_live_bytes == m->peak &&
                st.live_blocks == m->blocks && st.allocs_total == m->allocs &&
                st.frees_total == m->frees && st.failed_allocs_total == m->failed &&
                st.budget_failures_total == h->n_ebudget && st.allocated_bytes == h->allocated,
            "pool: live %" PRIu64 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64 " blocks %" PRIu64
            "/%" PRIu64 " allocs %" PRIu64 "/%" PRIu64 " frees %" PRIu64 "/%" PRIu64
            " failed %" PRIu64 "/%" PRIu64 " budget failures %" PRIu64 "/%" PRIu64
            " allocated %" PRIu64 "/%" PRIu64 " (pool/model)",
            st.live_bytes, m->live, st.peak_live_bytes, m->peak, st.live_blocks, m->blocks,
            st.allocs_total, m->allocs, st.frees_total, m->frees, st.failed_allocs_total,
            m->failed, st.budget_failures_total, h->n_ebudget, st.allocated_bytes, h->allocated);
    vram_backend_stats bs;
    vram_backend_stats_get(h->b, &bs);
    H_CHECK(h, st.reserved_bytes >= st.allocated_bytes && st.allocated_bytes >= st.live_bytes,
            "reserved %" PRIu64 " >= allocated %" PRIu64 " >= live %" PRIu64 " does not hold",
            st.reserved_bytes, st.allocated_bytes, st.live_bytes);
    H_CHECK(h, st.reserved_bytes - st.allocated_bytes >= st.pending_bytes,
            "pending %" PRIu64 " exceeds reserved %" PRIu64 " - allocated %" PRIu64,
            st.pending_bytes, st.reserved_bytes, st.allocated_bytes);
    H_CHECK(h, bs.held_bytes == st.reserved_bytes,
            "backend holds %" PRIu64 " bytes for the pool, which reports %" PRIu64 " reserved",
            bs.held_bytes, st.reserved_bytes);
    H_CHECK(h, st.reserved_bytes <= h->capacity && st.peak_reserved_bytes >= st.reserved_bytes,
            "reserved %" PRIu64 " (peak %" PRIu64 ") vs capacity %" PRIu64, st.reserved_bytes,
            st.peak_reserved_bytes, h->capacity);
    /* stats.h defines free_bytes as "reserved bytes in no live block"; the
     * pool may also leave out the pending bytes (in no block anyone can use
     * yet). Either reading, exactly. */
    H_CHECK(h,
            st.free_bytes == st.reserved_bytes - st.allocated_bytes ||
                st.free_bytes == st.reserved_bytes - st.allocated_bytes - st.pending_bytes,
            "free %" PRIu64 " is neither reserved %" PRIu64 " - allocated %" PRIu64
            " nor that less pending %" PRIu64,
            st.free_bytes, st.reserved_bytes, st.allocated_bytes, st.pending_bytes);
    H_CHECK(h, st.largest_free_bytes <= st.free_bytes, "largest free %" PRIu64 " > free %" PRIu64,
            st.largest_free_bytes, st.free_bytes);
    if (st.free_bytes == 0)
        H_CHECK(h, st.fragmentation_ratio == 0.0, "fragmentation %g with nothing free",
                st.fragmentation_ratio);
    else {
        double want = 1.0 - (double)st.largest_free_bytes / (double)st.free_bytes;
        H_CHECK(h, fabs(st.fragmentation_ratio - want) < 1e-9 && st.fragmentation_ratio >= 0 &&
                       st.fragmentation_ratio <= 1,
                "fragmentation %g, want %g", st.fragmentation_ratio, want);
    }
    H_CHECK(h, st.backend_calls_total == bs.calls && st.backend_failures_total == bs.failed_calls,
            "pool counts %" PRIu64 " backend calls (%" PRIu64 " failed), the backend %" PRIu64
            " (%" PRIu64 ")",
            st.backend_calls_total, st.backend_failures_total, bs.calls, bs.failed_calls);
    H_CHECK(h, st.event_waits_total == 0, "%" PRIu64 " waits on modelled events",
            st.event_waits_total);
    /* Pending: at least what was freed since each stream's last call, at
     * most what was freed since its last successful operation. */
    uint64_t pend_lo = 0, pend_hi = 0;
    for (int s = 0; s < H_STREAMS; s++) {
        for (size_t i = 0; i < h->lenient[s].n; i++)
            pend_lo += h->lenient[s].v[i].size;
        for (size_t i = 0; i < h->strict[s].n; i++)
            pend_hi += h->strict[s].v[i].size;
    }
    H_CHECK(h, st.pending_bytes >= pend_lo && st.pending_bytes <= pend_hi,
            "pending %" PRIu64 " bytes; the model says between %" PRIu64 " and %" PRIu64,
            st.pending_bytes, pend_lo, pend_hi);
    for (int i = 0; i < H_OWNERS; i++) {
        vram_usage_stats u;
        H_CHECK(h, vram_owner_stats_get(h->p, h->owners[i], &u) == 0, "owner_stats_get");
        char what[32];
        snprintf(what, sizeof what, "owner%d", i);
        h_check_usage(h, what, &u, &h->u_owner[i], h->budget[i]);
    }
    for (int k = 0; k < VRAM_KIND_COUNT; k++) {
        vram_usage_stats u;
        H_CHECK(h, vram_kind_stats_get(h->p, (vram_kind)k, &u) == 0, "kind_stats_get");
        h_check_usage(h, vram_kind_name((vram_kind)k), &u, &h->u_kind[k], 0);
    }
}

static int cmp_block(const void *a, const void *b)
{
    const hblock *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Every live block, the histogram, and overlap over the whole set. */
static void h_check_full(harness *h)
{
    vram_pool_stats st;
    H_CHECK(h, vram_pool_stats_get(h->p, &st) == 0, "stats_get");
    uint64_t hist_live[VRAM_HIST_BUCKETS] = {0};
    if (h->n_live)
        qsort(h->live, h->n_live, sizeof *h->live, cmp_block);
    for (size_t i = 0; i < h->n_live; i++) {
        const hblock *b = &h->live[i];
        vram_block_info bi;
        int rc = vram_pool_block_info(h->p, (void *)(uintptr_t)b->addr, &bi);
        H_CHECK(h, rc == 0, "live block 0x%" PRIx64 " unknown to the pool: %s", b->addr,
                vram_err_name(rc));
        H_CHECK(h, bi.size == b->size && bi.requested == b->req &&
                       bi.owner == h->owners[b->owner] && bi.kind == (vram_kind)b->kind &&
                       bi.stream == h_stream(b->stream),
                "block 0x%" PRIx64 " changed: size %" PRIu64 "/%" PRIu64 " requested %" PRIu64
                "/%" PRIu64,
                b->addr, bi.size, b->size, bi.requested, b->req);
        if (i)
            H_CHECK(h, h->live[i - 1].addr + h->live[i - 1].size <= b->addr,
                    "blocks 0x%" PRIx64 "+%" PRIu64 " and 0x%" PRIx64 " overlap",
                    h->live[i - 1].addr, h->live[i - 1].size, b->addr);
        hist_live[h_bucket(b->req)]++;
    }
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
        H_CHECK(h, st.hist_live[i] == hist_live[i], "hist_live[%u] = %" PRIu64 ", model %" PRIu64,
                i, st.hist_live[i], hist_live[i]);
        H_CHECK(h, st.hist_allocs[i] >= h->hist_ok[i] &&
                       st.hist_allocs[i] <= h->hist_ok[i] + h->hist_failed[i],
                "hist_allocs[%u] = %" PRIu64 ", model %" PRIu64 " successful, %" PRIu64 " failed",
                i, st.hist_allocs[i], h->hist_ok[i], h->hist_failed[i]);
    }
}

/* ==== the fuzz driver ======================================================= */

static void fuzz_fail(const char *msg)
{
    fprintf(stderr, "fuzz_pool: invariant violated: %s\n", msg);
    abort();
}

static void quiet_log(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    (void)level;
    (void)line;
}

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static uint8_t rd(reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

/* Free everything, trim, destroy. Whether a trim returns blocks still
 * pending on their stream's event is left open by the contract, so only what
 * holds either way is asserted: under vmm nothing stays mapped but the
 * granules of pending blocks; under segments, with nothing pending, nothing
 * stays at all. Destroy returns everything. */
static void f_finish(harness *h)
{
    while (h->n_live)
        h_free(h, h->n_live - 1, h->live[h->n_live - 1].stream);
    h_check_stats(h);
    h_check_full(h);
    h_trim(h);
    vram_pool_stats st;
    H_CHECK(h, vram_pool_stats_get(h->p, &st) == 0, "stats_get");
    uint64_t pinned = 0, pending = 0;
    for (int s = 0; s < H_STREAMS; s++)
        for (size_t i = 0; i < h->strict[s].n; i++) {
            pinned += span_of(h->strict[s].v[i].addr, h->strict[s].v[i].size, h->gran);
            pending += h->strict[s].v[i].size;
        }
    if (h->policy == VRAM_POLICY_VMM)
        H_CHECK(h, st.reserved_bytes <= pinned,
                "after freeing everything and a trim %" PRIu64 " bytes stay mapped; pending "
                "blocks touch %" PRIu64,
                st.reserved_bytes, pinned);
    else if (!pending)
        H_CHECK(h, st.reserved_bytes == 0,
                "after freeing everything and a trim, nothing pending, %" PRIu64
                " bytes stay reserved",
                st.reserved_bytes);
    int rc = vram_pool_destroy(h->p);
    H_CHECK(h, rc == 0, "destroy: %s: %s", vram_err_name(rc), vram_last_error());
    vram_backend_stats bs;
    vram_backend_stats_get(h->b, &bs);
    H_CHECK(h, bs.held_bytes == 0, "backend still holds %" PRIu64 " after destroy", bs.held_bytes);
    rc = vram_backend_destroy(h->b);
    H_CHECK(h, rc == 0, "backend destroy: %s", vram_err_name(rc));
    for (int s = 0; s < H_STREAMS; s++) {
        free(h->lenient[s].v);
        free(h->strict[s].v);
    }
    free(h->live);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        vram_log_set_handler(quiet_log, NULL);
        once = 1;
    }
    if (size < 1)
        return 0;
    reader r = {data, size, 0};
    uint8_t head = rd(&r);
    vram_policy policy = head & 1 ? VRAM_POLICY_SEGMENTS : VRAM_POLICY_VMM;
    uint64_t capacity = (32 * MiB) << ((head >> 1) & 3);
    static const uint64_t budgets[H_OWNERS] = {0, 8 * MiB, 24 * MiB, 0};
    harness h;
    h_init(&h, policy, capacity, budgets, fuzz_fail, vram_policy_name(policy));
    uint64_t last_freed = 0;
    for (int n_ops = 0; r.at < r.n && n_ops < 4096; n_ops++) {
        uint8_t op = rd(&r) % 8;
        if (op <= 2) {
            unsigned e = rd(&r) % 27;
            uint64_t mant = (uint64_t)rd(&r) << 8;
            mant |= rd(&r);
            uint64_t sz = (1ull << e) + (mant % (1ull << e));
            if (sz > 64 * MiB)
                sz = 64 * MiB;
            uint8_t x = rd(&r);
            h_alloc(&h, sz, x & 3, ((x >> 2) & 7) % VRAM_KIND_COUNT, ((x >> 5) & 7) % H_STREAMS);
        } else if (op <= 4) {
            unsigned idx = (unsigned)rd(&r) << 8;
            idx |= rd(&r);
            int s = rd(&r) % H_STREAMS;
            if (h.n_live) {
                size_t i = idx % h.n_live;
                last_freed = h.live[i].addr;
                h_free(&h, i, s);
            }
        } else if (op == 5) {
            h_trim(&h);
        } else if (op == 6) {
            static const uint64_t table[8] = {0, 1, 4096, 1 * MiB, 8 * MiB, 24 * MiB, 64 * MiB, GiB};
            uint8_t x = rd(&r);
            h_set_budget(&h, 1 + (x & 1), table[(x >> 1) & 7]);
        } else {
            uint8_t x = rd(&r);
            h_bad_free(&h, x & 1 ? last_freed + 256 : last_freed, ((x >> 1) & 3) % H_STREAMS);
        }
        h_check_stats(&h);
        if (n_ops % 64 == 0)
            h_check_full(&h);
    }
    h_check_full(&h);
    f_finish(&h);
    return 0;
}
