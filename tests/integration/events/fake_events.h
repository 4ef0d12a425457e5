/* tests/integration/events/fake_events.h - the fake backend of the pool-event
 * tests (test_pool_events*.c, test_pool_stream_waits.c): a custom backend
 * with real events (VRAM_BACKEND_EVENTS) standing in for a GPU whose events
 * the test controls.
 *
 * event_record hands out a handle (or fails on demand), event_query answers
 * pending / complete / an error per the test's switch (or each event's own
 * completion flag, set by the test in stream order), event_wait completes
 * and counts, event_release counts; at the end every recorded event must
 * have been released exactly once and never used after. With fk_ops_init's
 * stream_waits the table also has stream_wait_event (off by default, so the
 * pool never sees it): it checks that the event is known, not released and
 * of another stream, counts, logs G (g when it fails on demand) and keeps,
 * per waiting stream W and recording stream R, the latest record time W
 * waited for (waited_upto), so that a test can tell which of R's frees W
 * may use. Memory comes from a fake address space with a ledger of its own:
 *  - vmm policy: reserve / release / map / unmap; the ledger refuses double
 *    maps, partial unmaps (a mapping is given back only whole), maps outside
 *    a reservation and releases of ranges that still have mappings;
 *  - segments policy: segment_alloc / segment_free of exact segments.
 * Both refuse (VRAM_ENOMEM) past a capacity, so memory pressure can be made.
 *
 * The single-stream rule, as the fake checks it on every operation the test
 * makes (fk_op_begin / fk_op_end around it, fk_free_begin / fk_free_end
 * around a free): no event before the join but settles, the join's on the
 * first stream, waited for once and released; alone, an event only on the
 * lone stream and only with a free since the previous record (or after a
 * wait that failed); and every unmap / segment_free made alone must give
 * back memory whose latest free preceded an event reported complete
 * (fk_give_back checks it, range by range, at every give-back in the
 * ledger; memory no freed block used, as in the unmap that rolls back a
 * mapping that failed half way, is exempt). A violation is kept in the
 * fake (ledger_errors, bad_event_use, the first one's sentence) for the
 * test to report: nothing here depends on a test framework. */
#ifndef VRAM_TESTS_FAKE_EVENTS_H
#define VRAM_TESTS_FAKE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "vramkit.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GRAN (2 * MiB)
#define FK_STREAMS 64 /* stream handles 0..63 (0: the default stream) */

typedef struct fk_range {
    uint64_t addr, size;
    uint64_t t_take; /* the fake's clock when the mapping / segment was made */
    uint64_t t_free; /* the latest free (alone) of a block it backed; 0: none */
} fk_range;

typedef struct fk_rvec {
    fk_range *v;
    size_t n, cap;
} fk_rvec;

typedef struct fk_event {
    unsigned stream;     /* index of the stream it was recorded on */
    uint64_t t_record;   /* the fake's clock at the record */
    int complete;        /* the work before it has finished */
    int reported;        /* a query said 1 or a wait returned 0 */
    int released;        /* event_release calls */
    int join;            /* recorded for a second stream's joining */
    int settle;          /* recorded on the lone stream before a give-back */
    int waited;          /* event_wait calls */
    int stream_waited;   /* stream_wait_event calls that succeeded on it */
} fk_event;

enum { Q_PENDING, Q_COMPLETE, Q_ERROR, Q_FLAG };

typedef struct fake {
    uint64_t capacity, held, peak_held;
    fk_rvec res;  /* reservations (vmm) */
    fk_rvec mem;  /* mappings (vmm) or segments, sorted by address */
    uint64_t next_res;
    /* calls */
    unsigned n_reserve, n_release, n_map, n_unmap, n_seg_alloc, n_seg_free, n_enomem;
    /* ledger violations: the first is kept */
    unsigned ledger_errors;
    char ledger_msg[384];
    /* events */
    fk_event *ev;
    size_t n_ev, cap_ev;
    int query_mode;
    int record_fail;     /* > 0: that many next records fail */
    uint64_t wait_fail;  /* bit i set: waits for events of stream i fail */
    unsigned n_record, n_record_failed, n_query, n_wait, n_ev_release;
    unsigned records_on[FK_STREAMS];
    unsigned bad_event_use; /* query/wait/release of a released or unknown event */
    char bad_msg[256];
    /* stream_wait_event (a table fk_ops_init gave it): stream W waits on the
     * device for an event recorded on stream R. waited_upto[W][R]: the
     * latest record time of such an event W waited for, so W's work from
     * then on runs after R's work before that record. */
    int stream_wait_fail; /* > 0: that many next stream waits fail */
    unsigned n_stream_wait, n_stream_wait_failed;
    unsigned stream_waits_on[FK_STREAMS]; /* successful ones, by waiting stream */
    uint64_t waited_upto[FK_STREAMS][FK_STREAMS];
    /* Clock: ticks at every record and at every free the test makes, so
     * that "an event recorded after a free" can be decided. */
    uint64_t clock;
    /* Per stream: the latest record time of an event reported complete. */
    uint64_t reported_upto[FK_STREAMS];
    /* Per stream: frees since its last successful record (the pool records
     * at most one event per stream per epoch, and only for frees). */
    unsigned frees_since_record[FK_STREAMS];
    unsigned empty_records; /* records on a stream with no free since the last */
    /* The single-stream rule, as the test expects the pool to follow it:
     * the streams whose operations reached the pool so far (bit i), the
     * first of them, and whether a second one has joined. fk_op_begin and
     * fk_op_end bracket every operation that reaches the pool's bookkeeping
     * while it has not; the first record of a newcomer's operation then is
     * the join's: on the first stream, waited for and released at once. */
    uint64_t used;
    unsigned first;
    int shared;
    int join_expected, join_seen, join_waited; /* the current operation's */
    int join_wait_fail;  /* > 0: that many next waits for a join event fail */
    int join_record_fail; /* > 0: that many next records of a join event fail */
    unsigned n_joins, n_join_failed, n_join_records;
    uint64_t t_join;     /* record time of the join event that was waited for */
    /* Giving memory back while a single stream uses the pool: what it freed
     * was free at once, but work queued on it may still use it, so before an
     * unmap or a segment free of memory that backed a block freed at t, an
     * event recorded on the lone stream after t must have been reported
     * complete (a query that said so, or a wait): the pool records such
     * events (marks) when it maps, and waits for one (a settle) only when
     * none has completed. Memory no freed block ever used (the rollback of
     * a mapping that failed half way) may go back at once. An event
     * recorded while alone must be on the lone stream, with a free since
     * the previous record (or after a wait that failed). solo_dirty: the
     * lone stream freed something (at t_solo_free, the latest) that no
     * event reported complete covers: none recorded after it (a settle or
     * mark, or the join's) was waited for or found complete. */
    int solo_dirty;
    uint64_t t_solo_free;
    int solo_wait_failed;  /* the latest wait for a lone stream's event failed */
    int solo_freed;        /* a free alone (maybe in progress) since the latest record */
    int settle_wait_fail;  /* > 0: that many next waits for a settle event fail */
    unsigned n_settle_records, n_settle_record_failed, n_settles, n_settle_wait_failed;
    unsigned n_solo_give_backs;  /* unmaps / segment frees while alone */
    unsigned n_fresh_give_backs; /* of those, dirty but of memory taken after the free */
    int settle_idle;             /* the latest settle has given nothing back yet */
    unsigned n_idle_settles;     /* settles followed by no give-back before the next free */
    /* The backend calls, one letter each, from where a test last cleared it:
     * V reserve, L release, M map, m map refused, U unmap, A segment_alloc,
     * a segment_alloc refused, F segment_free, R record, r record failed,
     * Q query, W wait, w wait failed, X event release, G stream_wait_event,
     * g stream_wait_event failed. */
    char log[512];
    size_t n_log;
} fake;

/* A free's undo record (fk_free_begin, fk_free_end). */
typedef struct fk_dirt {
    int set, dirty, freed;
    uint64_t t;
} fk_dirt;

/* The fake's table for `policy` (vmm with segments too when `huge`:
 * requests of huge_size bytes or more get a segment of their own, see
 * src/core/mem/huge.c), with stream_wait_event when `stream_waits`. */
void fk_ops_init(vram_backend_ops *ops, vram_policy policy, int huge, int stream_waits);

void fk_log_clear(fake *f);
/* Index of the first range of r ending after addr. */
size_t rvec_lower(const fk_rvec *r, uint64_t addr);
/* The fake's index of a stream handle (FK_STREAMS - 1 for larger ones). */
unsigned stream_index(vram_stream s);
/* [addr, addr+size) lies entirely in backend memory (mappings may be
 * several adjacent ones; a segment must hold it alone). */
int fk_covered(const fake *f, uint64_t addr, uint64_t size, int segments);
/* Complete event e and, as work on a stream runs in order, every earlier
 * event of its stream. */
void fk_complete(fake *f, fk_event *e);

/* The single-stream rule around each operation of the test: */
/* a free at time t of [addr, addr+size) on the stream fk_op_begin opened
 * is about to run (returns what fk_free_end needs to undo it); */
fk_dirt fk_free_begin(fake *f, uint64_t t, uint64_t addr, uint64_t size);
/* it returned rc; */
void fk_free_end(fake *f, vram_stream s, int rc, fk_dirt d);
/* an operation of stream s that reaches the pool's bookkeeping is about to
 * run; */
void fk_op_begin(fake *f, vram_stream s);
/* it returned rc: NULL if that fits the rule, else what went wrong. */
const char *fk_op_end(fake *f, vram_stream s, int rc);

#endif
