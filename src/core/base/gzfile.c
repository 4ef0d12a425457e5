/* src/core/base/gzfile.c - reading a whole file that may be gzip-compressed:
 * the one reader behind traces and the report page's inputs, so that both
 * treat a cut-short gzip stream, an oversize file and a read error alike. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "internal.h"

int vram__read_gz_file(const char *path, const char *what, uint64_t max_bytes, char **out,
                       size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!what)
        what = "";
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return vram__fail(VRAM_EIO, "%s%s is a directory, not a file", what, path);
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return vram__fail(errno == ENOMEM ? VRAM_EHOSTMEM : VRAM_EIO, "cannot open %s%s: %s",
                          what, path, errno ? strerror(errno) : "out of memory");
    gzbuffer(gz, 256 * 1024);

    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        /* Grow by doubling up to one byte past the limit (and one for the
         * terminating 0), so that n > max_bytes is what detects a file too
         * large. */
        if (cap - n < 65536 && cap <= max_bytes + 1) {
            uint64_t ncap = cap ? (uint64_t)cap * 2 : (uint64_t)1 << 20;
            if (ncap > max_bytes + 2)
                ncap = max_bytes + 2;
            char *nb = ncap <= SIZE_MAX ? vram__realloc_array(buf, (size_t)ncap, 1) : NULL;
            if (!nb) {
                rc = vram__fail(VRAM_EHOSTMEM, "out of host memory reading %s%s", what, path);
                break;
            }
            buf = nb;
            cap = (size_t)ncap;
        }
        size_t want = cap - n - 1;
        if (want > (1u << 30))
            want = 1u << 30;
        int got = gzread(gz, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(gz, &zerr);
            rc = vram__fail(VRAM_EIO, "cannot read %s%s: %s", what, path,
                            zerr == Z_ERRNO ? strerror(errno) : msg);
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (n > max_bytes) {
            char lim[32];
            rc = vram__fail(VRAM_EIO, "%s%s is larger than %s once decompressed; refusing to "
                            "read it", what, path, vram__fmt_bytes(lim, sizeof lim, max_bytes));
            break;
        }
    }
    /* A gzip stream cut short reads as data up to the cut; gzclose_r says so. */
    int zc = gzclose_r(gz);
    if (!rc && zc == Z_BUF_ERROR)
        rc = vram__fail(VRAM_EIO, "cannot read %s%s: the gzip data is truncated", what, path);
    else if (!rc && zc != Z_OK)
        rc = vram__fail(VRAM_EIO, "cannot read %s%s: closing failed (zlib error %d)", what, path,
                        zc);
    if (rc) {
        free(buf);
        return rc;
    }
    if (!buf && !(buf = malloc(1)))
        return vram__fail(VRAM_EHOSTMEM, "out of host memory reading %s%s", what, path);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}
