/* src/core/mem/listener.c - a pool's listeners (vramkit/listener.h): attaching and
 * removing them, telling them of each event under the pool's lock, the
 * state captured for those that ask, the report steps run after the lock is
 * released, and the process-wide hooks for pools made from the
 * configuration. Host memory for a capture comes from plain calloc (never
 * from the pool, and without touching this thread's last error). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_internal.h"
#include "pool_internal.h"
#include "vramkit/listener.h"

/* The pool whose on_event this thread is in (its lock is held), and how
 * many on_report steps this thread is in. */
static _Thread_local vram_pool *in_event;
static _Thread_local unsigned report_depth;

vram_pool *vram__listener_current(void) { return in_event; }

static const char *const event_names[] = {
#define EVENT_NAME(NAME, name) #name,
    VRAM_EVENT_TYPES(EVENT_NAME)
#undef EVENT_NAME
};

const char *vram_event_type_name(vram_event_type type)
{
    return (unsigned)type < VRAM_EVENT_TYPE_COUNT ? event_names[type] : "?";
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void recompute_mask(vram_pool *p)
{
    uint32_t m = 0;
    for (size_t i = 0; i < p->n_listeners; i++)
        if (!p->listeners[i].removing)
            m |= p->listeners[i].l.events;
    p->listen_mask = m;
}

int vram_pool_listen(vram_pool *p, const vram_listener *l, uint32_t *id)
{
    if (!p || !l)
        return vram__fail(VRAM_EINVAL, "vram_pool_listen: pool and listener are required");
    vram_listener taken = {.size = sizeof taken};
    int rc = vram__opts_take(&taken, l, sizeof taken, "vram_listener");
    if (rc)
        return vram__fail_prefix(rc, "pool \"%s\": ", p->name);
    l = &taken;
    if (!l->on_event || (l->events & ~(uint32_t)VRAM_EVENTS_ALL))
        return vram__fail(VRAM_EINVAL, "pool \"%s\": a listener needs on_event and known event "
                                       "types (events 0x%x)", p->name, l->events);
    if (in_event == p || report_depth)
        return vram__fail(VRAM_EBUSY, "pool \"%s\": listeners cannot be attached from inside a "
                                      "listener", p->name);
    vram__pool_lock(p);
    if (p->n_listeners >= VRAM_LISTENERS_MAX) {
        vram__pool_unlock(p);
        return vram__fail(VRAM_ELIMIT, "pool \"%s\" has %d listeners already, the most it takes",
                          p->name, VRAM_LISTENERS_MAX);
    }
    vram__listener_slot *s = &p->listeners[p->n_listeners++];
    *s = (vram__listener_slot){.l = *l, .id = ++p->next_listener_id};
    recompute_mask(p);
    if (id)
        *id = s->id;
    vram__pool_unlock(p);
    return 0;
}

static vram__listener_slot *find_slot(vram_pool *p, uint32_t id)
{
    for (size_t i = 0; i < p->n_listeners; i++)
        if (p->listeners[i].id == id)
            return &p->listeners[i];
    return NULL;
}

int vram_pool_unlisten(vram_pool *p, uint32_t id)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_pool_unlisten: pool is NULL");
    if (in_event == p || report_depth)
        return vram__fail(VRAM_EBUSY, "pool \"%s\": a listener cannot be removed from inside a "
                                      "listener", p->name);
    vram__pool_lock(p);
    vram__listener_slot *s = find_slot(p, id);
    if (!s || s->removing) {
        vram__pool_unlock(p);
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no listener %u", p->name, id);
    }
    s->removing = 1; /* no new events */
    recompute_mask(p);
    /* Report steps begun before still use the listener: wait for them.
     * They hold no lock, so polling with the lock released cannot deadlock. */
    while ((s = find_slot(p, id))->inflight) {
        vram__pool_unlock(p);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        vram__pool_lock(p);
    }
    vram_listener l = s->l;
    size_t i = (size_t)(s - p->listeners);
    memmove(&p->listeners[i], &p->listeners[i + 1],
            (p->n_listeners - i - 1) * sizeof p->listeners[0]);
    p->n_listeners--;
    vram__pool_unlock(p);
    return l.on_detach ? l.on_detach(l.ctx, p) : 0;
}

int vram__listeners_detach_all(vram_pool *p)
{
    int rc = 0;
    vram__saved_error first = {{0}};
    while (p->n_listeners) {
        vram_listener l = p->listeners[--p->n_listeners].l;
        int r = l.on_detach ? l.on_detach(l.ctx, p) : 0;
        if (r && !rc) {
            rc = r;
            vram__error_save(&first);
        }
    }
    p->listen_mask = 0;
    return rc ? vram__error_restore(&first, rc) : 0;
}

/* ---- the state capture ---- */

static vram_pool_state *capture_state(vram_pool *p)
{
    vram__state_capture *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    vram_pool_state *s = &c->state;
    s->time_s = wall_s();
    s->pool = p->name;
    s->backend = p->backend->ops->name;
    s->policy = p->policy;
    s->capacity = p->capacity;
    if (p->backend->ops->mem_info &&
        p->backend->ops->mem_info(p->backend->self, &s->device_free_bytes,
                                  &s->device_total_bytes) == 0)
        s->device_known = 1;
    vram__pool_fill_stats(p, &s->stats);
    if ((c->owners = calloc(p->n_owners, sizeof *c->owners))) {
        for (size_t i = 0; i < p->n_owners; i++) {
            c->owners[i].name = p->owners[i].name;
            vram__usage_to_stats(&p->owners[i].u, p->owners[i].budget, &c->owners[i].usage);
        }
        s->owners = c->owners;
        s->n_owners = p->n_owners;
    }
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        vram__usage_to_stats(&p->kinds[k], 0, &s->kinds[k]);
    if (vram__pool_snapshot_text(p, &c->snapshot) == 0 && c->snapshot.data) {
        s->snapshot = c->snapshot.data;
        s->snapshot_len = c->snapshot.len;
    }
    return s;
}

static void state_free(vram_pool_state *s)
{
    vram__state_capture *c = (vram__state_capture *)s; /* state is its first member */
    if (!c)
        return;
    free(c->owners);
    vram_buffer_free(&c->snapshot);
    free(c);
}

/* ---- telling the listeners ---- */

void vram__listeners_notify(vram_pool *p, vram_event *ev, vram__pending *pend)
{
    ev->nested = report_depth > 0;
    /* A listener's failure must not replace a refusal's sentence. */
    vram__saved_error err;
    int saved = ev->type == VRAM_EVENT_REFUSE;
    if (saved)
        vram__error_save(&err);
    for (size_t i = 0; i < p->n_listeners; i++) {
        vram__listener_slot *s = &p->listeners[i];
        if (s->removing || !(s->l.events & VRAM_EVENT_BIT(ev->type)))
            continue;
        void *note = NULL;
        in_event = p;
        int want = s->l.on_event(s->l.ctx, p, ev, &note);
        in_event = NULL;
        if (want != VRAM_LISTENER_REPORT || !s->l.on_report)
            continue;
        if (pend->n == 0) {
            pend->ev = *ev;
            if (ev->message) {
                snprintf(pend->message, sizeof pend->message, "%s", ev->message);
                pend->ev.message = pend->message;
            }
        }
        if ((s->l.flags & VRAM_LISTENER_STATE) && !pend->state)
            pend->state = capture_state(p);
        pend->item[pend->n++] = (vram__pending_report){s->l, s->id, note};
        s->inflight++;
    }
    if (saved)
        vram__error_restore(&err, ev->error);
}

void vram__listeners_report(vram_pool *p, vram__pending *pend, int rc)
{
    vram__saved_error err;
    vram__error_save(&err);
    report_depth++;
    for (size_t i = 0; i < pend->n; i++) {
        const vram__pending_report *r = &pend->item[i];
        r->l.on_report(r->l.ctx, p, &pend->ev,
                       (r->l.flags & VRAM_LISTENER_STATE) ? pend->state : NULL, r->note);
    }
    report_depth--;
    vram__pool_lock(p);
    for (size_t i = 0; i < pend->n; i++) {
        vram__listener_slot *s = find_slot(p, pend->item[i].id);
        if (s)
            s->inflight--;
    }
    vram__pool_unlock(p);
    state_free(pend->state);
    pend->state = NULL;
    pend->n = 0;
    /* Whatever the report steps did, the caller sees the call's sentence. */
    vram__error_restore(&err, rc);
}

/* ---- hooks for pools made from the configuration ---- */

#define MAX_HOOKS 8

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static vram_pool_hook hooks[MAX_HOOKS];
static size_t n_hooks;

int vram_pool_hook_add(const vram_pool_hook *hook)
{
    vram_pool_hook taken = {.size = sizeof taken};
    if (!hook || vram__opts_take(&taken, hook, sizeof taken, "vram_pool_hook"))
        return vram__fail(VRAM_EINVAL, "vram_pool_hook_add: a hook (of a known size) is required");
    const vram_pool_hook *h = &taken;
    if (!h->on_create)
        return vram__fail(VRAM_EINVAL, "vram_pool_hook_add: a hook needs on_create");
    pthread_mutex_lock(&hooks_lock);
    int rc = 0;
    size_t i = 0;
    while (i < n_hooks && !(hooks[i].on_create == h->on_create && hooks[i].ctx == h->ctx))
        i++;
    if (i == n_hooks) {
        if (n_hooks == MAX_HOOKS)
            rc = vram__fail(VRAM_ELIMIT, "%d pool hooks are registered already, the most there "
                                         "can be", MAX_HOOKS);
        else
            hooks[n_hooks++] = *h;
    }
    pthread_mutex_unlock(&hooks_lock);
    return rc;
}

int vram__pool_hooks_run(vram_pool *p)
{
    vram_pool_hook mine[MAX_HOOKS];
    pthread_mutex_lock(&hooks_lock);
    size_t n = n_hooks;
    memcpy(mine, hooks, n * sizeof *hooks);
    pthread_mutex_unlock(&hooks_lock);
    for (size_t i = 0; i < n; i++) {
        int rc = mine[i].on_create(mine[i].ctx, p);
        if (rc)
            return rc;
    }
    return 0;
}
