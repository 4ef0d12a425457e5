/* src/engine/cpu/sgemm_kernels.c - the register tiles of the packed GEMM
 * (sgemm.c) and the choice among them. A tile keeps an MR x NR block of C
 * in vector registers while it runs down k over one packed panel of A (MR
 * floats per k) and one of B (NR floats per k): AVX-512 12x32 (24 of the 32
 * zmm registers), AVX2 with FMA 6x16 (12 of the 16 ymm), and a portable 4x16
 * in plain C that any compiler vectorizes. The best the CPU reports is
 * chosen once (cpuid); vram__cpu_isa_force picks another, for tests and
 * for measuring one against another. */
#include <stdatomic.h>
#include <string.h>

#include "engine/cpu/fast.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define VRAM__X86_TILES 1
#include <immintrin.h>
#endif

/* c[i*ldc + j] (+)= sum_p a[p*mr + i] b[p*nr + j] */
static void tile_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          int load)
{
    float acc[4][16] = {{0}};
    for (int64_t p = 0; p < kc; p++, a += 4, b += 16)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 16; j++)
                acc[i][j] += a[i] * b[j];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++)
            c[i * ldc + j] = load ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

#ifdef VRAM__X86_TILES
__attribute__((target("avx2,fma"))) static void tile_avx2(int64_t kc, const float *a,
                                                           const float *b, float *c, int64_t ldc,
                                                           int load)
{
    __m256 c0[6], c1[6];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++)
        c0[i] = c1[i] = _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; p++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            __m256 av = _mm256_broadcast_ss(a + i);
            c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
        float *ci = c + i * ldc;
        if (load) {
            c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(ci));
            c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(ci + 8));
        }
        _mm256_storeu_ps(ci, c0[i]);
        _mm256_storeu_ps(ci + 8, c1[i]);
    }
}

__attribute__((target("avx512f"))) static void tile_avx512(int64_t kc, const float *a,
                                                            const float *b, float *c, int64_t ldc,
                                                            int load)
{
    __m512 c0[12], c1[12];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++)
        c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc; p++, a += 12, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) {
            __m512 av = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
        float *ci = c + i * ldc;
        if (load) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_loadu_ps(ci));
            c1[i] = _mm512_add_ps(c1[i], _mm512_loadu_ps(ci + 16));
        }
        _mm512_storeu_ps(ci, c0[i]);
        _mm512_storeu_ps(ci + 16, c1[i]);
    }
}
#endif

static const vram__cpu_isa isas[] = {
    [VRAM__ISA_PORTABLE] = {"portable", 4, 16, tile_portable},
#ifdef VRAM__X86_TILES
    [VRAM__ISA_AVX2] = {"avx2", 6, 16, tile_avx2},
    [VRAM__ISA_AVX512] = {"avx512", 12, 32, tile_avx512},
#endif
};

/* The best level this CPU runs. */
static int best_level(void)
{
#ifdef VRAM__X86_TILES
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return VRAM__ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return VRAM__ISA_AVX2;
#endif
    return VRAM__ISA_PORTABLE;
}

/* -1 until first asked; then the level in use. */
static _Atomic int level_in_use = -1;

const vram__cpu_isa *vram__cpu_isa_get(void)
{
    int lv = atomic_load_explicit(&level_in_use, memory_order_relaxed);
    if (lv < 0) {
        lv = best_level();
        atomic_store_explicit(&level_in_use, lv, memory_order_relaxed);
    }
    return &isas[lv];
}

int vram__cpu_isa_force(int level)
{
    int best = best_level();
    if (level < 0 || level > best)
        level = best;
    atomic_store_explicit(&level_in_use, level, memory_order_relaxed);
    return level;
}

int vram__cpu_isa_best(void) { return best_level(); }
