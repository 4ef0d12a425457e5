/* src/preload/real.c - the real functions behind the hooks: glibc's dlsym
 * (taken with dlvsym, since dlsym itself is ours), each library's own
 * function for every hooked name (looked up by exact name in the library
 * the first time one of its hooks needs it, or learnt when the program's
 * dlsym found it), routing a pointer the library handed out to the hook of
 * the same exact name, and telling the driver's, vramkit's and this
 * library's own lookups from the program's by their return address. */

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "preload_internal.h"
#include "vramkit/device.h"

static const char *const sonames[VRAM__PL_LIBS] = {"libcuda.so.1", "libnvcuvid.so.1",
                                                   "libnvidia-ml.so.1"};

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) real_dlsym_fn;

/* dlsym may be asked before anything of ours ran (a sanitizer's runtime,
 * preloaded first, looks its functions up as it starts): no lock, no
 * instrumentation, and looking it up twice is harmless. */
VRAM__PL_EARLY void *vram__pl_real_dlsym(void *handle, const char *name)
{
    dlsym_fn fn = atomic_load_explicit(&real_dlsym_fn, memory_order_acquire);
    if (!fn) {
        fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!fn)
            fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        atomic_store_explicit(&real_dlsym_fn, fn, memory_order_release);
    }
    return fn ? fn(handle, name) : NULL;
}

/* The libraries' functions, by hook index; filled per library once. */
static _Atomic(void *) reals[512];
static pthread_once_t lib_once[VRAM__PL_LIBS] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                 PTHREAD_ONCE_INIT};
static int once_lib;
static pthread_mutex_t once_mu = PTHREAD_MUTEX_INITIALIZER;

static void fill(int lib)
{
    vram__pl_depth++;
    void *h = dlopen(sonames[lib], RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen(sonames[lib], RTLD_NOW | RTLD_GLOBAL);
    for (size_t i = 0; h && i < vram__pl_n_hooks; i++)
        if (vram__pl_hooks[i].lib == lib && !atomic_load(&reals[i]))
            atomic_store(&reals[i], vram__pl_real_dlsym(h, vram__pl_hooks[i].name));
    vram__pl_depth--;
}

static void fill_once(void) { fill(once_lib); }

static void load_lib(int lib)
{
    /* pthread_once takes no argument: one library at a time. */
    pthread_mutex_lock(&once_mu);
    once_lib = lib;
    pthread_once(&lib_once[lib], fill_once);
    pthread_mutex_unlock(&once_mu);
}

void *vram__pl_real(size_t i)
{
    void *fn = atomic_load_explicit(&reals[i], memory_order_acquire);
    if (fn)
        return fn;
    load_lib(vram__pl_hooks[i].lib);
    return atomic_load(&reals[i]);
}

void vram__pl_learn(size_t i, void *fn)
{
    void *none = NULL;
    atomic_compare_exchange_strong(&reals[i], &none, fn);
}

long vram__pl_hook_index(const char *name)
{
    if (!name || (name[0] != 'c' && name[0] != 'n'))
        return -1;
    for (size_t i = 0; i < vram__pl_n_hooks; i++)
        if (!strcmp(vram__pl_hooks[i].name, name))
            return (long)i;
    return -1;
}

void *vram__pl_route(void *fn)
{
    if (!fn)
        return fn;
    load_lib(VRAM__PL_LIB_CUDA);
    for (size_t i = 0; i < vram__pl_n_hooks; i++)
        if (vram__pl_hooks[i].fn && atomic_load_explicit(&reals[i], memory_order_relaxed) == fn)
            return vram__pl_hooks[i].fn;
    return fn;
}

/* ---- whose call ---- */

/* The loaded objects whose calls are not the program's: the driver
 * libraries, vramkit's core and this library. */
static int is_internal_object(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char *const names[] = {"libcuda.so", "libnvcuvid.so", "libnvidia-ml.so",
                                        "libvramkit-core.so", "libvram_preload.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i])))
            return 1;
    return 0;
}

int vram__pl_internal_caller(const void *ra)
{
    Dl_info di;
    return dladdr(ra, &di) && di.dli_fname && is_internal_object(di.dli_fname);
}
