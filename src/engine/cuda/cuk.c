/* src/engine/cuda/cuk.c - the host side of the engine's CUDA kernels, part
 * one: loading the embedded fatbin (kernels.cu) into the current context
 * and finding every kernel, launching them through the driver API, and the
 * kernels the convolution and matrix-product path asks for directly (zero
 * padding, Gemm's C broadcast, a convolution's epilogue, depthwise
 * convolutions). Building each step's parameters is cuk_steps.c
 * (arithmetic) and cuk_move.c (data movement). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuk_internal.h"

/* The parameter blocks and the error word are read by nvcc's code with the
 * layout gcc gives them; these are the assumptions that must hold. */
_Static_assert(VRAM__CUK_MAX_RANK == VRAM__MAX_RANK, "cuk_params.h's rank is graph.h's");
_Static_assert(sizeof(vram__cuk_errword) == sizeof(vram__cuk_error) &&
                   offsetof(vram__cuk_errword, code) == offsetof(vram__cuk_error, code) &&
                   offsetof(vram__cuk_errword, step) == offsetof(vram__cuk_error, step) &&
                   offsetof(vram__cuk_errword, value) == offsetof(vram__cuk_error, value) &&
                   offsetof(vram__cuk_errword, bound) == offsetof(vram__cuk_error, bound),
               "the kernels' error word is vram__cuk_error");
_Static_assert(VRAM__CUK_GATHER_INDEX == 1 && VRAM__CUK_DIV_ZERO == 2,
               "kernels.cu writes these codes as literals");
_Static_assert(VRAM__CUK_BIN_PRELU > VRAM__BIN_DIV, "PRelu is not a binary op's number");

static const char *const kernel_names[VRAM__CUK_K_COUNT] = {
#define VRAM__CUK_NAME(name) "vram_cuk_" #name,
    VRAM__CUK_KERNELS(VRAM__CUK_NAME)
#undef VRAM__CUK_NAME
};

void vram__cuk_unload(vram__cuk *k)
{
    if (!k)
        return;
    if (k->mod)
        vram__ecu.cuModuleUnload(k->mod);
    free(k);
}

int vram__cuk_load(vram__cuk **out)
{
    *out = NULL;
    int rc = vram__ecu_load();
    if (rc)
        return rc;
    vram__cuk *k = vram__calloc(1, sizeof *k);
    if (!k)
        return VRAM_EHOSTMEM;
    CUresult r = vram__ecu.cuModuleLoadData(&k->mod, vram__cuk_image);
    if (r != CUDA_SUCCESS) {
        k->mod = NULL;
        vram__cuk_unload(k);
        return vram_cuda_fail(r, "cuModuleLoadData of the engine's kernels (%zu bytes)",
                             vram__cuk_image_size);
    }
    for (int i = 0; i < VRAM__CUK_K_COUNT; i++) {
        r = vram__ecu.cuModuleGetFunction(&k->fn[i], k->mod, kernel_names[i]);
        if (r != CUDA_SUCCESS) {
            vram__cuk_unload(k);
            return vram_cuda_fail(r, "cuModuleGetFunction(%s)", kernel_names[i]);
        }
    }
    *out = k;
    return 0;
}

int vram__cuk_launch(const vram__cuk *k, int kid, CUstream stream, int64_t threads, void *params)
{
    if (threads <= 0)
        return 0; /* no work: a launch of 0 blocks would be an error */
    int64_t blocks = (threads - 1) / VRAM__CUK_THREADS + 1;
    if (blocks > VRAM__CUK_MAX_BLOCKS)
        blocks = VRAM__CUK_MAX_BLOCKS;
    void *args[] = {params};
    VRAM_CUDA_TRY(vram__ecu.cuLaunchKernel(k->fn[kid], (unsigned)blocks, 1, 1, VRAM__CUK_THREADS, 1,
                                         1, 0, stream, args, NULL),
                 "cuLaunchKernel(%s, %lld blocks)", kernel_names[kid], (long long)blocks);
    return 0;
}

int vram__cuk_memcpy(CUstream stream, void *dst, const void *src, uint64_t n)
{
    if (!n || dst == src)
        return 0;
    VRAM_CUDA_TRY(vram__ecu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst,
                                            (CUdeviceptr)(uintptr_t)src, (size_t)n, stream),
                 "cuMemcpyDtoDAsync of %llu bytes", (unsigned long long)n);
    return 0;
}

/* ---- the helpers exec_cuda.c calls ------------------------------------------ */

int vram__cuk_pad2d(const vram__cuk *k, CUstream stream, int64_t n, int64_t c, int64_t h,
                    int64_t w, int64_t top, int64_t left, int64_t bottom, int64_t right,
                    const float *x, float *y)
{
    if (n < 0 || c < 0 || h < 0 || w < 0 || top < 0 || left < 0 || bottom < 0 || right < 0)
        return vram__fail(VRAM_EINVAL,
                          "zero padding of [%lld,%lld,%lld,%lld] by %lld,%lld,%lld,%lld: sizes "
                          "and pads must not be negative",
                          (long long)n, (long long)c, (long long)h, (long long)w,
                          (long long)top, (long long)left, (long long)bottom,
                          (long long)right);
    vram__cuk_pad2d_p p = {.h = h, .w = w, .oh = h + top + bottom, .ow = w + left + right,
                           .top = top, .left = left, .x = x, .y = y};
    p.total = n * c * p.oh * p.ow;
    return vram__cuk_launch(k, VRAM__CUK_K_pad2d, stream, p.total, &p);
}

int vram__cuk_broadcast2d(const vram__cuk *k, CUstream stream, int64_t m, int64_t n, int64_t rows,
                          int64_t cols, float beta, const float *c, float *y)
{
    if (m < 0 || n < 0 || (rows != 1 && rows != m) || (cols != 1 && cols != n))
        return vram__fail(VRAM_EINVAL, "broadcast of [%lld,%lld] to [%lld,%lld]: rows must be 1 "
                                       "or %lld, columns 1 or %lld",
                          (long long)rows, (long long)cols, (long long)m, (long long)n,
                          (long long)m, (long long)n);
    vram__cuk_broadcast2d_p p = {.m = m, .n = n, .rows = rows, .cols = cols, .beta = beta,
                                 .c = c, .y = y};
    return vram__cuk_launch(k, VRAM__CUK_K_broadcast2d, stream, m * n, &p);
}

int vram__cuk_epilogue(const vram__cuk *k, CUstream stream, int64_t n, int64_t c, int64_t spatial,
                       const float *x, const float *bias, const float *other, int relu, float *y)
{
    if (n < 0 || c < 1 || spatial < 0)
        return vram__fail(VRAM_EINVAL, "a convolution's epilogue over [%lld,%lld,%lld]: sizes "
                                       "must not be negative, channels at least 1",
                          (long long)n, (long long)c, (long long)spatial);
    vram__cuk_epilogue_p p = {.total = n * c * spatial, .c = c, .spatial = spatial,
                              .relu = relu != 0, .x = x, .bias = bias, .other = other, .y = y};
    return vram__cuk_launch(k, VRAM__CUK_K_epilogue, stream, p.total, &p);
}

int vram__cuk_dwconv(const vram__cuk *k, CUstream stream, const vram__conv2d *c, const float *x,
                     const float *w, const float *bias, float *y)
{
    int rc = vram__conv2d_check(c, "Conv");
    if (rc)
        return rc;
    if (c->group != c->c_in || c->group != c->c_out)
        return vram__fail(VRAM_EINVAL, "a depthwise convolution needs group == input channels "
                                       "== output channels, not %lld, %lld, %lld",
                          (long long)c->group, (long long)c->c_in, (long long)c->c_out);
    vram__cuk_dwconv_p p = {
        .total = c->n * c->c_out * c->oh * c->ow, .c = c->c_out, .h = c->h, .w = c->w,
        .kh = c->kh, .kw = c->kw, .oh = c->oh, .ow = c->ow, .stride_h = c->stride_h,
        .stride_w = c->stride_w, .dil_h = c->dil_h, .dil_w = c->dil_w, .pad_top = c->pad_top,
        .pad_left = c->pad_left, .x = x, .wt = w, .bias = bias, .y = y};
    int fits32 = p.total <= INT32_MAX && c->n * c->c_in * c->h * c->w <= INT32_MAX &&
                 c->h + c->pad_top + c->pad_bottom <= INT32_MAX / 4 &&
                 c->w + c->pad_left + c->pad_right <= INT32_MAX / 4;
    if (fits32 && c->kh == c->kw && (c->kh == 3 || c->kh == 5) &&
        c->stride_h == c->stride_w && (c->stride_h == 1 || c->stride_h == 2) && c->dil_h == 1 &&
        c->dil_w == 1)
        p.fixed = (int32_t)(c->kh * 10 + c->stride_h);
    return vram__cuk_launch(k, VRAM__CUK_K_dwconv, stream, p.total, &p);
}
