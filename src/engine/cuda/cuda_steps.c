/* src/engine/cuda/cuda_steps.c - convolutions through cuDNN (depthwise ones
 * on our kernel) and matrix products through cuBLAS, and the epilogues that
 * finish convolutions: planned once per batch variant at load
 * (descriptors, the algorithm cuDNN's heuristics rank fastest among those
 * whose workspace fits the limit, exact FP32 unless TF32 is allowed), and
 * enqueued on a context's stream at run time. Tensors are row-major NCHW
 * float32; cuBLAS is column-major, so Y = A B is computed as Y^T = B^T A^T. */
#include <limits.h>
#include <stdio.h>

#include "cuda_internal.h"

#define ALIGN 256u
static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static int too_big(int64_t x) { return x < 0 || x > INT_MAX; }

#define DNN_TRY(call, what)                                                                   \
    do {                                                                                      \
        cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                       \
            return vram__cudnn_fail(s_, what);                                                \
    } while (0)

static int plan_conv(vram_engine *e, cudnnHandle_t h, const vram__step *st, vram__cuda_conv *c)
{
    const vram__conv2d *p = &st->p.conv;
    if (p->group > 1 && p->group == p->c_in && p->group == p->c_out) {
        c->depthwise = 1; /* memory-bound: our kernel, bias and unequal pads included */
        return 0;
    }
    /* other grouped convolutions stay on the older API, which takes them;
     * the graph API's heuristics do not */
    if (p->group == 1 &&
        !vram__cudnn_graph_plan(h, p, e->tf32, e->workspace_limit, &c->plan, &c->algo_bytes))
        return 0;
    c->algo_bytes = 0; /* the older API, which takes every convolution */
    int64_t hp = p->h, wp = p->w, pt = p->pad_top, pl = p->pad_left;
    if (p->pad_top != p->pad_bottom || p->pad_left != p->pad_right) {
        hp = p->h + p->pad_top + p->pad_bottom;
        wp = p->w + p->pad_left + p->pad_right;
        pt = pl = 0;
        c->pad_bytes = align_up((uint64_t)(p->n * p->c_in * hp * wp) * sizeof(float));
    }
    int64_t dims[] = {p->n, p->c_in, hp, wp, p->c_out, p->kh, p->kw, p->oh, p->ow, pt, pl,
                      p->n * p->c_in * hp * wp, p->n * p->c_out * p->oh * p->ow};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (too_big(dims[i]))
            return vram__fail(VRAM_ENOSYS, "a convolution with a dimension or size of %lld: "
                                           "cuDNN takes at most %d",
                              (long long)dims[i], INT_MAX);
    DNN_TRY(vram__dnn.cudnnCreateTensorDescriptor(&c->xd), "cudnnCreateTensorDescriptor");
    DNN_TRY(vram__dnn.cudnnCreateTensorDescriptor(&c->yd), "cudnnCreateTensorDescriptor");
    DNN_TRY(vram__dnn.cudnnCreateFilterDescriptor(&c->wd), "cudnnCreateFilterDescriptor");
    DNN_TRY(vram__dnn.cudnnCreateConvolutionDescriptor(&c->cd),
            "cudnnCreateConvolutionDescriptor");
    DNN_TRY(vram__dnn.cudnnSetTensor4dDescriptor(c->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                 (int)p->n, (int)p->c_in, (int)hp, (int)wp),
            "cudnnSetTensor4dDescriptor (input)");
    DNN_TRY(vram__dnn.cudnnSetFilter4dDescriptor(c->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 (int)p->c_out, (int)(p->c_in / p->group),
                                                 (int)p->kh, (int)p->kw),
            "cudnnSetFilter4dDescriptor");
    DNN_TRY(vram__dnn.cudnnSetConvolution2dDescriptor(c->cd, (int)pt, (int)pl, (int)p->stride_h,
                                                      (int)p->stride_w, (int)p->dil_h,
                                                      (int)p->dil_w, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor");
    DNN_TRY(vram__dnn.cudnnSetConvolutionGroupCount(c->cd, (int)p->group),
            "cudnnSetConvolutionGroupCount");
    DNN_TRY(vram__dnn.cudnnSetConvolutionMathType(c->cd, e->tf32 ? CUDNN_DEFAULT_MATH
                                                                 : CUDNN_FMA_MATH),
            "cudnnSetConvolutionMathType");
    int on, oc, oh, ow;
    DNN_TRY(vram__dnn.cudnnGetConvolution2dForwardOutputDim(c->cd, c->xd, c->wd, &on, &oc, &oh,
                                                            &ow),
            "cudnnGetConvolution2dForwardOutputDim");
    if (on != p->n || oc != p->c_out || oh != p->oh || ow != p->ow)
        return vram__fail(VRAM_EINVAL, "cuDNN makes this convolution's output [%d,%d,%d,%d], "
                                       "the model says [%lld,%lld,%lld,%lld]",
                          on, oc, oh, ow, (long long)p->n, (long long)p->c_out,
                          (long long)p->oh, (long long)p->ow);
    DNN_TRY(vram__dnn.cudnnSetTensor4dDescriptor(c->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                 (int)p->n, (int)p->c_out, (int)p->oh,
                                                 (int)p->ow),
            "cudnnSetTensor4dDescriptor (output)");

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 3];
    int most = 0, got = 0;
    DNN_TRY(vram__dnn.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &most),
            "cudnnGetConvolutionForwardAlgorithmMaxCount");
    if (most > (int)(sizeof perf / sizeof perf[0]))
        most = (int)(sizeof perf / sizeof perf[0]);
    DNN_TRY(vram__dnn.cudnnGetConvolutionForwardAlgorithm_v7(h, c->xd, c->wd, c->cd, c->yd, most,
                                                             &got, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7");
    uint64_t limit = e->workspace_limit;
    for (int i = 0; i < got; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > limit)
            continue;
        if (!e->tf32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH)
            continue;
        DNN_TRY(vram__dnn.cudnnSetConvolutionMathType(c->cd, perf[i].mathType),
                "cudnnSetConvolutionMathType");
        size_t ws = 0;
        if (vram__dnn.cudnnGetConvolutionForwardWorkspaceSize(h, c->xd, c->wd, c->cd, c->yd,
                                                              perf[i].algo, &ws) !=
                CUDNN_STATUS_SUCCESS ||
            ws > limit)
            continue;
        c->algo = perf[i].algo;
        c->algo_bytes = ws;
        return 0;
    }
    return vram__fail(VRAM_ENOSYS, "cuDNN has no algorithm for this convolution within a "
                                   "workspace of %llu bytes (%d ranked)",
                      (unsigned long long)limit, got);
}

/* MatMul's operands as NumPy sees them: m, k, n and the batch strides. */
static void plan_matmul(const vram__variant *v, const vram__node *n, const vram__step *st,
                        vram__cuda_gemm *g)
{
    const vram__shape *as = &v->shape[n->in[0]], *bs = &v->shape[n->in[1]];
    const vram__shape *ys = &v->shape[st->y];
    g->m = as->rank >= 2 ? as->dim[as->rank - 2] : 1;
    g->k = as->dim[as->rank - 1];
    g->n = bs->rank >= 2 ? bs->dim[bs->rank - 1] : 1;
    int64_t a_batch = 1, b_batch = 1, y_batch = 1;
    for (int i = 0; i < as->rank - 2; i++)
        a_batch *= as->dim[i];
    for (int i = 0; i < bs->rank - 2; i++)
        b_batch *= bs->dim[i];
    int yb = ys->rank - (as->rank >= 2) - (bs->rank >= 2);
    for (int i = 0; i < yb; i++)
        y_batch *= ys->dim[i];
    g->count = y_batch;
    g->stride_a = a_batch == 1 ? 0 : g->m * g->k;
    g->stride_b = b_batch == 1 ? 0 : g->k * g->n;
    /* One stride per operand only if its batch is all of y's or none: an
     * operand's dimensions each equal y's or are 1, so the same count means
     * the same layout. */
    g->per_batch = (a_batch != 1 && a_batch != y_batch) || (b_batch != 1 && b_batch != y_batch);
}

int vram__cuda_plan_step(vram_engine *e, cudnnHandle_t h, const vram__variant *v, int index,
                         vram__cuda_step *out)
{
    const vram__step *st = &v->steps[index];
    const vram__node *n = &e->g.nodes[st->node];
    *out = (vram__cuda_step){0};
    int rc = 0;
    if (st->op == VRAM__OP_CONV) {
        out->kind = VRAM__CUDA_CONV;
        rc = plan_conv(e, h, st, &out->u.conv);
    } else if (st->op == VRAM__OP_GEMM) {
        out->kind = VRAM__CUDA_GEMM;
        vram__cuda_gemm *g = &out->u.gemm;
        g->trans_a = st->p.gemm.trans_a;
        g->trans_b = st->p.gemm.trans_b;
        g->m = st->p.gemm.m;
        g->n = st->p.gemm.n;
        g->k = st->p.gemm.k;
        g->count = 1;
    } else if (st->op == VRAM__OP_MATMUL) {
        out->kind = VRAM__CUDA_GEMM;
        plan_matmul(v, n, st, &out->u.gemm);
    }
    if (!rc && out->kind == VRAM__CUDA_GEMM) {
        const vram__cuda_gemm *g = &out->u.gemm;
        if (too_big(g->m) || too_big(g->n) || too_big(g->k) || too_big(g->count))
            rc = vram__fail(VRAM_ENOSYS, "a matrix product of %lld x %lld x %lld (x %lld): "
                                         "cuBLAS takes at most %d per dimension",
                            (long long)g->m, (long long)g->k, (long long)g->n,
                            (long long)g->count, INT_MAX);
    }
    if (rc)
        return vram__fail_prefix(rc, "node '%s' (%s, step %d, batch %lld): ", n->name, n->op,
                                 index, (long long)v->batch);
    return 0;
}

void vram__cuda_step_free(vram__cuda_step *s)
{
    if (s->kind != VRAM__CUDA_CONV)
        return;
    vram__cuda_conv *c = &s->u.conv;
    vram__cudnn_graph_free(&c->plan);
    if (c->xd)
        vram__dnn.cudnnDestroyTensorDescriptor(c->xd);
    if (c->yd)
        vram__dnn.cudnnDestroyTensorDescriptor(c->yd);
    if (c->wd)
        vram__dnn.cudnnDestroyFilterDescriptor(c->wd);
    if (c->cd)
        vram__dnn.cudnnDestroyConvolutionDescriptor(c->cd);
    *s = (vram__cuda_step){0};
}

static void *in_ptr(const vram_exec *ctx, const vram__node *n, int i)
{
    return n->n_in > i && n->in[i] >= 0 ? ctx->ptr[n->in[i]] : NULL;
}

int vram__cuda_conv_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                        const vram_exec *ctx, const vram__step *st, const vram__cuda_conv *c,
                        cudnnBackendDescriptor_t *pack)
{
    const vram__conv2d *p = &st->p.conv;
    const vram__node *n = &ctx->e->g.nodes[st->node];
    const float *x = ctx->ptr[st->x], *w = in_ptr(ctx, n, 1), *bias = in_ptr(ctx, n, 2);
    float *y = ctx->ptr[st->y];
    char *ws = ctx->workspace;
    if (c->bias_later)
        bias = NULL;
    if (c->depthwise)
        return vram__cuk_dwconv(ce->cuk, cc->stream, p, x, w, bias, y);
    if (c->plan) {
        int rc = *pack ? 0 : vram__cudnn_graph_pack(x, w, y, c->algo_bytes ? ws : NULL, pack);
        if (rc)
            return rc;
        DNN_TRY(vram__dnn.cudnnBackendExecute(cc->cudnn, c->plan, *pack), "cudnnBackendExecute");
    } else if (c->pad_bytes) {
        int rc = vram__cuk_pad2d(ce->cuk, cc->stream, p->n, p->c_in, p->h, p->w, p->pad_top,
                                 p->pad_left, p->pad_bottom, p->pad_right, x, (float *)ws);
        if (rc)
            return rc;
        x = (const float *)ws;
        ws += c->pad_bytes;
    }
    const float one = 1.0f, zero = 0.0f;
    if (!c->plan)
        DNN_TRY(vram__dnn.cudnnConvolutionForward(cc->cudnn, &one, c->xd, x, c->wd, w, c->cd,
                                                  c->algo, c->algo_bytes ? ws : NULL,
                                                  c->algo_bytes, &zero, c->yd, y),
                "cudnnConvolutionForward");
    if (bias)
        return vram__cuk_epilogue(ce->cuk, cc->stream, p->n, p->c_out, p->oh * p->ow, y, bias,
                                  NULL, 0, y);
    return 0;
}

int vram__cuda_epilogue_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                            const vram_exec *ctx, const vram__step *st,
                            const vram__cuda_epilogue *ep)
{
    return vram__cuk_epilogue(ce->cuk, cc->stream, ep->n, ep->c, ep->spatial,
                              ctx->ptr[ep->conv_y], ep->bias >= 0 ? ctx->ptr[ep->bias] : NULL,
                              ep->other >= 0 ? ctx->ptr[ep->other] : NULL, ep->relu,
                              ctx->ptr[st->y]);
}

#define BLAS_TRY(call, what)                                                                  \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return vram__cublas_fail(s_, what);                                               \
    } while (0)

/* Offsets of product i's operands when MatMul's batch broadcasts unevenly:
 * unravel i over y's batch dimensions and map each onto a and b (a
 * dimension of 1 stays at 0). */
static void batch_offsets(const vram__shape *as, const vram__shape *bs, const vram__shape *ys,
                          int yb, int64_t i, int64_t mk, int64_t kn, int64_t *oa, int64_t *ob)
{
    int64_t ia = 0, ib = 0, sa = mk, sb = kn;
    int ab = as->rank - 2, bb = bs->rank - 2;
    for (int d = yb - 1; d >= 0; d--) {
        int64_t idx = i % ys->dim[d];
        i /= ys->dim[d];
        int da = d - (yb - ab), db = d - (yb - bb);
        if (da >= 0) {
            ia += (as->dim[da] == 1 ? 0 : idx) * sa;
            sa *= as->dim[da];
        }
        if (db >= 0) {
            ib += (bs->dim[db] == 1 ? 0 : idx) * sb;
            sb *= bs->dim[db];
        }
    }
    *oa = ia;
    *ob = ib;
}

int vram__cuda_gemm_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                        const vram_exec *ctx, const vram__step *st, const vram__cuda_gemm *g)
{
    const vram__node *n = &ctx->e->g.nodes[st->node];
    const float *a = in_ptr(ctx, n, 0), *b = in_ptr(ctx, n, 1);
    float *y = ctx->ptr[st->y];
    float alpha = 1.0f, beta = 0.0f;
    int m = (int)g->m, nn = (int)g->n, k = (int)g->k;
    if (!m || !nn || !g->count)
        return 0;
    if (st->op == VRAM__OP_GEMM) {
        const float *c = in_ptr(ctx, n, 2);
        alpha = st->p.gemm.alpha;
        if (c && st->p.gemm.beta != 0.0f) {
            int rc = vram__cuk_broadcast2d(ce->cuk, cc->stream, g->m, g->n, st->p.gemm.c_rows,
                                           st->p.gemm.c_cols, st->p.gemm.beta, c, y);
            if (rc)
                return rc;
            beta = 1.0f;
        }
    }
    if (!k && beta == 0.0f) /* an empty sum: cuBLAS would leave y as it was */
        return vram__cuk_broadcast2d(ce->cuk, cc->stream, g->m, g->n, 1, 1, 0.0f, y, y);
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : nn;
    if (lda < 1)
        lda = 1;
    if (ldb < 1)
        ldb = 1;
    if (g->count == 1)
        BLAS_TRY(vram__dnn.cublasSgemm_v2(cc->cublas, op_b, op_a, nn, m, k, &alpha, b, ldb, a,
                                          lda, &beta, y, nn),
                 "cublasSgemm");
    else if (!g->per_batch)
        BLAS_TRY(vram__dnn.cublasSgemmStridedBatched(cc->cublas, op_b, op_a, nn, m, k, &alpha, b,
                                                     ldb, g->stride_b, a, lda, g->stride_a, &beta,
                                                     y, nn, g->m * g->n, (int)g->count),
                 "cublasSgemmStridedBatched");
    else {
        const vram__shape *as = &ctx->var->shape[n->in[0]], *bs = &ctx->var->shape[n->in[1]];
        const vram__shape *ys = &ctx->var->shape[st->y];
        int yb = ys->rank - (as->rank >= 2) - (bs->rank >= 2);
        for (int64_t i = 0; i < g->count; i++) {
            int64_t oa, ob;
            batch_offsets(as, bs, ys, yb, i, g->m * g->k, g->k * g->n, &oa, &ob);
            BLAS_TRY(vram__dnn.cublasSgemm_v2(cc->cublas, op_b, op_a, nn, m, k, &alpha, b + ob,
                                              ldb, a + oa, lda, &beta, y + i * g->m * g->n, nn),
                     "cublasSgemm");
        }
    }
    return 0;
}
