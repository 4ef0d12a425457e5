/* src/pipeline/api.c - one service on the metrics server: its streams
 * through the control API's routes (streams_api.c), its pools and its
 * families in /metrics, its health on /healthz (503 once its GPU failed). Serving is attached by vram_service_serve and
 * detached by vram_service_stop. */
#include <stdio.h>

#include "service_internal.h"

/* The service's side of the routes (streams_api.h). */
static int svc_list(void *ctx, vram_stream_stats **out, size_t *n)
{
    return vram__streams_copy(ctx, out, n);
}

static int svc_stats(void *ctx, const char *id, vram_stream_stats *out)
{
    return vram_service_stream_stats(ctx, id, out);
}

static int svc_add(void *ctx, const vram_stream_opts *opts, char *id, size_t cap)
{
    const char *got = NULL;
    int rc = vram_service_add_stream(ctx, opts, &got);
    if (!rc)
        snprintf(id, cap, "%s", got);
    return rc;
}

static int svc_remove(void *ctx, const char *id)
{
    return vram_service_remove_stream(ctx, id);
}

/* /healthz: unhealthy once the service's GPU failed. */
static int svc_health(void *ctx, char *why, size_t cap)
{
    return vram_service_health(ctx, why, cap) != 0;
}

int vram_service_serve(vram_service *svc, vram_metrics *server)
{
    if (!svc || !server)
        return vram__fail(VRAM_EINVAL, "vram_service_serve: NULL argument");
    if (svc->server)
        return vram__fail(VRAM_EINVAL, "vram_service_serve: the service is served already");
    svc->api = (vram__streams_api){svc_list, svc_stats, svc_add, svc_remove, svc};
    int rc = vram__streams_api_route(server, &svc->api, &svc->route_id);
    if (rc)
        return rc;
    svc->server = server;
    svc->pools_served = 0;
    if (!(rc = vram_metrics_add_pool(server, svc->host_pool)))
        svc->pools_served |= 1;
    if (!rc && svc->dev_pool && !(rc = vram_metrics_add_pool(server, svc->dev_pool)))
        svc->pools_served |= 2;
    if (!rc && !(rc = vram__families_add(svc)))
        svc->families_added = 1;
    if (!rc && !(rc = vram_metrics_add_health(server, svc_health, svc, &svc->health_id)))
        svc->health_added = 1;
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram__service_unserve(svc);
        return vram__error_restore(&e, rc);
    }
    return 0;
}

void vram__service_unserve(vram_service *svc)
{
    if (!svc->server)
        return;
    vram_metrics_unroute(svc->server, svc->route_id);
    if (svc->families_added)
        vram_metrics_remove_families(svc->server, svc->families_id);
    if (svc->health_added)
        vram_metrics_remove_health(svc->server, svc->health_id);
    if (svc->pools_served & 1)
        vram_metrics_remove_pool(svc->server, svc->host_pool);
    if (svc->pools_served & 2)
        vram_metrics_remove_pool(svc->server, svc->dev_pool);
    svc->families_added = 0;
    svc->health_added = 0;
    svc->pools_served = 0;
    svc->server = NULL;
}
