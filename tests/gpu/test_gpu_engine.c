/* tests/gpu/test_gpu_engine.c - the cuda executor on a GPU, through the
 * public API: a model's outputs match the cpu executor's within 1e-3
 * relative L2 (exact FP32), running allocates nothing from the pool (with
 * and without CUDA graphs), graphs give the same outputs as plain runs at
 * every batch, a Gather index out of range in the data is an error naming
 * it, a context that does not fit its budget leaves nothing behind, and the
 * engine cannot be destroyed under a context. Models come from the
 * generated reference set (VRAM_ONNX_REF, tools/onnx/gen_models.py). Needs
 * a GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vramkit.h"

static char models[4096];
static vram_device *dev;

static const char *model(const char *name)
{
    static char path[4352];
    snprintf(path, sizeof path, "%s/%s.onnx", models, name);
    return path;
}

static void assert_contains(const char *s, const char *part)
{
    if (!strstr(s, part))
        fail_msg("\"%s\" does not contain \"%s\"", s, part);
}

static vram_pool *gpu_pool(const char *backend, vram_backend **b)
{
    vram_backend_opts bo = {.device = dev};
    assert_int_equal(vram_backend_create(backend, &bo, b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = *b;
    o.configured_listeners = 0;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static vram_engine *load(const char *name, const char *executor, vram_pool *p, int64_t batch,
                         int graphs)
{
    vram_engine_opts o;
    vram_engine_opts_init(&o);
    o.executor = executor;
    o.pool = p;
    o.batch = batch;
    o.graphs = graphs;
    vram_engine *e = NULL;
    int rc = vram_engine_load(model(name), &o, &e);
    if (rc)
        fail_msg("loading %s on %s: %s", name, executor, vram_last_error());
    return e;
}

/* Seeded inputs (float in [-1, 1), int64 in 0..3), the same for every call
 * with the same seed. */
static void fill(vram_exec *c, uint64_t seed)
{
    for (size_t i = 0;; i++) {
        vram_tensor_desc d;
        if (vram_exec_input_desc(c, i, &d))
            break;
        size_t n = 1;
        for (int k = 0; k < d.rank; k++)
            n *= (size_t)d.dims[k];
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + i + 1;
        if (d.dtype == 1) {
            float *v = malloc(n * sizeof *v + 1);
            for (size_t k = 0; k < n; k++) {
                x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
                v[k] = (float)((double)((x * 0x2545F4914F6CDD1Dull) >> 40) / 8388608.0 - 1.0);
            }
            assert_int_equal(vram_exec_set_input(c, i, v, n * sizeof *v), 0);
            free(v);
        } else {
            assert_int_equal(d.dtype, 7);
            int64_t *v = malloc(n * sizeof *v + 1);
            for (size_t k = 0; k < n; k++) {
                x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
                v[k] = (int64_t)((x * 0x2545F4914F6CDD1Dull) >> 62);
            }
            assert_int_equal(vram_exec_set_input(c, i, v, n * sizeof *v), 0);
            free(v);
        }
    }
}

/* Output i read back to the host (caller frees), with its float count. */
static float *output(vram_exec *c, size_t i, size_t *n)
{
    const void *p;
    size_t bytes;
    assert_int_equal(vram_exec_output(c, i, &p, &bytes), 0);
    float *h = malloc(bytes + 1);
    assert_int_equal(vram_exec_read_output(c, i, h, bytes), 0);
    *n = bytes / sizeof(float);
    return h;
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t k = 0; k < n; k++) {
        d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
        s += (double)b[k] * b[k];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

/* cuda against cpu on the same inputs. */
static void compare_with_cpu(const char *name, int64_t batch)
{
    vram_backend *b;
    vram_pool *p = gpu_pool("vmm", &b);
    vram_engine *ce = load(name, "cpu", NULL, batch, 0);
    vram_engine *ge = load(name, "cuda", p, batch, 0);
    vram_exec *cc, *gc;
    assert_int_equal(vram_exec_create(ce, &cc), 0);
    assert_int_equal(vram_exec_create(ge, &gc), 0);
    assert_non_null(vram_exec_stream(gc));
    assert_null(vram_exec_stream(cc));
    fill(cc, 7);
    fill(gc, 7);
    assert_int_equal(vram_exec_run(cc), 0);
    assert_int_equal(vram_exec_run(gc), 0);
    for (size_t i = 0; i < vram_engine_output_count(ce); i++) {
        size_t n1, n2;
        float *a = output(cc, i, &n1), *g = output(gc, i, &n2);
        assert_int_equal(n1, n2);
        double err = rel_l2(g, a, n1);
        if (!(err <= 1e-3))
            fail_msg("%s output %zu: cuda differs from cpu by %.3g relative L2", name, i, err);
        free(a);
        free(g);
    }
    vram_exec_destroy(cc);
    vram_exec_destroy(gc);
    vram_engine_destroy(ce);
    vram_engine_destroy(ge);
    vram_pool_destroy(p);
    vram_backend_destroy(b);
}

static void test_matches_cpu(void **state)
{
    (void)state;
    const char *names[] = {"mixed_small_cnn", "mixed_decoder_convtranspose_resize_concat", "mixed_dynamic_batch_N",
                           "gemm_transA_transB_alpha_beta", "matmul_broadcast_batch"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        compare_with_cpu(names[i], 1);
    }
}

/* Runs take nothing from the pool, plain or through graphs, and graphs give
 * the plain runs' outputs exactly. */
static void test_run_allocates_nothing(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = gpu_pool("vmm", &b);
    vram_engine *plain = load("mixed_small_cnn", "cuda", p, 1, 0);
    vram_engine *graph = load("mixed_small_cnn", "cuda", p, 1, 1);
    vram_exec *a, *g;
    assert_int_equal(vram_exec_create(plain, &a), 0);
    assert_int_equal(vram_exec_create(graph, &g), 0);
    fill(a, 3);
    fill(g, 3);
    vram_pool_stats s0;
    assert_int_equal(vram_pool_stats_get(p, &s0), 0);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(vram_exec_run(a), 0);
        assert_int_equal(vram_exec_run(g), 0);
    }
    vram_pool_stats s1;
    assert_int_equal(vram_pool_stats_get(p, &s1), 0);
    assert_int_equal(s1.allocs_total, s0.allocs_total);
    assert_int_equal(s1.frees_total, s0.frees_total);
    assert_int_equal(s1.backend_calls_total, s0.backend_calls_total);
    size_t n1, n2;
    float *x = output(a, 0, &n1), *y = output(g, 0, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(x, y, n1 * sizeof *x);
    free(x);
    free(y);
    assert_int_equal(vram_engine_destroy(plain), VRAM_EBUSY);
    vram_exec_destroy(a);
    vram_exec_destroy(g);
    assert_int_equal(vram_engine_destroy(plain), 0);
    assert_int_equal(vram_engine_destroy(graph), 0);
    vram_pool_stats s2;
    assert_int_equal(vram_pool_stats_get(p, &s2), 0);
    assert_int_equal(s2.live_bytes, 0);
    vram_pool_destroy(p);
    vram_backend_destroy(b);
}

/* A symbolic batch: one graph per batch, each matching a plain run. */
static void test_graph_per_batch(void **state)
{
    (void)state;
    const char *name = "mixed_dynamic_batch_N";
    vram_backend *b;
    vram_pool *p = gpu_pool("vmm", &b);
    vram_engine *plain = load(name, "cuda", p, 4, 0);
    vram_engine *graph = load(name, "cuda", p, 4, 1);
    vram_exec *a, *g;
    assert_int_equal(vram_exec_create(plain, &a), 0);
    assert_int_equal(vram_exec_create(graph, &g), 0);
    for (int64_t batch = 4; batch >= 1; batch -= 3) {
        assert_int_equal(vram_exec_set_batch(a, batch), 0);
        assert_int_equal(vram_exec_set_batch(g, batch), 0);
        fill(a, (uint64_t)batch);
        fill(g, (uint64_t)batch);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(vram_exec_run(a), 0);
            assert_int_equal(vram_exec_run(g), 0);
        }
        size_t n1, n2;
        float *x = output(a, 0, &n1), *y = output(g, 0, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(x, y, n1 * sizeof *x);
        free(x);
        free(y);
    }
    vram_exec_destroy(a);
    vram_exec_destroy(g);
    vram_engine_destroy(plain);
    vram_engine_destroy(graph);
    vram_pool_destroy(p);
    vram_backend_destroy(b);
}

/* An index out of range in the data is found by the kernel and reported. */
static void test_gather_index_error(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = gpu_pool("vmm", &b);
    for (int graphs = 0; graphs <= 1; graphs++) {
        vram_engine *e = load("gather_data_indices_axis_neg1", "cuda", p, 1, graphs);
        vram_exec *c;
        assert_int_equal(vram_exec_create(e, &c), 0);
        fill(c, 1);
        assert_int_equal(vram_exec_run(c), 0);
        vram_tensor_desc d;
        size_t idx = 0;
        while (vram_exec_input_desc(c, idx, &d) == 0 && d.dtype != 7)
            idx++;
        assert_int_equal(d.dtype, 7);
        int64_t bad[64] = {0};
        size_t n = 1;
        for (int k = 0; k < d.rank; k++)
            n *= (size_t)d.dims[k];
        assert_true(n <= 64);
        bad[n / 2] = 9;
        assert_int_equal(vram_exec_set_input(c, idx, bad, n * sizeof bad[0]), 0);
        assert_int_equal(vram_exec_run(c), VRAM_EINVAL);
        assert_contains(vram_last_error(), "index 9 is outside");
        bad[n / 2] = -1; /* from the end: valid again */
        assert_int_equal(vram_exec_set_input(c, idx, bad, n * sizeof bad[0]), 0);
        assert_int_equal(vram_exec_run(c), 0);
        vram_exec_destroy(c);
        vram_engine_destroy(e);
    }
    vram_pool_destroy(p);
    vram_backend_destroy(b);
}

/* A context over its owner's budget is refused and leaves the pool as it was. */
static void test_context_over_budget(void **state)
{
    (void)state;
    vram_backend *b;
    vram_pool *p = gpu_pool("vmm", &b);
    vram_owner owner;
    assert_int_equal(vram_owner_create(p, "model", 0, &owner), 0);
    vram_engine_opts o;
    vram_engine_opts_init(&o);
    o.executor = "cuda";
    o.pool = p;
    o.owner = owner;
    vram_engine *e;
    assert_int_equal(vram_engine_load(model("mixed_small_cnn"), &o, &e), 0);
    vram_engine_memory m;
    assert_int_equal(vram_engine_memory_get(e, &m), 0);
    assert_int_equal(vram_owner_set_budget(p, owner, m.weights_bytes + m.exec_bytes / 2), 0);
    vram_pool_stats s0;
    assert_int_equal(vram_pool_stats_get(p, &s0), 0);
    vram_exec *c = NULL;
    assert_int_equal(vram_exec_create(e, &c), VRAM_EBUDGET);
    assert_null(c);
    vram_pool_stats s1;
    assert_int_equal(vram_pool_stats_get(p, &s1), 0);
    assert_int_equal(s1.live_bytes, s0.live_bytes);
    assert_int_equal(vram_engine_destroy(e), 0);
    vram_pool_destroy(p);
    vram_backend_destroy(b);
}

static int setup(void **state)
{
    (void)state;
    return vram_device_open(0, NULL, &dev);
}

static int teardown(void **state)
{
    (void)state;
    return vram_device_close(dev);
}

int main(void)
{
    const char *ref = getenv("VRAM_ONNX_REF");
    if (!ref) {
        fprintf(stderr, "test_gpu_engine: set VRAM_ONNX_REF to the folder holding models/\n");
        return 1;
    }
    snprintf(models, sizeof models, "%s/models", ref);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_run_allocates_nothing),
        cmocka_unit_test(test_graph_per_batch),
        cmocka_unit_test(test_gather_index_error),
        cmocka_unit_test(test_context_over_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
