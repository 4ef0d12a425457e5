/* tests/gpu/test_gpu_monitor.c - the monitor on a real GPU, with NVML: the
 * GPU in each sample is the device vramkit opened (same PCI bus id, name
 * and total memory as CUDA reports), its used memory is real (within the
 * total, and rising by at least what a pool maps on the vmm backend, by
 * less than twice that), this process is among NVML's processes where
 * NVML lists them and the PID namespace lets us match it, the count of
 * CUDA contexts vramkit holds follows vram_device_open/close, the JSON
 * Lines and CSV carry the GPU's figures, and the sampler thread reads the
 * GPU at its period. Needs a GPU; registered with -DVRAM_GPU_TESTS=ON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "vramkit.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

static vram_device *dev;
static vram_device_info info;

static int setup(void **state)
{
    (void)state;
    if (vram_device_open(0, NULL, &dev) != 0) {
        fprintf(stderr, "no GPU: %s\n", vram_last_error());
        return -1;
    }
    return vram_device_info_get(dev, &info) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return vram_device_close(dev) == 0 ? 0 : -1;
}

static vram_monitor_opts gpu_opts(void)
{
    vram_monitor_opts o;
    assert_int_equal(vram_monitor_opts_init(&o), 0);
    o.manual = 1;
    o.gpu_pci_bus_id = info.pci_bus_id;
    return o;
}

static void check_gpu(const vram_sample *s)
{
    assert_non_null(s->gpu);
    assert_null(s->gpu_unavailable);
    const vram_sample_gpu *g = s->gpu;
    assert_true(g->index >= 0);
    assert_non_null(strstr(g->name, "NVIDIA"));
    /* NVML's total and CUDA's agree within 2% (the driver's reserve). */
    double ratio = (double)g->total_bytes / (double)info.total_bytes;
    assert_true(ratio > 0.98 && ratio < 1.02);
    assert_true(g->used_bytes > 0 && g->used_bytes <= g->total_bytes);
    assert_int_equal(s->contexts, 1); /* the device opened in setup */
}

static void test_gpu_fields(void **state)
{
    (void)state;
    assert_int_equal(vram_device_contexts(), 1);
    char jsonl[] = "/tmp/vram-gpu-monitor-XXXXXX";
    int fd = mkstemp(jsonl);
    assert_true(fd >= 0);
    close(fd);
    char csv[64];
    snprintf(csv, sizeof csv, "%s.csv", jsonl);
    vram_monitor_opts o = gpu_opts();
    o.jsonl_path = jsonl;
    o.csv_path = csv;
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(&o, &m), 0);

    vram_backend *b;
    vram_backend_opts bo = {.device = dev};
    assert_int_equal(vram_backend_create("vmm", &bo, &b), 0);
    vram_pool_opts po;
    assert_int_equal(vram_pool_opts_init(&po), 0);
    po.name = "gpu";
    po.backend = b;
    po.configured_listeners = 0;
    po.retain_min = 0;
    po.decay_ms = 0;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&po, &p), 0);
    assert_int_equal(vram_monitor_add_pool(m, p), 0);

    assert_int_equal(vram_monitor_sample(m, 0), 0);
    void *x;
    assert_int_equal(vram_pool_alloc(p, 1 * GiB, VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS, NULL, &x),
                     0);
    assert_int_equal(vram_monitor_sample(m, 1), 0);
    vram_sample *before, *after;
    assert_int_equal(vram_monitor_sample_get(m, 0, &before), 0);
    assert_int_equal(vram_monitor_sample_get(m, 1, &after), 0);
    check_gpu(before);
    check_gpu(after);
    uint64_t grew = after->gpu->used_bytes - before->gpu->used_bytes;
    fprintf(stderr, "GPU %s: total %llu, used %llu -> %llu (+%llu for a 1 GiB block), %u processes\n",
            after->gpu->name, (unsigned long long)after->gpu->total_bytes,
            (unsigned long long)before->gpu->used_bytes, (unsigned long long)after->gpu->used_bytes,
            (unsigned long long)grew, after->gpu->n_processes);
    assert_true(after->gpu->used_bytes > before->gpu->used_bytes);
    assert_true(grew >= 1 * GiB && grew < 2 * GiB);
    assert_int_equal(after->pools[0].live_bytes, 1 * GiB);
    if (after->gpu->processes_known) {
        assert_true(after->gpu->n_processes >= 1);
        for (unsigned i = 0; i < after->gpu->n_processes; i++) {
            const vram_gpu_process *pr = &after->gpu->processes[i];
            if (pr->pid == (unsigned)getpid() && pr->used_bytes != VRAM_GPU_BYTES_UNKNOWN)
                assert_true(pr->used_bytes >= 1 * GiB);
        }
    }
    vram_sample_free(before);
    vram_sample_free(after);

    assert_int_equal(vram_pool_free(p, x, NULL), 0);
    assert_int_equal(vram_monitor_remove_pool(m, p), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);
    assert_int_equal(vram_monitor_stop(m), 0);

    /* The files carry the GPU. */
    FILE *f = fopen(jsonl, "r");
    assert_non_null(f);
    char line[65536];
    int samples = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        if (strcmp(cJSON_GetObjectItem(j, "type")->valuestring, "sample") == 0) {
            cJSON *g = cJSON_GetObjectItem(j, "gpu");
            assert_true(cJSON_IsObject(g));
            assert_null(cJSON_GetObjectItem(j, "gpu_unavailable"));
            assert_true(cJSON_GetObjectItem(g, "total_bytes")->valuedouble > 1e9);
            assert_true(cJSON_GetObjectItem(g, "used_bytes")->valuedouble > 0);
            assert_non_null(strstr(cJSON_GetObjectItem(g, "name")->valuestring, "NVIDIA"));
            assert_int_equal(cJSON_GetObjectItem(j, "contexts")->valueint, 1);
            cJSON *procs = cJSON_GetObjectItem(g, "processes");
            assert_true(cJSON_IsArray(procs) || cJSON_IsNull(procs));
            samples++;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    assert_int_equal(samples, 2);
    f = fopen(csv, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f)); /* header */
    int pool_rows = 0;
    while (fgets(line, sizeof line, f)) {
        /* pool-total rows end with the GPU's used and total bytes */
        char *last = strrchr(line, ',');
        assert_non_null(last);
        if (strstr(line, ",gpu,,,")) {
            assert_true(atof(last + 1) > 1e9);
            pool_rows++;
        }
    }
    fclose(f);
    assert_int_equal(pool_rows, 2);
    unlink(jsonl);
    unlink(csv);
}

static void test_gpu_thread(void **state)
{
    (void)state;
    vram_monitor_opts o = gpu_opts();
    o.manual = 0;
    o.period_s = 0.1;
    vram_monitor *m;
    assert_int_equal(vram_monitor_start(&o, &m), 0);
    struct timespec ts = {0, 550000000};
    nanosleep(&ts, NULL);
    uint64_t total;
    uint32_t kept;
    assert_int_equal(vram_monitor_sample_count(m, &total, &kept), 0);
    assert_true(total >= 4 && total <= 8);
    for (uint32_t i = 0; i < kept; i++) {
        vram_sample *s;
        assert_int_equal(vram_monitor_sample_get(m, i, &s), 0);
        check_gpu(s);
        vram_sample_free(s);
    }
    assert_int_equal(vram_monitor_stop(m), 0);
}

static void test_contexts_count(void **state)
{
    (void)state;
    assert_int_equal(vram_device_contexts(), 1);
    vram_device *again;
    assert_int_equal(vram_device_open(0, NULL, &again), 0);
    assert_int_equal(vram_device_contexts(), 1); /* the same context, counted */
    assert_int_equal(vram_device_close(again), 0);
    int n = 0;
    assert_int_equal(vram_device_count(&n), 0);
    if (n > 1) {
        vram_device *second;
        assert_int_equal(vram_device_open(1, NULL, &second), 0);
        assert_int_equal(vram_device_contexts(), 2);
        assert_int_equal(vram_device_close(second), 0);
        assert_int_equal(vram_device_contexts(), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_fields),
        cmocka_unit_test(test_gpu_thread),
        cmocka_unit_test(test_contexts_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
