/* src/base/json_emit.c - printing a cJSON tree through a vram_write_fn. */
#include <string.h>

#include "internal.h"
#include "json_emit.h"

int vram__emit_json(cJSON *root, vram_write_fn write, void *ctx)
{
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return vram__fail(VRAM_EHOSTMEM, "out of host memory printing JSON");
    int rc = write(ctx, text, strlen(text));
    if (!rc)
        rc = write(ctx, "\n", 1);
    cJSON_free(text);
    return rc;
}
