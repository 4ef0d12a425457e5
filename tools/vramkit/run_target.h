/* tools/vramkit/run_target.h - what `vramkit run` drives: one service, or
 * with --gpus a fleet of them (one per GPU), behind the same few calls, so
 * that the command reads the same either way. */
#ifndef VRAMKIT_RUN_TARGET_H
#define VRAMKIT_RUN_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit.h"

typedef struct run_target {
    vram_service *svc;  /* without --gpus */
    vram_fleet *fleet;  /* with --gpus */
} run_target;

/* One service (n_gpus 0), or one per GPU with `total` over all (0: none). */
int run_target_create(run_target *t, const vram_service_opts *o, const int *gpus, size_t n_gpus,
                      uint64_t total);
int run_target_destroy(run_target *t);

/* The services: one, or one per GPU in the order given. */
size_t run_target_services(const run_target *t);
vram_service *run_target_service(const run_target *t, size_t i);

int run_target_add(run_target *t, const vram_stream_opts *o);
/* Every stream's statistics (*n of them; free the array; NULL when out of memory). */
vram_stream_stats *run_target_streams(run_target *t, size_t *n);
/* 0 once every stream ended, 1 at the timeout. */
int run_target_wait(run_target *t, double timeout_s);
int run_target_serve(run_target *t, vram_metrics *server);
int run_target_print(run_target *t, vram_write_fn write, void *ctx, unsigned flags);
int run_target_stop(run_target *t);

/* Without --gpus: every visible GPU when the executor is cuda, VRAM_DEVICE
 * names none and more than one is visible; else none (*n 0: one service). */
void run_target_default_gpus(const char *executor, int *gpus, size_t cap, size_t *n);

/* "--gpus LIST|all" into gpus (cap of them): 0, or 2 after a usage error. */
int run_target_parse_gpus(const char *v, int *gpus, size_t cap, size_t *n);

#endif
