/* src/core/base/writef.h - formatted text through a vram_write_fn, for the
 * libraries' printers: lines are formatted into a buffer on the stack (512
 * bytes; longer ones are cut) and handed to the writer, and the first error
 * is kept so that a printer can write on and check once at the end.
 *
 *   vram__writer w = {write, ctx, 0};
 *   vram__writef(&w, "%s %llu\n", name, n);
 *   return w.rc;
 */
#ifndef VRAM_BASE_WRITEF_H
#define VRAM_BASE_WRITEF_H

#include "base/internal.h"
#include "vramkit/types.h"

typedef struct vram__writer {
    vram_write_fn write;
    void *ctx;
    int rc; /* the first error of write; nothing is written after it */
} vram__writer;

void vram__writef(vram__writer *w, const char *fmt, ...) VRAM__PRINTF(2, 3);

#endif
