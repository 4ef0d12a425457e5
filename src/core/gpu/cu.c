/* src/core/gpu/cu.c - loading the CUDA driver (see cu.h): dlopen, cuGetProcAddress
 * for each entry point at this build's CUDA_VERSION, cuInit; and turning a
 * CUresult into vramkit's error model. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"

vram__cu_api vram__cu;

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *status);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[256];
static get_proc_fn get; /* the driver's cuGetProcAddress_v2 */

static void load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(load_msg, sizeof load_msg, "no CUDA driver: cannot load libcuda.so.1 (%s)",
                 e ? e : "not found");
        load_rc = VRAM_ENOSYS;
        return;
    }
    *(void **)&get = dlsym(lib, "cuGetProcAddress_v2");
    if (!get) {
        snprintf(load_msg, sizeof load_msg,
                 "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 "
                 "(CUDA 12.0 or newer is needed)");
        load_rc = VRAM_ENOSYS;
        return;
    }
    CUdriverProcAddressQueryResult status;
#define VRAM__CU_GET(fn, ver)                                                                 \
    _Static_assert(__builtin_types_compatible_p(PFN_##fn##_v##ver, __typeof__(&fn)),           \
                   #fn " at version " #ver " is not the prototype cuda.h declares");          \
    if (get(#fn, (void **)&vram__cu.fn, ver, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=          \
            CUDA_SUCCESS ||                                                                   \
        !vram__cu.fn) {                                                                       \
        snprintf(load_msg, sizeof load_msg,                                                   \
                 "the CUDA driver lacks %s (version %d, status %d); it is older than vramkit " \
                 "needs",                                                                     \
                 #fn, ver, (int)status);                                                      \
        load_rc = VRAM_ENOSYS;                                                                \
        return;                                                                               \
    }
    VRAM_CU_FUNCS(VRAM__CU_GET)
#undef VRAM__CU_GET
    CUresult r = vram__cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        vram__cu.cuGetErrorName(r, &name);
        snprintf(load_msg, sizeof load_msg, "no usable GPU: cuInit failed: %s", name);
        load_rc = VRAM_ENOSYS;
    }
}

int vram__cu_load(void)
{
    pthread_once(&load_once, load);
    if (load_rc)
        return vram__fail(load_rc, "%s", load_msg);
    return 0;
}

int vram_cuda_proc(const char *symbol, int cuda_version, void **fn)
{
    if (!symbol || !fn)
        return vram__fail(VRAM_EINVAL, "vram_cuda_proc: symbol and fn are required");
    *fn = NULL;
    int rc = vram__cu_load();
    if (rc)
        return rc;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = get(symbol, fn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || !*fn || status != CU_GET_PROC_ADDRESS_SUCCESS) {
        *fn = NULL;
        return vram__fail(VRAM_ENOSYS, "the CUDA driver has no %s at version %d (%s)", symbol,
                          cuda_version,
                          status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              ? "the driver is older than that version"
                              : "no such entry point");
    }
    return 0;
}

int vram_cuda_fail(int result, const char *what, ...)
{
    char head[192];
    va_list ap;
    va_start(ap, what);
    vsnprintf(head, sizeof head, what, ap);
    va_end(ap);
    CUresult r = (CUresult)result;
    const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
    if (vram__cu.cuGetErrorName)
        vram__cu.cuGetErrorName(r, &name);
    if (vram__cu.cuGetErrorString)
        vram__cu.cuGetErrorString(r, &text);
    int code = r == CUDA_ERROR_OUT_OF_MEMORY ? VRAM_ENOMEM : VRAM_EBACKEND;
    return vram__fail(code, "%s failed: %s (%s)", head, name, text);
}
