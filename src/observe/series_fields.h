/* src/observe/series_fields.h - the series format's one list of pool fields:
 * the figures of each pool in a sample, as the CSV's pool columns and the
 * JSON Lines pool object's keys, in file order. The writer (series.c) and the
 * readers (report_series_csv.c, report_series_jsonl.c) expand this list, so
 * adding a field here adds it to both files and to the report's readers at
 * once.
 *
 * X(name, kind, header):
 *   name    the vram_sample_pool member and the field's name in both files
 *   kind    BYTES (a whole number of bytes, written as %llu) or
 *           RATIO (a number >= 0, written as %.6f)
 *   header  REQUIRED: every CSV's header names the column; OPTIONAL: CSVs
 *           written before the field was added lack it, and the report
 *           reads them as never having sampled it. A field added later is
 *           OPTIONAL, or the report refuses the files written before it.
 *
 * live_bytes stays first: an owner's or a kind's CSV row fills that column
 * alone, and the report orders samples by it. */
#ifndef VRAM_OBSERVE_SERIES_FIELDS_H
#define VRAM_OBSERVE_SERIES_FIELDS_H

#define VRAM__SERIES_POOL_FIELDS(X)                                            \
    X(live_bytes, BYTES, REQUIRED)                                             \
    X(peak_live_bytes, BYTES, REQUIRED)                                        \
    X(reserved_bytes, BYTES, REQUIRED)                                         \
    X(pending_bytes, BYTES, OPTIONAL)                                          \
    X(fragmentation_ratio, RATIO, REQUIRED)                                    \
    X(largest_free_bytes, BYTES, REQUIRED)

/* The fields' places in the list: VRAM__SERIES_F_live_bytes, ... */
enum {
#define VRAM__SERIES_F_ENUM(name, kind, header) VRAM__SERIES_F_##name,
    VRAM__SERIES_POOL_FIELDS(VRAM__SERIES_F_ENUM)
#undef VRAM__SERIES_F_ENUM
    VRAM__SERIES_F_COUNT
};

_Static_assert(VRAM__SERIES_F_live_bytes == 0, "live_bytes must stay the first pool field");

#endif
