/* src/engine/cuda/cuk_steps.c - the host side of the engine's CUDA kernels,
 * part two: vram__cuk_step, which turns one step of a context's variant into
 * a parameter block (cuk_params.h) and launches its kernel; the arithmetic
 * steps are here, the data-movement ones in cuk_move.c. Inputs and shapes
 * are resolved as exec_cpu.c does (x = ptr[st->x], y = ptr[st->y], the
 * node's other inputs through node->in, shapes from the variant), and every
 * check the CPU kernel makes at run time is made here first, with the CPU's
 * message. Broadcasting operands are handed over with as few axes as the
 * strides allow ([N,C,H,W] + [1,C,1,1] runs as [N,C,H*W]). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuk_internal.h"

/* ---- broadcasting ---------------------------------------------------------- */


static int run_binary(const vram__cuk *k, CUstream s, int kid, int op, const vram__shape *as,
                      const void *a, const vram__shape *bs, const void *b, const vram__shape *ys,
                      void *y, int index, vram__cuk_error *err)
{
    vram__cuk_binary_p p;
    memset(&p, 0, sizeof p);
    p.total = vram__cpu_elems(ys);
    if (p.total <= 0)
        return 0;
    int64_t dim[VRAM__MAX_RANK], st[2][VRAM__MAX_RANK];
    vram__bcast_strides(as, ys, st[0]);
    vram__bcast_strides(bs, ys, st[1]);
    for (int i = 0; i < ys->rank; i++)
        dim[i] = ys->dim[i];
    int r = vram__cuk_merge_axes(ys->rank, dim, 2, st);
    p.rank = r;
    for (int d = 0; d < r; d++) {
        p.rdim[d] = dim[r - 1 - d];
        p.ra[d] = st[0][r - 1 - d];
        p.rb[d] = st[1][r - 1 - d];
    }
    p.b_elems = vram__cpu_elems(bs);
    p.op = op;
    p.step = index;
    p.a = a;
    p.b = b;
    p.y = y;
    p.err = (vram__cuk_errword *)err;
    return vram__cuk_launch(k, kid, s, p.total, &p);
}


/* ---- float kernels ----------------------------------------------------------- */

/* conv.c's checks, then one thread per output element. */
static int step_convt(const vram__cuk *k, CUstream s, const vram__conv2d *c, const float *x,
                      const float *w, const float *bias, float *y)
{
    int rc = vram__conv2d_check(c, "ConvTranspose");
    if (rc)
        return rc;
    vram__cuk_convt_p p = {
        .total = c->n * c->c_out * c->oh * c->ow, .c_in = c->c_in, .h = c->h, .w = c->w,
        .c_out = c->c_out, .kh = c->kh, .kw = c->kw, .oh = c->oh, .ow = c->ow,
        .stride_h = c->stride_h, .stride_w = c->stride_w, .dil_h = c->dil_h, .dil_w = c->dil_w,
        .pad_top = c->pad_top, .pad_left = c->pad_left, .group = c->group,
        .x = x, .wt = w, .bias = bias, .y = y};
    return vram__cuk_launch(k, VRAM__CUK_K_convt, s, p.total, &p);
}

static int step_pool(const vram__cuk *k, CUstream s, int kid, const vram__pool2d *q,
                     const float *x, float *y)
{
    vram__cuk_pool_p p = {
        .total = q->n * q->c * q->oh * q->ow, .h = q->h, .w = q->w, .kh = q->kh, .kw = q->kw,
        .oh = q->oh, .ow = q->ow, .stride_h = q->stride_h, .stride_w = q->stride_w,
        .dil_h = q->dil_h, .dil_w = q->dil_w, .pad_top = q->pad_top, .pad_left = q->pad_left,
        .pad_bottom = q->pad_bottom, .pad_right = q->pad_right,
        .count_include_pad = q->count_include_pad, .x = x, .y = y};
    return vram__cuk_launch(k, kid, s, p.total, &p);
}

static int step_gap(const vram__cuk *k, CUstream s, const vram__step *st, const float *x,
                    float *y)
{
    vram__cuk_gap_p p = {.planes = st->p.gap.n * st->p.gap.c, .spatial = st->p.gap.spatial,
                         .x = x, .y = y};
    if (p.planes <= 0)
        return 0;
    /* Large planes: a block each; small ones: a warp each. */
    if (p.spatial >= 2048)
        return vram__cuk_launch(k, VRAM__CUK_K_gap_block, s, p.planes * VRAM__CUK_THREADS, &p);
    return vram__cuk_launch(k, VRAM__CUK_K_gap_warp, s, p.planes * 32, &p);
}

static int step_softmax(const vram__cuk *k, CUstream s, const vram__step *st, const float *x,
                        float *y)
{
    const vram__shape *sh = &st->p.softmax.shape;
    int axis = st->p.softmax.axis < 0 ? st->p.softmax.axis + sh->rank : st->p.softmax.axis;
    vram__cuk_softmax_p p = {.n = sh->rank ? sh->dim[axis] : 1, .x = x, .y = y};
    vram__cuk_outer_inner(sh, axis, &p.outer, &p.inner);
    if (sh->rank == 0)
        p.outer = p.inner = 1;
    if (p.outer * p.n * p.inner <= 0)
        return 0;
    if (p.inner > 1)
        return vram__cuk_launch(k, VRAM__CUK_K_softmax_cols, s, p.outer * p.inner, &p);
    /* A row per warp while rows are short, per block beyond. */
    p.group = p.n <= 256 ? 32 : VRAM__CUK_THREADS;
    return vram__cuk_launch(k, VRAM__CUK_K_softmax_rows, s, p.outer * p.group, &p);
}

/* resize.c's checks, then one thread per output element. */
static int step_resize(const vram__cuk *k, CUstream s, const vram__step *st,
                       const vram__shape *xs, const float *x, const vram__shape *ys, float *y)
{
    int mode = st->p.resize.mode, ctm = st->p.resize.ctm, nearest = st->p.resize.nearest;
    const float *scales = st->p.resize.scales;
    int rc = vram__resize_check(mode, ctm, nearest, xs, scales, ys);
    if (rc)
        return rc;
    int r = xs->rank;
    vram__cuk_resize_p p;
    memset(&p, 0, sizeof p);
    p.total = vram__cpu_elems(ys);
    if (p.total <= 0)
        return 0;
    int64_t xst[VRAM__MAX_RANK];
    vram__cuk_strides(xs, xst);
    p.rank = r;
    p.mode = mode;
    p.ctm = ctm;
    p.nearest = nearest;
    for (int d = 0; d < r; d++) {
        int sd = r - 1 - d;
        p.rxdim[d] = xs->dim[sd];
        p.rxst[d] = xst[sd];
        p.rydim[d] = ys->dim[sd];
        p.rscale[d] = scales[sd];
        p.rlinear[d] = mode == 1 && !(scales[sd] == 1.0f && xs->dim[sd] == ys->dim[sd]);
    }
    p.x = x;
    p.y = y;
    return vram__cuk_launch(k, VRAM__CUK_K_resize, s, p.total, &p);
}

/* ---- cast -------------------------------------------------------------------- */

static int step_cast(const vram__cuk *k, CUstream s, int from, int to, int64_t n, const void *x,
                     void *y)
{
    int rc = vram__cast_check(from, to);
    if (rc)
        return rc;
    if (n <= 0)
        return 0;
    if (from == to && from != VRAM_DTYPE_BOOL) /* bool to bool normalizes bytes */
        return vram__cuk_memcpy(s, y, x, (uint64_t)n * vram_dtype_size(from));
    vram__cuk_cast_p p = {.n = n, .from = from, .to = to, .x = x, .y = y};
    return vram__cuk_launch(k, VRAM__CUK_K_cast, s, n, &p);
}

/* ---- the step --------------------------------------------------------------- */

int vram__cuk_step(const vram__cuk *k, CUstream stream, const vram_exec *ctx, int index,
                   vram__cuk_error *err)
{
    if (!k || !ctx || index < 0 || index >= ctx->var->n_steps)
        return vram__fail(VRAM_EINVAL, "CUDA kernels: no step %d (the variant has %d)", index,
                          ctx ? ctx->var->n_steps : 0);
    const vram__step *st = &ctx->var->steps[index];
    const vram__graph *g = &ctx->e->g;
    const vram__node *n = &g->nodes[st->node];
    void **ptr = ctx->ptr;
    const void *x = st->x >= 0 ? ptr[st->x] : NULL;
    void *y = st->y >= 0 ? ptr[st->y] : NULL;
#define IN(i) (n->n_in > (i) && n->in[i] >= 0 ? ptr[n->in[i]] : NULL)
    switch (st->op) {
    case VRAM__OP_CONV:
    case VRAM__OP_GEMM:
    case VRAM__OP_MATMUL:
        return vram__fail(VRAM_EINVAL, "step %d (%s) belongs to cuDNN or cuBLAS, not to "
                                       "vramkit's CUDA kernels",
                          index, n->op);
    case VRAM__OP_CONV_TRANSPOSE:
        return step_convt(k, stream, &st->p.conv, x, IN(1), IN(2), y);
    case VRAM__OP_BATCHNORM: {
        vram__cuk_batchnorm_p p = {.total = st->p.bn.n * st->p.bn.c * st->p.bn.spatial,
                                   .c = st->p.bn.c, .spatial = st->p.bn.spatial,
                                   .eps = st->p.bn.eps, .x = x, .scale = IN(1), .bias = IN(2),
                                   .mean = IN(3), .var = IN(4), .y = y};
        return vram__cuk_launch(k, VRAM__CUK_K_batchnorm, stream, p.total, &p);
    }
    case VRAM__OP_UNARY: {
        vram__cuk_unary_p p = {.n = vram__shape_elems(vram__cuk_shape(ctx, st->y)),
                               .op = st->p.unary.op, .p0 = st->p.unary.p[0],
                               .p1 = st->p.unary.p[1], .x = x, .y = y};
        return vram__cuk_launch(k, VRAM__CUK_K_unary, stream, p.n, &p);
    }
    case VRAM__OP_PRELU: {
        const vram__shape *xs = vram__cuk_shape(ctx, st->x);
        int rc = vram__bcast_check("PRelu", xs, vram__cuk_shape(ctx, n->in[1]), xs);
        if (rc)
            return rc;
        return run_binary(k, stream, VRAM__CUK_K_binary, VRAM__CUK_BIN_PRELU, xs, x,
                          vram__cuk_shape(ctx, n->in[1]), IN(1), xs, y, index, err);
    }
    case VRAM__OP_BINARY: {
        int op = st->p.binary.op;
        if (op < VRAM__BIN_ADD || op > VRAM__BIN_DIV)
            return vram__fail(VRAM_EINVAL, "unknown binary op %d", op);
        const vram__shape *as = vram__cuk_shape(ctx, n->in[0]);
        const vram__shape *bs = vram__cuk_shape(ctx, n->in[1]), *ys = vram__cuk_shape(ctx, st->y);
        int rc = vram__bcast_check(vram__binary_name(op), as, bs, ys);
        if (rc)
            return rc;
        return run_binary(k, stream, st->p.binary.i64 ? VRAM__CUK_K_binary_i64 : VRAM__CUK_K_binary,
                          op, as, IN(0), bs, IN(1), ys, y, index, err);
    }
    case VRAM__OP_MAXPOOL:
        return step_pool(k, stream, VRAM__CUK_K_maxpool, &st->p.pool, x, y);
    case VRAM__OP_AVGPOOL:
        return step_pool(k, stream, VRAM__CUK_K_avgpool, &st->p.pool, x, y);
    case VRAM__OP_GLOBAL_AVGPOOL:
        return step_gap(k, stream, st, x, y);
    case VRAM__OP_COPY:
    case VRAM__OP_TRANSPOSE:
    case VRAM__OP_CONCAT:
    case VRAM__OP_SPLIT:
    case VRAM__OP_SLICE:
    case VRAM__OP_PAD:
    case VRAM__OP_GATHER:
        return vram__cuk_move_step(k, stream, ctx, index, err);
    case VRAM__OP_RESIZE:
        return step_resize(k, stream, st, vram__cuk_shape(ctx, st->x), x,
                           vram__cuk_shape(ctx, st->y), y);
    case VRAM__OP_SOFTMAX:
        return step_softmax(k, stream, st, x, y);
    case VRAM__OP_CAST:
        return step_cast(k, stream, st->p.cast.from, st->p.cast.to,
                         vram__shape_elems(vram__cuk_shape(ctx, st->x)), x, y);
    default:
        return vram__fail(VRAM_ENOSYS, "step of unknown kind %d", st->op);
    }
#undef IN
}
