/* src/base/json_emit.h - printing a cJSON tree through a vram_write_fn. */
#ifndef VRAM_BASE_JSON_EMIT_H
#define VRAM_BASE_JSON_EMIT_H

#include <cjson/cJSON.h>

#include "vramkit/types.h"

/* Print `root` unformatted plus a newline through `write`, then delete it.
 * NULL (building the tree ran out of memory) gives VRAM_EHOSTMEM. */
int vram__emit_json(cJSON *root, vram_write_fn write, void *ctx);

#endif
