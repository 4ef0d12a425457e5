/* src/engine/cpu/movement.c - the CPU reference executor's data-movement
 * kernels on any element size: Transpose, Concat, Split, Slice, Pad and
 * Gather (see kernels_elem.h). They move bytes, never interpret them, so one
 * kernel serves every dtype; elements of 1, 2, 4 and 8 bytes are copied with
 * fixed-size copies the compiler turns into plain loads and stores. */
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/scalar.h"

static inline void copy_elem(size_t elem, char *dst, const char *src)
{
    switch (elem) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, elem); break;
    }
}

/* Row-major element strides of s. */
static void strides_of(const vram__shape *s, int64_t *st)
{
    int64_t acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= s->dim[i];
    }
}

/* Copy the output of shape `os` in row-major order from x, where moving one
 * step along output axis d moves delta[d] elements in x, starting at element
 * `base` of x. Transpose and Slice are both this walk. */
static void strided_gather(size_t elem, const vram__shape *os, const int64_t *delta, int64_t base, const void *x,
                           void *y)
{
    int r = os->rank;
    int64_t total = vram__cpu_elems(os), idx[VRAM__MAX_RANK] = {0};
    const char *px = x;
    char *py = y;
    if (total <= 0)
        return;
    if (r == 0) {
        copy_elem(elem, py, px + base * (int64_t)elem);
        return;
    }
    int64_t inner = os->dim[r - 1], step = delta[r - 1], off = base;
    for (int64_t o = 0; o < total; o += inner) {
        const char *src = px + off * (int64_t)elem;
        char *dst = py + o * (int64_t)elem;
        switch (elem) { /* constant sizes let the copies become single moves */
        case 1: for (int64_t i = 0; i < inner; i++) copy_elem(1, dst + i, src + i * step); break;
        case 2: for (int64_t i = 0; i < inner; i++) copy_elem(2, dst + i * 2, src + i * step * 2); break;
        case 4: for (int64_t i = 0; i < inner; i++) copy_elem(4, dst + i * 4, src + i * step * 4); break;
        case 8: for (int64_t i = 0; i < inner; i++) copy_elem(8, dst + i * 8, src + i * step * 8); break;
        default:
            for (int64_t i = 0; i < inner; i++)
                copy_elem(elem, dst + i * (int64_t)elem, src + i * step * (int64_t)elem);
        }
        for (int d = r - 2; d >= 0; d--) {
            off += delta[d];
            if (++idx[d] < os->dim[d])
                break;
            off -= delta[d] * os->dim[d];
            idx[d] = 0;
        }
    }
}

void vram__cpu_transpose(size_t elem, const vram__shape *xs, const int *perm, const void *x, void *y)
{
    int64_t xst[VRAM__MAX_RANK], delta[VRAM__MAX_RANK];
    vram__shape os;
    memset(&os, 0, sizeof os);
    os.rank = xs->rank;
    strides_of(xs, xst);
    for (int i = 0; i < xs->rank; i++) {
        os.dim[i] = xs->dim[perm[i]];
        delta[i] = xst[perm[i]];
    }
    strided_gather(elem, &os, delta, 0, x, y);
}

void vram__cpu_slice(size_t elem, const vram__shape *xs, const void *x, const int64_t *starts,
                     const int64_t *steps, const vram__shape *ys, void *y)
{
    int64_t xst[VRAM__MAX_RANK], delta[VRAM__MAX_RANK], base = 0;
    strides_of(xs, xst);
    for (int i = 0; i < xs->rank; i++) {
        base += starts[i] * xst[i];
        delta[i] = steps[i] * xst[i];
    }
    strided_gather(elem, ys, delta, base, x, y);
}

/* Products of the extents before and after `axis`. */
static void outer_inner(const vram__shape *s, int axis, int64_t *outer, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= s->dim[i];
    for (int i = axis + 1; i < s->rank; i++)
        *inner *= s->dim[i];
}

void vram__cpu_concat(size_t elem, int axis, int n, const vram__shape *const *xs, const void *const *x,
                      const vram__shape *ys, void *y)
{
    int64_t outer, inner;
    if (axis < 0)
        axis += ys->rank;
    outer_inner(ys, axis, &outer, &inner);
    char *dst = y;
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < n; i++) {
            size_t chunk = (size_t)(xs[i]->dim[axis] * inner) * elem;
            if (chunk)
                memcpy(dst, (const char *)x[i] + (size_t)o * chunk, chunk);
            dst += chunk;
        }
    }
}

void vram__cpu_split(size_t elem, int axis, const vram__shape *xs, const void *x, int n,
                     const int64_t *sizes, void *const *y)
{
    int64_t outer, inner;
    if (axis < 0)
        axis += xs->rank;
    outer_inner(xs, axis, &outer, &inner);
    const char *src = x;
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < n; i++) {
            size_t chunk = (size_t)(sizes[i] * inner) * elem;
            if (chunk)
                memcpy((char *)y[i] + (size_t)o * chunk, src, chunk);
            src += chunk;
        }
    }
}

/* ---- pad ------------------------------------------------------------------ */

int vram__pad_check(int mode, const vram__shape *xs, const int64_t *pads, const vram__shape *ys)
{
    char s1[160], s2[160];
    int r = xs->rank;
    if (mode < VRAM__PAD_CONSTANT || mode > VRAM__PAD_EDGE)
        return vram__fail(VRAM_EINVAL, "Pad: unknown mode %d", mode);
    if (ys->rank != r)
        return vram__fail(VRAM_EINVAL, "Pad: output rank %d differs from input rank %d", ys->rank, r);
    for (int d = 0; d < r; d++) {
        if (xs->dim[d] < 0 || xs->dim[d] + pads[d] + pads[r + d] != ys->dim[d] || ys->dim[d] < 0)
            return vram__fail(VRAM_EINVAL, "Pad: output shape %s is not input %s with pads %lld,%lld on axis %d",
                              vram__cpu_shape_fmt(ys, s1, sizeof s1), vram__cpu_shape_fmt(xs, s2, sizeof s2),
                              (long long)pads[d], (long long)pads[r + d], d);
        if (mode != VRAM__PAD_CONSTANT && xs->dim[d] == 0 && ys->dim[d] > 0)
            return vram__fail(VRAM_EINVAL, "Pad: %s mode cannot pad axis %d, which has no elements",
                              mode == VRAM__PAD_REFLECT ? "reflect" : "edge", d);
    }
    return 0;
}

int vram__cpu_pad(size_t elem, int mode, const vram__shape *xs, const void *x, const int64_t *pads,
                  const void *value, const vram__shape *ys, void *y)
{
    int rc = vram__pad_check(mode, xs, pads, ys), r = xs->rank;
    if (rc)
        return rc;
    int64_t total = vram__cpu_elems(ys), xst[VRAM__MAX_RANK], idx[VRAM__MAX_RANK] = {0};
    if (total <= 0)
        return 0;
    strides_of(xs, xst);
    const char *px = x;
    char *py = y;
    for (int64_t o = 0; o < total; o++) {
        int64_t off = 0;
        int outside = 0;
        for (int d = 0; d < r; d++) {
            int64_t s = vram__pad_source(mode, idx[d] - pads[d], xs->dim[d]);
            if (s < 0) {
                outside = 1;
                break;
            }
            off += s * xst[d];
        }
        char *dst = py + o * (int64_t)elem;
        if (!outside)
            copy_elem(elem, dst, px + off * (int64_t)elem);
        else if (value)
            copy_elem(elem, dst, value);
        else
            memset(dst, 0, elem);
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < ys->dim[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* ---- gather --------------------------------------------------------------- */

int vram__gather_check(int *axis_io, const vram__shape *xs, const vram__shape *is,
                       const vram__shape *ys)
{
    char s1[160], s2[160], s3[160];
    int axis = *axis_io;
    if (xs->rank < 1 || axis < -xs->rank || axis >= xs->rank)
        return vram__fail(VRAM_EINVAL, "Gather: axis %d is outside [-%d, %d) for data %s", axis, xs->rank,
                          xs->rank, vram__cpu_shape_fmt(xs, s1, sizeof s1));
    if (axis < 0)
        axis += xs->rank;
    int want = xs->rank - 1 + is->rank, ok = ys->rank == want && want <= VRAM__MAX_RANK;
    for (int d = 0; ok && d < want; d++) {
        int64_t e = d < axis ? xs->dim[d] : d < axis + is->rank ? is->dim[d - axis] : xs->dim[d - is->rank + 1];
        ok = ys->dim[d] == e;
    }
    if (!ok)
        return vram__fail(VRAM_EINVAL, "Gather: output shape %s does not match data %s and indices %s on axis %d",
                          vram__cpu_shape_fmt(ys, s1, sizeof s1), vram__cpu_shape_fmt(xs, s2, sizeof s2),
                          vram__cpu_shape_fmt(is, s3, sizeof s3), axis);
    *axis_io = axis;
    return 0;
}

int vram__cpu_gather(size_t elem, int axis, const vram__shape *xs, const void *x, const vram__shape *is,
                     const int64_t *idx, const vram__shape *ys, void *y)
{
    int rc = vram__gather_check(&axis, xs, is, ys);
    if (rc)
        return rc;
    int64_t outer, inner, n = xs->dim[axis], ni = vram__cpu_elems(is);
    for (int64_t j = 0; j < ni; j++)
        if (idx[j] < -n || idx[j] >= n)
            return vram__fail(VRAM_EINVAL, "Gather: index %lld (element %lld of the indices) is out of range [-%lld, %lld) of axis %d",
                              (long long)idx[j], (long long)j, (long long)n, (long long)n, axis);
    outer_inner(xs, axis, &outer, &inner);
    size_t chunk = (size_t)inner * elem;
    if (!chunk)
        return 0;
    const char *px = x;
    char *py = y;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = idx[j] < 0 ? idx[j] + n : idx[j];
            memcpy(py + (size_t)(o * ni + j) * chunk, px + (size_t)(o * n + k) * chunk, chunk);
        }
    }
    return 0;
}
