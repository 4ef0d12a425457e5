/* tools/vramkit/cmd_metrics.c - `vramkit metrics TRACE...`: replay traces
 * into pools of their own on the simulated device and show them as
 * Prometheus sees them: the exposition printed once (or, with --json, each
 * pool's statistics), or served over HTTP (/metrics, /snapshot, /healthz)
 * for a while. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "vramkit.h"

static const char about[] =
    "Replays each allocation trace (RMM CSV, plain or gzip) into a pool of its own on the\n"
    "simulated device, named after the file, with one owner per value of the trace's\n"
    "Thread column (\"thread N\") and kind \"other\", and prints the Prometheus text\n"
    "exposition of the pools as they stand at the end of the trace (or after its first N\n"
    "events with --events), with the GPUs' memory from NVML where there is NVML (--gpu\n"
    "picks them: all, none, an NVML index or a PCI bus id; --no-gpu is --gpu none). With\n"
    "--json it prints each pool's statistics as one JSON object (vram_pool_stats_print)\n"
    "instead. With --port it serves the same pools, on 127.0.0.1 or --address, at\n"
    "/metrics, /snapshot (?pool=NAME) and /healthz: port 0 picks a free one; the URL is\n"
    "printed (as {\"url\", \"port\"} with --json); it serves for SECONDS (default: until\n"
    "interrupted).\n";

typedef struct replayed {
    vram_backend *backend;
    vram_pool *pool;
    void **ptrs;
    size_t n_slots;
    char name[128];
} replayed;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

/* "dir/resnet.csv.gz" -> "resnet" */
static void pool_name(const char *path, char *out, size_t cap)
{
    const char *s = strrchr(path, '/');
    snprintf(out, cap, "%s", s ? s + 1 : path);
    static const char *const ext[] = {".gz", ".csv"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(out), e = strlen(ext[i]);
        if (n > e && strcmp(out + n - e, ext[i]) == 0)
            out[n - e] = '\0';
    }
}

/* The owner of the trace's Thread `thread`, made on first use. */
static int owner_of(vram_pool *pool, uint32_t thread, vram_owner *out)
{
    char name[32];
    snprintf(name, sizeof name, "thread %u", thread);
    if (vram_owner_find(pool, name, out) == 0)
        return 0;
    return vram_owner_create(pool, name, 0, out);
}

static int replay_one(const char *path, vram_policy policy, long long events, replayed *r)
{
    vram_trace *t;
    int rc = vram_trace_read(path, &t);
    if (rc)
        return rc;
    pool_name(path, r->name, sizeof r->name);
    vram_backend_opts bo = {0};
    rc = vram_backend_create("sim", &bo, &r->backend);
    vram_pool_opts po;
    if (!rc)
        rc = vram_pool_opts_init(&po);
    if (!rc) {
        po.name = r->name;
        po.policy = policy;
        po.backend = r->backend;
        po.configured_listeners = 0; /* no trace of the replay; OOM reports as configured */
        rc = vram_pool_create(&po, &r->pool);
        if (!rc)
            rc = vram_pool_oom_watch_configured(r->pool);
    }
    r->n_slots = t->n_slots;
    if (!rc && !(r->ptrs = calloc(t->n_slots ? t->n_slots : 1, sizeof *r->ptrs)))
        rc = VRAM_EHOSTMEM;
    size_t n = events >= 0 && (size_t)events < t->n_events ? (size_t)events : t->n_events;
    uint64_t refused = 0;
    char last[512] = "";
    for (size_t i = 0; !rc && i < n; i++) {
        const vram_trace_event *e = &t->events[i];
        vram_stream s = (vram_stream)(uintptr_t)t->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            vram_owner o;
            rc = owner_of(r->pool, e->thread, &o);
            if (!rc && vram_pool_alloc(r->pool, e->size, o, VRAM_KIND_OTHER, s, &r->ptrs[e->slot])) {
                refused++; /* as the trace's own failures: counted by the pool, and go on */
                snprintf(last, sizeof last, "%s", vram_last_error());
            }
        } else if (e->action == VRAM_TRACE_FREE && r->ptrs[e->slot]) {
            rc = vram_pool_free(r->pool, r->ptrs[e->slot], s);
            r->ptrs[e->slot] = NULL;
        }
    }
    if (!rc && refused)
        fprintf(stderr, "vramkit metrics: %s: the pool refused %llu request(s); the last: %s\n", path,
                (unsigned long long)refused, last);
    vram_trace_free(t);
    return rc;
}

static void release(replayed *r)
{
    for (size_t i = 0; r->pool && r->ptrs && i < r->n_slots; i++)
        if (r->ptrs[i])
            vram_pool_free(r->pool, r->ptrs[i], NULL);
    vram_pool_destroy(r->pool);
    vram_backend_destroy(r->backend);
    free(r->ptrs);
}

static int serve(vram_metrics_opts *mo, double hold, int json)
{
    vram_metrics *server;
    int rc = vram_metrics_start(mo, &server);
    if (rc)
        return cli_lib_error("metrics", rc);
    const char *a = mo->address ? mo->address : "127.0.0.1";
    int v6 = strchr(a, ':') != NULL;
    char url[320];
    snprintf(url, sizeof url, "http://%s%s%s:%u/metrics", v6 ? "[" : "", a, v6 ? "]" : "",
             vram_metrics_port(server));
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "url", url);
        cJSON_AddNumberToObject(o, "port", vram_metrics_port(server));
        cli_print_json(o);
    } else {
        printf("serving %s\n", url);
    }
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct timespec start, now, tick = {0, 50 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!interrupted) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
        if (hold >= 0 && el >= hold)
            break;
        nanosleep(&tick, NULL);
    }
    vram_metrics_stop(server);
    return 0;
}

int cmd_metrics(int argc, char **argv)
{
    vram_metrics_opts mo;
    int rc = vram_metrics_opts_init(&mo);
    if (rc)
        return cli_lib_error("metrics", rc);
    vram_pool_opts defaults;
    if ((rc = vram_pool_opts_init(&defaults)))
        return cli_lib_error("metrics", rc);
    const char *policy_name = NULL, *gpu = NULL;
    uint64_t events = UINT64_MAX, port = 0;
    double hold = -1;
    int serve_it = 0, no_gpu = 0, json = 0, status = 0, hold_given = 0;
    const cli_opt opts[] = {
        {"--policy", NULL, CLI_CHOICE, &policy_name, NULL, "the pools' placement policy", 0, 0,
         CLI_POLICIES},
        {"--events", NULL, CLI_UINT, &events, "N", "replay only the first N events of each trace"},
        {"--gpu", NULL, CLI_STRING, &gpu, "all|none|INDEX|PCI",
         "GPUs read through NVML (default VRAM_METRICS_GPU)"},
        {"--no-gpu", NULL, CLI_FLAG, &no_gpu, NULL, "no GPU read (--gpu none)"},
        {"--port", NULL, CLI_UINT, &port, "P", "serve over HTTP on this port (0: a free one)", 0,
         65535, NULL, &serve_it},
        {"--address", NULL, CLI_STRING, &mo.address, "A",
         "the address to bind (default VRAM_METRICS_ADDRESS)"},
        {"--hold", NULL, CLI_NUMBER, &hold, "SECONDS", "serve this long, then stop", 0, 1e9,
         NULL, &hold_given},
        {"--json", NULL, CLI_FLAG, &json, NULL, "each pool's statistics as JSON instead of the "
                                                "exposition"},
        {0},
    };
    const cli_spec spec = {"metrics", "TRACE...", about, opts, 1, -1, "trace"};
    const char **traces;
    int n_traces, st = cli_parse(&spec, argc, argv, &traces, &n_traces);
    if (st)
        return st < 0 ? 0 : st;
    vram_policy policy = defaults.policy;
    if (policy_name)
        vram_policy_parse(policy_name, &policy);
    mo.port = (unsigned)port;
    if (gpu && vram_gpu_parse(gpu, &mo.gpu, &mo.gpu_pci_bus_id))
        status = cli_usage_error("metrics", "--gpu: %s", vram_last_error());
    else if (gpu && mo.gpu == VRAM_GPU_OWN)
        status = cli_usage_error("metrics", "--gpu: the exposition is not one pool's: all, none, "
                                            "an NVML index or a PCI bus id");
    if (no_gpu) {
        mo.gpu = VRAM_GPU_NONE;
        mo.gpu_pci_bus_id = NULL;
    }
    if (!status && hold_given && !serve_it)
        status = cli_usage_error("metrics", "--hold needs --port");
    long long n_events = events == UINT64_MAX ? -1 : (long long)events;
    replayed *r = status ? NULL : calloc((size_t)n_traces, sizeof *r);
    vram_pool **pools = status ? NULL : calloc((size_t)n_traces, sizeof *pools);
    if (!status && (!r || !pools))
        status = 1;
    int done = 0;
    for (; !status && done < n_traces; done++) {
        if ((rc = replay_one(traces[done], policy, n_events, &r[done]))) {
            fprintf(stderr, "vramkit metrics: %s: %s\n", traces[done], vram_last_error());
            status = 1;
        }
        pools[done] = r[done].pool;
    }
    if (!status) {
        mo.pools = pools;
        mo.n_pools = (size_t)n_traces;
        if (serve_it)
            status = serve(&mo, hold, json);
        else if (json)
            for (int i = 0; !status && i < n_traces; i++) {
                if ((rc = vram_pool_stats_print(pools[i], vram_write_stdio, stdout,
                                                VRAM_PRINT_JSON)))
                    status = cli_lib_error("metrics", rc);
            }
        else if ((rc = vram_metrics_print(&mo, vram_write_stdio, stdout, 0)))
            status = cli_lib_error("metrics", rc);
    }
    for (int i = 0; r && i < done; i++)
        release(&r[i]);
    free(r);
    free(pools);
    free(traces);
    return status;
}
