/* tools/vramkit/soak.h - what `vramkit soak`'s two workloads share: the
 * progress line, the slope's format and the alerts and verdict printed at
 * the end (cmd_soak.c), and the service workload (soak_service.c), which
 * soaks `vramkit run` itself: its streams looping while the monitor samples
 * the service's pools every so many frames. */
#ifndef VRAMKIT_SOAK_H
#define VRAMKIT_SOAK_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit.h"

/* "+1.50 KiB", "-40.3 B", "unknown" for NaN. */
char *soak_fmt_slope(char *buf, size_t cap, double v);
/* The progress bar (tty) or line, with the live bytes and pool's slope. */
void soak_progress(vram_monitor *m, const char *pool, uint64_t it, uint64_t n, uint64_t live,
                   int tty);
/* The alerts raised and the leak verdict, on stdout. */
void soak_print_verdict(vram_monitor *m, const vram_trend *tr, double threshold,
                        double confidence);

typedef struct soak_service_args {
    const char *urls;      /* after "run:": URLs separated by commas */
    const char *model;     /* NULL: the default model */
    const char *executor;  /* "cpu" or "cuda" */
    const char *decode;    /* "cpu", "nvdec" or "auto" */
    uint64_t iterations;   /* samples */
    uint64_t frames;       /* frames per stream between samples */
    unsigned workers, batch;
    int json;
} soak_service_args;

/* Run the service workload with the monitor options given (manual
 * sampling): returns the exit status (0 level, 1 growing or an error, 2 too
 * few samples). */
int soak_service(const soak_service_args *a, vram_monitor_opts *mo);

#endif
