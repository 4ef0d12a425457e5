/* src/observe/report_series.c - reading a sample series (the monitor's JSON
 * Lines or CSV) for the report page, downsampled as it is read: the series'
 * model (report_series_internal.h), its downsampling and placing on the x
 * axis, the page's JSON, and vram__report_series(), which runs one of the
 * readers (report_series_jsonl.c, report_series_csv.c) over the input.
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

#include "report_series_internal.h"

const char *const vram__rseries_metric_names[] = {VRAM__SERIES_POOL_FIELDS(FIELD_NAME)};

#define MAX_COLUMNS 65536u

void vram__rseries_sample_free(sample *x)
{
    if (x) {
        free(x->v);
        free(x);
    }
}

sample *vram__rseries_sample_new(void)
{
    sample *x = vram__calloc(1, sizeof *x);
    if (x)
        x->iteration = NAN;
    return x;
}

int vram__rseries_sample_set(sample *x, uint32_t c, double v)
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
int vram__rseries_column(series *s, int type, int metric, uint32_t pool, const char *name,
                         size_t len, uint32_t *out)
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

int vram__rseries_pool_index(series *s, const char *name, size_t len, uint32_t *pool)
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
        vram__rseries_sample_free(x);
}

int vram__rseries_push(series *s, sample *x, uint32_t line)
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
        vram__rseries_sample_free(x);
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
        vram__rseries_sample_free(x);
        return VRAM_EHOSTMEM;
    }
    s->b = nbuf;
    s->b[s->nb++] = (bucket){x, x};
    s->filled = 1;
    return 0;
}

/* Place a sample on the x axis (see the top of the file). */
int vram__rseries_place(series *s, sample *x, uint32_t line)
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
            rc |= add(po, vram__rseries_metric_names[m],
                      c == UINT32_MAX ? cJSON_CreateNull() : column_json(s, pts, n, c, present));
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
            vram__rseries_sample_free(s->b[i].hi);
        vram__rseries_sample_free(s->b[i].lo);
    }
    free(s->b);
    vram__rseries_sample_free(s->cur);
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
    int rc = s.alerts ? (csv ? vram__rseries_csv_read(&s, src) : vram__rseries_jsonl_read(&s, src))
                      : VRAM_EHOSTMEM;
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
