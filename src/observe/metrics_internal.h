/* src/observe/metrics_internal.h - what the exposition (metrics.c) and the
 * HTTP server (http.c) share: checking the options' pools and GPU, and the
 * printing of a list of pools. */
#ifndef VRAM_OBSERVE_METRICS_INTERNAL_H
#define VRAM_OBSERVE_METRICS_INTERNAL_H

#include <stddef.h>

#include "vramkit/metrics.h"

/* VRAM_EINVAL naming the problem when a pool is NULL or two share a name. */
int vram__metrics_check_pools(vram_pool *const *pools, size_t n);

/* VRAM_EINVAL unless gpu is VRAM_GPU_ALL, VRAM_GPU_NONE or an NVML index
 * (a PCI bus id, when set, wins). */
int vram__metrics_check_gpu(int gpu, const char *pci_bus_id);

/* The exposition of `pools` (checked already), the GPUs `gpu` or the PCI bus
 * id (may be NULL) select, and the monitor (may be NULL). */
int vram__metrics_print(vram_pool *const *pools, size_t n, vram_monitor *monitor, int gpu,
                        const char *pci_bus_id, vram_write_fn write, void *ctx);

#endif
