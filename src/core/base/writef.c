/* src/core/base/writef.c - formatted text through a vram_write_fn (see
 * writef.h). */
#include <stdarg.h>
#include <stdio.h>

#include "base/writef.h"

void vram__writef(vram__writer *w, const char *fmt, ...)
{
    if (w->rc)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    w->rc = w->write(w->ctx, line, (size_t)n);
}
