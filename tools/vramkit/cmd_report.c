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

static const char about[] =
    "Reads pool snapshots (the JSON vram_pool_snapshot writes), sample series (the\n"
    "monitor's JSON Lines or CSV) and OOM reports (JSON), recognised by their content,\n"
    "plain or gzip, and writes one HTML page that works offline: live bytes over time\n"
    "by owner and by kind, the pool against the device, fragmentation and alerts;\n"
    "each snapshot's blocks in address order, coloured by owner; each OOM report with\n"
    "its request, diagnosis, usage by owner and last events.\n\n"
    "A malformed input is refused with its name, line and problem, and nothing is\n"
    "written: the page goes to a temporary file renamed to FILE.html once complete.\n"
    "A series longer than --max-points (VRAM_REPORT_MAX_POINTS, 2000) is drawn from the\n"
    "fewest and the most live bytes of each interval, so peaks show; a snapshot with more\n"
    "than --max-blocks (VRAM_REPORT_MAX_BLOCKS, 20000) blocks has touching blocks of one\n"
    "owner merged in its map. --json prints the page's data instead of writing a page.\n";

int cmd_report(int argc, char **argv)
{
    vram_report_opts o;
    int rc = vram_report_opts_init(&o);
    if (rc)
        return cli_lib_error("report", rc);
    const char *out = NULL;
    uint64_t max_points = o.max_points, max_blocks = o.max_blocks;
    int json = 0, status = 0;
    const cli_opt opts[] = {
        {"--output", "-o", CLI_STRING, &out, "FILE.html", "where the page goes"},
        {"--title", NULL, CLI_STRING, &o.title, "TEXT", "the page's title"},
        {"--max-points", NULL, CLI_UINT, &max_points, "N", "most points per series", 8, 1e7},
        {"--max-blocks", NULL, CLI_UINT, &max_blocks, "N", "blocks a snapshot's map draws", 1,
         1e7},
        {"--json", NULL, CLI_FLAG, &json, NULL, "the page's data as JSON, no page"},
        {0},
    };
    const cli_spec spec = {"report", "INPUT...", about, opts, 1, -1, "input"};
    const char **inputs;
    int n_inputs, st = cli_parse(&spec, argc, argv, &inputs, &n_inputs);
    if (st)
        return st < 0 ? 0 : st;
    o.max_points = (uint32_t)max_points;
    o.max_blocks = (uint32_t)max_blocks;
    if (!out && !json)
        status = cli_usage_error("report", "say where the page goes (-o FILE.html), or --json");
    if (!status && out && json)
        status = cli_usage_error("report", "-o and --json exclude each other");
    if (status) {
        free(inputs);
        return status;
    }
    vram_report *r;
    rc = vram_report_create(&o, &r);
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
