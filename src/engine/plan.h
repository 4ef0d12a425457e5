/* src/engine/plan.h - the activation memory planner: at load time the engine
 * gives every intermediate tensor an offset in one activation arena, from the
 * tensors' lifetimes along the execution order, so that running a context
 * allocates nothing. Tensors whose lifetimes intersect never overlap in
 * memory, except an element-wise output written in place of its input. */
#ifndef VRAM_ENGINE_PLAN_H
#define VRAM_ENGINE_PLAN_H

#include <stdint.h>

/* One tensor to place. Lifetimes are closed intervals of steps (node indices):
 * a tensor written at step s never shares memory with an input that dies at
 * step s (a kernel reads its inputs while it writes its outputs), unless it is
 * that input's in-place successor. */
typedef struct vram__plan_tensor {
    uint64_t size;   /* bytes (0: needs no memory) */
    int first;       /* step (node index) that writes it */
    int last;        /* last step that reads it (>= first); a graph output lives to the end */
    int inplace_of;  /* -1, or the index of a tensor this one may overwrite in place: legal only when
                        that tensor's last == this tensor's first, sizes are equal, and the other is not
                        itself shared by a later reader; the planner decides whether to use it */
} vram__plan_tensor;

typedef struct vram__plan {
    uint64_t *offset;       /* per tensor (n of them); owned */
    int *shares_with;       /* per tensor: -1, or the tensor whose memory it took in place */
    uint64_t arena_bytes;   /* size of the arena */
    uint64_t lower_bound;   /* the most bytes live at any one step (with in-place pairs counted once) */
    int n;
} vram__plan;

/* Plan `n` tensors with offsets aligned to `align` (a power of two; every size
 * is rounded up to it, and lower_bound counts the rounded sizes). Every
 * placement is greedy: tensors are taken in some order and each goes at the
 * lowest offset (or into the tightest gap) where it overlaps no already placed
 * tensor whose lifetime intersects its own (TFLite's arena planner). Several
 * orders are tried (by size, the default; by size x lifetime; by first use; by
 * the busiest step a tensor lives through), each with first-fit and best-fit
 * gaps, then a two-sided placement in first-use order that puts each tensor
 * against the bottom or against a cap, on the side opposite to its latest
 * neighbour (chains, where every one-sided order can lose, fit exactly in the
 * two largest neighbours); all with and without in-place reuse. The smallest
 * arena is kept; the search stops early at one equal to lower_bound.
 *
 * An in-place hint is used only when legal: the target is written at an
 * earlier step than this tensor (target.first < first), target.last == first,
 * the sizes are equal and nonzero, and no other tensor takes the same target
 * (the first in index order wins). Other hints are ignored, not errors; a
 * chain of legal hints collapses to one buffer. lower_bound counts every legal
 * pair once, so arena_bytes >= lower_bound for whichever plan is kept.
 *
 * Returns 0 with `out` filled (release with vram__plan_free), VRAM_EINVAL
 * (n < 0, NULL arguments, align not a power of two, a first step below 0, a
 * last step before the first, inplace_of out of range or naming the tensor
 * itself, sizes that overflow 64 bits once rounded or added up: the message
 * names the tensor and the numbers), or VRAM_EHOSTMEM. On error *out is
 * zeroed and owns nothing. */
int vram__plan_arena(const vram__plan_tensor *t, int n, uint64_t align, vram__plan *out);

/* One strategy of the search above, for tests and experiments: the order is a
 * VRAM__PLAN_BY_* value, flags combine VRAM__PLAN_BEST_FIT (place into the
 * smallest gap that fits instead of the lowest) and VRAM__PLAN_NO_INPLACE
 * (ignore every in-place hint; lower_bound still counts the legal pairs once).
 * Same errors as vram__plan_arena, plus VRAM_EINVAL for an unknown order or
 * flag. */
enum {
    VRAM__PLAN_BY_SIZE = 0,      /* largest first */
    VRAM__PLAN_BY_SIZE_LIFE = 1, /* largest size x lifetime (steps) first */
    VRAM__PLAN_BY_FIRST_USE = 2, /* execution order, largest first at one step */
    VRAM__PLAN_BY_BREADTH = 3,   /* the busiest step a tensor lives through, then size */
    VRAM__PLAN_TWO_SIDED = 4,    /* first use, alternately against the bottom and a cap
                                    (searched from the lower bound up); no best-fit */
    VRAM__PLAN_N_ORDERS = 5,
};
enum {
    VRAM__PLAN_BEST_FIT = 1u << 0,
    VRAM__PLAN_NO_INPLACE = 1u << 1,
};
int vram__plan_arena_with(const vram__plan_tensor *t, int n, uint64_t align, int order,
                          unsigned flags, vram__plan *out);

/* Release what a plan owns and zero it (NULL and zeroed plans are fine). */
void vram__plan_free(vram__plan *p);

/* Check a plan against its tensors: no two tensors with intersecting
 * lifetimes overlap in memory (the in-place pairs named by shares_with
 * excepted, once each pair is itself legal: equal sizes and offsets, the
 * target dying at the step the other is written, no target taken twice),
 * every tensor lies inside arena_bytes. Zero-size tensors are not checked.
 * Returns 0 or VRAM_EINVAL naming the tensor(s), their steps and bytes.
 * O(n^2); used by tests and debug builds. */
int vram__plan_check(const vram__plan_tensor *t, int n, const vram__plan *p);

#endif
