/* src/observe/report_series_internal.h - what the files of the sample series
 * reader share: the model of a series as it is read (sparse samples, their
 * columns, the downsampling buckets), the helpers a reader fills it with
 * (report_series.c) and the two readers (report_series_jsonl.c,
 * report_series_csv.c), which report_series.c calls for
 * vram__report_series(). Not part of the public API.
 *
 * Every sample is a sparse row of values, one per column: per pool its
 * presence and its figures (the pool fields of series_fields.h), one column
 * per owner and per kind of the pool, and the GPU's used and total bytes.
 * Columns are made as names first appear, so owners may come and go. */
#ifndef VRAM_OBSERVE_REPORT_SERIES_INTERNAL_H
#define VRAM_OBSERVE_REPORT_SERIES_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "report_internal.h"
#include "series_fields.h"

/* What a column holds: a pool's presence in a sample (1 where sampled), one
 * of its metrics, an owner's or a kind's live bytes, the GPU's used or total
 * bytes, the CUDA contexts vramkit holds. */
enum { COL_PRESENT, COL_METRIC, COL_OWNER, COL_KIND, COL_GPU_USED, COL_GPU_TOTAL, COL_CONTEXTS };

/* A pool's metrics are the series' pool fields: metric m is the field
 * VRAM__SERIES_F_... == m, named vram__rseries_metric_names[m] (in the
 * JSON Lines, the CSV's header and the page) and read with the flags
 * READ_<kind> of its kind. */
#define FIELD_NAME(name, kind, header) #name,
#define N_METRICS VRAM__SERIES_F_COUNT
#define M_LIVE VRAM__SERIES_F_live_bytes
#define READ_BYTES VRAM__RJ_BYTES
#define READ_RATIO VRAM__RJ_NONNEG
extern const char *const vram__rseries_metric_names[N_METRICS];

/* A column: its type (COL_...), its metric (COL_METRIC), its pool and, for
 * owners and kinds, its name. */
typedef struct col {
    uint8_t type;
    uint8_t metric;
    uint32_t pool;
    const char *name; /* owner or kind (inside the key) */
    double budget;    /* owners: the largest budget seen (0: none) */
} col;

/* One value of a sample: its column and the number. */
typedef struct val {
    uint32_t col;
    double v;
} val;

/* One sample: its place on the x axis, its times, its ordering key and its
 * values (in the order set; sorted by column once pushed). */
typedef struct sample {
    double x, time_s, elapsed_s, iteration; /* iteration: NAN if unknown */
    double key;                             /* live bytes, all pools */
    val *v;
    uint32_t n, cap;
} sample;

/* A downsampling bucket: the kept samples with the fewest and the most live
 * bytes. */
typedef struct bucket {
    sample *lo, *hi; /* may be the same sample */
} bucket;

/* A series being read: its names (pools, column keys), columns, buckets,
 * counts, the x axis's runs and what the page shows besides the columns
 * (alerts, the GPU's name, index and processes). */
typedef struct series {
    const char *name;
    int csv;
    uint32_t max_buckets;
    vram__strtab pools;
    vram__strtab keys; /* column keys; index = column */
    col *cols;
    size_t cap_cols;
    char *scratch;
    size_t scratch_cap;
    bucket *b;
    size_t nb, cap_b;
    uint64_t width, filled; /* samples per bucket; in the last one so far */
    uint64_t samples, ignored, alerts_dropped, restarts;
    int have_run;
    double run_start, last_x, last_elapsed, first_x;
    cJSON *alerts, *processes, *gpu_name, *gpu_index;
    char *gpu_unavailable;
    sample *cur; /* the sample being read */
    int have_gpu, have_contexts;
} series;

/* ---- the model (report_series.c) ---- */

/* A new empty sample (iteration unknown), or NULL on host memory
 * exhaustion. The caller owns it until it is pushed. */
sample *vram__rseries_sample_new(void);
/* Free a sample and its values; NULL is ignored. */
void vram__rseries_sample_free(sample *x);
/* Add the value v of column c to the sample. 0 or VRAM_EHOSTMEM (the sample
 * is left as it was). */
int vram__rseries_sample_set(sample *x, uint32_t c, double v);

/* The column for (type, metric, pool, name: `len` bytes, not terminated),
 * made if new, in *out. 0, VRAM_EHOSTMEM, or VRAM_ELIMIT past the most
 * columns a series may have. */
int vram__rseries_column(series *s, int type, int metric, uint32_t pool, const char *name,
                         size_t len, uint32_t *out);
/* The index of the pool named `name` (`len` bytes), added if new.
 * 0 or VRAM_EHOSTMEM. */
int vram__rseries_pool_index(series *s, const char *name, size_t len, uint32_t *pool);

/* Give a placed sample to the downsampling, which owns it from then on,
 * even on error: VRAM_EPARSE when a column is twice in it (a pool, owner or
 * kind listed twice; `line` names where), VRAM_EHOSTMEM. */
int vram__rseries_push(series *s, sample *x, uint32_t line);
/* Set the sample's x from its elapsed_s, starting a new run when elapsed_s
 * goes back (report_series.c's top says how). VRAM_EPARSE (naming `line`)
 * when a new run would begin before the previous sample; the caller still
 * owns the sample. */
int vram__rseries_place(series *s, sample *x, uint32_t line);

/* ---- the readers ---- */

/* Read a whole input into s: JSON Lines (report_series_jsonl.c) or CSV
 * (report_series_csv.c). 0, or an error with the last error naming the
 * input and the line; s is then freed by the caller as it stands. */
int vram__rseries_jsonl_read(series *s, vram__rsrc *src);
int vram__rseries_csv_read(series *s, vram__rsrc *src);

#endif
