/* src/engine/cpu/conv.c - the CPU executor's convolutions and the
 * BatchNormalization that usually follows them. Conv is im2col over tiles of
 * output positions followed by the blocked GEMM of gemm.c (a 1x1 stride-1
 * unpadded Conv multiplies the input directly; one input channel per group,
 * as in depthwise, is a direct loop). ConvTranspose is the mirror image: a
 * GEMM of the transposed weights with a tile of input positions, then
 * col2im scatter-adds the columns into the output. The scratch is the
 * caller's, sized under a workspace limit (vram__cpu_conv2d_scratch): the
 * tiles are as long as it allows, and with less than one column of scratch
 * both run as direct loops that need none (slower: no GEMM). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/kernels_nn.h"
#include "engine/cpu/simd.h"

/* Positions per tile when each position needs k scratch floats and
 * `floats` are available; 0 if not even one column fits. */
static int64_t tile_len(int64_t k, int64_t positions, uint64_t floats)
{
    uint64_t ns = k > 0 ? floats / (uint64_t)k : 0;
    return ns < (uint64_t)positions ? (int64_t)ns : positions;
}

int vram__conv2d_check(const vram__conv2d *p, const char *op)
{
    if (p->n < 0 || p->c_in < 0 || p->h < 0 || p->w < 0 || p->c_out < 0 || p->oh < 0 ||
        p->ow < 0 || p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 ||
        p->dil_h < 1 || p->dil_w < 1 || p->pad_top < 0 || p->pad_left < 0 ||
        p->pad_bottom < 0 || p->pad_right < 0 || p->group < 1 || p->c_in % p->group ||
        p->c_out % p->group)
        return vram__fail(VRAM_EINVAL,
                          "%s: bad parameters (n %lld, c_in %lld, %lldx%lld, c_out %lld, kernel "
                          "%lldx%lld, output %lldx%lld, strides %lld,%lld, dilations %lld,%lld, "
                          "pads %lld,%lld,%lld,%lld, group %lld)",
                          op, (long long)p->n, (long long)p->c_in, (long long)p->h,
                          (long long)p->w, (long long)p->c_out, (long long)p->kh,
                          (long long)p->kw, (long long)p->oh, (long long)p->ow,
                          (long long)p->stride_h, (long long)p->stride_w, (long long)p->dil_h,
                          (long long)p->dil_w, (long long)p->pad_top, (long long)p->pad_left,
                          (long long)p->pad_bottom, (long long)p->pad_right,
                          (long long)p->group);
    return 0;
}

/* y[n, c, plane] = bias[c] or 0. */
static void fill_bias(int64_t n, int64_t c, int64_t plane, const float *bias, float *y)
{
    for (int64_t i = 0; i < n * c; i++) {
        float v = bias ? bias[i % c] : 0.0f;
        float *yp = y + i * plane;
        for (int64_t s = 0; s < plane; s++)
            yp[s] = v;
    }
}

void vram__im2col_row(const vram__conv2d *p, const float *xg, int64_t r, int64_t s0, int64_t ns,
                      float *out)
{
    int64_t ci = r / (p->kh * p->kw), ky = r / p->kw % p->kh, kx = r % p->kw;
    const float *xp = xg + ci * p->h * p->w;
    int64_t offx = kx * p->dil_w - p->pad_left, lo, hi;
    vram__valid_range(offx, p->stride_w, p->w, p->ow, &lo, &hi);
    int64_t s = s0;
    while (s < s0 + ns) {
        int64_t oy = s / p->ow, ox0 = s % p->ow;
        int64_t e = ox0 + (s0 + ns - s < p->ow - ox0 ? s0 + ns - s : p->ow - ox0);
        int64_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
        if (iy < 0 || iy >= p->h) {
            memset(out, 0, (size_t)(e - ox0) * sizeof *out);
        } else {
            const float *xrow = xp + iy * p->w; /* xrow[ox*sw + offx] */
            int64_t a = lo < ox0 ? ox0 : lo > e ? e : lo;
            int64_t b = hi < a ? a : hi > e ? e : hi;
            memset(out, 0, (size_t)(a - ox0) * sizeof *out);
            if (p->stride_w == 1)
                memcpy(out + (a - ox0), xrow + a + offx, (size_t)(b - a) * sizeof *out);
            else
                for (int64_t ox = a; ox < b; ox++)
                    out[ox - ox0] = xrow[ox * p->stride_w + offx];
            memset(out + (b - ox0), 0, (size_t)(e - b) * sizeof *out);
        }
        out += e - ox0;
        s += e - ox0;
    }
}

/* col[r, 0:ns] for every row r of the group's cig input planes xg. */
static void im2col_tile(const vram__conv2d *p, const float *xg, int64_t cig, int64_t s0,
                        int64_t ns, float *col)
{
    for (int64_t r = 0; r < cig * p->kh * p->kw; r++)
        vram__im2col_row(p, xg, r, s0, ns, col + r * ns);
}

/* Direct convolution: each output channel is a sum of shifted, scaled rows
 * of its group's input planes, so no scratch is needed (depthwise always,
 * others when the workspace is too small for im2col). Cloned for AVX2. */
VRAM__CPU_CLONES
static void conv_direct(const vram__conv2d *p, const float *x, const float *w, float *y)
{
    int64_t cog = p->c_out / p->group, cig = p->c_in / p->group;
    for (int64_t nn = 0; nn < p->n; nn++) {
        for (int64_t co = 0; co < p->c_out; co++) {
            float *yp = y + (nn * p->c_out + co) * p->oh * p->ow;
            for (int64_t ci = 0; ci < cig; ci++) {
                const float *xp = x + (nn * p->c_in + (co / cog) * cig + ci) * p->h * p->w;
                const float *wp = w + (co * cig + ci) * p->kh * p->kw;
                for (int64_t oy = 0; oy < p->oh; oy++) {
                    float *restrict yrow = yp + oy * p->ow;
                    for (int64_t ky = 0; ky < p->kh; ky++) {
                        int64_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
                        if (iy < 0 || iy >= p->h)
                            continue;
                        const float *restrict xrow = xp + iy * p->w;
                        for (int64_t kx = 0; kx < p->kw; kx++) {
                            int64_t offx = kx * p->dil_w - p->pad_left, lo, hi;
                            vram__valid_range(offx, p->stride_w, p->w, p->ow, &lo, &hi);
                            float wv = wp[ky * p->kw + kx];
                            if (p->stride_w == 1)
                                for (int64_t ox = lo; ox < hi; ox++)
                                    yrow[ox] += wv * xrow[ox + offx];
                            else
                                for (int64_t ox = lo; ox < hi; ox++)
                                    yrow[ox] += wv * xrow[ox * p->stride_w + offx];
                        }
                    }
                }
            }
        }
    }
}

/* Whether the convolution is a plain product (1x1, stride 1, no padding). */
static int is_pointwise(const vram__conv2d *p)
{
    return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_top == 0 && p->pad_left == 0 && p->oh == p->h && p->ow == p->w;
}

uint64_t vram__cpu_conv2d_scratch(const vram__conv2d *p, uint64_t limit)
{
    if (p->group < 1 || p->c_in % p->group || p->c_in == p->group || is_pointwise(p))
        return 0; /* depthwise and pointwise need none */
    int64_t K = p->c_in / p->group * p->kh * p->kw, S = p->oh * p->ow;
    return (uint64_t)(K * tile_len(K, S, limit / sizeof(float))) * sizeof(float);
}

int vram__cpu_conv2d(const vram__conv2d *p, const float *x, const float *w, const float *bias,
                     float *y, void *scratch, uint64_t scratch_bytes)
{
    int rc = vram__conv2d_check(p, "Conv");
    if (rc)
        return rc;
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    int64_t S = p->oh * p->ow, K = cig * p->kh * p->kw;
    int64_t ns = scratch ? tile_len(K, S, scratch_bytes / sizeof(float)) : 0;
    fill_bias(p->n, p->c_out, S, bias, y);
    if (S == 0 || K == 0 || cog == 0)
        return 0;
    if (cig == 1 || (!is_pointwise(p) && ns == 0)) {
        conv_direct(p, x, w, y);
        return 0;
    }
    float *col = scratch;
    for (int64_t nn = 0; nn < p->n; nn++) {
        for (int64_t g = 0; g < p->group; g++) {
            const float *xg = x + (nn * p->c_in + g * cig) * p->h * p->w;
            const float *wg = w + g * cog * K;
            float *yg = y + (nn * p->c_out + g * cog) * S;
            if (is_pointwise(p)) {
                vram__cpu_gemm_acc(cog, S, K, 1.0f, wg, K, 1, xg, S, 1, yg, S);
                continue;
            }
            for (int64_t s0 = 0; s0 < S; s0 += ns) {
                int64_t len = S - s0 < ns ? S - s0 : ns;
                im2col_tile(p, xg, cig, s0, len, col);
                vram__cpu_gemm_acc(cog, len, K, 1.0f, wg, K, 1, col, len, 1, yg + s0, S);
            }
        }
    }
    return 0;
}

/* Scatter-add col[r, 0:ns] for r = (co*kh + ky)*kw + kx and input positions
 * s0 .. s0+ns-1 into the output planes yg: input cell (iy, ix) with tap
 * (ky, kx) lands on (iy*sh - pad_top + ky*dh, ix*sw - pad_left + kx*dw). */
static void col2im_tile(const vram__conv2d *p, const float *col, int64_t cog, int64_t s0,
                        int64_t ns, float *yg)
{
    const float *src = col;
    for (int64_t co = 0; co < cog; co++) {
        float *yp = yg + co * p->oh * p->ow;
        for (int64_t ky = 0; ky < p->kh; ky++) {
            for (int64_t kx = 0; kx < p->kw; kx++, src += ns) {
                int64_t offx = kx * p->dil_w - p->pad_left, lo, hi;
                vram__valid_range(offx, p->stride_w, p->ow, p->w, &lo, &hi);
                int64_t s = s0, d = 0;
                while (s < s0 + ns) {
                    int64_t iy = s / p->w, ix0 = s % p->w;
                    int64_t e = ix0 + (s0 + ns - s < p->w - ix0 ? s0 + ns - s : p->w - ix0);
                    int64_t oy = iy * p->stride_h - p->pad_top + ky * p->dil_h;
                    if (oy >= 0 && oy < p->oh) {
                        const float *in = src + d; /* in[ix - ix0] */
                        float *yrow = yp + oy * p->ow; /* yrow[ix*sw + offx] */
                        int64_t a = lo < ix0 ? ix0 : lo > e ? e : lo;
                        int64_t b = hi < a ? a : hi > e ? e : hi;
                        for (int64_t ix = a; ix < b; ix++)
                            yrow[ix * p->stride_w + offx] += in[ix - ix0];
                    }
                    d += e - ix0;
                    s += e - ix0;
                }
            }
        }
    }
}

uint64_t vram__cpu_conv_transpose2d_scratch(const vram__conv2d *p, uint64_t limit)
{
    if (p->group < 1 || p->c_in % p->group || p->c_out % p->group)
        return 0;
    int64_t K = p->c_out / p->group * p->kh * p->kw, S = p->h * p->w;
    return (uint64_t)(K * tile_len(K, S, limit / sizeof(float))) * sizeof(float);
}

/* Without scratch: every input cell scattered straight into the output. */
static void convt_direct(const vram__conv2d *p, const float *x, const float *w, float *y)
{
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    for (int64_t nn = 0; nn < p->n; nn++)
        for (int64_t ci = 0; ci < p->c_in; ci++) {
            int64_t g = ci / cig;
            const float *xp = x + (nn * p->c_in + ci) * p->h * p->w;
            for (int64_t col = 0; col < cog; col++) {
                const float *wp = w + (ci * cog + col) * p->kh * p->kw;
                float *yp = y + (nn * p->c_out + g * cog + col) * p->oh * p->ow;
                for (int64_t iy = 0; iy < p->h; iy++)
                    for (int64_t ky = 0; ky < p->kh; ky++) {
                        int64_t oy = iy * p->stride_h - p->pad_top + ky * p->dil_h;
                        if (oy < 0 || oy >= p->oh)
                            continue;
                        for (int64_t ix = 0; ix < p->w; ix++) {
                            float v = xp[iy * p->w + ix];
                            for (int64_t kx = 0; kx < p->kw; kx++) {
                                int64_t ox = ix * p->stride_w - p->pad_left + kx * p->dil_w;
                                if (ox >= 0 && ox < p->ow)
                                    yp[oy * p->ow + ox] += v * wp[ky * p->kw + kx];
                            }
                        }
                    }
            }
        }
}

int vram__cpu_conv_transpose2d(const vram__conv2d *p, const float *x, const float *w,
                               const float *bias, float *y, void *scratch, uint64_t scratch_bytes)
{
    int rc = vram__conv2d_check(p, "ConvTranspose");
    if (rc)
        return rc;
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    int64_t S = p->h * p->w, K = cog * p->kh * p->kw;
    int64_t ns = scratch ? tile_len(K, S, scratch_bytes / sizeof(float)) : 0;
    fill_bias(p->n, p->c_out, p->oh * p->ow, bias, y);
    if (S == 0 || K == 0 || cig == 0)
        return 0;
    if (ns == 0) {
        convt_direct(p, x, w, y);
        return 0;
    }
    float *col = scratch;
    for (int64_t nn = 0; nn < p->n; nn++) {
        for (int64_t g = 0; g < p->group; g++) {
            const float *xg = x + (nn * p->c_in + g * cig) * S;
            const float *wg = w + g * cig * K; /* [cig, K] */
            float *yg = y + (nn * p->c_out + g * cog) * p->oh * p->ow;
            for (int64_t s0 = 0; s0 < S; s0 += ns) {
                int64_t len = S - s0 < ns ? S - s0 : ns;
                /* col[K, len] = wg^T [K, cig] * xg[cig, s0:s0+len] */
                memset(col, 0, (size_t)(K * len) * sizeof *col);
                vram__cpu_gemm_acc(K, len, cig, 1.0f, wg, 1, K, xg + s0, S, 1, col, len);
                col2im_tile(p, col, cog, s0, len, yg);
            }
        }
    }
    return 0;
}

void vram__cpu_batchnorm(int64_t n, int64_t c, int64_t spatial, const float *x, const float *scale,
                         const float *bias, const float *mean, const float *var, float eps,
                         float *y)
{
    for (int64_t ch = 0; ch < c; ch++) {
        float s = scale[ch] / sqrtf(var[ch] + eps);
        float t = bias[ch] - mean[ch] * s;
        for (int64_t nn = 0; nn < n; nn++) {
            const float *xp = x + (nn * c + ch) * spatial;
            float *yp = y + (nn * c + ch) * spatial;
            for (int64_t i = 0; i < spatial; i++)
                yp[i] = xp[i] * s + t;
        }
    }
}

void vram__cpu_bn_fold(int64_t c_out, int64_t w_per_out, float *w, float *b, const float *scale,
                       const float *bias, const float *mean, const float *var, float eps)
{
    /* BN(conv + b) = s * (conv + b - mean) + bias with s = scale/sqrt(var+eps). */
    for (int64_t co = 0; co < c_out; co++) {
        float s = scale[co] / sqrtf(var[co] + eps);
        float *wp = w + co * w_per_out;
        for (int64_t i = 0; i < w_per_out; i++)
            wp[i] *= s;
        b[co] = (b[co] - mean[co]) * s + bias[co];
    }
}
