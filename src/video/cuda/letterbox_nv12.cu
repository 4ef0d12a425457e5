/* src/video/cuda/letterbox_nv12.cu - the NV12 letterbox kernel: a batch of
 * NVDEC frames (NV12 in device memory) straight into a model's float input,
 * one thread per model pixel and frame (grid z: the frame). The per-pixel
 * computation is nv12_sample.h's, the very code the CPU twin runs, so the
 * two agree to the bit. Compiled by nvcc into a fatbin that the library
 * embeds and loads with the driver API (letterbox_cuda.c); nothing here
 * links the CUDA runtime.
 *
 * The parameter block comes by value (__grid_constant__: read in place,
 * frame blockIdx.z's entry included, never copied per thread). */
#include <stddef.h>
#include <stdint.h>

#include "video/nv12_sample.h"

extern "C" __global__ void __launch_bounds__(VRAM__NV12_BLOCK_X * VRAM__NV12_BLOCK_Y)
    vram_letterbox_nv12(const __grid_constant__ vram__nv12_lb_p p)
{
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    const unsigned i = blockIdx.z;
    if (x >= p.width || y >= p.height || i >= (unsigned)p.n)
        return;
    const vram__nv12_frame_p *f = &p.f[i];
    float v[3];
    vram__nv12_lb_pixel(&p, f, (const uint8_t *)(uintptr_t)f->luma,
                        (const uint8_t *)(uintptr_t)f->chroma, x, y, v);
    float *o = (float *)(uintptr_t)p.dst + (size_t)i * (size_t)p.width * (size_t)p.height * 3u;
    vram__nv12_lb_store(&p, o, x, y, v);
}
