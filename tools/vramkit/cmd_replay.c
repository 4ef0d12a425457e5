/* tools/vramkit/cmd_replay.c - `vramkit replay TRACE... [--policy P]
 * [--granularity BYTES] [--capacity BYTES] [--backend sim|host] [--runs N]
 * [--json]`: replay traces through a pool and print, per trace, what it held
 * and what its bookkeeping cost next to glibc malloc in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "vramkit.h"

static const char *const help =
    "usage: vramkit replay TRACE... [--policy vmm|segments] [--granularity BYTES]\n"
    "                      [--capacity BYTES] [--backend sim|host] [--runs N] [--json]\n\n"
    "Replays each allocation trace (RMM CSV, plain or gzip) through a fresh pool on the\n"
    "simulated device and prints: events, peak live and peak reserved bytes and their\n"
    "ratio, the floor of that ratio under the stream model (the most bytes live or\n"
    "freed-but-pending at once, over peak live), fragmentation when reserved memory\n"
    "peaked, backend calls, host ns per\n"
    "operation, and glibc malloc/free's ns per operation on the same events in the same\n"
    "run (median of --runs timed runs each, alternating). Requests the capacity cannot\n"
    "hold are reported and the replay continues. --json prints one object per trace.\n"
    "Sizes accept K/M/G suffixes (powers of 1024).\n";

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_header(void)
{
    printf("%-30s %-8s %7s %9s %9s %6s %6s %6s %8s %7s %8s %6s\n", "trace", "policy", "events",
           "live MiB", "held MiB", "ratio", "floor", "frag", "backend", "ns/op", "malloc", "failed");
}

static void print_row(const char *name, const char *policy, const vram_replay_result *r)
{
    printf("%-30s %-8s %7llu %9.1f %9.1f %6.3f %6.3f %6.3f %8llu %7.1f %8.1f %6llu\n", name,
           policy, (unsigned long long)r->events, mib(r->peak_live_bytes),
           mib(r->peak_reserved_bytes), r->reserved_ratio, r->floor_ratio,
           r->fragmentation_at_peak, (unsigned long long)r->backend_calls,
           r->ns_per_op, r->malloc_ns_per_op, (unsigned long long)r->failed_allocs);
}

static int print_json(const char *path, const char *policy, uint64_t granularity,
                      const vram_replay_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return 1;
    cJSON_AddStringToObject(o, "trace", path);
    cJSON_AddStringToObject(o, "policy", policy);
    cJSON_AddNumberToObject(o, "granularity", (double)granularity);
    cJSON_AddNumberToObject(o, "events", (double)r->events);
    cJSON_AddNumberToObject(o, "allocs", (double)r->allocs);
    cJSON_AddNumberToObject(o, "frees", (double)r->frees);
    cJSON_AddNumberToObject(o, "peak_live_bytes", (double)r->peak_live_bytes);
    cJSON_AddNumberToObject(o, "peak_reserved_bytes", (double)r->peak_reserved_bytes);
    cJSON_AddNumberToObject(o, "reserved_ratio", r->reserved_ratio);
    cJSON_AddNumberToObject(o, "fragmentation_at_peak", r->fragmentation_at_peak);
    cJSON_AddNumberToObject(o, "peak_live_pending_bytes", (double)r->peak_live_pending_bytes);
    cJSON_AddNumberToObject(o, "floor_ratio", r->floor_ratio);
    cJSON_AddNumberToObject(o, "ns_per_op", r->ns_per_op);
    cJSON_AddNumberToObject(o, "malloc_ns_per_op", r->malloc_ns_per_op);
    cJSON_AddNumberToObject(o, "backend_calls", (double)r->backend_calls);
    cJSON_AddNumberToObject(o, "failed_allocs", (double)r->failed_allocs);
    if (r->failed_allocs) {
        cJSON *f = cJSON_AddObjectToObject(o, "first_failure");
        if (f) {
            cJSON_AddNumberToObject(f, "line", r->first_failure_line);
            cJSON_AddNumberToObject(f, "size", (double)r->first_failure_size);
            cJSON_AddStringToObject(f, "message", r->first_failure);
        }
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text)
        return 1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int cmd_replay(int argc, char **argv)
{
    vram_replay_opts o;
    int rc = vram_replay_opts_init(&o);
    if (rc)
        return cli_lib_error("replay", rc);
    int json = 0, n_traces = 0;
    char **traces = calloc((size_t)argc, sizeof *traces);
    if (!traces)
        return 1;
    int status = 0;
    for (int i = 1; i < argc && !status; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help, stdout);
            free(traces);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (cli_is(a, "--policy")) {
            if (!(v = cli_value("replay", argc, argv, &i, "--policy")))
                status = 2;
            else if (vram_policy_parse(v, &o.pool.policy))
                status = cli_usage_error("replay", "%s", vram_last_error());
        } else if (cli_is(a, "--granularity") || cli_is(a, "--capacity")) {
            int gran = cli_is(a, "--granularity");
            uint64_t *dst = gran ? &o.pool.granularity : &o.capacity;
            if (!(v = cli_value("replay", argc, argv, &i, gran ? "--granularity" : "--capacity")))
                status = 2;
            else if (vram_config_set(gran ? "granularity" : "capacity", v))
                status = cli_usage_error("replay", "%s", vram_last_error());
            else
                *dst = gran ? vram_config_get()->granularity : vram_config_get()->capacity;
        } else if (cli_is(a, "--backend")) {
            if (!(v = cli_value("replay", argc, argv, &i, "--backend")))
                status = 2;
            else
                o.backend = v;
        } else if (cli_is(a, "--runs")) {
            if (!(v = cli_value("replay", argc, argv, &i, "--runs")))
                status = 2;
            else {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || n < 1 || n > 1000)
                    status = cli_usage_error("replay", "--runs %s must be 1 to 1000", v);
                else
                    o.timing_runs = (unsigned)n;
            }
        } else if (a[0] == '-' && a[1]) {
            status = cli_usage_error("replay", "unknown option \"%s\"", a);
        } else {
            traces[n_traces++] = argv[i];
        }
    }
    if (!status && !n_traces)
        status = cli_usage_error("replay", "no trace given");
    if (status) {
        free(traces);
        return status;
    }
    if (!o.pool.granularity)
        o.pool.granularity = vram_config_get()->granularity;
    const char *policy = vram_policy_name(o.pool.policy);
    int header_done = json;
    for (int t = 0; t < n_traces; t++) {
        vram_trace *trace;
        rc = vram_trace_read(traces[t], &trace);
        if (rc) {
            cli_lib_error("replay", rc);
            status = 1;
            continue;
        }
        vram_replay_result r;
        rc = vram_replay_run(trace, &o, &r);
        vram_trace_free(trace);
        if (rc) {
            cli_lib_error("replay", rc);
            status = 1;
            continue;
        }
        if (json)
            print_json(traces[t], policy, o.pool.granularity, &r);
        else {
            if (!header_done)
                print_header();
            header_done = 1;
            print_row(base_name(traces[t]), policy, &r);
        }
        if (r.failed_allocs)
            fprintf(stderr,
                    "vramkit replay: %s: %llu request(s) refused; the first, line %u, %llu bytes: "
                    "%s\n",
                    traces[t], (unsigned long long)r.failed_allocs, r.first_failure_line,
                    (unsigned long long)r.first_failure_size, r.first_failure);
        fflush(stdout);
    }
    free(traces);
    return status;
}
