/* src/preload/dlsym.c - dlsym itself, overridden: a program (or the CUDA
 * runtime, even linked statically) that looks a driver function up with
 * dlsym(handle, name) on libcuda, libnvcuvid or NVML gets the hook of that
 * exact name, since a lookup in a handle never sees a preloaded library.
 * Exported as dlsym@GLIBC_2.2.5 and dlsym@@GLIBC_2.34 (preload.map), the
 * real one taken with dlvsym. Lookups by the driver libraries, vramkit's
 * core and this library, and names not hooked, get what glibc finds. */

#include <dlfcn.h>

#include "preload_internal.h"

__attribute__((visibility("default"))) void *vram__pl_dlsym_234(void *handle, const char *name);
__attribute__((visibility("default"))) void *vram__pl_dlsym_225(void *handle, const char *name);

VRAM__PL_EARLY static void *lookup(void *handle, const char *name, const void *caller)
{
    void *fn = vram__pl_real_dlsym(handle, name);
    if (!fn || !vram__pl_active || vram__pl_depth)
        return fn; /* before our start (a sanitizer's), or inside a hook */
    long i = vram__pl_hook_index(name);
    if (i < 0 || fn == vram__pl_hooks[i].fn)
        return fn; /* not hooked, or found ours already (RTLD_DEFAULT) */
    vram__pl_learn((size_t)i, fn);
    if (!vram__pl_hooks[i].fn || vram__pl_internal_caller(caller))
        return fn; /* a helper, or a lookup of the driver's or ours */
    return vram__pl_hooks[i].fn;
}

VRAM__PL_EARLY __attribute__((visibility("default"))) void *vram__pl_dlsym_234(void *handle,
                                                                                const char *name)
{
    return lookup(handle, name, __builtin_return_address(0));
}

VRAM__PL_EARLY __attribute__((visibility("default"))) void *vram__pl_dlsym_225(void *handle,
                                                                                const char *name)
{
    return lookup(handle, name, __builtin_return_address(0));
}

__asm__(".symver vram__pl_dlsym_234, dlsym@@GLIBC_2.34");
__asm__(".symver vram__pl_dlsym_225, dlsym@GLIBC_2.2.5");
