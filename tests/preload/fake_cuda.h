/* tests/preload/fake_cuda.h - what the stand-in CUDA driver (libcuda.so.1
 * built from fake_cuda*.c into BUILD/fakecuda/) offers tests beyond the
 * driver API: test knobs and a look inside its simulated device. Every
 * name here starts with fake_cuda_, so nothing in it can be mistaken for
 * a driver function; libnvcuvid.so.1 and libnvidia-ml.so.1 (fake_nvcuvid.c,
 * fake_nvml.c) use it to charge and read the same device.
 *
 * The device: one GPU of FAKE_CUDA_TOTAL bytes (default 80 GiB; a number
 * with an optional K, M, G or T suffix). Every allocation that a program
 * can address is real host memory (malloc, or a memfd for cuMemCreate), so
 * a program can memcpy through its device pointers; arrays and decoders
 * are only counted. Free memory as cuMemGetInfo reports it is the total
 * less every kind below but FAKE_CUDA_KIND_HOST.
 *
 * A program may call these through dlsym on the handle of libcuda.so.1, so
 * that it does not need to link the stand-in. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* What the device's bytes are held by. */
typedef enum fake_cuda_kind {
    FAKE_CUDA_KIND_DEVICE = 0, /* cuMemAlloc (both ABIs) */
    FAKE_CUDA_KIND_PITCH,      /* cuMemAllocPitch: pitch x height */
    FAKE_CUDA_KIND_MANAGED,    /* cuMemAllocManaged (counted as resident) */
    FAKE_CUDA_KIND_POOL,       /* memory pools: in use and kept for reuse */
    FAKE_CUDA_KIND_VMM,        /* cuMemCreate handles, until released and unmapped */
    FAKE_CUDA_KIND_ARRAY,      /* arrays and mipmapped arrays */
    FAKE_CUDA_KIND_DECODER,    /* NVDEC decoders (the libnvcuvid stand-in) */
    FAKE_CUDA_KIND_GRAPH,      /* graph memory: cuMemAllocAsync while capturing */
    FAKE_CUDA_KIND_CONTEXT,    /* the contexts' own footprint */
    FAKE_CUDA_KIND_HOST,       /* page-locked host memory: not device memory */
    FAKE_CUDA_KINDS
} fake_cuda_kind;

/* Bytes held by one kind now. */
unsigned long long fake_cuda_bytes(fake_cuda_kind kind);
/* Device bytes held by allocations of every kind (contexts and host
 * memory left out). */
unsigned long long fake_cuda_live_bytes(void);
/* Device bytes in use: allocations and contexts (total - free). */
unsigned long long fake_cuda_used_bytes(void);
unsigned long long fake_cuda_total_bytes(void);
/* Live contexts: created ones and the primary context while retained. */
int fake_cuda_context_count(void);

/* The variant of the last stream-taking function called ("ptsz", "ptds",
 * or "legacy" for the plain one; "" before any): process-wide, and for
 * the calling thread only. */
const char *fake_cuda_last_variant(void);
const char *fake_cuda_thread_last_variant(void);
/* The exact exported name of the last driver function entered ("" before
 * any): process-wide, and for the calling thread only. */
const char *fake_cuda_last_call(void);
const char *fake_cuda_thread_last_call(void);
/* How many times the exported driver function of that exact name was
 * entered (0 for a name it does not export). */
unsigned long long fake_cuda_calls(const char *exact_name);

/* Make every stream report that it is capturing a graph (1) or not (0).
 * While it is on, cuMemAllocAsync and cuMemAllocFromPoolAsync take graph
 * memory (cuDeviceGetGraphMemAttribute) instead of the pool's. */
void fake_cuda_set_capturing(int on);

/* For the other stand-ins: take `bytes` of the device for `kind`
 * (CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_INITIALIZED, or
 * CUDA_ERROR_INVALID_CONTEXT when need_context and the calling thread has
 * no current context), and give them back. */
int fake_cuda_charge(fake_cuda_kind kind, unsigned long long bytes, int need_context);
void fake_cuda_uncharge(fake_cuda_kind kind, unsigned long long bytes);
/* The device as a whole, as NVML sees it: no context needed. */
void fake_cuda_mem_info(unsigned long long *free_bytes, unsigned long long *total_bytes);

#ifdef __cplusplus
}
#endif

#endif
