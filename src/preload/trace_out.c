/* src/preload/trace_out.c - the RMM-format trace of the program's device
 * allocations (vramkit/trace.h), written as it goes: each event is flushed
 * to the file before the hook returns, so a program that crashes loses
 * nothing it did. A child of fork writes its own, PATH.PID. One mutex
 * serialises the writer. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "preload_internal.h"
#include "vramkit/trace.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static vram_trace_writer *writer;
static char path[4096];
static atomic_uint next_thread;
static _Thread_local unsigned thread_no;

int vram__pl_trace_open(const char *p)
{
    snprintf(path, sizeof path, "%s", p);
    return vram_trace_writer_open(path, &writer) ? -1 : 0;
}

void vram__pl_trace(int action, uint64_t ptr, uint64_t size, uint64_t stream)
{
    if (!writer || !size)
        return;
    if (!thread_no)
        thread_no = atomic_fetch_add(&next_thread, 1) + 1;
    pthread_mutex_lock(&mu);
    if (writer) {
        vram_trace_writer_event(writer, (vram_trace_action)action, thread_no, ptr, size, stream);
        vram_trace_writer_flush(writer);
    }
    pthread_mutex_unlock(&mu);
}

void vram__pl_trace_after_fork(void)
{
    pthread_mutex_init(&mu, NULL);
    if (!writer)
        return;
    /* The parent's writer stays the parent's: its buffer is empty (flushed
     * after every event), so dropping the copy loses nothing. */
    writer = NULL;
    char child[4200];
    snprintf(child, sizeof child, "%s.%d", path, (int)getpid());
    vram_trace_writer_open(child, &writer);
}

void vram__pl_trace_close(void)
{
    pthread_mutex_lock(&mu);
    vram_trace_writer_close(writer);
    writer = NULL;
    pthread_mutex_unlock(&mu);
}
