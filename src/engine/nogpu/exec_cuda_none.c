/* src/engine/nogpu/exec_cuda_none.c - the cuda executor in a build without the CUDA
 * toolkit: there is none, and the engine says why. */
#include "base/internal.h"
#include "engine/engine_internal.h"

const vram__exec_ops *vram__exec_cuda_ops(void)
{
    vram__fail(VRAM_ENOSYS, "this build of vramkit has no CUDA (the toolkit was not found)");
    return NULL;
}
