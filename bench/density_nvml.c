/* bench/density_nvml.c - bench_density's view of the GPU: a thread that
 * samples, once a second, the device's used memory (vramkit/nvml.h) and
 * its kernel and NVDEC utilization (nvmlDeviceGetUtilizationRates and
 * nvmlDeviceGetDecoderUtilization, which vramkit/nvml.h does not offer:
 * loaded here from libnvidia-ml.so.1), and averages them over a window.
 * NVML is reference-counted, so initialising it here beside vramkit's own
 * use is harmless. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "density.h"

typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;

struct density_nvml {
    char pci[32];
    char driver[96];
    void *lib;
    int inited;
    nvml_device handle;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*by_pci)(const char *, nvml_device *);
    nvml_return (*util)(nvml_device, nvml_utilization *);
    nvml_return (*dec)(nvml_device, unsigned int *, unsigned int *);
    nvml_return (*driver_version)(char *, unsigned int);
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    /* The window, under lock. */
    int active;
    unsigned samples, sm_n, dec_n;
    double sm_sum, dec_sum, used_sum;
    uint64_t used_max;
};

static void sample_once(density_nvml *n)
{
    uint64_t used = 0;
    int have_used = vram_gpu_memory_used(n->pci, &used, NULL) == 0;
    nvml_utilization u;
    int have_sm = n->util && n->handle && n->util(n->handle, &u) == 0;
    unsigned dec = 0, period = 0;
    int have_dec = n->dec && n->handle && n->dec(n->handle, &dec, &period) == 0;
    pthread_mutex_lock(&n->lock);
    if (n->active) {
        if (have_used) {
            n->samples++;
            n->used_sum += (double)used;
            n->used_max = used > n->used_max ? used : n->used_max;
        }
        if (have_sm) {
            n->sm_n++;
            n->sm_sum += u.gpu;
        }
        if (have_dec) {
            n->dec_n++;
            n->dec_sum += dec;
        }
    }
    pthread_mutex_unlock(&n->lock);
}

static void *sampler(void *p)
{
    density_nvml *n = p;
    pthread_mutex_lock(&n->lock);
    while (!n->stop) {
        pthread_mutex_unlock(&n->lock);
        sample_once(n);
        pthread_mutex_lock(&n->lock);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        while (!n->stop && pthread_cond_timedwait(&n->wake, &n->lock, &ts) == 0) {
        }
    }
    pthread_mutex_unlock(&n->lock);
    return NULL;
}

int density_nvml_open(const char *pci_bus_id, density_nvml **out)
{
    *out = NULL;
    uint64_t used = 0;
    /* vramkit's reading first: it says why when NVML is missing. */
    int rc = vram_gpu_memory_used(pci_bus_id, &used, NULL);
    if (rc)
        return rc;
    density_nvml *n = calloc(1, sizeof *n);
    if (!n)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    snprintf(n->pci, sizeof n->pci, "%s", pci_bus_id);
    snprintf(n->driver, sizeof n->driver, "unknown");
    pthread_mutex_init(&n->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->wake, &ca);
    pthread_condattr_destroy(&ca);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (n->lib) {
        *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
        *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
        *(void **)&n->by_pci = dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
        *(void **)&n->util = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
        *(void **)&n->dec = dlsym(n->lib, "nvmlDeviceGetDecoderUtilization");
        *(void **)&n->driver_version = dlsym(n->lib, "nvmlSystemGetDriverVersion");
        if (n->init && n->shutdown && n->init() == 0) {
            n->inited = 1;
            if (!n->by_pci || n->by_pci(pci_bus_id, &n->handle) != 0)
                n->handle = NULL;
            if (n->driver_version && n->driver_version(n->driver, sizeof n->driver) != 0)
                snprintf(n->driver, sizeof n->driver, "unknown");
        }
    }
    if (!n->handle)
        fprintf(stderr, "bench_density: NVML's utilization is not available here: the "
                        "tables say n/a\n");
    n->started = pthread_create(&n->thread, NULL, sampler, n) == 0;
    *out = n;
    return 0;
}

void density_nvml_close(density_nvml *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->stop = 1;
    pthread_cond_signal(&n->wake);
    pthread_mutex_unlock(&n->lock);
    if (n->started)
        pthread_join(n->thread, NULL);
    if (n->inited)
        n->shutdown();
    if (n->lib)
        dlclose(n->lib);
    pthread_cond_destroy(&n->wake);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

int density_nvml_used(density_nvml *n, uint64_t *used, uint64_t *total)
{
    return vram_gpu_memory_used(n->pci, used, total);
}

int density_nvml_process_used(density_nvml *n, uint64_t *used, int *known, int *only)
{
    *used = 0;
    *known = *only = 0;
    vram_gpu_memory *m = malloc(sizeof *m);
    if (!m)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    int rc = vram_gpu_memory_read_pci(n->pci, m);
    if (!rc && m->processes_known) {
        unsigned pid = (unsigned)getpid();
        for (unsigned i = 0; i < m->n_processes; i++)
            if (m->processes[i].pid == pid && m->processes[i].used_bytes != VRAM_GPU_BYTES_UNKNOWN) {
                *used = m->processes[i].used_bytes;
                *known = 1;
            }
        /* In a container NVML names the host's PID: the only process is ours. */
        if (!*known && m->n_processes_total == 1 && m->n_processes == 1 &&
            m->processes[0].used_bytes != VRAM_GPU_BYTES_UNKNOWN) {
            *used = m->processes[0].used_bytes;
            *known = *only = 1;
        }
    }
    free(m);
    return rc;
}

void density_nvml_window_begin(density_nvml *n)
{
    pthread_mutex_lock(&n->lock);
    n->active = 1;
    n->samples = n->sm_n = n->dec_n = 0;
    n->sm_sum = n->dec_sum = n->used_sum = 0;
    n->used_max = 0;
    pthread_mutex_unlock(&n->lock);
}

void density_nvml_window_end(density_nvml *n, density_gpu_window *out)
{
    pthread_mutex_lock(&n->lock);
    n->active = 0;
    out->samples = n->samples;
    out->sm_util_pct = n->sm_n ? n->sm_sum / n->sm_n : -1;
    out->dec_util_pct = n->dec_n ? n->dec_sum / n->dec_n : -1;
    out->used_max = n->used_max;
    out->used_mean = n->samples ? (uint64_t)(n->used_sum / n->samples) : 0;
    pthread_mutex_unlock(&n->lock);
}

const char *density_nvml_driver(const density_nvml *n) { return n->driver; }
