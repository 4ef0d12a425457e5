/* src/engine/cuda/cuk_move.c - the host side of the engine's CUDA kernels,
 * part three: the data-movement steps. Flatten, Reshape and the like are a
 * device-to-device copy; Transpose and Slice one strided gather
 * (vram_cuk_strided); Concat and Split a row-block copy per input or output
 * (vram_cuk_copy2d, or a plain copy where the block is contiguous); Pad and
 * Gather their own kernels. The shapes handed to the kernels are merged to
 * as few axes as the strides allow, and whole elements move 2 to 16 bytes
 * at a time where sizes and alignment allow, since these kernels only move
 * bytes. The CPU kernels' run-time checks are repeated here with their
 * messages (movement.c). */
#include <string.h>

#include "cuk_internal.h"

int vram__cuk_merge_axes(int rank, int64_t *dim, int nops, int64_t (*st)[VRAM__MAX_RANK])
{
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dim[i] == 1)
            continue;
        if (r > 0) {
            int ok = 1;
            for (int o = 0; o < nops; o++)
                ok = ok && st[o][r - 1] == st[o][i] * dim[i];
            if (ok) {
                dim[r - 1] *= dim[i];
                for (int o = 0; o < nops; o++)
                    st[o][r - 1] = st[o][i];
                continue;
            }
        }
        dim[r] = dim[i];
        for (int o = 0; o < nops; o++)
            st[o][r] = st[o][i];
        r++;
    }
    return r;
}

/* The largest of 16, 8, 4, 2, 1 bytes dividing every byte count and address. */
static int unit_for(int64_t a, int64_t b, int64_t c, const void *x, const void *y)
{
    int u = 16;
    while (u > 1 && (a % u || b % u || c % u || (uintptr_t)x % (uintptr_t)u ||
                     (uintptr_t)y % (uintptr_t)u))
        u /= 2;
    return u;
}

/* y (contiguous, output extents odim) gathered from x, where one step along
 * output axis i moves delta[i] elements, starting at element base. */
static int run_strided(const vram__cuk *k, CUstream s, size_t elem, int rank,
                       const int64_t *odim, const int64_t *delta, int64_t base, const void *x,
                       void *y)
{
    vram__cuk_strided_p p;
    memset(&p, 0, sizeof p);
    p.total = 1;
    for (int i = 0; i < rank; i++)
        p.total *= odim[i];
    if (p.total <= 0 || elem == 0)
        return 0;
    int64_t dim[VRAM__MAX_RANK], st[1][VRAM__MAX_RANK];
    for (int i = 0; i < rank; i++) {
        dim[i] = odim[i];
        st[0][i] = delta[i];
    }
    int r = vram__cuk_merge_axes(rank, dim, 1, st);
    p.rank = r;
    for (int d = 0; d < r; d++) {
        p.rdim[d] = dim[r - 1 - d];
        p.rdelta[d] = st[0][r - 1 - d];
    }
    p.base = base;
    p.unit = (int)elem;
    /* A contiguous innermost run moves in wider units when every offset and
     * both buffers allow it. */
    if (r >= 1 && p.rdelta[0] == 1) {
        for (int u = 16; u > (int)elem; u /= 2) {
            int64_t f = u / (int64_t)elem;
            int ok = p.rdim[0] % f == 0 && p.base % f == 0 &&
                     (uintptr_t)x % (uintptr_t)u == 0 && (uintptr_t)y % (uintptr_t)u == 0;
            for (int d = 1; ok && d < r; d++)
                ok = p.rdelta[d] % f == 0;
            if (!ok)
                continue;
            p.rdim[0] /= f;
            for (int d = 1; d < r; d++)
                p.rdelta[d] /= f;
            p.base /= f;
            p.total /= f;
            p.unit = u;
            break;
        }
    }
    p.x = x;
    p.y = y;
    return vram__cuk_launch(k, VRAM__CUK_K_strided, s, p.total, &p);
}

/* rows x cols elements from x (row stride src_ld) to y (row stride dst_ld). */
static int run_copy2d(const vram__cuk *k, CUstream s, size_t elem, int64_t rows, int64_t cols,
                      const void *x, int64_t src_ld, void *y, int64_t dst_ld)
{
    if (rows <= 0 || cols <= 0 || elem == 0)
        return 0;
    int64_t e = (int64_t)elem;
    if (rows == 1 || (src_ld == cols && dst_ld == cols))
        return vram__cuk_memcpy(s, y, x, (uint64_t)(rows * cols * e));
    int u = unit_for(cols * e, src_ld * e, dst_ld * e, x, y);
    vram__cuk_copy2d_p p = {.rows = rows, .cols = cols * e / u, .src_ld = src_ld * e / u,
                            .dst_ld = dst_ld * e / u, .unit = u, .x = x, .y = y};
    return vram__cuk_launch(k, VRAM__CUK_K_copy2d, s, p.rows * p.cols, &p);
}

static int step_transpose(const vram__cuk *k, CUstream s, size_t elem, const vram__shape *xs,
                          const int *perm, const void *x, void *y)
{
    int64_t xst[VRAM__MAX_RANK], odim[VRAM__MAX_RANK], delta[VRAM__MAX_RANK];
    vram__cuk_strides(xs, xst);
    for (int i = 0; i < xs->rank; i++) {
        odim[i] = xs->dim[perm[i]];
        delta[i] = xst[perm[i]];
    }
    return run_strided(k, s, elem, xs->rank, odim, delta, 0, x, y);
}

static int step_slice(const vram__cuk *k, CUstream s, size_t elem, const vram__shape *xs,
                      const void *x, const int64_t *starts, const int64_t *steps,
                      const vram__shape *ys, void *y)
{
    int64_t xst[VRAM__MAX_RANK], delta[VRAM__MAX_RANK], base = 0;
    vram__cuk_strides(xs, xst);
    for (int i = 0; i < xs->rank; i++) {
        base += starts[i] * xst[i];
        delta[i] = steps[i] * xst[i];
    }
    return run_strided(k, s, elem, ys->rank, ys->dim, delta, base, x, y);
}

static int step_concat(const vram__cuk *k, CUstream s, const vram_exec *ctx,
                       const vram__step *st, const vram__node *n)
{
    const vram__graph *g = &ctx->e->g;
    const vram__shape *ys = vram__cuk_shape(ctx, st->y);
    size_t elem = vram_dtype_size(g->values[st->y].dtype);
    int axis = st->p.axis < 0 ? st->p.axis + ys->rank : st->p.axis;
    int64_t outer, inner, off = 0;
    vram__cuk_outer_inner(ys, axis, &outer, &inner);
    char *y = ctx->ptr[st->y];
    for (int i = 0; i < n->n_in; i++) {
        int64_t chunk = vram__cuk_shape(ctx, n->in[i])->dim[axis] * inner;
        int rc = run_copy2d(k, s, elem, outer, chunk, ctx->ptr[n->in[i]], chunk,
                            y + off * (int64_t)elem, ys->dim[axis] * inner);
        if (rc)
            return rc;
        off += chunk;
    }
    return 0;
}

static int step_split(const vram__cuk *k, CUstream s, const vram_exec *ctx,
                      const vram__step *st, const vram__node *n)
{
    const vram__graph *g = &ctx->e->g;
    const vram__shape *xs = vram__cuk_shape(ctx, st->x);
    size_t elem = vram_dtype_size(g->values[st->x].dtype);
    int axis = st->p.axis < 0 ? st->p.axis + xs->rank : st->p.axis;
    int64_t outer, inner, off = 0;
    vram__cuk_outer_inner(xs, axis, &outer, &inner);
    const char *x = ctx->ptr[st->x];
    for (int i = 0; i < n->n_out; i++) {
        int64_t chunk = st->split_sizes[i] * inner;
        int rc = run_copy2d(k, s, elem, outer, chunk, x + off * (int64_t)elem,
                            xs->dim[axis] * inner, ctx->ptr[n->out[i]], chunk);
        if (rc)
            return rc;
        off += chunk;
    }
    return 0;
}

/* movement.c's vram__cpu_pad checks, then one thread per output element. */
static int step_pad(const vram__cuk *k, CUstream s, const vram_exec *ctx,
                    const vram__step *st)
{
    const vram__graph *g = &ctx->e->g;
    int dt = g->values[st->x].dtype, mode = st->p.pad.mode;
    const vram__shape *xs = vram__cuk_shape(ctx, st->x), *ys = vram__cuk_shape(ctx, st->y);
    const int64_t *pads = st->p.pad.pads;
    int r = xs->rank;
    if (dt != VRAM_DTYPE_FLOAT && dt != VRAM_DTYPE_INT64 && st->p.pad.value != 0)
        return vram__fail(VRAM_ENOSYS, "Pad with a non-zero value on %s", vram_dtype_name(dt));
    int rc = vram__pad_check(mode, xs, pads, ys);
    if (rc)
        return rc;
    vram__cuk_pad_p p;
    memset(&p, 0, sizeof p);
    p.total = vram__cpu_elems(ys);
    p.elem = (int)vram_dtype_size(dt);
    if (p.total <= 0 || p.elem == 0)
        return 0;
    /* The constant in the element type: float or int64 bits, else zeros. */
    if (dt == VRAM_DTYPE_FLOAT) {
        float vf = (float)st->p.pad.value;
        uint32_t bits;
        memcpy(&bits, &vf, sizeof bits);
        p.value = (int64_t)bits;
    } else if (dt == VRAM_DTYPE_INT64) {
        p.value = (int64_t)st->p.pad.value;
    }
    int64_t xst[VRAM__MAX_RANK];
    vram__cuk_strides(xs, xst);
    p.rank = r;
    p.mode = mode;
    for (int d = 0; d < r; d++) {
        int sd = r - 1 - d;
        p.rxdim[d] = xs->dim[sd];
        p.rxst[d] = xst[sd];
        p.rydim[d] = ys->dim[sd];
        p.rbegin[d] = pads[sd];
    }
    p.x = ctx->ptr[st->x];
    p.y = ctx->ptr[st->y];
    return vram__cuk_launch(k, VRAM__CUK_K_pad, s, p.total, &p);
}

/* movement.c's vram__cpu_gather checks; indices are checked by the kernel. */
static int step_gather(const vram__cuk *k, CUstream s, const vram_exec *ctx,
                       const vram__step *st, const vram__node *n, int index,
                       vram__cuk_error *err)
{
    const vram__graph *g = &ctx->e->g;
    size_t elem = vram_dtype_size(g->values[st->x].dtype);
    const vram__shape *xs = vram__cuk_shape(ctx, st->x), *is = vram__cuk_shape(ctx, n->in[1]),
                      *ys = vram__cuk_shape(ctx, st->y);
    int axis = st->p.axis, rc = vram__gather_check(&axis, xs, is, ys);
    if (rc)
        return rc;
    vram__cuk_gather_p p;
    memset(&p, 0, sizeof p);
    p.ni = vram__cpu_elems(is);
    if (p.ni <= 0)
        return 0; /* no index, no output */
    int64_t inner;
    vram__cuk_outer_inner(xs, axis, &p.outer, &inner);
    p.n = xs->dim[axis];
    p.step = index;
    p.idx = ctx->ptr[n->in[1]];
    p.x = ctx->ptr[st->x];
    p.y = ctx->ptr[st->y];
    p.err = (vram__cuk_errword *)err;
    int64_t chunk = inner * (int64_t)elem;
    if (p.outer <= 0 || chunk <= 0) {
        /* Nothing to move, but the CPU still refuses a bad index. */
        p.check_only = 1;
        p.unit = 1;
        return vram__cuk_launch(k, VRAM__CUK_K_gather, s, p.ni, &p);
    }
    p.unit = unit_for(chunk, chunk, chunk, p.x, p.y);
    p.inner = chunk / p.unit;
    p.total = p.outer * p.ni * p.inner;
    return vram__cuk_launch(k, VRAM__CUK_K_gather, s, p.total, &p);
}

int vram__cuk_move_step(const vram__cuk *k, CUstream stream, const vram_exec *ctx, int index,
                        vram__cuk_error *err)
{
    const vram__step *st = &ctx->var->steps[index];
    const vram__graph *g = &ctx->e->g;
    const vram__node *n = &g->nodes[st->node];
    const void *x = st->x >= 0 ? ctx->ptr[st->x] : NULL;
    void *y = st->y >= 0 ? ctx->ptr[st->y] : NULL;
    switch (st->op) {
    case VRAM__OP_COPY:
        return vram__cuk_memcpy(stream, y, x, ctx->var->bytes[st->y]);
    case VRAM__OP_TRANSPOSE:
        return step_transpose(k, stream, vram_dtype_size(g->values[st->x].dtype),
                              vram__cuk_shape(ctx, st->x), st->p.perm, x, y);
    case VRAM__OP_CONCAT:
        return step_concat(k, stream, ctx, st, n);
    case VRAM__OP_SPLIT:
        return step_split(k, stream, ctx, st, n);
    case VRAM__OP_SLICE:
        return step_slice(k, stream, vram_dtype_size(g->values[st->x].dtype),
                          vram__cuk_shape(ctx, st->x), x, st->p.slice.starts, st->p.slice.steps,
                          vram__cuk_shape(ctx, st->y), y);
    case VRAM__OP_PAD:
        return step_pad(k, stream, ctx, st);
    case VRAM__OP_GATHER:
        return step_gather(k, stream, ctx, st, n, index, err);
    default:
        return vram__fail(VRAM_EINVAL, "step %d (%s) is not a data-movement step", index, n->op);
    }
}
