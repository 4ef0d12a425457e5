/* src/pipeline/fleet_internal.h - what a fleet holds, shared by its files:
 * placement, the fleet's budget and failover (fleet.c), its making, views
 * and ending (fleet_life.c) and its serving (fleet_serve.c). Locks as
 * fleet.c says. */
#ifndef VRAM_PIPELINE_FLEET_INTERNAL_H
#define VRAM_PIPELINE_FLEET_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "service_internal.h"
#include "vramkit/fleet.h"

typedef struct fleet_stream {
    char id[64];
    char url[256];
    vram_stream_opts opts;   /* id and url point into the fields above */
    size_t at;               /* its GPU's position */
    int lost;                /* its GPU failed and no other took it */
    int busy;                /* being admitted, moved or removed: no one else's */
    size_t checked_off;      /* 1 + the failed GPU whose watcher pass saw it */
    char error[512];         /* why, once lost (the views keep its first 255 bytes) */
} fleet_stream;

struct vram_fleet {
    vram_fleet_opts opts;
    size_t n;
    int gpu[VRAM_FLEET_GPUS_MAX];
    vram_service *svc[VRAM_FLEET_GPUS_MAX];
    vram_service_admission adm;
    pthread_mutex_t mu;
    fleet_stream **streams;  /* each allocated on its own: records stay put */
    size_t n_streams, cap;
    pthread_cond_t idle_cv;  /* a record stopped being busy */
    size_t in_hand;          /* records the watcher is moving */
    int closing;             /* stopping: no more adds or removals */
    unsigned next_auto_id;
    _Atomic uint64_t moved, lost; /* read without mu (metrics, the CLI's progress) */
    atomic_int quit;         /* the watcher is asked to leave (set under mu) */
    pthread_mutex_t adm_mu;
    uint64_t fixed, committed; /* every GPU's fixed need; the streams' needs */
    pthread_cond_t watch_cv;
    pthread_t watcher;
    int watching;
    vram_metrics *server;    /* served on (vram_fleet_serve) */
    vram__streams_api api;   /* the control API's ops over the fleet */
    uint32_t route_id, families_id, health_id;
    int routed, health_added;
    int families_added;
    unsigned char pools_served[VRAM_FLEET_GPUS_MAX]; /* bit 0 host, bit 1 device */
};

/* fleet.c */
int vram__fleet_admit(void *ctx, const char *stream, uint64_t need, char *why, size_t cap);
void vram__fleet_release(void *ctx, uint64_t need);
fleet_stream *vram__fleet_find_locked(vram_fleet *f, const char *id);
void *vram__fleet_watch(void *arg);

/* fleet_serve.c: detach from the metrics server (a fleet not served: nothing). */
void vram__fleet_unserve(vram_fleet *f);

#endif
