/* src/engine/cpu/team.c - the intra-op thread team (team.h). A job is
 * posted by bumping a generation counter; workers spin on it for a short
 * while before sleeping on a condition variable (waking a sleeping thread
 * costs tens of microseconds, about what a small convolution takes), and
 * the caller, who runs part 0 meanwhile, spins the same way on the count of
 * parts still running before it sleeps. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/team.h"

/* Polls before sleeping: some tens of microseconds. */
#define SPINS 4000

struct vram__team {
    int n;                 /* threads, the caller's included */
    pthread_t *threads;    /* n - 1 workers */
    int started;           /* workers running */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_ulong gen;      /* jobs posted (fn and arg are set before it moves) */
    atomic_int pending;    /* workers yet to finish the current job */
    atomic_int quit;
    int sleepers;          /* workers waiting on go (under mu) */
    vram__team_fn fn;
    void *arg;
};

typedef struct worker_arg {
    vram__team *t;
    int part;
} worker_arg;

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait for a generation other than seen (or quit); returns it. */
static unsigned long next_job(vram__team *t, unsigned long seen)
{
    unsigned long g;
    for (int i = 0; i < SPINS; i++) {
        g = atomic_load_explicit(&t->gen, memory_order_acquire);
        if (g != seen || atomic_load(&t->quit))
            return g;
        relax();
    }
    pthread_mutex_lock(&t->mu);
    while ((g = atomic_load_explicit(&t->gen, memory_order_acquire)) == seen &&
           !atomic_load(&t->quit)) {
        t->sleepers++;
        pthread_cond_wait(&t->go, &t->mu);
        t->sleepers--;
    }
    pthread_mutex_unlock(&t->mu);
    return g;
}

static void *worker(void *p)
{
    worker_arg *wa = p;
    vram__team *t = wa->t;
    int part = wa->part;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        seen = next_job(t, seen);
        if (atomic_load(&t->quit))
            break;
        t->fn(t->arg, part, t->n);
        if (atomic_fetch_sub_explicit(&t->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_signal(&t->done);
            pthread_mutex_unlock(&t->mu);
        }
    }
    return NULL;
}

int vram__team_create(int threads, vram__team **out)
{
    *out = NULL;
    if (threads < 2)
        return vram__fail(VRAM_EINVAL, "a thread team of %d (at least 2)", threads);
    vram__team *t = vram__calloc(1, sizeof *t);
    if (!t)
        return VRAM_EHOSTMEM;
    t->n = threads;
    t->threads = vram__calloc((size_t)threads - 1, sizeof *t->threads);
    if (!t->threads) {
        free(t);
        return VRAM_EHOSTMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    atomic_init(&t->gen, 0);
    atomic_init(&t->pending, 0);
    atomic_init(&t->quit, 0);
    int rc = 0;
    for (int i = 1; i < threads && !rc; i++) {
        worker_arg *wa = vram__calloc(1, sizeof *wa);
        if (!wa) {
            rc = VRAM_EHOSTMEM;
            break;
        }
        *wa = (worker_arg){.t = t, .part = i};
        int e = pthread_create(&t->threads[i - 1], NULL, worker, wa);
        if (e) {
            free(wa);
            rc = vram__fail(VRAM_EHOSTMEM, "cannot start thread %d of %d for the engine: %s", i + 1,
                            threads, strerror(e));
            break;
        }
        t->started++;
    }
    if (rc) {
        vram__team_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

void vram__team_destroy(vram__team *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->quit, 1);
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->started; i++)
        pthread_join(t->threads[i], NULL);
    pthread_cond_destroy(&t->done);
    pthread_cond_destroy(&t->go);
    pthread_mutex_destroy(&t->mu);
    free(t->threads);
    free(t);
}

void vram__team_run(vram__team *t, vram__team_fn fn, void *arg)
{
    t->fn = fn;
    t->arg = arg;
    atomic_store_explicit(&t->pending, t->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
    pthread_mutex_lock(&t->mu); /* a worker past its spins sleeps, or is about to */
    if (t->sleepers)
        pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    fn(arg, 0, t->n);
    for (int i = 0; i < SPINS; i++) {
        if (atomic_load_explicit(&t->pending, memory_order_acquire) == 0)
            return;
        relax();
    }
    pthread_mutex_lock(&t->mu);
    while (atomic_load_explicit(&t->pending, memory_order_acquire) > 0)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

int vram__team_size(const vram__team *t) { return t ? t->n : 1; }
