/* tests/integration/events/fake_events.c - the fake backend of fake_events.h:
 * its address space and ledger, its events and the single-stream rule it
 * checks on the test's operations. */
#include "fake_events.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void fk_log_clear(fake *f)
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
size_t rvec_lower(const fk_rvec *r, uint64_t addr)
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

unsigned stream_index(vram_stream s)
{
    uintptr_t v = (uintptr_t)s;
    return v < FK_STREAMS ? (unsigned)v : FK_STREAMS - 1;
}

/* [addr, addr+size) lies entirely in backend memory (mappings may be
 * several adjacent ones; a segment must hold it alone). */
int fk_covered(const fake *f, uint64_t addr, uint64_t size, int segments)
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
void fk_complete(fake *f, fk_event *e)
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
fk_dirt fk_free_begin(fake *f, uint64_t t, uint64_t addr, uint64_t size)
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
void fk_free_end(fake *f, vram_stream s, int rc, fk_dirt d)
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
void fk_op_begin(fake *f, vram_stream s)
{
    unsigned si = stream_index(s);
    f->join_expected = !f->shared && f->used && !(f->used & (1ull << si));
    f->join_seen = f->join_waited = 0;
}

/* It returned rc. NULL if that fits the rule, else what went wrong: a
 * newcomer joined (the join's record and wait succeeded) or failed with
 * VRAM_EBACKEND and the sentence of a refused join, leaving the pool with a
 * single stream. */
const char *fk_op_end(fake *f, vram_stream s, int rc)
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

/* stream_wait_event: stream s waits on the device for event h, recorded on
 * another stream; the waiting stream's later work runs after the work
 * before the record. */
static int fk_stream_wait(void *self, vram_stream s, void *h)
{
    fake *f = self;
    f->n_stream_wait++;
    unsigned wi = stream_index(s);
    fk_event *e = fk_lookup(f, h, "stream_wait_event");
    if (!e) {
        fk_call(f, 'g');
        f->n_stream_wait_failed++;
        return VRAM_EBACKEND;
    }
    if (e->stream == wi)
        ledger_fail(f, "stream %u made to wait on the device for an event of its own", wi);
    if (fk_solo(f))
        ledger_fail(f, "stream %u made to wait on the device for stream %u while a single stream "
                       "uses the pool",
                    wi, e->stream);
    if (f->stream_wait_fail > 0) {
        fk_call(f, 'g');
        f->stream_wait_fail--;
        f->n_stream_wait_failed++;
        return VRAM_EBACKEND;
    }
    fk_call(f, 'G');
    e->stream_waited++;
    f->stream_waits_on[wi]++;
    if (e->t_record > f->waited_upto[wi][e->stream])
        f->waited_upto[wi][e->stream] = e->t_record;
    return 0;
}

/* The members every table of the fake has. */
#define FK_EVENT_OPS                                                                               \
    .mem_info = fk_mem_info, .event_record = fk_record, .event_query = fk_query,                  \
    .event_wait = fk_wait, .event_release = fk_ev_release
#define FK_MAP_OPS .reserve = fk_reserve, .release = fk_release, .map = fk_map, .unmap = fk_unmap
#define FK_SEGMENT_OPS .segment_alloc = fk_seg_alloc, .segment_free = fk_seg_free

static const vram_backend_ops fk_vmm_ops = {
    .name = "fake-vmm",
    .caps = VRAM_BACKEND_MAP | VRAM_BACKEND_EVENTS,
    FK_MAP_OPS,
    FK_EVENT_OPS,
};

/* vmm with segments too: requests of huge_size bytes or more get a segment
 * of their own (see src/core/mem/huge.c). */
static const vram_backend_ops fk_vmm_huge_ops = {
    .name = "fake-vmm-huge",
    .caps = VRAM_BACKEND_MAP | VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    FK_MAP_OPS,
    FK_SEGMENT_OPS,
    FK_EVENT_OPS,
};

static const vram_backend_ops fk_seg_ops = {
    .name = "fake-segments",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_EVENTS,
    FK_SEGMENT_OPS,
    FK_EVENT_OPS,
};

void fk_ops_init(vram_backend_ops *ops, vram_policy policy, int huge, int stream_waits)
{
    *ops = policy != VRAM_POLICY_VMM ? fk_seg_ops : huge ? fk_vmm_huge_ops : fk_vmm_ops;
    if (stream_waits)
        ops->stream_wait_event = fk_stream_wait;
}
