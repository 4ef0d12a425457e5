/* src/core/gpu/nvml.c - NVML loaded at run time (see vramkit/nvml.h): dlopen of
 * libnvidia-ml.so.1 and nvmlInit_v2 once per process, device memory and the
 * compute processes using it, and NVML's return codes turned into vramkit's
 * error model.
 *
 * No NVML header is needed at build time: the few types and prototypes below
 * are declared here with NVML's ABI (nvml.h of driver 580): nvmlReturn_t is an
 * int-sized enum, nvmlDevice_t an opaque pointer, and the structs are laid out
 * as NVML lays them out. Every entry point is taken by its versioned name, so
 * the ABI cannot change under us with a newer library. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/internal.h"
#include "vramkit/nvml.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
};

/* nvmlMemory_t (v1): used includes what the driver reserves. */
typedef struct nvml_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvml_memory;

/* nvmlProcessInfo_t, the element of nvmlDeviceGetComputeRunningProcesses_v3. */
typedef struct nvml_process_info {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* NVML_VALUE_NOT_AVAILABLE: all ones */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvml_process_info;

/* X(name, parameters): every NVML function used, all returning nvmlReturn_t
 * except nvmlErrorString (declared apart). */
#define VRAM_NVML_FUNCS(X)                                                                    \
    X(nvmlInit_v2, (void))                                                                    \
    X(nvmlShutdown, (void))                                                                   \
    X(nvmlDeviceGetCount_v2, (unsigned int *count))                                           \
    X(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *device))              \
    X(nvmlDeviceGetHandleByPciBusId_v2, (const char *pci_bus_id, nvmlDevice_t *device))       \
    X(nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))                         \
    X(nvmlDeviceGetName, (nvmlDevice_t device, char *name, unsigned int length))              \
    X(nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvml_memory * memory))                   \
    X(nvmlDeviceGetComputeRunningProcesses_v3,                                                \
      (nvmlDevice_t device, unsigned int *count, nvml_process_info *infos))

static struct {
#define VRAM__NVML_MEMBER(fn, params) nvmlReturn_t(*fn) params;
    VRAM_NVML_FUNCS(VRAM__NVML_MEMBER)
#undef VRAM__NVML_MEMBER
    const char *(*nvmlErrorString)(nvmlReturn_t r);
} nvml;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[320];
static int root_pid_namespace; /* NVML's PIDs are ours to look up in /proc */

static const char *nvml_text(nvmlReturn_t r)
{
    const char *s = nvml.nvmlErrorString ? nvml.nvmlErrorString(r) : NULL;
    return s ? s : "unknown NVML error";
}

/* NVML reports PIDs of the host's (initial) PID namespace. /proc/self/status
 * lists our PID in each namespace we are nested in ("NSpid: 4711 12" inside
 * a container); only with a single entry do NVML's PIDs mean the same
 * process in our /proc. Kernels without the line predate PID namespaces in
 * containers worth caring about here: take them as the root namespace. */
static int detect_root_pid_namespace(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    int root = 1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        unsigned fields = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line + 6, " \t\n", &save); tok;
             tok = strtok_r(NULL, " \t\n", &save))
            fields++;
        root = fields == 1;
        break;
    }
    fclose(f);
    return root;
}

static void load(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(load_msg, sizeof load_msg,
                 "NVML is not available: cannot load libnvidia-ml.so.1 (%s)",
                 e ? e : "not found");
        load_rc = VRAM_ENOSYS;
        return;
    }
#define VRAM__NVML_GET(fn, params)                                                            \
    *(void **)&nvml.fn = dlsym(lib, #fn);                                                     \
    if (!nvml.fn) {                                                                           \
        snprintf(load_msg, sizeof load_msg,                                                   \
                 "NVML is not available: libnvidia-ml.so.1 has no %s (the NVIDIA driver is "  \
                 "too old)",                                                                  \
                 #fn);                                                                        \
        load_rc = VRAM_ENOSYS;                                                                \
        return;                                                                               \
    }
    VRAM_NVML_FUNCS(VRAM__NVML_GET)
    VRAM__NVML_GET(nvmlErrorString, ())
#undef VRAM__NVML_GET
    nvmlReturn_t r = nvml.nvmlInit_v2();
    if (r != NVML_SUCCESS) {
        snprintf(load_msg, sizeof load_msg,
                 "NVML is not available: nvmlInit_v2 failed: %s (NVML error %d)", nvml_text(r),
                 r);
        load_rc = VRAM_ENOSYS;
        return;
    }
    unsigned n = 0;
    r = nvml.nvmlDeviceGetCount_v2(&n);
    if (r != NVML_SUCCESS) {
        /* Initialised but unusable: undo the initialisation (NVML counts them). */
        snprintf(load_msg, sizeof load_msg,
                 "NVML is not available: nvmlDeviceGetCount_v2 failed: %s (NVML error %d)",
                 nvml_text(r), r);
        nvml.nvmlShutdown();
        load_rc = VRAM_ENOSYS;
        return;
    }
    root_pid_namespace = detect_root_pid_namespace();
    /* NVML stays initialised, and the library loaded, for the life of the
     * process: readers call it from any thread at any time. */
}

static int nvml_load(void)
{
    pthread_once(&load_once, load);
    if (load_rc)
        return vram__fail(load_rc, "%s", load_msg);
    return 0;
}

static int nvml_fail(nvmlReturn_t r, const char *fmt, ...) VRAM__PRINTF(2, 3);
static int nvml_fail(nvmlReturn_t r, const char *fmt, ...)
{
    char head[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    return vram__fail(VRAM_EBACKEND, "%s failed: %s (NVML error %d)", head, nvml_text(r), r);
}

int vram_gpu_count(int *count)
{
    if (!count)
        return vram__fail(VRAM_EINVAL, "vram_gpu_count: count is NULL");
    *count = 0;
    int rc = nvml_load();
    if (rc)
        return rc;
    unsigned n = 0;
    nvmlReturn_t r = nvml.nvmlDeviceGetCount_v2(&n);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetCount_v2");
    *count = (int)n;
    return 0;
}

/* The command name of a process, where /proc shows it; empty otherwise. */
static void process_name(unsigned pid, char *name, size_t cap)
{
    name[0] = '\0';
    if (!root_pid_namespace)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(name, (int)cap, f))
        name[strcspn(name, "\n")] = '\0';
    else
        name[0] = '\0';
    fclose(f);
}

/* Most memory first; usage NVML did not report goes last. */
static int by_used_desc(const void *a, const void *b)
{
    const nvml_process_info *x = a, *y = b;
    if (x->usedGpuMemory == y->usedGpuMemory)
        return x->pid < y->pid ? -1 : x->pid > y->pid;
    if (x->usedGpuMemory == ~0ull)
        return 1;
    if (y->usedGpuMemory == ~0ull)
        return -1;
    return x->usedGpuMemory > y->usedGpuMemory ? -1 : 1;
}

/* The compute processes of `dev` into out. The list can grow between the
 * call that sizes it and the one that fills it: retry a few times. */
static int read_processes(nvmlDevice_t dev, vram_gpu_memory *out)
{
    nvml_process_info local[VRAM_GPU_MAX_PROCESSES];
    nvml_process_info *infos = local;
    unsigned cap = VRAM_GPU_MAX_PROCESSES, n = cap;
    nvmlReturn_t r = nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, infos);
    for (int tries = 0; r == NVML_ERROR_INSUFFICIENT_SIZE && tries < 4; tries++) {
        cap = n + 16;
        nvml_process_info *grown =
            infos == local ? vram__calloc(cap, sizeof *grown)
                           : vram__realloc_array(infos, cap, sizeof *grown);
        if (!grown) {
            if (infos != local)
                free(infos);
            return VRAM_EHOSTMEM;
        }
        infos = grown;
        n = cap;
        r = nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, infos);
    }
    int rc = 0;
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION) {
        out->processes_known = 0; /* memory figures stand; the list is unknown */
    } else if (r != NVML_SUCCESS) {
        rc = nvml_fail(r, "nvmlDeviceGetComputeRunningProcesses_v3 (GPU %d)", out->index);
    } else {
        qsort(infos, n, sizeof *infos, by_used_desc);
        out->processes_known = 1;
        out->n_processes_total = n;
        out->n_processes = n < VRAM_GPU_MAX_PROCESSES ? n : VRAM_GPU_MAX_PROCESSES;
        for (unsigned i = 0; i < out->n_processes; i++) {
            vram_gpu_process *p = &out->processes[i];
            p->pid = infos[i].pid;
            p->used_bytes = infos[i].usedGpuMemory == ~0ull ? VRAM_GPU_BYTES_UNKNOWN
                                                            : (uint64_t)infos[i].usedGpuMemory;
            process_name(p->pid, p->name, sizeof p->name);
        }
    }
    if (infos != local)
        free(infos);
    return rc;
}

static int device_by_pci(const char *pci_bus_id, nvmlDevice_t *out)
{
    int rc = nvml_load();
    if (rc)
        return rc;
    nvmlReturn_t r = nvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id, out);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetHandleByPciBusId_v2(\"%s\")", pci_bus_id);
    return 0;
}

static int read_device(nvmlDevice_t dev, vram_gpu_memory *out)
{
    unsigned index = 0;
    nvmlReturn_t r = nvml.nvmlDeviceGetIndex(dev, &index);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetIndex");
    out->index = (int)index;
    r = nvml.nvmlDeviceGetName(dev, out->name, (unsigned)sizeof out->name);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetName (GPU %d)", out->index);
    nvml_memory m;
    r = nvml.nvmlDeviceGetMemoryInfo(dev, &m);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetMemoryInfo (GPU %d)", out->index);
    out->total_bytes = m.total;
    out->used_bytes = m.used;
    out->free_bytes = m.free;
    return read_processes(dev, out);
}

/* On failure nothing of a partial read is left for the caller to trust. */
static int finish(int rc, vram_gpu_memory *out)
{
    if (rc) {
        memset(out, 0, sizeof *out);
        out->index = -1;
    }
    return rc;
}

int vram_gpu_memory_read(int index, vram_gpu_memory *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read: out is NULL");
    memset(out, 0, sizeof *out);
    out->index = -1;
    if (index < 0)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read: GPU index %d is negative", index);
    int n = 0, rc = vram_gpu_count(&n);
    if (rc)
        return rc;
    if (index >= n)
        return vram__fail(VRAM_EINVAL, "no GPU %d: NVML sees %d", index, n);
    nvmlDevice_t dev;
    nvmlReturn_t r = nvml.nvmlDeviceGetHandleByIndex_v2((unsigned)index, &dev);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetHandleByIndex_v2(%d)", index);
    return finish(read_device(dev, out), out);
}

int vram_gpu_memory_read_pci(const char *pci_bus_id, vram_gpu_memory *out)
{
    if (!out || !pci_bus_id)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_read_pci: pci_bus_id and out are required");
    memset(out, 0, sizeof *out);
    out->index = -1;
    nvmlDevice_t dev;
    int rc = device_by_pci(pci_bus_id, &dev);
    if (rc)
        return rc;
    return finish(read_device(dev, out), out);
}

int vram_gpu_memory_used(const char *pci_bus_id, uint64_t *used, uint64_t *total)
{
    if (!pci_bus_id || !used)
        return vram__fail(VRAM_EINVAL, "vram_gpu_memory_used: pci_bus_id and used are required");
    *used = 0;
    if (total)
        *total = 0;
    nvmlDevice_t dev;
    int rc = device_by_pci(pci_bus_id, &dev);
    if (rc)
        return rc;
    nvml_memory m;
    nvmlReturn_t r = nvml.nvmlDeviceGetMemoryInfo(dev, &m);
    if (r != NVML_SUCCESS)
        return nvml_fail(r, "nvmlDeviceGetMemoryInfo (%s)", pci_bus_id);
    *used = m.used;
    if (total)
        *total = m.total;
    return 0;
}
