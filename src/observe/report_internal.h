/* src/observe/report_internal.h - what the files of `vramkit report` share:
 * the input reader (lines of a plain or gzip file, or of a buffer), checked
 * access to JSON members with messages that name the input, the line and the
 * JSON path, a table of interned strings, and one reader per input type
 * (report_series*.c: sample series; report_docs.c: snapshots and OOM
 * reports). Not part of the public API. */
#ifndef VRAM_OBSERVE_REPORT_INTERNAL_H
#define VRAM_OBSERVE_REPORT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "base/internal.h"
#include "vramkit/report.h"

/* ---- input: the lines of a buffer (a file is read whole first, plain or
 * gzip, by the core's reader) ---- */

typedef struct vram__rsrc {
    const char *name;   /* in messages */
    const char *mem;    /* the buffer */
    size_t len, pos;
    uint32_t line;      /* number of the line last returned (1-based) */
} vram__rsrc;

/* Longest line read (a sample of a pool with many owners is long, but not
 * this long), and the largest input once decompressed. */
#define VRAM__REPORT_MAX_LINE (64u << 20)
#define VRAM__REPORT_MAX_INPUT ((uint64_t)16 << 30)

/* The next line without its end ("\n" or "\r\n"), *len bytes at *text (not
 * terminated). Returns 1 for a line, 0 at the end, or VRAM_EPARSE for a
 * line over the limit. */
int vram__rsrc_line(vram__rsrc *s, const char **text, size_t *len);
/* Back to the start (line 0). */
void vram__rsrc_rewind(vram__rsrc *s);
/* Everything, in a malloc'd buffer terminated by a 0 byte that *len does
 * not count. */
int vram__rsrc_all(vram__rsrc *s, char **out, size_t *len);

/* ---- checked JSON access ---- */

/* Where a value is: the input, its line (0 for a whole document) and the
 * JSON path below it ("blocks[3]"). */
typedef struct vram__rj {
    const char *name;
    uint32_t line;
    char path[160];
} vram__rj;

enum {
    VRAM__RJ_REQUIRED = 1, /* missing is an error */
    VRAM__RJ_NULLABLE = 2, /* null is accepted (reads as absent) */
    VRAM__RJ_BYTES = 4,    /* a number of bytes: an integer >= 0 */
    VRAM__RJ_NONNEG = 8,   /* a number >= 0 */
};

/* Append ".key" or "[i]" to the path; returns the length to restore. */
size_t vram__rj_key(vram__rj *c, const char *key);
size_t vram__rj_index(vram__rj *c, size_t i);
static inline void vram__rj_restore(vram__rj *c, size_t n) { c->path[n] = '\0'; }

/* Record "<name>:<line>: <path>.<key>: <problem>" (key may be NULL) and
 * return VRAM_EPARSE. */
int vram__rj_fail(const vram__rj *c, const char *key, const char *fmt, ...) VRAM__PRINTF(3, 4);

/* Member `key` of `obj`: 1 if present (and not null), 0 if absent or null
 * and allowed, VRAM_EPARSE (the sentence says what was found) otherwise. */
int vram__rj_num(const vram__rj *c, const cJSON *obj, const char *key, int flags, double *out);
int vram__rj_str(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const char **out);
int vram__rj_arr(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const cJSON **out);
int vram__rj_obj(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const cJSON **out);

/* A member to copy: key, type ('n' number, 's' string, 'b' boolean) and flags. */
typedef struct vram__rj_field {
    const char *key;
    char type;
    int flags;
} vram__rj_field;

/* Check the listed members of `src` and copy those present into `dst`
 * (null where null is given and allowed). 0 or VRAM_EPARSE/VRAM_EHOSTMEM. */
int vram__rj_copy(const vram__rj *c, const cJSON *src, const vram__rj_field *fields, size_t n,
                  cJSON *dst);

/* Parse a whole JSON document of `len` bytes that starts on line
 * `first_line` of input `name`; syntax errors name the line and column
 * ("ends early (truncated?)" when the text stops inside it). */
int vram__rj_parse(const char *name, uint32_t first_line, const char *text, size_t len,
                   cJSON **out);

/* A JSON number, or null for NaN (absent). NULL on host memory exhaustion. */
cJSON *vram__rj_number(double v);

/* ---- interned strings: name -> index, in order of first appearance ---- */

typedef struct vram__strtab {
    char **names;
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 empty */
    size_t nslots;
} vram__strtab;

/* The index of `s` (`len` bytes), added if new. Returns 0 or VRAM_EHOSTMEM. */
int vram__strtab_get(vram__strtab *t, const char *s, size_t len, uint32_t *index);
void vram__strtab_free(vram__strtab *t);

/* ---- readers ---- */

/* Each reads a whole input into a new JSON object for the page (*out) and a
 * one-line summary; on error *out is NULL and the last error says why. */
int vram__report_series(vram__rsrc *s, int csv, uint32_t max_points, cJSON **out, char *summary,
                        size_t cap);
int vram__report_snapshot(const char *name, const cJSON *doc, uint32_t max_blocks, cJSON **out,
                          char *summary, size_t cap);
int vram__report_oom(const char *name, const cJSON *doc, cJSON **out, char *summary, size_t cap);

/* The page: generated at build time from web/ (report_page.c). */
extern const unsigned char vram__report_page[];
extern const size_t vram__report_page_size;

#endif
