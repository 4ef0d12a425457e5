/* tools/vramkit/cmd_soak.c - `vramkit soak`: run a workload again and again
 * through one pool that lives for the whole run, sample its memory after
 * every iteration with a manual monitor, and end with the leak verdict:
 * level, or growing (exit status 1), with the slope of live bytes per
 * iteration and its confidence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tool_util.h"
#include "cli.h"
#include "soak.h"
#include "vramkit.h"
#include "vramkit/report.h"

static const char about[] =
    "Runs the workload N times (default 20000) through one pool that lives for the whole\n"
    "soak, so that anything an iteration leaves behind accumulates, and samples the pool\n"
    "after every iteration: live, peak and reserved bytes, fragmentation, largest free\n"
    "block, per owner and kind, and the GPU as NVML sees it. One iteration of\n"
    "replay:TRACE replays the trace's events once (RMM CSV, plain or gzip) and frees what\n"
    "the trace left live at its end. run:URL[,URL...] soaks the video service itself: each\n"
    "URL a looping stream of one service (vramkit run), an iteration every stream\n"
    "processing --frames-per-iteration more frames, the samples its pools' (--json and\n"
    "--html are for replay only).\n\n"
    "The verdict is the least-squares slope of live bytes per iteration over the samples\n"
    "after the warm-up (the first FRACTION of them, default VRAM_MONITOR_WARMUP), with its\n"
    "t-statistic: growing when the slope exceeds --threshold bytes per iteration (default\n"
    "VRAM_MONITOR_GROWTH_ITERATION) with at least --confidence (default\n"
    "VRAM_MONITOR_CONFIDENCE), else level. Alerts (fragmentation, budgets, growth) are\n"
    "logged as they are raised and cleared, and counted in the summary; --alert-hold N\n"
    "(default 10) lowers or clears an alert only after N samples in a row call for it,\n"
    "since a sample every iteration sees memory swing within the workload's cycle.\n\n"
    "--csv and --jsonl write every sample (and, in JSON Lines, every alert); --html writes\n"
    "a report page of the series and of the pool at the end. On a terminal a progress bar\n"
    "shows the live bytes and the slope; otherwise a line every tenth of the run. --json\n"
    "prints the summary and the verdict as one JSON object instead of the lines.\n"
    "--plant-leak BYTES/K allocates BYTES every K iterations and never frees them: a leak\n"
    "the verdict must catch (for testing).\n\n"
    "Exit status: 0 level, 1 growing (or an error), 2 a usage error or too few iterations\n"
    "for a verdict.\n";

typedef struct soak {
    const vram_trace *t;
    vram_pool *pool;
    void **ptrs;
    vram_stream *streams;
    uint64_t refused;
    char first_refusal[512];
    /* planted leak */
    uint64_t leak_bytes, leak_every;
    vram_owner leak_owner;
    void **leaked;
    size_t n_leaked, cap_leaked;
} soak;

/* One pass over the trace; what it left live is freed at the end. */
static int replay_once(soak *c)
{
    const vram_trace *t = c->t;
    for (size_t i = 0; i < t->n_events; i++) {
        const vram_trace_event *e = &t->events[i];
        vram_stream s = c->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            int rc = vram_pool_alloc(c->pool, e->size, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s,
                                     &c->ptrs[e->slot]);
            if (rc == VRAM_EINVAL || rc == VRAM_EHOSTMEM)
                return rc;
            if (rc && !c->refused++)
                snprintf(c->first_refusal, sizeof c->first_refusal, "line %u, %llu bytes: %s",
                         e->line, (unsigned long long)e->size, vram_last_error());
        } else if (e->action == VRAM_TRACE_FREE && c->ptrs[e->slot]) {
            int rc = vram_pool_free(c->pool, c->ptrs[e->slot], s);
            c->ptrs[e->slot] = NULL;
            if (rc)
                return rc;
        }
    }
    for (size_t i = 0; i < t->n_slots; i++) {
        if (c->ptrs[i]) {
            int rc = vram_pool_free(c->pool, c->ptrs[i], NULL);
            c->ptrs[i] = NULL;
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int plant(soak *c, uint64_t iteration)
{
    if (!c->leak_every || iteration % c->leak_every)
        return 0;
    if (c->n_leaked == c->cap_leaked) {
        size_t cap = c->cap_leaked ? 2 * c->cap_leaked : 64;
        void **p = realloc(c->leaked, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "vramkit soak: out of host memory\n");
            return VRAM_EHOSTMEM;
        }
        c->leaked = p;
        c->cap_leaked = cap;
    }
    void *ptr;
    int rc = vram_pool_alloc(c->pool, c->leak_bytes, c->leak_owner, VRAM_KIND_OTHER, NULL, &ptr);
    if (rc)
        return rc;
    c->leaked[c->n_leaked++] = ptr;
    return 0;
}

/* "+1.50 KiB", "-40.3 B". */
char *soak_fmt_slope(char *buf, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(buf, cap, "unknown");
        return buf;
    }
    double a = fabs(v);
    char b[40];
    if (a < 1024)
        snprintf(b, sizeof b, "%.1f B", a);
    else
        vram_size_format(b, sizeof b, (uint64_t)llround(a));
    snprintf(buf, cap, "%s%s", v < 0 ? "-" : "+", b);
    return buf;
}

void soak_progress(vram_monitor *m, const char *pool, uint64_t it, uint64_t n, uint64_t live,
                   int tty)
{
    vram_trend tr;
    char lb[48], sb[48];
    vram_size_format(lb, sizeof lb, live);
    if (vram_monitor_trend(m, pool, &tr) != 0)
        tr.slope_bytes_per_iteration = NAN;
    soak_fmt_slope(sb, sizeof sb, tr.slope_bytes_per_iteration);
    if (tty) {
        int width = 30, done = (int)((double)it / (double)n * width);
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < done ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r[%s] %3d%% %llu/%llu  live %-10s slope %s/iteration   ", bar,
                (int)(100.0 * (double)it / (double)n), (unsigned long long)it,
                (unsigned long long)n, lb, sb);
    } else {
        fprintf(stderr, "soak: %llu/%llu iterations, live %s, slope %s per iteration\n",
                (unsigned long long)it, (unsigned long long)n, lb, sb);
    }
    fflush(stderr);
}

static int write_html(const char *html, const char *series, vram_pool *pool)
{
    vram_report_opts ro;
    vram_report_opts_init(&ro);
    ro.title = "vramkit soak";
    vram_report *r;
    int rc = vram_report_create(&ro, &r);
    if (rc)
        return rc;
    rc = vram_report_add_file(r, series, NULL);
    vram_buffer b = {0};
    if (!rc)
        rc = vram_pool_snapshot(pool, vram_write_buffer, &b, 0);
    if (!rc)
        rc = vram_report_add_data(r, "snapshot at the end of the soak", b.data, b.len, NULL);
    vram_buffer_free(&b);
    if (!rc)
        rc = vram_report_write(r, html);
    vram_report_destroy(r);
    return rc;
}

void soak_print_verdict(vram_monitor *m, const vram_trend *tr, double threshold,
                        double confidence)
{
    char b1[48], b2[48], b3[48];
    printf("alerts:");
    for (int t = 0; t < VRAM_ALERT_TYPE_COUNT; t++) {
        uint64_t w = 0, cr = 0, cl = 0;
        vram_monitor_alert_count(m, (vram_alert_type)t, VRAM_ALERT_LEVEL_WARNING, &w);
        vram_monitor_alert_count(m, (vram_alert_type)t, VRAM_ALERT_LEVEL_CRITICAL, &cr);
        vram_monitor_alert_count(m, (vram_alert_type)t, VRAM_ALERT_LEVEL_CLEAR, &cl);
        printf("%s %s %llu warning, %llu critical, %llu cleared", t ? ";" : "",
               vram_alert_type_name((vram_alert_type)t), (unsigned long long)w,
               (unsigned long long)cr, (unsigned long long)cl);
    }
    printf("\n");
    uint64_t total = 0;
    vram_monitor_sample_count(m, &total, NULL);
    if (tr->samples < 3 || isnan(tr->slope_bytes_per_iteration)) {
        printf("verdict: none: %u samples after the warm-up, too few for a slope\n", tr->samples);
        return;
    }
    double per_min = tr->slope_bytes_per_s * 60.0;
    printf("verdict: %s: live bytes %s per iteration (%s per minute), confidence %.3f (t = %.2f), "
           "threshold %s per iteration at confidence %.3f, over %u samples after a warm-up of "
           "%llu\n",
           tr->growing ? "growing" : "level", soak_fmt_slope(b1, sizeof b1, tr->slope_bytes_per_iteration),
           soak_fmt_slope(b2, sizeof b2, per_min), tr->confidence, tr->t_statistic,
           vram_size_format(b3, sizeof b3, (uint64_t)threshold),
           confidence, tr->samples, (unsigned long long)(total - tr->samples));
}

typedef struct soak_args {
    uint64_t iterations;
    const char *workload, *trace, *csv, *jsonl, *html, *backend, *policy_name, *gpu, *leak;
    const char *urls, *model, *executor, *decode; /* the run workload */
    uint64_t frames, workers, batch;
    vram_policy policy;
    int policy_given, json;
    uint64_t capacity, threshold_bytes, alert_hold;
    double warmup, confidence;
    double threshold; /* < 0: the configuration's */
    uint64_t leak_bytes, leak_every;
} soak_args;

/* BYTES/K of --plant-leak. */
static int parse_leak(const char *v, soak_args *a)
{
    const char *slash = strchr(v, '/');
    char bytes[64], *end;
    if (!slash || (size_t)(slash - v) >= sizeof bytes)
        return cli_usage_error("soak", "--plant-leak: \"%s\" is not BYTES/K", v);
    memcpy(bytes, v, (size_t)(slash - v));
    bytes[slash - v] = 0;
    unsigned long long k = strtoull(slash + 1, &end, 10);
    if (vram_size_parse(bytes, &a->leak_bytes) || !a->leak_bytes)
        return cli_usage_error("soak", "--plant-leak: \"%s\": BYTES must be a size above 0", v);
    if (*end || !slash[1] || slash[1] == '-' || k < 1)
        return cli_usage_error("soak", "--plant-leak: \"%s\": K must be a whole number of at "
                                       "least 1", v);
    a->leak_every = k;
    return 0;
}

static int parse_args(int argc, char **argv, soak_args *a)
{
    int threshold_given = 0;
    const cli_opt opts[] = {
        {"--workload", NULL, CLI_STRING, &a->workload, "replay:TRACE|run:URL,...",
         "what one iteration runs: replay the trace once, or the service's frames"},
        {"--model", NULL, CLI_STRING, &a->model, "MODEL.onnx",
         "run: the service's model (default: BlazeFace back)"},
        {"--frames-per-iteration", NULL, CLI_UINT, &a->frames, "K",
         "run: frames every stream processes between samples (default 4)", 1, 1e6},
        {"--executor", NULL, CLI_CHOICE, &a->executor, NULL, "run: the engine's executor", 0, 0,
         "cpu|cuda"},
        {"--decode", NULL, CLI_CHOICE, &a->decode, NULL,
         "run: where the streams decode (default cpu; nvdec needs --executor cuda)", 0, 0,
         "cpu|nvdec|auto"},
        {"--workers", NULL, CLI_UINT, &a->workers, "M", "run: inference workers (default 1)", 1,
         64},
        {"--batch", NULL, CLI_UINT, &a->batch, "B", "run: the largest batch (default 8)", 1, 256},
        {"--iterations", NULL, CLI_UINT, &a->iterations, "N", "iterations (default 20000)", 1,
         1e9},
        {"--csv", NULL, CLI_STRING, &a->csv, "FILE", "write every sample as CSV"},
        {"--jsonl", NULL, CLI_STRING, &a->jsonl, "FILE", "write every sample and alert as JSON "
                                                         "Lines"},
        {"--html", NULL, CLI_STRING, &a->html, "FILE", "write the report page of the soak"},
        {"--policy", NULL, CLI_CHOICE, &a->policy_name, NULL, "the pool's placement policy", 0, 0,
         CLI_POLICIES, &a->policy_given},
        {"--backend", NULL, CLI_CHOICE, &a->backend, NULL, "where the bytes come from (default "
                                                           "sim)", 0, 0, CLI_BACKENDS},
        {"--capacity", NULL, CLI_SIZE, &a->capacity, "BYTES", "sim and host: the device's bytes",
         4096},
        {"--warmup", NULL, CLI_NUMBER, &a->warmup, "FRACTION",
         "samples skipped before the verdict's window", 0, 0.95},
        {"--threshold", NULL, CLI_SIZE, &a->threshold_bytes, "BYTES",
         "growth per iteration that is a leak", 0, 0, NULL, &threshold_given},
        {"--confidence", NULL, CLI_NUMBER, &a->confidence, "C",
         "confidence the slope must reach for a leak", 0, 1},
        {"--gpu", NULL, CLI_STRING, &a->gpu, "INDEX|PCI|none",
         "the GPU read through NVML (default VRAM_MONITOR_GPU)"},
        {"--alert-hold", NULL, CLI_UINT, &a->alert_hold, "N",
         "samples in a row before an alert is lowered (default 10)", 1, 1e6},
        {"--plant-leak", NULL, CLI_STRING, &a->leak, "BYTES/K",
         "leak BYTES every K iterations (testing the verdict)"},
        {"--json", NULL, CLI_FLAG, &a->json, NULL, "the summary and verdict as one JSON object"},
        {0},
    };
    const cli_spec spec = {"soak", "", about, opts, 0, 0, NULL};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st;
    free(args);
    if (!a->workload)
        return cli_usage_error("soak", "no workload given (--workload replay:TRACE or "
                                       "run:URL[,URL...])");
    if (!strncmp(a->workload, "run:", 4) && a->workload[4]) {
        a->urls = a->workload + 4;
    } else if (strncmp(a->workload, "replay:", 7) != 0 || !a->workload[7]) {
        return cli_usage_error("soak", "--workload: unknown workload \"%s\": the workload is "
                                       "replay:TRACE or run:URL[,URL...]", a->workload);
    }
    a->trace = a->urls ? NULL : a->workload + 7;
    if (a->policy_given)
        vram_policy_parse(a->policy_name, &a->policy);
    if (threshold_given)
        a->threshold = (double)a->threshold_bytes;
    int g;
    const char *pci;
    if (a->gpu && vram_gpu_parse(a->gpu, &g, &pci))
        return cli_usage_error("soak", "--gpu: %s", vram_last_error());
    if (a->gpu && g < VRAM_GPU_NONE)
        return cli_usage_error("soak", "--gpu: the monitor reads one GPU, not \"%s\"", a->gpu);
    return a->leak ? parse_leak(a->leak, a) : 0;
}

static int make_pool(const soak_args *a, vram_device *dev, vram_backend **b, vram_pool **pool)
{
    vram_pool_opts po;
    int rc = vram_pool_opts_init(&po);
    if (rc)
        return rc;
    vram_backend_opts bo = {.capacity = a->capacity, .granularity = po.granularity, .device = dev};
    if ((rc = vram_backend_create(a->backend, &bo, b)) != 0)
        return rc;
    po.name = "replay";
    po.backend = *b;
    po.configured_listeners = 0; /* no trace of the soak; OOM reports as configured */
    if (a->policy_given)
        po.policy = a->policy;
    else if (cli_backend_is_gpu(a->backend) && strcmp(a->backend, "vmm") != 0)
        po.policy = VRAM_POLICY_SEGMENTS;
    if ((rc = vram_pool_create(&po, pool)) == 0 && (rc = vram_pool_oom_watch_configured(*pool)) != 0) {
        tool_saved_error err;
        tool_error_save(&err);
        vram_pool_destroy(*pool);
        *pool = NULL;
        tool_error_restore(&err, rc);
    }
    if (rc) {
        vram_backend_destroy(*b);
        *b = NULL;
    }
    return rc;
}

static int monitor_opts(const soak_args *a, vram_monitor_opts *mo)
{
    int rc = vram_monitor_opts_init(mo);
    if (rc)
        return rc;
    mo->manual = 1;
    mo->ring_samples = a->iterations + 1 < 3 ? 3 : a->iterations + 1 > (1u << 24)
                                                       ? (1u << 24)
                                                       : (uint32_t)(a->iterations + 1);
    mo->csv_path = a->csv;
    mo->jsonl_path = a->jsonl;
    if (a->warmup >= 0)
        mo->warmup_fraction = a->warmup;
    if (a->confidence >= 0)
        mo->growth_confidence = a->confidence;
    if (a->threshold >= 0)
        mo->growth_bytes_per_iteration = a->threshold;
    mo->hold_samples = (uint32_t)a->alert_hold;
    if (a->gpu && (rc = vram_gpu_parse(a->gpu, &mo->gpu, &mo->gpu_pci_bus_id)) != 0)
        return rc;
    return 0;
}

static void summary(vram_monitor *m, const soak_args *a, const soak *c, double secs,
                    const vram_trend *tr, uint64_t first_live, uint64_t last_live, uint64_t most_live)
{
    vram_pool_stats st;
    int have_stats = vram_pool_stats_get(c->pool, &st) == 0;
    char b1[48], b2[48], b3[48], b4[48], b5[48];
    printf("soak: replay:%s, %llu iterations of %zu events through pool \"replay\" (%s on %s) in "
           "%.2f s\n",
           a->trace, (unsigned long long)a->iterations, c->t->n_events,
           vram_policy_name(vram_pool_policy(c->pool)), a->backend, secs);
    if (!have_stats)
        printf("pool statistics: %s\n", vram_last_error());
    else
        printf("live bytes after each iteration: first %s, last %s, most %s; peak live %s, "
               "reserved %s at the end\n",
               vram_size_format(b1, sizeof b1, first_live), vram_size_format(b2, sizeof b2, last_live),
               vram_size_format(b3, sizeof b3, most_live),
               vram_size_format(b4, sizeof b4, st.peak_live_bytes),
               vram_size_format(b5, sizeof b5, st.reserved_bytes));
    if (c->leak_every)
        printf("planted leak: %s every %llu iterations, %zu blocks (%s) never freed\n",
               vram_size_format(b1, sizeof b1, c->leak_bytes), (unsigned long long)c->leak_every,
               c->n_leaked, vram_size_format(b2, sizeof b2, c->leak_bytes * c->n_leaked));
    if (c->refused)
        printf("refused requests: %llu; the first, %s\n", (unsigned long long)c->refused,
               c->first_refusal);
    soak_print_verdict(m, tr, a->threshold, a->confidence);
}

/* The same as one JSON object, for --json (slopes NaN become null). */
static cJSON *summary_json(vram_monitor *m, const soak_args *a, const soak *c, double secs,
                           const vram_trend *tr, uint64_t first_live, uint64_t last_live,
                           uint64_t most_live)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    vram_pool_stats st;
    int have_stats = vram_pool_stats_get(c->pool, &st) == 0;
    cJSON_AddStringToObject(o, "workload", a->workload);
    cJSON_AddNumberToObject(o, "iterations", (double)a->iterations);
    cJSON_AddNumberToObject(o, "events_per_iteration", (double)c->t->n_events);
    cJSON_AddStringToObject(o, "pool", "replay");
    cJSON_AddStringToObject(o, "policy", vram_policy_name(vram_pool_policy(c->pool)));
    cJSON_AddStringToObject(o, "backend", a->backend);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON *live = cJSON_AddObjectToObject(o, "live_bytes");
    cJSON_AddNumberToObject(live, "first", (double)first_live);
    cJSON_AddNumberToObject(live, "last", (double)last_live);
    cJSON_AddNumberToObject(live, "most", (double)most_live);
    if (have_stats) {
        cJSON_AddNumberToObject(o, "peak_live_bytes", (double)st.peak_live_bytes);
        cJSON_AddNumberToObject(o, "reserved_bytes", (double)st.reserved_bytes);
    }
    if (c->leak_every) {
        cJSON *l = cJSON_AddObjectToObject(o, "planted_leak");
        cJSON_AddNumberToObject(l, "size_bytes", (double)c->leak_bytes);
        cJSON_AddNumberToObject(l, "every_iterations", (double)c->leak_every);
        cJSON_AddNumberToObject(l, "blocks", (double)c->n_leaked);
        cJSON_AddNumberToObject(l, "leaked_bytes", (double)(c->leak_bytes * c->n_leaked));
    } else {
        cJSON_AddNullToObject(o, "planted_leak");
    }
    cJSON_AddNumberToObject(o, "refused", (double)c->refused);
    if (c->refused)
        cJSON_AddStringToObject(o, "first_refusal", c->first_refusal);
    cJSON *al = cJSON_AddObjectToObject(o, "alerts");
    for (int t = 0; t < VRAM_ALERT_TYPE_COUNT; t++) {
        cJSON *k = cJSON_AddObjectToObject(al, vram_alert_type_name((vram_alert_type)t));
        for (int l = 0; l < VRAM_ALERT_LEVEL_COUNT; l++) {
            uint64_t n = 0;
            vram_monitor_alert_count(m, (vram_alert_type)t, (vram_alert_level)l, &n);
            cJSON_AddNumberToObject(k, vram_alert_level_name((vram_alert_level)l), (double)n);
        }
    }
    uint64_t total = 0;
    vram_monitor_sample_count(m, &total, NULL);
    int known = tr->samples >= 3 && !isnan(tr->slope_bytes_per_iteration);
    cJSON *v = cJSON_AddObjectToObject(o, "verdict");
    cJSON_AddStringToObject(v, "verdict", !known ? "none" : tr->growing ? "growing" : "level");
    cJSON_AddBoolToObject(v, "growing", known && tr->growing);
    cJSON_AddNumberToObject(v, "samples", tr->samples);
    cJSON_AddNumberToObject(v, "warmup_samples", (double)(total - tr->samples));
#define NUM_OR_NULL(key, x)                                                                        \
    (isfinite(x) ? cJSON_AddNumberToObject(v, key, x) : cJSON_AddNullToObject(v, key))
    NUM_OR_NULL("slope_bytes_per_iteration", tr->slope_bytes_per_iteration);
    NUM_OR_NULL("slope_bytes_per_minute", tr->slope_bytes_per_s * 60.0);
    NUM_OR_NULL("confidence", tr->confidence);
    NUM_OR_NULL("t_statistic", tr->t_statistic);
#undef NUM_OR_NULL
    cJSON_AddNumberToObject(v, "threshold_bytes_per_iteration", a->threshold);
    cJSON_AddNumberToObject(v, "required_confidence", a->confidence);
    return o;
}

int cmd_soak(int argc, char **argv)
{
    soak_args a = {.iterations = 20000, .backend = "sim", .warmup = -1, .confidence = -1,
                   .threshold = -1, .alert_hold = 10};
    int status = parse_args(argc, argv, &a);
    if (status)
        return status == CLI_HELP ? 0 : status;
    vram_monitor_opts mo;
    int rc = monitor_opts(&a, &mo);
    if (rc)
        return cli_lib_error("soak", rc);
    a.warmup = mo.warmup_fraction;
    a.confidence = mo.growth_confidence;
    a.threshold = mo.growth_bytes_per_iteration;
    if (a.urls) {
        soak_service_args sa = {.urls = a.urls, .model = a.model,
                                .executor = a.executor ? a.executor : "cpu",
                                .decode = a.decode ? a.decode : "cpu",
                                .iterations = a.iterations, .frames = a.frames ? a.frames : 4,
                                .workers = (unsigned)a.workers, .batch = (unsigned)a.batch,
                                .json = a.json};
        return soak_service(&sa, &mo);
    }
    char tmp_series[64] = "";
    if (a.html && !a.jsonl) { /* the report reads the series from a file */
        snprintf(tmp_series, sizeof tmp_series, "/tmp/vramkit-soak-XXXXXX");
        int fd = mkstemp(tmp_series);
        if (fd < 0) {
            fprintf(stderr, "vramkit soak: cannot create a temporary file for the series\n");
            return 1;
        }
        close(fd);
        mo.jsonl_path = tmp_series;
    }

    vram_trace *trace = NULL;
    cJSON *json = NULL;
    soak c = {0};
    vram_device *dev = NULL;
    vram_backend *backend = NULL;
    vram_monitor *m = NULL;
    size_t acquired = 0;
    int progress_shown = 0;
    if ((rc = vram_trace_read(a.trace, &trace)) != 0)
        goto out;
    c.t = trace;
    c.ptrs = calloc(trace->n_slots ? trace->n_slots : 1, sizeof *c.ptrs);
    c.streams = calloc(trace->n_streams ? trace->n_streams : 1, sizeof *c.streams);
    if (!c.ptrs || !c.streams) {
        rc = vram_set_error(VRAM_EHOSTMEM, "out of host memory for the replay's %zu blocks",
                        trace->n_slots);
        goto out;
    }
    if (cli_backend_is_gpu(a.backend) &&
        (rc = vram_device_open((int)vram_config_get()->device, NULL, &dev)) != 0)
        goto out;
    for (size_t i = 0; i < trace->n_streams; i++) {
        if (!dev) {
            c.streams[i] = (vram_stream)(uintptr_t)trace->streams[i];
            continue;
        }
        if ((rc = vram_device_stream_acquire(dev, VRAM_PRIORITY_NORMAL, &c.streams[i])) != 0)
            goto out;
        acquired++;
    }
    if ((rc = make_pool(&a, dev, &backend, &c.pool)) != 0)
        goto out;
    c.leak_bytes = a.leak_bytes;
    c.leak_every = a.leak_every;
    if (c.leak_every && (rc = vram_owner_create(c.pool, "planted", 0, &c.leak_owner)) != 0)
        goto out;
    if ((rc = vram_monitor_start(&mo, &m)) != 0 || (rc = vram_monitor_add_pool(m, c.pool)) != 0)
        goto out;

    int tty = isatty(2);
    uint64_t t0 = tool_now_ns(), last_progress = t0;
    uint64_t every = a.iterations >= 10 ? a.iterations / 10 : 1;
    uint64_t first_live = 0, last_live = 0, most_live = 0;
    for (uint64_t it = 1; it <= a.iterations; it++) {
        if ((rc = replay_once(&c)) != 0 || (rc = plant(&c, it)) != 0 ||
            (rc = vram_monitor_sample(m, (int64_t)it)) != 0)
            goto out;
        vram_pool_stats st;
        if ((rc = vram_pool_stats_get(c.pool, &st)) != 0)
            goto out;
        if (it == 1)
            first_live = st.live_bytes;
        last_live = st.live_bytes;
        if (st.live_bytes > most_live)
            most_live = st.live_bytes;
        uint64_t now = tool_now_ns();
        if (tty ? now - last_progress > 100000000ull || it == a.iterations
                : it % every == 0) {
            soak_progress(m, "replay", it, a.iterations, st.live_bytes, tty);
            progress_shown = 1;
            last_progress = now;
        }
    }
    if (tty && progress_shown)
        fputc('\n', stderr);
    progress_shown = 0;
    double secs = (double)(tool_now_ns() - t0) * 1e-9;
    vram_trend tr;
    if ((rc = vram_monitor_trend(m, "replay", &tr)) != 0)
        goto out;
    if (a.json)
        json = summary_json(m, &a, &c, secs, &tr, first_live, last_live, most_live);
    else
        summary(m, &a, &c, secs, &tr, first_live, last_live, most_live);
    fflush(stdout);
    status = tr.growing ? 1 : tr.samples < 3 || isnan(tr.slope_bytes_per_iteration) ? 2 : 0;
    if (a.html) {
        /* The series file must be complete before the report reads it. */
        vram_monitor_remove_pool(m, c.pool);
        rc = vram_monitor_stop(m);
        m = NULL;
        if (!rc)
            rc = write_html(a.html, a.jsonl ? a.jsonl : tmp_series, c.pool);
        if (!rc && !a.json)
            printf("report: %s\n", a.html);
    }
    if (!rc && a.json) {
        if (a.html)
            cJSON_AddStringToObject(json, "report", a.html);
        if (cli_print_json(json) && !status)
            status = 1;
        json = NULL;
    }

out:
    if (rc) {
        if (progress_shown && isatty(2))
            fputc('\n', stderr);
        cli_lib_error("soak", rc);
    }
    if (m) {
        vram_monitor_remove_pool(m, c.pool);
        int src = vram_monitor_stop(m);
        if (src && !rc)
            cli_lib_error("soak", rc = src);
    }
    for (size_t i = 0; i < c.n_leaked; i++)
        vram_pool_free(c.pool, c.leaked[i], NULL);
    free(c.leaked);
    if (c.pool) {
        for (size_t i = 0; c.ptrs && i < trace->n_slots; i++)
            if (c.ptrs[i])
                vram_pool_free(c.pool, c.ptrs[i], NULL);
        vram_pool_destroy(c.pool);
    }
    if (backend)
        vram_backend_destroy(backend);
    for (size_t i = 0; i < acquired; i++)
        vram_device_stream_release(dev, c.streams[i]);
    if (dev)
        vram_device_close(dev);
    free(c.ptrs);
    free(c.streams);
    vram_trace_free(trace);
    if (tmp_series[0])
        unlink(tmp_series);
    cJSON_Delete(json);
    return rc ? 1 : status;
}
