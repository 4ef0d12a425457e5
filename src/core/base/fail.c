/* src/core/base/fail.c - the internal shorthands for recording failures
 * (internal.h): every library of vramkit compiles them in, and they reach
 * the one per-thread sentence through the public vram_set_error, so a
 * failure in any layer reads the same in vram_last_error(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

int vram__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vram_set_errorv(code, fmt, ap);
    va_end(ap);
    return code;
}

int vram__fail_prefix(int code, const char *fmt, ...)
{
    char prefix[sizeof(((vram__saved_error *)0)->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    return vram_set_error(code, "%s%s", prefix, vram_last_error());
}

void vram__error_save(vram__saved_error *s)
{
    snprintf(s->msg, sizeof s->msg, "%s", vram_last_error());
}

int vram__error_restore(const vram__saved_error *s, int code)
{
    return vram_set_error(code, "%s", s->msg);
}
