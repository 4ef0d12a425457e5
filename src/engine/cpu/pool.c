/* src/engine/cpu/pool.c - the CPU executor's pooling: MaxPool and
 * AveragePool over 2-D windows with strides, dilations and asymmetric pads,
 * and GlobalAveragePool. Each window's taps are clipped to the input once
 * per output row and column (vram__valid_range), so the inner loops carry no
 * bounds tests. AveragePool's divisor follows ONNX Runtime: with
 * count_include_pad the taps inside the padded input, otherwise the taps
 * inside the input. */
#include <float.h>

#include "engine/cpu/kernels_nn.h"

void vram__cpu_maxpool2d(const vram__pool2d *p, const float *x, float *y)
{
    for (int64_t plane = 0; plane < p->n * p->c; plane++) {
        const float *xp = x + plane * p->h * p->w;
        float *yp = y + plane * p->oh * p->ow;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            int64_t y0 = oy * p->stride_h - p->pad_top, ky0, ky1;
            vram__valid_range(y0, p->dil_h, p->h, p->kh, &ky0, &ky1);
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t x0 = ox * p->stride_w - p->pad_left, kx0, kx1;
                vram__valid_range(x0, p->dil_w, p->w, p->kw, &kx0, &kx1);
                float m = -FLT_MAX;
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    const float *row = xp + (y0 + ky * p->dil_h) * p->w;
                    for (int64_t kx = kx0; kx < kx1; kx++) {
                        float v = row[x0 + kx * p->dil_w];
                        if (v > m)
                            m = v;
                    }
                }
                yp[oy * p->ow + ox] = m;
            }
        }
    }
}

void vram__cpu_avgpool2d(const vram__pool2d *p, const float *x, float *y)
{
    for (int64_t plane = 0; plane < p->n * p->c; plane++) {
        const float *xp = x + plane * p->h * p->w;
        float *yp = y + plane * p->oh * p->ow;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            int64_t y0 = oy * p->stride_h - p->pad_top, ky0, ky1, py0, py1;
            vram__valid_range(y0, p->dil_h, p->h, p->kh, &ky0, &ky1);
            /* Taps inside the padded rows [-pad_top, h + pad_bottom). */
            vram__valid_range(y0 + p->pad_top, p->dil_h, p->h + p->pad_top + p->pad_bottom, p->kh,
                              &py0, &py1);
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t x0 = ox * p->stride_w - p->pad_left, kx0, kx1, px0, px1;
                vram__valid_range(x0, p->dil_w, p->w, p->kw, &kx0, &kx1);
                vram__valid_range(x0 + p->pad_left, p->dil_w, p->w + p->pad_left + p->pad_right,
                                  p->kw, &px0, &px1);
                float sum = 0.0f;
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    const float *row = xp + (y0 + ky * p->dil_h) * p->w;
                    for (int64_t kx = kx0; kx < kx1; kx++)
                        sum += row[x0 + kx * p->dil_w];
                }
                /* count_include_pad divides by the whole window, also where
                 * ceil mode takes it past the padded input: ONNX Runtime's rule. */
                int64_t cnt = p->count_include_pad ? ((py1 > py0 && px1 > px0) ? p->kh * p->kw : 0)
                                                   : (ky1 - ky0) * (kx1 - kx0);
                yp[oy * p->ow + ox] = cnt > 0 ? sum / (float)cnt : 0.0f;
            }
        }
    }
}

void vram__cpu_global_avgpool(int64_t n, int64_t c, int64_t spatial, const float *x, float *y)
{
    for (int64_t plane = 0; plane < n * c; plane++) {
        const float *xp = x + plane * spatial;
        double sum = 0.0;
        for (int64_t i = 0; i < spatial; i++)
            sum += xp[i];
        y[plane] = spatial > 0 ? (float)(sum / (double)spatial) : 0.0f;
    }
}
