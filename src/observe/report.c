/* src/observe/report.c - `vramkit report`'s library side: the report object,
 * recognising an input by its content and handing it to its reader, the
 * page's data as one JSON object, the page itself (the HTML generated at
 * build time from web/ with the data put in its one placeholder), and
 * writing it through a temporary file renamed into place. Also the shared
 * parts declared in report_internal.h: the line reader, checked JSON access,
 * interned strings. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report_internal.h"
#include "vramkit/config.h"

/* ======================================================================
 * Reading lines
 * ====================================================================== */

int vram__rsrc_line(vram__rsrc *s, const char **text, size_t *len)
{
    if (s->pos >= s->len)
        return 0;
    const char *start = s->mem + s->pos;
    const char *nl = memchr(start, '\n', s->len - s->pos);
    size_t n = nl ? (size_t)(nl - start) : s->len - s->pos;
    s->pos += n + (nl ? 1 : 0);
    if (n > VRAM__REPORT_MAX_LINE)
        return vram__fail(VRAM_EPARSE, "%s:%u: line longer than %u MiB", s->name, s->line + 1,
                          VRAM__REPORT_MAX_LINE >> 20);
    *text = start;
    if (n && start[n - 1] == '\r')
        n--;
    s->line++;
    *len = n;
    return 1;
}

void vram__rsrc_rewind(vram__rsrc *s)
{
    s->line = 0;
    s->pos = 0;
}

int vram__rsrc_all(vram__rsrc *s, char **out, size_t *len)
{
    vram__rsrc_rewind(s);
    char *b = vram__realloc_array(NULL, s->len + 1, 1);
    *out = b;
    *len = b ? s->len : 0;
    if (!b)
        return VRAM_EHOSTMEM;
    memcpy(b, s->mem, s->len);
    b[s->len] = '\0';
    return 0;
}

/* ======================================================================
 * Checked JSON access
 * ====================================================================== */

size_t vram__rj_key(vram__rj *c, const char *key)
{
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "%s%s", n ? "." : "", key);
    return n;
}

size_t vram__rj_index(vram__rj *c, size_t i)
{
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "[%zu]", i);
    return n;
}

int vram__rj_fail(const vram__rj *c, const char *key, const char *fmt, ...)
{
    char where[256];
    int n = c->line ? snprintf(where, sizeof where, "%s:%u: ", c->name, c->line)
                    : snprintf(where, sizeof where, "%s: ", c->name);
    if (n < 0 || (size_t)n >= sizeof where)
        n = (int)strlen(where);
    if (c->path[0] || key)
        snprintf(where + n, sizeof where - (size_t)n, "%s%s%s ", c->path,
                 c->path[0] && key ? "." : "", key ? key : "");
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vram__fail(VRAM_EPARSE, "%s%s", where, what);
}

/* "the string \"abc\"", "the number 3", "an array"... for messages. */
static const char *describe(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        size_t n = strlen(s);
        snprintf(buf, cap, "the string \"%.40s%s\"", s, n > 40 ? "..." : "");
        /* Control characters would garble a terminal. */
        for (char *p = buf; *p; p++)
            if ((unsigned char)*p < 0x20)
                *p = '?';
    } else if (cJSON_IsNumber(v)) {
        snprintf(buf, cap, "the number %.17g", v->valuedouble);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        snprintf(buf, cap, "null");
    } else if (cJSON_IsArray(v)) {
        snprintf(buf, cap, "an array");
    } else {
        snprintf(buf, cap, "an object");
    }
    return buf;
}

/* Common part: 1 present, 0 absent/null allowed, < 0 error; *v the member. */
static int member(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                  const cJSON **v)
{
    *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*v) {
        if (flags & VRAM__RJ_REQUIRED)
            return vram__rj_fail(c, key, "is missing");
        return 0;
    }
    if (cJSON_IsNull(*v)) {
        if (flags & VRAM__RJ_NULLABLE)
            return 0;
        return vram__rj_fail(c, key, "is null");
    }
    return 1;
}

int vram__rj_num(const vram__rj *c, const cJSON *obj, const char *key, int flags, double *out)
{
    const cJSON *v;
    int rc = member(c, obj, key, flags, &v);
    *out = NAN;
    if (rc <= 0)
        return rc;
    char d[96];
    if (!cJSON_IsNumber(v))
        return vram__rj_fail(c, key, "is %s, expected a number", describe(v, d, sizeof d));
    double x = v->valuedouble;
    if (!isfinite(x))
        return vram__rj_fail(c, key, "is not a finite number");
    if ((flags & (VRAM__RJ_BYTES | VRAM__RJ_NONNEG)) && x < 0)
        return vram__rj_fail(c, key, "is %.17g, expected a number >= 0", x);
    if ((flags & VRAM__RJ_BYTES) && (x != floor(x) || x >= 18446744073709551616.0))
        return vram__rj_fail(c, key, "is %.17g, expected a whole number of bytes", x);
    *out = x;
    return 1;
}

/* Member `key` checked to be of one JSON type (is(), named `what`). */
static int typed(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 cJSON_bool (*is)(const cJSON *), const char *what, const cJSON **out)
{
    const cJSON *v;
    int rc = member(c, obj, key, flags, &v);
    *out = NULL;
    if (rc <= 0)
        return rc;
    char d[96];
    if (!is(v))
        return vram__rj_fail(c, key, "is %s, expected %s", describe(v, d, sizeof d), what);
    *out = v;
    return 1;
}

int vram__rj_str(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const char **out)
{
    const cJSON *v;
    int rc = typed(c, obj, key, flags, cJSON_IsString, "a string", &v);
    *out = rc > 0 ? v->valuestring : NULL;
    return rc;
}

int vram__rj_arr(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const cJSON **out)
{
    return typed(c, obj, key, flags, cJSON_IsArray, "an array", out);
}

int vram__rj_obj(const vram__rj *c, const cJSON *obj, const char *key, int flags,
                 const cJSON **out)
{
    return typed(c, obj, key, flags, cJSON_IsObject, "an object", out);
}

cJSON *vram__rj_number(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

int vram__rj_copy(const vram__rj *c, const cJSON *src, const vram__rj_field *fields, size_t n,
                  cJSON *dst)
{
    for (size_t i = 0; i < n; i++) {
        const vram__rj_field *f = &fields[i];
        cJSON *item = NULL;
        int rc;
        if (f->type == 'n') {
            double v;
            if ((rc = vram__rj_num(c, src, f->key, f->flags, &v)) < 0)
                return rc;
            if (rc)
                item = cJSON_CreateNumber(v);
        } else if (f->type == 's') {
            const char *v;
            if ((rc = vram__rj_str(c, src, f->key, f->flags, &v)) < 0)
                return rc;
            if (rc)
                item = cJSON_CreateString(v);
        } else {
            const cJSON *v = NULL;
            if ((rc = member(c, src, f->key, f->flags, &v)) < 0)
                return rc;
            char d[96];
            if (rc && !cJSON_IsBool(v))
                return vram__rj_fail(c, f->key, "is %s, expected true or false",
                                     describe(v, d, sizeof d));
            if (rc)
                item = cJSON_CreateBool(cJSON_IsTrue(v));
        }
        if (!rc) {
            /* Absent stays absent; an allowed null is kept as null. */
            if (!cJSON_GetObjectItemCaseSensitive(src, f->key))
                continue;
            item = cJSON_CreateNull();
        }
        if (!item || !cJSON_AddItemToObject(dst, f->key, item)) {
            cJSON_Delete(item);
            return vram__fail(VRAM_EHOSTMEM, "out of host memory reading %s", c->name);
        }
    }
    return 0;
}

/* Does the text stop inside a string or an open object/array? Then it was
 * cut short rather than miswritten. */
static int cut_short(const char *text, size_t len)
{
    long depth = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (--depth < 0)
                return 0;
        }
    }
    return in_string || depth > 0;
}

static void line_col(const char *text, size_t at, unsigned *line, unsigned *col)
{
    *line = 0;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

int vram__rj_parse(const char *name, uint32_t first_line, const char *text, size_t len,
                   cJSON **out)
{
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    size_t stop = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    unsigned line, col;
    if (*out) {
        while (stop < len && strchr(" \t\r\n", text[stop]))
            stop++;
        if (stop == len)
            return 0;
        cJSON_Delete(*out);
        *out = NULL;
        line_col(text, stop, &line, &col);
        return vram__fail(VRAM_EPARSE, "%s:%u:%u: text after the end of the JSON value",
                          name, first_line + line, col);
    }
    if (cut_short(text, len)) {
        line_col(text, len, &line, &col);
        return vram__fail(VRAM_EPARSE, "%s:%u:%u: the JSON ends early (truncated?)", name,
                          first_line + line, col);
    }
    line_col(text, stop, &line, &col);
    char near[48];
    size_t k = 0;
    for (size_t i = stop; i < len && k + 1 < sizeof near && text[i] != '\n'; i++)
        near[k++] = (unsigned char)text[i] < 0x20 ? '?' : text[i];
    near[k] = '\0';
    return vram__fail(VRAM_EPARSE, "%s:%u:%u: malformed JSON at \"%s\"", name, first_line + line,
                      col, near);
}

/* ======================================================================
 * Interned strings
 * ====================================================================== */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int vram__strtab_get(vram__strtab *t, const char *s, size_t len, uint32_t *index)
{
    if (t->n + 1 > t->nslots / 2) {
        size_t ns = t->nslots ? t->nslots * 2 : 64;
        uint32_t *slots = vram__calloc(ns, sizeof *slots);
        if (!slots)
            return VRAM_EHOSTMEM;
        for (size_t i = 0; i < t->n; i++) {
            size_t j = hash_bytes(t->names[i], strlen(t->names[i])) & (ns - 1);
            while (slots[j])
                j = (j + 1) & (ns - 1);
            slots[j] = (uint32_t)i + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->nslots = ns;
    }
    size_t j = hash_bytes(s, len) & (t->nslots - 1);
    for (; t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
        const char *name = t->names[t->slots[j] - 1];
        if (strncmp(name, s, len) == 0 && name[len] == '\0') {
            *index = t->slots[j] - 1;
            return 0;
        }
    }
    if (t->n >= UINT32_MAX - 1)
        return vram__fail(VRAM_ELIMIT, "more than %u names", UINT32_MAX - 1);
    char **names = vram__grow(t->names, &t->cap, t->n, sizeof *names, 16);
    if (!names)
        return VRAM_EHOSTMEM;
    t->names = names;
    char *copy = vram__realloc_array(NULL, len + 1, 1);
    if (!copy)
        return VRAM_EHOSTMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    t->names[t->n] = copy;
    t->slots[j] = (uint32_t)t->n + 1;
    *index = (uint32_t)t->n++;
    return 0;
}

void vram__strtab_free(vram__strtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->names[i]);
    free(t->names);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ======================================================================
 * The report
 * ====================================================================== */

struct vram_report {
    char *title;
    uint32_t max_points, max_blocks;
    double generated_time_s;
    cJSON *data; /* {title, generated_time_s, inputs[], series[], snapshots[], ooms[]} */
    size_t n_inputs;
};

int vram_report_opts_init(vram_report_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_report_opts_init: opts is NULL");
    int rc = vram_config_load();
    const vram_config *c = vram_config_get();
    *o = (vram_report_opts){
        .size = sizeof *o,
        .max_points = c->report_max_points > UINT32_MAX ? UINT32_MAX
                                                        : (uint32_t)c->report_max_points,
        .max_blocks = c->report_max_blocks > UINT32_MAX ? UINT32_MAX
                                                        : (uint32_t)c->report_max_blocks,
    };
    return rc;
}

int vram_report_create(const vram_report_opts *opts, vram_report **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_report_create: out is NULL");
    *out = NULL;
    vram_report_opts o;
    int rc = vram_report_opts_init(&o);
    if (!opts && rc)
        return rc;
    if (opts && (rc = vram__opts_take(&o, opts, sizeof o, "vram_report_opts")))
        return rc;
    if (o.max_points && o.max_points < 8)
        return vram__fail(VRAM_EINVAL, "a series needs at least 8 points in the page, not %u",
                          o.max_points);
    vram_report *r = vram__calloc(1, sizeof *r);
    if (!r)
        return VRAM_EHOSTMEM;
    r->title = vram__strdup(o.title ? o.title : "vramkit report");
    r->max_points = o.max_points ? o.max_points : 2000;
    r->max_blocks = o.max_blocks ? o.max_blocks : 20000;
    r->generated_time_s = o.generated_time_s > 0 ? o.generated_time_s : (double)time(NULL);
    r->data = cJSON_CreateObject();
    if (!r->title || !r->data || !cJSON_AddStringToObject(r->data, "title", r->title) ||
        !cJSON_AddNumberToObject(r->data, "generated_time_s", r->generated_time_s) ||
        !cJSON_AddArrayToObject(r->data, "inputs") || !cJSON_AddArrayToObject(r->data, "series") ||
        !cJSON_AddArrayToObject(r->data, "snapshots") || !cJSON_AddArrayToObject(r->data, "ooms")) {
        vram_report_destroy(r);
        return vram__fail(VRAM_EHOSTMEM, "out of host memory creating a report");
    }
    *out = r;
    return 0;
}

void vram_report_destroy(vram_report *r)
{
    if (!r)
        return;
    cJSON_Delete(r->data);
    free(r->title);
    free(r);
}

size_t vram_report_inputs(const vram_report *r)
{
    return r ? r->n_inputs : 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* How an input looks from its first line that is not blank. */
typedef enum { LOOKS_UNKNOWN, LOOKS_EMPTY, LOOKS_JSON, LOOKS_JSONL, LOOKS_CSV } looks;

#define CSV_HEADER_START "time_s,"

static looks sniff(vram__rsrc *s, int *rc)
{
    const char *t;
    size_t n;
    *rc = 0;
    while ((*rc = vram__rsrc_line(s, &t, &n)) == 1) {
        if (s->line == 1 && n >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 BOM */
            t += 3;
            n -= 3;
        }
        size_t i = 0;
        while (i < n && is_space(t[i]))
            i++;
        if (i == n)
            continue;
        if (t[i] == '{') {
            /* An object with a "type" on one line (a sample, an alert):
             * JSON Lines. Anything else that opens an object is a whole
             * document (a snapshot, or an OOM report, "type":"oom"). */
            cJSON *j = cJSON_ParseWithLength(t + i, n - i);
            const cJSON *type = j ? cJSON_GetObjectItemCaseSensitive(j, "type") : NULL;
            int lines = cJSON_IsObject(j) && cJSON_IsString(type) &&
                        strcmp(type->valuestring, "oom") != 0;
            cJSON_Delete(j);
            return lines ? LOOKS_JSONL : LOOKS_JSON;
        }
        if (n - i >= strlen(CSV_HEADER_START) &&
            memcmp(t + i, CSV_HEADER_START, strlen(CSV_HEADER_START)) == 0)
            return LOOKS_CSV;
        return LOOKS_UNKNOWN;
    }
    return *rc < 0 ? LOOKS_UNKNOWN : LOOKS_EMPTY;
}

static int unknown_input(vram__rsrc *s)
{
    const char *t = "";
    size_t n = 0;
    vram__rsrc_rewind(s);
    int rc;
    while ((rc = vram__rsrc_line(s, &t, &n)) == 1) {
        size_t i = 0;
        while (i < n && is_space(t[i]))
            i++;
        if (i < n)
            break;
    }
    char start[48];
    size_t k = 0;
    for (size_t i = 0; rc == 1 && i < n && k + 1 < sizeof start; i++)
        start[k++] = (unsigned char)t[i] < 0x20 || (unsigned char)t[i] >= 0x7f ? '?' : t[i];
    start[k] = '\0';
    return vram__fail(VRAM_EPARSE,
                      "%s:%u: not a report input: expected a pool snapshot or an OOM report "
                      "(JSON), or a sample series (JSON Lines of {\"type\":\"sample\",...}, or "
                      "CSV with the header time_s,elapsed_s,...); it starts with \"%s\"",
                      s->name, s->line ? s->line : 1, start);
}

static const char *input_type_name(vram_report_input t)
{
    switch (t) {
    case VRAM_REPORT_SNAPSHOT: return "snapshot";
    case VRAM_REPORT_SERIES_JSONL: return "series";
    case VRAM_REPORT_SERIES_CSV: return "series";
    case VRAM_REPORT_OOM: return "oom";
    }
    return "unknown";
}

/* A whole JSON document: a snapshot or an OOM report. */
static int read_document(vram_report *r, vram__rsrc *s, cJSON **out, vram_report_input *type,
                         char *summary, size_t cap)
{
    char *text;
    size_t len;
    int rc = vram__rsrc_all(s, &text, &len);
    if (rc)
        return rc;
    size_t skip = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    cJSON *doc;
    rc = vram__rj_parse(s->name, 1, text + skip, len - skip, &doc);
    free(text);
    if (rc)
        return rc;
    vram__rj c = {.name = s->name};
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return vram__rj_fail(&c, NULL, "is JSON but not an object");
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "type");
    if (cJSON_IsString(t) && strcmp(t->valuestring, "oom") == 0) {
        *type = VRAM_REPORT_OOM;
        rc = vram__report_oom(s->name, doc, out, summary, cap);
    } else if (cJSON_GetObjectItemCaseSensitive(doc, "blocks")) {
        *type = VRAM_REPORT_SNAPSHOT;
        rc = vram__report_snapshot(s->name, doc, r->max_blocks, out, summary, cap);
    } else {
        rc = vram__rj_fail(&c, NULL,
                           "is a JSON object but neither a pool snapshot (it has no \"blocks\") "
                           "nor an OOM report (no \"type\":\"oom\")%s",
                           t ? " nor a sample series (\"type\" is not \"sample\" or \"alert\")"
                             : "");
    }
    cJSON_Delete(doc);
    return rc;
}

static int add_source(vram_report *r, vram__rsrc *s, vram_report_input_info *info)
{
    vram_report_input_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    int rc;
    looks l = sniff(s, &rc);
    if (rc < 0)
        return rc;
    if (l == LOOKS_EMPTY)
        return vram__fail(VRAM_EPARSE, "%s: empty, expected a snapshot, a sample series or an "
                          "OOM report", s->name);
    if (l == LOOKS_UNKNOWN)
        return unknown_input(s);
    vram__rsrc_rewind(s);
    cJSON *item = NULL;
    const char *array;
    if (l == LOOKS_JSON) {
        rc = read_document(r, s, &item, &info->type, info->summary, sizeof info->summary);
        array = info->type == VRAM_REPORT_OOM ? "ooms" : "snapshots";
    } else {
        info->type = l == LOOKS_CSV ? VRAM_REPORT_SERIES_CSV : VRAM_REPORT_SERIES_JSONL;
        rc = vram__report_series(s, l == LOOKS_CSV, r->max_points, &item, info->summary,
                                 sizeof info->summary);
        array = "series";
    }
    if (rc)
        return rc;
    size_t used = strlen(info->summary);
    if (used + 1 >= sizeof info->summary) /* cut short: say so */
        memcpy(info->summary + used - 3, "...", 3);
    cJSON *in = cJSON_CreateObject();
    if (!in || !cJSON_AddStringToObject(in, "name", s->name) ||
        !cJSON_AddStringToObject(in, "type", input_type_name(info->type)) ||
        !cJSON_AddStringToObject(in, "format", info->type == VRAM_REPORT_SERIES_CSV ? "csv"
                                               : info->type == VRAM_REPORT_SERIES_JSONL ? "jsonl"
                                                                                      : "json") ||
        !cJSON_AddStringToObject(in, "summary", info->summary) ||
        !cJSON_AddStringToObject(item, "input", s->name)) {
        cJSON_Delete(in);
        cJSON_Delete(item);
        return vram__fail(VRAM_EHOSTMEM, "out of host memory adding %s", s->name);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r->data, "inputs"), in);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r->data, array), item);
    r->n_inputs++;
    return 0;
}

int vram_report_add_data(vram_report *r, const char *name, const void *data, size_t len,
                         vram_report_input_info *info)
{
    if (!r || !name || (!data && len))
        return vram__fail(VRAM_EINVAL, "vram_report_add_data: report, name and data are required");
    vram__rsrc s = {.name = name, .mem = data ? data : "", .len = len};
    return add_source(r, &s, info);
}

int vram_report_add_file(vram_report *r, const char *path, vram_report_input_info *info)
{
    if (!r || !path)
        return vram__fail(VRAM_EINVAL, "vram_report_add_file: report and path are required");
    char *text;
    size_t len;
    int rc = vram__read_gz_file(path, "", VRAM__REPORT_MAX_INPUT, &text, &len);
    if (rc)
        return rc;
    vram__rsrc s = {.name = path, .mem = text, .len = len};
    rc = add_source(r, &s, info);
    free(text);
    return rc;
}

/* ---- printing ---- */

/* The data as JSON text safe inside <script>: '<', '>' and '&' only occur
 * in strings, where \u escapes mean the same characters. */
static int print_data(vram_report *r, vram_write_fn write, void *ctx, int for_html)
{
    char *text = cJSON_PrintUnformatted(r->data);
    if (!text)
        return vram__fail(VRAM_EHOSTMEM, "out of host memory printing the report's data");
    int rc = 0;
    const char *p = text, *run = text;
    for (; *p && !rc; p++) {
        const char *esc = !for_html ? NULL : *p == '<' ? "\\u003c" : *p == '>' ? "\\u003e"
                                           : *p == '&' ? "\\u0026" : NULL;
        if (!esc)
            continue;
        if (p > run)
            rc = write(ctx, run, (size_t)(p - run));
        if (!rc)
            rc = write(ctx, esc, 6);
        run = p + 1;
    }
    if (!rc && p > run)
        rc = write(ctx, run, (size_t)(p - run));
    if (!rc && !for_html)
        rc = write(ctx, "\n", 1);
    cJSON_free(text);
    return rc;
}

#define PAGE_PLACEHOLDER "@VRAM_REPORT_DATA@"
#define PAGE_UNAVAILABLE "VRAM_REPORT_PAGE_UNAVAILABLE:"

static int print_page(vram_report *r, vram_write_fn write, void *ctx)
{
    const char *page = (const char *)vram__report_page;
    size_t n = vram__report_page_size;
    if (n >= strlen(PAGE_UNAVAILABLE) && memcmp(page, PAGE_UNAVAILABLE, strlen(PAGE_UNAVAILABLE)) == 0)
        return vram__fail(VRAM_ENOSYS, "this vramkit was built without the report page's "
                          "JavaScript (%.*s): run scripts/web_deps.sh where the npm registry "
                          "is reachable, then build again", (int)(n - strlen(PAGE_UNAVAILABLE)),
                          page + strlen(PAGE_UNAVAILABLE));
    const char *at = NULL;
    for (size_t i = 0; i + strlen(PAGE_PLACEHOLDER) <= n; i++)
        if (page[i] == '@' && memcmp(page + i, PAGE_PLACEHOLDER, strlen(PAGE_PLACEHOLDER)) == 0) {
            at = page + i;
            break;
        }
    if (!at)
        return vram__fail(VRAM_ENOSYS, "the embedded report page has no data placeholder");
    int rc = write(ctx, page, (size_t)(at - page));
    if (!rc)
        rc = print_data(r, write, ctx, 1);
    if (!rc) {
        const char *tail = at + strlen(PAGE_PLACEHOLDER);
        rc = write(ctx, tail, (size_t)(page + n - tail));
    }
    return rc;
}

int vram_report_print(vram_report *r, vram_write_fn write, void *ctx, unsigned flags)
{
    if (!r || !write || (flags & ~VRAM_PRINT_JSON))
        return vram__fail(VRAM_EINVAL, "vram_report_print: report, write and known flags are "
                                       "required");
    return flags & VRAM_PRINT_JSON ? print_data(r, write, ctx, 0) : print_page(r, write, ctx);
}

typedef struct file_sink {
    FILE *f;
    int err;
} file_sink;

static int sink_write(void *ctx, const char *data, size_t len)
{
    file_sink *s = ctx;
    errno = 0;
    if (fwrite(data, 1, len, s->f) != len) {
        s->err = errno ? errno : EIO;
        return VRAM_EIO;
    }
    return 0;
}

int vram_report_write(vram_report *r, const char *path)
{
    if (!r || !path || !*path)
        return vram__fail(VRAM_EINVAL, "vram_report_write: report and path are required");
    size_t n = strlen(path);
    char *tmp = vram__realloc_array(NULL, n + 16, 1);
    if (!tmp)
        return VRAM_EHOSTMEM;
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return vram__fail(VRAM_EIO, "cannot create a temporary file next to %s: %s", path,
                          strerror(e));
    }
    file_sink s = {fdopen(fd, "wb"), 0};
    int rc;
    if (!s.f) {
        int e = errno;
        close(fd);
        rc = vram__fail(VRAM_EIO, "cannot write %s: %s", tmp, strerror(e));
    } else {
        /* mkstemp makes the file 0600; a page is for sharing. */
        fchmod(fd, 0644);
        rc = vram_report_print(r, sink_write, &s, 0);
        if (rc == VRAM_EIO && s.err)
            rc = vram__fail(VRAM_EIO, "cannot write %s: %s", tmp, strerror(s.err));
        if (fflush(s.f) != 0 && !rc)
            rc = vram__fail(VRAM_EIO, "cannot write %s: %s", tmp, strerror(errno));
        if (fclose(s.f) != 0 && !rc)
            rc = vram__fail(VRAM_EIO, "cannot write %s: %s", tmp, strerror(errno));
    }
    if (!rc && rename(tmp, path) != 0)
        rc = vram__fail(VRAM_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        unlink(tmp);
        rc = vram__error_restore(&e, rc);
    }
    free(tmp);
    return rc;
}
