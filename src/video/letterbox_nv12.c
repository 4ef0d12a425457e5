/* src/video/letterbox_nv12.c - the host side of the NV12 letterbox: the
 * arguments of a launch checked and turned into the kernel's parameter
 * block (geometry as letterbox.c computes it), and the kernel's per-pixel
 * computation (nv12_sample.h) run on the CPU over host NV12 buffers, which
 * the tests compare against the CPU path and the GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "base/internal.h"
#include "nv12_internal.h"

_Static_assert(VRAM__NV12_MAX_FRAMES == VRAM_LETTERBOX_CUDA_MAX,
               "a launch's parameter block holds VRAM_LETTERBOX_CUDA_MAX frames");

/* The model inputs served (letterbox.c's limit). */
#define NV12_MAX_SIDE 4096

/* The model-wide part of the block: size, layout, channel order and
 * normalization, as letterbox.c derives them. */
static int lb_setup(const char *what, const vram_letterbox *lb, vram__nv12_lb_p *p)
{
    const int W = lb->width, H = lb->height;
    if (W <= 0 || H <= 0 || W > NV12_MAX_SIDE || H > NV12_MAX_SIDE)
        return vram__fail(VRAM_EINVAL, "%s: model input %dx%d (1..%d on each side)", what, W, H,
                          NV12_MAX_SIDE);
    if (lb->layout != VRAM_LAYOUT_NHWC && lb->layout != VRAM_LAYOUT_NCHW)
        return vram__fail(VRAM_EINVAL,
                          "%s: layout %d (VRAM_LAYOUT_NHWC %d or VRAM_LAYOUT_NCHW %d)", what,
                          (int)lb->layout, (int)VRAM_LAYOUT_NHWC, (int)VRAM_LAYOUT_NCHW);
    p->width = W;
    p->height = H;
    p->nchw = lb->layout == VRAM_LAYOUT_NCHW;
    for (int c = 0; c < 3; c++) {
        p->a[c] = lb->scale[c] / 255.0f;
        p->b[c] = lb->bias[c];
        p->src[c] = lb->bgr ? 2 - c : c;
    }
    p->pad = lb->pad;
    return 0;
}

/* One frame's part: its planes' layout checked, its placement in the model
 * input (letterbox.c's geometry) and its coefficients. */
static int frame_setup(const char *what, const char *name, const vram__nv12_lb_p *p, int width,
                       int height, size_t pitch, int matrix, int full_range,
                       vram__nv12_frame_p *f, vram_letterbox_map *map)
{
    if (width <= 0 || height <= 0)
        return vram__fail(VRAM_EINVAL, "%s: %s is %dx%d", what, name, width, height);
    /* The last column's U, V pair ends at the width rounded up to even. */
    const size_t row = (size_t)width + ((size_t)width & 1u);
    if (pitch < row || pitch > UINT32_MAX)
        return vram__fail(VRAM_EINVAL,
                          "%s: %s has a pitch of %zu bytes for a width of %d (at least %zu, at "
                          "most 4 GiB)",
                          what, name, pitch, width, row);
    const int W = p->width, H = p->height;
    double s = fmin((double)W / width, (double)H / height);
    int rw = (int)lround(width * s), rh = (int)lround(height * s);
    rw = rw < 1 ? 1 : rw > W ? W : rw;
    rh = rh < 1 ? 1 : rh > H ? H : rh;
    const int ox = (W - rw) / 2, oy = (H - rh) / 2;
    f->s = s;
    f->pitch = (uint32_t)pitch;
    f->width = width;
    f->height = height;
    f->rw = (int16_t)rw;
    f->rh = (int16_t)rh;
    f->ox = (int16_t)ox;
    f->oy = (int16_t)oy;
    f->coef = vram__yuv_coef_of(matrix, full_range);
    if (map)
        *map = (vram_letterbox_map){(float)s, (float)ox, (float)oy};
    return 0;
}

int vram__nv12_lb_prepare(const char *what, const vram_letterbox *lb, vram_frame *const *frames,
                          unsigned n, const void *dst, vram__nv12_lb_p *p,
                          vram_letterbox_map *maps)
{
    if (!lb || !frames || !dst)
        return vram__fail(VRAM_EINVAL, "%s: %s is NULL", what,
                          !lb ? "lb" : !frames ? "frames" : "dst");
    if (n < 1 || n > VRAM_LETTERBOX_CUDA_MAX)
        return vram__fail(VRAM_EINVAL, "%s: n is %u frames (1..%d a launch)", what, n,
                          VRAM_LETTERBOX_CUDA_MAX);
    *p = (vram__nv12_lb_p){.dst = (uint64_t)(uintptr_t)dst, .n = (int32_t)n};
    int rc = lb_setup(what, lb, p);
    if (rc)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        const vram_frame *fr = frames[i];
        char name[32];
        snprintf(name, sizeof name, "frames[%u]", i);
        if (!fr)
            return vram__fail(VRAM_EINVAL, "%s: %s is NULL", what, name);
        if (!fr->luma || !fr->chroma)
            return vram__fail(VRAM_EINVAL,
                              "%s: %s is not in device memory (its %s plane is 0: a frame "
                              "decoded on the CPU, letterboxed with vram_letterbox_frame)",
                              what, name, !fr->luma ? "luma" : "chroma");
        rc = frame_setup(what, name, p, fr->width, fr->height, fr->pitch, fr->matrix,
                         fr->full_range, &p->f[i], NULL);
        if (rc)
            return rc;
        p->f[i].luma = fr->luma;
        p->f[i].chroma = fr->chroma;
    }
    if (maps)
        for (unsigned i = 0; i < n; i++)
            maps[i] = (vram_letterbox_map){(float)p->f[i].s, (float)p->f[i].ox,
                                           (float)p->f[i].oy};
    return 0;
}

int vram__letterbox_nv12_host(const vram_letterbox *lb, const uint8_t *luma,
                              const uint8_t *chroma, size_t pitch, int width, int height,
                              int matrix, int full_range, float *dst, vram_letterbox_map *map)
{
    static const char what[] = "vram__letterbox_nv12_host";
    if (!lb || !luma || !chroma || !dst)
        return vram__fail(VRAM_EINVAL, "%s: %s is NULL", what,
                          !lb ? "lb" : !luma ? "luma" : !chroma ? "chroma" : "dst");
    vram__nv12_lb_p p = {.dst = (uint64_t)(uintptr_t)dst, .n = 1};
    int rc = lb_setup(what, lb, &p);
    if (!rc)
        rc = frame_setup(what, "the frame", &p, width, height, pitch, matrix, full_range, &p.f[0],
                         map);
    if (rc)
        return rc;
    p.f[0].luma = (uint64_t)(uintptr_t)luma;
    p.f[0].chroma = (uint64_t)(uintptr_t)chroma;
    for (int y = 0; y < p.height; y++)
        for (int x = 0; x < p.width; x++) {
            float v[3];
            vram__nv12_lb_pixel(&p, &p.f[0], luma, chroma, x, y, v);
            vram__nv12_lb_store(&p, dst, x, y, v);
        }
    return 0;
}
