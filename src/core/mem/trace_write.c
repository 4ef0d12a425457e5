/* src/core/mem/trace_write.c - writes allocation traces in RMM's
 * logging_resource_adaptor CSV format (see vramkit/trace.h): the header, then
 * one line per event stamped with the UTC time of day. gzip when the path ends
 * in ".gz", stdio otherwise. A failed write is remembered, so the caller may
 * check only the result of vram_trace_writer_close(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "base/internal.h"
#include "vramkit/trace.h"

struct vram_trace_writer {
    gzFile gz;     /* when the path ends in .gz */
    FILE *file;    /* otherwise */
    int failed;    /* a write already failed */
    char *path;
};

static int put(vram_trace_writer *w, const char *s, size_t n)
{
    if (w->failed)
        return VRAM_EIO;
    if (w->gz) {
        if (gzwrite(w->gz, s, (unsigned)n) != (int)n) {
            int zerr = 0;
            const char *msg = gzerror(w->gz, &zerr);
            w->failed = 1;
            return vram__fail(VRAM_EIO, "cannot write trace %s: %s", w->path,
                              zerr == Z_ERRNO ? strerror(errno) : msg);
        }
    } else if (fwrite(s, 1, n, w->file) != n) {
        w->failed = 1;
        return vram__fail(VRAM_EIO, "cannot write trace %s: %s", w->path, strerror(errno));
    }
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int vram_trace_writer_open(const char *path, vram_trace_writer **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_trace_writer_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return vram__fail(VRAM_EINVAL, "vram_trace_writer_open: no path");
    vram_trace_writer *w = vram__calloc(1, sizeof *w);
    if (!w)
        return VRAM_EHOSTMEM;
    w->path = vram__strdup(path);
    if (!w->path) {
        free(w);
        return VRAM_EHOSTMEM;
    }
    errno = 0;
    if (ends_with(path, ".gz")) {
        w->gz = gzopen(path, "wb");
        if (w->gz)
            gzbuffer(w->gz, 128 * 1024);
    } else {
        w->file = fopen(path, "w");
    }
    if (!w->gz && !w->file) {
        int rc = vram__fail(VRAM_EIO, "cannot create trace %s: %s", path,
                            errno ? strerror(errno) : "out of memory");
        free(w->path);
        free(w);
        return rc;
    }
    static const char header[] = "Thread,Time,Action,Pointer,Size,Stream\n";
    if (put(w, header, sizeof header - 1)) {
        vram__saved_error err;
        vram__error_save(&err);
        vram_trace_writer_close(w);
        return vram__error_restore(&err, VRAM_EIO);
    }
    *out = w;
    return 0;
}

int vram_trace_writer_event(vram_trace_writer *w, vram_trace_action action, uint32_t thread,
                            uint64_t ptr, uint64_t size, uint64_t stream)
{
    if (!w)
        return vram__fail(VRAM_EINVAL, "vram_trace_writer_event: no writer");
    if ((unsigned)action > VRAM_TRACE_ALLOC_FAIL)
        return vram__fail(VRAM_EINVAL, "vram_trace_writer_event: unknown action %d", (int)action);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned day_s = (unsigned)(ts.tv_sec % 86400);
    unsigned us = (unsigned)(ts.tv_nsec / 1000);
    char line[160];
    int n;
    if (stream == 0)
        n = snprintf(line, sizeof line, "%u,%02u:%02u:%02u.%06u,%s,0x%llx,%llu,0\n", thread,
                     day_s / 3600, day_s / 60 % 60, day_s % 60, us, vram_trace_action_name(action),
                     (unsigned long long)ptr, (unsigned long long)size);
    else
        n = snprintf(line, sizeof line, "%u,%02u:%02u:%02u.%06u,%s,0x%llx,%llu,0x%llx\n", thread,
                     day_s / 3600, day_s / 60 % 60, day_s % 60, us, vram_trace_action_name(action),
                     (unsigned long long)ptr, (unsigned long long)size,
                     (unsigned long long)stream);
    return put(w, line, (size_t)n);
}

int vram_trace_writer_flush(vram_trace_writer *w)
{
    if (!w)
        return vram__fail(VRAM_EINVAL, "vram_trace_writer_flush: no writer");
    int bad = w->gz ? gzflush(w->gz, Z_SYNC_FLUSH) != Z_OK : fflush(w->file) != 0;
    if (bad && !w->failed) {
        w->failed = 1;
        return vram__fail(VRAM_EIO, "trace: flushing failed");
    }
    return w->failed ? VRAM_EIO : 0;
}

int vram_trace_writer_close(vram_trace_writer *w)
{
    if (!w)
        return 0;
    int rc = w->failed ? VRAM_EIO : 0;
    if (w->gz) {
        int zc = gzclose_w(w->gz);
        if (zc != Z_OK && !rc)
            rc = vram__fail(VRAM_EIO, "cannot finish trace %s: %s", w->path,
                            zc == Z_ERRNO ? strerror(errno) : "zlib error");
    } else if (fclose(w->file) != 0 && !rc) {
        rc = vram__fail(VRAM_EIO, "cannot finish trace %s: %s", w->path, strerror(errno));
    }
    free(w->path);
    free(w);
    return rc;
}
