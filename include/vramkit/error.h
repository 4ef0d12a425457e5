/* vramkit/error.h - the one error channel of the library.
 *
 * Every function that can fail returns 0 or a negative VRAM_E* code. The codes
 * come from the X-macro table below, which also generates vram_strerror() and
 * vram_err_name(). The human sentence with the numbers of the last failure on
 * the calling thread is kept by vram_last_error().
 *
 * The rules every header follows unless a function says otherwise: a
 * constructor hands its object back through an out-pointer, which is NULL
 * on error, and the caller destroys the object with the matching
 * *_destroy / *_stop / *_close (each accepts NULL); a call that fails
 * changes nothing; strings and arrays passed in are copied or used only
 * during the call, while objects passed in (a device, a backend, a pool, a
 * monitor) are borrowed and must outlive the object that uses them;
 * strings and descriptors handed back belong to the library and live as
 * long as the object they came from. vram_torch_malloc returns NULL on
 * failure (PyTorch's signature); functions returning void or a value
 * (names, counts) cannot fail, and take no NULL object unless they say so. */
#ifndef VRAMKIT_ERROR_H
#define VRAMKIT_ERROR_H

#include "vramkit/api.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) */
#define VRAM_ERRORS(X)                                                         \
    X(OK, 0, "success")                                                        \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of device memory")                                      \
    X(EBUDGET, -3, "owner budget exceeded")                                    \
    X(EBUSY, -4, "object still in use")                                        \
    X(ENOTALLOC, -5, "pointer not allocated by this pool")                     \
    X(EBACKEND, -6, "backend call failed")                                     \
    X(EPARSE, -7, "malformed input")                                           \
    X(EIO, -8, "input/output error")                                           \
    X(ENOSYS, -9, "not supported")                                             \
    X(EHOSTMEM, -10, "out of host memory")                                     \
    X(ELIMIT, -11, "limit reached")

enum {
#define VRAM_ERROR_ENUM(name, value, text) VRAM_##name = (value),
    VRAM_ERRORS(VRAM_ERROR_ENUM)
#undef VRAM_ERROR_ENUM
};

/* The description of an error code ("owner budget exceeded"); never NULL. */
VRAM_API const char *vram_strerror(int code);

/* The symbolic name of an error code ("VRAM_EBUDGET"); never NULL. */
VRAM_API const char *vram_err_name(int code);

/* The sentence describing the last failure on this thread, with its numbers,
 * e.g. `budget of owner "cam07" exceeded: requested 24.0 MiB, live 230.1 of
 * 256.0 MiB`. Empty when nothing failed yet. Never NULL: a per-thread buffer
 * of the library, valid for the thread's life. Read it right after the call
 * that failed: the next failing call on the thread replaces it, and some
 * successful ones clear it (a pool call that reached its backend does). */
VRAM_API const char *vram_last_error(void);

/* Forget the last error of this thread (vram_last_error() reads ""). */
VRAM_API void vram_clear_error(void);

/* Record a failure: the formatted sentence becomes this thread's
 * vram_last_error() (truncated to 1023 bytes) and `code` is returned, so a
 * failing path reads `return vram_set_error(VRAM_EINVAL, "...", ...)`. For
 * code built on vramkit (a custom backend, a layer of its own) that reports
 * through the same channel. The arguments may include vram_last_error(). */
VRAM_API int vram_set_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
VRAM_API int vram_set_errorv(int code, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
