/* src/video/frame_ring.c - the fixed ring of RGB24 frame buffers a source
 * takes from the pool at open (frame_ring.h): acquire, release, interrupt
 * and give everything back. */
#include "frame_ring.h"

#include <stdlib.h>
#include <string.h>

#include "base/internal.h"

size_t vram__rgb_stride(int width)
{
    /* libswscale's converters write whole blocks of 16 pixels: a row holds
     * the width rounded up to 16 pixels, so that the last block of a row
     * stays in it (and, for the last row, in the buffer). */
    return (size_t)vram__align_up(vram__align_up((uint64_t)width, 16) * 3u, 64);
}

int vram__ring_open(vram__frame_ring *r, vram_pool *pool, vram_owner owner, uint32_t count,
                    int width, int height)
{
    memset(r, 0, sizeof *r);
    r->pool = pool;
    r->owner = owner;
    r->frame_bytes = pool ? (uint64_t)vram__rgb_stride(width) * (uint64_t)height : 0;
    r->frames = vram__calloc(count, sizeof *r->frames);
    r->held = vram__calloc(count, 1);
    if (!r->frames || !r->held) {
        vram__ring_close(r);
        return VRAM_EHOSTMEM;
    }
    if (pthread_mutex_init(&r->mu, NULL)) {
        vram__ring_close(r);
        return vram__fail(VRAM_EHOSTMEM, "frame ring: cannot create its lock");
    }
    if (pthread_cond_init(&r->cv, NULL)) {
        pthread_mutex_destroy(&r->mu);
        vram__ring_close(r);
        return vram__fail(VRAM_EHOSTMEM, "frame ring: cannot create its condition variable");
    }
    r->locks = 1;
    for (uint32_t i = 0; i < count; i++) {
        if (!pool) { /* records only: the decoder's surfaces hold the pixels */
            r->frames[i] = (vram_frame){.width = width, .height = height, .slot = i};
            r->count = i + 1;
            continue;
        }
        void *p = NULL;
        int rc = vram_pool_alloc(pool, r->frame_bytes, owner, VRAM_KIND_FRAMES, NULL, &p);
        if (rc) {
            vram__saved_error e;
            vram__error_save(&e);
            vram__ring_close(r);
            return vram__error_restore(&e, rc);
        }
        r->count = i + 1;
        r->frames[i] = (vram_frame){.rgb = p, .width = width, .height = height,
                                    .stride = vram__rgb_stride(width), .slot = i};
    }
    return 0;
}

int vram__ring_acquire(vram__frame_ring *r, vram_frame **out)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->interrupted) {
            pthread_mutex_unlock(&r->mu);
            return 1;
        }
        for (uint32_t i = 0; i < r->count; i++) {
            if (!r->held[i]) {
                r->held[i] = 1;
                r->held_count++;
                pthread_mutex_unlock(&r->mu);
                *out = &r->frames[i];
                return 0;
            }
        }
        pthread_cond_wait(&r->cv, &r->mu);
    }
}

void vram__ring_release(vram__frame_ring *r, vram_frame *f)
{
    if (!f || !r->frames || f < r->frames || f >= r->frames + r->count)
        return;
    uint32_t i = (uint32_t)(f - r->frames);
    pthread_mutex_lock(&r->mu);
    if (r->held[i]) {
        r->held[i] = 0;
        r->held_count--;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void vram__ring_interrupt(vram__frame_ring *r)
{
    if (!r->locks)
        return;
    pthread_mutex_lock(&r->mu);
    r->interrupted = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

uint32_t vram__ring_held(vram__frame_ring *r)
{
    if (!r->locks)
        return 0;
    pthread_mutex_lock(&r->mu);
    uint32_t n = r->held_count;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void vram__ring_close(vram__frame_ring *r)
{
    for (uint32_t i = 0; r->pool && r->frames && i < r->count; i++)
        vram_pool_free(r->pool, r->frames[i].rgb, NULL);
    if (r->locks) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
    }
    free(r->frames);
    free(r->held);
    memset(r, 0, sizeof *r);
}
