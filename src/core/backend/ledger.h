/* src/core/backend/ledger.h - the books a built-in backend keeps of what it handed
 * out: capacity in use, segments, reservations and which granules of them are
 * mapped. It refuses what a driver would refuse (a segment freed twice, a
 * granule mapped twice or unmapped while not mapped, part of a mapping
 * unmapped, a reservation released with mappings left), so accounting can
 * never drift. Thread-safe. */
#ifndef VRAM_BACKEND_LEDGER_H
#define VRAM_BACKEND_LEDGER_H

#include <pthread.h>
#include <stdint.h>

#include "base/u64map.h"

typedef struct vram__ledger_range {
    uint64_t addr, size;
    uint64_t *mapped; /* one bit per granule */
    uint64_t *starts; /* the first granule of each mapping */
} vram__ledger_range;

typedef struct vram__ledger {
    pthread_mutex_t lock;
    const char *name; /* in messages: "sim", "host backend" */
    uint64_t capacity, granularity, used;
    vram__u64map segments; /* base -> size */
    vram__ledger_range *ranges;
    size_t n_ranges;
} vram__ledger;

int vram__ledger_init(vram__ledger *l, const char *name, uint64_t capacity, uint64_t granularity);
void vram__ledger_destroy(vram__ledger *l);

/* Capacity for a segment about to be obtained; give it back if that fails. */
int vram__ledger_take(vram__ledger *l, uint64_t size, const char *what);
void vram__ledger_give(vram__ledger *l, uint64_t size);

/* A segment obtained after vram__ledger_take (VRAM_EHOSTMEM: give back). */
int vram__ledger_segment_add(vram__ledger *l, uint64_t addr, uint64_t size);
/* Check and forget a segment, giving its capacity back. */
int vram__ledger_segment_remove(vram__ledger *l, uint64_t addr, uint64_t size);

int vram__ledger_range_add(vram__ledger *l, uint64_t addr, uint64_t size);
/* VRAM_EBUSY while granules are mapped, VRAM_EINVAL if not a reservation. */
int vram__ledger_range_remove(vram__ledger *l, uint64_t addr, uint64_t size);

/* Check [addr, addr+size) and mark it mapped, taking capacity. */
int vram__ledger_map(vram__ledger *l, uint64_t addr, uint64_t size);
/* Check it is mapped, as whole mappings (as with cuMemUnmap, part of a
 * mapping cannot be unmapped), and mark it unmapped, giving capacity back. The caller
 * re-maps with vram__ledger_map if its own unmapping then fails. */
int vram__ledger_unmap(vram__ledger *l, uint64_t addr, uint64_t size);

void vram__ledger_mem_info(vram__ledger *l, uint64_t *free_bytes, uint64_t *total);

#endif
