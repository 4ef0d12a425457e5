/* src/video/frame_copy.c - an NVDEC frame's pixels copied to host memory
 * (vram_frame_copy_nv12, vramkit/video.h): one two-dimensional copy of
 * its luma and chroma rows through the driver vramkit loaded. */
#include <string.h>

#include <ffnvcodec/dynlink_cuda.h>

#include "base/internal.h"
#include "vramkit/device.h"
#include "vramkit/video.h"

int vram_frame_copy_nv12(const vram_frame *f, uint8_t *dst, size_t dst_pitch)
{
    if (!f || !dst)
        return vram__fail(VRAM_EINVAL, "vram_frame_copy_nv12: %s is NULL", !f ? "frame" : "dst");
    if (!f->luma || !f->chroma || f->width <= 0 || f->height <= 0)
        return vram__fail(VRAM_EINVAL, "vram_frame_copy_nv12: frame %lld is not in device memory",
                          (long long)f->index);
    if (dst_pitch < (size_t)f->width || f->pitch < (size_t)f->width)
        return vram__fail(VRAM_EINVAL,
                          "vram_frame_copy_nv12: a pitch of %zu bytes (the frame's %zu) is less "
                          "than its width %d",
                          dst_pitch, f->pitch, f->width);
    tcuMemcpy2D_v2 *copy = NULL;
    int rc = vram_cuda_proc("cuMemcpy2D", 3020, (void **)&copy);
    if (rc)
        return rc;
    size_t rows[2] = {(size_t)f->height, ((size_t)f->height + 1) / 2};
    CUdeviceptr src[2] = {(CUdeviceptr)f->luma, (CUdeviceptr)f->chroma};
    uint8_t *to = dst;
    for (int plane = 0; plane < 2; plane++) {
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = src[plane];
        c.srcPitch = f->pitch;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = to;
        c.dstPitch = dst_pitch;
        c.WidthInBytes = (size_t)f->width;
        c.Height = rows[plane];
        CUresult r = copy(&c);
        if (r != CUDA_SUCCESS)
            return vram_cuda_fail((int)r, "cuMemcpy2D of frame %lld's %s plane",
                                  (long long)f->index, plane ? "chroma" : "luma");
        to += dst_pitch * rows[plane];
    }
    return 0;
}
