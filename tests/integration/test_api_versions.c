/* tests/integration/test_api_versions.c - what keeps programs built against
 * one version of the headers working with another library: the version
 * calls agree with the macros; options and tables carry their size, a
 * struct from an older build (a smaller size) gets the defaults for what it
 * lacks, one from a newer build (a larger size) is refused with a sentence,
 * and a zeroed size reads as this version; the statistics keep their size
 * whatever fields are added; the configuration says its size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "vramkit.h"

static void test_versions(void **state)
{
    (void)state;
    assert_int_equal(vram_version(), VRAM_VERSION);
    assert_string_equal(vram_version_string(), VRAM_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", VRAM_VERSION_MAJOR, VRAM_VERSION_MINOR,
             VRAM_VERSION_PATCH);
    assert_string_equal(vram_version_string(), want);
    assert_int_equal(vram_config_get()->size, sizeof(vram_config));
}

static int hook_calls;

static int count_hook(void *ctx, vram_pool *pool)
{
    (void)ctx;
    (void)pool;
    hook_calls++;
    return 0;
}

static void test_pool_opts_sizes(void **state)
{
    (void)state;
    vram_pool_hook h = {.size = sizeof h, .on_create = count_hook};
    assert_int_equal(vram_pool_hook_add(&h), 0);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    assert_int_equal(o.size, sizeof o);
    /* From an older build: it ends before configured_listeners, whose
     * default (1) the library supplies, so the hook runs. */
    o.size = (uint32_t)offsetof(vram_pool_opts, configured_listeners);
    o.configured_listeners = 0; /* beyond the size: not read */
    o.name = "older";
    vram_pool *p;
    hook_calls = 0;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(hook_calls, 1);
    assert_string_equal(vram_pool_name(p), "older");
    assert_int_equal(vram_pool_destroy(p), 0);
    /* This version's, and a zeroed size: configured_listeners 0 is read. */
    o.size = sizeof o;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(hook_calls, 1);
    assert_int_equal(vram_pool_destroy(p), 0);
    o.size = 0;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(hook_calls, 1);
    assert_int_equal(vram_pool_destroy(p), 0);
    /* From a newer build: refused, saying why. */
    o.size = sizeof o + 16;
    p = (vram_pool *)0x1;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_null(p);
    assert_non_null(strstr(vram_last_error(), "vram_pool_opts: size"));
    assert_non_null(strstr(vram_last_error(), "no version of the struct"));
    o.size = 2; /* not even the size field */
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
}

static int no_segment(void *self, uint64_t size, vram_stream s, uint64_t *addr)
{
    (void)self;
    (void)size;
    (void)s;
    (void)addr;
    return VRAM_ENOMEM;
}

static int no_free(void *self, uint64_t addr, uint64_t size, vram_stream s)
{
    (void)self;
    (void)addr;
    (void)size;
    (void)s;
    return 0;
}

static void test_other_sizes(void **state)
{
    (void)state;
    vram_backend_opts bo;
    assert_int_equal(vram_backend_opts_init(&bo), 0);
    assert_int_equal(bo.size, sizeof bo);
    assert_int_equal(bo.capacity, vram_config_get()->capacity);
    bo.size = sizeof bo + 8;
    vram_backend *b;
    assert_int_equal(vram_backend_create("sim", &bo, &b), VRAM_EINVAL);
    bo.size = 0;
    bo.capacity = 64ull << 20;
    assert_int_equal(vram_backend_create("sim", &bo, &b), 0);
    vram_backend_stats bs;
    vram_backend_stats_get(b, &bs);
    assert_int_equal(bs.capacity, 64ull << 20);
    assert_int_equal(vram_backend_destroy(b), 0);

    /* An ops table: its size decides what is read; a newer one is refused. */
    vram_backend_ops ops = {.size = sizeof ops, .name = "mine", .caps = VRAM_BACKEND_SEGMENTS,
                            .segment_alloc = no_segment, .segment_free = no_free};
    assert_int_equal(vram_backend_create_custom(&ops, NULL, 1ull << 30, 0, &b), 0);
    assert_int_equal(vram_backend_type_of(b), VRAM_BACKEND_TYPE_CUSTOM);
    assert_int_equal(vram_backend_destroy(b), 0);
    ops.size = sizeof ops + 8;
    assert_int_equal(vram_backend_create_custom(&ops, NULL, 1ull << 30, 0, &b), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "vram_backend_ops"));

    vram_device_opts dopts;
    assert_int_equal(vram_device_opts_init(&dopts), 0);
    assert_int_equal(dopts.size, sizeof dopts);
    assert_int_equal(dopts.stack_limit, (int64_t)vram_config_get()->stack_limit);

    vram_monitor_opts mo;
    assert_int_equal(vram_monitor_opts_init(&mo), 0);
    assert_int_equal(mo.size, sizeof mo);
    mo.manual = 1;
    mo.gpu = VRAM_GPU_NONE;
    mo.size = sizeof mo + 4;
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(&mo, &m), VRAM_EINVAL);
    mo.size = sizeof mo;
    assert_int_equal(vram_monitor_start(&mo, &m), 0);
    assert_int_equal(vram_monitor_stop(m), 0);

    /* The metrics server's options from before max_body_bytes: the default
     * limit is used, not what lies beyond the size (which is out of range). */
    vram_metrics_opts xo;
    assert_int_equal(vram_metrics_opts_init(&xo), 0);
    assert_int_equal(xo.size, sizeof xo);
    assert_int_equal(xo.max_body_bytes, 0);
    xo.address = "127.0.0.1";
    xo.port = 0;
    xo.gpu = VRAM_GPU_NONE;
    xo.max_body_bytes = 5;
    vram_metrics *xm;
    assert_int_equal(vram_metrics_start(&xo, &xm), VRAM_EINVAL);
    xo.size = (uint32_t)offsetof(vram_metrics_opts, max_body_bytes);
    assert_int_equal(vram_metrics_start(&xo, &xm), 0);
    assert_int_equal(vram_metrics_stop(xm), 0);
    xo.size = sizeof xo + 8;
    assert_int_equal(vram_metrics_start(&xo, &xm), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "vram_metrics_opts: size"));

    vram_report_opts ro;
    assert_int_equal(vram_report_opts_init(&ro), 0);
    assert_int_equal(ro.size, sizeof ro);
    assert_int_equal(ro.max_points, 2000);
    vram_engine_opts eo;
    assert_int_equal(vram_engine_opts_init(&eo), 0);
    assert_int_equal(eo.size, sizeof eo);
    assert_string_equal(eo.executor, "cpu");
}

/* New statistics take the reserved space: the struct's size is fixed. */
static void test_stats_layout(void **state)
{
    (void)state;
    assert_int_equal(sizeof(vram_pool_stats),
                     sizeof(uint64_t) * (2 * VRAM_HIST_BUCKETS + VRAM_POOL_STATS_SLOTS));
    assert_int_equal(sizeof(vram_usage_stats), sizeof(uint64_t) * VRAM_USAGE_STATS_SLOTS);
    assert_int_equal(offsetof(vram_pool_stats, hist_allocs), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_pool_opts_sizes),
        cmocka_unit_test(test_other_sizes),
        cmocka_unit_test(test_stats_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
