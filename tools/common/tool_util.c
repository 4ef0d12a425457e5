/* tools/common/tool_util.c - the command line's shared helpers (tool_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_util.h"
#include "vramkit/error.h"

uint64_t tool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

double tool_median_u64(uint64_t *v, unsigned n)
{
    if (!n)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

void *tool_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        vram_set_error(VRAM_EHOSTMEM, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void tool_error_save(tool_saved_error *s) { snprintf(s->msg, sizeof s->msg, "%s", vram_last_error()); }

int tool_error_restore(const tool_saved_error *s, int code)
{
    return vram_set_error(code, "%s", s->msg);
}

int tool_emit_json(cJSON *root, vram_write_fn write, void *ctx)
{
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory printing JSON");
    int rc = write(ctx, text, strlen(text));
    if (!rc)
        rc = write(ctx, "\n", 1);
    cJSON_free(text);
    return rc;
}
