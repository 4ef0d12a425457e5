/* tests/integration/test_pool_trace.c - a pool asked for a trace writes every
 * event (allocations, frees, refused requests) in the RMM format, plain or
 * gzip, and the trace reads back and replays to the same peak; a process
 * that exits with its pool still tracing leaves a whole trace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "replay/replay.h"
#include "vramkit.h"

#define MiB (1024ull * 1024)

static void write_and_read(const char *suffix)
{
    char dir[] = "/tmp/vram_trace_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/pool%s", dir, suffix);

    vram_backend *b;
    assert_int_equal(vram_backend_create("sim", &(vram_backend_opts){.capacity = 256 * MiB}, &b), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = b;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(vram_pool_trace_start(p, path), 0);
    assert_int_equal(vram_pool_trace_start(p, path), VRAM_EBUSY);
    vram_owner cam;
    assert_int_equal(vram_owner_create(p, "cam", 8 * MiB, &cam), 0);

    vram_stream s1 = (vram_stream)0x10, s2 = (vram_stream)0x20;
    uint64_t sizes[] = {1000, 3 * MiB, 4096, 7 * MiB + 5, 256};
    void *ptr[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(vram_pool_alloc(p, sizes[i], VRAM_OWNER_DEFAULT, VRAM_KIND_ACTIVATIONS,
                                         i % 2 ? s2 : s1, &ptr[i]),
                         0);
    void *refused = NULL;
    assert_int_equal(vram_pool_alloc(p, 9 * MiB, cam, VRAM_KIND_FRAMES, s1, &refused),
                     VRAM_EBUDGET);
    for (int i = 4; i >= 0; i--)
        assert_int_equal(vram_pool_free(p, ptr[i], i % 2 ? s2 : s1), 0);
    vram_pool_stats st;
    assert_int_equal(vram_pool_stats_get(p, &st), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_backend_destroy(b), 0);

    vram_trace *t;
    int rc = vram_trace_read(path, &t);
    if (rc)
        fail_msg("reading %s: %s", path, vram_last_error());
    assert_int_equal(t->n_events, 11);
    assert_int_equal(t->n_allocs, 5);
    assert_int_equal(t->n_frees, 5);
    assert_int_equal(t->n_failures, 1);
    assert_int_equal(t->n_streams, 2);
    assert_int_equal(t->streams[0], 0x10);
    assert_int_equal(t->streams[1], 0x20);
    assert_int_equal(t->peak_live_bytes, st.peak_live_bytes);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(t->events[i].action, VRAM_TRACE_ALLOC);
        assert_int_equal(t->events[i].size, sizes[i]);
        assert_int_equal(t->events[i].ptr, (uint64_t)(uintptr_t)ptr[i]);
    }
    assert_int_equal(t->events[5].action, VRAM_TRACE_ALLOC_FAIL);
    assert_int_equal(t->events[5].size, 9 * MiB);
    assert_int_equal(t->events[6].action, VRAM_TRACE_FREE);
    assert_int_equal(t->events[6].ptr, (uint64_t)(uintptr_t)ptr[4]);

    vram_replay_opts ro;
    vram_replay_opts_init(&ro);
    ro.timing_runs = 1;
    ro.skip_malloc = 1;
    vram_replay_result r;
    assert_int_equal(vram_replay_run(t, &ro, &r), 0);
    assert_int_equal(r.peak_live_bytes, st.peak_live_bytes);
    assert_int_equal(r.failed_allocs, 0);
    assert_int_equal(r.allocs, 5);
    vram_trace_free(t);

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char magic[2] = {0};
    assert_int_equal(fread(magic, 1, 2, f), 2);
    fclose(f);
    int gz = magic[0] == 0x1f && magic[1] == 0x8b;
    assert_int_equal(gz, strstr(suffix, ".gz") != NULL);
    unlink(path);
    rmdir(dir);
}

static void test_trace_plain(void **state)
{
    (void)state;
    write_and_read(".csv");
}

static void test_trace_gzip(void **state)
{
    (void)state;
    write_and_read(".csv.gz");
}

/* A trace that cannot be created: asked for directly, the call says so;
 * named by VRAM_TRACE, the pool is not created. */
static void test_trace_unwritable(void **state)
{
    (void)state;
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    vram_pool *p = (vram_pool *)0x1;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(vram_pool_trace_start(p, "/nonexistent-dir/x.csv"), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "/nonexistent-dir/x.csv"));
    assert_int_equal(vram_pool_trace_stop(p), VRAM_EINVAL);
    assert_int_equal(vram_pool_destroy(p), 0);

    assert_int_equal(vram_config_set("trace", "/nonexistent-dir/x.csv"), 0);
    p = (vram_pool *)0x1;
    assert_int_equal(vram_pool_create(&o, &p), VRAM_EIO);
    assert_null(p);
    assert_non_null(strstr(vram_last_error(), "/nonexistent-dir/x.csv"));
    o.configured_listeners = 0; /* a pool that does not take them is made */
    assert_int_equal(vram_pool_create(&o, &p), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
    assert_int_equal(vram_config_set("trace", ""), 0);
}

/* Two pools tracing to one path share the file: neither truncates the
 * other's lines, and the file is finished when the last one stops. */
static void test_trace_shared(void **state)
{
    (void)state;
    char dir[] = "/tmp/vram_trace_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/shared.csv", dir);
    assert_int_equal(vram_config_set("trace", path), 0);
    vram_pool *a, *b;
    vram_backend *ba, *bb;
    assert_int_equal(vram_backend_create("host", NULL, &ba), 0);
    assert_int_equal(vram_backend_create("host", NULL, &bb), 0);
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = ba;
    assert_int_equal(vram_pool_create(&o, &a), 0);
    o.backend = bb;
    assert_int_equal(vram_pool_create(&o, &b), 0);
    assert_int_equal(vram_config_set("trace", ""), 0);
    void *x, *y;
    assert_int_equal(vram_pool_alloc(a, 1000, 0, VRAM_KIND_IO, NULL, &x), 0);
    assert_int_equal(vram_pool_alloc(b, 2000, 0, VRAM_KIND_IO, NULL, &y), 0);
    assert_int_equal(vram_pool_free(a, x, NULL), 0);
    assert_int_equal(vram_pool_destroy(a), 0);
    assert_int_equal(vram_pool_free(b, y, NULL), 0);
    assert_int_equal(vram_pool_trace_stop(b), 0);
    void *z;
    assert_int_equal(vram_pool_alloc(b, 3000, 0, VRAM_KIND_IO, NULL, &z), 0); /* not traced */
    assert_int_equal(vram_pool_free(b, z, NULL), 0);
    assert_int_equal(vram_pool_destroy(b), 0);
    assert_int_equal(vram_backend_destroy(ba), 0);
    assert_int_equal(vram_backend_destroy(bb), 0);
    vram_trace *t;
    int rc = vram_trace_read(path, &t);
    if (rc)
        fail_msg("reading %s: %s", path, vram_last_error());
    assert_int_equal(t->n_allocs, 2);
    assert_int_equal(t->n_frees, 2);
    assert_int_equal(t->events[0].size, 1000);
    assert_int_equal(t->events[1].size, 2000);
    vram_trace_free(t);
    unlink(path);
    rmdir(dir);
}

/* A child process traces a pool, allocates (leaving blocks live) and exits
 * without destroying it, as a program whose allocator lives to the end does:
 * the trace, gzip or plain, reads back with every event. */
static void exit_while_tracing(const char *suffix)
{
    char dir[] = "/tmp/vram_trace_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/exit%s", dir, suffix);
    enum { N = 5000 };
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        vram_backend *b;
        vram_pool *p;
        vram_pool_opts o;
        if (vram_backend_create("sim", &(vram_backend_opts){.capacity = 256 * MiB}, &b) ||
            vram_pool_opts_init(&o))
            _exit(2);
        o.backend = b;
        if (vram_pool_create(&o, &p) || vram_pool_trace_start(p, path))
            _exit(3);
        for (int i = 0; i < N; i++) { /* more than the writer buffers */
            void *x;
            if (vram_pool_alloc(p, 4096 + (uint64_t)i, VRAM_OWNER_DEFAULT, VRAM_KIND_IO, NULL, &x))
                _exit(4);
            if (i % 2 == 0 && vram_pool_free(p, x, NULL))
                _exit(5);
        }
        exit(0); /* no destroy, no trace stop */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    vram_trace *t;
    if (vram_trace_read(path, &t))
        fail_msg("reading %s: %s", path, vram_last_error());
    assert_int_equal(t->n_allocs, N);
    assert_int_equal(t->n_frees, N / 2);
    assert_int_equal(t->unfreed_blocks, N / 2);
    assert_int_equal(t->events[t->n_events - 1].size, 4096 + N - 1);
    vram_trace_free(t);
    unlink(path);
    rmdir(dir);
}

static void test_trace_exit_gzip(void **state)
{
    (void)state;
    exit_while_tracing(".csv.gz");
}

static void test_trace_exit_plain(void **state)
{
    (void)state;
    exit_while_tracing(".csv");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_plain),
        cmocka_unit_test(test_trace_gzip),
        cmocka_unit_test(test_trace_unwritable),
        cmocka_unit_test(test_trace_shared),
        cmocka_unit_test(test_trace_exit_gzip),
        cmocka_unit_test(test_trace_exit_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
