/* src/pipeline/blazeface_internal.h - what BlazeFace's decoder
 * (blazeface.c) shares with its anchor generation (blazeface_anchors.c):
 * MediaPipe's SSD anchors for a model input size. */
#ifndef VRAM_PIPELINE_BLAZEFACE_INTERNAL_H
#define VRAM_PIPELINE_BLAZEFACE_INTERNAL_H

#include <stddef.h>

/* The anchor centres of the model taking size x size images (256: the back
 * model, 128: the front one), normalized to [0, 1], as x, y pairs in the
 * order of the model's outputs (the stride-16 tensor's 512, then the
 * stride-32 one's 384, for the back model). Writes at most cap pairs and
 * returns how many there are; 0 for another size. */
size_t vram__blazeface_anchors(int size, float (*xy)[2], size_t cap);

#endif
