/* src/video/av_internal.h - the pieces of the libav source: the decoder's
 * picture buffers taken from the pool (av_buffers.c) and the conversion of
 * a decoded picture into a ring slot as packed RGB24 (av_convert.c), used
 * by the demuxing and decoding loop (source_av.c). */
#ifndef VRAM_VIDEO_AV_INTERNAL_H
#define VRAM_VIDEO_AV_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <libavcodec/avcodec.h>
#include <libavutil/buffer.h>
#include <libavutil/frame.h>

#include "vramkit/pool.h"
#include "vramkit/video.h"

struct SwsContext;

/* The decoder's pictures: one pool buffer per picture (every plane in
 * it), recycled through an AVBufferPool for the current picture layout;
 * a new layout (size or format) starts a new AVBufferPool, and the old
 * one goes once its last picture is returned. */
typedef struct vram__av_pictures vram__av_pictures;
typedef struct vram__av_buffers {
    vram_pool *pool;
    vram_owner owner;
    _Atomic uint64_t *live;      /* the source's decoder_bytes */
    int locks;
    pthread_mutex_t mu;          /* cur: the decoder's threads */
    vram__av_pictures *cur;      /* the current layout's */
    pthread_mutex_t refusal_mu;  /* the two below (taken inside mu) */
    int refused;                 /* the pool refused a picture: its code */
    char refusal[384];           /* and sentence */
} vram__av_buffers;

int vram__av_buffers_init(vram__av_buffers *b, vram_pool *pool, vram_owner owner,
                          _Atomic uint64_t *live);
/* AVCodecContext.get_buffer2, with opaque pointing at the buffers. */
int vram__av_get_buffer2(AVCodecContext *c, AVFrame *f, int flags);
/* After the decoder and every frame of it are freed: every byte goes back. */
void vram__av_buffers_fini(vram__av_buffers *b);
/* The pool's refusal (a code, its sentence recorded as the last error), or
 * 0 when it refused nothing since the last call. */
int vram__av_buffers_refused(vram__av_buffers *b);
/* Bytes of one picture of c's codec at width x height in format `fmt`. */
uint64_t vram__av_picture_bytes(AVCodecContext *c, int width, int height, int fmt);

/* Packed RGB24 out of decoded pictures, as `ffmpeg -pix_fmt rgb24` makes
 * it (bicubic, the picture's colour matrix and range). */
typedef struct vram__av_scaler {
    struct SwsContext *sws;
    int w, h, fmt, space, range; /* what sws was set up for */
} vram__av_scaler;

/* Convert `in` into f (a slot of `capacity` bytes): f's width, height,
 * stride and pixels. VRAM_EIO naming the url when the picture no longer
 * fits the slot (its size grew), VRAM_EPARSE for a pixel format libswscale
 * cannot read. */
int vram__av_convert(vram__av_scaler *sc, const AVFrame *in, vram_frame *f, uint64_t capacity,
                     const char *url);
/* Whether libswscale converts `fmt` to RGB24. */
int vram__av_convertible(int fmt);
void vram__av_scaler_free(vram__av_scaler *sc);

#endif
