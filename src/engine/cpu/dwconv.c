/* src/engine/cpu/dwconv.c - the fast depthwise convolution: each output
 * channel reads one input plane. Output cells are done 16 at a time, for
 * up to ROWS output rows at once, with every sum kept in registers: one
 * load of an input row's 16 cells serves each output row whose window
 * holds that row, and each output cell is stored once.
 *
 * The kernel reads a copy of the input plane in the caller's scratch,
 * padded with zeros on all four sides (no border has a case of its own)
 * and split by column phase: with stride s, padded column u goes to phase
 * u % s at u / s, so the 16 cells of a tap for 16 consecutive outputs are
 * contiguous for any stride and dilation. 3x3 and 5x5 kernels of stride 1
 * or 2 and no dilation are built with their sizes as constants (the loops
 * unroll, the weights stay in registers); any other shape runs the same
 * loop one output row at a time with its sizes as variables. Built for
 * AVX-512, AVX2 and any x86-64 (simd.h). */
#include <string.h>

#include "engine/cpu/fast.h"
#include "engine/cpu/simd.h"

#define VW 16   /* output cells per vector */
#define ROWS 4  /* output rows per pass of the unrolled kernels */

/* Sixteen floats: one AVX-512 register, two AVX2 or four SSE ones, as the
 * clone is built. Loaded and stored through memcpy (any alignment); macros,
 * not functions, so that no vector crosses a call (its ABI differs between
 * the clones). */
typedef float vram__vf16 __attribute__((vector_size(64)));
#define LOADV(v, ptr) memcpy(&(v), (ptr), sizeof(v))

/* The padded plane's geometry: each padded row holds `phases` runs of
 * `run` cells; `rows` padded rows. */
typedef struct plane_geom {
    int64_t phases, run, stride, rows, rows_per_pass;
} plane_geom;

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Whether p is one of the shapes built with constant sizes. */
static int unrolled(const vram__conv2d *p)
{
    return p->kh == p->kw && (p->kh == 3 || p->kh == 5) && p->dil_h == 1 && p->dil_w == 1 &&
           (p->stride_h == 1 || p->stride_h == 2) && p->stride_w == p->stride_h;
}

static plane_geom geometry(const vram__conv2d *p)
{
    plane_geom g;
    g.phases = p->stride_w;
    /* A block's reads of phase q: cells [ox + off / s, + VW) for tap
     * offsets off = kx * dil_w up to (kw - 1) * dil_w. */
    g.run = round_up(p->ow, VW) + (p->kw - 1) * p->dil_w / p->stride_w;
    g.stride = g.phases * g.run;
    g.rows_per_pass = unrolled(p) ? ROWS : 1;
    g.rows = (round_up(p->oh, g.rows_per_pass) - 1) * p->stride_h + (p->kh - 1) * p->dil_h + 1;
    return g;
}

uint64_t vram__cpu_dwconv_scratch(const vram__conv2d *p)
{
    plane_geom g = geometry(p);
    return (uint64_t)(g.rows * g.stride) * sizeof(float);
}

/* The padded, phase-split copy of input plane xp. */
static inline __attribute__((always_inline)) void pad_plane(const vram__conv2d *p,
                                                          const plane_geom *g, const float *xp,
                                                          float *pad)
{
    for (int64_t v = 0; v < g->rows; v++) {
        float *r = pad + v * g->stride;
        int64_t iy = v - p->pad_top;
        if (iy < 0 || iy >= p->h) {
            memset(r, 0, (size_t)g->stride * sizeof *r);
            continue;
        }
        const float *xr = xp + iy * p->w;
        if (g->phases == 1) {
            int64_t lead = p->pad_left < g->run ? p->pad_left : g->run;
            int64_t n = p->w < g->run - lead ? p->w : g->run - lead;
            memset(r, 0, (size_t)lead * sizeof *r);
            memcpy(r + lead, xr, (size_t)n * sizeof *r);
            memset(r + lead + n, 0, (size_t)(g->run - lead - n) * sizeof *r);
            continue;
        }
        const int64_t s = g->phases;
        for (int64_t q = 0; q < s; q++) {
            /* cells t of phase q read input column q + t * s - pad_left:
             * zeros before column 0 and after the last. */
            float *rq = r + q * g->run;
            int64_t lo = p->pad_left - q > 0 ? (p->pad_left - q + s - 1) / s : 0;
            int64_t hi = p->w - 1 + p->pad_left - q >= 0 ? (p->w - 1 + p->pad_left - q) / s + 1 : 0;
            lo = lo < g->run ? lo : g->run;
            hi = hi < g->run ? hi : g->run;
            hi = hi > lo ? hi : lo;
            memset(rq, 0, (size_t)lo * sizeof *rq);
            const int64_t o = q - p->pad_left;
            if (s == 2)
                for (int64_t t = lo; t < hi; t++)
                    rq[t] = xr[2 * t + o];
            else
                for (int64_t t = lo; t < hi; t++)
                    rq[t] = xr[t * s + o];
            memset(rq + hi, 0, (size_t)(g->run - hi) * sizeof *rq);
        }
    }
}

/* Output rows [oy0, oy0 + nr) of the plane, R of them computed (R >= nr;
 * the padded plane has rows for all R). Padded row (oy * sh + ky * dh)
 * holds tap row ky of output row oy; tap (ky, kx) of the 16 outputs from
 * ox is at phase (kx * dw) % sw, cell ox + (kx * dw) / sw. With every size
 * a constant the loops unroll whole; the input rows are walked once, each
 * feeding the outputs whose window holds it. */
static inline __attribute__((always_inline)) void rows_pass(
    const float *pad, const plane_geom *g, int64_t oy0, int64_t nr, const float *wk, float bias,
    float *yp, int64_t ow, const int KH, const int KW, const int SH, const int DH, const int DW,
    const int R)
{
    const int64_t sw = g->phases;
    const float *base = pad + oy0 * SH * g->stride;
    const int span = (R - 1) * SH + (KH - 1) * DH + 1; /* input rows this pass reads */
    for (int64_t ox = 0; ox < ow; ox += VW) {
        vram__vf16 acc[ROWS];
        for (int r = 0; r < R; r++) {
            vram__vf16 b = {0};
            acc[r] = b + bias;
        }
        if (R == 1) { /* sizes as variables: walk the taps */
            for (int ky = 0; ky < KH; ky++) {
                const float *row = base + (int64_t)ky * DH * g->stride;
                for (int kx = 0; kx < KW; kx++) {
                    int64_t off = (int64_t)kx * DW;
                    vram__vf16 xv;
                    LOADV(xv, row + (off % sw) * g->run + ox + off / sw);
                    acc[0] += wk[ky * KW + kx] * xv;
                }
            }
        }
        for (int j = 0; R > 1 && j < span; j++) {
            const float *row = base + j * g->stride;
            for (int kx = 0; kx < KW; kx++) {
                int64_t off = (int64_t)kx * DW;
                vram__vf16 xv;
                LOADV(xv, row + (off % sw) * g->run + ox + off / sw);
                for (int r = 0; r < R; r++) {
                    int d = j - r * SH;
                    if (d < 0 || d % DH || d / DH >= KH)
                        continue;
                    acc[r] += wk[(d / DH) * KW + kx] * xv;
                }
            }
        }
        int64_t n = ow - ox < VW ? ow - ox : VW;
        for (int r = 0; r < R && r < nr; r++) {
            float *yr = yp + (oy0 + r) * ow + ox;
            if (n == VW)
                memcpy(yr, &acc[r], sizeof acc[r]);
            else
                memcpy(yr, &acc[r], (size_t)n * sizeof(float));
        }
    }
}

#define PLANE_UNROLLED(K, S)                                                                    \
    for (int64_t oy = 0; oy < p->oh; oy += ROWS)                                                \
        rows_pass(pad, &g, oy, p->oh - oy, wk, bias, yp, p->ow, K, K, S, 1, 1, ROWS);

/* One output plane from input plane xp, through its padded copy pad. */
VRAM__CPU_CLONES
static void plane(const vram__conv2d *p, const float *xp, const float *wk, float bias, float *yp,
                  float *pad)
{
    plane_geom g = geometry(p);
    pad_plane(p, &g, xp, pad);
    if (unrolled(p)) {
        if (p->kh == 3 && p->stride_h == 1)
            PLANE_UNROLLED(3, 1)
        else if (p->kh == 3)
            PLANE_UNROLLED(3, 2)
        else if (p->stride_h == 1)
            PLANE_UNROLLED(5, 1)
        else
            PLANE_UNROLLED(5, 2)
        return;
    }
    for (int64_t oy = 0; oy < p->oh; oy++)
        rows_pass(pad, &g, oy, 1, wk, bias, yp, p->ow, (int)p->kh, (int)p->kw,
                  (int)p->stride_h, (int)p->dil_h, (int)p->dil_w, 1);
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
