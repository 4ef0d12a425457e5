/* bench/decay.c - whether held memory falls to live after the load stops,
 * within the decay time plus one second. Each trace is replayed once through
 * a fresh vmm pool with a decay thread (retain_min 0); at the end every block
 * still live is freed (--keep-live: kept, so "live" is what remains). From
 * that moment, the load's stop, the pool's counters are read every 10 ms:
 * the settle time is the last moment reserved bytes or the bytes given back
 * changed, and the watch ends once nothing has changed for the decay time
 * plus one second, once nothing free is held (reserved <= allocated), or
 * decay + 5 s after the stop. A trim afterwards shows what the decay left
 * that could have gone back: the target is met when the pool settled within
 * decay + 1 s and the trim found nothing more to give back. Prints a table;
 * with --out writes it as Markdown (machine, date, command, commit). Exit
 * status 0 whether or not the target is met (the table says), 1 on errors.
 *
 *   bench_decay [--backend NAME] [--decay-ms MS] [--keep-live] [--out FILE.md]
 *               [--commit SHA] TRACE... */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tool_util.h"
#include "vramkit.h"

#define POLL_MS 10u
#define SETTLE_SLACK_MS 1000u /* the target: settled within decay + 1 s */
#define TIMEOUT_SLACK_MS 5000u /* the watch's end: decay + 5 s */

typedef struct decay_args {
    const char *backend;
    uint64_t decay_ms;
    int keep_live;
    const char *out;
    const char *commit;
    int first_trace;
} decay_args;

/* One trace's replay: the pool, its backend and the trace's streams. */
typedef struct decay_run {
    const vram_trace *t;
    vram_backend *backend;
    vram_pool *pool;
    vram_device *dev; /* the backend's GPU, or NULL */
    vram_stream *streams;
    size_t acquired; /* streams acquired from dev */
    void **ptrs;     /* per slot */
    uint64_t failed_allocs;
} decay_run;

typedef struct decay_result {
    uint64_t held_at_stop, live_at_stop, held_after, live_after;
    uint64_t settle_ms, watched_ms;
    uint64_t decay_released;  /* by the decay thread, after the stop */
    uint64_t left_for_trim;   /* what a trim still gave back after the watch */
    uint64_t failed_allocs;
    int timed_out; /* still changing when the watch ended */
    int met;
} decay_result;

static double mib(uint64_t b) { return (double)b / 1048576.0; }

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static uint64_t now_ms(void) { return tool_now_ns() / 1000000u; }

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000u, .tv_nsec = (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_decay [--backend NAME] [--decay-ms MS] [--keep-live] "
                    "[--out FILE.md] [--commit SHA] TRACE...\n");
    return 2;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        return -1;
    *out = v;
    return 0;
}

/* Options, then the traces; returns 0, or 2 after printing what is wrong. */
static int parse_args(int argc, char **argv, decay_args *a)
{
    *a = (decay_args){.backend = "sim", .decay_ms = 2000, .commit = "unknown",
                      .first_trace = argc};
    for (int i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        if (strcmp(argv[i], "--backend") == 0 && has_value) {
            a->backend = argv[++i];
        } else if (strcmp(argv[i], "--decay-ms") == 0 && has_value) {
            if (parse_u64(argv[++i], &a->decay_ms) || a->decay_ms == 0) {
                fprintf(stderr, "bench_decay: --decay-ms wants a whole number of milliseconds "
                                "above 0, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--keep-live") == 0) {
            a->keep_live = 1;
        } else if (strcmp(argv[i], "--out") == 0 && has_value) {
            a->out = argv[++i];
        } else if (strcmp(argv[i], "--commit") == 0 && has_value) {
            a->commit = argv[++i];
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "bench_decay: unknown option or missing value: %s\n", argv[i]);
            return usage();
        } else {
            a->first_trace = i;
            break;
        }
    }
    return a->first_trace < argc ? 0 : usage();
}

/* The trace's streams: on a GPU backend one CUDA stream of the device per
 * stream of the trace, elsewhere the trace's own handles. */
static int open_streams(decay_run *r)
{
    r->streams = tool_calloc(r->t->n_streams ? r->t->n_streams : 1, sizeof *r->streams);
    if (!r->streams)
        return VRAM_EHOSTMEM;
    r->dev = vram_backend_device(r->backend);
    for (size_t i = 0; i < r->t->n_streams; i++) {
        if (!r->dev) {
            r->streams[i] = (vram_stream)(uintptr_t)r->t->streams[i];
            continue;
        }
        int rc = vram_device_stream_acquire(r->dev, VRAM_PRIORITY_NORMAL, &r->streams[i]);
        if (rc)
            return rc;
        r->acquired++;
    }
    return 0;
}

static int open_run(decay_run *r, const decay_args *a)
{
    vram_backend_opts bo;
    vram_backend_opts_init(&bo); /* a malformed variable keeps its default */
    int rc = vram_backend_create(a->backend, &bo, &r->backend);
    if (rc)
        return rc;
    vram_pool_opts po;
    vram_pool_opts_init(&po);
    po.name = "decay";
    po.backend = r->backend;
    po.policy = VRAM_POLICY_VMM;
    po.decay_ms = a->decay_ms;
    po.retain_min = 0;
    po.configured_listeners = 0;
    rc = vram_pool_create(&po, &r->pool);
    if (rc)
        return rc;
    r->ptrs = tool_calloc(r->t->n_slots ? r->t->n_slots : 1, sizeof *r->ptrs);
    if (!r->ptrs)
        return VRAM_EHOSTMEM;
    return open_streams(r);
}

static void free_live(decay_run *r)
{
    for (size_t i = 0; r->ptrs && i < r->t->n_slots; i++) {
        if (r->ptrs[i])
            vram_pool_free(r->pool, r->ptrs[i], NULL);
        r->ptrs[i] = NULL;
    }
}

/* Frees what is left, then the pool, the streams and the backend, in that
 * order (a stream must outlive the frees made on it). Keeps the first
 * error's message. */
static int close_run(decay_run *r, int rc)
{
    tool_saved_error err;
    tool_error_save(&err);
    if (r->pool) {
        free_live(r);
        int drc = vram_pool_destroy(r->pool);
        if (!rc && drc) {
            rc = drc;
            tool_error_save(&err);
        }
    }
    for (size_t i = 0; i < r->acquired; i++)
        vram_device_stream_release(r->dev, r->streams[i]);
    vram_backend_destroy(r->backend);
    free(r->streams);
    free(r->ptrs);
    return tool_error_restore(&err, rc);
}

/* Every event in order; refused requests are counted and their frees
 * skipped. Stops on errors that are not a full device or a budget. */
static int replay_events(decay_run *r)
{
    for (size_t i = 0; i < r->t->n_events; i++) {
        const vram_trace_event *e = &r->t->events[i];
        vram_stream s = r->streams[e->stream_index];
        if (e->action == VRAM_TRACE_ALLOC) {
            int rc = vram_pool_alloc(r->pool, e->size, VRAM_OWNER_DEFAULT, VRAM_KIND_OTHER, s,
                                     &r->ptrs[e->slot]);
            if (rc == VRAM_EINVAL || rc == VRAM_EHOSTMEM)
                return rc;
            if (rc && !r->failed_allocs++)
                fprintf(stderr, "bench_decay: %s: line %u, %llu bytes refused: %s\n",
                        r->t->name, e->line, (unsigned long long)e->size, vram_last_error());
        } else if (e->action == VRAM_TRACE_FREE && r->ptrs[e->slot]) {
            vram_pool_free(r->pool, r->ptrs[e->slot], s);
            r->ptrs[e->slot] = NULL;
        }
    }
    return 0;
}

/* Reads the counters every POLL_MS from the stop until the pool settles or
 * the watch times out (see the top comment). */
static int watch_decay(decay_run *r, uint64_t decay_ms, decay_result *out)
{
    vram_pool_stats st0, st;
    int rc = vram_pool_stats_counters(r->pool, &st0);
    if (rc)
        return rc;
    uint64_t stop = now_ms(), last_change = stop, reserved = st0.reserved_bytes;
    uint64_t released = st0.released_bytes_total;
    st = st0;
    for (;;) {
        uint64_t now = now_ms();
        if (st.reserved_bytes <= st.allocated_bytes ||
            now - last_change >= decay_ms + SETTLE_SLACK_MS)
            break;
        if (now - stop >= decay_ms + TIMEOUT_SLACK_MS) {
            out->timed_out = 1;
            break;
        }
        sleep_ms(POLL_MS);
        rc = vram_pool_stats_counters(r->pool, &st);
        if (rc)
            return rc;
        if (st.reserved_bytes != reserved || st.released_bytes_total != released) {
            last_change = now_ms();
            reserved = st.reserved_bytes;
            released = st.released_bytes_total;
        }
    }
    out->held_at_stop = st0.reserved_bytes;
    out->live_at_stop = st0.live_bytes;
    out->held_after = st.reserved_bytes;
    out->live_after = st.live_bytes;
    out->settle_ms = last_change - stop;
    out->watched_ms = now_ms() - stop;
    out->decay_released = st.decay_released_bytes_total - st0.decay_released_bytes_total;
    return 0;
}

static int measure_trace(const vram_trace *t, const decay_args *a, decay_result *out)
{
    memset(out, 0, sizeof *out);
    decay_run r = {.t = t};
    int rc = open_run(&r, a);
    if (!rc)
        rc = replay_events(&r);
    if (!rc && !a->keep_live)
        free_live(&r);
    if (!rc)
        rc = watch_decay(&r, a->decay_ms, out);
    if (!rc)
        rc = vram_pool_trim(r.pool, &out->left_for_trim);
    out->failed_allocs = r.failed_allocs;
    out->met = !rc && !out->timed_out && out->settle_ms <= a->decay_ms + SETTLE_SLACK_MS &&
               out->left_for_trim == 0;
    return close_run(&r, rc);
}

static void print_header(FILE *f, int markdown)
{
    if (markdown) {
        fprintf(f, "| trace | decay ms | held at stop MiB | live MiB | held after MiB | "
                   "ms until settled | within decay+1 s | decay released MiB | "
                   "left for trim MiB |\n");
        fprintf(f, "|---|---:|---:|---:|---:|---:|---|---:|---:|\n");
        return;
    }
    fprintf(f, "%-30s %8s %12s %9s %12s %10s %14s %13s %10s\n", "trace", "decay ms",
            "held@stop MiB", "live MiB", "held after", "settle ms", "in decay+1 s",
            "decay rel MiB", "trim MiB");
}

static void print_row(FILE *f, int markdown, const char *trace, const decay_args *a,
                      const decay_result *d)
{
    const char *fmt = markdown
        ? "| %s | %llu | %.1f | %.1f | %.1f | %s | %s | %.1f | %.1f |\n"
        : "%-30s %8llu %12.1f %9.1f %12.1f %10s %14s %13.1f %10.1f\n";
    char settle[32]; /* "> N" when it was still changing at the watch's end */
    snprintf(settle, sizeof settle, "%s%llu", d->timed_out ? "> " : "",
             (unsigned long long)(d->timed_out ? d->watched_ms : d->settle_ms));
    fprintf(f, fmt, base_name(trace), (unsigned long long)a->decay_ms, mib(d->held_at_stop),
            mib(d->live_after), mib(d->held_after), settle, d->met ? "yes" : "no",
            mib(d->decay_released), mib(d->left_for_trim));
}

static void print_md_intro(FILE *md, int argc, char **argv, const decay_args *a)
{
    char machine[400], date[64];
    tool_machine(machine, sizeof machine);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(md, "# Decay: held memory after the load stops\n\n");
    fprintf(md, "- date: %s\n- machine: %s (backend %s)\n- commit: %s\n- command: `bench_decay",
            date, machine, a->backend, a->commit);
    for (int i = 1; i < argc; i++)
        fprintf(md, " %s", argv[i]);
    fprintf(md, "`\n");
    fprintf(md, "- target: after the load stops, held memory falls to live within the decay "
                "time plus one second\n");
    fprintf(md, "- each trace replayed once through a fresh vmm pool (decay %llu ms, retain_min "
                "0), then %s; counters read every %u ms from that moment (the time a change "
                "is seen, up to that much after it happened); settled: the last change of "
                "reserved bytes or bytes given back, the watch ending after decay + 1 s "
                "without a change (\"> N\": still changing at decay + 5 s); live is what "
                "remains live; decay released counts from the stop; met when settled within "
                "decay + 1 s and a trim afterwards gave back nothing more (left for trim 0)\n\n",
            (unsigned long long)a->decay_ms,
            a->keep_live ? "the blocks live at the end kept" : "every block still live freed",
            POLL_MS);
    print_header(md, 1);
}

int main(int argc, char **argv)
{
    decay_args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st;
    FILE *md = NULL;
    if (a.out && !(md = fopen(a.out, "w"))) {
        fprintf(stderr, "bench_decay: cannot write %s: %s\n", a.out, strerror(errno));
        return 1;
    }
    if (md)
        print_md_intro(md, argc, argv, &a);
    print_header(stdout, 0);
    int status = 0, met = 0, measured = 0;
    for (int i = a.first_trace; i < argc; i++) {
        vram_trace *t;
        decay_result d;
        if (vram_trace_read(argv[i], &t)) {
            fprintf(stderr, "bench_decay: %s\n", vram_last_error());
            status = 1;
            continue;
        }
        int rc = measure_trace(t, &a, &d);
        vram_trace_free(t);
        if (rc) {
            fprintf(stderr, "bench_decay: %s: %s\n", argv[i], vram_last_error());
            status = 1;
            continue;
        }
        if (d.failed_allocs)
            fprintf(stderr, "bench_decay: %s: %llu request(s) refused; the table counts what "
                            "was allocated\n", argv[i], (unsigned long long)d.failed_allocs);
        print_row(stdout, 0, argv[i], &a, &d);
        if (md)
            print_row(md, 1, argv[i], &a, &d);
        fflush(stdout);
        measured++;
        met += d.met;
    }
    printf("target met on %d of %d traces\n", met, measured);
    if (md) {
        fprintf(md, "\nTarget met on %d of %d traces.\n", met, measured);
        if (fclose(md)) {
            fprintf(stderr, "bench_decay: writing %s failed: %s\n", a.out, strerror(errno));
            status = 1;
        }
    }
    return status;
}
