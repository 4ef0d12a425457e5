/* src/preload/hooks.c - the table of hooks (hooks.h's list): each exact
 * name, the library it stands in front of and our function of that name;
 * then the helpers the hooks call, which have no hook of their own (their
 * entries point at nothing of ours, so no pointer is ever routed to them). */
#include "hooks.h"

/* The hooks' addresses only: their prototypes are the driver's, declared
 * where they are defined. */
#define VRAM__PL_DECL(name, lib) extern void name(void);
VRAM__PL_HOOKS(VRAM__PL_DECL)
#undef VRAM__PL_DECL

const vram__pl_hook vram__pl_hooks[] = {
#define VRAM__PL_ENTRY(name, lib) {#name, VRAM__PL_LIB_##lib, (void *)name},
    VRAM__PL_HOOKS(VRAM__PL_ENTRY)
#undef VRAM__PL_ENTRY
#define VRAM__PL_HELPER(name, lib) {#name, VRAM__PL_LIB_##lib, NULL},
    VRAM__PL_HELPERS(VRAM__PL_HELPER)
#undef VRAM__PL_HELPER
};
const size_t vram__pl_n_hooks = sizeof vram__pl_hooks / sizeof vram__pl_hooks[0];

_Static_assert(sizeof vram__pl_hooks / sizeof vram__pl_hooks[0] == VRAM__PL_H_COUNT,
               "one entry per name");
