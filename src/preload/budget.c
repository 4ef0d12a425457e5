/* src/preload/budget.c - limit mode's budget: the bytes the program's
 * charged kinds may hold, taken before a request goes to the driver and
 * given back when it is freed or fails; with a group, the same bytes are
 * also taken from the group's ledger, shared by every process of the group
 * on the machine (group_ledger.c), so that their sum never passes it. */
#include <stdatomic.h>
#include <stdio.h>

#include "group_ledger.h"
#include "preload_internal.h"
#include "vramkit/config.h"
#include "vramkit/error.h"

static int limit_on;
static uint64_t budget;
static _Atomic uint64_t taken;
static vram__group *group;

int vram__pl_limit(void) { return limit_on; }
uint64_t vram__pl_budget(void) { return budget; }

int vram__pl_take(uint64_t size)
{
    uint64_t now = atomic_fetch_add(&taken, size) + size;
    if (now > budget) {
        atomic_fetch_sub(&taken, size);
        return -1;
    }
    if (group && vram__group_reserve(group, size)) {
        atomic_fetch_sub(&taken, size);
        return -1;
    }
    return 0;
}

void vram__pl_give(uint64_t size)
{
    uint64_t t = atomic_load(&taken);
    while (!atomic_compare_exchange_weak(&taken, &t, t > size ? t - size : 0))
        ;
    if (group)
        vram__group_release(group, size);
}

int vram__pl_budget_init(const char *spec, const char *group_name, char *err, size_t cap)
{
    if (!spec || !*spec) {
        snprintf(err, cap, "limit mode needs a budget (VRAM_PRELOAD_BUDGET, e.g. 24G)");
        return -1;
    }
    uint64_t b = 0;
    if (vram_size_parse(spec, &b) || b == 0) {
        snprintf(err, cap, "the budget \"%s\" is not a size above 0 (bytes, or 512M, 24G)", spec);
        return -1;
    }
    budget = b;
    limit_on = 1;
    if (group_name && *group_name && vram__group_open(group_name, b, &group)) {
        snprintf(err, cap, "%s", vram_last_error());
        group = NULL;
        return -1;
    }
    return 0;
}

void vram__pl_budget_after_fork(void)
{
    atomic_store(&taken, 0);
    if (group && vram__group_after_fork_child(group))
        group = NULL;
}

void vram__pl_budget_fini(void)
{
    if (group)
        vram__group_close(group);
    group = NULL;
}

void vram__pl_group_use(uint64_t *used, uint64_t *b, unsigned *members)
{
    *used = 0;
    *b = 0;
    *members = 0;
    if (group)
        vram__group_stats(group, used, b, members);
}
