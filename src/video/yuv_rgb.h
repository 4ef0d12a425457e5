/* src/video/yuv_rgb.h - one pixel's YUV to RGB conversion, shared by the
 * NV12 letterbox kernel (cuda/letterbox_nv12.cu) and the host code
 * (nv12_rgb.c, letterbox_nv12.c), so the GPU and its CPU twin cannot
 * disagree.
 *
 * The arithmetic is libswscale's (FFmpeg 5.1) for the conversion the CPU
 * path asks for (av_convert.c: yuv420p or yuvj420p to RGB24 at the same
 * size, SWS_BICUBIC, no SWS_ACCURATE_RND, an even height): swscale takes
 * its unscaled special converter there (ff_yuv2rgb_get_func_ptr), which on
 * x86-64 is the SIMD yuv420 -> rgb24 of libswscale/x86/yuv_2_rgb.asm
 * (SSSE3, or MMXEXT; both compute the same). Per pixel, with the chroma
 * of its 2x2 block (nearest, no interpolation), in 16-bit lanes:
 *
 *   y' = pmulhw((Y << 3) - y_offset, y_coeff)
 *   u' = (U << 3) - 1024,  v' = (V << 3) - 1024
 *   R = clip8(y' + pmulhw(v', vr)),  B = clip8(y' + pmulhw(u', ub))
 *   G = clip8(y' + (pmulhw(u', ug) + pmulhw(v', vg)))
 *
 * pmulhw(a, b) = (a * b) >> 16, rounded down. The coefficients are those
 * ff_yuv2rgb_c_init_tables derives from the matrix's entry of
 * ff_yuv2rgb_coeffs (sws_getCoefficients) at the default brightness 0,
 * contrast and saturation 1: 2.13 fixed point, rounded to nearest; limited
 * range scales Y by 255/219 after taking 16 off, full range scales the
 * chroma coefficients by 224/255. The values stay far inside 16 bits, so
 * the SIMD code's saturating adds never saturate and are plain adds here.
 * Checked against libswscale for every (Y, U, V) of every matrix in both
 * ranges: identical. (swscale's portable C converter, which it uses when
 * the CPU has no MMXEXT, rounds through tables and differs by up to 3.)
 *
 * VRAM__YUV_FN marks functions for both sides: __host__ __device__ under
 * nvcc, plain static inline under a C compiler. */
#ifndef VRAM_VIDEO_YUV_RGB_H
#define VRAM_VIDEO_YUV_RGB_H

#include <stdint.h>

#ifdef __CUDACC__
#define VRAM__YUV_FN __host__ __device__ static inline
#else
#define VRAM__YUV_FN static inline
#endif

/* A matrix and range's coefficients, as the SIMD code holds them. */
typedef struct vram__yuv_coef {
    int16_t y, y_offset;      /* luma gain (2.13) and offset (Y << 3 units) */
    int16_t ub, ug, vg, vr;   /* chroma gains (2.13); ug, vg negative */
} vram__yuv_coef;

/* The matrix the CPU path converts with (av_convert.c's coefficients()):
 * AVColorSpace numbering, known matrices as they are (1 BT.709, 4 FCC,
 * 5/6 BT.601, 7 SMPTE 240M, 9/10 BT.2020), anything else BT.601 (5). */
VRAM__YUV_FN int vram__yuv_matrix(int matrix)
{
    return matrix < 1 || matrix > 10 || matrix == 8 ? 5 : matrix;
}

/* ff_yuv2rgb_coeffs[m] (libswscale/yuv2rgb.c): crv, cbu, cgu, cgv, 16.16
 * fixed point, for a matrix vram__yuv_matrix returns. */
VRAM__YUV_FN void vram__yuv_table(int m, int32_t t[4])
{
    int32_t crv, cbu, cgu, cgv;
    switch (m) {
    case 1: crv = 117489; cbu = 138438; cgu = 13975; cgv = 34925; break; /* BT.709 */
    case 4: crv = 104448; cbu = 132798; cgu = 24759; cgv = 53109; break; /* FCC */
    case 7: crv = 117579; cbu = 136230; cgu = 16907; cgv = 35559; break; /* SMPTE 240M */
    case 9:
    case 10: crv = 110013; cbu = 140363; cgu = 12277; cgv = 42626; break; /* BT.2020 */
    default: crv = 104597; cbu = 132201; cgu = 25675; cgv = 53279; break; /* BT.601 */
    }
    t[0] = crv;
    t[1] = cbu;
    t[2] = cgu;
    t[3] = cgv;
}

/* libswscale's roundToInt16: (x + 2^15) >> 16 (rounded down, so x / 65536
 * to nearest, halves up), saturated. */
VRAM__YUV_FN int16_t vram__yuv_round16(int64_t x)
{
    int64_t q = x + (1 << 15);
    int64_t r = q >= 0 ? q / 65536 : -((65535 - q) / 65536);
    return (int16_t)(r < -0x7FFF ? -0x8000 : r > 0x7FFF ? 0x7FFF : r);
}

/* The coefficients for `matrix` (any AVColorSpace value) and range. */
VRAM__YUV_FN vram__yuv_coef vram__yuv_coef_of(int matrix, int full_range)
{
    int32_t t[4];
    vram__yuv_table(vram__yuv_matrix(matrix), t);
    int64_t crv = t[0], cbu = t[1], cgu = -(int64_t)t[2], cgv = -(int64_t)t[3];
    int64_t cy = 1 << 16, oy = 0;
    if (!full_range) {
        cy = cy * 255 / 219;
        oy = (int64_t)16 << 16;
    } else { /* C division, truncating toward zero as swscale's does */
        crv = crv * 224 / 255;
        cbu = cbu * 224 / 255;
        cgu = cgu * 224 / 255;
        cgv = cgv * 224 / 255;
    }
    vram__yuv_coef c;
    c.y = vram__yuv_round16(cy * 8192);
    c.y_offset = vram__yuv_round16(oy * 8);
    c.ub = vram__yuv_round16(cbu * 8192);
    c.ug = vram__yuv_round16(cgu * 8192);
    c.vg = vram__yuv_round16(cgv * 8192);
    c.vr = vram__yuv_round16(crv * 8192);
    return c;
}

/* pmulhw: (a * b) >> 16 rounded down. |a * b| < 2^26 here, so adding
 * 2^26 first keeps the shift on a non-negative value (no
 * implementation-defined shift of a negative number). */
VRAM__YUV_FN int vram__yuv_mulhi(int a, int b)
{
    return ((a * b + (1 << 26)) >> 16) - (1 << 10);
}

VRAM__YUV_FN uint8_t vram__yuv_clip8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One pixel: luma y, its block's chroma u, v (0..255) to rgb[0..2]. */
VRAM__YUV_FN void vram__yuv_to_rgb(const vram__yuv_coef *c, int y, int u, int v, uint8_t *rgb)
{
    int yy = vram__yuv_mulhi((y << 3) - c->y_offset, c->y);
    int uu = (u << 3) - 1024, vv = (v << 3) - 1024;
    int g = vram__yuv_mulhi(uu, c->ug) + vram__yuv_mulhi(vv, c->vg);
    rgb[0] = vram__yuv_clip8(yy + vram__yuv_mulhi(vv, c->vr));
    rgb[1] = vram__yuv_clip8(yy + g);
    rgb[2] = vram__yuv_clip8(yy + vram__yuv_mulhi(uu, c->ub));
}

#endif
