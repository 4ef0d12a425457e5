/* src/pipeline/blazeface_anchors.c - MediaPipe's SSD anchors
 * (SsdAnchorsCalculator) for the two BlazeFace models: 4 layers, one
 * aspect ratio (1.0) and the interpolated scale, so two anchors per cell
 * and layer; consecutive layers of one stride share their cells (their
 * anchors follow each other in a cell). With fixed_anchor_size every
 * anchor is 1 x 1, so only the centres matter: ((x + 0.5) / fw,
 * (y + 0.5) / fh) for cell (x, y) of a fw x fh = ceil(size / stride) map,
 * cells row by row. min_scale and max_scale only size anchors that are not
 * fixed, and play no part here. */
#include <math.h>

#include "blazeface_internal.h"

#define LAYERS 4
#define ANCHOR_OFFSET 0.5f
/* Anchors per cell and layer: aspect ratio 1.0, and the interpolated scale
 * (interpolated_scale_aspect_ratio 1.0). */
#define PER_LAYER 2

static const struct {
    int size;
    int strides[LAYERS];
} models[] = {
    {256, {16, 32, 32, 32}}, /* face_detection_back */
    {128, {8, 16, 16, 16}},  /* face_detection_front */
};

size_t vram__blazeface_anchors(int size, float (*xy)[2], size_t cap)
{
    const int *strides = NULL;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        if (models[m].size == size)
            strides = models[m].strides;
    if (!strides)
        return 0;
    size_t n = 0;
    for (int layer = 0; layer < LAYERS;) {
        int last = layer, per_cell = 0;
        while (last < LAYERS && strides[last] == strides[layer]) {
            per_cell += PER_LAYER;
            last++;
        }
        int side = (int)ceilf((float)size / (float)strides[layer]);
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++)
                for (int k = 0; k < per_cell; k++, n++)
                    if (n < cap) {
                        xy[n][0] = ((float)x + ANCHOR_OFFSET) / (float)side;
                        xy[n][1] = ((float)y + ANCHOR_OFFSET) / (float)side;
                    }
        layer = last;
    }
    return n;
}
