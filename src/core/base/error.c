/* src/core/base/error.c - error codes, their names and texts, and the per-thread
 * sentence describing the last failure: the one error channel every library
 * of vramkit reports through (they set it with vram_set_error). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vramkit/error.h"

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

int vram_set_errorv(int code, const char *fmt, va_list ap)
{
    /* Formatted apart first: the arguments may point into last_error. */
    char msg[VRAM_ERROR_MSG_CAP];
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    memcpy(last_error, msg, sizeof msg);
    return code;
}

int vram_set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vram_set_errorv(code, fmt, ap);
    va_end(ap);
    return code;
}
