/* src/engine/fuse.c - the graph questions behind epilogue folding, shared
 * by the executors that fold (fuse.h). */
#include "engine/fuse.h"

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

int vram__fuse_only_reader(const vram_engine *e, const vram__variant *var, int from, int v)
{
    if (v < 0 || readers(&e->g, v) != 1)
        return -1;
    for (int i = from + 1; i < var->n_steps; i++) {
        const vram__node *n = &e->g.nodes[var->steps[i].node];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v)
                return i;
    }
    return -1;
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

int vram__fuse_add_other(const vram_engine *e, const vram__variant *var, const vram__step *add,
                         int y)
{
    const vram__node *n = &e->g.nodes[add->node];
    if (add->op != VRAM__OP_BINARY || add->p.binary.op != VRAM__BIN_ADD || add->p.binary.i64 ||
        n->n_in != 2 || n->in[0] == n->in[1] || (n->in[0] != y && n->in[1] != y))
        return -1;
    int other = n->in[0] == y ? n->in[1] : n->in[0];
    const vram__shape *ys = &var->shape[y];
    if (other < 0 || !same_shape(&var->shape[other], ys) || !same_shape(&var->shape[add->y], ys))
        return -1;
    return other;
}
