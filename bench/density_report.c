/* bench/density_report.c - bench_density's output: a Markdown section per
 * design (its header, a row per step as it is measured, the answer) on
 * stdout and appended to --out, and a JSON line per step, per design's
 * answer and per budget case appended to --json; every row is flushed as
 * soon as it is written, so that a run cut short still shows its steps. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "density.h"

int density_report_open(density_report *r, const density_opts *o)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    tool_machine(r->machine, sizeof r->machine);
    if (o->out && !(r->md = fopen(o->out, "a"))) {
        fprintf(stderr, "bench_density: cannot append to %s: %s\n", o->out, strerror(errno));
        return 1;
    }
    if (o->json && !(r->jsonl = fopen(o->json, "a"))) {
        fprintf(stderr, "bench_density: cannot append to %s: %s\n", o->json, strerror(errno));
        if (r->md)
            fclose(r->md);
        r->md = NULL;
        return 1;
    }
    return 0;
}

void density_report_close(density_report *r)
{
    if (r->md && fclose(r->md))
        fprintf(stderr, "bench_density: writing %s: %s\n", r->o->out, strerror(errno));
    if (r->jsonl && fclose(r->jsonl))
        fprintf(stderr, "bench_density: writing %s: %s\n", r->o->json, strerror(errno));
    r->md = r->jsonl = NULL;
}

/* The same text to stdout and the Markdown file. */
static void out(density_report *r, const char *fmt, ...) TOOL_PRINTF(2, 3);
static void out(density_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    if (r->md) {
        va_start(ap, fmt);
        vfprintf(r->md, fmt, ap);
        va_end(ap);
    }
}

static void flush(density_report *r)
{
    fflush(stdout);
    if (r->md)
        fflush(r->md);
    if (r->jsonl)
        fflush(r->jsonl);
}

static void emit_json(density_report *r, cJSON *x)
{
    if (!x)
        return;
    char *text = r->jsonl ? cJSON_PrintUnformatted(x) : NULL;
    if (text) {
        fprintf(r->jsonl, "%s\n", text);
        free(text);
    }
    cJSON_Delete(x);
}

/* Text for a table cell: no bars, no line breaks. */
static const char *cell(const char *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", s);
    for (char *p = buf; *p; p++)
        if (*p == '|' || *p == '\n' || *p == '\r')
            *p = *p == '|' ? '/' : ' ';
    return buf;
}

static double gib(uint64_t b) { return (double)b / 1073741824.0; }

/* The lines every table's header starts with: the command, date, commit
 * and machine. */
static void header_lines(density_report *r, const density_opts *o, const char *date)
{
    out(r, "- command: `bench_density");
    for (int i = 1; i < o->argc; i++)
        out(r, " %s", o->argv[i]);
    out(r, "`\n- date: %s; commit: %s\n", date, o->commit);
    out(r, "- GPU: %s, %.1f GiB; driver %s (CUDA %d.%d); %s\n", r->gpu, gib(r->total_bytes),
        r->driver, r->cuda_driver / 1000, (r->cuda_driver % 1000) / 10, r->machine);
}

static cJSON *json_common(density_report *r, const char *type, const char *design)
{
    const density_opts *o = r->o;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "type", type);
    cJSON_AddStringToObject(x, "design", design);
    cJSON_AddStringToObject(x, "codec", o->codec_label);
    cJSON_AddStringToObject(x, "clip", o->clip);
    cJSON_AddStringToObject(x, "model", o->model);
    cJSON_AddStringToObject(x, "commit", o->commit);
    cJSON_AddStringToObject(x, "gpu", r->gpu);
    cJSON_AddStringToObject(x, "driver", r->driver);
    if (strcmp(design, "baseline")) {
        cJSON_AddNumberToObject(x, "workers", o->workers);
        cJSON_AddNumberToObject(x, "batch", o->batch);
        cJSON_AddNumberToObject(x, "graphs", o->graphs);
    }
    return x;
}

void density_report_begin(density_report *r, const char *design, const char *what,
                          uint64_t used_idle, uint64_t used_before)
{
    const density_opts *o = r->o;
    char date[64];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    out(r, "\n## Streams one GPU carries: %s design, %s (%dx%d at %.2f fps)\n\n", design,
        o->codec_label, o->clip_width, o->clip_height, o->clip_fps);
    header_lines(r, o, date);
    out(r, "- clip: `%s` (%s) for every stream, paced to its frame rate and looping; model "
           "`%s` on every frame\n",
        o->clip, o->clip_codec, o->model);
    out(r, "- design: %s\n", what);
    out(r, "- a step is sustained when every stream processed >= %.1f frames/s and dropped "
           "<= %.2f %% of its frames over a window of %.0f s after %.0f s of warm-up\n",
        o->min_fps, o->max_drop_pct, o->seconds, o->warmup_s);
    out(r, "- device memory used (NVML): %.2f GiB before the design, %.2f GiB with it and no "
           "stream (the base of MiB / stream)\n\n",
        gib(used_idle), gib(used_before));
    out(r, "| streams | sustained | window s | min fps | mean fps | dropped %% | used GiB "
           "| process GiB | MiB / stream | marginal MiB / stream | accounted MiB / stream "
           "| p50 ms | p99 ms | service p50 / p99 ms | NVDEC %% | GPU %% | CPU us / frame "
           "| note |\n"
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
           "|---:|---|\n");
    flush(r);
}

static void num_or_na(char *buf, size_t cap, double v, const char *fmt)
{
    if (v < 0)
        snprintf(buf, cap, "n/a");
    else
        snprintf(buf, cap, fmt, v);
}

void density_report_row(density_report *r, const density_row *w)
{
    char proc[32], marginal[32], acc[32], svc[48], dec[16], sm[16], note[600];
    if (w->proc_known)
        snprintf(proc, sizeof proc, "%.2f%s", gib(w->proc_used), w->proc_only ? "*" : "");
    else
        snprintf(proc, sizeof proc, "n/a");
    if (w->has_marginal)
        snprintf(marginal, sizeof marginal, "%.1f", w->marginal_mib);
    else
        snprintf(marginal, sizeof marginal, "n/a");
    num_or_na(acc, sizeof acc, w->accounted_mib, "%.1f");
    if (w->svc_p50_ms >= 0)
        snprintf(svc, sizeof svc, "%.1f / %.1f", w->svc_p50_ms, w->svc_p99_ms);
    else
        snprintf(svc, sizeof svc, "n/a");
    num_or_na(dec, sizeof dec, w->dec_util, "%.0f");
    num_or_na(sm, sizeof sm, w->sm_util, "%.0f");
    out(r,
        "| %u | %s | %.1f | %.2f | %.2f | %.3f | %.2f | %s | %.1f | %s | %s | %.1f | %.1f | %s "
        "| %s | %s | %.0f | %s |\n",
        w->n, w->sustained ? "yes" : "no", w->window_s, w->min_fps, w->mean_fps, w->dropped_pct,
        gib(w->used), proc, w->mib_per_stream, marginal, acc, w->p50_ms, w->p99_ms, svc, dec, sm,
        w->cpu_us_per_frame, cell(w->note, note, sizeof note));
    cJSON *x = json_common(r, "step", w->design);
    cJSON_AddNumberToObject(x, "streams", w->n);
    cJSON_AddNumberToObject(x, "running", w->have);
    cJSON_AddBoolToObject(x, "sustained", w->sustained);
    cJSON_AddNumberToObject(x, "window_s", w->window_s);
    cJSON_AddBoolToObject(x, "ended_early", w->early);
    cJSON_AddNumberToObject(x, "min_fps", w->min_fps);
    cJSON_AddNumberToObject(x, "mean_fps", w->mean_fps);
    cJSON_AddNumberToObject(x, "dropped_pct", w->dropped_pct);
    cJSON_AddNumberToObject(x, "worst_dropped_pct", w->worst_drop_pct);
    cJSON_AddNumberToObject(x, "streams_below_fps", w->short_streams);
    cJSON_AddNumberToObject(x, "streams_dropping", w->dropping_streams);
    cJSON_AddNumberToObject(x, "streams_failed", w->failed_streams);
    cJSON_AddNumberToObject(x, "streams_cpu_decoded", w->cpu_decoded);
    cJSON_AddNumberToObject(x, "frames", (double)w->frames);
    cJSON_AddNumberToObject(x, "used_bytes", (double)w->used);
    cJSON_AddNumberToObject(x, "used_mean_bytes", (double)w->used_mean);
    cJSON_AddNumberToObject(x, "used_before_bytes", (double)w->used_before);
    if (w->proc_known)
        cJSON_AddNumberToObject(x, "process_used_bytes", (double)w->proc_used);
    else
        cJSON_AddNullToObject(x, "process_used_bytes");
    cJSON_AddBoolToObject(x, "process_matched_as_only_one", w->proc_only);
    cJSON_AddNumberToObject(x, "mib_per_stream", w->mib_per_stream);
    if (w->has_marginal)
        cJSON_AddNumberToObject(x, "marginal_mib_per_stream", w->marginal_mib);
    else
        cJSON_AddNullToObject(x, "marginal_mib_per_stream");
    if (w->accounted_mib >= 0)
        cJSON_AddNumberToObject(x, "accounted_mib_per_stream", w->accounted_mib);
    cJSON_AddNumberToObject(x, "latency_p50_ms", w->p50_ms);
    cJSON_AddNumberToObject(x, "latency_p99_ms", w->p99_ms);
    if (w->svc_p50_ms >= 0) {
        cJSON_AddNumberToObject(x, "service_latency_p50_ms", w->svc_p50_ms);
        cJSON_AddNumberToObject(x, "service_latency_p99_ms", w->svc_p99_ms);
    }
    if (w->dec_util >= 0)
        cJSON_AddNumberToObject(x, "nvdec_util_pct", w->dec_util);
    if (w->sm_util >= 0)
        cJSON_AddNumberToObject(x, "gpu_util_pct", w->sm_util);
    cJSON_AddNumberToObject(x, "cpu_us_per_frame", w->cpu_us_per_frame);
    cJSON_AddStringToObject(x, "note", w->note);
    emit_json(r, x);
    flush(r);
}

void density_report_end(density_report *r, const char *design, unsigned best,
                        double mib_at_best, const char *why_stopped)
{
    out(r, "\n**Largest sustained: %u streams** of %s (%s design)", best, r->o->codec_label,
        design);
    if (best)
        out(r, ", %.1f MiB of device memory per stream there", mib_at_best);
    out(r, "; stopped: %s.\n\n", why_stopped && *why_stopped ? why_stopped : "-");
    out(r, "Used GiB is the peak of NVML's 1 s samples over the window (process: this "
           "process's, * where it was matched as the only process NVML lists); MiB / stream "
           "is (used - used with no stream) / N; marginal is the change since the last step "
           "measured, per stream added; accounted is vramkit's own count of a stream's live "
           "bytes. Latency is from decoded to result, per stream over the window: the median "
           "of the streams' p50 and the worst p99 (bucket upper edges, within 19 %%); the "
           "service's are its statistics since each stream began. GPU %% is NVML's share of "
           "time a kernel ran, not SM occupancy. CPU is the whole process's user + system time "
           "over the window per frame processed.\n");
    cJSON *x = json_common(r, "summary", design);
    cJSON_AddNumberToObject(x, "largest_sustained", best);
    cJSON_AddNumberToObject(x, "mib_per_stream_at_largest", mib_at_best);
    cJSON_AddStringToObject(x, "stopped", why_stopped ? why_stopped : "");
    emit_json(r, x);
    flush(r);
}

void density_report_budget(density_report *r, const density_budget_row *rows, int n)
{
    const density_opts *o = r->o;
    char date[64], why[800];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    out(r, "\n## Streams admitted within %.1f GiB of device memory, %s\n\n",
        gib(o->budget_case), o->codec_label);
    header_lines(r, o, date);
    out(r, "- vramkit: a service with this budget takes streams until "
           "vram_service_add_stream refuses; baseline: threads are started (each running) "
           "until the device's used memory since before the first would pass it\n\n");
    out(r, "| design | admitted | used since start GiB | used / stream MiB | fixed MiB "
           "(accounted) | need / stream MiB (accounted) | why it stopped |\n"
           "|---|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const density_budget_row *b = &rows[i];
        uint64_t since = b->used_after > b->used_before ? b->used_after - b->used_before : 0;
        char fixed[32], need[32];
        if (strcmp(b->design, "baseline")) {
            snprintf(fixed, sizeof fixed, "%.1f", density_mib(b->fixed_bytes));
            snprintf(need, sizeof need, "%.1f", density_mib(b->need_bytes));
        } else {
            snprintf(fixed, sizeof fixed, "n/a");
            snprintf(need, sizeof need, "n/a");
        }
        out(r, "| %s | %u | %.2f | %.1f | %s | %s | %s |\n", b->design, b->admitted, gib(since),
            b->admitted ? density_mib(since) / b->admitted : 0.0, fixed, need,
            cell(b->why, why, sizeof why));
        cJSON *x = json_common(r, "budget", b->design);
        cJSON_AddNumberToObject(x, "budget_bytes", (double)b->budget);
        cJSON_AddNumberToObject(x, "admitted", b->admitted);
        cJSON_AddNumberToObject(x, "used_before_bytes", (double)b->used_before);
        cJSON_AddNumberToObject(x, "used_after_bytes", (double)b->used_after);
        cJSON_AddNumberToObject(x, "fixed_bytes", (double)b->fixed_bytes);
        cJSON_AddNumberToObject(x, "need_bytes_per_stream", (double)b->need_bytes);
        cJSON_AddStringToObject(x, "why", b->why);
        emit_json(r, x);
    }
    if (n == 2)
        out(r, "\n**Within %.1f GiB: vramkit %u streams, baseline %u.**\n", gib(o->budget_case),
            rows[0].admitted, rows[1].admitted);
    flush(r);
}
