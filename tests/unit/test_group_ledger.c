/* tests/unit/test_group_ledger.c - the group ledger of
 * src/preload/group_ledger.h: a budget shared by members in one process, in
 * threads and in forked processes, enforced to the byte with its sentence;
 * a member killed with SIGKILL stops counting (as a zombie already); a
 * stopped member keeps its bytes and blocks no one; 8 processes hammering
 * reserve/release never hold more than the budget between them; 8 processes
 * creating one group at once join one ledger; a reused pid (a slot with a
 * live pid and another start time) counts as dead; a creator that died or
 * stalled while making the ledger; stale ledgers taking a new budget; bad
 * names and budgets. Every group is named after this process's pid, and
 * each test checks that the last member removed the shared memory object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/internal.h"
#include "preload/group_ledger.h"

#define MiB (UINT64_C(1) << 20)

/* ---- helpers --------------------------------------------------------- */

static char *group_name(const char *tag)
{
    static char buf[VRAM__GROUP_NAME_MAX + 1];
    snprintf(buf, sizeof buf, "vkt%d-%s", (int)getpid(), tag);
    return buf;
}

static int shm_exists(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/vramkit-group-%s", name);
    int fd = shm_open(path, O_RDONLY, 0);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

static void shm_remove(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/vramkit-group-%s", name);
    shm_unlink(path);
}

/* The last member's close removed the object (and nothing is left behind). */
static void assert_gone(const char *name)
{
    int there = shm_exists(name);
    shm_remove(name);
    assert_false(there);
}

static void assert_error_has(const char *want)
{
    const char *msg = vram_last_error();
    if (!strstr(msg, want))
        fail_msg("the error \"%s\" does not say \"%s\"", msg, want);
}

/* After each test, passed or not: remove every object named after this
 * process that is still there. */
static int remove_ours(void **state)
{
    (void)state;
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "vramkit-group-vkt%d-", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)n) == 0) {
            char path[300];
            snprintf(path, sizeof path, "/%s", e->d_name);
            shm_unlink(path);
        }
    }
    closedir(d);
    return 0;
}

static void *shared_page(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, size);
    return p;
}

static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static double now_s(void) { return (double)vram__now_ns() / 1e9; }

static uint64_t used_of(vram__group *g, unsigned *members)
{
    uint64_t used = 0;
    assert_int_equal(vram__group_stats(g, &used, NULL, members), 0);
    return used;
}

/* A child's commands and answers: one byte each way. */
typedef struct chan {
    int to_child[2], to_parent[2];
} chan;

static void chan_open(chan *c)
{
    assert_int_equal(pipe(c->to_child), 0);
    assert_int_equal(pipe(c->to_parent), 0);
}

static void chan_close(chan *c)
{
    close(c->to_child[0]);
    close(c->to_child[1]);
    close(c->to_parent[0]);
    close(c->to_parent[1]);
}

static void put(int fd, char c) { (void)!write(fd, &c, 1); }

static char get(int fd)
{
    char c = 0;
    ssize_t n;
    do
        n = read(fd, &c, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? c : 0;
}

static int wait_child(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static uint64_t rng_next(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* ---- two members in one process --------------------------------------- */

static void test_one_process(void **state)
{
    (void)state;
    const char *name = group_name("one");
    vram__group *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(vram__group_open(name, MiB, &a), 0);
    assert_int_equal(vram__group_open(name, MiB, &b), 0);
    assert_int_equal(vram__group_open(name, 0, &c), 0); /* takes the ledger's */
    assert_string_equal(vram__group_name(a), name);

    uint64_t used, budget;
    unsigned members;
    assert_int_equal(vram__group_stats(c, &used, &budget, &members), 0);
    assert_int_equal(used, 0);
    assert_int_equal(budget, MiB);
    assert_int_equal(members, 3);

    /* Up to the budget exactly, then one byte more is refused. */
    assert_int_equal(vram__group_reserve(a, 600 * 1024), 0);
    assert_int_equal(vram__group_reserve(b, MiB - 600 * 1024), 0);
    assert_int_equal(vram__group_reserve(b, 1), VRAM_EBUDGET);
    char want[256];
    snprintf(want, sizeof want, "group %s: 1 B more would pass its budget of 1.00 MiB: 1.00 MiB "
                                "used by 1 process (1 + 1048576 > 1048576 bytes)", name);
    assert_string_equal(vram_last_error(), want);
    assert_int_equal(vram__group_reserve(c, 1), VRAM_EBUDGET);
    assert_int_equal(used_of(a, NULL), MiB);

    /* More than the budget at once is refused with nothing charged. */
    assert_int_equal(vram__group_reserve(c, 2 * MiB), VRAM_EBUDGET);
    assert_error_has("2.00 MiB more would pass its budget of 1.00 MiB");
    assert_int_equal(used_of(a, NULL), MiB);

    /* A release makes room for exactly that much. */
    vram__group_release(a, 1);
    assert_int_equal(vram__group_reserve(c, 1), 0);
    assert_int_equal(vram__group_reserve(c, 1), VRAM_EBUDGET);

    vram__group_member list[4];
    unsigned n = 0;
    assert_int_equal(vram__group_member_list(a, list, 4, &n), 0);
    assert_int_equal(n, 3);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(list[i].pid, getpid());
    assert_int_equal(list[0].bytes + list[1].bytes + list[2].bytes, MiB);

    /* Releasing more than held gives back what is held. */
    vram__group_release(c, 100);
    assert_int_equal(used_of(a, NULL), MiB - 1);
    vram__group_release(a, 600 * 1024);
    vram__group_release(b, MiB);
    assert_int_equal(used_of(a, NULL), 0);
    assert_int_equal(vram__group_reserve(a, 0), 0);

    /* A member that leaves gives its bytes back. */
    assert_int_equal(vram__group_reserve(b, 4096), 0);
    vram__group_close(b);
    assert_int_equal(used_of(a, &members), 0);
    assert_int_equal(members, 2);
    vram__group_close(c);
    assert_true(shm_exists(name));
    vram__group_close(a);
    vram__group_close(NULL);
    assert_gone(name);
}

/* ---- threads of one process ------------------------------------------- */

typedef struct thread_arg {
    vram__group *g;
    uint64_t budget, seed;
    _Atomic uint64_t *granted;
    _Atomic int *stop, *violations;
    int grants, refusals;
} thread_arg;

static void *thread_hammer(void *p)
{
    thread_arg *a = p;
    uint64_t held[8], s = a->seed;
    int n = 0;
    while (!atomic_load(a->stop)) {
        if (n < 8 && (n == 0 || rng_next(&s) & 1)) {
            uint64_t size = 1 + rng_next(&s) % (a->budget / 4);
            int rc = vram__group_reserve(a->g, size);
            if (rc == 0) {
                if (atomic_fetch_add(a->granted, size) + size > a->budget)
                    atomic_fetch_add(a->violations, 1);
                held[n++] = size;
                a->grants++;
            } else {
                if (rc != VRAM_EBUDGET)
                    atomic_fetch_add(a->violations, 1);
                a->refusals++;
            }
        } else {
            unsigned i = (unsigned)(rng_next(&s) % (unsigned)n);
            atomic_fetch_sub(a->granted, held[i]);
            vram__group_release(a->g, held[i]);
            held[i] = held[--n];
        }
    }
    while (n) {
        atomic_fetch_sub(a->granted, held[--n]);
        vram__group_release(a->g, held[n]);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    const char *name = group_name("thr");
    const uint64_t budget = 16 * MiB;
    vram__group *g[2];
    assert_int_equal(vram__group_open(name, budget, &g[0]), 0);
    assert_int_equal(vram__group_open(name, budget, &g[1]), 0);
    _Atomic uint64_t granted = 0;
    _Atomic int stop = 0, violations = 0;
    thread_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){g[i % 2], budget, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
                               &granted, &stop, &violations, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_hammer, &args[i]), 0);
    }
    double end = now_s() + 0.3;
    while (now_s() < end) {
        uint64_t b = 0;
        unsigned m = 0;
        vram__group_stats(g[0], NULL, &b, &m);
        assert_int_equal(b, budget);
        assert_int_equal(m, 2);
        assert_true(atomic_load(&granted) <= budget);
        nap_us(500);
    }
    atomic_store(&stop, 1);
    int grants = 0, refusals = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        grants += args[i].grants;
        refusals += args[i].refusals;
    }
    assert_int_equal(atomic_load(&violations), 0);
    assert_true(grants > 0);
    assert_true(refusals > 0);
    assert_int_equal(used_of(g[0], NULL), 0);
    vram__group_close(g[0]);
    vram__group_close(g[1]);
    assert_gone(name);
}

/* ---- forked members ------------------------------------------------------ */

static void test_forked(void **state)
{
    (void)state;
    const char *name = group_name("fork");
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 8 * MiB, &g), 0);
    assert_int_equal(vram__group_reserve(g, 3 * MiB), 0);

    /* A child that did not become a member cannot touch the parent's slot. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int rc = vram__group_reserve(g, 1);
        vram__group_release(g, 3 * MiB); /* nothing */
        int bad = rc != VRAM_EINVAL || !strstr(vram_last_error(), "was forked from member");
        vram__group_close(g); /* the child's mapping only */
        _exit(bad ? 1 : 0);
    }
    assert_int_equal(wait_child(pid), 0);
    assert_int_equal(used_of(g, NULL), 3 * MiB);

    chan c;
    chan_open(&c);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        if (vram__group_after_fork_child(g))
            _exit(2);
        uint64_t used = 1;
        unsigned members = 0;
        vram__group_stats(g, &used, NULL, &members);
        bad |= used != 3 * MiB || members != 2; /* nothing inherited */
        bad |= vram__group_reserve(g, 5 * MiB) != 0; /* exactly to the budget */
        put(c.to_parent[1], bad ? 'x' : 'r');
        get(c.to_child[0]);
        /* The parent is at the budget too now: one byte is refused. */
        bad |= vram__group_reserve(g, 1) != VRAM_EBUDGET;
        bad |= !strstr(vram_last_error(), "8.00 MiB used by 2 processes");
        vram__group_release(g, 5 * MiB);
        put(c.to_parent[1], bad ? 'x' : 'd');
        get(c.to_child[0]);
        vram__group_close(g);
        _exit(bad ? 3 : 0);
    }
    assert_int_equal(get(c.to_parent[0]), 'r');
    assert_int_equal(vram__group_reserve(g, 1), VRAM_EBUDGET);
    assert_error_has("used by 2 processes (1 + 8388608 > 8388608 bytes)");
    unsigned members;
    assert_int_equal(used_of(g, &members), 8 * MiB);
    assert_int_equal(members, 2);
    put(c.to_child[1], 'g');
    assert_int_equal(get(c.to_parent[0]), 'd');
    assert_int_equal(used_of(g, NULL), 3 * MiB);
    assert_int_equal(vram__group_reserve(g, 5 * MiB), 0);
    put(c.to_child[1], 'q');
    assert_int_equal(wait_child(pid), 0);
    assert_int_equal(used_of(g, &members), 8 * MiB);
    assert_int_equal(members, 1);
    chan_close(&c);
    vram__group_close(g);
    assert_gone(name);
}

/* ---- killed and stopped members ---------------------------------------- */

/* A forked member holding `bytes`, waiting for commands: 'r' release and
 * leave, 'q' leave holding. Answers 'h' once it holds them. */
static pid_t spawn_holder(vram__group *g, uint64_t bytes, chan *c)
{
    chan_open(c);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (vram__group_after_fork_child(g) || vram__group_reserve(g, bytes))
            _exit(2);
        put(c->to_parent[1], 'h');
        char cmd = get(c->to_child[0]);
        if (cmd == 'r')
            vram__group_release(g, bytes);
        vram__group_close(g);
        put(c->to_parent[1], 'l');
        _exit(0);
    }
    assert_int_equal(get(c->to_parent[0]), 'h');
    return pid;
}

static void test_killed(void **state)
{
    (void)state;
    const char *name = group_name("kill");
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 10 * MiB, &g), 0);
    chan c;
    pid_t pid = spawn_holder(g, 6 * MiB, &c);
    assert_int_equal(used_of(g, NULL), 6 * MiB);
    assert_int_equal(vram__group_reserve(g, 4 * MiB), 0);
    assert_int_equal(vram__group_reserve(g, 1), VRAM_EBUDGET);

    /* Killed and not yet reaped (a zombie): its bytes are back at once. */
    kill(pid, SIGKILL);
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    assert_int_equal(vram__group_reserve(g, 6 * MiB), 0);
    unsigned members;
    assert_int_equal(used_of(g, &members), 10 * MiB);
    assert_int_equal(members, 1);
    wait_child(pid);
    chan_close(&c);
    vram__group_release(g, 10 * MiB);

    /* Killed while others look: the next stats sees it gone. */
    pid = spawn_holder(g, 2 * MiB, &c);
    assert_int_equal(used_of(g, NULL), 2 * MiB);
    kill(pid, SIGKILL);
    wait_child(pid);
    assert_int_equal(used_of(g, &members), 0);
    assert_int_equal(members, 1);
    chan_close(&c);
    vram__group_close(g);
    assert_gone(name);
}

static void test_stopped(void **state)
{
    (void)state;
    const char *name = group_name("stop");
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 10 * MiB, &g), 0);
    chan c;
    pid_t pid = spawn_holder(g, 6 * MiB, &c);
    kill(pid, SIGSTOP);
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_true(WIFSTOPPED(st));

    /* Stopped, it blocks no one and its bytes still count: refusals (which
     * look every member up) and grants alike finish at once. */
    double t0 = now_s();
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(vram__group_reserve(g, 4 * MiB), 0);
        assert_int_equal(vram__group_reserve(g, 1), VRAM_EBUDGET);
        vram__group_release(g, 4 * MiB);
    }
    double took = now_s() - t0;
    assert_true(took < 2.0);
    assert_int_equal(used_of(g, NULL), 6 * MiB);

    /* Continued, it releases and leaves. */
    kill(pid, SIGCONT);
    put(c.to_child[1], 'r');
    assert_int_equal(get(c.to_parent[0]), 'l');
    assert_int_equal(wait_child(pid), 0);
    unsigned members;
    assert_int_equal(used_of(g, &members), 0);
    assert_int_equal(members, 1);
    chan_close(&c);

    /* Stopped and then killed: gone too. */
    pid = spawn_holder(g, 7 * MiB, &c);
    kill(pid, SIGSTOP);
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_int_equal(vram__group_reserve(g, 4 * MiB), VRAM_EBUDGET);
    kill(pid, SIGKILL);
    wait_child(pid);
    assert_int_equal(vram__group_reserve(g, 10 * MiB), 0);
    chan_close(&c);
    vram__group_close(g);
    assert_gone(name);
}

/* ---- 8 processes hammering ----------------------------------------------- */

#define HAMMERERS 8
#define HAMMER_MAX (2 * MiB)
#define HAMMER_HELD 4

typedef struct hammer_page {
    _Atomic uint64_t granted; /* counted after a grant, uncounted before its release */
    _Atomic uint64_t peak;
    _Atomic int ready, go, stop, violations;
    struct {
        uint64_t max_out, grants, refusals;
        int rc;
    } child[HAMMERERS];
} hammer_page;

static int hammer_child(const char *name, uint64_t budget, hammer_page *h, int k)
{
    vram__group *g = NULL;
    if (vram__group_open(name, budget, &g))
        return 10;
    atomic_fetch_add(&h->ready, 1);
    while (!atomic_load(&h->go))
        nap_us(100);
    uint64_t held[HAMMER_HELD], out = 0, s = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 20;
    int n = 0;
    while (!atomic_load(&h->stop)) {
        if (n < HAMMER_HELD && (n == 0 || rng_next(&s) % 3)) {
            uint64_t size = 1 + rng_next(&s) % HAMMER_MAX;
            int rc = vram__group_reserve(g, size);
            if (rc == 0) {
                uint64_t now = atomic_fetch_add(&h->granted, size) + size;
                if (now > budget)
                    atomic_fetch_add(&h->violations, 1);
                uint64_t peak = atomic_load(&h->peak);
                while (now > peak && !atomic_compare_exchange_weak(&h->peak, &peak, now)) {
                }
                held[n++] = size;
                out += size;
                if (out > h->child[k].max_out)
                    h->child[k].max_out = out;
                h->child[k].grants++;
            } else if (rc == VRAM_EBUDGET) {
                h->child[k].refusals++;
            } else {
                return 11;
            }
        } else {
            unsigned i = (unsigned)(rng_next(&s) % (unsigned)n);
            atomic_fetch_sub(&h->granted, held[i]);
            vram__group_release(g, held[i]);
            out -= held[i];
            held[i] = held[--n];
        }
    }
    while (n) {
        atomic_fetch_sub(&h->granted, held[--n]);
        vram__group_release(g, held[n]);
    }
    vram__group_close(g);
    return 0;
}

static void test_hammer(void **state)
{
    (void)state;
    const char *name = group_name("hammer");
    const uint64_t budget = 24 * MiB; /* under the demand: they crowd it */
    hammer_page *h = shared_page(sizeof *h);
    pid_t pids[HAMMERERS];
    for (int k = 0; k < HAMMERERS; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0)
            _exit(hammer_child(name, budget, h, k));
    }
    while (atomic_load(&h->ready) < HAMMERERS)
        nap_us(200);
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 0, &g), 0);
    atomic_store(&h->go, 1);

    /* Sampled while they run: the budget, the members, the bytes granted.
     * A stats sum is not a snapshot (each slot read at its own moment), so
     * only a loose bound holds for it. */
    unsigned samples = 0;
    double end = now_s() + 1.0;
    while (now_s() < end) {
        uint64_t used = 0, b = 0;
        unsigned m = 0;
        vram__group_stats(g, &used, &b, &m);
        assert_int_equal(b, budget);
        assert_int_equal(m, HAMMERERS + 1);
        assert_true(used <= HAMMERERS * (budget + HAMMER_MAX));
        assert_true(atomic_load(&h->granted) <= budget);
        samples++;
        nap_us(200);
    }
    atomic_store(&h->stop, 1);
    uint64_t grants = 0, refusals = 0;
    for (int k = 0; k < HAMMERERS; k++) {
        int st = wait_child(pids[k]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        assert_true(h->child[k].max_out <= budget);
        grants += h->child[k].grants;
        refusals += h->child[k].refusals;
    }
    print_message("%d processes: %llu grants, %llu refusals, at most %.1f of %.1f MiB granted, "
                  "%u samples\n", HAMMERERS, (unsigned long long)grants,
                  (unsigned long long)refusals, (double)atomic_load(&h->peak) / MiB,
                  (double)budget / MiB, samples);
    assert_int_equal(atomic_load(&h->violations), 0);
    assert_true(atomic_load(&h->peak) <= budget);
    assert_true(grants > 100);
    assert_true(refusals > 0); /* the budget was reached */
    assert_true(samples > 10);
    unsigned members;
    assert_int_equal(used_of(g, &members), 0);
    assert_int_equal(members, 1);
    vram__group_close(g);
    assert_gone(name);
    munmap(h, sizeof *h);
}

/* ---- creation race --------------------------------------------------------- */

#define RACERS 8

static void test_creation_race(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        char tag[16];
        snprintf(tag, sizeof tag, "race%d", round);
        const char *name = group_name(tag);
        /* start: all go when its write end closes; leave: likewise. */
        int start[2], leave[2], answer[2];
        assert_int_equal(pipe(start), 0);
        assert_int_equal(pipe(leave), 0);
        assert_int_equal(pipe(answer), 0);
        pid_t pids[RACERS];
        for (int k = 0; k < RACERS; k++) {
            pids[k] = fork();
            assert_true(pids[k] >= 0);
            if (pids[k] == 0) {
                close(start[1]);
                close(leave[1]);
                get(start[0]);
                vram__group *g = NULL;
                int rc = vram__group_open(name, 64 * MiB, &g);
                if (rc == 0)
                    rc = vram__group_reserve(g, (uint64_t)k + 1);
                put(answer[1], rc ? 'x' : 'j');
                get(leave[0]);
                vram__group_close(g);
                _exit(rc ? 1 : 0);
            }
        }
        close(start[1]);
        for (int k = 0; k < RACERS; k++)
            assert_int_equal(get(answer[0]), 'j');
        /* One ledger: a newcomer sees every racer and every byte. */
        vram__group *g = NULL;
        assert_int_equal(vram__group_open(name, 0, &g), 0);
        unsigned members;
        assert_int_equal(used_of(g, &members), RACERS * (RACERS + 1) / 2);
        assert_int_equal(members, RACERS + 1);
        close(leave[1]);
        for (int k = 0; k < RACERS; k++)
            assert_int_equal(wait_child(pids[k]), 0);
        assert_int_equal(used_of(g, &members), 0);
        assert_int_equal(members, 1);
        close(start[0]);
        close(leave[0]);
        close(answer[0]);
        close(answer[1]);
        vram__group_close(g);
        assert_gone(name);
    }
}

/* ---- reused pids, half-made and stale ledgers ----------------------------- */

static void test_reused_pid(void **state)
{
    (void)state;
    const char *name = group_name("reuse");
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 10 * MiB, &g), 0);
    uint64_t start;
    assert_int_equal(vram__group_proc_start(getpid(), &start), 0);

    /* This process's pid with another start time: a dead member whose pid
     * was given to this process. */
    assert_true(vram__group_test_plant(g, getpid(), start + 3, 5 * MiB) >= 0);
    unsigned members;
    assert_int_equal(used_of(g, &members), 0);
    assert_int_equal(members, 1);

    /* A live child's pid with the wrong start time, then the right one. */
    chan c;
    chan_open(&c);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        get(c.to_child[0]);
        _exit(0);
    }
    uint64_t child_start;
    assert_int_equal(vram__group_proc_start(pid, &child_start), 0);
    assert_true(vram__group_test_plant(g, pid, child_start - 1, 3 * MiB) >= 0);
    assert_int_equal(used_of(g, &members), 0);
    assert_true(vram__group_test_plant(g, pid, child_start, 3 * MiB) >= 0);
    assert_int_equal(used_of(g, &members), 3 * MiB);
    assert_int_equal(members, 2);
    /* Counted until it dies, on the reserve path too. */
    assert_int_equal(vram__group_reserve(g, 8 * MiB), VRAM_EBUDGET);
    put(c.to_child[1], 'q');
    wait_child(pid);
    assert_int_equal(vram__group_reserve(g, 8 * MiB), 0);
    assert_int_equal(used_of(g, &members), 8 * MiB);
    assert_int_equal(members, 1);
    assert_int_equal(vram__group_proc_start(pid, &child_start), VRAM_EIO);
    chan_close(&c);
    vram__group_close(g);
    assert_gone(name);
}

static void test_half_made(void **state)
{
    (void)state;
    /* Its maker died while making it: taken over at once. */
    const char *name = group_name("half");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    uint64_t start;
    assert_int_equal(vram__group_proc_start(pid, &start), 0);
    kill(pid, SIGKILL);
    wait_child(pid);
    assert_int_equal(vram__group_test_half_made(name, pid, start), 0);
    double t0 = now_s();
    vram__group *g = NULL;
    assert_int_equal(vram__group_open(name, 5 * MiB, &g), 0);
    assert_true(now_s() - t0 < 0.5);
    uint64_t budget;
    assert_int_equal(vram__group_stats(g, NULL, &budget, NULL), 0);
    assert_int_equal(budget, 5 * MiB);
    assert_int_equal(vram__group_reserve(g, 5 * MiB), 0);
    vram__group_close(g);
    assert_gone(name);

    /* Its maker is alive and stuck: a bounded wait, then an error naming
     * the file and the process. */
    name = group_name("stuck");
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    assert_int_equal(vram__group_proc_start(pid, &start), 0);
    assert_int_equal(vram__group_test_half_made(name, pid, start), 0);
    t0 = now_s();
    assert_int_equal(vram__group_open(name, 5 * MiB, &g), VRAM_EBUSY);
    assert_null(g);
    double waited = now_s() - t0;
    assert_true(waited > 1.5 && waited < 4);
    char want[160];
    snprintf(want, sizeof want, "/dev/shm/vramkit-group-%s was not ready within 2.0 s: process %d",
             name, (int)pid);
    assert_error_has(want);
    kill(pid, SIGKILL);
    wait_child(pid);
    shm_remove(name);

    /* Created and never sized by a maker that vanished: taken over late. */
    name = group_name("empty");
    char path[128];
    snprintf(path, sizeof path, "/vramkit-group-%s", name);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    t0 = now_s();
    assert_int_equal(vram__group_open(name, 5 * MiB, &g), 0);
    waited = now_s() - t0;
    assert_true(waited > 0.9 && waited < 2.5);
    vram__group_close(g);
    assert_gone(name);
}

static void test_stale(void **state)
{
    (void)state;
    const char *name = group_name("stale");
    /* Its only member killed: the ledger stays, and takes the next
     * opener's budget. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        vram__group *g = NULL;
        if (vram__group_open(name, 1 * MiB, &g) || vram__group_reserve(g, MiB))
            _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int st = wait_child(pid);
    assert_true(WIFSIGNALED(st));
    assert_true(shm_exists(name));
    vram__group *g = NULL, *h = NULL;
    assert_int_equal(vram__group_open(name, 3 * MiB, &g), 0);
    uint64_t used, budget;
    unsigned members;
    assert_int_equal(vram__group_stats(g, &used, &budget, &members), 0);
    assert_int_equal(budget, 3 * MiB);
    assert_int_equal(used, 0);
    assert_int_equal(members, 1);
    /* With a member alive, the budget is the group's. */
    assert_int_equal(vram__group_open(name, 2 * MiB, &h), VRAM_EINVAL);
    assert_null(h);
    char want[200];
    snprintf(want, sizeof want, "group %s has a budget of 3.00 MiB (3145728 bytes), not the "
                                "2.00 MiB (2097152 bytes) asked", name);
    assert_error_has(want);
    assert_int_equal(vram__group_open(name, 3 * MiB, &h), 0);
    vram__group_close(h);
    vram__group_close(g);
    assert_gone(name);
}

/* ---- names and budgets ---------------------------------------------------- */

static void test_bad_names_budgets(void **state)
{
    (void)state;
    vram__group *g = (vram__group *)&g;
    assert_int_equal(vram__group_open("", MiB, &g), VRAM_EINVAL);
    assert_null(g);
    assert_error_has("group name is empty");
    assert_int_equal(vram__group_open("a/b", MiB, &g), VRAM_EINVAL);
    assert_error_has("group name \"a/b\" has a character 0x2f at 1");
    assert_int_equal(vram__group_open("two words", MiB, &g), VRAM_EINVAL);
    assert_error_has("\"two words\"");
    char longname[80];
    memset(longname, 'x', 65);
    longname[65] = '\0';
    assert_int_equal(vram__group_open(longname, MiB, &g), VRAM_EINVAL);
    assert_error_has("has 65 characters, at most 64");
    memset(longname, 'y', 64);
    longname[64] = '\0';
    memcpy(longname, group_name("x"), strlen(group_name("x")));
    assert_int_equal(vram__group_open(longname, MiB, &g), 0); /* 64 is fine */
    vram__group_close(g);
    assert_gone(longname);
    assert_int_equal(vram__group_open(NULL, MiB, &g), VRAM_EINVAL);

    const char *name = group_name("Ok_name.1");
    assert_int_equal(vram__group_open(name, VRAM__GROUP_BUDGET_MAX + 1, &g), VRAM_EINVAL);
    assert_error_has("is past the largest a ledger takes, 1.00 PiB");
    assert_int_equal(vram__group_open(name, 0, &g), VRAM_EINVAL);
    char want[200];
    snprintf(want, sizeof want, "group %s does not exist (no /dev/shm/vramkit-group-%s): a budget "
                                "is needed to create it", name, name);
    assert_error_has(want);
    assert_false(shm_exists(name));
    assert_int_equal(vram__group_open_mode(name, MiB, 01777, &g), VRAM_EINVAL);
    assert_error_has("mode 01777");

    vram__group *a = NULL;
    assert_int_equal(vram__group_open(name, 24 * MiB, &a), 0);
    assert_int_equal(vram__group_open(name, 16 * MiB, &g), VRAM_EINVAL);
    snprintf(want, sizeof want, "group %s has a budget of 24.0 MiB (25165824 bytes), not the "
                                "16.0 MiB (16777216 bytes) asked: ask 0 to take the group's", name);
    assert_error_has(want);
    unsigned members;
    assert_int_equal(used_of(a, &members), 0);
    assert_int_equal(members, 1); /* the refused opener left no slot */

    /* The mode: 0600 unless told. */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/vramkit-group-%s", name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    vram__group_close(a);
    assert_gone(name);
    assert_int_equal(vram__group_open_mode(name, MiB, 0640, &a), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    vram__group_close(a);
    assert_gone(name);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, remove_ours)
    const struct CMUnitTest tests[] = {
        T(test_one_process), T(test_threads),     T(test_forked),       T(test_killed),
        T(test_stopped),     T(test_hammer),      T(test_creation_race), T(test_reused_pid),
        T(test_half_made),   T(test_stale),       T(test_bad_names_budgets),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
