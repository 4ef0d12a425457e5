/* src/video/nv12_rgb.c - an NV12 picture in host memory as packed RGB24
 * (vram_nv12_to_rgb, vramkit/video.h), converted pixel by pixel with the
 * kernel's arithmetic (yuv_rgb.h), which is libswscale's for the CPU path:
 * snapshots of device frames look as the CPU path's frames do. */
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "nv12_sample.h"
#include "vramkit/video.h"

int vram_nv12_to_rgb(const uint8_t *luma, const uint8_t *chroma, size_t pitch, int width,
                     int height, int matrix, int full_range, uint8_t *rgb, size_t stride)
{
    if (!luma || !chroma || !rgb)
        return vram__fail(VRAM_EINVAL, "vram_nv12_to_rgb: %s is NULL",
                          !luma ? "luma" : !chroma ? "chroma" : "rgb");
    if (width <= 0 || height <= 0)
        return vram__fail(VRAM_EINVAL, "vram_nv12_to_rgb: a %dx%d picture", width, height);
    /* The last column's U, V pair ends at the width rounded up to even. */
    const size_t row = (size_t)width + ((size_t)width & 1u);
    if (pitch < row)
        return vram__fail(VRAM_EINVAL,
                          "vram_nv12_to_rgb: a pitch of %zu bytes for a width of %d (at least "
                          "%zu)",
                          pitch, width, row);
    if (stride < (size_t)width * 3u)
        return vram__fail(VRAM_EINVAL,
                          "vram_nv12_to_rgb: a stride of %zu bytes is less than 3 x width %d",
                          stride, width);
    const vram__yuv_coef c = vram__yuv_coef_of(matrix, full_range);
    for (int y = 0; y < height; y++) {
        uint8_t *out = rgb + (size_t)y * stride;
        for (int x = 0; x < width; x++)
            vram__nv12_rgb_at(&c, luma, chroma, pitch, x, y, out + 3 * (size_t)x);
    }
    return 0;
}
