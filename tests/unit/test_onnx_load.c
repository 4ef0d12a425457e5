/* tests/unit/test_onnx_load.c - the ONNX loader and the graph helpers: models
 * are built here with the protobuf-c structs generated from onnx.proto,
 * packed to bytes and loaded; the graph is checked value by value (flags,
 * types, shapes, symbolic dims, data from raw_data and from each typed field,
 * attributes of every type, node links, empty optional inputs and outputs,
 * opset, producer). Every refusal is checked for VRAM_EPARSE, its sentence,
 * and a zeroed graph: truncated and random bytes, opsets out of range, foreign
 * domains, undefined and duplicate names, data that does not match its shape,
 * overflowing and negative dims, external data, subgraphs, deep nesting.
 * With VRAM_FUZZ_CORPUS_OUT set, it also writes seed models there for
 * tests/fuzz/fuzz_onnx.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph.h"
#include "onnx.pb-c.h"
#include "vramkit/error.h"

/* ---- building models ----------------------------------------------- */

/* Everything a test builds lives in this arena, released at the end. */
static void *arena[8192];
static size_t arena_n;

static void *mk(size_t size)
{
    assert_true(arena_n < sizeof arena / sizeof arena[0]);
    void *p = calloc(1, size ? size : 1);
    assert_non_null(p);
    arena[arena_n++] = p;
    return p;
}

static void *mk_copy(const void *src, size_t size)
{
    void *p = mk(size);
    if (size)
        memcpy(p, src, size);
    return p;
}

static void arena_reset(void)
{
    while (arena_n)
        free(arena[--arena_n]);
}

#define CAP 64

typedef struct mb {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto op;
    Onnx__OperatorSetIdProto *ops[2];
} mb;

static mb *mb_new(int64_t opset)
{
    mb *b = mk(sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->op);
    b->op.domain = "";
    b->op.has_version = 1;
    b->op.version = opset;
    b->ops[0] = &b->op;
    b->m.opset_import = b->ops;
    b->m.n_opset_import = 1;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    b->g.name = "test";
    b->g.node = mk(CAP * sizeof *b->g.node);
    b->g.initializer = mk(CAP * sizeof *b->g.initializer);
    b->g.input = mk(CAP * sizeof *b->g.input);
    b->g.output = mk(CAP * sizeof *b->g.output);
    b->g.value_info = mk(CAP * sizeof *b->g.value_info);
    return b;
}

#define ADD(b, field, item) ((b)->g.field[(b)->g.n_##field++] = (item))

static Onnx__TensorProto *tensor(const char *name, int dtype, int rank, const int64_t *dims)
{
    Onnx__TensorProto *t = mk(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = mk_copy(dims, (size_t)rank * sizeof *dims);
    return t;
}

static void set_raw(Onnx__TensorProto *t, const void *data, size_t n)
{
    t->has_raw_data = 1;
    t->raw_data.len = n;
    t->raw_data.data = mk_copy(data, n);
}

/* dims >= 0 are dim_value; -1 takes params[i] when given, else stays unset.
 * rank -1: no shape. */
static Onnx__ValueInfoProto *vinfo(const char *name, int elem, int rank, const int64_t *dims,
                                   const char *const *params)
{
    Onnx__ValueInfoProto *vi = mk(sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = (char *)name;
    Onnx__TypeProto *tp = mk(sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = mk(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sp = mk(sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->n_dim = (size_t)rank;
        sp->dim = mk((size_t)(rank ? rank : 1) * sizeof *sp->dim);
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = mk(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else if (params && params[i]) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = (char *)params[i];
            }
            sp->dim[i] = d;
        }
        tt->shape = sp;
    }
    return vi;
}

static Onnx__NodeProto *node(const char *name, const char *op, int nin, const char *const *in,
                             int nout, const char *const *out)
{
    Onnx__NodeProto *n = mk(sizeof *n);
    onnx__node_proto__init(n);
    n->name = (char *)name;
    n->op_type = (char *)op;
    n->n_input = (size_t)nin;
    n->input = mk_copy(in, (size_t)nin * sizeof *in);
    n->n_output = (size_t)nout;
    n->output = mk_copy(out, (size_t)nout * sizeof *out);
    n->attribute = mk(16 * sizeof *n->attribute);
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = mk(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

#define S(...) ((const char *const[]){__VA_ARGS__})
#define D(...) ((const int64_t[]){__VA_ARGS__})

static uint8_t *pack(const mb *b, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *bytes = mk(*len);
    assert_int_equal(onnx__model_proto__pack(&b->m, bytes), *len);
    return bytes;
}

static const float W_DATA[6] = {1, 2, 3, 4, 5, 6};

/* A model using every feature the loader reads. Values, in the order the
 * loader makes them: W B shape i8 h flag d empty (initializers), x y (inputs),
 * g r maxv z out (node outputs), c/value (the Constant's tensor). */
static mb *valid_model(void)
{
    mb *b = mb_new(13);
    b->m.producer_name = "vramkit-test";
    b->m.producer_version = "1.2";

    Onnx__TensorProto *t = tensor("W", 1, 2, D(2, 3));
    set_raw(t, W_DATA, sizeof W_DATA);
    ADD(b, initializer, t);
    t = tensor("B", 1, 1, D(2));
    t->n_float_data = 2;
    t->float_data = mk_copy((const float[]){0.5f, -1.5f}, 2 * sizeof(float));
    ADD(b, initializer, t);
    t = tensor("shape", 7, 1, D(2));
    t->n_int64_data = 2;
    t->int64_data = mk_copy(D(1, -1), 2 * sizeof(int64_t));
    ADD(b, initializer, t);
    t = tensor("i8", 3, 1, D(3));
    t->n_int32_data = 3;
    t->int32_data = mk_copy((const int32_t[]){-1, 2, 127}, 3 * sizeof(int32_t));
    ADD(b, initializer, t);
    t = tensor("h", 10, 1, D(2));
    t->n_int32_data = 2;
    t->int32_data = mk_copy((const int32_t[]){0x3c00, 0xc000}, 2 * sizeof(int32_t));
    ADD(b, initializer, t);
    t = tensor("flag", 9, 0, NULL);
    t->n_int32_data = 1;
    t->int32_data = mk_copy((const int32_t[]){5}, sizeof(int32_t));
    ADD(b, initializer, t);
    t = tensor("d", 11, 1, D(1));
    t->n_double_data = 1;
    t->double_data = mk_copy((const double[]){2.5}, sizeof(double));
    ADD(b, initializer, t);
    ADD(b, initializer, tensor("empty", 1, 2, D(0, 4)));

    ADD(b, input, vinfo("W", 1, 2, D(2, 3), NULL)); /* IR < 4 style: skipped */
    ADD(b, input, vinfo("x", 1, 2, D(-1, 3), S("batch", NULL)));
    ADD(b, input, vinfo("y", 7, 2, D(-1, 4), NULL));

    Onnx__NodeProto *n = node("gemm", "Gemm", 3, S("x", "W", "B"), 1, S("g"));
    Onnx__AttributeProto *a = attr(n, "alpha", 1);
    a->has_f = 1;
    a->f = 0.5f;
    a = attr(n, "transB", 2);
    a->has_i = 1;
    a->i = 1;
    ADD(b, node, n);
    ADD(b, node, node("", "Reshape", 2, S("g", "shape"), 1, S("r")));
    n = node("c", "Constant", 0, NULL, 1, S("maxv"));
    n->domain = "ai.onnx";
    a = attr(n, "value", 4);
    a->t = tensor("", 1, 0, NULL);
    set_raw(a->t, (const float[]){6.0f}, sizeof(float));
    ADD(b, node, n);
    ADD(b, node, node("clip", "Clip", 3, S("r", "", "maxv"), 1, S("z")));
    n = node("drop", "Dropout", 1, S("z"), 2, S("out", ""));
    a = attr(n, "mode", 3);
    a->has_s = 1;
    a->s.data = (uint8_t *)"abc";
    a->s.len = 3;
    a = attr(n, "scales", 6);
    a->n_floats = 2;
    a->floats = mk_copy((const float[]){1.0f, 2.0f}, 2 * sizeof(float));
    a = attr(n, "pads", 7);
    a->n_ints = 4;
    a->ints = mk_copy(D(0, 1, 2, 3), 4 * sizeof(int64_t));
    a = attr(n, "names", 8);
    a->n_strings = 2;
    a->strings = mk(2 * sizeof *a->strings);
    a->strings[0] = (ProtobufCBinaryData){1, (uint8_t *)"a"};
    a->strings[1] = (ProtobufCBinaryData){2, (uint8_t *)"bc"};
    attr(n, "none", 7); /* INTS with no element */
    ADD(b, node, n);

    ADD(b, output, vinfo("out", 1, 2, D(-1, 2), S("batch", NULL)));
    ADD(b, output, vinfo("W", 1, 2, D(2, 3), NULL));
    ADD(b, value_info, vinfo("g", 1, 2, D(-1, 2), S("batch", NULL)));
    ADD(b, value_info, vinfo("nothing", 1, 1, D(3), NULL)); /* names no value: ignored */
    return b;
}

/* ---- helpers ----------------------------------------------------------- */

static const vram__value *value(const vram__graph *g, const char *name)
{
    int i = vram__graph_find(g, name);
    if (i < 0)
        fail_msg("no value '%s'", name);
    return &g->values[i];
}

static void assert_zeroed(vram__graph *g)
{
    static const vram__graph zero;
    assert_memory_equal(g, &zero, sizeof zero);
    vram__graph_free(g); /* safe on a zeroed graph */
    assert_memory_equal(g, &zero, sizeof zero);
}

/* The invariants of any graph the loader hands back: every index in range,
 * producers agree with node outputs, names unique, constants sized. */
static void check_graph(const vram__graph *g)
{
    assert_true(g->opset >= 11 && g->opset <= 21);
    assert_non_null(g->producer);
    for (int i = 0; i < g->n_values; i++) {
        const vram__value *v = &g->values[i];
        assert_int_equal(vram__graph_find(g, v->name), i);
        assert_true(v->producer >= -1 && v->producer < g->n_nodes);
        assert_true(v->shape.rank >= -1 && v->shape.rank <= VRAM__MAX_RANK);
        if (v->flags & VRAM__VALUE_INITIALIZER) {
            assert_non_null(v->data);
            assert_int_equal(v->nbytes,
                             (size_t)vram__shape_elems(&v->shape) * vram_dtype_size(v->dtype));
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const vram__node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            assert_true(n->in[k] >= -1 && n->in[k] < g->n_values);
            if (n->in[k] >= 0) /* defined before this node */
                assert_true(g->values[n->in[k]].producer < i);
        }
        for (int k = 0; k < n->n_out; k++) {
            assert_true(n->out[k] >= -1 && n->out[k] < g->n_values);
            if (n->out[k] >= 0)
                assert_int_equal(g->values[n->out[k]].producer, i);
        }
        for (int k = 0; k < n->n_attrs; k++)
            assert_true(n->attrs[k].tensor >= -1 && n->attrs[k].tensor < g->n_values);
    }
    for (int i = 0; i < g->n_inputs; i++)
        assert_true(g->inputs[i] >= 0 && g->inputs[i] < g->n_values &&
                    (g->values[g->inputs[i]].flags & VRAM__VALUE_INPUT));
    for (int i = 0; i < g->n_outputs; i++)
        assert_true(g->outputs[i] >= 0 && g->outputs[i] < g->n_values &&
                    (g->values[g->outputs[i]].flags & VRAM__VALUE_OUTPUT));
}

static void expect_fail_bytes(const uint8_t *bytes, size_t len, const char *needle)
{
    vram__graph g;
    memset(&g, 0xa5, sizeof g); /* the loader zeroes it whatever it held */
    int rc = vram__onnx_load(bytes, len, &g);
    if (rc != VRAM_EPARSE)
        fail_msg("expected VRAM_EPARSE, got %s (%s)", vram_err_name(rc), vram_last_error());
    if (needle && !strstr(vram_last_error(), needle))
        fail_msg("error \"%s\" lacks \"%s\"", vram_last_error(), needle);
    assert_zeroed(&g);
}

static void expect_fail(const mb *b, const char *needle)
{
    size_t len;
    uint8_t *bytes = pack(b, &len);
    expect_fail_bytes(bytes, len, needle);
}

static void load_ok(const mb *b, vram__graph *g)
{
    size_t len;
    uint8_t *bytes = pack(b, &len);
    int rc = vram__onnx_load(bytes, len, g);
    if (rc)
        fail_msg("load failed (%s): %s", vram_err_name(rc), vram_last_error());
}

static Onnx__NodeProto *find_node(mb *b, const char *name)
{
    for (size_t i = 0; i < b->g.n_node; i++)
        if (strcmp(b->g.node[i]->name, name) == 0)
            return b->g.node[i];
    fail_msg("no node %s", name);
    return NULL;
}

/* ---- graph.c ------------------------------------------------------------- */

static void test_dtypes_and_shapes(void **state)
{
    (void)state;
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_FLOAT), 4);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_UINT8), 1);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_INT8), 1);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_INT32), 4);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_INT64), 8);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_BOOL), 1);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_FLOAT16), 2);
    assert_int_equal(vram_dtype_size(VRAM_DTYPE_DOUBLE), 8);
    assert_int_equal(vram_dtype_size(8), 0); /* string */
    assert_int_equal(vram_dtype_size(0), 0);
    assert_int_equal(vram_dtype_size(-3), 0);
    assert_string_equal(vram_dtype_name(VRAM_DTYPE_FLOAT), "float");
    assert_string_equal(vram_dtype_name(VRAM_DTYPE_INT64), "int64");
    assert_string_equal(vram_dtype_name(VRAM_DTYPE_FLOAT16), "float16");
    assert_string_equal(vram_dtype_name(8), "string");
    assert_string_equal(vram_dtype_name(77), "type 77");
    assert_string_equal(vram_dtype_name(-1), "type -1");

    vram__shape s = {.rank = 0};
    assert_int_equal(vram__shape_elems(&s), 1);
    s = (vram__shape){.rank = 3, .dim = {2, 3, 4}};
    assert_int_equal(vram__shape_elems(&s), 24);
    s.dim[1] = 0;
    assert_int_equal(vram__shape_elems(&s), 0);
    s.dim[1] = -1;
    assert_int_equal(vram__shape_elems(&s), -1);
    s = (vram__shape){.rank = 2, .dim = {INT64_C(1) << 32, INT64_C(1) << 31}};
    assert_int_equal(vram__shape_elems(&s), -1);
    s.dim[1] = (INT64_C(1) << 31) - 1;
    assert_int_equal(vram__shape_elems(&s), (INT64_C(1) << 32) * ((INT64_C(1) << 31) - 1));
    /* A 0 makes 0 even after dimensions whose product overflows (as the
     * .npy reader counts; found by fuzz_npy). */
    s = (vram__shape){.rank = 3, .dim = {INT64_C(1) << 40, INT64_C(1) << 40, 0}};
    assert_int_equal(vram__shape_elems(&s), 0);
    s.rank = -1;
    assert_int_equal(vram__shape_elems(&s), -1);
    s.rank = VRAM__MAX_RANK + 1;
    assert_int_equal(vram__shape_elems(&s), -1);
}

static void test_graph_values_and_attrs(void **state)
{
    (void)state;
    vram__graph g = {0};
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "v%d", i);
        assert_int_equal(vram__graph_add_value(&g, name), i);
    }
    assert_int_equal(g.n_values, 100);
    assert_true(g.cap_values >= 100);
    for (int i = 0; i < 100; i += 7) {
        snprintf(name, sizeof name, "v%d", i);
        assert_int_equal(vram__graph_find(&g, name), i);
        assert_int_equal(g.values[i].producer, -1);
        assert_int_equal(g.values[i].shape.rank, -1);
        assert_int_equal(g.values[i].dtype, VRAM_DTYPE_UNDEFINED);
        assert_null(g.values[i].data);
        assert_int_equal(g.values[i].flags, 0);
    }
    assert_int_equal(vram__graph_find(&g, "v100"), -1);
    assert_int_equal(vram__graph_find(&g, ""), -1);

    /* A node with attributes of each kind, owned by the graph. */
    g.nodes = calloc(1, sizeof *g.nodes);
    g.n_nodes = g.cap_nodes = 1;
    vram__node *n = &g.nodes[0];
    n->name = strdup("n");
    n->op = strdup("Conv");
    n->attrs = calloc(4, sizeof *n->attrs);
    n->n_attrs = 4;
    n->attrs[0] =
        (vram__attr){.name = strdup("group"), .type = VRAM__ATTR_INT, .i = 4, .tensor = -1};
    n->attrs[1] =
        (vram__attr){.name = strdup("alpha"), .type = VRAM__ATTR_FLOAT, .f = 0.25f, .tensor = -1};
    n->attrs[2] = (vram__attr){.name = strdup("auto_pad"),
                               .type = VRAM__ATTR_STRING,
                               .s = strdup("SAME_UPPER"),
                               .s_len = 10,
                               .tensor = -1};
    int64_t *pads = malloc(4 * sizeof *pads);
    for (int i = 0; i < 4; i++)
        pads[i] = i + 1;
    n->attrs[3] = (vram__attr){
        .name = strdup("pads"), .type = VRAM__ATTR_INTS, .ints = pads, .n = 4, .tensor = -1};

    assert_ptr_equal(vram__node_attr(n, "alpha"), &n->attrs[1]);
    assert_null(vram__node_attr(n, "beta"));
    assert_int_equal(vram__attr_int(n, "group", 1), 4);
    assert_int_equal(vram__attr_int(n, "missing", 7), 7);
    assert_int_equal(vram__attr_int(n, "alpha", 9), 9); /* wrong type: the default */
    assert_true(vram__attr_float(n, "alpha", 1.0f) == 0.25f);
    assert_true(vram__attr_float(n, "group", 1.5f) == 1.5f);
    assert_string_equal(vram__attr_string(n, "auto_pad", "NOTSET"), "SAME_UPPER");
    assert_string_equal(vram__attr_string(n, "mode", "NOTSET"), "NOTSET");
    assert_null(vram__attr_string(n, "group", NULL));
    const int64_t *ints = (const int64_t *)&ints;
    assert_int_equal(vram__attr_ints(n, "pads", &ints), 4);
    assert_ptr_equal(ints, pads);
    assert_int_equal(ints[3], 4);
    assert_int_equal(vram__attr_ints(n, "strides", &ints), 0);
    assert_null(ints);
    ints = (const int64_t *)&ints;
    assert_int_equal(vram__attr_ints(n, "group", &ints), 0);
    assert_null(ints);

    g.values[3].data = malloc(16);
    g.values[3].nbytes = 16;
    g.values[5].dim_param[2] = strdup("batch");
    g.producer = strdup("p");
    vram__graph_free(&g);
    assert_zeroed(&g);
}

/* ---- loading a valid model ---------------------------------------------- */

static void test_load_valid(void **state)
{
    (void)state;
    mb *b = valid_model();
    vram__graph g;
    load_ok(b, &g);
    check_graph(&g);

    assert_int_equal(g.opset, 13);
    assert_string_equal(g.producer, "vramkit-test 1.2");
    assert_int_equal(g.n_values, 16);
    assert_int_equal(g.n_nodes, 5);

    /* initializers, from raw_data and from each typed field */
    const vram__value *v = value(&g, "W");
    assert_int_equal(v->flags, VRAM__VALUE_INITIALIZER | VRAM__VALUE_OUTPUT);
    assert_int_equal(v->dtype, VRAM_DTYPE_FLOAT);
    assert_int_equal(v->shape.rank, 2);
    assert_int_equal(v->shape.dim[0], 2);
    assert_int_equal(v->shape.dim[1], 3);
    assert_int_equal(v->producer, -1);
    assert_int_equal(v->nbytes, sizeof W_DATA);
    assert_memory_equal(v->data, W_DATA, sizeof W_DATA);
    v = value(&g, "B");
    assert_int_equal(v->flags, VRAM__VALUE_INITIALIZER);
    assert_int_equal(v->nbytes, 8);
    assert_true(((const float *)v->data)[0] == 0.5f && ((const float *)v->data)[1] == -1.5f);
    v = value(&g, "shape");
    assert_int_equal(v->dtype, VRAM_DTYPE_INT64);
    assert_int_equal(v->nbytes, 16);
    assert_int_equal(((const int64_t *)v->data)[0], 1);
    assert_int_equal(((const int64_t *)v->data)[1], -1);
    v = value(&g, "i8");
    assert_int_equal(v->dtype, VRAM_DTYPE_INT8);
    assert_int_equal(v->nbytes, 3);
    assert_memory_equal(v->data, ((const int8_t[]){-1, 2, 127}), 3);
    v = value(&g, "h");
    assert_int_equal(v->dtype, VRAM_DTYPE_FLOAT16);
    assert_int_equal(v->nbytes, 4);
    assert_memory_equal(v->data, ((const uint16_t[]){0x3c00, 0xc000}), 4);
    v = value(&g, "flag");
    assert_int_equal(v->dtype, VRAM_DTYPE_BOOL);
    assert_int_equal(v->shape.rank, 0);
    assert_int_equal(v->nbytes, 1);
    assert_int_equal(((const uint8_t *)v->data)[0], 1);
    v = value(&g, "d");
    assert_int_equal(v->dtype, VRAM_DTYPE_DOUBLE);
    assert_true(((const double *)v->data)[0] == 2.5);
    v = value(&g, "empty");
    assert_int_equal(v->shape.rank, 2);
    assert_int_equal(v->shape.dim[0], 0);
    assert_int_equal(v->nbytes, 0);
    assert_non_null(v->data); /* constant even without elements */

    /* graph inputs: the initializer listed in graph.input is not one */
    assert_int_equal(g.n_inputs, 2);
    assert_int_equal(g.inputs[0], vram__graph_find(&g, "x"));
    assert_int_equal(g.inputs[1], vram__graph_find(&g, "y"));
    v = value(&g, "x");
    assert_int_equal(v->flags, VRAM__VALUE_INPUT);
    assert_int_equal(v->dtype, VRAM_DTYPE_FLOAT);
    assert_int_equal(v->shape.rank, 2);
    assert_int_equal(v->shape.dim[0], -1);
    assert_int_equal(v->shape.dim[1], 3);
    assert_string_equal(v->dim_param[0], "batch");
    assert_null(v->dim_param[1]);
    assert_null(v->data);
    v = value(&g, "y");
    assert_int_equal(v->dtype, VRAM_DTYPE_INT64);
    assert_int_equal(v->shape.dim[0], -1);
    assert_null(v->dim_param[0]);
    assert_int_equal(v->shape.dim[1], 4);

    /* nodes: links, empty optional input and output, attributes */
    const vram__node *n = &g.nodes[0];
    assert_string_equal(n->name, "gemm");
    assert_string_equal(n->op, "Gemm");
    assert_int_equal(n->n_in, 3);
    assert_int_equal(n->in[0], vram__graph_find(&g, "x"));
    assert_int_equal(n->in[1], vram__graph_find(&g, "W"));
    assert_int_equal(n->in[2], vram__graph_find(&g, "B"));
    assert_int_equal(n->n_out, 1);
    assert_int_equal(n->out[0], vram__graph_find(&g, "g"));
    assert_true(vram__attr_float(n, "alpha", 1.0f) == 0.5f);
    assert_int_equal(vram__attr_int(n, "transB", 0), 1);
    assert_int_equal(n->attrs[0].tensor, -1);
    v = value(&g, "g");
    assert_int_equal(v->producer, 0);
    assert_int_equal(v->flags, 0);
    assert_int_equal(v->dtype, VRAM_DTYPE_FLOAT); /* from value_info */
    assert_int_equal(v->shape.rank, 2);
    assert_int_equal(v->shape.dim[0], -1);
    assert_int_equal(v->shape.dim[1], 2);
    assert_null(v->dim_param[0]); /* symbolic dims only on graph inputs and outputs */
    assert_int_equal(vram__graph_find(&g, "nothing"), -1);

    n = &g.nodes[1];
    assert_string_equal(n->name, "");
    assert_string_equal(n->op, "Reshape");
    assert_int_equal(n->n_attrs, 0);
    assert_int_equal(value(&g, "r")->producer, 1);
    assert_int_equal(value(&g, "r")->dtype, VRAM_DTYPE_UNDEFINED);
    assert_int_equal(value(&g, "r")->shape.rank, -1);

    n = &g.nodes[2]; /* Constant: its tensor became a constant value */
    assert_string_equal(n->op, "Constant");
    assert_int_equal(n->n_in, 0);
    assert_int_equal(n->n_attrs, 1);
    assert_int_equal(n->attrs[0].type, VRAM__ATTR_TENSOR);
    int ct = n->attrs[0].tensor;
    assert_int_equal(ct, vram__graph_find(&g, "c/value"));
    assert_int_equal(g.values[ct].flags, VRAM__VALUE_INITIALIZER);
    assert_int_equal(g.values[ct].shape.rank, 0);
    assert_int_equal(g.values[ct].producer, -1);
    assert_true(*(const float *)g.values[ct].data == 6.0f);

    n = &g.nodes[3];
    assert_int_equal(n->n_in, 3);
    assert_int_equal(n->in[0], vram__graph_find(&g, "r"));
    assert_int_equal(n->in[1], -1);
    assert_int_equal(n->in[2], vram__graph_find(&g, "maxv"));

    n = &g.nodes[4];
    assert_int_equal(n->n_out, 2);
    assert_int_equal(n->out[0], vram__graph_find(&g, "out"));
    assert_int_equal(n->out[1], -1);
    assert_int_equal(n->n_attrs, 5);
    const vram__attr *a = vram__node_attr(n, "mode");
    assert_int_equal(a->type, VRAM__ATTR_STRING);
    assert_int_equal(a->s_len, 3);
    assert_string_equal(vram__attr_string(n, "mode", NULL), "abc");
    a = vram__node_attr(n, "scales");
    assert_int_equal(a->type, VRAM__ATTR_FLOATS);
    assert_int_equal(a->n, 2);
    assert_true(a->floats[0] == 1.0f && a->floats[1] == 2.0f);
    const int64_t *ints;
    assert_int_equal(vram__attr_ints(n, "pads", &ints), 4);
    assert_int_equal(ints[0], 0);
    assert_int_equal(ints[3], 3);
    a = vram__node_attr(n, "names");
    assert_int_equal(a->type, VRAM__ATTR_STRINGS);
    assert_int_equal(a->n, 2);
    assert_string_equal(a->strings[0], "a");
    assert_string_equal(a->strings[1], "bc");
    a = vram__node_attr(n, "none");
    assert_int_equal(a->type, VRAM__ATTR_INTS);
    assert_int_equal(a->n, 0);
    assert_int_equal(vram__attr_ints(n, "none", &ints), 0);

    /* graph outputs */
    assert_int_equal(g.n_outputs, 2);
    assert_int_equal(g.outputs[0], vram__graph_find(&g, "out"));
    assert_int_equal(g.outputs[1], vram__graph_find(&g, "W"));
    v = value(&g, "out");
    assert_int_equal(v->flags, VRAM__VALUE_OUTPUT);
    assert_int_equal(v->producer, 4);
    assert_int_equal(v->dtype, VRAM_DTYPE_FLOAT);
    assert_int_equal(v->shape.rank, 2);
    assert_int_equal(v->shape.dim[1], 2);
    assert_string_equal(v->dim_param[0], "batch");

    vram__graph_free(&g);
    assert_zeroed(&g);
    arena_reset();
}

/* A clone shares the constants and copies the rest: changing and freeing it
 * leaves the original whole, and replacing a borrowed value's data never
 * frees what the original owns. */
static void test_clone(void **state)
{
    (void)state;
    mb *b = valid_model();
    vram__graph g, c;
    load_ok(b, &g);
    assert_int_equal(vram__graph_clone(&g, &c), 0);
    check_graph(&c);
    assert_int_equal(c.n_values, g.n_values);
    assert_int_equal(c.n_nodes, g.n_nodes);
    assert_int_equal(c.n_inputs, g.n_inputs);
    assert_int_equal(c.n_outputs, g.n_outputs);
    assert_int_equal(c.opset, g.opset);
    assert_string_equal(c.producer, g.producer);
    for (int i = 0; i < g.n_values; i++) {
        assert_string_equal(c.values[i].name, g.values[i].name);
        assert_ptr_not_equal(c.values[i].name, g.values[i].name);
        assert_ptr_equal(c.values[i].data, g.values[i].data);
        assert_int_equal(c.values[i].nbytes, g.values[i].nbytes);
        assert_int_equal(!!(c.values[i].flags & VRAM__VALUE_BORROWED), c.values[i].data != NULL);
        assert_false(g.values[i].flags & VRAM__VALUE_BORROWED);
    }
    for (int i = 0; i < g.n_nodes; i++) {
        assert_string_equal(c.nodes[i].op, g.nodes[i].op);
        assert_int_equal(c.nodes[i].n_attrs, g.nodes[i].n_attrs);
        if (c.nodes[i].n_in)
            assert_ptr_not_equal(c.nodes[i].in, g.nodes[i].in);
    }
    int w = vram__graph_find(&c, "W");
    assert_true(w >= 0);
    /* Replacing the clone's borrowed data: the original keeps its own. */
    float *mine = malloc(sizeof W_DATA);
    memcpy(mine, W_DATA, sizeof W_DATA);
    mine[0] = 42.0f;
    vram__value_set_data(&c.values[w], mine, sizeof W_DATA);
    assert_false(c.values[w].flags & VRAM__VALUE_BORROWED);
    assert_memory_equal(g.values[w].data, W_DATA, sizeof W_DATA);
    c.nodes[0].in[0] = -1; /* the clone's nodes are its own */
    assert_int_not_equal(g.nodes[0].in[0], -1);
    vram__graph_free(&c);
    /* Under ASan a freed borrowed constant would show here. */
    check_graph(&g);
    assert_memory_equal(value(&g, "W")->data, W_DATA, sizeof W_DATA);
    vram__graph_free(&g);
}

static void test_load_variants(void **state)
{
    (void)state;
    /* Every supported opset; "ai.onnx" names the default domain too; a
     * foreign domain imported but not used is fine; no producer. */
    for (int64_t opset = 11; opset <= 21; opset++) {
        mb *b = mb_new(opset);
        b->op.domain = opset % 2 ? "ai.onnx" : NULL;
        Onnx__OperatorSetIdProto *ms = mk(sizeof *ms);
        onnx__operator_set_id_proto__init(ms);
        ms->domain = "com.microsoft";
        ms->has_version = 1;
        ms->version = 1;
        b->ops[1] = ms;
        b->m.n_opset_import = 2;
        ADD(b, input, vinfo("x", 1, -1, NULL, NULL));
        ADD(b, node, node(NULL, "Relu", 1, S("x"), 1, S("y")));
        ADD(b, output, vinfo("y", 1, 1, D(5), NULL));
        vram__graph g;
        load_ok(b, &g);
        assert_int_equal(g.opset, opset);
        assert_string_equal(g.producer, "");
        assert_string_equal(g.nodes[0].name, "");
        assert_int_equal(value(&g, "x")->shape.rank, -1); /* no shape in the file */
        assert_int_equal(value(&g, "y")->shape.rank, 1);
        assert_int_equal(value(&g, "y")->shape.dim[0], 5);
        vram__graph_free(&g);
        arena_reset();
    }

    /* Two Constant nodes without names, and a tensor name that would
     * collide: each constant gets its own name. */
    mb *b = mb_new(17);
    b->m.producer_name = "only-name";
    for (int i = 0; i < 2; i++) {
        Onnx__NodeProto *n = node(NULL, "Constant", 0, NULL, 1, i ? S("k1") : S("#0/value"));
        Onnx__AttributeProto *a = attr(n, "value", 4);
        a->t = tensor(NULL, 7, 1, D(2));
        a->t->n_int64_data = 2;
        a->t->int64_data = mk_copy(D(10 + i, 20 + i), 2 * sizeof(int64_t));
        ADD(b, node, n);
    }
    ADD(b, output, vinfo("k1", 7, 1, D(2), NULL));
    vram__graph g;
    load_ok(b, &g);
    assert_string_equal(g.producer, "only-name");
    int c0 = g.nodes[0].attrs[0].tensor, c1 = g.nodes[1].attrs[0].tensor;
    assert_true(c0 >= 0 && c1 >= 0 && c0 != c1);
    assert_string_equal(g.values[c0].name, "#0/value#2");
    assert_string_equal(g.values[c1].name, "#1/value");
    assert_int_equal(((const int64_t *)g.values[c0].data)[1], 20);
    assert_int_equal(((const int64_t *)g.values[c1].data)[0], 11);
    vram__graph_free(&g);
    arena_reset();

    /* Many values: names resolve through the loader's hash as it grows. */
    b = mb_new(13);
    static char names[300][16];
    ADD(b, input, vinfo("v0", 1, 0, NULL, NULL));
    snprintf(names[0], sizeof names[0], "v0");
    b->g.node = mk(300 * sizeof *b->g.node);
    for (int i = 1; i < 300; i++) {
        snprintf(names[i], sizeof names[i], "v%d", i);
        const char *in[2] = {names[i - 1], names[i / 2]};
        const char *out[1] = {names[i]};
        b->g.node[b->g.n_node++] = node(NULL, "Add", 2, in, 1, out);
    }
    ADD(b, output, vinfo("v299", 1, 0, NULL, NULL));
    load_ok(b, &g);
    assert_int_equal(g.n_values, 300);
    for (int i = 1; i < 300; i++) {
        assert_int_equal(g.nodes[i - 1].in[0], i - 1);
        assert_int_equal(g.nodes[i - 1].in[1], i / 2);
        assert_int_equal(g.nodes[i - 1].out[0], i);
        assert_int_equal(g.values[i].producer, i - 1);
    }
    vram__graph_free(&g);
    arena_reset();
}

/* ---- refusals ------------------------------------------------------------- */

static void test_truncated_and_garbage(void **state)
{
    (void)state;
    size_t len;
    mb *b = valid_model();
    uint8_t *bytes = pack(b, &len);
    vram__graph g;
    assert_int_equal(vram__onnx_load(bytes, len, &g), 0);
    vram__graph_free(&g);
    /* Where the graph lies in the bytes: fields are packed by number, so
     * ir_version, producer_name and producer_version (1-3) come first, then
     * the graph (7), then opset_import (8). */
    size_t graph_len = onnx__graph_proto__get_packed_size(&b->g);
    b->m.graph = NULL;
    b->m.n_opset_import = 0;
    size_t graph_at = onnx__model_proto__get_packed_size(&b->m);
    assert_true(graph_at + graph_len + 3 < len);
    /* Every cut of the model is refused: either the protobuf does not decode
     * or what decodes lacks the graph or the opset. Cuts inside the graph
     * say the protobuf is truncated. */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exactly cut bytes: ASan sees any overread */
        assert_non_null(copy);
        memcpy(copy, bytes, cut);
        expect_fail_bytes(copy, cut, NULL);
        if (cut > graph_at && cut < graph_at + graph_len)
            assert_non_null(strstr(vram_last_error(), "truncated or malformed"));
        free(copy);
    }
    expect_fail_bytes(bytes, 0, "the model has no graph");
    expect_fail_bytes(NULL, 0, "the model has no graph");
    memset(&g, 0xa5, sizeof g);
    assert_int_equal(vram__onnx_load(NULL, 5, &g), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "NULL with length 5"));
    assert_zeroed(&g);

    /* Random bytes, and random corruptions of the valid model. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t buf[512];
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + round % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        vram__graph gg;
        int rc = vram__onnx_load(buf, n, &gg);
        assert_int_equal(rc, VRAM_EPARSE);
        assert_zeroed(&gg);
    }
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    int loaded = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, bytes, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[(x >> 8) % len] = (uint8_t)x;
        }
        vram__graph gg;
        int rc = vram__onnx_load(copy, len, &gg);
        if (rc == 0) {
            loaded++; /* a harmless change (a name's letter, a float, ...) */
            check_graph(&gg);
            vram__graph_free(&gg);
        } else {
            assert_int_equal(rc, VRAM_EPARSE);
            assert_true(strlen(vram_last_error()) > 0);
        }
        assert_zeroed(&gg);
    }
    assert_true(loaded > 0 && loaded < 3000);
    free(copy);
    arena_reset();
}

static void test_opset_and_domain(void **state)
{
    (void)state;
    mb *b = valid_model();
    b->op.version = 10;
    expect_fail(b, "opset 10 is outside the supported 11-21");
    b->op.version = 22;
    expect_fail(b, "opset 22 is outside the supported 11-21");
    b->op.domain = "ai.onnx.ml";
    expect_fail(b, "imports no opset of the default domain");
    b->m.n_opset_import = 0;
    expect_fail(b, "imports no opset of the default domain");
    b->op.domain = "";
    b->op.version = 13;
    b->m.n_opset_import = 1;

    Onnx__NodeProto *n = find_node(b, "clip");
    n->domain = "com.microsoft";
    expect_fail(b, "node 'clip' (Clip) is in domain 'com.microsoft', which is not supported");
    n->domain = NULL;
    n->op_type = NULL;
    expect_fail(b, "node 'clip' () has no op_type");
    arena_reset();
}

static void test_bad_references(void **state)
{
    (void)state;
    mb *b = valid_model();
    Onnx__NodeProto *n = find_node(b, "gemm");
    n->input[1] = "nope";
    expect_fail(
        b, "node 'gemm' (Gemm) reads 'nope' which no earlier node, input or initializer defines");
    /* a later node's output is not defined yet: file order must be topological */
    n->input[1] = "z";
    expect_fail(b, "node 'gemm' (Gemm) reads 'z' which no earlier");
    n->input[1] = "W";
    n = find_node(b, "clip");
    n->output[0] = "g";
    expect_fail(b, "node 'clip' (Clip) writes 'g', which is already defined");
    n->output[0] = "x"; /* a graph input */
    expect_fail(b, "writes 'x', which is already defined");
    n->output[0] = "W"; /* an initializer */
    expect_fail(b, "writes 'W', which is already defined");
    n->output[0] = "z";

    b->g.output[0]->name = "ghost";
    expect_fail(b, "graph output 'ghost' names no tensor of the graph");
    b->g.output[0]->name = "W";
    expect_fail(b, "graph output 'W' is listed twice");
    b->g.output[0]->name = "out";

    b->g.initializer[1]->name = "W";
    expect_fail(b, "initializer 'W' is defined twice");
    b->g.initializer[1]->name = NULL;
    expect_fail(b, "initializer #1 has no name");
    b->g.initializer[1]->name = "B";
    b->g.input[2]->name = "x";
    expect_fail(b, "graph input 'x' is defined twice");
    b->g.input[2]->name = "y";
    ADD(b, input, vinfo("s", 8, 0, NULL, NULL));
    expect_fail(b, "graph input 's' has type string, which the engine does not handle");
    b->g.input[3] = vinfo("big", 1, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1), NULL);
    expect_fail(b, "graph input 'big' has rank 9, more than the 8 supported");
    b->g.input[3] = vinfo("neg", 1, 2, D(1, 1), NULL);
    b->g.input[3]->type->tensor_type->shape->dim[1]->dim_value = -4;
    expect_fail(b, "graph input 'neg' has a negative dimension (-4 at axis 1)");
    b->g.n_input--;

    /* A bad value_info hint is ignored: it is only a hint. */
    b->g.value_info[0] = vinfo("g", 8, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1), NULL);
    vram__graph g;
    load_ok(b, &g);
    assert_int_equal(value(&g, "g")->dtype, VRAM_DTYPE_UNDEFINED);
    assert_int_equal(value(&g, "g")->shape.rank, -1);
    vram__graph_free(&g);

    b->m.graph = NULL;
    expect_fail(b, "the model has no graph");
    arena_reset();
}

static void test_bad_tensors(void **state)
{
    (void)state;
    mb *b = valid_model();
    Onnx__TensorProto *w = b->g.initializer[0];

    w->raw_data.len = 20;
    expect_fail(b, "tensor 'W' has 20 bytes of raw_data, expected 24 (6 elements of float)");
    w->raw_data.len = 24;

    w->dims[0] = -2;
    expect_fail(b, "tensor 'W' has a negative dimension (-2 at axis 0)");
    w->dims[0] = INT64_C(1) << 40;
    w->dims[1] = INT64_C(1) << 40;
    expect_fail(b, "tensor 'W': its dims overflow");
    w->dims[0] = INT64_MAX;
    w->dims[1] = 1;
    expect_fail(b, "tensor 'W': its dims overflow"); /* elements fit, bytes do not */
    w->dims[0] = 2;
    w->dims[1] = 3;

    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    w->dims = nine;
    w->n_dims = 9;
    expect_fail(b, "tensor 'W' has rank 9, more than the 8 supported");
    w->dims = mk_copy(D(2, 3), 2 * sizeof(int64_t));
    w->n_dims = 2;

    w->has_data_location = 1;
    w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    expect_fail(b, "external data is not supported: tensor 'W'");
    w->has_data_location = 0;
    Onnx__StringStringEntryProto e = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    e.key = "location";
    e.value = "weights.bin";
    Onnx__StringStringEntryProto *ep = &e;
    w->n_external_data = 1;
    w->external_data = &ep;
    expect_fail(b, "external data is not supported: tensor 'W'");
    w->n_external_data = 0;

    w->data_type = 8;
    expect_fail(b, "tensor 'W' has type string, which the engine does not handle");
    w->data_type = 16;
    expect_fail(b, "tensor 'W' has type bfloat16, which the engine does not handle");
    w->has_data_type = 0;
    expect_fail(b, "tensor 'W' has no data type");
    w->has_data_type = 1;
    w->data_type = 1;

    Onnx__TensorProto *bias = b->g.initializer[1];
    bias->n_float_data = 1;
    expect_fail(b, "tensor 'B' has 1 values in float_data, expected 2");
    bias->n_float_data = 2;
    bias->data_type = 7; /* the values sit in the wrong field */
    expect_fail(b, "tensor 'B' has 0 values in int64_data, expected 2");
    bias->data_type = 1;
    w->has_raw_data = 0;
    expect_fail(b, "tensor 'W' has 0 values in float_data, expected 6");
    w->has_raw_data = 1;

    /* the same checks hold for a TENSOR attribute */
    Onnx__NodeProto *c = find_node(b, "c");
    Onnx__TensorProto *t = c->attribute[0]->t;
    t->raw_data.len = 2;
    expect_fail(
        b, "attribute 'value' of node 'c' (Constant): tensor 'c/value' has 2 bytes of raw_data");
    t->raw_data.len = 4;
    c->attribute[0]->t = NULL;
    expect_fail(b, "attribute 'value' of node 'c' (Constant) holds no tensor");
    c->attribute[0]->t = t;

    vram__graph g;
    load_ok(b, &g); /* every change undone */
    vram__graph_free(&g);
    arena_reset();
}

/* A GraphProto nested `levels` times through If's then_branch. */
static Onnx__GraphProto *nested_graph(int levels)
{
    Onnx__GraphProto *gp = mk(sizeof *gp);
    onnx__graph_proto__init(gp);
    if (levels == 0)
        return gp;
    Onnx__NodeProto *n = node(NULL, "If", 0, NULL, 0, NULL);
    Onnx__AttributeProto *a = attr(n, "then_branch", 5);
    a->g = nested_graph(levels - 1);
    gp->n_node = 1;
    gp->node = mk(sizeof *gp->node);
    gp->node[0] = n;
    return gp;
}

static void test_bad_attributes(void **state)
{
    (void)state;
    mb *b = valid_model();
    Onnx__NodeProto *n = node("ifnode", "If", 1, S("x"), 1, S("branch"));
    Onnx__AttributeProto *a = attr(n, "then_branch", 5);
    a->g = nested_graph(0);
    ADD(b, node, n);
    expect_fail(b, "subgraphs are not supported (node ifnode, If)");
    a->type = 10; /* GRAPHS */
    a->g = NULL;
    expect_fail(b, "subgraphs are not supported (node ifnode, If)");
    a->type = 11;
    expect_fail(b, "attribute 'then_branch' of node 'ifnode' (If) is of type SPARSE_TENSOR 11, "
                   "which is not supported");
    a->type = 9;
    expect_fail(b, "is of type TENSORS 9");
    a->type = 99;
    expect_fail(b, "is of type 99, which is not supported");
    a->has_type = 0;
    expect_fail(b, "attribute 'then_branch' of node 'ifnode' (If) has no type");
    a->has_type = 1;
    a->type = 2;
    a->name = NULL;
    expect_fail(b, "node 'ifnode' (If) has an attribute without a name");
    a->name = "then_branch";
    vram__graph g;
    load_ok(b, &g);
    vram__graph_free(&g);

    /* Messages nested deeper than protobuf-c should recurse: refused before
     * decoding. 30 levels of If are 90 messages deep. */
    a->type = 5;
    a->g = nested_graph(30);
    expect_fail(b, "nest more than 64 deep");
    a->g = nested_graph(3); /* shallow: decoded, then refused as a subgraph */
    expect_fail(b, "subgraphs are not supported");
    arena_reset();
}

/* Prepend a length-delimited field header (tag, length) before buf[*pos]. */
static void prepend_field(uint8_t *buf, size_t *pos, unsigned field, size_t len)
{
    uint8_t hdr[12];
    size_t n = 0;
    hdr[n++] = (uint8_t)(field << 3 | 2);
    do {
        hdr[n] = (uint8_t)(len & 0x7f);
        len >>= 7;
        if (len)
            hdr[n] |= 0x80;
        n++;
    } while (len);
    assert_true(*pos >= n);
    *pos -= n;
    memcpy(buf + *pos, hdr, n);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* 100000 levels of Graph.node -> Node.attribute -> Attribute.g, written
     * as raw bytes (packing it would recurse too): decoding this with
     * protobuf-c alone overflows the stack. The loader refuses it first. */
    enum { LEVELS = 100000 };
    size_t cap = (size_t)LEVELS * 3 * 4 + 16, pos = cap;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    for (int i = 0; i < LEVELS; i++) {
        prepend_field(buf, &pos, 6, cap - pos); /* AttributeProto.g */
        prepend_field(buf, &pos, 5, cap - pos); /* NodeProto.attribute */
        prepend_field(buf, &pos, 1, cap - pos); /* GraphProto.node */
    }
    prepend_field(buf, &pos, 7, cap - pos); /* ModelProto.graph */
    expect_fail_bytes(buf + pos, cap - pos, "protobuf messages nest more than 64 deep");
    /* The limit exactly: with 21 levels the innermost graph is the 64th
     * message below the model; it decodes (and is refused later, for lack
     * of an opset). 22 levels do not decode. */
    for (int levels = 21; levels <= 22; levels++) {
        pos = cap;
        for (int i = 0; i < levels; i++) {
            prepend_field(buf, &pos, 6, cap - pos);
            prepend_field(buf, &pos, 5, cap - pos);
            prepend_field(buf, &pos, 1, cap - pos);
        }
        prepend_field(buf, &pos, 7, cap - pos);
        expect_fail_bytes(buf + pos, cap - pos,
                          levels == 21 ? "the model imports no opset" : "nest more than 64 deep");
    }
    free(buf);
}

/* Seeds for tests/fuzz/fuzz_onnx.c, written only when asked. */
static void test_write_corpus(void **state)
{
    (void)state;
    const char *dir = getenv("VRAM_FUZZ_CORPUS_OUT");
    if (!dir || !*dir)
        skip();
    struct {
        const char *name;
        mb *b;
    } seeds[4];
    seeds[0].name = "valid";
    seeds[0].b = valid_model();
    seeds[1].name = "minimal";
    seeds[1].b = mb_new(11);
    ADD(seeds[1].b, input, vinfo("x", 1, 1, D(4), NULL));
    ADD(seeds[1].b, node, node("relu", "Relu", 1, S("x"), 1, S("y")));
    ADD(seeds[1].b, output, vinfo("y", 1, 1, D(4), NULL));
    seeds[2].name = "subgraph";
    seeds[2].b = valid_model();
    Onnx__NodeProto *n = node("ifnode", "If", 1, S("x"), 1, S("branch"));
    attr(n, "then_branch", 5)->g = nested_graph(2);
    ADD(seeds[2].b, node, n);
    seeds[3].name = "external";
    seeds[3].b = valid_model();
    seeds[3].b->g.initializer[0]->has_data_location = 1;
    seeds[3].b->g.initializer[0]->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        size_t len;
        uint8_t *bytes = pack(seeds[i].b, &len);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.onnx", dir, seeds[i].name);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
    arena_reset();
}

static int teardown(void **state)
{
    (void)state;
    arena_reset();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_dtypes_and_shapes, teardown),
        cmocka_unit_test_teardown(test_graph_values_and_attrs, teardown),
        cmocka_unit_test_teardown(test_load_valid, teardown),
        cmocka_unit_test_teardown(test_clone, teardown),
        cmocka_unit_test_teardown(test_load_variants, teardown),
        cmocka_unit_test_teardown(test_truncated_and_garbage, teardown),
        cmocka_unit_test_teardown(test_opset_and_domain, teardown),
        cmocka_unit_test_teardown(test_bad_references, teardown),
        cmocka_unit_test_teardown(test_bad_tensors, teardown),
        cmocka_unit_test_teardown(test_bad_attributes, teardown),
        cmocka_unit_test_teardown(test_deep_nesting, teardown),
        cmocka_unit_test_teardown(test_write_corpus, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
