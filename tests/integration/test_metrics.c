/* tests/integration/test_metrics.c - the Prometheus exposition without HTTP
 * (vram_metrics_print). Checked:
 *  - a pool with owners and kinds: every family of VRAM_POOL_STATS and
 *    VRAM_USAGE_STATS appears once, with HELP and TYPE (counter exactly for
 *    names ending in _total), its samples in one group; the values equal the
 *    pool's statistics; owner and kind families sum to the pool's live bytes;
 *    budgets appear only for owners with one; the size classes count each
 *    request once; promtool accepts it;
 *  - label values with backslash, double quote and newline are escaped;
 *  - two pools share each family; NULL, listed twice or same-named pools
 *    are refused with VRAM_EINVAL;
 *  - NVML: without it, vram_nvml_available is 0 with the reason and no
 *    vram_gpu_ family is written; with VRAM_GPU_NONE and no pool
 *    nothing at all (a family without samples is left out whole);
 *  - a monitor's families follow the pools' and pass promtool too;
 *  - a writer's error stops the printing and is returned. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <vramkit.h>

#include "metrics_check.h"

#define MiB (1024ull * 1024)

typedef struct fixture {
    vram_backend *backend;
    vram_pool *pool;
    vram_owner cam, model;
    void *p[5];
} fixture;

static void make_pool(fixture *f, const char *name, const char *cam_name)
{
    memset(f, 0, sizeof *f);
    f->pool = sim_pool(name, 1024 * MiB, &f->backend);
    assert_int_equal(vram_owner_create(f->pool, cam_name, 256 * MiB, &f->cam), 0);
    assert_int_equal(vram_owner_create(f->pool, "model", 0, &f->model), 0);
    vram_stream s = (vram_stream)(uintptr_t)1;
    assert_int_equal(vram_pool_alloc(f->pool, 10 * MiB, f->cam, VRAM_KIND_FRAMES, s, &f->p[0]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 1 * MiB, f->cam, VRAM_KIND_ACTIVATIONS, s, &f->p[1]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 5 * MiB, f->model, VRAM_KIND_WEIGHTS, s, &f->p[2]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 4096, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, s, &f->p[3]), 0);
    assert_int_equal(vram_pool_alloc(f->pool, 300, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, s, &f->p[4]), 0);
    assert_int_equal(vram_pool_free(f->pool, f->p[4], s), 0);
    f->p[4] = NULL;
    /* A refused request: over cam's budget. */
    void *q;
    assert_int_equal(vram_pool_alloc(f->pool, 300 * MiB, f->cam, VRAM_KIND_FRAMES, s, &q), VRAM_EBUDGET);
}

static void drop_pool(fixture *f)
{
    for (int i = 0; i < 5; i++)
        if (f->p[i])
            assert_int_equal(vram_pool_free(f->pool, f->p[i], NULL), 0);
    assert_int_equal(vram_pool_destroy(f->pool), 0);
    assert_int_equal(vram_backend_destroy(f->backend), 0);
}

static char *print_pools(vram_pool **pools, size_t n, int gpu, vram_monitor *m)
{
    vram_metrics_opts o;
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    o.pools = pools;
    o.n_pools = n;
    o.gpu = gpu;
    o.monitor = m;
    vram_buffer b = {0};
    int rc = vram_metrics_print(&o, vram_write_buffer, &b, 0);
    if (rc)
        fail_msg("vram_metrics_print: %s", vram_last_error());
    return b.data ? b.data : strdup("");
}

static double value(const char *text, const char *fmt, ...)
{
    char series[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(series, sizeof series, fmt, ap);
    va_end(ap);
    double v = series_value(text, series);
    if (isnan(v))
        fail_msg("series %s is missing", series);
    return v;
}

static void test_pool_families(void **state)
{
    fixture f;
    make_pool(&f, "svc", "cam07");
    vram_pool *pools[] = {f.pool};
    char *text = print_pools(pools, 1, VRAM_GPU_NONE, NULL);
    exposition x;
    check_exposition(text, &x);

    /* Every field of the X-macro lists, once, typed by its name. */
    static const char *const pool_fields[] = {
#define NAME(field, type, help) #field,
        VRAM_POOL_STATS(NAME)};
    static const char *const usage_fields[] = {VRAM_USAGE_STATS(NAME)};
#undef NAME
    char name[160];
    for (size_t i = 0; i < sizeof pool_fields / sizeof *pool_fields; i++) {
        snprintf(name, sizeof name, "vram_pool_%s", pool_fields[i]);
        family_seen *fs = find_family(&x, name);
        if (!fs)
            fail_msg("family %s missing", name);
        assert_int_equal(fs->samples, 1);
    }
    for (size_t i = 0; i < sizeof usage_fields / sizeof *usage_fields; i++) {
        int budget = strcmp(usage_fields[i], "budget_bytes") == 0;
        snprintf(name, sizeof name, "vram_pool_owner_%s", usage_fields[i]);
        family_seen *fs = find_family(&x, name);
        if (!fs)
            fail_msg("family %s missing", name);
        assert_int_equal(fs->samples, budget ? 1 : 3); /* default, cam07, model */
        snprintf(name, sizeof name, "vram_pool_kind_%s", usage_fields[i]);
        fs = find_family(&x, name);
        if (budget)
            assert_null(fs);
        else if (!fs)
            fail_msg("family %s missing", name);
        else
            assert_int_equal(fs->samples, VRAM_KIND_COUNT);
    }
    assert_non_null(find_family(&x, "vram_pool_size_class_allocs_total"));
    assert_non_null(find_family(&x, "vram_pool_size_class_live_blocks"));
    assert_int_equal(x.n, (int)(sizeof pool_fields / sizeof *pool_fields) +
                              2 * (int)(sizeof usage_fields / sizeof *usage_fields) - 1 + 2);

    /* Values. */
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(f.pool, &st), 0);
    uint64_t live = 10 * MiB + 1 * MiB + 5 * MiB + 4096;
    assert_int_equal(st.live_bytes, live);
    assert_true(value(text, "vram_pool_live_bytes{pool=\"svc\"}") == (double)live);
    assert_true(value(text, "vram_pool_reserved_bytes{pool=\"svc\"}") == (double)st.reserved_bytes);
    assert_true(value(text, "vram_pool_allocs_total{pool=\"svc\"}") == 5);
    assert_true(value(text, "vram_pool_frees_total{pool=\"svc\"}") == 1);
    assert_true(value(text, "vram_pool_budget_failures_total{pool=\"svc\"}") == 1);
    assert_true(value(text, "vram_pool_fragmentation_ratio{pool=\"svc\"}") == st.fragmentation_ratio);
    assert_true(value(text, "vram_pool_owner_live_bytes{pool=\"svc\",owner=\"cam07\"}") == 11.0 * MiB);
    assert_true(value(text, "vram_pool_owner_live_bytes{pool=\"svc\",owner=\"model\"}") == 5.0 * MiB);
    assert_true(value(text, "vram_pool_owner_live_bytes{pool=\"svc\",owner=\"default\"}") == 4096);
    assert_true(value(text, "vram_pool_owner_failed_allocs_total{pool=\"svc\",owner=\"cam07\"}") == 1);
    assert_true(value(text, "vram_pool_owner_budget_bytes{pool=\"svc\",owner=\"cam07\"}") == 256.0 * MiB);
    assert_true(isnan(series_value(text, "vram_pool_owner_budget_bytes{pool=\"svc\",owner=\"model\"}")));
    assert_true(value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"frames\"}") == 10.0 * MiB);
    assert_true(value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"activations\"}") == 1.0 * MiB);
    assert_true(value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"weights\"}") == 5.0 * MiB);
    assert_true(value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"io\"}") == 4096);
    assert_true(value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"decoder\"}") == 0);
    assert_true(value(text, "vram_pool_kind_allocs_total{pool=\"svc\",kind=\"io\"}") == 2);
    assert_true(value(text, "vram_pool_kind_peak_live_bytes{pool=\"svc\",kind=\"io\"}") == 4096 + 300);
    double owners = 0, kinds = 0;
    const char *owner_names[] = {"default", "cam07", "model"};
    for (int i = 0; i < 3; i++)
        owners += value(text, "vram_pool_owner_live_bytes{pool=\"svc\",owner=\"%s\"}", owner_names[i]);
    for (int k = 0; k < VRAM_KIND_COUNT; k++)
        kinds += value(text, "vram_pool_kind_live_bytes{pool=\"svc\",kind=\"%s\"}",
                       vram_kind_name((vram_kind)k));
    assert_true(owners == (double)live);
    assert_true(kinds == (double)live);
    /* Size classes: 300 B is in the class up to 512, 4 KiB up to 4096, 5 MiB
     * up to 8 MiB; each family sums to the pool's count. */
    const char *cls = "vram_pool_size_class_allocs_total{pool=\"svc\",up_to_bytes=\"%s\"}";
    assert_true(value(text, cls, "256") == 0);
    assert_true(value(text, cls, "512") == 1);
    assert_true(value(text, cls, "4096") == 1);
    assert_true(value(text, cls, "1048576") == 1);
    assert_true(value(text, cls, "8388608") == 1);
    double classes = 0, live_blocks = 0;
    for (unsigned i = 0; i < VRAM_HIST_BUCKETS; i++) {
        char up[32];
        if (i + 1 < VRAM_HIST_BUCKETS)
            snprintf(up, sizeof up, "%llu", (unsigned long long)vram_hist_bucket_limit(i));
        else
            snprintf(up, sizeof up, "+Inf");
        classes += value(text, cls, up);
        live_blocks += value(text, "vram_pool_size_class_live_blocks{pool=\"svc\",up_to_bytes=\"%s\"}", up);
    }
    assert_true(classes >= 5); /* the refused request may be counted too */
    assert_true(live_blocks == 4);
    assert_true(value(text, "vram_pool_size_class_live_blocks{pool=\"svc\",up_to_bytes=\"512\"}") == 0);
    promtool_check(text);
    free(text);
    drop_pool(&f);
}

static void test_escaping(void **state)
{
    fixture f;
    make_pool(&f, "a\"b\\c", "cam\n07 \"north\"");
    vram_pool *pools[] = {f.pool};
    char *text = print_pools(pools, 1, VRAM_GPU_NONE, NULL);
    exposition x;
    check_exposition(text, &x); /* would fail on a raw newline or quote */
    assert_true(value(text, "vram_pool_live_bytes{pool=\"a\\\"b\\\\c\"}") > 0);
    assert_true(value(text, "vram_pool_owner_live_bytes{pool=\"a\\\"b\\\\c\",owner=\"cam\\n07 "
                            "\\\"north\\\"\"}") == 11.0 * MiB);
    promtool_check(text);
    free(text);
    drop_pool(&f);
}

static void test_two_pools_and_refusals(void **state)
{
    fixture a, b, c;
    make_pool(&a, "first", "cam07");
    make_pool(&b, "second", "cam08");
    make_pool(&c, "first", "cam09");
    vram_pool *two[] = {a.pool, b.pool};
    char *text = print_pools(two, 2, VRAM_GPU_NONE, NULL);
    exposition x;
    check_exposition(text, &x);
    assert_int_equal(find_family(&x, "vram_pool_live_bytes")->samples, 2);
    assert_int_equal(find_family(&x, "vram_pool_owner_live_bytes")->samples, 6);
    assert_true(value(text, "vram_pool_owner_live_bytes{pool=\"second\",owner=\"cam08\"}") == 11.0 * MiB);
    promtool_check(text);
    free(text);

    vram_metrics_opts o;
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    o.gpu = VRAM_GPU_NONE;
    vram_buffer m = {0};
    vram_pool *same[] = {a.pool, c.pool};
    o.pools = same;
    o.n_pools = 2;
    assert_int_equal(vram_metrics_print(&o, vram_write_buffer, &m, 0), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "both named \"first\""));
    vram_pool *twice[] = {a.pool, a.pool};
    o.pools = twice;
    assert_int_equal(vram_metrics_print(&o, vram_write_buffer, &m, 0), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "listed twice"));
    vram_pool *null[] = {a.pool, NULL};
    o.pools = null;
    assert_int_equal(vram_metrics_print(&o, vram_write_buffer, &m, 0), VRAM_EINVAL);
    o.pools = NULL;
    assert_int_equal(vram_metrics_print(&o, vram_write_buffer, &m, 0), VRAM_EINVAL);
    o.n_pools = 0;
    o.gpu = -3;
    assert_int_equal(vram_metrics_print(&o, vram_write_buffer, &m, 0), VRAM_EINVAL);
    assert_int_equal(vram_metrics_print(NULL, vram_write_buffer, &m, 0), VRAM_EINVAL);
    assert_int_equal(m.len, 0);
    free(m.data);
    drop_pool(&a);
    drop_pool(&b);
    drop_pool(&c);
}

static void test_gpu(void **state)
{
    int count = 0;
    int nvml = vram_gpu_count(&count) == 0 && count > 0;
    char *text = print_pools(NULL, 0, VRAM_GPU_ALL, NULL);
    exposition x;
    check_exposition(text, &x);
    assert_true(value(text, "vram_nvml_available") == (nvml ? 1 : 0));
    if (nvml) {
        assert_true(value(text, "vram_gpu_memory_total_bytes{gpu=\"0\"}") > 0);
        assert_true(value(text, "vram_gpu_memory_used_bytes{gpu=\"0\"}") > 0);
    } else {
        /* No made-up figure: no GPU family at all, and the reason as a comment. */
        assert_null(strstr(text, "vram_gpu_"));
        assert_non_null(strstr(text, "# vram_nvml_available: NVML is not available"));
    }
    promtool_check(text);
    free(text);

    text = print_pools(NULL, 0, VRAM_GPU_NONE, NULL);
    assert_string_equal(text, "");
    free(text);
}

static void test_monitor(void **state)
{
    fixture f;
    make_pool(&f, "svc", "cam07");
    vram_monitor_opts mo;
    assert_int_equal(vram_monitor_opts_init(&mo), 0);
    mo.manual = 1;
    mo.gpu = -1;
    mo.gpu_pci_bus_id = NULL;
    mo.csv_path = mo.jsonl_path = NULL;
    vram_monitor *m;
    if (vram_monitor_start(&mo, &m))
        fail_msg("vram_monitor_start: %s", vram_last_error());
    assert_int_equal(vram_monitor_add_pool(m, f.pool), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(vram_monitor_sample(m, i), 0);
    vram_pool *pools[] = {f.pool};
    char *text = print_pools(pools, 1, VRAM_GPU_NONE, m);
    exposition x;
    check_exposition(text, &x);
    assert_non_null(find_family(&x, "vram_pool_live_bytes"));
    family_seen *samples = find_family(&x, "vram_monitor_samples_total");
    assert_non_null(samples);
    assert_true(value(text, "vram_monitor_samples_total") >= 3);
    promtool_check(text);
    free(text);
    assert_int_equal(vram_monitor_remove_pool(m, f.pool), 0);
    assert_int_equal(vram_monitor_stop(m), 0);
    drop_pool(&f);
}

typedef struct failing {
    size_t budget;
    int calls;
} failing;

static int failing_write(void *ctx, const char *d, size_t n)
{
    failing *fw = ctx;
    fw->calls++;
    if (n > fw->budget)
        return VRAM_EIO;
    fw->budget -= n;
    return 0;
}

static void test_writer_error(void **state)
{
    fixture f;
    make_pool(&f, "svc", "cam07");
    vram_pool *pools[] = {f.pool};
    vram_metrics_opts o;
    assert_int_equal(vram_metrics_opts_init(&o), 0);
    o.pools = pools;
    o.n_pools = 1;
    o.gpu = VRAM_GPU_NONE;
    failing fw = {.budget = 1000};
    assert_int_equal(vram_metrics_print(&o, failing_write, &fw, 0), VRAM_EIO);
    int calls = fw.calls;
    assert_true(calls > 1);
    /* Nothing is written after the error. */
    fw = (failing){.budget = 0};
    assert_int_equal(vram_metrics_print(&o, failing_write, &fw, 0), VRAM_EIO);
    assert_int_equal(fw.calls, 1);
    drop_pool(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_families),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_two_pools_and_refusals),
        cmocka_unit_test(test_gpu),
        cmocka_unit_test(test_monitor),
        cmocka_unit_test(test_writer_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
