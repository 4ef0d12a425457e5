/* src/engine/fuse.h - how an executor finds the steps it may fold into a
 * convolution's epilogue: a value's one reader, and the residual an Add
 * adds. The executors decide what they fold (exec_cpu_fuse.c,
 * cuda/cuda_fuse.c); these only read the graph and the variant. */
#ifndef VRAM_ENGINE_FUSE_H
#define VRAM_ENGINE_FUSE_H

#include "engine/engine_internal.h"

/* The one step after `from` that reads value v, when that step is v's only
 * reader and v is no graph output; else -1. */
int vram__fuse_only_reader(const vram_engine *e, const vram__variant *var, int from, int v);

/* The value that step `add` adds to value y: add is a float Add of two
 * distinct inputs, one of them y, both of y's shape and so is its result
 * (no broadcast); else -1. */
int vram__fuse_add_other(const vram_engine *e, const vram__variant *var, const vram__step *add,
                         int y);

#endif
