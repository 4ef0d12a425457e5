/* src/engine/cpu/unary_inline.h - the element-wise activations as inline
 * functions of one value, for the loops that apply them: the Unary kernel
 * (elem.c) and the convolutions' epilogue (epilogue.c), so that both round
 * the same way. Parameters as vram__cpu_unary takes them (kernels_elem.h). */
#ifndef VRAM_ENGINE_CPU_UNARY_INLINE_H
#define VRAM_ENGINE_CPU_UNARY_INLINE_H

#include <math.h>

static inline float vram__clampf(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static inline float vram__relu1(float v) { return v < 0.0f ? 0.0f : v; }

static inline float vram__leaky_relu1(float v, float alpha) { return v < 0.0f ? alpha * v : v; }

static inline float vram__hard_sigmoid1(float v, float alpha, float beta)
{
    return vram__clampf(alpha * v + beta, 0.0f, 1.0f);
}

/* x * HardSigmoid(x) with alpha 1/6 and beta 0.5, as ONNX defines it and
 * ONNX Runtime computes it: a product by 1/6, not a division by 6 (which
 * costs a vector divide per 16 values). */
static inline float vram__hard_swish1(float v)
{
    return v * vram__clampf(v * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f);
}

/* 1/(1+e^-x) evaluated so that neither branch overflows: e^-|x| <= 1. */
static inline float vram__sigmoid1(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* The parameters with their defaults: LeakyRelu's alpha, Clip's bounds,
 * HardSigmoid's alpha and beta. */
static inline float vram__leaky_alpha(const float *p) { return p ? p[0] : 0.01f; }
static inline float vram__clip_lo(const float *p) { return p ? p[0] : -INFINITY; }
static inline float vram__clip_hi(const float *p) { return p ? p[1] : INFINITY; }
static inline float vram__hsig_alpha(const float *p) { return p ? p[0] : 0.2f; }
static inline float vram__hsig_beta(const float *p) { return p ? p[1] : 0.5f; }

#endif
