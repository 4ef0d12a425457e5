/* examples/monitor_metrics.c - watch a pool while it works: a monitor
 * samples it (live bytes per owner and kind, fragmentation, the leak trend)
 * and a Prometheus endpoint serves the pool and the monitor at /metrics
 * (also /snapshot and /healthz) while a loop of four cameras allocates and
 * frees frames for SECONDS seconds (default 5). At the end it prints the
 * leak verdict.
 *
 *   cc monitor_metrics.c $(pkg-config --cflags --libs vramkit-observe) -o monitor_metrics
 *   ./monitor_metrics 30 &  curl -s http://127.0.0.1:PORT/metrics  (the URL is printed)
 *
 * VRAM_METRICS_PORT picks the port (0, the default here: a free one) and
 * VRAM_METRICS_ADDRESS the address (127.0.0.1). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vramkit.h>

#define MiB (1024u * 1024u)
#define CAMERAS 4
#define FRAMES 3

static int failed(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", what, vram_err_name(rc), vram_last_error());
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Alerts arrive on the monitor's thread: print them. */
static void on_alert(void *ctx, const vram_alert *a)
{
    (void)ctx;
    printf("alert  %s %s: %s\n", vram_alert_type_name(a->type), vram_alert_level_name(a->level),
           a->message);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    vram_backend *backend;
    int rc = vram_backend_create("host", NULL, &backend);
    if (rc)
        return failed("vram_backend_create", rc);
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.name = "cameras";
    po.backend = backend;
    vram_pool *pool;
    if ((rc = vram_pool_create(&po, &pool)))
        return failed("vram_pool_create", rc);
    vram_owner cam[CAMERAS];
    for (int i = 0; i < CAMERAS; i++) {
        char name[16];
        snprintf(name, sizeof name, "cam%02d", i + 1);
        if ((rc = vram_owner_create(pool, name, 48 * MiB, &cam[i])))
            return failed("vram_owner_create", rc);
    }

    vram_monitor_opts mo;
    vram_monitor_opts_init(&mo);
    mo.period_s = 0.1;
    mo.on_alert = on_alert;
    vram_monitor *monitor;
    if ((rc = vram_monitor_start(&mo, &monitor)))
        return failed("vram_monitor_start", rc);
    if ((rc = vram_monitor_add_pool(monitor, pool)))
        return failed("vram_monitor_add_pool", rc);

    vram_metrics_opts xo;
    vram_metrics_opts_init(&xo);
    xo.pools = &pool;
    xo.n_pools = 1;
    xo.monitor = monitor;
    if (!getenv("VRAM_METRICS_PORT"))
        xo.port = 0;
    vram_metrics *server;
    if ((rc = vram_metrics_start(&xo, &server)))
        return failed("vram_metrics_start", rc);
    printf("serving http://%s:%u/metrics for %.1f s\n", xo.address ? xo.address : "127.0.0.1",
           vram_metrics_port(server), seconds);
    fflush(stdout);

    /* The work: each camera keeps FRAMES frames in flight, replacing the
     * oldest one every step. */
    void *frames[CAMERAS][FRAMES] = {{0}};
    unsigned long steps = 0;
    double end = now_s() + seconds;
    while (!rc && now_s() < end) {
        for (int i = 0; i < CAMERAS && !rc; i++) {
            int f = (int)(steps % FRAMES);
            if ((rc = vram_pool_free(pool, frames[i][f], NULL)))
                break;
            uint64_t size = (uint64_t)(6 + i) * MiB;
            rc = vram_pool_alloc(pool, size, cam[i], VRAM_KIND_FRAMES, NULL, &frames[i][f]);
            if (!rc)
                memset(frames[i][f], (int)steps, 4096);
        }
        steps++;
        nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
    }
    if (rc)
        return failed("the camera loop", rc);

    vram_trend trend;
    if ((rc = vram_monitor_trend(monitor, "cameras", &trend)))
        return failed("vram_monitor_trend", rc);
    printf("%lu steps; live bytes %s: %+.1f B/s over %u samples\n", steps,
           trend.growing ? "growing" : "level", trend.slope_bytes_per_s, trend.samples);

    for (int i = 0; i < CAMERAS; i++)
        for (int f = 0; f < FRAMES; f++)
            vram_pool_free(pool, frames[i][f], NULL);
    vram_metrics_stop(server);
    vram_monitor_remove_pool(monitor, pool);
    if ((rc = vram_monitor_stop(monitor)))
        return failed("vram_monitor_stop", rc);
    if ((rc = vram_pool_destroy(pool)) || (rc = vram_backend_destroy(backend)))
        return failed("destroy", rc);
    printf("monitor_metrics: done\n");
    return 0;
}
