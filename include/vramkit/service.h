/* vramkit/service.h - the multi-stream video service (libvramkit-service):
 * many streams decoded, batched across streams, run through one engine and
 * decoded into results, inside one memory budget.
 *
 * Structure: one engine (its weights once) and M inference workers, each
 * with its own execution context, serve any number of streams. Each stream
 * has a source (vramkit/video.h) read by a thread of its own into a bounded
 * queue of ready frames; a worker takes up to B ready frames from different
 * streams, letterboxes them into one batch, runs it, decodes the outputs
 * (BlazeFace faces, or a summary of each output tensor for other models)
 * and hands each frame's result to the output thread, which writes JSON
 * Lines, annotated JPEG snapshots and the callback. Every queue is bounded:
 * a stream whose queue is full drops its oldest waiting frame, and a full
 * output queue drops the result; both are counted, and neither stalls
 * inference.
 *
 * Memory: every stream is an owner of the service's host pool, which holds
 * its frames (kind frames), its decoder's pictures (kind decoder) and its
 * staging (kind io); the engine's weights, contexts and the workers' batch
 * buffers belong to the owner "service" (in the device pool with the cuda
 * executor, else in the host pool). Adding a stream computes its need
 * (frames, decoder, staging) and refuses it with VRAM_EBUDGET when the need
 * would pass the service's budget or the per-stream limit; the sentence
 * gives the numbers. A stream that ends, fails or is removed gives every
 * byte back: its owner's live bytes return to 0. Once a stream runs,
 * handling a frame allocates nothing in the service, on the host or the
 * device (libavformat and libavcodec allocate small packets while
 * demuxing).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). The caller destroys a service with
 * vram_service_destroy (after vram_service_stop, or it stops it first).
 * Every call may come from any thread, but destroy, which must be the last;
 * the result callback runs on the output thread and must not call the
 * service. Strings passed in are copied. */
#ifndef VRAMKIT_SERVICE_H
#define VRAMKIT_SERVICE_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/blazeface.h"
#include "vramkit/metrics.h"
#include "vramkit/monitor.h"
#include "vramkit/pool.h"
#include "vramkit/video.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_service vram_service;

/* A summary of one output tensor of one image (models other than
 * BlazeFace). */
typedef struct vram_output_summary {
    const char *name;
    int rank;
    int64_t dims[8];
    float min, max, mean;
} vram_output_summary;

/* One processed frame, as the callback sees it (valid during the call). */
typedef struct vram_result {
    const char *stream;       /* the stream's id */
    int64_t frame;            /* 0-based index in display order */
    double pts_s;
    int width, height;        /* the source frame's */
    double latency_ms;        /* from decoded to decoded-into-results */
    size_t n_faces;           /* BlazeFace models */
    const vram_face *faces;   /* boxes and keypoints in source pixels */
    size_t n_outputs;         /* other models */
    const vram_output_summary *outputs;
} vram_result;

typedef void (*vram_result_fn)(void *ctx, const vram_result *result);

/* A second admission check a layer above the service adds (a fleet's
 * budget over the services of several GPUs). admit is called with a
 * stream's need once the service's own budgets let it in: 0 to take it,
 * else the stream is refused with VRAM_EBUDGET and the sentence admit
 * wrote into why (cap bytes). release gives a taken need back when the
 * stream does. Both run under the service's lock: they must not call the
 * service. */
typedef struct vram_service_admission {
    int (*admit)(void *ctx, const char *stream, uint64_t need, char *why, size_t cap);
    void (*release)(void *ctx, uint64_t need);
    void *ctx;
} vram_service_admission;

typedef struct vram_service_opts {
    uint32_t size;            /* sizeof(vram_service_opts), which vram_service_opts_init
                                 sets; 0 reads as this version */
    const char *model;        /* the ONNX model (required) */
    const char *executor;     /* "cpu" or "cuda"; NULL: VRAM_ENGINE_EXECUTOR */
    unsigned workers;         /* inference workers (each an execution context); 0: 1 */
    unsigned batch;           /* largest batch (frames from different streams); 0: 8.
                                 A model whose batch the file fixes runs at its own */
    uint64_t budget;          /* every byte of the service: fixed need and streams; 0: none */
    uint64_t stream_budget;   /* each stream at most; 0: none */
    uint32_t ring_frames;     /* frame buffers per stream, at least (and by default)
                                 queue_frames + stream_in_flight + 1; NVDEC streams
                                 map one fewer output surfaces (at least 2): the
                                 picture being decoded is in the decoder's own */
    uint32_t queue_frames;    /* ready frames a stream may have waiting; 0: 2 */
    uint32_t stream_in_flight; /* frames of one stream in workers' batches at once (1..64;
                                  its results still come out in order): more lets a few
                                  streams keep many workers busy, each costs one more
                                  frame in every stream's ring; 0: 1 */
    uint32_t output_queue;    /* results waiting for the output thread; 0: 1024 */
    int decoder_threads;      /* per decoder; 0: 1 */
    float score_threshold;    /* BlazeFace; 0: the model's (vramkit/blazeface.h) */
    const char *jsonl_path;   /* a JSON Lines line per processed frame; "-": stdout;
                                 NULL: none */
    const char *snapshots_dir; /* an annotated JPEG per stream every snapshot_every_s;
                                 NULL: none */
    double snapshot_every_s;  /* 0: 5 */
    uint64_t max_frames;      /* each stream ends after this many frames; 0: at its end */
    vram_result_fn on_result; /* called for every result (output thread); may be NULL */
    void *result_ctx;
    vram_decode decode;       /* where streams decode (vramkit/video.h): cpu; nvdec (needs
                                 the cuda executor: frames stay NV12 in device memory,
                                 one kernel letterboxes a batch into the input binding,
                                 the decoder's memory is charged to the stream's owner
                                 in the device pool); auto: nvdec for the streams NVDEC
                                 takes when the executor is cuda, the CPU for the rest
                                 (each stream's statistics say which). 0: cpu */
    uint32_t extra_surfaces;  /* nvdec: decode surfaces beyond the parser's minimum */
    int graphs;               /* cuda: replay each worker's run as a CUDA graph
                                 (vram_engine_opts.graphs); default VRAM_ENGINE_GRAPHS */
    int gpu;                  /* the GPU (device index) the service is on: the cuda executor
                                 and NVDEC open it; its pools are gpuN-host and gpuN-device,
                                 its metrics and statistics carry gpu="N". With the cpu
                                 executor only the names and the label (a stand-in for a
                                 GPU). -1: the device VRAM_DEVICE names, pools service-host
                                 and service-device, no label (the default) */
    const vram_service_admission *admission; /* borrowed; NULL: none */
} vram_service_opts;

/* Defaults as above (the executor from VRAM_ENGINE_EXECUTOR). Returns 0, or
 * VRAM_EINVAL for a NULL opts or a malformed variable. */
VRAM_API int vram_service_opts_init(vram_service_opts *opts);

/* Load the model, make the pools, the workers' contexts and batch buffers
 * and start the workers and the output thread. VRAM_EIO/VRAM_EPARSE/
 * VRAM_ENOSYS from loading the model, VRAM_EBUDGET when the fixed need
 * passes the budget (the sentence gives both), VRAM_EIO when the JSON Lines
 * file or the snapshot folder cannot be made. On error *out is NULL. */
VRAM_API int vram_service_create(const vram_service_opts *opts, vram_service **out);

/* What the service holds whatever its streams: weights once, the workers'
 * contexts and batch buffers. */
typedef struct vram_service_info {
    const char *model;
    const char *executor;
    unsigned workers, batch;
    int detector_blazeface;   /* 1 when the outputs are decoded as faces */
    int input_width, input_height;
    uint64_t weights_bytes;   /* once */
    uint64_t context_bytes;   /* one worker's execution context (arena, bindings, workspace) */
    uint64_t workspace_bytes; /* of that, the convolutions' workspace */
    uint64_t batch_io_bytes;  /* one worker's batch buffers */
    uint64_t fixed_bytes;     /* weights + workers x (context + batch buffers) */
    uint64_t budget;          /* 0: none */
    uint64_t reserved[4];
} vram_service_info;
VRAM_API int vram_service_info_get(const vram_service *svc, vram_service_info *out);

typedef struct vram_stream_opts {
    uint32_t size;            /* sizeof(vram_stream_opts); 0 reads as this version */
    const char *id;           /* unique among the service's streams; NULL: "sN" */
    const char *url;          /* a source URL (vramkit/video.h) */
    int realtime;             /* pace a file to its frame rate */
    int loop;                 /* play a file again at its end */
    uint64_t budget;          /* this stream at most; 0: the service's stream_budget */
    uint64_t max_frames;      /* end after this many frames; 0: the service's max_frames */
} vram_stream_opts;

/* Defaults (no id, no URL, no pacing, no loop, the service's limits).
 * VRAM_EINVAL for NULL. */
VRAM_API int vram_stream_opts_init(vram_stream_opts *opts);

/* ---- the stream file and the control API's JSON ----
 *
 * A stream file is one JSON object: the service's settings, all optional,
 * and the streams to start with:
 *
 *   {"model": "face.onnx", "backend": "cpu", "workers": 2, "batch": 8,
 *    "decode": "cpu", "surfaces": 0, "graphs": false, "in_flight": 1,
 *    "budget": "512M", "stream_budget": "64M", "queue": 2, "realtime": false,
 *    "loop": false, "frames": 0, "jsonl": "out.jsonl", "snapshots": "snap",
 *    "every": 5, "streams": [{"id": "cam1", "url": "rtsp://...",
 *    "realtime": true, "loop": false, "budget": "32M", "frames": 0}, ...]}
 *
 * Sizes are bytes or strings with a unit ("64M"); a stream's realtime and
 * loop default to the file's. POST /streams takes one stream object. An
 * unknown member, a value of the wrong type or range, or malformed JSON is
 * VRAM_EPARSE naming the member (and the stream's index) or the place. */
typedef struct vram_service_config {
    vram_service_opts service;  /* defaults where the file says nothing */
    int service_set;            /* bit per member given: see VRAM_CONFIG_* */
    size_t n_streams;
    vram_stream_opts *streams;  /* their strings point into the config */
} vram_service_config;
#define VRAM_CONFIG_MODEL 0x1
#define VRAM_CONFIG_BACKEND 0x2
#define VRAM_CONFIG_WORKERS 0x4
#define VRAM_CONFIG_BATCH 0x8
#define VRAM_CONFIG_BUDGET 0x10
#define VRAM_CONFIG_JSONL 0x20
#define VRAM_CONFIG_SNAPSHOTS 0x40

/* Parse a stream file's text (len bytes, NUL not needed). *out is the
 * caller's, freed with vram_service_config_free; NULL on error. */
VRAM_API int vram_service_config_parse(const char *text, size_t len, vram_service_config **out);
VRAM_API void vram_service_config_free(vram_service_config *config);

/* Parse one stream object (the body of POST /streams) into *opts, whose
 * strings (id, url) are copied into `strings` (cap bytes; an id or URL that
 * does not fit is VRAM_EPARSE). */
VRAM_API int vram_stream_opts_parse(const char *text, size_t len, vram_stream_opts *opts,
                                    char *strings, size_t cap);

/* Admit a stream: open its source (refused with the URL named when it
 * cannot be), compute its need, check it against the budgets and start it.
 * VRAM_EINVAL for a duplicate id, VRAM_EBUDGET when it does not fit (the
 * sentence gives the need and what is left), the source's errors. The id
 * it got (*id may be NULL) is the service's string, valid until the stream
 * is removed and gone. */
VRAM_API int vram_service_add_stream(vram_service *svc, const vram_stream_opts *opts,
                                     const char **id);

/* Stop a stream and give back what it held; waits until it has. VRAM_EINVAL
 * for an unknown id. */
VRAM_API int vram_service_remove_stream(vram_service *svc, const char *id);

typedef enum vram_stream_state {
    VRAM_STREAM_RUNNING = 0,
    VRAM_STREAM_RECONNECTING = 1,
    VRAM_STREAM_ENDED = 2,    /* its source ended: every frame processed or dropped */
    VRAM_STREAM_FAILED = 3
} vram_stream_state;

typedef struct vram_stream_stats {
    char id[64];
    char url[256];
    vram_stream_state state;
    char error[256];          /* why it failed */
    int width, height;
    uint64_t frames_in;       /* decoded */
    uint64_t processed;       /* through the model and into results */
    uint64_t dropped;         /* oldest waiting frames dropped when its queue was full */
    uint64_t damaged;         /* packets or frames the decoder refused */
    uint64_t output_dropped;  /* results the full output queue refused */
    uint64_t reconnects;
    uint64_t faces;           /* BlazeFace: faces found, summed over frames */
    double fps;               /* processed per second over the last second; once ended
                                 or failed, its mean from first result to last */
    double latency_p50_ms, latency_p99_ms; /* decoded to result */
    uint64_t frames_bytes, decoder_bytes, io_bytes; /* live now, by kind */
    uint64_t need_bytes;      /* computed at admission */
    uint64_t live_bytes;      /* its owners' live bytes in the host pool and (nvdec) the
                                 device pool (0 once it gave everything back) */
    vram_decode decode;       /* how it decodes: cpu or nvdec */
    char fallback[192];       /* auto on the CPU: why not NVDEC */
    int32_t gpu;              /* the service's gpu option (-1: none) */
    int32_t reserved32;
    uint64_t reserved[2];
} vram_stream_stats;

/* The streams the service has (running, ended or failed and not yet
 * removed): up to cap into out, their number into *n. */
VRAM_API int vram_service_streams(vram_service *svc, vram_stream_stats *out, size_t cap,
                                  size_t *n);
VRAM_API int vram_service_stream_stats(vram_service *svc, const char *id,
                                       vram_stream_stats *out);

/* Wait until every stream has ended or failed (files at their end), or
 * timeout_s passed (< 0: no limit). 0 when they have, 1 on the timeout. */
VRAM_API int vram_service_wait(vram_service *svc, double timeout_s);

/* Serve the control API and the service's metrics on a metrics server:
 * GET /streams (JSON: every stream's statistics), POST /streams (JSON
 * {"id": ..., "url": ..., "realtime": bool, "loop": bool, "budget": bytes
 * or "64M"}: 201 with the stream, 400 for malformed JSON, 409 when refused
 * at admission, with the sentence), DELETE /streams/ID (200, 404 for an
 * unknown id); the service's pools, and per-stream families
 * (vram_stream_*{stream}); and a health check: /healthz answers 503 once
 * the service failed (vram_service_fail). The server must outlive the
 * service's use of it: vram_service_stop detaches it. */
VRAM_API int vram_service_serve(vram_service *svc, vram_metrics *server);

/* The pools: host (frames, decoders, staging; the engine too with the cpu
 * executor) and device (the engine with the cuda executor; NULL else). */
VRAM_API vram_pool *vram_service_host_pool(const vram_service *svc);
VRAM_API vram_pool *vram_service_device_pool(const vram_service *svc);

/* The statistics: a table (every stream, and the totals) or, with
 * VRAM_PRINT_JSON, one JSON object. */
VRAM_API int vram_service_print(vram_service *svc, vram_write_fn write, void *ctx,
                                unsigned flags);

/* Declare the service's GPU failed (an Xid error, a lost device, an
 * operator's word): every stream it has stops and fails with `why`, giving
 * back what it holds, and new streams are refused. The workers declare it
 * themselves when VRAM_SERVICE_FAILED_BATCHES batches in a row fail with a
 * driver error. Idempotent (the first reason stays). */
#define VRAM_SERVICE_FAILED_BATCHES 3
VRAM_API int vram_service_fail(vram_service *svc, const char *why);

/* 0 while the GPU serves; VRAM_EBACKEND once it failed, with the reason
 * copied into why (cap bytes; may be NULL). */
VRAM_API int vram_service_health(vram_service *svc, char *why, size_t cap);

/* Drain and stop: no new frame is taken, frames in flight are finished and
 * their results written, every stream is stopped and gives back its memory,
 * the outputs are flushed and closed. Idempotent. Returns 0 or the first
 * error of writing the outputs. */
VRAM_API int vram_service_stop(vram_service *svc);

/* Stop (if needed), then free the workers, contexts, engine and pools, in
 * the reverse order of their making. NULL is accepted. */
VRAM_API int vram_service_destroy(vram_service *svc);

#ifdef __cplusplus
}
#endif
#endif
