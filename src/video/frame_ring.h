/* src/video/frame_ring.h - a source's fixed ring of RGB24 frame buffers,
 * taken from the pool (kind frames, the stream's owner) when the source
 * opens and given back when it closes; nothing is allocated in between.
 * The reader acquires a free slot (waiting while every slot is held),
 * the source fills it and hands it out, the caller releases it. Any thread
 * may release or interrupt; one thread acquires. */
#ifndef VRAM_VIDEO_FRAME_RING_H
#define VRAM_VIDEO_FRAME_RING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "vramkit/pool.h"
#include "vramkit/video.h"

typedef struct vram__frame_ring {
    vram_pool *pool;
    vram_owner owner;
    uint32_t count;
    uint64_t frame_bytes;    /* one buffer, as allocated */
    vram_frame *frames;      /* count records, their rgb in the pool */
    uint8_t *held;           /* per slot: 1 while acquired */
    uint32_t held_count;
    int interrupted;
    int locks;               /* the mutex and condvar were made */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} vram__frame_ring;

/* Buffers of RGB24 rows this wide: the width rounded up to 16 pixels (the
 * converters write whole blocks of them), 3 bytes a pixel, rounded up to
 * 64 bytes. */
size_t vram__rgb_stride(int width);

/* Take `count` buffers of stride x height bytes for width x height frames
 * (a NULL pool: records only, rgb NULL, for frames whose pixels live in
 * the decoder's surfaces).
 * On error (the pool's VRAM_EBUDGET or VRAM_ENOMEM with its sentence,
 * VRAM_EHOSTMEM) nothing is kept and the ring reads as closed. */
int vram__ring_open(vram__frame_ring *r, vram_pool *pool, vram_owner owner, uint32_t count,
                    int width, int height);

/* A free slot for the reader to fill: 0 with *out set, or 1 once the ring
 * is interrupted (at once, or while waiting for a release). */
int vram__ring_acquire(vram__frame_ring *r, vram_frame **out);

/* Give a slot back (a frame the ring handed out; anything else is
 * ignored), waking a waiting acquire. */
void vram__ring_release(vram__frame_ring *r, vram_frame *f);

/* Make waiting and later acquires return 1. */
void vram__ring_interrupt(vram__frame_ring *r);

/* Slots acquired and not released. */
uint32_t vram__ring_held(vram__frame_ring *r);

/* Give every buffer back to the pool (nothing may be held). A ring that
 * never opened, or closed already, is accepted. */
void vram__ring_close(vram__frame_ring *r);

#endif
