/* src/engine/cpu/dwconv.c - the fast depthwise convolution: each output
 * channel reads one input plane. Output cells are done 16 at a time with
 * the sum of every tap kept in registers (one load per tap, one store per
 * cell), from a copy of the
 * input plane padded with zeros left and right (the caller's scratch), so
 * the borders need no case of their own; rows in the padding are skipped.
 * The 16-wide loop is written for strides 1 and 2 as constants, so the
 * compiler emits contiguous vector loads for the first and fixed shuffles
 * for the second, and for any stride otherwise. Built for AVX-512, AVX2 and
 * any x86-64 (simd.h). */
#include <string.h>

#include "engine/cpu/fast.h"
#include "engine/cpu/simd.h"

#define VW 16

/* Sixteen floats: one AVX-512 register, two AVX2 or four SSE ones, as the
 * clone is built. Loaded and stored through memcpy (any alignment); macros,
 * not functions, so that no vector crosses a call (its ABI differs between
 * the clones). */
typedef float vram__vf16 __attribute__((vector_size(64)));
#define LOADV(v, ptr) memcpy(&(v), (ptr), sizeof(v))

/* yrow[0:ow]: rows[t] is tap row t's padded input row (NULL when that row
 * is in the padding), so rows[t][ox*sw + kx*dw] is tap (t, kx); every read
 * of a whole block of VW cells is inside the padded row. */
static inline __attribute__((always_inline)) void out_row(const vram__conv2d *p,
                                                          const float *const *rows,
                                                          const float *wk, float bias, float *yrow,
                                                          const int64_t sw)
{
    const int64_t kh = p->kh, kw = p->kw, dw = p->dil_w;
    /* xr[0, 2, .. 30] from xr[0..15] and xr[15..30]: no read past the last tap. */
    for (int64_t ox = 0; ox < p->ow; ox += VW) {
        vram__vf16 acc = {0};
        acc += bias;
        for (int64_t ky = 0; ky < kh; ky++) {
            if (!rows[ky])
                continue;
            for (int64_t kx = 0; kx < kw; kx++) {
                float wv = wk[ky * kw + kx];
                const float *xr = rows[ky] + ox * sw + kx * dw;
                vram__vf16 xv;
                if (sw == 1) {
                    LOADV(xv, xr);
                } else if (sw == 2) {
                    vram__vf16 lo, hi;
                    LOADV(lo, xr);
                    LOADV(hi, xr + VW - 1);
                    xv = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 17, 19,
                                                 21, 23, 25, 27, 29, 31);
                } else {
                    float g[VW];
                    for (int t = 0; t < VW; t++)
                        g[t] = xr[t * sw];
                    LOADV(xv, g);
                }
                acc += wv * xv;
            }
        }
        int64_t n = p->ow - ox < VW ? p->ow - ox : VW;
        memcpy(yrow + ox, &acc, (size_t)n * sizeof(float));
    }
}

/* The padded row's length: every block's reads fit. */
static int64_t padded_width(const vram__conv2d *p)
{
    int64_t blocks = (p->ow + VW - 1) / VW;
    return (blocks * VW - 1) * p->stride_w + (p->kw - 1) * p->dil_w + 1;
}

uint64_t vram__cpu_dwconv_scratch(const vram__conv2d *p)
{
    return (uint64_t)(p->h * padded_width(p)) * sizeof(float);
}

/* One output plane from input plane xp, through its padded copy pad. */
VRAM__CPU_CLONES
static void plane(const vram__conv2d *p, const float *xp, const float *wk, float bias, float *yp,
                  float *pad)
{
    int64_t pw = padded_width(p);
    int64_t n = p->w < pw - p->pad_left ? p->w : pw - p->pad_left; /* input cells read */
    for (int64_t iy = 0; iy < p->h; iy++) {
        float *r = pad + iy * pw;
        int64_t lead = p->pad_left < pw ? p->pad_left : pw;
        memset(r, 0, (size_t)lead * sizeof *r);
        if (n > 0) {
            memcpy(r + lead, xp + iy * p->w, (size_t)n * sizeof *r);
            memset(r + lead + n, 0, (size_t)(pw - lead - n) * sizeof *r);
        } else {
            memset(r + lead, 0, (size_t)(pw - lead) * sizeof *r);
        }
    }
    const float *rows[VRAM__DW_MAX_KH];
    for (int64_t oy = 0; oy < p->oh; oy++) {
        for (int64_t ky = 0; ky < p->kh; ky++) {
            int64_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
            rows[ky] = iy >= 0 && iy < p->h ? pad + iy * pw : NULL;
        }
        float *yrow = yp + oy * p->ow;
        if (p->stride_w == 1)
            out_row(p, rows, wk, bias, yrow, 1);
        else if (p->stride_w == 2)
            out_row(p, rows, wk, bias, yrow, 2);
        else
            out_row(p, rows, wk, bias, yrow, p->stride_w);
    }
}

void vram__cpu_dwconv(const vram__conv2d *p, const float *x, const float *w, const float *bias,
                      const vram__epilogue *ep, float *y, int64_t c0, int64_t c1, float *scratch)
{
    int64_t cog = p->c_out / p->group, S = p->oh * p->ow;
    for (int64_t nn = 0; nn < p->n; nn++)
        for (int64_t co = c0; co < c1; co++) {
            const float *xp = x + (nn * p->c_in + co / cog) * p->h * p->w;
            float *yp = y + (nn * p->c_out + co) * S;
            plane(p, xp, w + co * p->kh * p->kw, bias ? bias[co] : 0.0f, yp, scratch);
            if (ep) {
                vram__epilogue one = {.add = ep->add ? ep->add + (nn * p->c_out + co) * S : NULL,
                                      .act = ep->act, .act_p = ep->act_p};
                vram__epilogue_rows(&one, 0, 1, 0, S, yp, S);
            }
        }
}
