/* tests/unit/test_oom.c - the OOM report of include/vramkit/oom.h, on the sim
 * backend, with NVML readings injected through the report's seam
 * (src/observe/oom_internal.h) since CI has no GPU:
 *  - each cause of the diagnosis from a real refusal: a request larger than
 *    the owner's budget and a budget filled up (exceeds_configured), a
 *    request larger than the device and a device filled up
 *    (exceeds_configured), a pool that grows while a monitor samples it
 *    (leak), free memory in pieces crafted with the segments policy
 *    (fragmentation), and another process holding the GPU (other_processes);
 *  - the rules themselves on hand-made figures, their order included;
 *  - the three files: names as documented, the JSON parses with cJSON and has
 *    every field of the format, the text reads (sections, numbers), the
 *    snapshot is vram_pool_snapshot's;
 *  - the rate limit (a storm writes max_reports reports, counts the rest, and
 *    the next report after the window says how many), the ring of events
 *    (wraps, oldest first, the refusal last), vram_last_error and the result
 *    kept whether the report is written or fails, no recursion from the
 *    callback, watch/unwatch errors, VRAM_OOM_DIR for pools made from the
 *    configuration, and 8 threads refusing at once (run under TSan too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal.h"
#include "observe/oom_internal.h"
#include "vramkit.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

/* ---- helpers --------------------------------------------------------- */

#define OPT_ENV_NAME(NAME, field, TYPE, def, choices, help) "VRAM_" #NAME,
static const char *const option_env_names[] = {VRAM_OPTIONS(OPT_ENV_NAME)};
#undef OPT_ENV_NAME

static char dir[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof option_env_names / sizeof option_env_names[0]; i++)
        unsetenv(option_env_names[i]);
    vram_config_reset();
    vram_config_set("log_level", "error"); /* reports log a warning each */
    vram_clear_error();
    vram__oom_set_gpu_reader(NULL);
    snprintf(dir, sizeof dir, "/tmp/vram-oom-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    vram__oom_set_gpu_reader(NULL);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    vram_config_reset();
    return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Report JSON files (not snapshots) in dir `d`, sorted by name. */
static int count_reports(const char *d)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)))
        n += ends_with(e->d_name, ".json") && !ends_with(e->d_name, ".snapshot.json");
    closedir(dd);
    return n;
}

static int count_files(const char *d)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)))
        n += e->d_name[0] != '.';
    closedir(dd);
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static cJSON *load_json(const char *path)
{
    char *text = slurp(path);
    cJSON *j = cJSON_Parse(text);
    if (!j)
        fail_msg("%s does not parse as JSON: %.200s", path, text);
    free(text);
    return j;
}

static vram_pool *make_pool(const char *name, uint64_t capacity, vram_policy policy)
{
    vram_backend *b;
    vram_backend_opts bo = {.capacity = capacity, .granularity = 2 * MiB};
    assert_int_equal(vram_backend_create("sim", &bo, &b), 0);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.name = name;
    o.backend = b;
    o.policy = policy;
    o.retain_min = 0;
    o.decay_ms = 0;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static void free_pool(vram_pool *p)
{
    vram_backend *b = vram_pool_backend(p);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

/* What the callback saw. */
typedef struct seen {
    int calls;
    char json[4096], text[4096], snapshot[4096], line[640];
    vram_oom_cause cause;
    uint64_t suppressed;
    /* recursion test */
    vram_pool *pool;
    int alloc_in_callback;
    int alloc_rc;
    int unwatch_rc;
} seen;

static void on_report(void *ctx, const vram_oom_report_info *info)
{
    seen *s = ctx;
    s->calls++;
    snprintf(s->json, sizeof s->json, "%s", info->json_path);
    snprintf(s->text, sizeof s->text, "%s", info->text_path);
    snprintf(s->snapshot, sizeof s->snapshot, "%s", info->snapshot_path ? info->snapshot_path : "");
    snprintf(s->line, sizeof s->line, "%s", info->diagnosis);
    s->cause = info->cause;
    s->suppressed = info->suppressed;
    if (s->alloc_in_callback) {
        void *q = NULL;
        /* Too large for anything: refused, and must not be reported. */
        s->alloc_rc = vram_pool_alloc(s->pool, 1ull << 50, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER,
                                      NULL, &q);
        s->unwatch_rc = vram_pool_oom_unwatch(s->pool);
    }
}

static void watch(vram_pool *p, seen *s, uint32_t events, vram_monitor *m)
{
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    o.directory = dir;
    o.last_events = events;
    o.monitor = m;
    o.on_report = on_report;
    o.ctx = s;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
}

/* A refusal: the result and the sentence are those of the refusal, with or
 * without the report; returns the report's JSON (the caller deletes it). */
static cJSON *refuse(vram_pool *p, uint64_t size, vram_owner owner, int expect_rc, seen *s)
{
    int calls = s->calls;
    void *q = (void *)1;
    int rc = vram_pool_alloc(p, size, owner, VRAM_KIND_ACTIVATIONS, (vram_stream)0x5, &q);
    assert_int_equal(rc, expect_rc);
    assert_null(q);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", vram_last_error());
    assert_int_equal(s->calls, calls + 1);
    cJSON *j = load_json(s->json);
    cJSON *req = cJSON_GetObjectItem(j, "request");
    assert_string_equal(cJSON_GetObjectItem(req, "message")->valuestring, msg);
    assert_string_equal(cJSON_GetObjectItem(req, "error")->valuestring, vram_err_name(expect_rc));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "diagnosis"), "line")->valuestring,
                        s->line);
    return j;
}

static const char *cause_of(cJSON *j)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(j, "diagnosis"), "cause")->valuestring;
}

/* ---- the four causes, from real refusals ----------------------------- */

/* Owner "cam07" of a 1 GiB pool, with a 64 MiB budget, holds `held` bytes
 * and asks for `ask` more: the refusal's report (the caller deletes it) and
 * what the callback saw; the pool is gone again. */
static cJSON *budget_refusal(uint64_t held, uint64_t ask, seen *s)
{
    vram_pool *p = make_pool("cams", 1 * GiB, VRAM_POLICY_VMM);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam07", 64 * MiB, &cam), 0);
    watch(p, s, 16, NULL);
    void *a;
    assert_int_equal(vram_pool_alloc(p, held, cam, VRAM_KIND_FRAMES, NULL, &a), 0);
    cJSON *j = refuse(p, ask, cam, VRAM_EBUDGET, s);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    free_pool(p);
    return j;
}

static void test_budget_request_too_large(void **state)
{
    (void)state;
    seen s = {0};
    cJSON *j = budget_refusal(10 * MiB, 100 * MiB, &s);
    assert_string_equal(cause_of(j), "exceeds_configured");
    assert_int_equal(s.cause, VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(s.line, "the request of 100.0 MiB alone exceeds owner \"cam07\"'s budget of "
                            "64.0 MiB (it holds 10.0 MiB)");
    cJSON_Delete(j);
}

/* A pool labelled with its GPU says so in its report and its snapshot;
 * one without says nothing. */
static void test_gpu_label(void **state)
{
    (void)state;
    for (int gpu = -1; gpu <= 2; gpu += 3) {
        vram_backend *b;
        vram_backend_opts bo = {.capacity = 64 * MiB, .granularity = 2 * MiB};
        assert_int_equal(vram_backend_create("sim", &bo, &b), 0);
        vram_pool_opts o;
        assert_int_equal(vram_pool_opts_init(&o), 0);
        assert_int_equal(o.gpu, -1);
        o.name = gpu >= 0 ? "gpu2-device" : "unlabelled";
        o.backend = b;
        o.decay_ms = 0;
        o.gpu = gpu;
        vram_pool *p;
        assert_int_equal(vram_pool_create(&o, &p), 0);
        assert_int_equal(vram_pool_gpu(p), gpu);
        seen s = {0};
        watch(p, &s, 4, NULL);
        cJSON *j = refuse(p, 128 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
        cJSON *label = cJSON_GetObjectItem(j, "pool_gpu");
        char *text = slurp(s.text);
        cJSON *snap = load_json(s.snapshot);
        if (gpu >= 0) {
            assert_true(cJSON_IsNumber(label) && label->valueint == gpu);
            assert_non_null(strstr(text, "vramkit OOM report: pool \"gpu2-device\" on GPU 2 ("));
            assert_int_equal(cJSON_GetObjectItem(snap, "gpu")->valueint, 2);
        } else {
            assert_null(label);
            assert_null(strstr(text, " on GPU "));
            assert_null(cJSON_GetObjectItem(snap, "gpu"));
        }
        free(text);
        cJSON_Delete(snap);
        cJSON_Delete(j);
        free_pool(p);
    }
    /* Out of range: refused, naming it. */
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.gpu = 1024;
    vram_pool *p = NULL;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EINVAL);
    assert_contains(vram_last_error(), "gpu 1024 is no device index");
}

static void test_budget_filled(void **state)
{
    (void)state;
    seen s = {0};
    cJSON *j = budget_refusal(60 * MiB, 8 * MiB, &s);
    assert_string_equal(cause_of(j), "exceeds_configured");
    assert_contains(s.line, "owner \"cam07\" holds 60.0 MiB of its 64.0 MiB budget and asks "
                            "8.00 MiB more (4.00 MiB over it)");
    assert_contains(s.line, "no monitor");
    assert_contains(s.line, "the budget is too small");
    cJSON_Delete(j);
}

static void test_device_too_small(void **state)
{
    (void)state;
    vram_pool *p = make_pool("dev", 256 * MiB, VRAM_POLICY_VMM);
    seen s = {0};
    watch(p, &s, 16, NULL);
    cJSON *j = refuse(p, 512 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_string_equal(cause_of(j), "exceeds_configured");
    assert_contains(s.line, "the request of 512.0 MiB is larger than the whole device (256.0 MiB)");
    cJSON_Delete(j);
    free_pool(p);
}

static void test_device_filled(void **state)
{
    (void)state;
    vram_pool *p = make_pool("dev", 64 * MiB, VRAM_POLICY_VMM);
    seen s = {0};
    watch(p, &s, 16, NULL);
    void *a;
    assert_int_equal(vram_pool_alloc(p, 60 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &a), 0);
    cJSON *j = refuse(p, 8 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_string_equal(cause_of(j), "exceeds_configured");
    assert_contains(s.line, "live 60.0 MiB");
    assert_contains(s.line, "plus the request of 8.00 MiB do not fit a 64.0 MiB device");
    assert_contains(s.line, "the workload needs more memory than configured");
    cJSON_Delete(j);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    free_pool(p);
}

/* A pool that grows by 1 MiB an iteration while a monitor samples it, until
 * the device is full: the trend names the leak. */
static void test_leak(void **state)
{
    (void)state;
    vram_pool *p = make_pool("leaky", 64 * MiB, VRAM_POLICY_VMM);
    vram_monitor_opts mo;
    assert_int_equal(vram_monitor_opts_init(&mo), 0);
    mo.manual = 1;
    mo.gpu = -1;
    mo.gpu_pci_bus_id = NULL;
    mo.csv_path = mo.jsonl_path = NULL;
    mo.warmup_fraction = 0;
    mo.min_samples = 5;
    mo.growth_bytes_per_iteration = 64 * KiB;
    mo.growth_confidence = 0.95;
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(&mo, &m), 0);
    assert_int_equal(vram_monitor_add_pool(m, p), 0);
    seen s = {0};
    watch(p, &s, 8, m);
    void *blocks[128];
    int n = 0, rc = 0;
    for (; n < 128; n++) {
        assert_int_equal(vram_monitor_sample(m, n), 0);
        rc = vram_pool_alloc(p, 1 * MiB, 0, VRAM_KIND_ACTIVATIONS, NULL, &blocks[n]);
        if (rc)
            break;
    }
    assert_int_equal(rc, VRAM_ENOMEM);
    assert_int_equal(n, 64);
    assert_int_equal(s.calls, 1);
    cJSON *j = load_json(s.json);
    assert_string_equal(cause_of(j), "leak");
    assert_contains(s.line, "the pool's live bytes grow by +1.00 MiB per iteration");
    assert_contains(s.line, "likely a leak");
    cJSON *t = cJSON_GetObjectItem(j, "trend");
    assert_true(cJSON_IsObject(t));
    assert_true(cJSON_GetObjectItem(t, "samples")->valuedouble >= 5);
    assert_true(fabs(cJSON_GetObjectItem(t, "slope_bytes_per_iteration")->valuedouble - MiB) < 1);
    assert_true(cJSON_GetObjectItem(t, "r2")->valuedouble > 0.99);
    cJSON_Delete(j);
    assert_int_equal(vram_pool_oom_unwatch(p), 0);
    assert_int_equal(vram_monitor_remove_pool(m, p), 0);
    assert_int_equal(vram_monitor_stop(m), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(vram_pool_free(p, blocks[i], NULL), 0);
    free_pool(p);
}

/* Segments of 20 MiB fill a 60 MiB device with 3 MiB blocks; every other
 * one freed leaves 33 MiB free in holes of at most 5 MiB: 8 MiB is refused
 * for fragmentation. */
static void test_fragmentation(void **state)
{
    (void)state;
    vram_pool *p = make_pool("frag", 60 * MiB, VRAM_POLICY_SEGMENTS);
    void *b[32];
    int n = 0;
    while (n < 32 && vram_pool_alloc(p, 3 * MiB, 0, VRAM_KIND_IO, NULL, &b[n]) == 0)
        n++;
    assert_int_equal(n, 18);
    for (int i = 1; i < n; i += 2) {
        assert_int_equal(vram_pool_free(p, b[i], NULL), 0);
        b[i] = NULL;
    }
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_true(st.free_bytes >= 8 * MiB);
    assert_true(st.largest_free_bytes < 8 * MiB);
    seen s = {0};
    watch(p, &s, 16, NULL);
    cJSON *j = refuse(p, 8 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_string_equal(cause_of(j), "fragmentation");
    char want[256], fr[32];
    snprintf(want, sizeof want,
             "%s is free in the pool and 0 B on the device, enough for the request of 8.00 MiB, "
             "but the largest free block is 5.00 MiB",
             vram__fmt_bytes(fr, sizeof fr, st.free_bytes));
    assert_contains(s.line, want);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(j, "largest_free_bytes")->valuedouble, 5 * MiB);
    assert_true(cJSON_GetObjectItem(j, "fragmentation_ratio")->valuedouble > 0.8);
    cJSON_Delete(j);
    for (int i = 0; i < n; i++)
        if (b[i])
            assert_int_equal(vram_pool_free(p, b[i], NULL), 0);
    free_pool(p);
}

/* NVML readings for a 1 GiB GPU: this process holds 300 MiB, "python3"
 * (pid 4242) 512 MiB; 212 MiB free. */
static int fake_gpu(const char *pci, int index, vram_gpu_memory *out)
{
    (void)pci;
    memset(out, 0, sizeof *out);
    out->index = index;
    snprintf(out->name, sizeof out->name, "Fake GPU");
    out->total_bytes = 1 * GiB;
    out->used_bytes = 812 * MiB;
    out->free_bytes = 212 * MiB;
    out->processes_known = 1;
    out->n_processes = out->n_processes_total = 2;
    out->processes[0] = (vram_gpu_process){.pid = 4242, .used_bytes = 512 * MiB};
    snprintf(out->processes[0].name, sizeof out->processes[0].name, "python3");
    out->processes[1] = (vram_gpu_process){.pid = (unsigned)getpid(), .used_bytes = 300 * MiB};
    snprintf(out->processes[1].name, sizeof out->processes[1].name, "test_oom");
    return 0;
}

/* The same GPU where NVML will not list the processes. */
static int fake_gpu_unlisted(const char *pci, int index, vram_gpu_memory *out)
{
    fake_gpu(pci, index, out);
    out->processes_known = 0;
    out->n_processes = out->n_processes_total = 0;
    return 0;
}

static int no_nvml(const char *pci, int index, vram_gpu_memory *out)
{
    (void)pci, (void)index;
    memset(out, 0, sizeof *out);
    out->index = -1;
    return vram__fail(VRAM_ENOSYS, "NVML is not available: injected by the test");
}

static void test_other_processes(void **state)
{
    (void)state;
    vram__oom_set_gpu_reader(fake_gpu);
    /* What the device leaves this process: 512 MiB of which it holds 300. */
    vram_pool *p = make_pool("svc", 512 * MiB, VRAM_POLICY_VMM);
    void *a;
    assert_int_equal(vram_pool_alloc(p, 300 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &a), 0);
    seen s = {0};
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    o.directory = dir;
    o.gpu = 0;
    o.on_report = on_report;
    o.ctx = &s;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
    cJSON *j = refuse(p, 300 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_string_equal(cause_of(j), "other_processes");
    assert_contains(s.line, "1 other process(es) hold 512.0 MiB of GPU 0 (the most: pid 4242 "
                            "\"python3\" with 512.0 MiB)");
    assert_contains(s.line, "the request of 300.0 MiB lacked 88.0 MiB");
    cJSON *g = cJSON_GetObjectItem(j, "gpu");
    assert_true(cJSON_IsObject(g));
    assert_int_equal((uint64_t)cJSON_GetObjectItem(g, "total_bytes")->valuedouble, 1 * GiB);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(g, "other_processes_bytes")->valuedouble,
                     512 * MiB);
    cJSON *ps = cJSON_GetObjectItem(g, "processes");
    assert_int_equal(cJSON_GetArraySize(ps), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ps, 0), "name")->valuestring,
                        "python3");
    assert_null(cJSON_GetObjectItem(j, "gpu_unavailable"));
    char *text = slurp(s.text);
    assert_contains(text, "GPU 0 (Fake GPU): used 812.0 MiB of 1.00 GiB, free 212.0 MiB");
    assert_contains(text, "pid 4242");
    assert_contains(text, "(this process)");
    free(text);
    cJSON_Delete(j);

    /* Processes not listed: the GPU's used bytes (this pool is not on the GPU,
     * its backend being sim), and the line says how they were counted. */
    vram__oom_set_gpu_reader(fake_gpu_unlisted);
    j = refuse(p, 300 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_string_equal(cause_of(j), "other_processes");
    assert_contains(s.line, "other processes hold 812.0 MiB of GPU 0; ");
    assert_contains(s.line, "NVML would not list the processes");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "gpu"), "processes_known")));
    cJSON_Delete(j);

    /* Without NVML: "gpu" is null and the reason is given. */
    vram__oom_set_gpu_reader(no_nvml);
    j = refuse(p, 300 * MiB, VRAM_OWNER_DEFAULT, VRAM_ENOMEM, &s);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "gpu")));
    assert_string_equal(cJSON_GetObjectItem(j, "gpu_unavailable")->valuestring,
                        "NVML is not available: injected by the test");
    assert_string_equal(cause_of(j), "exceeds_configured");
    cJSON_Delete(j);
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    free_pool(p);
}

/* ---- the rules on hand-made figures ---------------------------------- */

static vram__oom_facts device_facts(void)
{
    return (vram__oom_facts){
        .error = VRAM_ENOMEM, .request = 10 * MiB, .owner = "default",
        .live = 90 * MiB, .reserved = 96 * MiB, .pool_free = 6 * MiB, .largest_free = 6 * MiB,
        .capacity = 100 * MiB, .device_known = 1, .device_free = 3 * MiB,
    };
}

static vram_oom_cause diagnose(const vram__oom_facts *f, char *line)
{
    vram__oom_diagnosis d;
    vram__oom_diagnose(f, &d);
    if (line)
        snprintf(line, 640, "%s", d.line);
    return d.cause;
}

static void test_rules(void **state)
{
    (void)state;
    char line[640];
    /* Device: nothing special -> exceeds_configured. */
    vram__oom_facts f = device_facts();
    assert_int_equal(diagnose(&f, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "no trend");
    /* Pool free + device free >= request, both pieces too small -> fragmentation. */
    f = device_facts();
    f.pool_free = 8 * MiB;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_FRAGMENTATION);
    assert_contains(line, "8.00 MiB is free in the pool and 3.00 MiB on the device");
    /* ... but not when a single free piece would have served it. */
    f.largest_free = 10 * MiB;
    assert_int_equal(diagnose(&f, NULL), VRAM_OOM_EXCEEDS_CONFIGURED);
    /* Growing -> leak; a level trend -> not. */
    f = device_facts();
    f.trend_known = 1;
    f.samples = 40;
    f.slope_per_s = 2 * MiB;
    f.slope_per_iteration = NAN;
    f.r2 = 0.98;
    f.confidence = 0.999;
    f.growing = 1;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_LEAK);
    assert_contains(line, "+2.00 MiB/s over 40 samples (r2 0.98, confidence 0.999)");
    f.growing = 0;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "not growing beyond the monitor's threshold");
    /* Other processes hold at least the shortfall (10 - 6 = 4 MiB). */
    f = device_facts();
    f.gpu_known = 1;
    f.gpu_index = 3;
    f.gpu_total = 200 * MiB;
    f.gpu_free = 4 * MiB;
    f.others_known = 1;
    f.others_count = 2;
    f.others_bytes = 4 * MiB;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_OTHER_PROCESSES);
    assert_contains(line, "2 other process(es) hold 4.00 MiB of GPU 3");
    assert_contains(line, "lacked 4.00 MiB");
    f.others_bytes = 4 * MiB - 1;
    assert_int_equal(diagnose(&f, NULL), VRAM_OOM_EXCEEDS_CONFIGURED);
    /* Processes not listed: used minus ours, said so. */
    f.others_bytes = 6 * MiB;
    f.others_count = 0;
    f.others_note = "NVML would not list the processes";
    assert_int_equal(diagnose(&f, line), VRAM_OOM_OTHER_PROCESSES);
    assert_contains(line, "other processes hold 6.00 MiB of GPU 3");
    assert_contains(line, "it would fit; NVML would not list the processes");
    f.others_note = NULL;
    f.others_count = 2;
    /* Order: a leak outranks other processes, fragmentation outranks a leak,
     * a request larger than the device outranks everything. */
    f.others_bytes = 50 * MiB;
    f.trend_known = f.growing = 1;
    f.samples = 10;
    assert_int_equal(diagnose(&f, NULL), VRAM_OOM_LEAK);
    f.pool_free = 8 * MiB;
    assert_int_equal(diagnose(&f, NULL), VRAM_OOM_FRAGMENTATION);
    f.request = 150 * MiB;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "larger than the whole device (100.0 MiB)");
    /* The GPU's total caps the device when it is smaller than the capacity. */
    f.gpu_total = 120 * MiB;
    f.capacity = 1 * GiB;
    assert_int_equal(diagnose(&f, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "(120.0 MiB)");
    /* Budget: too large alone; growing; filled. */
    vram__oom_facts b = {.error = VRAM_EBUDGET, .request = 5 * MiB, .owner = "cam",
                         .owner_live = 2 * MiB, .owner_budget = 4 * MiB};
    assert_int_equal(diagnose(&b, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "alone exceeds");
    b.request = 3 * MiB;
    assert_int_equal(diagnose(&b, line), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_contains(line, "(1.00 MiB over it)");
    b.trend_known = b.growing = 1;
    b.samples = 12;
    b.slope_per_iteration = 1000;
    assert_int_equal(diagnose(&b, line), VRAM_OOM_LEAK);
    assert_contains(line, "+1000 B per iteration");
    /* Budget refusals never blame fragmentation or other processes. */
    b.trend_known = b.growing = 0;
    b.others_known = 1;
    b.others_count = 1;
    b.others_bytes = 1 * GiB;
    b.pool_free = 1 * GiB;
    assert_int_equal(diagnose(&b, NULL), VRAM_OOM_EXCEEDS_CONFIGURED);
    assert_string_equal(vram_oom_cause_name(VRAM_OOM_OTHER_PROCESSES), "other_processes");
    assert_string_equal(vram_oom_cause_name(VRAM_OOM_CAUSE_COUNT), "?");
}

/* ---- the files ------------------------------------------------------- */

static void test_files_and_fields(void **state)
{
    (void)state;
    vram_pool *p = make_pool("my pool/1", 128 * MiB, VRAM_POLICY_VMM);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam07", 16 * MiB, &cam), 0);
    seen s = {0};
    watch(p, &s, 16, NULL);
    void *a, *c;
    assert_int_equal(vram_pool_alloc(p, 12 * MiB, cam, VRAM_KIND_FRAMES, (vram_stream)0x5, &a), 0);
    assert_int_equal(vram_pool_alloc(p, 40 * MiB, 0, VRAM_KIND_WEIGHTS, NULL, &c), 0);
    cJSON *j = refuse(p, 8 * MiB, cam, VRAM_EBUDGET, &s);

    /* Names: <dir>/oom-<pool>-<YYYYmmddTHHMMSSZ>-<seq>.{txt,json,snapshot.json} */
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/oom-my_pool_1-", dir);
    assert_true(strncmp(s.json, prefix, strlen(prefix)) == 0);
    const char *ts = s.json + strlen(prefix);
    for (int i = 0; i < 16; i++)
        assert_true(i == 8 ? ts[i] == 'T' : i == 15 ? ts[i] == 'Z' : (ts[i] >= '0' && ts[i] <= '9'));
    assert_true(ts[16] == '-' && ts[17] >= '1' && ts[17] <= '9');
    char base[4096];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(s.json) - 5), s.json);
    char want[4200];
    snprintf(want, sizeof want, "%s.txt", base);
    assert_string_equal(s.text, want);
    snprintf(want, sizeof want, "%s.snapshot.json", base);
    assert_string_equal(s.snapshot, want);
    assert_int_equal(count_files(dir), 3);

    /* Every field of the format, with its type. */
    static const char *const numbers[] = {"time_s", "reserved_bytes", "live_bytes",
                                          "fragmentation_ratio", "largest_free_bytes"};
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
        if (!cJSON_IsNumber(cJSON_GetObjectItem(j, numbers[i])))
            fail_msg("field %s is not a number", numbers[i]);
    assert_string_equal(cJSON_GetObjectItem(j, "type")->valuestring, "oom");
    assert_string_equal(cJSON_GetObjectItem(j, "pool")->valuestring, "my pool/1");
    cJSON *r = cJSON_GetObjectItem(j, "request");
    assert_int_equal((uint64_t)cJSON_GetObjectItem(r, "size_bytes")->valuedouble, 8 * MiB);
    assert_string_equal(cJSON_GetObjectItem(r, "owner")->valuestring, "cam07");
    assert_string_equal(cJSON_GetObjectItem(r, "kind")->valuestring, "activations");
    assert_string_equal(cJSON_GetObjectItem(r, "stream")->valuestring, "0x5");
    assert_contains(cJSON_GetObjectItem(r, "message")->valuestring,
                    "budget of owner \"cam07\" exceeded: requested 8.00 MiB, live 12.0 MiB of 16.0 MiB");
    cJSON *owners = cJSON_GetObjectItem(j, "owners");
    assert_int_equal(cJSON_GetArraySize(owners), 2);
    int found = 0;
    cJSON *o;
    cJSON_ArrayForEach(o, owners)
    {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(o, "owner")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "live_bytes")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "peak_live_bytes")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "budget_bytes")));
        if (strcmp(cJSON_GetObjectItem(o, "owner")->valuestring, "cam07") == 0) {
            found = 1;
            assert_int_equal((uint64_t)cJSON_GetObjectItem(o, "live_bytes")->valuedouble, 12 * MiB);
            assert_int_equal((uint64_t)cJSON_GetObjectItem(o, "budget_bytes")->valuedouble, 16 * MiB);
        }
    }
    assert_true(found);
    cJSON *kinds = cJSON_GetObjectItem(j, "kinds");
    found = 0;
    cJSON_ArrayForEach(o, kinds)
    {
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "live_bytes")));
        if (strcmp(cJSON_GetObjectItem(o, "kind")->valuestring, "weights") == 0)
            found = (uint64_t)cJSON_GetObjectItem(o, "live_bytes")->valuedouble == 40 * MiB;
    }
    assert_true(found);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(j, "live_bytes")->valuedouble, 52 * MiB);
    assert_true(cJSON_GetObjectItem(j, "reserved_bytes")->valuedouble >= 52.0 * MiB);
    /* No GPU named, sim backend: null and why. */
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "gpu")));
    assert_contains(cJSON_GetObjectItem(j, "gpu_unavailable")->valuestring,
                    "the pool's backend (sim) is not a GPU");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "trend")));
    assert_contains(cJSON_GetObjectItem(j, "trend_unavailable")->valuestring, "no monitor");
    cJSON *ev = cJSON_GetObjectItem(j, "last_events");
    assert_int_equal(cJSON_GetArraySize(ev), 3);
    cJSON_ArrayForEach(o, ev)
    {
        static const char *const keys[] = {"action", "size_bytes", "owner", "kind", "stream",
                                           "address", "time_s"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
            if (!cJSON_GetObjectItem(o, keys[i]))
                fail_msg("event field %s missing", keys[i]);
    }
    cJSON *last = cJSON_GetArrayItem(ev, 2);
    assert_string_equal(cJSON_GetObjectItem(last, "action")->valuestring, "allocate failure");
    assert_string_equal(cJSON_GetObjectItem(last, "owner")->valuestring, "cam07");
    char addr[32];
    snprintf(addr, sizeof addr, "%p", a);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ev, 0), "address")->valuestring,
                        addr);
    double t0 = cJSON_GetObjectItem(j, "time_s")->valuedouble;
    assert_true(fabs(cJSON_GetObjectItem(last, "time_s")->valuedouble - t0) < 1.0);
    assert_string_equal(cJSON_GetObjectItem(j, "snapshot_path")->valuestring, s.snapshot);
    cJSON *d = cJSON_GetObjectItem(j, "diagnosis");
    assert_string_equal(cJSON_GetObjectItem(d, "cause")->valuestring, "exceeds_configured");
    assert_true(strlen(cJSON_GetObjectItem(d, "line")->valuestring) > 20);
    cJSON_Delete(j);

    /* The snapshot is vram_pool_snapshot's: the two live blocks. */
    cJSON *snap = load_json(s.snapshot);
    assert_string_equal(cJSON_GetObjectItem(snap, "pool")->valuestring, "my pool/1");
    int live = 0;
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(snap, "blocks"))
        live += strcmp(cJSON_GetObjectItem(o, "state")->valuestring, "live") == 0;
    assert_int_equal(live, 2);
    cJSON_Delete(snap);

    /* The text: each section, with the numbers. */
    char *text = slurp(s.text);
    assert_contains(text, "vramkit OOM report: pool \"my pool/1\" (policy vmm, backend sim)");
    assert_contains(text, "diagnosis: exceeds_configured\n  owner \"cam07\" holds 12.0 MiB");
    assert_contains(text, "request: 8.00 MiB for owner \"cam07\", kind activations, stream 0x5: "
                          "VRAM_EBUDGET");
    assert_contains(text, "  live 52.0 MiB (peak 52.0 MiB)");
    assert_contains(text, "largest free block");
    assert_contains(text, "  cam07 ");
    assert_contains(text, " 12.0 MiB        1     16.0 MiB  <- request");
    assert_contains(text, "weights");
    assert_contains(text, "GPU: no reading (no GPU to read");
    assert_contains(text, "trend of live bytes: none (no monitor");
    assert_contains(text, "last 3 event(s) of 3, oldest first:");
    assert_contains(text, "allocate failure");
    assert_contains(text, "snapshot: ");
    free(text);

    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_pool_free(p, c, NULL), 0);
    free_pool(p);
}

/* ---- ring, rate limit, errors ---------------------------------------- */

static void test_ring_wraps(void **state)
{
    (void)state;
    vram_pool *p = make_pool("ring", 256 * MiB, VRAM_POLICY_VMM);
    seen s = {0};
    watch(p, &s, 4, NULL);
    /* 9 events: alloc 1..5 KiB, free the first four; then the refusal. */
    void *b[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(vram_pool_alloc(p, (uint64_t)(i + 1) * KiB, 0, VRAM_KIND_OTHER, NULL, &b[i]),
                         0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(vram_pool_free(p, b[i], (vram_stream)0x9), 0);
    cJSON *j = refuse(p, 1 * GiB, 0, VRAM_ENOMEM, &s);
    cJSON *ev = cJSON_GetObjectItem(j, "last_events");
    assert_int_equal(cJSON_GetArraySize(ev), 4);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(j, "events_total")->valuedouble, 10);
    /* Oldest first: free 2 KiB, free 3 KiB, free 4 KiB, the refusal. */
    static const char *const act[] = {"free", "free", "free", "allocate failure"};
    static const uint64_t size[] = {2 * KiB, 3 * KiB, 4 * KiB, 1 * GiB};
    for (int i = 0; i < 4; i++) {
        cJSON *e = cJSON_GetArrayItem(ev, i);
        assert_string_equal(cJSON_GetObjectItem(e, "action")->valuestring, act[i]);
        assert_int_equal((uint64_t)cJSON_GetObjectItem(e, "size_bytes")->valuedouble, size[i]);
        if (i < 3) {
            char h[32];
            snprintf(h, sizeof h, "%p", b[i + 1]);
            assert_string_equal(cJSON_GetObjectItem(e, "address")->valuestring, h);
            assert_string_equal(cJSON_GetObjectItem(e, "stream")->valuestring, "0x9");
        }
    }
    cJSON_Delete(j);
    /* Exactly full, then one more: still the newest 4 in order. */
    assert_int_equal(vram_pool_free(p, b[4], NULL), 0);
    j = refuse(p, 2 * GiB, 0, VRAM_ENOMEM, &s);
    ev = cJSON_GetObjectItem(j, "last_events");
    assert_int_equal(cJSON_GetArraySize(ev), 4);
    static const uint64_t size2[] = {4 * KiB, 1 * GiB, 5 * KiB, 2 * GiB};
    for (int i = 0; i < 4; i++)
        assert_int_equal((uint64_t)cJSON_GetObjectItem(cJSON_GetArrayItem(ev, i), "size_bytes")
                             ->valuedouble,
                         size2[i]);
    cJSON_Delete(j);
    free_pool(p);

    /* No ring: no events, and the text says so. */
    p = make_pool("noring", 64 * MiB, VRAM_POLICY_VMM);
    watch(p, &s, 0, NULL);
    j = refuse(p, 1 * GiB, 0, VRAM_ENOMEM, &s);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "last_events")), 0);
    cJSON_Delete(j);
    char *text = slurp(s.text);
    assert_contains(text, "(none kept");
    free(text);
    free_pool(p);
}

static void test_rate_limit(void **state)
{
    (void)state;
    vram_pool *p = make_pool("storm", 64 * MiB, VRAM_POLICY_VMM);
    seen s = {0};
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    o.directory = dir;
    o.max_reports = 3;
    o.window_s = 0.5;
    o.on_report = on_report;
    o.ctx = &s;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
    char first[1024] = "";
    for (int i = 0; i < 20; i++) {
        void *q;
        assert_int_equal(vram_pool_alloc(p, 1 * GiB, 0, VRAM_KIND_OTHER, NULL, &q), VRAM_ENOMEM);
        if (!i)
            snprintf(first, sizeof first, "%s", vram_last_error());
        assert_string_equal(vram_last_error(), first); /* reported or not */
    }
    assert_int_equal(s.calls, 3);
    assert_int_equal(count_reports(dir), 3);
    assert_int_equal(count_files(dir), 9);
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(st.refusals, 20);
    assert_int_equal(st.reports, 3);
    assert_int_equal(st.suppressed, 17);
    assert_int_equal(st.write_failures, 0);
    char last[4096];
    assert_int_equal(vram_pool_oom_last_report(p, last, sizeof last), 0);
    assert_string_equal(last, s.json);
    assert_int_equal(vram_pool_oom_last_report(p, last, 4), VRAM_ELIMIT);
    assert_string_equal(last, "");
    /* After the window: a report again, saying how many were not reported. */
    usleep(600 * 1000);
    cJSON *j = refuse(p, 1 * GiB, 0, VRAM_ENOMEM, &s);
    assert_int_equal(s.suppressed, 17);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(j, "suppressed_before")->valuedouble, 17);
    cJSON_Delete(j);
    char *text = slurp(s.text);
    assert_contains(text, "17 earlier refusal(s) of this pool were not reported (rate limit)");
    free(text);
    free_pool(p);
}

/* A report that cannot be written changes nothing for the caller. */
static void test_write_failure_keeps_result(void **state)
{
    (void)state;
    vram_pool *p = make_pool("nowrite", 64 * MiB, VRAM_POLICY_VMM);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam", 1 * MiB, &cam), 0);
    /* The sentence without a watch. */
    void *q = (void *)1;
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, cam, VRAM_KIND_IO, NULL, &q), VRAM_EBUDGET);
    char plain[1024];
    snprintf(plain, sizeof plain, "%s", vram_last_error());
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    seen s = {0};
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    o.directory = sub;
    o.on_report = on_report;
    o.ctx = &s;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
    /* The directory becomes a file: nothing can be written there. */
    assert_int_equal(rmdir(sub), 0);
    FILE *f = fopen(sub, "w");
    assert_non_null(f);
    fclose(f);
    vram_clear_error();
    q = (void *)1;
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, cam, VRAM_KIND_IO, NULL, &q), VRAM_EBUDGET);
    assert_null(q);
    assert_string_equal(vram_last_error(), plain);
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(st.write_failures, 1);
    assert_int_equal(st.reports, 0);
    assert_int_equal(s.calls, 0);
    /* And with a report written, the same sentence. */
    assert_int_equal(unlink(sub), 0);
    q = (void *)1;
    assert_int_equal(vram_pool_alloc(p, 2 * MiB, cam, VRAM_KIND_IO, NULL, &q), VRAM_EBUDGET);
    assert_string_equal(vram_last_error(), plain);
    assert_int_equal(s.calls, 1);
    free_pool(p);
}

/* The callback allocating from the pool: its refusal is counted, never
 * reported (no recursion); unwatching from it is refused. */
static void test_no_recursion(void **state)
{
    (void)state;
    vram_pool *p = make_pool("rec", 64 * MiB, VRAM_POLICY_VMM);
    seen s = {.pool = p, .alloc_in_callback = 1};
    watch(p, &s, 8, NULL);
    void *q;
    assert_int_equal(vram_pool_alloc(p, 1 * GiB, 0, VRAM_KIND_OTHER, NULL, &q), VRAM_ENOMEM);
    assert_contains(vram_last_error(), "cannot allocate 1.00 GiB");
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.alloc_rc, VRAM_ENOMEM);
    assert_int_equal(s.unwatch_rc, VRAM_EBUSY);
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(st.refusals, 2);
    assert_int_equal(st.reports, 1);
    assert_int_equal(st.suppressed, 1);
    assert_int_equal(count_reports(dir), 1);
    free_pool(p);
}

static void test_watch_errors(void **state)
{
    (void)state;
    vram_pool *p = make_pool("errs", 64 * MiB, VRAM_POLICY_VMM);
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    assert_int_equal(o.gpu, VRAM_GPU_OWN);
    assert_int_equal(o.last_events, 64);
    assert_int_equal(o.max_reports, 8);
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EINVAL); /* no directory */
    assert_contains(vram_last_error(), "needs a directory");
    assert_int_equal(vram_pool_oom_watch(NULL, &o), VRAM_EINVAL);
    o.directory = dir;
    o.max_reports = 0;
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EINVAL);
    assert_contains(vram_last_error(), "max_reports");
    o.max_reports = 1;
    o.window_s = 0;
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EINVAL);
    o.window_s = 1;
    o.gpu = VRAM_GPU_ALL; /* a report reads one GPU */
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EINVAL);
    assert_contains(vram_last_error(), "reads one GPU");
    o.gpu = VRAM_GPU_OWN;
    char file[512];
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    o.directory = file;
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EIO);
    assert_contains(vram_last_error(), file);
    char deep[600];
    snprintf(deep, sizeof deep, "%s/a/b/c", dir);
    o.directory = deep;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0); /* parents made */
    assert_int_equal(vram_pool_oom_watch(p, &o), VRAM_EBUSY);
    assert_contains(vram_last_error(), "already has an OOM watch");
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(vram_pool_oom_unwatch(p), 0);
    assert_int_equal(vram_pool_oom_unwatch(p), VRAM_EINVAL);
    assert_int_equal(vram_pool_oom_stats(p, &st), VRAM_EINVAL);
    /* Unwatched: refusals write nothing. */
    void *q;
    assert_int_equal(vram_pool_alloc(p, 1 * GiB, 0, VRAM_KIND_OTHER, NULL, &q), VRAM_ENOMEM);
    assert_int_equal(count_reports(deep), 0);
    /* Watched again, then destroyed with the watch on. */
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
    free_pool(p);
}

/* VRAM_OOM_DIR: pools made from the configuration are watched. */
static void test_config_dir(void **state)
{
    (void)state;
    assert_int_equal(vram_config_set("oom_dir", dir), 0);
    assert_int_equal(vram_config_set("capacity", "64MiB"), 0);
    assert_int_equal(vram_config_set("oom_events", "5"), 0);
    vram_pool *p;
    assert_int_equal(vram_pool_create(NULL, &p), 0);
    void *q;
    assert_int_equal(vram_pool_alloc(p, 1 * GiB, 0, VRAM_KIND_OTHER, NULL, &q), VRAM_ENOMEM);
    assert_int_equal(count_reports(dir), 1);
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(st.reports, 1);
    char last[4096];
    assert_int_equal(vram_pool_oom_last_report(p, last, sizeof last), 0);
    cJSON *j = load_json(last);
    assert_string_equal(cJSON_GetObjectItem(j, "pool")->valuestring, "pool");
    cJSON_Delete(j);
    assert_int_equal(vram_pool_destroy(p), 0);
    /* A directory that cannot be made fails the creation with why. */
    char file[512];
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    assert_int_equal(vram_config_set("oom_dir", file), 0);
    p = (vram_pool *)1;
    assert_int_equal(vram_pool_create(NULL, &p), VRAM_EIO);
    assert_null(p);
    assert_contains(vram_last_error(), "not a directory");
}

/* ---- threads --------------------------------------------------------- */

#define N_THREADS 8
#define PER_THREAD 200

typedef struct targ {
    vram_pool *pool;
    vram_owner owner;
    pthread_barrier_t *barrier;
    int bad;
} targ;

static void *storm(void *arg)
{
    targ *t = arg;
    pthread_barrier_wait(t->barrier);
    for (int i = 0; i < PER_THREAD; i++) {
        void *q = NULL;
        int budget = i & 1;
        int rc = vram_pool_alloc(t->pool, budget ? 3 * GiB : 1 * GiB, t->owner, VRAM_KIND_OTHER,
                                 (vram_stream)(uintptr_t)(t->owner + 1), &q);
        int want = budget ? VRAM_EBUDGET : VRAM_ENOMEM;
        if (rc != want || q || !strstr(vram_last_error(), budget ? "budget of owner" : "cannot allocate"))
            t->bad++;
        /* Some successful traffic in between, into the ring. */
        if (vram_pool_alloc(t->pool, 4 * KiB, t->owner, VRAM_KIND_OTHER, NULL, &q) == 0)
            vram_pool_free(t->pool, q, NULL);
        else
            t->bad++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    vram_pool *p = make_pool("threads", 256 * MiB, VRAM_POLICY_VMM);
    vram_oom_opts o;
    assert_int_equal(vram_oom_opts_init(&o), 0);
    o.directory = dir;
    o.max_reports = 6;
    o.window_s = 3600;
    o.last_events = 32;
    assert_int_equal(vram_pool_oom_watch(p, &o), 0);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, N_THREADS);
    pthread_t th[N_THREADS];
    targ t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        t[i] = (targ){.pool = p, .barrier = &barrier};
        assert_int_equal(vram_owner_create(p, name, 2 * GiB, &t[i].owner), 0);
        pthread_create(&th[i], NULL, storm, &t[i]);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].bad, 0);
    }
    pthread_barrier_destroy(&barrier);
    vram_oom_stats st;
    assert_int_equal(vram_pool_oom_stats(p, &st), 0);
    assert_int_equal(st.refusals, N_THREADS * PER_THREAD);
    assert_int_equal(st.reports, 6);
    assert_int_equal(st.suppressed, N_THREADS * PER_THREAD - 6);
    assert_int_equal(st.write_failures, 0);
    assert_int_equal(count_reports(dir), 6);
    assert_int_equal(count_files(dir), 18);
    /* Every report is whole and ends its events with a refusal. */
    DIR *dd = opendir(dir);
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (!ends_with(e->d_name, ".json") || ends_with(e->d_name, ".snapshot.json"))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        cJSON *j = load_json(path);
        cJSON *ev = cJSON_GetObjectItem(j, "last_events");
        int n = cJSON_GetArraySize(ev);
        assert_true(n > 0 && n <= 32);
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetArrayItem(ev, n - 1), "action")->valuestring,
            "allocate failure");
        cJSON_Delete(j);
    }
    closedir(dd);
    free_pool(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_budget_request_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_filled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_label, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_too_small, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_filled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fragmentation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_and_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ring_wraps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_failure_keeps_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_recursion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
