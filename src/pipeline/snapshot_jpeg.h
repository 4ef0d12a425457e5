/* src/pipeline/snapshot_jpeg.h - annotated JPEG snapshots of a stream's
 * frames: faces drawn onto the RGB picture, TurboJPEG encoding into the
 * caller's buffer (4:2:0, nothing allocated per picture) and an atomic
 * write of the file (snapshot_jpeg.c). */
#ifndef VRAM_PIPELINE_SNAPSHOT_JPEG_H
#define VRAM_PIPELINE_SNAPSHOT_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit/blazeface.h"

/* A TurboJPEG compressor: one thread at a time. */
typedef struct vram__jpeg_encoder vram__jpeg_encoder;

/* VRAM_EINVAL for a NULL out, VRAM_EHOSTMEM when TurboJPEG cannot start
 * (*out is NULL then). */
int vram__jpeg_encoder_create(vram__jpeg_encoder **out);
/* NULL accepted. */
void vram__jpeg_encoder_destroy(vram__jpeg_encoder *e);

/* The largest JPEG a width x height picture gives at 4:2:0 (TurboJPEG's
 * bound, whatever the quality); 0 for a size it cannot encode. */
size_t vram__jpeg_bound(int width, int height);

/* Draw the boxes (2 pixels wide, green) and keypoints (5 x 5 filled
 * squares, red) of n faces onto the packed RGB picture in place, clipped
 * to it; faces with coordinates that are not finite are skipped. */
void vram__draw_faces(uint8_t *rgb, int width, int height, size_t stride, const vram_face *faces,
                      size_t n);

/* Encode the packed RGB picture at quality 1..100 into buf (cap bytes, at
 * least vram__jpeg_bound) without allocating; *len the JPEG's bytes.
 * VRAM_EINVAL for NULL or inconsistent arguments, VRAM_EIO with
 * TurboJPEG's sentence when it fails. */
int vram__jpeg_encode(vram__jpeg_encoder *e, const uint8_t *rgb, int width, int height,
                      size_t stride, int quality, uint8_t *buf, size_t cap, size_t *len);

/* Write len bytes as DIR/NAME atomically: into DIR/NAME.tmp, then renamed
 * over DIR/NAME, so readers see the old file or the whole new one (no
 * fsync: a snapshot need not outlive a crash). VRAM_EIO naming the path
 * on failure (the .tmp file removed); VRAM_EINVAL for NULL arguments or a
 * NAME with a slash. */
int vram__jpeg_write_file(const char *dir, const char *name, const uint8_t *buf, size_t len);

#endif
