/* bench/engine_load.c - what loading an engine costs on the host: the wall
 * time of vram_engine_load and the peak resident memory of the process
 * while it loads, for one model at each batch given. Each load runs in a
 * child process of its own (the peak of a process only ever rises), which
 * reports its figures through a pipe; the table gives the minimum, median
 * and maximum over the runs. With --out it also writes the table as
 * Markdown with the machine, date, command and commit.
 *
 *   bench_engine_load [--runs N] [--batch LIST] [--executor cpu|cuda]
 *                     [--out FILE.md] [--commit SHA] MODEL */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/tool_util.h"
#include "vramkit.h"

#define MAX_RUNS 64
#define MAX_BATCHES 16

typedef struct sample {
    int rc;
    double load_ms;
    double start_mib, peak_mib; /* ru_maxrss before and after the load */
    double weights_mib;
    int symbolic;
    unsigned steps;
    char error[512];
} sample;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double maxrss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* In the child: one load, its figures into *s. */
static void load_once(const char *model, const char *executor, long batch, sample *s)
{
    memset(s, 0, sizeof *s);
    vram_engine_opts o;
    vram_engine_opts_init(&o);
    o.executor = executor;
    o.batch = batch;
    s->start_mib = maxrss_mib();
    double t0 = now_ms();
    vram_engine *e;
    s->rc = vram_engine_load(model, &o, &e);
    s->load_ms = now_ms() - t0;
    s->peak_mib = maxrss_mib();
    if (s->rc) {
        snprintf(s->error, sizeof s->error, "%s", vram_last_error());
        return;
    }
    vram_engine_info info;
    vram_engine_memory mem;
    vram_engine_info_get(e, &info);
    vram_engine_memory_get(e, &mem);
    s->symbolic = info.batch_symbolic;
    s->steps = info.steps;
    s->weights_mib = (double)mem.weights_bytes / 1048576.0;
    vram_engine_destroy(e);
}

static int run_child(const char *model, const char *executor, long batch, sample *s)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        sample mine;
        load_once(model, executor, batch, &mine);
        ssize_t w = write(fd[1], &mine, sizeof mine);
        _exit(w == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = 0;
    while (got < (ssize_t)sizeof *s) {
        ssize_t r = read(fd[0], (char *)s + got, sizeof *s - (size_t)got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            break;
        }
        got += r;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof *s || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench_engine_load: the child for batch %ld died (status %d)\n", batch,
                status);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* min, median and max of n values (sorted in place). */
static void spread(double *v, int n, double out[3])
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    out[0] = v[0];
    out[1] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    out[2] = v[n - 1];
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_engine_load [--runs N] [--batch LIST] [--executor cpu|cuda] "
                    "[--out FILE.md] [--commit SHA] MODEL\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *commit = "unknown", *executor = "cpu", *model = NULL;
    const char *batch_list = "1,32";
    int runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch_list = argv[++i];
        else if (!strcmp(argv[i], "--executor") && i + 1 < argc)
            executor = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc)
            commit = argv[++i];
        else if (argv[i][0] == '-' || model)
            return usage();
        else
            model = argv[i];
    }
    if (!model || runs < 1 || runs > MAX_RUNS) {
        if (model)
            fprintf(stderr, "bench_engine_load: --runs must be 1..%d, not %d\n", MAX_RUNS, runs);
        return usage();
    }
    long batches[MAX_BATCHES];
    int n_batches = 0;
    for (const char *p = batch_list; *p;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b < 1 || (*end && *end != ',') || n_batches == MAX_BATCHES) {
            fprintf(stderr, "bench_engine_load: --batch wants up to %d positive integers "
                            "separated by commas, not '%s'\n", MAX_BATCHES, batch_list);
            return 2;
        }
        batches[n_batches++] = b;
        p = *end ? end + 1 : end;
    }

    char table[8192];
    size_t len = 0;
    len += (size_t)snprintf(table + len, sizeof table - len,
                            "| batch | symbolic | steps | weights MiB | load ms (min / median / max) "
                            "| peak host MiB (min / median / max) | at start MiB |\n"
                            "|---|---|---|---|---|---|---|\n");
    int failed = 0;
    for (int bi = 0; bi < n_batches; bi++) {
        double ms[MAX_RUNS], peak[MAX_RUNS], start[MAX_RUNS];
        sample s = {0};
        for (int r = 0; r < runs; r++) {
            if (run_child(model, executor, batches[bi], &s))
                return 1;
            if (s.rc) {
                fprintf(stderr, "bench_engine_load: batch %ld: %s (%s)\n", batches[bi], s.error,
                        vram_err_name(s.rc));
                failed = 1;
                break;
            }
            ms[r] = s.load_ms;
            peak[r] = s.peak_mib;
            start[r] = s.start_mib;
        }
        if (s.rc)
            continue;
        double m[3], p[3], st[3];
        spread(ms, runs, m);
        spread(peak, runs, p);
        spread(start, runs, st);
        len += (size_t)snprintf(table + len, sizeof table - len,
                                "| %ld | %s | %u | %.1f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f "
                                "| %.0f |\n",
                                batches[bi], s.symbolic ? "yes" : "no", s.steps, s.weights_mib, m[0],
                                m[1], m[2], p[0], p[1], p[2], st[1]);
        if (len >= sizeof table)
            len = sizeof table - 1;
    }
    fputs(table, stdout);
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "bench_engine_load: cannot write %s: %s\n", out, strerror(errno));
            return 1;
        }
        char machine[400], date[64];
        tool_machine(machine, sizeof machine);
        time_t t = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
        fprintf(f, "# Engine load: time and peak host memory\n\n"
                   "- model: `%s`, executor %s, %d runs per batch, each load in a fresh process\n"
                   "- machine: %s\n- date: %s\n- commit: %s\n"
                   "- command: `bench_engine_load --runs %d --batch %s --executor %s %s`\n\n%s",
                model, executor, runs, machine,
                date, commit, runs, batch_list, executor, model, table);
        fclose(f);
    }
    return failed;
}
