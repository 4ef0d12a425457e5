/* src/video/av_convert.c - a decoded picture into a ring slot as packed
 * RGB24 through libswscale, set up as the ffmpeg command line sets up its
 * automatic conversion (bicubic; the picture's colour matrix, BT.601 when
 * unknown, and its range), so that frames match `ffmpeg -pix_fmt rgb24`. */
#include "av_internal.h"

#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "base/internal.h"
#include "frame_ring.h"

int vram__av_convertible(int fmt)
{
    return fmt >= 0 && sws_isSupportedInput(fmt) > 0;
}

/* The coefficients libavfilter's scale filter picks for a picture's
 * colour space ("auto"): known matrices as they are, the rest BT.601. */
static const int *coefficients(int space)
{
    if (space < 1 || space > 10 || space == 8)
        space = AVCOL_SPC_BT470BG;
    return sws_getCoefficients(space);
}

static int setup(vram__av_scaler *sc, const AVFrame *in, const char *url)
{
    int w = in->width, h = in->height, fmt = in->format;
    if (sc->sws && sc->w == w && sc->h == h && sc->fmt == fmt && sc->space == (int)in->colorspace &&
        sc->range == (int)in->color_range)
        return 0;
    struct SwsContext *next = sws_getCachedContext(sc->sws, w, h, fmt, w, h, AV_PIX_FMT_RGB24,
                                                   SWS_BICUBIC, NULL, NULL, NULL);
    if (!next) {
        sc->sws = NULL;
        const char *name = av_get_pix_fmt_name(fmt);
        return vram__fail(VRAM_EPARSE, "video source %s: cannot convert %dx%d %s pictures to RGB",
                          url, w, h, name ? name : "(unknown format)");
    }
    sc->sws = next;
    int *inv, *table, src_full, dst_full, brightness, contrast, saturation;
    if (sws_getColorspaceDetails(next, &inv, &src_full, &table, &dst_full, &brightness, &contrast,
                                 &saturation) >= 0) {
        const int *coef = coefficients(in->colorspace);
        if (in->color_range != AVCOL_RANGE_UNSPECIFIED)
            src_full = in->color_range == AVCOL_RANGE_JPEG;
        sws_setColorspaceDetails(next, coef, src_full, coef, dst_full, brightness, contrast,
                                 saturation);
    }
    sc->w = w;
    sc->h = h;
    sc->fmt = fmt;
    sc->space = in->colorspace;
    sc->range = in->color_range;
    return 0;
}

int vram__av_convert(vram__av_scaler *sc, const AVFrame *in, vram_frame *f, uint64_t capacity,
                     const char *url)
{
    size_t stride = vram__rgb_stride(in->width);
    uint64_t need = (uint64_t)stride * (uint64_t)in->height;
    if (in->width <= 0 || in->height <= 0 || need > capacity) {
        char a[32], b[32];
        return vram__fail(VRAM_EIO,
                          "video source %s: the frame size changed to %dx%d, which needs %s, more "
                          "than the %s of a ring buffer it was opened with",
                          url, in->width, in->height, vram__fmt_bytes(a, sizeof a, need),
                          vram__fmt_bytes(b, sizeof b, capacity));
    }
    int rc = setup(sc, in, url);
    if (rc)
        return rc;
    uint8_t *dst[4] = {f->rgb, NULL, NULL, NULL};
    int dst_stride[4] = {(int)stride, 0, 0, 0};
    if (sws_scale(sc->sws, (const uint8_t *const *)in->data, in->linesize, 0, in->height, dst,
                  dst_stride) != in->height)
        return vram__fail(VRAM_EIO, "video source %s: converting a %dx%d picture to RGB failed",
                          url, in->width, in->height);
    f->width = in->width;
    f->height = in->height;
    f->stride = stride;
    return 0;
}

void vram__av_scaler_free(vram__av_scaler *sc)
{
    sws_freeContext(sc->sws);
    sc->sws = NULL;
}
