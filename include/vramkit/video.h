/* vramkit/video.h - video sources and frames (libvramkit-service): files and
 * network streams decoded on the CPU (libavformat, libavcodec, libswscale),
 * and a synthetic source that needs nothing; every decoded frame lands, as
 * packed RGB24, in a fixed ring of frame buffers the source takes from a
 * pool (kind VRAM_KIND_FRAMES, charged to the stream's owner) when it is
 * opened; the decoder's own picture buffers come from the same pool (kind
 * VRAM_KIND_DECODER). Then the letterbox preprocessing that turns a frame
 * into a model's input.
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

#include "vramkit/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One decoded frame in the source's ring. */
typedef struct vram_frame {
    uint8_t *rgb;        /* packed RGB24: height rows of `stride` bytes (width x 3
                            rounded up to 64; the bytes past width x 3 are not set) */
    int width, height;
    size_t stride;
    int64_t index;       /* 0-based, in display order, across loops and reconnects */
    double pts_s;        /* presentation time: seconds since the stream's first frame */
    uint64_t decoded_ns; /* monotonic clock (CLOCK_MONOTONIC, ns) when it was decoded
                            (with realtime: when it was due and handed out) */
    uint32_t slot;       /* its place in the ring (the source's) */
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_frame;

typedef struct vram_source vram_source;

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
                                 from the first frame (stats say what they are) */
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

#ifdef __cplusplus
}
#endif
#endif
