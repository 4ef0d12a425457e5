/* tests/preload/app_procaddr.c - entry points as the CUDA runtime gets
 * them: through cuGetProcAddress (the CUDA 11.3 ABI) and
 * cuGetProcAddress_v2 (12.0), at cudaVersion 12000 and at the driver's own
 * version, with the flags CU_GET_PROC_ADDRESS_DEFAULT, _LEGACY_STREAM and
 * _PER_THREAD_DEFAULT_STREAM. For each of those twelve ways it takes
 * cuMemAllocAsync and cuMemFreeAsync, allocates 1 MiB on a stream and
 * frees it through the pointers, and prints one JSON line: the pointer,
 * whether dlsym of the expected exact name in libcuda's handle gives the
 * same one, and which variant the driver saw called ("ptsz" for the
 * per-thread flag, "legacy" otherwise; read from the stand-in's
 * fake_cuda_thread_last_variant, "unknown" on a real driver). So a
 * library interposed between program and driver can be checked to keep
 * the per-thread flag's _ptsz function behind its own.
 *
 * Then lookups of the version rules, one JSON line each: cuMemAlloc and
 * cuCtxCreate at several versions, per-thread variants of cuMemcpyHtoD
 * and cuStreamSynchronize, a function without one, cuGetProcAddress
 * itself, a version too old, an unknown name, a version above the
 * driver's, and the 11.3 ABI's answer for an unknown name. Last, a
 * summary line. Exit status 0 when every case is as the driver documents.
 *
 *   app_procaddr [--any-pointer]
 *
 * --any-pointer: do not require the pointers to be dlsym's (for a driver
 * that hands out others). */
#include "app_common.h"

typedef const char *(*variant_fn)(void);

static app_cuda c;
static variant_fn last_variant, last_call;
static int any_pointer, failures, cases;

static const char *variant(void) { return last_variant ? last_variant() : "unknown"; }
static const char *call_name(void) { return last_call ? last_call() : "unknown"; }

static const char *flags_name(cuuint64_t f)
{
    return f == CU_GET_PROC_ADDRESS_DEFAULT         ? "DEFAULT"
           : f == CU_GET_PROC_ADDRESS_LEGACY_STREAM ? "LEGACY_STREAM"
                                                    : "PER_THREAD_DEFAULT_STREAM";
}

static const char *status_name(CUdriverProcAddressQueryResult s)
{
    return s == CU_GET_PROC_ADDRESS_SUCCESS            ? "SUCCESS"
           : s == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? "SYMBOL_NOT_FOUND"
                                                       : "VERSION_NOT_SUFFICIENT";
}

static const char *symbol_of(void *fn)
{
    Dl_info di;
    return fn && dladdr(fn, &di) && di.dli_sname ? di.dli_sname : "";
}

static int same_as_dlsym(void *fn, const char *exact)
{
    return exact && fn && fn == dlsym(c.lib, exact);
}

static void alloc_case(int old_abi, int version, cuuint64_t flags, CUstream s)
{
    PFN_cuGetProcAddress_v11030 old =
        (PFN_cuGetProcAddress_v11030)app_sym(c.lib, "cuGetProcAddress");
    void *a = NULL, *f = NULL;
    CUresult ra, rf;
    if (old_abi) {
        ra = old("cuMemAllocAsync", &a, version, flags);
        rf = old("cuMemFreeAsync", &f, version, flags);
    } else {
        CUdriverProcAddressQueryResult st;
        ra = c.get("cuMemAllocAsync", &a, version, flags, &st);
        rf = c.get("cuMemFreeAsync", &f, version, flags, &st);
    }
    int pt = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const char *want_alloc = pt ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync";
    const char *want_free = pt ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync";
    const char *want_variant = pt ? "ptsz" : "legacy";
    char alloc_variant[16] = "", free_variant[16] = "", alloc_call[64] = "";
    CUresult r_alloc = CUDA_ERROR_NOT_FOUND, r_free = CUDA_ERROR_NOT_FOUND;
    if (ra == CUDA_SUCCESS && rf == CUDA_SUCCESS && a && f) {
        CUdeviceptr p = 0;
        r_alloc = ((PFN_cuMemAllocAsync_v11020)a)(&p, APP_MIB, s);
        snprintf(alloc_variant, sizeof alloc_variant, "%s", variant());
        snprintf(alloc_call, sizeof alloc_call, "%s", call_name());
        if (r_alloc == CUDA_SUCCESS) {
            r_free = ((PFN_cuMemFreeAsync_v11020)f)(p, s);
            snprintf(free_variant, sizeof free_variant, "%s", variant());
        }
    }
    int same = same_as_dlsym(a, want_alloc) && same_as_dlsym(f, want_free);
    int variants_ok = !last_variant ||
                      (!strcmp(alloc_variant, want_variant) && !strcmp(free_variant, want_variant));
    int ok =
        r_alloc == CUDA_SUCCESS && r_free == CUDA_SUCCESS && variants_ok && (same || any_pointer);
    cases++;
    failures += !ok;
    printf("{\"case\":\"alloc\",\"getter\":\"%s\",\"version\":%d,\"flags\":\"%s\","
           "\"expect\":\"%s\",\"pointer\":\"%p\",\"symbol\":\"%s\",\"same_as_dlsym\":%s,"
           "\"alloc_result\":\"%s\",\"free_result\":\"%s\",\"alloc_call\":\"%s\","
           "\"alloc_variant\":\"%s\",\"free_variant\":\"%s\",\"ok\":%s}\n",
           old_abi ? "cuGetProcAddress" : "cuGetProcAddress_v2", version, flags_name(flags),
           want_alloc, a, symbol_of(a), same ? "true" : "false", app_err(&c, r_alloc),
           app_err(&c, r_free), alloc_call, alloc_variant, free_variant, ok ? "true" : "false");
}

/* One lookup through cuGetProcAddress_v2 (or the 11.3 ABI): `exact` the
 * function expected (NULL: none), with the result and status expected. */
static void lookup_case(int old_abi, const char *symbol, int version, cuuint64_t flags,
                        const char *exact, CUresult want_r, CUdriverProcAddressQueryResult want_st)
{
    void *fn = (void *)&lookup_case; /* must be overwritten */
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r;
    if (old_abi) {
        PFN_cuGetProcAddress_v11030 old =
            (PFN_cuGetProcAddress_v11030)app_sym(c.lib, "cuGetProcAddress");
        r = old(symbol, &fn, version, flags);
    } else {
        r = c.get(symbol, &fn, version, flags, &st);
    }
    int ok = r == want_r;
    if (ok && r == CUDA_SUCCESS && !old_abi)
        ok = st == want_st;
    if (ok && exact)
        ok = fn && (same_as_dlsym(fn, exact) || any_pointer);
    if (ok && !exact && (r == CUDA_SUCCESS || old_abi))
        ok = fn == NULL; /* nothing found: NULL */
    cases++;
    failures += !ok;
    printf("{\"case\":\"lookup\",\"getter\":\"%s\",\"symbol\":\"%s\",\"version\":%d,"
           "\"flags\":\"%s\",\"expect\":\"%s\",\"result\":\"%s\",\"status\":\"%s\","
           "\"pointer\":\"%p\",\"got\":\"%s\",\"ok\":%s}\n",
           old_abi ? "cuGetProcAddress" : "cuGetProcAddress_v2", symbol, version, flags_name(flags),
           exact ? exact : "", app_err(&c, r), old_abi ? "" : status_name(st),
           fn == (void *)&lookup_case ? NULL : fn, fn == (void *)&lookup_case ? "" : symbol_of(fn),
           ok ? "true" : "false");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--any-pointer"))
            any_pointer = 1;
        else
            app_die("usage: app_procaddr [--any-pointer]");
    }
    app_open_cuda(&c);
    *(void **)&last_variant = dlsym(c.lib, "fake_cuda_thread_last_variant");
    *(void **)&last_call = dlsym(c.lib, "fake_cuda_thread_last_call");

    int driver = 0;
    APP_CHECK(&c, APP_PROC(&c, cuDriverGetVersion, 2020)(&driver));
    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUdevice dev;
    APP_CHECK(&c, APP_PROC(&c, cuDeviceGet, 2000)(&dev, 0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, dev));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));
    CUstream s;
    APP_CHECK(&c, APP_PROC(&c, cuStreamCreate, 2000)(&s, CU_STREAM_NON_BLOCKING));

    const int versions[2] = {12000, driver};
    const cuuint64_t flags[3] = {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
    for (int old_abi = 1; old_abi >= 0; old_abi--)
        for (int v = 0; v < 2; v++)
            for (int f = 0; f < 3; f++)
                alloc_case(old_abi, versions[v], flags[f], s);

    const cuuint64_t D = CU_GET_PROC_ADDRESS_DEFAULT, L = CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                     P = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const CUdriverProcAddressQueryResult OK = CU_GET_PROC_ADDRESS_SUCCESS;
    lookup_case(0, "cuMemAlloc", 2000, D, "cuMemAlloc", CUDA_SUCCESS, OK);
    lookup_case(0, "cuMemAlloc", 3020, D, "cuMemAlloc_v2", CUDA_SUCCESS, OK);
    lookup_case(0, "cuMemAlloc", 12000, P, "cuMemAlloc_v2", CUDA_SUCCESS, OK);
    lookup_case(0, "cuCtxCreate", 3020, D, "cuCtxCreate_v2", CUDA_SUCCESS, OK);
    lookup_case(0, "cuCtxCreate", 11040, D, "cuCtxCreate_v3", CUDA_SUCCESS, OK);
    lookup_case(0, "cuCtxCreate", 12040, D, "cuCtxCreate_v3", CUDA_SUCCESS, OK);
    lookup_case(0, "cuCtxCreate", 12050, D, "cuCtxCreate_v4", CUDA_SUCCESS, OK);
    lookup_case(0, "cuMemcpyHtoD", 12000, L, "cuMemcpyHtoD_v2", CUDA_SUCCESS, OK);
    lookup_case(0, "cuMemcpyHtoD", 12000, P, "cuMemcpyHtoD_v2_ptds", CUDA_SUCCESS, OK);
    lookup_case(0, "cuStreamSynchronize", 12000, P, "cuStreamSynchronize_ptsz", CUDA_SUCCESS, OK);
    lookup_case(0, "cuStreamSynchronize", 12000, D, "cuStreamSynchronize", CUDA_SUCCESS, OK);
    lookup_case(0, "cuGetProcAddress", 11030, D, "cuGetProcAddress", CUDA_SUCCESS, OK);
    lookup_case(0, "cuGetProcAddress", 12000, D, "cuGetProcAddress_v2", CUDA_SUCCESS, OK);
    lookup_case(0, "cuMemAllocAsync", 11000, D, NULL, CUDA_SUCCESS,
                CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    lookup_case(0, "cuNoSuchFunction", 12000, D, NULL, CUDA_SUCCESS,
                CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    lookup_case(0, "cuMemAlloc", driver + 10, D, NULL, CUDA_ERROR_INVALID_VALUE, OK);
    lookup_case(1, "cuNoSuchFunction", 12000, D, NULL, CUDA_ERROR_NOT_FOUND, OK);
    lookup_case(1, "cuMemAlloc", 12000, D, "cuMemAlloc_v2", CUDA_SUCCESS, OK);

    APP_CHECK(&c, APP_PROC(&c, cuStreamDestroy, 4000)(s));
    printf("{\"app\":\"procaddr\",\"driver_version\":%d,\"cases\":%d,\"failures\":%d}\n", driver,
           cases, failures);
    return failures ? 1 : 0;
}
