/* src/engine/cpu/simd.h - how a hot CPU kernel gets vector code for the CPU
 * it runs on: VRAM__CPU_CLONES before a static function (an exported one
 * would export its resolver too) builds it three times, for x86-64-v4
 * (AVX-512), x86-64-v3 (AVX2, FMA) and any x86-64, and the loader picks the
 * clone once, at run time, from what the CPU reports (GCC's target_clones, an
 * ifunc). Elsewhere the function is built once, portably. */
#ifndef VRAM_ENGINE_CPU_SIMD_H
#define VRAM_ENGINE_CPU_SIMD_H

/* Not under ThreadSanitizer: a clone's resolver runs while the loader
 * relocates the library, before that runtime is up, and the program dies
 * there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define VRAM__CPU_CLONES                                                                        \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VRAM__CPU_CLONES
#endif

#endif
