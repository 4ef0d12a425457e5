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
 * executor folds too, into the convolution itself (exec_cpu_fuse.c). */
#include "cuda_internal.h"
#include "engine/fuse.h"

static int is_relu(const vram__step *st)
{
    return st->op == VRAM__OP_UNARY && st->p.unary.op == VRAM__UN_RELU;
}

/* The epilogue step k (the only reader of convolution i's output) can be,
 * or 0. Marks a ReLU after an Add as done by it. */
static int plan_epilogue(const vram_engine *e, const vram__variant *var, vram__cuda_step *steps,
                         int i, int k, vram__cuda_epilogue *ep)
{
    const vram__step *conv = &var->steps[i], *sk = &var->steps[k];
    const vram__node *n = &e->g.nodes[conv->node];
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
    ep->other = vram__fuse_add_other(e, var, sk, conv->y);
    if (ep->other < 0)
        return 0; /* not an Add, or a broadcast: it runs as planned */
    int r = vram__fuse_only_reader(e, var, k, sk->y);
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
        int k = vram__fuse_only_reader(e, var, i, var->steps[i].y);
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
