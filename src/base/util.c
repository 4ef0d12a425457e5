/* src/base/util.c - small helpers: byte formatting and parsing, the monotonic
 * clock, checked host allocation, and the stdio writer. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "vramkit/types.h"

char *vram__fmt_bytes(char *buf, size_t cap, uint64_t bytes)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < VRAM__ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, v < 10.0 ? "%.2f %s" : "%.1f %s", v, units[u]);
    return buf;
}

int vram__parse_size(const char *text, uint64_t *out)
{
    if (!text || !*text)
        return vram__fail(VRAM_EINVAL, "empty size");
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+')
        return vram__fail(VRAM_EINVAL, "size \"%s\" must be a plain number", text);
    errno = 0;
    char *end = NULL;
    double v = strtod(p, &end);
    if (end == p || errno || !isfinite(v) || v < 0)
        return vram__fail(VRAM_EINVAL, "size \"%s\" is not a number", text);
    while (isspace((unsigned char)*end))
        end++;
    double mult = 1.0;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'B': mult = 1.0; end++; goto tail;
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    default:
        return vram__fail(VRAM_EINVAL, "size \"%s\" has an unknown unit (use K, M, G, T)", text);
    }
    if (*end) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
tail:
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return vram__fail(VRAM_EINVAL, "size \"%s\" has trailing characters", text);
    double bytes = v * mult;
    if (bytes > 18446744073709549568.0)
        return vram__fail(VRAM_EINVAL, "size \"%s\" is too large", text);
    if (bytes != floor(bytes))
        return vram__fail(VRAM_EINVAL, "size \"%s\" is not a whole number of bytes", text);
    *out = (uint64_t)bytes;
    return 0;
}

uint64_t vram__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *vram__calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        vram__fail(VRAM_EHOSTMEM, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *vram__realloc_array(void *ptr, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        vram__fail(VRAM_EHOSTMEM, "array of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    size_t bytes = n * size;
    void *p = realloc(ptr, bytes ? bytes : 1);
    if (!p)
        vram__fail(VRAM_EHOSTMEM, "out of host memory growing an array to %zu x %zu bytes", n, size);
    return p;
}

char *vram__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (!p) {
        vram__fail(VRAM_EHOSTMEM, "out of host memory copying a %zu-byte string", n);
        return NULL;
    }
    return memcpy(p, s, n);
}

int vram_write_stdio(void *file, const char *data, size_t len)
{
    if (len && fwrite(data, 1, len, (FILE *)file) != len)
        return vram__fail(VRAM_EIO, "write failed: %s", strerror(errno));
    return 0;
}
