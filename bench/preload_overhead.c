/* bench/preload_overhead.c - what libvram_preload.so adds to a driver
 * call: N cuMemAlloc/cuMemFree pairs through the driver (dlopen +
 * cuGetProcAddress_v2, the runtime's way), timed in a child run without
 * the library and in one with it in each mode, paired and repeated, and
 * printed as a table of nanoseconds per pair (median of the repeats) and
 * the difference. The driver is libcuda.so.1 as the loader finds it (a
 * GPU's, or the stand-in of tests/preload with --driver-dir).
 *
 *   bench_preload_overhead [--pairs N] [--size BYTES] [--repeats R]
 *                          [--preload LIB] [--driver-dir DIR] [--out FILE.md]
 *
 * The child (--child) prints one line: the nanoseconds per pair. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef int (*init_fn)(unsigned);
typedef int (*get_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*dev_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int child(long pairs, size_t size)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "bench_preload_overhead: %s\n", dlerror());
        return 1;
    }
    get_fn get = (get_fn)dlsym(lib, "cuGetProcAddress_v2");
    void *p[6] = {0};
    const char *names[6] = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                            "cuCtxSetCurrent", "cuMemAlloc", "cuMemFree"};
    for (int i = 0; get && i < 6; i++)
        get(names[i], &p[i], 12000, 0, NULL);
    for (int i = 0; i < 6; i++)
        if (!p[i]) {
            fprintf(stderr, "bench_preload_overhead: the driver has no %s\n", names[i]);
            return 1;
        }
    int dev = 0;
    void *ctx = NULL;
    if (((init_fn)p[0])(0) || ((dev_fn)p[1])(&dev, 0) || ((retain_fn)p[2])(&ctx, dev) ||
        ((set_fn)p[3])(ctx)) {
        fprintf(stderr, "bench_preload_overhead: no context\n");
        return 1;
    }
    alloc_fn alloc = (alloc_fn)p[4];
    free_fn release = (free_fn)p[5];
    unsigned long long d;
    for (int i = 0; i < 1000; i++) /* warm: the pool, the tables */
        if (alloc(&d, size) || release(d))
            return 1;
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++)
        if (alloc(&d, size) || release(d))
            return 1;
    printf("%.1f\n", (now_ns() - t0) / (double)pairs);
    return 0;
}

/* Run the child with this environment addition; its figure, or -1. */
static double run_child(const char *self, long pairs, size_t size, const char *preload,
                        const char *mode)
{
    char pairs_s[32], size_s[32];
    snprintf(pairs_s, sizeof pairs_s, "%ld", pairs);
    snprintf(size_s, sizeof size_s, "%zu", size);
    char *argv[] = {(char *)self, "--child", pairs_s, size_s, NULL};
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "VRAM_PRELOAD_", 13))
            env[k++] = environ[i];
    char pre[4300], m[64], budget[] = "VRAM_PRELOAD_BUDGET=1T";
    if (preload) {
        snprintf(pre, sizeof pre, "LD_PRELOAD=%.4200s", preload);
        snprintf(m, sizeof m, "VRAM_PRELOAD_MODE=%s", mode);
        env[k++] = pre;
        env[k++] = m;
        env[k++] = budget; /* read in limit mode only */
    }
    int fds[2];
    if (pipe(fds))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); /* the report */
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = rc ? -1 : read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    if (!rc)
        waitpid(pid, &status, 0);
    if (rc || got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    buf[got] = 0;
    return atof(buf);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child"))
        return child(atol(argv[2]), (size_t)atoll(argv[3]));
    long pairs = 200000;
    size_t size = 4096;
    int repeats = 5;
    const char *preload = NULL, *out = NULL, *driver_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = (size_t)atoll(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--preload") && i + 1 < argc)
            preload = argv[++i];
        else if (!strcmp(argv[i], "--driver-dir") && i + 1 < argc)
            driver_dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "usage: bench_preload_overhead [--pairs N] [--size BYTES] "
                            "[--repeats R] [--preload LIB] [--driver-dir DIR] [--out FILE.md]\n");
            return 2;
        }
    }
    if (pairs < 1 || repeats < 1 || repeats > 99) {
        fprintf(stderr, "bench_preload_overhead: --pairs at least 1, --repeats 1..99\n");
        return 2;
    }
    char self[4096], lib[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    if (!preload) {
        snprintf(lib, sizeof lib, "%.*s/libvram_preload.so", (int)(strrchr(self, '/') - self), self);
        preload = lib;
    }
    if (driver_dir) {
        const char *old = getenv("LD_LIBRARY_PATH");
        char path[8192];
        snprintf(path, sizeof path, "%s%s%s", driver_dir, old && *old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", path, 1);
    }
    const char *modes[] = {NULL, "observe", "limit"};
    double med[3];
    for (int m = 0; m < 3; m++) {
        double v[99];
        for (int r = 0; r < repeats; r++) {
            v[r] = run_child(self, pairs, size, m ? preload : NULL, m ? modes[m] : NULL);
            if (v[r] < 0) {
                fprintf(stderr, "bench_preload_overhead: a run %s failed\n",
                        m ? modes[m] : "without the library");
                return 1;
            }
        }
        qsort(v, (size_t)repeats, sizeof v[0], by_value);
        med[m] = v[repeats / 2];
    }
    FILE *o = out ? fopen(out, "a") : NULL;
    FILE *to[2] = {stdout, o};
    for (int i = 0; i < 2; i++) {
        if (!to[i])
            continue;
        fprintf(to[i],
                "\n## libvram_preload.so's cost per cuMemAlloc/cuMemFree pair\n\n"
                "%ld pairs of %zu bytes through cuGetProcAddress_v2's pointers, median of %d runs "
                "each; driver: libcuda.so.1%s%s\n\n"
                "| run | ns / pair | added ns / pair |\n|---|---:|---:|\n"
                "| without the library | %.1f | - |\n| observe | %.1f | %.1f |\n"
                "| limit (budget 1 TiB) | %.1f | %.1f |\n",
                pairs, size, repeats, driver_dir ? " from " : "", driver_dir ? driver_dir : "",
                med[0], med[1], med[1] - med[0], med[2], med[2] - med[0]);
    }
    if (o)
        fclose(o);
    return 0;
}
