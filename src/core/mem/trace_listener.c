/* src/core/mem/trace_listener.c - a pool's trace (vram_pool_trace_start): a
 * listener that writes every event as a line of RMM's CSV through the trace
 * writer (trace_write.c). Pools of a process tracing to one path share one
 * writer, with a lock of its own, so none truncates another's lines; the
 * writer is closed when its last pool stops, or when the process exits
 * with pools still tracing (a program that never destroys its pool, as
 * PyTorch never does its allocator's, still leaves a whole trace; events
 * after that are dropped). A write that fails stops the trace of every pool
 * sharing it (logged once); stopping then reports it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "vramkit/config.h"
#include "vramkit/log.h"

typedef struct trace_sink {
    char *path;
    vram_trace_writer *w; /* NULL once a write failed */
    unsigned refs;
    pthread_mutex_t lock;
    char failure[512];    /* why it stopped */
    struct trace_sink *next;
} trace_sink;

static pthread_mutex_t sinks_lock = PTHREAD_MUTEX_INITIALIZER;
static trace_sink *sinks;
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;
static int exit_hook_failed;

/* At exit: finish every open trace (a gzip one gets its trailer), so what
 * was written reads back whole. Registered from the library, the hook also
 * runs when the library is unloaded. */
static void finish_at_exit(void)
{
    pthread_mutex_lock(&sinks_lock);
    for (trace_sink *s = sinks; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        if (s->w)
            vram_trace_writer_close(s->w);
        s->w = NULL;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&sinks_lock);
}

static void register_exit_hook(void)
{
    exit_hook_failed = atexit(finish_at_exit) != 0;
}

/* A small number per calling thread, for the trace's Thread column. */
static uint32_t thread_ordinal(void)
{
    static _Atomic uint32_t next;
    static _Thread_local uint32_t mine;
    if (!mine)
        mine = atomic_fetch_add(&next, 1) + 1;
    return mine - 1;
}

static int sink_open(const char *path, trace_sink **out)
{
    pthread_once(&exit_hook_once, register_exit_hook);
    if (exit_hook_failed)
        vram_log(VRAM_LOG_WARN, "trace %s: cannot finish traces at exit (atexit failed); "
                                "destroy the pool or stop its trace to finish it",
                 path);
    pthread_mutex_lock(&sinks_lock);
    trace_sink *s = sinks;
    while (s && strcmp(s->path, path))
        s = s->next;
    int rc = 0;
    if (!s) {
        s = vram__calloc(1, sizeof *s);
        if (s && !(s->path = vram__strdup(path))) {
            free(s);
            s = NULL;
        }
        rc = s ? vram_trace_writer_open(path, &s->w) : VRAM_EHOSTMEM;
        if (rc) {
            if (s)
                free(s->path);
            free(s);
            s = NULL;
        } else {
            pthread_mutex_init(&s->lock, NULL);
            s->next = sinks;
            sinks = s;
        }
    }
    if (s)
        s->refs++;
    pthread_mutex_unlock(&sinks_lock);
    *out = s;
    return rc;
}

/* Drop one reference; the last closes the writer. 0, or VRAM_EIO when the
 * trace is incomplete. */
static int sink_close(trace_sink *s)
{
    pthread_mutex_lock(&sinks_lock);
    int last = --s->refs == 0;
    if (last) {
        trace_sink **pp = &sinks;
        while (*pp != s)
            pp = &(*pp)->next;
        *pp = s->next;
    }
    pthread_mutex_unlock(&sinks_lock);
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (s->failure[0])
        rc = vram__fail(VRAM_EIO, "its trace is incomplete: %s", s->failure);
    pthread_mutex_unlock(&s->lock);
    if (!last)
        return rc;
    if (s->w && vram_trace_writer_close(s->w) && !rc)
        rc = vram__fail_prefix(VRAM_EIO, "its trace is incomplete: ");
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
    return rc;
}

static const vram_trace_action actions[] = {
    [VRAM_EVENT_ALLOC] = VRAM_TRACE_ALLOC,
    [VRAM_EVENT_FREE] = VRAM_TRACE_FREE,
    [VRAM_EVENT_REFUSE] = VRAM_TRACE_ALLOC_FAIL,
};

static int trace_event(void *ctx, vram_pool *pool, const vram_event *ev, void **note)
{
    (void)note;
    trace_sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->w && vram_trace_writer_event(s->w, actions[ev->type], thread_ordinal(), ev->addr,
                                        ev->size, (uint64_t)(uintptr_t)ev->stream)) {
        snprintf(s->failure, sizeof s->failure, "%s", vram_last_error());
        vram_log(VRAM_LOG_ERROR, "pool \"%s\": trace stopped: %s", vram_pool_name(pool),
                 s->failure);
        vram_trace_writer_close(s->w);
        s->w = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int trace_detach(void *ctx, vram_pool *pool)
{
    (void)pool;
    return sink_close(ctx);
}

/* p->trace_id while a start or a stop is under way (outside the pool's
 * lock): other starts and stops find the pool busy meanwhile. */
#define TRACE_CHANGING UINT32_MAX

int vram_pool_trace_start(vram_pool *p, const char *path)
{
    if (!p || !path || !*path)
        return vram__fail(VRAM_EINVAL, "vram_pool_trace_start: pool and path are required");
    vram__pool_lock(p);
    int busy = p->trace_id != 0;
    if (!busy)
        p->trace_id = TRACE_CHANGING;
    vram__pool_unlock(p);
    if (busy)
        return vram__fail(VRAM_EBUSY, "pool \"%s\" traces already (stop it first)", p->name);
    trace_sink *s;
    uint32_t id = 0;
    int rc = sink_open(path, &s);
    if (!rc) {
        vram_listener l = {.size = sizeof l, .events = VRAM_EVENTS_ALL, .on_event = trace_event,
                           .on_detach = trace_detach, .ctx = s};
        rc = vram_pool_listen(p, &l, &id);
        if (rc) {
            vram__saved_error err;
            vram__error_save(&err);
            sink_close(s);
            rc = vram__error_restore(&err, rc);
        }
    }
    vram__pool_lock(p);
    p->trace_id = rc ? 0 : id;
    vram__pool_unlock(p);
    return rc;
}

int vram_pool_trace_stop(vram_pool *p)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_pool_trace_stop: pool is NULL");
    vram__pool_lock(p);
    uint32_t id = p->trace_id;
    if (id && id != TRACE_CHANGING)
        p->trace_id = TRACE_CHANGING;
    vram__pool_unlock(p);
    if (!id)
        return vram__fail(VRAM_EINVAL, "pool \"%s\" has no trace", p->name);
    if (id == TRACE_CHANGING)
        return vram__fail(VRAM_EBUSY, "pool \"%s\": its trace is being started or stopped by "
                                      "another thread", p->name);
    int rc = vram_pool_unlisten(p, id);
    /* Refused (VRAM_EBUSY: called from a listener), the trace goes on;
     * otherwise it is detached, finished or not. */
    vram__pool_lock(p);
    p->trace_id = rc == VRAM_EBUSY ? id : 0;
    vram__pool_unlock(p);
    return rc ? vram__fail_prefix(rc, "pool \"%s\": ", p->name) : 0;
}

int vram__pool_trace_configured(vram_pool *p)
{
    const char *path = vram_config_get()->trace;
    return path && *path ? vram_pool_trace_start(p, path) : 0;
}
