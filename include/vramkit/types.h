/* vramkit/types.h - small types shared by every module of the public API.
 *
 * Errors and ownership: the writers below return 0 or a negative VRAM_E*
 * code with the sentence in vram_last_error(); a vram_buffer's text is the
 * caller's, released with vram_buffer_free(). */
#ifndef VRAMKIT_TYPES_H
#define VRAMKIT_TYPES_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A stream of work on the device (a cudaStream_t / CUstream, or any non-zero
 * handle on backends without real streams). NULL is the default stream. */
typedef void *vram_stream;

/* Output sink for everything the library prints (tables, JSON, snapshots):
 * write `len` bytes of `data`; return 0 or a negative VRAM_E* code, which
 * aborts the printing and is returned by the printing function (what was
 * written before stays written). `data` is valid for the call only. It runs
 * on the printing call's thread; a printer that holds the object's lock
 * while writing says so, and its writer must not call that object. */
typedef int (*vram_write_fn)(void *ctx, const char *data, size_t len);

/* The flags of every print function. They all take (object, write, ctx,
 * flags), write through `write`, and return 0, the writer's error, or
 * VRAM_EINVAL for flags they do not know. */
#define VRAM_PRINT_JSON 0x1u /* one JSON object (and a newline) instead of text */

/* A vram_write_fn writing to a FILE * passed as ctx (not NULL). VRAM_EIO
 * with strerror when fwrite falls short. */
VRAM_API int vram_write_stdio(void *file, const char *data, size_t len);

/* Text collected in memory: pass vram_write_buffer as the writer and a
 * zeroed vram_buffer as its ctx. The bytes accumulate in `data` (malloc'd,
 * NUL-terminated once anything was written, NULL before; `len` excludes the
 * NUL); the owner releases them with vram_buffer_free(). */
typedef struct vram_buffer {
    char *data;
    size_t len, cap;
} vram_buffer;

/* A vram_write_fn appending to the vram_buffer passed as ctx. Returns 0,
 * VRAM_EINVAL for a NULL ctx, or VRAM_EHOSTMEM (nothing appended; the text
 * so far stays, still the caller's to free) when it cannot grow. Not
 * thread-safe: one buffer takes one writer at a time. */
VRAM_API int vram_write_buffer(void *buffer, const char *data, size_t len);

/* Free the text and empty the buffer for reuse; NULL is accepted. */
VRAM_API void vram_buffer_free(vram_buffer *buffer);

#ifdef __cplusplus
}
#endif
#endif
