/* src/engine/engine.c - loading an engine: read the file and decode the
 * model once (its weights decoded once), infer shapes at the engine's batch
 * on a copy of the graph that shares the model's constants and fold them,
 * lower nodes to steps, decide where every value lives (weights block,
 * arena, bindings), plan the arena from lifetimes for the largest batch,
 * derive the smaller batches from the same decoded model, keep only the
 * constants something reads, and upload the weights once. Also what the
 * engine tells about itself: inputs, outputs, memory, operators. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "engine_internal.h"
#include "vramkit/config.h"
#include "plan.h"
#include "shape.h"
#include "vramkit/backend.h"

int vram_engine_opts_init(vram_engine_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_engine_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_engine_opts){.size = sizeof *o, .executor = c->engine_executor == 1 ? "cuda" : "cpu",
                            .batch = 1, .alignment = 256,
                            .workspace_limit = VRAM_ENGINE_WORKSPACE_DEFAULT,
                            .tf32 = c->engine_tf32 == 1, .graphs = c->engine_graphs == 1,
                            .threads = c->engine_threads > VRAM_ENGINE_MAX_THREADS
                                           ? VRAM_ENGINE_MAX_THREADS
                                           : (int)c->engine_threads,
                            .cpu_reference = c->engine_cpu_kernels == 1};
    if (c->engine_threads > VRAM_ENGINE_MAX_THREADS && !rc)
        rc = vram__fail(VRAM_EINVAL, "VRAM_ENGINE_THREADS: %llu threads (at most %d)",
                        (unsigned long long)c->engine_threads, VRAM_ENGINE_MAX_THREADS);
    const char *ws = c->engine_workspace;
    if (ws && *ws) {
        uint64_t v;
        int prc = vram__parse_size(ws, &v);
        if (!prc && v == VRAM_ENGINE_WORKSPACE_DEFAULT)
            prc = vram__fail(VRAM_EINVAL, "size \"%s\" is too large", ws);
        if (!prc)
            o->workspace_limit = v;
        else if (!rc)
            rc = vram__fail_prefix(prc, "VRAM_ENGINE_WORKSPACE: ");
    }
    return rc;
}

/* Free everything; returns 0 or the error of destroying the engine's own
 * pool or backend (the engine is gone either way). */
static int engine_free(vram_engine *e)
{
    if (!e)
        return 0;
    if (e->ex_state)
        e->ex->engine_fini(e);
    if (e->weights)
        vram_pool_free(e->pool, e->weights, NULL);
    for (int i = 0; i < e->n_steps; i++)
        free(e->steps[i].split_sizes);
    free(e->steps);
    vram__variants_free(e);
    free(e->place);
    free(e->ops);
    vram__graph_free(&e->g);
    int rc = 0;
    if (e->owns_pool) {
        rc = vram_pool_destroy(e->pool);
        int brc = vram_backend_destroy(e->own_backend);
        if (!rc)
            rc = brc;
    }
    free(e);
    return rc;
}

static int make_pool(vram_engine *e)
{
    vram_backend_opts bo = {0};
    int rc = vram_backend_create(e->ex->own_backend, &bo, &e->own_backend);
    if (rc)
        return rc;
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.name = "engine";
    po.backend = e->own_backend;
    rc = vram_pool_create(&po, &e->pool);
    if (rc) {
        vram_backend_destroy(e->own_backend);
        e->own_backend = NULL;
        return rc;
    }
    e->owns_pool = 1;
    return 0;
}

int vram__value_bytes(const vram__value *v, const vram__shape *s, uint64_t *out)
{
    int64_t n = vram__shape_elems(s);
    size_t es = vram_dtype_size(v->dtype);
    if (n < 0 || !es)
        return vram__fail(VRAM_EINVAL, "tensor '%s' has no known size (%s, rank %d)", v->name,
                          vram_dtype_name(v->dtype), s->rank);
    if ((uint64_t)n > UINT64_MAX / es)
        return vram__fail(VRAM_EINVAL, "tensor '%s' is too large", v->name);
    *out = (uint64_t)n * es;
    return 0;
}

/* May output y of step s overwrite input v (same bytes, dies at s)? */
static int inplace_candidate(const vram_engine *e, const vram__step *st, int v, int y,
                             const int *last)
{
    if (v < 0 || e->place[v].loc != VRAM__LOC_ARENA || last[v] != (int)(st - e->steps))
        return 0;
    return e->place[v].bytes == e->place[y].bytes &&
           e->g.values[v].dtype == e->g.values[y].dtype;
}

static int place_and_plan(vram_engine *e)
{
    vram__graph *g = &e->g;
    int nv = g->n_values;
    e->place = vram__calloc((size_t)nv + 1, sizeof *e->place);
    int *first = vram__calloc((size_t)nv + 1, sizeof *first);
    int *last = vram__calloc((size_t)nv + 1, sizeof *last);
    int *arena_idx = vram__calloc((size_t)nv + 1, sizeof *arena_idx);
    vram__plan_tensor *pt = vram__calloc((size_t)nv + 1, sizeof *pt);
    int rc = e->place && first && last && arena_idx && pt ? 0 : VRAM_EHOSTMEM;
    for (int v = 0; v < nv; v++)
        first[v] = last[v] = -1;
    /* Which values the steps touch, and when. */
    for (int s = 0; !rc && s < e->n_steps; s++) {
        const vram__node *n = &g->nodes[e->steps[s].node];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && vram__step_reads(&e->steps[s], k))
                last[n->in[k]] = s;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && first[n->out[k]] < 0)
                first[n->out[k]] = s;
    }
    for (int i = 0; i < g->n_inputs; i++)
        first[g->inputs[i]] = first[g->inputs[i]] < 0 ? 0 : first[g->inputs[i]];
    uint64_t a = e->alignment;
    for (int v = 0; !rc && v < nv; v++) {
        vram__value *val = &g->values[v];
        int used = last[v] >= 0 || first[v] >= 0 || (val->flags & (VRAM__VALUE_INPUT |
                                                                   VRAM__VALUE_OUTPUT));
        if (!used)
            continue;
        rc = vram__value_bytes(val, &val->shape, &e->place[v].bytes);
        if (rc)
            break;
        if (val->flags & VRAM__VALUE_INPUT) {
            e->place[v].loc = VRAM__LOC_INPUT;
        } else if (val->flags & VRAM__VALUE_OUTPUT) {
            e->place[v].loc = VRAM__LOC_OUTPUT;
        } else if (val->data) {
            e->place[v].loc = VRAM__LOC_WEIGHTS;
            e->place[v].offset = e->weights_bytes;
            e->weights_bytes += vram__align_up(e->place[v].bytes, a);
        } else {
            e->place[v].loc = VRAM__LOC_ARENA;
        }
        if (e->place[v].loc == VRAM__LOC_INPUT || e->place[v].loc == VRAM__LOC_OUTPUT) {
            e->place[v].offset = e->io_bytes;
            e->io_bytes += vram__align_up(e->place[v].bytes ? e->place[v].bytes : 1, a);
        }
    }
    /* The arena: intermediates, with in-place reuse for element-wise steps
     * and copies whose input dies there. */
    int n_arena = 0;
    for (int v = 0; !rc && v < nv; v++) {
        if (e->place[v].loc != VRAM__LOC_ARENA)
            continue;
        if (first[v] < 0) /* read but never written: an unused optional output */
            first[v] = last[v] >= 0 ? last[v] : 0;
        arena_idx[v] = n_arena;
        pt[n_arena++] = (vram__plan_tensor){.size = e->place[v].bytes, .first = first[v],
                                            .last = last[v] < first[v] ? first[v] : last[v],
                                            .inplace_of = -1};
    }
    for (int s = 0; !rc && s < e->n_steps; s++) {
        const vram__step *st = &e->steps[s];
        int y = st->y;
        if (y < 0 || e->place[y].loc != VRAM__LOC_ARENA)
            continue;
        int cand = -1;
        if (st->op == VRAM__OP_UNARY || st->op == VRAM__OP_COPY) {
            cand = inplace_candidate(e, st, st->x, y, last) ? st->x : -1;
        } else if (st->op == VRAM__OP_BINARY) {
            /* Of two inputs that could lend their memory, the one made
             * last: a convolution just before, whose epilogue may then do
             * this step in place (exec_cpu_fuse.c). */
            const vram__node *n = &g->nodes[st->node];
            for (int k = 0; k < 2; k++)
                if (inplace_candidate(e, st, n->in[k], y, last) &&
                    g->values[n->in[k]].shape.rank == g->values[y].shape.rank &&
                    (cand < 0 || first[n->in[k]] > first[cand]))
                    cand = n->in[k];
        }
        if (cand >= 0 && cand != y)
            pt[arena_idx[y]].inplace_of = arena_idx[cand];
    }
    vram__plan plan = {0};
    if (!rc)
        rc = vram__plan_arena(pt, n_arena, a, &plan);
    if (!rc) {
        for (int v = 0; v < nv; v++)
            if (e->place[v].loc == VRAM__LOC_ARENA)
                e->place[v].offset = plan.offset[arena_idx[v]];
        e->arena_bytes = plan.arena_bytes;
        e->arena_lower_bound = plan.lower_bound;
    }
    vram__plan_free(&plan);
    free(first);
    free(last);
    free(arena_idx);
    free(pt);
    return rc;
}

static int upload_weights(vram_engine *e)
{
    if (!e->weights_bytes)
        return 0;
    int rc = vram_pool_alloc(e->pool, e->weights_bytes, e->owner, VRAM_KIND_WEIGHTS, NULL,
                             &e->weights);
    if (rc)
        return vram__fail_prefix(rc, "uploading %llu bytes of weights: ",
                                 (unsigned long long)e->weights_bytes);
    for (int v = 0; !rc && v < e->g.n_values; v++)
        if (e->place[v].loc == VRAM__LOC_WEIGHTS)
            rc = e->ex->copy_in(e, NULL, (char *)e->weights + e->place[v].offset, e->g.values[v].data,
                                (size_t)e->place[v].bytes);
    return rc;
}

/* Once the weights are in the pool and every batch is built, the graph's
 * copies of constants are not read again (a constant graph output excepted,
 * copied into each context's binding): give their host memory back. */
static void drop_host_constants(vram_engine *e)
{
    for (int v = 0; v < e->g.n_values; v++) {
        vram__value *val = &e->g.values[v];
        if (val->data && e->place[v].loc != VRAM__LOC_OUTPUT)
            vram__value_set_data(val, NULL, 0);
    }
}

static int cmp_op(const void *x, const void *y)
{
    return strcmp(((const vram_op_count *)x)->op, ((const vram_op_count *)y)->op);
}

static int count_ops(vram_engine *e)
{
    e->ops = vram__calloc((size_t)e->g.n_nodes + 1, sizeof *e->ops);
    if (!e->ops)
        return VRAM_EHOSTMEM;
    for (int i = 0; i < e->g.n_nodes; i++) {
        const char *op = e->g.nodes[i].op;
        size_t k = 0;
        while (k < e->n_ops && strcmp(e->ops[k].op, op))
            k++;
        if (k == e->n_ops)
            e->ops[e->n_ops++] = (vram_op_count){op, 0};
        e->ops[k].count++;
    }
    qsort(e->ops, e->n_ops, sizeof *e->ops, cmp_op);
    return 0;
}

/* The engine's graph borrowed the model's constants; once every batch is
 * built it keeps those something reads (placed values) and the model, with
 * the rest (the weights a folding replaced, constants only lowering read),
 * is freed. */
static void adopt_constants(vram_engine *e, vram__graph *model)
{
    for (int v = 0; v < e->g.n_values; v++) {
        vram__value *val = &e->g.values[v];
        if (!(val->flags & VRAM__VALUE_BORROWED))
            continue;
        val->flags &= ~VRAM__VALUE_BORROWED;
        if (e->place[v].loc != VRAM__LOC_NONE && v < model->n_values &&
            model->values[v].data == val->data) {
            model->values[v].data = NULL; /* e->g's own now */
            model->values[v].nbytes = 0;
        } else {
            val->data = NULL;
            val->nbytes = 0;
        }
    }
    vram__graph_free(model);
}

/* Build `e` (options applied) from the decoded model, which it consumes. */
static int build(vram_engine *e, vram__graph *model)
{
    /* A fixed batch is the model's, whatever opts.batch asked for. */
    int64_t fixed = vram__model_batch(model);
    if (fixed > 0)
        e->batch = fixed;
    e->batch_symbolic = fixed == 0;
    unsigned char *folded = NULL;
    int rc = vram__graph_clone(model, &e->g);
    if (!rc) {
        folded = vram__calloc((size_t)e->g.n_nodes + 1, 1);
        rc = folded ? vram__infer_shapes(&e->g, e->batch, folded) : VRAM_EHOSTMEM;
    }
    for (int i = 0; !rc && i < e->g.n_nodes; i++)
        e->folded_nodes += folded[i] != 0;
    if (!rc)
        rc = vram__lower(e, folded, NULL);
    free(folded);
    if (!rc)
        rc = place_and_plan(e);
    if (!rc)
        rc = vram__variants_build(e, model);
    if (!rc)
        adopt_constants(e, model);
    else
        vram__graph_free(model);
    if (!rc)
        rc = e->ex->engine_init(e);
    if (!rc)
        rc = count_ops(e);
    if (!rc)
        rc = upload_weights(e);
    if (!rc && e->ex->weights_ready)
        rc = e->ex->weights_ready(e);
    if (!rc)
        drop_host_constants(e);
    return rc;
}

/* The options as given, checked, with their defaults filled in. */
static int resolve_opts(const vram_engine_opts *opts, vram_engine_opts *o,
                        const vram__exec_ops **ex)
{
    *ex = NULL;
    int rc = vram_engine_opts_init(o);
    if (!opts && rc)
        return rc;
    if (opts && (rc = vram__opts_take(o, opts, sizeof *o, "vram_engine_opts")))
        return rc;
    if (!o->executor)
        o->executor = "cpu";
    *ex = NULL;
    if (!strcmp(o->executor, "cpu"))
        *ex = &vram__exec_cpu_ops;
    else if (!strcmp(o->executor, "cuda") && !(*ex = vram__exec_cuda_ops()))
        return vram__fail(VRAM_ENOSYS, "executor 'cuda' is not available: %s", vram_last_error());
    if (!*ex)
        return vram__fail(VRAM_EINVAL, "executor '%s' does not exist (cpu and cuda do)",
                          o->executor);
    if (o->workspace_limit == VRAM_ENGINE_WORKSPACE_DEFAULT)
        o->workspace_limit = (*ex)->workspace_default;
    if (o->batch <= 0)
        o->batch = 1;
    if (!o->alignment)
        o->alignment = 256;
    if (o->alignment & (o->alignment - 1))
        return vram__fail(VRAM_EINVAL, "alignment %llu is not a power of two",
                          (unsigned long long)o->alignment);
    if (o->threads < 0 || o->threads > VRAM_ENGINE_MAX_THREADS)
        return vram__fail(VRAM_EINVAL, "threads %d (0 to %d)", o->threads,
                          VRAM_ENGINE_MAX_THREADS);
    if (!o->threads)
        o->threads = 1;
    return 0;
}

/* Load from `len` bytes; `buffer`, when given, holds them and is freed as
 * soon as they are decoded (the model's file need not stay in memory while
 * the engine is built). */
static int load(const void *bytes, size_t len, void *buffer, const vram_engine_opts *opts,
                vram_engine **out)
{
    vram_engine_opts o;
    const vram__exec_ops *ex;
    int rc = resolve_opts(opts, &o, &ex);
    vram_engine *e = rc ? NULL : vram__calloc(1, sizeof *e);
    if (!rc && !e)
        rc = VRAM_EHOSTMEM;
    if (rc) {
        free(buffer);
        return rc;
    }
    e->ex = ex;
    e->tf32 = o.tf32 != 0;
    e->graphs = o.graphs != 0;
    e->threads = o.threads;
    e->cpu_reference = o.cpu_reference != 0;
    e->batch = o.batch;
    e->alignment = o.alignment;
    e->owner = o.owner;
    e->workspace_limit = o.workspace_limit;
    if (o.pool) {
        e->pool = o.pool;
        const vram_backend *b = vram_pool_backend(o.pool);
        if (!ex->backend_ok(b))
            rc = vram__fail(VRAM_EINVAL, "the %s executor cannot use a pool on the '%s' backend",
                            ex->name, vram_backend_name(b));
    } else {
        rc = make_pool(e);
        if (!rc && e->owner != VRAM_OWNER_DEFAULT)
            rc = vram__fail(VRAM_EINVAL, "owner %u belongs to no pool: give the pool too",
                            (unsigned)e->owner);
    }
    vram__graph model;
    if (!rc)
        rc = vram__onnx_load(bytes, len, &model);
    free(buffer);
    if (!rc)
        rc = build(e, &model);
    if (rc) {
        vram__saved_error err; /* giving memory back clears the error sentence */
        vram__error_save(&err);
        engine_free(e);
        return vram__error_restore(&err, rc);
    }
    *out = e;
    return 0;
}

int vram_engine_load_bytes(const void *bytes, size_t len, const vram_engine_opts *opts,
                           vram_engine **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_engine_load: out is NULL");
    *out = NULL;
    if (!bytes && len)
        return vram__fail(VRAM_EINVAL, "vram_engine_load: bytes is NULL but len is %zu", len);
    if (!len)
        return vram__fail(VRAM_EPARSE, "the model is empty (0 bytes)");
    return load(bytes, len, NULL, opts, out);
}

int vram_engine_load(const char *path, const vram_engine_opts *opts, vram_engine **out)
{
    if (!path || !out)
        return vram__fail(VRAM_EINVAL, "vram_engine_load: path and out are required");
    *out = NULL;
    char what[4200];
    snprintf(what, sizeof what, "model '%s'", path);
    void *buf;
    size_t len;
    int rc = vram__read_file(path, what, &buf, &len);
    if (!rc && !len) {
        free(buf);
        return vram__fail(VRAM_EPARSE, "model '%s' is empty (0 bytes): an ONNX model holds at "
                                       "least a graph", path);
    }
    if (!rc) {
        rc = load(buf, len, buf, opts, out);
        if (rc)
            vram__fail_prefix(rc, "model '%s': ", path);
    }
    return rc;
}

int vram_engine_destroy(vram_engine *e)
{
    if (!e)
        return 0;
    unsigned alive = atomic_load(&e->contexts);
    if (alive)
        return vram__fail(VRAM_EBUSY, "engine: %u execution context(s) still alive", alive);
    return engine_free(e);
}

size_t vram_engine_input_count(const vram_engine *e) { return e ? (size_t)e->g.n_inputs : 0; }
size_t vram_engine_output_count(const vram_engine *e) { return e ? (size_t)e->g.n_outputs : 0; }

void vram__tensor_desc(const vram__value *v, const vram__shape *s, vram_tensor_desc *out)
{
    *out = (vram_tensor_desc){.name = v->name, .dtype = v->dtype, .rank = s->rank};
    for (int d = 0; d < s->rank && d < 8; d++)
        out->dims[d] = s->dim[d];
}

int vram_engine_input(const vram_engine *e, size_t i, vram_tensor_desc *out)
{
    if (!e || !out || i >= (size_t)e->g.n_inputs)
        return vram__fail(VRAM_EINVAL, "input %zu of %d", i, e ? e->g.n_inputs : 0);
    const vram__value *v = &e->g.values[e->g.inputs[i]];
    vram__tensor_desc(v, &v->shape, out);
    return 0;
}

int vram_engine_output(const vram_engine *e, size_t i, vram_tensor_desc *out)
{
    if (!e || !out || i >= (size_t)e->g.n_outputs)
        return vram__fail(VRAM_EINVAL, "output %zu of %d", i, e ? e->g.n_outputs : 0);
    const vram__value *v = &e->g.values[e->g.outputs[i]];
    vram__tensor_desc(v, &v->shape, out);
    return 0;
}

int vram_engine_memory_get(const vram_engine *e, vram_engine_memory *out)
{
    if (!e || !out)
        return vram__fail(VRAM_EINVAL, "vram_engine_memory_get: engine and out are required");
    *out = (vram_engine_memory){
        .weights_bytes = e->weights_bytes + e->packed_weights_bytes,
        .activations_bytes = e->arena_bytes,
        .activations_lower_bound_bytes = e->arena_lower_bound,
        .io_bytes = e->io_bytes,
        .workspace_bytes = e->workspace_bytes,
        .exec_bytes = e->arena_bytes + e->io_bytes + e->workspace_bytes,
        .packed_weights_bytes = e->packed_weights_bytes,
    };
    return 0;
}

int vram_engine_op_counts(const vram_engine *e, vram_op_count *out, size_t cap, size_t *n)
{
    if (!e || !n || (cap && !out))
        return vram__fail(VRAM_EINVAL, "vram_engine_op_counts: engine, n (and out) are required");
    for (size_t i = 0; i < cap && i < e->n_ops; i++)
        out[i] = e->ops[i];
    *n = e->n_ops;
    return 0;
}

int vram_engine_info_get(const vram_engine *e, vram_engine_info *out)
{
    if (!e || !out)
        return vram__fail(VRAM_EINVAL, "vram_engine_info_get: engine and out are required");
    *out = (vram_engine_info){.opset = e->g.opset,
                              .producer = e->g.producer ? e->g.producer : "",
                              .nodes = (unsigned)e->g.n_nodes,
                              .folded_nodes = e->folded_nodes,
                              .fused_batchnorms = e->fused_bn,
                              .steps = (unsigned)e->n_steps,
                              .batch = e->batch,
                              .batch_symbolic = e->batch_symbolic};
    return 0;
}
