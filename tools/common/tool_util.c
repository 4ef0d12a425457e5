/* tools/common/tool_util.c - the command line's shared helpers (tool_util.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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

void tool_machine(char *buf, size_t cap)
{
    char cpu[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *c = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && c) {
                c += 1 + strspn(c + 1, " \t");
                c[strcspn(c, "\n")] = '\0';
                snprintf(cpu, sizeof cpu, "%s", c);
                break;
            }
        }
        fclose(f);
    }
    struct utsname u;
    if (uname(&u) != 0)
        snprintf(u.sysname, sizeof u.sysname, "unknown system"), u.release[0] = '\0';
    snprintf(buf, cap, "%s, %ld cores, %s %s", cpu, sysconf(_SC_NPROCESSORS_ONLN), u.sysname,
             u.release);
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

int tool_parse_gpus(const char *list, int max_index, int *gpus, size_t cap, size_t *n)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        char *end;
        long g = strtol(p, &end, 10);
        if (end == p || g < 0 || g > max_index || (*end && *end != ','))
            return vram_set_error(VRAM_EINVAL, "\"%s\" is not a list of device indices "
                                  "(0..%d) such as 0,1", list, max_index);
        if (*n == cap)
            return vram_set_error(VRAM_EINVAL, "more than %zu GPUs in \"%s\"", cap, list);
        for (size_t i = 0; i < *n; i++)
            if (gpus[i] == (int)g)
                return vram_set_error(VRAM_EINVAL, "GPU %ld is named twice in \"%s\"", g, list);
        gpus[(*n)++] = (int)g;
        if (!*end)
            return 0;
        p = end + 1;
    }
}
