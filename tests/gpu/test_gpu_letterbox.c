/* tests/gpu/test_gpu_letterbox.c - vram_letterbox_frames_cuda on a GPU:
 * decoded pictures of four clips (tests/common/nv12_clips.h: 1920x1080,
 * 1280x720, 854x480 and 640x360; BT.601, BT.709, full range, BT.2020)
 * uploaded as pitched NV12 (cuMemAllocPitch, as NVDEC surfaces are) and
 * letterboxed in one launch of frames of different sizes, for BlazeFace's
 * 128x128 and 256x256 NHWC inputs and an NCHW BGR one; every image against
 * the kernel's computation on the CPU (vram__letterbox_nv12_host: at most
 * 1e-5, in practice 0) and against the CPU path (libswscale's RGB24, then
 * vram_letterbox_frame: at most 1/255 in the model's units), and the maps.
 * Then: a full batch of VRAM_LETTERBOX_CUDA_MAX frames, a stream of the
 * caller's, launches after the first allocating nothing (the device's free
 * memory unchanged), contexts of the caller's own (each loads the kernel;
 * one created after another was destroyed is not mistaken for it), and the
 * refusals that need a device: a host frame, no current context. Needs a
 * GPU; skips the clips' parts without ffmpeg. */
#include <cuda.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nv12_clips.h"
#include "video/nv12_internal.h"
#include "vramkit.h"

#define CK(call) assert_int_equal((call), CUDA_SUCCESS)
#define PICS (NV12_CLIPS * NV12_CLIP_FRAMES)

static vram_device *dev;
static vram_backend *backend;
static vram_pool *pool;
static nv12_pic pics[NV12_CLIPS][NV12_CLIP_FRAMES];

/* A picture in device memory, NV12 in one pitched allocation. */
typedef struct dev_pic {
    vram_frame f;
    CUdeviceptr base;
} dev_pic;
static dev_pic up[PICS];

static const nv12_pic *pic(int i)
{
    return &pics[i / NV12_CLIP_FRAMES][i % NV12_CLIP_FRAMES];
}

static dev_pic upload(const nv12_pic *p)
{
    dev_pic d = {.f = {.width = p->width, .height = p->height, .matrix = (int16_t)p->matrix,
                       .full_range = (int16_t)p->full_range}};
    const size_t row = ((size_t)p->width + 1) & ~(size_t)1;
    const size_t rows = (size_t)p->height + (size_t)(p->height + 1) / 2;
    size_t pitch;
    CK(cuMemAllocPitch(&d.base, &pitch, row, rows, 16));
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = p->luma,
                       .srcPitch = p->pitch, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                       .dstDevice = d.base, .dstPitch = pitch, .WidthInBytes = row,
                       .Height = rows};
    CK(cuMemcpy2D(&c));
    d.f.luma = d.base;
    d.f.chroma = d.base + pitch * (size_t)p->height;
    d.f.pitch = pitch;
    return d;
}

static int group_setup(void **state)
{
    (void)state;
    if (vram_device_open(0, NULL, &dev) || vram_device_bind(dev))
        return -1;
    if (host_pool_make(1ull << 30, &backend, &pool))
        return -1;
    int rc = nv12_clips_make();
    if (rc < 0)
        return -1;
    have_clips = rc == 0;
    if (have_clips) {
        nv12_load_all(pool, pics);
        for (int i = 0; i < PICS; i++)
            up[i] = upload(pic(i));
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; have_clips && i < PICS; i++)
        cuMemFree(up[i].base);
    for (int c = 0; c < NV12_CLIPS; c++)
        for (int i = 0; i < NV12_CLIP_FRAMES; i++)
            nv12_pic_free(&pics[c][i]);
    nv12_clips_remove();
    assert_int_equal(vram_pool_destroy(pool), 0);
    vram_backend_destroy(backend);
    return vram_device_close(dev);
}

static void launch_ok(const vram_letterbox *lb, vram_frame *const *frames, unsigned n,
                      CUdeviceptr dst, CUstream stream, vram_letterbox_map *maps)
{
    int rc = vram_letterbox_frames_cuda(lb, frames, n, (void *)(uintptr_t)dst,
                                        (vram_stream)stream, maps);
    if (rc)
        fail_msg("vram_letterbox_frames_cuda: %s: %s", vram_err_name(rc), vram_last_error());
}

/* Frame i of a launch's output (n images of lb's size) against the twin
 * and the CPU path for picture p: the largest differences. */
static void check_image(const vram_letterbox *lb, const float *got, const nv12_pic *p,
                        const vram_letterbox_map *map, double *vs_twin, double *vs_cpu)
{
    const size_t n = nv12_model_floats(lb);
    float *ref = malloc(n * sizeof *ref);
    assert_non_null(ref);
    vram_letterbox_map m;
    assert_int_equal(vram__letterbox_nv12_host(lb, p->luma, p->chroma, p->pitch, p->width,
                                               p->height, p->matrix, p->full_range, ref, &m),
                     0);
    assert_memory_equal(&m, map, sizeof m);
    double d = nv12_max_diff(got, ref, n);
    *vs_twin = d > *vs_twin ? d : *vs_twin;
    nv12_cpu_letterbox(lb, p, ref, &m);
    assert_memory_equal(&m, map, sizeof m);
    d = nv12_max_diff(got, ref, n);
    *vs_cpu = d > *vs_cpu ? d : *vs_cpu;
    free(ref);
}

/* Launch `n` frames (picture i % PICS as frame i) into lb on `stream`
 * and check every image. */
static void run_and_check(const vram_letterbox *lb, const char *name, unsigned n,
                          CUstream stream)
{
    vram_frame *frames[VRAM_LETTERBOX_CUDA_MAX];
    for (unsigned i = 0; i < n; i++)
        frames[i] = &up[i % PICS].f;
    const size_t per = nv12_model_floats(lb), bytes = per * n * sizeof(float);
    CUdeviceptr dst;
    CK(cuMemAlloc(&dst, bytes));
    CK(cuMemsetD8(dst, 0x7F, bytes)); /* 3.4e38 wherever nothing is written */
    vram_letterbox_map maps[VRAM_LETTERBOX_CUDA_MAX];
    launch_ok(lb, frames, n, dst, stream, maps);
    CK(cuStreamSynchronize(stream));
    float *got = malloc(bytes);
    assert_non_null(got);
    CK(cuMemcpyDtoH(got, dst, bytes));
    double vs_twin = 0, vs_cpu = 0;
    for (unsigned i = 0; i < n; i++)
        check_image(lb, got + per * i, pic((int)(i % PICS)), &maps[i], &vs_twin, &vs_cpu);
    print_message("%-17s %2u frames of 4 sizes: largest difference from the CPU twin %.3g, "
                  "from the CPU path %.3g\n",
                  name, n, vs_twin, vs_cpu);
    assert_true(vs_twin <= 1e-5);
    assert_true(vs_cpu <= 1.0 / 255.0);
    free(got);
    CK(cuMemFree(dst));
}

static void test_batch_of_sizes(void **state)
{
    (void)state;
    need_clips();
    for (int m = 0; m < NV12_MODELS; m++)
        run_and_check(&nv12_models[m], nv12_model_names[m], PICS, NULL);
}

static void test_full_batch(void **state)
{
    (void)state;
    need_clips();
    run_and_check(&nv12_models[0], nv12_model_names[0], VRAM_LETTERBOX_CUDA_MAX, NULL);
    run_and_check(&nv12_models[2], nv12_model_names[2], VRAM_LETTERBOX_CUDA_MAX, NULL);
}

static void test_own_stream(void **state)
{
    (void)state;
    need_clips();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    run_and_check(&nv12_models[1], nv12_model_names[1], PICS, s);
    CK(cuStreamDestroy(s));
}

/* After the first call in a context, launches take no device memory. */
static void test_no_allocation(void **state)
{
    (void)state;
    need_clips();
    vram_frame *frames[PICS];
    for (int i = 0; i < PICS; i++)
        frames[i] = &up[i].f;
    const vram_letterbox *lb = &nv12_models[1];
    CUdeviceptr dst;
    CK(cuMemAlloc(&dst, nv12_model_floats(lb) * PICS * sizeof(float)));
    launch_ok(lb, frames, PICS, dst, NULL, NULL); /* loaded and run once */
    CK(cuCtxSynchronize());
    size_t free0, free1, total;
    CK(cuMemGetInfo(&free0, &total));
    for (int k = 0; k < 20; k++)
        launch_ok(&nv12_models[k % NV12_MODELS], frames, 1 + (unsigned)k % PICS, dst, NULL,
                  NULL);
    CK(cuCtxSynchronize());
    CK(cuMemGetInfo(&free1, &total));
    print_message("free device memory before 20 launches %zu, after %zu\n", free0, free1);
    assert_int_equal(free0, free1);
    CK(cuMemFree(dst));
}

/* A new context on d, current on this thread (cuCtxCreate takes creation
 * parameters from CUDA 13 on). */
static CUresult create_context(CUcontext *ctx, CUdevice d)
{
#if CUDA_VERSION >= 13000
    CUresult r = cuCtxCreate(ctx, NULL, 0, d);
    if (r == CUDA_ERROR_INVALID_VALUE) {
        CUctxCreateParams none = {0};
        r = cuCtxCreate(ctx, &none, 0, d);
    }
    return r;
#else
    return cuCtxCreate(ctx, 0, d);
#endif
}

/* A context of the caller's: the kernel is loaded into it on its first
 * call; a context made after one was destroyed (perhaps at the same
 * address) gets its own. */
static void test_other_contexts(void **state)
{
    (void)state;
    need_clips();
    CUdevice d;
    CK(cuDeviceGet(&d, 0));
    for (int round = 0; round < 2; round++) {
        CUcontext ctx;
        CK(create_context(&ctx, d));
        /* cuCtxCreate made it current; its own copy of picture 0. */
        dev_pic own = upload(pic(0));
        vram_frame *frames[1] = {&own.f};
        const vram_letterbox *lb = &nv12_models[0];
        const size_t n = nv12_model_floats(lb);
        CUdeviceptr dst;
        CK(cuMemAlloc(&dst, n * sizeof(float)));
        vram_letterbox_map map;
        launch_ok(lb, frames, 1, dst, NULL, &map);
        CK(cuCtxSynchronize());
        float *got = malloc(n * sizeof *got);
        assert_non_null(got);
        CK(cuMemcpyDtoH(got, dst, n * sizeof(float)));
        double vs_twin = 0, vs_cpu = 0;
        check_image(lb, got, pic(0), &map, &vs_twin, &vs_cpu);
        assert_true(vs_twin <= 1e-5);
        free(got);
        CK(cuMemFree(dst));
        CK(cuMemFree(own.base));
        CK(cuCtxDestroy(ctx));
        assert_int_equal(vram_device_bind(dev), 0);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    vram_letterbox lb = nv12_models[0];
    CUdeviceptr dst;
    CK(cuMemAlloc(&dst, nv12_model_floats(&lb) * sizeof(float)));
    uint8_t host[64 * 96];
    vram_frame f = {.rgb = host, .width = 64, .height = 64, .stride = 192};
    vram_frame *frames[1] = {&f};
    assert_int_equal(vram_letterbox_frames_cuda(&lb, frames, 1, (void *)(uintptr_t)dst, NULL,
                                                NULL),
                     VRAM_EINVAL);
    assert_contains(vram_last_error(), "frames[0] is not in device memory");
    if (have_clips) {
        frames[0] = &up[0].f;
        CK(cuCtxSetCurrent(NULL));
        assert_int_equal(vram_letterbox_frames_cuda(&lb, frames, 1, (void *)(uintptr_t)dst,
                                                    NULL, NULL),
                         VRAM_EINVAL);
        assert_contains(vram_last_error(), "no CUDA context is current");
        assert_int_equal(vram_device_bind(dev), 0);
    }
    CK(cuMemFree(dst));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_of_sizes),
        cmocka_unit_test(test_full_batch),
        cmocka_unit_test(test_own_stream),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_other_contexts),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
