/* src/observe/report_series_csv.c - the sample series reader for the
 * monitor's CSV: a header, then a row per pool, owner and kind of each
 * sample. A sample's rows share time_s, elapsed_s and iteration, and a
 * pool's total row (owner and kind empty) comes before its owners' and
 * kinds'; a sample is placed and pushed into the series (report_series.c)
 * when the next begins. Fields are split as RFC 4180 says, within a line.
 *
 * A CSV's header is read by name: its columns may come in any order, each
 * once, and every row has as many fields. An OPTIONAL pool field (such as
 * pending_bytes, which the CSV of earlier versions lacks) may be absent,
 * and then reads as never sampled (null on the page), as an empty field
 * does; any other column missing, unknown or named twice is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_series_internal.h"

/* The columns a CSV may have: the sample's time, the row's pool, owner and
 * kind, the pool fields (series_fields.h) and the GPU's. C_... is a column's
 * index in csv_columns; its place in a file is the header's to say. */
enum {
    C_TIME, C_ELAPSED, C_ITER, C_POOL, C_OWNER, C_KIND,
#define FIELD_COLUMN(name, kind, header) C_##name,
    VRAM__SERIES_POOL_FIELDS(FIELD_COLUMN)
#undef FIELD_COLUMN
    C_GPU_USED, C_GPU_TOTAL,
    CSV_N
};
#define C_LIVE C_live_bytes

static const char *const csv_columns[] = {
    "time_s", "elapsed_s", "iteration", "pool", "owner", "kind",
    VRAM__SERIES_POOL_FIELDS(FIELD_NAME) "gpu_used_bytes", "gpu_total_bytes",
};
_Static_assert(VRAM__ARRAY_LEN(csv_columns) == CSV_N, "a name for every CSV column");

/* The columns a header may lack: the OPTIONAL pool fields. */
#define MAY_LACK_REQUIRED 0
#define MAY_LACK_OPTIONAL 1
#define FIELD_MAY_LACK(name, kind, header) [C_##name] = MAY_LACK_##header,
static const unsigned char csv_may_lack[CSV_N] = {VRAM__SERIES_POOL_FIELDS(FIELD_MAY_LACK)};
#undef FIELD_MAY_LACK

/* Where the file has each column, from its header. */
typedef struct csv_layout {
    int at[CSV_N]; /* the column's place in a row (0-based); -1: absent */
    int n;         /* the header's columns: every row has as many fields */
} csv_layout;

typedef struct field {
    const char *p; /* unquoted text (in the line, or in the unquote buffer) */
    size_t n;
} field;

/* Split one line into fields (RFC 4180 quoting, within the line). Returns
 * the number of fields, or -1 (with the last error set) for bad quoting. */
static int csv_split(const char *name, uint32_t line, const char *t, size_t n, char *unq,
                     field *f, int max)
{
    int nf = 0;
    size_t i = 0, u = 0;
    for (;;) {
        if (nf == max)
            return max + 1; /* too many */
        if (i < n && t[i] == '"') {
            size_t start = u;
            i++;
            for (;;) {
                if (i >= n) {
                    vram__fail(VRAM_EPARSE, "%s:%u: field %d: a quote is not closed", name, line,
                               nf + 1);
                    return -1;
                }
                if (t[i] == '"') {
                    if (i + 1 < n && t[i + 1] == '"') {
                        unq[u++] = '"';
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                unq[u++] = t[i++];
            }
            if (i < n && t[i] != ',') {
                vram__fail(VRAM_EPARSE, "%s:%u: field %d: text after its closing quote", name,
                           line, nf + 1);
                return -1;
            }
            f[nf++] = (field){unq + start, u - start};
        } else {
            size_t start = i;
            while (i < n && t[i] != ',')
                i++;
            f[nf++] = (field){t + start, i - start};
        }
        if (i >= n)
            return nf;
        i++; /* the comma */
        if (i == n) {
            if (nf == max)
                return max + 1;
            f[nf++] = (field){t + i, 0};
            return nf;
        }
    }
}

/* A number field: 1 present, 0 empty (allowed unless required), < 0 error. */
static int csv_num(const char *name, uint32_t line, const field *f, int which, int flags,
                   double *out)
{
    *out = NAN;
    if (f->n == 0) {
        if (flags & VRAM__RJ_REQUIRED)
            return vram__fail(VRAM_EPARSE, "%s:%u: %s is empty", name, line,
                              csv_columns[which]);
        return 0;
    }
    char buf[64];
    if (f->n >= sizeof buf)
        return vram__fail(VRAM_EPARSE, "%s:%u: %s is \"%.20s...\", expected a number", name,
                          line, csv_columns[which], f->p);
    memcpy(buf, f->p, f->n);
    buf[f->n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf || *end || !isfinite(v) || strchr(buf, 'x') || strchr(buf, 'X'))
        return vram__fail(VRAM_EPARSE, "%s:%u: %s is \"%s\", expected a number", name, line,
                          csv_columns[which], buf);
    if ((flags & (VRAM__RJ_BYTES | VRAM__RJ_NONNEG)) && v < 0)
        return vram__fail(VRAM_EPARSE, "%s:%u: %s is %s, expected a number >= 0", name, line,
                          csv_columns[which], buf);
    if ((flags & VRAM__RJ_BYTES) && (v != floor(v) || v >= 18446744073709551616.0))
        return vram__fail(VRAM_EPARSE, "%s:%u: %s is %s, expected a whole number of bytes", name,
                          line, csv_columns[which], buf);
    *out = v;
    return 1;
}

/* Append text to a message being built in buf (cap bytes), cutting it short
 * rather than overflowing. */
static void msg_add(char *buf, size_t cap, size_t *k, const char *text)
{
    size_t n = strlen(text);
    if (*k + n >= cap)
        n = cap - 1 - *k;
    memcpy(buf + *k, text, n);
    *k += n;
    buf[*k] = '\0';
}

/* What a header holds, for the messages: "the columns are time_s,... in
 * any order, each once; pending_bytes may be absent". */
static const char *csv_expected(char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    msg_add(buf, cap, &k, "the columns are ");
    for (int c = 0; c < CSV_N; c++) {
        msg_add(buf, cap, &k, c ? "," : "");
        msg_add(buf, cap, &k, csv_columns[c]);
    }
    msg_add(buf, cap, &k, " in any order, each once");
    for (int c = 0; c < CSV_N; c++)
        if (csv_may_lack[c]) {
            msg_add(buf, cap, &k, "; ");
            msg_add(buf, cap, &k, csv_columns[c]);
            msg_add(buf, cap, &k, " may be absent");
        }
    return buf;
}

/* The header maps the file's columns by name: every field names a known
 * column, none twice, and every column is there but those csv_may_lack. */
static int csv_header(series *s, const char *t, size_t n, char *unq, field *f, csv_layout *lay)
{
    if (n >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0) {
        t += 3;
        n -= 3;
    }
    /* f holds CSV_N + 1 fields: a longer header repeats a name or has an
     * unknown one among them. */
    int nf = csv_split(s->name, 1, t, n, unq, f, CSV_N + 1);
    if (nf < 0)
        return VRAM_EPARSE;
    int kept = nf > CSV_N + 1 ? CSV_N + 1 : nf;
    int bad = -1, bad_col = -1; /* the first field that is unknown or repeated */
    for (int c = 0; c < CSV_N; c++)
        lay->at[c] = -1;
    for (int i = 0; i < kept; i++) {
        int c = 0;
        while (c < CSV_N &&
               (f[i].n != strlen(csv_columns[c]) || memcmp(f[i].p, csv_columns[c], f[i].n) != 0))
            c++;
        if (c < CSV_N && lay->at[c] < 0) {
            lay->at[c] = i;
        } else if (bad < 0) {
            bad = i;
            bad_col = c;
        }
    }
    char missing[512], want[512];
    size_t k = 0;
    int n_missing = 0;
    missing[0] = '\0';
    for (int c = 0; c < CSV_N; c++) {
        if (lay->at[c] >= 0 || csv_may_lack[c])
            continue;
        msg_add(missing, sizeof missing, &k, n_missing++ ? ", \"" : "\"");
        msg_add(missing, sizeof missing, &k, csv_columns[c]);
        msg_add(missing, sizeof missing, &k, "\"");
    }
    if (bad >= 0 && bad_col < CSV_N)
        return vram__fail(VRAM_EPARSE,
                          "%s:1: column %d of the header is \"%s\" again (as column %d; each "
                          "column is named once)",
                          s->name, bad + 1, csv_columns[bad_col], lay->at[bad_col] + 1);
    /* An unknown name where a column or two is missing is likely one of
     * them misspelt: say which. */
    int hint = n_missing >= 1 && n_missing <= 3;
    if (bad >= 0)
        return vram__fail(VRAM_EPARSE, "%s:1: column %d of the header is \"%.*s\", %s%s (%s)",
                          s->name, bad + 1, (int)(f[bad].n > 40 ? 40 : f[bad].n), f[bad].p,
                          !hint            ? "not a column of the sample series"
                          : n_missing == 1 ? "expected "
                                           : "expected one of ",
                          hint ? missing : "", csv_expected(want, sizeof want));
    if (n_missing)
        return vram__fail(VRAM_EPARSE, "%s:1: the header lacks the column%s %s (%s)", s->name,
                          n_missing == 1 ? "" : "s", missing, csv_expected(want, sizeof want));
    lay->n = nf;
    return 0;
}

/* One row, its fields by column (an absent column's empty). */
static int csv_row(series *s, uint32_t line, const field *f)
{
    for (int i = 0; i < CSV_N; i++)
        if (memchr(f[i].p, '\0', f[i].n))
            return vram__fail(VRAM_EPARSE, "%s:%u: %s holds a 0 byte", s->name, line,
                              csv_columns[i]);
    double t, e, it, live;
    int rc;
    if ((rc = csv_num(s->name, line, &f[C_TIME], C_TIME, VRAM__RJ_REQUIRED, &t)) < 0 ||
        (rc = csv_num(s->name, line, &f[C_ELAPSED], C_ELAPSED,
                      VRAM__RJ_REQUIRED | VRAM__RJ_NONNEG, &e)) < 0 ||
        (rc = csv_num(s->name, line, &f[C_ITER], C_ITER, VRAM__RJ_NONNEG, &it)) < 0 ||
        (rc = csv_num(s->name, line, &f[C_LIVE], C_LIVE, VRAM__RJ_REQUIRED | VRAM__RJ_BYTES,
                      &live)) < 0)
        return rc;
    if (f[C_POOL].n == 0)
        return vram__fail(VRAM_EPARSE, "%s:%u: pool is empty", s->name, line);
    if (f[C_OWNER].n && f[C_KIND].n)
        return vram__fail(VRAM_EPARSE, "%s:%u: a row has an owner or a kind, not both (owner "
                          "\"%.*s\", kind \"%.*s\")", s->name, line, (int)f[C_OWNER].n,
                          f[C_OWNER].p, (int)f[C_KIND].n, f[C_KIND].p);
    uint32_t pool, present;
    if ((rc = vram__rseries_pool_index(s, f[C_POOL].p, f[C_POOL].n, &pool)) ||
        (rc = vram__rseries_column(s, COL_PRESENT, 0, pool, "", 0, &present)))
        return rc;
    int total = !f[C_OWNER].n && !f[C_KIND].n;
    sample *x = s->cur;
    int has_pool = 0;
    for (uint32_t i = 0; x && i < x->n; i++)
        has_pool |= x->v[i].col == present;
    int same_it = (isnan(it) && x && isnan(x->iteration)) || (x && it == x->iteration);
    if (!x || t != x->time_s || e != x->elapsed_s || !same_it || (total && has_pool)) {
        /* A new sample begins. */
        if (!total)
            return vram__fail(VRAM_EPARSE, "%s:%u: the %s row of pool \"%.*s\" comes before the "
                              "pool's total row (owner and kind empty) of its sample", s->name,
                              line, f[C_OWNER].n ? "owner" : "kind", (int)f[C_POOL].n,
                              f[C_POOL].p);
        if (x) {
            s->cur = NULL;
            if ((rc = vram__rseries_place(s, x, line - 1))) {
                vram__rseries_sample_free(x);
                return rc;
            }
            if ((rc = vram__rseries_push(s, x, line - 1))) /* frees x on error */
                return rc;
        }
        if (!(x = s->cur = vram__rseries_sample_new()))
            return VRAM_EHOSTMEM;
        x->time_s = t;
        x->elapsed_s = e;
        x->iteration = it;
    } else if (!has_pool) {
        if (!total)
            return vram__fail(VRAM_EPARSE, "%s:%u: the %s row of pool \"%.*s\" comes before the "
                              "pool's total row (owner and kind empty) of its sample", s->name,
                              line, f[C_OWNER].n ? "owner" : "kind", (int)f[C_POOL].n,
                              f[C_POOL].p);
    }
    uint32_t ci;
    if (!total) {
        int kind = f[C_KIND].n != 0;
        const field *nm = kind ? &f[C_KIND] : &f[C_OWNER];
        if ((rc = vram__rseries_column(s, kind ? COL_KIND : COL_OWNER, 0, pool, nm->p, nm->n, &ci)))
            return rc;
        return vram__rseries_sample_set(x, ci, live);
    }
    if ((rc = vram__rseries_sample_set(x, present, 1)) ||
        (rc = vram__rseries_column(s, COL_METRIC, M_LIVE, pool, "", 0, &ci)) ||
        (rc = vram__rseries_sample_set(x, ci, live)))
        return rc;
    x->key += live;
    /* The pool fields (live_bytes, required, is read above), then the GPU's
     * columns (metric -1 and -2); an empty field is not sampled. */
    static const struct {
        int field, metric, flags;
    } opt[] = {
#define FIELD_OPT(name, kind, header) {C_##name, VRAM__SERIES_F_##name, READ_##kind},
        VRAM__SERIES_POOL_FIELDS(FIELD_OPT)
#undef FIELD_OPT
        {C_GPU_USED, -1, VRAM__RJ_BYTES},
        {C_GPU_TOTAL, -2, VRAM__RJ_BYTES},
    };
    for (size_t i = 0; i < VRAM__ARRAY_LEN(opt); i++) {
        if (opt[i].metric == M_LIVE)
            continue;
        double v;
        if ((rc = csv_num(s->name, line, &f[opt[i].field], opt[i].field, opt[i].flags, &v)) < 0)
            return rc;
        if (!rc)
            continue;
        int type = opt[i].metric == -1 ? COL_GPU_USED : opt[i].metric == -2 ? COL_GPU_TOTAL
                                                                             : COL_METRIC;
        if (type != COL_METRIC) {
            /* The device is one per sample: the first pool's row says it. */
            if ((rc = vram__rseries_column(s, type, 0, 0, "", 0, &ci)))
                return rc;
            int seen = 0;
            for (uint32_t k = 0; k < x->n; k++)
                seen |= x->v[k].col == ci;
            s->have_gpu = 1;
            if (seen)
                continue;
        } else if ((rc = vram__rseries_column(s, type, opt[i].metric, pool, "", 0, &ci))) {
            return rc;
        }
        if ((rc = vram__rseries_sample_set(x, ci, v)))
            return rc;
    }
    return 0;
}

int vram__rseries_csv_read(series *s, vram__rsrc *src)
{
    const char *t;
    size_t n;
    int rc;
    char *unq = NULL;
    size_t unq_cap = 0;
    field f[CSV_N + 1], by[CSV_N];
    csv_layout lay = {.n = 0};
    int header = 0;
    while ((rc = vram__rsrc_line(src, &t, &n)) == 1) {
        if (n + 1 > unq_cap) {
            free(unq);
            unq_cap = n + 1 > 4096 ? n + 1 : 4096;
            if (!(unq = vram__realloc_array(NULL, unq_cap, 1)))
                return VRAM_EHOSTMEM;
        }
        if (!header) {
            if (n == 0 || (n == 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0))
                continue;
            header = 1;
            if ((rc = csv_header(s, t, n, unq, f, &lay)))
                break;
            continue;
        }
        if (n == 0)
            continue;
        int nf = csv_split(s->name, src->line, t, n, unq, f, lay.n);
        if (nf < 0) {
            rc = VRAM_EPARSE;
            break;
        }
        if (nf != lay.n) {
            rc = vram__fail(VRAM_EPARSE,
                            "%s:%u: %s%d fields, expected %d (as many as the header's columns)",
                            s->name, src->line, nf > lay.n ? "more than " : "",
                            nf > lay.n ? lay.n : nf, lay.n);
            break;
        }
        for (int c = 0; c < CSV_N; c++)
            by[c] = lay.at[c] >= 0 ? f[lay.at[c]] : (field){"", 0};
        if ((rc = csv_row(s, src->line, by)))
            break;
    }
    free(unq);
    if (rc == 0 && s->cur) {
        sample *x = s->cur;
        s->cur = NULL;
        if ((rc = vram__rseries_place(s, x, src->line)))
            vram__rseries_sample_free(x);
        else
            rc = vram__rseries_push(s, x, src->line);
    }
    return rc;
}
