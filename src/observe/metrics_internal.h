/* src/observe/metrics_internal.h - what the exposition (metrics.c) and the
 * HTTP server (http.c) share: the printing of a list of pools. (The memory
 * buffer they both write into is prom.h's.) */
#ifndef VRAM_OBSERVE_METRICS_INTERNAL_H
#define VRAM_OBSERVE_METRICS_INTERNAL_H

#include <stddef.h>

#include "vramkit/metrics.h"

/* VRAM_EINVAL naming the problem when a pool is NULL or two share a name. */
int vram__metrics_check_pools(vram_pool *const *pools, size_t n);

/* The exposition of `pools` (checked already), the GPUs `gpu` selects and
 * the monitor (may be NULL). */
int vram__metrics_print(vram_pool *const *pools, size_t n, vram_monitor *monitor, int gpu,
                        vram_write_fn write, void *ctx);

#endif
