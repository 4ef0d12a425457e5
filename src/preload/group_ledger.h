/* src/preload/group_ledger.h - one device-memory budget shared by the
 * processes of a group (VRAM_PRELOAD_GROUP): a ledger in POSIX shared
 * memory, /dev/shm/vramkit-group-<name>, made by the first member and
 * joined by the others.
 *
 * No lock that a dead or stopped process could hold: each member has a
 * slot of its own (its identity, pid and start time, and the bytes it
 * holds), claimed and reclaimed by compare-and-swap; reserving adds to the
 * member's slot and then sums the slots of the live members, taking the
 * bytes back when the sum passes the budget. So the bytes granted to live
 * members never pass the budget; two members reserving at once when only
 * one of them would fit may both be refused. A member that dies, even by
 * SIGKILL, stops counting as soon as another member looks (a refusal, the
 * statistics, an open): its pid must name a living process with the
 * recorded start time, so a reused pid is not mistaken for it. A stopped
 * member keeps its bytes and blocks no one.
 *
 * Members must share a PID namespace (checked when joining) and, to see
 * each other in /proc, a user (the ledger's mode is 0600 unless told).
 *
 * Errors: 0 or a negative VRAM_E* code with the sentence in
 * vram_last_error(). vram__group_reserve and vram__group_release allocate
 * nothing, take no lock and log nothing (a refusal formats its sentence
 * into the per-thread buffer); they read /proc only when a reservation
 * would be refused. Open and close may allocate and wait (at most about
 * 2 s, for a ledger another process is making). */
#ifndef VRAM_PRELOAD_GROUP_LEDGER_H
#define VRAM_PRELOAD_GROUP_LEDGER_H

#include <stdint.h>

#define VRAM__GROUP_NAME_MAX 64
/* Members a ledger holds at once. */
#define VRAM__GROUP_SLOTS 256
/* The largest budget a ledger takes (1 PiB): sums of many members'
 * tentative reservations stay far from overflowing. */
#define VRAM__GROUP_BUDGET_MAX (UINT64_C(1) << 50)

typedef struct vram__group vram__group;

/* Join the group `name` (letters, digits, '-', '_', '.'; 1 to 64 of them),
 * creating its ledger with `budget` bytes if there is none. A ledger's
 * budget is the one its creator gave: asking another is VRAM_EINVAL naming
 * both, unless `budget` is 0 ("the ledger's"); 0 cannot create one. A
 * ledger left with no live member takes the budget of the next opener.
 * Errors: VRAM_EINVAL (name, budget, another PID namespace), VRAM_EIO (the
 * shared memory object, /proc), VRAM_ELIMIT (every slot held by a live
 * member), VRAM_EBUSY (another process kept the ledger in the making past
 * the wait), VRAM_EHOSTMEM. *out is NULL on error. */
int vram__group_open(const char *name, uint64_t budget, vram__group **out);
/* The same with the shared memory object's permissions when this call
 * creates it (0600 for vram__group_open; 0660 lets a Unix group share it). */
int vram__group_open_mode(const char *name, uint64_t budget, unsigned mode, vram__group **out);

/* Charge `bytes` to this member: 0, or VRAM_EBUDGET ("group cams: 24.0 MiB
 * more would pass its budget of 1.00 GiB: 1.00 GiB used by 3 processes")
 * with nothing charged. VRAM_EINVAL in a child forked from the member
 * before vram__group_after_fork_child. 0 bytes is 0. */
int vram__group_reserve(vram__group *g, uint64_t bytes);
/* Give back `bytes` charged to this member (more than it holds gives back
 * what it holds). Nothing in a forked child before after_fork_child. */
void vram__group_release(vram__group *g, uint64_t bytes);

/* The bytes held by live members, the budget and the number of live
 * members (any pointer may be NULL); dead members found are reclaimed.
 * Always 0. */
int vram__group_stats(vram__group *g, uint64_t *used, uint64_t *budget, unsigned *members);

typedef struct vram__group_member {
    int pid;
    uint64_t bytes;
} vram__group_member;
/* The live members, at most `cap` of them into `out` (in slot order), and
 * how many there are in *count (which may exceed cap). Always 0. */
int vram__group_member_list(vram__group *g, vram__group_member *out, unsigned cap,
                            unsigned *count);

/* The group's name. */
const char *vram__group_name(const vram__group *g);

/* In the child of a fork: become a member of its own with nothing charged
 * (device memory is not inherited), leaving the parent's slot alone. The
 * handle is the child's copy of the parent's. VRAM_ELIMIT when no slot is
 * free, VRAM_EIO without /proc: the handle then refuses every reservation.
 * Call it in the child only (a pthread_atfork child handler). */
int vram__group_after_fork_child(vram__group *g);

/* Leave the group: this member's bytes are given back and its slot freed;
 * the last member to leave removes the shared memory object. In a forked
 * child that did not call after_fork_child, only the child's mapping goes.
 * NULL is allowed. */
void vram__group_close(vram__group *g);

/* ---- test hooks -------------------------------------------------------- */

/* The start time (field 22 of /proc/PID/stat, clock ticks after boot) of
 * process `pid`: 0, or VRAM_EIO when it cannot be read. */
int vram__group_proc_start(int pid, uint64_t *start);
/* Put a member into a free slot as if process `pid`, started at `start`,
 * had joined holding `bytes`: the slot index, or VRAM_ELIMIT. */
int vram__group_test_plant(vram__group *g, int pid, uint64_t start, uint64_t bytes);
/* Create the ledger of group `name` as if process `pid`, started at
 * `start`, had created it and stopped (or died) while making it: sized,
 * busy, that process holding the making. 0 or VRAM_EIO. */
int vram__group_test_half_made(const char *name, int pid, uint64_t start);

#endif
