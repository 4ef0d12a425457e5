/* src/observe/prom.h - the Prometheus text writer (format 0.0.4) that the
 * exposition (metrics.c) and the monitor (monitor.c) share: families,
 * labelled samples, escaping, values. */
#ifndef VRAM_OBSERVE_PROM_H
#define VRAM_OBSERVE_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "vramkit/types.h"

/* ---- the writer ---- */

/* Text goes to write(ctx, ...); set write and ctx, zero the rest. */
typedef struct vram__prom {
    vram_write_fn write;
    void *ctx;
    int rc; /* the first error; everything after it is skipped */
    /* The family announced last: its HELP and TYPE lines are written before
     * its first sample, so a family without samples leaves no trace. */
    const char *fam_name, *fam_type, *fam_help;
} vram__prom;

typedef struct vram__prom_label {
    const char *key, *value;
} vram__prom_label;

void vram__prom_put(vram__prom *p, const char *s, size_t n);
void vram__prom_put_str(vram__prom *p, const char *s);
/* One formatted piece of at most 255 bytes. */
void vram__prom_putf(vram__prom *p, const char *fmt, ...) VRAM__PRINTF(2, 3);

/* Text with backslash and newline escaped, and with `quote` also the double
 * quote (label values escape all three, help text the first two). */
void vram__prom_put_escaped(vram__prom *p, const char *s, int quote);

/* One line, as a comment: `prefix` and then `text`, whose newlines become
 * spaces so that none ends it early. */
void vram__prom_comment(vram__prom *p, const char *prefix, const char *text);

/* Announce a family; the strings must live until its first sample. */
void vram__prom_family(vram__prom *p, const char *name, const char *type, const char *help);

/* "counter" for a name ending in _total, else "gauge". */
const char *vram__prom_type_of(const char *name);

/* The family's lines if still due, then `name`, the n labels and a space:
 * the value and its newline are the caller's. */
void vram__prom_sample_start(vram__prom *p, const char *name, const vram__prom_label *labels,
                             int n);

void vram__prom_sample_u64(vram__prom *p, const char *name, const vram__prom_label *labels, int n,
                           uint64_t v);

/* How a finite double is written. */
typedef enum vram__prom_f64_fmt {
    VRAM__PROM_SHORTEST, /* the shortest of %.15g and %.17g that reads back the same */
    VRAM__PROM_G17,      /* %.17g */
    VRAM__PROM_F9,       /* %.9f (seconds to the nanosecond) */
} vram__prom_f64_fmt;

/* A value and its newline: NaN, +Inf, -Inf, or the number as `fmt` says. */
void vram__prom_value_f64(vram__prom *p, double v, vram__prom_f64_fmt fmt);

/* A sample whose value is written with VRAM__PROM_SHORTEST. */
void vram__prom_sample_f64(vram__prom *p, const char *name, const vram__prom_label *labels, int n,
                           double v);

#endif
