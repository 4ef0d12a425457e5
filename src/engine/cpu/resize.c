/* src/engine/cpu/resize.c - the CPU reference executor's Resize kernel
 * (float32, opset 11+ semantics; see kernels_elem.h): nearest and N-linear
 * interpolation with every coordinate transformation mode the engine
 * accepts. Each axis gets a table mapping output coordinates to source
 * element offsets and a weight, so the per-element work is a sum over the
 * 2^k corners of the k interpolated axes. */
#include <math.h>
#include <stdlib.h>

#include "base/internal.h"
#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/scalar.h"

/* Where output coordinate o of an axis (in -> out elements, scale) falls in
 * the input, as ONNX's coordinate_transformation_mode says, computed in
 * float as ONNX Runtime does: (1 + 0.5) / 0.6f - 0.5 is exactly 2 in float
 * but 1.99999... in double, and nearest rounding sees the difference. */
static double source_coord(int ctm, int64_t o, float scale, int64_t in, int64_t out)
{
    float x = (float)o;
    switch (ctm) {
    case 0: /* half_pixel */
        return (double)((x + 0.5f) / scale - 0.5f);
    case 1: /* asymmetric */
        return (double)(x / scale);
    case 2: /* align_corners: over the output extent */
        return out > 1 ? (double)(x * (float)(in - 1) / (float)(out - 1)) : 0.0;
    case 3: /* pytorch_half_pixel */
        return out > 1 ? (double)((x + 0.5f) / scale - 0.5f) : 0.0;
    default: /* 4: tf_half_pixel_for_nearest */
        return (double)((x + 0.5f) / scale);
    }
}

typedef struct tap {
    int64_t off0, off1; /* element offsets (index * stride) of the two neighbours */
    double w;           /* weight of off1; off0 gets 1 - w */
} tap;

uint64_t vram__cpu_resize_scratch(const vram__shape *ys)
{
    uint64_t n = 0;
    for (int d = 0; d < ys->rank && d < VRAM__MAX_RANK; d++)
        n += ys->dim[d] > 0 ? (uint64_t)ys->dim[d] : 0;
    return n * sizeof(tap);
}

int vram__resize_check(int mode, int ctm, int nearest_mode, const vram__shape *xs,
                       const float *scales, const vram__shape *ys)
{
    if (mode == 2)
        return vram__fail(VRAM_ENOSYS, "Resize: cubic mode is not supported");
    if (mode != 0 && mode != 1)
        return vram__fail(VRAM_EINVAL, "Resize: unknown mode %d (0 nearest, 1 linear)", mode);
    if (ctm < 0 || ctm > 4)
        return vram__fail(VRAM_EINVAL, "Resize: unknown coordinate_transformation_mode %d", ctm);
    if (nearest_mode < 0 || nearest_mode > 3)
        return vram__fail(VRAM_EINVAL, "Resize: unknown nearest_mode %d", nearest_mode);
    if (xs->rank != ys->rank || xs->rank < 0 || xs->rank > VRAM__MAX_RANK)
        return vram__fail(VRAM_EINVAL, "Resize: input rank %d and output rank %d differ", xs->rank, ys->rank);
    int r = xs->rank;
    for (int d = 0; d < r; d++) {
        if (!(scales[d] > 0.0f) || isinf(scales[d]))
            return vram__fail(VRAM_EINVAL, "Resize: scale %g of axis %d is not a positive number",
                              (double)scales[d], d);
        if (xs->dim[d] < 0 || ys->dim[d] < 0 || (xs->dim[d] == 0 && ys->dim[d] > 0))
            return vram__fail(VRAM_EINVAL, "Resize: cannot resize axis %d from %lld to %lld elements", d,
                              (long long)xs->dim[d], (long long)ys->dim[d]);
    }
    return 0;
}

int vram__cpu_resize(int mode, int ctm, int nearest_mode, const vram__shape *xs, const float *x,
                     const float *scales, const vram__shape *ys, float *y, void *scratch)
{
    int rc = vram__resize_check(mode, ctm, nearest_mode, xs, scales, ys);
    if (rc)
        return rc;
    int r = xs->rank;
    int64_t total = vram__cpu_elems(ys);
    if (total <= 0)
        return 0;

    int64_t ntaps = 0, xst[VRAM__MAX_RANK], acc = 1;
    for (int d = r - 1; d >= 0; d--) {
        xst[d] = acc;
        acc *= xs->dim[d];
        ntaps += ys->dim[d];
    }
    tap *taps = scratch, *own = NULL;
    if (!taps)
        taps = own = vram__calloc((size_t)ntaps, sizeof *taps);
    if (!taps)
        return vram__fail_prefix(VRAM_EHOSTMEM, "Resize: ");
    tap *axis_taps[VRAM__MAX_RANK];
    int interp[VRAM__MAX_RANK], k = 0; /* the axes interpolated linearly */
    tap *t = taps;
    for (int d = 0; d < r; d++) {
        int64_t in = xs->dim[d], out = ys->dim[d];
        int linear = mode == 1 && !(scales[d] == 1.0f && in == out);
        axis_taps[d] = t;
        if (linear)
            interp[k++] = d;
        for (int64_t o = 0; o < out; o++, t++) {
            double c = source_coord(ctm, o, scales[d], in, out);
            if (mode == 0) {
                double s = vram__nearest_round(nearest_mode, c);
                int64_t i = s < 0.0 ? 0 : s > (double)(in - 1) ? in - 1 : (int64_t)s;
                t->off0 = t->off1 = i * xst[d];
            } else if (!linear) {
                t->off0 = t->off1 = o * xst[d];
            } else {
                /* Outside the input the edge value continues. */
                c = c < 0.0 ? 0.0 : c > (double)(in - 1) ? (double)(in - 1) : c;
                int64_t i0 = (int64_t)c, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
                t->off0 = i0 * xst[d];
                t->off1 = i1 * xst[d];
                t->w = c - (double)i0;
            }
        }
    }

    int64_t idx[VRAM__MAX_RANK] = {0};
    for (int64_t o = 0; o < total; o++) {
        int64_t base = 0;
        for (int d = 0; d < r; d++)
            base += axis_taps[d][idx[d]].off0;
        if (k == 0) {
            y[o] = x[base];
        } else {
            double sum = 0.0;
            for (unsigned corner = 0; corner < (1u << k); corner++) {
                double w = 1.0;
                int64_t off = base;
                for (int j = 0; j < k; j++) {
                    const tap *tp = &axis_taps[interp[j]][idx[interp[j]]];
                    if (corner & (1u << j)) {
                        w *= tp->w;
                        off += tp->off1 - tp->off0;
                    } else {
                        w *= 1.0 - tp->w;
                    }
                }
                if (w != 0.0)
                    sum += w * (double)x[off];
            }
            y[o] = (float)sum;
        }
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < ys->dim[d])
                break;
            idx[d] = 0;
        }
    }
    free(own);
    return 0;
}
