/* tools/vramkit/cmd_report.c - `vramkit report INPUT... -o FILE.html
 * [--title TEXT] [--max-points N] [--max-blocks N]` and `vramkit report
 * INPUT... --json`: snapshots, sample series and OOM reports into one
 * self-contained HTML page (vramkit/report.h), or its data as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

static const char help[] =
    "usage: vramkit report INPUT... -o FILE.html [--title TEXT] [--max-points N]\n"
    "                      [--max-blocks N]\n"
    "       vramkit report INPUT... --json\n\n"
    "Reads pool snapshots (the JSON vram_pool_snapshot writes), sample series (the\n"
    "monitor's JSON Lines or CSV) and OOM reports (JSON), recognised by their content,\n"
    "plain or gzip, and writes one HTML page that works offline: live bytes over time\n"
    "by owner and by kind, the pool against the device, fragmentation and alerts;\n"
    "each snapshot's blocks in address order, coloured by owner; each OOM report with\n"
    "its request, diagnosis, usage by owner and last events.\n\n"
    "A malformed input is refused with its name, line and problem, and nothing is\n"
    "written: the page goes to a temporary file renamed to FILE.html once complete.\n"
    "A series longer than --max-points (2000) is drawn from the fewest and the most\n"
    "live bytes of each interval, so peaks show; a snapshot with more than\n"
    "--max-blocks (20000) blocks has touching blocks of one owner merged in its map.\n"
    "--json prints the page's data instead of writing a page.\n";

static int parse_count(const char *opt, const char *v, uint32_t min, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n < min || n > 10000000ul)
        return cli_usage_error("report", "%s %s must be a whole number from %u to 10000000", opt,
                               v, min);
    *out = (uint32_t)n;
    return 0;
}

int cmd_report(int argc, char **argv)
{
    vram_report_opts o;
    vram_report_opts_init(&o);
    const char *out = NULL;
    int json = 0, n_inputs = 0, status = 0;
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    if (!inputs)
        return 1;
    for (int i = 1; i < argc && !status; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help, stdout);
            free(inputs);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (cli_is(a, "-o") || cli_is(a, "--output")) {
            if (!(v = cli_value("report", argc, argv, &i, cli_is(a, "-o") ? "-o" : "--output")))
                status = 2;
            else
                out = v;
        } else if (cli_is(a, "--title")) {
            if (!(v = cli_value("report", argc, argv, &i, "--title")))
                status = 2;
            else
                o.title = v;
        } else if (cli_is(a, "--max-points")) {
            if (!(v = cli_value("report", argc, argv, &i, "--max-points")))
                status = 2;
            else
                status = parse_count("--max-points", v, 8, &o.max_points);
        } else if (cli_is(a, "--max-blocks")) {
            if (!(v = cli_value("report", argc, argv, &i, "--max-blocks")))
                status = 2;
            else
                status = parse_count("--max-blocks", v, 1, &o.max_blocks);
        } else if (a[0] == '-' && a[1]) {
            status = cli_usage_error("report", "unknown option \"%s\"", a);
        } else {
            inputs[n_inputs++] = a;
        }
    }
    if (!status && !n_inputs)
        status = cli_usage_error("report", "no input given");
    if (!status && !out && !json)
        status = cli_usage_error("report", "say where the page goes (-o FILE.html), or --json");
    if (!status && out && json)
        status = cli_usage_error("report", "-o and --json exclude each other");
    if (status) {
        free(inputs);
        return status;
    }
    vram_report *r;
    int rc = vram_report_create(&o, &r);
    if (rc) {
        free(inputs);
        return cli_lib_error("report", rc);
    }
    /* Every input is read (and every bad one reported) before anything is
     * written. */
    FILE *msg = json ? stderr : stdout;
    for (int i = 0; i < n_inputs; i++) {
        vram_report_input_info info;
        rc = vram_report_add_file(r, inputs[i], &info);
        if (rc) {
            cli_lib_error("report", rc);
            status = 1;
        } else {
            fprintf(msg, "%s: %s\n", inputs[i], info.summary);
        }
    }
    if (status) {
        fprintf(stderr, "vramkit report: nothing written\n");
    } else if (json) {
        if ((rc = vram_report_print(r, vram_write_stdio, stdout, VRAM_PRINT_JSON)))
            status = cli_lib_error("report", rc);
    } else if ((rc = vram_report_write(r, out))) {
        status = cli_lib_error("report", rc);
    } else {
        fprintf(msg, "wrote %s\n", out);
    }
    vram_report_destroy(r);
    free(inputs);
    return status;
}
