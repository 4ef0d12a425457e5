/* src/mem/json_internal.h - JSON pieces shared by stats.c and snapshot.c. */
#ifndef VRAM_MEM_JSON_INTERNAL_H
#define VRAM_MEM_JSON_INTERNAL_H

#include "base/json_emit.h"
#include "pool_internal.h"

/* {pool, policy, backend, stats, owners, kinds}; lock held. */
cJSON *vram__pool_summary_json(vram_pool *p);

/* What vram_pool_snapshot() prints, as a tree; lock held. NULL when host
 * memory ran out. */
cJSON *vram__pool_snapshot_json(vram_pool *p);

#endif
