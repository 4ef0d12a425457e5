/* src/core/nogpu/nvml_none.c - the NVML API (vramkit/nvml.h) in a build without
 * the CUDA toolkit: every entry point exists, checks its arguments as the
 * real one does, and says why there are no figures. */
#include <string.h>

#include "base/internal.h"
#include "vramkit/nvml.h"

static int none(void)
{
    return vram__fail(VRAM_ENOSYS,
                      "NVML is not available: vramkit was built without CUDA (no GPU support)");
}

int vram_gpu_count(int *count)
{
    if (!count)
        return vram__fail(VRAM_EINVAL, "vram_gpu_count: count is NULL");
    *count = 0;
    return none();
}

int vram_gpu_memory_read(int index, vram_gpu_memory *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read: out is NULL");
    memset(out, 0, sizeof *out);
    out->index = -1;
    if (index < 0)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read: GPU index %d is negative", index);
    return none();
}

int vram_gpu_memory_read_pci(const char *pci_bus_id, vram_gpu_memory *out)
{
    if (!out || !pci_bus_id)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read_pci: pci_bus_id and out are required");
    memset(out, 0, sizeof *out);
    out->index = -1;
    return none();
}

int vram_gpu_memory_used(const char *pci_bus_id, uint64_t *used, uint64_t *total)
{
    if (!pci_bus_id || !used)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_used: pci_bus_id and used are required");
    *used = 0;
    if (total)
        *total = 0;
    return none();
}
