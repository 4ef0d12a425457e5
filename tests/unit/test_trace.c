/* tests/unit/test_trace.c - the allocation-trace reader and writer: round
 * trips through plain and gzip files, slots, peak and streams of a handmade
 * trace, every kind of malformed input (code, line number and wording of the
 * error), tolerated variations (BOM, CRLF, extra columns, blank lines), and the
 * real traces of shared/data/traces checked against their summary.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "vramkit/error.h"
#include "vramkit/trace.h"

/* ---- helpers --------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static vram_trace *parse_ok(const char *text)
{
    vram_trace *t = NULL;
    int rc = vram_trace_parse(text, strlen(text), "x.csv", &t);
    if (rc)
        fail_msg("parse failed (%s): %s", vram_err_name(rc), vram_last_error());
    assert_non_null(t);
    return t;
}

/* Check the contract's invariants against a model: every allocation takes a
 * slot no live block holds, every free names its allocation's slot, n_slots is
 * the most blocks live at once, and the counters and peak agree. */
static void check_invariants(const vram_trace *t)
{
    uint64_t *owner = calloc(t->n_slots ? t->n_slots : 1, sizeof *owner); /* ptr or 0 */
    uint64_t *osize = calloc(t->n_slots ? t->n_slots : 1, sizeof *osize);
    assert_non_null(owner);
    assert_non_null(osize);
    size_t live = 0, max_live = 0, allocs = 0, frees = 0, fails = 0;
    uint64_t bytes = 0, peak = 0;
    uint32_t prev_line = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const vram_trace_event *e = &t->events[i];
        assert_true(e->line > prev_line);
        prev_line = e->line;
        assert_true(e->stream_index < t->n_streams);
        switch (e->action) {
        case VRAM_TRACE_ALLOC:
            assert_true(e->slot < t->n_slots);
            assert_int_equal(owner[e->slot], 0);
            owner[e->slot] = e->ptr;
            osize[e->slot] = e->size;
            allocs++;
            if (++live > max_live)
                max_live = live;
            bytes += e->size;
            if (bytes > peak)
                peak = bytes;
            break;
        case VRAM_TRACE_FREE:
            assert_true(e->slot < t->n_slots);
            assert_int_equal(owner[e->slot], e->ptr);
            assert_int_equal(osize[e->slot], e->size);
            owner[e->slot] = 0;
            frees++;
            live--;
            bytes -= e->size;
            break;
        case VRAM_TRACE_ALLOC_FAIL:
            assert_int_equal(e->slot, UINT32_MAX);
            fails++;
            break;
        default:
            fail_msg("bad action %u", e->action);
        }
    }
    assert_int_equal(allocs, t->n_allocs);
    assert_int_equal(frees, t->n_frees);
    assert_int_equal(fails, t->n_failures);
    assert_int_equal(allocs + frees + fails, t->n_events);
    assert_int_equal(max_live, t->n_slots);
    assert_int_equal(live, t->unfreed_blocks);
    assert_int_equal(peak, t->peak_live_bytes);
    /* streams are distinct */
    for (size_t i = 0; i < t->n_streams; i++)
        for (size_t j = i + 1; j < t->n_streams; j++)
            assert_true(t->streams[i] != t->streams[j]);
    free(owner);
    free(osize);
}

/* A temporary directory for files; removed with its files by rm_tmpdir. */
static char *make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char buf[512];
    snprintf(buf, sizeof buf, "%s/vram_trace_XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(buf);
    assert_non_null(dir);
    char *copy = strdup(dir);
    assert_non_null(copy);
    return copy;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* ---- writer -> reader ------------------------------------------------ */

typedef struct ev {
    vram_trace_action action;
    uint32_t thread;
    uint64_t ptr, size, stream;
} ev;

static const ev round_trip_events[] = {
    {VRAM_TRACE_ALLOC, 0, 0x7f3d48000000ull, 4194304, 0},
    {VRAM_TRACE_ALLOC, 3, 0x7f3d76700000ull, 4096, 0x1996e750ull},
    {VRAM_TRACE_ALLOC_FAIL, 4294967295u, 0, 1ull << 40, 0x1996e750ull},
    {VRAM_TRACE_FREE, 0, 0x7f3d48000000ull, 4194304, 0},
    {VRAM_TRACE_ALLOC, 1, 0xffffffffffffffffull, 18446744073709551615ull - 4096, 0xabcdefull},
    {VRAM_TRACE_FREE, 3, 0x7f3d76700000ull, 4096, 0x1996e750ull},
};

static void round_trip(const char *file)
{
    char *dir = make_tmpdir();
    char *path = join(dir, file);
    vram_trace_writer *w = NULL;
    assert_int_equal(vram_trace_writer_open(path, &w), 0);
    assert_non_null(w);
    size_t n = sizeof round_trip_events / sizeof round_trip_events[0];
    for (size_t i = 0; i < n; i++) {
        const ev *e = &round_trip_events[i];
        assert_int_equal(vram_trace_writer_event(w, e->action, e->thread, e->ptr, e->size,
                                                 e->stream),
                         0);
    }
    assert_int_equal(vram_trace_writer_close(w), 0);

    /* gzip exactly when the name ends in .gz */
    unsigned char magic[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(magic, 1, 2, f), 2);
    fclose(f);
    int gz = strlen(file) > 3 && strcmp(file + strlen(file) - 3, ".gz") == 0;
    assert_int_equal(magic[0] == 0x1f && magic[1] == 0x8b, gz);

    vram_trace *t = NULL;
    int rc = vram_trace_read(path, &t);
    if (rc)
        fail_msg("read failed: %s", vram_last_error());
    assert_string_equal(t->name, path);
    assert_int_equal(t->n_events, n);
    assert_int_equal(t->n_allocs, 3);
    assert_int_equal(t->n_frees, 2);
    assert_int_equal(t->n_failures, 1);
    assert_int_equal(t->unfreed_blocks, 1);
    assert_int_equal(t->n_slots, 2);
    assert_int_equal(t->n_streams, 3);
    assert_int_equal(t->streams[0], 0);
    assert_int_equal(t->streams[1], 0x1996e750ull);
    assert_int_equal(t->streams[2], 0xabcdefull);
    for (size_t i = 0; i < n; i++) {
        const ev *e = &round_trip_events[i];
        const vram_trace_event *g = &t->events[i];
        assert_int_equal(g->action, e->action);
        assert_int_equal(g->thread, e->thread);
        assert_int_equal(g->ptr, e->ptr);
        assert_int_equal(g->size, e->size);
        assert_int_equal(t->streams[g->stream_index], e->stream);
        assert_int_equal(g->line, i + 2);
        assert_true(g->time_us < 86400ull * 1000000ull);
    }
    check_invariants(t);
    vram_trace_free(t);

    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
}

static void test_round_trip_plain(void **state) { round_trip("t.csv"); }
static void test_round_trip_gzip(void **state) { round_trip("t.csv.gz"); }

/* The time column is the UTC time of day of the call. */
static void test_writer_time(void **state)
{
    char *dir = make_tmpdir();
    char *path = join(dir, "time.csv");
    vram_trace_writer *w = NULL;
    struct timespec before, after;
    assert_int_equal(vram_trace_writer_open(path, &w), 0);
    clock_gettime(CLOCK_REALTIME, &before);
    assert_int_equal(vram_trace_writer_event(w, VRAM_TRACE_ALLOC, 0, 0x10, 1, 0), 0);
    clock_gettime(CLOCK_REALTIME, &after);
    assert_int_equal(vram_trace_writer_close(w), 0);
    vram_trace *t = NULL;
    assert_int_equal(vram_trace_read(path, &t), 0);
    uint64_t lo = (uint64_t)(before.tv_sec % 86400) * 1000000u + (uint64_t)before.tv_nsec / 1000;
    uint64_t hi = (uint64_t)(after.tv_sec % 86400) * 1000000u + (uint64_t)after.tv_nsec / 1000;
    uint64_t got = t->events[0].time_us;
    if (hi >= lo) /* not across midnight */
        assert_true(got >= lo && got <= hi);
    vram_trace_free(t);
    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
}

/* Exact text of the writer's lines. */
static void test_writer_format(void **state)
{
    char *dir = make_tmpdir();
    char *path = join(dir, "fmt.csv");
    vram_trace_writer *w = NULL;
    assert_int_equal(vram_trace_writer_open(path, &w), 0);
    assert_int_equal(vram_trace_writer_event(w, VRAM_TRACE_ALLOC, 7, 0x7f00, 4096, 0), 0);
    assert_int_equal(vram_trace_writer_event(w, VRAM_TRACE_ALLOC_FAIL, 1, 0, 99, 0x1a2b), 0);
    assert_int_equal(vram_trace_writer_close(w), 0);
    char buf[512] = {0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_true(strncmp(buf, "Thread,Time,Action,Pointer,Size,Stream\n7,", 41) == 0);
    char *l2 = strchr(buf, '\n') + 1;
    /* 7,HH:MM:SS.ffffff,allocate,0x7f00,4096,0 */
    assert_int_equal(l2[4], ':');
    assert_int_equal(l2[7], ':');
    assert_int_equal(l2[10], '.');
    assert_true(strncmp(l2 + 17, ",allocate,0x7f00,4096,0\n", 24) == 0);
    char *l3 = strchr(l2, '\n') + 1;
    assert_true(strncmp(l3 + 17, ",allocate failure,0x0,99,0x1a2b\n", 32) == 0);
    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
}

static void test_writer_errors(void **state)
{
    vram_trace_writer *w = (vram_trace_writer *)&w;
    assert_int_equal(vram_trace_writer_open("/nonexistent-dir/x/t.csv", &w), VRAM_EIO);
    assert_null(w);
    assert_non_null(strstr(vram_last_error(), "/nonexistent-dir/x/t.csv"));
    w = (vram_trace_writer *)&w;
    assert_int_equal(vram_trace_writer_open("/nonexistent-dir/x/t.csv.gz", &w), VRAM_EIO);
    assert_null(w);
    assert_int_equal(vram_trace_writer_close(NULL), 0);

    /* A full device: the failure shows at the latest at close. */
    if (access("/dev/full", W_OK) == 0) {
        w = NULL;
        int rc = vram_trace_writer_open("/dev/full", &w);
        if (rc == 0) {
            for (int i = 0; i < 10000; i++)
                vram_trace_writer_event(w, VRAM_TRACE_ALLOC, 0, 0x1000 + i, 64, 0);
            assert_int_equal(vram_trace_writer_close(w), VRAM_EIO);
        } else {
            assert_int_equal(rc, VRAM_EIO);
        }
        assert_non_null(strstr(vram_last_error(), "/dev/full"));
    }
}

/* ---- the handmade trace ---------------------------------------------- */

static const char handmade[] =
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "0,10:00:00.000001,allocate,0x1000,100,0\n"          /* 2: slot a, live 100 */
    "0,10:00:00.000002,allocate,0x2000,200,0x5\n"        /* 3: slot b, live 300 */
    "1,10:00:00.000003,allocate failure,0x0,999,0x7\n"   /* 4: no slot */
    "0,10:00:00.000004,free,0x1000,100,0\n"              /* 5: slot a, live 200 */
    "0,10:00:00.000005,allocate,0x3000,50,0x5\n"         /* 6: slot a again, live 250 */
    "0,10:00:00.000006,allocate,0x4000,400,0\n"          /* 7: slot c, live 650 (peak) */
    "0,10:00:00.000007,free,0x2000,200,0x5\n"            /* 8: slot b, live 450 */
    "0,10:00:00.000008,free,0x4000,400,0\n"              /* 9: slot c, live 50 */
    "2,23:59:59.999999,allocate,0x1000,10,0\n";          /* 10: live 60 */

static void test_handmade(void **state)
{
    vram_trace *t = parse_ok(handmade);
    assert_string_equal(t->name, "x.csv");
    assert_int_equal(t->n_events, 9);
    assert_int_equal(t->n_allocs, 5);
    assert_int_equal(t->n_frees, 3);
    assert_int_equal(t->n_failures, 1);
    assert_int_equal(t->n_slots, 3);
    assert_int_equal(t->peak_live_bytes, 650);
    assert_int_equal(t->unfreed_blocks, 2);
    assert_int_equal(t->n_streams, 3);
    assert_int_equal(t->streams[0], 0);
    assert_int_equal(t->streams[1], 5);
    assert_int_equal(t->streams[2], 7);

    const vram_trace_event *e = t->events;
    assert_int_equal(e[0].time_us, 36000ull * 1000000 + 1);
    assert_int_equal(e[8].time_us, 86399ull * 1000000 + 999999);
    assert_int_equal(e[8].thread, 2);
    assert_int_equal(e[2].action, VRAM_TRACE_ALLOC_FAIL);
    assert_int_equal(e[2].slot, UINT32_MAX);
    assert_int_equal(e[2].size, 999);
    assert_int_equal(e[2].stream_index, 2);
    assert_int_equal(e[1].stream_index, 1);
    assert_int_equal(e[0].line, 2);
    assert_int_equal(e[8].line, 10);
    /* frees carry their allocation's slot */
    assert_int_equal(e[3].slot, e[0].slot);
    assert_int_equal(e[6].slot, e[1].slot);
    assert_int_equal(e[7].slot, e[5].slot);
    /* three distinct slots while three blocks were live */
    assert_true(e[4].slot != e[1].slot && e[5].slot != e[1].slot && e[5].slot != e[4].slot);
    check_invariants(t);
    vram_trace_free(t);
}

static void test_header_only(void **state)
{
    vram_trace *t = parse_ok("Thread,Time,Action,Pointer,Size,Stream");
    assert_int_equal(t->n_events, 0);
    assert_int_equal(t->n_slots, 0);
    assert_int_equal(t->n_streams, 0);
    assert_int_equal(t->peak_live_bytes, 0);
    vram_trace_free(t);
    vram_trace_free(NULL);
}

/* ---- tolerated variations --------------------------------------------- */

static void test_tolerated(void **state)
{
    static const char text[] =
        "\xEF\xBB\xBF"
        "Thread,Time,Action,Pointer,Size,Stream,Extra,More\r\n"   /* 1 */
        "0,01:02:03.5,allocate,0X7F3D48000000,4096,0,x,y\r\n"     /* 2 */
        "\r\n"                                                    /* 3 */
        "\n"                                                      /* 4 */
        "12,01:02:03.123456,allocate,7f3d00000000,1,1996E750\n"   /* 5 */
        "0,01:02:04,free,0x7f3d48000000,4096,0x0,\n"              /* 6 */
        "0,01:02:05.12,allocate failure,,5,0\n"                   /* 7 */
        "0,01:02:05.12,allocate failure,0,6,0\r\n"                /* 8 */
        "0,01:02:05.000000,free,0x00007f3d00000000,1,0x1996e750"; /* 9, no final newline */
    vram_trace *t = parse_ok(text);
    assert_int_equal(t->n_events, 6);
    const vram_trace_event *e = t->events;
    assert_int_equal(e[0].line, 2);
    assert_int_equal(e[0].ptr, 0x7f3d48000000ull);
    assert_int_equal(e[0].time_us, 3723ull * 1000000 + 500000);
    assert_int_equal(e[1].line, 5);
    assert_int_equal(e[1].thread, 12);
    assert_int_equal(e[1].time_us, 3723ull * 1000000 + 123456);
    assert_int_equal(e[2].time_us, 3724ull * 1000000);
    assert_int_equal(e[3].ptr, 0);
    assert_int_equal(e[3].time_us, 3725ull * 1000000 + 120000);
    assert_int_equal(e[4].size, 6);
    assert_int_equal(e[5].line, 9);
    assert_int_equal(e[5].action, VRAM_TRACE_FREE);
    assert_int_equal(t->n_streams, 2);
    assert_int_equal(t->streams[1], 0x1996e750ull);
    assert_int_equal(t->unfreed_blocks, 0);
    assert_int_equal(t->peak_live_bytes, 4097);
    check_invariants(t);
    vram_trace_free(t);

    /* A final newline or not, and several, make no difference. */
    t = parse_ok("Thread,Time,Action,Pointer,Size,Stream\n0,00:00:00.0,allocate,1,1,0\n\n\n");
    assert_int_equal(t->n_events, 1);
    vram_trace_free(t);
}

/* ---- malformed input --------------------------------------------------- */

#define H "Thread,Time,Action,Pointer,Size,Stream\n"
#define A2 "0,10:00:00.000001,allocate,0x1000,100,0\n"

typedef struct bad_case {
    const char *text;
    unsigned line;
    const char *keyword; /* must appear in the error */
} bad_case;

static const bad_case bad_cases[] = {
    {"", 1, "empty"},
    {"\xEF\xBB\xBF", 1, "empty"},
    {"\n" H, 1, "header must start with Thread,Time,Action,Pointer,Size,Stream (got an empty"},
    {"Thread,Time,Action,Pointer,Size\n", 1, "(got \"Thread,Time,Action,Pointer,Size\")"},
    {"Thread,Time,Action,Pointer,Size,StreamID\n", 1, "header must start"},
    {"thread,time,action,pointer,size,stream\n", 1, "header must start"},
    {"Pointer,Size,Stream,Thread,Time,Action\n", 1, "header must start"},
    {H "0,10:00:00.000001,allocate,0x1000,100\n", 2, "expected 6 fields"},
    {H "\n\n0\n", 4, "got 1"},
    {H "abc,10:00:00.000001,allocate,0x1000,100,0\n", 2, "thread \"abc\" is not a number"},
    {H "-1,10:00:00.000001,allocate,0x1000,100,0\n", 2, "thread \"-1\" is not a number"},
    {H ",10:00:00.000001,allocate,0x1000,100,0\n", 2, "thread \"\" is not a number"},
    {H "4294967296,10:00:00.000001,allocate,0x1000,100,0\n", 2, "\"4294967296\" is too large"},
    {H "0,24:00:00.000001,allocate,0x1000,100,0\n", 2, "time \"24:00:00.000001\" is out of range"},
    {H "0,10:60:00.0,allocate,0x1000,100,0\n", 2, "out of range"},
    {H "0,10:00:60.0,allocate,0x1000,100,0\n", 2, "out of range"},
    {H "0,1:00:00.000001,allocate,0x1000,100,0\n", 2, "time \"1:00:00.000001\" is not HH:MM:SS"},
    {H "0,10:00:00.1234567,allocate,0x1000,100,0\n", 2, "is not HH:MM:SS.ffffff"},
    {H "0,10:00:00.,allocate,0x1000,100,0\n", 2, "is not HH:MM:SS.ffffff"},
    {H "0,10:00:00.12a,allocate,0x1000,100,0\n", 2, "is not HH:MM:SS.ffffff"},
    {H "0,10-00-00.1,allocate,0x1000,100,0\n", 2, "is not HH:MM:SS.ffffff"},
    {H "0,10:00:00.1,alloc,0x1000,100,0\n", 2, "action \"alloc\" is not allocate, free"},
    {H "0,10:00:00.1,Allocate,0x1000,100,0\n", 2, "action \"Allocate\""},
    {H "0,10:00:00.1,allocate,0xZZ,100,0\n", 2, "pointer \"0xZZ\" is not a hex number"},
    {H "0,10:00:00.1,allocate,0x,100,0\n", 2, "pointer \"0x\" is not a hex number"},
    {H "0,10:00:00.1,allocate,,100,0\n", 2, "pointer \"\" is not a hex number"},
    {H "0,10:00:00.1,allocate,0x0,100,0\n", 2, "allocate of a null pointer"},
    {H A2 "0,10:00:00.1,free,0,100,0\n", 3, "free of a null pointer"},
    {H "0,10:00:00.1,allocate,0x10000000000000000,100,0\n", 2, "does not fit 64 bits"},
    {H "0,10:00:00.1,allocate,0x1000,12a,0\n", 2, "size \"12a\" is not a number"},
    {H "0,10:00:00.1,allocate,0x1000,,0\n", 2, "size \"\" is not a number"},
    {H "0,10:00:00.1,allocate,0x1000, 100,0\n", 2, "size \" 100\" is not a number"},
    {H "0,10:00:00.1,allocate,0x1000,18446744073709551616,0\n", 2,
     "size \"18446744073709551616\" does not fit 64 bits"},
    {H "0,10:00:00.1,allocate,0x1000,0,0\n", 2, "allocate of 0x1000 with size 0"},
    {H "0,10:00:00.1,allocate,0x1000,100,zz\n", 2, "stream \"zz\" is not a hex number"},
    {H "0,10:00:00.1,allocate,0x1000,100,\n", 2, "stream \"\" is not a hex number"},
    {H "0,10:00:00.1,allocate,0x1000,100,0x10000000000000000\n", 2, "stream"},
    {H A2 "\n0,10:00:00.1,allocate,0x1000,64,0\n", 4,
     "allocate of 0x1000, which is already allocated (line 2)"},
    {H A2 "0,10:00:00.1,free,0x2000,100,0\n", 3, "free of 0x2000, which is not allocated"},
    {H A2 "0,10:00:00.1,free,0x1000,100,0\n0,10:00:00.1,free,0x1000,100,0\n", 4,
     "free of 0x1000, which is not allocated"},
    {H A2 "0,10:00:00.1,free,0x1000,99,0\n", 3,
     "free of 0x1000 with size 99, but it was allocated with size 100 (line 2)"},
    {H "0,10:00:00.1,allocate,0x1000,18446744073709551615,0\n"
       "0,10:00:00.1,allocate,0x2000,1,0\n", 3, "overflow"},
    {H "0,10:00:00.1,free\r,0x1000,100,0\n", 2, "action \"free\\x0d\""},
};

static void test_malformed(void **state)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        vram_trace *t = (vram_trace *)&t;
        vram_clear_error();
        int rc = vram_trace_parse(c->text, strlen(c->text), "x.csv", &t);
        char where[32];
        snprintf(where, sizeof where, "x.csv:%u: ", c->line);
        const char *msg = vram_last_error();
        if (rc != VRAM_EPARSE || t != NULL || strncmp(msg, where, strlen(where)) != 0 ||
            !strstr(msg, c->keyword))
            fail_msg("case %zu: rc %s, error \"%s\"; wanted \"%s...%s\"", i, vram_err_name(rc),
                     msg, where, c->keyword);
    }
}

/* Any bytes may come: a NUL inside a field is shown, not a terminator. */
static void test_nul_byte(void **state)
{
    static const char text[] = H "0,10:00:00.1,allocate,0x10\x00" "0,100,0\n";
    vram_trace *t = (vram_trace *)&t;
    assert_int_equal(vram_trace_parse(text, sizeof text - 1, "x.csv", &t), VRAM_EPARSE);
    assert_null(t);
    assert_non_null(strstr(vram_last_error(), "x.csv:2: pointer \"0x10\\x000\" is not a hex"));
}

static void test_bad_arguments(void **state)
{
    vram_trace *t = (vram_trace *)&t;
    assert_int_equal(vram_trace_parse(NULL, 5, "x", &t), VRAM_EINVAL);
    assert_null(t);
    assert_int_equal(vram_trace_parse("x", 1, "x", NULL), VRAM_EINVAL);
    assert_int_equal(vram_trace_read(NULL, &t), VRAM_EINVAL);
    /* no name: still a located message */
    assert_int_equal(vram_trace_parse("bad\n", 4, NULL, &t), VRAM_EPARSE);
    assert_non_null(strstr(vram_last_error(), ":1: header"));
}

static void test_action_names(void **state)
{
    assert_string_equal(vram_trace_action_name(VRAM_TRACE_ALLOC), "allocate");
    assert_string_equal(vram_trace_action_name(VRAM_TRACE_FREE), "free");
    assert_string_equal(vram_trace_action_name(VRAM_TRACE_ALLOC_FAIL), "allocate failure");
    assert_string_equal(vram_trace_action_name((vram_trace_action)9), "unknown");
}

/* ---- reading files: errors -------------------------------------------- */

static void test_read_errors(void **state)
{
    vram_trace *t = (vram_trace *)&t;
    assert_int_equal(vram_trace_read("/nonexistent-dir/t.csv.gz", &t), VRAM_EIO);
    assert_null(t);
    assert_non_null(strstr(vram_last_error(), "/nonexistent-dir/t.csv.gz"));

    char *dir = make_tmpdir();
    /* a directory cannot be read */
    t = (vram_trace *)&t;
    assert_int_equal(vram_trace_read(dir, &t), VRAM_EIO);
    assert_null(t);

    /* a parse error names the path and the line */
    char *bad = join(dir, "bad.csv");
    static const char text[] = H A2 A2;
    write_file(bad, text, sizeof text - 1);
    t = (vram_trace *)&t;
    assert_int_equal(vram_trace_read(bad, &t), VRAM_EPARSE);
    assert_null(t);
    char where[600];
    snprintf(where, sizeof where, "%s:3: allocate of 0x1000", bad);
    assert_non_null(strstr(vram_last_error(), where));

    /* a truncated gzip file */
    char *gzp = join(dir, "cut.csv.gz");
    gzFile gz = gzopen(gzp, "wb");
    assert_non_null(gz);
    gzputs(gz, H);
    for (int i = 0; i < 2000; i++)
        gzprintf(gz, "0,10:00:00.1,allocate,0x%x,%d,0\n", 0x1000 + i * 16, i + 1);
    assert_int_equal(gzclose(gz), Z_OK);
    FILE *f = fopen(gzp, "rb");
    assert_non_null(f);
    unsigned char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 100);
    t = NULL;
    assert_int_equal(vram_trace_read(gzp, &t), 0); /* whole: fine */
    assert_int_equal(t->n_events, 2000);
    vram_trace_free(t);
    write_file(gzp, buf, n / 2);
    t = (vram_trace *)&t;
    assert_int_equal(vram_trace_read(gzp, &t), VRAM_EIO);
    assert_null(t);
    assert_non_null(strstr(vram_last_error(), "truncated"));

    /* a corrupt gzip body */
    buf[n / 2] ^= 0xff;
    buf[n / 2 + 1] ^= 0xff;
    buf[n / 2 + 2] ^= 0xff;
    write_file(gzp, buf, n);
    t = (vram_trace *)&t;
    int rc = vram_trace_read(gzp, &t);
    assert_true(rc == VRAM_EIO || rc == VRAM_EPARSE);
    assert_null(t);

    /* an empty file */
    write_file(bad, "", 0);
    t = (vram_trace *)&t;
    assert_int_equal(vram_trace_read(bad, &t), VRAM_EPARSE);
    assert_null(t);

    unlink(bad);
    unlink(gzp);
    rmdir(dir);
    free(bad);
    free(gzp);
    free(dir);
}

/* A fixture in tests/data/traces, plain and gzip: same events. */
static void test_fixtures(void **state)
{
    const char *data = getenv("VRAM_TEST_DATA");
    if (!data || !*data) {
        print_message("VRAM_TEST_DATA not set; skipping the fixtures\n");
        skip();
    }
    char *dir = join(data, "traces");
    char *plain = join(dir, "small.csv");
    char *gzp = join(dir, "small.csv.gz");
    vram_trace *a = NULL, *b = NULL;
    if (vram_trace_read(plain, &a) || vram_trace_read(gzp, &b))
        fail_msg("%s", vram_last_error());
    assert_int_equal(a->n_events, b->n_events);
    assert_true(a->n_events > 0);
    assert_memory_equal(a->events, b->events, a->n_events * sizeof *a->events);
    assert_int_equal(a->peak_live_bytes, b->peak_live_bytes);
    assert_int_equal(a->n_streams, 2);
    check_invariants(a);
    vram_trace_free(a);
    vram_trace_free(b);
    free(plain);
    free(gzp);
    free(dir);
}

/* ---- the real traces ----------------------------------------------------- */

static char *shared_traces_dir(void)
{
    const char *env = getenv("VRAM_SHARED_TRACES");
    if (env && *env)
        return strdup(env);
    const char *src = getenv("VRAM_SOURCE_DIR");
    if (!src || !*src)
        src = ".";
    return join(src, "../shared/data/traces");
}

static char *slurp_gz(const char *path, size_t *len)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (cap - n < 65536) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        int r = gzread(gz, buf + n, (unsigned)(cap - n));
        assert_true(r >= 0);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    gzclose(gz);
    *len = n;
    return buf;
}

static void test_shared_traces(void **state)
{
    char *dir = shared_traces_dir();
    char *summary_path = join(dir, "summary.json");
    size_t jlen = 0;
    char *json = slurp_gz(summary_path, &jlen); /* gzread reads plain files too */
    if (!json) {
        print_message("no %s; skipping the real traces\n", summary_path);
        free(summary_path);
        free(dir);
        skip();
    }
    cJSON *root = cJSON_ParseWithLength(json, jlen);
    assert_non_null(root);
    assert_true(cJSON_IsArray(root));
    int checked = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        const cJSON *wl = cJSON_GetObjectItemCaseSensitive(item, "workload");
        const cJSON *events = cJSON_GetObjectItemCaseSensitive(item, "events");
        const cJSON *peak = cJSON_GetObjectItemCaseSensitive(item, "peak_live_requested");
        assert_true(cJSON_IsString(wl) && cJSON_IsNumber(events) && cJSON_IsNumber(peak));
        char file[256];
        snprintf(file, sizeof file, "%s.csv.gz", wl->valuestring);
        char *path = join(dir, file);

        /* vram_trace_read: the whole path */
        vram_trace *t = NULL;
        double t0 = now_ms();
        int rc = vram_trace_read(path, &t);
        double read_ms = now_ms() - t0;
        if (rc)
            fail_msg("%s: %s", path, vram_last_error());

        /* vram_trace_parse alone, on the decompressed text; count its rows */
        size_t len = 0;
        char *text = slurp_gz(path, &len);
        assert_non_null(text);
        size_t rows = 0;
        for (size_t i = 0, start = 0; i <= len; i++) {
            if (i == len || text[i] == '\n') {
                if (i > start && start > 0) /* not empty, not the header */
                    rows++;
                start = i + 1;
            }
        }
        vram_trace *t2 = NULL;
        t0 = now_ms();
        rc = vram_trace_parse(text, len, file, &t2);
        double parse_ms = now_ms() - t0;
        assert_int_equal(rc, 0);

        assert_int_equal(t->n_events, rows);
        assert_int_equal(t2->n_events, rows);
        assert_int_equal(t->n_failures, 0);
        assert_int_equal(t->peak_live_bytes, (uint64_t)peak->valuedouble);
        /* summary.json's `events` counts the events of PyTorch's memory history
         * (allocation, free requested, free completed, segment events), about
         * 1.5 times the CSV's rows: it cannot equal n_events, only bound it. */
        assert_true((double)t->n_events <= events->valuedouble);
        check_invariants(t);
        print_message("%-24s %6zu events (summary.json events %.0f), %5zu allocs, %2zu unfreed, "
                      "%4zu slots, %zu streams, peak %llu B; read %.1f ms, parse %.1f ms\n",
                      wl->valuestring, t->n_events, events->valuedouble, t->n_allocs,
                      t->unfreed_blocks, t->n_slots, t->n_streams,
                      (unsigned long long)t->peak_live_bytes, read_ms, parse_ms);
        vram_trace_free(t);
        vram_trace_free(t2);
        free(text);
        free(path);
        checked++;
    }
    assert_true(checked > 0);
    cJSON_Delete(root);
    free(json);
    free(summary_path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_plain),
        cmocka_unit_test(test_round_trip_gzip),
        cmocka_unit_test(test_writer_time),
        cmocka_unit_test(test_writer_format),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_handmade),
        cmocka_unit_test(test_header_only),
        cmocka_unit_test(test_tolerated),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_action_names),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_shared_traces),
    };
    return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
