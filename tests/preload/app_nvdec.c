/* tests/preload/app_nvdec.c - NVDEC decoders as FFmpeg makes them:
 * dlopen of libcuda.so.1 and libnvcuvid.so.1, dlsym of cuvidCreateDecoder
 * and cuvidDestroyDecoder, a current primary context; two 1080p H.264
 * decoders (20 and 8 decode surfaces), then the first destroyed, the
 * second left alive. One JSON line: free memory before, with both, and
 * with one, and what each took by free memory. Exit status 0 when every
 * call succeeded.
 *
 *   app_nvdec */
#include "app_common.h" /* cuda.h first: ffnvcodec's header takes its types */

#include <ffnvcodec/dynlink_cuviddec.h>

static CUVIDDECODECREATEINFO info(unsigned long surfaces)
{
    CUVIDDECODECREATEINFO ci;
    memset(&ci, 0, sizeof ci);
    ci.ulWidth = ci.ulMaxWidth = ci.ulTargetWidth = 1920;
    ci.ulHeight = ci.ulMaxHeight = ci.ulTargetHeight = 1080;
    ci.ulNumDecodeSurfaces = surfaces;
    ci.ulNumOutputSurfaces = 2;
    ci.CodecType = cudaVideoCodec_H264;
    ci.ChromaFormat = cudaVideoChromaFormat_420;
    ci.OutputFormat = cudaVideoSurfaceFormat_NV12;
    ci.DeinterlaceMode = cudaVideoDeinterlaceMode_Weave;
    ci.ulCreationFlags = cudaVideoCreate_PreferCUVID;
    return ci;
}

int main(void)
{
    app_cuda c;
    app_open_cuda(&c);
    void *nvcuvid = app_open("libnvcuvid.so.1");
    tcuvidCreateDecoder *create = (tcuvidCreateDecoder *)app_sym(nvcuvid, "cuvidCreateDecoder");
    tcuvidDestroyDecoder *destroy = (tcuvidDestroyDecoder *)app_sym(nvcuvid, "cuvidDestroyDecoder");
    PFN_cuMemGetInfo_v3020 mem_info = APP_PROC(&c, cuMemGetInfo, 3020);

    APP_CHECK(&c, APP_PROC(&c, cuInit, 2000)(0));
    CUcontext ctx;
    APP_CHECK(&c, APP_PROC(&c, cuDevicePrimaryCtxRetain, 7000)(&ctx, 0));
    APP_CHECK(&c, APP_PROC(&c, cuCtxSetCurrent, 4000)(ctx));

    size_t total = 0, before = 0, mid = 0, both = 0, one = 0;
    APP_CHECK(&c, mem_info(&before, &total));
    CUvideodecoder dec[2];
    CUVIDDECODECREATEINFO ci = info(20);
    APP_CHECK(&c, create(&dec[0], &ci));
    APP_CHECK(&c, mem_info(&mid, &total));
    ci = info(8);
    APP_CHECK(&c, create(&dec[1], &ci));
    APP_CHECK(&c, mem_info(&both, &total));
    APP_CHECK(&c, destroy(dec[0]));
    APP_CHECK(&c, mem_info(&one, &total));

    printf("{\"app\":\"nvdec\",\"decoders_created\":2,\"decoders_destroyed\":1,"
           "\"surfaces\":[20,8],\"decoder_bytes\":[%zu,%zu],\"total\":%zu,\"free_before\":%zu,"
           "\"free_both\":%zu,\"free_one\":%zu}\n",
           before - mid, mid - both, total, before, both, one);
    return 0;
}
