/* vramkit/report.h - one self-contained HTML page from what vramkit writes:
 * pool snapshots (vram_pool_snapshot), sample series (the monitor's JSON
 * Lines and CSV) and OOM reports (JSON). The page works offline: its
 * JavaScript (uPlot for the time series, and the page's own) is embedded in
 * the library at build time, and the data in the page.
 *
 * Inputs are recognised by their content, not their name, and checked
 * against the formats as they are read: a malformed one is refused with a
 * sentence naming the input, the line (or the JSON path) and the problem.
 * Long series are downsampled as they are read, keeping the smallest and
 * the largest sample of each interval, so peaks survive; snapshots with
 * more blocks than the page draws have neighbouring blocks of the same
 * owner merged. Any input may be gzip-compressed.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(); *out is NULL on error, and an input that fails to add
 * leaves the report unchanged. The report is the caller's, freed with
 * vram_report_destroy(); what an input holds is copied into it, so the
 * file or bytes need not outlive the call. A report is not thread-safe:
 * serialise the calls on one report. */
#ifndef VRAMKIT_REPORT_H
#define VRAMKIT_REPORT_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_report vram_report;

typedef struct vram_report_opts {
    uint32_t size; /* sizeof(vram_report_opts), which vram_report_opts_init sets; 0
                      reads as this version. The library reads no
                      further than it says. */
    const char *title;      /* page title; NULL: "vramkit report" (copied) */
    uint32_t max_points;    /* most points per series in the page; 0: 2000 (>= 8) */
    uint32_t max_blocks;    /* blocks a snapshot's map draws before merging; 0: 20000 */
    double generated_time_s; /* the page's date (seconds since the epoch); 0: now */
} vram_report_opts;

/* Defaults: title NULL, max_points VRAM_REPORT_MAX_POINTS, max_blocks
 * VRAM_REPORT_MAX_BLOCKS, the date now. Returns 0 or VRAM_EINVAL when one of
 * those variables is malformed (its default is kept). */
VRAM_API int vram_report_opts_init(vram_report_opts *opts);

/* What an input was recognised as. */
typedef enum vram_report_input {
    VRAM_REPORT_SNAPSHOT = 0, /* vram_pool_snapshot() JSON */
    VRAM_REPORT_SERIES_JSONL, /* the monitor's JSON Lines (samples and alerts) */
    VRAM_REPORT_SERIES_CSV,   /* the monitor's CSV */
    VRAM_REPORT_OOM,          /* an OOM report (JSON) */
} vram_report_input;

typedef struct vram_report_input_info {
    vram_report_input type;
    char summary[256];        /* one line: what it holds ("snapshot of pool ...") */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_report_input_info;

/* A report with no inputs yet. VRAM_EINVAL for a NULL out or bad options (a
 * bad opts.size, max_points below 8), VRAM_EHOSTMEM. With opts NULL, a
 * malformed VRAM_REPORT_* variable fails it too (VRAM_EINVAL). */
VRAM_API int vram_report_create(const vram_report_opts *opts, vram_report **out);
/* Free the report and everything added to it; NULL is accepted. */
VRAM_API void vram_report_destroy(vram_report *r);

/* Read the file at `path` (plain or gzip) and add what it holds. VRAM_EIO if
 * it cannot be read (a directory, cut short, or over 16 GiB once
 * decompressed), VRAM_EPARSE if it is empty, not one of the inputs above or
 * malformed ("series.csv:57: ..."), VRAM_EINVAL for a NULL report or path,
 * VRAM_EHOSTMEM; the report is unchanged then. `info` (may be NULL, the
 * caller's) is filled on success; on error it says nothing. */
VRAM_API int vram_report_add_file(vram_report *r, const char *path, vram_report_input_info *info);

/* The same for `len` bytes at `data` (not gzip), named `name` in messages
 * and in the page (both copied). VRAM_EINVAL for a NULL report or name, or
 * NULL data with len > 0. */
VRAM_API int vram_report_add_data(vram_report *r, const char *name, const void *data, size_t len,
                         vram_report_input_info *info);

/* Number of inputs added (0 for NULL). */
VRAM_API size_t vram_report_inputs(const vram_report *r);

/* The whole page (flags 0), or with VRAM_PRINT_JSON the page's data: one
 * JSON object (inputs, series, snapshots, OOM reports) as the page's script
 * reads it. The page is VRAM_ENOSYS if this library was built without its
 * JavaScript (web/node_modules missing at build time; the sentence says how
 * to get it); else 0, the writer's error (what was written stays),
 * VRAM_EINVAL for a NULL argument or unknown flags, or VRAM_EHOSTMEM. The
 * report is not changed: print it as often as wanted. */
VRAM_API int vram_report_print(vram_report *r, vram_write_fn write, void *ctx, unsigned flags);

/* Write the page to `path` through a temporary file in the same directory,
 * renamed over `path` only once complete: on any error `path` is untouched
 * and no temporary file is left. VRAM_EIO with the reason, VRAM_ENOSYS as
 * vram_report_print, VRAM_EINVAL for a NULL report or a NULL or empty
 * path, VRAM_EHOSTMEM. The page is made readable by all (mode 0644). */
VRAM_API int vram_report_write(vram_report *r, const char *path);

#ifdef __cplusplus
}
#endif
#endif
