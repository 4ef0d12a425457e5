/* tools/ctxcost/ctxcost_none.c - the context-cost API (vramkit/ctxcost.h) in a
 * build without the CUDA toolkit: there is nothing to measure on, and no
 * result to print, so both entry points say why. */
#include <string.h>

#include "common/tool_util.h"
#include "ctxcost.h"

static int none(void)
{
    return vram_set_error(VRAM_ENOSYS, "no GPU support: vramkit was built without CUDA, so context "
                                   "costs cannot be measured");
}

int vram_ctxcost_measure(const vram_ctxcost_opts *opts, vram_ctxcost_result *out)
{
    (void)opts;
    if (!out)
        return vram_set_error(VRAM_EINVAL, "vram_ctxcost_measure: out is NULL");
    memset(out, 0, sizeof *out);
    return none();
}

int vram_ctxcost_print(const vram_ctxcost_result *r, vram_write_fn write, void *ctx, unsigned flags)
{
    (void)flags;
    (void)ctx;
    if (!r || !write)
        return vram_set_error(VRAM_EINVAL, "vram_ctxcost_print: result and writer are required");
    return none();
}
