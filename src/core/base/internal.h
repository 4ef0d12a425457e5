/* src/core/base/internal.h - helpers shared by the library's files (vram__ prefix):
 * setting the per-thread error sentence, size formatting and parsing, the
 * monotonic clock, and checked host allocation. Not part of the public API. */
#ifndef VRAM_BASE_INTERNAL_H
#define VRAM_BASE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit/error.h"

#if defined(__GNUC__)
#define VRAM__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define VRAM__LIKELY(x) __builtin_expect(!!(x), 1)
#define VRAM__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define VRAM__PRINTF(a, b)
#define VRAM__LIKELY(x) (x)
#define VRAM__UNLIKELY(x) (x)
#endif

/* Record `code` and a formatted sentence as this thread's last error and
 * return `code`, so a failing path reads `return vram__fail(VRAM_EINVAL, ...)`. */
int vram__fail(int code, const char *fmt, ...) VRAM__PRINTF(2, 3);

/* Prefix this thread's last error with a formatted context ("trace x.csv: ")
 * and return `code`. */
int vram__fail_prefix(int code, const char *fmt, ...) VRAM__PRINTF(2, 3);

/* This thread's last error kept across clean-up calls that record their own
 * or clear it: save, clean up, then `return vram__error_restore(&saved, rc)`. */
typedef struct vram__saved_error {
    char msg[1024];
} vram__saved_error;
void vram__error_save(vram__saved_error *s);
/* Record the saved sentence as the last error again and return `code`. */
int vram__error_restore(const vram__saved_error *s, int code);

/* A caller's options `src` taken over `dst` (which holds the defaults), as
 * far as their `size` (their first member, a uint32_t) says; 0 reads as
 * `this_size`, this version's. dst's size then says this_size. VRAM_EINVAL
 * naming `what` for a size no version of the struct had. */
int vram__opts_take(void *dst, const void *src, size_t this_size, const char *what);

/* Format a byte count for people: "512 B", "24.0 MiB", "1.50 GiB". Writes at
 * most `cap` bytes including the terminator and returns `buf`. */
char *vram__fmt_bytes(char *buf, size_t cap, uint64_t bytes);

/* Parse a size such as "4096", "2M", "2MiB", "1.5G", "64k". Units are powers of
 * 1024. Returns 0 or VRAM_EINVAL with the reason in the last error. */
int vram__parse_size(const char *text, uint64_t *out);

/* Monotonic nanoseconds. */
uint64_t vram__now_ns(void);

/* Host allocation that records VRAM_EHOSTMEM on failure (returns NULL). */
void *vram__calloc(size_t n, size_t size);
void *vram__realloc_array(void *ptr, size_t n, size_t size);
/* Read the whole file at `path` into a malloc'd buffer (*buf, *len bytes;
 * free it). Errors name `what` (e.g. the path): VRAM_EIO "cannot open/read
 * <what>: <strerror>", VRAM_EHOSTMEM. */
int vram__read_file(const char *path, const char *what, void **buf, size_t *len);
char *vram__strdup(const char *s);
/* Read the whole file at `path`, plain or gzip (decompressed as it is
 * read), into a malloc'd buffer terminated by a 0 byte that *len does not
 * count (free it). Errors (VRAM_EIO: cannot open, a directory, a read
 * error, gzip data cut short, more than max_bytes once decompressed;
 * VRAM_EHOSTMEM) name the file as `what` followed by the path ("trace "). */
int vram__read_gz_file(const char *path, const char *what, uint64_t max_bytes, char **buf,
                       size_t *len);

/* Make room for one more element in a growable array (`arr`, with *cap
 * elements allocated, n used): doubles the capacity, starting at `first`.
 * Returns the array to use from now on, or NULL (VRAM_EHOSTMEM recorded;
 * `arr` is unchanged and still owned by the caller). */
void *vram__grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first);

/* The name of choice `index` of CHOICE option `name` ("BACKEND", 2 ->
 * "cuda") into buf (cap bytes). VRAM_EINVAL for an unknown option or index. */
int vram__config_choice_name(const char *name, int index, char *buf, size_t cap);

/* Forget every override and re-read the environment (a test hook). */
void vram_config_reset(void);

#define VRAM__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static inline uint64_t vram__align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static inline int vram__is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

#endif
