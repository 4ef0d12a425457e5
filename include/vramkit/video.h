/* vramkit/video.h - video sources and frames (libvramkit-service): files and
 * network streams decoded on the CPU (libavformat, libavcodec, libswscale)
 * or by NVDEC on the GPU (vram_decode below), and a synthetic source that
 * needs nothing. On the CPU every decoded frame lands, as packed RGB24, in
 * a fixed ring of frame buffers the source takes from a pool (kind
 * VRAM_KIND_FRAMES, charged to the stream's owner) when it is opened; the
 * decoder's own picture buffers come from the same pool (kind
 * VRAM_KIND_DECODER). With NVDEC a frame is the decoder's output surface,
 * NV12 in device memory, and the decoder's device memory is charged to the
 * owner. Then the letterbox preprocessing that turns a frame into a
 * model's input: on the CPU for RGB24 frames, by one kernel for a batch of
 * NVDEC frames. The synthetic source always makes RGB24 frames on the
 * CPU.
 *
 * URLs: a path (mp4, mkv, ts, raw .h264/.hevc: anything libavformat reads),
 * rtsp://, http://, udp:// (anything libavformat opens; rtsp goes over UDP,
 * and over TCP when opening over UDP fails), or
 * "synthetic:WxH[@FPS][,frames=N]" (e.g. synthetic:640x480@30; W and H in
 * 16..8192, FPS in (0, 1000], 30 if left out; moving patterns: a gradient
 * and a bright square crossing the frame, the same for the same frame
 * index; pts index / FPS; it never ends, or with frames=N ends after N
 * frames, or with `loop` starts again after each N, counted as a loop; a
 * malformed one is VRAM_EINVAL naming it).
 *
 * Pacing: a source delivers frames as fast as its reader takes them, or,
 * with `realtime`, no sooner than its presentation times say (what a camera
 * does). With `loop`, a file starts again at its end (frame indices keep
 * counting, pts keep rising). Network sources reconnect when the peer goes
 * away (the stream ends, a read fails, or nothing comes for open_timeout_s),
 * waiting reconnect_initial_s, then twice as long each time up to
 * reconnect_max_s; each successful reconnect is counted. They give up after
 * 10 failed attempts in a row, or once attempts have gone on for 60 s
 * without a frame between them: vram_source_next then fails with VRAM_EIO
 * naming the URL. A frame size that grows past the ring's buffers (after a
 * reconnect, say) fails the stream the same way. A damaged packet or frame
 * (a decode error, a picture the decoder marks corrupt) is counted and
 * skipped; a file that ends early ends the stream as its end.
 *
 * Opening decodes the first frame (a file or stream that yields none is
 * refused), which fixes the frame size, and so the ring, and the estimate
 * of the decoder's buffers. The decoder's picture buffers come from the
 * pool and are recycled: their bytes grow to what the decoder holds at
 * once (references, reordering, one per frame thread) and stay there
 * until close (a 1080p H.264 stream with B-frames: 5 pictures of 3 MiB
 * with one decoder thread, 8 with four).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). Opening refuses a missing path, an input that is not
 * video, an unsupported codec or an unreachable server with VRAM_EIO or
 * VRAM_EPARSE and a sentence naming the URL; frames that do not fit the
 * owner's budget or the pool with VRAM_EBUDGET or VRAM_ENOMEM (nothing is
 * kept then). The caller closes a source with vram_source_close, which
 * gives back every byte it took from the pool. A source is read by one
 * thread at a time; vram_source_interrupt may be called from any thread.
 * Frames belong to the source: valid until released, and released before
 * the source is closed. */
#ifndef VRAMKIT_VIDEO_H
#define VRAMKIT_VIDEO_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/device.h"
#include "vramkit/pool.h"
#include "vramkit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One decoded frame in the source's ring. */
typedef struct vram_frame {
    uint8_t *rgb;        /* packed RGB24: height rows of `stride` bytes (the width
                            rounded up to 16 pixels, x 3, rounded up to 64 bytes; the
                            bytes past width x 3 are not set) */
    int width, height;
    size_t stride;
    int64_t index;       /* 0-based, in display order, across loops and reconnects */
    double pts_s;        /* presentation time: seconds since the stream's first frame */
    uint64_t decoded_ns; /* monotonic clock (CLOCK_MONOTONIC, ns) when it was decoded
                            (with realtime: when it was due and handed out) */
    uint32_t slot;       /* its place in the ring (the source's) */
    /* Frames decoded by NVDEC (vram_source_info.device_frames): NV12 in
     * device memory of the source's CUDA context, `rgb` NULL and stride 0:
     * the luma plane (height rows of `pitch` bytes) at `luma`, the chroma
     * plane (height / 2 rows of U, V pairs, `pitch` bytes apart) at
     * `chroma`. 0 for frames in host memory. */
    uint64_t luma, chroma; /* CUdeviceptr */
    size_t pitch;
    int16_t matrix;      /* colour matrix of the YUV it came from (AVColorSpace
                            numbering: 1 BT.709, 5/6 BT.601, 9 BT.2020; 2 unknown,
                            converted as BT.601) */
    int16_t full_range;  /* 1: YUV in 0..255 (JPEG range); 0: 16..235 */
    uint32_t reserved;   /* room for later fields (zero) */
} vram_frame;

typedef struct vram_source vram_source;

/* Where a source decodes.
 *
 * VRAM_DECODE_CPU: libavcodec; frames are RGB24 in host memory, in a ring
 * taken from `pool` (host memory).
 *
 * VRAM_DECODE_NVDEC: libavformat demuxes (H.264 and HEVC go to Annex B),
 * and NVIDIA's parser and a decoder of the GPU's (nvcuvid, loaded at run
 * time) decode on the device's shared context (or `cuda_context`), under
 * one cuvidCtxLock per source. The decoder has the parser's minimum of
 * decode surfaces plus extra_surfaces, and ring_frames output surfaces:
 * a frame is an output surface mapped (NV12 in device memory) until it is
 * released, so the ring is the output surfaces and the source allocates
 * no frame buffers. The device memory the driver takes for the decoder is
 * measured when it is created (the free memory before and after, with
 * decoder creations and destructions serialised in the process) and
 * charged to `owner` of `pool` (a pool on that device): the output
 * surfaces' share as kind frames, the rest as kind decoder; it goes back
 * when the source closes. A codec, bit depth, chroma format or frame size
 * the GPU's decoders do not take is refused (VRAM_ENOSYS naming it and the
 * limit); no usable driver or libnvcuvid is VRAM_ENOSYS with the reason.
 *
 * VRAM_DECODE_AUTO: NVDEC when a device is given and NVDEC takes the
 * stream, else the CPU (vram_source_info.fallback says why; `pool` must
 * then be host memory, so a caller that passes a device pool gets the
 * refusal instead of a CPU fallback into device memory: see the service's
 * auto, which opens the CPU source with its host pool). */
typedef enum vram_decode {
    VRAM_DECODE_CPU = 0,
    VRAM_DECODE_NVDEC = 1,
    VRAM_DECODE_AUTO = 2
} vram_decode;

/* "cpu", "nvdec", "auto" (NULL for another value), and back (VRAM_EINVAL
 * naming the text otherwise). */
VRAM_API const char *vram_decode_name(vram_decode decode);
VRAM_API int vram_decode_parse(const char *name, vram_decode *out);

typedef struct vram_source_opts {
    uint32_t size; /* sizeof(vram_source_opts), which vram_source_opts_init sets; 0
                      reads as this version. The library reads no further than it says. */
    const char *url;          /* see above (copied) */
    vram_pool *pool;          /* where frames and decoder buffers come from; host memory
                                 (the frames are written by the CPU). Borrowed: it must
                                 outlive the source */
    vram_owner owner;         /* whose budget they count against */
    uint32_t ring_frames;     /* frame buffers in the ring (2..1024); 0: 4 */
    int realtime;             /* pace to the presentation times */
    int loop;                 /* files: start again at the end */
    int decoder_threads;      /* libavcodec threads per decoder (0..64); 0: 1 */
    double reconnect_initial_s; /* network: first wait before reconnecting; 0: 0.5 */
    double reconnect_max_s;   /* network: longest wait; 0: 8 */
    double open_timeout_s;    /* network: give up opening or reading after this (a
                                 read that waits longer counts as the peer gone;
                                 rtsp may try UDP, then TCP); 0: 5 */
    vram_decode decode;       /* where pictures are decoded (below); 0: the CPU */
    vram_device *device;      /* nvdec and auto: the GPU whose shared context the
                                 decoder is made on (vramkit/device.h); borrowed, it
                                 must outlive the source */
    void *cuda_context;       /* nvdec: a CUcontext of the caller's to use instead of
                                 the device's shared one (then `device` may be NULL) */
    uint32_t extra_surfaces;  /* nvdec: decode surfaces beyond the parser's minimum
                                 (0..32); 0: none */
} vram_source_opts;

/* Defaults as above. Returns 0, or VRAM_EINVAL for a NULL opts. */
VRAM_API int vram_source_opts_init(vram_source_opts *opts);

/* What a source is, known once it is open. */
typedef struct vram_source_info {
    int width, height;        /* of its frames */
    double fps;               /* nominal frame rate (0: unknown) */
    char codec[32];           /* "h264", "hevc", "synthetic", ... */
    int network;              /* 1 for rtsp/http/udp: it reconnects */
    int seekable;             /* a file that can loop */
    uint64_t frame_bytes;     /* one frame buffer, as allocated */
    uint64_t frames_bytes;    /* the ring: ring_frames x frame_bytes */
    uint64_t decoder_bytes;   /* the decoder's picture buffers, as estimated at open
                                 from the first frame (stats say what they are);
                                 nvdec: the decoder's device memory as measured,
                                 less the output surfaces (frames_bytes) */
    vram_decode decode;       /* how it decodes: VRAM_DECODE_CPU or _NVDEC */
    int device_frames;        /* frames are NV12 in device memory (nvdec) */
    uint32_t decode_surfaces; /* nvdec: the decoder's decode surfaces */
    uint32_t output_surfaces; /* nvdec: its output surfaces (the ring) */
    char fallback[192];       /* auto on the CPU: why not NVDEC ("" otherwise) */
    uint64_t reserved[4];
} vram_source_info;

/* Counters, read at any time from any thread. */
typedef struct vram_source_stats {
    uint64_t frames;          /* decoded and delivered */
    uint64_t damaged;         /* packets or frames the decoder refused, skipped */
    uint64_t reconnects;      /* network: successful reconnects */
    uint64_t loops;           /* files: times it started again */
    uint64_t decoder_bytes;   /* the decoder's buffers from the pool now */
    uint64_t reserved[4];
} vram_source_stats;

/* Open: probe the URL, open its decoder, take the ring from the pool. On
 * error *out is NULL and nothing is kept. */
VRAM_API int vram_source_open(const vram_source_opts *opts, vram_source **out);
VRAM_API int vram_source_info_get(const vram_source *source, vram_source_info *out);
VRAM_API int vram_source_stats_get(vram_source *source, vram_source_stats *out);

/* The next frame, waiting for it (decoding, pacing, reconnecting). 0 with
 * *frame set; 1 at the end of the stream (a file's end without loop, or
 * vram_source_interrupt); a negative code when the stream failed (a
 * network source that could not reconnect within its attempts is
 * VRAM_EIO naming it). Waits while every ring slot is held: release frames
 * to keep it going. */
VRAM_API int vram_source_next(vram_source *source, vram_frame **frame);

/* Give a frame's slot back to the ring. NULL is accepted. */
VRAM_API void vram_source_release(vram_source *source, vram_frame *frame);

/* Make a waiting or later vram_source_next return 1 (the end) soon: for
 * removing a stream or shutting down. Any thread. */
VRAM_API void vram_source_interrupt(vram_source *source);

/* Close: frees the ring and the decoder's buffers (back to the pool), the
 * decoder and the demuxer. VRAM_EBUSY (nothing changes) while frames are
 * held. NULL is accepted. */
VRAM_API int vram_source_close(vram_source *source);

/* ---- preprocessing: a frame as a model's input ---- */

typedef enum vram_layout {
    VRAM_LAYOUT_NHWC = 0,     /* [N, H, W, C] (BlazeFace's) */
    VRAM_LAYOUT_NCHW = 1      /* [N, C, H, W] */
} vram_layout;

/* How a frame becomes one image of a model's float input. */
typedef struct vram_letterbox {
    int width, height;        /* the model's input size (1..4096 each) */
    vram_layout layout;
    int bgr;                  /* channels in B, G, R order instead of R, G, B */
    float scale[3];           /* value = (pixel / 255) * scale[c] + bias[c], c the
                                 model's channel (in its order: B first with bgr);
                                 BlazeFace: 2 and -1, values in [-1, 1] */
    float bias[3];
    float pad;                /* value of the bars (after scale and bias; BlazeFace:
                                 -1, black, as MediaPipe pads) */
} vram_letterbox;

/* Where the frame sits in the model's input: input = frame * scale +
 * offset, per axis (for mapping results back to source pixels). */
typedef struct vram_letterbox_map {
    float scale;              /* model pixels per source pixel (both axes) */
    float offset_x, offset_y; /* of the frame's top-left corner, in model pixels */
} vram_letterbox_map;

/* Resize `frame` keeping its aspect (bilinear), centre it with bars of
 * `pad`, convert and normalize, into `dst` (width x height x 3 floats, in
 * the layout asked; the caller's memory, e.g. an execution context's input
 * at one batch index). Allocates nothing. VRAM_EINVAL for NULL or
 * inconsistent arguments (map may be NULL).
 *
 * Geometry, for a w x h frame into a W x H input: s = min(W / w, H / h);
 * the frame covers rw x rh = round(w s) x round(h s) pixels (to nearest)
 * from (ox, oy) = ((W - rw) / 2, (H - rh) / 2) rounded down to whole
 * pixels; the map says s, ox and oy. Input pixel (x, y) takes the frame's
 * bilinear sample at ((x - ox + 0.5) / s - 0.5, (y - oy + 0.5) / s - 0.5),
 * clamped to the frame (pixel centres aligned); the others are bars. */
VRAM_API int vram_letterbox_frame(const vram_letterbox *lb, const uint8_t *rgb, int width,
                                  int height, size_t stride, float *dst,
                                  vram_letterbox_map *map);

/* Most frames one vram_letterbox_frames_cuda launch takes. */
#define VRAM_LETTERBOX_CUDA_MAX 64

/* The same for `n` NVDEC frames (1..VRAM_LETTERBOX_CUDA_MAX,
 * vram_source_info.device_frames) at once, by one kernel on `stream` (a
 * CUstream of the frames' context, current on the calling thread; NULL:
 * its default stream): each frame's YUV converted to RGB with its matrix
 * and range as the CPU path converts (BT.601 when unknown), then resized,
 * centred and normalized as above, frame i into dst + i x (width x height
 * x 3) floats of device memory (an execution context's input binding,
 * say; vram_exec_input_binding). maps (may be NULL) gets each frame's
 * placement. Queued: it returns once launched; the frames must stay held,
 * and dst unread, until the stream has run it. The first call in a context
 * loads the kernels into it (kept until the process ends); after that it
 * allocates nothing. VRAM_EINVAL for NULL or inconsistent arguments or a
 * host frame, VRAM_ENOSYS without CUDA, VRAM_EBACKEND for a failed launch. */
VRAM_API int vram_letterbox_frames_cuda(const vram_letterbox *lb, vram_frame *const *frames,
                                        unsigned n, void *dst, vram_stream stream,
                                        vram_letterbox_map *maps);

/* Copy an NVDEC frame's pixels to host memory as NV12: height luma rows,
 * then height / 2 (rounded up) chroma rows, each dst_pitch bytes apart
 * (at least the width): for snapshots, checks and tests. Its context must
 * be current on the calling thread; waits for the copy. VRAM_EINVAL for a
 * NULL or host frame or a short pitch, VRAM_ENOSYS without a driver,
 * VRAM_EBACKEND for a failed copy. */
VRAM_API int vram_frame_copy_nv12(const vram_frame *frame, uint8_t *dst, size_t dst_pitch);

/* An NV12 frame's pixels (in host memory: luma rows then chroma rows, each
 * `pitch` bytes apart, as copied from a device frame) as packed RGB24
 * (`stride` bytes a row), converted as the kernels convert; for snapshots.
 * VRAM_EINVAL for NULL or inconsistent arguments. */
VRAM_API int vram_nv12_to_rgb(const uint8_t *luma, const uint8_t *chroma, size_t pitch,
                              int width, int height, int matrix, int full_range, uint8_t *rgb,
                              size_t stride);

#ifdef __cplusplus
}
#endif
#endif
