/* tools/vramkit/cmd_ctxcost.c - `vramkit ctxcost [--threads N] [--device I]
 * [--stack-limits LIST] [--json]`: measure on this machine's GPU what CUDA
 * contexts cost (a context per thread, one shared context with a stream per
 * thread, one context at several stack limits) and say what to do about it.
 * Exits 2, with one line on stderr, where there is no GPU to measure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

static const char *const help =
    "usage: vramkit ctxcost [--threads N] [--device I] [--stack-limits LIST] [--json]\n\n"
    "Measures, on CUDA device I (default: VRAM_DEVICE, 0), how much device memory CUDA\n"
    "contexts take, from device-wide used memory (NVML; cuMemGetInfo if NVML is missing):\n"
    "  - N threads (default 18) each creating its own context, all alive at once;\n"
    "  - N threads sharing the primary context, each with a stream that does work;\n"
    "  - one context at each stack limit of LIST (bytes, comma-separated, K suffix\n"
    "    allowed; default 0,256,1024,2048,4096), read back with cuCtxGetLimit.\n"
    "Prints a table and a recommendation, or with --json one JSON object (bytes).\n"
    "Needs a GPU no other program is starting work on; takes a few seconds. Without a\n"
    "GPU it exits with status 2 and says why.\n";

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
    uint64_t dev = vram_config_get()->device;
    o.device = dev > 1024 ? -1 : (int)dev;
    o.threads = VRAM_CTXCOST_DEFAULT_THREADS;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        unsigned long long n;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (cli_is(a, "--threads")) {
            if (!(v = cli_value("ctxcost", argc, argv, &i, "--threads")))
                return 2;
            if (parse_uint(v, VRAM_CTXCOST_MAX_THREADS, &n) || n < 1)
                return cli_usage_error("ctxcost", "--threads \"%s\" must be 1 to %u", v,
                                       VRAM_CTXCOST_MAX_THREADS);
            o.threads = (unsigned)n;
        } else if (cli_is(a, "--device")) {
            if (!(v = cli_value("ctxcost", argc, argv, &i, "--device")))
                return 2;
            if (parse_uint(v, 1024, &n))
                return cli_usage_error("ctxcost", "--device \"%s\" is not a device index", v);
            o.device = (int)n;
        } else if (cli_is(a, "--stack-limits")) {
            if (!(v = cli_value("ctxcost", argc, argv, &i, "--stack-limits")))
                return 2;
            int rc = parse_stacks(v, &o);
            if (rc)
                return rc;
        } else if (a[0] == '-') {
            return cli_usage_error("ctxcost", "unknown option \"%s\"", a);
        } else {
            return cli_usage_error("ctxcost", "unexpected argument \"%s\"", a);
        }
    }
    if (o.device < 0)
        return cli_usage_error("ctxcost", "VRAM_DEVICE=%llu is not a device index",
                               (unsigned long long)dev);

    vram_ctxcost_result r;
    int rc = vram_ctxcost_measure(&o, &r);
    if (rc == VRAM_ENOSYS) {
        fprintf(stderr, "vramkit ctxcost: %s\n", vram_last_error());
        return 2;
    }
    if (rc)
        return cli_lib_error("ctxcost", rc);
    rc = vram_ctxcost_print(&r, vram_write_stdio, stdout, json ? VRAM_PRINT_JSON : 0);
    if (rc)
        return cli_lib_error("ctxcost", rc);
    return fflush(stdout) == 0 ? 0 : 1;
}
