/* src/pipeline/fleet_serve.c - a fleet on the metrics server: every GPU's
 * pools, the stream families of all its services with their gpu labels and
 * the fleet's own (vram_fleet_*), and the control API (/streams) placing
 * through the fleet. */
#include <stdio.h>
#include <stdlib.h>

#include "base/internal.h"
#include "base/writef.h"
#include "fleet_internal.h"

/* ---- the control API's ops (streams_api.h) ---- */

static int fleet_streams(void *ctx, vram_stream_stats *out, size_t cap, size_t *n)
{
    return vram_fleet_streams(ctx, out, cap, n);
}

static int fleet_list(void *ctx, vram_stream_stats **out, size_t *n)
{
    return vram__stats_copy(fleet_streams, ctx, out, n);
}

static int fleet_stats(void *ctx, const char *id, vram_stream_stats *out)
{
    return vram_fleet_stream_stats(ctx, id, out);
}

static int fleet_add(void *ctx, const vram_stream_opts *opts, char *id, size_t cap)
{
    return vram_fleet_add_stream(ctx, opts, id, cap, NULL);
}

static int fleet_remove(void *ctx, const char *id)
{
    return vram_fleet_remove_stream(ctx, id);
}

/* ---- /metrics, /healthz and serving ---- */

/* /healthz: unhealthy once no GPU serves (one failed GPU's streams move to
 * the others, and its state is vram_service_up{gpu="N"} 0 in /metrics). */
static int fleet_health(void *ctx, char *why, size_t cap)
{
    vram_fleet *f = ctx;
    size_t failed = 0;
    for (size_t i = 0; i < f->n; i++)
        failed += vram__service_failed(f->svc[i]) != 0;
    if (failed < f->n)
        return 0;
    char first[256];
    vram_service_health(f->svc[0], first, sizeof first);
    snprintf(why, cap, "all %zu GPUs failed (the first: %s)", f->n, first);
    return 1;
}

static int write_fleet_families(void *ctx, vram_write_fn write, void *wctx)
{
    vram_fleet *f = ctx;
    int rc = vram__families_write(f->svc, f->n, write, wctx);
    uint64_t moved = 0, lost = 0;
    vram_fleet_failover_counts(f, &moved, &lost);
    vram__writer o = {write, wctx, rc};
    vram__writef(&o, "# HELP vram_fleet_gpus GPUs the process serves\n"
                     "# TYPE vram_fleet_gpus gauge\nvram_fleet_gpus %zu\n", f->n);
    vram__writef(&o, "# HELP vram_fleet_streams_moved_total streams moved off failed GPUs\n"
                     "# TYPE vram_fleet_streams_moved_total counter\n"
                     "vram_fleet_streams_moved_total %llu\n", (unsigned long long)moved);
    vram__writef(&o, "# HELP vram_fleet_streams_lost_total streams of failed GPUs no other took\n"
                     "# TYPE vram_fleet_streams_lost_total counter\n"
                     "vram_fleet_streams_lost_total %llu\n", (unsigned long long)lost);
    vram__writef(&o, "# HELP vram_fleet_budget_bytes the fleet's budget (0: none)\n"
                     "# TYPE vram_fleet_budget_bytes gauge\nvram_fleet_budget_bytes %llu\n",
                 (unsigned long long)f->opts.budget);
    return o.rc;
}

void vram__fleet_unserve(vram_fleet *f)
{
    if (!f->server)
        return;
    if (f->routed)
        vram_metrics_unroute(f->server, f->route_id);
    f->routed = 0;
    if (f->health_added)
        vram_metrics_remove_health(f->server, f->health_id);
    f->health_added = 0;
    if (f->families_added)
        vram_metrics_remove_families(f->server, f->families_id);
    for (size_t i = 0; i < f->n; i++) {
        if (f->pools_served[i] & 1)
            vram_metrics_remove_pool(f->server, vram_service_host_pool(f->svc[i]));
        if (f->pools_served[i] & 2)
            vram_metrics_remove_pool(f->server, vram_service_device_pool(f->svc[i]));
        f->pools_served[i] = 0;
    }
    f->families_added = 0;
    f->server = NULL;
}

int vram_fleet_serve(vram_fleet *f, vram_metrics *server)
{
    if (!f || !server)
        return vram__fail(VRAM_EINVAL, "vram_fleet_serve: NULL argument");
    if (f->server)
        return vram__fail(VRAM_EINVAL, "vram_fleet_serve: the fleet is served already");
    f->server = server;
    int rc = 0;
    for (size_t i = 0; i < f->n && !rc; i++) {
        vram_pool *host = vram_service_host_pool(f->svc[i]);
        vram_pool *dev = vram_service_device_pool(f->svc[i]);
        if (!(rc = vram_metrics_add_pool(server, host)))
            f->pools_served[i] |= 1;
        if (!rc && dev && !(rc = vram_metrics_add_pool(server, dev)))
            f->pools_served[i] |= 2;
    }
    if (!rc && !(rc = vram_metrics_add_families(server, write_fleet_families, f,
                                                &f->families_id)))
        f->families_added = 1;
    f->api = (vram__streams_api){fleet_list, fleet_stats, fleet_add, fleet_remove, f};
    if (!rc && !(rc = vram__streams_api_route(server, &f->api, &f->route_id)))
        f->routed = 1;
    if (!rc && !(rc = vram_metrics_add_health(server, fleet_health, f, &f->health_id)))
        f->health_added = 1;
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram__fleet_unserve(f);
        return vram__error_restore(&e, rc);
    }
    return 0;
}

