/* src/video/nv12_internal.h - the NV12 letterbox's host side, shared by
 * the launch (cuda/letterbox_cuda.c, or nogpu/letterbox_cuda_none.c in a
 * build without CUDA) and the tests: checking a launch's arguments into
 * its parameter block, and the kernel's computation run on the CPU. */
#ifndef VRAM_VIDEO_NV12_INTERNAL_H
#define VRAM_VIDEO_NV12_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nv12_sample.h"
#include "vramkit/video.h"

/* Check vram_letterbox_frames_cuda's arguments (`what` starts the
 * sentences) and fill *p for them; maps (may be NULL) gets each frame's
 * placement once every argument is good. VRAM_EINVAL naming the bad one:
 * a NULL lb, frames, frames[i] or dst, n outside 1..VRAM_LETTERBOX_CUDA_MAX,
 * a model size outside 1..4096 or a bad layout, a host frame (luma or
 * chroma 0), a frame size that is not positive, a pitch below the
 * (even-rounded) width or above 4 GiB. Touches no device. */
int vram__nv12_lb_prepare(const char *what, const vram_letterbox *lb, vram_frame *const *frames,
                          unsigned n, const void *dst, vram__nv12_lb_p *p,
                          vram_letterbox_map *maps);

/* The kernel's complete computation on the CPU for one NV12 picture in
 * host memory (luma: height rows, chroma: (height + 1) / 2 rows of U, V
 * pairs, both `pitch` bytes apart), matrix and range as vram_frame has
 * them, into dst (width x height x 3 floats of the model input, host
 * memory), as vram_letterbox_frame documents; map may be NULL. VRAM_EINVAL
 * for NULL or inconsistent arguments, as vram__nv12_lb_prepare. */
int vram__letterbox_nv12_host(const vram_letterbox *lb, const uint8_t *luma,
                              const uint8_t *chroma, size_t pitch, int width, int height,
                              int matrix, int full_range, float *dst, vram_letterbox_map *map);

/* 1 when this build has the kernel (the CUDA toolkit was found), else 0
 * (vram_letterbox_frames_cuda is then VRAM_ENOSYS). For tests. */
int vram__letterbox_cuda_built(void);

#endif
