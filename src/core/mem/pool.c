/* src/core/mem/pool.c - the pool's public calls: creation and destruction,
 * allocation and free (budgets, accounting, telling the listeners), trim,
 * block lookup, and the names of kinds and policies. Every call takes the
 * pool's lock; the work under it is bookkeeping on the host. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "pool_internal.h"
#include "vramkit/config.h"

static const char *const kind_names[] = {
#define KIND_NAME(NAME, name) #name,
    VRAM_KINDS(KIND_NAME)
#undef KIND_NAME
};

const char *vram_kind_name(vram_kind kind)
{
    return (unsigned)kind < VRAM_KIND_COUNT ? kind_names[kind] : "?";
}

int vram_kind_parse(const char *name, vram_kind *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_kind_parse: out is NULL");
    for (unsigned i = 0; name && i < VRAM_KIND_COUNT; i++) {
        if (strcmp(kind_names[i], name) == 0) {
            *out = (vram_kind)i;
            return 0;
        }
    }
    return vram__fail(VRAM_EINVAL,
                      "unknown kind \"%s\" (weights, activations, io, frames, workspace, decoder, "
                      "other)",
                      name ? name : "(null)");
}

const char *vram_policy_name(vram_policy policy)
{
    return policy == VRAM_POLICY_VMM ? "vmm" : policy == VRAM_POLICY_SEGMENTS ? "segments" : "?";
}

int vram_policy_parse(const char *name, vram_policy *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_policy_parse: out is NULL");
    if (name && strcmp(name, "vmm") == 0)
        *out = VRAM_POLICY_VMM;
    else if (name && strcmp(name, "segments") == 0)
        *out = VRAM_POLICY_SEGMENTS;
    else
        return vram__fail(VRAM_EINVAL, "unknown policy \"%s\" (vmm, segments)",
                          name ? name : "(null)");
    return 0;
}

int vram_pool_opts_init(vram_pool_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_pool_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_pool_opts){
        .size = sizeof *o,
        .name = "pool",
        .policy = c->policy == 1 ? VRAM_POLICY_SEGMENTS : VRAM_POLICY_VMM,
        .alignment = c->alignment,
        .granularity = c->granularity,
        .map_chunk = c->map_chunk,
        .huge_size = c->huge_size,
        .retain_min = c->retain_min,
        .limit = c->pool_limit,
        .decay_ms = c->decay_ms,
        .place_candidates = (uint32_t)c->place_candidates,
        .stream_waits = c->stream_reuse == 0,
        .reclaim_large = c->stream_reclaim == 1,
        .reclaim_min = c->stream_reclaim_min,
        .small_size = c->small_size,
        .large_round = c->large_round,
        .segment_small = c->segment_small,
        .segment_medium = c->segment_medium,
        .configured_listeners = 1,
        .gpu = -1,
    };
    return rc;
}

static int check_opts(const vram_pool_opts *o, const vram_backend *b)
{
    if (!vram__is_pow2(o->alignment) || o->alignment > (2u << 20))
        return vram__fail(VRAM_EINVAL, "alignment %llu must be a power of two up to 2 MiB",
                          (unsigned long long)o->alignment);
    if (o->policy != VRAM_POLICY_VMM && o->policy != VRAM_POLICY_SEGMENTS)
        return vram__fail(VRAM_EINVAL, "unknown policy %d", (int)o->policy);
    uint64_t need = o->policy == VRAM_POLICY_VMM ? VRAM_BACKEND_MAP : VRAM_BACKEND_SEGMENTS;
    if (!(b->ops->caps & need))
        return vram__fail(VRAM_EINVAL, "backend %s cannot serve the %s policy (it has no %s)",
                          b->ops->name, vram_policy_name(o->policy),
                          need == VRAM_BACKEND_MAP ? "reserve/map" : "segments");
    uint64_t g = o->granularity ? o->granularity : b->granularity;
    if (!vram__is_pow2(g) || g < 4096)
        return vram__fail(VRAM_EINVAL, "granularity %llu must be a power of two of at least 4 KiB",
                          (unsigned long long)g);
    if (o->policy == VRAM_POLICY_VMM && b->granularity && g % b->granularity)
        return vram__fail(VRAM_EINVAL, "granularity %llu is not a multiple of the backend's %llu",
                          (unsigned long long)g, (unsigned long long)b->granularity);
    if (o->large_round && !vram__is_pow2(o->large_round))
        return vram__fail(VRAM_EINVAL, "large_round %llu must be a power of two",
                          (unsigned long long)o->large_round);
    if (o->policy == VRAM_POLICY_VMM && o->alignment > g)
        return vram__fail(VRAM_EINVAL, "alignment %llu is larger than the granularity %llu",
                          (unsigned long long)o->alignment, (unsigned long long)g);
    if (b->capacity > VRAM__CAPACITY_MAX)
        return vram__fail(VRAM_EINVAL, "capacity %llu is beyond the %llu bytes a pool can index",
                          (unsigned long long)b->capacity, (unsigned long long)VRAM__CAPACITY_MAX);
    if (o->policy == VRAM_POLICY_VMM && o->huge_size && o->huge_size <= o->small_size)
        return vram__fail(VRAM_EINVAL, "huge_size %llu must be 0 or larger than small_size %llu",
                          (unsigned long long)o->huge_size, (unsigned long long)o->small_size);
    if (o->gpu < -1 || o->gpu > 1023)
        return vram__fail(VRAM_EINVAL, "gpu %d is no device index (0..1023, or -1 for none)",
                          o->gpu);
    if (o->place_candidates > 1024)
        return vram__fail(VRAM_EINVAL, "place_candidates %u is more than 1024",
                          (unsigned)o->place_candidates);
    if (o->policy == VRAM_POLICY_SEGMENTS &&
        (o->small_size > o->segment_small || o->segment_small > o->segment_medium))
        return vram__fail(VRAM_EINVAL,
                          "segments need small_size (%llu) <= segment_small (%llu) <= "
                          "segment_medium (%llu)",
                          (unsigned long long)o->small_size, (unsigned long long)o->segment_small,
                          (unsigned long long)o->segment_medium);
    if (!b->capacity)
        return vram__fail(VRAM_EINVAL, "backend %s reports no capacity", b->ops->name);
    return 0;
}

/* With no limit given: the device's free memory now, less a margin for the
 * other users of a GPU (the context's own growth, libraries, other
 * processes: the larger of 256 MiB and 1/64 of its total, at most half of
 * what is free); on the host backends (no device work, no events) no
 * margin; the capacity if the backend cannot say. */
static uint64_t default_limit(vram_backend *b)
{
    uint64_t free_bytes = 0, total = 0;
    if (!b->ops->mem_info || b->ops->mem_info(b->self, &free_bytes, &total) || !free_bytes)
        return b->capacity;
    uint64_t margin = 0;
    if (b->ops->caps & VRAM_BACKEND_EVENTS) {
        margin = total / 64 > (256ull << 20) ? total / 64 : 256ull << 20;
        if (margin > free_bytes / 2)
            margin = free_bytes / 2;
    }
    uint64_t limit = free_bytes - margin;
    return limit < b->capacity ? limit : b->capacity;
}

static void pool_free_host(vram_pool *p)
{
    vram__span *sp = p->spans;
    while (sp) {
        vram__span *n = sp->next;
        free(sp);
        sp = n;
    }
    p->spans = NULL;
    vram__streams_destroy(p);
    vram__owners_destroy(p);
    vram__block_slab_destroy(&p->slab);
    vram__u64map_destroy(&p->live);
    if (p->backend)
        vram__backend_release_user(p->backend);
    if (p->owns_backend)
        vram_backend_destroy(p->backend);
    pthread_cond_destroy(&p->settled);
    pthread_mutex_destroy(&p->lock);
    free(p->name);
    free(p);
}

/* Undo a creation that got as far as the backend, keeping the sentence that
 * says why it failed (cleanup calls the backend, which resets it). */
static int create_failed(vram_pool *p, int rc)
{
    vram__saved_error why;
    vram__error_save(&why);
    vram__decay_stop(p);
    p->ops->destroy(p);
    vram__listeners_detach_all(p);
    pool_free_host(p);
    return vram__error_restore(&why, rc);
}

int vram_pool_create(const vram_pool_opts *opts, vram_pool **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_pool_create: out is NULL");
    *out = NULL;
    vram_pool_opts taken;
    int rc0 = vram_pool_opts_init(&taken);
    if (!opts && rc0)
        return rc0;
    if (opts && (rc0 = vram__opts_take(&taken, opts, sizeof taken, "vram_pool_opts")))
        return rc0;
    opts = &taken;
    vram_pool *p = vram__calloc(1, sizeof *p);
    if (p)
        p->solo_epoch = 1; /* stamps start above solo_done */
    if (!p)
        return VRAM_EHOSTMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->settled, NULL);
    p->name = vram__strdup(opts->name ? opts->name : "pool");
    int rc = p->name ? 0 : VRAM_EHOSTMEM;
    if (!rc && opts->backend) {
        p->backend = opts->backend;
    } else if (!rc) {
        rc = vram_backend_create(NULL, NULL, &p->backend);
        p->owns_backend = !rc;
    }
    if (rc) {
        pool_free_host(p);
        return rc;
    }
    vram__backend_acquire_user(p->backend);
    rc = check_opts(opts, p->backend);
    if (rc) {
        pool_free_host(p);
        return rc;
    }
    p->policy = opts->policy;
    p->ops = opts->policy == VRAM_POLICY_VMM ? &vram__vmm_ops : &vram__segments_ops;
    p->has_events = (p->backend->ops->caps & VRAM_BACKEND_EVENTS) != 0;
    p->granule = opts->alignment > 256 ? opts->alignment : 256;
    p->granularity = opts->granularity ? opts->granularity : p->backend->granularity;
    /* Huge blocks apart only under a limit of the pool's own: kept when free,
     * only the limit's give-back returns them (without one, a workload of
     * changing sizes would keep every size it saw). */
    p->huge_size = opts->policy == VRAM_POLICY_VMM &&
                           (p->backend->ops->caps & VRAM_BACKEND_SEGMENTS) && opts->limit
                       ? opts->huge_size
                       : 0;
    p->map_chunk = opts->map_chunk > p->granularity ? opts->map_chunk / p->granularity : 1;
    if (p->map_chunk > INT32_MAX)
        p->map_chunk = INT32_MAX;
    p->retain_min = opts->retain_min;
    p->decay_ms = opts->decay_ms;
    p->place_candidates = opts->place_candidates;
    p->stream_waits = opts->stream_waits && vram__backend_has_stream_wait(p->backend);
    p->reclaim_large = opts->reclaim_large;
    p->reclaim_min = opts->reclaim_min;
    p->gpu = opts->gpu;
    p->small_size = opts->small_size;
    p->large_round = opts->policy == VRAM_POLICY_VMM && opts->large_round > p->granule
                         ? opts->large_round
                         : p->granule;
    p->segment_small = opts->segment_small;
    p->segment_medium = opts->segment_medium;
    p->capacity = p->backend->capacity;
    p->limit = opts->limit ? opts->limit : default_limit(p->backend);
    p->limit_given = opts->limit != 0;
    p->st.limit_bytes = p->limit;
    if (vram__u64map_init(&p->live, 1024) || vram__owner_add(p, "default", 0, NULL)) {
        pool_free_host(p);
        return VRAM_EHOSTMEM;
    }
    rc = p->ops->init(p);
    if (rc)
        return create_failed(p, rc);
    if (opts->configured_listeners) {
        /* Core's own (a trace), then what the layers above registered. */
        rc = vram__pool_trace_configured(p);
        if (!rc)
            rc = vram__pool_hooks_run(p);
        if (rc)
            return create_failed(p, rc);
    }
    rc = vram__decay_start(p);
    if (rc)
        return create_failed(p, rc);
    *out = p;
    return 0;
}

int vram_pool_destroy(vram_pool *p)
{
    if (!p)
        return 0;
    vram__pool_lock(p);
    if (p->st.live_blocks) {
        char a[32];
        int rc = vram__fail(VRAM_EBUSY, "pool \"%s\" still has %llu live block(s) holding %s",
                            p->name, (unsigned long long)p->st.live_blocks,
                            vram__fmt_bytes(a, sizeof a, p->st.live_bytes));
        vram__pool_unlock(p);
        return rc;
    }
    vram__pool_unlock(p);
    vram__decay_stop(p); /* the thread takes the lock */
    vram__pool_lock(p);
    vram__streams_flush_all(p, 1);
    int rc = p->ops->destroy(p);
    vram__pool_unlock(p);
    int detach_rc = vram__listeners_detach_all(p);
    pool_free_host(p);
    if (rc)
        return vram__fail(VRAM_EBACKEND,
                          "pool destroyed, but the backend refused to take back some memory");
    if (detach_rc)
        return vram__fail_prefix(detach_rc, "pool destroyed, but ");
    return 0;
}

/* Tell the listeners of an event (lock held); what they ask for after the
 * lock goes into *pend. */
static void notify(vram_pool *p, vram_event_type t, int error, uint64_t addr, uint64_t size,
                   vram_owner owner, vram_kind kind, vram_stream s, vram__pending *pend)
{
    vram_event ev = {.type = t, .error = error, .addr = addr, .size = size, .owner = owner,
                     .kind = kind, .stream = s,
                     .message = t == VRAM_EVENT_REFUSE ? vram_last_error() : NULL};
    vram__listeners_notify(p, &ev, pend);
}

static inline void usage_alloc(vram__usage *u, uint64_t size)
{
    u->live_bytes += size;
    u->live_blocks++;
    u->allocs_total++;
    if (u->live_bytes > u->peak_live_bytes)
        u->peak_live_bytes = u->live_bytes;
}

static inline void usage_free(vram__usage *u, uint64_t size)
{
    u->live_bytes -= size;
    u->live_blocks--;
    u->frees_total++;
}

static int refuse(vram_pool *p, int rc, uint64_t size, vram_owner owner, vram_kind kind,
                  vram_stream s, vram__pending *pend)
{
    p->st.failed_allocs_total++;
    if (owner < p->n_owners)
        p->owners[owner].u.failed_allocs_total++;
    if ((unsigned)kind < VRAM_KIND_COUNT)
        p->kinds[kind].failed_allocs_total++;
    if (rc == VRAM_EBUDGET)
        p->st.budget_failures_total++;
    if (vram__pool_listens(p, VRAM_EVENT_REFUSE))
        notify(p, VRAM_EVENT_REFUSE, rc, 0, size, owner < p->n_owners ? owner : 0, kind, s, pend);
    return rc;
}

static int out_of_memory(vram_pool *p, int rc, uint64_t size, vram_owner owner, vram_kind kind,
                         vram_stream s)
{
    char a[32], l[32], r[32], pe[32];
    return vram__fail_prefix(rc,
                             "pool \"%s\": cannot allocate %s for owner \"%s\" (%s, stream %p); "
                             "live %s, reserved %s, pending %s: ",
                             p->name, vram__fmt_bytes(a, sizeof a, size), p->owners[owner].name,
                             vram_kind_name(kind), s, vram__fmt_bytes(l, sizeof l, p->st.live_bytes),
                             vram__fmt_bytes(r, sizeof r, p->st.reserved_bytes),
                             vram__fmt_bytes(pe, sizeof pe, p->st.pending_bytes));
}

/* Give free memory back to the backend (not the pending frees). */
static int release_free_memory(vram_pool *p, uint64_t *released)
{
    p->st.trims_total++;
    return p->ops->give_back(p, UINT64_MAX, released);
}

/* An explicit trim synchronises: every pending free completes first. */
static int trim_locked(vram_pool *p, uint64_t *released)
{
    int wrc = vram__streams_flush_all(p, 0);
    vram__saved_error err; /* the backend calls below start with a clean error */
    vram__error_save(&err);
    int rc = release_free_memory(p, released);
    if (rc)
        return rc;
    return wrc ? vram__error_restore(&err, wrc) : 0;
}

static int alloc_locked(vram_pool *p, uint64_t size, vram_owner owner, vram_kind kind,
                        vram_stream s, void **ptr, vram__pending *pend)
{
    if (!size)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": allocation of 0 bytes", p->name);
    if (owner >= p->n_owners || (unsigned)kind >= VRAM_KIND_COUNT)
        return vram__fail(VRAM_EINVAL, "pool \"%s\": unknown %s %u", p->name,
                          owner >= p->n_owners ? "owner" : "kind",
                          owner >= p->n_owners ? owner : (unsigned)kind);
    vram__stream_state *ss;
    int rc = vram__stream_begin(p, s, &ss);
    if (rc)
        return rc;
    if (size > (1ull << 56))
        return refuse(p, vram__fail(VRAM_ENOMEM, "pool \"%s\": request of %llu bytes is larger "
                                                 "than any device",
                                    p->name, (unsigned long long)size),
                      size, owner, kind, s, pend);
    {
        /* Only here: the take below may release the lock, and owners added
         * meanwhile move the table. */
        const vram__owner *o = &p->owners[owner];
        if (o->budget &&
            size > o->budget - (o->u.live_bytes < o->budget ? o->u.live_bytes : o->budget)) {
            char a[32], l[32], b[32];
            rc = vram__fail(VRAM_EBUDGET,
                            "budget of owner \"%s\" exceeded: requested %s, live %s of %s",
                            o->name, vram__fmt_bytes(a, sizeof a, size),
                            vram__fmt_bytes(l, sizeof l, o->u.live_bytes),
                            vram__fmt_bytes(b, sizeof b, o->budget));
            return refuse(p, rc, size, owner, kind, s, pend);
        }
    }
    if (vram__u64map_reserve(&p->live, p->live.count + 1))
        return VRAM_EHOSTMEM;
    uint64_t bsize = vram__align_up(size, p->granule);
    int region = bsize > p->small_size;
    if (region)
        bsize = vram__align_up(bsize, p->large_round);
    if (p->huge_size && bsize >= p->huge_size) {
        region = VRAM__HUGE;
        bsize = vram__align_up(bsize, p->granularity);
    }
    vram__block *b;
    rc = vram__pool_take(p, bsize, region, s, 0, p->has_events ? ss : NULL, &b);
    if (rc == VRAM_ENOMEM) {
        /* Memory is short: give back what is free, then wait for events. */
        uint64_t released = 0;
        release_free_memory(p, &released);
        released += vram__streams_wait_all(p);
        if (released || p->ops->places_pressed) /* where fewest granules are missing */
            rc = vram__pool_take(p, bsize, region, s, 1, NULL, &b);
    }
    /* The lock may have been released while memory was mapped: make sure
     * the live map still has room. */
    if (!rc && vram__u64map_reserve(&p->live, p->live.count + 1)) {
        vram__pool_release(p, b);
        rc = vram__fail(VRAM_EHOSTMEM, "pool \"%s\": no host memory for the live map", p->name);
    }
    if (rc) {
        if (rc == VRAM_ENOMEM || rc == VRAM_EBACKEND)
            out_of_memory(p, rc, size, owner, kind, s);
        return refuse(p, rc, size, owner, kind, s, pend);
    }
    b->requested = size;
    b->owner = owner;
    b->kind = (uint8_t)kind;
    b->stream = s;
    vram__u64map_put(&p->live, b->addr, (uint64_t)(uintptr_t)b); /* cannot fail: room made above */
    vram_pool_stats *st = &p->st;
    st->live_bytes += size;
    if (st->live_bytes > st->peak_live_bytes)
        st->peak_live_bytes = st->live_bytes;
    st->allocated_bytes += b->size;
    st->live_blocks++;
    st->allocs_total++;
    unsigned h = vram__hist_bucket(size);
    st->hist_allocs[h]++;
    st->hist_live[h]++;
    usage_alloc(&p->owners[owner].u, size); /* the table as it is now */
    usage_alloc(&p->kinds[kind], size);
    if (vram__pool_listens(p, VRAM_EVENT_ALLOC))
        notify(p, VRAM_EVENT_ALLOC, 0, b->addr, size, owner, kind, s, pend);
    *ptr = (void *)(uintptr_t)b->addr;
    return 0;
}

int vram_pool_alloc(vram_pool *p, uint64_t size, vram_owner owner, vram_kind kind, vram_stream s,
                    void **ptr)
{
    if (!p || !ptr)
        return vram__fail(VRAM_EINVAL, "vram_pool_alloc: pool and ptr are required");
    *ptr = NULL;
    vram__pending pend;
    pend.n = 0;
    pend.state = NULL;
    vram__pool_lock(p);
    int rc = alloc_locked(p, size, owner, kind, s, ptr, &pend);
    vram__pool_unlock(p);
    if (VRAM__UNLIKELY(pend.n != 0)) /* the listeners' report steps, outside the lock */
        vram__listeners_report(p, &pend, rc);
    return rc;
}

int vram_pool_free(vram_pool *p, void *ptr, vram_stream s)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_pool_free: pool is NULL");
    if (!ptr)
        return 0;
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    vram__pool_lock(p);
    uint64_t v;
    if (!vram__u64map_del(&p->live, addr, &v)) {
        int rc = vram__fail(VRAM_ENOTALLOC,
                            "pool \"%s\": free of %p, which is not a live block of this pool "
                            "(never allocated here, or freed already)",
                            p->name, ptr);
        vram__pool_unlock(p);
        return rc;
    }
    vram__block *b = (vram__block *)(uintptr_t)v;
    vram__stream_state *ss;
    int rc = vram__stream_begin(p, s, &ss);
    if (rc) { /* no room to track the stream: keep the block live */
        vram__u64map_put(&p->live, addr, v);
        vram__pool_unlock(p);
        return rc;
    }
    vram_pool_stats *st = &p->st;
    st->live_bytes -= b->requested;
    st->allocated_bytes -= b->size;
    st->live_blocks--;
    st->frees_total++;
    st->hist_live[vram__hist_bucket(b->requested)]--;
    usage_free(&p->owners[b->owner].u, b->requested);
    usage_free(&p->kinds[b->kind], b->requested);
    vram__pending pend;
    pend.n = 0;
    pend.state = NULL;
    if (vram__pool_listens(p, VRAM_EVENT_FREE))
        notify(p, VRAM_EVENT_FREE, 0, addr, b->requested, b->owner, (vram_kind)b->kind, s, &pend);
    vram__stream_defer(p, ss, b);
    vram__pool_unlock(p);
    if (VRAM__UNLIKELY(pend.n != 0))
        vram__listeners_report(p, &pend, 0);
    return 0;
}

int vram_pool_block_info(vram_pool *p, const void *ptr, vram_block_info *out)
{
    if (!p || !out)
        return vram__fail(VRAM_EINVAL, "vram_pool_block_info: pool and out are required");
    vram__pool_lock(p);
    uint64_t v;
    int rc = 0;
    if (!ptr || !vram__u64map_get(&p->live, (uint64_t)(uintptr_t)ptr, &v)) {
        rc = vram__fail(VRAM_ENOTALLOC, "pool \"%s\": %p is not a live block", p->name, ptr);
    } else {
        const vram__block *b = (const vram__block *)(uintptr_t)v;
        *out = (vram_block_info){.size = b->size, .requested = b->requested, .owner = b->owner,
                                 .kind = (vram_kind)b->kind, .stream = b->stream};
    }
    vram__pool_unlock(p);
    return rc;
}

int vram_pool_trim(vram_pool *p, uint64_t *released)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_pool_trim: pool is NULL");
    uint64_t r = 0;
    vram__pool_lock(p);
    int rc = trim_locked(p, &r);
    vram__pool_unlock(p);
    if (released)
        *released = r;
    return rc;
}

const char *vram_pool_name(const vram_pool *p) { return p ? p->name : NULL; }
vram_policy vram_pool_policy(const vram_pool *p) { return p ? p->policy : VRAM_POLICY_VMM; }
vram_backend *vram_pool_backend(const vram_pool *p) { return p ? p->backend : NULL; }
int vram_pool_gpu(const vram_pool *p) { return p ? p->gpu : -1; }
