/* tests/integration/test_monitor.c - the monitor through the public API:
 * manual samples of pools on the simulated backend (owners, kinds, totals);
 * the ring keeping the newest samples when it wraps; the CSV and JSON Lines
 * files written as the format says and parseable (cJSON), alert lines
 * among the samples; without NVML, no GPU figures and the reason instead;
 * the leak verdict on a clean workload, a leaking one, a leak only in the
 * warm-up, and by time when iterations are unknown; fragmentation, budget
 * and growth alerts once per crossing, to the callback, the log and the
 * metrics; the sampler thread's period, start and stop, and pools added,
 * removed and destroyed while it runs from several threads (run under TSan
 * too); and the errors, each with its sentence. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "vramkit.h"

#define MiB (1024ull * 1024ull)

static vram_pool *make_pool(const char *name, vram_policy policy)
{
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.name = name;
    o.policy = policy;
    o.configured_listeners = 0;
    vram_backend *b;
    vram_backend_opts bo = {.capacity = 1024 * MiB};
    assert_int_equal(vram_backend_create("sim", &bo, &b), 0);
    o.backend = b;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

static void destroy_pool(vram_pool *p)
{
    vram_backend *b = vram_pool_backend(p);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
}

static vram_monitor_opts manual_opts(void)
{
    vram_monitor_opts o;
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.manual = 1;
    o.gpu = -1;
    return o;
}

/* A monitor started with `o`, watching pool `p`. */
static vram_monitor *monitor_of(const vram_monitor_opts *o, vram_pool *p)
{
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(o, &m), 0);
    assert_int_equal(vram_monitor_add_pool(m, p), 0);
    return m;
}

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram-monitor-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- samples and the ring ---- */

static void test_sample_fields(void **state)
{
    (void)state;
    vram_pool *p = make_pool("cams", VRAM_POLICY_SEGMENTS);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam07", 64 * MiB, &cam), 0);
    vram_owner idle;
    assert_int_equal(vram_owner_create(p, "idle", 0, &idle), 0);
    void *a, *b;
    assert_int_equal(vram_pool_alloc(p, 3 * MiB, cam, VRAM_KIND_FRAMES, NULL, &a), 0);
    assert_int_equal(vram_pool_alloc(p, 1000, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, NULL, &b), 0);
    vram_monitor_opts o = manual_opts();
    vram_monitor *m = monitor_of(&o, p);
    assert_int_equal(vram_monitor_sample(m, 3), 0);
    vram_sample *s;
    assert_int_equal(vram_monitor_sample_get(m, 0, &s), 0);
    assert_int_equal(s->seq, 0);
    assert_int_equal(s->iteration, 3);
    assert_int_equal(s->contexts, 0);
    assert_true(s->time_s > 1.7e9);
    assert_true(s->elapsed_s >= 0 && s->elapsed_s < 5);
    assert_null(s->gpu);
    assert_non_null(strstr(s->gpu_unavailable, "none"));
    assert_int_equal(s->n_pools, 1);
    const vram_sample_pool *sp = &s->pools[0];
    assert_string_equal(sp->pool, "cams");
    assert_int_equal(sp->live_bytes, 3 * MiB + 1000);
    assert_int_equal(sp->peak_live_bytes, 3 * MiB + 1000);
    assert_true(sp->reserved_bytes >= sp->live_bytes);
    assert_int_equal(sp->kind_live_bytes[VRAM_KIND_FRAMES], 3 * MiB);
    assert_int_equal(sp->kind_live_bytes[VRAM_KIND_WEIGHTS], 1000);
    assert_int_equal(sp->kind_live_bytes[VRAM_KIND_IO], 0);
    /* The idle owner has neither live nor peak bytes: left out. */
    assert_int_equal(sp->n_owners, 2);
    assert_string_equal(sp->owners[0].owner, "default");
    assert_int_equal(sp->owners[0].live_bytes, 1000);
    assert_string_equal(sp->owners[1].owner, "cam07");
    assert_int_equal(sp->owners[1].live_bytes, 3 * MiB);
    assert_int_equal(sp->owners[1].budget_bytes, 64 * MiB);
    vram_sample_free(s);
    /* A sample of the sum and the copy outlive the monitor's changes. */
    assert_int_equal(vram_pool_free(p, a, NULL), 0);
    assert_int_equal(vram_monitor_sample(m, 4), 0);
    assert_int_equal(vram_monitor_sample_get(m, 1, &s), 0);
    assert_int_equal(s->pools[0].live_bytes, 1000);
    assert_int_equal(s->pools[0].peak_live_bytes, 3 * MiB + 1000);
    assert_int_equal(s->pools[0].owners[1].live_bytes, 0);
    assert_int_equal(s->pools[0].owners[1].peak_live_bytes, 3 * MiB);
    vram_sample_free(s);
    assert_int_equal(vram_monitor_remove_pool(m, p), 0);
    assert_int_equal(vram_pool_free(p, b, NULL), 0);
    destroy_pool(p);
    /* Its samples stay. */
    assert_int_equal(vram_monitor_sample(m, 5), 0);
    assert_int_equal(vram_monitor_sample_get(m, 2, &s), 0);
    assert_int_equal(s->n_pools, 0);
    vram_sample_free(s);
    assert_int_equal(vram_monitor_sample_get(m, 1, &s), 0);
    assert_string_equal(s->pools[0].pool, "cams");
    vram_sample_free(s);
    assert_int_equal(vram_monitor_stop(m), 0);
}

static void test_ring_wrap(void **state)
{
    (void)state;
    vram_pool *p = make_pool("ring", VRAM_POLICY_VMM);
    vram_monitor_opts o = manual_opts();
    o.ring_samples = 5;
    vram_monitor *m = monitor_of(&o, p);
    void *ptrs[12];
    for (int i = 0; i < 12; i++) {
        assert_int_equal(vram_pool_alloc(p, 4096, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, NULL,
                                         &ptrs[i]),
                         0);
        assert_int_equal(vram_monitor_sample(m, 100 + i), 0);
        uint64_t total;
        uint32_t kept;
        assert_int_equal(vram_monitor_sample_count(m, &total, &kept), 0);
        assert_int_equal(total, (uint64_t)i + 1);
        assert_int_equal(kept, i + 1 < 5 ? i + 1 : 5);
    }
    for (uint32_t i = 0; i < 5; i++) {
        vram_sample *s;
        assert_int_equal(vram_monitor_sample_get(m, i, &s), 0);
        assert_int_equal(s->seq, 7 + i);
        assert_int_equal(s->iteration, 107 + i);
        assert_int_equal(s->pools[0].live_bytes, 4096ull * (8 + i));
        vram_sample_free(s);
    }
    vram_sample *s = (vram_sample *)1;
    assert_int_equal(vram_monitor_sample_get(m, 5, &s), VRAM_EINVAL);
    assert_null(s);
    assert_non_null(strstr(vram_last_error(), "keeps 5 samples: there is no sample 5"));
    assert_int_equal(vram_monitor_stop(m), 0);
    for (int i = 0; i < 12; i++)
        assert_int_equal(vram_pool_free(p, ptrs[i], NULL), 0);
    destroy_pool(p);
}

/* ---- files ---- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

typedef struct alerts_seen {
    pthread_mutex_t lock;
    int n[VRAM_ALERT_TYPE_COUNT][VRAM_ALERT_LEVEL_COUNT];
    char last[512];
} alerts_seen;

static void on_alert(void *ctx, const vram_alert *a)
{
    alerts_seen *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->n[a->type][a->level]++;
    snprintf(s->last, sizeof s->last, "%s", a->message);
    pthread_mutex_unlock(&s->lock);
}

static int log_lines;
static char log_last[1024];
static void on_log(void *ctx, vram_log_level level, const char *line)
{
    (void)ctx;
    if (level <= VRAM_LOG_WARN && strstr(line, "monitor alert")) {
        log_lines++;
        snprintf(log_last, sizeof log_last, "%s", line);
    }
}

/* Split a CSV line in place, unquoting quoted fields. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *r = line;
    while (n < max) {
        char *w = r;
        f[n++] = w;
        if (*r == '"') {
            for (r++; *r; r++) {
                if (*r == '"' && r[1] == '"')
                    *w++ = *r++;
                else if (*r == '"')
                    break;
                else
                    *w++ = *r;
            }
            if (*r == '"')
                r++;
        } else {
            while (*r && *r != ',')
                *w++ = *r++;
        }
        int more = *r == ',';
        *w = 0;
        if (!more)
            break;
        r++;
    }
    return n;
}

static void test_files(void **state)
{
    (void)state;
    char csv[128], jsonl[128];
    snprintf(csv, sizeof csv, "%s/s.csv", tmpdir);
    snprintf(jsonl, sizeof jsonl, "%s/s.jsonl", tmpdir);
    vram_pool *p = make_pool("files, \"quoted\"", VRAM_POLICY_SEGMENTS);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam07", 10000, &cam), 0);
    vram_monitor_opts o = manual_opts();
    o.csv_path = csv;
    o.jsonl_path = jsonl;
    /* GPU 0: on a machine without NVML the reason goes in the files, on one
     * with a GPU its figures. */
    o.gpu = 0;
    int gpus = 0, nvml = vram_gpu_count(&gpus) == 0 && gpus > 0;
    alerts_seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
    o.on_alert = on_alert;
    o.alert_ctx = &seen;
    vram_monitor *m = monitor_of(&o, p);
    void *a = NULL;
    for (int i = 0; i < 4; i++) {
        if (i == 1) /* 95% of the budget: one budget alert */
            assert_int_equal(vram_pool_alloc(p, 9500, cam, VRAM_KIND_ACTIVATIONS, NULL, &a), 0);
        if (i == 3) {
            assert_int_equal(vram_pool_free(p, a, NULL), 0);
        }
        assert_int_equal(vram_monitor_sample(m, i), 0);
    }
    assert_int_equal(vram_monitor_stop(m), 0);
    destroy_pool(p);
    assert_int_equal(seen.n[VRAM_ALERT_BUDGET][VRAM_ALERT_LEVEL_WARNING], 1);
    assert_int_equal(seen.n[VRAM_ALERT_BUDGET][VRAM_ALERT_LEVEL_CLEAR], 1);

    /* CSV: the header exactly, then per sample a pool row, owner and kind rows. */
    char *text = read_all(csv);
    const char *header = "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,"
                         "reserved_bytes,pending_bytes,fragmentation_ratio,largest_free_bytes,"
                         "gpu_used_bytes,gpu_total_bytes\n";
    assert_memory_equal(text, header, strlen(header));
    enum { F_TIME, F_ELAPSED, F_ITER, F_POOL, F_OWNER, F_KIND, F_LIVE, F_PEAK, F_RESERVED,
           F_PENDING, F_FRAG, F_LARGEST, F_GPU_USED, F_GPU_TOTAL, F_N };
    int rows = 0, pool_rows = 0, owner_rows = 0, kind_rows = 0;
    double pool_fields[4][F_LARGEST - F_LIVE + 1]; /* per sample, for the JSON Lines */
    char *save = NULL;
    for (char *line = strtok_r(text + strlen(header), "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        rows++;
        char *f[16];
        int nf = split_csv(line, f, 16);
        assert_int_equal(nf, F_N);
        assert_true(atof(f[F_TIME]) > 1.7e9);
        assert_true(atoi(f[F_ITER]) >= 0 && atoi(f[F_ITER]) <= 3);
        assert_string_equal(f[F_POOL], "files, \"quoted\"");
        assert_true(*f[F_LIVE]);
        if (!*f[F_OWNER] && !*f[F_KIND]) {
            assert_true(pool_rows < 4);
            for (int k = F_LIVE; k <= F_LARGEST; k++) {
                assert_true(*f[k]);
                pool_fields[pool_rows][k - F_LIVE] = atof(f[k]);
            }
            pool_rows++;
            if (nvml)
                assert_true(atof(f[F_GPU_USED]) > 0 && atof(f[F_GPU_TOTAL]) >= atof(f[F_GPU_USED]));
            else
                assert_true(!*f[F_GPU_USED] && !*f[F_GPU_TOTAL]); /* no NVML: GPU columns empty */
        } else {
            /* An owner's or a kind's row: its live bytes, nothing else. */
            for (int k = F_PEAK; k <= F_GPU_TOTAL; k++)
                assert_true(!*f[k]);
            if (*f[F_OWNER]) {
                owner_rows++;
                assert_string_equal(f[F_OWNER], "cam07");
            } else {
                kind_rows++;
                assert_string_equal(f[F_KIND], "activations");
            }
        }
    }
    assert_int_equal(pool_rows, 4);
    assert_int_equal(owner_rows, 3); /* from the first allocation on */
    assert_int_equal(kind_rows, 3);
    assert_int_equal(rows, 10);
    free(text);

    /* JSON Lines: every line an object; 4 samples and 2 alerts between them. */
    text = read_all(jsonl);
    int samples = 0, alerts = 0;
    save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const char *type = cJSON_GetObjectItem(j, "type")->valuestring;
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "time_s")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "elapsed_s")));
        if (strcmp(type, "sample") == 0) {
            assert_int_equal(cJSON_GetObjectItem(j, "iteration")->valueint, samples);
            assert_int_equal(cJSON_GetObjectItem(j, "contexts")->valueint, 0);
            if (nvml) {
                cJSON *g = cJSON_GetObjectItem(j, "gpu");
                assert_true(cJSON_IsObject(g));
                assert_true(cJSON_GetObjectItem(g, "total_bytes")->valuedouble > 0);
                assert_null(cJSON_GetObjectItem(j, "gpu_unavailable"));
            } else {
                assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "gpu")));
                const char *why = cJSON_GetObjectItem(j, "gpu_unavailable")->valuestring;
                assert_non_null(strstr(why, "NVML"));
            }
            cJSON *pools = cJSON_GetObjectItem(j, "pools");
            assert_int_equal(cJSON_GetArraySize(pools), 1);
            cJSON *pj = cJSON_GetArrayItem(pools, 0);
            assert_string_equal(cJSON_GetObjectItem(pj, "pool")->valuestring, "files, \"quoted\"");
            static const char *keys[] = {"live_bytes", "peak_live_bytes", "reserved_bytes",
                                         "pending_bytes", "fragmentation_ratio",
                                         "largest_free_bytes"};
            /* The same fields, in the same order, as the sample's CSV row. */
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
                assert_true(cJSON_IsNumber(cJSON_GetObjectItem(pj, keys[k])));
                assert_true(cJSON_GetObjectItem(pj, keys[k])->valuedouble ==
                            pool_fields[samples][k]);
            }
            double live = cJSON_GetObjectItem(pj, "live_bytes")->valuedouble;
            assert_true(live == (samples == 1 || samples == 2 ? 9500 : 0));
            cJSON *owners = cJSON_GetObjectItem(pj, "owners");
            cJSON *kinds = cJSON_GetObjectItem(pj, "kinds");
            assert_int_equal(cJSON_GetArraySize(owners), samples ? 1 : 0);
            assert_int_equal(cJSON_GetArraySize(kinds), samples ? 1 : 0);
            if (samples) {
                cJSON *ow = cJSON_GetArrayItem(owners, 0);
                assert_string_equal(cJSON_GetObjectItem(ow, "owner")->valuestring, "cam07");
                assert_true(cJSON_GetObjectItem(ow, "budget_bytes")->valuedouble == 10000);
                assert_true(cJSON_GetObjectItem(ow, "peak_live_bytes")->valuedouble == 9500);
                cJSON *kd = cJSON_GetArrayItem(kinds, 0);
                assert_string_equal(cJSON_GetObjectItem(kd, "kind")->valuestring, "activations");
            }
            samples++;
        } else {
            assert_string_equal(type, "alert");
            assert_string_equal(cJSON_GetObjectItem(j, "alert")->valuestring, "budget");
            assert_string_equal(cJSON_GetObjectItem(j, "owner")->valuestring, "cam07");
            assert_string_equal(cJSON_GetObjectItem(j, "pool")->valuestring, "files, \"quoted\"");
            const char *level = cJSON_GetObjectItem(j, "level")->valuestring;
            assert_string_equal(level, alerts ? "clear" : "warning");
            assert_int_equal(cJSON_GetObjectItem(j, "iteration")->valueint, alerts ? 3 : 1);
            assert_true(fabs(cJSON_GetObjectItem(j, "value")->valuedouble -
                             (alerts ? 0.0 : 0.95)) < 1e-12);
            assert_true(fabs(cJSON_GetObjectItem(j, "threshold")->valuedouble - 0.9) < 1e-12);
            assert_non_null(strstr(cJSON_GetObjectItem(j, "message")->valuestring, "cam07"));
            /* It follows the sample that raised it. */
            assert_int_equal(samples, alerts ? 4 : 2);
            alerts++;
        }
        cJSON_Delete(j);
    }
    assert_int_equal(samples, 4);
    assert_int_equal(alerts, 2);
    free(text);
}

static void test_file_errors(void **state)
{
    (void)state;
    vram_monitor_opts o = manual_opts();
    o.csv_path = "/nonexistent-dir/x.csv";
    vram_monitor *m = (vram_monitor *)1;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EIO);
    assert_null(m);
    assert_non_null(strstr(vram_last_error(), "/nonexistent-dir/x.csv"));
    o.csv_path = NULL;
    o.jsonl_path = "/nonexistent-dir/x.jsonl";
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "cannot create the monitor's file /nonexistent-dir/x.jsonl"));
    /* A full device: writes fail, the sample says nothing, stop reports it. */
    if (access("/dev/full", W_OK) == 0) {
        o.jsonl_path = "/dev/full";
        assert_int_equal(vram_monitor_start(&o, &m), 0);
        vram_monitor_sample(m, 0);
        assert_int_equal(vram_monitor_stop(m), VRAM_EIO);
        assert_non_null(strstr(vram_last_error(), "/dev/full"));
    }
}

/* ---- the verdict ---- */

static void test_trend(void **state)
{
    (void)state;
    vram_pool *p = make_pool("leaky", VRAM_POLICY_VMM);
    vram_pool *q = make_pool("clean", VRAM_POLICY_VMM);
    vram_monitor_opts o = manual_opts();
    o.ring_samples = 1000;
    vram_monitor *m = monitor_of(&o, p);
    assert_int_equal(vram_monitor_add_pool(m, q), 0);
    vram_trend t;
    assert_int_equal(vram_monitor_trend(m, "leaky", &t), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "no sample of a pool named \"leaky\""));
    /* Too few samples: no verdict. */
    assert_int_equal(vram_monitor_sample(m, 0), 0);
    assert_int_equal(vram_monitor_trend(m, "leaky", &t), 0);
    assert_int_equal(t.samples, 1);
    assert_true(isnan(t.slope_bytes_per_iteration) && !t.growing);
    void **kept = calloc(400, sizeof *kept);
    assert_non_null(kept);
    size_t n_kept = 0;
    for (int it = 1; it < 400; it++) {
        /* clean: allocate and free within the iteration; leaky: keeps 1 KiB
         * every 4th iteration. */
        void *x;
        assert_int_equal(vram_pool_alloc(q, 1 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL, &x), 0);
        assert_int_equal(vram_pool_free(q, x, NULL), 0);
        if (it % 4 == 0)
            assert_int_equal(vram_pool_alloc(p, 1024, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL,
                                             &kept[n_kept++]),
                             0);
        assert_int_equal(vram_monitor_sample(m, it), 0);
    }
    assert_int_equal(vram_monitor_trend(m, "leaky", &t), 0);
    assert_int_equal(t.samples, 400 - 80); /* 20% warm-up */
    assert_true(t.growing);
    assert_true(fabs(t.slope_bytes_per_iteration - 256.0) < 2.0);
    assert_true(t.confidence > 0.999);
    assert_true(t.t_statistic > 100);
    assert_true(t.r2 > 0.99);
    assert_true(t.slope_bytes_per_s > 0);
    assert_true(t.slope_stderr_bytes_per_s > 0);
    assert_int_equal(vram_monitor_trend(m, "clean", &t), 0);
    assert_false(t.growing);
    assert_true(t.slope_bytes_per_iteration == 0.0);
    assert_true(t.confidence == 0.0);
    /* All pools summed: growing, at the leaky one's slope. */
    assert_int_equal(vram_monitor_trend(m, NULL, &t), 0);
    assert_true(t.growing);
    assert_true(fabs(t.slope_bytes_per_iteration - 256.0) < 2.0);
    /* A growth alert was raised once for the leaky pool, none for the clean one. */
    uint64_t n;
    assert_int_equal(vram_monitor_alert_count(m, VRAM_ALERT_GROWTH, VRAM_ALERT_LEVEL_WARNING, &n), 0);
    assert_int_equal(n, 1);
    /* A higher threshold: level. */
    assert_int_equal(vram_monitor_stop(m), 0);
    o.growth_bytes_per_iteration = 300;
    assert_int_equal(vram_monitor_start(&o, &m), 0);
    assert_int_equal(vram_monitor_add_pool(m, p), 0);
    for (int it = 0; it < 50; it++) {
        if (it % 4 == 0)
            assert_int_equal(vram_pool_alloc(p, 1024, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL,
                                             &kept[n_kept++]),
                             0);
        assert_int_equal(vram_monitor_sample(m, it), 0);
    }
    assert_int_equal(vram_monitor_trend(m, "leaky", &t), 0);
    assert_true(t.slope_bytes_per_iteration > 200 && !t.growing);
    assert_int_equal(vram_monitor_stop(m), 0);
    for (size_t i = 0; i < n_kept; i++)
        assert_int_equal(vram_pool_free(p, kept[i], NULL), 0);
    free(kept);
    destroy_pool(p);
    destroy_pool(q);
}

static void test_trend_warmup_and_time(void **state)
{
    (void)state;
    vram_pool *p = make_pool("warm", VRAM_POLICY_VMM);
    vram_monitor_opts o = manual_opts();
    o.warmup_fraction = 0.25;
    vram_monitor *m = monitor_of(&o, p);
    /* Growth during the first 20 of 100 samples only (caches filling): level. */
    void *blocks[20];
    for (int it = 0; it < 100; it++) {
        if (it < 20)
            assert_int_equal(vram_pool_alloc(p, 1 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, NULL,
                                             &blocks[it]),
                             0);
        assert_int_equal(vram_monitor_sample(m, it), 0);
    }
    vram_trend t;
    assert_int_equal(vram_monitor_trend(m, "warm", &t), 0);
    assert_int_equal(t.samples, 75);
    assert_false(t.growing);
    assert_true(t.slope_bytes_per_iteration == 0.0);
    assert_int_equal(vram_monitor_stop(m), 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(vram_pool_free(p, blocks[i], NULL), 0);

    /* No iterations: the slope over time against the per-minute threshold. */
    o = manual_opts();
    o.warmup_fraction = 0;
    o.growth_bytes_per_minute = 1024;
    assert_int_equal(vram_monitor_start(&o, &m), 0);
    assert_int_equal(vram_monitor_add_pool(m, p), 0);
    void *grow[30];
    for (int i = 0; i < 30; i++) {
        assert_int_equal(vram_pool_alloc(p, 1 * MiB, VRAM_OWNER_DEFAULT, VRAM_KIND_WEIGHTS, NULL,
                                         &grow[i]),
                         0);
        assert_int_equal(vram_monitor_sample(m, -1), 0);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(vram_monitor_trend(m, "warm", &t), 0);
    assert_true(isnan(t.slope_bytes_per_iteration));
    assert_true(t.slope_bytes_per_s > 1e8); /* 1 MiB per ~2 ms */
    assert_true(t.confidence > 0.999);
    assert_true(t.growing);
    assert_int_equal(vram_monitor_stop(m), 0);
    for (int i = 0; i < 30; i++)
        assert_int_equal(vram_pool_free(p, grow[i], NULL), 0);
    destroy_pool(p);
}

/* ---- alerts through pools, the log and the metrics ---- */

static void test_fragmentation_alert_and_metrics(void **state)
{
    (void)state;
    vram_log_set_handler(on_log, NULL);
    log_lines = 0;
    vram_pool *p = make_pool("frag", VRAM_POLICY_SEGMENTS);
    vram_monitor_opts o = manual_opts();
    alerts_seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
    o.on_alert = on_alert;
    o.alert_ctx = &seen;
    vram_monitor *m = monitor_of(&o, p);
    /* Eight 256 KiB blocks fill one 2 MiB segment; freeing every other one
     * leaves separate holes: three free (the last is pending until the next
     * operation on its stream), fragmentation 1 - 256K / 768K = 0.667. */
    void *b[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(vram_pool_alloc(p, 256 * 1024, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL, &b[i]),
                         0);
    assert_int_equal(vram_monitor_sample(m, 0), 0);
    for (int i = 0; i < 8; i += 2)
        assert_int_equal(vram_pool_free(p, b[i], NULL), 0);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_true(st.fragmentation_ratio > 0.5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(vram_monitor_sample(m, 1 + i), 0);
    assert_int_equal(seen.n[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_CRITICAL], 1);
    assert_int_equal(seen.n[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_WARNING], 0);
    assert_non_null(strstr(seen.last, "pool \"frag\": fragmentation 0.667 is above the critical "
                                      "threshold of 0.500"));
    assert_int_equal(log_lines, 1);
    assert_non_null(strstr(log_last, "monitor alert (fragmentation, critical)"));
    vram_buffer out = {0};
    assert_int_equal(vram_monitor_print_metrics(m, vram_write_buffer, &out, 0), 0);
    char *text = out.data;
    assert_non_null(strstr(text, "vram_monitor_alerts_total{alert=\"fragmentation\",level=\"critical\"} 1\n"));
    assert_non_null(strstr(text, "vram_monitor_alerts_active{alert=\"fragmentation\",level=\"critical\"} 1\n"));
    assert_non_null(strstr(text, "vram_monitor_samples_total 6\n"));
    assert_non_null(strstr(text, "vram_monitor_leak_suspected{pool=\"frag\"} 0\n"));
    /* Every sample line belongs to a family announced with HELP and TYPE. */
    char *save = NULL;
    char family[128] = "";
    int families = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            families++;
            sscanf(line + 7, "%127s", family);
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_memory_equal(line + 7, family, strlen(family));
            continue;
        }
        assert_memory_equal(line, family, strlen(family));
        assert_true(line[strlen(family)] == ' ' || line[strlen(family)] == '{');
    }
    assert_int_equal(families, 11);
    vram_buffer_free(&out);
    /* Fill the holes: it clears, once. */
    for (int i = 0; i < 8; i += 2)
        assert_int_equal(vram_pool_alloc(p, 256 * 1024, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL, &b[i]),
                         0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(vram_monitor_sample(m, 10 + i), 0);
    assert_int_equal(seen.n[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_CLEAR], 1);
    uint64_t n;
    assert_int_equal(vram_monitor_alert_count(m, VRAM_ALERT_FRAGMENTATION, VRAM_ALERT_LEVEL_CLEAR, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(vram_monitor_print_metrics(m, vram_write_buffer, &out, 0), 0);
    assert_non_null(strstr(out.data, "vram_monitor_alerts_active{alert=\"fragmentation\",level=\"critical\"} 0\n"));
    vram_buffer_free(&out);
    assert_int_equal(vram_monitor_stop(m), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(vram_pool_free(p, b[i], NULL), 0);
    destroy_pool(p);
    vram_log_set_handler(NULL, NULL);
}

/* ---- the thread ---- */

static void test_thread_period(void **state)
{
    (void)state;
    vram_pool *p = make_pool("tick", VRAM_POLICY_VMM);
    vram_monitor_opts o;
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    assert_true(o.period_s == 1.0);
    o.period_s = 0.02;
    o.gpu = -1;
    vram_monitor *m = monitor_of(&o, p);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    uint64_t total;
    assert_int_equal(vram_monitor_sample_count(m, &total, NULL), 0);
    /* 300 ms at 20 ms: about 15 (the first at once); fewer on a loaded
     * machine (ticks the thread missed are skipped), never more. */
    assert_true(total >= 4 && total <= 18);
    vram_sample *first, *last;
    assert_int_equal(vram_monitor_sample_get(m, 1, &first), 0);
    assert_int_equal(vram_monitor_sample_get(m, (uint32_t)total - 1, &last), 0);
    double period = (last->elapsed_s - first->elapsed_s) / (double)(total - 2);
    assert_true(period > 0.018 && period < 0.1);
    assert_int_equal(last->iteration, -1);
    vram_sample_free(first);
    vram_sample_free(last);
    /* Stop returns promptly, mid-period. */
    o.period_s = 30;
    vram_monitor *slow;
    assert_int_equal(vram_monitor_start(&o, &slow), 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(vram_monitor_stop(slow), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < 1.0);
    assert_int_equal(vram_monitor_stop(m), 0);
    destroy_pool(p);
}

typedef struct churn_arg {
    vram_monitor *m;
    int id;
} churn_arg;

static void *churn(void *arg)
{
    churn_arg *c = arg;
    char name[32];
    for (int r = 0; r < 30; r++) {
        snprintf(name, sizeof name, "churn%d.%d", c->id, r);
        vram_pool *p = make_pool(name, r % 2 ? VRAM_POLICY_SEGMENTS : VRAM_POLICY_VMM);
        vram_owner o;
        assert_int_equal(vram_owner_create(p, "w", 1 * MiB, &o), 0);
        assert_int_equal(vram_monitor_add_pool(c->m, p), 0);
        void *x[8];
        for (int i = 0; i < 8; i++)
            assert_int_equal(vram_pool_alloc(p, 100000, o, VRAM_KIND_IO, NULL, &x[i]), 0);
        if (c->id == 0) {
            assert_int_equal(vram_monitor_sample(c->m, r), 0);
        } else {
            vram_trend t;
            (void)vram_monitor_trend(c->m, NULL, &t);
        }
        for (int i = 0; i < 8; i++)
            assert_int_equal(vram_pool_free(p, x[i], NULL), 0);
        assert_int_equal(vram_monitor_remove_pool(c->m, p), 0);
        destroy_pool(p); /* at once: the monitor no longer touches it */
    }
    return NULL;
}

static void test_thread_pools_churn(void **state)
{
    (void)state;
    vram_monitor_opts o;
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.period_s = 0.001;
    o.gpu = -1;
    o.ring_samples = 64;
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(&o, &m), 0);
    vram_pool *stay = make_pool("stay", VRAM_POLICY_VMM);
    assert_int_equal(vram_monitor_add_pool(m, stay), 0);
    assert_int_equal(vram_monitor_add_pool(m, stay), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "already watches pool \"stay\""));
    vram_pool *twin = make_pool("stay", VRAM_POLICY_VMM);
    assert_int_equal(vram_monitor_add_pool(m, twin), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "another pool named \"stay\""));
    destroy_pool(twin);
    uint64_t before; /* samples taken before "stay" was watched: the first has no pool */
    assert_int_equal(vram_monitor_sample_count(m, &before, NULL), 0);
    pthread_t th[4];
    churn_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (churn_arg){.m = m, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, churn, &args[i]), 0);
    }
    vram_buffer out = {0};
    for (int i = 0; i < 20; i++) {
        vram_buffer_free(&out);
        assert_int_equal(vram_monitor_print_metrics(m, vram_write_buffer, &out, 0), 0);
        vram_sample *s;
        uint32_t kept;
        uint64_t taken;
        assert_int_equal(vram_monitor_sample_count(m, &taken, &kept), 0);
        if (kept && taken > before) { /* the thread may not have run yet on a loaded machine */
            assert_int_equal(vram_monitor_sample_get(m, kept - 1, &s), 0);
            assert_true(s->n_pools >= 1);
            vram_sample_free(s);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    vram_buffer_free(&out);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    uint64_t total;
    assert_int_equal(vram_monitor_sample_count(m, &total, NULL), 0);
    assert_true(total >= 30); /* the 30 manual samples at least */
    assert_int_equal(vram_monitor_remove_pool(m, stay), 0);
    assert_int_equal(vram_monitor_remove_pool(m, stay), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "does not watch pool \"stay\""));
    assert_int_equal(vram_monitor_stop(m), 0);
    destroy_pool(stay);
}

/* ---- options and errors ---- */

static void test_opts_errors(void **state)
{
    (void)state;
    vram_monitor *m = (vram_monitor *)1;
    vram_monitor_opts o;
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    assert_true(o.frag_warning == 0.3 && o.frag_critical == 0.5);
    assert_true(o.budget_warning == 0.9);
    assert_int_equal(o.ring_samples, 3600);
    assert_int_equal(o.gpu, 0);
    o.period_s = 0;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EINVAL);
    assert_null(m);
    assert_non_null(strstr(vram_last_error(), "period 0 s"));
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.frag_warning = 0.6;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "warning 0.6"));
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.ring_samples = 2;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "not 2"));
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.warmup_fraction = 1;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EINVAL);
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.clear_ratio = 1.5;
    assert_int_equal(vram_monitor_start(&o, &m), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "clear ratio 1.5"));
    /* From the environment. */
    assert_int_equal(vram_config_set("monitor_gpu", "none"), 0);
    assert_int_equal(vram_config_set("monitor_frag_warning", "0.25"), 0);
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    assert_int_equal(o.gpu, -1);
    assert_true(o.frag_warning == 0.25);
    assert_int_equal(vram_config_set("monitor_gpu", "0000:19:00.0"), 0);
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    assert_string_equal(o.gpu_pci_bus_id, "0000:19:00.0");
    assert_int_equal(vram_config_set("monitor_frag_warning", NULL), 0);
    assert_int_equal(vram_config_set("monitor_gpu", NULL), 0);
    assert_int_equal(vram_monitor_sample(NULL, 0), VRAM_EINVAL);
    assert_int_equal(vram_monitor_stop(NULL), 0);
    assert_string_equal(vram_alert_type_name(VRAM_ALERT_GROWTH), "growth");
    assert_string_equal(vram_alert_level_name(VRAM_ALERT_LEVEL_CLEAR), "clear");
    /* Without NVML, a GPU read names the reason; default opts start. */
    assert_int_equal(vram_monitor_start(NULL, &m), 0);
    assert_int_equal(vram_monitor_sample(m, 0), 0);
    vram_sample *s;
    assert_int_equal(vram_monitor_sample_get(m, 0, &s), 0);
    int gpus = 0;
    if (vram_gpu_count(&gpus) != 0) {
        assert_null(s->gpu);
        assert_non_null(strstr(s->gpu_unavailable, "NVML"));
    }
    vram_sample_free(s);
    assert_int_equal(vram_monitor_stop(m), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_fields),
        cmocka_unit_test(test_ring_wrap),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_trend),
        cmocka_unit_test(test_trend_warmup_and_time),
        cmocka_unit_test(test_fragmentation_alert_and_metrics),
        cmocka_unit_test(test_thread_period),
        cmocka_unit_test(test_thread_pools_churn),
        cmocka_unit_test(test_opts_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
