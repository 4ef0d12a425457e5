/* tools/vramkit/cli.c - what the commands share: printing a library error,
 * the configured OOM watch, backend names and JSON on stdout. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_lib_error(const char *cmd, int rc)
{
    const char *msg = vram_last_error();
    fprintf(stderr, "vramkit %s: %s\n", cmd, *msg ? msg : vram_strerror(rc));
    return 1;
}

int cli_backend_is_gpu(const char *name)
{
    vram_backend_type t;
    for (int i = 0; name && i < VRAM_BACKEND_TYPE_COUNT; i++) {
        t = (vram_backend_type)i;
        if (!strcmp(name, vram_backend_type_name(t)))
            return vram_backend_type_is_gpu(t);
    }
    return 0;
}

int cli_print_json(cJSON *root)
{
    return tool_emit_json(root, vram_write_stdio, stdout) || fflush(stdout) ? 1 : 0;
}
