/* src/mem/json_internal.h - JSON pieces shared by stats.c and snapshot.c. */
#ifndef VRAM_MEM_JSON_INTERNAL_H
#define VRAM_MEM_JSON_INTERNAL_H

#include <cjson/cJSON.h>

#include "pool_internal.h"

/* Print `root` unformatted plus a newline through `write`, then delete it
 * (NULL means building it ran out of memory). */
int vram__emit_json(cJSON *root, vram_write_fn write, void *ctx);

/* {pool, policy, backend, stats, owners, kinds}; lock held. */
cJSON *vram__pool_summary_json(vram_pool *p);

#endif
