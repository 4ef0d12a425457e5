/* vramkit/npy.h - NumPy .npy files, the form an engine's inputs and outputs
 * are exchanged in (`vramkit model run` reads its inputs from them and
 * writes its outputs to them): one array, a small header (a Python dict
 * literal giving 'descr', 'fortran_order' and 'shape') and the raw C-order
 * elements. Reads format versions 1.0, 2.0 and 3.0; writes 1.0.
 *
 * Element types: '<f4' float32, '<f8' float64, '<f2' float16, '<i8' int64,
 * '<i4' int32, '|u1' uint8, '|i1' int8, '|b1' bool (vram_dtype). The byte
 * order may be written '<', '=' or '|' (all mean little-endian, the only
 * host order the library builds for); one-byte types take any byte order,
 * '>' included. Multi-byte big-endian data ('>f4') is refused with
 * VRAM_ENOSYS, not converted. Other valid NumPy types ('<c8', '<u2', '<U5',
 * structured dtypes, ...) are VRAM_ENOSYS too; Fortran-order arrays are
 * VRAM_ENOSYS. Anything malformed is VRAM_EPARSE with a sentence naming the
 * file and the problem with its numbers. Part of libvramkit-engine.
 *
 * Errors and ownership: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). A vram_npy filled by a read is the caller's: its data
 * is released with vram_npy_free() (it is malloc'd). Nothing passed in is
 * kept. Every function is thread-safe on distinct arguments. */
#ifndef VRAMKIT_NPY_H
#define VRAMKIT_NPY_H

#include "vramkit/api.h"

#include <stddef.h>
#include <stdint.h>

#include "vramkit/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One array. data holds nbytes bytes (elements x element size), row-major,
 * owned by the struct; it is never NULL after a successful read, even for
 * an array of zero elements. */
typedef struct vram_npy {
    int dtype;                           /* vram_dtype */
    int rank;                            /* 0 .. VRAM_TENSOR_MAX_RANK */
    int64_t dims[VRAM_TENSOR_MAX_RANK];  /* each >= 0 */
    void *data;
    size_t nbytes;
} vram_npy;

/* Read the .npy file at `path` into *out (zeroed first: an array it held is
 * not freed, so free it before). Returns 0; or VRAM_EIO (cannot open or
 * read, with strerror), VRAM_EPARSE (malformed), VRAM_ENOSYS (valid but
 * unsupported), VRAM_EHOSTMEM, VRAM_EINVAL (NULL argument or empty path).
 * On error *out holds nothing and needs no vram_npy_free. */
VRAM_API int vram_npy_read(const char *path, vram_npy *out);

/* The same for the `len` bytes of a whole .npy file in memory; `what` names
 * it in messages (a file name, "input 'x'"; NULL reads as "npy data"). The
 * data is copied: `bytes` may go once this returns. Never reads outside
 * [bytes, bytes + len). */
VRAM_API int vram_npy_parse(const void *bytes, size_t len, const char *what, vram_npy *out);

/* Release what *a owns and zero it. Accepts a zeroed struct; may be called
 * twice. */
VRAM_API void vram_npy_free(vram_npy *a);

/* Write one array as a version 1.0 .npy file at `path` (created or
 * truncated). `data` holds elements x element size bytes, row-major; it may
 * be NULL when there are no elements. Returns 0; VRAM_EINVAL for a NULL
 * argument, an unsupported dtype, a rank outside 0..VRAM_TENSOR_MAX_RANK, a
 * negative (unknown) dimension or a size that overflows; VRAM_EIO with the
 * path and strerror when the file cannot be created or written. A regular
 * file left half-written by a failed write is removed, so a .npy that exists
 * after an error is never a truncated one of ours. */
VRAM_API int vram_npy_write(const char *path, int dtype, int rank, const int64_t *dims, const void *data);

/* The file name `model run` gives a tensor: every byte that is not an ASCII
 * letter, digit, '.', '-' or '_' becomes '_' (a multi-byte UTF-8 character
 * becomes one '_' per byte), so "input:0" gives "input_0" and "a/b" gives
 * "a_b". Results that would name no file or the wrong one are changed: ""
 * gives "_", "." gives "_" and ".." gives "_." (the first byte becomes
 * '_'). Writes the NUL-terminated result to out (cap bytes). Returns 0;
 * VRAM_EINVAL if an argument is NULL or the result and its NUL do not fit in
 * cap bytes (out then holds "" when cap > 0). */
VRAM_API int vram_npy_file_name(const char *name, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
