/* tests/fuzz/fuzz_trace.c - libFuzzer target for the trace parser: any bytes
 * go to vram_trace_parse(); it must not crash or leak, must leave the result
 * NULL on error, and on success the trace must keep the contract of
 * vramkit/trace.h (slots, counters, peak), which is checked here against a
 * simple model and aborts when broken. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vramkit/error.h"
#include "vramkit/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const vram_trace *t)
{
    uint64_t *owner = calloc(t->n_slots + 1, sizeof *owner);
    if (!owner)
        return;
    size_t live = 0, max_live = 0, counts[3] = {0, 0, 0};
    uint64_t bytes = 0, peak = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const vram_trace_event *e = &t->events[i];
        if (e->action > VRAM_TRACE_ALLOC_FAIL || e->stream_index >= t->n_streams)
            abort();
        counts[e->action]++;
        if (e->action == VRAM_TRACE_ALLOC_FAIL) {
            if (e->slot != UINT32_MAX)
                abort();
            continue;
        }
        if (e->slot >= t->n_slots || e->ptr == 0)
            abort();
        if (e->action == VRAM_TRACE_ALLOC) {
            if (owner[e->slot] || e->size == 0)
                abort();
            owner[e->slot] = e->ptr;
            bytes += e->size;
            if (bytes > peak)
                peak = bytes;
            if (++live > max_live)
                max_live = live;
        } else {
            if (owner[e->slot] != e->ptr)
                abort();
            owner[e->slot] = 0;
            bytes -= e->size;
            live--;
        }
    }
    if (counts[0] != t->n_allocs || counts[1] != t->n_frees || counts[2] != t->n_failures ||
        max_live != t->n_slots || live != t->unfreed_blocks || peak != t->peak_live_bytes)
        abort();
    free(owner);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vram_trace *t = (vram_trace *)&t;
    int rc = vram_trace_parse((const char *)data, size, "fuzz.csv", &t);
    if (rc) {
        if (t != NULL || (rc != VRAM_EPARSE && rc != VRAM_EHOSTMEM))
            abort();
        if (rc == VRAM_EPARSE && strncmp(vram_last_error(), "fuzz.csv:", 9) != 0)
            abort();
        return 0;
    }
    check(t);
    vram_trace_free(t);
    return 0;
}
