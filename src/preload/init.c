/* src/preload/init.c - libvram_preload.so's start and end: the settings
 * read from the environment (preload_internal.h lists them), the trace and
 * the budget opened, backtrace's first call made here (it loads libgcc
 * and allocates), fork handled (the child counts from nothing, writes its
 * own trace, takes a fresh place in the group), vram_mark exported, and at
 * exit the report. A malformed setting ends the program at once with the
 * sentence (status 125), rather than letting it run unwatched. */

#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_internal.h"

_Thread_local int vram__pl_depth;
int vram__pl_active;
static const char *mode = "observe";
static char report_path[4096 + 32];
static char trace_path[4096];
static int first_process; /* the program itself, not a process it started */

const char *vram__pl_mode_name(void) { return mode; }

/* A stage begins: the report gives each stage's peak (the program may
 * look it up with dlsym, and so run without the library too). */
__attribute__((visibility("default"))) void vram_mark(const char *name);
void vram_mark(const char *name) { vram__pl_mark(name); }

static void child_after_fork(void)
{
    first_process = 0;
    vram__pl_ledger_after_fork();
    vram__pl_trace_after_fork();
    vram__pl_budget_after_fork();
    /* The child writes its own report. */
    const char *r = getenv("VRAM_PRELOAD_REPORT");
    if (r && *r)
        snprintf(report_path, sizeof report_path, "%.4000s.%d", r, (int)getpid());
}

static void die(const char *why)
{
    fprintf(stderr, "vramkit preload: %s\n", why);
    _exit(125);
}

__attribute__((constructor)) static void preload_start(void)
{
    vram__pl_depth++;
    void *frames[2];
    backtrace(frames, 2);
    vram__pl_ledger_init();
    const char *m = getenv("VRAM_PRELOAD_MODE");
    if (m && *m && strcmp(m, "observe") && strcmp(m, "limit") && strcmp(m, "pool")) {
        char why[256];
        snprintf(why, sizeof why, "VRAM_PRELOAD_MODE \"%s\" is not observe, limit or pool", m);
        die(why);
    }
    if (m && *m)
        mode = !strcmp(m, "limit") ? "limit" : !strcmp(m, "pool") ? "pool" : "observe";
    char err[512];
    if (!strcmp(mode, "limit") &&
        vram__pl_budget_init(getenv("VRAM_PRELOAD_BUDGET"), getenv("VRAM_PRELOAD_GROUP"), err,
                             sizeof err))
        die(err);
    if (!strcmp(mode, "pool"))
        vram__pl_pool_enable();
    /* The files are the first process's (VRAM_PRELOAD_PID, set by vramkit
     * trace); another process the program starts writes its own, .PID. */
    const char *owner = getenv("VRAM_PRELOAD_PID");
    first_process = !owner || !*owner || atoi(owner) == (int)getpid();
    const char *t = getenv("VRAM_PRELOAD_TRACE");
    if (t && *t) {
        if (first_process)
            snprintf(trace_path, sizeof trace_path, "%.4000s", t);
        else
            snprintf(trace_path, sizeof trace_path, "%.4000s.%d", t, (int)getpid());
        if (vram__pl_trace_open(trace_path)) {
            snprintf(err, sizeof err, "cannot write the trace %.400s", trace_path);
            die(err);
        }
    }
    const char *r = getenv("VRAM_PRELOAD_REPORT");
    if (r && *r && first_process)
        snprintf(report_path, sizeof report_path, "%.4000s", r);
    else if (r && *r)
        snprintf(report_path, sizeof report_path, "%.4000s.%d", r, (int)getpid());
    pthread_atfork(NULL, NULL, child_after_fork);
    vram__pl_depth--;
    vram__pl_active = 1;
}

__attribute__((destructor)) static void preload_end(void)
{
    if (!vram__pl_active)
        return;
    vram__pl_depth++;
    /* Every process the program starts inherits the library: those that
     * never touched the GPU say nothing. */
    if (first_process || vram__pl_touched())
        vram__pl_report_write(report_path);
    vram__pl_trace_close();
    vram__pl_budget_fini();
    vram__pl_pool_fini();
    vram__pl_active = 0;
    vram__pl_depth--;
}
