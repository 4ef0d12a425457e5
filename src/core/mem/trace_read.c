/* src/core/mem/trace_read.c - reads allocation traces in RMM's logging_resource_adaptor
 * CSV format (see vramkit/trace.h), plain or gzip, into an array of events.
 *
 * Parsing is hand-written and bounded by the buffer's length (the data need
 * not be NUL-terminated and may hold any bytes). Besides checking every field,
 * the parser resolves each free to the allocation it ends through a pointer ->
 * event map, gives every allocation a slot (freed slots are reused last in,
 * first out, so a new slot is created only when every existing one is live:
 * n_slots is the most blocks live at once), and tracks live requested bytes
 * for peak_live_bytes. */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/u64map.h"
#include "vramkit/trace.h"

/* Refuse files larger than this once decompressed (about 40 million rows):
 * a guard against gzip bombs and mistaken paths, far above any real trace. */
#ifndef TRACE_MAX_BYTES
#define TRACE_MAX_BYTES ((size_t)2 << 30)
#endif

#define TRACE_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define TRACE_NFIELDS 6

const char *vram_trace_action_name(vram_trace_action action)
{
    switch (action) {
    case VRAM_TRACE_ALLOC: return "allocate";
    case VRAM_TRACE_FREE: return "free";
    case VRAM_TRACE_ALLOC_FAIL: return "allocate failure";
    }
    return "unknown";
}

void vram_trace_free(vram_trace *trace)
{
    if (!trace)
        return;
    free(trace->name);
    free(trace->events);
    free(trace->streams);
    free(trace);
}

/* ---- field helpers --------------------------------------------------- */

typedef struct field {
    const char *s;
    size_t n;
} field;

/* Quote a field for an error message: at most 40 bytes, non-printable bytes
 * as \xHH, "..." when cut. */
static const char *show(char *buf, size_t cap, field f)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < f.n; i++) {
        unsigned char c = (unsigned char)f.s[i];
        if (o + 8 >= cap || i >= 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

#define SHOW_CAP 192

enum { NUM_OK = 0, NUM_BAD = 1, NUM_BIG = 2 };

/* Unsigned decimal, digits only, at most `max`. */
static int parse_dec(field f, uint64_t max, uint64_t *out)
{
    if (f.n == 0)
        return NUM_BAD;
    uint64_t v = 0;
    int big = 0;
    for (size_t i = 0; i < f.n; i++) {
        unsigned d = (unsigned)(unsigned char)f.s[i] - '0';
        if (d > 9)
            return NUM_BAD;
        if (v > (max - d) / 10)
            big = 1; /* keep scanning: "99999999999x" is not a number */
        else
            v = v * 10 + d;
    }
    if (big)
        return NUM_BIG;
    *out = v;
    return NUM_OK;
}

static inline unsigned hex_digit(unsigned char ch)
{
    unsigned c = ch;
    if (c - '0' < 10u)
        return c - '0';
    c |= 0x20; /* lower case */
    if (c - 'a' < 6u)
        return c - 'a' + 10;
    return 16;
}

/* Hex with or without 0x/0X, fitting 64 bits (leading zeros allowed). */
static int parse_hex(field f, uint64_t *out)
{
    const char *s = f.s;
    size_t n = f.n;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        n -= 2;
    }
    if (n == 0)
        return NUM_BAD;
    uint64_t v = 0;
    int big = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = hex_digit((unsigned char)s[i]);
        if (d > 15)
            return NUM_BAD;
        if (v >> 60)
            big = 1;
        v = v << 4 | d;
    }
    if (big)
        return NUM_BIG;
    *out = v;
    return NUM_OK;
}

static int two_digits(const char *s, unsigned *out)
{
    unsigned a = (unsigned)(unsigned char)s[0] - '0';
    unsigned b = (unsigned)(unsigned char)s[1] - '0';
    if (a > 9 || b > 9)
        return 0;
    *out = a * 10 + b;
    return 1;
}

/* HH:MM:SS[.f{1,6}] -> microseconds since midnight. 0 when malformed, -1
 * when well-formed but out of range. */
static int parse_time(field f, uint64_t *out)
{
    unsigned h, m, s;
    if (f.n < 8 || f.s[2] != ':' || f.s[5] != ':' || !two_digits(f.s, &h) ||
        !two_digits(f.s + 3, &m) || !two_digits(f.s + 6, &s))
        return 0;
    uint64_t us = 0;
    if (f.n > 8) {
        size_t nf = f.n - 9;
        if (f.s[8] != '.' || nf < 1 || nf > 6)
            return 0;
        for (size_t i = 0; i < 6; i++) {
            unsigned d = 0;
            if (i < nf) {
                d = (unsigned)(unsigned char)f.s[9 + i] - '0';
                if (d > 9)
                    return 0;
            }
            us = us * 10 + d;
        }
    }
    if (h > 23 || m > 59 || s > 59)
        return -1;
    *out = ((uint64_t)h * 3600 + m * 60 + s) * 1000000u + us;
    return 1;
}

static int field_is(field f, const char *lit, size_t n)
{
    return f.n == n && memcmp(f.s, lit, n) == 0;
}

/* ---- the parser ------------------------------------------------------ */

typedef struct parser {
    const char *name;
    uint32_t line;
    vram_trace *t;
    size_t cap_events;
    size_t cap_streams;
    vram__u64map live;      /* pointer -> index of its allocate event */
    vram__u64map stream_ix; /* non-zero stream -> index in t->streams */
    uint32_t zero_stream;   /* index of stream 0, UINT32_MAX until seen */
    uint32_t *free_slots;   /* stack of free slots */
    size_t n_free_slots;
    size_t cap_free_slots;
    uint64_t live_bytes;
} parser;

static int stream_index(parser *p, uint64_t stream, uint32_t *out)
{
    uint64_t ix;
    if (stream == 0) {
        if (p->zero_stream != UINT32_MAX) {
            *out = p->zero_stream;
            return 0;
        }
    } else if (vram__u64map_get(&p->stream_ix, stream, &ix)) {
        *out = (uint32_t)ix;
        return 0;
    }
    vram_trace *t = p->t;
    uint64_t *streams = vram__grow(t->streams, &p->cap_streams, t->n_streams, sizeof *streams, 8);
    if (!streams)
        return VRAM_EHOSTMEM;
    t->streams = streams;
    uint32_t i = (uint32_t)t->n_streams;
    if (stream == 0) {
        p->zero_stream = i;
    } else {
        int rc = vram__u64map_put(&p->stream_ix, stream, i);
        if (rc)
            return rc;
    }
    t->streams[t->n_streams++] = stream;
    *out = i;
    return 0;
}

static int take_slot(parser *p, uint32_t *out)
{
    if (p->n_free_slots) {
        *out = p->free_slots[--p->n_free_slots];
        return 0;
    }
    if (p->t->n_slots >= UINT32_MAX)
        return vram__fail(VRAM_EPARSE, "%s:%u: more than %u blocks live at once", p->name,
                          p->line, UINT32_MAX - 1);
    *out = (uint32_t)p->t->n_slots++;
    return 0;
}

static int give_slot(parser *p, uint32_t slot)
{
    uint32_t *slots =
        vram__grow(p->free_slots, &p->cap_free_slots, p->n_free_slots, sizeof *slots, 64);
    if (!slots)
        return VRAM_EHOSTMEM;
    p->free_slots = slots;
    p->free_slots[p->n_free_slots++] = slot;
    return 0;
}

static int check_header(parser *p, field line)
{
    static const size_t n = sizeof TRACE_HEADER - 1;
    if (line.n >= n && memcmp(line.s, TRACE_HEADER, n) == 0 && (line.n == n || line.s[n] == ','))
        return 0;
    char b[SHOW_CAP];
    if (line.n == 0)
        return vram__fail(VRAM_EPARSE, "%s:%u: header must start with " TRACE_HEADER
                          " (got an empty line)", p->name, p->line);
    return vram__fail(VRAM_EPARSE, "%s:%u: header must start with " TRACE_HEADER " (got \"%s\")",
                      p->name, p->line, show(b, sizeof b, line));
}

/* One data row (non-empty, without its line end). */
static int parse_row(parser *p, field line)
{
    field fl[TRACE_NFIELDS];
    const char *s = line.s, *end = line.s + line.n;
    size_t nf = 0;
    while (nf < TRACE_NFIELDS) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        const char *fe = c ? c : end;
        fl[nf].s = s;
        fl[nf].n = (size_t)(fe - s);
        nf++;
        if (!c)
            break;
        s = c + 1;
    }
    char b[SHOW_CAP];
    if (nf < TRACE_NFIELDS)
        return vram__fail(VRAM_EPARSE,
                          "%s:%u: expected 6 fields (" TRACE_HEADER "), got %zu in \"%s\"",
                          p->name, p->line, nf, show(b, sizeof b, line));

    vram_trace_event e;
    memset(&e, 0, sizeof e);
    e.line = p->line;
    uint64_t v;
    int rc = parse_dec(fl[0], UINT32_MAX, &v);
    if (rc)
        return vram__fail(VRAM_EPARSE, "%s:%u: thread \"%s\" %s", p->name, p->line,
                          show(b, sizeof b, fl[0]),
                          rc == NUM_BIG ? "is too large (more than 4294967295)"
                                        : "is not a number");
    e.thread = (uint32_t)v;

    rc = parse_time(fl[1], &e.time_us);
    if (rc != 1)
        return vram__fail(VRAM_EPARSE, "%s:%u: time \"%s\" %s", p->name, p->line,
                          show(b, sizeof b, fl[1]),
                          rc ? "is out of range (hours 00-23, minutes and seconds 00-59)"
                             : "is not HH:MM:SS.ffffff");

    if (field_is(fl[2], "allocate", 8))
        e.action = VRAM_TRACE_ALLOC;
    else if (field_is(fl[2], "free", 4))
        e.action = VRAM_TRACE_FREE;
    else if (field_is(fl[2], "allocate failure", 16))
        e.action = VRAM_TRACE_ALLOC_FAIL;
    else
        return vram__fail(VRAM_EPARSE,
                          "%s:%u: action \"%s\" is not allocate, free or allocate failure",
                          p->name, p->line, show(b, sizeof b, fl[2]));

    /* A failed allocation has no pointer; tolerate it being left empty. */
    if (e.action == VRAM_TRACE_ALLOC_FAIL && fl[3].n == 0)
        rc = 0;
    else
        rc = parse_hex(fl[3], &e.ptr);
    if (rc)
        return vram__fail(VRAM_EPARSE, "%s:%u: pointer \"%s\" %s", p->name, p->line,
                          show(b, sizeof b, fl[3]),
                          rc == NUM_BIG ? "does not fit 64 bits" : "is not a hex number");
    if (e.ptr == 0 && e.action != VRAM_TRACE_ALLOC_FAIL)
        return vram__fail(VRAM_EPARSE, "%s:%u: %s of a null pointer (\"%s\")", p->name, p->line,
                          vram_trace_action_name(e.action), show(b, sizeof b, fl[3]));

    rc = parse_dec(fl[4], UINT64_MAX, &e.size);
    if (rc)
        return vram__fail(VRAM_EPARSE, "%s:%u: size \"%s\" %s", p->name, p->line,
                          show(b, sizeof b, fl[4]),
                          rc == NUM_BIG ? "does not fit 64 bits" : "is not a number");

    uint64_t stream;
    rc = parse_hex(fl[5], &stream);
    if (rc)
        return vram__fail(VRAM_EPARSE, "%s:%u: stream \"%s\" %s", p->name, p->line,
                          show(b, sizeof b, fl[5]),
                          rc == NUM_BIG ? "does not fit 64 bits" : "is not a hex number");
    rc = stream_index(p, stream, &e.stream_index);
    if (rc)
        return rc;

    vram_trace *t = p->t;
    uint64_t prev;
    switch (e.action) {
    case VRAM_TRACE_ALLOC:
        if (e.size == 0)
            return vram__fail(VRAM_EPARSE, "%s:%u: allocate of 0x%llx with size 0", p->name,
                              p->line, (unsigned long long)e.ptr);
        if (vram__u64map_get(&p->live, e.ptr, &prev))
            return vram__fail(VRAM_EPARSE,
                              "%s:%u: allocate of 0x%llx, which is already allocated "
                              "(line %u) and not freed",
                              p->name, p->line, (unsigned long long)e.ptr,
                              t->events[prev].line);
        if (e.size > UINT64_MAX - p->live_bytes)
            return vram__fail(VRAM_EPARSE, "%s:%u: live bytes overflow 64 bits (size %llu)",
                              p->name, p->line, (unsigned long long)e.size);
        rc = take_slot(p, &e.slot);
        if (rc)
            return rc;
        rc = vram__u64map_put(&p->live, e.ptr, t->n_events);
        if (rc) {
            give_slot(p, e.slot); /* cannot fail: the slot came from the stack or is new */
            return rc;
        }
        p->live_bytes += e.size;
        if (p->live_bytes > t->peak_live_bytes)
            t->peak_live_bytes = p->live_bytes;
        t->n_allocs++;
        break;
    case VRAM_TRACE_FREE:
        if (!vram__u64map_get(&p->live, e.ptr, &prev))
            return vram__fail(VRAM_EPARSE, "%s:%u: free of 0x%llx, which is not allocated",
                              p->name, p->line, (unsigned long long)e.ptr);
        if (t->events[prev].size != e.size)
            return vram__fail(VRAM_EPARSE,
                              "%s:%u: free of 0x%llx with size %llu, but it was allocated "
                              "with size %llu (line %u)",
                              p->name, p->line, (unsigned long long)e.ptr,
                              (unsigned long long)e.size,
                              (unsigned long long)t->events[prev].size, t->events[prev].line);
        e.slot = t->events[prev].slot;
        rc = give_slot(p, e.slot);
        if (rc)
            return rc;
        vram__u64map_del(&p->live, e.ptr, NULL);
        p->live_bytes -= e.size;
        t->n_frees++;
        break;
    default:
        e.slot = UINT32_MAX;
        t->n_failures++;
        break;
    }
    t->events[t->n_events++] = e;
    return 0;
}

static void parser_destroy(parser *p)
{
    vram__u64map_destroy(&p->live);
    vram__u64map_destroy(&p->stream_ix);
    free(p->free_slots);
}

static int parse_all(parser *p, const char *data, size_t len)
{
    const char *s = data, *end = data + len;
    /* A UTF-8 byte order mark before the header is tolerated. */
    if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3;

    /* Count lines: an upper bound on events, so the array is sized once. */
    size_t lines = 1;
    for (const char *q = s; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    p->cap_events = lines;
    p->t->events = vram__realloc_array(NULL, lines, sizeof *p->t->events);
    if (!p->t->events)
        return VRAM_EHOSTMEM;
    int rc = vram__u64map_init(&p->live, 1024);
    if (!rc)
        rc = vram__u64map_init(&p->stream_ix, 8);
    if (rc)
        return rc;

    p->line = 0;
    int have_header = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        field line = {s, (size_t)(le - s)};
        if (line.n && line.s[line.n - 1] == '\r')
            line.n--;
        s = nl ? nl + 1 : end;
        if (p->line == UINT32_MAX)
            return vram__fail(VRAM_EPARSE, "%s: more than %u lines", p->name, UINT32_MAX - 1);
        p->line++;
        if (!have_header) {
            rc = check_header(p, line);
            if (rc)
                return rc;
            have_header = 1;
            continue;
        }
        if (line.n == 0)
            continue;
        rc = parse_row(p, line);
        if (rc)
            return rc;
    }
    if (!have_header)
        return vram__fail(VRAM_EPARSE, "%s:1: empty, expected the header " TRACE_HEADER,
                          p->name);
    p->t->unfreed_blocks = p->live.count;
    return 0;
}

int vram_trace_parse(const char *data, size_t len, const char *name, vram_trace **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_trace_parse: out is NULL");
    *out = NULL;
    if (!data && len)
        return vram__fail(VRAM_EINVAL, "vram_trace_parse: data is NULL");
    static const char nothing[1] = "";
    if (!data)
        data = nothing;
    if (!name)
        name = "(trace)";

    parser p;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.zero_stream = UINT32_MAX;
    p.t = vram__calloc(1, sizeof *p.t);
    if (!p.t)
        return VRAM_EHOSTMEM;
    p.t->name = vram__strdup(name);
    int rc = p.t->name ? parse_all(&p, data, len) : VRAM_EHOSTMEM;
    parser_destroy(&p);
    if (rc) {
        vram_trace_free(p.t);
        return rc;
    }
    /* Give back the room of skipped lines; keep the larger array if that fails. */
    vram_trace *t = p.t;
    if (t->n_events < p.cap_events) {
        vram_trace_event *e = realloc(t->events, (t->n_events ? t->n_events : 1) * sizeof *e);
        if (e)
            t->events = e;
    }
    *out = t;
    return 0;
}

int vram_trace_read(const char *path, vram_trace **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_trace_read: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return vram__fail(VRAM_EINVAL, "vram_trace_read: no path");

    char *buf;
    size_t len;
    int rc = vram__read_gz_file(path, "trace ", TRACE_MAX_BYTES, &buf, &len);
    if (!rc)
        rc = vram_trace_parse(buf, len, path, out);
    free(buf);
    return rc;
}
