/* src/engine/cpu/sgemm.c - the packed GEMM of the fast CPU kernels, blocked
 * for the caches as BLIS does it: a KC x NC block of B is packed into
 * panels NR columns wide (it stays in L2), and the register tile
 * (sgemm_kernels.c) runs over every pair of it and an MC x KC block of A.
 * A is packed into panels MR rows tall once per k block, all of its rows
 * (weights are read once, not once per block of columns). B's rows come
 * straight from a matrix or from a convolution's input through im2col, so
 * a convolution never builds its whole column matrix. Edges are zero-padded in the panels and the tile
 * writes them to a small buffer on the stack. The epilogue runs on each
 * finished tile while it is in L1. A B of one or two contiguous columns
 * goes to the dot products instead. */
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/fast.h"

#define KC 256
#define MC 144 /* rows of A per pass over a B block: a multiple of every MR */
#define NC 512 /* a multiple of every tile's NR */
#define MR_MAX 12
#define NR_MAX 32
#define DOTS_MAX_COLS 2 /* B this narrow goes to the dot products (dots.c) */

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The A part of the scratch, in floats (all of A's rows, one k block),
 * kept a multiple of 64 bytes. */
static int64_t a_floats(int64_t m, int64_t k)
{
    return round_up(round_up(m, MR_MAX) * min64(k, KC), 16);
}

uint64_t vram__cpu_sgemm_scratch(int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0;
    int64_t b = round_up(min64(n, NC), NR_MAX) * min64(k, KC);
    return (uint64_t)(a_floats(m, k) + b) * sizeof(float);
}

/* A(i0.., p0..) for mc x kc into panels: dst[(ip*kc + p)*mr + ii]. */
static void pack_a(const float *a, int64_t lda, int64_t m, int64_t i0, int64_t mc, int64_t p0,
                   int64_t kc, int mr, float *dst)
{
    for (int64_t ip = 0; ip < mc; ip += mr, dst += kc * mr) {
        for (int ii = 0; ii < mr; ii++) {
            int64_t i = i0 + ip + ii;
            if (i >= m) {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * mr + ii] = 0.0f;
                continue;
            }
            const float *src = a + i * lda + p0;
            for (int64_t p = 0; p < kc; p++)
                dst[p * mr + ii] = src[p];
        }
    }
}

int64_t vram__cpu_sgemm_packed_floats(int64_t m, int64_t k, int mr)
{
    return m > 0 && k > 0 ? round_up(m, mr) * k : 0;
}

/* Block pc of A packed whole (vram__cpu_sgemm_pack_a) starts after the
 * blocks before it, each round_up(m, mr) x KC. */
static int64_t packed_block(int64_t m, int mr, int64_t pc) { return round_up(m, mr) * pc; }

void vram__cpu_sgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda, int mr,
                            float *dst)
{
    for (int64_t pc = 0; pc < k; pc += KC)
        pack_a(a, lda, m, 0, m, pc, min64(KC, k - pc), mr, dst + packed_block(m, mr, pc));
}

/* B(p0.., j0..) for kc x nc into panels: dst[(jp*kc + p)*nr + jj], zero past
 * the last column. row: room for NC floats when B's row must be gathered. */
static void pack_b(const vram__sgemm_b *b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int nr,
                   float *dst, float *row)
{
    int64_t panels = (nc + nr - 1) / nr;
    for (int64_t p = 0; p < kc; p++) {
        const float *src;
        if (b->conv) {
            vram__im2col_row(b->conv, b->x, p0 + p, j0, nc, row);
            src = row;
        } else if (b->bcs == 1) {
            src = b->b + (p0 + p) * b->brs + j0;
        } else {
            const float *bp = b->b + (p0 + p) * b->brs + j0 * b->bcs;
            for (int64_t j = 0; j < nc; j++)
                row[j] = bp[j * b->bcs];
            src = row;
        }
        for (int64_t jp = 0; jp < panels; jp++) {
            float *d = dst + (jp * kc + p) * nr;
            int64_t w = min64(nr, nc - jp * nr);
            memcpy(d, src + jp * nr, (size_t)w * sizeof *d);
            if (w < nr)
                memset(d + w, 0, (size_t)(nr - w) * sizeof *d);
        }
    }
}

/* Y rows [i0, i1) x columns [j0, j1) = A B, then ep (A has m rows). */
static void sgemm_block(const vram__cpu_isa *isa, int64_t m, int64_t i0, int64_t i1, int64_t j0,
                        int64_t j1, int64_t k, const vram__sgemm_a *a, const vram__sgemm_b *b,
                        float *y, int64_t ldy, const vram__epilogue *ep, float *scratch)
{
    const int mr = isa->mr, nr = isa->nr;
    const int prepacked = a->packed && a->packed_mr == mr;
    float *bp = scratch + a_floats(i1 - i0, k);
    float row[NC], edge[MR_MAX * NR_MAX];
    for (int64_t pc = 0; pc < k; pc += KC) {
        int64_t kc = min64(KC, k - pc);
        int last = pc + kc == k;
        /* This k block of rows i0.. in panels: packed at load, or now
         * (every row once per k block). Parts start on a panel. */
        const float *ap = prepacked ? a->packed + packed_block(m, mr, pc) + (i0 / mr) * kc * mr
                                    : scratch;
        if (!prepacked)
            pack_a(a->a, a->lda, i1, i0, i1 - i0, pc, kc, mr, scratch);
        for (int64_t jc = j0; jc < j1; jc += NC) {
            int64_t nc = min64(NC, j1 - jc);
            pack_b(b, pc, kc, jc, nc, nr, bp, row);
            for (int64_t ic = i0; ic < i1; ic += MC) {
                int64_t mc = min64(MC, i1 - ic);
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    int64_t w = min64(nr, nc - jr);
                    const float *bpanel = bp + (jr / nr) * kc * nr;
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        int64_t h = min64(mr, mc - ir);
                        const float *apanel = ap + ((ic - i0 + ir) / mr) * kc * mr;
                        float *c = y + (ic + ir) * ldy + jc + jr;
                        if (h == mr && w == nr) {
                            isa->tile(kc, apanel, bpanel, c, ldy, pc > 0);
                        } else {
                            isa->tile(kc, apanel, bpanel, edge, nr, 0);
                            for (int64_t i = 0; i < h; i++)
                                for (int64_t j = 0; j < w; j++)
                                    c[i * ldy + j] = pc > 0 ? c[i * ldy + j] + edge[i * nr + j]
                                                            : edge[i * nr + j];
                        }
                        if (last)
                            vram__epilogue_rows(ep, ic + ir, h, jc + jr, w, y, ldy);
                    }
                }
            }
        }
    }
}

void vram__cpu_sgemm(int64_t m, int64_t n, int64_t k, const vram__sgemm_a *a,
                     const vram__sgemm_b *b, float *y, int64_t ldy, const vram__epilogue *ep,
                     void *scratch, int part, int parts)
{
    if (m <= 0 || n <= 0 || parts < 1 || part < 0 || part >= parts)
        return;
    const vram__cpu_isa *isa = vram__cpu_isa_get();
    int64_t i0 = 0, i1 = m, j0 = 0, j1 = n;
    if (parts > 1) {
        /* Whole tiles to each part, along the side with more of them. */
        int64_t tm = (m + isa->mr - 1) / isa->mr, tn = (n + isa->nr - 1) / isa->nr;
        if (tn >= tm) {
            j0 = min64(n, tn * part / parts * isa->nr);
            j1 = min64(n, tn * (part + 1) / parts * isa->nr);
        } else {
            i0 = min64(m, tm * part / parts * isa->mr);
            i1 = min64(m, tm * (part + 1) / parts * isa->mr);
        }
        if (i0 >= i1 || j0 >= j1)
            return;
    }
    if (k <= 0) {
        for (int64_t i = i0; i < i1; i++)
            memset(y + i * ldy + j0, 0, (size_t)(j1 - j0) * sizeof *y);
        vram__epilogue_rows(ep, i0, i1 - i0, j0, j1 - j0, y, ldy);
        return;
    }
    if (!b->conv && b->brs == 1 && j1 - j0 <= DOTS_MAX_COLS) {
        /* B's columns are contiguous and too few for a tile. */
        for (int64_t i = i0; i < i1; i++)
            memset(y + i * ldy + j0, 0, (size_t)(j1 - j0) * sizeof *y);
        vram__cpu_dots(i1 - i0, j1 - j0, k, 1.0f, a->a + i0 * a->lda, a->lda, b->b + j0 * b->bcs,
                       b->bcs, y + i0 * ldy + j0, ldy);
        vram__epilogue_rows(ep, i0, i1 - i0, j0, j1 - j0, y, ldy);
        return;
    }
    sgemm_block(isa, m, i0, i1, j0, j1, k, a, b, y, ldy, ep, scratch);
}
