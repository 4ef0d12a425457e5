/* src/pipeline/latency.c - a stream's decode-to-result latency as a fixed
 * histogram of log-spaced buckets: adding is two atomic increments and
 * allocates nothing; quantiles are read from the buckets (upper edges, so
 * within 25 % above the true value). */
#include <math.h>

#include "service_internal.h"

#define LAT_FIRST_MS 0.01
#define LAT_RATIO 1.25

void vram__latency_add(vram__latency *l, double ms)
{
    int i = 0;
    if (ms > LAT_FIRST_MS)
        i = (int)ceil(log(ms / LAT_FIRST_MS) / log(LAT_RATIO));
    if (i < 0)
        i = 0;
    if (i >= VRAM__LAT_BUCKETS)
        i = VRAM__LAT_BUCKETS - 1;
    atomic_fetch_add_explicit(&l->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
}

double vram__latency_quantile(const vram__latency *l, double q)
{
    uint64_t n = atomic_load_explicit(&l->count, memory_order_relaxed);
    if (!n)
        return 0.0;
    uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
    if (want < 1)
        want = 1;
    for (int i = 0; i < VRAM__LAT_BUCKETS; i++) {
        seen += atomic_load_explicit(&((vram__latency *)l)->bucket[i], memory_order_relaxed);
        if (seen >= want)
            return LAT_FIRST_MS * pow(LAT_RATIO, i);
    }
    return LAT_FIRST_MS * pow(LAT_RATIO, VRAM__LAT_BUCKETS - 1);
}
