/* src/engine/cuda/cudnn_graph.c - a convolution as an execution plan of
 * cuDNN's graph API, built once per batch variant at load: the operation
 * graph of one forward convolution (pads may differ on each side), the
 * engines cuDNN's heuristics rank for it, and the first whose plan
 * finalizes within the workspace limit and, in exact FP32, uses neither
 * tensor cores (TF32) nor reduced precision and is deterministic. A run then
 * costs one cudnnBackendExecute on a variant pack made once per context
 * (the context's pointers never change), where the older API would work out
 * its engine again on every call. */
#include <stdio.h>

#include "cuda_internal.h"

#define SET(d, name, type, n, ptr) vram__dnn.cudnnBackendSetAttribute(d, name, type, n, ptr)

static cudnnStatus_t make_tensor(int64_t uid, const int64_t *dims, cudnnBackendDescriptor_t *out)
{
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    int64_t align = 16;
    cudnnStatus_t s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
    if (!s)
        s = SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    if (!s)
        s = SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (!s)
        s = SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (!s)
        s = SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (!s)
        s = SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(*out);
    return s;
}

static void destroy(cudnnBackendDescriptor_t *d)
{
    if (*d)
        vram__dnn.cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

/* The operation graph of y = conv(x, w). */
static cudnnStatus_t make_graph(cudnnHandle_t h, const vram__conv2d *p, cudnnBackendDescriptor_t t[3],
                                cudnnBackendDescriptor_t *conv, cudnnBackendDescriptor_t *op,
                                cudnnBackendDescriptor_t *graph)
{
    int64_t xd[4] = {p->n, p->c_in, p->h, p->w}, wd[4] = {p->c_out, p->c_in / p->group, p->kh, p->kw},
            yd[4] = {p->n, p->c_out, p->oh, p->ow};
    cudnnStatus_t s = make_tensor(1, xd, &t[0]);
    if (!s)
        s = make_tensor(2, wd, &t[1]);
    if (!s)
        s = make_tensor(3, yd, &t[2]);
    int64_t dims = 2, dil[2] = {p->dil_h, p->dil_w}, str[2] = {p->stride_h, p->stride_w},
            pre[2] = {p->pad_top, p->pad_left}, post[2] = {p->pad_bottom, p->pad_right};
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    if (!s)
        s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, conv);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre);
    if (!s)
        s = SET(*conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(*conv);
    float alpha = 1.0f, beta = 0.0f;
    if (!s)
        s = vram__dnn.cudnnBackendCreateDescriptor(
            CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, op);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &t[0]);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &t[1]);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &t[2]);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, conv);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    if (!s)
        s = SET(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(*op);
    if (!s)
        s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph);
    if (!s)
        s = SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, op);
    if (!s) /* the device the engines are chosen for */
        s = SET(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(*graph);
    return s;
}

/* May engine configuration cfg run in this precision mode? */
static int acceptable(cudnnBackendDescriptor_t cfg, int tf32)
{
    cudnnBackendDescriptor_t engine = NULL;
    int64_t n = 0;
    cudnnBackendNumericalNote_t notes[32];
    int ok = !vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) &&
             !vram__dnn.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) &&
             !vram__dnn.cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                 CUDNN_TYPE_NUMERICAL_NOTE, 32, &n, notes);
    for (int64_t i = 0; ok && i < n && i < 32; i++) {
        cudnnBackendNumericalNote_t x = notes[i];
        if (x == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
            x == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
            ok = 0;
        if (!tf32 && (x == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                      x == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
            ok = 0;
    }
    destroy(&engine);
    return ok;
}

int vram__cudnn_graph_plan(cudnnHandle_t h, const vram__conv2d *p, int tf32, uint64_t limit,
                           cudnnBackendDescriptor_t *plan, uint64_t *ws)
{
    cudnnBackendDescriptor_t t[3] = {0}, conv = NULL, op = NULL, graph = NULL, heur = NULL;
    cudnnBackendDescriptor_t cfgs[64] = {0};
    int64_t count = 0;
    *plan = NULL;
    cudnnStatus_t s = make_graph(h, p, t, &conv, &op, &graph);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    if (!s)
        s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (!s)
        s = SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &graph);
    if (!s)
        s = SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(heur);
    if (!s)
        s = vram__dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
    if (count > 64)
        count = 64;
    for (int64_t i = 0; !s && i < count; i++)
        s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]);
    if (!s)
        s = vram__dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, cfgs);
    for (int64_t i = 0; !s && !*plan && i < count; i++) {
        if (!acceptable(cfgs[i], tf32))
            continue;
        cudnnBackendDescriptor_t pl = NULL;
        int64_t bytes = 0, n = 0;
        if (vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &pl) ||
            SET(pl, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
            SET(pl, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &cfgs[i]) ||
            vram__dnn.cudnnBackendFinalize(pl) ||
            vram__dnn.cudnnBackendGetAttribute(pl, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                               CUDNN_TYPE_INT64, 1, &n, &bytes) ||
            bytes < 0 || (uint64_t)bytes > limit) {
            destroy(&pl);
            continue;
        }
        *plan = pl;
        *ws = (uint64_t)bytes;
    }
    for (int64_t i = 0; i < 64; i++)
        destroy(&cfgs[i]);
    destroy(&heur);
    destroy(&graph);
    destroy(&op);
    destroy(&conv);
    for (int i = 0; i < 3; i++)
        destroy(&t[i]);
    if (s)
        return vram__cudnn_fail(s, "building a cuDNN graph for the convolution");
    if (!*plan)
        return vram__fail(VRAM_ENOSYS, "cuDNN's graph API has no engine for this convolution "
                                       "within %llu bytes of workspace (%lld ranked)",
                          (unsigned long long)limit, (long long)count);
    return 0;
}

int vram__cudnn_graph_pack(const void *x, const void *w, void *y, void *ws,
                           cudnnBackendDescriptor_t *out)
{
    void *ptrs[3] = {(void *)x, (void *)w, y};
    int64_t uids[3] = {1, 2, 3};
    cudnnStatus_t s = vram__dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                                             out);
    if (!s)
        s = SET(*out, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (!s)
        s = SET(*out, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (!s)
        s = SET(*out, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (!s)
        s = vram__dnn.cudnnBackendFinalize(*out);
    if (s) {
        destroy(out);
        return vram__cudnn_fail(s, "making a cuDNN variant pack");
    }
    return 0;
}

void vram__cudnn_graph_free(cudnnBackendDescriptor_t *d) { destroy(d); }
