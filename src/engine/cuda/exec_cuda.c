/* src/engine/cuda/exec_cuda.c - the cuda executor: an engine's memory in a
 * pool on a GPU backend, weights copied up once; per engine the kernels'
 * module and each batch variant's planned convolutions and matrix products;
 * per context a stream from the device's pool, a cuDNN and a cuBLAS handle
 * bound to it (cuBLAS working in the context's workspace, so it allocates
 * nothing), and optionally a CUDA graph per batch, captured on the first
 * run at that batch and replayed afterwards. A run enqueues every step on
 * the context's stream and waits for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "cuda_internal.h"

#define ALIGN 256u
#define CUBLAS_WORKSPACE (4u << 20)
static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

static int backend_ok(const vram_backend *b) { return vram_backend_is_gpu(b); }

static void engine_fini(vram_engine *e)
{
    vram__cuda_engine *ce = e->ex_state;
    if (!ce)
        return;
    if (ce->dev)
        vram_device_bind(ce->dev);
    for (int v = 0; ce->steps && v < ce->n_var; v++) {
        for (int i = 0; ce->steps[v] && i < e->var[v].n_steps; i++)
            vram__cuda_step_free(&ce->steps[v][i]);
        free(ce->steps[v]);
    }
    free(ce->steps);
    free(ce->may_fail);
    if (ce->cuk)
        vram__cuk_unload(ce->cuk);
    free(ce);
    e->ex_state = NULL;
}

/* Can this step set the error word (data that makes it invalid)? */
static int step_may_fail(const vram__step *st)
{
    return st->op == VRAM__OP_GATHER ||
           (st->op == VRAM__OP_BINARY && st->p.binary.i64 && st->p.binary.op == VRAM__BIN_DIV);
}

static int plan_all(vram_engine *e, vram__cuda_engine *ce, cudnnHandle_t h, uint64_t *most)
{
    ce->n_var = e->n_var;
    ce->steps = vram__calloc((size_t)e->n_var, sizeof *ce->steps);
    ce->may_fail = vram__calloc((size_t)e->n_var, sizeof *ce->may_fail);
    if (!ce->steps || !ce->may_fail)
        return VRAM_EHOSTMEM;
    for (int v = 0; v < e->n_var; v++) {
        const vram__variant *var = &e->var[v];
        ce->steps[v] = vram__calloc((size_t)var->n_steps + 1, sizeof *ce->steps[v]);
        if (!ce->steps[v])
            return VRAM_EHOSTMEM;
        for (int i = 0; i < var->n_steps; i++) {
            vram__cuda_step *cs = &ce->steps[v][i];
            int rc = vram__cuda_plan_step(e, h, var, i, cs);
            if (rc)
                return rc;
            if (cs->kind == VRAM__CUDA_CONV &&
                cs->u.conv.pad_bytes + cs->u.conv.algo_bytes > *most)
                *most = cs->u.conv.pad_bytes + cs->u.conv.algo_bytes;
            if (cs->kind == VRAM__CUDA_GEMM)
                ce->has_gemm = 1;
            if (cs->kind == VRAM__CUDA_CONV)
                ce->convs[cs->u.conv.depthwise ? 2 : cs->u.conv.plan ? 0 : 1]++;
            ce->may_fail[v] |= step_may_fail(&var->steps[i]);
        }
        ce->epilogues += vram__cuda_fuse(e, var, ce->steps[v]);
    }
    return 0;
}

static int engine_init(vram_engine *e)
{
    vram_device *dev = vram_backend_device(vram_pool_backend(e->pool));
    if (!dev)
        return vram__fail(VRAM_EINVAL, "the cuda executor needs a pool on a GPU backend");
    vram__cuda_engine *ce = vram__calloc(1, sizeof *ce);
    if (!ce)
        return VRAM_EHOSTMEM;
    e->ex_state = ce;
    ce->dev = dev;
    int rc = vram_device_bind(dev);
    if (!rc)
        rc = vram__dnn_load();
    if (!rc)
        rc = vram__cuk_load(&ce->cuk);
    cudnnHandle_t h = NULL;
    if (!rc) {
        cudnnStatus_t s = vram__dnn.cudnnCreate(&h);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = vram__cudnn_fail(s, "cudnnCreate");
    }
    uint64_t most = 0;
    if (!rc)
        rc = plan_all(e, ce, h, &most);
    if (h)
        vram__dnn.cudnnDestroy(h);
    if (rc)
        return rc; /* engine_fini frees what was made */
    if (ce->has_gemm) {
        ce->cublas_bytes = e->workspace_limit < CUBLAS_WORKSPACE ? e->workspace_limit
                                                                 : CUBLAS_WORKSPACE;
        ce->cublas_bytes = ce->cublas_bytes / ALIGN * ALIGN;
        if (ce->cublas_bytes > most)
            most = ce->cublas_bytes;
    }
    vram_log(VRAM_LOG_INFO, "cuda engine: %u convolutions as cuDNN graph plans, %u through the "
                             "older API, %u depthwise on vramkit's kernel; %u Add/ReLU steps "
                             "folded into their epilogues; workspace %llu bytes (limit %llu)",
              ce->convs[0], ce->convs[1], ce->convs[2], ce->epilogues, (unsigned long long)most,
              (unsigned long long)e->workspace_limit);
    ce->err_offset = align_up(most);
    e->workspace_bytes = ce->err_offset + align_up(sizeof(vram__cuk_error));
    return 0;
}

static int copy_in(vram_engine *e, vram_exec *c, void *dst, const void *src, size_t n)
{
    vram__cuda_engine *ce = e->ex_state;
    int rc = vram_device_bind(ce->dev);
    if (rc)
        return rc;
    if (c) { /* ordered with the context's runs */
        CUstream s = ((vram__cuda_context *)c->ex_state)->stream;
        if (src)
            VRAM_CUDA_TRY(vram__ecu.cuMemcpyHtoDAsync(dptr(dst), src, n, s),
                         "cuMemcpyHtoDAsync of %zu bytes", n);
        else
            VRAM_CUDA_TRY(vram__ecu.cuMemsetD8Async(dptr(dst), 0, n, s), "cuMemsetD8Async of %zu bytes",
                         n);
        return 0;
    }
    /* on the legacy stream; context_setup waits for it once */
    if (src)
        VRAM_CUDA_TRY(vram__ecu.cuMemcpyHtoD(dptr(dst), src, n), "cuMemcpyHtoD of %zu bytes", n);
    else
        VRAM_CUDA_TRY(vram__ecu.cuMemsetD8(dptr(dst), 0, n), "cuMemsetD8 of %zu bytes", n);
    return 0;
}

static int copy_out(vram_exec *c, void *dst, const void *src, size_t n)
{
    vram__cuda_engine *ce = c->e->ex_state;
    vram__cuda_context *cc = c->ex_state;
    int rc = vram_device_bind(ce->dev);
    if (rc)
        return rc;
    VRAM_CUDA_TRY(vram__ecu.cuMemcpyDtoHAsync(dst, dptr(src), n, cc->stream),
                 "cuMemcpyDtoHAsync of %zu bytes", n);
    VRAM_CUDA_TRY(vram__ecu.cuStreamSynchronize(cc->stream), "cuStreamSynchronize");
    return 0;
}

static void context_fini(vram_exec *c)
{
    vram__cuda_engine *ce = c->e->ex_state;
    vram__cuda_context *cc = c->ex_state;
    if (!cc)
        return;
    vram_device_bind(ce->dev);
    if (cc->stream)
        vram__ecu.cuStreamSynchronize(cc->stream);
    for (int v = 0; cc->graph && v < ce->n_var; v++)
        if (cc->graph[v])
            vram__ecu.cuGraphExecDestroy(cc->graph[v]);
    free(cc->graph);
    for (int v = 0; cc->packs && v < ce->n_var; v++) {
        for (int i = 0; cc->packs[v] && i < c->e->var[v].n_steps; i++)
            vram__cudnn_graph_free(&cc->packs[v][i]);
        free(cc->packs[v]);
    }
    free(cc->packs);
    if (cc->cublas)
        vram__dnn.cublasDestroy_v2(cc->cublas);
    if (cc->cudnn)
        vram__dnn.cudnnDestroy(cc->cudnn);
    if (cc->stream)
        vram_device_stream_release(ce->dev, cc->stream);
    free(cc);
    c->ex_state = NULL;
    c->stream = NULL;
}

static int context_setup(vram_exec *c, vram__cuda_engine *ce, vram__cuda_context *cc)
{
    vram_engine *e = c->e;
    int rc = vram_device_bind(ce->dev);
    vram_stream s = NULL;
    if (!rc)
        rc = vram_device_stream_acquire(ce->dev, VRAM_PRIORITY_NORMAL, &s);
    if (rc)
        return rc;
    /* The weights went up on the legacy stream, which the context's
     * non-blocking stream does not wait for; a copy from pageable memory may
     * still be landing when cuMemcpyHtoD returns. */
    VRAM_CUDA_TRY(vram__ecu.cuStreamSynchronize(CU_STREAM_LEGACY), "waiting for the weights");
    cc->stream = s;
    c->stream = s;
    cc->graph = vram__calloc((size_t)ce->n_var, sizeof *cc->graph);
    cc->packs = vram__calloc((size_t)ce->n_var, sizeof *cc->packs);
    if (!cc->graph || !cc->packs)
        return VRAM_EHOSTMEM;
    cudnnStatus_t ds = vram__dnn.cudnnCreate(&cc->cudnn);
    if (ds != CUDNN_STATUS_SUCCESS)
        return vram__cudnn_fail(ds, "cudnnCreate");
    ds = vram__dnn.cudnnSetStream(cc->cudnn, cc->stream);
    if (ds != CUDNN_STATUS_SUCCESS)
        return vram__cudnn_fail(ds, "cudnnSetStream");
    if (ce->has_gemm) {
        cublasStatus_t bs = vram__dnn.cublasCreate_v2(&cc->cublas);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = vram__dnn.cublasSetStream_v2(cc->cublas, cc->stream);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = vram__dnn.cublasSetMathMode(cc->cublas, e->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                 : CUBLAS_DEFAULT_MATH);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = vram__dnn.cublasSetWorkspace_v2(cc->cublas, ce->cublas_bytes ? c->workspace : NULL,
                                                 ce->cublas_bytes);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return vram__cublas_fail(bs, "setting up cuBLAS for the context");
    }
    cc->err = (vram__cuk_error *)((char *)c->workspace + ce->err_offset);
    return 0;
}

static int context_init(vram_exec *c)
{
    vram__cuda_engine *ce = c->e->ex_state;
    vram__cuda_context *cc = vram__calloc(1, sizeof *cc);
    if (!cc)
        return VRAM_EHOSTMEM;
    c->ex_state = cc;
    return context_setup(c, ce, cc); /* on failure, context_fini undoes it */
}

/* Enqueue every step of the context's variant. */
static int enqueue(vram_exec *c, int vi)
{
    const vram_engine *e = c->e;
    vram__cuda_engine *ce = e->ex_state;
    vram__cuda_context *cc = c->ex_state;
    if (ce->may_fail[vi])
        VRAM_CUDA_TRY(vram__ecu.cuMemsetD8Async(dptr(cc->err), 0, sizeof *cc->err, cc->stream),
                     "clearing the error word");
    if (!cc->packs[vi] && !(cc->packs[vi] = vram__calloc((size_t)c->var->n_steps + 1,
                                                         sizeof *cc->packs[vi])))
        return VRAM_EHOSTMEM;
    for (int i = 0; i < c->var->n_steps; i++) {
        const vram__step *st = &c->var->steps[i];
        const vram__cuda_step *cs = &ce->steps[vi][i];
        int rc;
        if (st->y >= 0 && !c->var->bytes[st->y] && st->op != VRAM__OP_SPLIT &&
            st->op != VRAM__OP_GATHER) /* (a Gather still checks its indices) */
            continue; /* an empty output: nothing to compute */
        if (cs->kind == VRAM__CUDA_RELU_DONE && c->ptr[st->y] == c->ptr[st->x])
            continue;
        if (cs->kind == VRAM__CUDA_CONV)
            rc = vram__cuda_conv_run(ce, cc, c, st, &cs->u.conv, &cc->packs[vi][i]);
        else if (cs->kind == VRAM__CUDA_GEMM)
            rc = vram__cuda_gemm_run(ce, cc, c, st, &cs->u.gemm);
        else if (cs->kind == VRAM__CUDA_EPILOGUE)
            rc = vram__cuda_epilogue_run(ce, cc, c, st, &cs->u.epi);
        else
            rc = vram__cuk_step(ce->cuk, cc->stream, c, i, cc->err);
        if (rc) {
            const vram__node *n = &e->g.nodes[st->node];
            return vram__fail_prefix(rc, "node '%s' (%s, step %d): ", n->name, n->op, i);
        }
    }
    return 0;
}

/* Capture the variant's steps into a graph and instantiate it. */
static int capture(vram_exec *c, int vi, CUgraphExec *out)
{
    vram__cuda_context *cc = c->ex_state;
    VRAM_CUDA_TRY(vram__ecu.cuStreamBeginCapture(cc->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                 "cuStreamBeginCapture");
    int rc = enqueue(c, vi);
    vram__saved_error err;
    vram__error_save(&err);
    CUgraph g = NULL;
    CUresult r = vram__ecu.cuStreamEndCapture(cc->stream, &g);
    if (rc) {
        if (g)
            vram__ecu.cuGraphDestroy(g);
        vram__error_restore(&err, rc);
        return vram__fail_prefix(rc, "capturing a CUDA graph: ");
    }
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "cuStreamEndCapture");
    r = vram__ecu.cuGraphInstantiateWithFlags(out, g, 0);
    vram__ecu.cuGraphDestroy(g);
    if (r != CUDA_SUCCESS)
        return vram_cuda_fail(r, "cuGraphInstantiate");
    return 0;
}

static int report_data_error(const vram_exec *c, const vram__cuk_error *err)
{
    const vram__step *st = &c->var->steps[err->step >= 0 && err->step < c->var->n_steps ? err->step : 0];
    const vram__node *n = &c->e->g.nodes[st->node];
    if (err->code == VRAM__CUK_GATHER_INDEX)
        return vram__fail(VRAM_EINVAL, "node '%s' (%s, step %d): index %lld is outside [-%lld, %lld)",
                          n->name, n->op, err->step, err->value, err->bound, err->bound);
    if (err->code == VRAM__CUK_DIV_ZERO)
        return vram__fail(VRAM_EINVAL, "node '%s' (%s, step %d): integer division by zero",
                          n->name, n->op, err->step);
    return vram__fail(VRAM_EBACKEND, "node '%s' (%s, step %d): a kernel reported error %d",
                      n->name, n->op, err->step, err->code);
}

static int exec_run(vram_exec *c)
{
    vram__cuda_engine *ce = c->e->ex_state;
    vram__cuda_context *cc = c->ex_state;
    int vi = (int)(c->var - c->e->var), rc = vram_device_bind(ce->dev);
    if (rc)
        return rc;
    if (c->e->graphs) {
        if (!cc->graph[vi] && (rc = capture(c, vi, &cc->graph[vi])))
            return rc;
        VRAM_CUDA_TRY(vram__ecu.cuGraphLaunch(cc->graph[vi], cc->stream), "cuGraphLaunch");
    } else if ((rc = enqueue(c, vi))) {
        vram__ecu.cuStreamSynchronize(cc->stream); /* leave nothing in flight */
        return rc;
    }
    vram__cuk_error err = {0};
    if (ce->may_fail[vi])
        VRAM_CUDA_TRY(vram__ecu.cuMemcpyDtoHAsync(&err, dptr(cc->err), sizeof err, cc->stream),
                     "reading the error word");
    VRAM_CUDA_TRY(vram__ecu.cuStreamSynchronize(cc->stream), "running the model (cuStreamSynchronize)");
    return err.code ? report_data_error(c, &err) : 0;
}

static const vram__exec_ops ops = {
    .name = "cuda",
    .own_backend = "vmm",
    .workspace_default = 64u << 20,
    .backend_ok = backend_ok,
    .engine_init = engine_init,
    .engine_fini = engine_fini,
    .copy_in = copy_in,
    .copy_out = copy_out,
    .context_init = context_init,
    .context_fini = context_fini,
    .run = exec_run,
};

const vram__exec_ops *vram__exec_cuda_ops(void) { return &ops; }
