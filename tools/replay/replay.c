/* tools/replay/replay.c - trace replay: drive a fresh pool with a trace's events,
 * measure what it held (peaks, fragmentation when reserved memory peaked,
 * backend calls; on a GPU also the device memory in use, as the driver
 * reports it), then time its bookkeeping against glibc malloc/free over the
 * same events, alternating the two sides and keeping each one's median, on
 * fresh pools (cold) and on a pool that has seen the trace once (warm). On a
 * GPU backend each stream of the trace is a CUDA stream of the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool_util.h"
#include "replay.h"
#include "vramkit.h"

int vram_replay_opts_init(vram_replay_opts *o)
{
    memset(o, 0, sizeof *o);
    int rc = vram_pool_opts_init(&o->pool);
    o->pool.name = "replay";
    o->pool.configured_listeners = 0; /* the measured run's OOM watch is the replay's own */
    o->oom_dir = vram_config_get()->oom_dir;
    o->backend = "sim";
    o->timing_runs = 5;
    vram_backend_opts bo;
    if (!rc)
        rc = vram_backend_opts_init(&bo);
    o->sim_events = rc ? VRAM_SIM_EVENTS_NONE : bo.sim_events;
    return rc;
}

typedef struct run_ctx {
    const vram_trace *t;
    vram_pool *pool;
    vram_backend *backend; /* the pool's, destroyed after it */
    void **ptrs;
    uint32_t *slot_stream; /* the stream index each live slot was allocated on */
    vram_stream *streams;
    vram_device *dev; /* GPU backends */
} run_ctx;

/* Blocks still live when a pass ends are freed on the stream they were
 * allocated on: a free on another stream (the default one) would make a
 * pool of one stream a pool of two. */
static void free_leftovers(run_ctx *c)
{
    for (size_t i = 0; i < c->t->n_slots; i++) {
        if (c->ptrs[i])
            vram_pool_free(c->pool, c->ptrs[i], c->streams[c->slot_stream[i]]);
        c->ptrs[i] = NULL;
    }
}

/* Only the measured run's pool (`measured`) writes OOM reports (oom_dir):
 * the timed runs repeat the same refusals. The pool's options never attach
 * configured listeners: a trace or a second watch would time them too. */
static int make_pool(run_ctx *c, const vram_replay_opts *o, int measured, vram_pool **out)
{
    vram_backend *b;
    vram_backend_opts bo = {.capacity = o->capacity, .granularity = o->pool.granularity,
                            .device = c->dev, .sim_events = o->sim_events};
    int rc = vram_backend_create(o->backend ? o->backend : "sim", &bo, &b);
    if (rc)
        return rc;
    vram_pool_opts po = o->pool;
    po.backend = b;
    if (o->limit_ratio > 0) {
        po.limit = (uint64_t)(o->limit_ratio * (double)c->t->peak_live_bytes);
        if (!po.limit)
            po.limit = 1;
    }
    po.configured_listeners = 0;
    rc = vram_pool_create(&po, out);
    if (!rc && measured && o->oom_dir && *o->oom_dir) {
        vram_oom_opts oo;
        vram_oom_opts_init(&oo); /* a malformed variable keeps its default */
        oo.directory = o->oom_dir;
        rc = vram_pool_oom_watch(*out, &oo);
        if (rc) {
            tool_saved_error err;
            tool_error_save(&err);
            vram_pool_destroy(*out);
            *out = NULL;
            tool_error_restore(&err, rc);
        }
    }
    if (rc) {
        vram_backend_destroy(b);
        return rc;
    }
    c->backend = b;
    return 0;
}

static void finish_pool(run_ctx *c)
{
    free_leftovers(c);
    vram_pool_destroy(c->pool);
    vram_backend_destroy(c->backend);
    c->pool = NULL;
    c->backend = NULL;
}

/* The measured run: every event, with peak tracking and failure reports. */
static int measured_run(run_ctx *c, const vram_replay_opts *o, vram_replay_result *r)
{
    uint64_t free0 = 0, total = 0, used_peak = 0;
    if (c->dev && vram_device_memory(c->dev, &free0, &total) != 0)
        return VRAM_EBACKEND;
    int rc = make_pool(c, o, 1, &c->pool);
    if (rc)
        return rc;
    vram_pool *p = c->pool;
    vram_pool_stats st;
    uint64_t frag_peak = 0;
    for (size_t i = 0; i < c->t->n_events; i++) {
        const vram_trace_event *e = &c->t->events[i];
        vram_stream s = c->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            rc = vram_pool_alloc(p, e->size, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s,
                                 &c->ptrs[e->slot]);
            if (rc == VRAM_EHOSTMEM || rc == VRAM_EINVAL) {
                finish_pool(c);
                return rc;
            }
            if (rc) {
                if (!r->failed_allocs) {
                    r->first_failure_line = e->line;
                    r->first_failure_size = e->size;
                    snprintf(r->first_failure, sizeof r->first_failure, "%s", vram_last_error());
                }
                r->failed_allocs++;
                continue;
            }
            r->allocs++;
            c->slot_stream[e->slot] = e->stream_index;
            uint64_t fr;
            if (c->dev && vram_device_memory(c->dev, &fr, &total) == 0 && fr < free0 &&
                free0 - fr > used_peak)
                used_peak = free0 - fr;
            vram_pool_stats_counters(p, &st);
            if (st.reserved_bytes > frag_peak) {
                /* Reserved memory reached a new peak: note its fragmentation. */
                vram_pool_stats_get(p, &st);
                frag_peak = st.reserved_bytes;
                r->fragmentation_at_peak = st.fragmentation_ratio;
            }
        } else if (e->action == VRAM_TRACE_FREE) {
            if (c->ptrs[e->slot]) {
                vram_pool_free(p, c->ptrs[e->slot], s);
                c->ptrs[e->slot] = NULL;
                r->frees++;
            }
        }
    }
    vram_pool_stats_counters(p, &st);
    r->peak_live_bytes = st.peak_live_bytes;
    r->peak_reserved_bytes = st.peak_reserved_bytes;
    r->limit_bytes = st.limit_bytes;
    r->backend_calls = st.backend_calls_total;
    r->stream_waits = st.stream_waits_total;
    r->event_waits = st.event_waits_total;
    r->peak_driver_bytes = used_peak;
    if (r->peak_live_bytes) {
        r->reserved_ratio = (double)r->peak_reserved_bytes / (double)r->peak_live_bytes;
        r->driver_ratio = (double)used_peak / (double)r->peak_live_bytes;
        /* Both from the trace: refused requests lower the pool's peak. */
        r->floor_ratio = (double)r->peak_live_pending_bytes / (double)c->t->peak_live_bytes;
    }
    finish_pool(c);
    return 0;
}

/* One timed pass over the events on c->pool, nothing else in the loop;
 * blocks still live at the end are freed after the clock stops. */
static uint64_t timed_pass(run_ctx *c)
{
    vram_pool *p = c->pool;
    const vram_trace_event *ev = c->t->events;
    size_t n = c->t->n_events;
    void **ptrs = c->ptrs;
    uint64_t t0 = tool_now_ns();
    for (size_t i = 0; i < n; i++) {
        const vram_trace_event *e = &ev[i];
        if (e->action == VRAM_TRACE_ALLOC) {
            if (vram_pool_alloc(p, e->size, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER,
                                c->streams[e->stream_index], &ptrs[e->slot]))
                ptrs[e->slot] = NULL;
            else
                c->slot_stream[e->slot] = e->stream_index;
        } else if (e->action == VRAM_TRACE_FREE && ptrs[e->slot]) {
            vram_pool_free(p, ptrs[e->slot], c->streams[e->stream_index]);
            ptrs[e->slot] = NULL;
        }
    }
    uint64_t ns = tool_now_ns() - t0;
    free_leftovers(c);
    return ns;
}

/* Cold: a fresh pool. Returns ns. */
static int timed_pool_run(run_ctx *c, const vram_replay_opts *o, uint64_t *ns)
{
    int rc = make_pool(c, o, 0, &c->pool);
    if (rc)
        return rc;
    *ns = timed_pass(c);
    finish_pool(c);
    return 0;
}

static uint64_t timed_malloc_run(run_ctx *c)
{
    const vram_trace_event *ev = c->t->events;
    size_t n = c->t->n_events;
    void **ptrs = c->ptrs;
    uint64_t t0 = tool_now_ns();
    for (size_t i = 0; i < n; i++) {
        const vram_trace_event *e = &ev[i];
        if (e->action == VRAM_TRACE_ALLOC) {
            ptrs[e->slot] = malloc(e->size);
        } else if (e->action == VRAM_TRACE_FREE) {
            free(ptrs[e->slot]);
            ptrs[e->slot] = NULL;
        }
    }
    uint64_t ns = tool_now_ns() - t0;
    for (size_t i = 0; i < c->t->n_slots; i++) {
        free(ptrs[i]);
        ptrs[i] = NULL;
    }
    return ns;
}

/* The floor of any policy under the stream model: bytes live (as requested)
 * plus, per stream, the bytes freed since that stream's last operation, at
 * their most. It depends on the trace alone. */
static int model_floor(const vram_trace *t, uint64_t *out)
{
    uint64_t *pending = tool_calloc(t->n_streams, sizeof *pending);
    if (!pending)
        return VRAM_EHOSTMEM;
    uint64_t live = 0, pending_sum = 0, peak = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const vram_trace_event *e = &t->events[i];
        if (e->action == VRAM_TRACE_ALLOC_FAIL)
            continue;
        pending_sum -= pending[e->stream_index]; /* this operation completes them */
        pending[e->stream_index] = 0;
        if (e->action == VRAM_TRACE_ALLOC) {
            live += e->size;
        } else {
            live -= e->size;
            pending[e->stream_index] = e->size;
            pending_sum += e->size;
        }
        if (live + pending_sum > peak)
            peak = live + pending_sum;
    }
    free(pending);
    *out = peak;
    return 0;
}

int vram_replay_run(const vram_trace *t, const vram_replay_opts *o, vram_replay_result *r)
{
    if (!t || !o || !r)
        return vram_set_error(VRAM_EINVAL, "vram_replay_run: trace, opts and result are required");
    memset(r, 0, sizeof *r);
    r->events = t->n_events;
    run_ctx c = {.t = t};
    c.ptrs = tool_calloc(t->n_slots, sizeof *c.ptrs);
    c.slot_stream = tool_calloc(t->n_slots ? t->n_slots : 1, sizeof *c.slot_stream);
    c.streams = tool_calloc(t->n_streams, sizeof *c.streams);
    unsigned runs = o->timing_runs ? o->timing_runs : 5;
    uint64_t *ours = tool_calloc(runs, sizeof *ours);
    uint64_t *theirs = tool_calloc(runs, sizeof *theirs);
    uint64_t *warm = tool_calloc(runs, sizeof *warm);
    int rc = c.ptrs && c.slot_stream && c.streams && ours && theirs && warm ? 0 : VRAM_EHOSTMEM;
    vram_backend_type type = VRAM_BACKEND_TYPE_SIM;
    if (!rc && o->backend)
        rc = vram_backend_type_parse(o->backend, &type);
    if (!rc && vram_backend_type_is_gpu(type))
        rc = vram_device_open((int)vram_config_get()->device, NULL, &c.dev);
    size_t acquired = 0;
    for (size_t i = 0; !rc && i < t->n_streams; i++) {
        if (!c.dev) {
            c.streams[i] = (vram_stream)(uintptr_t)t->streams[i];
            continue;
        }
        rc = vram_device_stream_acquire(c.dev, VRAM_PRIORITY_NORMAL, &c.streams[i]);
        acquired += !rc;
    }
    if (!rc)
        rc = model_floor(t, &r->peak_live_pending_bytes);
    if (!rc)
        rc = measured_run(&c, o, r);
    for (unsigned i = 0; !rc && i < runs; i++) {
        rc = timed_pool_run(&c, o, &ours[i]);
        if (!o->skip_malloc)
            theirs[i] = timed_malloc_run(&c);
    }
    if (!rc) { /* warm: one untimed pass, then the timed ones on the same pool */
        rc = make_pool(&c, o, 0, &c.pool);
        if (!rc) {
            timed_pass(&c);
            vram_pool_stats st0, st1;
            vram_pool_stats_counters(c.pool, &st0);
            for (unsigned i = 0; i < runs; i++)
                warm[i] = timed_pass(&c);
            vram_pool_stats_counters(c.pool, &st1);
            r->warm_backend_calls =
                (double)(st1.backend_calls_total - st0.backend_calls_total) / runs;
            r->warm_peak_reserved_bytes = st1.peak_reserved_bytes;
            if (r->peak_live_bytes)
                r->warm_reserved_ratio =
                    (double)r->warm_peak_reserved_bytes / (double)r->peak_live_bytes;
            finish_pool(&c);
        }
    }
    if (!rc) {
        double ops = (double)(r->allocs + r->frees);
        if (ops > 0) {
            r->ns_per_op = tool_median_u64(ours, runs) / ops;
            r->warm_ns_per_op = tool_median_u64(warm, runs) / ops;
            r->malloc_ns_per_op = o->skip_malloc ? 0.0 : tool_median_u64(theirs, runs) / ops;
        }
    }
    for (size_t i = 0; i < acquired; i++)
        vram_device_stream_release(c.dev, c.streams[i]);
    if (c.dev)
        vram_device_close(c.dev);
    free(warm);
    free(c.ptrs);
    free(c.slot_stream);
    free(c.streams);
    free(ours);
    free(theirs);
    return rc;
}
