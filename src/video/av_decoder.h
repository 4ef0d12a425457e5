/* src/video/av_decoder.h - how the libav source decodes: one ops table
 * that the reading loop (source_av.c) drives the same way for libavcodec
 * on the CPU (decode_cpu.c, frames RGB24 in host memory) and for NVDEC
 * (decode_nvdec.c, frames NV12 in device memory). The calls follow
 * libavcodec's send/receive model, with libav's error numbers for what
 * the loop handles (AVERROR(EAGAIN), AVERROR_EOF, a damaged packet) and a
 * separate `fatal` for what ends the stream (a pool's refusal, a decoder
 * the GPU cannot make). */
#ifndef VRAM_VIDEO_AV_DECODER_H
#define VRAM_VIDEO_AV_DECODER_H

#include <libavcodec/packet.h>

#include "vramkit/video.h"

struct vram__av_source;

#define VRAM__DECODE_SKIPPED 2

typedef struct vram__av_decoder_ops {
    const char *name;
    /* Once, when the source opens, before the input does. */
    int (*init)(struct vram__av_source *a);
    /* The input is open (a->fmt, a->stream): make the decoder for it. Called
     * at every open of the input (a reconnect, a loop that reopens); errors
     * name the URL. */
    int (*open)(struct vram__av_source *a);
    /* Close what open made (the input closes; held pictures go). */
    void (*close)(struct vram__av_source *a);
    /* A packet, or NULL for the end: 0, AVERROR(EAGAIN) (pictures must be
     * taken first), or another AVERROR for a packet it refused. */
    int (*send)(struct vram__av_source *a, const AVPacket *pkt);
    /* The next picture in display order, held by the decoder: 0 with
     * a->pic_ts, a->pic_w and a->pic_h set; AVERROR(EAGAIN) (it needs a
     * packet), AVERROR_EOF (drained), another AVERROR for a picture it could
     * not decode. Damaged pictures are counted and skipped here. */
    int (*receive)(struct vram__av_source *a);
    /* After an error of send or receive: the VRAM_E* code (its sentence
     * recorded) that ends the stream, or 0 when the error only damaged a
     * packet or a picture. */
    int (*fatal)(struct vram__av_source *a);
    /* The held picture into ring slot f (pixels, width, height, stride or
     * planes), and let it go: 0, VRAM__DECODE_SKIPPED when it turned out
     * damaged (counted, let go, nothing delivered), or a VRAM_E* code. */
    int (*deliver)(struct vram__av_source *a, vram_frame *f);
    /* Let the held picture go undelivered. */
    void (*drop)(struct vram__av_source *a);
    /* The input was sought back to its start: forget what is in flight. */
    void (*flush)(struct vram__av_source *a);
    /* The first picture is held: check that it can be delivered and fill
     * the source's info (decode, device_frames, decoder_bytes, surfaces). */
    int (*opened)(struct vram__av_source *a);
    /* A delivered frame's slot goes back to the ring (may be NULL). Any
     * thread. */
    void (*release)(struct vram__av_source *a, vram_frame *f);
    /* The source closes: everything is given back (the input is closed). */
    void (*fini)(struct vram__av_source *a);
} vram__av_decoder_ops;

extern const vram__av_decoder_ops vram__decode_cpu_ops;
extern const vram__av_decoder_ops vram__decode_nvdec_ops;

/* Whether this build and machine can decode with NVDEC at all: 0, or
 * VRAM_ENOSYS with the reason (no CUDA in the build, no driver, no
 * libnvcuvid). Loads the libraries once. */
int vram__nvdec_available(void);

#endif
