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
 * The single-stream rule: while one stream alone has used the pool its frees
 * are free at once (no event, nothing pending); the first operation of a
 * second stream records one event on the first and waits for it (a join),
 * or, if that record or wait fails, is refused with VRAM_EBACKEND and leaves
 * the pool alone with its stream. The fake checks it on every operation the
 * test makes (fk_op_begin / fk_op_end): no event before the join but
 * settles, the join's on the first stream, waited for once and released.
 * What the lone stream freed may still be used by work queued on it, so it
 * must not go back to the backend before that work is done: in single-stream
 * mode an event may be recorded only on the lone stream, only with a free
 * since the previous record (or after a wait that failed): marks, recorded
 * as the pool maps, and settles, waited for at once; and every unmap /
 * segment_free made alone must give back memory whose latest free preceded
 * an event reported complete (fk_give_back checks it, range by range, at
 * every give-back in the ledger; memory no freed block used, as in the
 * unmap that rolls back a mapping that failed half way, is exempt). The
 * scenarios about the rules of several streams first bring the pool into
 * shared mode (go_shared: each of their streams touches the pool once, a
 * trim settles it, the counters they check restart); a few let the second
 * stream join by itself before anything is freed, and say so.
 *
 * Every scenario runs for both policies: same-stream reuse without events,
 * cross-stream reuse only after an event completed, one event per stream per
 * epoch (and none while memory the pool holds suffices), coalescing and
 * splitting of a stream's own frees, many streams, waiting when memory is
 * short (one or two streams, the other size class, the message of a refusal
 * after a wait), trim and destroy, failed records, queries and waits (and
 * what the log and vram_last_error() say then), a single stream on a pool at
 * its limit, the join at an allocation and at a free, a join refused (its
 * record or its wait failing), giving memory back alone (a free never gives
 * anything back; vmm only: a settle before a mapping past the pool's limit
 * unmaps the oldest free memory, just enough of it, and none for a later
 * give-back with no free in between; a completed mark sparing the wait;
 * before a trim, the memory-short retry, destroy and, vmm only, huge
 * segments; a settle whose record or wait fails: the trim fails with the
 * sentence and gives back only what a completed mark covers, an allocation
 * that needs room under the limit is refused with it, destroy keeps the
 * memory), a mapping refused half way rolled back without unmapping a
 * neighbour's granule; then a randomized sequence on 3 streams (the default stream among
 * them; one of them alone for a while first, some seeds with the first join
 * refused) and on one stream alone, checked against a reference model: no
 * overlap, live blocks inside backend memory, the stream rule (bytes freed
 * on one stream go to another only if freed before the join's wait or an
 * event recorded after their free was reported complete), exact counters
 * (waits, backend calls), bounds on the pending bytes after every operation
 * and, from snapshots, the pending blocks exactly and the bytes freed while
 * alone in free blocks.
 * VRAM_TEST_SEED=<n> runs one seed of the random part; VRAM_TEST_QUICK=1
 * runs fewer operations; VRAM_TEST_VERBOSE=1 prints the library's log lines
 * and a summary of each random run. */
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
    uint64_t t_take; /* the fake's clock when the mapping / segment was made */
    uint64_t t_free; /* the latest free (alone) of a block it backed; 0: none */
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
    int join;            /* recorded for a second stream's joining */
    int settle;          /* recorded on the lone stream before a give-back */
    int waited;          /* event_wait calls */
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
    char ledger_msg[384];
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
    /* The single-stream rule, as the test expects the pool to follow it:
     * the streams whose operations reached the pool so far (bit i), the
     * first of them, and whether a second one has joined. fk_op_begin and
     * fk_op_end bracket every operation that reaches the pool's bookkeeping
     * while it has not; the first record of a newcomer's operation then is
     * the join's: on the first stream, waited for and released at once. */
    uint64_t used;
    unsigned first;
    int shared;
    int join_expected, join_seen, join_waited; /* the current operation's */
    int join_wait_fail;  /* > 0: that many next waits for a join event fail */
    int join_record_fail; /* > 0: that many next records of a join event fail */
    unsigned n_joins, n_join_failed, n_join_records;
    uint64_t t_join;     /* record time of the join event that was waited for */
    /* Giving memory back while a single stream uses the pool: what it freed
     * was free at once, but work queued on it may still use it, so before an
     * unmap or a segment free of memory that backed a block freed at t, an
     * event recorded on the lone stream after t must have been reported
     * complete (a query that said so, or a wait): the pool records such
     * events (marks) when it maps, and waits for one (a settle) only when
     * none has completed. Memory no freed block ever used (the rollback of
     * a mapping that failed half way) may go back at once. An event
     * recorded while alone must be on the lone stream, with a free since
     * the previous record (or after a wait that failed). solo_dirty: the
     * lone stream freed something (at t_solo_free, the latest) that no
     * event reported complete covers: none recorded after it (a settle or
     * mark, or the join's) was waited for or found complete. */
    int solo_dirty;
    uint64_t t_solo_free;
    int solo_wait_failed;  /* the latest wait for a lone stream's event failed */
    int solo_freed;        /* a free alone (maybe in progress) since the latest record */
    int settle_wait_fail;  /* > 0: that many next waits for a settle event fail */
    unsigned n_settle_records, n_settle_record_failed, n_settles, n_settle_wait_failed;
    unsigned n_solo_give_backs;  /* unmaps / segment frees while alone */
    unsigned n_fresh_give_backs; /* of those, dirty but of memory taken after the free */
    int settle_idle;             /* the latest settle has given nothing back yet */
    unsigned n_idle_settles;     /* settles followed by no give-back before the next free */
    /* The backend calls, one letter each, from where a test last cleared it:
     * V reserve, L release, M map, m map refused, U unmap, A segment_alloc,
     * a segment_alloc refused, F segment_free, R record, r record failed,
     * Q query, W wait, w wait failed, X event release. */
    char log[512];
    size_t n_log;
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
        int n = vsnprintf(f->ledger_msg, sizeof f->ledger_msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof f->ledger_msg) /* the calls that led there */
            snprintf(f->ledger_msg + n, sizeof f->ledger_msg - (size_t)n, " (calls: %.60s)",
                     f->log);
    }
}

static void bad_event(fake *f, const char *what, void *h)
{
    if (!f->bad_event_use++)
        snprintf(f->bad_msg, sizeof f->bad_msg, "%s of event handle %p", what, h);
}

/* The pool is alone with its first stream: no second stream has joined (a
 * join waited for in the operation in progress counts as joined). */
static int fk_solo(const fake *f) { return !f->shared && !f->join_waited; }

static void fk_log_clear(fake *f)
{
    f->n_log = 0;
    f->log[0] = 0;
}

/* Every backend call starts here: it is logged. */
static void fk_call(fake *f, char what)
{
    if (f->n_log + 1 < sizeof f->log) {
        f->log[f->n_log++] = what;
        f->log[f->n_log] = 0;
    }
}

/* Memory [i, j) of f->mem goes back to the backend (`what`): while alone,
 * only once an event recorded after the latest free of a block it backed
 * has been reported complete. */
static void fk_give_back(fake *f, const char *what, size_t i, size_t j)
{
    if (!fk_solo(f))
        return;
    f->n_solo_give_backs++;
    f->settle_idle = 0;
    int fresh = 1;
    for (size_t k = i; k < j; k++) {
        const fk_range *m = &f->mem.v[k];
        if (!m->t_free)
            continue;
        fresh = 0;
        if (f->reported_upto[f->first] < m->t_free) {
            ledger_fail(f, "%s 0x%" PRIx64 "+%" PRIu64 " while a single stream uses the pool, "
                           "with no event recorded after its free at t=%" PRIu64 " reported "
                           "complete (latest: t=%" PRIu64 ")",
                        what, m->addr, m->size, m->t_free, f->reported_upto[f->first]);
            return;
        }
    }
    f->n_fresh_give_backs += fresh && f->solo_dirty;
}

/* A block [a, a+size) freed alone at t: the memory backing it now was used
 * by the lone stream's work until then. */
static void fk_solo_freed(fake *f, uint64_t a, uint64_t size, uint64_t t)
{
    for (size_t k = 0; k < f->mem.n; k++) {
        fk_range *m = &f->mem.v[k];
        if (m->addr < a + size && a < m->addr + m->size)
            m->t_free = t;
    }
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
    fk_call(f, 'V');
    f->n_reserve++;
    if (size % GRAN)
        ledger_fail(f, "reserve of %" PRIu64 " bytes, not a multiple of the granularity", size);
    uint64_t a = f->next_res;
    f->next_res += size + 64 * GRAN; /* gaps: reservations never touch */
    size_t at = 0;
    while (at < f->res.n && f->res.v[at].addr < a)
        at++;
    rvec_insert(&f->res, at, (fk_range){a, size, f->clock, 0});
    *addr = a;
    return 0;
}

static int fk_release(void *self, uint64_t addr, uint64_t size)
{
    fake *f = self;
    fk_call(f, 'L');
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
        fk_call(f, 'm');
        f->n_enomem++;
        return VRAM_ENOMEM;
    }
    fk_call(f, 'M');
    rvec_insert(&f->mem, i, (fk_range){addr, size, f->clock, 0});
    f->held += size;
    if (f->held > f->peak_held)
        f->peak_held = f->held;
    return 0;
}

static int fk_unmap(void *self, uint64_t addr, uint64_t size)
{
    fake *f = self;
    fk_call(f, 'U');
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
    fk_give_back(f, "unmap", i, j);
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
        fk_call(f, 'a');
        f->n_enomem++;
        return VRAM_ENOMEM;
    }
    fk_call(f, 'A');
    /* Lowest address with a granule of gap on both sides: freed addresses
     * are handed out again, as cuMemAlloc does. */
    uint64_t a = 0x100000000000ull;
    size_t i = 0;
    for (; i < f->mem.n; i++) {
        if (a + size + GRAN <= f->mem.v[i].addr)
            break;
        a = f->mem.v[i].addr + f->mem.v[i].size + GRAN;
    }
    rvec_insert(&f->mem, i, (fk_range){a, size, f->clock, 0});
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
    fk_call(f, 'F');
    f->n_seg_free++;
    size_t i = rvec_lower(&f->mem, addr);
    if (i >= f->mem.n || f->mem.v[i].addr != addr || f->mem.v[i].size != size) {
        ledger_fail(f, "segment_free 0x%" PRIx64 "+%" PRIu64 " of no such segment", addr, size);
        return VRAM_EBACKEND;
    }
    fk_give_back(f, "segment_free", i, i + 1);
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
    /* A settle waited for (or a mark found complete) covers the frees
     * before its record only: a wait for an older mark leaves later ones. */
    if (e->settle && e->t_record > f->t_solo_free)
        f->solo_dirty = 0;
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
    /* A newcomer's operation starts by joining: its first record is the
     * join's (also when it fails). */
    int join = f->join_expected && !f->join_seen;
    if (f->join_expected)
        f->join_seen = 1;
    if (join && si != f->first)
        ledger_fail(f, "the join event was recorded on stream %u, not on the first stream %u", si,
                    f->first);
    /* Alone, any other event is a settle's: before memory goes back. */
    int settle = !join && fk_solo(f);
    if (settle && (!f->used || si != f->first))
        ledger_fail(f, "an event was recorded on stream %u while a single stream (%u) uses the "
                       "pool",
                    si, f->first);
    else if (settle && !f->solo_freed && !f->solo_wait_failed)
        ledger_fail(f, "an event was recorded on the lone stream %u with no free since the "
                       "previous record",
                    si);
    if (f->record_fail > 0 || (join && f->join_record_fail > 0)) {
        fk_call(f, 'r');
        if (join && f->join_record_fail > 0)
            f->join_record_fail--;
        else
            f->record_fail--;
        f->n_record_failed++;
        f->n_settle_record_failed += settle;
        return VRAM_EBACKEND;
    }
    fk_call(f, 'R');
    if (f->n_ev == f->cap_ev) {
        f->cap_ev = f->cap_ev ? 2 * f->cap_ev : 64;
        f->ev = realloc(f->ev, f->cap_ev * sizeof *f->ev);
        if (!f->ev)
            abort();
    }
    /* The join covers all the first stream's work; its frees so far were
     * free at once, so its later epochs start after it. */
    if (!f->frees_since_record[si] && !join && !settle)
        f->empty_records++;
    f->frees_since_record[si] = 0;
    f->ev[f->n_ev] =
        (fk_event){.stream = si, .t_record = ++f->clock, .join = join, .settle = settle};
    f->n_ev++;
    f->n_join_records += join;
    f->n_settle_records += settle;
    f->solo_wait_failed = 0;
    f->solo_freed = 0;
    f->n_record++;
    f->records_on[si]++;
    *out = (void *)(uintptr_t)f->n_ev;
    return 0;
}

static int fk_query(void *self, void *h)
{
    fake *f = self;
    fk_call(f, 'Q');
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
    if (!e) {
        fk_call(f, 'w');
        return VRAM_EBACKEND;
    }
    e->waited++;
    if ((e->join && f->join_wait_fail > 0) || (e->settle && f->settle_wait_fail > 0) ||
        (f->wait_fail & (1ull << e->stream))) {
        fk_call(f, 'w');
        if (e->join && f->join_wait_fail > 0)
            f->join_wait_fail--;
        else if (e->settle && f->settle_wait_fail > 0)
            f->settle_wait_fail--;
        f->n_settle_wait_failed += e->settle;
        f->solo_wait_failed = e->settle || e->join; /* its frees stay uncovered */
        return VRAM_EBACKEND;
    }
    fk_call(f, 'W');
    fk_complete(f, e);
    fk_report(f, e);
    if (e->join) {
        f->join_waited = 1;
        f->t_join = e->t_record;
        f->solo_dirty = 0; /* the join's wait covers every free so far */
    }
    if (e->settle) {
        f->n_settles++;
        f->settle_idle = 1;
    }
    return 0;
}

static void fk_ev_release(void *self, void *h)
{
    fake *f = self;
    fk_call(f, 'X');
    f->n_ev_release++;
    fk_event *e = fk_lookup(f, h, "release");
    if (!e)
        return;
    e->released++;
    if (e->join && e->waited != 1)
        bad_event(f, "release without exactly one wait (a join event)", h);
    if (e->settle && e->waited > 1)
        bad_event(f, "release after more than one wait (a lone stream's event)", h);
}

/* A free at time t on the stream of the operation that fk_op_begin
 * opened is about to run. Alone (not a newcomer's operation), the block is
 * free at once, so any give-back from here on (a mapping's under the limit,
 * a trim's, ...) must settle first. Returns what fk_free_end needs to undo
 * that if the free fails. */
typedef struct fk_dirt {
    int set, dirty, freed;
    uint64_t t;
} fk_dirt;

static fk_dirt fk_free_begin(fake *f, uint64_t t, uint64_t addr, uint64_t size)
{
    fk_dirt d = {0, f->solo_dirty, f->solo_freed, f->t_solo_free};
    if (!f->shared && !f->join_expected) {
        f->n_idle_settles += f->settle_idle;
        f->settle_idle = 0;
        d.set = 1;
        f->solo_dirty = 1;
        f->t_solo_free = t;
        f->solo_freed = 1;
        fk_solo_freed(f, addr, size, t);
    }
    return d;
}

/* It returned rc: a free that succeeded opens or extends its stream's
 * epoch (shared) or leaves the pool dirty unless a settle inside it
 * followed (alone); one that failed freed nothing. */
static void fk_free_end(fake *f, vram_stream s, int rc, fk_dirt d)
{
    if (!rc) {
        f->frees_since_record[stream_index(s)]++;
    } else if (d.set) {
        f->solo_freed = d.freed;
        f->solo_dirty = d.dirty;
        f->t_solo_free = d.t;
    }
}

/* An operation of stream s that reaches the pool's bookkeeping is about to
 * run: a newcomer while a single stream has used the pool must join. */
static void fk_op_begin(fake *f, vram_stream s)
{
    unsigned si = stream_index(s);
    f->join_expected = !f->shared && f->used && !(f->used & (1ull << si));
    f->join_seen = f->join_waited = 0;
}

/* It returned rc. NULL if that fits the rule, else what went wrong: a
 * newcomer joined (the join's record and wait succeeded) or failed with
 * VRAM_EBACKEND and the sentence of a refused join, leaving the pool with a
 * single stream. */
static const char *fk_op_end(fake *f, vram_stream s, int rc)
{
    static char why[600];
    unsigned si = stream_index(s);
    int expected = f->join_expected;
    f->join_expected = 0;
    if (!f->used) {
        f->used = 1ull << si;
        f->first = si;
        return NULL;
    }
    if (!expected) {
        if (f->shared)
            f->used |= 1ull << si;
        return NULL;
    }
    if (f->join_waited) {
        f->shared = 1;
        f->used |= 1ull << si;
        f->n_joins++;
        return NULL;
    }
    f->n_join_failed++;
    const char *msg = vram_last_error();
    static const char prefix[] =
        "a second stream cannot join until the first's work is waited for: ";
    const char *at = strstr(msg, prefix);
    if (!f->join_seen)
        snprintf(why, sizeof why, "stream %u joined without an event on stream %u (rc %s)", si,
                 f->first, vram_err_name(rc));
    else if (rc != VRAM_EBACKEND || !at || !at[sizeof prefix - 1])
        snprintf(why, sizeof why, "the join of stream %u failed, but the operation returned %s "
                 "with \"%s\"", si, vram_err_name(rc), msg);
    else
        return NULL;
    return why;
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

/* vmm with segments too: requests of huge_size bytes or more get a segment
 * of their own (see src/core/mem/huge.c). */
static const vram_backend_ops fk_vmm_huge_ops = {
    .name = "fake-vmm-huge",
    .caps = VRAM_BACKEND_MAP | VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    .reserve = fk_reserve,
    .release = fk_release,
    .map = fk_map,
    .unmap = fk_unmap,
    .segment_alloc = fk_seg_alloc,
    .segment_free = fk_seg_free,
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
static uint64_t opt_huge_size; /* vmm: a backend with segments, for huge blocks */
static uint64_t opt_limit;     /* the pool's limit (0: the capacity) */

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

/* Pool options spelled out, so that no VRAM_* variable changes a scenario:
 * 256-byte blocks, 2 MiB granules mapped one per call, requests above 1 MiB
 * in the large region, and (segments) a segment of its own, rounded to 2 MiB,
 * for every large request; the limit is the backend's capacity unless
 * opt_limit says otherwise (not the default, the device's free memory less a
 * margin, which would be half of these small fakes), and no decay thread
 * runs. Freed memory thus stays held until a mapping (or a segment) would
 * pass the limit, the backend refuses memory, or a trim. retain: retain_min,
 * what the decay would leave held (with no decay it changes nothing). */
static void world_open(world *w, vram_policy policy, uint64_t capacity, uint64_t retain)
{
    memset(w, 0, sizeof *w);
    w->policy = policy;
    w->f.capacity = capacity;
    w->f.next_res = 0x200000000000ull;
    w->f.query_mode = Q_PENDING;
    const vram_backend_ops *ops = policy != VRAM_POLICY_VMM ? &fk_seg_ops
                                  : opt_huge_size           ? &fk_vmm_huge_ops
                                                            : &fk_vmm_ops;
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
    o.small_size = 1 * MiB;
    o.large_round = opt_large_round;
    o.huge_size = opt_huge_size;
    o.limit = opt_limit ? opt_limit : capacity; /* not the default: device free less a margin */
    o.decay_ms = 0; /* no thread: scenarios see every backend call in order */
    o.segment_small = 2 * MiB;
    o.segment_medium = 2 * MiB;
    o.configured_listeners = 0;
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

/* An allocation (of a valid request: it reaches the pool's bookkeeping),
 * checked against the single-stream rule; returns its code. */
static int op_alloc(world *w, uint64_t size, unsigned s, void **x)
{
    fk_op_begin(&w->f, S(s));
    int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, S(s), x);
    const char *bad = fk_op_end(&w->f, S(s), rc);
    if (bad)
        fail_msg("alloc %" PRIu64 " on stream %u: %s", size, s, bad);
    return rc;
}

/* A free of a live block, likewise. The fake's clock ticks before it (the
 * free's time); a free that succeeds opens or extends its stream's epoch. */
static int op_free(world *w, void *x, unsigned s, uint64_t *t_free)
{
    uint64_t t = ++w->f.clock;
    if (t_free)
        *t_free = t;
    vram_block_info bi = {0};
    vram_pool_block_info(w->p, x, &bi); /* size 0 if x is not live */
    fk_op_begin(&w->f, S(s));
    fk_dirt d = fk_free_begin(&w->f, t, (uintptr_t)x, bi.size);
    int rc = vram_pool_free(w->p, x, S(s));
    const char *bad = fk_op_end(&w->f, S(s), rc);
    if (bad)
        fail_msg("free %p on stream %u: %s", x, s, bad);
    fk_free_end(&w->f, S(s), rc, d);
    return rc;
}

static void *xalloc(world *w, uint64_t size, unsigned s)
{
    void *x = NULL;
    int rc = op_alloc(w, size, s, &x);
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
    int rc = op_free(w, x, s, NULL);
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

/* Bring the pool into shared mode before a scenario that is about the
 * rules of several streams: each stream of `streams`, in order, touches the
 * pool with a tiny allocation and its free (the first is the pool's first
 * stream, alone: its free is free at once; the second's allocation joins,
 * with one event on the first, waited for; the later ones join without an
 * event). A trim then completes the touches' frees (one event for each
 * stream after the first) and gives their memory back, so that the scenario
 * starts with nothing pending, nothing reserved and no event outstanding.
 * The fake's counters of records, queries and waits restart from zero,
 * EV(w, k) is the scenario's k-th event and w->st0 holds the pool's
 * counters, so that the scenario's assertions keep their meaning. */
static void go_shared(world *w, const unsigned *streams, size_t n)
{
    fake *f = &w->f;
    assert_true(n >= 2);
    assert_int_equal(f->n_ev, 0);
    for (size_t i = 0; i < n; i++) {
        void *x = xalloc(w, 256, streams[i]);
        xfree(w, x, streams[i]);
        if (i == 0)
            assert_int_equal(stats(w).pending_bytes, 0); /* alone: free at once */
    }
    assert_true(f->shared);
    assert_int_equal(f->n_joins, 1);
    assert_true(f->ev[0].join && f->ev[0].stream == stream_index(S(streams[0])));
    assert_int_equal(vram_pool_trim(w->p, NULL), 0);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.live_blocks, 0);
    /* The join's event and one for each later stream's free; all waited. */
    assert_int_equal(f->n_record, n);
    assert_int_equal(f->records_on[stream_index(S(streams[0]))], 1);
    assert_int_equal(f->n_wait, n);
    assert_int_equal(st.event_waits_total, n);
    assert_int_equal(f->n_ev_release, n);
    w->ev_base = f->n_ev;
    w->st0 = st;
    f->n_record = f->n_record_failed = f->n_query = f->n_wait = 0;
    memset(f->records_on, 0, sizeof f->records_on);
}

#define GO_SHARED(w, ...)                                                                          \
    do {                                                                                           \
        const unsigned streams_[] = {__VA_ARGS__};                                                 \
        go_shared((w), streams_, sizeof streams_ / sizeof *streams_);                              \
    } while (0)

static vram_policy POL_VMM = VRAM_POLICY_VMM, POL_SEG = VRAM_POLICY_SEGMENTS;
#define POLICY(state) (*(vram_policy *)*(state))

/* ==== scenarios ============================================================== */

/* A stream reuses what it freed at once, with no event and no backend call;
 * a smaller request on the same stream takes the front of the block. */
static void test_same_stream_reuse(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    GO_SHARED(&w, 1, 2);
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
    assert_int_equal(st.event_waits_total - w.st0.event_waits_total, 0);
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
    GO_SHARED(&w, 1, 2);
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
    assert_int_equal(st.event_waits_total - w.st0.event_waits_total, 0);

    /* Complete: the next allocation of stream 2 that would need new memory
     * finds the event complete and takes x, with no backend call. */
    w.f.query_mode = Q_COMPLETE;
    uint64_t calls = backend_calls(&w);
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(z, x);
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_record, 1); /* no new frees on stream 1: no new event */
    assert_int_equal(EV(&w, 0)->released, 1);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.live_blocks, 2);
    assert_int_equal(st.event_waits_total - w.st0.event_waits_total, 0);
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
    GO_SHARED(&w, 1, 2, 3);
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
    GO_SHARED(&w, 1, 2);
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
    GO_SHARED(&w, 1, 2);
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
    GO_SHARED(&w, 1, 2, 3);
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

/* Memory short (the pool at its limit, the backend's capacity here): the
 * allocation of the second stream waits for the first stream's event and
 * gets its memory (counted in event_waits_total). The limit refuses the new
 * mapping or segment before the backend is asked. */
static void test_out_of_memory_waits(void **state)
{
    world w;
    world_open(&w, POLICY(state), 4 * MiB, 1024 * MiB);
    GO_SHARED(&w, 1, 2, 3);
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
    assert_true(EV(&w, 0)->reported);
    assert_int_equal(EV(&w, 0)->released, 1);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.failed_allocs_total, 0);
    assert_int_equal(w.f.n_enomem, 0); /* the limit, not the backend, said no */
    assert_int_equal(w.f.held, 4 * MiB);
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
    if (!strstr(vram_last_error(), "the pool's limit of 4.00 MiB"))
        fail_msg("a refusal at the limit does not name it: \"%s\"", vram_last_error());
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
    GO_SHARED(&w, 1, 3, 2);
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
    assert_int_equal(st0.frees_total - w.st0.frees_total, 2);
    w.f.query_mode = Q_PENDING;
    void *c = xalloc(&w, 4 * MiB, 2);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.records_on[3], 1);
    assert_int_equal(EV(&w, 0)->released + EV(&w, 1)->released, 2);
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
    /* Stream 2's first allocation joins before anything is freed (one event
     * on stream 1, waited for): the frees below follow the shared rules. */
    void *t = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.n_joins, 1);
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
    GO_SHARED(&w, 1, 2);
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
    GO_SHARED(&w, 3, 1, 2);
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
    GO_SHARED(&w, 1, 2);
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
    /* Stream N+1 now reuses the others' memory with no backend call (far
     * below the limit, mapping 8 MiB for `big` gave none of it back): under
     * vmm at the first stream's block, the lowest address, as it all
     * coalesced; under segments without a new segment. */
    unsigned acq = acquiring(&w);
    void *z = xalloc(&w, 128 * KiB, N + 1);
    if (w.policy == VRAM_POLICY_VMM)
        assert_ptr_equal(z, x[0]);
    assert_int_equal(acquiring(&w), acq);
    xfree(&w, z, N + 1);
    xfree(&w, big, N + 1);
    world_close(&w);
}

/* An allocation refused after waiting for events still says why: the
 * backend's refusal is not lost to the waits (which succeeded). The pool's
 * limit (8 MiB) leaves room; the backend refuses, as the device shrank to
 * what the pool holds (others took the rest). */
static void test_out_of_memory_message_after_wait(void **state)
{
    world w;
    world_open(&w, POLICY(state), 8 * MiB, 1024 * MiB);
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_PENDING;
    void *y = xalloc(&w, 2 * MiB, 2); /* records event 1 for x */
    assert_int_equal(w.f.n_record, 1);
    void *x1 = xalloc(&w, 2 * MiB, 1); /* stream 1 takes x back: nothing pending */
    assert_ptr_equal(x1, x);
    w.f.capacity = w.f.held; /* the device is now full */
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.pending_bytes, 0);
    assert_int_equal(st0.reserved_bytes, 4 * MiB);
    unsigned refused = w.f.n_enomem;
    void *n = NULL;
    int rc = vram_pool_alloc(w.p, 2 * MiB, 0, VRAM_KIND_IO, S(2), &n);
    assert_int_equal(rc, VRAM_ENOMEM);
    assert_true(w.f.n_enomem > refused); /* the backend's refusal, not the limit's */
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1); /* event 1, in vain */
    assert_int_equal(EV(&w, 0)->released, 1);
    const char *msg = vram_last_error();
    assert_non_null(strstr(msg, "cannot allocate"));
    size_t len = strlen(msg);
    if (len < 2 || !strcmp(msg + len - 2, ": ") || !strstr(msg, "ENOMEM") ||
        strstr(msg, "the pool's limit"))
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
    GO_SHARED(&w, 1, 2);
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
    assert_int_equal(EV(&w, 0)->released, 0);
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
    /* Stream 2's first allocation joins before anything is freed: one event
     * on stream 1, waited for at once (the counts of records and waits below
     * include it: one more than the epochs' own). */
    for (unsigned s = 1; s <= 3; s++)
        for (int i = 0; i < 6; i++)
            a[s - 1][i] = xalloc(&w, (uint64_t)(i + 1) * 300 * KiB, s);
    assert_int_equal(w.f.n_joins, 1);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.n_wait, 1);
    w.f.query_mode = Q_PENDING;
    for (unsigned s = 1; s <= 3; s++)
        for (int i = 0; i < 6; i += 2)
            xfree(&w, a[s - 1][i], s % 3 + 1); /* freed on another stream */
    /* An allocation needing memory records events for the three streams. */
    void *big = xalloc(&w, 8 * MiB, 1);
    assert_int_equal(w.f.n_record, 1 + 3);
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
    assert_int_equal(w.f.n_record, 1 + 6);
    for (size_t k = 0; k < w.f.n_ev; k++) {
        assert_true(w.f.ev[k].reported);
        assert_int_equal(w.f.ev[k].released, 1);
    }
    assert_int_equal(w.f.n_wait, 1 + 6);

    /* Destroy with pending frees and recorded, unfinished events. */
    void *x = xalloc(&w, 2 * MiB, 1);
    void *y = xalloc(&w, 100 * KiB, 2);
    xfree(&w, x, 1);
    void *z = xalloc(&w, 4 * MiB, 2); /* records stream 1's event */
    assert_int_equal(w.f.n_record, 1 + 7);
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
    GO_SHARED(&w, 1, 2);
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
    /* Stream 2's first allocation joins before anything is freed: the
     * join's event on stream 1 is ev[0], waited for at once; the events of
     * the scenario on stream 1 come after it (one more record on it). */
    void *r0 = xalloc(&w, 2 * MiB, 2);
    assert_true(w.f.n_joins == 1 && w.f.ev[0].join && w.f.ev[0].released == 1);
    xfree(&w, p, 1);
    /* Stream 2 needs memory: event 1 covers p's epoch; still pending. */
    w.f.query_mode = Q_PENDING;
    void *r1 = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.records_on[1], 1 + 1);
    xfree(&w, q, 1);                   /* epoch 2 */
    void *p1 = xalloc(&w, 2 * MiB, 1); /* front of p; the rest stays in epoch 1 */
    assert_ptr_equal(p1, p);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB + 1 * MiB);
    /* Event 1 completes, but recording epoch 2 fails: the rest of p is
     * released all the same, and stream 2 gets it. */
    w.f.ev[1].complete = 1;
    w.f.record_fail = 1;
    unsigned acq = acquiring(&w);
    void *r2 = xalloc(&w, 2 * MiB, 2);
    assert_int_equal(w.f.n_record_failed, 1);
    assert_true(w.f.ev[1].reported);
    assert_int_equal(w.f.ev[1].released, 1);
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
    GO_SHARED(&w, 1, 2);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    w.f.query_mode = Q_ERROR;
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(x, 2 * MiB, y, 2 * MiB));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(EV(&w, 0)->released, 0);
    xfree(&w, y, 2);
    assert_int_equal(vram_pool_trim(w.p, NULL), 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    world_close(&w);
}

/* ==== the single-stream rule ================================================= */

/* One stream alone: a free is free at once, released to the shared free
 * index with no event, no query and no wait, and gives nothing back. With
 * the pool at its limit (the backend's capacity here) the stream gets what
 * it freed back with no backend call, adjacent frees coalesce (vmm) or go
 * back to the backend to make room under the limit for a larger segment
 * (segments: after one settle, an event on the stream waited for at once, as
 * work queued on it may still use them; the backend is not asked before),
 * and a trim settles once and gives everything back. */
static void test_single_stream_free_at_once(void **state)
{
    world w;
    world_open(&w, POLICY(state), 8 * MiB, 1024 * MiB);
    void *a[4];
    for (int i = 0; i < 4; i++)
        a[i] = xalloc(&w, 2 * MiB, 1);
    assert_int_equal(w.f.held, 8 * MiB); /* full */
    uint64_t calls = backend_calls(&w);
    for (int r = 0; r < 20; r++) {
        int i = (r * 3) % 4;
        xfree(&w, a[i], 1);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.pending_bytes, 0);
        assert_int_equal(st.free_bytes, 2 * MiB);
        assert_int_equal(st.live_blocks, 3);
        void *y = xalloc(&w, 2 * MiB, 1);
        assert_ptr_equal(y, a[i]);
    }
    assert_int_equal(backend_calls(&w), calls);
    /* Two adjacent frees make room for a request of their sum. */
    xfree(&w, a[1], 1);
    xfree(&w, a[2], 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.free_bytes, 4 * MiB);
    assert_int_equal(w.f.n_ev, 0);
    fk_log_clear(&w.f);
    void *big = xalloc(&w, 4 * MiB, 1);
    unsigned settles = 0;
    if (w.policy == VRAM_POLICY_VMM) {
        assert_ptr_equal(big, a[1]);
        assert_int_equal(backend_calls(&w), calls);
        assert_string_equal(w.f.log, "");
    } else {
        /* Past the limit: a settle, the two free segments back, granted. */
        assert_string_equal(w.f.log, "RWXFFA");
        settles = 1;
    }
    assert_int_equal(w.f.held, 8 * MiB);
    assert_int_equal(w.f.n_enomem, 0);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.failed_allocs_total, 0);
    assert_int_equal(w.f.n_settles, settles);
    xfree(&w, big, 1);
    xfree(&w, a[0], 1);
    xfree(&w, a[3], 1);
    uint64_t released = 0;
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, w.policy == VRAM_POLICY_VMM ? "RWXUUUU" : "RWXFFF");
    settles++;
    assert_int_equal(released, 8 * MiB);
    assert_int_equal(w.f.held, 0);
    assert_int_equal(w.f.n_ev, settles);
    assert_int_equal(w.f.n_settles, settles);
    assert_int_equal(w.f.n_query, 0);
    assert_int_equal(w.f.n_wait, settles);
    assert_int_equal(stats(&w).event_waits_total, settles);
    assert_false(w.f.shared);
    world_close(&w);
}

/* A second stream's first operation (here an allocation) joins: the pool
 * records one event on the first stream and waits for it at once (counted
 * in event_waits_total, the record in backend_calls_total). What the first
 * stream freed before goes to the newcomer at once: its work was waited
 * for. What it frees after stays pending and goes to the newcomer only once
 * an event recorded after the free completes. A third stream joins without
 * an event. */
static void test_join_waits_for_first(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    void *late = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    assert_int_equal(w.f.n_ev, 0);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.pending_bytes, 0);
    uint64_t calls = backend_calls(&w);
    w.f.query_mode = Q_PENDING;
    void *y = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(y, x); /* freed before the join, which waited for it */
    assert_int_equal(backend_calls(&w), calls);
    assert_int_equal(w.f.n_joins, 1);
    assert_int_equal(w.f.n_record, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_true(w.f.ev[0].join);
    assert_int_equal(w.f.n_wait, 1);
    assert_int_equal(w.f.ev[0].waited, 1);
    assert_true(w.f.ev[0].reported);
    assert_int_equal(w.f.ev[0].released, 1);
    assert_int_equal(w.f.n_query, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1); /* the record */
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total);
    assert_int_equal(st.pending_bytes, 0);
    /* Shared from now on: stream 1's free stays pending, ... */
    xfree(&w, late, 1);
    assert_int_equal(stats(&w).pending_bytes, 2 * MiB);
    /* ... stream 2 does not get it while the event after it is pending, ... */
    void *z = xalloc(&w, 2 * MiB, 2);
    assert_false(overlaps(z, 2 * MiB, late, 2 * MiB));
    assert_int_equal(w.f.records_on[1], 2);
    assert_false(w.f.ev[1].join);
    assert_int_equal(w.f.n_wait, 1); /* memory is not short: no wait */
    /* ... a third stream joins with no event and no wait, ... */
    void *t = xalloc(&w, 256 * KiB, 3);
    assert_int_equal(w.f.n_record, 2);
    assert_int_equal(w.f.n_wait, 1);
    /* ... and once the event completes stream 2 gets it. */
    fk_complete(&w.f, &w.f.ev[1]);
    void *u = xalloc(&w, 2 * MiB, 2);
    assert_ptr_equal(u, late);
    st = stats(&w);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(w.f.n_joins, 1);
    xfree(&w, y, 2);
    xfree(&w, z, 2);
    xfree(&w, t, 3);
    xfree(&w, u, 2);
    world_close(&w);
}

/* The join also comes with a free: a block of stream 1 freed on stream 2
 * (its first operation) makes the pool wait for stream 1 first; the block
 * is then a pending free of stream 2, which stream 1 does not get before an
 * event but stream 2 gets back at once. */
static void test_join_at_free(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1);
    void *b = xalloc(&w, 2 * MiB, 1);
    xfree(&w, a, 1); /* alone: free at once */
    xfree(&w, b, 2); /* joins */
    assert_int_equal(w.f.n_joins, 1);
    assert_int_equal(w.f.records_on[1], 1);
    assert_int_equal(w.f.n_wait, 1);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.pending_bytes, 2 * MiB);
    assert_int_equal(st.event_waits_total, 1);
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w.p, b, &bi), VRAM_ENOTALLOC);
    w.f.query_mode = Q_PENDING;
    void *c = xalloc(&w, 2 * MiB, 1); /* a: free since before the join */
    assert_ptr_equal(c, a);
    void *d = xalloc(&w, 2 * MiB, 1); /* new memory, not b */
    assert_false(overlaps(d, 2 * MiB, b, 2 * MiB));
    assert_int_equal(w.f.records_on[2], 1);
    void *e = xalloc(&w, 2 * MiB, 2); /* its own free, at once */
    assert_ptr_equal(e, b);
    assert_int_equal(stats(&w).pending_bytes, 0);
    assert_int_equal(w.f.n_wait, 1);
    xfree(&w, c, 1);
    xfree(&w, d, 1);
    xfree(&w, e, 2);
    world_close(&w);
}

/* A join refused: the record of the join's event fails, or its wait does.
 * The newcomer's allocation then fails with VRAM_EBACKEND and a sentence
 * that says why, its free of a live block likewise (the block stays live),
 * and the pool stays as it was, with a single stream: nothing taken,
 * nothing pending, no event left unreleased. Once the backend works again
 * the newcomer's next operation joins. */
typedef struct join_case {
    vram_policy policy;
    int wait_fails;
} join_case;
static join_case JOIN_RECORD_VMM = {VRAM_POLICY_VMM, 0};
static join_case JOIN_RECORD_SEG = {VRAM_POLICY_SEGMENTS, 0};
static join_case JOIN_WAIT_VMM = {VRAM_POLICY_VMM, 1};
static join_case JOIN_WAIT_SEG = {VRAM_POLICY_SEGMENTS, 1};

static void check_refused_join(world *w, const vram_pool_stats *st0, const char *what)
{
    const char *msg = vram_last_error();
    if (!strstr(msg, "pool \"events\": a second stream cannot join until the first's work is "
                     "waited for: ") ||
        !strstr(msg, what))
        fail_msg("refused join, expected a sentence naming %s: \"%s\"", what, msg);
    assert_false(w->f.shared);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.live_bytes, st0->live_bytes);
    assert_int_equal(st.allocated_bytes, st0->allocated_bytes);
    assert_int_equal(st.live_blocks, st0->live_blocks);
    assert_int_equal(st.allocs_total, st0->allocs_total);
    assert_int_equal(st.frees_total, st0->frees_total);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, st0->reserved_bytes);
    assert_int_equal(w->f.n_ev_release, w->f.n_ev); /* a failed wait's event released too */
}

static void test_join_refused(void **state)
{
    const join_case *jc = *state;
    world w;
    world_open(&w, jc->policy, 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1);
    void *b = xalloc(&w, 256 * KiB, 1);
    xfree(&w, a, 1);
    vram_pool_stats st0 = stats(&w);
    if (jc->wait_fails)
        w.f.join_wait_fail = 2;
    else
        w.f.record_fail = 2;
    const char *what = jc->wait_fails ? "event_wait" : "event_record";
    /* The allocation is refused (op_alloc checks the code and sentence). */
    void *y = (void *)&y;
    assert_int_equal(op_alloc(&w, 2 * MiB, 2, &y), VRAM_EBACKEND);
    assert_null(y);
    check_refused_join(&w, &st0, what);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 1);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, jc->wait_fails);
    if (jc->wait_fails) {
        assert_int_equal(w.f.n_ev, 1);
        assert_true(w.f.ev[0].join && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
        assert_int_equal(w.f.ev[0].released, 1);
    } else {
        assert_int_equal(w.f.n_record_failed, 1);
        assert_int_equal(w.f.n_ev, 0);
    }
    /* The newcomer's free of a live block: refused, the block stays live. */
    assert_int_equal(op_free(&w, b, 2, NULL), VRAM_EBACKEND);
    check_refused_join(&w, &st0, what);
    vram_block_info bi;
    assert_int_equal(vram_pool_block_info(w.p, b, &bi), 0);
    assert_int_equal(bi.size, 256 * KiB);
    /* Still alone: stream 1's frees are free at once. */
    void *c = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(c, a);
    xfree(&w, c, 1);
    assert_int_equal(stats(&w).pending_bytes, 0);
    /* The backend works again: the newcomer's next operation joins and gets
     * what stream 1 freed before (the join waited for it). */
    y = xalloc(&w, 2 * MiB, 2);
    assert_true(w.f.shared);
    assert_int_equal(w.f.n_join_failed, 2);
    assert_int_equal(w.f.n_joins, 1);
    assert_ptr_equal(y, a);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2 * jc->wait_fails + 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    /* Shared rules now: a free on stream 2 is pending. */
    xfree(&w, b, 2);
    assert_int_equal(stats(&w).pending_bytes, 256 * KiB);
    xfree(&w, y, 2);
    world_close(&w); /* every event released once, nothing held */
}

/* ==== giving memory back while alone ======================================== */

/* What a single stream freed is free at once, but work queued on the stream
 * before the free may still use it: before any of it goes back to the
 * backend the pool records one event on the stream and waits for it (a
 * settle, counted in event_waits_total, its record in backend_calls_total),
 * once per batch of frees; the fake refuses an unmap or a segment_free made
 * alone with a free since the last settle, and a settle with none. */

static const char *const settle_sentence =
    "pool \"events\": memory freed on the stream cannot be given back before its work is "
    "waited for: ";

/* The k-th event of the world is a settle on stream s, waited for once,
 * reported complete and released. */
static void check_settle_event(const world *w, size_t k, unsigned s)
{
    const fk_event *e = &w->f.ev[k];
    if (!e->settle || e->join || e->stream != s || e->waited != 1 || !e->reported ||
        e->released != 1)
        fail_msg("event %zu: settle %d, join %d, stream %u (expected %u), waited %d, reported "
                 "%d, released %d",
                 k + 1, e->settle, e->join, e->stream, s, e->waited, e->reported, e->released);
}

/* vmm alone: a mapping records a mark (an event covering the frees so far)
 * on the lone stream; once its work is done, memory freed before it goes
 * back with a query and no wait; memory freed after it needs a settle. */
static void test_solo_mark_spares_wait(void **state)
{
    (void)state;
    world w;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 1024 * MiB);
    void *a = xalloc(&w, 2 * MiB, 1), *b = xalloc(&w, 2 * MiB, 1);
    fk_log_clear(&w.f);
    xfree(&w, a, 1); /* stays mapped: a free gives nothing back */
    assert_string_equal(w.f.log, "");
    void *c = xalloc(&w, 4 * MiB, 1); /* fresh granules: a mark, then the mappings */
    assert_string_equal(w.f.log, "RMM");
    size_t mark = w.f.n_ev - 1;
    assert_true(w.f.ev[mark].settle && !w.f.ev[mark].waited);
    fk_complete(&w.f, &w.f.ev[mark]); /* the GPU got there */
    vram_pool_stats st0 = stats(&w);
    fk_log_clear(&w.f);
    xfree(&w, b, 1); /* freed after the mark */
    assert_int_equal(vram_pool_trim(w.p, NULL), 0);
    /* a's granule after the query, b's after a settle (record, wait). */
    assert_string_equal(w.f.log, "QXURWXU");
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_true(w.f.ev[mark].reported && !w.f.ev[mark].waited && w.f.ev[mark].released == 1);
    xfree(&w, c, 1);
    world_close(&w);
}

/* vmm: a free never unmaps; a mapping that would pass the pool's limit
 * (12 MiB) first unmaps free memory, oldest first and just enough of it,
 * after exactly one settle (record, wait, release, then the unmap). A
 * give-back with no free in between waits no more: a later allocation's,
 * and a trim's. A new batch of frees gets one new settle. */
static void test_solo_limit_settles(void **state)
{
    (void)state;
    world w;
    opt_limit = 12 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 2 * MiB);
    opt_limit = 0;
    void *a = xalloc(&w, 2 * MiB, 3), *b = xalloc(&w, 2 * MiB, 3);
    void *c = xalloc(&w, 2 * MiB, 3), *d = xalloc(&w, 2 * MiB, 3);
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.limit_bytes, 12 * MiB);
    fk_log_clear(&w.f);
    xfree(&w, a, 3);
    xfree(&w, c, 3); /* 4 MiB free, all of it still mapped */
    assert_string_equal(w.f.log, "");
    assert_true(w.f.solo_dirty);
    assert_int_equal(stats(&w).reserved_bytes, 8 * MiB);
    /* 6 MiB fits neither a nor c: 3 new granules would make 14 MiB. One
     * settle, then a's granule (the oldest free) goes back, c's stays. */
    void *e = xalloc(&w, 6 * MiB, 3);
    assert_string_equal(w.f.log, "RWXUMMM");
    assert_int_equal(w.f.n_ev, 1);
    check_settle_event(&w, 0, 3);
    assert_false(w.f.solo_dirty);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)a, 2 * MiB, 0));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)c, 2 * MiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    /* record, unmap, three maps */
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 5);
    assert_int_equal(st.backend_failures_total, st0.backend_failures_total);
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 2 * MiB);
    assert_int_equal(st.pending_bytes, 0);
    assert_int_equal(st.reserved_bytes, 12 * MiB);
    assert_int_equal(st.failed_allocs_total, 0);
    /* A small request (the large region's free c cannot serve it) needs a
     * granule at the limit: c's goes back first, with no wait (nothing was
     * freed since the settle). */
    fk_log_clear(&w.f);
    void *s1 = xalloc(&w, 1 * MiB, 3);
    assert_string_equal(w.f.log, "UM");
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)c, 2 * MiB, 0));
    assert_int_equal(stats(&w).reserved_bytes, 12 * MiB);
    /* A new batch of frees (e: three granules, mapped one each); the next
     * granule needed gets one settle for it and e's first granule back. */
    fk_log_clear(&w.f);
    xfree(&w, e, 3);
    assert_string_equal(w.f.log, "");
    void *s2 = xalloc(&w, 1 * MiB, 3); /* the rest of s1's granule */
    assert_string_equal(w.f.log, "");
    void *s3 = xalloc(&w, 1 * MiB, 3); /* a new granule */
    assert_string_equal(w.f.log, "RWXUM");
    check_settle_event(&w, 1, 3);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)e, 2 * MiB, 0));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)e + 2 * MiB, 4 * MiB, 0));
    /* A trim right after: no free since the settle, no wait. */
    fk_log_clear(&w.f);
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "UU");
    assert_int_equal(released, 4 * MiB);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.reserved_bytes, 8 * MiB); /* b, d and two small granules */
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 10 * MiB);
    assert_int_equal(w.f.n_settles, 2);
    assert_int_equal(w.f.n_query, 0);
    assert_false(w.f.shared);
    fk_log_clear(&w.f);
    xfree(&w, b, 3);
    xfree(&w, d, 3);
    xfree(&w, s1, 3);
    xfree(&w, s2, 3);
    xfree(&w, s3, 3);
    assert_string_equal(w.f.log, ""); /* frees give nothing back */
    assert_int_equal(w.f.n_settles, 2);
    world_close(&w); /* destroy: one settle for the frees, then each region */
    assert_int_equal(w.f.n_settles, 3);
    assert_string_equal(w.f.log, "RWXUULUUL"); /* small: s1..s3's granules; large: b, d */
}

/* A trim alone settles once (on the stream, the default stream here), then
 * gives everything free back; a trim with nothing freed since waits for
 * nothing; a new batch of frees gets a new settle. */
static void test_solo_trim_settles(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    const char *give = w.policy == VRAM_POLICY_VMM ? "U" : "F";
    void *x1 = xalloc(&w, 2 * MiB, 0), *x2 = xalloc(&w, 4 * MiB, 0);
    void *x3 = xalloc(&w, 256 * KiB, 0);
    fk_log_clear(&w.f);
    xfree(&w, x1, 0);
    xfree(&w, x2, 0);
    xfree(&w, x3, 0);
    assert_string_equal(w.f.log, ""); /* frees: nothing goes back, no event */
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.free_bytes, st0.reserved_bytes);
    uint64_t released = 0;
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    if (strncmp(w.f.log, "RWX", 3) || strlen(w.f.log) < 4 ||
        strspn(w.f.log + 3, give) != strlen(w.f.log) - 3)
        fail_msg("trim alone: backend calls \"%s\", expected a settle (RWX) then only %s",
                 w.f.log, give);
    assert_int_equal(w.f.n_ev, 1);
    check_settle_event(&w, 0, 0);
    assert_int_equal(released, st0.reserved_bytes);
    assert_int_equal(w.f.held, 0);
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, strlen(w.f.log) - 2);
    /* Nothing freed since: no wait. */
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "");
    assert_int_equal(released, 0);
    /* A new batch: a new settle. */
    void *y = xalloc(&w, 4 * MiB, 0);
    xfree(&w, y, 0);
    fk_log_clear(&w.f);
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    if (strncmp(w.f.log, "RWX", 3) || strspn(w.f.log + 3, give) != strlen(w.f.log) - 3 ||
        !w.f.log[3])
        fail_msg("second trim alone: backend calls \"%s\"", w.f.log);
    check_settle_event(&w, 1, 0);
    assert_int_equal(released, 4 * MiB);
    assert_int_equal(stats(&w).event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(w.f.n_query, 0);
    assert_false(w.f.shared);
    world_close(&w);
}

/* A trim whose settle fails returns the error with the sentence, and gives
 * nothing back. */
static void check_settle_refused(world *w, int rc, const vram_pool_stats *st0, uint64_t held,
                                 uint64_t released, const char *what)
{
    const char *msg = vram_last_error();
    const char *at = strstr(msg, settle_sentence);
    if (rc != VRAM_EBACKEND || !at || !strstr(at + strlen(settle_sentence), what))
        fail_msg("a trim whose settle failed (%s): %s, \"%s\"", what, vram_err_name(rc), msg);
    assert_int_equal(released, 0);
    assert_int_equal(w->f.held, held);
    vram_pool_stats st = stats(w);
    assert_int_equal(st.reserved_bytes, st0->reserved_bytes);
    assert_int_equal(st.free_bytes, st0->free_bytes);
    assert_int_equal(st.pending_bytes, 0);
    assert_true(w->f.solo_dirty);
    assert_int_equal(w->f.n_ev_release, w->f.n_ev); /* a failed wait's event released too */
}

/* A settle that fails (its record, then its wait) makes the trim return
 * VRAM_EBACKEND with the sentence and the backend's cause; nothing goes
 * back (the work may still use the memory). With the backend working again
 * the next trim settles and gives it back. */
static void test_solo_settle_fails(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 4 * MiB, 2), *y = xalloc(&w, 256 * KiB, 2);
    xfree(&w, x, 2);
    vram_pool_stats st0 = stats(&w);
    uint64_t held = w.f.held, released = 1;
    /* The record fails. */
    w.f.record_fail = 1;
    fk_log_clear(&w.f);
    int rc = vram_pool_trim(w.p, &released);
    assert_string_equal(w.f.log, "r");
    check_settle_refused(&w, rc, &st0, held, released, "event_record");
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 1);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 1);
    assert_int_equal(st.event_waits_total, st0.event_waits_total);
    assert_int_equal(w.f.n_ev, 0);
    /* The wait fails. */
    w.f.settle_wait_fail = 1;
    fk_log_clear(&w.f);
    released = 1;
    rc = vram_pool_trim(w.p, &released);
    assert_string_equal(w.f.log, "RwX");
    check_settle_refused(&w, rc, &st0, held, released, "event_wait");
    st = stats(&w);
    assert_int_equal(st.backend_calls_total - st0.backend_calls_total, 2);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
    assert_int_equal(w.f.n_ev, 1);
    assert_int_equal(w.f.n_settle_wait_failed, 1);
    assert_true(w.f.ev[0].settle && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
    /* x's memory is still free in the pool: the stream gets it back. */
    void *x1 = xalloc(&w, 4 * MiB, 2);
    assert_ptr_equal(x1, x);
    xfree(&w, x1, 2);
    /* The backend works again. */
    fk_log_clear(&w.f);
    rc = vram_pool_trim(w.p, &released);
    if (rc)
        fail_msg("trim with the backend working: %s: %s", vram_err_name(rc), vram_last_error());
    assert_string_equal(w.f.log, w.policy == VRAM_POLICY_VMM ? "RWXUU" : "RWXF");
    check_settle_event(&w, 1, 2);
    assert_int_equal(released, 4 * MiB);
    assert_int_equal(w.f.held, held - 4 * MiB);
    st = stats(&w);
    assert_int_equal(st.event_waits_total - st0.event_waits_total, 2);
    assert_int_equal(st.backend_failures_total - st0.backend_failures_total, 2);
    xfree(&w, y, 2);
    world_close(&w);
}

/* vmm: a mapping that needs room under the limit (4 MiB) while a settle
 * fails (its record, then its wait) is refused with VRAM_EBACKEND and the
 * sentence: nothing goes back (the work may still use the memory), the
 * pool is as it was, the freed memory stays mapped and free (the stream
 * gets it back with no backend call), and with the backend working again
 * the next such mapping settles and unmaps. A free alone calls nothing. */
static void test_solo_settle_fails_at_limit(void **state)
{
    (void)state;
    world w;
    opt_limit = 4 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 0);
    opt_limit = 0;
    void *a = xalloc(&w, 2 * MiB, 1), *b = xalloc(&w, 2 * MiB, 1);
    fk_log_clear(&w.f);
    xfree(&w, a, 1);
    assert_string_equal(w.f.log, "");
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.reserved_bytes, 4 * MiB);
    assert_int_equal(st0.free_bytes, 2 * MiB);
    static const struct {
        const char *what, *log;
    } fails[] = {{"event_record", "r"}, {"event_wait", "RwX"}};
    for (unsigned k = 0; k < 2; k++) {
        if (k == 0)
            w.f.record_fail = 1;
        else
            w.f.settle_wait_fail = 1;
        fk_log_clear(&w.f);
        void *c = (void *)&c;
        /* A small request: a's free block (large region) cannot serve it. */
        int rc = op_alloc(&w, 1 * MiB, 1, &c);
        assert_string_equal(w.f.log, fails[k].log);
        const char *msg = vram_last_error();
        const char *at = strstr(msg, settle_sentence);
        if (rc != VRAM_EBACKEND || !strstr(msg, "cannot allocate") || !at ||
            !strstr(at + strlen(settle_sentence), fails[k].what))
            fail_msg("a mapping at the limit whose settle failed (%s): %s, \"%s\"",
                     fails[k].what, vram_err_name(rc), msg);
        assert_null(c);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.reserved_bytes, 4 * MiB);
        assert_int_equal(st.free_bytes, 2 * MiB);
        assert_int_equal(st.live_blocks, 1);
        assert_int_equal(st.pending_bytes, 0);
        assert_int_equal(st.failed_allocs_total - st0.failed_allocs_total, k + 1);
        assert_int_equal(st.backend_failures_total - st0.backend_failures_total, k + 1);
        assert_int_equal(st.released_bytes_total, st0.released_bytes_total);
        assert_int_equal(w.f.held, 4 * MiB);
        assert_true(w.f.solo_dirty);
        assert_int_equal(w.f.n_ev, k);
        assert_int_equal(w.f.n_ev_release, w.f.n_ev); /* a failed wait's event released too */
    }
    assert_true(w.f.ev[0].settle && w.f.ev[0].waited == 1 && !w.f.ev[0].reported);
    /* Still free at once: the stream gets a back with no backend call. */
    fk_log_clear(&w.f);
    void *a1 = xalloc(&w, 2 * MiB, 1);
    assert_ptr_equal(a1, a);
    xfree(&w, a1, 1);
    assert_string_equal(w.f.log, "");
    /* The backend works again: a settle, a's granule back, the new one. */
    void *c = xalloc(&w, 1 * MiB, 1);
    assert_string_equal(w.f.log, "RWXUM");
    check_settle_event(&w, 1, 1);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)a, 2 * MiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.failed_allocs_total - st0.failed_allocs_total, 2);
    assert_int_equal(w.f.n_settles, 1);
    xfree(&w, b, 1);
    xfree(&w, c, 1);
    world_close(&w);
}

/* Destroy alone with the settle failing: the memory stays with the backend
 * (the work may still use it) and destroy says so. */
static void test_solo_destroy_settle_fails(void **state)
{
    world w;
    world_open(&w, POLICY(state), 64 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 2 * MiB, 1);
    xfree(&w, x, 1);
    uint64_t held = w.f.held;
    w.f.record_fail = 2;
    unsigned logged = log_n;
    fk_log_clear(&w.f);
    int rc = vram_pool_destroy(w.p);
    w.p = NULL;
    assert_int_equal(rc, VRAM_EBACKEND);
    assert_string_equal(w.f.log, "r"); /* nothing unmapped, freed or released */
    assert_int_equal(w.f.held, held);
    const char *l = log_find(settle_sentence);
    if (log_n == logged || !l)
        fail_msg("destroy with the settle failing logged no sentence (backend calls \"%s\")",
                 w.f.log);
    check_ledger(&w.f);
    /* What was kept is the fake's to drop. */
    assert_int_equal(vram_backend_destroy(w.b), 0);
    free(w.f.ev);
    free(w.f.mem.v);
    free(w.f.res.v);
}

/* Memory short alone (the backend refuses below the pool's limit: the
 * device shrank, others took memory): the retry gives memory back only
 * after a settle. vmm: a 4 MiB request first marks the stream (an event
 * covering the frees so far, recorded as it is about to map), maps one
 * granule and is refused the second; the granule it just mapped goes back
 * at once (no work ever saw it: no wait), then the free granule that stayed
 * mapped once the mark is found pending and waited for, and the retry maps
 * two. segments: a segment refused, a settle, the two free segments back,
 * the segment granted. */
static void test_solo_memory_short_settles(void **state)
{
    world w;
    if (POLICY(state) == VRAM_POLICY_VMM) {
        world_open(&w, VRAM_POLICY_VMM, 16 * MiB, 1024 * MiB);
        void *b[6];
        for (int i = 0; i < 6; i++)
            b[i] = xalloc(&w, 2 * MiB, 4); /* granules 0..5 */
        for (int i = 1; i < 6; i += i == 1 ? 2 : 1)
            xfree(&w, b[i], 4); /* 1, 3, 4, 5 */
        assert_int_equal(vram_pool_trim(w.p, NULL), 0);
        assert_int_equal(w.f.held, 4 * MiB);
        void *c = xalloc(&w, 2 * MiB, 4); /* granule 1 again */
        assert_ptr_equal(c, b[1]);
        xfree(&w, c, 4); /* stays mapped: the batch to settle */
        w.f.capacity = 8 * MiB;
        vram_pool_stats st0 = stats(&w);
        unsigned settles = w.f.n_settles;
        fk_log_clear(&w.f);
        void *y = xalloc(&w, 4 * MiB, 4);
        assert_string_equal(w.f.log, "RMmUQWXUMM");
        assert_ptr_equal(y, b[3]);
        assert_int_equal(w.f.n_settles, settles + 1);
        check_settle_event(&w, w.f.n_ev - 1, 4);
        assert_int_equal(w.f.n_fresh_give_backs, 1); /* the rollback's unmap */
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
        assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
        assert_int_equal(st.reserved_bytes, 8 * MiB);
        xfree(&w, y, 4);
        xfree(&w, b[0], 4);
        xfree(&w, b[2], 4);
    } else {
        world_open(&w, VRAM_POLICY_SEGMENTS, 16 * MiB, 1024 * MiB);
        void *a[4];
        for (int i = 0; i < 4; i++)
            a[i] = xalloc(&w, 2 * MiB, 4); /* a segment each */
        xfree(&w, a[1], 4);
        xfree(&w, a[2], 4);
        w.f.capacity = 8 * MiB; /* full: the limit (16 MiB) is not reached */
        vram_pool_stats st0 = stats(&w);
        fk_log_clear(&w.f);
        void *y = xalloc(&w, 4 * MiB, 4);
        assert_string_equal(w.f.log, "aRWXFFA");
        assert_int_equal(w.f.n_ev, 1);
        check_settle_event(&w, 0, 4);
        vram_pool_stats st = stats(&w);
        assert_int_equal(st.event_waits_total - st0.event_waits_total, 1);
        assert_int_equal(st.failed_allocs_total, st0.failed_allocs_total);
        assert_int_equal(st.reserved_bytes, 8 * MiB);
        xfree(&w, y, 4);
        xfree(&w, a[0], 4);
        xfree(&w, a[3], 4);
    }
    assert_false(w.f.shared);
    world_close(&w);
}

/* vmm: a mapping refused half way is rolled back, and only what this
 * allocation mapped goes back: x (3 MiB) ends inside granule 1, so y, put
 * right after it, shares that granule (mapped, x's) and needs granule 2,
 * which the backend refuses (the device is full, the limit is not
 * reached). The rollback must leave x's granule mapped; the retry placed
 * where the fewest granules are missing is refused the same way. */
static void test_map_refused_keeps_neighbour(void **state)
{
    (void)state;
    world w;
    world_open(&w, VRAM_POLICY_VMM, 16 * MiB, 1024 * MiB);
    void *x = xalloc(&w, 3 * MiB, 1);
    assert_int_equal(w.f.held, 4 * MiB); /* granule 0, and granule 1 on its own */
    w.f.capacity = w.f.held;             /* others took the rest */
    fk_log_clear(&w.f);
    void *y = (void *)&y;
    assert_int_equal(op_alloc(&w, 3 * MiB, 1, &y), VRAM_ENOMEM);
    assert_null(y);
    assert_string_equal(w.f.log, "mm"); /* refused, retried, refused: nothing unmapped */
    if (!fk_covered(&w.f, (uint64_t)(uintptr_t)x, 3 * MiB, 0))
        fail_msg("the rollback of a refused mapping unmapped the live block x's granule");
    vram_pool_stats st = stats(&w); /* reserved == what the backend holds */
    assert_int_equal(st.reserved_bytes, 4 * MiB);
    assert_int_equal(st.live_blocks, 1);
    /* The device has room again: y gets granule 2 only. */
    w.f.capacity = 16 * MiB;
    fk_log_clear(&w.f);
    y = xalloc(&w, 3 * MiB, 1);
    assert_int_equal((uintptr_t)y, (uintptr_t)x + 3 * MiB);
    assert_string_equal(w.f.log, "M");
    assert_int_equal(stats(&w).reserved_bytes, 6 * MiB);
    xfree(&w, x, 1);
    xfree(&w, y, 1);
    world_close(&w);
}

/* vmm huge blocks (a segment each): a free gives nothing back; a new
 * segment that would pass the pool's limit (24 MiB) first gives back free
 * huge segments before free mapped granules, oldest first and just enough,
 * after one settle; a trim with no free since gives the rest back with no
 * wait; destroy after a free settles first. */
static void test_solo_huge_settles(void **state)
{
    (void)state;
    world w;
    opt_huge_size = 8 * MiB;
    opt_limit = 24 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 8 * MiB);
    opt_huge_size = opt_limit = 0;
    void *s = xalloc(&w, 64 * KiB, 1);
    void *h1 = xalloc(&w, 8 * MiB, 1), *h2 = xalloc(&w, 8 * MiB, 1);
    assert_int_equal(w.f.n_seg_alloc, 2);
    fk_log_clear(&w.f);
    xfree(&w, s, 1); /* its granule, the oldest free memory, stays mapped */
    xfree(&w, h1, 1);
    xfree(&w, h2, 1);
    assert_string_equal(w.f.log, "");
    vram_pool_stats st0 = stats(&w);
    assert_int_equal(st0.reserved_bytes, 18 * MiB);
    /* 12 MiB fits neither free segment and would make 30 MiB: a settle,
     * then h1's segment back (6 MiB over: one segment is enough; s's
     * granule, freed earlier, stays: huge segments go first), then the new
     * one. */
    void *h3 = xalloc(&w, 12 * MiB, 1);
    assert_string_equal(w.f.log, "RWXFA");
    check_settle_event(&w, 0, 1);
    assert_false(fk_covered(&w.f, (uint64_t)(uintptr_t)h1, 8 * MiB, 1));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)h2, 8 * MiB, 1));
    assert_true(fk_covered(&w.f, (uint64_t)(uintptr_t)s, 64 * KiB, 0));
    vram_pool_stats st = stats(&w);
    assert_int_equal(st.reserved_bytes, 22 * MiB);
    assert_int_equal(st.released_bytes_total - st0.released_bytes_total, 8 * MiB);
    fk_log_clear(&w.f);
    uint64_t released = 0;
    assert_int_equal(vram_pool_trim(w.p, &released), 0);
    assert_string_equal(w.f.log, "FU"); /* h2's segment, then s's granule */
    assert_int_equal(released, 10 * MiB);
    assert_int_equal(stats(&w).event_waits_total, 1);
    /* h3 freed: its segment stays mapped; destroy settles, then releases
     * the two reservations and gives the segment back. */
    xfree(&w, h3, 1);
    fk_log_clear(&w.f);
    world_close(&w);
    assert_string_equal(w.f.log, "RWXLLF");
    assert_int_equal(w.f.n_settles, 2);
}

/* vmm huge blocks, memory short: a new segment the backend refuses (below
 * the pool's limit: others took memory) makes the pool give back the free
 * segments (vram__huge_release) and retry; they too go back only after a
 * settle. */
static void test_solo_huge_memory_short_settles(void **state)
{
    (void)state;
    world w;
    opt_huge_size = 4 * MiB;
    world_open(&w, VRAM_POLICY_VMM, 64 * MiB, 64 * MiB);
    opt_huge_size = 0;
    void *h1 = xalloc(&w, 8 * MiB, 2), *h2 = xalloc(&w, 8 * MiB, 2);
    xfree(&w, h1, 2); /* kept: a free 8 MiB segment */
    w.f.capacity = 16 * MiB; /* others took the rest */
    unsigned settles = w.f.n_settles;
    fk_log_clear(&w.f);
    /* 6 MiB does not fit h1's segment (too much waste) and is far below the
     * limit (64 MiB): a mark, a segment refused, the mark pending and
     * waited for, h1's segment back, granted. */
    void *h3 = xalloc(&w, 6 * MiB, 2);
    assert_string_equal(w.f.log, "RaQWXFA");
    assert_int_equal(w.f.n_settles, settles + 1);
    check_settle_event(&w, w.f.n_ev - 1, 2);
    assert_int_equal(stats(&w).reserved_bytes, 14 * MiB);
    xfree(&w, h2, 2);
    xfree(&w, h3, 2);
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
    int solo;        /* freed while a single stream used the pool: free at once */
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
    uint64_t n_settle_refusals; /* allocations refused alone for a failed settle */
    uint64_t n_join_reuse; /* cross-stream reuses of bytes freed before the join */
    uint64_t n_own_reuse;  /* reuses of bytes freed on the same stream */
    unsigned n_streams;    /* streams the sequence uses: 1 or RM_STREAMS */
    unsigned stream0;      /* the first of them */
    uint64_t lead_ops;     /* the first operations all come from one stream, */
    unsigned lead;         /* this one, so that much is freed before the join */
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
            /* The stream rule: the bytes were freed before the join's wait
             * (which waited for all the first stream's work) or an event
             * recorded after their free was reported complete. */
            const fake *f = &m->w.f;
            int before_join = x.solo && f->shared && x.t_free < f->t_join;
            RM_CHECK(m, !x.solo || x.stream == f->first,
                     "a free on stream %u counted as free at once, but stream %u was first",
                     x.stream, f->first);
            RM_CHECK(m, before_join || f->reported_upto[x.stream] > x.t_free,
                     "0x%" PRIx64 "+%" PRIu64 " freed on stream %u at t=%" PRIu64
                     " handed to stream %u with no event recorded after the free reported "
                     "complete (latest: t=%" PRIu64 ") and not freed before the join's wait "
                     "(%s)",
                     x.addr, x.size, x.stream, x.t_free, s, f->reported_upto[x.stream],
                     f->shared ? "joined later" : "no second stream joined");
            m->n_cross_reuse++;
            m->n_join_reuse += before_join;
        } else {
            m->n_own_reuse++;
        }
        /* Keep the parts outside the block. */
        m->fr[i].size = 0;
        if (x.addr < a) {
            m->fr[i].size = a - x.addr;
        }
        if (xe > e) {
            rm_freed rest = {e, xe - e, x.stream, x.t_free, x.solo};
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
        if (!m->fr[i].solo && m->fr[i].t_free > w->f.reported_upto[m->fr[i].stream]) {
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
    /* A single stream: frees are free at once and nothing is pending; the
     * only events are the lone stream's (marks and settles, before memory
     * goes back: the fake checks each give-back against them) and those of
     * refused joins. */
    if (!w->f.shared) {
        RM_CHECK(m, st.pending_bytes == 0,
                 "pending %" PRIu64 " while a single stream used the pool", st.pending_bytes);
        RM_CHECK(m, w->f.n_record == w->f.n_join_records + w->f.n_settle_records,
                 "events recorded before the join: %u, of which %u joins' and %u settles'",
                 w->f.n_record, w->f.n_join_records, w->f.n_settle_records);
    }
    /* Exact counters: every wait (the join's included) is counted, and every
     * record attempt is a backend call of the pool's, as are the backend's
     * own calls (map, unmap, segments, ...). */
    RM_CHECK(m, st.event_waits_total == w->f.n_wait, "event_waits_total %" PRIu64 ", waits %u",
             st.event_waits_total, w->f.n_wait);
    RM_CHECK(m, st.backend_calls_total == bs.calls + w->f.n_record + w->f.n_record_failed,
             "backend_calls_total %" PRIu64 ", backend calls %" PRIu64 " + records %u + failed "
             "records %u",
             st.backend_calls_total, bs.calls, w->f.n_record, w->f.n_record_failed);
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
        if (x->stream != s || x->solo) /* free at once: never pending */
            continue;
        uint64_t lo = x->addr > a ? x->addr : a, hi = x->addr + x->size < e ? x->addr + x->size : e;
        if (lo < hi)
            bytes += hi - lo;
    }
    return bytes;
}

static void rm_check_snapshot(rmodel *m)
{
    vram_buffer b = {0};
    RM_CHECK(m, vram_pool_snapshot(m->w.p, vram_write_buffer, &b, 0) == 0, "snapshot: %s",
             vram_last_error());
    cJSON *root = cJSON_Parse(b.data);
    vram_buffer_free(&b);
    RM_CHECK(m, root != NULL, "snapshot is not JSON");
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(root, "blocks");
    RM_CHECK(m, cJSON_IsArray(blocks), "snapshot has no blocks");
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(m->w.p, &st), 0);
    uint64_t pending = 0, n_live = 0;
    fk_range *pend = NULL, *fre = NULL;
    unsigned *pend_stream = NULL;
    size_t n_pend = 0, n_fre = 0;
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
        if (!strcmp(state->valuestring, "free")) {
            fre = realloc(fre, (n_fre + 1) * sizeof *fre);
            if (!fre)
                abort();
            fre[n_fre++] = (fk_range){a, sz, 0, 0};
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
        pend[n_pend] = (fk_range){a, sz, 0, 0};
        pend_stream[n_pend++] = s;
    }
    RM_CHECK(m, pending == st.pending_bytes,
             "pending blocks of the snapshot sum to %" PRIu64 ", pending_bytes is %" PRIu64,
             pending, st.pending_bytes);
    RM_CHECK(m, n_live == m->n_live, "snapshot has %" PRIu64 " live blocks, model %zu", n_live,
             m->n_live);
    for (size_t i = 0; i < m->n_fr; i++) {
        const rm_freed *x = &m->fr[i];
        if (x->solo) {
            /* Free at once: every byte of it the backend still holds is in a
             * free block, reusable by any request. */
            const fk_rvec *mem = &m->w.f.mem;
            for (size_t k = rvec_lower(mem, x->addr);
                 k < mem->n && mem->v[k].addr < x->addr + x->size; k++) {
                uint64_t lo = x->addr > mem->v[k].addr ? x->addr : mem->v[k].addr;
                uint64_t hi = x->addr + x->size < mem->v[k].addr + mem->v[k].size
                                  ? x->addr + x->size
                                  : mem->v[k].addr + mem->v[k].size;
                uint64_t in = 0;
                for (size_t j = 0; j < n_fre; j++) {
                    uint64_t l2 = lo > fre[j].addr ? lo : fre[j].addr;
                    uint64_t h2 = hi < fre[j].addr + fre[j].size ? hi : fre[j].addr + fre[j].size;
                    if (l2 < h2)
                        in += h2 - l2;
                }
                RM_CHECK(m, in == hi - lo,
                         "0x%" PRIx64 "+%" PRIu64 ", freed on stream %u while it was alone, is "
                         "not (all) free: %" PRIu64 " of %" PRIu64 " bytes in free blocks",
                         x->addr, x->size, x->stream, in, hi - lo);
            }
            continue;
        }
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
    free(fre);
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

static unsigned rm_stream(rmodel *m, uint64_t *rng)
{
    if (m->op <= m->lead_ops)
        return m->lead;
    return m->stream0 + (unsigned)rng_below(rng, m->n_streams);
}

/* The operation of stream s just returned rc: check it against the
 * single-stream rule. Returns whether it was a newcomer's refused join
 * (then it did nothing). */
static int rm_op_end(rmodel *m, unsigned s, int rc)
{
    unsigned failed = m->w.f.n_join_failed;
    const char *bad = fk_op_end(&m->w.f, S(s), rc);
    RM_CHECK(m, bad == NULL, "%s", bad);
    return m->w.f.n_join_failed != failed;
}

/* Allocate `size` on stream s; returns the pool's code. */
static int rm_alloc_on(rmodel *m, uint64_t size, unsigned s, uint64_t *addr)
{
    world *w = &m->w;
    void *x = NULL;
    unsigned settle_failed = w->f.n_settle_record_failed + w->f.n_settle_wait_failed;
    uint64_t held = w->f.held;
    fk_op_begin(&w->f, S(s));
    int rc = vram_pool_alloc(w->p, size, 0, VRAM_KIND_ACTIVATIONS, S(s), &x);
    if (rm_op_end(m, s, rc)) {
        RM_CHECK(m, x == NULL, "ptr set on failure");
        return rc;
    }
    if (rc == VRAM_ENOMEM) {
        m->n_enomem++;
        RM_CHECK(m, x == NULL, "ptr set on failure");
        return rc;
    }
    /* Alone, room under the limit needs a settle first: when its record or
     * wait fails, the allocation is refused with the sentence, having given
     * back only memory a completed mark covers (the ledger checks each
     * give-back) and taken nothing. */
    if (rc == VRAM_EBACKEND && w->f.n_settle_record_failed + w->f.n_settle_wait_failed !=
                                   settle_failed) {
        const char *msg = vram_last_error(), *at = strstr(msg, settle_sentence);
        RM_CHECK(m, at && strstr(msg, "cannot allocate") &&
                        (strstr(at, "event_record") || strstr(at, "event_wait")),
                 "alloc %" PRIu64 " with a settle failing: \"%s\"", size, msg);
        RM_CHECK(m, x == NULL && !w->f.shared && w->f.held <= held,
                 "alloc refused for a failed settle: ptr %p, shared %d, held %" PRIu64
                 " -> %" PRIu64, x, w->f.shared, held, w->f.held);
        m->n_settle_refusals++;
        return rc;
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
    *addr = a;
    return 0;
}

static void rm_alloc(rmodel *m, uint64_t *rng)
{
    uint64_t size = rm_size(rng), a;
    rm_alloc_on(m, size, rm_stream(m, rng), &a); /* stream 0: the default stream */
}

static void rm_free(rmodel *m, uint64_t *rng)
{
    if (!m->n_live)
        return;
    size_t i = rng_below(rng, m->n_live);
    rm_live l = m->live[i];
    /* Mostly on the stream it was used on, sometimes on another. */
    unsigned s = rng_below(rng, 4) ? l.stream : rm_stream(m, rng);
    world *w = &m->w;
    uint64_t t = ++w->f.clock;
    fk_op_begin(&w->f, S(s));
    fk_dirt d = fk_free_begin(&w->f, t, l.addr, l.size);
    int rc = vram_pool_free(w->p, (void *)(uintptr_t)l.addr, S(s));
    fk_free_end(&w->f, S(s), rc, d);
    if (rm_op_end(m, s, rc)) {
        /* A refused join: the block stays live, as it was. */
        vram_block_info bi;
        RM_CHECK(m, vram_pool_block_info(w->p, (void *)(uintptr_t)l.addr, &bi) == 0 &&
                        bi.size == l.size && bi.requested == l.req,
                 "0x%" PRIx64 " is not live as it was after its free was refused", l.addr);
        return;
    }
    RM_CHECK(m, rc == 0, "free 0x%" PRIx64 " on stream %u: %s: %s", l.addr, s, vram_err_name(rc),
             vram_last_error());
    m->live[i] = m->live[--m->n_live];
    fr_push(m, (rm_freed){l.addr, l.size, s, t, !w->f.shared});
    m->live_req -= l.req;
    m->live_size -= l.size;
    /* A single stream: the bytes just freed are free at once; a request of
     * the same size on the same stream right away gets memory. Under vmm
     * only where the pool's limit and the backend leave room for any
     * placement of it: a block goes at the start of a free block (the
     * lowest address among the first few that fit or, near the limit, the
     * one whose start needs the fewest new granules), so when the run just
     * freed has merged with a free neighbour reaching into unmapped
     * granules, the request lands at the neighbour's start and needs a
     * granule; at the limit, with no wholly free mapping left to give back,
     * it is refused (a limitation of vmm placement, not of stream order;
     * seed 3 fails with this check strict for vmm). */
    if (m->n_streams == 1 && rng_below(rng, 3) == 0) {
        uint64_t a, granules = (l.size + GRAN - 1) / GRAN + 1;
        vram_pool_stats st;
        assert_int_equal(vram_pool_stats_get(w->p, &st), 0);
        uint64_t room = st.limit_bytes < w->f.capacity ? st.limit_bytes : w->f.capacity;
        room = room > w->f.held ? room - w->f.held : 0;
        int sure = w->policy == VRAM_POLICY_SEGMENTS || room >= granules * GRAN;
        rc = rm_alloc_on(m, l.req, s, &a);
        RM_CHECK(m, rc == 0 || (!sure && rc == VRAM_ENOMEM),
                 "%" PRIu64 " bytes freed on stream %u (alone) could not be had again at once: "
                 "%s: %s",
                 l.req, s, vram_err_name(rc), vram_last_error());
    }
}

/* Some work finishes: a prefix of one stream's events completes. */
static void rm_progress(rmodel *m, uint64_t *rng)
{
    fake *f = &m->w.f;
    unsigned s = rm_stream(m, rng);
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

static const char settle_refused[] =
    "pool \"events\": memory freed on the stream cannot be given back before its work is "
    "waited for: ";

static void rm_trim(rmodel *m)
{
    fake *f = &m->w.f;
    if (f->shared) /* a trim that cannot record may fail */
        f->record_fail = 0;
    /* Alone, a record that fails is a settle's: the trim fails and says why,
     * having given back only memory whose work a mark showed complete (the
     * ledger checks each give-back); the next one, with records working,
     * succeeds. */
    unsigned failed = f->n_settle_record_failed;
    uint64_t held = f->held, n_ev = f->n_ev;
    int rc = vram_pool_trim(m->w.p, NULL);
    if (rc && f->n_settle_record_failed != failed) {
        const char *msg = vram_last_error();
        const char *at = strstr(msg, settle_refused);
        RM_CHECK(m, rc == VRAM_EBACKEND && at && strstr(at, "event_record"),
                 "trim with a settle's record failing: %s (\"%s\")", vram_err_name(rc), msg);
        RM_CHECK(m, f->held <= held && f->n_ev == n_ev && f->solo_dirty,
                 "a trim whose settle failed: held %" PRIu64 " -> %" PRIu64 ", events %" PRIu64
                 " -> %zu, dirty %d",
                 held, f->held, n_ev, f->n_ev, f->solo_dirty);
        f->record_fail = 0;
        rc = vram_pool_trim(m->w.p, NULL);
    }
    RM_CHECK(m, rc == 0, "trim: %s (\"%s\")", vram_err_name(rc), vram_last_error());
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(m->w.p, &st), 0);
    RM_CHECK(m, st.pending_bytes == 0, "pending %" PRIu64 " after a trim", st.pending_bytes);
    /* Every event recorded so far was waited for and released, but marks on
     * the lone stream that no give-back needed. */
    for (size_t k = 0; k < m->w.f.n_ev; k++) {
        const fk_event *e = &m->w.f.ev[k];
        RM_CHECK(m, e->released == 1 || (e->settle && !e->waited && !e->released),
                 "event %zu not released after a trim", k + 1);
    }
}

/* Over the seeds of one test. */
static uint64_t rm_refusals, rm_join_reuses, rm_settles, rm_solo_give_backs, rm_settle_refusals;
static uint64_t rm_backend_refusals; /* memory the backend refused (below the pool's limit) */

/* RM_EVENTS: 3 streams, every record succeeds; RM_FAILED_RECORDS: the same
 * with records failing now and then, and on some seeds the first join
 * refused (its record or its wait fails); RM_SINGLE: one stream alone. */
enum { RM_EVENTS, RM_FAILED_RECORDS, RM_SINGLE };

static void run_random(vram_policy policy, uint64_t seed, uint64_t n_ops, int mode)
{
    rmodel m;
    memset(&m, 0, sizeof m);
    m.seed = seed;
    int record_failures = mode == RM_FAILED_RECORDS;
    m.n_streams = mode == RM_SINGLE ? 1 : RM_STREAMS;
    m.stream0 = mode == RM_SINGLE && seed % 2 == 0 ? 5 : 0; /* 0: the default stream */
    snprintf(m.where, sizeof m.where, "policy %s, seed %" PRIu64 " (VRAM_TEST_SEED=%" PRIu64 ")",
             vram_policy_name(policy), seed, seed);
    uint64_t rng = seed * 0x2545f4914f6cdd1dull + 7;
    /* The limit varies: every third seed maps up to 8 MiB at a time (below
     * a quarter of the limit), rounds large requests to 64 KiB and limits
     * the pool to 48 MiB of the backend's 64, so mappings give free memory
     * back under the limit; the next seeds set the limit above the capacity,
     * so the backend refuses first (memory short: free memory back, waits,
     * a retry placed where the fewest granules are missing); the others
     * limit the pool to the capacity. retain_min varies too: with no decay
     * it must change nothing. */
    if (seed % 3 == 0) {
        opt_map_chunk = 8 * MiB;
        opt_large_round = 64 * KiB;
        opt_limit = 48 * MiB;
    } else if (seed % 3 == 1) {
        opt_limit = 96 * MiB;
    }
    world_open(&m.w, policy, 64 * MiB, seed % 2 ? 16 * MiB : 0);
    opt_map_chunk = opt_large_round = 0;
    opt_limit = 0;
    m.w.f.query_mode = Q_FLAG;
    /* One stream alone first, for up to 400 operations. */
    m.lead = m.stream0 + (unsigned)rng_below(&rng, m.n_streams);
    m.lead_ops = rng_below(&rng, 400);
    /* The first join refused: its record fails, or its wait does. The
     * newcomer's next operation joins. */
    int refuse_join = record_failures && seed % 2;
    if (refuse_join && seed % 4 == 1)
        m.w.f.join_record_fail = 1;
    else if (refuse_join)
        m.w.f.join_wait_fail = 1;
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
    RM_CHECK(&m, m.n_own_reuse > 0, "no freed memory was reused: the test is too weak");
    if (mode == RM_SINGLE) {
        /* Alone all along: no join; the only events are the lone stream's
         * marks and settles, each waited for at most once. */
        const fake *f = &m.w.f;
        RM_CHECK(&m, !f->shared && f->n_join_records == 0 && f->n_record_failed == 0 &&
                         f->n_record == f->n_settle_records && f->n_wait == f->n_settles &&
                         f->n_settles <= f->n_ev && st.event_waits_total == f->n_wait,
                 "a single stream made %zu events (%u settles), %u waits, %u queries", f->n_ev,
                 f->n_settles, f->n_wait, f->n_query);
    } else {
        RM_CHECK(&m, m.w.f.n_joins == 1, "%u joins", m.w.f.n_joins);
        RM_CHECK(&m, !refuse_join || m.w.f.n_join_failed >= 1, "no join was refused");
        RM_CHECK(&m, m.n_cross_reuse > 0, "no memory moved between streams: the test is too weak");
        RM_CHECK(&m, m.w.f.n_record > 1, "the sequence recorded no event: the test is too weak");
    }
    rm_refusals += m.n_enomem;
    rm_settle_refusals += m.n_settle_refusals;
    rm_backend_refusals += m.w.f.n_enomem;
    rm_join_reuses += m.n_join_reuse;
    rm_settles += m.w.f.n_settles;
    rm_solo_give_backs += m.w.f.n_solo_give_backs;
    if (getenv("VRAM_TEST_VERBOSE"))
        print_message("%s: %" PRIu64 " ops, %u events (%u failed records), %u waits, %" PRIu64
                      " refusals, %" PRIu64 " cross-stream reuses (%" PRIu64 " of bytes freed "
                      "before the join), %u refused joins, pending exact %" PRIu64 " times; "
                      "alone: %u settles (%u failed records, %u gave nothing back), %u "
                      "give-backs (%u of memory mapped after the free), %" PRIu64 " refusals "
                      "for a failed settle; the backend refused memory %u times\n",
                      m.where, n_ops, m.w.f.n_record, m.w.f.n_record_failed, m.w.f.n_wait,
                      m.n_enomem, m.n_cross_reuse, m.n_join_reuse, m.w.f.n_join_failed,
                      m.n_exact_pending, m.w.f.n_settles, m.w.f.n_settle_record_failed,
                      m.w.f.n_idle_settles, m.w.f.n_solo_give_backs, m.w.f.n_fresh_give_backs,
                      m.n_settle_refusals, m.w.f.n_enomem);
    world_close(&m.w);
    free(m.live);
    free(m.fr);
}

static void random_seeds(void **state, int mode)
{
    vram_policy policy = POLICY(state);
    const char *quick = getenv("VRAM_TEST_QUICK");
    uint64_t n_ops = quick && *quick && strcmp(quick, "0") ? 1500 : 6000;
    const char *one = getenv("VRAM_TEST_SEED");
    if (one && *one) {
        run_random(policy, strtoull(one, NULL, 10), n_ops, mode);
        return;
    }
    rm_refusals = rm_join_reuses = rm_settles = rm_solo_give_backs = 0;
    rm_settle_refusals = rm_backend_refusals = 0;
    for (uint64_t seed = 1; seed <= 8; seed++)
        run_random(policy, seed, n_ops, mode);
    if (mode == RM_SINGLE && (!rm_settles || !rm_solo_give_backs))
        fail_msg("alone, %" PRIu64 " settles and %" PRIu64 " give-backs: the test is too weak",
                 rm_settles, rm_solo_give_backs);
    if (!rm_refusals)
        fail_msg("no allocation was refused: memory was never short, the test is too weak");
    if (!rm_backend_refusals)
        fail_msg("the backend never refused memory below the pool's limit: the test is too "
                 "weak");
    if (mode != RM_SINGLE && !rm_join_reuses)
        fail_msg("no byte freed before the join went to another stream: the test is too weak");
}

/* Events complete at random times; every record succeeds. */
static void test_random(void **state) { random_seeds(state, RM_EVENTS); }

/* The same with some records failing (the pool must try again later), and
 * on odd seeds the first join refused. */
static void test_random_failed_records(void **state) { random_seeds(state, RM_FAILED_RECORDS); }

/* One stream alone (the default stream on odd seeds): every free is free at
 * once (nothing pending, the freed bytes in free blocks of the snapshot,
 * the same size had again at once) and the only events are its marks and
 * settles, before memory goes back. */
static void test_random_single_stream(void **state) { random_seeds(state, RM_SINGLE); }

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
        BOTH(test_single_stream_free_at_once),
        BOTH(test_join_waits_for_first),
        BOTH(test_join_at_free),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_RECORD_VMM),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_RECORD_SEG),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_WAIT_VMM),
        cmocka_unit_test_prestate(test_join_refused, &JOIN_WAIT_SEG),
        cmocka_unit_test(test_solo_mark_spares_wait),
        cmocka_unit_test(test_solo_limit_settles),
        BOTH(test_solo_trim_settles),
        BOTH(test_solo_settle_fails),
        cmocka_unit_test(test_solo_settle_fails_at_limit),
        BOTH(test_solo_destroy_settle_fails),
        BOTH(test_solo_memory_short_settles),
        cmocka_unit_test(test_map_refused_keeps_neighbour),
        cmocka_unit_test(test_solo_huge_settles),
        cmocka_unit_test(test_solo_huge_memory_short_settles),
        BOTH(test_random),
        BOTH(test_random_failed_records),
        BOTH(test_random_single_stream),
    };
#undef BOTH
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
