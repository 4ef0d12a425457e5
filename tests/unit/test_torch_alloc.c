/* tests/unit/test_torch_alloc.c - the PyTorch allocator of
 * include/vramkit/torch.h, from the CPU side:
 *  - without a GPU (or without CUDA in the build) vram_torch_malloc returns
 *    NULL, sets a last error naming the device and the reason, logs it at
 *    level error, and repeats the same failure on later calls and on other
 *    threads;
 *  - size 0 is NULL without an error or a log line; a device out of range
 *    fails clearly;
 *  - vram_torch_free(NULL, ...) does nothing; a stray pointer is logged;
 *  - vram_torch_stats_json gives valid JSON, refuses a too-small buffer with
 *    VRAM_ELIMIT and the size needed, and rejects bad arguments;
 *  - vram_torch_reset_peaks and vram_torch_pool without a pool.
 * On a machine with a GPU the no-GPU cases are skipped and one allocation
 * round trip runs through the real pool instead, whose limit and decay come
 * from the configuration (VRAM_POOL_LIMIT, VRAM_DECAY_MS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramkit/config.h"
#include "vramkit/device.h"
#include "vramkit/error.h"
#include "vramkit/log.h"
#include "vramkit/torch.h"

#define MiB (1024ull * 1024)

/* ---- helpers --------------------------------------------------------- */

static int error_lines;
static char last_line[1024];

static void capture_log(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    if (level == VRAM_LOG_ERROR) {
        error_lines++;
        snprintf(last_line, sizeof last_line, "%s", line);
    }
}

static int setup_log(void **state)
{
    (void)state;
    error_lines = 0;
    last_line[0] = '\0';
    vram_log_set_handler(capture_log, NULL);
    vram_clear_error();
    return 0;
}

static int teardown_log(void **state)
{
    (void)state;
    vram_log_set_handler(NULL, NULL);
    return 0;
}

static int have_gpu(void)
{
    int n = 0;
    int rc = vram_device_count(&n);
    vram_clear_error();
    return rc == 0 && n > 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

/* The statistics of device 0 as parsed JSON (the caller deletes it). */
static cJSON *stats_of(int device)
{
    char buf[8192];
    int rc = vram_torch_stats_json(device, buf, sizeof buf);
    if (rc)
        fail_msg("vram_torch_stats_json: %s", vram_last_error());
    cJSON *o = cJSON_Parse(buf);
    if (!o)
        fail_msg("not JSON: %s", buf);
    return o;
}

static double number_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("no number \"%s\"", key);
    return v->valuedouble;
}

/* ---- without a GPU ---------------------------------------------------- */

static void *malloc_on_thread(void *arg)
{
    char *msg = arg;
    vram_clear_error();
    void *p = vram_torch_malloc(4096, 0, NULL);
    snprintf(msg, 1024, "%s", vram_last_error());
    return p;
}

static void test_malloc_without_gpu(void **state)
{
    (void)state;
    if (have_gpu())
        skip();
    void *p = vram_torch_malloc((ssize_t)MiB, 0, NULL);
    assert_null(p);
    char first[1024];
    snprintf(first, sizeof first, "%s", vram_last_error());
    assert_contains(first, "PyTorch allocator on device 0");
    if (!strstr(first, "GPU") && !strstr(first, "CUDA"))
        fail_msg("the reason names neither GPU nor CUDA: \"%s\"", first);
    assert_int_equal(error_lines, 1);
    assert_contains(last_line, first);
    assert_contains(last_line, "1048576 bytes");

    /* The failure is remembered: the same sentence, and logged again. */
    vram_clear_error();
    assert_null(vram_torch_malloc(256, 0, NULL));
    assert_string_equal(vram_last_error(), first);
    assert_int_equal(error_lines, 2);

    /* Another thread gets it as its own last error. */
    char msg[1024] = "";
    pthread_t t;
    void *res = (void *)1;
    assert_int_equal(pthread_create(&t, NULL, malloc_on_thread, msg), 0);
    assert_int_equal(pthread_join(t, &res), 0);
    assert_null(res);
    assert_string_equal(msg, first);
}

static void test_reset_and_pool_without_gpu(void **state)
{
    (void)state;
    if (have_gpu())
        skip();
    assert_null(vram_torch_pool(0));
    assert_int_equal(vram_torch_reset_peaks(0), VRAM_EINVAL);
    assert_contains(vram_last_error(), "no vramkit pool on device 0");
    assert_int_equal(vram_torch_reset_peaks(-1), VRAM_EINVAL);
    assert_null(vram_torch_pool(-1));
    assert_null(vram_torch_pool(VRAM_TORCH_DEVICES));
}

static void test_stats_without_gpu(void **state)
{
    (void)state;
    if (have_gpu())
        skip();
    vram_torch_malloc(4096, 0, NULL); /* set up (and fail) device 0 */
    cJSON *o = stats_of(0);
    assert_true(number_of(o, "device") == 0);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "ready")));
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    assert_true(cJSON_IsString(err));
    assert_contains(err->valuestring, "PyTorch allocator on device 0");
    cJSON_Delete(o);

    /* A device never asked for says so. */
    o = stats_of(5);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "ready")));
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "error")));
    cJSON_Delete(o);
}

static void test_free_stray_pointer_without_gpu(void **state)
{
    (void)state;
    if (have_gpu())
        skip();
    int x;
    vram_torch_free(&x, 4, 0, NULL);
    assert_int_equal(error_lines, 1);
    assert_contains(last_line, "where vramkit has no pool");
    vram_torch_free(&x, 4, 9999, NULL);
    assert_int_equal(error_lines, 2);
}

/* ---- everywhere ------------------------------------------------------ */

static void test_malloc_zero_is_no_error(void **state)
{
    (void)state;
    assert_null(vram_torch_malloc(0, 0, NULL));
    assert_string_equal(vram_last_error(), "");
    assert_int_equal(error_lines, 0);
}

static void test_malloc_device_out_of_range(void **state)
{
    (void)state;
    assert_null(vram_torch_malloc(4096, -1, NULL));
    assert_contains(vram_last_error(), "out of range");
    assert_null(vram_torch_malloc(4096, VRAM_TORCH_DEVICES, NULL));
    assert_contains(vram_last_error(), "device 64 is out of range");
    assert_int_equal(error_lines, 2);
}

static void test_free_null_is_harmless(void **state)
{
    (void)state;
    vram_torch_free(NULL, 0, 0, NULL);
    vram_torch_free(NULL, 4096, 0, (void *)0x1234);
    vram_torch_free(NULL, 0, -7, NULL);
    assert_string_equal(vram_last_error(), "");
    assert_int_equal(error_lines, 0);
}

static void test_stats_buffer_sizes(void **state)
{
    (void)state;
    /* Asking for the size: NULL, 0. */
    assert_int_equal(vram_torch_stats_json(0, NULL, 0), VRAM_ELIMIT);
    const char *m = strstr(vram_last_error(), "need a buffer of ");
    assert_non_null(m);
    size_t need = strtoull(m + strlen("need a buffer of "), NULL, 10);
    assert_true(need > 10 && need < 8192);

    /* One byte short: refused, and the buffer is an empty string. */
    char *buf = malloc(need);
    assert_non_null(buf);
    memset(buf, 'x', need);
    assert_int_equal(vram_torch_stats_json(0, buf, need - 1), VRAM_ELIMIT);
    assert_int_equal(buf[0], '\0');
    assert_int_equal(vram_torch_stats_json(0, buf, 1), VRAM_ELIMIT);
    assert_int_equal(buf[0], '\0');

    /* Exactly enough. */
    assert_int_equal(vram_torch_stats_json(0, buf, need), 0);
    assert_int_equal(strlen(buf), need - 1);
    cJSON *o = cJSON_Parse(buf);
    assert_non_null(o);
    assert_true(number_of(o, "device") == 0);
    cJSON_Delete(o);
    free(buf);

    /* Bad arguments. */
    assert_int_equal(vram_torch_stats_json(0, NULL, 16), VRAM_EINVAL);
    char small[64];
    assert_int_equal(vram_torch_stats_json(-1, small, sizeof small), VRAM_EINVAL);
    assert_int_equal(vram_torch_stats_json(VRAM_TORCH_DEVICES, small, sizeof small), VRAM_EINVAL);
    assert_contains(vram_last_error(), "out of range");
}

/* ---- with a GPU ------------------------------------------------------ */

static void test_round_trip_with_gpu(void **state)
{
    (void)state;
    if (!have_gpu())
        skip();
    void *p = vram_torch_malloc((ssize_t)MiB, 0, NULL);
    if (!p)
        fail_msg("vram_torch_malloc: %s", vram_last_error());
    assert_non_null(vram_torch_pool(0));
    cJSON *o = stats_of(0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ready")));
    assert_true(number_of(o, "live_bytes") == (double)MiB);
    assert_true(number_of(o, "reserved_bytes") >= (double)MiB);
    assert_true(number_of(o, "stack_limit_bytes") > 0);
    const vram_config *c = vram_config_get();
    assert_true(number_of(o, "decay_ms") == (double)c->decay_ms);
    if (c->pool_limit)
        assert_true(number_of(o, "limit_bytes") == (double)c->pool_limit);
    else
        assert_true(number_of(o, "limit_bytes") > 0);
    cJSON_Delete(o);
    vram_torch_free(p, (ssize_t)MiB, 0, NULL);
    assert_int_equal(error_lines, 0);
    o = stats_of(0);
    assert_true(number_of(o, "live_bytes") == 0);
    assert_true(number_of(o, "peak_live_bytes") == (double)MiB);
    cJSON_Delete(o);
    assert_int_equal(vram_torch_reset_peaks(0), 0);
    o = stats_of(0);
    assert_true(number_of(o, "peak_live_bytes") == 0);
    cJSON_Delete(o);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup_log, teardown_log)
    const struct CMUnitTest tests[] = {
        T(test_malloc_zero_is_no_error),
        T(test_malloc_device_out_of_range),
        T(test_free_null_is_harmless),
        T(test_malloc_without_gpu),
        T(test_reset_and_pool_without_gpu),
        T(test_stats_without_gpu),
        T(test_free_stray_pointer_without_gpu),
        T(test_stats_buffer_sizes),
        T(test_round_trip_with_gpu),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
