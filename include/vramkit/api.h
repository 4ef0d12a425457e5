/* vramkit/api.h - how the public API is marked: every function the
 * libraries export is declared VRAM_API. The libraries are built with
 * hidden visibility, so a function without it is internal to its library
 * and never reaches other programs' symbol tables (the PyTorch hook and
 * the preload library are loaded into processes vramkit did not build).
 * Nothing here fails or owns anything: the error model is in
 * vramkit/error.h. */
#ifndef VRAMKIT_API_H
#define VRAMKIT_API_H

#if defined(__GNUC__) || defined(__clang__)
#define VRAM_API __attribute__((visibility("default")))
#else
#define VRAM_API
#endif

#endif
