/* bench/monitor.c - what the monitor costs the work it watches: each
 * trace is replayed again and again through one warm pool for a fixed time,
 * alternately without and with a monitor sampling that pool on its thread
 * (period 1 s by default), and the replay's throughput (host ns per
 * allocate or free) is compared, median against median. The monitor's own
 * time per sample is reported too, and the same at a short period (stress)
 * to show how the cost scales. Prints a table; with --out writes it as
 * Markdown and the figures as JSON beside it (same name, .json).
 *
 *   bench_monitor [--out FILE.md] [--runs N] [--seconds S] [--period P]
 *                 [--stress-period P] [--commit SHA] TRACE... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "vramkit.h"

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
    double *c = malloc(n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

typedef struct replay {
    const vram_trace *t;
    vram_pool *pool;
    void **ptrs;
} replay;

/* One pass over the events; returns the operations done. */
static uint64_t pass(replay *r)
{
    uint64_t ops = 0;
    for (size_t i = 0; i < r->t->n_events; i++) {
        const vram_trace_event *e = &r->t->events[i];
        vram_stream s = (vram_stream)(uintptr_t)r->t->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            if (vram_pool_alloc(r->pool, e->size, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s,
                                &r->ptrs[e->slot]))
                r->ptrs[e->slot] = NULL;
            ops++;
        } else if (e->action == VRAM_TRACE_FREE && r->ptrs[e->slot]) {
            vram_pool_free(r->pool, r->ptrs[e->slot], s);
            r->ptrs[e->slot] = NULL;
            ops++;
        }
    }
    for (size_t i = 0; i < r->t->n_slots; i++) {
        if (r->ptrs[i]) {
            vram_pool_free(r->pool, r->ptrs[i], NULL);
            r->ptrs[i] = NULL;
            ops++;
        }
    }
    return ops;
}

typedef struct run_result {
    double ns_per_op;
    double cpu_ns_per_op; /* the replay thread's CPU time per operation */
    uint64_t samples;
    double sample_s;     /* the monitor's time spent sampling (wall) */
    double sample_cpu_s; /* and its CPU time */
    double wall_s;
} run_result;

/* Scrape one counter from the monitor's metrics. */
typedef struct scrape {
    char buf[16384];
    size_t len;
} scrape;

static int scrape_write(void *ctx, const char *data, size_t len)
{
    scrape *s = ctx;
    size_t n = len < sizeof s->buf - 1 - s->len ? len : sizeof s->buf - 1 - s->len;
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = 0;
    return 0;
}

static double metric(const scrape *s, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(s->buf, key);
    return p ? atof(p + strlen(key)) : NAN;
}

/* Replay for `seconds`, with a monitor at `period` (0: none). */
static int timed_run(replay *r, double seconds, double period, run_result *out)
{
    vram_monitor *m = NULL;
    if (period > 0) {
        vram_monitor_opts o;
        vram_monitor_opts_init(&o);
        o.period_s = period;
        if (vram_monitor_start(&o, &m) || vram_monitor_add_pool(m, r->pool)) {
            fprintf(stderr, "bench_monitor: %s\n", vram_last_error());
            vram_monitor_stop(m);
            return 1;
        }
    }
    uint64_t ops = 0;
    double c0 = thread_cpu_s(), t0 = now_s(), t;
    do {
        ops += pass(r);
        t = now_s();
    } while (t - t0 < seconds);
    *out = (run_result){.ns_per_op = (t - t0) * 1e9 / (double)ops,
                        .cpu_ns_per_op = (thread_cpu_s() - c0) * 1e9 / (double)ops,
                        .wall_s = t - t0};
    if (m) {
        scrape s = {.len = 0};
        vram_monitor_print_metrics(m, scrape_write, &s, 0);
        out->samples = (uint64_t)metric(&s, "vram_monitor_samples_total");
        out->sample_s = metric(&s, "vram_monitor_sample_seconds_total");
        out->sample_cpu_s = metric(&s, "vram_monitor_sample_cpu_seconds_total");
        vram_monitor_remove_pool(m, r->pool);
        vram_monitor_stop(m);
    }
    return 0;
}

typedef struct trace_result {
    const char *name;
    size_t events;
    double off_med, on_med, ratio;
    double pair_ratio;    /* median of with / without over the pairs of runs */
    double cpu_ratio;     /* the same on the replay thread's CPU time */
    double *off_cpu, *on_cpu;
    double sample_us;      /* mean CPU time of one sample */
    double sample_wall_us; /* mean wall time of one sample (pool lock waits included) */
    double sampler_share;  /* sampling CPU time / run time, with the monitor on */
    uint64_t samples;
    double *off, *on;
    double stress_ratio, stress_sample_us, stress_share;
    uint64_t stress_samples;
} trace_result;

static int bench_trace(const char *path, unsigned runs, double seconds, double period,
                       double stress_period, trace_result *res)
{
    vram_trace *t;
    if (vram_trace_read(path, &t)) {
        fprintf(stderr, "bench_monitor: %s\n", vram_last_error());
        return 1;
    }
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.name = "replay";
    po.configured_listeners = 0;
    replay r = {.t = t, .ptrs = calloc(t->n_slots ? t->n_slots : 1, sizeof(void *))};
    if (!r.ptrs || vram_pool_create(&po, &r.pool)) {
        fprintf(stderr, "bench_monitor: %s\n", vram_last_error());
        vram_trace_free(t);
        free(r.ptrs);
        return 1;
    }
    pass(&r); /* warm */
    res->name = base_name(path);
    res->events = t->n_events;
    res->off = calloc(runs, sizeof *res->off);
    res->on = calloc(runs, sizeof *res->on);
    res->off_cpu = calloc(runs, sizeof *res->off_cpu);
    res->on_cpu = calloc(runs, sizeof *res->on_cpu);
    if (!res->off || !res->on || !res->off_cpu || !res->on_cpu) {
        fprintf(stderr, "bench_monitor: out of memory\n");
        vram_pool_destroy(r.pool);
        free(r.ptrs);
        vram_trace_free(t);
        return 1;
    }
    double sample_s = 0, sample_wall = 0, wall = 0;
    uint64_t samples = 0;
    int rc = 0;
    for (unsigned i = 0; i < runs && !rc; i++) {
        run_result a, b;
        /* Alternate which side goes first, so drift hits both alike. */
        int on_first = i % 2;
        rc = timed_run(&r, seconds, on_first ? period : 0, on_first ? &b : &a);
        if (!rc)
            rc = timed_run(&r, seconds, on_first ? 0 : period, on_first ? &a : &b);
        if (rc)
            break;
        res->off[i] = a.ns_per_op;
        res->on[i] = b.ns_per_op;
        res->off_cpu[i] = a.cpu_ns_per_op;
        res->on_cpu[i] = b.cpu_ns_per_op;
        samples += b.samples;
        sample_s += b.sample_cpu_s;
        sample_wall += b.sample_s;
        wall += b.wall_s;
    }
    if (!rc) {
        res->off_med = median(res->off, runs);
        res->on_med = median(res->on, runs);
        res->ratio = res->on_med / res->off_med;
        double *pr = calloc(runs, sizeof *pr);
        if (pr) {
            for (unsigned i = 0; i < runs; i++)
                pr[i] = res->on[i] / res->off[i];
            res->pair_ratio = median(pr, runs);
            for (unsigned i = 0; i < runs; i++)
                pr[i] = res->on_cpu[i] / res->off_cpu[i];
            res->cpu_ratio = median(pr, runs);
            free(pr);
        }
        res->samples = samples;
        res->sample_us = samples ? sample_s / (double)samples * 1e6 : NAN;
        res->sample_wall_us = samples ? sample_wall / (double)samples * 1e6 : NAN;
        res->sampler_share = sample_s / wall;
        /* Stress: a short period, three pairs. */
        double so[3], sn[3];
        double ss = 0, sw = 0;
        uint64_t sc = 0;
        for (int i = 0; i < 3 && !rc; i++) {
            run_result a, b;
            rc = timed_run(&r, seconds / 2, 0, &a);
            if (!rc)
                rc = timed_run(&r, seconds / 2, stress_period, &b);
            so[i] = a.ns_per_op;
            sn[i] = b.ns_per_op;
            ss += b.sample_cpu_s;
            sw += b.wall_s;
            sc += b.samples;
        }
        if (!rc) {
            res->stress_ratio = median(sn, 3) / median(so, 3);
            res->stress_samples = sc;
            res->stress_sample_us = sc ? ss / (double)sc * 1e6 : NAN;
            res->stress_share = ss / sw;
        }
    }
    vram_pool_destroy(r.pool);
    free(r.ptrs);
    vram_trace_free(t);
    return rc;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *commit = "unknown";
    unsigned runs = 9;
    double seconds = 2.0, period = 1.0, stress_period = 0.01;
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc)
            commit = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--period") == 0 && i + 1 < argc)
            period = atof(argv[++i]);
        else if (strcmp(argv[i], "--stress-period") == 0 && i + 1 < argc)
            stress_period = atof(argv[++i]);
        else {
            first = i;
            break;
        }
    }
    if (first >= argc || runs < 1 || runs > 1000 || !(seconds > 0) || !(period > 0) ||
        !(stress_period > 0)) {
        fprintf(stderr, "usage: bench_monitor [--out FILE.md] [--runs N] [--seconds S] "
                        "[--period P] [--stress-period P] [--commit SHA] TRACE...\n");
        return 2;
    }
    /* The alerts the monitor raises are not what is measured here. */
    vram_config_set("log_level", "error");
    int n = argc - first, status = 0;
    trace_result *res = calloc((size_t)n, sizeof *res);
    if (!res)
        return 1;
    printf("%-30s %8s %12s %12s %8s %8s %8s %9s %10s %12s %10s %12s\n", "trace", "events",
           "off ns/op", "on ns/op", "ratio", "pairs", "cpu", "samples", "cpu us/s.", "sampler %",
           "stress", "stress %");
    for (int i = 0; i < n; i++) {
        if (bench_trace(argv[first + i], runs, seconds, period, stress_period, &res[i])) {
            status = 1;
            res[i].name = NULL;
            continue;
        }
        trace_result *r = &res[i];
        printf("%-30s %8zu %12.1f %12.1f %8.4f %8.4f %8.4f %9llu %10.1f %11.4f%% %10.4f %11.3f%%\n",
               r->name, r->events, r->off_med, r->on_med, r->ratio, r->pair_ratio, r->cpu_ratio,
               (unsigned long long)r->samples,
               r->sample_us, 100 * r->sampler_share, r->stress_ratio, 100 * r->stress_share);
        fflush(stdout);
    }
    if (out) {
        FILE *md = fopen(out, "w");
        char jpath[1024];
        size_t len = strlen(out);
        if (len > 3 && strcmp(out + len - 3, ".md") == 0)
            len -= 3;
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)len, out);
        FILE *js = fopen(jpath, "w");
        if (!md || !js) {
            fprintf(stderr, "bench_monitor: cannot write %s or %s\n", out, jpath);
            return 1;
        }
        char machine[400], date[64];
        tool_machine(machine, sizeof machine);
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
        fprintf(md, "# The monitor's cost: trace replay with and without it\n\n");
        fprintf(md, "- date: %s\n- machine: %s (sim backend)\n- commit: %s\n", date, machine,
                commit);
        fprintf(md, "- command: `bench_monitor --runs %u --seconds %g --period %g "
                    "--stress-period %g",
                runs, seconds, period, stress_period);
        for (int i = first; i < argc; i++)
            fprintf(md, " %s", argv[i]);
        fprintf(md, "` (via `make bench`)\n");
        fprintf(md, "- each run replays the trace again and again through one warm vmm pool for "
                    "%g s; runs alternate without and with a monitor sampling that pool every "
                    "%g s (pools, owners, kinds, NVML where present); ns/op is the median of %u "
                    "runs each; ratio = with / without (the goal: below 1.01), of the medians, "
                    "and pairs: the median of each pair's ratio; cpu: the same on the replay "
                    "thread's CPU time (steadier on a loaded machine). cpu us/sample "
                    "and sampler %% are the monitor's own CPU time per sample and its share of "
                    "the run time; wall us/sample includes waiting for the pool's lock. "
                    "Stress: the same at a %g s period, 3 pairs of %g s\n\n",
                seconds, period, runs, stress_period, seconds / 2);
        fprintf(md, "| trace | events | without ns/op | with ns/op | ratio | pairs | cpu | "
                    "samples | "
                    "cpu us/sample | wall us/sample | sampler %% | stress ratio | stress sampler "
                    "%% |\n");
        fprintf(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        fprintf(js, "{\"bench\":\"monitor\",\"date\":\"%s\",\"commit\":\"%s\",\"runs\":%u,"
                    "\"seconds\":%g,\"period_s\":%g,\"stress_period_s\":%g,\"traces\":[",
                date, commit, runs, seconds, period, stress_period);
        int firstj = 1;
        for (int i = 0; i < n; i++) {
            trace_result *r = &res[i];
            if (!r->name)
                continue;
            fprintf(md, "| %s | %zu | %.1f | %.1f | %.4f | %.4f | %.4f | %llu | %.1f | %.1f | "
                        "%.4f | %.4f | %.3f |\n",
                    r->name, r->events, r->off_med, r->on_med, r->ratio, r->pair_ratio,
                    r->cpu_ratio,
                    (unsigned long long)r->samples, r->sample_us, r->sample_wall_us,
                    100 * r->sampler_share,
                    r->stress_ratio, 100 * r->stress_share);
            fprintf(js, "%s{\"trace\":\"%s\",\"events\":%zu,\"without_ns_per_op\":[", firstj ? "" : ",",
                    r->name, r->events);
            for (unsigned k = 0; k < runs; k++)
                fprintf(js, "%s%.3f", k ? "," : "", r->off[k]);
            fprintf(js, "],\"with_ns_per_op\":[");
            for (unsigned k = 0; k < runs; k++)
                fprintf(js, "%s%.3f", k ? "," : "", r->on[k]);
            fprintf(js,
                    "],\"without_median\":%.3f,\"with_median\":%.3f,\"ratio\":%.5f,"
                    "\"pair_ratio\":%.5f,\"cpu_ratio\":%.5f,"
                    "\"samples\":%llu,\"cpu_us_per_sample\":%.3f,\"wall_us_per_sample\":%.3f,"
                    "\"sampler_share\":%.7f,"
                    "\"stress_ratio\":%.5f,\"stress_samples\":%llu,\"stress_cpu_us_per_sample\":%.3f,"
                    "\"stress_sampler_share\":%.7f}",
                    r->off_med, r->on_med, r->ratio, r->pair_ratio, r->cpu_ratio,
                    (unsigned long long)r->samples,
                    r->sample_us, r->sample_wall_us, r->sampler_share, r->stress_ratio, (unsigned long long)r->stress_samples,
                    r->stress_sample_us, r->stress_share);
            firstj = 0;
        }
        fprintf(js, "]}\n");
        fclose(md);
        fclose(js);
    }
    for (int i = 0; i < n; i++) {
        free(res[i].off);
        free(res[i].on);
        free(res[i].off_cpu);
        free(res[i].on_cpu);
    }
    free(res);
    return status;
}
