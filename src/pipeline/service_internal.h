/* src/pipeline/service_internal.h - what a service and its streams hold,
 * shared by the service's files: the service (service.c), its streams and
 * their reader threads (streams.c), the scheduler that batches ready frames
 * across streams (batcher.c), the inference workers (worker.c), the output
 * thread and its bounded queue of results (results.c), the latency
 * histogram (latency.c), the statistics (stats.c), the control API
 * (api.c), the metric families (families.c) and the printed statistics
 * (print.c).
 *
 * Locks, outermost first: svc->mu (the stream list, every stream's ready
 * queue, in-flight counts and states), then svc->out_mu (the results
 * queue). A source's own lock is never held while taking svc->mu. */
#ifndef VRAM_PIPELINE_SERVICE_INTERNAL_H
#define VRAM_PIPELINE_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "base/internal.h"
#include "snapshot_jpeg.h"
#include "streams_api.h"
#include "vramkit/blazeface.h"
#include "vramkit/engine.h"
#include "vramkit/service.h"
#include "vramkit/log.h"
#include "vramkit/video.h"

#define VRAM__STREAMS_MAX 1024u
#define VRAM__FACES_MAX 64u      /* faces kept per frame result */
#define VRAM__OUTPUTS_MAX 8u     /* output tensors summarised per frame */

/* Decode-to-result latency: a fixed histogram of log-spaced buckets (no
 * allocation; any thread adds, any thread reads). Bucket i holds latencies
 * below 0.01 ms x 1.25^i. */
#define VRAM__LAT_BUCKETS 96
typedef struct vram__latency {
    _Atomic uint64_t bucket[VRAM__LAT_BUCKETS];
    _Atomic uint64_t count;
} vram__latency;
void vram__latency_add(vram__latency *l, double ms);
/* The q-quantile (0..1) in ms: the upper edge of the bucket it falls in; 0
 * when empty. */
double vram__latency_quantile(const vram__latency *l, double q);

typedef struct vram__stream {
    char id[64];
    char url[256];
    vram_stream_opts opts;   /* url and id point into the fields above */
    struct vram_service *svc;
    vram_owner owner;        /* in the host pool */
    vram_owner dev_owner;    /* nvdec: in the device pool (its decoder's memory) */
    int nvdec;               /* its source decodes with NVDEC: frames in device memory */
    vram_source *src;
    vram_source_info info;
    uint64_t need;           /* computed at admission */
    uint64_t budget;         /* the owner's, 0: none */
    uint64_t max_frames;     /* the reader ends the stream after this many; 0: none */
    pthread_t thread;
    int thread_started;
    /* Under svc->mu. */
    vram_stream_state state;
    char error[256];
    int admitting;           /* its source is being opened: not listed yet */
    int stopping;            /* removal, shutdown or its GPU's failure asked for */
    int removing;            /* a removal claimed it (one removal a stream) */
    int reader_done;         /* the reader thread left its loop */
    int released;            /* the source and buffers are given back */
    vram_frame **ready;      /* ring of waiting frames, oldest at ready_head */
    uint32_t ready_head, ready_count, ready_cap;
    uint32_t in_flight;      /* frames taken by workers, not yet done */
    uint64_t seq_taken;      /* frames taken, in order: the next one's number */
    uint64_t seq_pushed;     /* results handed on: the next one's number */
    uint32_t refs;           /* results in the output queue that point here */
    /* Snapshots (kind io): the worker copies a frame here when one is due,
     * the output thread encodes it. */
    uint8_t *snap_rgb, *jpeg_buf;
    uint8_t *snap_nv12;      /* nvdec: the frame copied to the host, then converted */
    size_t jpeg_cap;
    int snap_busy;           /* a copy waits for the output thread */
    uint64_t next_snapshot_ns;
    /* Counters (any thread). */
    _Atomic uint64_t frames_in, processed, dropped, output_dropped, faces, failed_frames;
    vram__latency latency;
    /* frames per second, updated once a second by the output thread */
    uint64_t fps_last_processed;
    uint64_t fps_last_ns;
    _Atomic uint64_t fps_milli;
    _Atomic uint64_t first_result_ns, last_result_ns; /* output thread */
    /* The source's counters last read (they stay once it is closed). */
    uint64_t last_damaged, last_reconnects;
} vram__stream;

/* One frame's result waiting for the output thread (a fixed record). */
typedef struct vram__result {
    vram__stream *stream;    /* holds a ref */
    int64_t frame;
    double pts_s;
    int width, height;
    double latency_ms;
    int snapshot;            /* the stream's snapshot copy is this frame */
    size_t n_faces;          /* found (may exceed what is kept) */
    vram_face faces[VRAM__FACES_MAX];
    size_t n_outputs;
    vram_output_summary outputs[VRAM__OUTPUTS_MAX];
} vram__result;

/* One inference worker: its execution context and batch buffers (kind io,
 * owner "service" of the host pool). */
#define VRAM__BATCH_MAX 256u
typedef struct vram__worker {
    struct vram_service *svc;
    unsigned index;
    pthread_t thread;
    int thread_started;
    vram_exec *exec;
    float *input;            /* batch x one image */
    int pinned;              /* input page-locked (cuda) */
    size_t image_floats;
    float *outputs[VRAM__OUTPUTS_MAX]; /* per output tensor: batch x its per-image size */
    void *bf_scratch;
    vram__result *results;   /* one per image of the batch */
    /* The batch being run. */
    vram_frame *frames[VRAM__BATCH_MAX];
    vram__stream *streams[VRAM__BATCH_MAX];
    vram_letterbox_map maps[VRAM__BATCH_MAX];
    uint64_t decoded_ns[VRAM__BATCH_MAX];
    int64_t index_of[VRAM__BATCH_MAX];
    double pts_of[VRAM__BATCH_MAX];
    int size_of[VRAM__BATCH_MAX][2];
    int snap_of[VRAM__BATCH_MAX];
    uint64_t seq[VRAM__BATCH_MAX]; /* each frame's number in its stream (seq_taken) */
    _Atomic uint64_t batches, images;
} vram__worker;

struct vram_service {
    vram_service_opts opts;  /* strings point into the copies below */
    char *model, *executor, *jsonl_path, *snapshots_dir;
    int cuda;
    /* Memory: the host pool (frames, decoders, staging; everything with the
     * cpu executor) and, with cuda, the device pool of the engine. */
    vram_backend *host_backend, *dev_backend;
    vram_pool *host_pool, *dev_pool;
    vram_owner host_owner, dev_owner; /* "service" in each */
    /* The model. */
    vram_engine *engine;
    vram_engine_memory mem;
    unsigned batch;          /* largest batch the workers run */
    int in_w, in_h;          /* the model's image size */
    vram_layout layout;
    vram_letterbox lb;
    size_t n_outputs;
    vram_tensor_desc out_desc[VRAM__OUTPUTS_MAX];
    size_t out_floats[VRAM__OUTPUTS_MAX]; /* per image */
    int batch_symbolic;      /* the workers may run any batch up to `batch` */
    vram_device *device;     /* cuda: the shared context's device (borrowed) */
    vram_device *own_device; /* opened for opts.gpu >= 0 (closed last) */
    int blazeface;           /* outputs decoded as faces */
    int bf_index[4];         /* scores16, regs16, scores32, regs32 among the outputs */
    vram_blazeface *bf;
    uint64_t fixed_bytes, batch_io_bytes;
    uint64_t io_share_bytes; /* one image's slot of the batch buffers, counted per stream */
    uint32_t ring_frames, queue_frames;
    /* Workers. */
    vram__worker *workers;
    unsigned n_workers;
    /* Streams and the scheduler. */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* ready frames, or stopping */
    pthread_cond_t done_cv;  /* a frame finished, a reader ended, a ref dropped */
    vram__stream *streams[VRAM__STREAMS_MAX];
    size_t n_streams;
    size_t rr;               /* where the next batch starts looking */
    unsigned next_auto_id;
    uint64_t committed;      /* needs of the streams admitted and not given back */
    int stopping;            /* workers leave once nothing is ready or in flight */
    int stopped;
    int failed;              /* the GPU failed (vram_service_fail): no new streams */
    char failed_why[256];
    _Atomic unsigned failed_batches; /* driver errors in a row (workers) */
    /* Results. */
    pthread_mutex_t out_mu;
    pthread_cond_t out_cv;
    vram__result *results;   /* ring (kind io, owner "service") */
    uint32_t res_head, res_count, res_cap;
    int out_quit;
    pthread_t out_thread;
    int out_started;
    FILE *jsonl;
    int jsonl_owned, jsonl_failed;
    _Atomic uint64_t snapshots, snapshot_errors;
    int snapshot_warned;
    int out_error;           /* first error writing the outputs */
    char out_error_msg[256];
    vram__jpeg_encoder *jpeg;
    /* Serving. */
    vram_metrics *server;
    vram__streams_api api;   /* the control API's ops over this service */
    uint32_t route_id, families_id, health_id;
    int pools_served;        /* bit 0 the host pool, bit 1 the device pool */
    int families_added, health_added;
    /* Totals. */
    uint64_t started_ns;
};

/* streams.c */
int vram__stream_start(vram_service *svc, vram__stream *st);
/* Interrupt a stream's source and wait until its reader ended, its frames
 * were processed and it gave everything back (svc->mu not held). */
void vram__stream_finish(vram_service *svc, vram__stream *st);
void vram__stream_free(vram__stream *st);
/* Give back the source and the stream's buffers (once): svc->mu not held. */
void vram__stream_release(vram_service *svc, vram__stream *st);

/* batcher.c: under svc->mu */
void vram__ready_push(vram_service *svc, vram__stream *st, vram_frame *f);
/* Take up to `max` frames of different streams into the worker's batch;
 * returns how many. */
unsigned vram__ready_take(vram_service *svc, vram__worker *w, unsigned max);
/* Anything still waiting or being processed. */
int vram__ready_idle(const vram_service *svc);

/* worker.c */
int vram__workers_start(vram_service *svc);
void vram__workers_join(vram_service *svc);
void vram__workers_free(vram_service *svc);

/* results.c */
int vram__results_start(vram_service *svc);
/* Queue a result (copied); 0, or 1 when the queue was full (dropped). */
int vram__results_push(vram_service *svc, const vram__result *r);
/* Drain the queue, flush and close the outputs, join the thread. */
int vram__results_stop(vram_service *svc);
void vram__results_free(vram_service *svc);

/* api.c */
void vram__service_unserve(vram_service *svc);
/* families.c: add the service's families writer to svc->server; write
 * the families of several services (a fleet's), each sample with its
 * service's gpu label. */
int vram__families_add(vram_service *svc);
int vram__families_write(vram_service *const *svcs, size_t n_svcs, vram_write_fn write,
                         void *wctx);
/* service.c: the GPU failed (svc->mu taken). */
int vram__service_failed(const vram_service *svc);

/* stats.c: a stream's statistics (svc->mu held), its state's name, and
 * its statistics as a JSON object member `key` (NULL in an array). */
struct vram__json;
void vram__stream_stats_locked(vram_service *svc, vram__stream *st, vram_stream_stats *out);
const char *vram__stream_state_name(vram_stream_state s);
/* Every stream's statistics in a calloc'd array (*out, *n of them; free it). */
int vram__streams_copy(vram_service *svc, vram_stream_stats **out, size_t *n);
/* The same over any lister (a fleet's): count, then copy into an
 * allocation with room for a few more. */
typedef int (*vram__streams_fn)(void *ctx, vram_stream_stats *out, size_t cap, size_t *n);
int vram__stats_copy(vram__streams_fn list, void *ctx, vram_stream_stats **out, size_t *n);
void vram__stream_stats_json(struct vram__json *j, const char *key, const vram_stream_stats *s);

#endif
