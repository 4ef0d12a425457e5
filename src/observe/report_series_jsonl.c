/* src/observe/report_series_jsonl.c - the sample series reader for the
 * monitor's JSON Lines: one JSON object a line, {"type":"sample",...} a
 * sample (its pools with their owners and kinds, the GPU, the CUDA
 * contexts), {"type":"alert",...} an alert, any other type ignored (and
 * counted). Each sample is placed and pushed into the series as it is read
 * (report_series.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_series_internal.h"

/* How a metric is read: the flags of its kind (metric m is read with
 * metric_flags[m]). */
#define FIELD_FLAGS(name, kind, header) READ_##kind,
static const int metric_flags[] = {VRAM__SERIES_POOL_FIELDS(FIELD_FLAGS)};
#undef FIELD_FLAGS

#define MAX_ALERTS 10000u

static int jsonl_pool(series *s, sample *x, vram__rj *c, const cJSON *p)
{
    if (!cJSON_IsObject(p))
        return vram__rj_fail(c, NULL, "is not an object");
    const char *name;
    int rc = vram__rj_str(c, p, "pool", VRAM__RJ_REQUIRED, &name);
    uint32_t pool, col_i;
    if (rc < 0 || (rc = vram__rseries_pool_index(s, name, strlen(name), &pool)) ||
        (rc = vram__rseries_column(s, COL_PRESENT, 0, pool, "", 0, &col_i)) ||
        (rc = vram__rseries_sample_set(x, col_i, 1)))
        return rc;
    for (int m = 0; m < N_METRICS; m++) {
        double v;
        int flags = (m == M_LIVE ? VRAM__RJ_REQUIRED : VRAM__RJ_NULLABLE) | metric_flags[m];
        if ((rc = vram__rj_num(c, p, vram__rseries_metric_names[m], flags, &v)) < 0)
            return rc;
        if (rc && ((rc = vram__rseries_column(s, COL_METRIC, m, pool, "", 0, &col_i)) ||
                   (rc = vram__rseries_sample_set(x, col_i, v))))
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
            if ((rc = vram__rseries_column(s, kinds ? COL_KIND : COL_OWNER, 0, pool, oname,
                                           strlen(oname), &col_i)) ||
                (rc = vram__rseries_sample_set(x, col_i, live)))
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
    if (isfinite(used) && ((rc = vram__rseries_column(s, COL_GPU_USED, 0, 0, "", 0, &ci)) ||
                           (rc = vram__rseries_sample_set(x, ci, used))))
        return rc;
    if (isfinite(total) && ((rc = vram__rseries_column(s, COL_GPU_TOTAL, 0, 0, "", 0, &ci)) ||
                            (rc = vram__rseries_sample_set(x, ci, total))))
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
    sample *x = vram__rseries_sample_new();
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
        if ((rc = vram__rseries_column(s, COL_CONTEXTS, 0, 0, "", 0, &ci)) ||
            (rc = vram__rseries_sample_set(x, ci, contexts)))
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
    if ((rc = vram__rseries_place(s, x, c->line)))
        goto fail;
    return vram__rseries_push(s, x, c->line);
fail:
    vram__rseries_sample_free(x);
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

int vram__rseries_jsonl_read(series *s, vram__rsrc *src)
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
