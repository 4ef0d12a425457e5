/* src/engine/cpu/reduce.c - GlobalAveragePool on the vector unit: each
 * plane summed 16 floats a step into partial sums (the reference sums one
 * value at a time in double, which no compiler vectorizes). Squeeze-and-
 * excitation blocks run one per block. Built for AVX-512, AVX2 and any
 * x86-64 (simd.h). */
#include <string.h>

#include "engine/cpu/fast.h"
#include "engine/cpu/simd.h"

#define VW 16

typedef float reduce_vf __attribute__((vector_size(64)));
#define LOADV(v, ptr) memcpy(&(v), (ptr), sizeof(v))

VRAM__CPU_CLONES
static void planes_mean(int64_t planes, int64_t spatial, const float *x, float *y)
{
    for (int64_t plane = 0; plane < planes; plane++) {
        const float *xp = x + plane * spatial;
        reduce_vf a0 = {0}, a1 = {0};
        int64_t i = 0;
        for (; i + 2 * VW <= spatial; i += 2 * VW) {
            reduce_vf v0, v1;
            LOADV(v0, xp + i);
            LOADV(v1, xp + i + VW);
            a0 += v0;
            a1 += v1;
        }
        a0 += a1;
        double sum = 0.0;
        for (int t = 0; t < VW; t++)
            sum += a0[t];
        for (; i < spatial; i++)
            sum += xp[i];
        y[plane] = (float)(sum / (double)spatial);
    }
}

void vram__cpu_global_avgpool_fast(int64_t n, int64_t c, int64_t spatial, const float *x,
                                   float *y)
{
    if (spatial <= 0) {
        for (int64_t plane = 0; plane < n * c; plane++)
            y[plane] = 0.0f;
        return;
    }
    planes_mean(n * c, spatial, x, y);
}
