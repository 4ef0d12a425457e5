/* src/core/nogpu/torch_none.c - the PyTorch allocator (vramkit/torch.h) in a build
 * without the CUDA toolkit: the functions PyTorch loads exist, every
 * allocation fails and says why, and the statistics say there is no pool. */
#include <stdio.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "vramkit/torch.h"

#define NO_GPU "no GPU support: vramkit was built without the CUDA toolkit"

void *vram_torch_malloc(ssize_t size, int device, void *stream)
{
    (void)stream;
    if (size == 0)
        return NULL;
    if (device < 0 || device >= VRAM_TORCH_DEVICES)
        vram__fail(VRAM_EINVAL, "PyTorch allocator: device %d is out of range (0..%d)", device,
                   VRAM_TORCH_DEVICES - 1);
    else
        vram__fail(VRAM_ENOSYS, "PyTorch allocator on device %d: " NO_GPU, device);
    vram_log(VRAM_LOG_ERROR, "PyTorch's allocation of %zd bytes on device %d failed: %s", size,
              device, vram_last_error());
    return NULL;
}

void vram_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    (void)stream;
    if (!ptr)
        return;
    vram__fail(VRAM_ENOTALLOC, "PyTorch freed %p on device %d, where vramkit has no pool", ptr,
               device);
    vram_log(VRAM_LOG_ERROR, "%s", vram_last_error());
}

int vram_torch_stats_json(int device, char *buf, size_t cap)
{
    if (!buf && cap)
        return vram__fail(VRAM_EINVAL, "vram_torch_stats_json: buf is NULL but cap is %zu", cap);
    if (cap)
        buf[0] = '\0';
    if (device < 0 || device >= VRAM_TORCH_DEVICES)
        return vram__fail(VRAM_EINVAL, "vram_torch_stats_json: device %d is out of range (0..%d)",
                          device, VRAM_TORCH_DEVICES - 1);
    char text[256];
    int n = snprintf(text, sizeof text,
                     "{\"device\":%d,\"ready\":false,\"error\":\"PyTorch allocator on device %d: "
                     NO_GPU "\"}",
                     device, device);
    size_t need = (size_t)n + 1;
    if (need > cap)
        return vram__fail(VRAM_ELIMIT,
                          "the statistics of device %d need a buffer of %zu bytes; it has %zu",
                          device, need, cap);
    snprintf(buf, cap, "%s", text);
    return 0;
}

int vram_torch_reset_peaks(int device)
{
    return vram__fail(VRAM_EINVAL, "no vramkit pool on device %d: " NO_GPU, device);
}

vram_pool *vram_torch_pool(int device)
{
    (void)device;
    return NULL;
}
