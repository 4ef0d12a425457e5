/* src/engine/exec_cpu.c - the CPU executor: runs a context's steps in
 * order, each a call into the kernels of src/engine/cpu (the fast ones for
 * convolutions and matrix products, the plain-C reference otherwise) on
 * the memory the plan gave its values, with the Add and activation steps
 * after a convolution done in its epilogue (exec_cpu_fuse.c). It allocates
 * nothing: every pointer was resolved when the context was made. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "engine_internal.h"
#include "engine/cpu/fast.h"
#include "engine/cpu/team.h"
#include "engine/exec_cpu_fuse.h"

static const vram__shape *shape_of(const vram_exec *c, int v) { return &c->var->shape[v]; }

/* Per engine: each variant's step plan (exec_cpu_fuse.h), and the
 * workspace each thread of a context has (the context's holds one slice of
 * part_bytes per thread). */
typedef struct cpu_engine {
    vram__cpu_step **steps; /* [n_var][n_steps] */
    int n_var;
    int threads, reference;
    uint64_t part_bytes;
    /* Conv weights in the GEMM's panels for tiles packed_mr rows tall, per
     * weight value (NULL: read as they are), all in one block of the pool. */
    const float **packed;
    int packed_mr;
    void *packed_block;
    /* The kernels of the steps that have a fast one besides Conv's. */
    void (*gemm)(int, int, int64_t, int64_t, int64_t, float, const float *, const float *, float,
                 const float *, int64_t, int64_t, float *);
    void (*gap)(int64_t, int64_t, int64_t, const float *, float *);
} cpu_engine;

/* Per context: its threads (NULL: the caller's alone). */
typedef struct cpu_context {
    vram__team *team;
} cpu_context;

/* One fast convolution, to be split over a team. */
typedef struct conv_job {
    const vram__conv2d *p;
    const float *x, *w, *packed_w, *bias;
    int packed_mr;
    const vram__epilogue *ep;
    float *y;
    char *workspace;
    uint64_t part_bytes;
} conv_job;

static void conv_part(void *arg, int part, int parts)
{
    const conv_job *j = arg;
    /* Parts are whole tiles or channels: none fails where part 0 did not. */
    (void)vram__cpu_conv2d_fast(j->p, j->x, j->w, j->packed_w, j->packed_mr, j->bias, j->ep, j->y,
                                j->workspace + (uint64_t)part * j->part_bytes, part, parts);
}

/* Multiply-adds below which a convolution stays on the caller's thread:
 * below it, handing the others their parts and then moving the halves of
 * the output between the cores' caches cost about what they save (on the
 * 2-core development machine, BlazeFace and MobileNetV3 ran no faster on
 * two threads with 4M). */
#define TEAM_MIN_MACS (16 << 20)

static int64_t conv_macs(const vram__conv2d *p)
{
    return p->n * p->c_out * p->oh * p->ow * (p->c_in / p->group) * p->kh * p->kw;
}

/* A convolution, with the epilogue its plan gives it, on every thread of
 * the context when it is large enough. */
static int run_conv(vram_exec *ctx, const vram__step *st, const vram__cpu_step *cs)
{
    const vram_engine *e = ctx->e;
    const cpu_engine *ce = e->ex_state;
    const cpu_context *cc = ctx->ex_state;
    const vram__node *n = &e->g.nodes[st->node];
    const vram__conv2d *p = &st->p.conv;
    void **ptr = ctx->ptr;
    const float *w = ptr[n->in[1]], *bias = n->n_in > 2 && n->in[2] >= 0 ? ptr[n->in[2]] : NULL;
    float *y = ptr[st->y];
    vram__epilogue ep = {.add = cs->other >= 0 ? ptr[cs->other] : NULL, .ld_add = p->oh * p->ow,
                         .act = -1};
    if (cs->act >= 0) {
        const vram__step *a = &ctx->var->steps[cs->act];
        ep.act = a->p.unary.op;
        ep.act_p = a->p.unary.p;
    }
    const vram__epilogue *epp = ep.add || ep.act >= 0 ? &ep : NULL;
    const float *packed_w = ce->packed ? ce->packed[n->in[1]] : NULL;
    if (cs->fast && !cs->split)
        return vram__cpu_conv2d_fast(p, ptr[st->x], w, packed_w, ce->packed_mr, bias, epp, y,
                                     ctx->workspace, 0, 1);
    if (cs->fast) {
        int rc = vram__conv2d_check(p, "Conv"); /* the parts cannot return it */
        conv_job job = {.p = p, .x = ptr[st->x], .w = w, .packed_w = packed_w,
                        .packed_mr = ce->packed_mr, .bias = bias, .ep = epp, .y = y,
                        .workspace = ctx->workspace, .part_bytes = ce->part_bytes};
        if (!rc)
            vram__team_run(cc->team, conv_part, &job);
        return rc;
    }
    int rc = vram__cpu_conv2d(p, ptr[st->x], w, bias, y, ctx->workspace, ce->part_bytes);
    if (!rc) /* the reference has no epilogue: one pass after it */
        vram__epilogue_rows(epp, 0, p->n * p->c_out, 0, p->oh * p->ow, y, p->oh * p->ow);
    return rc;
}

static int run_step(vram_exec *ctx, const vram__step *st, const vram__cpu_step *cs)
{
    const vram_engine *e = ctx->e;
    const cpu_engine *ce = e->ex_state;
    const vram__graph *g = &e->g;
    const vram__node *n = &g->nodes[st->node];
    void **ptr = ctx->ptr;
    const void *x = st->x >= 0 ? ptr[st->x] : NULL;
    void *y = st->y >= 0 ? ptr[st->y] : NULL;
#define IN(i) (n->n_in > (i) && n->in[i] >= 0 ? ptr[n->in[i]] : NULL)
    switch (st->op) {
    case VRAM__OP_CONV:
        return run_conv(ctx, st, cs);
    case VRAM__OP_CONV_TRANSPOSE:
        return vram__cpu_conv_transpose2d(&st->p.conv, x, IN(1), IN(2), y, ctx->workspace,
                                          e->workspace_bytes);
    case VRAM__OP_BATCHNORM:
        vram__cpu_batchnorm(st->p.bn.n, st->p.bn.c, st->p.bn.spatial, x, IN(1), IN(2), IN(3),
                            IN(4), st->p.bn.eps, y);
        return 0;
    case VRAM__OP_UNARY:
        vram__cpu_unary(st->p.unary.op, st->p.unary.p, vram__shape_elems(shape_of(ctx, st->y)), x, y);
        return 0;
    case VRAM__OP_PRELU:
        return vram__cpu_prelu(shape_of(ctx, st->x), x, shape_of(ctx, n->in[1]), IN(1), y);
    case VRAM__OP_BINARY:
        if (st->p.binary.i64)
            return vram__cpu_binary_i64(st->p.binary.op, shape_of(ctx, n->in[0]), IN(0),
                                        shape_of(ctx, n->in[1]), IN(1), shape_of(ctx, st->y), y);
        return vram__cpu_binary(st->p.binary.op, shape_of(ctx, n->in[0]), IN(0),
                                shape_of(ctx, n->in[1]), IN(1), shape_of(ctx, st->y), y);
    case VRAM__OP_MAXPOOL:
        vram__cpu_maxpool2d(&st->p.pool, x, y);
        return 0;
    case VRAM__OP_AVGPOOL:
        vram__cpu_avgpool2d(&st->p.pool, x, y);
        return 0;
    case VRAM__OP_GLOBAL_AVGPOOL:
        ce->gap(st->p.gap.n, st->p.gap.c, st->p.gap.spatial, x, y);
        return 0;
    case VRAM__OP_GEMM:
        ce->gemm(st->p.gemm.trans_a, st->p.gemm.trans_b, st->p.gemm.m, st->p.gemm.n,
                            st->p.gemm.k, st->p.gemm.alpha, x, IN(1), st->p.gemm.beta, IN(2),
                            st->p.gemm.c_rows, st->p.gemm.c_cols, y);
        return 0;
    case VRAM__OP_MATMUL:
        return vram__cpu_matmul(shape_of(ctx, n->in[0]), IN(0), shape_of(ctx, n->in[1]), IN(1),
                                shape_of(ctx, st->y), y);
    case VRAM__OP_COPY:
        if (x != y)
            memcpy(y, x, (size_t)ctx->var->bytes[st->y]);
        return 0;
    case VRAM__OP_TRANSPOSE:
        vram__cpu_transpose(vram_dtype_size(g->values[st->x].dtype), shape_of(ctx, st->x),
                            st->p.perm, x, y);
        return 0;
    case VRAM__OP_CONCAT: {
        const vram__shape *xs[64];
        const void *xp[64];
        if (n->n_in > 64)
            return vram__fail(VRAM_ENOSYS, "Concat of %d inputs (at most 64)", n->n_in);
        for (int i = 0; i < n->n_in; i++) {
            xs[i] = shape_of(ctx, n->in[i]);
            xp[i] = ptr[n->in[i]];
        }
        vram__cpu_concat(vram_dtype_size(g->values[st->y].dtype), st->p.axis, n->n_in, xs, xp,
                         shape_of(ctx, st->y), y);
        return 0;
    }
    case VRAM__OP_SPLIT: {
        void *yp[64];
        if (n->n_out > 64)
            return vram__fail(VRAM_ENOSYS, "Split into %d outputs (at most 64)", n->n_out);
        for (int i = 0; i < n->n_out; i++)
            yp[i] = ptr[n->out[i]];
        vram__cpu_split(vram_dtype_size(g->values[st->x].dtype), st->p.axis, shape_of(ctx, st->x),
                        x, n->n_out, st->split_sizes, yp);
        return 0;
    }
    case VRAM__OP_SLICE:
        vram__cpu_slice(vram_dtype_size(g->values[st->x].dtype), shape_of(ctx, st->x), x,
                        st->p.slice.starts, st->p.slice.steps, shape_of(ctx, st->y), y);
        return 0;
    case VRAM__OP_PAD: {
        int dt = g->values[st->x].dtype;
        float vf = (float)st->p.pad.value;
        int64_t vi = (int64_t)st->p.pad.value;
        const void *val = dt == VRAM_DTYPE_FLOAT ? (const void *)&vf : (const void *)&vi;
        if (dt != VRAM_DTYPE_FLOAT && dt != VRAM_DTYPE_INT64 && st->p.pad.value != 0)
            return vram__fail(VRAM_ENOSYS, "Pad with a non-zero value on %s",
                              vram_dtype_name(dt));
        if (dt != VRAM_DTYPE_FLOAT && dt != VRAM_DTYPE_INT64)
            val = NULL;
        return vram__cpu_pad(vram_dtype_size(dt), st->p.pad.mode, shape_of(ctx, st->x), x,
                             st->p.pad.pads, val, shape_of(ctx, st->y), y);
    }
    case VRAM__OP_RESIZE:
        return vram__cpu_resize(st->p.resize.mode, st->p.resize.ctm, st->p.resize.nearest,
                                shape_of(ctx, st->x), x, st->p.resize.scales, shape_of(ctx, st->y), y,
                                ctx->workspace);
    case VRAM__OP_SOFTMAX:
        vram__cpu_softmax(&st->p.softmax.shape, st->p.softmax.axis, x, y);
        return 0;
    case VRAM__OP_GATHER:
        return vram__cpu_gather(vram_dtype_size(g->values[st->x].dtype), st->p.axis,
                                shape_of(ctx, st->x), x, shape_of(ctx, n->in[1]), IN(1),
                                shape_of(ctx, st->y), y);
    case VRAM__OP_CAST:
        return vram__cpu_cast(st->p.cast.from, st->p.cast.to,
                              vram__shape_elems(shape_of(ctx, st->x)), x, y);
    default:
        return vram__fail(VRAM_ENOSYS, "step of unknown kind %d", st->op);
    }
#undef IN
}

/* The scratch one thread of a context can use at most for variant v's
 * steps (the fast kernels' panels or the reference's im2col tiles within
 * the workspace limit, Resize's tables). */
static uint64_t variant_workspace(const vram_engine *e, const vram__variant *v, int reference)
{
    uint64_t most = 0;
    for (int i = 0; i < v->n_steps; i++) {
        const vram__step *st = &v->steps[i];
        uint64_t lim = e->workspace_limit, b = 0;
        if (st->op == VRAM__OP_CONV) {
            b = reference ? UINT64_MAX : vram__cpu_conv2d_fast_scratch(&st->p.conv);
            if (b > lim)
                b = vram__cpu_conv2d_scratch(&st->p.conv, lim);
        }
        else if (st->op == VRAM__OP_CONV_TRANSPOSE)
            b = vram__cpu_conv_transpose2d_scratch(&st->p.conv, lim);
        else if (st->op == VRAM__OP_RESIZE) /* its tables are needed whatever the limit */
            b = vram__cpu_resize_scratch(&v->shape[st->y]);
        if (b > most)
            most = b;
    }
    return most;
}

static int exec_run(vram_exec *ctx)
{
    const vram_engine *e = ctx->e;
    const cpu_engine *ce = e->ex_state;
    const vram__cpu_step *plan = ce->steps[ctx->var - e->var];
    for (int i = 0; i < ctx->var->n_steps; i++) {
        const vram__step *st = &ctx->var->steps[i];
        if (plan[i].done)
            continue;
        int rc = run_step(ctx, st, &plan[i]);
        if (rc) {
            const vram__node *n = &e->g.nodes[st->node];
            return vram__fail_prefix(rc, "node '%s' (%s, step %d): ", n->name, n->op, i);
        }
    }
    return 0;
}

static int backend_ok(const vram_backend *b)
{
    return vram_backend_type_of(b) == VRAM_BACKEND_TYPE_HOST;
}

/* Whether convolution p runs on the fast kernels: not asked for the
 * reference, and its scratch fits a thread's workspace slice. */
static int takes_fast(const cpu_engine *ce, const vram__conv2d *p)
{
    return !ce->reference && vram__cpu_conv2d_fast_scratch(p) <= ce->part_bytes;
}

static void engine_fini(vram_engine *e)
{
    cpu_engine *ce = e->ex_state;
    if (ce->packed_block)
        vram_pool_free(e->pool, ce->packed_block, NULL);
    free(ce->packed);
    for (int i = 0; i < ce->n_var; i++)
        free(ce->steps[i]);
    free(ce->steps);
    free(ce);
    e->ex_state = NULL;
}

static int engine_init(vram_engine *e)
{
    cpu_engine *ce = vram__calloc(1, sizeof *ce);
    if (!ce)
        return VRAM_EHOSTMEM;
    e->ex_state = ce;
    ce->steps = vram__calloc((size_t)e->n_var, sizeof *ce->steps);
    if (!ce->steps)
        return VRAM_EHOSTMEM; /* engine_fini frees what was made */
    ce->reference = e->cpu_reference;
    ce->gemm = ce->reference ? vram__cpu_gemm : vram__cpu_gemm_fast;
    ce->gap = ce->reference ? vram__cpu_global_avgpool : vram__cpu_global_avgpool_fast;
    ce->threads = ce->reference ? 1 : e->threads;
    unsigned folded = 0;
    for (int i = 0; i < e->n_var; i++) {
        const vram__variant *v = &e->var[i];
        ce->steps[i] = vram__calloc((size_t)v->n_steps + 1, sizeof *ce->steps[i]);
        if (!ce->steps[i])
            return VRAM_EHOSTMEM;
        ce->n_var = i + 1;
        for (int s = 0; s < v->n_steps; s++)
            ce->steps[i][s] = (vram__cpu_step){.other = -1, .act = -1};
        if (!ce->reference)
            folded += vram__cpu_fuse(e, v, ce->steps[i]);
        uint64_t ws = variant_workspace(e, v, ce->reference); /* one serves every batch */
        if (ws > ce->part_bytes)
            ce->part_bytes = ws;
    }
    ce->part_bytes = (ce->part_bytes + 63) / 64 * 64; /* each thread's slice starts aligned */
    e->workspace_bytes = ce->part_bytes * (uint64_t)ce->threads;
    for (int i = 0; i < e->n_var; i++)
        for (int s = 0; s < e->var[i].n_steps; s++) {
            const vram__step *st = &e->var[i].steps[s];
            vram__cpu_step *cs = &ce->steps[i][s];
            cs->fast = st->op == VRAM__OP_CONV && takes_fast(ce, &st->p.conv);
            cs->split = cs->fast && ce->threads > 1 && conv_macs(&st->p.conv) >= TEAM_MIN_MACS;
        }
    vram_log(VRAM_LOG_INFO, "cpu engine: %s kernels, %d thread%s per context; %u convolutions do "
                             "the Add/activation steps after them in their epilogues (%d batch "
                             "sizes); workspace %llu bytes per thread (limit %llu)",
             ce->reference ? "reference" : "fast", ce->threads, ce->threads == 1 ? "" : "s", folded,
             e->n_var, (unsigned long long)ce->part_bytes, (unsigned long long)e->workspace_limit);
    return 0;
}

/* Whether step st's weights are worth packing at load: a dense or grouped
 * convolution on the fast kernels, whose weights are a constant. */
static int64_t packable(const vram_engine *e, const cpu_engine *ce, const vram__step *st, int mr)
{
    if (st->op != VRAM__OP_CONV || !takes_fast(ce, &st->p.conv))
        return 0;
    int w = e->g.nodes[st->node].in[1];
    if (w < 0 || e->place[w].loc != VRAM__LOC_WEIGHTS)
        return 0;
    return vram__cpu_conv2d_packed_floats(&st->p.conv, mr);
}

/* Pack every such convolution's weights into one block of the pool, for
 * the tiles in use. Every batch's steps read the same weights as the
 * largest batch's (e->steps), whose shapes they have. */
static int weights_ready(vram_engine *e)
{
    cpu_engine *ce = e->ex_state;
    if (ce->reference)
        return 0;
    int mr = vram__cpu_isa_get()->mr;
    int64_t total = 0;
    ce->packed = vram__calloc((size_t)e->g.n_values + 1, sizeof *ce->packed);
    if (!ce->packed)
        return VRAM_EHOSTMEM;
    int64_t *at = vram__calloc((size_t)e->g.n_values + 1, sizeof *at); /* floats in, +1 */
    if (!at)
        return VRAM_EHOSTMEM;
    for (int i = 0; i < e->n_steps; i++) {
        int64_t f = packable(e, ce, &e->steps[i], mr);
        if (f <= 0) /* only a convolution's node has a weight input to read */
            continue;
        int w = e->g.nodes[e->steps[i].node].in[1];
        if (!at[w]) {
            at[w] = total + 1;
            total += (f + 15) / 16 * 16; /* each starts on 64 bytes */
        }
    }
    int rc = 0;
    if (total > 0)
        rc = vram_pool_alloc(e->pool, (uint64_t)total * sizeof(float), e->owner, VRAM_KIND_WEIGHTS,
                             NULL, &ce->packed_block);
    if (rc) {
        free(at);
        return vram__fail_prefix(rc, "packing %llu bytes of convolution weights: ",
                                 (unsigned long long)total * sizeof(float));
    }
    for (int i = 0; i < e->n_steps && total > 0; i++) {
        const vram__step *st = &e->steps[i];
        if (packable(e, ce, st, mr) <= 0)
            continue;
        int w = e->g.nodes[st->node].in[1];
        if (ce->packed[w])
            continue;
        float *dst = (float *)ce->packed_block + at[w] - 1;
        vram__cpu_conv2d_pack(&st->p.conv, (const float *)((char *)e->weights + e->place[w].offset),
                              mr, dst);
        ce->packed[w] = dst;
    }
    free(at);
    ce->packed_mr = mr;
    e->packed_weights_bytes = (uint64_t)total * sizeof(float);
    return 0;
}

static int copy_in(vram_engine *e, vram_exec *c, void *dst, const void *src, size_t n)
{
    (void)e;
    (void)c;
    if (src)
        memcpy(dst, src, n);
    else
        memset(dst, 0, n);
    return 0;
}

static int copy_out(vram_exec *c, void *dst, const void *src, size_t n)
{
    (void)c;
    memcpy(dst, src, n);
    return 0;
}

static int context_init(vram_exec *c)
{
    const cpu_engine *ce = c->e->ex_state;
    cpu_context *cc = vram__calloc(1, sizeof *cc);
    if (!cc)
        return VRAM_EHOSTMEM;
    c->ex_state = cc;
    return ce->threads > 1 ? vram__team_create(ce->threads, &cc->team) : 0;
}

static void context_fini(vram_exec *c)
{
    cpu_context *cc = c->ex_state;
    vram__team_destroy(cc->team);
    free(cc);
    c->ex_state = NULL;
}

const vram__exec_ops vram__exec_cpu_ops = {
    .name = "cpu",
    .own_backend = "host",
    .workspace_default = 4u << 20,
    .backend_ok = backend_ok,
    .engine_init = engine_init,
    .engine_fini = engine_fini,
    .weights_ready = weights_ready,
    .copy_in = copy_in,
    .copy_out = copy_out,
    .context_init = context_init,
    .context_fini = context_fini,
    .run = exec_run,
};
