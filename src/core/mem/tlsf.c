/* src/core/mem/tlsf.c - two-level segregated fit free index (see tlsf.h). Block
 * sizes are multiples of 256 bytes. */
#include "tlsf.h"

#define BEST_FIT_SCAN 64 /* blocks examined in the request's own class */

static inline unsigned msb64(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

static inline void mapping(uint64_t units, unsigned *fl, unsigned *sl)
{
    if (units < VRAM__TLSF_SL) {
        *fl = 0;
        *sl = (unsigned)units;
        return;
    }
    unsigned m = msb64(units);
    *fl = m - (VRAM__TLSF_SL_BITS - 1);
    *sl = (unsigned)(units >> (m - VRAM__TLSF_SL_BITS)) & (VRAM__TLSF_SL - 1);
}

void vram__tlsf_insert(vram__tlsf *t, vram__block *b)
{
    unsigned fl, sl;
    mapping(b->size >> VRAM__TLSF_UNIT_SHIFT, &fl, &sl);
    vram__block *head = t->heads[fl][sl];
    b->fprev = NULL;
    b->fnext = head;
    if (head)
        head->fprev = b;
    t->heads[fl][sl] = b;
    t->fl_bitmap |= 1ull << fl;
    t->sl_bitmap[fl] |= 1u << sl;
    t->n_free++;
}

void vram__tlsf_remove(vram__tlsf *t, vram__block *b)
{
    unsigned fl, sl;
    mapping(b->size >> VRAM__TLSF_UNIT_SHIFT, &fl, &sl);
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (b->fprev) {
        b->fprev->fnext = b->fnext;
    } else {
        t->heads[fl][sl] = b->fnext;
        if (!b->fnext) {
            t->sl_bitmap[fl] &= ~(1u << sl);
            if (!t->sl_bitmap[fl])
                t->fl_bitmap &= ~(1ull << fl);
        }
    }
    b->fprev = b->fnext = NULL;
    t->n_free--;
}

static vram__block *find_from(const vram__tlsf *t, unsigned fl, unsigned sl)
{
    if (fl >= VRAM__TLSF_FL)
        return NULL;
    uint32_t sl_map = t->sl_bitmap[fl] & (~0u << sl);
    if (!sl_map) {
        if (fl + 1 >= VRAM__TLSF_FL)
            return NULL;
        uint64_t fl_map = t->fl_bitmap & (~0ull << (fl + 1));
        if (!fl_map)
            return NULL;
        fl = (unsigned)__builtin_ctzll(fl_map);
        sl_map = t->sl_bitmap[fl];
    }
    sl = (unsigned)__builtin_ctz(sl_map);
    return t->heads[fl][sl];
}

/* Best fit among every block of one class (the last resort: a fitting block
 * exists only there). */
static vram__block *scan_class(const vram__tlsf *t, unsigned fl, unsigned sl, uint64_t size)
{
    vram__block *best = NULL;
    for (vram__block *b = t->heads[fl][sl]; b; b = b->fnext)
        if (b->size >= size && (!best || b->size < best->size))
            best = b;
    return best;
}

vram__block *vram__tlsf_take(vram__tlsf *t, uint64_t size)
{
    uint64_t units = (size + (1u << VRAM__TLSF_UNIT_SHIFT) - 1) >> VRAM__TLSF_UNIT_SHIFT;
    unsigned fl, sl;
    mapping(units, &fl, &sl);
    unsigned own_fl = fl, own_sl = sl;
    vram__block *best = NULL;
    if (units >= VRAM__TLSF_SL) {
        /* The request's own class holds blocks both smaller and larger than
         * it: take the best of the first few that fit. */
        unsigned n = 0;
        for (vram__block *b = t->heads[fl][sl]; b && n < BEST_FIT_SCAN; b = b->fnext, n++) {
            if (b->size >= size && (!best || b->size < best->size)) {
                best = b;
                if (b->size == size)
                    break;
            }
        }
        if (!best) {
            /* Next class up: every block there fits. */
            units += (1ull << (msb64(units) - VRAM__TLSF_SL_BITS)) - 1;
            mapping(units, &fl, &sl);
        }
    }
    if (!best)
        best = find_from(t, fl, sl);
    if (!best && units >= VRAM__TLSF_SL)
        best = scan_class(t, own_fl, own_sl, size);
    if (best)
        vram__tlsf_remove(t, best);
    return best;
}

vram__block *vram__tlsf_take_if(vram__tlsf *t, uint64_t size,
                                int (*accept)(void *ctx, const vram__block *b), void *ctx,
                                unsigned max_seen)
{
    uint64_t units = (size + (1u << VRAM__TLSF_UNIT_SHIFT) - 1) >> VRAM__TLSF_UNIT_SHIFT;
    unsigned fl, sl, seen = 0;
    mapping(units, &fl, &sl);
    for (; fl < VRAM__TLSF_FL; fl++, sl = 0) {
        if (!(t->fl_bitmap & (1ull << fl)))
            continue;
        uint32_t sl_map = t->sl_bitmap[fl] & (~0u << sl);
        while (sl_map) {
            unsigned s = (unsigned)__builtin_ctz(sl_map);
            sl_map &= sl_map - 1;
            for (vram__block *b = t->heads[fl][s]; b; b = b->fnext) {
                if (b->size < size)
                    continue;
                if (accept(ctx, b)) {
                    vram__tlsf_remove(t, b);
                    return b;
                }
                if (++seen >= max_seen)
                    return NULL;
            }
        }
    }
    return NULL;
}

static int note_lowest(void *ctx, const vram__block *b)
{
    const vram__block **lowest = ctx;
    if (!*lowest || b->addr < (*lowest)->addr)
        *lowest = b;
    return 0; /* look at them all */
}

vram__block *vram__tlsf_take_lowest(vram__tlsf *t, uint64_t size, unsigned candidates)
{
    if (candidates <= 1)
        return vram__tlsf_take(t, size);
    const vram__block *lowest = NULL;
    vram__tlsf_take_if(t, size, note_lowest, &lowest, candidates);
    if (!lowest) /* none among the first ones fits: the good fit searches further */
        return vram__tlsf_take(t, size);
    vram__tlsf_remove(t, (vram__block *)lowest);
    return (vram__block *)lowest;
}

uint64_t vram__tlsf_largest(const vram__tlsf *t)
{
    if (!t->fl_bitmap)
        return 0;
    unsigned fl = msb64(t->fl_bitmap);
    unsigned sl = 31u - (unsigned)__builtin_clz(t->sl_bitmap[fl]);
    uint64_t best = 0;
    for (const vram__block *b = t->heads[fl][sl]; b; b = b->fnext)
        if (b->size > best)
            best = b->size;
    return best;
}

void vram__tlsf_each(const vram__tlsf *t, void (*fn)(void *ctx, vram__block *b), void *ctx)
{
    for (unsigned fl = 0; fl < VRAM__TLSF_FL; fl++) {
        if (!(t->fl_bitmap & (1ull << fl)))
            continue;
        for (unsigned sl = 0; sl < VRAM__TLSF_SL; sl++)
            for (vram__block *b = t->heads[fl][sl]; b; b = b->fnext)
                fn(ctx, b);
    }
}
