/* tools/vramkit/cmd_replay.c - `vramkit replay TRACE... [--policy P]
 * [--granularity BYTES] [--capacity BYTES] [--backend B] [--compare]
 * [--runs N] [--json] [--oom-dir DIR]`: replay traces through a pool and print, per trace,
 * what it held and what its bookkeeping cost next to glibc malloc in the same
 * run; on a GPU, with --compare, next to the driver's own allocators. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

static const char *const help =
    "usage: vramkit replay TRACE... [--policy vmm|segments] [--granularity BYTES]\n"
    "                      [--capacity BYTES] [--backend sim|host|cuda|cuda_async|vmm]\n"
    "                      [--compare] [--runs N] [--json] [--oom-dir DIR]\n\n"
    "Replays each allocation trace (RMM CSV, plain or gzip) through a fresh pool on the\n"
    "backend (default: the simulated device) and prints: events, peak live and peak\n"
    "reserved bytes and their ratio, the floor of that ratio under the stream model (the\n"
    "most bytes live or freed-but-pending at once, over peak live), fragmentation when\n"
    "reserved memory peaked, backend calls, host ns per operation on fresh pools and on a\n"
    "pool that has replayed the trace once (warm), and glibc malloc/free's ns per\n"
    "operation on the same events in the same run (median of --runs timed runs each,\n"
    "alternating). On a GPU backend the bytes are real device memory, each stream of the\n"
    "trace is a CUDA stream, and 'drv MiB' is the most device memory in use as the\n"
    "driver reports it; --compare replays the same trace, in the same run, through the\n"
    "device's cudaMallocAsync pool (release threshold at its maximum) and through\n"
    "cudaMalloc/cudaFree. The policy defaults to vmm on backends that map (sim, host,\n"
    "vmm) and to segments on the others. Requests the capacity cannot hold are reported\n"
    "and the replay continues; with --oom-dir (or VRAM_OOM_DIR) the measured run writes an\n"
    "OOM report there for each (at most VRAM_OOM_MAX_REPORTS a minute). --json prints one\n"
    "object per trace and allocator.\n"
    "Sizes accept K/M/G suffixes (powers of 1024).\n";

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int print_result(const char *trace, const char *label, uint64_t granularity,
                        const vram_replay_result *r, int json, int *header_done)
{
    if (json)
        return vram_replay_print_json(trace, label, granularity, r, vram_write_stdio, stdout);
    int rc = *header_done ? 0 : vram_replay_print_header(vram_write_stdio, stdout);
    *header_done = 1;
    return rc ? rc : vram_replay_print_row(base_name(trace), label, r, vram_write_stdio, stdout);
}

int cmd_replay(int argc, char **argv)
{
    vram_replay_opts o;
    int rc = vram_replay_opts_init(&o);
    if (rc)
        return cli_lib_error("replay", rc);
    int json = 0, n_traces = 0, compare = 0, policy_given = 0;
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
        } else if (strcmp(a, "--compare") == 0) {
            compare = 1;
        } else if (cli_is(a, "--policy")) {
            if (!(v = cli_value("replay", argc, argv, &i, "--policy")))
                status = 2;
            else if (vram_policy_parse(v, &o.pool.policy))
                status = cli_usage_error("replay", "%s", vram_last_error());
            else
                policy_given = 1;
        } else if (cli_is(a, "--granularity") || cli_is(a, "--capacity")) {
            int gran = cli_is(a, "--granularity");
            uint64_t *dst = gran ? &o.pool.granularity : &o.capacity;
            if (!(v = cli_value("replay", argc, argv, &i, gran ? "--granularity" : "--capacity")))
                status = 2;
            else if (vram_config_set(gran ? "granularity" : "capacity", v))
                status = cli_usage_error("replay", "%s", vram_last_error());
            else
                *dst = gran ? vram_config_get()->granularity : vram_config_get()->capacity;
        } else if (cli_is(a, "--oom-dir")) {
            if (!(v = cli_value("replay", argc, argv, &i, "--oom-dir")))
                status = 2;
            else
                o.oom_dir = v;
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
    int gpu = cli_backend_is_gpu(o.backend);
    if (!status && compare && !gpu)
        status = cli_usage_error("replay", "--compare needs a GPU backend (cuda, cuda_async, vmm)");
    if (!status && !policy_given && gpu && strcmp(o.backend, "vmm") != 0)
        o.pool.policy = VRAM_POLICY_SEGMENTS;
    if (status) {
        free(traces);
        return status;
    }
    if (!o.pool.granularity)
        o.pool.granularity = vram_config_get()->granularity;
    char label[48];
    snprintf(label, sizeof label, "%s%s%s", gpu ? o.backend : "", gpu ? "/" : "",
             vram_policy_name(o.pool.policy));
    const char *policy = label;
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
        if (rc) {
            vram_trace_free(trace);
            cli_lib_error("replay", rc);
            status = 1;
            continue;
        }
        rc = print_result(traces[t], policy, o.pool.granularity, &r, json, &header_done);
        for (int w = 0; compare && !rc && w < 2; w++) {
            vram_replay_baseline which = w ? VRAM_BASELINE_CUDA_MALLOC : VRAM_BASELINE_CUDA_MALLOC_ASYNC;
            vram_replay_result br;
            rc = vram_replay_baseline_run(trace, which, o.timing_runs, &br);
            if (rc)
                break;
            rc = print_result(traces[t], vram_replay_baseline_name(which), 0, &br, json,
                              &header_done);
        }
        vram_trace_free(trace);
        if (rc)
            return cli_lib_error("replay", rc);
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
