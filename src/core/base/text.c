/* src/core/base/text.c - what people write and read, for programs built on
 * vramkit: byte counts in the options' size syntax and as the library
 * prints them (vramkit/config.h), and which GPU an instrument reads
 * (vramkit/nvml.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "vramkit/config.h"
#include "vramkit/nvml.h"

int vram_size_parse(const char *text, uint64_t *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_size_parse: out is NULL");
    return vram__parse_size(text, out);
}

char *vram_size_format(char *buf, size_t cap, uint64_t bytes)
{
    return vram__fmt_bytes(buf, cap, bytes);
}

/* dddd:bb:dd.f, hex digits: what cuDeviceGetPCIBusId and NVML write. */
static int looks_like_pci(const char *t)
{
    static const char form[] = "xxxx:xx:xx.x";
    size_t n = strlen(t);
    /* NVML also writes an 8-digit domain (00000000:19:00.0). */
    size_t skip = n == sizeof form - 1 + 4 ? 4 : 0;
    if (n != sizeof form - 1 + skip)
        return 0;
    for (size_t i = 0; i < skip; i++)
        if (!isxdigit((unsigned char)t[i]))
            return 0;
    for (size_t i = 0; form[i]; i++) {
        char c = t[skip + i];
        if (form[i] == 'x' ? !isxdigit((unsigned char)c) : c != form[i])
            return 0;
    }
    return 1;
}

int vram_gpu_parse(const char *text, int *gpu, const char **pci_bus_id)
{
    if (pci_bus_id)
        *pci_bus_id = NULL;
    if (!text || !gpu)
        return vram__fail(VRAM_EINVAL, "vram_gpu_parse: text and gpu are required");
    static const struct {
        const char *name;
        int pick;
    } words[] = {{"none", VRAM_GPU_NONE}, {"all", VRAM_GPU_ALL}, {"own", VRAM_GPU_OWN}};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(words); i++) {
        if (strcasecmp(text, words[i].name) == 0) {
            *gpu = words[i].pick;
            return 0;
        }
    }
    char *end;
    long v = strtol(text, &end, 10);
    if (*text && isdigit((unsigned char)*text) && !*end && v >= 0 && v < 4096) {
        *gpu = (int)v;
        return 0;
    }
    if (looks_like_pci(text)) {
        if (!pci_bus_id)
            return vram__fail(VRAM_EINVAL, "GPU \"%s\": a PCI bus id is not taken here", text);
        *gpu = VRAM_GPU_NONE;
        *pci_bus_id = text;
        return 0;
    }
    return vram__fail(VRAM_EINVAL, "GPU \"%s\" is none of: none, all, own, an NVML index (0, 1, "
                                   "...) or a PCI bus id (0000:19:00.0)", text);
}
