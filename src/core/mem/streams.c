/* src/core/mem/streams.c - stream order. Each stream that touches the pool gets a
 * record with a sequence number and the blocks freed on it that other
 * streams may not reuse yet.
 *
 * With real events (VRAM_BACKEND_EVENTS) a block freed on stream s goes to
 * s's own free index, which s's later allocations compare with the shared
 * free space by address (the lower candidate wins, as placement does
 * everywhere): work on one stream runs in order, so s may reuse it at once. For the other streams
 * it waits for an event. Events are recorded lazily, not at each free (a
 * cuEventRecord costs about a microsecond): only when an allocation would
 * otherwise take new memory from the backend does the pool record one event
 * per stream covering all of that stream's frees since its previous event
 * (an epoch), query the events, and return the blocks of completed epochs to
 * the shared free index; when memory is short it waits for them. An event
 * recorded after a free completes after the work queued before the free, so
 * the late record is safe, merely conservative. While a single stream uses
 * the pool its frees are free at once; before memory it freed goes back to
 * the driver, its work must be done: the pool records marks (events covering
 * the frees so far) as it maps, which costs nothing next to a mapping, and
 * gives memory back at once when a mark recorded after its free has
 * completed, waiting (a settle) only when none has. Without events (sim, host) completion is modelled: the event of a
 * free on stream s completes when s issues its next operation on the pool,
 * so every operation on s first releases s's pending blocks. A block freed on
 * s is thereby reusable at once by s's next operation, and by another stream
 * only after s has issued that operation. */
#include <stdlib.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "pool_internal.h"

/* Marks (one stream, with events): the oldest outstanding one. */
static void mark_pop(vram_pool *p)
{
    p->backend->ops->event_release(p->backend->self, p->solo_marks[p->solo_mark0].event);
    p->solo_mark0 = (p->solo_mark0 + 1) % VRAM__SOLO_MARKS;
    p->solo_nmarks--;
}

/* Query outstanding marks, oldest first; the completed ones advance
 * solo_done. A failed query leaves the mark outstanding. */
static void marks_poll(vram_pool *p)
{
    while (p->solo_nmarks) {
        if (vram__backend_event_query(p->backend, p->solo_marks[p->solo_mark0].event) != 1)
            return;
        p->solo_done = p->solo_marks[p->solo_mark0].epoch;
        mark_pop(p);
    }
}

void vram__streams_mark(vram_pool *p)
{
    if (!p->has_events || p->shared_streams || !p->n_streams || p->solo_freed < p->solo_epoch)
        return; /* no free since the last mark */
    if (p->solo_nmarks == VRAM__SOLO_MARKS) {
        marks_poll(p);
        if (p->solo_nmarks == VRAM__SOLO_MARKS)
            return; /* the next mark will cover these frees too */
    }
    void *ev = NULL;
    p->st.backend_calls_total++;
    if (vram__backend_event_record(p->backend, p->streams[0].handle, &ev) != 0) {
        p->st.backend_failures_total++;
        return; /* not fatal: a give-back will wait instead */
    }
    size_t slot = (p->solo_mark0 + p->solo_nmarks++) % VRAM__SOLO_MARKS;
    p->solo_marks[slot].event = ev;
    p->solo_marks[slot].epoch = p->solo_epoch++;
}

/* Wait for the work queued so far on the pool's first stream (an event
 * recorded now, waited for). On failure the sentence says `why`. */
static int wait_first_stream(vram_pool *p, const char *why)
{
    void *ev = NULL;
    p->st.backend_calls_total++;
    int rc = vram__backend_event_record(p->backend, p->streams[0].handle, &ev);
    if (!rc) {
        p->st.event_waits_total++;
        rc = vram__backend_event_wait(p->backend, ev);
        p->backend->ops->event_release(p->backend->self, ev);
    }
    if (rc) {
        p->st.backend_failures_total++;
        return vram__fail_prefix(rc, "pool \"%s\": %s: ", p->name, why);
    }
    /* The wait covered every free so far, and every mark. */
    p->solo_done = p->solo_epoch++;
    while (p->solo_nmarks)
        mark_pop(p);
    return 0;
}

/* With events, while a single stream uses the pool its frees are free at
 * once: its own later work runs after the work that used them. When a
 * second stream arrives, the pool waits once for the work queued on the
 * first, so that what the first freed is safe for the newcomer; from then on
 * frees wait for events. */
static int second_stream_joins(vram_pool *p)
{
    int rc = wait_first_stream(p, "a second stream cannot join until the first's work is "
                                  "waited for");
    if (!rc)
        p->shared_streams = 1;
    return rc;
}

int vram__streams_settle_upto(vram_pool *p, uint64_t stamp)
{
    if (!p->has_events || p->shared_streams || !p->n_streams || stamp <= p->solo_done)
        return 0;
    marks_poll(p);
    if (stamp <= p->solo_done)
        return 0;
    /* Wait for the oldest mark that covers the stamp, if one does. */
    for (size_t k = 0; k < p->solo_nmarks; k++) {
        size_t slot = (p->solo_mark0 + k) % VRAM__SOLO_MARKS;
        if (p->solo_marks[slot].epoch < stamp)
            continue;
        p->st.event_waits_total++;
        if (vram__backend_event_wait(p->backend, p->solo_marks[slot].event) != 0)
            break; /* wait for everything instead */
        p->solo_done = p->solo_marks[slot].epoch;
        for (size_t n = k + 1; n; n--)
            mark_pop(p);
        return 0;
    }
    return wait_first_stream(p, "memory freed on the stream cannot be given back before its "
                                "work is waited for");
}

int vram__streams_settle_solo(vram_pool *p)
{
    return vram__streams_settle_upto(p, p->solo_freed);
}

static int find_or_add(vram_pool *p, vram_stream s, vram__stream_state **out)
{
    if (VRAM__LIKELY(p->n_streams && p->streams[p->last_stream].handle == s)) {
        *out = &p->streams[p->last_stream];
        return 0;
    }
    for (size_t i = 0; i < p->n_streams; i++) {
        if (p->streams[i].handle == s) {
            p->last_stream = i;
            *out = &p->streams[i];
            return 0;
        }
    }
    if (p->has_events && p->n_streams == 1 && !p->shared_streams) {
        int rc = second_stream_joins(p);
        if (rc)
            return rc;
    }
    vram__stream_state *grown =
        vram__grow(p->streams, &p->cap_streams, p->n_streams, sizeof *p->streams, 8);
    if (!grown)
        return VRAM_EHOSTMEM;
    p->streams = grown;
    p->last_stream = p->n_streams;
    vram__stream_state *ss = &p->streams[p->n_streams];
    *ss = (vram__stream_state){.handle = s, .ordinal = (uint32_t)p->n_streams, .epoch = 1};
    p->n_streams++;
    *out = ss;
    return 0;
}

static void unlink_head(vram_pool *p, vram__stream_state *ss)
{
    vram__block *b = ss->pending_head;
    ss->pending_head = b->fnext;
    if (!ss->pending_head)
        ss->pending_tail = NULL;
    b->fnext = NULL;
    p->st.pending_bytes -= b->size;
}

int vram__stream_begin(vram_pool *p, vram_stream s, vram__stream_state **out)
{
    vram__stream_state *ss;
    int rc = find_or_add(p, s, &ss);
    if (rc)
        return rc;
    ss->seq++;
    if (!p->has_events) {
        while (ss->pending_head) {
            vram__block *b = ss->pending_head;
            unlink_head(p, ss);
            vram__pool_release(p, b);
        }
    }
    *out = ss;
    return 0;
}

/* --- with real events ------------------------------------------------- */

static void fifo_append(vram__stream_state *ss, vram__block *b)
{
    b->pnext = NULL;
    b->pprev = ss->pending_tail;
    if (ss->pending_tail)
        ss->pending_tail->pnext = b;
    else
        ss->pending_head = b;
    ss->pending_tail = b;
}

/* Insert b after `prev` (at the head when prev is NULL). */
static void fifo_insert_after(vram__stream_state *ss, vram__block *prev, vram__block *b)
{
    b->pprev = prev;
    b->pnext = prev ? prev->pnext : ss->pending_head;
    if (b->pnext)
        b->pnext->pprev = b;
    else
        ss->pending_tail = b;
    if (prev)
        prev->pnext = b;
    else
        ss->pending_head = b;
}

static void fifo_remove(vram__stream_state *ss, vram__block *b)
{
    if (b->pprev)
        b->pprev->pnext = b->pnext;
    else
        ss->pending_head = b->pnext;
    if (b->pnext)
        b->pnext->pprev = b->pprev;
    else
        ss->pending_tail = b->pprev;
    b->pprev = b->pnext = NULL;
}

/* Take pending block `n`, already out of the stream's own index, out of its
 * list and byte counts. */
static void own_forget(vram_pool *p, vram__stream_state *ss, vram__block *n)
{
    fifo_remove(ss, n);
    if (n->seq == ss->epoch)
        ss->open_bytes -= n->size;
    p->st.pending_bytes -= n->size;
}

/* Take pending block `n` out of its stream's books (own index and list). */
static void own_remove(vram_pool *p, vram__stream_state *ss, vram__block *n)
{
    vram__tlsf_remove(&ss->own[n->region], n);
    own_forget(p, ss, n);
}

static int own_neighbour(const vram__stream_state *ss, const vram__block *n)
{
    return n && n->state == VRAM__PENDING && n->stream == ss->handle;
}

/* Free on a stream with events: coalesce with the stream's own pending
 * neighbours (the merged block belongs to the current epoch) and file it. */
static void defer_evented(vram_pool *p, vram__stream_state *ss, vram__block *b)
{
    b->state = VRAM__PENDING;
    b->stream = ss->handle;
    vram__block *prev = b->prev, *next = b->next;
    if (own_neighbour(ss, prev)) {
        own_remove(p, ss, prev);
        b = vram__block_merge(p, prev, b);
    }
    if (own_neighbour(ss, next)) {
        own_remove(p, ss, next);
        vram__block_merge(p, b, next);
    }
    b->seq = ss->epoch;
    ss->open_bytes += b->size;
    p->st.pending_bytes += b->size;
    vram__tlsf_insert(&ss->own[b->region], b);
    fifo_append(ss, b);
}

/* A pending block of `from` serving `size`, the one the policy would pick
 * among them, taken out of its own index only; NULL if none. */
static vram__block *pending_pick(vram_pool *p, vram__stream_state *from, uint64_t size,
                                 int region)
{
    if (!from->pending_head)
        return NULL;
    if (region == VRAM__HUGE)
        return vram__tlsf_take_if(&from->own[region], size, vram__huge_fits, &size, 32);
    return p->ops->pick(p, &from->own[region], size);
}

/* Hand out picked block b of `from` as a live block of `size`: out of the
 * stream's books; a rest of at least a granule stays pending on `from`, in
 * b's epoch and b's place in the list (which stays in epoch order). */
static vram__block *pending_claim(vram_pool *p, vram__stream_state *from, vram__block *b,
                                  uint64_t size)
{
    vram__block *before = b->pprev;
    own_forget(p, from, b);
    if (b->region != VRAM__HUGE && b->size - size >= p->granule) {
        vram__block *rest = vram__block_cut(p, b, size);
        rest->state = VRAM__PENDING;
        rest->stream = from->handle;
        rest->seq = b->seq;
        if (rest->seq == from->epoch)
            from->open_bytes += rest->size;
        p->st.pending_bytes += rest->size;
        vram__tlsf_insert(&from->own[rest->region], rest);
        fifo_insert_after(from, before, rest);
    }
    b->state = VRAM__LIVE;
    return b;
}

vram__block *vram__stream_pick_own(vram_pool *p, vram__stream_state *ss, uint64_t size,
                                   int region)
{
    return pending_pick(p, ss, size, region);
}

void vram__stream_unpick(vram__stream_state *ss, vram__block *b)
{
    vram__tlsf_insert(&ss->own[b->region], b);
}

vram__block *vram__stream_claim_own(vram_pool *p, vram__stream_state *ss, vram__block *b,
                                    uint64_t size)
{
    return pending_claim(p, ss, b, size);
}

/* Release every pending block of `ss` up to epoch `upto` to the shared free
 * index; returns the bytes. */
static uint64_t release_upto(vram_pool *p, vram__stream_state *ss, uint64_t upto)
{
    uint64_t bytes = 0;
    while (ss->pending_head && ss->pending_head->seq <= upto) {
        vram__block *b = ss->pending_head;
        own_remove(p, ss, b);
        bytes += b->size;
        vram__pool_release(p, b);
    }
    return bytes;
}

/* Close the stream's open epoch with an event. On failure the blocks stay
 * pending until a later try. */
static void record_epoch(vram_pool *p, vram__stream_state *ss)
{
    if (!ss->open_bytes)
        return;
    vram__stream_event *grown =
        vram__grow(ss->events, &ss->cap_events, ss->n_events, sizeof *grown, 4);
    if (!grown)
        return;
    ss->events = grown;
    void *ev = NULL;
    p->st.backend_calls_total++;
    if (vram__backend_event_record(p->backend, ss->handle, &ev) != 0) {
        p->st.backend_failures_total++;
        vram_log(VRAM_LOG_WARN, "pool \"%s\": recording an event failed (%s); frees on the "
                                 "stream stay pending",
                  p->name, vram_last_error());
        return;
    }
    ss->events[ss->n_events++] = (vram__stream_event){ev, ss->epoch};
    ss->epoch++;
    ss->open_bytes = 0;
}

/* The recorded event of `from` covering frees of epoch `seq` (the oldest
 * recorded at or after it), recording one for the open epoch if needed;
 * NULL if none could be. */
static void *event_covering(vram_pool *p, vram__stream_state *from, uint64_t seq)
{
    if (seq == from->epoch)
        record_epoch(p, from);
    for (size_t k = 0; k < from->n_events; k++)
        if (from->events[k].epoch >= seq)
            return from->events[k].event;
    return NULL;
}

int vram__stream_take_waiting(vram_pool *p, vram__stream_state *ss, uint64_t size, int region,
                              vram__block **out)
{
    if (!p->stream_waits || !p->shared_streams || p->st.pending_bytes < size ||
        vram__block_reserve(&p->slab))
        return VRAM_ENOMEM;
    for (size_t i = 0; i < p->n_streams; i++) {
        vram__stream_state *from = &p->streams[i];
        if (from == ss || !from->pending_head)
            continue;
        vram__block *b = pending_pick(p, from, size, region);
        if (!b)
            continue;
        void *ev = event_covering(p, from, b->seq); /* NULL: record_epoch said why */
        int rc = VRAM_EBACKEND;
        if (ev) {
            p->st.backend_calls_total++;
            rc = vram__backend_stream_wait(p->backend, ss->handle, ev);
        }
        if (rc) {
            if (ev) {
                p->st.backend_failures_total++;
                vram_log(VRAM_LOG_WARN, "pool \"%s\": stream %p cannot wait on the device for "
                                         "stream %p's frees (%s); they stay pending",
                          p->name, ss->handle, from->handle, vram_last_error());
            }
            vram__stream_unpick(from, b);
            return VRAM_ENOMEM;
        }
        p->st.stream_waits_total++;
        *out = pending_claim(p, from, b, size);
        return 0;
    }
    return VRAM_ENOMEM;
}

/* Release the blocks of the stream's events that completed, oldest first
 * (waiting for each when `wait`), and drop those events; the bytes. A
 * failed wait or query stops there (its frees stay pending): logged, or
 * with `failed` given, only noted in it. */
static uint64_t release_completed(vram_pool *p, vram__stream_state *ss, int wait, int *failed)
{
    uint64_t released = 0;
    size_t done = 0;
    for (; done < ss->n_events; done++) {
        void *ev = ss->events[done].event;
        int rc;
        if (wait) {
            p->st.event_waits_total++;
            rc = vram__backend_event_wait(p->backend, ev) == 0 ? 1 : -1;
        } else {
            rc = vram__backend_event_query(p->backend, ev);
        }
        if (rc < 0 && failed)
            *failed = 1;
        else if (rc < 0)
            vram_log(VRAM_LOG_WARN, "pool \"%s\": an event failed (%s); its frees stay "
                                     "pending",
                      p->name, vram_last_error());
        if (rc <= 0)
            break;
        released += release_upto(p, ss, ss->events[done].epoch);
        p->backend->ops->event_release(p->backend->self, ev);
    }
    if (done) {
        ss->n_events -= done;
        for (size_t k = 0; k < ss->n_events; k++)
            ss->events[k] = ss->events[k + done];
    }
    return released;
}

uint64_t vram__streams_reclaim(vram_pool *p, int wait)
{
    uint64_t released = 0;
    for (size_t i = 0; i < p->n_streams; i++) {
        record_epoch(p, &p->streams[i]);
        released += release_completed(p, &p->streams[i], wait, NULL);
    }
    return released;
}

uint64_t vram__streams_poll(vram_pool *p, int *failed)
{
    uint64_t released = 0;
    for (size_t i = 0; i < p->n_streams; i++)
        released += release_completed(p, &p->streams[i], 0, failed);
    return released;
}

/* --- modelled events (no backend events) ------------------------------ */

int vram__stream_defer(vram_pool *p, vram__stream_state *ss, vram__block *b)
{
    if (p->has_events && !p->shared_streams) { /* one stream: free at once */
        p->solo_freed = p->solo_epoch;
        vram__pool_release(p, b);
        return 0;
    }
    if (p->has_events) {
        defer_evented(p, ss, b);
        return 0;
    }
    b->state = VRAM__PENDING;
    b->seq = ss->seq;
    b->stream = ss->handle;
    b->fnext = NULL;
    if (ss->pending_tail)
        ss->pending_tail->fnext = b;
    else
        ss->pending_head = b;
    ss->pending_tail = b;
    p->st.pending_bytes += b->size;
    return 0;
}

uint64_t vram__streams_wait_all(vram_pool *p)
{
    return p->has_events ? vram__streams_reclaim(p, 1) : 0;
}

int vram__streams_flush_all(vram_pool *p, int force)
{
    if (p->has_events) {
        vram__streams_reclaim(p, 1);
        int rc = 0;
        for (size_t i = 0; i < p->n_streams; i++) {
            vram__stream_state *ss = &p->streams[i];
            if (!ss->pending_head)
                continue;
            if (!force) { /* an event failed: the work may still run */
                rc = vram__fail(VRAM_EBACKEND,
                                "pool \"%s\": waiting for the work on a stream failed; its "
                                "freed blocks stay pending",
                                p->name);
                continue;
            }
            release_upto(p, ss, UINT64_MAX);
        }
        return rc;
    }
    for (size_t i = 0; i < p->n_streams; i++) { /* modelled events: all complete */
        vram__stream_state *ss = &p->streams[i];
        while (ss->pending_head) {
            vram__block *b = ss->pending_head;
            unlink_head(p, ss);
            vram__pool_release(p, b);
        }
    }
    return 0;
}

void vram__streams_destroy(vram_pool *p)
{
    while (p->solo_nmarks)
        mark_pop(p);
    for (size_t i = 0; i < p->n_streams; i++) {
        vram__stream_state *ss = &p->streams[i];
        for (size_t k = 0; k < ss->n_events; k++)
            p->backend->ops->event_release(p->backend->self, ss->events[k].event);
        free(ss->events);
    }
    free(p->streams);
    p->streams = NULL;
    p->n_streams = p->cap_streams = 0;
}
