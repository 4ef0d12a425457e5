/* tools/vramkit/soak_service.c - `vramkit soak --workload run:URL[,URL...]`:
 * the video service soaked. Each URL becomes a looping stream of one
 * service (files start again at their end, synthetic sources never end);
 * an iteration is every stream processing --frames-per-iteration more
 * frames, after which the monitor samples the service's pools (host, and
 * device with cuda). The verdict is the same least-squares slope of live
 * bytes as for a replayed trace: a service that keeps its memory level
 * shows +0 B per iteration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "soak.h"
#include "vramkit/service.h"

/* The least number of frames any stream has processed. */
static uint64_t least_processed(vram_service *svc, size_t n_streams, int *failed)
{
    vram_stream_stats s[64];
    size_t n = 0;
    vram_service_streams(svc, s, 64, &n);
    uint64_t least = UINT64_MAX;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (s[i].state == VRAM_STREAM_FAILED || s[i].state == VRAM_STREAM_ENDED) {
            fprintf(stderr, "vramkit soak: stream %s %s: %s\n", s[i].id,
                    s[i].state == VRAM_STREAM_FAILED ? "failed" : "ended",
                    s[i].error[0] ? s[i].error : "its source ended");
            *failed = 1;
        }
        if (s[i].processed < least)
            least = s[i].processed;
    }
    return n == n_streams ? least : 0;
}

static int add_streams(vram_service *svc, const char *urls, size_t *n)
{
    char *copy = strdup(urls), *save = NULL;
    if (!copy)
        return VRAM_EHOSTMEM;
    int rc = 0;
    *n = 0;
    for (char *u = strtok_r(copy, ",", &save); u && !rc; u = strtok_r(NULL, ",", &save)) {
        if (*n == 64) {
            rc = vram_set_error(VRAM_EINVAL, "the run workload takes at most 64 streams");
            break;
        }
        vram_stream_opts o;
        vram_stream_opts_init(&o);
        o.url = u;
        o.loop = 1;
        if (!(rc = vram_service_add_stream(svc, &o, NULL)))
            (*n)++;
    }
    free(copy);
    if (!rc && !*n)
        rc = vram_set_error(VRAM_EINVAL, "the run workload names no URL (run:URL[,URL...])");
    return rc;
}

int soak_service(const soak_service_args *a, vram_monitor_opts *mo)
{
    vram_service_opts so;
    vram_service_opts_init(&so);
    char model[4096];
    const char *dir = getenv("VRAM_MODEL_DIR");
    if (!a->model && dir)
        snprintf(model, sizeof model, "%s/blazeface_back.onnx", dir);
    so.model = a->model ? a->model : dir ? model : "build/models/blazeface_back.onnx";
    so.executor = a->executor;
    vram_decode_parse(a->decode, &so.decode); /* one of the choices: it parses */
    so.workers = a->workers;
    so.batch = a->batch;
    vram_service *svc = NULL;
    vram_monitor *m = NULL;
    int rc = vram_service_create(&so, &svc), status = 1, failed = 0;
    size_t n = 0;
    if (!rc)
        rc = add_streams(svc, a->urls, &n);
    vram_pool *host = svc ? vram_service_host_pool(svc) : NULL;
    vram_pool *dev = svc ? vram_service_device_pool(svc) : NULL;
    if (!rc && !(rc = vram_monitor_start(mo, &m)))
        rc = vram_monitor_add_pool(m, host);
    if (!rc && dev)
        rc = vram_monitor_add_pool(m, dev);
    const char *pool = dev ? vram_pool_name(dev) : vram_pool_name(host);
    int tty = isatty(2);
    uint64_t t0 = tool_now_ns(), last = t0, every = a->iterations >= 10 ? a->iterations / 10 : 1;
    uint64_t first_live = 0, last_live = 0, most_live = 0;
    for (uint64_t it = 1; !rc && it <= a->iterations && !failed; it++) {
        uint64_t want = it * a->frames;
        while (least_processed(svc, n, &failed) < want && !failed)
            usleep(2000);
        if (failed || (rc = vram_monitor_sample(m, (int64_t)it)))
            break;
        vram_pool_stats st;
        if ((rc = vram_pool_stats_counters(dev ? dev : host, &st)))
            break;
        first_live = it == 1 ? st.live_bytes : first_live;
        last_live = st.live_bytes;
        most_live = st.live_bytes > most_live ? st.live_bytes : most_live;
        uint64_t now = tool_now_ns();
        if (tty ? now - last > 100000000ull || it == a->iterations : it % every == 0) {
            soak_progress(m, pool, it, a->iterations, st.live_bytes, tty);
            last = now;
        }
    }
    if (tty && !rc)
        fputc('\n', stderr);
    vram_trend tr;
    if (!rc && !failed && !(rc = vram_monitor_trend(m, pool, &tr))) {
        double secs = (double)(tool_now_ns() - t0) / 1e9;
        char b1[48], b2[48], b3[48];
        vram_stream_stats s[64];
        size_t got = 0;
        uint64_t frames = 0;
        vram_service_streams(svc, s, 64, &got);
        for (size_t i = 0; i < got && i < 64; i++)
            frames += s[i].processed;
        printf("soak: run:%s, %zu streams looping, %llu iterations of %llu frames per stream "
               "(%llu frames) through pool \"%s\" in %.2f s\n",
               a->urls, n, (unsigned long long)a->iterations, (unsigned long long)a->frames,
               (unsigned long long)frames, pool, secs);
        printf("live bytes after each iteration: first %s, last %s, most %s\n",
               vram_size_format(b1, sizeof b1, first_live),
               vram_size_format(b2, sizeof b2, last_live),
               vram_size_format(b3, sizeof b3, most_live));
        soak_print_verdict(m, &tr, mo->growth_bytes_per_iteration, mo->growth_confidence);
        status = tr.growing ? 1 : tr.samples < 3 || isnan(tr.slope_bytes_per_iteration) ? 2 : 0;
    }
    if (rc)
        cli_lib_error("soak", rc);
    if (m) {
        vram_monitor_remove_pool(m, host);
        if (dev)
            vram_monitor_remove_pool(m, dev);
        vram_monitor_stop(m);
    }
    if (vram_service_destroy(svc) && !rc) {
        cli_lib_error("soak", VRAM_EIO);
        status = 1;
    }
    return rc || failed ? 1 : status;
}
