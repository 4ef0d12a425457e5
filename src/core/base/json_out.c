/* src/core/base/json_out.c - the JSON writer of json_out.h. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json_out.h"

static void put(vram__json *j, const char *s, size_t n)
{
    if (!j->rc)
        j->rc = vram_write_buffer(j->out, s, n);
}

static void put_str(vram__json *j, const char *s) { put(j, s, strlen(s)); }

static void put_quoted(vram__json *j, const char *s)
{
    put(j, "\"", 1);
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = NULL;
        char u[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (*p < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", *p);
                esc = u;
            }
        }
        if (esc) {
            put(j, run, (size_t)((const char *)p - run));
            put_str(j, esc);
            run = (const char *)p + 1;
        }
    }
    put_str(j, run);
    put(j, "\"", 1);
}

/* The comma and key before a value. */
static void member(vram__json *j, const char *key)
{
    if (j->depth) {
        if (j->has_member[j->depth - 1])
            put(j, ",", 1);
        j->has_member[j->depth - 1] = 1;
    }
    if (key) {
        put_quoted(j, key);
        put(j, ":", 1);
    }
}

static void open_level(vram__json *j, const char *key, char open, char close)
{
    member(j, key);
    put(j, &open, 1);
    if (j->depth >= VRAM__JSON_DEPTH) {
        if (!j->rc)
            j->rc = vram__fail(VRAM_EINVAL, "JSON nested deeper than %d levels", VRAM__JSON_DEPTH);
        return;
    }
    j->has_member[j->depth] = 0;
    j->closer[j->depth++] = close;
}

void vram__json_begin(vram__json *j, vram_buffer *out) { *j = (vram__json){.out = out}; }
void vram__json_object(vram__json *j, const char *key) { open_level(j, key, '{', '}'); }
void vram__json_array(vram__json *j, const char *key) { open_level(j, key, '[', ']'); }

void vram__json_end(vram__json *j)
{
    if (j->depth) {
        j->depth--;
        put(j, &j->closer[j->depth], 1);
    }
}

void vram__json_str(vram__json *j, const char *key, const char *v)
{
    member(j, key);
    if (v)
        put_quoted(j, v);
    else
        put_str(j, "null");
}

void vram__json_u64(vram__json *j, const char *key, uint64_t v)
{
    char b[24];
    member(j, key);
    snprintf(b, sizeof b, "%" PRIu64, v);
    put_str(j, b);
}

void vram__json_i64(vram__json *j, const char *key, int64_t v)
{
    char b[24];
    member(j, key);
    snprintf(b, sizeof b, "%" PRId64, v);
    put_str(j, b);
}

void vram__json_f64(vram__json *j, const char *key, double v)
{
    char b[32];
    member(j, key);
    if (!isfinite(v)) {
        put_str(j, "null");
        return;
    }
    if (v > INT_MIN && v < INT_MAX && v == (double)(int)v) {
        snprintf(b, sizeof b, "%d", (int)v);
    } else {
        snprintf(b, sizeof b, "%1.15g", v);
        if (strtod(b, NULL) != v)
            snprintf(b, sizeof b, "%1.17g", v);
    }
    put_str(j, b);
}

void vram__json_bool(vram__json *j, const char *key, int v)
{
    member(j, key);
    put_str(j, v ? "true" : "false");
}

void vram__json_null(vram__json *j, const char *key)
{
    member(j, key);
    put_str(j, "null");
}

void vram__json_hex(vram__json *j, const char *key, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "0x%" PRIx64, v);
    vram__json_str(j, key, b);
}

int vram__json_done(vram__json *j)
{
    if (!j->rc && j->depth)
        j->rc = vram__fail(VRAM_EINVAL, "JSON left %u level(s) open", j->depth);
    return j->rc;
}

int vram__json_flush(vram_buffer *b, int rc, vram_write_fn write, void *ctx)
{
    if (!rc)
        rc = write(ctx, b->data ? b->data : "", b->len);
    if (!rc)
        rc = write(ctx, "\n", 1);
    vram_buffer_free(b);
    return rc;
}
