/* tools/vramkit/cmd_ctxcost.c - `vramkit ctxcost [--threads N] [--device I]
 * [--stack-limits LIST] [--json]`: measure on this machine's GPU what CUDA
 * contexts cost (a context per thread, one shared context with a stream per
 * thread, one context at several stack limits) and say what to do about it.
 * Exits 1, with one line on stderr, where there is no GPU to measure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

static const char about[] =
    "Measures, on CUDA device I (default: VRAM_DEVICE, 0), how much device memory CUDA\n"
    "contexts take, from device-wide used memory (NVML; cuMemGetInfo if NVML is missing):\n"
    "  - N threads (default 18) each creating its own context, all alive at once;\n"
    "  - N threads sharing the primary context, each with a stream that does work;\n"
    "  - one context at each stack limit of LIST (bytes, comma-separated, K suffix\n"
    "    allowed; default 0,256,1024,2048,4096), read back with cuCtxGetLimit.\n"
    "Prints a table and a recommendation, or with --json one JSON object (bytes).\n"
    "Needs a GPU no other program is starting work on; takes a few seconds. Without a\n"
    "GPU it exits with status 1 and says why.\n";

/* A non-negative integer with nothing after it, at most `max`. */
static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

/* "0,256,1K,4096": bytes, each with an optional K/KiB suffix (1024). */
static int parse_stacks(const char *list, vram_ctxcost_opts *o)
{
    char buf[512];
    if (strlen(list) >= sizeof buf)
        return cli_usage_error("ctxcost", "--stack-limits list is too long");
    strcpy(buf, list);
    o->n_stacks = 0;
    char *save = NULL;
    if (!buf[0] || buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,"))
        return cli_usage_error("ctxcost", "--stack-limits \"%s\": an empty item", list);
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (o->n_stacks == VRAM_CTXCOST_MAX_STACKS)
            return cli_usage_error("ctxcost", "--stack-limits: at most %u values",
                                   VRAM_CTXCOST_MAX_STACKS);
        unsigned long long mult = 1, v;
        size_t n = strlen(item);
        if (n > 3 && strcmp(item + n - 3, "KiB") == 0) {
            item[n - 3] = '\0';
            mult = 1024;
        } else if (n > 1 && (item[n - 1] == 'K' || item[n - 1] == 'k')) {
            item[n - 1] = '\0';
            mult = 1024;
        }
        if (parse_uint(item, (1ull << 40) / mult, &v))
            return cli_usage_error("ctxcost", "--stack-limits \"%s\": \"%s\" is not a size in "
                                              "bytes",
                                   list, item);
        o->stacks[o->n_stacks++] = v * mult;
    }
    return 0;
}

int cmd_ctxcost(int argc, char **argv)
{
    vram_ctxcost_opts o;
    memset(&o, 0, sizeof o);
    uint64_t dev = vram_config_get()->device, threads = VRAM_CTXCOST_DEFAULT_THREADS;
    const char *stacks = NULL;
    int json = 0, device_given = 0;
    const cli_opt opts[] = {
        {"--threads", NULL, CLI_UINT, &threads, "N", "threads with a context each, and sharing one "
                                                     "(default 18)", 1, VRAM_CTXCOST_MAX_THREADS},
        {"--device", NULL, CLI_UINT, &dev, "I", "CUDA device ordinal (default VRAM_DEVICE)", 0,
         1023, NULL, &device_given},
        {"--stack-limits", NULL, CLI_STRING, &stacks, "LIST",
         "stack limits to measure one context at (bytes, comma-separated)"},
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object instead of the table"},
        {0},
    };
    const cli_spec spec = {"ctxcost", "", about, opts, 0, 0, NULL};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st < 0 ? 0 : st;
    free(args);
    if (!device_given && dev > 1023)
        return cli_usage_error("ctxcost", "VRAM_DEVICE=%llu is not a device index",
                               (unsigned long long)dev);
    o.device = (int)dev;
    o.threads = (unsigned)threads;
    if (stacks && (st = parse_stacks(stacks, &o)))
        return st;
    vram_ctxcost_result r;
    int rc = vram_ctxcost_measure(&o, &r);
    if (rc)
        return cli_lib_error("ctxcost", rc);
    rc = vram_ctxcost_print(&r, vram_write_stdio, stdout, json ? VRAM_PRINT_JSON : 0);
    if (rc)
        return cli_lib_error("ctxcost", rc);
    return fflush(stdout) == 0 ? 0 : 1;
}
