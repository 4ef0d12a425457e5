/* tests/preload/fake_cuda_procaddr.c - cuGetProcAddress of the stand-in
 * driver, in its two ABIs: cuGetProcAddress (CUDA 11.3 to 11.8: symbol,
 * pfn, cudaVersion, flags) and cuGetProcAddress_v2 (CUDA 12.0 on: plus the
 * optional symbolStatus). Both look the base name up in the table of
 * fake_cuda_symbols.h and answer the newest exported version introduced at
 * or before cudaVersion (cuMemAlloc: cuMemAlloc below 3020, cuMemAlloc_v2
 * from it; cuCtxCreate: _v2 from 3020, _v3 from 11040, _v4 from 12050).
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM takes the _ptsz/_ptds
 * variant where one exists (the plain one otherwise); DEFAULT and
 * LEGACY_STREAM take the plain one (a driver cannot know how the caller
 * was compiled: cuda.h's inline wrapper adds the per-thread flag). As the
 * driver documents: a cudaVersion above the driver's is
 * CUDA_ERROR_INVALID_VALUE; a name not found, or found only in newer
 * versions, is CUDA_SUCCESS with *pfn NULL and symbolStatus
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND or _VERSION_NOT_SUFFICIENT for the
 * _v2 ABI, and CUDA_ERROR_NOT_FOUND for the 11.3 one.
 *
 * The pointers are the library's own exported functions, the same that
 * dlsym finds in its handle: the table takes their addresses inside the
 * library (linked with -Bsymbolic-functions), never through dlsym, so a
 * library that interposes dlsym or a driver name cannot change what the
 * stand-in answers. With FAKE_CUDA_PROC_TRAMPOLINES=1 (x86-64 and aarch64)
 * they are hidden trampolines instead, each jumping to its function: a
 * pointer no dlsym ever returns, to test code that must not count on
 * getting dlsym's.
 *
 * Every symbol's prototype is checked at compile time against the
 * toolkit's PFN_ typedef of the version the table gives it. */
#include "fake_cuda_internal.h" /* first: cuda.h as the driver includes it */

#include <cudaTypedefs.h>
#include <string.h>

#define FC__PFN_N(base, ver) PFN_##base##_v##ver
#define FC__PFN_PTSZ(base, ver) PFN_##base##_v##ver##_ptsz
#define FC__PFN_PTDS(base, ver) PFN_##base##_v##ver##_ptds
#define FC__CHECK(base, ver, sym, pt)                                                              \
    _Static_assert(__builtin_types_compatible_p(FC__PFN_##pt(base, ver), __typeof__(&sym)),        \
                   #sym " is not PFN_" #base "_v" #ver);
FC_SYMBOLS(FC__CHECK)
#undef FC__CHECK

/* ---- trampolines ---- */

#if defined(__x86_64__)
#define FC__TRAMP(base, ver, sym, pt)                                                              \
    __asm__(".text\n\t.p2align 4\n\t.globl fc_tramp_" #sym "\n\t.hidden fc_tramp_" #sym            \
            "\n\t.type fc_tramp_" #sym ",@function\nfc_tramp_" #sym ":\n\tendbr64\n\tjmp " #sym    \
            "\n\t.size fc_tramp_" #sym ",.-fc_tramp_" #sym "\n");
#define FC_HAVE_TRAMPOLINES 1
#elif defined(__aarch64__)
#define FC__TRAMP(base, ver, sym, pt)                                                              \
    __asm__(".text\n\t.p2align 4\n\t.globl fc_tramp_" #sym "\n\t.hidden fc_tramp_" #sym            \
            "\n\t.type fc_tramp_" #sym ",%function\nfc_tramp_" #sym ":\n\tbti c\n\tb " #sym        \
            "\n\t.size fc_tramp_" #sym ",.-fc_tramp_" #sym "\n");
#define FC_HAVE_TRAMPOLINES 1
#else
#define FC_HAVE_TRAMPOLINES 0
#endif

#if FC_HAVE_TRAMPOLINES
FC_SYMBOLS(FC__TRAMP)
#pragma GCC visibility push(hidden)
#define FC__TRAMP_DECL(base, ver, sym, pt) void fc_tramp_##sym(void);
FC_SYMBOLS(FC__TRAMP_DECL)
#pragma GCC visibility pop
#define FC__TRAMP_ADDR(sym) ((void *)&fc_tramp_##sym)
#else
#define FC__TRAMP_ADDR(sym) ((void *)&sym)
#endif

/* ---- the table ---- */

enum { FC_PT_N = 0, FC_PT_PTSZ = 1, FC_PT_PTDS = 2 };

typedef struct fc_proc {
    const char *base;
    int version;
    int pt;
    void *fn, *tramp;
} fc_proc;

static const fc_proc procs[FC_N_SYMBOLS] = {
#define FC__ROW(base, ver, sym, pt) {#base, ver, FC_PT_##pt, (void *)&sym, FC__TRAMP_ADDR(sym)},
    FC_SYMBOLS(FC__ROW)
#undef FC__ROW
};

/* Each symbol's variant: per-thread ones by their suffix, and the plain
 * twins of per-thread ones "legacy". */
static const char *variants[FC_N_SYMBOLS];
static pthread_once_t variants_once = PTHREAD_ONCE_INIT;

static void find_variants(void)
{
    static const char *const names[] = {"legacy", "ptsz", "ptds"};
    for (int i = 0; i < FC_N_SYMBOLS; i++) {
        if (!procs[i].pt)
            continue;
        variants[i] = names[procs[i].pt];
        for (int j = 0; j < FC_N_SYMBOLS; j++)
            if (!procs[j].pt && !strcmp(procs[j].base, procs[i].base))
                variants[j] = names[0];
    }
}

const char *fc_symbol_variant(enum fc_symbol_id id)
{
    pthread_once(&variants_once, find_variants);
    return variants[id];
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t both =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!symbol || !pfn || (flags & ~both) || (flags & both) == both || version > CUDA_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int named = 0, best = -1, best_pt = -1;
    for (int i = 0; i < FC_N_SYMBOLS; i++) {
        if (strcmp(procs[i].base, symbol) != 0)
            continue;
        named = 1;
        if (procs[i].version > version)
            continue;
        int *slot = procs[i].pt ? &best_pt : &best;
        if (*slot < 0 || procs[i].version > procs[*slot].version)
            *slot = i;
    }
    int pick = want_pt && best_pt >= 0 ? best_pt : best;
    if (pick < 0) {
        *status = named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                        : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    }
    *pfn = fc_g.trampolines ? procs[pick].tramp : procs[pick].fn;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    FC_ENTER(cuGetProcAddress_v2);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = lookup(symbol, pfn, cudaVersion, flags, &st);
    if (symbolStatus)
        *symbolStatus = st;
    return r;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    FC_ENTER(cuGetProcAddress);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = lookup(symbol, pfn, cudaVersion, flags, &st);
    return r == CUDA_SUCCESS && st != CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_ERROR_NOT_FOUND : r;
}
