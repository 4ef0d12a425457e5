/* vramkit/cuda_table.h - a typed table of CUDA driver entry points, filled
 * from the driver vramkit loaded (vram_cuda_proc, vramkit/device.h), for
 * code that calls the driver without linking libcuda: vramkit's engine and
 * command line do, and so may yours. Needs the CUDA toolkit's cuda.h and
 * cudaTypedefs.h, and GCC or Clang (__typeof__).
 *
 *   #define MY_CUDA(X) X(cuMemAlloc, 3020) X(cuMemFree, 3020)
 *   typedef struct { MY_CUDA(VRAM_CUDA_TABLE_MEMBER) } my_cuda;
 *   my_cuda cu;
 *   VRAM_CUDA_TABLE_LOADER(my_cuda_load, &cu, MY_CUDA)
 *   ...
 *   int rc = my_cuda_load();   (0, or VRAM_ENOSYS with the reason; filled once)
 *   CUdeviceptr p;
 *   VRAM_CUDA_TRY(cu.cuMemAlloc(&p, 4096), "cuMemAlloc of %d bytes", 4096);
 *
 * Each entry names a function and the CUDA version of the ABI cuda.h's
 * prototype has (cuMemAlloc is cuMemAlloc_v2, version 3020): the table is
 * asked for exactly that ABI, since the newest may differ, and a pairing
 * that does not match the prototype fails to compile.
 *
 * Errors and ownership: the loader returns 0 or VRAM_ENOSYS (no usable
 * driver, or one lacking an entry: the sentence names it) and sets
 * vram_last_error() again on every failing call. The table is the
 * caller's; its pointers come from a driver vramkit never unloads, so they
 * stay valid for the process. After a failure the entries before the
 * missing one are filled, it is NULL and the rest are left as they were:
 * test the loader's result, not the pointers. Calls through the table need the
 * context current on the thread (vram_device_bind). */
#ifndef VRAMKIT_CUDA_TABLE_H
#define VRAMKIT_CUDA_TABLE_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdio.h>

#include "vramkit/device.h"
#include "vramkit/error.h"

/* A member named after the function, with the prototype callers compile
 * against (cuda.h maps cuMemAlloc to cuMemAlloc_v2). */
#define VRAM_CUDA_TABLE_MEMBER(fn, ver) __typeof__(&fn) fn;

/* One entry of a loader's LIST: checked against cuda.h, then filled unless
 * an earlier one failed (the loader's locals vram_cuda_table_ and
 * vram_cuda_rc_). */
#define VRAM_CUDA_TABLE_ENTRY(fn, ver)                                                        \
    _Static_assert(__builtin_types_compatible_p(PFN_##fn##_v##ver, __typeof__(&fn)),           \
                   #fn " at version " #ver " is not the prototype cuda.h declares");          \
    if (!vram_cuda_rc_)                                                                       \
        vram_cuda_rc_ = vram_cuda_proc(#fn, ver, (void **)&vram_cuda_table_->fn);

/* Define `int name(void)`: fill `table` with every entry of LIST once per
 * process (thread-safe), and from then on return the first result again
 * (0, or the error with its sentence). */
#define VRAM_CUDA_TABLE_LOADER(name, table, LIST)                                             \
    static pthread_once_t name##_once_ = PTHREAD_ONCE_INIT;                                   \
    static int name##_rc_;                                                                    \
    static char name##_msg_[512];                                                             \
    static void name##_fill_(void)                                                            \
    {                                                                                         \
        __typeof__(table) vram_cuda_table_ = (table);                                         \
        int vram_cuda_rc_ = 0;                                                                \
        LIST(VRAM_CUDA_TABLE_ENTRY)                                                           \
        if ((name##_rc_ = vram_cuda_rc_) != 0)                                                \
            snprintf(name##_msg_, sizeof name##_msg_, "%s", vram_last_error());               \
    }                                                                                         \
    int name(void)                                                                            \
    {                                                                                         \
        pthread_once(&name##_once_, name##_fill_);                                            \
        return name##_rc_ ? vram_set_error(name##_rc_, "%s", name##_msg_) : 0;               \
    }

/* Evaluate a driver call; on failure record it (vram_cuda_fail) and return
 * its vramkit code (VRAM_ENOMEM or VRAM_EBACKEND) from the enclosing
 * function, which must return int and has nothing to clean up there. */
#define VRAM_CUDA_TRY(call, ...)                                                              \
    do {                                                                                      \
        CUresult vram_cuda_r_ = (call);                                                       \
        if (vram_cuda_r_ != CUDA_SUCCESS)                                                     \
            return vram_cuda_fail((int)vram_cuda_r_, __VA_ARGS__);                            \
    } while (0)

#endif
