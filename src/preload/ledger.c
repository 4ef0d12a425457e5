/* src/preload/ledger.c - what the program holds: every live allocation
 * (key, kind, bytes, call site) in an open-addressing table mapped once
 * with mmap (a hook never calls malloc), counts and live and peak bytes per
 * kind, the contexts with their measured cost, and the stages vram_mark
 * names. One mutex guards it; nothing under it allocates, logs or calls
 * the driver. A table that fills up counts what it could not keep. A
 * context destroyed takes its allocations with it (the driver frees them):
 * they leave the ledger then. */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "preload_internal.h"

#define SLOTS (1u << 20) /* live allocations kept at once */
#define CONTEXTS 1024
#define STAGES 256

typedef struct entry {
    uint64_t key;   /* 0: empty; ~0: deleted */
    uint64_t size;
    const void *site;
    const void *ctx; /* the context current when it was made */
    uint32_t kind;
    uint32_t pad;
} entry;

#define EMPTY 0ull
#define GONE (~0ull)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static uint64_t untracked;
static vram__pl_kind_stats kinds[VRAM__PL_KINDS];
static uint64_t charged, peak;
static vram__pl_context contexts[CONTEXTS];
static size_t n_contexts;
static vram__pl_stage stages[STAGES];
static size_t n_stages;

static const char *const kind_names[VRAM__PL_KINDS] = {
    "device", "pitch", "managed", "async", "vmm", "array", "decoder", "host", "graph"};

const char *vram__pl_kind_name(vram__pl_kind k)
{
    return (unsigned)k < VRAM__PL_KINDS ? kind_names[k] : "unknown";
}

void vram__pl_ledger_init(void)
{
    void *p = mmap(NULL, (size_t)SLOTS * sizeof(entry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    table = p == MAP_FAILED ? NULL : p;
    const char *first = getenv("VRAM_MARK");
    snprintf(stages[0].name, sizeof stages[0].name, "%s", first && *first ? first : "start");
    n_stages = 1;
}

static inline uint32_t hash(uint64_t key, uint32_t kind)
{
    uint64_t h = (key ^ ((uint64_t)kind << 59)) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 44) & (SLOTS - 1);
}

/* The kinds a free looks among: a device pointer may be any of the
 * pointer kinds freed by cuMemFree. */
static int same_class(uint32_t stored, uint32_t asked)
{
    if (stored == asked)
        return 1;
    int ptr_kind = stored == VRAM__PL_DEVICE || stored == VRAM__PL_PITCH ||
                   stored == VRAM__PL_MANAGED || stored == VRAM__PL_ASYNC;
    return asked == VRAM__PL_DEVICE && ptr_kind;
}

static uint32_t key_kind(uint32_t kind)
{
    /* Pointer kinds share one key space: a cuMemFree finds any of them. */
    return kind <= VRAM__PL_ASYNC ? VRAM__PL_DEVICE : kind;
}

void vram__pl_on_alloc(vram__pl_kind k, uint64_t key, uint64_t size, const void *site,
                       uint64_t stream)
{
    (void)stream;
    const void *ctx = vram__pl_current_context(); /* before the lock: a driver call */
    pthread_mutex_lock(&mu);
    vram__pl_kind_stats *s = &kinds[k];
    s->calls++;
    s->live_bytes += size;
    s->live_count++;
    if (s->live_bytes > s->peak_bytes)
        s->peak_bytes = s->live_bytes;
    if (vram__pl_charged(k)) {
        charged += size;
        if (charged > peak)
            peak = charged;
        vram__pl_stage *st = &stages[n_stages - 1];
        if (charged > st->peak)
            st->peak = charged;
    }
    int kept = 0;
    if (table && key != EMPTY && key != GONE) {
        uint32_t i = hash(key, key_kind(k));
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (SLOTS - 1)) {
            if (table[i].key == EMPTY || table[i].key == GONE) {
                table[i] = (entry){.key = key, .size = size, .site = site, .ctx = ctx, .kind = k};
                kept = 1;
                break;
            }
        }
    }
    if (!kept)
        untracked++;
    pthread_mutex_unlock(&mu);
}

void vram__pl_on_fail(vram__pl_kind k, uint64_t size, uint64_t stream)
{
    (void)size;
    (void)stream;
    pthread_mutex_lock(&mu);
    kinds[k].calls++;
    kinds[k].failures++;
    pthread_mutex_unlock(&mu);
}

uint64_t vram__pl_on_free(vram__pl_kind k, uint64_t key, uint64_t stream)
{
    (void)stream;
    uint64_t size = 0;
    pthread_mutex_lock(&mu);
    if (table && key != EMPTY && key != GONE) {
        uint32_t i = hash(key, key_kind(k));
        for (uint32_t probe = 0; probe < 64; probe++, i = (i + 1) & (SLOTS - 1)) {
            if (table[i].key == EMPTY)
                break;
            if (table[i].key == key && same_class(table[i].kind, k)) {
                vram__pl_kind kk = (vram__pl_kind)table[i].kind;
                size = table[i].size;
                table[i].key = GONE;
                vram__pl_kind_stats *s = &kinds[kk];
                s->frees++;
                s->live_bytes -= size < s->live_bytes ? size : s->live_bytes;
                s->live_count -= s->live_count ? 1 : 0;
                if (vram__pl_charged(kk))
                    charged -= size < charged ? size : charged;
                break;
            }
        }
    }
    pthread_mutex_unlock(&mu);
    return size;
}

uint64_t vram__pl_drop_context(const void *ctx)
{
    uint64_t dropped = 0;
    if (!ctx)
        return 0;
    pthread_mutex_lock(&mu);
    for (uint32_t i = 0; table && i < SLOTS; i++) {
        entry *e = &table[i];
        if (e->key == EMPTY || e->key == GONE || e->ctx != ctx)
            continue;
        vram__pl_kind_stats *st = &kinds[e->kind];
        st->frees++;
        st->live_bytes -= e->size < st->live_bytes ? e->size : st->live_bytes;
        st->live_count -= st->live_count ? 1 : 0;
        if (vram__pl_charged((vram__pl_kind)e->kind)) {
            charged -= e->size < charged ? e->size : charged;
            dropped += e->size;
        }
        e->key = GONE;
    }
    pthread_mutex_unlock(&mu);
    return dropped;
}

void *vram__pl_primary_of(int device)
{
    void *ctx = NULL;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_contexts && !ctx; i++)
        if (contexts[i].primary && contexts[i].device == device && contexts[i].alive)
            ctx = contexts[i].ctx;
    pthread_mutex_unlock(&mu);
    return ctx;
}

uint64_t vram__pl_charged_bytes(void)
{
    pthread_mutex_lock(&mu);
    uint64_t c = charged;
    pthread_mutex_unlock(&mu);
    return c;
}

uint64_t vram__pl_peak_bytes(void)
{
    pthread_mutex_lock(&mu);
    uint64_t p = peak;
    pthread_mutex_unlock(&mu);
    return p;
}

int vram__pl_touched(void)
{
    pthread_mutex_lock(&mu);
    int any = n_contexts > 0;
    for (int k = 0; k < VRAM__PL_KINDS && !any; k++)
        any = kinds[k].calls > 0;
    pthread_mutex_unlock(&mu);
    return any;
}

uint64_t vram__pl_untracked(void)
{
    pthread_mutex_lock(&mu);
    uint64_t u = untracked;
    pthread_mutex_unlock(&mu);
    return u;
}

void vram__pl_kind_stats_get(vram__pl_kind k, vram__pl_kind_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = kinds[k];
    pthread_mutex_unlock(&mu);
}

void vram__pl_on_context(void *ctx, int device, uint64_t cost, int primary)
{
    pthread_mutex_lock(&mu);
    /* A primary context retained again is the same one. */
    for (size_t i = 0; primary && i < n_contexts; i++)
        if (contexts[i].primary && contexts[i].device == device && contexts[i].alive) {
            pthread_mutex_unlock(&mu);
            return;
        }
    if (n_contexts < CONTEXTS)
        contexts[n_contexts++] = (vram__pl_context){.ctx = ctx, .device = device,
                                                    .primary = primary, .alive = 1,
                                                    .cost = cost};
    pthread_mutex_unlock(&mu);
}

void vram__pl_on_context_gone(void *ctx, int primary, int device)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_contexts; i++) {
        vram__pl_context *c = &contexts[i];
        if (c->alive && (primary ? c->primary && c->device == device : c->ctx == ctx)) {
            c->alive = 0;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
}

size_t vram__pl_contexts(vram__pl_context *out, size_t cap)
{
    pthread_mutex_lock(&mu);
    size_t n = n_contexts < cap ? n_contexts : cap;
    memcpy(out, contexts, n * sizeof *out);
    pthread_mutex_unlock(&mu);
    return n;
}

void vram__pl_live_each(vram__pl_live_fn fn, void *arg)
{
    pthread_mutex_lock(&mu);
    for (uint32_t i = 0; table && i < SLOTS; i++)
        if (table[i].key != EMPTY && table[i].key != GONE)
            fn(arg, (vram__pl_kind)table[i].kind, table[i].key, table[i].size, table[i].site);
    pthread_mutex_unlock(&mu);
}

void vram__pl_mark(const char *name)
{
    pthread_mutex_lock(&mu);
    if (n_stages < STAGES) {
        vram__pl_stage *st = &stages[n_stages++];
        snprintf(st->name, sizeof st->name, "%s", name ? name : "(unnamed)");
        st->start_live = charged;
        st->peak = charged;
    }
    pthread_mutex_unlock(&mu);
}

size_t vram__pl_stages(vram__pl_stage *out, size_t cap)
{
    pthread_mutex_lock(&mu);
    size_t n = n_stages < cap ? n_stages : cap;
    memcpy(out, stages, n * sizeof *out);
    pthread_mutex_unlock(&mu);
    return n;
}

/* The child of a fork holds no device memory and no context of its own:
 * it starts counting from nothing. */
void vram__pl_ledger_after_fork(void)
{
    pthread_mutex_init(&mu, NULL);
    if (table) { /* a fresh mapping: the parent's entries are not copied */
        munmap(table, (size_t)SLOTS * sizeof(entry));
        void *p = mmap(NULL, (size_t)SLOTS * sizeof(entry), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        table = p == MAP_FAILED ? NULL : p;
    }
    memset(kinds, 0, sizeof kinds);
    charged = peak = untracked = 0;
    n_contexts = 0;
    n_stages = 1;
    stages[0].start_live = stages[0].peak = 0;
}
