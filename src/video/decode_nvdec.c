/* src/video/decode_nvdec.c - the libav source's NVDEC decoder: libavformat's
 * packets (H.264 and HEVC through the bitstream filter to Annex B) go to
 * NVIDIA's parser; its sequence callback checks the GPU's decoder caps and
 * makes the decoder on the source's CUDA context (the device's shared one,
 * or the caller's) with the parser's minimum of decode surfaces plus the
 * extra asked for and one output surface per ring slot, measures the device
 * memory that took (cuMemGetInfo before and after, decoder creations and
 * destructions serialised in the process) and charges it to the stream's
 * owner; decoded pictures queue in display order, and delivering one maps
 * it (NV12 in device memory) into its ring slot until the slot is
 * released. Every call on the decoder and parser is made under the
 * source's cuvidCtxLock with the context pushed.
 *
 * libnvcuvid and the driver are loaded at run time (ffnvcodec's loader for
 * nvcuvid, vram_cuda_proc for the driver): a build or machine without them
 * refuses with VRAM_ENOSYS and the reason, as does a stream the decoders
 * cannot take (codec, chroma format, bit depth, size). */
#include "av_input.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/bsf.h>

#include "vramkit/device.h"
#include "vramkit/log.h"

/* ffnvcodec's loader reports what it cannot load into the caller's buffer. */
#define FFNV_LOG_FUNC(logctx, msg, ...) snprintf((char *)(logctx), 160, (msg), __VA_ARGS__)
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...)
#include <ffnvcodec/dynlink_loader.h>

#define DISPLAY_QUEUE 32       /* pictures the parser may hand out per packet, at most */
#define CLOCK_HZ 10000000      /* the parser's timestamps: 10 MHz */

/* The driver calls, through vram_cuda_proc with ffnvcodec's types. */
typedef CUresult CUDAAPI mem_get_info_fn(size_t *free_bytes, size_t *total_bytes);
static struct {
    tcuCtxPushCurrent_v2 *push;
    tcuCtxPopCurrent_v2 *pop;
    tcuStreamCreate *stream_create;
    tcuStreamDestroy_v2 *stream_destroy;
    tcuStreamSynchronize *stream_sync;
    mem_get_info_fn *mem_info;
} cu;
static CuvidFunctions *cv;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[256];
/* Decoders are made and destroyed one at a time, so that the free memory
 * before and after measures one decoder. */
static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;

static void load(void)
{
    char why[160] = "";
    struct {
        const char *name;
        int version;
        void **fn;
    } syms[] = {
        {"cuCtxPushCurrent", 4000, (void **)&cu.push},
        {"cuCtxPopCurrent", 4000, (void **)&cu.pop},
        {"cuStreamCreate", 2000, (void **)&cu.stream_create},
        {"cuStreamDestroy", 4000, (void **)&cu.stream_destroy},
        {"cuStreamSynchronize", 2000, (void **)&cu.stream_sync},
        {"cuMemGetInfo", 3020, (void **)&cu.mem_info},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if ((load_rc = vram_cuda_proc(syms[i].name, syms[i].version, syms[i].fn))) {
            snprintf(load_msg, sizeof load_msg, "%s", vram_last_error());
            return;
        }
    if (cuvid_load_functions(&cv, why) < 0) {
        cv = NULL;
        load_rc = VRAM_ENOSYS;
        size_t n = strlen(why);
        while (n && why[n - 1] == '\n')
            why[--n] = 0;
        snprintf(load_msg, sizeof load_msg, "NVDEC is not available: %s",
                 why[0] ? why : "libnvcuvid.so.1 could not be loaded");
    }
}

int vram__nvdec_available(void)
{
    pthread_once(&load_once, load);
    return load_rc ? vram__fail(load_rc, "%s", load_msg) : 0;
}

typedef struct vram__nvdec {
    vram__av_source *a;
    CUcontext ctx;
    CUvideoctxlock lock;
    CUstream stream;           /* the mapping's post-processing */
    CUvideoparser parser;
    CUvideodecoder dec;
    AVBSFContext *bsf;
    AVPacket *filtered;
    cudaVideoCodec codec;
    /* The decoder as made (the sequence callback). */
    unsigned coded_w, coded_h, width, height;
    int display_left, display_top;
    unsigned decode_surfaces, output_surfaces;
    uint64_t frames_charged, decoder_charged; /* charged to the owner */
    int matrix, full_range;
    /* Pictures in display order, not yet delivered. */
    CUVIDPARSERDISPINFO queue[DISPLAY_QUEUE];
    unsigned q_head, q_count;
    CUVIDPARSERDISPINFO held;
    int ended;                 /* the parser was sent the end, and flushed */
    int discontinuity;         /* the next packet follows a seek */
    int timestamps;            /* packets came with timestamps */
    /* What stops the stream: set by a callback, read by fatal. */
    int fatal;
    char fatal_msg[384];
    /* Mapped surfaces, by ring slot (0: none): any thread unmaps. */
    pthread_mutex_t map_mu;
    CUdeviceptr *mapped;
    uint32_t slots;
} vram__nvdec;

static int cu_fail(CUresult r, const char *what, const char *url)
{
    return vram_cuda_fail((int)r, "video source %s: %s", url, what);
}

static int cuvid_fail(CUresult r, const char *what, const char *url)
{
    return vram_cuda_fail((int)r, "video source %s: %s", url, what);
}

/* Lock the decoder and push the context (and back). */
static void enter(vram__nvdec *n)
{
    cv->cuvidCtxLock(n->lock, 0);
    cu.push(n->ctx);
}

static void leave(vram__nvdec *n)
{
    CUcontext dummy;
    cu.pop(&dummy);
    cv->cuvidCtxUnlock(n->lock, 0);
}

static void set_fatal(vram__nvdec *n, int rc)
{
    if (!n->fatal) {
        n->fatal = rc;
        snprintf(n->fatal_msg, sizeof n->fatal_msg, "%s", vram_last_error());
    }
}

static const char *codec_label(cudaVideoCodec c)
{
    switch (c) {
    case cudaVideoCodec_H264: return "H.264";
    case cudaVideoCodec_HEVC: return "HEVC";
    case cudaVideoCodec_VP9: return "VP9";
    case cudaVideoCodec_AV1: return "AV1";
    case cudaVideoCodec_MPEG2: return "MPEG-2";
    case cudaVideoCodec_MPEG4: return "MPEG-4";
    case cudaVideoCodec_VP8: return "VP8";
    default: return "this codec";
    }
}

static int codec_of(int id, cudaVideoCodec *out, const char **bsf)
{
    *bsf = NULL;
    switch (id) {
    case AV_CODEC_ID_H264: *out = cudaVideoCodec_H264; *bsf = "h264_mp4toannexb"; return 0;
    case AV_CODEC_ID_HEVC: *out = cudaVideoCodec_HEVC; *bsf = "hevc_mp4toannexb"; return 0;
    case AV_CODEC_ID_VP9: *out = cudaVideoCodec_VP9; return 0;
    case AV_CODEC_ID_AV1: *out = cudaVideoCodec_AV1; return 0;
    case AV_CODEC_ID_MPEG2VIDEO: *out = cudaVideoCodec_MPEG2; return 0;
    case AV_CODEC_ID_MPEG4: *out = cudaVideoCodec_MPEG4; return 0;
    case AV_CODEC_ID_VP8: *out = cudaVideoCodec_VP8; return 0;
    default: return -1;
    }
}

/* Bytes of one NV12 output surface of w x h, as the driver lays it out
 * (pitch aligned to 512, height to 2): the share of the measured memory
 * that is the ring. */
static uint64_t surface_bytes(unsigned w, unsigned h)
{
    uint64_t pitch = vram__align_up(w, 512), rows = vram__align_up(h, 2);
    return pitch * rows * 3 / 2;
}

/* Is the stream something the GPU's decoders take? 0, or VRAM_ENOSYS
 * naming what they do not. Context pushed. */
static int check_caps(vram__nvdec *n, const CUVIDEOFORMAT *f)
{
    const char *url = n->a->src->url;
    const char *codec = codec_label(f->codec);
    if (f->chroma_format != cudaVideoChromaFormat_420 || f->bit_depth_luma_minus8 ||
        f->bit_depth_chroma_minus8)
        return vram__fail(VRAM_ENOSYS,
                          "video source %s: NVDEC decoding here takes 8-bit 4:2:0 pictures; this "
                          "%s stream is %d-bit with chroma format %d",
                          url, codec, 8 + f->bit_depth_luma_minus8, (int)f->chroma_format);
    if (!cv->cuvidGetDecoderCaps)
        return 0;
    CUVIDDECODECAPS caps;
    memset(&caps, 0, sizeof caps);
    caps.eCodecType = f->codec;
    caps.eChromaFormat = f->chroma_format;
    caps.nBitDepthMinus8 = f->bit_depth_luma_minus8;
    CUresult r = cv->cuvidGetDecoderCaps(&caps);
    if (r != CUDA_SUCCESS)
        return cuvid_fail(r, "cuvidGetDecoderCaps", url);
    if (!caps.bIsSupported)
        return vram__fail(VRAM_ENOSYS, "video source %s: this GPU's decoders do not take %s",
                          url, codec);
    unsigned mbs = (f->coded_width / 16) * (f->coded_height / 16);
    if (f->coded_width > caps.nMaxWidth || f->coded_height > caps.nMaxHeight ||
        f->coded_width < caps.nMinWidth || f->coded_height < caps.nMinHeight ||
        (caps.nMaxMBCount && mbs > caps.nMaxMBCount))
        return vram__fail(VRAM_ENOSYS,
                          "video source %s: %ux%u %s is outside what this GPU's decoders take "
                          "(%ux%u to %ux%u, %u macroblocks at most)",
                          url, f->coded_width, f->coded_height, codec, caps.nMinWidth,
                          caps.nMinHeight, caps.nMaxWidth, caps.nMaxHeight, caps.nMaxMBCount);
    if (!(caps.nOutputFormatMask & (1u << cudaVideoSurfaceFormat_NV12)))
        return vram__fail(VRAM_ENOSYS, "video source %s: this GPU's decoders give no NV12 for %s",
                          url, codec);
    return 0;
}

static void uncharge(vram__nvdec *n)
{
    vram_source *s = n->a->src;
    if (s->opts.pool && n->frames_charged)
        vram_pool_uncharge(s->opts.pool, n->frames_charged, s->opts.owner, VRAM_KIND_FRAMES);
    if (s->opts.pool && n->decoder_charged)
        vram_pool_uncharge(s->opts.pool, n->decoder_charged, s->opts.owner, VRAM_KIND_DECODER);
    n->frames_charged = n->decoder_charged = 0;
    atomic_store(&s->decoder_bytes, 0);
}

/* Make the decoder (context pushed, lock held): measured and charged. */
static int create_decoder(vram__nvdec *n, const CUVIDEOFORMAT *f)
{
    vram_source *s = n->a->src;
    const char *url = s->url;
    CUVIDDECODECREATEINFO ci;
    memset(&ci, 0, sizeof ci);
    ci.ulWidth = f->coded_width;
    ci.ulHeight = f->coded_height;
    ci.ulMaxWidth = f->coded_width;
    ci.ulMaxHeight = f->coded_height;
    ci.ulNumDecodeSurfaces = f->min_num_decode_surfaces + s->opts.extra_surfaces;
    ci.CodecType = f->codec;
    ci.ChromaFormat = f->chroma_format;
    ci.ulCreationFlags = cudaVideoCreate_PreferCUVID;
    ci.bitDepthMinus8 = f->bit_depth_luma_minus8;
    ci.OutputFormat = cudaVideoSurfaceFormat_NV12;
    ci.DeinterlaceMode = f->progressive_sequence ? cudaVideoDeinterlaceMode_Weave
                                                 : cudaVideoDeinterlaceMode_Adaptive;
    ci.display_area.left = (short)f->display_area.left;
    ci.display_area.top = (short)f->display_area.top;
    ci.display_area.right = (short)f->display_area.right;
    ci.display_area.bottom = (short)f->display_area.bottom;
    unsigned w = (unsigned)(f->display_area.right - f->display_area.left);
    unsigned h = (unsigned)(f->display_area.bottom - f->display_area.top);
    ci.ulTargetWidth = w;
    ci.ulTargetHeight = h;
    ci.ulNumOutputSurfaces = s->opts.ring_frames;
    ci.vidLock = n->lock;

    pthread_mutex_lock(&create_mu);
    size_t free0 = 0, free1 = 0, total = 0;
    CUresult r = cu.mem_info(&free0, &total);
    if (r == CUDA_SUCCESS)
        r = cv->cuvidCreateDecoder(&n->dec, &ci);
    if (r == CUDA_SUCCESS)
        r = cu.mem_info(&free1, &total);
    pthread_mutex_unlock(&create_mu);
    if (r != CUDA_SUCCESS) {
        n->dec = NULL;
        return cuvid_fail(r, "cuvidCreateDecoder", url);
    }
    uint64_t measured = free0 > free1 ? (uint64_t)(free0 - free1) : 0;
    uint64_t frames = surface_bytes(w, h) * s->opts.ring_frames;
    if (frames > measured)
        frames = measured;
    n->coded_w = f->coded_width;
    n->coded_h = f->coded_height;
    n->width = w;
    n->height = h;
    n->display_left = f->display_area.left;
    n->display_top = f->display_area.top;
    n->decode_surfaces = (unsigned)ci.ulNumDecodeSurfaces;
    n->output_surfaces = (unsigned)ci.ulNumOutputSurfaces;
    int rc = 0;
    if (s->opts.pool && frames &&
        (rc = vram_pool_charge(s->opts.pool, frames, s->opts.owner, VRAM_KIND_FRAMES)) == 0)
        n->frames_charged = frames;
    if (!rc && s->opts.pool && measured > frames &&
        (rc = vram_pool_charge(s->opts.pool, measured - frames, s->opts.owner,
                               VRAM_KIND_DECODER)) == 0)
        n->decoder_charged = measured - frames;
    if (rc) {
        vram__fail_prefix(rc, "video source %s: its NVDEC decoder (%s measured): ", url,
                          vram__fmt_bytes((char[32]){0}, 32, measured));
        uncharge(n);
        pthread_mutex_lock(&create_mu);
        cv->cuvidDestroyDecoder(n->dec);
        pthread_mutex_unlock(&create_mu);
        n->dec = NULL;
        return rc;
    }
    atomic_store(&s->decoder_bytes, measured - frames);
    vram_log(VRAM_LOG_DEBUG,
             "video source %s: NVDEC %s %ux%u, %u decode and %u output surfaces: %llu bytes",
             url, codec_label(f->codec), w, h, n->decode_surfaces, n->output_surfaces,
             (unsigned long long)measured);
    return 0;
}

/* The parser's callbacks: they run inside cuvidParseVideoData, on the
 * reader's thread, with the lock held and the context pushed. A return of
 * 0 stops the parser. */
static int CUDAAPI on_sequence(void *user, CUVIDEOFORMAT *f)
{
    vram__nvdec *n = user;
    if (n->fatal)
        return 0;
    unsigned w = (unsigned)(f->display_area.right - f->display_area.left);
    unsigned h = (unsigned)(f->display_area.bottom - f->display_area.top);
    if (n->dec) {
        if (f->codec == n->codec && f->coded_width == n->coded_w &&
            f->coded_height == n->coded_h && w == n->width && h == n->height &&
            f->min_num_decode_surfaces + n->a->src->opts.extra_surfaces <= n->decode_surfaces)
            return (int)n->decode_surfaces;
        set_fatal(n, vram__fail(VRAM_EIO,
                                "video source %s: the frame size changed from %ux%u to %ux%u; "
                                "an NVDEC stream keeps the size it was opened with",
                                n->a->src->url, n->width, n->height, w, h));
        return 0;
    }
    int rc = check_caps(n, f);
    if (!rc)
        rc = create_decoder(n, f);
    if (rc) {
        set_fatal(n, rc);
        return 0;
    }
    return (int)n->decode_surfaces;
}

static int CUDAAPI on_decode(void *user, CUVIDPICPARAMS *pic)
{
    vram__nvdec *n = user;
    if (!n->dec || n->fatal)
        return 0;
    if (cv->cuvidDecodePicture(n->dec, pic) != CUDA_SUCCESS)
        atomic_fetch_add(&n->a->src->damaged, 1);
    return 1;
}

static int CUDAAPI on_display(void *user, CUVIDPARSERDISPINFO *d)
{
    vram__nvdec *n = user;
    if (!d)
        return 1;
    if (n->q_count == DISPLAY_QUEUE) { /* cannot happen: the queue is drained per packet */
        atomic_fetch_add(&n->a->src->damaged, 1);
        return 1;
    }
    n->queue[(n->q_head + n->q_count++) % DISPLAY_QUEUE] = *d;
    return 1;
}

/* A new parser (after a seek or a reopen the old one, which may have seen
 * the end, goes); the decoder stays. Lock held. */
static int make_parser(vram__nvdec *n)
{
    if (n->parser)
        cv->cuvidDestroyVideoParser(n->parser);
    n->parser = NULL;
    CUVIDPARSERPARAMS pp;
    memset(&pp, 0, sizeof pp);
    pp.CodecType = n->codec;
    pp.ulMaxNumDecodeSurfaces = 1; /* the sequence callback says how many */
    pp.ulClockRate = CLOCK_HZ;
    pp.ulErrorThreshold = 100;     /* damaged pictures are decoded and counted, as on the CPU */
    pp.ulMaxDisplayDelay = 0;      /* each picture as soon as it can be shown */
    pp.pUserData = n;
    pp.pfnSequenceCallback = on_sequence;
    pp.pfnDecodePicture = on_decode;
    pp.pfnDisplayPicture = on_display;
    CUresult r = cv->cuvidCreateVideoParser(&n->parser, &pp);
    if (r != CUDA_SUCCESS) {
        n->parser = NULL;
        return cuvid_fail(r, "cuvidCreateVideoParser", n->a->src->url);
    }
    return 0;
}

static void destroy_decoder(vram__nvdec *n)
{
    if (n->parser)
        cv->cuvidDestroyVideoParser(n->parser);
    n->parser = NULL;
    if (n->dec) {
        pthread_mutex_lock(&create_mu);
        cv->cuvidDestroyDecoder(n->dec);
        pthread_mutex_unlock(&create_mu);
    }
    n->dec = NULL;
    uncharge(n);
}

static int nv_init(vram__av_source *a)
{
    vram_source *s = a->src;
    int rc = vram__nvdec_available();
    if (rc)
        return vram__fail_prefix(rc, "video source %s: ", s->url);
    vram__nvdec *n = vram__calloc(1, sizeof *n);
    if (!n)
        return VRAM_EHOSTMEM;
    a->nv = n;
    n->a = a;
    n->slots = s->opts.ring_frames;
    if (pthread_mutex_init(&n->map_mu, NULL)) {
        a->nv = NULL;
        free(n);
        return vram__fail(VRAM_EHOSTMEM, "video source %s: cannot create a lock", s->url);
    }
    n->mapped = vram__calloc(n->slots, sizeof *n->mapped);
    if (!n->mapped || !(n->filtered = av_packet_alloc()))
        return VRAM_EHOSTMEM;
    n->ctx = s->opts.cuda_context ? (CUcontext)s->opts.cuda_context
                                  : (CUcontext)vram_device_context(s->opts.device);
    if (!n->ctx)
        return vram__fail(VRAM_ENOSYS, "video source %s: the device has no CUDA context", s->url);
    CUresult r = cv->cuvidCtxLockCreate(&n->lock, n->ctx);
    if (r != CUDA_SUCCESS) {
        n->lock = NULL;
        return cuvid_fail(r, "cuvidCtxLockCreate", s->url);
    }
    cu.push(n->ctx);
    r = cu.stream_create(&n->stream, 1 /* CU_STREAM_NON_BLOCKING */);
    CUcontext dummy;
    cu.pop(&dummy);
    if (r != CUDA_SUCCESS) {
        n->stream = NULL;
        return cu_fail(r, "cuStreamCreate", s->url);
    }
    return 0;
}

/* The input is open: the bitstream filter and the parser for its codec.
 * The decoder comes with the first sequence header (and stays across
 * reopens of the same stream). */
static int nv_open(vram__av_source *a)
{
    vram_source *s = a->src;
    vram__nvdec *n = a->nv;
    AVStream *st = a->fmt->streams[a->stream];
    const char *bsf_name;
    cudaVideoCodec codec;
    if (codec_of(st->codecpar->codec_id, &codec, &bsf_name))
        return vram__fail(VRAM_ENOSYS, "video source %s: NVDEC does not decode %s", s->url,
                          avcodec_get_name(st->codecpar->codec_id));
    if (n->dec && codec != n->codec)
        return vram__fail(VRAM_EIO, "video source %s: the codec changed from %s to %s", s->url,
                          codec_label(n->codec), codec_label(codec));
    n->codec = codec;
    n->matrix = st->codecpar->color_space;
    n->full_range = st->codecpar->color_range == AVCOL_RANGE_JPEG;
    if (bsf_name) {
        const AVBitStreamFilter *f = av_bsf_get_by_name(bsf_name);
        int err = f ? av_bsf_alloc(f, &n->bsf) : AVERROR_BSF_NOT_FOUND;
        if (err >= 0)
            err = avcodec_parameters_copy(n->bsf->par_in, st->codecpar);
        if (err >= 0) {
            n->bsf->time_base_in = st->time_base;
            err = av_bsf_init(n->bsf);
        }
        if (err < 0) {
            char why[128];
            av_bsf_free(&n->bsf);
            return vram__fail(VRAM_EPARSE, "video source %s: the %s filter: %s", s->url,
                              bsf_name, vram__av_err(err, why, sizeof why));
        }
    }
    enter(n);
    int rc = make_parser(n);
    leave(n);
    n->ended = 0;
    n->discontinuity = 1;
    return rc;
}

/* Parse one packet (NULL: the end, which flushes the parser's pictures). */
static int parse(vram__nvdec *n, const AVPacket *pkt)
{
    CUVIDSOURCEDATAPACKET cp;
    memset(&cp, 0, sizeof cp);
    if (pkt) {
        cp.payload = pkt->data;
        cp.payload_size = (tcu_ulong)pkt->size;
        if (pkt->pts != AV_NOPTS_VALUE) {
            n->timestamps = 1;
            cp.flags |= CUVID_PKT_TIMESTAMP;
            cp.timestamp = av_rescale_q(pkt->pts, n->a->tb, (AVRational){1, CLOCK_HZ});
        }
    } else {
        cp.flags = CUVID_PKT_ENDOFSTREAM;
    }
    if (n->discontinuity) {
        cp.flags |= CUVID_PKT_DISCONTINUITY;
        n->discontinuity = 0;
    }
    enter(n);
    CUresult r = cv->cuvidParseVideoData(n->parser, &cp);
    leave(n);
    if (n->fatal)
        return AVERROR_EXTERNAL;
    return r == CUDA_SUCCESS ? 0 : AVERROR_INVALIDDATA;
}

static int nv_send(vram__av_source *a, const AVPacket *pkt)
{
    vram__nvdec *n = a->nv;
    if (n->q_count)
        return AVERROR(EAGAIN);
    if (!pkt) {
        int err = 0;
        if (n->bsf) { /* what the filter still holds */
            av_bsf_send_packet(n->bsf, NULL);
            while (!err && av_bsf_receive_packet(n->bsf, n->filtered) == 0) {
                err = parse(n, n->filtered);
                av_packet_unref(n->filtered);
            }
        }
        if (!err)
            err = parse(n, NULL);
        n->ended = 1;
        return err;
    }
    if (!n->bsf)
        return parse(n, pkt);
    int err = av_bsf_send_packet(n->bsf, (AVPacket *)pkt);
    if (err < 0)
        return err;
    while ((err = av_bsf_receive_packet(n->bsf, n->filtered)) == 0) {
        int perr = parse(n, n->filtered);
        av_packet_unref(n->filtered);
        if (perr)
            return perr;
    }
    return err == AVERROR(EAGAIN) || err == AVERROR_EOF ? 0 : err;
}

static int nv_receive(vram__av_source *a)
{
    vram__nvdec *n = a->nv;
    if (n->fatal)
        return AVERROR_EXTERNAL;
    if (!n->q_count)
        return n->ended ? AVERROR_EOF : AVERROR(EAGAIN);
    n->held = n->queue[n->q_head];
    n->q_head = (n->q_head + 1) % DISPLAY_QUEUE;
    n->q_count--;
    a->pic_ts = n->timestamps
                    ? av_rescale_q(n->held.timestamp, (AVRational){1, CLOCK_HZ}, a->tb)
                    : AV_NOPTS_VALUE;
    a->pic_w = (int)n->width;
    a->pic_h = (int)n->height;
    return 0;
}

static int nv_fatal(vram__av_source *a)
{
    vram__nvdec *n = a->nv;
    return n->fatal ? vram__fail(n->fatal, "%s", n->fatal_msg) : 0;
}

static void unmap(vram__nvdec *n, uint32_t slot)
{
    pthread_mutex_lock(&n->map_mu);
    CUdeviceptr p = slot < n->slots ? n->mapped[slot] : 0;
    if (p)
        n->mapped[slot] = 0;
    pthread_mutex_unlock(&n->map_mu);
    if (!p)
        return;
    enter(n);
    cv->cuvidUnmapVideoFrame(n->dec, p);
    leave(n);
}

static int nv_deliver(vram__av_source *a, vram_frame *f)
{
    vram__nvdec *n = a->nv;
    const char *url = a->src->url;
    const CUVIDPARSERDISPINFO *d = &n->held;
    CUVIDPROCPARAMS vpp;
    memset(&vpp, 0, sizeof vpp);
    vpp.progressive_frame = d->progressive_frame;
    vpp.top_field_first = d->top_field_first;
    vpp.unpaired_field = d->repeat_first_field < 0;
    vpp.output_stream = n->stream;
    CUdeviceptr p = 0;
    unsigned pitch = 0;
    enter(n);
    CUVIDGETDECODESTATUS status;
    memset(&status, 0, sizeof status);
    CUresult r = cv->cuvidMapVideoFrame(n->dec, d->picture_index, &p, &pitch, &vpp);
    if (r == CUDA_SUCCESS)
        r = cu.stream_sync(n->stream);
    int bad = r == CUDA_SUCCESS &&
              cv->cuvidGetDecodeStatus(n->dec, d->picture_index, &status) == CUDA_SUCCESS &&
              (status.decodeStatus == cuvidDecodeStatus_Error ||
               status.decodeStatus == cuvidDecodeStatus_Error_Concealed);
    if (bad)
        cv->cuvidUnmapVideoFrame(n->dec, p);
    leave(n);
    if (r != CUDA_SUCCESS)
        return cuvid_fail(r, "cuvidMapVideoFrame", url);
    if (bad) {
        atomic_fetch_add(&a->src->damaged, 1);
        return VRAM__DECODE_SKIPPED;
    }
    pthread_mutex_lock(&n->map_mu);
    n->mapped[f->slot] = p;
    pthread_mutex_unlock(&n->map_mu);
    f->rgb = NULL;
    f->stride = 0;
    f->width = (int)n->width;
    f->height = (int)n->height;
    f->pitch = pitch;
    f->luma = p;
    f->chroma = p + (CUdeviceptr)pitch * vram__align_up(n->height, 2);
    f->matrix = (int16_t)n->matrix;
    f->full_range = (int16_t)n->full_range;
    return 0;
}

static void nv_drop(vram__av_source *a) { (void)a; }

static void nv_flush(vram__av_source *a)
{
    vram__nvdec *n = a->nv;
    n->q_count = 0;
    n->ended = 0;
    n->discontinuity = 1;
    if (n->bsf)
        av_bsf_flush(n->bsf);
    enter(n);
    if (make_parser(n))
        set_fatal(n, VRAM_EBACKEND);
    leave(n);
}

static void nv_close(vram__av_source *a)
{
    vram__nvdec *n = a->nv;
    if (!n) /* init failed */
        return;
    n->q_count = 0;
    av_bsf_free(&n->bsf);
}

static int nv_opened(vram__av_source *a)
{
    vram_source *s = a->src;
    vram__nvdec *n = a->nv;
    s->info.decode = VRAM_DECODE_NVDEC;
    s->info.device_frames = 1;
    s->info.decode_surfaces = n->decode_surfaces;
    s->info.output_surfaces = n->output_surfaces;
    s->info.frames_bytes = n->frames_charged;
    s->info.frame_bytes = n->output_surfaces ? n->frames_charged / n->output_surfaces : 0;
    s->info.decoder_bytes = n->decoder_charged;
    if (!s->opts.pool) { /* nothing charged: say what was measured */
        s->info.frames_bytes = surface_bytes(n->width, n->height) * n->output_surfaces;
        s->info.frame_bytes = surface_bytes(n->width, n->height);
        s->info.decoder_bytes = atomic_load(&s->decoder_bytes);
    }
    return 0;
}

static void nv_release(vram__av_source *a, vram_frame *f) { unmap(a->nv, f->slot); }

static void nv_fini(vram__av_source *a)
{
    vram__nvdec *n = a->nv;
    if (!n)
        return;
    for (uint32_t i = 0; n->mapped && i < n->slots; i++)
        unmap(n, i);
    if (n->lock) {
        enter(n);
        destroy_decoder(n);
        leave(n);
    }
    if (n->stream) {
        cu.push(n->ctx);
        cu.stream_destroy(n->stream);
        CUcontext dummy;
        cu.pop(&dummy);
    }
    if (n->lock)
        cv->cuvidCtxLockDestroy(n->lock);
    av_bsf_free(&n->bsf);
    av_packet_free(&n->filtered);
    free(n->mapped);
    pthread_mutex_destroy(&n->map_mu);
    free(n);
    a->nv = NULL;
}

const vram__av_decoder_ops vram__decode_nvdec_ops = {
    .name = "nvdec",
    .init = nv_init,
    .open = nv_open,
    .close = nv_close,
    .send = nv_send,
    .receive = nv_receive,
    .fatal = nv_fatal,
    .deliver = nv_deliver,
    .drop = nv_drop,
    .flush = nv_flush,
    .opened = nv_opened,
    .release = nv_release,
    .fini = nv_fini,
};
