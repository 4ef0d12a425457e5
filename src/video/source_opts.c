/* src/video/source_opts.c - a source's options and their defaults, and
 * the names of the ways it decodes (vramkit/video.h). */
#include <string.h>

#include "base/internal.h"
#include "vramkit/video.h"

static const char *const decode_names[] = {"cpu", "nvdec", "auto"};

const char *vram_decode_name(vram_decode d)
{
    return (unsigned)d <= VRAM_DECODE_AUTO ? decode_names[d] : NULL;
}

int vram_decode_parse(const char *name, vram_decode *out)
{
    for (unsigned i = 0; name && out && i <= VRAM_DECODE_AUTO; i++)
        if (!strcmp(name, decode_names[i])) {
            *out = (vram_decode)i;
            return 0;
        }
    return vram__fail(VRAM_EINVAL, "decode \"%s\" is not cpu, nvdec or auto",
                      name ? name : "(null)");
}

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
