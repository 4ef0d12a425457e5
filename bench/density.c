/* bench/density.c - how many 1080p30 streams one GPU carries: vramkit's
 * service against the usual design of a multi-camera program, and what each
 * stream costs in device memory. This file is the harness: options, the
 * clip's probe, the rising steps and their windows, the budget case.
 *
 * Both designs run N paced streams (the same file looping at its frame
 * rate, as a camera would deliver it) through the model (BlazeFace-back,
 * 256x256) on every frame:
 *   vramkit  (density_vramkit.c): one vram_service, executor cuda, NVDEC
 *            decoding on the device's one shared context, W workers batching
 *            up to B frames across streams (optionally replayed as CUDA
 *            graphs); a step adds its streams to the running service.
 *   baseline (density_baseline.c): one thread per stream, each with its own
 *            CUDA context (cuCtxCreate), its own NVDEC decoder in it,
 *            cuMemAlloc/cuMemFree of its frame copy and model input on every
 *            frame, and its own engine and execution context at batch 1.
 *
 * A step runs N streams: after a warm-up (--warmup, excluded) the window of
 * --seconds starts, and every stream's counters are read at both ends.
 * A stream keeps up when it processed at least --min-fps frames a second
 * over the window and dropped at most --max-drop percent of the frames it
 * decoded; the step is sustained when every one of the N streams kept up
 * (a stream that failed, a refused add or a dead baseline thread ends the
 * step as not sustained). N starts at --start and rises by --step until a
 * step is not sustained or --max is reached; with --refine S, the steps
 * after the first failure go back to the last sustained N and rise by S.
 * The answer is the largest sustained N.
 *
 * Each step reports: min and mean per-stream fps; dropped percent; the
 * device's used memory (NVML, the peak of the 1 s samples in the window;
 * this process's too where NVML lists it), before any stream, per stream
 * ((used at N - used before streams) / N) and per added stream between
 * steps; latency from decoded to result, per stream over the window (the
 * median of the streams' p50 and the worst stream's p99; vramkit's also
 * as the service's statistics give it, since each stream began); NVDEC and
 * GPU utilization (NVML, 1 s samples, the mean over the window; the "GPU"
 * figure is NVML's share of time a kernel ran, not SM occupancy); CPU time
 * (user + system, the whole process) per frame processed. A step whose
 * outcome is certain before the window ends (a stream dropped more than
 * the whole window allows, or fell behind by more than it could catch up,
 * assuming --fps at most and 2 s of backlog) ends early with --early-stop.
 *
 * --budget-case SIZE instead asks how many streams each design admits
 * within SIZE of device memory: vramkit's service with that budget takes
 * streams until vram_service_add_stream refuses (VRAM_EBUDGET; its
 * sentence is reported); the baseline starts threads (each fully running)
 * until the device's used memory since before the first would pass SIZE.
 *
 * Output: a Markdown section per design (header: command, date, commit,
 * GPU, driver) with a row per step, printed as it goes and appended to
 * --out; a JSON line per step (and a summary line per design) to --json.
 * SIGINT or SIGTERM ends the step at hand and the run, cleanly. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/tool_util.h"
#include "density.h"

#define EARLY_AFTER_S 10.0 /* the earliest a window may end early */
#define BACKLOG_S 2.0      /* frames a stream may have waiting to catch up, in seconds */

volatile sig_atomic_t density_interrupted;

static void on_signal(int sig)
{
    density_interrupted = 1;
    (void)sig;
}

uint64_t density_now_ns(void) { return tool_now_ns(); }

int density_sleep(double s)
{
    uint64_t end = density_now_ns() + (uint64_t)(s > 0 ? s * 1e9 : 0);
    for (;;) {
        if (density_interrupted)
            return 1;
        uint64_t now = density_now_ns();
        if (now >= end)
            return 0;
        uint64_t left = end - now, piece = left < 100000000ull ? left : 100000000ull;
        struct timespec ts = {(time_t)(piece / 1000000000ull), (long)(piece % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

unsigned density_hist_bucket(double ms)
{
    if (!(ms > 0.125))
        return 0;
    double b = ceil(4.0 * log2(ms / 0.125));
    return b >= DENSITY_HIST_BUCKETS - 1 ? DENSITY_HIST_BUCKETS - 1 : (unsigned)b;
}

double density_hist_percentile(const uint64_t *hist, double q)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < DENSITY_HIST_BUCKETS; i++)
        total += hist[i];
    if (!total)
        return 0;
    uint64_t want = (uint64_t)ceil(q * (double)total), seen = 0;
    if (want < 1)
        want = 1;
    for (unsigned i = 0; i < DENSITY_HIST_BUCKETS; i++) {
        seen += hist[i];
        if (seen >= want)
            return 0.125 * exp2((double)i / 4.0);
    }
    return 0.125 * exp2((double)(DENSITY_HIST_BUCKETS - 1) / 4.0);
}

double density_mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return 0;
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the clip ---- */

/* Open the clip once on the CPU for its size, rate and codec: a clip that
 * cannot be read is told before any design starts. */
static int probe_clip(density_opts *o)
{
    vram_backend *be = NULL;
    vram_pool *pool = NULL;
    vram_source *src = NULL;
    vram_backend_opts bo;
    vram_backend_opts_init(&bo);
    bo.capacity = 1ull << 30;
    int rc = vram_backend_create("host", &bo, &be);
    if (!rc) {
        vram_pool_opts po;
        vram_pool_opts_init(&po);
        po.name = "density-probe";
        po.backend = be;
        po.configured_listeners = 0;
        rc = vram_pool_create(&po, &pool);
    }
    if (!rc) {
        vram_source_opts so;
        vram_source_opts_init(&so);
        so.url = o->clip;
        so.pool = pool;
        rc = vram_source_open(&so, &src);
    }
    vram_source_info info;
    if (!rc && !(rc = vram_source_info_get(src, &info))) {
        o->clip_width = info.width;
        o->clip_height = info.height;
        o->clip_fps = info.fps;
        snprintf(o->clip_codec, sizeof o->clip_codec, "%s", info.codec);
    }
    tool_saved_error saved;
    tool_error_save(&saved);
    vram_source_close(src);
    vram_pool_destroy(pool);
    vram_backend_destroy(be);
    return rc ? tool_error_restore(&saved, rc) : 0;
}

/* ---- one step ---- */

typedef struct harness {
    density_opts *o;
    density_nvml *nvml;
    density_report *report;
    density_stream *a, *b; /* counters at the window's start and now */
} harness;

static uint64_t used_now(harness *h)
{
    uint64_t used = 0;
    density_nvml_used(h->nvml, &used, NULL);
    return used;
}

/* Whether stream i cannot keep up any more, whatever the rest of the window
 * brings: its drops already pass what the whole window allows, or it is
 * further behind than a stream at the nominal rate with its backlog could
 * catch up. */
static int certain_miss(const density_opts *o, const density_stream *a, const density_stream *b,
                        double elapsed, double window)
{
    double left = window - elapsed > 0 ? window - elapsed : 0;
    double most_more = o->nominal_fps * (left + BACKLOG_S);
    double done = (double)(b->processed - a->processed);
    if (done + most_more < o->min_fps * window)
        return 1;
    double in_most = (double)(b->frames_in - a->frames_in) + most_more;
    return (double)(b->dropped - a->dropped) > o->max_drop_pct / 100.0 * in_most;
}

/* Append a clause to a row's note ("; " between clauses; cut short to fit). */
static void note_add(density_row *row, const char *fmt, ...) TOOL_PRINTF(2, 3);
static void note_add(density_row *row, const char *fmt, ...)
{
    size_t len = strlen(row->note);
    if (len && len + 2 < sizeof row->note) {
        memcpy(row->note + len, "; ", 3);
        len += 2;
    }
    if (len + 1 >= sizeof row->note)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->note + len, sizeof row->note - len, fmt, ap);
    va_end(ap);
}

static void measure_step(harness *h, density_design *d, unsigned n, uint64_t used_before,
                         density_row *row)
{
    const density_opts *o = h->o;
    memset(row, 0, sizeof *row);
    row->design = d->name;
    row->n = n;
    row->accounted_mib = -1;
    row->svc_p50_ms = row->svc_p99_ms = -1;
    row->sm_util = row->dec_util = -1;
    row->used_before = used_before;
    fprintf(stderr, "bench_density: %s: %u streams\n", d->name, n);
    unsigned have = 0;
    int rc = d->resize(d->self, n, &have);
    row->have = have;
    if (rc) {
        snprintf(row->note, sizeof row->note, "%u of %u streams running: %s (%s)", have, n,
                 vram_last_error(), vram_err_name(rc));
        row->used = used_now(h);
        return;
    }
    if (density_sleep(o->warmup_s)) {
        snprintf(row->note, sizeof row->note, "interrupted in the warm-up");
        return;
    }
    if ((rc = d->sample(d->self, h->a, n))) {
        snprintf(row->note, sizeof row->note, "reading the streams: %s", vram_last_error());
        return;
    }
    uint64_t t0 = density_now_ns(), c0 = cpu_ns();
    density_nvml_window_begin(h->nvml);
    double elapsed = 0;
    int stop = 0;
    while (!stop) {
        double left = o->seconds - elapsed;
        if (density_sleep(left < 1.0 ? left : 1.0))
            stop = 1;
        elapsed = (double)(density_now_ns() - t0) / 1e9;
        if ((rc = d->sample(d->self, h->b, n))) {
            snprintf(row->note, sizeof row->note, "reading the streams: %s", vram_last_error());
            density_gpu_window ignored;
            density_nvml_window_end(h->nvml, &ignored);
            return;
        }
        if (elapsed >= o->seconds)
            break;
        for (unsigned i = 0; i < n && !stop; i++)
            if (h->b[i].failed)
                stop = 1;
        if (!stop && o->early_stop && elapsed >= EARLY_AFTER_S)
            for (unsigned i = 0; i < n && !stop; i++)
                if (certain_miss(o, &h->a[i], &h->b[i], elapsed, o->seconds))
                    stop = row->early = 1;
    }
    uint64_t t1 = density_now_ns(), c1 = cpu_ns();
    density_gpu_window gw;
    density_nvml_window_end(h->nvml, &gw);
    row->window_s = (double)(t1 - t0) / 1e9;
    row->sm_util = gw.sm_util_pct;
    row->dec_util = gw.dec_util_pct;
    row->used = gw.samples ? gw.used_max : used_now(h);
    row->used_mean = gw.samples ? gw.used_mean : row->used;
    density_nvml_process_used(h->nvml, &row->proc_used, &row->proc_known, &row->proc_only);

    static double p50[DENSITY_MAX_STREAMS], sp50[DENSITY_MAX_STREAMS];
    uint64_t frames = 0, in_all = 0, drop_all = 0, live = 0;
    double fps_sum = 0, p99 = 0, sp99 = 0;
    row->min_fps = 1e30;
    const char *first_error = NULL;
    unsigned first_failed = 0;
    for (unsigned i = 0; i < n; i++) {
        const density_stream *a = &h->a[i], *b = &h->b[i];
        uint64_t done = b->processed - a->processed, in = b->frames_in - a->frames_in;
        uint64_t dropped = b->dropped - a->dropped;
        double fps = row->window_s > 0 ? (double)done / row->window_s : 0;
        double drop_pct = 100.0 * (double)dropped / (double)(in ? in : 1);
        frames += done;
        in_all += in;
        drop_all += dropped;
        fps_sum += fps;
        row->min_fps = fps < row->min_fps ? fps : row->min_fps;
        row->worst_drop_pct = drop_pct > row->worst_drop_pct ? drop_pct : row->worst_drop_pct;
        if (fps < o->min_fps)
            row->short_streams++;
        if (drop_pct > o->max_drop_pct)
            row->dropping_streams++;
        if (b->failed) {
            if (!row->failed_streams++) {
                first_error = b->error;
                first_failed = i;
            }
        }
        if (!b->nvdec)
            row->cpu_decoded++;
        uint64_t hist[DENSITY_HIST_BUCKETS];
        for (unsigned k = 0; k < DENSITY_HIST_BUCKETS; k++)
            hist[k] = b->latency[k] - a->latency[k];
        p50[i] = density_hist_percentile(hist, 0.50);
        double q99 = density_hist_percentile(hist, 0.99);
        p99 = q99 > p99 ? q99 : p99;
        sp50[i] = b->svc_p50_ms;
        sp99 = b->svc_p99_ms > sp99 ? b->svc_p99_ms : sp99;
        live += b->live_bytes;
    }
    if (!n)
        row->min_fps = 0;
    row->frames = frames;
    row->mean_fps = n ? fps_sum / n : 0;
    row->dropped_pct = 100.0 * (double)drop_all / (double)(in_all ? in_all : 1);
    qsort(p50, n, sizeof *p50, cmp_double);
    row->p50_ms = n ? p50[n / 2] : 0;
    row->p99_ms = p99;
    if (!d->is_baseline) {
        qsort(sp50, n, sizeof *sp50, cmp_double);
        row->svc_p50_ms = n ? sp50[n / 2] : 0;
        row->svc_p99_ms = sp99;
        row->accounted_mib = n ? density_mib(live) / n : 0;
    }
    row->cpu_us_per_frame = frames ? (double)(c1 - c0) / 1e3 / (double)frames : 0;
    row->mib_per_stream =
        n ? (density_mib(row->used) - density_mib(used_before)) / (double)n : 0;
    row->sustained = !density_interrupted && !row->failed_streams && !row->short_streams &&
                     !row->dropping_streams && row->have == n && !row->early;
    if (density_interrupted)
        note_add(row, "interrupted");
    if (row->failed_streams)
        note_add(row, "%u failed (stream %u: %.200s)", row->failed_streams, first_failed,
                 first_error ? first_error : "?");
    if (row->short_streams)
        note_add(row, "%u below %.1f fps", row->short_streams, o->min_fps);
    if (row->dropping_streams)
        note_add(row, "%u dropped > %.2f %%", row->dropping_streams, o->max_drop_pct);
    if (row->early)
        note_add(row, "ended early: certain to miss");
    if (row->cpu_decoded)
        note_add(row, "%u decoded on the CPU", row->cpu_decoded);
}

/* ---- the designs' runs ---- */

static int open_design(harness *h, int baseline, vram_device *dev, uint64_t budget,
                       density_design *d)
{
    int rc = baseline ? density_baseline_open(h->o, dev, d)
                      : density_vramkit_open(h->o, budget, d);
    if (rc)
        fprintf(stderr, "bench_density: opening the %s design: %s (%s)\n",
                baseline ? "baseline" : "vramkit", vram_last_error(), vram_err_name(rc));
    return rc;
}

/* The rising steps of one design. 0, or 1 when the design could not start. */
static int run_density(harness *h, int baseline, vram_device *dev)
{
    const density_opts *o = h->o;
    uint64_t used_idle = used_now(h);
    density_design d;
    if (open_design(h, baseline, dev, 0, &d))
        return 1;
    density_sleep(1.0);
    uint64_t used_before = used_now(h);
    char what[1024];
    d.describe(d.self, what, sizeof what);
    density_report_begin(h->report, d.name, what, used_idle, used_before);

    unsigned n = o->start, best = 0, last_ok = 0, prev_n = 0, fail_n = 0;
    uint64_t prev_used = used_before;
    double best_mib = 0;
    int refining = 0;
    char why[600] = "";
    while (!density_interrupted) {
        density_row row;
        measure_step(h, &d, n, used_before, &row);
        if (prev_n && n != prev_n && row.used) {
            row.marginal_mib = (density_mib(row.used) - density_mib(prev_used)) /
                               ((double)n - (double)prev_n);
            row.has_marginal = 1;
        }
        density_report_row(h->report, &row);
        if (row.used) {
            prev_used = row.used;
            prev_n = n;
        }
        if (density_interrupted) {
            snprintf(why, sizeof why, "interrupted at %u streams", n);
            break;
        }
        unsigned next;
        if (row.sustained) {
            if (n > best) {
                best = n;
                best_mib = row.mib_per_stream;
            }
            last_ok = n;
            next = n + (refining ? o->refine : o->step);
            if (refining && next >= fail_n) {
                snprintf(why, sizeof why, "%u streams were not sustained", fail_n);
                break;
            }
            if (n >= o->max) {
                snprintf(why, sizeof why, "--max %u reached", o->max);
                break;
            }
            if (next > o->max)
                next = o->max;
        } else {
            if (row.have < n) {
                /* Streams that cannot be added stay that way: no refining. */
                snprintf(why, sizeof why, "%u streams could not all start: %.400s", n,
                         row.note);
                break;
            }
            if (!refining && o->refine && last_ok + o->refine < n) {
                refining = 1;
                fail_n = n;
                next = last_ok + o->refine;
            } else {
                snprintf(why, sizeof why, "%u streams were not sustained", n);
                break;
            }
        }
        n = next;
    }
    density_report_end(h->report, d.name, best, best_mib, why);
    d.close(d.self);
    return 0;
}

/* Device used bytes, the most of a few readings over half a second (the
 * baseline allocates and frees on every frame). */
static uint64_t used_settled(harness *h)
{
    uint64_t most = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t u = used_now(h);
        most = u > most ? u : most;
        density_sleep(0.1);
    }
    return most;
}

static void run_budget(harness *h, int baseline, vram_device *dev, density_budget_row *row)
{
    const density_opts *o = h->o;
    memset(row, 0, sizeof *row);
    row->design = baseline ? "baseline" : "vramkit";
    row->budget = o->budget_case;
    row->used_before = used_settled(h);
    density_design d;
    if (open_design(h, baseline, dev, o->budget_case, &d)) {
        snprintf(row->why, sizeof row->why, "the design did not start: %s", vram_last_error());
        return;
    }
    row->fixed_bytes = d.fixed_bytes;
    fprintf(stderr, "bench_density: %s: adding streams within %.1f GiB\n", d.name,
            (double)o->budget_case / 1073741824.0);
    unsigned k = 0;
    while (!density_interrupted) {
        if (k >= o->budget_max) {
            snprintf(row->why, sizeof row->why, "--budget-max %u reached", o->budget_max);
            break;
        }
        unsigned have = 0;
        int rc = d.resize(d.self, k + 1, &have);
        if (rc) {
            snprintf(row->why, sizeof row->why, "stream %u refused: %s (%s)", k + 1,
                     vram_last_error(), vram_err_name(rc));
            k = have;
            break;
        }
        k = have;
        if (baseline) {
            uint64_t used = used_settled(h);
            if (used > row->used_before && used - row->used_before > o->budget_case) {
                snprintf(row->why, sizeof row->why,
                         "thread %u brought the device's used memory to %.2f GiB since the "
                         "start, past the budget",
                         k, (double)(used - row->used_before) / 1073741824.0);
                d.resize(d.self, k - 1, &have);
                k = have;
                break;
            }
        }
        if (k % 25 == 0)
            fprintf(stderr, "bench_density: %s: %u streams admitted\n", d.name, k);
    }
    if (density_interrupted && !row->why[0])
        snprintf(row->why, sizeof row->why, "interrupted");
    row->admitted = k;
    if (k) {
        density_stream *s = h->b;
        if (d.sample(d.self, s, k) == 0)
            row->need_bytes = s[0].need_bytes;
    }
    row->used_after = used_settled(h);
    d.close(d.self);
}

/* ---- options ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_density --clip FILE --model MODEL.onnx [options]\n"
            "\n"
            "How many paced streams of one clip (looping at its frame rate) one GPU carries,\n"
            "the model on every frame: vramkit's service (one context, NVDEC, batches across\n"
            "streams) against the usual design (a thread, a CUDA context, a decoder and an\n"
            "engine per stream, device buffers allocated per frame). N rises until a stream\n"
            "falls below --min-fps or drops more than --max-drop %% over a window.\n"
            "\n"
            "  --clip FILE          the clip every stream plays (1080p30 H.264 or HEVC)\n"
            "  --codec-label TEXT   the codec in the tables (default: the clip's)\n"
            "  --model FILE         the ONNX model (BlazeFace-back)\n"
            "  --design D           vramkit, baseline or both (vramkit first; default both)\n"
            "  --start N            streams of the first step (default 8)\n"
            "  --step S             streams added per step (default 8)\n"
            "  --max N              the most streams (default 256; at most %d)\n"
            "  --refine S           after the first failure, from the last sustained N by S\n"
            "  --seconds S          the window of each step (default 60)\n"
            "  --warmup S           before each window, not counted (default 5)\n"
            "  --min-fps F          a stream keeps up at F frames a second (default 29.5)\n"
            "  --max-drop P         ... dropping at most P %% of its frames (default 0.1)\n"
            "  --fps F              the clip's rate for ending a window early (default: the\n"
            "                       clip's, at least 30)\n"
            "  --early-stop 0|1     end a window whose outcome is certain (default 1)\n"
            "  --workers W          vramkit: inference workers (default 4)\n"
            "  --batch B            vramkit: largest batch (default 32)\n"
            "  --graphs 0|1         vramkit: replay the workers' runs as CUDA graphs\n"
            "                       (default: VRAM_ENGINE_GRAPHS)\n"
            "  --decode D           vramkit: nvdec, auto or cpu (default nvdec)\n"
            "  --extra-surfaces K   NVDEC decode surfaces beyond the minimum (default 0)\n"
            "  --queue Q            vramkit: ready frames a stream may have waiting (0: 2)\n"
            "  --in-flight K        vramkit: frames of a stream in batches at once (0: 1)\n"
            "  --budget-case SIZE   instead of the steps: streams admitted within SIZE of\n"
            "                       device memory (e.g. 24G), for each design\n"
            "  --budget-max N       the budget case stops adding there (default 1024)\n"
            "  --device I           the CUDA device (default: VRAM_DEVICE, else 0)\n"
            "  --gpus LIST          vramkit: one service per GPU of LIST (0,1,...), the\n"
            "                       streams placed among them (vram_fleet); memory and\n"
            "                       utilization over all of them\n"
            "  --out FILE.md        append the tables there\n"
            "  --json FILE.jsonl    append a JSON line per step there\n"
            "  --commit SHA         the commit measured, for the header\n"
            "  --help               this text\n",
            DENSITY_MAX_STREAMS);
}

static int bad(const char *msg, const char *arg)
{
    fprintf(stderr, "bench_density: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, density_opts *o)
{
    unsigned u0;
    memset(o, 0, sizeof *o);
    o->design_vramkit = o->design_baseline = 1;
    o->start = 8;
    o->step = 8;
    o->max = 256;
    o->seconds = 60;
    o->warmup_s = 5;
    o->workers = 4;
    o->batch = 32;
    o->graphs = -1;
    o->decode = VRAM_DECODE_NVDEC;
    o->min_fps = 29.5;
    o->max_drop_pct = 0.1;
    o->early_stop = 1;
    o->budget_max = 1024;
    o->commit = "unknown";
    const char *env_device = getenv("VRAM_DEVICE");
    if (env_device && *env_device && parse_uint(env_device, 0, 63, &u0) == 0)
        o->device = (int)u0;
    o->argc = argc;
    o->argv = argv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned u;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v)
            return bad("unknown option or missing value", a);
        i++;
        if (!strcmp(a, "--clip"))
            o->clip = v;
        else if (!strcmp(a, "--codec-label"))
            o->codec_label = v;
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--out"))
            o->out = v;
        else if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--commit"))
            o->commit = v;
        else if (!strcmp(a, "--design")) {
            o->design_vramkit = !strcmp(v, "vramkit") || !strcmp(v, "both");
            o->design_baseline = !strcmp(v, "baseline") || !strcmp(v, "both");
            if (!o->design_vramkit && !o->design_baseline)
                return bad("--design takes vramkit, baseline or both", v);
        } else if (!strcmp(a, "--start")) {
            if (parse_uint(v, 1, DENSITY_MAX_STREAMS, &o->start))
                return bad("--start takes 1 .. 2048", v);
        } else if (!strcmp(a, "--step")) {
            if (parse_uint(v, 1, DENSITY_MAX_STREAMS, &o->step))
                return bad("--step takes 1 .. 2048", v);
        } else if (!strcmp(a, "--max")) {
            if (parse_uint(v, 1, DENSITY_MAX_STREAMS, &o->max))
                return bad("--max takes 1 .. 2048", v);
        } else if (!strcmp(a, "--refine")) {
            if (parse_uint(v, 0, DENSITY_MAX_STREAMS, &o->refine))
                return bad("--refine takes 0 .. 2048", v);
        } else if (!strcmp(a, "--seconds")) {
            if (parse_double(v, 1, 86400, &o->seconds))
                return bad("--seconds takes 1 .. 86400", v);
        } else if (!strcmp(a, "--warmup")) {
            if (parse_double(v, 0, 3600, &o->warmup_s))
                return bad("--warmup takes 0 .. 3600", v);
        } else if (!strcmp(a, "--min-fps")) {
            if (parse_double(v, 0, 1000, &o->min_fps))
                return bad("--min-fps takes 0 .. 1000", v);
        } else if (!strcmp(a, "--max-drop")) {
            if (parse_double(v, 0, 100, &o->max_drop_pct))
                return bad("--max-drop takes 0 .. 100 (percent)", v);
        } else if (!strcmp(a, "--fps")) {
            if (parse_double(v, 1, 1000, &o->nominal_fps))
                return bad("--fps takes 1 .. 1000", v);
        } else if (!strcmp(a, "--early-stop")) {
            if (parse_uint(v, 0, 1, &u))
                return bad("--early-stop takes 0 or 1", v);
            o->early_stop = (int)u;
        } else if (!strcmp(a, "--workers")) {
            if (parse_uint(v, 1, 64, &o->workers))
                return bad("--workers takes 1 .. 64", v);
        } else if (!strcmp(a, "--batch")) {
            if (parse_uint(v, 1, 1024, &o->batch))
                return bad("--batch takes 1 .. 1024", v);
        } else if (!strcmp(a, "--graphs")) {
            if (parse_uint(v, 0, 1, &u))
                return bad("--graphs takes 0 or 1", v);
            o->graphs = (int)u;
        } else if (!strcmp(a, "--decode")) {
            if (vram_decode_parse(v, &o->decode))
                return bad("--decode takes nvdec, auto or cpu", v);
        } else if (!strcmp(a, "--extra-surfaces")) {
            if (parse_uint(v, 0, 32, &o->extra_surfaces))
                return bad("--extra-surfaces takes 0 .. 32", v);
        } else if (!strcmp(a, "--queue")) {
            if (parse_uint(v, 0, 1024, &o->queue_frames))
                return bad("--queue takes 0 .. 1024", v);
        } else if (!strcmp(a, "--in-flight")) {
            if (parse_uint(v, 0, 64, &o->in_flight))
                return bad("--in-flight takes 0 .. 64", v);
        } else if (!strcmp(a, "--budget-case")) {
            if (vram_size_parse(v, &o->budget_case) || !o->budget_case)
                return bad("--budget-case takes a size such as 24G", v);
        } else if (!strcmp(a, "--budget-max")) {
            if (parse_uint(v, 1, DENSITY_MAX_STREAMS, &o->budget_max))
                return bad("--budget-max takes 1 .. 2048", v);
        } else if (!strcmp(a, "--gpus")) {
            if (tool_parse_gpus(v, 63, o->gpus, DENSITY_MAX_GPUS, &o->n_gpus))
                return bad("--gpus", vram_last_error());
        } else if (!strcmp(a, "--device")) {
            if (parse_uint(v, 0, 63, &u))
                return bad("--device takes a CUDA ordinal", v);
            o->device = (int)u;
        } else
            return bad("unknown option", a);
    }
    if (o->n_gpus && o->design_baseline)
        return bad("--gpus is for the vramkit design (the baseline runs on one GPU): give "
                   "--design vramkit", NULL);
    if (!o->clip || !o->model) {
        usage(stderr);
        return bad("--clip and --model are required", NULL);
    }
    if (o->start > o->max)
        return bad("--start is above --max", NULL);
    return 0;
}

/* NVML over the GPUs measured: --gpus's, else the harness's device (whose
 * info is *di). Their total memory into *total. */
static int open_nvml(const density_opts *o, const vram_device_info *di, density_nvml **out,
                     uint64_t *total)
{
    char pci[DENSITY_MAX_GPUS][32];
    const char *ids[DENSITY_MAX_GPUS];
    size_t n = o->n_gpus ? o->n_gpus : 1;
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        vram_device_info gi = *di;
        vram_device *g = NULL;
        int rc = 0;
        if (o->n_gpus && o->gpus[i] != o->device &&
            ((rc = vram_device_open(o->gpus[i], NULL, &g)) || (rc = vram_device_info_get(g, &gi)))) {
            vram_device_close(g);
            return rc;
        }
        vram_device_close(g);
        snprintf(pci[i], sizeof pci[i], "%s", gi.pci_bus_id);
        ids[i] = pci[i];
        *total += gi.total_bytes;
    }
    return density_nvml_open(ids, n, out);
}

int main(int argc, char **argv)
{
    density_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    /* The service opens the device VRAM_DEVICE names (its options have no
     * device): the same as the harness's, set before vramkit reads it. */
    char device_text[16];
    snprintf(device_text, sizeof device_text, "%d", o.device);
    setenv("VRAM_DEVICE", device_text, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if ((rc = probe_clip(&o))) {
        fprintf(stderr, "bench_density: the clip %s: %s (%s)\n", o.clip, vram_last_error(),
                vram_err_name(rc));
        return 1;
    }
    if (!o.codec_label)
        o.codec_label = o.clip_codec;
    if (!o.nominal_fps)
        o.nominal_fps = o.clip_fps > 30 ? o.clip_fps : 30;

    vram_device *dev = NULL;
    vram_device_info di;
    if ((rc = vram_device_open(o.device, NULL, &dev)) || (rc = vram_device_info_get(dev, &di))) {
        fprintf(stderr, "bench_density: device %d: %s (%s)\n", o.device, vram_last_error(),
                vram_err_name(rc));
        vram_device_close(dev);
        return 1;
    }
    harness h = {.o = &o};
    uint64_t total = 0;
    density_report report;
    h.report = &report;
    h.a = calloc(DENSITY_MAX_STREAMS, sizeof *h.a);
    h.b = calloc(DENSITY_MAX_STREAMS, sizeof *h.b);
    int status = 0;
    if (!h.a || !h.b) {
        fprintf(stderr, "bench_density: out of host memory\n");
        status = 1;
    } else if ((rc = open_nvml(&o, &di, &h.nvml, &total))) {
        fprintf(stderr, "bench_density: NVML: %s (%s)\n", vram_last_error(), vram_err_name(rc));
        status = 1;
    } else if (density_report_open(&report, &o)) {
        status = 1;
    } else {
        if (o.n_gpus > 1)
            snprintf(report.gpu, sizeof report.gpu, "%zu x %.60s", o.n_gpus, di.name);
        else
            snprintf(report.gpu, sizeof report.gpu, "%s", di.name);
        snprintf(report.driver, sizeof report.driver, "%s", density_nvml_driver(h.nvml));
        report.cuda_driver = di.driver_version;
        report.total_bytes = total;
        if (o.budget_case) {
            density_budget_row rows[2];
            int nr = 0;
            if (o.design_vramkit && !density_interrupted)
                run_budget(&h, 0, dev, &rows[nr++]);
            if (o.design_baseline && !density_interrupted)
                run_budget(&h, 1, dev, &rows[nr++]);
            density_report_budget(&report, rows, nr);
        } else {
            if (o.design_vramkit && !density_interrupted)
                status |= run_density(&h, 0, dev);
            if (o.design_baseline && !density_interrupted)
                status |= run_density(&h, 1, dev);
        }
        density_report_close(&report);
    }
    density_nvml_close(h.nvml);
    free(h.a);
    free(h.b);
    if ((rc = vram_device_close(dev))) {
        fprintf(stderr, "bench_density: closing the device: %s (%s)\n", vram_last_error(),
                vram_err_name(rc));
        status = 1;
    }
    return status ? 1 : density_interrupted ? 130 : 0;
}
