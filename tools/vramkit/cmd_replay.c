/* tools/vramkit/cmd_replay.c - `vramkit replay TRACE...`: replay traces
 * through a pool and print, per trace, what it held and what its
 * bookkeeping cost next to glibc malloc in the same run, with the settings
 * it ran with; on a GPU, with --compare, next to the driver's own
 * allocators. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char about[] =
    "Replays each allocation trace (RMM CSV, plain or gzip) through a fresh pool on the\n"
    "backend (default: the simulated device) and prints the settings it ran with, then per\n"
    "trace: events, peak live and peak reserved bytes and their ratio, the floor of that\n"
    "ratio under the stream model (the most bytes live or freed-but-pending at once, over\n"
    "peak live), fragmentation when reserved memory peaked, backend calls, host ns per\n"
    "operation on fresh pools and on a pool that has replayed the trace once (warm), and\n"
    "glibc malloc/free's ns per operation on the same events in the same run (median of\n"
    "--runs timed runs each, alternating). On a GPU backend the bytes are real device\n"
    "memory, each stream of the trace is a CUDA stream, and 'drv MiB' is the most device\n"
    "memory in use as the driver reports it; --compare replays the same trace, in the same\n"
    "run, through the device's cudaMallocAsync pool (release threshold at its maximum) and\n"
    "through cudaMalloc/cudaFree, the three in --runs alternating rounds (host times: each\n"
    "side's median over them). The policy defaults to vmm on backends that map (sim,\n"
    "host, vmm) and to segments on the others; the other settings default to their VRAM_*\n"
    "options. Requests the capacity cannot hold are reported and the replay continues;\n"
    "with --oom-dir (or VRAM_OOM_DIR) the measured run writes an OOM report there for each\n"
    "(at most VRAM_OOM_MAX_REPORTS a minute). --json prints one object per trace and\n"
    "allocator, each with the settings. Sizes accept K/M/G suffixes (powers of 1024).\n"
    "Exit status: 0, or 1 when a trace could not be replayed.\n";

static int print_result(const vram_replay_row *row, int json, int *header_done)
{
    int rc = 0;
    if (!json && !*header_done && row->opts) {
        rc = vram_replay_print_header(row->opts, vram_write_stdio, stdout, 0);
        *header_done = 1;
    }
    return rc ? rc
              : vram_replay_print_row(row, vram_write_stdio, stdout, json ? VRAM_PRINT_JSON : 0);
}

int cmd_replay(int argc, char **argv)
{
    vram_replay_opts o;
    int rc = vram_replay_opts_init(&o);
    if (rc)
        return cli_lib_error("replay", rc);
    const char *policy = NULL, *backend = "sim";
    uint64_t runs = 5, granularity = o.pool.granularity;
    const char *reuse = o.pool.stream_waits ? "wait" : "completed";
    const char *sim_events = o.sim_events == VRAM_SIM_EVENTS_DONE ? "done" : "none";
    const char *reclaim = o.pool.reclaim_large ? "large" : "need";
    int json = 0, compare = 0, policy_given = 0;
    const cli_opt opts[] = {
        {"--policy", NULL, CLI_CHOICE, &policy, NULL, "placement policy (default: vmm where the "
                                                      "backend maps, else segments)",
         0, 0, CLI_POLICIES, &policy_given},
        {"--backend", NULL, CLI_CHOICE, &backend, NULL, "where the bytes come from (default sim)",
         0, 0, CLI_BACKENDS},
        {"--granularity", NULL, CLI_POW2, &granularity, "BYTES",
         "mapping unit, a power of two of 4K or more (default VRAM_GRANULARITY)", 4096},
        {"--capacity", NULL, CLI_SIZE, &o.capacity, "BYTES",
         "sim and host: the device's bytes (default VRAM_CAPACITY)", 4096},
        {"--limit", NULL, CLI_SIZE, &o.pool.limit, "BYTES",
         "most the pool may hold (default VRAM_POOL_LIMIT; 0: the device's free memory)"},
        {"--limit-ratio", NULL, CLI_NUMBER, &o.limit_ratio, "R",
         "the pool's limit as R times the trace's peak live bytes (over --limit)", 0, 1000},
        {"--decay-ms", NULL, CLI_SIZE, &o.pool.decay_ms, "MS",
         "free memory unused this long goes back (default VRAM_DECAY_MS; 0: kept)"},
        {"--retain-min", NULL, CLI_SIZE, &o.pool.retain_min, "BYTES",
         "free memory the decay leaves held"},
        {"--stream-reuse", NULL, CLI_CHOICE, &reuse, NULL,
         "GPU backends: another stream's free taken at once, waited for on the device, or "
         "once complete (default VRAM_STREAM_REUSE)",
         0, 0, "wait|completed"},
        {"--stream-reclaim", NULL, CLI_CHOICE, &reclaim, NULL,
         "with events: other streams' completed frees rejoin when new memory is needed, or "
         "also before large requests (default VRAM_STREAM_RECLAIM)",
         0, 0, "need|large"},
        {"--reclaim-min", NULL, CLI_SIZE, &o.pool.reclaim_min, "BYTES",
         "large: the least request before which they rejoin (default "
         "VRAM_STREAM_RECLAIM_MIN; 0: every request above the small size)"},
        {"--sim-events", NULL, CLI_CHOICE, &sim_events, NULL,
         "sim: no events (the pool models their completion) or events done once recorded, "
         "as a GPU with nothing queued (default VRAM_SIM_EVENTS)",
         0, 0, "none|done"},
        {"--compare", NULL, CLI_FLAG, &compare, NULL,
         "GPU backends: also replay through cudaMallocAsync and cudaMalloc"},
        {"--runs", NULL, CLI_UINT, &runs, "N", "timed runs of each side (default 5)", 1, 1000},
        {"--oom-dir", NULL, CLI_STRING, &o.oom_dir, "DIR",
         "write an OOM report here for each refused request of the measured run"},
        {"--json", NULL, CLI_FLAG, &json, NULL, "one JSON object per trace and allocator"},
        {0},
    };
    const cli_spec spec = {"replay", "TRACE...", about, opts, 1, -1, "trace"};
    const char **traces;
    int n_traces, st = cli_parse(&spec, argc, argv, &traces, &n_traces);
    if (st)
        return st < 0 ? 0 : st;
    o.backend = backend;
    o.timing_runs = (unsigned)runs;
    o.pool.granularity = granularity;
    o.pool.stream_waits = strcmp(reuse, "wait") == 0;
    o.pool.reclaim_large = strcmp(reclaim, "large") == 0;
    o.sim_events = strcmp(sim_events, "done") == 0 ? VRAM_SIM_EVENTS_DONE : VRAM_SIM_EVENTS_NONE;
    int gpu = cli_backend_is_gpu(backend);
    if (policy_given)
        vram_policy_parse(policy, &o.pool.policy);
    else if (gpu && strcmp(backend, "vmm") != 0)
        o.pool.policy = VRAM_POLICY_SEGMENTS;
    if (compare && !gpu) {
        free(traces);
        return cli_usage_error("replay", "--compare needs a GPU backend (cuda, cuda_async, vmm), "
                                         "not %s", backend);
    }
    char label[48];
    snprintf(label, sizeof label, "%s/%s", backend, vram_policy_name(o.pool.policy));
    int header_done = 0, status = 0;
    for (int t = 0; t < n_traces; t++) {
        vram_trace *trace;
        rc = vram_trace_read(traces[t], &trace);
        if (rc) {
            status = cli_lib_error("replay", rc);
            continue;
        }
        /* res: the pool's, then with --compare cudaMallocAsync's and
         * cudaMalloc's, replayed in alternating rounds. */
        vram_replay_result res[3];
        rc = compare ? vram_replay_compare(trace, &o, o.timing_runs, res)
                     : vram_replay_run(trace, &o, &res[0]);
        if (rc) {
            vram_trace_free(trace);
            status = cli_lib_error("replay", rc);
            continue;
        }
        const vram_replay_result *r = &res[0];
        vram_replay_row row = {traces[t], label, &o, r};
        rc = print_result(&row, json, &header_done);
        for (int w = 0; compare && !rc && w < 2; w++) {
            vram_replay_baseline which =
                w ? VRAM_BASELINE_CUDA_MALLOC : VRAM_BASELINE_CUDA_MALLOC_ASYNC;
            vram_replay_row brow = {traces[t], vram_replay_baseline_name(which), NULL, &res[1 + w]};
            rc = print_result(&brow, json, &header_done);
        }
        vram_trace_free(trace);
        if (rc) {
            free(traces);
            return cli_lib_error("replay", rc);
        }
        if (r->failed_allocs)
            fprintf(stderr,
                    "vramkit replay: %s: %llu request(s) refused; the first, line %u, %llu bytes: "
                    "%s\n",
                    traces[t], (unsigned long long)r->failed_allocs, r->first_failure_line,
                    (unsigned long long)r->first_failure_size, r->first_failure);
        fflush(stdout);
    }
    free(traces);
    return status;
}
