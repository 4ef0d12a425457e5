/* vramkit/torch.h - PyTorch's CUDA memory served by a vramkit pool.
 *
 * torch.cuda.memory.CUDAPluggableAllocator loads an allocation and a free
 * function from a shared library by name and routes every CUDA allocation of
 * the process through them. libvramkit-core.so exports the two it expects
 * (it links neither cJSON nor libmicrohttpd nor protobuf-c, so loading it
 * brings nothing else into PyTorch's process):
 *
 *   import torch
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "libvramkit-core.so", "vram_torch_malloc", "vram_torch_free")
 *   torch.cuda.memory.change_current_allocator(alloc)
 *
 * run before anything touches CUDA memory (PyTorch refuses to swap an
 * allocator it has already used).
 *
 * The first allocation on a device sets that device up, once and thread-safely:
 * it opens the device (vram_device_open: the primary context PyTorch's runtime
 * also uses, with the VRAM_STACK_LIMIT stack), creates the backend VRAM_BACKEND
 * names if that is a GPU backend (cuda, cuda_async, vmm) and "vmm" otherwise,
 * and one pool for the device named "torch:<device>", with every pool option
 * of the configuration (VRAM_POOL_LIMIT, VRAM_DECAY_MS, VRAM_TRACE, ...) and
 * the VRAM_POLICY policy when the backend can serve it, else the policy it
 * can (segments for cuda and cuda_async). Below its limit the pool keeps
 * freed memory mapped and reuses it without a driver call, so a PyTorch loop
 * with changing shapes maps only while it grows. From then on each allocation and
 * free is one pool call: no lock but the pool's own. Blocks belong to the
 * pool's default owner, kind "other"; a free is stream-ordered on the stream
 * the block was allocated on (the only one PyTorch reports).
 *
 * The device, backend and pool live until the process ends: PyTorch frees
 * tensors during interpreter teardown, after any point where they could be
 * destroyed safely. PyTorch's own statistics (torch.cuda.max_memory_reserved
 * and the like) are not available under a pluggable allocator;
 * vram_torch_stats_json() gives vramkit's, e.g. through ctypes.
 *
 * Errors and ownership: PyTorch's two functions cannot return a code, so
 * they log each failure at level error and leave its sentence in
 * vram_last_error(); the others return 0 or a negative VRAM_E* code. The
 * device, backend and pool of each device are the allocator's: never close
 * or destroy them. Every function is thread-safe. In a build without the
 * CUDA toolkit every allocation fails with VRAM_ENOSYS (logged) and no
 * device ever has a pool. */
#ifndef VRAMKIT_TORCH_H
#define VRAMKIT_TORCH_H

#include "vramkit/api.h"

#include <stddef.h>
#include <sys/types.h>

#include "vramkit/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Devices the PyTorch allocator serves: indices 0 .. VRAM_TORCH_DEVICES - 1. */
#define VRAM_TORCH_DEVICES 64

/* PyTorch's allocation function: `size` bytes on CUDA device `device`, for
 * work queued on `stream` (a cudaStream_t). Returns the device pointer, owned
 * by the pool until vram_torch_free(). Size 0 returns NULL and is no error
 * (PyTorch asks for it for empty tensors). On failure returns NULL, sets
 * vram_last_error() and logs it at level error: a device that cannot be set
 * up (no GPU, no driver, a backend that cannot be created; the first failure
 * is remembered and repeated by every later call for that device), a device
 * index out of range (VRAM_EINVAL), or the pool's refusal (VRAM_ENOMEM,
 * VRAM_EBACKEND, VRAM_EHOSTMEM). Note that PyTorch does not turn a NULL
 * into torch.cuda.OutOfMemoryError: the failure is in the log. */
VRAM_API void *vram_torch_malloc(ssize_t size, int device, void *stream);

/* PyTorch's free function: give back `ptr`, allocated on `device`, after the
 * work queued on `stream` (the block's allocation stream). `size` is what was
 * asked for and is not needed. NULL is a no-op (PyTorch frees the NULL of an
 * empty tensor). A pointer the device's pool did not hand out, or a device
 * without a pool, is logged at level error (VRAM_ENOTALLOC in
 * vram_last_error()) and otherwise ignored: there is no way to report it to
 * PyTorch. */
VRAM_API void vram_torch_free(void *ptr, ssize_t size, int device, void *stream);

/* Write the statistics of `device`'s pool as one JSON object (no newline)
 * into buf[0 .. cap-1], NUL-terminated. Set up: {"device", "ready": true,
 * "pool", "backend", "policy", every field of VRAM_POOL_STATS (live_bytes,
 * peak_live_bytes, reserved_bytes, peak_reserved_bytes, backend_calls_total,
 * ...), the backend's counters (backend_held_bytes, backend_peak_held_bytes,
 * backend_granularity_bytes), and the device's (device_name, device_total_bytes,
 * device_free_bytes, stack_limit_bytes, or device_error)}. Not set up (yet,
 * or it failed): {"device", "ready": false, "error": the reason}. Returns 0;
 * VRAM_ELIMIT when cap is too small (buf, if cap > 0, is then ""; the message
 * gives the bytes needed; buf NULL with cap 0 asks just that); VRAM_EINVAL
 * for buf NULL with cap > 0 or a device out of range; VRAM_EHOSTMEM. The
 * text is the caller's buffer: nothing is allocated that outlives the call. */
VRAM_API int vram_torch_stats_json(int device, char *buf, size_t cap);

/* Reset the peaks of `device`'s pool to the current values (live, reserved),
 * as torch.cuda.reset_peak_memory_stats() would. VRAM_EINVAL when the device
 * is out of range or has no pool (never used, or its set-up failed: the
 * message says why). */
VRAM_API int vram_torch_reset_peaks(int device);

/* The pool serving `device`, for the rest of the pool API (statistics,
 * snapshots, trim), or NULL when the device has none. Borrowed: owned by the
 * PyTorch allocator, valid until the process ends; do not destroy it. */
VRAM_API vram_pool *vram_torch_pool(int device);

#ifdef __cplusplus
}
#endif
#endif
