/* src/observe/report_series.c - reading a sample series (the monitor's JSON
 * Lines or CSV) for the report page, downsampled as it is read.
 *
 * Every sample becomes a sparse row of values, one per column: per pool its
 * presence and its figures (the pool fields of series_fields.h), one column
 * per owner and per kind of the pool, and the GPU's used and total bytes.
 * Columns are made as names first appear, so owners may come and go.
 *
 * A CSV's header is read by name: its columns may come in any order, each
 * once, and every row has as many fields. An OPTIONAL pool field (such as
 * pending_bytes, which the CSV of earlier versions lacks) may be absent,
 * and then reads as never sampled (null on the page), as an empty field
 * does; any other column missing, unknown or named twice is refused.
 *
 * Downsampling keeps the envelope: samples fall into buckets of `width`
 * consecutive samples, and a bucket keeps only its sample with the fewest
 * and the one with the most live bytes (all pools together). When the
 * buckets reach max_points / 2, neighbours merge pairwise (keeping the
 * smaller of the two minima and the larger of the two maxima) and the width
 * doubles. Up to max_points samples nothing is lost; beyond, the page gets
 * between max_points / 2 and max_points samples, every peak among them.
 *
 * The x axis is wall-clock seconds taken from elapsed_s (monotonic): a run
 * starts at time_s - elapsed_s, and a sample's x is that start plus its
 * elapsed_s. When elapsed_s goes back, the monitor restarted: a new run
 * begins (the page marks it), and it must not begin before the last sample. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"
#include "series_fields.h"

enum { COL_PRESENT, COL_METRIC, COL_OWNER, COL_KIND, COL_GPU_USED, COL_GPU_TOTAL, COL_CONTEXTS };

/* A pool's metrics are the series' pool fields: metric m is the field
 * VRAM__SERIES_F_... == m, read with metric_flags[m]. */
#define FIELD_NAME(name, kind, header) #name,
static const char *const metric_names[] = {VRAM__SERIES_POOL_FIELDS(FIELD_NAME)};
#define N_METRICS VRAM__SERIES_F_COUNT
#define M_LIVE VRAM__SERIES_F_live_bytes
#define READ_BYTES VRAM__RJ_BYTES
#define READ_RATIO VRAM__RJ_NONNEG
#define FIELD_FLAGS(name, kind, header) READ_##kind,
static const int metric_flags[] = {VRAM__SERIES_POOL_FIELDS(FIELD_FLAGS)};
#undef FIELD_FLAGS

#define MAX_COLUMNS 65536u
#define MAX_ALERTS 10000u

typedef struct col {
    uint8_t type;
    uint8_t metric;
    uint32_t pool;
    const char *name; /* owner or kind (inside the key) */
    double budget;    /* owners: the largest budget seen (0: none) */
} col;

typedef struct val {
    uint32_t col;
    double v;
} val;

typedef struct sample {
    double x, time_s, elapsed_s, iteration; /* iteration: NAN if unknown */
    double key;                             /* live bytes, all pools */
    val *v;
    uint32_t n, cap;
} sample;

typedef struct bucket {
    sample *lo, *hi; /* may be the same sample */
} bucket;

typedef struct series {
    const char *name;
    int csv;
    uint32_t max_buckets;
    vram__strtab pools;
    vram__strtab keys; /* column keys; index = column */
    col *cols;
    size_t cap_cols;
    char *scratch;
    size_t scratch_cap;
    bucket *b;
    size_t nb, cap_b;
    uint64_t width, filled; /* samples per bucket; in the last one so far */
    uint64_t samples, ignored, alerts_dropped, restarts;
    int have_run;
    double run_start, last_x, last_elapsed, first_x;
    cJSON *alerts, *processes, *gpu_name, *gpu_index;
    char *gpu_unavailable;
    sample *cur; /* the sample being read */
    int have_gpu, have_contexts;
} series;

static void sample_free(sample *x)
{
    if (x) {
        free(x->v);
        free(x);
    }
}

static sample *sample_new(void)
{
    sample *x = vram__calloc(1, sizeof *x);
    if (x)
        x->iteration = NAN;
    return x;
}

static int sample_set(sample *x, uint32_t c, double v)
{
    if (x->n == x->cap) {
        size_t cap = x->cap;
        val *nv = vram__grow(x->v, &cap, x->n, sizeof *nv, 16);
        if (!nv)
            return VRAM_EHOSTMEM;
        x->v = nv;
        x->cap = (uint32_t)cap;
    }
    x->v[x->n++] = (val){c, v};
    return 0;
}

/* The column for (type, pool, name), made if new. */
static int column(series *s, int type, int metric, uint32_t pool, const char *name, size_t len,
                  uint32_t *out)
{
    size_t need = len + 32;
    if (need > s->scratch_cap) {
        char *b = vram__realloc_array(s->scratch, need, 1);
        if (!b)
            return VRAM_EHOSTMEM;
        s->scratch = b;
        s->scratch_cap = need;
    }
    int pre = snprintf(s->scratch, need, "%d:%d:%u:", type, metric, pool);
    memcpy(s->scratch + pre, name, len);
    s->scratch[pre + len] = '\0';
    size_t before = s->keys.n;
    int rc = vram__strtab_get(&s->keys, s->scratch, (size_t)pre + len, out);
    if (rc)
        return rc;
    if (s->keys.n == before)
        return 0;
    if (s->keys.n > MAX_COLUMNS)
        return vram__fail(VRAM_ELIMIT, "%s: more than %u pools, owners and kinds in one series",
                          s->name, MAX_COLUMNS);
    col *cols = vram__grow(s->cols, &s->cap_cols, *out, sizeof *cols, 64);
    if (!cols)
        return VRAM_EHOSTMEM;
    s->cols = cols;
    s->cols[*out] = (col){(uint8_t)type, (uint8_t)metric, pool, s->keys.names[*out] + pre, 0};
    return 0;
}

static int pool_index(series *s, const char *name, size_t len, uint32_t *pool)
{
    return vram__strtab_get(&s->pools, name, len, pool);
}

static int cmp_val(const void *a, const void *b)
{
    const val *x = a, *y = b;
    return x->col < y->col ? -1 : x->col > y->col;
}

/* ---- downsampling ---- */

static void drop(sample *x, const sample *keep1, const sample *keep2)
{
    if (x && x != keep1 && x != keep2)
        sample_free(x);
}

static int push(series *s, sample *x, uint32_t line)
{
    /* Sorted values; a column twice in one sample is a pool, owner or kind
     * listed twice. */
    if (x->n > 1)
        qsort(x->v, x->n, sizeof *x->v, cmp_val);
    for (uint32_t i = 1; i < x->n; i++) {
        if (x->v[i].col != x->v[i - 1].col)
            continue;
        const col *c = &s->cols[x->v[i].col];
        const char *pool = s->pools.names[c->pool];
        sample_free(x);
        if (c->type == COL_OWNER || c->type == COL_KIND)
            return vram__fail(VRAM_EPARSE, "%s:%u: %s \"%s\" of pool \"%s\" is listed twice in "
                              "one sample", s->name, line, c->type == COL_OWNER ? "owner" : "kind",
                              c->name, pool);
        return vram__fail(VRAM_EPARSE, "%s:%u: pool \"%s\" is listed twice in one sample",
                          s->name, line, pool);
    }
    s->samples++;
    if (s->nb && s->filled < s->width) {
        bucket *k = &s->b[s->nb - 1];
        sample *old_lo = k->lo, *old_hi = k->hi;
        if (x->key < k->lo->key)
            k->lo = x;
        else if (x->key > k->hi->key)
            k->hi = x;
        drop(old_lo, k->lo, k->hi);
        if (old_hi != old_lo)
            drop(old_hi, k->lo, k->hi);
        drop(x, k->lo, k->hi);
        s->filled++;
        return 0;
    }
    if (s->nb == s->max_buckets) {
        for (size_t i = 0; i < s->nb / 2; i++) {
            bucket a = s->b[2 * i], c = s->b[2 * i + 1];
            bucket m = {a.lo->key <= c.lo->key ? a.lo : c.lo, a.hi->key >= c.hi->key ? a.hi : c.hi};
            drop(a.lo, m.lo, m.hi);
            if (a.hi != a.lo)
                drop(a.hi, m.lo, m.hi);
            drop(c.lo, m.lo, m.hi);
            if (c.hi != c.lo)
                drop(c.hi, m.lo, m.hi);
            s->b[i] = m;
        }
        s->nb /= 2;
        s->width *= 2;
    }
    bucket *nbuf = vram__grow(s->b, &s->cap_b, s->nb, sizeof *nbuf, 64);
    if (!nbuf) {
        sample_free(x);
        return VRAM_EHOSTMEM;
    }
    s->b = nbuf;
    s->b[s->nb++] = (bucket){x, x};
    s->filled = 1;
    return 0;
}

/* Place a sample on the x axis (see the top of the file). */
static int place(series *s, sample *x, uint32_t line)
{
    if (!s->have_run || x->elapsed_s < s->last_elapsed) {
        double start = x->time_s - x->elapsed_s;
        if (s->have_run) {
            if (start + x->elapsed_s < s->last_x)
                return vram__fail(VRAM_EPARSE,
                                  "%s:%u: elapsed_s went back from %.6g to %.6g (a restart) but "
                                  "time_s %.6f is before the previous sample's %.6f",
                                  s->name, line, s->last_elapsed, x->elapsed_s, x->time_s,
                                  s->last_x);
            s->restarts++;
        } else {
            s->first_x = start + x->elapsed_s;
        }
        s->run_start = start;
        s->have_run = 1;
    }
    x->x = s->run_start + x->elapsed_s;
    s->last_x = x->x;
    s->last_elapsed = x->elapsed_s;
    return 0;
}

/* ---- JSON Lines ---- */

static int jsonl_pool(series *s, sample *x, vram__rj *c, const cJSON *p)
{
    if (!cJSON_IsObject(p))
        return vram__rj_fail(c, NULL, "is not an object");
    const char *name;
    int rc = vram__rj_str(c, p, "pool", VRAM__RJ_REQUIRED, &name);
    uint32_t pool, col_i;
    if (rc < 0 || (rc = pool_index(s, name, strlen(name), &pool)) ||
        (rc = column(s, COL_PRESENT, 0, pool, "", 0, &col_i)) || (rc = sample_set(x, col_i, 1)))
        return rc;
    for (int m = 0; m < N_METRICS; m++) {
        double v;
        int flags = (m == M_LIVE ? VRAM__RJ_REQUIRED : VRAM__RJ_NULLABLE) | metric_flags[m];
        if ((rc = vram__rj_num(c, p, metric_names[m], flags, &v)) < 0)
            return rc;
        if (rc && ((rc = column(s, COL_METRIC, m, pool, "", 0, &col_i)) ||
                   (rc = sample_set(x, col_i, v))))
            return rc;
        if (m == M_LIVE)
            x->key += v;
    }
    for (int kinds = 0; kinds < 2; kinds++) {
        const char *list = kinds ? "kinds" : "owners", *field = kinds ? "kind" : "owner";
        const cJSON *arr;
        if ((rc = vram__rj_arr(c, p, list, VRAM__RJ_NULLABLE, &arr)) < 0)
            return rc;
        size_t i = 0;
        for (const cJSON *o = arr ? arr->child : NULL; o; o = o->next, i++) {
            size_t k = vram__rj_key(c, list);
            vram__rj_index(c, i);
            const char *oname;
            double live, budget = 0;
            if (!cJSON_IsObject(o))
                return vram__rj_fail(c, NULL, "is not an object");
            if ((rc = vram__rj_str(c, o, field, VRAM__RJ_REQUIRED, &oname)) < 0 ||
                (rc = vram__rj_num(c, o, "live_bytes", VRAM__RJ_REQUIRED | VRAM__RJ_BYTES,
                                   &live)) < 0 ||
                (!kinds && (rc = vram__rj_num(c, o, "budget_bytes",
                                              VRAM__RJ_NULLABLE | VRAM__RJ_BYTES, &budget)) < 0))
                return rc;
            vram__rj_restore(c, k);
            if ((rc = column(s, kinds ? COL_KIND : COL_OWNER, 0, pool, oname, strlen(oname),
                             &col_i)) ||
                (rc = sample_set(x, col_i, live)))
                return rc;
            if (!kinds && isfinite(budget) && budget > s->cols[col_i].budget)
                s->cols[col_i].budget = budget;
        }
    }
    return 0;
}

static int jsonl_gpu(series *s, sample *x, vram__rj *c, const cJSON *line)
{
    const cJSON *g;
    int rc = vram__rj_obj(c, line, "gpu", VRAM__RJ_NULLABLE, &g);
    if (rc <= 0)
        return rc;
    size_t k = vram__rj_key(c, "gpu");
    static const vram__rj_field gf[] = {{"index", 'n', VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG},
                                        {"name", 's', VRAM__RJ_NULLABLE}};
    cJSON *tmp = cJSON_CreateObject();
    if (!tmp)
        return VRAM_EHOSTMEM;
    rc = vram__rj_copy(c, g, gf, 2, tmp);
    double used, total;
    if (!rc && (rc = vram__rj_num(c, g, "used_bytes", VRAM__RJ_NULLABLE | VRAM__RJ_BYTES, &used)) >= 0)
        rc = vram__rj_num(c, g, "total_bytes", VRAM__RJ_NULLABLE | VRAM__RJ_BYTES, &total);
    if (rc < 0) {
        cJSON_Delete(tmp);
        return rc;
    }
    cJSON *v;
    if ((v = cJSON_DetachItemFromObjectCaseSensitive(tmp, "name")) && cJSON_IsString(v)) {
        cJSON_Delete(s->gpu_name);
        s->gpu_name = v;
    } else {
        cJSON_Delete(v);
    }
    if ((v = cJSON_DetachItemFromObjectCaseSensitive(tmp, "index")) && cJSON_IsNumber(v)) {
        cJSON_Delete(s->gpu_index);
        s->gpu_index = v;
    } else {
        cJSON_Delete(v);
    }
    cJSON_Delete(tmp);
    uint32_t ci;
    s->have_gpu = 1;
    if (isfinite(used) && ((rc = column(s, COL_GPU_USED, 0, 0, "", 0, &ci)) ||
                           (rc = sample_set(x, ci, used))))
        return rc;
    if (isfinite(total) && ((rc = column(s, COL_GPU_TOTAL, 0, 0, "", 0, &ci)) ||
                            (rc = sample_set(x, ci, total))))
        return rc;
    const cJSON *procs;
    if ((rc = vram__rj_arr(c, g, "processes", VRAM__RJ_NULLABLE, &procs)) <= 0) {
        vram__rj_restore(c, k);
        return rc;
    }
    cJSON *list = cJSON_CreateArray();
    static const vram__rj_field pf[] = {{"pid", 'n', VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG},
                                        {"name", 's', VRAM__RJ_NULLABLE},
                                        {"used_bytes", 'n', VRAM__RJ_NULLABLE | VRAM__RJ_BYTES}};
    size_t i = 0;
    for (const cJSON *p = procs->child; list && p; p = p->next, i++) {
        size_t k2 = vram__rj_key(c, "processes");
        vram__rj_index(c, i);
        cJSON *o = cJSON_CreateObject();
        if (!o) {
            rc = VRAM_EHOSTMEM;
        } else if (!cJSON_IsObject(p)) {
            rc = vram__rj_fail(c, NULL, "is not an object");
        } else {
            rc = vram__rj_copy(c, p, pf, 3, o);
        }
        if (rc) {
            cJSON_Delete(o);
            cJSON_Delete(list);
            return rc;
        }
        cJSON_AddItemToArray(list, o);
        vram__rj_restore(c, k2);
    }
    vram__rj_restore(c, k);
    if (!list)
        return VRAM_EHOSTMEM;
    cJSON_Delete(s->processes);
    s->processes = list;
    return 0;
}

static int jsonl_sample(series *s, vram__rj *c, const cJSON *j)
{
    sample *x = sample_new();
    if (!x)
        return VRAM_EHOSTMEM;
    int rc;
    const cJSON *pools;
    const char *unavail;
    double contexts;
    if ((rc = vram__rj_num(c, j, "time_s", VRAM__RJ_REQUIRED, &x->time_s)) < 0 ||
        (rc = vram__rj_num(c, j, "elapsed_s", VRAM__RJ_REQUIRED | VRAM__RJ_NONNEG,
                           &x->elapsed_s)) < 0 ||
        (rc = vram__rj_num(c, j, "iteration", VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG,
                           &x->iteration)) < 0 ||
        (rc = vram__rj_num(c, j, "contexts", VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG, &contexts)) < 0 ||
        (rc = vram__rj_arr(c, j, "pools", VRAM__RJ_REQUIRED, &pools)) < 0 ||
        (rc = vram__rj_str(c, j, "gpu_unavailable", VRAM__RJ_NULLABLE, &unavail)) < 0)
        goto fail;
    size_t i = 0;
    for (const cJSON *p = pools->child; p; p = p->next, i++) {
        size_t k = vram__rj_key(c, "pools");
        vram__rj_index(c, i);
        if ((rc = jsonl_pool(s, x, c, p)))
            goto fail;
        vram__rj_restore(c, k);
    }
    uint32_t ci;
    if (isfinite(contexts)) {
        s->have_contexts = 1;
        if ((rc = column(s, COL_CONTEXTS, 0, 0, "", 0, &ci)) || (rc = sample_set(x, ci, contexts)))
            goto fail;
    }
    if ((rc = jsonl_gpu(s, x, c, j)))
        goto fail;
    if (unavail) {
        char *u = vram__strdup(unavail);
        if (!u) {
            rc = VRAM_EHOSTMEM;
            goto fail;
        }
        free(s->gpu_unavailable);
        s->gpu_unavailable = u;
    }
    if ((rc = place(s, x, c->line)))
        goto fail;
    return push(s, x, c->line);
fail:
    sample_free(x);
    return rc;
}

static int jsonl_alert(series *s, vram__rj *c, const cJSON *j)
{
    static const vram__rj_field af[] = {
        {"time_s", 'n', VRAM__RJ_REQUIRED},
        {"elapsed_s", 'n', VRAM__RJ_REQUIRED | VRAM__RJ_NONNEG},
        {"iteration", 'n', VRAM__RJ_NULLABLE | VRAM__RJ_NONNEG},
        {"alert", 's', VRAM__RJ_REQUIRED},
        {"level", 's', VRAM__RJ_REQUIRED},
        {"pool", 's', VRAM__RJ_NULLABLE},
        {"owner", 's', VRAM__RJ_NULLABLE},
        {"value", 'n', VRAM__RJ_NULLABLE},
        {"threshold", 'n', VRAM__RJ_NULLABLE},
        {"message", 's', VRAM__RJ_REQUIRED},
    };
    cJSON *a = cJSON_CreateObject();
    if (!a)
        return VRAM_EHOSTMEM;
    int rc = vram__rj_copy(c, j, af, VRAM__ARRAY_LEN(af), a);
    if (rc) {
        cJSON_Delete(a);
        return rc;
    }
    if (cJSON_GetArraySize(s->alerts) >= (int)MAX_ALERTS) {
        s->alerts_dropped++;
        cJSON_Delete(a);
        return 0;
    }
    double t = cJSON_GetObjectItemCaseSensitive(a, "time_s")->valuedouble;
    double e = cJSON_GetObjectItemCaseSensitive(a, "elapsed_s")->valuedouble;
    /* On the samples' axis: the current run's start plus its elapsed time. */
    double x = s->have_run ? s->run_start + e : t;
    if (!cJSON_AddNumberToObject(a, "x", x) || !cJSON_AddNumberToObject(a, "line", c->line)) {
        cJSON_Delete(a);
        return VRAM_EHOSTMEM;
    }
    cJSON_AddItemToArray(s->alerts, a);
    return 0;
}

static int jsonl_read(series *s, vram__rsrc *src)
{
    const char *t;
    size_t n;
    int rc;
    while ((rc = vram__rsrc_line(src, &t, &n)) == 1) {
        if (src->line == 1 && n >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0) {
            t += 3;
            n -= 3;
        }
        size_t i = 0;
        while (i < n && strchr(" \t\r", t[i]))
            i++;
        if (i == n)
            continue;
        cJSON *j;
        if ((rc = vram__rj_parse(s->name, src->line, t, n, &j)))
            return rc;
        vram__rj c = {.name = s->name, .line = src->line};
        const char *type;
        if (!cJSON_IsObject(j))
            rc = vram__rj_fail(&c, NULL, "is JSON but not an object");
        else if ((rc = vram__rj_str(&c, j, "type", VRAM__RJ_REQUIRED, &type)) >= 0)
            rc = strcmp(type, "sample") == 0  ? jsonl_sample(s, &c, j)
                 : strcmp(type, "alert") == 0 ? jsonl_alert(s, &c, j)
                                              : (s->ignored++, 0);
        cJSON_Delete(j);
        if (rc)
            return rc;
    }
    return rc;
}

/* ---- CSV ---- */

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
#undef FIELD_NAME
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
    if ((rc = pool_index(s, f[C_POOL].p, f[C_POOL].n, &pool)) ||
        (rc = column(s, COL_PRESENT, 0, pool, "", 0, &present)))
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
            if ((rc = place(s, x, line - 1))) {
                sample_free(x);
                return rc;
            }
            if ((rc = push(s, x, line - 1))) /* frees x on error */
                return rc;
        }
        if (!(x = s->cur = sample_new()))
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
        if ((rc = column(s, kind ? COL_KIND : COL_OWNER, 0, pool, nm->p, nm->n, &ci)))
            return rc;
        return sample_set(x, ci, live);
    }
    if ((rc = sample_set(x, present, 1)) || (rc = column(s, COL_METRIC, M_LIVE, pool, "", 0, &ci)) ||
        (rc = sample_set(x, ci, live)))
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
            if ((rc = column(s, type, 0, 0, "", 0, &ci)))
                return rc;
            int seen = 0;
            for (uint32_t k = 0; k < x->n; k++)
                seen |= x->v[k].col == ci;
            s->have_gpu = 1;
            if (seen)
                continue;
        } else if ((rc = column(s, type, opt[i].metric, pool, "", 0, &ci))) {
            return rc;
        }
        if ((rc = sample_set(x, ci, v)))
            return rc;
    }
    return 0;
}

static int csv_read(series *s, vram__rsrc *src)
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
        if ((rc = place(s, x, src->line)))
            sample_free(x);
        else
            rc = push(s, x, src->line);
    }
    return rc;
}

/* ---- the page's JSON ---- */

static int cmp_x(const void *a, const void *b)
{
    const sample *x = *(sample *const *)a, *y = *(sample *const *)b;
    return x->x < y->x ? -1 : x->x > y->x;
}

static const val *find(const sample *x, uint32_t c)
{
    val key = {c, 0};
    return x->n ? bsearch(&key, x->v, x->n, sizeof *x->v, cmp_val) : NULL;
}

/* The column's values over the kept samples; owners and kinds read 0 where
 * their pool was sampled without them, everything null where not sampled. */
static cJSON *column_json(const series *s, sample **pts, size_t n, uint32_t c, uint32_t present)
{
    cJSON *a = cJSON_CreateArray();
    const col *cc = &s->cols[c];
    int zero = cc->type == COL_OWNER || cc->type == COL_KIND;
    for (size_t i = 0; a && i < n; i++) {
        const val *v = find(pts[i], c);
        double d = v ? v->v : (zero && find(pts[i], present)) ? 0 : NAN;
        cJSON *num = vram__rj_number(d);
        if (!num) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, num);
    }
    return a;
}

static cJSON *axis_json(sample **pts, size_t n, size_t off)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *num = vram__rj_number(*(const double *)((const char *)pts[i] + off));
        if (!num) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, num);
    }
    return a;
}

static int add(cJSON *o, const char *key, cJSON *item)
{
    if (!item || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        return VRAM_EHOSTMEM;
    }
    return 0;
}

static cJSON *series_json(series *s)
{
    size_t cap = s->nb * 2, n = 0;
    sample **pts = vram__calloc(cap ? cap : 1, sizeof *pts);
    cJSON *o = cJSON_CreateObject();
    if (!pts || !o)
        goto oom;
    for (size_t i = 0; i < s->nb; i++) {
        pts[n++] = s->b[i].lo;
        if (s->b[i].hi != s->b[i].lo)
            pts[n++] = s->b[i].hi;
    }
    qsort(pts, n, sizeof *pts, cmp_x);
    int rc = 0;
    rc |= add(o, "format", cJSON_CreateString(s->csv ? "csv" : "jsonl"));
    rc |= add(o, "samples", cJSON_CreateNumber((double)s->samples));
    rc |= add(o, "points", cJSON_CreateNumber((double)n));
    rc |= add(o, "downsampled", cJSON_CreateBool(n < s->samples));
    rc |= add(o, "ignored_lines", cJSON_CreateNumber((double)s->ignored));
    rc |= add(o, "restarts", cJSON_CreateNumber((double)s->restarts));
    rc |= add(o, "x", axis_json(pts, n, offsetof(sample, x)));
    rc |= add(o, "time_s", axis_json(pts, n, offsetof(sample, time_s)));
    rc |= add(o, "elapsed_s", axis_json(pts, n, offsetof(sample, elapsed_s)));
    rc |= add(o, "iteration", axis_json(pts, n, offsetof(sample, iteration)));
    cJSON *pools = cJSON_CreateArray();
    rc |= add(o, "pools", pools);
    for (uint32_t p = 0; !rc && p < s->pools.n; p++) {
        cJSON *po = cJSON_CreateObject(), *owners = cJSON_CreateArray(), *kinds = cJSON_CreateArray();
        rc |= add(po, "pool", cJSON_CreateString(s->pools.names[p]));
        uint32_t present = UINT32_MAX;
        for (uint32_t c = 0; c < s->keys.n; c++)
            if (s->cols[c].pool == p && s->cols[c].type == COL_PRESENT)
                present = c;
        for (int m = 0; !rc && m < N_METRICS; m++) {
            uint32_t c = UINT32_MAX;
            for (uint32_t k = 0; k < s->keys.n; k++)
                if (s->cols[k].pool == p && s->cols[k].type == COL_METRIC && s->cols[k].metric == m)
                    c = k;
            rc |= add(po, metric_names[m], c == UINT32_MAX ? cJSON_CreateNull()
                                                            : column_json(s, pts, n, c, present));
        }
        for (uint32_t c = 0; !rc && c < s->keys.n; c++) {
            const col *cc = &s->cols[c];
            if (cc->pool != p || (cc->type != COL_OWNER && cc->type != COL_KIND))
                continue;
            cJSON *e = cJSON_CreateObject();
            rc |= add(e, "name", cJSON_CreateString(cc->name));
            rc |= add(e, "live_bytes", column_json(s, pts, n, c, present));
            if (cc->type == COL_OWNER)
                rc |= add(e, "budget_bytes", cJSON_CreateNumber(cc->budget));
            if (!e || !cJSON_AddItemToArray(cc->type == COL_OWNER ? owners : kinds, e)) {
                cJSON_Delete(e);
                rc = VRAM_EHOSTMEM;
            }
        }
        rc |= add(po, "owners", owners);
        rc |= add(po, "kinds", kinds);
        if (!po || !cJSON_AddItemToArray(pools, po)) {
            cJSON_Delete(po);
            rc = VRAM_EHOSTMEM;
        }
    }
    cJSON *gpu = s->have_gpu ? cJSON_CreateObject() : cJSON_CreateNull();
    rc |= add(o, "gpu", gpu);
    if (!rc && s->have_gpu) {
        for (int t = COL_GPU_USED; t <= COL_GPU_TOTAL; t++) {
            uint32_t c = UINT32_MAX;
            for (uint32_t k = 0; k < s->keys.n; k++)
                if (s->cols[k].type == t)
                    c = k;
            rc |= add(gpu, t == COL_GPU_USED ? "used_bytes" : "total_bytes",
                      c == UINT32_MAX ? cJSON_CreateNull() : column_json(s, pts, n, c, 0));
        }
        rc |= add(gpu, "name", s->gpu_name ? cJSON_Duplicate(s->gpu_name, 1) : cJSON_CreateNull());
        rc |= add(gpu, "index", s->gpu_index ? cJSON_Duplicate(s->gpu_index, 1) : cJSON_CreateNull());
        rc |= add(gpu, "processes", s->processes ? cJSON_Duplicate(s->processes, 1)
                                                 : cJSON_CreateArray());
    }
    rc |= add(o, "gpu_unavailable", s->gpu_unavailable ? cJSON_CreateString(s->gpu_unavailable)
                                                       : cJSON_CreateNull());
    if (!rc && s->have_contexts) {
        uint32_t c = 0;
        for (uint32_t k = 0; k < s->keys.n; k++)
            if (s->cols[k].type == COL_CONTEXTS)
                c = k;
        rc |= add(o, "contexts", column_json(s, pts, n, c, 0));
    }
    rc |= add(o, "alerts", cJSON_Duplicate(s->alerts, 1));
    rc |= add(o, "alerts_dropped", cJSON_CreateNumber((double)s->alerts_dropped));
    if (rc)
        goto oom;
    free(pts);
    return o;
oom:
    free(pts);
    cJSON_Delete(o);
    vram__fail(VRAM_EHOSTMEM, "out of host memory building the page's data for %s", s->name);
    return NULL;
}

static void series_free(series *s)
{
    for (size_t i = 0; i < s->nb; i++) {
        if (s->b[i].hi != s->b[i].lo)
            sample_free(s->b[i].hi);
        sample_free(s->b[i].lo);
    }
    free(s->b);
    sample_free(s->cur);
    vram__strtab_free(&s->pools);
    vram__strtab_free(&s->keys);
    free(s->cols);
    free(s->scratch);
    cJSON_Delete(s->alerts);
    cJSON_Delete(s->processes);
    cJSON_Delete(s->gpu_name);
    cJSON_Delete(s->gpu_index);
    free(s->gpu_unavailable);
}

int vram__report_series(vram__rsrc *src, int csv, uint32_t max_points, cJSON **out, char *summary,
                        size_t cap)
{
    *out = NULL;
    series s = {.name = src->name, .csv = csv, .max_buckets = max_points / 2, .width = 1};
    if (s.max_buckets < 2)
        s.max_buckets = 2;
    s.max_buckets &= ~1u; /* merged pairwise */
    s.alerts = cJSON_CreateArray();
    int rc = s.alerts ? (csv ? csv_read(&s, src) : jsonl_read(&s, src)) : VRAM_EHOSTMEM;
    if (!rc && s.samples == 0)
        rc = vram__fail(VRAM_EPARSE, "%s: no samples in %u lines%s", src->name, src->line,
                        csv ? "" : " (a sample is a line {\"type\":\"sample\",...})");
    if (!rc)
        *out = series_json(&s);
    if (!rc && !*out)
        rc = VRAM_EHOSTMEM;
    if (!rc) {
        char pools[128] = "";
        size_t k = 0;
        for (uint32_t p = 0; p < s.pools.n && k + 8 < sizeof pools; p++) {
            int w = snprintf(pools + k, sizeof pools - k, "%s\"%s\"", p ? ", " : "",
                             s.pools.names[p]);
            if (w < 0 || (size_t)w >= sizeof pools - k) {
                snprintf(pools + (sizeof pools - 5), 5, "...");
                break;
            }
            k += (size_t)w;
        }
        size_t owners = 0;
        for (uint32_t c = 0; c < s.keys.n; c++)
            owners += s.cols[c].type == COL_OWNER;
        unsigned long long alerts =
            (unsigned long long)cJSON_GetArraySize(s.alerts) + s.alerts_dropped;
        char down[48] = "";
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*out, "downsampled")))
            snprintf(down, sizeof down, "; %d points in the page",
                     (int)cJSON_GetObjectItemCaseSensitive(*out, "points")->valuedouble);
        snprintf(summary, cap,
                 "sample series (%s): %llu samples over %.1f s, pool%s %s, %zu owner%s, %llu "
                 "alert%s%s",
                 csv ? "CSV" : "JSON Lines", (unsigned long long)s.samples, s.last_x - s.first_x,
                 s.pools.n == 1 ? "" : "s", pools, owners, owners == 1 ? "" : "s", alerts,
                 alerts == 1 ? "" : "s", down);
    }
    series_free(&s);
    return rc;
}
