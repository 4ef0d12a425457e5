/* src/video/av_buffers.c - the decoder's picture buffers from the pool
 * (kind decoder, the stream's owner): AVCodecContext.get_buffer2 lays a
 * picture out as libavcodec's default allocator does (aligned dimensions,
 * linesizes and planes), but puts every plane in one buffer that an
 * AVBufferPool recycles and that comes from, and goes back to, the vram
 * pool. Live bytes are counted in the source's decoder_bytes. Decoders
 * without direct rendering, and paletted or hardware formats, keep
 * libavcodec's own buffers (not counted). */
#include "av_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>

#include "base/internal.h"

#define PLANE_ALIGN 64u  /* each plane's start, as libavcodec's STRIDE_ALIGN at most */
#define PAD 16u          /* past the last plane, as libavcodec pads its own */

/* One layout: its AVBufferPool and where the planes go in a buffer. */
struct vram__av_pictures {
    vram__av_buffers *owner;
    AVBufferPool *pool;
    int w, h, fmt;
    size_t size;           /* bytes of a buffer */
    int linesize[4];
    size_t offset[4];      /* of each plane from the aligned start */
    int planes;
};

/* The layout of a w x h picture of `fmt` for codec c, as libavcodec's
 * default get_buffer2 computes it (update_frame_pool). */
static int layout(AVCodecContext *c, int w, int h, int fmt, vram__av_pictures *p)
{
    int align[AV_NUM_DATA_POINTERS];
    int aw = w, ah = h;
    enum AVPixelFormat saved = c->pix_fmt;
    if (saved != fmt) /* avcodec_align_dimensions2 reads the context's format */
        c->pix_fmt = fmt;
    avcodec_align_dimensions2(c, &aw, &ah, align);
    if (saved != fmt)
        c->pix_fmt = saved;
    int linesize[4];
    int unaligned;
    do {
        if (av_image_fill_linesizes(linesize, fmt, aw) < 0)
            return -1;
        aw += aw & ~(aw - 1);
        unaligned = 0;
        for (int i = 0; i < 4; i++)
            unaligned |= align[i] ? linesize[i] % align[i] : 0;
    } while (unaligned);
    ptrdiff_t ls[4];
    size_t sizes[4];
    for (int i = 0; i < 4; i++)
        ls[i] = linesize[i];
    if (av_image_fill_plane_sizes(sizes, fmt, ah, ls) < 0)
        return -1;
    size_t at = 0;
    p->planes = 0;
    for (int i = 0; i < 4; i++) {
        p->linesize[i] = linesize[i];
        p->offset[i] = 0;
        if (!sizes[i])
            continue;
        p->offset[i] = (size_t)vram__align_up(at, PLANE_ALIGN);
        at = p->offset[i] + sizes[i];
        p->planes = i + 1;
    }
    p->size = at + PAD + PLANE_ALIGN; /* room to align the start */
    p->w = w;
    p->h = h;
    p->fmt = fmt;
    return 0;
}

uint64_t vram__av_picture_bytes(AVCodecContext *c, int width, int height, int fmt)
{
    vram__av_pictures p;
    if (width <= 0 || height <= 0 || fmt < 0 || layout(c, width, height, fmt, &p))
        return 0;
    return p.size;
}

static void picture_free(void *opaque, uint8_t *data)
{
    vram__av_pictures *p = opaque;
    vram_pool_free(p->owner->pool, data, NULL);
    atomic_fetch_sub(p->owner->live, (uint64_t)p->size);
}

static AVBufferRef *picture_alloc(void *opaque, size_t size)
{
    vram__av_pictures *p = opaque;
    vram__av_buffers *b = p->owner;
    void *mem = NULL;
    int rc = vram_pool_alloc(b->pool, size, b->owner, VRAM_KIND_DECODER, NULL, &mem);
    if (rc) {
        pthread_mutex_lock(&b->refusal_mu);
        if (!b->refused) {
            b->refused = rc;
            snprintf(b->refusal, sizeof b->refusal, "%s", vram_last_error());
        }
        pthread_mutex_unlock(&b->refusal_mu);
        return NULL;
    }
    AVBufferRef *ref = av_buffer_create(mem, size, picture_free, p, 0);
    if (!ref) {
        vram_pool_free(b->pool, mem, NULL);
        return NULL;
    }
    atomic_fetch_add(b->live, (uint64_t)size);
    return ref;
}

static void pictures_gone(void *opaque) { free(opaque); }

/* The pictures for this layout: the current ones, or new ones (the old
 * AVBufferPool goes once its last picture is back). Under b->mu. */
static vram__av_pictures *pictures_for(vram__av_buffers *b, AVCodecContext *c, int w, int h,
                                       int fmt)
{
    vram__av_pictures *cur = b->cur;
    if (cur && cur->w == w && cur->h == h && cur->fmt == fmt)
        return cur;
    vram__av_pictures *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (layout(c, w, h, fmt, p) ||
        !(p->pool = av_buffer_pool_init2(p->size, p, picture_alloc, pictures_gone))) {
        free(p);
        return NULL;
    }
    p->owner = b;
    if (cur)
        av_buffer_pool_uninit(&cur->pool);
    b->cur = p;
    return p;
}

int vram__av_get_buffer2(AVCodecContext *c, AVFrame *f, int flags)
{
    vram__av_buffers *b = c->opaque;
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
    if (!(c->codec->capabilities & AV_CODEC_CAP_DR1) || !d ||
        (d->flags & (AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_HWACCEL)) || f->width <= 0 ||
        f->height <= 0)
        return avcodec_default_get_buffer2(c, f, flags);
    pthread_mutex_lock(&b->mu);
    vram__av_pictures *p = pictures_for(b, c, f->width, f->height, f->format);
    AVBufferRef *ref = p ? av_buffer_pool_get(p->pool) : NULL;
    pthread_mutex_unlock(&b->mu);
    if (!ref)
        return AVERROR(ENOMEM);
    uint8_t *base = (uint8_t *)(uintptr_t)vram__align_up((uint64_t)(uintptr_t)ref->data,
                                                         PLANE_ALIGN);
    memset(f->data, 0, sizeof f->data);
    memset(f->linesize, 0, sizeof f->linesize);
    memset(f->buf, 0, sizeof f->buf);
    f->buf[0] = ref;
    for (int i = 0; i < p->planes; i++) {
        f->data[i] = base + p->offset[i];
        f->linesize[i] = p->linesize[i];
    }
    f->extended_data = f->data;
    return 0;
}

int vram__av_buffers_init(vram__av_buffers *b, vram_pool *pool, vram_owner owner,
                          _Atomic uint64_t *live)
{
    memset(b, 0, sizeof *b);
    b->pool = pool;
    b->owner = owner;
    b->live = live;
    if (pthread_mutex_init(&b->mu, NULL))
        return vram__fail(VRAM_EHOSTMEM, "video source: cannot create a lock");
    if (pthread_mutex_init(&b->refusal_mu, NULL)) {
        pthread_mutex_destroy(&b->mu);
        return vram__fail(VRAM_EHOSTMEM, "video source: cannot create a lock");
    }
    b->locks = 1;
    return 0;
}

int vram__av_buffers_refused(vram__av_buffers *b)
{
    pthread_mutex_lock(&b->refusal_mu);
    int rc = b->refused;
    if (rc)
        vram__fail(rc, "%s", b->refusal);
    b->refused = 0;
    pthread_mutex_unlock(&b->refusal_mu);
    return rc;
}

void vram__av_buffers_fini(vram__av_buffers *b)
{
    if (!b->locks)
        return;
    if (b->cur)
        av_buffer_pool_uninit(&b->cur->pool); /* frees it: every picture is back */
    b->cur = NULL;
    pthread_mutex_destroy(&b->refusal_mu);
    pthread_mutex_destroy(&b->mu);
    b->locks = 0;
}
