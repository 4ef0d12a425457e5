/* src/engine/cuda/cuda_fuse.c - which steps the cuda executor folds into a
 * convolution's epilogue. After cuDNN a convolution's bias is one more pass
 * over its output, and in residual networks an Add and a ReLU follow: three
 * passes that one kernel does in one, reading the convolution's output once.
 *
 * Exact by construction: the epilogue rounds as the separate steps would
 * ((y + bias) + other, then ReLU), and a step is folded only when the
 * convolution's output (and the Add's, for a ReLU after it) has that step
 * as its one reader and is no graph output, so nothing else ever sees the
 * value without its bias. The epilogue runs where the Add or ReLU ran and
 * writes that step's output, so the arena plan holds unchanged. The CPU
 * executor, the reference, runs every step as planned. */
#include "cuda_internal.h"

/* How many node inputs read value v, plus one if it is a graph output. */
static int readers(const vram__graph *g, int v)
{
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            count += g->nodes[i].in[j] == v;
    for (int i = 0; i < g->n_outputs; i++)
        count += g->outputs[i] == v;
    return count;
}

/* The one step after `from` that reads v (its only reader), or -1. */
static int only_reader(const vram_engine *e, const vram__variant *var, int from, int v)
{
    if (readers(&e->g, v) != 1)
        return -1;
    for (int i = from + 1; i < var->n_steps; i++) {
        const vram__node *n = &e->g.nodes[var->steps[i].node];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v)
                return i;
    }
    return -1;
}

static int is_relu(const vram__step *st)
{
    return st->op == VRAM__OP_UNARY && st->p.unary.op == VRAM__UN_RELU;
}

static int same_shape(const vram__shape *a, const vram__shape *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return 0;
    return 1;
}

/* The epilogue step k (the only reader of convolution i's output) can be,
 * or 0. Marks a ReLU after an Add as done by it. */
static int plan_epilogue(const vram_engine *e, const vram__variant *var, vram__cuda_step *steps,
                         int i, int k, vram__cuda_epilogue *ep)
{
    const vram__step *conv = &var->steps[i], *sk = &var->steps[k];
    const vram__node *n = &e->g.nodes[conv->node], *nk = &e->g.nodes[sk->node];
    const vram__conv2d *p = &conv->p.conv;
    *ep = (vram__cuda_epilogue){.conv_y = conv->y, .bias = n->n_in > 2 ? n->in[2] : -1,
                                .other = -1, .n = p->n, .c = p->c_out,
                                .spatial = p->oh * p->ow};
    if (steps[k].kind != VRAM__CUDA_KERNELS)
        return 0;
    if (is_relu(sk)) {
        ep->relu = 1;
        return ep->bias >= 0; /* a ReLU alone gains nothing */
    }
    if (sk->op != VRAM__OP_BINARY || sk->p.binary.op != VRAM__BIN_ADD || sk->p.binary.i64 ||
        nk->n_in != 2 || nk->in[0] == nk->in[1])
        return 0;
    ep->other = nk->in[0] == conv->y ? nk->in[1] : nk->in[0];
    const vram__shape *ys = &var->shape[conv->y];
    if (ep->other < 0 || !same_shape(&var->shape[ep->other], ys) ||
        !same_shape(&var->shape[sk->y], ys))
        return 0; /* a broadcast: the Add runs as planned */
    int r = only_reader(e, var, k, sk->y);
    if (r >= 0 && steps[r].kind == VRAM__CUDA_KERNELS && is_relu(&var->steps[r])) {
        ep->relu = 1;
        steps[r].kind = VRAM__CUDA_RELU_DONE;
    }
    return 1;
}

unsigned vram__cuda_fuse(const vram_engine *e, const vram__variant *var, vram__cuda_step *steps)
{
    unsigned folded = 0;
    for (int i = 0; i < var->n_steps; i++) {
        if (steps[i].kind != VRAM__CUDA_CONV || var->steps[i].op != VRAM__OP_CONV)
            continue;
        int k = only_reader(e, var, i, var->steps[i].y);
        vram__cuda_epilogue ep;
        if (k < 0 || !plan_epilogue(e, var, steps, i, k, &ep))
            continue;
        steps[i].u.conv.bias_later = 1;
        steps[k].kind = VRAM__CUDA_EPILOGUE;
        steps[k].u.epi = ep;
        folded++;
    }
    return folded;
}
