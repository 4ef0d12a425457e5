/* bench/density.h - what the parts of bench_density share: the options,
 * one stream's counters as a design reports them, the table of functions
 * each design (vramkit's service, the baseline of one thread and one CUDA
 * context per stream) offers the harness, the NVML sampler and the report.
 * density.c is the harness (it says what is measured); density_vramkit.c,
 * density_baseline.c, density_nvml.c and density_report.c are the rest. */
#ifndef VRAM_BENCH_DENSITY_H
#define VRAM_BENCH_DENSITY_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vramkit.h"

#define DENSITY_MAX_STREAMS 2048
/* The most GPUs one run spreads its streams over (--gpus). */
#define DENSITY_MAX_GPUS 16

/* Latency histogram: bucket 0 holds up to 0.125 ms, bucket i up to
 * 0.125 x 2^(i/4) ms (four a doubling), the last everything above. */
#define DENSITY_HIST_BUCKETS 80

typedef struct density_opts {
    const char *clip, *codec_label, *model, *out, *json, *commit;
    int design_vramkit, design_baseline; /* which designs run, vramkit first */
    unsigned start, step, max, refine;
    double seconds, warmup_s;
    unsigned workers, batch;
    int graphs;                /* -1: VRAM_ENGINE_GRAPHS */
    vram_decode decode;        /* vramkit's streams */
    unsigned extra_surfaces, queue_frames, in_flight;
    double min_fps, max_drop_pct, nominal_fps;
    int early_stop;
    uint64_t budget_case;      /* > 0: only the budget case, at this budget */
    unsigned budget_max;       /* the budget case stops adding there */
    int device;                /* CUDA ordinal */
    int gpus[DENSITY_MAX_GPUS]; /* --gpus: vramkit runs a fleet over these; */
    size_t n_gpus;             /* 0: one service on `device` */
    int argc;
    char **argv;
    /* From the clip, probed at start. */
    int clip_width, clip_height;
    double clip_fps;
    char clip_codec[32];
} density_opts;

/* One stream's counters since it started, as the design last read them. */
typedef struct density_stream {
    uint64_t frames_in;        /* decoded */
    uint64_t processed;        /* through the model, results read */
    uint64_t dropped;          /* frames (and results) it dropped */
    uint64_t latency[DENSITY_HIST_BUCKETS]; /* decoded to result, every frame */
    double svc_p50_ms, svc_p99_ms; /* vramkit: the service's own, since the stream began */
    uint64_t live_bytes, decoder_bytes, frames_bytes, need_bytes; /* vramkit's accounting */
    int nvdec;                 /* decoded on NVDEC */
    int failed;                /* failed, ended or died */
    char error[320];
} density_stream;

/* A design under test. Every function returns 0 or a negative VRAM_E*
 * code with the sentence in vram_last_error(). */
typedef struct density_design {
    const char *name;
    /* Run exactly n streams, each fully started when this returns (adding
     * or removing the last ones). On error the streams that did start are
     * kept: *have says how many there are. */
    int (*resize)(void *self, unsigned n, unsigned *have);
    /* Each stream's counters into out[0 .. n-1] (n: the streams running). */
    int (*sample)(void *self, density_stream *out, unsigned n);
    /* What the design holds apart from its streams, for the header. */
    void (*describe)(void *self, char *buf, size_t cap);
    void (*close)(void *self);
    void *self;
    uint64_t fixed_bytes;      /* vramkit: the service's fixed need (accounted); 0 else */
    int is_baseline;
} density_design;

/* The designs. `dev` is the harness's (borrowed). */
int density_vramkit_open(const density_opts *o, uint64_t budget, density_design *out);
int density_baseline_open(const density_opts *o, vram_device *dev, density_design *out);

/* The budget case of each design: how many streams fit `budget`. */
typedef struct density_budget_row {
    const char *design;
    uint64_t budget;
    unsigned admitted;
    char why[768];             /* the refusal, or what ended it */
    uint64_t used_before, used_after; /* NVML: device used bytes */
    uint64_t fixed_bytes;      /* vramkit: the service's fixed need */
    uint64_t need_bytes;       /* vramkit: one stream's need at admission */
} density_budget_row;

/* ---- NVML, sampled once a second on a thread of its own ---- */

typedef struct density_nvml density_nvml;

/* The GPU's figures over a window, from the samples in it. -1: unknown. */
typedef struct density_gpu_window {
    unsigned samples;
    double sm_util_pct;        /* nvmlDeviceGetUtilizationRates' gpu: time a kernel ran */
    double dec_util_pct;       /* nvmlDeviceGetDecoderUtilization */
    uint64_t used_max, used_mean; /* device used bytes */
} density_gpu_window;

/* Start sampling the n GPUs at `pci_bus_ids`: used bytes are their sum,
 * utilization their mean. Utilization that this NVML does not offer reads
 * -1; no NVML at all is an error. */
int density_nvml_open(const char *const *pci_bus_ids, size_t n, density_nvml **out);
void density_nvml_close(density_nvml *n);
/* Device used bytes now (NVML). */
int density_nvml_used(density_nvml *n, uint64_t *used, uint64_t *total);
/* This process's device bytes (NVML's process list): 0 and *known 0 when
 * NVML does not list it; *only 1 when the process was matched as the only
 * one listed (its PID not visible from here). */
int density_nvml_process_used(density_nvml *n, uint64_t *used, int *known, int *only);
/* The window: samples from begin on, read at end. */
void density_nvml_window_begin(density_nvml *n);
void density_nvml_window_end(density_nvml *n, density_gpu_window *out);
const char *density_nvml_driver(const density_nvml *n);

/* ---- one step, as the report prints it ---- */

typedef struct density_row {
    const char *design;
    unsigned n;                /* streams asked for */
    unsigned have;             /* streams running */
    int sustained;
    double window_s;
    int early;                 /* the window ended early: the verdict was certain */
    double min_fps, mean_fps;
    double dropped_pct;        /* all streams' drops over all their frames */
    double worst_drop_pct;
    unsigned short_streams;    /* below min_fps */
    unsigned dropping_streams; /* above max_drop_pct */
    unsigned failed_streams;
    uint64_t used, used_mean, used_before; /* NVML, device */
    uint64_t proc_used;        /* this process, when known */
    int proc_known, proc_only;
    double mib_per_stream, marginal_mib; /* marginal: since the last step measured */
    int has_marginal;
    double accounted_mib;      /* vramkit: mean live bytes per stream; < 0 otherwise */
    double p50_ms, p99_ms;     /* median of streams' p50, worst p99, over the window */
    double svc_p50_ms, svc_p99_ms; /* vramkit: the service's (since start); < 0 otherwise */
    double sm_util, dec_util;
    double cpu_us_per_frame;
    uint64_t frames;           /* processed in the window, all streams */
    unsigned cpu_decoded;      /* streams not on NVDEC */
    char note[512];
} density_row;

/* The report: stdout and, when given, the Markdown file (appended) and the
 * JSON Lines file (appended), each flushed after every row. */
typedef struct density_report {
    FILE *md, *jsonl;
    const density_opts *o;
    char gpu[96], driver[96], machine[400];
    int cuda_driver;
    uint64_t total_bytes;
} density_report;

int density_report_open(density_report *r, const density_opts *o);
void density_report_close(density_report *r);
/* A design's section: the header lines and the table's head. */
void density_report_begin(density_report *r, const char *design, const char *what,
                          uint64_t used_idle, uint64_t used_before);
void density_report_row(density_report *r, const density_row *row);
void density_report_end(density_report *r, const char *design, unsigned best,
                        double mib_at_best, const char *why_stopped);
void density_report_budget(density_report *r, const density_budget_row *rows, int n);

/* ---- shared helpers (density.c) ---- */

/* Set by SIGINT/SIGTERM: stop as soon as possible, cleanly. */
extern volatile sig_atomic_t density_interrupted;

uint64_t density_now_ns(void);
/* Sleep `s` seconds, in small pieces; 1 when interrupted first. */
int density_sleep(double s);
/* The bucket of a latency, and a percentile (0..1) of a histogram, as the
 * upper edge of the bucket holding it, in ms (0 for an empty one). */
unsigned density_hist_bucket(double ms);
double density_hist_percentile(const uint64_t *hist, double q);
double density_mib(uint64_t bytes);

#endif
