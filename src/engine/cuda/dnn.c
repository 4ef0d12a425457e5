/* src/engine/cuda/dnn.c - opening cuDNN and cuBLAS (see dnn.h) and turning
 * their status codes into vramkit's error model. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "dnn.h"

vram__dnn_api vram__dnn;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[320];

/* The first of `names` that opens, or NULL with the reason in load_msg. */
static void *open_first(const char *const *names, const char *what)
{
    const char *why = "not found";
    for (const char *const *n = names; *n; n++) {
        void *lib = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
        const char *e = dlerror();
        if (e)
            why = e;
    }
    snprintf(load_msg, sizeof load_msg, "the cuda executor needs %s: cannot load %s (%s)", what,
             names[0], why);
    return NULL;
}

static void load(void)
{
    static const char *const cudnn_names[] = {"libcudnn.so.9", "libcudnn.so", NULL};
    static const char *const cublas_names[] = {"libcublas.so.13", "libcublas.so", NULL};
    void *cudnn = open_first(cudnn_names, "cuDNN 9");
    void *cublas = cudnn ? open_first(cublas_names, "cuBLAS 13") : NULL;
    if (!cudnn || !cublas) {
        load_rc = VRAM_ENOSYS;
        return;
    }
#define VRAM__DNN_GET(lib, what, fn)                                                          \
    *(void **)&vram__dnn.fn = dlsym(lib, #fn);                                                \
    if (!vram__dnn.fn) {                                                                      \
        snprintf(load_msg, sizeof load_msg, "%s lacks %s: it is older than vramkit needs",      \
                 what, #fn);                                                                  \
        load_rc = VRAM_ENOSYS;                                                                \
        return;                                                                               \
    }
#define VRAM__GET_CUDNN(fn) VRAM__DNN_GET(cudnn, "cuDNN", fn)
#define VRAM__GET_CUBLAS(fn) VRAM__DNN_GET(cublas, "cuBLAS", fn)
    VRAM_CUDNN_FUNCS(VRAM__GET_CUDNN)
    VRAM_CUBLAS_FUNCS(VRAM__GET_CUBLAS)
#undef VRAM__GET_CUBLAS
#undef VRAM__GET_CUDNN
#undef VRAM__DNN_GET
    size_t v = vram__dnn.cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
        snprintf(load_msg, sizeof load_msg,
                 "cuDNN %zu.%zu is loaded but vramkit was built against cuDNN %d", v / 10000,
                 v / 100 % 100, CUDNN_MAJOR);
        load_rc = VRAM_ENOSYS;
    }
}

int vram__dnn_load(void)
{
    pthread_once(&load_once, load);
    if (load_rc)
        return vram__fail(load_rc, "%s", load_msg);
    return 0;
}

int vram__cudnn_fail(cudnnStatus_t s, const char *what)
{
    const char *text = vram__dnn.cudnnGetErrorString ? vram__dnn.cudnnGetErrorString(s) : "?";
    return vram__fail(s == CUDNN_STATUS_ALLOC_FAILED ? VRAM_ENOMEM : VRAM_EBACKEND,
                      "%s failed: %s (%d)", what, text, (int)s);
}

int vram__cublas_fail(cublasStatus_t s, const char *what)
{
    const char *text = vram__dnn.cublasGetStatusString ? vram__dnn.cublasGetStatusString(s) : "?";
    return vram__fail(s == CUBLAS_STATUS_ALLOC_FAILED ? VRAM_ENOMEM : VRAM_EBACKEND,
                      "%s failed: %s (%d)", what, text, (int)s);
}
