/* src/base/error.c - error codes, their names and texts, and the per-thread
 * sentence describing the last failure. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define VRAM_ERROR_MSG_CAP 1024

static _Thread_local char last_error[VRAM_ERROR_MSG_CAP];

const char *vram_strerror(int code)
{
    switch (code) {
#define VRAM_ERROR_TEXT(name, value, text)                                     \
    case (value):                                                              \
        return text;
        VRAM_ERRORS(VRAM_ERROR_TEXT)
#undef VRAM_ERROR_TEXT
    default:
        return "unknown error";
    }
}

const char *vram_err_name(int code)
{
    switch (code) {
#define VRAM_ERROR_NAME(name, value, text)                                     \
    case (value):                                                              \
        return "VRAM_" #name;
        VRAM_ERRORS(VRAM_ERROR_NAME)
#undef VRAM_ERROR_NAME
    default:
        return "VRAM_E?";
    }
}

const char *vram_last_error(void) { return last_error; }

void vram_clear_error(void) { last_error[0] = '\0'; }

int vram__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

int vram__fail_prefix(int code, const char *fmt, ...)
{
    char prefix[VRAM_ERROR_MSG_CAP];
    char old[VRAM_ERROR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strnlen(prefix, sizeof prefix - 1);
    memcpy(last_error, prefix, n);
    size_t room = sizeof last_error - 1 - n;
    size_t m = strnlen(old, room);
    memcpy(last_error + n, old, m);
    last_error[n + m] = '\0';
    return code;
}

void vram__error_save(vram__saved_error *s)
{
    _Static_assert(sizeof s->msg == VRAM_ERROR_MSG_CAP, "a saved error holds a whole sentence");
    snprintf(s->msg, sizeof s->msg, "%s", last_error);
}

int vram__error_restore(const vram__saved_error *s, int code) { return vram__fail(code, "%s", s->msg); }
