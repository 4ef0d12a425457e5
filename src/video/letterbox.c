/* src/video/letterbox.c - a frame as one image of a model's float input
 * (vramkit/video.h): resized keeping its aspect with bilinear sampling,
 * centred between bars, converted and normalized, in NHWC or NCHW.
 *
 * Geometry (the rule vramkit/video.h states): s = min(W / w, H / h); the
 * frame covers rw x rh = round(w s) x round(h s) model pixels from
 * (ox, oy) = ((W - rw) / 2, (H - rh) / 2) rounded down. Model pixel (x, y)
 * samples the frame at ((x - ox + 0.5) / s - 0.5, (y - oy + 0.5) / s - 0.5),
 * clamped to the frame (pixel centres aligned). Per-column sampling tables
 * live on the stack; nothing is allocated. */
#include <math.h>
#include <stdint.h>

#include "base/internal.h"
#include "vramkit/video.h"

/* The widest model input served (the column tables are on the stack). */
#define LB_MAX_SIDE 4096

/* One output column or row: the two source indices and the weight of the
 * second. */
typedef struct lb_tap {
    int i0, i1;
    float f;
} lb_tap;

static lb_tap tap(int dst, int origin, double s, int n)
{
    double p = ((double)(dst - origin) + 0.5) / s - 0.5;
    if (p < 0)
        p = 0;
    if (p > (double)(n - 1))
        p = (double)(n - 1);
    int i0 = (int)p;
    lb_tap t = {i0, i0 + 1 < n ? i0 + 1 : n - 1, (float)(p - (double)i0)};
    return t;
}

static void fill(float *dst, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = v;
}

int vram_letterbox_frame(const vram_letterbox *lb, const uint8_t *rgb, int width, int height,
                         size_t stride, float *dst, vram_letterbox_map *map)
{
    if (!lb || !rgb || !dst)
        return vram__fail(VRAM_EINVAL, "vram_letterbox_frame: %s is NULL",
                          !lb ? "lb" : !rgb ? "rgb" : "dst");
    const int W = lb->width, H = lb->height;
    if (W <= 0 || H <= 0 || W > LB_MAX_SIDE || H > LB_MAX_SIDE)
        return vram__fail(VRAM_EINVAL,
                          "vram_letterbox_frame: model input %dx%d (1..%d on each side)", W, H,
                          LB_MAX_SIDE);
    if (width <= 0 || height <= 0)
        return vram__fail(VRAM_EINVAL, "vram_letterbox_frame: frame %dx%d", width, height);
    if (stride < (size_t)width * 3u)
        return vram__fail(VRAM_EINVAL,
                          "vram_letterbox_frame: stride %zu is less than 3 x width %d", stride,
                          width);
    if (lb->layout != VRAM_LAYOUT_NHWC && lb->layout != VRAM_LAYOUT_NCHW)
        return vram__fail(VRAM_EINVAL, "vram_letterbox_frame: layout %d", (int)lb->layout);

    double s = fmin((double)W / width, (double)H / height);
    int rw = (int)lround(width * s), rh = (int)lround(height * s);
    rw = rw < 1 ? 1 : rw > W ? W : rw;
    rh = rh < 1 ? 1 : rh > H ? H : rh;
    const int ox = (W - rw) / 2, oy = (H - rh) / 2;
    if (map)
        *map = (vram_letterbox_map){(float)s, (float)ox, (float)oy};

    /* value = pixel * a[c] + b[c], c the model's channel; src[c] the frame's. */
    float a[3], b[3];
    int src[3];
    for (int c = 0; c < 3; c++) {
        a[c] = lb->scale[c] / 255.0f;
        b[c] = lb->bias[c];
        src[c] = lb->bgr ? 2 - c : c;
    }
    lb_tap cols[LB_MAX_SIDE];
    for (int x = 0; x < rw; x++) {
        cols[x] = tap(ox + x, ox, s, width);
        cols[x].i0 *= 3;
        cols[x].i1 *= 3;
    }

    const size_t plane = (size_t)W * (size_t)H;
    const int nchw = lb->layout == VRAM_LAYOUT_NCHW;
    for (int y = 0; y < H; y++) {
        float *row = dst + (size_t)y * (size_t)W * (nchw ? 1u : 3u);
        if (y < oy || y >= oy + rh) {
            if (nchw)
                for (int c = 0; c < 3; c++)
                    fill(row + c * plane, (size_t)W, lb->pad);
            else
                fill(row, (size_t)W * 3u, lb->pad);
            continue;
        }
        lb_tap t = tap(y, oy, s, height);
        const uint8_t *r0 = rgb + (size_t)t.i0 * stride, *r1 = rgb + (size_t)t.i1 * stride;
        const float fy = t.f;
        /* Bars left and right. */
        if (nchw) {
            for (int c = 0; c < 3; c++) {
                fill(row + c * plane, (size_t)ox, lb->pad);
                fill(row + c * plane + ox + rw, (size_t)(W - ox - rw), lb->pad);
            }
        } else {
            fill(row, (size_t)ox * 3u, lb->pad);
            fill(row + (size_t)(ox + rw) * 3u, (size_t)(W - ox - rw) * 3u, lb->pad);
        }
        for (int x = 0; x < rw; x++) {
            const lb_tap *cx = &cols[x];
            const uint8_t *p00 = r0 + cx->i0, *p01 = r0 + cx->i1;
            const uint8_t *p10 = r1 + cx->i0, *p11 = r1 + cx->i1;
            const float fx = cx->f;
            float v[3];
            for (int k = 0; k < 3; k++) {
                float top = (float)p00[k] + ((float)p01[k] - (float)p00[k]) * fx;
                float bot = (float)p10[k] + ((float)p11[k] - (float)p10[k]) * fx;
                v[k] = top + (bot - top) * fy;
            }
            if (nchw) {
                float *o = row + ox + x;
                for (int c = 0; c < 3; c++)
                    o[c * plane] = v[src[c]] * a[c] + b[c];
            } else {
                float *o = row + (size_t)(ox + x) * 3u;
                for (int c = 0; c < 3; c++)
                    o[c] = v[src[c]] * a[c] + b[c];
            }
        }
    }
    return 0;
}
