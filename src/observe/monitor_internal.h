/* src/observe/monitor_internal.h - what the monitor's files share: the line
 * fit and Student's t (trend.c), the sample writers (series.c), the alert
 * state machine (alert.c) and the monitor itself (monitor.c). */
#ifndef VRAM_OBSERVE_MONITOR_INTERNAL_H
#define VRAM_OBSERVE_MONITOR_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include "base/internal.h"
#include "vramkit/monitor.h"

/* ---- trend.c ---- */

/* A least-squares line y = a + slope x. */
typedef struct vram__fit {
    size_t n;
    double slope;
    double stderr_slope; /* standard error of the slope (0 for a perfect fit) */
    double r2;           /* 1 - residual / total sum of squares (0 when y is constant) */
    double t;            /* slope / stderr_slope (+-INFINITY for a perfect non-flat fit) */
    double confidence;   /* P(slope > 0): Student's t with n - 2 degrees of freedom */
} vram__fit;

/* Fit n >= 3 points. VRAM_EINVAL (with the reason) when n < 3 or every x is
 * the same. */
int vram__fit_line(const double *x, const double *y, size_t n, vram__fit *out);

/* P(T <= t) for Student's t with df > 0 degrees of freedom. */
double vram__t_cdf(double t, double df);

/* ---- series.c ---- */

/* The CSV header line (with its newline). */
extern const char vram__monitor_csv_header[];

/* One sample as CSV rows / as one JSON Lines object; an alert as one JSON
 * Lines object. Return 0 or VRAM_EIO naming `path`. */
int vram__series_csv(FILE *f, const char *path, const vram_sample *s);
int vram__series_jsonl(FILE *f, const char *path, const vram_sample *s);
int vram__series_alert_jsonl(FILE *f, const char *path, const vram_alert *a);

/* Write `s` as a JSON string (quoted and escaped) to f. */
void vram__json_string(FILE *f, const char *s);

/* ---- alert.c ---- */

/* An alert that is raised now: its key and level. */
typedef struct vram__alert_state {
    vram_alert_type type;
    char *pool;
    char *owner; /* budget alerts */
    int level;   /* VRAM_ALERT_LEVEL_WARNING or _CRITICAL */
    uint32_t lower_for; /* samples in a row that called for a lower level */
} vram__alert_state;

typedef struct vram__alerts {
    vram__alert_state *active;
    size_t n_active, cap_active;
    uint32_t hold_samples; /* opts.hold_samples (0 counts as 1) */
    uint64_t counts[VRAM_ALERT_TYPE_COUNT][VRAM_ALERT_LEVEL_COUNT];
} vram__alerts;

/* Where a raised or cleared alert goes, besides the counters: the
 * callback, the log and the JSON Lines file. */
typedef void (*vram__alert_sink)(void *ctx, const vram_alert *a);

/* One measured value against a warning and a critical threshold (INFINITY:
 * no critical level), with hysteresis: an alert at some level stays until
 * the value falls below that level's threshold times clear_ratio. Emits an
 * alert (through sink) only when the level changes. raised >= -1 sets the
 * level instead of comparing (-1: none; growth passes its verdict); -2
 * compares value with the thresholds. `a` carries the time,
 * iteration, pool and owner; its type, level, value, threshold and message
 * are filled here. unit_fmt formats value and thresholds in the message:
 * 'r' as a ratio, 'p' as a percentage, 'b' as bytes per iteration, 'm' as
 * bytes per minute. VRAM_EHOSTMEM if the state could not be kept. */
int vram__alert_update(vram__alerts *al, vram_alert *a, double value, double warn, double crit,
                       double clear_ratio, int raised, char unit_fmt, vram__alert_sink sink,
                       void *ctx);

/* Forget every alert of a pool (it is no longer watched). */
void vram__alerts_forget_pool(vram__alerts *al, const char *pool);
void vram__alerts_free(vram__alerts *al);
/* Active alerts of a type and level. */
unsigned vram__alerts_active(const vram__alerts *al, vram_alert_type type, int level);

#endif
