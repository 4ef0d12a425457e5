/* tests/preload/fake_cuda_map.c - the stand-in driver's hash map: open
 * addressing with linear probing and backward-shift deletion (no
 * tombstones), keyed by a non-zero uint64 (a device pointer or a handle),
 * grown at 70% load. Callers hold the driver's lock. */
#include <stdlib.h>

#include "fake_cuda_internal.h"

static size_t slot_of(uint64_t k, size_t mask)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static int grow(fc_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 256;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = slot_of(m->keys[i], cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int fc_map_put(fc_map *m, uint64_t key, void *val)
{
    if (!key)
        return -1;
    if ((m->n + 1) * 10 > m->cap * 7 && grow(m) != 0)
        return -1;
    size_t i = slot_of(key, m->cap - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->keys[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void *fc_map_get(const fc_map *m, uint64_t key)
{
    if (!key || !m->cap)
        return NULL;
    size_t i = slot_of(key, m->cap - 1);
    while (m->keys[i]) {
        if (m->keys[i] == key)
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

void *fc_map_del(fc_map *m, uint64_t key)
{
    if (!key || !m->cap)
        return NULL;
    size_t mask = m->cap - 1, i = slot_of(key, mask);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->keys[i])
        return NULL;
    void *val = m->vals[i];
    /* Shift back the entries of the run that follows, so that no probe
     * sequence crosses a hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], mask);
        /* j may move to the hole unless its home lies cyclically in (hole, j]. */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays)
            continue;
        m->keys[hole] = m->keys[j];
        m->vals[hole] = m->vals[j];
        hole = j;
    }
    m->keys[hole] = 0;
    m->vals[hole] = NULL;
    m->n--;
    return val;
}

size_t fc_map_select(const fc_map *m, int (*keep)(void *val, void *arg), void *arg, uint64_t *out,
                     size_t cap)
{
    size_t found = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i] || (keep && !keep(m->vals[i], arg)))
            continue;
        if (found < cap)
            out[found] = m->keys[i];
        found++;
    }
    return found;
}

void fc_map_clear(fc_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
