/* src/engine/cuda/cuda_internal.h - the cuda executor's state: per engine,
 * the kernels' module and, for every batch variant, what each convolution
 * and matrix product was planned to run with (cuDNN descriptors and
 * algorithm, cuBLAS shapes); per context, its stream, library handles, the
 * error word and the CUDA graphs captured from its runs. */
#ifndef VRAM_ENGINE_CUDA_INTERNAL_H
#define VRAM_ENGINE_CUDA_INTERNAL_H

#include "cuk.h"
#include "dnn.h"
#include "engine/engine_internal.h"

/* A convolution as it runs: a depthwise one on our own kernel; otherwise an
 * execution plan of cuDNN's graph API (cudnn_graph.c) where one finalizes,
 * else the older API's descriptors and algorithm. There, with unequal pads
 * on an axis the input is first copied, zero-padded, to the workspace's
 * start (pad_bytes) and cuDNN pads nothing; cuDNN's own workspace follows.
 * bias_later: a later step adds the bias (an epilogue, below). */
typedef struct vram__cuda_conv {
    int depthwise;
    int bias_later;
    cudnnBackendDescriptor_t plan; /* graph API (NULL: the older API) */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    uint64_t algo_bytes; /* cuDNN's workspace */
    uint64_t pad_bytes;  /* the padded copy of the input, 0 if none */
} vram__cuda_conv;

/* A matrix product as cuBLAS runs it: `count` products of (m x k)(k x n),
 * operands advancing by stride_a / stride_b (0: broadcast) per product;
 * MatMul batches whose broadcast is not one stride per operand go product by
 * product with their offsets computed (per_batch). */
typedef struct vram__cuda_gemm {
    int trans_a, trans_b;
    int64_t m, n, k, count, stride_a, stride_b;
    int per_batch;
} vram__cuda_gemm;

/* The step after a convolution, when it is the only reader of the
 * convolution's output, finishes it in one pass (cuda_fuse.c): y =
 * relu?(conv output + bias + other), where the step is a ReLU (other -1) or
 * an Add of two equal shapes (other: its second operand), optionally with
 * the ReLU that alone reads the Add's output. Value indices; -1: none. */
typedef struct vram__cuda_epilogue {
    int conv_y, bias, other, relu;
    int64_t n, c, spatial;
} vram__cuda_epilogue;

enum {
    VRAM__CUDA_KERNELS,  /* our kernels (cuk_steps.c, cuk_move.c) */
    VRAM__CUDA_CONV,     /* cuDNN or the depthwise kernel */
    VRAM__CUDA_GEMM,     /* cuBLAS: Gemm, MatMul */
    VRAM__CUDA_EPILOGUE, /* an Add or ReLU folded into a convolution's epilogue */
    VRAM__CUDA_RELU_DONE /* a ReLU the epilogue before it applied: runs only when its
                            output is not its input (ReLU twice is ReLU once) */
};

typedef struct vram__cuda_step {
    int kind; /* VRAM__CUDA_... */
    union {
        vram__cuda_conv conv;
        vram__cuda_gemm gemm;
        vram__cuda_epilogue epi;
    } u;
} vram__cuda_step;

typedef struct vram__cuda_engine {
    vram_device *dev;
    vram__cuk *cuk;
    vram__cuda_step **steps; /* [variant][step] */
    int n_var;
    int *may_fail;           /* per variant: a step can set the error word */
    uint64_t cublas_bytes;   /* of the workspace, for cuBLAS */
    uint64_t err_offset;     /* of the error word in the workspace */
    int has_gemm;
    unsigned convs[3];       /* planned: graph API, the older API, depthwise kernel */
    unsigned epilogues;      /* Add/ReLU steps folded into convolutions */
} vram__cuda_engine;

typedef struct vram__cuda_context {
    CUstream stream;
    cudnnBackendDescriptor_t **packs; /* [variant][step]: graph-API variant packs,
                                         made on the first run at that batch */
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    vram__cuk_error *err;       /* device: in the workspace */
    CUgraphExec *graph;         /* per variant, captured on its first run */
} vram__cuda_context;

/* cuda_steps.c: plan step `index` of variant v (descriptors, algorithm under
 * the workspace limit) with the planning handle; free what a plan holds;
 * enqueue a planned convolution or matrix product. */
int vram__cuda_plan_step(vram_engine *e, cudnnHandle_t h, const vram__variant *v, int index,
                         vram__cuda_step *out);
void vram__cuda_step_free(vram__cuda_step *s);
int vram__cuda_conv_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                        const vram_exec *ctx, const vram__step *st, const vram__cuda_conv *p,
                        cudnnBackendDescriptor_t *pack);

/* cudnn_graph.c: the convolution's plan for the device of handle h (the
 * fastest acceptable engine within `limit` bytes of workspace, *ws set;
 * ungrouped convolutions only), a variant pack binding its pointers, and
 * freeing either. */
int vram__cudnn_graph_plan(cudnnHandle_t h, const vram__conv2d *p, int tf32, uint64_t limit,
                           cudnnBackendDescriptor_t *plan, uint64_t *ws);
int vram__cudnn_graph_pack(const void *x, const void *w, void *y, void *ws,
                           cudnnBackendDescriptor_t *out);
void vram__cudnn_graph_free(cudnnBackendDescriptor_t *d);
int vram__cuda_gemm_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                        const vram_exec *ctx, const vram__step *st, const vram__cuda_gemm *p);

/* cuda_fuse.c: fold the steps after variant v's convolutions into their
 * epilogues where that is exact; returns how many were folded. */
unsigned vram__cuda_fuse(const vram_engine *e, const vram__variant *v, vram__cuda_step *steps);
int vram__cuda_epilogue_run(const vram__cuda_engine *ce, vram__cuda_context *cc,
                            const vram_exec *ctx, const vram__step *st,
                            const vram__cuda_epilogue *ep);

#endif
