/* src/core/base/u64map.c - open-addressing uint64 hash map (see u64map.h). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "u64map.h"

static int alloc_table(vram__u64map *m, size_t cap)
{
    m->keys = vram__calloc(cap, sizeof *m->keys);
    m->vals = vram__calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = m->vals = NULL;
        return VRAM_EHOSTMEM;
    }
    m->mask = cap - 1;
    return 0;
}

int vram__u64map_init(vram__u64map *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2)
        cap *= 2;
    m->count = 0;
    return alloc_table(m, cap);
}

void vram__u64map_destroy(vram__u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void insert_new(vram__u64map *m, uint64_t key, uint64_t val)
{
    size_t i = (size_t)vram__u64map_hash(key) & m->mask;
    while (m->keys[i])
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
}

static int grow(vram__u64map *m)
{
    vram__u64map old = *m;
    int rc = alloc_table(m, (old.mask + 1) * 2);
    if (rc) {
        *m = old;
        return rc;
    }
    m->count = 0;
    for (size_t i = 0; i <= old.mask; i++)
        if (old.keys[i])
            insert_new(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
    return 0;
}

int vram__u64map_reserve(vram__u64map *m, size_t count)
{
    while (count * 2 > m->mask + 1) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    return 0;
}

int vram__u64map_put(vram__u64map *m, uint64_t key, uint64_t val)
{
    size_t i = (size_t)vram__u64map_hash(key) & m->mask;
    for (;;) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
        if (!m->keys[i])
            break;
        i = (i + 1) & m->mask;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    insert_new(m, key, val);
    return 0;
}

int vram__u64map_del(vram__u64map *m, uint64_t key, uint64_t *val)
{
    size_t i = (size_t)vram__u64map_hash(key) & m->mask;
    for (;;) {
        if (m->keys[i] == key)
            break;
        if (!m->keys[i])
            return 0;
        i = (i + 1) & m->mask;
    }
    if (val)
        *val = m->vals[i];
    /* Backward-shift: move later entries of the probe run into the hole. */
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->keys[j])
            break;
        size_t home = (size_t)vram__u64map_hash(m->keys[j]) & m->mask;
        /* keep j where it is if its home lies cyclically in (hole, j] */
        if (hole <= j ? (home > hole && home <= j) : (home > hole || home <= j))
            continue;
        m->keys[hole] = m->keys[j];
        m->vals[hole] = m->vals[j];
        hole = j;
    }
    m->keys[hole] = 0;
    m->vals[hole] = 0;
    m->count--;
    return 1;
}
