/* src/video/nogpu/letterbox_cuda_none.c - vram_letterbox_frames_cuda in a
 * build without the CUDA toolkit: the arguments are checked as in every
 * build, then there is no kernel, and the sentence says why. */
#include "base/internal.h"
#include "video/nv12_internal.h"

int vram_letterbox_frames_cuda(const vram_letterbox *lb, vram_frame *const *frames, unsigned n,
                               void *dst, vram_stream stream, vram_letterbox_map *maps)
{
    static const char what[] = "vram_letterbox_frames_cuda";
    vram__nv12_lb_p p;
    (void)maps; /* nothing is placed */
    int rc = vram__nv12_lb_prepare(what, lb, frames, n, dst, &p, NULL);
    if (rc)
        return rc;
    return vram__fail(VRAM_ENOSYS,
                      "%s: this build of vramkit has no CUDA (the toolkit was not found when it "
                      "was built)",
                      what);
}

int vram__letterbox_cuda_built(void)
{
    return 0;
}
