/* src/core/mem/charges.c - charges: memory an owner holds that the pool did
 * not allocate (a driver's own device memory, measured by the caller),
 * counted in the owner's and the kind's live bytes and against the owner's
 * budget, and in charged_bytes of owner, kind and pool, without touching
 * the backend, the blocks or the listeners (vramkit/pool.h). */
#include "pool_internal.h"

static int check(vram_pool *p, const char *fn, uint64_t size, vram_owner owner, vram_kind kind)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "%s: pool is NULL", fn);
    if (!size)
        return vram__fail(VRAM_EINVAL, "%s: pool \"%s\": a charge of 0 bytes", fn, p->name);
    if (owner >= p->n_owners || (unsigned)kind >= VRAM_KIND_COUNT)
        return vram__fail(VRAM_EINVAL, "%s: pool \"%s\": unknown %s %u", fn, p->name,
                          owner >= p->n_owners ? "owner" : "kind",
                          owner >= p->n_owners ? owner : (unsigned)kind);
    return 0;
}

static void add(vram__usage *u, uint64_t size)
{
    u->live_bytes += size;
    u->charged_bytes += size;
    if (u->live_bytes > u->peak_live_bytes)
        u->peak_live_bytes = u->live_bytes;
}

int vram_pool_charge(vram_pool *p, uint64_t size, vram_owner owner, vram_kind kind)
{
    int rc = check(p, "vram_pool_charge", size, owner, kind);
    if (rc)
        return rc;
    vram__pool_lock(p);
    vram__owner *o = &p->owners[owner];
    if (o->budget && size > o->budget - (o->u.live_bytes < o->budget ? o->u.live_bytes : o->budget)) {
        char a[32], l[32], b[32];
        rc = vram__fail(VRAM_EBUDGET,
                        "budget of owner \"%s\" exceeded: a charge of %s (%s), live %s of %s",
                        o->name, vram__fmt_bytes(a, sizeof a, size), vram_kind_name(kind),
                        vram__fmt_bytes(l, sizeof l, o->u.live_bytes),
                        vram__fmt_bytes(b, sizeof b, o->budget));
        o->u.failed_allocs_total++;
        p->kinds[kind].failed_allocs_total++;
        p->st.failed_allocs_total++;
        p->st.budget_failures_total++;
    } else {
        add(&o->u, size);
        add(&p->kinds[kind], size);
        p->st.charged_bytes += size;
    }
    vram__pool_unlock(p);
    return rc;
}

int vram_pool_uncharge(vram_pool *p, uint64_t size, vram_owner owner, vram_kind kind)
{
    int rc = check(p, "vram_pool_uncharge", size, owner, kind);
    if (rc)
        return rc;
    vram__pool_lock(p);
    vram__usage *u = &p->owners[owner].u, *k = &p->kinds[kind];
    if (u->charged_bytes < size || k->charged_bytes < size) {
        char a[32], c[32];
        rc = vram__fail(VRAM_EINVAL,
                        "vram_pool_uncharge: pool \"%s\": %s back from owner \"%s\" (%s), which "
                        "has %s charged",
                        p->name, vram__fmt_bytes(a, sizeof a, size), p->owners[owner].name,
                        vram_kind_name(kind),
                        vram__fmt_bytes(c, sizeof c,
                                        u->charged_bytes < k->charged_bytes ? u->charged_bytes
                                                                            : k->charged_bytes));
    } else {
        u->live_bytes -= size;
        u->charged_bytes -= size;
        k->live_bytes -= size;
        k->charged_bytes -= size;
        p->st.charged_bytes -= size;
    }
    vram__pool_unlock(p);
    return rc;
}
