/* tests/preload/app_common.h - what the app_*.c programs share: loading
 * libcuda.so.1 as the CUDA runtime does (dlopen by soname, then
 * cuGetProcAddress_v2 for every other entry point), failing loudly,
 * reading byte counts ("4M", "512K") and the names of CUresult codes.
 * The programs are ordinary CUDA programs: they run against the real
 * driver as well as against the stand-ins of tests/preload (those found
 * through their RUNPATH), and print what they did as one JSON line each. */
#ifndef APP_COMMON_H
#define APP_COMMON_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APP_MIB (1024ull * 1024ull)

__attribute__((format(printf, 1, 2), noreturn)) static inline void app_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* A byte count with an optional K, M, G suffix (powers of 1024). */
static inline unsigned long long app_bytes(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        app_die("not a byte count: %s", s);
    switch (*end) {
    case 'k':
    case 'K': return v << 10;
    case 'm':
    case 'M': return v << 20;
    case 'g':
    case 'G': return v << 30;
    case '\0': return v;
    default: app_die("not a byte count: %s", s);
    }
}

static inline void *app_open(const char *soname)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        app_die("cannot load %s: %s", soname, dlerror());
    return h;
}

static inline void *app_sym(void *lib, const char *name)
{
    void *fn = dlsym(lib, name);
    if (!fn)
        app_die("no %s", name);
    return fn;
}

/* The driver loaded the CUDA runtime's way. */
typedef struct app_cuda {
    void *lib;
    PFN_cuGetProcAddress_v12000 get;
    PFN_cuGetErrorName_v6000 error_name;
} app_cuda;

static inline void *app_proc_flags(const app_cuda *c, const char *name, int version,
                                   cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = c->get(name, &fn, version, flags, &st);
    if (r != CUDA_SUCCESS || !fn || st != CU_GET_PROC_ADDRESS_SUCCESS)
        app_die("cuGetProcAddress_v2(%s, %d) failed: result %d, status %d", name, version, (int)r,
                (int)st);
    return fn;
}

static inline void *app_proc(const app_cuda *c, const char *name, int version)
{
    return app_proc_flags(c, name, version, CU_GET_PROC_ADDRESS_DEFAULT);
}

/* APP_PROC(c, cuMemAlloc, 3020): the entry point typed as cudaTypedefs.h says. */
#define APP_PROC(c, name, ver) ((PFN_##name##_v##ver)app_proc((c), #name, ver))

static inline void app_open_cuda(app_cuda *c)
{
    c->lib = app_open("libcuda.so.1");
    c->get = (PFN_cuGetProcAddress_v12000)app_sym(c->lib, "cuGetProcAddress_v2");
    c->error_name = APP_PROC(c, cuGetErrorName, 6000);
}

static inline const char *app_err(const app_cuda *c, CUresult r)
{
    const char *s = NULL;
    if (!c->error_name || c->error_name(r, &s) != CUDA_SUCCESS || !s)
        return "CUDA_ERROR_UNRECOGNIZED";
    return s;
}

/* Die unless a driver call succeeded. */
#define APP_CHECK(c, call)                                                                         \
    do {                                                                                           \
        CUresult app_r_ = (call);                                                                  \
        if (app_r_ != CUDA_SUCCESS)                                                                \
            app_die("%s failed: %s (%d)", #call, app_err((c), app_r_), (int)app_r_);               \
    } while (0)

#endif
