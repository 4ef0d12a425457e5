/* src/core/base/fail.c - the internal shorthands for recording failures
 * (internal.h): every library of vramkit compiles them in, and they reach
 * the one per-thread sentence through the public vram_set_error, so a
 * failure in any layer reads the same in vram_last_error(). Also taking a
 * caller's options by their size. */
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

int vram__opts_take(void *dst, const void *src, size_t this_size, const char *what)
{
    uint32_t size;
    memcpy(&size, src, sizeof size);
    if (!size)
        size = (uint32_t)this_size;
    if (size < sizeof size || size > this_size)
        return vram__fail(VRAM_EINVAL, "%s: size %u is that of no version of the struct (this "
                                       "library's is %zu: initialise it with its *_init, or set "
                                       "size to sizeof)", what, size, this_size);
    memcpy(dst, src, size);
    uint32_t mine = (uint32_t)this_size;
    memcpy(dst, &mine, sizeof mine);
    return 0;
}
