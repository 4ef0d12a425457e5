/* src/engine/cpu/scalar.h - the scalar rules both executors follow, written
 * once: the CPU kernels (plain C) and the CUDA kernels (kernels.cu, compiled
 * by nvcc) include this header, so the two cannot drift apart. Each function
 * is a pure computation on its arguments: the valid range of a strided
 * window, Pad's source index, Resize's nearest rounding, and float16
 * conversions. */
#ifndef VRAM_ENGINE_CPU_SCALAR_H
#define VRAM_ENGINE_CPU_SCALAR_H

#include <math.h>
#include <stdint.h>

#include "engine/cpu/kernels_elem.h"

#ifdef __CUDACC__
#define VRAM__SCALAR static __host__ __device__ __forceinline__
#else
#define VRAM__SCALAR static inline
#endif

/* [*lo, *hi): the i in [0, count) with 0 <= i*stride + off < limit
 * (stride >= 1). Empty ranges come back as lo == hi. */
VRAM__SCALAR void vram__valid_range(int64_t off, int64_t stride, int64_t limit, int64_t count,
                                    int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = limit - off <= 0 ? 0 : (limit - off + stride - 1) / stride;
    if (h > count)
        h = count;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* Pad: the source index along an axis of extent n for padded coordinate i
 * (the output coordinate minus the begin pad), or -1 for "the constant". */
VRAM__SCALAR int64_t vram__pad_source(int mode, int64_t i, int64_t n)
{
    if (i >= 0 && i < n)
        return i;
    if (mode == VRAM__PAD_CONSTANT)
        return -1;
    if (mode == VRAM__PAD_EDGE || n == 1)
        return i < 0 ? 0 : n - 1;
    /* Reflect: the extended axis repeats with period 2(n-1):
     * a b c d c b | a b c d c b | ... */
    int64_t p = 2 * (n - 1), k = i % p;
    if (k < 0)
        k += p;
    return k < n ? k : p - k;
}

/* Resize: ONNX nearest_mode (0 round_prefer_floor, 1 round_prefer_ceil, 2
 * floor, 3 ceil). Ties are exact halves; only non-negative ones matter,
 * since anything below 0 is clamped to 0 afterwards. */
VRAM__SCALAR double vram__nearest_round(int nearest_mode, double c)
{
    double f = floor(c);
    switch (nearest_mode) {
    case 0:
        return c - f == 0.5 ? f : floor(c + 0.5);
    case 1:
        return c - f == 0.5 ? f + 1.0 : floor(c + 0.5);
    case 2:
        return f;
    default:
        return ceil(c);
    }
}

VRAM__SCALAR float vram__half_to_float(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24); /* zero or subnormal: m * 2^-24, exact */
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400), e - 25);
    return sign ? -v : v;
}

/* Round-to-nearest-even through rint() on exactly scaled values: scaling by
 * a power of two is exact, so rint() sees the true mantissa. */
VRAM__SCALAR uint16_t vram__double_to_half(double d)
{
    uint16_t sign = signbit(d) ? 0x8000 : 0;
    double a = fabs(d);
    if (isnan(d))
        return (uint16_t)(sign | 0x7e00);
    if (a < 0x1p-14) {
        /* Subnormal range: units of 2^-24. A result of 1024 is the smallest
         * normal, whose bit pattern is exactly 0x400. */
        return (uint16_t)(sign | (uint16_t)rint(a * 0x1p24));
    }
    if (isinf(a) || a >= 65520.0)
        return (uint16_t)(sign | 0x7c00);
    int e2;
    double f = frexp(a, &e2); /* a = f * 2^e2, f in [0.5, 1) */
    int e = e2 - 1;           /* a = (2f) * 2^e, 2f in [1, 2) */
    double m = rint(f * 2048.0);
    if (m >= 2048.0) {
        m = 1024.0;
        e++;
    }
    if (e > 15)
        return (uint16_t)(sign | 0x7c00);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)(m - 1024.0));
}

#endif
