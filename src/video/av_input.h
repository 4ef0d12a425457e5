/* src/video/av_input.h - the libav source's state, shared by its opening
 * and closing of the input (av_input.c: the demuxer, the best video
 * stream, its decoder, timeouts and interruption) and its reading loop
 * (source_av.c: decoding, loops, reconnects, timestamps). */
#ifndef VRAM_VIDEO_AV_INPUT_H
#define VRAM_VIDEO_AV_INPUT_H

#include <libavformat/avformat.h>

#include "av_decoder.h"
#include "av_internal.h"
#include "source_internal.h"

typedef struct vram__av_source {
    vram_source *src;
    AVFormatContext *fmt;     /* NULL while closed (between reconnects) */
    int stream;
    AVRational tb;
    AVPacket *pkt;
    const vram__av_decoder_ops *decoder;
    int have_frame;           /* the decoder holds a picture not yet delivered */
    int64_t pic_ts;           /* its timestamp in tb (AV_NOPTS_VALUE: none) */
    int pic_w, pic_h;         /* and size */
    /* The CPU decoder's (decode_cpu.c). */
    AVCodecContext *dec;
    AVFrame *frame;
    int draining;             /* the decoder was sent the end */
    int read_errors;          /* consecutive read errors of a file */
    char read_error[128];     /* the last one, for messages */
    uint64_t deadline_ns;     /* network: the current read gives up then (0: none) */
    vram__av_buffers bufs;
    int bufs_made;
    vram__av_scaler scaler;
    /* NVDEC's (decode_nvdec.c). */
    struct vram__nvdec *nv;

    /* Timestamps: pts_s = pass_base_s + (ts - pass_first_ts) x tb. A pass
     * is the input from its start (open, loop, reconnect) to its end. */
    int64_t pass_first_ts;    /* AV_NOPTS_VALUE until the pass's first frame */
    int64_t pass_frames;
    double pass_base_s;
    double last_pts_s;
    double frame_dur_s;       /* 1 / fps, or a guess */
    int64_t delivered;
} vram__av_source;

/* Whether the URL names a network stream (scheme://, not file://). */
int vram__av_is_network(const char *url);

/* Open the input: demuxer (with the interrupt callback and, for rtsp, the
 * transport), the best video stream and its decoder (a->decoder's open). Errors name the URL:
 * VRAM_EIO (cannot open or read it), VRAM_EPARSE (not video, no decoder).
 * On error nothing of the input is kept. */
int vram__av_input_open(vram__av_source *a);
/* Close the decoder (a->decoder's close) and the demuxer. */
void vram__av_input_close(vram__av_source *a);
/* A libav error's sentence ("Invalid data found when processing input"). */
const char *vram__av_err(int err, char *buf, size_t cap);

#endif
