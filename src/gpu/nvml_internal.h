/* src/gpu/nvml_internal.h - the light NVML entry points the measuring code
 * uses between steps (no process list, no /proc reads): a device handle by
 * PCI bus id and its device-wide used memory. Same loading and error model as
 * vramkit/nvml.h. */
#ifndef VRAM_GPU_NVML_INTERNAL_H
#define VRAM_GPU_NVML_INTERNAL_H

#include <stdint.h>

/* An NVML device handle (nvmlDevice_t), valid for the life of the process. */
typedef struct vram__nvml_device vram__nvml_device;

/* The device at a PCI bus id. VRAM_ENOSYS without NVML, VRAM_EBACKEND if NVML
 * has no device there. */
int vram__nvml_device_pci(const char *pci_bus_id, vram__nvml_device **out);

/* Device-wide used and total bytes now (nvmlDeviceGetMemoryInfo). */
int vram__nvml_memory(vram__nvml_device *dev, uint64_t *used, uint64_t *total);

#endif
