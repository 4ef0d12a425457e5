/* tools/vramkit/cmd_config.c - `vramkit config [--json]`: every option, its
 * value and its source (default, environment). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

int cmd_config(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: vramkit config [--json]\n\nPrints every option: its VRAM_* variable, "
                   "value, source and meaning.\n");
            return 0;
        } else {
            return cli_usage_error("config", "unknown argument \"%s\"", argv[i]);
        }
    }
    int bad = vram_config_load();
    if (bad)
        fprintf(stderr, "vramkit config: %s\n", vram_last_error());
    int rc = vram_config_print(vram_write_stdio, stdout, json);
    if (rc)
        return cli_lib_error("config", rc);
    return bad ? 1 : 0;
}
