/* src/engine/exec_cpu_fuse.c - which steps the cpu executor folds into a
 * convolution: an Add of a residual and an activation after it (or the
 * activation alone) run inside the convolution's kernel, on each tile of
 * output while it is in cache, instead of as passes of their own over the
 * whole tensor.
 *
 * The convolution then writes the last folded step's result where that
 * step's output lives, so a step is folded only when the plan put that
 * output on the convolution's own memory (an element-wise step runs in
 * place over an input that dies there), and only when the value in between
 * has the next step as its one reader and is no graph output: nothing else
 * ever sees it. The residual must be complete when the convolution runs:
 * no step between the convolution and the Add writes it. Exact: the
 * epilogue rounds as the separate steps do ((y + bias) + other, then the
 * activation). */
#include "engine/exec_cpu_fuse.h"
#include "engine/fuse.h"

/* Whether value v is in the arena at the same place as value at. */
static int same_memory(const vram_engine *e, int v, int at)
{
    return v >= 0 && e->place[v].loc == VRAM__LOC_ARENA && e->place[at].loc == VRAM__LOC_ARENA &&
           e->place[v].offset == e->place[at].offset;
}

/* Whether a step after `from` and before `to` writes value v. */
static int written_between(const vram_engine *e, const vram__variant *var, int from, int to, int v)
{
    for (int i = from + 1; i < to; i++) {
        const vram__node *n = &e->g.nodes[var->steps[i].node];
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] == v)
                return 1;
    }
    return 0;
}

static int is_float_unary(const vram_engine *e, const vram__step *st)
{
    return st->op == VRAM__OP_UNARY && e->g.values[st->y].dtype == VRAM_DTYPE_FLOAT;
}

/* Fold into convolution i what follows it; 1 when anything was. */
static int fold(const vram_engine *e, const vram__variant *var, vram__cpu_step *steps, int i)
{
    const vram__step *conv = &var->steps[i];
    vram__cpu_step *cs = &steps[i];
    int k = vram__fuse_only_reader(e, var, i, conv->y);
    if (k < 0 || !same_memory(e, var->steps[k].y, conv->y))
        return 0;
    int act = -1;
    if (is_float_unary(e, &var->steps[k])) {
        act = k;
    } else {
        int other = vram__fuse_add_other(e, var, &var->steps[k], conv->y);
        if (other < 0 || written_between(e, var, i, k, other))
            return 0;
        cs->other = other;
        steps[k].done = 1;
        int r = vram__fuse_only_reader(e, var, k, var->steps[k].y);
        if (r >= 0 && is_float_unary(e, &var->steps[r]) &&
            same_memory(e, var->steps[r].y, conv->y))
            act = r;
    }
    if (act >= 0) {
        cs->act = act;
        steps[act].done = 1;
    }
    return 1;
}

unsigned vram__cpu_fuse(const vram_engine *e, const vram__variant *var, vram__cpu_step *steps)
{
    unsigned folded = 0;
    for (int i = 0; i < var->n_steps; i++)
        steps[i] = (vram__cpu_step){.other = -1, .act = -1};
    for (int i = 0; i < var->n_steps; i++)
        if (var->steps[i].op == VRAM__OP_CONV && !steps[i].done &&
            e->g.values[var->steps[i].y].dtype == VRAM_DTYPE_FLOAT)
            folded += (unsigned)fold(e, var, steps, i);
    return folded;
}
