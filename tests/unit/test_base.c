/* tests/unit/test_base.c - src/base: the error codes and their names, the
 * per-thread last-error sentence (vram__fail, vram__fail_prefix, truncation of
 * long messages, isolation between threads), byte formatting and size parsing,
 * the option table (defaults, VRAM_<NAME> environment variables, overrides by
 * name, CHOICE options, printing as text and JSON) and the log (levels, the
 * installed handler and the standard-error default). Every test that touches
 * the environment or the configuration restores both before it returns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal.h"
#include "vramkit/log.h"
#include "vramkit/nvml.h"
#include "vramkit/config.h"
#include "vramkit/error.h"
#include "vramkit/log.h"
#include "vramkit/nvml.h"
#include "vramkit/pool.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

/* ---- helpers --------------------------------------------------------- */

/* Every option's environment variable, from the same X-macro as the library. */
#define OPT_ENV_NAME(NAME, field, TYPE, def, choices, help) "VRAM_" #NAME,
static const char *const option_env_names[] = {VRAM_OPTIONS(OPT_ENV_NAME)};
#undef OPT_ENV_NAME
#define N_OPTIONS (sizeof option_env_names / sizeof option_env_names[0])

/* Remove every VRAM_<option> variable and re-read the configuration, so each
 * test starts from (and leaves behind) the defaults. */
static void clean_config(void)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        unsetenv(option_env_names[i]);
    vram_config_reset();
    vram_log_set_handler(NULL, NULL);
    vram_clear_error();
}

static int setup_clean(void **state)
{
    (void)state;
    clean_config();
    return 0;
}

static int teardown_clean(void **state)
{
    (void)state;
    clean_config();
    return 0;
}

/* A vram_write_fn sink that can fail on a chosen write. */
typedef struct sink {
    vram_buffer buf;
    int writes;
    int fail_at; /* return VRAM_EIO on this write (1-based); 0: never */
} sink;

static int sink_write(void *ctx, const char *data, size_t len)
{
    sink *s = ctx;
    s->writes++;
    if (s->fail_at && s->writes == s->fail_at)
        return VRAM_EIO;
    return vram_write_buffer(&s->buf, data, len);
}

static void sink_free(sink *s)
{
    vram_buffer_free(&s->buf);
    memset(s, 0, sizeof *s);
}

/* The configuration as JSON, parsed. */
static cJSON *config_json(void)
{
    sink s = {0};
    assert_int_equal(vram_config_print(sink_write, &s, 1), 0);
    assert_non_null(s.buf.data);
    assert_int_equal(s.buf.data[s.buf.len - 1], '\n');
    cJSON *root = cJSON_Parse(s.buf.data);
    if (!root)
        fail_msg("vram_config_print JSON does not parse: %s", s.buf.data);
    sink_free(&s);
    return root;
}

static const char *json_field(cJSON *root, const char *option, const char *field)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(root, option);
    if (!cJSON_IsObject(o))
        fail_msg("option %s missing from the JSON", option);
    cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!cJSON_IsString(f))
        fail_msg("option %s has no string field %s", option, field);
    return f->valuestring;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

/* ---- error codes ------------------------------------------------------ */

static void test_error_names_distinct(void **state)
{
    (void)state;
    static const int codes[] = {
#define CODE(name, value, text) VRAM_##name,
        VRAM_ERRORS(CODE)
#undef CODE
    };
    static const char *const names[] = {
#define NAME(name, value, text) "VRAM_" #name,
        VRAM_ERRORS(NAME)
#undef NAME
    };
    static const char *const texts[] = {
#define TEXT(name, value, text) text,
        VRAM_ERRORS(TEXT)
#undef TEXT
    };
    size_t n = sizeof codes / sizeof codes[0];
    assert_true(n >= 12);
    for (size_t i = 0; i < n; i++) {
        const char *name = vram_err_name(codes[i]);
        const char *text = vram_strerror(codes[i]);
        assert_non_null(name);
        assert_non_null(text);
        assert_string_equal(name, names[i]);
        assert_string_equal(text, texts[i]);
        assert_string_not_equal(text, "unknown error");
        assert_string_not_equal(name, "VRAM_E?");
        assert_true(codes[i] <= 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(name, vram_err_name(codes[j]));
            assert_string_not_equal(text, vram_strerror(codes[j]));
        }
    }
    assert_string_equal(vram_err_name(VRAM_OK), "VRAM_OK");
    assert_string_equal(vram_err_name(VRAM_EBUDGET), "VRAM_EBUDGET");
    assert_string_equal(vram_strerror(VRAM_EBUDGET), "owner budget exceeded");
    assert_string_equal(vram_strerror(VRAM_OK), "success");
}

static void test_error_unknown_codes(void **state)
{
    (void)state;
    static const int unknown[] = {1, 42, -12, -13, -100, -1000000, 2147483647, (-2147483647 - 1)};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_string_equal(vram_err_name(unknown[i]), "VRAM_E?");
        assert_string_equal(vram_strerror(unknown[i]), "unknown error");
    }
}

/* ---- last error ------------------------------------------------------- */

static void test_fail_sets_last_error(void **state)
{
    (void)state;
    vram_clear_error();
    assert_string_equal(vram_last_error(), "");
    int rc = vram__fail(VRAM_EBUDGET, "budget of owner \"%s\" exceeded: %d", "cam07", 24);
    assert_int_equal(rc, VRAM_EBUDGET);
    assert_string_equal(vram_last_error(), "budget of owner \"cam07\" exceeded: 24");
    rc = vram__fail(VRAM_EIO, "second %s", "failure");
    assert_int_equal(rc, VRAM_EIO);
    assert_string_equal(vram_last_error(), "second failure");
    vram_clear_error();
    assert_string_equal(vram_last_error(), "");
}

static void test_fail_prefix(void **state)
{
    (void)state;
    vram__fail(VRAM_EPARSE, "line %d: bad size", 7);
    int rc = vram__fail_prefix(VRAM_EPARSE, "trace %s: ", "x.csv");
    assert_int_equal(rc, VRAM_EPARSE);
    assert_string_equal(vram_last_error(), "trace x.csv: line 7: bad size");
    /* Prefixes stack, and the returned code is the one passed. */
    rc = vram__fail_prefix(VRAM_EIO, "replay: ");
    assert_int_equal(rc, VRAM_EIO);
    assert_string_equal(vram_last_error(), "replay: trace x.csv: line 7: bad size");
    /* A prefix built from the last error itself. */
    vram__fail(VRAM_EINVAL, "abc");
    vram__fail_prefix(VRAM_EINVAL, "[%s] ", vram_last_error());
    assert_string_equal(vram_last_error(), "[abc] abc");
    /* With no previous message the prefix is the whole sentence. */
    vram_clear_error();
    vram__fail_prefix(VRAM_EINVAL, "only");
    assert_string_equal(vram_last_error(), "only");
}

static void test_fail_long_messages(void **state)
{
    (void)state;
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';

    /* vram__fail truncates, keeping a terminated string. */
    vram__fail(VRAM_EINVAL, "%s", big);
    size_t cap = strlen(vram_last_error());
    assert_true(cap >= 1000);
    assert_true(cap < sizeof big - 1);
    assert_int_equal(vram_last_error()[0], 'a');

    /* A short prefix on a full message: the prefix survives, the total stays
     * within the buffer, the tail of the old message is cut. */
    vram__fail_prefix(VRAM_EINVAL, "ctx: ");
    const char *e = vram_last_error();
    assert_int_equal(strlen(e), cap);
    assert_memory_equal(e, "ctx: aaa", 8);
    for (size_t i = 5; i < cap; i++)
        assert_int_equal(e[i], 'a');

    /* A 1200-character message with a short prefix. */
    char mid[1201];
    memset(mid, 'm', 1200);
    mid[1200] = '\0';
    vram__fail(VRAM_EINVAL, "%s", mid);
    vram__fail_prefix(VRAM_EINVAL, "p: ");
    assert_int_equal(strlen(vram_last_error()), cap);
    assert_memory_equal(vram_last_error(), "p: mmm", 6);

    /* A prefix longer than the buffer: all prefix, still terminated. */
    vram__fail(VRAM_EINVAL, "old message");
    big[0] = 'P';
    vram__fail_prefix(VRAM_EINVAL, "%s", big);
    e = vram_last_error();
    assert_int_equal(strlen(e), cap);
    assert_int_equal(e[0], 'P');
    assert_null(strstr(e, "old"));
    assert_int_equal(e[cap - 1], 'a');

    /* A prefix of exactly cap characters leaves no room for the old text. */
    char exact[2048];
    memset(exact, 'x', cap);
    exact[cap] = '\0';
    vram__fail(VRAM_EINVAL, "tail");
    vram__fail_prefix(VRAM_EINVAL, "%s", exact);
    assert_int_equal(strlen(vram_last_error()), cap);
    assert_null(strchr(vram_last_error(), 't'));
    /* One or two characters of room: that much of the old text. */
    exact[cap - 1] = '\0';
    vram__fail(VRAM_EINVAL, "tail");
    vram__fail_prefix(VRAM_EINVAL, "%s", exact);
    assert_int_equal(strlen(vram_last_error()), cap);
    assert_int_equal(vram_last_error()[cap - 1], 't');
    exact[cap - 2] = '\0';
    vram__fail(VRAM_EINVAL, "tail");
    vram__fail_prefix(VRAM_EINVAL, "%s", exact);
    assert_int_equal(strlen(vram_last_error()), cap);
    assert_string_equal(vram_last_error() + cap - 2, "ta");
    vram_clear_error();
}

typedef struct thread_result {
    char seen_at_start[64];
    char after[64];
    int rc;
} thread_result;

static void *other_thread(void *arg)
{
    thread_result *r = arg;
    snprintf(r->seen_at_start, sizeof r->seen_at_start, "%s", vram_last_error());
    r->rc = vram__fail(VRAM_ENOMEM, "failure in thread two");
    vram__fail_prefix(VRAM_ENOMEM, "t2: ");
    snprintf(r->after, sizeof r->after, "%s", vram_last_error());
    return NULL;
}

static void test_last_error_per_thread(void **state)
{
    (void)state;
    vram__fail(VRAM_EINVAL, "failure in thread one");
    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(r.seen_at_start, ""); /* a new thread starts clean */
    assert_int_equal(r.rc, VRAM_ENOMEM);
    assert_string_equal(r.after, "t2: failure in thread two");
    assert_string_equal(vram_last_error(), "failure in thread one");
    vram_clear_error();
}

/* ---- sizes ------------------------------------------------------------ */

static void test_fmt_bytes(void **state)
{
    (void)state;
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {
        {0, "0 B"},
        {1, "1 B"},
        {512, "512 B"},
        {1023, "1023 B"},
        {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {10 * KiB, "10.0 KiB"},
        {1000 * KiB, "1000.0 KiB"},
        {MiB, "1.00 MiB"},
        {24 * MiB, "24.0 MiB"},
        {256 * MiB, "256.0 MiB"},
        {GiB, "1.00 GiB"},
        {3 * GiB / 2, "1.50 GiB"},
        {140 * GiB, "140.0 GiB"},
        {1024 * GiB, "1.00 TiB"},
        {1024ull * 1024 * GiB, "1.00 PiB"},
        /* PiB is the largest unit */
        {UINT64_MAX, "16384.0 PiB"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(buf, 0x55, sizeof buf);
        char *r = vram__fmt_bytes(buf, sizeof buf, cases[i].bytes);
        assert_ptr_equal(r, buf);
        assert_string_equal(buf, cases[i].text);
    }
    /* A small buffer is filled and terminated, never overrun. */
    memset(buf, 0x55, sizeof buf);
    vram__fmt_bytes(buf, 5, 24 * MiB);
    assert_string_equal(buf, "24.0");
    assert_int_equal((unsigned char)buf[5], 0x55);
    vram__fmt_bytes(buf, 1, 24 * MiB);
    assert_string_equal(buf, "");
}

/* The public forms of sizes and GPUs: vram_size_parse/_format are the
 * library's own parser and printer; vram_gpu_parse takes the words, indexes
 * and PCI bus ids the options and the CLI take, and nothing else. */
static void test_public_text(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(vram_size_parse("1.5G", &v), 0);
    assert_int_equal(v, 3ull << 29);
    assert_int_equal(vram_size_parse("12X", &v), VRAM_EINVAL);
    assert_contains(vram_last_error(), "unknown unit");
    assert_int_equal(vram_size_parse("1", NULL), VRAM_EINVAL);
    char b[32];
    assert_string_equal(vram_size_format(b, sizeof b, 24ull << 20), "24.0 MiB");

    int g = 99;
    const char *pci = "x";
    assert_int_equal(vram_gpu_parse("none", &g, &pci), 0);
    assert_int_equal(g, VRAM_GPU_NONE);
    assert_null(pci);
    assert_int_equal(vram_gpu_parse("ALL", &g, NULL), 0);
    assert_int_equal(g, VRAM_GPU_ALL);
    assert_int_equal(vram_gpu_parse("own", &g, NULL), 0);
    assert_int_equal(g, VRAM_GPU_OWN);
    assert_int_equal(vram_gpu_parse("3", &g, &pci), 0);
    assert_int_equal(g, 3);
    assert_int_equal(vram_gpu_parse("0000:19:00.0", &g, &pci), 0);
    assert_int_equal(g, VRAM_GPU_NONE);
    assert_string_equal(pci, "0000:19:00.0");
    assert_int_equal(vram_gpu_parse("00000000:9A:00.0", &g, &pci), 0);
    assert_string_equal(pci, "00000000:9A:00.0");
    assert_int_equal(vram_gpu_parse("0000:19:00.0", &g, NULL), VRAM_EINVAL);
    static const char *const bad[] = {"", "-1", "gpu0", "1.5", "0000:19:00", "0000:1G:00.0", "99999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vram_clear_error();
        assert_int_equal(vram_gpu_parse(bad[i], &g, &pci), VRAM_EINVAL);
        assert_contains(vram_last_error(), "none of: none, all, own");
    }
    assert_int_equal(vram_gpu_parse(NULL, &g, &pci), VRAM_EINVAL);
}

static void test_parse_size_accepts(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t value;
    } cases[] = {
        {"0", 0},
        {"4096", 4096},
        {"2M", 2 * MiB},
        {"2MiB", 2 * MiB},
        {"2mib", 2 * MiB},
        {"2MB", 2 * MiB},
        {"2 M", 2 * MiB},
        {"1.5G", 3 * GiB / 2},
        {"1.5GiB", 3 * GiB / 2},
        {"64k", 64 * KiB},
        {"64KiB", 64 * KiB},
        {" 8 KiB ", 8 * KiB},
        {"\t8KiB\n", 8 * KiB},
        {"3B", 3},
        {"3b", 3},
        {"3 B", 3},
        {"1T", 1024 * GiB},
        {"140GiB", 140 * GiB},
        {"0.5K", 512},
        {"0.25M", 256 * KiB},
        {"16384T", 16384ull * 1024 * GiB},
        {"16777215T", 16777215ull * 1024 * GiB}, /* 2^64 - 2^40 */
        {"9007199254740993", 9007199254740993ull},  /* 2^53 + 1: exact */
        {"18446744073709551615", UINT64_MAX},
        {"1.000000000000000000000K", 1024},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 12345;
        int rc = vram__parse_size(cases[i].text, &v);
        if (rc)
            fail_msg("\"%s\" refused: %s", cases[i].text, vram_last_error());
        if (v != cases[i].value)
            fail_msg("\"%s\" parsed as %llu, expected %llu", cases[i].text,
                     (unsigned long long)v, (unsigned long long)cases[i].value);
    }
}

static void test_parse_size_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *why; /* part of the message */
    } cases[] = {
        {"", "empty"},
        {"-1", "plain number"},
        {"+1", "plain number"},
        {" -4K", "plain number"},
        {"abc", "not a number"},
        {"K", "not a number"},
        {"nan", "not a number"},
        {"inf", "not a number"},
        {"2X", "unknown unit"},
        {"2E", "unknown unit"},
        {"1.3", "whole number"},
        {"0.1K", "whole number"},
        {"1e30", "unknown unit"},   /* no exponents: sizes are read exactly */
        {"0x10", "unknown unit"},   /* no hex either */
        {"16777216T", "too large"}, /* 2^64 */
        {"18446744073709551616", "too large"},
        {"5MiBx", "trailing"},
        {"5MBB", "trailing"},
        {"5 M 3", "trailing"},
        {"3Bi", "trailing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 777;
        vram_clear_error();
        int rc = vram__parse_size(cases[i].text, &v);
        if (rc != VRAM_EINVAL)
            fail_msg("\"%s\" gave %d (value %llu), expected VRAM_EINVAL", cases[i].text, rc,
                     (unsigned long long)v);
        assert_int_equal(v, 777); /* untouched */
        assert_contains(vram_last_error(), cases[i].why);
        if (*cases[i].text)
            assert_contains(vram_last_error(), cases[i].text);
    }
    uint64_t v = 5;
    assert_int_equal(vram__parse_size(NULL, &v), VRAM_EINVAL);
    assert_int_equal(v, 5);
}

/* ---- configuration ---------------------------------------------------- */

static void test_config_defaults(void **state)
{
    (void)state;
    assert_int_equal(vram_config_load(), 0);
    const vram_config *c = vram_config_get();
    assert_non_null(c);
    assert_ptr_equal(c, vram_config_get()); /* stable pointer */
    assert_int_equal(c->granularity, 2 * MiB);
    assert_int_equal(c->policy, 0); /* vmm */
    assert_int_equal(c->log_level, VRAM_LOG_WARN);
    assert_int_equal(c->backend, 0); /* sim */
    assert_int_equal(c->alignment, 256);
    assert_int_equal(c->capacity, 140 * GiB);
    assert_int_equal(c->retain_min, 0);
    assert_int_equal(c->pool_limit, 0);
    assert_int_equal(c->decay_ms, 10000);
    assert_int_equal(c->place_candidates, 4);
    assert_true(c->monitor_frag_warning > 0.2999 && c->monitor_frag_warning < 0.3001);
    assert_int_equal(c->small_size, MiB);
    assert_int_equal(c->large_round, 4 * KiB);
    assert_int_equal(c->segment_small, 2 * MiB);
    assert_int_equal(c->segment_medium, 20 * MiB);
    assert_non_null(c->trace);
    assert_string_equal(c->trace, "");

    cJSON *root = config_json();
    for (size_t i = 0; i < N_OPTIONS; i++)
        assert_string_equal(json_field(root, option_env_names[i] + 5, "source"), "default");
    assert_string_equal(json_field(root, "GRANULARITY", "value"), "2MiB");
    cJSON_Delete(root);
}

static void test_config_environment(void **state)
{
    (void)state;
    assert_int_equal(setenv("VRAM_GRANULARITY", "4MiB", 1), 0);
    assert_int_equal(setenv("VRAM_POLICY", "Segments", 1), 0);
    assert_int_equal(setenv("VRAM_MONITOR_FRAG_WARNING", "0.125", 1), 0);
    assert_int_equal(setenv("VRAM_TRACE", "/tmp/t.csv.gz", 1), 0);
    vram_config_reset();
    assert_int_equal(vram_config_load(), 0);
    const vram_config *c = vram_config_get();
    assert_int_equal(c->granularity, 4 * MiB);
    assert_int_equal(c->policy, 1);
    assert_true(c->monitor_frag_warning == 0.125);
    assert_string_equal(c->trace, "/tmp/t.csv.gz");

    cJSON *root = config_json();
    assert_string_equal(json_field(root, "GRANULARITY", "source"), "environment");
    assert_string_equal(json_field(root, "GRANULARITY", "value"), "4MiB");
    assert_string_equal(json_field(root, "GRANULARITY", "env"), "VRAM_GRANULARITY");
    assert_string_equal(json_field(root, "POLICY", "source"), "environment");
    assert_string_equal(json_field(root, "TRACE", "value"), "/tmp/t.csv.gz");
    assert_string_equal(json_field(root, "CAPACITY", "source"), "default");
    cJSON_Delete(root);
    vram_config_source src = VRAM_CONFIG_SET;
    assert_int_equal(vram_config_source_of("granularity", &src), 0);
    assert_int_equal(src, VRAM_CONFIG_ENV);
    assert_int_equal(vram_config_source_of("CAPACITY", &src), 0);
    assert_int_equal(src, VRAM_CONFIG_DEFAULT);

    /* Pool options take the configuration. */
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    assert_int_equal(o.granularity, 4 * MiB);
    assert_int_equal(o.policy, VRAM_POLICY_SEGMENTS);

    /* The environment is read at load/reset, not on every get. */
    assert_int_equal(setenv("VRAM_GRANULARITY", "8MiB", 1), 0);
    assert_int_equal(vram_config_get()->granularity, 4 * MiB);
    assert_int_equal(vram_config_load(), 0);
    assert_int_equal(vram_config_get()->granularity, 4 * MiB);
    vram_config_reset();
    assert_int_equal(vram_config_get()->granularity, 8 * MiB);

    /* Removing the variables and resetting restores the defaults. */
    unsetenv("VRAM_GRANULARITY");
    unsetenv("VRAM_POLICY");
    unsetenv("VRAM_MONITOR_FRAG_WARNING");
    unsetenv("VRAM_TRACE");
    vram_config_reset();
    assert_int_equal(c->granularity, 2 * MiB);
    assert_int_equal(c->policy, 0);
    assert_string_equal(c->trace, "");
}

static void test_config_environment_malformed(void **state)
{
    (void)state;
    assert_int_equal(setenv("VRAM_GRANULARITY", "lots", 1), 0);
    assert_int_equal(setenv("VRAM_ALIGNMENT", "512", 1), 0);
    vram_config_reset();
    vram_clear_error();
    int rc = vram_config_load();
    assert_int_equal(rc, VRAM_EINVAL);
    assert_contains(vram_last_error(), "VRAM_GRANULARITY=lots");
    assert_contains(vram_last_error(), "2MiB"); /* the default it keeps */
    /* The malformed option keeps its default; the others are read. */
    assert_int_equal(vram_config_get()->granularity, 2 * MiB);
    assert_int_equal(vram_config_get()->alignment, 512);
    /* The failure is reported again to later callers, e.g. pool options. */
    vram_clear_error();
    assert_int_equal(vram_config_load(), VRAM_EINVAL);
    assert_contains(vram_last_error(), "VRAM_GRANULARITY");
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), VRAM_EINVAL);
    assert_int_equal(o.granularity, 2 * MiB);
    assert_int_equal(o.alignment, 512);

    cJSON *root = config_json();
    assert_string_equal(json_field(root, "GRANULARITY", "source"), "default");
    assert_string_equal(json_field(root, "ALIGNMENT", "source"), "environment");
    cJSON_Delete(root);
    vram_config_source src = VRAM_CONFIG_ENV;
    assert_int_equal(vram_config_source_of("GRANULARITY", &src), 0);
    assert_int_equal(src, VRAM_CONFIG_DEFAULT); /* malformed: the default stays */

    /* A bad CHOICE and a bad DOUBLE in the environment. */
    unsetenv("VRAM_GRANULARITY");
    assert_int_equal(setenv("VRAM_POLICY", "best", 1), 0);
    vram_config_reset();
    assert_int_equal(vram_config_load(), VRAM_EINVAL);
    assert_contains(vram_last_error(), "VRAM_POLICY=best");
    assert_int_equal(vram_config_get()->policy, 0);
    unsetenv("VRAM_POLICY");
    assert_int_equal(setenv("VRAM_MONITOR_FRAG_WARNING", "-0.5", 1), 0);
    vram_config_reset();
    assert_int_equal(vram_config_load(), VRAM_EINVAL);
    assert_contains(vram_last_error(), "VRAM_MONITOR_FRAG_WARNING");
    assert_true(vram_config_get()->monitor_frag_warning == 0.3);

    /* Cleaning the environment clears the error. */
    unsetenv("VRAM_MONITOR_FRAG_WARNING");
    unsetenv("VRAM_ALIGNMENT");
    vram_config_reset();
    assert_int_equal(vram_config_load(), 0);
}

static void test_config_set(void **state)
{
    (void)state;
    const vram_config *c = vram_config_get();
    assert_int_equal(vram_config_set("granularity", "8MiB"), 0);
    assert_int_equal(c->granularity, 8 * MiB);
    assert_int_equal(vram_config_set("GRANULARITY", "16M"), 0);
    assert_int_equal(c->granularity, 16 * MiB);
    assert_int_equal(vram_config_set("GrAnUlArItY", "4194304"), 0);
    assert_int_equal(c->granularity, 4 * MiB);

    cJSON *root = config_json();
    assert_string_equal(json_field(root, "GRANULARITY", "source"), "set");
    assert_string_equal(json_field(root, "GRANULARITY", "value"), "4194304");
    cJSON_Delete(root);
    vram_config_source src = VRAM_CONFIG_DEFAULT;
    assert_int_equal(vram_config_source_of("granularity", &src), 0);
    assert_int_equal(src, VRAM_CONFIG_SET);
    vram_clear_error();
    assert_int_equal(vram_config_source_of("granularty", &src), VRAM_EINVAL);
    assert_contains(vram_last_error(), "granularty");
    assert_int_equal(vram_config_source_of(NULL, &src), VRAM_EINVAL);
    assert_int_equal(vram_config_source_of("granularity", NULL), VRAM_EINVAL);

    /* Unknown names are refused and named. */
    vram_clear_error();
    assert_int_equal(vram_config_set("granularty", "4MiB"), VRAM_EINVAL);
    assert_contains(vram_last_error(), "granularty");
    assert_int_equal(vram_config_set("VRAM_GRANULARITY", "4MiB"), VRAM_EINVAL);
    assert_contains(vram_last_error(), "VRAM_GRANULARITY");
    assert_int_equal(vram_config_set("", "1"), VRAM_EINVAL);
    assert_int_equal(vram_config_set(NULL, "1"), VRAM_EINVAL);
    /* NULL forgets the override: the default (no VRAM_GRANULARITY here) again. */
    assert_int_equal(vram_config_set("granularity", NULL), 0);
    assert_int_equal(c->granularity, 2 * MiB);
    assert_int_equal(vram_config_source_of("granularity", &src), 0);
    assert_int_equal(src, VRAM_CONFIG_DEFAULT);
    assert_int_equal(vram_config_set("granularity", "4194304"), 0);
    assert_int_equal(c->granularity, 4 * MiB);

    /* Bad values are refused, named, and change nothing. */
    static const char *const bad_sizes[] = {"", "x", "-2M", "2X", "1.3", "5MiBx"};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        vram_clear_error();
        assert_int_equal(vram_config_set("granularity", bad_sizes[i]), VRAM_EINVAL);
        assert_contains(vram_last_error(), "GRANULARITY");
        assert_int_equal(c->granularity, 4 * MiB);
    }
    root = config_json();
    assert_string_equal(json_field(root, "GRANULARITY", "value"), "4194304");
    cJSON_Delete(root);

    /* DOUBLE */
    assert_int_equal(vram_config_set("monitor_frag_warning", "0.5"), 0);
    assert_true(c->monitor_frag_warning == 0.5);
    static const char *const bad_doubles[] = {"", "-1", "abc", "0.5x", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad_doubles / sizeof bad_doubles[0]; i++) {
        vram_clear_error();
        assert_int_equal(vram_config_set("monitor_frag_warning", bad_doubles[i]), VRAM_EINVAL);
        assert_contains(vram_last_error(), "MONITOR_FRAG_WARNING");
        assert_true(c->monitor_frag_warning == 0.5);
    }

    /* STRING: owned copy. */
    char path[32];
    snprintf(path, sizeof path, "/tmp/trace.csv");
    assert_int_equal(vram_config_set("trace", path), 0);
    path[0] = 'X';
    assert_string_equal(c->trace, "/tmp/trace.csv");
    const char *held = c->trace; /* as an *_opts_init would copy it */
    assert_int_equal(vram_config_set("trace", ""), 0);
    assert_string_equal(c->trace, "");
    /* The old value's text stays valid (ASan would see a use after free). */
    assert_string_equal(held, "/tmp/trace.csv");

    /* reset forgets overrides. */
    vram_config_reset();
    assert_int_equal(c->granularity, 2 * MiB);
    assert_true(c->monitor_frag_warning == 0.3);
    root = config_json();
    assert_string_equal(json_field(root, "GRANULARITY", "source"), "default");
    cJSON_Delete(root);
}

static void test_config_choices(void **state)
{
    (void)state;
    const vram_config *c = vram_config_get();
    assert_int_equal(vram_config_set("policy", "segments"), 0);
    assert_int_equal(c->policy, 1);
    assert_int_equal(vram_config_set("policy", "VMM"), 0);
    assert_int_equal(c->policy, 0);
    assert_int_equal(vram_config_set("POLICY", "SeGmEnTs"), 0);
    assert_int_equal(c->policy, 1);
    static const char *const bad[] = {"", "seg", "segmentss", "vmm|segments", "|", "best"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vram_clear_error();
        assert_int_equal(vram_config_set("policy", bad[i]), VRAM_EINVAL);
        assert_contains(vram_last_error(), "POLICY");
        assert_contains(vram_last_error(), "vmm|segments");
        assert_int_equal(c->policy, 1);
    }

    static const char *const levels[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(vram_config_set("log_level", levels[i]), 0);
        assert_int_equal(c->log_level, i);
        assert_string_equal(vram_log_level_name((vram_log_level)i), levels[i]);
    }
    assert_int_equal(vram_config_set("log_level", "trace"), VRAM_EINVAL);
    assert_int_equal(c->log_level, 3);
    assert_string_equal(vram_log_level_name((vram_log_level)4), "?");
    assert_string_equal(vram_log_level_name((vram_log_level)-1), "?");

    assert_int_equal(vram_config_set("backend", "host"), 0);
    assert_int_equal(c->backend, 1);
    assert_int_equal(vram_config_set("backend", "cuda"), 0);
    assert_int_equal(c->backend, 2);
    assert_int_equal(vram_config_set("backend", "opencl"), VRAM_EINVAL);
    assert_int_equal(c->backend, 2);
    assert_int_equal(vram_config_set("backend", "host"), 0);
    assert_int_equal(c->backend, 1);
}

static void test_config_print_text(void **state)
{
    (void)state;
    assert_int_equal(setenv("VRAM_GRANULARITY", "4MiB", 1), 0);
    vram_config_reset();
    assert_int_equal(vram_config_set("alignment", "1K"), 0);
    sink s = {0};
    assert_int_equal(vram_config_print(sink_write, &s, 0), 0);
    assert_non_null(s.buf.data);
    /* One header line, one line per option. */
    size_t lines = 0;
    for (size_t i = 0; i < s.buf.len; i++)
        lines += s.buf.data[i] == '\n';
    assert_int_equal(lines, N_OPTIONS + 1);
    assert_int_equal(s.buf.data[s.buf.len - 1], '\n');
    for (size_t i = 0; i < N_OPTIONS; i++)
        assert_contains(s.buf.data, option_env_names[i]);
    /* Each option's line holds its value and source. */
    char *line = strstr(s.buf.data, "VRAM_GRANULARITY ");
    assert_non_null(line);
    char *eol = strchr(line, '\n');
    *eol = '\0';
    assert_contains(line, "4MiB");
    assert_contains(line, "environment");
    *eol = '\n';
    line = strstr(s.buf.data, "VRAM_ALIGNMENT ");
    assert_non_null(line);
    eol = strchr(line, '\n');
    *eol = '\0';
    assert_contains(line, "1K");
    assert_contains(line, " set ");
    *eol = '\n';
    line = strstr(s.buf.data, "VRAM_POLICY ");
    assert_non_null(line);
    eol = strchr(line, '\n');
    *eol = '\0';
    assert_contains(line, "default");
    assert_contains(line, "vmm|segments"); /* CHOICE lists its choices */
    *eol = '\n';
    sink_free(&s);

    /* The table is built first and written in one call (under no lock); a
     * failing writer's code is returned. */
    s.fail_at = 1;
    assert_int_equal(vram_config_print(sink_write, &s, 0), VRAM_EIO);
    assert_int_equal(s.writes, 1);
    sink_free(&s);
    s.fail_at = 1;
    assert_int_equal(vram_config_print(sink_write, &s, 1), VRAM_EIO);
    assert_int_equal(s.writes, 1);
    sink_free(&s);
}

static void test_config_print_json(void **state)
{
    (void)state;
    assert_int_equal(setenv("VRAM_CAPACITY", "64MiB", 1), 0);
    vram_config_reset();
    assert_int_equal(vram_config_set("policy", "segments"), 0);
    cJSON *root = config_json();
    assert_int_equal(cJSON_GetArraySize(root), (int)N_OPTIONS);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *name = option_env_names[i] + 5;
        assert_string_equal(json_field(root, name, "env"), option_env_names[i]);
        assert_true(strlen(json_field(root, name, "help")) > 0);
        json_field(root, name, "value");
        const char *src = json_field(root, name, "source");
        if (strcmp(name, "CAPACITY") == 0)
            assert_string_equal(src, "environment");
        else if (strcmp(name, "POLICY") == 0)
            assert_string_equal(src, "set");
        else
            assert_string_equal(src, "default");
    }
    assert_string_equal(json_field(root, "CAPACITY", "value"), "64MiB");
    assert_string_equal(json_field(root, "POLICY", "value"), "segments");
    cJSON_Delete(root);
}

/* ---- logging ---------------------------------------------------------- */

typedef struct log_capture {
    int n;
    vram_log_level levels[16];
    char lines[16][1100];
} log_capture;

static void capture(void *ctx, vram_log_level level, const char *line)
{
    log_capture *c = ctx;
    if (c->n < 16) {
        c->levels[c->n] = level;
        snprintf(c->lines[c->n], sizeof c->lines[c->n], "%s", line);
    }
    c->n++;
}

static void test_log_handler_levels(void **state)
{
    (void)state;
    log_capture *cap = calloc(1, sizeof *cap);
    assert_non_null(cap);
    vram_log_set_handler(capture, cap);

    assert_int_equal(vram_config_set("log_level", "debug"), 0);
    for (int l = VRAM_LOG_ERROR; l <= VRAM_LOG_DEBUG; l++)
        assert_true(vram_log_enabled((vram_log_level)l));
    vram_log(VRAM_LOG_DEBUG, "debug %d %s", 42, "x");
    vram_log(VRAM_LOG_ERROR, "error line");
    assert_int_equal(cap->n, 2);
    assert_int_equal(cap->levels[0], VRAM_LOG_DEBUG);
    assert_string_equal(cap->lines[0], "debug 42 x");
    assert_int_equal(cap->levels[1], VRAM_LOG_ERROR);
    assert_string_equal(cap->lines[1], "error line");

    /* warn: info and debug are not produced at all. */
    memset(cap, 0, sizeof *cap);
    assert_int_equal(vram_config_set("log_level", "warn"), 0);
    assert_false(vram_log_enabled(VRAM_LOG_INFO));
    assert_false(vram_log_enabled(VRAM_LOG_DEBUG));
    assert_true(vram_log_enabled(VRAM_LOG_WARN));
    vram_log(VRAM_LOG_DEBUG, "no");
    vram_log(VRAM_LOG_INFO, "no");
    vram_log(VRAM_LOG_WARN, "w");
    vram_log(VRAM_LOG_ERROR, "e");
    assert_int_equal(cap->n, 2);
    assert_string_equal(cap->lines[0], "w");
    assert_int_equal(cap->levels[0], VRAM_LOG_WARN);
    assert_string_equal(cap->lines[1], "e");

    /* error: only errors. */
    memset(cap, 0, sizeof *cap);
    assert_int_equal(vram_config_set("log_level", "ERROR"), 0);
    vram_log(VRAM_LOG_WARN, "no");
    vram_log(VRAM_LOG_ERROR, "yes");
    assert_int_equal(cap->n, 1);
    assert_string_equal(cap->lines[0], "yes");

    /* The level also comes from the environment. */
    memset(cap, 0, sizeof *cap);
    assert_int_equal(setenv("VRAM_LOG_LEVEL", "info", 1), 0);
    vram_config_reset();
    vram_log(VRAM_LOG_INFO, "info via env");
    vram_log(VRAM_LOG_DEBUG, "no");
    assert_int_equal(cap->n, 1);
    assert_string_equal(cap->lines[0], "info via env");

    /* A very long line is truncated, not overrun. */
    memset(cap, 0, sizeof *cap);
    char big[2000];
    memset(big, 'L', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    vram_log(VRAM_LOG_ERROR, "%s", big);
    assert_int_equal(cap->n, 1);
    size_t n = strlen(cap->lines[0]);
    assert_true(n >= 1000 && n < sizeof big - 1);

    /* Installing another handler replaces the first. */
    log_capture *cap2 = calloc(1, sizeof *cap2);
    assert_non_null(cap2);
    vram_log_set_handler(capture, cap2);
    memset(cap, 0, sizeof *cap);
    vram_log(VRAM_LOG_ERROR, "to the second");
    assert_int_equal(cap->n, 0);
    assert_int_equal(cap2->n, 1);
    vram_log_set_handler(NULL, NULL);
    free(cap);
    free(cap2);
}

static void test_log_default_stderr(void **state)
{
    (void)state;
    char path[] = "/tmp/vram_test_base_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);

    vram_log_set_handler(NULL, NULL);
    assert_int_equal(vram_config_set("log_level", "warn"), 0);
    vram_log(VRAM_LOG_WARN, "to stderr %d", 7);
    vram_log(VRAM_LOG_INFO, "hidden");
    fflush(stderr);

    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    char buf[256] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    assert_string_equal(buf, "vramkit: warn: to stderr 7\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_names_distinct),
        cmocka_unit_test(test_error_unknown_codes),
        cmocka_unit_test(test_fail_sets_last_error),
        cmocka_unit_test(test_fail_prefix),
        cmocka_unit_test(test_fail_long_messages),
        cmocka_unit_test(test_last_error_per_thread),
        cmocka_unit_test(test_fmt_bytes),
        cmocka_unit_test(test_parse_size_accepts),
        cmocka_unit_test(test_parse_size_rejects),
        cmocka_unit_test_setup_teardown(test_config_defaults, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_environment, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_environment_malformed, setup_clean,
                                        teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_set, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_choices, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_print_text, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_config_print_json, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_log_handler_levels, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_log_default_stderr, setup_clean, teardown_clean),
        cmocka_unit_test_setup_teardown(test_public_text, setup_clean, teardown_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
