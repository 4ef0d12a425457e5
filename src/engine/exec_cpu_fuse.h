/* src/engine/exec_cpu_fuse.h - the cpu executor's per-step plan: which
 * steps a convolution's epilogue does (exec_cpu_fuse.c says when). */
#ifndef VRAM_ENGINE_EXEC_CPU_FUSE_H
#define VRAM_ENGINE_EXEC_CPU_FUSE_H

#include "engine/engine_internal.h"

typedef struct vram__cpu_step {
    int done;  /* an earlier convolution's epilogue did this step */
    int other; /* a convolution: the residual its epilogue adds (a value), or -1 */
    int act;   /* a convolution: the activation step its epilogue does, or -1 */
    int fast;  /* a convolution on the fast kernels (exec_cpu.c decides, at load) */
    int split; /* ...split over the context's threads */
} vram__cpu_step;

/* Plan variant var's steps into steps[var->n_steps]; returns how many
 * convolutions took an epilogue. */
unsigned vram__cpu_fuse(const vram_engine *e, const vram__variant *var, vram__cpu_step *steps);

#endif
