/* bench/pipeline.c - what the multi-stream video service delivers against
 * the bare engine it runs. For each number of streams the service serves
 * that many copies of one input (not paced by default: as fast as the
 * pipeline takes them); after a warm-up of about a second, the frames
 * processed are read from every stream's statistics at two instants S
 * seconds apart, and the batches run from the service's JSON statistics,
 * which give the mean batch actually run. Latency (decoded to result, the
 * streams' histograms), frames dropped in the window, one stream's need
 * and the peak of its owner in the host pool, and the service's fixed
 * bytes complete the row.
 *
 * After each configuration, the bare engine: the same model, loaded once
 * for the same largest batch on the same executor, one execution context
 * per worker and as many threads, each copying a letterboxed batch in and
 * running it in a loop (vram_exec_set_input + vram_exec_run), counted the
 * same way over S seconds after the same warm-up: images per second at the
 * batch given and at the mean batch the service ran (rounded to a whole
 * batch; the contexts run at it through vram_exec_set_batch, as the
 * service's do). Measuring it right after each configuration lets both see
 * a shared machine alike; the process's CPU time over each window says how
 * many cores each side got. The ratio of the service's frames per second
 * to the bare engine's images per second is what the service's own work
 * costs: the target is at least 0.9.
 *
 *   bench_pipeline [--model M] [--executor cpu|cuda] [--streams LIST]
 *                  [--workers M] [--batch B] [--seconds S] [--input URL]
 *                  [--realtime] [--out FILE.md] [--commit C] [--json]
 *
 * The model defaults to $VRAM_MODEL_DIR/blazeface_back.onnx, else
 * build/models/blazeface_back.onnx (scripts/models.sh makes it; run from
 * the repository's root); the input to synthetic:640x480@30. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/tool_util.h"
#include "vramkit.h"
#include "vramkit/service.h"
#include "vramkit/video.h"

#define MAX_CONFIGS 16
#define MAX_WORKERS 64
#define WARMUP_S 1.0
#define TARGET 0.9

typedef struct bench_opts {
    const char *model, *executor, *input, *out, *commit;
    unsigned streams[MAX_CONFIGS];
    int n_configs;
    unsigned workers, batch;
    double seconds;
    int realtime, json;
} bench_opts;

/* The bare engine at one batch. */
typedef struct bare_row {
    int batch;
    double window_s;
    uint64_t images;
    double images_per_s, ms_per_batch, cores;
} bare_row;

/* One configuration of the service, as measured, and the bare engine after it. */
typedef struct svc_row {
    unsigned streams, workers, batch;
    double window_s;
    uint64_t processed, batches, dropped;
    double mean_batch, fps, fps_per_stream;
    double cores;          /* the process's CPU time over the window, in cores */
    double p50_ms, p99_ms; /* median of the streams' p50, worst stream's p99 */
    uint64_t need_bytes, peak_bytes, fixed_bytes;
    int failed_streams;
    int mean_rounded;      /* the mean batch to the nearest whole batch */
    bare_row at_b, at_mean; /* the bare engine at the batch given and at mean_rounded
                               (batch 0: the same as at_b, not measured again) */
} svc_row;

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static double secs(uint64_t a, uint64_t b) { return (double)(b - a) / 1e9; }

static double mib(uint64_t b) { return (double)b / 1048576.0; }

/* CPU time of the whole process (every thread), in ns. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The machine's 1-minute load average (-1 when unknown). */
static double loadavg(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_pipeline: %s: %s (%s)\n", what, vram_last_error(), vram_err_name(rc));
    return 1;
}

/* ---- the service ---- */

typedef struct svc_sample {
    uint64_t t_ns, cpu_ns, processed, dropped, batches, images;
} svc_sample;

/* Batches and images the workers ran so far, from the JSON statistics. */
static int read_batches(vram_service *svc, uint64_t *batches, uint64_t *images)
{
    vram_buffer b = {0};
    int rc = vram_service_print(svc, vram_write_buffer, &b, VRAM_PRINT_JSON);
    if (rc) {
        vram_buffer_free(&b);
        return rc;
    }
    cJSON *root = cJSON_ParseWithLength(b.data, b.len);
    vram_buffer_free(&b);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "service");
    const cJSON *nb = cJSON_GetObjectItemCaseSensitive(s, "batches");
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(s, "mean_batch");
    if (!cJSON_IsNumber(nb) || !cJSON_IsNumber(mb)) {
        cJSON_Delete(root);
        return vram_set_error(VRAM_EPARSE, "the service's JSON statistics hold no "
                                           "service.batches and service.mean_batch");
    }
    *batches = (uint64_t)nb->valuedouble;
    *images = (uint64_t)llround(mb->valuedouble * nb->valuedouble);
    cJSON_Delete(root);
    return 0;
}

static int sample_service(vram_service *svc, vram_stream_stats *st, size_t cap, size_t *n,
                          svc_sample *out)
{
    uint64_t t0 = tool_now_ns(), c = cpu_ns();
    int rc = vram_service_streams(svc, st, cap, n);
    uint64_t t1 = tool_now_ns();
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    out->t_ns = t0 + (t1 - t0) / 2;
    out->cpu_ns = c;
    for (size_t i = 0; i < *n; i++) {
        out->processed += st[i].processed;
        out->dropped += st[i].dropped + st[i].output_dropped;
    }
    return read_batches(svc, &out->batches, &out->images);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_service(const bench_opts *o, unsigned n_streams, svc_row *row,
                       vram_service_info *info_out)
{
    memset(row, 0, sizeof *row);
    row->streams = n_streams;
    vram_service_opts so;
    vram_service_opts_init(&so);
    so.model = o->model;
    so.executor = o->executor;
    so.workers = o->workers;
    /* As many frames of a stream in flight as there are workers, so that
     * fewer streams than workers still keep every worker busy. */
    so.stream_in_flight = o->workers;
    so.batch = o->batch;
    vram_service *svc;
    int rc = vram_service_create(&so, &svc);
    if (rc)
        return fail("creating the service", rc);
    vram_service_info info;
    vram_service_info_get(svc, &info);
    /* Its strings are the service's: the executor's name is kept apart. */
    static char executor[32];
    snprintf(executor, sizeof executor, "%s", info.executor ? info.executor : "?");
    info.executor = executor;
    info.model = NULL;
    *info_out = info;
    row->workers = info.workers;
    row->batch = info.batch;
    row->fixed_bytes = info.fixed_bytes;
    int status = 0;
    for (unsigned i = 0; i < n_streams && !status; i++) {
        char id[32];
        snprintf(id, sizeof id, "s%u", i);
        vram_stream_opts st;
        vram_stream_opts_init(&st);
        st.id = id;
        st.url = o->input;
        st.realtime = o->realtime;
        st.loop = 1;
        if ((rc = vram_service_add_stream(svc, &st, NULL)))
            status = fail("adding a stream", rc);
    }
    vram_stream_stats *stats = calloc(n_streams, sizeof *stats);
    svc_sample a, b;
    size_t n = 0;
    if (!status && !stats)
        status = fail("statistics", vram_set_error(VRAM_EHOSTMEM, "out of host memory"));
    if (!status) {
        sleep_s(WARMUP_S);
        if ((rc = sample_service(svc, stats, n_streams, &n, &a)))
            status = fail("reading the statistics", rc);
    }
    if (!status) {
        sleep_s(o->seconds);
        if ((rc = sample_service(svc, stats, n_streams, &n, &b)))
            status = fail("reading the statistics", rc);
    }
    if (!status) {
        row->window_s = secs(a.t_ns, b.t_ns);
        row->cores = secs(a.cpu_ns, b.cpu_ns) / row->window_s;
        row->processed = b.processed - a.processed;
        row->batches = b.batches - a.batches;
        row->dropped = b.dropped - a.dropped;
        row->mean_batch =
            row->batches ? (double)(b.images - a.images) / (double)row->batches : 0.0;
        row->fps = (double)row->processed / row->window_s;
        row->fps_per_stream = row->fps / (double)n_streams;
        double p50[1024];
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (stats[i].state == VRAM_STREAM_FAILED) {
                fprintf(stderr, "bench_pipeline: stream %s failed: %s\n", stats[i].id,
                        stats[i].error);
                row->failed_streams++;
            }
            if (k < TOOL_ARRAY_LEN(p50))
                p50[k++] = stats[i].latency_p50_ms;
            if (stats[i].latency_p99_ms > row->p99_ms)
                row->p99_ms = stats[i].latency_p99_ms;
        }
        qsort(p50, k, sizeof *p50, cmp_double);
        row->p50_ms = k ? (k % 2 ? p50[k / 2] : (p50[k / 2 - 1] + p50[k / 2]) / 2) : 0;
        row->need_bytes = n ? stats[0].need_bytes : 0;
        vram_owner owner;
        vram_usage_stats us;
        char name[80];
        snprintf(name, sizeof name, "stream:%s", n ? stats[0].id : "s0");
        vram_pool *pool = vram_service_host_pool(svc);
        if (vram_owner_find(pool, name, &owner) == 0 && vram_owner_stats_get(pool, owner, &us) == 0)
            row->peak_bytes = us.peak_live_bytes;
        if (row->failed_streams)
            status = 1;
    }
    free(stats);
    if ((rc = vram_service_stop(svc)) && !status)
        status = fail("stopping the service", rc);
    vram_service_destroy(svc);
    return status;
}

/* ---- the bare engine ---- */

typedef struct bare_worker {
    vram_exec *exec;
    float *input;
    size_t bytes;
    pthread_t thread;
    int started, rc;
} bare_worker;

typedef struct bare_shared {
    atomic_int stop;
    atomic_uint_fast64_t runs;
} bare_shared;

typedef struct bare_arg {
    bare_worker *w;
    bare_shared *sh;
} bare_arg;

static void *bare_main(void *p)
{
    bare_arg *a = p;
    while (!atomic_load_explicit(&a->sh->stop, memory_order_relaxed)) {
        int rc = vram_exec_set_input(a->w->exec, 0, a->w->input, a->w->bytes);
        if (!rc)
            rc = vram_exec_run(a->w->exec);
        if (rc) {
            a->w->rc = rc;
            fprintf(stderr, "bench_pipeline: bare engine: %s (%s)\n", vram_last_error(),
                    vram_err_name(rc));
            atomic_store(&a->sh->stop, 1);
            break;
        }
        atomic_fetch_add_explicit(&a->sh->runs, 1, memory_order_relaxed);
    }
    return NULL;
}

/* One frame of the input, letterboxed as the service does, into `image`
 * (the model's input size, in its layout). */
static int first_frame(const char *url, const vram_service_info *info, int nchw, float *image)
{
    vram_backend_opts bo;
    vram_backend_opts_init(&bo);
    vram_backend *be = NULL;
    vram_pool *pool = NULL;
    vram_source *src = NULL;
    int rc = vram_backend_create("host", &bo, &be);
    if (!rc) {
        vram_pool_opts po;
        vram_pool_opts_init(&po);
        po.name = "bench-frame";
        po.backend = be;
        rc = vram_pool_create(&po, &pool);
    }
    if (!rc) {
        vram_source_opts so;
        vram_source_opts_init(&so);
        so.url = url;
        so.pool = pool;
        rc = vram_source_open(&so, &src);
    }
    vram_frame *f = NULL;
    if (!rc && (rc = vram_source_next(src, &f)) == 1)
        rc = vram_set_error(VRAM_EIO, "%s has no frame", url);
    if (!rc) {
        vram_letterbox lb = {.width = info->input_width,
                             .height = info->input_height,
                             .layout = nchw ? VRAM_LAYOUT_NCHW : VRAM_LAYOUT_NHWC};
        for (int c = 0; c < 3; c++) {
            lb.scale[c] = info->detector_blazeface ? 2.0f : 1.0f;
            lb.bias[c] = info->detector_blazeface ? -1.0f : 0.0f;
        }
        lb.pad = info->detector_blazeface ? -1.0f : 0.0f;
        rc = vram_letterbox_frame(&lb, f->rgb, f->width, f->height, f->stride, image, NULL);
    }
    tool_saved_error saved;
    tool_error_save(&saved);
    if (f)
        vram_source_release(src, f);
    vram_source_close(src);
    vram_pool_destroy(pool);
    vram_backend_destroy(be);
    return rc ? tool_error_restore(&saved, rc) : 0;
}

/* The bare engine and its contexts, made once and measured after each
 * configuration of the service, so that both see the machine alike. */
typedef struct bare_engine {
    vram_engine *e;
    unsigned m;
    size_t image; /* floats per image */
    bare_worker w[MAX_WORKERS];
} bare_engine;

static void bare_free(bare_engine *be)
{
    for (unsigned i = 0; i < be->m; i++) {
        vram_exec_destroy(be->w[i].exec);
        free(be->w[i].input);
    }
    vram_engine_destroy(be->e);
    memset(be, 0, sizeof *be);
}

static int bare_setup(const bench_opts *o, const vram_service_info *info, bare_engine *be)
{
    memset(be, 0, sizeof *be);
    vram_engine_opts eo;
    vram_engine_opts_init(&eo);
    eo.executor = o->executor;
    eo.batch = info->batch;
    int rc = vram_engine_load(o->model, &eo, &be->e);
    if (rc)
        return fail("loading the bare engine", rc);
    vram_tensor_desc in;
    vram_engine_input(be->e, 0, &in);
    int nchw = in.rank == 4 && in.dims[1] == 3 && in.dims[3] != 3;
    be->image = (size_t)info->input_width * (size_t)info->input_height * 3u;
    be->m = info->workers;
    int status = 0;
    float *one = calloc(be->image, sizeof *one);
    if (!one)
        status = fail("the bare engine's input", vram_set_error(VRAM_EHOSTMEM, "out of memory"));
    if (!status && (rc = first_frame(o->input, info, nchw, one)))
        status = fail("the first frame of the input", rc);
    for (unsigned i = 0; i < be->m && !status; i++) {
        bare_worker *w = &be->w[i];
        if ((rc = vram_exec_create(be->e, &w->exec)))
            status = fail("an execution context", rc);
        else if (!(w->input = malloc(be->image * info->batch * sizeof(float))))
            status = fail("the bare engine's input",
                          vram_set_error(VRAM_EHOSTMEM, "out of host memory"));
        else
            for (unsigned k = 0; k < info->batch; k++)
                memcpy(w->input + (size_t)k * be->image, one, be->image * sizeof(float));
    }
    free(one);
    if (status)
        bare_free(be);
    return status;
}

/* M threads, each running its context at `batch` in a loop; the runs done
 * are read at two instants S seconds apart after the warm-up. */
static int bare_measure(const bench_opts *o, bare_engine *be, int batch, bare_row *r)
{
    int status = 0, rc;
    for (unsigned i = 0; i < be->m && !status; i++) {
        be->w[i].bytes = be->image * (size_t)batch * sizeof(float);
        be->w[i].rc = 0;
        if (vram_exec_batch(be->w[i].exec) != batch &&
            (rc = vram_exec_set_batch(be->w[i].exec, batch)))
            status = fail("setting the batch", rc);
    }
    if (status)
        return status;
    bare_shared sh;
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.runs, 0);
    bare_arg args[MAX_WORKERS];
    for (unsigned i = 0; i < be->m; i++) {
        args[i] = (bare_arg){&be->w[i], &sh};
        be->w[i].started = pthread_create(&be->w[i].thread, NULL, bare_main, &args[i]) == 0;
        if (!be->w[i].started) {
            status = fail("a thread", vram_set_error(VRAM_EHOSTMEM, "cannot start a thread"));
            atomic_store(&sh.stop, 1);
        }
    }
    uint64_t t0 = 0, t1 = 0, c0 = 0, c1 = 0, r0 = 0, r1 = 0;
    if (!status) {
        sleep_s(WARMUP_S);
        t0 = tool_now_ns();
        c0 = cpu_ns();
        r0 = atomic_load(&sh.runs);
        sleep_s(o->seconds);
        t1 = tool_now_ns();
        c1 = cpu_ns();
        r1 = atomic_load(&sh.runs);
    }
    atomic_store(&sh.stop, 1);
    for (unsigned i = 0; i < be->m; i++) {
        if (be->w[i].started)
            pthread_join(be->w[i].thread, NULL);
        be->w[i].started = 0;
        if (be->w[i].rc)
            status = 1;
    }
    if (status)
        return status;
    memset(r, 0, sizeof *r);
    r->batch = batch;
    r->window_s = secs(t0, t1);
    r->cores = secs(c0, c1) / r->window_s;
    r->images = (r1 - r0) * (uint64_t)batch;
    r->images_per_s = (double)r->images / r->window_s;
    r->ms_per_batch = r1 > r0 ? r->window_s * 1e3 * (double)be->m / (double)(r1 - r0) : 0;
    return 0;
}

/* ---- output ---- */

static const char *verdict(double ratio) { return ratio >= TARGET ? "PASS" : "MISS"; }

static double ratio_of(double fps, const bare_row *b)
{
    return b->images_per_s > 0 ? fps / b->images_per_s : 0;
}

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    TOOL_PRINTF(4, 5);
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

static void tables(const svc_row *rows, int n_rows, const vram_service_info *info, char *buf,
                   size_t cap)
{
    size_t len = 0;
    append(buf, cap, &len,
           "| streams | workers | batch | mean batch | fps | fps / stream | p50 ms | p99 ms "
           "| dropped | need / stream MiB | peak / stream MiB | fixed MiB | cores used |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_rows; i++) {
        const svc_row *r = &rows[i];
        append(buf, cap, &len,
               "| %u | %u | %u | %.2f | %.1f | %.2f | %.1f | %.1f | %llu | %.2f | %.2f "
               "| %.2f | %.2f |\n",
               r->streams, r->workers, r->batch, r->mean_batch, r->fps, r->fps_per_stream,
               r->p50_ms, r->p99_ms, (unsigned long long)r->dropped, mib(r->need_bytes),
               mib(r->peak_bytes), mib(r->fixed_bytes), r->cores);
    }
    append(buf, cap, &len,
           "\nAgainst the bare engine (%u thread%s, one execution context each, set_input + "
           "run in a loop), measured right after each configuration; target ratio >= %.1f:\n\n"
           "| streams | service fps | bare img/s @ batch %u | ratio @ batch %u "
           "| mean batch (rounded) | bare img/s @ mean batch | ratio @ mean batch "
           "| bare cores used | per core: service fps / core, ratio @ mean batch |\n"
           "|---|---|---|---|---|---|---|---|---|\n",
           info->workers, info->workers == 1 ? "" : "s", TARGET, info->batch, info->batch);
    for (int i = 0; i < n_rows; i++) {
        const svc_row *r = &rows[i];
        double rb = ratio_of(r->fps, &r->at_b);
        append(buf, cap, &len, "| %u | %.1f | %.1f | %.3f %s | %.2f (%d) |", r->streams, r->fps,
               r->at_b.images_per_s, rb, verdict(rb), r->mean_batch, r->mean_rounded);
        const bare_row *m = r->at_mean.batch ? &r->at_mean : &r->at_b;
        if (!r->at_mean.batch)
            append(buf, cap, &len, " (the same batch) | %.3f %s | %.2f |", rb, verdict(rb),
                   r->at_b.cores);
        else
            append(buf, cap, &len, " %.1f | %.3f %s | %.2f / %.2f |", m->images_per_s,
                   ratio_of(r->fps, m), verdict(ratio_of(r->fps, m)), r->at_b.cores, m->cores);
        double svc_pc = r->cores > 0 ? r->fps / r->cores : 0;
        double bare_pc = m->cores > 0 ? m->images_per_s / m->cores : 0;
        append(buf, cap, &len, " %.1f, %.3f |\n", svc_pc, bare_pc > 0 ? svc_pc / bare_pc : 0);
    }
    /* On the cpu executor the bare engine keeps every worker's core busy:
     * fewer cores than that means other processes had the CPU, and each
     * window got its own share. */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    double full = (double)info->workers < (double)online ? (double)info->workers
                                                          : (double)(online > 0 ? online : 1);
    double least = full;
    for (int i = 0; i < n_rows; i++) {
        const bare_row *m = rows[i].at_mean.batch ? &rows[i].at_mean : &rows[i].at_b;
        least = rows[i].at_b.cores < least ? rows[i].at_b.cores : least;
        least = m->cores < least ? m->cores : least;
    }
    if (!strcmp(info->executor, "cpu") && least < 0.9 * full)
        append(buf, cap, &len,
               "\nThe machine was busy: the bare engine, which keeps its %u thread%s running, "
               "got as little as %.2f of %.0f cores in a window, so the ratios compare windows "
               "that had different shares of the CPU.\n",
               info->workers, info->workers == 1 ? "" : "s", least, full);
}

static cJSON *bare_json(const bare_row *b, unsigned workers)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "batch", b->batch);
    cJSON_AddNumberToObject(x, "workers", workers);
    cJSON_AddNumberToObject(x, "window_s", b->window_s);
    cJSON_AddNumberToObject(x, "images", (double)b->images);
    cJSON_AddNumberToObject(x, "images_per_s", b->images_per_s);
    cJSON_AddNumberToObject(x, "ms_per_batch", b->ms_per_batch);
    cJSON_AddNumberToObject(x, "cores", b->cores);
    return x;
}

static cJSON *json_report(const bench_opts *o, const svc_row *rows, int n_rows,
                          const vram_service_info *info, double load0, double load1)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "executor", info->executor);
    cJSON_AddStringToObject(root, "input", o->input);
    cJSON_AddBoolToObject(root, "realtime", o->realtime);
    cJSON_AddNumberToObject(root, "seconds", o->seconds);
    cJSON_AddNumberToObject(root, "target_ratio", TARGET);
    cJSON_AddNumberToObject(root, "loadavg_start", load0);
    cJSON_AddNumberToObject(root, "loadavg_end", load1);
    cJSON *svc = cJSON_AddArrayToObject(root, "service");
    for (int i = 0; i < n_rows; i++) {
        const svc_row *r = &rows[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "streams", r->streams);
        cJSON_AddNumberToObject(x, "workers", r->workers);
        cJSON_AddNumberToObject(x, "batch", r->batch);
        cJSON_AddNumberToObject(x, "window_s", r->window_s);
        cJSON_AddNumberToObject(x, "processed", (double)r->processed);
        cJSON_AddNumberToObject(x, "batches", (double)r->batches);
        cJSON_AddNumberToObject(x, "mean_batch", r->mean_batch);
        cJSON_AddNumberToObject(x, "fps", r->fps);
        cJSON_AddNumberToObject(x, "fps_per_stream", r->fps_per_stream);
        cJSON_AddNumberToObject(x, "latency_p50_ms", r->p50_ms);
        cJSON_AddNumberToObject(x, "latency_p99_ms", r->p99_ms);
        cJSON_AddNumberToObject(x, "dropped", (double)r->dropped);
        cJSON_AddNumberToObject(x, "need_bytes_per_stream", (double)r->need_bytes);
        cJSON_AddNumberToObject(x, "peak_bytes_per_stream", (double)r->peak_bytes);
        cJSON_AddNumberToObject(x, "fixed_bytes", (double)r->fixed_bytes);
        cJSON_AddNumberToObject(x, "cores", r->cores);
        cJSON_AddNumberToObject(x, "mean_batch_rounded", r->mean_rounded);
        cJSON_AddItemToObject(x, "bare_at_batch", bare_json(&r->at_b, info->workers));
        cJSON_AddNumberToObject(x, "ratio_at_batch", ratio_of(r->fps, &r->at_b));
        const bare_row *m = r->at_mean.batch ? &r->at_mean : &r->at_b;
        cJSON_AddItemToObject(x, "bare_at_mean_batch", bare_json(m, info->workers));
        cJSON_AddNumberToObject(x, "ratio_at_mean_batch", ratio_of(r->fps, m));
        double svc_pc = r->cores > 0 ? r->fps / r->cores : 0;
        double bare_pc = m->cores > 0 ? m->images_per_s / m->cores : 0;
        cJSON_AddNumberToObject(x, "fps_per_core", svc_pc);
        cJSON_AddNumberToObject(x, "ratio_per_core_at_mean_batch",
                                bare_pc > 0 ? svc_pc / bare_pc : 0);
        cJSON_AddItemToArray(svc, x);
    }
    return root;
}

static int write_page(const bench_opts *o, int argc, char **argv, const char *table,
                      const vram_service_info *info, double load0, double load1)
{
    FILE *f = fopen(o->out, "w");
    if (!f) {
        fprintf(stderr, "bench_pipeline: cannot write %s: %s\n", o->out, strerror(errno));
        return 1;
    }
    char machine[400], date[64];
    tool_machine(machine, sizeof machine);
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    fprintf(f, "# Pipeline: the video service against the bare engine\n\n"
               "- model: `%s` (input %dx%d), executor %s, %u workers, batch up to %u\n"
               "- input: `%s` for every stream, %s\n"
               "- machine: %s\n- date: %s\n- commit: %s\n"
               "- load average (1 min) at the start and at the end: %.2f, %.2f\n"
               "- command: `bench_pipeline",
            o->model, info->input_width, info->input_height, info->executor, info->workers,
            info->batch, o->input, o->realtime ? "paced to its frame rate" : "not paced",
            machine, date, o->commit, load0, load1);
    for (int i = 1; i < argc; i++)
        fprintf(f, " %s", argv[i]);
    fprintf(f, "`\n\n%s\n", table);
    fprintf(f,
            "Measured: for each number of streams, the service runs that many streams of the "
            "input; after a warm-up of %.0f s, the frames processed are read from every "
            "stream's statistics at two instants %g s apart (fps), and the batches run from "
            "the service's JSON statistics over the same window (mean batch). Latency is from "
            "a frame's decoding to its result, from the streams' histograms over the whole "
            "run (bucket upper edges, within 25 %%): the median of the streams' p50 and the "
            "worst stream's p99. Dropped counts the frames and results dropped in the window. "
            "Need is one stream's admission need; peak is the most its owner held in the "
            "host pool; fixed is the service's own (weights once, each worker's context and "
            "batch buffers, the output queue). Cores used is the process's CPU time over the "
            "window divided by its length: below the machine's cores when threads wait for "
            "work or other processes take the CPU.\n\n"
            "The bare engine is the same model loaded for the same largest batch on the same "
            "executor, one execution context per worker, each on a thread of its own copying "
            "a letterboxed batch in and running it in a loop, counted the same way over %g s "
            "after the same warm-up, right after each configuration of the service. The ratio "
            "is the service's fps over the bare engine's images/s: at the batch given, and at "
            "the service's mean batch rounded to a whole batch (the contexts run at it "
            "through vram_exec_set_batch, as the service's do). A stream has one frame in "
            "flight at a time (its results come out in order), so fewer streams than "
            "workers x batch cannot fill the batches. Beyond the bare engine's work, the "
            "service letterboxes each frame, reads each batch's outputs, decodes them and "
            "hands the results to its output thread, and its readers produce the frames, on "
            "the same cores. The last column divides each side's rate by the cores it used "
            "(fps per core of the service over images/s per core of the bare engine at the "
            "mean batch): what the service's own work costs, whatever else ran on the "
            "machine, but blind to cores it left idle.\n",
            WARMUP_S, o->seconds, o->seconds);
    if (fclose(f)) {
        fprintf(stderr, "bench_pipeline: cannot write %s: %s\n", o->out, strerror(errno));
        return 1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: bench_pipeline [--model M] [--executor cpu|cuda] [--streams LIST] "
            "[--workers M] [--batch B] [--seconds S] [--input URL] [--realtime] "
            "[--out FILE.md] [--commit C] [--json]\n");
    return 2;
}

static int parse_list(const char *s, unsigned *out, int cap, int *n)
{
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024 || (*end && *end != ',') || *n == cap)
            return -1;
        out[(*n)++] = (unsigned)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

int main(int argc, char **argv)
{
    bench_opts o = {.model = "build/models/blazeface_back.onnx",
                    .executor = "cpu",
                    .input = "synthetic:640x480@30",
                    .commit = "unknown",
                    .workers = 2,
                    .batch = 8,
                    .seconds = 5};
    const char *streams = "1,4,8,16";
    char model[4096];
    const char *dir = getenv("VRAM_MODEL_DIR");
    if (dir && *dir) {
        snprintf(model, sizeof model, "%s/blazeface_back.onnx", dir);
        o.model = model;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--model") && more)
            o.model = argv[++i];
        else if (!strcmp(a, "--executor") && more)
            o.executor = argv[++i];
        else if (!strcmp(a, "--streams") && more)
            streams = argv[++i];
        else if (!strcmp(a, "--workers") && more)
            o.workers = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && more)
            o.batch = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--seconds") && more)
            o.seconds = atof(argv[++i]);
        else if (!strcmp(a, "--input") && more)
            o.input = argv[++i];
        else if (!strcmp(a, "--realtime"))
            o.realtime = 1;
        else if (!strcmp(a, "--out") && more)
            o.out = argv[++i];
        else if (!strcmp(a, "--commit") && more)
            o.commit = argv[++i];
        else if (!strcmp(a, "--json"))
            o.json = 1;
        else
            return usage();
    }
    if (parse_list(streams, o.streams, MAX_CONFIGS, &o.n_configs)) {
        fprintf(stderr, "bench_pipeline: --streams wants up to %d stream counts (1..1024) "
                        "separated by commas, not '%s'\n", MAX_CONFIGS, streams);
        return 2;
    }
    if (o.workers < 1 || o.workers > MAX_WORKERS || o.batch < 1 || !(o.seconds > 0)) {
        fprintf(stderr, "bench_pipeline: --workers 1..%d, --batch >= 1 and --seconds > 0\n",
                MAX_WORKERS);
        return 2;
    }

    double load0 = loadavg();
    svc_row rows[MAX_CONFIGS];
    vram_service_info info;
    memset(&info, 0, sizeof info);
    bare_engine be;
    int have_bare = 0, status = 0;
    for (int i = 0; i < o.n_configs && !status; i++) {
        svc_row *r = &rows[i];
        fprintf(stderr, "bench_pipeline: the service with %u streams, then the bare engine\n",
                o.streams[i]);
        if ((status = run_service(&o, o.streams[i], r, &info)))
            break;
        if (!have_bare && (status = bare_setup(&o, &info, &be)))
            break;
        have_bare = 1;
        int m = (int)lround(r->mean_batch);
        r->mean_rounded = m < 1 ? 1 : m > (int)info.batch ? (int)info.batch : m;
        status = bare_measure(&o, &be, (int)info.batch, &r->at_b);
        if (!status && r->mean_rounded != (int)info.batch)
            status = bare_measure(&o, &be, r->mean_rounded, &r->at_mean);
    }
    if (have_bare)
        bare_free(&be);
    if (status)
        return 1;
    double load1 = loadavg();
    static char table[32768];
    tables(rows, o.n_configs, &info, table, sizeof table);
    if (o.json)
        status = tool_emit_json(json_report(&o, rows, o.n_configs, &info, load0, load1),
                                vram_write_stdio, stdout) != 0;
    else
        fputs(table, stdout);
    if (o.out && write_page(&o, argc, argv, table, &info, load0, load1))
        status = 1;
    return status;
}
