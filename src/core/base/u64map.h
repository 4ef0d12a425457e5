/* src/core/base/u64map.h - an open-addressing hash map from non-zero uint64 keys to
 * uint64 values (linear probing, backward-shift deletion, load <= 1/2). Used to
 * find a block from its address and a segment from its base. Not thread-safe. */
#ifndef VRAM_BASE_U64MAP_H
#define VRAM_BASE_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vram__u64map {
    uint64_t *keys; /* 0 marks an empty slot */
    uint64_t *vals;
    size_t mask;    /* capacity - 1, capacity a power of two */
    size_t count;
} vram__u64map;

int vram__u64map_init(vram__u64map *m, size_t expected);
void vram__u64map_destroy(vram__u64map *m);

/* Insert or replace. Returns 0 or VRAM_EHOSTMEM (the map is unchanged). */
int vram__u64map_put(vram__u64map *m, uint64_t key, uint64_t val);

/* 1 and *val when found, 0 otherwise. */
static inline uint64_t vram__u64map_hash(uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 32;
    return key;
}

static inline int vram__u64map_get(const vram__u64map *m, uint64_t key, uint64_t *val)
{
    size_t i = (size_t)vram__u64map_hash(key) & m->mask;
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) {
            *val = m->vals[i];
            return 1;
        }
        if (k == 0)
            return 0;
        i = (i + 1) & m->mask;
    }
}

/* Make room so that `count` keys fit without growing: after it, that many
 * puts of new keys cannot fail. Returns 0 or VRAM_EHOSTMEM. */
int vram__u64map_reserve(vram__u64map *m, size_t count);

/* Remove; 1 when the key was there (its value in *val if val), else 0. */
int vram__u64map_del(vram__u64map *m, uint64_t key, uint64_t *val);

#endif
