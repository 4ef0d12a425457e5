/* vramkit/nvml.h - what a GPU's memory holds, as the driver sees it, through
 * NVML (the library nvidia-smi reads).
 *
 * NVML needs no CUDA context of its own, so it is the honest instrument for
 * device-wide used memory: reading it changes nothing. libvramkit-core does not
 * link NVML; it opens libnvidia-ml.so.1 with dlopen the first time one of
 * these functions is called (once per process, thread-safe) and keeps NVML
 * initialised until the process exits. Where the library cannot be loaded or
 * initialised (or in a build without the CUDA toolkit), every function but
 * vram_gpu_parse returns VRAM_ENOSYS with a sentence saying why ("NVML is
 * not available: cannot load libnvidia-ml.so.1 (...)"); a failing NVML call
 * gives VRAM_EBACKEND naming the call and NVML's own message.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). Readings go into structs the caller owns (no pointer
 * in them points into the library); nothing is allocated that the caller
 * must free. Every function is thread-safe.
 *
 * Indexes here are NVML's, which follow PCI bus order and ignore
 * CUDA_VISIBLE_DEVICES; CUDA's ordinals (vram_device_open) may differ. To read
 * the GPU a vram_device uses, pass its vram_device_info.pci_bus_id to
 * vram_gpu_memory_read_pci(). */
#ifndef VRAMKIT_NVML_H
#define VRAMKIT_NVML_H

#include "vramkit/api.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which GPU an instrument reads through NVML (the monitor, the metrics
 * exposition, OOM reports; their options' `gpu`): an NVML index (0, 1, ...)
 * or one of these. Each instrument's options also take a PCI bus id, which
 * wins when set. */
typedef enum vram_gpu_pick {
    VRAM_GPU_NONE = -1, /* none: no NVML call, no GPU figures */
    VRAM_GPU_ALL = -2,  /* every GPU NVML sees (the metrics exposition) */
    VRAM_GPU_OWN = -3,  /* the GPU of the pool's backend (OOM reports; none for
                           a pool that is not on a GPU) */
} vram_gpu_pick;

/* The text forms the options and the command line take: "none", "all",
 * "own", an NVML index ("0") or a PCI bus id ("0000:19:00.0", anything
 * else of the form dddd:bb:dd.f). *gpu gets the pick (VRAM_GPU_NONE for a
 * PCI bus id); *pci_bus_id (may be NULL) points into `text`, so lives as
 * long as it, for a PCI bus id and is NULL otherwise. VRAM_EINVAL naming
 * the text for anything else, for a NULL text or gpu, and for a PCI bus id
 * when pci_bus_id is NULL (*gpu is not set on error). Works without NVML
 * (it calls none). */
VRAM_API int vram_gpu_parse(const char *text, int *gpu, const char **pci_bus_id);

/* The most processes one vram_gpu_memory lists (those using the most memory
 * first); n_processes_total says how many there were. */
#define VRAM_GPU_MAX_PROCESSES 64

/* A byte count the driver did not report (NVML_VALUE_NOT_AVAILABLE, e.g. a
 * process's usage under some virtualisation modes). Never a real figure. */
#define VRAM_GPU_BYTES_UNKNOWN UINT64_MAX

typedef struct vram_gpu_process {
    unsigned pid;        /* as NVML reports it (the host's PID namespace) */
    uint64_t used_bytes; /* device memory of the process, or VRAM_GPU_BYTES_UNKNOWN */
    char name[64];       /* /proc/<pid>/comm where this process can see it; else empty */
} vram_gpu_process;

typedef struct vram_gpu_memory {
    int index;            /* NVML index */
    char name[96];        /* "NVIDIA H200" */
    uint64_t total_bytes; /* device memory */
    uint64_t used_bytes;  /* used by every process plus what the driver reserves */
    uint64_t free_bytes;
    /* 0 when NVML would not list the processes (not supported, or no
     * permission): then n_processes and n_processes_total say nothing. */
    int processes_known;
    unsigned n_processes;       /* entries filled in processes[] */
    unsigned n_processes_total; /* compute processes NVML listed (may exceed the array) */
    vram_gpu_process processes[VRAM_GPU_MAX_PROCESSES];
    uint64_t reserved[4]; /* room for later fields (zero) */
} vram_gpu_memory;

/* How many GPUs NVML sees. VRAM_EINVAL for a NULL count; VRAM_ENOSYS without
 * NVML (*count is then 0); VRAM_EBACKEND if NVML fails. */
VRAM_API int vram_gpu_count(int *count);

/* Read GPU `index` (NVML's index) into *out, which the caller owns: memory
 * totals now, and the compute processes using the GPU with their memory and
 * names. VRAM_EINVAL for a NULL out or an index NVML does not have,
 * VRAM_ENOSYS without NVML, VRAM_EBACKEND if an NVML call fails,
 * VRAM_EHOSTMEM listing many processes. On error *out holds no figures (it
 * is zeroed, index -1). */
VRAM_API int vram_gpu_memory_read(int index, vram_gpu_memory *out);

/* The same for the GPU at a PCI bus id ("0000:19:00.0", as
 * cuDeviceGetPCIBusId and vram_device_info.pci_bus_id give it). VRAM_EINVAL
 * for NULL arguments, VRAM_ENOSYS without NVML, VRAM_EBACKEND if NVML has
 * no GPU there or a call fails; *out is zeroed (index -1) on error. */
VRAM_API int vram_gpu_memory_read_pci(const char *pci_bus_id, vram_gpu_memory *out);

/* Device-wide used and total bytes of the GPU at a PCI bus id, now, and
 * nothing else (no process list, no names): cheap enough to poll between
 * the steps of a measurement. `total` may be NULL. VRAM_EINVAL for NULL
 * arguments, VRAM_ENOSYS without NVML, VRAM_EBACKEND if NVML has no GPU
 * there or fails; *used and *total are 0 on error. */
VRAM_API int vram_gpu_memory_used(const char *pci_bus_id, uint64_t *used, uint64_t *total);

#ifdef __cplusplus
}
#endif
#endif
