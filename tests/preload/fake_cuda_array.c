/* tests/preload/fake_cuda_array.c - CUDA arrays and mipmapped arrays in
 * the stand-in driver. They are not addressable, so nothing stands behind
 * them: the device is charged (FAKE_CUDA_KIND_ARRAY) what the stand-in
 * says they take, a model and not the driver's layout: rows of width x
 * element size rounded up to 512 bytes, times the rows (NV12: height x
 * 1.5) and the depth (or layers), rounded up to 64 KiB; a mipmapped array
 * the sum of its levels. An array made with CUDA_ARRAY3D_DEFERRED_MAPPING
 * takes nothing until memory is mapped to it, and, as the driver documents,
 * only such arrays have memory requirements: cuArrayGetMemoryRequirements
 * and cuMipmappedArrayGetMemoryRequirements answer CUDA_ERROR_INVALID_VALUE
 * for the others. Formats the stand-in does not size (block-compressed,
 * most YUV ones) are CUDA_ERROR_NOT_SUPPORTED. Arrays die with their
 * context. */
#include <stdlib.h>

#include "fake_cuda_internal.h"

#define FC_ARRAY_ALIGN (64u * 1024u)

typedef struct fc_array {
    fc_obj hdr;     /* hdr.bytes: what it is charged */
    uint64_t model; /* what it takes (also when deferred) */
    int deferred;
} fc_array;

struct CUarray_st {
    fc_array a;
};

struct CUmipmappedArray_st {
    fc_array a;
};

/* Bytes of one element, and whether the format is NV12; 0 if unknown. */
static unsigned element_bytes(CUarray_format f, unsigned channels, int *nv12)
{
    *nv12 = 0;
    unsigned c = channels == 1 || channels == 2 || channels == 4 ? channels : 0;
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return c;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2 * c;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4 * c;
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1: return 1;
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1: return 2;
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2: return 4;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4: return 8;
    case CU_AD_FORMAT_NV12: *nv12 = 1; return 1;
    default: return 0;
    }
}

/* What one level of width x height x depth takes; 0 for a format the
 * stand-in does not size. */
static uint64_t level_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, size_t w, size_t h, size_t depth)
{
    int nv12;
    unsigned e = element_bytes(d->Format, d->NumChannels, &nv12);
    if (!e)
        return 0;
    uint64_t rows = h ? h : 1;
    if (nv12)
        rows = rows + (rows + 1) / 2;
    uint64_t pitch = fc_round_up((uint64_t)w * e, FC_PITCH_ALIGN);
    return fc_round_up(pitch * rows * (depth ? depth : 1), FC_ARRAY_ALIGN);
}

static CUresult create_locked(fc_array *a, fc_tag tag, const CUDA_ARRAY3D_DESCRIPTOR *d,
                              unsigned levels)
{
    if (!d || d->Width == 0 || levels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0;
    uint64_t total = 0;
    size_t w = d->Width, h = d->Height, depth = d->Depth;
    for (unsigned l = 0; l < levels; l++) {
        uint64_t b = level_bytes(d, w, h, depth);
        if (!b)
            return CUDA_ERROR_NOT_SUPPORTED;
        total += b;
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        depth = !layered && depth > 1 ? depth / 2 : depth;
    }
    struct CUctx_st *ctx = NULL;
    CUresult r = fc_need_ctx_locked(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    a->hdr.tag = tag;
    a->hdr.ctx = ctx;
    a->hdr.kind = FAKE_CUDA_KIND_ARRAY;
    a->model = total;
    a->deferred = (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING) != 0;
    a->hdr.bytes = a->deferred ? 0 : total;
    r = fc_charge_locked(FAKE_CUDA_KIND_ARRAY, a->hdr.bytes);
    if (r == CUDA_SUCCESS) {
        r = fc_obj_add_locked(a);
        if (r != CUDA_SUCCESS)
            fc_uncharge_locked(FAKE_CUDA_KIND_ARRAY, a->hdr.bytes);
    }
    return r;
}

static CUresult array_create(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *arr = calloc(1, sizeof *arr);
    if (!arr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_lock();
    CUresult r = create_locked(&arr->a, FC_T_ARRAY, d, 1);
    fc_unlock();
    if (r != CUDA_SUCCESS) {
        free(arr);
        return r;
    }
    *pHandle = arr;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    FC_ENTER(cuArrayCreate_v2);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width,
                                 .Height = pAllocateArray->Height,
                                 .Format = pAllocateArray->Format,
                                 .NumChannels = pAllocateArray->NumChannels};
    return array_create(pHandle, &d);
}

CUresult CUDAAPI cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray)
{
    FC_ENTER(cuArrayCreate);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width,
                                 .Height = pAllocateArray->Height,
                                 .Format = pAllocateArray->Format,
                                 .NumChannels = pAllocateArray->NumChannels};
    return array_create(pHandle, &d);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    FC_ENTER(cuArray3DCreate_v2);
    return array_create(pHandle, pAllocateArray);
}

CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
    FC_ENTER(cuArray3DCreate);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = pAllocateArray->Width,
                                 .Height = pAllocateArray->Height,
                                 .Depth = pAllocateArray->Depth,
                                 .Format = pAllocateArray->Format,
                                 .NumChannels = pAllocateArray->NumChannels,
                                 .Flags = pAllocateArray->Flags};
    return array_create(pHandle, &d);
}

static CUresult destroy(const void *handle, fc_tag tag)
{
    fc_lock();
    CUresult r = fc_ready_locked();
    fc_array *a = r == CUDA_SUCCESS ? fc_obj_find_locked(handle, tag) : NULL;
    if (r == CUDA_SUCCESS && !a)
        r = CUDA_ERROR_INVALID_HANDLE;
    if (a)
        fc_obj_free_locked(a);
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    FC_ENTER(cuArrayDestroy);
    return destroy(hArray, FC_T_ARRAY);
}

static CUresult requirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, const void *handle, fc_tag tag,
                             CUdevice device)
{
    if (!req)
        return CUDA_ERROR_INVALID_VALUE;
    fc_lock();
    CUresult r = fc_ready_locked();
    if (r == CUDA_SUCCESS)
        r = fc_check_device(device);
    const fc_array *a = r == CUDA_SUCCESS ? fc_obj_find_locked(handle, tag) : NULL;
    if (r == CUDA_SUCCESS && (!a || !a->deferred))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        *req =
            (CUDA_ARRAY_MEMORY_REQUIREMENTS){.size = (size_t)a->model, .alignment = FC_ARRAY_ALIGN};
    }
    fc_unlock();
    return r;
}

CUresult CUDAAPI cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                              CUarray array, CUdevice device)
{
    FC_ENTER(cuArrayGetMemoryRequirements);
    return requirements(memoryRequirements, array, FC_T_ARRAY, device);
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels)
{
    FC_ENTER(cuMipmappedArrayCreate);
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmipmappedArray_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fc_lock();
    CUresult r = create_locked(&m->a, FC_T_MIPMAP, pMipmappedArrayDesc, numMipmapLevels);
    fc_unlock();
    if (r != CUDA_SUCCESS) {
        free(m);
        return r;
    }
    *pHandle = m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FC_ENTER(cuMipmappedArrayDestroy);
    return destroy(hMipmappedArray, FC_T_MIPMAP);
}

CUresult CUDAAPI cuMipmappedArrayGetMemoryRequirements(
    CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUmipmappedArray mipmap, CUdevice device)
{
    FC_ENTER(cuMipmappedArrayGetMemoryRequirements);
    return requirements(memoryRequirements, mipmap, FC_T_MIPMAP, device);
}
