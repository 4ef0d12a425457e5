/* src/core/mem/decay.c - the pool's decay thread: memory left free for
 * decay_ms goes back to the backend from here, as jemalloc's background
 * thread purges with its decay, so a service whose load stops returns its
 * memory without a backend call on the threads that allocate. The thread
 * sleeps until the oldest free memory falls due, at most a quarter of a
 * second (50 ms while frees wait for their streams), so held memory reaches
 * live within decay_ms plus well under a second, and wakes at once to stop.
 * Four wake-ups a second cost nothing beside a pool's work. What to give back and how is the policy's (its decay entry). */
#include <errno.h>

#include "base/internal.h"
#include "pool_internal.h"

enum { MIN_SLEEP_MS = 10, MAX_SLEEP_MS = 250, PENDING_SLEEP_MS = 50 };

static void *decay_main(void *arg)
{
    vram_pool *p = arg;
    vram__pool_lock(p);
    uint64_t ops_seen = UINT64_MAX, idle_since = vram__now_ms();
    while (!p->decay_stop) {
        /* Without events (host memory, no device work), a free waits for its
         * stream's next operation; a pool left idle for decay_ms has none
         * coming, so its frees complete here. */
        uint64_t ops = p->st.allocs_total + p->st.frees_total + p->st.failed_allocs_total;
        int idle = 0; /* no operation for decay_ms: every free is that old */
        if (ops != ops_seen) {
            ops_seen = ops;
            idle_since = vram__now_ms();
        } else if (!p->has_events && p->st.pending_bytes &&
                   vram__now_ms() - idle_since >= p->decay_ms) {
            vram__streams_flush_all(p, 0);
            idle = 1;
        }
        /* Frees waiting for their stream's work join the free memory once
         * it completed (an event recorded one round, found done the next),
         * so that they decay too. */
        if (p->has_events && p->st.pending_bytes)
            vram__streams_reclaim(p, 0);
        uint64_t now = vram__now_ms();
        uint64_t released = 0;
        /* Free since at least decay_ms ago: became free before now - decay + 1. */
        uint64_t before = idle                     ? UINT64_MAX
                          : now + 1 > p->decay_ms ? now + 1 - p->decay_ms
                                                  : 0;
        uint64_t oldest = p->ops->decay(p, before, &released);
        p->st.decay_released_bytes_total += released;
        now = vram__now_ms();
        uint64_t wake = now + (p->st.pending_bytes ? PENDING_SLEEP_MS : MAX_SLEEP_MS);
        if (oldest != UINT64_MAX && oldest + p->decay_ms < wake)
            wake = oldest + p->decay_ms;
        if (wake < now + MIN_SLEEP_MS)
            wake = now + MIN_SLEEP_MS;
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000),
                              .tv_nsec = (long)(wake % 1000) * 1000000L};
        while (!p->decay_stop &&
               pthread_cond_timedwait(&p->decay_wake, &p->lock, &ts) != ETIMEDOUT) {
        }
    }
    vram__pool_unlock(p);
    return NULL;
}

int vram__decay_start(vram_pool *p)
{
    if (!p->decay_ms)
        return 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&p->decay_wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc)
        return vram__fail(VRAM_EHOSTMEM, "pool \"%s\": no condition variable for its decay thread",
                          p->name);
    p->decay_stop = 0;
    rc = pthread_create(&p->decay_thread, NULL, decay_main, p);
    if (rc) {
        pthread_cond_destroy(&p->decay_wake);
        return vram__fail(VRAM_EHOSTMEM, "pool \"%s\": cannot start its decay thread (error %d)",
                          p->name, rc);
    }
    p->decay_running = 1;
    return 0;
}

void vram__decay_stop(vram_pool *p)
{
    if (!p->decay_running)
        return;
    vram__pool_lock(p);
    p->decay_stop = 1;
    pthread_cond_signal(&p->decay_wake);
    vram__pool_unlock(p);
    pthread_join(p->decay_thread, NULL);
    pthread_cond_destroy(&p->decay_wake);
    p->decay_running = 0;
}
