/* src/core/nogpu/device_none.c - the device API in a build without the CUDA
 * toolkit: every entry point exists and says why there is no GPU. */
#include <stdarg.h>
#include <stdio.h>

#include "base/internal.h"
#include "vramkit/device.h"

static int none(void)
{
    return vram__fail(VRAM_ENOSYS, "no GPU support: vramkit was built without the CUDA toolkit");
}

int vram_device_count(int *count)
{
    if (count)
        *count = 0;
    return none();
}

int vram_device_open(int index, const vram_device_opts *opts, vram_device **out)
{
    (void)index;
    (void)opts;
    if (out)
        *out = NULL;
    return none();
}

int vram_device_close(vram_device *dev) { return dev ? none() : 0; }
int vram_device_bind(vram_device *dev) { (void)dev; return none(); }
int vram_device_info_get(vram_device *dev, vram_device_info *out)
{
    (void)dev;
    (void)out;
    return none();
}
int vram_device_stream_acquire(vram_device *dev, vram_priority priority, vram_stream *out)
{
    (void)dev;
    (void)priority;
    (void)out;
    return none();
}
int vram_device_stream_release(vram_device *dev, vram_stream stream)
{
    (void)dev;
    (void)stream;
    return none();
}
int vram_device_synchronize(vram_device *dev) { (void)dev; return none(); }
int vram_device_memory(vram_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)dev;
    (void)free_bytes;
    (void)total_bytes;
    return none();
}
void *vram_device_context(vram_device *dev) { (void)dev; return NULL; }
unsigned vram_device_contexts(void) { return 0; }

int vram_cuda_proc(const char *symbol, int cuda_version, void **fn)
{
    (void)symbol;
    (void)cuda_version;
    if (fn)
        *fn = NULL;
    return none();
}

int vram_cuda_fail(int cuda_result, const char *what, ...)
{
    char head[192];
    va_list ap;
    va_start(ap, what);
    vsnprintf(head, sizeof head, what, ap);
    va_end(ap);
    /* 2 is CUDA_ERROR_OUT_OF_MEMORY; without the toolkit there is no name for it. */
    return vram__fail(cuda_result == 2 ? VRAM_ENOMEM : VRAM_EBACKEND,
                      "%s failed: CUDA error %d (no GPU support in this build)", head, cuda_result);
}
