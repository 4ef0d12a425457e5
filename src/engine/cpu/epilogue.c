/* src/engine/cpu/epilogue.c - the fast kernels' epilogue: bias, residual
 * and activation applied to a finished block of output in one pass over
 * each row while it is in cache, with the activation inline (the
 * formulas of unary_inline.h, shared with the Unary kernel). Built for
 * AVX-512, AVX2 and any x86-64 (simd.h). */
#include "engine/cpu/fast.h"
#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/simd.h"
#include "engine/cpu/unary_inline.h"

/* One row: v = y (+ bias) (+ add), then y = ACT; each case its own loop,
 * so an absent term costs nothing and rounds nothing. */
#define ROW(ACT)                                                                                \
    do {                                                                                        \
        if (has_bias && ar)                                                                     \
            for (int64_t j = 0; j < nc; j++) {                                                  \
                float v = (yr[j] + bv) + ar[j];                                                 \
                yr[j] = ACT;                                                                    \
            }                                                                                   \
        else if (has_bias)                                                                      \
            for (int64_t j = 0; j < nc; j++) {                                                  \
                float v = yr[j] + bv;                                                           \
                yr[j] = ACT;                                                                    \
            }                                                                                   \
        else if (ar)                                                                            \
            for (int64_t j = 0; j < nc; j++) {                                                  \
                float v = yr[j] + ar[j];                                                        \
                yr[j] = ACT;                                                                    \
            }                                                                                   \
        else                                                                                    \
            for (int64_t j = 0; j < nc; j++) {                                                  \
                float v = yr[j];                                                                \
                yr[j] = ACT;                                                                    \
            }                                                                                   \
    } while (0)

VRAM__CPU_CLONES
static void rows(const vram__epilogue *ep, int64_t i0, int64_t m, int64_t j0, int64_t nc, float *y,
                 int64_t ldy)
{
    const float *p = ep->act_p;
    const float la = vram__leaky_alpha(p), lo = vram__clip_lo(p), hi = vram__clip_hi(p);
    const float ha = vram__hsig_alpha(p), hb = vram__hsig_beta(p);
    const int has_bias = ep->bias != NULL;
    for (int64_t i = i0; i < i0 + m; i++) {
        float *restrict yr = y + i * ldy + j0;
        const float *restrict ar = ep->add ? ep->add + i * ep->ld_add + j0 : NULL;
        const float bv = has_bias ? ep->bias[i] : 0.0f;
        switch (ep->act) {
        case -1:
            ROW(v);
            break;
        case VRAM__UN_RELU:
            ROW(vram__relu1(v));
            break;
        case VRAM__UN_LEAKY_RELU:
            ROW(vram__leaky_relu1(v, la));
            break;
        case VRAM__UN_CLIP:
            ROW(vram__clampf(v, lo, hi));
            break;
        case VRAM__UN_HARD_SIGMOID:
            ROW(vram__hard_sigmoid1(v, ha, hb));
            break;
        case VRAM__UN_HARD_SWISH:
            ROW(vram__hard_swish1(v));
            break;
        default: /* the rest (sigmoid, tanh...): the Unary kernel after */
            ROW(v);
            vram__cpu_unary(ep->act, p, nc, yr, yr);
            break;
        }
    }
}

void vram__epilogue_rows(const vram__epilogue *ep, int64_t i0, int64_t m, int64_t j0, int64_t nc,
                         float *y, int64_t ldy)
{
    if (ep && m > 0 && nc > 0)
        rows(ep, i0, m, j0, nc, y, ldy);
}
