/* src/core/backend/sim.c - the simulated device: an address space and a capacity,
 * no bytes behind them. Its ledger checks callers as a driver would, which
 * makes it the allocator's test bench and lets `vramkit replay` predict a
 * GPU's behaviour on any machine. Addresses are never reused. On request it
 * has events, complete once recorded, and device waits that succeed (a GPU
 * with nothing queued, as a replay on one sees it); every event recorded
 * must be released once, and one left over at the end is reported. */
#include <stdlib.h>

#include "vramkit/log.h"

#include "backend_internal.h"
#include "ledger.h"

#define SIM_BASE 0x100000000000ull /* first address handed out (16 TiB) */

typedef struct sim {
    vram__ledger books;
    _Atomic uint64_t next_addr; /* bump pointer */
    _Atomic uint64_t events;    /* recorded, not yet released */
} sim;

#define SIM_EVENT_MAGIC 0x73696d65u /* "sime" */

typedef struct sim_event {
    uint32_t magic;
} sim_event;

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

static int sim_event_record(void *self, vram_stream stream, void **event)
{
    sim *s = self;
    sim_event *e = malloc(sizeof *e);
    if (!e)
        return vram_set_error(VRAM_EHOSTMEM, "sim device: no host memory for an event");
    e->magic = SIM_EVENT_MAGIC;
    atomic_fetch_add(&s->events, 1);
    *event = e;
    return 0;
}

static int sim_event_check(const void *event, const char *what)
{
    const sim_event *e = event;
    if (!e || e->magic != SIM_EVENT_MAGIC)
        return vram_set_error(VRAM_EINVAL, "sim device: %s of %p, which is no live event", what,
                              event);
    return 0;
}

static int sim_event_query(void *self, void *event)
{
    int rc = sim_event_check(event, "query");
    return rc ? rc : 1; /* nothing is queued: done */
}

static int sim_event_wait(void *self, void *event)
{
    return sim_event_check(event, "wait");
}

static void sim_event_release(void *self, void *event)
{
    sim *s = self;
    if (sim_event_check(event, "release"))
        return;
    ((sim_event *)event)->magic = 0;
    atomic_fetch_sub(&s->events, 1);
    free(event);
}

static int sim_stream_wait_event(void *self, vram_stream stream, void *event)
{
    return sim_event_check(event, "device wait");
}

static void sim_destroy(void *self)
{
    sim *s = self;
    uint64_t left = atomic_load(&s->events);
    if (left)
        vram_log(VRAM_LOG_WARN, "sim device: %llu event(s) recorded and never released",
                  (unsigned long long)left);
    vram__ledger_destroy(&s->books);
    free(s);
}

#define SIM_OPS                                                                                    \
    .name = "sim", .segment_alloc = sim_segment_alloc, .segment_free = sim_segment_free,          \
    .reserve = sim_reserve, .release = sim_release, .map = sim_map, .unmap = sim_unmap,            \
    .mem_info = sim_mem_info, .destroy = sim_destroy

static const vram_backend_ops sim_ops = {
    SIM_OPS,
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP,
};

static const vram_backend_ops sim_ops_events = {
    SIM_OPS,
    .caps = VRAM_BACKEND_SEGMENTS | VRAM_BACKEND_MAP | VRAM_BACKEND_EVENTS,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_wait = sim_event_wait,
    .event_release = sim_event_release,
    .stream_wait_event = sim_stream_wait_event,
};

int vram__backend_sim_new(uint64_t capacity, uint64_t granularity, int events,
                          const vram_backend_ops **ops, void **self)
{
    sim *s = vram__calloc(1, sizeof *s);
    if (!s)
        return VRAM_EHOSTMEM;
    if (vram__ledger_init(&s->books, "sim device", capacity, granularity)) {
        free(s);
        return VRAM_EHOSTMEM;
    }
    atomic_init(&s->next_addr, SIM_BASE);
    atomic_init(&s->events, 0);
    *ops = events ? &sim_ops_events : &sim_ops;
    *self = s;
    return 0;
}
