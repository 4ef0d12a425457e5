/* tests/common/test_conv.h - what the convolution kernels' tests share: a
 * descriptor's output size, and a random input size large enough for its
 * window (engine/cpu/kernels_nn.h's vram__conv2d; draws from test_rand.h). */
#ifndef VRAM_TESTS_COMMON_TEST_CONV_H
#define VRAM_TESTS_COMMON_TEST_CONV_H

#include "engine/cpu/kernels_nn.h"
#include "test_rand.h"

static inline void conv_out_size(vram__conv2d *p)
{
    p->oh = (p->h + p->pad_top + p->pad_bottom - p->dil_h * (p->kh - 1) - 1) / p->stride_h + 1;
    p->ow = (p->w + p->pad_left + p->pad_right - p->dil_w * (p->kw - 1) - 1) / p->stride_w + 1;
}

/* h and w drawn from [lo, hi], raised to what the padded window needs;
 * then the output size. */
static inline void conv_random_size(vram__conv2d *p, int64_t lo, int64_t hi)
{
    int64_t min_h = p->dil_h * (p->kh - 1) + 1 - p->pad_top - p->pad_bottom;
    int64_t min_w = p->dil_w * (p->kw - 1) + 1 - p->pad_left - p->pad_right;
    p->h = irand(lo, hi);
    p->w = irand(lo, hi);
    if (p->h < min_h)
        p->h = min_h;
    if (p->w < min_w)
        p->w = min_w;
    conv_out_size(p);
}

#endif
