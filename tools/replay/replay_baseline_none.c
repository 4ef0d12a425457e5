/* tools/replay/replay_baseline_none.c - the driver baselines of trace replay in
 * a build without the CUDA toolkit: they say there is no GPU. */
#include <string.h>

#include "common/tool_util.h"
#include "replay.h"

int vram_replay_baseline_run(const vram_trace *trace, vram_replay_baseline which, unsigned runs,
                             vram_replay_result *out)
{
    (void)trace;
    (void)which;
    (void)runs;
    if (out)
        memset(out, 0, sizeof *out);
    return vram_set_error(VRAM_ENOSYS, "the %s baseline needs a GPU: vramkit was built without the "
                                   "CUDA toolkit",
                      vram_replay_baseline_name(which));
}
