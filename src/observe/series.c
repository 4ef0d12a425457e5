/* src/observe/series.c - the monitor's sample files: CSV (one row per pool
 * with its totals and the GPU's, then one row per owner and per kind with
 * their live bytes) and JSON Lines (one object per sample, alert objects
 * interleaved). The formats are the observe module's contract, which the
 * report reads (report_series_csv.c, report_series_jsonl.c); change them
 * only together.
 *
 * The CSV's columns: time_s, elapsed_s, iteration, pool, owner, kind, the
 * pool fields (series_fields.h, in its order), gpu_used_bytes,
 * gpu_total_bytes. A pool's row leaves owner and kind empty; an owner's or a
 * kind's row fills only live_bytes of the pool fields, and no GPU column.
 * A JSON Lines pool object carries the same pool fields under the same
 * names, in the same order. */
#include <errno.h>
#include <string.h>

#include "monitor_internal.h"
#include "series_fields.h"

/* How a pool field of each kind (series_fields.h) is written. */
#define FIELD_FMT_BYTES "%llu"
#define FIELD_FMT_RATIO "%.6f"
#define FIELD_ARG_BYTES(v) ((unsigned long long)(v))
#define FIELD_ARG_RATIO(v) ((double)(v))
/* The arguments for p's fields, in list order, each after a comma. */
#define FIELD_ARG(name, kind, header) , FIELD_ARG_##kind(p->name)

#define CSV_NAME(name, kind, header) "," #name
const char vram__monitor_csv_header[] =
    "time_s,elapsed_s,iteration,pool,owner,kind" VRAM__SERIES_POOL_FIELDS(CSV_NAME)
    ",gpu_used_bytes,gpu_total_bytes\n";
#undef CSV_NAME

static int io_check(FILE *f, const char *path)
{
    if (ferror(f))
        return vram__fail(VRAM_EIO, "cannot write the monitor's samples to %s: %s", path,
                          strerror(errno ? errno : EIO));
    return 0;
}

void vram__json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p == '\r')
            fputs("\\r", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void csv_string(FILE *f, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

static unsigned long long ull(uint64_t v) { return (unsigned long long)v; }

static void csv_prefix(FILE *f, const vram_sample *s, const char *pool)
{
    fprintf(f, "%.3f,%.3f,", s->time_s, s->elapsed_s);
    if (s->iteration >= 0)
        fprintf(f, "%lld", (long long)s->iteration);
    fputc(',', f);
    csv_string(f, pool);
    fputc(',', f);
}

/* The rest of an owner's or a kind's row, from the comma after its kind:
 * its live bytes under live_bytes (the first pool field), every other pool
 * field and the GPU's columns empty. */
static void csv_live_only(FILE *f, uint64_t live)
{
    fprintf(f, ",%llu", ull(live));
    for (int i = 1; i < VRAM__SERIES_F_COUNT; i++)
        fputc(',', f);
    fputs(",,\n", f);
}

int vram__series_csv(FILE *f, const char *path, const vram_sample *s)
{
    for (uint32_t i = 0; i < s->n_pools; i++) {
        const vram_sample_pool *p = &s->pools[i];
        csv_prefix(f, s, p->pool);
        /* Owner and kind empty, then the pool fields. */
#define CSV_FMT(name, kind, header) "," FIELD_FMT_##kind
        fprintf(f, "," VRAM__SERIES_POOL_FIELDS(CSV_FMT) ","
                VRAM__SERIES_POOL_FIELDS(FIELD_ARG));
#undef CSV_FMT
        if (s->gpu)
            fprintf(f, "%llu,%llu", ull(s->gpu->used_bytes), ull(s->gpu->total_bytes));
        else
            fputc(',', f);
        fputc('\n', f);
        for (uint32_t j = 0; j < p->n_owners; j++) {
            csv_prefix(f, s, p->pool);
            csv_string(f, p->owners[j].owner);
            fputc(',', f); /* kind empty */
            csv_live_only(f, p->owners[j].live_bytes);
        }
        for (int k = 0; k < VRAM_KIND_COUNT; k++) {
            if (!p->kind_live_bytes[k] && !p->kind_peak_live_bytes[k])
                continue;
            csv_prefix(f, s, p->pool);
            fprintf(f, ",%s", vram_kind_name((vram_kind)k)); /* owner empty */
            csv_live_only(f, p->kind_live_bytes[k]);
        }
    }
    return io_check(f, path);
}

static void json_time(FILE *f, double time_s, double elapsed_s, int64_t iteration)
{
    fprintf(f, "\"time_s\":%.3f,\"elapsed_s\":%.3f,\"iteration\":", time_s, elapsed_s);
    if (iteration >= 0)
        fprintf(f, "%lld", (long long)iteration);
    else
        fputs("null", f);
}

static void json_gpu(FILE *f, const vram_sample *s)
{
    if (!s->gpu) {
        fputs("\"gpu\":null,\"gpu_unavailable\":", f);
        vram__json_string(f, s->gpu_unavailable ? s->gpu_unavailable : "no GPU is read");
        return;
    }
    const vram_sample_gpu *g = s->gpu;
    fprintf(f, "\"gpu\":{\"index\":%d,\"name\":", g->index);
    vram__json_string(f, g->name);
    fprintf(f, ",\"total_bytes\":%llu,\"used_bytes\":%llu,\"processes\":", ull(g->total_bytes),
            ull(g->used_bytes));
    if (!g->processes_known) {
        fputs("null}", f);
        return;
    }
    fputc('[', f);
    for (unsigned i = 0; i < g->n_processes; i++) {
        const vram_gpu_process *pr = &g->processes[i];
        fprintf(f, "%s{\"pid\":%u,\"name\":", i ? "," : "", pr->pid);
        vram__json_string(f, pr->name);
        if (pr->used_bytes == VRAM_GPU_BYTES_UNKNOWN)
            fputs(",\"used_bytes\":null}", f);
        else
            fprintf(f, ",\"used_bytes\":%llu}", ull(pr->used_bytes));
    }
    fputs("]}", f);
}

int vram__series_jsonl(FILE *f, const char *path, const vram_sample *s)
{
    fputs("{\"type\":\"sample\",", f);
    json_time(f, s->time_s, s->elapsed_s, s->iteration);
    fprintf(f, ",\"contexts\":%u,\"pools\":[", s->contexts);
    for (uint32_t i = 0; i < s->n_pools; i++) {
        const vram_sample_pool *p = &s->pools[i];
        fputs(i ? ",{\"pool\":" : "{\"pool\":", f);
        vram__json_string(f, p->pool);
#define JSON_FMT(name, kind, header) ",\"" #name "\":" FIELD_FMT_##kind
        fprintf(f, VRAM__SERIES_POOL_FIELDS(JSON_FMT) ",\"owners\":["
                VRAM__SERIES_POOL_FIELDS(FIELD_ARG));
#undef JSON_FMT
        for (uint32_t j = 0; j < p->n_owners; j++) {
            fputs(j ? ",{\"owner\":" : "{\"owner\":", f);
            vram__json_string(f, p->owners[j].owner);
            fprintf(f, ",\"live_bytes\":%llu,\"peak_live_bytes\":%llu,\"budget_bytes\":%llu}",
                    ull(p->owners[j].live_bytes), ull(p->owners[j].peak_live_bytes),
                    ull(p->owners[j].budget_bytes));
        }
        fputs("],\"kinds\":[", f);
        int first = 1;
        for (int k = 0; k < VRAM_KIND_COUNT; k++) {
            if (!p->kind_live_bytes[k] && !p->kind_peak_live_bytes[k])
                continue;
            fprintf(f, "%s{\"kind\":\"%s\",\"live_bytes\":%llu,\"peak_live_bytes\":%llu}",
                    first ? "" : ",", vram_kind_name((vram_kind)k), ull(p->kind_live_bytes[k]),
                    ull(p->kind_peak_live_bytes[k]));
            first = 0;
        }
        fputs("]}", f);
    }
    fputs("],", f);
    json_gpu(f, s);
    fputs("}\n", f);
    return io_check(f, path);
}

/* A double as JSON: null where it is not a number. */
static void json_double(FILE *f, double v)
{
    if (v != v || v == 1.0 / 0.0 || v == -1.0 / 0.0)
        fputs("null", f);
    else
        fprintf(f, "%.17g", v);
}

int vram__series_alert_jsonl(FILE *f, const char *path, const vram_alert *a)
{
    fputs("{\"type\":\"alert\",", f);
    json_time(f, a->time_s, a->elapsed_s, a->iteration);
    fprintf(f, ",\"alert\":\"%s\",\"level\":\"%s\",\"pool\":", vram_alert_type_name(a->type),
            vram_alert_level_name(a->level));
    vram__json_string(f, a->pool);
    fputs(",\"owner\":", f);
    if (a->owner)
        vram__json_string(f, a->owner);
    else
        fputs("null", f);
    fputs(",\"value\":", f);
    json_double(f, a->value);
    fputs(",\"threshold\":", f);
    json_double(f, a->threshold);
    fputs(",\"message\":", f);
    vram__json_string(f, a->message);
    fputs("}\n", f);
    return io_check(f, path);
}
