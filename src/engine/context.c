/* src/engine/context.c - contexts: one execution's memory (arena, workspace,
 * input and output bindings) taken from the engine's pool when the context
 * is made, every value's address resolved then, and runs that allocate
 * nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine_internal.h"

static void context_free(vram_exec *c)
{
    vram_engine *e = c->e;
    if (c->ex_state)
        e->ex->context_fini(c);
    void *blocks[] = {c->arena, c->io, c->workspace};
    for (size_t i = 0; i < 3; i++)
        if (blocks[i])
            vram_pool_free(e->pool, blocks[i], NULL);
    free(c->ptr);
    free(c);
}

static int take(vram_engine *e, uint64_t bytes, vram_kind kind, const char *what, void **out)
{
    *out = NULL;
    if (!bytes)
        return 0;
    int rc = vram_pool_alloc(e->pool, bytes, e->owner, kind, NULL, out);
    if (rc)
        return vram__fail_prefix(rc, "context %s (%llu bytes): ", what, (unsigned long long)bytes);
    return 0;
}

int vram_exec_create(vram_engine *e, vram_exec **out)
{
    if (!e || !out)
        return vram__fail(VRAM_EINVAL, "vram_exec_create: engine and out are required");
    *out = NULL;
    vram_exec *c = vram__calloc(1, sizeof *c);
    if (!c)
        return VRAM_EHOSTMEM;
    c->e = e;
    c->var = &e->var[e->n_var - 1];
    c->ptr = vram__calloc((size_t)e->g.n_values + 1, sizeof *c->ptr);
    int rc = c->ptr ? 0 : VRAM_EHOSTMEM;
    if (!rc)
        rc = take(e, e->arena_bytes, VRAM_KIND_ACTIVATIONS, "arena", &c->arena);
    if (!rc)
        rc = take(e, e->io_bytes, VRAM_KIND_IO, "bindings", &c->io);
    if (!rc)
        rc = take(e, e->workspace_bytes, VRAM_KIND_WORKSPACE, "workspace", &c->workspace);
    if (!rc)
        rc = e->ex->context_init(c);
    for (int v = 0; !rc && v < e->g.n_values; v++) {
        const vram__placement *pl = &e->place[v];
        switch (pl->loc) {
        case VRAM__LOC_WEIGHTS:
            c->ptr[v] = (char *)e->weights + pl->offset;
            break;
        case VRAM__LOC_ARENA:
            c->ptr[v] = (char *)c->arena + pl->offset;
            break;
        case VRAM__LOC_INPUT:
        case VRAM__LOC_OUTPUT: /* a constant output is written once; the rest start at 0 */
            c->ptr[v] = (char *)c->io + pl->offset;
            rc = e->ex->copy_in(e, c, c->ptr[v], e->g.values[v].data, (size_t)pl->bytes);
            break;
        default:
            break;
        }
    }
    if (rc) {
        vram__saved_error err; /* giving memory back clears the error sentence */
        vram__error_save(&err);
        context_free(c);
        return vram__error_restore(&err, rc);
    }
    atomic_fetch_add(&e->contexts, 1);
    *out = c;
    return 0;
}

int vram_exec_destroy(vram_exec *c)
{
    if (!c)
        return 0;
    vram_engine *e = c->e;
    context_free(c);
    atomic_fetch_sub(&e->contexts, 1);
    return 0;
}

int vram_exec_set_input(vram_exec *c, size_t i, const void *data, size_t bytes)
{
    if (!c || (!data && bytes))
        return vram__fail(VRAM_EINVAL, "vram_exec_set_input: context and data are required");
    const vram_engine *e = c->e;
    if (i >= (size_t)e->g.n_inputs)
        return vram__fail(VRAM_EINVAL, "input %zu does not exist (the model has %d)", i,
                          e->g.n_inputs);
    int v = e->g.inputs[i];
    if (bytes != c->var->bytes[v])
        return vram__fail(VRAM_EINVAL, "input '%s' takes %llu bytes (%s, batch %lld), not %zu",
                          e->g.values[v].name, (unsigned long long)c->var->bytes[v],
                          vram_dtype_name(e->g.values[v].dtype), (long long)c->var->batch, bytes);
    return bytes ? e->ex->copy_in(c->e, c, c->ptr[v], data, bytes) : 0;
}

int vram_exec_input_binding(vram_exec *c, size_t i, void **data, size_t *bytes)
{
    if (!c || !data || !bytes)
        return vram__fail(VRAM_EINVAL,
                          "vram_exec_input_binding: context, data and bytes are required");
    const vram_engine *e = c->e;
    if (i >= (size_t)e->g.n_inputs)
        return vram__fail(VRAM_EINVAL, "input %zu does not exist (the model has %d)", i,
                          e->g.n_inputs);
    int v = e->g.inputs[i];
    *data = c->ptr[v];
    *bytes = (size_t)c->var->bytes[v];
    return 0;
}

int vram_exec_run(vram_exec *c)
{
    if (!c)
        return vram__fail(VRAM_EINVAL, "vram_exec_run: context is NULL");
    return c->e->ex->run(c);
}

int vram_exec_output(vram_exec *c, size_t i, const void **data, size_t *bytes)
{
    if (!c || !data || !bytes)
        return vram__fail(VRAM_EINVAL, "vram_exec_output: context, data and bytes are required");
    const vram_engine *e = c->e;
    if (i >= (size_t)e->g.n_outputs)
        return vram__fail(VRAM_EINVAL, "output %zu does not exist (the model has %d)", i,
                          e->g.n_outputs);
    int v = e->g.outputs[i];
    *data = c->ptr[v];
    *bytes = (size_t)c->var->bytes[v];
    return 0;
}

int vram_exec_read_output(vram_exec *c, size_t i, void *dst, size_t bytes)
{
    const void *src = NULL;
    size_t n = 0;
    int rc = vram_exec_output(c, i, &src, &n);
    if (rc)
        return rc;
    if (!dst && bytes)
        return vram__fail(VRAM_EINVAL, "vram_exec_read_output: dst is NULL");
    if (bytes != n)
        return vram__fail(VRAM_EINVAL, "output '%s' has %zu bytes (batch %lld), not %zu",
                          c->e->g.values[c->e->g.outputs[i]].name, n, (long long)c->var->batch,
                          bytes);
    return n ? c->e->ex->copy_out(c, dst, src, n) : 0;
}

int vram_exec_set_batch(vram_exec *c, int64_t batch)
{
    if (!c)
        return vram__fail(VRAM_EINVAL, "vram_exec_set_batch: context is NULL");
    const vram_engine *e = c->e;
    if (e->n_var == 1 && batch != e->batch)
        return vram__fail(VRAM_EINVAL, "the model's batch is fixed at %lld (its inputs do not "
                                       "leave it symbolic, or the engine was loaded for one)",
                          (long long)e->batch);
    if (batch < 1 || batch > e->batch)
        return vram__fail(VRAM_EINVAL, "batch %lld is outside 1..%lld, what the engine was "
                                       "loaded for",
                          (long long)batch, (long long)e->batch);
    c->var = &e->var[e->n_var == 1 ? 0 : batch - 1];
    return 0;
}

int64_t vram_exec_batch(const vram_exec *c) { return c ? c->var->batch : 0; }


int vram_exec_input_desc(const vram_exec *c, size_t i, vram_tensor_desc *out)
{
    if (!c || !out || i >= (size_t)c->e->g.n_inputs)
        return vram__fail(VRAM_EINVAL, "input %zu of %d", i, c ? c->e->g.n_inputs : 0);
    int v = c->e->g.inputs[i];
    vram__tensor_desc(&c->e->g.values[v], &c->var->shape[v], out);
    return 0;
}

int vram_exec_output_desc(const vram_exec *c, size_t i, vram_tensor_desc *out)
{
    if (!c || !out || i >= (size_t)c->e->g.n_outputs)
        return vram__fail(VRAM_EINVAL, "output %zu of %d", i, c ? c->e->g.n_outputs : 0);
    int v = c->e->g.outputs[i];
    vram__tensor_desc(&c->e->g.values[v], &c->var->shape[v], out);
    return 0;
}

vram_stream vram_exec_stream(const vram_exec *c) { return c ? c->stream : NULL; }
