/* vramkit/log.h - where the library's log lines go. By default lines at or
 * above the VRAM_LOG_LEVEL option go to standard error, prefixed "vramkit:".
 *
 * Errors and ownership: nothing here fails or allocates; a line is
 * formatted into a buffer on the logging thread's stack and handed to the
 * handler for that call only. The level is read from the configuration at
 * each line, so vram_config_set("log_level", ...) applies at once. */
#ifndef VRAMKIT_LOG_H
#define VRAMKIT_LOG_H

#include "vramkit/api.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_log_level {
    VRAM_LOG_ERROR = 0,
    VRAM_LOG_WARN = 1,
    VRAM_LOG_INFO = 2,
    VRAM_LOG_DEBUG = 3,
} vram_log_level;

/* Receives each log line (without a trailing newline; valid for the call
 * only). It runs on the thread that logs, sometimes while the library holds
 * a lock (a pool's, when a trace fails or a pool is destroyed; a monitor's,
 * for its alerts): it must be quick and must call no pool or monitor. */
typedef void (*vram_log_fn)(void *ctx, vram_log_level level, const char *line);

/* Send log lines to `fn` instead of standard error; NULL restores the default.
 * Lines below the configured level are not produced at all. Set it at start-up:
 * changing it while other threads log is not synchronised. */
VRAM_API void vram_log_set_handler(vram_log_fn fn, void *ctx);

/* The name of a level ("warn"; "?" for another value): a static string. */
VRAM_API const char *vram_log_level_name(vram_log_level level);

/* Whether lines at `level` are produced (VRAM_LOG_LEVEL or more severe). */
VRAM_API int vram_log_enabled(vram_log_level level);

/* Log one line (formatted, at most 1023 bytes, no trailing newline needed)
 * through the handler, if `level` is enabled. For code built on vramkit, so
 * that its lines go where the library's go. */
VRAM_API void vram_log(vram_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
VRAM_API void vram_logv(vram_log_level level, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
