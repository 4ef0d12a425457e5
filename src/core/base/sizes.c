/* src/core/base/sizes.c - byte counts as people write and read them, for
 * programs built on vramkit (vramkit/config.h): the options' size syntax
 * and the library's way of printing sizes. */
#include "internal.h"
#include "vramkit/config.h"

int vram_size_parse(const char *text, uint64_t *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_size_parse: out is NULL");
    return vram__parse_size(text, out);
}

char *vram_size_format(char *buf, size_t cap, uint64_t bytes)
{
    return vram__fmt_bytes(buf, cap, bytes);
}
