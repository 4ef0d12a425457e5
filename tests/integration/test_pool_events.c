/* tests/integration/test_pool_events.c - stream order on a backend with real
 * events (VRAM_BACKEND_EVENTS), through the public API only.
 *
 * A custom backend ("fake") stands in for a GPU whose events the test
 * controls: event_record hands out a handle (or fails on demand),
 * event_query answers pending / complete / an error per the test's switch
 * (or each event's own completion flag, set by the test in stream order),
 * event_wait completes and counts, event_release counts; at the end every
 * recorded event must have been released exactly once and never used after.
 * Memory comes from a fake address space with a ledger of its own:
 *  - vmm policy: reserve / release / map / unmap; the ledger refuses double
 *    maps, partial unmaps (a mapping is given back only whole), maps outside
 *    a reservation and releases of ranges that still have mappings;
 *  - segments policy: segment_alloc / segment_free of exact segments.
 * Both refuse (VRAM_ENOMEM) past a capacity, so memory pressure can be made.
 *
 * Every scenario runs for both policies: same-stream reuse without events,
 * cross-stream reuse only after an event completed, one event per stream per
 * epoch (and none while memory the pool holds suffices), coalescing and
 * splitting of a stream's own frees, many streams, waiting when memory is
 * short (one or two streams, the other size class, the message of a refusal
 * after a wait), trim and destroy, failed records, queries and waits (and
 * what the log and vram_last_error() say then); then a randomized sequence
 * on 3 streams (the default stream among them) checked against a reference
 * model: no overlap, live blocks inside backend memory, the stream rule
 * against the events the fake reported complete, exact counters, bounds on
 * the pending bytes after every operation and, from snapshots, the pending
 * blocks exactly. VRAM_TEST_SEED=<n> runs one seed of the random part;
 * VRAM_TEST_QUICK=1 runs fewer operations; VRAM_TEST_VERBOSE=1 prints the
 * library's log lines and a summary of each random run. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "vramkit.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GRAN (2 * MiB)
#define FK_STREAMS 64 /* stream handles 0..63 (0: the default stream) */

/* ==== the fake backend ====================================================== */

typedef struct fk_range {
    uint64_t addr, size;
} fk_range;

typedef struct fk_rvec {
    fk_range *v;
    size_t n, cap;
} fk_rvec;

typedef struct fk_event {
    unsigned stream;     /* index of the stream it was recorded on */
    uint64_t t_record;   /* the fake's clock at the record */
    int complete;        /* the work before it has finished */
    int reported;        /* a query said 1 or a wait returned 0 */
    int released;        /* event_release calls */
} fk_event;

enum { Q_PENDING, Q_COMPLETE, Q_ERROR, Q_FLAG };

typedef struct fake {
    uint64_t capacity, held, peak_held;
    fk_rvec res;  /* reservations (vmm) */
    fk_rvec mem;  /* mappings (vmm) or segments, sorted by address */
    uint64_t next_res;
    /* calls */
    unsigned n_reserve, n_release, n_map, n_unmap, n_seg_alloc, n_seg_free, n_enomem;
    /* ledger violations: the first is kept */
    unsigned ledger_errors;
    char ledger_msg[256];
    /* events */
    fk_event *ev;
    size_t n_ev, cap_ev;
    int query_mode;
    int record_fail;     /* > 0: that many next records fail */
    uint64_t wait_fail;  /* bit i set: waits for events of stream i fail */
    unsigned n_record, n_record_failed, n_query, n_wait, n_ev_release;
    unsigned records_on[FK_STREAMS];
    unsigned bad_event_use; /* query/wait/release of a released or unknown event */
    char bad_msg[256];
    /* Clock: ticks at every record and at every free the test makes, so
     * that "an event recorded after a free" can be decided. */
    uint64_t clock;
    /* Per stream: the latest record time of an event reported complete. */
    uint64_t reported_upto[FK_STREAMS];
    /* Per stream: frees since its last successful record (the pool records
     * at most one event per stream per epoch, and only for frees). */
    unsigned frees_since_record[FK_STREAMS];
    unsigned empty_records; /* records on a stream with no free since the last */
} fake;

static void ledger_fail(fake *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void ledger_fail(fake *f, const char *fmt, ...)
{
    if (!f->ledger_errors++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->ledger_msg, sizeof f->ledger_msg, fmt, ap);
        va_end(ap);
    }
}

static void bad_event(fake *f, const char *what, void *h)
{
    if (!f->bad_event_use++)
        snprintf(f->bad_msg, sizeof f->bad_msg, "%s of event handle %p", what, h);
}

static void rvec_insert(fk_rvec *r, size_t at, fk_range x)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
        if (!r->v)
            abort();
    }
    memmove(&r->v[at + 1], &r->v[at], (r->n - at) * sizeof *r->v);
    r->v[at] = x;
    r->n++;
}

static void rvec_erase(fk_rvec *r, size_t at, size_t count)
{
    memmove(&r->v[at], &r->v[at + count], (r->n - at - count) * sizeof *r->v);
    r->n -= count;
}

/* Index of the first range ending after addr. */
static size_t rvec_lower(const fk_rvec *r, uint64_t addr)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->v[mid].addr + r->v[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static unsigned stream_index(vram_stream s)
{
    uintptr_t v = (uintptr_t)s;
    return v < FK_STREAMS ? (unsigned)v : FK_STREAMS - 1;
}

/* [addr, addr+size) lies entirely in backend memory (mappings may be
 * several adjacent ones; a segment must hold it alone). */
static int fk_covered(const fake *f, uint64_t addr, uint64_t size, int segments)
{
    size_t i = rvec_lower(&f->mem, addr);
    uint64_t at = addr, end = addr + size;
    while (at < end) {
        if (i >= f->mem.n || f->mem.v[i].addr > at)
            return 0;
        at = f->mem.v[i].addr + f->mem.v[i].size;
        if (segments)
            return at >= end;
        i++;
    }
    return 1;
}

static int fk_reserve(void *self, uint64_t size, uint64_t *addr)
{
    fake *f = self;
    f->n_reserve++;
    if (size % GRAN)
        ledger_fail(f, "reserve of %" PRIu64 " bytes, not a multiple of the granularity", size);
    uint64_t a = f->next_res;
    f->next_res += size + 64 * GRAN; /* gaps: reservations never touch */
    size_t at = 0;
    while (at < f->res.n && f->res.v[at].addr < a)
        at++;
    rvec_insert(&f->res, at, (fk_range){a, size});
    *addr = a;
    return 0;
}

static int fk_release(void *self, uint64_t addr, uint64_t size)
{
    fake *f = self;
    f->n_release++;
    for (size_t i = 0; i < f->res.n; i++) {
        if (f->res.v[i].addr != addr)
            continue;
        if (f->res.v[i].size != size) {
            ledger_fail(f, "release 0x%" PRIx64 " of %" PRIu64 " bytes, reserved %" PRIu64, addr,
                        size, f->res.v[i].size);
            return VRAM_EBACKEND;
        }
        size_t m = rvec_lower(&f->mem, addr);
        if (m < f->mem.n && f->mem.v[m].addr < addr + size) {
            ledger_fail(f, "release 0x%" PRIx64 " with a mapping left at 0x%" PRIx64, addr,
                        f->mem.v[m].addr);
            return VRAM_EBACKEND;
        }
        rvec_erase(&f->res, i, 1);
        return 0;
    }
    ledger_fail(f, "release of 0x%" PRIx64 ", which is not reserved", addr);
    return VRAM_EBACKEND;
}

static int fk_map(void *self, uint64_t addr, uint64_t size)
{
    fake *f = self;
    f->n_map++;
    if (!size || addr % GRAN || size % GRAN) {
        ledger_fail(f, "map 0x%" PRIx64 "+%" PRIu64 " not at the granularity", addr, size);
        return VRAM_EBACKEND;
    }
    int inside = 0;
    for (size_t i = 0; i < f->res.n; i++)
        if (addr >= f->res.v[i].addr && addr + size <= f->res.v[i].addr + f->res.v[i].size)
            inside = 1;
    if (!inside) {
        ledger_fail(f, "map 0x%" PRIx64 "+%" PRIu64 " outside every reservation", addr, size);
        return VRAM_EBACKEND;
    }
    size_t i = rvec_lower(&f->mem, addr);
    if (i < f->mem.n && f->mem.v[i].addr < addr + size) {
        ledger_fail(f, "double map: 0x%" PRIx64 "+%" PRIu64 " overlaps the mapping 0x%" PRIx64
                       "+%" PRIu64,
                    addr, size, f->mem.v[i].addr, f->mem.v[i].size);
        return VRAM_EBACKEND;
    }
    if (f->held + size > f->capacity) {
        f->n_enomem++;
        return VRAM_ENOMEM;
    }
    rvec_insert(&f->mem, i, (fk_range){addr, size});
    f->held += size;
    if (f->held > f->peak_held)
        f->peak_held = f->held;
    return 0;
}

static int fk_unmap(void *self, uint64_t addr, uint64_t size)
{
    fake *f = self;
    f->n_unmap++;
    size_t i = rvec_lower(&f->mem, addr), j = i;
    uint64_t at = addr;
    while (j < f->mem.n && f->mem.v[j].addr < addr + size) {
        const fk_range *m = &f->mem.v[j];
        if (m->addr != at || m->addr + m->size > addr + size) {
            ledger_fail(f, "partial unmap: 0x%" PRIx64 "+%" PRIu64 " against the mapping 0x%" PRIx64
                           "+%" PRIu64,
                        addr, size, m->addr, m->size);
            return VRAM_EBACKEND;
        }
        at += m->size;
        j++;
    }
    if (at != addr + size) {
        ledger_fail(f, "unmap 0x%" PRIx64 "+%" PRIu64 " of memory not mapped", addr, size);
        return VRAM_EBACKEND;
    }
    rvec_erase(&f->mem, i, j - i);
    f->held -= size;
    return 0;
}

static int fk_seg_alloc(void *self, uint64_t size, vram_stream s, uint64_t *addr)
{
    (void)s;
    fake *f = self;
    f->n_seg_alloc++;
    if (!size || size % GRAN)
        ledger_fail(f, "segment of %" PRIu64 " bytes", size);
    if (f->held + size > f->capacity) {
        f->n_enomem++;
        return VRAM_ENOMEM;
    }
    /* Lowest address with a granule of gap on both sides: freed addresses
     * are handed out again, as cuMemAlloc does. */
    uint64_t a = 0x100000000000ull;
    size_t i = 0;
    for (; i < f->mem.n; i++) {
        if (a + size + GRAN <= f->mem.v[i].addr)
            break;
        a = f->mem.v[i].addr + f->mem.v[i].size + GRAN;
    }
    rvec_insert(&f->mem, i, (fk_range){a, size});
    f->held += size;
    if (f->held > f->peak_held)
        f->peak_held = f->held;
    *addr = a;
    return 0;
}

static int fk_seg_free(void *self, uint64_t addr, uint64_t size, vram_stream s)
{
    (void)s;
    fake *f = self;
    f->n_seg_free++;
    size_t i = rvec_lower(&f->mem, addr);
    if (i >= f->mem.n || f->mem.v[i].addr != addr || f->mem.v[i].size != size) {
        ledger_fail(f, "segment_free 0x%" PRIx64 "+%" PRIu64 " of no such segment", addr, size);
        return VRAM_EBACKEND;
    }
    rvec_erase(&f->mem, i, 1);
    f->held -= size;
    return 0;
}

static int fk_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    fake *f = self;
    *free_bytes = f->capacity - f->held;
    *total = f->capacity;
    return 0;
}

static fk_event *fk_lookup(fake *f, void *h, const char *what)
{
    uintptr_t id = (uintptr_t)h;
    if (!id || id > f->n_ev) {
        bad_event(f, what, h);
        return NULL;
    }
    fk_event *e = &f->ev[id - 1];
    if (e->released) {
        bad_event(f, what, h);
        return NULL;
    }
    return e;
}

static void fk_report(fake *f, fk_event *e)
{
    e->reported = 1;
    if (e->t_record > f->reported_upto[e->stream])
        f->reported_upto[e->stream] = e->t_record;
}

/* Complete event e and, as work on a stream runs in order, every earlier
 * event of its stream. */
static void fk_complete(fake *f, fk_event *e)
{
    for (size_t k = 0; k < f->n_ev; k++)
        if (f->ev[k].stream == e->stream && f->ev[k].t_record <= e->t_record)
            f->ev[k].complete = 1;
}

static int fk_record(void *self, vram_stream s, void **out)
{
    fake *f = self;
    unsigned si = stream_index(s);
    if (f->record_fail > 0) {
        f->record_fail--;
        f->n_record_failed++;
        return VRAM_EBACKEND;
    }
    if (f->n_ev == f->cap_ev) {
        f->cap_ev = f->cap_ev ? 2 * f->cap_ev : 64;
        f->ev = realloc(f->ev, f->cap_ev * sizeof *f->ev);
        if (!f->ev)
            abort();
    }
    if (!f->frees_since_record[si])
        f->empty_records++;
    f->frees_since_record[si] = 0;
    f->ev[f->n_ev] = (fk_event){.stream = si, .t_record = ++f->clock};
    f->n_ev++;
    f->n_record++;
    f->records_on[si]++;
    *out = (void *)(uintptr_t)f->n_ev;
    return 0;
}

static int fk_query(void *self, void *h)
{
    fake *f = self;
    f->n_query++;
    fk_event *e = fk_lookup(f, h, "query");
    if (!e)
        return VRAM_EBACKEND;
    int r;
    switch (f->query_mode) {
    case Q_PENDING:
        r = e->complete;
        break;
    case Q_COMPLETE:
        fk_complete(f, e);
        r = 1;
        break;
    case Q_ERROR:
        return VRAM_EBACKEND;
    default:
        r = e->complete;
        break;
    }
    if (r)
        fk_report(f, e);
    return r;
}

static int fk_wait(void *self, void *h)
{
    fake *f = self;
    f->n_wait++;
    fk_event *e = fk_lookup(f, h, "wait");
    if (!e)
        return VRAM_EBACKEND;
    if (f->wait_fail & (1ull << e->stream))
        return VRAM_EBACKEND;
    fk_complete(f, e);
    fk_report(f, e);
    return 0;
}

static void fk_ev_release(void *self, void *h)
{
    fake *f = self;
    f->n_ev_release++;
    fk_event *e = fk_lookup(f, h, "release");
    if (e)
        e->released++;
}

static const vram_backend_ops fk_vmm_ops = {
    .name = "fake-vmm",
    .caps = VRAM_BACKEND_MAP | VRAM_BACKEND_EVENTS,
    .reserve = fk_reserve,
    .release = fk_release,
    .map = fk_map,
    .unmap = fk_unmap,
    .mem_info = fk_mem_info,
    .event_record = fk_record,
    .event_query = fk_query,
    .event_wait = fk_wait,
    .event_release = fk_ev_release,
};

static const vram_backend_ops fk_seg_ops = {
    .name = "fake-segments",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    .segment_alloc = fk_seg_alloc,
    .segment_free = fk_seg_free,
    .mem_info = fk_mem_info,
    .event_record = fk_record,
    .event_query = fk_query,
    .event_wait = fk_wait,
    .event_release = fk_ev_release,
};

/* ==== a test's world: fake, backend, pool =================================== */

/* Pool options the randomized runs vary (0: the defaults of world_open). */
static uint64_t opt_map_chunk, opt_large_round;
static double opt_retain_ratio;

typedef struct world {
    vram_policy policy;
    fake f;
    vram_backend *b;
    vram_pool *p;
} world;

/* Pool options spelled out, so that no VRAM_* variable changes a scenario:
 * 256-byte blocks, 2 MiB granules mapped one per call, requests above 1 MiB
 * in the large region, and (segments) a segment of its own, rounded to 2 MiB,
 * for every large request. retain: free mapped bytes kept (vmm). */
static void world_open(world *w, vram_policy policy, uint64_t capacity, uint64_t retain)
{
    memset(w, 0, sizeof *w);
    w->policy = policy;
    w->f.capacity = capacity;
    w->f.next_res = 0x200000000000ull;
    w->f.query_mode = Q_PENDING;
    const vram_backend_ops *ops = policy == VRAM_POLICY_VMM ? &fk_vmm_ops : &fk_seg_ops;
    assert_int_equal(vram_backend_create_custom(ops, &w->f, capacity, GRAN, &w->b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.name = "events";
    o.backend = w->b;
    o.policy = policy;
    o.alignment = 256;
    o.granularity = 0;
    o.map_chunk = opt_map_chunk;
    o.retain_min = retain;
    o.retain_ratio = opt_retain_ratio;
    o.small_size = 1 * MiB;
    o.large_round = opt_large_round;
    o.segment_small = 2 * MiB;
    o.segment_medium = 2 * MiB;
    o.trace_path = NULL;
    if (vram_pool_create(&o, &w->p))
        fail_msg("pool: %s", vram_last_error());
}

static void check_ledger(const fake *f)
{
    if (f->ledger_errors)
        fail_msg("backend ledger: %u violation(s), the first: %s", f->ledger_errors, f->ledger_msg);
    if (f->bad_event_use)
        fail_msg("%u use(s) of a released or unknown event, the first: %s", f->bad_event_use,
                 f->bad_msg);
}

/* Destroy the pool (it must succeed) and the backend, then check that the
 * backend holds nothing and every event was released exactly once. */
static void world_close(world *w)
{
    if (w->p) {
        int rc = vram_pool_destroy(w->p);
        if (rc)
            fail_msg("destroy: %s: %s", vram_err_name(rc), vram_last_error());
        w->p = NULL;
    }
    vram_backend_stats bs;
    vram_backend_stats_get(w->b, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(vram_backend_destroy(w->b), 0);
    fake *f = &w->f;
    check_ledger(f);
    assert_int_equal(f->held, 0);
    assert_int_equal(f->mem.n, 0);
    assert_int_equal(f->res.n, 0);
    assert_int_equal(f->n_reserve, f->n_release);
    for (size_t k = 0; k < f->n_ev; k++)
        if (f->ev[k].released != 1)
            fail_msg("event %zu (stream %u) released %d times", k + 1, f->ev[k].stream,
                     f->ev[k].released);
    assert_int_equal(f->n_ev_release, f->n_ev);
    assert_int_equal(f->empty_records, 0);
    free(f->ev);
    free(f->mem.v);
    free(f->res.v);
}

static vram_stream S(unsigned i) { return (vram_stream)(uintptr_t)i; }

static void *xalloc(world *w, uint64_t size, unsigned s)
{
    void *x = NULL;
    int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, S(s), &x);
    if (rc)
        fail_msg("alloc %" PRIu64 " on stream %u: %s: %s", size, s, vram_err_name(rc),
                 vram_last_error());
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w->p, x, &bi), 0);
    if (!fk_covered(&w->f, (uint64_t)(uintptr_t)x, bi.size, w->policy == VRAM_POLICY_SEGMENTS))
        fail_msg("block %p+%" PRIu64 " is not in backend memory", x, bi.size);
    return x;
}

static void xfree(world *w, void *x, unsigned s)
{
    w->f.clock++;
    w->f.frees_since_record[stream_index(S(s))]++;
    int rc = vram_pool_free(w->p, x, S(s));
    if (rc)
        fail_msg("free %p on stream %u: %s", x, s, vram_last_error());
}

static vram_pool_stats stats(world *w)
{
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(w->p, &st), 0);
    assert_int_equal(st.reserved_bytes, w->f.held);
    assert_true(st.allocated_bytes + st.pending_bytes <= st.reserved_bytes);
    return st;
}

/* Calls that take memory from the backend. */
static unsigned acquiring(const world *w)
{
    return w->policy == VRAM_POLICY_VMM ? w->f.n_map : w->f.n_seg_alloc;
}

static uint64_t backend_calls(const world *w)
{
    vram_backend_stats bs;
    vram_backend_stats_get(w->b, &bs);
    return bs.calls;
}

static int overlaps(const void *x, uint64_t xs, const void *y, uint64_t ys)
{
    uint64_t a = (uint64_t)(uintptr_t)x, b = (uint64_t)(uintptr_t)y;
    return a < b + ys && b < a + xs;
}

static vram_policy POL_VMM = VRAM_POLICY_VMM, POL_SEG = VRAM_POLICY_SEGMENTS;
#define POLICY(state) (*(vram_policy *)*(state))

/* ==== scenarios ============================================================== */

/* A stream reuses what it freed at once, with no event and no backend call;
 * a smaller request on the same stream takes the front of the block. */
static void test_same_stream_reuse(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    void *small = xalloc(&w, 64 * KiB, 1);
    xfree(&w, x, 1);
    xfree(&w, small, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB + 64 * KiB);
    uint64_t calls = backend_calls(&w);
    for (int i = 0; i < 50; i++) {
        void *y = xalloc(&w, 2 * MiB, 1);
        assert_ptr_equal(y, x);
        void *z = xalloc(&w, 64 * KiB, 1);
        assert_ptr_equal(z, small);
        xfree(&w, y, 1);
        xfree(&w, z, 1);
    }
    /* Smaller than what was freed: the front of it, the rest stays pending. */
    void *y = xalloc(&w, 1536 * KiB, 1);
    assert_ptr_equal(y, x);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 512 * KiB + 64 * KiB);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_record, 0);
    assert_int_equal(w.f.n_query, 0);
    assert_int_equal(w.f.n_wait, 0);
    assert_int_equal(st.event_waits_total, 0);
    xfree(&w, y, 1);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB + 64 * KiB);
    assert_int_equal(st.live_bytes, 0);
    world_close(&w);
}

/* Another stream gets freed memory only after an event recorded after the
 * free completed: while the query says pending it takes new memory and the
 * freed bytes stay pending; once it says complete it gets the freed address
 * without a backend call. */
static void test_cross_stream_after_completion(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    assert_int_equal(w.f.n_record, 0); /* nothing recorded at the free */
    w.f.query_mode = Q_PENDING;
    unsigned acq = acquiring(&w);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    assert_int_equal(acquiring(&w), acq + 1);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_true(w.f.n_query >= 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.event_waits_total, 0);

    /* Complete: the next allocation of stream 2 that would need new memory
     * finds the event complete and takes x, with no backend call. */
    w.f.query_mode = Q_COMPLETE;
    uint64_t calls = backend_calls(&w);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_record, 1); /* no new frees on stream 1: no new event */
    assert_int_equal(w.f.ev[0].released, 1);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.live_blocks, 2);
    assert_int_equal(st.event_waits_total, 0);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* Many frees on a stream make one event for the epoch; the event is not
 * recorded again while nothing new was freed; a new free opens a new epoch. */
static void test_one_event_per_epoch(void **state)
{
    world w;
    world_open(&w, POLICY(state), 256 * MiB, 1024 * MiB);
    enum { N = 12 };
    void *a[N];
    for (int i = 0; i < N; i++)
        a[i] = xalloc(&w, i % 2 ? 2 * MiB : 100 * KiB, 1);
    void *keep = xalloc(&w, 4 * MiB, 1);
    for (int i = 0; i < N; i++)
        xfree(&w, a[i], 1);
    assert_int_equal(w.f.n_record, 0);
    w.f.query_mode = Q_PENDING;
    void *b[6];
    for (int i = 0; i < 6; i++) {
        unsigned acq = acquiring(&w);
        b[i] = xalloc(&w, 2 * MiB, 2);
        assert_int_equal(acquiring(&w), acq + 1);
        for (int k = 0; k < N; k++)
            assert_false(overlaps(a[k], 2 * MiB, b[i], 2 * MiB));
    }
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.records_on[2], 0);
    /* One more free on stream 1: a second epoch, a second event. */
    xfree(&w, keep, 1);
    void *c = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.records_on[1], 2);
    /* Frees on stream 2 get their own event, once. */
    xfree(&w, b[0], 2);
    xfree(&w, b[1], 2);
    void *d = xalloc(&w, 6 * MiB, 3); /* needs new memory */
    void *e = xalloc(&w, 6 * MiB, 3);
    assert_int_equal(w.f.records_on[2], 1);
    assert_int_equal(w.f.records_on[1], 2);
    assert_int_equal(w.f.records_on[3], 0);
    assert_int_equal(w.f.n_record, 3);
    for (int i = 2; i < 6; i++)
        xfree(&w, b[i], 2);
    xfree(&w, c, 2);
    xfree(&w, d, 3);
    xfree(&w, e, 3);
    world_close(&w);
}

/* No event while the allocation of another stream fits memory the pool
 * holds already. */
static void test_no_event_without_need(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x0 = xalloc(&w, 256 * KiB, 1); /* a 2 MiB granule / small segment */
    void *x1 = xalloc(&w, 256 * KiB, 1);
    xfree(&w, x1, 1);
    unsigned acq = acquiring(&w);
    void *y = xalloc(&w, 256 * KiB, 2);
    assert_false(overlaps(y, 256 * KiB, x1, 256 * KiB));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)y, 256 * KiB, 0));
    assert_int_equal(acquiring(&w), acq);
    assert_int_equal(w.f.n_record, 0);
    assert_int_equal(w.f.n_query, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 256 * KiB);
    xfree(&w, x0, 1);
    xfree(&w, y, 2);
    world_close(&w);
}

/* Adjacent frees on one stream coalesce: a request of their combined size
 * on that stream gets the first address, with no backend call. Frees on
 * another stream do not join them. */
static void test_coalesce_own(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 256 * KiB, 1);
    void *b = xalloc(&w, 256 * KiB, 1);
    void *c = xalloc(&w, 256 * KiB, 1);
    void *d = xalloc(&w, 256 * KiB, 1);
    void *e = xalloc(&w, 256 * KiB, 1);
    uintptr_t base = (uintptr_t)a;
    assert_int_equal((uintptr_t)b, base + 256 * KiB);
    assert_int_equal((uintptr_t)c, base + 512 * KiB);
    assert_int_equal((uintptr_t)d, base + 768 * KiB);
    assert_int_equal((uintptr_t)e, base + 1024 * KiB);
    /* b, c, a on stream 1 (in an order that merges on both sides); d on
     * stream 2, between c and e. */
    xfree(&w, b, 1);
    xfree(&w, a, 1);
    xfree(&w, c, 1);
    xfree(&w, d, 2);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 1024 * KiB);
    uint64_t calls = backend_calls(&w);
    void *m = xalloc(&w, 768 * KiB, 1);
    assert_ptr_equal(m, a);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_record, 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 256 * KiB); /* d */
    /* Stream 1 cannot take d's bytes as its own: 1 MiB does not fit in its
     * (now empty) own space, so it does not get a block at a. */
    xfree(&w, m, 1);
    w.f.query_mode = Q_PENDING;
    void *big = xalloc(&w, 1024 * KiB, 1);
    assert_false(overlaps(big, 1024 * KiB, d, 256 * KiB));
    /* ... but stream 2 gets d back on its own. */
    void *d2 = xalloc(&w, 256 * KiB, 2);
    assert_ptr_equal(d2, d);
    xfree(&w, big, 1);
    xfree(&w, d2, 2);
    xfree(&w, e, 1);
    world_close(&w);
}

/* A larger own block is split: the rest stays pending on the stream; another
 * stream cannot get it before the event completes, the same stream can. */
static void test_split_rest_pending(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 1);
    uintptr_t xa = (uintptr_t)x;
    xfree(&w, x, 1);
    void *y = xalloc(&w, 1536 * KiB, 1);
    assert_ptr_equal(y, x);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 4 * MiB - 1536 * KiB);
    w.f.query_mode = Q_PENDING;
    /* Other streams: new memory, never the rest. */
    void *o1 = xalloc(&w, 2 * MiB, 2);
    void *o2 = xalloc(&w, 1536 * KiB, 3);
    assert_false(overlaps(o1, 2 * MiB, (void *)(xa + 1536 * KiB), 4 * MiB - 1536 * KiB));
    assert_false(overlaps(o2, 1536 * KiB, (void *)(xa + 1536 * KiB), 4 * MiB - 1536 * KiB));
    assert_int_equal(w.f.records_on[1], 1);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 4 * MiB - 1536 * KiB);
    /* The same stream: the rest, at once. */
    uint64_t calls = backend_calls(&w);
    void *r = xalloc(&w, 2 * MiB, 1);
    assert_int_equal((uintptr_t)r, xa + 1536 * KiB);
    assert_int_equal(backend_calls(&w), calls);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 512 * KiB);
    /* The event completes: the last 512 KiB join the shared space. */
    w.f.query_mode = Q_COMPLETE;
    void *o3 = xalloc(&w, 4 * MiB, 2);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 1);
    xfree(&w, r, 1);
    xfree(&w, o1, 2);
    xfree(&w, o2, 3);
    xfree(&w, o3, 2);
    world_close(&w);
}

/* Memory short: the allocation of the second stream waits for the first
 * stream's event and gets its memory (counted in event_waits_total). */
static void test_out_of_memory_waits(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    vram_pool_stats st0 = stats(&w);
    void *y = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(y, x);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(w.f.n_wait, 1);
    assert_int_equal(w.f.n_record, 1);
    assert_true(w.f.ev[0].reported);
    assert_int_equal(w.f.ev[0].released, 1);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.failed_allocs_total, 0);
    assert_true(w.f.n_enomem >= 1);
    /* A smaller request after a larger free: the wait frees the memory, the
     * pool makes room for the request. */
    xfree(&w, y, 2);
    void *z = xalloc(&w, 2 * MiB, 3);
    void *z2 = xalloc(&w, 2 * MiB, 3);
    assert_false(overlaps(z, 2 * MiB, z2, 2 * MiB));
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.pending_bytes, 0);
    /* Full, and nothing pending: the request fails, with no wait. */
    void *n = NULL;
    assert_int_equal(vram_pool_alloc(w.p, 2 * MiB, 0, VRAM_KIND_IO, S(1), &n), VRAM_ENOMEM);
    assert_null(n);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.failed_allocs_total, 1);
    xfree(&w, z, 3);
    xfree(&w, z2, 3);
    world_close(&w);
}

/* Memory short with frees pending on two other streams: the allocation
 * waits for both events; under segments the two freed segments are then
 * given back so that a larger one fits. */
static void test_out_of_memory_two_streams(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1);
    void *b = xalloc(&w, 2 * MiB, 3);
    xfree(&w, a, 1);
    xfree(&w, b, 3);
    /* A double free of a pending block is refused and changes nothing. */
    assert_int_equal(vram_pool_free(w.p, a, S(1)), VRAM_ENOTALLOC);
    assert_int_equal(vram_pool_free(w.p, a, S(2)), VRAM_ENOTALLOC);
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w.p, a, &bi), VRAM_ENOTALLOC);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.pending_bytes, 4 * MiB);
    assert_int_equal(st0.frees_total, 2);
    w.f.query_mode = Q_PENDING;
    void *c = xalloc(&w, 4 * MiB, 2);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.records_on[3], 1);
    assert_int_equal(w.f.ev[0].released + w.f.ev[1].released, 2);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    xfree(&w, c, 2);
    world_close(&w);
}

/* A trim that cannot complete a stream's frees (its wait fails) says why,
 * also when it gave other memory back to the backend on the way. */
static void test_trim_error_message(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    void *t = xalloc(&w, 2 * MiB, 2);
    xfree(&w, x, 1);
    xfree(&w, t, 2);
    w.f.wait_fail = 1ull << 1; /* stream 1's work "fails" */
    uint64_t released = 0;
    int rc = vram_pool_trim(w.p, &released);
    assert_int_equal(rc, VRAM_EBACKEND);
    assert_int_equal(released, 2 * MiB); /* t went back, x did not */
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    if (!*vram_last_error())
        fail_msg("vram_pool_trim returned %s with an empty vram_last_error()",
                 vram_err_name(rc));
    w.f.wait_fail = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_int_equal(released, 2 * MiB);
    world_close(&w);
}

/* Memory short in the other size class: the wait frees large memory, which
 * the pool gives back to the backend to fit a small request. */
static void test_out_of_memory_other_region(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    vram_pool_stats st0 = stats(&w);
    void *y = xalloc(&w, 512 * KiB, 2);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.live_blocks, 1);
    assert_true(st.reserved_bytes <= 4 * MiB);
    xfree(&w, y, 2);
    world_close(&w);
}

/* Log lines: captured (standard error stays quiet unless
 * VRAM_TEST_VERBOSE is set); tests look at the latest warnings. */
static char log_last[8][512];
static unsigned log_n;

static void log_capture(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    if (level <= VRAM_LOG_WARN)
        snprintf(log_last[log_n++ % 8], sizeof log_last[0], "%s", line);
    if (getenv("VRAM_TEST_VERBOSE"))
        fprintf(stderr, "vramkit: %s: %s\n", vram_log_level_name(level), line);
}

/* The latest captured warning containing `what`, or NULL. */
static const char *log_find(const char *what)
{
    for (unsigned k = 0; k < 8 && k < log_n; k++) {
        const char *l = log_last[(log_n - 1 - k) % 8];
        if (strstr(l, what))
            return l;
    }
    return NULL;
}

/* A failed record or query is logged with its own cause, not with the
 * sentence of an earlier, unrelated failure (here: running out of memory;
 * the fake's event calls fail with VRAM_EBACKEND and leave no sentence, so
 * the pool must make one). */
static void test_failure_log_lines(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 4 * MiB, 3);
    void *n = NULL;
    assert_int_equal(vram_pool_alloc(w.p, 2 * MiB, 0, VRAM_KIND_IO, S(3), &n), VRAM_ENOMEM);
    assert_non_null(strstr(vram_last_error(), "cannot allocate"));
    xfree(&w, a, 1);
    w.f.record_fail = 1;
    w.f.query_mode = Q_ERROR;
    void *b = xalloc(&w, 2 * MiB, 2); /* the record fails, then under pressure succeeds */
    const char *l = log_find("recording an event failed");
    assert_non_null(l);
    if (strstr(l, "ENOMEM") || strstr(l, "cannot allocate") || strstr(l, "()"))
        fail_msg("the warning for a failed event_record quotes no cause or an unrelated one: "
                 "\"%s\"",
                 l);
    xfree(&w, b, 2);
    void *c = xalloc(&w, 4 * MiB, 1); /* stream 2's event is recorded; its query fails */
    (void)c;
    l = log_find("an event failed");
    assert_non_null(l);
    if (strstr(l, "ENOMEM") || strstr(l, "cannot allocate") || strstr(l, "()"))
        fail_msg("the warning for a failed event_query quotes no cause or an unrelated one: "
                 "\"%s\"",
                 l);
    xfree(&w, c, 1);
    world_close(&w);
}

/* Many streams (the pool's table of streams grows while their own frees
 * are pending): each gets its own block back; another stream gets them
 * only after their events. */
static void test_many_streams(void **state)
{
    world w;
    world_open(&w, POLICY(state), 256 * MiB, 1024 * MiB);
    enum { N = 40 };
    void *x[N];
    for (unsigned i = 0; i < N; i++)
        x[i] = xalloc(&w, (i % 3 + 1) * 128 * KiB, i + 1);
    for (unsigned i = 0; i < N; i++)
        xfree(&w, x[i], i + 1);
    for (unsigned i = 0; i < N; i++) {
        void *y = xalloc(&w, (i % 3 + 1) * 128 * KiB, i + 1);
        assert_ptr_equal(y, x[i]);
        xfree(&w, y, i + 1);
    }
    assert_int_equal(w.f.n_record, 0);
    vram_pool_stats st = stats(&w);
    w.f.query_mode = Q_COMPLETE;
    void *big = xalloc(&w, 8 * MiB, N + 1);
    assert_int_equal(w.f.n_record, N);
    for (unsigned i = 1; i <= N; i++)
        assert_int_equal(w.f.records_on[i], 1);
    assert_true(stats(&w).pending_bytes < st.pending_bytes);
    assert_int_equal(stats(&w).pending_bytes, 0);
    /* Stream N+1 now reuses the others' memory: under vmm from the first
     * stream's block on, as it all coalesced (mapping 8 MiB for `big` gave
     * back as much of it, retained memory never raising the peak); under
     * segments without a new segment. */
    unsigned acq = acquiring(&w);
    void *z = xalloc(&w, 128 * KiB, N + 1);
    if (w.policy == VRAM_POLICY_VMM)
        assert_ptr_equal(z, x[0]);
    else
        assert_int_equal(acquiring(&w), acq);
    xfree(&w, z, N + 1);
    xfree(&w, big, N + 1);
    world_close(&w);
}

/* An allocation refused after waiting for events still says why: the
 * backend's refusal is not lost to the waits (which succeeded). */
static void test_out_of_memory_message_after_wait(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    void *y = xalloc(&w, 2 * MiB, 2); /* records event 1 for x; memory is now full */
    assert_int_equal(w.f.n_record, 1);
    void *x1 = xalloc(&w, 2 * MiB, 1); /* stream 1 takes x back: nothing pending */
    assert_ptr_equal(x1, x);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.pending_bytes, 0);
    void *n = NULL;
    int rc = vram_pool_alloc(w.p, 2 * MiB, 0, VRAM_KIND_IO, S(2), &n);
    assert_int_equal(rc, VRAM_ENOMEM);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1); /* event 1, in vain */
    assert_int_equal(w.f.ev[0].released, 1);
    const char *msg = vram_last_error();
    assert_non_null(strstr(msg, "cannot allocate"));
    size_t len = strlen(msg);
    if (len < 2 || !strcmp(msg + len - 2, ": ") || !strstr(msg, "ENOMEM"))
        fail_msg("the refusal does not say what the backend answered: \"%s\"", msg);
    xfree(&w, x1, 1);
    xfree(&w, y, 2);
    world_close(&w);
}

/* A wait that fails leaves the memory pending and the allocation refused;
 * once waits work again the memory comes back. */
static void test_failed_wait(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    w.f.wait_fail = ~0ull;
    void *y = NULL;
    assert_int_equal(vram_pool_alloc(w.p, 4 * MiB, 0, VRAM_KIND_IO, S(2), &y), VRAM_ENOMEM);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 4 * MiB);
    assert_int_not_equal(vram_pool_trim(w.p, NULL), 0); /* the wait failed */
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 4 * MiB);
    assert_int_equal(w.f.ev[0].released, 0);
    w.f.wait_fail = 0;
    y = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(y, x);
    xfree(&w, y, 2);
    /* Destroy with a wait failing: the pool still gives everything back and
     * releases the event. */
    w.f.wait_fail = ~0ull;
    world_close(&w);
}

/* Trim waits for every stream's events (recording them for open epochs),
 * releases them, and gives everything back; destroy does the same for
 * pending frees left without a trim. */
static void test_trim_and_destroy(void **state)
{
    world w;
    world_open(&w, POLICY(state), 256 * MiB, 1024 * MiB);
    void *a[3][6];
    for (unsigned s = 1; s <= 3; s++)
        for (int i = 0; i < 6; i++)
            a[s - 1][i] = xalloc(&w, (uint64_t)(i + 1) * 300 * KiB, s);
    w.f.query_mode = Q_PENDING;
    for (unsigned s = 1; s <= 3; s++)
        for (int i = 0; i < 6; i += 2)
            xfree(&w, a[s - 1][i], s % 3 + 1); /* freed on another stream */
    /* An allocation needing memory records events for the three streams. */
    void *big = xalloc(&w, 8 * MiB, 1);
    assert_int_equal(w.f.n_record, 3);
    for (unsigned s = 1; s <= 3; s++)
        for (int i = 1; i < 6; i += 2)
            xfree(&w, a[s - 1][i], s); /* open epochs, no event yet */
    xfree(&w, big, 2);
    vram_pool_stats st = stats(&w);
    assert_true(st.pending_bytes > 0);
    assert_int_equal(st.live_blocks, 0);
    uint64_t reserved = st.reserved_bytes, released = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(released, reserved);
    assert_int_equal(w.f.held, 0);
    assert_int_equal(w.f.mem.n, 0);
    vram_backend_stats bs;
    vram_backend_stats_get(w.b, &bs);
    assert_int_equal(bs.held_bytes, 0);
    assert_int_equal(w.f.n_record, 6);
    for (size_t k = 0; k < w.f.n_ev; k++) {
        assert_true(w.f.ev[k].reported);
        assert_int_equal(w.f.ev[k].released, 1);
    }
    assert_int_equal(w.f.n_wait, 6);

    /* Destroy with pending frees and recorded, unfinished events. */
    void *x = xalloc(&w, 2 * MiB, 1);
    void *y = xalloc(&w, 100 * KiB, 2);
    xfree(&w, x, 1);
    void *z = xalloc(&w, 4 * MiB, 2); /* records stream 1's event */
    assert_int_equal(w.f.n_record, 7);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w); /* checks: all released once, nothing held */
}

/* A failed record keeps the frees pending (other streams take new memory);
 * a later record succeeds and the memory is reused. */
static void test_failed_record(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_COMPLETE; /* had there been an event, it would be done */
    w.f.record_fail = 1;
    vram_pool_stats st0 = stats(&w);
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    assert_int_equal(w.f.n_record_failed, 1);
    assert_int_equal(w.f.n_record, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total + 1);
    /* The next try records the event and reuses x. */
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_int_equal(w.f.n_record, 1);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    world_close(&w);
}

/* The rest of a split own block keeps its epoch: it is released with the
 * event of that epoch, even when a newer free of the stream sits in a later
 * epoch whose record failed, and even after the stream takes that newer
 * block back (then no event covers anything of the stream but the old one).
 * Before the fix in streams.c (the rest was appended after newer frees) the
 * rest stayed pending for good: a trim returned VRAM_EBACKEND ("waiting for
 * the work on a stream failed") though no wait had failed. */
static void test_failed_record_split_rest(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *p = xalloc(&w, 4 * MiB, 1);
    void *q = xalloc(&w, 1 * MiB, 1); /* small region */
    void *r0 = xalloc(&w, 2 * MiB, 2);
    xfree(&w, p, 1);
    /* Stream 2 needs memory: event 1 covers p's epoch; still pending. */
    w.f.query_mode = Q_PENDING;
    void *r1 = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.records_on[1], 1);
    xfree(&w, q, 1);                   /* epoch 2 */
    void *p1 = xalloc(&w, 2 * MiB, 1); /* front of p; the rest stays in epoch 1 */
    assert_ptr_equal(p1, p);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB + 1 * MiB);
    /* Event 1 completes, but recording epoch 2 fails: the rest of p is
     * released all the same, and stream 2 gets it. */
    w.f.ev[0].complete = 1;
    w.f.record_fail = 1;
    unsigned acq = acquiring(&w);
    void *r2 = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.n_record_failed, 1);
    assert_true(w.f.ev[0].reported);
    assert_int_equal(w.f.ev[0].released, 1);
    st = stats(&w);
    if (st.pending_bytes != 1 * MiB)
        fail_msg("%" PRIu64 " bytes pending after event 1 completed; only q (1 MiB, epoch 2) "
                 "should be: the rest of p (epoch 1) was not released",
                 st.pending_bytes);
    assert_int_equal((uintptr_t)r2, (uintptr_t)p + 2 * MiB);
    assert_int_equal(acquiring(&w), acq);
    /* Stream 1 takes q back from its own frees: nothing is pending. */
    void *q1 = xalloc(&w, 1 * MiB, 1);
    assert_ptr_equal(q1, q);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    /* A trim has nothing to wait for and succeeds. */
    int rc = vram_pool_trim(w.p, NULL);
    if (rc)
        fail_msg("trim: %s (%s)", vram_err_name(rc), vram_last_error());
    xfree(&w, p1, 1);
    xfree(&w, q1, 1);
    xfree(&w, r0, 2);
    xfree(&w, r1, 2);
    xfree(&w, r2, 2);
    world_close(&w);
}

/* A failed query keeps the block pending; a wait under pressure gets it. */
static void test_failed_query(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_ERROR;
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(w.f.ev[0].released, 0);
    xfree(&w, y, 2);
    assert_int_equal(vram_pool_trim(w.p, NULL), 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    world_close(&w);
}

/* ==== the randomized model =================================================== */

#define RM_STREAMS 3

typedef struct rm_live {
    uint64_t addr, size, req;
    unsigned stream;
} rm_live;

typedef struct rm_freed {
    uint64_t addr, size;
    unsigned stream; /* freed on */
    uint64_t t_free;
} rm_freed;

typedef struct rmodel {
    world w;
    uint64_t seed, op;
    char where[160];
    rm_live *live;
    size_t n_live, cap_live;
    rm_freed *fr; /* freed bytes not handed out since */
    size_t n_fr, cap_fr;
    uint64_t live_req, live_size;
    uint64_t n_enomem, n_cross_reuse, n_exact_pending;
} rmodel;

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n) { return rng_next(s) % n; }

#define RM_CHECK(m, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char msg_[512];                                                                        \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                                              \
            fail_msg("[%s, op %" PRIu64 "] %s", (m)->where, (m)->op, msg_);                       \
        }                                                                                          \
    } while (0)

static void fr_push(rmodel *m, rm_freed x)
{
    if (m->n_fr == m->cap_fr) {
        m->cap_fr = m->cap_fr ? 2 * m->cap_fr : 256;
        m->fr = realloc(m->fr, m->cap_fr * sizeof *m->fr);
        if (!m->fr)
            abort();
    }
    m->fr[m->n_fr++] = x;
}

/* A block [a, a+size) was handed to stream s: check the stream rule against
 * every freed range it overlaps, then forget those bytes. */
static void rm_take(rmodel *m, uint64_t a, uint64_t size, unsigned s)
{
    uint64_t e = a + size;
    size_t n = m->n_fr;
    for (size_t i = 0; i < n; i++) {
        rm_freed x = m->fr[i];
        uint64_t xe = x.addr + x.size;
        if (x.addr >= e || xe <= a)
            continue;
        if (x.stream != s) {
            RM_CHECK(m, m->w.f.reported_upto[x.stream] > x.t_free,
                     "0x%" PRIx64 "+%" PRIu64 " freed on stream %u at t=%" PRIu64
                     " handed to stream %u with no event recorded after the free reported "
                     "complete (latest: t=%" PRIu64 ")",
                     x.addr, x.size, x.stream, x.t_free, s, m->w.f.reported_upto[x.stream]);
            m->n_cross_reuse++;
        }
        /* Keep the parts outside the block. */
        m->fr[i].size = 0;
        if (x.addr < a) {
            m->fr[i].size = a - x.addr;
        }
        if (xe > e) {
            rm_freed rest = {e, xe - e, x.stream, x.t_free};
            if (m->fr[i].size)
                fr_push(m, rest);
            else
                m->fr[i] = rest;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < m->n_fr; i++)
        if (m->fr[i].size)
            m->fr[k++] = m->fr[i];
    m->n_fr = k;
}

static void rm_check_stats(rmodel *m)
{
    world *w = &m->w;
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(w->p, &st), 0);
    RM_CHECK(m, st.live_bytes == m->live_req, "live %" PRIu64 ", model %" PRIu64, st.live_bytes,
             m->live_req);
    RM_CHECK(m, st.allocated_bytes == m->live_size, "allocated %" PRIu64 ", model %" PRIu64,
             st.allocated_bytes, m->live_size);
    RM_CHECK(m, st.live_blocks == m->n_live, "live blocks %" PRIu64 ", model %zu", st.live_blocks,
             m->n_live);
    RM_CHECK(m, st.reserved_bytes == w->f.held, "reserved %" PRIu64 ", backend holds %" PRIu64,
             st.reserved_bytes, w->f.held);
    vram_backend_stats bs;
    vram_backend_stats_get(w->b, &bs);
    RM_CHECK(m, bs.held_bytes == w->f.held, "backend stats hold %" PRIu64 ", ledger %" PRIu64,
             bs.held_bytes, w->f.held);
    RM_CHECK(m, st.allocated_bytes + st.pending_bytes <= st.reserved_bytes,
             "allocated %" PRIu64 " + pending %" PRIu64 " > reserved %" PRIu64,
             st.allocated_bytes, st.pending_bytes, st.reserved_bytes);
    /* Pending bytes: at most every freed byte not handed out since; at least
     * those freed after the latest event of their stream reported complete
     * (nothing can have released them). */
    uint64_t upper = 0, lower = 0;
    for (size_t i = 0; i < m->n_fr; i++) {
        upper += m->fr[i].size;
        if (m->fr[i].t_free > w->f.reported_upto[m->fr[i].stream]) {
            lower += m->fr[i].size;
            RM_CHECK(m, fk_covered(&w->f, m->fr[i].addr, m->fr[i].size,
                                   w->policy == VRAM_POLICY_SEGMENTS),
                     "pending 0x%" PRIx64 "+%" PRIu64 " is not in backend memory any more",
                     m->fr[i].addr, m->fr[i].size);
        }
    }
    RM_CHECK(m, st.pending_bytes <= upper && st.pending_bytes >= lower,
             "pending %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "]", st.pending_bytes, lower,
             upper);
    if (lower == upper)
        m->n_exact_pending++;
    RM_CHECK(m, w->f.ledger_errors == 0, "ledger: %s", w->f.ledger_msg);
    RM_CHECK(m, w->f.bad_event_use == 0, "events: %s", w->f.bad_msg);
    RM_CHECK(m, w->f.empty_records == 0, "an event was recorded on a stream with no new free");
}

static int cmp_live(const void *x, const void *y)
{
    const rm_live *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The snapshot's pending blocks: sizes sum to pending_bytes; each holds only
 * bytes freed on its stream and not handed out since; every byte that no
 * completed event can have released is in a pending block of its stream. */
typedef struct sbuf {
    char *d;
    size_t n, cap;
} sbuf;

static int sbuf_write(void *ctx, const char *data, size_t len)
{
    sbuf *b = ctx;
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->d = realloc(b->d, b->cap);
        if (!b->d)
            abort();
    }
    memcpy(b->d + b->n, data, len);
    b->n += len;
    b->d[b->n] = 0;
    return 0;
}

static uint64_t json_hex(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? strtoull(v->valuestring, NULL, 16) : UINT64_MAX;
}

/* Bytes of [a, e) covered by freed ranges of stream s. */
static uint64_t freed_cover(const rmodel *m, uint64_t a, uint64_t e, unsigned s)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->n_fr; i++) {
        const rm_freed *x = &m->fr[i];
        if (x->stream != s)
            continue;
        uint64_t lo = x->addr > a ? x->addr : a, hi = x->addr + x->size < e ? x->addr + x->size : e;
        if (lo < hi)
            bytes += hi - lo;
    }
    return bytes;
}

static void rm_check_snapshot(rmodel *m)
{
    sbuf b = {0};
    RM_CHECK(m, vram_pool_snapshot(m->w.p, sbuf_write, &b) == 0, "snapshot: %s", vram_last_error());
    cJSON *root = cJSON_Parse(b.d);
    free(b.d);
    RM_CHECK(m, root != NULL, "snapshot is not JSON");
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(root, "blocks");
    RM_CHECK(m, cJSON_IsArray(blocks), "snapshot has no blocks");
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(m->w.p, &st), 0);
    uint64_t pending = 0, n_live = 0;
    fk_range *pend = NULL;
    unsigned *pend_stream = NULL;
    size_t n_pend = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, blocks)
    {
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size");
        RM_CHECK(m, cJSON_IsString(state) && cJSON_IsNumber(size), "snapshot block");
        uint64_t a = json_hex(o, "address"), sz = (uint64_t)size->valuedouble;
        if (!strcmp(state->valuestring, "live")) {
            n_live++;
            continue;
        }
        if (strcmp(state->valuestring, "pending"))
            continue;
        unsigned s = stream_index((vram_stream)(uintptr_t)json_hex(o, "stream"));
        pending += sz;
        RM_CHECK(m, freed_cover(m, a, a + sz, s) == sz,
                 "pending block 0x%" PRIx64 "+%" PRIu64 " of stream %u holds bytes not freed on "
                 "that stream (or handed out since)",
                 a, sz, s);
        pend = realloc(pend, (n_pend + 1) * sizeof *pend);
        pend_stream = realloc(pend_stream, (n_pend + 1) * sizeof *pend_stream);
        if (!pend || !pend_stream)
            abort();
        pend[n_pend] = (fk_range){a, sz};
        pend_stream[n_pend++] = s;
    }
    RM_CHECK(m, pending == st.pending_bytes,
             "pending blocks of the snapshot sum to %" PRIu64 ", pending_bytes is %" PRIu64,
             pending, st.pending_bytes);
    RM_CHECK(m, n_live == m->n_live, "snapshot has %" PRIu64 " live blocks, model %zu", n_live,
             m->n_live);
    for (size_t i = 0; i < m->n_fr; i++) {
        const rm_freed *x = &m->fr[i];
        if (x->t_free <= m->w.f.reported_upto[x->stream])
            continue;
        uint64_t in = 0;
        for (size_t k = 0; k < n_pend; k++) {
            if (pend_stream[k] != x->stream)
                continue;
            uint64_t lo = x->addr > pend[k].addr ? x->addr : pend[k].addr;
            uint64_t hi = x->addr + x->size < pend[k].addr + pend[k].size ? x->addr + x->size
                                                                          : pend[k].addr + pend[k].size;
            if (lo < hi)
                in += hi - lo;
        }
        RM_CHECK(m, in == x->size,
                 "0x%" PRIx64 "+%" PRIu64 " freed on stream %u after its latest completed "
                 "event is not (all) pending on that stream",
                 x->addr, x->size, x->stream);
    }
    free(pend);
    free(pend_stream);
    cJSON_Delete(root);
}

static void rm_check_full(rmodel *m)
{
    qsort(m->live, m->n_live, sizeof *m->live, cmp_live);
    for (size_t i = 0; i < m->n_live; i++) {
        rm_live *l = &m->live[i];
        if (i + 1 < m->n_live)
            RM_CHECK(m, l->addr + l->size <= m->live[i + 1].addr,
                     "live blocks 0x%" PRIx64 "+%" PRIu64 " and 0x%" PRIx64 " overlap", l->addr,
                     l->size, m->live[i + 1].addr);
        RM_CHECK(m, fk_covered(&m->w.f, l->addr, l->size, m->w.policy == VRAM_POLICY_SEGMENTS),
                 "live 0x%" PRIx64 "+%" PRIu64 " is not in backend memory", l->addr, l->size);
        vram_block_info bi;
        RM_CHECK(m, vram_pool_block_info(m->w.p, (void *)(uintptr_t)l->addr, &bi) == 0,
                 "live 0x%" PRIx64 " unknown to the pool", l->addr);
        RM_CHECK(m, bi.size == l->size && bi.requested == l->req, "block info of 0x%" PRIx64,
                 l->addr);
    }
    rm_check_snapshot(m);
}

static uint64_t rm_size(uint64_t *rng)
{
    switch (rng_below(rng, 6)) {
    case 0:
        return 1 + rng_below(rng, 4 * KiB);
    case 1:
    case 2:
        return 256 * (1 + rng_below(rng, 1024)); /* up to 256 KiB */
    case 3:
        return 1 + rng_below(rng, 1 * MiB);
    case 4:
        return 1 * MiB + 256 * rng_below(rng, 16384); /* 1 .. 5 MiB */
    default:
        return 2 * MiB * (1 + rng_below(rng, 3));
    }
}

static void rm_alloc(rmodel *m, uint64_t *rng)
{
    world *w = &m->w;
    uint64_t size = rm_size(rng);
    unsigned s = (unsigned)rng_below(rng, RM_STREAMS); /* 0: the default stream */
    void *x = NULL;
    int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, S(s), &x);
    if (rc == VRAM_ENOMEM) {
        m->n_enomem++;
        RM_CHECK(m, x == NULL, "ptr set on failure");
        return;
    }
    RM_CHECK(m, rc == 0, "alloc %" PRIu64 " on stream %u: %s: %s", size, s, vram_err_name(rc),
             vram_last_error());
    vram_block_info bi;
    RM_CHECK(m, vram_pool_block_info(w->p, x, &bi) == 0, "no info");
    uint64_t a = (uint64_t)(uintptr_t)x;
    RM_CHECK(m, bi.size >= size && bi.requested == size && a % 256 == 0, "block info");
    RM_CHECK(m, fk_covered(&w->f, a, bi.size, w->policy == VRAM_POLICY_SEGMENTS),
             "new block 0x%" PRIx64 "+%" PRIu64 " not in backend memory", a, bi.size);
    for (size_t i = 0; i < m->n_live; i++)
        RM_CHECK(m, a + bi.size <= m->live[i].addr || m->live[i].addr + m->live[i].size <= a,
                 "new block 0x%" PRIx64 "+%" PRIu64 " overlaps live 0x%" PRIx64 "+%" PRIu64, a,
                 bi.size, m->live[i].addr, m->live[i].size);
    rm_take(m, a, bi.size, s);
    if (m->n_live == m->cap_live) {
        m->cap_live = m->cap_live ? 2 * m->cap_live : 64;
        m->live = realloc(m->live, m->cap_live * sizeof *m->live);
        if (!m->live)
            abort();
    }
    m->live[m->n_live++] = (rm_live){a, bi.size, size, s};
    m->live_req += size;
    m->live_size += bi.size;
}

static void rm_free(rmodel *m, uint64_t *rng)
{
    if (!m->n_live)
        return;
    size_t i = rng_below(rng, m->n_live);
    rm_live l = m->live[i];
    m->live[i] = m->live[--m->n_live];
    /* Mostly on the stream it was used on, sometimes on another. */
    unsigned s = rng_below(rng, 4) ? l.stream : (unsigned)rng_below(rng, RM_STREAMS);
    xfree(&m->w, (void *)(uintptr_t)l.addr, s);
    fr_push(m, (rm_freed){l.addr, l.size, s, m->w.f.clock});
    m->live_req -= l.req;
    m->live_size -= l.size;
}

/* Some work finishes: a prefix of one stream's events completes. */
static void rm_progress(rmodel *m, uint64_t *rng)
{
    fake *f = &m->w.f;
    unsigned s = (unsigned)rng_below(rng, RM_STREAMS);
    fk_event *last = NULL;
    for (size_t k = 0; k < f->n_ev; k++) {
        if (f->ev[k].stream != s || f->ev[k].complete)
            continue;
        last = &f->ev[k];
        if (rng_below(rng, 2))
            break;
    }
    if (last)
        fk_complete(f, last);
}

static void rm_trim(rmodel *m)
{
    m->w.f.record_fail = 0; /* a trim that cannot record may fail */
    int rc = vram_pool_trim(m->w.p, NULL);
    RM_CHECK(m, rc == 0, "trim: %s (\"%s\")", vram_err_name(rc), vram_last_error());
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(m->w.p, &st), 0);
    RM_CHECK(m, st.pending_bytes == 0, "pending %" PRIu64 " after a trim", st.pending_bytes);
    /* Every event recorded so far was waited for. */
    for (size_t k = 0; k < m->w.f.n_ev; k++)
        RM_CHECK(m, m->w.f.ev[k].released == 1, "event %zu not released after a trim", k + 1);
}

static uint64_t rm_refusals; /* over the seeds of one test */

static void run_random(vram_policy policy, uint64_t seed, uint64_t n_ops, int record_failures)
{
    rmodel m;
    memset(&m, 0, sizeof m);
    m.seed = seed;
    snprintf(m.where, sizeof m.where, "policy %s, seed %" PRIu64 " (VRAM_TEST_SEED=%" PRIu64 ")",
             vram_policy_name(policy), seed, seed);
    uint64_t rng = seed * 0x2545f4914f6cdd1dull + 7;
    /* Retention varies: 0 unmaps free memory at once, 16 MiB keeps some;
     * every third seed maps 8 MiB at a time, rounds large requests to
     * 64 KiB and keeps a quarter of the peak mapped. */
    if (seed % 3 == 0) {
        opt_map_chunk = 8 * MiB;
        opt_large_round = 64 * KiB;
        opt_retain_ratio = 0.25;
    }
    world_open(&m.w, policy, 64 * MiB, seed % 2 ? 16 * MiB : 0);
    opt_map_chunk = opt_large_round = 0;
    opt_retain_ratio = 0.0;
    m.w.f.query_mode = Q_FLAG;
    for (m.op = 1; m.op <= n_ops; m.op++) {
        uint64_t r = rng_below(&rng, 1000);
        if (r < 470) {
            rm_alloc(&m, &rng);
        } else if (r < 880) {
            rm_free(&m, &rng);
        } else if (r < 975) {
            rm_progress(&m, &rng);
        } else if (r < 985) {
            if (record_failures)
                m.w.f.record_fail = 1 + (int)rng_below(&rng, 2);
        } else if (r < 990) {
            rm_trim(&m);
        } else {
            /* Free a lot, so that memory is reused across streams. */
            size_t k = m.n_live / 2;
            while (k--)
                rm_free(&m, &rng);
        }
        rm_check_stats(&m);
        if (m.op % 64 == 0)
            rm_check_full(&m);
    }
    rm_check_full(&m);
    while (m.n_live)
        rm_free(&m, &rng);
    m.w.f.record_fail = 0;
    rm_check_stats(&m);
    rm_trim(&m);
    rm_check_stats(&m);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(m.w.p, &st), 0);
    RM_CHECK(&m, st.reserved_bytes == 0 && m.w.f.held == 0,
             "reserved %" PRIu64 ", held %" PRIu64 " after freeing all and a trim",
             st.reserved_bytes, m.w.f.held);
    RM_CHECK(&m, m.n_cross_reuse > 0, "no memory moved between streams: the test is too weak");
    RM_CHECK(&m, m.w.f.n_record > 0, "the sequence recorded no event: the test is too weak");
    rm_refusals += m.n_enomem;
    if (getenv("VRAM_TEST_VERBOSE"))
        print_message("%s: %" PRIu64 " ops, %u events (%u failed records), %u waits, %" PRIu64
                      " refusals, %" PRIu64 " cross-stream reuses, pending exact %" PRIu64
                      " times\n",
                      m.where, n_ops, m.w.f.n_record, m.w.f.n_record_failed, m.w.f.n_wait,
                      m.n_enomem, m.n_cross_reuse, m.n_exact_pending);
    world_close(&m.w);
    free(m.live);
    free(m.fr);
}

static void random_seeds(void **state, int record_failures)
{
    vram_policy policy = POLICY(state);
    const char *quick = getenv("VRAM_TEST_QUICK");
    uint64_t n_ops = quick && *quick && strcmp(quick, "0") ? 1500 : 6000;
    const char *one = getenv("VRAM_TEST_SEED");
    if (one && *one) {
        run_random(policy, strtoull(one, NULL, 10), n_ops, record_failures);
        return;
    }
    rm_refusals = 0;
    for (uint64_t seed = 1; seed <= 8; seed++)
        run_random(policy, seed, n_ops, record_failures);
    if (!rm_refusals)
        fail_msg("no allocation was refused: memory was never short, the test is too weak");
}

/* Events complete at random times; every record succeeds. */
static void test_random(void **state) { random_seeds(state, 0); }

/* The same with some records failing (the pool must try again later). */
static void test_random_failed_records(void **state) { random_seeds(state, 1); }

int main(void)
{
#define BOTH(fn)                                                                                   \
    cmocka_unit_test_prestate(fn, &POL_VMM), cmocka_unit_test_prestate(fn, &POL_SEG)
    const struct CMUnitTest tests[] = {
        BOTH(test_same_stream_reuse),
        BOTH(test_cross_stream_after_completion),
        BOTH(test_one_event_per_epoch),
        BOTH(test_no_event_without_need),
        BOTH(test_coalesce_own),
        BOTH(test_split_rest_pending),
        BOTH(test_out_of_memory_waits),
        BOTH(test_out_of_memory_two_streams),
        BOTH(test_out_of_memory_other_region),
        BOTH(test_out_of_memory_message_after_wait),
        BOTH(test_many_streams),
        BOTH(test_failed_wait),
        BOTH(test_failure_log_lines),
        BOTH(test_trim_error_message),
        BOTH(test_trim_and_destroy),
        BOTH(test_failed_record),
        BOTH(test_failed_record_split_rest),
        BOTH(test_failed_query),
        BOTH(test_random),
        BOTH(test_random_failed_records),
    };
#undef BOTH
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
