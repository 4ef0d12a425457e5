/* src/core/mem/json_internal.h - JSON pieces shared by stats.c, snapshot.c and
 * the capture of a pool's state (listener.c). */
#ifndef VRAM_MEM_JSON_INTERNAL_H
#define VRAM_MEM_JSON_INTERNAL_H

#include "base/json_out.h"
#include "pool_internal.h"

/* The members pool, policy, backend, stats, owners and kinds, into the
 * object `j` has open; lock held. */
void vram__pool_summary_json(vram_pool *p, vram__json *j);

/* What vram_pool_snapshot() prints (no newline), appended to `out`; lock
 * held. 0 or VRAM_EHOSTMEM. */
int vram__pool_snapshot_text(vram_pool *p, vram_buffer *out);

/* snapshot.c: one entry of "segments" / of "blocks" (the part [addr,
 * addr+size) of block b), for the policies' held_json and free_json. */
void vram__snapshot_segment(vram__json *j, uint64_t addr, uint64_t size, const char *what);
void vram__snapshot_block(vram_pool *p, vram__json *j, const vram__block *b, uint64_t addr,
                          uint64_t size);

#endif
