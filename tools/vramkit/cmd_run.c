/* tools/vramkit/cmd_run.c - `vramkit run`: the multi-stream video service
 * on the command line. Streams come from --input, --streams and a stream
 * file (--config); the service runs until its files end, --duration or
 * --frames is reached, or SIGINT/SIGTERM asks it to drain; a live table (on
 * a terminal) or a line per interval shows how it goes, and the summary at
 * the end says what every stream did and that each gave its memory back. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run_target.h"

static const char about[] =
    "Runs camera streams and video files through one model, batching frames of different\n"
    "streams together, inside one memory budget. Each --input is [ID=]URL: a file (mp4, mkv,\n"
    "ts, raw H.264/HEVC), rtsp://, http://, udp://, or synthetic:WxH@FPS (moving patterns);\n"
    "--streams N makes N streams out of the inputs given, taking them in turn. A stream file\n"
    "(--config FILE, JSON) gives settings and streams to start with; the options given here\n"
    "win over its settings.\n\n"
    "The model (default: BlazeFace, the back model, set up by `make models`) runs once, on\n"
    "--workers execution contexts; BlazeFace outputs become faces with boxes and keypoints in\n"
    "source pixels, any other model's outputs a summary per tensor. --jsonl writes a line per\n"
    "processed frame; --snapshots DIR writes an annotated JPEG per stream every --every\n"
    "seconds. --listen ADDR:PORT serves /metrics (with per-stream families), /snapshot,\n"
    "/healthz and the control API: GET /streams, POST /streams {\"id\":..., \"url\":...},\n"
    "DELETE /streams/ID.\n\n"
    "--gpus LIST|all runs one service per GPU (its own context, pools, engine copy and\n"
    "decoders) and places each stream whole on the GPU with the most budget left, then the\n"
    "fewest streams; --budget is then each GPU's, --total-budget all of them together. A GPU\n"
    "that fails takes only its own streams down: they are re-admitted on the others where\n"
    "memory allows, or reported lost. With the cuda executor and neither --gpus nor\n"
    "VRAM_DEVICE, every visible GPU is used when there are several. --jsonl FILE then\n"
    "writes FILE.gpuN per GPU (out.jsonl: out.gpu0.jsonl, ...).\n\n"
    "A stream is refused at admission, with the numbers, when its need (frames, decoder,\n"
    "staging, its share of the batch buffers) would pass --budget or --stream-budget. Files\n"
    "run to their end unless --loop; --realtime paces them to their frame rate, as cameras\n"
    "are, and a live stream that falls behind drops its oldest waiting frame (counted).\n\n"
    "Exit status: 0 when every stream ran and gave its memory back, 1 when a stream was\n"
    "refused or failed or memory stayed live, 2 for a usage error.\n";

typedef struct run_args {
    const char *model, *config, *backend, *decode, *jsonl, *snapshots, *listen, *gpus;
    cli_list inputs;
    uint64_t streams, workers, batch, budget, stream_budget, frames, queue, decoder_threads;
    uint64_t in_flight, surfaces, total_budget;
    double duration, every, interval;
    int realtime, loop, json, quiet, graphs;
    int workers_given, batch_given, budget_given, every_given, surfaces_given;
} run_args;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* The default model: $VRAM_MODEL_DIR, else models/ beside the binary (the
 * build tree), else ../share/vramkit/models (installed). */
static const char *default_model(char *buf, size_t cap)
{
    const char *dir = getenv("VRAM_MODEL_DIR");
    if (dir && *dir) {
        snprintf(buf, cap, "%s/blazeface_back.onnx", dir);
        return buf;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        const char *rel[] = {"models", "../share/vramkit/models"};
        for (int i = 0; i < 2; i++) {
            int k = snprintf(buf, cap, "%s/%s/blazeface_back.onnx", exe, rel[i]);
            if (k > 0 && (size_t)k < cap && access(buf, R_OK) == 0)
                return buf;
        }
        int k = snprintf(buf, cap, "%s/models/blazeface_back.onnx", exe);
        if (k > 0 && (size_t)k < cap)
            return buf;
    }
    return "blazeface_back.onnx";
}

static int parse_args(int argc, char **argv, run_args *a)
{
    const cli_opt opts[] = {
        {"--model", NULL, CLI_STRING, &a->model, "MODEL.onnx",
         "the model (default: BlazeFace back, from make models)"},
        {"--input", "-i", CLI_LIST, &a->inputs, "[ID=]URL", "a stream (repeatable)"},
        {"--streams", NULL, CLI_UINT, &a->streams, "N", "make N streams of the inputs, in turn",
         1, 1024},
        {"--config", NULL, CLI_STRING, &a->config, "FILE", "a stream file (JSON)"},
        {"--backend", NULL, CLI_CHOICE, &a->backend, NULL, "the engine's executor", 0, 0,
         "cpu|cuda"},
        {"--workers", NULL, CLI_UINT, &a->workers, "M", "inference workers (default 1)", 1, 64, NULL,
         &a->workers_given},
        {"--batch", NULL, CLI_UINT, &a->batch, "B", "frames of different streams per batch "
                                                    "(default 8)", 1, 256, NULL, &a->batch_given},
        {"--budget", NULL, CLI_SIZE, &a->budget, "BYTES", "every byte of the service", 0, 0, NULL,
         &a->budget_given},
        {"--stream-budget", NULL, CLI_SIZE, &a->stream_budget, "BYTES", "each stream at most"},
        {"--gpus", NULL, CLI_STRING, &a->gpus, "LIST|all",
         "one service per GPU (0,1,... or every visible one), streams placed among them"},
        {"--total-budget", NULL, CLI_SIZE, &a->total_budget, "BYTES",
         "with --gpus: every byte of every GPU's service together"},
        {"--duration", NULL, CLI_NUMBER, &a->duration, "S", "stop after S seconds", 0.001, 1e9},
        {"--frames", NULL, CLI_UINT, &a->frames, "N", "end each stream after N frames", 1, 1e15},
        {"--realtime", NULL, CLI_FLAG, &a->realtime, NULL, "pace files to their frame rate"},
        {"--loop", NULL, CLI_FLAG, &a->loop, NULL, "play files again at their end"},
        {"--queue", NULL, CLI_UINT, &a->queue, "N", "ready frames a stream may have waiting "
                                                    "(default 2)", 1, 1024},
        {"--in-flight", NULL, CLI_UINT, &a->in_flight, "N",
         "frames of one stream in workers' batches at once (default 1; more: fewer streams "
         "keep more workers busy, one more frame in each ring)", 1, 64},
        {"--decoder-threads", NULL, CLI_UINT, &a->decoder_threads, "N",
         "threads per CPU decoder (default 1)", 1, 64},
        {"--decode", NULL, CLI_CHOICE, &a->decode, NULL,
         "where streams decode: the CPU, NVDEC (frames stay on the GPU; needs --backend "
         "cuda), or auto (NVDEC where it takes the stream; default cpu)", 0, 0,
         "cpu|nvdec|auto"},
        {"--surfaces", NULL, CLI_UINT, &a->surfaces, "N",
         "NVDEC: decode surfaces beyond the parser's minimum (default 0)", 0, 32, NULL,
         &a->surfaces_given},
        {"--graphs", NULL, CLI_FLAG, &a->graphs, NULL,
         "cuda: replay each worker's run as a CUDA graph"},
        {"--jsonl", NULL, CLI_STRING, &a->jsonl, "FILE", "a JSON line per processed frame (- for "
                                                         "stdout)"},
        {"--snapshots", NULL, CLI_STRING, &a->snapshots, "DIR", "annotated JPEGs into DIR"},
        {"--every", NULL, CLI_NUMBER, &a->every, "S", "seconds between snapshots of a stream "
                                                      "(default 5)", 0.001, 86400, NULL,
         &a->every_given},
        {"--listen", NULL, CLI_STRING, &a->listen, "ADDR:PORT",
         "serve metrics and the control API (loopback by default)"},
        {"--interval", NULL, CLI_NUMBER, &a->interval, "S",
         "seconds between progress lines when not on a terminal (default 5)", 0.1, 86400},
        {"--quiet", "-q", CLI_FLAG, &a->quiet, NULL, "no live table or progress lines"},
        {"--json", NULL, CLI_FLAG, &a->json, NULL, "the summary as one JSON object"},
        {0},
    };
    const cli_spec spec = {"run", "", about, opts, 0, 0, NULL};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st;
    free(args);
    if (a->jsonl && !strcmp(a->jsonl, "-") && !a->json && !a->quiet)
        a->quiet = 1; /* stdout carries the lines: the table would mix in */
    return 0;
}

/* --listen ADDR:PORT, [V6]:PORT or PORT. */
static int parse_listen(const char *v, char *addr, size_t cap, unsigned *port)
{
    const char *colon = strrchr(v, ':');
    const char *p = colon ? colon + 1 : v;
    char *end;
    unsigned long n = strtoul(p, &end, 10);
    if (!*p || *end || n > 65535)
        return cli_usage_error("run", "--listen: \"%s\" is not ADDR:PORT (port 0..65535)", v);
    *port = (unsigned)n;
    addr[0] = 0;
    if (colon) {
        size_t len = (size_t)(colon - v);
        if (len && v[0] == '[' && v[len - 1] == ']') {
            v++;
            len -= 2;
        }
        if (len >= cap)
            return cli_usage_error("run", "--listen: the address of \"%s\" is too long", v);
        memcpy(addr, v, len);
        addr[len] = 0;
    }
    return 0;
}

static int read_config(const char *path, vram_service_config **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "vramkit run: cannot open the stream file %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            char *t = cap <= (64u << 20) ? realloc(text, cap) : NULL;
            if (!t) {
                fprintf(stderr, "vramkit run: the stream file %s is larger than 64 MiB\n", path);
                free(text);
                fclose(f);
                return 1;
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    int rc = err ? 1 : vram_service_config_parse(text, len, out);
    free(text);
    if (err) {
        fprintf(stderr, "vramkit run: cannot read the stream file %s\n", path);
        return 1;
    }
    if (rc) {
        fprintf(stderr, "vramkit run: %s: %s\n", path, vram_last_error());
        return 1;
    }
    return 0;
}

/* The service's options: the stream file's, then the command line's. */
static void service_opts(const run_args *a, const vram_service_config *cfg, vram_service_opts *o,
                         const char *model)
{
    if (cfg)
        *o = cfg->service;
    if (a->model || !o->model)
        o->model = a->model ? a->model : model;
    if (a->backend)
        o->executor = a->backend;
    if (a->workers_given)
        o->workers = (unsigned)a->workers;
    if (a->batch_given)
        o->batch = (unsigned)a->batch;
    if (a->budget_given)
        o->budget = a->budget;
    if (a->stream_budget)
        o->stream_budget = a->stream_budget;
    if (a->frames)
        o->max_frames = a->frames;
    if (a->queue)
        o->queue_frames = (uint32_t)a->queue;
    if (a->decoder_threads)
        o->decoder_threads = (int)a->decoder_threads;
    if (a->in_flight)
        o->stream_in_flight = (uint32_t)a->in_flight;
    if (a->decode)
        vram_decode_parse(a->decode, &o->decode); /* one of the choices: it parses */
    if (a->surfaces_given)
        o->extra_surfaces = (uint32_t)a->surfaces;
    if (a->graphs)
        o->graphs = 1;
    if (a->jsonl)
        o->jsonl_path = a->jsonl;
    if (a->snapshots)
        o->snapshots_dir = a->snapshots;
    if (a->every_given)
        o->snapshot_every_s = a->every;
}

static void print_fixed(const run_target *t, uint64_t total)
{
    vram_service *svc = run_target_service(t, 0);
    vram_service_info i;
    vram_service_info_get(svc, &i);
    char w[32], c[32], ws[32], io[32], f[32], b[32];
    vram_size_format(w, sizeof w, i.weights_bytes);
    vram_size_format(c, sizeof c, i.context_bytes);
    vram_size_format(ws, sizeof ws, i.workspace_bytes);
    vram_size_format(io, sizeof io, i.batch_io_bytes);
    vram_size_format(f, sizeof f, i.fixed_bytes);
    fprintf(stderr,
            "run: model %s (%s, input %dx%d), %s executor, %u worker%s, batch up to %u\n"
            "run: fixed need %s: weights %s once, %u context%s of %s (workspace %s), batch "
            "buffers %s each; budget %s\n",
            i.model, i.detector_blazeface ? "BlazeFace faces" : "raw outputs", i.input_width,
            i.input_height, i.executor, i.workers, i.workers == 1 ? "" : "s", i.batch, f, w,
            i.workers, i.workers == 1 ? "" : "s", c, ws, io,
            i.budget ? vram_size_format(b, sizeof b, i.budget) : "none");
    size_t n = run_target_services(t);
    if (!t->fleet)
        return;
    char list[256] = "";
    for (size_t k = 0, used = 0; k < n && used < sizeof list; k++) {
        int put = snprintf(list + used, sizeof list - used, "%s%d", k ? "," : "",
                           vram_fleet_gpu(t->fleet, k));
        used += put > 0 ? (size_t)put : 0;
    }
    fprintf(stderr, "run: %zu GPU%s (%s), one service each, that fixed need and budget on each; "
                    "total budget %s\n", n, n == 1 ? "" : "s", list,
            total ? vram_size_format(b, sizeof b, total) : "none");
}

/* Admit one stream; a refusal is printed and counted, the others go on. */
static void admit(run_target *t, const vram_stream_opts *o, int *refused)
{
    if (run_target_add(t, o)) {
        fprintf(stderr, "vramkit run: refused: %s\n", vram_last_error());
        (*refused)++;
    }
}

/* --input [ID=]URL, and --streams N of them in turn. */
static void admit_inputs(run_target *t, const run_args *a, int *refused)
{
    int n = a->inputs.n;
    uint64_t want = a->streams ? a->streams : (uint64_t)n;
    for (uint64_t k = 0; n && k < want; k++) {
        const char *in = a->inputs.items[k % (uint64_t)n];
        const char *eq = strchr(in, '=');
        const char *colon = strchr(in, ':');
        int has_id = eq && (!colon || eq < colon);
        char id[64] = "";
        if (has_id && (size_t)(eq - in) < sizeof id) {
            memcpy(id, in, (size_t)(eq - in));
            id[eq - in] = 0;
        }
        if (has_id && k >= (uint64_t)n) /* the same input again: a new id */
            snprintf(id + strlen(id), sizeof id - strlen(id), "-%llu",
                     (unsigned long long)(k / (uint64_t)n + 1));
        vram_stream_opts o;
        vram_stream_opts_init(&o);
        o.id = has_id ? id : NULL;
        o.url = has_id ? eq + 1 : in;
        o.realtime = a->realtime;
        o.loop = a->loop;
        admit(t, &o, refused);
    }
}

static void progress(run_target *t, double secs, int tty)
{
    if (tty) {
        fprintf(stderr, "\033[H\033[J");
        fprintf(stderr, "vramkit run: %.0f s (Ctrl-C drains and stops)\n\n", secs);
        run_target_print(t, vram_write_stdio, stderr, 0);
        fflush(stderr);
        return;
    }
    size_t got = 0;
    vram_stream_stats *s = run_target_streams(t, &got);
    uint64_t in = 0, done = 0, dropped = 0, faces = 0;
    double fps = 0;
    size_t live = 0;
    for (size_t i = 0; i < got; i++) {
        in += s[i].frames_in;
        done += s[i].processed;
        dropped += s[i].dropped + s[i].output_dropped;
        faces += s[i].faces;
        fps += s[i].fps;
        live += s[i].state == VRAM_STREAM_RUNNING || s[i].state == VRAM_STREAM_RECONNECTING;
    }
    free(s);
    fprintf(stderr, "run: %.1f s, %zu streams (%zu running), %.1f fps, in %llu, processed %llu, "
                    "dropped %llu, faces %llu\n",
            secs, got, live, fps, (unsigned long long)in, (unsigned long long)done,
            (unsigned long long)dropped, (unsigned long long)faces);
}

/* After the stop: every stream's owner must hold nothing. */
static int check_memory(run_target *t, int *failed)
{
    size_t got = 0;
    vram_stream_stats *s = run_target_streams(t, &got);
    if (!s) {
        fprintf(stderr, "vramkit run: out of host memory reading the streams' statistics: "
                        "their memory is not checked\n");
        return 1;
    }
    uint64_t live = 0;
    for (size_t i = 0; i < got; i++) {
        live += s[i].live_bytes;
        if (s[i].state == VRAM_STREAM_FAILED)
            (*failed)++;
    }
    free(s);
    if (live) {
        char b[32];
        fprintf(stderr, "vramkit run: the streams still hold %s after the stop\n",
                vram_size_format(b, sizeof b, live));
        return 1;
    }
    return 0;
}

/* With --listen, a monitor samples every service's pools (every stream an
 * owner: alerts on budgets, fragmentation and growth; with --gpus each
 * GPU's pools gpuN-host and gpuN-device) and its families join the
 * server's. */
static int start_monitor(const run_target *t, vram_monitor **out)
{
    vram_monitor_opts mo;
    int rc = vram_monitor_opts_init(&mo);
    if (!rc)
        rc = vram_monitor_start(&mo, out);
    for (size_t i = 0; !rc && i < run_target_services(t); i++) {
        vram_service *svc = run_target_service(t, i);
        rc = vram_monitor_add_pool(*out, vram_service_host_pool(svc));
        if (!rc && vram_service_device_pool(svc))
            rc = vram_monitor_add_pool(*out, vram_service_device_pool(svc));
    }
    return rc;
}

static void stop_monitor(const run_target *t, vram_monitor *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < run_target_services(t); i++) {
        vram_service *svc = run_target_service(t, i);
        vram_monitor_remove_pool(m, vram_service_host_pool(svc));
        if (vram_service_device_pool(svc))
            vram_monitor_remove_pool(m, vram_service_device_pool(svc));
    }
    vram_monitor_stop(m);
}

static int run_service(const run_args *a, vram_service_config *cfg, run_target *t)
{
    vram_metrics *server = NULL;
    vram_monitor *monitor = NULL;
    if (a->listen) {
        char addr[128];
        vram_metrics_opts mo;
        vram_metrics_opts_init(&mo);
        if (parse_listen(a->listen, addr, sizeof addr, &mo.port))
            return 2;
        if (addr[0])
            mo.address = addr;
        if (start_monitor(t, &monitor)) {
            fprintf(stderr, "vramkit run: the monitor: %s\n", vram_last_error());
            stop_monitor(t, monitor);
            return 1;
        }
        mo.monitor = monitor;
        if (vram_metrics_start(&mo, &server) || run_target_serve(t, server)) {
            fprintf(stderr, "vramkit run: %s\n", vram_last_error());
            vram_metrics_stop(server);
            stop_monitor(t, monitor);
            return 1;
        }
        fprintf(stderr, "run: serving http://%s%s%s:%u/ (metrics, snapshot, streams)\n",
                strchr(addr, ':') ? "[" : "", addr[0] ? addr : "127.0.0.1",
                strchr(addr, ':') ? "]" : "", vram_metrics_port(server));
    }
    int refused = 0, failed = 0;
    for (size_t i = 0; cfg && i < cfg->n_streams; i++) {
        vram_stream_opts o = cfg->streams[i];
        o.realtime |= a->realtime;
        o.loop |= a->loop;
        admit(t, &o, &refused);
    }
    admit_inputs(t, a, &refused);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDERR_FILENO) && !a->quiet;
    double interval = a->interval > 0 ? a->interval : 5.0;
    uint64_t start = tool_now_ns(), last = start;
    for (;;) {
        int done = run_target_wait(t, 0.1) == 0;
        double secs = (double)(tool_now_ns() - start) / 1e9;
        if (stop_signal || (a->duration > 0 && secs >= a->duration) || (done && !server))
            break;
        if (!a->quiet && (double)(tool_now_ns() - last) / 1e9 >= (tty ? 1.0 : interval)) {
            last = tool_now_ns();
            progress(t, secs, tty);
        }
    }
    if (stop_signal)
        fprintf(stderr, "run: %s: draining the frames in flight\n",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    int rc = run_target_stop(t) ? 1 : 0;
    if (rc)
        fprintf(stderr, "vramkit run: %s\n", vram_last_error());
    vram_metrics_stop(server);
    stop_monitor(t, monitor);
    int st = run_target_print(t, vram_write_stdio, stdout, a->json ? VRAM_PRINT_JSON : 0);
    if (st)
        fprintf(stderr, "vramkit run: %s\n", vram_last_error());
    if (check_memory(t, &failed))
        rc = 1;
    else if (!a->json)
        printf("memory: every stream gave its memory back (0 B live)\n");
    return rc || st || refused || failed ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
    run_args a = {0};
    int st = parse_args(argc, argv, &a);
    if (st)
        return st == CLI_HELP ? 0 : st;
    vram_service_config *cfg = NULL;
    if (a.config && (st = read_config(a.config, &cfg))) {
        free(a.inputs.items);
        return st;
    }
    if (!a.inputs.n && (!cfg || !cfg->n_streams) && !a.listen) {
        vram_service_config_free(cfg);
        free(a.inputs.items);
        return cli_usage_error("run", "no streams: give --input URL, a --config file with "
                                      "streams, or --listen to add them through the API");
    }
    char model[4096];
    vram_service_opts o;
    vram_service_opts_init(&o);
    service_opts(&a, cfg, &o, default_model(model, sizeof model));
    int gpus[VRAM_FLEET_GPUS_MAX];
    size_t n_gpus = 0;
    if (a.gpus)
        st = run_target_parse_gpus(a.gpus, gpus, VRAM_FLEET_GPUS_MAX, &n_gpus);
    else
        run_target_default_gpus(o.executor, gpus, VRAM_FLEET_GPUS_MAX, &n_gpus);
    if (!st && a.total_budget && !n_gpus)
        st = cli_usage_error("run", "--total-budget is for several GPUs (--gpus); with one "
                                    "service, --budget is every byte of it");
    if (st) {
        vram_service_config_free(cfg);
        free(a.inputs.items);
        return st;
    }
    run_target t;
    if (run_target_create(&t, &o, gpus, n_gpus, a.total_budget)) {
        fprintf(stderr, "vramkit run: %s\n", vram_last_error());
        if (!a.model && access(o.model, R_OK))
            fprintf(stderr, "vramkit run: the default model is made by `make models` (or give "
                            "--model)\n");
        vram_service_config_free(cfg);
        free(a.inputs.items);
        return 1;
    }
    print_fixed(&t, a.total_budget);
    st = run_service(&a, cfg, &t);
    if (run_target_destroy(&t) && !st) {
        fprintf(stderr, "vramkit run: %s\n", vram_last_error());
        st = 1;
    }
    vram_service_config_free(cfg);
    free(a.inputs.items);
    return st;
}
