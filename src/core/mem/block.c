/* src/core/mem/block.c - the descriptor slab behind vram__block_new(). */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "block.h"

#define SLAB_CHUNK 1024

int vram__block_reserve(vram__block_slab *slab)
{
    if (VRAM__LIKELY(slab->free_list != NULL))
        return 0;
    void **chunks = vram__realloc_array(slab->chunks, slab->n_chunks + 1, sizeof *chunks);
    if (!chunks)
        return VRAM_EHOSTMEM;
    slab->chunks = chunks;
    vram__block *c = vram__calloc(SLAB_CHUNK, sizeof *c);
    if (!c)
        return VRAM_EHOSTMEM;
    slab->chunks[slab->n_chunks++] = c;
    for (size_t i = SLAB_CHUNK; i-- > 0;) {
        c[i].fnext = slab->free_list;
        slab->free_list = &c[i];
    }
    return 0;
}

void vram__block_slab_destroy(vram__block_slab *slab)
{
    for (size_t i = 0; i < slab->n_chunks; i++)
        free(slab->chunks[i]);
    free(slab->chunks);
    memset(slab, 0, sizeof *slab);
}
