/* src/core/mem/owners.c - owners and their budgets: registration, lookup by name,
 * budget changes. Accounting itself happens in pool.c on each operation. */
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

int vram__owner_add(vram_pool *p, const char *name, uint64_t budget, vram_owner *out)
{
    if (!name || !*name)
        return vram__fail(VRAM_EINVAL, "an owner needs a non-empty name");
    for (size_t i = 0; i < p->n_owners; i++)
        if (strcmp(p->owners[i].name, name) == 0)
            return vram__fail(VRAM_EINVAL, "pool \"%s\" already has an owner \"%s\"", p->name,
                              name);
    if (p->n_owners >= VRAM_OWNERS_MAX)
        return vram__fail(VRAM_ELIMIT, "pool \"%s\" has %u owners, the most it can have", p->name,
                          VRAM_OWNERS_MAX);
    char *copy = vram__strdup(name);
    if (!copy)
        return VRAM_EHOSTMEM;
    vram__owner *o = vram__realloc_array(p->owners, p->n_owners + 1, sizeof *o);
    if (!o) {
        free(copy);
        return VRAM_EHOSTMEM;
    }
    p->owners = o;
    p->owners[p->n_owners] = (vram__owner){.name = copy, .budget = budget};
    if (out)
        *out = (vram_owner)p->n_owners;
    p->n_owners++;
    return 0;
}

void vram__owners_destroy(vram_pool *p)
{
    for (size_t i = 0; i < p->n_owners; i++)
        free(p->owners[i].name);
    free(p->owners);
    p->owners = NULL;
    p->n_owners = 0;
}

int vram_owner_create(vram_pool *p, const char *name, uint64_t budget, vram_owner *out)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_owner_create: pool is NULL");
    vram__pool_lock(p);
    int rc = vram__owner_add(p, name, budget, out);
    vram__pool_unlock(p);
    return rc;
}

int vram_owner_find(vram_pool *p, const char *name, vram_owner *out)
{
    if (!p || !name || !out)
        return vram__fail(VRAM_EINVAL, "vram_owner_find: pool, name and out are required");
    vram__pool_lock(p);
    int rc = VRAM_EINVAL;
    for (size_t i = 0; i < p->n_owners; i++) {
        if (strcmp(p->owners[i].name, name) == 0) {
            *out = (vram_owner)i;
            rc = 0;
            break;
        }
    }
    if (rc)
        vram__fail(rc, "pool \"%s\" has no owner \"%s\"", p->name, name);
    vram__pool_unlock(p);
    return rc;
}

int vram_owner_set_budget(vram_pool *p, vram_owner owner, uint64_t budget)
{
    if (!p)
        return vram__fail(VRAM_EINVAL, "vram_owner_set_budget: pool is NULL");
    vram__pool_lock(p);
    int rc = 0;
    if (owner >= p->n_owners)
        rc = vram__fail(VRAM_EINVAL, "pool \"%s\" has no owner %u", p->name, owner);
    else
        p->owners[owner].budget = budget;
    vram__pool_unlock(p);
    return rc;
}

const char *vram_owner_name(vram_pool *p, vram_owner owner)
{
    if (!p)
        return NULL;
    vram__pool_lock(p);
    const char *n = owner < p->n_owners ? p->owners[owner].name : NULL;
    vram__pool_unlock(p);
    return n;
}
