/* tests/preload/fake_nvcuvid.c - the stand-in libnvcuvid.so.1: NVDEC's
 * cuvidCreateDecoder and cuvidDestroyDecoder with the prototypes of
 * ffnvcodec's dynlink_cuviddec.h (Debian's libffmpeg-nvenc-dev), and
 * nothing else of NVDEC (no parser, no decoding).
 *
 * A decoder takes ulNumDecodeSurfaces x 3 MiB + 8 MiB of the stand-in
 * driver's device (FAKE_CUDA_KIND_DECODER, through fake_cuda_charge of
 * libcuda.so.1, so cuMemGetInfo and NVML see it) until it is destroyed.
 * Creating one needs cuInit and a current context (CUDA_ERROR_INVALID_CONTEXT
 * otherwise; a vidLock is not looked at), a handle pointer, the create info
 * and 1 to 64 decode surfaces (CUDA_ERROR_INVALID_VALUE); what does not fit
 * is CUDA_ERROR_OUT_OF_MEMORY. Destroying what is not a live decoder is
 * CUDA_ERROR_INVALID_HANDLE. A fork child starts with no decoders. */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>

#include <ffnvcodec/dynlink_cuviddec.h>

#include "fake_cuda.h"

#define FAKE_NVDEC_SURFACE (3ull << 20)
#define FAKE_NVDEC_BASE (8ull << 20)

tcuvidCreateDecoder cuvidCreateDecoder;
tcuvidDestroyDecoder cuvidDestroyDecoder;

typedef struct fake_decoder {
    unsigned long long bytes;
    struct fake_decoder *next;
} fake_decoder;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fake_decoder *live;      /* under mu */
static fake_decoder *inherited; /* a fork parent's, no longer the device's */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&mu); }
static void fork_parent(void) { pthread_mutex_unlock(&mu); }

static void fork_child(void)
{
    if (live) {
        fake_decoder *last = live;
        while (last->next)
            last = last->next;
        last->next = inherited;
        inherited = live;
        live = NULL;
    }
    pthread_mutex_unlock(&mu);
}

static void setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

CUresult CUDAAPI cuvidCreateDecoder(CUvideodecoder *phDecoder, CUVIDDECODECREATEINFO *pdci)
{
    pthread_once(&once, setup);
    if (!phDecoder || !pdci || pdci->ulNumDecodeSurfaces == 0 || pdci->ulNumDecodeSurfaces > 64)
        return CUDA_ERROR_INVALID_VALUE;
    fake_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->bytes = pdci->ulNumDecodeSurfaces * FAKE_NVDEC_SURFACE + FAKE_NVDEC_BASE;
    CUresult r = (CUresult)fake_cuda_charge(FAKE_CUDA_KIND_DECODER, d->bytes, 1);
    if (r != CUDA_SUCCESS) {
        free(d);
        return r;
    }
    pthread_mutex_lock(&mu);
    d->next = live;
    live = d;
    pthread_mutex_unlock(&mu);
    *phDecoder = d;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuvidDestroyDecoder(CUvideodecoder hDecoder)
{
    pthread_once(&once, setup);
    pthread_mutex_lock(&mu);
    fake_decoder *d = NULL;
    for (fake_decoder **q = &live; *q; q = &(*q)->next) {
        if (*q == hDecoder) {
            d = *q;
            *q = d->next;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!d)
        return CUDA_ERROR_INVALID_HANDLE;
    fake_cuda_uncharge(FAKE_CUDA_KIND_DECODER, d->bytes);
    free(d);
    return CUDA_SUCCESS;
}
