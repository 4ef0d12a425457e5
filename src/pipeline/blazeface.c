/* src/pipeline/blazeface.c - BlazeFace's outputs decoded into faces
 * (vramkit/blazeface.h), as MediaPipe's face detection graphs do it:
 * TensorsToDetections (scores clipped to +-100 and put through the
 * sigmoid; boxes x, y, w, h and keypoints x, y in model pixels relative to
 * the anchor's centre: x_scale = y_scale = w_scale = h_scale = the input
 * size, anchors 1 x 1), then NonMaxSuppression with the WEIGHTED algorithm
 * and IoU overlap.
 *
 * One departure: MediaPipe's weighted suppression stops altogether at a
 * box of no area (its IoU with itself is 0, so nothing is removed); here
 * the highest-scoring box always merges with itself and the rest go on.
 * Anchors whose box has a negative size or a value that is not finite are
 * dropped (MediaPipe drops negative and NaN sizes). */
#include <math.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "blazeface_internal.h"
#include "vramkit/blazeface.h"

#define N16 512
#define N32 384
#define COORDS 16
#define SCORE_CLIP 100.0f

/* MediaPipe's face detection graphs: min_score_thresh of the back model's
 * (face_detection_back_desktop_live.pbtxt, 256 x 256) and of the front
 * model's (face_detection_front_common.pbtxt, later short_range, 128 x 128),
 * and min_suppression_threshold of both. */
#define BACK_SCORE_THRESHOLD 0.65f
#define FRONT_SCORE_THRESHOLD 0.5f
#define SUPPRESSION_IOU 0.3f

struct vram_blazeface {
    int size;
    float score_threshold, suppression_iou;
    float anchors[VRAM_BLAZEFACE_ANCHORS][2];
};

/* One anchor above the threshold, decoded (normalized coordinates). */
typedef struct bf_cand {
    float score;
    float box[4];                                  /* x0, y0, x1, y1 */
    float kp[VRAM_BLAZEFACE_KEYPOINTS][2];
} bf_cand;

typedef struct bf_scratch {
    bf_cand cand[VRAM_BLAZEFACE_ANCHORS];
    uint16_t order[VRAM_BLAZEFACE_ANCHORS], tmp[VRAM_BLAZEFACE_ANCHORS];
} bf_scratch;

int vram_blazeface_opts_init(vram_blazeface_opts *opts)
{
    if (!opts)
        return vram__fail(VRAM_EINVAL, "vram_blazeface_opts_init: opts is NULL");
    *opts = (vram_blazeface_opts){.size = sizeof *opts, .input_size = 256};
    return 0;
}

int vram_blazeface_create(const vram_blazeface_opts *opts, vram_blazeface **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_blazeface_create: out is NULL");
    *out = NULL;
    vram_blazeface_opts o;
    vram_blazeface_opts_init(&o);
    int rc;
    if (opts && (rc = vram__opts_take(&o, opts, sizeof o, "vram_blazeface_opts")))
        return rc;
    if (o.input_size != 256 && o.input_size != 128)
        return vram__fail(VRAM_EINVAL,
                          "vram_blazeface_create: input size %d (256 for the back model, 128 "
                          "for the front one)",
                          o.input_size);
    if (!(o.score_threshold >= 0.0f && o.score_threshold <= 1.0f))
        return vram__fail(VRAM_EINVAL, "vram_blazeface_create: score threshold %g (0..1)",
                          (double)o.score_threshold);
    if (!(o.suppression_iou >= 0.0f && o.suppression_iou <= 1.0f))
        return vram__fail(VRAM_EINVAL, "vram_blazeface_create: suppression IoU %g (0..1)",
                          (double)o.suppression_iou);
    vram_blazeface *bf = vram__calloc(1, sizeof *bf);
    if (!bf)
        return VRAM_EHOSTMEM;
    bf->size = o.input_size;
    bf->score_threshold = o.score_threshold > 0.0f ? o.score_threshold
                          : o.input_size == 256   ? BACK_SCORE_THRESHOLD
                                                  : FRONT_SCORE_THRESHOLD;
    bf->suppression_iou = o.suppression_iou > 0.0f ? o.suppression_iou : SUPPRESSION_IOU;
    size_t n = vram__blazeface_anchors(bf->size, bf->anchors, VRAM_BLAZEFACE_ANCHORS);
    if (n != VRAM_BLAZEFACE_ANCHORS) {
        free(bf);
        return vram__fail(VRAM_EINVAL, "vram_blazeface_create: %zu anchors for input size %d",
                          n, o.input_size);
    }
    *out = bf;
    return 0;
}

void vram_blazeface_destroy(vram_blazeface *bf)
{
    free(bf);
}

size_t vram_blazeface_scratch_bytes(const vram_blazeface *bf)
{
    return bf ? sizeof(bf_scratch) + alignof(bf_scratch) : 0;
}

/* Decode anchor i; 0 when it is below the threshold or malformed. */
static int decode_anchor(const vram_blazeface *bf, float raw_score, const float *r,
                         const float *anchor, bf_cand *c)
{
    float x = raw_score < -SCORE_CLIP ? -SCORE_CLIP : raw_score > SCORE_CLIP ? SCORE_CLIP
                                                                            : raw_score;
    float score = 1.0f / (1.0f + expf(-x));
    if (!(score >= bf->score_threshold)) /* NaN too */
        return 0;
    const float inv = 1.0f / (float)bf->size;
    float xc = r[0] * inv + anchor[0], yc = r[1] * inv + anchor[1];
    float w = r[2] * inv, h = r[3] * inv;
    if (!(w >= 0.0f) || !(h >= 0.0f) || !isfinite(xc) || !isfinite(yc) || !isfinite(w) ||
        !isfinite(h))
        return 0;
    c->score = score;
    c->box[0] = xc - w * 0.5f;
    c->box[1] = yc - h * 0.5f;
    c->box[2] = xc + w * 0.5f;
    c->box[3] = yc + h * 0.5f;
    for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++) {
        c->kp[k][0] = r[4 + 2 * k] * inv + anchor[0];
        c->kp[k][1] = r[5 + 2 * k] * inv + anchor[1];
        if (!isfinite(c->kp[k][0]) || !isfinite(c->kp[k][1]))
            return 0;
    }
    return 1;
}

/* Stable bottom-up merge sort of idx[0..n) by descending score (ties keep
 * the anchors' order); tmp as long as idx. */
static void sort_by_score(const bf_cand *cand, uint16_t *idx, uint16_t *tmp, size_t n)
{
    uint16_t *a = idx, *b = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = cand[a[j]].score > cand[a[i]].score ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        uint16_t *t = a;
        a = b;
        b = t;
    }
    if (a != idx)
        memcpy(idx, a, n * sizeof *idx);
}

static float iou(const float *p, const float *q)
{
    float ix0 = fmaxf(p[0], q[0]), iy0 = fmaxf(p[1], q[1]);
    float ix1 = fminf(p[2], q[2]), iy1 = fminf(p[3], q[3]);
    if (ix1 <= ix0 || iy1 <= iy0)
        return 0.0f;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
    return uni > 0.0f ? inter / uni : 0.0f;
}

/* A merged face in model pixels, then through the map when there is one. */
static void emit(const vram_blazeface *bf, const float *box, const float (*kp)[2], float score,
                 const float *to_source, vram_face *f)
{
    float s = (float)bf->size, ms = 1.0f, ox = 0.0f, oy = 0.0f;
    if (to_source) {
        ms = to_source[0];
        ox = to_source[1];
        oy = to_source[2];
    }
    f->score = score;
    for (int i = 0; i < 4; i++)
        f->box[i] = (box[i] * s - (i & 1 ? oy : ox)) / ms;
    for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++) {
        f->keypoints[k][0] = (kp[k][0] * s - ox) / ms;
        f->keypoints[k][1] = (kp[k][1] * s - oy) / ms;
    }
}

int vram_blazeface_decode(const vram_blazeface *bf, const float *scores16, const float *regs16,
                          const float *scores32, const float *regs32, const float *to_source,
                          void *scratch, vram_face *out, size_t cap, size_t *n)
{
    if (n)
        *n = 0;
    if (!bf || !scores16 || !regs16 || !scores32 || !regs32 || !scratch || !n)
        return vram__fail(VRAM_EINVAL, "vram_blazeface_decode: %s is NULL",
                          !bf         ? "bf"
                          : !scores16 ? "scores16"
                          : !regs16   ? "regs16"
                          : !scores32 ? "scores32"
                          : !regs32   ? "regs32"
                          : !scratch  ? "scratch"
                                      : "n");
    if (!out && cap)
        return vram__fail(VRAM_EINVAL, "vram_blazeface_decode: out is NULL with cap %zu", cap);
    if (to_source && !(to_source[0] > 0.0f && isfinite(to_source[0]) &&
                       isfinite(to_source[1]) && isfinite(to_source[2])))
        return vram__fail(VRAM_EINVAL,
                          "vram_blazeface_decode: to_source scale %g, offset %g, %g (a positive "
                          "scale and finite offsets)",
                          (double)to_source[0], (double)to_source[1], (double)to_source[2]);
    uintptr_t at = ((uintptr_t)scratch + alignof(bf_scratch) - 1) &
                   ~(uintptr_t)(alignof(bf_scratch) - 1);
    bf_scratch *sc = (bf_scratch *)at;

    size_t m = 0;
    for (size_t i = 0; i < VRAM_BLAZEFACE_ANCHORS; i++) {
        float raw = i < N16 ? scores16[i] : scores32[i - N16];
        const float *r = i < N16 ? regs16 + i * COORDS : regs32 + (i - N16) * COORDS;
        if (decode_anchor(bf, raw, r, bf->anchors[i], &sc->cand[m])) {
            sc->order[m] = (uint16_t)m;
            m++;
        }
    }
    sort_by_score(sc->cand, sc->order, sc->tmp, m);

    /* Weighted suppression: the best remaining box takes every remaining box
     * overlapping it by more than the threshold (itself included) and
     * becomes their score-weighted mean, keeping its own score; the others
     * stay, in order, for the next round. */
    size_t found = 0;
    uint16_t *rest = sc->order;
    while (m > 0) {
        const bf_cand *top = &sc->cand[rest[0]];
        float total = 0.0f, box[4] = {0}, kp[VRAM_BLAZEFACE_KEYPOINTS][2] = {{0}};
        size_t keep = 0;
        for (size_t j = 0; j < m; j++) {
            const bf_cand *c = &sc->cand[rest[j]];
            if (j > 0 && !(iou(c->box, top->box) > bf->suppression_iou)) {
                rest[keep++] = rest[j];
                continue;
            }
            total += c->score;
            for (int i = 0; i < 4; i++)
                box[i] += c->box[i] * c->score;
            for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++) {
                kp[k][0] += c->kp[k][0] * c->score;
                kp[k][1] += c->kp[k][1] * c->score;
            }
        }
        if (found < cap) {
            if (total > 0.0f) {
                for (int i = 0; i < 4; i++)
                    box[i] /= total;
                for (int k = 0; k < VRAM_BLAZEFACE_KEYPOINTS; k++) {
                    kp[k][0] /= total;
                    kp[k][1] /= total;
                }
                emit(bf, box, (const float(*)[2])kp, top->score, to_source, &out[found]);
            } else {
                emit(bf, top->box, (const float(*)[2])top->kp, top->score, to_source,
                     &out[found]);
            }
        }
        found++;
        m = keep;
    }
    *n = found;
    return 0;
}
