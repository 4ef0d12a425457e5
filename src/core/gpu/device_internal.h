/* src/core/gpu/device_internal.h - what the GPU backends need from a device: the
 * shared context made current, pooled events, and counting users so the
 * device cannot close under them. */
#ifndef VRAM_GPU_DEVICE_INTERNAL_H
#define VRAM_GPU_DEVICE_INTERNAL_H

#include "cu.h"
#include "vramkit/device.h"

/* Make the device's context current in this thread if it is not. */
int vram__device_enter(vram_device *dev);

CUdevice vram__device_handle(const vram_device *dev);
int vram__device_index(const vram_device *dev);

/* A backend or pool starts or stops using the device. */
void vram__device_user_add(vram_device *dev);
void vram__device_user_remove(vram_device *dev);

/* Events without timing, from a pool the device keeps (cuEventCreate only
 * when the pool is empty). */
int vram__device_event_get(vram_device *dev, CUevent *out);
void vram__device_event_put(vram_device *dev, CUevent ev);

#endif
