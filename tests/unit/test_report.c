/* tests/unit/test_report.c - the report's inputs and outputs
 * (include/vramkit/report.h):
 *  - a snapshot taken from a real pool (owners, kinds, live, pending and free
 *    blocks) reads back block for block: addresses, sizes, states and owners;
 *    with VRAM_REPORT_FIXTURE=PATH the test also writes that snapshot to PATH
 *    (how tests/data/report/snapshot.json was made);
 *  - inputs are recognised by content (JSON Lines, CSV, OOM report,
 *    snapshot), and an unknown or empty one is refused with its name;
 *  - malformed inputs are refused with the name, the line (or the JSON path)
 *    and the problem, and leave the report as it was;
 *  - the same samples as JSON Lines and as CSV give the same series;
 *  - a CSV is read by its header's names: one written before pending_bytes
 *    was added reads as the same series without pending bytes, columns in
 *    another order read the same, and an unknown or repeated column is
 *    refused with its name and place;
 *  - downsampling: up to max_points samples nothing is lost; beyond, at most
 *    max_points are kept and the peak is among them;
 *  - a snapshot over max_blocks has touching blocks of one owner merged;
 *  - the page: the data in place of the placeholder, with '<' escaped so no
 *    input can close the script; written through a temporary file that never
 *    survives an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "vramkit.h"

#define MiB (1024ull * 1024)

/* ---- buffers, reports and checks ------------------------------------- */

static int buf_printf(vram_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_printf(vram_buffer *b, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof line);
    return vram_write_buffer(b, line, (size_t)n);
}

static vram_report *new_report(uint32_t max_points, uint32_t max_blocks)
{
    vram_report_opts o;
    vram_report_opts_init(&o);
    o.max_points = max_points;
    o.max_blocks = max_blocks;
    o.generated_time_s = 1764456000;
    vram_report *r;
    assert_int_equal(vram_report_create(&o, &r), 0);
    return r;
}

/* The report's data, parsed back. */
static cJSON *data_of(vram_report *r)
{
    vram_buffer b = {0};
    assert_int_equal(vram_report_print(r, vram_write_buffer, &b, VRAM_PRINT_JSON), 0);
    cJSON *j = cJSON_Parse(b.data);
    assert_non_null(j);
    vram_buffer_free(&b);
    return j;
}

static int add_text(vram_report *r, const char *name, const char *text, vram_report_input_info *info)
{
    return vram_report_add_data(r, name, text, strlen(text), info);
}

/* Add must fail with VRAM_EPARSE and a sentence containing every `want`. */
static void refuse(const char *name, const char *text, const char *want1, const char *want2)
{
    vram_report *r = new_report(0, 0);
    int rc = add_text(r, name, text, NULL);
    if (rc != VRAM_EPARSE || !strstr(vram_last_error(), want1) ||
        (want2 && !strstr(vram_last_error(), want2)))
        fail_msg("%s: rc %d, \"%s\"; expected EPARSE with \"%s\"%s%s", name, rc, vram_last_error(),
                 want1, want2 ? " and " : "", want2 ? want2 : "");
    assert_int_equal(vram_report_inputs(r), 0);
    vram_report_destroy(r);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const cJSON *item(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\"", key);
    return v;
}

/* ---- a real snapshot ------------------------------------------------- */

#define HOSTILE "<img src=x onerror=\"window.__pwned=1\">&amp; \xc3\xa9"

/* A pool with a model's weights, three cameras and an owner whose name is
 * markup, some blocks freed (holes), some freed on another stream (pending:
 * on sim, a free stays pending until that stream's next operation). */
static void *held[32]; /* the blocks make_pool leaves live, for the end */
static int n_held;

static vram_pool *make_pool(void)
{
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.name = "inference";
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    vram_owner model, cam[3], bad;
    assert_int_equal(vram_owner_create(p, "model:resnet50", 0, &model), 0);
    assert_int_equal(vram_owner_create(p, "cam01", 256 * MiB, &cam[0]), 0);
    assert_int_equal(vram_owner_create(p, "cam02", 256 * MiB, &cam[1]), 0);
    assert_int_equal(vram_owner_create(p, "cam03", 256 * MiB, &cam[2]), 0);
    assert_int_equal(vram_owner_create(p, HOSTILE, 0, &bad), 0);
    void *w[6], *x[24];
    vram_stream s1 = (vram_stream)0x1, s2 = (vram_stream)0x2, s3 = (vram_stream)0x3;
    for (int i = 0; i < 6; i++)
        assert_int_equal(vram_pool_alloc(p, (uint64_t)(3 + i) * MiB + 4096 * (uint64_t)i, model,
                                         VRAM_KIND_WEIGHTS, NULL, &w[i]),
                         0);
    for (int i = 0; i < 24; i++) {
        vram_kind k = i % 3 == 0 ? VRAM_KIND_FRAMES : i % 3 == 1 ? VRAM_KIND_ACTIVATIONS
                                                                 : VRAM_KIND_IO;
        uint64_t size = (uint64_t)(i % 5 + 1) * 700 * 1024 + (uint64_t)i * 512;
        assert_int_equal(vram_pool_alloc(p, size, i < 20 ? cam[i % 3] : bad, k,
                                         i % 2 ? s1 : s2, &x[i]),
                         0);
    }
    /* Holes: every fourth camera block freed on its own stream (reusable at
     * once), and two freed on streams that do nothing after (pending). */
    for (int i = 0; i < 24; i += 4)
        assert_int_equal(vram_pool_free(p, x[i], i % 2 ? s1 : s2), 0);
    assert_int_equal(vram_pool_free(p, x[5], s2), 0);
    assert_int_equal(vram_pool_free(p, x[7], s3), 0);
    n_held = 0;
    for (int i = 0; i < 6; i++)
        held[n_held++] = w[i];
    for (int i = 0; i < 24; i++)
        if (i % 4 && i != 5 && i != 7)
            held[n_held++] = x[i];
    return p;
}

static void snapshot_from_pool(void **state)
{
    (void)state;
    vram_pool *p = make_pool();
    vram_buffer snap = {0};
    assert_int_equal(vram_pool_snapshot(p, vram_write_buffer, &snap, 0), 0);
    const char *fixture = getenv("VRAM_REPORT_FIXTURE");
    if (fixture && *fixture) {
        FILE *f = fopen(fixture, "w");
        assert_non_null(f);
        /* Indented, as a person would keep it; the reader takes both. */
        cJSON *j = cJSON_Parse(snap.data);
        char *text = cJSON_Print(j);
        fputs(text, f);
        fputc('\n', f);
        fclose(f);
        cJSON_free(text);
        cJSON_Delete(j);
    }
    cJSON *orig = cJSON_Parse(snap.data);
    assert_non_null(orig);

    vram_report *r = new_report(0, 0);
    vram_report_input_info info;
    assert_int_equal(add_text(r, "snap.json", snap.data, &info), 0);
    assert_int_equal(info.type, VRAM_REPORT_SNAPSHOT);
    assert_non_null(strstr(info.summary, "snapshot of pool \"inference\""));
    assert_non_null(strstr(info.summary, "5 owners"));
    cJSON *d = data_of(r);
    const cJSON *s = cJSON_GetArrayItem(item(d, "snapshots"), 0);
    assert_string_equal(item(s, "pool")->valuestring, "inference");
    assert_string_equal(item(s, "input")->valuestring, "snap.json");
    const cJSON *ob = item(orig, "blocks"), *b = item(s, "blocks");
    int n = cJSON_GetArraySize(ob);
    assert_true(n > 20);
    assert_int_equal(num(s, "blocks_in_file"), n);
    assert_int_equal(num(s, "blocks_drawn"), n);
    assert_string_equal(item(s, "merged")->valuestring, "none");
    unsigned long long base = strtoull(item(s, "base")->valuestring, NULL, 16);
    const cJSON *owners = item(s, "block_owners");
    /* Every block of the snapshot is in the page, in address order. */
    int pending = 0, live = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *blk = cJSON_GetArrayItem(ob, i);
        unsigned long long addr = strtoull(item(blk, "address")->valuestring, NULL, 16);
        int j = -1;
        for (int k = 0; k < n; k++)
            if ((unsigned long long)cJSON_GetArrayItem(item(b, "offset"), k)->valuedouble + base ==
                addr)
                j = k;
        assert_true(j >= 0);
        assert_int_equal(cJSON_GetArrayItem(item(b, "size"), j)->valuedouble, num(blk, "size"));
        const char *st = item(blk, "state")->valuestring;
        int stt = (int)cJSON_GetArrayItem(item(b, "state"), j)->valuedouble;
        assert_string_equal(st, stt == 0 ? "live" : stt == 1 ? "pending" : "free");
        pending += stt == 1;
        live += stt == 0;
        int o = (int)cJSON_GetArrayItem(item(b, "owner"), j)->valuedouble;
        if (cJSON_IsString(item(blk, "owner")))
            assert_string_equal(cJSON_GetArrayItem(owners, o)->valuestring,
                                item(blk, "owner")->valuestring);
        else
            assert_int_equal(o, -1);
    }
    assert_int_equal(pending, 2);
    assert_int_equal(live, 6 + 24 - 6 - 2);
    for (int k = 1; k < n; k++)
        assert_true(cJSON_GetArrayItem(item(b, "offset"), k)->valuedouble >
                    cJSON_GetArrayItem(item(b, "offset"), k - 1)->valuedouble);
    /* The per-owner totals of the snapshot come through. */
    const cJSON *so = item(s, "owners");
    assert_int_equal(cJSON_GetArraySize(so), 6); /* and the pool's "default" */
    vram_usage_stats u;
    vram_owner cam1;
    assert_int_equal(vram_owner_find(p, "cam01", &cam1), 0);
    assert_int_equal(vram_owner_stats_get(p, cam1, &u), 0);
    int found = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, so) if (strcmp(item(e, "name")->valuestring, "cam01") == 0)
    {
        assert_int_equal(num(e, "live_bytes"), u.live_bytes);
        assert_int_equal(num(e, "budget_bytes"), 256 * MiB);
        found = 1;
    }
    assert_true(found);

    /* Over max_blocks: touching blocks of one owner are merged, bytes kept. */
    vram_report *small = new_report(0, 4);
    assert_int_equal(add_text(small, "snap.json", snap.data, NULL), 0);
    cJSON *d2 = data_of(small);
    const cJSON *s2 = cJSON_GetArrayItem(item(d2, "snapshots"), 0);
    int drawn = (int)num(s2, "blocks_drawn");
    assert_true(drawn < n);
    assert_string_not_equal(item(s2, "merged")->valuestring, "none");
    double total = 0, total2 = 0, count = 0;
    for (int k = 0; k < n; k++)
        total += cJSON_GetArrayItem(item(b, "size"), k)->valuedouble;
    for (int k = 0; k < drawn; k++) {
        total2 += cJSON_GetArrayItem(item(item(s2, "blocks"), "size"), k)->valuedouble;
        count += cJSON_GetArrayItem(item(item(s2, "blocks"), "count"), k)->valuedouble;
    }
    assert_true(total == total2);
    assert_int_equal(count, n);

    cJSON_Delete(d2);
    vram_report_destroy(small);
    cJSON_Delete(d);
    cJSON_Delete(orig);
    vram_report_destroy(r);
    vram_buffer_free(&snap);
    for (int i = 0; i < n_held; i++)
        assert_int_equal(vram_pool_free(p, held[i], NULL), 0);
    assert_int_equal(vram_pool_destroy(p), 0);
}

/* ---- series ---------------------------------------------------------- */

/* The monitor's CSV header (without its newline), and the one that
 * versions before pending_bytes wrote. Written out here, not taken from the
 * library: the test pins the format. */
#define CSV_COLUMNS                                                                                \
    "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,reserved_bytes,"       \
    "pending_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes,gpu_total_bytes"
#define CSV_COLUMNS_OLD                                                                            \
    "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,reserved_bytes,"       \
    "fragmentation_ratio,largest_free_bytes,gpu_used_bytes,gpu_total_bytes"

/* n samples of one pool with two owners; owner b is absent (zero) at even
 * samples; a spike of `spike` live bytes at sample spike_at. The CSV has
 * the pending_bytes column if csv_pending, else it is the older format. */
static void make_series(vram_buffer *jl, vram_buffer *csv, int n, int spike_at, double spike,
                        int csv_pending)
{
    if (csv)
        buf_printf(csv, "%s\n", csv_pending ? CSV_COLUMNS : CSV_COLUMNS_OLD);
    for (int i = 0; i < n; i++) {
        double t = 1764456000.0 + i * 0.5, e = i * 0.5;
        double a = 1000000 + (i % 7) * 1000, bb = i % 2 ? 5000 + i : 0;
        if (i == spike_at)
            a = spike;
        double live = a + bb, reserved = 4 * MiB, frag = (i % 10) / 10.0, pending = (i % 3) * 4096;
        if (jl) {
            buf_printf(jl,
                       "{\"type\":\"sample\",\"time_s\":%.3f,\"elapsed_s\":%.3f,\"iteration\":%d,"
                       "\"contexts\":1,\"pools\":[{\"pool\":\"p\",\"live_bytes\":%.0f,"
                       "\"peak_live_bytes\":%.0f,\"reserved_bytes\":%.0f,\"pending_bytes\":%.0f,"
                       "\"fragmentation_ratio\":%.2f,\"largest_free_bytes\":1024,\"owners\":["
                       "{\"owner\":\"a,\\\"x\\\"\",\"live_bytes\":%.0f,\"budget_bytes\":0}",
                       t, e, i, live, live, reserved, pending, frag, a);
            if (bb)
                buf_printf(jl, ",{\"owner\":\"b\",\"live_bytes\":%.0f,\"budget_bytes\":8000000}", bb);
            buf_printf(jl, "],\"kinds\":[{\"kind\":\"activations\",\"live_bytes\":%.0f}]}],"
                           "\"gpu\":{\"index\":0,\"name\":\"NVIDIA H200\",\"total_bytes\":1000000000,"
                           "\"used_bytes\":%.0f,\"processes\":[]}}\n",
                       live, 500000000.0 + i);
        }
        if (csv) {
            /* After an owner's or a kind's live bytes, the other fields empty. */
            const char *rest = csv_pending ? ",,,,,,," : ",,,,,,";
            if (csv_pending)
                buf_printf(csv, "%.3f,%.3f,%d,p,,,%.0f,%.0f,%.0f,%.0f,%.2f,1024,%.0f,1000000000\n",
                           t, e, i, live, live, reserved, pending, frag, 500000000.0 + i);
            else
                buf_printf(csv, "%.3f,%.3f,%d,p,,,%.0f,%.0f,%.0f,%.2f,1024,%.0f,1000000000\n", t,
                           e, i, live, live, reserved, frag, 500000000.0 + i);
            buf_printf(csv, "%.3f,%.3f,%d,p,\"a,\"\"x\"\"\",,%.0f%s\n", t, e, i, a, rest);
            if (bb)
                buf_printf(csv, "%.3f,%.3f,%d,p,b,,%.0f%s\n", t, e, i, bb, rest);
            buf_printf(csv, "%.3f,%.3f,%d,p,,activations,%.0f%s\n", t, e, i, live, rest);
        }
    }
}

static const cJSON *pool0(const cJSON *d)
{
    return cJSON_GetArrayItem(item(cJSON_GetArrayItem(item(d, "series"), 0), "pools"), 0);
}

static const cJSON *owner_of(const cJSON *pool, const char *name)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, item(pool, "owners")) if (strcmp(item(o, "name")->valuestring, name) == 0)
        return o;
    fail_msg("no owner %s", name);
    return NULL;
}

static int same_array(const cJSON *a, const cJSON *b)
{
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
        return 0;
    for (int i = 0; i < cJSON_GetArraySize(a); i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i), *y = cJSON_GetArrayItem(b, i);
        if (cJSON_IsNull(x) != cJSON_IsNull(y))
            return 0;
        if (!cJSON_IsNull(x) && fabs(x->valuedouble - y->valuedouble) > 1e-6 * fabs(x->valuedouble))
            return 0;
    }
    return 1;
}

static void jsonl_and_csv_agree(void **state)
{
    (void)state;
    vram_buffer jl = {0}, csv = {0};
    make_series(&jl, &csv, 50, -1, 0, 1);
    vram_report *r = new_report(0, 0), *c = new_report(0, 0);
    vram_report_input_info i1, i2;
    assert_int_equal(add_text(r, "s.jsonl", jl.data, &i1), 0);
    assert_int_equal(add_text(c, "s.csv", csv.data, &i2), 0);
    assert_int_equal(i1.type, VRAM_REPORT_SERIES_JSONL);
    assert_int_equal(i2.type, VRAM_REPORT_SERIES_CSV);
    assert_non_null(strstr(i1.summary, "50 samples over 24.5 s"));
    assert_non_null(strstr(i2.summary, "50 samples over 24.5 s"));
    cJSON *dj = data_of(r), *dc = data_of(c);
    const cJSON *sj = cJSON_GetArrayItem(item(dj, "series"), 0);
    const cJSON *sc = cJSON_GetArrayItem(item(dc, "series"), 0);
    assert_int_equal(num(sj, "points"), 50);
    assert_true(same_array(item(sj, "x"), item(sc, "x")));
    assert_true(same_array(item(sj, "iteration"), item(sc, "iteration")));
    const cJSON *pj = pool0(dj), *pc = pool0(dc);
    for (const char *const *m = (const char *const[]){"live_bytes", "peak_live_bytes",
                                                      "reserved_bytes", "pending_bytes",
                                                      "fragmentation_ratio", "largest_free_bytes",
                                                      NULL};
         *m; m++)
        if (!same_array(item(pj, *m), item(pc, *m)))
            fail_msg("%s differs between JSON Lines and CSV", *m);
    assert_true(same_array(item(owner_of(pj, "a,\"x\""), "live_bytes"),
                           item(owner_of(pc, "a,\"x\""), "live_bytes")));
    /* Owner b is absent from even samples: 0 there, not null. */
    const cJSON *b = item(owner_of(pj, "b"), "live_bytes");
    assert_true(cJSON_IsNumber(cJSON_GetArrayItem(b, 0)));
    assert_int_equal(cJSON_GetArrayItem(b, 0)->valuedouble, 0);
    assert_int_equal(cJSON_GetArrayItem(b, 1)->valuedouble, 5001);
    assert_true(same_array(b, item(owner_of(pc, "b"), "live_bytes")));
    assert_int_equal(num(owner_of(pj, "b"), "budget_bytes"), 8000000);
    assert_true(same_array(item(item(sj, "gpu"), "used_bytes"), item(item(sc, "gpu"), "used_bytes")));
    assert_string_equal(item(item(sj, "gpu"), "name")->valuestring, "NVIDIA H200");
    assert_int_equal(cJSON_GetArrayItem(item(pc, "pending_bytes"), 2)->valuedouble, 8192);
    cJSON_Delete(dj);
    cJSON_Delete(dc);
    vram_report_destroy(r);
    vram_report_destroy(c);
    vram_buffer_free(&jl);
    vram_buffer_free(&csv);
}

/* The CSV's lines with their fields after the first in reverse order
 * (quoted fields kept as they are): the same file with its columns moved. */
static void csv_reverse_columns(const char *in, vram_buffer *out)
{
    while (*in) {
        const char *end = strchr(in, '\n');
        size_t len = end ? (size_t)(end - in) : strlen(in);
        const char *f[32];
        int n[32], nf = 0, quoted = 0;
        const char *start = in;
        for (size_t i = 0; i <= len; i++) {
            if (i < len && in[i] == '"')
                quoted = !quoted;
            if (i == len || (in[i] == ',' && !quoted)) {
                assert_true(nf < 32);
                f[nf] = start;
                n[nf++] = (int)(in + i - start);
                start = in + i + 1;
            }
        }
        buf_printf(out, "%.*s", n[0], f[0]);
        for (int k = nf - 1; k >= 1; k--)
            buf_printf(out, ",%.*s", n[k], f[k]);
        buf_printf(out, "\n");
        in += len + (end != NULL);
    }
}

static cJSON *series0(const cJSON *d) { return cJSON_GetArrayItem(item(d, "series"), 0); }

/* The CSV is read by its header's names: written by a version before
 * pending_bytes, it reads as the same series with no pending bytes (null,
 * not zeros); with its columns in another order, as the same series. */
static void csv_columns_by_name(void **state)
{
    (void)state;
    vram_buffer now = {0}, old = {0}, moved = {0};
    make_series(NULL, &now, 50, -1, 0, 1);
    make_series(NULL, &old, 50, -1, 0, 0);
    csv_reverse_columns(now.data, &moved);
    assert_non_null(strstr(moved.data, "time_s,gpu_total_bytes,gpu_used_bytes,largest_free_bytes,"));
    vram_report *rn = new_report(0, 0), *ro = new_report(0, 0), *rm = new_report(0, 0);
    vram_report_input_info in, io, im;
    assert_int_equal(add_text(rn, "s.csv", now.data, &in), 0);
    assert_int_equal(add_text(ro, "s.csv", old.data, &io), 0);
    assert_int_equal(add_text(rm, "s.csv", moved.data, &im), 0);
    assert_int_equal(io.type, VRAM_REPORT_SERIES_CSV);
    assert_string_equal(in.summary, io.summary);
    assert_string_equal(in.summary, im.summary);
    cJSON *dn = data_of(rn), *dold = data_of(ro), *dm = data_of(rm);
    /* Columns moved: the same series, pending bytes and all. */
    assert_true(cJSON_Compare(series0(dn), series0(dm), 1));
    const cJSON *pending = item(pool0(dn), "pending_bytes");
    assert_int_equal(cJSON_GetArraySize(pending), 50);
    assert_int_equal(cJSON_GetArrayItem(pending, 1)->valuedouble, 4096);
    /* The older format: no pending bytes, everything else the same. */
    assert_true(cJSON_IsNull(item(pool0(dold), "pending_bytes")));
    assert_int_equal(cJSON_GetArraySize(item(pool0(dold), "live_bytes")), 50);
    assert_false(cJSON_Compare(series0(dn), series0(dold), 1));
    assert_true(cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)pool0(dn), "pending_bytes",
                                                       cJSON_CreateNull()));
    assert_true(cJSON_Compare(series0(dn), series0(dold), 1));
    cJSON_Delete(dn);
    cJSON_Delete(dold);
    cJSON_Delete(dm);
    vram_report_destroy(rn);
    vram_report_destroy(ro);
    vram_report_destroy(rm);
    vram_buffer_free(&now);
    vram_buffer_free(&old);
    vram_buffer_free(&moved);
}

static void downsampling_keeps_peaks(void **state)
{
    (void)state;
    /* Exactly max_points samples: all kept. */
    vram_buffer jl = {0};
    make_series(&jl, NULL, 400, -1, 0, 1);
    vram_report *r = new_report(400, 0);
    assert_int_equal(add_text(r, "s.jsonl", jl.data, NULL), 0);
    cJSON *d = data_of(r);
    const cJSON *s = cJSON_GetArrayItem(item(d, "series"), 0);
    assert_int_equal(num(s, "points"), 400);
    assert_false(cJSON_IsTrue(item(s, "downsampled")));
    cJSON_Delete(d);
    vram_report_destroy(r);
    vram_buffer_free(&jl);

    /* 20000 samples with one spike and one dip: at most max_points kept,
     * both extremes among them, x increasing. */
    jl = (vram_buffer){0};
    make_series(&jl, NULL, 20000, 12345, 9e9, 1);
    r = new_report(400, 0);
    vram_report_input_info info;
    assert_int_equal(add_text(r, "s.jsonl", jl.data, &info), 0);
    assert_non_null(strstr(info.summary, "20000 samples"));
    d = data_of(r);
    s = cJSON_GetArrayItem(item(d, "series"), 0);
    int pts = (int)num(s, "points");
    assert_true(pts <= 400 && pts >= 200);
    assert_int_equal(num(s, "samples"), 20000);
    assert_true(cJSON_IsTrue(item(s, "downsampled")));
    const cJSON *live = item(pool0(d), "live_bytes"), *x = item(s, "x");
    double most = 0, least = 1e300;
    for (int i = 0; i < pts; i++) {
        double v = cJSON_GetArrayItem(live, i)->valuedouble;
        most = v > most ? v : most;
        least = v < least ? v : least;
        if (i)
            assert_true(cJSON_GetArrayItem(x, i)->valuedouble > cJSON_GetArrayItem(x, i - 1)->valuedouble);
    }
    assert_true(most == 9e9 + 5000 + 12345); /* sample 12345 is odd: owner b is there */
    assert_true(least == 1000000);
    assert_int_equal(cJSON_GetArraySize(live), pts);
    assert_int_equal(cJSON_GetArraySize(item(owner_of(pool0(d), "b"), "live_bytes")), pts);
    cJSON_Delete(d);
    vram_report_destroy(r);
    vram_buffer_free(&jl);
}

static void alerts_and_restarts(void **state)
{
    (void)state;
    const char *text =
        "{\"type\":\"sample\",\"time_s\":100.0,\"elapsed_s\":0.0,\"iteration\":null,\"pools\":"
        "[{\"pool\":\"p\",\"live_bytes\":1}],\"gpu\":null,\"gpu_unavailable\":\"NVML is not "
        "available: no driver\"}\n"
        "{\"type\":\"alert\",\"time_s\":101.0,\"elapsed_s\":1.0,\"iteration\":null,\"alert\":"
        "\"budget\",\"level\":\"critical\",\"pool\":\"p\",\"owner\":\"cam07\",\"value\":0.97,"
        "\"threshold\":0.95,\"message\":\"owner cam07 at 97% of its budget\"}\n"
        "{\"type\":\"sample\",\"time_s\":102.0,\"elapsed_s\":2.0,\"pools\":[{\"pool\":\"p\","
        "\"live_bytes\":2}]}\n"
        "{\"type\":\"heartbeat\",\"time_s\":102.5}\n"
        "\n"
        "{\"type\":\"sample\",\"time_s\":110.0,\"elapsed_s\":0.5,\"pools\":[{\"pool\":\"p\","
        "\"live_bytes\":3}]}\n";
    vram_report *r = new_report(0, 0);
    assert_int_equal(add_text(r, "a.jsonl", text, NULL), 0);
    cJSON *d = data_of(r);
    const cJSON *s = cJSON_GetArrayItem(item(d, "series"), 0);
    assert_int_equal(num(s, "restarts"), 1);
    assert_int_equal(num(s, "ignored_lines"), 1);
    const cJSON *x = item(s, "x");
    assert_true(cJSON_GetArrayItem(x, 2)->valuedouble == 110.0);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(item(s, "iteration"), 0)));
    assert_string_equal(item(s, "gpu_unavailable")->valuestring, "NVML is not available: no driver");
    assert_true(cJSON_IsNull(item(s, "gpu")));
    const cJSON *a = cJSON_GetArrayItem(item(s, "alerts"), 0);
    assert_string_equal(item(a, "owner")->valuestring, "cam07");
    assert_int_equal(num(a, "x"), 101);
    assert_int_equal(num(a, "line"), 2);
    cJSON_Delete(d);
    vram_report_destroy(r);
}

/* ---- recognising and refusing ---------------------------------------- */

static const char oom_json[] =
    "{\"type\":\"oom\",\"time_s\":1764456100.5,\"pool\":\"inference\",\"request\":{"
    "\"size_bytes\":25165824,\"owner\":\"cam07\",\"kind\":\"activations\",\"stream\":\"0x1\","
    "\"error\":\"VRAM_EBUDGET\",\"message\":\"budget of owner \\\"cam07\\\" exceeded\"},"
    "\"owners\":[{\"owner\":\"cam07\",\"live_bytes\":241172480,\"peak_live_bytes\":241172480,"
    "\"budget_bytes\":268435456}],\"kinds\":[{\"kind\":\"activations\",\"live_bytes\":1}],"
    "\"reserved_bytes\":1,\"live_bytes\":1,\"fragmentation_ratio\":0.1,\"largest_free_bytes\":1,"
    "\"gpu\":null,\"gpu_unavailable\":\"NVML is not available\",\"trend\":null,"
    "\"last_events\":[{\"action\":\"allocate failure\",\"size_bytes\":25165824,\"owner\":"
    "\"cam07\",\"kind\":\"activations\",\"stream\":\"0x1\",\"address\":\"0x0\",\"time_s\":1.0}],"
    "\"snapshot_path\":\"/tmp/x.snapshot.json\",\"diagnosis\":{\"cause\":\"exceeds_configured\","
    "\"line\":\"cam07 asked for 24.0 MiB with 230.0 MiB of its 256.0 MiB budget live\"}}";

static void recognised_by_content(void **state)
{
    (void)state;
    vram_report *r = new_report(0, 0);
    vram_report_input_info info;
    assert_int_equal(add_text(r, "no-extension", oom_json, &info), 0);
    assert_int_equal(info.type, VRAM_REPORT_OOM);
    assert_non_null(strstr(info.summary, "24.0 MiB for owner \"cam07\" refused (VRAM_EBUDGET)"));
    assert_non_null(strstr(info.summary, "230.0 MiB of its 256.0 MiB"));
    /* A series named .json is still a series. */
    assert_int_equal(add_text(r, "looks.json",
                              "\xEF\xBB\xBF{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,"
                              "\"pools\":[]}\r\n",
                              &info),
                     0);
    assert_int_equal(info.type, VRAM_REPORT_SERIES_JSONL);
    assert_int_equal(vram_report_inputs(r), 2);
    cJSON *d = data_of(r);
    const cJSON *o = cJSON_GetArrayItem(item(d, "ooms"), 0);
    assert_string_equal(item(item(o, "diagnosis"), "cause")->valuestring, "exceeds_configured");
    assert_int_equal(cJSON_GetArraySize(item(o, "last_events")), 1);
    assert_string_equal(cJSON_GetArrayItem(item(d, "inputs"), 0)->child->valuestring,
                        "no-extension");
    cJSON_Delete(d);
    vram_report_destroy(r);
}

static void malformed_inputs(void **state)
{
    (void)state;
    refuse("notes.txt", "hello\nworld\n", "notes.txt:1: not a report input", "starts with \"hello\"");
    refuse("blank.json", "\n  \n", "blank.json: empty", NULL);
    refuse("empty", "", "empty: empty", NULL);
    /* Truncated documents: where they stop. */
    char cut[sizeof oom_json];
    memcpy(cut, oom_json, 200);
    cut[200] = '\0';
    refuse("oom.json", cut, "oom.json:1:201: the JSON ends early (truncated?)", NULL);
    refuse("snap.json", "{\n  \"pool\": \"p\",\n  \"blocks\": [\n    {\"address\": \"0x10\",",
           "snap.json:4:", "ends early");
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[]}\n{\"pool\":\"q\"}",
           "snap.json:2:1: text after the end", NULL);
    refuse("bad.json", "{\"pool\": p}", "bad.json:1:10: malformed JSON at \"p}\"", NULL);
    /* Members of the wrong type or missing, named by their path. */
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[{\"address\":\"0x10\",\"size\":\"64\","
                        "\"state\":\"free\"}]}",
           "snap.json: blocks[0].size is the string \"64\", expected a number", NULL);
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[{\"address\":\"16\",\"size\":64,"
                        "\"state\":\"free\"}]}",
           "blocks[0].address is \"16\", expected a hexadecimal address", NULL);
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[{\"address\":\"0x10\",\"size\":64,"
                        "\"state\":\"live\",\"owner\":null}]}",
           "blocks[0].owner is missing for a live block", NULL);
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[{\"address\":\"0x100\",\"size\":512,"
                        "\"state\":\"free\"},{\"address\":\"0x200\",\"size\":64,\"state\":"
                        "\"zombie\"}]}",
           "blocks[1].state is \"zombie\", expected live, pending or free", NULL);
    refuse("snap.json", "{\"pool\":\"p\",\"blocks\":[{\"address\":\"0x100\",\"size\":512,"
                        "\"state\":\"free\"},{\"address\":\"0x200\",\"size\":64,\"state\":"
                        "\"free\"}]}",
           "blocks overlap: 0x100 (512 bytes) and 0x200 (64 bytes)", NULL);
    refuse("x.json", "{\"pool\":\"p\"}", "x.json: is a JSON object but neither a pool snapshot",
           NULL);
    char *no_line = strdup(oom_json);
    char *at = strstr(no_line, "\"line\":");
    memcpy(at, "\"lime\"", 6);
    refuse("oom.json", no_line, "oom.json: diagnosis.line is missing", NULL);
    free(no_line);
    /* JSON Lines: the line of the bad sample. */
    refuse("s.jsonl",
           "{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,\"pools\":[]}\n"
           "{\"type\":\"sample\",\"time_s\":2,\"elapsed_s\":1,\"pools\":[]}\n"
           "{\"type\":\"sample\",\"time_s\":3,\"elapsed_s\":2,\"pools\":[{\"pool\":\"p\","
           "\"live_bytes\":\"12\"}]}\n",
           "s.jsonl:3: pools[0].live_bytes is the string \"12\", expected a number", NULL);
    refuse("s.jsonl",
           "{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,\"pools\":[]}\n"
           "{\"type\":\"sample\",\"time_s\":2,\"elap",
           "s.jsonl:2:", "ends early (truncated?)");
    refuse("s.jsonl",
           "{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,\"pools\":[{\"pool\":\"p\","
           "\"live_bytes\":1,\"owners\":[{\"owner\":\"a\",\"live_bytes\":1},{\"owner\":\"a\","
           "\"live_bytes\":2}]}]}\n",
           "s.jsonl:1: owner \"a\" of pool \"p\" is listed twice", NULL);
    refuse("s.jsonl",
           "{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,\"pools\":[{\"pool\":\"p\","
           "\"live_bytes\":-5}]}\n",
           "s.jsonl:1: pools[0].live_bytes is -5, expected a number >= 0", NULL);
    refuse("s.jsonl",
           "{\"type\":\"sample\",\"time_s\":100,\"elapsed_s\":50,\"pools\":[]}\n"
           "{\"type\":\"sample\",\"time_s\":90,\"elapsed_s\":1,\"pools\":[]}\n",
           "s.jsonl:2: elapsed_s went back from 50 to 1", NULL);
    refuse("s.jsonl", "{\"type\":\"alert\",\"time_s\":1,\"elapsed_s\":0}\n",
           "s.jsonl:1: alert is missing", NULL);
    refuse("s.jsonl", "{\"type\":\"heartbeat\"}\n", "s.jsonl: no samples in 1 lines", NULL);
    /* CSV: the header names every column once (any order; pending_bytes,
     * which older versions lack, may be absent), then as many fields a row. */
    refuse("s.csv",
           "time_s,elapsed_s,iteration,pool,owner_name,kind,live_bytes,peak_live_bytes,"
           "reserved_bytes,pending_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes,"
           "gpu_total_bytes\n",
           "s.csv:1: column 5 of the header is \"owner_name\", expected \"owner\"", NULL);
    refuse("s.csv", "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes\n",
           "s.csv:1: the header lacks the columns \"peak_live_bytes\", \"reserved_bytes\", "
           "\"fragmentation_ratio\", \"largest_free_bytes\", \"gpu_used_bytes\", "
           "\"gpu_total_bytes\" (the columns are " CSV_COLUMNS " in any order",
           "pending_bytes may be absent");
    refuse("s.csv",
           "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,reserved_bytes,"
           "pending_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes\n",
           "s.csv:1: the header lacks the column \"gpu_total_bytes\"", NULL);
    /* An unknown column, a repeated one, one header twice over. */
    refuse("s.csv", CSV_COLUMNS ",extra\n",
           "s.csv:1: column 15 of the header is \"extra\", not a column of the sample series",
           NULL);
    refuse("s.csv", CSV_COLUMNS_OLD ",pending_bytes,tenure_bytes\n",
           "s.csv:1: column 15 of the header is \"tenure_bytes\", not a column", NULL);
    refuse("s.csv",
           "time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,reserved_bytes,"
           "reserved_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes,gpu_total_bytes\n",
           "s.csv:1: column 10 of the header is \"reserved_bytes\" again (as column 9", NULL);
    refuse("s.csv", CSV_COLUMNS "," CSV_COLUMNS "\n",
           "s.csv:1: column 15 of the header is \"time_s\" again (as column 1", NULL);
    refuse("s.csv", CSV_COLUMNS_OLD ",pending_bytes,pending_bytes\n",
           "s.csv:1: column 15 of the header is \"pending_bytes\" again (as column 14", NULL);
    /* Rows: as many fields as the header has columns. */
    refuse("s.csv",
           CSV_COLUMNS "\n"
           "1,0,,p,,,100,100,200,0,0,0,,\n"
           "2,1,,p,,,100,100,200,0,0,0,\n",
           "s.csv:3: 13 fields, expected 14", NULL);
    refuse("s.csv",
           CSV_COLUMNS_OLD "\n"
           "1,0,,p,,,100,100,200,0,0,,\n"
           "2,1,,p,,,100,100,200,0,0,0,,\n",
           "s.csv:3: more than 13 fields, expected 13", NULL);
    refuse("s.csv",
           CSV_COLUMNS "\n"
           "1,0,,p,,,lots,100,200,0,0,0,,\n",
           "s.csv:2: live_bytes is \"lots\", expected a number", NULL);
    /* A field is named by its column wherever the header puts it. */
    refuse("s.csv",
           "time_s,pending_bytes,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,"
           "reserved_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes,gpu_total_bytes\n"
           "1,-4096,0,,p,,,100,100,200,0,0,,\n",
           "s.csv:2: pending_bytes is -4096, expected a number >= 0", NULL);
    refuse("s.csv",
           CSV_COLUMNS "\n"
           "1,0,,p,cam,,100,,,,,,,\n",
           "s.csv:2: the owner row of pool \"p\" comes before the pool's total row", NULL);
    refuse("s.csv",
           CSV_COLUMNS "\n"
           "1,0,,p,,,100,,,,,,,\n1,0,,p,\"cam,,100,,,,,,,\n",
           "s.csv:3: field 5: a quote is not closed", NULL);
}

/* ---- the page -------------------------------------------------------- */

static void page_escapes_and_writes_atomically(void **state)
{
    (void)state;
    vram_report *r = new_report(0, 0);
    const char *evil =
        "{\"type\":\"sample\",\"time_s\":1,\"elapsed_s\":0,\"pools\":[{\"pool\":"
        "\"</script><script>window.__pwned=1</script>\",\"live_bytes\":1,\"owners\":[{\"owner\":"
        "\"<!-- &amp;\",\"live_bytes\":1}]}]}\n";
    assert_int_equal(add_text(r, "evil.jsonl", evil, NULL), 0);
    vram_buffer page = {0};
    int rc = vram_report_print(r, vram_write_buffer, &page, 0);
    if (rc == VRAM_ENOSYS) {
        /* A build without the page's JavaScript says how to get it. */
        assert_non_null(strstr(vram_last_error(), "scripts/web_deps.sh"));
    } else {
        assert_int_equal(rc, 0);
        assert_null(strstr(page.data, "@VRAM_REPORT_DATA@"));
        const char *data = strstr(page.data, "id=\"vram-report-data\">");
        assert_non_null(data);
        const char *end = strstr(data, "</script>");
        assert_non_null(end);
        /* Inside the data, no '<' at all: the pool's name is escaped. */
        for (const char *p = data + strlen("id=\"vram-report-data\">"); p < end; p++)
            assert_true(*p != '<' && *p != '>' && *p != '&');
        assert_non_null(strstr(data, "\\u003c/script\\u003e\\u003cscript\\u003ewindow.__pwned"));
        assert_non_null(strstr(page.data, "uPlot"));
    }
    vram_buffer_free(&page);

    char dir[] = "/tmp/vram-report-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/report.html", dir);
    snprintf(bad, sizeof bad, "%s/missing/report.html", dir);
    assert_int_equal(vram_report_write(r, bad), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "missing/report.html"));
    rc = vram_report_write(r, path);
    struct stat st;
    if (rc == 0) {
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size > 1000);
        assert_int_equal(st.st_mode & 0777, 0644);
    } else {
        assert_int_equal(rc, VRAM_ENOSYS);
        assert_int_not_equal(stat(path, &st), 0);
    }
    /* Whatever happened, no temporary file is left. */
    DIR *dd = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dd)))
        if (e->d_name[0] != '.') {
            assert_string_equal(e->d_name, "report.html");
            files++;
        }
    closedir(dd);
    assert_int_equal(files, rc == 0);
    unlink(path);
    rmdir(dir);
    vram_report_destroy(r);
}

/* Files are read plain or gzip through the core's reader: a whole gzip
 * series reads as its plain text does, one cut short is refused as
 * truncated (it used to read as the samples up to the cut). */
static void gzip_inputs(void **state)
{
    (void)state;
    vram_buffer jl = {0};
    make_series(&jl, NULL, 400, -1, 0, 1);
    char dir[] = "/tmp/vram-report-gz-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/s.jsonl.gz", dir);
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, jl.data, (unsigned)jl.len), (int)jl.len);
    assert_int_equal(gzclose(gz), Z_OK);

    vram_report *r = new_report(0, 0);
    vram_report_input_info info;
    assert_int_equal(vram_report_add_file(r, path, &info), 0);
    assert_int_equal(info.type, VRAM_REPORT_SERIES_JSONL);
    assert_non_null(strstr(info.summary, "400 samples"));
    vram_report_destroy(r);

    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    r = new_report(0, 0);
    assert_int_equal(vram_report_add_file(r, path, &info), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "s.jsonl.gz: the gzip data is truncated"));
    vram_report_destroy(r);
    unlink(path);
    rmdir(dir);
    vram_buffer_free(&jl);
}

static void options_and_arguments(void **state)
{
    (void)state;
    vram_report_opts o;
    vram_report_opts_init(&o);
    o.max_points = 4;
    vram_report *r = (vram_report *)1;
    assert_int_equal(vram_report_create(&o, &r), VRAM_EINVAL);
    assert_null(r);
    assert_non_null(strstr(vram_last_error(), "at least 8 points"));
    assert_int_equal(vram_report_create(NULL, NULL), VRAM_EINVAL);
    assert_int_equal(vram_report_create(NULL, &r), 0);
    assert_int_equal(vram_report_add_file(r, "/nonexistent/s.jsonl", NULL), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "cannot open /nonexistent/s.jsonl"));
    assert_int_equal(vram_report_add_file(r, "/tmp", NULL), VRAM_EIO);
    assert_non_null(strstr(vram_last_error(), "/tmp is a directory"));
    assert_int_equal(vram_report_add_data(r, NULL, "", 0, NULL), VRAM_EINVAL);
    cJSON *d = data_of(r);
    assert_string_equal(item(d, "title")->valuestring, "vramkit report");
    cJSON_Delete(d);
    vram_report_destroy(r);
    vram_report_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshot_from_pool),
        cmocka_unit_test(jsonl_and_csv_agree),
        cmocka_unit_test(csv_columns_by_name),
        cmocka_unit_test(downsampling_keeps_peaks),
        cmocka_unit_test(alerts_and_restarts),
        cmocka_unit_test(recognised_by_content),
        cmocka_unit_test(malformed_inputs),
        cmocka_unit_test(page_escapes_and_writes_atomically),
        cmocka_unit_test(gzip_inputs),
        cmocka_unit_test(options_and_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
