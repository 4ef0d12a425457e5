/* src/engine/variants.c - one engine, every batch up to its largest. When a
 * model's inputs have a symbolic batch, each smaller batch is derived from
 * the model as decoded once: a clone of its graph that shares the decoded
 * weights, its shapes inferred at that batch and lowered, borrowing the
 * largest batch's folded weights; of each only the steps and the values'
 * shapes and sizes are kept. They must line up with the largest batch's:
 * the same steps over the same values, no tensor larger, and the same
 * constants (the weights are uploaded once); then a context runs any batch
 * on the largest batch's plan and bindings, planned once for the worst
 * case. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine_internal.h"
#include "shape.h"

static void variant_free(vram__variant *v)
{
    if (v->owns_steps) {
        for (int i = 0; i < v->n_steps; i++)
            free(v->steps[i].split_sizes);
        free(v->steps);
    }
    free(v->shape);
    free(v->bytes);
    memset(v, 0, sizeof *v);
}

void vram__variants_free(vram_engine *e)
{
    for (int i = 0; i < e->n_var; i++)
        variant_free(&e->var[i]);
    free(e->var);
    e->var = NULL;
    e->n_var = 0;
}

/* Shapes and sizes of graph g's values, for the values the engine uses. */
static int snapshot(const vram_engine *e, const vram__graph *g, vram__variant *v)
{
    v->shape = vram__calloc((size_t)g->n_values + 1, sizeof *v->shape);
    v->bytes = vram__calloc((size_t)g->n_values + 1, sizeof *v->bytes);
    if (!v->shape || !v->bytes)
        return VRAM_EHOSTMEM;
    for (int i = 0; i < g->n_values; i++) {
        v->shape[i] = g->values[i].shape;
        if (e->place[i].loc == VRAM__LOC_NONE)
            continue;
        int rc = vram__value_bytes(&g->values[i], &g->values[i].shape, &v->bytes[i]);
        if (rc)
            return vram__fail_prefix(rc, "at batch %lld: ", (long long)v->batch);
    }
    return 0;
}

/* Does the build at a smaller batch line up with the engine's? */
static int check_structure(const vram_engine *e, const vram_engine *t, const vram__variant *v)
{
    const vram__graph *g = &e->g, *h = &t->g;
    if (h->n_values != g->n_values || t->n_steps != e->n_steps)
        return vram__fail(VRAM_ENOSYS, "at batch %lld the model lowers to %d steps over %d "
                                       "tensors, at batch %lld to %d over %d: its structure "
                                       "depends on the batch",
                          (long long)v->batch, t->n_steps, h->n_values, (long long)e->batch,
                          e->n_steps, g->n_values);
    for (int i = 0; i < e->n_steps; i++)
        if (t->steps[i].node != e->steps[i].node || t->steps[i].op != e->steps[i].op)
            return vram__fail(VRAM_ENOSYS, "at batch %lld step %d differs from batch %lld's",
                              (long long)v->batch, i, (long long)e->batch);
    return 0;
}

static int check_sizes(const vram_engine *e, const vram_engine *t, const vram__variant *v)
{
    const vram__graph *g = &e->g, *h = &t->g;
    for (int i = 0; i < g->n_values; i++) {
        const vram__placement *pl = &e->place[i];
        if (pl->loc == VRAM__LOC_NONE)
            continue;
        if (v->bytes[i] > pl->bytes)
            return vram__fail(VRAM_ENOSYS, "tensor '%s' takes %llu bytes at batch %lld but %llu "
                                           "at batch %lld",
                              g->values[i].name, (unsigned long long)v->bytes[i],
                              (long long)v->batch, (unsigned long long)pl->bytes,
                              (long long)e->batch);
        /* Shared constants are the same bytes; folded ones are compared. */
        if (pl->loc == VRAM__LOC_WEIGHTS &&
            (!h->values[i].data || h->values[i].nbytes != g->values[i].nbytes ||
             (h->values[i].data != g->values[i].data &&
              memcmp(h->values[i].data, g->values[i].data, g->values[i].nbytes))))
            return vram__fail(VRAM_ENOSYS, "constant '%s' depends on the batch (it differs at "
                                           "batch %lld from batch %lld)",
                              g->values[i].name, (long long)v->batch, (long long)e->batch);
    }
    return 0;
}

/* Build the engine at batch b < e->batch into v, from the decoded model. */
static int build_one(vram_engine *e, const vram__graph *model, int64_t b, vram__variant *v)
{
    vram_engine t = {.batch = b, .alignment = e->alignment, .workspace_limit = e->workspace_limit};
    unsigned char *folded = NULL;
    v->batch = b;
    int rc = vram__graph_clone(model, &t.g);
    if (!rc) {
        folded = vram__calloc((size_t)t.g.n_nodes + 1, 1);
        rc = folded ? vram__infer_shapes(&t.g, b, folded) : VRAM_EHOSTMEM;
    }
    if (!rc)
        rc = vram__lower(&t, folded, &e->g);
    free(folded);
    if (!rc)
        rc = check_structure(e, &t, v);
    if (!rc) {
        v->steps = t.steps;
        v->n_steps = t.n_steps;
        v->owns_steps = 1;
        t.steps = NULL;
        rc = snapshot(e, &t.g, v);
    }
    if (!rc)
        rc = check_sizes(e, &t, v);
    for (int i = 0; t.steps && i < t.n_steps; i++)
        free(t.steps[i].split_sizes);
    free(t.steps);
    vram__graph_free(&t.g);
    return rc;
}

int64_t vram__model_batch(const vram__graph *model)
{
    int64_t fixed = 1;
    for (int i = model->n_inputs - 1; i >= 0; i--) {
        const vram__value *v = &model->values[model->inputs[i]];
        if (v->shape.rank > 0 && v->shape.dim[0] < 0)
            return 0;
        if (v->shape.rank > 0)
            fixed = v->shape.dim[0]; /* the first input's, in the end */
    }
    return fixed;
}

int vram__variants_build(vram_engine *e, const vram__graph *model)
{
    int n = e->batch > 1 && !vram__model_batch(model) ? (int)e->batch : 1;
    e->var = vram__calloc((size_t)n, sizeof *e->var);
    if (!e->var)
        return VRAM_EHOSTMEM;
    e->n_var = n;
    vram__variant *top = &e->var[n - 1];
    *top = (vram__variant){.batch = e->batch, .steps = e->steps, .n_steps = e->n_steps};
    int rc = snapshot(e, &e->g, top);
    for (int b = 1; !rc && b < n; b++) {
        rc = build_one(e, model, b, &e->var[b - 1]);
        if (rc)
            vram__fail_prefix(rc, "serving batches up to %lld: ", (long long)e->batch);
    }
    return rc;
}
