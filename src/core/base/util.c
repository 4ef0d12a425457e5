/* src/core/base/util.c - small helpers: byte formatting and parsing, the monotonic
 * clock, checked host allocation and reading a whole file. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    /* Step up while the printed value would read 1024 or more. */
    while (v >= (v < 10.0 ? 1023.995 : 1023.95) && u + 1 < VRAM__ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, v < 10.0 ? "%.2f %s" : "%.1f %s", v, units[u]);
    return buf;
}

/* Whole and fractional digits are read exactly (no floating point), so
 * every byte count up to 2^64 - 1 parses as written. */
int vram__parse_size(const char *text, uint64_t *out)
{
    if (!text || !*text)
        return vram__fail(VRAM_EINVAL, "empty size");
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+')
        return vram__fail(VRAM_EINVAL, "size \"%s\" must be a plain number", text);
    if (!isdigit((unsigned char)*p) && *p != '.')
        return vram__fail(VRAM_EINVAL, "size \"%s\" is not a number", text);
    uint64_t whole = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return vram__fail(VRAM_EINVAL, "size \"%s\" is too large", text);
        whole = whole * 10 + d;
    }
    uint64_t frac = 0, frac_scale = 1; /* frac / frac_scale, up to 18 digits */
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p) && p - 1 == text)
            return vram__fail(VRAM_EINVAL, "size \"%s\" is not a number", text);
        for (; isdigit((unsigned char)*p); p++) {
            if (frac_scale >= 1000000000000000000ull) {
                if (*p != '0')
                    return vram__fail(VRAM_EINVAL, "size \"%s\" has too many decimals", text);
                continue;
            }
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
        }
    }
    while (isspace((unsigned char)*p))
        p++;
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case '\0': break;
    case 'B': p++; goto tail;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default:
        return vram__fail(VRAM_EINVAL, "size \"%s\" has an unknown unit (use K, M, G, T)", text);
    }
    if (*p) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'B' || *p == 'b')
            p++;
    }
tail:
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return vram__fail(VRAM_EINVAL, "size \"%s\" has trailing characters", text);
    if (shift && whole > (UINT64_MAX >> shift))
        return vram__fail(VRAM_EINVAL, "size \"%s\" is too large", text);
    uint64_t bytes = whole << shift;
    /* The fraction times the unit must be a whole number of bytes. */
    unsigned __int128 fb = ((unsigned __int128)frac << shift);
    if (fb % frac_scale)
        return vram__fail(VRAM_EINVAL, "size \"%s\" is not a whole number of bytes", text);
    uint64_t extra = (uint64_t)(fb / frac_scale);
    if (bytes > UINT64_MAX - extra)
        return vram__fail(VRAM_EINVAL, "size \"%s\" is too large", text);
    *out = bytes + extra;
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

void *vram__grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t want = *cap ? *cap * 2 : first;
    void *p = vram__realloc_array(arr, want, elem);
    if (p)
        *cap = want;
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


int vram__read_file(const char *path, const char *what, void **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return vram__fail(VRAM_EIO, "cannot open %s: %s", what, strerror(errno));
    /* A regular file's size is a good first guess; pipes and the like grow
     * the buffer as they go. One byte more than the size lets the loop see
     * the end of file without growing. */
    size_t cap = 64 * 1024;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (uint64_t)st.st_size < SIZE_MAX)
        cap = (size_t)st.st_size + 1;
    unsigned char *buf = vram__realloc_array(NULL, cap, 1);
    size_t n = 0;
    int rc = buf ? 0 : VRAM_EHOSTMEM;
    while (rc == 0) {
        if (n == cap) {
            if (cap > SIZE_MAX / 2) {
                rc = vram__fail(VRAM_EHOSTMEM, "%s is too large to read", what);
                break;
            }
            unsigned char *p = vram__realloc_array(buf, cap * 2, 1);
            if (!p) {
                rc = VRAM_EHOSTMEM;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f))
                rc = vram__fail(VRAM_EIO, "cannot read %s: %s", what, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}
