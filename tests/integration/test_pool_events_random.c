/* tests/integration/test_pool_events_random.c - stream order on a backend
 * with real events (VRAM_BACKEND_EVENTS), through the public API only: a
 * randomized sequence of operations checked against a reference model.
 *
 * The backend is the fake of events/fake_events.h (it checks the
 * single-stream rule and its ledger on every operation); events/world.h
 * makes the pool on it. The sequence runs on 3 streams (the default stream
 * among them; one of them alone for a while first, some seeds with the
 * first join refused) and on one stream alone; each operation is checked
 * against the model: no overlap, live blocks inside backend memory, the
 * stream rule (bytes freed on one stream go to another only if freed
 * before the join's wait or an event recorded after their free was
 * reported complete), exact counters (waits, backend calls), bounds on the
 * pending bytes after every operation and, from snapshots, the pending
 * blocks exactly and the bytes freed while alone in free blocks. A further
 * mode gives the fake stream_wait_event and the pool its stream waits: the
 * stream rule then also lets bytes freed on a stream R at t go to a stream W
 * that waited on the device for an event recorded on R after t; a last one
 * adds the pool's reclaim_large (events recorded and queried before large
 * requests).
 * VRAM_TEST_SEED=<n> runs one seed; VRAM_TEST_QUICK=1 runs fewer
 * operations; VRAM_TEST_VERBOSE=1 prints the library's log lines and a
 * summary of each run. */
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
#include "world.h"

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
    uint64_t n_wait_reuse; /* cross-stream reuses allowed by a wait on the device only */
    int stream_waits;      /* the fake has stream_wait_event, the pool stream_waits 1 */
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
             * recorded after their free was reported complete; with stream
             * waits also when s waited on the device for an event recorded
             * on their stream after their free (s's work from then on runs
             * after the work that used them). */
            const fake *f = &m->w.f;
            int before_join = x.solo && f->shared && x.t_free < f->t_join;
            int completed = f->reported_upto[x.stream] > x.t_free;
            int waited = m->stream_waits && f->waited_upto[stream_index(S(s))][x.stream] > x.t_free;
            RM_CHECK(m, !x.solo || x.stream == f->first,
                     "a free on stream %u counted as free at once, but stream %u was first",
                     x.stream, f->first);
            RM_CHECK(m, before_join || completed || waited,
                     "0x%" PRIx64 "+%" PRIu64 " freed on stream %u at t=%" PRIu64
                     " handed to stream %u with no event recorded after the free reported "
                     "complete (latest: t=%" PRIu64 "), no wait of stream %u on the device for "
                     "one (latest: t=%" PRIu64 ") and not freed before the join's wait (%s)",
                     x.addr, x.size, x.stream, x.t_free, s, f->reported_upto[x.stream], s,
                     f->waited_upto[stream_index(S(s))][x.stream],
                     f->shared ? "joined later" : "no second stream joined");
            m->n_cross_reuse++;
            m->n_join_reuse += before_join;
            m->n_wait_reuse += !before_join && !completed;
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
     * record attempt is a backend call of the pool's, as is every stream
     * wait and as are the backend's own calls (map, unmap, segments, ...);
     * stream_waits_total counts the stream waits that succeeded. */
    RM_CHECK(m, st.event_waits_total == w->f.n_wait, "event_waits_total %" PRIu64 ", waits %u",
             st.event_waits_total, w->f.n_wait);
    RM_CHECK(m, st.backend_calls_total ==
                    bs.calls + w->f.n_record + w->f.n_record_failed + w->f.n_stream_wait,
             "backend_calls_total %" PRIu64 ", backend calls %" PRIu64 " + records %u + failed "
             "records %u + stream waits %u",
             st.backend_calls_total, bs.calls, w->f.n_record, w->f.n_record_failed,
             w->f.n_stream_wait);
    RM_CHECK(m, st.stream_waits_total == w->f.n_stream_wait - w->f.n_stream_wait_failed,
             "stream_waits_total %" PRIu64 ", stream waits %u of which %u failed",
             st.stream_waits_total, w->f.n_stream_wait, w->f.n_stream_wait_failed);
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
static uint64_t rm_wait_reuses, rm_stream_waits, rm_stream_wait_failures;

/* RM_EVENTS: 3 streams, every record succeeds; RM_FAILED_RECORDS: the same
 * with records failing now and then, and on some seeds the first join
 * refused (its record or its wait fails); RM_SINGLE: one stream alone;
 * RM_STREAM_WAITS: as RM_EVENTS with the fake's stream_wait_event and the
 * pool's stream_waits 1, a stream wait failing now and then;
 * RM_RECLAIM_LARGE: that with the pool's reclaim_large 1 (large requests let
 * the completed frees rejoin first: every one on even seeds, those of 4 MiB
 * or more on odd ones). */
enum { RM_EVENTS, RM_FAILED_RECORDS, RM_SINGLE, RM_STREAM_WAITS, RM_RECLAIM_LARGE };

static void run_random(vram_policy policy, uint64_t seed, uint64_t n_ops, int mode)
{
    rmodel m;
    memset(&m, 0, sizeof m);
    m.seed = seed;
    int record_failures = mode == RM_FAILED_RECORDS;
    m.stream_waits = mode == RM_STREAM_WAITS || mode == RM_RECLAIM_LARGE;
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
    opt_stream_wait_event = m.stream_waits;
    opt_reclaim_large = mode == RM_RECLAIM_LARGE;
    opt_reclaim_min = seed % 2 ? 4 * MiB : 0;
    world_open(&m.w, policy, 64 * MiB, seed % 2 ? 16 * MiB : 0);
    opt_map_chunk = opt_large_round = 0;
    opt_limit = 0;
    opt_stream_wait_event = opt_reclaim_large = 0;
    opt_reclaim_min = 0;
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
            else if (m.stream_waits)
                m.w.f.stream_wait_fail = 1;
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
    rm_wait_reuses += m.n_wait_reuse;
    rm_stream_waits += m.w.f.n_stream_wait - m.w.f.n_stream_wait_failed;
    rm_stream_wait_failures += m.w.f.n_stream_wait_failed;
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
    if (getenv("VRAM_TEST_VERBOSE") && m.stream_waits)
        print_message("%s: %u stream waits (%u failed), %" PRIu64 " reuses after a wait on the "
                      "device alone\n",
                      m.where, m.w.f.n_stream_wait, m.w.f.n_stream_wait_failed, m.n_wait_reuse);
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
    rm_wait_reuses = rm_stream_waits = rm_stream_wait_failures = 0;
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
    if ((mode == RM_STREAM_WAITS || mode == RM_RECLAIM_LARGE) &&
        (!rm_wait_reuses || !rm_stream_wait_failures))
        fail_msg("%" PRIu64 " reuses after a wait on the device alone (%" PRIu64 " stream waits, "
                 "%" PRIu64 " failed): the test is too weak",
                 rm_wait_reuses, rm_stream_waits, rm_stream_wait_failures);
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

/* Events complete at random times and the backend can make a stream wait
 * on the device: another stream's pending frees are taken with such a wait
 * before new memory (some of the waits fail: the frees stay pending). */
static void test_random_stream_waits(void **state) { random_seeds(state, RM_STREAM_WAITS); }

/* The same with large requests letting the completed frees of every stream
 * rejoin the shared free space first (reclaim_large). */
static void test_random_reclaim_large(void **state) { random_seeds(state, RM_RECLAIM_LARGE); }

int main(void)
{
#define BOTH(fn)                                                                                   \
    cmocka_unit_test_prestate(fn, &POL_VMM), cmocka_unit_test_prestate(fn, &POL_SEG)
    const struct CMUnitTest tests[] = {
        BOTH(test_random),
        BOTH(test_random_failed_records),
        BOTH(test_random_single_stream),
        BOTH(test_random_stream_waits),
        BOTH(test_random_reclaim_large),
    };
#undef BOTH
    vram_log_set_handler(log_capture, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
