/* bench/density_nvml.c - bench_density's view of the GPUs: a thread that
 * samples, once a second, the devices' used memory (vramkit/nvml.h; their
 * sum) and their kernel and NVDEC utilization (their mean) (nvmlDeviceGetUtilizationRates and
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
    size_t n;
    char pci[DENSITY_MAX_GPUS][32];
    char driver[96];
    void *lib;
    int inited;
    nvml_device handle[DENSITY_MAX_GPUS];
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
    int have_used = density_nvml_used(n, &used, NULL) == 0;
    /* Utilization: the mean over the GPUs, when every one answered. */
    nvml_utilization u = {0, 0};
    unsigned dec = 0;
    int have_sm = n->util != NULL, have_dec = n->dec != NULL;
    double sm_sum = 0, dec_sum = 0;
    for (size_t i = 0; i < n->n; i++) {
        nvml_utilization one;
        unsigned d = 0, period = 0;
        have_sm = have_sm && n->handle[i] && n->util(n->handle[i], &one) == 0;
        have_dec = have_dec && n->handle[i] && n->dec(n->handle[i], &d, &period) == 0;
        sm_sum += have_sm ? one.gpu : 0;
        dec_sum += have_dec ? d : 0;
    }
    u.gpu = have_sm ? (unsigned)(sm_sum / (double)n->n + 0.5) : 0;
    dec = have_dec ? (unsigned)(dec_sum / (double)n->n + 0.5) : 0;
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

int density_nvml_open(const char *const *pci_bus_ids, size_t count, density_nvml **out)
{
    *out = NULL;
    if (!count || count > DENSITY_MAX_GPUS)
        return vram_set_error(VRAM_EINVAL, "%zu GPUs to sample: 1 .. %d", count,
                              DENSITY_MAX_GPUS);
    for (size_t i = 0; i < count; i++) {
        uint64_t used = 0;
        /* vramkit's reading first: it says why when NVML is missing. */
        int rc = vram_gpu_memory_used(pci_bus_ids[i], &used, NULL);
        if (rc)
            return rc;
    }
    density_nvml *n = calloc(1, sizeof *n);
    if (!n)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    n->n = count;
    for (size_t i = 0; i < count; i++)
        snprintf(n->pci[i], sizeof n->pci[i], "%s", pci_bus_ids[i]);
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
            for (size_t i = 0; i < count; i++)
                if (!n->by_pci || n->by_pci(pci_bus_ids[i], &n->handle[i]) != 0)
                    n->handle[i] = NULL;
            if (n->driver_version && n->driver_version(n->driver, sizeof n->driver) != 0)
                snprintf(n->driver, sizeof n->driver, "unknown");
        }
    }
    if (!n->handle[0])
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
    uint64_t u_sum = 0, t_sum = 0;
    for (size_t i = 0; i < n->n; i++) {
        uint64_t u = 0, t = 0;
        int rc = vram_gpu_memory_used(n->pci[i], &u, &t);
        if (rc)
            return rc;
        u_sum += u;
        t_sum += t;
    }
    *used = u_sum;
    if (total)
        *total = t_sum;
    return 0;
}

/* This process's bytes on one GPU. */
static int process_used_on(const char *pci, uint64_t *used, int *known, int *only)
{
    *used = 0;
    *known = *only = 0;
    vram_gpu_memory *m = malloc(sizeof *m);
    if (!m)
        return vram_set_error(VRAM_EHOSTMEM, "out of host memory");
    int rc = vram_gpu_memory_read_pci(pci, m);
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

int density_nvml_process_used(density_nvml *n, uint64_t *used, int *known, int *only)
{
    /* Known over all GPUs only when known on each. */
    *used = 0;
    *known = *only = 1;
    for (size_t i = 0; i < n->n; i++) {
        uint64_t u;
        int k, o;
        int rc = process_used_on(n->pci[i], &u, &k, &o);
        if (rc || !k) {
            *used = 0;
            *known = *only = 0;
            return rc;
        }
        *used += u;
        *only = *only && o;
    }
    return 0;
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
