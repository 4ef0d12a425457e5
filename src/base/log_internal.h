/* src/base/log_internal.h - logging calls for the library's own files. */
#ifndef VRAM_BASE_LOG_INTERNAL_H
#define VRAM_BASE_LOG_INTERNAL_H

#include "internal.h"
#include "vramkit/log.h"

int vram__log_enabled(vram_log_level level);
void vram__log(vram_log_level level, const char *fmt, ...) VRAM__PRINTF(2, 3);

#endif
