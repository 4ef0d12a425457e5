/* tools/vramkit/cmd_trace.c - `vramkit trace [options] -- APP ARGS`: a
 * program vramkit did not build, run with libvram_preload.so (LD_PRELOAD)
 * in one of three modes, then its report: observe (changes nothing; the
 * trace, counts, contexts and what was live at exit by call site), limit
 * (a budget, per process or shared by a group of processes) or pool (its
 * allocations served by a vramkit pool). The program's exit status is
 * vramkit's; one not found is 127 with the path, one that cannot be run
 * 126, a statically linked one (which LD_PRELOAD cannot reach) is said
 * before anything runs. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const char about[] =
    "Run APP with libvram_preload.so loaded (LD_PRELOAD), which accounts every device\n"
    "allocation APP makes through the CUDA driver (the runtime's cudaMalloc included, also\n"
    "when it is linked statically), NVDEC decoders and contexts, then print its report:\n"
    "peak device memory, calls and bytes per kind, every context with its measured cost\n"
    "(more than one on a device is flagged with the fix), and what was still live at exit\n"
    "by call site.\n\n"
    "Modes: observe (default) changes nothing APP sees. limit --budget BYTES fails requests\n"
    "past the budget as the driver does (CUDA_ERROR_OUT_OF_MEMORY: PyTorch's OutOfMemoryError),\n"
    "and cuMemGetInfo and NVML report the budget as the total; with --group NAME the\n"
    "processes of the group share the budget (a dead member's bytes come back). pool serves\n"
    "cuMemAlloc and cuMemFree from a vramkit pool.\n\n"
    "--trace FILE writes an RMM-format trace as APP runs (vramkit replay reads it); a child\n"
    "of fork writes FILE.PID. --report FILE keeps the JSON report (and FILE.txt). Exit\n"
    "status: APP's; 127 when APP is not found, 126 when it cannot be run, 2 for a usage\n"
    "error or a program LD_PRELOAD cannot reach.\n";

typedef struct trace_args {
    const char *mode, *group, *trace, *report;
    uint64_t budget;
    int budget_given, json, quiet;
} trace_args;

/* The library: $VRAM_PRELOAD_LIB, beside the binary (a build tree), or in
 * ../lib (an installed tree). */
static int find_library(char *buf, size_t cap)
{
    const char *env = getenv("VRAM_PRELOAD_LIB");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return access(buf, R_OK) == 0 ? 0 : -1;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    const char *rel[] = {"", "/../lib", "/../lib/x86_64-linux-gnu"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int k = snprintf(buf, cap, "%s%s/libvram_preload.so", exe, rel[i]);
        if (k > 0 && (size_t)k < cap && access(buf, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* APP as exec would find it: a path, or the first match in PATH. 0, 127
 * (not found) or 126 (found, not executable), with the path in buf. */
static int resolve(const char *app, char *buf, size_t cap)
{
    if (strchr(app, '/')) {
        snprintf(buf, cap, "%s", app);
        if (access(buf, F_OK))
            return 127;
        return access(buf, X_OK) ? 126 : 0;
    }
    const char *path = getenv("PATH");
    char *dirs = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    int found = 127;
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d && found; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, cap, "%s/%s", *d ? d : ".", app);
        struct stat st;
        if (stat(buf, &st) || !S_ISREG(st.st_mode))
            continue;
        found = access(buf, X_OK) ? 126 : 0;
    }
    free(dirs);
    if (found == 127)
        snprintf(buf, cap, "%s", app);
    return found;
}

/* Whether an ELF executable has no interpreter (static: LD_PRELOAD does
 * not reach it). Scripts and unreadable files are not said to be. */
static int is_static_elf(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    int is_static = 0;
    if (read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
        is_static = 1;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
                (ssize_t)sizeof ph)
                break;
            if (ph.p_type == PT_INTERP) {
                is_static = 0;
                break;
            }
        }
    }
    close(fd);
    return is_static;
}

/* The reports of the program and of the processes it started that used
 * the GPU (REPORT and REPORT.PID, and their .txt): each printed, the
 * program's first; with `remove`, deleted after. Returns how many. */
static int each_report(const char *report, int json, int quiet, int remove);

static void print_file(const char *path, FILE *to)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, to);
    fclose(f);
}

/* The report's live-at-exit sites dladdr could not name (functions not
 * in the dynamic symbol table), named by addr2line from the module's own
 * symbols, where binutils is: "function at file:line". */
static void name_sites(const char *report)
{
    /* The shell and addr2line carry nothing this process had preloaded (a
     * sanitizer's runtime would not run in them). */
    unsetenv("LD_PRELOAD");
    FILE *f = fopen(report, "r");
    if (!f)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    fclose(f);
    if (mem)
        fclose(mem);
    cJSON *r = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *live = cJSON_GetObjectItem(r, "live_at_exit"), *e;
    int said = 0;
    cJSON_ArrayForEach(e, live)
    {
        const char *site = cJSON_GetStringValue(cJSON_GetObjectItem(e, "site"));
        const char *module = cJSON_GetStringValue(cJSON_GetObjectItem(e, "module"));
        const char *offset = cJSON_GetStringValue(cJSON_GetObjectItem(e, "offset"));
        if (!site || strncmp(site, "0x", 2) || !module || !*module || !offset ||
            strchr(module, '\'') || strchr(offset, '\''))
            continue;
        char cmd[8300], line[1024] = "", where[1024] = "";
        snprintf(cmd, sizeof cmd, "addr2line -f -C -e '%s' '%s' 2>/dev/null", module, offset);
        FILE *p = popen(cmd, "r");
        if (!p)
            continue;
        if (fgets(line, sizeof line, p) && fgets(where, sizeof where, p)) {
            line[strcspn(line, "\n")] = 0;
            where[strcspn(where, "\n")] = 0;
            if (strcmp(line, "??")) {
                if (!said++)
                    fprintf(stderr, "  call sites named from the programs' symbols:\n");
                fprintf(stderr, "    %s: %s at %s\n", site, line, where);
            }
        }
        pclose(p);
    }
    cJSON_Delete(r);
}

static int each_report(const char *report, int json, int quiet, int remove)
{
    char dir[4096], base[4096];
    const char *slash = strrchr(report, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - report) : 1, slash ? report : ".");
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : report);
    size_t bl = strlen(base);
    int n = 0;
    for (int pass = 0; pass < 2; pass++) { /* the program's, then the others' */
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            const char *name = e->d_name;
            if (strncmp(name, base, bl))
                continue;
            const char *rest = name + bl;
            int mine = !strcmp(rest, ".txt") || !*rest;
            int other = rest[0] == '.' && rest[1] >= '0' && rest[1] <= '9';
            if (pass == 0 ? !mine : !other)
                continue;
            size_t rl = strlen(rest);
            int is_text = rl >= 4 && !strcmp(rest + rl - 4, ".txt");
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (!quiet && is_text != json) {
                print_file(path, json ? stdout : stderr);
                n++;
            }
            if (!quiet && !json && !is_text)
                name_sites(path);
            if (remove)
                unlink(path);
        }
        if (d)
            closedir(d);
    }
    return n;
}

int cmd_trace(int argc, char **argv)
{
    trace_args a = {0};
    const cli_opt opts[] = {
        {"--mode", NULL, CLI_CHOICE, &a.mode, NULL, "observe (default), limit or pool", 0, 0,
         "observe|limit|pool"},
        {"--budget", NULL, CLI_SIZE, &a.budget, "BYTES", "limit: the device memory APP may hold",
         1, 0, NULL, &a.budget_given},
        {"--group", NULL, CLI_STRING, &a.group, "NAME",
         "limit: share the budget with the other processes of group NAME"},
        {"--trace", NULL, CLI_STRING, &a.trace, "FILE", "an RMM-format trace, written as APP runs"},
        {"--report", NULL, CLI_STRING, &a.report, "FILE", "keep the JSON report (and FILE.txt)"},
        {"--json", NULL, CLI_FLAG, &a.json, NULL, "print the JSON report on stdout"},
        {"--quiet", "-q", CLI_FLAG, &a.quiet, NULL, "no report printed"},
        {0},
    };
    const cli_spec spec = {"trace", "-- APP [ARGS...]", about, opts, 1, -1, "APP"};
    const char **args;
    int n, st = cli_parse(&spec, argc, argv, &args, &n);
    if (st)
        return st == CLI_HELP ? 0 : st;
    const char *mode = a.mode ? a.mode : "observe";
    if (!strcmp(mode, "limit") && !a.budget_given) {
        free(args);
        return cli_usage_error("trace", "--mode limit needs --budget BYTES");
    }
    if ((a.budget_given || a.group) && strcmp(mode, "limit")) {
        free(args);
        return cli_usage_error("trace", "--budget and --group are for --mode limit");
    }
    char lib[4096], app[4096];
    if (find_library(lib, sizeof lib)) {
        free(args);
        fprintf(stderr, "vramkit trace: libvram_preload.so was not found (beside vramkit, in "
                        "../lib, or at $VRAM_PRELOAD_LIB)\n");
        return 1;
    }
    int found = resolve(args[0], app, sizeof app);
    if (found) {
        fprintf(stderr, "vramkit trace: %s: %s\n", app,
                found == 127 ? "not found" : "found but not executable");
        free(args);
        return found;
    }
    if (is_static_elf(app)) {
        fprintf(stderr, "vramkit trace: %s is linked statically: LD_PRELOAD cannot reach it "
                        "(link it dynamically, or call vramkit's libraries from it)\n",
                app);
        free(args);
        return 2;
    }
    char report[4096], tmpdir[] = "/tmp/vramkit-trace-XXXXXX";
    int own_report = !a.report;
    if (own_report) {
        if (!mkdtemp(tmpdir)) {
            free(args);
            fprintf(stderr, "vramkit trace: cannot make a folder for the report: %s\n",
                    strerror(errno));
            return 1;
        }
        snprintf(report, sizeof report, "%s/report.json", tmpdir);
    } else {
        snprintf(report, sizeof report, "%s", a.report);
    }
    char budget[32];
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)a.budget);
    pid_t pid = fork();
    if (pid == 0) {
        const char *old = getenv("LD_PRELOAD");
        char preload[8192];
        /* After what is preloaded already: a sanitizer's runtime must come first. */
        snprintf(preload, sizeof preload, "%s%s%s", old ? old : "", old && *old ? ":" : "", lib);
        setenv("LD_PRELOAD", preload, 1);
        setenv("VRAM_PRELOAD_MODE", mode, 1);
        setenv("VRAM_PRELOAD_REPORT", report, 1);
        char me[32];
        snprintf(me, sizeof me, "%d", (int)getpid());
        setenv("VRAM_PRELOAD_PID", me, 1);
        if (a.budget_given)
            setenv("VRAM_PRELOAD_BUDGET", budget, 1);
        if (a.group)
            setenv("VRAM_PRELOAD_GROUP", a.group, 1);
        if (a.trace)
            setenv("VRAM_PRELOAD_TRACE", a.trace, 1);
        char **child = calloc((size_t)n + 1, sizeof *child);
        for (int i = 0; child && i < n; i++)
            child[i] = (char *)args[i];
        execv(app, child);
        fprintf(stderr, "vramkit trace: cannot run %s: %s\n", app, strerror(errno));
        _exit(126);
    }
    free(args);
    if (pid < 0) {
        fprintf(stderr, "vramkit trace: cannot start %s: %s\n", app, strerror(errno));
        return 1;
    }
    /* The terminal's ^C goes to APP too: wait for it to end. */
    signal(SIGINT, SIG_IGN);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    signal(SIGINT, SIG_DFL);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "vramkit trace: %s ended by signal %d (%s); no report at exit", app,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
        if (a.trace)
            fprintf(stderr, "; its trace so far is %s", a.trace);
        fprintf(stderr, "\n");
    }
    if (!each_report(report, a.json, a.quiet, own_report) && !a.quiet && !WIFSIGNALED(status))
        fprintf(stderr, "vramkit trace: %s left no report (it ended without running its exit "
                        "handlers, or used no GPU in a process the library saw end)\n",
                app);
    if (own_report)
        rmdir(tmpdir);
    return rc;
}
