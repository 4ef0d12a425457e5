/* tools/replay/replay_compare.c - vramkit's pool and the driver's allocators
 * on one trace in alternating rounds: each round replays the trace once
 * through each side (the pool, cudaMallocAsync, cudaMalloc), one timed run
 * each, so that the machine's drift over the comparison falls on every side
 * alike instead of on whichever ran last. A side's host times (cold, warm,
 * and glibc malloc's beside the pool) are its medians over the rounds; its
 * other figures are the first round's. */
#include <stdlib.h>
#include <string.h>

#include "common/tool_util.h"
#include "replay.h"
#include "vramkit.h"

enum { SIDES = 3, TIMES = 3 }; /* sides: pool, cudaMallocAsync, cudaMalloc */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int one_side(const vram_trace *t, const vram_replay_opts *one, int side,
                    vram_replay_result *r)
{
    if (side == 0)
        return vram_replay_run(t, one, r);
    return vram_replay_baseline_run(
        t, side == 1 ? VRAM_BASELINE_CUDA_MALLOC_ASYNC : VRAM_BASELINE_CUDA_MALLOC, 1, r);
}

int vram_replay_compare(const vram_trace *t, const vram_replay_opts *o, unsigned rounds,
                        vram_replay_result out[3])
{
    if (!t || !o || !out)
        return vram_set_error(VRAM_EINVAL, "vram_replay_compare: trace, opts and out are required");
    if (!rounds)
        rounds = 5;
    vram_replay_opts one = *o;
    one.timing_runs = 1;
    double *ns = tool_calloc((size_t)SIDES * TIMES * rounds, sizeof *ns);
    if (!ns)
        return VRAM_EHOSTMEM;
    int rc = 0;
    for (unsigned r = 0; !rc && r < rounds; r++) {
        for (int side = 0; !rc && side < SIDES; side++) {
            vram_replay_result res;
            rc = one_side(t, &one, side, &res);
            if (rc)
                break;
            if (r == 0)
                out[side] = res;
            double *at = ns + (size_t)side * TIMES * rounds;
            at[r] = res.ns_per_op;
            at[rounds + r] = res.warm_ns_per_op;
            at[2 * rounds + r] = res.malloc_ns_per_op;
        }
    }
    for (int side = 0; !rc && side < SIDES; side++) {
        double *at = ns + (size_t)side * TIMES * rounds;
        out[side].ns_per_op = median(at, rounds);
        out[side].warm_ns_per_op = median(at + rounds, rounds);
        out[side].malloc_ns_per_op = median(at + 2 * rounds, rounds);
    }
    free(ns);
    return rc;
}
