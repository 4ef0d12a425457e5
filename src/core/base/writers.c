/* src/core/base/writers.c - the two writers (vram_write_fn, vramkit/types.h)
 * the library offers: one to a stdio FILE, and one collecting the text in
 * memory (vram_buffer) for snapshots, statistics, pages and expositions
 * built before they are handed to a slower writer. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vramkit/types.h"

int vram_write_buffer(void *ctx, const char *data, size_t len)
{
    vram_buffer *b = ctx;
    if (!b)
        return vram__fail(VRAM_EINVAL, "vram_write_buffer: no buffer");
    if (len >= SIZE_MAX / 2 - b->len)
        return vram__fail(VRAM_EHOSTMEM, "a text of %zu + %zu bytes is too large to keep", b->len,
                          len);
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return vram__fail(VRAM_EHOSTMEM, "out of host memory growing a text to %zu bytes", cap);
        b->data = p;
        b->cap = cap;
    }
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

void vram_buffer_free(vram_buffer *b)
{
    if (!b)
        return;
    free(b->data);
    *b = (vram_buffer){0};
}

int vram_write_stdio(void *file, const char *data, size_t len)
{
    if (len && fwrite(data, 1, len, (FILE *)file) != len)
        return vram__fail(VRAM_EIO, "write failed: %s", strerror(errno));
    return 0;
}
