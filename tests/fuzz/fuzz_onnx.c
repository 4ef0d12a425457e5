/* tests/fuzz/fuzz_onnx.c - libFuzzer target for the ONNX loader: any bytes
 * go to vram__onnx_load(); it must not crash, overread or leak, must leave
 * the graph zeroed on error, and on success the graph must keep graph.h's
 * contract (indices in range, unique names, producers that match node
 * outputs and come earlier than their readers, constants sized by their
 * shape), which is checked here and aborts when broken. Seeds: the models
 * tests/unit/test_onnx_load.c writes with VRAM_FUZZ_CORPUS_OUT set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph.h"
#include "vramkit/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const vram__graph *g)
{
    if (g->opset < 11 || g->opset > 21 || !g->producer)
        abort();
    for (int i = 0; i < g->n_values; i++) {
        const vram__value *v = &g->values[i];
        if (vram__graph_find(g, v->name) != i || v->producer < -1 || v->producer >= g->n_nodes ||
            v->shape.rank < -1 || v->shape.rank > VRAM__MAX_RANK)
            abort();
        if (v->flags & VRAM__VALUE_INITIALIZER) {
            int64_t elems = vram__shape_elems(&v->shape);
            if (!v->data || elems < 0 || v->nbytes != (size_t)elems * vram_dtype_size(v->dtype))
                abort();
            if (v->nbytes) { /* the last byte is inside the buffer (ASan checks) */
                volatile uint8_t last = ((const uint8_t *)v->data)[v->nbytes - 1];
                (void)last;
            }
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vram__node *n = &g->nodes[i];
        if (!n->name || !n->op || !*n->op)
            abort();
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] < -1 || n->in[k] >= g->n_values ||
                (n->in[k] >= 0 && g->values[n->in[k]].producer >= i))
                abort();
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] < -1 || n->out[k] >= g->n_values ||
                (n->out[k] >= 0 && g->values[n->out[k]].producer != i))
                abort();
        for (int k = 0; k < n->n_attrs; k++) {
            const vram__attr *a = &n->attrs[k];
            if (!a->name || a->tensor < -1 || a->tensor >= g->n_values ||
                (a->type == VRAM__ATTR_TENSOR) != (a->tensor >= 0))
                abort();
            if (a->type == VRAM__ATTR_STRING && (!a->s || a->s[a->s_len] != '\0'))
                abort();
        }
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] < 0 || g->inputs[i] >= g->n_values ||
            !(g->values[g->inputs[i]].flags & VRAM__VALUE_INPUT))
            abort();
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->n_values ||
            !(g->values[g->outputs[i]].flags & VRAM__VALUE_OUTPUT))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const vram__graph zero;
    vram__graph g;
    memset(&g, 0xa5, sizeof g);
    int rc = vram__onnx_load(data, size, &g);
    if (rc) {
        if ((rc != VRAM_EPARSE && rc != VRAM_EHOSTMEM) || memcmp(&g, &zero, sizeof g) != 0 ||
            !*vram_last_error())
            abort();
        return 0;
    }
    check(&g);
    vram__graph_free(&g);
    if (memcmp(&g, &zero, sizeof g) != 0)
        abort();
    return 0;
}
