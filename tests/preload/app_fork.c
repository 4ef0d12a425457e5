/* tests/preload/app_fork.c - a CUDA program that forks: the parent
 * allocates 4 MiB, forks and waits; the child starts CUDA again (cuInit,
 * the primary context), allocates 2 MiB, frees it and exits; then the
 * parent frees its own. Each prints one JSON line with its pid (the
 * child's also its parent's), the bytes it allocated and the free memory
 * it saw; the parent's last, with the child's exit status. (The real
 * driver does not let the child of a process that used CUDA use it again;
 * the stand-in does, so that what a library in front of the driver does
 * across fork can be tested.)
 *
 *   app_fork
 *
 * Exit status 0 when both did what they should. */
#include <sys/wait.h>
#include <unistd.h>

#include "app_common.h"

typedef struct calls {
    PFN_cuInit_v2000 init;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 free;
    PFN_cuMemGetInfo_v3020 info;
} calls;

static void start(const app_cuda *c, calls *k)
{
    k->init = APP_PROC(c, cuInit, 2000);
    k->retain = APP_PROC(c, cuDevicePrimaryCtxRetain, 7000);
    k->set_current = APP_PROC(c, cuCtxSetCurrent, 4000);
    k->alloc = APP_PROC(c, cuMemAlloc, 3020);
    k->free = APP_PROC(c, cuMemFree, 3020);
    k->info = APP_PROC(c, cuMemGetInfo, 3020);
    CUcontext ctx;
    APP_CHECK(c, k->init(0));
    APP_CHECK(c, k->retain(&ctx, 0));
    APP_CHECK(c, k->set_current(ctx));
}

int main(void)
{
    app_cuda c;
    app_open_cuda(&c);
    calls k;
    start(&c, &k);
    size_t total = 0, free_parent = 0;
    CUdeviceptr mine;
    APP_CHECK(&c, k.alloc(&mine, 4 * APP_MIB));
    APP_CHECK(&c, k.info(&free_parent, &total));
    fflush(stdout);

    pid_t child = fork();
    if (child < 0)
        app_die("fork failed");
    if (child == 0) {
        start(&c, &k);
        size_t free_child = 0, free_after = 0;
        CUdeviceptr p;
        APP_CHECK(&c, k.alloc(&p, 2 * APP_MIB));
        APP_CHECK(&c, k.info(&free_child, &total));
        APP_CHECK(&c, k.free(p));
        APP_CHECK(&c, k.info(&free_after, &total));
        printf("{\"app\":\"fork\",\"role\":\"child\",\"pid\":%d,\"parent\":%d,\"allocated\":%llu,"
               "\"freed\":%llu,\"free_while_allocated\":%zu,\"free_after\":%zu,\"total\":%zu}\n",
               (int)getpid(), (int)getppid(), 2 * APP_MIB, 2 * APP_MIB, free_child, free_after,
               total);
        fflush(stdout);
        exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child)
        app_die("waitpid failed");
    int child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    APP_CHECK(&c, k.free(mine));
    size_t free_after = 0;
    APP_CHECK(&c, k.info(&free_after, &total));
    printf("{\"app\":\"fork\",\"role\":\"parent\",\"pid\":%d,\"child\":%d,\"child_status\":%d,"
           "\"allocated\":%llu,\"free_while_allocated\":%zu,\"free_after\":%zu,\"total\":%zu}\n",
           (int)getpid(), (int)child, child_rc, 4 * APP_MIB, free_parent, free_after, total);
    return child_rc == 0 ? 0 : 1;
}
