/* src/engine/cpu/team.c - the intra-op thread team (team.h): workers wait
 * on a condition variable for the next job's generation, run their part,
 * and the last to finish wakes the caller, who ran part 0 meanwhile. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/team.h"

struct vram__team {
    int n;                 /* threads, the caller's included */
    pthread_t *threads;    /* n - 1 workers */
    int started;           /* workers running */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen;     /* jobs posted */
    int pending;           /* workers yet to finish the current job */
    int quit;
    vram__team_fn fn;
    void *arg;
};

typedef struct worker_arg {
    vram__team *t;
    int part;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *wa = p;
    vram__team *t = wa->t;
    int part = wa->part;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->quit && t->gen == seen)
            pthread_cond_wait(&t->go, &t->mu);
        if (t->quit)
            break;
        seen = t->gen;
        vram__team_fn fn = t->fn;
        void *arg = t->arg;
        pthread_mutex_unlock(&t->mu);
        fn(arg, part, t->n);
        pthread_mutex_lock(&t->mu);
        if (--t->pending == 0)
            pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
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
    t->quit = 1;
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
    pthread_mutex_lock(&t->mu);
    t->fn = fn;
    t->arg = arg;
    t->pending = t->n - 1;
    t->gen++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    fn(arg, 0, t->n);
    pthread_mutex_lock(&t->mu);
    while (t->pending > 0)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

int vram__team_size(const vram__team *t) { return t ? t->n : 1; }
