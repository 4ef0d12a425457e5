/* src/video/source_internal.h - what a source holds, shared by the public
 * functions (source.c) and the two kinds of source behind an ops table:
 * files and network streams through libav (source_av.c, with its decoder
 * buffers in av_buffers.c and its conversion in av_convert.c) and the
 * synthetic patterns (source_synthetic.c). */
#ifndef VRAM_VIDEO_SOURCE_INTERNAL_H
#define VRAM_VIDEO_SOURCE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/internal.h"
#include "frame_ring.h"
#include "vramkit/video.h"

typedef struct vram__source_ops {
    const char *kind;
    /* Open s->url: fill s->info (width, height, fps, codec, network,
     * seekable, decoder_bytes) and keep the kind's state in s->impl. On
     * error nothing is kept (s->impl NULL) and every byte taken from the
     * pool is back. */
    int (*open)(vram_source *s);
    /* Write the next frame into `f`, a ring slot of s->ring.frame_bytes
     * bytes: rgb's contents, width, height, stride and pts_s. 0, 1 at the
     * end (or once interrupted), or a negative code when the stream failed
     * (with its sentence). May wait (reading, reconnecting). */
    int (*next)(vram_source *s, vram_frame *f);
    /* A delivered frame goes back to the ring (NULL: nothing to do). Any
     * thread. */
    void (*release)(vram_source *s, vram_frame *f);
    /* Give everything back (the pool's bytes included). */
    void (*close)(vram_source *s);
} vram__source_ops;

extern const vram__source_ops vram__source_av_ops;
extern const vram__source_ops vram__source_synthetic_ops;

struct vram_source {
    vram_source_opts opts;       /* opts.url points at url */
    char *url;
    const vram__source_ops *ops;
    void *impl;                  /* the kind's state */
    vram_source_info info;
    vram__frame_ring ring;

    atomic_int interrupted;
    int sleep_locks;             /* sleep_mu and sleep_cv were made */
    pthread_mutex_t sleep_mu;    /* interruptible waits: pacing, backoff */
    pthread_cond_t sleep_cv;     /* on CLOCK_MONOTONIC */

    /* Counters (vram_source_stats), any thread. */
    _Atomic uint64_t frames, damaged, reconnects, loops, decoder_bytes;

    /* The reader's (vram_source_next). */
    int64_t next_index;
    int ended;                   /* next returned 1: it keeps doing so */
    int failed;                  /* next failed: it keeps failing so */
    char failure[512];
    int paced;                   /* realtime: the pacing origin is set */
    int repace;                  /* realtime: take the next frame as the origin */
    uint64_t pace_t0_ns;         /* wall time of the origin frame */
    double pace_pts0_s;          /* and its pts */
};

/* Whether vram_source_interrupt was called. */
static inline int vram__source_interrupted(vram_source *s)
{
    return atomic_load_explicit(&s->interrupted, memory_order_acquire);
}

/* Wait until the monotonic clock reads `deadline_ns`: 0, or 1 as soon as
 * the source is interrupted. */
int vram__source_sleep_until(vram_source *s, uint64_t deadline_ns);

/* The stream starts again at the next frame (a reconnect): realtime
 * pacing takes that frame as its new origin instead of catching up. */
static inline void vram__source_repace(vram_source *s) { s->repace = 1; }

#endif
