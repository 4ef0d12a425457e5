/* src/engine/cuda/kernels.cu - the engine's own CUDA kernels: depthwise
 * convolutions and every step that is not a convolution or a matrix product
 * (those run in cuDNN and cuBLAS), and the small helpers that path needs
 * (zero padding, Gemm's C broadcast, what follows a convolution: bias, a
 * residual Add, ReLU). Compiled by nvcc into a fatbin that the library
 * embeds and loads with the driver API (cuk.c); nothing here links the CUDA
 * runtime.
 *
 * Each kernel is extern "C" (unmangled, for cuModuleGetFunction), takes one
 * parameter block (cuk_params.h) and walks its work with a grid-stride loop,
 * so any grid size is correct; the host caps the grid. Where a loop's count
 * fits in 31 bits the index arithmetic runs in 32 bits (divisions by the
 * axes' extents are much cheaper); addresses are always computed in 64 bits.
 *
 * The semantics are the CPU reference kernels' (src/engine/cpu), which are
 * the specification: the same NaN handling, saturation, rounding, divisor
 * rules and coordinate arithmetic. Float expressions that the CPU evaluates
 * without contraction and whose exact rounding matters (Resize's source
 * coordinates, BatchNormalization, the Cast conversions) use the _rn
 * intrinsics so that nvcc cannot fuse them into FMAs. Transcendentals
 * (expf, tanhf) differ from glibc's by an ulp or two; reductions sum in a
 * different order than the CPU's sequential loops. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/scalar.h"
#include "engine/cuda/cuk_params.h"

#define KERNEL extern "C" __global__ void __launch_bounds__(VRAM__CUK_THREADS)

/* A parameter block the device code may take references to without copying
 * it to local memory. */
#define PARAMS(T) const __grid_constant__ T p

/* Grid-stride loop over [0, n) with an index of type I. I = uint32_t only
 * when n <= INT32_MAX, so i + stride cannot wrap. */
#define GRID_LOOP(I, i, n)                                                                    \
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < (I)(n);                    \
         i += (I)blockDim.x * (I)gridDim.x)

/* Call body<I>(...) with 32-bit indices when the count allows. */
#define BY_INDEX(n, call32, call64)                                                           \
    do {                                                                                      \
        if ((n) <= (int64_t)INT32_MAX)                                                        \
            call32;                                                                           \
        else                                                                                  \
            call64;                                                                           \
    } while (0)

/* The first error of a run wins; later ones leave the word alone. */
__device__ static void record_error(vram__cuk_errword *e, int code, int step, int64_t value,
                                    int64_t bound)
{
    if (!e)
        return;
    if (*(volatile int32_t *)&e->code != 0)
        return;
    if (atomicCAS((int *)&e->code, 0, code) == 0) {
        e->step = step;
        e->value = value;
        e->bound = bound;
    }
}

/* Call body<T, I>(p) with T the p.unit-byte type (1 to 16 bytes; 16 is
 * uint4) and I the index type for a count n. */
#define BY_UNIT(body, p, n)                                                                   \
    do {                                                                                      \
        switch ((p).unit) {                                                                   \
        case 1: BY_INDEX(n, (body<uint8_t, uint32_t>(p)), (body<uint8_t, int64_t>(p))); break; \
        case 2:                                                                               \
            BY_INDEX(n, (body<uint16_t, uint32_t>(p)), (body<uint16_t, int64_t>(p)));         \
            break;                                                                            \
        case 4:                                                                               \
            BY_INDEX(n, (body<uint32_t, uint32_t>(p)), (body<uint32_t, int64_t>(p)));         \
            break;                                                                            \
        case 8:                                                                               \
            BY_INDEX(n, (body<unsigned long long, uint32_t>(p)),                              \
                     (body<unsigned long long, int64_t>(p)));                                 \
            break;                                                                            \
        default: BY_INDEX(n, (body<uint4, uint32_t>(p)), (body<uint4, int64_t>(p))); break;   \
        }                                                                                     \
    } while (0)

/* The coordinate of o along axis d of a shape stored innermost first, and o
 * moved on to the next axis (the last axis needs no division). */
template <typename I>
__device__ __forceinline__ I take_coord(I &o, int d, int rank, int64_t dim)
{
    if (d == rank - 1) {
        I r = o;
        o = 0;
        return r;
    }
    I q = o / (I)dim;
    I r = o - q * (I)dim;
    o = q;
    return r;
}

/* ---- helpers for the cuDNN / cuBLAS path ---------------------------------- */

template <typename I> __device__ static void pad2d_body(const vram__cuk_pad2d_p &p)
{
    GRID_LOOP(I, i, p.total) {
        I t = i;
        I ox = take_coord<I>(t, 0, 3, p.ow), oy = take_coord<I>(t, 1, 3, p.oh), plane = t;
        int64_t iy = (int64_t)oy - p.top, ix = (int64_t)ox - p.left;
        p.y[i] = (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w)
                     ? p.x[((int64_t)plane * p.h + iy) * p.w + ix]
                     : 0.0f;
    }
}

KERNEL vram_cuk_pad2d(PARAMS(vram__cuk_pad2d_p))
{
    BY_INDEX(p.total, pad2d_body<uint32_t>(p), pad2d_body<int64_t>(p));
}

template <typename I> __device__ static void broadcast2d_body(const vram__cuk_broadcast2d_p &p)
{
    GRID_LOOP(I, i, p.m * p.n) {
        I t = i;
        I j = take_coord<I>(t, 0, 2, p.n), r = t;
        int64_t ci = (p.rows == 1 ? 0 : (int64_t)r) * p.cols + (p.cols == 1 ? 0 : (int64_t)j);
        /* beta 0: C is not read (as the CPU's Gemm), so y may be C itself
         * and whatever it holds, NaN included, becomes 0. */
        p.y[i] = p.beta == 0.0f ? 0.0f : __fmul_rn(p.beta, p.c[ci]);
    }
}

KERNEL vram_cuk_broadcast2d(PARAMS(vram__cuk_broadcast2d_p))
{
    BY_INDEX(p.m * p.n, broadcast2d_body<uint32_t>(p), broadcast2d_body<int64_t>(p));
}

template <typename I> __device__ static void epilogue_body(const vram__cuk_epilogue_p &p)
{
    GRID_LOOP(I, i, p.total) {
        float v = p.x[i];
        if (p.bias)
            v = __fadd_rn(v, p.bias[(i / (I)p.spatial) % (I)p.c]);
        if (p.other)
            v = __fadd_rn(v, p.other[i]);
        if (p.relu && v < 0.0f)
            v = 0.0f;
        p.y[i] = v;
    }
}

KERNEL vram_cuk_epilogue(PARAMS(vram__cuk_epilogue_p))
{
    BY_INDEX(p.total, epilogue_body<uint32_t>(p), epilogue_body<int64_t>(p));
}

/* ---- depthwise convolution -------------------------------------------------- */

/* Each output cell sums its window's taps that fall inside the input (the
 * padding reads as zero), then adds the bias, as the CPU's direct loop. */
template <typename I> __device__ static void dwconv_body(const vram__cuk_dwconv_p &p)
{
    int kh = (int)p.kh, kw = (int)p.kw;
    GRID_LOOP(I, i, p.total) {
        I t = i;
        int64_t ox = (int64_t)take_coord<I>(t, 0, 3, p.ow);
        int64_t oy = (int64_t)take_coord<I>(t, 1, 3, p.oh);
        I plane = t; /* n * c + channel */
        int64_t ch = (int64_t)(plane % (I)p.c);
        const float *xp = p.x + (int64_t)plane * p.h * p.w;
        const float *wp = p.wt + ch * kh * kw;
        int64_t iy0 = oy * p.stride_h - p.pad_top, ix0 = ox * p.stride_w - p.pad_left;
        float acc = 0.0f;
        for (int ky = 0; ky < kh; ky++) {
            int64_t iy = iy0 + ky * p.dil_h;
            if (iy < 0 || iy >= p.h)
                continue;
            const float *row = xp + iy * p.w;
            for (int kx = 0; kx < kw; kx++) {
                int64_t ix = ix0 + kx * p.dil_w;
                if (ix >= 0 && ix < p.w)
                    acc = __fmaf_rn(__ldg(row + ix), __ldg(wp + ky * kw + kx), acc);
            }
        }
        if (p.bias)
            acc = __fadd_rn(acc, __ldg(p.bias + ch));
        p.y[i] = acc;
    }
}

/* The same for a K x K kernel at stride S without dilation, all in 32-bit
 * arithmetic with the taps unrolled: the general loop's 64-bit coordinates
 * cost more than its memory traffic. The taps are summed in the same
 * order. */
template <int K, int S> __device__ static void dwconv_fixed(const vram__cuk_dwconv_p &p)
{
    const int h = (int)p.h, w = (int)p.w, c = (int)p.c;
    const uint32_t oh = (uint32_t)p.oh, ow = (uint32_t)p.ow;
    GRID_LOOP(uint32_t, i, p.total) {
        uint32_t t = i / ow;
        int ox = (int)(i - t * ow);
        uint32_t plane = t / oh;
        int oy = (int)(t - plane * oh);
        int ch = (int)(plane % (uint32_t)c);
        const float *xp = p.x + (size_t)plane * (size_t)h * (size_t)w;
        const float *wp = p.wt + ch * K * K;
        int iy0 = oy * S - (int)p.pad_top, ix0 = ox * S - (int)p.pad_left;
        float acc = 0.0f;
#pragma unroll
        for (int ky = 0; ky < K; ky++) {
            int iy = iy0 + ky;
            if ((unsigned)iy >= (unsigned)h)
                continue;
            const float *row = xp + iy * w;
#pragma unroll
            for (int kx = 0; kx < K; kx++) {
                int ix = ix0 + kx;
                if ((unsigned)ix < (unsigned)w)
                    acc = __fmaf_rn(__ldg(row + ix), __ldg(wp + ky * K + kx), acc);
            }
        }
        if (p.bias)
            acc = __fadd_rn(acc, __ldg(p.bias + ch));
        p.y[i] = acc;
    }
}

KERNEL vram_cuk_dwconv(PARAMS(vram__cuk_dwconv_p))
{
    switch (p.fixed) {
    case 31: dwconv_fixed<3, 1>(p); break;
    case 32: dwconv_fixed<3, 2>(p); break;
    case 51: dwconv_fixed<5, 1>(p); break;
    case 52: dwconv_fixed<5, 2>(p); break;
    default: BY_INDEX(p.total, dwconv_body<uint32_t>(p), dwconv_body<int64_t>(p)); break;
    }
}

/* ---- ConvTranspose ---------------------------------------------------------- */

/* The CPU scatters x[n, ci, iy, ix] * w[ci, col, ky, kx] onto
 * y[n, g*cog + col, iy*sh - pt + ky*dh, ix*sw - pl + kx*dw]; here each
 * output cell gathers the taps that land on it. */
template <typename I> __device__ static void convt_body(const vram__cuk_convt_p &p)
{
    int64_t cog = p.c_out / p.group, cig = p.c_in / p.group;
    int64_t plane_in = p.h * p.w, ktaps = p.kh * p.kw;
    GRID_LOOP(I, i, p.total) {
        I t = i;
        int64_t ox = (int64_t)take_coord<I>(t, 0, 4, p.ow);
        int64_t oy = (int64_t)take_coord<I>(t, 1, 4, p.oh);
        int64_t oc = (int64_t)take_coord<I>(t, 2, 4, p.c_out);
        int64_t nn = (int64_t)t;
        int64_t g = oc / cog, col = oc - g * cog;
        const float *xg = p.x + (nn * p.c_in + g * cig) * plane_in;
        const float *wg = p.wt + (g * cig * cog + col) * ktaps; /* w[g*cig + ci, col] */
        float acc = p.bias ? p.bias[oc] : 0.0f;
        for (int64_t ky = 0; ky < p.kh; ky++) {
            int64_t ty = oy + p.pad_top - ky * p.dil_h; /* = iy * stride_h */
            if (ty < 0)
                break; /* only decreases with ky */
            if (ty % p.stride_h)
                continue;
            int64_t iy = ty / p.stride_h;
            if (iy >= p.h)
                continue;
            for (int64_t kx = 0; kx < p.kw; kx++) {
                int64_t tx = ox + p.pad_left - kx * p.dil_w;
                if (tx < 0)
                    break;
                if (tx % p.stride_w)
                    continue;
                int64_t ix = tx / p.stride_w;
                if (ix >= p.w)
                    continue;
                const float *xp = xg + iy * p.w + ix;
                const float *wp = wg + ky * p.kw + kx;
                for (int64_t ci = 0; ci < cig; ci++)
                    acc = __fmaf_rn(xp[ci * plane_in], wp[ci * cog * ktaps], acc);
            }
        }
        p.y[i] = acc;
    }
}

KERNEL vram_cuk_convt(PARAMS(vram__cuk_convt_p))
{
    BY_INDEX(p.total, convt_body<uint32_t>(p), convt_body<int64_t>(p));
}

/* ---- BatchNormalization ----------------------------------------------------- */

template <typename I> __device__ static void batchnorm_body(const vram__cuk_batchnorm_p &p)
{
    GRID_LOOP(I, i, p.total) {
        I ch = (i / (I)p.spatial) % (I)p.c;
        /* As the CPU: s = scale / sqrtf(var + eps), t = bias - mean * s,
         * y = x * s + t, each operation rounded on its own. */
        float s = __fdiv_rn(p.scale[ch], __fsqrt_rn(__fadd_rn(p.var[ch], p.eps)));
        float tt = __fsub_rn(p.bias[ch], __fmul_rn(p.mean[ch], s));
        p.y[i] = __fadd_rn(__fmul_rn(p.x[i], s), tt);
    }
}

KERNEL vram_cuk_batchnorm(PARAMS(vram__cuk_batchnorm_p))
{
    BY_INDEX(p.total, batchnorm_body<uint32_t>(p), batchnorm_body<int64_t>(p));
}

/* ---- activations ------------------------------------------------------------ */

__device__ __forceinline__ static float clampf_(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v); /* NaN stays NaN */
}

__device__ __forceinline__ static float sigmoid_(float x)
{
    if (x >= 0.0f)
        return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
    float e = expf(x);
    return __fdiv_rn(e, __fadd_rn(1.0f, e));
}

template <typename I> __device__ static void unary_body(const vram__cuk_unary_p &p)
{
    GRID_LOOP(I, i, p.n) {
        float x = p.x[i], v;
        switch (p.op) {
        case VRAM__UN_RELU: v = x < 0.0f ? 0.0f : x; break;
        case VRAM__UN_SIGMOID: v = sigmoid_(x); break;
        case VRAM__UN_TANH: v = tanhf(x); break;
        case VRAM__UN_LEAKY_RELU: v = x < 0.0f ? __fmul_rn(p.p0, x) : x; break;
        case VRAM__UN_CLIP: v = clampf_(x, p.p0, p.p1); break;
        case VRAM__UN_HARD_SIGMOID:
            v = clampf_(__fadd_rn(__fmul_rn(p.p0, x), p.p1), 0.0f, 1.0f);
            break;
        case VRAM__UN_HARD_SWISH:
            v = __fmul_rn(x, clampf_(__fadd_rn(__fmul_rn(x, 1.0f / 6.0f), 0.5f), 0.0f, 1.0f));
            break;
        case VRAM__UN_IDENTITY: v = x; break;
        default: v = __int_as_float(0x7fc00000); break; /* NaN: a caller's bug shows */
        }
        p.y[i] = v;
    }
}

KERNEL vram_cuk_unary(PARAMS(vram__cuk_unary_p))
{
    BY_INDEX(p.n, unary_body<uint32_t>(p), unary_body<int64_t>(p));
}

/* ---- broadcasting arithmetic ---------------------------------------------- */

/* Element offsets in a and b of output element o. */
template <typename I>
__device__ __forceinline__ void bin_offsets(I o, const vram__cuk_binary_p &p, int64_t &oa,
                                            int64_t &ob)
{
    oa = 0;
    ob = 0;
#pragma unroll
    for (int d = 0; d < VRAM__CUK_MAX_RANK; d++) {
        if (d >= p.rank)
            break;
        int64_t r = (int64_t)take_coord<I>(o, d, p.rank, p.rdim[d]);
        oa += r * p.ra[d];
        ob += r * p.rb[d];
    }
}

__device__ __forceinline__ static float bin_f32(int op, float a, float b)
{
    switch (op) {
    case VRAM__BIN_ADD: return __fadd_rn(a, b);
    case VRAM__BIN_SUB: return __fsub_rn(a, b);
    case VRAM__BIN_MUL: return __fmul_rn(a, b);
    case VRAM__CUK_BIN_PRELU: return a < 0.0f ? __fmul_rn(b, a) : a;
    default: return __fdiv_rn(a, b);
    }
}

template <typename I> __device__ static void binary_body(const vram__cuk_binary_p &p)
{
    const float *a = (const float *)p.a, *b = (const float *)p.b;
    float *y = (float *)p.y;
    GRID_LOOP(I, i, p.total) {
        int64_t oa, ob;
        bin_offsets<I>(i, p, oa, ob);
        y[i] = bin_f32(p.op, a[oa], b[ob]);
    }
}

KERNEL vram_cuk_binary(PARAMS(vram__cuk_binary_p))
{
    BY_INDEX(p.total, binary_body<uint32_t>(p), binary_body<int64_t>(p));
}

template <typename I> __device__ static void binary_i64_body(const vram__cuk_binary_p &p)
{
    const int64_t *a = (const int64_t *)p.a, *b = (const int64_t *)p.b;
    int64_t *y = (int64_t *)p.y;
    GRID_LOOP(I, i, p.total) {
        int64_t oa, ob;
        bin_offsets<I>(i, p, oa, ob);
        int64_t av = a[oa], bv = b[ob];
        uint64_t ua = (uint64_t)av, ub = (uint64_t)bv;
        int64_t v;
        switch (p.op) { /* two's complement wrap-around, as NumPy */
        case VRAM__BIN_ADD: v = (int64_t)(ua + ub); break;
        case VRAM__BIN_SUB: v = (int64_t)(ua - ub); break;
        case VRAM__BIN_MUL: v = (int64_t)(ua * ub); break;
        default:
            if (bv == 0) {
                /* The CPU refuses the whole step; here the run reports it. */
                record_error(p.err, 2 /* VRAM__CUK_DIV_ZERO */, p.step, ob, p.b_elems);
                v = 0;
            } else if (av == INT64_MIN && bv == -1) {
                v = INT64_MIN;
            } else {
                v = av / bv; /* truncates toward zero */
            }
            break;
        }
        y[i] = v;
    }
}

KERNEL vram_cuk_binary_i64(PARAMS(vram__cuk_binary_p))
{
    BY_INDEX(p.total, binary_i64_body<uint32_t>(p), binary_i64_body<int64_t>(p));
}

/* ---- pooling ---------------------------------------------------------------- */

template <typename I> __device__ static void maxpool_body(const vram__cuk_pool_p &p)
{
    GRID_LOOP(I, i, p.total) {
        I t = i;
        int64_t ox = (int64_t)take_coord<I>(t, 0, 3, p.ow);
        int64_t oy = (int64_t)take_coord<I>(t, 1, 3, p.oh);
        const float *xp = p.x + (int64_t)t * p.h * p.w;
        int64_t y0 = oy * p.stride_h - p.pad_top, x0 = ox * p.stride_w - p.pad_left;
        int64_t ky0, ky1, kx0, kx1;
        vram__valid_range(y0, p.dil_h, p.h, p.kh, &ky0, &ky1);
        vram__valid_range(x0, p.dil_w, p.w, p.kw, &kx0, &kx1);
        float m = -FLT_MAX; /* padding never wins; NaN never replaces */
        for (int64_t ky = ky0; ky < ky1; ky++) {
            const float *row = xp + (y0 + ky * p.dil_h) * p.w;
            for (int64_t kx = kx0; kx < kx1; kx++) {
                float v = row[x0 + kx * p.dil_w];
                if (v > m)
                    m = v;
            }
        }
        p.y[i] = m;
    }
}

KERNEL vram_cuk_maxpool(PARAMS(vram__cuk_pool_p))
{
    BY_INDEX(p.total, maxpool_body<uint32_t>(p), maxpool_body<int64_t>(p));
}

template <typename I> __device__ static void avgpool_body(const vram__cuk_pool_p &p)
{
    GRID_LOOP(I, i, p.total) {
        I t = i;
        int64_t ox = (int64_t)take_coord<I>(t, 0, 3, p.ow);
        int64_t oy = (int64_t)take_coord<I>(t, 1, 3, p.oh);
        const float *xp = p.x + (int64_t)t * p.h * p.w;
        int64_t y0 = oy * p.stride_h - p.pad_top, x0 = ox * p.stride_w - p.pad_left;
        int64_t ky0, ky1, kx0, kx1, py0, py1, px0, px1;
        vram__valid_range(y0, p.dil_h, p.h, p.kh, &ky0, &ky1);
        vram__valid_range(x0, p.dil_w, p.w, p.kw, &kx0, &kx1);
        /* Taps inside the padded input [-pad, extent + pad_end). */
        vram__valid_range(y0 + p.pad_top, p.dil_h, p.h + p.pad_top + p.pad_bottom, p.kh, &py0,
                          &py1);
        vram__valid_range(x0 + p.pad_left, p.dil_w, p.w + p.pad_left + p.pad_right, p.kw, &px0,
                          &px1);
        float sum = 0.0f; /* the CPU's order, so the same sum */
        for (int64_t ky = ky0; ky < ky1; ky++) {
            const float *row = xp + (y0 + ky * p.dil_h) * p.w;
            for (int64_t kx = kx0; kx < kx1; kx++)
                sum = __fadd_rn(sum, row[x0 + kx * p.dil_w]);
        }
        /* count_include_pad: the whole window, also past the padded input
         * in ceil mode (ONNX Runtime's rule); a window with no cell in the
         * padded input gives 0. */
        int64_t cnt = p.count_include_pad ? ((py1 > py0 && px1 > px0) ? p.kh * p.kw : 0)
                                          : (ky1 - ky0) * (kx1 - kx0);
        p.y[i] = cnt > 0 ? __fdiv_rn(sum, (float)cnt) : 0.0f;
    }
}

KERNEL vram_cuk_avgpool(PARAMS(vram__cuk_pool_p))
{
    BY_INDEX(p.total, avgpool_body<uint32_t>(p), avgpool_body<int64_t>(p));
}

/* ---- reductions ----------------------------------------------------------------- */

__device__ __forceinline__ static double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The larger, ignoring NaN as the CPU's `if (v > m) m = v` does (m itself
 * never becomes NaN). */
__device__ __forceinline__ static float max_nonan(float m, float v) { return v > m ? v : m; }

__device__ __forceinline__ static float warp_max_f(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = max_nonan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide reductions (blockDim.x == VRAM__CUK_THREADS); every thread gets
 * the result. Called by all threads of the block. */
__device__ static double block_sum_d(double v, double *sh)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    v = warp_sum_d(v);
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    double r = 0.0;
    for (int k = 0; k < VRAM__CUK_THREADS / 32; k++)
        r += sh[k];
    __syncthreads(); /* sh may be reused at once */
    return r;
}

__device__ static float block_max_f(float v, float *sh)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    v = warp_max_f(v);
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int k = 0; k < VRAM__CUK_THREADS / 32; k++)
        r = max_nonan(r, sh[k]);
    __syncthreads();
    return r;
}

/* GlobalAveragePool, a warp per plane (small planes). The CPU sums in
 * double; so does this, in another order. */
KERNEL vram_cuk_gap_warp(PARAMS(vram__cuk_gap_p))
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t plane = warp; plane < p.planes; plane += warps) {
        const float *xp = p.x + plane * p.spatial;
        double s = 0.0;
        for (int64_t k = lane; k < p.spatial; k += 32)
            s += (double)xp[k];
        s = warp_sum_d(s);
        if (lane == 0)
            p.y[plane] = p.spatial > 0 ? (float)(s / (double)p.spatial) : 0.0f;
    }
}

/* GlobalAveragePool, a block per plane (large planes). */
KERNEL vram_cuk_gap_block(PARAMS(vram__cuk_gap_p))
{
    __shared__ double sh[VRAM__CUK_THREADS / 32];
    for (int64_t plane = blockIdx.x; plane < p.planes; plane += gridDim.x) {
        const float *xp = p.x + plane * p.spatial;
        double s = 0.0;
        for (int64_t k = threadIdx.x; k < p.spatial; k += blockDim.x)
            s += (double)xp[k];
        s = block_sum_d(s, sh);
        if (threadIdx.x == 0)
            p.y[plane] = p.spatial > 0 ? (float)(s / (double)p.spatial) : 0.0f;
    }
}

/* ---- softmax ------------------------------------------------------------------ */

/* One row x[row*n .. row*n + n) (inner == 1) per group of G threads (a warp
 * or the block): the maximum first, then e = expf(x - max) written to y
 * and summed in double, then y *= (float)(1 / sum), as the CPU. y may be x:
 * a thread rewrites only the elements it read after the maximum is known. */
template <int G> __device__ static void softmax_rows_body(const vram__cuk_softmax_p &p)
{
    __shared__ double shd[VRAM__CUK_THREADS / 32];
    __shared__ float shf[VRAM__CUK_THREADS / 32];
    int lane = G == 32 ? (threadIdx.x & 31) : threadIdx.x;
    int64_t group = G == 32 ? ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5 : blockIdx.x;
    int64_t groups = G == 32 ? ((int64_t)gridDim.x * blockDim.x) >> 5 : gridDim.x;
    for (int64_t row = group; row < p.outer; row += groups) {
        const float *x = p.x + row * p.n;
        float *y = p.y + row * p.n;
        float mx = -INFINITY;
        for (int64_t k = lane; k < p.n; k += G)
            mx = max_nonan(mx, x[k]);
        mx = G == 32 ? warp_max_f(mx) : block_max_f(mx, shf);
        double sum = 0.0;
        for (int64_t k = lane; k < p.n; k += G) {
            float e = expf(__fsub_rn(x[k], mx));
            y[k] = e;
            sum += (double)e;
        }
        sum = G == 32 ? warp_sum_d(sum) : block_sum_d(sum, shd);
        float inv = (float)(1.0 / sum);
        for (int64_t k = lane; k < p.n; k += G)
            y[k] = __fmul_rn(y[k], inv);
    }
}

KERNEL vram_cuk_softmax_rows(PARAMS(vram__cuk_softmax_p))
{
    if (p.group == 32)
        softmax_rows_body<32>(p);
    else
        softmax_rows_body<VRAM__CUK_THREADS>(p);
}

/* inner > 1: a thread per (outer, inner) column, the CPU's loop exactly
 * (neighbouring threads read neighbouring columns). */
KERNEL vram_cuk_softmax_cols(PARAMS(vram__cuk_softmax_p))
{
    int64_t cols = p.outer * p.inner;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
         c += (int64_t)blockDim.x * gridDim.x) {
        int64_t o = c / p.inner, j = c - o * p.inner;
        int64_t base = o * p.n * p.inner + j;
        float mx = -INFINITY;
        for (int64_t k = 0; k < p.n; k++)
            mx = max_nonan(mx, p.x[base + k * p.inner]);
        double sum = 0.0;
        for (int64_t k = 0; k < p.n; k++) {
            float e = expf(__fsub_rn(p.x[base + k * p.inner], mx));
            p.y[base + k * p.inner] = e;
            sum += (double)e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t k = 0; k < p.n; k++)
            p.y[base + k * p.inner] = __fmul_rn(p.y[base + k * p.inner], inv);
    }
}

/* ---- data movement ---------------------------------------------------------------- */

/* Transpose and Slice: y[i] = x[base + sum_r coord_r(i) * rdelta[r]]. */
template <typename T, typename I> __device__ static void strided_body(const vram__cuk_strided_p &p)
{
    const T *x = (const T *)p.x;
    T *y = (T *)p.y;
    GRID_LOOP(I, i, p.total) {
        I o = i;
        int64_t off = p.base;
#pragma unroll
        for (int d = 0; d < VRAM__CUK_MAX_RANK; d++) {
            if (d >= p.rank)
                break;
            off += (int64_t)take_coord<I>(o, d, p.rank, p.rdim[d]) * p.rdelta[d];
        }
        y[i] = x[off];
    }
}

KERNEL vram_cuk_strided(PARAMS(vram__cuk_strided_p)) { BY_UNIT(strided_body, p, p.total); }

/* Concat and Split: a block of rows copied between two row strides. */
template <typename T, typename I> __device__ static void copy2d_body(const vram__cuk_copy2d_p &p)
{
    const T *x = (const T *)p.x;
    T *y = (T *)p.y;
    GRID_LOOP(I, i, p.rows * p.cols) {
        I t = i;
        I c = take_coord<I>(t, 0, 2, p.cols), r = t;
        y[(int64_t)r * p.dst_ld + (int64_t)c] = x[(int64_t)r * p.src_ld + (int64_t)c];
    }
}

KERNEL vram_cuk_copy2d(PARAMS(vram__cuk_copy2d_p)) { BY_UNIT(copy2d_body, p, p.rows * p.cols); }

template <typename T, typename I> __device__ static void pad_body(const vram__cuk_pad_p &p)
{
    const T *x = (const T *)p.x;
    T *y = (T *)p.y;
    T value = (T)(uint64_t)p.value; /* the low bytes: little-endian */
    GRID_LOOP(I, i, p.total) {
        I o = i;
        int64_t off = 0;
        bool outside = false;
#pragma unroll
        for (int d = 0; d < VRAM__CUK_MAX_RANK; d++) {
            if (d >= p.rank)
                break;
            int64_t c = (int64_t)take_coord<I>(o, d, p.rank, p.rydim[d]);
            int64_t s = vram__pad_source(p.mode, c - p.rbegin[d], p.rxdim[d]);
            if (s < 0)
                outside = true;
            else
                off += s * p.rxst[d];
        }
        y[i] = outside ? value : x[off];
    }
}

KERNEL vram_cuk_pad(PARAMS(vram__cuk_pad_p))
{
    switch (p.elem) {
    case 1:
        BY_INDEX(p.total, (pad_body<uint8_t, uint32_t>(p)), (pad_body<uint8_t, int64_t>(p)));
        break;
    case 2:
        BY_INDEX(p.total, (pad_body<uint16_t, uint32_t>(p)), (pad_body<uint16_t, int64_t>(p)));
        break;
    case 4:
        BY_INDEX(p.total, (pad_body<uint32_t, uint32_t>(p)), (pad_body<uint32_t, int64_t>(p)));
        break;
    default:
        BY_INDEX(p.total, (pad_body<unsigned long long, uint32_t>(p)),
                 (pad_body<unsigned long long, int64_t>(p)));
        break;
    }
}

/* Gather: y[o, j, r] = x[o, idx[j] (+ n if negative), r], units of p.unit
 * bytes. An index outside [-n, n) is recorded and its slice written as 0. */
template <typename T, typename I> __device__ static void gather_body(const vram__cuk_gather_p &p)
{
    const T *x = (const T *)p.x;
    T *y = (T *)p.y;
    if (p.check_only) {
        GRID_LOOP(I, j, p.ni) {
            int64_t k = p.idx[j];
            if (k < -p.n || k >= p.n)
                record_error(p.err, 1 /* VRAM__CUK_GATHER_INDEX */, p.step, k, p.n);
        }
        return;
    }
    GRID_LOOP(I, i, p.total) {
        I t = i;
        I r = take_coord<I>(t, 0, 3, p.inner);
        I j = take_coord<I>(t, 1, 3, p.ni);
        int64_t o = (int64_t)t;
        int64_t k = p.idx[j];
        if (k < -p.n || k >= p.n) {
            record_error(p.err, 1 /* VRAM__CUK_GATHER_INDEX */, p.step, k, p.n);
            y[i] = T();
            continue;
        }
        if (k < 0)
            k += p.n;
        y[i] = x[(o * p.n + k) * p.inner + (int64_t)r];
    }
}

KERNEL vram_cuk_gather(PARAMS(vram__cuk_gather_p))
{
    BY_UNIT(gather_body, p, p.check_only ? p.ni : p.total);
}

/* ---- resize ----------------------------------------------------------------------- */

/* cpu/resize.c's source_coord, in float exactly as there. */
__device__ __forceinline__ static double source_coord(int ctm, int64_t o, float scale, int64_t in,
                                                      int64_t out)
{
    float x = (float)o;
    switch (ctm) {
    case 0: /* half_pixel */
        return (double)__fsub_rn(__fdiv_rn(__fadd_rn(x, 0.5f), scale), 0.5f);
    case 1: /* asymmetric */
        return (double)__fdiv_rn(x, scale);
    case 2: /* align_corners: over the output extent */
        return out > 1 ? (double)__fdiv_rn(__fmul_rn(x, (float)(in - 1)), (float)(out - 1)) : 0.0;
    case 3: /* pytorch_half_pixel */
        return out > 1 ? (double)__fsub_rn(__fdiv_rn(__fadd_rn(x, 0.5f), scale), 0.5f) : 0.0;
    default: /* 4: tf_half_pixel_for_nearest */
        return (double)__fdiv_rn(__fadd_rn(x, 0.5f), scale);
    }
}

template <typename I> __device__ static void resize_body(const vram__cuk_resize_p &p)
{
    GRID_LOOP(I, i, p.total) {
        I o = i;
        int64_t base = 0;
        int k = 0;                      /* interpolated axes */
        int64_t dl[VRAM__CUK_MAX_RANK]; /* off1 - off0, innermost first */
        double wt[VRAM__CUK_MAX_RANK];  /* weight of off1 */
#pragma unroll
        for (int d = 0; d < VRAM__CUK_MAX_RANK; d++) {
            if (d >= p.rank)
                break;
            int64_t od = (int64_t)take_coord<I>(o, d, p.rank, p.rydim[d]);
            int64_t in = p.rxdim[d], out = p.rydim[d];
            if (p.mode == 0) {
                double s = vram__nearest_round(p.nearest, source_coord(p.ctm, od, p.rscale[d], in, out));
                int64_t ix = s < 0.0 ? 0 : s > (double)(in - 1) ? in - 1 : (int64_t)s;
                base += ix * p.rxst[d];
            } else if (!p.rlinear[d]) {
                base += od * p.rxst[d];
            } else {
                double c = source_coord(p.ctm, od, p.rscale[d], in, out);
                /* Outside the input the edge value continues. */
                c = c < 0.0 ? 0.0 : c > (double)(in - 1) ? (double)(in - 1) : c;
                int64_t i0 = (int64_t)c, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
                base += i0 * p.rxst[d];
                dl[k] = (i1 - i0) * p.rxst[d];
                wt[k] = __dsub_rn(c, (double)i0);
                k++;
            }
        }
        if (k == 0) {
            p.y[i] = p.x[base];
            continue;
        }
        /* The CPU numbers the interpolated axes outermost first (bit j of a
         * corner is its j-th); ours are innermost first, so bit j is axis
         * m = k-1-j here. Same corners, same products in the same order:
         * the same sum. */
        double sum = 0.0;
        for (unsigned corner = 0; corner < (1u << k); corner++) {
            double w = 1.0;
            int64_t off = base;
            for (int j = 0; j < k; j++) {
                int m = k - 1 - j;
                if (corner & (1u << j)) {
                    w = __dmul_rn(w, wt[m]);
                    off += dl[m];
                } else {
                    w = __dmul_rn(w, __dsub_rn(1.0, wt[m]));
                }
            }
            if (w != 0.0)
                sum = __dadd_rn(sum, __dmul_rn(w, (double)p.x[off]));
        }
        p.y[i] = (float)sum;
    }
}

KERNEL vram_cuk_resize(PARAMS(vram__cuk_resize_p))
{
    BY_INDEX(p.total, resize_body<uint32_t>(p), resize_body<int64_t>(p));
}

/* ---- cast -------------------------------------------------------------------------- */

__device__ __forceinline__ static bool is_floating(int t)
{
    return t == VRAM_DTYPE_FLOAT || t == VRAM_DTYPE_DOUBLE || t == VRAM_DTYPE_FLOAT16;
}

template <typename I> __device__ __forceinline__ static double read_f(int t, const void *x, I i)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: return (double)((const float *)x)[i];
    case VRAM_DTYPE_DOUBLE: return ((const double *)x)[i];
    default: return (double)vram__half_to_float(((const uint16_t *)x)[i]);
    }
}

template <typename I> __device__ __forceinline__ static int64_t read_i(int t, const void *x, I i)
{
    switch (t) {
    case VRAM_DTYPE_INT64: return ((const int64_t *)x)[i];
    case VRAM_DTYPE_INT32: return ((const int32_t *)x)[i];
    case VRAM_DTYPE_INT8: return ((const int8_t *)x)[i];
    case VRAM_DTYPE_UINT8: return ((const uint8_t *)x)[i];
    default: return ((const uint8_t *)x)[i] != 0; /* bool: any non-zero byte */
    }
}

/* Truncate toward zero, saturate, NaN to 0 (hi + 1 and lo are exact). */
__device__ __forceinline__ static int64_t sat_trunc(double d, double lo, double hi_plus_1,
                                                    int64_t ilo, int64_t ihi)
{
    if (isnan(d))
        return 0;
    if (d >= hi_plus_1)
        return ihi;
    if (d <= lo - 1.0)
        return ilo;
    return (int64_t)d;
}

/* Two's complement narrowing of v to `bits` bits. */
__device__ __forceinline__ static int64_t wrap_to(int64_t v, int bits, bool is_signed)
{
    uint64_t mask = (1ull << bits) - 1, u = (uint64_t)v & mask;
    if (is_signed && (u >> (bits - 1)))
        return -(int64_t)(mask - u) - 1;
    return (int64_t)u;
}

template <typename I> __device__ __forceinline__ static void write_f(int t, void *y, I i, double d)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: ((float *)y)[i] = __double2float_rn(d); break;
    case VRAM_DTYPE_DOUBLE: ((double *)y)[i] = d; break;
    case VRAM_DTYPE_FLOAT16: ((uint16_t *)y)[i] = vram__double_to_half(d); break;
    case VRAM_DTYPE_INT64:
        ((int64_t *)y)[i] = sat_trunc(d, -0x1p63, 0x1p63, INT64_MIN, INT64_MAX);
        break;
    case VRAM_DTYPE_INT32:
        ((int32_t *)y)[i] = (int32_t)sat_trunc(d, -0x1p31, 0x1p31, INT32_MIN, INT32_MAX);
        break;
    case VRAM_DTYPE_INT8:
        ((int8_t *)y)[i] = (int8_t)sat_trunc(d, -128.0, 128.0, INT8_MIN, INT8_MAX);
        break;
    case VRAM_DTYPE_UINT8: ((uint8_t *)y)[i] = (uint8_t)sat_trunc(d, 0.0, 256.0, 0, UINT8_MAX); break;
    default: ((uint8_t *)y)[i] = d != 0.0; break; /* NaN != 0 */
    }
}

template <typename I> __device__ __forceinline__ static void write_i(int t, void *y, I i, int64_t v)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: ((float *)y)[i] = __ll2float_rn(v); break;
    case VRAM_DTYPE_DOUBLE: ((double *)y)[i] = __ll2double_rn(v); break;
    case VRAM_DTYPE_FLOAT16: ((uint16_t *)y)[i] = vram__double_to_half(__ll2double_rn(v)); break;
    case VRAM_DTYPE_INT64: ((int64_t *)y)[i] = v; break;
    case VRAM_DTYPE_INT32: ((int32_t *)y)[i] = (int32_t)wrap_to(v, 32, true); break;
    case VRAM_DTYPE_INT8: ((int8_t *)y)[i] = (int8_t)wrap_to(v, 8, true); break;
    case VRAM_DTYPE_UINT8: ((uint8_t *)y)[i] = (uint8_t)wrap_to(v, 8, false); break;
    default: ((uint8_t *)y)[i] = v != 0; break;
    }
}

template <typename I> __device__ static void cast_body(const vram__cuk_cast_p &p)
{
    bool fl = is_floating(p.from);
    GRID_LOOP(I, i, p.n) {
        if (fl)
            write_f<I>(p.to, p.y, i, read_f<I>(p.from, p.x, i));
        else
            write_i<I>(p.to, p.y, i, read_i<I>(p.from, p.x, i));
    }
}

KERNEL vram_cuk_cast(PARAMS(vram__cuk_cast_p))
{
    BY_INDEX(p.n, cast_body<uint32_t>(p), cast_body<int64_t>(p));
}
