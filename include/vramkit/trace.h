/* vramkit/trace.h - allocation traces in RMM's logging_resource_adaptor CSV
 * format: header `Thread,Time,Action,Pointer,Size,Stream`, Time HH:MM:SS.ffffff,
 * Action `allocate`, `free` or `allocate failure`, Pointer 0x-hex, Size in
 * bytes as requested, Stream hex (0 is the default stream); extra columns may
 * follow. Files may be gzip-compressed (detected from their content).
 *
 * The reader resolves each free to the allocation it ends, so replaying a
 * trace needs no pointer lookups: every allocation is given a slot (slots are
 * reused once freed, so there are as many as blocks live at once) and its free
 * names the same slot.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(); *out is NULL on error. A vram_trace is the caller's,
 * with every array in it, freed by vram_trace_free(); its inputs are not
 * kept. A writer is the caller's too, freed by vram_trace_writer_close()
 * whatever it returns. */
#ifndef VRAMKIT_TRACE_H
#define VRAMKIT_TRACE_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_trace_action {
    VRAM_TRACE_ALLOC = 0,      /* "allocate" */
    VRAM_TRACE_FREE = 1,       /* "free" */
    VRAM_TRACE_ALLOC_FAIL = 2, /* "allocate failure" */
} vram_trace_action;

typedef struct vram_trace_event {
    uint64_t ptr;          /* as recorded */
    uint64_t size;         /* bytes as requested */
    uint64_t time_us;      /* microseconds since midnight, as recorded */
    uint32_t slot;         /* ALLOC and FREE: the slot of the block */
    uint32_t stream_index; /* index into vram_trace.streams */
    uint32_t thread;       /* the Thread column */
    uint32_t line;         /* line number in the file (1 is the header) */
    uint8_t action;        /* vram_trace_action */
} vram_trace_event;

typedef struct vram_trace {
    char *name;               /* the path or name it was read from */
    vram_trace_event *events; /* in file order */
    size_t n_events;
    size_t n_allocs, n_frees, n_failures;
    size_t n_slots;           /* most blocks live at once */
    uint64_t *streams;        /* distinct Stream values, in order of appearance */
    size_t n_streams;
    uint64_t peak_live_bytes; /* most bytes live at once, as requested */
    size_t unfreed_blocks;    /* allocations never freed in the trace */
} vram_trace;

/* Read a trace file, plain or gzip. On error returns VRAM_EINVAL (a NULL or
 * empty path, a NULL out), VRAM_EIO (cannot open or read, a directory, cut
 * short, or more than 2 GiB once decompressed), VRAM_EPARSE (malformed:
 * the last error names the file, the line number and the problem) or
 * VRAM_EHOSTMEM, and *out is left NULL. The caller frees the trace with
 * vram_trace_free(). */
VRAM_API int vram_trace_read(const char *path, vram_trace **out);

/* Parse a trace already in memory (uncompressed CSV); `name` (NULL:
 * "(trace)") is used in error messages and copied into the trace's name;
 * `data` is not kept. Same contract as vram_trace_read() (VRAM_EINVAL also
 * for a NULL data with len > 0). */
VRAM_API int vram_trace_parse(const char *data, size_t len, const char *name, vram_trace **out);

/* Free a trace and its arrays; NULL is accepted. */
VRAM_API void vram_trace_free(vram_trace *trace);

/* Writes events in the same format; gzip-compressed when the path ends in
 * ".gz". Not thread-safe: serialise calls (the pool writes under its lock). */
typedef struct vram_trace_writer vram_trace_writer;

/* Create or truncate `path` (copied) and write the header. VRAM_EIO naming
 * the path on failure (nothing is left open), VRAM_EINVAL for a NULL out or
 * a NULL or empty path, VRAM_EHOSTMEM; *out is NULL on error. */
VRAM_API int vram_trace_writer_open(const char *path, vram_trace_writer **out);

/* Append one event; the time column is the current wall-clock time of day
 * (UTC). Returns 0, VRAM_EINVAL for a NULL writer or an unknown action, or
 * VRAM_EIO: once a write failed, every later event and the close return
 * VRAM_EIO too. */
VRAM_API int vram_trace_writer_event(vram_trace_writer *w, vram_trace_action action, uint32_t thread,
                            uint64_t ptr, uint64_t size, uint64_t stream);

/* Hand what was written so far to the file (a gzip file: up to a flush
 * point), so that a process killed later loses none of it. 0, VRAM_EINVAL
 * for NULL, or VRAM_EIO once a write or this flush failed. */
VRAM_API int vram_trace_writer_flush(vram_trace_writer *w);

/* Flush and close; returns 0 or VRAM_EIO if anything could not be written.
 * The writer is freed in both cases. NULL is accepted. */
VRAM_API int vram_trace_writer_close(vram_trace_writer *w);

/* The text of an action ("allocate failure"; "unknown" for another value):
 * a static string. */
VRAM_API const char *vram_trace_action_name(vram_trace_action action);

#ifdef __cplusplus
}
#endif
#endif
