/* src/video/nv12_sample.h - the whole per-pixel computation of the NV12
 * letterbox, shared by the kernel (cuda/letterbox_nv12.cu) and its CPU
 * twin (letterbox_nv12.c): the launch's parameter block, and for one model
 * pixel the sampling taps, the four neighbours converted to 8-bit RGB
 * (yuv_rgb.h), the bilinear blend, scale and bias, and the store in NHWC
 * or NCHW.
 *
 * It follows letterbox.c (the CPU path: RGB24 frames from libswscale) step
 * for step, in the same precision and order of operations: the taps in
 * double, ((x - ox) + 0.5) / s - 0.5 clamped to the frame; the blend in
 * float, top = p00 + (p01 - p00) fx, bottom likewise, v = top + (bottom -
 * top) fy; then v a[c] + b[c] with a[c] = scale[c] / 255. The CPU compiles
 * these without contraction (ISO C, no FMA); in device code the _rn
 * intrinsics keep nvcc from fusing them into FMAs, so both sides round
 * identically and, fed the same RGB, give the same floats.
 *
 * The parameter block is passed to the kernel by value, so nvcc's layout
 * must be gcc's: fixed-width fields, no implicit padding (the sizes and
 * offsets are asserted on both sides), and it stays under the 4 KiB every
 * driver takes for a kernel's parameters. */
#ifndef VRAM_VIDEO_NV12_SAMPLE_H
#define VRAM_VIDEO_NV12_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "yuv_rgb.h"

/* Frames in one launch (VRAM_LETTERBOX_CUDA_MAX) and the kernel's block. */
#define VRAM__NV12_MAX_FRAMES 64
#define VRAM__NV12_BLOCK_X 32
#define VRAM__NV12_BLOCK_Y 8

/* One frame of a launch. */
typedef struct vram__nv12_frame_p {
    uint64_t luma, chroma;   /* NV12 planes (device addresses; host ones for the twin) */
    double s;                /* model pixels per frame pixel */
    uint32_t pitch;          /* bytes from one row to the next, both planes */
    int32_t width, height;   /* the frame's */
    int16_t rw, rh, ox, oy;  /* the frame's place in the model input */
    vram__yuv_coef coef;     /* its matrix and range */
} vram__nv12_frame_p;

/* A launch: the model input and its frames. */
typedef struct vram__nv12_lb_p {
    uint64_t dst;            /* frame i's floats at dst + i x width x height x 3 */
    int32_t width, height;   /* the model input's */
    int32_t n, nchw;         /* frames; 1 for NCHW, 0 for NHWC */
    int32_t src[3];          /* model channel c takes RGB channel src[c] */
    float a[3], b[3];        /* value = pixel x a[c] + b[c] */
    float pad;               /* the bars' value */
    vram__nv12_frame_p f[VRAM__NV12_MAX_FRAMES];
} vram__nv12_lb_p;

/* The same numbers on both compilers: the same layout. */
#ifdef __cplusplus
#define VRAM__NV12_ASSERT(c, m) static_assert(c, m)
#else
#define VRAM__NV12_ASSERT(c, m) _Static_assert(c, m)
#endif
VRAM__NV12_ASSERT(sizeof(vram__yuv_coef) == 12, "vram__yuv_coef is six int16_t");
VRAM__NV12_ASSERT(sizeof(vram__nv12_frame_p) == 56 && offsetof(vram__nv12_frame_p, s) == 16 &&
                      offsetof(vram__nv12_frame_p, pitch) == 24 &&
                      offsetof(vram__nv12_frame_p, rw) == 36 &&
                      offsetof(vram__nv12_frame_p, coef) == 44,
                  "vram__nv12_frame_p's layout");
VRAM__NV12_ASSERT(sizeof(vram__nv12_lb_p) == 64 + 56 * VRAM__NV12_MAX_FRAMES &&
                      offsetof(vram__nv12_lb_p, src) == 24 && offsetof(vram__nv12_lb_p, a) == 36 &&
                      offsetof(vram__nv12_lb_p, pad) == 60 && offsetof(vram__nv12_lb_p, f) == 64,
                  "vram__nv12_lb_p's layout");
VRAM__NV12_ASSERT(sizeof(vram__nv12_lb_p) <= 4096, "a kernel's parameters fit in 4 KiB");

#ifdef __CUDA_ARCH__
#define VRAM__FADD(a, b) __fadd_rn(a, b)
#define VRAM__FSUB(a, b) __fsub_rn(a, b)
#define VRAM__FMUL(a, b) __fmul_rn(a, b)
#define VRAM__DADD(a, b) __dadd_rn(a, b)
#define VRAM__DSUB(a, b) __dsub_rn(a, b)
#define VRAM__DDIV(a, b) __ddiv_rn(a, b)
#else
#define VRAM__FADD(a, b) ((a) + (b))
#define VRAM__FSUB(a, b) ((a) - (b))
#define VRAM__FMUL(a, b) ((a) * (b))
#define VRAM__DADD(a, b) ((a) + (b))
#define VRAM__DSUB(a, b) ((a) - (b))
#define VRAM__DDIV(a, b) ((a) / (b))
#endif

/* The RGB of frame pixel (x, y): its luma and its 2x2 block's chroma. */
VRAM__YUV_FN void vram__nv12_rgb_at(const vram__yuv_coef *c, const uint8_t *luma,
                                    const uint8_t *chroma, size_t pitch, int x, int y,
                                    uint8_t *rgb)
{
    const uint8_t *uv = chroma + (size_t)(y >> 1) * pitch + (size_t)(x & ~1);
    vram__yuv_to_rgb(c, luma[(size_t)y * pitch + (size_t)x], uv[0], uv[1], rgb);
}

/* letterbox.c's tap(): model pixel d (from the frame's origin) samples
 * between frame pixels i0 and i1 with weight f on i1. */
VRAM__YUV_FN void vram__nv12_tap(int d, double s, int n, int *i0, int *i1, float *f)
{
    double p = VRAM__DSUB(VRAM__DDIV(VRAM__DADD((double)d, 0.5), s), 0.5);
    if (p < 0)
        p = 0;
    if (p > (double)(n - 1))
        p = (double)(n - 1);
    int i = (int)p;
    *i0 = i;
    *i1 = i + 1 < n ? i + 1 : n - 1;
    *f = (float)VRAM__DSUB(p, (double)i);
}

/* The three values (in the model's channel order) of model pixel (x, y)
 * for frame f, whose planes are at luma and chroma. */
VRAM__YUV_FN void vram__nv12_lb_pixel(const vram__nv12_lb_p *p, const vram__nv12_frame_p *f,
                                      const uint8_t *luma, const uint8_t *chroma, int x, int y,
                                      float *out)
{
    const int dx = x - f->ox, dy = y - f->oy;
    if (dx < 0 || dx >= f->rw || dy < 0 || dy >= f->rh) {
        out[0] = out[1] = out[2] = p->pad;
        return;
    }
    int x0, x1, y0, y1;
    float fx, fy;
    vram__nv12_tap(dx, f->s, f->width, &x0, &x1, &fx);
    vram__nv12_tap(dy, f->s, f->height, &y0, &y1, &fy);
    uint8_t p00[3], p01[3], p10[3], p11[3];
    vram__nv12_rgb_at(&f->coef, luma, chroma, f->pitch, x0, y0, p00);
    vram__nv12_rgb_at(&f->coef, luma, chroma, f->pitch, x1, y0, p01);
    vram__nv12_rgb_at(&f->coef, luma, chroma, f->pitch, x0, y1, p10);
    vram__nv12_rgb_at(&f->coef, luma, chroma, f->pitch, x1, y1, p11);
    float v[3];
    for (int k = 0; k < 3; k++) {
        float top = VRAM__FADD((float)p00[k],
                               VRAM__FMUL(VRAM__FSUB((float)p01[k], (float)p00[k]), fx));
        float bot = VRAM__FADD((float)p10[k],
                               VRAM__FMUL(VRAM__FSUB((float)p11[k], (float)p10[k]), fx));
        v[k] = VRAM__FADD(top, VRAM__FMUL(VRAM__FSUB(bot, top), fy));
    }
    for (int c = 0; c < 3; c++) { /* v[src[c]], chosen without indexing (registers) */
        const int k = p->src[c];
        const float vk = k == 0 ? v[0] : k == 1 ? v[1] : v[2];
        out[c] = VRAM__FADD(VRAM__FMUL(vk, p->a[c]), p->b[c]);
    }
}

/* Store model pixel (x, y)'s values into one image of the input (o: its
 * first float). */
VRAM__YUV_FN void vram__nv12_lb_store(const vram__nv12_lb_p *p, float *o, int x, int y,
                                      const float *v)
{
    const size_t plane = (size_t)p->width * (size_t)p->height;
    const size_t i = (size_t)y * (size_t)p->width + (size_t)x;
    if (p->nchw) {
        o[i] = v[0];
        o[plane + i] = v[1];
        o[2 * plane + i] = v[2];
    } else {
        o[3 * i] = v[0];
        o[3 * i + 1] = v[1];
        o[3 * i + 2] = v[2];
    }
}

#endif
