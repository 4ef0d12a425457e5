/* src/video/source_opts.c - a source's options and their defaults
 * (vramkit/video.h). */
#include "base/internal.h"
#include "vramkit/video.h"

int vram_source_opts_init(vram_source_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_source_opts_init: opts is NULL");
    *o = (vram_source_opts){
        .size = sizeof *o,
        .owner = VRAM_OWNER_DEFAULT,
        .ring_frames = 4,
        .decoder_threads = 1,
        .reconnect_initial_s = 0.5,
        .reconnect_max_s = 8.0,
        .open_timeout_s = 5.0,
    };
    return 0;
}
