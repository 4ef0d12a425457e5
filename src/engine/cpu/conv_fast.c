/* src/engine/cpu/conv_fast.c - Conv on the fast kernels: for each image and
 * group, the weights [c_out/group, K] times the input's im2col view [K, S]
 * through the packed GEMM (sgemm.c), which packs im2col rows straight into
 * its panels (a 1x1 stride-1 unpadded convolution reads the input planes as
 * they are), its weights packed at load when the caller has them so;
 * depthwise convolutions go to dwconv.c. The bias and the
 * caller's epilogue are applied to each finished tile. */
#include "base/internal.h"
#include "engine/cpu/fast.h"

static int is_pointwise(const vram__conv2d *p)
{
    return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_top == 0 && p->pad_left == 0 && p->oh == p->h && p->ow == p->w;
}

static int is_depthwise(const vram__conv2d *p) { return p->group >= 1 && p->c_in == p->group; }

uint64_t vram__cpu_conv2d_fast_scratch(const vram__conv2d *p)
{
    if (p->group < 1 || p->c_in % p->group || p->c_out % p->group)
        return 0;
    if (is_depthwise(p))
        return vram__cpu_dwconv_scratch(p);
    return vram__cpu_sgemm_scratch(p->c_out / p->group, p->oh * p->ow,
                                   p->c_in / p->group * p->kh * p->kw);
}

int64_t vram__cpu_conv2d_packed_floats(const vram__conv2d *p, int mr)
{
    if (p->group < 1 || p->c_in % p->group || p->c_out % p->group || is_depthwise(p))
        return 0;
    return p->group * vram__cpu_sgemm_packed_floats(p->c_out / p->group,
                                                    p->c_in / p->group * p->kh * p->kw, mr);
}

void vram__cpu_conv2d_pack(const vram__conv2d *p, const float *w, int mr, float *dst)
{
    int64_t cog = p->c_out / p->group, K = p->c_in / p->group * p->kh * p->kw;
    int64_t per_group = vram__cpu_sgemm_packed_floats(cog, K, mr);
    for (int64_t g = 0; g < p->group; g++)
        vram__cpu_sgemm_pack_a(cog, K, w + g * cog * K, K, mr, dst + g * per_group);
}

int vram__cpu_conv2d_fast(const vram__conv2d *p, const float *x, const float *w,
                          const float *packed_w, int packed_mr, const float *bias,
                          const vram__epilogue *ep, float *y, void *scratch, int part, int parts)
{
    int rc = vram__conv2d_check(p, "Conv");
    if (rc)
        return rc;
    int64_t cig = p->c_in / p->group, cog = p->c_out / p->group;
    int64_t S = p->oh * p->ow, K = cig * p->kh * p->kw;
    if (S == 0 || cog == 0)
        return 0;
    if (is_depthwise(p)) {
        vram__cpu_dwconv(p, x, w, bias, ep, y, p->c_out * part / parts,
                         p->c_out * (part + 1) / parts, scratch);
        return 0;
    }
    for (int64_t nn = 0; nn < p->n; nn++) {
        for (int64_t g = 0; g < p->group; g++) {
            const float *xg = x + (nn * p->c_in + g * cig) * p->h * p->w;
            int64_t yoff = (nn * p->c_out + g * cog) * S;
            vram__epilogue eg = {.bias = bias ? bias + g * cog : NULL,
                                 .add = ep && ep->add ? ep->add + yoff : NULL, .ld_add = S,
                                 .act = ep ? ep->act : -1, .act_p = ep ? ep->act_p : NULL};
            vram__sgemm_b b = {.b = xg, .brs = S, .bcs = 1};
            if (!is_pointwise(p))
                b = (vram__sgemm_b){.conv = p, .x = xg};
            vram__sgemm_a a = {.a = w + g * cog * K, .lda = K};
            if (packed_w)
                a = (vram__sgemm_a){.a = a.a, .lda = K, .packed_mr = packed_mr,
                                    .packed = packed_w +
                                              g * vram__cpu_sgemm_packed_floats(cog, K, packed_mr)};
            vram__cpu_sgemm(cog, S, K, &a, &b, y + yoff, S, &eg, scratch, part, parts);
        }
    }
    return 0;
}
