/* src/pipeline/streams_api.h - the control API's routes (/streams) over a
 * set of streams reached through an ops table, so that one service
 * (api.c) and a fleet of them (fleet_life.c) answer alike. */
#ifndef VRAM_PIPELINE_STREAMS_API_H
#define VRAM_PIPELINE_STREAMS_API_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit/metrics.h"
#include "vramkit/service.h"

typedef struct vram__streams_api {
    /* Every stream's statistics, allocated (the caller frees), and their number. */
    int (*list)(void *ctx, vram_stream_stats **out, size_t *n);
    /* One stream's; VRAM_EINVAL for an unknown id. */
    int (*stats)(void *ctx, const char *id, vram_stream_stats *out);
    /* Admit a stream; the id it got into id (cap bytes). */
    int (*add)(void *ctx, const vram_stream_opts *opts, char *id, size_t cap);
    /* Remove one: VRAM_EINVAL unknown, VRAM_EBUSY not now. */
    int (*remove)(void *ctx, const char *id);
    void *ctx;
} vram__streams_api;

/* Route /streams on server through api (borrowed until unrouted). */
int vram__streams_api_route(vram_metrics *server, vram__streams_api *api, uint32_t *route_id);

#endif
