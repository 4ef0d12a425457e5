/* tests/unit/test_nvml.c - the NVML readings of include/vramkit/nvml.h and the
 * argument checks of include/vramkit/ctxcost.h, on whatever machine runs them:
 *  - NULL arguments and a negative index are VRAM_EINVAL everywhere, before
 *    NVML is even looked for;
 *  - without NVML (no driver, or a build without CUDA) every reading is
 *    VRAM_ENOSYS with a sentence naming NVML, and leaves no figures behind;
 *  - with NVML, the figures are sane: used and free within total, a name,
 *    processes within the array and their usage within the device, an index
 *    past the last GPU refused, the same GPU found again by PCI bus id
 *    (through the device API, where a CUDA driver is present too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ctxcost/ctxcost.h"
#include "replay/replay.h"
#include "vramkit.h"

/* Does this machine have NVML? Decided once, from vram_gpu_count. */
static int have_nvml(void)
{
    int n = -1;
    int rc = vram_gpu_count(&n);
    if (rc == VRAM_ENOSYS) {
        assert_int_equal(n, 0);
        return 0;
    }
    assert_int_equal(rc, 0);
    assert_true(n >= 0);
    return 1;
}

static void test_null_arguments(void **state)
{
    (void)state;
    vram_gpu_memory g;
    assert_int_equal(vram_gpu_count(NULL), VRAM_EINVAL);
    assert_int_equal(vram_gpu_memory_read(0, NULL), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "NULL"));
    assert_int_equal(vram_gpu_memory_read(-1, &g), VRAM_EINVAL);
    assert_int_equal(g.index, -1);
    assert_int_equal(vram_gpu_memory_read_pci(NULL, &g), VRAM_EINVAL);
    assert_int_equal(vram_gpu_memory_read_pci("0000:00:00.0", NULL), VRAM_EINVAL);
    assert_int_equal(vram_ctxcost_measure(NULL, NULL), VRAM_EINVAL);
    assert_int_equal(vram_ctxcost_print(NULL, vram_write_stdio, stdout, 0), VRAM_EINVAL);
}

static void test_without_nvml(void **state)
{
    (void)state;
    if (have_nvml())
        skip();
    vram_gpu_memory g;
    memset(&g, 0x5a, sizeof g);
    vram_clear_error();
    assert_int_equal(vram_gpu_memory_read(0, &g), VRAM_ENOSYS);
    assert_non_null(strstr(vram_last_error(), "NVML"));
    assert_int_equal(g.index, -1);
    assert_int_equal(g.total_bytes, 0);
    assert_int_equal(g.used_bytes, 0);
    assert_int_equal(g.n_processes, 0);
    vram_clear_error();
    assert_int_equal(vram_gpu_memory_read_pci("0000:19:00.0", &g), VRAM_ENOSYS);
    assert_non_null(strstr(vram_last_error(), "NVML"));
    /* Asking again gives the same answer (the load is attempted once). */
    assert_int_equal(vram_gpu_memory_read(0, &g), VRAM_ENOSYS);
    assert_non_null(strstr(vram_last_error(), "NVML is not available"));
}

static void check_sane(const vram_gpu_memory *g)
{
    assert_true(g->total_bytes > 0);
    assert_true(g->used_bytes <= g->total_bytes);
    assert_true(g->free_bytes <= g->total_bytes);
    assert_true(g->name[0] != '\0');
    assert_true(g->n_processes <= VRAM_GPU_MAX_PROCESSES);
    if (g->processes_known)
        assert_true(g->n_processes <= g->n_processes_total);
    for (unsigned i = 0; i < g->n_processes; i++) {
        const vram_gpu_process *p = &g->processes[i];
        assert_true(p->used_bytes == VRAM_GPU_BYTES_UNKNOWN || p->used_bytes <= g->total_bytes);
        assert_true(memchr(p->name, '\0', sizeof p->name) != NULL);
    }
}

static void test_with_nvml(void **state)
{
    (void)state;
    if (!have_nvml())
        skip();
    int n = 0;
    assert_int_equal(vram_gpu_count(&n), 0);
    if (n == 0)
        skip();
    vram_gpu_memory g;
    for (int i = 0; i < n; i++) {
        assert_int_equal(vram_gpu_memory_read(i, &g), 0);
        assert_int_equal(g.index, i);
        check_sane(&g);
    }
    assert_int_equal(vram_gpu_memory_read(n, &g), VRAM_EINVAL);
    assert_int_equal(g.index, -1);
    assert_int_equal(vram_gpu_memory_read_pci("not a bus id", &g), VRAM_EBACKEND);
    assert_non_null(strstr(vram_last_error(), "nvmlDeviceGetHandleByPciBusId_v2"));

    /* The GPU CUDA calls device 0 is found by its PCI bus id. */
    vram_device *dev;
    if (vram_device_open(0, NULL, &dev) != 0)
        return;
    vram_device_info info;
    assert_int_equal(vram_device_info_get(dev, &info), 0);
    assert_int_equal(vram_gpu_memory_read_pci(info.pci_bus_id, &g), 0);
    check_sane(&g);
    assert_int_equal(vram_device_close(dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_without_nvml),
        cmocka_unit_test(test_with_nvml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
