/* src/core/backend/sim.c - the simulated device: an address space and a capacity,
 * no bytes behind them. Its ledger checks callers as a driver would, which
 * makes it the allocator's test bench and lets `vramkit replay` predict a
 * GPU's behaviour on any machine. Addresses are never reused. */
#include <stdlib.h>

#include "backend_internal.h"
#include "ledger.h"

#define SIM_BASE 0x100000000000ull /* first address handed out (16 TiB) */

typedef struct sim {
    vram__ledger books;
    _Atomic uint64_t next_addr; /* bump pointer */
} sim;

static uint64_t sim_bump(sim *s, uint64_t size)
{
    uint64_t step = vram__align_up(size ? size : 1, s->books.granularity);
    return atomic_fetch_add(&s->next_addr, step);
}

static int sim_segment_alloc(void *self, uint64_t size, vram_stream stream, uint64_t *addr)
{
    sim *s = self;
    int rc = vram__ledger_take(&s->books, size, "segment");
    if (rc)
        return rc;
    uint64_t a = sim_bump(s, size);
    rc = vram__ledger_segment_add(&s->books, a, size);
    if (rc) {
        vram__ledger_give(&s->books, size);
        return rc;
    }
    *addr = a;
    return 0;
}

static int sim_segment_free(void *self, uint64_t addr, uint64_t size, vram_stream stream)
{
    sim *s = self;
    return vram__ledger_segment_remove(&s->books, addr, size);
}

static int sim_reserve(void *self, uint64_t size, uint64_t *addr)
{
    sim *s = self;
    uint64_t a = sim_bump(s, size);
    int rc = vram__ledger_range_add(&s->books, a, size);
    if (!rc)
        *addr = a;
    return rc;
}

static int sim_release(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    return vram__ledger_range_remove(&s->books, addr, size);
}

static int sim_map(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    return vram__ledger_map(&s->books, addr, size);
}

static int sim_unmap(void *self, uint64_t addr, uint64_t size)
{
    sim *s = self;
    return vram__ledger_unmap(&s->books, addr, size);
}

static int sim_mem_info(void *self, uint64_t *free_bytes, uint64_t *total)
{
    sim *s = self;
    vram__ledger_mem_info(&s->books, free_bytes, total);
    return 0;
}

static void sim_destroy(void *self)
{
    sim *s = self;
    vram__ledger_destroy(&s->books);
    free(s);
}

static const vram_backend_ops sim_ops = {
    .name = "sim",
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP,
    .segment_alloc = sim_segment_alloc,
    .segment_free = sim_segment_free,
    .reserve = sim_reserve,
    .release = sim_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .mem_info = sim_mem_info,
    .destroy = sim_destroy,
};

int vram__backend_sim_new(uint64_t capacity, uint64_t granularity, const vram_backend_ops **ops,
                          void **self)
{
    sim *s = vram__calloc(1, sizeof *s);
    if (!s)
        return VRAM_EHOSTMEM;
    if (vram__ledger_init(&s->books, "sim device", capacity, granularity)) {
        free(s);
        return VRAM_EHOSTMEM;
    }
    atomic_init(&s->next_addr, SIM_BASE);
    *ops = &sim_ops;
    *self = s;
    return 0;
}
