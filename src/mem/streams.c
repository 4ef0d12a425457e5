/* src/mem/streams.c - stream order. Each stream that touches the pool gets a
 * record with a sequence number and a list of the blocks freed on it that
 * other streams may not reuse yet.
 *
 * With real events (VRAM_BACKEND_EVENTS) an event is recorded at each free
 * and queried lazily at later operations; a block becomes free for everyone
 * once its event completed, and under memory pressure the pool waits for
 * them. Without events (sim, host) completion is modelled: the event of a
 * free on stream s completes when s issues its next operation on the pool,
 * so every operation on s first releases s's pending blocks. A block freed on
 * s is thereby reusable at once by s's next operation, and by another stream
 * only after s has issued that operation. */
#include <stdlib.h>

#include "base/log_internal.h"
#include "pool_internal.h"

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
    vram__stream_state *grown =
        vram__grow(p->streams, &p->cap_streams, p->n_streams, sizeof *p->streams, 8);
    if (!grown)
        return VRAM_EHOSTMEM;
    p->streams = grown;
    p->last_stream = p->n_streams;
    vram__stream_state *ss = &p->streams[p->n_streams];
    *ss = (vram__stream_state){.handle = s, .ordinal = (uint32_t)p->n_streams};
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

/* Release the pending blocks of `ss` whose events completed (stream order:
 * stop at the first that has not). */
static void poll_events(vram_pool *p, vram__stream_state *ss)
{
    while (ss->pending_head) {
        vram__block *b = ss->pending_head;
        if (b->event) {
            int done = p->backend->ops->event_query(p->backend->self, b->event);
            if (done < 0)
                vram__log(VRAM_LOG_WARN, "pool \"%s\": querying an event failed (%s); the "
                                         "block stays pending",
                          p->name, vram_last_error());
            if (done <= 0)
                return;
            p->backend->ops->event_release(p->backend->self, b->event);
        } else if (b->seq >= ss->seq) {
            return; /* recorded no event: completes at the stream's next operation */
        }
        unlink_head(p, ss);
        vram__pool_release(p, b);
    }
}

int vram__stream_begin(vram_pool *p, vram_stream s, vram__stream_state **out)
{
    vram__stream_state *ss;
    int rc = find_or_add(p, s, &ss);
    if (rc)
        return rc;
    ss->seq++;
    if (p->has_events) {
        for (size_t i = 0; i < p->n_streams; i++)
            poll_events(p, &p->streams[i]);
        ss = &p->streams[p->last_stream];
    } else {
        while (ss->pending_head) {
            vram__block *b = ss->pending_head;
            unlink_head(p, ss);
            vram__pool_release(p, b);
        }
    }
    *out = ss;
    return 0;
}

int vram__stream_defer(vram_pool *p, vram__stream_state *ss, vram__block *b)
{
    b->state = VRAM__PENDING;
    b->seq = ss->seq;
    b->event = NULL;
    b->stream = ss->handle;
    b->fnext = NULL;
    if (p->has_events &&
        p->backend->ops->event_record(p->backend->self, ss->handle, &b->event) != 0) {
        vram__log(VRAM_LOG_WARN, "pool \"%s\": recording an event failed (%s); the block "
                                 "waits for its stream's next operation",
                  p->name, vram_last_error());
        b->event = NULL;
    }
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
    if (!p->has_events)
        return 0;
    uint64_t released = 0;
    for (size_t i = 0; i < p->n_streams; i++) {
        vram__stream_state *ss = &p->streams[i];
        while (ss->pending_head && ss->pending_head->event) {
            vram__block *b = ss->pending_head;
            p->st.event_waits_total++;
            if (p->backend->ops->event_wait(p->backend->self, b->event) != 0)
                break;
            p->backend->ops->event_release(p->backend->self, b->event);
            released += b->size;
            unlink_head(p, ss);
            vram__pool_release(p, b);
        }
    }
    return released;
}

int vram__streams_flush_all(vram_pool *p, int force)
{
    int rc = 0;
    for (size_t i = 0; i < p->n_streams; i++) {
        vram__stream_state *ss = &p->streams[i];
        while (ss->pending_head) {
            vram__block *b = ss->pending_head;
            if (b->event) {
                int wrc = p->backend->ops->event_wait(p->backend->self, b->event);
                if (wrc && !force) { /* the work may still run: keep the block */
                    rc = wrc;
                    break;
                }
                p->backend->ops->event_release(p->backend->self, b->event);
            }
            unlink_head(p, ss);
            vram__pool_release(p, b);
        }
    }
    return rc;
}

void vram__streams_destroy(vram_pool *p)
{
    free(p->streams);
    p->streams = NULL;
    p->n_streams = p->cap_streams = 0;
}
