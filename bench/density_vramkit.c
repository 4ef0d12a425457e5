/* bench/density_vramkit.c - bench_density's vramkit design: one
 * vram_service (executor cuda, NVDEC decoding on the device's shared
 * context, the workers and batch asked for, CUDA graphs if asked), or with
 * --gpus a vram_fleet of them, one per GPU; streams "s0", "s1", ... added
 * to the running service (or placed by the fleet) with paced, looping
 * sources, and removed from the end. The counters come from the
 * service's statistics; latency from decoded to result is also binned here
 * from every result the service hands its callback, so that a window's
 * percentiles are the window's (the service's own are since each stream
 * began). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool_util.h"
#include "density.h"

typedef struct vk_design {
    const density_opts *o;
    vram_service *svc;        /* the one service, or the fleet's first */
    vram_fleet *fleet;        /* with --gpus */
    vram_service_info info;
    char executor[32];
    unsigned n;               /* streams "s0" .. "s<n-1>" running */
    vram_stream_stats *st;    /* DENSITY_MAX_STREAMS of them */
    _Atomic uint64_t (*latency)[DENSITY_HIST_BUCKETS]; /* per stream, from the callback */
} vk_design;

/* The stream's index from its id "sN"; -1 for another. */
static int stream_index(const char *id)
{
    if (!id || id[0] != 's' || id[1] < '0' || id[1] > '9')
        return -1;
    char *end;
    unsigned long v = strtoul(id + 1, &end, 10);
    return *end || v >= DENSITY_MAX_STREAMS ? -1 : (int)v;
}

/* The output thread, for every result. */
static void on_result(void *ctx, const vram_result *r)
{
    vk_design *v = ctx;
    int i = stream_index(r->stream);
    if (i >= 0)
        atomic_fetch_add_explicit(&v->latency[i][density_hist_bucket(r->latency_ms)], 1,
                                  memory_order_relaxed);
}

/* One more stream of the clip, paced and looping, as `id`. */
static int add_stream(vk_design *v, const char *id)
{
    vram_stream_opts so;
    vram_stream_opts_init(&so);
    so.id = id;
    so.url = v->o->clip;
    so.realtime = 1;
    so.loop = 1;
    if (v->fleet)
        return vram_fleet_add_stream(v->fleet, &so, NULL, 0, NULL);
    return vram_service_add_stream(v->svc, &so, NULL);
}

static int remove_stream(vk_design *v, const char *id)
{
    return v->fleet ? vram_fleet_remove_stream(v->fleet, id)
                    : remove_stream(v, id);
}

/* Every stream's statistics, over every GPU with --gpus. */
static int list_streams(vk_design *v, size_t *got)
{
    return v->fleet ? vram_fleet_streams(v->fleet, v->st, DENSITY_MAX_STREAMS, got)
                    : vram_service_streams(v->svc, v->st, DENSITY_MAX_STREAMS, got);
}

/* Streams that failed or ended in an earlier step are removed and added
 * again under their ids, so that the next step runs n live streams. */
static int vk_heal(vk_design *v)
{
    size_t got = 0;
    int rc = list_streams(v, &got);
    for (size_t k = 0; k < got && !rc; k++) {
        const vram_stream_stats *s = &v->st[k];
        int i = stream_index(s->id);
        if (i < 0 || (unsigned)i >= v->n ||
            (s->state != VRAM_STREAM_FAILED && s->state != VRAM_STREAM_ENDED))
            continue;
        char id[sizeof s->id];
        snprintf(id, sizeof id, "%s", s->id);
        if ((rc = remove_stream(v, id)))
            break;
        if ((rc = add_stream(v, id))) {
            /* Keep the ids contiguous: this one and those after it go. */
            tool_saved_error saved;
            tool_error_save(&saved);
            unsigned keep = (unsigned)i;
            while (v->n > keep + 1) {
                snprintf(id, sizeof id, "s%u", v->n - 1);
                remove_stream(v, id);
                v->n--;
            }
            v->n = keep;
            tool_error_restore(&saved, rc);
        }
    }
    return rc;
}

static int vk_resize(void *self, unsigned n, unsigned *have)
{
    vk_design *v = self;
    int rc = vk_heal(v);
    while (v->n < n && !rc) {
        if (density_interrupted) {
            rc = vram_set_error(VRAM_EINVAL, "interrupted while adding streams");
            break;
        }
        char id[32];
        snprintf(id, sizeof id, "s%u", v->n);
        if (!(rc = add_stream(v, id)))
            v->n++;
    }
    while (v->n > n && !rc) {
        char id[32];
        snprintf(id, sizeof id, "s%u", v->n - 1);
        if (!(rc = remove_stream(v, id)))
            v->n--;
    }
    *have = v->n;
    return rc;
}

static int vk_sample(void *self, density_stream *out, unsigned n)
{
    vk_design *v = self;
    size_t got = 0;
    int rc = list_streams(v, &got);
    if (rc)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].failed = 1;
        snprintf(out[i].error, sizeof out[i].error, "the service does not list it");
    }
    for (size_t k = 0; k < got && k < DENSITY_MAX_STREAMS; k++) {
        const vram_stream_stats *s = &v->st[k];
        int i = stream_index(s->id);
        if (i < 0 || (unsigned)i >= n)
            continue;
        density_stream *d = &out[i];
        d->frames_in = s->frames_in;
        d->processed = s->processed;
        d->dropped = s->dropped + s->output_dropped;
        d->svc_p50_ms = s->latency_p50_ms;
        d->svc_p99_ms = s->latency_p99_ms;
        d->live_bytes = s->live_bytes;
        d->decoder_bytes = s->decoder_bytes;
        d->frames_bytes = s->frames_bytes;
        d->need_bytes = s->need_bytes;
        d->nvdec = s->decode == VRAM_DECODE_NVDEC;
        d->failed = s->state == VRAM_STREAM_FAILED || s->state == VRAM_STREAM_ENDED;
        d->error[0] = '\0';
        if (s->state == VRAM_STREAM_FAILED)
            snprintf(d->error, sizeof d->error, "failed: %s", s->error);
        else if (s->state == VRAM_STREAM_ENDED)
            snprintf(d->error, sizeof d->error, "ended (a looping file should not)");
        for (unsigned b = 0; b < DENSITY_HIST_BUCKETS; b++)
            d->latency[b] = atomic_load_explicit(&v->latency[i][b], memory_order_relaxed);
    }
    return 0;
}

static void vk_describe(void *self, char *buf, size_t cap)
{
    vk_design *v = self;
    const vram_service_info *in = &v->info;
    const char *dec = vram_decode_name(v->o->decode);
    char gpus[160] = "one vram_service";
    if (v->fleet) {
        int k = snprintf(gpus, sizeof gpus, "a vram_fleet of %zu services (GPUs", v->o->n_gpus);
        for (size_t i = 0; i < v->o->n_gpus && k > 0 && (size_t)k < sizeof gpus; i++)
            k += snprintf(gpus + k, sizeof gpus - (size_t)k, "%s%d", i ? "," : " ",
                          v->o->gpus[i]);
        if (k > 0 && (size_t)k < sizeof gpus)
            snprintf(gpus + k, sizeof gpus - (size_t)k, "), each");
    }
    snprintf(buf, cap,
             "%s: executor %s, %u workers, batch up to %u, CUDA graphs %s, "
             "decode %s (extra surfaces %u), queue %u, in flight %u; input %dx%d; fixed "
             "need %.1f MiB (weights %.1f MiB, a worker's context %.1f MiB of which "
             "workspace %.1f MiB, its batch buffers %.1f MiB)%s",
             gpus, in->executor ? in->executor : "?", in->workers, in->batch,
             v->o->graphs < 0 ? "as VRAM_ENGINE_GRAPHS says" : v->o->graphs ? "on" : "off",
             dec ? dec : "?", v->o->extra_surfaces, v->o->queue_frames ? v->o->queue_frames : 2,
             v->o->in_flight ? v->o->in_flight : 1, in->input_width, in->input_height,
             density_mib(in->fixed_bytes), density_mib(in->weights_bytes),
             density_mib(in->context_bytes), density_mib(in->workspace_bytes),
             density_mib(in->batch_io_bytes),
             in->detector_blazeface ? "; outputs decoded as BlazeFace faces" : "");
}

static void vk_close(void *self)
{
    vk_design *v = self;
    if (!v)
        return;
    int rc = v->fleet ? vram_fleet_stop(v->fleet) : v->svc ? vram_service_stop(v->svc) : 0;
    if (rc)
        fprintf(stderr, "bench_density: stopping the service: %s (%s)\n", vram_last_error(),
                vram_err_name(rc));
    if (v->fleet)
        vram_fleet_destroy(v->fleet);
    else
        vram_service_destroy(v->svc);
    free(v->st);
    free((void *)v->latency);
    free(v);
}

int density_vramkit_open(const density_opts *o, uint64_t budget, density_design *out)
{
    memset(out, 0, sizeof *out);
    vk_design *v = calloc(1, sizeof *v);
    if (!v)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    v->o = o;
    v->st = calloc(DENSITY_MAX_STREAMS, sizeof *v->st);
    v->latency = calloc(DENSITY_MAX_STREAMS, sizeof *v->latency);
    if (!v->st || !v->latency) {
        vk_close(v);
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    }
    vram_service_opts so;
    int rc = vram_service_opts_init(&so);
    if (rc) {
        vk_close(v);
        return rc;
    }
    so.model = o->model;
    so.executor = "cuda";
    so.workers = o->workers;
    so.batch = o->batch;
    so.budget = budget;
    so.decode = o->decode;
    so.extra_surfaces = o->extra_surfaces;
    so.queue_frames = o->queue_frames;
    so.stream_in_flight = o->in_flight;
    if (o->graphs >= 0)
        so.graphs = o->graphs;
    so.on_result = on_result;
    so.result_ctx = v;
    if (o->n_gpus) {
        vram_fleet_opts fo;
        vram_fleet_opts_init(&fo);
        fo.service = so;
        fo.gpus = o->gpus;
        fo.n_gpus = o->n_gpus;
        if (!(rc = vram_fleet_create(&fo, &v->fleet)))
            v->svc = vram_fleet_service(v->fleet, 0);
    } else {
        rc = vram_service_create(&so, &v->svc);
    }
    if (rc) {
        vk_close(v);
        return rc;
    }
    vram_service_info_get(v->svc, &v->info);
    /* The service's strings live as long as it; the executor's is kept. */
    snprintf(v->executor, sizeof v->executor, "%s", v->info.executor ? v->info.executor : "?");
    v->info.executor = v->executor;
    v->info.model = NULL;
    *out = (density_design){.name = "vramkit",
                            .resize = vk_resize,
                            .sample = vk_sample,
                            .describe = vk_describe,
                            .close = vk_close,
                            .self = v,
                            .fixed_bytes = v->info.fixed_bytes *
                                           (o->n_gpus ? o->n_gpus : 1)};
    return 0;
}
