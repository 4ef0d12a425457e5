/* src/core/base/log.c - the library's log: a level from the configuration and a
 * handler (standard error unless the application installs its own). Every
 * library of vramkit logs through vram_log, so lines go to one place. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"
#include "vramkit/config.h"
#include "vramkit/log.h"

static vram_log_fn log_handler;
static void *log_ctx;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

const char *vram_log_level_name(vram_log_level level)
{
    if ((unsigned)level < VRAM__ARRAY_LEN(level_names))
        return level_names[level];
    return "?";
}

void vram_log_set_handler(vram_log_fn fn, void *ctx)
{
    log_handler = fn;
    log_ctx = ctx;
}

int vram_log_enabled(vram_log_level level)
{
    return (int)level <= vram_config_get()->log_level;
}

void vram_logv(vram_log_level level, const char *fmt, va_list ap)
{
    if (!vram_log_enabled(level))
        return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt ? fmt : "", ap);
    if (log_handler)
        log_handler(log_ctx, level, line);
    else
        fprintf(stderr, "vramkit: %s: %s\n", vram_log_level_name(level), line);
}

void vram_log(vram_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vram_logv(level, fmt, ap);
    va_end(ap);
}
