/* tools/vramkit/cmd_config.c - `vramkit config [--json]`: every option, its
 * value and its source (default, environment). Exits 1 when a variable is
 * malformed (it says which; its default is shown). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cmd_config(int argc, char **argv)
{
    int json = 0;
    const cli_opt opts[] = {
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object: each option's value, source, "
                                                "variable and meaning"},
        {0},
    };
    const cli_spec spec = {"config", "", "Prints every option: its VRAM_* variable, value, source "
                                         "(default, environment or set)\nand meaning.\n",
                           opts, 0, 0, NULL};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st < 0 ? 0 : st;
    free(args);
    int bad = vram_config_load();
    if (bad)
        fprintf(stderr, "vramkit config: %s\n", vram_last_error());
    int rc = vram_config_print(vram_write_stdio, stdout, json ? VRAM_PRINT_JSON : 0);
    if (rc)
        return cli_lib_error("config", rc);
    return bad ? 1 : 0;
}
