/* src/preload/group_ledger.c - the group ledger of group_ledger.h: one
 * budget shared by processes through a shared memory object, kept with
 * C11 atomics on the mapping and no lock.
 *
 * The ledger: a header (magic, version, a state word, the owner of the
 * making, the budget) and 256 slots of one cache line each, {word,
 * charged}. A slot's word is 0 when free, else a state (claiming or live)
 * and the identity of its process: pid (22 bits, PID_MAX_LIMIT) and start
 * time (40 bits of clock ticks after boot). A dead identity never lives
 * again, so a compare-and-swap on the word cannot mistake a new member for
 * a dead one (no ABA), and two reclaimers cannot both free a slot.
 *
 * Reserving: add to our slot's charged, then sum the charged of every live
 * slot. All of it is sequentially consistent, so of two members adding at
 * once at least one sees the other's bytes: the bytes granted and still
 * held by live members never pass the budget. The sum first counts every
 * live slot as it is (the dead counting too, which can only refuse);
 * only if that passes the budget are the members looked up in /proc, the
 * dead freed, and the sum taken again; a refusal takes the bytes back and
 * tries once more if the others' bytes in flight have gone meanwhile.
 * Only the owner writes a live slot's charged; the claimer zeroes it.
 *
 * Making, resetting and removing the ledger: one process at a time holds
 * "the role" (the owner word, taken by compare-and-swap from 0 or from a
 * dead holder), marks the state busy (odd), does its work and publishes a
 * new even state. A joiner claims its slot between two readings of the
 * state and reads the budget there, as a sequence lock: if the state moved
 * it looks again. So a reset, which changes the budget only when its scan
 * (after marking busy) finds no live member, and the removal by the last
 * member, which tombstones and unlinks the object only then, can never
 * catch a member unawares: a member claimed before the scan is seen, and
 * one claimed after it sees the state moved. Joiners wait for a busy state
 * at most 2 s; a holder that died is replaced at once, a file nobody
 * claimed the making of is taken over after 1 s. */
#include "group_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/internal.h"

/* Atomics shared between processes must be lock-free: an address-based lock
 * table would not be shared. */
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "64-bit atomics are lock-free");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "an atomic word is 8 bytes");

#define LEDGER_MAGIC UINT64_C(0x317072676d617276) /* "vramgrp1" */
#define LEDGER_VERSION 1u
#define TOMBSTONE UINT64_MAX /* state: being removed, reopen */

#define PID_BITS 22
#define START_BITS 40
#define PID_MASK ((UINT64_C(1) << PID_BITS) - 1)
#define START_MASK ((UINT64_C(1) << START_BITS) - 1)
#define ID_MASK ((UINT64_C(1) << 62) - 1)
#define W_CLAIMING (UINT64_C(1) << 62)
#define W_LIVE (UINT64_C(2) << 62)

#define WAIT_NS UINT64_C(2000000000)     /* a joiner gives up after this */
#define TAKEOVER_NS UINT64_C(1000000000) /* a making nobody claimed is taken over */
#define NAP_NS 200000L

typedef struct slot {
    _Atomic uint64_t word;
    _Atomic uint64_t charged;
    uint64_t pad[6];
} slot;
_Static_assert(sizeof(slot) == 64, "a slot is a cache line");

typedef struct ledger {
    _Atomic uint64_t magic; /* LEDGER_MAGIC once first made (release) */
    uint32_t version, nslots;
    _Atomic uint64_t state;  /* 0 new, odd busy, even published; TOMBSTONE */
    _Atomic uint64_t owner;  /* identity holding the role, or 0 */
    _Atomic uint64_t budget; /* bytes */
    _Atomic uint64_t high;   /* slots ever claimed: scans stop there */
    uint64_t pidns_dev, pidns_ino;
    char name[VRAM__GROUP_NAME_MAX + 1];
    _Alignas(64) slot slots[VRAM__GROUP_SLOTS];
} ledger;

struct vram__group {
    ledger *L;
    int slot;    /* -1: no slot (a failed after_fork_child) */
    int pid;     /* the process whose member this handle is */
    uint64_t id; /* its identity (pid | start << 22) */
    dev_t dev;   /* the object mapped */
    ino_t ino;
    uint64_t pidns_dev, pidns_ino;
    char name[VRAM__GROUP_NAME_MAX + 1];
    char path[sizeof "/vramkit-group-" + VRAM__GROUP_NAME_MAX];
};

/* ---- processes ----------------------------------------------------------- */

typedef struct proc_info {
    char state;
    uint64_t threads, start;
} proc_info;

/* Read /proc/PID/stat (PID 0: self): 1, 0 when there is no such process,
 * or -errno when it cannot be told. No allocation, no stdio stream. */
static int proc_read(int pid, proc_info *pi)
{
    char path[48] = "/proc/self/stat", buf[1024];
    if (pid) /* (self needs no formatting: a fork's child handler reads it) */
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : -errno;
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    int err = errno;
    close(fd);
    if (n < 0)
        return err == ESRCH ? 0 : -err;
    buf[n] = '\0';
    pi->threads = pi->start = 0;
    /* "pid (comm) state ppid ...": comm may hold spaces and ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return -EIO;
    p += 2;
    pi->state = *p;
    for (unsigned field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EIO;
        p++;
        if (field + 1 == 20 || field + 1 == 22) {
            uint64_t v = 0;
            if (*p < '0' || *p > '9')
                return -EIO;
            for (; *p >= '0' && *p <= '9'; p++)
                v = v * 10 + (uint64_t)(*p - '0');
            if (field + 1 == 20)
                pi->threads = v;
            else
                pi->start = v;
        }
    }
    return 1;
}

static uint64_t id_make(int pid, uint64_t start) { return (uint64_t)pid | start << PID_BITS; }
static int id_pid(uint64_t id) { return (int)(id & PID_MASK); }
static uint64_t id_start(uint64_t id) { return id >> PID_BITS & START_MASK; }

/* Whether the process of identity `id` may still hold device memory: 0 only
 * when it certainly does not (gone, its pid reused, or a zombie: a process
 * whose every thread has ended; a leader that ended while other threads run
 * shows Z too, with more than one thread). An unreadable /proc entry (no
 * file descriptor left, say) counts as alive. */
static int id_alive(uint64_t id, uint64_t self)
{
    if (id == self)
        return 1;
    proc_info pi;
    int rc = proc_read(id_pid(id), &pi);
    if (rc <= 0)
        return rc < 0;
    if (pi.start != id_start(id))
        return 0;
    return !(pi.state == 'X' || (pi.state == 'Z' && pi.threads <= 1));
}

/* ---- slots ----------------------------------------------------------------- */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

static unsigned scan_end(ledger *L)
{
    uint64_t hi = atomic_load(&L->high);
    return hi > VRAM__GROUP_SLOTS ? VRAM__GROUP_SLOTS : (unsigned)hi;
}

/* The bytes of every live slot, the dead counting too. */
static uint64_t sum_fast(ledger *L)
{
    uint64_t used = 0;
    unsigned end = scan_end(L);
    for (unsigned i = 0; i < end; i++)
        if (atomic_load(&L->slots[i].word) & W_LIVE)
            used = sat_add(used, atomic_load(&L->slots[i].charged));
    return used;
}

typedef struct tally {
    uint64_t used;
    unsigned members, procs;
} tally;

/* The live members, each looked up (`self` needs no look-up), the dead ones'
 * slots freed; up to `cap` of them listed into `out`. */
static tally scan_checked(ledger *L, uint64_t self, vram__group_member *out, unsigned cap)
{
    uint64_t seen[VRAM__GROUP_SLOTS];
    tally t = {0, 0, 0};
    unsigned end = scan_end(L);
    for (unsigned i = 0; i < end; i++) {
        slot *s = &L->slots[i];
        uint64_t w = atomic_load(&s->word);
        if (!w)
            continue;
        uint64_t id = w & ID_MASK;
        if (!id_alive(id, self)) {
            /* Fails harmlessly when another reclaimer was first. */
            atomic_compare_exchange_strong(&s->word, &w, 0);
            continue;
        }
        if (!(w & W_LIVE))
            continue; /* still being claimed: it holds nothing yet */
        uint64_t c = atomic_load(&s->charged);
        t.used = sat_add(t.used, c);
        if (out && t.members < cap)
            out[t.members] = (vram__group_member){id_pid(id), c};
        t.members++;
        unsigned k = 0;
        while (k < t.procs && seen[k] != id)
            k++;
        if (k == t.procs)
            seen[t.procs++] = id;
    }
    return t;
}

/* Claim a free slot for identity `id` holding `charged`: its index or -1. */
static int claim(ledger *L, uint64_t id, uint64_t charged)
{
    for (unsigned i = 0; i < VRAM__GROUP_SLOTS; i++) {
        slot *s = &L->slots[i];
        uint64_t w = 0;
        if (atomic_load(&s->word) ||
            !atomic_compare_exchange_strong(&s->word, &w, W_CLAIMING | id))
            continue;
        /* The scans must reach this slot before it holds anything. */
        uint64_t hi = atomic_load(&L->high);
        while (hi < i + 1 && !atomic_compare_exchange_weak(&L->high, &hi, i + 1)) {
        }
        atomic_store(&s->charged, charged);
        atomic_store(&s->word, W_LIVE | id);
        return (int)i;
    }
    return -1;
}

static int claim_or_reclaim(ledger *L, uint64_t id)
{
    int i = claim(L, id, 0);
    if (i < 0) {
        scan_checked(L, id, NULL, 0);
        i = claim(L, id, 0);
    }
    return i;
}

static void free_slot(ledger *L, int i)
{
    atomic_store(&L->slots[i].charged, 0);
    atomic_store(&L->slots[i].word, 0);
}

/* ---- the role: making, resetting, removing -------------------------------- */

/* Take the role from nobody or from a dead holder (never from a live one,
 * this process included). */
static int grab_role(ledger *L, uint64_t me)
{
    uint64_t o = atomic_load(&L->owner);
    if (o && (o == me || id_alive(o, 0)))
        return 0;
    return atomic_compare_exchange_strong(&L->owner, &o, me);
}

static void nap(void)
{
    struct timespec ts = {0, NAP_NS};
    nanosleep(&ts, NULL);
}

/* Whether the object's name still names the object this handle mapped. */
static int path_names(const vram__group *g)
{
    int fd = shm_open(g->path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct stat st;
    int same = fstat(fd, &st) == 0 && st.st_dev == g->dev && st.st_ino == g->ino;
    close(fd);
    return same;
}

/* With the role held: make the ledger (never published yet) with budget
 * `want`, or reset it (a new budget only when no member lives), then
 * publish a new state and give the role up. 1 when the object is being
 * removed (reopen). */
static int hold_role(vram__group *g, uint64_t want)
{
    ledger *L = g->L;
    uint64_t s = atomic_load(&L->state);
    if (s == TOMBSTONE) {
        /* Its remover died between the tombstone and the unlink. */
        if (path_names(g))
            shm_unlink(g->path);
        return 1;
    }
    atomic_store(&L->state, s | 1);
    if (atomic_load_explicit(&L->magic, memory_order_acquire) != LEDGER_MAGIC) {
        L->version = LEDGER_VERSION;
        L->nslots = VRAM__GROUP_SLOTS;
        L->pidns_dev = g->pidns_dev;
        L->pidns_ino = g->pidns_ino;
        memcpy(L->name, g->name, sizeof L->name);
        atomic_store(&L->budget, want);
        atomic_store_explicit(&L->magic, LEDGER_MAGIC, memory_order_release);
    } else if (want && scan_checked(L, 0, NULL, 0).members == 0) {
        atomic_store(&L->budget, want);
    }
    atomic_store(&L->state, (s | 1) + 1);
    atomic_store(&L->owner, 0);
    return 0;
}

/* The last member out removes the object: with the role, the state busy
 * and still no live member, tombstone it and unlink the name. */
static void remove_if_last(vram__group *g)
{
    ledger *L = g->L;
    if (scan_checked(L, 0, NULL, 0).members || !grab_role(L, g->id))
        return;
    uint64_t s = atomic_load(&L->state);
    if (s == TOMBSTONE)
        return;
    atomic_store(&L->state, s | 1);
    if (scan_checked(L, 0, NULL, 0).members == 0) {
        atomic_store(&L->state, TOMBSTONE); /* the role stays taken */
        if (path_names(g))
            shm_unlink(g->path);
        return;
    }
    atomic_store(&L->state, (s | 1) + 1);
    atomic_store(&L->owner, 0);
}

/* ---- opening ----------------------------------------------------------------- */

static int bad_name(const char *name)
{
    size_t n = strlen(name);
    if (!n)
        return vram__fail(VRAM_EINVAL, "group name is empty");
    if (n > VRAM__GROUP_NAME_MAX)
        return vram__fail(VRAM_EINVAL, "group name \"%.*s...\" has %zu characters, at most %d "
                                       "are allowed", 16, name, n, VRAM__GROUP_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return vram__fail(VRAM_EINVAL, "group name \"%s\" has a character 0x%02x at %zu: only "
                                           "letters, digits, '-', '_' and '.' are allowed",
                              name, c, i);
    }
    return 0;
}

static int not_ready(const vram__group *g, uint64_t want)
{
    ledger *L = g->L;
    uint64_t o = atomic_load(&L->owner);
    if (!want && atomic_load(&L->magic) != LEDGER_MAGIC)
        return vram__fail(VRAM_EBUSY, "group %s: /dev/shm%s was not made within %.1f s and no "
                                      "budget was given to make it", g->name, g->path,
                          WAIT_NS / 1e9);
    if (o)
        return vram__fail(VRAM_EBUSY, "group %s: /dev/shm%s was not ready within %.1f s: process "
                                      "%d, alive, is making or resetting it (stopped?)",
                          g->name, g->path, WAIT_NS / 1e9, id_pid(o));
    return vram__fail(VRAM_EBUSY, "group %s: /dev/shm%s was not ready within %.1f s", g->name,
                      g->path, WAIT_NS / 1e9);
}

/* Check a published ledger against this library and process. */
static int check_ledger(const vram__group *g)
{
    ledger *L = g->L;
    if (atomic_load_explicit(&L->magic, memory_order_acquire) != LEDGER_MAGIC ||
        L->version != LEDGER_VERSION || L->nslots != VRAM__GROUP_SLOTS)
        return vram__fail(VRAM_EINVAL, "group %s: /dev/shm%s is not a ledger of this version "
                                       "(version %u with %u slots; this library's: %u with %u)",
                          g->name, g->path, L->version, L->nslots, LEDGER_VERSION,
                          VRAM__GROUP_SLOTS);
    if (L->pidns_ino && g->pidns_ino &&
        (L->pidns_ino != g->pidns_ino || L->pidns_dev != g->pidns_dev))
        return vram__fail(VRAM_EINVAL, "group %s: its ledger was made in PID namespace %llu and "
                                       "this process is in %llu: members must share one, so that "
                                       "each can tell whether the others are alive",
                          g->name, (unsigned long long)L->pidns_ino,
                          (unsigned long long)g->pidns_ino);
    return 0;
}

/* On a mapped ledger: wait until it is published, making or resetting it
 * when that falls to us, and claim a slot under a budget read between two
 * equal states. 0 (g->slot set), 1 (reopen), or an error. */
static int settle(vram__group *g, uint64_t want, uint64_t t0)
{
    ledger *L = g->L;
    int mine = -1, reset = 0, rc;
    for (;;) {
        uint64_t waited = vram__now_ns() - t0;
        if (waited > WAIT_NS) {
            rc = not_ready(g, want);
            break;
        }
        uint64_t s = atomic_load(&L->state);
        if (s == TOMBSTONE) {
            if (grab_role(L, g->id) && path_names(g))
                shm_unlink(g->path); /* its remover died before unlinking */
            rc = 1;
            break;
        }
        if (s == 0 || (s & 1)) {
            /* Being made or reset. The holder's death is seen at once; a
             * making nobody claimed is taken over late; without a budget
             * there is nothing to make a ledger with. */
            uint64_t o = atomic_load(&L->owner);
            int can = want || atomic_load(&L->magic) == LEDGER_MAGIC;
            if (can && (o || waited > TAKEOVER_NS) && grab_role(L, g->id)) {
                if ((rc = hold_role(g, want)) != 0)
                    break;
                continue;
            }
            nap();
            continue;
        }
        if ((rc = check_ledger(g)) != 0)
            break;
        if (mine < 0) {
            /* A ledger no member lives in takes the new budget (once: two
             * openers asking different budgets do not take turns). */
            if (want && !reset && want != atomic_load(&L->budget) &&
                scan_checked(L, 0, NULL, 0).members == 0) {
                if (grab_role(L, g->id)) {
                    reset = 1;
                    if ((rc = hold_role(g, want)) != 0)
                        break;
                } else {
                    nap();
                }
                continue;
            }
            if ((mine = claim_or_reclaim(L, g->id)) < 0) {
                rc = vram__fail(VRAM_ELIMIT, "group %s: all %d slots of its ledger are held by "
                                             "live members", g->name, VRAM__GROUP_SLOTS);
                break;
            }
        }
        uint64_t b = atomic_load(&L->budget);
        if (atomic_load(&L->state) != s)
            continue; /* moved under us: look again */
        if (want && b != want) {
            char have[32], asked[32];
            rc = vram__fail(VRAM_EINVAL, "group %s has a budget of %s (%llu bytes), not the %s "
                                         "(%llu bytes) asked: ask 0 to take the group's",
                            g->name, vram__fmt_bytes(have, sizeof have, b), (unsigned long long)b,
                            vram__fmt_bytes(asked, sizeof asked, want),
                            (unsigned long long)want);
            break;
        }
        g->slot = mine;
        return 0;
    }
    if (mine >= 0)
        free_slot(L, mine);
    return rc;
}

/* Open (or create) the object and map it. 0, 1 (try again) or an error. */
static int map_ledger(vram__group *g, uint64_t want, unsigned mode, uint64_t t0, int *created)
{
    int fd = -1;
    *created = 0;
    if (want) {
        fd = shm_open(g->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (fd >= 0)
            *created = 1;
        else if (errno != EEXIST)
            return vram__fail(VRAM_EIO, "group %s: cannot create /dev/shm%s: %s", g->name,
                              g->path, strerror(errno));
    }
    if (fd < 0) {
        fd = shm_open(g->path, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0 && errno == ENOENT)
            return want ? 1 : vram__fail(VRAM_EINVAL, "group %s does not exist (no /dev/shm%s): a "
                                                      "budget is needed to create it",
                                         g->name, g->path);
        if (fd < 0)
            return vram__fail(VRAM_EIO, "group %s: cannot open /dev/shm%s: %s", g->name, g->path,
                              strerror(errno));
    }
    int rc = 0;
    struct stat st;
    if (*created && (fchmod(fd, (mode_t)mode) || ftruncate(fd, sizeof(ledger)))) {
        rc = vram__fail(VRAM_EIO, "group %s: cannot make /dev/shm%s %zu bytes: %s", g->name,
                        g->path, sizeof(ledger), strerror(errno));
        shm_unlink(g->path);
        goto out;
    }
    if (fstat(fd, &st)) {
        rc = vram__fail(VRAM_EIO, "group %s: cannot stat /dev/shm%s: %s", g->name, g->path,
                        strerror(errno));
        goto out;
    }
    g->dev = st.st_dev;
    g->ino = st.st_ino;
    if (st.st_size == 0) {
        /* Its creator has not sized it yet: wait, or size it when it seems
         * to have died in between (harmless if it has not). */
        if (vram__now_ns() - t0 <= TAKEOVER_NS || !path_names(g)) {
            rc = 1;
            goto out;
        }
        if (ftruncate(fd, sizeof(ledger))) {
            rc = vram__fail(VRAM_EIO, "group %s: cannot make /dev/shm%s %zu bytes: %s", g->name,
                            g->path, sizeof(ledger), strerror(errno));
            goto out;
        }
    } else if ((size_t)st.st_size != sizeof(ledger)) {
        rc = vram__fail(VRAM_EINVAL, "group %s: /dev/shm%s has %lld bytes, a ledger of this "
                                     "version %zu", g->name, g->path, (long long)st.st_size,
                        sizeof(ledger));
        goto out;
    }
    void *p = mmap(NULL, sizeof(ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rc = vram__fail(VRAM_EIO, "group %s: cannot map /dev/shm%s: %s", g->name, g->path,
                        strerror(errno));
        goto out;
    }
    g->L = p;
out:
    close(fd);
    return rc;
}

int vram__group_open_mode(const char *name, uint64_t budget, unsigned mode, vram__group **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram__group_open: out is NULL");
    *out = NULL;
    if (!name)
        return vram__fail(VRAM_EINVAL, "group name is NULL");
    int rc = bad_name(name);
    if (rc)
        return rc;
    if (budget > VRAM__GROUP_BUDGET_MAX) {
        char b[32], m[32];
        return vram__fail(VRAM_EINVAL, "group %s: a budget of %s (%llu bytes) is past the largest "
                                       "a ledger takes, %s", name,
                          vram__fmt_bytes(b, sizeof b, budget), (unsigned long long)budget,
                          vram__fmt_bytes(m, sizeof m, VRAM__GROUP_BUDGET_MAX));
    }
    if (mode & ~0777u)
        return vram__fail(VRAM_EINVAL, "group %s: mode 0%o is not a permission mode", name, mode);
    _Atomic uint64_t probe;
    if (!atomic_is_lock_free(&probe))
        return vram__fail(VRAM_ENOSYS, "group %s: 64-bit atomics are not lock-free here, and a "
                                       "ledger shared by processes needs them", name);

    proc_info pi;
    if ((rc = proc_read(0, &pi)) <= 0)
        return vram__fail(VRAM_EIO, "group %s: cannot read /proc/self/stat (%s): the ledger needs "
                                    "/proc to tell live members from dead ones",
                          name, rc < 0 ? strerror(-rc) : "empty");
    int pid = getpid();
    if ((uint64_t)pid > PID_MASK || pi.start > START_MASK)
        return vram__fail(VRAM_EINVAL, "group %s: pid %d or start time %llu does not fit a slot",
                          name, pid, (unsigned long long)pi.start);
    vram__group *g = vram__calloc(1, sizeof *g);
    if (!g)
        return VRAM_EHOSTMEM;
    g->slot = -1;
    g->pid = pid;
    g->id = id_make(pid, pi.start);
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(g->path, sizeof g->path, "/vramkit-group-%s", name);
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) {
        g->pidns_dev = (uint64_t)ns.st_dev;
        g->pidns_ino = (uint64_t)ns.st_ino;
    }

    uint64_t t0 = vram__now_ns();
    for (;;) {
        int created;
        rc = map_ledger(g, budget, mode, t0, &created);
        if (rc == 0) {
            /* A creator makes its ledger at once, unless it stalled so long
             * that a joiner took the making over. */
            if (created && grab_role(g->L, g->id))
                rc = hold_role(g, budget);
            if (rc == 0)
                rc = settle(g, budget, t0);
            if (rc == 0) {
                *out = g;
                return 0;
            }
            munmap(g->L, sizeof(ledger));
            g->L = NULL;
        }
        if (rc < 0)
            break;
        if (vram__now_ns() - t0 > WAIT_NS) {
            rc = vram__fail(VRAM_EBUSY, "group %s: /dev/shm%s did not become a ledger to join "
                                        "within %.1f s", name, g->path, WAIT_NS / 1e9);
            break;
        }
        nap();
    }
    free(g);
    return rc;
}

int vram__group_open(const char *name, uint64_t budget, vram__group **out)
{
    return vram__group_open_mode(name, budget, 0600, out);
}

/* ---- members ------------------------------------------------------------------ */

static int no_slot(const vram__group *g)
{
    int pid = getpid();
    if (pid != g->pid)
        return vram__fail(VRAM_EINVAL, "group %s: process %d was forked from member %d and is "
                                       "no member itself yet (after_fork_child)",
                          g->name, pid, g->pid);
    return vram__fail(VRAM_EINVAL, "group %s: process %d holds no slot in the group (none could "
                                   "be claimed after the fork)", g->name, pid);
}

static int refuse(const vram__group *g, uint64_t bytes, uint64_t budget, uint64_t used,
                  unsigned procs)
{
    char b[32], u[32], r[32];
    return vram__fail(VRAM_EBUDGET, "group %s: %s more would pass its budget of %s: %s used by %u "
                                    "process%s (%llu + %llu > %llu bytes)", g->name,
                      vram__fmt_bytes(r, sizeof r, bytes), vram__fmt_bytes(b, sizeof b, budget),
                      vram__fmt_bytes(u, sizeof u, used), procs, procs == 1 ? "" : "es",
                      (unsigned long long)bytes, (unsigned long long)used,
                      (unsigned long long)budget);
}

int vram__group_reserve(vram__group *g, uint64_t bytes)
{
    if (!bytes)
        return 0;
    if (VRAM__UNLIKELY(g->slot < 0 || getpid() != g->pid))
        return no_slot(g);
    ledger *L = g->L;
    _Atomic uint64_t *mine = &L->slots[g->slot].charged;
    uint64_t budget = atomic_load(&L->budget);
    if (bytes > budget) {
        tally t = scan_checked(L, g->id, NULL, 0);
        return refuse(g, bytes, budget, t.used, t.procs);
    }
    for (int attempt = 0;; attempt++) {
        atomic_fetch_add(mine, bytes);
        if (sum_fast(L) <= budget)
            return 0;
        tally t = scan_checked(L, g->id, NULL, 0);
        if (t.used <= budget)
            return 0;
        atomic_fetch_sub(mine, bytes);
        /* Another member's bytes in flight may have gone meanwhile. */
        if (attempt == 0 && sat_add(sum_fast(L), bytes) <= budget)
            continue;
        return refuse(g, bytes, budget, t.used - bytes, t.procs);
    }
}

void vram__group_release(vram__group *g, uint64_t bytes)
{
    if (!bytes || g->slot < 0 || getpid() != g->pid)
        return;
    _Atomic uint64_t *mine = &g->L->slots[g->slot].charged;
    uint64_t cur = atomic_load(mine);
    while (!atomic_compare_exchange_weak(mine, &cur, cur > bytes ? cur - bytes : 0)) {
    }
}

static uint64_t self_id(const vram__group *g) { return getpid() == g->pid ? g->id : 0; }

int vram__group_stats(vram__group *g, uint64_t *used, uint64_t *budget, unsigned *members)
{
    tally t = scan_checked(g->L, self_id(g), NULL, 0);
    if (used)
        *used = t.used;
    if (budget)
        *budget = atomic_load(&g->L->budget);
    if (members)
        *members = t.members;
    return 0;
}

int vram__group_member_list(vram__group *g, vram__group_member *out, unsigned cap,
                            unsigned *count)
{
    tally t = scan_checked(g->L, self_id(g), out, cap);
    if (count)
        *count = t.members;
    return 0;
}

const char *vram__group_name(const vram__group *g) { return g->name; }

int vram__group_after_fork_child(vram__group *g)
{
    g->slot = -1;
    g->pid = getpid();
    proc_info pi;
    int rc = proc_read(0, &pi);
    if (rc <= 0)
        return vram__fail(VRAM_EIO, "group %s: cannot read /proc/self/stat (%s) in forked "
                                    "process %d", g->name, rc < 0 ? strerror(-rc) : "empty",
                          g->pid);
    g->id = id_make(g->pid, pi.start & START_MASK);
    int i = claim_or_reclaim(g->L, g->id);
    if (i < 0)
        return vram__fail(VRAM_ELIMIT, "group %s: forked process %d found all %d slots held by "
                                       "live members", g->name, g->pid, VRAM__GROUP_SLOTS);
    g->slot = i;
    return 0;
}

void vram__group_close(vram__group *g)
{
    if (!g)
        return;
    if (g->slot >= 0 && getpid() == g->pid) {
        free_slot(g->L, g->slot);
        remove_if_last(g);
    }
    munmap(g->L, sizeof(ledger));
    free(g);
}

/* ---- test hooks ------------------------------------------------------------------ */

int vram__group_proc_start(int pid, uint64_t *start)
{
    proc_info pi;
    int rc = proc_read(pid, &pi);
    if (rc <= 0)
        return vram__fail(VRAM_EIO, "cannot read /proc/%d/stat (%s)", pid,
                          rc < 0 ? strerror(-rc) : "no such process");
    *start = pi.start;
    return 0;
}

int vram__group_test_plant(vram__group *g, int pid, uint64_t start, uint64_t bytes)
{
    int i = claim(g->L, id_make(pid, start & START_MASK), bytes);
    return i >= 0 ? i : vram__fail(VRAM_ELIMIT, "group %s: no free slot", g->name);
}

int vram__group_test_half_made(const char *name, int pid, uint64_t start)
{
    char path[sizeof "/vramkit-group-" + VRAM__GROUP_NAME_MAX];
    snprintf(path, sizeof path, "/vramkit-group-%s", name);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return vram__fail(VRAM_EIO, "cannot create /dev/shm%s: %s", path, strerror(errno));
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(ledger)) == 0)
        p = mmap(NULL, sizeof(ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED)
        return vram__fail(VRAM_EIO, "cannot size or map /dev/shm%s: %s", path, strerror(err));
    ledger *L = p;
    atomic_store(&L->owner, id_make(pid, start & START_MASK));
    atomic_store(&L->state, 1);
    munmap(p, sizeof(ledger));
    return 0;
}
