/* src/core/base/json_out.h - a small JSON writer into a vram_buffer, so that the
 * core library needs no JSON library: objects and arrays opened and closed
 * in order, members written as they come, strings escaped, integers exact
 * (64-bit, never through a double), doubles as cJSON prints them (integers
 * without a fraction, else the shortest of %.15g and %.17g that reads back
 * the same; NaN and infinities as null). The first failure (host memory)
 * is kept and everything after it is skipped.
 *
 *   vram_buffer out = {0};
 *   vram__json j;
 *   vram__json_begin(&j, &out);
 *   vram__json_object(&j, NULL);
 *   vram__json_str(&j, "pool", name);
 *   vram__json_u64(&j, "live_bytes", live);
 *   vram__json_end(&j);
 *   int rc = vram__json_done(&j);   (0 or VRAM_EHOSTMEM; out holds the text)
 *
 * A key is given for members of an object and NULL for array elements and
 * the top-level value. */
#ifndef VRAM_BASE_JSON_OUT_H
#define VRAM_BASE_JSON_OUT_H

#include <stdint.h>

#include "vramkit/types.h"

#define VRAM__JSON_DEPTH 32

typedef struct vram__json {
    vram_buffer *out;
    int rc;
    unsigned depth;
    unsigned char has_member[VRAM__JSON_DEPTH]; /* per open level: write a comma first */
    char closer[VRAM__JSON_DEPTH];              /* per open level: '}' or ']' */
} vram__json;

void vram__json_begin(vram__json *j, vram_buffer *out);
void vram__json_object(vram__json *j, const char *key);
void vram__json_array(vram__json *j, const char *key);
/* Close the innermost object or array. */
void vram__json_end(vram__json *j);
/* NULL writes null. */
void vram__json_str(vram__json *j, const char *key, const char *v);
void vram__json_u64(vram__json *j, const char *key, uint64_t v);
void vram__json_i64(vram__json *j, const char *key, int64_t v);
void vram__json_f64(vram__json *j, const char *key, double v);
void vram__json_bool(vram__json *j, const char *key, int v);
void vram__json_null(vram__json *j, const char *key);
/* An address or handle as a string, "0x1a2b". */
void vram__json_hex(vram__json *j, const char *key, uint64_t v);
/* 0, or the first failure (every level must be closed). */
int vram__json_done(vram__json *j);

/* Hand the text in `b` (and a newline) to `write`, then free `b`. Returns
 * `rc` if it is an error already, else the writer's result. */
int vram__json_flush(vram_buffer *b, int rc, vram_write_fn write, void *ctx);

#endif
