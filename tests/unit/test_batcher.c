/* tests/unit/test_batcher.c - how a batch is made of the streams' ready
 * frames (src/pipeline/batcher.c): one frame from each of up to B different
 * streams, every ready stream taken when B allows, none twice in a batch,
 * each frame numbered in its stream as it is taken (the order its result is
 * handed on in), and the next batch starting after the last stream taken,
 * so that none is starved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pipeline/service_internal.h"

#define N 5

static vram_service svc;
static vram__stream streams[N];
static vram_frame frames[N][2];
static vram_frame *rings[N][2];
static vram__worker worker;

static void ready_all(void)
{
    memset(&svc, 0, sizeof svc);
    for (int i = 0; i < N; i++) {
        memset(&streams[i], 0, sizeof streams[i]);
        streams[i].ready = rings[i];
        streams[i].ready_cap = 2;
        rings[i][0] = &frames[i][0];
        rings[i][1] = &frames[i][1];
        streams[i].ready_count = 2;
        svc.streams[i] = &streams[i];
    }
    svc.n_streams = N;
    svc.opts.stream_in_flight = 2;
}

static int taken_from(unsigned k, int stream)
{
    for (unsigned j = 0; j < k; j++)
        if (worker.streams[j] == &streams[stream])
            return 1;
    return 0;
}

static void test_every_ready_stream_once(void **state)
{
    (void)state;
    ready_all();
    unsigned k = vram__ready_take(&svc, &worker, 8);
    assert_int_equal(k, N);
    for (int i = 0; i < N; i++) {
        assert_true(taken_from(k, i));
        assert_int_equal(streams[i].in_flight, 1);
        assert_int_equal(streams[i].ready_count, 1);
        assert_ptr_equal(worker.frames[i], &frames[worker.streams[i] - streams][0]);
        assert_int_equal(worker.seq[i], 0);
    }
    /* Their second frames, numbered 1, while the first are in flight. */
    k = vram__ready_take(&svc, &worker, 8);
    assert_int_equal(k, N);
    for (unsigned i = 0; i < k; i++) {
        assert_ptr_equal(worker.frames[i], &frames[worker.streams[i] - streams][1]);
        assert_int_equal(worker.seq[i], 1);
        assert_int_equal(worker.streams[i]->in_flight, 2);
    }
    assert_int_equal(vram__ready_take(&svc, &worker, 8), 0);
    assert_false(vram__ready_idle(&svc));
}

static void test_round_robin(void **state)
{
    (void)state;
    ready_all();
    unsigned k = vram__ready_take(&svc, &worker, 2);
    assert_int_equal(k, 2);
    assert_true(taken_from(k, 0) && taken_from(k, 1));
    k = vram__ready_take(&svc, &worker, 2);
    assert_int_equal(k, 2);
    assert_true(taken_from(k, 2) && taken_from(k, 3));
    /* Stream 4, then round to stream 0's second frame. */
    k = vram__ready_take(&svc, &worker, 2);
    assert_int_equal(k, 2);
    assert_true(taken_from(k, 4) && taken_from(k, 0));
    assert_int_equal(streams[0].seq_taken, 2);
}

/* One frame of a stream in flight at most: its second waits. */
static void test_one_in_flight(void **state)
{
    (void)state;
    ready_all();
    svc.opts.stream_in_flight = 1;
    assert_int_equal(vram__ready_take(&svc, &worker, 8), N);
    assert_int_equal(vram__ready_take(&svc, &worker, 8), 0);
    streams[3].in_flight = 0;
    assert_int_equal(vram__ready_take(&svc, &worker, 8), 1);
    assert_ptr_equal(worker.streams[0], &streams[3]);
    assert_int_equal(worker.seq[0], 1);
}

static void test_idle(void **state)
{
    (void)state;
    ready_all();
    for (int i = 0; i < N; i++)
        streams[i].ready_count = 0;
    assert_true(vram__ready_idle(&svc));
    assert_int_equal(vram__ready_take(&svc, &worker, 8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_ready_stream_once),
        cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_one_in_flight),
        cmocka_unit_test(test_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
