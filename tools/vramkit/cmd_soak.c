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
#include "vramkit.h"
#include "vramkit/report.h"

static const char *const help =
    "usage: vramkit soak --workload replay:TRACE [--iterations N] [--csv FILE] [--jsonl FILE]\n"
    "                    [--html FILE] [--policy vmm|segments] [--backend B] [--capacity BYTES]\n"
    "                    [--warmup FRACTION] [--threshold BYTES] [--confidence C]\n"
    "                    [--gpu INDEX|PCI_BUS_ID|none] [--alert-hold N]\n"
    "                    [--plant-leak BYTES/K]\n\n"
    "Runs the workload N times (default 20000) through one pool that lives for the whole\n"
    "soak, so that anything an iteration leaves behind accumulates, and samples the pool\n"
    "after every iteration: live, peak and reserved bytes, fragmentation, largest free\n"
    "block, per owner and kind, and the GPU as NVML sees it. One iteration of\n"
    "replay:TRACE replays the trace's events once (RMM CSV, plain or gzip) and frees what\n"
    "the trace left live at its end.\n\n"
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
    "shows the live bytes and the slope; otherwise a line every tenth of the run.\n"
    "--gpu names the GPU read through NVML (default VRAM_MONITOR_GPU).\n"
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
static char *fmt_slope(char *buf, size_t cap, double v)
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

static void progress(vram_monitor *m, uint64_t it, uint64_t n, uint64_t live, int tty)
{
    vram_trend tr;
    char lb[48], sb[48];
    vram_size_format(lb, sizeof lb, live);
    if (vram_monitor_trend(m, "replay", &tr) != 0)
        tr.slope_bytes_per_iteration = NAN;
    fmt_slope(sb, sizeof sb, tr.slope_bytes_per_iteration);
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

/* A pool snapshot into memory, for the report. */
typedef struct membuf {
    char *data;
    size_t len, cap;
} membuf;

static int mem_write(void *ctx, const char *data, size_t len)
{
    membuf *b = ctx;
    if (b->len + len > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 65536) + len;
        char *d = realloc(b->data, cap);
        if (!d)
            return VRAM_EHOSTMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
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
    membuf b = {0};
    if (!rc)
        rc = vram_pool_snapshot(pool, mem_write, &b, 0);
    if (!rc)
        rc = vram_report_add_data(r, "snapshot at the end of the soak", b.data, b.len, NULL);
    free(b.data);
    if (!rc)
        rc = vram_report_write(r, html);
    vram_report_destroy(r);
    return rc;
}

typedef struct soak_args {
    uint64_t iterations;
    const char *trace, *csv, *jsonl, *html, *backend;
    vram_policy policy;
    int policy_given;
    uint64_t capacity;
    double warmup, confidence;
    double threshold; /* < 0: the configuration's */
    uint32_t alert_hold;
    const char *gpu;
    uint64_t leak_bytes, leak_every;
} soak_args;

static int parse_double(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi))
        return cli_usage_error("soak", "%s %s must be a number from %g to %g", opt, v, lo, hi);
    *out = d;
    return 0;
}

static int parse_args(int argc, char **argv, soak_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
#define VALUE(name)                                                                                \
    if (!(v = cli_value("soak", argc, argv, &i, name)))                                            \
        return 2;
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            fputs(help, stdout);
            return -1;
        } else if (cli_is(s, "--iterations")) {
            VALUE("--iterations");
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (*end || v[0] == '-' || n < 1 || n > 1000000000ull)
                return cli_usage_error("soak", "--iterations %s must be 1 to 1000000000", v);
            a->iterations = n;
        } else if (cli_is(s, "--workload")) {
            VALUE("--workload");
            if (strncmp(v, "replay:", 7) != 0 || !v[7])
                return cli_usage_error("soak", "unknown workload \"%s\": the workload is "
                                       "replay:TRACE", v);
            a->trace = v + 7;
        } else if (cli_is(s, "--csv")) {
            VALUE("--csv");
            a->csv = v;
        } else if (cli_is(s, "--jsonl")) {
            VALUE("--jsonl");
            a->jsonl = v;
        } else if (cli_is(s, "--html")) {
            VALUE("--html");
            a->html = v;
        } else if (cli_is(s, "--backend")) {
            VALUE("--backend");
            a->backend = v;
        } else if (cli_is(s, "--gpu")) {
            VALUE("--gpu");
            a->gpu = v;
        } else if (cli_is(s, "--policy")) {
            VALUE("--policy");
            if (vram_policy_parse(v, &a->policy))
                return cli_usage_error("soak", "%s", vram_last_error());
            a->policy_given = 1;
        } else if (cli_is(s, "--capacity")) {
            VALUE("--capacity");
            if (vram_size_parse(v, &a->capacity))
                return cli_usage_error("soak", "--capacity: %s", vram_last_error());
        } else if (cli_is(s, "--warmup")) {
            VALUE("--warmup");
            if (parse_double("--warmup", v, 0, 0.95, &a->warmup))
                return 2;
        } else if (cli_is(s, "--confidence")) {
            VALUE("--confidence");
            if (parse_double("--confidence", v, 0, 1, &a->confidence))
                return 2;
        } else if (cli_is(s, "--threshold")) {
            VALUE("--threshold");
            uint64_t b;
            if (vram_size_parse(v, &b))
                return cli_usage_error("soak", "--threshold: %s", vram_last_error());
            a->threshold = (double)b;
        } else if (cli_is(s, "--alert-hold")) {
            VALUE("--alert-hold");
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (end == v || *end || *v == '-' || n < 1 || n > 1000000)
                return cli_usage_error("soak", "--alert-hold %s must be an integer from 1 to "
                                               "1000000", v);
            a->alert_hold = (uint32_t)n;
        } else if (cli_is(s, "--plant-leak")) {
            VALUE("--plant-leak");
            const char *slash = strchr(v, '/');
            char bytes[64];
            char *end;
            if (!slash || (size_t)(slash - v) >= sizeof bytes)
                return cli_usage_error("soak", "--plant-leak %s: give BYTES/K", v);
            memcpy(bytes, v, (size_t)(slash - v));
            bytes[slash - v] = 0;
            unsigned long long k = strtoull(slash + 1, &end, 10);
            if (vram_size_parse(bytes, &a->leak_bytes) || !a->leak_bytes)
                return cli_usage_error("soak", "--plant-leak %s: BYTES must be a size above 0", v);
            if (*end || slash[1] == '-' || k < 1)
                return cli_usage_error("soak", "--plant-leak %s: K must be an integer of at least 1",
                                       v);
            a->leak_every = k;
        } else {
            return cli_usage_error("soak", "unknown argument \"%s\"", s);
        }
#undef VALUE
    }
    if (!a->trace)
        return cli_usage_error("soak", "no workload given (--workload replay:TRACE)");
    return 0;
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
    if ((rc = vram_pool_create(&po, pool)) == 0 && (rc = cli_watch_configured(*pool)) != 0) {
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
    mo->hold_samples = a->alert_hold;
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
           tr->growing ? "growing" : "level", fmt_slope(b1, sizeof b1, tr->slope_bytes_per_iteration),
           fmt_slope(b2, sizeof b2, per_min), tr->confidence, tr->t_statistic,
           vram_size_format(b3, sizeof b3, (uint64_t)a->threshold),
           a->confidence, tr->samples, (unsigned long long)(total - tr->samples));
}

int cmd_soak(int argc, char **argv)
{
    soak_args a = {.iterations = 20000, .backend = "sim", .warmup = -1, .confidence = -1,
                   .threshold = -1, .alert_hold = 10};
    int status = parse_args(argc, argv, &a);
    if (status)
        return status < 0 ? 0 : status;
    vram_monitor_opts mo;
    int rc = monitor_opts(&a, &mo);
    if (rc)
        return cli_lib_error("soak", rc);
    a.warmup = mo.warmup_fraction;
    a.confidence = mo.growth_confidence;
    a.threshold = mo.growth_bytes_per_iteration;
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
            progress(m, it, a.iterations, st.live_bytes, tty);
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
        if (!rc)
            printf("report: %s\n", a.html);
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
    return rc ? 1 : status;
}
