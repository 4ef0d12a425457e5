/* src/pipeline/batcher.c - the frames waiting for inference and how a batch
 * is made of them, as a stream muxer does: every stream has a bounded queue
 * of ready frames (a full one drops its oldest frame, counted, so a stream
 * that falls behind never holds the others up), and a worker takes the
 * oldest frame of up to B different streams, going round the streams from
 * where the last batch stopped so that none is starved. A stream's frames
 * may be in several workers' batches at once (up to stream_in_flight; one
 * by default, which keeps its ring small): each is numbered as it is
 * taken, and the workers hand the results on in that order (worker.c), so
 * each stream's results come out in display order. All under svc->mu. */
#include "service_internal.h"

void vram__ready_push(vram_service *svc, vram__stream *st, vram_frame *f)
{
    if (st->ready_count == st->ready_cap) {
        /* Full: the oldest waiting frame goes back to the source. */
        vram_frame *old = st->ready[st->ready_head];
        st->ready_head = (st->ready_head + 1) % st->ready_cap;
        st->ready_count--;
        vram_source_release(st->src, old);
        atomic_fetch_add_explicit(&st->dropped, 1, memory_order_relaxed);
    }
    st->ready[(st->ready_head + st->ready_count) % st->ready_cap] = f;
    st->ready_count++;
    pthread_cond_signal(&svc->work_cv);
}

unsigned vram__ready_take(vram_service *svc, vram__worker *w, unsigned max)
{
    unsigned k = 0;
    size_t n = svc->n_streams, base = svc->rr;
    for (size_t step = 0; step < n && k < max; step++) {
        size_t i = (base + step) % n;
        vram__stream *st = svc->streams[i];
        if (!st->ready_count || st->in_flight >= svc->opts.stream_in_flight)
            continue;
        w->frames[k] = st->ready[st->ready_head];
        w->streams[k] = st;
        w->seq[k] = st->seq_taken++;
        st->ready_head = (st->ready_head + 1) % st->ready_cap;
        st->ready_count--;
        st->in_flight++;
        k++;
        svc->rr = (i + 1) % n; /* the next batch starts after the last stream taken */
    }
    return k;
}

int vram__ready_idle(const vram_service *svc)
{
    for (size_t i = 0; i < svc->n_streams; i++)
        if (svc->streams[i]->ready_count || svc->streams[i]->in_flight)
            return 0;
    return 1;
}
