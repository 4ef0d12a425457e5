/* vramkit/fleet.h - one process on every GPU of a host (libvramkit-service):
 * a service (vramkit/service.h) per GPU, each with its own shared context,
 * pools, engine copy (weights once per GPU), workers and decoders, and the
 * streams placed among them.
 *
 * Placement: a stream goes to the GPU whose service has the most budget
 * left (its budget less its fixed need and its streams' needs; a service
 * with no budget counts as having all of it), then the fewest streams (its
 * decoders and workers the least shared), then the lowest index. It is
 * never split: when that service refuses it on its budget the next one is
 * tried, and a stream that fits none is refused with each GPU's sentence.
 * A stream stays on its GPU until it is re-added.
 *
 * Budgets: each service's budget (opts.service.budget) is per GPU; the
 * fleet's own (opts.budget) covers every GPU's fixed need and every
 * stream's, kept through each service's admission hook.
 *
 * Failure: a GPU whose service failed (vram_service_fail, or its workers'
 * driver errors) takes only its own streams down. The fleet's watcher
 * re-adds each of them, same id and settings, on the other GPUs where
 * memory allows; those that fit nowhere stay listed as failed, with the
 * GPU's reason and each refusal. vram_fleet_failover_counts says how many.
 *
 * Errors and ownership as in vramkit/service.h. */
#ifndef VRAMKIT_FLEET_H
#define VRAMKIT_FLEET_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/service.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VRAM_FLEET_GPUS_MAX 64

typedef struct vram_fleet vram_fleet;

typedef struct vram_fleet_opts {
    uint32_t size;            /* sizeof(vram_fleet_opts), which vram_fleet_opts_init sets */
    vram_service_opts service; /* every GPU's service; its budget is per GPU, its gpu ignored;
                                  with several GPUs its jsonl_path FILE becomes FILE.gpuN
                                  per GPU (out.jsonl: out.gpu0.jsonl; "-" is shared line by
                                  line), and on_result is called from every GPU's output
                                  thread, maybe at once */
    const int *gpus;          /* device indices, each once */
    size_t n_gpus;            /* 1..VRAM_FLEET_GPUS_MAX */
    uint64_t budget;          /* every byte of every GPU's service; 0: none */
    double watch_s;           /* how often the watcher looks for failed GPUs; 0: 0.05 */
} vram_fleet_opts;

VRAM_API int vram_fleet_opts_init(vram_fleet_opts *opts);

/* Make every GPU's service (in the order given; the first failure undoes
 * the others and names its GPU), check the fixed needs against the fleet's
 * budget and start the watcher. */
VRAM_API int vram_fleet_create(const vram_fleet_opts *opts, vram_fleet **out);

VRAM_API size_t vram_fleet_gpus(const vram_fleet *fleet);
/* The i-th GPU's device index and service (borrowed; NULL past the end). */
VRAM_API int vram_fleet_gpu(const vram_fleet *fleet, size_t i);
VRAM_API vram_service *vram_fleet_service(const vram_fleet *fleet, size_t i);

/* Place and admit a stream (ids are unique across the fleet; NULL: "sN").
 * The id it got goes into id (cap bytes; may be NULL) and its GPU's
 * position into *at (may be NULL). Errors as vram_service_add_stream's;
 * VRAM_EBUDGET when it fits no GPU, with every GPU's reason. */
VRAM_API int vram_fleet_add_stream(vram_fleet *fleet, const vram_stream_opts *opts, char *id,
                                   size_t cap, size_t *at);
/* Remove a stream from its GPU (or a lost one's record). VRAM_EINVAL for an
 * unknown id or once the fleet is stopping, VRAM_EBUSY while the stream is
 * being admitted or moved off a failed GPU (ask again). A source that opens
 * slowly holds up only its own stream: the other calls go on meanwhile. */
VRAM_API int vram_fleet_remove_stream(vram_fleet *fleet, const char *id);

/* Every stream of every GPU, then those a failed GPU lost, each with its
 * gpu: up to cap into out, their number into *n. */
VRAM_API int vram_fleet_streams(vram_fleet *fleet, vram_stream_stats *out, size_t cap,
                                size_t *n);

/* One stream's statistics, with its gpu (a lost one's as kept when its
 * GPU failed, in state VRAM_STREAM_FAILED). VRAM_EINVAL for an unknown id. */
VRAM_API int vram_fleet_stream_stats(vram_fleet *fleet, const char *id, vram_stream_stats *out);

/* Streams moved off failed GPUs, and those no GPU could take. */
VRAM_API int vram_fleet_failover_counts(vram_fleet *fleet, uint64_t *moved, uint64_t *lost);

/* As vram_service_wait, over every GPU, failovers included. */
VRAM_API int vram_fleet_wait(vram_fleet *fleet, double timeout_s);

/* Serve every GPU's pools, the stream families of all of them (with their
 * gpu labels), the fleet's (vram_fleet_*) and /streams placing through the
 * fleet. vram_fleet_stop detaches it. */
VRAM_API int vram_fleet_serve(vram_fleet *fleet, vram_metrics *server);

/* Every GPU's statistics: one table each then the lost streams, or with
 * VRAM_PRINT_JSON one object {"gpus": [{"gpu", "up", "reason", "service"}],
 * "moved", "lost", "lost_streams": [{"id", "url", "gpu", "error"}]}. */
VRAM_API int vram_fleet_print(vram_fleet *fleet, vram_write_fn write, void *ctx, unsigned flags);

VRAM_API int vram_fleet_stop(vram_fleet *fleet);
VRAM_API int vram_fleet_destroy(vram_fleet *fleet);

#ifdef __cplusplus
}
#endif
#endif
